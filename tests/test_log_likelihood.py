"""The log_likelihood and posterior_predictive groups of every fit (bayesdp.inference.log_likelihood):
each holder's entry against the Gaussian densities written out with scipy (and, for eiv, the
noise covariance estimated by Monte Carlo), ArviZ's loo / waic / compare / plot_ppc on them, and
leave-one-holder-out flagging a holder whose z_hat was altered."""

import dataclasses
import warnings

import numpy as np
import pytest
from scipy import stats

import bayesdp
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


def test_normalx_entries_hold_both_statistics_given_the_drawn_S(rel):
    idata = _fit(rel, "normalx-interweaved", num_samples=20, num_warmup=20, num_chains=1)
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
    d, M = rel.d, 200_000
    for j in (0, 2):
        E = layout.unvech(rng.normal(0.0, rel.sigma_s[j], (M, layout.vech_dim(d))), d)
        noise = rng.normal(0.0, rel.sigma_z[j], (M, d)) - E @ t
        V = np.cov(noise.T)
        S_plus = nearest_psd(rel.S_hat[j])
        for i in (0, 50, 99):
            want = stats.multivariate_normal.logpdf(rel.z_hat[j], rel.S_hat[j] @ theta[i],
                                                    s2[i] * S_plus + V)
            assert ll[i, j] == pytest.approx(want, abs=0.05)  # Monte Carlo error of V


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
    more than 30 below the holders' median (about 60 measured); in the release as made no holder
    is that far below (at most 21 measured for eiv, whose Pareto k exceed 0.7 so its pointwise
    elpd are rough, 4 for fast)."""
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
