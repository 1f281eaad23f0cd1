"""The default method "eiv" (bayesdp/inference/eiv.py) against its numpyro model
(models/regression.py, eiv_model), closed forms and exact identities."""

import warnings

import numpy as np
import pytest
from scipy import stats

import bayesdp
from bayesdp.inference import eiv
from bayesdp.models import regression
from research_helpers import research_module


def _release(seed=0, n=3000, d=2, J=3, eps=1.0, intercept=False, include_yty=False):
    sim = bayesdp.simulate(n=n, d=d, seed=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # centring advice
        return bayesdp.release(sim.X, sim.y, epsilon=eps, delta=1e-5, bounds=sim.bounds,
                               nodes=J, seed=seed + 1, intercept=intercept,
                               include_yty=include_yty)


def test_fit_default_method_is_eiv():
    rel = _release()
    idata = bayesdp.fit(rel, seed=0)
    assert idata.posterior.attrs["method"] == "eiv"
    assert set(idata.posterior.data_vars) == {"theta", "sigma_y2", "theta_scale"}
    assert idata.posterior["theta"].shape == (4, 1000, 2)
    a = idata.posterior.attrs
    assert a["eiv_converged"] == 1 and a["sigma_y2_max"] == pytest.approx(rel.bounds[1] ** 2)
    s2 = np.asarray(idata.posterior["sigma_y2"])
    assert s2.max() <= rel.bounds[1] ** 2 and s2.min() > 0
    r = idata.posterior["theta_scale"]  # one prior scale for all slopes (the default)
    assert r.dims == ("chain", "draw") and a["eiv_scales"] == "common"
    assert float(r.min()) >= eiv.SCALE_MIN * (1 - 1e-12) and float(r.max()) <= 1.0
    per = bayesdp.fit(rel, seed=0, scales="per-slope")  # one per coefficient: MCMC, checked
    assert per.posterior["theta_scale"].dims == ("chain", "draw", "feature")
    assert per.posterior.attrs["eiv_scales"] == "per-slope" and per.posterior.attrs["converged"]


def test_log_marginal_is_the_gaussian_of_z_hat_with_theta_integrated_out():
    """log_marginal (the per-slope sampler's target) against scipy, with one scale per
    coefficient and with one for all (the closed form's weights use the same Gaussian)."""
    rel = _release(d=3)
    pri = bayesdp.Priors().resolve(rel)
    data = regression.eiv_model_data(rel, pri, scale_min=0.01, sigma_y2_max=100.0)
    theta0 = np.array([0.3, -0.2, 0.5])
    M = 0.7 * data.S_plus + regression.eiv_noise_covariance(data, theta0)
    for r in (np.array([0.05, 0.4, 1.0]), np.array([0.2])):
        C = regression.eiv_prior_covariance(data, r)
        direct = stats.multivariate_normal(data.S_hat @ data.m,
                                           M + data.S_hat @ C @ data.S_hat.T).logpdf(data.z_hat)
        const = -1.5 * np.log(2 * np.pi)  # log_marginal leaves out the constant
        assert eiv.log_marginal(data, M, r) + const == pytest.approx(direct, abs=1e-8)


def test_log_weights_are_the_marginal_likelihood_times_the_prior():
    """Each grid cell's weight is N(z_hat; S_hat m, M + S_hat C_r S_hat^T) times the priors'
    densities in log coordinates (InvGamma(a, b) sigma^2, log-uniform r) times the trapezoidal
    rule's weight (half at each axis's ends): checked against scipy at every cell of a small
    grid."""
    rel = _release(d=3)
    pri = bayesdp.Priors().resolve(rel)
    data = regression.eiv_model_data(rel, pri, scale_min=0.01, sigma_y2_max=100.0)
    theta0 = np.array([0.3, -0.2, 0.5])
    log_s2, log_r = np.linspace(-6, 3, 5), np.linspace(np.log(0.01), 0, 4)
    grid = eiv._grid(data, theta0, log_s2, log_r)
    noise = regression.eiv_noise_covariance(data, theta0)
    direct = np.empty((5, 4))
    for g, ls2 in enumerate(log_s2):
        for h, lr in enumerate(log_r):
            C = regression.eiv_prior_covariance(data, np.exp(lr))
            cov = np.exp(ls2) * data.S_plus + noise + data.S_hat @ C @ data.S_hat.T
            direct[g, h] = (stats.multivariate_normal(data.S_hat @ data.m, cov).logpdf(data.z_hat)
                            + stats.invgamma(pri.a, scale=pri.b).logpdf(np.exp(ls2)) + ls2)
    direct[[0, -1], :] += np.log(0.5)  # the quadrature: the trapezoidal rule's end points
    direct[:, [0, -1]] += np.log(0.5)
    direct -= np.logaddexp.reduce(direct.ravel())
    np.testing.assert_allclose(grid["log_weight"], direct, atol=1e-8)
    # and the conditional mean is eq. 12's with S_hat as design and M as noise
    g, h = 2, 1
    M = np.exp(log_s2[g]) * data.S_plus + noise
    C = regression.eiv_prior_covariance(data, np.exp(log_r[h]))
    P = data.S_hat.T @ np.linalg.solve(M, data.S_hat) + np.linalg.inv(C)
    mu = np.linalg.solve(P, data.S_hat.T @ np.linalg.solve(M, data.z_hat))
    np.testing.assert_allclose(grid["mean"][g, h], mu, rtol=1e-9)
    np.testing.assert_allclose(eiv.cell_precision(data, theta0, np.exp(log_s2[g]),
                                                  np.exp(log_r[h])), P, rtol=1e-9)


def test_yty_weights_add_the_models_yty_factor():
    """With y^T y in the release, each cell's weight gains eiv_model's y^T y factor:
    N(yty_hat; mean, var) with the moments of eiv_yty_moments at the cell's conditional
    N(mu, P^-1) of theta, checked cell by cell against scipy (weights without y^T y from the
    same release's statistics as the base)."""
    rel = _release(d=3, include_yty=True)
    pri = bayesdp.Priors().resolve(rel)
    data = regression.eiv_model_data(rel, pri, scale_min=0.01, sigma_y2_max=100.0)
    assert data.yty_hat == pytest.approx(rel.yty_hat.sum()) and data.n == rel.n.sum()
    theta0 = np.array([0.3, -0.2, 0.5])
    log_s2, log_r = np.linspace(-6, 3, 5), np.linspace(np.log(0.01), 0, 4)
    grid = eiv._grid(data, theta0, log_s2, log_r)
    base = eiv._grid(data._replace(yty_hat=None), theta0, log_s2, log_r)
    noise = regression.eiv_noise_covariance(data, theta0)
    extra = np.empty((5, 4))
    for g, ls2 in enumerate(log_s2):
        M = np.exp(ls2) * data.S_plus + noise
        for h, lr in enumerate(log_r):
            P = eiv.cell_precision(data, theta0, np.exp(ls2), np.exp(lr))
            mean, var = regression.eiv_yty_moments(
                data, np.exp(ls2), base["mean"][g, h], np.linalg.inv(P), M,
                regression.eiv_yty_noise(data, theta0))
            extra[g, h] = stats.norm(mean, np.sqrt(var)).logpdf(data.yty_hat)
    direct = base["log_weight"] + extra
    direct -= np.logaddexp.reduce(direct.ravel())
    np.testing.assert_allclose(grid["log_weight"], direct, atol=1e-8)
    np.testing.assert_allclose(grid["mean"], base["mean"], rtol=1e-12)  # theta | cell: z only


def _yty_monte_carlo(k_scale, reps=4000, seed=5):
    """Standardised residuals (yty_hat - mean) / sqrt(var) of eiv_yty_moments at the true theta
    (cov = 0) over simulated releases of fixed rows: y = X theta + N(0, sigma_y^2), symmetric
    noise on S, noise on z and y^T y, and the pivots z_hat - S_hat theta; ``k_scale``
    multiplies the noise covariance k."""
    rng = np.random.default_rng(seed)
    n, d = 400, 3
    X = rng.normal(size=(n, d)) * np.array([0.2, 0.1, 0.05])
    S = X.T @ X
    theta, s2 = np.array([0.8, -1.5, 2.0]), 0.5
    ss, sz, syy = 3.0, 6.0, 2.0  # noise sds on S entries, z, y^T y
    k = d * (d + 1) // 2
    data = regression.EivData(S_hat=None, z_hat=None, S_plus=S, noise_SS=np.full(k, ss ** 2),
                              noise_Sz=None, noise_zz=sz ** 2 * np.eye(d), slopes=np.ones(d),
                              scale_min=0.01, sigma_y2_max=np.inf, theta_plugin=theta, a=1.0,
                              b=1.0, m=np.zeros(d), C=np.eye(d), n=float(n), yty_hat=None,
                              yty_var=syy ** 2)
    M = s2 * S + regression.eiv_noise_covariance(data, theta)
    var_eta, kv = regression.eiv_yty_noise(data, theta)
    iu = np.triu_indices(d)
    out, pivot = np.empty(reps), np.empty((reps, d))
    for r in range(reps):
        y = X @ theta + np.sqrt(s2) * rng.standard_normal(n)
        E = np.zeros((d, d))
        E[iu] = ss * rng.standard_normal(k)
        E = E + np.triu(E, 1).T
        dr = data._replace(S_hat=S + E, z_hat=X.T @ y + sz * rng.standard_normal(d))
        yty = y @ y + syy * rng.standard_normal()
        mean, var = regression.eiv_yty_moments(dr, s2, theta, np.zeros((d, d)), M,
                                               (var_eta, k_scale * kv))
        out[r] = (yty - mean) / np.sqrt(var)
        pivot[r] = dr.z_hat - dr.S_hat @ theta
    return out, pivot


def test_yty_moments_match_monte_carlo():
    """eiv_yty_moments's mean and variance of yty_hat given z_hat, at the true theta, against
    4000 simulated releases whose noise on S and z dominates: the standardised residuals have
    mean 0 (within 4 standard errors), variance 1 (within 5 standard errors of a chi-square)
    and no correlation with the pivot z_hat - S_hat theta they are conditioned on (each within
    4 standard errors). Negative control: without the covariance k between the y^T y noise and
    the pivot (the conditioning left out) the residuals correlate with the pivot."""
    reps = 4000
    u, pivot = _yty_monte_carlo(1.0, reps)
    assert abs(u.mean()) < 4 / np.sqrt(reps), u.mean()
    assert abs(u.var() - 1) < 5 * np.sqrt(2 / reps), u.var()
    corr = lambda u, p: np.array([np.corrcoef(u, p[:, i])[0, 1] for i in range(p.shape[1])])
    assert np.all(np.abs(corr(u, pivot)) < 4 / np.sqrt(reps)), corr(u, pivot)
    bad, pivot = _yty_monte_carlo(0.0, reps)
    assert np.any(np.abs(corr(bad, pivot)) > 4 / np.sqrt(reps)), corr(bad, pivot)


@pytest.mark.slow
def test_yty_pins_sigma_y2_down():
    """A release with y^T y determines sigma_y^2: its 90% interval holds the rows' residual
    variance (about 1) and is less than a fifth as wide as that of the same rows' release
    without y^T y, whose sigma_y^2 follows its prior (measured: 0.95-1.29 against
    0.008-5.2)."""
    sim = bayesdp.simulate(n=100_000, d=3, seed=4)
    fits = {}
    for yty in (False, True):
        rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds,
                              nodes=2, seed=9, include_yty=yty)
        fits[yty] = np.asarray(bayesdp.fit(rel, seed=0).posterior["sigma_y2"]).ravel()
    resid = np.mean((sim.y - sim.X @ np.linalg.lstsq(sim.X, sim.y, rcond=None)[0]) ** 2)
    lo, hi = np.quantile(fits[True], [0.05, 0.95])
    assert lo <= resid <= hi, (lo, resid, hi)
    width = lambda s: np.subtract(*np.quantile(s, [0.95, 0.05]))
    assert width(fits[True]) < 0.2 * width(fits[False])


def test_pooling_holders_is_exact():
    """The posterior depends on the holders only through their sums: a release of J = 4
    holders and the same statistics summed into one holder (noise variances added) give the
    same posterior."""
    rel = _release(J=4)
    one = bayesdp.Release(S_hat=rel.S_hat.sum(0, keepdims=True),
                          z_hat=rel.z_hat.sum(0, keepdims=True), n=[int(rel.n.sum())],
                          sigma_s=[float(np.sqrt((rel.sigma_s ** 2).sum()))],
                          sigma_z=[float(np.sqrt((rel.sigma_z ** 2).sum()))],
                          epsilon=rel.epsilon, delta=rel.delta, bounds=rel.bounds)
    pri = bayesdp.Priors().resolve(rel)
    a, b = eiv.eiv_posterior(rel, pri), eiv.eiv_posterior(one, pri)
    np.testing.assert_allclose(a["theta_mean"], b["theta_mean"], rtol=1e-9)
    np.testing.assert_allclose(a["log_weight"], b["log_weight"], atol=1e-9)


def test_the_noise_on_s_widens_theta():
    """Negative control of the errors-in-variables term: with the S noise left out (noise_SS
    set to zero) the posterior of theta is narrower, by the closed form's own precision."""
    rel = _release(d=2, eps=0.5)
    pri = bayesdp.Priors().resolve(rel)
    post = eiv.eiv_posterior(rel, pri)
    data = post["data"]
    P_eiv = eiv.cell_precision(data, post["theta_plugin"], 0.5, 0.5)
    P_no = eiv.cell_precision(data._replace(noise_SS=0 * data.noise_SS), post["theta_plugin"],
                              0.5, 0.5)
    assert np.all(np.linalg.eigvalsh(P_no - P_eiv) > 0)  # strictly more precise without it


@pytest.mark.parametrize("intercept", [False, True])
def test_prior_share_of_a_cell_is_its_gaussians(intercept):
    """eiv.prior_share over one cell (sigma_y^2, r) is diag(V Pi V) / diag(V) of that cell's
    Gaussian (P = cell_precision, Pi = (D_r C D_r)^-1 built here with explicit inverses, an
    intercept's entry of D_r 1, V = P^-1 by an explicit inverse); over several cells, the
    weighted ratio of the sums; with one scale per coefficient ((N, d) scales), the same with
    D_r = diag(r); grid_cells holds the posterior's mass."""
    rel = _release(d=3, intercept=intercept)
    post = eiv.eiv_posterior(rel, bayesdp.Priors().resolve(rel))
    data = post["data"]
    d = len(data.z_hat)
    s2, r, w = eiv.grid_cells(post)
    assert abs(w.sum() - 1.0) < 1e-5 and np.all(np.diff(w) <= 0)

    def prior_precision(r):  # r: one scale, or one per coefficient
        r = np.broadcast_to(r, d)
        D = np.diag(np.where(np.arange(d) == 0, 1.0, r) if intercept else r)
        return np.linalg.inv(D @ data.C @ D)

    nums, dens = [], []
    for k in range(3):
        V = np.linalg.inv(eiv.cell_precision(data, post["theta_plugin"], s2[k], r[k]))
        Pi = prior_precision(r[k])
        nums.append(np.diag(V @ Pi @ V))
        dens.append(np.diag(V))
        np.testing.assert_allclose(eiv.prior_share(data, s2[k:k + 1], r[k:k + 1]),
                                   nums[-1] / dens[-1], rtol=1e-8)
    np.testing.assert_allclose(eiv.prior_share(data, s2[:3], r[:3], w[:3]),
                               w[:3] @ np.array(nums) / (w[:3] @ np.array(dens)), rtol=1e-8)
    # one scale per coefficient: D_r = diag(r_1, ..., r_d) (an intercept's r ignored)
    rk = np.array([[0.3, 0.05, 1.0, 0.2][:d], [0.9, 0.5, 0.02, 0.7][:d]])
    num, den = [], []
    for k in range(2):
        Pi = prior_precision(rk[k])
        A = eiv.cell_precision(data, post["theta_plugin"], s2[k], 1.0) \
            - np.linalg.inv(data.C)  # the release's precision (r = 1: Pi = C^-1)
        V = np.linalg.inv(A + Pi)
        num.append(np.diag(V @ Pi @ V))
        den.append(np.diag(V))
    np.testing.assert_allclose(eiv.prior_share(data, s2[:2], rk, w[:2]),
                               w[:2] @ np.array(num) / (w[:2] @ np.array(den)), rtol=1e-6)


def test_prior_share_follows_what_the_release_measures_per_slope():
    """As the docs' example (:func:`test_docs_prior_share_example_runs`, the common scale),
    with one prior scale per slope: a feature the release barely sees (its column 0.02 of the
    other's: X^T X's eigenvalue 2 under an S noise sd of 28 at eps = 1) gets most of its
    coefficient's variance from the prior, the well-measured one little; at eps = 1000 (noise
    sd 0.19) the same data's shares fall (negative control: the share follows the release, not
    the feature). The fit records it per coefficient and report.theta_table shows it."""
    from bayesdp import report

    rng = np.random.default_rng(3)
    X = rng.normal(size=(20_000, 2)) / 2 * np.array([1.0, 0.02])
    y = X @ np.array([0.5, 0.5]) + 0.1 * rng.standard_normal(len(X))
    share = {}
    for eps in (1.0, 1000.0):
        rel = bayesdp.release(X, y, epsilon=eps, delta=1e-5, bounds=(2.5, 1.5), nodes=1,
                              seed=1)
        idata = bayesdp.fit(rel, seed=0, scales="per-slope", num_samples=500)
        share[eps] = np.asarray(idata.posterior.attrs["prior_share"])
        np.testing.assert_allclose(report.theta_table(idata)["prior share"], share[eps])
    assert share[1.0][1] > 0.7 and share[1.0][1] > 2 * share[1.0][0], share
    assert share[1000.0][1] < 0.2 and share[1000.0][0] < 0.01, share


def test_intercept_prior_is_not_scaled():
    rel = _release(d=3, intercept=True)
    pri = bayesdp.Priors().resolve(rel)
    data = regression.eiv_model_data(rel, pri, scale_min=0.01, sigma_y2_max=1.0)
    C = regression.eiv_prior_covariance(data, 0.1)
    assert C[0, 0] == pytest.approx(pri.C[0, 0])
    np.testing.assert_allclose(np.diag(C)[1:], 0.01 * np.diag(pri.C)[1:])
    idata = bayesdp.fit(rel, method="eiv", seed=1)
    assert list(idata.posterior["theta"].coords["feature"].values)[0] == "intercept"


def test_zero_noise_and_a_singular_s_give_finite_draws():
    """No noise (sigma 0) and a duplicated column: the z covariance is singular along the
    null space of S, which the runner completes exactly; the draws are finite."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 2))
    X = np.column_stack([X, X[:, 0]])
    y = X @ np.array([1.0, -0.5, 0.0]) + 0.1 * rng.normal(size=400)
    S, z = X.T @ X, X.T @ y
    rel = bayesdp.Release(S_hat=S[None], z_hat=z[None], n=[400], sigma_s=[0.0], sigma_z=[0.0],
                          bounds=(5.0, 5.0))
    idata = bayesdp.fit(rel, method="eiv", seed=0)
    th = np.asarray(idata.posterior["theta"]).reshape(-1, 3)
    assert np.isfinite(th).all()
    # the identified combination theta_0 + theta_2 is pinned down
    assert abs(np.mean(th[:, 0] + th[:, 2]) - 1.0) < 0.05


@pytest.mark.slow
@pytest.mark.parametrize("include_yty", [False, True])
def test_grid_runner_matches_nuts_on_the_model(include_yty):
    """The runner's posterior is the numpyro model's (eiv_model with the runner's plug-in
    theta_0, with and without y^T y's factor): NUTS on the model agrees on theta's mean and sd
    within 5 Monte Carlo standard errors of NUTS's estimates (from the effective sample sizes of
    theta and of its squared deviation) and on sigma_y^2's median within 10%. NUTS is the noisy
    side: theta and its prior scale form a funnel, so its sd of theta varied 1.00-1.26 over
    three keys where the grid's is 1.16; a fixed 10% tolerance on the sd failed on one key."""
    import jax
    from numpyro.infer import MCMC, NUTS

    from bayesdp._jax import enable_x64

    enable_x64()
    rel = _release(d=2, J=2, n=4000, eps=2.0, include_yty=include_yty)
    pri = bayesdp.Priors().resolve(rel)
    post = eiv.eiv_posterior(rel, pri)
    theta, s2, _ = eiv.draw(post, np.random.default_rng(0), (4, 2000))
    theta = theta.reshape(-1, 2)
    from numpyro.diagnostics import effective_sample_size

    mcmc = MCMC(NUTS(regression.eiv_model, target_accept_prob=0.95), num_warmup=1000,
                num_samples=2000, num_chains=4, progress_bar=False, chain_method="sequential")
    mcmc.run(jax.random.PRNGKey(0), regression.eiv_arrays(post["data"]))
    chains = np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])  # (4, 2000, 2)
    nuts, nuts_s2 = chains.reshape(-1, 2), np.asarray(mcmc.get_samples()["sigma_y2"])
    se_mean = nuts.std(0) / np.sqrt(effective_sample_size(chains))
    sq = (chains - nuts.mean(0)) ** 2  # Var = E[sq]; sd = sqrt(Var): se(sd) = se(Var) / (2 sd)
    se_sd = sq.reshape(-1, 2).std(0) / np.sqrt(effective_sample_size(sq)) / (2 * nuts.std(0))
    assert np.all(np.abs(nuts.mean(0) - theta.mean(0)) < 5 * se_mean)
    assert np.all(np.abs(nuts.std(0) - theta.std(0)) < 5 * se_sd), (nuts.std(0), theta.std(0),
                                                                      se_sd)
    assert np.median(nuts_s2) == pytest.approx(np.median(s2), rel=0.1)


def _sbc_release(rng, priors, n=10_000, d=3, J=2, eps=1.0, bounds=(1.0, 30.0), per_slope=False,
                 include_yty=False):
    """theta, sigma_y^2 drawn from eiv_model's prior (r log-uniform, theta ~ N(0, r^2 C),
    sigma_y^2 ~ InvGamma(a, b) below B_y^2), rows with ||x|| <= B_x, and their release. A draw
    whose |y| would reach B_y (which the release would clip) is drawn again (rare here:
    |x^T theta| <= ||theta||). Returns ([theta, sigma_y^2], release)."""
    X = rng.normal(size=(n, d)) * np.array([1.0, 0.6, 0.3]) / 3.0
    X /= np.maximum(1.0, np.linalg.norm(X, axis=1) / bounds[0])[:, None]
    while True:
        r = np.exp(rng.uniform(np.log(eiv.SCALE_MIN), 0.0, size=d if per_slope else 1))
        theta = rng.multivariate_normal(priors.m, priors.C * r[:, None] * r[None, :])
        s2 = stats.invgamma(priors.a, scale=priors.b).rvs(random_state=rng)
        y = X @ theta + np.sqrt(s2) * rng.standard_normal(n)
        if s2 <= bounds[1] ** 2 and np.abs(y).max() < bounds[1]:
            break
    rel = bayesdp.release(X, y, epsilon=eps, delta=1e-5, bounds=bounds, nodes=J,
                          seed=int(rng.integers(2**31)), include_yty=include_yty)
    return np.append(theta, s2), rel


def _sbc_ranks(fit, reps, seed, L=99, per_slope=False, priors=None, **release):
    """Ranks of the true values among L draws of each fit (0..L), replicate by coefficient;
    ``fit`` returns draws (L, d) of theta or (L, d + 1) of [theta, sigma_y^2]."""
    rng = np.random.default_rng(seed)
    if priors is None:
        priors = bayesdp.Priors(m=np.zeros(3), C=25.0 * np.eye(3), a=3.0, b=0.5)
    ranks = []
    for _ in range(reps):
        truth, rel = _sbc_release(rng, priors, per_slope=per_slope, **release)
        draws = fit(rel, priors, int(rng.integers(2**31)))[:L]
        ranks.append((draws < truth[:draws.shape[1]]).sum(axis=0))
    return np.array(ranks)


def _eiv_draws(rel, priors, seed):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bayesdp.ConvergenceWarning)  # 99 draws: ESS < 400
        idata = bayesdp.fit(rel, method="eiv", priors=priors, seed=seed, num_chains=1,
                            num_samples=99)
    return np.asarray(idata.posterior["theta"])[0]


def test_per_slope_target_is_the_models_density():
    """The sampler's target is eiv_model's: at random (theta, r, sigma_y^2), numpyro's log
    joint density of the model (one scale per coefficient) equals log_marginal (theta
    integrated out) + log N(theta; mu, P^-1) (theta given the rest, eq. 12) + the priors of r
    and sigma_y^2. (NUTS on this centred model diverges, theta and r_k forming a funnel, so the
    sampler is checked against the model's density and, below, the enumerated posterior.)"""
    from numpyro.infer.util import log_density

    from bayesdp._jax import enable_x64

    enable_x64()
    rel = _release(d=3, J=2, n=4000, eps=2.0)
    pri = bayesdp.Priors().resolve(rel)
    data = regression.eiv_model_data(rel, pri, scale_min=0.01, sigma_y2_max=50.0,
                                     theta_plugin=np.array([0.2, -0.1, 0.4]))
    rng = np.random.default_rng(5)
    for _ in range(5):
        theta, r = rng.normal(size=3), np.exp(rng.uniform(np.log(0.01), 0.0, size=3))
        s2 = float(np.exp(rng.uniform(-3, 1)))
        joint, _ = log_density(regression.eiv_model, (regression.eiv_arrays(data),), {},
                               {"theta": theta, "theta_scale": r, "sigma_y2": s2})
        M = s2 * data.S_plus + regression.eiv_noise_covariance(data, data.theta_plugin)
        C = regression.eiv_prior_covariance(data, r)
        P = data.S_hat.T @ np.linalg.solve(M, data.S_hat) + np.linalg.inv(C)
        mu = np.linalg.solve(P, data.S_hat.T @ np.linalg.solve(M, data.z_hat)
                             + np.linalg.solve(C, data.m))
        parts = (eiv.log_marginal(data, M, r) - 1.5 * np.log(2 * np.pi)
                 + stats.multivariate_normal(mu, np.linalg.inv(P)).logpdf(theta)
                 + stats.loguniform(0.01, 1.0).logpdf(r).sum()
                 + stats.invgamma(pri.a, scale=pri.b).logpdf(s2))
        assert float(joint) == pytest.approx(parts, abs=1e-6)


@pytest.mark.slow
def test_per_slope_sampler_matches_the_enumerated_grid_posterior():
    """With an intercept and two slopes the sampler's grid posterior can be enumerated: every
    (r_1, r_2, sigma_y^2) of the grids weighted by log_marginal and the priors, theta's mean and
    covariance in each cell by eq. 12 (written out here apart from the sampler's). The draws
    match the mixture's mean within 5 Monte Carlo standard errors and its sd within 5%; the
    intercept's r_k follows its log-uniform prior (mean of log r within 5 se). (NUTS on the
    centred model diverges here: theta and r_k form a funnel.)"""
    import numpyro

    rel = _release(d=2, J=2, n=4000, eps=2.0, intercept=True)
    pri = bayesdp.Priors().resolve(rel)
    post = eiv.eiv_posterior(rel, pri)
    theta, s2, r, data = eiv.per_slope_draws(post, np.random.default_rng(0), 4, 300, 2000)
    lr = np.linspace(np.log(eiv.SCALE_MIN), 0.0, eiv.SCALE_GRID)
    grid_s2 = post["sigma_y2"]
    noise = regression.eiv_noise_covariance(data, data.theta_plugin)  # adapted in warm-up
    logw, means, covs = [], [], []
    for v in grid_s2:
        M = v * data.S_plus + noise
        Mi = np.linalg.inv(M)
        for a in lr:
            for b in lr:
                scale = np.exp(np.array([0.0, a, b]))  # the intercept's entry is not used
                C = regression.eiv_prior_covariance(data, scale)
                Ci = np.linalg.inv(C)
                P = data.S_hat.T @ Mi @ data.S_hat + Ci
                cov = np.linalg.inv(P)
                means.append(cov @ (data.S_hat.T @ Mi @ data.z_hat + Ci @ data.m))
                covs.append(cov)
                logw.append(stats.multivariate_normal(
                    data.S_hat @ data.m, M + data.S_hat @ C @ data.S_hat.T).logpdf(data.z_hat)
                    + stats.invgamma(pri.a, scale=pri.b).logpdf(v) + np.log(v))
    w = np.exp(np.array(logw) - np.max(logw))
    w /= w.sum()
    means, covs = np.array(means), np.array(covs)
    mean = w @ means
    var = w @ (np.diagonal(covs, axis1=1, axis2=2) + means ** 2) - mean ** 2
    ess = numpyro.diagnostics.effective_sample_size(theta)
    se = np.sqrt(var / ess)
    flat = theta.reshape(-1, 3)
    assert np.all(np.abs(flat.mean(0) - mean) < 5 * se), (flat.mean(0), mean, se)
    np.testing.assert_allclose(flat.std(0), np.sqrt(var), rtol=0.05)
    log_r0 = np.log(r[..., 0]).ravel()  # uniform on [log 0.01, 0]: mean log(0.01) / 2
    assert abs(log_r0.mean() - np.log(eiv.SCALE_MIN) / 2) < 5 * np.log(100) / np.sqrt(12 * len(
        log_r0))


@pytest.mark.slow
def test_simulation_based_calibration():
    """SBC (Talts et al. 2018) of eiv on data drawn from its model's prior, with the release's
    noise on S mattering (eps = 1, 2 holders of 5000 rows, d = 3, theta's prior sd 5 r): the
    ranks of the true theta among 99 draws are uniform (chi-square over 10 bins, each
    coefficient at level 0.01 / 3). Negative control: the same releases with sigma_s stated as
    0 (the noise on S left out, as the fixedS methods do) fail it (at 100 replications the
    p-values were 0.005, 2e-4 and 6e-4)."""
    reps, bins = 200, 10

    def p_values(ranks):
        counts = np.stack([np.bincount(ranks[:, k] * bins // 100, minlength=bins)
                           for k in range(ranks.shape[1])])
        return stats.chisquare(counts, axis=1).pvalue

    ok = p_values(_sbc_ranks(_eiv_draws, reps, seed=11))
    assert np.all(ok > 0.01 / 3), ok

    def without_s_noise(rel, priors, seed):
        import dataclasses

        return _eiv_draws(dataclasses.replace(rel, sigma_s=0 * rel.sigma_s, privacy_cost=None),
                          priors, seed)

    bad = p_values(_sbc_ranks(without_s_noise, reps, seed=11))
    assert np.any(bad < 1e-4), bad


def _sbc_p_values(ranks, bins=10, L=99):
    """Chi-square p-values of uniform ranks (0..L) over ``bins`` bins, one per column."""
    counts = np.stack([np.bincount(ranks[:, k] * bins // (L + 1), minlength=bins)
                       for k in range(ranks.shape[1])])
    return stats.chisquare(counts, axis=1).pvalue


@pytest.mark.slow
def test_simulation_based_calibration_with_yty():
    """SBC of eiv on releases with y^T y (include_yty=True), where y^T y determines sigma_y^2:
    theta's prior sd 1 r and B_y = 8, so the noise on y^T y is small beside n sigma_y^2 and
    y is rarely clipped; ranks of theta and sigma_y^2 among 99 draws are uniform (chi-square,
    level 0.01 / 4 each). Negative control: the same releases with the noise on y^T y stated
    as 0 give sigma_y^2 too narrow a posterior and fail."""
    import dataclasses

    priors = bayesdp.Priors(m=np.zeros(3), C=np.eye(3), a=3.0, b=0.5)
    setting = dict(priors=priors, bounds=(1.0, 8.0), include_yty=True)

    def draws(rel, priors, seed):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bayesdp.ConvergenceWarning)
            idata = bayesdp.fit(rel, method="eiv", priors=priors, seed=seed, num_chains=1,
                                num_samples=99)
        return np.column_stack([np.asarray(idata.posterior["theta"])[0],
                                np.asarray(idata.posterior["sigma_y2"])[0]])

    ok = _sbc_p_values(_sbc_ranks(draws, 200, seed=12, **setting))
    assert np.all(ok > 0.01 / 4), ok

    def without_yty_noise(rel, priors, seed):
        return draws(dataclasses.replace(rel, sigma_yty=0 * rel.sigma_yty, privacy_cost=None),
                     priors, seed)

    bad = _sbc_p_values(_sbc_ranks(without_yty_noise, 200, seed=12, **setting))
    assert bad[-1] < 1e-4, bad


@pytest.mark.research  # 6 minutes: run by hand, `pytest -m research tests/inference/test_eiv.py`
@pytest.mark.xfail(strict=True, reason="known defect: eiv with scales='per-slope' fails SBC for "
                   "the weakly measured third coefficient (U-shaped ranks, p about 1e-8); the "
                   "sampler matches its enumerated grid posterior and the true theta as plug-in "
                   "fails too: the likelihood's flat prior on S is at fault where the noise "
                   "swamps S (docs/evidence/coverage-real-data.md)")
def test_simulation_based_calibration_per_slope():
    """The same SBC for scales="per-slope" (theta's prior drawn with one scale per
    coefficient; 99 draws, one in 10 of a chain of 990). Fails today: see the xfail reason."""
    def draws(rel, priors, seed):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bayesdp.ConvergenceWarning)
            idata = bayesdp.fit(rel, method="eiv", priors=priors, seed=seed, num_chains=1,
                                num_warmup=200, num_samples=990, scales="per-slope")
        return np.asarray(idata.posterior["theta"])[0, ::10]

    ranks = _sbc_ranks(draws, 100, seed=11, per_slope=True)
    counts = np.stack([np.bincount(ranks[:, k] * 10 // 100, minlength=10) for k in range(3)])
    assert np.all(stats.chisquare(counts, axis=1).pvalue > 0.01 / 3)


def _calibration_benchmark():
    """research/calibration_realdata.py."""
    return research_module("calibration_realdata")


@pytest.mark.slow
def test_real_data_cell_covers_as_it_says():
    """One cell of research/calibration_realdata.py (PowerPlant, J = 5, eps = 1, 40
    releases; a cell where eiv meets the issue's goal, docs/methods.md): eiv's 90% intervals
    hold the non-private posterior mean within 3 binomial sd of the calibrated target (sd from
    40 releases, the coefficients of one release counted as one), rms z in [0.75, 1.25], RMSE
    at most 1.1 x adaSSP's. Negative control: fast, which fixes S at the noisy S_hat, fails the
    same test (measured: coverage 0.69-0.70, rms z 1.50-1.57 over 20 releases)."""
    bench = _calibration_benchmark()
    prepared = bench.load("powerplant")
    if prepared is None:
        pytest.skip("PowerPlant not found (../shared/data/uci or $BAYESDP_DATA_DIR)")
    releases = 40
    rows = {r["method"]: r for r in bench.run_cell("powerplant", 5, 1.0, ["eiv", "fast"],
                                                   releases, prepared)}
    e, f = rows["eiv"], rows["fast"]
    tol = 3 * np.sqrt(e["target"] * (1 - e["target"]) / releases)
    assert abs(e["cover"] - e["target"]) <= tol, e
    assert 0.75 <= e["rms_z"] <= 1.25 and e["ratio"] <= 1.1, e
    assert f["cover"] < e["target"] - tol or f["rms_z"] > 1.25, f  # fast fails the same test


@pytest.mark.slow
def test_real_data_prediction_intervals_with_yty():
    """One cell of research/calibration_realdata.py for prediction (PowerPlant, J = 1,
    eps = 1, 20 releases with y^T y; measured 0.89 at 0.95 of the non-private width): eiv's 90%
    prediction intervals hold 0.85-0.95 of the held-out y, the issue's goal, at most 1.3 times
    as wide as the non-private posterior's. Negative control: the same releases without y^T y
    (sigma_y^2 from its prior) hold below 0.85 (measured 0.72 at 0.64 of the width)."""
    bench = _calibration_benchmark()
    prepared = bench.load("powerplant")
    if prepared is None:
        pytest.skip("PowerPlant not found (../shared/data/uci or $BAYESDP_DATA_DIR)")
    rows = {r["method"]: r for r in bench.run_cell(
        "powerplant", 1, 1.0, ["eiv:include_yty=true", "eiv"], 20, prepared)}
    good, bad = rows["eiv:include_yty=true"], rows["eiv"]
    assert 0.85 <= good["pred_cov"] <= 0.95 and good["pred_w"] <= 1.3, good
    assert bad["pred_cov"] < 0.85, bad


@pytest.mark.parametrize("option, value", [("scale_min", 0.0), ("scale_min", 1.5),
                                           ("scale_min", "a"), ("sigma_y2_max", -1.0),
                                           ("sigma_y2_max", float("inf"))])
def test_bad_options_are_named(option, value):
    with pytest.raises(bayesdp.BayesdpInputError, match=option):
        bayesdp.fit(_release(), method="eiv", seed=0, **{option: value})


def test_rank_one_update_is_log_marginal():
    """The per-slope sampler's fast path for a diagonal C (one Cholesky per coordinate instead
    of one per grid point) gives log_marginal's differences over the grid of r_j exactly."""
    rel = _release(d=3)
    pri = bayesdp.Priors().resolve(rel)
    data = regression.eiv_model_data(rel, pri, scale_min=0.01, sigma_y2_max=100.0)
    M = 0.3 * data.S_plus + regression.eiv_noise_covariance(data, np.array([0.3, -0.2, 0.5]))
    scale = np.array([[0.05, 0.4, 1.0], [0.2, 0.02, 0.5]])
    values = np.exp(np.linspace(np.log(0.01), 0.0, 7))
    for j in range(3):
        fast = eiv._rank_one_log_marginal(data, np.stack([M, M]), scale.copy(), j, values)
        trial = np.repeat(scale[:, None, :], 7, axis=1)
        trial[:, :, j] = values
        full = eiv.log_marginal(data, M, trial)
        np.testing.assert_allclose(fast - fast[:, :1], full - full[:, :1], atol=1e-8)


def _fixed_design_sbc():
    """research/eiv_fixed_design_sbc.py."""
    return research_module("eiv_fixed_design_sbc")


@pytest.mark.research  # 15 s: run by hand, `pytest -m research tests/inference/test_eiv.py`
@pytest.mark.xfail(strict=True, reason="known limit: at a fixed design whose small eigenvalues "
                   "the noise on S swamps, eiv's flat prior on S makes the default's intervals "
                   "too narrow (U-shaped PITs, p about 1e-10; "
                   "docs/evidence/coverage-real-data.md)")
def test_fixed_design_calibration_where_the_noise_swamps_s():
    """SBC at a fixed design (theta and sigma_y^2 from the prior, rows drawn with feature scales
    log-uniform in [0.05, 1]) of the default eiv posterior, enumerated exactly over its grid:
    each coefficient's PIT uniform (chi-square, level 0.01 / 3). Fails today: see the reason.
    The same check with S released without noise passes (the control below)."""
    module = _fixed_design_sbc()
    pits = module.enumerated("broad", "common", 200)
    assert all(module._counts(pits[:, k])[1] > 0.01 / 3 for k in range(3))


@pytest.mark.slow
def test_fixed_design_calibration_without_noise_on_s():
    """The control of the test above, and what pins its cause on the noise on S: the same
    fixed-design SBC with S released exactly (z_hat's noise kept, the per-slope and common
    posteriors enumerated) gives uniform PITs (chi-square, level 0.01 / 3 per coefficient);
    with the release's noise on S, per-slope fails (the third coefficient, p about 3e-5)."""
    module = _fixed_design_sbc()
    for scales in ("per-slope", "common"):
        pits = module.enumerated("nonoise", scales, 200)
        assert all(module._counts(pits[:, k])[1] > 0.01 / 3 for k in range(3)), scales
    pits = module.enumerated("plugin", "per-slope", 200)
    assert module._counts(pits[:, 2])[1] < 1e-3


def test_docs_prior_share_example_runs(capsys):
    """The example of docs/methods.md, 'Which coefficients the release determines', as
    written (the common scale): the table has the column, and the tiny feature's coefficient
    gets most of its variance from the prior, the other little; the same rows released at
    eps = 1000 give both coefficients small shares (negative control: the share follows the
    release, not the feature)."""
    import pathlib

    text = (pathlib.Path(__file__).resolve().parents[2] / "docs" / "methods.md").read_text()
    section = text.split("**Which coefficients the release determines**")[1].split("\n## ")[0]
    code = section.split("```python\n")[1].split("```")[0]
    scope = {}
    exec(compile(code, "docs/methods.md", "exec"), scope)
    assert "prior share" in capsys.readouterr().out
    share = np.asarray(scope["idata"].posterior.attrs["prior_share"])
    assert share[1] > 0.7 and share[1] > 2 * share[0] and share[0] < 0.4, share
    np.testing.assert_allclose(scope["report"].theta_table(scope["idata"])["prior share"], share)
    rel = bayesdp.release(scope["X"], scope["y"], epsilon=1000.0, delta=1e-5, bounds=(2.5, 1.5),
                          seed=1)
    sharp = np.asarray(bayesdp.fit(rel, seed=0).posterior.attrs["prior_share"])
    assert sharp[1] < 0.2 and sharp[0] < 0.01, sharp


@pytest.mark.parametrize("intercept, yty", [(False, True), (True, True), (False, False),
                                            (True, False)])
def test_the_grid_equals_each_cell_computed_directly(intercept, yty):
    """eiv's grid (one pencil factorisation and one eigendecomposition per sigma_y^2, an
    intercept by Woodbury) gives each cell's log weight and mean as the cell's Gaussian
    integral computed directly (dense M, its Cholesky factor, P's inverse, y^T y's factor by
    eiv_yty_moments with theta's full covariance), to 1e-10, at d = 8."""
    from scipy import special

    from bayesdp.models.regression import (eiv_model_data, eiv_noise_covariance,
                                           eiv_yty_moments, eiv_yty_noise)

    sim = bayesdp.simulate(n=5000, d=8 - int(intercept), seed=3)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=4,
                          seed=1, intercept=intercept, include_yty=yty)
    pri = bayesdp.Priors().resolve(rel)
    data = eiv_model_data(rel, pri, scale_min=eiv.SCALE_MIN,
                          sigma_y2_max=rel.bounds[1] ** 2, per_slope=False)
    t0 = np.linspace(-0.2, 0.3, rel.d)
    log_s2, log_r = np.linspace(-4, 2, 6), np.linspace(np.log(0.01), 0, 4)
    got = eiv._grid(data, t0, log_s2, log_r)
    want = np.empty((6, 4))
    means = np.empty((6, 4, rel.d))
    N = eiv_noise_covariance(data, t0)
    for g, s2 in enumerate(np.exp(log_s2)):
        M = s2 * data.S_plus + N
        Mi = np.linalg.inv(M)
        for h, r in enumerate(np.exp(log_r)):
            Dr = np.diag(data.slopes * r + (1 - data.slopes))
            Cr = Dr @ data.C @ Dr
            Pi = np.linalg.inv(Cr)
            P = data.S_hat @ Mi @ data.S_hat + Pi
            V = np.linalg.inv(P)
            x = data.S_hat @ Mi @ data.z_hat + Pi @ data.m
            mu = V @ x
            quad = data.z_hat @ Mi @ data.z_hat + data.m @ Pi @ data.m - x @ mu
            lw = -0.5 * (np.linalg.slogdet(M)[1] + np.linalg.slogdet(Cr)[1]
                         + np.linalg.slogdet(P)[1] + quad) - data.a * log_s2[g] - data.b / s2
            if yty:
                mean, var = eiv_yty_moments(data, s2, mu, V, M, eiv_yty_noise(data, t0))
                lw -= 0.5 * (np.log(var) + (data.yty_hat - mean) ** 2 / var)
            want[g, h], means[g, h] = lw, mu
    # the quadrature: the trapezoidal rule on each axis (the ends at half weight)
    want[[0, -1], :] += np.log(0.5)
    want[:, [0, -1]] += np.log(0.5)
    want -= special.logsumexp(want)
    np.testing.assert_allclose(got["log_weight"], want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(got["mean"], means, rtol=1e-10, atol=1e-10 * np.abs(means).max())
    np.testing.assert_allclose(got["theta_mean"], np.einsum("gh,ghd->d", np.exp(want), means),
                               rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("intercept", [False, True])
def test_mixture_moments_and_cell_draws_are_the_cells_gaussians(intercept):
    """``mixture_moments`` (the S-noise check's reference) equals sum_c w_c (diag(P_c^-1) +
    mu_c^2) - mean^2 with each cell's P_c = cell_precision inverted directly, to 1e-10; and
    the draws' transform of each cell (``_cell_noise``, in the grid's basis, no factor of P)
    has covariance P_c^-1 to 1e-10, with and without an intercept (its Woodbury term)."""
    rel = _release(d=3, J=2, intercept=intercept, include_yty=True)
    post = eiv.eiv_posterior(rel, bayesdp.Priors().resolve(rel))
    w = np.exp(post["log_weight"])
    w /= w.sum()
    G, H = w.shape
    second = 0.0
    for g in range(G):
        for h in range(H):
            P = eiv.cell_precision(post["data"], post["theta_plugin"], post["sigma_y2"][g],
                                   post["scale"][h])
            V = np.linalg.inv(P)
            second = second + w[g, h] * (np.diag(V) + post["mean"][g, h] ** 2)
            if (g * H + h) % 97 == 0:
                A = eiv._cell_noise(post["basis"], g, post["scale"][h], np.eye(rel.d))
                np.testing.assert_allclose(A.T @ A, V, rtol=1e-10, atol=1e-12 * np.abs(V).max())
    mean = np.einsum("gh,ghd->d", w, post["mean"])
    got_mean, got_sd = eiv.mixture_moments(post)
    np.testing.assert_allclose(got_mean, mean, rtol=1e-12)
    np.testing.assert_allclose(got_sd, np.sqrt(second - mean ** 2), rtol=1e-10)
    theta, _, _ = eiv.draw(post, np.random.default_rng(0), (1, 20000))  # Monte Carlo agrees
    se = got_sd / np.sqrt(20000)
    assert np.all(np.abs(theta[0].mean(axis=0) - got_mean) < 5 * se)
    assert np.all(np.abs(theta[0].std(axis=0) / got_sd - 1) < 5 * np.sqrt(2 / 20000) + 0.01)


def test_theta_plugin_is_the_fixed_point_of_its_grid():
    """The accelerated iteration (``anderson``) ends at theta_0 = the mixture mean of its own
    grid, to its tolerance, on a release whose S noise moves theta_0 (eps = 0.3), and finds
    the fixed point the plain damped iteration finds (1e-6 relative)."""
    rel = _release(d=4, J=3, eps=0.3, include_yty=True)
    pri = bayesdp.Priors().resolve(rel)
    post = eiv.eiv_posterior(rel, pri)
    assert post["converged"]
    t0 = post["theta_plugin"]
    again = eiv._grid(post["data"], t0, np.log(post["sigma_y2"]), np.log(post["scale"]))
    assert np.linalg.norm(again["theta_mean"] - t0) <= 1e-7 * (1 + np.linalg.norm(t0))
    x = np.asarray(pri.m, dtype=float)
    for _ in range(200):  # plain damped iteration on the same grid
        x = 0.5 * (x + eiv._grid(post["data"], x, np.log(post["sigma_y2"]),
                                 np.log(post["scale"]))["theta_mean"])
    np.testing.assert_allclose(x, t0, rtol=1e-6, atol=1e-9)
