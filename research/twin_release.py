"""Can anything computed from a release tell a fit that misses from one that covers?

AirQuality's largest coefficient (the fourth) loads on the weakest direction v of X^T X
(docs/evidence/coverage-real-data.md, "Coefficient by coefficient"). Its twin data set keeps
the rows X and moves y along that direction: y' = y - c X v with c = v^T theta_ref (theta_ref,
the non-private posterior mean), clipped to the same B_y, so the twin's non-private mean has
no component along v. The two releases differ only in the mean of z_hat (by X^T (y' - y),
whose length is about lambda_min c) and of y^T y: with one holder, the Kullback-Leibler
divergence of the release of one from the other's is

    KL = |X^T (y' - y)|^2 / (2 sigma_z^2) + (y'^T y' - y^T y)^2 / (2 sigma_yty^2),

and by Pinsker's inequality any function of the release (a warning, an interval) behaves the
same on both up to TV <= sqrt(KL / 2). The script prints KL and TV, then fits ``eiv`` (the
default, and ``scales="per-slope"``) on ``--releases`` releases of each and prints each
coefficient's coverage of its own reference.

    .venv/bin/python research/twin_release.py            # about 3 minutes, one core
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration_realdata import _interval, load, reference  # noqa: E402


def twin(X, y, bounds, theta_ref):
    """(y', v, c, lambda_min): y moved along X^T X's weakest direction v by c = v^T theta_ref."""
    lam, V = np.linalg.eigh(X.T @ X)
    v = V[:, 0]
    c = float(v @ theta_ref)
    return np.clip(y - c * (X @ v), -bounds[1], bounds[1]), v, c, float(lam[0])


def coverage(X, y, bounds, ref, eps, releases, options):
    import bayesdp

    d = X.shape[1]
    hits, warned = [], 0
    for r in range(releases):
        rel = bayesdp.release(X, y, epsilon=eps, delta=1e-5, bounds=bounds, nodes=1,
                              seed=100 + r)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            idata = bayesdp.fit(rel, seed=r, progress_bar=False, **options)
        warned += any(w.category.__name__ in ("ConvergenceWarning", "CalibrationWarning")
                      for w in caught)
        th = np.asarray(idata.posterior["theta"]).reshape(-1, d)
        lo, hi = _interval(th)
        hits.append((lo <= ref) & (ref <= hi))
    return np.mean(hits, axis=0), warned / releases


def main(argv=None):
    import bayesdp

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", default="airquality")
    p.add_argument("--eps", type=float, nargs="+", default=[1.0, 10.0])
    p.add_argument("--releases", type=int, default=20)
    args = p.parse_args(argv)
    prepared = load(args.data)
    if prepared is None:
        sys.exit(f"{args.data}: data file not found (set BAYESDP_DATA_DIR)")
    X, y, Xt, yt, bounds = prepared
    ref = reference(X, y, bounds, Xt, yt)["mean"]
    y2, v, c, lam = twin(X, y, bounds, ref)
    ref2 = reference(X, y2, bounds, Xt, yt)["mean"]
    print(f"{args.data}: lambda_min(X^T X) = {lam:.3g}, c = v^T theta_ref = {c:.3f}; "
          f"loadings of v: {np.round(v, 2)}")
    print(f"reference: {np.round(ref, 3)}\ntwin's:    {np.round(ref2, 3)}")
    dz = X.T @ (y2 - y)
    dyty = float(y2 @ y2 - y @ y)
    for eps in args.eps:
        rel = bayesdp.release(X, y, epsilon=eps, delta=1e-5, bounds=bounds, nodes=1, seed=0)
        kl = 0.5 * (dz @ dz / float(rel.sigma_z[0]) ** 2
                    + dyty ** 2 / float(rel.sigma_yty[0]) ** 2)
        print(f"\neps = {eps:g}: |dz| = {np.linalg.norm(dz):.3g} (sigma_z {float(rel.sigma_z[0]):.3g}), "
              f"d(y^T y) = {dyty:.3g} (sigma_yty {float(rel.sigma_yty[0]):.3g}); "
              f"KL = {kl:.2e}, TV <= {math.sqrt(kl / 2):.3f}")
        for label, options in (("eiv", {}), ("eiv per-slope", {"scales": "per-slope"})):
            for name, yy, rr in (("data", y, ref), ("twin", y2, ref2)):
                cov, warned = coverage(X, yy, bounds, rr, eps, args.releases, options)
                print(f"  {label:14s} {name}: pooled {cov.mean():.2f}, by coefficient "
                      f"{np.round(cov, 2)}, warned {warned:.2f}", flush=True)


if __name__ == "__main__":
    main()
