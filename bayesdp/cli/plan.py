"""``bayesdp plan``: what a release would give, per coefficient, before any budget is spent (the
face of :func:`bayesdp.plan` and :func:`bayesdp.smallest_epsilon`).

    bayesdp plan pilot.csv --n 100000 --bounds 17 8 --nodes 1 5 10 --epsilon 0.5 1 10 \
        --delta 1e-5 --out-dir plan/
    bayesdp plan pilot.csv --n 100000 --bounds 17 8 --nodes 5 --delta 1e-5 --target-sd 0.05
    bayesdp plan old-release.json --epsilon 1 10 --delta 1e-5
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

from ..errors import BayesdpInputError
from .common import add_command, bounds_from_truth, print_warnings
from .release import _column, _public_bounds, column_bounds

_EXAMPLE = """example:
  bayesdp simulate --n 1000 --d 3 --seed 1 --out pilot.csv     # public pilot rows
  bayesdp plan pilot.csv --n 100000 --bounds-from pilot.truth.json --nodes 1 5 \\
      --epsilon 0.5 1 10 --delta 1e-5 --out-dir plan/
"""


def _cmd_plan(args):
    """The expected posterior sd, prior share, interval half-width and RMSE (against
    adaSSP's) of each coefficient for a release not yet made: simulated releases of holders
    whose rows look like the public pilot's (its second moments and least-squares fit), each
    fitted as 'bayesdp fit' would. DESIGN is a CSV or Parquet file of public pilot rows (last
    column y, or --y-column; --no-y for features only) or an earlier release file (.json) of the
    same holders. The pilot must itself be public: planning reads it and spends no budget.
    With --target-sd or --target-prior-share: the smallest epsilon that reaches the target for
    each --nodes value. --out-dir writes plan.csv and plan.png (sd against epsilon)."""
    import bayesdp
    from .. import report

    design, y, kwargs = _design(args)
    targets = args.target_sd is not None or args.target_prior_share is not None
    common = dict(n=args.n, delta=args.delta, method=args.method, releases=args.releases,
                  calibration=args.calibration, include_yty=args.include_yty, seed=args.seed,
                  **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        if targets:
            answers = [bayesdp.smallest_epsilon(
                design, y, nodes=J, target_sd=args.target_sd,
                target_prior_share=args.target_prior_share, coefficients=args.coefficients,
                max_epsilon=args.max_epsilon, **common) for J in (args.nodes or [None])]
        else:
            table = bayesdp.plan(design, y, nodes=args.nodes, epsilon=args.epsilon, **common)
    print_warnings(caught)
    if targets:
        for a in answers:
            if a.reached:
                print(f"J = {a.nodes}: the smallest epsilon is {a.epsilon:g} (delta = "
                      f"{args.delta:g})")
            else:
                print(f"J = {a.nodes}: no epsilon up to {args.max_epsilon:g} reaches the target: "
                      f"{a.reason}")
        import pandas as pd

        table = pd.concat([a.table for a in answers])
    print(report.format_table(table))
    print("\n".join("assumes: " + s for s in dict.fromkeys(table.attrs["assumes"])))
    print(f"(n = {table.attrs['n']} rows, delta = {args.delta:g}, method {args.method}, "
          f"{args.releases} simulated releases per setting; sd 10%-90%: the range of one "
          "release's sd. Planning spends no budget; the pilot must be public.)")
    if args.out_dir:
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        from ..releases import write_text_atomic

        write_text_atomic(out / "plan.csv", table.to_csv(float_format="%.6g"))
        report.plot_plan(table, out / "plan.png")
        print(f"wrote {out}/: plan.csv, plan.png")
    return 0


def _design(args):
    """(design, y, keyword arguments) of the plan from the command's arguments."""
    import numpy as np

    path = Path(args.design)
    if not path.is_file():
        raise BayesdpInputError(f"DESIGN: {args.design!r} is not a file")
    if path.suffix.lower() == ".json":
        from ..releases import load_release

        for name in ("bounds", "bounds_from", "formula", "bound", "bounds_file"):
            if getattr(args, name):
                raise BayesdpInputError(f"--{name.replace('_', '-')}: a plan from an earlier "
                                        "release keeps its bounds and design; leave it out")
        return load_release(path), None, {}
    if args.formula is not None:
        if args.bounds or args.bounds_from:
            raise BayesdpInputError("--bounds: with --formula declare each column's range or "
                                    "levels with --bound or --bounds-file, as for 'bayesdp "
                                    "release'")
        import pandas as pd

        table = (pd.read_parquet(path) if path.suffix.lower() in (".parquet", ".pq")
                 else pd.read_csv(path))
        return table, None, {"formula": args.formula,
                             "bounds": column_bounds(args.formula, args.bound, args.bounds_file),
                             "intercept": False}
    if args.n is None:
        raise BayesdpInputError("--n: give the number of rows the holders will release")
    bounds = _bounds(args)
    from ..releases.data_files import iter_stacked

    parts, names = [], None
    y_column = None if args.no_y else _column(args.y_column)
    for A, feats, ycol, _, _ in iter_stacked(path, None if args.no_header else "infer", 100_000,
                                             y_column, None):
        parts.append(np.array(A[:, 1:], order="C"))
        names = [str(f) for f in feats] + ([] if args.no_y else [])
    if not parts or sum(len(p) for p in parts) == 0:
        raise BayesdpInputError(f"DESIGN: {args.design!r} has no rows")
    rows = np.concatenate(parts)
    import pandas as pd

    if args.no_y:  # the last column read as y is a feature too
        X = pd.DataFrame(rows, columns=names + [str(ycol)])
        y = None
    else:
        X, y = pd.DataFrame(rows[:, :-1], columns=names), rows[:, -1]
    extra = {"bounds": bounds, "intercept": args.intercept}
    if args.r2 is not None:
        extra["r2"] = args.r2
    if args.y_rms is not None:
        extra["y_rms"] = args.y_rms
    return X, y, extra


def _bounds(args):
    """--bounds B_X B_Y, or --bounds-from a truth file of 'bayesdp simulate' (its public
    bounds)."""
    if args.bounds and args.bounds_from:
        raise BayesdpInputError("--bounds and --bounds-from: give one of them")
    if args.bounds_from:
        return bounds_from_truth(args.bounds_from)
    if not args.bounds:
        raise BayesdpInputError("--bounds: give the public bounds B_X B_Y the release will use "
                                "(or --bounds-from a truth file of 'bayesdp simulate')")
    return _public_bounds(args.bounds)


def register(subparsers):
    p = add_command(subparsers, "plan", _cmd_plan,
                    help="what a release would give per coefficient, before spending budget")
    p.epilog = _EXAMPLE
    p.add_argument("design", help="public pilot rows (CSV or Parquet) or an earlier release "
                                  "file (.json)")
    p.add_argument("--n", type=int, default=None,
                   help="rows the holders will release, over all of them (default with a "
                        "release file: its own)")
    p.add_argument("--bounds", nargs=2, metavar="B", default=None,
                   help="public bounds B_X B_Y the release will use")
    p.add_argument("--bounds-from", default=None, metavar="FILE",
                   help="read the bounds from a truth file written by 'bayesdp simulate'")
    p.add_argument("--formula", default=None, help="the design is a table encoded by this "
                                                   "formula, as in 'bayesdp release'")
    p.add_argument("--bound", nargs="+", action="append", metavar=("COLUMN", "VALUE"),
                   help="with --formula: a column's public range LO HI or its levels")
    p.add_argument("--bounds-file", default=None, metavar="FILE",
                   help="with --formula: the columns' declared bounds (JSON)")
    p.add_argument("--nodes", type=int, nargs="+", default=None, metavar="J",
                   help="numbers of holders to plan for (default 1; a release file: its own)")
    p.add_argument("--epsilon", type=float, nargs="+", default=[0.5, 1.0, 10.0],
                   metavar="EPS", help="epsilons to plan for (per holder)")
    p.add_argument("--delta", type=float, required=True, help="privacy delta, in (0, 1)")
    p.add_argument("--calibration", default="exact", choices=["exact", "classical", "paper-code"],
                   help="noise calibration of the release")
    p.add_argument("--include-yty", action=argparse.BooleanOptionalAction,
                   default=True, help="the release includes a noisy y^T y (as 'bayesdp release')")
    p.add_argument("--intercept", action="store_true", help="the release will have an intercept")
    p.add_argument("--method", default="eiv", choices=["eiv", "fast"],
                   help="the method the release will be fitted with")
    p.add_argument("--y-column", default=None, help="the pilot's response column (default: the "
                                                    "last)")
    p.add_argument("--no-y", action="store_true",
                   help="the pilot has features only: assume --r2 values and --y-rms")
    p.add_argument("--r2", type=float, nargs="+", default=None, metavar="R2",
                   help="with --no-y: the R^2 values to assume (default 0.2 0.5 0.8)")
    p.add_argument("--y-rms", type=float, default=None,
                   help="with --no-y: y's root mean square (default B_Y / 2)")
    p.add_argument("--no-header", action="store_true", help="the pilot CSV has no header row")
    p.add_argument("--target-sd", type=float, default=None, metavar="SD",
                   help="find the smallest epsilon at which every coefficient's planned sd is "
                        "at most SD")
    p.add_argument("--target-prior-share", type=float, default=None, metavar="SHARE",
                   help="find the smallest epsilon at which every coefficient's planned prior "
                        "share is at most SHARE")
    p.add_argument("--coefficients", nargs="+", default=None, metavar="NAME",
                   help="with a target: the coefficients that must reach it (default: all)")
    p.add_argument("--max-epsilon", type=float, default=100.0,
                   help="with a target: the largest epsilon to consider")
    p.add_argument("--releases", type=int, default=40,
                   help="simulated releases per setting")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulated releases")
    p.add_argument("--out-dir", default=None, help="folder for plan.csv and plan.png")
    return p
