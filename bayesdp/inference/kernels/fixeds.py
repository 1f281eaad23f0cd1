"""MCMC-fixedS (the target of Algorithm 2) by collapsed Gibbs (method ``"fixeds"``): S_j fixed
at ``data.S_fixed``, log sigma_y^2 slice sampled with theta integrated out, then theta | sigma_y^2
(eq. 12). The target is the joint density of ``bayesdp.models.regression.fixeds_model``. Also
the theta-only sweep used when sigma_y^2 is held fixed (option ``fix_sigma_y2``)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .adaptation import Tuning
from .common import FixedSState, MHInfo, init_state, sample_theta
from .linalg import draw
from .slice import SLICE_N_UNIFORMS, fixed_s_prior_totals, slice_sigma_y2_then_theta


class Info(NamedTuple):
    """Diagnostics of one sweep.

    accept_prob_S, is_accepted_S: (J,) zeros and False (S is fixed; kept so that every kernel
        reports them).
    accept_prob_sigma_y2, is_accepted_sigma_y2: () one and True (a slice sampler always moves).
    jump_log_sigma_y2: () |log sigma_y2' - log sigma_y2|, which adapts the slice width in warm-up.
    evals_sigma_y2: () number of log-density evaluations the slice update took.
    """

    accept_prob_S: jax.Array
    is_accepted_S: jax.Array
    accept_prob_sigma_y2: jax.Array
    is_accepted_sigma_y2: jax.Array
    jump_log_sigma_y2: jax.Array
    evals_sigma_y2: jax.Array


def init(position, log_alpha, log_step):
    """The state at ``position`` (dict with theta, sigma_y2) and the initial tuning."""
    return init_state(FixedSState, position, log_alpha, log_step)


def fixeds_step(rng_key, state: FixedSState, data, tuning: Tuning):
    """One sweep of MCMC-fixedS (the target of Algorithm 2: S_j = data.S_fixed, latent theta and
    sigma_y^2), as a collapsed Gibbs sampler:

    1. u = log sigma_y^2 from p(u | S, z_hat), theta integrated out
       (:func:`.slice.log_sigma_y2_marginal`), by one univariate slice-sampling update
       (:func:`.slice.slice_1d`; width exp(tuning.log_step), adapted in warm-up only);
    2. theta ~ N(m_p, Sigma_p) given sigma_y^2 (eq. 12).

    Step 1 leaves p(sigma_y^2 | z_hat) invariant and step 2 draws theta from its exact
    conditional, so the pair (sigma_y^2, theta) is a Markov chain with the joint posterior as
    its stationary law whose only autocorrelation is that of a 1-d slice sampler. (The paper's
    Gibbs theta + random walk on sigma_y^2 is :mod:`bayesdp.paper.kernels.fixeds_paper`; its
    step size, started far from the posterior's scale, often does not adapt within warm-up.)"""
    S = data.S_fixed
    J, d = data.z_hat.shape
    eps, uni = draw(rng_key, d, SLICE_N_UNIFORMS)
    theta, s2, jump, evals = slice_sigma_y2_then_theta(
        uni, eps, S, state.sigma_y2, data, fixed_s_prior_totals(data), tuning.log_step)
    zeros = jnp.zeros((J,), dtype=theta.dtype)
    one = jnp.ones((), dtype=theta.dtype)
    return FixedSState(theta, s2), Info(zeros, zeros > 0, one, one > 0,
                                        jump_log_sigma_y2=jump, evals_sigma_y2=evals)


def theta_step(rng_key, state: FixedSState, data, tuning: Tuning):
    """MCMC-fixedS with sigma_y^2 held at its current value: theta ~ N(m_p, Sigma_p) (eq. 12)
    only. Its Info is :class:`.common.MHInfo` (no S move, sigma_y^2 never moves)."""
    theta = sample_theta(rng_key, data.S_fixed, state.sigma_y2, data)
    J = data.S_fixed.shape[0]
    zeros = jnp.zeros((J,), dtype=theta.dtype)
    one = jnp.ones((), dtype=theta.dtype)
    return FixedSState(theta, state.sigma_y2), MHInfo(zeros, zeros > 0, one, one > 0)
