"""Hierarchical priors on Sigma_x tried for the coverage of theta's intervals on the demo setting
(docs/evidence/coverage-simulation.md, "Converged is not calibrated"). Experiments, not part of
the package: each prior is a variant of ``bayesdp.models.regression.normalx_noncentred_model``
defined here and run by numpyro's NUTS with the settings of ``fit(method="normalx")`` (4 chains,
1000 + 1000, target_accept_prob 0.8) as they were when these were measured: Sigma_x factorised in
the features' basis, the authors' start mapped to the Bartlett variables, warm-up from the identity
mass matrix (``fit`` has since changed all three: benchmarks/bench_nuts_start.py).

    PYTHONPATH=. python research/sigma_x_prior_experiments.py --prior scale --seeds 0 1 2
    PYTHONPATH=. python research/sigma_x_prior_experiments.py --prior matrix-f --seeds 0
    PYTHONPATH=. python research/sigma_x_prior_experiments.py --prior matrix-f-noncentred --seeds 0
    PYTHONPATH=. python research/sigma_x_prior_experiments.py --prior matrix-f-marginal --seeds 0
    PYTHONPATH=. python research/sigma_x_prior_experiments.py --prior matrix-f-gibbs --seeds 0 1 2 3 4

Priors (Lambda_0 = sd_x^2 I, kappa = d + 2, the defaults of ``bayesdp.Priors``):

- ``scale``: Sigma_x ~ InvWishart(kappa, tau Lambda_0), tau ~ Gamma(1/2, rate 1/2);
- ``matrix-f``: Sigma_x ~ InvWishart(kappa, Lambda), Lambda ~ Wishart(d, Lambda_0 / d) (the
  matrix-F prior of Mulder & Pericchi 2018; with Lambda_0 = d I it is the paper's own way of
  drawing Sigma_x for its simulation), Lambda sampled as a site;
- ``matrix-f-noncentred``: the same prior with Lambda = L_0 B B^T L_0^T / d, B the standardised
  Bartlett factor of Wishart(d + 1, I) (``regression.bartlett_cholesky``).
- ``matrix-f-marginal``: the same prior with Lambda integrated out analytically: the matrix-F
  density of Sigma_x, log p(Sigma_x) = c + (nu - d - 1)/2 log|Sigma_x| - (kappa + nu)/2
  log|Sigma_x + Psi| (nu = d, Psi = Lambda_0 / d), no funnel between Lambda and Sigma_x.
- ``matrix-f-gibbs``: the ``matrix-f`` model, Lambda drawn by an exact Gibbs step
  (Lambda | Sigma_x ~ Wishart(nu + kappa, (Psi^{-1} + Sigma_x^{-1})^{-1}), conjugate) and
  everything else by NUTS given Lambda (numpyro's ``HMCGibbs``).

Setting as research/prior_coverage.py: simulate(n=100_000, d=5, seed=1000 + s), release at
eps = 1, delta = 1e-5, J = 5, seed 2000 + s. Prints per seed: the fraction of the 5 true
coefficients inside the 90% intervals, the interval widths, max r_hat and min bulk ESS over
theta, sigma_y2, Sigma_x (and the hyperparameter), divergent transitions and leapfrog steps.
"""

from __future__ import annotations

import argparse
import functools
import time

import numpy as np


def variant(kind):
    import jax
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    from bayesdp.models import regression as R

    def model(data):
        J, d = data.Sigma_z.shape[0], data.m.shape[0]
        if kind == "scale":
            tau = numpyro.sample("tau", dist.Gamma(0.5, 0.5))
            L_lam = jnp.sqrt(tau) * jnp.linalg.cholesky(data.Lambda)
        elif kind in ("matrix-f", "matrix-f-gibbs"):
            lam = numpyro.sample("Lam", dist.Wishart(float(d), scale_matrix=data.Lambda / d))
            L_lam = jnp.linalg.cholesky(lam)
        elif kind == "matrix-f-noncentred":
            Bd = numpyro.sample("B_diag", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
            Bo = numpyro.sample("B_off", dist.Normal(0.0, 1.0).expand([d * (d - 1) // 2])
                                .to_event(1))
            B, corr = R.bartlett_cholesky(jnp.array([d + 1.0]), Bd[None], Bo[None])
            numpyro.factor("B_chi", corr)
            L_lam = jnp.linalg.cholesky(data.Lambda) / jnp.sqrt(d + 1.0) @ B[0]
            numpyro.deterministic("Lam", L_lam @ L_lam.T)
        if kind == "matrix-f-marginal":
            L_lam = jnp.linalg.cholesky(data.Lambda)
        L_x = numpyro.sample("L_x", R.inverse_wishart_cholesky(data.kappa, L_lam @ L_lam.T,
                                                               L_lam))
        if kind == "matrix-f-marginal":
            # reweight InvWishart(kappa, Lambda_0) to the matrix-F marginal of Sigma_x
            # (Lambda ~ Wishart(nu, Psi) integrated out, nu = d, Psi = Lambda_0 / d):
            #   log p_F(Sigma) = c + (nu - d - 1)/2 log|Sigma| - (kappa + nu)/2 log|Sigma + Psi|
            nu, Psi = float(d), data.Lambda / d
            logdet = 2.0 * jnp.sum(jnp.log(jnp.diagonal(L_x)))
            Z = jax.scipy.linalg.solve_triangular(L_x, L_lam, lower=True)
            L_sp = jnp.linalg.cholesky(L_x @ L_x.T + Psi)
            log_f = (0.5 * (nu - d - 1.0) * logdet
                     - 0.5 * (data.kappa + nu) * 2.0 * jnp.sum(jnp.log(jnp.diagonal(L_sp))))
            log_iw = -0.5 * (data.kappa + d + 1.0) * logdet - 0.5 * jnp.sum(Z ** 2)
            numpyro.factor("matrix_f", log_f - log_iw)
        numpyro.deterministic("Sigma_x", L_x @ L_x.T)
        with numpyro.plate("holder", J):
            W_diag = numpyro.sample("W_diag", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
            W_off = numpyro.sample("W_offdiag", dist.Normal(0.0, 1.0)
                                   .expand([d * (d - 1) // 2]).to_event(1))
        A, correction = R.bartlett_cholesky(data.n, W_diag, W_off)
        numpyro.factor("W_diag_chi", correction)
        LA = jnp.einsum("ik,jkl->jil", L_x, A)
        S = numpyro.deterministic("S", LA @ jnp.swapaxes(LA, -1, -2))
        R._noncentred_observations(data, S)

    return model


def lambda_given_sigma_x(rng_key, gibbs_sites, hmc_sites, *, data):
    """Lambda | Sigma_x ~ Wishart(nu + kappa, (Psi^{-1} + Sigma_x^{-1})^{-1}), nu = d,
    Psi = Lambda_0 / d: the Wishart prior on Lambda times InvWishart(kappa, Lambda)'s density
    of Sigma_x, |Lambda|^{kappa/2} exp(-tr(Lambda Sigma_x^{-1}) / 2), as a function of Lambda."""
    import jax.numpy as jnp
    import numpyro.distributions as dist
    from jax.scipy.linalg import cho_solve

    d = data.m.shape[0]
    L_x = hmc_sites["L_x"]
    eye = jnp.eye(d)
    prec = cho_solve((jnp.linalg.cholesky(data.Lambda / d), True), eye) + cho_solve((L_x, True),
                                                                                   eye)
    L_p = jnp.linalg.cholesky(prec)
    cov = cho_solve((L_p, True), eye)
    return {"Lam": dist.Wishart(d + data.kappa, scale_matrix=0.5 * (cov + cov.T)).sample(rng_key)}


def fit_variant(kind, rel, seed, target_accept_prob=0.8):
    import arviz as az
    import jax
    import jax.numpy as jnp
    from numpyro.infer import MCMC, NUTS, HMCGibbs, init_to_value

    import bayesdp
    from bayesdp.inference import nuts as M

    from bench_nuts_start import former_start  # this folder

    data, pos = former_start(rel, bayesdp.Priors().resolve(rel))
    data = data._replace(prior_factors=None)
    d = rel.d
    pos.update({"scale": {"tau": jnp.asarray(1.0)},
                "matrix-f": {"Lam": jnp.asarray(np.asarray(data.Lambda))},
                "matrix-f-gibbs": {"Lam": jnp.asarray(np.asarray(data.Lambda))},
                "matrix-f-noncentred": {"B_diag": jnp.zeros(d),
                                        "B_off": jnp.zeros(d * (d - 1) // 2)},
                "matrix-f-marginal": {}}[kind])
    model = variant(kind)
    kernel = NUTS(model, init_strategy=init_to_value(values=pos),
                  target_accept_prob=target_accept_prob)
    if kind == "matrix-f-gibbs":
        kernel = HMCGibbs(kernel, gibbs_fn=functools.partial(lambda_given_sigma_x, data=data),
                          gibbs_sites=["Lam"])
    # Gibbs kernels take one key: their chains are vmapped by the callable chain method
    mcmc = MCMC(kernel, num_warmup=1000, num_samples=1000, num_chains=4,
                chain_method=jax.vmap if kind == "matrix-f-gibbs" else "vectorized",
                progress_bar=False)
    t0 = time.perf_counter()
    pre = "hmc_state." if kind == "matrix-f-gibbs" else ""
    mcmc.run(jax.random.PRNGKey(seed), data, extra_fields=(pre + "diverging", pre + "num_steps"),
             init_params=None if pre else M._unconstrained_init(model, data, pos, 4))
    draws = jax.block_until_ready(mcmc.get_samples(group_by_chain=True))
    secs = time.perf_counter() - t0  # after the draws exist (JAX dispatches asynchronously)
    extra = mcmc.get_extra_fields(group_by_chain=True)
    keep = {k: np.asarray(v) for k, v in draws.items()
            if k in ("theta", "sigma_y2", "Sigma_x", "tau", "Lam")}
    summ = az.summary(az.from_dict(posterior=keep), kind="diagnostics", round_to="none")
    return dict(theta=keep["theta"].reshape(-1, d), r_hat=float(summ.r_hat.max()),
                worst=str(summ.ess_bulk.idxmin()), ess=float(summ.ess_bulk.min()),
                div=int(np.sum(extra[pre + "diverging"])),
                steps=float(np.mean(extra[pre + "num_steps"])),
                secs=secs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--prior", choices=("scale", "matrix-f", "matrix-f-noncentred",
                                            "matrix-f-marginal", "matrix-f-gibbs"),
                    required=True)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--target-accept-prob", type=float, default=0.8,
                    help="NUTS's target acceptance (fit's default 0.8)")
    a = ap.parse_args()
    import jax
    jax.config.update("jax_enable_x64", True)
    import bayesdp

    for s in a.seeds:
        sim = bayesdp.simulate(100_000, 5, seed=1000 + s)
        rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds,
                              nodes=5, seed=2000 + s)
        r = fit_variant(a.prior, rel, s, a.target_accept_prob)
        lo, hi = np.quantile(r["theta"], [0.05, 0.95], axis=0)
        cover = float(((lo <= sim.theta) & (sim.theta <= hi)).mean())
        print(f"{a.prior} seed {s}: coverage {cover:.2f}, widths {np.round(hi - lo, 2)}, "
              f"max r_hat {r['r_hat']:.3f}, min ESS {r['ess']:.0f} ({r['worst']}), "
              f"divergences {r['div']}, leapfrog steps {r['steps']:.1f}, {r['secs']:.0f} s",
              flush=True)


if __name__ == "__main__":
    main()
