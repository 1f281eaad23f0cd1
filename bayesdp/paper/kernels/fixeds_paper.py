"""MCMC-fixedS exactly as Algorithm 2 (method ``"fixeds-paper"``): S_j fixed at
``data.S_fixed``; Gibbs theta (eq. 12), then random-walk MH on sigma_y^2 (A.4)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ...inference.kernels.adaptation import Tuning
from ...inference.kernels.common import FixedSState, MHInfo, init_state, sample_theta, sigma_y2_log_target


Info = MHInfo  # the diagnostics of one sweep


def init(position, log_alpha, log_step):
    """The state at ``position`` (dict with theta, sigma_y2) and the initial tuning."""
    return init_state(FixedSState, position, log_alpha, log_step)


def fixeds_paper_step(rng_key, state: FixedSState, data, tuning: Tuning):
    """One sweep of MCMC-fixedS exactly as Algorithm 2: S_j = data.S_fixed throughout;
    theta ~ N(m_p, Sigma_p) (eq. 12), then random-walk MH on sigma_y^2 (A.4)."""
    k_theta, k_sy = jax.random.split(rng_key)
    S = data.S_fixed
    J = S.shape[0]
    theta = sample_theta(k_theta, S, state.sigma_y2, data)
    sigma_y2, acc_sy, accept_sy = _rw_sigma_y2(
        k_sy, state.sigma_y2, lambda s2: sigma_y2_log_target(s2, S, theta, data), tuning.log_step
    )
    zeros = jnp.zeros((J,), dtype=theta.dtype)
    return FixedSState(theta, sigma_y2), Info(zeros, zeros > 0, acc_sy, accept_sy)


def _rw_sigma_y2(rng_key, sigma_y2, log_target, log_step):
    """Random-walk MH on sigma_y^2 itself (as in the paper and the authors' code):
    sigma_y2' = sigma_y2 + exp(log_step) N(0, 1); proposals <= 0 are rejected (target 0)."""
    k1, k2 = jax.random.split(rng_key)
    prop = sigma_y2 + jnp.exp(log_step) * jax.random.normal(k1, dtype=sigma_y2.dtype)
    safe = jnp.where(prop > 0, prop, sigma_y2)
    lt_new = jnp.where(prop > 0, log_target(safe), -jnp.inf)
    lt_old = log_target(sigma_y2)
    log_r = lt_new - lt_old
    acc_prob = jnp.exp(jnp.minimum(0.0, jnp.where(jnp.isnan(log_r), -jnp.inf, log_r)))
    accept = jnp.log(jax.random.uniform(k2, dtype=sigma_y2.dtype)) < log_r
    return jnp.where(accept, safe, sigma_y2), acc_prob, accept
