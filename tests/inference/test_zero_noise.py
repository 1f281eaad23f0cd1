"""Releases with zero noise (sigma_s = sigma_z = 0) and the last line of defence in ``fit``
against non-finite draws (audit, issue 15 item 4).

A release with sigma_s = sigma_z = 0 used to load and give ``fit(method="fixeds")`` all-NaN theta
with no error. Every method must now either refuse such a release with a named error or return
a finite posterior; with a singular S the fixedS methods use the exact degenerate likelihood."""

import warnings

import numpy as np
import pytest

import bayesdp
import bayesdp.paper  # noqa: F401  (registers the paper's methods)
from bayesdp.errors import BayesdpInputError, SamplerError
from bayesdp.releases import Release

from bayesdp.inference import methods as methods_mod


def _exact_release(X, y, J=2, bounds=(10.0, 10.0)):
    """The statistics themselves, declared noiseless: S_hat = X_j^T X_j, z_hat = X_j^T y_j,
    yty_hat = y_j^T y_j, every sigma 0."""
    parts = np.array_split(np.arange(len(y)), J)
    return Release(
        S_hat=np.stack([X[p].T @ X[p] for p in parts]),
        z_hat=np.stack([X[p].T @ y[p] for p in parts]),
        n=[len(p) for p in parts], sigma_s=0.0, sigma_z=0.0, bounds=bounds,
        yty_hat=[float(y[p] @ y[p]) for p in parts], sigma_yty=0.0)


@pytest.fixture(scope="module")
def sim():
    return bayesdp.simulate(n=400, d=3, seed=1)


@pytest.fixture(scope="module")
def releases(sim):
    X_dup = sim.X.copy()
    X_dup[:, 2] = X_dup[:, 1]  # duplicated column: every S_j is singular (up to rounding)
    X_zero = sim.X.copy()
    X_zero[:, 2] = 0.0  # a feature never observed: S_j exactly singular
    return {"regular": _exact_release(sim.X, sim.y, bounds=sim.bounds),
            "singular": _exact_release(X_dup, sim.y, bounds=sim.bounds),
            "zero-column": _exact_release(X_zero, sim.y, bounds=sim.bounds)}


# the methods of the normalX model: they need sigma_s > 0 and must refuse naming it
NORMALX_METHODS = ("normalx", "normalx-paper", "nuts-normalx")


# the paper's samplers that fit such releases are the heavy cases: they run with -m slow
SLOW_METHODS = ("bs", "fixeds-paper", "nuts-fixeds")


@pytest.mark.parametrize("kind", ["regular", "singular", "zero-column"])
@pytest.mark.parametrize("method", [pytest.param(m, marks=pytest.mark.slow) if m in SLOW_METHODS
                                    else m for m in sorted(bayesdp.METHODS)])
def test_zero_noise_never_gives_nan_draws(releases, method, kind):
    rel = releases[kind]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            idata = bayesdp.fit(rel, method=method, seed=0, num_samples=50, num_warmup=50,
                                num_chains=1, progress_bar=False)
        except BayesdpInputError as exc:  # refusing is allowed, with the field named
            assert "sigma_s" in str(exc), exc
            assert method in NORMALX_METHODS, exc
            return
    for name, v in idata.posterior.items():
        assert np.all(np.isfinite(v.values)), (method, kind, name)
    assert method not in NORMALX_METHODS


def test_fixeds_methods_use_the_degenerate_likelihood_when_s_is_singular(sim, releases):
    """sigma_z = 0 and a singular S_j: z_hat_j ~ N(S_j theta, s2 S_j) lives on range(S_j); the
    exact posterior of theta (s2 fixed) has precision C^-1 + sum_j S_j / s2 and mean from
    C^-1 m + sum_j z_hat_j / s2 (S_j (s2 S_j)^+ z_hat_j = z_hat_j / s2 on the range)."""
    rel = releases["zero-column"]
    assert np.linalg.matrix_rank(rel.S_hat[0]) == 2
    priors = bayesdp.Priors().resolve(rel)  # the default priors fit uses for this release
    s2 = 0.7
    post = bayesdp.inference.closed_form.fast_posterior(rel, priors, sigma_y2=s2)
    Cinv = np.linalg.inv(priors.C)
    P = Cinv + rel.S_hat.sum(0) / s2
    mean = np.linalg.solve(P, Cinv @ priors.m + rel.z_hat.sum(0) / s2)
    np.testing.assert_allclose(post["mean"], mean, rtol=1e-7, atol=1e-9)
    np.testing.assert_allclose(post["cov"], np.linalg.inv(P), rtol=1e-7, atol=1e-12)
    # MCMC-fixedS with sigma_y^2 held at s2 samples the same Gaussian
    idata = bayesdp.fit(rel, method="fixeds", seed=3, num_samples=4000, num_warmup=200,
                        num_chains=1, progress_bar=False, fix_sigma_y2=s2)
    draws = idata.posterior["theta"].values[0]
    sd = np.sqrt(np.diag(np.linalg.inv(P)))
    assert np.all(np.abs(draws.mean(0) - mean) < 5 * sd / np.sqrt(4000) * 3)
    np.testing.assert_allclose(draws.std(0), sd, rtol=0.1)


def test_zero_noise_release_with_noisy_statistics_is_named(sim):
    """Noisy S_hat / z_hat declared noiseless: the clipped nearest-PSD S is singular and z_hat is
    not in its range, which the model gives probability zero; a named error, not NaN."""
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=2,
                          seed=2)
    rel0 = Release(S_hat=rel.S_hat, z_hat=rel.z_hat, n=rel.n, sigma_s=0.0, sigma_z=0.0,
                   bounds=rel.bounds)
    if np.all(np.linalg.eigvalsh(rel.S_hat) > 0):
        pytest.skip("this seed's noisy S_hat happens to be positive definite")
    for method in ("fast", "fixeds", "nuts-fixeds"):
        with pytest.raises(BayesdpInputError, match="z_hat has a component"):
            bayesdp.fit(rel0, method=method, seed=0, num_samples=20, num_warmup=20,
                        num_chains=1, progress_bar=False)


def test_fit_refuses_non_finite_draws(releases, monkeypatch):
    """The last line of defence: whatever a method returns, NaN or infinite draws raise a
    SamplerError naming the method and the variable."""

    def broken(release, priors, *, seed, num_samples, num_chains, num_warmup, progress_bar):
        theta = np.zeros((num_chains, num_samples, release.d))
        theta[0, 3, 1] = np.nan
        s2 = np.ones((num_chains, num_samples))
        s2[0, 0] = np.inf
        return methods_mod.MethodResult(posterior={"sigma_y2": np.ones((num_chains, num_samples)),
                                                   "theta": theta, "tau": s2})

    monkeypatch.setitem(methods_mod.METHODS, "broken",
                        methods_mod.Method("broken", broken, "returns a NaN"))
    with pytest.raises(SamplerError, match=r"method 'broken'.*1 non-finite.*'theta'"):
        bayesdp.fit(releases["regular"], method="broken", seed=0, num_samples=10,
                    num_chains=2)
    assert not isinstance(SamplerError("x"), ValueError)
    assert isinstance(SamplerError("x"), bayesdp.BayesdpError)
