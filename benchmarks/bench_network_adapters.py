"""Scaling of the PriCER and the Papachristou & Rahimian consensus simulators (sparse, recursive updates).

    python benchmarks/bench_network_adapters.py [--sizes 10000 100000]

Prints wall-clock seconds measured in this run: PriCER network build, design optimisation and one
round (D = 5 packed coordinates, mean degree 6); consensus Alg. 3 with T = 100 on a ring-plus-chords
graph of the same size, and the weights of one agent's output.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import scipy.sparse as sp


def main(argv=None):
    from bayesdp.adapters import consensus as cm
    from bayesdp.adapters import pricer as pm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"{'n':>8} {'pricer build':>13} {'design':>8} {'sweeps':>7} {'round':>7} "
          f"{'consensus T=100':>16} {'weights':>8}")
    for n in args.sizes:
        t0 = time.perf_counter()
        net = pm.PricerNetwork.random_sparse(n, 6, rng.uniform(0.1, 0.9, n), 0.7, seed=1)
        t1 = time.perf_counter()
        des = pm.optimize_design(net, pm.PricerPrivacy(eps=0.5, delta=1e-5, radius=1.0), 5)
        t2 = time.perf_counter()
        pm.simulate_round(rng.standard_normal((n, 5)), net, des, rng)
        t3 = time.perf_counter()
        i = np.arange(n)
        a, b = rng.integers(0, n, n), rng.integers(0, n, n)
        adj = sp.csr_matrix((np.ones(2 * n), (np.r_[i, a], np.r_[(i + 1) % n, b])), shape=(n, n))
        A = cm.mh_weights(adj)
        t4 = time.perf_counter()
        cm.run_mvue(A, rng.standard_normal((n, 5)), 100, 1.0, rng=rng)
        t5 = time.perf_counter()
        cm.consensus_weights(A, 100, "mvue", 0)
        t6 = time.perf_counter()
        print(f"{n:>8} {t1 - t0:>13.2f} {t2 - t1:>8.2f} {des.info['sweeps']:>7} {t3 - t2:>7.2f} "
              f"{t5 - t4:>16.2f} {t6 - t5:>8.2f}")


if __name__ == "__main__":
    main()
