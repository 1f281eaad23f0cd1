"""MCMC-normalX exactly as Algorithm 1 (method ``"normalx-paper"``): Gibbs Sigma_x (A.1),
Wishart-proposal MH on every S_j (A.3), Gibbs theta (eq. 12), random-walk MH on sigma_y^2 (A.4).
The target is the joint density of ``bayesdp.models.regression.normalx_model``."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ...inference.kernels.adaptation import Tuning
from ...inference.kernels.common import (MHInfo, NormalXState, Prelude, log_invgamma, noise_loglik, prelude, select,
                     init_state, theta_from_precision, wishart_loglik_diff, wishart_rw,
                     z_loglik_terms, z_terms, z_terms_chol)
from ...inference.kernels.linalg import bartlett_from, bartlett_sizes, chol, draw, mm, mT, mv


Info = MHInfo  # the diagnostics of one sweep


def init(position, log_alpha, log_step):
    """The state at ``position`` (dict with theta, sigma_y2, Sigma_x, S) and the initial
    tuning."""
    return init_state(NormalXState, position, log_alpha, log_step)


def normalx_s_moves(pre: Prelude, B, B_inv, ok, alpha, state: NormalXState, data,
                    sigma_y2_prop=None):
    """Step 2 of Algorithm 1 for all holders at once: proposals, log acceptance ratios
    log p(S_j'|.) - log p(S_j|.) + log q(S_j|S_j') - log q(S_j'|S_j) (the change of
    log W(S_j; n_j, Sigma_x) + log N(S_hat_j; S_j) + log N(z_hat_j; S_j theta, K_j) plus the
    proposal ratio; -inf where the Bartlett draw failed), and the
    :class:`ZTerms` of the current and proposed S_j at sigma_y^2 (2J, reused by steps 3 and 4).

    With ``sigma_y2_prop`` (the sigma_y^2 proposal of step 4, drawn up front), the terms at it
    are computed in the same batched calls and appended (4J: current, proposed at sigma_y^2;
    current, proposed at sigma_y2_prop); ``pre.chol`` must then hold chol K_j of the current
    S_j at both values (2J), factorised with the prelude."""
    J = state.S.shape[0]
    S, s2, zh, Sz = state.S, state.sigma_y2, data.z_hat, data.Sigma_z
    S_new, log_q, logdet_diff = wishart_rw(pre.L_S, B, B_inv, alpha)
    if sigma_y2_prop is None:
        zt = z_terms(jnp.concatenate([S, S_new]), s2, jnp.concatenate([zh, zh]),
                     jnp.concatenate([Sz, Sz]))
    else:
        LK_new = chol(jnp.concatenate([s2 * S_new + Sz, sigma_y2_prop * S_new + Sz]))
        LK = jnp.concatenate([pre.chol[:J], LK_new[:J], pre.chol[J:], LK_new[J:]])
        zt = z_terms_chol(LK, jnp.concatenate([S, S_new, S, S_new]),
                          jnp.concatenate([zh, zh, zh, zh]))
    lz = z_loglik_terms(jax.tree.map(lambda x: x[:2 * J], zt), state.theta)
    noise = noise_loglik(jnp.concatenate([S, S_new]), jnp.concatenate([data.S_hat, data.S_hat]),
                         jnp.concatenate([data.sigma_s, data.sigma_s]))
    log_r = (wishart_loglik_diff(S_new, S, logdet_diff, pre.W, data.n)
             + noise[J:] - noise[:J] + lz[J:] - lz[:J])
    log_r = log_r + log_q
    log_r = jnp.where(ok & ~jnp.isnan(log_r), log_r, -jnp.inf)
    return S_new, log_r, zt




def normalx_paper_step(rng_key, state: NormalXState, data, tuning: Tuning):
    """One sweep of MCMC-normalX exactly as Algorithm 1 (method ``"normalx-paper"``), in the
    paper's order:

    1. Sigma_x ~ InvWishart(kappa + n, Lambda + sum_j S_j)                         (eq. 11, A.1)
    2. for all j at once (vmapped; the J factors are independent given the rest, section 4.1):
       MH on S_j with proposal S_j' ~ Wishart(S_j/alpha_j, alpha_j), acceptance ratio
       p(S_j'|.) q(S_j|S_j') / (p(S_j|.) q(S_j'|S_j))                               (A.3)
    3. theta ~ N(m_p, Sigma_p)                                                      (eq. 12, A.2)
    4. random-walk MH on sigma_y^2                                                  (A.4)

    Implementation: all random numbers are drawn up front (the proposals depend on no other
    step's outcome); the Bartlett factors of Sigma_x and of the J proposals are one batched
    draw, and so is the sigma_y^2 proposal of step 4; the factorisations are shared between
    steps and batched: chol K_j of the current and proposed S_j at the current and proposed
    sigma_y^2 (4J) serve steps 2-4 (see :func:`.common.prelude`, :func:`normalx_s_moves`).
    """
    J, d = data.z_hat.shape
    alpha = jnp.exp(tuning.log_alpha)
    df = jnp.concatenate([alpha, (data.kappa + jnp.sum(data.n))[None]])
    n_n, n_u = bartlett_sizes(df.shape, d)
    N, u = draw(rng_key, n_n + d + 1, n_u + J + 1)
    A, ok = bartlett_from(N[:n_n], u[:n_u], df, d)
    eps, log_u = N[n_n:], jnp.log(u[n_u:])
    B = A[:J] / jnp.sqrt(alpha)[:, None, None]

    # The sigma_y^2 proposal of step 4 is drawn now, so that the factors of K_j at it can join
    # the batched factorisations of steps 1 and 2.
    s2 = state.sigma_y2
    prop = s2 + jnp.exp(tuning.log_step) * eps[d]
    safe = jnp.where(prop > 0, prop, s2)
    # 1. Sigma_x | S (and the factors of the whole sweep)
    pre = prelude(state.S, state.Sigma_x, data, A[J], ok[J], B,
                  spd=jnp.concatenate([s2 * state.S + data.Sigma_z,
                                       safe * state.S + data.Sigma_z]))
    # 2. MH on every S_j at once
    S_new, log_r, zt = normalx_s_moves(pre, B, pre.tri_inv, ok[:J], alpha, state, data,
                                       sigma_y2_prop=safe)
    accept = log_u[:J] < log_r
    acc_prob = jnp.exp(jnp.minimum(0.0, log_r))
    S = jnp.where(accept[:, None, None], S_new, state.S)
    blk = lambda i: jax.tree.map(lambda x: x[i * J:(i + 1) * J], zt)  # noqa: E731
    za, zp = select(accept, blk(1), blk(0)), select(accept, blk(3), blk(2))
    # 3. theta | S, sigma_y^2 (eq. 12): P = C^{-1} + sum_j G_j^T G_j, h = C^{-1} m + sum_j G_j^T g_j
    P = pre.Cinv + jnp.sum(mm(mT(za.G), za.G), axis=0)
    h = pre.Cm + jnp.sum(mv(mT(za.G), za.g), axis=0)
    theta = theta_from_precision(P, h, eps[:d])
    # 4. RW-MH on sigma_y^2 (targets as in common.sigma_y2_log_target)
    lt_new = jnp.where(prop > 0, log_invgamma(safe, data.a, data.b)
                       + jnp.sum(z_loglik_terms(zp, theta)), -jnp.inf)
    lt_old = log_invgamma(s2, data.a, data.b) + jnp.sum(z_loglik_terms(za, theta))
    log_r_sy = lt_new - lt_old
    log_r_sy = jnp.where(jnp.isnan(log_r_sy), -jnp.inf, log_r_sy)
    accept_sy = log_u[J] < log_r_sy
    sigma_y2 = jnp.where(accept_sy, safe, s2)
    new = NormalXState(theta=theta, sigma_y2=sigma_y2, Sigma_x=pre.Sigma_x, S=S)
    return new, Info(acc_prob, accept, jnp.exp(jnp.minimum(0.0, log_r_sy)), accept_sy)
