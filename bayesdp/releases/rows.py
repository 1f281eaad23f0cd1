"""Checks of the rows (X, y) and of what describes them: the bounds, the design (intercept,
averaging) and the feature names. Shared by the release, adaSSP and the non-private fit.
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import privacy
from ..errors import BayesdpInputError
from .release_object import INTERCEPT_NAME

DATA_BOUNDS_WARNING = (
    "bounds='data': B_x and B_y are read off the data, so the noise scale depends on the data and "
    "the release is NOT differentially private. It is flagged private_bounds=False."
)


def check_rows(X, y, d=None, finite=True):
    """(X, y) as float64 arrays (X itself when it is one), after checking shapes and types and,
    with ``finite``, that every value is finite (:func:`check_finite`)."""
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2:
        raise BayesdpInputError(f"X must be a 2-d array (rows x features), got shape {X.shape}")
    if d is not None and X.shape[1] != d:
        raise BayesdpInputError(f"X must have {d} columns, got {X.shape[1]}")
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1 or y.shape[0] != X.shape[0]:
        raise BayesdpInputError(
            f"y must be a 1-d array with one value per row of X ({X.shape[0]}), got shape {y.shape}"
        )
    for name, a in (("X", X), ("y", y)):
        if np.iscomplexobj(a) or (a.dtype == object and any(isinstance(v, complex)
                                                            for v in a.ravel())):
            raise BayesdpInputError(
                f"{name} has complex values; bayesdp needs real numbers (the imaginary part "
                "would otherwise be dropped silently)")
    try:
        X, y = as_float64(X), as_float64(y)
    except (TypeError, ValueError):
        raise BayesdpInputError("X and y must be numeric") from None
    if finite and not (all_finite(X) and all_finite(y)):
        check_finite(X, y)
    return X, y


def check_finite(X, y):
    """Refuse rows with NaN or infinite values, naming how many and the first."""
    bad = ~np.isfinite(X).all(axis=1) | ~np.isfinite(y)
    if bad.any():
        raise BayesdpInputError(
            f"X or y contains NaN or infinite values in {int(bad.sum())} rows (first row "
            f"{int(np.flatnonzero(bad)[0])}); remove or impute them before releasing"
        )


def all_finite(a):
    """True when every value of the float array ``a`` is finite: at once when its sum is
    finite (a NaN or inf makes the sum NaN or inf), else value by value (the sum of finite
    values can overflow)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(np.sum(a))) or bool(np.isfinite(a).all())


def as_float64(a):
    """``a`` as a contiguous float64 array: ``a`` itself when it is one already (never
    changed in place by bayesdp), otherwise a copy in its own memory order."""
    if a.dtype == np.float64 and (a.flags.c_contiguous or a.flags.f_contiguous):
        return a
    return a.astype(np.float64)


def resolve_bounds(bounds, X, y):
    if isinstance(bounds, str):
        if bounds == "private":
            raise BayesdpInputError("bounds='private' is estimated by release and release_file "
                                    "only; give public bounds (B_x, B_y) here")
        if bounds != "data":
            raise BayesdpInputError(
                f"bounds must be a pair (B_x, B_y), 'private' or 'data', got {bounds!r}")
        if X is None:
            raise BayesdpInputError("bounds='data' needs the data")
        warnings.warn(DATA_BOUNDS_WARNING, UserWarning, stacklevel=3)
        bx = float(privacy.row_norms(X)[0].max())
        by = float(np.abs(y).max())
        tiny = np.finfo(float).tiny
        return privacy.check_bounds((max(bx, tiny), max(by, tiny))), False
    if bounds is None:
        raise BayesdpInputError("bounds are required: public (B_x, B_y), or 'data' (not private)")
    return privacy.check_bounds(bounds), True


def check_design(intercept, average_rows, names=()):
    """Validate ``intercept`` and ``average_rows``; return k. With an intercept no feature may
    be called "intercept" (the name of theta's first coordinate)."""
    if not isinstance(intercept, (bool, np.bool_)):
        raise BayesdpInputError(f"intercept must be True or False, got {intercept!r}")
    k = average_rows
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)) or k < 1:
        raise BayesdpInputError(f"average_rows must be a whole number >= 1, got {average_rows!r}")
    if intercept and INTERCEPT_NAME in list(names):
        raise BayesdpInputError(
            f"feature_names: {INTERCEPT_NAME!r} is the name of the intercept column that "
            "intercept=True adds; rename that feature")
    return int(k)


def looks_numeric(text) -> bool:
    """True when a name is a number as a CSV reader would parse it ("3", "-0.5", "1e3", "nan")."""
    if isinstance(text, (int, float, np.integer, np.floating)) and not isinstance(text, bool):
        return True
    try:
        float(str(text).strip())
    except ValueError:
        return False
    return True


def check_feature_names(names, d, where):
    """Validated feature names: d distinct strings that are not numbers (a number as a name is
    most likely a data value, e.g. a header-less CSV read with its first row as header)."""
    names = list(names)
    if len(names) != d:
        raise BayesdpInputError(f"{where}: expected {d} feature names, got {len(names)}")
    for k, f in enumerate(names):
        if not isinstance(f, str):
            raise BayesdpInputError(
                f"{where}: feature name {k} is {f!r} ({type(f).__name__}); names must be strings")
        if looks_numeric(f):
            raise BayesdpInputError(
                f"{where}: feature name {k} is {f!r}, a number; a number as a column name is most "
                "likely a data value (e.g. a CSV without header read with header=0), and it "
                "would be published: give names that are not numbers")
    return names


def dataframe_names(X):
    """Feature names from a DataFrame's columns: strings, or positions 0..d-1 (a RangeIndex,
    e.g. from header=None), which become "0", "1", ...; anything else is refused."""
    cols = list(X.columns)
    if all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in cols) \
            and [int(c) for c in cols] == list(range(len(cols))):
        return [str(c) for c in cols]
    return check_feature_names(cols, len(cols), "X.columns")
