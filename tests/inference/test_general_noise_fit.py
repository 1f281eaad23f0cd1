"""MCMC-fixedS and NUTS-fixedS on releases with a general noise covariance over [vech(S), z]
(network adapters), and normalX's refusal where the Wishart model does not hold."""

import dataclasses
import re
import warnings

import numpy as np
import pytest

import bayesdp
import bayesdp.paper  # noqa: F401  (registers the paper's methods)
from bayesdp import diagnostics
from bayesdp.errors import BayesdpInputError
from bayesdp.inference import closed_form
from bayesdp.releases import layout

Z_MAX = 4.0  # |z| bound per comparison (two-sided p ~ 6e-5)
S2 = 0.5  # sigma_y^2 held fixed, so fixedS's theta | z_hat is the closed-form Gaussian
PRIORS = bayesdp.Priors(C=25.0 * np.eye(2))  # wide: theta is far from 0, so eiv matters


@pytest.fixture(scope="module")
def corr_release():
    """d = 2, J = 2; holder 0's S_hat has a negative eigenvalue (so the nearest PSD clips it and the
    conditional noise mean given S_hat - S is not zero); the S and z noise are correlated."""
    d, J = 2, 2
    D = d * (d + 1) // 2 + d
    rng = np.random.default_rng(3)
    A = rng.normal(size=(J, D, D))
    cov = A @ np.swapaxes(A, 1, 2) / D + 0.2 * np.eye(D)
    S_hat = np.array([[[1.0, 2.0], [2.0, 1.0]], [[3.0, 0.5], [0.5, 2.0]]])
    z_hat = np.array([[4.0, -2.0], [8.0, 6.0]])
    return bayesdp.Release(S_hat=S_hat, z_hat=z_hat, n=[10, 10], sigma_s=[1.0, 1.0],
                           sigma_z=[1.0, 1.0], noise_cov=cov, feature_names=("a", "b"))


def test_eiv_fast_mean_is_a_fixed_point(corr_release):
    """Here plain iteration theta <- mean(Sigma(theta)) falls into a growing oscillation; the
    returned mean must reproduce itself when the eiv covariance is evaluated at it."""
    pri = PRIORS.resolve(2)
    f = closed_form.fast_posterior(corr_release, pri, sigma_y2=S2, s_noise="eiv")
    _, Sig = layout.z_given_s_noise(corr_release, f["S"], s_noise="eiv", theta=f["mean"])
    again, _, _ = closed_form.gaussian_theta_posterior(f["S"], corr_release.z_hat, S2, Sig, pri.m,
                                                       pri.C)
    np.testing.assert_allclose(again, f["mean"], rtol=1e-8)
    with pytest.warns(RuntimeWarning, match="did not converge"):
        closed_form.fast_posterior(corr_release, pri, sigma_y2=S2, s_noise="eiv",
                                   eiv_iterations=3)


@pytest.mark.parametrize("s_noise", ["conditional", "eiv", "ignore"])
def test_fixeds_matches_fast_with_general_noise(corr_release, s_noise):
    rel = corr_release
    pri = PRIORS.resolve(rel.d)
    cf = closed_form.fast_posterior(rel, pri, sigma_y2=S2, s_noise=s_noise)
    idata = bayesdp.fit(rel, method="fixeds", seed=4, num_samples=3000, num_warmup=10,
                        num_chains=1, progress_bar=False, fix_sigma_y2=S2, s_noise=s_noise,
                        priors=PRIORS)
    assert diagnostics.attrs(idata)["s_noise"] == s_noise
    th = diagnostics.posterior_array(idata, "theta")
    N = th.shape[0]  # theta Gibbs with sigma_y^2 fixed: independent draws
    z = (th.mean(0) - cf["mean"]) / np.sqrt(np.diag(cf["cov"]) / N)
    assert np.all(np.abs(z) < Z_MAX), (s_noise, z)
    emp = np.cov(th.T)
    c = cf["cov"]
    se = np.sqrt((c**2 + np.outer(np.diag(c), np.diag(c))) / (N - 1))
    assert np.all(np.abs(emp - c) < Z_MAX * se), (emp, c)


def test_noise_treatments_differ_enough_to_be_told_apart(corr_release):
    """Negative control for the test above: the three treatments give posteriors that 3000 draws
    separate (in mean or covariance), so a sampler using the wrong one would fail it."""
    pri = PRIORS.resolve(2)
    post = {m: closed_form.fast_posterior(corr_release, pri, sigma_y2=S2, s_noise=m)
            for m in ("conditional", "eiv", "ignore")}
    shift, _ = layout.z_given_s_noise(corr_release, closed_form.fixed_s_estimate(corr_release),
                                      s_noise="conditional")
    assert np.max(np.abs(shift)) > 0.1
    N = 3000
    for a, b in (("conditional", "eiv"), ("conditional", "ignore"), ("eiv", "ignore")):
        c = post[a]["cov"]
        mean_gap = np.abs(post[b]["mean"] - post[a]["mean"]) / np.sqrt(np.diag(c) / N)
        se_cov = np.sqrt((c**2 + np.outer(np.diag(c), np.diag(c))) / (N - 1))
        cov_gap = np.abs(post[b]["cov"] - c) / se_cov
        assert max(mean_gap.max(), cov_gap.max()) > 3 * Z_MAX, (a, b, mean_gap, cov_gap)


def test_fixeds_takes_s_noise_from_provenance(corr_release):
    rel = dataclasses.replace(corr_release, provenance={"s_noise": "eiv"})
    idata = bayesdp.fit(rel, method="fixeds", seed=1, num_samples=20, num_warmup=20,
                        num_chains=1, progress_bar=False)
    a = diagnostics.attrs(idata)
    assert a["s_noise"] == "eiv" and np.asarray(a["eiv_plugin_theta"]).shape == (2,)
    with pytest.raises(BayesdpInputError, match="s_noise"):
        bayesdp.fit(rel, method="fixeds", num_samples=5, num_warmup=5, s_noise="dropped")
    with pytest.raises(BayesdpInputError, match="s_noise"):
        bayesdp.fit(corr_release, method="normalx-paper", num_samples=5, num_warmup=5,
                    s_noise="eiv")


@pytest.mark.slow
def test_nuts_fixeds_agrees_with_fixeds_on_general_noise(corr_release):
    a = bayesdp.fit(corr_release, method="fixeds", seed=5, num_samples=2000, num_warmup=1000,
                    num_chains=2, progress_bar=False, priors=PRIORS)
    b = bayesdp.fit(corr_release, method="nuts-fixeds", seed=6, num_samples=1000, num_warmup=500,
                    num_chains=2, progress_bar=False, priors=PRIORS)
    sa = diagnostics.summary_unrounded(a, var_names=["theta", "sigma_y2"])
    sb = diagnostics.summary_unrounded(b, var_names=["theta", "sigma_y2"])
    z = (sa["mean"] - sb["mean"]) / np.sqrt(sa["mcse_mean"] ** 2 + sb["mcse_mean"] ** 2)
    assert np.all(np.abs(np.asarray(z)) < Z_MAX), z
    assert diagnostics.attrs(b)["s_noise"] == "conditional"


@pytest.fixture(scope="module")
def small_release():
    sim = bayesdp.simulate(n=400, d=2, seed=2)
    return bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=2,
                           seed=3)


@pytest.mark.parametrize("method", ["normalx", "normalx-paper", "nuts-normalx"])
def test_normalx_refuses_non_wishart_release(small_release, method):
    rel = dataclasses.replace(small_release, provenance={"protocol": "pricer",
                                                         "wishart_S": False})
    with pytest.raises(BayesdpInputError, match="Wishart"):
        bayesdp.fit(rel, method=method, num_samples=5, num_warmup=5)


WISHART_APPROX = r"assumes S_j ~ Wishart\(Sigma_x, n_j\), which holds only approximately"


def _wishart_approx_warnings(record):
    return [w for w in record
            if issubclass(w.category, UserWarning) and re.search(WISHART_APPROX, str(w.message))]


@pytest.mark.slow
def test_normalx_warns_on_approximate_wishart(small_release):
    rel = dataclasses.replace(small_release, provenance={"protocol": "consensus",
                                                         "wishart_S": "approximate"})
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        bayesdp.fit(rel, method="normalx", seed=0, num_samples=5, num_warmup=5, num_chains=1,
                    progress_bar=False)
    assert len(_wishart_approx_warnings(rec)) == 1, [str(w.message) for w in rec]
    # The Gaussian mechanism's release: no Wishart warning. Only that warning is looked for, with
    # the same pattern that just found it: a 5-draw fit may also warn that it did not converge or
    # that S_hat disagrees with the posterior (CalibrationWarning), which depends on where 5
    # draws land (it does on some processors), and neither is what this test is about.
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        bayesdp.fit(small_release, method="normalx", seed=0, num_samples=5, num_warmup=5,
                    num_chains=1, progress_bar=False)
    assert not _wishart_approx_warnings(rec), [str(w.message) for w in rec]
