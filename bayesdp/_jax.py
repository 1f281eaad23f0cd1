"""JAX set-up done in entry points (never on import): float64 everywhere S is touched."""


def enable_x64():
    """Turn on float64 in JAX (a global setting; idempotent). Call before building JAX arrays."""
    import jax

    jax.config.update("jax_enable_x64", True)


def release_compiled_code():
    """Drop every executable JAX has compiled in this process (``jax.clear_caches``).

    Called when one of bayesdp's bounded caches of compiled samplers evicts an entry: dropping
    our reference is not enough, because JAX's own compilation caches (e.g. the
    ``_cached_compilation`` LRU of up to 2048 executables) keep the machine code of every shape
    ever compiled, about 24 memory maps and 19 MiB per new shape for method 'fixeds' (measured),
    until the process reaches the kernel's map limit. numpyro jits its pieces anew inside each
    run, so there is no one jitted function whose ``clear_cache`` would release them; this
    clears all of JAX's caches instead (the cost is paid only on eviction); samplers still
    held in bayesdp's caches recompile on their next use (or load from the persistent cache when
    BAYESDP_COMPILATION_CACHE is set)."""
    import sys

    jax = sys.modules.get("jax")
    if jax is not None:
        jax.clear_caches()
