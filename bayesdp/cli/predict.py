"""``bayesdp predict``: posterior predictive of y at new rows (the face of
:func:`bayesdp.predict` and :func:`bayesdp.prediction_summary`).

    bayesdp fit release.json --method fixeds --out posterior.nc
    bayesdp predict posterior.nc new_rows.csv --out predictions.csv
    bayesdp predict posterior.nc new_table.csv --release release.json   # a formula's release
"""

from __future__ import annotations

import sys

from .. import diagnostics
from ..errors import BayesdpInputError
from ..predict import (feature_names, predict, prediction_summary, read_csv, read_new_rows,
                       table_design, table_encoding)
from ..releases import load_release, write_text_atomic
from .common import add_command, check_posterior_argument, print_warnings


def _cmd_predict(args):
    """Reads a posterior written by 'bayesdp fit --out posterior.nc' and a CSV of new rows;
    writes a CSV with the posterior predictive mean, sd and HDI (lower, upper) of y for each
    row. y_new = x^T theta + N(0, sigma_y^2) per posterior draw; method 'fast' fixes sigma_y^2
    at its plug-in (B_y/3)^2 (docs/prediction.md). For a release made from a table with a
    formula (--release, or a posterior that records its encoding), the CSV is a table whose
    rows are encoded by the formula as the release encoded its rows (docs/tables.md)."""
    check_posterior_argument(args.posterior)
    idata = diagnostics.load(args.posterior)
    names = feature_names(idata)
    encoding = None
    if args.release is not None:
        encoding = load_release(args.release)
        if encoding.table is None:
            raise BayesdpInputError(f"--release {args.release}: this release was not made from "
                                    "a table with a formula; leave --release out")
    enc = table_encoding(idata, encoding)
    if enc is not None:
        X, ignored = _table_rows(args.rows, args.no_header, idata, names, enc), []
    else:
        X, ignored = read_new_rows(args.rows, names, header=not args.no_header)
    if ignored:
        print(f"NOTE: ignoring column(s) that are not features: {', '.join(ignored)}",
              file=sys.stderr)
    pred = predict(idata, X, seed=args.seed, hdi_prob=args.hdi_prob)
    table = prediction_summary(pred)
    text = table.to_csv(index=False, float_format="%.10g")
    if args.out is None:
        sys.stdout.write(text)
        return 0
    write_text_atomic(args.out, text)
    print(f"sigma_y^2: {pred.predictions.attrs['sigma_y2_source']}")
    print(f"wrote {args.out} ({len(table)} rows: mean, sd and the {100 * args.hdi_prob:g}% HDI "
          "lower/upper of y, one line per input row)")
    return 0


def _table_rows(path, no_header, idata, names, enc):
    """The design of the table in the CSV ``path``, encoded by ``enc``."""
    import warnings

    if no_header:
        raise BayesdpInputError(f"{path}: --no-header: a formula names the table's columns, so "
                                "the CSV needs a header row")
    frame = read_csv(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        design = table_design(idata, frame, names, enc, what=str(path))
    print_warnings(caught)
    return design[names].to_numpy(dtype=float)


def register(subparsers):
    """Add ``predict`` to the ``bayesdp`` sub-commands."""
    p = add_command(subparsers, "predict", _cmd_predict,
                    "posterior predictive of y at new rows (CSV) from a posterior file")
    p.add_argument("posterior", help="netCDF file written by 'bayesdp fit --out'")
    p.add_argument("rows", help="CSV of new rows: a header with the feature names (other "
                                "columns, e.g. y, are ignored), or --no-header")
    p.add_argument("--no-header", action="store_true",
                   help="the CSV has no header row: its columns are the features in the "
                        "posterior's order")
    p.add_argument("--release", default=None, metavar="RELEASE",
                   help="the release file the posterior was fitted to, when it was made from a "
                        "table with a formula: the CSV's rows are then a table, encoded by its "
                        "formula and declared bounds (not needed when the posterior records "
                        "the encoding)")
    p.add_argument("--hdi-prob", type=float, default=0.9, help="probability of the intervals")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the predictive draws (default: fresh OS entropy)")
    p.add_argument("--out", default=None,
                   help="CSV file to write (columns mean, sd, lower, upper; default: print the "
                        "CSV on stdout)")
    return p
