"""Checks of the rows (X, y) and of what describes them: the bounds, the design (intercept,
averaging) and the feature names. Shared by the release, adaSSP and the non-private fit.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np

from .. import privacy
from ..errors import BayesdpInputError
from .release_object import INTERCEPT_NAME
from .spec import check_average_rows, check_bounds_option, check_intercept

# pandas and pyarrow (optional) are imported where a DataFrame's columns are checked: `import
# bayesdp` imports this module

_DATA_BOUNDS_WARNING = (
    "bounds='data': B_x and B_y are read off the data, so the noise scale depends on the data and "
    "the release is NOT differentially private. It is flagged bounds_from_data=True."
)


def check_rows(X, y, d=None, finite=True):
    """(X, y) as float64 arrays (X itself when it is one), after checking shapes and types and,
    with ``finite``, that every value is finite (:func:`check_finite`)."""
    _check_number_types(X, "X")
    _check_number_types(y, "y")
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
        X, y = _as_float64(X), _as_float64(y)
    except (TypeError, ValueError):
        raise BayesdpInputError("X and y must be numeric") from None
    if finite and not (all_finite(X) and all_finite(y)):
        check_finite(X, y)
    return X, y


#: :func:`pandas.api.types.infer_dtype` kinds of an object column that holds numbers
_NUMBER_KINDS = frozenset({"integer", "floating", "mixed-integer-float", "decimal", "boolean",
                           "complex", "empty"})
#: what :func:`non_numeric_error` tells the user to do with a date, time or duration
_TEMPORAL_HINT = (
    "a date, time or duration is not a number bayesdp releases: read as one it is a count of "
    "some unit (nanoseconds, days) since 1970 or midnight, which the bounds would clip; convert "
    "it to a number in a unit you choose (e.g. days since a reference date, age in years)")


def frame_dtype_problem(dtype, column=None):
    """None when a pandas column of ``dtype`` holds numbers, else (description, temporal).

    Numbers are integers and floats (NumPy's or pandas' nullable dtypes, sparse or pyarrow
    backed), decimals, categories whose categories are numbers, and booleans, read as 0/1: a
    yes/no column is a 0/1 indicator, the usual coding of a binary regressor, whose value does
    not depend on a unit or an origin. Dates, times, durations, periods and intervals are
    refused (``temporal`` True): as numbers they are counts of nanoseconds since 1970, whose
    scale no bound fits. Text and categories of text are refused. An object column (``column``,
    the Series, is looked at only then) is refused unless its values are numbers."""
    import pandas as pd

    if isinstance(dtype, pd.CategoricalDtype):
        inner = frame_dtype_problem(dtype.categories.dtype, dtype.categories)
        return None if inner is None else (f"category of {inner[0]}", inner[1])
    if isinstance(dtype, pd.ArrowDtype):
        import pyarrow as pa

        t = dtype.pyarrow_dtype
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t) \
                or pa.types.is_decimal(t):
            return None
        return str(dtype), pa.types.is_temporal(t) or pa.types.is_interval(t)
    if isinstance(dtype, np.dtype):
        if dtype.kind in "biufc":
            return None
        if dtype.kind == "O":
            kind = "empty" if column is None else pd.api.types.infer_dtype(column, skipna=True)
            if kind in _NUMBER_KINDS:
                return None
            return f"object ({kind} values)", kind in ("datetime", "datetime64", "date",
                                                        "time", "timedelta", "timedelta64",
                                                        "period", "interval")
        return str(dtype), dtype.kind in "mM"
    if pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype):
        return None
    return str(dtype), isinstance(dtype, (pd.DatetimeTZDtype, pd.PeriodDtype, pd.IntervalDtype))


def non_numeric_error(where, bad, ycol=None, rows="", columns=None):
    """The error naming the columns ``bad`` [(name, type description or None, temporal)] that do
    not hold numbers (``ycol``: the response's name; ``rows``: which rows; ``columns``: all the
    columns, listed for the user)."""
    what = ", ".join(f"{c!r}" + (" (y_column)" if ycol is not None and c == ycol else "")
                     + (f" of type {t}" if t else "") for c, t, _ in bad)
    hints = []
    if any(temporal for *_, temporal in bad):
        hints.append(_TEMPORAL_HINT)
    if columns is not None:
        hints.append(f"columns: {list(columns)} (holder labels go in node_column; a category "
                     "goes in as 0/1 columns, one per level)")
    return BayesdpInputError(f"{where}: non-numeric values in column(s) {what or '?'}{rows}"
                             + "".join(f"; {h}" for h in hints))


def _check_number_types(a, name):
    """Refuse ``a`` (``X`` or ``y``: an array, a pandas DataFrame or Series) when it holds
    dates, times, durations or text, naming the columns (see :func:`frame_dtype_problem`):
    NumPy converts datetime64 and timedelta64 values to float64 counts of their unit and
    numeric text to its number without a word, so they would otherwise be released as such."""
    pd = sys.modules.get("pandas")
    if pd is not None and isinstance(a, (pd.DataFrame, pd.Series)):
        frame = a.to_frame() if isinstance(a, pd.Series) else a
        bad = []
        for k, dt in enumerate(frame.dtypes):
            obj = getattr(dt, "kind", "") == "O"  # only then are the values looked at
            problem = frame_dtype_problem(dt, frame.iloc[:, k] if obj else None)
            if problem is not None:
                bad.append((frame.columns[k] if isinstance(a, pd.DataFrame) else name, *problem))
        if bad:
            raise non_numeric_error(name, bad)
        return
    dt = getattr(a, "dtype", None)
    if isinstance(dt, np.dtype) and dt.kind in "mMUSV":
        raise BayesdpInputError(
            f"{name} holds values of type {dt}, not numbers"
            + (f"; {_TEMPORAL_HINT}" if dt.kind in "mM" else
               " (text is not read as numbers: convert it first)"))


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


def _as_float64(a):
    """``a`` as a contiguous float64 array: ``a`` itself when it is one already (never
    changed in place by bayesdp), otherwise a copy in its own memory order."""
    if a.dtype == np.float64 and (a.flags.c_contiguous or a.flags.f_contiguous):
        return a
    return a.astype(np.float64)


def resolve_bounds(bounds, X, y):
    """((B_x, B_y), private) of ``bounds``: a public pair as it is (private True), or "data":
    the largest ||x_i|| and |y_i| of the rows (:func:`bounds_read_off`, private False)."""
    bounds = check_bounds_option(bounds)
    if bounds == "private":
        raise BayesdpInputError("bounds='private' is estimated by release and release_file "
                                "only; give public bounds (B_x, B_y) here")
    if bounds == "data":
        if X is None:
            raise BayesdpInputError("bounds='data' needs the data")
        return bounds_read_off(float(privacy.row_norms(X)[0].max()), float(np.abs(y).max())), \
            False
    return bounds, True


def bounds_read_off(bx, by):
    """Bounds read off the data, the largest ||x_i|| and |y_i| (at least the smallest positive
    float), with the loud warning that the noise scale, and so the release, is not private."""
    warnings.warn(_DATA_BOUNDS_WARNING, UserWarning, stacklevel=3)
    tiny = np.finfo(float).tiny
    return privacy.check_bounds((max(bx, tiny), max(by, tiny)))


def check_design(intercept, average_rows, names=()):
    """Validate ``intercept`` and ``average_rows``; return k. With an intercept no feature may
    be called "intercept" (the name of theta's first coordinate)."""
    intercept = check_intercept(intercept)
    k = check_average_rows(average_rows)
    if intercept and INTERCEPT_NAME in list(names):
        raise BayesdpInputError(
            f"feature_names: {INTERCEPT_NAME!r} is the name of the intercept column that "
            "intercept=True adds; rename that feature")
    return k


def looks_numeric(text) -> bool:
    """True when a name is a number as a CSV reader would parse it ("3", "-0.5", "1e3", "nan")."""
    if isinstance(text, (int, float, np.integer, np.floating)) and not isinstance(text, bool):
        return True
    try:
        float(str(text).strip())
    except ValueError:
        return False
    return True


def check_names_distinct(names, where, what="column"):
    """Refuse names that are empty (or blank) or repeated, naming them and their positions:
    the names are published as feature names and must tell the columns apart. (pandas itself
    renames a CSV's second column "a" to "a.1" and an unnamed one to "Unnamed: 1", names that
    are not in the file; with a repeated name, selecting a column selects all of them.)"""
    names = list(names)
    blank = [k for k, f in enumerate(names) if isinstance(f, str) and not f.strip()]
    if blank:
        which = (f"{what} {blank[0]} (counting from 0) has an empty name" if len(blank) == 1
                 else f"{what}s {blank[:10]}{' ...' if len(blank) > 10 else ''} (counting from 0) "
                 "have empty names")
        raise BayesdpInputError(
            f"{where}: {which}; the names are published as feature names, so every {what} "
            "needs a name of its own: name it or remove it")
    at = {}
    for k, f in enumerate(names):
        at.setdefault(f, []).append(k)
    dups = [(f, ks) for f, ks in at.items() if len(ks) > 1]
    if dups:
        listing = "; ".join(f"{f!r} at {what}s {ks}" for f, ks in dups[:5])
        raise BayesdpInputError(
            f"{where}: repeated {what} name{'s' if len(dups) > 1 else ''} ({listing}, counting "
            f"from 0){' ...' if len(dups) > 5 else ''}; each {what} needs a name of its own, or "
            "the published feature names cannot tell the columns apart: rename or remove the "
            "copies")
    return names


def check_feature_names(names, d, where):
    """Validated feature names: d distinct, non-empty strings that are not numbers (a number
    as a name is most likely a data value, e.g. a header-less CSV read with its first row as
    header)."""
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
    return check_names_distinct(names, where, "feature")


def dataframe_names(X):
    """Feature names from a DataFrame's columns: strings, or positions 0..d-1 (a RangeIndex,
    e.g. from header=None), which become "0", "1", ...; anything else is refused."""
    cols = list(X.columns)
    if all(isinstance(c, (int, np.integer)) and not isinstance(c, bool) for c in cols) \
            and [int(c) for c in cols] == list(range(len(cols))):
        return [str(c) for c in cols]
    return check_feature_names(cols, len(cols), "X.columns")
