"""Releases from tables with a formula and declared per-column bounds (issue 38, docs/tables.md):
the formula's parsing, the encoding against a hand-built design, clamping and its counts,
declared levels, the derived sensitivity against the largest change one adversarial row makes
(with negative controls), the file's record, combining, the three entry points and bad input."""

import itertools
import json
import math
import os
import warnings

import numpy as np
import pandas as pd
import pytest

import bayesdp
from bayesdp import privacy
from bayesdp.errors import BayesdpInputError, CombineError, ReleaseFormatError
from bayesdp.releases import ReleaseSpec, release_file
from bayesdp.releases.formula import TableEncoding, factor_interval
from dp_helpers import vech

EPS, DELTA = 1.0, 1e-5

#: a formula with a transformed response, a public centring, a power, a categorical column and
#: an interaction of the categorical column with a number
FORMULA = "log(y + 1) ~ x + {z - 0.5} + I(z ** 2) + C(g) + C(g):x"
BOUNDS = {"y": (0.0, 100.0), "x": (0.0, 10.0), "z": (-1.0, 2.0), "g": ["a", "b", "c"]}
NAMES = ["x", "z - 0.5", "I(z ** 2)", "C(g)[T.b]", "C(g)[T.c]", "C(g)[T.b]:x", "C(g)[T.c]:x"]


def table(rng, n, wide=1.0):
    """A random table of the formula's columns; ``wide`` > 1 draws values beyond the declared
    ranges (which the encoding clamps)."""
    return pd.DataFrame({
        "y": rng.uniform(-10 * wide, 100 * wide, n) if wide > 1 else rng.uniform(0, 100, n),
        "x": rng.uniform(-wide, 10 * wide, n) if wide > 1 else rng.uniform(0, 10, n),
        "z": rng.uniform(-wide, 2 * wide, n) if wide > 1 else rng.uniform(-1, 2, n),
        "g": rng.choice(["a", "b", "c"], n),
        "other": rng.normal(size=n),  # not in the formula: ignored
    })


def hand_design(t):
    """The design of FORMULA built by hand from the clamped columns."""
    x = np.clip(t["x"].to_numpy(float), 0, 10)
    z = np.clip(t["z"].to_numpy(float), -1, 2)
    b = (t["g"] == "b").to_numpy(float)
    c = (t["g"] == "c").to_numpy(float)
    X = np.column_stack([x, z - 0.5, z ** 2, b, c, b * x, c * x])
    y = np.log(np.clip(t["y"].to_numpy(float), 0, 100) + 1)
    return X, y


@pytest.fixture(scope="module")
def enc():
    return TableEncoding.build(FORMULA, BOUNDS)


# --------------------------------------------------------------------------------------------
# the formula


def test_the_encoding_of_a_formula_names_its_terms(enc):
    assert enc.intercept and enc.response == "log(y + 1)"
    assert list(enc.feature_names) == NAMES
    assert [t["term"] for t in enc.terms] == ["x", "z - 0.5", "I(z ** 2)", "C(g)", "C(g):x"]
    assert enc.factors["C(g)"]["reference"] == "a"  # the first declared level, dropped
    assert enc.numeric_columns == ("y", "x", "z") and enc.categorical_columns == ("g",)
    assert "other" not in enc.columns
    # without an intercept the first categorical block keeps every level
    no = TableEncoding.build("log(y + 1) ~ C(g) + x - 1", BOUNDS)
    assert not no.intercept and list(no.feature_names) == ["C(g)[a]", "C(g)[b]", "C(g)[c]", "x"]
    # an interaction written x * z is x + z + x:z; the first declared level is the reference
    inter = TableEncoding.build("y ~ x * z + C(g)", dict(BOUNDS, g=["c", "a", "b"]))
    assert list(inter.feature_names) == ["x", "z", "C(g)[T.a]", "C(g)[T.b]", "x:z"]


@pytest.mark.parametrize("formula, message", [
    ("y ~ x | z", "parts separated by '|'"),
    ("~ x", "give the response on the left"),
    ("y + x ~ z", "must be one response"),
    ("y ~ .", "formulaic cannot parse it"),
    ("y ~ 1", "no terms besides the intercept"),
    ("y ~ center(x)", r"center\(\) learns its centre from the data"),
    ("y ~ scale(x)", r"scale\(\) learns its centre and scale"),
    ("y ~ poly(x, 2)", r"poly\(\) learns its orthogonal basis"),
    ("y ~ bs(x)", r"bs\(\) places its knots from the data"),
    ("y ~ lag(x)", r"lag\(\) mixes rows"),
    ("y ~ C(g, levels=['a', 'b'])", r"write C\(column\) alone"),
    ("y ~ np.sin(x)", "the function 'np.sin'"),
    ("y ~ {x ** z}", "exponent is not a number"),
    ("y ~ log(x)", r"log\(\) needs values > 0, but its argument ranges over \[0, 10\]"),
    ("y ~ {z / x}", "division by a value whose range"),
    ("y ~ {x > 2}", "bayesdp bounds columns, numbers"),
    ("C(g) ~ x", r"the response 'C\(g\)' is categorical"),
    ("{2 * 3} ~ x", r"the response '2 \* 3' names no column"),
    ("y ~ x + C(x)", r"used both as C\(x\) and as a number"),
])
def test_formulas_bayesdp_cannot_bound_are_refused(formula, message):
    with pytest.raises(BayesdpInputError, match=message):
        TableEncoding.build(formula, BOUNDS)


def test_interval_arithmetic_holds_every_value():
    """factor_interval encloses each expression's values over a grid of its columns' ranges,
    and is exact (attained) where each column appears once."""
    ranges = {"x": (0.5, 10.0), "z": (-1.0, 2.0)}
    grid = np.linspace(0, 1, 31)  # holds z = 0, where z ** 2 is smallest
    xs, zs = np.meshgrid(0.5 + 9.5 * grid, -1 + 3 * grid)
    for expr, fn, exact in [
        ("log(x)", lambda x, z: np.log(x), True),
        ("np.log1p(x) - {z}".replace("{z}", "z"), lambda x, z: np.log1p(x) - z, True),
        ("x * z", lambda x, z: x * z, True),
        ("z ** 2", lambda x, z: z ** 2, True),
        ("z ** 3 / x", lambda x, z: z ** 3 / x, True),
        ("np.sqrt(x) + np.abs(z)", lambda x, z: np.sqrt(x) + np.abs(z), True),
        ("-(x - 3) * 2", lambda x, z: -(x - 3) * 2, True),
        ("x - x", lambda x, z: x - x, False),  # x twice: an enclosure, not the range
    ]:
        iv, used = factor_interval(expr, ranges)
        v = fn(xs, zs)
        assert iv.lo <= v.min() + 1e-12 and v.max() <= iv.hi + 1e-12, expr
        if exact:
            assert v.min() == pytest.approx(iv.lo, abs=1e-12) and \
                v.max() == pytest.approx(iv.hi, abs=1e-12), expr
        else:
            assert iv.hi - iv.lo > v.max() - v.min()
        assert set(used) <= {"x", "z"}


# --------------------------------------------------------------------------------------------
# the encoding


def test_encoding_equals_a_hand_built_design_row_by_row(enc):
    rng = np.random.default_rng(1)
    t = table(rng, 200, wide=1.5)
    X, y, clamped = enc.encode(t)
    Xh, yh = hand_design(t)
    np.testing.assert_allclose(X, Xh, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(y, yh, rtol=1e-13)
    # each row encoded alone gives the same row: nothing depends on the other rows
    for i in range(0, 200, 23):
        Xi, yi, _ = enc.encode(t.iloc[i:i + 1])
        np.testing.assert_array_equal(Xi[0], X[i])
        assert yi[0] == y[i]
    # a level no row has still has its columns (the levels are the declared ones)
    only_a = t.assign(g="a")
    assert enc.encode(only_a)[0].shape == (200, len(NAMES))
    np.testing.assert_array_equal(enc.encode(only_a)[0][:, 3:], 0.0)


def test_clamping_is_counted_per_column_and_holder(enc):
    rng = np.random.default_rng(2)
    t = table(rng, 300, wide=1.5)
    _, _, clamped = enc.encode(t)
    expected = np.column_stack([(t[c] < lo) | (t[c] > hi)
                                for c, (lo, hi) in [("y", (0, 100)), ("x", (0, 10)),
                                                    ("z", (-1, 2))]])
    np.testing.assert_array_equal(clamped, expected)
    assert expected.sum() > 100  # the test's rows really go outside
    labels = np.array(["north", "south"])[rng.integers(0, 2, 300)]
    r = bayesdp.release(t, formula=FORMULA, bounds=BOUNDS, epsilon=EPS, delta=DELTA,
                        nodes=labels, seed=1)
    for j, h in enumerate(r.holder_names):
        np.testing.assert_array_equal(r.n_clamped[j], expected[labels == h].sum(axis=0))
    # the rows were inside the derived bounds after clamping: nothing clipped
    assert r.n_clipped.tolist() == [0, 0]
    # clamping is the only change: the clamped table gives the same statistics
    clipped_table = t.assign(y=t.y.clip(0, 100), x=t.x.clip(0, 10), z=t.z.clip(-1, 2))
    r2 = bayesdp.release(clipped_table, formula=FORMULA, bounds=BOUNDS, epsilon=EPS,
                         delta=DELTA, nodes=labels, seed=1)
    np.testing.assert_allclose(r2.S_hat, r.S_hat, rtol=1e-12)
    assert r2.n_clamped.sum() == 0


def test_levels_are_the_declared_ones(enc):
    t = table(np.random.default_rng(3), 50)
    with pytest.raises(BayesdpInputError, match=r"column 'g' has level\(s\) that are not "
                                                r"declared: 'd' \(1 row\(s\)\)"):
        enc.encode(t.assign(g=["d"] + list(t.g[1:])))
    with pytest.raises(BayesdpInputError, match="column 'g' has 1 missing value"):
        enc.encode(t.assign(g=[None] + list(t.g[1:])))
    # levels are compared as text: integer codes match declared numbers or their digits
    codes = pd.DataFrame({"y": [1.0, 2.0, 3.0], "s": [1, 2, 4]})
    for declared in ([1, 2, 3, 4], ["1", "2", "3", "4"]):
        e = TableEncoding.build("y ~ C(s)", {"y": (0, 5), "s": declared})
        X, _, _ = e.encode(codes)
        np.testing.assert_array_equal(X, [[0, 0, 0], [1, 0, 0], [0, 0, 1]])
    e = TableEncoding.build("y ~ C(s)", {"y": (0, 5), "s": [1, 2, 3]})
    with pytest.raises(BayesdpInputError, match="not declared: 4"):
        e.encode(codes)


# --------------------------------------------------------------------------------------------
# the sensitivity: derived from the declared bounds, against the largest change one row makes


def adversarial_rows(rng):
    """Corner rows of the declared box with every level (each numeric column at either end),
    rows beyond the box (which the encoding clamps) and random rows inside it."""
    corners = [{"y": y, "x": x, "z": z, "g": g}
               for y, x, z, g in itertools.product((0.0, 100.0), (0.0, 10.0), (-1.0, 2.0),
                                                   ("a", "b", "c"))]
    extra = [{"y": 1e6, "x": -50.0, "z": 7.0, "g": "c"}, {"y": -3.0, "x": 40.0, "z": -9.0,
                                                            "g": "b"}]
    return pd.concat([pd.DataFrame(corners + extra), table(rng, 400, wide=3.0)
                      .drop(columns="other")], ignore_index=True)


def row_changes(X, y, intercept=True):
    """The norm of the change [vech(w w^T), w y, y^2] of the released vector (with y^T y) that
    adding or removing each row (w = [1, x], or x) makes."""
    W = np.column_stack([np.ones(len(X)), X]) if intercept else X
    return np.array([np.linalg.norm(np.concatenate([vech(np.outer(w, w)), w * v, [v * v]]))
                     for w, v in zip(W, y)])


def test_derived_sensitivity_bounds_the_change_of_any_row(enc):
    rng = np.random.default_rng(4)
    rows = adversarial_rows(rng)
    X, y, _ = enc.encode(rows)
    bx, by = enc.bounds
    # B_x^2: 10^2 (x) + 1.5^2 (z - 0.5) + 4^2 (z^2) + 1 (C(g)) + 10^2 (C(g):x)
    assert bx == pytest.approx(math.sqrt(100 + 2.25 + 16 + 1 + 100), rel=1e-11)
    assert by == pytest.approx(math.log(101), rel=1e-11)
    norms = np.linalg.norm(X, axis=1)
    assert norms.max() <= bx and np.abs(y).max() <= by
    assert norms.max() == pytest.approx(bx, rel=1e-9)  # attained at a corner: exact
    r = bayesdp.release(rows, formula=FORMULA, bounds=BOUNDS, epsilon=EPS, delta=DELTA, seed=0)
    assert r.bounds == enc.bounds and r.intercept
    assert r.sensitivity == pytest.approx(
        privacy.sensitivity_release(bx, by, intercept=True, with_yty=True), rel=1e-14)
    assert row_changes(X, y).max() <= r.sensitivity
    # through the whole release: removing any one row changes the noiseless statistics of
    # [vech(S), z, y^T y] by at most the sensitivity (same seed, same bounds: the same noise)
    base = rows.iloc[:60]
    full = bayesdp.release(base, formula=FORMULA, bounds=BOUNDS, epsilon=EPS, delta=DELTA,
                           seed=9)

    def vector(rel):
        return np.concatenate([vech(rel.S_hat[0]), rel.z_hat[0], rel.yty_hat])

    worst = max(np.linalg.norm(vector(full) - vector(bayesdp.release(
        base.drop(index=i), formula=FORMULA, bounds=BOUNDS, epsilon=EPS, delta=DELTA, seed=9)))
        for i in range(0, 60, 3))
    assert 0 < worst <= full.sensitivity * (1 + 1e-9)


@pytest.mark.parametrize("formula, bx", [("y ~ C(a):C(b)", math.sqrt(2)),
                                         ("y ~ x:C(a):C(b)", 3.0)])
def test_a_term_formulaic_splits_into_several_blocks_gets_their_joint_bound(formula, bx):
    """formulaic encodes C(a):C(b) (with an intercept) as two blocks, C(b)- and C(a)-:C(b),
    both non-zero in one row: B_x counts both (sqrt 2); x:C(a):C(b) is one block (|x| <= 3).
    Every level combination at the box's corners stays inside B_x and one attains it, so no
    row is clipped. (Counting a term as one block gave B_x = 1 for the first, and clipped.)"""
    import itertools

    bounds = {"y": (0.0, 5.0), "x": (-3.0, 2.0), "a": ["p", "q", "r"], "b": ["u", "v"]}
    e = TableEncoding.build(formula, bounds)
    rows = pd.DataFrame([{"y": 1.0, "x": x, "a": a, "b": b} for x, a, b in itertools.product(
        (-3.0, 2.0), bounds["a"], bounds["b"])])
    X, _, _ = e.encode(rows)
    norms = np.linalg.norm(X, axis=1)
    assert e.bounds[0] == pytest.approx(bx, rel=1e-11)
    assert norms.max() <= e.bounds[0] and norms.max() == pytest.approx(e.bounds[0], rel=1e-9)
    r = bayesdp.release(pd.concat([rows] * 20), formula=formula, bounds=bounds, epsilon=EPS,
                        delta=DELTA, seed=0)
    assert int(np.sum(r.n_clipped)) == 0


def test_negative_controls_of_the_sensitivity(enc):
    """Bounds derived another way are loose or exceeded as expected: without the one-hot rule
    (each indicator counted as its own [0, 1] column) B_x is loose by exactly the indicators
    beyond one per block; from too narrow ranges, or without the interaction term, or without
    clamping, rows of the declared box exceed it."""
    rows = adversarial_rows(np.random.default_rng(5))
    X, y, _ = enc.encode(rows)
    largest = np.linalg.norm(X, axis=1).max()
    # 1. no one-hot rule: C(g) adds 2 (not 1), C(g):x 2 x 10^2 (not 10^2)
    naive = math.sqrt(100 + 2.25 + 16 + 2 + 200)
    assert largest < naive * (1 - 1e-3)
    assert naive ** 2 - largest ** 2 == pytest.approx(1 + 100, rel=1e-9)
    # 2. too narrow ranges (x up to 5, as if the holder had looked at half the data)
    narrow = TableEncoding.build(FORMULA, dict(BOUNDS, x=(0.0, 5.0)))
    assert largest > narrow.bounds[0] * 1.1
    s_narrow = privacy.sensitivity_release(*narrow.bounds, intercept=True, with_yty=True)
    assert row_changes(X, y).max() > s_narrow
    # 3. a bound that leaves out the interaction term
    no_inter = math.sqrt(sum(t["bound"] ** 2 for t in enc.terms if t["term"] != "C(g):x"))
    assert largest > no_inter * 1.1
    # 4. without clamping, rows beyond the box exceed the derived bound
    raw = rows.copy()
    raw["g"] = pd.Categorical(raw["g"], categories=["a", "b", "c"])
    unclamped = enc.model_spec.rhs.get_model_matrix(raw).to_numpy()[:, 1:]
    assert np.linalg.norm(unclamped, axis=1).max() > enc.bounds[0] * 2


# --------------------------------------------------------------------------------------------
# the release, its file and combining


@pytest.fixture(scope="module")
def two_holders():
    rng = np.random.default_rng(6)
    a, b = table(rng, 300), table(rng, 200)
    kw = dict(formula=FORMULA, bounds=BOUNDS, epsilon=EPS, delta=DELTA)
    return (bayesdp.release(a, holder_name="north", seed=1, **kw),
            bayesdp.release(b, holder_name="south", seed=2, **kw))


def test_release_records_the_encoding_and_the_file_round_trips(two_holders, tmp_path):
    r = two_holders[0]
    assert r.feature_names == ("intercept", *NAMES) and r.table.formula == FORMULA
    assert r.spec.formula == FORMULA and r.spec.bounds == {
        "y": (0.0, 100.0), "x": (0.0, 10.0), "z": (-1.0, 2.0), "g": ("a", "b", "c")}
    r.save(tmp_path / "r.json")
    doc = json.loads((tmp_path / "r.json").read_text())
    tab = doc["table"]
    assert tab["formula"] == FORMULA and tab["feature_names"] == NAMES and tab["intercept"]
    assert tab["columns"]["g"] == {"levels": ["a", "b", "c"]}
    assert tab["columns"]["x"] == {"range": [0.0, 10.0]}
    assert tab["factors"]["C(g)"]["reference"] == "a"
    assert tab["factors"]["I(z ** 2)"]["range"] == [0.0, 4.0]
    assert doc["privacy"]["bounds"] == tab["bounds"] == {"x": r.bounds[0], "y": r.bounds[1]}
    assert doc["privacy"]["public"].endswith(privacy.PUBLIC_TABLE)
    assert "n_clamped" not in doc["holders"][0]  # exact counts: only when asked
    back = bayesdp.load_release(tmp_path / "r.json")
    assert back.table == r.table and back.feature_names == r.feature_names
    assert back.n_clamped is None
    r.save(tmp_path / "c.json", include_clip_counts=True)
    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["holders"][0]["n_clamped"] == {"y": 0, "x": 0, "z": 0}
    np.testing.assert_array_equal(bayesdp.load_release(tmp_path / "c.json").n_clamped,
                                  r.n_clamped)


def test_docs_state_what_a_table_release_makes_public():
    text = " ".join(open(os.path.join(os.path.dirname(__file__), "..", "..", "docs",
                                      "privacy.md")).read().split())
    assert " ".join(privacy.PUBLIC_TABLE.lstrip("; ").split()) in text


@pytest.mark.parametrize("edit, message", [
    (lambda t: t["bounds"].update(x=1.0), r"table.bounds: the record says"),
    (lambda t: t["columns"].update(x={"range": [0, 20]}), r"table.bounds: the record says"),
    (lambda t: t["feature_names"].reverse(), r"table.feature_names: the record says"),
    (lambda t: t.update(formula="log(y + 1) ~ x"), r"table.(bounds|factors|feature_names)"),
    (lambda t: t["columns"].update(g=["a", "b"]), r"table.columns.g: expected"),
    (lambda t: t["columns"].update(x={"range": [3, 1]}), r"lo = 3 > hi = 1"),
])
def test_a_file_whose_encoding_disagrees_with_its_formula_is_refused(two_holders, tmp_path,
                                                                      edit, message):
    doc = two_holders[0].to_dict()
    edit(doc["table"])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(ReleaseFormatError, match=message):
        bayesdp.load_release(path)


def test_combine_needs_identical_encodings(two_holders):
    a, b = two_holders
    both = bayesdp.combine_releases(a, b)
    assert both.table == a.table and both.holder_names == ("north", "south")
    np.testing.assert_array_equal(both.n_clamped, np.vstack([a.n_clamped, b.n_clamped]))
    t = table(np.random.default_rng(7), 100)
    kw = dict(epsilon=EPS, delta=DELTA, holder_name="east", seed=3)
    other_bounds = bayesdp.release(t, formula=FORMULA, bounds=dict(BOUNDS, x=(0, 20)), **kw)
    with pytest.raises(CombineError, match=r"declared bounds of column 'x': \{\"range\": "
                                           r"\[0.0, 20.0\]\} against"):
        bayesdp.combine_releases(a, other_bounds)
    other_levels = bayesdp.release(t, formula=FORMULA, bounds=dict(BOUNDS, g=["b", "a", "c"]),
                                   **kw)
    with pytest.raises(CombineError, match="declared bounds of column 'g'"):
        bayesdp.combine_releases(a, other_levels)
    other_formula = bayesdp.release(t, formula=FORMULA.replace("{z - 0.5}", "{z - 1}"),
                                    bounds=BOUNDS, **kw)
    with pytest.raises(CombineError, match="formula"):
        bayesdp.combine_releases(a, other_formula)
    X, y = a.table.encode(t)[:2]
    matrix = bayesdp.release(X, y, feature_names=NAMES, bounds=a.bounds, intercept=True, **kw)
    with pytest.raises(CombineError, match="release 0 was encoded from a table by a formula "
                                           "and release 1 was not"):
        bayesdp.combine_releases(a, matrix)


def test_the_spec_makes_the_release_again(two_holders):
    a = two_holders[0]
    t = table(np.random.default_rng(6), 300)  # the rows of holder "north"
    again = bayesdp.release(t, spec=a.spec)
    np.testing.assert_array_equal(again.S_hat, a.S_hat)
    spec = ReleaseSpec(epsilon=EPS, delta=DELTA, bounds=BOUNDS, formula=FORMULA)
    assert spec.intercept and spec.table == a.table
    with pytest.raises(BayesdpInputError, match="intercept: the formula .* has no intercept"):
        ReleaseSpec(epsilon=EPS, delta=DELTA, bounds=BOUNDS, formula="y ~ x - 1",
                    intercept=True)


# --------------------------------------------------------------------------------------------
# release_file and release_dask: the same rows, the same release


def test_release_file_and_dask_equal_release(tmp_path):
    rng = np.random.default_rng(8)
    t = table(rng, 500, wide=1.2)
    t["site"] = rng.choice(["north", "south"], 500)
    kw = dict(formula=FORMULA, bounds=BOUNDS, epsilon=EPS, delta=DELTA, seed=4)
    ref = bayesdp.release(t, nodes=t["site"].to_numpy(), **kw)
    t.to_csv(tmp_path / "t.csv", index=False)
    t.to_parquet(tmp_path / "t.parquet")
    made = [release_file(tmp_path / "t.csv", node_column="site", chunksize=77, **kw),
            release_file(tmp_path / "t.parquet", node_column="site", chunksize=130, **kw)]
    try:
        import dask.dataframe as dd
        made.append(bayesdp.releases.release_dask(dd.from_pandas(t, npartitions=4),
                                                  node_column="site", **kw))
    except ImportError:  # the optional extra bayesdp[dask]
        pass
    for r in made:
        assert r.table == ref.table and r.holder_names == ref.holder_names
        np.testing.assert_allclose(r.S_hat, ref.S_hat, rtol=1e-10, atol=1e-9)
        np.testing.assert_allclose(r.z_hat, ref.z_hat, rtol=1e-10, atol=1e-9)
        np.testing.assert_array_equal(r.n_clamped, ref.n_clamped)
    assert ref.n_clamped.sum() > 0


# --------------------------------------------------------------------------------------------
# bad input: a clear error naming the column, level or term; nothing released


@pytest.mark.parametrize("change, message", [
    (dict(drop="z"), r"names column\(s\) the table does not have: 'z' in the term"),
    (dict(bounds=dict(BOUNDS, x=(10.0, 0.0))), r"bounds\['x'\]: lo = 10 > hi = 0"),
    (dict(bounds=dict(BOUNDS, x=(0.0, math.inf))), r"bounds\['x'\]: the range .* finite"),
    (dict(bounds={k: v for k, v in BOUNDS.items() if k != "z"}),
     "no bounds declared for column 'z'"),
    (dict(bounds=dict(BOUNDS, g=(0.0, 1.0))), r"level 0.0 is a float"),
    (dict(bounds=dict(BOUNDS, g="abc")), r"declare its levels as a non-empty list"),
    (dict(bounds=dict(BOUNDS, x=["a", "b"])), r"used as a number in the formula"),
    (dict(bounds=dict(BOUNDS, g=["a", "b", "a"])), r"level\(s\) \['a'\] declared twice"),
    (dict(bounds=(3.0, 2.0)), "declare the bounds of each column"),
    (dict(bounds="private"), "never read off the data"),
    (dict(bounds="data"), "never read off the data"),
    (dict(set_x="text"), "column 'x' holds object .* values, but the bounds declare it numeric"),
    (dict(set_x=np.nan), r"column 'x' has 1 missing or infinite value\(s\) \(first at row 0\)"),
    (dict(set_g="zzz"), r"level\(s\) that are not declared: 'zzz'"),
    (dict(y=np.ones(20)), "y: with a formula the response is the formula's left side"),
    (dict(feature_names=NAMES), "feature_names: with a formula"),
    (dict(split="contiguous"), "split: a release with a formula"),
])
def test_bad_input_is_named(change, message):
    t = table(np.random.default_rng(9), 20)
    if "drop" in change:
        t = t.drop(columns=change["drop"])
    if "set_x" in change:
        v = change["set_x"]
        t["x"] = t["x"].astype(object if isinstance(v, str) else float)
        t.loc[0, "x"] = v
    if "set_g" in change:
        t.loc[3, "g"] = change["set_g"]
    kw = dict(formula=FORMULA, bounds=change.get("bounds", BOUNDS), epsilon=EPS, delta=DELTA)
    for key in ("y", "feature_names", "split"):
        if key in change:
            kw[key] = change[key]
    y = kw.pop("y", None)
    with pytest.raises(BayesdpInputError, match=message):
        bayesdp.release(t, y, **kw)


def test_release_file_bad_input(tmp_path):
    t = table(np.random.default_rng(10), 30)
    t.to_csv(tmp_path / "t.csv", index=False)
    kw = dict(formula=FORMULA, bounds=BOUNDS, epsilon=EPS, delta=DELTA)
    with pytest.raises(BayesdpInputError, match="the file needs a header row"):
        release_file(tmp_path / "t.csv", header=None, **kw)
    with pytest.raises(BayesdpInputError, match="y_column: with a formula"):
        release_file(tmp_path / "t.csv", y_column="y", **kw)
    with pytest.raises(BayesdpInputError, match="node_column='x' is used by the formula"):
        release_file(tmp_path / "t.csv", node_column="x", **kw)
    with pytest.raises(BayesdpInputError, match=r"t.csv: the formula .* names column\(s\) "
                                                r"the table does not have: 'w' in the term"):
        release_file(tmp_path / "t.csv", **dict(kw, formula="y ~ x + w",
                                                bounds=dict(BOUNDS, w=(0, 1))))
    t.loc[25, "g"] = "q"
    t.to_csv(tmp_path / "u.csv", index=False)
    with pytest.raises(BayesdpInputError, match=r"u.csv, rows 20..29: table: column 'g' has "
                                                r"level\(s\) that are not declared: 'q'"):
        release_file(tmp_path / "u.csv", chunksize=10, **kw)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning from formulaic or pandas on good rows
        release_file(tmp_path / "t.csv", chunksize=7, **kw)
