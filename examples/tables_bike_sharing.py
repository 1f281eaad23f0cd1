"""A real table with categorical columns, released by two holders with a formula, then combined,
fitted and used to predict held-out rows.

    python examples/tables_bike_sharing.py [--epsilon 1] [--formula "..."] [--out-dir DIR]

The data: UCI Bike Sharing, hourly (``bike_sharing.csv``: no header; columns season, yr, mnth,
hr, holiday, weekday, workingday, weathersit, temp, atemp, hum, windspeed, casual, registered,
cnt), read from ``$BAYESDP_DATA_DIR`` or ``../shared/data/uci`` beside the project; it is not
part of bayesdp. The script exits with a message when it is not there.

Two data holders, the 2011 and the 2012 rows (column yr), each release once with the formula

    {log(cnt + 1) - 3.5} ~ {temp - 0.5} + {hum - 0.5} + {windspeed - 0.5} + workingday
                           + C(season) + C(weathersit)

and bounds declared from the data set's documentation, not from the rows: temp, hum and
windspeed are normalised to [0, 1], workingday is 0 or 1, season and weathersit are coded 1-4,
and an hourly count is at most 1000 (a public cap; counts above it would be clamped and
counted). The centres 0.5 and 3.5 are the middles of the declared ranges (log(1000 + 1) = 6.9):
public constants, which halve the bounds and so the noise (docs/tables.md). 10% of the rows,
drawn at random, are held out and never released.

The analyst combines the two release files, fits the default posterior (eiv), prints the
coefficients under the formula's column names and predicts the held-out rows from their raw
columns, with the root mean squared error against the non-private least-squares fit of the
same formula on the same rows and against predicting the mean.
"""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

import bayesdp
from bayesdp import report

COLUMNS = ["season", "yr", "mnth", "hr", "holiday", "weekday", "workingday", "weathersit",
           "temp", "atemp", "hum", "windspeed", "casual", "registered", "cnt"]

FORMULA = ("{log(cnt + 1) - 3.5} ~ {temp - 0.5} + {hum - 0.5} + {windspeed - 0.5} + workingday"
           " + C(season) + C(weathersit)")

#: public bounds, from the data set's documentation (UCI: temp, hum and windspeed normalised
#: to [0, 1]; season 1 spring .. 4 winter; weathersit 1 clear .. 4 heavy rain), not the rows
BOUNDS = {
    "cnt": (0, 1000),
    "temp": (0, 1),
    "hum": (0, 1),
    "windspeed": (0, 1),
    "workingday": (0, 1),
    "hr": list(range(24)),  # for formulas with C(hr)
    "season": [1, 2, 3, 4],
    "weathersit": [1, 2, 3, 4],
}


def data_path():
    """bike_sharing.csv in $BAYESDP_DATA_DIR, else in ../shared/data/uci beside the project."""
    base = os.environ.get("BAYESDP_DATA_DIR")
    folder = Path(base) if base else Path(__file__).resolve().parents[2] / "shared" / "data" / "uci"
    return folder / "bike_sharing.csv"


def run(path, *, epsilon=1.0, delta=1e-5, formula=FORMULA, out_dir=None, seed=None):
    """Release by two holders, combine, fit, predict; returns a dict of the results (the
    combined release, the posterior, the held-out predictions and the errors)."""
    raw = pd.read_csv(path, header=None, names=COLUMNS)
    held_out = np.random.default_rng(2024).random(len(raw)) < 0.1
    train, test = raw[~held_out], raw[held_out]
    out = Path(out_dir) if out_dir else None
    if out:
        out.mkdir(parents=True, exist_ok=True)

    # 1. each holder releases its own rows, once (seed: experiments only)
    files = []
    for k, (name, rows) in enumerate([("bikes_2011", train[train.yr == 0]),
                                       ("bikes_2012", train[train.yr == 1])]):
        rel = bayesdp.release(rows, formula=formula, bounds=BOUNDS, epsilon=epsilon,
                              delta=delta, holder_name=name,
                              seed=None if seed is None else seed + k)
        clamped = dict(zip(rel.table.numeric_columns, rel.n_clamped.sum(axis=0).tolist()))
        print(f"{name}: {rel.n_total} rows, values clamped per column {clamped}")
        files.append(rel.save(out / f"{name}.json", overwrite=True) if out else rel)

    # 2. the analyst: the two release files only
    both = bayesdp.combine_releases(*files)
    print(f"\ncombined: {both}\nfeatures: {list(both.feature_names)}\n"
          f"bounds derived from the declared ranges: B_x = {both.bounds[0]:.4g}, "
          f"B_y = {both.bounds[1]:.4g}, sensitivity {both.sensitivity:.4g}")
    idata = bayesdp.fit(both, seed=0)

    # a reference the analyst could not have: least squares on the same encoded rows
    X = both.table.design(train).to_numpy()
    y = both.table.encode(train)[1]
    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    print("\n" + report.format_table(report.theta_table(idata, estimates={"non-private": ols})))

    # 3. predictions at the held-out rows, encoded from their raw columns as the release did
    pred = bayesdp.predict(idata, test.drop(columns="cnt"), seed=0)  # fit kept the encoding
    summary = bayesdp.prediction_summary(pred)
    truth = both.table.encode(test)[1]
    rmse = {
        "DP posterior": float(np.sqrt(np.mean((summary["mean"].to_numpy() - truth) ** 2))),
        "non-private least squares": float(np.sqrt(np.mean(
            (both.table.design(test).to_numpy() @ ols - truth) ** 2))),
        "mean of y only": float(np.std(truth)),
    }
    inside = float(np.mean((truth >= summary["eti_5%"]) & (truth <= summary["eti_95%"])))
    print(f"\n{len(test)} held-out rows, RMSE of {formula.split('~')[0].strip()}:")
    for k, v in rmse.items():
        print(f"  {k:<26} {v:.3f}")
    print(f"  90% prediction intervals hold {100 * inside:.1f}% of the held-out rows")
    return {"release": both, "idata": idata, "summary": summary, "rmse": rmse,
            "interval_share": inside}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epsilon", type=float, default=1.0, help="privacy epsilon per holder")
    ap.add_argument("--formula", default=FORMULA, help="the formula (columns of the table)")
    ap.add_argument("--out-dir", default="tables-example", help="folder for the release files")
    ap.add_argument("--seed", type=int, default=None,
                    help="seed the release noise (experiments only; default: fresh entropy)")
    args = ap.parse_args(argv)
    path = data_path()
    if not path.exists():
        print(f"{path} not found: put the UCI Bike Sharing CSV (bike_sharing.csv) in "
              "../shared/data/uci beside the project or set BAYESDP_DATA_DIR", file=sys.stderr)
        return 2
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bayesdp.CalibrationWarning)
        run(path, epsilon=args.epsilon, formula=args.formula, out_dir=args.out_dir,
            seed=args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
