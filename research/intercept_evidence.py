"""Evidence for the intercept release (appendix B.2) on simulated non-centred normal features.

    python research/intercept_evidence.py [--nuts]

Data: x ~ N(mu, Sigma) with mu = (5, -3) (sd about 1), y = 1.5 + x^T (0.7, -0.4) + N(0, 1),
n = 20,000 rows over J = 2 holders, public bounds ||x|| <= 12, |y| <= 15. For each eps the same
rows are released with and without an intercept and fitted with ``fast`` and ``fixeds``
(default priors); the reference is the non-private posterior with an intercept. Printed: the
posterior means, and their distance to the reference means in units of the reference posterior
sd. ``--nuts`` adds ``normalx`` and ``nuts-normalx`` (the intercept model, non-centred and
centred) on the first 600 rows at eps = 10 and 1e3 (a few minutes).
A second table shows how the features' distance from 0 widens the DP posterior of the slopes
at a fixed eps (the noise of the centred scatter grows like (1 + |mean|)^2 sigma_s).
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

import bayesdp.paper  # registers the paper's methods (and binds bayesdp)


def data(n=20_000, seed=0, shift=(5.0, -3.0)):
    rng = np.random.default_rng(seed)
    L = np.array([[1.0, 0.0], [0.3, 0.8]])
    X = rng.standard_normal((n, 2)) @ L.T + np.asarray(shift)
    y = 1.5 + X @ np.array([0.7, -0.4]) + rng.standard_normal(n)
    return X, y


def reference(X, y, bounds):
    ref = bayesdp.fit_nonprivate(X, y, bounds=bounds, intercept=True, seed=0)
    mean, cov = bayesdp.inference.closed_form_moments(ref)
    return mean, np.sqrt(np.diag(cov))


def posterior_mean(idata):
    return idata.posterior["theta"].mean(("chain", "draw")).values


def fmt(v):
    return "[" + ", ".join(f"{x:8.4f}" for x in v) + "]"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nuts", action="store_true", help="also run normalx and nuts-normalx (minutes)")
    args = ap.parse_args()
    bounds = (12.0, 15.0)
    X, y = data()
    mean_ref, sd_ref = reference(X, y, bounds)
    print(f"non-private (intercept, x0, x1): mean {fmt(mean_ref)} sd {fmt(sd_ref)}")
    print("| eps | method | release | posterior mean | |mean - ref| / ref sd |")
    print("| --- | --- | --- | --- | --- |")
    for eps in (1.0, 10.0, 100.0, 1e4, 1e8):
        kw = dict(epsilon=eps, delta=1e-5, bounds=bounds, nodes=2, seed=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            rels = {"intercept": bayesdp.release(X, y, intercept=True, **kw),
                    "no intercept": bayesdp.release(X, y, **kw)}
            for name, rel in rels.items():
                for method in ("fast", "fixeds"):
                    m = posterior_mean(bayesdp.fit(rel, method=method, seed=2,
                                                   progress_bar=False))
                    ref_m, ref_s = (mean_ref, sd_ref) if name == "intercept" else \
                        (mean_ref[1:], sd_ref[1:])
                    z = np.abs(m - ref_m) / ref_s
                    print(f"| {eps:g} | {method} | {name} | {fmt(m)} | {fmt(z)} |")
    print()
    print("posterior sd of the slopes (fast, intercept release, eps = 10) against the features' "
          "mean; the non-private sd does not depend on it")
    print("| feature mean | fast sd (x0, x1) | non-private sd (x0, x1) |")
    print("| --- | --- | --- |")
    for shift in ((0.0, 0.0), (2.0, -1.2), (5.0, -3.0)):
        Xs, ys = data(shift=shift)
        rel = bayesdp.release(Xs, ys, epsilon=10.0, delta=1e-5, bounds=bounds, nodes=2, seed=1,
                              intercept=True)
        cov = bayesdp.inference.closed_form_moments(bayesdp.fit(rel, method="fast", seed=0))[1]
        _, s_ref = reference(Xs, ys, bounds)
        print(f"| {shift} | {fmt(np.sqrt(np.diag(cov))[1:])} | {fmt(s_ref[1:])} |")
    if args.nuts:
        Xn, yn = X[:600], y[:600]
        m_ref, s_ref = reference(Xn, yn, bounds)
        print(f"\n600 rows, non-private: mean {fmt(m_ref)} sd {fmt(s_ref)}")
        for eps in (10.0, 1e3):
            rel = bayesdp.release(Xn, yn, epsilon=eps, delta=1e-5, bounds=bounds, nodes=2,
                                  seed=1, intercept=True)
            for method in ("fixeds", "normalx", "nuts-normalx"):
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    idata = bayesdp.fit(rel, method=method, seed=2, num_samples=1000,
                                        num_warmup=1000, num_chains=2, progress_bar=False)
                a = bayesdp.diagnostics.attrs(idata)
                sd = idata.posterior["theta"].std(("chain", "draw")).values
                print(f"eps {eps:g} {method}: mean {fmt(posterior_mean(idata))} sd {fmt(sd)} "
                      f"max r_hat {a['max_r_hat']:.3f} min ESS {a['min_ess_bulk']:.0f} "
                      f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
