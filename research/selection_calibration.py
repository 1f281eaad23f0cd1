"""Are the inclusion probabilities of ``bayesdp.select`` calibrated, and what do they find on
real data? The evidence of docs/evidence/selection.md.

Four parts (``--part``):

- ``reliability``: simulated data sets with known zero and non-zero coefficients. Each data
  set draws its truth from the selection's own prior (beta-binomial(1, 1) on the model size, a
  uniform subset of that size, r ~ LogUniform(0.1, 1), theta_gamma ~ N(0, 4 r^2 I),
  sigma_y^2 ~ InvGamma(20, 19)), its features from N(0, R) with R_ij = 0.6^|i-j| (correlated),
  n rows, public bounds the 99.5% quantiles of ||x|| and |y| under the generating law (rows
  clipped to them), and is released with eps and J holders (delta = 1e-5, y^T y released).
  ``select`` with the same priors (theta_gamma ~ N(0, 4 r^2 I), r >= 0.1: coefficients large
  enough for the noise on S to matter) gives each feature's inclusion probability; among features
  given probability about p, the share truly non-zero should be about p. Printed per (eps, J)
  and method: the reliability table (bins of width 0.1), the expected calibration error
  ``ece`` (sum over bins of share x |mean p - share non-zero|), the Brier score, the log
  loss and the share of confident calls (p < 0.1 or p >= 0.9) that are wrong. The negative
  control ``ignore-s-noise`` selects from the same release read as if S had no noise
  (sigma_s = 0).
- ``agreement``: the same kind of data sets (J = 1), each released at eps from 0.3 to 100 and
  without noise (the exact statistics, sigma = 0: the non-private selection with the same
  priors); the mean and largest |private - non-private| inclusion probability per eps.
- ``plugin``: the plug-in through which each model's S noise is pushed, eiv's full-model one
  restricted to the model (the default) against each model's own fixed point: the mean and
  largest difference of the inclusion probabilities, J = 5, eps = 1 and 10.
- ``uci``: the paper's three UCI data sets, prepared as research/calibration_realdata.py's
  ``load`` does (standardised, public bounds the 99.5% quantiles, clipped, 10% held out);
  the non-private inclusion probabilities (the exact statistics, the same default priors)
  beside the private ones (mean and sd over ``--releases`` releases) at eps in {1, 10},
  J in {1, 5}; and the held-out root mean square error of the model-averaged posterior mean,
  of the full model's (``fit``, eiv) and of adaSSP (same eps, J; its own noise).

Run from the project root (the UCI data from ../shared/data/uci or $BAYESDP_DATA_DIR; skipped
when absent):

    .venv/bin/python research/selection_calibration.py --part reliability --datasets 100 --n 5000
    .venv/bin/python research/selection_calibration.py --part reliability --datasets 100 --n 5000 \
        --J 5 --eps 1 --plugin per-model
    .venv/bin/python research/selection_calibration.py --part agreement --datasets 20 --n 5000
    .venv/bin/python research/selection_calibration.py --part plugin --datasets 20 --n 5000
    .venv/bin/python research/selection_calibration.py --part uci --releases 3
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import sys
import time
import warnings
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
RHO = 0.6  # correlation of neighbouring features
PRIOR_SD = 2.0  # theta_gamma ~ N(0, (PRIOR_SD r)^2 I)
SCALE_MIN = 0.1  # the smallest prior scale r (eiv's scale_min)
SIGMA_PRIOR = (20.0, 19.0)  # sigma_y^2 ~ InvGamma(a, b): mean 1
BINS = np.linspace(0.0, 1.0, 11)
#: column names of the UCI files (their README); the last column, y, is left out
UCI_NAMES = {
    "powerplant": ["AT", "V", "AP", "RH"],
    "airquality": ["CO(GT)", "PT08.S1", "NMHC(GT)", "C6H6(GT)", "PT08.S2", "NOx(GT)",
                   "PT08.S3", "NO2(GT)", "PT08.S4", "PT08.S5", "T", "RH"],
    "bikesharing": ["season", "yr", "mnth", "hr", "holiday", "weekday", "workingday",
                    "weathersit", "temp", "atemp", "hum", "windspeed", "casual", "registered"],
}


def _priors(d):
    import bayesdp

    return bayesdp.Priors(a=SIGMA_PRIOR[0], b=SIGMA_PRIOR[1], C=PRIOR_SD ** 2 * np.eye(d),
                          m=np.zeros(d))


def simulate(rng, d, n):
    """One data set with its truth drawn from the selection's prior (module docstring):
    (X, y, theta, bounds)."""
    from scipy import stats

    corr = RHO ** np.abs(np.subtract.outer(np.arange(d), np.arange(d)))
    chol = np.linalg.cholesky(corr)
    k = rng.integers(d + 1)  # beta-binomial(1, 1): every size equally likely
    theta = np.zeros(d)
    r = np.exp(rng.uniform(np.log(SCALE_MIN), 0.0))
    theta[rng.choice(d, size=k, replace=False)] = PRIOR_SD * r * rng.standard_normal(k)
    sigma2 = float(stats.invgamma.rvs(SIGMA_PRIOR[0], scale=SIGMA_PRIOR[1], random_state=rng))
    # public bounds: quantiles under the generating law (a fixed seed, not these rows)
    law = np.random.default_rng(12345).standard_normal((100_000, d)) @ chol.T
    bx = float(np.quantile(np.linalg.norm(law, axis=1), 0.995))
    by = float(np.quantile(np.abs(law @ theta + np.sqrt(sigma2) * np.random.default_rng(
        54321).standard_normal(100_000)), 0.995))
    X = rng.standard_normal((n, d)) @ chol.T
    y = X @ theta + np.sqrt(sigma2) * rng.standard_normal(n)
    return X, y, theta, (bx, by)


def _release(X, y, bounds, eps, J, seed):
    import bayesdp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return bayesdp.release(X, y, epsilon=eps, delta=1e-5, bounds=bounds, nodes=J,
                               seed=seed, include_yty=True)


def exact_release(X, y, bounds, names=None):
    """The statistics themselves, declared noiseless (sigma = 0): the non-private selection
    reads them with the same likelihood and priors."""
    import bayesdp
    from bayesdp.privacy import clip_rows

    X, y, _ = clip_rows(X, y, *bounds)
    return bayesdp.Release(S_hat=(X.T @ X)[None], z_hat=(X.T @ y)[None], n=[len(y)],
                           sigma_s=0.0, sigma_z=0.0, bounds=bounds,
                           yty_hat=[float(y @ y)], sigma_yty=0.0,
                           **({"feature_names": tuple(names)} if names else {}))


def inclusion(rel, priors=None, seed=0, plugin="restricted"):
    """``select``'s inclusion probabilities (few draws: only the probabilities are used)."""
    import bayesdp

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        sel = bayesdp.select(rel, priors=priors, seed=seed, num_samples=10, num_chains=1,
                             plugin=plugin, scale_min=SCALE_MIN if priors is not None else None)
    return sel.inclusion.to_numpy()


def ignoring_s_noise(rel):
    """The negative control's release: the same statistics, read as if S had no noise."""
    return dataclasses.replace(rel, sigma_s=np.zeros(rel.J))


def reliability(p, truth):
    """Reliability table rows (bin, count, mean p, share non-zero), ece, Brier, log loss."""
    p, truth = np.asarray(p, float).ravel(), np.asarray(truth, float).ravel()
    at = np.clip(np.digitize(p, BINS) - 1, 0, len(BINS) - 2)
    rows, ece = [], 0.0
    for b in range(len(BINS) - 1):
        m = at == b
        if m.any():
            rows.append((f"[{BINS[b]:.1f}, {BINS[b + 1]:.1f}{']' if b == 9 else ')'}",
                         int(m.sum()), float(p[m].mean()), float(truth[m].mean())))
            ece += m.mean() * abs(p[m].mean() - truth[m].mean())
    q = np.clip(p, 1e-6, 1 - 1e-6)
    confident = (p < 0.1) | (p >= 0.9)
    wrong = confident & ((p >= 0.9) != (truth > 0))
    return {"table": rows, "ece": float(ece), "brier": float(np.mean((p - truth) ** 2)),
            "confident": int(confident.sum()),
            "confident_wrong": float(wrong.sum() / max(confident.sum(), 1)),
            "log_loss": float(-np.mean(truth * np.log(q) + (1 - truth) * np.log(1 - q))),
            "n": int(p.size)}


def reliability_cell(J, eps, datasets, d=6, n=5000, seed=0, plugin="restricted"):
    """The reliability of eiv's selection and of the negative control on ``datasets`` data
    sets: {"eiv": ..., "ignore-s-noise": ...} (:func:`reliability`); ``plugin`` is
    ``select``'s."""
    rng = np.random.default_rng(seed)
    pri = _priors(d)
    got = {"eiv": [], "ignore-s-noise": []}
    truth = []
    for i in range(datasets):
        X, y, theta, bounds = simulate(rng, d, n)
        rel = _release(X, y, bounds, eps, J, seed=10_000 + i)
        got["eiv"].append(inclusion(rel, pri, plugin=plugin))
        got["ignore-s-noise"].append(inclusion(ignoring_s_noise(rel), pri, plugin=plugin))
        truth.append(theta != 0)
    return {k: reliability(v, truth) for k, v in got.items()}


def part_reliability(args):
    for J in args.J:
        for eps in args.eps:
            t = time.time()
            rows = reliability_cell(J, eps, args.datasets, d=args.d, n=args.n, seed=args.seed,
                                    plugin=args.plugin)
            print(f"\n### J = {J}, eps = {eps:g} ({args.datasets} data sets, d = {args.d}, "
                  f"n = {args.n}, plugin {args.plugin}; {time.time() - t:.0f} s)\n")
            for name, r in rows.items():
                print(f"{name}: ece {r['ece']:.3f}, Brier {r['brier']:.3f}, log loss "
                      f"{r['log_loss']:.3f}; wrong among the {r['confident']} confident calls "
                      f"(p < 0.1 or p >= 0.9): {r['confident_wrong']:.3f} ({r['n']} features)\n")
                print("| p bin | features | mean p | share non-zero |\n| --- | --- | --- | --- |")
                for b, c, mp, share in r["table"]:
                    print(f"| {b} | {c} | {mp:.3f} | {share:.3f} |")
                print()
            sys.stdout.flush()


def part_agreement(args):
    epsilons = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
    rng = np.random.default_rng(args.seed)
    pri = _priors(args.d)
    diffs = {e: [] for e in epsilons}
    for i in range(args.datasets):
        X, y, theta, bounds = simulate(rng, args.d, args.n)
        ref = inclusion(exact_release(X, y, bounds), pri)
        for e in epsilons:
            diffs[e].append(np.abs(inclusion(_release(X, y, bounds, e, 1, 20_000 + i), pri)
                                   - ref))
    print(f"\n{args.datasets} data sets, d = {args.d}, n = {args.n}, J = 1\n")
    print("| eps | mean abs difference | 90% quantile | largest |\n| --- | --- | --- | --- |")
    for e in epsilons:
        v = np.concatenate(diffs[e])
        print(f"| {e:g} | {v.mean():.3f} | {np.quantile(v, 0.9):.3f} | {v.max():.3f} |")


def part_plugin(args):
    rng = np.random.default_rng(args.seed)
    pri = _priors(args.d)
    print(f"\n{args.datasets} data sets, d = {args.d}, n = {args.n}, J = 5\n")
    print("| eps | mean abs difference | largest |\n| --- | --- | --- |")
    for eps in (1.0, 10.0):
        v = []
        for i in range(args.datasets):
            X, y, theta, bounds = simulate(rng, args.d, args.n)
            rel = _release(X, y, bounds, eps, 5, 30_000 + i)
            v.append(np.abs(inclusion(rel, pri) - inclusion(rel, pri, plugin="per-model")))
        v = np.concatenate(v)
        print(f"| {eps:g} | {v.mean():.4f} | {v.max():.4f} |")


def _calibration_realdata():
    spec = importlib.util.spec_from_file_location("calibration_realdata",
                                                  HERE / "calibration_realdata.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def part_uci(args):
    import bayesdp

    bench = _calibration_realdata()
    for name in args.sets:
        prepared = bench.load(name)
        if prepared is None:
            print(f"\n{name}: not found (../shared/data/uci or $BAYESDP_DATA_DIR); skipped")
            continue
        X, y, X_test, y_test, bounds = prepared
        names = UCI_NAMES[name]
        t = time.time()
        ref = inclusion(exact_release(X, y, bounds, names))
        cols, errors = {}, []
        for J in args.J:
            for eps in args.eps:
                got, err = [], {"select": [], "fit (eiv)": [], "adaSSP": []}
                for r in range(args.releases):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", UserWarning)
                        rel = bayesdp.release(X, y, epsilon=eps, delta=1e-5, bounds=bounds,
                                              nodes=J, seed=100 + r, include_yty=True,
                                              feature_names=names)
                        sel = bayesdp.select(rel, seed=r, num_samples=250)
                        full = bayesdp.fit(rel, seed=r, num_samples=250)
                        ada = bayesdp.adassp(X, y, epsilon=eps, delta=1e-5, bounds=bounds,
                                             nodes=J, seed=200 + r)
                    got.append(sel.inclusion.to_numpy())
                    for key, th in (("select", _mean_theta(sel.idata)),
                                    ("fit (eiv)", _mean_theta(full)), ("adaSSP", ada)):
                        err[key].append(np.sqrt(np.mean((X_test @ th - y_test) ** 2)))
                got = np.array(got)
                cols[(J, eps)] = (got.mean(0), got.std(0))
                errors.append((J, eps, {k: np.mean(v) for k, v in err.items()}))
        ls = bayesdp.fit_nonprivate(X, y, bounds=bounds, seed=0, num_samples=250)
        rmse_np = np.sqrt(np.mean((X_test @ _mean_theta(ls) - y_test) ** 2))
        print(f"\n### {name} (d = {X.shape[1]}, n = {len(y)} training rows, "
              f"{len(y_test)} held out; {args.releases} releases per cell; "
              f"{time.time() - t:.0f} s)\n")
        head = " | ".join(f"J={J}, eps={e:g}" for (J, e) in cols)
        print(f"| feature | non-private | {head} |")
        print("| --- | --- | " + " | ".join("---" for _ in cols) + " |")
        for j, fname in enumerate(names):
            cells = " | ".join(f"{m[j]:.2f} ({s[j]:.2f})" for m, s in cols.values())
            print(f"| {fname} | {ref[j]:.2f} | {cells} |")
        print(f"\nheld-out RMSE of the posterior mean (non-private posterior: {rmse_np:.4f})\n")
        print("| J | eps | select (model-averaged) | fit (eiv, full model) | adaSSP |")
        print("| --- | --- | --- | --- | --- |")
        for J, eps, e in errors:
            print(f"| {J} | {eps:g} | {e['select']:.4f} | {e['fit (eiv)']:.4f} | "
                  f"{e['adaSSP']:.4f} |")
        sys.stdout.flush()


def _mean_theta(idata):
    th = np.asarray(idata.posterior["theta"])
    return th.reshape(-1, th.shape[-1]).mean(0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", required=True, choices=["reliability", "agreement", "plugin",
                                                       "uci"])
    ap.add_argument("--datasets", type=int, default=100, help="simulated data sets per cell")
    ap.add_argument("--d", type=int, default=6, help="features of the simulated data")
    ap.add_argument("--n", type=int, default=5000, help="rows of the simulated data")
    ap.add_argument("--eps", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--J", type=int, nargs="+", default=[1, 5])
    ap.add_argument("--releases", type=int, default=3, help="releases per UCI cell")
    ap.add_argument("--sets", nargs="+", default=["powerplant", "airquality", "bikesharing"])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--plugin", default="restricted", choices=["restricted", "per-model"],
                    help="select's plug-in (reliability part)")
    args = ap.parse_args(argv)
    {"reliability": part_reliability, "agreement": part_agreement, "plugin": part_plugin,
     "uci": part_uci}[args.part](args)


if __name__ == "__main__":
    main()
