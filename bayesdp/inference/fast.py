"""Method ``"fast"``: Bayes-fixedS-fast (Algorithm 3), the closed-form Gaussian posterior of theta
(eq. 12) with S_j fixed at the nearest PSD matrix of S_hat_j and sigma_y^2 fixed at a plug-in
value (:func:`bayesdp.inference.closed_form.fast_posterior`); iid draws from it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .._jax import enable_x64
from ..models import regression as R
from . import closed_form
from .log_likelihood import Likelihood
from .methods import MethodResult, register_method

# JAX (and the kernels, which import it) are imported inside the functions that use them:
# importing bayesdp.inference, as `bayesdp --help` does, loads no JAX

#: sigma_y2: hold sigma_y^2 at this value (None: the plug-in of ``sigma_y_rule``, "paper":
#: (B_y/3)^2, or "paper-code"); fixed_s and s_noise as for "fixeds"
OPTIONS = {"sigma_y2": None, "sigma_y_rule": "paper", "fixed_s": "psd", "s_noise": None}


def run(release, priors, *, seed, num_samples, num_chains, num_warmup, progress_bar, sigma_y2,
        sigma_y_rule, fixed_s, s_noise):
    """Bayes-fixedS-fast: ``num_chains`` x ``num_samples`` iid draws from the closed-form
    Gaussian of :func:`closed_form.fast_posterior` (``s_noise`` treats the S noise of a
    correlated ``noise_cov``, :func:`closed_form.z_given_s_noise`)."""
    post = closed_form.fast_posterior(release, priors, sigma_y2=sigma_y2,
                                      sigma_y_rule=sigma_y_rule, fixed_s=fixed_s, s_noise=s_noise)
    return _fast_result(post, seed, num_chains, num_samples,
                        sigma_y_rule if sigma_y2 is None else "given", fixed_s)


def _fast_result(post, seed, num_chains, num_samples, sigma_y_rule, fixed_s):
    """The :class:`MethodResult` of "fast" from its posterior moments (``fast_posterior``'s
    dict): ``num_chains`` x ``num_samples`` iid Gaussian draws from ``seed``."""
    rng = np.random.default_rng(seed)
    theta = closed_form.draw_gaussian(rng, post["mean"], post["cov"], (num_chains, num_samples))
    return MethodResult(
        posterior={"theta": theta},
        attrs={
            "closed_form_mean": post["mean"],
            "closed_form_cov": post["cov"].ravel(),
            "sigma_y2_plugin": post["sigma_y2"],
            "sigma_y_rule": sigma_y_rule,
            "fixed_s": fixed_s,
            "s_noise": post["s_noise"],
            "prior_share": post["prior_share"],
        },
        fixed_s=fixed_s, s_noise=post["s_noise"], sigma_y2=float(post["sigma_y2"]),
        plugin_theta=post["mean"] if post["s_noise"] == "eiv" else None,
        theta_moments=(post["mean"], post["cov"]), S_fixed=post["S"],
    )


class _ThetaData(NamedTuple):
    """What eq. (12)'s moments need (:func:`.kernels.common.theta_moments`), per release."""

    z_hat: object
    Sigma_z: object
    m: object
    C: object


_FAST_MOMENTS = None


def _fast_moments():
    """The jitted, vmapped moments of theta | S, sigma_y^2, z_hat (eq. 12): mean and covariance
    for a stack of releases."""
    global _FAST_MOMENTS
    if _FAST_MOMENTS is None:
        import jax
        import jax.numpy as jnp

        from .kernels.common import theta_moments

        def one(S, sigma_y2, data):
            R_, mean = theta_moments(S, sigma_y2, data)
            cov = jax.scipy.linalg.cho_solve((R_, True), jnp.eye(R_.shape[-1], dtype=R_.dtype))
            return mean, 0.5 * (cov + cov.T)

        _FAST_MOMENTS = jax.jit(jax.vmap(one))
    return _FAST_MOMENTS


def run_batch(releases, priors_list, *, seeds, num_samples, num_chains, num_warmup,
              progress_bar, sigma_y2, sigma_y_rule, fixed_s, s_noise):
    """Bayes-fixedS-fast for many releases of one shape: the inputs of each
    (:func:`.closed_form.fast_inputs`, the z noise given S completed where singular as in
    :func:`.closed_form.gaussian_theta_posterior`), the moments of all at once, then each
    release's draws from its seed (:func:`_fast_result`). ``s_noise="eiv"`` (a fixed point per
    release) is computed one release at a time by :func:`.closed_form.fast_posterior`."""
    enable_x64()
    rule = sigma_y_rule if sigma_y2 is None else "given"
    posts, batch = [None] * len(releases), []
    for i, (rel, pri) in enumerate(zip(releases, priors_list)):
        s2, noise, S = closed_form.fast_inputs(rel, sigma_y2, sigma_y_rule, fixed_s, s_noise)
        if noise == "eiv":
            posts[i] = closed_form.fast_posterior(rel, pri, sigma_y2=s2, fixed_s=fixed_s,
                                                  s_noise="eiv")
            continue
        shift, Sig = closed_form.z_given_s_noise(rel, S, s_noise=noise)
        z = rel.z_hat - shift
        Sig = closed_form.complete_degenerate_noise(S, z, s2, Sig)
        posts[i] = {"sigma_y2": s2, "S": S, "s_noise": noise}
        batch.append((i, S, s2, _ThetaData(z, Sig, np.asarray(pri.m, float),
                                           np.asarray(pri.C, float))))
    if batch:
        import jax

        S = np.stack([b[1] for b in batch])
        s2 = np.array([b[2] for b in batch])
        data = jax.tree.map(lambda *xs: np.stack(xs), *[b[3] for b in batch])
        mean, cov = (np.asarray(a) for a in _fast_moments()(S, s2, data))
        for k, (i, _, _, theta_data) in enumerate(batch):
            posts[i].update(mean=mean[k], cov=cov[k],
                            prior_share=closed_form.gaussian_prior_share(cov[k], theta_data.C))
    return [_fast_result(post, seed, num_chains, num_samples, rule, fixed_s)
            for post, seed in zip(posts, seeds)]


def likelihood(release, priors, result):
    """Each holder's log-likelihood of a "fast" fit (:mod:`.log_likelihood`): the fixedS model
    at the plug-in sigma_y^2, with S_j and the noise of z_hat given S as
    :func:`closed_form.fast_posterior` used them (the s_noise "eiv" noise at the posterior
    mean, the fixed point it solved)."""
    S = result.S_fixed if result.S_fixed is not None else \
        closed_form.fixed_s_estimate(release, result.fixed_s)
    shift, Sig = closed_form.z_given_s_noise(release, S, s_noise=result.s_noise,
                                             theta=result.plugin_theta)
    data = R.model_data(release, priors, S_fixed=S, z_noise=(shift, Sig), as_numpy=True)
    theta_draws = np.asarray(result.posterior["theta"])
    s2 = np.full(theta_draws.shape[:2], result.sigma_y2)
    return Likelihood(R.fixeds_model, data, {"theta": theta_draws, "sigma_y2": s2}, ("z_hat",),
                      ("z_hat",), z_shift=shift)


register_method(
    "fast", run,
    "Bayes-fixedS-fast (Algorithm 3): closed-form Gaussian, S_j fixed at the nearest PSD "
    "matrix, sigma_y fixed at a plug-in value",
    model=None,
    samples="theta only, iid from a Gaussian; S_j fixed at the nearest PSD matrix of S_hat_j, "
            "sigma_y^2 at a plug-in value (a closed-form Gaussian with sigma_y^2 fixed, not a "
            "numpyro model; with sigma_y^2 sampled it is 'fixeds')",
    intercept=True, options=OPTIONS, run_batch=run_batch, iid=True, checks=("s_noise",),
    log_likelihood=likelihood)
