"""release_file on Parquet: pyarrow reads the numeric columns straight into one [1, X, y] buffer
and PartialStatistics.add_stacked sums it with one Gram product per holder and chunk.

Against bayesdp.release on the same rows in memory with the same seed (so the same noise): the
counts (n, n_clipped) and holders must be equal exactly and S_hat, z_hat, y^T y_hat to 1e-9
relative to the largest entry; the two sum the same clipped rows in another order, which
changes a sum of n <= 500 terms of size <= B^2 by ~ n * 2^-52 of its size (~1e-13 relative), so
1e-9 leaves room for rounding only (one row more or less changes S by ~1, far more).
"""

import warnings

import numpy as np
import pandas as pd
import pytest

import bayesdp
from dp_helpers import split_of
from bayesdp.errors import BayesdpInputError
from bayesdp.releases import PartialStatistics
from bayesdp.releases import data_files

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

BOUNDS = (2.5, 3.0)
KW = dict(epsilon=1.0, delta=1e-5, bounds=BOUNDS, seed=4)
REL = 1e-9


@pytest.fixture(scope="module")
def rows():
    rng = np.random.default_rng(12)
    n = 500
    X = rng.normal(size=(n, 3)) * 1.3  # ~15% of the rows outside B_x = 2.5
    X[:, 2] = rng.integers(-2, 3, size=n)  # an integer column
    y = X @ np.array([0.8, -0.4, 0.3]) + rng.normal(size=n)
    who = rng.choice(np.array(["site_b", "site_a", "site_c"]), size=n)
    return X, y, who


def frame(X, y, who=None):
    df = pd.DataFrame({"a": X[:, 0], "target": y, "b": X[:, 1],
                       "c": X[:, 2].astype(np.int64)})
    if who is not None:
        df["who"] = who
    return df


def assert_close(rf, rm):
    assert rf.holder_names == rm.holder_names
    assert rf.n.tolist() == rm.n.tolist()
    assert rf.n_clipped.tolist() == rm.n_clipped.tolist()
    for a, b in ((rf.S_hat, rm.S_hat), (rf.z_hat, rm.z_hat)):
        np.testing.assert_allclose(a, b, rtol=0, atol=REL * np.abs(b).max())
    if rm.yty_hat is not None:
        np.testing.assert_allclose(rf.yty_hat, rm.yty_hat, rtol=REL)
    assert np.array_equal(rf.sigma_s, rm.sigma_s)


@pytest.fixture()
def no_pandas_reader(monkeypatch):
    """Fail if the file goes through the pandas reader instead of the pyarrow one."""
    def refuse(*args, **kwargs):
        raise AssertionError("the pandas reader was used for a numeric Parquet file")
    monkeypatch.setattr(data_files, "_iter_chunks", refuse)


@pytest.mark.parametrize("nodes", [1, 3])
@pytest.mark.parametrize("chunksize", [37, 100_000])
def test_parquet_equals_in_memory(tmp_path, rows, nodes, chunksize, no_pandas_reader):
    X, y, _ = rows
    path = tmp_path / "d.parquet"
    # several row groups of another size than the chunks
    pq.write_table(pa.Table.from_pandas(frame(X, y), preserve_index=False), path,
                   row_group_size=120)
    kw = dict(KW, nodes=nodes, include_yty=True)
    rf = bayesdp.releases.release_file(path, y_column="target", chunksize=chunksize, **kw)
    Xm = X[:, [0, 1, 2]]  # the features in file order: a, b, c
    rm = bayesdp.release(pd.DataFrame(Xm, columns=["a", "b", "c"]), y, **kw)
    assert rf.feature_names == ("a", "b", "c")
    assert rf.n_clipped.sum() > 0
    if nodes > 1:
        assert rf.n.tolist() == np.bincount(split_of(len(y), nodes, KW["seed"])).tolist()
    assert_close(rf, rm)


def test_parquet_node_column_and_y_by_index(tmp_path, rows, no_pandas_reader):
    X, y, who = rows
    path = tmp_path / "d.parquet"
    frame(X, y, who).to_parquet(path, index=False)
    rf = bayesdp.releases.release_file(path, y_column=1, node_column="who", chunksize=64, **KW)
    rm = bayesdp.release(X, y, nodes=who, **KW)
    assert rf.holder_names == tuple(pd.unique(who))  # in order of first appearance
    assert_close(rf, rm)


@pytest.mark.parametrize("design", [dict(intercept=True), dict(average_rows=2)])
def test_parquet_designs(tmp_path, rows, design, no_pandas_reader):
    X, y, _ = rows
    path = tmp_path / "d.parquet"
    frame(X, y).to_parquet(path, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # averaging's note on the sensitivity
        rf = bayesdp.releases.release_file(path, y_column="target", chunksize=50, nodes=2,
                                           **design, **KW)
        rm = bayesdp.release(X, y, nodes=2, **design, **KW)
    assert_close(rf, rm)


def test_parquet_index_column_is_not_a_feature(tmp_path, rows, no_pandas_reader):
    X, y, _ = rows
    df = frame(X, y)
    df.index = np.arange(len(y)) * 3 + 7  # stored by pandas as a column of the file
    path = tmp_path / "d.parquet"
    df.to_parquet(path)
    assert "__index_level_0__" in pq.ParquetFile(path).schema_arrow.names
    rf = bayesdp.releases.release_file(path, y_column="target", **KW)
    assert rf.feature_names == ("a", "b", "c")
    assert_close(rf, bayesdp.release(X, y, **KW))


def test_parquet_uncentred_warning_as_in_memory(tmp_path, rows):
    """The column sums of the warning come from the Gram product: same columns named."""
    X, y, _ = rows
    Xs = X + np.array([0.0, 5.0, 0.0])
    path = tmp_path / "d.parquet"
    frame(Xs, y).to_parquet(path, index=False)
    with pytest.warns(UserWarning, match="far from centred") as wf:
        bayesdp.releases.release_file(path, y_column="target", chunksize=64, **KW)
    with pytest.warns(UserWarning, match="far from centred") as wm:
        bayesdp.release(pd.DataFrame(Xs, columns=["a", "b", "c"]), y, **KW)
    msg = [str(w.message) for w in wf if "centred" in str(w.message)]
    assert msg == [str(w.message) for w in wm if "centred" in str(w.message)]
    assert "b (mean" in msg[0] and "a (mean" not in msg[0]


def test_parquet_errors(tmp_path, rows):
    X, y, who = rows
    df = frame(X, y)
    p = tmp_path / "nan.parquet"
    bad = df.copy()
    bad.loc[130, "b"] = np.nan
    bad.to_parquet(p, index=False)
    with pytest.raises(BayesdpInputError, match=r"rows 100\.\.199: .*NaN or infinite values in 1 "
                                                r"rows \(first row 30\)"):
        bayesdp.releases.release_file(p, y_column="target", chunksize=100, **KW)
    p = tmp_path / "null_int.parquet"
    table = pa.Table.from_pandas(df, preserve_index=False)
    c = table.column("c").to_pylist()
    c[3] = None
    table = table.set_column(table.schema.get_field_index("c"), "c", pa.array(c, pa.int64()))
    pq.write_table(table, p)
    with pytest.raises(BayesdpInputError, match="NaN or infinite"):
        bayesdp.releases.release_file(p, y_column="target", **KW)
    p = tmp_path / "text.parquet"
    txt = df.copy()
    txt["b"] = txt["b"].map("about {:.3f}".format)
    txt.to_parquet(p, index=False)
    with pytest.raises(BayesdpInputError, match=r"non-numeric values in column\(s\) 'b'"):
        bayesdp.releases.release_file(p, y_column="target", **KW)
    p = tmp_path / "ok.parquet"
    frame(X, y, who).to_parquet(p, index=False)
    with pytest.raises(BayesdpInputError, match="y_column='nope' is not a column"):
        bayesdp.releases.release_file(p, y_column="nope", node_column="who", **KW)
    with pytest.raises(BayesdpInputError, match="node_column='whom' is not a column"):
        bayesdp.releases.release_file(p, y_column="target", node_column="whom", **KW)
    p = tmp_path / "no_label.parquet"
    w = who.astype(object)
    w[77] = None
    frame(X, y, w).to_parquet(p, index=False)
    with pytest.raises(BayesdpInputError, match="node_column: missing holder label"):
        bayesdp.releases.release_file(p, y_column="target", node_column="who", **KW)


def test_add_stacked_equals_add(rows):
    X, y, who = rows
    for kw in (dict(), dict(intercept=True)):
        A = np.asfortranarray(np.column_stack([np.ones(len(y)), X, y]))
        a = PartialStatistics(3, BOUNDS, **kw).add(X, y, who)
        b = PartialStatistics(3, BOUNDS, **kw).add_stacked(A, who)
        assert a.holders == b.holders
        assert a.n.tolist() == b.n.tolist() and a.n_clipped.tolist() == b.n_clipped.tolist()
        for u, v in ((a.xtx, b.xtx), (a.xty, b.xty), (a.yty, b.yty),
                     (a.column_sums, b.column_sums)):
            np.testing.assert_allclose(v, u, rtol=0, atol=REL * np.abs(u).max())
        # A now holds the clipped rows
        assert (np.linalg.norm(A[:, 1:4], axis=1) <= BOUNDS[0] * (1 + 1e-12)).all()
    with pytest.raises(BayesdpInputError, match="contiguous columns"):
        PartialStatistics(3, BOUNDS).add_stacked(np.ones((4, 5)))  # C order
    with pytest.raises(BayesdpInputError, match="5 contiguous columns"):
        PartialStatistics(3, BOUNDS).add_stacked(np.ones((4, 4), order="F"))
