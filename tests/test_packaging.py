"""The dependency ranges of pyproject.toml are the tested ones (README, "Tested versions")."""

import tomllib
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]


def _requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [Requirement(r) for r in project["dependencies"]]
    for extra in project.get("optional-dependencies", {}).values():
        reqs += [Requirement(r) for r in extra]
    out = {}
    for r in reqs:
        out.setdefault(r.name.lower(), r)
    return out


def _bounds(req):
    lower = [Version(s.version) for s in req.specifier if s.operator == ">="]
    upper = [Version(s.version) for s in req.specifier if s.operator == "<"]
    return (lower[0] if lower else None), (upper[0] if upper else None)


def test_every_dependency_has_a_tested_range():
    for name, req in _requirements().items():
        lo, hi = _bounds(req)
        assert lo is not None and hi is not None, f"{name}: needs a lower and an upper bound"
        assert lo < hi, name
        # the upper bound is a release boundary above the lower one: a major release (x.0), or
        # for a 0.x package a minor one (0.k) or 1.0 (arviz stays below 1.0)
        boundary = (hi.minor == 0 and hi.micro == 0) or (hi.major == 0 and hi.micro == 0)
        assert boundary and (hi.major > lo.major or (lo.major == 0 and hi.minor > lo.minor)), (
            name, str(lo), str(hi))


def test_numpyro_and_jax_ranges_import_together():
    # numpyro 0.20.x does not import under jax >= 0.10 (it needs numpyro >= 0.21 there)
    reqs = _requirements()
    jax_lo, _ = _bounds(reqs["jax"])
    numpyro_lo, _ = _bounds(reqs["numpyro"])
    if jax_lo >= Version("0.10") or reqs["jax"].specifier.contains("0.10.0"):
        assert numpyro_lo >= Version("0.21")


@pytest.mark.parametrize("name", sorted(_requirements()))
def test_installed_versions_are_inside_the_ranges(name):
    try:
        installed = metadata.version(name)
    except metadata.PackageNotFoundError:
        pytest.skip(f"{name} is not installed (optional)")
    assert _requirements()[name].specifier.contains(installed, prereleases=True), (
        f"{name} {installed} is outside the tested range {_requirements()[name].specifier}")


def test_the_lowest_versions_are_tested_by_ci():
    """.ci/run ends with .ci/lowest, which resolves every direct dependency to its lower bound
    (uv's lowest-direct resolution) and runs tests; the README says so."""
    run = (ROOT / ".ci" / "run").read_text()
    lowest = (ROOT / ".ci" / "lowest").read_text()
    assert run.strip().splitlines()[-1].startswith(".ci/lowest")
    assert "--resolution lowest-direct" in lowest and "-m pytest" in lowest
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Tested versions"):]
    assert ".ci/lowest" in section[:section.index("\n## ", 3)]


def test_lower_bounds_are_the_oldest_tested():
    """The lower bounds the README names are pyproject.toml's."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Tested versions"):]
    section = section[:section.index("\n## ", 3)]
    reqs = _requirements()
    for name, shown in (("numpy", "numpy 2.0"), ("scipy", "scipy\n1.16"), ("pandas", "pandas 2.2"),
                        ("scikit-learn", "scikit-learn 1.6"), ("arviz", "ArviZ 0.20")):
        lo, _ = _bounds(reqs[name])
        version = shown.split()[-1]
        assert Version(version) == lo, (name, version, lo)
        assert shown in section, shown
