"""Shared helpers for the network-adapter tests (gossip, PriCER, consensus; imported by them;
pyproject.toml's pytest pythonpath puts this folder on sys.path): the coverage loop and
binomial band of the calibration tests, and the check that MCMC-fixedS with sigma_y^2 held
fixed reproduces the closed form."""

import numpy as np
from scipy import stats

import bayesdp
from bayesdp import diagnostics
from bayesdp.inference import closed_form

Z_MAX = 4.0  # |z| bound per Monte Carlo comparison (two-sided p ~ 6e-5)


def binomial_band(m, p=0.9, level=0.99):
    """Central ``level`` band of the hit rate of m independent trials with probability p."""
    lo, hi = stats.binom.ppf([(1 - level) / 2, (1 + level) / 2], m, p)
    return lo / m, hi / m


def interval_hits(post, theta, prob=0.9):
    """Per coordinate: does theta lie in the central ``prob`` interval of the Gaussian posterior
    ``post`` (a dict with "mean" and "cov", as :func:`closed_form.fast_posterior` returns)?"""
    q = stats.norm.ppf(0.5 + prob / 2)
    return np.abs(post["mean"] - theta) <= q * np.sqrt(np.diag(post["cov"]))


def fast_coverage(reps, seed, simulate, *, d=2, prior_C=None, s_noise=None, prob=0.9):
    """Hits, (reps, d), of nominal ``prob`` intervals of Bayes-fixedS-fast over ``reps`` simulated
    data sets with theta drawn from the prior (default: the paper's, C = b/(a-1) I), so the
    coverage is exactly ``prob`` when the model is right. ``simulate(rng, theta)`` returns
    ``(release, sigma_y2)``. ``s_noise=None`` follows the release's ``provenance["s_noise"]``; the
    draws do not depend on it, so two calls with the same seed see the same data."""
    rng = np.random.default_rng(seed)
    pri = bayesdp.Priors(C=prior_C).resolve(d)
    hits = []
    for _ in range(reps):
        theta = rng.multivariate_normal(pri.m, pri.C)
        rel, s2 = simulate(rng, theta)
        post = closed_form.fast_posterior(rel, pri, sigma_y2=s2, s_noise=s_noise)
        hits.append(interval_hits(post, theta, prob))
    return np.asarray(hits)


def assert_eiv_covers_and_old_undercovers(coverage):
    """``coverage(s_noise)`` returns hits (reps, d) over the same simulated data for a treatment of
    the S noise: "eiv" must lie inside the binomial 99% band on every coordinate, and the old
    treatment ("conditional": the S noise ignored for isotropic releases) below it."""
    eiv, old = coverage("eiv").mean(0), coverage("conditional")
    lo, hi = binomial_band(len(old))
    assert np.all((lo <= eiv) & (eiv <= hi)), (eiv, lo, hi)
    assert np.all(old.mean(0) < lo), (old.mean(0), lo)


def assert_fixeds_matches_fast(release, priors, sigma_y2, s_noise, *, seed=0, num_samples=3000):
    """``fit(method="fixeds", fix_sigma_y2=sigma_y2, s_noise=...)`` against
    ``fast_posterior(sigma_y2=sigma_y2, s_noise=...)``: with sigma_y^2 fixed the theta Gibbs step
    draws independently from the closed-form Gaussian, so the mean is z-tested with N draws and
    every covariance entry against the standard error of a sample covariance. Returns the closed
    form posterior."""
    cf = closed_form.fast_posterior(release, priors.resolve(release.d), sigma_y2=sigma_y2,
                                    s_noise=s_noise)
    idata = bayesdp.fit(release, method="fixeds", seed=seed, num_samples=num_samples,
                        num_warmup=10, num_chains=1, progress_bar=False, fix_sigma_y2=sigma_y2,
                        s_noise=s_noise, priors=priors)
    assert diagnostics.attrs(idata)["s_noise"] == s_noise
    th = diagnostics.posterior_array(idata, "theta")
    N = th.shape[0]
    z = (th.mean(0) - cf["mean"]) / np.sqrt(np.diag(cf["cov"]) / N)
    assert np.all(np.abs(z) < Z_MAX), (s_noise, z)
    c = cf["cov"]
    se = np.sqrt((c**2 + np.outer(np.diag(c), np.diag(c))) / (N - 1))
    assert np.all(np.abs(np.cov(th.T) - c) < Z_MAX * se), (s_noise, np.cov(th.T), c)
    return cf


def posteriors_differ(a, b, N=3000):
    """True when 3000 independent draws from Gaussian ``a`` would tell it from ``b`` (a gap of
    more than 3 Z_MAX standard errors in a mean or a covariance entry): the control that makes
    :func:`assert_fixeds_matches_fast` able to fail when a sampler uses the wrong treatment."""
    c = a["cov"]
    mean_gap = np.abs(b["mean"] - a["mean"]) / np.sqrt(np.diag(c) / N)
    se_cov = np.sqrt((c**2 + np.outer(np.diag(c), np.diag(c))) / (N - 1))
    cov_gap = np.abs(b["cov"] - c) / se_cov
    return max(mean_gap.max(), cov_gap.max()) > 3 * Z_MAX
