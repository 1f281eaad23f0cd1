"""Posterior predictive distribution of y at new rows x: y_new = x^T theta + e, e ~ N(0, sigma_y^2).

:func:`predict` draws y_new once per posterior draw (theta_k, sigma_y2_k) and returns a copy of
the InferenceData with ArviZ's groups for out-of-sample predictions, ``predictions`` (``y``,
dims chain, draw, row) and ``predictions_constant_data`` (``X``, dims row, feature) - the groups
``az.from_numpyro(mcmc, predictions=...)`` and PyMC's ``predictions=True`` fill.
:func:`prediction_summary` gives one row per new row: mean, sd, and the equal-tailed interval
(or the HDI); given the posterior and the rows, it computes them in blocks of rows without the
draws (for large tables).

Methods without sigma_y2 draws: ``fast`` (Bayes-fixedS-fast) fixes sigma_y^2 at the value its
fit used (the plug-in (B_y / 3)^2 unless ``fit(..., sigma_y2=...)`` gave one; attrs
``sigma_y2_plugin``), so its predictive is y_new ~ N(x^T m, x^T C x + sigma_y2_plugin) exactly.
The plug-in comes from the bound on |y| and is usually much larger than the true noise
variance, so ``fast``'s prediction intervals are wide; fit with ``sigma_y2=...`` or use an MCMC
method (``fixeds``) to have sigma_y^2 estimated.
"""

from __future__ import annotations

import contextlib
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


def predict(idata, X_new, *, seed=None, prob=0.9, encoding=None):
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
    prob : float in (0, 1)
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
    It holds draws x rows numbers: for many rows, :func:`prediction_summary` with ``X_new``
    gives the per-row summary without them.
    """
    if isinstance(idata, (str, bytes)) or hasattr(idata, "__fspath__"):
        idata = diagnostics.load(idata)
    names = feature_names(idata)
    X_new = table_design(idata, X_new, names, encoding)
    X, rows = check_new_rows(X_new, names)
    diagnostics.check_interval(prob, "eti")
    seed = check_seed(seed)
    if seed is None:
        seed = secrets.randbits(63)
    theta = np.asarray(idata.posterior["theta"].transpose("chain", "draw", ...).values,
                       dtype=float)
    s2, source = _noise_variance(idata)
    spread = warn_sigma_y(idata, s2)
    rng = np.random.default_rng(seed)
    y = rng.standard_normal((*theta.shape[:2], len(X)))
    y *= np.sqrt(s2)[..., None]
    y += theta @ X.T  # x^T theta_k for every draw and row: one matrix product
    attrs = {"predict_seed": int(seed), "prob": prob, "sigma_y2_source": source,
             "sigma_y_spread": spread,
             "method": diagnostics.attrs(idata).get("method", "?")}
    return diagnostics.with_predictions(
        idata, predictions={"y": y}, constant_data={"X": X},
        coords={"row": rows, "feature": names}, dims={"y": ["row"], "X": ["row", "feature"]},
        attrs=attrs)


def warn_sigma_y(idata, s2, stacklevel=3):
    """Warn (once per call) when the release determines sigma_y poorly; returns the spread."""
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
            CalibrationWarning, stacklevel=stacklevel)
    return spread


def prediction_summary(idata, X_new=None, *, prob=None, interval="eti", seed=None,
                       encoding=None) -> pd.DataFrame:
    """One row per new row: ``mean``, ``sd`` and the ``prob`` interval of y_new, its ends named
    as every table of bayesdp names them (``eti_5%``, ``eti_95%`` at 0.9: equal-tailed, the
    default; ``hdi_5%``, ``hdi_95%`` with ``interval="hdi"``).

    ``prediction_summary(pred)``: the summary of :func:`predict`'s draws (``prob`` default: the
    one given to it). ``prediction_summary(idata, X_new)``: the same summary straight from the
    posterior, in blocks of rows, never holding draws x rows numbers (for many rows; memory
    independent of their number); ``X_new`` as for :func:`predict`.

    mean and sd are exact given the posterior draws (Rao-Blackwellised: mean = x^T mean(theta),
    sd^2 = x^T Cov(theta) x + mean(sigma_y2), Cov with ddof 1), so no noise draw adds Monte
    Carlo error. The equal-tailed interval from the posterior is the quantiles of the
    predictive mixture over the posterior draws compressed to 64 clusters, each a Gaussian
    (:func:`draw_clusters`: the row's mixture keeps the exact mean and variance), found by two
    Halley steps from the Cornish-Fisher expansion (no noise drawn);
    from :func:`predict`'s draws, their quantiles. For ``fast`` everything is exact: the
    predictive is N(x^T m, x^T C x + sigma_y2_plugin) with the closed-form (m, C). The HDI is
    that of draws of y (from the posterior: one noise draw per posterior draw and row,
    ``seed``). ``table.attrs`` records ``prob`` and ``interval``.
    """
    import pandas as pd

    if X_new is not None:
        names = feature_names(idata)
        X, rows = check_new_rows(table_design(idata, X_new, names, encoding), names)
        prob = 0.9 if prob is None else prob
        table = summarise_rows(idata, X, prob=prob, interval=interval, seed=seed)
        table.index = pd.Index(rows, name="row")
        return table
    if "predictions" not in idata.groups() or "y" not in idata.predictions:
        raise BayesdpInputError("idata has no predictions group with y; call bayesdp.predict("
                                "idata, X_new) first, or prediction_summary(idata, X_new)")
    if prob is None:
        prob = idata.predictions.attrs.get("prob", 0.9)
    diagnostics.check_interval(prob, interval)
    X = np.asarray(idata.predictions_constant_data["X"].values, dtype=float)
    mean, sd, exact = predictive_moments(idata, X)
    if exact:
        lower, upper = _gaussian_interval(mean, sd, prob)
    else:
        y = idata.predictions["y"].transpose("chain", "draw", "row").values
        lower, upper = diagnostics.interval_of(y.reshape(-1, y.shape[-1]), prob, interval).T
    rows = idata.predictions["y"].coords["row"].values
    lo_name, hi_name = diagnostics.interval_columns(prob, interval)
    table = pd.DataFrame({"mean": mean, "sd": sd, lo_name: lower, hi_name: upper},
                         index=pd.Index(rows, name="row"))
    table.attrs.update({"prob": prob, "interval": interval})
    return table


#: numbers per block of :func:`summarise_rows` (draws x rows, or clusters x rows x d; 2^20:
#: 8 MiB per array)
BLOCK_NUMBERS = 1 << 20
#: clusters of the posterior draws whose Gaussians make the predictive mixture of the
#: equal-tailed interval (:func:`draw_clusters`)
MIXTURE_CLUSTERS = 64
_KMEANS_STEPS = 20  # Lloyd iterations of the clustering, from evenly spaced draws (no RNG)
_HALLEY_STEPS = 2  # from the Cornish-Fisher start (tests/test_predict.py: within 0.005 sd)


def summarise_rows(idata, X, *, prob=0.9, interval="eti", seed=None):
    """:func:`prediction_summary` of the rows of X (m, d), a float array in the posterior's
    feature order, in blocks of rows (:data:`BLOCK_NUMBERS`): a DataFrame with mean, sd and
    the interval's ends, indexed 0..m-1."""
    import pandas as pd

    diagnostics.check_interval(prob, interval)
    X = np.asarray(X, dtype=float)
    s2, _ = _noise_variance(idata)
    s2 = s2.ravel()
    closed = _gaussian_closed_form(idata)
    if closed is not None:
        m, C = closed
        mean = X @ m
        sd = np.sqrt(np.einsum("ij,jk,ik->i", X, C, X) + float(np.mean(s2)))
        lower, upper = _gaussian_interval(mean, sd, prob)
    else:
        theta = diagnostics.posterior_array(idata, "theta")
        tbar = theta.mean(axis=0)
        cov = np.atleast_2d(np.cov(theta, rowvar=False, ddof=1))
        mean = X @ tbar
        sd = np.sqrt(np.maximum(np.einsum("ij,jk,ik->i", X, cov, X), 0.0) + float(np.mean(s2)))
        lower, upper = np.empty(len(X)), np.empty(len(X))
        if interval == "eti":
            w, centres, covs, s2c = draw_clusters(theta, s2)
            block = max(1, BLOCK_NUMBERS // (len(w) * X.shape[1]))  # (M, rows, d) per block
            probs = ((1 - prob) / 2, (1 + prob) / 2)
            for lo in range(0, len(X), block):
                Xb = X[lo:lo + block]
                mu = centres @ Xb.T  # (M, rows)
                var = ((Xb @ covs) * Xb).sum(axis=-1) + s2c[:, None]  # x^T C_j x, by BLAS
                start, c, sd_k = _cornish_fisher(mu, var, w, probs)
                lower[lo:lo + block], upper[lo:lo + block] = _mixture_quantiles(
                    mu, np.sqrt(var), w, probs, start, sd_k)
        else:
            rng = np.random.default_rng(seed)
            sq = np.sqrt(s2)[:, None]
            block = max(1, BLOCK_NUMBERS // len(theta))
            for lo in range(0, len(X), block):
                sl = slice(lo, lo + block)
                y = theta @ X[sl].T
                y += sq * rng.standard_normal(y.shape)
                lower[sl], upper[sl] = diagnostics.hdi(y, prob).T
    lo_name, hi_name = diagnostics.interval_columns(prob, interval)
    table = pd.DataFrame({"mean": mean, "sd": sd, lo_name: lower, hi_name: upper},
                         index=pd.RangeIndex(len(X), name="row"))
    table.attrs.update({"prob": prob, "interval": interval})
    return table


def _gaussian_interval(mean, sd, prob):
    from scipy import stats

    z = stats.norm.ppf(0.5 + prob / 2)
    return mean - z * sd, mean + z * sd


def draw_clusters(theta, s2, clusters=None):
    """The posterior draws (theta_k, sigma_y2_k), k = 1..K, as a mixture of Gaussians: k-means
    clusters of the standardised [theta, log sigma_y^2] (:data:`MIXTURE_CLUSTERS`, Lloyd's
    iterations from evenly spaced draws), each with its weight w_j (its share of the draws),
    theta's mean c_j and covariance C_j over its draws (ddof 0) and the mean of sigma_y2. At a
    row x the predictive sum_j w_j N(x^T c_j, x^T C_j x + mean_j(sigma_y2)) then has exactly the
    mean and variance of the mixture over all the draws (the law of total variance); the
    clusters keep its shape. Returns (w (M,), c (M, d), C (M, d, d), s2 (M,))."""
    theta = np.asarray(theta, dtype=float)
    s2 = np.asarray(s2, dtype=float).ravel()
    K, d = theta.shape
    M = min(K, MIXTURE_CLUSTERS if clusters is None else clusters)
    feats = np.column_stack([theta, np.log(s2)])
    scale = feats.std(axis=0)
    feats = feats / np.where(scale > 0, scale, 1.0)
    centre = feats[np.linspace(0, K - 1, M).round().astype(int)]
    for _ in range(_KMEANS_STEPS):
        dist = (feats * feats).sum(1)[:, None] - 2 * feats @ centre.T + (centre * centre).sum(1)
        label = dist.argmin(axis=1)
        counts = np.bincount(label, minlength=M)
        new = np.zeros_like(centre)
        np.add.at(new, label, feats)
        keep = counts > 0
        new[keep] /= counts[keep, None]
        new[~keep] = centre[~keep]
        if np.allclose(new, centre):
            break
        centre = new
    label = ((feats * feats).sum(1)[:, None] - 2 * feats @ centre.T
             + (centre * centre).sum(1)).argmin(axis=1)
    used = np.unique(label)
    label = np.searchsorted(used, label)
    counts = np.bincount(label)
    w = counts / K
    c = np.zeros((len(used), d))
    np.add.at(c, label, theta)
    c /= counts[:, None]
    dev = theta - c[label]
    C = np.zeros((len(used), d, d))
    np.add.at(C, label, dev[:, :, None] * dev[:, None, :])
    C /= counts[:, None, None]
    s2c = np.bincount(label, weights=s2) / counts
    return w, c, C, s2c


def _cornish_fisher(mu, var, w, probs):
    """Starting points (len(probs), m) for :func:`_mixture_quantiles`: the Cornish-Fisher
    expansion with the exact skewness and excess kurtosis of the mixture sum_j w_j N(mu[j, i],
    var[j, i]) (E(y - c)^3 = sum_j w_j [(mu - c)^3 + 3 (mu - c) var], E(y - c)^4 = sum_j w_j
    [(mu - c)^4 + 6 (mu - c)^2 var + 3 var^2]); and the mixture's mean c and sd (m,)."""
    from scipy import stats

    w = w[:, None]
    c = (w * mu).sum(axis=0)
    e = mu - c
    e2 = e * e
    m2 = (w * (e2 + var)).sum(axis=0)
    m3 = (w * (e2 * e + 3 * e * var)).sum(axis=0)
    m4 = (w * (e2 * e2 + 6 * e2 * var + 3 * var * var)).sum(axis=0)
    sd = np.sqrt(m2)
    g1, g2 = m3 / sd ** 3, m4 / m2 ** 2 - 3.0
    out = []
    for p in probs:
        z = stats.norm.ppf(p)
        q = (z + (z * z - 1) * g1 / 6 + (z ** 3 - 3 * z) * g2 / 24
             - (2 * z ** 3 - 5 * z) * g1 * g1 / 36)
        out.append(c + sd * q)
    return np.stack(out), c, sd


def _mixture_quantiles(mu, s, w, probs, start, scale):
    """The ``probs`` quantiles of the mixture sum_j w_j N(mu[j, i], s[j, i]^2) for each column
    i of mu (M, m): :data:`_HALLEY_STEPS` steps of Halley's method on g(q) = F(q) - p from
    ``start`` (len(probs), m), the Cornish-Fisher expansion (:func:`_cornish_fisher`), each
    step at most ``scale`` (m,) long. F is smooth and increasing and the start is close, so the
    steps converge cubically: tests/test_predict.py checks them against bisection."""
    from scipy.special import ndtr

    inv = 1.0 / s
    wc = w[:, None] / np.sqrt(2.0 * np.pi)
    wd = w[:, None]
    out = np.array(start, dtype=float)
    for i, p in enumerate(probs):
        q = out[i]
        for _ in range(_HALLEY_STEPS):
            z = (q[None, :] - mu) * inv
            g = (wd * ndtr(z)).sum(axis=0) - p
            phi = np.exp(-0.5 * z * z) * inv * wc
            g1 = phi.sum(axis=0)
            g2 = -(phi * z * inv).sum(axis=0)
            step = 2 * g * g1 / np.maximum(2 * g1 * g1 - g * g2, 1e-300)
            q = q - np.clip(step, -scale, scale)
        out[i] = q
    return out[0], out[1]


def _gaussian_closed_form(idata):
    """(m, C) of a posterior whose theta is exactly Gaussian and sigma_y^2 fixed (``fast``),
    else None."""
    from .report import gaussian_moments

    return gaussian_moments(idata)


def predictive_moments(idata, X):
    """(mean, sd, exact) of y_new at the rows of X (m, d), from the posterior of theta and
    sigma_y^2: exact closed form for ``fast`` (``exact=True``), else from the draws."""
    X = np.asarray(X, dtype=float)
    closed = _gaussian_closed_form(idata)
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


def read_csv(path, *, header=True, chunksize=None):
    """A CSV file of new rows as a pandas DataFrame (``header=False``: columns numbered), or with
    ``chunksize`` an iterator of DataFrames of that many rows; an empty, malformed or non-UTF-8
    file raises :class:`BayesdpInputError` naming it (while reading, for chunks)."""
    if chunksize is not None:
        return _csv_chunks(path, header, chunksize)
    with _csv_errors(path):
        import pandas as pd

        return pd.read_csv(path, header=0 if header else None)


def _csv_chunks(path, header, chunksize):
    import pandas as pd

    with _csv_errors(path):
        yield from pd.read_csv(path, chunksize=chunksize, header=0 if header else None)


@contextlib.contextmanager
def _csv_errors(path):
    """pandas' errors of reading ``path`` as BayesdpInputError naming it."""
    import pandas as pd

    try:
        yield
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
    frame, ignored = new_row_frame(read_csv(path, header=header), names, path, header=header)
    X = check_new_rows(frame.to_numpy(), names, what=f"{path} (data rows from 0)")[0]
    return X, ignored


def new_row_frame(frame, names, path, *, header=True):
    """The feature columns of a DataFrame read from a CSV of new rows (all of them, or one
    chunk), in the order of ``names``, and the columns ignored; a clear error when the file has
    no rows, its header looks like data, a feature is missing or holds text."""
    import pandas as pd

    if len(frame) == 0:
        raise BayesdpInputError(f"{path}: the file has a header and no rows" if header
                                else f"{path}: the file has no rows")
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
        return frame, ignored
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
    ignored = [c for c in cols if c not in names]
    return frame.reset_index(drop=True)[names], ignored


