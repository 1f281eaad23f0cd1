"""How narrow can any private 90% prediction interval be? A Bayes lower bound per cell.

Issue 34 asks the default fit's prediction intervals to cover the held-out y 0.85-0.95 of the
time at a mean width of at most 1.3 times the non-private posterior predictive's. This script
bounds, for every cell of ``calibration_realdata.py``'s grid, the smallest mean width that ANY
procedure computed from the release can reach at an average coverage of 0.85, over a family of
data sets that no release can tell from the real one better than its noise allows.

The family: the data set's rows X kept, y moved to y + X delta with delta ~ N(0, tau^2 I) (each
member's non-private coefficients move by delta; its residuals, so the non-private
predictive's width, are the data set's own). The oracle is given far more than any method has:
X^T X exactly, the data set itself (so it knows every member up to delta, including the held-out
y's residuals), and only has to learn delta from the release, z_hat = X^T y + S delta + e_z with
e_z ~ N(0, Sigma_z) the release's pooled noise. Its posterior is delta | z_hat ~ N(m, V),
V = (S Sigma_z^-1 S + I / tau^2)^-1, the same for every release, so the held-out y' = y + x^T
delta has predictive N(y + x^T m, x^T V x). Of all sets with average coverage c over the rows
(and releases, and members), the one of least mean width thresholds the predictive density at
one level k for all rows (Neyman-Pearson): half-width s sqrt(-2 log(k s sqrt(2 pi))) for a row
of predictive sd s (0 when negative), k set by bisection. That width bounds every method from
below, on average over the family; a method meeting the goal on the data set alone but not on
its neighbours has tuned itself to it (as the twin releases of ``twin_release.py`` show, the
release cannot tell them apart).

A second column, ``new rows``, treats the held-out y as new draws whose residual the oracle
does not know (the job a prediction interval does): predictive sd sqrt(sigma^2 + x^T V x) with
sigma^2 the OLS residual variance. Releases with y^T y (``include_yty``, the default) add
yty_hat = y'^T y' + e = y^T y + 2 delta^T X^T y + delta^T S delta + e; linearised (the term
delta^T S delta dropped, an approximation), it adds (2 z)(2 z)^T / sigma_yty^2 to V's precision
and lowers the bound by the share printed at the end.

The sigma_y twin bounds what the release's ignorance of sigma_y costs, on the data set itself
(two points, as ``twin_release.py`` does for theta): y' = X theta_OLS + a r clipped to B_y (r
the OLS residuals), a data set whose residual sd sigma_a is about a times the data set's
sigma. X^T r = 0, so the two releases differ in y^T y and, through the clipped rows, a little
in z_hat: Gaussians with one covariance, so their total variation is exactly
TV = 2 Phi(D / 2) - 1, D the Mahalanobis length of the mean shift. A procedure whose intervals
W cover the twin's new rows (y = x^T theta + sigma_a e, e normal, as the non-private
predictive assumes) on average c has E_twin[2 Phi(W / (2 sigma_a)) - 1] >= c, so on the data
set E[2 Phi(W / (2 sigma_a)) - 1] >= c - TV and by Jensen (concave in W)
E[W] >= 2 sigma_a Phi^-1((1 + c - TV) / 2). The column ``sigma_y twin`` is the largest such
bound over a, over the non-private width, with the a and TV that give it.

Printed per data set, J and eps (tau = the sd of the coefficients' shifts, standardised data):
``np width``, the non-private predictive's mean 90% width (closed form, sigma^2 (1 + x^T S^-1
x)); for each tau, the least mean width at average coverage 0.85 over ``np width``
(``oracle``: the strict bound; ``new rows``: residuals unknown); the sigma_y twin's bound. A
value above 1.3 says no method can meet the goal there: on average over the data set's
neighbours (tau), or on the data set and its twin (sigma_y).

    .venv/bin/python research/prediction_width_bound.py      # seconds
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


def sigma_twin_bound(X, y, theta, bounds, Sigma_z, var_yty, np_width, coverage=0.85):
    """The two-point bound of the sigma_y twin (module docstring), the largest over a grid of
    a in [1, 30]. Returns (bound over ``np_width``, a, TV)."""
    best = (0.0, 1.0, 0.0)
    fit, z, yty = X @ theta, X.T @ y, y @ y
    Lz = np.linalg.cholesky(Sigma_z)
    for a in np.exp(np.linspace(0.0, np.log(30.0), 300)):
        twin = np.clip(fit + a * (y - fit), -bounds[1], bounds[1])
        u = np.linalg.solve(Lz, X.T @ twin - z)
        dist = np.sqrt(u @ u + (twin @ twin - yty) ** 2 / var_yty)  # Mahalanobis, mean shift
        tv = 2 * stats.norm.cdf(dist / 2) - 1
        if tv >= coverage:
            break
        w = 2 * np.std(twin - fit) * stats.norm.ppf((1 + coverage - tv) / 2) / np_width
        best = max(best, (float(w), float(a), float(tv)))
    return best


def cell_bound(prepared, J, eps, taus, delta=1e-5, coverage=0.85):
    """(non-private mean 90% width, {tau: (oracle bound, new-rows bound, oracle bound with the
    linearised y^T y)} over the non-private width, the sigma_y twin's (bound, a, TV)) for one
    data set, J and eps."""
    import bayesdp
    from bayesdp.releases import layout

    X, y, X_test, _, bounds = prepared
    n, d = X.shape
    S, z = X.T @ X, X.T @ y
    resid = y - X @ np.linalg.solve(S, z)
    s2 = float(resid @ resid / (n - d))
    np_sd = np.sqrt(s2 * (1 + np.einsum("ij,ij->i", X_test, np.linalg.solve(S, X_test.T).T)))
    np_width = float(np.mean(2 * stats.norm.ppf(0.95) * np_sd))
    rel = bayesdp.release(X, y, epsilon=eps, delta=delta, bounds=bounds, nodes=J, seed=0,
                          include_yty=True)
    Sigma_z = layout.noise_blocks(rel).zz.sum(axis=0)
    var_yty = float((rel.sigma_yty ** 2).sum())
    info = S @ np.linalg.solve(Sigma_z, S)
    out = {}
    for tau in taus:
        xvx = []
        for extra in (0.0, 4.0 / var_yty):
            L = np.linalg.cholesky(info + np.eye(d) / tau ** 2 + extra * np.outer(z, z))
            u = np.linalg.solve(L, X_test.T)  # x^T V x = |L^-1 x|^2
            xvx.append((u * u).sum(0))
        out[tau] = tuple(least_mean_width(np.sqrt(v), coverage) / np_width
                         for v in (xvx[0], s2 + xvx[0], xvx[1]))
    theta = np.linalg.solve(S, z)
    return np_width, out, sigma_twin_bound(X, y, theta, bounds, Sigma_z, var_yty, np_width,
                                           coverage)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    p.add_argument("--J", nargs="+", type=int, default=[1, 5, 10])
    p.add_argument("--eps", nargs="+", type=float, default=[1.0, 10.0])
    p.add_argument("--tau", nargs="+", type=float, default=[0.05, 0.1, 0.3])
    a = p.parse_args(argv)
    head = ["data", "J", "eps", "np width"] + [f"{c}, tau {t:g}" for t in a.tau
                                                for c in ("oracle", "new rows")] \
        + ["sigma_y twin (a, TV)"]
    print("| " + " | ".join(head) + " |")
    print("|" + " --- |" * len(head), flush=True)
    drop = 0.0
    for name in a.sets:
        prepared = load(name)
        if prepared is None:
            print(f"{name}: data file not found, skipped")
            continue
        for J in a.J:
            for eps in a.eps:
                w, b, tw = cell_bound(prepared, J, eps, a.tau)
                cells = [f"{v:.2f}" for t in a.tau for v in b[t][:2]] \
                    + [f"{tw[0]:.2f} ({tw[1]:.2g}, {tw[2]:.2f})"]
                drop = max(drop, max(1 - b[t][2] / b[t][0] for t in a.tau))
                print(f"| {name} | {J} | {eps:g} | {w:.3f} | " + " | ".join(cells) + " |",
                      flush=True)
    print(f"y^T y in the release (linearised) lowers the oracle bound by at most {drop:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
