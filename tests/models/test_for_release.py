"""bayesdp.models.for_release (issue 37, item 3): the model ``fit`` uses and its data, run under
numpyro's own MCMC(NUTS(...)), gives the posterior of ``fit`` within Monte Carlo error."""

import warnings

import numpy as np
import pytest

import bayesdp
import bayesdp.paper  # noqa: F401  (registers the paper's methods)
from bayesdp.errors import BayesdpInputError
from bayesdp.models.for_release import numpyro_methods

Z = 4.0  # Monte Carlo tolerance: 4 standard errors of the difference (two-sided p ~ 6e-5)


@pytest.fixture(scope="module")
def rel():
    """d = 2, two holders, 5000 rows at epsilon = 1: a posterior of sd 0.1-0.6 per
    coefficient, so that the DP noise (not the prior) sets it."""
    sim = bayesdp.simulate(n=5000, d=2, seed=1)
    return bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=2,
                           seed=2)


def _nuts(m, num_samples, seed=0, num_warmup=500):
    """The example of docs/methods.md ("The model in numpyro"): numpyro's own NUTS on the
    model and data of for_release; draws of theta (chains, draws, d)."""
    import jax
    from numpyro.infer import MCMC, NUTS, init_to_value

    mcmc = MCMC(NUTS(m.model, init_strategy=init_to_value(values=m.init_values)),
                num_warmup=num_warmup, num_samples=num_samples, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed), m.data)
    return np.asarray(mcmc.get_samples(group_by_chain=True)["theta"])


def _moments(draws):
    """Mean, sd and their Monte Carlo standard errors per coefficient, from (chains, draws, d)
    with the effective sample size (ArviZ's bulk ESS)."""
    import arviz as az

    d = draws.shape[-1]
    ess = np.array([float(az.ess(draws[..., k])) for k in range(d)])
    flat = draws.reshape(-1, d)
    mean, sd = flat.mean(0), flat.std(0)
    # se of the mean sd / sqrt(ESS); se of the sd about sd / sqrt(2 ESS) (normal approximation)
    return mean, sd, sd / np.sqrt(ess), sd / np.sqrt(2.0 * ess)


def _agree(a, b):
    """Whether two sets of draws have the same mean and sd per coefficient within Z standard
    errors of the difference; returns (ok, the largest z)."""
    ma, sa, sea, ssa = _moments(a)
    mb, sb, seb, ssb = _moments(b)
    z = np.concatenate([np.abs(ma - mb) / np.hypot(sea, seb), np.abs(sa - sb) / np.hypot(ssa, ssb)])
    return bool(np.all(z < Z)), float(z.max())


def _fit_theta(rel, method, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bayesdp.fit(rel, method, **kw)
    return np.asarray(idata.posterior["theta"].values)


def test_eiv_under_numpyro_nuts_matches_fit(rel):
    m = bayesdp.models.for_release(rel, "eiv")
    assert m.method == "eiv" and "theta" in m.variables
    # 4000 draws: enough effective samples that the near-miss negative control below is told
    # apart whatever NUTS's path (at 2000 it was for some seeds only)
    nuts = _nuts(m, 4000)
    ok, z = _agree(nuts, _fit_theta(rel, "eiv", seed=0, num_samples=2000, num_chains=2))
    assert ok, f"NUTS on for_release's eiv model and fit(method='eiv') differ: max z = {z:.2f}"
    # negative control, a near miss: the same release and likelihood with one prior scale per
    # slope (scales="per-slope") instead of fit's one for all; the comparison still tells the
    # posteriors apart (the means of theta moved by about 0.4 sd between the two)
    other = _fit_theta(rel, "eiv", seed=0, num_samples=2000, num_chains=2, scales="per-slope")
    ok, z = _agree(nuts, other)
    assert not ok, f"scales='per-slope' not told apart from the common-scale model: max z = {z:.2f}"


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("method", ["normalx", "nuts-normalx"])
def test_normalx_model_data_and_start_are_fits(rel, method, intercept):
    """for_release's normalX model, data and start are those fit's NUTS uses
    (inference.normalx.setup, one definition for both): the same model function and data."""
    import jax

    from bayesdp.inference.fit import prepare_fit
    from bayesdp.inference.mcmc import build_mcmc
    from bayesdp.inference.normalx import setup as normalx_setup

    if intercept:
        sim = bayesdp.simulate(n=3000, d=2, seed=4)
        rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds,
                              nodes=2, seed=5, intercept=True)
    m = bayesdp.models.for_release(rel, method)
    release, _, priors = prepare_fit(rel, method, 0, None, 1, 1, 0)
    mcmc, data = build_mcmc(method, release, priors, num_samples=1, num_warmup=1)
    assert mcmc.sampler.model is m.model
    for a, b in zip(jax.tree.leaves(data), jax.tree.leaves(m.data), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    _, _, pos = normalx_setup(release, priors, centred=method == "nuts-normalx")
    assert set(m.init_values) == {k for k, v in pos.items() if v is not None}
    for k, v in m.init_values.items():
        np.testing.assert_array_equal(np.asarray(v), np.asarray(pos[k]))


def test_float64_is_handled_inside(rel):
    import jax

    m = bayesdp.models.for_release(rel, "fixeds")
    assert jax.config.jax_enable_x64
    assert all(np.asarray(v).dtype == np.float64 for v in jax.tree.leaves(m.data))
    assert set(m.init_values) == {"theta", "sigma_y2"}


def test_bad_methods_and_options_are_refused(rel):
    with pytest.raises(BayesdpInputError, match="closed-form Gaussian"):
        bayesdp.models.for_release(rel, "fast")
    with pytest.raises(BayesdpInputError, match="Bernstein & Sheldon"):
        bayesdp.models.for_release(rel, "bs")
    with pytest.raises(BayesdpInputError, match="has no numpyro model; choose one of"):
        bayesdp.models.for_release(rel, "nuts")
    with pytest.raises(BayesdpInputError, match=r"unknown option\(s\) for method 'eiv'"):
        bayesdp.models.for_release(rel, "eiv", fixed_s="psd")
    with pytest.raises(BayesdpInputError, match=r"unknown option\(s\) for method 'normalx'"):
        bayesdp.models.for_release(rel, "normalx", scale_min=0.1)
    assert "eiv" in numpyro_methods() and "fast" not in numpyro_methods()
    assert set(numpyro_methods()) <= set(bayesdp.METHODS)


@pytest.mark.slow
def test_fixeds_under_numpyro_nuts_matches_fits_kernel(rel):
    """fit(method="fixeds") runs bayesdp's hand-written kernel, not NUTS: an independent
    sampler of the same posterior."""
    nuts = _nuts(bayesdp.models.for_release(rel, "fixeds"), 2000)
    ok, z = _agree(nuts, _fit_theta(rel, "fixeds", seed=0, num_samples=2000, num_chains=2))
    assert ok, f"max z = {z:.2f}"


@pytest.mark.slow
def test_normalx_under_numpyro_nuts_matches_fit(rel):
    m = bayesdp.models.for_release(rel, "normalx")
    assert {"theta", "Sigma_x", "S"} <= set(m.variables)
    nuts = _nuts(m, 1000)
    ok, z = _agree(nuts, _fit_theta(rel, "normalx", seed=0, num_samples=1000, num_chains=2))
    assert ok, f"max z = {z:.2f}"
