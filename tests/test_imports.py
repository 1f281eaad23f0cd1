"""Light imports (issue 36, item 4): ``import bayesdp``, ``bayesdp --help`` (and a sub-command's),
and the command's bad-input errors load none of the heavy dependencies; every public name is
still there. A closed-form fit from the command line loads no JAX (item 5). Each check runs in a fresh Python process and looks at which modules it loaded
(``sys.modules``), never at a time; negative controls show the same check sees a heavy import.
"""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import bayesdp

#: modules that ``import bayesdp`` and ``bayesdp --help`` must not load
HEAVY = ("scipy.stats", "pandas", "arviz", "matplotlib", "xarray", "jax", "numpyro", "sklearn",
         "formulaic")

_REPORT = textwrap.dedent("""
    import json as _json, sys as _sys
    print("HEAVY=" + _json.dumps(sorted(m for m in {heavy!r} if m in _sys.modules)))
""")


def _heavy_loaded(code, tmp_path):
    """Run ``code`` in a fresh interpreter (cwd ``tmp_path``, JAX's cache in ``tmp_path``);
    return (the HEAVY modules it loaded, its stdout and stderr)."""
    script = textwrap.dedent(code) + _REPORT.format(heavy=HEAVY)
    env = dict(os.environ, BAYESDP_COMPILATION_CACHE=str(tmp_path / "jax_cache"))
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    p = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("HEAVY=")][-1]
    return json.loads(line[len("HEAVY="):]), p.stdout, p.stderr


def _command(argv):
    """Code that runs ``bayesdp ARGV`` the way the console script does (``console_main``),
    printing its exit status."""
    return f"""
        import sys
        sys.argv = ["bayesdp", *{list(argv)!r}]
        from bayesdp.cli import console_main
        try:
            status = console_main()
        except SystemExit as exc:
            status = exc.code
        print("STATUS=" + str(status))
    """


def test_import_bayesdp_loads_no_heavy_module(tmp_path):
    heavy, _, _ = _heavy_loaded("import bayesdp", tmp_path)
    assert heavy == []


@pytest.mark.parametrize("argv", [
    ["--help"],
    ["fit", "--help"],
    ["select", "--help"],
    ["simulate-network", "gossip", "--help"],
    ["fit", "missing.json"],  # bad input: fails before any work
    ["select", "missing.json"],
    ["select", "release.json", "--model-prior", "2"],
    ["compare", "simulated", "--epsilons", "-1"],
    ["simulate", "--n", "0", "--out", "x.csv"],
])
def test_command_help_and_bad_input_load_no_heavy_module(tmp_path, argv):
    heavy, out, err = _heavy_loaded(_command(argv), tmp_path)
    status = int(out.split("STATUS=")[1].split()[0])
    assert status == (0 if "--help" in argv else 2), err
    if "--help" in argv:
        assert "usage: bayesdp" in out
    else:
        assert "error:" in err
    assert heavy == []


@pytest.fixture(scope="module")
def release_file(tmp_path_factory):
    """A release file of the README's shell example (n = 20000, d = 3, 4 holders)."""
    sim = bayesdp.simulate(n=20_000, d=3, seed=1)
    path = tmp_path_factory.mktemp("release") / "release.json"
    bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=4,
                    seed=1).save(path)
    return path


#: what a fit that never samples with JAX must not load (nor does writing its netCDF need
#: dask's distributed scheduler)
NO_JAX = ("jax", "numpyro", "distributed")


@pytest.mark.parametrize("method", ["fast", "eiv"])
def test_command_fit_of_a_closed_form_loads_no_jax(tmp_path, release_file, method):
    """``bayesdp fit release.json --method fast --out posterior.nc`` (and the default method)
    computes, prints and writes the whole posterior - its log-likelihood and posterior
    predictive groups too - without loading JAX, numpyro or distributed."""
    code = _command(["fit", str(release_file), "--method", method, "--seed", "1",
                     "--out", "posterior.nc"]) + f"""
        import gc
        print("LOADED=" + ",".join(m for m in {NO_JAX!r} if m in sys.modules))
        print("FROZEN=" + str(gc.get_freeze_count()))
    """
    _, out, err = _heavy_loaded(code, tmp_path)
    assert "STATUS=0" in out, err
    # the command ends with gc.freeze(): the exit does not walk every object again
    assert int(out.split("FROZEN=")[1].split()[0]) > 100_000
    assert "posterior of theta" in out
    loaded = [ln for ln in out.splitlines() if ln.startswith("LOADED=")][-1]
    assert loaded == "LOADED=", loaded
    az = pytest.importorskip("arviz")
    idata = az.from_netcdf(tmp_path / "posterior.nc")
    assert {"posterior", "log_likelihood", "posterior_predictive"} <= set(idata.groups())


def test_command_select_writes_its_posterior_without_distributed(tmp_path, release_file):
    """``bayesdp select release.json --out-dir sel`` writes posterior.nc (netCDF, through
    xarray) without importing dask's distributed scheduler, as ``fit --out`` does."""
    code = _command(["select", str(release_file), "--seed", "1", "--out-dir", "sel"]) + """
        print("LOADED=" + ",".join(m for m in ("distributed",) if m in sys.modules))
    """
    _, out, err = _heavy_loaded(code, tmp_path)
    assert "STATUS=0" in out, err
    assert (tmp_path / "sel" / "posterior.nc").is_file()
    loaded = [ln for ln in out.splitlines() if ln.startswith("LOADED=")][-1]
    assert loaded == "LOADED=", loaded


@pytest.mark.parametrize("code, expected", [
    # a function that needs scipy.stats, pandas or JAX loads it: the check sees heavy imports
    ("import bayesdp; bayesdp.simulate(20, 2, seed=1)", {"scipy.stats"}),
    ("import bayesdp; import pandas", {"pandas"}),
    ("import bayesdp; bayesdp.diagnostics.arviz_version()",
     {"arviz", "xarray", "pandas", "matplotlib", "scipy.stats"}),
    ("import bayesdp; bayesdp._jax.enable_x64()", {"jax"}),
])
def test_negative_control_heavy_imports_are_seen(tmp_path, code, expected):
    heavy, _, _ = _heavy_loaded(code, tmp_path)
    assert expected <= set(heavy)


def test_command_still_turns_on_the_compilation_cache_without_importing_jax(tmp_path):
    """``bayesdp --help`` does not import JAX, yet JAX imported later in that process uses the
    command's compilation cache (the setting went into JAX's environment variables)."""
    code = _command(["--help"]) + """
        assert "jax" not in sys.modules
        import jax
        print("CACHE=" + str(jax.config.jax_compilation_cache_dir))
        print("MIN=" + str(jax.config.jax_persistent_cache_min_compile_time_secs))
    """
    _, out, _ = _heavy_loaded(code, tmp_path)
    assert f"CACHE={tmp_path / 'jax_cache'}" in out
    assert "MIN=0.0" in out


def test_every_public_name_is_still_there():
    import importlib
    import types

    for name in bayesdp.__all__:
        value = getattr(bayesdp, name)
        assert value is not None, name
        exec(f"from bayesdp import {name}", {})
    assert set(bayesdp.__all__) <= set(dir(bayesdp))
    star = {}
    exec("from bayesdp import *", star)
    assert set(bayesdp.__all__) <= set(star)
    # functions, not the submodules of the same name
    assert callable(bayesdp.simulate) and callable(bayesdp.predict)
    assert isinstance(bayesdp.accounting, types.ModuleType)
    # submodules reachable as attributes, as when import bayesdp imported them all
    for name in ("privacy", "diagnostics", "inference", "releases", "models", "errors",
                 "estimator", "secure_noise", "_jax"):
        assert getattr(bayesdp, name) is importlib.import_module(f"bayesdp.{name}"), name
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        bayesdp.no_such_name  # noqa: B018


#: the agreed top level (issue 35, item 4): the flow release -> fit -> diagnose -> predict, the
#: estimator, the two warnings and two errors, and select (issue 39); the rest is in the
#: subpackages
TOP_LEVEL = {
    "release", "load_release", "combine_releases", "Release", "Ledger",
    "fit", "fit_nonprivate", "select", "adassp", "METHODS", "Priors",
    "predict", "prediction_summary", "diagnose", "BayesDPRegressor", "simulate", "simulate_table", "plan", "smallest_epsilon",
    "CalibrationWarning", "ConvergenceWarning", "BayesdpError", "BayesdpInputError",
}

#: a name that left the top level -> the module it is in now
MOVED = {
    "release_file": "releases", "release_dask": "releases", "PartialStatistics": "releases",
    "analytic_gaussian_sigma": "privacy", "classical_gaussian_sigma": "privacy",
    "gaussian_sigma": "privacy", "paper_code_gaussian_sigma": "privacy",
    "true_epsilon": "privacy", "fit_batch": "inference", "closed_form_moments": "inference",
    "CombineError": "errors", "ReleaseFormatError": "errors", "SamplerError": "errors",
}


def test_the_top_level_is_the_agreed_list_and_the_rest_is_in_subpackages():
    """``bayesdp.__all__`` is exactly the agreed names, each resolves; the names that left the
    top level are reached through their subpackage (lazily, after ``import bayesdp`` only) and
    no longer at the top; the layers above the core are not attributes of it."""
    import importlib

    assert len(bayesdp.__all__) == len(set(bayesdp.__all__))
    assert set(bayesdp.__all__) == TOP_LEVEL
    for name in TOP_LEVEL:
        assert getattr(bayesdp, name) is not None, name
    for name, module in MOVED.items():
        assert name not in dir(bayesdp), name
        with pytest.raises(AttributeError):
            getattr(bayesdp, name)
        assert getattr(getattr(bayesdp, module), name) is getattr(
            importlib.import_module(f"bayesdp.{module}"), name)
    assert issubclass(bayesdp.errors.ReleaseFormatError, bayesdp.BayesdpInputError)
    assert issubclass(bayesdp.BayesdpInputError, (bayesdp.BayesdpError, ValueError))
    for upper in ("paper", "adapters", "cli"):
        assert upper not in bayesdp._LAZY, upper


def test_functions_win_over_submodules_of_the_same_name(tmp_path):
    """``import bayesdp.simulate`` (the module) leaves ``bayesdp.simulate`` the function."""
    code = """
        import bayesdp.simulate, bayesdp.predict, bayesdp.plan, bayesdp.accounting
        import bayesdp
        assert callable(bayesdp.simulate) and callable(bayesdp.predict), (bayesdp.simulate,)
        assert callable(bayesdp.plan), bayesdp.plan
        from bayesdp import fit, Release, BayesDPRegressor, METHODS, accounting
        assert "fast" in METHODS and callable(fit)
    """
    heavy, _, _ = _heavy_loaded(code, tmp_path)
    assert "jax" not in heavy
