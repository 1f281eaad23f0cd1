"""Partial statistics (bayesdp.releases.PartialStatistics) and their map/reduce on Dask
(release_dask).

Against the one-pass in-memory sums: merges in any grouping, chunked feeding and Dask partitions
must give the same n and clip counts exactly and the same float sums to rounding. The tolerance
of the float sums: each entry is a sum of n terms of size at most B^2 (rows clipped to the
bounds), so two summation orders differ by at most ~ n * 2^-52 * n B^2; with n <= 5000 and
B <= 3 we check |difference| <= 1e-9 (about 50x below that bound, far above what rounding
gives, and far below any real error: one row more or less changes the sums by ~1).
Releases made from the same sums with the same seed must be identical to the byte.
"""

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import bayesdp
from dp_helpers import dask_split_of, split_of
from bayesdp import privacy
from bayesdp.errors import BayesdpInputError
from bayesdp.releases import PartialStatistics, ReleaseSpec
from bayesdp.releases.mechanism import secure_plan

BOUNDS = (2.5, 3.0)


def _secure(epsilon, **kw):
    """The spec of a secure release at (epsilon, 1e-5) with BOUNDS."""
    return ReleaseSpec(epsilon=epsilon, delta=1e-5, bounds=BOUNDS, noise="secure", **kw)


ATOL = 1e-9
KW = dict(epsilon=1.0, delta=1e-5, bounds=BOUNDS, seed=11)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(5)
    n, d = 5000, 3
    X = rng.normal(size=(n, d)) * 1.2
    y = X @ np.array([1.0, -0.5, 0.3]) + rng.normal(size=n)
    labels = rng.choice(np.array(["clinic_b", "clinic_a", "clinic_c"]), size=n)
    return X, y, labels


def one_pass(X, y, labels, **kw):
    return PartialStatistics(X.shape[1], BOUNDS, **kw).add(X, y, labels)


def assert_same_sums(a, b):
    assert a.holders == b.holders
    np.testing.assert_array_equal(a.n, b.n)
    np.testing.assert_array_equal(a.n_clipped, b.n_clipped)
    np.testing.assert_allclose(a.xtx, b.xtx, rtol=0, atol=ATOL)
    np.testing.assert_allclose(a.xty, b.xty, rtol=0, atol=ATOL)
    np.testing.assert_allclose(a.yty, b.yty, rtol=0, atol=ATOL)


def parts(X, y, labels, cuts, **kw):
    edges = [0, *cuts, len(y)]
    return [one_pass(X[a:b], y[a:b], labels[a:b], **kw) for a, b in zip(edges, edges[1:])]


def test_sums_are_the_clipped_sums(data):
    X, y, labels = data
    p = one_pass(X, y, labels)
    Xc, yc, clipped = privacy.clip_rows(X, y, *BOUNDS)
    for j, lab in enumerate(p.holders):
        m = labels == lab
        np.testing.assert_allclose(p.xtx[j], Xc[m].T @ Xc[m], rtol=0, atol=ATOL)
        np.testing.assert_allclose(p.xty[j], Xc[m].T @ yc[m], rtol=0, atol=ATOL)
        np.testing.assert_allclose(p.yty[j], yc[m] @ yc[m], rtol=0, atol=ATOL)
        assert p.n[j] == m.sum() and p.n_clipped[j] == clipped[m].sum()
    assert p.holders == list(dict.fromkeys(labels))  # in order of first appearance


def test_merge_is_associative_and_equals_one_pass(data):
    X, y, labels = data
    a, b, c = parts(X, y, labels, [1234, 3001])
    whole = one_pass(X, y, labels)
    assert_same_sums((a + b) + c, whole)
    assert_same_sums(a + (b + c), whole)
    assert_same_sums(a.merge(b).merge(c), (a + b) + c)
    # the inputs are left as they were
    assert_same_sums(a, one_pass(X[:1234], y[:1234], labels[:1234]))


def test_merge_of_holders_seen_in_one_part_only(data):
    X, y, labels = data
    a = one_pass(X[:100], y[:100], np.full(100, "x"))
    b = one_pass(X[100:300], y[100:300], np.full(200, "y"))
    both = one_pass(X[:300], y[:300], np.array(["x"] * 100 + ["y"] * 200))
    assert_same_sums(a + b, both)
    assert (b + a).holders == ["y", "x"]


def test_chunked_equals_in_memory(data):
    X, y, labels = data
    chunked = PartialStatistics(X.shape[1], BOUNDS)
    for lo in range(0, len(y), 7):
        chunked.add(X[lo:lo + 7], y[lo:lo + 7], labels[lo:lo + 7])
    assert_same_sums(chunked, one_pass(X, y, labels))


def test_clip_counts_add_up(data):
    X, y, labels = data
    ps = parts(X, y, labels, [500, 2500, 4000])
    total = ps[0] + ps[1] + ps[2] + ps[3]
    norms = np.linalg.norm(X, axis=1)
    expected = (norms > BOUNDS[0]) | (np.abs(y) > BOUNDS[1])
    assert total.n_clipped.sum() == expected.sum() > 0
    for j, lab in enumerate(total.holders):
        assert total.n_clipped[j] == sum(p.n_clipped[p.holders.index(lab)] for p in ps)
        assert total.n_clipped[j] == expected[labels == lab].sum()


@pytest.mark.parametrize("intercept", [False, True])
@pytest.mark.parametrize("include_yty", [False, True])
def test_release_from_partial_is_release(data, intercept, include_yty):
    """The same seed gives the release of bayesdp.release byte for byte (count J, random split;
    and labels)."""
    X, y, labels = data
    J = 4
    p = PartialStatistics(X.shape[1], BOUNDS, J, intercept=intercept, split="random")
    p.add(X, y, split_of(len(y), J, KW["seed"]))
    mine = p.release(epsilon=1.0, delta=1e-5, seed=11, include_yty=include_yty)
    ref = bayesdp.release(X, y, nodes=J, intercept=intercept, include_yty=include_yty, **KW)
    _assert_identical(mine, ref)
    q = one_pass(X, y, labels, intercept=intercept)
    _assert_identical(q.release(epsilon=1.0, delta=1e-5, seed=11, include_yty=include_yty),
                      bayesdp.release(X, y, nodes=labels, intercept=intercept,
                                      include_yty=include_yty, **KW))


def _assert_identical(a, b):
    for f in ("S_hat", "z_hat", "n", "n_clipped", "sigma_s", "yty_hat"):
        va, vb = getattr(a, f), getattr(b, f)
        assert (va is None) == (vb is None), f
        if va is not None:
            assert va.tobytes() == vb.tobytes(), f
    da, db = a.to_dict(), b.to_dict()
    for doc in (da, db):
        doc["provenance"].pop("created")
        doc["provenance"].pop("source")
    assert da == db


def test_averaging_merges_exactly(data):
    """average_rows = k keeps the clipped rows; a merge concatenates them, so the release of
    the merged parts (rows in the same order) is the one-pass release, byte for byte."""
    X, y, labels = data
    a, b, c = parts(X, y, labels, [999, 2000], average_rows=3)
    with pytest.raises(BayesdpInputError, match="random groups"):
        a.xtx  # no sums before the grouping
    mine = (a + b + c).release(epsilon=1.0, delta=1e-5, seed=11)
    _assert_identical(mine, bayesdp.release(X, y, nodes=labels, average_rows=3, **KW))


def test_secure_grid_sums_merge_exactly(data):
    X, y, labels = data
    grid = secure_plan(_secure(1.0), BOUNDS, X.shape[1])["grid"]
    a, b = parts(X, y, labels, [2222], grid=grid)
    whole = one_pass(X, y, labels, grid=grid)
    for ka, kb in zip((a + b).grid_sums, whole.grid_sums):
        assert list(ka) == list(kb)  # exact integers
    rel = (a + b).release(epsilon=1.0, delta=1e-5)
    assert rel.noise_mechanism == "discrete_gaussian" and rel.noise_grid == grid
    other = secure_plan(_secure(50.0), BOUNDS, X.shape[1])["grid"]
    assert other != grid
    with pytest.raises(BayesdpInputError, match="grid"):
        one_pass(X, y, labels, grid=grid).release(epsilon=50.0, delta=1e-5)


@pytest.mark.parametrize("change, match", [
    (dict(bounds=(2.0, 3.0)), "bounds"),
    (dict(intercept=True), "intercept"),
    (dict(average_rows=2), "average_rows"),
    (dict(grid=2.0 ** -20), "grid"),
    (dict(feature_names=["a", "b", "c"]), "feature_names"),
    (dict(split="random"), "split"),
])
def test_mismatched_merges_raise(data, change, match):
    X, y, labels = data
    a = one_pass(X[:50], y[:50], labels[:50])
    kw = dict(bounds=BOUNDS) | change
    b = PartialStatistics(3, kw.pop("bounds"), **kw).add(X[50:99], y[50:99], labels[50:99])
    with pytest.raises(BayesdpInputError, match=match):
        a + b
    with pytest.raises(BayesdpInputError, match="different d"):
        a + PartialStatistics(2, BOUNDS)
    with pytest.raises(TypeError):
        a + 1


def test_one_release_only(data):
    X, y, labels = data
    p = one_pass(X, y, labels)
    p.release(epsilon=1.0, delta=1e-5, seed=1)
    for call in (lambda: p.release(epsilon=1.0, delta=1e-5, seed=1),
                 lambda: p.add(X, y, labels), lambda: p + one_pass(X, y, labels)):
        with pytest.raises(BayesdpInputError, match="released already"):
            call()


def test_bad_input_is_named():
    with pytest.raises(BayesdpInputError, match="d must be"):
        PartialStatistics(0, BOUNDS)
    with pytest.raises(BayesdpInputError, match="B_x"):
        PartialStatistics(2, (-1.0, 1.0))
    with pytest.raises(BayesdpInputError, match="contiguous"):
        PartialStatistics(2, BOUNDS, split="contiguous")
    p = PartialStatistics(2, BOUNDS, 2)
    with pytest.raises(BayesdpInputError, match="one holder label per row"):
        p.add(np.zeros((3, 2)), np.zeros(3))
    with pytest.raises(BayesdpInputError, match="NaN"):
        p.add(np.array([[0.0, np.nan]]), np.zeros(1), [0])
    with pytest.raises(BayesdpInputError, match="no rows"):
        PartialStatistics(2, BOUNDS).release(epsilon=1.0, delta=1e-5)


def test_clipping_is_privacy_clip_rows():
    """The clipping of PartialStatistics returns bit for bit what privacy.clip_rows does, in C
    and Fortran order, for rows just inside, on and just outside the bounds and for huge rows;
    the caller's arrays are left as they were."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(3000, 4)) * 1.5
    u = X[:6] / np.linalg.norm(X[:6], axis=1, keepdims=True)
    scale = BOUNDS[0] * np.array([1 - 1e-12, 1.0, 1 + 1e-12, 1 - 1e-9, 1e200, 1e-300])
    X[:6] = u * scale[:, None]
    y = rng.normal(size=3000) * 2
    y[:3] = [BOUNDS[1], -BOUNDS[1] * (1 + 1e-15), 1e300]
    X0, y0 = X.copy(), y.copy()
    for A in (X, np.asfortranarray(X)):
        mine = PartialStatistics(4, BOUNDS)._clip(A, y, overwrite=False)
        for m, r in zip(mine, privacy.clip_rows(A, y, *BOUNDS)):
            assert m.tobytes() == r.tobytes()
    assert X.tobytes() == X0.tobytes() and y.tobytes() == y0.tobytes()
    for bx in (1e-200, 1e200):  # squares out of range: the safe path
        mine = PartialStatistics(4, (bx, 1.0))._clip(X, y, overwrite=False)
        for m, r in zip(mine, privacy.clip_rows(X, y, bx, 1.0)):
            assert m.tobytes() == r.tobytes()


def test_column_sums_are_of_the_clipped_rows(data):
    X, y, labels = data
    Xc, yc, _ = privacy.clip_rows(X, y, *BOUNDS)
    p = parts(X, y, labels, [100, 2600])
    got = (p[0] + p[1] + p[2]).column_sums
    want = np.concatenate([Xc.sum(0), (Xc * Xc).sum(0), [yc.sum(), yc @ yc]])
    np.testing.assert_allclose(got, want, rtol=0, atol=ATOL)


def test_bayesdp_imports_without_dask():
    code = ("import sys; sys.modules['dask'] = None\n"
            "import bayesdp\n"
            "try:\n"
            "    bayesdp.releases.release_dask(None, epsilon=1, delta=1e-5, bounds=(1, 1))\n"
            "except bayesdp.BayesdpInputError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert "pip install bayesdp[dask]" in out


# --- Dask --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def frame(data):
    X, y, labels = data
    df = pd.DataFrame(X, columns=["age", "dose", "weight"])
    df["who"] = labels
    df["y"] = y
    return df


def _dask_checks(frame, data):
    """partial statistics (noiseless) and releases from Dask against the in-memory ones."""
    dd = pytest.importorskip("dask.dataframe")
    da = pytest.importorskip("dask.array")
    X, y, labels = data
    J = 3
    ddf = dd.from_pandas(frame, npartitions=9)
    sizes = ddf.map_partitions(len).compute().tolist()
    ref = PartialStatistics(3, BOUNDS, J).add(X, y, dask_split_of(sizes, J, 3))
    got = bayesdp.releases.partial_statistics_dask(ddf.drop(columns="who"), bounds=BOUNDS,
                                                   nodes=J, split_every=2, seed=3)
    assert_same_sums(got, ref)
    assert got.feature_names == ("age", "dose", "weight")
    got = bayesdp.releases.partial_statistics_dask(ddf, bounds=BOUNDS, node_column="who",
                                                   y_column="y")
    assert_same_sums(got, one_pass(X, y, labels))
    arr = bayesdp.releases.partial_statistics_dask(
        da.from_array(X, chunks=(611, 2)), da.from_array(y, chunks=1000), bounds=BOUNDS,
        nodes=J, seed=3)
    sizes = [611] * (len(y) // 611) + ([len(y) % 611] if len(y) % 611 else [])
    assert_same_sums(arr, PartialStatistics(3, BOUNDS, J).add(X, y, dask_split_of(sizes, J, 3)))
    # the release: same holders, counts and noise; the sums to rounding
    rel = bayesdp.releases.release_dask(ddf, node_column="who", y_column="y", **KW)
    mem = bayesdp.release(frame[["age", "dose", "weight"]], y, nodes=labels, **KW)
    assert rel.holder_names == mem.holder_names and rel.feature_names == mem.feature_names
    np.testing.assert_array_equal(rel.n, mem.n)
    np.testing.assert_array_equal(rel.n_clipped, mem.n_clipped)
    np.testing.assert_allclose(rel.S_hat, mem.S_hat, rtol=0, atol=ATOL)
    np.testing.assert_allclose(rel.z_hat, mem.z_hat, rtol=0, atol=ATOL)


def test_dask_local_scheduler(frame, data):
    _dask_checks(frame, data)


def test_dask_secure_noise_sums_exactly(frame, data):
    """With noise="secure" the partitions' integer grid sums add up to the in-memory ones
    exactly, and the release is on the grid."""
    dd = pytest.importorskip("dask.dataframe")
    X, y, labels = data
    grid = secure_plan(_secure(1.0, intercept=True), BOUNDS, 3)["grid"]
    ddf = dd.from_pandas(frame, npartitions=5)
    got = bayesdp.releases.partial_statistics_dask(ddf, bounds=BOUNDS, node_column="who",
                                                   intercept=True, grid=grid)
    ref = one_pass(X, y, labels, intercept=True, grid=grid)
    assert got.holders == ref.holders
    for a, b in zip(got.grid_sums, ref.grid_sums):
        assert list(a) == list(b)
    rel = bayesdp.releases.release_dask(ddf, epsilon=1.0, delta=1e-5, bounds=BOUNDS,
                                        node_column="who", intercept=True, noise="secure")
    assert rel.noise_grid == grid and np.all(np.rint(rel.S_hat / grid) * grid == rel.S_hat)


def test_dask_distributed_cluster(frame, data):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        _dask_checks(frame, data)


def test_dask_bad_input(frame):
    dd = pytest.importorskip("dask.dataframe")
    ddf = dd.from_pandas(frame, npartitions=2)
    with pytest.raises(BayesdpInputError, match="public bounds"):
        bayesdp.releases.release_dask(ddf, epsilon=1, delta=1e-5, bounds="private",
                                      node_column="who")
    with pytest.raises(BayesdpInputError, match="node_column"):
        bayesdp.releases.release_dask(ddf, epsilon=1, delta=1e-5, bounds=BOUNDS,
                                      nodes=frame["who"].to_numpy())
    with pytest.raises(BayesdpInputError, match="non-numeric.*'who'"):
        bayesdp.releases.release_dask(ddf, epsilon=1, delta=1e-5, bounds=BOUNDS, y_column="y")
    with pytest.raises(BayesdpInputError, match="Dask DataFrame or"):
        bayesdp.releases.release_dask(frame, epsilon=1, delta=1e-5, bounds=BOUNDS)
