"""How well the fixedS methods' check of the noise on S predicts the coverage of their intervals
(``closed_form.s_noise_coverage``, ``fit``'s CalibrationWarning; numbers quoted in
docs/methods.md, "Does the noise on S matter?").

    PYTHONPATH=. python benchmarks/s_noise_check.py fixed-data --method fast --reps 200 \
        --eps 1000 100 10 1
    PYTHONPATH=. python benchmarks/s_noise_check.py fixed-data --method fixeds --reps 40 --eps 100 1
    PYTHONPATH=. python benchmarks/s_noise_check.py demo --method fast --seeds 20
    PYTHONPATH=. python benchmarks/s_noise_check.py demo --method fixeds --seeds 10
    BAYESDP_DATA_DIR=../shared/data/uci PYTHONPATH=. python benchmarks/s_noise_check.py uci

- ``fixed-data``: one data set, ``bayesdp.simulate(100_000, 5, seed=1000)``, released ``--reps``
  times (J = 1, delta = 1e-5, release seeds 0, 1, ...) at each ``--eps``: the observed coverage
  of the 90% intervals per coefficient (frequentist: the data fixed, the noise redrawn) against
  the mean predicted coverage (attrs ``s_noise_coverage``).
- ``demo``: the demo setting, a new data set per seed (``simulate(100_000, 5, seed=1000 + s)``,
  J = 5, eps = 1, release seed 2000 + s, as benchmarks/prior_coverage.py): observed coverage
  over seeds x coefficients against the mean prediction, and how many fits warned.
- ``uci``: the three UCI data sets at eps 1 and 10, J 1, 5, 10 (release seed J): the predicted
  coverage (smallest and mean over coefficients) and whether the fit warned; for orientation
  also the fraction of the full-data least-squares coefficients inside the 90% intervals.

Default priors, default fit settings (fixeds: 4 chains x 1000 + 1000).
"""

import argparse
import warnings

import numpy as np

import bayesdp


def fit_one(rel, method, seed):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = bayesdp.fit(rel, method=method, seed=seed, progress_bar=False)
    warned = any(issubclass(w.category, bayesdp.CalibrationWarning) for w in caught)
    lo, hi = np.quantile(bayesdp.diagnostics.posterior_array(idata, "theta"), [0.05, 0.95],
                         axis=0)
    return lo, hi, np.asarray(idata.posterior.attrs["s_noise_coverage"]), warned


def fixed_data(args):
    sim = bayesdp.simulate(100_000, 5, seed=1000)
    for eps in args.eps:
        hits, pred, warned = [], [], 0
        for r in range(args.reps):
            rel = bayesdp.release(sim.X, sim.y, epsilon=eps, delta=1e-5, bounds=sim.bounds,
                                  nodes=1, seed=r)
            lo, hi, cov, w = fit_one(rel, args.method, r)
            hits.append((lo <= sim.theta) & (sim.theta <= hi))
            pred.append(cov)
            warned += w
        print(f"{args.method} eps={eps:g}: observed {np.round(np.mean(hits, 0), 2)}, "
              f"predicted {np.round(np.mean(pred, 0), 2)}, warned {warned} of {args.reps}",
              flush=True)


def demo(args):
    hits, pred, warned = [], [], 0
    for s in range(args.seeds):
        sim = bayesdp.simulate(100_000, 5, seed=1000 + s)
        rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=5,
                              seed=2000 + s)
        lo, hi, cov, w = fit_one(rel, args.method, s)
        hits.append(((lo <= sim.theta) & (sim.theta <= hi)).mean())
        pred.append(cov.mean())
        warned += w
        print(f"seed {s}: observed {hits[-1]:.2f}, predicted {pred[-1]:.2f}, warned {w}",
              flush=True)
    print(f"{args.method}, {args.seeds} seeds: observed {np.mean(hits):.2f}, predicted "
          f"{np.mean(pred):.2f}, warned {warned} of {args.seeds}")


def uci(args):
    for name in ("powerplant", "airquality", "bikesharing"):
        data = bayesdp.load_dataset(name)
        for eps in (1.0, 10.0):
            for J in (1, 5, 10):
                rel = bayesdp.release(data.X_train, data.y_train, epsilon=eps, delta=1e-5,
                                      bounds=data.bounds, nodes=J, seed=J)
                lo, hi, cov, w = fit_one(rel, args.method, 0)
                ols = ((lo <= data.theta_ols) & (data.theta_ols <= hi)).mean()
                print(f"{name} eps={eps:g} J={J}: predicted min {cov.min():.2f} mean "
                      f"{cov.mean():.2f}, warned {w}; least squares inside {ols:.2f}",
                      flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("fixed-data", "demo", "uci"))
    ap.add_argument("--method", default="fast", choices=("fast", "fixeds"))
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--eps", type=float, nargs="+", default=[1000.0, 100.0, 10.0, 1.0])
    ap.add_argument("--seeds", type=int, default=20)
    args = ap.parse_args()
    {"fixed-data": fixed_data, "demo": demo, "uci": uci}[args.mode](args)


if __name__ == "__main__":
    main()
