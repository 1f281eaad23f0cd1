"""research/prediction_width_bound.py: the least mean width of prediction intervals any
procedure can reach at a given average coverage (docs/evidence/coverage-real-data.md,
"Prediction intervals: how narrow can any private interval be?")."""

import numpy as np
from scipy import stats

from research_helpers import research_module

bound = research_module("prediction_width_bound")


def _sets(sd, width):
    """Coverage of centred intervals of these widths for N(0, sd^2) rows."""
    return 2 * stats.norm.cdf(width / (2 * sd)) - 1


def test_equal_rows_give_the_central_interval():
    """One sd for every row: the least mean width at coverage 0.85 is each row's central 85%
    interval, 2 Phi^-1(0.925) sd (closed form)."""
    w = bound.least_mean_width(np.full(50, 0.3), 0.85)
    assert abs(w - 2 * stats.norm.ppf(0.925) * 0.3) < 1e-6


def test_no_allocation_of_coverage_is_narrower():
    """Rows of unequal sd: the thresholded density covers 0.85 on average, and a numerical
    optimiser over every row's coverage (SLSQP: mean width least with mean coverage 0.85; the
    problem is convex, each row's width convex in its coverage) finds the same least mean width
    from three starts; the per-row 85% is strictly wider (negative control: the bound is not just
    the naive interval)."""
    from scipy import optimize

    rng = np.random.default_rng(3)
    sd = np.exp(rng.normal(0.0, 1.0, 40))
    least = bound.least_mean_width(sd, 0.85)
    assert abs(np.mean(_sets(sd, 2 * bound.least_half_widths(sd, 0.85))) - 0.85) < 1e-6
    naive = np.mean(2 * stats.norm.ppf(0.925) * sd)
    assert least < naive - 1e-3

    def mean_width(c):
        return np.mean(2 * stats.norm.ppf((1 + c) / 2) * sd)

    for start in (np.full(sd.size, 0.85), np.clip(0.85 + rng.normal(0, 0.1, sd.size), 0.3, 0.99),
                  np.linspace(0.7, 0.99, sd.size)):
        start = start - (start.mean() - 0.85)
        res = optimize.minimize(mean_width, start, method="SLSQP",
                                bounds=[(1e-9, 1 - 1e-9)] * sd.size,
                                constraints=[{"type": "eq", "fun": lambda c: c.mean() - 0.85}],
                                options={"ftol": 1e-12, "maxiter": 500})
        assert res.success, res.message
        assert res.fun >= least - 1e-6
        assert abs(res.fun - least) < 1e-3 * least


def test_oracle_variances_are_the_per_holder_posterior():
    """Monte Carlo over the family (delta ~ N(0, tau^2 I), each holder's z_hat_j = S_j delta +
    its own noise): the oracle's thresholded sets, built from :func:`oracle_variances`, around
    the exact posterior mean cover the members' x^T delta 0.85 of the time (within 3 binomial
    sd of 4,000 releases), so its variances are the per-holder posterior's and the bound is
    attained. The holders see different directions, so the pooled release's information,
    (sum S_j) (sum Sigma_zj)^-1 (sum S_j), is about half the per-holder one: its variances give
    sets covering more than 3 binomial sd above 0.85 (negative control: the bound's old,
    pooled formula)."""
    rng = np.random.default_rng(0)
    d, tau, reps = 3, 1.0, 4000
    S_j = np.stack([np.diag([50.0, 0.5, 30.0]), np.diag([0.5, 50.0, 30.0])])
    Sigma_z = np.stack([4.0 * np.eye(d), 4.0 * np.eye(d)])
    X_test = rng.normal(size=(30, d))
    sd = np.sqrt(bound.oracle_variances(S_j, Sigma_z, X_test, tau))
    h = bound.least_half_widths(sd, 0.85)
    delta = rng.normal(0.0, tau, (reps, d))
    z = [delta @ S.T + rng.multivariate_normal(np.zeros(d), Sz, reps) for S, Sz in zip(S_j, Sigma_z)]
    P = np.eye(d) / tau ** 2 + sum(S @ np.linalg.solve(Sz, S) for S, Sz in zip(S_j, Sigma_z))
    m = np.linalg.solve(P, sum(np.linalg.solve(Sz, S).T @ zj.T for S, Sz, zj in zip(S_j, Sigma_z, z))).T
    err = np.abs((delta - m) @ X_test.T)  # (reps, rows)
    tol = 3 * np.sqrt(0.85 * 0.15 / reps)  # rows of a release counted as one
    assert abs(np.mean(err <= h) - 0.85) <= tol
    pooled = bound.oracle_variances(S_j.sum(0)[None], Sigma_z.sum(0)[None], X_test, tau)
    h_pooled = bound.least_half_widths(np.sqrt(pooled), 0.85)
    assert np.mean(err <= h_pooled) > 0.85 + 3 * tol


def test_twin_distance_by_hand():
    """Without clipping the twin moves only y^T y, by (a^2 - 1) |r|^2 (X^T r = 0 over all rows),
    so one holder's distance is that over the y^T y noise sd; split over two holders, each
    holder's z moves by X_j^T (a - 1) r_j, which is not 0, and the squares add up."""
    rng = np.random.default_rng(4)
    n, d, a = 400, 2, 1.7
    X = rng.normal(size=(n, d))
    y = X @ np.array([0.5, -1.0]) + 0.3 * rng.standard_normal(n)
    theta = np.linalg.solve(X.T @ X, X.T @ y)
    r = y - X @ theta
    twin = X @ theta + a * r
    one = bound.twin_distance(X, y, twin, np.zeros(n, int), 9.0 * np.eye(d)[None], np.array([25.0]))
    assert abs(one - (a * a - 1) * (r @ r) / 5.0) < 1e-9
    lab = (np.arange(n) % 2).astype(int)
    Sz = np.stack([9.0 * np.eye(d), 4.0 * np.eye(d)])
    vy = np.array([25.0, 16.0])
    want = 0.0
    for j in range(2):
        u = X[lab == j].T @ ((a - 1) * r[lab == j])
        dyy = twin[lab == j] @ twin[lab == j] - y[lab == j] @ y[lab == j]
        want += u @ np.linalg.solve(Sz[j], u) + dyy ** 2 / vy[j]
    assert abs(bound.twin_distance(X, y, twin, lab, Sz, vy) - np.sqrt(want)) < 1e-9


def test_sigma_twin_needs_an_unresolved_sigma():
    """With y^T y released almost without noise the twin is told apart at once: the bound is
    the data set's own (a = 1, about 0.875 of the non-private 90% width, 1.44 / 1.645); with
    y^T y swamped by noise the twin's a grows and so does the bound (over 2), and the returned
    TV is that of :func:`twin_distance` at the returned a."""
    rng = np.random.default_rng(1)
    n, d = 5000, 3
    X = rng.normal(size=(n, d)) / 3
    theta = np.array([1.0, -0.5, 0.2])
    y = X @ theta + 0.05 * rng.standard_normal(n)
    S = X.T @ X
    ols = np.linalg.solve(S, X.T @ y)
    fit = X @ ols
    sigma = np.sqrt(np.sum((y - fit) ** 2) / (n - d))
    np_width = 2 * stats.norm.ppf(0.95) * sigma
    one = [np.zeros(n, int)]
    sharp = bound.sigma_twin_bound(X, y, ols, (3.0, 5.0), one, 1e-6 * np.eye(d)[None],
                                   np.array([1e-6]), np_width)
    assert sharp[1] == 1.0 and abs(sharp[0] - stats.norm.ppf(0.925) / stats.norm.ppf(0.95)) < 0.01
    Sz, vy = 100.0 ** 2 * np.eye(d)[None], np.array([300.0 ** 2])
    w, a, tv = bound.sigma_twin_bound(X, y, ols, (3.0, 5.0), one, Sz, vy, np_width)
    assert a > 3 and w > 2.0 and tv < 0.85
    twin = np.clip(fit + a * (y - fit), -5.0, 5.0)
    dist = bound.twin_distance(X, y, twin, one[0], Sz, vy)
    assert abs(tv - (2 * stats.norm.cdf(dist / 2) - 1)) < 1e-12
    assert abs(w - 2 * np.std(twin - fit) * stats.norm.ppf((1 + 0.85 - tv) / 2) / np_width) < 1e-9
