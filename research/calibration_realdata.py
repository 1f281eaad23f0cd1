"""Do the 90% intervals hold on real data? Coverage of the non-private posterior over many releases.

For each data set (the paper's three UCI sets and its simulation, d = 5, n = 1e5), the columns
are standardised (whole-file mean and sd), a fixed 10% of the rows (seed 0) is held out for
prediction, the public bounds B_x and B_y are the 99.5% quantiles of ||x|| and |y| of the
training rows, and the training rows are clipped to them, as a careful user would. The
reference is the non-private posterior of all training rows (``bayesdp.fit_nonprivate``, same
bounds and default priors). Each release of the training rows draws new DP noise (seed 100 + r;
random split over J holders, eps as given, delta = 1e-5), and every method fits it with its
defaults. Printed per data set, J, eps and method (pooled over coefficients and releases):

- ``cover``: share of 90% intervals (5% and 95% quantiles) holding the reference mean;
  ``target``: what a calibrated posterior would give, 2 Phi(1.645 / sqrt(1 - r^2)) - 1 averaged
  over coefficients and releases, r = reference sd / private sd (the reference's own width is
  part of the private posterior's; 0.90 when r is small);
- ``worst_k``: the coverage of the coefficient whose intervals hold the reference least often
  (pooled coverage can hide one coefficient that is always missed);
- ``rms_z``: root mean square of (posterior mean - reference) / sqrt(private var - reference var)
  (about 1 when calibrated);
- ``width``: mean 90% width over the reference's;
- ``RMSE`` of the posterior mean against the reference and ``adaSSP`` (the same for adaSSP on
  releases of the same setting, seed 200 + r; ``ratio`` = RMSE / adaSSP's);
- ``pred_cov`` / ``pred_w``: coverage of the held-out y by the 90% posterior predictive interval
  and its mean width over the non-private posterior predictive's (``nonpriv_pred_cov``: the
  same coverage for the non-private predictive);
- ``warned``: share of fits that gave a ConvergenceWarning or CalibrationWarning;
  ``pred_warned``: share of ``predict`` calls that gave a CalibrationWarning (sigma_y poorly
  determined by the release).

Run from the project root (data from ../shared/data/uci or $BAYESDP_DATA_DIR):

    .venv/bin/python research/calibration_realdata.py                     # eiv and fast, the grid
    .venv/bin/python research/calibration_realdata.py --methods fixeds --releases 10 --J 5
    .venv/bin/python research/calibration_realdata.py --methods eiv:scales=per-slope   # options
    .venv/bin/python research/calibration_realdata.py --methods eiv:include_yty=true   # y^T y too
    .venv/bin/python research/calibration_realdata.py --methods eiv:include_yty=true,prior_a=0.1
    .venv/bin/python research/calibration_realdata.py --csv out.csv       # also a tidy CSV
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

SETS = ("powerplant", "airquality", "bikesharing", "simulation")
DEFAULT_DATA_DIR = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "uci"


def data_dir():
    """$BAYESDP_DATA_DIR, else ../shared/data/uci beside the project (None if neither exists)."""
    env = os.environ.get("BAYESDP_DATA_DIR")
    for d in ([Path(env)] if env else []) + [DEFAULT_DATA_DIR]:
        if d.is_dir():
            return d
    return None


def load(name, q=0.995, test_share=0.1):
    """(X_train, y_train, X_test, y_test, bounds) of a data set, prepared as the module says;
    None when the file is not there."""
    import bayesdp
    from bayesdp.paper import datasets

    if name == "simulation":
        sim = bayesdp.simulate(n=100_000, d=5, seed=1)
        X, y = sim.X, sim.y
    else:
        folder = data_dir()
        if folder is None:
            return None
        try:
            path = datasets.find_dataset_file(name, folder)
        except bayesdp.BayesdpInputError:
            return None
        Xf, yf, _, _ = datasets.read_regression_file(path)
        X, y = Xf.to_numpy(float), yf.to_numpy(float)
    X = (X - X.mean(0)) / X.std(0, ddof=1)
    y = (y - y.mean()) / y.std(ddof=1)
    test = np.random.default_rng(0).random(len(y)) < test_share
    Xt, yt = X[~test], y[~test]
    bx = float(np.quantile(np.linalg.norm(Xt, axis=1), q))
    by = float(np.quantile(np.abs(yt), q))
    Xt, yt, _ = bayesdp.privacy.clip_rows(Xt, yt, bx, by)
    return Xt, yt, X[test], y[test], (bx, by)


def _interval(draws, prob=0.9):
    lo, hi = np.quantile(draws, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
    return lo, hi


def reference(X, y, bounds, X_test, y_test, seed=0):
    """The non-private posterior: mean and sd of theta, and the predictive's 90% width and
    coverage on the held-out rows."""
    import bayesdp

    ref = bayesdp.fit_nonprivate(X, y, bounds=bounds, seed=seed)
    th = np.asarray(ref.posterior["theta"]).reshape(-1, X.shape[1])
    pred = np.asarray(bayesdp.predict(ref, X_test, seed=seed).predictions["y"]).reshape(
        -1, len(y_test))
    lo, hi = _interval(pred)
    return {"mean": th.mean(0), "sd": th.std(0), "pred_width": float(np.mean(hi - lo)),
            "pred_cov": float(np.mean((lo <= y_test) & (y_test <= hi)))}


def method_options(spec):
    """``"eiv:scales=per-slope"`` -> ("eiv", {"scales": "per-slope"}): a method and its
    options (strings) as one name; a bare name has none. The option ``include_yty=true`` is
    the release's (:func:`run_cell` releases y^T y as well), not the method's; ``prior_a=0.1``
    (any numeric ``prior_<field>``: a, b, kappa) sets that field of the fit's priors,
    ``prior_b_times=0.1`` sets b to 0.1 times the default's."""
    name, _, rest = spec.partition(":")
    options = dict(kv.split("=", 1) for kv in rest.split(",") if kv)
    return name, options


def run_cell(name, J, eps, methods, releases, prepared=None, delta=1e-5, verbose=False):
    """Rows (dicts) of the table for one data set, J and eps: one per method, and adaSSP's."""
    import bayesdp

    X, y, X_test, y_test, bounds = prepared if prepared is not None else load(name)
    d = X.shape[1]
    ref = reference(X, y, bounds, X_test, y_test)
    a_err = [np.mean((np.asarray(bayesdp.adassp(X, y, epsilon=eps, delta=delta, bounds=bounds,
                                                 nodes=J, seed=200 + r)).ravel() - ref["mean"])
                     ** 2) for r in range(releases)]
    rows = []
    for m in methods:
        method, options = method_options(m)
        # a release option, not a method's: releases that also publish y^T y
        include_yty = options.pop("include_yty", "false").lower() in ("true", "1", "yes")
        # prior_<field>=value: that field of the priors (e.g. prior_a=0.1), the rest default;
        # prior_b_times=f: b at f times the default's for these bounds
        fields = {k[len("prior_"):]: float(options.pop(k)) for k in list(options)
                  if k.startswith("prior_")}
        if "b_times" in fields:
            fields["b"] = fields.pop("b_times") * bayesdp.Priors().resolve(d, bounds=bounds).b
        if fields:
            options["priors"] = bayesdp.Priors(**fields)
        acc = {k: [] for k in ("cov", "target", "z", "width", "err", "pcov", "pwidth", "warn",
                               "pwarn", "secs", "spread", "share")}
        for r in range(releases):
            rel = bayesdp.release(X, y, epsilon=eps, delta=delta, bounds=bounds, nodes=J,
                                  seed=100 + r, include_yty=include_yty)
            t = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                idata = bayesdp.fit(rel, method=method, seed=r, progress_bar=False, **options)
            acc["secs"].append(time.perf_counter() - t)
            acc["warn"].append(any(w.category.__name__ in ("ConvergenceWarning",
                                                           "CalibrationWarning") for w in caught))
            th = np.asarray(idata.posterior["theta"]).reshape(-1, d)
            lo, hi = _interval(th)
            sd = th.std(0)
            ratio2 = np.minimum((ref["sd"] / sd) ** 2, 0.99)
            acc["cov"] += list((lo <= ref["mean"]) & (ref["mean"] <= hi))
            acc["target"] += list(2 * stats.norm.cdf(1.645 / np.sqrt(1 - ratio2)) - 1)
            acc["z"] += list((th.mean(0) - ref["mean"]) / (sd * np.sqrt(1 - ratio2)))
            acc["width"] += list((hi - lo) / (2 * 1.645 * ref["sd"]))
            acc["err"].append(np.mean((th.mean(0) - ref["mean"]) ** 2))
            acc["share"].append(np.asarray(idata.posterior.attrs.get("prior_share",
                                                                     np.full(d, np.nan))))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                pred = bayesdp.predict(idata, X_test, seed=r)
            acc["pwarn"].append(any(w.category.__name__ == "CalibrationWarning" for w in caught))
            acc["spread"].append(float(pred.predictions.attrs.get("sigma_y_spread", np.nan)))
            pred = np.asarray(pred.predictions["y"]).reshape(-1, len(y_test))
            plo, phi = _interval(pred)
            acc["pcov"].append(np.mean((plo <= y_test) & (y_test <= phi)))
            acc["pwidth"].append(np.mean(phi - plo) / ref["pred_width"])
        rmse, a_rmse = math.sqrt(np.mean(acc["err"])), math.sqrt(np.mean(a_err))
        rows.append({"data": name, "J": J, "eps": eps, "method": m, "releases": releases,
                     "cover": np.mean(acc["cov"]), "target": np.mean(acc["target"]),
                     "worst_k": float(np.min(np.mean(np.reshape(acc["cov"], (-1, d)), axis=0))),
                     "rms_z": math.sqrt(np.mean(np.square(acc["z"]))),
                     "width": np.mean(acc["width"]),
                     "RMSE": rmse, "adaSSP": a_rmse, "ratio": rmse / a_rmse,
                     "pred_cov": np.mean(acc["pcov"]), "pred_w": np.mean(acc["pwidth"]),
                     "nonpriv_pred_cov": ref["pred_cov"], "warned": np.mean(acc["warn"]),
                     "pred_warned": np.mean(acc["pwarn"]),
                     "s_per_fit": float(np.median(acc["secs"])),
                     "fits": [{"release": r, "coefficient": k,
                               "cover": bool(acc["cov"][r * d + k]),
                               "z": float(acc["z"][r * d + k]),
                               "prior_share": float(acc["share"][r][k]),
                               "pred_cov": acc["pcov"][r], "pred_w": acc["pwidth"][r],
                               "pred_warned": acc["pwarn"][r],
                               "sigma_y_spread": acc["spread"][r]}
                              for r in range(releases) for k in range(d)]})
        if verbose:
            print(format_row(rows[-1]), flush=True)
    return rows


COLUMNS = ("data", "J", "eps", "method", "releases", "cover", "worst_k", "target", "rms_z", "width", "RMSE",
           "adaSSP", "ratio", "pred_cov", "pred_w", "nonpriv_pred_cov", "warned", "pred_warned",
           "s_per_fit")


def format_row(row):
    out = []
    for c in COLUMNS:
        v = row[c]
        out.append(f"{v:.3g}" if isinstance(v, float) and c in ("RMSE", "adaSSP", "s_per_fit")
                   else f"{v:.2f}" if isinstance(v, float) else str(v))
    return "| " + " | ".join(out) + " |"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    p.add_argument("--methods", nargs="+", default=["eiv", "fast"])
    p.add_argument("--J", nargs="+", type=int, default=[1, 5, 10])
    p.add_argument("--eps", nargs="+", type=float, default=[1.0, 10.0])
    p.add_argument("--releases", type=int, default=20)
    p.add_argument("--csv", default=None, help="also write the rows to this CSV file")
    p.add_argument("--fits-csv", default=None,
                   help="also write one row per fit and coefficient (whether its interval held "
                        "the reference, its z, the prior's share of its variance; the fit's "
                        "prediction coverage, width, sigma_y's spread, whether predict "
                        "warned) to this CSV file")
    a = p.parse_args(argv)
    print("| " + " | ".join(COLUMNS) + " |")
    print("|" + " --- |" * len(COLUMNS), flush=True)
    rows = []
    for name in a.sets:
        prepared = load(name)
        if prepared is None:
            print(f"{name}: data file not found (../shared/data/uci or $BAYESDP_DATA_DIR), "
                  "skipped", flush=True)
            continue
        for J in a.J:
            for eps in a.eps:
                rows += run_cell(name, J, eps, a.methods, a.releases, prepared, verbose=True)
    if a.csv:
        pd.DataFrame(rows, columns=COLUMNS).to_csv(a.csv, index=False)
    if a.fits_csv:
        pd.DataFrame([{"data": r["data"], "J": r["J"], "eps": r["eps"], "method": r["method"],
                       **f} for r in rows for f in r["fits"]]).to_csv(a.fits_csv, index=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
