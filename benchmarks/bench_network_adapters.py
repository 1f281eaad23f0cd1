"""Scaling of the PriCER and the Papachristou & Rahimian consensus simulators (sparse, recursive
updates), each step against one pass over the network's links measured in the same run.

    python benchmarks/bench_network_adapters.py [--sizes 10000 100000]

Per network size n, the wall-clock seconds of: PriCER's network build, design optimisation and
one round (D = 5 packed coordinates, mean degree 6); consensus Alg. 3 with T = 100 on a
ring-plus-chords graph of the same size, and the weights of one agent's output. The baseline is
one pass over the links, a sparse product of the network's (n, n) link matrix with the (n, 5)
node vectors (median of 20): the least that any of these steps must do. Printed beside each
step: its time in passes ("x pass"; for the design, per sweep; for consensus, per iteration,
which is two passes). Constant ratios across n mean each step costs a fixed number of passes,
i.e. time linear in the number of links. The machine may be shared: run it alone for clean
numbers.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp


def pass_seconds(matrix, vectors, repeats=20):
    """Median seconds of one sparse product ``matrix @ vectors``: one pass over the links."""
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        matrix @ vectors
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def main(argv=None):
    from bayesdp.adapters import consensus as cm
    from bayesdp.adapters import pricer as pm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'n':>8} {'pass s':>8} {'pricer build':>13} {'design':>8} {'sweeps':>7} "
          f"{'x pass/sweep':>13} {'round':>7} {'x pass':>7} {'consensus T=100':>16} "
          f"{'x pass/iter':>12} {'weights':>8} {'x pass':>7}")
    for n in args.sizes:
        t0 = time.perf_counter()
        net = pm.PricerNetwork.random_sparse(n, 6, rng.uniform(0.1, 0.9, n), 0.7, seed=1)
        t1 = time.perf_counter()
        des = pm.optimize_design(net, pm.PricerPrivacy(eps=0.5, delta=1e-5, radius=1.0), 5)
        t2 = time.perf_counter()
        stats = rng.standard_normal((n, 5))
        pm.simulate_round(stats, net, des, rng)
        t3 = time.perf_counter()
        one_pass = pass_seconds(net.P, stats)
        i = np.arange(n)
        a, b = rng.integers(0, n, n), rng.integers(0, n, n)
        adj = sp.csr_matrix((np.ones(2 * n), (np.r_[i, a], np.r_[(i + 1) % n, b])), shape=(n, n))
        A = cm.mh_weights(adj)
        t4 = time.perf_counter()
        cm.run_mvue(A, rng.standard_normal((n, 5)), 100, 1.0, rng=rng)
        t5 = time.perf_counter()
        cm.consensus_weights(A, 100, "mvue", 0)
        t6 = time.perf_counter()
        consensus_pass = pass_seconds(A, stats)
        sweeps = max(int(des.info["sweeps"]), 1)
        print(f"{n:>8} {one_pass:>8.2e} {t1 - t0:>13.2f} {t2 - t1:>8.2f} {sweeps:>7} "
              f"{(t2 - t1) / sweeps / one_pass:>13.1f} {t3 - t2:>7.2f} "
              f"{(t3 - t2) / one_pass:>7.1f} {t5 - t4:>16.2f} "
              f"{(t5 - t4) / 100 / consensus_pass:>12.1f} {t6 - t5:>8.2f} "
              f"{(t6 - t5) / consensus_pass:>7.1f}")
    print("x pass: the step's seconds over one sparse pass over the links (link matrix times the "
          "(n, 5) node vectors) measured in this run; consensus per iteration, the design per "
          "sweep.")


if __name__ == "__main__":
    main()
