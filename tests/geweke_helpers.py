"""Geweke (2004) joint-distribution tests for the hand-written kernels.

Two simulators of p(params, data) under the numpyro model (the single source of truth):

* marginal-conditional: params ~ prior, data ~ p(data | params), independent draws (the model
  run forward with ``numpyro.handlers``);
* successive-conditional: data ~ p(data | params), then params ~ K(params, . | data), one kernel
  sweep with fixed tuning, repeated.

If the kernel leaves p(params | data) invariant, both give the same distribution of params; we
compare the means of test functions with z-scores whose standard errors come from the sample
variance (independent draws) and batch means (the chain).
"""

from __future__ import annotations

import numpy as np


def _numpyro():
    import jax
    import jax.numpy as jnp
    from numpyro import handlers

    return jax, jnp, handlers


def model_draw(model, data, key, latents=None):
    """Trace of the model with S_hat, z_hat sampled (and latents conditioned on, if given)."""
    jax, jnp, handlers = _numpyro()
    free = data._replace(S_hat=None, z_hat=None)
    m = model if latents is None else handlers.condition(model, latents)
    tr = handlers.trace(handlers.seed(m, key)).get_trace(free)
    return {k: v["value"] for k, v in tr.items() if v["type"] == "sample"}


def regenerate_data(model, data, key, latents):
    """data with S_hat and z_hat redrawn from p(data | latents) by the model."""
    jax, jnp, handlers = _numpyro()
    tr = model_draw(model, data, key, latents)
    z_hat = tr["z_hat"]
    if "S_hat" in tr:
        d = data.m.shape[0]
        iu = np.triu_indices(d)
        J = z_hat.shape[0]
        U = jnp.zeros((J, d, d)).at[:, iu[0], iu[1]].set(tr["S_hat"])
        S_hat = U + jnp.swapaxes(jnp.triu(U, 1), 1, 2)
    else:
        S_hat = data.S_hat
    return data._replace(S_hat=S_hat, z_hat=z_hat)


def summaries(p):
    """Scalar summaries of a parameter dict: first and second moments."""
    jax, jnp, _ = _numpyro()
    out = [p["theta"], p["theta"] ** 2, p["theta"][:1] * p["theta"][1:2],
           jnp.atleast_1d(p["sigma_y2"]), jnp.atleast_1d(jnp.log(p["sigma_y2"]))]
    if "S" in p:
        S = p["S"]
        d = S.shape[-1]
        iu = np.triu_indices(d)
        out += [S[:, iu[0], iu[1]].ravel(), jnp.linalg.slogdet(S)[1],
                jnp.diagonal(p["Sigma_x"]), jnp.atleast_1d(jnp.linalg.slogdet(p["Sigma_x"])[1])]
    return jnp.concatenate([jnp.ravel(o) for o in out])


def marginal_conditional(model, data, key, n_draws, latent_names):
    jax, jnp, _ = _numpyro()

    def one(k):
        tr = model_draw(model, data, k)
        return summaries({n: tr[n] for n in latent_names})

    return np.asarray(jax.lax.map(one, jax.random.split(key, n_draws), batch_size=500))


def successive_conditional(model, step, state0, data, tuning, key, n_iter, state_cls, thin=1):
    """Chain of (params, data): regenerate the data, then ``thin`` kernel sweeps."""
    jax, jnp, _ = _numpyro()

    def body(carry, k):
        state = carry
        kd, ks = jax.random.split(k)
        dat = regenerate_data(model, data, kd, state._asdict())
        for kk in jax.random.split(ks, thin):
            state, _ = step(kk, state, dat, tuning)
        return state, summaries(state._asdict())

    run = jax.jit(lambda s, ks: jax.lax.scan(body, s, ks))
    _, g = run(state0, jax.random.split(key, n_iter))
    return np.asarray(g)


def batch_means_se(x, n_batches=50):
    """Standard error of the mean of each column of a chain by non-overlapping batch means."""
    n = (x.shape[0] // n_batches) * n_batches
    b = x[:n].reshape(n_batches, -1, x.shape[1]).mean(axis=1)
    return b.std(axis=0, ddof=1) / np.sqrt(n_batches)


def geweke_z(g_mc, g_sc, burn=0.1, n_batches=50):
    """z-scores of mean differences between the two simulators, one per test function."""
    g_sc = g_sc[int(burn * len(g_sc)):]
    se_mc = g_mc.std(axis=0, ddof=1) / np.sqrt(len(g_mc))
    se_sc = batch_means_se(g_sc, n_batches)
    return (g_mc.mean(0) - g_sc.mean(0)) / np.sqrt(se_mc**2 + se_sc**2)
