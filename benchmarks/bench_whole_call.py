"""The whole call a user waits for: a fit in a fresh Python process (first and second call) and
from the command line with an empty and a warm compilation cache, with the smallest ESS.

    .venv/bin/python benchmarks/bench_whole_call.py                          # d = 5 and 20, J = 10
    .venv/bin/python benchmarks/bench_whole_call.py --d 5 --methods normalx
    .venv/bin/python benchmarks/bench_whole_call.py --d 5 --methods eiv fast  # the closed forms

For each d, the paper's simulation (n = 1e5) is released once (eps = 1, seed 1) into a file;
then, per method, each in its own process with every default:

- Python: ``import bayesdp; fit(load_release(file), method)`` twice (the second on the same
  shapes), the persistent cache off: seconds of the whole process, of the first and of the
  second call; the smallest bulk ESS over every sampled parameter (``diagnose``) and ESS per
  second of the second call;
- command line: ``bayesdp fit file --method ...`` with an empty cache folder (cold), then again
  with the folder it filled (warm): seconds of the process, and warm over cold (the baseline of
  this run).

Run it on an otherwise idle machine; the load average is printed.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import bayesdp

_PY = r"""
import sys, time, warnings
t0 = time.perf_counter()
warnings.simplefilter("ignore")
import bayesdp
rel = bayesdp.load_release(sys.argv[1])
times = []
for seed in (0, 1):
    t = time.perf_counter()
    idata = bayesdp.fit(rel, method=sys.argv[2], seed=seed, progress_bar=False)
    times.append(time.perf_counter() - t)
s = bayesdp.diagnose(idata, verbose=False)["summary"]
ess = float(s["ess_bulk"].min()) if "ess_bulk" in s else float("nan")
print(times[0], times[1], time.perf_counter() - t0, ess)
"""


def _run(cmd, env):
    t = time.perf_counter()
    out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
    return time.perf_counter() - t, out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--d", type=int, nargs="+", default=[5, 20])
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--methods", nargs="+", default=["eiv", "fast", "fixeds", "normalx"])
    a = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'method':8s} {'d':>3s} | python: {'first':>6s} {'second':>6s} {'process':>7s} "
          f"{'min ESS':>7s} {'ESS/s':>7s} | command: {'cold':>6s} {'warm':>6s} {'warm/cold':>9s}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for d in a.d:
            sim = bayesdp.simulate(100_000, d, seed=d)
            path = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds,
                                   nodes=a.nodes, seed=1).save(tmp / f"release_d{d}.json")
            for method in a.methods:
                env = dict(os.environ, BAYESDP_COMPILATION_CACHE="off")
                _, out = _run([sys.executable, "-c", _PY, str(path), method], env)
                first, second, process, ess = map(float, out.split())
                cache = tmp / f"cache_{method}_{d}"
                env = dict(os.environ, BAYESDP_COMPILATION_CACHE=str(cache))
                cmd = [sys.executable, "-m", "bayesdp.cli", "fit", str(path), "--method", method,
                       "--no-progress", "--out", str(tmp / "posterior.nc")]
                cold, _ = _run(cmd, env)
                warm, _ = _run(cmd, env)
                print(f"{method:8s} {d:3d} | python: {first:6.2f} {second:6.2f} {process:7.2f} "
                      f"{ess:7.0f} {ess / second:7.0f} | command: {cold:6.2f} {warm:6.2f} "
                      f"{warm / cold:9.2f}", flush=True)


if __name__ == "__main__":
    main()
