"""Figure 3 of the paper: run time per MCMC iteration against d, with log-log slopes.

    python3 reproduction/reproduce_figure3.py --d 1 2 3 4 5 6 8 10 12 14 16 18 20 \
        --iters 1000 --iters-long 4000 --repeats 2 --out-dir runs/fig3

Setting as in the paper: n = 1e4 simulated rows, eps = 1, one data holder (``--nodes`` to change).
Methods (default: all three of the paper's Figure 3 in one run, as published): MCMC-normalX
(``normalx-paper``),
MCMC-fixedS (``fixeds-paper``) and MCMC-B&S (``bs``); normalX/fixedS need
``bayesdp.paper`` (imported here so that it registers them).

Each (method, d, K) is fitted once untimed (warm-up: imports, caches, compilation of whatever is
cached between calls; B&S caches per number of iterations), then ``--repeats`` times at K1 = ``--iters`` and at K2 = ``--iters-long`` iterations
(half burn-in, half kept), keeping the minimum wall time T(K) of each (robust to a loaded
machine). Two measures of the time per iteration are reported:

- ``seconds_per_iteration`` (marginal) = (T(K2) - T(K1)) / (K2 - K1): cancels the fixed per-call
  cost (compilation, set-up, conversion of the draws), i.e. the cost of one more sweep, as long
  as that per-call cost is the same in both calls (numpyro's ``MCMC.run`` recompiles its loop on
  every ``fit`` of normalX/fixedS, seconds here, which makes this measure noisy for them);
- ``whole_call_per_iteration`` = T(K2) / K2: what the paper measured (whole run / K), including
  the per-call cost;
- ``loop_per_iteration``: the compiled sampling loop alone. normalX/fixedS: the method's numpyro
  kernel (``bayesdp.inference.mcmc.build_mcmc``, the object ``fit`` runs) iterated K2 times in
  one jitted ``fori_loop`` that runs once untimed (compilation) and then ``--repeats`` times,
  minimum kept (as ``benchmarks/bench_samplers.py``). B&S: its ``fit`` caches the compiled scan
  per shape, so this is its marginal time (same number as ``seconds_per_iteration``).

Results are appended to ``runtime.csv`` as each setting finishes (a rerun with the same
``--out-dir`` skips finished (method, d) pairs). ``slopes.md`` gives, per method and measure, the
least-squares slope of log(time) on log(d) over d >= each ``--slope-from`` value, and the ratios
at the largest d; ``fig3_runtime.png`` plots both measures on log-log axes with the fitted lines.
Timings are of this machine under its current load; only ratios and slopes mean anything.
"""

import argparse
import importlib
import os
import time
import warnings
from pathlib import Path

import numpy as np

MEASURES = ("loop_per_iteration", "seconds_per_iteration", "whole_call_per_iteration")
LABELS = {"normalx-paper": "MCMC-normalX", "fixeds-paper": "MCMC-fixedS", "bs": "MCMC-B&S",
          "normalx": "MCMC-normalX (bayesdp default, NUTS non-centred)",
          "fixeds": "MCMC-fixedS (slice)"}


def loop_seconds(rel, method, iters, repeats, seed=0):
    """Minimum wall time of ``iters`` sweeps of the method's numpyro kernel in one compiled
    loop (the loop runs once untimed first, to compile)."""
    import jax
    import jax.numpy as jnp

    import bayesdp
    from bayesdp.inference.mcmc import build_mcmc

    pri = bayesdp.Priors.paper().resolve(rel.d)
    mcmc, data = build_mcmc(method, rel, pri, num_samples=iters // 2,
                            num_warmup=iters - iters // 2)
    kernel = mcmc.sampler
    state0 = kernel.init(jax.random.PRNGKey(seed), iters - iters // 2, None, (data,), {})

    def run(state, dat):
        def body(i, carry):
            st, th, s2 = carry
            st = kernel.sample(st, (dat,), {})
            return st, th.at[i].set(st.z["theta"]), s2.at[i].set(st.z["sigma_y2"])

        th = jnp.zeros((iters, rel.d))
        s2 = jnp.zeros((iters,))
        return jax.lax.fori_loop(0, iters, body, (state, th, s2))

    f = jax.jit(run)
    jax.block_until_ready(f(state0, data))
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(f(state0, data))
        ts.append(time.perf_counter() - t)
    return ts


def slope(g, measure):
    y = g[measure].to_numpy(dtype=float)
    if len(g) < 2 or np.any(~(y > 0)):
        return float("nan")
    return float(np.polyfit(np.log(g.d.to_numpy(dtype=float)), np.log(y), 1)[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", nargs="+", type=int, default=list(range(1, 21)))
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--iters", type=int, default=1000, help="K1 (short run)")
    ap.add_argument("--iters-long", type=int, default=None, help="K2 (long run; default 4 K1)")
    ap.add_argument("--methods", nargs="+", default=["normalx-paper", "fixeds-paper", "bs"])
    ap.add_argument("--slope-from", nargs="+", type=int, default=[5, 10])
    ap.add_argument("--repeats", type=int, default=2, help="timed calls per setting (minimum kept)")
    ap.add_argument("--max-seconds", type=float, default=None,
                    help="skip the remaining (larger) d of a method once one timed call took "
                         "longer than this")
    ap.add_argument("--out-dir", default="runs/fig3")
    ap.add_argument("--plot-only", action="store_true", help="redo slopes and plot from runtime.csv")
    args = ap.parse_args()
    k1 = args.iters
    k2 = args.iters_long or 4 * k1
    if k2 <= k1:
        ap.error("--iters-long must be larger than --iters")
    import pandas as pd

    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    csv = out / "runtime.csv"
    cols = ["method", "d", "loop_per_iteration", "seconds_per_iteration",
            "whole_call_per_iteration", "K1", "K2", "T_K1", "T_K2", "T_K1_all", "T_K2_all",
            "T_loop_all"]
    done = pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=cols)

    if not args.plot_only:
        from bayesdp._jax import enable_x64

        enable_x64()
        try:
            importlib.import_module("bayesdp.paper")
        except ImportError:
            pass
        import bayesdp

        missing = [m for m in args.methods if m not in bayesdp.METHODS]
        if missing:
            print(f"not registered, skipped: {missing}")
        methods = [m for m in args.methods if m in bayesdp.METHODS]
        too_slow = set()
        for d in args.d:
            sim = bayesdp.simulate(n=args.n, d=d, seed=d)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1.0 / args.n,
                                      bounds="data", nodes=args.nodes, seed=d, include_yty=True)
            pri = bayesdp.Priors.paper(Lambda=sim.Lambda)
            for m in methods:
                if ((done.method == m) & (done.d == d)).any():
                    continue
                if m in too_slow:
                    print(f"{m:8s} d={d:2d}  skipped (--max-seconds)", flush=True)
                    continue
                times = {}
                for k in (k1, k2):
                    kw = dict(method=m, priors=pri, num_samples=k // 2, num_warmup=k - k // 2,
                              num_chains=1, progress_bar=False)
                    bayesdp.fit(rel, seed=0, **kw)  # warm-up for this K (compile caches), untimed
                    ts = []
                    for r in range(args.repeats):
                        t0 = time.perf_counter()
                        bayesdp.fit(rel, seed=1 + r, **kw)
                        ts.append(time.perf_counter() - t0)
                    times[k] = ts
                t1, t2 = min(times[k1]), min(times[k2])
                per = (t2 - t1) / (k2 - k1)
                whole = t2 / k2
                if m == "bs":
                    tl, loop = [], per
                else:
                    tl = loop_seconds(rel, m, k2, args.repeats)
                    loop = min(tl) / k2
                row = dict(method=m, d=d, loop_per_iteration=loop, seconds_per_iteration=per,
                           whole_call_per_iteration=whole, K1=k1, K2=k2, T_K1=t1, T_K2=t2,
                           T_K1_all=" ".join(f"{t:.3f}" for t in times[k1]),
                           T_K2_all=" ".join(f"{t:.3f}" for t in times[k2]),
                           T_loop_all=" ".join(f"{t:.3f}" for t in tl))
                done = pd.concat([done, pd.DataFrame([row])], ignore_index=True)
                tmp = csv.with_suffix(".tmp")
                done.to_csv(tmp, index=False)
                os.replace(tmp, csv)
                print(f"{m:8s} d={d:2d}  {loop * 1e3:9.4f} ms/iteration (loop), "
                      f"{per * 1e3:9.4f} ms/iteration (marginal), "
                      f"{whole * 1e3:9.4f} ms/iteration (whole call K={k2}); "
                      f"T(K1={k1}) = {t1:.2f} s, T(K2={k2}) = {t2:.2f} s", flush=True)
                if args.max_seconds is not None and t2 > args.max_seconds:
                    too_slow.add(m)

    df = done.copy()
    df["d"] = df.d.astype(int)
    for c in MEASURES + ("T_K1", "T_K2"):
        df[c] = df[c].astype(float)
    methods = [m for m in dict.fromkeys(df.method)]
    lines = [f"n = {args.n}, J = {args.nodes}, eps = 1; K1 = {k1}, K2 = {k2} "
             f"(from runtime.csv: K1 = {sorted(set(df.K1))}, K2 = {sorted(set(df.K2))})", ""]
    head = "| method | measure | " + " | ".join(f"slope, d >= {s}" for s in args.slope_from)
    lines += [head + " |", "| --- | --- | " + " | ".join("---" for _ in args.slope_from) + " |"]
    for m in methods:
        for meas in MEASURES:
            g = df[df.method == m].sort_values("d")
            vals = [slope(g[g.d >= s], meas) for s in args.slope_from]
            txt = " | ".join("n/a" if np.isnan(v) else f"{v:.2f}" for v in vals)
            lines.append(f"| {m} | {meas} | {txt} |")
    dmax = int(df.d.max())
    for meas in MEASURES:
        at = df[df.d == dmax].set_index("method")[meas]
        at = at[at > 0]
        for other in ("fixeds-paper", "normalx-paper"):
            if "bs" in at and other in at:
                lines.append(f"\n{meas}: B&S / {other} at d = {dmax}: {at['bs'] / at[other]:.1f}x")
    text = "\n".join(lines)
    (out / "slopes.md").write_text(text + "\n")
    print(text)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), sharey=True)
    s0 = min(args.slope_from)
    for ax, meas, title in zip(axes, MEASURES,
                               ("compiled loop (B&S: marginal of fit)",
                                "fit, marginal: (T(K2) - T(K1)) / (K2 - K1)",
                                "whole call: T(K2) / K2 (as in the paper)")):
        for i, m in enumerate(methods):
            g = df[df.method == m].sort_values("d")
            g = g[g[meas] > 0]
            if g.empty:
                continue
            b = slope(g[g.d >= s0], meas)
            lab = LABELS.get(m, m) + ("" if np.isnan(b) else f" (slope {b:.1f}, d >= {s0})")
            (line,) = ax.plot(g.d, g[meas], marker="o", ms=4, label=lab)
            h = g[g.d >= s0]
            if len(h) >= 2 and not np.isnan(b):
                c = np.polyfit(np.log(h.d.to_numpy(dtype=float)), np.log(h[meas].to_numpy()), 1)
                xs = np.array([h.d.min(), h.d.max()], dtype=float)
                ax.plot(xs, np.exp(np.polyval(c, np.log(xs))), ls="--", lw=1,
                        color=line.get_color())
        ax.set_xscale("log")
        ax.set_yscale("log")
        ticks = [t for t in (1, 2, 3, 5, 10, 20) if df.d.min() <= t <= df.d.max()]
        ax.set_xticks(ticks)
        ax.set_xticklabels([str(t) for t in ticks])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("d")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=7)
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("seconds per iteration")
    fig.suptitle(f"Run time per iteration, n = {args.n}, J = {args.nodes}, eps = 1", fontsize=10)
    fig.tight_layout()
    fig.savefig(out / "fig3_runtime.png", dpi=120)


if __name__ == "__main__":
    main()
