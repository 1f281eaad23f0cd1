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


def test_noncentred_model_is_the_same_density(rel):
    """normalx_noncentred_model is normalx_model after the change of variables
    (Sigma_x, W_diag, W_offdiag, theta_std) -> (Sigma_x, S, theta): at any point its log
    density equals the centred one at (S, theta) plus log |det dS/dW| (jax.jacfwd over the
    d(d+1)/2 free entries of each S_j) and log |det dtheta/dtheta_std|, up to one constant
    (so theta integrated out and redrawn from its conditional changes nothing). Checked at points with different Sigma_x, W,
    theta and sigma_y2; a wrong Bartlett degree of freedom (negative control) breaks it."""
    enable_x64()
    import jax
    import jax.numpy as jnp
    from numpyro import handlers

    from bayesdp.models import regression as R

    d = 3
    data = R.model_data(rel, bayesdp.Priors().resolve(rel))
    data = data._replace(n=jnp.array([9.0, 14.0]))  # small n: the chi densities are far from normal
    iu = np.triu_indices(d)
    il = np.tril_indices(d, -1)

    def S_of(Sigma_x, W_diag, W_offdiag, n):
        A, _ = R.bartlett_cholesky(n, W_diag, W_offdiag)
        LA = jnp.einsum("ik,jkl->jil", jnp.linalg.cholesky(Sigma_x), A)
        return LA @ jnp.swapaxes(LA, -1, -2)

    def log_jac(Sigma_x, W_diag, W_offdiag, n):
        out = 0.0
        for j in range(2):  # holder j's S_j depends only on its own W
            def f(w):
                S = S_of(Sigma_x, W_diag.at[j].set(w[:d]), W_offdiag.at[j].set(w[d:]), n)
                return S[j][iu]
            Jm = jax.jacfwd(f)(jnp.concatenate([W_diag[j], W_offdiag[j]]))
            out += jnp.linalg.slogdet(Jm)[1]
        return out

    rng = np.random.default_rng(0)
    diffs, diffs_wrong = [], []
    for _ in range(4):
        B = rng.normal(size=(d, d))
        Sigma_x = jnp.asarray(B @ B.T + d * np.eye(d))
        W_diag = jnp.asarray(rng.normal(size=(2, d)))
        W_offdiag = jnp.asarray(rng.normal(size=(2, len(il[0]))))
        theta = jnp.asarray(rng.normal(size=d))
        s2 = jnp.asarray(rng.uniform(0.5, 2.0))
        S = S_of(Sigma_x, W_diag, W_offdiag, data.n)
        # theta = mean + L_P^{-T} theta_std: log |d theta / d theta_std| = -log|L_P|
        _, _, L_P = R.theta_given_s(data, S, s2)
        log_jac_theta = -float(jnp.sum(jnp.log(jnp.diagonal(L_P))))
        nc = {"Sigma_x": Sigma_x, "W_diag": W_diag, "W_offdiag": W_offdiag,
              "theta_std": R.theta_std_of(data, S, s2, theta), "sigma_y2": s2}
        c = {"Sigma_x": Sigma_x, "S": S, "theta": theta, "sigma_y2": s2}
        lp_nc = R.log_joint(R.normalx_noncentred_model, data, nc)
        jac = log_jac(Sigma_x, W_diag, W_offdiag, data.n) + log_jac_theta
        diffs.append(float(lp_nc - R.log_joint(R.normalx_model, data, c) - jac))
        # negative control: the centred density with one fewer degree of freedom
        wrong = data._replace(n=data.n - 1.0)
        diffs_wrong.append(float(lp_nc - R.log_joint(R.normalx_model, wrong, c) - jac))
    assert np.ptp(diffs) < 1e-8, diffs
    assert np.ptp(diffs_wrong) > 1e-2, diffs_wrong
    # S is reported as a deterministic site with the value above
    tr = handlers.trace(handlers.substitute(handlers.seed(R.normalx_noncentred_model, 0), nc)
                        ).get_trace(data)
    assert tr["S"]["type"] == "deterministic" and tr["theta"]["type"] == "deterministic"
    np.testing.assert_allclose(tr["S"]["value"], S, rtol=1e-12)
    np.testing.assert_allclose(tr["theta"]["value"], theta, rtol=1e-9)


def test_bartlett_variables_invert_bartlett_cholesky():
    enable_x64()
    import jax.numpy as jnp

    from bayesdp.models import regression as R

    rng = np.random.default_rng(1)
    n = np.array([50.0, 4000.0])
    W_diag, W_off = rng.normal(size=(2, 4)), rng.normal(size=(2, 6))
    L = np.linalg.cholesky(np.cov(rng.normal(size=(4, 30))) + np.eye(4))
    A, _ = R.bartlett_cholesky(jnp.asarray(n), jnp.asarray(W_diag), jnp.asarray(W_off))
    LA = L @ np.asarray(A)
    back = R.bartlett_variables(n, L, LA @ np.swapaxes(LA, 1, 2))
    np.testing.assert_allclose(back[0], W_diag, atol=1e-8)
    np.testing.assert_allclose(back[1], W_off, atol=1e-8)
