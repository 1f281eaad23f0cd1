"""DP release: the noise distribution, sensitivity, clipping, bounds, seeds, holders, chunked file
release, the JSON file format (round trip, combining, every bad-input case) and atomic writes."""

import copy
import dataclasses
import importlib
import json
import math
import os
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesdp
from bayesdp.errors import BayesdpInputError, CombineError, ReleaseFormatError
from bayesdp.releases.holders import random_split
from dp_helpers import (coupled_changes, delta_sz, removals_and_adds, rows_in_ball, split_of,
                        stats_vector, vech)

files_mod = importlib.import_module("bayesdp.releases.files")

EPS, DELTA = 1.0, 1e-5
BOUNDS = (2.0, 3.0)


@pytest.fixture
def data():
    rng = np.random.default_rng(12345)
    X, y = rows_in_ball(rng, 60, 3, *BOUNDS)
    return X, y


def noise_free(X, y, **kw):
    """The noise-free per-holder (S_j, z_j) as the release pipeline computes them (after
    clipping): the noise does not depend on the data, so with one seed the difference between
    the release of (X, y) and that of an all-zero data set of the same shape is S_j, z_j."""
    kw.setdefault("seed", 99)
    r = bayesdp.release(X, y, **kw)
    r0 = bayesdp.release(np.zeros_like(X), np.zeros_like(y), **kw)
    return r.S_hat - r0.S_hat, r.z_hat - r0.z_hat, r


# --------------------------------------------------------------------------------------------
# noise distribution (paper eqs. 2-3)


def test_sigma_is_sensitivity_times_calibration(data):
    X, y = data
    r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=3, seed=1,
                        include_yty=False)
    expected = delta_sz(*BOUNDS) * bayesdp.privacy.analytic_gaussian_sigma(EPS, DELTA)
    np.testing.assert_allclose(r.sigma_s, expected, rtol=1e-12)
    np.testing.assert_allclose(r.sigma_z, expected, rtol=1e-12)
    assert r.sensitivity == pytest.approx(delta_sz(*BOUNDS), rel=1e-14)
    assert r.calibration == "exact" and r.dp_claim_valid and not r.bounds_from_data


def test_noise_monte_carlo(data):
    """10,000 independent noise draws per coordinate: mean 0, variance sigma^2 on the diagonal
    AND off the diagonal of S (not sigma^2/2 as with (Z + Z^T)/2), variance sigma^2 on z,
    Gaussian shape, uncorrelated coordinates; S_hat symmetric exactly."""
    X, y = data
    d, J, R = 3, 10, 1000
    labels = np.arange(60) % J
    S_true = np.stack([X[labels == j].T @ X[labels == j] for j in range(J)])
    z_true = np.stack([X[labels == j].T @ y[labels == j] for j in range(J)])
    noise = []
    for seed in range(R):
        r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=labels,
                            seed=seed)
        assert np.array_equal(r.S_hat, np.swapaxes(r.S_hat, 1, 2))  # exactly symmetric
        dS = r.S_hat - S_true
        dz = r.z_hat - z_true
        noise.append(np.concatenate([np.stack([vech(m) for m in dS]), dz], axis=1))
    sigma = r.sigma_s[0]
    W = np.concatenate(noise) / sigma  # (R*J, 9): 6 upper-triangle entries then 3 of z
    N = W.shape[0]
    assert N == 10_000
    iu = np.triu_indices(d)
    diag = np.flatnonzero(iu[0] == iu[1])
    off = np.flatnonzero(iu[0] != iu[1])
    zcols = np.arange(6, 9)
    # per coordinate: chi-square test of the variance (mean known to be 0), z-test of the mean
    for k in range(W.shape[1]):
        q = float(np.sum(W[:, k] ** 2))
        p_var = 2 * min(stats.chi2.cdf(q, N), stats.chi2.sf(q, N))
        assert p_var > 1e-5, (k, q / N)
        assert abs(W[:, k].mean()) * math.sqrt(N) < 4.5, k
        assert stats.kstest(W[:, k], "norm").pvalue > 1e-5, k
    # pooled variance ratios, tolerance 5 standard errors (sd of s^2/sigma^2 ~ sqrt(2/N))
    for cols in (diag, off, zcols):
        ratio = float(np.mean(W[:, cols] ** 2))
        assert abs(ratio - 1) < 5 * math.sqrt(2 / (N * len(cols))), (cols, ratio)
    # independence of the coordinates
    C = np.corrcoef(W, rowvar=False)
    assert np.max(np.abs(C - np.eye(W.shape[1]))) < 4.5 / math.sqrt(N)


def test_yty_release(data):
    X, y = data
    r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=2, seed=4,
                        include_yty=True)
    bx, by = BOUNDS
    sens = math.sqrt(bx**4 + bx**2 * by**2 + by**4)
    assert r.sensitivity == pytest.approx(sens, rel=1e-14)
    np.testing.assert_allclose(r.sigma_s,
                               sens * bayesdp.privacy.analytic_gaussian_sigma(EPS, DELTA),
                               rtol=1e-12)
    np.testing.assert_allclose(r.sigma_yty, r.sigma_s, rtol=0)
    assert r.yty_hat.shape == (2,)
    r_plain = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=2, seed=4,
                              include_yty=False)
    assert r_plain.yty_hat is None and r_plain.sigma_yty is None
    assert r_plain.sensitivity == pytest.approx(delta_sz(*BOUNDS), rel=1e-14)
    # the default releases y^T y (the default fit estimates sigma_y^2 from it)
    r_default = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=2, seed=4)
    assert r_default.spec.include_yty and r_default.sensitivity == r.sensitivity
    np.testing.assert_array_equal(r_default.yty_hat, r.yty_hat)


@pytest.mark.slow
def test_yty_noise_variance():
    rng = np.random.default_rng(0)
    X, y = rows_in_ball(rng, 20, 2, *BOUNDS)
    yty = float(y @ y)
    W = []
    for seed in range(3000):
        r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=seed,
                            include_yty=True)
        W.append((r.yty_hat[0] - yty) / r.sigma_yty[0])
    W = np.array(W)
    q = float(np.sum(W**2))
    assert 2 * min(stats.chi2.cdf(q, len(W)), stats.chi2.sf(q, len(W))) > 1e-5


# --------------------------------------------------------------------------------------------
# sensitivity


def test_sensitivity_bound_add_remove():
    """||[vech(S), z](D) - [vech(S), z](D')||_2 <= Delta for D' = D minus one row, for random
    data within the bounds, and the bound is attained (x = B_x e_1, y = B_y)."""
    rng = np.random.default_rng(7)
    bx, by = 1.7, 0.6
    Delta = delta_sz(bx, by)
    worst = 0.0
    for _ in range(300):
        d = int(rng.integers(1, 6))
        X, y = rows_in_ball(rng, 12, d, bx, by)
        full = stats_vector(X, y)
        k = int(rng.integers(12))
        keep = np.arange(12) != k
        diff = np.linalg.norm(full - stats_vector(X[keep], y[keep]))
        worst = max(worst, diff / Delta)
    assert worst <= 1 + 1e-12
    assert worst > 0.8  # random rows on the bounds get close
    e1 = np.zeros((1, 3))
    e1[0, 0] = bx
    assert np.linalg.norm(stats_vector(e1, [by])) == pytest.approx(Delta, rel=1e-14)


def test_sensitivity_enforced_by_release_clipping():
    """Through the release pipeline, with raw rows far outside the bounds: removing any one row
    changes the released statistics by at most Delta (same seed => same noise)."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(15, 3)) * 10
    y = rng.normal(size=15) * 10
    Delta = delta_sz(*BOUNDS)
    for k in range(15):
        keep = np.arange(15) != k
        r1 = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=5)
        r2 = bayesdp.release(X[keep], y[keep], epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=5)
        diff = np.concatenate([vech(r1.S_hat[0] - r2.S_hat[0]), r1.z_hat[0] - r2.z_hat[0]])
        assert np.linalg.norm(diff) <= Delta * (1 + 1e-9)


def test_replace_one_can_exceed_delta():
    """Replace-one neighbours (the paper's definition) can move [vech(S), z] by more than Delta,
    which is why releases record add/remove-one neighbouring."""
    bx, by = 1.0, 1.0
    Delta = delta_sz(bx, by)
    X = np.array([[bx, 0.0]])
    # x' orthogonal, y' = -y: sqrt(2) Delta
    d1 = stats_vector(X, [by]) - stats_vector(np.array([[0.0, bx]]), [-by])
    assert np.linalg.norm(d1) == pytest.approx(math.sqrt(2) * Delta, rel=1e-14)
    # x' = -x, y' = y: 2 B_x B_y > Delta whenever 3 B_y^2 > B_x^2
    d2 = stats_vector(X, [by]) - stats_vector(-X, [by])
    assert np.linalg.norm(d2) > Delta
    r = bayesdp.release(X, [by], epsilon=EPS, delta=DELTA, bounds=(bx, by), seed=0)
    assert "add/remove" in r.to_dict()["privacy"]["neighbouring"]


# --------------------------------------------------------------------------------------------
# clipping, bounds, seeds, holders, inputs


def test_clipping_in_release():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(40, 2)) * 2
    y = rng.normal(size=40) * 4
    bx, by = 2.0, 3.0
    labels = np.repeat(["a", "b", "c", "d"], 10)
    S, z, r = noise_free(X, y, epsilon=EPS, delta=DELTA, bounds=(bx, by), nodes=labels)
    norms = np.linalg.norm(X, axis=1)
    Xc = np.where((norms > bx)[:, None], X * (bx / norms)[:, None], X)
    yc = np.clip(y, -by, by)
    clipped = (norms > bx) | (np.abs(y) > by)
    assert r.holder_names == ("a", "b", "c", "d")
    for j, h in enumerate("abcd"):
        m = labels == h
        np.testing.assert_allclose(S[j], Xc[m].T @ Xc[m], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(z[j], Xc[m].T @ yc[m], rtol=1e-9, atol=1e-9)
        assert r.n_clipped[j] == clipped[m].sum()
    assert r.n_clipped.sum() > 0
    assert r.to_dict(include_clip_counts=True)["holders"][0]["n_clipped"] == int(clipped[:10].sum())
    assert "n_clipped" not in r.to_dict()["holders"][0]  # exact counts are not DP: opt-in only


def test_bounds_data_warns_and_flags(data):
    X, y = data
    with pytest.warns(UserWarning, match="NOT differentially private"):
        r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds="data", seed=0)
    assert r.bounds_from_data is True and r.dp_claim_valid is False
    assert r.bounds[0] == pytest.approx(np.linalg.norm(X, axis=1).max(), rel=1e-14)
    assert r.bounds[1] == pytest.approx(np.abs(y).max(), rel=1e-14)
    doc = r.to_dict()
    assert doc["privacy"]["bounds_from_data"] is True and doc["privacy"]["dp_claim_valid"] is False
    assert "NOT PRIVATE" in repr(r)


def test_paper_code_calibration_flags_release(data):
    X, y = data
    with pytest.warns(UserWarning, match="NOT satisfy"):
        r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0,
                            calibration="paper-code", include_yty=False)
    assert r.dp_claim_valid is False and r.calibration == "paper-code"
    np.testing.assert_allclose(
        r.sigma_s, delta_sz(*BOUNDS) * bayesdp.privacy.paper_code_gaussian_sigma(EPS, DELTA),
        rtol=1e-12
    )


def test_seeds(data):
    X, y = data
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=2)
    a, b = bayesdp.release(X, y, **kw), bayesdp.release(X, y, **kw)
    assert not a.seeded and not b.seeded
    assert a.to_dict()["provenance"]["seeded"] is False
    assert not np.array_equal(a.S_hat, b.S_hat) and not np.array_equal(a.z_hat, b.z_hat)
    c, e = bayesdp.release(X, y, seed=3, **kw), bayesdp.release(X, y, seed=3, **kw)
    assert c.seeded and c.to_dict()["provenance"]["seeded"] is True
    assert np.array_equal(c.S_hat, e.S_hat) and np.array_equal(c.z_hat, e.z_hat)
    f = bayesdp.release(X, y, seed=4, **kw)
    assert not np.array_equal(c.S_hat, f.S_hat)


def test_dataframe_feature_names(data):
    X, y = data
    df = pd.DataFrame(X, columns=["age", "income", "height"])
    r = bayesdp.release(df, pd.Series(y), epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    assert r.feature_names == ("age", "income", "height")
    r2 = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    assert r2.feature_names == ("x0", "x1", "x2")
    assert np.array_equal(r.S_hat, r2.S_hat)


def test_nodes_count_contiguous_split():
    rng = np.random.default_rng(2)
    X, y = rows_in_ball(rng, 23, 2, *BOUNDS)
    with pytest.warns(UserWarning, match="split='contiguous'"):
        S, z, r = noise_free(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=5,
                             split="contiguous")
    assert r.n.tolist() == [4, 4, 4, 4, 7]  # floor(23/5) each, remainder to the last holder
    starts = [0, 4, 8, 12, 16, 23]
    for j in range(5):
        Xj, yj = X[starts[j]:starts[j + 1]], y[starts[j]:starts[j + 1]]
        np.testing.assert_allclose(S[j], Xj.T @ Xj, atol=1e-9)
        np.testing.assert_allclose(z[j], Xj.T @ yj, atol=1e-9)
    assert r.J == 5 and r.n_total == 23
    # not add/remove private: flagged, with the true eps of the whole release in the note
    k = bayesdp.privacy.contiguous_split_change(23, 5)
    true_eps = bayesdp.privacy.true_epsilon(r.sigma_s[0], DELTA, sensitivity=k * r.sensitivity)
    assert true_eps > EPS and r.dp_claim_valid is False
    assert f"({true_eps:.4g}, {DELTA:g})-DP" in r.dp_claim_note
    assert r.to_dict()["privacy"]["dp_claim_valid"] is False
    assert r.to_dict()["provenance"]["split"].startswith("contiguous")


def test_nodes_count_random_split():
    """The default for a count J: each row to a uniformly random holder, drawn from the split's
    own stream of the seed: independent of the rows' values (the same n and seed give the same
    holders whatever the data) and of the noise; holders are named 0..J-1 in that order."""
    rng = np.random.default_rng(2)
    X, y = rows_in_ball(rng, 200, 2, *BOUNDS)
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=5, seed=3, include_yty=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = bayesdp.release(X, y, **kw)
    assert r.dp_claim_valid is True and r.dp_claim_note == ""
    assert r.holder_names == ("0", "1", "2", "3", "4") and r.n_total == 200
    assert r.provenance["split"] == "random"
    labels = split_of(200, 5, 3)
    assert r.n.tolist() == np.bincount(labels, minlength=5).tolist()
    assert r.n.tolist() != [40] * 5  # sizes are random around n/J
    # the holders do not depend on the values: other rows, same n and seed, same counts
    X2, y2 = rows_in_ball(np.random.default_rng(9), 200, 2, *BOUNDS)
    assert bayesdp.release(X2, y2, **kw).n.tolist() == r.n.tolist()
    # another seed, another split (negative control for the line above)
    assert bayesdp.release(X, y, **{**kw, "seed": 4}).n.tolist() != r.n.tolist()
    # the statistics per holder are the sums over the rows of that label
    big = bayesdp.release(X, y, **{**kw, "epsilon": 1e9})  # small noise: the sums show
    tol = 6 * big.sigma_s[0]
    assert tol < 1e-3
    for j in range(5):
        m = labels == j
        np.testing.assert_allclose(big.S_hat[j], X[m].T @ X[m], rtol=0, atol=tol)
        np.testing.assert_allclose(big.z_hat[j], X[m].T @ y[m], rtol=0, atol=tol)


def test_random_split_is_uniform():
    """Counts of the split over many draws are Multinomial(n, 1/J): each holder's share of
    200,000 rows is within 5 standard errors of 1/J, and a chi-square statistic over the J
    holders stays below its 0.9999 quantile."""
    n, J = 200_000, 7
    counts = np.bincount(random_split(n, J, np.random.default_rng(11)), minlength=J)
    assert np.all(np.abs(counts - n / J) < 5 * np.sqrt(n * (1 / J) * (1 - 1 / J)))
    chi2 = float(((counts - n / J) ** 2 / (n / J)).sum())
    assert chi2 < stats.chi2.ppf(0.9999, J - 1)


def _counts_attack(split_fn, trials=300):
    """The audit's attack on the counts: 1,000 known rows uniform in [-1, 1]^2, then either
    x = (0.5, 0.5) or x = (0.5, -0.5) with y = 1; the adversary reads only the released counts
    n_j and guesses which row is present, assuming rows go to holder h(row) mod 5 (h a public
    hash): the holder whose count exceeds that of the known rows. ``split_fn(X, y)``: the
    holders (None: bayesdp's own split, unseeded). Returns the share of correct guesses."""
    import hashlib

    def h(X, y):
        return np.array([hashlib.blake2b(np.append(x, v).tobytes(), digest_size=8).digest()[0] % 5
                         for x, v in zip(X, y)])

    rng = np.random.default_rng(17)
    base_X = rng.uniform(-1, 1, size=(1000, 2))
    base_y = rng.uniform(-1, 1, size=1000)
    cand = [np.array([0.5, 0.5]), np.array([0.5, -0.5])]
    assert h(cand[0][None], [1.0])[0] != h(cand[1][None], [1.0])[0]  # distinguishable by h
    known = np.bincount(h(base_X, base_y), minlength=5)
    right = 0
    for t in range(trials):
        truth = t % 2
        X = np.vstack([base_X, cand[truth]])
        y = np.append(base_y, 1.0)
        nodes = 5 if split_fn is None else split_fn(X, y)
        r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=(2, 2), nodes=nodes)
        extra = r.n - known
        guess = 0 if extra[h(cand[0][None], [1.0])[0]] == 1 else 1
        right += guess == truth
    return right / trials, h


def test_counts_say_nothing_about_the_changed_row():
    """docs/privacy.md 3a: under the random split the counts n_j reveal nothing about which of
    two rows is present (replace-one, n fixed): the audit's attack guesses right about half the
    time (300 releases: within 6 binomial sd of 0.5). Negative control: a split by a public hash
    of each row's values (the former default) lets it guess right every time."""
    share, h = _counts_attack(None)
    assert abs(share - 0.5) < 6 * math.sqrt(0.25 / 300)
    leaky, _ = _counts_attack(lambda X, y: h(X, y), trials=60)
    assert leaky == 1.0


@pytest.mark.parametrize("kind", ["random", "labels", "contiguous"])
def test_release_file_states_what_it_protects_as_the_docs_do(tmp_path, kind):
    """privacy.neighbouring and privacy.public in the file are those of the release's kind of
    split, and docs/privacy.md states both word for word (section 3a)."""
    rng = np.random.default_rng(3)
    X, y = rows_in_ball(rng, 60, 2, *BOUNDS)
    nodes = np.array(["north", "south"])[rng.integers(0, 2, 60)] if kind == "labels" else 3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # split="contiguous" warns
        r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=nodes, seed=1,
                            **({} if kind == "labels" else {"split": kind}))
    r.save(tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["provenance"]["split"] == kind
    assert doc["privacy"]["neighbouring"] == bayesdp.privacy.NEIGHBOURING[kind]
    assert doc["privacy"]["public"].startswith(bayesdp.privacy.PUBLIC[kind])
    text = " ".join(open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "privacy.md"))
                    .read().split())
    for stated in (bayesdp.privacy.NEIGHBOURING[kind], bayesdp.privacy.PUBLIC[kind],
                   bayesdp.privacy.PUBLIC_ALWAYS.lstrip("; ")):
        assert " ".join(stated.split()) in text, stated[:60]


def test_split_hash_is_refused_with_the_reason():
    X = np.ones((10, 2))
    with pytest.raises(BayesdpInputError, match="split='hash' was removed.*counts"):
        bayesdp.release(X, np.ones(10), epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=3,
                        split="hash")


def test_random_split_refuses_an_empty_holder():
    seed = next(s for s in range(100) if np.bincount(split_of(4, 3, s), minlength=3).min() == 0)
    with pytest.raises(BayesdpInputError, match="got no rows.*fewer holders"):
        bayesdp.release(np.ones((4, 2)), np.ones(4), epsilon=EPS, delta=DELTA, bounds=BOUNDS,
                        nodes=3, seed=seed)


def test_nodes_label_array():
    rng = np.random.default_rng(2)
    X, y = rows_in_ball(rng, 30, 2, *BOUNDS)
    labels = np.array(["north", "south", "east"])[rng.integers(0, 3, size=30)]
    S, z, r = noise_free(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=labels)
    order = list(dict.fromkeys(labels.tolist()))  # first appearance
    assert list(r.holder_names) == order
    for j, h in enumerate(order):
        m = labels == h
        assert r.n[j] == m.sum()
        np.testing.assert_allclose(S[j], X[m].T @ X[m], atol=1e-9)
        np.testing.assert_allclose(z[j], X[m].T @ y[m], atol=1e-9)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        (dict(epsilon=0.0), "epsilon"),
        (dict(epsilon=-1.0), "epsilon"),
        (dict(epsilon=float("nan")), "epsilon"),
        (dict(delta=0.0), "delta"),
        (dict(delta=1.0), "delta"),
        (dict(delta=2.0), "delta"),
        (dict(bounds=(0.0, 1.0)), "bounds"),
        (dict(bounds=(1.0, -1.0)), "bounds"),
        (dict(bounds=None), "bounds"),
        (dict(bounds="max"), "bounds"),
        (dict(nodes=61), "fewer rows"),
        (dict(nodes=0), "nodes"),
        (dict(nodes=np.zeros(5)), "nodes"),
        (dict(calibration="matlab"), "calibration"),
    ],
)
def test_release_bad_arguments(data, kwargs, field):
    X, y = data
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    kw.update(kwargs)
    with pytest.raises(BayesdpInputError, match=field):
        bayesdp.release(X, y, **kw)


def test_release_bad_data(data):
    X, y = data
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    Xn = X.copy()
    Xn[5, 1] = np.nan
    with pytest.raises(BayesdpInputError, match="NaN"):
        bayesdp.release(Xn, y, **kw)
    yn = y.copy()
    yn[3] = np.inf
    with pytest.raises(BayesdpInputError, match="NaN or infinite"):
        bayesdp.release(X, yn, **kw)
    with pytest.raises(BayesdpInputError, match="y must"):
        bayesdp.release(X, y[:-1], **kw)
    with pytest.raises(BayesdpInputError, match="X must"):
        bayesdp.release(X[:, 0], y, **kw)


# --------------------------------------------------------------------------------------------
# chunked release from CSV / Parquet


def _int_data(n=50, d=3, seed=0):
    """Integer-valued rows inside the bounds: every sum is exact in floating point, so chunked
    and in-memory accumulation must agree bit for bit."""
    rng = np.random.default_rng(seed)
    X = rng.integers(-3, 4, size=(n, d)).astype(float)
    y = rng.integers(-9, 10, size=n).astype(float)
    return X, y, (10.0, 20.0)


@pytest.mark.parametrize("split", ["random", "contiguous"])
@pytest.mark.parametrize("fmt", ["csv-header", "csv-noheader", "parquet"])
def test_release_file_matches_in_memory(tmp_path, fmt, split):
    X, y, bounds = _int_data()
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    df["target"] = y
    if fmt == "csv-header":
        path = tmp_path / "data.csv"
        df.to_csv(path, index=False)
        header = "infer"
    elif fmt == "csv-noheader":
        path = tmp_path / "data.csv"
        df.to_csv(path, index=False, header=False)
        header = None
    else:
        pytest.importorskip("pyarrow")
        path = tmp_path / "data.parquet"
        df.to_parquet(path, index=False)
        header = "infer"
    kw = dict(epsilon=EPS, delta=DELTA, bounds=bounds, nodes=3, seed=21, split=split)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # split="contiguous" warns
        rf = bayesdp.releases.release_file(path, header=header, chunksize=7, **kw)
        rm = bayesdp.release(X, y, **kw)
    assert np.array_equal(rf.S_hat, rm.S_hat)
    assert np.array_equal(rf.z_hat, rm.z_hat)
    sizes = [16, 16, 18] if split == "contiguous" else \
        np.bincount(split_of(len(y), 3, 21), minlength=3).tolist()
    assert rf.n.tolist() == rm.n.tolist() == sizes
    assert np.array_equal(rf.sigma_s, rm.sigma_s)
    assert rf.dp_claim_valid is rm.dp_claim_valid is (split == "random")
    assert rf.dp_claim_note == rm.dp_claim_note
    if header == "infer":
        assert rf.feature_names == ("a", "b", "c")


def test_release_file_clipping_and_node_column(tmp_path):
    rng = np.random.default_rng(5)
    X = rng.normal(size=(41, 2)) * 2
    y = rng.normal(size=41) * 3
    holders = np.array(["h1", "h2", "h3"])[rng.integers(0, 3, 41)]
    df = pd.DataFrame({"f1": X[:, 0], "holder": holders, "f2": X[:, 1], "y": y})
    path = tmp_path / "data.csv"
    df.to_csv(path, index=False, float_format="%.17g")
    kw = dict(epsilon=EPS, delta=DELTA, bounds=(2.0, 3.0), seed=8, include_yty=True)
    rf = bayesdp.releases.release_file(path, y_column="y", node_column="holder", chunksize=5, **kw)
    rm = bayesdp.release(X, y, nodes=holders, **kw)
    assert rf.holder_names == rm.holder_names
    assert rf.feature_names == ("f1", "f2")
    assert rf.n.tolist() == rm.n.tolist()
    assert rf.n_clipped.tolist() == rm.n_clipped.tolist() and rf.n_clipped.sum() > 0
    np.testing.assert_allclose(rf.S_hat, rm.S_hat, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rf.z_hat, rm.z_hat, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(rf.yty_hat, rm.yty_hat, rtol=1e-12, atol=1e-12)


def test_release_file_bounds_data(tmp_path):
    X, y, _ = _int_data(n=30)
    path = tmp_path / "d.csv"
    pd.DataFrame(np.column_stack([X, y])).to_csv(path, index=False, header=False)
    kw = dict(epsilon=EPS, delta=DELTA, bounds="data", nodes=2, seed=3)
    with pytest.warns(UserWarning, match="NOT differentially private"):
        rf = bayesdp.releases.release_file(path, header=None, chunksize=4, **kw)
    with pytest.warns(UserWarning):
        rm = bayesdp.release(X, y, **kw)
    assert rf.bounds_from_data is True and rf.dp_claim_valid is False
    assert rf.bounds == rm.bounds
    assert np.array_equal(rf.S_hat, rm.S_hat) and np.array_equal(rf.z_hat, rm.z_hat)


def test_release_file_bad_input(tmp_path):
    kw = dict(epsilon=EPS, delta=DELTA, bounds=(1.0, 1.0))
    with pytest.raises(BayesdpInputError, match="does not exist"):
        bayesdp.releases.release_file(tmp_path / "nope.csv", **kw)
    p = tmp_path / "nan.csv"
    p.write_text("a,b,y\n1,2,3\n1,,3\n")
    with pytest.raises(BayesdpInputError, match="NaN"):
        bayesdp.releases.release_file(p, **kw)
    p2 = tmp_path / "short.csv"
    p2.write_text("a,b,y\n1,2,3\n1,2,3\n")
    with pytest.raises(BayesdpInputError, match="fewer rows"):
        bayesdp.releases.release_file(p2, nodes=3, **kw)
    p3 = tmp_path / "text.csv"
    p3.write_text("a,b,y\n1,2,3\n1,x,3\n")
    with pytest.raises(BayesdpInputError, match="non-numeric"):
        bayesdp.releases.release_file(p3, **kw)


# --------------------------------------------------------------------------------------------
# file format: round trip


def _assert_releases_equal(a, b):
    """Every field the file holds: all but ``spec``, which a release keeps in memory only (a
    file never holds the seed)."""
    for f in a.__dataclass_fields__.keys() - {"spec"}:
        va, vb = getattr(a, f), getattr(b, f)
        if isinstance(va, np.ndarray) or isinstance(vb, np.ndarray):
            assert va is not None and vb is not None, f
            assert va.dtype == vb.dtype and np.array_equal(va, vb), f
        else:
            assert va == vb, f


def test_round_trip_exact(tmp_path, data):
    X, y = data
    r = bayesdp.release(pd.DataFrame(X, columns=["p", "q", "r"]), y, epsilon=0.37,
                        delta=1 / 7655, bounds=BOUNDS, nodes=3, seed=1, include_yty=True)
    path = r.save(tmp_path / "rel.json", include_clip_counts=True)
    back = bayesdp.load_release(path)
    _assert_releases_equal(r, back)
    assert bayesdp.load_release(r.save(tmp_path / "plain.json")).n_clipped is None
    # with a general noise covariance and no optional privacy fields
    d, J = 2, 2
    D = d * (d + 1) // 2 + d
    rng = np.random.default_rng(0)
    A = rng.normal(size=(J, D, D))
    S = rng.normal(size=(J, d, d))
    r2 = bayesdp.Release(S_hat=S + np.swapaxes(S, 1, 2), z_hat=rng.normal(size=(J, d)),
                         n=[10, 20], sigma_s=[0.1, 0.2], sigma_z=[0.3, 1 / 3],
                         noise_cov=A @ np.swapaxes(A, 1, 2), holder_names=("u", "v"))
    back2 = bayesdp.load_release(r2.save(tmp_path / "rel2.json"))
    _assert_releases_equal(r2, back2)
    assert back2.epsilon is None and back2.bounds is None


def test_saved_file_is_plain_json(tmp_path, data):
    X, y = data
    r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=2, seed=1)
    doc = json.loads((r.save(tmp_path / "r.json")).read_text())
    assert doc["format"] == "bayesdp-release" and doc["format_version"] == 1
    assert doc["d"] == 3 and len(doc["holders"]) == 2
    h = doc["holders"][0]
    assert set(h) >= {"name", "n", "S_hat", "z_hat", "sigma_s", "sigma_z"}
    assert "n_clipped" not in h
    mode = (tmp_path / "r.json").stat().st_mode & 0o777
    assert mode & 0o044 == 0o044 & ~_umask()  # readable by others, as the umask allows
    assert doc["privacy"]["bounds"] == {"x": 2.0, "y": 3.0}
    assert doc["privacy"]["calibration"] == "exact"


# --------------------------------------------------------------------------------------------
# combining


def _holder_releases(tmp_path, **override):
    rng = np.random.default_rng(4)
    out = []
    for j in range(3):
        X, y = rows_in_ball(rng, 20, 3, *BOUNDS)
        kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=j)
        if j == 2:
            kw.update(override)
        names = override.pop("feature_names", None) if j == 2 else None
        Xd = pd.DataFrame(X, columns=names) if names else X
        r = bayesdp.release(Xd, y, **kw)
        out.append(r.save(tmp_path / f"holder{j}.json"))
    return out


def test_combine_files(tmp_path):
    paths = _holder_releases(tmp_path)
    parts = [bayesdp.load_release(p) for p in paths]
    comb = bayesdp.combine_releases(paths)
    assert comb.J == 3 and comb.d == 3
    assert np.array_equal(comb.S_hat, np.concatenate([p.S_hat for p in parts]))
    assert np.array_equal(comb.z_hat, np.concatenate([p.z_hat for p in parts]))
    assert comb.n.tolist() == [20, 20, 20]
    assert len(set(comb.holder_names)) == 3  # clashing "0" names made unique
    comb2 = bayesdp.combine_releases(*parts)
    assert np.array_equal(comb2.S_hat, comb.S_hat)
    _assert_releases_equal(comb, bayesdp.load_release(comb.save(tmp_path / "all.json")))


def test_combine_refuses_the_same_release_twice(tmp_path):
    """Identical statistics are the same holder given twice, whatever its name: refused, naming
    the holder and both inputs (the paths when given as paths)."""
    paths = _holder_releases(tmp_path)
    with pytest.raises(CombineError, match=r"holder '0' of release 2 .*holder0\.json.*same "
                                           r"statistics.*holder '0' of release 0"):
        bayesdp.combine_releases([paths[0], paths[1], paths[0]])
    rel = bayesdp.load_release(paths[1])
    renamed = dataclasses.replace(rel, holder_names=("someone_else",))
    with pytest.raises(CombineError, match="same statistics"):
        bayesdp.combine_releases(rel, renamed)
    # a multi-holder input whose holder reappears in another input is refused as well
    both = bayesdp.combine_releases(paths[:2])
    with pytest.raises(CombineError, match="same statistics"):
        bayesdp.combine_releases(both, paths[1])


def test_combine_refuses_a_chosen_holder_name_twice():
    rng = np.random.default_rng(5)
    rels = []
    for j in range(2):
        X, y = rows_in_ball(rng, 20, 3, *BOUNDS)
        rels.append(bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=j,
                                    holder_name="hospital_a" if j == 0 else "hospital_b"))
    comb = bayesdp.combine_releases(rels)
    assert comb.holder_names == ("hospital_a", "hospital_b")  # chosen names are kept as given
    clash = dataclasses.replace(rels[1], holder_names=("hospital_a",))
    with pytest.raises(CombineError, match="'hospital_a' is in release 0 and in release 1"):
        bayesdp.combine_releases(rels[0], clash)
    # made-up names ("0") that clash are renamed; chosen names next to them are kept
    X, y = rows_in_ball(rng, 20, 3, *BOUNDS)
    anon = [bayesdp.release(X[:10], y[:10], epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=s)
            for s in (7, 8)]
    comb = bayesdp.combine_releases([rels[0], *anon])
    assert comb.holder_names == ("hospital_a", "1:0", "2:0")
    # ... also when the inputs are themselves combinations ("k:j" names)
    more = [bayesdp.release(X[10:], y[10:], epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=s)
            for s in (9, 10)]
    again = bayesdp.combine_releases(comb, bayesdp.combine_releases(more))
    assert len(set(again.holder_names)) == 5 and again.holder_names[0] == "hospital_a"


def test_holder_name_is_for_a_single_holder(tmp_path):
    rng = np.random.default_rng(6)
    X, y = rows_in_ball(rng, 30, 3, *BOUNDS)
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    assert bayesdp.release(X, y, holder_name="clinic", **kw).holder_names == ("clinic",)
    with pytest.raises(BayesdpInputError, match="single holder"):
        bayesdp.release(X, y, nodes=2, holder_name="clinic", **kw)
    with pytest.raises(BayesdpInputError, match="single holder"):
        bayesdp.release(X, y, nodes=np.arange(30) % 2, holder_name="clinic", **kw)
    for bad in ("", "3", "1:0", 5):
        with pytest.raises(BayesdpInputError, match="holder_name"):
            bayesdp.release(X, y, holder_name=bad, **kw)
    path = tmp_path / "d.csv"
    pd.DataFrame(np.column_stack([X, y]), columns=["a", "b", "c", "y"]).to_csv(path, index=False)
    rel = bayesdp.releases.release_file(path, holder_name="clinic", **kw)
    assert rel.holder_names == ("clinic",)
    assert bayesdp.load_release(rel.save(tmp_path / "r.json")).holder_names == ("clinic",)
    with pytest.raises(BayesdpInputError, match="single holder"):
        bayesdp.releases.release_file(path, nodes=3, holder_name="clinic", **kw)


@pytest.mark.parametrize(
    "override, field",
    [
        (dict(epsilon=2.0), "epsilon"),
        (dict(delta=1e-6), "delta"),
        (dict(bounds=(2.0, 4.0)), "bounds"),
        (dict(calibration="classical"), "calibration"),
        (dict(feature_names=["a", "b", "c"]), "feature_names"),
    ],
)
def test_combine_refuses_mismatch(tmp_path, override, field):
    paths = _holder_releases(tmp_path, **override)
    with pytest.raises(CombineError, match=field):
        bayesdp.combine_releases(paths)


def test_combine_refuses_mismatched_d(data):
    X, y = data
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    with pytest.raises(CombineError, match="'?d'?"):
        bayesdp.combine_releases(bayesdp.release(X, y, **kw), bayesdp.release(X[:, :2], y, **kw))
    with pytest.raises(BayesdpInputError):
        bayesdp.combine_releases()


# --------------------------------------------------------------------------------------------
# bad release files


@pytest.fixture
def good_doc(data):
    X, y = data
    r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=2, seed=1,
                        include_yty=False)  # the optional fields' tests add y^T y themselves
    return r.to_dict(include_clip_counts=True)


def _write(tmp_path, obj, name="bad.json"):
    p = tmp_path / name
    p.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return p


def _mutate(doc, path, value=KeyError):
    doc = copy.deepcopy(doc)
    cur = doc
    for k in path[:-1]:
        cur = cur[k]
    if value is KeyError:
        del cur[path[-1]]
    else:
        cur[path[-1]] = value
    return doc


def test_good_doc_loads(tmp_path, good_doc):
    r = bayesdp.load_release(_write(tmp_path, good_doc))
    assert r.J == 2


def test_malformed_and_truncated(tmp_path, good_doc):
    with pytest.raises(ReleaseFormatError, match="not valid JSON"):
        bayesdp.load_release(_write(tmp_path, "{this is not json"))
    text = json.dumps(good_doc, indent=1)
    with pytest.raises(ReleaseFormatError, match="truncated"):
        bayesdp.load_release(_write(tmp_path, text[: len(text) // 2]))
    with pytest.raises(ReleaseFormatError, match="JSON object"):
        bayesdp.load_release(_write(tmp_path, "[1, 2]"))
    with pytest.raises(BayesdpInputError, match="does not exist"):
        bayesdp.load_release(tmp_path / "missing.json")
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ReleaseFormatError):
        bayesdp.load_release(tmp_path / "bin.json")


@pytest.mark.parametrize(
    "path, value, field",
    [
        # missing fields
        (("format",), KeyError, "format"),
        (("format_version",), KeyError, "format_version"),
        (("d",), KeyError, "'d'"),
        (("holders",), KeyError, "holders"),
        (("holders", 0, "S_hat"), KeyError, r"holders\[0\]\.'S_hat'"),
        (("holders", 1, "z_hat"), KeyError, r"holders\[1\]\.'z_hat'"),
        (("holders", 0, "n"), KeyError, r"holders\[0\]\.'n'"),
        (("holders", 0, "sigma_s"), KeyError, "sigma_s"),
        (("holders", 0, "sigma_z"), KeyError, "sigma_z"),
        (("privacy", "bounds", "y"), KeyError, "bounds"),
        # wrong versions / types / shapes
        (("format",), "something-else", "format"),
        (("format_version",), 2, "format_version"),
        (("format_version",), "1", "format_version"),
        (("d",), 0, "'d'"),
        (("d",), 4, "S_hat"),
        (("holders",), [], "holders"),
        (("holders", 0, "S_hat"), [[1.0, 2.0, 3.0], [2.0, 1.0, 0.0]], "S_hat"),
        (("holders", 0, "S_hat"), "abc", "S_hat"),
        (("holders", 0, "z_hat"), [1.0, 2.0], "z_hat"),
        (("holders", 0, "z_hat"), [1.0, "x", 2.0], "z_hat"),
        (("holders", 0, "S_hat"), [[1.0, 2.0, 3.0], [2.5, 1.0, 0.0], [3.0, 0.0, 1.0]],
         "symmetric"),
        (("holders", 0, "n"), 0, "n_j >= 1"),
        (("holders", 0, "n"), -5, "n_j >= 1"),
        (("holders", 0, "n"), 2.5, "n"),
        (("holders", 0, "sigma_s"), "big", "sigma_s"),
        (("holders", 0, "sigma_z"), -1.0, "sigma_z"),
        (("holders", 0, "name"), "1", "holder_names"),
        (("feature_names",), ["a", "b"], "feature_names"),
        (("feature_names",), ["a", "a", "b"], "feature_names"),
        (("privacy", "epsilon"), 0.0, "epsilon"),
        (("privacy", "epsilon"), -1.0, "epsilon"),
        (("privacy", "delta"), 1.0, "delta"),
        (("privacy", "delta"), 0.0, "delta"),
        (("privacy", "bounds"), {"x": 0.0, "y": 1.0}, "bounds"),
        (("privacy", "bounds"), {"x": 1.0, "y": -1.0}, "bounds"),
        (("privacy", "calibration"), "matlab", "calibration"),
    ],
)
def test_bad_fields(tmp_path, good_doc, path, value, field):
    doc = _mutate(good_doc, path, value)
    with pytest.raises(ReleaseFormatError, match=field) as exc:
        bayesdp.load_release(_write(tmp_path, doc))
    assert isinstance(exc.value, ValueError) and isinstance(exc.value, BayesdpInputError)
    assert "bad.json" in str(exc.value)


@pytest.mark.parametrize(
    "target, field",
    [
        ('"S_hat": [[', r"holders\[0\]\.S_hat"),
        ('"z_hat": [', r"holders\[0\]\.z_hat"),
        ('"sigma_s": ', r"holders\[0\]\.sigma_s"),
        ('"epsilon": ', r"privacy\.epsilon"),
    ],
)
@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "1e999"])
def test_non_finite_numbers_in_file(tmp_path, good_doc, target, field, constant):
    text = json.dumps(good_doc)
    i = text.index(target) + len(target)
    j = i
    while text[j] not in ",]}":
        j += 1
    bad = text[:i] + constant + text[j:]
    with pytest.raises(ReleaseFormatError, match=field):
        bayesdp.load_release(_write(tmp_path, bad))


@pytest.mark.parametrize(
    "path, value, field",
    [
        (("privacy", "bounds_from_data"), "false", "bounds_from_data"),
        (("privacy", "dp_claim_valid"), 1, "dp_claim_valid"),
        (("provenance", "seeded"), "yes", "seeded"),
        (("holders", 0, "n_clipped"), -1, "n_clipped"),
        (("holders", 0, "n_clipped"), 1000, "n_clipped"),
        (("holders", 0, "n_clipped"), 1.5, "n_clipped"),
        (("privacy", "sensitivity"), -2.0, "sensitivity"),
        (("privacy", "sensitivity"), "big", "sensitivity"),
        (("feature_names",), "abc", "feature_names"),
        (("privacy", "delta"), None, "delta"),
        (("privacy", "bounds"), [2.0, 3.0], "bounds"),
        (("privacy",), "epsilon=1", "privacy"),
        (("provenance",), "made by hand", "provenance"),
    ],
)
def test_bad_optional_fields(tmp_path, good_doc, path, value, field):
    doc = _mutate(good_doc, path, value)
    with pytest.raises(ReleaseFormatError, match=field):
        bayesdp.load_release(_write(tmp_path, doc))


def test_optional_fields_all_or_none(tmp_path, good_doc):
    doc = _mutate(good_doc, ("holders", 0, "yty_hat"), 3.0)
    doc["holders"][0]["sigma_yty"] = 1.0
    with pytest.raises(ReleaseFormatError, match="yty_hat"):
        bayesdp.load_release(_write(tmp_path, doc))
    D = 3 * 4 // 2 + 3
    doc = _mutate(good_doc, ("holders", 0, "noise_cov"), np.eye(D).tolist())
    with pytest.raises(ReleaseFormatError, match="noise_cov"):
        bayesdp.load_release(_write(tmp_path, doc))
    for h in doc["holders"]:
        h["noise_cov"] = np.eye(D - 1).tolist()
    with pytest.raises(ReleaseFormatError, match="noise_cov"):
        bayesdp.load_release(_write(tmp_path, doc))
    asym = np.eye(D)
    asym[0, 1] = 0.5
    for h in doc["holders"]:
        h["noise_cov"] = asym.tolist()
    with pytest.raises(ReleaseFormatError, match="noise_cov"):
        bayesdp.load_release(_write(tmp_path, doc))
    doc = copy.deepcopy(good_doc)
    for h in doc["holders"]:
        h["yty_hat"] = 3.0
    with pytest.raises(ReleaseFormatError, match="sigma_yty"):  # sigma_yty required with yty_hat
        bayesdp.load_release(_write(tmp_path, doc))
    for h in doc["holders"]:
        h["sigma_yty"] = -1.0
    with pytest.raises(ReleaseFormatError, match="sigma_yty"):
        bayesdp.load_release(_write(tmp_path, doc))


def test_docs_example_file_loads(tmp_path):
    """The complete example in docs/release-format.md is a valid release with the stated sigma."""
    import pathlib
    import re

    doc_md = pathlib.Path(__file__).resolve().parents[2] / "docs" / "release-format.md"
    if not doc_md.exists():
        pytest.skip("docs/release-format.md not present")
    text = re.search(r"```json\n(.*?)```", doc_md.read_text(), re.S).group(1)
    r = bayesdp.load_release(_write(tmp_path, text))
    assert r.J == 2 and r.d == 2 and r.feature_names == ("age", "income")
    assert r.n_clipped.tolist() == [0, 3] and not r.seeded
    assert r.sensitivity == pytest.approx(delta_sz(4.0, 5.0), rel=1e-14)
    np.testing.assert_allclose(r.sigma_s,
                               r.sensitivity * bayesdp.privacy.analytic_gaussian_sigma(1, 1e-5),
                               rtol=1e-12)


def test_minimal_hand_written_file(tmp_path):
    """Only the required fields, as a data holder without Python might write them."""
    doc = {
        "format": "bayesdp-release",
        "format_version": 1,
        "d": 2,
        "holders": [{"n": 100, "S_hat": [[50.5, 1.25], [1.25, 40]], "z_hat": [3, -1.5],
                     "sigma_s": 2.5, "sigma_z": 2.5}],
    }
    r = bayesdp.load_release(_write(tmp_path, doc))
    assert r.J == 1 and r.d == 2 and r.feature_names == ("x0", "x1")
    assert r.epsilon is None and r.bounds is None and not r.seeded


# --------------------------------------------------------------------------------------------
# atomic writes


def test_failed_save_leaves_no_partial_file(tmp_path, data, monkeypatch):
    X, y = data
    r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    target = tmp_path / "rel.json"

    def boom(*a, **k):
        raise OSError("disk full")

    for name in ("link", "replace"):  # the rename of a new file, and of a replacement
        monkeypatch.setattr(files_mod.os, name, boom)
        with pytest.raises(OSError):
            r.save(target, overwrite=name == "replace")
        assert os.listdir(tmp_path) == []
        monkeypatch.undo()

    # an existing file survives a failing overwrite unchanged
    r.save(target)
    before = target.read_bytes()
    r2 = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=1)
    monkeypatch.setattr(files_mod.os, "replace", boom)
    with pytest.raises(OSError):
        r2.save(target, overwrite=True)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["rel.json"] and target.read_bytes() == before

    monkeypatch.setattr(files_mod.json, "dumps", lambda *a, **k: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        r2.save(tmp_path / "other.json")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["rel.json"]

    # a failure while writing the bytes
    class Boom(Exception):
        pass

    real_fdopen = files_mod.os.fdopen

    def bad_fdopen(fd, *a, **k):
        fh = real_fdopen(fd, *a, **k)

        def write(_):
            raise Boom()

        fh.write = write
        return fh

    monkeypatch.setattr(files_mod.os, "fdopen", bad_fdopen)
    with pytest.raises((Boom, AttributeError)):
        r2.save(tmp_path / "third.json")
    monkeypatch.undo()
    assert os.listdir(tmp_path) == ["rel.json"]
    with pytest.raises(BayesdpInputError, match="does not exist"):
        r.save(tmp_path / "no" / "such" / "dir.json")


def _umask():
    import os

    m = os.umask(0)
    os.umask(m)
    return m


# --------------------------------------------------------------------------------------------
# header-less CSV: data values must never become feature names (audit issue 15, item 1)


def _value_strings(v):
    """The ways a number of the file may be printed: as written in the CSV, Python's repr/str,
    and pandas' formatting of a float column name."""
    return {repr(float(v)), str(float(v)), f"{v:.17g}", f"{float(v)!s}".rstrip("0")}


def test_headerless_csv_is_refused_with_infer_and_nothing_leaks(tmp_path):
    rng = np.random.default_rng(7)
    n, d = 40, 3
    X = rng.uniform(-1, 1, size=(n, d)) + 1e-7 * rng.uniform(size=(n, d))  # long distinctive values
    y = rng.uniform(-2, 2, size=n)
    path = tmp_path / "noheader.csv"
    pd.DataFrame(np.column_stack([X, y])).to_csv(path, index=False, header=False,
                                                 float_format="%.17g")
    out = tmp_path / "release.json"
    kw = dict(epsilon=EPS, delta=DELTA, bounds=(2.0, 3.0), nodes=2, seed=5)
    with pytest.raises(BayesdpInputError, match="header") as exc:
        bayesdp.releases.release_file(path, **kw)  # header="infer" is the default
    assert "header=None" in str(exc.value) and "--no-header" in str(exc.value)
    assert not out.exists()
    # read as what it is: every row is data, the row count is right, no value is a name
    rel = bayesdp.releases.release_file(path, header=None, **kw)
    rel.save(out, include_clip_counts=True)
    text = out.read_text()
    assert rel.n_total == n and bayesdp.load_release(out).n_total == n
    tokens = set(path.read_text().replace("\n", ",").split(",")) - {""}
    assert len(tokens) == n * (d + 1)
    for v in np.concatenate([X.ravel(), y]):
        for s in _value_strings(v):
            assert s not in text, s
    for t in tokens:
        assert t not in text, t
    assert json.loads(text)["feature_names"] == ["0", "1", "2"]


def test_csv_header_with_a_numeric_field_is_refused(tmp_path):
    path = tmp_path / "half.csv"
    path.write_text("age,3.25,y\n1,2,3\n4,5,6\n")
    with pytest.raises(BayesdpInputError, match=r"columns \[1\]"):
        bayesdp.releases.release_file(path, epsilon=EPS, delta=DELTA, bounds=(9.0, 9.0))
    ok = tmp_path / "ok.csv"
    ok.write_text("age,height,y\n1,2,3\n4,5,6\n")
    r = bayesdp.releases.release_file(ok, epsilon=EPS, delta=DELTA, bounds=(9.0, 9.0), seed=0)
    assert r.feature_names == ("age", "height") and r.n_total == 2


def test_feature_names_must_be_strings_and_not_numbers(data):
    X, y = data
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    with pytest.raises(BayesdpInputError, match="feature name 1 is 2"):
        bayesdp.release(X, y, feature_names=["a", 2, "c"], **kw)
    with pytest.raises(BayesdpInputError, match="feature name 0 is '0.5'"):
        bayesdp.release(X, y, feature_names=["0.5", "b", "c"], **kw)
    # a header-less CSV read by pandas with header=0: the first row's values are column names
    df = pd.DataFrame(X[1:], columns=[f"{v:.17g}" for v in X[0]])
    with pytest.raises(BayesdpInputError, match="X.columns: feature name 0"):
        bayesdp.release(df, y[1:], **kw)
    with pytest.raises(BayesdpInputError, match="names must be strings"):
        bayesdp.release(pd.DataFrame(X, columns=[0.5, 1.5, 2.5]), y, **kw)
    # positions (header=None / a plain array in a DataFrame) are not data: kept as "0", "1", ...
    r = bayesdp.release(pd.DataFrame(X), y, **kw)
    assert r.feature_names == ("0", "1", "2")


# --------------------------------------------------------------------------------------------
# calibration="classical" beyond its proof (audit issue 15, item 3)


@pytest.mark.parametrize("eps", [10.0, 20.0])
def test_classical_calibration_flagged_where_it_is_not_dp(data, eps):
    X, y = data
    with pytest.warns(UserWarning, match="classical"):
        r = bayesdp.release(X, y, epsilon=eps, delta=DELTA, bounds=BOUNDS, seed=0,
                            calibration="classical")
    true_eps = bayesdp.privacy.true_epsilon(r.sigma_s[0], DELTA, sensitivity=r.sensitivity)
    assert true_eps > eps  # computed here from the exact profile, not read from the release
    assert r.dp_claim_valid is False and "DP CLAIM INVALID" in repr(r)
    doc = r.to_dict()["privacy"]
    assert doc["dp_claim_valid"] is False
    assert f"({true_eps:.4g}, {DELTA:g})-DP" in doc["dp_claim_note"]


def test_classical_calibration_valid_below_one(data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        r = bayesdp.release(X, y, epsilon=1.0, delta=DELTA, bounds=BOUNDS, seed=0,
                            calibration="classical")
    assert bayesdp.privacy.true_epsilon(r.sigma_s[0], DELTA, sensitivity=r.sensitivity) < 1.0
    assert r.dp_claim_valid is True and r.dp_claim_note == ""


# --------------------------------------------------------------------------------------------
# the holder split and add/remove-one DP of the WHOLE release (audit issue 15, item 2)


def _whole(r):
    """The released vector of all holders: [vech(S_hat_j), z_hat_j] for j = 1..J."""
    return np.concatenate([np.concatenate([vech(S), z]) for S, z in zip(r.S_hat, r.z_hat)])


def _changes(X, y, neighbours, **kw):
    """L2 change of the noiseless statistics of the whole release, data set -> each neighbour.
    The same seed gives the same noise draws for holders 0..J-1 whatever the data, so the
    difference of two releases is the difference of their noiseless statistics."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # split="contiguous" warns
        base = bayesdp.release(X, y, seed=5, **kw)
        out = []
        for Xn, yn in neighbours:
            other = bayesdp.release(Xn, yn, seed=5, **kw)
            assert other.J == base.J
            out.append(np.linalg.norm(_whole(base) - _whole(other)))
    return np.array(out), base


def _removals(X, y):
    return [(np.delete(X, i, axis=0), np.delete(y, i)) for i in range(len(y))]


@pytest.mark.parametrize("n, J", [(60, 5), (61, 5), (200, 10)])
def test_remove_or_add_one_row_changes_whole_release_by_at_most_delta(n, J):
    """Random split: removing or adding a row (every other row keeping its holder, the coupling
    of the privacy argument) changes the sums of all holders together by at most Delta."""
    rng = np.random.default_rng(n + J)
    X, y = rows_in_ball(rng, n, 3, *BOUNDS)
    Xa, ya = rows_in_ball(rng, 5, 3, *BOUNDS)
    neighbours = removals_and_adds(X, y, Xa, ya, [0, n // 3, n // 2, n - 1, n], J)
    change, Delta = coupled_changes(X, y, J, neighbours, BOUNDS), delta_sz(*BOUNDS)
    assert change.max() <= Delta * (1 + 1e-9)
    assert change.max() > 0.5 * Delta  # the check is not vacuous: rows near the bounds move it

    # negative control: the authors' contiguous split moves other rows between holders
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=J)
    change_c, rel_c = _changes(X, y, [(Xn, yn) for Xn, yn, _ in neighbours],
                               split="contiguous", **kw)
    assert change_c.max() > 1.5 * Delta  # exceeds the sensitivity the noise was calibrated for
    assert rel_c.dp_claim_valid is False
    # ... by no more than the bound stated in its dp_claim_note
    k = bayesdp.privacy.contiguous_split_change(n, J)
    assert change_c.max() <= k * Delta * (1 + 1e-9)
    assert f"{k:.4g} x the sensitivity" in rel_c.dp_claim_note


def test_remove_one_row_from_a_file_with_a_node_column(tmp_path):
    """Holder labels in a file: removing a row changes its holder's statistics only, by at most
    Delta, and that holder's count by one."""
    rng = np.random.default_rng(4)
    X, y = rows_in_ball(rng, 80, 2, *BOUNDS)
    site = np.array(["north", "south", "east", "west"])[rng.integers(0, 4, size=80)]
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=9, chunksize=13, node_column="site")
    rels = {}
    for name, keep in {"full": np.arange(80) >= 0, "minus": np.arange(80) != 17}.items():
        p = tmp_path / f"{name}.csv"
        pd.DataFrame({"a": X[keep, 0], "b": X[keep, 1], "site": site[keep], "y": y[keep]}
                     ).to_csv(p, index=False, float_format="%.17g")
        rels[name] = bayesdp.releases.release_file(p, **kw)
    assert rels["full"].holder_names == rels["minus"].holder_names
    change = np.linalg.norm(_whole(rels["full"]) - _whole(rels["minus"]))
    assert 0 < change <= rels["full"].sensitivity * (1 + 1e-9)
    assert (rels["full"].n - rels["minus"].n).tolist().count(1) == 1  # one holder lost a row
    assert (rels["full"].n - rels["minus"].n).tolist().count(0) == 3


def test_replace_one_row_changes_whole_release_by_at_most_two_delta():
    """Replace-one (the paper's notion): at most 2 Delta, the sensitivity docs/privacy.md uses for
    the replace-one eps' (the add/remove Delta can be exceeded, as stated there)."""
    rng = np.random.default_rng(8)
    n, J = 60, 5
    X, y = rows_in_ball(rng, n, 3, *BOUNDS)
    Xr, yr = rows_in_ball(rng, n, 3, *BOUNDS)
    Xr[0] = -X[0]  # a worst case: x' = -x, y' = y
    yr[0] = y[0]
    reps = []
    for i in range(n):
        Xn, yn = X.copy(), y.copy()
        Xn[i], yn[i] = Xr[i], yr[i]
        reps.append((Xn, yn))
    change, rel = _changes(X, y, reps, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=J)
    assert change.max() <= 2 * rel.sensitivity * (1 + 1e-9)
    assert change.max() > rel.sensitivity  # replace-one needs more than the add/remove Delta


def test_contiguous_split_change_matches_brute_force():
    """privacy.contiguous_split_change against a direct count of the rows that change holder."""
    def labels(m, J):
        return np.minimum(np.arange(m) // (m // J), J - 1)

    def brute(n, J):
        worst = 0
        for m in (n, n + 1):  # remove a row from n rows, or add one (= remove from n + 1)
            if m - 1 < J:
                continue
            old, new = labels(m, J), labels(m - 1, J)
            for i in range(m):
                c = np.zeros(J)
                c[old[i]] += 1
                kept = np.delete(np.arange(m), i)
                moved = old[kept] != new
                np.add.at(c, old[kept][moved], 1)
                np.add.at(c, new[moved], 1)
                worst = max(worst, (c**2).sum())
        return math.sqrt(worst)

    for n, J in [(20, 10), (23, 5), (24, 5), (25, 5), (10, 10), (11, 2), (40, 4), (50, 7),
                 (30, 1), (97, 6)]:
        assert bayesdp.privacy.contiguous_split_change(n, J) == pytest.approx(brute(n, J))
    assert bayesdp.privacy.contiguous_split_change(30, 1) == 1.0
    assert bayesdp.privacy.contiguous_split_change(1003, 10) == pytest.approx(math.sqrt(37))


def test_huge_rows_are_clipped_not_zeroed():
    X = np.array([[1e200, 1e200], [1.0, 0.0], [0.0, 1.0]])
    y = np.array([1.0, 1.0, -1.0])
    r = bayesdp.release(X, y, epsilon=1e9, delta=DELTA, bounds=BOUNDS, seed=0)
    Xc = np.array([[1, 1] / np.sqrt(2) * BOUNDS[0], [1.0, 0.0], [0.0, 1.0]])
    tol = 6 * r.sigma_s[0]
    np.testing.assert_allclose(r.S_hat[0], Xc.T @ Xc, rtol=0, atol=tol)
    np.testing.assert_allclose(r.z_hat[0], Xc.T @ y, rtol=0, atol=tol)
    assert r.n_clipped.tolist() == [1]


def test_complex_input_is_refused(data):
    X, y = data
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    with pytest.raises(BayesdpInputError, match="X has complex values"):
        bayesdp.release(X + 1j, y, **kw)
    with pytest.raises(BayesdpInputError, match="y has complex values"):
        bayesdp.release(X, y.astype(complex), **kw)  # even with a zero imaginary part
    with pytest.raises(BayesdpInputError, match="X has complex values"):
        bayesdp.release(pd.DataFrame({"a": X[:, 0] + 2j, "b": X[:, 1], "c": X[:, 2]}), y, **kw)
    with pytest.raises(BayesdpInputError, match="X has complex values"):
        bayesdp.adassp(X + 1j, y, **kw)


# values that used to load and break later (audit, issue 15 item 5)


@pytest.mark.parametrize(
    "path, value, field",
    [
        # 1e308 used to load; symmetrising 0.5 * (S + S^T) then gave inf
        (("holders", 0, "S_hat"), [[1e308, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]],
         r"holders\[0\]\.S_hat\[0\]\[0\]"),
        (("holders", 1, "z_hat"), [1.0, -1e200, 0.0], r"holders\[1\]\.z_hat\[1\]"),
        (("holders", 0, "sigma_s"), 1e300, r"holders\[0\]\.sigma_s"),
        # strings and booleans inside arrays used to be converted by np.array(dtype=float)
        (("holders", 0, "S_hat"), [[1, "2", 0], ["2", 3, 0], [0, 0, 1]],
         r"holders\[0\]\.S_hat\[0\]\[1\]"),
        (("holders", 0, "S_hat"), [[1, True, 0], [True, 3, 0], [0, 0, 1]],
         r"holders\[0\]\.S_hat\[0\]\[1\]"),
        (("holders", 0, "z_hat"), [1.0, None, 0.0], r"holders\[0\]\.z_hat\[1\]"),
        (("holders", 0, "S_hat"), [[1, 0, 0], [0, 1, 0], [0, 0, [1]]],
         r"holders\[0\]\.S_hat\[2\]\[2\]"),
        # bool is an int in Python: true used to pass as 1
        (("holders", 0, "n_clipped"), True, r"holders\[0\]\.n_clipped"),
        (("holders", 0, "n"), True, r"holders\[0\]\.n"),
        (("format_version",), True, "format_version"),
        (("d",), True, "'d'"),
        (("privacy", "epsilon"), True, r"privacy\.epsilon"),
        (("privacy", "bounds"), {"x": True, "y": 1.0}, r"privacy\.bounds\.x"),
        (("privacy", "calibration"), ["exact"], r"privacy\.calibration"),
        # a count too large for any integer type used to raise a bare OverflowError
        (("holders", 0, "n"), 10**400, r"holders\[0\]\.n"),
        (("holders", 0, "n_clipped"), 10**400, r"holders\[0\]\.n_clipped"),
    ],
    ids=lambda v: repr(v)[:24],
)
def test_values_that_break_later_are_refused_at_load(tmp_path, good_doc, path, value, field):
    doc = _mutate(good_doc, path, value)
    with pytest.raises(ReleaseFormatError, match=field) as exc:
        bayesdp.load_release(_write(tmp_path, doc))
    assert "bad.json" in str(exc.value)


def test_per_holder_optional_numbers_name_their_field(tmp_path, good_doc):
    doc = copy.deepcopy(good_doc)
    for h in doc["holders"]:
        h["yty_hat"], h["sigma_yty"] = 3.0, 1.0
    doc["holders"][1]["yty_hat"] = "abc"
    with pytest.raises(ReleaseFormatError, match=r"holders\[1\]\.yty_hat"):
        bayesdp.load_release(_write(tmp_path, doc))
    doc["holders"][1]["yty_hat"] = 3.0
    doc["holders"][0]["sigma_yty"] = False
    with pytest.raises(ReleaseFormatError, match=r"holders\[0\]\.sigma_yty"):
        bayesdp.load_release(_write(tmp_path, doc))
    doc = copy.deepcopy(good_doc)
    doc["holders"][0]["sigma_yty"] = 1.0  # without yty_hat: refused, not silently dropped
    with pytest.raises(ReleaseFormatError, match="sigma_yty"):
        bayesdp.load_release(_write(tmp_path, doc))


def test_noise_cov_must_be_psd_at_load(tmp_path, good_doc):
    """A non-PSD noise_cov used to load and fail later inside a fit with a bare LinAlgError."""
    D = 3 * 4 // 2 + 3
    bad = np.eye(D)
    bad[0, 1] = bad[1, 0] = 2.0  # symmetric, eigenvalues 3 and -1
    doc = copy.deepcopy(good_doc)
    for h in doc["holders"]:
        h["noise_cov"] = np.eye(D).tolist()
    bayesdp.load_release(_write(tmp_path, doc))  # PSD: fine
    doc["holders"][1]["noise_cov"] = bad.tolist()
    with pytest.raises(ReleaseFormatError, match=r"noise_cov of holder 1 is not positive semi"):
        bayesdp.load_release(_write(tmp_path, doc))
    # rounding-sized negative eigenvalues are accepted
    nearly = np.eye(D)
    nearly[0, 0] = -2e-12
    doc["holders"][1]["noise_cov"] = nearly.tolist()
    bayesdp.load_release(_write(tmp_path, doc))


def test_release_object_refuses_bools_and_raw_sigma_yty(data):
    X, y = data
    r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, nodes=2, seed=1)
    with pytest.raises(BayesdpInputError, match="n_clipped"):
        dataclasses.replace(r, n_clipped=np.array([True, False]))
    with pytest.raises(BayesdpInputError, match="n must"):
        dataclasses.replace(r, n=np.array([True, True]))
    with pytest.raises(BayesdpInputError, match="sigma_yty"):
        dataclasses.replace(r, sigma_yty=np.array([-1.0, 1.0]))  # no yty_hat: used to be kept raw
    with pytest.raises(BayesdpInputError, match="sigma_yty"):
        dataclasses.replace(r, yty_hat=np.ones(2), sigma_yty="abc")
    with pytest.raises(BayesdpInputError, match="S_hat"):
        dataclasses.replace(r, S_hat=r.S_hat * 1e300)
    big = dataclasses.replace(r, S_hat=r.S_hat / np.max(np.abs(r.S_hat)) * 1e150)
    assert np.all(np.isfinite(big.S_hat))  # symmetrised without overflow


def test_deeply_nested_and_folder_release_files(tmp_path):
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ReleaseFormatError, match="nested too deeply"):
        bayesdp.load_release(deep)
    with pytest.raises(BayesdpInputError, match="is a folder"):
        bayesdp.load_release(tmp_path)


# --------------------------------------------------------------------------------------------
# errors that were not ValueErrors (audit, issue 15 item 6)


def test_missing_or_mixed_node_labels_are_named(data):
    """None among the labels used to raise a TypeError inside np.unique."""
    X, y = data
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    labels = np.array(["a"] * 30 + ["b"] * 30, dtype=object)
    bayesdp.release(X, y, nodes=labels, **kw)
    for bad in (None, float("nan")):
        lab = labels.copy()
        lab[7] = bad
        with pytest.raises(BayesdpInputError, match="nodes: missing holder label.*first row 7"):
            bayesdp.release(X, y, nodes=lab, **kw)
    lab = labels.copy()
    lab[3] = 5
    with pytest.raises(BayesdpInputError, match="nodes: holder labels must be all numbers or"):
        bayesdp.release(X, y, nodes=lab, **kw)


def test_missing_node_labels_in_a_file(tmp_path, data):
    X, y = data
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    frame["who"] = ["h1"] * 30 + ["h2"] * 30
    frame.loc[12, "who"] = None
    frame["y"] = y
    path = tmp_path / "d.csv"
    frame.to_csv(path, index=False)
    with pytest.raises(BayesdpInputError, match="node_column: missing holder label"):
        bayesdp.releases.release_file(path, epsilon=EPS, delta=DELTA, bounds=BOUNDS,
                                      node_column="who")


@pytest.mark.parametrize("seed", ["abc", 1.5, True, -1])
def test_bad_seed_is_named(data, seed):
    X, y = data
    with pytest.raises(BayesdpInputError, match="seed"):
        bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=seed)
    with pytest.raises(BayesdpInputError, match="seed"):
        bayesdp.simulate(50, 2, seed=seed)
    r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    with pytest.raises(BayesdpInputError, match="seed"):
        bayesdp.fit(r, seed=seed)
    with pytest.raises(BayesdpInputError, match="seed"):
        bayesdp.fit_nonprivate(X, y, seed=seed)
    bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=np.int64(3))


def test_noise_scale_beyond_float64_is_refused(data):
    X, y = data
    with pytest.raises(BayesdpInputError, match="bounds"):
        bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=(1e200, 3.0), seed=0)
    with pytest.raises(BayesdpInputError, match="epsilon"):  # classical sigma ~ 1/eps
        bayesdp.release(X, y, epsilon=1e-300, delta=DELTA, bounds=BOUNDS, seed=0,
                        calibration="classical")
    with pytest.raises(BayesdpInputError, match="epsilon"):
        bayesdp.release(X, y, epsilon=1e300, delta=DELTA, bounds=BOUNDS, seed=0)


def test_folders_where_files_belong(tmp_path, data):
    X, y = data
    r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=0)
    (tmp_path / "sub").mkdir()
    with pytest.raises(BayesdpInputError, match="is a folder"):
        r.save(tmp_path / "sub")
    with pytest.raises(BayesdpInputError, match="is a folder"):
        bayesdp.releases.release_file(tmp_path / "sub", epsilon=EPS, delta=DELTA, bounds=BOUNDS)
    assert os.listdir(tmp_path / "sub") == []


@pytest.mark.parametrize("labels, match", [
    ("column", "float64 values"),                         # a feature column as labels
    ("strings", "looks like a measurement"),              # its values written as text
    ("ids", "distinct holder labels for 60 rows"),        # a per-row identifier
    ("ints", "distinct holder labels for 60 rows"),       # per-row integer codes
    ("bools", "bool values"),
    ("empty", "empty holder label"),
])
def test_holder_labels_must_name_holders(labels, match):
    """Holder labels are published as the holders' names: a column of values, a per-row
    identifier or an empty name is refused (the audit: nodes=X[:, 0] published every row's
    value); names and integer codes of a few holders pass."""
    rng = np.random.default_rng(5)
    X, y = rows_in_ball(rng, 60, 2, *BOUNDS)
    nodes = {"column": X[:, 0], "strings": np.array([f"{v:.4g}" for v in X[:, 0]]),
             "ids": np.array([f"patient{i}" for i in range(60)]), "ints": np.arange(60),
             "bools": X[:, 0] > 0, "empty": np.where(X[:, 0] > 0, "north", " ")}[labels]
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=1)
    with pytest.raises(BayesdpInputError, match=match):
        bayesdp.release(X, y, nodes=nodes, **kw)
    # names and integer codes of a few holders are fine
    assert bayesdp.release(X, y, nodes=np.where(X[:, 0] > 0, "north", "south"), **kw).J == 2
    assert bayesdp.release(X, y, nodes=(X[:, 0] > 0).astype(int), **kw).J == 2


def test_node_column_of_measurements_is_refused_by_release_file(tmp_path):
    rng = np.random.default_rng(6)
    X, y = rows_in_ball(rng, 50, 2, *BOUNDS)
    p = tmp_path / "d.csv"
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "y": y}).to_csv(p, index=False)
    with pytest.raises(BayesdpInputError, match="node_column: holder labels are float64"):
        bayesdp.releases.release_file(p, epsilon=EPS, delta=DELTA, bounds=BOUNDS, node_column="a")


def test_bounds_from_data_is_named_for_what_it_records(tmp_path):
    """The file says ``bounds_from_data`` (true only for bounds read off the data: then the
    noise scale is not private); a file written before, with ``private_bounds`` (its negation),
    reads the same; a public-bounds release writes false, not a misleading "private" true."""
    import json

    sim = bayesdp.simulate(n=2000, d=2, seed=0)
    public = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, seed=0)
    with pytest.warns(UserWarning):
        data = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds="data", seed=0)
    for rel, expected in ((public, False), (data, True)):
        doc = json.loads(rel.save(tmp_path / f"r{expected}.json").read_text())
        assert doc["privacy"]["bounds_from_data"] is expected
        assert "private_bounds" not in doc["privacy"]
        old = dict(doc, privacy={**{k: v for k, v in doc["privacy"].items()
                                    if k != "bounds_from_data"}, "private_bounds": not expected})
        path = tmp_path / f"old{expected}.json"
        path.write_text(json.dumps(old))
        assert bayesdp.load_release(path).bounds_from_data is expected
