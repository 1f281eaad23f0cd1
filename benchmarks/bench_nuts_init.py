"""Seconds of the first and second NUTS fit in a new process: bayesdp's compiled initialisation
(``bayesdp.inference.nuts._compiled_init``) against numpyro's own, which runs HMC's init
operation by operation. Each variant runs in its own fresh Python process (what a command-line
fit pays), alternating, and the ratio is printed.

    python benchmarks/bench_nuts_init.py                          # normalx, d = 5, J = 10
    python benchmarks/bench_nuts_init.py --d 2 --J 1 --iterations 1000 --repeat 2

Timing claims belong here, never in tests. The machine is shared: run it alone for clean numbers.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = r"""
import sys, time, warnings
import jax
jax.config.update("jax_enable_x64", True)
import bayesdp
from bayesdp.inference import nuts
variant, method, d, J, it = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
if variant == "numpyro":  # numpyro's NUTS as is: init run op by op
    from numpyro.infer import NUTS
    nuts._nuts = lambda model, **kw: NUTS(model, **kw)
sim = bayesdp.simulate(100_000, d, seed=d * 100 + J)
rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=J, seed=7)
warnings.simplefilter("ignore")
out = []
for _ in range(2):
    t0 = time.perf_counter()
    bayesdp.fit(rel, method=method, seed=1, progress_bar=False, num_warmup=it, num_samples=it)
    out.append(time.perf_counter() - t0)
print(*out)
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", default="normalx")
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--J", type=int, default=10)
    ap.add_argument("--iterations", type=int, default=20,
                    help="warm-up and kept iterations of each fit (default 20 + 20)")
    ap.add_argument("--repeat", type=int, default=1, help="processes per variant")
    a = ap.parse_args(argv)
    times = {"numpyro": [], "compiled": []}
    for _ in range(a.repeat):
        for variant in times:
            r = subprocess.run([sys.executable, "-c", CHILD, variant, a.method, str(a.d),
                                str(a.J), str(a.iterations)],
                               capture_output=True, text=True, check=True)
            times[variant].append([float(v) for v in r.stdout.split()[-2:]])
    print(f"{a.method}, d = {a.d}, J = {a.J}, {a.iterations} + {a.iterations} iterations, "
          f"{a.repeat} process(es) per variant; seconds (first fit, second fit):")
    for variant, ts in times.items():
        first, second = min(t[0] for t in ts), min(t[1] for t in ts)
        print(f"  {variant:9s} init: {first:6.1f} {second:6.1f}")
    f0 = min(t[0] for t in times["numpyro"]) / min(t[0] for t in times["compiled"])
    f1 = min(t[1] for t in times["numpyro"]) / min(t[1] for t in times["compiled"])
    print(f"  numpyro / compiled: first fit {f0:.2f}x, second fit {f1:.2f}x")


if __name__ == "__main__":
    main()
