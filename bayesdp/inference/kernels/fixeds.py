"""MCMC-fixedS (the target of Algorithm 2) by collapsed Gibbs (method ``"fixeds"``): S_j fixed
at ``data.S_fixed``, log sigma_y^2 by an independence Metropolis-Hastings update from a grid of
its marginal with theta integrated out, then theta | sigma_y^2 (eq. 12). The target is the
joint density of ``bayesdp.models.regression.fixeds_model``. Also the theta-only sweep used
when sigma_y^2 is held fixed (option ``fix_sigma_y2``)."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .adaptation import Tuning
from .common import FixedSState, MHInfo, init_state, sample_theta
from .linalg import draw
from .sigma_y2 import N_UNIFORMS, fixed_s_terms, sigma_y2_then_theta


def init(position, log_alpha, log_step):
    """The state at ``position`` (dict with theta, sigma_y2) and the initial tuning."""
    return init_state(FixedSState, position, log_alpha, log_step)


def prepare(data):
    """``data`` with the terms the sweep reads computed once: ``kernel_terms`` =
    :func:`.sigma_y2.fixed_s_terms` of ``data.S_fixed`` (a sweep given data without them
    computes them itself, as the joint-distribution tests, which redraw z_hat, need)."""
    return data._replace(kernel_terms=fixed_s_terms(data.S_fixed, data))


def fixeds_step(rng_key, state: FixedSState, data, tuning: Tuning):
    """One sweep of MCMC-fixedS (the target of Algorithm 2: S_j = data.S_fixed, latent theta and
    sigma_y^2), as a collapsed Gibbs sampler:

    1. u = log sigma_y^2 from p(u | S, z_hat), theta integrated out, by one independence
       Metropolis-Hastings update whose proposal is a grid of that marginal mixed with the
       prior (:func:`.sigma_y2.sigma_y2_then_theta`; nothing to tune);
    2. theta ~ N(m_p, Sigma_p) given sigma_y^2 (eq. 12).

    Step 1 leaves p(sigma_y^2 | z_hat) invariant and step 2 draws theta from its exact
    conditional, so the pair (sigma_y^2, theta) is a Markov chain with the joint posterior as
    its stationary law; where the grid matches the marginal the draws are nearly independent.
    (The paper's Gibbs theta + random walk on sigma_y^2 is
    :mod:`bayesdp.paper.kernels.fixeds_paper`.) ``tuning`` is not used. Info:
    :class:`.common.MHInfo` (no S move)."""
    terms = data.kernel_terms
    if terms is None:
        terms = fixed_s_terms(data.S_fixed, data)
    J, d = data.z_hat.shape
    key, sub = jax.random.split(rng_key)
    eps, uni = draw(key, d, N_UNIFORMS)
    theta, s2, prob, accepted = sigma_y2_then_theta(sub, uni, eps, state.sigma_y2, terms, data)
    zeros = jnp.zeros((J,), dtype=theta.dtype)
    return FixedSState(theta, s2), MHInfo(zeros, zeros > 0, prob, accepted)


def theta_step(rng_key, state: FixedSState, data, tuning: Tuning):
    """MCMC-fixedS with sigma_y^2 held at its current value: theta ~ N(m_p, Sigma_p) (eq. 12)
    only. Its Info is :class:`.common.MHInfo` (no S move, sigma_y^2 never moves)."""
    theta = sample_theta(rng_key, data.S_fixed, state.sigma_y2, data)
    J = data.S_fixed.shape[0]
    zeros = jnp.zeros((J,), dtype=theta.dtype)
    one = jnp.ones((), dtype=theta.dtype)
    return FixedSState(theta, state.sigma_y2), MHInfo(zeros, zeros > 0, one, one > 0)
