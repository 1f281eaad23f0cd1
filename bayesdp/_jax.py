"""JAX set-up done in entry points (never on import): float64 everywhere S is touched, and
enough CPU devices for NUTS to run its chains in parallel."""

import contextlib
import functools
import os
import sys
import threading

# JAX is imported by the function that sets it: importing this module loads no JAX

HOST_DEVICES_FLAG = "--xla_force_host_platform_device_count"
_DEFAULT_HOST_DEVICES = 4  # fit's default number of chains

#: ``jax.jit(..., compiler_options=RUN_ONCE)`` for a program a fit runs once (the Laplace start's
#: Hessian, the start's unconstraining, the log-likelihood group): XLA's backend optimisation
#: off, which compiles in about half the time and runs as fast at these sizes; never for the
#: sampler's own loop, which it slows (docs/evidence/performance.md, "Compile once per shape").
RUN_ONCE = {"xla_backend_optimization_level": 0}


_CHECKS_LOCK = threading.Lock()
_checks_off = {"depth": 0, "saved": None}


@contextlib.contextmanager
def numpyro_checks_off():
    """numpyro's argument validation off while bayesdp traces its own models (restored after;
    nested and concurrent uses keep one saved setting).

    numpyro validates a distribution's arguments when it is built, under
    ``jax.ensure_compile_time_eval``: while a model is traced, every check on a constant (a
    prior's scale matrix, a release's statistic) runs as its own small compiled program, about
    30 of them in a first ``normalx`` fit, 1-2 s of compiling (docs/evidence/performance.md,
    "Compile once per shape"). Under ``jax.jit`` the checks do not take effect anyway (numpyro's
    ``enable_validation``), and bayesdp checks its inputs before a model is built
    (:class:`bayesdp.Priors`, the release's constructor). numpyro's setting is global: a
    thread of the user's building numpyro distributions during a fit sees it off."""
    from numpyro.distributions import distribution

    with _CHECKS_LOCK:
        if _checks_off["depth"] == 0:
            _checks_off["saved"] = distribution._VALIDATION_ENABLED
            distribution.enable_validation(False)
        _checks_off["depth"] += 1
    try:
        yield
    finally:
        with _CHECKS_LOCK:
            _checks_off["depth"] -= 1
            if _checks_off["depth"] == 0:
                distribution.enable_validation(_checks_off["saved"])


def without_numpyro_checks(fn):
    """``fn`` run inside :func:`numpyro_checks_off`."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with numpyro_checks_off():
            return fn(*args, **kwargs)
    return wrapper


def enable_x64():
    """Turn on float64 in JAX (a global setting; idempotent). Call before building JAX arrays."""
    import jax

    jax.config.update("jax_enable_x64", True)


def use_host_devices(n=None):
    """Ask XLA for ``n`` CPU devices (default: the larger of 4, fit's default number of chains,
    and the number of cores) so that ``fit(method="normalx")`` runs its chains in parallel
    (numpyro's ``chain_method="parallel"``) instead of vectorised on one core, which is faster
    on a machine with more than one core (docs/evidence/performance.md, "`normalx` (NUTS on
    the non-centred model)").

    What ``numpyro.set_host_device_count`` does (it sets ``XLA_FLAGS``), with two differences:
    a device count the user already put in ``XLA_FLAGS`` is left alone, and the setting is only
    made in entry points (the ``bayesdp`` command), never on import. Like numpyro's, it takes
    effect only if JAX has not started its CPU backend yet. Returns the count asked for, or None
    when ``XLA_FLAGS`` already had one."""
    flags = os.environ.get("XLA_FLAGS", "")
    if HOST_DEVICES_FLAG in flags:
        return None
    if n is None:
        n = max(_DEFAULT_HOST_DEVICES, os.cpu_count() or 1)
    os.environ["XLA_FLAGS"] = f"{flags} {HOST_DEVICES_FLAG}={int(n)}".strip()
    return int(n)


def release_compiled_code():
    """Drop every executable JAX has compiled in this process (``jax.clear_caches``).

    Called when one of bayesdp's bounded caches of compiled samplers evicts an entry: dropping
    our reference is not enough, because JAX's own compilation caches (e.g. the
    ``_cached_compilation`` LRU of up to 2048 executables) keep the machine code of every shape
    ever compiled, so a process that fits ever new shapes would grow until it reaches the
    kernel's limit on memory maps (docs/evidence/performance.md, "Compiled samplers: memory").
    The executables of one sampler are many (its run, its init, the model's eager pieces), with
    no one jitted function whose ``clear_cache`` would release them all; this clears all of
    JAX's caches instead (the cost is paid only on eviction); samplers still held in bayesdp's caches recompile on their next use
    (or load them from the persistent compilation cache,
    :mod:`bayesdp.inference.compilation_cache`)."""
    jax = sys.modules.get("jax")
    if jax is not None:
        jax.clear_caches()
