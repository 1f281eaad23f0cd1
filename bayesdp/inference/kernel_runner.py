"""The hand-written kernels of :mod:`bayesdp.inference.kernels` run as ``fit`` methods: through
``numpyro.infer.MCMC`` (:class:`.dp_kernel.DPKernel`, :func:`run_kernel`), or for many releases
of one shape in one compiled program (:func:`.dp_kernel.run_chains_batched`,
:func:`run_kernel_batch`).

Chains default to ``chain_method="vectorized"`` (one compiled program for all chains); the
proposal scales adapt during warm-up only.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from .._jax import enable_x64, without_numpyro_checks
from ..errors import BayesdpInputError
from .compilation_cache import default_compilation_cache
from .mcmc import (_cached_mcmc, _chain_method, _check_target, _data_shapes, _jax_versions,
                   _keys, _progress, _run_mcmc)
from .methods import MethodResult

# JAX, numpyro and dp_kernel (numpyro) are imported inside the functions that use them:
# importing bayesdp.inference, as `bayesdp --help` does, loads neither

#: The acceptance rate the proposal scales adapt to during warm-up (the authors' 0.2)
TARGET_ACCEPT = 0.2


class Kernel(NamedTuple):
    """A hand-written kernel: the ``init`` and ``step`` of its module (``step(key, state, data,
    tuning) -> (state, info)``), how it moves sigma_y^2 (:data:`SIGMA_Y2_UPDATES`), whether it
    moves the S_j (MH moves whose acceptance it reports), and ``prepare(data) -> data``, what
    it computes once per release before its chains run (None: nothing)."""

    name: str
    init: Callable
    step: Callable
    sigma_y2_update: str
    moves_S: bool
    prepare: Callable | None = None


#: How a kernel moves sigma_y^2: "random walk" (Metropolis-Hastings whose step adapts in
#: warm-up), "independence" (Metropolis-Hastings from a proposal fixed per release, nothing to
#: adapt), "fixed" (held at its start)
SIGMA_Y2_UPDATES = ("random walk", "independence", "fixed")


class _KernelRun(NamedTuple):
    """A kernel's run on one release, its options checked (:func:`kernel_run`): the model the
    kernel targets, its data, the chains' start and the initial tuning, and the target
    acceptance rates (S moves, sigma_y^2 moves)."""

    kernel: Kernel
    model: Callable
    data: object
    pos: dict
    log_alpha: np.ndarray
    log_step: float
    targets: tuple


def kernel_run(kernel, model, data, pos, log_alpha, sigma_y2, *, target_accept,
               target_accept_sigma_y2, sigma_y2_step) -> _KernelRun:
    """The :class:`_KernelRun` of ``kernel`` from ``pos``, with its options checked.

    Parameters
    ----------
    kernel : Kernel
    model, data, pos : the model the kernel targets, its data, the start of its latent sites
    log_alpha : (J,) log alpha_j of the Wishart proposals (zeros for a kernel without S moves)
    sigma_y2 : float, the start of sigma_y^2 (scales the default random-walk step)
    target_accept, target_accept_sigma_y2 : float in (0, 1) or None
        Targets of the S moves and of the sigma_y^2 moves (None: ``target_accept``).
    sigma_y2_step : float > 0 or None
        The initial random-walk step on sigma_y^2 (None: 0.1 sigma_y2; unused by the other
        updates).
    """
    ta = _check_target("target_accept", target_accept)
    tsy = ta if target_accept_sigma_y2 is None else _check_target("target_accept_sigma_y2",
                                                                  target_accept_sigma_y2)
    if kernel.sigma_y2_update not in SIGMA_Y2_UPDATES:
        raise ValueError(f"kernel.sigma_y2_update must be one of {SIGMA_Y2_UPDATES}")
    if sigma_y2_step is None:
        sigma_y2_step = 0.1 * sigma_y2
    elif not float(sigma_y2_step) > 0:
        raise BayesdpInputError(f"sigma_y2_step must be > 0, got {sigma_y2_step!r}")
    if kernel.prepare is not None:
        import jax

        data = jax.jit(kernel.prepare)(data)
    return _KernelRun(kernel, model, data, pos, log_alpha, math.log(float(sigma_y2_step)),
                      (ta, tsy))


@without_numpyro_checks
def run_kernel(run: _KernelRun, *, seed, num_samples, num_chains, num_warmup, progress_bar,
               chain_method, build_only=False):
    """Chains of ``run``'s kernel through ``numpyro.infer.MCMC``.

    Parameters
    ----------
    run : _KernelRun
    seed, num_samples, num_chains, num_warmup, progress_bar : as in :func:`bayesdp.fit`
    chain_method : numpyro's (default "vectorized")
    build_only : bool
        Return ``(mcmc, data)``, the MCMC object not run (:func:`.mcmc.build_mcmc`).

    Returns
    -------
    :class:`MethodResult` (:func:`_kernel_result`).
    """
    enable_x64()
    default_compilation_cache()
    from numpyro.infer import MCMC

    from .dp_kernel import DPKernel

    k = run.kernel
    (ta, tsy), pos, la, log_step0 = run.targets, run.pos, run.log_alpha, run.log_step
    cm, pb = _chain_method(chain_method, "vectorized"), _progress(progress_bar)

    def make():
        kernel = DPKernel(run.model, k.init, k.step, pos, target_accept_S=ta,
                          target_accept_sigma_y2=tsy, log_alpha_init=la, log_step_init=log_step0)
        return MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples,
                    num_chains=num_chains, chain_method=cm, progress_bar=pb, jit_model_args=True)

    if build_only:
        return make(), run.data
    # the compiled sampler of an earlier fit with the same kernel, options and shapes is reused
    key = ("kernel", k.step, run.model, ta, tsy, int(num_warmup), int(num_samples),
           int(num_chains), cm, pb, _data_shapes(run.data))
    mcmc = _cached_mcmc(key, make)
    mcmc.sampler.set_initial_values(pos, la, log_step0)
    draws, extra = _run_mcmc(mcmc, seed, run.data, ("info", "tuning"), progress_bar=pb)
    return _kernel_result(run, draws, extra["info"], extra["tuning"], mcmc.chain_method,
                          num_warmup)


@without_numpyro_checks
def run_kernel_batch(runs, *, seeds, num_samples, num_chains, num_warmup, chain_method):
    """:func:`run_kernel` for many releases of the same shapes in one compiled program
    (:func:`.dp_kernel.run_chains_batched`): the chains of ``runs[r]`` are those
    :func:`run_kernel` runs for it with seed ``seeds[r]``, up to floating-point rounding.
    ``chain_method`` is checked and recorded; the chains of each release are vectorised.
    Returns a list of :class:`MethodResult`."""
    enable_x64()
    default_compilation_cache()
    import jax

    from .dp_kernel import run_chains_batched

    cm = _chain_method(chain_method, "vectorized")
    h = runs[0]
    if len({_data_shapes(r.data) for r in runs}) > 1 or len({r.kernel.step for r in runs}) > 1:
        raise BayesdpInputError("releases: a batch needs releases of one shape (J, d) and one "
                                "kernel; fit the others separately")

    def stack(*xs):
        return np.stack([np.asarray(x) for x in xs])

    keys = np.stack([np.asarray(_keys(s)) for s in seeds])
    if num_chains > 1:  # numpyro's split of a run's key into one key per chain
        keys = np.stack([np.asarray(jax.random.split(k, num_chains)) for k in keys])
    data = jax.tree.map(stack, *[r.data for r in runs])
    pos = {k: stack(*[r.pos[k] for r in runs]) for k, v in h.pos.items() if v is not None}
    out = run_chains_batched(keys, data, pos, stack(*[r.log_alpha for r in runs]),
                             np.array([r.log_step for r in runs]), init=h.kernel.init,
                             step=h.kernel.step, targets=h.targets, num_warmup=int(num_warmup),
                             num_samples=int(num_samples))
    out = jax.tree.map(np.asarray, out)
    if num_chains == 1:  # (R, K, ...) -> (R, 1, K, ...), as group_by_chain
        out = jax.tree.map(lambda a: a[:, None], out)
    z, info, tuning = out
    return [_kernel_result(run, {k: v[r] for k, v in z.items()},
                           jax.tree.map(lambda a: a[r], info),
                           jax.tree.map(lambda a: a[r], tuning), cm, num_warmup)
            for r, run in enumerate(runs)]


def _kernel_result(run: _KernelRun, draws, info, tuning, chain_method, num_warmup):
    """The :class:`MethodResult` of a kernel from its draws and its Info and Tuning per sweep,
    shaped (chain, draw, ...): the draws, the acceptance rates and proposal scales per draw,
    and attrs naming the sampler and its settings."""
    k = run.kernel
    ta, tsy = run.targets
    posterior = {name: np.asarray(v) for name, v in draws.items()}
    attrs = {"sampler": f"bayesdp {k.name} kernel", "target_accept": ta,
             "target_accept_sigma_y2": tsy, "chain_method": chain_method,
             "num_warmup": num_warmup}
    dims = {}
    if k.sigma_y2_update == "random walk":
        stats = {"acceptance_rate_sigma_y2": np.asarray(info.accept_prob_sigma_y2),
                 "step_size_sigma_y2": np.exp(np.asarray(tuning.log_step))}
    else:
        stats = {"acceptance_rate_sigma_y2": np.asarray(info.accept_prob_sigma_y2)}
    attrs["sigma_y2_update"] = k.sigma_y2_update
    attrs["acceptance_rate_sigma_y2_mean"] = float(np.mean(stats["acceptance_rate_sigma_y2"]))
    if k.moves_S:
        stats["acceptance_rate_S"] = np.asarray(info.accept_prob_S)
        stats["alpha_S"] = np.exp(np.asarray(tuning.log_alpha))
        dims = {"acceptance_rate_S": ["holder"], "alpha_S": ["holder"]}
        attrs["acceptance_rate_S_mean"] = np.mean(stats["acceptance_rate_S"], axis=(0, 1))
        attrs["proposal_ratio"] = 1  # every kernel has its Hastings correction
    attrs.update(_jax_versions())
    return MethodResult(posterior=posterior, sample_stats=stats, attrs=attrs, dims=dims)
