"""Seconds and ESS per second of a default NUTS fit (``normalx``) with its chains vectorised on
one CPU device (what ``bayesdp.fit`` does in a Python process where JAX has one device) against
the chains in parallel on one device each (what the ``bayesdp`` command does: it asks JAX for 4
devices before JAX starts; in Python, ``numpyro.set_host_device_count(4)``). Each variant runs
in its own fresh process, alternating; each process fits the same release twice (the second
fit reuses the compiled sampler), and the ratios are printed.

    python benchmarks/bench_chain_method.py                  # normalx, d = 5, J = 10, defaults
    python benchmarks/bench_chain_method.py --d 2 --J 1 --repeat 2

Timing claims belong here, never in tests. The machine is shared: run it alone for clean numbers.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

CHILD = r"""
import sys, time, warnings
variant, method, d, J = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
if variant == "parallel":
    from bayesdp._jax import use_host_devices
    use_host_devices()  # what the bayesdp command does
import jax
import bayesdp
sim = bayesdp.simulate(100_000, d, seed=1)
rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=J, seed=0)
warnings.simplefilter("ignore")
for rep in range(2):
    t0 = time.perf_counter()
    idata = bayesdp.fit(rel, method=method, seed=rep, progress_bar=False)
    s = time.perf_counter() - t0
    a = idata.posterior.attrs
    print("RESULT", jax.local_device_count(), a["chain_method"], s, a["max_r_hat"],
          a["min_ess_bulk"], flush=True)
"""


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", default="normalx")
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--J", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=1, help="processes per variant")
    a = ap.parse_args(argv)
    rows = {"vectorized": [], "parallel": []}
    for _ in range(a.repeat):
        for variant in rows:
            r = subprocess.run([sys.executable, "-c", CHILD, variant, a.method, str(a.d),
                                str(a.J)], capture_output=True, text=True, check=True)
            for line in r.stdout.splitlines():
                if line.startswith("RESULT"):
                    dev, cm, s, rhat, ess = line.split()[1:]
                    rows[variant].append((int(dev), cm, float(s), float(rhat), float(ess)))
    print(f"{a.method}, simulate(100_000, d={a.d}), J = {a.J}, eps = 1, fit's defaults "
          f"(4 chains x 1000 + 1000); {a.repeat} process(es) per variant, 2 fits each")
    print("| variant | devices | chain_method | fit | s | max r_hat | min ess_bulk | ESS/s |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for variant, rs in rows.items():
        for i, (dev, cm, s, rhat, ess) in enumerate(rs):
            print(f"| {variant} | {dev} | {cm} | {'first' if i % 2 == 0 else 'second'} | "
                  f"{s:.1f} | {rhat:.3f} | {ess:.0f} | {ess / s:.1f} |")
    for which, i in (("first", 0), ("second", 1)):
        v = [r[2] for r in rows["vectorized"][i::2]]
        p = [r[2] for r in rows["parallel"][i::2]]
        print(f"{which} fit: vectorized / parallel seconds = {min(v) / min(p):.2f}x")


if __name__ == "__main__":
    main()
