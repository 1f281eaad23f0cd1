"""Progress bars for long jobs (compare, release_file, the reproduction scripts, MCMC fits).

A bar shows the count done, the total and an estimate of the time left, on stderr. By default it
is drawn only when stderr is a terminal, so logs (CI, pipes, files, notebooks) stay quiet; every
long function takes ``progress=True/False`` (the command line ``--progress/--no-progress``) to
force it on or off. The bars are tqdm's (a dependency of numpyro, whose MCMC bars follow the same
rule through ``bayesdp.fit(progress_bar=...)``).
"""

from __future__ import annotations

import sys

# tqdm is imported when a bar is made or written to: `import bayesdp` imports this module


def show(progress=None, file=None) -> bool:
    """Whether to draw a bar: ``progress`` True or False decides; None (the default) draws only
    when ``file`` (default: ``sys.stderr`` at the time of the call) is a terminal."""
    if progress is not None:
        return bool(progress)
    f = sys.stderr if file is None else file
    try:
        return bool(f.isatty())
    except (AttributeError, ValueError, OSError):  # no isatty, or a closed stream
        return False


def bar(total=None, desc=None, *, progress=None, unit="it", file=None, **kwargs):
    """A tqdm bar on ``file`` (default: ``sys.stderr``), drawn when :func:`show` says so (otherwise
    a silent one that costs nothing). Use it as a context manager and call ``update(k)``;
    ``kwargs`` go to tqdm (e.g. ``unit_scale=True`` for bytes)."""
    from tqdm import tqdm

    f = sys.stderr if file is None else file
    return tqdm(total=total, desc=desc, unit=unit, file=f, disable=not show(progress, f),
                dynamic_ncols=True, **kwargs)


def write(text, bar=None, file=None):
    """Print a line (default to stdout) without breaking a bar that is being drawn."""
    from tqdm import tqdm

    if bar is not None and not bar.disable:
        tqdm.write(text, file=file)
    else:
        print(text, file=file, flush=True)
