"""The release specification: every parameter of the mechanism, checked once.

:func:`bayesdp.release`, :func:`bayesdp.releases.release_file` and
:func:`bayesdp.releases.release_dask` run one mechanism (paper eqs. 2-3) on rows from different
sources (arrays, a file, a Dask DataFrame). Its parameters are a :class:`ReleaseSpec`: each entry
point builds one from its keywords, or takes one as ``spec=``, and passes it down; the checks of
those parameters live here and nowhere else. What depends on the rows (the holders' labels, the
feature names, the file's columns) is checked where the rows are read.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from .. import privacy
from ..errors import BayesdpInputError, check_seed
from .holders import check_holder_name, check_split

_NOISES = ("float", "secure")
"""``noise``: "float" (numpy's PCG64 Gaussian, seedable) or "secure" (the discrete Gaussian on a
grid from the OS CSPRNG, :mod:`bayesdp.secure_noise`)."""

_BOUNDS_WORDS = ("private", "data")
"""The bounds that are not a public pair: estimated with DP, or read off the data (not private)."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReleaseSpec:
    """How a release is made: the parameters of its mechanism, checked when the object is made.

    Every field is the keyword of the same name of :func:`bayesdp.release`, whose docstring
    says what it does; values are normalised (floats, tuples, the defaults of the private
    bounds filled in), so two specs of one mechanism compare equal.

    Parameters
    ----------
    epsilon, delta : float
        The privacy parameters (eps > 0, 0 < delta < 1), per holder.
    bounds : (B_x, B_y), "private" or "data"
        Public bounds on ||x||_2 and |y|; "private" estimates them with DP, "data" reads them
        off the data (not private).
    calibration : "exact" | "classical" | "paper-code"
        The Gaussian calibration of sigma (:data:`bayesdp.privacy.CALIBRATIONS`).
    noise : "float" | "secure"
        Float Gaussian noise (seedable) or the discrete Gaussian from the OS CSPRNG.
    intercept : bool
        Release the statistics of the rows [1, x] (appendix B.2).
    average_rows : int >= 1
        Sum each holder's rows in random groups of this many (appendix B.1).
    include_yty : bool
        Also release a noisy y^T y (appendix C.1), in the same Gaussian mechanism (default
        True: ``eiv`` estimates sigma_y^2 from it; False for the paper's release of eqs. 2-3).
    split : "random" | "contiguous"
        How a holder count assigns rows to holders.
    seed : int >= 0 or None
        The seed of the noise (experiments only); None draws from fresh OS entropy.
    holder_name : str or None
        The name of the single holder of a release with one holder.
    bounds_share : float in (0, 1) or None
        With ``bounds="private"``: the share of epsilon spent on the bounds (default
        :data:`bayesdp.privacy.PRIVATE_BOUNDS_SHARE`); None otherwise.
    bounds_range : (low, high) or None
        With ``bounds="private"``: the public range of candidate bounds (default
        :data:`bayesdp.privacy.PRIVATE_BOUNDS_RANGE`); None otherwise.
    formula : str or None
        An R-style formula over the columns of a table (``"log(y) ~ x1 + C(region)"``,
        docs/tables.md). Then ``bounds`` declares each column's public range or levels
        (``{column: (lo, hi)}``, ``{column: [levels]}``; normalised to a dict of the columns the
        formula uses), the release's (B_x, B_y) follow from them (:attr:`table`), and
        ``intercept`` is the formula's (True unless it has ``- 1`` or ``0 +``).

    A bad value raises :class:`~bayesdp.errors.BayesdpInputError` naming the field. Example::

        spec = ReleaseSpec(epsilon=1.0, delta=1e-5, bounds=(3.0, 2.0), intercept=True)
        rel = bayesdp.release(X, y, nodes=5, spec=spec)   # the same as the keywords
        assert rel.spec == spec
    """

    epsilon: float
    delta: float
    bounds: object
    calibration: str = "exact"
    noise: str = "float"
    intercept: bool = False
    average_rows: int = 1
    include_yty: bool = True
    split: str = "random"
    seed: Optional[int] = None
    holder_name: Optional[str] = None
    bounds_share: Optional[float] = None
    bounds_range: Optional[tuple] = None
    formula: Optional[str] = None

    def __post_init__(self):
        self._check_noise()
        self._check_privacy()
        self._check_bounds()
        self._check_design()
        self._check_holders()

    def _set(self, name, value):
        object.__setattr__(self, name, value)

    def _check_noise(self):
        """``noise`` is one of _NOISES and ``seed`` a whole number >= 0 or None; secure noise
        takes no seed (whoever knows it regenerates the noise) and the exact calibration (its
        accounting is its own, docs/privacy.md section 10)."""
        self._set("seed", check_seed(self.seed))
        if not isinstance(self.noise, str) or self.noise not in _NOISES:
            raise BayesdpInputError(f"noise must be one of {_NOISES}, got {self.noise!r}")
        if self.noise == "secure" and self.seed is not None:
            raise BayesdpInputError(
                "seed: noise='secure' draws its noise from the operating system's CSPRNG "
                "(secrets) and cannot be seeded (anyone who knows a seed can regenerate the "
                "noise); omit seed, or use noise='float' for a reproducible experiment")
        if self.noise == "secure" and self.calibration != "exact":
            raise BayesdpInputError(
                f"calibration: noise='secure' has its own exact accounting of the discrete "
                f"Gaussian and needs calibration='exact' (the default), got {self.calibration!r}")

    def _check_privacy(self):
        """``epsilon`` > 0, 0 < ``delta`` < 1 (as floats) and a known ``calibration``."""
        for name in ("epsilon", "delta"):
            if getattr(self, name) is None:
                raise BayesdpInputError(f"{name} is required")
        eps, dlt = privacy.check_epsilon_delta(self.epsilon, self.delta)
        self._set("epsilon", eps)
        self._set("delta", dlt)
        if not isinstance(self.calibration, str) or self.calibration not in privacy.CALIBRATIONS:
            raise BayesdpInputError(f"calibration must be one of {privacy.CALIBRATIONS}, got "
                                    f"{self.calibration!r}")

    def _check_bounds(self):
        """``bounds`` a public pair (floats > 0), "private" or "data"; ``bounds_share`` and
        ``bounds_range`` go with "private" only (their defaults filled in); secure noise needs
        bounds fixed before its calibration, so not "private". With a ``formula``: the
        declared bounds of its columns (:meth:`_check_formula`)."""
        if self.formula is not None:
            self._check_formula()
            return
        self._set("bounds", check_bounds_option(self.bounds))
        if self.bounds != "private":
            for name in ("bounds_share", "bounds_range"):
                if getattr(self, name) is not None:
                    raise BayesdpInputError(f"{name} applies to bounds='private' only, got "
                                            f"{name}={getattr(self, name)!r} with "
                                            f"bounds={self.bounds!r}")
            return
        share = privacy.PRIVATE_BOUNDS_SHARE if self.bounds_share is None else self.bounds_share
        self._set("bounds_share", privacy.check_bounds_share(share))
        rng = privacy.PRIVATE_BOUNDS_RANGE if self.bounds_range is None else self.bounds_range
        self._set("bounds_range", privacy.check_bounds_range(rng))
        if self.noise == "secure":
            raise BayesdpInputError(
                "noise: noise='secure' with bounds='private' is not supported yet (the secure "
                "calibration is fixed before the bounds are estimated); use public bounds")

    def _check_formula(self):
        """``formula`` and the declared ``bounds`` of its columns make a
        :class:`~bayesdp.releases.formula.TableEncoding` (kept as :attr:`table`); ``bounds`` is
        normalised to the columns the formula uses; the intercept is the formula's (an explicit
        ``intercept=True`` with a formula without one is refused); "private" and "data" bounds,
        ``bounds_share``, ``bounds_range`` and the contiguous split are refused."""
        from .formula import check_column_bounds

        if isinstance(self.bounds, str) or self.bounds is None:
            raise BayesdpInputError(
                f"bounds: with a formula, declare each column's public range or levels, e.g. "
                f"{{'x': (0, 10), 'region': ['north', 'south']}}, got {self.bounds!r} (bounds are "
                "never read off the data)")
        for name in ("bounds_share", "bounds_range"):
            if getattr(self, name) is not None:
                raise BayesdpInputError(f"{name} applies to bounds='private' only, not to a "
                                        "formula's declared bounds")
        if self.split == "contiguous":
            raise BayesdpInputError("split: a release with a formula assigns a holder count's "
                                    "rows at random (split='random'); 'contiguous' is kept for "
                                    "the paper's experiments on numeric matrices only")
        bounds, table = check_column_bounds(self.formula, self.bounds)
        if check_intercept(self.intercept) and not table.intercept:
            raise BayesdpInputError(
                f"intercept: the formula {self.formula!r} has no intercept ('- 1' or '0 +'); with "
                "a formula the intercept is the formula's")
        self._set("bounds", bounds)
        self._set("intercept", table.intercept)
        self._set("_table", table)

    @property
    def table(self):
        """The :class:`~bayesdp.releases.formula.TableEncoding` of ``formula`` and ``bounds``
        (None without a formula)."""
        return self.__dict__.get("_table")

    def _check_design(self):
        """``intercept`` and ``include_yty`` True or False, ``average_rows`` a whole number
        >= 1."""
        self._set("intercept", check_intercept(self.intercept))
        self._set("average_rows", check_average_rows(self.average_rows))
        if not isinstance(self.include_yty, (bool, np.bool_)):
            raise BayesdpInputError(f"include_yty must be True or False, got {self.include_yty!r}")
        self._set("include_yty", bool(self.include_yty))

    def _check_holders(self):
        """``split`` is "random" or "contiguous"; ``holder_name`` a name someone chose."""
        check_split(self.split)
        check_holder_name(self.holder_name)

    @property
    def private_bounds(self) -> bool:
        """True when the bounds are estimated with DP (``bounds="private"``)."""
        return self.bounds == "private"

    @property
    def bounds_epsilon(self) -> Optional[float]:
        """The epsilon of the private bounds estimate, epsilon * bounds_share (None without)."""
        return self.epsilon * self.bounds_share if self.private_bounds else None


def check_bounds_option(bounds):
    """``bounds`` as a release takes it: a public pair (B_x, B_y) of floats > 0, or one of
    _BOUNDS_WORDS."""
    if isinstance(bounds, str):
        if bounds not in _BOUNDS_WORDS:
            raise BayesdpInputError(
                f"bounds must be a pair (B_x, B_y), 'private' or 'data', got {bounds!r}")
        return bounds
    if bounds is None:
        raise BayesdpInputError("bounds are required: public (B_x, B_y), 'private' (estimated "
                                "with DP) or 'data' (not private)")
    return privacy.check_bounds(bounds)


def check_intercept(intercept) -> bool:
    """``intercept`` is True or False (a NumPy bool too); returns a bool."""
    if not isinstance(intercept, (bool, np.bool_)):
        raise BayesdpInputError(f"intercept must be True or False, got {intercept!r}")
    return bool(intercept)


def check_average_rows(k) -> int:
    """``average_rows`` is a whole number >= 1 (not a bool); returns an int."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise BayesdpInputError(f"average_rows must be a whole number >= 1, got {k!r}")
    return int(k)


#: The defaults of the mechanism keywords of release, release_file and release_dask (epsilon,
#: delta and bounds are None there: given by the keywords or by ``spec``).
_KEYWORD_DEFAULTS = {f.name: None if f.default is dataclasses.MISSING else f.default
                     for f in dataclasses.fields(ReleaseSpec)}


def spec_of_call(spec, **keywords) -> ReleaseSpec:
    """The spec of a call of release, release_file or release_dask: ``spec`` when one is given,
    else the ReleaseSpec of the mechanism ``keywords`` (every field of ReleaseSpec). With a
    ``spec``, the keywords must be left at their defaults: the mechanism is given once."""
    if spec is None:
        return ReleaseSpec(**keywords)
    if not isinstance(spec, ReleaseSpec):
        raise BayesdpInputError(f"spec must be a ReleaseSpec, got {type(spec).__name__}")
    given = [k for k, v in keywords.items() if not _left_out(v, _KEYWORD_DEFAULTS[k])]
    if given:
        raise BayesdpInputError(
            f"spec: give the mechanism either as spec=ReleaseSpec(...) or as keywords, not "
            f"both; got spec and {', '.join(given)}")
    return spec


def _left_out(value, default):
    """True when a keyword still has its default (None, a bool, or a number or string equal to
    the default and of its type)."""
    if default is None or isinstance(default, bool):
        return value is default
    return type(value) is type(default) and value == default
