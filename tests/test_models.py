"""The numpyro model functions: sites, shapes, and the density they define."""

import math

import numpy as np
import pytest

import bayesdp
from bayesdp._jax import enable_x64
from bayesdp.errors import BayesdpInputError


@pytest.fixture(scope="module")
def rel():
    sim = bayesdp.simulate(n=400, d=3, seed=4)
    return bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=2,
                           seed=5)


def test_model_sites_and_shapes(rel):
    enable_x64()
    import jax
    from numpyro import handlers

    from bayesdp.models import regression as R

    data = R.model_data(rel, bayesdp.Priors.paper().resolve(3))
    tr = handlers.trace(handlers.seed(R.normalx_model, 0)).get_trace(data)
    assert tr["S"]["value"].shape == (2, 3, 3) and not tr["S"]["is_observed"]
    assert tr["Sigma_x"]["value"].shape == (3, 3)
    assert tr["theta"]["value"].shape == (3,) and tr["sigma_y2"]["value"].shape == ()
    assert tr["S_hat"]["is_observed"] and tr["S_hat"]["value"].shape == (2, 6)
    assert tr["z_hat"]["is_observed"] and tr["z_hat"]["value"].shape == (2, 3)
    assert tr["theta"]["value"].dtype == jax.numpy.float64
    tr = handlers.trace(handlers.seed(R.fixeds_model, 0)).get_trace(data)
    assert set(k for k, v in tr.items() if v["type"] == "sample" and not v["is_observed"]) == {
        "theta", "sigma_y2"}


def test_log_joint_matches_hand_formula(rel):
    """log_density of fixedS at a point equals the sum of the textbook log densities."""
    enable_x64()
    from scipy import stats

    from bayesdp.inference import closed_form
    from bayesdp.models import regression as R

    pri = bayesdp.Priors.paper().resolve(3)
    S = closed_form.fixed_s_estimate(rel, "psd+I")
    data = R.model_data(rel, pri, S_fixed=S)
    theta, s2 = np.array([0.1, -0.2, 0.3]), 0.05
    got = float(R.log_joint(R.fixeds_model, data, {"theta": theta, "sigma_y2": s2}))
    want = stats.multivariate_normal(pri.m, pri.C).logpdf(theta)
    want += stats.invgamma(pri.a, scale=pri.b).logpdf(s2)
    Sz = closed_form.z_noise_covariances(rel)
    for j in range(rel.J):
        want += stats.multivariate_normal(S[j] @ theta, s2 * S[j] + Sz[j]).logpdf(rel.z_hat[j])
    assert np.isclose(got, want, rtol=1e-10)


def test_model_data_rejects_priors_of_wrong_dimension(rel):
    from bayesdp.models import regression as R

    bad = bayesdp.Priors.paper().resolve(2)
    with pytest.raises(BayesdpInputError, match="d=3"):
        R.model_data(rel, bad)


# --------------------------------------------------------------------------------------------
# the normalX model with an intercept (appendix B.2)


@pytest.fixture(scope="module")
def rel_icpt():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(60, 2)) + np.array([3.0, -2.0])
    y = 1.0 + X @ np.array([0.5, -0.3]) + rng.normal(size=60)
    return bayesdp.release(X, y, epsilon=2.0, delta=1e-5, bounds=(6.0, 8.0), nodes=2, seed=7,
                           intercept=True)


def _intercept_point(rng, J, p, n):
    from scipy import stats

    A = rng.normal(size=(p, p))
    Sigma_x = A @ A.T + np.eye(p)
    W = np.stack([stats.wishart(df=n[j] - 1, scale=Sigma_x).rvs(random_state=rng)
                  for j in range(J)]).reshape(J, p, p)
    return {"Sigma_x": Sigma_x, "mu": rng.normal(size=p), "xbar": rng.normal(size=(J, p)),
            "W": W, "theta": rng.normal(size=p + 1), "sigma_y2": 0.7}


@pytest.mark.parametrize("k", [1, 4])
def test_intercept_model_density_matches_hand_formula(rel_icpt, k):
    """log_density of the intercept model at random points equals the textbook densities of
    appendix B.2 written with scipy: InvWishart(Sigma_x), N(mu), N(xbar_j; mu, Sigma_x / n_j),
    Wishart(W_j; n_j - 1, Sigma_x), the S_hat and z_hat likelihoods at the assembled S_j
    (c = sqrt(k) for rows averaged in groups of k)."""
    import dataclasses

    from scipy import stats

    from bayesdp.inference import closed_form
    from bayesdp.models import regression as R

    enable_x64()
    rel = rel_icpt if k == 1 else dataclasses.replace(rel_icpt, average_rows=k,
                                                      n_rows=rel_icpt.n * k + 1)
    pri = bayesdp.Priors().resolve(rel)
    assert pri.Lambda.shape == (2, 2) and pri.mu_cov.shape == (2, 2) and pri.C.shape == (3, 3)
    data = R.intercept_model_data(rel, pri)
    rng = np.random.default_rng(k)
    n = rel.n.astype(float)
    c = math.sqrt(k)
    for _ in range(3):
        pt = _intercept_point(rng, rel.J, 2, n)
        got = float(R.log_joint(R.normalx_intercept_model, data, pt))
        want = stats.invwishart(df=pri.kappa, scale=pri.Lambda).logpdf(pt["Sigma_x"])
        want += stats.multivariate_normal(pri.mu_mean, pri.mu_cov).logpdf(pt["mu"])
        want += stats.multivariate_normal(pri.m, pri.C).logpdf(pt["theta"])
        want += stats.invgamma(pri.a, scale=pri.b).logpdf(pt["sigma_y2"])
        iu = np.triu_indices(3)
        for j in range(rel.J):
            b, W = pt["xbar"][j], pt["W"][j]
            want += stats.multivariate_normal(pt["mu"], pt["Sigma_x"] / n[j]).logpdf(b)
            want += stats.wishart(df=n[j] - 1, scale=pt["Sigma_x"]).logpdf(W)
            S = np.block([[np.array([[n[j] * c**2]]), c * n[j] * b[None, :]],
                          [c * n[j] * b[:, None], W + n[j] * np.outer(b, b)]])
            want += stats.norm(S[iu], rel.sigma_s[j]).logpdf(rel.S_hat[j][iu]).sum()
            Sz = closed_form.z_noise_covariances(rel)[j]
            want += stats.multivariate_normal(S @ pt["theta"], pt["sigma_y2"] * S + Sz).logpdf(
                rel.z_hat[j])
        assert np.isclose(got, want, rtol=1e-10), (got, want)


def test_intercept_model_scatter_has_the_distribution_of_the_rows_statistics():
    """For x_i ~ N(mu, Sigma_x), [1, x]^T [1, x] summed over n rows has the law of the model's
    S (xbar ~ N(mu, Sigma_x / n) and W ~ Wishart(n - 1, Sigma_x) independent, assembled): 4000
    draws of each, means and variances of every entry within 4.5 standard errors."""
    enable_x64()
    import jax
    import jax.numpy as jnp
    import numpyro.distributions as dist

    from bayesdp.models import regression as R

    rng = np.random.default_rng(9)
    n, reps = 7, 4000
    mu = np.array([2.0, -1.0])
    L = np.array([[1.0, 0.0], [0.5, 0.7]])
    rows = rng.standard_normal((reps, n, 2)) @ L.T + mu
    Wd = np.concatenate([np.ones((reps, n, 1)), rows], axis=2)
    direct = np.einsum("rni,rnj->rij", Wd, Wd)
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    Sig = jnp.asarray(L @ L.T)
    xbar = dist.MultivariateNormal(jnp.asarray(mu), Sig / n).sample(k1, (reps,))
    W = dist.Wishart(n - 1.0, scale_matrix=Sig).sample(k2, (reps,))
    model = np.asarray(R.intercept_scatter(jnp.full(reps, float(n)), 1.0, xbar, W))
    a, b = direct.reshape(reps, -1), model.reshape(reps, -1)
    keep = a.std(0) > 0  # the [0, 0] entry is n in both
    assert np.allclose(a[:, ~keep], n) and np.allclose(b[:, ~keep], n)
    se_mean = np.sqrt((a.var(0) + b.var(0)) / reps)[keep]
    assert np.all(np.abs(a.mean(0) - b.mean(0))[keep] < 4.5 * se_mean)
    se_var = np.sqrt(((a - a.mean(0)) ** 4).mean(0) / reps * 2)[keep]
    assert np.all(np.abs(a.var(0) - b.var(0))[keep] < 4.5 * se_var)
    # negative control: Wishart(n) instead of Wishart(n - 1) for the centred scatter is visible
    W_bad = dist.Wishart(float(n), scale_matrix=Sig).sample(k2, (reps,))
    bad = np.asarray(R.intercept_scatter(jnp.full(reps, float(n)), 1.0, xbar, W_bad))
    assert np.any(np.abs(a.mean(0) - bad.reshape(reps, -1).mean(0))[keep] > 6 * se_mean)


def test_intercept_model_data_refuses_plain_releases_and_unresolved_priors(rel, rel_icpt):
    from bayesdp.models import regression as R

    with pytest.raises(BayesdpInputError, match="intercept=True"):
        R.intercept_model_data(rel, bayesdp.Priors.paper().resolve(rel))
    with pytest.raises(BayesdpInputError, match="resolve"):
        R.intercept_model_data(rel_icpt, bayesdp.Priors.paper().resolve(3))
