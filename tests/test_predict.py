"""Prediction (issue 12 item 7): bayesdp.predict, prediction_summary, BayesDPRegressor and
``bayesdp predict``, checked against the moments of the posterior draws and closed forms."""

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesdp
from bayesdp.cli import main
from bayesdp.errors import BayesdpInputError

N_CHAINS, N_DRAWS = 4, 5000  # 20000 posterior draws: MC tolerances below are stated per test
N = N_CHAINS * N_DRAWS


@pytest.fixture(scope="module")
def sim():
    return bayesdp.simulate(9000, 3, seed=11)


@pytest.fixture(scope="module")
def nonprivate(sim):
    """A posterior with draws of theta and sigma_y2 (the non-private conjugate one: cheap, and
    exercises the same code path as the MCMC methods)."""
    return bayesdp.fit_nonprivate(sim.X[:2000], sim.y[:2000], bounds=sim.bounds, seed=3,
                                  num_samples=N_DRAWS, num_chains=N_CHAINS)


@pytest.fixture(scope="module")
def fast(sim):
    rel = bayesdp.release(pd.DataFrame(sim.X[:5000], columns=["age", "bmi", "dose"]),
                          sim.y[:5000], epsilon=1, delta=1e-5, bounds=sim.bounds, nodes=2, seed=4)
    return rel, bayesdp.fit(rel, method="fast", seed=5, num_samples=N_DRAWS, num_chains=N_CHAINS)


def _new_rows(sim):
    """Rows near the data and far from it (x 40), where the uncertainty of theta matters as much
    as the noise sigma_y^2."""
    return np.vstack([sim.X[-3:], 40 * sim.X[-6:-3]])


def _draws(idata, name):
    x = np.asarray(idata[name].transpose("chain", "draw", ...).values, dtype=float)
    return x.reshape(-1, *x.shape[2:])


def test_predictive_mean_and_variance_match_the_posterior_draws(sim, nonprivate):
    X = _new_rows(sim)
    pred = bayesdp.predict(nonprivate, X, seed=0)
    y = _draws(pred.predictions, "y")
    theta = _draws(nonprivate.posterior, "theta")
    s2 = _draws(nonprivate.posterior, "sigma_y2")
    mu = theta @ X.T
    assert y.shape == (N, 6)
    # mean: given the draws, mean(y) - X mean(theta) = mean_k sqrt(s2_k) e_k exactly, whose sd
    # is sqrt(mean(s2) / N); allow 4.5 sd per row
    np.testing.assert_array_less(np.abs(y.mean(0) - X @ theta.mean(0)),
                                 4.5 * np.sqrt(s2.mean() / N))
    # variance: var(y) ~ X Cov(theta) X^T + E[sigma_y2]; the sample variance's MC sd is about
    # sqrt((2 E[s2^2] + 4 var(x theta) E[s2]) / N); allow 5 of those
    want = mu.var(0) + s2.mean()
    mc_sd = np.sqrt((2 * np.mean(s2 ** 2) + 4 * mu.var(0) * s2.mean()) / N)
    np.testing.assert_array_less(np.abs(y.var(0) - want), 5 * mc_sd)
    assert np.all(np.abs(y.var(0) - mu.var(0)) > 10 * mc_sd)  # the noise term is really there
    assert np.all(mu.var(0)[3:] > 0.3 * s2.mean())  # far rows: theta's uncertainty matters
    # the summary: Rao-Blackwellised mean and sd, equal-tailed interval of the draws
    table = bayesdp.prediction_summary(pred)
    np.testing.assert_allclose(table["mean"], X @ theta.mean(0), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(table["sd"], np.sqrt(mu.var(0, ddof=1) + s2.mean()), rtol=1e-12)
    assert list(table.columns) == ["mean", "sd", "eti_5%", "eti_95%"]
    assert table.attrs["prob"] == 0.9 and table.attrs["interval"] == "eti"
    # nearly Gaussian predictive: the 90% interval is mean -/+ 1.645 sd up to MC error (4%)
    z = stats.norm.ppf(0.95)
    for lo, hi in (("eti_5%", "eti_95%"),):
        np.testing.assert_allclose(table[hi] - table[lo], 2 * z * table["sd"], rtol=0.04)
        np.testing.assert_allclose((table[hi] + table[lo]) / 2, table["mean"],
                                   atol=0.04 * z * table["sd"].max())
    hdi = bayesdp.prediction_summary(pred, interval="hdi")
    assert list(hdi.columns) == ["mean", "sd", "hdi_5%", "hdi_95%"]
    np.testing.assert_allclose(hdi["hdi_95%"] - hdi["hdi_5%"], 2 * z * hdi["sd"], rtol=0.04)
    narrow = bayesdp.prediction_summary(pred, prob=0.5)
    assert np.all(narrow["eti_75%"] - narrow["eti_25%"] < table["eti_95%"] - table["eti_5%"])


def test_prediction_intervals_cover_new_rows(sim, nonprivate):
    """The 90% intervals of 1500 fresh rows of the same data-generating process cover about 90%
    of their y (binomial sd 0.0077; allow 0.035)."""
    X, y = sim.X[-1500:], sim.y[-1500:]
    table = bayesdp.prediction_summary(bayesdp.predict(nonprivate, X, seed=1))
    cover = np.mean((table["eti_5%"] <= y) & (y <= table["eti_95%"]))
    assert abs(cover - 0.9) < 0.035, cover


def test_fast_predictive_is_the_exact_gaussian(fast):
    rel, idata = fast
    X = np.array([[1.0, 0.5, -2.0], [30.0, -10.0, 5.0]])
    pred = bayesdp.predict(idata, X, seed=2)
    mean, cov = bayesdp.inference.closed_form_moments(idata)
    s2 = bayesdp.inference.closed_form.plugin_sigma_y2(rel)  # (B_y / 3)^2: fast fixes sigma_y2
    var = np.diag(X @ cov @ X.T) + s2
    table = bayesdp.prediction_summary(pred, prob=0.8)
    np.testing.assert_allclose(table["mean"], X @ mean, rtol=1e-10)
    np.testing.assert_allclose(table["sd"], np.sqrt(var), rtol=1e-10)
    np.testing.assert_allclose(table["eti_90%"], X @ mean + stats.norm.ppf(0.9) * np.sqrt(var),
                               rtol=1e-10)
    streamed = bayesdp.prediction_summary(idata, X, prob=0.8)  # straight from the posterior
    np.testing.assert_allclose(streamed.to_numpy(), table.to_numpy(), rtol=1e-10)
    assert "fixed at" in pred.predictions.attrs["sigma_y2_source"]
    # the draws: exactly Gaussian, so mean within 4.5 sqrt(V/N), variance within 5 sqrt(2/N)
    y = _draws(pred.predictions, "y")
    np.testing.assert_array_less(np.abs(y.mean(0) - X @ mean), 4.5 * np.sqrt(var / N))
    np.testing.assert_allclose(y.var(0, ddof=1), var, rtol=5 * np.sqrt(2 / N))


def test_predictions_are_arviz_groups_on_a_copy(tmp_path, nonprivate, sim):
    X = _new_rows(sim)
    pred = bayesdp.predict(nonprivate, X, seed=7, prob=0.8)
    assert "predictions" not in nonprivate.groups()  # the input is not changed
    assert {"posterior", "predictions", "predictions_constant_data"} <= set(pred.groups())
    assert pred.predictions["y"].dims == ("chain", "draw", "row")
    assert pred.predictions_constant_data["X"].dims == ("row", "feature")
    np.testing.assert_array_equal(pred.predictions_constant_data["X"].values, X)
    assert pred.predictions.attrs["predict_seed"] == 7
    assert bayesdp.prediction_summary(pred).attrs["prob"] == 0.8
    again = bayesdp.predict(nonprivate, X, seed=7)
    np.testing.assert_array_equal(again.predictions["y"].values, pred.predictions["y"].values)
    other = bayesdp.predict(nonprivate, X, seed=8)
    assert not np.allclose(other.predictions["y"].values, pred.predictions["y"].values)
    # predicting again from a predicted InferenceData replaces the predictions
    twice = bayesdp.predict(pred, X[:2], seed=1)
    assert twice.predictions["y"].shape == (N_CHAINS, N_DRAWS, 2)
    # netCDF round trip, and a file path as input
    path = bayesdp.diagnostics.save(pred, tmp_path / "pred.nc")
    pd.testing.assert_frame_equal(bayesdp.prediction_summary(bayesdp.diagnostics.load(path)),
                                  bayesdp.prediction_summary(pred))
    post = bayesdp.diagnostics.save(nonprivate, tmp_path / "post.nc")
    from_file = bayesdp.predict(str(post), X, seed=7)
    np.testing.assert_array_equal(from_file.predictions["y"].values,
                                  pred.predictions["y"].values)


def test_feature_names_from_a_dataframe_are_coordinates(fast, sim):
    _, idata = fast
    assert list(idata.posterior["theta"].coords["feature"].values) == ["age", "bmi", "dose"]
    X = sim.X[:4]
    frame = pd.DataFrame(X, columns=["age", "bmi", "dose"], index=["p1", "p2", "p3", "p4"])
    shuffled = frame[["dose", "age", "bmi"]]  # matched by name, not position
    by_name = bayesdp.predict(idata, shuffled, seed=0)
    by_position = bayesdp.predict(idata, X, seed=0)
    np.testing.assert_allclose(by_name.predictions["y"].values,
                               by_position.predictions["y"].values, rtol=1e-12, atol=1e-12)
    assert list(by_name.predictions["y"].coords["row"].values) == ["p1", "p2", "p3", "p4"]
    assert list(by_name.predictions_constant_data["X"].coords["feature"].values) == \
        ["age", "bmi", "dose"]
    assert list(bayesdp.prediction_summary(by_name).index) == ["p1", "p2", "p3", "p4"]
    assert list(bayesdp.prediction_summary(by_position).index) == [0, 1, 2, 3]


def test_hdi_is_arviz_hdi():
    import arviz as az

    rng = np.random.default_rng(0)
    draws = rng.standard_normal((3, 700, 4)) * rng.gamma(2, size=(3, 700, 1)) \
        + rng.exponential(size=(3, 700, 4))
    for prob in (0.5, 0.9, 0.95):
        np.testing.assert_array_equal(bayesdp.diagnostics.hdi(draws, prob),
                                      az.hdi(draws, hdi_prob=prob))


@pytest.mark.parametrize("X_new, words", [
    (np.ones((2, 2)), "has 2 columns, but the posterior has 3 features"),
    (np.ones((2, 4)), "has 4 columns"),
    (np.ones(3), "reshape(1, -1)"),
    (np.ones((0, 3)), "no rows"),
    (np.array([[1.0, 2.0, 3.0], [1.0, np.nan, 3.0]]), "row 1, feature 'bmi'"),
    (np.array([[np.inf, 2.0, 3.0]]), "NaN or infinite"),
    (np.array([["a", "b", "c"]]), "numeric"),
    (pd.DataFrame(np.ones((2, 3)), columns=["age", "bmi", "weight"]), "missing ['dose']"),
    (pd.DataFrame(np.ones((2, 4)), columns=["age", "bmi", "dose", "y"]), "not features ['y']"),
])
def test_bad_new_rows_give_a_clear_error(fast, X_new, words):
    _, idata = fast
    with pytest.raises(BayesdpInputError) as e:
        bayesdp.predict(idata, X_new, seed=0)
    assert words in str(e.value)


def test_bad_arguments(fast, nonprivate):
    _, idata = fast
    for p in (0, 1, 1.5, "0.9", True):
        with pytest.raises(BayesdpInputError, match="prob must be"):
            bayesdp.predict(idata, np.ones((1, 3)), prob=p)
    with pytest.raises(BayesdpInputError, match="interval must be one of"):
        bayesdp.prediction_summary(idata, np.ones((1, 3)), interval="central")
    with pytest.raises(BayesdpInputError, match="seed"):
        bayesdp.predict(idata, np.ones((1, 3)), seed=-1)
    with pytest.raises(BayesdpInputError, match="call bayesdp.predict"):
        bayesdp.prediction_summary(idata)
    no_noise = nonprivate.copy()
    del no_noise.posterior["sigma_y2"]
    with pytest.raises(BayesdpInputError, match="sigma_y2"):
        bayesdp.predict(no_noise, np.ones((1, 3)))
    with pytest.raises(BayesdpInputError, match="theta"):
        bayesdp.predict(object(), np.ones((1, 3)))


# -- BayesDPRegressor --------------------------------------------------------------------------


@pytest.mark.slow
def test_regressor_recovers_theta_on_a_large_data_set_at_big_epsilon():
    """n = 100000 rows, x ~ N(0, I) (a well-conditioned design; the paper's simulation draws
    Sigma_x with eigenvalues down to 1e-3, where theta is hard to estimate at any epsilon),
    epsilon = 10, the default method (eiv). The posterior sd of theta is about 0.003, so
    0.02 is > 6 sd."""
    rng = np.random.default_rng(0)
    n, theta = 100_000, np.array([1.0, -0.5, 2.0])
    X = pd.DataFrame(rng.standard_normal((n, 3)), columns=["age", "bmi", "dose"])
    y = X.to_numpy() @ theta + rng.standard_normal(n)
    bounds = (float(np.sqrt(stats.chi2.isf(1e-3 / n, 3))),
              float(np.sqrt(theta @ theta + 1) * stats.norm.isf(0.5e-3 / n)))
    est = bayesdp.BayesDPRegressor(epsilon=10, bounds=bounds, nodes=2, seed=0, num_samples=500,
                                   num_warmup=300)
    assert est.fit(X, y) is est
    np.testing.assert_allclose(est.coef_, theta, atol=0.02)
    assert est.intercept_ == 0.0 and est.n_features_in_ == 3
    assert list(est.feature_names_in_) == ["age", "bmi", "dose"]
    assert list(est.idata_.posterior["theta"].coords["feature"].values) == ["age", "bmi", "dose"]
    assert est.release_.J == 2 and est.release_.epsilon == 10 and est.release_.n_total == n
    assert est.idata_.posterior.attrs["method"] == "eiv"
    new = X.iloc[:5]
    mean, sd = est.predict(new, return_std=True)
    np.testing.assert_allclose(mean, new.to_numpy() @ est.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.predict(new[["dose", "bmi", "age"]]), mean, rtol=1e-14)
    # sd^2 = var(x^T theta) + E[sigma_y^2] over the draws. Not ~1 (the true sigma_y): the six
    # numbers of z_hat (noise sd ~50) barely measure sigma_y^2
    th = est.idata_.posterior["theta"].values.reshape(-1, 3)
    s2 = est.idata_.posterior["sigma_y2"].values
    expected = np.sqrt((th @ new.to_numpy().T).var(axis=0, ddof=1) + s2.mean())
    np.testing.assert_allclose(sd, expected, rtol=1e-10)
    assert not np.allclose(sd, np.sqrt(s2.mean()), rtol=1e-12)  # theta's part is counted
    r2_true = 1 - 1 / np.var(y)
    assert abs(est.score(X, y) - r2_true) < 0.01


def test_regressor_parameters_follow_scikit_learn():
    est = bayesdp.BayesDPRegressor(epsilon=2.0, bounds=(3.0, 4.0))
    params = est.get_params()
    assert sorted(params) == sorted(["epsilon", "delta", "bounds", "method", "nodes", "seed",
                                     "calibration", "include_yty", "priors", "num_samples",
                                     "num_chains", "num_warmup", "method_options", "formula",
                                     "random_state"])
    assert params["epsilon"] == 2.0 and params["method"] == "eiv" and params["seed"] is None
    assert est.set_params(method="fast", nodes=3) is est
    assert (est.method, est.nodes) == ("fast", 3)
    clone = bayesdp.BayesDPRegressor(**est.get_params())
    assert clone.get_params() == est.get_params()
    shown = re.fullmatch(r"BayesDPRegressor\((.*)\)", repr(est)).group(1)  # changed ones only
    assert sorted(re.findall(r"\w+=(?:\([^)]*\)|'[^']*'|[^,]+)", shown)) == [
        "bounds=(3.0, 4.0)", "epsilon=2.0", "method='fast'", "nodes=3"]
    with pytest.raises(BayesdpInputError, match="'epsilonn' is not a parameter"):
        est.set_params(epsilonn=1)
    with pytest.raises(BayesdpInputError, match="not fitted"):
        est.predict(np.ones((1, 2)))
    assert not hasattr(est, "coef_")
    with pytest.raises(BayesdpInputError, match="bounds"):
        bayesdp.BayesDPRegressor(method="fast").fit(np.ones((5, 2)), np.ones(5))


def test_regressor_fast_and_bad_input(sim):
    X, y = sim.X[:3000], sim.y[:3000]
    est = bayesdp.BayesDPRegressor(epsilon=1, bounds=sim.bounds, method="fast", seed=3,
                                   num_samples=10).fit(X, y)
    rel = est.release_
    mean, cov = bayesdp.inference.closed_form_moments(est.idata_)
    np.testing.assert_array_equal(est.coef_, mean)  # exact closed-form mean, not of 40 draws
    assert not hasattr(est, "feature_names_in_")
    # same seed: same release and fit
    again = bayesdp.BayesDPRegressor(**est.get_params()).fit(X, y)
    np.testing.assert_array_equal(again.release_.S_hat, rel.S_hat)
    _, sd = est.predict(X[:2], return_std=True)
    s2 = bayesdp.inference.closed_form.plugin_sigma_y2(rel)
    np.testing.assert_allclose(sd, np.sqrt(np.diag(X[:2] @ cov @ X[:2].T) + s2), rtol=1e-10)
    # fitted on an array: a DataFrame's columns are taken by position (scikit-learn warns)
    with pytest.warns(UserWarning, match="fitted without feature names"):
        by_position = est.predict(pd.DataFrame(X[:2], columns=list("abc")))
    np.testing.assert_allclose(by_position, est.predict(X[:2]), rtol=1e-12)
    with pytest.raises(BayesdpInputError, match="X has 2 features, but BayesDPRegressor is "
                                                "expecting 3"):
        est.predict(X[:2, :2])
    with pytest.raises(BayesdpInputError, match="NaN"):
        est.predict(np.where(np.eye(3, dtype=bool), np.nan, 1.0))
    with pytest.raises(BayesdpInputError, match="NaN"):
        est.fit(np.where(np.eye(3, dtype=bool), np.nan, 1.0), np.ones(3))
    with pytest.raises(BayesdpInputError, match="one value per row"):
        est.score(X[:3], y[:2])


# -- bayesdp predict -----------------------------------------------------------------------------


def _one_line(err, *words):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_cli_fit_then_predict(tmp_path, capsys, sim):
    rel = bayesdp.release(sim.X[:3000], sim.y[:3000], epsilon=1, delta=1e-5, bounds=sim.bounds,
                          nodes=2, seed=1)
    rel_path = rel.save(tmp_path / "r.json")
    post = tmp_path / "post.nc"
    assert main(["fit", str(rel_path), "--method", "fast", "--seed", "0", "--out", str(post)]) == 0
    frame = pd.DataFrame(sim.X[-5:], columns=["x0", "x1", "x2"])
    frame["y"] = sim.y[-5:]
    rows = tmp_path / "new.csv"
    frame[["y", "x2", "x0", "x1"]].to_csv(rows, index=False)  # any order; y is ignored
    out = tmp_path / "pred.csv"
    capsys.readouterr()
    assert main(["predict", str(post), str(rows), "--seed", "1", "--prob", "0.8",
                 "--out", str(out)]) == 0
    cap = capsys.readouterr()
    assert "ignoring column(s) that are not features: y" in cap.err
    assert "eti_10%, eti_90% of y" in cap.out and "fixed at" in cap.out
    got = pd.read_csv(out)
    want = bayesdp.prediction_summary(
        bayesdp.predict(bayesdp.diagnostics.load(post), sim.X[-5:], seed=1), prob=0.8)
    assert list(got.columns) == ["mean", "sd", "eti_10%", "eti_90%"] and len(got) == 5
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=1e-9)
    # without a header: the features in the posterior's order; without --out: CSV on stdout
    bare = tmp_path / "bare.csv"
    pd.DataFrame(sim.X[-5:]).to_csv(bare, index=False, header=False)
    assert main(["predict", str(post), str(bare), "--no-header", "--seed", "1",
                 "--prob", "0.8"]) == 0
    printed = capsys.readouterr().out
    assert printed.splitlines()[0] == "mean,sd,eti_10%,eti_90%"
    np.testing.assert_allclose(pd.read_csv(__import__("io").StringIO(printed)).to_numpy(),
                               want.to_numpy(), rtol=1e-9)
    # errors: one line, exit 2, nothing written
    bad = tmp_path / "bad.csv"
    cases = [
        (["predict", str(post), str(bare)], "--no-header"),
        (["predict", str(post), str(rows), "--no-header"], "4 columns"),
    ]
    bad.write_text("x0,x2\n1,2\n")
    cases.append((["predict", str(post), str(bad)], "['x1'] missing"))
    for argv, words in cases:
        assert main(argv + ["--out", str(tmp_path / "no.csv")]) == 2
        _one_line(capsys.readouterr().err, words)
    bad.write_text("x0,x1,x2\n1,2,3\n1,,3\n")
    assert main(["predict", str(post), str(bad), "--out", str(tmp_path / "no.csv")]) == 2
    _one_line(capsys.readouterr().err, "bad.csv", "row 1, feature 'x1'")
    assert main(["predict", str(rel_path), str(rows)]) == 2
    _one_line(capsys.readouterr().err, "this is a release, not a posterior", "bayesdp fit")
    assert not (tmp_path / "no.csv").exists()


def test_readme_and_docs_prediction_example_runs(tmp_path, monkeypatch):
    """Every Python example of docs/prediction.md runs as written, in order, as a reader would
    run them (later examples use names of earlier ones)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "docs" / "prediction.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2  # the first example and the y^T y one
    monkeypatch.chdir(tmp_path)
    namespace = {}
    for code in blocks:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", bayesdp.ConvergenceWarning)
            exec(compile(code, "docs/prediction.md", "exec"), namespace)


def test_include_yty_calibrates_the_predictive_sd():
    """BayesDPRegressor(include_yty=True) releases y^T y and the default method estimates
    sigma_y^2 from it: the predictive sd of new rows is within 10% of the residual sd the rows
    have (1 in bayesdp.simulate's model) and bayesdp.predict does not warn; without y^T y,
    predict warns that sigma_y is poorly determined and says how to release y^T y (the
    release's sigma_y^2 posterior then spans its prior: measured 0.008-5.2 at these settings)."""
    sim = bayesdp.simulate(n=100_000, d=3, seed=1)
    X, y, X_new = sim.X[:80_000], sim.y[:80_000], sim.X[80_000:80_200]
    with_yty = bayesdp.BayesDPRegressor(epsilon=1.0, bounds=sim.bounds, nodes=4,
                                        include_yty=True, seed=0).fit(X, y)
    assert with_yty.release_.yty_hat is not None
    assert with_yty.idata_.posterior.attrs["eiv_uses_yty"]
    _, sd = with_yty.predict(X_new, return_std=True)
    resid = np.std(y - X @ np.linalg.lstsq(X, y, rcond=None)[0])
    assert np.all(np.abs(sd / resid - 1) < 0.1), sd
    with warnings.catch_warnings():
        warnings.simplefilter("error", bayesdp.CalibrationWarning)
        bayesdp.predict(with_yty.idata_, X_new, seed=0)
    without = bayesdp.BayesDPRegressor(epsilon=1.0, bounds=sim.bounds, nodes=4,
                                       include_yty=False, seed=0).fit(X, y)
    with pytest.warns(bayesdp.CalibrationWarning, match="include_yty=True"):
        bayesdp.predict(without.idata_, X_new, seed=0)


def test_summary_from_the_posterior_streams_and_matches_the_draws(sim, nonprivate):
    """prediction_summary(idata, X_new), no draws of y: mean and sd equal those of predict's
    draws (both exact given the posterior draws, 1e-10); the equal-tailed interval is within
    0.1 sd of the quantiles of the predictive mixture over all 20,000 posterior draws (solved
    here by bisection to 1e-12; the 64 clusters cost at most 0.04 sd where theta's
    uncertainty dominates, docs/prediction.md) and within 0.12 sd of the quantiles of
    predict's draws of y (their own Monte Carlo error is about 0.03 sd). Negative control: the
    80% interval's ends are not within 0.1 sd of the 90% interval's."""
    from scipy.special import ndtr

    P = __import__("sys").modules["bayesdp.predict"]  # the module (bayesdp.predict: the function)
    X = _new_rows(sim)
    streamed = bayesdp.prediction_summary(nonprivate, X)
    drawn = bayesdp.prediction_summary(bayesdp.predict(nonprivate, X, seed=3))
    np.testing.assert_allclose(streamed[["mean", "sd"]], drawn[["mean", "sd"]], rtol=1e-10)
    diff = (streamed[["eti_5%", "eti_95%"]] - drawn[["eti_5%", "eti_95%"]]).abs()
    assert (diff.max(axis=1) < 0.12 * streamed["sd"]).all(), diff
    theta = bayesdp.diagnostics.posterior_array(nonprivate, "theta")
    mu = theta @ X.T
    s = np.sqrt(nonprivate.posterior["sigma_y2"].values.ravel())[:, None]
    eighty = bayesdp.prediction_summary(nonprivate, X, prob=0.8)
    for p, col in ((0.05, "eti_5%"), (0.95, "eti_95%")):
        lo, hi = mu.min(0) - 10 * s.max(), mu.max(0) + 10 * s.max()
        for _ in range(80):
            mid = (lo + hi) / 2
            below = ndtr((mid - mu) / s).mean(0) < p
            lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
        exact = (lo + hi) / 2
        np.testing.assert_array_less(np.abs(streamed[col] - exact), 0.1 * streamed["sd"])
        wrong = eighty["eti_10%" if p < 0.5 else "eti_90%"]
        assert (np.abs(wrong - exact) > 0.1 * streamed["sd"]).all()
    # blocks of rows give the same numbers as one block
    P_block = P.BLOCK_NUMBERS
    try:
        P.BLOCK_NUMBERS = 2 * P.MIXTURE_CLUSTERS * X.shape[1]  # two rows per block
        small = bayesdp.prediction_summary(nonprivate, X)
    finally:
        P.BLOCK_NUMBERS = P_block
    np.testing.assert_allclose(small.to_numpy(), streamed.to_numpy(), rtol=1e-12)


def test_the_mixture_quantile_steps_solve_the_mixture():
    """Two Halley steps from the Cornish-Fisher start solve F(q) = p to within 0.005 sd on a
    strongly skewed, heavy mixture with unequal weights and widths (a fifth of it
    exponential; measured 0.0026), against bisection to 1e-12. Negative control: the
    Cornish-Fisher start alone misses by more than 0.01 sd."""
    from scipy.special import ndtr

    P = __import__("sys").modules["bayesdp.predict"]
    rng = np.random.default_rng(0)
    mu = np.concatenate([rng.standard_normal((200, 50)),
                         4 + 3 * rng.standard_exponential((56, 50))])
    s = (0.5 + rng.random(256))[:, None] * (1 + rng.random(50))
    w = rng.random(256)
    w /= w.sum()
    probs = (0.05, 0.95)
    start, c, sd = P._cornish_fisher(mu, s * s, w, probs)
    exact = []
    for p in probs:
        a, b = mu.min(0) - 10 * s.max(), mu.max(0) + 10 * s.max()
        for _ in range(80):
            mid = (a + b) / 2
            below = (w[:, None] * ndtr((mid - mu) / s)).sum(0) < p
            a, b = np.where(below, mid, a), np.where(below, b, mid)
        exact.append((a + b) / 2)

    def worst(steps):
        old = P._HALLEY_STEPS
        try:
            P._HALLEY_STEPS = steps
            got = P._mixture_quantiles(mu, s, w, probs, start, sd)
        finally:
            P._HALLEY_STEPS = old
        return max(np.abs(got[k] - exact[k]).max() / sd.min() for k in range(2))

    assert worst(P._HALLEY_STEPS) < 0.005
    assert worst(0) > 0.01


def test_draw_clusters_keep_the_mean_and_variance():
    """The clusters' Gaussian mixture has, at any row x, exactly the mean and variance of the
    mixture over all the draws (law of total variance, ddof 0), to 1e-10."""
    P = __import__("sys").modules["bayesdp.predict"]
    rng = np.random.default_rng(1)
    theta = np.concatenate([rng.standard_normal((3000, 3)), 3 + rng.standard_normal((1000, 3))])
    s2 = np.exp(rng.standard_normal(4000) * 0.3)
    w, c, C, s2c = P.draw_clusters(theta, s2)
    assert len(w) <= P.MIXTURE_CLUSTERS and w.sum() == pytest.approx(1.0)
    X = rng.standard_normal((20, 3)) * 3
    mean = (w[:, None] * (c @ X.T)).sum(0)
    second = (w[:, None] * ((c @ X.T) ** 2 + np.einsum("id,jde,ie->ji", X, C, X)
                            + s2c[:, None])).sum(0)
    mu = theta @ X.T
    np.testing.assert_allclose(mean, mu.mean(0), rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(second - mean ** 2, mu.var(0) + s2.mean(), rtol=1e-10)


def test_cli_predict_refuses_a_header_without_rows(tmp_path, capsys, fast):
    rel, idata = fast
    post = tmp_path / "post.nc"
    bayesdp.diagnostics.save(idata, post)
    empty = tmp_path / "empty.csv"
    empty.write_text("x0,x1,x2\n")
    out = tmp_path / "p.csv"
    assert main(["predict", str(post), str(empty), "--out", str(out)]) == 2
    assert "the file has a header and no rows" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.slow
def test_cli_predict_memory_is_independent_of_the_rows(tmp_path, sim):
    """bayesdp predict in a subprocess: peak RSS at 200,000 and 2,000,000 rows of d = 3 under
    1.5 GB and within 150 MB of each other (the rows are read, summarised and written in
    chunks); the output has one line per row."""
    import subprocess
    import sys

    rel = bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-5, bounds=sim.bounds, nodes=2,
                          seed=1)
    post = tmp_path / "post.nc"
    bayesdp.diagnostics.save(bayesdp.fit(rel, seed=0), post)
    rss = {}
    for m in (200_000, 2_000_000):
        rows = tmp_path / f"rows{m}.csv"
        X = np.random.default_rng(m).standard_normal((m, 3))
        pd.DataFrame(X, columns=["x0", "x1", "x2"]).to_csv(rows, index=False,
                                                            float_format="%.6g")
        # the peak of this process's own memory map (VmHWM; ru_maxrss would carry the forking
        # test worker's peak across exec)
        code = ("import sys; from bayesdp.cli import main; "
                f"s = main(['predict', {str(post)!r}, {str(rows)!r}, '--out', "
                f"{str(tmp_path / 'p.csv')!r}]); "
                "print([l for l in open('/proc/self/status') if l.startswith('VmHWM')][0]"
                ".split()[1]); sys.exit(s)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True)
        rss[m] = int(done.stdout.strip().splitlines()[-1]) * 1024
        with open(tmp_path / "p.csv") as fh:
            assert sum(1 for _ in fh) == m + 1
    assert max(rss.values()) < 1.5e9, rss
    assert abs(rss[2_000_000] - rss[200_000]) < 150e6, rss
