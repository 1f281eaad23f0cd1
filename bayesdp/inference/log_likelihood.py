"""Each holder's log-likelihood and the posterior predictive of the released statistics, for
ArviZ's ``log_likelihood`` and ``posterior_predictive`` groups (``az.loo``, ``az.waic``,
``az.compare``, ``az.plot_ppc``).

Both are evaluated from the numpyro model functions of :mod:`bayesdp.models` (the single source
of truth for the joint density) with the posterior draws substituted for the latent sites:
``numpyro.infer.util.log_likelihood`` gives the log density of every observed site, and the same
model run with its observations set to None draws new ones. Which model, and what holder j's
entry is, by method (docs/methods.md, "Model checking and comparison"):

- fixedS methods ("fixeds", "fixeds-paper", "nuts-fixeds"): :func:`fixeds_model` with the data
  the sampler conditioned on; holder j's entry is log N(z_hat_j; S_j theta, sigma_y^2 S_j +
  Sigma_z,j) at S_j fixed.
- "fast": the same model with sigma_y^2 held at the fit's plug-in value and S_j, the noise of
  z_hat given S as the fit used them.
- normalX methods ("normalx", "nuts-normalx", "normalx-paper"): :func:`normalx_model` (or
  the intercept model for a release with an intercept); holder j's entry is the density of
  both its statistics, log p(S_hat_j | S_j) + log p(z_hat_j | S_j, theta, sigma_y^2), given the
  drawn S_j. The non-centred models have the same density; their draws of S are used.
- "eiv": :func:`eiv_model` conditions on the holders' sums, not on each holder. Holder j's entry
  is the density of z_hat_j under the same model given holder j's statistics alone: log
  N(z_hat_j; S_hat_j theta, sigma_y^2 S_+,j + Var(e_z,j - E_j t)), with the fit's plug-in t for
  the S noise. The sum of these entries is not the likelihood eiv's posterior conditions on
  (that of the pooled z_hat), so leave-one-holder-out importance weights are an approximation
  to refitting without the holder; the Pareto k of ``az.loo`` says when it fails.
- "bs" (:mod:`bayesdp.paper`): :func:`bayesdp.paper.bs.bs_marginal_model`, the B&S model
  with the latent sums ss_j integrated out (a Gaussian convolution of its two sites): holder j's
  entry is log N(ss_hat_j; n_j mu, n_j Sigma + V_j), with (mu, Sigma) the model's row moments
  at the draw.

The entries (variable ``release``) are densities of different data by family: of z_hat_j alone
for fixedS, "fast" and "eiv", of (S_hat_j, z_hat_j) for normalX, of (S_hat_j, z_hat_j,
yty_hat_j) for "bs"; ``az.compare`` across families compares different data
(docs/methods.md, "Model checking and comparison").

Each method's record says how (:attr:`bayesdp.inference.methods.Method.log_likelihood`: a
function of the release, the priors and the method's result that returns a :class:`Likelihood`,
defined in the method's module); a method without one gets neither group.

Two evaluators compute the groups. Where holder j's entry is the Gaussian z_hat site of
:func:`fixeds_model` or of :func:`eiv_model` (fixedS methods, "fast", "eiv"), NumPy evaluates it
(:func:`_gaussian_z_hat` writes out the site's mean and covariance as the model functions
build them; tests/inference/test_log_likelihood.py checks them against the numpyro site to
rounding), so a method that never samples with JAX does not import it. Every other model, and a
covariance that is not positive definite, goes through the numpyro model traced and compiled by
JAX (:func:`_evaluator`). The posterior predictive draws come from NumPy's generator in the first
case and from JAX's in the second, both seeded by the fit's seed.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Callable, Optional

import numpy as np

from .._jax import RUN_ONCE, enable_x64, without_numpyro_checks
from ..releases import layout
from .closed_form import PencilFactor
from .compilation_cache import default_compilation_cache

# JAX and numpyro are imported inside the functions that use them: importing bayesdp.inference,
# as `bayesdp --help` does, loads neither

#: The posterior predictive group holds at most this many numbers (16 MiB), thinned by
#: :func:`predictive_draws` past it.
PREDICTIVE_NUMBERS = 2 ** 21

#: Draws are evaluated in chunks whose largest intermediate (one d x d covariance per holder and
#: draw, a few copies) stays near this many bytes.
_CHUNK_BYTES = 64 * 2 ** 20


@dataclasses.dataclass
class Likelihood:
    """How to evaluate one fit's log-likelihood and posterior predictive.

    model, data : the numpyro model function and its data (stacked over holders when
        ``per_holder``: the model is then run once per holder, each holder its own data)
    samples : dict, the posterior draws substituted for the model's latent sites, (chain,
        draw, ...)
    sites : tuple, the observed sites whose log densities make up a holder's entry
    predictive : tuple, the observed sites drawn for the posterior predictive
    per_holder : bool
    z_shift : array or None, added back to a drawn z_hat (the noise's conditional mean that the
        data subtracted)
    width : int or None, the length of one holder's statistic vector (sizes the chunks;
        None: d)
    to_release : callable or None, maps the drawn sites (draws, J, ...) to ``{"S_hat",
        "z_hat"}`` when they are not those
    """

    model: Callable
    data: object
    samples: dict
    sites: tuple
    predictive: tuple
    per_holder: bool = False
    z_shift: object = None
    width: Optional[int] = None
    to_release: Optional[Callable] = None


def groups(release, method, priors, result, seed):
    """The ``log_likelihood`` and ``posterior_predictive`` groups of a fit.

    Parameters
    ----------
    release : Release the method fitted
    method : :class:`~bayesdp.inference.methods.Method`, the method's record
    priors : Priors (resolved) the method used
    result : :class:`~bayesdp.inference.methods.MethodResult` of the method
    seed : int, seed of the posterior predictive draws

    Returns
    -------
    ``(log_likelihood, posterior_predictive, kept)``: ``{"release": (chain, draw, J)}``, each
    holder's log density of its released statistics (module docstring), ``{"z_hat": (chain,
    k, J, d)}`` (with ``"S_hat"`` (chain, k, J, d, d) for the methods that sample S): new
    releases drawn from the model given each of the k draws ``kept`` of each chain
    (:func:`predictive_draws`: all of them unless the group would be large). ``(None, None,
    None)`` for a method without ``log_likelihood``.
    """
    if method.log_likelihood is None:
        return None, None, None
    setup = _setup(method, release, priors, result)
    chains, draws = next(iter(setup.samples.values())).shape[:2]
    flat = {k: np.asarray(v, dtype=np.float64).reshape(chains * draws, *np.shape(v)[2:])
            for k, v in setup.samples.items()}
    kept = predictive_draws(chains, draws, release.J, release.d, setup.predictive)
    keep = (np.arange(chains)[:, None] * draws + kept[None]).ravel()
    out = _evaluate_numpy(setup, flat, release.J, release.d, int(seed), keep)
    if out is None:
        enable_x64()
        default_compilation_cache()
        out = _evaluate(setup, flat, release.J, release.d, int(seed), keep)
    loglik, predictive = out
    loglik = loglik.reshape(chains, draws, release.J)
    pp = {k: v.reshape(chains, len(kept), *v.shape[1:]) for k, v in predictive.items()}
    if setup.z_shift is not None:
        pp["z_hat"] = pp["z_hat"] + np.asarray(setup.z_shift)
    return {"release": loglik}, pp, kept


def predictive_draws(chains, draws, J, d, sites):
    """The draws of each chain the posterior predictive is drawn for: every one while the
    group holds at most ``PREDICTIVE_NUMBERS`` numbers, else every k-th (the smallest k that
    fits). The group grows like draws x J x d (x d for S_hat), the log-likelihood like draws x
    J: every draw keeps its log-likelihood (``az.loo`` per holder), and a predictive check
    needs far fewer draws than the posterior."""
    per_draw = J * (d + (d * d if "S_hat" in sites else 0))
    step = max(1, -(-chains * draws * per_draw // PREDICTIVE_NUMBERS))
    return np.arange(0, draws, step)


def _setup(method, release, priors, result):
    """The method's :class:`Likelihood`. Its data may be JAX arrays, which must be made with
    float64 on: when JAX is imported, float64 is turned on first; when the method's function
    imported JAX itself, it is called again with float64 on. A method whose data are NumPy
    arrays never imports JAX here."""
    if "jax" in sys.modules:
        enable_x64()
        return method.log_likelihood(release, priors, result)
    setup = method.log_likelihood(release, priors, result)
    if "jax" in sys.modules:  # its data were made before float64 was on: again
        enable_x64()
        setup = method.log_likelihood(release, priors, result)
    return setup


def one_holder(release, j):
    """Holder j's part of a release (a Release with J = 1; the privacy record as the whole
    release's): the data of eiv's per-holder density."""
    per_holder = ("S_hat", "z_hat", "n", "sigma_s", "sigma_z", "n_clipped", "yty_hat",
                  "sigma_yty", "noise_cov", "n_rows", "n_clamped")
    changes = {k: getattr(release, k)[j:j + 1] for k in per_holder
               if getattr(release, k) is not None}
    changes["holder_names"] = tuple(release.holder_names[j:j + 1])
    return dataclasses.replace(release, **changes)


# -- evaluation --------------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _evaluator(model, sites, pred_sites, per_holder):
    """A jitted function of (draws, data, keys) -> (log-likelihood (draws, J), predictive
    draws) for a model. The model is traced once per draw with the draw substituted for its
    latent sites (what ``numpyro.infer.util.log_likelihood`` does): a holder's entry is the sum
    of the log densities of its observed ``sites`` at the observations, and ``pred_sites`` are
    drawn from the same distributions (new observations given the draw)."""
    import jax
    import jax.numpy as jnp
    from numpyro import handlers

    def run(samples, data, key):
        tr = handlers.trace(handlers.substitute(model, samples)).get_trace(data)
        ll = sum(jnp.reshape(tr[s]["fn"].log_prob(tr[s]["value"]), (-1,)) for s in sites)
        keys = jax.random.split(key, len(pred_sites))
        pp = {s: tr[s]["fn"].sample(k) for s, k in zip(pred_sites, keys)}
        return ll, pp

    def one_draw(samples, data, key):
        if per_holder:  # one model run per holder, each with its data
            J = jax.tree.leaves(data)[0].shape[0]
            ll, pp = jax.vmap(lambda dj, k: run(samples, dj, k))(data, jax.random.split(key, J))
            return ll[:, 0], pp
        return run(samples, data, key)

    return jax.jit(jax.vmap(one_draw, in_axes=(0, None, 0)), compiler_options=RUN_ONCE)


@without_numpyro_checks
def _evaluate(setup: Likelihood, flat, J, d, seed, keep=None):
    """Run :func:`_evaluator` over the draws in chunks of one size (the last padded); the
    predictive draws kept only for the draws ``keep`` (flat indices; None: all)."""
    import jax

    fn = _evaluator(setup.model, setup.sites, setup.predictive, setup.per_holder)
    N = next(iter(flat.values())).shape[0]
    width = d if setup.width is None else setup.width
    chunk = int(max(1, min(N, _CHUNK_BYTES // (8 * 4 * J * width * width))))
    keys = jax.random.split(jax.random.PRNGKey(seed % 2 ** 32), N)
    lls, pps = [], []
    for start in range(0, N, chunk):
        idx = np.minimum(np.arange(start, start + chunk), N - 1)
        ll, pp = fn({k: v[idx] for k, v in flat.items()}, setup.data, keys[idx])
        take = min(chunk, N - start)
        lls.append(np.asarray(ll)[:take])
        mine = np.arange(take) if keep is None else \
            keep[(keep >= start) & (keep < start + take)] - start
        pps.append({k: np.asarray(v)[mine] for k, v in pp.items()})
    loglik = np.concatenate(lls)
    predictive = {k: np.concatenate([p[k] for p in pps]) for k in pps[0]}
    if setup.to_release is not None:
        predictive = setup.to_release(predictive, d)
    elif setup.per_holder:
        predictive = {k: v.reshape(len(v), J, *v.shape[2:]) for k, v in predictive.items()}
    if "S_hat" in predictive and predictive["S_hat"].shape[-1] != d:  # vech -> matrix
        predictive["S_hat"] = np.asarray(layout.unvech(predictive["S_hat"], d))
    return loglik, predictive


# -- the NumPy evaluator of the Gaussian z_hat sites ---------------------------------------------

#: The seed's stream of the NumPy posterior predictive draws (a child of the fit's seed, apart
#: from the stream the method drew its posterior from)
_PREDICTIVE_STREAM = 1


def _holder(data, j):
    """Holder j's part of per-holder data (every field's leading axis), as ``jax.vmap`` hands
    it to the model."""
    return type(data)(*(None if v is None else np.asarray(v, dtype=np.float64)[j] for v in data))


def _z_hat_pencil(setup: Likelihood):
    """The z_hat site of the model of ``setup`` when its covariance is a pencil in sigma_y^2,
    the same for every draw but for sigma_y^2: ``(Sm, S, N)`` with Sm, S, N (J, d, d), holder
    j's site N(Sm_j theta, sigma_y^2 S_j + N_j); None for any other site:

    - :func:`fixeds_model` (one run for all holders): Sm_j = S_j = ``data.S_fixed``, N_j =
      Sigma_z,j (``_z_likelihood`` of :mod:`bayesdp.models.regression`);
    - :func:`eiv_model` run per holder with a plug-in t: Sm_j = S_hat_j, S_j = S_+,j, N_j =
      ``eiv_noise_covariance`` (holder j's data, t).
    """
    from ..models import regression as R

    if setup.to_release is not None or setup.sites != ("z_hat",) \
            or setup.predictive != ("z_hat",):
        return None
    data = setup.data
    if setup.model is R.fixeds_model and not setup.per_holder:
        S = np.asarray(data.S_fixed, dtype=np.float64)
        return S, S, np.asarray(data.Sigma_z, dtype=np.float64)
    if setup.model is R.eiv_model and setup.per_holder:
        holders = [_holder(data, j) for j in range(np.shape(data.z_hat)[0])]
        if any(h.theta_plugin is None for h in holders):  # the noise depends on each draw
            return None
        return (np.stack([h.S_hat for h in holders]), np.stack([h.S_plus for h in holders]),
                np.stack([R.eiv_noise_covariance(h, h.theta_plugin, np) for h in holders]))
    return None


def _gaussian_z_hat(setup: Likelihood, samples):
    """The z_hat site of the model of ``setup`` for a chunk of draws, as NumPy arrays: its mean
    ``loc`` (n, J, d) and covariance ``cov[which]`` (n, J, d, d), with the covariances made once
    for each distinct sigma_y^2 (``cov`` (U, J, d, d), ``which`` (n,) indices into it). None
    when the site is not one this evaluator writes out: the pencils of
    :func:`_z_hat_pencil`, and :func:`normalx_model`'s z_hat site (:func:`_evaluate_numpy`
    adds its S_hat site): loc_j = S_j theta, cov_j = sigma_y^2 S_j + Sigma_z,j with each
    draw's S_j, one covariance per draw.
    """
    from ..models import regression as R

    if setup.to_release is not None:
        return None
    if (setup.model is R.normalx_model and not setup.per_holder
            and setup.sites == setup.predictive == ("S_hat", "z_hat")):
        S, theta = samples["S"], samples["theta"]
        loc = np.einsum("njkl,nl->njk", S, theta)
        cov = (samples["sigma_y2"].reshape(-1)[:, None, None, None] * S
               + np.asarray(setup.data.Sigma_z, dtype=np.float64))
        return loc, cov, np.arange(len(theta))
    pencil = _z_hat_pencil(setup)
    if pencil is None:
        return None
    Sm, S, N = pencil
    s2, which = np.unique(samples["sigma_y2"], return_inverse=True)
    loc = np.einsum("jkl,nl->njk", Sm, samples["theta"])
    return loc, s2[:, None, None, None] * S + N, which.reshape(-1)


def _evaluate_numpy(setup: Likelihood, flat, J, d, seed, keep=None):
    """What :func:`_evaluate` returns, computed in NumPy, with the posterior predictive drawn
    only for the draws ``keep`` (flat indices; None: all). The log density is numpyro's
    ``MultivariateNormal``'s: with a whitening W of the covariance (W Cov W^T = I), -|W (z -
    loc)|^2 / 2 + log|W| - d log(2 pi) / 2, and a new draw is loc + W^-1 eps.

    - The pencils of :func:`_z_hat_pencil` (fast, fixedS, eiv): :func:`_whitened`, so a chunk
      of draws is one matrix product theta B^T (n x d by d x J d) plus O(J d) per draw, never
      a factorisation per draw.
    - Otherwise :func:`_gaussian_z_hat`'s mean and covariances, a Cholesky factor each, and
      for :func:`normalx_model` its S_hat site (vech(S_hat_j) ~ N(vech(S_j), sigma_s_j^2),
      entry by entry; new draws unvech'd to (d, d)).

    Over the draws in chunks; None when the model's site is not one it writes out or a
    covariance is not positive definite (then the caller uses :func:`_evaluate`)."""
    N = next(iter(flat.values())).shape[0]
    keep = np.arange(N) if keep is None else np.asarray(keep)
    chunk = int(max(1, min(N, _CHUNK_BYTES // (8 * 4 * J * d * d))))
    from ..models import regression as R

    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(_PREDICTIVE_STREAM,)))
    # normalx_model's S_hat site: vech(S_hat_j) ~ N(vech(S_j), sigma_s_j^2)
    with_s = setup.model is R.normalx_model and "S_hat" in setup.sites
    if with_s:
        sd = np.asarray(setup.data.sigma_s, dtype=np.float64)[:, None]
        if not np.all(sd > 0):  # no noise on S: numpyro's values, as before
            return None
        s_obs = layout.vech(np.asarray(setup.data.S_hat, dtype=np.float64))
        rng_s = np.random.default_rng(np.random.SeedSequence(seed,
                                                             spawn_key=(_PREDICTIVE_STREAM, 1)))
    pencil = None if with_s else _z_hat_pencil(setup)
    white = None if pencil is None else _whitened(
        pencil, np.asarray(setup.data.z_hat, dtype=np.float64), flat["sigma_y2"].reshape(-1))
    if white is not None:  # every draw at once, holders in blocks (each B_j read once)
        theta = np.asarray(flat["theta"], dtype=np.float64)
        ll = white.log_density(theta)
        if ll is None:
            return None
        return ll, {"z_hat": white.draw(theta[keep], keep, pencil[0], rng)}
    lls, draws, s_draws = [], [], []
    for start in range(0, N, chunk):
        part = {k: v[start:start + chunk] for k, v in flat.items()}
        mine = keep[(keep >= start) & (keep < start + chunk)] - start
        gauss = _gaussian_z_hat(setup, part)
        if gauss is None:
            return None
        loc, cov, which = gauss
        z = np.asarray(setup.data.z_hat, dtype=np.float64)
        try:  # of the symmetric part, as jnp.linalg.cholesky takes it
            L = np.linalg.cholesky(0.5 * (cov + np.swapaxes(cov, -1, -2)))[which]
        except np.linalg.LinAlgError:
            return None
        u = np.linalg.solve(L, (z - loc)[..., None])[..., 0]
        half_log_det = np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(-1)
        ll = -0.5 * np.sum(u * u, axis=-1) - half_log_det - 0.5 * d * np.log(2.0 * np.pi)
        if with_s:
            mean = layout.vech(flat["S"][start:start + chunk])  # (n, J, k)
            r = (s_obs - mean) / sd
            ll = ll + np.sum(-0.5 * r * r - np.log(sd) - 0.5 * np.log(2.0 * np.pi), axis=-1)
            mean = mean[mine]
            s_draws.append(layout.unvech(mean + sd * rng_s.standard_normal(mean.shape), d))
        if not np.all(np.isfinite(ll)):
            return None
        eps = rng.standard_normal(loc[mine].shape)
        draws.append(loc[mine] + np.einsum("njkl,njl->njk", L[mine], eps))
        lls.append(ll)
    out = {"z_hat": np.concatenate(draws)}
    if s_draws:
        out["S_hat"] = np.concatenate(s_draws)
    return np.concatenate(lls), out


#: Up to this many distinct sigma_y^2 among the draws, :func:`_whitened` factors each
#: covariance (J Cholesky factors a value); above it, one eigendecomposition per holder.
_FACTORS_PER_VALUE = 2


class _Whitened:
    """Holder j's z_hat site N(Sm_j theta, sigma_y^2 S_j + N_j) for every draw, whitened:
    w = B theta - c scaled by 1 / sqrt(D), so that |w|^2 is the quadratic form; made by
    :func:`_whitened`. ``B`` (U, J, d, d), ``c`` (U, J, d) and ``T`` (U, J, d, d) per
    covariance factor u (``which`` (N,): each draw's u); ``lam`` (J, d) or None: D =
    sigma_y^2 lam + 1 (the pencil), else D = 1; ``half_log_det`` (U, J): log|T|."""

    def __init__(self, B, c, T, half_log_det, which, s2, lam):
        self.B, self.c, self.T, self.half_log_det = B, c, T, half_log_det
        self.which, self.s2, self.lam = which, s2, lam

    def log_density(self, theta):
        """Each holder's log density (N, J) at the draws ``theta`` (N, d), over blocks of
        holders whose (N, block, d) residuals stay near ``_CHUNK_BYTES``; None when one is not
        finite."""
        N, d = theta.shape
        J = self.c.shape[1]
        step = int(max(1, min(J, _CHUNK_BYTES // (8 * 3 * N * d))))
        ll = np.empty((N, J))
        groups = [(slice(None), 0)] if len(self.B) == 1 else \
            [(self.which == u, u) for u in np.unique(self.which)]
        if self.lam is not None:  # D = sigma_y^2 lam + 1 once per distinct sigma_y^2
            values, at_value = np.unique(self.s2, return_inverse=True)
        for lo in range(0, J, step):
            hi = min(J, lo + step)
            for at, u in groups:
                Bt = self.B[u, lo:hi].reshape((hi - lo) * d, d)
                w = (theta[at] @ Bt.T).reshape(-1, hi - lo, d)
                w -= self.c[u, lo:hi]
                log_det = self.half_log_det[u, lo:hi]
                if self.lam is not None:  # D > 0: checked for every value by _whitened
                    D = values[:, None, None] * self.lam[None, lo:hi] + 1.0
                    w *= (1.0 / np.sqrt(D))[at_value[at]]
                    log_det = log_det + 0.5 * np.log(D).sum(-1)[at_value[at]]
                ll[at, lo:hi] = (-0.5 * np.einsum("njd,njd->nj", w, w) - log_det
                                 - 0.5 * d * np.log(2.0 * np.pi))
        return ll if np.all(np.isfinite(ll)) else None

    def draw(self, theta, rows, Sm, rng):
        """New z_hat (n, J, d) given the draws ``theta`` (n, d) at flat positions ``rows``:
        Sm_j theta + T_j D^1/2 eps (n x J x d numbers: the kept draws of
        :func:`predictive_draws`)."""
        n, d = theta.shape
        J = self.c.shape[1]
        which = self.which[rows]
        eps = rng.standard_normal((J, n, d))
        if self.lam is not None:
            eps *= np.sqrt(self.s2[rows][None, :, None] * self.lam[:, None, :] + 1.0)
        new = (theta @ np.ascontiguousarray(Sm).reshape(J * d, d).T).reshape(n, J, d)
        for u in np.unique(which):
            at = slice(None) if len(self.B) == 1 else which == u
            new[at] += np.matmul(eps[:, at], np.swapaxes(self.T[u], -1, -2)).transpose(1, 0, 2)
        return new


def _whitened(pencil, z, s2):
    """:class:`_Whitened` of the pencil ``(Sm, S, N)`` of :func:`_z_hat_pencil` for the draws'
    sigma_y^2 ``s2`` (N,): with at most ``_FACTORS_PER_VALUE`` distinct values (fast's one
    plug-in) a Cholesky factor L of each sigma_y^2 S_j + N_j (B = L^-1 Sm_j, c = L^-1 z_j, T =
    L, D = 1); otherwise :class:`closed_form.PencilFactor` (B = T^-1 Sm_j, c = T^-1 z_j, D =
    sigma_y^2 lam + 1). None when a covariance is not positive definite."""
    from scipy import linalg

    Sm, S, N = pencil
    values, which = np.unique(s2, return_inverse=True)
    which = which.reshape(-1)
    if len(values) <= _FACTORS_PER_VALUE:
        cov = values[:, None, None, None] * S[None] + N[None]
        try:  # of the symmetric part, as jnp.linalg.cholesky takes it
            L = np.linalg.cholesky(0.5 * (cov + np.swapaxes(cov, -1, -2)))
        except np.linalg.LinAlgError:
            return None
        B = np.ascontiguousarray(linalg.solve_triangular(L, np.broadcast_to(Sm, L.shape),
                                                         lower=True))
        c = linalg.solve_triangular(L, np.broadcast_to(z[..., None], L.shape[:-1] + (1,)),
                                    lower=True)[..., 0]
        half = np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(-1)
        return _Whitened(B, c, L, half, which, s2, None)
    factor = PencilFactor(S, N)
    if not factor.ok or factor.scales(values) is None:
        return None
    Tinv = np.swapaxes(factor.Tinv_t, -1, -2)  # T^-1
    B = (Tinv @ Sm)[None]
    c = (Tinv @ z[..., None])[None, ..., 0]
    return _Whitened(B, c, factor.T[None], factor.half_log_det_N[None], np.zeros_like(which),
                     np.asarray(s2, dtype=np.float64), factor.lam)
