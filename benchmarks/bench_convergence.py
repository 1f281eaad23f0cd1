"""Do default fits converge? max r_hat and min ESS of every sampled parameter, per method and cell.

For each cell of the grid the paper's simulation (n rows, d features, J holders, eps) is released
(delta = 1e-5, the generating distribution's public bounds) and fitted with ``bayesdp.fit`` and
every default (4 chains, 1000 warm-up + 1000 kept iterations, default priors); the UCI data sets
(``--uci``, read from ../shared/data/uci when present) are released with their data-read bounds
at delta = 1/N_train. Printed per method and cell:

    max r_hat / min ess_bulk over theta, sigma_y2, Sigma_x (and mu with --intercept; the
    issue's target: <= 1.01 and >= 400), the worst parameter, min ess_bulk over S, the number
    of divergent NUTS transitions (0 for the hand-written kernels), the S_hat check's z of
    largest size (methods that sample S; docs/methods.md), the wall
    time of the whole ``fit`` call (compilation included) and min ESS per second of that call;

and, per cell, the ratio of each method's ESS/s to the baseline's measured in the same run (the
paper's kernels as published: "normalx-paper" for normalX methods, "fixeds-paper" for fixedS).

    python benchmarks/bench_convergence.py                          # d 2 5 10 20, J 1 5 10, eps 1
    python benchmarks/bench_convergence.py --d 5 --J 10 --eps 0.1 1 10
    python benchmarks/bench_convergence.py --uci --J 1 5 10 --no-sim
    python benchmarks/bench_convergence.py --csv out.csv           # also write the rows
    python benchmarks/bench_convergence.py --intercept --methods normalx nuts-normalx fixeds

The machine is shared with whatever else runs: run it alone for clean timings.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

BASELINE = {"normalx": "normalx-paper", "fixeds": "fixeds-paper"}


def convergence_row(idata):
    """(max r_hat, worst name, min ess_bulk, worst name, min ess_bulk over S) of a fit."""
    from bayesdp import diagnostics

    names = [v for v in ("theta", "sigma_y2", "Sigma_x", "mu") if v in idata.posterior]
    s = diagnostics.summary_unrounded(idata, var_names=names)
    s = s[np.isfinite(s["r_hat"])]  # constant entries (d = 1 has none; zero off-diagonals)
    out = [float(s["r_hat"].max()), str(s["r_hat"].idxmax()), float(s["ess_bulk"].min()),
           str(s["ess_bulk"].idxmin())]
    if "S" in idata.posterior:
        sS = diagnostics.summary_unrounded(idata, var_names=["S"])
        out.append(float(sS["ess_bulk"].min()))
    else:
        out.append(float("nan"))
    return out


def run_cell(label, rel, methods, seed):
    import bayesdp.paper  # registers the paper's methods (and binds bayesdp)

    rows = []
    for m in methods:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            try:
                idata = bayesdp.fit(rel, method=m, seed=seed, progress_bar=False)
            except bayesdp.BayesdpInputError as err:  # e.g. the paper's algorithms and intercepts
                print(f"{label:28s} {m:14s} skipped: {err}", flush=True)
                continue
            dt = time.perf_counter() - t0
        r, rn, e, en, eS = convergence_row(idata)
        div = int(idata.posterior.attrs.get("divergences", 0))  # NUTS only
        # the S_hat check (methods that sample S): the z of largest size, signed
        z = np.asarray(idata.posterior.attrs.get("s_hat_check_z", [np.nan]), dtype=float)
        rows.append(dict(cell=label, method=m, max_r_hat=r, worst_r_hat=rn, min_ess=e,
                         worst_ess=en, min_ess_S=eS, divergences=div,
                         s_hat_z=float(z[np.argmax(np.abs(z))]) if np.isfinite(z).all()
                         else float("nan"), seconds=dt, ess_per_s=e / dt))
    by = {row["method"]: row for row in rows}
    for row in rows:
        base = by.get(BASELINE.get(row["method"], ""))
        row["vs_baseline"] = row["ess_per_s"] / base["ess_per_s"] if base else float("nan")
        ok = row["max_r_hat"] <= 1.01 and row["min_ess"] >= 400
        print(f"{label:28s} {row['method']:14s} {'ok  ' if ok else 'FAIL'} "
              f"r_hat {row['max_r_hat']:6.3f} ({row['worst_r_hat']:>18s})  "
              f"ess {row['min_ess']:6.0f} ({row['worst_ess']:>18s})  S ess {row['min_ess_S']:6.0f}  "
              f"div {row['divergences']:4d}  S_hat z {row['s_hat_z']:5.1f}  "
              f"{row['seconds']:6.1f} s  ESS/s {row['ess_per_s']:7.1f}"
              + (f"  x{row['vs_baseline']:.1f} vs {BASELINE[row['method']]}"
                 if np.isfinite(row["vs_baseline"]) else ""), flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d", type=int, nargs="+", default=[2, 5, 10, 20])
    ap.add_argument("--J", type=int, nargs="+", default=[1, 5, 10])
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--methods", nargs="+",
                    default=["fixeds", "fixeds-paper", "normalx", "normalx-paper"])
    ap.add_argument("--uci", action="store_true", help="also the three UCI data sets")
    ap.add_argument("--no-sim", action="store_true", help="skip the simulated grid")
    ap.add_argument("--intercept", action="store_true",
                    help="simulated cells with uncentred features (x_mean 3, intercept 1), "
                         "released with intercept=True (appendix B.2's model)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--csv", help="write the rows to this CSV file")
    a = ap.parse_args(argv)

    import bayesdp.paper  # registers the paper's methods (and binds bayesdp)

    rows = []
    if not a.no_sim:
        for eps in a.eps:
            for d in a.d:
                for J in a.J:
                    shift = dict(x_mean=3.0, intercept=1.0) if a.intercept else {}
                    sim = bayesdp.simulate(n=a.n, d=d, seed=d * 100 + J, **shift)
                    rel = bayesdp.release(sim.X, sim.y, epsilon=eps, delta=1e-5,
                                          bounds=sim.bounds, nodes=J, seed=a.seed + 6,
                                          intercept=a.intercept)
                    label = f"sim{'+icpt' if a.intercept else ''} d={d} J={J} eps={eps:g}"
                    rows += run_cell(label, rel, a.methods, a.seed)
    if a.uci:
        from pathlib import Path

        from bayesdp.paper.datasets import dataset_names, load_dataset

        uci = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "uci"
        if not uci.is_dir():
            print(f"UCI data not found ({uci}): skipped")
        else:
            for name in dataset_names():
                try:
                    ds = load_dataset(name, data_dir=uci)
                except bayesdp.BayesdpInputError as e:  # a data set the folder does not hold
                    print(f"{name}: skipped ({e})")
                    continue
                for eps in a.eps:
                    for J in a.J:
                        with warnings.catch_warnings():
                            warnings.simplefilter("ignore")  # data-read bounds: flagged
                            rel = bayesdp.release(ds.X_train, ds.y_train, epsilon=eps,
                                                  delta=ds.delta, bounds=ds.bounds, nodes=J,
                                                  seed=a.seed + 6)
                        rows += run_cell(f"{name} J={J} eps={eps:g}", rel, a.methods, a.seed)
    if a.csv:
        import pandas as pd

        pd.DataFrame(rows).to_csv(a.csv, index=False)
    bad = [r for r in rows if not (r["max_r_hat"] <= 1.01 and r["min_ess"] >= 400)]
    print(f"{len(rows) - len(bad)} of {len(rows)} fits met r_hat <= 1.01 and ESS >= 400; "
          f"{sum(r['divergences'] > 0 for r in rows)} had divergent transitions")


if __name__ == "__main__":
    main()
