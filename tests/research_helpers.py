"""Import a script of research/ (the lab above the package) by its path, for the tests that
run one of its cells or check one of its bounds."""

from __future__ import annotations

import importlib.util
import pathlib


def research_module(name):
    """research/<name>.py, imported by path (research/ is not a package)."""
    root = next(p for p in pathlib.Path(__file__).resolve().parents if (p / "research").is_dir())
    spec = importlib.util.spec_from_file_location(name, root / "research" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
