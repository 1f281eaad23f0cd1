"""What does privacy of the bounds cost? Prediction MSE with private bounds against bounds read off
the data.

    python research/private_bounds.py --data-dir /work/shared/data/uci --reps 3

For each data set (the three UCI sets of the paper, when ``--data-dir`` has them, and the
paper's simulation) and each eps in ``--epsilons`` (delta = 1 / n_train), releases the training
rows over ``--nodes`` holders (random split) three times per replication:

- "max": ``bounds="data"``, B_x = max ||x_i||, B_y = max |y_i| of the training rows (NOT
  private; the paper's protocol);
- "m-th": B_x, B_y = the m-th largest ||x_i||, |y_i| of the training rows, m the target rank of
  the private estimate (NOT private: the same target without the cost of privacy; the
  statistics get all of eps);
- "private": ``bounds="private"`` with ``--bounds-share`` of eps (docs/privacy.md section 11),
  the statistics with the rest; the release is (eps, delta)-DP as a whole.

and fits ``fast`` and ``fixeds`` (default priors, scaled from the release's bounds). The error
is the test prediction MSE of the posterior mean of theta on the held-out rows (UCI: the paper's
preprocessing and its last 20% of rows; simulation: 20% of the rows). Cells where the private
estimate needs more rows than the data set has are reported as "refused (n_min)". Prints one
table: mean MSE over replications, and the ratios private / max and private / m-th.
"""

from __future__ import annotations

import argparse
import math
import warnings
from pathlib import Path

import numpy as np

import bayesdp
from bayesdp import privacy
from bayesdp.paper import datasets, metrics

UCI = ("power_plant_energy", "bike_sharing", "air_quality")


def data_sets(data_dir, sim_n, sim_d, seed):
    """(name, X_train, y_train, X_test, y_test) of the UCI files found and of the simulation."""
    folder = Path(data_dir) if data_dir else None
    if folder is None or not folder.is_dir():
        print(f"(UCI folder {data_dir!r} not found: only the simulation)")
    else:
        for name in UCI:
            path = folder / f"{name}.csv"
            if not path.exists():
                print(f"(skipping {name}: {path} not found)")
                continue
            ds = datasets.load_dataset(path, preprocessing="paper")
            yield name, ds.X_train, ds.y_train, ds.X_test, ds.y_test
    sim = bayesdp.simulate(sim_n, sim_d, seed=seed)
    n_tr = int(0.8 * sim_n)
    yield (f"simulated (n={sim_n}, d={sim_d})", sim.X[:n_tr], sim.y[:n_tr], sim.X[n_tr:],
           sim.y[n_tr:])


def one_cell(X, y, X_test, y_test, *, eps, bounds, share, nodes, seed, methods, mcmc):
    """Test prediction MSE per method for one release, or None when the release is refused."""
    kw = {"bounds_share": share} if isinstance(bounds, str) and bounds == "private" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            rel = bayesdp.release(X, y, epsilon=eps, delta=1.0 / len(y), bounds=bounds,
                                  nodes=nodes, seed=seed, **kw)
        except bayesdp.BayesdpInputError as exc:
            if "at least" in str(exc):
                return None
            raise
        out = {}
        for k, method in enumerate(methods):
            opts = mcmc if method != "fast" else {}
            idata = bayesdp.fit(rel, method=method, seed=seed + 1000 * (k + 1),
                                progress_bar=False, **opts)
            theta = idata.posterior["theta"].mean(dim=("chain", "draw")).to_numpy()
            out[method] = metrics.prediction_mse(theta, X_test, y_test)
    out["clipped"] = float(rel.n_clipped.sum() / len(y))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", default="/work/shared/data/uci")
    ap.add_argument("--epsilons", nargs="+", type=float, default=[0.1, 1.0, 10.0])
    ap.add_argument("--methods", nargs="+", default=["fast", "fixeds"])
    ap.add_argument("--bounds-share", type=float, default=privacy.PRIVATE_BOUNDS_SHARE)
    ap.add_argument("--nodes", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--sim-n", type=int, default=20_000)
    ap.add_argument("--sim-d", type=int, default=5)
    ap.add_argument("--num-samples", type=int, default=500)
    ap.add_argument("--num-warmup", type=int, default=500)
    ap.add_argument("--num-chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    mcmc = {"num_samples": args.num_samples, "num_warmup": args.num_warmup,
            "num_chains": args.num_chains}
    print(f"test prediction MSE, mean over {args.reps} reps; J = {args.nodes}, delta = 1/n_train, "
          f"private bounds with share {args.bounds_share:g} of eps; clipped = share of rows "
          "clipped by the private bounds")
    print("| data | n_train | eps | method | max | m-th | private | private / max "
          "| private / m-th | clipped (private) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name, X, y, X_test, y_test in data_sets(args.data_dir, args.sim_n, args.sim_d, args.seed):
        nx = np.sort(privacy.row_norms(X)[0])[::-1]
        ny = np.sort(np.abs(y))[::-1]
        for eps in args.epsilons:
            m = privacy.bounds_target_rank(eps * args.bounds_share / 2, 301)
            variants = {"max": "data", "m-th": (nx[min(m, len(y)) - 1], ny[min(m, len(y)) - 1]),
                        "private": "private"}
            res = {v: [] for v in variants}
            for rep in range(args.reps):
                seed = args.seed + 7919 * rep + int(1000 * eps)
                for v, bounds in variants.items():
                    res[v].append(one_cell(X, y, X_test, y_test, eps=eps, bounds=bounds,
                                           share=args.bounds_share, nodes=args.nodes,
                                           seed=seed, methods=args.methods, mcmc=mcmc))
            for method in args.methods:
                mx = np.mean([r[method] for r in res["max"]])
                mth = np.mean([r[method] for r in res["m-th"]])
                if any(r is None for r in res["private"]):
                    p_txt = f"refused (n_min {privacy.PRIVATE_BOUNDS_MIN_FACTOR * m})"
                    r1 = r2 = clip = "-"
                else:
                    p = np.mean([r[method] for r in res["private"]])
                    p_txt, r1, r2 = f"{p:.4g}", f"{p / mx:.3g}", f"{p / mth:.3g}"
                    clip = f"{np.mean([r['clipped'] for r in res['private']]):.1%}"
                print(f"| {name} | {len(y)} | {eps:g} | {method} | {mx:.4g} | {mth:.4g} | {p_txt} "
                      f"| {r1} | {r2} | {clip} |", flush=True)


if __name__ == "__main__":
    main()
