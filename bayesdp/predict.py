"""Posterior predictive distribution of y at new rows x: y_new = x^T theta + e, e ~ N(0, sigma_y^2).

:func:`predict` draws y_new once per posterior draw (theta_k, sigma_y2_k) and returns a copy of
the InferenceData with ArviZ's groups for out-of-sample predictions, ``predictions`` (``y``,
dims chain, draw, row) and ``predictions_constant_data`` (``X``, dims row, feature) - the groups
``az.from_numpyro(mcmc, predictions=...)`` and PyMC's ``predictions=True`` fill.
:func:`prediction_summary` gives one row per new row: mean, sd, and the HDI.

Methods without sigma_y2 draws: ``fast`` (Bayes-fixedS-fast) fixes sigma_y^2 at the value its
fit used (the plug-in (B_y / 3)^2 unless ``fit(..., sigma_y2=...)`` gave one; attrs
``sigma_y2_plugin``), so its predictive is y_new ~ N(x^T m, x^T C x + sigma_y2_plugin) exactly.
The plug-in comes from the bound on |y| and is usually much larger than the true noise
variance, so ``fast``'s prediction intervals are wide; fit with ``sigma_y2=...`` or use an MCMC
method (``fixeds``) to have sigma_y^2 estimated.
"""

from __future__ import annotations

import secrets
import warnings
from typing import TYPE_CHECKING

import numpy as np

from . import diagnostics
from .errors import BayesdpInputError, CalibrationWarning, check_seed
from .releases.rows import looks_numeric

# pandas, scipy.stats and .report (which imports both) are imported where a table is built or
# read: `import bayesdp` loads none of them
if TYPE_CHECKING:
    import pandas as pd


def predict(idata, X_new, *, seed=None, hdi_prob=0.9, encoding=None):
    """Posterior predictive draws of y at the rows of ``X_new``.

    Parameters
    ----------
    idata : arviz.InferenceData from :func:`bayesdp.fit` (or ``fit_nonprivate``, or a netCDF
        file written by ``bayesdp fit --out``), with ``theta`` in its posterior.
    X_new : array (m, d) or pandas DataFrame
        New rows. A DataFrame whose column names are strings must have exactly the posterior's
        feature names (in any order; they are matched by name) and its index becomes the ``row``
        coordinate when it is unique; an array must have the d features in the posterior's
        order. No NaN or infinite values. For a posterior of a release made from a table with a
        formula (docs/tables.md): a table of new rows with the columns the formula uses (its
        response may be missing), encoded as the release encoded its rows (values clamped to
        the declared ranges, with a warning naming the columns; undeclared levels refused).
    seed : int or None
        Seed of the noise draws (None: fresh OS entropy, recorded in the attrs).
    hdi_prob : float in (0, 1)
        Probability of the intervals :func:`prediction_summary` reports by default (recorded in
        the attrs of the ``predictions`` group).
    encoding : Release, TableEncoding or None
        The table encoding of the release the posterior was fitted to (``release`` itself, or
        ``release.table``); default: the one the posterior records (attrs
        ``table_encoding``), if any.

    Returns
    -------
    A copy of ``idata`` with two more groups: ``predictions`` (``y``, dims chain, draw, row:
    y = x^T theta_k + sqrt(sigma_y2_k) N(0, 1) per posterior draw k) and
    ``predictions_constant_data`` (``X``, dims row, feature). Posteriors without sigma_y2 draws
    (``fast``) use the fixed sigma_y^2 of the fit (attrs ``sigma_y2_plugin``); the attrs of
    ``predictions`` say which (``sigma_y2_source``). The model has no intercept (the paper's).
    """
    if isinstance(idata, (str, bytes)) or hasattr(idata, "__fspath__"):
        idata = diagnostics.load(idata)
    names = feature_names(idata)
    X_new = table_design(idata, X_new, names, encoding)
    X, rows = check_new_rows(X_new, names)
    hdi_prob = _check_prob(hdi_prob)
    seed = check_seed(seed)
    if seed is None:
        seed = secrets.randbits(63)
    theta = np.asarray(idata.posterior["theta"].transpose("chain", "draw", ...).values,
                       dtype=float)
    s2, source = _noise_variance(idata)
    spread = sigma_y_spread(s2)
    if spread > SIGMA_Y_SPREAD_MAX:
        lo, hi = np.sqrt(np.quantile(s2, [0.05, 0.95]))
        warnings.warn(
            f"predict: the release determines sigma_y poorly (90% posterior interval {lo:.3g} "
            f"to {hi:.3g}, a factor {spread:.3g}), so the width of these prediction intervals "
            "rests on the prior of sigma_y^2, not on the data: their coverage can be far from "
            "nominal either way (docs/prediction.md, 'When sigma_y is not identified')"
            + ("" if diagnostics.attrs(idata).get("eiv_uses_yty") else
               "; a release with y^T y (release(..., include_yty=True)) fitted by 'eiv' "
               "determines sigma_y"),
            CalibrationWarning, stacklevel=2)
    rng = np.random.default_rng(seed)
    y = rng.standard_normal((*theta.shape[:2], len(X)))
    y *= np.sqrt(s2)[..., None]
    y += theta @ X.T  # x^T theta_k for every draw and row: one matrix product
    attrs = {"predict_seed": int(seed), "hdi_prob": hdi_prob, "sigma_y2_source": source,
             "sigma_y_spread": spread,
             "method": diagnostics.attrs(idata).get("method", "?")}
    return diagnostics.with_predictions(
        idata, predictions={"y": y}, constant_data={"X": X},
        coords={"row": rows, "feature": names}, dims={"y": ["row"], "X": ["row", "feature"]},
        attrs=attrs)


def prediction_summary(idata, hdi_prob=None) -> pd.DataFrame:
    """One row per new row of :func:`predict`: ``mean``, ``sd``, ``lower``, ``upper`` of y_new.

    mean and sd are of the predictive distribution given the posterior draws (Rao-Blackwellised:
    mean = x^T mean(theta), sd^2 = var(x^T theta) + mean(sigma_y2)), so the noise draws add no
    Monte Carlo error to them; (lower, upper) is the ``hdi_prob`` HDI of the draws of y (default:
    the ``hdi_prob`` given to :func:`predict`). For ``fast`` all four are exact: the predictive
    is N(x^T m, x^T C x + sigma_y2_plugin) with the closed-form (m, C).
    ``table.attrs["hdi_prob"]`` records the probability.
    """
    import pandas as pd
    from scipy import stats

    if "predictions" not in idata.groups() or "y" not in idata.predictions:
        raise BayesdpInputError("idata has no predictions group with y; call bayesdp.predict("
                                "idata, X_new) first")
    if hdi_prob is None:
        hdi_prob = idata.predictions.attrs.get("hdi_prob", 0.9)
    hdi_prob = _check_prob(hdi_prob)
    X = np.asarray(idata.predictions_constant_data["X"].values, dtype=float)
    mean, sd, exact = predictive_moments(idata, X)
    if exact:
        z = stats.norm.ppf(0.5 + hdi_prob / 2)
        lower, upper = mean - z * sd, mean + z * sd
    else:
        y = idata.predictions["y"].transpose("chain", "draw", "row").values
        lower, upper = diagnostics.hdi(y, hdi_prob).T
    rows = idata.predictions["y"].coords["row"].values
    table = pd.DataFrame({"mean": mean, "sd": sd, "lower": lower, "upper": upper},
                         index=pd.Index(rows, name="row"))
    table.attrs["hdi_prob"] = hdi_prob
    return table


def predictive_moments(idata, X):
    """(mean, sd, exact) of y_new at the rows of X (m, d), from the posterior of theta and
    sigma_y^2: exact closed form for ``fast`` (``exact=True``), else from the draws."""
    from .report import gaussian_moments

    X = np.asarray(X, dtype=float)
    closed = gaussian_moments(idata)
    s2, _ = _noise_variance(idata)
    if closed is not None:
        m, C = closed
        var = np.einsum("ij,jk,ik->i", X, C, X) + float(np.mean(s2))
        return X @ m, np.sqrt(var), True
    theta = diagnostics.posterior_array(idata, "theta")
    mu = theta @ X.T
    var = mu.var(axis=0, ddof=1) + float(np.mean(s2))
    return mu.mean(axis=0), np.sqrt(var), False


#: predict warns when sigma_y's 90% posterior interval spans more than this factor.
SIGMA_Y_SPREAD_MAX = 2.0


def sigma_y_spread(s2):
    """q95 / q05 of sigma_y over the draws of sigma_y^2 (1.0 when it is fixed)."""
    lo, hi = np.quantile(np.asarray(s2, dtype=float), [0.05, 0.95])
    return float(np.sqrt(hi / lo)) if lo > 0 else float("inf")


def _noise_variance(idata):
    """(sigma_y^2 per posterior draw (chain, draw), where it comes from)."""
    post = idata.posterior
    shape = (post.sizes["chain"], post.sizes["draw"])
    if "sigma_y2" in post:
        return (np.asarray(post["sigma_y2"].transpose("chain", "draw").values, dtype=float),
                "posterior draws of sigma_y2")
    a = diagnostics.attrs(idata)
    if "sigma_y2_plugin" in a:
        value = float(a["sigma_y2_plugin"])
        how = "given to fit" if a.get("sigma_y_rule") == "given" else \
            f"plug-in, rule {a.get('sigma_y_rule', '?')!r}"
        return np.full(shape, value), f"fixed at {value:.6g} ({how}) by method " \
                                      f"{a.get('method', '?')!r}"
    raise BayesdpInputError(
        f"the posterior (method {a.get('method', '?')!r}) has neither draws of sigma_y2 nor a "
        "fixed sigma_y2 (attrs sigma_y2_plugin), so the noise of new y is unknown")


def feature_names(idata) -> list:
    if not hasattr(idata, "posterior") or "theta" not in idata.posterior:
        raise BayesdpInputError("idata must be an ArviZ InferenceData from bayesdp.fit, with "
                                "theta in its posterior")
    da = idata.posterior["theta"]
    dims = [d for d in da.dims if d not in ("chain", "draw")]
    if len(dims) != 1:
        raise BayesdpInputError(f"posterior theta must have one dimension besides chain and "
                                f"draw, got {dims}")
    return [str(v) for v in da.coords[dims[0]].values] if dims[0] in da.coords \
        else [f"x{i}" for i in range(da.sizes[dims[0]])]


def table_encoding(idata, encoding=None):
    """The :class:`~bayesdp.releases.formula.TableEncoding` that new rows of a table are
    encoded by: ``encoding`` (a Release, its ``table``, or the record) when given, else the
    one ``idata`` records (attrs ``table_encoding``), else None."""
    from .releases.formula import TableEncoding, encoding_of

    if encoding is not None:
        return encoding_of(encoding)
    if not hasattr(idata, "posterior"):
        return None
    recorded = diagnostics.attrs(idata).get("table_encoding")
    return None if recorded is None else TableEncoding.from_dict(recorded)


def table_design(idata, X_new, names, encoding=None, what="X_new"):
    """``X_new`` as the design the posterior's features ``names`` need: a table (DataFrame or
    dict of columns) whose columns are not the features themselves is encoded by the table
    encoding (:func:`table_encoding`) into a DataFrame of the features; anything else is
    returned as it is. Values clamped to their declared ranges are named in a warning."""
    enc = table_encoding(idata, encoding)
    if enc is None:
        return X_new
    from .releases import INTERCEPT_NAME

    expected = ([INTERCEPT_NAME] if enc.intercept else []) + list(enc.feature_names)
    if list(names) != expected:
        raise BayesdpInputError(
            f"encoding: the formula {enc.formula!r} gives the features {expected}, but the "
            f"posterior has {list(names)}; give the encoding of the release it was fitted to")
    if isinstance(X_new, dict):
        import pandas as pd

        X_new = pd.DataFrame(X_new)
    cols = getattr(X_new, "columns", None)
    if cols is None or sorted(map(str, cols)) == sorted(expected):
        return X_new
    design = enc.design(X_new)
    clamped = {c: n for c, n in design.attrs.get("n_clamped", {}).items() if n}
    if clamped:
        listing = ", ".join(f"{c} ({n})" for c, n in clamped.items())
        warnings.warn(
            f"{what}: value(s) outside their declared ranges were clamped to them, as the "
            f"release clamped its rows: {listing}; predictions there are those at the range's "
            "end", UserWarning, stacklevel=3)
    return design


def check_new_rows(X_new, names, what="X_new"):
    """(X as a float (m, d) array in the order of ``names``, row labels) or a clear error."""
    d = len(names)
    rows = None
    if hasattr(X_new, "columns"):
        cols = list(X_new.columns)
        if all(isinstance(c, str) for c in cols):
            missing = [n for n in names if n not in cols]
            extra = [c for c in cols if c not in names]
            if missing or extra or len(cols) != d:
                raise BayesdpInputError(
                    f"{what}: its columns must be the features {names}"
                    + (f"; missing {missing}" if missing else "")
                    + (f"; not features {extra}" if extra else "")
                    + ("; duplicated names" if not missing and not extra else ""))
            X_new = X_new[names]
        index = getattr(X_new, "index", None)
        if index is not None and index.is_unique and all(
                isinstance(v, (str, int, np.integer)) and not isinstance(v, bool)
                for v in index):
            rows = [v if isinstance(v, str) else int(v) for v in index]
    X = np.asarray(X_new)
    if X.ndim != 2:
        raise BayesdpInputError(
            f"{what} must be 2-d (rows x {d} features), got shape {X.shape}"
            + ("; for one row use X.reshape(1, -1)" if X.ndim == 1 else ""))
    if X.shape[1] != d:
        raise BayesdpInputError(
            f"{what} has {X.shape[1]} columns, but the posterior has {d} features {names}")
    if X.shape[0] == 0:
        raise BayesdpInputError(f"{what} has no rows")
    if np.iscomplexobj(X):
        raise BayesdpInputError(f"{what} has complex values; real numbers are needed")
    try:
        X = X.astype(np.float64)
    except (TypeError, ValueError):
        raise BayesdpInputError(f"{what} must be numeric (features {names})") from None
    bad = ~np.isfinite(X)
    if bad.any():
        r, c = (int(v[0]) for v in np.nonzero(bad))
        raise BayesdpInputError(
            f"{what} has NaN or infinite values in {int(bad.any(axis=1).sum())} row(s) (first: "
            f"row {r}, feature {names[c]!r}); remove or impute them")
    return X, (list(range(X.shape[0])) if rows is None else rows)


def read_csv(path, *, header=True):
    """A CSV file of new rows as a pandas DataFrame (``header=False``: columns numbered); an
    empty, malformed or non-UTF-8 file raises :class:`BayesdpInputError` naming it."""
    import pandas as pd

    try:
        return pd.read_csv(path) if header else pd.read_csv(path, header=None)
    except pd.errors.EmptyDataError:
        raise BayesdpInputError(f"{path}: the file is empty") from None
    except pd.errors.ParserError as exc:
        raise BayesdpInputError(f"{path}: malformed CSV ({exc})") from None
    except UnicodeDecodeError:
        raise BayesdpInputError(f"{path}: not a UTF-8 text (CSV) file") from None


def read_new_rows(path, names, *, header=True):
    """The feature columns of a CSV file of new rows as a float (m, d) array in the order of
    ``names``, and the names of the columns that were ignored (with a header: the columns that
    are not features). Without a header the columns must be exactly the features, in order."""
    import pandas as pd

    frame = read_csv(path, header=header)
    if header and any(looks_numeric(c) for c in frame.columns):
        raise BayesdpInputError(
            f"{path}: the first row holds numbers ({', '.join(map(str, frame.columns))}), so it "
            "looks like data, not a header with the feature names; for a file without header "
            "pass --no-header")
    ignored = []
    if not header:
        if frame.shape[1] != len(names):
            raise BayesdpInputError(
                f"{path}: {frame.shape[1]} columns, but the posterior has {len(names)} features "
                f"({', '.join(names)}); without a header the columns must be exactly these "
                "features, in this order")
    else:
        cols = [str(c) for c in frame.columns]
        frame.columns = cols
        missing = [n for n in names if n not in cols]
        if missing:
            raise BayesdpInputError(
                f"{path}: feature column(s) {missing} missing (header: {cols}; the posterior's "
                f"features are {names}); a file without header needs --no-header")
        for n in names:
            if not pd.api.types.is_numeric_dtype(frame[n]):
                raise BayesdpInputError(f"{path}: column {n!r} is not numeric")
        frame = frame.reset_index(drop=True)[names]
        ignored = [c for c in cols if c not in names]
    X = check_new_rows(frame.to_numpy(), names, what=f"{path} (data rows from 0)")[0]
    return X, ignored


def _check_prob(p):
    if isinstance(p, bool) or not isinstance(p, (int, float, np.floating)) or not 0 < p < 1:
        raise BayesdpInputError(f"hdi_prob must be a number in (0, 1), got {p!r}")
    return float(p)
