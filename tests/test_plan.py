"""bayesdp.plan and bayesdp.smallest_epsilon: a release planned before any budget is spent.

Closed forms where the posterior is Gaussian (method "fast" with sigma_y^2 given, a release
without noise), the noise scale of the release path itself, the inverse's consistency with
the plan, the design kinds (pilot rows with and without y, a formula table, an earlier release),
and bad input. The planned-against-realised check on real releases is the slow test at the end
(the full table: benchmarks/bench_plan.py, docs/evidence/planning.md)."""

import math
import warnings

import numpy as np
import pandas as pd
import pytest

import bayesdp
from bayesdp.errors import BayesdpInputError

FAST = dict(method="fast", releases=5, num_samples=200)


@pytest.fixture(scope="module")
def sim():
    return bayesdp.simulate(n=60_000, d=3, seed=5)


def test_table_shape_names_and_assumptions(sim):
    t = bayesdp.plan(sim.X[:1000], sim.y[:1000], n=50_000, bounds=sim.bounds, nodes=[1, 5],
                     epsilon=[1.0, 10.0], delta=1e-5, **FAST)
    assert t.index.names == ["epsilon", "nodes", "feature"]
    assert len(t) == 2 * 2 * 3
    assert list(t.loc[(1.0, 5)].index) == ["x0", "x1", "x2"]
    for col in ("theta", "sd", "sd 10%", "sd 90%", "prior share", "90% half-width", "rmse",
                "rmse adassp", "noise sd"):
        assert col in t.columns and np.isfinite(t[col]).all(), col
    assert (t["sd 10%"] <= t["sd"] + 1e-12).all() and (t["sd"] <= t["sd 90%"] + 1e-12).all()
    assert "pilot's 1000 rows" in t.attrs["assumes"][0]
    assert t.attrs["n"] == 50_000 and t.attrs["method"] == "fast"


@pytest.mark.parametrize("J, include_yty, intercept", [(1, True, False), (5, False, False),
                                                       (3, True, True)])
def test_noise_sd_is_the_release_path_s(sim, J, include_yty, intercept):
    """The plan's noise is the one bayesdp.release would add at the same settings."""
    t = bayesdp.plan(sim.X[:500], sim.y[:500], n=20_000, bounds=sim.bounds, nodes=J,
                     epsilon=0.7, delta=1e-6, include_yty=include_yty, intercept=intercept,
                     **FAST)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = bayesdp.release(sim.X[:20_000], sim.y[:20_000], epsilon=0.7, delta=1e-6,
                              bounds=sim.bounds, nodes=J, include_yty=include_yty,
                              intercept=intercept, seed=0)
    assert np.allclose(t["noise sd"], rel.sigma_s[0], rtol=1e-12)
    assert list(t.index.get_level_values("feature")[:rel.d]) == list(rel.feature_names)


def _pilot_moments(X, y):
    G = X.T @ X / len(y)
    theta = np.linalg.solve(G, X.T @ y / len(y))
    r = y - X @ theta
    return G, theta, float(r @ r / (len(y) - X.shape[1]))


def test_without_noise_the_plan_is_the_gaussian_closed_form(sim):
    """At eps = 1e7 the release's noise is negligible; "fast" with sigma_y^2 given then has
    the posterior N((S/s2 + C^-1)^-1 z/s2, (S/s2 + C^-1)^-1), S = n G: the planned sd must be
    sqrt(s2 diag((n G)^-1)) (the prior's C^-1 is ~1e-4 of S/s2 here), to the bootstrap's error
    of G from 20,000 pilot rows (< 2%); and the posterior mean must be the non-private least
    squares of the same simulated rows (RMSE against it below 3% of the sd, the draws' Monte
    Carlo error: the release adds none; against the population's theta it would be about the
    sd). Negative control: the closed form at the wrong n."""
    X, y = sim.X[:20_000], sim.y[:20_000]
    G, _, s2 = _pilot_moments(X, y)
    n = 200_000
    t = bayesdp.plan(X, y, n=n, bounds=sim.bounds, nodes=1, epsilon=1e7, delta=1e-5,
                     method="fast", sigma_y2=s2, releases=30, num_samples=5000)
    closed = np.sqrt(s2 * np.diag(np.linalg.inv(n * G)))
    assert np.allclose(t["sd"], closed, rtol=0.02), (t["sd"].values, closed)
    # the mean of 5,000 draws is within sd / sqrt(5000) = 1.4% sd of the posterior mean
    assert (t["rmse"] < 0.03 * t["sd"]).all(), (t["rmse"] / t["sd"]).values
    wrong = np.sqrt(s2 * np.diag(np.linalg.inv(2 * n * G)))
    assert not np.allclose(t["sd"], wrong, rtol=0.02)


def test_noise_widens_the_plan_and_more_holders_widen_it_more(sim):
    """Same rows, more noise (smaller eps) or more holders (J noisy sums): a larger planned sd
    of the best-measured coefficient, by the default method (eiv, which carries the noise on S;
    "fast" holds S fixed and need not widen)."""
    kw = dict(n=50_000, bounds=sim.bounds, delta=1e-5, releases=5, num_samples=200)
    t = bayesdp.plan(sim.X[:2000], sim.y[:2000], nodes=[1, 10], epsilon=[0.3, 30.0], **kw)
    best = t.loc[(30.0, 1)]["sd"].idxmin()
    assert t.loc[(0.3, 1, best), "sd"] > 1.5 * t.loc[(30.0, 1, best), "sd"]
    assert t.loc[(0.3, 10, best), "sd"] > t.loc[(0.3, 1, best), "sd"]


def test_without_y_one_block_per_assumed_r2(sim):
    t = bayesdp.plan(sim.X[:1000], None, n=50_000, bounds=sim.bounds, nodes=1, epsilon=1e3,
                     delta=1e-5, releases=5, num_samples=200)  # eiv: sigma_y^2 from y^T y
    assert t.index.names == ["epsilon", "nodes", "r2", "feature"]
    assert sorted(set(t.index.get_level_values("r2"))) == [0.2, 0.5, 0.8]
    # theta^T G theta = R^2 y_ms and sigma^2 = (1 - R^2) y_ms, y_ms = (B_y / 2)^2
    G = sim.X[:1000].T @ sim.X[:1000] / 1000
    for r2 in (0.2, 0.8):
        theta = t.xs(r2, level="r2")["theta"].to_numpy()
        assert theta @ G @ theta == pytest.approx(r2 * (sim.bounds[1] / 2) ** 2, rel=1e-9)
    # less noise on y (larger R^2): narrower, when the release's noise is small
    assert (t.xs(0.8, level="r2")["sd"].to_numpy() < t.xs(0.2, level="r2")["sd"].to_numpy()).all()
    assert "no y: R^2 = 0.2" in " ".join(t.attrs["assumes"])


def test_formula_table_plans_the_release_s_coefficients():
    rng = np.random.default_rng(0)
    m = 800
    table = pd.DataFrame({"x": rng.uniform(0, 10, m), "g": rng.choice(["a", "b", "c"], m)})
    table["y"] = 0.3 * table["x"] + (table["g"] == "b") - 1.5 + rng.normal(0, 0.5, m)
    bounds = {"x": (0, 10), "g": ["a", "b", "c"], "y": (-10, 10)}
    formula = "y ~ x + C(g)"
    t = bayesdp.plan(table, formula=formula, bounds=bounds, n=40_000, nodes=2, epsilon=5.0,
                     delta=1e-5, **FAST)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = bayesdp.release(table, formula=formula, bounds=bounds, epsilon=5.0, delta=1e-5,
                              nodes=2, seed=0)
    assert list(t.index.get_level_values("feature")) == list(rel.feature_names)
    assert np.allclose(t["noise sd"], rel.sigma_s[0])
    assert t["rmse adassp"].isna().all()  # adaSSP has no intercept form


def test_an_earlier_release_is_a_design(sim):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = bayesdp.release(sim.X, sim.y, epsilon=2.0, delta=1e-5, bounds=sim.bounds,
                              nodes=3, seed=1)
    t = bayesdp.plan(rel, nodes=[1, 3], epsilon=[2.0, 8.0], delta=1e-5, **FAST)
    assert t.attrs["n"] == rel.n_total
    own = bayesdp.plan(rel, epsilon=2.0, delta=1e-5, **FAST)  # n, bounds and J: its own
    assert set(own.index.get_level_values("nodes")) == {3}
    assert "an earlier release (3 holders" in t.attrs["assumes"][0]
    with pytest.raises(BayesdpInputError, match="keeps them"):
        bayesdp.plan(rel, bounds=(1.0, 1.0), epsilon=1.0, delta=1e-5)


def test_smallest_epsilon_is_consistent_with_the_plan(sim):
    kw = dict(n=50_000, bounds=sim.bounds, nodes=2, delta=1e-5, **FAST)
    X, y = sim.X[:2000], sim.y[:2000]
    full = bayesdp.plan(X, y, epsilon=[1.0], **kw)
    best = full["sd"].idxmin()[-1]
    target = 1.2 * float(full["sd"].min())  # reachable near eps = 1
    a = bayesdp.smallest_epsilon(X, y, target_sd=target, coefficients=[best], **kw)
    assert a.reached and a.reason is None and 1e-3 < a.epsilon < 100
    at = bayesdp.plan(X, y, epsilon=a.epsilon, **kw).xs(best, level="feature")["sd"].iloc[0]
    below = bayesdp.plan(X, y, epsilon=a.epsilon / 1.05,
                         **kw).xs(best, level="feature")["sd"].iloc[0]
    assert at <= target < below
    assert a.table.xs(best, level="feature")["sd"].iloc[0] <= target


def test_smallest_epsilon_says_why_it_cannot(sim):
    kw = dict(n=5_000, bounds=sim.bounds, nodes=5, delta=1e-5, max_epsilon=10.0, releases=4,
              num_samples=200)
    X, y = sim.X[:1000], sim.y[:1000]
    rows = bayesdp.smallest_epsilon(X, y, target_sd=1e-6, **kw)
    assert not rows.reached and rows.epsilon is None
    assert "even without the release's noise" in rows.reason and "n = 5000 rows" in rows.reason
    noise = bayesdp.smallest_epsilon(X, y, target_sd=0.02, coefficients=["x0"],
                                     **{**kw, "n": 500_000})
    assert not noise.reached and "still swamps" in noise.reason and "B_x" in noise.reason


@pytest.mark.parametrize("kwargs, match", [
    (dict(method="normalx"), "closed-form methods"),
    (dict(bounds="private"), "public bounds"),
    (dict(bounds=None), "public bounds"),
    (dict(n=3, nodes=5), "cannot share n = 3"),
    (dict(epsilon=-1.0), "epsilon"),
    (dict(epsilon=[]), "epsilon"),
    (dict(nodes=[2, 0]), "nodes"),
    (dict(r2=0.5), "the pilot has y"),
    (dict(releases=1), "releases"),
    (dict(sigma_y_rule="paper", method="eiv"), "unknown option"),
])
def test_bad_input_names_the_argument(sim, kwargs, match):
    base = dict(n=10_000, bounds=sim.bounds, nodes=1, epsilon=1.0, delta=1e-5)
    with pytest.raises(BayesdpInputError, match=match):
        bayesdp.plan(sim.X[:100], sim.y[:100], **{**base, **kwargs})


def test_smallest_epsilon_bad_input(sim):
    base = dict(n=10_000, bounds=sim.bounds, nodes=1, delta=1e-5)
    with pytest.raises(BayesdpInputError, match="target_sd, target_prior_share"):
        bayesdp.smallest_epsilon(sim.X[:100], sim.y[:100], **base)
    with pytest.raises(BayesdpInputError, match="not among the features"):
        bayesdp.smallest_epsilon(sim.X[:100], sim.y[:100], target_sd=0.1,
                                 coefficients=["x9"], **base)
    with pytest.raises(BayesdpInputError, match="one holder count"):
        bayesdp.smallest_epsilon(sim.X[:100], sim.y[:100], target_sd=0.1,
                                 **{**base, "nodes": [1, 5]})


@pytest.mark.slow
def test_planned_sd_matches_realised_releases_with_negative_controls():
    """One cell of benchmarks/bench_plan.py: the paper's simulation, a 2% pilot, J = 5,
    eps = 1. The planned sd of every coefficient is within a factor 1.33 of the mean
    posterior sd of 30 real releases of the other rows fitted by bayesdp.fit (the issue's
    tolerance; the benchmark measures 1.03-1.12 here with 100 releases each). Negative
    controls: a plan with the wrong J (1 for 5) or bounds 3x too wide must miss it."""
    from bayesdp import diagnostics

    sim = bayesdp.simulate(n=100_000, d=5, seed=11)
    perm = np.random.default_rng(7).permutation(len(sim.y))
    pilot, rest = perm[:2000], perm[2000:]
    Xp, yp, Xr, yr = sim.X[pilot], sim.y[pilot], sim.X[rest], sim.y[rest]
    sds = []
    for r in range(30):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            rel = bayesdp.release(Xr, yr, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=5,
                                  seed=r)
            sds.append(diagnostics.posterior_array(bayesdp.fit(rel, seed=r), "theta").std(0))
    realised = np.mean(sds, axis=0)

    def ratio(**changes):
        kw = dict(n=len(rest), bounds=sim.bounds, nodes=5, epsilon=1.0, delta=1e-5,
                  releases=40)
        return bayesdp.plan(Xp, yp, **{**kw, **changes})["sd"].to_numpy() / realised

    ok = ratio()
    assert np.all((ok > 1 / 1.33) & (ok < 1.33)), ok
    for wrong in (ratio(nodes=1), ratio(bounds=(3 * sim.bounds[0], 3 * sim.bounds[1]))):
        assert not np.all((wrong > 1 / 1.33) & (wrong < 1.33)), wrong
