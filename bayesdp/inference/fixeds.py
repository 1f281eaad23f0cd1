"""Method ``"fixeds"``: MCMC-fixedS, the posterior of the fixedS model (section 4.2, Algorithm
2's target) with S_j fixed at the nearest PSD matrix of S_hat_j, sampled by the hand-written
kernel :mod:`bayesdp.inference.kernels.fixeds` (log sigma_y^2 by independence
Metropolis-Hastings from a grid of its marginal with theta integrated out, then
theta | sigma_y^2 by Gibbs, eq. 12).

:func:`setup` (the model, its data and the chains' start) and :func:`run` serve every method of
the fixedS model: ``bayesdp.paper`` runs Algorithm 2 as published and NUTS on the same model
through them.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._jax import enable_x64
from ..errors import BayesdpInputError
from ..models import regression as R
from . import closed_form
from .kernel_runner import TARGET_ACCEPT, Kernel, kernel_run, run_kernel, run_kernel_batch
from .log_likelihood import Likelihood
from .methods import register_method
from .starts import initial_position, initial_sigma_y2

# The kernels (JAX) are imported inside the functions that use them: importing bayesdp.inference,
# as `bayesdp --help` does, loads no JAX

#: The options of the fixedS model's setup: the estimate S_j is fixed at ("psd", or the
#: authors' "psd+I") and how the noise on S enters z_hat | S (None: the release's provenance
#: says, else "conditional")
FIXED_S_OPTIONS = {"fixed_s": "psd", "s_noise": None}

#: The options of "fixeds": ``fix_sigma_y2`` to hold sigma_y^2 at a value (theta Gibbs only),
#: numpyro's ``chain_method``, and the fixedS model's :data:`FIXED_S_OPTIONS`
OPTIONS = {"fix_sigma_y2": None, "chain_method": None, **FIXED_S_OPTIONS}

#: The options of a fixedS kernel with a random walk on sigma_y^2 ("fixeds-paper"): those of
#: "fixeds" and the walk's ``target_accept`` and initial ``sigma_y2_step``
RANDOM_WALK_OPTIONS = {"target_accept": TARGET_ACCEPT, "sigma_y2_step": None, **OPTIONS}


def z_noise(release, priors, S_fix, sigma_y2, fixed_s="psd", s_noise=None):
    """The noise of z_hat given the fixed S: ``((shift, Sigma_z), s_noise, theta)``.

    Parameters
    ----------
    release, priors : the release and resolved priors
    S_fix : (J, d, d) the fixed S_j
    sigma_y2 : float, the sigma_y^2 of the plug-in theta (``s_noise="eiv"``) and of the exact
        completion of a singular noise
    fixed_s : str, the estimate S_fix is (for the plug-in theta)
    s_noise : as in :func:`closed_form.z_given_s_noise`; None takes the release's
        ``provenance["s_noise"]``, else "conditional" (the paper's sigma_z^2 I for iid releases)

    Returns
    -------
    ``(shift (J, d), Sigma_z (J, d, d))``, the s_noise used, and the plug-in theta (``"eiv"``:
    the covariance needs theta, which a Gibbs step on theta cannot carry, so it is evaluated at
    the Bayes-fixedS-fast eiv fixed point; else None).
    """
    if s_noise is None:
        s_noise = (release.provenance or {}).get("s_noise", "conditional")
    if s_noise not in closed_form.S_NOISE:
        raise BayesdpInputError(f"s_noise must be one of {closed_form.S_NOISE}, got {s_noise!r}")
    theta = None
    if s_noise == "eiv":
        theta = closed_form.fast_posterior(release, priors, sigma_y2=sigma_y2, fixed_s=fixed_s,
                                           s_noise="eiv")["mean"]
    shift, Sig = closed_form.z_given_s_noise(release, S_fix, s_noise=s_noise, theta=theta)
    # zero z noise with a singular S_fix: exact completion (else the kernels' Cholesky gives NaN)
    Sig = closed_form.complete_degenerate_noise(S_fix, release.z_hat - shift, sigma_y2, Sig)
    return (shift, Sig), s_noise, theta


def setup(release, priors, sigma_y2, fixed_s, s_noise):
    """The fixedS model, its data and the chains' start: ``(fixeds_model, ModelData, pos,
    s_noise, theta)`` with S_j fixed at ``closed_form.fixed_s_estimate(release, fixed_s)``, the
    noise of z_hat given S of :func:`z_noise` (its s_noise and plug-in theta), and theta at its
    conditional mean given ``sigma_y2``."""
    S_fix = closed_form.fixed_s_estimate(release, fixed_s)
    noise, s_noise, theta = z_noise(release, priors, S_fix, sigma_y2, fixed_s, s_noise)
    data = R.model_data(release, priors, S_fixed=S_fix, z_noise=noise)
    pos = initial_position(release, priors, S_fix + 1e-9 * np.eye(release.d), sigma_y2)
    pos = {"theta": pos["theta"], "sigma_y2": pos["sigma_y2"]}
    return R.fixeds_model, data, pos, s_noise, theta


def with_fixed_s(result, fixed_s, s_noise, theta, fix_sigma_y2=None):
    """``result`` of a fixedS method with what it fixed: the typed fields the S noise check and
    the log-likelihood read, and the same in attrs for users."""
    attrs = {**result.attrs, "fixed_s": fixed_s, "s_noise": s_noise}
    if theta is not None:
        attrs["eiv_plugin_theta"] = np.asarray(theta, dtype=float)
    if fix_sigma_y2 is not None:
        attrs["fix_sigma_y2"] = float(fix_sigma_y2)
    return dataclasses.replace(result, attrs=attrs, fixed_s=fixed_s, s_noise=s_noise,
                               plugin_theta=theta,
                               sigma_y2=None if fix_sigma_y2 is None else float(fix_sigma_y2))


def _fixeds_kernel():
    """The hand-written kernel of "fixeds" (:mod:`.kernels.fixeds`)."""
    from .kernels import fixeds

    return Kernel("fixeds", fixeds.init, fixeds.fixeds_step, sigma_y2_update="independence",
                  moves_S=False, prepare=fixeds.prepare)


def _kernel_run(kernel, release, priors, *, target_accept, sigma_y2_step, fix_sigma_y2, fixed_s,
                s_noise):
    """The checked run of a fixedS kernel on one release, and its ``(s_noise, theta)``."""
    s2_0 = initial_sigma_y2(release, priors) if fix_sigma_y2 is None else float(fix_sigma_y2)
    if not s2_0 > 0:
        raise BayesdpInputError(f"fix_sigma_y2 must be > 0, got {fix_sigma_y2!r}")
    model, data, pos, s_noise, theta = setup(release, priors, s2_0, fixed_s, s_noise)
    if fix_sigma_y2 is not None:  # theta Gibbs only, sigma_y^2 held at its start
        from .kernels import fixeds

        kernel = kernel._replace(step=fixeds.theta_step, sigma_y2_update="fixed", prepare=None)
    run = kernel_run(kernel, model, data, pos, np.zeros(release.J), s2_0,
                     target_accept=TARGET_ACCEPT, target_accept_sigma_y2=target_accept,
                     sigma_y2_step=sigma_y2_step)
    return run, s_noise, theta


def run(release, priors, *, seed, num_samples, num_chains, num_warmup, progress_bar,
        fix_sigma_y2, chain_method, fixed_s, s_noise, target_accept=TARGET_ACCEPT,
        sigma_y2_step=None, kernel=_fixeds_kernel, build_only=False):
    """A fixedS kernel (``kernel()``, default :func:`_fixeds_kernel`) on the release: options
    :data:`OPTIONS` (and :data:`RANDOM_WALK_OPTIONS` for a kernel with a random walk on
    sigma_y^2); returns a :class:`~.methods.MethodResult` with what S was fixed at."""
    enable_x64()
    krun, s_noise, theta = _kernel_run(kernel(), release, priors, target_accept=target_accept,
                                       sigma_y2_step=sigma_y2_step, fix_sigma_y2=fix_sigma_y2,
                                       fixed_s=fixed_s, s_noise=s_noise)
    out = run_kernel(krun, seed=seed, num_samples=num_samples, num_chains=num_chains,
                     num_warmup=num_warmup, progress_bar=progress_bar,
                     chain_method=chain_method, build_only=build_only)
    if build_only:
        return out
    return with_fixed_s(out, fixed_s, s_noise, theta, fix_sigma_y2)


def run_batch(releases, priors_list, *, seeds, num_samples, num_chains, num_warmup,
              progress_bar, fix_sigma_y2, chain_method, fixed_s, s_noise,
              target_accept=TARGET_ACCEPT, sigma_y2_step=None, kernel=_fixeds_kernel):
    """:func:`run` for many releases of one shape in one compiled program
    (:func:`.kernel_runner.run_kernel_batch`)."""
    enable_x64()
    k = kernel()
    runs = [_kernel_run(k, rel, pri, target_accept=target_accept, sigma_y2_step=sigma_y2_step,
                        fix_sigma_y2=fix_sigma_y2, fixed_s=fixed_s, s_noise=s_noise)
            for rel, pri in zip(releases, priors_list)]
    out = run_kernel_batch([r[0] for r in runs], seeds=seeds, num_samples=num_samples,
                           num_chains=num_chains, num_warmup=num_warmup,
                           chain_method=chain_method)
    return [with_fixed_s(res, fixed_s, used, theta, fix_sigma_y2)
            for res, (_, used, theta) in zip(out, runs)]


def likelihood(release, priors, result):
    """Each holder's log-likelihood of a fixedS fit (:mod:`.log_likelihood`):
    :func:`fixeds_model` with the data the sampler conditioned on; holder j's entry is
    log N(z_hat_j; S_j theta, sigma_y^2 S_j + Sigma_z,j) at S_j fixed."""
    s2_0 = initial_sigma_y2(release, priors) if result.sigma_y2 is None else result.sigma_y2
    _, data, _, _, _ = setup(release, priors, s2_0, result.fixed_s, result.s_noise)
    samples = {k: result.posterior[k] for k in ("theta", "sigma_y2")}
    return Likelihood(R.fixeds_model, data, samples, ("z_hat",), ("z_hat",),
                      z_shift=release.z_hat - np.asarray(data.z_hat))


register_method(
    "fixeds", run,
    "MCMC-fixedS (Algorithm 2's target): independence Metropolis-Hastings on log sigma_y^2 "
    "from a grid of its marginal (theta integrated out), then Gibbs theta",
    model=R.fixeds_model,
    samples="theta and sigma_y^2; S_j fixed at the nearest PSD matrix of S_hat_j",
    intercept=True, options=OPTIONS, run_batch=run_batch, checks=("s_noise",),
    log_likelihood=likelihood)
