"""Fit one release with every sampler and compare them.

    python examples/compare_samplers.py            # about a couple of minutes on 2 CPU cores

Simulates the paper's data (d = 2, three holders of 300 rows: small enough for NUTS), releases
it with eps = 1, and fits

    normalx            the normalX model, bayesdp's default: NUTS on the non-centred model
    normalx-paper      the same model, the paper's Algorithm 1 as published
    fixeds             the fixedS model (S_j fixed at the nearest PSD matrix), slice on sigma_y^2
    nuts-normalx       numpyro NUTS on the normalX model
    nuts-fixeds        numpyro NUTS on the fixedS model
    fast               Bayes-fixedS-fast (Algorithm 3, closed form)

then prints posterior means and sds of theta, the smallest bulk ESS, the largest r_hat and the
wall time of each, next to the non-private posterior and the true theta.
"""

import time

import numpy as np

import bayesdp.paper  # registers the paper's methods (and binds bayesdp)
from bayesdp import diagnostics


def main(n_per_holder=300, J=3, d=2, epsilon=1.0, seed=7):
    sim = bayesdp.simulate(n=n_per_holder * J, d=d, seed=seed)
    rel = bayesdp.release(sim.X, sim.y, epsilon=epsilon, delta=1e-5, bounds=sim.bounds,
                          nodes=J, seed=seed + 1)
    print(rel)
    ref = bayesdp.fit_nonprivate(sim.X, sim.y, seed=0, bounds=sim.bounds)
    runs = {
        "normalx": dict(num_samples=1000, num_warmup=1000),
        "normalx-paper": dict(num_samples=1000, num_warmup=1000),
        "fixeds": dict(num_samples=1000, num_warmup=500),
        "nuts-normalx": dict(num_samples=300, num_warmup=300, num_chains=2),
        "nuts-fixeds": dict(num_samples=300, num_warmup=300, num_chains=2),
        "fast": dict(num_samples=2000),
    }
    rows = []
    for method, kw in runs.items():
        t = time.perf_counter()
        idata = bayesdp.fit(rel, method=method, seed=seed, progress_bar=False, **kw)
        secs = time.perf_counter() - t
        th = diagnostics.posterior_array(idata, "theta")
        s = diagnostics.summary(idata, var_names=["theta"])
        rows.append((method, th.mean(0), th.std(0), s["ess_bulk"].min(), s["r_hat"].max(), secs))
    th_ref = diagnostics.posterior_array(ref, "theta")
    print(f"\ntrue theta: {np.array2string(sim.theta, precision=3)}")
    print(f"{'method':<18} {'mean(theta)':>24} {'sd(theta)':>22} {'min ESS':>8} {'max r_hat':>9}"
          f" {'seconds':>8}")
    print(f"{'non-private':<18} {np.array2string(th_ref.mean(0), precision=3):>24} "
          f"{np.array2string(th_ref.std(0), precision=3):>22}")
    for m, mean, sd, ess, rhat, secs in rows:
        print(f"{m:<18} {np.array2string(mean, precision=3):>24} "
              f"{np.array2string(sd, precision=3):>22} {ess:8.0f} {rhat:9.3f} {secs:8.1f}")
    print("\n(seconds include JIT compilation; 'fast' is closed form, its ESS is that of iid "
          "draws.) Run bayesdp.diagnose(idata) on any of them for warnings and plots.")


if __name__ == "__main__":
    import numpyro

    # before anything uses JAX: one CPU device per chain, so NUTS runs its chains in parallel
    numpyro.set_host_device_count(4)
    main()
