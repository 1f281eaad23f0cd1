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
- normalX methods ("normalx", "nuts-normalx", the normalX kernels): :func:`normalx_model` (or
  the intercept model for a release with an intercept); holder j's entry is the density of
  both its statistics, log p(S_hat_j | S_j) + log p(z_hat_j | S_j, theta, sigma_y^2), given the
  drawn S_j. The non-centred models have the same density; their draws of S are used.
- "eiv": :func:`eiv_model` conditions on the holders' sums, not on each holder. Holder j's entry
  is the density of z_hat_j under the same model given holder j's statistics alone: log
  N(z_hat_j; S_hat_j theta, sigma_y^2 S_+,j + Var(e_z,j - E_j t)), with the fit's plug-in t for
  the S noise. The sum of these entries is not the likelihood eiv's posterior conditions on
  (that of the pooled z_hat), so leave-one-holder-out importance weights are an approximation
  to refitting without the holder; the Pareto k of ``az.loo`` says when it fails.
- "bs": :func:`bayesdp.models.bs.bs_marginal_model`, :func:`~bayesdp.models.bs.bs_model` with
  the latent sums ss_j integrated out (a Gaussian convolution of its two sites): holder j's
  entry is log N(ss_hat_j; n_j mu, n_j Sigma + V_j), with (mu, Sigma) the model's row moments
  at the draw.

The entries (variable ``release``) are densities of different data by family: of z_hat_j alone
for fixedS, "fast" and "eiv", of (S_hat_j, z_hat_j) for normalX, of (S_hat_j, z_hat_j,
yty_hat_j) for "bs"; ``az.compare`` across families compares different data
(docs/methods.md, "Model checking and comparison").

Methods registered by users (``register_method``) get neither group.
"""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

from ..releases import layout

#: Draws are evaluated in chunks whose largest intermediate (one d x d covariance per holder and
#: draw, a few copies) stays near this many bytes.
CHUNK_BYTES = 64 * 2 ** 20

FIXEDS_METHODS = ("fixeds", "fixeds-paper", "nuts-fixeds")
NORMALX_METHODS = ("normalx", "nuts-normalx", "normalx-paper")
SUPPORTED = ("eiv", "fast", "bs") + FIXEDS_METHODS + NORMALX_METHODS


@dataclasses.dataclass
class _Setup:
    """How to evaluate one method's likelihood: the model function, its data (stacked over
    holders when ``per_holder``: the model is then run once per holder, each holder its own
    data), the posterior draws it takes, the observed sites that make up a holder's entry and
    the sites drawn for the posterior predictive, with the constant to add back to a drawn
    z_hat (the noise's conditional mean that the data subtracted)."""

    model: object
    data: object
    samples: dict
    sites: tuple
    predictive: dict
    per_holder: bool = False
    z_shift: object = None


def supported(method) -> bool:
    """Whether :func:`groups` evaluates ``method``."""
    return method in SUPPORTED


def groups(release, method, priors, posterior, attrs, seed):
    """The ``log_likelihood`` and ``posterior_predictive`` groups of a fit.

    Parameters
    ----------
    release : Release the method fitted
    method : str, the method's name
    priors : Priors (resolved) the method used
    posterior : dict of draws shaped (chain, draw, ...), as the method returned them
    attrs : dict, the method's attrs (plug-in values, options that shaped its model data)
    seed : int, seed of the posterior predictive draws

    Returns
    -------
    ``(log_likelihood, posterior_predictive)``: ``{"release": (chain, draw, J)}``, each holder's
    log density of its released statistics (module docstring), and ``{"z_hat": (chain, draw, J,
    d)}`` (with ``"S_hat"`` (chain, draw, J, d, d) for the methods that sample S): new releases
    drawn from the model given each draw. ``(None, None)`` for a method not in
    :data:`SUPPORTED`.
    """
    if method not in SUPPORTED:
        return None, None
    from .._jax import enable_x64

    enable_x64()
    from .mcmc import _compilation_cache_from_env

    _compilation_cache_from_env()  # BAYESDP_COMPILATION_CACHE: reuse the compiled evaluator
    setup = _setup(release, method, priors, posterior, attrs)
    chains, draws = next(iter(setup.samples.values())).shape[:2]
    flat = {k: np.asarray(v, dtype=np.float64).reshape(chains * draws, *np.shape(v)[2:])
            for k, v in setup.samples.items()}
    loglik, predictive = _evaluate(setup, flat, release.J, release.d, int(seed))
    loglik = loglik.reshape(chains, draws, release.J)
    pp = {k: v.reshape(chains, draws, *v.shape[1:]) for k, v in predictive.items()}
    if setup.z_shift is not None:
        pp["z_hat"] = pp["z_hat"] + np.asarray(setup.z_shift)
    return {"release": loglik}, pp


# -- the model of each method ------------------------------------------------------------------


def _setup(release, method, priors, posterior, attrs) -> _Setup:
    from ..models import regression as R

    if method in FIXEDS_METHODS:
        from .mcmc import _fixeds_setup, initial_sigma_y2

        s2_0 = float(attrs["fix_sigma_y2"]) if "fix_sigma_y2" in attrs else \
            initial_sigma_y2(release, priors)
        _, data, _, _, _ = _fixeds_setup(release, priors, s2_0, attrs.get("fixed_s", "psd"),
                                         attrs.get("s_noise"))
        samples = _take(posterior, ("theta", "sigma_y2"))
        return _Setup(R.fixeds_model, data, samples, ("z_hat",), {"z_hat": None},
                      z_shift=release.z_hat - np.asarray(data.z_hat))
    if method == "fast":
        return _fast_setup(release, priors, posterior, attrs)
    if method in NORMALX_METHODS:
        if release.intercept:
            data = R.intercept_model_data(release, priors)
            samples = _take(posterior, ("Sigma_x", "mu", "xbar", "W", "theta", "sigma_y2"))
            model = R.normalx_intercept_model
        else:
            data = R.model_data(release, priors)
            samples = _take(posterior, ("Sigma_x", "S", "theta", "sigma_y2"))
            model = R.normalx_model
        return _Setup(model, data, samples, ("S_hat", "z_hat"), {"S_hat": None, "z_hat": None})
    if method == "eiv":
        return _eiv_setup(release, priors, posterior, attrs)
    return _bs_setup(release, priors, posterior)


def _take(posterior, names):
    return {k: posterior[k] for k in names}


def _fast_setup(release, priors, posterior, attrs):
    """Bayes-fixedS-fast: the fixedS model at its plug-in sigma_y^2, with S_j and the noise of
    z_hat given S as :func:`closed_form.fast_posterior` used them (the s_noise "eiv" noise at
    the posterior mean, the fixed point it solved)."""
    from ..models import regression as R
    from . import closed_form

    s_noise = attrs.get("s_noise", "conditional")
    S = closed_form.fixed_s_estimate(release, attrs.get("fixed_s", "psd"))
    theta = np.asarray(attrs["closed_form_mean"], dtype=float) if s_noise == "eiv" else None
    shift, Sig = closed_form.z_given_s_noise(release, S, s_noise=s_noise, theta=theta)
    data = R.model_data(release, priors, S_fixed=S, z_noise=(shift, Sig))
    theta_draws = np.asarray(posterior["theta"])
    s2 = np.full(theta_draws.shape[:2], float(attrs["sigma_y2_plugin"]))
    return _Setup(R.fixeds_model, data, {"theta": theta_draws, "sigma_y2": s2}, ("z_hat",),
                  {"z_hat": None}, z_shift=shift)


def one_holder(release, j):
    """Holder j's part of a release (a Release with J = 1; the privacy record as the whole
    release's): the data of eiv's per-holder density."""
    per_holder = ("S_hat", "z_hat", "n", "sigma_s", "sigma_z", "n_clipped", "yty_hat",
                  "sigma_yty", "noise_cov", "n_rows")
    changes = {k: getattr(release, k)[j:j + 1] for k in per_holder
               if getattr(release, k) is not None}
    changes["holder_names"] = tuple(release.holder_names[j:j + 1])
    return dataclasses.replace(release, **changes)


def _eiv_setup(release, priors, posterior, attrs):
    """eiv: :func:`eiv_model` on each holder's statistics alone, at the fit's scale_min,
    sigma_y2_max and plug-in theta (module docstring)."""
    import jax

    from ..models import regression as R

    plugin = np.asarray(attrs["eiv_theta_plugin"], dtype=float)
    per = [R.eiv_arrays(R.eiv_model_data(one_holder(release, j), priors,
                                         scale_min=float(attrs["eiv_scale_min"]),
                                         sigma_y2_max=float(attrs["sigma_y2_max"]),
                                         theta_plugin=plugin,
                                         per_slope=attrs.get("eiv_scales") == "per-slope"))
           for j in range(release.J)]
    data = jax.tree.map(lambda *xs: jax.numpy.stack(xs), *per)
    samples = _take(posterior, ("theta_scale", "theta", "sigma_y2"))
    return _Setup(R.eiv_model, data, samples, ("z_hat",), {"z_hat": None}, per_holder=True)


def _bs_setup(release, priors, posterior):
    """MCMC-B&S: the Gaussian of ss_hat_j with ss_j integrated out of ``bs_model``."""
    from ..models import bs as B

    ss_hat = B.release_stats(release)
    V = layout.noise_covariance(release, with_yty=True)
    data = (ss_hat, V, np.asarray(release.n, dtype=float))
    return _Setup(_bs_marginal_model, tuple(np.asarray(x, np.float64) for x in data),
                  _take(posterior, ("Sigma_x", "theta", "sigma_y2")), ("ss_hat",),
                  {"ss_hat": None})


def _bs_marginal_model(data):
    """:func:`bayesdp.models.bs.bs_marginal_model` (the density is defined there) called with
    one argument, as :func:`_evaluator` calls models: ``data`` = (ss_hat, noise_cov, n), the
    latents without priors (the posterior draws are substituted)."""
    from ..models import bs as B

    B.bs_marginal_model(*data)


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

    return jax.jit(jax.vmap(one_draw, in_axes=(0, None, 0)))


def _evaluate(setup, flat, J, d, seed):
    """Run :func:`_evaluator` over the draws in chunks of one size (the last padded)."""
    import jax

    pred_sites = tuple(setup.predictive)
    if setup.model is _bs_marginal_model:  # its data is a tuple: ss_hat is its first entry
        pred_sites = ("ss_hat",)
    fn = _evaluator(setup.model, setup.sites, pred_sites, setup.per_holder)
    N = next(iter(flat.values())).shape[0]
    width = layout.stat_dim(d, True) if setup.model is _bs_marginal_model else d
    chunk = int(max(1, min(N, CHUNK_BYTES // (8 * 4 * J * width * width))))
    keys = jax.random.split(jax.random.PRNGKey(seed % 2 ** 32), N)
    lls, pps = [], []
    for start in range(0, N, chunk):
        idx = np.minimum(np.arange(start, start + chunk), N - 1)
        ll, pp = fn({k: v[idx] for k, v in flat.items()}, setup.data, keys[idx])
        take = min(chunk, N - start)
        lls.append(np.asarray(ll)[:take])
        pps.append({k: np.asarray(v)[:take] for k, v in pp.items()})
    loglik = np.concatenate(lls)
    predictive = {k: np.concatenate([p[k] for p in pps]) for k in pps[0]}
    if setup.model is _bs_marginal_model:
        S, z, _ = layout.unpack_stats(predictive.pop("ss_hat"), d)
        predictive = {"S_hat": S, "z_hat": z}
    elif setup.per_holder:
        predictive = {k: v.reshape(N, J, *v.shape[2:]) for k, v in predictive.items()}
    if "S_hat" in predictive and predictive["S_hat"].shape[-1] != d:  # vech -> matrix
        predictive["S_hat"] = np.asarray(layout.unvech(predictive["S_hat"], d))
    return loglik, predictive
