"""JAX's persistent compilation cache for bayesdp's samplers.

``numpyro.infer.MCMC.run`` lowers its sampling loop afresh on every call, so every ``fit`` of an
MCMC method compiles it again; with the cache on, the identical program of a release of the same
shape is loaded from disk instead (what it saves: docs/evidence/performance.md, "The hand-written
kernels: where the time goes, compilation"). The ``bayesdp`` command turns the cache on
(:func:`command_compilation_cache`); in Python it is off unless :func:`enable_compilation_cache`
is called or the environment variable ``BAYESDP_COMPILATION_CACHE`` names a directory.
"""

from __future__ import annotations

import os
import sys

_COMPILATION_CACHE_ENV = "BAYESDP_COMPILATION_CACHE"
#: Values of BAYESDP_COMPILATION_CACHE that turn the cache off (also for the ``bayesdp`` command)
_COMPILATION_CACHE_OFF = ("0", "off", "no", "false")


def default_compilation_cache_dir():
    """``$XDG_CACHE_HOME/bayesdp/jax``, else ``~/.cache/bayesdp/jax``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bayesdp", "jax")


def enable_compilation_cache(path=None, min_compile_time_secs=0.5):
    """Turn on JAX's persistent compilation cache (a process-wide JAX setting).

    Parameters
    ----------
    path : str or None
        Its directory; default ``$BAYESDP_COMPILATION_CACHE``, else
        :func:`default_compilation_cache_dir`. JAX does not limit its size; delete the folder
        to clear it.
    min_compile_time_secs : float
        Programs that compile faster than this are not stored.

    Returns
    -------
    The directory (str).
    """
    import jax

    if path is None:
        path = os.environ.get(_COMPILATION_CACHE_ENV) or default_compilation_cache_dir()
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
    return str(path)


def _cache_env():
    """BAYESDP_COMPILATION_CACHE: None when unset or empty, "off" for the values that turn the
    cache off, else the directory."""
    value = os.environ.get(_COMPILATION_CACHE_ENV, "").strip()
    if not value:
        return None
    return "off" if value.lower() in _COMPILATION_CACHE_OFF else value


def compilation_cache_from_env():
    """Turn the cache on in ``$BAYESDP_COMPILATION_CACHE`` when that names a directory and JAX
    has no cache directory yet (called before every sampler runs)."""
    import jax

    value = _cache_env()
    if value not in (None, "off") and not jax.config.jax_compilation_cache_dir:
        enable_compilation_cache(value)


def command_compilation_cache():
    """The ``bayesdp`` command's default: JAX's compilation cache on disk, in
    ``$BAYESDP_COMPILATION_CACHE`` or :func:`default_compilation_cache_dir`, unless that
    variable turns it off ("0", "off", ...); every program is stored, however quick to compile.

    JAX is not imported here: when it has not been imported yet, the setting goes into the
    environment variables JAX reads when it is imported (``JAX_COMPILATION_CACHE_DIR``,
    ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``; values the user already set there are left
    alone), so that commands that never use JAX do not load it. Processes the command starts
    inherit the setting.

    Returns
    -------
    The directory, or None when the cache is off or the directory cannot be made (the command
    then runs without the cache).
    """
    value = _cache_env()
    if value == "off":
        return None
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
