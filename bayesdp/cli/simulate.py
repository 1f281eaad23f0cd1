"""``bayesdp demo`` and ``bayesdp simulate``: the paper's simulated data (the faces of
:func:`bayesdp.demo.run_demo` and :func:`bayesdp.simulate`).

    bayesdp demo --out-dir bayesdp-demo
    bayesdp simulate --n 100000 --d 5 --out data.csv
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..releases import write_text_atomic
from ..simulate import simulate
from .common import add_command

# pandas, and bayesdp.demo (pandas, scipy.stats), are imported inside the commands (pandas
# after simulate's checks): --help and bad arguments load neither


def _cmd_demo(args):
    """The main job on the paper's simulation: n rows split over J holders, each releases noisy
    X^T X and X^T y; fit with the default method (eiv), beside Bayes-fixedS-fast, adaSSP and the
    non-private posterior; table and plot."""
    from ..demo import run_demo

    run_demo(n=args.n, d=args.d, nodes=args.nodes, epsilon=args.epsilon, delta=args.delta,
             seed=args.seed, out_dir=args.out_dir)


def _cmd_simulate(args):
    """Sigma_x ~ InvWishart(V^T V, d+1), theta ~ N(0, I), x ~ N(0, Sigma_x), y = x^T theta +
    N(0, sigma_y^2). Writes a CSV (columns x0.., y) and a truth JSON beside it. With --table: a
    synthetic table with the UCI Bike Sharing table's columns (numeric and categorical; the
    table of docs/tables.md), --n rows, no truth file."""
    if args.table:
        from ..simulate import simulate_table

        frame = simulate_table(args.n, seed=args.seed)
        write_text_atomic(args.out, frame.to_csv(index=False, float_format="%.6g"))
        print(f"wrote {args.out} ({args.n} rows, columns {', '.join(frame.columns)}; a "
              "synthetic table for docs/tables.md)")
        return
    sim = simulate(args.n, args.d, seed=args.seed, sigma_y=args.sigma_y)
    import pandas as pd

    frame = pd.DataFrame(sim.X, columns=list(sim.feature_names))
    frame["y"] = sim.y
    write_text_atomic(args.out, frame.to_csv(index=False, float_format="%.17g"))
    truth = {"theta": sim.theta.tolist(), "Sigma_x": sim.Sigma_x.tolist(),
             "sigma_y": sim.sigma_y, "public_bounds": list(sim.bounds), "seed": args.seed}
    truth_path = Path(args.truth or Path(args.out).with_suffix(".truth.json"))
    write_text_atomic(truth_path, json.dumps(truth, indent=1) + "\n")
    print(f"wrote {args.out} ({args.n} rows, columns {', '.join(frame.columns)})")
    print(f"wrote {truth_path} (true theta and the public bounds B_x={sim.bounds[0]:.6g}, "
          f"B_y={sim.bounds[1]:.6g} derived from the generating distribution)")
    print("true theta:", np.array2string(sim.theta, precision=4))


def _add_size(p):
    """``--n`` rows and ``--d`` features of the simulated data set."""
    p.add_argument("--n", type=int, default=100_000, help="rows of the simulated data set")
    p.add_argument("--d", type=int, default=5, help="features of the simulated data set")


def register(subparsers):
    """Add ``demo`` and ``simulate`` to the ``bayesdp`` sub-commands."""
    p = add_command(subparsers, "demo", _cmd_demo,
                    "simulate, release with DP, fit, print a table, plot")
    _add_size(p)
    p.add_argument("--nodes", type=int, default=5, help="data holders J (default 5)")
    p.add_argument("--epsilon", type=float, default=1.0, help="privacy epsilon (default 1)")
    p.add_argument("--delta", type=float, default=1e-5, help="privacy delta (default 1e-5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the whole demo (default 0)")
    p.add_argument("--out-dir", default="bayesdp-demo",
                   help="folder for release.json and theta.png (created if missing)")

    p = add_command(subparsers, "simulate", _cmd_simulate,
                    "write the paper's simulated data set as CSV")
    _add_size(p)
    p.add_argument("--sigma-y", type=float, default=1.0, help="sd of the regression noise on y")
    p.add_argument("--seed", type=int, default=None, help="seed (default: fresh entropy)")
    p.add_argument("--out", required=True, help="CSV file to write")
    p.add_argument("--truth", default=None, help="truth JSON (default: OUT with .truth.json)")
    p.add_argument("--table", action="store_true",
                   help="write a synthetic table with categorical columns instead (the columns "
                        "of the UCI Bike Sharing table, for docs/tables.md)")
