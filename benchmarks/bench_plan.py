"""Does the plan hold? Planned sd, prior share and RMSE against the values realised on real releases.

For each data set (the paper's simulation and the three UCI sets, read from ../shared/data/uci
when present; their "sound" preprocessing and bounds, public by assumption as in the paper's
reproduction), a random pilot of ``--pilot`` of the rows (2%) is set aside as the public pilot
and the other rows are the holders' data. Per cell (J, eps), at delta = 1e-5:

    planned    bayesdp.plan(pilot rows, n = the holders' rows, J, eps) with its defaults
    realised   --releases (100) releases of the holders' rows (bayesdp.release, seeds 0..R-1), each
               fitted by bayesdp.fit (method "eiv", defaults): the mean over releases of each
               coefficient's posterior sd and prior share; the RMSE of the posterior mean and of
               adaSSP's estimate (bayesdp.adassp, same eps, delta, J) against the non-private
               least-squares fit of the holders' rows (as the plan measures them)

and printed: the range over coefficients of planned sd / realised mean sd (the issue's target:
within a factor 1.33 for every coefficient) and whether every realised mean lies in the planned
10%-90% range of one release's sd, the largest |planned - realised| prior share, the range of
planned / realised RMSE, the ratio of eiv's RMSE to adaSSP's (planned, realised), and the time
of the plan against the time of the realised fits measured in the same run. A cell that misses
is planned again with the holders' own rows as the pilot (a control: what is left is the
plan's model, not the pilot's error).

    python benchmarks/bench_plan.py                              # all data sets, J 1 5 10, eps 0.5 1 10
    python benchmarks/bench_plan.py --datasets simulation --J 5 --eps 1
    python benchmarks/bench_plan.py --csv plan.csv               # also write one row per coefficient
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np

TOL = 1.33
UCI = ("powerplant", "bikesharing", "airquality")


def data_sets(names):
    """(name, X, y, bounds, feature names) of each data set that is present."""
    import bayesdp
    from bayesdp.paper.datasets import load_dataset

    uci = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "uci"
    for name in names:
        if name == "simulation":
            sim = bayesdp.simulate(n=100_000, d=5, seed=11)
            yield name, sim.X, sim.y, sim.bounds
            continue
        try:
            ds = load_dataset(name, data_dir=uci, preprocessing="sound")
        except Exception as exc:  # noqa: BLE001 - a missing data set is skipped, with its reason
            print(f"{name}: skipped ({exc})")
            continue
        yield name, ds.X_train, ds.y_train, ds.bounds


def realised(X, y, bounds, J, eps, delta, releases):
    """Mean posterior sd and prior share per coefficient over ``releases`` releases fitted by
    ``fit``; the RMSE of the posterior mean and of adaSSP against least squares."""
    import bayesdp
    from bayesdp import diagnostics

    ols = np.linalg.lstsq(X, y, rcond=None)[0]
    sd, share, err, err_ada = [], [], [], []
    for r in range(releases):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rel = bayesdp.release(X, y, epsilon=eps, delta=delta, bounds=bounds, nodes=J,
                                  seed=r)
            idata = bayesdp.fit(rel, seed=r)
            ada = bayesdp.adassp(X, y, epsilon=eps, delta=delta, bounds=bounds, nodes=J,
                                 seed=1000 + r)
        draws = diagnostics.posterior_array(idata, "theta")
        sd.append(draws.std(axis=0, ddof=1))
        share.append(np.asarray(diagnostics.attrs(idata)["prior_share"], dtype=float))
        err.append(draws.mean(axis=0) - ols)
        err_ada.append(ada - ols)
    rms = lambda e: np.sqrt((np.asarray(e) ** 2).mean(axis=0))  # noqa: E731
    return (np.mean(sd, axis=0), np.mean(share, axis=0), rms(err), rms(err_ada))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", nargs="+", default=["simulation", *UCI])
    ap.add_argument("--J", type=int, nargs="+", default=[1, 5, 10])
    ap.add_argument("--eps", type=float, nargs="+", default=[0.5, 1.0, 10.0])
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--pilot", type=float, default=0.02, help="share of the rows in the pilot")
    ap.add_argument("--releases", type=int, default=100, help="realised releases per cell")
    ap.add_argument("--plan-releases", type=int, default=None,
                    help="simulated releases per plan (default: plan's)")
    ap.add_argument("--csv", default=None, help="also write one row per coefficient and cell")
    a = ap.parse_args(argv)

    import bayesdp

    rows, failed, cells = [], [], 0
    t_plan_all = t_real_all = 0.0
    for name, X, y, bounds in data_sets(a.datasets):
        rng = np.random.default_rng(7)
        perm = rng.permutation(len(y))
        m = max(int(round(a.pilot * len(y))), 2 * X.shape[1] + 2)
        pilot, rest = perm[:m], perm[m:]
        Xp, yp, Xr, yr = X[pilot], y[pilot], X[rest], y[rest]
        print(f"{name}: d={X.shape[1]}, pilot {m} rows, holders' rows {len(rest)}, "
              f"bounds ({bounds[0]:.3g}, {bounds[1]:.3g})")
        for J in a.J:
            for eps in a.eps:
                t0 = time.perf_counter()
                table = bayesdp.plan(Xp, yp, n=len(rest), bounds=bounds, nodes=J,
                                     epsilon=eps, delta=a.delta,
                                     **({} if a.plan_releases is None
                                        else {"releases": a.plan_releases}))
                t1 = time.perf_counter()
                sd_r, share_r, rmse_r, rmse_ada_r = realised(Xr, yr, bounds, J, eps, a.delta,
                                                             a.releases)
                t2 = time.perf_counter()
                t_plan_all, t_real_all = t_plan_all + t1 - t0, t_real_all + t2 - t1
                ratio = table["sd"].to_numpy() / sd_r
                inside = bool(np.all((table["sd 10%"].to_numpy() <= sd_r)
                                     & (sd_r <= table["sd 90%"].to_numpy())))
                d_share = np.abs(table["prior share"].to_numpy() - share_r)
                r_rmse = table["rmse"].to_numpy() / rmse_r
                ok = bool(np.all((ratio <= TOL) & (ratio >= 1 / TOL)))
                cells += 1
                control = ""
                if not ok:
                    bad = [f for f, r in zip(table.index.get_level_values("feature"), ratio)
                           if not 1 / TOL <= r <= TOL]
                    # the control: the holders' own rows as the pilot, which separates the
                    # pilot's error from the plan's model
                    own = bayesdp.plan(Xr, yr, n=len(rest), bounds=bounds, nodes=J,
                                       epsilon=eps, delta=a.delta)["sd"].to_numpy() / sd_r
                    control = f"; with the holders' rows as the pilot {own.min():.2f}-{own.max():.2f}"
                    failed.append(f"{name} J={J} eps={eps:g}: {', '.join(bad)}{control}")
                print(f"  J={J:<3d} eps={eps:<5g} {'ok  ' if ok else 'MISS'} planned/realised sd "
                      f"{ratio.min():.2f}-{ratio.max():.2f} (in 10-90% range: {'yes' if inside else 'NO'})  |prior share diff| <= "
                      f"{d_share.max():.2f}  rmse ratio {r_rmse.min():.2f}-{r_rmse.max():.2f}  "
                      f"(rmse eiv/adassp planned {np.mean(table['rmse'] / table['rmse adassp']):.2f}"
                      f", realised {np.mean(rmse_r / rmse_ada_r):.2f})  plan {t1 - t0:.1f} s, "
                      f"fits {t2 - t1:.1f} s")
                for k, f in enumerate(table.index.get_level_values("feature")):
                    rows.append({"dataset": name, "J": J, "eps": eps, "feature": f,
                                 "sd_planned": table["sd"].iloc[k], "sd_realised": sd_r[k],
                                 "share_planned": table["prior share"].iloc[k],
                                 "share_realised": share_r[k],
                                 "rmse_planned": table["rmse"].iloc[k], "rmse_realised": rmse_r[k],
                                 "rmse_adassp_planned": table["rmse adassp"].iloc[k],
                                 "rmse_adassp_realised": rmse_ada_r[k]})
    print(f"{cells - len(failed)} of {cells} cells have planned sd within a factor {TOL} of the "
          f"realised mean sd for every coefficient; plan {t_plan_all:.0f} s against the realised "
          f"fits' {t_real_all:.0f} s (x{t_plan_all / max(t_real_all, 1e-9):.2f})")
    for f in failed:
        print("  not within:", f)
    if a.csv:
        import pandas as pd

        pd.DataFrame(rows).to_csv(a.csv, index=False)
        print(f"wrote {a.csv}")


if __name__ == "__main__":
    main()
