"""Accuracy metrics of the paper's experiments (section 5; docs/compare.md, "Metrics").

- ``estimation_mse(theta_hat, theta_ref)``: mean over coordinates of (theta_hat - theta_ref)^2;
  theta_ref is the true theta (simulated data) or the training least-squares fit (real data).
- ``prediction_mse(theta_hat, X_test, y_test)``: mean over test rows of (y - x^T theta_hat)^2.
- ``simulated_prediction_mse(theta_draws, theta_true, Sigma_x)``:
  trace(Sigma_x mean_k (theta_k - theta)(theta_k - theta)^T) = mean_k E_x[(x^T theta_k - x^T theta)^2]
  over posterior draws theta_k, as the authors computed it for the MCMC methods (a single point
  estimate gives the plug-in form used for adaSSP and Bayes-fixedS-fast).
- ``mmd2(x, y, bandwidth)``: the unbiased squared maximum mean discrepancy of Gretton et al.
  (2012, eq. 3) with the Gaussian kernel k(a, b) = exp(-||a - b||^2 / (2 h)).
  ``mmd2_paper`` multiplies it by (2 pi h)^(-d/2), the authors' normalisation (their Figure 4),
  with h = 0.1 by default. Note that h is a *variance* (squared length scale).
"""

from __future__ import annotations

import numpy as np

from ..errors import BayesdpInputError

# scipy.stats is imported inside the function that uses it: importing bayesdp.paper, as
# `bayesdp --help` does, loads none of it


def _vec(name, v, d=None):
    v = np.asarray(v, dtype=float)
    if v.ndim != 1 or (d is not None and v.shape[0] != d) or not np.all(np.isfinite(v)):
        want = f"({d},)" if d is not None else "a 1-d array"
        raise BayesdpInputError(f"{name} must be a finite array of shape {want}, got shape {v.shape}")
    return v


def estimation_mse(theta_hat, theta_ref) -> float:
    """Mean over the d coordinates of (theta_hat - theta_ref)^2."""
    ref = _vec("theta_ref", theta_ref)
    est = _vec("theta_hat", theta_hat, ref.shape[0])
    return float(np.mean((est - ref) ** 2))


def prediction_mse(theta_hat, X_test, y_test) -> float:
    """Mean over test rows of (y_i - x_i^T theta_hat)^2."""
    X = np.asarray(X_test, dtype=float)
    y = np.asarray(y_test, dtype=float)
    if X.ndim != 2 or y.ndim != 1 or X.shape[0] != y.shape[0] or X.shape[0] == 0:
        raise BayesdpInputError(
            f"X_test must be (n, d) and y_test (n,) with n >= 1, got {X.shape} and {y.shape}")
    th = _vec("theta_hat", theta_hat, X.shape[1])
    r = y - X @ th
    return float(np.mean(r * r))


def simulated_prediction_mse(theta_draws, theta_true, Sigma_x) -> float:
    """trace(Sigma_x mean_k (theta_k - theta)(theta_k - theta)^T) over draws theta_k.

    ``theta_draws``: (K, d) posterior draws (any leading shape is flattened) or one (d,) estimate.
    """
    th = _vec("theta_true", theta_true)
    d = th.shape[0]
    D = np.asarray(theta_draws, dtype=float).reshape(-1, d) - th
    Sx = np.asarray(Sigma_x, dtype=float)
    if Sx.shape != (d, d):
        raise BayesdpInputError(f"Sigma_x must be {d} x {d}, got shape {Sx.shape}")
    return float(np.mean(np.einsum("ki,ij,kj->k", D, Sx, D)))


def _sq_dists(a, b):
    aa = np.einsum("ij,ij->i", a, a)
    bb = np.einsum("ij,ij->i", b, b)
    return np.maximum(aa[:, None] + bb[None, :] - 2.0 * a @ b.T, 0.0)


def _samples(name, x, d=None):
    x = np.asarray(x, dtype=float)
    if x.ndim == 1:
        x = x[:, None]
    if x.ndim != 2 or x.shape[0] < 2 or (d is not None and x.shape[1] != d):
        raise BayesdpInputError(f"{name} must be (n >= 2, d) samples, got shape {x.shape}")
    return x


def mmd2(x, y, bandwidth=0.1) -> float:
    """Unbiased squared MMD (Gretton et al. 2012) with kernel exp(-||a - b||^2 / (2 h)), h = bandwidth.

    MMD_u^2 = mean_{i != j} k(x_i, x_j) + mean_{i != j} k(y_i, y_j) - 2 mean_{i, j} k(x_i, y_j).
    Unbiased for the population MMD^2 (so it can be negative when the distributions agree).
    ``x`` (m, d), ``y`` (n, d); 1-d inputs are treated as d = 1.
    """
    x = _samples("x", x)
    y = _samples("y", y, x.shape[1])
    h = float(bandwidth)
    if not h > 0:
        raise BayesdpInputError(f"bandwidth must be > 0, got {bandwidth!r}")
    m, n = x.shape[0], y.shape[0]
    kxx = np.exp(-_sq_dists(x, x) / (2 * h))
    kyy = np.exp(-_sq_dists(y, y) / (2 * h))
    kxy = np.exp(-_sq_dists(x, y) / (2 * h))
    txx = (kxx.sum() - np.trace(kxx)) / (m * (m - 1))
    tyy = (kyy.sum() - np.trace(kyy)) / (n * (n - 1))
    return float(txx + tyy - 2.0 * kxy.mean())


def mmd2_paper(x, y, bandwidth=0.1) -> float:
    """The authors' squared MMD: :func:`mmd2` times (2 pi h)^(-d/2) (a normalised Gaussian kernel)."""
    x = _samples("x", x)
    return mmd2(x, y, bandwidth) * (2 * np.pi * float(bandwidth)) ** (-x.shape[1] / 2)


def _finite_mean(values):
    """The finite values of the replications as a float array, and their mean (nan if none)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    return v, (float(v.mean()) if v.size else np.nan)


def bootstrap_mean_interval(values, level=0.90, n_boot=4000, seed=0):
    """(mean, lower, upper): the mean over replications and the percentile bootstrap
    ``level`` interval of the mean (``n_boot`` resamples of the replications with replacement;
    the ``(1 - level)/2`` and ``(1 + level)/2`` quantiles of the resampled means).

    Unlike mean +- t sd/sqrt(r), it respects the sign of the data: every resampled mean of
    positive values (an MSE, a time) is positive, so the lower end is > 0, and a skewed sample
    gets a skewed interval. A fixed ``seed`` makes it reproducible. With one value the interval
    is (nan, nan)."""
    v, mean = _finite_mean(values)
    if v.size < 2:
        return (mean, np.nan, np.nan)
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(int(n_boot), v.size))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return (mean, float(lo), float(hi))


def mean_interval(values, level=0.90):
    """(mean, lower, upper): mean +- t_{(1+level)/2, r-1} sd / sqrt(r) over replications."""
    from scipy import stats

    v, mean = _finite_mean(values)
    if v.size < 2:
        return (mean, np.nan, np.nan)
    half = stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / np.sqrt(v.size)
    return (mean, mean - half, mean + half)
