"""The two layers (issue 35, item 1): the core (every module of bayesdp/ outside paper/,
adapters/ and cli/) never imports bayesdp.paper, bayesdp.adapters or bayesdp.cli. Checked
statically: every core module is parsed and every import statement in it, at the top or inside a
function, is resolved to the module it names. Negative controls: the checker flags synthetic
sources that import the upper layers in each way a module can."""

import ast
from pathlib import Path

import pytest

import bayesdp

PACKAGE = Path(bayesdp.__file__).parent
UPPER = ("bayesdp.paper", "bayesdp.adapters", "bayesdp.cli")


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def core_modules():
    """The core's source files: bayesdp/**.py outside the upper layers' folders, and not
    bayesdp/__main__.py (``python -m bayesdp``: the command's entry point, like ``cli/``)."""
    upper = {PACKAGE / name.split(".")[1] for name in UPPER}
    return sorted(p for p in PACKAGE.rglob("*.py")
                  if p != PACKAGE / "__main__.py"
                  and not any(u == p.parent or u in p.parents for u in upper))


def imported_modules(source: str, module: str, is_package: bool):
    """Every module an import in ``source`` (the code of ``module``) names, resolved to its
    absolute name, with its line: ``import a.b``, ``from a import b`` (a and a.b), relative
    imports, and ``importlib.import_module`` / ``__import__`` of a constant name."""
    package = module if is_package else module.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module
            out.append((name, node.lineno))
            out += [(f"{name}.{a.name}", node.lineno) for a in node.names]
        elif isinstance(node, ast.Call):
            func = node.func
            fname = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if fname in ("import_module", "__import__") and node.args and \
                    isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
                out.append((node.args[0].value, node.lineno))
    return out


def upper_layer_imports(source: str, module: str, is_package=False):
    """The imports in ``source`` of a module of the upper layers: (module named, line)."""
    return [(name, line) for name, line in imported_modules(source, module, is_package)
            if any(name == u or name.startswith(u + ".") for u in UPPER)]


def test_the_core_never_imports_the_upper_layers():
    modules = core_modules()
    assert len(modules) > 30 and PACKAGE / "inference" / "fit.py" in modules
    assert not any("paper" in p.parts or "cli" in p.parts or "adapters" in p.parts
                   for p in modules)
    bad = []
    for path in modules:
        for name, line in upper_layer_imports(path.read_text(), _module_name(path),
                                              _is_package(path)):
            bad.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {name}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("source, module", [
    ("import bayesdp.paper", "bayesdp.inference.fit"),
    ("import bayesdp.paper.comparison as c", "bayesdp.demo"),
    ("from bayesdp.paper import compare", "bayesdp.predict"),
    ("from bayesdp import paper", "bayesdp.predict"),
    ("def f():\n    from ..paper.bs import run_bs\n    return run_bs", "bayesdp.inference.fit"),
    ("def f():\n    from .. import adapters\n", "bayesdp.inference.batch"),
    ("from ...cli import main", "bayesdp.inference.kernels.fixeds"),
    ("from .cli import main", "bayesdp"),  # bayesdp/__init__.py: a package
    ("import importlib\nimportlib.import_module('bayesdp.paper')", "bayesdp.estimator"),
])
def test_negative_control_the_checker_sees_an_upper_layer_import(source, module):
    assert upper_layer_imports(source, module, is_package=module == "bayesdp")


def test_the_checker_passes_core_imports():
    source = ("from ..errors import BayesdpInputError\nfrom . import closed_form\n"
              "import bayesdp.inference\nfrom bayesdp.releases import layout\n"
              "def f():\n    from ..models.regression import eiv_model\n")
    assert upper_layer_imports(source, "bayesdp.inference.fit") == []
    names = [n for n, _ in imported_modules(source, "bayesdp.inference.fit", False)]
    assert {"bayesdp.errors", "bayesdp.inference.closed_form",
            "bayesdp.models.regression.eiv_model"} <= set(names)


def test_fit_without_the_paper_names_the_import_that_registers_it(tmp_path):
    """In a process that never imported bayesdp.paper, ``fit(method="bs")`` raises
    BayesdpInputError listing the available methods and saying ``import bayesdp.paper``
    registers the paper's algorithms; after that import the method is there."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import sys
        import bayesdp
        from bayesdp.errors import BayesdpInputError
        sim = bayesdp.simulate(n=200, d=2, seed=1)
        rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds,
                              nodes=2, seed=2, include_yty=True)
        try:
            bayesdp.fit(rel, method="bs")
        except BayesdpInputError as exc:
            print("ERROR", exc)
        print("PAPER_LOADED", "bayesdp.paper" in sys.modules)
        import bayesdp.paper
        print("BS", "bs" in bayesdp.METHODS)
    """)
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    error = next(line for line in p.stdout.splitlines() if line.startswith("ERROR"))
    assert "unknown method 'bs'" in error and "'eiv', 'fast', 'fixeds', 'normalx'" in error
    assert "import bayesdp.paper" in error
    assert "PAPER_LOADED False" in p.stdout and "BS True" in p.stdout
