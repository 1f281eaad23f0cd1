"""Fitting and predicting from releases of tables with a formula (issue 38, item 3): the
posterior's features are the formula's column names, ``predict`` and ``BayesDPRegressor``
take tables of new rows and encode them as the release did."""

import numpy as np
import pandas as pd
import pytest

import bayesdp
from bayesdp import diagnostics
from bayesdp.errors import BayesdpInputError

FORMULA = "y ~ x + C(g)"
BOUNDS = {"y": (-5.0, 10.0), "x": (0.0, 10.0), "g": ["a", "b", "c"]}
TRUTH = {"intercept": 1.0, "x": 0.3, "C(g)[T.b]": 0.5, "C(g)[T.c]": -0.4}


def table(rng, n, response=True):
    """Rows of y = 1 + 0.3 x + 0.5 [g = b] - 0.4 [g = c] + N(0, 0.3^2)."""
    x = rng.uniform(0, 10, n)
    g = rng.choice(["a", "b", "c"], n)
    out = pd.DataFrame({"x": x, "g": g})
    if response:
        out["y"] = (1 + 0.3 * x + 0.5 * (g == "b") - 0.4 * (g == "c")
                    + 0.3 * rng.standard_normal(n))
    return out


def mean_of(x, g):
    return 1 + 0.3 * x + 0.5 * (g == "b") - 0.4 * (g == "c")


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(1)
    a, b = table(rng, 12_000), table(rng, 8_000)
    kw = dict(formula=FORMULA, bounds=BOUNDS, epsilon=50.0, delta=1e-5)
    rel = bayesdp.combine_releases(bayesdp.release(a, holder_name="a", seed=1, **kw),
                                   bayesdp.release(b, holder_name="b", seed=2, **kw))
    return rel, bayesdp.fit(rel, seed=0)


def test_the_posterior_is_over_the_formulas_columns(fitted):
    rel, idata = fitted
    coords = [str(v) for v in idata.posterior["theta"].coords["feature"].values]
    assert coords == list(TRUTH)
    mean = idata.posterior["theta"].mean(("chain", "draw")).values
    np.testing.assert_allclose(mean, list(TRUTH.values()), atol=0.05)


def test_predict_encodes_a_table_as_the_release_did(fitted):
    rel, idata = fitted
    new = table(np.random.default_rng(2), 40, response=False)
    by_table = bayesdp.predict(idata, new, encoding=rel, seed=3)
    by_design = bayesdp.predict(idata, rel.table.design(new), seed=3)
    np.testing.assert_array_equal(by_table.predictions["y"].values,
                                  by_design.predictions["y"].values)
    summary = bayesdp.prediction_summary(by_table)
    np.testing.assert_allclose(summary["mean"], mean_of(new.x.to_numpy(), new.g.to_numpy()),
                               atol=0.1)
    # the row labels are the table's
    assert list(summary.index) == list(new.index)
    # a value outside its declared range is clamped, with a warning naming the column
    far = new.assign(x=new.x.where(new.index > 0, 25.0))
    with pytest.warns(UserWarning, match=r"outside their declared ranges .*: x \(1\)"):
        clamped = bayesdp.predict(idata, far, encoding=rel, seed=3)
    at_edge = bayesdp.predict(idata, far.assign(x=far.x.clip(0, 10)), encoding=rel, seed=3)
    np.testing.assert_array_equal(clamped.predictions["y"].values,
                                  at_edge.predictions["y"].values)
    # an undeclared level is refused, naming it
    with pytest.raises(BayesdpInputError, match=r"column 'g' has level\(s\) that are not "
                                                r"declared: 'd'"):
        bayesdp.predict(idata, new.assign(g="d"), encoding=rel)
    # the encoding of another formula does not fit this posterior
    other = bayesdp.release(table(np.random.default_rng(3), 50), formula="y ~ x",
                            bounds=BOUNDS, epsilon=1.0, delta=1e-5, seed=1)
    with pytest.raises(BayesdpInputError, match=r"encoding: the formula 'y ~ x' gives the "
                                                r"features \['intercept', 'x'\]"):
        bayesdp.predict(idata, new, encoding=other)
    # ... nor does it with the design given as an array
    with pytest.raises(BayesdpInputError, match=r"encoding: the formula 'y ~ x'"):
        bayesdp.predict(idata, rel.table.design(new).to_numpy(), encoding=other)
    # fit records the encoding: a table needs no encoding= (the same predictions)
    assert diagnostics.attrs(idata)["table_encoding"] == rel.table.to_json()
    np.testing.assert_array_equal(bayesdp.predict(idata, new, seed=3).predictions["y"].values,
                                  by_table.predictions["y"].values)
    # a posterior without the encoding: a table is not the design, the error lists the features
    bare = idata.copy()
    del bare.posterior.attrs["table_encoding"]
    with pytest.raises(BayesdpInputError, match=r"its columns must be the features"):
        bayesdp.predict(bare, new)


def test_a_posterior_that_records_the_encoding_encodes_tables_itself(fitted, tmp_path):
    """The attrs ``table_encoding`` (which fit and BayesDPRegressor set) survive a netCDF round
    trip and encode tables without ``encoding=``."""
    rel, idata = fitted
    assert "table_encoding" in idata.posterior.attrs  # fit recorded it
    back = diagnostics.load(diagnostics.save(idata, tmp_path / "post.nc"))
    new = table(np.random.default_rng(4), 10, response=False)
    a = bayesdp.predict(back, new, seed=5)
    b = bayesdp.predict(idata, new, encoding=rel.table, seed=5)
    np.testing.assert_allclose(a.predictions["y"].values, b.predictions["y"].values)


def test_estimator_fits_and_predicts_tables():
    rng = np.random.default_rng(5)
    train, test = table(rng, 20_000), table(rng, 500)
    est = bayesdp.BayesDPRegressor(epsilon=50.0, formula=FORMULA, bounds=BOUNDS, seed=2)
    assert est.fit(train) is est
    assert est.intercept_ == pytest.approx(1.0, abs=0.05)
    np.testing.assert_allclose(est.coef_, [0.3, 0.5, -0.4], atol=0.05)
    assert sorted(est.feature_names_in_) == ["g", "x", "y"] and est.n_features_in_ == 3
    pred = est.predict(test.drop(columns="y"))
    np.testing.assert_allclose(pred, mean_of(test.x.to_numpy(), test.g.to_numpy()), atol=0.1)
    mean, sd = est.predict(test, return_std=True)
    np.testing.assert_array_equal(mean, pred)
    assert np.all(sd > 0.2)
    assert est.score(test) > 0.8  # y from the formula's response
    assert est.score(test, test.y) == est.score(test)
    # its posterior records the encoding: bayesdp.predict takes tables too
    p = bayesdp.predict(est.idata_, test.drop(columns="y"), seed=1)
    np.testing.assert_allclose(bayesdp.prediction_summary(p)["mean"], pred, rtol=1e-10)
    with pytest.raises(BayesdpInputError, match="y: with a formula"):
        est.fit(train, train.y)
    with pytest.raises(BayesdpInputError, match=r"names column\(s\) the table does not have: "
                                                r"'g' in the term"):
        est.predict(test.drop(columns="g"))
    clone = pytest.importorskip("sklearn.base").clone
    assert clone(est).get_params()["formula"] == FORMULA
