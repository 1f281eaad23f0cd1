"""Closed-form inference: nearest PSD, Bayes-fixedS-fast (Algorithm 3 / eq. 12) against a direct
dense computation, the sigma_y plug-in rules, fit(method="fast") as InferenceData, concentration
as eps grows, and the non-private normal-inverse-gamma posterior."""

import numpy as np
import pandas as pd
import pytest

import bayesdp
from bayesdp.errors import BayesdpInputError
from bayesdp.inference import closed_form


def _random_symmetric(rng, d, shift=0.0):
    A = rng.normal(size=(d, d))
    return 0.5 * (A + A.T) + shift * np.eye(d)


# --------------------------------------------------------------------------------------------
# nearest PSD


def test_nearest_psd_definition():
    rng = np.random.default_rng(0)
    for _ in range(20):
        d = int(rng.integers(1, 6))
        S = _random_symmetric(rng, d)
        P = closed_form.nearest_psd(S)
        assert np.allclose(P, P.T, atol=1e-13)
        assert np.linalg.eigvalsh(P).min() >= -1e-12
        best = np.linalg.norm(S - P)
        # no PSD matrix is closer in Frobenius norm: random PSD matrices, and random PSD
        # perturbations of P itself
        for _ in range(200):
            B = rng.normal(size=(d, d))
            Q = B @ B.T * rng.uniform(0, 2)
            assert np.linalg.norm(S - Q) >= best - 1e-12
            R = rng.normal(size=(d, int(rng.integers(1, d + 1))))
            Q2 = P + rng.uniform(1e-4, 0.3) * R @ R.T
            assert np.linalg.norm(S - Q2) >= best - 1e-12
        # Higham: the distance is the norm of the negative eigenvalues
        w = np.linalg.eigvalsh(S)
        assert best == pytest.approx(np.sqrt(np.sum(np.minimum(w, 0) ** 2)), abs=1e-12)


def test_nearest_psd_keeps_psd_and_stacks():
    rng = np.random.default_rng(1)
    B = rng.normal(size=(4, 4))
    S = B @ B.T
    np.testing.assert_allclose(closed_form.nearest_psd(S), S, atol=1e-12)
    stack = np.stack([_random_symmetric(rng, 3) for _ in range(5)])
    out = closed_form.nearest_psd(stack)
    for k in range(5):
        np.testing.assert_allclose(out[k], closed_form.nearest_psd(stack[k]), atol=1e-14)


# --------------------------------------------------------------------------------------------
# Bayes-fixedS-fast = eq. (12) with S_j fixed


def _eig_clip(S):
    w, E = np.linalg.eigh(0.5 * (S + S.T))
    return (E * np.maximum(w, 0)) @ E.T


def _direct_eq12(S_hat, z_hat, sigma_z, s2, m, C):
    """Eq. (12) by explicit inverses, S_j = nearest PSD(S_hat_j)."""
    d = S_hat.shape[1]
    Ci = np.linalg.inv(C)
    P = Ci.copy()
    h = Ci @ m
    for Sh, zj, sz in zip(S_hat, z_hat, sigma_z):
        S = _eig_clip(Sh)
        K = np.linalg.inv(s2 * S + sz**2 * np.eye(d))
        P += S @ K @ S
        h += S @ K @ zj
    cov = np.linalg.inv(P)
    return cov @ h, cov


@pytest.fixture
def sim_release():
    sim = bayesdp.simulate(n=3000, d=3, seed=11)
    r = bayesdp.release(pd.DataFrame(sim.X, columns=["a", "b", "c"]), sim.y, epsilon=0.5,
                        delta=1e-5, bounds=sim.bounds, nodes=4, seed=12)
    return sim, r


def test_fast_equals_direct_eq12(sim_release):
    sim, r = sim_release
    rng = np.random.default_rng(3)
    # some S_hat_j are not PSD at this noise level? force one to be, to exercise the projection
    S_hat = r.S_hat.copy()
    S_hat[0] -= (np.linalg.eigvalsh(S_hat[0]).min() + 5.0) * np.eye(3)
    r2 = bayesdp.Release(S_hat=S_hat, z_hat=r.z_hat, n=r.n, sigma_s=r.sigma_s,
                         sigma_z=r.sigma_z * np.array([1.0, 0.5, 2.0, 1.0]), bounds=r.bounds)
    assert np.linalg.eigvalsh(r2.S_hat[0]).min() < 0
    B = rng.normal(size=(3, 3))
    m = rng.normal(size=3)
    C = B @ B.T + 0.1 * np.eye(3)
    priors = bayesdp.Priors(m=m, C=C).resolve(3)
    for s2 in [0.3, 4.0]:
        post = closed_form.fast_posterior(r2, priors, sigma_y2=s2)
        mean, cov = _direct_eq12(r2.S_hat, r2.z_hat, r2.sigma_z, s2, m, C)
        np.testing.assert_allclose(post["mean"], mean, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(post["cov"], cov, rtol=1e-8, atol=1e-14)
        np.testing.assert_allclose(post["S"], np.stack([_eig_clip(S) for S in r2.S_hat]),
                                   atol=1e-8)
    # "psd+I" variant (authors' MCMC-fixedS estimate)
    post = closed_form.fast_posterior(r2, priors, sigma_y2=1.0, fixed_s="psd+I")
    np.testing.assert_allclose(post["S"], np.stack([_eig_clip(S) + np.eye(3) for S in r2.S_hat]),
                               atol=1e-8)


def test_sigma_y_rules(sim_release):
    sim, r = sim_release
    priors = bayesdp.Priors.paper().resolve(3)
    by = r.bounds[1]
    p_paper = closed_form.fast_posterior(r, priors)
    assert p_paper["sigma_y2"] == pytest.approx((by / 3) ** 2, rel=1e-15)
    p_code = closed_form.fast_posterior(r, priors, sigma_y_rule="paper-code")
    assert p_code["sigma_y2"] == pytest.approx(by / 3, rel=1e-15)
    for post, s2 in [(p_paper, (by / 3) ** 2), (p_code, by / 3)]:
        mean, cov = _direct_eq12(r.S_hat, r.z_hat, r.sigma_z, s2, priors.m, priors.C)
        np.testing.assert_allclose(post["mean"], mean, rtol=1e-8, atol=1e-12)
        np.testing.assert_allclose(post["cov"], cov, rtol=1e-8, atol=1e-15)
    with pytest.raises(BayesdpInputError, match="sigma_y_rule"):
        closed_form.fast_posterior(r, priors, sigma_y_rule="other")
    with pytest.raises(BayesdpInputError, match="sigma_y2"):
        closed_form.fast_posterior(r, priors, sigma_y2=-1.0)


def test_paper_default_prior(sim_release):
    _, r = sim_release
    priors = bayesdp.Priors.paper().resolve(3)
    assert priors.a == 20 and priors.b == 0.5
    np.testing.assert_array_equal(priors.m, np.zeros(3))
    np.testing.assert_allclose(priors.C, 0.5 / 19 * np.eye(3), rtol=1e-15)


# --------------------------------------------------------------------------------------------
# fit(method="fast")


def test_fit_fast_inference_data(sim_release):
    sim, r = sim_release
    idata = bayesdp.fit(r, method="fast", seed=5, num_samples=2000, num_chains=4)
    theta = idata.posterior["theta"]
    assert theta.dims == ("chain", "draw", "feature")
    assert list(theta.coords["feature"].values) == ["a", "b", "c"]
    mean, cov = bayesdp.inference.closed_form_moments(idata)
    post = closed_form.fast_posterior(r, bayesdp.Priors().resolve(r))  # the default priors
    assert idata.posterior.attrs["priors"] == "weakly-informative (public bounds)"
    np.testing.assert_allclose(mean, post["mean"], rtol=1e-12)
    np.testing.assert_allclose(cov, post["cov"], rtol=1e-12)
    draws = theta.values.reshape(-1, 3)
    N = draws.shape[0]
    # whiten with the closed-form moments: should be iid N(0, I) up to Monte Carlo error
    L = np.linalg.cholesky(cov)
    W = np.linalg.solve(L, (draws - mean).T).T
    assert np.all(np.abs(W.mean(axis=0)) < 4.5 / np.sqrt(N))
    # sample covariance of whitened draws: each entry has sd ~ 1/sqrt(N) (x sqrt(2) on the diag)
    assert np.max(np.abs(np.cov(W, rowvar=False) - np.eye(3))) < 4.5 * np.sqrt(2 / N)
    # reproducible
    again = bayesdp.fit(r, method="fast", seed=5, num_samples=2000, num_chains=4)
    assert np.array_equal(again.posterior["theta"].values, theta.values)
    assert idata.posterior.attrs["sigma_y_rule"] == "paper"


def test_fit_fast_from_file_and_options(tmp_path, sim_release):
    _, r = sim_release
    path = r.save(tmp_path / "r.json")
    idata = bayesdp.fit(path, method="fast", seed=1, num_samples=10, num_chains=1,
                        sigma_y_rule="paper-code")
    assert idata.posterior["theta"].shape == (1, 10, 3)
    assert idata.posterior.attrs["sigma_y2_plugin"] == pytest.approx(r.bounds[1] / 3)
    with pytest.raises(BayesdpInputError, match="method"):
        bayesdp.fit(r, method="nope")
    with pytest.raises(BayesdpInputError, match="num_samples"):
        bayesdp.fit(r, num_samples=0)


def test_fast_concentrates_as_eps_grows():
    """Over a few seeds (n = 1e5 as in the paper): the posterior sd shrinks as eps grows, and so
    does the error of the posterior mean. (Per seed the sd need not be monotone: the S_j are
    fixed at noisy values. At large eps the remaining error is the prior's shrinkage with the
    plug-in sigma_y = B_y/3, not noise.)"""
    eps_grid = [0.05, 0.5, 5.0, 50.0]
    errors = np.zeros((4, len(eps_grid)))
    sds = np.zeros_like(errors)
    priors = bayesdp.Priors.paper().resolve(3)
    for k, seed in enumerate(range(4)):
        sim = bayesdp.simulate(n=100_000, d=3, seed=100 + seed)
        for i, eps in enumerate(eps_grid):
            r = bayesdp.release(sim.X, sim.y, epsilon=eps, delta=1e-5, bounds=sim.bounds,
                                nodes=2, seed=200 + seed)
            post = closed_form.fast_posterior(r, priors)
            errors[k, i] = np.linalg.norm(post["mean"] - sim.theta) / np.linalg.norm(sim.theta)
            sds[k, i] = np.sqrt(np.trace(post["cov"]))
    mean_sd = sds.mean(axis=0)
    mean_err = errors.mean(axis=0)
    assert np.all(np.diff(mean_sd) < 0), mean_sd
    assert np.all(np.diff(mean_err) < 0), mean_err
    assert np.all(sds[:, -1] < sds[:, 0])
    assert mean_err[-1] < 0.1 and mean_err[0] > 5 * mean_err[-1], mean_err


# --------------------------------------------------------------------------------------------
# non-private reference


def test_fit_nonprivate_matches_nig():
    rng = np.random.default_rng(9)
    n, d = 200, 3
    X = rng.normal(size=(n, d))
    theta = np.array([1.0, -0.5, 0.25])
    y = X @ theta + 0.7 * rng.normal(size=n)
    a, b = 20.0, 0.5
    m = np.array([0.1, 0.0, -0.2])
    # the NIG prior: sigma^2 ~ IG(a, b), theta | sigma^2 ~ N(m, sigma^2 Lambda0^-1),
    # Lambda0 = b/(a-1) I
    L0 = b / (a - 1) * np.eye(d)
    Ln = X.T @ X + L0
    mu = np.linalg.inv(Ln) @ (X.T @ y + L0 @ m)
    an = a + n / 2
    bn = b + 0.5 * (y @ y + m @ L0 @ m - mu @ Ln @ mu)
    cov = bn / (an - 1) * np.linalg.inv(Ln)
    idata = bayesdp.fit_nonprivate(pd.DataFrame(X, columns=["u", "v", "w"]), y,
                                   priors=bayesdp.Priors.paper(a=a, b=b, m=m), seed=4,
                                   num_samples=5000, num_chains=2)
    mean_cf, cov_cf = bayesdp.inference.closed_form_moments(idata)
    np.testing.assert_allclose(mean_cf, mu, rtol=1e-10)
    np.testing.assert_allclose(cov_cf, cov, rtol=1e-10)
    th = idata.posterior["theta"]
    assert list(th.coords["feature"].values) == ["u", "v", "w"]
    draws = th.values.reshape(-1, d)
    N = draws.shape[0]
    se = np.sqrt(np.diag(cov) / N)
    assert np.all(np.abs(draws.mean(axis=0) - mu) < 4.5 * se)
    # the marginal of theta is Student-t with covariance bn/(an-1) Ln^-1
    np.testing.assert_allclose(np.cov(draws, rowvar=False), cov, rtol=0.1, atol=0.05 * cov.max())
    s2 = idata.posterior["sigma_y2"].values.ravel()
    # sigma^2 | data ~ IG(an, bn): mean bn/(an-1), sd mean/sqrt(an-2)
    m_s2 = bn / (an - 1)
    assert abs(s2.mean() - m_s2) < 4.5 * m_s2 / np.sqrt(an - 2) / np.sqrt(N)


def test_prior_variance_split_splits_the_posterior_variance():
    """V = (A + Pi)^-1 = V A V + V Pi V: the prior's part, and the release's part computed on
    its own, add up to diag(V); the share is in [0, 1], 1 without a release (A = 0) and near 0
    under a vague prior (Pi -> 0)."""
    from bayesdp.inference.closed_form import prior_variance_split

    rng = np.random.default_rng(0)
    B = rng.normal(size=(4, 4))
    A = B @ B.T
    Pi = np.diag(rng.uniform(0.5, 2.0, 4))
    V = np.linalg.inv(A + Pi)
    num, den = prior_variance_split(V, Pi)
    np.testing.assert_allclose(den - num, np.diag(V @ A @ V), rtol=1e-10)
    np.testing.assert_allclose(den, np.diag(V), rtol=1e-12)
    assert np.all((num / den > 0) & (num / den < 1))
    num0, den0 = prior_variance_split(np.linalg.inv(Pi), Pi)
    np.testing.assert_allclose(num0 / den0, 1.0, rtol=1e-12)
    V_vague = np.linalg.inv(A + 1e-8 * np.eye(4))
    num1, den1 = prior_variance_split(V_vague, 1e-8 * np.eye(4))
    assert np.all(num1 / den1 < 1e-6)


def test_fast_records_the_prior_share_of_its_closed_form():
    """fast's ``prior_share`` is the closed form's diag(V C^-1 V) / diag(V)."""
    from bayesdp.inference.closed_form import fast_posterior

    sim = bayesdp.simulate(3000, 3, seed=5)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-5, bounds=sim.bounds, nodes=2,
                          seed=3)
    priors = bayesdp.Priors().resolve(rel)
    post = fast_posterior(rel, priors)
    V = post["cov"]
    want = np.diag(V @ np.linalg.inv(priors.C) @ V) / np.diag(V)
    idata = bayesdp.fit(rel, method="fast", seed=0, num_samples=10, num_chains=1)
    np.testing.assert_allclose(idata.posterior.attrs["prior_share"], want, rtol=1e-8)
