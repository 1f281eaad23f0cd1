"""Speed and mixing of the MCMC methods on the same model and data, measured in one run.

For every (d, J) of the grid: simulate the paper's data (n rows in total, eps = 1), release, and
fit with each method on ONE chain. Prints, per method:

    s/iter      seconds per iteration after compilation (warm-up and draws averaged)
    ESS/s theta minimum over theta's coordinates of ess_bulk of the kept draws (one chain) /
                (s/iter x number of kept draws)
    ESS/s s2    the same for sigma_y^2
    and the ratios against the paper's kernel ("normalx-paper") measured in the same run.

    python benchmarks/bench_samplers.py                       # full grid: d 2 5 10 20, J 1 5 10
    python benchmarks/bench_samplers.py --d 2 5 --J 1 10 --num-samples 2000 --nuts-max-d 5
    python benchmarks/bench_samplers.py --quick               # d 2 5, J 1 10, short runs

Timing claims belong here, never in tests. The machine is shared: run it alone for clean numbers.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

METHODS = ["normalx-paper", "normalx", "fixeds", "nuts-normalx", "nuts-fixeds"]


def bench_one(rel, method, n_draw, seed=0):
    """Time ``n_draw`` warm-up + ``n_draw`` kept iterations of the method's numpyro kernel (the
    same ``MCMCKernel`` object ``fit`` hands to ``numpyro.infer.MCMC``) in one compiled loop;
    the loop runs twice and the second run is timed, so compilation is excluded. (numpyro's
    ``MCMC.run`` recompiles its loop on every call, a few seconds here, which would swamp the
    per-iteration cost.) ESS is computed on the kept draws (bulk ESS is rank-based, so NUTS's
    unconstrained log sigma_y^2 gives the same ESS as sigma_y^2)."""
    import jax
    import jax.numpy as jnp

    import bayesdp.paper  # registers the paper's methods (and binds bayesdp)
    from bayesdp import diagnostics
    from bayesdp.inference.mcmc import build_mcmc

    pri = bayesdp.Priors.paper().resolve(rel.d)
    mcmc, data = build_mcmc(method, rel, pri, num_samples=n_draw, num_warmup=n_draw)
    kernel = mcmc.sampler
    state0 = kernel.init(jax.random.PRNGKey(seed), n_draw, None, (data,), {})
    total = 2 * n_draw
    site_s2 = "sigma_y2"

    def run(state, dat):
        def body(i, carry):
            st, th, s2 = carry
            st = kernel.sample(st, (dat,), {})
            return st, th.at[i].set(st.z["theta"]), s2.at[i].set(st.z[site_s2])

        th = jnp.zeros((total, rel.d))
        s2 = jnp.zeros((total,))
        return jax.lax.fori_loop(0, total, body, (state, th, s2))

    f = jax.jit(run)
    jax.block_until_ready(f(state0, data))
    t = time.perf_counter()
    _, th, s2 = jax.block_until_ready(f(state0, data))
    secs = time.perf_counter() - t
    post = {"theta": np.asarray(th)[None, n_draw:], "sigma_y2": np.asarray(s2)[None, n_draw:]}
    s = diagnostics.summary_unrounded(diagnostics.to_inference_data(post),
                                      var_names=["theta", "sigma_y2"])
    ess_theta = float(s.loc[[i for i in s.index if i.startswith("theta")], "ess_bulk"].min())
    ess_s2 = float(s.loc["sigma_y2", "ess_bulk"])
    spi = secs / total
    return {"s_per_iter": spi, "ess_theta": ess_theta, "ess_s2": ess_s2,
            "ess_s_theta": ess_theta / (spi * n_draw), "ess_s_s2": ess_s2 / (spi * n_draw),
            "draws": n_draw}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--d", type=int, nargs="+", default=[2, 5, 10, 20])
    ap.add_argument("--J", type=int, nargs="+", default=[1, 5, 10])
    ap.add_argument("--n", type=int, default=10_000, help="rows in total (default 1e4)")
    ap.add_argument("--epsilon", type=float, default=1.0)
    ap.add_argument("--methods", nargs="+", default=METHODS, choices=METHODS)
    ap.add_argument("--num-samples", type=int, default=5000,
                    help="draws (= warm-up) per hand-written run (default 5000)")
    ap.add_argument("--nuts-samples", type=int, default=500, help="draws (= warm-up) for NUTS")
    ap.add_argument("--nuts-max-d", type=int, default=10,
                    help="skip NUTS above this d (its S_j have d(d+1)/2 J dimensions)")
    ap.add_argument("--quick", action="store_true",
                    help="d 2 5, J 1 10, 2000 draws, 200 NUTS draws, NUTS up to d = 5")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    if args.quick:
        args.d, args.J, args.num_samples, args.nuts_samples, args.nuts_max_d = [2, 5], [1, 10], \
            2000, 200, 5

    import bayesdp.paper  # registers the paper's methods (and binds bayesdp)

    print(f"n = {args.n}, eps = {args.epsilon}, one chain; s/iter after compilation")
    head = (f"{'d':>3} {'J':>3} {'method':<18} {'s/iter':>10} {'minESS th':>9} {'ESS/s th':>9} "
            f"{'ESS/s s2':>9} {'x speed':>8} {'x ESS/s th':>10}")
    print(head)
    print("-" * len(head))
    rows = []
    for d in args.d:
        for J in args.J:
            sim = bayesdp.simulate(n=args.n, d=d, seed=args.seed + 100 * d + J)
            rel = bayesdp.release(sim.X, sim.y, epsilon=args.epsilon, delta=1e-5,
                                  bounds=sim.bounds, nodes=J, seed=args.seed + 1)
            base = None
            for m in args.methods:
                if m.startswith("nuts") and d > args.nuts_max_d:
                    continue
                n_draw = args.nuts_samples if m.startswith("nuts") else args.num_samples
                try:
                    r = bench_one(rel, m, n_draw, seed=args.seed)
                except Exception as exc:  # report, keep going
                    print(f"{d:>3} {J:>3} {m:<18} failed: {exc}")
                    continue
                if m == "normalx-paper":
                    base = r
                sp = f"{base['s_per_iter'] / r['s_per_iter']:8.2f}" if base else f"{'':>8}"
                ee = f"{r['ess_s_theta'] / base['ess_s_theta']:10.2f}" if base else f"{'':>10}"
                print(f"{d:>3} {J:>3} {m:<18} {r['s_per_iter']:10.2e} {r['ess_theta']:9.0f} "
                      f"{r['ess_s_theta']:9.1f} {r['ess_s_s2']:9.1f} {sp} {ee}", flush=True)
                rows.append({"d": d, "J": J, "method": m, **r})
    print("\nx speed = s/iter of normalx-paper / s/iter of the method (> 1: faster per iteration);")
    print("x ESS/s th = ESS/s over theta of the method / that of normalx-paper (same run).")
    return rows


if __name__ == "__main__":
    main()
