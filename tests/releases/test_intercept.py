"""Releases with an intercept (appendix B.2): the statistics of [1, x], the sensitivity of the
augmented row, the file format, the uncentred-columns warning and the methods that take them."""

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import bayesdp
import bayesdp.paper  # noqa: F401  (registers the paper's methods)
from bayesdp.errors import BayesdpInputError, CombineError, ReleaseFormatError
from dp_helpers import coupled_changes, removals_and_adds, rows_in_ball, stats_vector, vech

EPS, DELTA = 1.0, 1e-5
BOUNDS = (2.0, 3.0)


def delta_intercept(bx, by):
    """sqrt(1 + B_x^2 + B_x^4 + (1 + B_x^2) B_y^2), docs/privacy.md section 3b."""
    return math.sqrt(1 + bx**2 + bx**4 + (1 + bx**2) * by**2)


def augmented(X):
    return np.column_stack([np.ones(len(X)), X])


def _whole(r):
    return np.concatenate([np.concatenate([vech(S), z]) for S, z in zip(r.S_hat, r.z_hat)])


def test_release_holds_n_sums_and_cross_products():
    """S_hat = [[n, sum x^T], [sum x, X^T X]] + noise and z_hat = [sum y, X^T y] + noise: the
    same seed gives the same noise, so the difference with an all-zero data set of the same
    size is the difference of the noiseless statistics, whose [0, 0] entries are both n."""
    rng = np.random.default_rng(1)
    X, y = rows_in_ball(rng, 40, 3, *BOUNDS)
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=3, intercept=True, include_yty=False)
    r = bayesdp.release(X, y, **kw)
    r0 = bayesdp.release(np.zeros_like(X), np.zeros_like(y), **kw)
    W = augmented(X)
    S0 = np.zeros((4, 4))
    S0[0, 0] = 40
    np.testing.assert_allclose(r.S_hat[0] - r0.S_hat[0] + S0, W.T @ W, atol=1e-9)
    np.testing.assert_allclose(r.z_hat[0] - r0.z_hat[0], W.T @ y, atol=1e-9)
    assert r.intercept and r.d == 4 and r.n.tolist() == [40]
    assert r.feature_names == ("intercept", "x0", "x1", "x2")
    assert r.sensitivity == pytest.approx(delta_intercept(*BOUNDS), rel=1e-14)
    np.testing.assert_allclose(
        r.sigma_s, delta_intercept(*BOUNDS) * bayesdp.privacy.analytic_gaussian_sigma(EPS, DELTA),
        rtol=1e-12)
    assert r.dp_claim_valid and r.dp_claim_note == ""


def test_intercept_sensitivity_is_the_sup_over_rows():
    """The augmented row's change ||[vech(w w^T), w y]||, w = [1, x], never exceeds Delta_1, is
    attained at x = B_x e_1, y = B_y, and exceeds the plain Delta (so the ones cost something)."""
    rng = np.random.default_rng(2)
    bx, by = 1.3, 0.7
    D1 = delta_intercept(bx, by)
    worst = 0.0
    for _ in range(2000):
        d = int(rng.integers(1, 5))
        X, y = rows_in_ball(rng, 1, d, bx, by)
        worst = max(worst, np.linalg.norm(stats_vector(augmented(X), y)))
    assert worst <= D1 * (1 + 1e-12)
    e1 = np.array([[bx, 0.0, 0.0]])
    assert np.linalg.norm(stats_vector(augmented(e1), [by])) == pytest.approx(D1, rel=1e-14)
    assert D1 > bayesdp.privacy.sensitivity_sz(bx, by)
    # the Frobenius bound (1 + B_x^2)^2 on vech would be loose: vech keeps one copy of 2 x_i
    assert D1 < math.sqrt((1 + bx**2) ** 2 + (1 + bx**2) * by**2)
    assert bayesdp.privacy.sensitivity_release(bx, by, intercept=True) == pytest.approx(D1)
    with_yty = bayesdp.privacy.sensitivity_release(bx, by, intercept=True, with_yty=True)
    assert with_yty == pytest.approx(math.sqrt(D1**2 + by**4))


@pytest.mark.parametrize("n, J", [(50, 1), (61, 4)])
def test_add_or_remove_one_row_changes_whole_release_by_at_most_the_sensitivity(n, J):
    rng = np.random.default_rng(n)
    X, y = rows_in_ball(rng, n, 2, *BOUNDS)
    X[0] = [BOUNDS[0], 0.0]  # a row on the bound, so the check is not vacuous
    y[0] = BOUNDS[1]
    Xa, ya = rows_in_ball(rng, 3, 2, *BOUNDS)
    sens = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=J, seed=5,
                           intercept=True, include_yty=False).sensitivity
    neighbours = removals_and_adds(X, y, Xa, ya, [0, n // 2, n], J)
    change = coupled_changes(X, y, J, neighbours, BOUNDS, intercept=True)
    assert change.max() <= sens * (1 + 1e-9)
    assert change.max() == pytest.approx(sens, rel=1e-9)  # removing row 0
    # negative control: the sensitivity of the rows without the ones column is exceeded
    assert change.max() > bayesdp.privacy.sensitivity_sz(*BOUNDS) * 1.05


def test_rows_are_clipped_before_the_ones_are_added():
    X = np.array([[30.0, 40.0], [0.1, 0.2]])
    y = np.array([100.0, -0.5])
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=1, intercept=True)
    r = bayesdp.release(X, y, **kw)
    r0 = bayesdp.release(np.zeros_like(X), np.zeros_like(y), **kw)
    Xc = np.array([[1.2, 1.6], [0.1, 0.2]])  # (30, 40) scaled to norm B_x = 2
    yc = np.array([3.0, -0.5])
    np.testing.assert_allclose(r.z_hat[0] - r0.z_hat[0], augmented(Xc).T @ yc, atol=1e-9)
    assert r.n_clipped.tolist() == [1]


def test_file_round_trip_and_format(tmp_path):
    rng = np.random.default_rng(3)
    X, y = rows_in_ball(rng, 30, 2, *BOUNDS)
    r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=2, seed=1,
                        intercept=True, feature_names=["age", "dose"])
    p = r.save(tmp_path / "r.json")
    doc = json.loads(p.read_text())
    assert doc["intercept"] is True and doc["feature_names"] == ["intercept", "age", "dose"]
    back = bayesdp.load_release(p)
    assert back.intercept is True and back.feature_names == r.feature_names
    assert np.array_equal(back.S_hat, r.S_hat)
    # without an intercept the field is absent (files as before) and reads as False
    r2 = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=1)
    assert "intercept" not in r2.to_dict() and r2.intercept is False
    # refused: a non-boolean flag, or an intercept file whose first feature is not "intercept"
    for field, value, match in [("intercept", "yes", "intercept"),
                                ("feature_names", ["a", "age", "dose"], "intercept")]:
        bad = dict(doc, **{field: value})
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(ReleaseFormatError, match=match):
            bayesdp.load_release(tmp_path / "bad.json")


def test_combine_refuses_mixing_intercept_and_not():
    rng = np.random.default_rng(4)
    X, y = rows_in_ball(rng, 30, 2, *BOUNDS)
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=1)
    a = bayesdp.release(X, y, intercept=True, **kw)
    b = bayesdp.release(X[:20], y[:20], intercept=True, **kw)
    assert bayesdp.combine_releases(a, b).intercept is True
    with pytest.warns(UserWarning, match="far from centred"):  # a ones column by hand ...
        c = bayesdp.release(np.column_stack([np.ones(30), X]), y, feature_names=[
            "intercept", "x0", "x1"], **kw)  # ... is not an intercept release
    with pytest.raises(CombineError, match="intercept"):
        bayesdp.combine_releases(a, c)


def test_bad_intercept_arguments():
    rng = np.random.default_rng(5)
    X, y = rows_in_ball(rng, 10, 2, *BOUNDS)
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=1)
    with pytest.raises(BayesdpInputError, match="'intercept' is the name of the intercept"):
        bayesdp.release(X, y, intercept=True, feature_names=["intercept", "b"], **kw)
    with pytest.raises(BayesdpInputError, match="intercept must be True or False"):
        bayesdp.release(X, y, intercept="yes", **kw)


def test_uncentred_columns_warn_the_holder_without_an_intercept():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(500, 2))
    X[:, 1] += 5.0
    y = X @ [1.0, 0.5] + rng.normal(size=500)
    kw = dict(epsilon=EPS, delta=DELTA, bounds=(20.0, 20.0), seed=1)
    with pytest.warns(UserWarning, match=r"x1 \(mean 4\.9.*intercept=True"):
        bayesdp.release(X, y, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bayesdp.release(X, y, intercept=True, **kw)  # asked for the intercept: no warning
        bayesdp.release(X - X.mean(0), y - y.mean(), **kw)  # centred: no warning


def test_release_file_with_intercept_matches_in_memory(tmp_path):
    rng = np.random.default_rng(7)
    X = rng.integers(-3, 4, size=(50, 2)).astype(float)
    y = rng.integers(-9, 10, size=50).astype(float)
    path = tmp_path / "d.csv"
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "y": y}).to_csv(path, index=False)
    kw = dict(epsilon=EPS, delta=DELTA, bounds=(10.0, 20.0), nodes=3, seed=2, intercept=True)
    rf = bayesdp.releases.release_file(path, chunksize=7, **kw)
    rm = bayesdp.release(X, y, feature_names=["a", "b"], **kw)
    assert np.array_equal(rf.S_hat, rm.S_hat) and np.array_equal(rf.z_hat, rm.z_hat)
    assert rf.feature_names == ("intercept", "a", "b") and rf.intercept


# --------------------------------------------------------------------------------------------
# fitting releases with an intercept


def _uncentred(n, seed, intercept=1.5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 1)) + 4.0
    y = intercept + 0.7 * X[:, 0] + rng.normal(size=n)
    return X, y


def test_methods_that_fit_an_intercept_release_and_those_that_refuse():
    X, y = _uncentred(400, 1)
    r = bayesdp.release(X, y, epsilon=10.0, delta=DELTA, bounds=(8.0, 12.0), nodes=2, seed=2,
                        intercept=True)
    idata = bayesdp.fit(r, method="fast", seed=0)
    assert list(idata.posterior["theta"].coords["feature"].values) == ["intercept", "x0"]
    assert bayesdp.diagnostics.attrs(idata)["intercept"] == 1
    for method in ("normalx-paper", "bs"):
        with pytest.raises(BayesdpInputError, match="'normalx'.*'fixeds' or 'fast'"):
            bayesdp.fit(r, method=method, num_samples=5, num_warmup=5)


def _nuts_fit(num, chains, method="nuts-normalx"):
    X, y = _uncentred(120, 3)
    bounds = (8.0, 12.0)
    r = bayesdp.release(X, y, epsilon=30.0, delta=DELTA, bounds=bounds, nodes=2, seed=4,
                        intercept=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bayesdp.ConvergenceWarning)  # too few draws to pass
        idata = bayesdp.fit(r, method=method, seed=1, num_samples=num, num_warmup=num,
                            num_chains=chains, progress_bar=False)
    return X, y, bounds, r, idata


@pytest.mark.slow
@pytest.mark.parametrize("method", ["normalx", "nuts-normalx"])
def test_nuts_runs_the_intercept_model(method):
    """normalx (non-centred) and nuts-normalx (centred) on an intercept release run the
    appendix B.2 model: S[0, 0] = n_j in every draw, Sigma_x, mu, xbar and W are over the
    features only (named), and every latent is in the convergence check. (A short run; the
    accuracy check below is slow.)"""
    _, _, _, r, idata = _nuts_fit(30, 1, method)
    post = idata.posterior
    assert not {"L_x", "v", "W_diag", "W_offdiag", "theta_std"} & set(post.data_vars)
    assert set(post.data_vars) >= {"theta", "sigma_y2", "Sigma_x", "mu", "xbar", "W", "S"}
    assert post["Sigma_x"].shape[2:] == (1, 1)
    assert list(post["mu"].coords["x_feature"].values) == ["x0"]
    assert list(post["theta"].coords["feature"].values) == ["intercept", "x0"]
    np.testing.assert_allclose(post["S"].values[..., 0, 0], np.broadcast_to(
        r.n, post["S"].shape[:3]), rtol=1e-12)
    assert {"W", "xbar", "mu"} <= set(json.loads(bayesdp.diagnostics.attrs(idata)["convergence"]))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["normalx", "nuts-normalx"])
def test_nuts_intercept_posterior_covers_the_nonprivate_one(method):
    """2 x 60 rows, eps = 30, 2 chains of 300 draws (about 65 s each): the posterior of theta
    covers the non-private posterior mean within 4 sd, and mu the true feature mean 4."""
    X, y, bounds, r, idata = _nuts_fit(300, 2, method)
    post = idata.posterior
    ref = bayesdp.fit_nonprivate(X, y, bounds=bounds, intercept=True, seed=0)
    m_ref = ref.posterior["theta"].mean(("chain", "draw")).values
    m = post["theta"].mean(("chain", "draw")).values
    sd = post["theta"].std(("chain", "draw")).values
    assert np.all(np.abs(m - m_ref) < 4 * sd)
    assert post["mu"].mean().item() == pytest.approx(4.0, abs=4 * post["mu"].std().item())
