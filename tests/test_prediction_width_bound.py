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
    """Rows of unequal sd: the thresholded density covers 0.85 on average, and no other way of
    sharing the coverage between rows (400 random allocations with mean 0.85, and the same
    85% for every row) has a smaller mean width; the per-row 85% is strictly wider (negative
    control: the bound is not just the naive interval)."""
    rng = np.random.default_rng(3)
    sd = np.exp(rng.normal(0.0, 1.0, 40))
    least = bound.least_mean_width(sd, 0.85)
    naive = np.mean(2 * stats.norm.ppf(0.925) * sd)
    assert least < naive - 1e-3
    tried = 0
    for _ in range(400):
        c = 0.85 + rng.normal(0.0, 0.05, sd.size)
        c -= c.mean() - 0.85
        if c.min() <= 0.0 or c.max() >= 1.0:
            continue
        tried += 1
        assert np.mean(2 * stats.norm.ppf((1 + c) / 2) * sd) >= least - 1e-9
    assert tried >= 300


def test_oracle_posterior_reaches_the_bound_over_the_family():
    """Monte Carlo over the family (delta ~ N(0, tau^2 I), z_hat = S delta + noise): the
    oracle's thresholded sets around its posterior predictive mean cover the members' x^T delta
    0.85 of the time (within 3 binomial sd of 4,000 releases) at the bound's mean width, so
    the bound is attained, not only a lower limit."""
    rng = np.random.default_rng(0)
    d, tau, reps = 3, 0.5, 4000
    S = np.array([[50.0, 10.0, 0.0], [10.0, 8.0, 1.0], [0.0, 1.0, 0.5]])
    Sigma_z = 4.0 * np.eye(d)
    X_test = rng.normal(size=(30, d))
    P = S @ np.linalg.solve(Sigma_z, S) + np.eye(d) / tau ** 2
    V = np.linalg.inv(P)
    sd = np.sqrt(np.einsum("ij,jk,ik->i", X_test, V, X_test))
    h = bound.least_half_widths(sd, 0.85)  # the sets whose mean width is the bound
    assert abs(np.mean(_sets(sd, 2 * h)) - 0.85) < 1e-6
    delta = rng.normal(0.0, tau, (reps, d))
    z = delta @ S.T + rng.multivariate_normal(np.zeros(d), Sigma_z, reps)
    m = np.linalg.solve(P, np.linalg.solve(Sigma_z, S).T @ z.T).T  # posterior means
    err = np.abs((delta - m) @ X_test.T)  # (reps, rows)
    cover = np.mean(err <= h)
    assert abs(cover - 0.85) <= 3 * np.sqrt(0.85 * 0.15 / reps)  # rows of a release counted as one


def test_sigma_twin_needs_an_unresolved_sigma():
    """With y^T y released almost without noise the twin is told apart at once: the bound is
    the data set's own (a = 1, about 0.875 of the non-private 90% width, 1.44 / 1.645); with
    y^T y swamped by noise the twin's a grows and so does the bound (over 2)."""
    rng = np.random.default_rng(1)
    n, d = 5000, 3
    X = rng.normal(size=(n, d)) / 3
    theta = np.array([1.0, -0.5, 0.2])
    y = X @ theta + 0.05 * rng.standard_normal(n)
    S = X.T @ X
    fit = X @ np.linalg.solve(S, X.T @ y)
    sigma = np.sqrt(np.sum((y - fit) ** 2) / (n - d))
    np_width = 2 * stats.norm.ppf(0.95) * sigma
    sharp = bound.sigma_twin_bound(X, y, np.linalg.solve(S, X.T @ y), (3.0, 5.0),
                                   1e-6 * np.eye(d), 1e-6, np_width)
    assert sharp[1] == 1.0 and abs(sharp[0] - stats.norm.ppf(0.925) / stats.norm.ppf(0.95)) < 0.01
    vague = bound.sigma_twin_bound(X, y, np.linalg.solve(S, X.T @ y), (3.0, 5.0),
                                   100.0 ** 2 * np.eye(d), 300.0 ** 2, np_width)
    assert vague[1] > 3 and vague[0] > 2.0 and vague[2] < 0.85
