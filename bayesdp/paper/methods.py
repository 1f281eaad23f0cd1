"""The paper's algorithms as ``fit`` methods, registered with ``fit`` by ``import bayesdp.paper``:

- ``"normalx-paper"``: MCMC-normalX exactly as Algorithm 1 (:mod:`.kernels.normalx_paper`);
- ``"fixeds-paper"``: MCMC-fixedS exactly as Algorithm 2 (:mod:`.kernels.fixeds_paper`);
- ``"nuts-normalx"``, ``"nuts-fixeds"``: numpyro's NUTS on the centred normalX model and on the
  fixedS model, cross-checks of ``"normalx"`` and ``"fixeds"``;
- ``"bs"``: MCMC-B&S (appendix C.1, :mod:`.bs`).

They run through the core's setups and runners (:mod:`bayesdp.inference.normalx`,
:mod:`~bayesdp.inference.fixeds`, :mod:`~bayesdp.inference.kernel_runner`,
:mod:`~bayesdp.inference.nuts`).
"""

from __future__ import annotations

import numpy as np

from .._jax import enable_x64
from ..errors import BayesdpInputError
from ..inference import fixeds, normalx
from ..inference.kernel_runner import (TARGET_ACCEPT, Kernel, kernel_run, run_kernel,
                                       run_kernel_batch)
from ..inference.methods import register_method
from ..inference.nuts import NUTS_OPTIONS, run_nuts
from ..inference.starts import initial_position, initial_sigma_y2
from ..models import regression as R
from . import bs

# The kernels (JAX) are imported inside the functions that build them: importing bayesdp.paper,
# as `bayesdp --help` does, loads no JAX

# -- Algorithm 2: "fixeds-paper" ----------------------------------------------------------------


def _fixeds_paper_kernel():
    """Algorithm 2's kernel (:mod:`.kernels.fixeds_paper`)."""
    from .kernels import fixeds_paper

    return Kernel("fixeds-paper", fixeds_paper.init, fixeds_paper.fixeds_paper_step,
                  sigma_y2_update="random walk", moves_S=False)


def _run_fixeds_paper(release, priors, **kw):
    """MCMC-fixedS exactly as Algorithm 2: :func:`bayesdp.inference.fixeds.run` with its
    kernel (Gibbs theta, random-walk MH on sigma_y^2); options
    :data:`~bayesdp.inference.fixeds.RANDOM_WALK_OPTIONS`."""
    return fixeds.run(release, priors, kernel=_fixeds_paper_kernel, **kw)


def _run_fixeds_paper_batch(releases, priors_list, **kw):
    """:func:`_run_fixeds_paper` for many releases of one shape in one compiled program."""
    return fixeds.run_batch(releases, priors_list, kernel=_fixeds_paper_kernel, **kw)


# -- Algorithm 1: "normalx-paper" ---------------------------------------------------------------

#: target_accept: of the S_j moves (and of sigma_y^2 unless target_accept_sigma_y2 is given);
#: alpha_init: the initial alpha_j of the Wishart proposals (None: the authors' (n_j/10)^2, at
#: least d + 1); sigma_y2_step: the initial random-walk step on sigma_y^2 (None: 0.1 times its
#: start); numpyro's chain_method
_NORMALX_PAPER_OPTIONS = {"target_accept": TARGET_ACCEPT, "target_accept_sigma_y2": None,
                          "alpha_init": None, "sigma_y2_step": None, "chain_method": None}


def _initial_log_alpha(release, alpha_init=None):
    """log alpha_j of the Wishart proposals W(S_j/alpha_j, alpha_j): the authors' (n_j/10)^2 by
    default, at least d + 1 (the proposal needs alpha > d - 1)."""
    d = release.d
    if alpha_init is None:
        alpha = np.maximum((release.n / 10.0) ** 2, d + 1.0)
    else:
        alpha = np.broadcast_to(np.asarray(alpha_init, dtype=float), (release.J,))
        if np.any(alpha <= d - 1) or not np.all(np.isfinite(alpha)):
            raise BayesdpInputError(f"alpha_init must be > d - 1 = {d - 1}, got {alpha_init!r}")
    return np.log(alpha)


def _normalx_paper_kernel():
    """Algorithm 1's kernel (:mod:`.kernels.normalx_paper`)."""
    from .kernels import normalx_paper

    return Kernel("normalx-paper", normalx_paper.init, normalx_paper.normalx_paper_step,
                  sigma_y2_update="random walk", moves_S=True)


def _normalx_paper_run(release, priors, *, target_accept, target_accept_sigma_y2, alpha_init,
                       sigma_y2_step):
    """The checked run of Algorithm 1 on one release: the centred normalX model, its chains
    from the authors' S_j estimate (:func:`bayesdp.inference.normalx.start_S`)."""
    s2_0 = initial_sigma_y2(release, priors)
    pos = initial_position(release, priors, normalx.start_S(release), s2_0)
    return kernel_run(_normalx_paper_kernel(), R.normalx_model, R.model_data(release, priors),
                      pos, _initial_log_alpha(release, alpha_init), s2_0,
                      target_accept=target_accept, target_accept_sigma_y2=target_accept_sigma_y2,
                      sigma_y2_step=sigma_y2_step)


def _run_normalx_paper(release, priors, *, seed, num_samples, num_chains, num_warmup,
                       progress_bar, chain_method, build_only=False, **options):
    """MCMC-normalX exactly as Algorithm 1 (Gibbs Sigma_x, Wishart-proposal MH on each S_j,
    Gibbs theta, random-walk MH on sigma_y^2); options :data:`_NORMALX_PAPER_OPTIONS`."""
    enable_x64()
    run = _normalx_paper_run(release, priors, **options)
    return run_kernel(run, seed=seed, num_samples=num_samples, num_chains=num_chains,
                      num_warmup=num_warmup, progress_bar=progress_bar,
                      chain_method=chain_method, build_only=build_only)


def _run_normalx_paper_batch(releases, priors_list, *, seeds, num_samples, num_chains,
                             num_warmup, progress_bar, chain_method, **options):
    """:func:`_run_normalx_paper` for many releases of one shape in one compiled program."""
    enable_x64()
    runs = [_normalx_paper_run(r, p, **options) for r, p in zip(releases, priors_list)]
    return run_kernel_batch(runs, seeds=seeds, num_samples=num_samples, num_chains=num_chains,
                            num_warmup=num_warmup, chain_method=chain_method)


# -- the NUTS cross-checks: "nuts-normalx", "nuts-fixeds" ---------------------------------------


def _run_nuts_normalx(release, priors, *, seed, num_samples, num_chains, num_warmup,
                      progress_bar, target_accept_prob, max_tree_depth, chain_method,
                      build_only=False):
    """numpyro NUTS on the centred normalX model (:func:`bayesdp.inference.normalx.setup`);
    options :data:`bayesdp.inference.nuts.NUTS_OPTIONS`."""
    enable_x64()
    model, data, pos = normalx.setup(release, priors, centred=True)
    return run_nuts(model, data, pos, seed=seed, num_samples=num_samples,
                    num_chains=num_chains, num_warmup=num_warmup, progress_bar=progress_bar,
                    target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                    chain_method=chain_method, fallback_chain_method="sequential",
                    build_only=build_only)


#: NUTS's options and those of the fixedS model's setup
_NUTS_FIXEDS_OPTIONS = {**NUTS_OPTIONS, **fixeds.FIXED_S_OPTIONS}


def _run_nuts_fixeds(release, priors, *, seed, num_samples, num_chains, num_warmup, progress_bar,
                     target_accept_prob, max_tree_depth, chain_method, fixed_s, s_noise,
                     build_only=False):
    """numpyro NUTS on the fixedS model (:func:`bayesdp.inference.fixeds.setup`); options
    :data:`_NUTS_FIXEDS_OPTIONS`."""
    enable_x64()
    model, data, pos, s_noise, theta = fixeds.setup(release, priors,
                                                    initial_sigma_y2(release, priors), fixed_s,
                                                    s_noise)
    out = run_nuts(model, data, pos, seed=seed, num_samples=num_samples, num_chains=num_chains,
                   num_warmup=num_warmup, progress_bar=progress_bar,
                   target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                   chain_method=chain_method, fallback_chain_method="sequential",
                   build_only=build_only)
    return out if build_only else fixeds.with_fixed_s(out, fixed_s, s_noise, theta)


# -- the records --------------------------------------------------------------------------------

_NORMALX_SAMPLES = ("theta, sigma_y^2, Sigma_x and every S_j (the normalX model: x ~ N(0, "
                    "Sigma_x), S_j ~ Wishart(n_j, Sigma_x))")
_FIXEDS_SAMPLES = "theta and sigma_y^2; S_j fixed at the nearest PSD matrix of S_hat_j"

register_method(
    "normalx-paper", _run_normalx_paper,
    "MCMC-normalX exactly as Algorithm 1 (Gibbs Sigma_x, Wishart-proposal MH on each S_j, "
    "Gibbs theta, RW-MH sigma_y^2), for reproducing the paper",
    model=R.normalx_model, samples=_NORMALX_SAMPLES, intercept=False,
    options=_NORMALX_PAPER_OPTIONS, run_batch=_run_normalx_paper_batch, checks=("s_hat",),
    log_likelihood=normalx.likelihood)
register_method(
    "fixeds-paper", _run_fixeds_paper,
    "MCMC-fixedS exactly as Algorithm 2 (Gibbs theta, RW-MH sigma_y^2), for reproducing the "
    "paper; 'fixeds' samples the same posterior and mixes better",
    model=R.fixeds_model, samples=_FIXEDS_SAMPLES, intercept=True,
    options=fixeds.RANDOM_WALK_OPTIONS, run_batch=_run_fixeds_paper_batch, checks=("s_noise",), log_likelihood=fixeds.likelihood)
register_method(
    "nuts-normalx", _run_nuts_normalx,
    "numpyro NUTS on the centred normalX model (a cross-check of 'normalx')",
    model=R.normalx_model, samples=_NORMALX_SAMPLES, intercept=True, options=NUTS_OPTIONS,
    checks=("s_hat",), log_likelihood=normalx.likelihood)
register_method(
    "nuts-fixeds", _run_nuts_fixeds,
    "numpyro NUTS on the fixedS model (a cross-check of 'fixeds')",
    model=R.fixeds_model, samples=_FIXEDS_SAMPLES, intercept=True, options=_NUTS_FIXEDS_OPTIONS,
    checks=("s_noise",), log_likelihood=fixeds.likelihood)
register_method(
    "bs", bs.run_bs,
    "MCMC-B&S (appendix C.1): Gibbs sampler on the CLT model of [S, z, y^T y] with exact "
    "Isserlis moments; needs include_yty=True; O(d^6)/sweep",
    model=None,
    samples="theta, sigma_y^2 and Sigma_x by the Gibbs sweep of Bernstein & Sheldon over the "
            "central-limit model of [S, z, y^T y] (a release made with include_yty=True); the "
            "sweep does not leave a numpyro model's posterior invariant",
    intercept=False, options=bs.OPTIONS, run_batch=bs.run_bs_batch,
    log_likelihood=bs.likelihood)
