"""Metrics: MSEs, simulated prediction formula, unbiased squared MMD."""

import numpy as np
import pytest

from bayesdp.paper import metrics
from bayesdp.errors import BayesdpInputError


def test_mse_basic():
    assert metrics.estimation_mse([1.0, 2.0], [0.0, 0.0]) == pytest.approx(2.5)
    X = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert metrics.prediction_mse([1.0, 1.0], X, np.array([2.0, 1.0])) == pytest.approx(0.5)
    with pytest.raises(BayesdpInputError, match="theta_hat"):
        metrics.estimation_mse([1.0], [0.0, 0.0])


def test_simulated_prediction_mse_is_expected_squared_error():
    rng = np.random.default_rng(0)
    Sx = np.array([[2.0, 0.3], [0.3, 1.0]])
    th = np.array([0.5, -1.0])
    draws = th + 0.1 * rng.standard_normal((400, 2))
    val = metrics.simulated_prediction_mse(draws, th, Sx)
    x = rng.standard_normal((20000, 2)) @ np.linalg.cholesky(Sx).T
    mc = np.mean(((x @ draws.T) - (x @ th)[:, None]) ** 2)
    assert val == pytest.approx(mc, rel=0.03)
    # one point estimate: (t - th)^T Sx (t - th)
    t = np.array([1.0, 0.0])
    assert metrics.simulated_prediction_mse(t, th, Sx) == pytest.approx((t - th) @ Sx @ (t - th))


def _population_mmd2_gauss_1d(mu1, s1, mu2, s2, h):
    # E k(X, X') for X ~ N(mu, s^2) iid etc, k = exp(-(a-b)^2/(2h)): sqrt(h/(h+v)) exp(-m^2/(2(h+v)))
    def ek(m, v):
        return np.sqrt(h / (h + v)) * np.exp(-m * m / (2 * (h + v)))
    return ek(0, 2 * s1**2) + ek(0, 2 * s2**2) - 2 * ek(mu1 - mu2, s1**2 + s2**2)


def test_mmd2_unbiased_on_gaussians():
    rng = np.random.default_rng(1)
    h = 0.5
    truth = _population_mmd2_gauss_1d(0.0, 1.0, 0.5, 1.2, h)
    vals = [metrics.mmd2(rng.normal(0, 1, 30), rng.normal(0.5, 1.2, 25), h) for _ in range(1500)]
    se = np.std(vals, ddof=1) / np.sqrt(len(vals))
    assert abs(np.mean(vals) - truth) < 4 * se
    # negative control: the biased V-statistic is off by much more than the standard error
    def biased(x, y):
        x, y = x[:, None], y[:, None]
        k = lambda a, b: np.exp(-((a - b.T) ** 2) / (2 * h))
        return k(x, x).mean() + k(y, y).mean() - 2 * k(x, y).mean()
    vb = [biased(rng.normal(0, 1, 30), rng.normal(0.5, 1.2, 25)) for _ in range(1500)]
    assert abs(np.mean(vb) - truth) > 10 * se


def test_mmd2_zero_mean_under_null_and_paper_normalisation():
    rng = np.random.default_rng(2)
    vals = [metrics.mmd2(rng.standard_normal((20, 2)), rng.standard_normal((20, 2)), 0.3)
            for _ in range(1000)]
    se = np.std(vals, ddof=1) / np.sqrt(len(vals))
    assert abs(np.mean(vals)) < 4 * se
    x, y = rng.standard_normal((10, 2)), rng.standard_normal((12, 2)) + 1
    assert metrics.mmd2_paper(x, y, 0.1) == pytest.approx(metrics.mmd2(x, y, 0.1) / (2 * np.pi * 0.1))


def test_mean_interval():
    m, lo, hi = metrics.mean_interval([1.0, 2.0, 3.0])
    assert m == 2.0 and lo < 2.0 < hi
    from scipy import stats
    assert hi - m == pytest.approx(stats.t.ppf(0.95, 2) * 1.0 / np.sqrt(3))


def test_bootstrap_mean_interval_respects_the_sign_of_skewed_positive_data():
    # MSE-like: positive and right-skewed; mean +- t sd/sqrt(r) reaches below zero here
    v = np.array([0.01, 0.012, 0.02, 0.03, 0.9])
    m_t, lo_t, _ = metrics.mean_interval(v)
    assert lo_t < 0  # the problem being fixed
    m, lo, hi = metrics.bootstrap_mean_interval(v)
    assert m == pytest.approx(v.mean())
    assert 0 < lo < m < hi <= v.max()
    assert lo >= v.min()
    # reproducible (fixed seed) and empty / single values handled
    assert metrics.bootstrap_mean_interval(v) == (m, lo, hi)
    assert np.isnan(metrics.bootstrap_mean_interval([2.0])[1])
    assert np.isnan(metrics.bootstrap_mean_interval([np.nan])[0])


def test_bootstrap_mean_interval_covers_the_mean_sensibly():
    """Over lognormal samples of 20 (MSE-like), the interval is > 0, holds the sample mean and the
    sample median's neighbourhood, and covers the true mean about as often as a 90% interval of
    a skewed mean from 20 values can (percentile bootstrap undercovers a little)."""
    rng = np.random.default_rng(11)
    true_mean = np.exp(0.5 * 0.8**2)
    hits = 0
    reps = 300
    for k in range(reps):
        v = rng.lognormal(0.0, 0.8, size=20)
        m, lo, hi = metrics.bootstrap_mean_interval(v, seed=k)
        assert 0 < lo < m < hi
        hits += lo <= true_mean <= hi
    assert 0.75 <= hits / reps <= 0.97, hits / reps
