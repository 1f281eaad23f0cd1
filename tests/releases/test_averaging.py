"""Releases of rows averaged in random groups of k (appendix B.1): the statistics, the groups'
Wishart degrees of freedom, the sensitivity (not the paper's) and the coupling it rests on."""

import itertools
import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest
from scipy import stats

import bayesdp
from bayesdp.errors import BayesdpInputError, CombineError, ReleaseFormatError
from bayesdp.releases.mechanism import GROUPING_STREAM
from dp_helpers import delta_sz, rows_in_ball, vech

EPS, DELTA = 1.0, 1e-5
BOUNDS = (2.0, 3.0)


def group_vector(W, y, groups):
    """[vech(A^T A), A^T b] of the groups (each a list of row indices): a = sum w / sqrt(k)."""
    d = W.shape[1]
    if len(groups) == 0:
        return np.zeros(d * (d + 1) // 2 + d)
    k = len(groups[0])
    A = np.array([W[list(g)].sum(0) for g in groups]) / math.sqrt(k)
    b = np.array([y[list(g)].sum() for g in groups]) / math.sqrt(k)
    return np.concatenate([vech(A.T @ A), A.T @ b])


def mechanism_partition(rng, n, k):
    """The release's grouping: a uniformly random permutation, groups of k, the rest dropped."""
    perm = rng.permutation(n)
    m = n // k
    return [list(g) for g in perm[: m * k].reshape(m, k)], list(perm[m * k:])


def coupled_removal(groups, left, r, rng, pick="uniform"):
    """docs/privacy.md 3b: the partition of D minus row r coupled with (groups, left) of D.
    r left over: nothing changes; r in a group and rows left over: r is swapped for one of them
    (chosen uniformly); nothing left over: r's group is dissolved into the left-over rows.
    Indices above r shift down by one. ``pick="lowest"`` is a wrong coupling (negative control)."""
    groups = [list(g) for g in groups]
    left = list(left)
    if r in left:
        left.remove(r)
    else:
        g = next(g for g in groups if r in g)
        if left:
            u = left[int(rng.integers(len(left)))] if pick == "uniform" else min(left)
            left.remove(u)
            g[g.index(r)] = u
        else:
            groups.remove(g)
            left = [i for i in g if i != r]
    shift = lambda i: i - (i > r)  # noqa: E731
    return [[shift(i) for i in g] for g in groups], [shift(i) for i in left]


def _canonical(groups, left):
    return (frozenset(frozenset(g) for g in groups), frozenset(left))


@pytest.mark.parametrize("n, k, pick, uniform", [(5, 2, "uniform", True), (6, 2, "uniform", True),
                                                 (8, 3, "uniform", True), (8, 3, "lowest", False)])
def test_the_coupling_gives_the_mechanism_partition_of_the_neighbour(n, k, pick, uniform):
    """The sensitivity argument couples the random partition of D with that of D minus a row;
    this only proves privacy if the coupled partition has exactly the mechanism's distribution
    (uniform over all partitions of n - 1 rows into groups of k plus n - 1 mod k left over).
    Chi-square test over every configuration, 30,000 draws; a wrong coupling (swapping in the
    lowest-numbered left-over row) is detected."""
    rng = np.random.default_rng(n * 10 + k)
    counts = {}
    for _ in range(30_000):
        groups, left = mechanism_partition(rng, n, k)
        key = _canonical(*coupled_removal(groups, left, 0, rng, pick))
        counts[key] = counts.get(key, 0) + 1
    m = (n - 1) // k
    n_configs = math.comb(n - 1, (n - 1) % k) * math.factorial(m * k) // (
        math.factorial(k) ** m * math.factorial(m))
    observed = np.array(list(counts.values()) + [0] * (n_configs - len(counts)))
    p = stats.chisquare(observed).pvalue
    assert all(len(g) == k for key in counts for g in key[0])
    if uniform:
        assert len(counts) == n_configs and p > 1e-3
    else:
        assert p < 1e-6


def test_sensitivity_formula():
    s = bayesdp.privacy.sensitivity_release
    D = delta_sz(*BOUNDS)
    assert s(*BOUNDS) == pytest.approx(D)
    for k in (4, 5, 10, 50):
        assert s(*BOUNDS, average_rows=k) == pytest.approx(k * D)
    for k in (2, 3):  # the provable swap bound 4 Delta
        assert s(*BOUNDS, average_rows=k) == pytest.approx(4 * D)
    with pytest.raises(BayesdpInputError, match="average_rows"):
        s(*BOUNDS, average_rows=0)


@pytest.mark.parametrize("k, intercept", [(2, False), (3, False), (4, False), (7, False),
                                          (2, True), (5, True)])
def test_coupled_neighbours_change_by_at_most_the_sensitivity(k, intercept):
    """Random data in the bounds (some rows on them), random partitions and every removed row:
    the coupled change never exceeds the calibrated sensitivity, and k equal rows on the bound
    attain k Delta_row, far above the paper's claim Delta_row (negative control)."""
    rng = np.random.default_rng(k + 10 * intercept)
    bx, by = BOUNDS
    sens = bayesdp.privacy.sensitivity_release(bx, by, intercept=intercept, average_rows=k)
    row = bayesdp.privacy.sensitivity_release(bx, by, intercept=intercept)
    design = (lambda X: np.column_stack([np.ones(len(X)), X])) if intercept else (lambda X: X)
    worst = 0.0
    for _ in range(40):
        n = int(rng.integers(k, 4 * k + 3))
        X, y = rows_in_ball(rng, n, 2, bx, by)
        W = design(X)
        groups, left = mechanism_partition(rng, n, k)
        full = group_vector(W, y, groups)
        for r in range(n):
            g2, _ = coupled_removal(groups, left, r, rng)
            keep = np.arange(n) != r
            change = np.linalg.norm(full - group_vector(W[keep], y[keep], g2))
            worst = max(worst, change)
    assert worst <= sens * (1 + 1e-9)
    # k equal rows on the bound: removing one dissolves the only group
    X = np.tile([[bx, 0.0]], (k, 1))
    y = np.full(k, by)
    change = np.linalg.norm(group_vector(design(X), y, [list(range(k))]))
    assert change == pytest.approx(k * row, rel=1e-12)
    assert change > 1.5 * row  # the paper's "same sensitivity" is wrong
    assert change <= sens * (1 + 1e-12)


def test_release_statistics_are_the_group_sums():
    """The pipeline's noiseless statistics are exactly the documented grouping: a permutation
    from the seed's grouping stream, groups of k, the n mod k rows left over dropped."""
    rng = np.random.default_rng(3)
    n, k = 53, 5
    X, y = rows_in_ball(rng, n, 3, *BOUNDS)
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=11, average_rows=k, include_yty=False)
    r = bayesdp.release(X, y, **kw)
    r0 = bayesdp.release(np.zeros_like(X), np.zeros_like(y), **kw)  # same noise, S = z = 0
    perm = np.random.default_rng([11, GROUPING_STREAM]).permutation(n)
    groups = perm[:50].reshape(10, 5)
    want = group_vector(X, y, groups)
    got = np.concatenate([vech(r.S_hat[0] - r0.S_hat[0]), r.z_hat[0] - r0.z_hat[0]])
    np.testing.assert_allclose(got, want, atol=1e-9)
    assert r.n.tolist() == [10] and r.n_rows.tolist() == [53] and r.average_rows == 5
    assert r.sensitivity == pytest.approx(5 * delta_sz(*BOUNDS))
    np.testing.assert_allclose(r.sigma_s, r.sensitivity * bayesdp.privacy.analytic_gaussian_sigma(
        EPS, DELTA), rtol=1e-12)
    assert r.dp_claim_valid is True
    assert "average_rows=5" in r.dp_claim_note and "5 x the per-row" in r.dp_claim_note
    # the noise draws do not depend on the grouping: same seed, same noise as without averaging
    plain0 = bayesdp.release(np.zeros_like(X), np.zeros_like(y), epsilon=EPS, delta=DELTA,
                             bounds=BOUNDS, seed=11, include_yty=False)
    np.testing.assert_allclose(r0.S_hat / r0.sigma_s[0], plain0.S_hat / plain0.sigma_s[0],
                               rtol=1e-12)


def test_averaged_scatter_is_wishart_with_the_number_of_groups():
    """x ~ N(0, Sigma): each group's sum / sqrt(k) is N(0, Sigma), so S_av ~ Wishart(m, Sigma)
    with m = floor(n / k), not n / k: mean m Sigma and Var(S_11) = 2 m Sigma_11^2. 1500 noiseless
    releases (eps = 1e12) of 29 rows in groups of 5 (m = 5, 4 rows left over). The release's n
    is m, and the model data the fits use take it."""
    from bayesdp.models import regression as R

    rng = np.random.default_rng(4)
    L = np.array([[1.0, 0.0], [0.6, 0.5]])
    Sigma = L @ L.T
    reps, m = 1500, 5
    s11, s12 = [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # small samples can look uncentred
        for rep in range(reps):
            X = rng.standard_normal((29, 2)) @ L.T
            r = bayesdp.release(X, np.zeros(29), epsilon=1e12, delta=DELTA, bounds=(50.0, 1.0),
                                seed=rep, average_rows=5)
            s11.append(r.S_hat[0, 0, 0])
            s12.append(r.S_hat[0, 0, 1])
    s11, s12 = np.array(s11), np.array(s12)
    se = math.sqrt(2 * m * Sigma[0, 0] ** 2 / reps)
    assert abs(s11.mean() - m * Sigma[0, 0]) < 4 * se
    assert abs(s11.mean() - 29 / 5 * Sigma[0, 0]) > 6 * se  # df n/k would be visibly wrong
    assert abs(s12.mean() - m * Sigma[0, 1]) < 4 * math.sqrt(
        m * (Sigma[0, 1] ** 2 + Sigma[0, 0] * Sigma[1, 1]) / reps)
    assert s11.var() == pytest.approx(2 * m * Sigma[0, 0] ** 2, rel=0.2)
    assert r.n.tolist() == [m] and r.n_rows.tolist() == [29]
    data = R.model_data(r, bayesdp.Priors.paper().resolve(r))
    assert np.asarray(data.n).tolist() == [float(m)]


def test_file_round_trip_combine_and_bad_fields(tmp_path):
    rng = np.random.default_rng(5)
    X, y = rows_in_ball(rng, 70, 2, *BOUNDS)
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=2)
    r = bayesdp.release(X, y, nodes=2, average_rows=4, **kw)
    p = r.save(tmp_path / "r.json")
    doc = json.loads(p.read_text())
    assert doc["average_rows"] == 4
    assert [h["n_rows"] for h in doc["holders"]] == r.n_rows.tolist()
    assert [h["n"] for h in doc["holders"]] == (r.n_rows // 4).tolist()
    back = bayesdp.load_release(p)
    assert back.average_rows == 4 and back.n_rows.tolist() == r.n_rows.tolist()
    assert back.dp_claim_note == r.dp_claim_note
    plain = bayesdp.release(X, y, **kw)
    assert "average_rows" not in plain.to_dict() and plain.n_rows is None
    other = bayesdp.release(X[:40], y[:40], average_rows=5, **kw)
    with pytest.raises(CombineError, match="average_rows"):
        bayesdp.combine_releases(r, other)
    same = bayesdp.release(X[:40], y[:40], average_rows=4, **kw)
    both = bayesdp.combine_releases(r, same)
    assert both.n_rows.tolist() == r.n_rows.tolist() + [40]
    for path, value, match in [(("holders", 0, "n_rows"), int(r.n[0]) * 4 + 4, "n_rows"),
                               (("average_rows",), 0, "average_rows"),
                               (("average_rows",), True, "average_rows"),
                               (("holders", 0, "n_rows"), "10", "n_rows")]:
        bad = json.loads(p.read_text())
        target = bad
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        (tmp_path / "bad.json").write_text(json.dumps(bad))
        with pytest.raises(ReleaseFormatError, match=match):
            bayesdp.load_release(tmp_path / "bad.json")


def test_too_few_rows_for_a_group_and_bad_k():
    rng = np.random.default_rng(6)
    X, y = rows_in_ball(rng, 9, 2, *BOUNDS)
    kw = dict(epsilon=EPS, delta=DELTA, bounds=BOUNDS, seed=1)
    with pytest.raises(BayesdpInputError, match="fewer than 10 rows"):
        bayesdp.release(X, y, average_rows=10, **kw)
    for bad in (0, 2.5, True, "3"):
        with pytest.raises(BayesdpInputError, match="average_rows"):
            bayesdp.release(X, y, average_rows=bad, **kw)


def test_release_file_with_averaging_matches_in_memory(tmp_path):
    rng = np.random.default_rng(7)
    X = rng.integers(-3, 4, size=(61, 2)).astype(float)
    y = rng.integers(-9, 10, size=61).astype(float)
    path = tmp_path / "d.csv"
    pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "y": y}).to_csv(path, index=False)
    kw = dict(epsilon=EPS, delta=DELTA, bounds=(10.0, 20.0), nodes=3, seed=2, average_rows=4)
    rf = bayesdp.releases.release_file(path, chunksize=7, **kw)
    rm = bayesdp.release(X, y, feature_names=["a", "b"], **kw)
    assert np.array_equal(rf.S_hat, rm.S_hat) and np.array_equal(rf.z_hat, rm.z_hat)
    assert rf.n_rows.tolist() == rm.n_rows.tolist() and rf.n.tolist() == rm.n.tolist()


def test_averaging_with_an_intercept():
    """The ones column sums to sqrt(k) per group: S_hat[0, 0] = m k + noise, and the sensitivity
    is max(k Delta_1, the swap bound)."""
    rng = np.random.default_rng(8)
    X, y = rows_in_ball(rng, 42, 2, *BOUNDS)
    kw = dict(epsilon=1e12, delta=DELTA, bounds=BOUNDS, seed=3, average_rows=4, intercept=True,
              include_yty=False)
    r = bayesdp.release(X, y, **kw)
    assert r.S_hat[0, 0, 0] == pytest.approx(10 * 4, abs=1e-3)
    perm = np.random.default_rng([3, GROUPING_STREAM]).permutation(42)[:40]
    np.testing.assert_allclose(r.S_hat[0, 0, 1:], X[perm].sum(0) / 2.0 * 2.0, atol=1e-3)
    row = bayesdp.privacy.sensitivity_release(*BOUNDS, intercept=True)
    assert r.sensitivity == pytest.approx(4 * row)
