"""Default priors that do not fight the data (issue 9, point 3): Priors() is weakly informative
and scaled from the release's public bounds; Priors.paper() is the paper's; evidence on the demo
setting that the default gives intervals that behave like 90% intervals (and the paper's do not).
"""

import dataclasses
import math
import warnings

import numpy as np
import pytest
from scipy import stats

import bayesdp
from dp_helpers import split_of
from bayesdp import Priors
from bayesdp.errors import BayesdpInputError
from bayesdp.inference import closed_form


def posterior_quantiles(idata, var_name, probs=(0.05, 0.95)):
    """Equal-tailed quantiles of a variable's draws over (chain, draw), shape (len(probs), ...)."""
    return np.quantile(bayesdp.diagnostics.posterior_array(idata, var_name), probs, axis=0)


def test_weakly_informative_values_from_the_bounds():
    d, Bx, By = 4, 12.0, 6.0
    p = Priors().resolve(d, bounds=(Bx, By))
    sd_y, sd_x = By / 3, Bx / (3 * math.sqrt(d))
    assert p.source == "weakly-informative (public bounds)"
    np.testing.assert_array_equal(p.m, np.zeros(d))
    np.testing.assert_allclose(p.C, (2.5 * sd_y / sd_x) ** 2 * np.eye(d), rtol=1e-14)
    np.testing.assert_allclose(p.C, (2.5 * math.sqrt(d) * By / Bx) ** 2 * np.eye(d), rtol=1e-14)
    assert (p.a, p.b) == (0.5, pytest.approx((sd_y / 20) ** 2, rel=1e-14))
    assert p.kappa == d + 2
    np.testing.assert_allclose(p.Lambda, sd_x**2 * np.eye(d), rtol=1e-14)
    # Sigma_x's prior mean Lambda / (kappa - d - 1) is sd_x^2 I
    np.testing.assert_allclose(p.Lambda / (p.kappa - d - 1), sd_x**2 * np.eye(d), rtol=1e-14)
    # a Release carries its bounds
    sim = bayesdp.simulate(500, d, seed=0)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-5, bounds=(Bx, By), seed=1)
    q = Priors().resolve(rel)
    np.testing.assert_array_equal(q.C, p.C) and np.testing.assert_array_equal(q.Lambda, p.Lambda)


def test_paper_priors_and_overrides():
    p = Priors.paper().resolve(3)
    assert (p.a, p.b, p.kappa, p.source) == (20.0, 0.5, 4.0, "paper")
    np.testing.assert_allclose(p.C, 0.5 / 19 * np.eye(3), rtol=1e-15)
    np.testing.assert_array_equal(p.Lambda, np.eye(3))
    np.testing.assert_allclose(p.nig_precision(), 0.5 / 19 * np.eye(3), rtol=1e-15)
    # bounds do not change the paper's priors
    q = Priors.paper().resolve(3, bounds=(10.0, 5.0))
    np.testing.assert_array_equal(q.C, p.C)
    V = np.random.default_rng(0).standard_normal((3, 3))
    r = Priors.paper(Lambda=V.T @ V).resolve(3)
    np.testing.assert_allclose(r.Lambda, V.T @ V) and np.testing.assert_array_equal(r.C, p.C)
    assert r.source == "paper + user (Lambda)"
    u = Priors(a=3.0, b=2.0).resolve(2, bounds=(4.0, 3.0))
    assert (u.a, u.b) == (3.0, 2.0)
    assert u.source == "weakly-informative (public bounds) + user (a, b)"
    np.testing.assert_allclose(u.C, Priors().resolve(2, bounds=(4.0, 3.0)).C)
    # the NIG reference: theta's prior at the median sigma_y^2 is N(m, C)
    med = stats.invgamma(3.0, scale=2.0).median()
    np.testing.assert_allclose(u.nig_precision(), med * np.linalg.inv(u.C), rtol=1e-12)
    # resolving resolved priors changes nothing
    again = u.resolve(2)
    assert again.source == u.source and np.array_equal(again.C, u.C)


def test_no_bounds_falls_back_to_the_paper_with_a_warning():
    with pytest.warns(UserWarning, match="no public bounds"):
        p = Priors().resolve(3)
    assert p.source == "paper (no public bounds)"
    np.testing.assert_array_equal(p.C, Priors.paper().resolve(3).C)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Priors.paper().resolve(3)  # asked for: no warning
        Priors().resolve(3, warn=False)
        Priors(a=2.0, b=1.0, C=np.eye(3), Lambda=np.eye(3), kappa=5.0).resolve(3)  # all given


def test_bad_input():
    with pytest.raises(BayesdpInputError, match="bounds"):
        Priors().resolve(2, bounds=(0.0, 1.0))
    with pytest.raises(BayesdpInputError, match="default"):
        Priors(default="flat").resolve(2, bounds=(1.0, 1.0))
    with pytest.raises(BayesdpInputError, match="a and b"):
        Priors(a=-1.0).resolve(2, bounds=(1.0, 1.0))


def test_fit_records_which_priors(tmp_path):
    sim = bayesdp.simulate(2000, 2, seed=3)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-5, bounds=sim.bounds, nodes=2,
                          seed=4)
    a = bayesdp.fit(rel, seed=0, num_samples=5).posterior.attrs
    assert a["priors"] == "weakly-informative (public bounds)" and a["prior_a"] == 0.5
    a = bayesdp.fit(rel, seed=0, num_samples=5, priors=Priors.paper()).posterior.attrs
    assert a["priors"] == "paper" and a["prior_a"] == 20.0
    nb = dataclasses.replace(rel, bounds=None)
    with pytest.warns(UserWarning, match="no public bounds"):
        a = bayesdp.fit(nb, method="fast", seed=0, num_samples=5, sigma_y2=1.0).posterior.attrs
    assert a["priors"] == "paper (no public bounds)"
    npv = bayesdp.fit_nonprivate(sim.X, sim.y, seed=0, num_samples=5, bounds=sim.bounds)
    assert npv.posterior.attrs["priors"] == "weakly-informative (public bounds)"


# -- evidence on the demo setting ------------------------------------------------------------

Z90 = stats.norm.ppf(0.95)
N_SEEDS = 20


def _demo_problem(seed):
    """The demo's setting: n = 1e5, d = 5, J = 5, eps = 1, the simulation's public bounds. Also
    an oracle release whose S_hat is the true X_j^T X_j (z_hat keeps its noise): fast/fixedS
    then make no approximation, so what is left is the prior."""
    sim = bayesdp.simulate(100_000, 5, seed=1000 + seed)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=5,
                          seed=2000 + seed, include_yty=False)  # the measured [S, z] release
    # the release's own holders (random split); no row is clipped at the simulation's bounds
    labels = split_of(sim.X.shape[0], 5, 2000 + seed)
    assert int(rel.n_clipped.sum()) == 0 and list(rel.n) == list(np.bincount(labels, minlength=5))
    oracle = dataclasses.replace(rel, S_hat=np.stack(
        [sim.X[labels == j].T @ sim.X[labels == j] for j in range(5)]))
    return sim, rel, oracle


@pytest.fixture(scope="module")
def demo_problems():
    return [_demo_problem(s) for s in range(N_SEEDS)]


def _fast_coverage(problems, priors, which):
    hits = []
    for sim, rel, oracle in problems:
        r = oracle if which == "oracle" else rel
        idata = bayesdp.fit(r, method="fast", seed=0, num_samples=4, num_chains=1,
                            priors=priors)
        # exact 90% interval: mean +- 1.645 sd
        mean, cov = bayesdp.inference.closed_form_moments(idata)
        hits.extend(np.abs(mean - sim.theta) <= Z90 * np.sqrt(np.diag(cov)))
    return float(np.mean(hits))


def _binomial_range(p, n, alpha=1e-3):
    return stats.binom.ppf(alpha / 2, n, p) / n, stats.binom.isf(alpha / 2, n, p) / n


@pytest.mark.slow
def test_fast_intervals_cover_like_90_percent_with_the_default_priors(demo_problems):
    """20 seeds x 5 coefficients. Measured (research/prior_coverage.py): oracle S: default
    0.94, paper 0.18; release: default 0.34, paper 0.13. The fast method's plug-in
    sigma_y = B_y/3 over-states sigma_y, so it may over-cover a little; the paper's prior sd 0.16
    against theta ~ N(0, I) under-covers badly."""
    n = 5 * N_SEEDS
    lo, hi = _binomial_range(0.9, n)
    cov_default = _fast_coverage(demo_problems, Priors(), "oracle")
    assert lo <= cov_default <= 1.0, (cov_default, lo)
    assert cov_default <= max(hi, 0.98)
    cov_paper = _fast_coverage(demo_problems, Priors.paper(), "oracle")  # negative control
    assert cov_paper < 0.5, cov_paper
    # the release as published: S fixed at nearest_psd(S_hat) ignores the noise on S (errors in
    # variables), so fast under-covers whatever the prior - but the paper's prior makes it worse
    cov_rel_default = _fast_coverage(demo_problems, Priors(), "release")
    cov_rel_paper = _fast_coverage(demo_problems, Priors.paper(), "release")
    assert cov_rel_default > cov_rel_paper + 0.1, (cov_rel_default, cov_rel_paper)


@pytest.mark.slow
def test_fixeds_intervals_and_sigma_y2_with_the_default_priors(demo_problems):
    """MCMC-fixedS on the oracle releases: theta's 90% intervals cover at a 90% rate and
    sigma_y^2 = 1 lies inside its 90% interval (the paper's InvGamma(20, 0.5) pins sigma_y^2
    near its prior mean 0.026 and excludes 1)."""
    res = {}
    for name, pri in (("default", Priors()), ("paper", Priors.paper())):
        hits, s2_in, s2_med = [], [], []
        for sim, _, oracle in demo_problems:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", bayesdp.ConvergenceWarning)
                idata = bayesdp.fit(oracle, method="fixeds", seed=1, priors=pri,
                                    num_samples=1000, num_warmup=1000, num_chains=2,
                                    progress_bar=False)
            q = posterior_quantiles(idata, "theta")
            hits.extend((q[0] <= sim.theta) & (sim.theta <= q[1]))
            qs = posterior_quantiles(idata, "sigma_y2", (0.05, 0.5, 0.95))
            s2_in.append(qs[0] <= 1.0 <= qs[2])
            s2_med.append(qs[1])
        res[name] = (np.mean(hits), np.mean(s2_in), np.median(s2_med))
    lo, _ = _binomial_range(0.9, 5 * N_SEEDS)
    assert res["default"][0] >= lo, res
    assert res["default"][1] >= 0.8, res
    assert res["paper"][0] < 0.5 and res["paper"][1] <= 0.1, res
    assert abs(res["paper"][2] - 0.5 / 19) < 0.02, res  # pinned at the prior mean
