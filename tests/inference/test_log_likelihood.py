"""The log_likelihood and posterior_predictive groups of every fit
(bayesdp.inference.log_likelihood): each holder's entry against the Gaussian densities written
out with scipy (and, for eiv, the noise covariance estimated by Monte Carlo), ArviZ's loo / waic
/ compare / plot_ppc on them, and leave-one-holder-out flagging a holder whose z_hat was
altered."""

import dataclasses
import warnings

import numpy as np
import pytest
from scipy import stats

import bayesdp
import bayesdp.paper  # noqa: F401  (registers the paper's methods)
from bayesdp.inference.closed_form import nearest_psd
from bayesdp.releases import layout


@pytest.fixture(scope="module")
def rel():
    sim = bayesdp.simulate(n=40_000, d=3, seed=3)
    return bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=4,
                           seed=5)


def _fit(release, method, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence / calibration warnings of tiny runs
        return bayesdp.fit(release, method=method, seed=11, **kw)


def _flat(idata, group, name):
    x = np.asarray(getattr(idata, group)[name])
    return x.reshape(-1, *x.shape[2:])


def _az():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        import arviz

    return arviz


def test_fast_entries_are_the_fixeds_gaussian_of_each_holder(rel):
    idata = _fit(rel, "fast", num_samples=50, num_chains=2)
    ll = _flat(idata, "log_likelihood", "release")
    assert ll.shape == (100, rel.J)
    theta = _flat(idata, "posterior", "theta")
    s2 = float(idata.posterior.attrs["sigma_y2_plugin"])
    S = nearest_psd(rel.S_hat)
    for i in (0, 17, 99):
        for j in range(rel.J):
            want = stats.multivariate_normal.logpdf(
                rel.z_hat[j], S[j] @ theta[i], s2 * S[j] + rel.sigma_z[j] ** 2 * np.eye(rel.d))
            assert ll[i, j] == pytest.approx(want, rel=1e-9)


def test_fixeds_entries_use_each_draws_sigma_y2(rel):
    idata = _fit(rel, "fixeds", num_samples=30, num_warmup=30, num_chains=1)
    ll = _flat(idata, "log_likelihood", "release")
    theta, s2 = _flat(idata, "posterior", "theta"), _flat(idata, "posterior", "sigma_y2")
    assert np.ptp(s2) > 0
    S = nearest_psd(rel.S_hat)
    for i in (0, 29):
        want = [stats.multivariate_normal.logpdf(
            rel.z_hat[j], S[j] @ theta[i], s2[i] * S[j] + rel.sigma_z[j] ** 2 * np.eye(rel.d))
            for j in range(rel.J)]
        np.testing.assert_allclose(ll[i], want, rtol=1e-9)


def _check_normalx_entries(idata, rel):
    """Each holder's entry at draws 0 and 19 against scipy: N(S_hat_j upper triangle; S_j,
    sigma_s,j^2) times N(z_hat_j; S_j theta, sigma_y^2 S_j + sigma_z,j^2 I), to 1e-9."""
    ll = _flat(idata, "log_likelihood", "release")
    S, theta = _flat(idata, "posterior", "S"), _flat(idata, "posterior", "theta")
    s2 = _flat(idata, "posterior", "sigma_y2")
    iu = np.triu_indices(rel.d)
    for i in (0, 19):
        for j in range(rel.J):
            want = (stats.norm.logpdf(rel.S_hat[j][iu], S[i, j][iu], rel.sigma_s[j]).sum()
                    + stats.multivariate_normal.logpdf(
                        rel.z_hat[j], S[i, j] @ theta[i],
                        s2[i] * S[i, j] + rel.sigma_z[j] ** 2 * np.eye(rel.d)))
            assert ll[i, j] == pytest.approx(want, rel=1e-9)
    return S


def test_normalx_entries_hold_both_statistics_given_the_drawn_S(rel):
    idata = _fit(rel, "normalx-paper", num_samples=20, num_warmup=20, num_chains=1)
    _check_normalx_entries(idata, rel)
    assert _flat(idata, "posterior_predictive", "S_hat").shape == (20, rel.J, rel.d, rel.d)


def test_eiv_entries_against_a_monte_carlo_noise_covariance(rel):
    """Holder j's eiv entry is N(z_hat_j; S_hat_j theta, sigma_y^2 S_+,j + Var(e_z - E t)):
    the covariance of the noise pushed through the plug-in t is estimated here by drawing the
    release's noise (E symmetric with N(0, sigma_s^2) on and above the diagonal, e_z ~
    N(0, sigma_z^2 I))."""
    idata = _fit(rel, "eiv", num_samples=100, num_chains=1)
    ll = _flat(idata, "log_likelihood", "release")
    theta, s2 = _flat(idata, "posterior", "theta"), _flat(idata, "posterior", "sigma_y2")
    t = np.asarray(idata.posterior.attrs["eiv_theta_plugin"], dtype=float)
    rng = np.random.default_rng(0)
    d, M, B = rel.d, 200_000, 20
    for j in (0, 2):
        E = layout.unvech(rng.normal(0.0, rel.sigma_s[j], (M, layout.vech_dim(d))), d)
        noise = rng.normal(0.0, rel.sigma_z[j], (M, d)) - E @ t
        S_plus = nearest_psd(rel.S_hat[j])
        for i in (0, 50, 99):
            def logpdf(x):  # the entry with the noise covariance estimated from draws x
                return stats.multivariate_normal.logpdf(
                    rel.z_hat[j], rel.S_hat[j] @ theta[i], s2[i] * S_plus + np.cov(x.T))

            want = logpdf(noise)
            # its Monte Carlo standard error from B batches of M / B draws: each batch's
            # estimate has B times the variance of the whole one (the log density is smooth in
            # V, its error linear in V's to first order)
            batches = np.array([logpdf(x) for x in np.split(noise, B)])
            se = batches.std(ddof=1) / np.sqrt(B)
            assert se < 0.05  # the check has power: a few hundredths at most
            assert ll[i, j] == pytest.approx(want, abs=5 * se)


def test_eiv_entries_with_yty_are_z_hats():
    """With y^T y in the release (and in the fit's likelihood), holder j's eiv entry is still
    z_hat_j's alone: N(z_hat_j; S_hat_j theta, sigma_y^2 S_+,j + Var(e_z - E t)), checked
    against scipy at d = 4."""
    from bayesdp.inference.log_likelihood import one_holder
    from bayesdp.models import regression

    sim = bayesdp.simulate(n=40_000, d=4, seed=3)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=3,
                          seed=5, include_yty=True)
    idata = _fit(rel, "eiv", num_samples=20, num_chains=1)
    a = idata.posterior.attrs
    assert a["eiv_uses_yty"]
    ll = _flat(idata, "log_likelihood", "release")
    theta, s2 = _flat(idata, "posterior", "theta"), _flat(idata, "posterior", "sigma_y2")
    t = np.asarray(a["eiv_theta_plugin"], dtype=float)
    for j in (0, 2):
        data = regression.eiv_model_data(one_holder(rel, j), bayesdp.Priors().resolve(rel),
                                         scale_min=a["eiv_scale_min"],
                                         sigma_y2_max=a["sigma_y2_max"], theta_plugin=t)
        for i in (0, 13):
            M = s2[i] * data.S_plus + regression.eiv_noise_covariance(data, t)
            want = stats.multivariate_normal.logpdf(data.z_hat, data.S_hat @ theta[i], M)
            assert ll[i, j] == pytest.approx(want, rel=1e-8)


def test_fast_entries_with_a_nonzero_shift_of_the_noise_mean():
    """With correlated S and z noise (a general noise covariance, as network adapters make) and
    an S_hat_j whose nearest PSD matrix clips an eigenvalue, fast's z_hat noise given S_j has
    a mean, shift_j = Sigma_zS Sigma_SS^-1 vech(S_hat_j - S_j): the entries are log
    N(z_hat_j; S_j theta + shift_j, sigma^2 S_j + Sigma_zz - Sigma_zS Sigma_SS^-1 Sigma_Sz),
    and the posterior predictive's draws are centred on S_j E[theta] + shift_j (within 5 Monte
    Carlo standard errors)."""
    d, J = 2, 2
    k = layout.vech_dim(d)
    rng = np.random.default_rng(3)
    A = rng.normal(size=(J, k + d, k + d))
    cov = A @ np.swapaxes(A, 1, 2) / (k + d) + 0.2 * np.eye(k + d)
    S_hat = np.array([[[1.0, 2.0], [2.0, 1.0]], [[3.0, 0.5], [0.5, 2.0]]])  # holder 0: not PSD
    rel = bayesdp.Release(S_hat=S_hat, z_hat=np.array([[4.0, -2.0], [8.0, 6.0]]), n=[10, 10],
                          sigma_s=[1.0, 1.0], sigma_z=[1.0, 1.0], noise_cov=cov,
                          feature_names=("a", "b"), bounds=(3.0, 6.0))
    idata = _fit(rel, "fast", num_samples=2000, num_chains=2)
    ll = _flat(idata, "log_likelihood", "release")
    theta = _flat(idata, "posterior", "theta")
    s2 = float(idata.posterior.attrs["sigma_y2_plugin"])
    S = nearest_psd(S_hat)
    z_rep = _flat(idata, "posterior_predictive", "z_hat")
    shifts = []
    for j in range(J):
        SS, Sz, zz = cov[j][:k, :k], cov[j][:k, k:], cov[j][k:, k:]
        G = np.linalg.solve(SS, Sz).T
        shift = G @ layout.vech(S_hat[j] - S[j])
        Sig = zz - G @ Sz
        shifts.append(shift)
        for i in (0, 1999, 3999):
            want = stats.multivariate_normal.logpdf(rel.z_hat[j], S[j] @ theta[i] + shift,
                                                    s2 * S[j] + Sig)
            assert ll[i, j] == pytest.approx(want, rel=1e-9)
        mean = S[j] @ theta.mean(axis=0) + shift
        var = np.diag(S[j] @ np.cov(theta.T) @ S[j] + s2 * S[j] + Sig)
        assert np.all(np.abs(z_rep[:, j].mean(axis=0) - mean) < 5 * np.sqrt(var / len(z_rep)))
    assert np.abs(shifts[0]).max() > 0.1  # the path under test: a shift far from zero


@pytest.mark.slow
def test_bs_entries_are_the_marginal_gaussian_of_each_holders_statistics():
    """bs: holder j's entry is log N(ss_hat_j; n_j mu, n_j Sigma + V_j) at the draw's row
    moments (mu, Sigma) (bs_model with the sums integrated out, tests/paper/test_bs.py), and the
    posterior predictive holds S_hat and z_hat."""
    from bayesdp.paper import bs_model as B

    sim = bayesdp.simulate(n=4000, d=2, seed=2)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=3,
                          seed=4, include_yty=True)
    idata = _fit(rel, "bs", num_samples=30, num_warmup=30, num_chains=1)
    ll = _flat(idata, "log_likelihood", "release")
    assert ll.shape == (30, rel.J)
    Sx, theta = _flat(idata, "posterior", "Sigma_x"), _flat(idata, "posterior", "theta")
    s2 = _flat(idata, "posterior", "sigma_y2")
    ss_hat, V = B.release_stats(rel), layout.noise_covariance(rel, with_yty=True)
    for i in (0, 29):
        mu, Sig = (np.asarray(x) for x in B.row_moments(Sx[i], theta[i], s2[i]))
        want = [stats.multivariate_normal.logpdf(ss_hat[j], rel.n[j] * mu, rel.n[j] * Sig + V[j])
                for j in range(rel.J)]
        np.testing.assert_allclose(ll[i], want, rtol=1e-9)
    assert _flat(idata, "posterior_predictive", "S_hat").shape == (30, rel.J, 2, 2)
    assert _flat(idata, "posterior_predictive", "z_hat").shape == (30, rel.J, 2)


@pytest.mark.slow
def test_normalx_entries_with_an_intercept():
    """With an intercept (appendix B.2's model, S_j built from xbar_j and W_j) holder j's entry
    is still log p(S_hat_j | S_j) + log p(z_hat_j | S_j, theta, sigma_y^2) at the drawn S_j,
    S_j's first row and column being n_j and n_j xbar_j."""
    rng = np.random.default_rng(1)
    X = 3.0 + rng.normal(size=(300, 1))
    y = 1.0 + 0.5 * X[:, 0] + 0.5 * rng.normal(size=300)
    r = bayesdp.release(X, y, epsilon=30.0, delta=1e-5, bounds=(8.0, 12.0), nodes=2, seed=4,
                        intercept=True)
    idata = _fit(r, "nuts-normalx", num_samples=20, num_warmup=20, num_chains=1)
    S = _check_normalx_entries(idata, r)
    assert S.shape[-1] == r.d == 2


def test_posterior_predictive_moments_of_fast(rel):
    """z_hat_j^rep = S_j theta + N(0, sigma^2 S_j + sigma_z^2 I): its draws' mean and variance
    match those of the draws of theta pushed through, within Monte Carlo error."""
    idata = _fit(rel, "fast", num_samples=2000, num_chains=2)
    z = _flat(idata, "posterior_predictive", "z_hat")
    theta = _flat(idata, "posterior", "theta")
    s2 = float(idata.posterior.attrs["sigma_y2_plugin"])
    S = nearest_psd(rel.S_hat)
    for j in range(rel.J):
        mean = S[j] @ theta.mean(axis=0)
        var = np.diag(S[j] @ np.cov(theta.T) @ S[j] + s2 * S[j]) + rel.sigma_z[j] ** 2
        se = np.sqrt(var / len(z))
        assert np.all(np.abs(z[:, j].mean(axis=0) - mean) < 4 * se)
        assert np.all(np.abs(z[:, j].var(axis=0) / var - 1) < 0.15)


def test_arviz_loo_waic_compare_and_plot_ppc_work(rel, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    az = _az()
    fits = {m: _fit(rel, m, num_samples=500, num_chains=2) for m in ("eiv", "fast")}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # Pareto k warnings
        for idata in fits.values():
            assert np.isfinite(float(az.loo(idata).elpd_loo))
            assert np.isfinite(float(az.waic(idata).elpd_waic))
        table = az.compare(fits)
    assert set(table.index) == {"eiv", "fast"}
    ax = az.plot_ppc(fits["eiv"], var_names=["z_hat"], num_pp_samples=20)
    assert ax is not None


def _alter(release, j, k):
    z = release.z_hat.copy()
    z[j] += k * release.sigma_z[j]
    return dataclasses.replace(release, z_hat=z)


@pytest.mark.parametrize("method", ["eiv", "fast"])
def test_leave_one_holder_out_flags_an_altered_holder(method):
    """A holder whose z_hat was moved by 20 noise sds has the lowest leave-one-holder-out elpd,
    more than 30 below the holders' median (about 300 measured for eiv, 250 for fast); in the
    release as made no holder is that far below (at most 15 measured for eiv, whose Pareto k
    reach 4 so its pointwise elpd are rough, 1.5 for fast)."""
    az = _az()
    sim = bayesdp.simulate(n=200_000, d=3, seed=1)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=5,
                          seed=1)

    def gap(release):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            elpd = az.loo(_fit(release, method, num_samples=1000, num_chains=2),
                          pointwise=True).loo_i.values
        return np.median(elpd) - elpd

    clean, altered = gap(rel), gap(_alter(rel, 2, 20.0))
    assert clean.max() < 30
    assert np.argmax(altered) == 2 and altered[2] > 30


# -- the NumPy evaluator of the z_hat sites against the numpyro model --------------------------


def _method_setup(release, method, seed=3, **options):
    """(the method's Likelihood, its draws flattened over chains) after running the method."""
    from bayesdp.inference import log_likelihood as LL
    from bayesdp.inference.methods import get_method

    record = get_method(method)
    priors = bayesdp.Priors().resolve(release)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        result = record.run(release, priors, seed=seed, num_samples=40, num_chains=2,
                            num_warmup=40, progress_bar=False, **record.with_options(options))
    setup = LL._setup(record, release, priors, result)
    flat = {k: np.asarray(v, dtype=float).reshape(-1, *np.shape(v)[2:])
            for k, v in setup.samples.items()}
    return setup, flat


def _general_noise_release():
    """The release of test_fast_entries_with_a_nonzero_shift_of_the_noise_mean: correlated S
    and z noise, holder 0's S_hat not PSD."""
    d, J = 2, 2
    k = layout.vech_dim(d)
    A = np.random.default_rng(3).normal(size=(J, k + d, k + d))
    cov = A @ np.swapaxes(A, 1, 2) / (k + d) + 0.2 * np.eye(k + d)
    S_hat = np.array([[[1.0, 2.0], [2.0, 1.0]], [[3.0, 0.5], [0.5, 2.0]]])
    return bayesdp.Release(S_hat=S_hat, z_hat=np.array([[4.0, -2.0], [8.0, 6.0]]), n=[10, 10],
                           sigma_s=[1.0, 1.0], sigma_z=[1.0, 1.0], noise_cov=cov,
                           feature_names=("a", "b"), bounds=(3.0, 6.0))


@pytest.mark.parametrize("method, options, general", [
    ("fast", {}, False), ("fast", {}, True), ("fixeds", {}, False), ("eiv", {}, False),
    ("eiv", {"scales": "per-slope"}, False)])
def test_numpy_evaluator_is_the_numpyro_z_hat_site(rel, method, options, general):
    """The NumPy evaluator (``_gaussian_z_hat``) writes out the z_hat site of the numpyro model
    the method's record names: at every draw and holder its mean and covariance are those of
    the site traced with the draw substituted, to rounding; its entries equal those of the JAX
    evaluator (the numpyro model traced and compiled), 1e-10 relative; its predictive draws are
    the same for the same seed."""
    import jax
    from numpyro import handlers

    from bayesdp._jax import enable_x64
    from bayesdp.inference import log_likelihood as LL

    release = _general_noise_release() if general else rel
    setup, flat = _method_setup(release, method, **options)
    J, d = release.J, release.d
    loc, cov, which = LL._gaussian_z_hat(setup, flat)
    N = len(which)
    assert loc.shape == (N, J, d) and cov.shape[1:] == (J, d, d)
    if method == "fast":
        assert len(cov) == 1  # one sigma^2: one covariance per holder
    enable_x64()
    for i in (0, N // 2, N - 1):
        draw = {k: v[i] for k, v in flat.items()}
        if setup.per_holder:
            sites = [handlers.trace(handlers.substitute(setup.model, draw)).get_trace(
                LL._holder(setup.data, j))["z_hat"]["fn"] for j in range(J)]
            want_loc = np.stack([np.asarray(fn.loc).reshape(d) for fn in sites])
            want_cov = np.stack([np.asarray(fn.covariance_matrix).reshape(d, d) for fn in sites])
        else:
            fn = handlers.trace(handlers.substitute(setup.model, draw)).get_trace(
                setup.data)["z_hat"]["fn"]
            want_loc, want_cov = np.asarray(fn.loc), np.asarray(fn.covariance_matrix)
        np.testing.assert_allclose(loc[i], want_loc, rtol=1e-12, atol=1e-12 * np.abs(
            want_loc).max())
        np.testing.assert_allclose(cov[which[i]], want_cov, rtol=1e-12, atol=1e-12 * np.abs(
            want_cov).max())
    ll_np, pp_np = LL._evaluate_numpy(setup, flat, J, d, seed=5)
    ll_jax, pp_jax = LL._evaluate(setup, flat, J, d, seed=5)
    np.testing.assert_allclose(ll_np, ll_jax, rtol=1e-10)
    assert pp_np["z_hat"].shape == pp_jax["z_hat"].shape == (N, J, d)
    again = LL._evaluate_numpy(setup, flat, J, d, seed=5)
    np.testing.assert_array_equal(again[1]["z_hat"], pp_np["z_hat"])
    assert not np.array_equal(LL._evaluate_numpy(setup, flat, J, d, seed=6)[1]["z_hat"],
                              pp_np["z_hat"])


def test_numpy_evaluator_is_normalxs_two_sites(rel, monkeypatch):
    """normalx's entries (S_hat's and z_hat's log densities given each draw's S_j) in NumPy
    equal the JAX evaluator's (normalx_model traced and compiled) to 1e-10, in one chunk or
    several; its predictive draws have the JAX evaluator's shapes, the same for the same seed."""
    from bayesdp.inference import log_likelihood as LL

    setup, flat = _method_setup(rel, "normalx")
    J, d = rel.J, rel.d
    ll_np, pp_np = LL._evaluate_numpy(setup, flat, J, d, seed=5)
    ll_jax, pp_jax = LL._evaluate(setup, flat, J, d, seed=5)
    np.testing.assert_allclose(ll_np, ll_jax, rtol=1e-10)
    for site in ("S_hat", "z_hat"):
        assert pp_np[site].shape == pp_jax[site].shape, site
    assert pp_np["S_hat"].shape[-2:] == (d, d)
    np.testing.assert_array_equal(pp_np["S_hat"], np.swapaxes(pp_np["S_hat"], -1, -2))
    monkeypatch.setattr(LL, "_CHUNK_BYTES", 8 * 4 * J * d * d * 7)  # 7 draws a chunk
    ll_chunks, pp_chunks = LL._evaluate_numpy(setup, flat, J, d, seed=5)
    np.testing.assert_allclose(ll_chunks, ll_np, rtol=1e-13)
    np.testing.assert_allclose(pp_chunks["S_hat"], pp_np["S_hat"], rtol=1e-13)


def test_numpy_evaluators_predictive_draws_have_the_sites_distribution(rel):
    """normalx's predictive draws, each draw's sites repeated 50 times (4,000 draws): z_hat
    whitened by its covariance's Cholesky factor and S_hat's vech standardised by sigma_s are
    N(0, 1) - mean within 5 and variance within 5 standard errors (sqrt(2 / count)) of 0
    and 1. Negative control: the same z_hat residuals left unwhitened are not."""
    from bayesdp.inference import log_likelihood as LL

    setup, flat = _method_setup(rel, "normalx")
    flat = {k: np.repeat(v, 50, axis=0) for k, v in flat.items()}
    J, d = rel.J, rel.d
    _, pp = LL._evaluate_numpy(setup, flat, J, d, seed=3)
    loc, cov, which = LL._gaussian_z_hat(setup, flat)
    res = pp["z_hat"] - loc
    u = np.linalg.solve(np.linalg.cholesky(cov[which]), res[..., None])[..., 0]
    iu = np.triu_indices(d)
    s = ((pp["S_hat"] - flat["S"])[..., iu[0], iu[1]]
         / np.asarray(rel.sigma_s)[None, :, None])

    def standard(x):
        x = x.ravel()
        return (abs(x.mean()) < 5 / np.sqrt(x.size)
                and abs(x.var() - 1) < 5 * np.sqrt(2 / x.size))

    assert standard(u) and standard(s)
    assert not standard(res)


def test_numpy_evaluator_is_used_in_chunks_of_draws(rel, monkeypatch):
    """Draws evaluated in several chunks give the entries and predictive draws of one chunk."""
    from bayesdp.inference import log_likelihood as LL

    setup, flat = _method_setup(rel, "eiv")
    one = LL._evaluate_numpy(setup, flat, rel.J, rel.d, seed=1)
    monkeypatch.setattr(LL, "_CHUNK_BYTES", 8 * 4 * rel.J * rel.d * rel.d * 7)  # 7 draws
    many = LL._evaluate_numpy(setup, flat, rel.J, rel.d, seed=1)
    np.testing.assert_allclose(many[0], one[0], rtol=1e-13)
    np.testing.assert_allclose(many[1]["z_hat"], one[1]["z_hat"], rtol=1e-13)


def test_model_data_in_numpy_is_model_data(rel):
    """``regression.model_data(..., as_numpy=True)`` (fast's log-likelihood) holds the values
    of its JAX arrays, as float64 NumPy arrays."""
    from bayesdp._jax import enable_x64
    from bayesdp.inference import closed_form
    from bayesdp.models import regression as R

    enable_x64()
    priors = bayesdp.Priors().resolve(rel)
    S = closed_form.fixed_s_estimate(rel, "psd")
    noise = closed_form.z_given_s_noise(rel, S, s_noise="conditional")
    ours = R.model_data(rel, priors, S_fixed=S, z_noise=noise, as_numpy=True)
    want = R.model_data(rel, priors, S_fixed=S, z_noise=noise)
    for name in R.ModelData._fields:
        if name in ("basis", "prior_factors", "kernel_terms"):
            assert getattr(ours, name) is None
            continue
        value = getattr(ours, name)
        assert isinstance(value, np.ndarray) and value.dtype == np.float64, name
        np.testing.assert_array_equal(value, np.asarray(getattr(want, name)), err_msg=name)


def test_numpy_evaluator_leaves_other_models_to_jax():
    """A model whose sites the NumPy evaluator does not write out (normalX's intercept model,
    B&S's ss_hat with data in a plain tuple, a model it does not know) gets None."""
    from bayesdp.inference import log_likelihood as LL
    from bayesdp.models import regression as R

    flat = {"theta": np.zeros((3, 2)), "sigma_y2": np.ones(3)}
    both = ("S_hat", "z_hat")
    for setup in (LL.Likelihood(R.normalx_intercept_model, None, {}, both, both),
                  LL.Likelihood(R.fixeds_model, (np.zeros(2),), {}, ("ss_hat",), ("ss_hat",)),
                  LL.Likelihood(lambda data: None, (np.zeros(2),), {}, ("z_hat",), ("z_hat",))):
        assert LL._evaluate_numpy(setup, flat, 1, 2, seed=0) is None


def test_a_covariance_that_is_not_positive_definite_goes_to_the_jax_evaluator():
    """A release without noise whose S_j is singular makes fast's z_hat covariance singular:
    the NumPy evaluator hands it to the JAX one (the numpyro model's values, as before)."""
    from bayesdp.inference import log_likelihood as LL

    sim = bayesdp.simulate(n=400, d=3, seed=1)
    X = sim.X.copy()
    X[:, 2] = 0.0
    parts = np.array_split(np.arange(len(sim.y)), 2)
    release = bayesdp.Release(S_hat=np.stack([X[p].T @ X[p] for p in parts]),
                              z_hat=np.stack([X[p].T @ sim.y[p] for p in parts]),
                              n=[len(p) for p in parts], sigma_s=0.0, sigma_z=0.0,
                              bounds=sim.bounds)
    setup, flat = _method_setup(release, "fast")
    assert LL._evaluate_numpy(setup, flat, release.J, release.d, seed=1) is None
    idata = _fit(release, "fast", num_samples=20, num_chains=1)
    assert _flat(idata, "log_likelihood", "release").shape == (20, release.J)


def test_a_likelihood_that_imports_jax_gets_its_arrays_in_float64():
    """In a process that has not imported JAX, a method's likelihood function that imports it
    to build JAX arrays gets them in float64 (``_setup`` calls it again with float64 on)."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys, types
        import numpy as np
        from bayesdp.inference import log_likelihood as LL
        assert "jax" not in sys.modules

        def likelihood(release, priors, result):
            import jax.numpy as jnp
            return jnp.asarray(np.full(2, 1.0 / 3.0))

        data = LL._setup(types.SimpleNamespace(log_likelihood=likelihood), None, None, None)
        print("DTYPE=" + str(data.dtype))
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "DTYPE=float64" in p.stdout


@pytest.mark.parametrize("factors_per_value", [0, 2])  # the pencil always / fast's factors
@pytest.mark.parametrize("method", ["fast", "fixeds", "eiv"])
def test_one_factorisation_per_holder_is_a_factorisation_per_covariance(method,
                                                                       factors_per_value,
                                                                       monkeypatch):
    """The NumPy evaluator's whitening (``_whitened``: one factorisation of sigma_y^2 S_j + N_j
    per holder for every draw, ``closed_form.PencilFactor``, or one Cholesky factor per holder
    and distinct sigma_y^2 when there are few, fast's one plug-in) gives the entries of a
    Cholesky factor of each draw's covariance (the evaluator without it) to 1e-10 at d = 12,
    J = 6, in one block of holders or several, and predictive draws that whitened by those factors are
    N(0, 1) (mean and variance within 5 standard errors); negative control: whitened by 1.2
    times the covariance they are not."""
    from bayesdp.inference import log_likelihood as LL

    monkeypatch.setattr(LL, "_FACTORS_PER_VALUE", factors_per_value)
    sim = bayesdp.simulate(n=6000, d=12, seed=4)
    release = bayesdp.release(sim.X, sim.y, epsilon=2.0, delta=1e-5, bounds=sim.bounds,
                              nodes=6, seed=1)
    setup, flat = _method_setup(release, method)
    flat = {k: np.repeat(v, 20, axis=0) for k, v in flat.items()}  # 3,200 draws
    J, d = release.J, release.d
    ll, pp = LL._evaluate_numpy(setup, flat, J, d, seed=2)
    with monkeypatch.context() as m:
        m.setattr(LL, "_whitened", lambda *a: None)  # a Cholesky factor of each covariance
        ll_each, _ = LL._evaluate_numpy(setup, flat, J, d, seed=2)
    np.testing.assert_allclose(ll, ll_each, rtol=1e-10)
    with monkeypatch.context() as m:
        m.setattr(LL, "_CHUNK_BYTES", 8 * 6 * J * d * 333)  # blocks of one holder
        np.testing.assert_allclose(LL._evaluate_numpy(setup, flat, J, d, seed=2)[0], ll,
                                   rtol=1e-12)
    loc, cov, which = LL._gaussian_z_hat(setup, flat)

    def standard(scale):
        L = np.linalg.cholesky(scale * cov[which])
        u = np.linalg.solve(L, (pp["z_hat"] - loc)[..., None])
        u = u.ravel()
        return (abs(u.mean()) < 5 / np.sqrt(u.size)
                and abs(u.var() - 1) < 5 * np.sqrt(2 / u.size))

    assert standard(1)
    assert not standard(1.2)


def test_a_large_predictive_group_is_thinned_and_the_log_likelihood_is_not(rel, monkeypatch):
    """Past ``PREDICTIVE_NUMBERS`` numbers the posterior predictive holds every k-th draw of
    each chain (its ``draw`` coordinate says which), while the log-likelihood keeps every draw,
    equal to the unthinned fit's, so ``az.loo`` is unchanged; the kept draws' new z_hat are
    distributed as the unthinned ones (mean per holder within 5 standard errors)."""
    import arviz as az

    from bayesdp.inference import log_likelihood as LL

    assert LL.predictive_draws(4, 1000, rel.J, rel.d, ("z_hat",)).size == 1000  # default: all
    full = bayesdp.fit(rel, method="fast", seed=3)
    per_draw = rel.J * rel.d
    monkeypatch.setattr(LL, "PREDICTIVE_NUMBERS", -(-4 * 1000 * per_draw // 7))  # every 7th
    thin = bayesdp.fit(rel, method="fast", seed=3)
    pp = thin.posterior_predictive["z_hat"]
    assert pp.sizes["chain"] == 4 and list(pp["draw"].values) == list(range(0, 1000, 7))
    np.testing.assert_array_equal(thin.log_likelihood["release"], full.log_likelihood["release"])
    assert float(az.loo(thin).elpd_loo) == float(az.loo(full).elpd_loo)
    a = np.asarray(pp).reshape(-1, rel.J, rel.d)
    b = np.asarray(full.posterior_predictive["z_hat"]).reshape(-1, rel.J, rel.d)
    se = np.sqrt(a.var(axis=0) / len(a) + b.var(axis=0) / len(b))
    assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) < 5 * se)


@pytest.mark.parametrize("general", [False, True])
def test_eivs_per_holder_data_is_each_holders_model_data_stacked(general, rel):
    """eiv's log-likelihood data built from the whole release at once (``per_holder_data``)
    equal, field by field, the model data of each holder's statistics alone
    (``eiv_model_data(one_holder(release, j))``, y^T y left out) stacked, for the iid design
    and a general noise covariance."""
    from bayesdp.inference.eiv_method import per_holder_data
    from bayesdp.inference.log_likelihood import one_holder
    from bayesdp.models import regression as R

    release = _general_noise_release() if general else rel
    pri = bayesdp.Priors().resolve(release)
    opts = dict(scale_min=0.01, sigma_y2_max=50.0, theta_plugin=np.full(release.d, 0.2),
                per_slope=False)
    got = per_holder_data(release, pri, **opts)
    each = [R.eiv_model_data(one_holder(release, j), pri, **opts)._replace(
        yty_hat=None, yty_var=None) for j in range(release.J)]
    for name, value in got._asdict().items():
        want = [getattr(e, name) for e in each]
        if value is None:
            assert all(w is None for w in want), name
            continue
        np.testing.assert_allclose(value, np.stack([np.asarray(w, float) for w in want]),
                                   rtol=1e-13, atol=0, err_msg=name)
