"""Errors raised by bayesdp.

Every error about bad input is a :class:`BayesdpInputError`, a subclass of ``ValueError``,
whose message names the field and what was expected.
"""

import numbers
from pathlib import Path


class BayesdpError(Exception):
    """Base class of every error bayesdp raises on purpose."""


class BayesdpInputError(BayesdpError, ValueError):
    """An argument, array or file field is malformed; the message names it."""


class ReleaseFormatError(BayesdpInputError):
    """A release file is malformed, truncated, or of an unknown format version."""


class CombineError(BayesdpInputError):
    """Releases that cannot be analysed together (mismatched d, names, bounds or privacy)."""


class ConvergenceWarning(UserWarning):
    """MCMC chains that have not converged (r_hat too large or effective sample size too small):
    the posterior summaries cannot be trusted. Raised by :func:`bayesdp.fit`."""


class CalibrationWarning(UserWarning):
    """A posterior whose intervals are known to be off for this release. The fixedS methods
    leave out the noise on S, and here that noise widens the error of theta by more than their
    intervals allow (if the "eiv" posterior is right, their 90% intervals hold theta less than
    ``bayesdp.diagnostics.S_NOISE_COVERAGE_MIN`` of the time on average; attrs
    ``s_noise_coverage``). :func:`bayesdp.predict`: the release determines sigma_y so poorly
    that the prediction intervals' width rests on its prior. The normalX methods: the release's S_hat and
    the posterior disagree along some direction of the features (posterior predictive check,
    ``bayesdp.diagnostics.s_hat_check``; attrs ``s_hat_check_z``), so theta's intervals along it
    rest on the prior of Sigma_x. Raised by :func:`bayesdp.fit`."""


class SamplerError(BayesdpError):
    """A method produced no usable posterior (e.g. non-finite draws); the message names the method
    and the variable."""


def check_seed(seed, name="seed"):
    """``None`` or a whole number >= 0 (a Python or NumPy integer; not a bool); returns it as an
    ``int`` (or None)."""
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or int(seed) < 0:
        raise BayesdpInputError(f"{name} must be None or a whole number >= 0, got {seed!r}")
    return int(seed)


def check_output_file(path, name):
    """Refuse an output file ``path`` (option or argument ``name``) whose folder does not exist
    or that is a folder, before any work is done."""
    p = Path(path)
    if p.is_dir():
        raise BayesdpInputError(f"{name}: {str(p)!r} is a folder, not a file")
    if not p.parent.is_dir():
        raise BayesdpInputError(f"{name}: folder {str(p.parent)!r} does not exist")


def check_output_folder(path, name):
    """Refuse an output folder ``path`` (option or argument ``name``) that cannot be created:
    it is a file, or its nearest existing parent is a file. The folder and any missing parents
    are created by the command (as ``mkdir -p``)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise BayesdpInputError(f"{name}: {str(p)!r} exists and is not a folder")
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise BayesdpInputError(
                    f"{name}: cannot create {str(p)!r}: {str(parent)!r} is a file, not a folder")
            break
