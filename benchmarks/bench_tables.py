"""A wide table end to end: release with a formula, fit, predict and select, each against the
release of the same table measured in the same process.

The table: n rows (``--n``, default 1e6) of two numeric columns and three categorical ones of
20, 30 and 40 levels; the formula ``y ~ x1 + x2 + C(a) + C(b) + C(c)`` expands it to d = 90
columns (the intercept, two slopes, 19 + 29 + 39 dummies), released at eps = 1 over J holders
(``--J``, default 10). Stages, after a small warm-up of each on a small table (imports and
compilation not counted):

    release   bayesdp.release(table, formula=..., bounds=..., nodes=J)
    fit       bayesdp.fit(release)                     (the default method, eiv)
    fast      bayesdp.fit(release, method="fast")
    predict   bayesdp.predict(idata, new)              (``--predict-rows`` new rows, default 1e5)
    select    bayesdp.select(release)                  (inclusion probabilities of d = 90)

Prints seconds and the ratio to the release. Timing claims belong here, never in tests.

    python benchmarks/bench_tables.py
    python benchmarks/bench_tables.py --n 200000 --J 5 --predict-rows 20000 --no-select
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd

import bayesdp

LEVELS = {"a": 20, "b": 30, "c": 40}
FORMULA = "y ~ x1 + x2 + C(a) + C(b) + C(c)"


def table(n, seed, response=True):
    """n rows: y = 1 + 0.5 x1 - 0.3 x2 + effects of a, b, c + N(0, 1), clipped to the bounds."""
    rng = np.random.default_rng(seed)
    out = pd.DataFrame({"x1": rng.uniform(-1, 1, n), "x2": rng.uniform(-1, 1, n)})
    y = 1 + 0.5 * out.x1 - 0.3 * out.x2
    for name, k in LEVELS.items():
        codes = rng.integers(0, k, n)
        effect = np.random.default_rng(k).normal(0, 0.5, k)
        out[name] = pd.Categorical.from_codes(codes, [f"{name}{i}" for i in range(k)])
        y = y + effect[codes]
    if response:
        out["y"] = np.clip(y + rng.standard_normal(n), -6.0, 6.0)
    return out


BOUNDS = {"y": (-6.0, 6.0), "x1": (-1.0, 1.0), "x2": (-1.0, 1.0),
          **{name: [f"{name}{i}" for i in range(k)] for name, k in LEVELS.items()}}


def stages(rows, J, predict_rows, seed=0, report=lambda stage, seconds: None, select=True):
    """Seconds of each stage on a table of ``rows`` rows (each passed to ``report`` when it
    ends) and the selection."""
    data = table(rows, seed)
    new = table(predict_rows, seed + 1, response=False)
    out = {}

    def timed(stage, call):
        t = time.perf_counter()
        value = call()
        out[stage] = time.perf_counter() - t
        report(stage, out[stage])
        return value

    rel = timed("release", lambda: bayesdp.release(data, formula=FORMULA, bounds=BOUNDS,
                                                   epsilon=1.0, delta=1e-5, nodes=J, seed=seed))
    idata = timed("fit", lambda: bayesdp.fit(rel, seed=0))
    timed("fast", lambda: bayesdp.fit(rel, method="fast", seed=0))
    timed("predict", lambda: bayesdp.predict(idata, new, seed=0))
    sel = timed("select", lambda: bayesdp.select(rel, seed=0)) if select else None
    return rel.d, out, sel


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=1_000_000)
    p.add_argument("--J", type=int, default=10)
    p.add_argument("--predict-rows", type=int, default=100_000)
    p.add_argument("--no-select", action="store_true", help="leave out the select stage")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    stages(5000, 2, 100, seed=7)  # warm-up: imports, compilation
    print(f"n = {args.n:,} rows, J = {args.J}; predict on {args.predict_rows:,} rows",
          flush=True)
    first = {}

    def report(stage, seconds):
        first.setdefault("release", seconds)
        print(f"{stage:8s} {seconds:8.3f} s  x {seconds / first['release']:6.2f} release",
              flush=True)

    d, out, sel = stages(args.n, args.J, args.predict_rows, report=report,
                         select=not args.no_select)
    print(f"d = {d} columns" + ("" if sel is None else f"; select: {sel.method}"))


if __name__ == "__main__":
    main()
