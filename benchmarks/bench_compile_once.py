"""Share of a fit spent compiling, first and second call in one process: bayesdp's compiled run
against numpyro's ``MCMC.run`` (the baseline, swapped in within the same process).

    .venv/bin/python benchmarks/bench_compile_once.py                       # d = 5, J = 10
    .venv/bin/python benchmarks/bench_compile_once.py --d 20 --methods fixeds normalx

The paper's simulation (n = 1e5) is released twice (seeds 1 and 2, the same shapes). For each
method and each way of running the chains, in this order: a first ``bayesdp.fit`` of release 1,
then a second of release 2 (every default; the persistent compilation cache is off, so only what
the process keeps counts). The second run's first call may reuse what the first run compiled
(the model's pieces, the log-likelihood group): for first calls, run each alone (``--runs``). The seconds JAX spends tracing, lowering and compiling are read from
its own counters (``jax.monitoring`` duration events). Printed per call: the wall time, the
compile time and its share, and the second call over the baseline's second call. Run it on an
otherwise idle machine; the ratios are what count.
"""

import argparse
import os
import time
import warnings

os.environ["BAYESDP_COMPILATION_CACHE"] = "off"  # in-process reuse only

import numpy as np  # noqa: E402

import bayesdp  # noqa: E402

_COMPILE_EVENTS = ("/jax/core/compile/backend_compile_duration",
                   "/jax/core/compile/jaxpr_to_mlir_module_duration",
                   "/jax/core/compile/jaxpr_trace_duration")
_compile_seconds = [0.0]


def _listen():
    import jax

    def on_duration(event, duration, **kwargs):
        if event in _COMPILE_EVENTS:
            _compile_seconds[0] += duration

    jax.monitoring.register_event_duration_secs_listener(on_duration)


def _numpyro_run(mcmc, seed, data, extra_fields, init_params=None, progress_bar=False):
    """The baseline: numpyro's own ``MCMC.run`` (what bayesdp called before), same outputs."""
    import jax
    from bayesdp.inference import mcmc as M

    mcmc.run(M._keys(seed), data, extra_fields=extra_fields, init_params=init_params)
    jax.jit(__import__("numpyro.util", fromlist=["_fori_collect_loop"])._fori_collect_loop,
            static_argnums=(0, 1), donate_argnums=3).clear_cache()
    return ({k: np.asarray(v) for k, v in mcmc.get_samples(group_by_chain=True).items()},
            jax.tree.map(np.asarray, mcmc.get_extra_fields(group_by_chain=True)))


def _use(run):
    from bayesdp.inference import kernel_runner, mcmc, nuts

    mcmc._MCMC_CACHE.clear()
    kernel_runner._run_mcmc = nuts._run_mcmc = run


def _timed_fit(rel, method, seed):
    c0, t0 = _compile_seconds[0], time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bayesdp.fit(rel, method=method, seed=seed, progress_bar=False)
    return time.perf_counter() - t0, _compile_seconds[0] - c0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--methods", nargs="+", default=["fixeds", "normalx"])
    ap.add_argument("--runs", nargs="+", choices=["numpyro", "bayesdp"],
                    default=["numpyro", "bayesdp"],
                    help="which runs, in this order (one alone: a first call that shares no "
                         "compiled code with the other's)")
    a = ap.parse_args()
    _listen()
    from bayesdp.inference import mcmc

    sim = bayesdp.simulate(100_000, a.d, seed=a.d)
    rels = [bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds,
                            nodes=a.nodes, seed=s) for s in (1, 2)]
    print(f"d = {a.d}, J = {a.nodes}, n = 1e5, eps = 1, defaults; load {os.getloadavg()[0]:.2f}")
    print(f"{'method':8s} {'run':9s} {'call':6s} {'seconds':>8s} {'compile':>8s} {'share':>6s}"
          f" {'vs numpyro':>10s}")
    for method in a.methods:
        second = {}
        for name in a.runs:
            run = _numpyro_run if name == "numpyro" else mcmc._run_mcmc
            _use(run)
            for call, rel in (("first", rels[0]), ("second", rels[1])):
                t, c = _timed_fit(rel, method, seed=3)
                if call == "second":
                    second[name] = t
                ratio = (f"{t / second['numpyro']:10.2f}" if call == "second" and name == "bayesdp"
                         and "numpyro" in second else "")
                print(f"{method:8s} {name:9s} {call:6s} {t:8.2f} {c:8.2f} {c / t:6.0%} {ratio}",
                      flush=True)
        _use(mcmc._run_mcmc)


if __name__ == "__main__":
    main()
