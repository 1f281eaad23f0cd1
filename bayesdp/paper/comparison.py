"""``compare``: run methods over a grid of (epsilon, J, replication), as in the paper's section 5.

    from bayesdp.paper import compare
    df = compare("powerplant", methods=["fast", "bs", "adassp", "nonprivate"],
                 epsilons=[1.0], nodes=[1, 5, 10], reps=10, calibration="paper-code",
                 seed=1, out_dir="runs/pp", data_dir="path/to/uci")

For every cell (epsilon, J, rep) the data are released once for the [S, z] methods and once, with
the larger sensitivity of appendix C.1, for MCMC-B&S (``include_yty=True``); adaSSP adds its own
noise to the raw statistics; "nonprivate" is the normal-inverse-gamma posterior from the raw rows.
Every DP method is called through ``bayesdp.fit(release, method=name)`` (with ``batch_reps=True``,
the replications of one (epsilon, J) through ``bayesdp.inference.fit_batch`` where the method has a
batched fit), so any method registered in ``bayesdp.METHODS`` can be compared.

Metrics (:mod:`bayesdp.paper.metrics`; docs/compare.md, "Metrics"):
``estimation_mse`` (posterior mean vs the true theta, or the training least-squares fit on real
data), ``prediction_mse`` (test rows on real data; on simulated data the trace formula averaged
over posterior draws for the MCMC methods and at the point estimate for fast/adaSSP/non-private,
as the authors did), ``mmd2`` and ``mmd2_paper`` (unbiased squared MMD to the non-private
posterior, Gaussian kernel with variance h = 0.1; ``mmd2_paper`` carries the authors'
(2 pi h)^(-d/2) factor), and ``seconds`` (wall time of the fit). Beside them, ``fit``'s own checks
of each fit (``CHECKS``): ``converged`` (1 or 0), ``max_r_hat`` and ``min_ess_bulk`` for the MCMC
methods, ``s_noise_mean_coverage`` for the methods that fix S, ``s_hat_max_abs_z`` and
``s_hat_agrees`` for the methods that sample S; ``compare`` warns once, at the end, when some
fits did not pass them.

Settings follow the authors' driver: delta = 1/N_train, bounds read off the (training) data (not
private, flagged in ``config.json``), Lambda = V^T V with V iid N(0, 1) (the simulation's own
Lambda on simulated data), kappa = d + 1, a = 20, b = 0.5, m = 0, C = b/(a-1) I.
``calibration="paper-code"`` reproduces the authors' code everywhere it differs: their (buggy) sigma,
Bayes-fixedS-fast with B_y/3 used as a variance, adaSSP with (eps/3, delta/3) per statistic.
Only that setting reproduces Table 1; ``"exact"`` is the correct (eps, delta)-DP calibration.

Output (when ``out_dir`` is given): ``cells/*.csv`` (one per method and cell, written as soon as it
is finished; a rerun skips them), ``results.csv`` (tidy: method, epsilon, J, rep, metric, value),
``summary.md`` (means with 90% percentile bootstrap intervals of the mean), ``fig_*.png``
(Figure 2/4 style) and ``config.json``.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import importlib
import json
import math
import multiprocessing
import os
import time
import warnings
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

import bayesdp

from .. import progress as pg
from .._jax import enable_x64
from ..diagnostics import ESS_MIN, RHAT_MAX, S_NOISE_COVERAGE_MIN, s_hat_z_max
from ..errors import (BayesdpError, BayesdpInputError, CalibrationWarning, ConvergenceWarning,
                      check_output_folder)
from ..inference import METHODS
from ..inference.batch import fit_batch_results
from ..inference.fit import finish_fit
from ..models.priors import Priors
from ..releases.holders import check_split
from ..releases.rows import check_design
from ..simulate import simulate
from . import metrics
from .metrics import bootstrap_mean_interval

# pandas, matplotlib and .datasets (pandas) are imported inside the functions that use them (in
# compare, after the checks): importing bayesdp.paper, as `bayesdp --help` does, loads none
if TYPE_CHECKING:
    import pandas as pd

_CALIBRATIONS = ("exact", "paper-code")
#: methods computed by compare itself rather than through ``fit``
BASELINES = ("adassp", "nonprivate")
#: methods whose simulated prediction metric uses the point estimate (as the authors did)
_POINT_ESTIMATE_METHODS = ("fast", "adassp", "nonprivate")
METRICS = ("estimation_mse", "prediction_mse", "mmd2", "mmd2_paper", "seconds")
#: fit's own checks of a fit, kept beside the metrics: the convergence check of the MCMC methods
#: (bayesdp.diagnostics.check_convergence), the fixedS methods' calibration check
#: (bayesdp.inference.fit.check_s_noise) and the S_hat check of the methods that sample S
#: (bayesdp.inference.fit.check_s_hat: the largest |z| and whether it passed, 1 or 0)
CHECKS = ("converged", "max_r_hat", "min_ess_bulk", "s_noise_mean_coverage", "s_hat_max_abs_z",
          "s_hat_agrees")
_COLUMNS = ["method", "epsilon", "J", "rep", "metric", "value"]
_PAPER_ORDER = ("normalx", "fixeds", "fast", "bs", "adassp", "nonprivate")


#: methods that run numpyro's NUTS on a model: numpyro's effect handlers are one stack per
#: process, so they cannot run in two threads at once (compare refuses a ThreadPoolExecutor)
THREAD_UNSAFE_METHODS = ("normalx", "nuts-normalx", "nuts-fixeds")

def default_methods():
    """Every method the paper compares that is available now (normalX/fixedS once registered)."""
    return [m for m in _PAPER_ORDER if m in METHODS or m in BASELINES]


# -- the data of one run ------------------------------------------------------------------------

_CONTEXTS: dict = {}


def _context(spec):
    """Data, reference parameters and priors for a data spec (cached per process)."""
    key = json.dumps(spec, sort_keys=True)
    if key in _CONTEXTS:
        return _CONTEXTS[key]

    intercept = spec.get("intercept", False)
    if spec["kind"] == "simulated":
        sim = simulate(n=spec["n"], d=spec["d"], seed=spec["seed"],
                       x_mean=spec.get("x_mean", 0.0), intercept=spec.get("true_intercept", 0.0))
        ctx = {"X": sim.X, "y": sim.y, "theta_ref": sim.theta, "Sigma_x": sim.Sigma_x,
               "X_test": None, "y_test": None, "Lambda": sim.Lambda,
               "public_bounds": sim.bounds, "names": list(sim.feature_names)}
        if intercept or "x_mean" in spec or "true_intercept" in spec:
            # prediction error E[(w^T (theta_k - theta))^2] over the rows w = [1, x] of the
            # non-centred simulation; a fit without an intercept has theta_k[0] = 0
            mu = sim.x_mean
            M = np.block([[np.ones((1, 1)), mu[None, :]],
                          [mu[:, None], sim.Sigma_x + np.outer(mu, mu)]])
            ctx["prediction_design"] = (np.concatenate([[sim.intercept], sim.theta]), M)
            if intercept:
                ctx["theta_ref"] = ctx["prediction_design"][0]
    else:
        from .datasets import load_dataset

        ds = load_dataset(spec["data"], preprocessing=spec["preprocessing"],
                          data_dir=spec.get("data_dir"), seed=spec["seed"])
        V = np.random.default_rng([spec["seed"], 7]).standard_normal((ds.d, ds.d))
        ctx = {"X": ds.X_train, "y": ds.y_train, "theta_ref": ds.theta_ols, "Sigma_x": None,
               "X_test": ds.X_test, "y_test": ds.y_test, "Lambda": V.T @ V,
               "public_bounds": None, "names": list(ds.feature_names)}
        if intercept:  # least squares of [1, x] on the training rows; test rows [1, x]
            W = np.column_stack([np.ones(ds.n_train), ds.X_train])
            ctx["theta_ref"] = np.linalg.lstsq(W, ds.y_train, rcond=None)[0]
            ctx["X_test"] = np.column_stack([np.ones(len(ds.X_test)), ds.X_test])
    X, y = ctx["X"], ctx["y"]
    ctx["data_bounds"] = (float(np.sqrt(np.einsum("ij,ij->i", X, X)).max()), float(np.abs(y).max()))
    ctx["delta"] = 1.0 / X.shape[0]
    ctx["priors"] = Priors.paper(Lambda=ctx["Lambda"])
    _CONTEXTS[key] = ctx
    return ctx


def _bounds(ctx, spec):
    if spec.get("bounds", "data") == "public" and ctx["public_bounds"] is not None:
        return ctx["public_bounds"]
    return ctx["data_bounds"]


# -- one cell -----------------------------------------------------------------------------------


def cell_path(cells_dir, method, epsilon, J, rep) -> Path:
    return Path(cells_dir) / f"{method}__eps{epsilon:g}__J{J}__rep{rep}.csv"


def _write_atomic(path: Path, df: pd.DataFrame):
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    df.to_csv(tmp, index=False)
    os.replace(tmp, path)


def _metrics_for(method, draws, ctx, ref_draws, spec, point=None):
    """Metric rows for one method's theta draws (K, d) or point estimate (d,).

    ``point``: the exact posterior mean when known (closed-form methods), else the draws' mean.
    """
    draws = np.atleast_2d(np.asarray(draws, dtype=float))
    est = draws.mean(axis=0) if point is None else np.asarray(point, dtype=float)
    out = {"estimation_mse": metrics.estimation_mse(est, ctx["theta_ref"])}
    if ctx["Sigma_x"] is not None:
        src = est if method in _POINT_ESTIMATE_METHODS or draws.shape[0] == 1 else draws
        if "prediction_design" in ctx:
            theta_w, M = ctx["prediction_design"]
            src = np.atleast_2d(src)
            if src.shape[1] < len(theta_w):  # no intercept fitted: theta_0 = 0
                src = np.column_stack([np.zeros(src.shape[0]), src])
            out["prediction_mse"] = metrics.simulated_prediction_mse(src, theta_w, M)
        else:
            out["prediction_mse"] = metrics.simulated_prediction_mse(src, ctx["theta_ref"],
                                                                     ctx["Sigma_x"])
    else:
        out["prediction_mse"] = metrics.prediction_mse(est, ctx["X_test"], ctx["y_test"])
    if spec["mmd"] and method != "adassp" and ref_draws is not None and draws.shape[0] > 1:
        k = spec["mmd_draws"]
        sub = draws[np.linspace(0, draws.shape[0] - 1, min(k, draws.shape[0])).astype(int)]
        h = spec["mmd_bandwidth"]
        out["mmd2"] = metrics.mmd2(sub, ref_draws, h)
        out["mmd2_paper"] = out["mmd2"] * (2 * np.pi * h) ** (-draws.shape[1] / 2)
    return out


def _checks_of(attrs) -> dict:
    """The :data:`CHECKS` values recorded in a fit's posterior attrs (those that were run)."""
    out = {}
    if attrs.get("convergence_checked"):
        out.update(converged=float(bool(attrs["converged"])),
                   max_r_hat=float(attrs["max_r_hat"]), min_ess_bulk=float(attrs["min_ess_bulk"]))
    if "s_noise_mean_coverage" in attrs:
        out["s_noise_mean_coverage"] = float(attrs["s_noise_mean_coverage"])
    if "s_hat_check_max_abs_z" in attrs:
        z = float(attrs["s_hat_check_max_abs_z"])
        out.update(s_hat_max_abs_z=z, s_hat_agrees=float(z <= s_hat_z_max(int(attrs["d"]))))
    return out


def _method_options(method, spec):
    opts = dict(spec["method_options"].get(method, {}))
    if spec["calibration"] == "paper-code" and method == "fast":
        opts.setdefault("sigma_y_rule", "paper-code")  # B_y/3 used as a variance
    if spec["calibration"] == "paper-code" and method == "fixeds":
        opts.setdefault("fixed_s", "psd+I")  # the authors' S estimate
    return opts


def _setup(modules):
    """Float64 JAX and the modules that registered the methods (for worker processes)."""
    enable_x64()
    for mod in modules:
        importlib.import_module(mod)


def _cell_seeds(spec, epsilon, J, rep):
    """The seeds of one cell: releases (without and with y^T y), adaSSP, the non-private
    reference and the fits, all derived from ``spec["seed"]``, epsilon, J and rep."""
    eps_idx = int(round(math.log(epsilon) * 1e6))
    ss = np.random.SeedSequence([spec["seed"], eps_idx % (2**31), J, rep])
    return tuple(int(s.generate_state(1, np.uint64)[0] >> 1) for s in ss.spawn(5))


def _design(spec):
    return {"intercept": spec.get("intercept", False), "average_rows": spec.get("average_rows", 1)}


def _cell_release(spec, ctx, epsilon, J, seed, include_yty=False):
    """The release of one cell for the [S, z] methods (or, ``include_yty``, for B&S)."""
    return bayesdp.release(ctx["X"], ctx["y"], epsilon=epsilon, delta=ctx["delta"],
                           bounds=_bounds(ctx, spec), nodes=J, seed=seed,
                           split=spec.get("split", "contiguous"), calibration=spec["calibration"],
                           include_yty=include_yty, feature_names=ctx["names"], **_design(spec))


def run_cell(spec, epsilon, J, rep, methods, cells_dir=None, modules=(), *, fitted=None,
             release=None, on_fit=None):
    """Run ``methods`` on one (epsilon, J, rep) cell; returns tidy rows (and writes cell files).

    ``modules``: modules to import first (those that registered the methods, for worker
    processes). ``fitted``: {method: (theta draws, point estimate or None, seconds, checks)} of
    methods already fitted for this cell (by :func:`_run_cells_batched`), with ``release`` the
    cell's release they were fitted to. ``on_fit``: called as ``on_fit(method, "start")`` before and
    ``on_fit(method, "done")`` after each method (the progress bar between cells), or None.
    """
    import pandas as pd

    _setup(modules)

    fitted = fitted or {}
    ctx = _context(spec)
    X, y = ctx["X"], ctx["y"]
    bounds = _bounds(ctx, spec)
    split = spec.get("split", "contiguous")
    design = _design(spec)
    dim = X.shape[1] + int(design["intercept"])
    s_rel, s_rel_yty, s_ada, s_np, s_fit = _cell_seeds(spec, epsilon, J, rep)
    rows = []
    rel, rel_yty = release, None
    ref = None
    need_ref = spec["mmd"] and any(m != "adassp" for m in methods)
    npv_draws = None
    if "nonprivate" in methods or need_ref:
        t0 = time.perf_counter()
        npv = bayesdp.fit_nonprivate(X, y, priors=ctx["priors"], seed=s_np, num_chains=1,
                                     num_samples=max(spec["mmd_draws"], 2),
                                     intercept=design["intercept"])
        npv_time = time.perf_counter() - t0
        npv_draws = np.asarray(npv.posterior["theta"]).reshape(-1, dim)
        ref = npv_draws if spec["mmd"] else None
    for method in methods:
        path = cell_path(cells_dir, method, epsilon, J, rep) if cells_dir is not None else None
        if path is not None and path.exists():
            continue
        if on_fit is not None:
            on_fit(method, "start")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            t0 = time.perf_counter()
            point, checks = None, {}
            if method == "nonprivate":
                draws = npv_draws
                point = bayesdp.inference.closed_form_moments(npv)[0]
                seconds = npv_time
                m_ref = None
            elif method in fitted:
                draws, point, seconds, checks = fitted[method]
                m_ref = ref
            elif method == "adassp":
                budget = "paper-code" if spec["calibration"] == "paper-code" else "paper"
                Xa, ba = X, bounds
                if design["intercept"]:  # adaSSP on the rows [1, x], ||[1, x]|| <= sqrt(1 + B_x^2)
                    Xa = np.column_stack([np.ones(len(X)), X])
                    ba = (math.sqrt(1.0 + bounds[0] ** 2), bounds[1])
                draws = bayesdp.adassp(Xa, y, epsilon=epsilon, delta=ctx["delta"], bounds=ba,
                                       nodes=J, seed=s_ada, budget=budget,
                                       calibration=spec["calibration"], split=split)
                seconds = time.perf_counter() - t0
                m_ref = None
            else:
                if method == "bs":
                    if rel_yty is None:
                        rel_yty = _cell_release(spec, ctx, epsilon, J, s_rel_yty, True)
                    r = rel_yty
                else:
                    if rel is None:
                        rel = _cell_release(spec, ctx, epsilon, J, s_rel)
                    r = rel
                t0 = time.perf_counter()
                idata = bayesdp.fit(r, method=method, seed=s_fit, priors=ctx["priors"],
                                    num_samples=spec["num_samples"], num_warmup=spec["num_warmup"],
                                    num_chains=1, progress_bar=False,
                                    **_method_options(method, spec))
                seconds = time.perf_counter() - t0
                draws = np.asarray(idata.posterior["theta"]).reshape(-1, dim)
                if "closed_form_mean" in idata.posterior.attrs:
                    point = bayesdp.inference.closed_form_moments(idata)[0]
                checks = _checks_of(idata.posterior.attrs)
                m_ref = ref
        vals = _metrics_for(method, draws, ctx, m_ref, spec, point)
        vals["seconds"] = seconds
        vals.update(checks)
        cell = pd.DataFrame([{"method": method, "epsilon": float(epsilon), "J": int(J),
                              "rep": int(rep), "metric": k, "value": float(v)}
                             for k, v in vals.items()], columns=_COLUMNS)
        if path is not None:
            _write_atomic(path, cell)
        rows.append(cell)
        if on_fit is not None:
            on_fit(method, "done")
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=_COLUMNS)


def _batchable(method):
    """Whether ``method`` has a batched fit (:func:`bayesdp.inference.fit_batch` runs it
    vectorised)."""
    return method in METHODS and METHODS[method].run_batch is not None


def _run_cells_batched(spec, epsilon, J, reps, cells_dir=None, modules=()):
    """Run the replications ``reps`` = [(rep, methods), ...] of one (epsilon, J) cell: every
    method with a batched fit (:func:`_batchable`) is fitted to all the replications that need
    it at once (:func:`bayesdp.inference.batch.fit_batch_results`, one compiled program), then
    each replication is finished by :func:`run_cell`. Results equal those of one
    :func:`run_cell` per replication up to floating-point rounding; a replication's
    ``seconds`` of a batched method is the batch's wall time divided by its size."""
    import pandas as pd

    _setup(modules)

    ctx = _context(spec)
    dim = ctx["X"].shape[1] + int(_design(spec)["intercept"])
    seeds = {r: _cell_seeds(spec, epsilon, J, r) for r, _ in reps}
    releases, fitted = {}, {r: {} for r, _ in reps}
    for method in dict.fromkeys(m for _, todo in reps for m in todo if _batchable(m)):
        todo = [r for r, ms in reps if method in ms and not (
            cells_dir is not None and cell_path(cells_dir, method, epsilon, J, r).exists())]
        if not todo:
            continue
        # silenced as run_cell silences its releases and fits (worker processes do not
        # inherit the caller's filters)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            if method == "bs":  # B&S's own release, with y^T y (as run_cell makes it)
                rels = [_cell_release(spec, ctx, epsilon, J, seeds[r][1], True) for r in todo]
            else:
                for r in todo:
                    if r not in releases:
                        releases[r] = _cell_release(spec, ctx, epsilon, J, seeds[r][0])
                rels = [releases[r] for r in todo]
            t0 = time.perf_counter()
            out = fit_batch_results(rels, method,
                                    seeds=[seeds[r][4] for r in todo], priors=ctx["priors"],
                                    num_samples=spec["num_samples"],
                                    num_warmup=spec["num_warmup"], num_chains=1,
                                    progress_bar=False, **_method_options(method, spec))
            seconds = (time.perf_counter() - t0) / len(todo)
            # fit's checks of each fit, as fit_batch runs them (not timed: seconds is sampling)
            checks = [_checks_of(finish_fit(f.release, method, f.seed, f.priors,
                                            f.result).posterior.attrs) for f in out]
        for r, f, c in zip(todo, out, checks):
            point = f.result.attrs.get("closed_form_mean")
            fitted[r][method] = (np.asarray(f.result.posterior["theta"]).reshape(-1, dim),
                                 None if point is None else np.asarray(point, dtype=float),
                                 seconds, c)
    rows = [run_cell(spec, epsilon, J, r, todo, cells_dir, modules, fitted=fitted[r],
                     release=releases.get(r)) for r, todo in reps]
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame(columns=_COLUMNS)


def _worker_init(counter=None):
    """Set up a spawned worker: float64 in JAX, and the worker pinned to a core of its own
    (worker i to the i-th core this process may use, round robin)."""
    enable_x64()
    if counter is not None and hasattr(os, "sched_setaffinity"):
        with counter.get_lock():
            i = counter.value
            counter.value += 1
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) > 1:
            os.sched_setaffinity(0, {cores[i % len(cores)]})


@contextlib.contextmanager
def _spawn_pool(n_workers):
    """compare's own process pool: ``n_workers`` spawned workers (:func:`_worker_init`), each
    started with one OpenBLAS thread (``OPENBLAS_NUM_THREADS=1`` unless the caller set it;
    restored on exit). JAX's CPU solves call scipy's OpenBLAS, which starts a thread per core
    it sees when it loads, before the worker is pinned; two such threads on one core wait for
    each other by spinning."""
    key = "OPENBLAS_NUM_THREADS"
    ours = key not in os.environ
    if ours:
        os.environ[key] = "1"  # read by the workers' numpy and scipy when they load
    ctx = multiprocessing.get_context("spawn")
    pool = cf.ProcessPoolExecutor(max_workers=n_workers, mp_context=ctx,
                                  initializer=_worker_init, initargs=(ctx.Value("i", 0),))
    try:
        yield pool
    finally:
        pool.shutdown(cancel_futures=True)
        if ours:
            os.environ.pop(key, None)


# -- the grid -----------------------------------------------------------------------------------


def _as_list(name, v, cast):
    vals = [v] if np.isscalar(v) else list(v)
    if not vals:
        raise BayesdpInputError(f"{name} must not be empty")
    try:
        return [cast(x) for x in vals]
    except (TypeError, ValueError):
        raise BayesdpInputError(f"{name}: expected numbers, got {v!r}") from None


def compare(data="simulated", methods=None, epsilons=(1.0,), nodes=(1, 5, 10), reps=5,
            calibration="exact", seed=0, out_dir=None, n_jobs=1, num_samples=1000,
            num_warmup=1000, *, n=100_000, d=2, data_dir=None, preprocessing="paper",
            bounds="data", mmd=None, mmd_draws=500, mmd_bandwidth=0.1, method_options=None,
            figures=True, verbose=False, split="contiguous", executor=None,
            progress=None, intercept=False, average_rows=1, x_mean=0.0,
            true_intercept=0.0, batch_reps=False) -> pd.DataFrame:
    """Run every method over epsilons x nodes x reps; return the tidy results DataFrame.

    Parameters
    ----------
    data : "simulated", a data set name ("powerplant", "bikesharing", "airquality", "3droad")
        or a file path (see :mod:`bayesdp.paper.datasets`).
    methods : list of names, default every available one of normalx, fixeds, fast, bs, adassp,
        nonprivate.
    epsilons, nodes : grids of epsilon and of the number of holders J. reps : replications.
    calibration : "exact" or "paper-code" (the authors' code; reproduces Table 1; not DP).
    seed : master seed (data simulation, Lambda, and every cell's seeds derive from it).
    out_dir : folder for cell files, results.csv, summary.md, figures; None keeps all in memory
        (no resume). Created if missing, with any missing parent folders.
    n_jobs : 1 (default) runs every cell in this process, one after the other; k > 1 starts k
        worker processes (``spawn``), which re-import the calling script, so a script must then
        call compare under ``if __name__ == "__main__":``; None: one process per core.
    executor : a ``concurrent.futures.Executor`` (or any object with ``submit(fn, *args)``
        returning futures; e.g. ``ThreadPoolExecutor(2)``, your own ``ProcessPoolExecutor``, a
        dask ``Client.get_executor()``) that runs the cells instead; not shut down here. Not
        together with ``n_jobs`` > 1. Results do not depend on how the cells are run.
    batch_reps : fit the replications of each (epsilon, J) together: the methods with a batched
        fit ("fast", "bs" and the hand-written MCMC kernels such as "fixeds";
        ``bayesdp.inference.fit_batch``) run all replications in one compiled program, the others
        (NUTS) one by one. One task per (epsilon, J) then goes to the ``executor``; with ``n_jobs``
        = k > 1, k tasks of consecutive replications per (epsilon, J), so that every worker gets
        a share of every cell. Results
        equal the default's up to floating-point rounding (1e-10 relative); ``seconds`` of a
        batched method is the batch's wall time divided by the number of replications in it.
    num_samples, num_warmup : kept draws and burn-in of the MCMC methods (one chain per cell).
    n, d : simulated data size. data_dir : folder of the named data sets (else $BAYESDP_DATA_DIR).
    preprocessing : "paper" or "sound" (real data). bounds : "data" (read off the data, as the
        authors; not private) or "public" (simulated data only: distribution-derived bounds).
    split : how a count J splits the rows over holders: "contiguous" (default; the paper's
        protocol, so its experiments and earlier result folders reproduce; not add/remove
        private, see docs/privacy.md, but the releases made here stay inside the experiment) or
        "random" (bayesdp's private default for real releases). On data in random order both give
        statistically equivalent results.
    mmd : compute the MMD metrics (default: when d <= 5). mmd_draws, mmd_bandwidth : draws per
        posterior and kernel variance h. method_options : {method: {option: value}} for ``fit``.
    verbose : print a line per finished cell, "[k/total] eps=.. J=.. rep=..: methods (seconds)".
    progress : a progress bar over the cells on stderr (count, total, time left): None
        (default) when stderr is a terminal, True / False to force it (``bayesdp.progress``).
    intercept : release and fit the rows [1, x] (appendix B.2); the reference theta then has the
        intercept first (the truth, or least squares with an intercept), adaSSP and the
        non-private posterior use [1, x] too, and only the methods that fit intercept releases
        may be asked for (those whose record says ``intercept``, ``bayesdp.METHODS``).
    average_rows : k > 1 releases rows averaged in random groups of k (appendix B.1) for every
        [S, z] method; adaSSP and the non-private reference use the rows as they are.
    x_mean, true_intercept : simulated data only: feature mean and true intercept (non-centred
        data, ``bayesdp.simulate``); the simulated prediction error then averages over rows
        [1, x] of that distribution (a fit without an intercept predicts with theta_0 = 0).
    """
    if calibration not in _CALIBRATIONS:
        raise BayesdpInputError(f"calibration must be one of {_CALIBRATIONS}, got {calibration!r}")
    methods = default_methods() if methods is None else [str(m).lower() for m in
                                                          ([methods] if isinstance(methods, str)
                                                           else methods)]
    for m in methods:
        if m not in METHODS and m not in BASELINES:
            raise BayesdpInputError(
                f"methods: unknown method {m!r}; choose from {sorted(set(METHODS) | set(BASELINES))}")
    epsilons = _as_list("epsilons", epsilons, float)
    if any(not (e > 0 and math.isfinite(e)) for e in epsilons):
        raise BayesdpInputError(f"epsilons must be finite and > 0, got {epsilons}")
    nodes = _as_list("nodes", nodes, int)
    if any(J < 1 for J in nodes):
        raise BayesdpInputError(f"nodes must be >= 1, got {nodes}")
    if isinstance(reps, bool) or int(reps) != reps or reps < 1:
        raise BayesdpInputError(f"reps must be a whole number >= 1, got {reps!r}")
    if bounds not in ("data", "public"):
        raise BayesdpInputError(f"bounds must be 'data' or 'public', got {bounds!r}")
    if n_jobs is not None and (isinstance(n_jobs, bool) or int(n_jobs) != n_jobs or n_jobs < 1):
        raise BayesdpInputError(f"n_jobs must be a whole number >= 1 or None, got {n_jobs!r}")
    if executor is not None:
        from concurrent.futures import ThreadPoolExecutor

        nuts = [m for m in methods if m in THREAD_UNSAFE_METHODS]
        if isinstance(executor, ThreadPoolExecutor) and nuts:
            raise BayesdpInputError(
                f"executor: a ThreadPoolExecutor runs the cells in threads of this process, and "
                f"numpyro's effect handlers are one stack per process, so two threads tracing a "
                f"NUTS model at once collide; methods {nuts} run NUTS. Use n_jobs=k (worker "
                "processes) or a ProcessPoolExecutor, or leave those methods out")
        if not callable(getattr(executor, "submit", None)):
            raise BayesdpInputError("executor must have a submit(fn, *args) method like a "
                                    f"concurrent.futures.Executor, got {type(executor).__name__}")
        if n_jobs is None or n_jobs > 1:
            raise BayesdpInputError("give executor or n_jobs > 1, not both (the executor decides "
                                    "how many cells run at once)")

    k = check_design(intercept, average_rows)
    if intercept:
        with_intercept = [m for m, record in METHODS.items() if record.intercept]
        bad = [m for m in methods if m not in with_intercept and m not in BASELINES]
        if bad:
            raise BayesdpInputError(
                f"methods: {bad} do not fit releases with an intercept; with intercept=True "
                f"choose from {sorted(set(with_intercept) | set(BASELINES))}")
    if (x_mean != 0 or true_intercept != 0) and str(data).lower() != "simulated":
        raise BayesdpInputError("x_mean and true_intercept are options of simulated data only")
    if out_dir is not None:  # checked before any work; created with its parents
        check_output_folder(out_dir, "out_dir")
        out_dir = Path(out_dir)
    if str(data).lower() == "simulated":
        spec = {"kind": "simulated", "n": int(n), "d": int(d), "seed": int(seed), "bounds": bounds}
        dim = int(d)
    else:
        from .datasets import canonical_name, find_dataset_file

        if not Path(str(data)).suffix and canonical_name(data) is not None:
            source = str(find_dataset_file(data, data_dir).resolve())
        elif Path(str(data)).is_file():
            source = str(Path(data).resolve())
        else:
            raise BayesdpInputError(f"data: {data!r} is neither 'simulated', a known data set "
                                    "name nor an existing file")
        spec = {"kind": "file", "data": source, "data_dir": None,
                "preprocessing": preprocessing, "seed": int(seed), "bounds": "data"}
        dim = None

    if check_split(split) != "contiguous":
        spec["split"] = split  # absent = contiguous, so earlier result folders still resume
    # absent = the defaults, so earlier result folders still resume
    for key, value, default in (("intercept", bool(intercept), False), ("average_rows", k, 1),
                                ("x_mean", float(x_mean), 0.0),
                                ("true_intercept", float(true_intercept), 0.0)):
        if value != default:
            spec[key] = value
    spec.update({"calibration": calibration, "num_samples": int(num_samples),
                 "num_warmup": int(num_warmup), "mmd_draws": int(mmd_draws),
                 "mmd_bandwidth": float(mmd_bandwidth), "method_options": method_options or {}})
    if mmd is None:
        if dim is None:
            dim = _context(spec)["X"].shape[1]
        mmd = dim <= 5
    spec["mmd"] = bool(mmd)

    cells_dir = None
    if out_dir is not None:
        cells_dir = out_dir / "cells"
        out_dir.mkdir(parents=True, exist_ok=True)
        cells_dir.mkdir(exist_ok=True)
        cfg_path = out_dir / "config.json"
        if cfg_path.exists():
            old = json.loads(cfg_path.read_text())
            if old.get("spec") != json.loads(json.dumps(spec)):
                raise BayesdpInputError(
                    f"out_dir: {str(out_dir)!r} holds a run with different settings "
                    f"({old.get('spec')}); use a new out_dir")
        cfg = {"spec": spec, "methods": methods, "epsilons": epsilons, "nodes": nodes,
               "reps": int(reps), "note": "bounds read off the data are not private"
               if bounds == "data" else "public bounds"}
        tmp = cfg_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cfg, indent=2))
        os.replace(tmp, cfg_path)

    modules = sorted({METHODS[m].run.__module__ for m in methods if m in METHODS})
    n_jobs = (os.cpu_count() or 1) if n_jobs is None else int(n_jobs)
    # batched replications on k > 1 workers: k tasks per (e, J), so that every worker gets a
    # share of every cell (with a whole cell per task, a core sits idle while the longest run)
    n_parts = n_jobs if executor is None and n_jobs > 1 else 1
    tasks = []
    for e in epsilons:
        for J in nodes:
            group = []
            for r in range(int(reps)):
                todo = [m for m in methods if cells_dir is None
                        or not cell_path(cells_dir, m, e, J, r).exists()]
                if todo:
                    group.append((r, todo))
            if batch_reps and group:  # the replications of (e, J) still to do, in n_parts
                for part in np.array_split(np.arange(len(group)), min(n_parts, len(group))):
                    part = [group[i] for i in part]
                    tasks.append((e, J, tuple(r for r, _ in part), part))
            else:
                tasks += [(e, J, r, todo) for r, todo in group]
    label = "simulated" if spec["kind"] == "simulated" else Path(str(data)).name
    results = _run_tasks(spec, tasks, cells_dir, modules, n_jobs, executor, verbose,
                         progress, f"compare {label} ({calibration})")
    import pandas as pd

    if cells_dir is not None:
        parts = [pd.read_csv(cell_path(cells_dir, m, e, J, r))
                 for e in epsilons for J in nodes for r in range(int(reps)) for m in methods]
        df = pd.concat(parts, ignore_index=True)
    else:
        df = pd.concat(results, ignore_index=True) if results else pd.DataFrame(columns=_COLUMNS)
    order = {m: i for i, m in enumerate(methods)}
    df = df.sort_values(["metric", "epsilon", "J", "rep", "method"],
                        key=lambda s: s.map(order) if s.name == "method" else s)
    df = df.reset_index(drop=True)[_COLUMNS]
    warn_checks(df)
    if out_dir is not None:
        _write_atomic(out_dir / "results.csv", df)
        title = f"data={data}, calibration={calibration}, reps={reps}, " \
                f"num_warmup={num_warmup}, num_samples={num_samples}, seed={seed}"
        (out_dir / "summary.md").write_text(summary_markdown(df, title=title))
        if figures:
            _plot_results(df, out_dir)
    return df


def warn_checks(df: pd.DataFrame, *, stacklevel=3) -> None:
    """Say, once for a whole grid of results, which fits did not pass ``fit``'s checks (the
    :data:`CHECKS` rows): a :class:`~bayesdp.ConvergenceWarning` for the MCMC fits whose chains
    did not converge, a :class:`~bayesdp.CalibrationWarning` for the fixedS fits whose 90%
    intervals the noise on S makes too narrow and another for the fits whose S_hat check
    failed. ``compare`` silences the warnings of its single
    fits (one per cell would bury the run's output) and calls this instead."""
    key = ["method", "epsilon", "J", "rep"]
    rows = df[df["metric"].isin(CHECKS)].pivot_table(index=key, columns="metric",
                                                     values="value", aggfunc="first")

    def where(r):
        return f"{r.Index[0]} at eps={r.Index[1]:g}, J={r.Index[2]}, rep={r.Index[3]}"

    def per_method(sub):
        return ", ".join(f"{m} {n}" for m, n in sub.groupby(level="method").size().items())

    def failing(check, fails, worst_first, ascending):
        """The fits that report ``check``, those of them that fail it, and the worst one."""
        if check not in rows:
            return rows.iloc[:0], rows.iloc[:0], None
        fits = rows[rows[check].notna()]
        bad = fits[fails(fits[check])]
        worst = next(bad.sort_values(worst_first, ascending=ascending).itertuples(), None)
        return fits, bad, worst

    fits, bad, w = failing("converged", lambda c: c < 1, "max_r_hat", False)
    if w is not None:
        warnings.warn(
            f"compare: {len(bad)} of {len(fits)} MCMC fits did not pass fit's convergence "
            f"check (r_hat <= {RHAT_MAX} and bulk ESS >= {ESS_MIN} for every sampled "
            f"variable; {per_method(bad)}); the worst, {where(w)}: max r_hat "
            f"{w.max_r_hat:.3f}, min bulk ESS {w.min_ess_bulk:.0f}. Their metrics describe "
            "chains that had not converged: raise num_warmup and num_samples (the paper "
            "ran 5000 + 5000). The rows 'converged', 'max_r_hat' and 'min_ess_bulk' of the "
            "results give every fit's.", ConvergenceWarning, stacklevel=stacklevel)
    fits, bad, w = failing("s_noise_mean_coverage", lambda c: c < S_NOISE_COVERAGE_MIN,
                           "s_noise_mean_coverage", True)
    if w is not None:
        warnings.warn(
            f"compare: in {len(bad)} of {len(fits)} fits of the methods that fix S "
            f"({per_method(bad)}) the noise on S they leave out makes theta's 90% "
            f"intervals too narrow: if the 'eiv' posterior is right they hold theta less "
            f"than {S_NOISE_COVERAGE_MIN:.0%} of the time on average (lowest {where(w)}: "
            f"{w.s_noise_mean_coverage:.0%}). The rows 's_noise_mean_coverage' give every "
            "fit's; docs/methods.md, 'Does the noise on S matter?'.",
            CalibrationWarning, stacklevel=stacklevel)
    fits, bad, w = failing("s_hat_agrees", lambda c: c < 1, "s_hat_max_abs_z", False)
    if w is not None:
        warnings.warn(
            f"compare: in {len(bad)} of {len(fits)} fits of the methods that sample S "
            f"({per_method(bad)}) the release and the posterior disagree along some "
            f"direction of the features (the posterior predictive check of S_hat; largest "
            f"|z| {w.s_hat_max_abs_z:.1f}, {where(w)}): theta's intervals along it rest on "
            "the prior of Sigma_x. The rows 's_hat_max_abs_z' and 's_hat_agrees' give "
            "every fit's; docs/methods.md, 'Does the release agree with the prior of "
            "Sigma_x?'.", CalibrationWarning, stacklevel=stacklevel)


def _run_tasks(spec, tasks, cells_dir, modules, n_jobs, executor, verbose, progress, desc):
    """Run the cells: in this process, in ``n_jobs`` spawned workers, or on ``executor``;
    with a progress bar and, if ``verbose``, a line per cell. The bar counts fits (one method
    on one cell), so it moves between cells; run in this process it also names the fit under
    way (eps, J, rep, method)."""
    results = []
    if not tasks:
        return results
    total = len(tasks)

    def n_fits(r, todo):  # the fits of one task (a batch: todo is [(rep, methods)])
        return sum(len(ms) for _, ms in todo) if isinstance(r, tuple) else len(todo)
    # run_cell silences fit's warnings with warnings.catch_warnings, which is not thread-safe:
    # cells running in threads could leave "ignore" in the process's filters. Setting it here, in
    # the calling thread, for the whole run keeps it on while cells run and restores it after.
    fits_total = sum(n_fits(r, todo) for _, _, r, todo in tasks)
    with warnings.catch_warnings(), pg.bar(fits_total, desc, progress=progress,
                                           unit="fit") as bar:
        warnings.simplefilter("ignore", UserWarning)
        t0 = time.perf_counter()
        counted = [0]  # fits of the running task already counted by on_fit

        def done(k, e, J, r, todo):
            bar.update(n_fits(r, todo) - counted[0])
            counted[0] = 0
            if verbose:
                if isinstance(r, tuple):  # a batch of replications: todo is [(rep, methods)]
                    reps = ",".join(str(i) for i in r)
                    names = ", ".join(dict.fromkeys(m for _, ms in todo for m in ms))
                    what = f"reps={reps}: {names}"
                else:
                    what = f"rep={r}: {', '.join(todo)}"
                pg.write(f"[{k}/{total}] eps={e:g} J={J} {what} "
                         f"({time.perf_counter() - t0:.0f} s elapsed)", bar)

        def task(e, J, r, todo):  # the function and arguments of one task
            if isinstance(r, tuple):
                return _run_cells_batched, (spec, e, J, todo, cells_dir, modules)
            return run_cell, (spec, e, J, r, todo, cells_dir, modules)

        if executor is None and (n_jobs <= 1 or total == 1):
            for k, (e, J, r, todo) in enumerate(tasks, 1):
                fn, args = task(e, J, r, todo)
                if fn is run_cell:
                    def on_fit(method, event, e=e, J=J, r=r):
                        if event == "start":
                            bar.set_postfix_str(f"eps={e:g} J={J} rep={r}: {method}")
                        else:
                            bar.update(1)
                            counted[0] += 1
                    results.append(fn(*args, on_fit=on_fit))
                else:
                    results.append(fn(*args))
                done(k, e, J, r, todo)
            return results
        ours = executor is None
        with _spawn_pool(min(n_jobs, total)) if ours else contextlib.nullcontext(executor) as ex:
            try:
                futs = {ex.submit(fn, *args): t for t in tasks for fn, args in [task(*t)]}
                # futures of other executors (not concurrent.futures ones) are awaited in order
                order = (cf.as_completed(futs) if all(isinstance(f, cf.Future) for f in futs)
                         else list(futs))
                for k, f in enumerate(order, 1):
                    results.append(f.result())
                    done(k, *futs[f])
            except BrokenProcessPool as exc:
                if not ours:
                    raise
                raise BayesdpError(
                    "compare: a worker process died. Workers re-import the calling script: call "
                    "compare(n_jobs > 1) under 'if __name__ == \"__main__\":', or use n_jobs=1 or "
                    "executor=ThreadPoolExecutor(...)") from exc
    return results


# -- reporting ----------------------------------------------------------------------------------


def summarize(df: pd.DataFrame, level=0.90) -> pd.DataFrame:
    """Mean and ``level`` interval per method, epsilon, J, metric: the percentile bootstrap
    interval of the mean over replications (:func:`bayesdp.paper.metrics.bootstrap_mean_interval`),
    which stays > 0 for positive metrics (MSE, seconds), unlike mean +- t sd/sqrt(reps)."""
    import pandas as pd

    rows = []
    for (metric, method, eps, J), g in df.groupby(["metric", "method", "epsilon", "J"], sort=False):
        mean, lo, hi = bootstrap_mean_interval(g["value"].to_numpy(), level)
        rows.append({"metric": metric, "method": method, "epsilon": eps, "J": J, "mean": mean,
                     "lower": lo, "upper": hi, "reps": int(g["value"].notna().sum())})
    return pd.DataFrame(rows)


def _fmt(v):
    if not np.isfinite(v):
        return "-"
    return f"{v:.4f}" if 1e-3 <= abs(v) < 1e3 else f"{v:.3g}"


def summary_markdown(df: pd.DataFrame, title="") -> str:
    """Markdown tables (one per metric): rows (epsilon, J), columns methods, 'mean [90% CI]'."""
    s = summarize(df)
    methods = list(dict.fromkeys(df["method"]))
    out = [f"# compare summary\n\n{title}\n\nmean over replications [90% percentile bootstrap "
           "interval of the mean: 5% and 95% quantiles of the means of 4000 resamples of the "
           "replications; > 0 for positive metrics]\n"]
    for metric in [m for m in METRICS + CHECKS if m in set(s["metric"])]:
        sm = s[s["metric"] == metric]
        out.append(f"\n## {metric}\n")
        out.append("| epsilon | J | " + " | ".join(methods) + " |")
        out.append("| --- | --- | " + " | ".join("---" for _ in methods) + " |")
        for (eps, J), g in sm.groupby(["epsilon", "J"]):
            cells = []
            for m in methods:
                r = g[g["method"] == m]
                if r.empty:
                    cells.append("")
                else:
                    r = r.iloc[0]
                    ci = "" if not np.isfinite(r["lower"]) else f" [{_fmt(r['lower'])}, {_fmt(r['upper'])}]"
                    cells.append(_fmt(r["mean"]) + ci)
            out.append(f"| {eps:g} | {J} | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _plot_results(df: pd.DataFrame, out_dir) -> list:
    """Figure 2/4-style plots: metric mean (log) vs epsilon (log), one panel per J, a line per
    method with 90% intervals (lower arms that would cross zero are omitted); non-private as a
    dashed line. With one epsilon, x is J instead."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = summarize(df)
    out_dir = Path(out_dir)
    paths = []
    methods = list(dict.fromkeys(df["method"]))
    eps_vals = sorted(set(s["epsilon"]))
    J_vals = sorted(set(s["J"]))
    for metric in [m for m in ("estimation_mse", "prediction_mse", "mmd2_paper")
                   if m in set(s["metric"])]:
        sm = s[s["metric"] == metric]
        by_J = len(eps_vals) > 1
        panels = J_vals if by_J else [None]
        fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.6), squeeze=False)
        for ax, J in zip(axes[0], panels):
            sub = sm[sm["J"] == J] if by_J else sm
            xkey = "epsilon" if by_J else "J"
            for m in methods:
                g = sub[sub["method"] == m].sort_values(xkey)
                if g.empty:
                    continue
                if m == "nonprivate":
                    ax.axhline(g["mean"].mean(), color="k", ls="--", lw=1, label="non-private")
                    continue
                lower = g["lower"].to_numpy()
                # on log axes an interval reaching below zero cannot be drawn: omit its lower arm
                lower = np.where(lower > 0, lower, g["mean"].to_numpy())
                yerr = np.vstack([g["mean"] - lower, g["upper"] - g["mean"]])
                yerr = np.where(np.isfinite(yerr), np.maximum(yerr, 0), 0)
                ax.errorbar(g[xkey], g["mean"], yerr=yerr, marker="o", ms=3, capsize=2, label=m)
            if by_J:
                ax.set_xscale("log")
                ax.set_title(f"J = {J}")
            else:
                ax.set_xticks(J_vals)
                ax.set_title(f"epsilon = {eps_vals[0]:g}")
            if (sub["mean"] > 0).all():
                ax.set_yscale("log")
            ax.set_xlabel(xkey)
            ax.set_ylabel(metric)
        axes[0][0].legend(fontsize=7)
        fig.tight_layout()
        p = out_dir / f"fig_{metric}.png"
        fig.savefig(p, dpi=120)
        plt.close(fig)
        paths.append(p)
    return paths
