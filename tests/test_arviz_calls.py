"""The ArviZ calls a user makes without arguments work on bayesdp's fits: plot_ppc, loo,
summary, plot_trace, plot_forest (issue 54). observed_data holds what posterior_predictive
predicts, so plot_ppc pairs them."""

import warnings

import matplotlib

matplotlib.use("Agg")

import arviz as az  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

import bayesdp  # noqa: E402


@pytest.fixture(scope="module")
def release():
    sim = bayesdp.simulate(n=5000, d=2, seed=4)
    return bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=3,
                           seed=0)


@pytest.mark.parametrize("method", ["eiv", "fast"])
def test_arviz_calls_without_arguments(release, method):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bayesdp.fit(release, method=method, seed=0, num_samples=300)
    assert set(idata.observed_data.data_vars) == set(idata.posterior_predictive.data_vars)
    assert "S_hat" in idata.constant_data  # held fixed, not predicted: the rest of the release
    az.plot_ppc(idata)
    loo = az.loo(idata)
    assert loo.n_data_points == release.J
    summary = az.summary(idata)
    assert "theta[x0]" in summary.index
    az.plot_trace(idata)
    az.plot_forest(idata)
    plt.close("all")


def test_observed_data_without_a_prediction_of_it_is_a_negative_control(release):
    """plot_ppc fails when observed_data holds a variable posterior_predictive lacks (what
    the split above prevents)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bayesdp.fit(release, seed=0, num_samples=100)
    idata.observed_data["S_hat"] = idata.constant_data["S_hat"]
    with pytest.raises(KeyError):
        az.plot_ppc(idata)
    plt.close("all")
