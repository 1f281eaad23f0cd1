"""The MCMC ``fit`` methods (the table :data:`MCMC_METHODS`): the hand-written kernels of
:mod:`bayesdp.inference.kernels` run as numpyro ``MCMCKernel``s (:mod:`.dp_kernel`), and numpyro's
NUTS on the same models (:mod:`bayesdp.models.regression`).

Chains run through ``numpyro.infer.MCMC``; the hand-written kernels default to
``chain_method="vectorized"`` (one compiled program for all chains, no global device setting)
and handle a batch of keys in ``init``. Step sizes adapt during warm-up only.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from typing import NamedTuple, Optional

import numpy as np

from ..errors import BayesdpInputError
from .._jax import enable_x64
from . import closed_form
from .fit import MethodResult, register_method

TARGET_ACCEPT = 0.2


_MCMC_CACHE = OrderedDict()
_MCMC_CACHE_LOCK = threading.Lock()
MCMC_CACHE_SIZE = 4


def _cached_mcmc(key, make):
    """The ``numpyro.infer.MCMC`` object for ``key``, made by ``make()`` on a miss.

    numpyro caches, per MCMC object, the jitted pieces of a run (``MCMC._get_cached_fns``: the
    kernel's init and sample functions, with the model data as a traced argument), so running
    the same object again on data of the same shapes reuses them; its outer collection loop is
    still lowered again on every run (see :func:`_run_mcmc`). Measured: 5.2 s for a first
    11,000-iteration normalx fit at d = 5, J = 10, 3.1 s for the next (0.9 s of sampling).
    ``key`` must hold everything that is baked into the compiled functions: the kernel and its
    static options, the data's shapes, and the run settings. Least recently used objects beyond
    ``MCMC_CACHE_SIZE`` are dropped (each holds its last run's draws until reused), together
    with JAX's compiled code (:func:`bayesdp._jax.release_compiled_code`; without it every new
    shape kept about 19 MiB and 24 memory maps for good)."""
    # an MCMC object holds the state of the run in progress: each thread gets its own (fits run
    # concurrently in threads, e.g. compare(executor=ThreadPoolExecutor(2)))
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


def _unconstrained_init(model, data, pos, num_chains):
    """``pos`` (constrained values) in the unconstrained space NUTS works in, one copy per
    chain when there are several."""
    import jax.numpy as jnp
    from numpyro.infer.util import unconstrain_fn

    u = unconstrain_fn(model, (data,), {}, {k: jnp.asarray(v) for k, v in pos.items()})
    if num_chains > 1:
        u = {k: jnp.broadcast_to(v, (num_chains,) + v.shape) for k, v in u.items()}
    return u


HESSIAN_BATCH = 4


def _laplace_inverse_mass(model, data, pos):
    """A diagonal inverse mass matrix for NUTS to start its warm-up from: the marginal
    variances diag(H^{-1}) of the Laplace approximation at the starting point ``pos``, H the
    Hessian of the potential in NUTS's unconstrained coordinates (its eigenvalues taken in
    absolute value and floored at 1e-10 of the largest, should the start not be in a convex
    region; None, numpyro's identity, if the Hessian is not finite). From the identity,
    warm-up's first windows spent most of their leapfrog steps on the coordinates of Sigma_x
    (posterior variances down to 3e-5 beside the unit-scale Bartlett variables):
    docs/methods.md."""
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    u0 = _unconstrained_init(model, data, pos, 1)
    hvp = _potential_hvp(model, tuple((k, np.shape(v)) for k, v in sorted(u0.items())))
    x = ravel_pytree(u0)[0]
    k = HESSIAN_BATCH
    eye = np.eye(x.size + (-x.size) % k)[:, :x.size]  # padded to whole batches
    H = np.concatenate([np.asarray(hvp(jnp.asarray(eye[i:i + k]), x, data))
                        for i in range(0, len(eye), k)])[:x.size]
    if not np.all(np.isfinite(H)):
        return None
    w, V = np.linalg.eigh(0.5 * (H + H.T))
    w = np.maximum(np.abs(w), 1e-10 * np.abs(w).max())
    return jnp.asarray(np.einsum("ik,k,ik->i", V, 1.0 / w, V))


@functools.lru_cache(maxsize=8)
def _potential_hvp(model, shapes):
    """jit of HESSIAN_BATCH Hessian-vector products of the model's potential over the flat
    unconstrained vector of sites with these ``shapes`` ((name, shape) pairs, sorted). The Hessian is assembled from them in a Python loop: one
    program with all columns (``jax.hessian``), or with 16 or more at a time, never finished
    at d = 20, J = 10 on one CPU device (XLA sat idle; with 4 host devices it ran in 4 s)."""
    import jax
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import potential_energy

    _, unravel = ravel_pytree({k: jnp.zeros(shape) for k, shape in shapes})

    def hvp(vs, x, data):
        grad = jax.grad(lambda x: potential_energy(model, (data,), {}, unravel(x)))
        return jax.vmap(lambda v: jax.jvp(grad, (x,), (v,))[1])(vs)

    return jax.jit(hvp)


def _compiled_init(init_fn):
    """numpyro's HMC ``init_fn`` run as one compiled program.

    numpyro calls it outside ``jit`` (under ``vmap`` for vectorized chains), so JAX dispatches
    and compiles each operation of the potential's value and gradient one by one: about 20 s
    of a first ``normalx`` fit at d = 5, J = 10 was spent there (measured with
    ``jax_log_compiles``), against a few seconds for one compilation. ``init_fn`` sets some
    variables of its closure while it runs (numpyro's ``hmc``: the warm-up schedule, tree
    depth, momentum generator), from its static arguments only; the compiled program is reused
    only while those arguments are the ones it was traced with, so those variables stay right.
    Static arguments other than plain Python values (a given mass matrix) fall back to
    numpyro's own call."""
    import jax

    traced = {}

    def plain(v):
        if isinstance(v, (list, tuple)):
            return all(plain(x) for x in v)
        return v is None or isinstance(v, (bool, int, float, str))

    def run(init_params, *, model_args, model_kwargs, rng_key, **static):
        # a starting inverse mass matrix (an array) is traced, like the data
        mass = {k: static.pop(k) for k in ("inverse_mass_matrix",) if k in static}
        if (not all(plain(v) for v in static.values())
                or any(isinstance(v, dict) for v in mass.values())):
            return init_fn(init_params, model_args=model_args, model_kwargs=model_kwargs,
                           rng_key=rng_key, **mass, **static)
        key = repr(sorted(static.items())) + repr({k: None if v is None else np.shape(v)
                                                   for k, v in mass.items()})
        if traced.get("key") != key:
            traced.update(key=key, fn=jax.jit(lambda p, a, k, r, m: init_fn(
                p, model_args=a, model_kwargs=k, rng_key=r, **m, **static)))
        return traced["fn"](init_params, model_args, model_kwargs, rng_key, mass)

    return run


def _nuts(model, **options):
    """``numpyro.infer.NUTS(model, **options)`` whose initialisation is compiled
    (:func:`_compiled_init`); the sampler itself is numpyro's, unchanged."""
    return _nuts_class()(model, **options)


@functools.lru_cache(maxsize=None)
def _nuts_class():
    from numpyro.infer import NUTS

    class CompiledInitNUTS(NUTS):
        def set_initial_inverse_mass(self, inverse_mass):
            """The diagonal inverse mass matrix the next run's warm-up starts from (None:
            the identity); numpyro reads it when the run initialises the kernel."""
            self._inverse_mass_matrix = inverse_mass

        def _init_state(self, rng_key, model_args, model_kwargs, init_params):
            new = self._init_fn is None
            out = super()._init_state(rng_key, model_args, model_kwargs, init_params)
            if new and self._init_fn is not None:
                self._init_fn = _compiled_init(self._init_fn)
            return out

    return CompiledInitNUTS


def _run_mcmc(mcmc, seed, data, extra_fields, init_params=None):
    """``mcmc.run`` and then drop what that run left in JAX's compilation cache of numpyro's
    ``_fori_collect_loop``.

    numpyro jits ``_fori_collect_loop`` (a module-level function) with a new jitted loop body as
    a static argument on every run, so each run adds an executable to that function's cache that
    is never used again. Each one keeps its machine code mapped (about 120 memory maps per
    normalX fit, measured), and after some 500 fits in one process LLVM fails with "Cannot
    allocate memory" and the process dies (seen in a long ``bayesdp compare`` run; the kernel's
    limit is vm.max_map_count = 65530). Clearing that one function's cache loses nothing that
    would be reused."""
    mcmc.run(_keys(seed), data, extra_fields=extra_fields, init_params=init_params)
    try:
        import jax
        from numpyro.util import _fori_collect_loop
    except ImportError:  # a numpyro without it does not have this leak
        return
    jax.jit(_fori_collect_loop, static_argnums=(0, 1), donate_argnums=3).clear_cache()


COMPILATION_CACHE_ENV = "BAYESDP_COMPILATION_CACHE"
#: Values of BAYESDP_COMPILATION_CACHE that turn the cache off (also for the ``bayesdp`` command)
COMPILATION_CACHE_OFF = ("0", "off", "no", "false")


def default_compilation_cache_dir():
    """``$XDG_CACHE_HOME/bayesdp/jax``, else ``~/.cache/bayesdp/jax``."""
    import os

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bayesdp", "jax")


def enable_compilation_cache(path=None, min_compile_time_secs=0.5):
    """Turn on JAX's persistent compilation cache (a process-wide JAX setting) in ``path``
    (default ``$BAYESDP_COMPILATION_CACHE``, else :func:`default_compilation_cache_dir`); returns
    the path. JAX does not limit its size (a limit needs the ``filelock`` package); delete the
    folder to clear it.

    ``numpyro.infer.MCMC.run`` lowers its sampling loop afresh on every call (its
    ``fori_collect`` wraps the cached loop body in a new ``jax.jit`` each time, so jax's
    in-memory cache misses even when the same MCMC object runs again), which costs 2-10 s of
    XLA compilation per ``fit``. With this cache the identical program is loaded from disk
    instead: repeated fits of releases of the same shape, in this process or later ones, skip
    the compilation. The ``bayesdp`` command turns it on (:func:`command_compilation_cache`);
    in Python it is off unless called, or unless the environment variable
    ``BAYESDP_COMPILATION_CACHE`` names a directory, which turns it on for every ``fit``."""
    import os

    import jax

    if path is None:
        path = os.environ.get(COMPILATION_CACHE_ENV) or default_compilation_cache_dir()
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
    return str(path)


def _cache_env():
    """BAYESDP_COMPILATION_CACHE: None when unset or empty, "off" for the values that turn the
    cache off, else the directory."""
    import os

    value = os.environ.get(COMPILATION_CACHE_ENV, "").strip()
    if not value:
        return None
    return "off" if value.lower() in COMPILATION_CACHE_OFF else value


def _compilation_cache_from_env():
    import jax

    value = _cache_env()
    if value not in (None, "off") and not jax.config.jax_compilation_cache_dir:
        enable_compilation_cache(value)


def command_compilation_cache():
    """The ``bayesdp`` command's default: JAX's compilation cache on disk, in
    ``$BAYESDP_COMPILATION_CACHE`` or :func:`default_compilation_cache_dir`, unless that
    variable turns it off ("0", "off", ...). A second ``bayesdp fit --method normalx`` of a
    release of the same shape then loads NUTS's compiled programs instead of compiling them
    again (docs/methods.md, "Cost"). Returns the directory, or None when off or when the
    directory cannot be made (the command then runs without the cache).

    JAX is not imported here: when it has not been imported yet, the setting goes into the
    environment variables JAX reads when it is imported (``JAX_COMPILATION_CACHE_DIR``,
    ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``; values the user already set there are left
    alone), so that commands that never use JAX (``--help``, ``fast``, ``release``) do not load
    it. Processes the command starts inherit the setting."""
    import os
    import sys

    value = _cache_env()
    if value == "off":
        return None
    # every program, however quick to compile: numpyro's model tracing compiles ~130 small
    # ones (about 5 s together at d = 5, J = 10), which a 0.5 s floor never stores
    min_secs = 0.0
    try:
        if "jax" in sys.modules:
            return enable_compilation_cache(value, min_compile_time_secs=min_secs)
        path = os.environ.get("JAX_COMPILATION_CACHE_DIR") or value or \
            default_compilation_cache_dir()
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(path))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", str(min_secs))
    return str(path)


# ---------------------------------------------------------------------------------------------
# Initial values
# ---------------------------------------------------------------------------------------------


def initial_sigma_y2(release, priors):
    """Start for sigma_y^2: the plug-in (B_y/3)^2 when the release has bounds, else the prior
    mean b/(a-1) (or the mode b/(a+1) when a <= 1)."""
    if release.bounds is not None:
        return float((release.bounds[1] / 3.0) ** 2)
    return float(priors.b / (priors.a - 1.0) if priors.a > 1 else priors.b / (priors.a + 1.0))


def initial_position(release, priors, S_init, sigma_y2):
    """theta at its conditional mean given S_init and sigma_y2; Sigma_x at the mode of its
    conditional given S_init."""
    mean, _, _ = closed_form.gaussian_theta_posterior(
        S_init, release.z_hat, sigma_y2, closed_form.z_noise_covariances(release),
        priors.m, priors.C)
    d = release.d
    Sx = None if release.intercept else (  # the intercept model's Sigma_x: intercept_setup
        (priors.Lambda + S_init.sum(0)) / (priors.kappa + release.n_total + d + 1.0))
    return {"theta": mean, "sigma_y2": np.float64(sigma_y2), "Sigma_x": Sx, "S": S_init}


def initial_log_alpha(release, alpha_init=None):
    """log alpha_j: the authors' (n_j/10)^2 by default, at least d + 1 (the proposal needs
    alpha > d - 1)."""
    d = release.d
    if alpha_init is None:
        alpha = np.maximum((release.n / 10.0) ** 2, d + 1.0)
    else:
        alpha = np.broadcast_to(np.asarray(alpha_init, dtype=float), (release.J,))
        if np.any(alpha <= d - 1) or not np.all(np.isfinite(alpha)):
            raise BayesdpInputError(f"alpha_init must be > d - 1 = {d - 1}, got {alpha_init!r}")
    return np.log(alpha)


def fixeds_z_noise(release, priors, S_fix, sigma_y2, fixed_s="psd", s_noise=None):
    """Noise of z_hat given the fixed S for MCMC-fixedS and NUTS-fixedS: ``(shift, Sigma_z)``,
    the s_noise used, and the plug-in theta (eiv only, else None).

    ``s_noise`` as in :func:`closed_form.z_given_s_noise`; None takes the release's
    ``provenance["s_noise"]``, else "conditional" (the paper's sigma_z^2 I for iid releases).
    "eiv" needs theta in the covariance; a Gibbs step on theta cannot carry it, so the covariance
    is evaluated at the Bayes-fixedS-fast eiv fixed point (a plug-in, as in the fast method)."""
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


def _check_release_for_normalx(release):
    closed_form.require_wishart_valid(release, "normalx")
    if release.noise_cov is not None:
        raise BayesdpInputError(
            "release.noise_cov: the normalX model needs iid noise on S_hat (sigma_s); this "
            "release has a general noise covariance - use method='fixeds' or 'nuts-fixeds'")
    if np.any(release.sigma_s <= 0):
        raise BayesdpInputError("release.sigma_s must be > 0 for the normalX model (S_hat "
                                "would pin S exactly); use method='fixeds'")
    if np.any(release.n < release.d):
        raise BayesdpInputError(
            f"release.n: the Wishart(n_j, Sigma_x) model needs n_j >= d = {release.d} rows per "
            f"holder, got {release.n.tolist()}")


def _check_target(name, v):
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
    cm = default if chain_method is None else chain_method
    if cm not in ("vectorized", "sequential", "parallel"):
        raise BayesdpInputError(
            f"chain_method must be 'vectorized', 'sequential' or 'parallel', got {cm!r}")
    return cm


def _nuts_chain_method(num_chains, fallback):
    """NUTS's default ``chain_method``: ``"parallel"`` (numpyro: one CPU device per chain, the
    chains run on several cores at once) when JAX has a device for every chain, else
    ``fallback``. JAX has one CPU device unless asked for more before it starts: the ``bayesdp``
    command asks (:func:`bayesdp._jax.use_host_devices`); in Python, call
    ``numpyro.set_host_device_count(4)`` first. Measured at d = 5, J = 10 on 2 cores, 4 devices:
    22 s and 20 s for a first and a second ``normalx`` fit, against 46 s and 36 s vectorised
    (``benchmarks/bench_chain_method.py``). The draws differ from the vectorised run's for the
    same seed (same target; attrs record ``chain_method``)."""
    import jax

    if num_chains > 1 and jax.local_device_count() >= num_chains:
        return "parallel"
    return fallback


def _data_shapes(data):
    """(path, shape, dtype) of every array in the model data: the compiled sampler's cache key."""
    import jax

    return tuple((jax.tree_util.keystr(p), np.shape(v), str(np.asarray(v).dtype))
                 for p, v in jax.tree_util.tree_leaves_with_path(data))


def _keys(seed):
    import jax

    return jax.random.PRNGKey(int(seed) % (2**63))


def _np(x):
    return np.asarray(x)


# ---------------------------------------------------------------------------------------------
# Hand-written kernels as fit methods
# ---------------------------------------------------------------------------------------------


def _fixeds_setup(release, priors, s2_0, fixed_s, s_noise):
    """Model, data and start of the fixedS model (hand-written kernels and NUTS), and the
    s_noise used and the eiv plug-in theta (:func:`fixeds_z_noise`)."""
    from ..models import regression as R

    S_fix = closed_form.fixed_s_estimate(release, fixed_s)
    z_noise, s_noise, theta_eiv = fixeds_z_noise(release, priors, S_fix, s2_0, fixed_s, s_noise)
    data = R.model_data(release, priors, S_fixed=S_fix, z_noise=z_noise)
    pos = initial_position(release, priors, S_fix + 1e-9 * np.eye(release.d), s2_0)
    pos = {"theta": pos["theta"], "sigma_y2": pos["sigma_y2"]}
    return R.fixeds_model, data, pos, s_noise, theta_eiv


def _normalx_start(release):
    """The checks of the normalX model, and the S its chains start from (the authors' psd+I
    estimate)."""
    _check_release_for_normalx(release)
    return closed_form.fixed_s_estimate(release, "psd+I")


def normalx_setup(release, priors, centred):
    """The normalX model that ``fit`` samples with NUTS, its data and the chains' start: one
    definition for ``fit`` (:func:`_run_nuts`) and :func:`bayesdp.models.for_release`.

    Parameters
    ----------
    release : Release (checked for the normalX model here)
    priors : Priors, resolved against the release
    centred : bool
        True: the centred model (``normalx_model``; method "nuts-normalx"); False: the
        non-centred one (``normalx_noncentred_model`` with Sigma_x's principal basis in its
        data, method "normalx"). With an intercept, appendix B.2's models
        (``normalx_intercept_model`` / ``normalx_intercept_noncentred_model``).

    Returns
    -------
    ``(model, data, pos)``: the numpyro model function, its data (a NamedTuple of arrays) and
    the starting point of its sampled sites (a dict; entries may be None where the model has
    no such site). The non-centred model without an intercept starts with Sigma_x at the
    authors' S_j estimate, in its principal basis, and the rest at its prior centre (the
    Bartlett variables of the authors' S_j start lay hundreds of sds out, and warm-up spent
    most of its leapfrog steps coming back).
    """
    import jax.numpy as jnp

    from ..models import regression as R

    S0 = _normalx_start(release)
    s2_0 = initial_sigma_y2(release, priors)
    if release.intercept:  # appendix B.2's model (models/regression.py)
        theta0 = initial_position(release, priors, S0, s2_0)["theta"]
        model, data, pos = R.intercept_setup(release, priors, S0, s2_0, theta0)
        if not centred:
            model = R.normalx_intercept_noncentred_model
            pos = R.intercept_noncentred_position(data, pos)
        return model, data, pos
    data = R.model_data(release, priors)
    pos = initial_position(release, priors, S0, s2_0)
    if centred:
        return R.normalx_model, data, pos
    Sigma0 = pos.pop("Sigma_x")
    del pos["S"], pos["theta"]
    basis = R.principal_basis(Sigma0)
    data = data._replace(basis=jnp.asarray(basis))
    pos.update({k: jnp.asarray(v) for k, v in
                R.noncentred_start(release.n, Sigma0, basis).items()})
    return R.normalx_noncentred_model, data, pos


def _kernel(kind):
    """``(init, step, whether sigma_y^2 is slice sampled)`` of a hand-written kernel."""
    from .kernels import fixeds, fixeds_paper, normalx_paper

    return {
        "normalx-paper": (normalx_paper.init, normalx_paper.normalx_paper_step, False),
        "fixeds": (fixeds.init, fixeds.fixeds_step, True),
        "fixeds-paper": (fixeds_paper.init, fixeds_paper.fixeds_paper_step, False),
        "fixeds-theta": (fixeds.init, fixeds.theta_step, False),
    }[kind]


class _Handwritten(NamedTuple):
    """A hand-written kernel's run for one release, after the options were checked: its model,
    data and start, the kernel, and what its attrs record."""

    kind: str
    model: object
    data: object
    pos: dict
    log_alpha: np.ndarray
    log_step: float
    init: object
    step: object
    slice_s2: bool
    targets: tuple
    s_noise: object
    theta_eiv: object
    fixed_s: str
    fix_sigma_y2: object


def _handwritten_setup(kind, release, priors, *, target_accept=TARGET_ACCEPT,
                       target_accept_sigma_y2=None, alpha_init=None, sigma_y2_step=None,
                       fixed_s="psd", fix_sigma_y2=None, s_noise=None):
    """Check the options of a hand-written kernel and build its run (:class:`_Handwritten`)."""
    from ..models import regression as R

    ta = _check_target("target_accept", target_accept)
    tsy = ta if target_accept_sigma_y2 is None else _check_target("target_accept_sigma_y2",
                                                                  target_accept_sigma_y2)
    s2_0 = initial_sigma_y2(release, priors) if fix_sigma_y2 is None else float(fix_sigma_y2)
    if not s2_0 > 0:
        raise BayesdpInputError(f"fix_sigma_y2 must be > 0, got {fix_sigma_y2!r}")
    theta_eiv = None
    if kind in ("fixeds", "fixeds-paper"):
        model, data, pos, s_noise, theta_eiv = _fixeds_setup(release, priors, s2_0, fixed_s,
                                                             s_noise)
        init, step, slice_s2 = _kernel(kind if fix_sigma_y2 is None else "fixeds-theta")
        la = np.zeros(release.J)
    else:
        if fixed_s != "psd" or fix_sigma_y2 is not None or s_noise is not None:
            raise BayesdpInputError(
                "fixed_s, fix_sigma_y2 and s_noise are options of method 'fixeds' only")
        pos = initial_position(release, priors, _normalx_start(release), s2_0)
        data = R.model_data(release, priors)
        model = R.normalx_model
        init, step, slice_s2 = _kernel(kind)
        la = initial_log_alpha(release, alpha_init)
    if sigma_y2_step is None:
        sigma_y2_step = 1.0 if slice_s2 else 0.1 * s2_0  # slice: a width on the log scale
    elif not float(sigma_y2_step) > 0:
        raise BayesdpInputError(f"sigma_y2_step must be > 0, got {sigma_y2_step!r}")
    return _Handwritten(kind, model, data, pos, la, math.log(float(sigma_y2_step)), init, step,
                        slice_s2, (ta, tsy), s_noise, theta_eiv, fixed_s, fix_sigma_y2)


def _run_handwritten(kind, release, priors, *, seed, num_samples, num_chains, num_warmup,
                     progress_bar, chain_method=None, build_only=False, **options):
    enable_x64()
    _compilation_cache_from_env()
    from numpyro.infer import MCMC

    from .dp_kernel import DPKernel

    h = _handwritten_setup(kind, release, priors, **options)
    (ta, tsy), pos, la, log_step0 = h.targets, h.pos, h.log_alpha, h.log_step
    cm, pb = _chain_method(chain_method, "vectorized"), _progress(progress_bar)

    def make():
        kernel = DPKernel(h.model, h.init, h.step, pos, target_accept_S=ta,
                          target_accept_sigma_y2=tsy, log_alpha_init=la, log_step_init=log_step0)
        return MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples,
                    num_chains=num_chains, chain_method=cm, progress_bar=pb, jit_model_args=True)

    if build_only:  # for benchmarks: a fresh MCMC object and its data, not run
        return make(), h.data
    # Reuse the compiled sampler of an earlier fit with the same kernel, options and shapes.
    shapes = _data_shapes(h.data)
    key = ("handwritten", h.step, h.model, ta, tsy, int(num_warmup), int(num_samples),
           int(num_chains), cm, pb, shapes)
    mcmc = _cached_mcmc(key, make)
    mcmc.sampler.set_initial_values(pos, la, log_step0)
    _run_mcmc(mcmc, seed, h.data, ("info", "tuning"))
    draws = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    return _handwritten_result(h, draws, extra["info"], extra["tuning"], mcmc.chain_method,
                               num_warmup)


def _run_handwritten_batch(kind, releases, priors_list, *, seeds, num_samples, num_chains,
                           num_warmup, progress_bar, chain_method=None, **options):
    """:func:`_run_handwritten` for many releases of the same shapes in one compiled program
    (:func:`.dp_kernel.run_chains_batched`): the chains of release r are those ``fit`` runs for
    it with seed ``seeds[r]``, up to floating-point rounding (the batched program may order its
    reductions differently). ``chain_method`` is checked and recorded; the C chains of each
    release are vectorised."""
    enable_x64()
    import jax

    from .dp_kernel import run_chains_batched

    cm = _chain_method(chain_method, "vectorized")
    runs = [_handwritten_setup(kind, rel, pri, **options)
            for rel, pri in zip(releases, priors_list)]
    h = runs[0]
    shapes = {_data_shapes(r.data) for r in runs}
    if len(shapes) > 1 or len({r.step for r in runs}) > 1:
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
                             np.array([r.log_step for r in runs]), init=h.init, step=h.step,
                             targets=h.targets, num_warmup=int(num_warmup),
                             num_samples=int(num_samples))
    out = jax.tree.map(np.asarray, out)
    if num_chains == 1:  # (R, K, ...) -> (R, 1, K, ...), as group_by_chain
        out = jax.tree.map(lambda a: a[:, None], out)
    z, info, tuning = out
    return [_handwritten_result(run, {k: v[r] for k, v in z.items()},
                                jax.tree.map(lambda a: a[r], info),
                                jax.tree.map(lambda a: a[r], tuning), cm, num_warmup)
            for r, run in enumerate(runs)]


def _handwritten_result(h: _Handwritten, draws, info, tuning, chain_method, num_warmup):
    """The :class:`MethodResult` of a hand-written kernel from its draws and its Info and
    Tuning per sweep, shaped (chain, draw, ...)."""
    kind = h.kind
    ta, tsy = h.targets
    posterior = {k: _np(v) for k, v in draws.items()}
    stats = {
        "acceptance_rate_sigma_y2": _np(info.accept_prob_sigma_y2),
        "step_size_sigma_y2": np.exp(_np(tuning.log_step)),
    }
    dims = {}
    attrs = {"sampler": f"bayesdp {kind} kernel", "target_accept": ta,
             "target_accept_sigma_y2": tsy, "chain_method": chain_method,
             "num_warmup": num_warmup,
             "acceptance_rate_sigma_y2_mean": float(np.mean(_np(info.accept_prob_sigma_y2)))}
    if h.slice_s2:
        stats = {"slice_width_log_sigma_y2": stats["step_size_sigma_y2"],
                 "n_evals_sigma_y2": _np(info.evals_sigma_y2)}
        attrs["sigma_y2_update"] = "slice sampler on log sigma_y2, theta integrated out"
        attrs["n_evals_sigma_y2_mean"] = float(np.mean(_np(info.evals_sigma_y2)))
        del attrs["acceptance_rate_sigma_y2_mean"]
    if not kind.startswith("fixeds"):
        stats["acceptance_rate_S"] = _np(info.accept_prob_S)
        stats["alpha_S"] = np.exp(_np(tuning.log_alpha))
        dims = {"acceptance_rate_S": ["holder"], "alpha_S": ["holder"]}
        attrs["acceptance_rate_S_mean"] = np.mean(_np(info.accept_prob_S), axis=(0, 1))
        attrs["proposal_ratio"] = 1  # every kernel has its Hastings correction
    else:
        attrs.update(_s_noise_attrs(h.fixed_s, h.s_noise, h.theta_eiv))
        if h.fix_sigma_y2 is not None:
            attrs["fix_sigma_y2"] = float(h.fix_sigma_y2)
    attrs.update(_jax_versions())
    return MethodResult(posterior=posterior, sample_stats=stats, attrs=attrs, dims=dims)


def _s_noise_attrs(fixed_s, s_noise, theta_eiv):
    out = {"fixed_s": fixed_s, "s_noise": s_noise}
    if theta_eiv is not None:
        out["eiv_plugin_theta"] = np.asarray(theta_eiv, dtype=float)
    return out


def _jax_versions():
    import jax
    import numpyro

    return {"numpyro_version": numpyro.__version__, "jax_version": jax.__version__}


class MCMCMethod(NamedTuple):
    """A ``fit`` method of this module: ``sampler`` "nuts" runs numpyro's NUTS on the model of
    ``kind`` (:func:`_run_nuts`, which checks its own options); "kernel" runs the hand-written
    kernel ``kind`` (:func:`_kernel`, :func:`_run_handwritten`) and ``options`` maps each option
    the method takes to the argument of :func:`_run_handwritten` it sets."""

    sampler: str
    kind: str
    options: Optional[dict]
    description: str


# the options of the normalX kernels: target acceptance of the S_j moves (and of sigma_y^2, by
# default the same), the initial alpha_j, the initial step (or slice width) on sigma_y^2
_NORMALX_OPTIONS = {k: k for k in ("target_accept", "target_accept_sigma_y2", "alpha_init",
                                   "sigma_y2_step", "chain_method")}
# the options of the fixedS kernels: ``target_accept`` is that of sigma_y^2; ``fixed_s="psd+I"``
# is the authors' code; ``fix_sigma_y2`` holds sigma_y^2 at a value (theta Gibbs only);
# ``s_noise`` is the treatment of a general noise covariance (:func:`fixeds_z_noise`)
_FIXEDS_OPTIONS = {"target_accept": "target_accept_sigma_y2", "sigma_y2_step": "sigma_y2_step",
                   "fixed_s": "fixed_s", "fix_sigma_y2": "fix_sigma_y2", "s_noise": "s_noise",
                   "chain_method": "chain_method"}

MCMC_METHODS = {
    "normalx": MCMCMethod(
        "nuts", "normalx-noncentred", None,
        "MCMC-normalX, the default sampler of the normalX model: numpyro NUTS on the "
        "model in non-centred form (S_j = L_x A_j A_j^T L_x^T, Bartlett factors A_j)"),
    "normalx-paper": MCMCMethod(
        "kernel", "normalx-paper", _NORMALX_OPTIONS,
        "MCMC-normalX exactly as Algorithm 1 (Gibbs Sigma_x, Wishart-proposal MH on "
        "each S_j, Gibbs theta, RW-MH sigma_y^2), for reproducing the paper"),
    "fixeds": MCMCMethod(
        "kernel", "fixeds", _FIXEDS_OPTIONS,
        "MCMC-fixedS (Algorithm 2's target): S_j fixed at the nearest PSD matrix of "
        "S_hat_j; slice sampling of log sigma_y^2 with theta integrated out, Gibbs theta"),
    "fixeds-paper": MCMCMethod(
        "kernel", "fixeds-paper", _FIXEDS_OPTIONS,
        "MCMC-fixedS exactly as Algorithm 2 (Gibbs theta, RW-MH sigma_y^2), for "
        "reproducing the paper; 'fixeds' samples the same posterior and mixes better"),
    "nuts-normalx": MCMCMethod("nuts", "normalx", None, "numpyro NUTS on the normalX model"),
    "nuts-fixeds": MCMCMethod("nuts", "fixeds", None, "numpyro NUTS on the fixedS model"),
}


def _no_extra(options, method):
    if options:
        raise BayesdpInputError(
            f"unknown option(s) for method {method!r}: {sorted(options)}")


def _runner(method):
    """The function ``fit(method=method)`` calls."""
    m = MCMC_METHODS[method]
    if m.sampler == "nuts":
        def run(release, priors, **kw):
            return _run_nuts(m.kind, release, priors, **kw)
    else:
        def run(release, priors, *, seed, num_samples, num_chains, num_warmup, progress_bar,
                **options):
            _no_extra({k: v for k, v in options.items() if k not in m.options}, method)
            return _run_handwritten(m.kind, release, priors, seed=seed, num_samples=num_samples,
                                    num_chains=num_chains, num_warmup=num_warmup,
                                    progress_bar=progress_bar,
                                    **{m.options[k]: v for k, v in options.items()})
    run.__doc__ = m.description
    return run


def _batch_runner(method):
    """The function ``fit_batch(method=method)`` calls (hand-written kernels), or None."""
    m = MCMC_METHODS[method]
    if m.sampler == "nuts":
        return None

    def run_batch(releases, priors_list, *, seeds, num_samples, num_chains, num_warmup,
                  progress_bar, **options):
        _no_extra({k: v for k, v in options.items() if k not in m.options}, method)
        return _run_handwritten_batch(m.kind, releases, priors_list, seeds=seeds,
                                      num_samples=num_samples, num_chains=num_chains,
                                      num_warmup=num_warmup, progress_bar=progress_bar,
                                      **{m.options[k]: v for k, v in options.items()})
    return run_batch


def build_mcmc(method, release, priors, *, num_samples, num_warmup, num_chains=1, **options):
    """The ``numpyro.infer.MCMC`` object (not run) and its model data for a method; used by
    ``benchmarks/bench_samplers.py`` to time sampling after compilation."""
    kw = dict(seed=0, num_samples=num_samples, num_chains=num_chains, num_warmup=num_warmup,
              progress_bar=False, build_only=True, **options)
    m = MCMC_METHODS[method]
    return (_run_nuts if m.sampler == "nuts" else _run_handwritten)(m.kind, release, priors, **kw)


# ---------------------------------------------------------------------------------------------
# NUTS on the same models
# ---------------------------------------------------------------------------------------------


def _run_nuts(kind, release, priors, *, seed, num_samples, num_chains, num_warmup, progress_bar,
              target_accept_prob=0.8, max_tree_depth=10, fixed_s="psd", s_noise=None,
              chain_method=None, build_only=False, **options):
    method = "normalx" if kind == "normalx-noncentred" else f"nuts-{kind}"
    _no_extra(options, method)
    enable_x64()
    _compilation_cache_from_env()
    from numpyro.infer import MCMC, init_to_value

    tap = _check_target("target_accept_prob", target_accept_prob)
    s2_0 = initial_sigma_y2(release, priors)
    inverse_mass = None  # numpyro's default: the identity
    if kind == "fixeds":
        model, data, pos, s_noise, theta_eiv = _fixeds_setup(release, priors, s2_0, fixed_s,
                                                             s_noise)
    else:
        if fixed_s != "psd" or s_noise is not None:
            raise BayesdpInputError(
                "fixed_s and s_noise are options of the fixedS methods only")
        model, data, pos = normalx_setup(release, priors, centred=kind == "normalx")
        if kind == "normalx-noncentred" and not release.intercept:
            inverse_mass = _laplace_inverse_mass(model, data, pos)
    cm = _chain_method(chain_method, _nuts_chain_method(
        num_chains, "vectorized" if kind == "normalx-noncentred" else "sequential"))
    pb = _progress(progress_bar)

    def make():
        kernel = _nuts(model, target_accept_prob=tap, max_tree_depth=int(max_tree_depth),
                      init_strategy=init_to_value(values=pos), inverse_mass_matrix=inverse_mass)
        return MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples,
                    num_chains=num_chains, chain_method=cm, progress_bar=pb,
                    jit_model_args=True)

    if build_only:
        return make(), data
    # Reuse the compiled sampler of an earlier fit of the same shapes; the starting point of
    # this release is passed as init_params (unconstrained), not baked into the kernel.
    shapes = _data_shapes(data)
    key = ("nuts", kind, tap, int(max_tree_depth), int(num_warmup), int(num_samples),
           int(num_chains), cm, pb, shapes)
    mcmc = _cached_mcmc(key, make)
    mcmc.sampler.set_initial_inverse_mass(inverse_mass)
    _run_mcmc(mcmc, seed, data,
              ("diverging", "accept_prob", "num_steps", "adapt_state.step_size"),
              init_params=_unconstrained_init(model, data, pos, num_chains))
    draws = mcmc.get_samples(group_by_chain=True)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    # L_x, the Bartlett variables and theta_std are a reparametrisation; Sigma_x, S and
    # theta are reported
    posterior = {k: _np(v) for k, v in draws.items()
                 if not k.startswith("W_") and k not in ("theta_std", "L_x", "v")}
    stats = {
        "diverging": _np(extra["diverging"]),
        "acceptance_rate": _np(extra["accept_prob"]),
        "n_steps": _np(extra["num_steps"]),
        "step_size": _np(extra["adapt_state.step_size"]),
    }
    attrs = {"sampler": "numpyro NUTS", "parametrisation": (
                 "non-centred: S_j = L_x A_j A_j^T L_x^T, Bartlett factors A_j"
                 if kind == "normalx-noncentred" else "centred"),
             "target_accept_prob": tap,
             "max_tree_depth": int(max_tree_depth), "chain_method": mcmc.chain_method,
             "num_warmup": num_warmup, "divergences": int(np.sum(stats["diverging"])),
             **_jax_versions()}
    if kind == "fixeds":
        attrs.update(_s_noise_attrs(fixed_s, s_noise, theta_eiv))
    return MethodResult(posterior=posterior, sample_stats=stats, attrs=attrs)


for _name in MCMC_METHODS:
    register_method(_name, _runner(_name), MCMC_METHODS[_name].description,
                    run_batch=_batch_runner(_name))
del _name
