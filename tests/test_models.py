"""The numpyro model functions: sites, shapes, and the density they define."""

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
