"""``bayesdp predict``: posterior predictive of y at new rows (the face of
:func:`bayesdp.predict` and :func:`bayesdp.prediction_summary`).

    bayesdp fit release.json --method fixeds --out posterior.nc
    bayesdp predict posterior.nc new_rows.csv --out predictions.csv
    bayesdp predict posterior.nc new_table.csv --release release.json   # a formula's release
"""

from __future__ import annotations

import os
import sys

from .. import diagnostics
from ..errors import BayesdpInputError
from ..predict import (_noise_variance, check_new_rows, feature_names, new_row_frame, read_csv,
                       summarise_rows, table_encoding, warn_sigma_y)
from ..releases import load_release
from ..releases.files import write_atomic
from .common import (add_command, add_interval_options, check_posterior_argument,
                     print_warnings)

#: rows read, summarised and written at a time (memory is independent of the file's length)
CHUNK_ROWS = 50_000


def _cmd_predict(args):
    """Reads a posterior written by 'bayesdp fit --out posterior.nc' and a CSV of new rows;
    writes a CSV with the posterior predictive mean, sd and 90% equal-tailed interval (eti_5%,
    eti_95%; --interval hdi for the HDI) of y for each row, reading and writing the rows in
    chunks (memory independent of their number). y_new = x^T theta + N(0, sigma_y^2) per
    posterior draw; method 'fast' fixes sigma_y^2 at its plug-in (B_y/3)^2
    (docs/prediction.md). For a release made from a table with a formula (--release, or a
    posterior that records its encoding), the CSV is a table whose rows are encoded by the
    formula as the release encoded its rows (docs/tables.md)."""
    import warnings

    import numpy as np

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
    if enc is not None and args.no_header:
        raise BayesdpInputError(f"{args.rows}: --no-header: a formula names the table's "
                                "columns, so the CSV needs a header row")
    diagnostics.check_interval(args.prob, args.interval)
    s2, source = _noise_variance(idata)
    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % 2**63)
    state = {"rows": 0, "clamped": {}, "ignored": None}

    def chunks():
        """The summary of each chunk of rows, as CSV text (the first with the header)."""
        for k, frame in enumerate(read_csv(args.rows, header=not args.no_header,
                                            chunksize=CHUNK_ROWS)):
            X = _design(frame, names, enc, args.rows, not args.no_header, state)
            table = summarise_rows(idata, X, prob=args.prob, interval=args.interval,
                                   seed=[seed, k])
            state["rows"] += len(table)
            yield table.to_csv(index=False, header=k == 0, float_format="%.10g")
        if state["rows"] == 0:
            raise BayesdpInputError(f"{args.rows}: the file has a header and no rows"
                                    if not args.no_header else f"{args.rows}: no rows")

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_sigma_y(idata, s2)
        if args.out is None:
            for text in chunks():
                sys.stdout.write(text)
        else:
            def write(fd, tmp):
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    for text in chunks():
                        fh.write(text)
                    fh.flush()
                    os.fsync(fh.fileno())

            write_atomic(args.out, write)
    if state["clamped"]:
        listing = ", ".join(f"{c} ({n})" for c, n in state["clamped"].items())
        print(f"NOTE: value(s) outside their declared ranges were clamped to them, as the "
              f"release clamped its rows: {listing}; predictions there are those at the "
              "range's end", file=sys.stderr)
    if state["ignored"]:
        print(f"NOTE: ignoring column(s) that are not features: {', '.join(state['ignored'])}",
              file=sys.stderr)
    print_warnings(caught)  # once each, not once per chunk
    if args.out is not None:
        lo, hi = diagnostics.interval_columns(args.prob, args.interval)
        print(f"sigma_y^2: {source}")
        print(f"wrote {args.out} ({state['rows']} rows: mean, sd, {lo}, {hi} of y, one line "
              "per input row)")
    return 0


def _design(frame, names, enc, path, header, state):
    """The float design (rows, d) of one chunk: the feature columns (:func:`new_row_frame`),
    or the table encoded by ``enc`` (clamped values counted in ``state``)."""
    if enc is None:
        frame, ignored = new_row_frame(frame, names, path, header=header)
        if state["ignored"] is None:
            state["ignored"] = ignored
        return check_new_rows(frame.to_numpy(), names, what=f"{path}")[0]
    design = enc.design(frame)
    for c, n in design.attrs.get("n_clamped", {}).items():
        if n:
            state["clamped"][c] = state["clamped"].get(c, 0) + int(n)
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
    add_interval_options(p)
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the predictive draws of --interval hdi (default: fresh OS "
                        "entropy; the equal-tailed interval draws none)")
    p.add_argument("--out", default=None,
                   help="CSV file to write (columns mean, sd, eti_5%%, eti_95%%; default: print "
                        "the CSV on stdout)")
    return p
