"""Fits per second for R replications of one compare cell: one by one vs batched, in one run.

For each d and R: simulate the paper's data (n rows, eps = 1, J holders, the paper's priors as in
``bayesdp.paper.compare``), make R releases with R seeds (the replications of one (eps, J) cell) and
fit each method with compare's settings (one chain, ``--num-samples`` / ``--num-warmup``;
"bs" gets its own releases with y^T y, as compare makes them):

    one-by-one   ``bayesdp.fit`` per release (what compare does by default), after one
                 warm-up fit; measured once per (d, method) on the first --baseline-fits
                 releases, as every such fit costs the same (the MCMC methods recompile
                 numpyro's sampling loop on every call; "bs" reuses its compiled loop)
    batch        ``bayesdp.inference.fit_batch`` on all R releases (one InferenceData each), first
                 call:
                 includes compiling the batched program for this (R, J, d)
    batch again  the same call again: the program is compiled (in a compare grid every further
                 epsilon of the same J and R reuses it)
    draws only   ``fit_batch_results`` (no InferenceData; what ``compare(batch_reps=True)``
                 uses), compiled

and prints fits/s and the ratio to one-by-one. Timing claims belong here, never in tests.
The machine may be shared with other jobs: run it alone for clean numbers.

    python benchmarks/bench_batch.py                        # d 2 5, R 10 50, fast, fixeds, bs
    python benchmarks/bench_batch.py --d 2 --R 10 --methods fast --baseline-fits 5
    python benchmarks/bench_batch.py --R 50 --methods bs --baseline-fits 5
"""

from __future__ import annotations

import argparse
import time
import warnings


def releases(d, J, R, n, seed=0, include_yty=False):
    import bayesdp
    from bayesdp.paper.comparison import _context, _cell_release, _cell_seeds

    spec = {"kind": "simulated", "n": n, "d": d, "seed": seed, "bounds": "data",
            "calibration": "exact"}
    ctx = _context(spec)
    seeds = [_cell_seeds(spec, 1.0, J, r) for r in range(R)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        rels = [_cell_release(spec, ctx, 1.0, J, s[1] if include_yty else s[0], include_yty)
                for s in seeds]
    return rels, [s[4] for s in seeds], ctx["priors"], bayesdp


def timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--d", type=int, nargs="+", default=[2, 5])
    ap.add_argument("--J", type=int, default=5)
    ap.add_argument("--R", type=int, nargs="+", default=[10, 50])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--methods", nargs="+", default=["fast", "fixeds", "bs"])
    ap.add_argument("--num-samples", type=int, default=1000)
    ap.add_argument("--num-warmup", type=int, default=1000)
    ap.add_argument("--baseline-fits", type=int, default=10,
                    help="one-by-one fits timed per (d, R, method); fits/s is their rate")
    a = ap.parse_args(argv)
    from bayesdp._jax import enable_x64
    from bayesdp.inference.batch import fit_batch_results

    enable_x64()
    warnings.simplefilter("ignore", UserWarning)
    kw = dict(num_samples=a.num_samples, num_warmup=a.num_warmup, num_chains=1,
              progress_bar=False)
    print(f"J = {a.J}, eps = 1, n = {a.n}, num_samples = {a.num_samples}, "
          f"num_warmup = {a.num_warmup}, one chain; fits/s (ratio to one-by-one)")
    print(f"{'d':>3} {'R':>4} {'method':>8} {'one-by-one':>11} {'batch':>15} "
          f"{'batch again':>15} {'draws only':>15}")
    baseline = {}
    for d in a.d:
        for R in a.R:
            made = {}
            for method in a.methods:
                yty = method == "bs"  # B&S's release carries y^T y
                if yty not in made:
                    made[yty] = releases(d, a.J, R, a.n, include_yty=yty)
                rels, seeds, pri, bayesdp = made[yty]
                if (d, method) not in baseline:  # the same for every R: one fit at a time
                    k = min(R, a.baseline_fits)
                    bayesdp.fit(rels[0], method=method, seed=seeds[0], priors=pri, **kw)
                    t1 = timed(lambda: [bayesdp.fit(r, method=method, seed=s, priors=pri, **kw)
                                        for r, s in zip(rels[:k], seeds[:k])])
                    baseline[(d, method)] = k / t1
                one = baseline[(d, method)]
                rates = []
                fit_batch = bayesdp.inference.fit_batch
                for fn in (fit_batch, fit_batch, fit_batch_results):
                    t = timed(lambda: fn(rels, method, seeds=seeds, priors=pri, **kw))
                    rates.append(R / t)
                cells = " ".join(f"{r:8.2f} ({r / one:4.1f}x)" for r in rates)
                print(f"{d:>3} {R:>4} {method:>8} {one:11.2f} {cells}", flush=True)


if __name__ == "__main__":
    main()
