"""How narrow can any private 90% prediction interval be? A Bayes lower bound per cell.

Issue 34 asks the default fit's prediction intervals to cover the held-out y 0.85-0.95 of the
time at a mean width of at most 1.3 times the non-private posterior predictive's. This script
bounds, for every cell of ``calibration_realdata.py``'s grid, the smallest mean width that ANY
procedure computed from the release can reach at an average coverage of 0.85, over a family of
data sets that no release can tell from the real one better than its noise allows.

The family: the data set's rows X kept, y moved to y + X delta with delta ~ N(0, tau^2 I) (each
member's non-private coefficients move by delta; its residuals, so the non-private
predictive's width, are the data set's own). The oracle is given far more than any method has:
every holder's X_j^T X_j exactly, the data set itself (so it knows every member up to delta,
including the held-out y's residuals), and only has to learn delta from the holders' releases,
z_hat_j = X_j^T y_j + S_j delta + e_j with e_j ~ N(0, Sigma_zj) each holder's own noise. Its
posterior is delta | z_hat ~ N(m, V), V = (sum_j S_j Sigma_zj^-1 S_j + I / tau^2)^-1, the same
for every release, so the held-out y' = y + x^T delta has predictive N(y + x^T m, x^T V x). Of
all sets with average coverage c over the rows (and releases, and members), the one of least
mean width thresholds the predictive density at one level k for all rows (Neyman-Pearson):
half-width s sqrt(-2 log(k s sqrt(2 pi))) for a row of predictive sd s (0 when negative), k set
by bisection. That width bounds every method from below, on average over the family: a method
meeting the goal on the data set alone but not on its neighbours has tuned itself to it (as the
twin releases of ``twin_release.py`` show, the release cannot tell them apart). The holders'
rows are split as the grid's releases split them (seeds 100-119) and the bound is averaged over
those splits.

The column ``new rows`` treats the held-out y as new draws whose residual the oracle does not
know (the job a prediction interval does): predictive sd sqrt(sigma^2 + x^T V x) with sigma^2
the OLS residual variance. The releases carry y^T y too (``include_yty``, the default), and
Sigma_zj is that release's (its noise is larger than a release without y^T y at the same
budget). Each holder's yty_hat_j = y_j'^T y_j' + e = y_j^T y_j + 2 delta^T z_j + delta^T S_j delta
+ e; linearised (delta^T S_j delta dropped: an approximation, so that column is not a strict
bound), it adds 4 z_j z_j^T / sigma_yty_j^2 to V's precision: column ``new rows + yty``.

The sigma_y twin bounds what the release's ignorance of sigma_y costs, on the data set itself
(two points, as ``twin_release.py`` does for theta): y' = X theta_OLS + a r clipped to B_y (r
the OLS residuals), a data set whose residual sd sigma_a is about a times the data set's
sigma. Its releases differ from the data set's only in their means: each holder's z_hat_j by
X_j^T (y'_j - y_j) (X^T r = 0 over all rows, not per holder; and the clipped rows) and its
yty_hat_j by |y'_j|^2 - |y_j|^2. Gaussians with one covariance, so for a given split their total
variation is exactly TV = 2 Phi(D / 2) - 1, D the Mahalanobis length of the mean shift summed
over the holders; the release is a mixture over the random split, whose law does not depend on
y, so by convexity its TV is at most the average of these over the splits (here the grid's own
20 splits), which is used. A procedure whose intervals W cover the twin's new rows
(y = x^T theta + sigma_a e, e normal, as the non-private predictive assumes) on average c has
E_twin[2 Phi(W / (2 sigma_a)) - 1] >= c, so on the data set E[2 Phi(W / (2 sigma_a)) - 1] >= c
- TV and by Jensen (concave in W) E[W] >= 2 sigma_a Phi^-1((1 + c - TV) / 2). The column
``sigma_y twin`` is the largest such bound over a, over the non-private width, with the a and TV
that give it. It is exact for the default release.

Printed per data set, J and eps (tau = the sd of the coefficients' shifts, standardised data):
``np width``, the non-private predictive's mean 90% width (closed form, sigma^2 (1 + x^T S^-1
x)); for each tau, the least mean width at average coverage 0.85 over ``np width``
(``oracle``: residuals known; ``new rows``; ``new rows + yty``); the sigma_y twin's bound; and
which bounds exceed the goal's 1.3 (:func:`out_of_reach`: the twin, exact; or the first tau's
``new rows + yty``, on average over the data set's neighbours within tau).

    .venv/bin/python research/prediction_width_bound.py      # a minute and a half
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parent))
from calibration_realdata import SETS, load  # noqa: E402


def least_mean_width(sd, coverage=0.85):
    """The least mean width of sets covering N(centre_i, sd_i^2) on average ``coverage`` over
    the rows: the density thresholded at one level for all rows (module docstring)."""
    return float(np.mean(2 * least_half_widths(sd, coverage)))


def least_half_widths(sd, coverage=0.85):
    """The half-widths (one per row) of the sets of :func:`least_mean_width`: each row's
    N(centre_i, sd_i^2) density cut at one level for all rows, set by bisection."""
    sd = np.asarray(sd, dtype=float)

    def half(log_k):
        h2 = -2.0 * (log_k + np.log(sd * np.sqrt(2 * np.pi)))
        return sd * np.sqrt(np.maximum(h2, 0.0))

    def cover(log_k):
        return np.mean(2 * stats.norm.cdf(half(log_k) / sd) - 1)

    lo, hi = -np.log(sd.max() * np.sqrt(2 * np.pi)) - 50.0, -np.log(sd.min() * np.sqrt(2 * np.pi))
    for _ in range(200):  # coverage falls as the level rises
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if cover(mid) > coverage else (lo, mid)
    return half(lo)


def oracle_variances(S_j, Sigma_z, X_rows, tau, z_j=None, var_yty=None):
    """x^T V x for each row of ``X_rows``: the oracle's posterior variance of x^T delta,
    V = (sum_j S_j Sigma_zj^-1 S_j + I / tau^2 [+ sum_j 4 z_j z_j^T / var_yty_j])^-1, the
    bracket when y^T y is given (linearised, module docstring). ``S_j`` (J, d, d), ``Sigma_z``
    (J, d, d) the holders' z noise, ``z_j`` (J, d), ``var_yty`` (J,)."""
    d = S_j.shape[-1]
    P = np.eye(d) / tau ** 2 + np.einsum("jab,jbc->ac", S_j, np.linalg.solve(Sigma_z, S_j))
    if z_j is not None:
        P = P + 4.0 * np.einsum("ja,jb,j->ab", z_j, z_j, 1.0 / np.asarray(var_yty))
    u = np.linalg.solve(np.linalg.cholesky(P), X_rows.T)  # x^T V x = |L^-1 x|^2
    return (u * u).sum(0)


def twin_distance(X, y, twin, labels, Sigma_z, var_yty):
    """The Mahalanobis length D of the mean shift between the releases of (X, y) and (X, twin)
    whose rows are held by ``labels`` (0..J-1): each holder's z_hat moves by X_j^T (twin_j -
    y_j) and its yty_hat by |twin_j|^2 - |y_j|^2, its S_hat not at all; the holders' noises are
    independent, ``Sigma_z`` (J, d, d) and ``var_yty`` (J,)."""
    J, d = Sigma_z.shape[0], X.shape[1]
    w = twin - y
    u = np.stack([np.bincount(labels, X[:, k] * w, minlength=J) for k in range(d)], axis=1)
    dyy = np.bincount(labels, twin * twin - y * y, minlength=J)
    v = np.linalg.solve(np.linalg.cholesky(Sigma_z), u[:, :, None])[:, :, 0]
    return float(np.sqrt(np.sum(v * v) + np.sum(dyy ** 2 / var_yty)))


def sigma_twin_bound(X, y, theta, bounds, splits, Sigma_z, var_yty, np_width, coverage=0.85):
    """The two-point bound of the sigma_y twin (module docstring), the largest over a grid of
    a in [1, 30]; ``splits``, a list of holder labels per row: the TV is averaged over them (the
    split is part of the release's randomness, and the TV of the releases is at most that
    average). Returns (bound over ``np_width``, a, TV)."""
    best = (0.0, 1.0, 0.0)
    fit = X @ theta
    for a in np.exp(np.linspace(0.0, np.log(30.0), 300)):
        twin = np.clip(fit + a * (y - fit), -bounds[1], bounds[1])
        dist = np.array([twin_distance(X, y, twin, lab, Sigma_z, var_yty) for lab in splits])
        tv = float(np.mean(2 * stats.norm.cdf(dist / 2) - 1))
        if tv >= coverage:
            break
        w = 2 * np.std(twin - fit) * stats.norm.ppf((1 + coverage - tv) / 2) / np_width
        best = max(best, (float(w), float(a), tv))
    return best


def cell_bound(prepared, J, eps, taus, delta=1e-5, coverage=0.85, seeds=range(100, 120)):
    """(non-private mean 90% width, {tau: (oracle bound, new-rows bound, new-rows bound with
    the linearised y^T y)} over the non-private width, the sigma_y twin's (bound, a, TV)) for
    one data set, J and eps; over the holder splits of the grid's releases (``seeds``), each
    holder's statistics with its own noise (the default release, with y^T y)."""
    import bayesdp
    from bayesdp.releases import holders, layout

    X, y, X_test, _, bounds = prepared
    n, d = X.shape
    S, z = X.T @ X, X.T @ y
    theta = np.linalg.solve(S, z)
    resid = y - X @ theta
    s2 = float(resid @ resid / (n - d))
    np_sd = np.sqrt(s2 * (1 + np.einsum("ij,ij->i", X_test, np.linalg.solve(S, X_test.T).T)))
    np_width = float(np.mean(2 * stats.norm.ppf(0.95) * np_sd))
    rel = bayesdp.release(X, y, epsilon=eps, delta=delta, bounds=bounds, nodes=J, seed=0,
                          include_yty=True)
    blocks = layout.noise_blocks(rel)
    assert blocks.Sz is None  # z's noise independent of S's: the twin's S_hat moves nothing
    Sigma_z = blocks.zz
    var_yty = np.asarray(rel.sigma_yty, dtype=float) ** 2
    splits = [holders.node_labels(J, X, y, "random", seed)[0] for seed in seeds]
    sums = [(np.stack([X[lab == j].T @ X[lab == j] for j in range(J)]),
             np.stack([X[lab == j].T @ y[lab == j] for j in range(J)])) for lab in splits]
    out = {}
    for tau in taus:
        widths = []
        for S_j, z_j in sums:  # each split's holders' X_j^T X_j and X_j^T y_j
            xvx = oracle_variances(S_j, Sigma_z, X_test, tau)
            xvx_yty = oracle_variances(S_j, Sigma_z, X_test, tau, z_j, var_yty)
            widths.append([least_mean_width(np.sqrt(v), coverage) / np_width
                           for v in (xvx, s2 + xvx, s2 + xvx_yty)])
        out[tau] = tuple(np.mean(widths, axis=0))
    return np_width, out, sigma_twin_bound(X, y, theta, bounds, splits, Sigma_z, var_yty,
                                           np_width, coverage)


def out_of_reach(bounds, twin, tau, goal=1.3, margin=0.03):
    """Which bounds put the goal's width out of reach: "twin" (the sigma_y twin's bound, exact
    for the default release) and/or "tau" (the new-rows bound with y^T y linearised at
    ``tau``: on average over the data set's neighbours; it counts only above goal x (1 +
    ``margin``), the size of what the linearisation can move it), "" for neither."""
    why = [w for w, v in (("twin", twin[0]), (f"tau {tau:g}", bounds[tau][2] / (1 + margin)))
           if v > goal]
    return " + ".join(why)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    p.add_argument("--J", nargs="+", type=int, default=[1, 5, 10])
    p.add_argument("--eps", nargs="+", type=float, default=[1.0, 10.0])
    p.add_argument("--tau", nargs="+", type=float, default=[0.1, 0.3])
    a = p.parse_args(argv)
    head = ["data", "J", "eps", "np width"] \
        + [f"{c}, tau {t:g}" for t in a.tau for c in ("oracle", "new rows", "new rows + yty")] \
        + ["sigma_y twin (a, TV)", "1.3 out of reach by"]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head), flush=True)
    for name in a.sets:
        prepared = load(name)
        if prepared is None:
            print(f"{name}: data file not found, skipped")
            continue
        for J in a.J:
            for eps in a.eps:
                w, b, tw = cell_bound(prepared, J, eps, a.tau)
                cells = [f"{v:.2f}" for t in a.tau for v in b[t]] \
                    + [f"{tw[0]:.2f} ({tw[1]:.2g}, {tw[2]:.2f})", out_of_reach(b, tw, a.tau[0])]
                print(f"| {name} | {J} | {eps:g} | {w:.3f} | " + " | ".join(cells) + " |",
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
