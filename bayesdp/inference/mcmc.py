"""Running the MCMC methods' kernels: one cached ``numpyro.infer.MCMC`` object per sampler and
shapes, its chains run as one program compiled once (:func:`_run_mcmc`, in place of
``MCMC.run``), and the checks of the options every MCMC method shares.

:mod:`.nuts` (numpyro's NUTS) and :mod:`.kernel_runner` (the hand-written kernels) build their
MCMC objects through :func:`_cached_mcmc` and run them with :func:`_run_mcmc`.
"""

from __future__ import annotations

import inspect
import threading
from collections import OrderedDict

import numpy as np

from .._jax import release_compiled_code, without_numpyro_checks
from ..errors import BayesdpInputError
from ..progress import bar, show
from .methods import get_method

# JAX and numpyro are imported inside the functions that use them: importing bayesdp.inference,
# as `bayesdp --help` does, loads neither

_MCMC_CACHE = OrderedDict()
_MCMC_CACHE_LOCK = threading.Lock()
MCMC_CACHE_SIZE = 4


def _cached_mcmc(key, make):
    """The ``numpyro.infer.MCMC`` object for ``key``, made by ``make()`` on a miss.

    :func:`_run_mcmc` keeps the compiled program of the object's runs on it (the model data, the
    start and the kernel's inputs are its arguments), so running the same object again on data
    of the same shapes compiles nothing. ``key`` must hold everything that is baked into the
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
        release_compiled_code()
    return mcmc


@without_numpyro_checks
def _run_mcmc(mcmc, seed, data, extra_fields, init_params=None, progress_bar=False):
    """Run the chains of ``mcmc`` (a ``numpyro.infer.MCMC``, not run) from ``seed`` on ``data``:
    its kernel's ``init`` and ``num_warmup + num_samples`` calls of its ``sample``, exactly the
    iterations ``mcmc.run`` makes, as ONE program compiled the first time and kept on the MCMC
    object, so a later fit with the same object (the same kernel, options and data shapes:
    :func:`_cached_mcmc`) compiles nothing. (``mcmc.run`` jits numpyro's collection loop with a
    new loop body as a static argument on every call, so every call compiles it again.)

    The chains run as ``mcmc.chain_method`` says: ``"vectorized"`` (``jax.vmap``),
    ``"sequential"`` (``jax.lax.map``) or ``"parallel"`` (``jax.pmap``, one device per chain).
    Each chain's key is numpyro's (``random.split(key, num_chains)``), so the draws are those of
    ``mcmc.run`` with the same seed up to floating-point rounding.

    Parameters
    ----------
    mcmc : numpyro.infer.MCMC
    seed : int
    data : the model's only argument (a NamedTuple of arrays)
    extra_fields : tuple of str
        Fields of the kernel's state to keep per draw besides the sample field, as numpyro
        names them (``"adapt_state.step_size"`` for a nested one).
    init_params : dict or None
        The chains' start in the kernel's coordinates (a leading chain axis when there are
        several chains), or None for the kernel's own.
    progress_bar : bool
        Draw a bar (bayesdp's rule, :func:`bayesdp.progress.show`; numpyro's own turns itself
        off under CI). Part of the compiled program, so of the sampler's cache key.

    A kernel whose ``init`` reads inputs set on it before the run (a starting point, a starting
    mass matrix) has ``run_inputs()`` (a pytree of them) and ``set_run_inputs(inputs)``: they
    are passed to the compiled program as an argument, so a later run uses its own.

    Returns
    -------
    ``(draws, extra)``: dicts of numpy arrays shaped (chain, draw, ...), as
    ``mcmc.get_samples(group_by_chain=True)`` and ``mcmc.get_extra_fields(group_by_chain=True)``.
    """
    import jax

    keys = _keys(seed)
    if mcmc.num_chains > 1:
        keys = jax.random.split(keys, mcmc.num_chains)
    if init_params is not None:
        init_params = jax.tree.map(jax.numpy.asarray, init_params)
    # the kernel's inputs of this run (a starting point, a mass matrix) are arguments of the
    # compiled program, not constants of its first trace
    inputs = mcmc.sampler.run_inputs() if hasattr(mcmc.sampler, "run_inputs") else None
    runs = mcmc.__dict__.setdefault("_bayesdp_runs", {})
    how = (tuple(extra_fields), init_params is not None, bool(progress_bar))
    if how not in runs:
        runs[how] = _compiled_run(mcmc, *how)
    run = runs[how]
    total = (mcmc.num_warmup + mcmc.num_samples) * (
        1 if mcmc.num_chains == 1 or mcmc.chain_method == "vectorized" else mcmc.num_chains)

    with bar(total, desc="sample", progress=run.show) as b:
        run.progress["bar"] = b
        try:
            draws, extra = run(keys, init_params, inputs, data)
            draws, extra = jax.tree.map(np.asarray, (draws, extra))
            b.update(total - b.n)  # the iterations after the last multiple of _PROGRESS_EVERY
        finally:
            run.progress["bar"] = None
    if mcmc.num_chains == 1:
        draws, extra = jax.tree.map(lambda a: a[None], (draws, extra))
    return draws, extra


#: Iterations between two updates of the progress bar of a compiled run
_PROGRESS_EVERY = 20


def _compiled_run(mcmc, extra_fields, has_init_params, show):
    """The compiled ``run(keys, init_params, inputs, data) -> (draws, extra)`` of
    :func:`_run_mcmc` for this MCMC object's kernel and settings; ``run.progress["bar"]`` is the
    bar a call updates (every ``_PROGRESS_EVERY`` iterations, when ``show``)."""
    import jax
    from numpyro.util import nested_attrgetter

    sampler, W, K = mcmc.sampler, int(mcmc.num_warmup), int(mcmc.num_samples)
    C, cm = int(mcmc.num_chains), mcmc.chain_method
    progress = {"bar": None}
    getters = [nested_attrgetter(f) for f in extra_fields]

    def getter(s):  # a tuple however many fields (numpyro's getter unpacks a single one)
        return tuple(g(s) for g in getters)

    def tick(n):
        if progress["bar"] is not None:
            progress["bar"].update(int(n))

    def report(i):
        if show:
            jax.lax.cond((i + 1) % _PROGRESS_EVERY == 0,
                         lambda: jax.debug.callback(tick, _PROGRESS_EVERY), lambda: None)

    def chains(keys, init_params, inputs, data, vectorised):
        """The chains of ``keys`` (one key, or a batch when ``vectorised``): init, W warm-up
        iterations, K kept ones."""
        def init(key, ip):
            return sampler.init(key, W, ip, (data,), {})

        def step(s):
            return sampler.sample(s, (data,), {})

        def keep(s):  # the draw in the model's coordinates (after init made the transforms)
            z = getattr(s, sampler.sample_field)
            return sampler.postprocess_fn((data,), {})(z), getter(s)

        if vectorised:
            init, step, keep = jax.vmap(init), jax.vmap(step), jax.vmap(keep)
        if inputs is None:
            states = init(keys, init_params)
        else:  # the kernel's init reads this run's (traced) inputs; its own are put back
            saved = sampler.run_inputs()
            sampler.set_run_inputs(inputs)
            try:
                states = init(keys, init_params)
            finally:
                sampler.set_run_inputs(saved)
        # one loop over warm-up and sampling, so the kernel is traced and compiled once: every
        # iteration writes its draw at max(i - W, 0) (the warm-up's are overwritten by the
        # first kept one), as numpyro's fori_collect does
        kept = jax.tree.map(lambda a: jax.numpy.zeros((K,) + a.shape, a.dtype),
                            jax.eval_shape(keep, states))

        def iteration(carry, i):
            s, kept = carry
            report(i)
            s = step(s)
            at = jax.numpy.maximum(i - W, 0)
            kept = jax.tree.map(lambda b, x: jax.lax.dynamic_update_index_in_dim(b, x, at, 0),
                                kept, keep(s))
            return (s, kept), None

        (_, (draws, extra)), _ = jax.lax.scan(iteration, (states, kept), np.arange(W + K))
        if vectorised:  # (draw, chain, ...) -> (chain, draw, ...)
            draws, extra = jax.tree.map(lambda a: jax.numpy.swapaxes(a, 0, 1), (draws, extra))
        return draws, dict(zip(extra_fields, extra))

    def run_chains(k, ip, inp, data):
        if C == 1 or cm == "vectorized":
            return chains(k, ip, inp, data, C > 1)
        if cm == "sequential":
            return jax.lax.map(lambda a: chains(a[0], a[1], inp, data, False), (k, ip))
        return chains(k, ip, inp, data, False)  # parallel: one device per chain, under pmap

    if cm == "parallel" and C > 1:
        fn = jax.pmap(run_chains, in_axes=(0, 0, None, None))
    else:
        fn = jax.jit(run_chains)

    def run(keys, init_params, inputs, data):
        return fn(keys, init_params if has_init_params else None, inputs, data)

    run.progress, run.show = progress, bool(show)
    return run


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
