"""Scoring a big table: `bayesdp predict` against `bayesdp fit` on the same release, time and peak
memory, both as commands in fresh processes (imports included), measured in the same run.

The README's release (simulate n = 20,000, d = 3, seed 1; eps 1, 4 holders) is fitted with the
default method; `predict` then scores --rows files of new rows (standard normal, d = 3). Printed
per size: wall time and peak RSS of each command and the ratio predict / fit (issue 54's
target: within 3x, peak memory under 1.5 GB and independent of the rows).

    python benchmarks/bench_predict.py                     # 200,000 and 2,000,000 rows
    python benchmarks/bench_predict.py --rows 200000 --interval hdi
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def run(args):
    """(seconds, peak RSS in bytes) of `bayesdp ARGS` in a fresh process."""
    # the peak of the process's own memory map (VmHWM; ru_maxrss carries a forking parent's
    # peak across exec)
    code = ("import sys; from bayesdp.cli import console_main; s = console_main(); "
            "sys.stderr.write('RSS %s\\n' % [l for l in open('/proc/self/status') "
            "if l.startswith('VmHWM')][0].split()[1]); sys.exit(s)")
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    elapsed = time.perf_counter() - t
    if done.returncode:
        raise SystemExit(f"bayesdp {' '.join(args)} failed:\n{done.stderr}")
    rss = int(done.stderr.rsplit("RSS ", 1)[1].split()[0]) * 1024
    return elapsed, rss


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[200_000, 2_000_000])
    ap.add_argument("--interval", default="eti", choices=["eti", "hdi"])
    a = ap.parse_args(argv)
    import pandas as pd

    import bayesdp

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        sim = bayesdp.simulate(n=20_000, d=3, seed=1)
        rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=4,
                              seed=0)
        rel.save(tmp / "release.json")
        t_fit, rss_fit = run(["fit", str(tmp / "release.json"), "--seed", "0",
                              "--out", str(tmp / "posterior.nc")])
        print(f"bayesdp fit: {t_fit:.1f} s, peak RSS {rss_fit / 2**20:.0f} MiB")
        for m in a.rows:
            rows = tmp / f"rows{m}.csv"
            X = np.random.default_rng(m).standard_normal((m, 3))
            pd.DataFrame(X, columns=["x0", "x1", "x2"]).to_csv(rows, index=False,
                                                                float_format="%.6g")
            t, rss = run(["predict", str(tmp / "posterior.nc"), str(rows), "--interval",
                          a.interval, "--out", str(tmp / "pred.csv")])
            print(f"bayesdp predict, {m:>9,} rows ({a.interval}): {t:6.1f} s (x{t / t_fit:.2f} "
                  f"the fit), peak RSS {rss / 2**20:.0f} MiB")


if __name__ == "__main__":
    main()
