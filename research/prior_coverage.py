"""Coverage of the 90% posterior intervals of theta on the demo setting, default vs paper priors
(issue 9, point 3; the numbers: docs/evidence/coverage-simulation.md).

    PYTHONPATH=. python research/prior_coverage.py --seeds 20 --methods fast fixeds
    PYTHONPATH=. python research/prior_coverage.py --seeds 10 --methods normalx --priors default small-sigma-x --s release
    PYTHONPATH=. python research/prior_coverage.py --seeds 10 --methods normalx --priors generating-sigma-x --s release
    PYTHONPATH=. python research/prior_coverage.py --seeds 20 --methods fast fast-eiv --priors default

Setting: bayesdp.simulate(n=100_000, d=5), release at eps = 1, delta = 1e-5 with the simulation's
public bounds, J = 5. For every seed and method, the fraction of the 5 true coefficients inside
the equal-tailed 90% interval, for the release as published ("release") and for an oracle
release whose S_hat is the true X_j^T X_j ("oracle S": the only approximation of fast/fixedS,
fixing S at nearest_psd(S_hat), removed - so what remains is the prior's effect). For fixeds also
whether sigma_y^2 = 1 lies inside its 90% interval and its posterior median. Method "fast-eiv"
is fast with ``s_noise="eiv"`` (the noise on S carried into z's covariance to first order).
For the methods that sample S, the share of fits whose S_hat check flagged a direction and the
smallest and largest z seen. Priors "small-sigma-x" are the default with Sigma_x's Lambda 1e4
times smaller; "generating-sigma-x" an oracle, the simulation's own prior of Sigma_x.
"""

import argparse
import dataclasses
import time
import warnings

import numpy as np

import bayesdp
from bayesdp.releases.holders import random_split, split_entropy, split_rng


def posterior_quantiles(idata, var_name, probs=(0.05, 0.95)):
    """Equal-tailed quantiles of a variable's draws over (chain, draw), shape (len(probs), ...)."""
    return np.quantile(bayesdp.diagnostics.posterior_array(idata, var_name), probs, axis=0)


def one(seed, methods, priors_kinds, num_samples, which_s=("release", "oracle S")):
    sim = bayesdp.simulate(100_000, 5, seed=1000 + seed)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=5,
                          seed=2000 + seed)
    # the release's own holders (random split); no row is clipped at the simulation's bounds
    labels = random_split(sim.X.shape[0], 5, split_rng(split_entropy(2000 + seed)))
    assert int(rel.n_clipped.sum()) == 0 and list(rel.n) == list(np.bincount(labels, minlength=5))
    oracle = dataclasses.replace(rel, S_hat=np.stack(
        [sim.X[labels == j].T @ sim.X[labels == j] for j in range(5)]))
    rows = []
    for kind in priors_kinds:
        pri = {"default": bayesdp.Priors(), "paper": bayesdp.Priors.paper(),
               # Sigma_x's prior scale 1e4 times smaller: allows features of small variance
               "small-sigma-x": bayesdp.Priors(
                   Lambda=1e-4 * bayesdp.Priors().resolve(rel).Lambda),
               # an oracle: Sigma_x's prior is the simulation's own InvWishart(d + 1, Lambda)
               "generating-sigma-x": bayesdp.Priors(Lambda=sim.Lambda,
                                                    kappa=sim.X.shape[1] + 1.0)}[kind]
        for which, r in (("release", rel), ("oracle S", oracle)):
            if which not in which_s:
                continue
            for m in methods:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", bayesdp.ConvergenceWarning)
                    # "fast-eiv": fast with the S noise carried into z's (s_noise="eiv")
                    opts = {"s_noise": "eiv"} if m == "fast-eiv" else {}
                    idata = bayesdp.fit(r, method=m.removesuffix("-eiv"), seed=seed, priors=pri,
                                        progress_bar=False, num_samples=num_samples, **opts)
                q = posterior_quantiles(idata, "theta")
                row = {"seed": seed, "priors": kind, "S": which, "method": m,
                       "coverage": float(((q[0] <= sim.theta) & (sim.theta <= q[1])).mean())}
                if "sigma_y2" in idata.posterior:
                    qs = posterior_quantiles(idata, "sigma_y2", (0.05, 0.5, 0.95))
                    row.update(s2_covered=bool(qs[0] <= 1.0 <= qs[2]), s2_median=float(qs[1]),
                               converged=bool(idata.posterior.attrs["converged"]))
                if "s_hat_check_z" in idata.posterior.attrs:  # methods that sample S
                    z = np.asarray(idata.posterior.attrs["s_hat_check_z"], dtype=float)
                    row.update(s_hat_flagged=bool(
                        np.abs(z).max() > bayesdp.diagnostics.s_hat_z_max(len(z))),
                        s_hat_z_min=float(z.min()), s_hat_z_max=float(z.max()))
                rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--methods", nargs="+", default=["fast", "fixeds"])
    ap.add_argument("--priors", nargs="+", default=["default", "paper"],
                    choices=["default", "paper", "small-sigma-x", "generating-sigma-x"])
    ap.add_argument("--num-samples", type=int, default=1000)
    ap.add_argument("--s", nargs="+", default=["release", "oracle"],
                    choices=["release", "oracle"], help="the release as published, oracle S")
    args = ap.parse_args()
    import pandas as pd

    t0 = time.perf_counter()
    rows = []
    for s in range(args.seeds):
        rows += one(s, args.methods, args.priors, args.num_samples,
                    ["oracle S" if w == "oracle" else w for w in args.s])
    df = pd.DataFrame(rows)
    agg = {"coverage": "mean"}
    if "s2_covered" in df:
        agg.update(s2_covered="mean", s2_median="median", converged="mean")
    if "s_hat_flagged" in df:
        agg.update(s_hat_flagged="mean", s_hat_z_min="min", s_hat_z_max="max")
    print(df.groupby(["priors", "S", "method"]).agg(agg).round(3).to_string())
    print(f"({args.seeds} seeds x 5 coefficients per cell; {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
