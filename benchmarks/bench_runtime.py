"""Figure 3 of the paper: run time per MCMC iteration against d, with log-log slopes.

    python3 benchmarks/bench_runtime.py --d 1 2 3 5 8 12 16 20 --iters 500 --out-dir runs/fig3

Setting as in the paper: n = 1e4 simulated rows, eps = 1, one data holder (``--nodes`` to change).
Each method is run at K and 3K iterations (each after an untimed warm-up call with the same
shapes, so compilation is excluded); the time per iteration is (T(3K) - T(K)) / 2K, which also
cancels fixed per-call overhead. The whole-call time per iteration is reported as well. Methods: B&S always; MCMC-fixedS and
MCMC-normalX when ``bayesdp.inference.mcmc`` registers them. Prints a table, the slope of
log(time) on log(d) over d >= --slope-from, and the ratio B&S / fixedS at the largest d.
Timings are of this machine under its current load; only ratios and slopes mean anything.
"""

import argparse
import importlib
import time
import warnings
from pathlib import Path

import numpy as np


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", nargs="+", type=int, default=[1, 2, 3, 5, 8, 12, 16, 20])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--iters", type=int, default=500)
    ap.add_argument("--methods", nargs="+", default=["normalx", "fixeds", "bs"])
    ap.add_argument("--slope-from", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3, help="timed calls per setting (minimum kept)")
    ap.add_argument("--slope-of", default="whole_call_per_iteration",
                    choices=["whole_call_per_iteration", "seconds_per_iteration"])
    ap.add_argument("--out-dir", default="runs/fig3")
    args = ap.parse_args()
    from bayesdp._jax import enable_x64

    enable_x64()
    try:
        importlib.import_module("bayesdp.inference.mcmc")
    except ImportError:
        pass
    import bayesdp

    methods = [m for m in args.methods if m in bayesdp.METHODS]
    rows = []
    for d in args.d:
        sim = bayesdp.simulate(n=args.n, d=d, seed=d)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1.0 / args.n, bounds="data",
                                  nodes=args.nodes, seed=d, include_yty=True)
        pri = bayesdp.Priors(Lambda=sim.Lambda)
        for m in methods:
            times = {}
            for k in (args.iters, 3 * args.iters):
                kw = dict(method=m, priors=pri, num_samples=k // 2, num_warmup=k - k // 2,
                          num_chains=1, progress_bar=False)
                bayesdp.fit(rel, seed=0, **kw)  # compile / warm caches
                best = float("inf")
                for r in range(args.repeats):  # minimum over repeats: robust to a loaded machine
                    t0 = time.perf_counter()
                    bayesdp.fit(rel, seed=1 + r, **kw)
                    best = min(best, time.perf_counter() - t0)
                times[k] = best
            # the difference of two run lengths cancels per-call overhead (set-up, conversion)
            per = (times[3 * args.iters] - times[args.iters]) / (2 * args.iters)
            whole = times[3 * args.iters] / (3 * args.iters)
            rows.append((m, d, per, whole))
            print(f"{m:8s} d={d:2d}  {per * 1e3:9.4f} ms/iteration (marginal), "
                  f"{whole * 1e3:9.4f} ms/iteration (whole call)", flush=True)
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    import pandas as pd

    df = pd.DataFrame(rows, columns=["method", "d", "seconds_per_iteration", "whole_call_per_iteration"])
    df.to_csv(out / "runtime.csv", index=False)
    lines = [f"| method | slope of log({args.slope_of}) on log d (d >= {args.slope_from}) |",
             "| --- | --- |"]
    for m in methods:
        g = df[(df.method == m) & (df.d >= args.slope_from)]
        if len(g) >= 2:
            y = g[args.slope_of].to_numpy()
            if np.any(y <= 0):
                lines.append(f"| {m} | n/a (non-positive times: overhead/noise dominate) |")
                continue
            slope = np.polyfit(np.log(g.d), np.log(y), 1)[0]
            lines.append(f"| {m} | {slope:.2f} |")
    dmax = df.d.max()
    at = df[df.d == dmax].set_index("method")[args.slope_of]
    at = at[at > 0]
    if "bs" in at and "fixeds" in at:
        lines.append(f"\nB&S / fixedS time per iteration at d = {dmax}: {at['bs'] / at['fixeds']:.1f}x")
    if "bs" in at and "normalx" in at:
        lines.append(f"B&S / normalX time per iteration at d = {dmax}: {at['bs'] / at['normalx']:.1f}x")
    text = "\n".join(lines)
    (out / "slopes.md").write_text(text + "\n")
    print(text)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 3.8))
    for m in methods:
        g = df[df.method == m]
        ax.plot(g.d, g[args.slope_of], marker="o", label=m)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("d")
    ax.set_ylabel("seconds per iteration")
    ax.set_title(f"n = {args.n}, J = {args.nodes}, eps = 1")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "fig3_runtime.png", dpi=120)


if __name__ == "__main__":
    main()
