"""MCMC-B&S: Bernstein & Sheldon (2019)'s Gibbs sampler, distributed and (eps, delta)-DP
(paper appendix C.1).

Each holder j releases ss_hat_j = [vech(S_j), z_j, y_j^T y_j] + Gaussian noise (V_j), made by
``bayesdp.release(..., include_yty=True)``. The latent sums ss_j get the central-limit prior
N(n_j mu, n_j Sigma), with (mu, Sigma) the exact moments of one row's statistic
(:func:`bayesdp.paper.bs_model.row_moments`). One sweep, in the authors' order:

1. Sigma_x ~ InvWishart(XXT + Lambda, kappa + n),  XXT = nearest_psd(sum_j S_j) + shift I
   (from the previous sweep; the authors use shift = 1);
2. (mu, Sigma) = row moments at (Sigma_x, theta, sigma_y^2);
3. for every holder, ss_j ~ N(n_j mu, n_j Sigma) x N(ss_hat_j; ss_j, V_j), the Gaussian product,
   drawn by Matheron's rule (prior draw, then a correction through (V_j + n_j Sigma)^{-1}) so no
   covariance is formed by subtraction;
4. (theta, sigma_y^2) from the normal-inverse-gamma posterior given XXT (step 1's form, from the new
   S_j), X^T y = sum_j z_j, y^T y = sum_j u_j: Lambda_n = XXT + Lambda_0,
   mu_n = Lambda_n^{-1}(X^T y + Lambda_0 m), a_n = a + n/2,
   b_n = max(b + (y^T y + m^T Lambda_0 m - mu_n^T Lambda_n mu_n)/2, b),
   sigma_y^2 ~ IG(a_n, b_n), theta ~ N(mu_n, sigma_y^2 Lambda_n^{-1}).

Lambda_0 = b/(a-1) I (the authors' and Bernstein & Sheldon's NIG prior; it is not the
N(m, C) prior of the other methods). Every sweep costs O(G D'^3 + J D'^2) = O(G d^6 + J d^4),
D' = d(d+1)/2 + d + 1, where G <= J is the number of distinct (n_j, V_j): step 3 factors
V_j + n_j Sigma once per group of holders that share it (at most 2 groups for an even split).
The sweep is a pure function iterated by ``jax.lax.scan``; chains are ``vmap``-ed, and so are
releases of one shape in ``bayesdp.inference.fit_batch`` (:func:`run_bs_batch`).

What the sweep targets. Step 3 is an exact Gibbs step of :func:`bayesdp.paper.bs_model.bs_model`: it
draws each ss_j from that model's conditional given (Sigma_x, theta, sigma_y^2, ss_hat_j)
(tests/paper/test_bs.py checks it against the model's log density). Steps 1 and 4 are not
conditionals of ``bs_model``: they are the conditionals of the exact Gaussian-row model
(x_i ~ N(0, Sigma_x), y_i ~ N(x_i^T theta, sigma_y^2), the NIG prior) given the statistics
sum_j ss_j as if they were that model's sufficient statistics, with S replaced by
nearest_psd(S) + shift I. Under ``bs_model`` the conditionals of Sigma_x and of
(theta, sigma_y^2) also carry the central-limit
factors N(ss_j; n_j mu, n_j Sigma), whose mean and covariance depend on all three, so the sweep
does not leave ``bs_model``'s posterior invariant; it is the sampler of appendix C.1 as
published, kept for comparison.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from .._jax import enable_x64
from ..errors import BayesdpInputError
from ..inference import closed_form
from ..inference.compilation_cache import default_compilation_cache
from ..inference.log_likelihood import Likelihood
from ..inference.methods import MethodResult
from ..releases import layout
from . import bs_model

# JAX is imported inside the functions that use it: importing bayesdp.paper, as `bayesdp --help`
# does, loads no JAX


def sample_inv_wishart(key, scale, df):
    """One draw of InvWishart(scale, df) (mean scale / (df - d - 1)) by the Bartlett decomposition.

    Sigma^{-1} ~ Wishart(scale^{-1}, df); with scale = R R^T and A the Bartlett factor
    (A_ii^2 ~ chi2(df - i), A_ij ~ N(0, 1) below the diagonal), Sigma = (R A^{-T})(R A^{-T})^T.
    """
    import jax
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    d = scale.shape[-1]
    k1, k2 = jax.random.split(key)
    shapes = (df - jnp.arange(d)) / 2.0
    diag = jnp.sqrt(2.0 * jax.random.gamma(k1, shapes, dtype=scale.dtype))
    low = jnp.tril(jax.random.normal(k2, (d, d), dtype=scale.dtype), -1)
    A = low + jnp.diag(diag)
    R = jnp.linalg.cholesky(0.5 * (scale + scale.T))
    Ainv = solve_triangular(A, jnp.eye(d, dtype=scale.dtype), lower=True)
    B = R @ Ainv.T
    return B @ B.T


def holder_factor(Sig, V, n):
    """The Cholesky factor of V + n Sigma, the matrix step 3 solves with for a holder of n
    rows and noise covariance V (``Sig``: Sigma = Sig_chol Sig_chol^T as the sweep forms it)."""
    import jax.numpy as jnp

    M = V + n * Sig
    return jnp.linalg.cholesky(0.5 * (M + M.T))


def _normals(key, Dp, dtype):
    """The two standard normal D'-vectors step 3 draws for one holder (prior, noise)."""
    import jax

    k1, k2 = jax.random.split(key)
    return (jax.random.normal(k1, (Dp,), dtype=dtype), jax.random.normal(k2, (Dp,), dtype=dtype))


def _draw_holder(z1, z2, mu, Sig_chol, ss_hat, V_half, n, Mc):
    """:func:`draw_stats` for one holder (vectors, its own factor ``Mc``)."""
    import jax.numpy as jnp
    from jax.scipy.linalg import cho_solve

    prior = n * mu + jnp.sqrt(n) * (Sig_chol @ z1)
    corr = cho_solve((Mc, True), ss_hat - prior - V_half @ z2)
    return prior + n * (Sig_chol @ (Sig_chol.T @ corr))


def draw_stats(keys, mu, Sig_chol, ss_hat, V_half, n, Mc, group):
    """Step 3 for the J holders at once: ss_j ~ N(n_j mu, n_j Sigma) x N(ss_hat_j; ss_j, V_j)
    (Sigma = Sig_chol Sig_chol^T, V_j = H H^T), by Matheron's rule: a prior draw ss0_j and a
    noise draw e_j, then ss_j = ss0_j + n_j Sigma (V_j + n_j Sigma)^{-1} (ss_hat_j - ss0_j - e_j).

    ``keys`` (J, 2), ``ss_hat`` (J, D'), ``n`` (J,); ``V_half`` and ``Mc`` (G, D', D') hold H and
    the factor :func:`holder_factor` gives for each group of holders sharing (n_j, V_j), and
    ``group`` (J,) holder j's group (:func:`_holder_groups`). With one group per holder each
    holder is drawn on its own (vectors); with fewer groups the holders' vectors are stacked
    into matrices and each group's factor solves all of them at once (each holder keeps its own
    group's column). Same draws as holder by holder.
    """
    import jax
    import jax.numpy as jnp
    from jax.scipy.linalg import cho_solve

    J, G = ss_hat.shape[0], Mc.shape[0]
    Z1, Z2 = jax.vmap(lambda k: _normals(k, mu.shape[-1], mu.dtype))(keys)  # (J, D') each
    if G == J:  # group = 0..J-1
        return jax.vmap(_draw_holder, in_axes=(0, 0, None, None, 0, 0, 0, 0))(
            Z1, Z2, mu, Sig_chol, ss_hat, V_half, n, Mc)
    holders = jnp.arange(J)
    prior = n[:, None] * mu + jnp.sqrt(n)[:, None] * (Z1 @ Sig_chol.T)
    noise = jnp.einsum("gab,jb->gja", V_half, Z2)[group, holders]
    resid = (ss_hat - prior - noise).T  # (D', J)
    corr = jax.vmap(lambda M: cho_solve((M, True), resid))(Mc)[group, :, holders]
    return prior + n[:, None] * ((corr @ Sig_chol) @ Sig_chol.T)


def _build_sampler(d, num_iter, num_keep, batched=False):
    """A jitted function running chains of ``num_iter`` sweeps and keeping the last ``num_keep``:
    ``(keys (C, 2), init, data)`` for one release, or with ``batched`` ``(keys (R, C, 2), init,
    data)`` with init and data stacked over R releases (one compiled program for all)."""
    import jax
    import jax.numpy as jnp
    from jax.scipy.linalg import cho_solve, solve_triangular

    Dp = layout.stat_dim(d, with_yty=True)

    def run(key, init, data):
        ss_hat, V, V_half, n, Lam, kappa, L0, m, a, b, shift, first, group = data
        n_tot = jnp.sum(n)
        J = ss_hat.shape[0]
        eye = jnp.eye(d, dtype=ss_hat.dtype)

        def sweep(state, key):
            XXT, theta, s2 = state
            k1, k2, k3, k4 = jax.random.split(key, 4)
            Sigma_x = sample_inv_wishart(k1, XXT + Lam, kappa + n_tot)
            mu, Sig = bs_model.row_moments(Sigma_x, theta, s2)
            jit_ = 1e-12 * jnp.mean(jnp.diag(Sig))
            Sig_chol = jnp.linalg.cholesky(Sig + jit_ * jnp.eye(Dp, dtype=Sig.dtype))
            # one factor per group of holders with the same (n_j, V_j) (:func:`_holder_groups`)
            Mc = jax.vmap(holder_factor, in_axes=(None, 0, 0))(Sig_chol @ Sig_chol.T, V[first],
                                                               n[first])
            ss = draw_stats(jax.random.split(k2, J), mu, Sig_chol, ss_hat, V_half[first], n,
                            Mc, group)
            S, z, yy = bs_model.stats_to_parts(jnp.sum(ss, axis=0), d)
            XXT = closed_form.nearest_psd(S) + shift * eye
            Ln = XXT + L0
            Lc = jnp.linalg.cholesky(0.5 * (Ln + Ln.T))
            mu_n = cho_solve((Lc, True), z + L0 @ m)
            a_n = a + n_tot / 2.0
            b_n = jnp.maximum(b + 0.5 * (yy + m @ L0 @ m - mu_n @ Ln @ mu_n), b)
            s2 = b_n / jax.random.gamma(k3, a_n, dtype=ss_hat.dtype)
            eps = jax.random.normal(k4, (d,), dtype=ss_hat.dtype)
            theta = mu_n + jnp.sqrt(s2) * solve_triangular(Lc.T, eps, lower=False)
            return (XXT, theta, s2), (theta, s2, Sigma_x)

        keys = jax.random.split(key, num_iter)
        warm = num_iter - num_keep  # the warm-up sweeps keep nothing
        state, _ = jax.lax.scan(lambda st, k: (sweep(st, k)[0], None), init, keys[:warm])
        return jax.lax.scan(sweep, state, keys[warm:])[1]

    chains = jax.vmap(run, in_axes=(0, None, None))
    return jax.jit(jax.vmap(chains) if batched else chains)


_SAMPLERS: OrderedDict = OrderedDict()
SAMPLER_CACHE_SIZE = 2
"""Compiled B&S samplers kept, one per (d, iterations, kept draws, batched); the least recently
used beyond this are dropped and their compiled code cleared (``clear_cache`` of the jitted
function), which JAX would otherwise keep for good."""


def _cached_sampler(key):
    sampler = _SAMPLERS.pop(key, None)
    if sampler is None:
        sampler = _build_sampler(*key)
    _SAMPLERS[key] = sampler
    while len(_SAMPLERS) > SAMPLER_CACHE_SIZE:  # the jitted function's own executables go too
        _SAMPLERS.popitem(last=False)[1].clear_cache()
    return sampler


def _psd_sqrt(V):
    """A square root H (H H^T = V) of a PSD matrix, via eigh (V may be singular)."""
    w, E = np.linalg.eigh(0.5 * (V + V.T))
    return E * np.sqrt(np.maximum(w, 0.0))


def _holder_groups(n, V, share=True):
    """Holders whose step-3 matrix V_j + n_j Sigma is the same: ``first[g]`` is the first
    holder of group g and ``group[j]`` holder j's group. An even split has at most two
    distinct n_j (they differ by one row at most) and one noise covariance, so two Cholesky
    factors per sweep serve all J holders instead of one per holder (the cost:
    docs/evidence/performance.md, "`bs` (MCMC-B&S)"). ``share=False``: one group per holder."""
    first, group = [], []
    for j in range(len(n)):
        g = next((g for g, f in enumerate(first)
                  if share and n[j] == n[f] and np.array_equal(V[j], V[f])), None)
        if g is None:
            g = len(first)
            first.append(j)
        group.append(g)
    return np.asarray(first, dtype=np.int32), np.asarray(group, dtype=np.int32)


def _setup(release, priors, psd_shift, init_sigma_y2, Lambda0):
    """The checked inputs of one release's chains: ``(init, data, attrs)``, init the starting
    (XXT, theta, sigma_y^2) and data the arrays the sweep reads (see :func:`_build_sampler`)."""
    ss_hat = bs_model.release_stats(release)  # raises if no y^T y
    if not float(psd_shift) >= 0:
        raise BayesdpInputError(f"psd_shift must be >= 0, got {psd_shift!r}")
    d = release.d
    V = layout.noise_covariance(release, with_yty=True)
    V_half = np.stack([_psd_sqrt(v) for v in V])
    L0 = closed_form.nig_precision(priors) if Lambda0 is None else np.asarray(Lambda0, float)
    if L0.shape != (d, d):
        raise BayesdpInputError(f"Lambda0 must be {d} x {d}, got shape {L0.shape}")
    if init_sigma_y2 is None:
        init_sigma_y2 = release.bounds[1] / 3.0 if release.bounds is not None else 1.0 / 3.0
    if not float(init_sigma_y2) > 0:
        raise BayesdpInputError(f"init_sigma_y2 must be > 0, got {init_sigma_y2!r}")
    XXT0 = closed_form.nearest_psd(release.S_hat.sum(axis=0)) + float(psd_shift) * np.eye(d)
    init = (XXT0, np.asarray(priors.m, dtype=np.float64) * 0.0, np.float64(init_sigma_y2))
    data = tuple(np.asarray(x, dtype=np.float64) for x in (
        ss_hat, V, V_half, np.asarray(release.n, float), priors.Lambda, priors.kappa, L0,
        priors.m, priors.a, priors.b, float(psd_shift)))
    data += _holder_groups(np.asarray(release.n), V)
    attrs = {"psd_shift": float(psd_shift), "init_sigma_y2": float(init_sigma_y2),
             "bs_prior": "NIG, Lambda0 = b/(a-1) I" if Lambda0 is None else "NIG, given Lambda0"}
    return init, data, attrs


def _chain_keys(seed, num_chains):
    import jax

    return jax.random.split(jax.random.PRNGKey(int(seed) % (2**32)), num_chains)


def _result(theta, s2, Sx, attrs, num_iter):
    return MethodResult(
        posterior={"theta": np.asarray(theta), "sigma_y2": np.asarray(s2),
                   "Sigma_x": np.asarray(Sx)},
        attrs={**attrs, "num_iterations": int(num_iter)})


#: psd_shift: the +I the authors add to nearest_psd(sum S_j) (0 drops it); init_sigma_y2: the
#: start of sigma_y^2 (None: B_y/3 as in the authors' code, or 1/3 without bounds); Lambda0: the
#: NIG prior precision (None: b/(a-1) I)
OPTIONS = {"psd_shift": 1.0, "init_sigma_y2": None, "Lambda0": None}


def run_bs(release, priors, *, seed, num_samples, num_chains, num_warmup, progress_bar,
           psd_shift, init_sigma_y2, Lambda0):
    """Run MCMC-B&S on a release made with ``include_yty=True`` (see module docstring), options
    :data:`OPTIONS`; numpyro's progress bar is not drawn (one compiled loop)."""
    enable_x64()
    default_compilation_cache()
    init, data, attrs = _setup(release, priors, psd_shift, init_sigma_y2, Lambda0)
    num_iter = num_warmup + num_samples
    sampler = _cached_sampler((release.d, num_iter, num_samples, False))
    theta, s2, Sx = sampler(_chain_keys(seed, num_chains), init, data)
    return _result(theta, s2, Sx, attrs, num_iter)


def run_bs_batch(releases, priors_list, *, seeds, num_samples, num_chains, num_warmup,
                 progress_bar, psd_shift, init_sigma_y2, Lambda0):
    """:func:`run_bs` for many releases of one shape (J, d) in one compiled program: the
    chains of release r start from its own inputs and key (those :func:`run_bs` gives it for
    seeds[r]), vmapped over the releases. Options as :func:`run_bs`, the same for all."""
    enable_x64()
    default_compilation_cache()
    import jax

    setups = [_setup(r, p, psd_shift, init_sigma_y2, Lambda0)
              for r, p in zip(releases, priors_list)]
    if len({len(s[1][-2]) for s in setups}) > 1:  # numbers of shared factors differ: none shared
        setups = [(init, data[:-2] + _holder_groups(data[3], data[1], share=False), attrs)
                  for init, data, attrs in setups]
    init, data = (jax.tree.map(lambda *xs: np.stack(xs), *[s[k] for s in setups])
                  for k in (0, 1))
    keys = np.stack([np.asarray(_chain_keys(s, num_chains)) for s in seeds])
    num_iter = num_warmup + num_samples
    sampler = _cached_sampler((releases[0].d, num_iter, num_samples, True))
    theta, s2, Sx = (np.asarray(a) for a in sampler(keys, init, data))
    return [_result(theta[i], s2[i], Sx[i], s[2], num_iter) for i, s in enumerate(setups)]


def likelihood(release, priors, result):
    """Each holder's log-likelihood of an MCMC-B&S fit (:mod:`bayesdp.inference.log_likelihood`):
    the Gaussian of ss_hat_j with ss_j integrated out of ``bs_model``
    (:func:`~bayesdp.paper.bs_model.bs_marginal_model`): log N(ss_hat_j; n_j mu, n_j Sigma + V_j),
    (mu, Sigma) the row moments at the draw."""
    ss_hat = bs_model.release_stats(release)
    V = layout.noise_covariance(release, with_yty=True)
    data = tuple(np.asarray(x, np.float64) for x in (ss_hat, V, np.asarray(release.n, float)))
    samples = {k: result.posterior[k] for k in ("Sigma_x", "theta", "sigma_y2")}
    return Likelihood(_marginal_model, data, samples, ("ss_hat",), ("ss_hat",),
                      width=layout.stat_dim(release.d, True), to_release=_to_release)


def _marginal_model(data):
    """:func:`~bayesdp.paper.bs_model.bs_marginal_model` called with one argument, as the
    log-likelihood's evaluator calls models: ``data`` = (ss_hat, noise_cov, n), the latents
    without priors (the posterior draws are substituted)."""
    bs_model.bs_marginal_model(*data)


def _to_release(predictive, d):
    """Drawn ss_hat (draws, J, D') as the release's S_hat and z_hat."""
    S, z, _ = layout.unpack_stats(predictive["ss_hat"], d)
    return {"S_hat": S, "z_hat": z}
