"""The numpyro model functions: sites, shapes, and the density they define."""

import math

import numpy as np
import pytest

import bayesdp
from bayesdp._jax import enable_x64
from bayesdp.errors import BayesdpInputError
from bayesdp.inference import starts


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
    from bayesdp.releases import layout

    pri = bayesdp.Priors.paper().resolve(3)
    S = closed_form.fixed_s_estimate(rel, "psd+I")
    data = R.model_data(rel, pri, S_fixed=S)
    theta, s2 = np.array([0.1, -0.2, 0.3]), 0.05
    got = float(R.log_joint(R.fixeds_model, data, {"theta": theta, "sigma_y2": s2}))
    want = stats.multivariate_normal(pri.m, pri.C).logpdf(theta)
    want += stats.invgamma(pri.a, scale=pri.b).logpdf(s2)
    Sz = layout.z_noise_covariances(rel)
    for j in range(rel.J):
        want += stats.multivariate_normal(S[j] @ theta, s2 * S[j] + Sz[j]).logpdf(rel.z_hat[j])
    assert np.isclose(got, want, rtol=1e-10)


def test_model_data_rejects_priors_of_wrong_dimension(rel):
    from bayesdp.models import regression as R

    bad = bayesdp.Priors.paper().resolve(2)
    with pytest.raises(BayesdpInputError, match="d=3"):
        R.model_data(rel, bad)


@pytest.mark.parametrize("rotated", [False, True])
def test_noncentred_model_is_the_same_density(rel, rotated):
    """normalx_noncentred_model is normalx_model after the change of variables
    (L_x, W_diag, W_offdiag, theta_std) -> (Sigma_x, S, theta): at any point its log
    density equals the centred one at (Sigma_x, S, theta) plus log |det dS/dW| (jax.jacfwd over
    the d(d+1)/2 free entries of each S_j), log |det dSigma_x/dL_x| (likewise) and
    log |det dtheta/dtheta_std|, up to one constant
    (so theta integrated out and redrawn from its conditional changes nothing). Checked at points with different Sigma_x, W,
    theta and sigma_y2; a wrong Bartlett degree of freedom (negative control) breaks it.
    ``rotated``: with a random orthogonal ``basis`` Q, L_x = chol(Q^T Sigma_x Q) (what ``fit``
    samples), and the same holds with the Jacobian of L_x -> Q L_x L_x^T Q^T."""
    enable_x64()
    import jax
    import jax.numpy as jnp
    from numpyro import handlers

    from bayesdp.models import regression as R

    d = 3
    data = R.model_data(rel, bayesdp.Priors().resolve(rel))
    data = data._replace(n=jnp.array([9.0, 14.0]))  # small n: the chi densities are far from normal
    Q = np.linalg.qr(np.random.default_rng(5).normal(size=(d, d)))[0] if rotated else np.eye(d)
    if rotated:
        data = data._replace(basis=jnp.asarray(Q), Lambda=jnp.asarray(np.diag([2.0, 0.5, 1.0])),
                             prior_factors=None)  # a Lambda that the rotation changes
    iu = np.triu_indices(d)
    il = np.tril_indices(d, -1)

    def S_of(Sigma_x, W_diag, W_offdiag, n):
        A, _ = R.bartlett_cholesky(n, W_diag, W_offdiag)
        Qj = jnp.asarray(Q)  # the model's root of Sigma_x: Q chol(Q^T Sigma_x Q)
        LA = jnp.einsum("ik,jkl->jil", Qj @ jnp.linalg.cholesky(Qj.T @ Sigma_x @ Qj), A)
        return LA @ jnp.swapaxes(LA, -1, -2)

    def log_jac_chol(L):  # Sigma_x = Q L L^T Q^T over the free entries (the site is L_x)
        def f(v):
            M = jnp.asarray(Q) @ jnp.zeros((d, d)).at[iu[1], iu[0]].set(v)
            return (M @ M.T)[iu]
        return jnp.linalg.slogdet(jax.jacfwd(f)(L[iu[1], iu[0]]))[1]

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
        L_x = jnp.linalg.cholesky(jnp.asarray(Q.T) @ Sigma_x @ jnp.asarray(Q))
        nc = {"L_x": L_x, "W_diag": W_diag, "W_offdiag": W_offdiag,
              "theta_std": starts.theta_std_of(data, S, s2, theta), "sigma_y2": s2}
        c = {"Sigma_x": Sigma_x, "S": S, "theta": theta, "sigma_y2": s2}
        lp_nc = R.log_joint(R.normalx_noncentred_model, data, nc)
        jac = log_jac(Sigma_x, W_diag, W_offdiag, data.n) + log_jac_theta + log_jac_chol(L_x)
        diffs.append(float(lp_nc - R.log_joint(R.normalx_model, data, c) - jac))
        # negative control: the centred density with one fewer degree of freedom
        wrong = data._replace(n=data.n - 1.0)
        diffs_wrong.append(float(lp_nc - R.log_joint(R.normalx_model, wrong, c) - jac))
    assert np.ptp(diffs) < 1e-8, diffs
    assert np.ptp(diffs_wrong) > 1e-2, diffs_wrong
    # S is reported as a deterministic site with the value above
    tr = handlers.trace(handlers.substitute(handlers.seed(R.normalx_noncentred_model, 0), nc)
                        ).get_trace(data)
    assert all(tr[k]["type"] == "deterministic" for k in ("S", "theta", "Sigma_x"))
    np.testing.assert_allclose(tr["S"]["value"], S, rtol=1e-12)
    np.testing.assert_allclose(tr["Sigma_x"]["value"], Sigma_x, rtol=1e-12)
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
    back = starts.bartlett_variables(n, L, LA @ np.swapaxes(LA, 1, 2))
    np.testing.assert_allclose(back[0], W_diag, atol=1e-8)
    np.testing.assert_allclose(back[1], W_off, atol=1e-8)


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

    from bayesdp.models import regression as R
    from bayesdp.releases import layout

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
            Sz = layout.z_noise_covariances(rel)[j]
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


def test_intercept_noncentred_model_is_the_same_density(rel_icpt):
    """normalx_intercept_noncentred_model is normalx_intercept_model after the change of
    variables (L_x, mu, v, W_diag, W_offdiag, theta_std) -> (Sigma_x, mu, xbar, W, theta): at
    random points the difference of their log densities is log |det| of the Jacobian of that
    map over the free entries (jax.jacfwd of the whole map, 18 x 18 here), up to one constant.
    The starting-value map intercept_noncentred_position inverts it. Negative control: the
    centred density at n_j + 1 rows breaks the identity."""
    enable_x64()
    import jax
    import jax.numpy as jnp
    from numpyro import handlers

    from bayesdp.models import regression as R

    pri = bayesdp.Priors().resolve(rel_icpt)
    data = R.intercept_model_data(rel_icpt, pri)
    data = data._replace(n=jnp.array([9.0, 14.0]))  # small n: far from normal
    J, p = 2, 2
    iu = np.triu_indices(p)
    il = np.tril_indices(p)
    rng = np.random.default_rng(3)
    diffs, diffs_wrong = [], []
    sizes = [("L_x", 3), ("mu", 2), ("v", 4), ("W_diag", 4), ("W_offdiag", 2), ("theta_std", 3)]

    def unpack(flat):
        out, i = {}, 0
        for k, m in sizes:
            out[k] = flat[i:i + m]
            i += m
        out["L_x"] = jnp.zeros((p, p)).at[il].set(out["L_x"])
        out["v"] = out["v"].reshape(J, p)
        out["W_diag"] = out["W_diag"].reshape(J, p)
        out["W_offdiag"] = out["W_offdiag"].reshape(J, 1)
        return out

    def centred(flat, s2):  # the deterministic sites, as a vector of free entries
        q = unpack(flat)
        q["sigma_y2"] = s2
        tr = handlers.trace(handlers.substitute(
            handlers.seed(R.normalx_intercept_noncentred_model, 0), q)).get_trace(data)
        v = lambda k: tr[k]["value"]  # noqa: E731
        return jnp.concatenate([v("Sigma_x")[iu], v("mu"), v("xbar").ravel(),
                                v("W")[:, iu[0], iu[1]].ravel(), v("theta")])

    jacobian = jax.jit(jax.jacfwd(centred))
    for _ in range(4):
        pt = _intercept_point(rng, J, p, np.asarray(data.n))
        nc = starts.intercept_noncentred_position(data, pt)
        flat = jnp.concatenate([jnp.asarray(nc["L_x"])[il], jnp.asarray(nc["mu"]),
                                jnp.asarray(nc["v"]).ravel(), jnp.asarray(nc["W_diag"]).ravel(),
                                jnp.asarray(nc["W_offdiag"]).ravel(),
                                jnp.asarray(nc["theta_std"])])
        jac = jnp.linalg.slogdet(jacobian(flat, nc["sigma_y2"]))[1]
        back = centred(flat, nc["sigma_y2"])
        want = np.concatenate([pt["Sigma_x"][iu], pt["mu"], pt["xbar"].ravel(),
                               pt["W"][:, iu[0], iu[1]].ravel(), pt["theta"]])
        np.testing.assert_allclose(back, want, rtol=1e-8, atol=1e-10)  # the inverse map
        lp_nc = R.log_joint(R.normalx_intercept_noncentred_model, data, nc)
        diffs.append(float(lp_nc - R.log_joint(R.normalx_intercept_model, data, pt) - jac))
        wrong = data._replace(n=data.n + 1.0)
        diffs_wrong.append(float(lp_nc - R.log_joint(R.normalx_intercept_model, wrong, pt) - jac))
    assert np.ptp(diffs) < 1e-8, diffs
    assert np.ptp(diffs_wrong) > 1e-2, diffs_wrong
