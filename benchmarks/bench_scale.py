"""Time and peak memory of a release and of each fit method against the size of the work.

For each d and J: simulate n rows (``--n``, default 10,000 d rows, at most 1e6), release them
at eps = 1 over J holders, and fit the release with each method (``--methods``), each stage in
a fresh process of its own (after a small warm-up fit, so imports and compilation are not
counted) whose peak resident memory is its own (a fit's from the release on: the rows are
freed and the peak restarted, Linux's /proc/self/clear_refs, before it). Floors measured in
the same run:

    gram       X^T X of the same n x d rows (numpy's matmul rate: what the release costs)
    cholesky   a batched Cholesky of J d x d matrices (the least any per-holder analysis costs)

and prints seconds, peak RSS and the ratios fit / release and fit / cholesky, then the exponent
b of time ~ d^b fitted over d at each J (least squares in log-log). ``--plot FILE`` draws time
against d on log-log axes. A method that refuses a size says so (its message) in place of a time.
Timing claims belong here, never in tests; run it alone for clean numbers.

    python benchmarks/bench_scale.py                                  # d 5 20 50 100, J 1 10 100
    python benchmarks/bench_scale.py --d 100 --J 100 --methods eiv fast
    python benchmarks/bench_scale.py --d 5 20 50 100 200 --J 1 10 100 1000 --plot scale.png
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

STAGE = r"""
import gc, json, sys, time, warnings
import numpy as np
import bayesdp
d, J, n, stage = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
warnings.simplefilter("ignore")
sim = bayesdp.simulate(n=n, d=d, seed=1)
out = {}
if stage == "gram":
    X = np.ascontiguousarray(sim.X)
    X.T @ X
    t = time.perf_counter(); X.T @ X; out["seconds"] = time.perf_counter() - t
elif stage == "cholesky":
    A = np.random.default_rng(0).normal(size=(J, d, d))
    P = A @ np.swapaxes(A, 1, 2) + d * np.eye(d)
    np.linalg.cholesky(P)
    t = time.perf_counter(); np.linalg.cholesky(P); out["seconds"] = time.perf_counter() - t
else:
    kw = dict(epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=J, seed=0)
    small = bayesdp.simulate(n=2000, d=3, seed=2)
    warm = bayesdp.release(small.X, small.y, epsilon=1.0, delta=1e-5, bounds=small.bounds,
                           nodes=2, seed=0)
    if stage == "release":
        t = time.perf_counter(); bayesdp.release(sim.X, sim.y, **kw)
        out["seconds"] = time.perf_counter() - t
    else:
        rel = bayesdp.release(sim.X, sim.y, **kw)
        bayesdp.fit(warm, method=stage, seed=0)
        del sim  # the rows are the holder's, not the fit's: free them, restart the peak
        gc.collect()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        try:
            t = time.perf_counter(); bayesdp.fit(rel, method=stage, seed=0)
            out["seconds"] = time.perf_counter() - t
        except bayesdp.BayesdpInputError as exc:
            out["refused"] = str(exc).split(";")[0][:90]
status = open("/proc/self/status").read()  # VmHWM: the peak since the last restart
out["peak_mib"] = int(status.split("VmHWM:")[1].split()[0]) / 1024
print(json.dumps(out))
"""


def run_stage(d, J, n, stage):
    res = subprocess.run([sys.executable, "-c", STAGE, str(d), str(J), str(n), stage],
                         capture_output=True, text=True)
    if res.returncode != 0:
        return {"error": res.stderr.strip().splitlines()[-1][:90]}
    return json.loads(res.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d", type=int, nargs="+", default=[5, 20, 50, 100])
    p.add_argument("--J", type=int, nargs="+", default=[1, 10, 100])
    p.add_argument("--n", type=int, default=None, help="rows (default 10,000 d, at most 1e6)")
    p.add_argument("--methods", nargs="+", default=["eiv", "fast", "fixeds", "normalx"])
    p.add_argument("--plot", default=None, help="write a log-log plot of time against d here")
    args = p.parse_args(argv)
    rows = []
    for J in args.J:
        for d in args.d:
            n = args.n or min(10_000 * d, 1_000_000)
            if n < 2 * J:
                continue
            base = {s: run_stage(d, J, n, s) for s in ("gram", "cholesky", "release")}
            for m in args.methods:
                r = run_stage(d, J, n, m)
                rows.append({"d": d, "J": J, "n": n, "method": m, **r,
                             **{f"{s}_s": base[s].get("seconds") for s in base},
                             "release_mib": base["release"].get("peak_mib")})
                fit_s = r.get("seconds")
                rel_s, chol_s = base["release"].get("seconds"), base["cholesky"].get("seconds")
                what = (f"{fit_s:8.3f} s  {r['peak_mib']:7.0f} MiB  x{fit_s / rel_s:6.2f} release"
                        f"  x{fit_s / chol_s:9.1f} cholesky" if fit_s is not None else
                        f"  {r.get('refused') or r.get('error')}")
                print(f"d={d:4d} J={J:5d} n={n:8d} {m:8s} {what}   (release {rel_s:.3f} s, "
                      f"gram {base['gram'].get('seconds', float('nan')):.3f} s, cholesky "
                      f"{chol_s:.4f} s)", flush=True)
    _exponents(rows)
    if args.plot:
        _plot(rows, args.plot)
    return rows


def _exponents(rows):
    import numpy as np

    print("\nexponent b of time ~ d^b (least squares over d, per J):")
    for key in sorted({(r["method"], r["J"]) for r in rows}):
        pts = [(r["d"], r["seconds"]) for r in rows
               if (r["method"], r["J"]) == key and r.get("seconds")]
        if len(pts) >= 2:
            b = np.polyfit(np.log([p[0] for p in pts]), np.log([p[1] for p in pts]), 1)[0]
            print(f"  {key[0]:8s} J={key[1]:5d}: b = {b:.2f} over d = {[p[0] for p in pts]}")


def _plot(rows, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 5))
    for key in sorted({(r["method"], r["J"]) for r in rows}):
        pts = sorted((r["d"], r["seconds"]) for r in rows
                     if (r["method"], r["J"]) == key and r.get("seconds"))
        if pts:
            ax.plot(*zip(*pts), marker="o", label=f"{key[0]}, J={key[1]}")
    for J in sorted({r["J"] for r in rows}):
        pts = sorted({(r["d"], r["release_s"]) for r in rows if r["J"] == J and r["release_s"]})
        ax.plot(*zip(*pts), ls="--", color="k", alpha=0.4)
    ax.set(xscale="log", yscale="log", xlabel="d (features)", ylabel="seconds",
           title="fit time against d (dashed: the release)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
