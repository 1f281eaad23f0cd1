"""``bayesdp release`` and ``bayesdp combine``: release files from data files (the faces of
:func:`bayesdp.releases.release_file` and :func:`bayesdp.combine_releases`).

    bayesdp release data.csv --epsilon 1 --delta 1e-5 --bounds 10 5 --nodes 5 --out release.json
    bayesdp release data.csv --epsilon 1 --delta 1e-5 --bounds private --out release.json
    bayesdp release table.csv --epsilon 1 --delta 1e-5 --formula "y ~ x + C(region)" \
        --bound x 0 10 --bound y -5 5 --bound region north south --out release.json
    bayesdp release data.csv --epsilon 1 --delta 1e-5 --bounds 10 5 --ledger holder-ledger.json \
        --cap 2 --out second.json
    bayesdp combine a.json b.json --out all.json
"""

from __future__ import annotations

import argparse
import warnings

from ..errors import BayesdpError, BayesdpInputError
from ..releases import Ledger, ReleaseSpec, combine_releases, release_file
from ..releases.ledger import guarding
from .common import (add_command, add_force_option, add_progress_option, bounds_from_truth,
                     print_warnings)


def _cmd_release(args):
    """Each data holder's rows are clipped to the public bounds, X^T X and X^T y are
    accumulated in chunks (constant memory), and Gaussian noise is added once per holder.
    With --formula the file is a table: each row is encoded by the formula, its values clamped
    to the ranges declared with --bound / --bounds-file (docs/tables.md)."""
    if args.bounds_from is not None:
        if args.bounds or args.bounds_from_data or args.formula is not None:
            raise BayesdpInputError("--bounds-from: give the bounds one way (--bounds-from, "
                                    "--bounds, --bounds-from-data or a --formula's --bound)")
        args.bounds = [repr(b) for b in bounds_from_truth(args.bounds_from)]
    if args.formula is not None:
        if args.bounds or args.bounds_from_data:
            raise BayesdpInputError(
                "--bounds: with --formula declare each column's public range or levels with "
                "--bound COLUMN LO HI (or --bound COLUMN LEVEL ...) or --bounds-file FILE; "
                "(B_x, B_y) follow from them")
        bounds = column_bounds(args.formula, args.bound, args.bounds_file)
    elif args.bound or args.bounds_file:
        raise BayesdpInputError("--bound and --bounds-file declare the columns of a --formula; "
                                "without one give --bounds B_X B_Y")
    elif args.bounds_from_data:
        bounds = "data"
    elif args.bounds == ["private"]:
        bounds = "private"
    elif args.bounds:
        bounds = _public_bounds(args.bounds)
    else:
        raise BayesdpError("give public bounds with --bounds B_X B_Y (or --bounds-from a truth "
                           "file of 'bayesdp simulate'), or --bounds private to "
                           "estimate them with DP (or --bounds-from-data, which is NOT private)")
    spec = ReleaseSpec(epsilon=args.epsilon, delta=args.delta, bounds=bounds,
                       calibration=args.calibration, noise=args.noise, intercept=args.intercept,
                       average_rows=args.average_rows, include_yty=args.include_yty,
                       split=args.split, seed=args.seed, holder_name=args.holder,
                       bounds_share=args.bounds_share, bounds_range=args.bounds_range,
                       formula=args.formula)
    if args.cap is not None and args.ledger is None:
        raise BayesdpInputError("--cap: a cap needs a ledger to add up to (--ledger FILE)")
    ledger = None if args.ledger is None else Ledger(args.ledger, cap=args.cap)
    with warnings.catch_warnings(record=True) as caught, guarding(ledger):
        warnings.simplefilter("always")
        rel = release_file(args.data, nodes=args.nodes, y_column=_column(args.y_column),
                           node_column=_column(args.node_column),
                           header=None if args.no_header else "infer",
                           chunksize=args.chunksize, progress=args.progress, spec=spec)
    print_warnings(caught)
    if ledger is not None:  # recorded first: a write that fails after it over-counts, never under
        ledger.record(rel, label=args.out)
    rel.save(args.out, overwrite=args.force)
    print(rel)
    if ledger is not None:
        total = ledger.budget()
        print(f"ledger {args.ledger}: {len(ledger.entries)} releases, total epsilon = "
              f"{total.epsilon:.6g} at delta = {total.delta:g}"
              + ("" if args.cap is None else f" (cap {args.cap:g})"))
    part = rel.bounds_part
    if part is not None:
        print(f"bounds estimated privately: B_x={rel.bounds[0]:.6g}, B_y={rel.bounds[1]:.6g} "
              f"(eps {part['epsilon']:g} of {rel.epsilon:g}; the statistics used the rest)")
    if rel.table is not None:
        print(f"formula {rel.table.formula!r}: {rel.d} features {list(rel.feature_names)}; "
              f"bounds derived from the declared ranges: B_x={rel.bounds[0]:.6g}, "
              f"B_y={rel.bounds[1]:.6g}")
        print("values clamped to their declared ranges (all holders): " + ", ".join(
            f"{c} {int(n)}" for c, n in zip(rel.table.numeric_columns, rel.n_clamped.sum(0))))
    print(f"rows clipped to the bounds per holder: {rel.n_clipped.tolist()}")
    if rel.average_rows > 1:
        print(f"rows per holder: {rel.n_rows.tolist()}, averaged in groups of "
              f"{rel.average_rows}: {rel.n.tolist()} groups (the n of the release); "
              f"sensitivity {rel.sensitivity:.6g}, not the paper's per-row value (see the "
              "release's dp_claim_note)")
    if rel.seeded:
        print("NOTE: --seed makes the noise reproducible, which is right for experiments and "
              "tests but not for a real release: omit --seed to draw fresh OS entropy.")
    print(f"wrote {args.out}")


def _cmd_combine(args):
    """Refuses releases with different d, feature names, bounds or privacy parameters."""
    rel = combine_releases(*args.releases)
    rel.save(args.out, overwrite=args.force)
    print(rel)
    print(f"wrote {args.out}")


def _public_bounds(values):
    """``--bounds B_X B_Y`` as two floats."""
    message = (f"--bounds takes two numbers B_X B_Y or the word 'private', got "
               f"{' '.join(values)!r}")
    if len(values) != 2:
        raise BayesdpInputError(message)
    try:
        return tuple(float(v) for v in values)
    except ValueError:
        raise BayesdpInputError(message) from None


def column_bounds(formula, bound, bounds_file):
    """The declared bounds of a formula's columns from ``--bounds-file`` (JSON: ``{column:
    [lo, hi]}`` or ``{column: {"range": [lo, hi]}}``, ``{column: [levels]}`` or ``{column:
    {"levels": [...]}}``) and the repeated ``--bound COLUMN VALUE ...`` (which override the
    file's entry of their column): two numbers LO HI for a numeric column, the levels for a
    column used as C(column) (whole numbers are read as numbers)."""
    import json
    from pathlib import Path

    from ..releases.formula import categorical_columns_of

    bounds = {}
    if bounds_file is not None:
        path = Path(bounds_file)
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise BayesdpInputError(f"--bounds-file: {str(path)!r} does not exist") from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise BayesdpInputError(f"--bounds-file: {str(path)!r} is not a JSON file "
                                    f"({exc})") from None
        if not isinstance(doc, dict):
            raise BayesdpInputError(f"--bounds-file: {str(path)!r} must hold a JSON object "
                                    "{column: [lo, hi] or {\"levels\": [...]}}")
        bounds.update(doc)
    categorical = categorical_columns_of(formula)
    seen = set()
    for column, *values in bound or []:
        if column in seen:
            raise BayesdpInputError(f"--bound {column}: given twice")
        seen.add(column)
        if not values:
            raise BayesdpInputError(f"--bound {column}: give LO HI, or the levels of C({column})")
        if column in categorical:
            bounds[column] = [int(v) if _whole(v) else v for v in values]
            continue
        try:
            lo, hi = (float(v) for v in values)
        except ValueError:
            raise BayesdpInputError(
                f"--bound {column} {' '.join(values)}: {column} is used as a number in the "
                f"formula: give two numbers LO HI (a categorical column goes in as "
                f"C({column}))") from None
        bounds[column] = (lo, hi)
    return bounds


def _whole(text):
    """True for a whole number written plainly ("3", "-2"; not "03" or "3.0")."""
    try:
        return str(int(text)) == text
    except ValueError:
        return False


def _column(value):
    """A column option: its index when it is a whole number, else its name (or None)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return value


def _add_privacy_args(p):
    p.add_argument("--epsilon", type=float, required=True, help="privacy epsilon (> 0)")
    p.add_argument("--delta", type=float, required=True, help="privacy delta, in (0, 1)")
    p.add_argument("--calibration", default="exact", choices=["exact", "classical", "paper-code"],
                   help="noise calibration; 'paper-code' reproduces the authors' buggy MATLAB "
                        "sigma and is NOT (eps, delta)-DP (default: exact analytic Gaussian)")


def register(subparsers):
    """Add ``release`` and ``combine`` to the ``bayesdp`` sub-commands."""
    p = add_command(subparsers, "release", _cmd_release,
                    "make a DP release file from a CSV or Parquet data file")
    p.add_argument("data", help="CSV or Parquet file, one row per record")
    _add_privacy_args(p)
    p.add_argument("--bounds", nargs="+", metavar="B",
                   help="public bounds B_X B_Y on ||x||_2 and |y| (rows outside are clipped), "
                        "or 'private': estimate them from the rows with DP, spending "
                        "--bounds-share of epsilon (docs/privacy.md section 11)")
    p.add_argument("--bounds-from", default=None, metavar="FILE",
                   help="the public bounds of a truth file written by 'bayesdp simulate' (its "
                        "public_bounds, derived from the generating distribution)")
    p.add_argument("--bounds-share", type=float, default=None, metavar="SHARE",
                   help="with --bounds private: the share of epsilon, in (0, 1), spent on the "
                        "bounds; the statistics get the rest (default: 0.1)")
    p.add_argument("--bounds-range", type=float, nargs=2, default=None, metavar=("LO", "HI"),
                   help="with --bounds private: the public range of candidate bounds, 20 per "
                        "factor of 10 (default: 1e-6 1e9)")
    p.add_argument("--bounds-from-data", action="store_true",
                   help="read the bounds off the data (NOT private; flagged in the release)")
    p.add_argument("--formula", default=None,
                   help="an R-style formula over the table's columns, e.g. 'log(y) ~ x + "
                        "C(region)' (formulaic's syntax; docs/tables.md): the file needs a header "
                        "row; each row is encoded by it, with the columns' bounds declared by "
                        "--bound or --bounds-file (public, fixed without looking at the data)")
    p.add_argument("--bound", nargs="+", action="append", metavar=("COLUMN", "VALUE"),
                   help="with --formula, repeated: the public range 'COLUMN LO HI' of a numeric "
                        "column (values outside are clamped and counted), or the levels "
                        "'COLUMN LEVEL [LEVEL ...]' of a column used as C(COLUMN) (the first is "
                        "the reference; an undeclared level is an error)")
    p.add_argument("--bounds-file", default=None, metavar="FILE",
                   help="with --formula: a JSON file of declared bounds, {\"x\": [0, 10], "
                        "\"region\": {\"levels\": [\"north\", \"south\"]}}; --bound overrides "
                        "its entries")
    p.add_argument("--nodes", type=int, default=1,
                   help="number of data holders J (default 1); rows assigned by --split")
    p.add_argument("--split", default="random", choices=["random", "contiguous"],
                   help="how --nodes J assigns rows: 'random' (default; each row to a random "
                        "holder, independently of its values: add/remove-one private, and the "
                        "counts say nothing about any row) or 'contiguous' (the authors' split "
                        "in row order; NOT private, flagged in the release)")
    p.add_argument("--node-column", default=None,
                   help="column naming each row's holder (instead of --nodes): names or integer "
                        "codes of at most 1000 organisations, published with their row counts; "
                        "a column of measurements or per-row identifiers is refused")
    p.add_argument("--holder", default=None, metavar="NAME",
                   help="name of the single holder (--nodes 1), e.g. hospital_a; 'bayesdp "
                        "combine' keeps it and refuses the same name twice (default: '0', "
                        "renamed '<k>:0' on combine)")
    p.add_argument("--y-column", default=None,
                   help="response column name or index (default: the last column that is not "
                        "the --node-column)")
    p.add_argument("--no-header", action="store_true", help="the CSV has no header row (a first row of numbers is refused "
                        "without this flag, so no data value becomes a column name)")
    p.add_argument("--include-yty", action=argparse.BooleanOptionalAction, default=True,
                   help="also release a noisy y^T y in the same mechanism (default; the default "
                        "fit estimates the noise variance from it, which calibrates prediction "
                        "intervals); --no-include-yty gives the paper's release of S and z only")
    p.add_argument("--intercept", action="store_true",
                   help="release the statistics of [1, x] (appendix B.2): S_hat holds n and "
                        "sum x, z_hat sum y; theta's first coordinate is 'intercept'. Use it "
                        "when the features are not centred (the command warns when a column's "
                        "|mean| exceeds its sd)")
    p.add_argument("--average-rows", type=int, default=1, metavar="K",
                   help="sum each holder's rows in random groups of K and divide by sqrt(K) "
                        "(appendix B.1; closer to normal features); the rows left over are "
                        "dropped, n counts groups, and the sensitivity is max(K Delta, swap "
                        "bound), not the paper's Delta (docs/privacy.md 3b)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed the noise (experiments only; default: fresh OS entropy)")
    p.add_argument("--noise", default="float", choices=["float", "secure"],
                   help="'float' (default): numpy's Gaussian noise, seedable, fine for "
                        "experiments; 'secure': for real releases, the discrete Gaussian on a "
                        "power-of-two grid drawn exactly from the OS CSPRNG (no floating-point "
                        "leak; not seedable; docs/privacy.md section 10)")
    p.add_argument("--chunksize", type=int, default=100_000,
                   help="rows read at a time (memory grows with it; the result does not change)")
    p.add_argument("--out", required=True, help="release file to write (JSON)")
    add_force_option(p)
    p.add_argument("--ledger", default=None, metavar="FILE",
                   help="this data holder's ledger (JSON, made if missing): the release is "
                        "added to it, and refused before any noise is drawn if the total "
                        "would pass --cap (docs/privacy.md, 'A holder's ledger')")
    p.add_argument("--cap", type=float, default=None, metavar="EPS",
                   help="with --ledger: the largest total epsilon of this holder's releases "
                        "(as 'bayesdp budget' adds them up)")
    add_progress_option(p)

    p = add_command(subparsers, "combine", _cmd_combine, "put per-holder release files together")
    p.add_argument("releases", nargs="+", help="release files, one or more holders each")
    p.add_argument("--out", required=True, help="combined release file to write (JSON)")
    add_force_option(p)
