"""BayesDPRegressor as a scikit-learn estimator (issue 37, item 1): scikit-learn's own estimator
checks, pipelines, cross_val_score, GridSearchCV over epsilon, clone, loud failures instead of
NaN scores, and the privacy budget that every fit spends."""

import inspect
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")

from sklearn.base import clone, is_regressor  # noqa: E402
from sklearn.exceptions import NotFittedError as SkNotFittedError  # noqa: E402
from sklearn.frozen import FrozenEstimator  # noqa: E402
from sklearn.model_selection import (GridSearchCV, KFold, cross_val_score,  # noqa: E402
                                     cross_validate)
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402
from sklearn.utils.validation import check_is_fitted  # noqa: E402

import bayesdp  # noqa: E402
from bayesdp import accounting  # noqa: E402
from bayesdp.errors import BayesdpInputError  # noqa: E402

# -- scikit-learn's estimator checks ---------------------------------------------------------------

# The instance the checks run on: the default method ("eiv"), bounds wide enough for the checks'
# small data sets (rows outside are clipped), a seed (random_state, which the checks set) so
# that two fits on the same rows agree
# (check_fit_idempotent, check_methods_subset_invariance, ...), and few draws in one chain (the
# checks test the API).
CHECKED = bayesdp.BayesDPRegressor(bounds=(10.0, 10.0), random_state=0, num_samples=100,
                                   num_chains=1)
# The docs' constructor, no seed (issue 54): fresh noise per fit, declared by the
# non_deterministic tag; scikit-learn's checks set random_state=0 where they compare two fits.
DOCS = bayesdp.BayesDPRegressor(epsilon=1.0, delta=1e-5, bounds=(17.0, 8.0))

# No check is expected to fail. What the checks would otherwise trip on is declared in
# BayesDPRegressor.__sklearn_tags__: sparse input is refused with scikit-learn's "Sparse data was
# passed" (input_tags.sparse = False), and regressor_tags.poor_score = True (check_regressors_train
# asks for R^2 > 0.5 on 200 rows, which a DP release of 200 rows at epsilon = 1 does not reach:
# the noise on X^T X has sd ~ B_x^2 / epsilon).
EXPECTED_FAILED = {}

# Checks that fit the estimator five times or more (~1-3 s a fit on a loaded 2-core machine):
# run with the slow tests (.ci/run runs them), the others with every test run.
HEAVY = {"check_estimators_dtypes", "check_estimators_overwrite_params",
         "check_methods_sample_order_invariance", "check_fit_score_takes_y",
         "check_regressor_data_not_an_array", "check_dtype_object",
         "check_positive_only_tag_during_fit", "check_regressors_train",
         "check_fit2d_predict1d", "check_pipeline_consistency", "check_estimators_nan_inf",
         "check_supervised_y_2d", "check_estimators_fit_returns_self"}


def _check_name(check):
    return getattr(check, "func", check).__name__


def _checks_parametrisation():
    deco = parametrize_with_checks([CHECKED, DOCS],
                                   expected_failed_checks=lambda e: EXPECTED_FAILED)
    argnames, values = deco.args[0], list(deco.args[1])
    ids = deco.kwargs.get("ids")
    marked = []
    for v in values:
        if isinstance(v, tuple):
            est, check = v
            marks = []
        else:  # a pytest.param (an expected failure)
            (est, check), marks = v.values, list(v.marks)
        name = _check_name(check)
        if name in HEAVY:
            marks.append(pytest.mark.slow)
        marked.append(pytest.param(est, check, marks=marks,
                                   id=f"{ids(est)}-{ids(check)}" if callable(ids) else name))
    return pytest.mark.parametrize(argnames, marked)


@pytest.mark.filterwarnings("ignore:release without an intercept")
@_checks_parametrisation()
def test_scikit_learn_estimator_checks(estimator, check):
    check(estimator)


def test_the_heavy_list_names_real_checks():
    """A renamed or dropped check in HEAVY would silently run unmarked (or not at all)."""
    deco = parametrize_with_checks([CHECKED])
    names = set()
    for v in deco.args[1]:
        check = v[1] if isinstance(v, tuple) else v.values[1]
        names.add(_check_name(check))
    assert HEAVY <= names, sorted(HEAVY - names)
    assert len(names) >= 40  # the suite ran, not an empty parametrisation


def test_tags_and_fitted_state():
    est = bayesdp.BayesDPRegressor(bounds=(3.0, 3.0))
    assert is_regressor(est)
    tags = est.__sklearn_tags__()
    assert tags.input_tags.sparse is False and tags.regressor_tags.poor_score is True
    assert tags.non_deterministic is True  # seed=None: fresh noise on every fit
    assert bayesdp.BayesDPRegressor(bounds=(3.0, 3.0), seed=1).__sklearn_tags__() \
        .non_deterministic is False
    with pytest.raises(SkNotFittedError):
        check_is_fitted(est)
    with pytest.raises(SkNotFittedError, match="not fitted yet"):
        est.predict(np.ones((2, 3)))
    with pytest.raises(BayesdpInputError, match="not fitted yet"):  # also bayesdp's input error
        est.predict(np.ones((2, 3)))
    from scipy import sparse

    with pytest.raises(TypeError, match="Sparse data was passed"):  # as scikit-learn's own
        est.fit(sparse.csr_matrix(np.eye(3)), np.ones(3))
    with pytest.raises(BayesdpInputError, match="Complex data not supported"):
        est.fit(np.ones((4, 2)) * 1j, np.ones(4))
    with pytest.raises(BayesdpInputError, match="requires y to be passed"):
        est.fit(np.ones((4, 2)), None)


# -- pipelines, cross-validation, grid search, clone ----------------------------------------------


@pytest.fixture(scope="module")
def data():
    """3000 rows, d = 3, features of different scales: at epsilon = 20 the release's noise is
    small next to the signal (R^2 of the true theta about 0.86)."""
    rng = np.random.default_rng(7)
    X = rng.standard_normal((3000, 3)) * [1.0, 2.0, 0.5]
    theta = np.array([1.0, -0.5, 2.0])
    return X, X @ theta + 0.7 * rng.standard_normal(3000)


def _est(**kw):
    kw = {"epsilon": 20.0, "bounds": (9.0, 8.0), "seed": 0, "num_samples": 200,
          "num_chains": 1, **kw}
    return bayesdp.BayesDPRegressor(**kw)


def _public_scaler():
    """A scaler fitted on public rows (not the private ones) and frozen: its mean and sd are
    public constants, which a pipeline's fit neither recomputes nor reveals."""
    public = np.random.default_rng(11).standard_normal((500, 3)) * [1.0, 2.0, 0.5]
    return FrozenEstimator(StandardScaler().fit(public))


def test_pipeline_cross_val_score_gives_finite_scores(data):
    X, y = data
    scaler = _public_scaler()
    public_mean = scaler.estimator.mean_.copy()
    pipe = make_pipeline(scaler, _est())
    with warnings.catch_warnings():
        warnings.simplefilter("error", sklearn.exceptions.FitFailedWarning)
        scores = cross_val_score(pipe, X, y, cv=KFold(3))
    assert scores.shape == (3,) and np.all(np.isfinite(scores)), scores
    # the true theta's R^2 on these rows is ~0.86; a DP fit at epsilon = 20 comes close, and a
    # fit that ignored the data (R^2 <= 0) or predicted garbage would not
    assert np.all(scores > 0.6), scores
    assert np.all(scores < 1.0)
    # the pipeline fits, predicts and scores like the estimator on rows scaled by the public
    # constants, and the scaler never saw the private rows
    fitted = clone(pipe).fit(X, y)
    Xs = scaler.transform(X)
    direct = _est().fit(Xs, y)
    np.testing.assert_allclose(fitted.predict(X[:5]), direct.predict(Xs[:5]), rtol=1e-10)
    np.testing.assert_array_equal(fitted[0].estimator.mean_, public_mean)
    assert np.max(np.abs(public_mean - X.mean(axis=0))) > 1e-3  # not the private rows' mean


def test_docs_warn_that_a_scaler_fitted_on_the_rows_is_not_private():
    """A StandardScaler fitted inside the pipeline computes the private rows' mean and sd with
    no noise: the docs must not recommend it, and must say to scale by public constants."""
    doc = bayesdp.BayesDPRegressor.__doc__
    pre = doc[doc.index("Preprocessing"):]
    assert "StandardScaler" in pre and "public" in pre and "FrozenEstimator" in pre
    text = (Path(__file__).parents[1] / "docs" / "prediction.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks
    for block in blocks:  # no code example fits a scaler on the private rows
        assert not re.search(r"make_pipeline\(\s*StandardScaler\(\)", block), block
    assert "FrozenEstimator" in text and "not covered by" in text


def test_a_fit_that_cannot_score_fails_loudly(data):
    """No bounds: the fit cannot run. cross_val_score must not hand back NaN scores: with every
    fit failing scikit-learn raises, and error_score="raise" gives bayesdp's own message."""
    X, y = data
    pipe = make_pipeline(_public_scaler(), _est(bounds=None))
    with pytest.raises(BayesdpInputError, match="bounds"):
        cross_val_score(pipe, X, y, cv=KFold(3), error_score="raise")
    with pytest.raises(ValueError, match="fits failed"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cross_val_score(pipe, X, y, cv=KFold(3))
    est = _est().fit(X, y)
    with pytest.raises(BayesdpInputError, match="one value per row"):
        est.score(X[:5], y[:4])
    with pytest.raises(BayesdpInputError, match="NaN"):
        est.predict(np.where(np.eye(3, dtype=bool), np.nan, 1.0))


def test_grid_search_over_epsilon_and_clone(data):
    X, y = data
    est = _est()
    grid = GridSearchCV(est, {"epsilon": [0.05, 20.0]}, cv=KFold(2))
    grid.fit(X, y)
    scores = grid.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)), scores
    # epsilon = 0.05 on 1500 rows: the noise on X^T X (sd ~ 3000) swamps the signal; epsilon = 20
    # does not. A search that chose from NaN or ignored epsilon would not reliably pick 20.
    assert grid.best_params_ == {"epsilon": 20.0}
    assert scores[1] > scores[0] + 0.1, scores
    assert grid.best_estimator_.release_.epsilon == 20.0
    assert grid.best_estimator_.release_.n_total == len(y)  # the refit on every row
    # clone: same parameters, not fitted, independent of the original
    c = clone(grid.best_estimator_)
    assert c.get_params() == grid.best_estimator_.get_params()
    assert not hasattr(c, "coef_") and not hasattr(c, "release_")
    c.set_params(epsilon=3.0)
    assert grid.best_estimator_.epsilon == 20.0
    with pytest.raises(BayesdpInputError, match="'epsilonn' is not a parameter"):
        c.set_params(epsilonn=1.0)


# -- the privacy budget every fit spends -----------------------------------------------------------


def test_every_fit_records_its_cost_and_fits_add_up(data):
    X, y = data
    # seed=None: a budget is for fits with fresh noise (a seeded fit has none, test below)
    res = cross_validate(_est(epsilon=1.0, delta=1e-6, seed=None, method="fast"), X, y,
                         cv=KFold(3), return_estimator=True)
    fitted = res["estimator"]
    assert len(fitted) == 3
    one = fitted[0]
    cost = one.privacy_cost_
    assert cost == accounting.privacy_cost(one.release_)
    assert cost["total"]["epsilon"] == pytest.approx(1.0, rel=1e-6)
    assert cost["total"]["delta"] == pytest.approx(1e-6)
    # three fits on (overlapping) rows of one holder: the exact composition of the three
    # releases that were made, against three copies of one fit's cost
    exact = accounting.budget(*[e.release_ for e in fitted])
    three = one.budget(3)
    assert three.epsilon == pytest.approx(exact.epsilon, rel=1e-9)
    assert three.delta == pytest.approx(exact.delta, rel=1e-12)
    assert three.rho == pytest.approx(exact.rho, rel=1e-9)
    assert three.rho == pytest.approx(3 * cost["total"]["rho"], rel=1e-12)
    # composition spends more than one fit but (zCDP) less than three times epsilon
    assert one.budget(1).epsilon == pytest.approx(1.0, rel=1e-6)
    assert 1.0 < three.epsilon < 3.0
    basic = one.budget(3, accountant="basic")
    assert basic.epsilon == pytest.approx(3.0, rel=1e-6) and basic.delta == pytest.approx(3e-6)
    # a grid search over k = 2 values with c = 3 folds and its refit: 2 x 3 + 1 releases
    assert one.budget(7).rho == pytest.approx(7 * cost["total"]["rho"], rel=1e-12)
    # budget(n) is accounting.budget of the release counted n times, one function for both
    same = accounting.budget(accounting.repeated(one.release_, 3), accountant="basic")
    assert (same.epsilon, same.delta, same.rho) == (basic.epsilon, basic.delta, basic.rho)
    assert three.releases == ("this fit x 3",)
    with pytest.raises(BayesdpInputError, match="n_fits"):
        one.budget(0)
    with pytest.raises(BayesdpInputError, match="accountant"):
        one.budget(2, accountant="renyi")


def test_seeded_fits_repeat_their_noise_and_have_no_budget():
    """Negative control: one seed gives every fit the same noise. Two seeded fits on
    overlapping rows (the training rows of two folds) released S + E and S' + E; subtracting
    them gives S - S', the statistics of the rows in one fold and not the other, exactly. So
    their costs do not add up as independent releases: budget refuses and privacy_cost_ has no
    total. With seed=None the noise differs (the positive control)."""
    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, (600, 2))
    y = X @ [1.0, -1.0] + 0.1 * rng.standard_normal(600)
    bounds = (2.0, 3.0)  # nothing is clipped: the released S is X^T X plus the noise
    a_rows, b_rows = slice(0, 400), slice(200, 600)  # overlapping, as two training folds

    def noise(est, rows):
        assert int(est.release_.n_clipped.sum()) == 0
        return est.release_.S_hat[0] - X[rows].T @ X[rows], \
            est.release_.z_hat[0] - X[rows].T @ y[rows]

    kw = {"epsilon": 1.0, "bounds": bounds, "method": "fast", "num_samples": 50,
          "num_chains": 1}
    a = bayesdp.BayesDPRegressor(seed=5, **kw).fit(X[a_rows], y[a_rows])
    b = clone(a).fit(X[b_rows], y[b_rows])
    (ea, za), (eb, zb) = noise(a, a_rows), noise(b, b_rows)
    assert np.max(np.abs(ea)) > 0.01 * a.release_.sigma_s[0]  # the noise is real ...
    np.testing.assert_allclose(ea, eb, rtol=0, atol=1e-9)  # ... and the same in both fits
    np.testing.assert_allclose(za, zb, rtol=0, atol=1e-9)
    # the "attack": rows 0-199 minus rows 400-599, without any noise
    diff = a.release_.S_hat[0] - b.release_.S_hat[0]
    exact = X[:200].T @ X[:200] - X[400:].T @ X[400:]
    np.testing.assert_allclose(diff, exact, rtol=0, atol=1e-9)
    assert a.privacy_cost_["total"]["epsilon"] is None
    assert "seeded" in a.privacy_cost_["total"]["note"]
    with pytest.raises(BayesdpInputError, match="seeded.*same noise.*no DP guarantee"):
        a.budget(2)
    with pytest.raises(BayesdpInputError, match="seed=None"):
        a.budget(1)
    # fresh noise without a seed: the two releases differ, and the budget is given
    c = bayesdp.BayesDPRegressor(seed=None, **kw).fit(X[a_rows], y[a_rows])
    d = clone(c).fit(X[b_rows], y[b_rows])
    assert np.max(np.abs(noise(c, a_rows)[0] - noise(d, b_rows)[0])) > 1.0
    assert c.budget(2).epsilon > 1.0


def test_a_grid_over_epsilon_adds_up_each_value_s_own_cost(data):
    """GridSearchCV over epsilon = (0.5, 20) with 2 folds makes 2 releases at each epsilon and
    a refit at the best: budget(5) of any one fit is wrong both ways, accounting.budget with
    accounting.repeated (one kept fit per value) is exact."""
    X, y = data
    fits = {e: cross_validate(_est(epsilon=e, seed=None, method="fast"), X, y, cv=KFold(2),
                              return_estimator=True)["estimator"] for e in (0.5, 20.0)}
    refit = _est(epsilon=20.0, seed=None, method="fast").fit(X, y)
    made = [f.release_ for e in fits for f in fits[e]] + [refit.release_]
    exact = accounting.budget(*made)
    per_value = accounting.budget(accounting.repeated(fits[0.5][0].release_, 2),
                                  accounting.repeated(refit.release_, 3))
    assert per_value.rho == pytest.approx(exact.rho, rel=1e-12)
    assert per_value.epsilon == pytest.approx(exact.epsilon, rel=1e-9)
    assert per_value.delta == pytest.approx(exact.delta, rel=1e-12)
    basic = accounting.budget(accounting.repeated(fits[0.5][0].release_, 2),
                              accounting.repeated(refit.release_, 3), accountant="basic")
    assert basic.epsilon == pytest.approx(2 * 0.5 + 3 * 20.0, rel=1e-6)
    assert refit.budget(5).rho > 1.5 * exact.rho  # the best fit's cost, 5 times: too much
    assert fits[0.5][0].budget(5).rho < 0.5 * exact.rho  # the cheapest's: far too little
    # repeated is an argument of budget: a bad count, or one release also given directly
    with pytest.raises(BayesdpInputError, match="times"):
        accounting.repeated(refit.release_, 0)
    with pytest.raises(BayesdpInputError, match="same release is given twice"):
        accounting.budget(accounting.repeated(refit.release_, 2), refit.release_)


def test_bounds_read_off_the_data_have_no_budget(data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est = _est(bounds="data", seed=None, method="fast").fit(X[:500], y[:500])
    assert est.privacy_cost_["total"]["epsilon"] is None
    with pytest.raises(BayesdpInputError, match="no DP guarantee"):
        est.budget(2)


def test_one_set_params_and_one_scikit_learn_version():
    """set_params is written once (the by-hand protocol and scikit-learn's go through it), the
    estimator's minimum scikit-learn is the extra's pin, and eiv is not called a closed form."""
    from bayesdp import estimator as mod

    owners = [c for c in bayesdp.BayesDPRegressor.__mro__
              if c.__module__ == mod.__name__ and "set_params" in vars(c)]
    assert owners == [bayesdp.BayesDPRegressor]
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text()
    pin = re.search(r'sklearn = \["scikit-learn>=([0-9.]+)', pyproject).group(1)
    assert pin == mod.SKLEARN_MIN_VERSION
    assert f">= {mod.SKLEARN_MIN_VERSION}" in inspect.getsource(mod).split("try:")[1][:200]
    method = bayesdp.BayesDPRegressor.__doc__.split("method : str")[1].split("nodes :")[0]
    eiv_part = method.split('``"fast"``')[0]
    assert "closed form" in eiv_part and "grids" in eiv_part
    from bayesdp import demo

    assert "closed form" not in inspect.getsource(demo.run_demo)


@pytest.mark.slow
def test_without_scikit_learn_the_conventions_hold_by_hand(tmp_path):
    """scikit-learn is optional: with its import blocked, the estimator still fits, predicts,
    scores, refuses unknown parameters and records its cost (in a fresh interpreter)."""
    import subprocess
    import sys

    script = tmp_path / "no_sklearn.py"
    script.write_text('''
import sys, warnings
warnings.simplefilter("ignore")
class Block:
    def find_spec(self, name, path, target=None):
        if name == "sklearn" or name.startswith("sklearn."):
            raise ImportError("blocked for the test")
sys.meta_path.insert(0, Block())
import numpy as np, bayesdp
from bayesdp.estimator import HAVE_SKLEARN
assert not HAVE_SKLEARN and "sklearn" not in sys.modules
rng = np.random.default_rng(0)
X = rng.standard_normal((2000, 2)); y = X @ [1.0, 2.0] + rng.standard_normal(2000)
est = bayesdp.BayesDPRegressor(epsilon=20, bounds=(6, 10), seed=0, num_samples=100,
                               num_chains=1)
assert est.get_params()["epsilon"] == 20 and "epsilon=20" in repr(est)
assert est.fit(X, y) is est
assert np.allclose(est.coef_, [1.0, 2.0], atol=0.1), est.coef_
assert 0.7 < est.score(X, y) < 0.9
fresh = bayesdp.BayesDPRegressor(epsilon=20, bounds=(6, 10), num_samples=100, num_chains=1,
                                 method="fast").fit(X, y)
assert fresh.budget(3).rho == 3 * fresh.privacy_cost_["total"]["rho"]
assert est.set_params(epsilon=5) is est and est.epsilon == 5
for call, word in ((lambda: est.set_params(foo=1), "not a parameter"),
                   (lambda: est.budget(3), "seeded"),
                   (lambda: bayesdp.BayesDPRegressor(bounds=(1, 1)).predict(X), "not fitted")):
    try:
        call()
    except bayesdp.errors.BayesdpInputError as exc:
        assert word in str(exc), exc
    else:
        raise AssertionError(word)
print("ok")
''')
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_random_state_is_seed_under_scikit_learns_name():
    """random_state seeds the fit as seed does (same release noise, so the same coefficients);
    clone keeps it; both at once is refused; an instance draws the seed; without either the
    estimator says it is non-deterministic."""
    from sklearn.base import clone

    sim = bayesdp.simulate(n=3000, d=2, seed=1)
    kw = dict(bounds=sim.bounds, num_samples=100, num_chains=1)
    a = bayesdp.BayesDPRegressor(random_state=3, **kw).fit(sim.X, sim.y)
    b = bayesdp.BayesDPRegressor(seed=3, **kw).fit(sim.X, sim.y)
    c = clone(a).fit(sim.X, sim.y)
    assert np.array_equal(a.coef_, b.coef_) and np.array_equal(a.coef_, c.coef_)
    other = bayesdp.BayesDPRegressor(random_state=4, **kw).fit(sim.X, sim.y)
    assert not np.array_equal(a.coef_, other.coef_)  # negative control
    assert a.release_.seeded and "total" in a.privacy_cost_
    with pytest.raises(BayesdpInputError, match="one parameter under two names"):
        bayesdp.BayesDPRegressor(seed=1, random_state=2, **kw).fit(sim.X, sim.y)
    same = bayesdp.BayesDPRegressor(seed=3, random_state=3, **kw).fit(sim.X, sim.y)
    assert np.array_equal(same.coef_, a.coef_)
    inst = bayesdp.BayesDPRegressor(random_state=np.random.RandomState(0), **kw).fit(sim.X, sim.y)
    assert inst.release_.seeded
    from sklearn.utils import get_tags

    assert get_tags(bayesdp.BayesDPRegressor(**kw)).non_deterministic
    assert not get_tags(bayesdp.BayesDPRegressor(random_state=0, **kw)).non_deterministic
