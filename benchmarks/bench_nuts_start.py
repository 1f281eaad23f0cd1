"""Where a default ``normalx`` fit starts, and in which coordinates: ``fit`` against the way it
started before, in the same process on the same release.

"before": Sigma_x factorised in the features' own basis, the authors' starting S_j
(nearest_psd(S_hat_j) + I) mapped to the Bartlett variables, and warm-up from numpyro's
identity mass matrix. ``fit`` now factorises Sigma_x in the principal axes of its starting value
(``ModelData.basis``), starts the Bartlett variables and theta_std at 0 (their prior centre),
and starts warm-up from the Laplace approximation's marginal variances at that point
(``mcmc._laplace_inverse_mass``). Both run numpyro's NUTS with fit's defaults (4 chains
vectorised on one device, 1000 + 1000, target_accept_prob 0.8); the order alternates over
repeats and each first run of a variant includes its compilation.

    python benchmarks/bench_nuts_start.py                   # d = 5, J = 10
    python benchmarks/bench_nuts_start.py --d 20 --J 10 --repeat 1
    python benchmarks/bench_nuts_start.py --J 5 --sim-seed 1000 --release-seed 2000 --lambda-scale 0.01
    python benchmarks/bench_nuts_start.py --n 600 --d 2 --J 2 --sim-seed 11 --release-seed 12 --lambda-scale 0.01 --repeat 8

``--lambda-scale s`` sets Sigma_x's prior scale to s^2 times the default's (``Priors(Lambda=...)``)
in both variants; ``--sim-seed`` / ``--release-seed`` pick the data (1000 + k / 2000 + k are
seed k of research/prior_coverage.py, the demo setting).

Prints per run: seconds, leapfrog steps per iteration in warm-up and in sampling, divergent
transitions, max r_hat and min bulk ESS over theta, sigma_y2 and Sigma_x, ESS per second, how
many true coefficients lie in their 90% intervals; then the ratios of ``fit`` to "before".
Timing claims belong here, never in tests.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np


def priors_for(rel, lambda_scale):
    """The default priors, with Sigma_x's scale Lambda times lambda_scale^2."""
    import bayesdp

    default = bayesdp.Priors().resolve(rel)
    if lambda_scale == 1.0:
        return bayesdp.Priors()
    return bayesdp.Priors(Lambda=lambda_scale ** 2 * default.Lambda)


def former_start(rel, priors):
    """(ModelData, starting values) of normalx_noncentred_model as fit made them before: the
    features' basis, the authors' S_j start mapped to the Bartlett variables."""
    import jax.numpy as jnp

    from bayesdp.inference import normalx, starts
    from bayesdp.models import regression as R

    data = R.model_data(rel, priors)
    pos = starts.initial_position(rel, priors, normalx.start_S(rel), starts.initial_sigma_y2(rel, priors))
    S0, L_x = pos.pop("S"), np.linalg.cholesky(pos.pop("Sigma_x"))
    W_diag, W_offdiag = starts.bartlett_variables(rel.n, L_x, S0)
    theta_std = starts.theta_std_of(data, S0, pos["sigma_y2"], pos.pop("theta"))
    pos.update(L_x=jnp.asarray(L_x), W_diag=W_diag, W_offdiag=W_offdiag,
               theta_std=np.asarray(theta_std))
    return data, pos


def before(rel, seed, lambda_scale=1.0):
    """NUTS on normalx_noncentred_model as fit ran it before (see the module docstring)."""
    import jax
    from numpyro.infer import MCMC, init_to_value

    import bayesdp
    from bayesdp.inference import nuts as M
    from bayesdp.models import regression as R

    data, pos = former_start(rel, priors_for(rel, lambda_scale).resolve(rel))
    model = R.normalx_noncentred_model
    mcmc = MCMC(M._nuts(model, target_accept_prob=0.8, init_strategy=init_to_value(values=pos)),
                num_warmup=1000, num_samples=1000, num_chains=4, chain_method="vectorized",
                progress_bar=False)
    t0 = time.perf_counter()
    mcmc.warmup(jax.random.PRNGKey(seed), data, extra_fields=("num_steps",),
                collect_warmup=True, init_params=M._unconstrained_init(model, data, pos, 4))
    warm = np.asarray(mcmc.get_extra_fields()["num_steps"])
    mcmc.run(jax.random.PRNGKey(seed + 1), data, extra_fields=("num_steps", "diverging"))
    draws = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    secs = time.perf_counter() - t0
    extra = mcmc.get_extra_fields(group_by_chain=True)
    post = {k: np.asarray(draws[k]) for k in ("theta", "sigma_y2", "Sigma_x")}
    conv = bayesdp.diagnostics.convergence_summary(
        bayesdp.diagnostics.to_inference_data(post))
    return dict(secs=secs, warm_steps=float(warm.mean()),
                steps=float(np.mean(extra["num_steps"])), div=int(np.sum(extra["diverging"])),
                r_hat=conv["max_r_hat"], ess=conv["min_ess_bulk"], worst=conv["worst_parameter"],
                theta=post["theta"].reshape(-1, rel.d))


def with_fit(rel, seed, lambda_scale=1.0):
    """``bayesdp.fit(rel, method="normalx")`` with its chains vectorised; warm-up steps from a
    second, identical run of the same MCMC object would double the cost, so they are not
    reported (fit keeps only the draws' statistics)."""
    import bayesdp

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        idata = bayesdp.fit(rel, method="normalx", seed=seed, chain_method="vectorized",
                            progress_bar=False, priors=priors_for(rel, lambda_scale))
    secs = time.perf_counter() - t0
    conv = bayesdp.diagnostics.convergence_summary(idata, ["theta", "sigma_y2", "Sigma_x"])
    st = idata.sample_stats
    return dict(secs=secs, warm_steps=float("nan"), steps=float(st["n_steps"].mean()),
                div=int(st["diverging"].sum()), r_hat=conv["max_r_hat"],
                ess=conv["min_ess_bulk"], worst=conv["worst_parameter"],
                theta=idata.posterior["theta"].values.reshape(-1, rel.d))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="rows (all holders)")
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--J", type=int, default=10)
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--sim-seed", type=int, default=1)
    ap.add_argument("--release-seed", type=int, default=0)
    ap.add_argument("--lambda-scale", type=float, default=1.0)
    a = ap.parse_args()
    import jax

    jax.config.update("jax_enable_x64", True)
    import bayesdp

    sim = bayesdp.simulate(a.n, a.d, seed=a.sim_seed)
    rel = bayesdp.release(sim.X, sim.y, epsilon=a.eps, delta=1e-5, bounds=sim.bounds,
                          nodes=a.J, seed=a.release_seed)
    rows = {"before": [], "fit": []}
    for rep in range(a.repeat):
        order = ("before", "fit") if rep % 2 == 0 else ("fit", "before")
        for name in order:
            r = (before if name == "before" else with_fit)(rel, seed=rep,
                                                           lambda_scale=a.lambda_scale)
            r["ess_s"] = r["ess"] / r["secs"]
            lo, hi = np.quantile(r["theta"], [0.05, 0.95], axis=0)
            r["cover"] = int(np.sum((lo <= sim.theta) & (sim.theta <= hi)))
            rows[name].append(r)
            print(f"n={a.n} d={a.d} J={a.J} eps={a.eps:g} run {rep} {name:6s}: {r['secs']:6.1f} s, "
                  f"steps warm-up {r['warm_steps']:5.1f} sampling {r['steps']:5.1f}, "
                  f"divergences {r['div']}, max r_hat {r['r_hat']:.3f}, min ESS {r['ess']:.0f} "
                  f"({r['worst']}), ESS/s {r['ess_s']:.1f}, true theta in the 90% interval "
                  f"{r['cover']} of {a.d}", flush=True)
    for i in range(a.repeat):
        b, f = rows["before"][i], rows["fit"][i]
        print(f"run {i}: fit / before: seconds {f['secs'] / b['secs']:.2f}, sampling steps "
              f"{f['steps'] / b['steps']:.2f}, ESS/s {f['ess_s'] / b['ess_s']:.2f}")


if __name__ == "__main__":
    main()
