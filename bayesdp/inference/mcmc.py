"""Running ``numpyro.infer.MCMC`` for the MCMC methods: one cached MCMC object per sampler and
shapes, the run, and the checks of the options every MCMC method shares.

:mod:`.nuts` (numpyro's NUTS) and :mod:`.kernel_runner` (the hand-written kernels) build their
MCMC objects through :func:`_cached_mcmc` and run them with :func:`_run_mcmc`.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict

import numpy as np

from ..errors import BayesdpInputError
from .methods import get_method

_MCMC_CACHE = OrderedDict()
_MCMC_CACHE_LOCK = threading.Lock()
MCMC_CACHE_SIZE = 4


def _cached_mcmc(key, make):
    """The ``numpyro.infer.MCMC`` object for ``key``, made by ``make()`` on a miss.

    numpyro caches, per MCMC object, the jitted pieces of a run (the kernel's init and sample
    functions, with the model data as a traced argument), so running the same object again on
    data of the same shapes reuses them. ``key`` must hold everything that is baked into the
    compiled functions: the kernel and its static options, the data's shapes, and the run
    settings. Each thread has its own objects (an MCMC object holds the state of the run in
    progress). The least recently used objects beyond ``MCMC_CACHE_SIZE`` are dropped, together
    with JAX's compiled code (:func:`bayesdp._jax.release_compiled_code`)."""
    key = (threading.get_ident(), key)
    with _MCMC_CACHE_LOCK:
        mcmc = _MCMC_CACHE.pop(key, None)
    if mcmc is None:
        mcmc = make()
    with _MCMC_CACHE_LOCK:
        _MCMC_CACHE[key] = mcmc
        evict = len(_MCMC_CACHE) > MCMC_CACHE_SIZE
        while len(_MCMC_CACHE) > MCMC_CACHE_SIZE:
            _MCMC_CACHE.popitem(last=False)
    if evict:
        from .._jax import release_compiled_code

        release_compiled_code()
    return mcmc


def _run_mcmc(mcmc, seed, data, extra_fields, init_params=None):
    """``mcmc.run`` from ``seed``, then drop what that run left in JAX's compilation cache of
    numpyro's ``_fori_collect_loop``: numpyro jits that function with a new loop body as a
    static argument on every run, so each run adds an executable that is never used again
    (and keeps its machine code mapped)."""
    mcmc.run(_keys(seed), data, extra_fields=extra_fields, init_params=init_params)
    try:
        import jax
        from numpyro.util import _fori_collect_loop
    except ImportError:  # a numpyro without it does not have this leak
        return
    jax.jit(_fori_collect_loop, static_argnums=(0, 1), donate_argnums=3).clear_cache()


def build_mcmc(method, release, priors, *, num_samples, num_warmup, num_chains=1, **options):
    """The ``numpyro.infer.MCMC`` object (not run) and its model data of an MCMC method, for
    timing its sampling loop after compilation (benchmarks, the reproduction of Figure 3).

    Parameters
    ----------
    method : str, a method whose runner runs ``numpyro.infer.MCMC``
    release, priors : the release and resolved priors
    num_samples, num_warmup, num_chains : int
    **options : the method's options

    Returns
    -------
    ``(mcmc, data)``: call ``mcmc.sampler.init(key, num_warmup, None, (data,), {})`` and
    ``mcmc.sampler.sample(state, (data,), {})``, or ``mcmc.run(key, data)``.
    """
    m = get_method(method)
    if "build_only" not in inspect.signature(m.run).parameters:
        raise BayesdpInputError(f"method {method!r} does not run numpyro.infer.MCMC")
    return m.run(release, priors, seed=0, num_samples=num_samples, num_chains=num_chains,
                 num_warmup=num_warmup, progress_bar=False, build_only=True,
                 **m.with_options(options))


def _check_target(name, v):
    """A target acceptance rate: a number in (0, 1)."""
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise BayesdpInputError(f"{name} must be a number in (0, 1), got {v!r}") from None
    if not 0 < v < 1:
        raise BayesdpInputError(f"{name} must lie in (0, 1), got {v}")
    return v


def _progress(progress_bar):
    """numpyro's progress bar: ``progress_bar`` True/False, or None = when stderr is a terminal
    (the rule of every bayesdp progress bar, :func:`bayesdp.progress.show`)."""
    from ..progress import show

    return show(progress_bar)


def _chain_method(chain_method, default):
    """numpyro's ``chain_method``: the given one (checked), else ``default``."""
    cm = default if chain_method is None else chain_method
    if cm not in ("vectorized", "sequential", "parallel"):
        raise BayesdpInputError(
            f"chain_method must be 'vectorized', 'sequential' or 'parallel', got {cm!r}")
    return cm


def _data_shapes(data):
    """(path, shape, dtype) of every array in the model data: the compiled sampler's cache key."""
    import jax

    return tuple((jax.tree_util.keystr(p), np.shape(v), str(np.asarray(v).dtype))
                 for p, v in jax.tree_util.tree_leaves_with_path(data))


def _keys(seed):
    """The PRNG key of a run from its seed."""
    import jax

    return jax.random.PRNGKey(int(seed) % (2**63))


def _jax_versions():
    import jax
    import numpyro

    return {"numpyro_version": numpyro.__version__, "jax_version": jax.__version__}
