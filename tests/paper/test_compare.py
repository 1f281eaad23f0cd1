"""compare: a short run has every method and metric; resume skips finished cells."""

import argparse
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bayesdp
from bayesdp.paper.comparison import (CHECKS, METRICS, cell_path, compare, default_methods, summarize,
                                warn_checks)
from bayesdp.errors import BayesdpInputError, CalibrationWarning, ConvergenceWarning

SHARED = Path(__file__).parents[2].parent / "shared" / "data" / "uci"
SMALL = dict(epsilons=[1.0, 10.0], nodes=[1, 2], reps=2, n=3000, d=2, seed=3, n_jobs=1,
             num_samples=100, num_warmup=50)


def _methods():
    return ["fast", "bs", "adassp", "nonprivate"]


@pytest.mark.slow
def test_paper_mcmc_methods_when_registered(tmp_path):
    extra = [m for m in ("normalx", "fixeds") if m in bayesdp.METHODS]
    if not extra:
        pytest.skip("normalx / fixeds not registered")
    # 60 draws of one chain cannot reach a bulk ESS of 400: compare says so, once
    with pytest.warns(ConvergenceWarning, match=f"{len(extra)} of {len(extra)} MCMC fits"):
        df = compare("simulated", methods=extra + ["fast", "nonprivate"], epsilons=[1.0],
                     nodes=[2], reps=1, n=2000, d=2, seed=3, n_jobs=1, num_samples=60,
                     num_warmup=40, out_dir=tmp_path)
    for m in extra:
        checks = {"converged", "max_r_hat", "min_ess_bulk"} | (
            {"s_noise_mean_coverage"} if m == "fixeds" else {"s_hat_max_abs_z", "s_hat_agrees"})
        assert set(df[df.method == m]["metric"]) == set(METRICS) | checks
        assert df[(df.method == m) & (df.metric == "converged")]["value"].tolist() == [0.0]
    assert np.isfinite(df["value"]).all()
    assert "## converged" in (tmp_path / "summary.md").read_text()


@pytest.mark.slow
def test_short_run_every_method_and_metric(tmp_path):
    methods = _methods()
    df = compare("simulated", methods=methods, out_dir=tmp_path, **SMALL)
    assert list(df.columns) == ["method", "epsilon", "J", "rep", "metric", "value"]
    assert set(df["method"]) == set(methods)
    # bs: convergence; fast: S noise; none of these samples S, so no S_hat check
    assert set(df["metric"]) == set(METRICS) | set(CHECKS) - {"s_hat_max_abs_z", "s_hat_agrees"}
    # every (method, eps, J, rep) has the accuracy metrics; MMD for all but adaSSP/non-private
    for m in methods:
        sub = df[df["method"] == m]
        for metric in ("estimation_mse", "prediction_mse", "seconds"):
            assert (sub["metric"] == metric).sum() == 2 * 2 * 2
        has_mmd = (sub["metric"] == "mmd2").sum()
        assert has_mmd == (0 if m in ("adassp", "nonprivate") else 8)
    assert np.isfinite(df["value"]).all()
    for f in ("results.csv", "summary.md", "config.json", "fig_estimation_mse.png",
              "fig_prediction_mse.png", "fig_mmd2_paper.png"):
        assert (tmp_path / f).exists(), f
    text = (tmp_path / "summary.md").read_text()
    assert all(m in text for m in methods) and "prediction_mse" in text
    back = pd.read_csv(tmp_path / "results.csv")
    assert len(back) == len(df)
    # more privacy budget, less error (fast, averaged over J and reps)
    s = summarize(df[(df.metric == "estimation_mse") & (df.method == "fast")])
    assert s[s.epsilon == 10]["mean"].mean() < s[s.epsilon == 1]["mean"].mean()

    # resume: nothing is recomputed; a deleted cell is recomputed alone
    cells = sorted((tmp_path / "cells").glob("*.csv"))
    mtimes = {p: p.stat().st_mtime_ns for p in cells}
    victim = cell_path(tmp_path / "cells", "bs", 10.0, 2, 1)
    victim.unlink()
    df2 = compare("simulated", methods=methods, out_dir=tmp_path, **SMALL)
    for p in cells:
        if p != victim:
            assert p.stat().st_mtime_ns == mtimes[p], p
    assert victim.exists()
    pd.testing.assert_frame_equal(
        df[df.method != "bs"].reset_index(drop=True), df2[df2.method != "bs"].reset_index(drop=True))
    # a different configuration in the same folder is refused
    with pytest.raises(BayesdpInputError, match="different settings"):
        compare("simulated", methods=methods, out_dir=tmp_path, **{**SMALL, "seed": 4})


def test_in_memory_and_bad_input():
    df = compare("simulated", methods=["fast", "adassp"], epsilons=[1.0], nodes=[1], reps=1,
                 n=2000, d=2, n_jobs=1, mmd=False)
    assert set(df["metric"]) == {"estimation_mse", "prediction_mse", "seconds",
                                 "s_noise_mean_coverage"}  # fast fixes S
    with pytest.raises(BayesdpInputError, match="methods"):
        compare("simulated", methods=["nope"], reps=1)
    with pytest.raises(BayesdpInputError, match="calibration"):
        compare("simulated", methods=["fast"], calibration="classical", reps=1)
    with pytest.raises(BayesdpInputError, match="data"):
        compare("no/such/file.csv", methods=["fast"], reps=1)
    assert "fast" in default_methods() and "bs" in default_methods()


def test_cli_register(tmp_path):
    from bayesdp.cli.compare import register

    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["compare", "simulated", "--methods", "fast", "nonprivate",
                              "--epsilons", "1", "--nodes", "1", "--reps", "1", "--n", "1000",
                              "--n-jobs", "1", "--out-dir", str(tmp_path), "--mmd", "no",
                              "--no-figures"])
    args.func(args)
    assert (tmp_path / "results.csv").exists() and (tmp_path / "summary.md").exists()


@pytest.mark.slow
def test_data_file_paper_code(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 3))
    y = X @ [1.0, 0.5, -0.5] + 0.3 * rng.standard_normal(400)
    f = tmp_path / "toy.csv"
    pd.DataFrame(np.column_stack([X, y])).to_csv(f, header=False, index=False)
    df = compare(f, methods=["fast", "adassp", "nonprivate"], epsilons=[1.0], nodes=[1, 2],
                 reps=2, calibration="paper-code", n_jobs=1)
    assert set(df["method"]) == {"fast", "adassp", "nonprivate"}
    assert "mmd2" in set(df["metric"])  # d = 3 <= 5


@pytest.mark.slow
def test_parallel_workers_match_serial(tmp_path):
    kw = dict(methods=["fast", "bs", "adassp"], epsilons=[1.0], nodes=[1, 2], reps=2, n=3000,
              d=2, seed=5, num_samples=100, num_warmup=50)
    a = compare("simulated", n_jobs=2, out_dir=tmp_path / "par", **kw)
    b = compare("simulated", n_jobs=1, **kw)
    a = a[a.metric != "seconds"].reset_index(drop=True)
    b = b[b.metric != "seconds"].reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b)


@pytest.mark.slow
def test_parallel_batched_workers_stay_quiet_and_share_every_cell(capfd):
    """Spawned workers do not inherit the caller's warning filters: the releases and fits of a
    batched cell are silenced there as in-process (paper-code releases warn on every call);
    compare's own end-of-run warnings come from the caller. With n_jobs = 2 each cell's
    replications go out as 2 tasks (so both workers share every cell), with the results of the
    in-process run."""
    kw = dict(methods=["fast"], epsilons=[1.0], nodes=[1, 2], reps=3, n=2000, d=2,
              calibration="paper-code", batch_reps=True, mmd=False, figures=False)
    par = compare("simulated", n_jobs=2, verbose=True, **kw)
    cap = capfd.readouterr()
    assert "UserWarning" not in cap.err, cap.err[-2000:]
    lines = sorted(line.split("] ", 1)[1].split(": ")[0] for line in (cap.out + cap.err).splitlines()
                   if line.startswith("[") and "/4] eps=" in line)
    assert lines == ["eps=1 J=1 reps=0,1", "eps=1 J=1 reps=2", "eps=1 J=2 reps=0,1",
                     "eps=1 J=2 reps=2"], cap.out + cap.err
    _assert_batched_equal(par, compare("simulated", **kw))


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="shared UCI data not present")
def test_powerplant_paper_code_near_table1(tmp_path):
    df = compare("powerplant", data_dir=SHARED, methods=["fast", "adassp"], epsilons=[1.0],
                 nodes=[1], reps=5, calibration="paper-code", seed=1, n_jobs=1)
    s = summarize(df[df.metric == "prediction_mse"]).set_index("method")["mean"]
    assert s["fast"] == pytest.approx(0.0129, abs=0.0005)   # Table 1
    assert s["adassp"] == pytest.approx(0.0139, abs=0.0010)


def test_summary_intervals_of_positive_metrics_stay_positive():
    """summary.md: every interval of a positive metric has a lower end > 0 and holds the mean,
    for skewed MSE-like replications where mean +- t sd/sqrt(reps) would go below zero."""
    from bayesdp.paper.comparison import summary_markdown

    rng = np.random.default_rng(3)
    rows = []
    for method in ("fast", "adassp"):
        for J in (1, 5):
            vals = np.exp(rng.normal(-3.0, 1.5, size=5))
            vals[0] *= 40.0  # one bad replication
            rows += [{"method": method, "epsilon": 1.0, "J": J, "rep": r,
                      "metric": "estimation_mse", "value": v} for r, v in enumerate(vals)]
    df = pd.DataFrame(rows)
    s = summarize(df)
    assert (s["lower"] > 0).all() and (s["lower"] < s["mean"]).all()
    assert (s["mean"] < s["upper"]).all()
    text = summary_markdown(df)
    assert "bootstrap" in text
    lowers = [float(x) for x in re.findall(r"\[(-?[0-9.e+-]+), ", text)]
    assert len(lowers) == 4 and min(lowers) > 0


# -- how the cells run: in process by default, on a given executor; progress -------------------

TINY = dict(methods=["fast", "adassp", "nonprivate"], epsilons=[1.0], nodes=[1, 2], reps=2,
            n=2000, d=2, seed=4, mmd=False)


def test_plain_script_without_main_guard(tmp_path):
    """A script with no `if __name__ == "__main__":` guard, fed on stdin (`python - <<EOF`), runs
    compare with the defaults. (The old default started spawn workers, which re-ran the script:
    BrokenProcessPool.) Its stderr is a pipe, so no progress bar is drawn."""
    import subprocess
    import sys

    script = ("from bayesdp.paper.comparison import compare\n"
              "df = compare('simulated', methods=['fast', 'adassp'], epsilons=[1.0], "
              "nodes=[1, 2], reps=1, n=2000, d=2, mmd=False)\n"
              "print('ROWS', len(df))\n")
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).parents[2]) + os.pathsep + env.get("PYTHONPATH", "")
    p = subprocess.run([sys.executable, "-"], input=script, env=env, cwd=tmp_path,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "ROWS 14" in p.stdout  # 2 methods x 2 J x 3 metrics, and fast's 2 S-noise checks
    assert "cell" not in p.stderr and "%|" not in p.stderr


class CountingExecutor:
    """Runs on a thread pool and counts the submitted calls."""

    def __init__(self, workers=2):
        import concurrent.futures as cf

        self.inner = cf.ThreadPoolExecutor(workers)
        self.calls = 0

    def submit(self, fn, *args, **kwargs):
        self.calls += 1
        return self.inner.submit(fn, *args, **kwargs)


class InlineExecutor:
    """Not a concurrent.futures executor: runs at once; its futures only have result()."""

    class Done:
        def __init__(self, value):
            self.value = value

        def result(self):
            return self.value

    def __init__(self):
        self.calls = 0

    def submit(self, fn, *args):
        self.calls += 1
        return self.Done(fn(*args))


def _no_seconds(df):
    return df[df.metric != "seconds"].reset_index(drop=True)


def test_executor_is_used_and_matches_serial():
    import warnings

    serial = compare("simulated", **TINY)
    filters = list(warnings.filters)
    ex = CountingExecutor(2)
    try:
        threaded = compare("simulated", executor=ex, **TINY)
    finally:
        ex.inner.shutdown()
    assert ex.calls == 4  # one call per (epsilon, J, rep) cell
    assert warnings.filters == filters  # the cells' warning filters did not leak out
    pd.testing.assert_frame_equal(_no_seconds(threaded), _no_seconds(serial))
    inline = InlineExecutor()
    other = compare("simulated", executor=inline, **TINY)
    assert inline.calls == 4
    pd.testing.assert_frame_equal(_no_seconds(other), _no_seconds(serial))
    with pytest.raises(BayesdpInputError, match="not both"):
        compare("simulated", executor=inline, n_jobs=2, **TINY)
    with pytest.raises(BayesdpInputError, match="submit"):
        compare("simulated", executor=object(), **TINY)
    with pytest.raises(BayesdpInputError, match="n_jobs"):
        compare("simulated", n_jobs=0, **TINY)


def test_progress_bar_forced_on_and_quiet_by_default(capsys):
    compare("simulated", **TINY)  # stderr is captured, not a terminal: nothing drawn
    out, err = capsys.readouterr()
    assert err == "" and out == ""
    compare("simulated", progress=True, verbose=True, **TINY)
    out, err = capsys.readouterr()
    # count and total of the fits (4 cells x 3 methods) on stderr
    assert "12/12" in err and "compare simulated" in err
    assert "[1/4] eps=1 J=1 rep=0: fast, adassp, nonprivate" in out
    assert "[4/4]" in out


# -- cells on other executors (processes, a dask cluster), resume, batched replications --------


def _stamps(cells):
    """(inode, mtime) of every cell file: a rewritten file (os.replace of a new one) changes."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in Path(cells).glob("*.csv")}


def _resume_recomputes_only_deleted(tmp_path, serial, **kw):
    """Run into out_dir, delete one cell file, run again: only that cell is recomputed and
    the results equal ``serial``."""
    out = tmp_path / "run"
    first = compare("simulated", out_dir=out, **TINY, **kw)
    pd.testing.assert_frame_equal(_no_seconds(first), _no_seconds(serial))
    gone = cell_path(out / "cells", "fast", 1.0, 2, 1)
    before = _stamps(out / "cells")
    gone.unlink()
    again = compare("simulated", out_dir=out, **TINY, **kw)
    after = _stamps(out / "cells")
    assert set(after) == set(before)
    changed = {name for name in after if after[name] != before[name]}
    assert changed == {gone.name}
    pd.testing.assert_frame_equal(_no_seconds(again), _no_seconds(serial))


def test_process_pool_executor_matches_serial_and_resumes(tmp_path):
    """A ProcessPoolExecutor with spawn workers (they re-import the caller and get the spec,
    run_cell and the method modules by pickling) gives the in-process results; resume works."""
    import concurrent.futures as cf
    import multiprocessing

    serial = compare("simulated", **TINY)
    ctx = multiprocessing.get_context("spawn")
    with cf.ProcessPoolExecutor(2, mp_context=ctx) as ex:
        _resume_recomputes_only_deleted(tmp_path, serial, executor=ex)


@pytest.mark.slow
def test_dask_executor_matches_serial_and_resumes(tmp_path):
    """A dask.distributed LocalCluster (worker processes) through Client.get_executor():
    the in-process results, resume, and batched replications on it too."""
    distributed = pytest.importorskip("distributed")
    serial = compare("simulated", **TINY)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        ex = client.get_executor()
        _resume_recomputes_only_deleted(tmp_path, serial, executor=ex)
        batched = compare("simulated", executor=ex, batch_reps=True, **TINY)
    _assert_batched_equal(batched, serial)


def _assert_batched_equal(batched, serial):
    """Same rows; values equal up to the rounding of the vectorised fits (1e-10 relative)."""
    a, b = _no_seconds(batched), _no_seconds(serial)
    pd.testing.assert_frame_equal(a.drop(columns="value"), b.drop(columns="value"))
    np.testing.assert_allclose(a["value"], b["value"], rtol=1e-10, atol=0)


@pytest.mark.slow  # ~1 min: compiles B&S for two option sets and two shapes
def test_batch_reps_bs_matches_one_by_one():
    """batch_reps=True with MCMC-B&S: its replications fitted at once to their own releases
    (with y^T y) give the one-by-one rows; another seed does not."""
    kw = dict(TINY, methods=["bs", "fast"], nodes=[2], reps=2, num_samples=60,
              num_warmup=40, mmd=True)
    serial = compare("simulated", **kw)
    batched = compare("simulated", batch_reps=True, **kw)
    _assert_batched_equal(batched, serial)
    assert set(batched["method"]) == {"bs", "fast"}
    other = compare("simulated", batch_reps=True, **dict(kw, seed=5))
    assert not np.allclose(_no_seconds(other)["value"], _no_seconds(serial)["value"], rtol=1e-3)


@pytest.mark.slow
def test_batch_reps_matches_one_by_one_and_resumes(tmp_path):
    """batch_reps=True: one task per (epsilon, J), the batchable methods (fast, fixeds) fitted
    for all replications at once; the rows equal the one-by-one run's; resume recomputes only
    missing cells; a different seed is not equal (the comparison can fail)."""
    methods = ["fast", "fixeds", "adassp", "nonprivate"]
    kw = dict(TINY, methods=methods, nodes=[2], reps=3, num_samples=100, num_warmup=100,
              mmd=True)
    serial = compare("simulated", **kw)
    ex = CountingExecutor(1)
    try:
        batched = compare("simulated", batch_reps=True, executor=ex, out_dir=tmp_path, **kw)
    finally:
        ex.inner.shutdown()
    assert ex.calls == 1  # one task for the three replications of (eps=1, J=2)
    _assert_batched_equal(batched, serial)  # fit's checks included
    assert set(batched["metric"]) == set(METRICS) | set(CHECKS) - {"s_hat_max_abs_z",
                                                                    "s_hat_agrees"}  # no S
    for name in ("fixeds", "fast"):
        cell_path(tmp_path / "cells", name, 1.0, 2, 1).unlink()
    before = _stamps(tmp_path / "cells")
    again = compare("simulated", batch_reps=True, out_dir=tmp_path, **kw)
    after = _stamps(tmp_path / "cells")
    assert {n for n in after if after[n] != before.get(n)} == {
        cell_path(tmp_path, m, 1.0, 2, 1).name for m in ("fixeds", "fast")}
    _assert_batched_equal(again, serial)
    other = compare("simulated", batch_reps=True, **dict(kw, seed=5))
    assert not np.allclose(_no_seconds(other)["value"], _no_seconds(serial)["value"], rtol=1e-3)


def test_compare_records_fits_checks_and_is_silent_when_they_pass(recwarn):
    """Chains long enough to converge: compare's rows hold fit's checks (converged = 1, r_hat
    and ESS as the fit's attrs give them) and it does not warn."""
    df = compare("simulated", methods=["fixeds"], epsilons=[10.0], nodes=[1], reps=1, n=2000,
                 d=2, seed=3, num_samples=1000, num_warmup=500, mmd=False)
    v = df.set_index("metric")["value"]
    assert v["converged"] == 1.0 and v["max_r_hat"] <= 1.01 and v["min_ess_bulk"] >= 400
    assert not [w for w in recwarn if issubclass(w.category, ConvergenceWarning)]


def _checks_frame(rows):
    return pd.DataFrame([{"method": m, "epsilon": 1.0, "J": 2, "rep": r, "metric": k, "value": v}
                         for m, r, vals in rows for k, v in vals.items()])


def test_warn_checks_names_the_worst_fit_and_passes_clean_grids():
    ok = {"converged": 1.0, "max_r_hat": 1.002, "min_ess_bulk": 900.0}
    bad = {"converged": 0.0, "max_r_hat": 1.3, "min_ess_bulk": 12.0}
    worse = {"converged": 0.0, "max_r_hat": 2.5, "min_ess_bulk": 4.0}
    # negative control: every fit passed, nothing is said
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_checks(_checks_frame([("fixeds", 0, ok), ("normalx", 0, ok),
                                   ("fast", 0, {"s_noise_mean_coverage": 0.85})]))
    df = _checks_frame([("fixeds", 0, ok), ("normalx", 0, bad), ("normalx", 1, worse),
                        ("fast", 0, {"s_noise_mean_coverage": 0.5})])
    with pytest.warns(ConvergenceWarning) as conv:
        with pytest.warns(CalibrationWarning, match=r"1 of 1 fits .*fast 1.*rep=0: 50%"):
            warn_checks(df)
    msg = str(conv[0].message)
    assert "2 of 3 MCMC fits" in msg and "normalx 2" in msg
    assert "rep=1: max r_hat 2.500, min bulk ESS 4" in msg  # the worst of the two
    # the S_hat check: silent when every fit agrees, names the largest |z| otherwise
    agree = {"s_hat_max_abs_z": 1.2, "s_hat_agrees": 1.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warn_checks(_checks_frame([("normalx", 0, {**ok, **agree})]))
    df = _checks_frame([("normalx", 0, {**ok, **agree}),
                        ("normalx", 1, {**ok, "s_hat_max_abs_z": 4.1, "s_hat_agrees": 0.0}),
                        ("normalx", 2, {**ok, "s_hat_max_abs_z": 3.5, "s_hat_agrees": 0.0})])
    with pytest.warns(CalibrationWarning, match=r"2 of 3 fits .*\|z\| 4.1, normalx .*rep=1"):
        warn_checks(df)


def test_docs_checks_example_runs_and_warns(capsys):
    """docs/compare.md's example of the checks runs as written and warns."""
    text = (Path(__file__).parents[2] / "docs" / "compare.md").read_text()
    code = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "CHECKS" in b)
    with pytest.warns(ConvergenceWarning, match="2 of 2 MCMC fits"):
        exec(compile(code, "docs/compare.md", "exec"), {})
    assert "s_noise_mean_coverage" in capsys.readouterr().out


@pytest.mark.skipif(not hasattr(__import__("os"), "sched_setaffinity"), reason="Linux only")
def test_spawned_workers_are_pinned_to_a_core_each():
    """compare's worker i runs on the i-th usable core (round robin; with one BLAS thread each,
    two pinned workers ran a B&S batch in 16.3 s, unpinned 18.1 s: docs/compare.md). Checked
    in a subprocess, since it pins the process that calls it."""
    import subprocess
    import sys

    code = ("import multiprocessing as mp, os\n"
            "from bayesdp.paper.comparison import _worker_init\n"
            "cores = sorted(os.sched_getaffinity(0))\n"
            "c = mp.get_context('spawn').Value('i', 1)\n"
            "_worker_init(c)\n"
            "want = [cores[1 % len(cores)]] if len(cores) > 1 else cores\n"
            "print(sorted(os.sched_getaffinity(0)) == want, c.value)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout.split()
    assert out == ["True", "2"]


def test_compare_workers_start_with_one_blas_thread(monkeypatch):
    """compare's own workers load numpy and scipy with OPENBLAS_NUM_THREADS=1 (two OpenBLAS
    threads on a worker's one core spun against each other: 84 s against 16 s for a B&S
    batch); the caller's environment is left as it was, and a value the caller set wins."""
    from bayesdp.paper.comparison import _spawn_pool

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    with _spawn_pool(1) as pool:
        assert pool.submit(os.getenv, "OPENBLAS_NUM_THREADS").result(timeout=120) == "1"
    assert "OPENBLAS_NUM_THREADS" not in os.environ
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "3")
    with _spawn_pool(1) as pool:
        assert pool.submit(os.getenv, "OPENBLAS_NUM_THREADS").result(timeout=120) == "3"
    assert os.environ["OPENBLAS_NUM_THREADS"] == "3"


def test_thread_executor_with_nuts_methods_is_refused():
    """numpyro's effect handlers are one stack per process: compare refuses a thread pool for
    the NUTS methods, naming them (docs/compare.md, Parallelism), and accepts it without them."""
    from concurrent.futures import ThreadPoolExecutor

    from bayesdp.errors import BayesdpInputError
    from bayesdp.paper import compare

    with ThreadPoolExecutor(2) as ex:
        with pytest.raises(BayesdpInputError, match=r"methods \['normalx'\] run NUTS"):
            compare("simulated", methods=["fast", "normalx"], reps=1, n=500, d=2, executor=ex)
        df = compare("simulated", methods=["fast"], reps=2, n=500, d=2, executor=ex)
    assert len(df)
