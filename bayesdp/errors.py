"""Errors raised by bayesdp.

Every error about bad input is a :class:`BayesdpInputError`, a subclass of ``ValueError``,
whose message names the field and what was expected.
"""


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
