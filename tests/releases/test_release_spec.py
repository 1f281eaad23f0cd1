"""The release specification (bayesdp.releases.ReleaseSpec): the mechanism's parameters, checked
once and taken by release, release_file and release_dask alike; the release records the spec it
was made by. Also: the imports of the privacy layers go one way, privacy -> accounting ->
releases, with no import loop."""

import ast
import dataclasses
import pathlib
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import bayesdp
from bayesdp.errors import BayesdpInputError
from bayesdp.releases import ReleaseSpec
from dp_helpers import rows_in_ball

try:
    import dask.dataframe as dd
except ImportError:  # the optional extra bayesdp[dask]: the other entry points are still checked
    dd = None

EPS, DELTA = 1.0, 1e-5
BOUNDS = (2.0, 3.0)
PACKAGE = pathlib.Path(bayesdp.__file__).parent


@pytest.fixture(scope="module")
def rows():
    X, y = rows_in_ball(np.random.default_rng(3), 80, 3, *BOUNDS)
    return X, y


@pytest.fixture(scope="module")
def sources(rows, tmp_path_factory):
    """The same rows three ways: arrays, a CSV file, a Dask DataFrame."""
    X, y = rows
    frame = pd.DataFrame(X, columns=["a", "b", "c"]).assign(y=y)
    path = tmp_path_factory.mktemp("spec") / "rows.csv"
    frame.to_csv(path, index=False)
    out = {
        "release": lambda **kw: bayesdp.release(X, y, feature_names=["a", "b", "c"], **kw),
        "release_file": lambda **kw: bayesdp.releases.release_file(path, **kw),
    }
    if dd is not None:
        out["release_dask"] = lambda **kw: bayesdp.releases.release_dask(
            dd.from_pandas(frame, npartitions=3), **kw)
    return out


# --------------------------------------------------------------------------------------------
# one check, the same message from every entry point

BAD = [
    (dict(epsilon=0.0), "^epsilon must be a finite number > 0"),
    (dict(epsilon=None), "^epsilon is required"),
    (dict(delta=1.5), "^delta must lie in the open interval"),
    (dict(bounds=(2.0, -1.0)), "^bounds: B_y must be a finite number > 0"),
    (dict(bounds="maybe"), "^bounds must be a pair"),
    (dict(bounds=None), "^bounds are required"),
    (dict(calibration="approx"), "^calibration must be one of"),
    (dict(noise="crypto"), "^noise must be one of"),
    (dict(noise="secure", seed=1), "^seed: noise='secure'"),
    (dict(noise="secure", calibration="classical"), "^calibration: noise='secure'"),
    (dict(noise="secure", bounds="private"), "^noise: noise='secure' with bounds='private'"),
    (dict(intercept="yes"), "^intercept must be True or False"),
    (dict(average_rows=0), "^average_rows must be a whole number >= 1"),
    (dict(include_yty="no"), "^include_yty must be True or False"),
    (dict(seed=-1), "^seed must be None or a whole number >= 0"),
    (dict(holder_name="3"), "^holder_name '3': names made of digits"),
]


@pytest.mark.parametrize("bad, message", BAD, ids=[str(b) for b, _ in BAD])
def test_every_entry_point_rejects_a_bad_spec_with_the_same_message(sources, bad, message):
    kw = {"epsilon": EPS, "delta": DELTA, "bounds": BOUNDS, **bad}
    errors = {}
    for name, call in sources.items():
        with pytest.raises(BayesdpInputError, match=message) as exc:
            call(**kw)
        errors[name] = str(exc.value)
    assert len(set(errors.values())) == 1, errors
    with pytest.raises(BayesdpInputError) as exc:  # the spec itself says the same
        ReleaseSpec(**kw)
    assert str(exc.value) == errors["release"]


@pytest.mark.parametrize("bad, message", [
    (dict(split="hash"), "^split='hash' was removed"),
    (dict(split="blocks"), "^split must be one of"),
    (dict(bounds_share=0.2), "^bounds_share applies to bounds='private' only"),
    (dict(bounds_range=(1.0, 2.0)), "^bounds_range applies to bounds='private' only"),
    (dict(bounds="private", bounds_share=1.0), "^bounds_share must be a number in the open"),
    (dict(bounds="private", bounds_range=(2.0, 1.0)), "^bounds_range must satisfy 0 < low"),
])
def test_release_and_release_file_share_the_other_checks(sources, bad, message):
    kw = {"epsilon": EPS, "delta": DELTA, "bounds": BOUNDS, **bad}
    msgs = set()
    for name in ("release", "release_file"):
        with pytest.raises(BayesdpInputError, match=message) as exc:
            sources[name](**kw)
        msgs.add(str(exc.value))
    assert len(msgs) == 1


def test_spec_or_keywords_not_both(sources):
    spec = ReleaseSpec(epsilon=EPS, delta=DELTA, bounds=BOUNDS)
    for call in sources.values():
        with pytest.raises(BayesdpInputError, match="^spec: .* not both; got spec and epsilon"):
            call(spec=spec, epsilon=2.0)
        with pytest.raises(BayesdpInputError, match="got spec and calibration, intercept"):
            call(spec=spec, calibration="classical", intercept=True)
        with pytest.raises(BayesdpInputError, match="^spec must be a ReleaseSpec, got dict"):
            call(spec={"epsilon": EPS, "delta": DELTA, "bounds": BOUNDS})
    with pytest.raises(BayesdpInputError, match="^spec must be a ReleaseSpec or None"):
        dataclasses.replace(sources["release"](spec=spec), spec="exact")


def test_release_dask_needs_public_bounds_and_the_random_split(sources):
    if dd is None:
        pytest.skip("needs Dask (bayesdp[dask])")
    for spec in (ReleaseSpec(epsilon=EPS, delta=DELTA, bounds="private"),
                 ReleaseSpec(epsilon=EPS, delta=DELTA, bounds="data")):
        with pytest.raises(BayesdpInputError, match="release_dask needs public bounds"):
            sources["release_dask"](spec=spec)
    spec = ReleaseSpec(epsilon=EPS, delta=DELTA, bounds=BOUNDS, split="contiguous")
    with pytest.raises(BayesdpInputError, match="^split='contiguous': release_dask"):
        sources["release_dask"](spec=spec)


# --------------------------------------------------------------------------------------------
# the spec: normalised, compared, recorded by the release


def test_spec_normalises_its_fields():
    spec = ReleaseSpec(epsilon=1, delta=np.float32(1e-5), bounds=[2, 3], intercept=np.True_,
                       average_rows=np.int64(2), seed=np.int64(4))
    assert spec.epsilon == 1.0 and isinstance(spec.epsilon, float)
    assert isinstance(spec.delta, float) and spec.bounds == (2.0, 3.0)
    assert spec.intercept is True and type(spec.average_rows) is int and type(spec.seed) is int
    assert spec == ReleaseSpec(epsilon=1.0, delta=float(np.float32(1e-5)), bounds=(2.0, 3.0),
                               intercept=True, average_rows=2, seed=4)
    private = ReleaseSpec(epsilon=1.0, delta=1e-5, bounds="private")
    assert private.bounds_share == bayesdp.privacy.PRIVATE_BOUNDS_SHARE
    assert private.bounds_range == bayesdp.privacy.PRIVATE_BOUNDS_RANGE
    assert private.bounds_epsilon == pytest.approx(0.1)
    assert private == ReleaseSpec(epsilon=1.0, delta=1e-5, bounds="private", bounds_share=0.1,
                                  bounds_range=(1e-6, 1e9))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.epsilon = 2.0
    with pytest.raises(BayesdpInputError, match="^epsilon"):  # replace checks again
        dataclasses.replace(spec, epsilon=-1.0)
    with pytest.raises(TypeError):  # keywords only
        ReleaseSpec(1.0, 1e-5, BOUNDS)


def test_the_spec_of_a_release_is_the_spec_given(sources, tmp_path):
    spec = ReleaseSpec(epsilon=0.5, delta=1e-6, bounds=BOUNDS, intercept=True,
                       include_yty=True, seed=7, holder_name="clinic")
    made = {name: call(spec=spec) for name, call in sources.items()}
    assert len(made) == 3 or dd is None
    for rel in made.values():
        assert rel.spec == spec
    # the keywords make the same spec and, with its seed, the same release
    kw = dict(epsilon=0.5, delta=1e-6, bounds=BOUNDS, intercept=True, include_yty=True, seed=7,
              holder_name="clinic")
    again = sources["release"](**kw)
    assert again.spec == spec
    np.testing.assert_array_equal(again.S_hat, made["release"].S_hat)
    np.testing.assert_array_equal(again.z_hat, made["release"].z_hat)
    # the spec of a release makes the release again
    twice = sources["release"](spec=made["release"].spec)
    np.testing.assert_array_equal(twice.S_hat, made["release"].S_hat)
    assert twice.holder_names == ("clinic",) and twice.epsilon == 0.5 and twice.intercept
    # its fields agree with the spec's
    rel = made["release_file"]
    assert (rel.epsilon, rel.delta, rel.bounds, rel.intercept, rel.seeded) == \
        (spec.epsilon, spec.delta, spec.bounds, spec.intercept, True)
    # kept in memory only: a file never holds the spec (nor its seed); a combination has none
    assert bayesdp.load_release(rel.save(tmp_path / "r.json")).spec is None
    other = sources["release"](epsilon=0.5, delta=1e-6, bounds=BOUNDS, intercept=True,
                               include_yty=True, seed=8, holder_name="lab")
    assert bayesdp.combine_releases(made["release"], other).spec is None


def test_private_bounds_spec_is_recorded_as_given(tmp_path):
    X, y = rows_in_ball(np.random.default_rng(4), 400, 2, *BOUNDS)
    path = tmp_path / "rows.csv"
    pd.DataFrame(X, columns=["a", "b"]).assign(y=y).to_csv(path, index=False)
    spec = ReleaseSpec(epsilon=2.0, delta=1e-5, bounds="private", bounds_share=0.5,
                       bounds_range=(1e-2, 1e2), seed=1)
    for rel in (bayesdp.release(X, y, spec=spec), bayesdp.releases.release_file(path, spec=spec)):
        assert rel.spec == spec and rel.spec.bounds == "private" and len(rel.bounds) == 2
        assert rel.bounds_part["epsilon"] == pytest.approx(1.0)


def test_partial_statistics_release_records_its_spec(rows):
    X, y = rows
    acc = bayesdp.releases.PartialStatistics(3, BOUNDS, 1, intercept=True)
    acc.add(X, y)
    rel = acc.release(epsilon=EPS, delta=DELTA, seed=2)
    assert rel.spec == ReleaseSpec(epsilon=EPS, delta=DELTA, bounds=BOUNDS, intercept=True,
                                   seed=2)


# --------------------------------------------------------------------------------------------
# imports go one way: privacy -> accounting -> secure_noise -> releases


def _bayesdp_imports(path):
    """The bayesdp modules ``path`` imports anywhere (module level or in functions)."""
    tree = ast.parse(path.read_text())
    here = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]  # its package
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("bayesdp")}
        elif isinstance(node, ast.ImportFrom):
            base = list(here[:len(here) - node.level + 1]) if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            if mod.startswith("bayesdp"):
                out |= {mod + "." + a.name for a in node.names} if not node.module else {mod}
    return out


@pytest.mark.parametrize("module, allowed", [
    ("privacy", {"bayesdp.errors"}),
    ("accounting", {"bayesdp.errors", "bayesdp.privacy"}),
    ("secure_noise", {"bayesdp.errors", "bayesdp.privacy", "bayesdp.accounting"}),
])
def test_lower_layers_do_not_import_the_release_layer(module, allowed):
    imported = _bayesdp_imports(PACKAGE / f"{module}.py")
    assert imported <= allowed, imported - allowed
    assert not any("releases" in m for m in imported)


def test_the_import_helper_sees_an_import_of_the_release_layer():
    """Negative control: the release layer's own modules import accounting and releases."""
    imported = _bayesdp_imports(PACKAGE / "releases" / "mechanism.py")
    assert "bayesdp.accounting" in imported and "bayesdp.releases.cost" in imported
    assert "bayesdp.accounting" in _bayesdp_imports(PACKAGE / "releases" / "cost.py")


@pytest.mark.parametrize("first, then", [
    ("bayesdp.accounting", "bayesdp.releases"),
    ("bayesdp.releases", "bayesdp.accounting"),
    ("bayesdp.releases.release_object", "bayesdp.accounting"),
    ("bayesdp.secure_noise", "bayesdp.releases.cost"),
])
def test_no_import_cycle_whichever_module_comes_first(first, then):
    code = (f"import {first}, {then}\n"
            "from bayesdp.releases import Release, ReleaseSpec, release\n"
            "from bayesdp.accounting import budget\n"
            "import numpy as np\n"
            "r = release(np.ones((8, 2)), np.ones(8), epsilon=1.0, delta=1e-5, "
            "bounds=(2.0, 2.0), seed=0)\n"
            "assert budget(r).epsilon > 0 and isinstance(r.spec, ReleaseSpec)\n"
            "print('ok')\n")
    p = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip() == "ok", p.stderr
