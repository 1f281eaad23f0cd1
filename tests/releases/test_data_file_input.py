"""Data files (and DataFrames) whose columns cannot be released as they stand are refused with a
BayesdpInputError naming the file, the column and what is wrong (the command: exit status 2, one
line, no traceback, no release file written), instead of publishing names that are not in the
file or releasing dates as nanoseconds:

- repeated column names (Parquet: a broadcast error; CSV: pandas' "a.1" published) and empty
  ones (CSV: pandas' "Unnamed: 1" published);
- a file named .parquet that is not Parquet (a raw pyarrow error);
- date, time and duration columns (read as counts of nanoseconds since 1970, all rows clipped)
  and text columns, by their type; booleans are read as 0/1 (a 0/1 indicator is the usual
  coding of a yes/no regressor, and its value depends on no unit or origin).
"""

import gzip

import numpy as np
import pandas as pd
import pytest

import bayesdp
from bayesdp.cli import main
from bayesdp.errors import BayesdpInputError
from bayesdp.releases import data_files

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

KW = dict(epsilon=1.0, delta=1e-5, bounds=(3.0, 3.0), seed=3)
N = 40


@pytest.fixture()
def cols():
    rng = np.random.default_rng(7)
    return {"a": rng.normal(size=N), "b": rng.normal(size=N), "y": rng.normal(size=N)}


def csv_text(header, cols):
    rows = zip(*cols.values())
    return header + "\n" + "\n".join(",".join(repr(float(v)) for v in r) for r in rows) + "\n"


def cli_release(path, tmp_path, capsys, *extra):
    """(exit status, stderr, whether a release file was written) of ``bayesdp release``."""
    out = tmp_path / "r.json"
    status = main(["release", str(path), "--epsilon", "1", "--delta", "1e-5", "--bounds", "3",
                   "3", "--seed", "0", *extra, "--out", str(out)])
    err = capsys.readouterr().err
    return status, err, out.exists()


def assert_refused(status, err, written, *words):
    assert status == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert "unexpected" not in err, err
    for w in words:
        assert w in err, (w, err)
    assert not written


# 1. repeated column names in Parquet


def test_parquet_repeated_column_names_are_refused_naming_them(tmp_path, cols, capsys):
    p = tmp_path / "dup.parquet"
    table = pa.table([cols["a"], cols["b"], cols["y"]], names=["a", "a", "y"])
    pq.write_table(table, p)
    with pytest.raises(BayesdpInputError, match=r"dup\.parquet: repeated column name \('a' at "
                                                r"columns \[0, 1\]"):
        bayesdp.releases.release_file(p, **KW)
    # also when the repeated name is the response's
    p2 = tmp_path / "dup_y.parquet"
    pq.write_table(pa.table([cols["a"], cols["y"], cols["y"]], names=["a", "y", "y"]), p2)
    with pytest.raises(BayesdpInputError, match="repeated column name .'y'"):
        bayesdp.releases.release_file(p2, y_column="y", **KW)
    assert_refused(*cli_release(p, tmp_path, capsys), "dup.parquet", "repeated column name", "'a'")


def test_parquet_empty_column_name_is_refused(tmp_path, cols):
    p = tmp_path / "blank.parquet"
    pq.write_table(pa.table([cols["a"], cols["b"], cols["y"]], names=["a", "", "y"]), p)
    with pytest.raises(BayesdpInputError, match=r"blank\.parquet: column 1 \(counting from 0\) "
                                                "has an empty name"):
        bayesdp.releases.release_file(p, **KW)


# 2. a file named .parquet that is not Parquet


@pytest.mark.parametrize("content", [b"hello", b"", b"a,b,y\n1,2,3\n4,5,6\n" * 20])
def test_not_parquet_is_a_named_input_error(tmp_path, capsys, content):
    p = tmp_path / "x.parquet"
    p.write_bytes(content)
    with pytest.raises(BayesdpInputError, match=r"x\.parquet: not a readable Parquet file"):
        bayesdp.releases.release_file(p, **KW)
    assert_refused(*cli_release(p, tmp_path, capsys), "x.parquet", "not a readable Parquet file")


# 3. column types that are not numbers


def _frame_with(cols, t):
    return pd.DataFrame({"a": cols["a"], "t": t, "y": cols["y"]})


TEMPORAL = {
    "timestamp": lambda: pd.date_range("2020-01-01", periods=N, freq="D"),
    "timestamp_tz": lambda: pd.date_range("2020-01-01", periods=N, freq="h", tz="UTC"),
    "date": lambda: pd.date_range("2020-01-01", periods=N, freq="D").date,
    "duration": lambda: pd.to_timedelta(np.arange(N), unit="s"),
}


@pytest.mark.parametrize("kind", sorted(TEMPORAL))
def test_parquet_date_time_and_duration_columns_are_refused_by_type(tmp_path, cols, kind):
    p = tmp_path / f"{kind}.parquet"
    _frame_with(cols, TEMPORAL[kind]()).to_parquet(p, index=False)
    with pytest.raises(BayesdpInputError, match=rf"{kind}\.parquet: non-numeric values in "
                                                r"column\(s\) 't' of type (timestamp|date32|"
                                                r"duration).*date, time or duration"):
        bayesdp.releases.release_file(p, **KW)


def test_parquet_time_of_day_column_is_refused(tmp_path, cols):
    p = tmp_path / "time.parquet"
    t = pa.array([(i * 1_000_000) for i in range(N)], pa.time64("us"))
    pq.write_table(pa.table({"a": cols["a"], "t": t, "y": cols["y"]}), p)
    with pytest.raises(BayesdpInputError, match="'t' of type time64"):
        bayesdp.releases.release_file(p, **KW)


def test_parquet_timestamp_response_is_refused_naming_it(tmp_path, cols):
    p = tmp_path / "ty.parquet"
    pd.DataFrame({"a": cols["a"], "b": cols["b"],
                  "when": TEMPORAL["timestamp"]()}).to_parquet(p, index=False)
    with pytest.raises(BayesdpInputError, match=r"'when' \(y_column\) of type timestamp"):
        bayesdp.releases.release_file(p, **KW)


def test_parquet_timestamp_via_cli_exits_2_and_writes_nothing(tmp_path, cols, capsys):
    p = tmp_path / "ts.parquet"
    _frame_with(cols, TEMPORAL["timestamp"]()).to_parquet(p, index=False)
    assert_refused(*cli_release(p, tmp_path, capsys), "ts.parquet", "'t' of type timestamp")


def test_parquet_text_column_is_refused_even_when_it_holds_numbers(tmp_path, cols):
    # numbers stored as text: the file says they are text; pandas would parse them silently
    p = tmp_path / "txt.parquet"
    _frame_with(cols, [f"{v:.3f}" for v in cols["b"]]).to_parquet(p, index=False)
    with pytest.raises(BayesdpInputError, match=r"non-numeric values in column\(s\) 't' of "
                                                "type (large_)?string"):
        bayesdp.releases.release_file(p, **KW)


def test_node_column_is_not_type_checked_as_a_number(tmp_path, cols):
    # holder labels are not released as numbers: text labels are fine there
    p = tmp_path / "node.parquet"
    site = np.array(["site_a", "site_b"] * (N // 2))
    pd.DataFrame({"a": cols["a"], "y": cols["y"], "site": site}).to_parquet(p, index=False)
    rel = bayesdp.releases.release_file(p, node_column="site", **KW)
    assert rel.feature_names == ("a",) and rel.n.tolist() == [N // 2, N // 2]


def test_parquet_booleans_are_read_as_0_1_by_pyarrow(tmp_path, cols, monkeypatch):
    flag = cols["b"] > 0
    p = tmp_path / "bool.parquet"
    _frame_with(cols, flag).to_parquet(p, index=False)

    def refuse(*args, **kwargs):
        raise AssertionError("the pandas reader was used for a boolean Parquet column")

    monkeypatch.setattr(data_files, "_iter_chunks", refuse)
    rf = bayesdp.releases.release_file(p, **KW)
    rm = bayesdp.release(np.column_stack([cols["a"], flag.astype(float)]), cols["y"],
                         feature_names=["a", "t"], **KW)
    assert rf.feature_names == ("a", "t")
    np.testing.assert_allclose(rf.S_hat, rm.S_hat, rtol=0, atol=1e-9)
    np.testing.assert_allclose(rf.z_hat, rm.z_hat, rtol=0, atol=1e-9)


def test_parquet_missing_boolean_is_a_missing_value_not_text(tmp_path, cols):
    p = tmp_path / "bool_null.parquet"
    t = pa.array([None if i == 5 else bool(i % 2) for i in range(N)], pa.bool_())
    pq.write_table(pa.table({"a": cols["a"], "t": t, "y": cols["y"]}), p)
    with pytest.raises(BayesdpInputError, match=r"NaN or infinite values in 1 rows \(first row "
                                                r"5\)"):
        bayesdp.releases.release_file(p, **KW)


def test_parquet_decimal_and_categories_of_numbers_are_numbers(tmp_path, cols):
    import decimal

    dec = [decimal.Decimal(f"{v:.2f}") for v in cols["b"]]
    p = tmp_path / "dec.parquet"
    pq.write_table(pa.table({"a": cols["a"], "t": pa.array(dec, pa.decimal128(6, 2)),
                             "y": cols["y"]}), p)
    rf = bayesdp.releases.release_file(p, **KW)
    rm = bayesdp.release(np.column_stack([cols["a"], [float(v) for v in dec]]), cols["y"],
                         feature_names=["a", "t"], **KW)
    np.testing.assert_allclose(rf.S_hat, rm.S_hat, rtol=0, atol=1e-9)
    p2 = tmp_path / "cat.parquet"
    level = np.round(cols["b"]).clip(-1, 1)
    _frame_with(cols, pd.Categorical(level)).to_parquet(p2, index=False)
    rf2 = bayesdp.releases.release_file(p2, **KW)
    rm2 = bayesdp.release(np.column_stack([cols["a"], level]), cols["y"],
                          feature_names=["a", "t"], **KW)
    np.testing.assert_allclose(rf2.S_hat, rm2.S_hat, rtol=0, atol=1e-9)


# 4. CSV headers: names as written, distinct and not empty


@pytest.mark.parametrize("header, words", [
    ("a,a,y", ["repeated column name", "'a' at columns [0, 1]"]),
    ("a,,y", ["column 1 (counting from 0) has an empty name"]),
    ("a, ,y", ["column 1 (counting from 0) has an empty name"]),
])
def test_csv_header_repeated_or_empty_names_are_refused(tmp_path, cols, capsys, header, words):
    p = tmp_path / "h.csv"
    p.write_text(csv_text(header, cols))
    with pytest.raises(BayesdpInputError) as info:
        bayesdp.releases.release_file(p, **KW)
    for w in words:
        assert w in str(info.value)
    assert "h.csv: header" in str(info.value)
    assert_refused(*cli_release(p, tmp_path, capsys), "h.csv: header", *words)


def test_csv_trailing_comma_in_header_is_an_empty_name(tmp_path, cols):
    p = tmp_path / "trail.csv"
    text = csv_text("a,b,y,", cols).replace("\n", ",\n").replace("y,,\n", "y,\n")
    p.write_text(text)
    with pytest.raises(BayesdpInputError, match=r"column 3 \(counting from 0\) has an empty "
                                                "name"):
        bayesdp.releases.release_file(p, **KW)


def test_compressed_csv_header_is_read_and_checked(tmp_path, cols):
    # the header check reads the file as the chunks do, decompressed
    good = tmp_path / "good.csv.gz"
    good.write_bytes(gzip.compress(csv_text("a,b,y", cols).encode()))
    rel = bayesdp.releases.release_file(good, **KW)
    assert rel.feature_names == ("a", "b") and rel.n.tolist() == [N]
    dup = tmp_path / "dup.csv.gz"
    dup.write_bytes(gzip.compress(csv_text("a,a,y", cols).encode()))
    with pytest.raises(BayesdpInputError, match="dup.csv.gz: header: repeated column name"):
        bayesdp.releases.release_file(dup, **KW)
    nums = tmp_path / "nums.csv.gz"
    nums.write_bytes(gzip.compress(csv_text("1.5,2,3", cols).encode()))
    with pytest.raises(BayesdpInputError, match="looks like a data row"):
        bayesdp.releases.release_file(nums, **KW)


def test_csv_chunks_check_the_header_themselves(tmp_path, cols):
    # the reader refuses a repeated name even when its caller skipped check_csv_header
    p = tmp_path / "dup.csv"
    p.write_text(csv_text("a,a,y", cols))
    with pytest.raises(BayesdpInputError, match="repeated column name"):
        list(data_files.iter_stacked(p, "infer", 10, None, None))


def test_csv_bool_column_is_0_1(tmp_path, cols):
    flag = cols["b"] > 0
    p = tmp_path / "bool.csv"
    p.write_text("a,t,y\n" + "\n".join(f"{float(a)!r},{f},{float(y)!r}" for a, f, y in
                                       zip(cols["a"], flag, cols["y"])) + "\n")
    rf = bayesdp.releases.release_file(p, **KW)
    rm = bayesdp.release(np.column_stack([cols["a"], flag.astype(float)]), cols["y"],
                         feature_names=["a", "t"], **KW)
    np.testing.assert_allclose(rf.S_hat, rm.S_hat, rtol=0, atol=1e-9)


# the same through bayesdp.release (DataFrames) and the chunk converter Dask shares


def test_dataframe_repeated_or_empty_column_names_are_refused_naming_x_columns(cols):
    X = pd.DataFrame(np.column_stack([cols["a"], cols["b"]]), columns=["a", "a"])
    with pytest.raises(BayesdpInputError, match=r"X\.columns: repeated feature name \('a'"):
        bayesdp.release(X, cols["y"], **KW)
    X.columns = ["a", ""]
    with pytest.raises(BayesdpInputError, match=r"X\.columns: feature 1 .* empty name"):
        bayesdp.release(X, cols["y"], **KW)
    with pytest.raises(BayesdpInputError, match="feature_names: repeated feature name"):
        bayesdp.release(X.to_numpy(), cols["y"], feature_names=["u", "u"], **KW)


@pytest.mark.parametrize("kind", sorted(TEMPORAL))
def test_dataframe_date_and_duration_columns_are_refused_naming_them(cols, kind):
    X = pd.DataFrame({"a": cols["a"], "t": TEMPORAL[kind]()})
    with pytest.raises(BayesdpInputError, match=r"X: non-numeric values in column\(s\) 't' of "
                                                "type .*date, time or duration"):
        bayesdp.release(X, cols["y"], **KW)
    # a frame of dates only (NumPy would turn it into nanoseconds) and explicit names
    only = pd.DataFrame({"t": TEMPORAL[kind]()})
    with pytest.raises(BayesdpInputError, match="'t' of type"):
        bayesdp.release(only, cols["y"], feature_names=["t"], **KW)


def test_dataframe_text_and_datetime_arrays_are_refused(cols):
    X = pd.DataFrame({"a": cols["a"], "t": [f"{v:.3f}" for v in cols["b"]]})
    with pytest.raises(BayesdpInputError, match="'t' of type"):
        bayesdp.release(X, cols["y"], **KW)
    y_days = pd.Series(pd.to_timedelta(np.arange(N), unit="D"), name="days")
    with pytest.raises(BayesdpInputError, match="y: non-numeric values in column.*'y' of type "
                                                "timedelta64"):
        bayesdp.release(cols["a"][:, None], y_days, **KW)
    dates = np.array(["2020-01-01"] * N, dtype="datetime64[ns]")[:, None]
    with pytest.raises(BayesdpInputError, match="X holds values of type datetime64"):
        bayesdp.release(dates, cols["y"], **KW)


def test_dataframe_booleans_are_0_1(cols):
    flag = cols["b"] > 0
    r1 = bayesdp.release(pd.DataFrame({"a": cols["a"], "t": flag}), cols["y"], **KW)
    r2 = bayesdp.release(np.column_stack([cols["a"], flag.astype(float)]), cols["y"],
                         feature_names=["a", "t"], **KW)
    np.testing.assert_array_equal(r1.S_hat, r2.S_hat)


def test_frame_rows_refuses_datetimes_naming_them(cols):
    # frame_rows converts the chunks of the pandas reader and the partitions of release_dask
    chunk = _frame_with(cols, TEMPORAL["timestamp"]())
    with pytest.raises(BayesdpInputError, match=r"part 3: non-numeric values in column\(s\) "
                                                r"'t' of type datetime64.* in rows 0\.\.9"):
        data_files.frame_rows(chunk, ["a", "t"], "y", "part 3", " in rows 0..9")


def test_frame_rows_refuses_complex_numbers(cols):
    # NumPy would drop the imaginary part with only a warning
    chunk = pd.DataFrame({"a": cols["a"] + 1j, "y": cols["y"]})
    with pytest.raises(BayesdpInputError, match="'a' of type complex128"):
        data_files.frame_rows(chunk, ["a"], "y", "part 0")
