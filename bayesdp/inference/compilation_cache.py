"""JAX's persistent compilation cache for bayesdp's samplers: on by default, bounded in size.

A sampler compiled once is kept on disk, so a new process (a second ``bayesdp fit``, a new Python
session) loads the program of a release of the same shape instead of compiling it again (what it
saves: docs/evidence/performance.md, "Compile once per shape"). Within one process the compiled
samplers are kept in memory anyway (:func:`bayesdp.inference.mcmc._cached_mcmc`).

The cache is on for the ``bayesdp`` command and in Python, in
``$XDG_CACHE_HOME/bayesdp/jax/<cpu>`` (else ``~/.cache/...``): one folder per CPU type, so a home
folder shared by machines with different instruction sets never hands one machine another's
machine code. JAX prunes it to :data:`MAX_BYTES`, least recently used programs first.

- ``BAYESDP_COMPILATION_CACHE=off`` (or ``0``, ``no``, ``false``) turns it off;
  ``BAYESDP_COMPILATION_CACHE=/some/dir`` puts it there.
- A cache directory the user gave JAX (``jax.config.update("jax_compilation_cache_dir", ...)`` or
  ``JAX_COMPILATION_CACHE_DIR``) is left alone.
- Where the folder cannot be made (a read-only home), bayesdp runs without it.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys

# JAX is imported only by the functions that set it: the command turns the cache on without it

_COMPILATION_CACHE_ENV = "BAYESDP_COMPILATION_CACHE"
#: Values of BAYESDP_COMPILATION_CACHE that turn the cache off
_COMPILATION_CACHE_OFF = ("0", "off", "no", "false")
#: The size JAX prunes the cache to, least recently used programs first (bytes)
MAX_BYTES = 1 << 30


def _cpu_signature():
    """A short name for this machine's CPU type: its architecture and, on Linux, a hash of the
    model name and instruction-set flags of /proc/cpuinfo."""
    text = platform.machine() or "cpu"
    try:
        with open("/proc/cpuinfo") as f:
            lines = [ln for ln in f if ln.startswith(("model name", "flags", "Features"))]
        text += "".join(sorted(set(lines)))
    except OSError:
        pass
    return f"{platform.machine() or 'cpu'}-{hashlib.sha256(text.encode()).hexdigest()[:12]}"


def _default_compilation_cache_dir():
    """``$XDG_CACHE_HOME/bayesdp/jax/<cpu>``, else ``~/.cache/bayesdp/jax/<cpu>``."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "bayesdp", "jax", _cpu_signature())


def _enable_compilation_cache(path=None, min_compile_time_secs=0.0, max_bytes=MAX_BYTES):
    """Turn on JAX's persistent compilation cache (a process-wide JAX setting).

    Parameters
    ----------
    path : str or None
        Its directory; default ``$BAYESDP_COMPILATION_CACHE``, else
        :func:`_default_compilation_cache_dir`.
    min_compile_time_secs : float
        Programs that compile faster than this are not stored (default: all are).
    max_bytes : int
        JAX prunes the folder to this size, least recently used programs first (-1: never).

    Returns
    -------
    The directory (str).
    """
    import jax

    if path is None:
        path = _cache_env() or _default_compilation_cache_dir()
    os.makedirs(path, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", float(min_compile_time_secs))
    jax.config.update("jax_compilation_cache_max_size", int(max_bytes))
    return str(path)


def _cache_env():
    """BAYESDP_COMPILATION_CACHE: None when unset or empty, "off" for the values that turn the
    cache off, else the directory."""
    value = os.environ.get(_COMPILATION_CACHE_ENV, "").strip()
    if not value:
        return None
    return "off" if value.lower() in _COMPILATION_CACHE_OFF else value


def default_compilation_cache():
    """The default of every sampler (called before it compiles): the cache on (module
    docstring) unless BAYESDP_COMPILATION_CACHE turns it off or JAX already has a cache
    directory. Returns the directory, or None when the cache is not bayesdp's to set."""
    import jax

    value = _cache_env()
    if value == "off" or jax.config.jax_compilation_cache_dir:
        return None
    try:
        return _enable_compilation_cache(value)
    except OSError:
        return None


def command_compilation_cache():
    """:func:`default_compilation_cache` for the ``bayesdp`` command, without importing JAX:
    when JAX is not imported yet, the setting goes into the environment variables JAX reads when
    it is imported (``JAX_COMPILATION_CACHE_DIR``, ``JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS``,
    ``JAX_COMPILATION_CACHE_MAX_SIZE``; values the user already set there are left alone), so
    that commands that never use JAX do not load it. Processes the command starts inherit it.

    Returns
    -------
    The directory, or None when the cache is off or the directory cannot be made.
    """
    value = _cache_env()
    if value == "off":
        return None
    if "jax" in sys.modules:
        return default_compilation_cache()
    path = os.environ.get("JAX_COMPILATION_CACHE_DIR") or value or _default_compilation_cache_dir()
    try:
        os.makedirs(path, exist_ok=True)
    except OSError:
        return None
    os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", str(path))
    os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
    os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(MAX_BYTES))
    return str(path)
