"""``bayesdp predict``: posterior predictive of y at new rows (the face of
:func:`bayesdp.predict` and :func:`bayesdp.prediction_summary`).

    bayesdp fit release.json --method fixeds --out posterior.nc
    bayesdp predict posterior.nc new_rows.csv --out predictions.csv
"""

from __future__ import annotations

import sys

from .errors import BayesdpInputError


def read_new_rows(path, names, *, header=True):
    """The feature columns of a CSV of new rows as a DataFrame in the posterior's order, and the
    names of the columns that were ignored (with a header: columns that are not features)."""
    import pandas as pd

    from .releases.rows import looks_numeric

    try:
        if header:
            frame = pd.read_csv(path)
            if any(looks_numeric(c) for c in frame.columns):
                raise BayesdpInputError(
                    f"{path}: the first row holds numbers ({', '.join(map(str, frame.columns))}),"
                    " so it looks like data, not a header with the feature names; for a file "
                    "without header pass --no-header")
        else:
            frame = pd.read_csv(path, header=None)
    except pd.errors.EmptyDataError:
        raise BayesdpInputError(f"{path}: the file is empty") from None
    except pd.errors.ParserError as exc:
        raise BayesdpInputError(f"{path}: malformed CSV ({exc})") from None
    except UnicodeDecodeError:
        raise BayesdpInputError(f"{path}: not a UTF-8 text (CSV) file") from None
    if not header:
        if frame.shape[1] != len(names):
            raise BayesdpInputError(
                f"{path}: {frame.shape[1]} columns, but the posterior has {len(names)} features "
                f"({', '.join(names)}); without a header the columns must be exactly these "
                "features, in this order")
        return _checked(frame, names, path), []
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
    frame = frame.reset_index(drop=True)
    return _checked(frame[names], names, path), [c for c in cols if c not in names]


def _checked(frame, names, path):
    """The rows as a float array, NaN and infinite values refused naming the file."""
    from .predict import check_new_rows

    return check_new_rows(frame.to_numpy(), names, what=f"{path} (data rows from 0)")[0]


def _cmd_predict(args):
    from . import diagnostics
    from .predict import feature_names, predict, prediction_summary
    from .releases import write_text_atomic

    idata = diagnostics.load(args.posterior)
    names = feature_names(idata)
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


def register(subparsers):
    """Add ``predict`` to the ``bayesdp`` sub-commands."""
    p = subparsers.add_parser(
        "predict", help="posterior predictive of y at new rows (CSV) from a posterior file",
        description="Reads a posterior written by 'bayesdp fit --out posterior.nc' and a CSV of "
                    "new rows; writes a CSV with the posterior predictive mean, sd and HDI "
                    "(lower, upper) of y for each row. y_new = x^T theta + N(0, sigma_y^2) per "
                    "posterior draw; method 'fast' fixes sigma_y^2 at its plug-in (B_y/3)^2 "
                    "(docs/prediction.md).")
    p.add_argument("posterior", help="netCDF file written by 'bayesdp fit --out'")
    p.add_argument("rows", help="CSV of new rows: a header with the feature names (other "
                                "columns, e.g. y, are ignored), or --no-header")
    p.add_argument("--no-header", action="store_true",
                   help="the CSV has no header row: its columns are the features in the "
                        "posterior's order")
    p.add_argument("--hdi-prob", type=float, default=0.9, help="probability of the intervals")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the predictive draws (default: fresh OS entropy)")
    p.add_argument("--out", default=None,
                   help="CSV file to write (columns mean, sd, lower, upper; default: print the "
                        "CSV on stdout)")
    p.set_defaults(func=_cmd_predict)
    return p
