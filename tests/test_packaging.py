"""The dependency ranges of pyproject.toml are the tested ones (README, "Tested versions")."""

import re
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
        # the upper bound is the next minor (0.x) or the next major release above the lower one,
        # or 1.0 (arviz stays below 1.0)
        nxt = (Version(f"0.{lo.minor + 1}") if lo.major == 0 else Version(f"{lo.major + 1}"))
        assert hi == nxt or (lo.major == 0 and hi == Version("1.0")), (name, str(lo), str(hi))


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


def test_readme_lowest_versions_command_pins_the_lower_bounds():
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Tested versions"):]
    section = section[:section.index("\n## ", 3)]
    pins = dict(re.findall(r"'([A-Za-z0-9_.-]+)==([0-9][0-9A-Za-z.]*)'", section))
    pins = {k.lower(): Version(v) for k, v in pins.items()}
    reqs = _requirements()
    assert set(pins) == set(reqs), (sorted(pins), sorted(reqs))
    for name, req in reqs.items():
        lo, _ = _bounds(req)
        assert pins[name] == lo, f"{name}: README pins {pins[name]}, lower bound is {lo}"
