"""JAX set-up done in entry points (never on import): float64 everywhere S is touched."""


def enable_x64():
    """Turn on float64 in JAX (a global setting; idempotent). Call before building JAX arrays."""
    import jax

    jax.config.update("jax_enable_x64", True)
