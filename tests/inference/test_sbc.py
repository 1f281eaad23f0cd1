"""Simulation-based calibration (Talts et al. 2018) of the samplers at realistic n_j: the
hand-written kernels of ``fixeds`` and ``normalx-paper`` (Algorithm 1), and NUTS on the default
``normalx`` model.

For r = 1..R: parameters are drawn from the prior and data from the numpyro model (the single
source of truth), the kernel runs from the true parameters (a draw from the exact posterior
of that data set, so no warm-up is needed) with fixed tuning, the first BURN sweeps are
dropped (so the kept draws have forgotten the start) and every THIN-th of the rest is kept.
If the kernel samples the posterior, the rank of the true value among the M kept draws is
uniform on {0..M} for every scalar function of the parameters. We check this with a chi-square
test over 10 bins per function, Bonferroni over the functions.

n_j is in the thousands and the S_hat noise is comparable to the Wishart spread of S_j
(sigma_s = 50 against sqrt(n_j) ~ 50), so S_j and Sigma_x are coupled tightly. Negative controls: the same machinery with data simulated from noise 2x larger
than the sampler assumes (an overconfident posterior) must fail.

Replications run vectorised (vmap) in one compiled program.
"""

import functools

import numpy as np
import pytest
from scipy import stats

from bayesdp._jax import enable_x64

enable_x64()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import geweke_helpers as G  # noqa: E402
from bayesdp.inference.kernels import common as KC  # noqa: E402
from bayesdp.inference.kernels import fixeds as KF  # noqa: E402
from bayesdp.inference.kernels.adaptation import Tuning  # noqa: E402
from bayesdp.paper.kernels import normalx_paper as NP  # noqa: E402
from bayesdp.inference import starts  # noqa: E402
from bayesdp.models import regression as R  # noqa: E402

pytestmark = pytest.mark.slow

D, J = 2, 2
N_J = (2000.0, 3000.0)
SIGMA = 50.0
REPS = 240
BURN, KEEP, THIN = 200, 990, 10
N_KEPT = len(range(BURN, BURN + KEEP, THIN))  # 99: ranks 0..99, 10 bins of 10
IU = np.triu_indices(D)
P_MIN = 1e-3  # family-wise level of the uniformity test (Bonferroni over the functions)


def sbc_data(noise_scale=1.0, sigma=SIGMA, lambda_scale=1.0):
    """Model data at the SBC size with release noise ``sigma``; ``noise_scale`` multiplies the
    noise, and ``lambda_scale`` the prior scale Lambda of Sigma_x, used to SIMULATE the data
    only (the samplers always assume noise ``sigma`` and lambda_scale 1)."""
    kappa = D + 4.0
    return R.ModelData(
        S_hat=None, z_hat=None, n=jnp.array(N_J), sigma_s=jnp.full(J, sigma * noise_scale),
        Sigma_z=jnp.broadcast_to((sigma * noise_scale) ** 2 * jnp.eye(D), (J, D, D)),
        S_fixed=jnp.array([[[2100.0, 300.0], [300.0, 1800.0]],
                           [[3300.0, -500.0], [-500.0, 2700.0]]]),
        a=jnp.array(3.0), b=jnp.array(2.0), m=jnp.zeros(D), C=jnp.eye(D),
        Lambda=lambda_scale * (kappa - D - 1.0) * jnp.eye(D), kappa=jnp.array(kappa))


def functions(p):
    out = [p["theta"], jnp.log(p["sigma_y2"])[None]]
    if "Sigma_x" in p:
        out += [p["Sigma_x"][IU], jnp.linalg.slogdet(p["Sigma_x"])[1][None]]
    return jnp.concatenate(out)


def ranks(model, step, state_cls, names, tuning, noise_scale=1.0, seed=0):
    """(REPS, n_functions) ranks of the truth among the kept draws."""
    assumed = sbc_data()
    simulate_with = sbc_data(noise_scale)

    def one(key):
        k_sim, k_run = jax.random.split(key)
        tr = G.model_draw(model, simulate_with, k_sim)
        truth = {n: tr[n] for n in names}
        S_hat = None
        if "S_hat" in tr:  # upper triangle -> symmetric matrix
            U = jnp.zeros((J, D, D)).at[:, IU[0], IU[1]].set(tr["S_hat"])
            S_hat = U + jnp.swapaxes(jnp.triu(U, 1), 1, 2)
        data = assumed._replace(S_hat=S_hat, z_hat=tr["z_hat"])

        def body(state, k):
            state, _ = step(k, state, data, tuning)
            return state, functions(state._asdict())

        _, f = jax.lax.scan(body, state_cls(**truth), jax.random.split(k_run, BURN + KEEP))
        kept = f[BURN::THIN]
        return jnp.sum(kept < functions(truth)[None, :], axis=0)

    keys = jax.random.split(jax.random.PRNGKey(seed), REPS)
    return np.asarray(jax.jit(jax.vmap(one))(keys))


def uniformity_pvalues(r, n_bins=10):
    counts = np.stack([np.bincount(c * n_bins // (N_KEPT + 1), minlength=n_bins) for c in r.T])
    return np.array([stats.chisquare(c).pvalue for c in counts])


def _fixeds_tuning():
    return Tuning(jnp.zeros(J), jnp.log(jnp.array(0.5)))


def _normalx_tuning():
    # Wishart RW proposals a few times narrower than the conditional spread
    return Tuning(jnp.log(4.0 * jnp.array(N_J)), jnp.log(jnp.array(0.5)))


def _fixeds_ranks(noise_scale):
    return ranks(R.fixeds_model, KF.fixeds_step, KC.FixedSState, ["theta", "sigma_y2"],
                 _fixeds_tuning(), noise_scale, seed=1)


def _normalx_ranks(noise_scale):
    return ranks(R.normalx_model, NP.normalx_paper_step, KC.NormalXState,
                 ["theta", "sigma_y2", "Sigma_x", "S"], _normalx_tuning(), noise_scale, seed=2)


def test_sbc_fixeds():
    p = uniformity_pvalues(_fixeds_ranks(1.0))
    assert p.min() > P_MIN / len(p), np.round(p, 4)


def test_sbc_fixeds_negative_control():
    """Data whose z noise is 2x what the sampler assumes: the posterior is too narrow."""
    p = uniformity_pvalues(_fixeds_ranks(2.0))
    assert p.min() < 1e-6, np.round(p, 4)


def test_sbc_normalx_paper():
    p = uniformity_pvalues(_normalx_ranks(1.0))
    assert p.min() > P_MIN / len(p), np.round(p, 4)


def test_sbc_normalx_paper_negative_control():
    p = uniformity_pvalues(_normalx_ranks(2.0))
    assert p.min() < 1e-6, np.round(p, 4)


# --- the default normalX method: NUTS on the non-centred model --------------------------------

NUTS_BURN, NUTS_THIN = 300, 5
NUTS_KEEP = NUTS_THIN * (N_KEPT - 1) + 1  # the same N_KEPT = 99 draws, so the same bins


def _nuts_tuning(model, data, seed):
    """Step size and diagonal inverse mass matrix adapted by numpyro's warm-up on one data set
    drawn from the prior predictive: the starting tuning of every replication."""
    from numpyro.infer import MCMC, NUTS

    tr = G.model_draw(model, data, jax.random.PRNGKey(seed))
    U = jnp.zeros((J, D, D)).at[:, IU[0], IU[1]].set(tr["S_hat"])
    pilot = data._replace(S_hat=U + jnp.swapaxes(jnp.triu(U, 1), 1, 2), z_hat=tr["z_hat"])
    mcmc = MCMC(NUTS(model), num_warmup=1000, num_samples=1, progress_bar=False)
    mcmc.run(jax.random.PRNGKey(seed + 1), pilot)
    adapt = mcmc.last_state.adapt_state
    (inv_mass,) = adapt.inverse_mass_matrix.values()  # one diagonal block over all sites
    return adapt.step_size, inv_mass


@functools.lru_cache(maxsize=None)
def _normalx_nuts_ranks(noise_scale, seed=3, sigma=SIGMA, lambda_scale=1.0):
    """(ranks, S draws, S_hat): ranks as in :func:`ranks`, with numpyro's NUTS transition (``numpyro.infer.hmc.hmc``,
    the kernel ``fit(method="normalx")`` runs) on ``normalx_noncentred_model``, vectorised
    over replications. Each chain starts at the truth and adapts its step size and mass matrix
    during the NUTS_BURN discarded iterations, as ``fit``'s warm-up does. Sigma_x is
    factorised in a rotated basis (``ModelData.basis``, 30 degrees), as ``fit`` does with the
    principal axes of its starting Sigma_x. ``sigma`` and ``lambda_scale``: see
    :func:`sbc_data`. The kept draws of S (REPS, N_KEPT, J, D, D) and the
    S_hat of each replication are returned too, for the S_hat check
    (``tests/inference/test_s_hat_check.py``). Cached: the SBC test and the check's test share a run."""
    from numpyro.infer.hmc import hmc
    from numpyro.infer.util import initialize_model, unconstrain_fn

    model = R.normalx_noncentred_model
    c, s = np.cos(np.pi / 6), np.sin(np.pi / 6)
    basis = jnp.array([[c, -s], [s, c]])
    assumed, simulate_with = (sbc_data(sigma=sigma)._replace(basis=basis),
                              sbc_data(noise_scale, sigma, lambda_scale)._replace(basis=basis))
    step_size, inv_mass = _nuts_tuning(model, assumed, seed + 100)
    _, potential_fn_gen, postprocess_fn_gen, _ = initialize_model(
        jax.random.PRNGKey(0), model, model_args=(assumed._replace(
            S_hat=jnp.zeros((J, D, D)), z_hat=jnp.zeros((J, D))),), dynamic_args=True)
    init_kernel, sample_kernel = hmc(potential_fn_gen=potential_fn_gen, algo="NUTS")
    names = ["L_x", "Sigma_x", "W_diag", "W_offdiag", "theta", "sigma_y2"]

    def one(key):
        k_sim, k_run = jax.random.split(key)
        from numpyro import handlers

        free = simulate_with._replace(S_hat=None, z_hat=None)  # the generative form
        tr = {k: v["value"] for k, v in
              handlers.trace(handlers.seed(model, k_sim)).get_trace(free).items()}
        truth = {n: tr[n] for n in names}
        U = jnp.zeros((J, D, D)).at[:, IU[0], IU[1]].set(tr["S_hat"])
        data = assumed._replace(S_hat=U + jnp.swapaxes(jnp.triu(U, 1), 1, 2), z_hat=tr["z_hat"])
        start = {k: v for k, v in truth.items() if k not in ("theta", "Sigma_x")}
        start["theta_std"] = starts.theta_std_of(data, tr["S"], truth["sigma_y2"], truth["theta"])
        u0 = unconstrain_fn(model, (data,), {}, start)
        # numpyro's warm-up adaptation during the burn-in (discarded), from the pilot's tuning;
        # one fixed tuning for every replication left some chains stuck at their start
        state = init_kernel(u0, num_warmup=NUTS_BURN, step_size=step_size,
                            inverse_mass_matrix=inv_mass, model_args=(data,), rng_key=k_run)
        post = postprocess_fn_gen(data)

        def body(state, _):
            state = sample_kernel(state, model_args=(data,))
            p = post(state.z)
            return state, (functions(p), p["S"])

        _, (f, S) = jax.lax.scan(body, state, None, length=NUTS_BURN + NUTS_KEEP)
        kept = f[NUTS_BURN::NUTS_THIN]
        return (jnp.sum(kept < functions(truth)[None, :], axis=0), S[NUTS_BURN::NUTS_THIN],
                data.S_hat)

    keys = jax.random.split(jax.random.PRNGKey(seed), REPS)
    return tuple(np.asarray(x) for x in jax.jit(jax.vmap(one))(keys))


def test_sbc_normalx_default_nuts():
    p = uniformity_pvalues(_normalx_nuts_ranks(1.0)[0])
    assert p.min() > P_MIN / len(p), np.round(p, 4)


def test_sbc_normalx_default_nuts_negative_control():
    p = uniformity_pvalues(_normalx_nuts_ranks(2.0)[0])
    assert p.min() < 1e-6, np.round(p, 4)


#: A release that measures S weakly: noise about the size of S_j itself (S_j ~ n_j Sigma_x with
#: E[Sigma_x] = I, n_j = 2000-3000), so Sigma_x's posterior rests on its prior in part.
SIGMA_WEAK = 2000.0


def test_sbc_normalx_default_nuts_weak_release():
    p = uniformity_pvalues(_normalx_nuts_ranks(1.0, sigma=SIGMA_WEAK)[0])
    assert p.min() > P_MIN / len(p), np.round(p, 4)
