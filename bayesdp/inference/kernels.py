"""Hand-written MCMC kernels of the paper (Algorithms 1 and 2) and a collapsed variant.

Every kernel is a pure function ``step(rng_key, state, data, tuning) -> (state, info)`` over
small NamedTuples (the style of blackjax's ``rmh.py``); :mod:`bayesdp.inference.mcmc` wraps them
as numpyro ``MCMCKernel``s. ``data`` is a :class:`bayesdp.models.regression.ModelData`. The target
is the joint density of :func:`bayesdp.models.regression.normalx_model` (or ``fixeds_model``); the
tests check each log target below against ``numpyro.infer.util.log_density`` of those models.

Notation (paper section 4, eq. 10): for holder j, ``K_j = sigma_y^2 S_j + Sigma_z_j`` is the
covariance of z_hat_j given (S_j, theta, sigma_y^2), and

    P(S, sigma_y^2) = C^{-1} + sum_j S_j K_j^{-1} S_j,     h = C^{-1} m + sum_j S_j K_j^{-1} z_hat_j

are the precision and the precision-times-mean of theta | S, sigma_y^2, z_hat (eq. 12).

All linear algebra uses Cholesky factors and triangular solves; no explicit inverse is formed.
Run under float64 (``bayesdp._jax.enable_x64()``).
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

_LOG_2PI = 1.8378770664093453


# ---------------------------------------------------------------------------------------------
# States, tuning and info
# ---------------------------------------------------------------------------------------------


class NormalXState(NamedTuple):
    """Position of MCMC-normalX: theta (d,), sigma_y2 (), Sigma_x (d, d), S (J, d, d)."""

    theta: jax.Array
    sigma_y2: jax.Array
    Sigma_x: jax.Array
    S: jax.Array


class FixedSState(NamedTuple):
    """Position of MCMC-fixedS: theta (d,), sigma_y2 ()."""

    theta: jax.Array
    sigma_y2: jax.Array


class Tuning(NamedTuple):
    """Proposal parameters: log alpha_j (J,) of the Wishart proposals W(S_j/alpha_j, alpha_j)
    (larger alpha = smaller moves) and the log of the random-walk step on sigma_y^2."""

    log_alpha: jax.Array
    log_step: jax.Array


class Info(NamedTuple):
    """Diagnostics of one sweep: MH acceptance probabilities min(1, ratio) and decisions, for
    each holder's S_j move (J,) and for the sigma_y^2 move (scalar). fixedS reports the S
    entries as zeros (no S move)."""

    accept_prob_S: jax.Array
    is_accepted_S: jax.Array
    accept_prob_sigma_y2: jax.Array
    is_accepted_sigma_y2: jax.Array


# ---------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------


def _sym(A):
    return 0.5 * (A + jnp.swapaxes(A, -1, -2))


def _chol(A):
    return jnp.linalg.cholesky(_sym(A))


def _logdet_chol(L):
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)


N_CANDIDATES = 2


def bartlett(rng_key, df, d, n_candidates=N_CANDIDATES):
    """Lower-triangular Bartlett factors A with A A^T ~ Wishart(df, I_d), one per entry of df,
    and a flag ``ok``.

    A_ii = sqrt(chi^2_{df - i}) (i = 0..d-1), A_ik ~ N(0, 1) for i > k, zeros above. ``df`` may
    be a scalar (returns (d, d)) or an array (df.shape + (d, d)); needs df >= d + 1 so every
    chi^2 = 2 Gamma((df - i)/2) has shape >= 1.

    The Gamma draws use Marsaglia & Tsang (2000) with ``n_candidates`` proposals per entry drawn
    at once, keeping the first accepted one: exact, loop-free and much faster on CPU than
    ``jax.random.gamma``. Each candidate is accepted with probability >= 0.95 for shape >= 1 and
    -> 1 as the shape grows, so with 2 candidates a factor fails (``ok`` False) with probability
    below 0.0025 per diagonal entry at worst (df near d + 1), and negligibly often for the large
    alpha_j used in practice. That probability depends on df only, never on the chain's state, so a kernel that
    simply skips its move when ``ok`` is False is the mixture "(1 - f) move + f stay" of two
    valid kernels, and leaves the target exactly invariant.
    """
    dt = jnp.float64
    df = jnp.asarray(df, dtype=dt)
    k1, k2 = jax.random.split(rng_key)
    N = jax.random.normal(k1, df.shape + (d, d + n_candidates), dtype=dt)
    u = jax.random.uniform(k2, df.shape + (d, n_candidates), dtype=dt)
    shape = ((df[..., None] - jnp.arange(d)) / 2.0)[..., None]  # (..., d, 1)
    dd = shape - 1.0 / 3.0
    z = N[..., d:]
    v = (1.0 + z / jnp.sqrt(9.0 * dd)) ** 3
    vpos = jnp.where(v > 0, v, 1.0)
    acc = (v > 0) & (jnp.log(u) < 0.5 * z**2 + dd - dd * vpos + dd * jnp.log(vpos))
    first = jnp.argmax(acc, axis=-1)
    g = jnp.take_along_axis(dd * vpos, first[..., None], axis=-1)[..., 0]
    ok = jnp.all(jnp.any(acc, axis=-1), axis=-1)
    eye = jnp.eye(d, dtype=dt)
    A = jnp.tril(N[..., :d], -1) + jnp.sqrt(2.0 * g)[..., None] * eye
    return A, ok


def sample_inverse_wishart(rng_key, df, Psi):
    """A draw of InvWishart(df, Psi) (density |X|^{-(df+d+1)/2} exp(-tr(Psi X^{-1})/2)).

    With Psi = L L^T and A the Bartlett factor of Wishart(df, I): W = L^{-T} A A^T L^{-1} is
    Wishart(df, Psi^{-1}), and X = W^{-1} = T^T T with T = A^{-1} L^T.
    Returns (X, ok); see :func:`bartlett` for ``ok``.
    """
    d = Psi.shape[-1]
    L = _chol(Psi)
    A, ok = bartlett(rng_key, df, d)
    T = solve_triangular(A, L.T, lower=True)
    return _sym(T.T @ T), ok


def sample_sigma_x(rng_key, S, data, Sigma_x_old):
    """Gibbs step for Sigma_x (appendix A.1): InvWishart(kappa + sum_j n_j, Lambda + sum_j S_j).
    (Keeps ``Sigma_x_old`` in the vanishingly rare case the Bartlett draw fails; see
    :func:`bartlett`: a state-independent mixture with the identity kernel, still exact.)"""
    X, ok = sample_inverse_wishart(rng_key, data.kappa + jnp.sum(data.n),
                                   data.Lambda + jnp.sum(S, axis=0))
    return jnp.where(ok, X, Sigma_x_old)


def z_loglik(S, theta, sigma_y2, z_hat, Sigma_z):
    """log N(z_hat; S theta, sigma_y^2 S + Sigma_z) for one holder (Prop. 3.1), and chol K."""
    K = _chol(sigma_y2 * S + Sigma_z)
    w = solve_triangular(K, z_hat - S @ theta, lower=True)
    d = z_hat.shape[-1]
    return -0.5 * (w @ w) - 0.5 * _logdet_chol(K) - 0.5 * d * _LOG_2PI, K


def s_log_target(S, L_S, theta, sigma_y2, Sigma_x_inv_factor, n, S_hat, sigma_s, z_hat, Sigma_z):
    """log p(S_j | Sigma_x, theta, sigma_y^2, S_hat_j, z_hat_j) up to a constant in S_j
    (section 4.1, the factor of Algorithm 1's MH move):

        (n_j - d - 1)/2 log|S_j| - tr(Sigma_x^{-1} S_j)/2               Wishart(n_j, Sigma_x)
        - sum_{k <= l} (S_hat_j,kl - S_j,kl)^2 / (2 sigma_s_j^2)          S_hat_j | S_j
        + log N(z_hat_j; S_j theta, sigma_y^2 S_j + Sigma_z_j)

    ``L_S`` is chol(S_j); ``Sigma_x_inv_factor`` is U with U U^T = Sigma_x^{-1}, so
    tr(Sigma_x^{-1} S_j) = ||U^T L_S||_F^2.
    """
    d = S.shape[-1]
    iu = jnp.triu_indices(d)
    tr = jnp.sum((Sigma_x_inv_factor.T @ L_S) ** 2)
    lw = 0.5 * (n - d - 1.0) * _logdet_chol(L_S) - 0.5 * tr
    lnoise = -0.5 * jnp.sum((S_hat[iu] - S[iu]) ** 2) / sigma_s**2
    lz, _ = z_loglik(S, theta, sigma_y2, z_hat, Sigma_z)
    return lw + lnoise + lz


def wishart_proposal(rng_key, L_S, alpha):
    """Draw S' ~ Wishart(S/alpha, alpha) (mean S) and the exact log proposal ratio
    log q(S | S') - log q(S' | S) (appendix A.3):

        (alpha - (d+1)/2) (log|S| - log|S'|) + (alpha/2) (tr(S^{-1} S') - tr(S'^{-1} S)).

    With S = L L^T and B = A / sqrt(alpha), A the Bartlett factor of Wishart(alpha, I):
    S' = (L B)(L B)^T, so chol(S') = L B, log|S| - log|S'| = -2 sum log B_ii,
    tr(S^{-1} S') = ||B||_F^2 and tr(S'^{-1} S) = ||B^{-1}||_F^2. Returns (S', chol S', ratio);
    the ratio is -inf (the move is rejected) when the Bartlett draw failed (see :func:`bartlett`).
    Batched: ``L_S`` (..., d, d) and ``alpha`` (...) give one proposal per leading index.
    """
    d = L_S.shape[-1]
    alpha = jnp.asarray(alpha, dtype=L_S.dtype)
    A, ok = bartlett(rng_key, alpha, d)
    S_new, L_new, log_ratio = _wishart_move(L_S, A / jnp.sqrt(alpha)[..., None, None], alpha)
    return S_new, L_new, jnp.where(ok, log_ratio, -jnp.inf)


def _wishart_move(L_S, B, alpha):
    d = L_S.shape[-1]
    L_new = L_S @ B
    eye = jnp.broadcast_to(jnp.eye(d, dtype=B.dtype), B.shape)
    Binv = solve_triangular(B, eye, lower=True)
    logdiag = jnp.sum(jnp.log(jnp.diagonal(B, axis1=-2, axis2=-1)), axis=-1)
    log_ratio = (alpha - 0.5 * (d + 1.0)) * (-2.0 * logdiag) + 0.5 * alpha * (
        jnp.sum(B**2, axis=(-2, -1)) - jnp.sum(Binv**2, axis=(-2, -1))
    )
    return _sym(L_new @ jnp.swapaxes(L_new, -1, -2)), L_new, log_ratio


def sigma_x_inv_factor(Sigma_x):
    """U with U U^T = Sigma_x^{-1}: U = L^{-T}, L = chol(Sigma_x)."""
    d = Sigma_x.shape[-1]
    L = _chol(Sigma_x)
    return solve_triangular(L, jnp.eye(d, dtype=L.dtype), lower=True).T


def theta_precision_terms(S, sigma_y2, z_hat, Sigma_z):
    """Per-holder terms of eq. (12): (S_j K_j^{-1} S_j, S_j K_j^{-1} z_hat_j,
    z_hat_j^T K_j^{-1} z_hat_j, log|K_j|) with K_j = sigma_y^2 S_j + Sigma_z_j, one holder."""
    K = _chol(sigma_y2 * S + Sigma_z)
    G = solve_triangular(K, S, lower=True)
    g = solve_triangular(K, z_hat, lower=True)
    return G.T @ G, G.T @ g, g @ g, _logdet_chol(K)


def _prior_terms(data):
    """C^{-1}, C^{-1} m, m^T C^{-1} m and log|C| of theta's prior."""
    d = data.m.shape[-1]
    Lc = _chol(data.C)
    Ci = solve_triangular(Lc, jnp.eye(d, dtype=Lc.dtype), lower=True)
    Cinv = Ci.T @ Ci
    w = Ci @ data.m
    return Cinv, Ci.T @ w, w @ w, _logdet_chol(Lc)


def theta_moments(S, sigma_y2, data):
    """Cholesky factor R of P = Sigma_p^{-1} and the mean m_p of theta | S, sigma_y^2, z_hat
    (eq. 12): P = C^{-1} + sum_j S_j K_j^{-1} S_j, m_p = P^{-1}(C^{-1} m + sum_j S_j K_j^{-1} z_j)."""
    Pj, hj, _, _ = jax.vmap(theta_precision_terms, (0, None, 0, 0))(S, sigma_y2, data.z_hat,
                                                                     data.Sigma_z)
    Cinv, Cm, _, _ = _prior_terms(data)
    R = _chol(Cinv + jnp.sum(Pj, axis=0))
    h = Cm + jnp.sum(hj, axis=0)
    mean = jax.scipy.linalg.cho_solve((R, True), h)
    return R, mean


def sample_theta(rng_key, S, sigma_y2, data):
    """Gibbs step for theta (eq. 12): theta = m_p + R^{-T} eps, eps ~ N(0, I), P = R R^T."""
    R, mean = theta_moments(S, sigma_y2, data)
    eps = jax.random.normal(rng_key, mean.shape, dtype=mean.dtype)
    return mean + solve_triangular(R, eps, lower=True, trans=1)


def sigma_y2_log_target(sigma_y2, S, theta, data):
    """log p(sigma_y^2 | theta, S, z_hat) up to a constant (appendix A.4):
    log InvGamma(sigma_y^2; a, b) + sum_j log N(z_hat_j; S_j theta, sigma_y^2 S_j + Sigma_z_j)."""
    lz, _ = jax.vmap(z_loglik, (0, None, None, 0, 0))(S, theta, sigma_y2, data.z_hat, data.Sigma_z)
    return _log_invgamma(sigma_y2, data.a, data.b) + jnp.sum(lz)


def _log_invgamma(x, a, b):
    return jnp.where(x > 0, -(a + 1.0) * jnp.log(jnp.abs(x)) - b / x, -jnp.inf)


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


def _mh_decide(rng_key, log_r):
    log_r = jnp.where(jnp.isnan(log_r), -jnp.inf, log_r)
    u = jax.random.uniform(rng_key, jnp.shape(log_r), dtype=log_r.dtype)
    accept = jnp.log(u) < log_r
    return accept, jnp.exp(jnp.minimum(0.0, log_r))


# ---------------------------------------------------------------------------------------------
# MCMC-normalX (Algorithm 1)
# ---------------------------------------------------------------------------------------------


def normalx_step(rng_key, state: NormalXState, data, tuning: Tuning, proposal_ratio=True):
    """One sweep of MCMC-normalX (Algorithm 1), in the paper's order:

    1. Sigma_x ~ InvWishart(kappa + n, Lambda + sum_j S_j)                         (eq. 11, A.1)
    2. for all j at once (vmapped; the J factors are independent given the rest, section 4.1):
       MH on S_j with proposal S_j' ~ Wishart(S_j/alpha_j, alpha_j), acceptance ratio
       p(S_j'|.) q(S_j|S_j') / (p(S_j|.) q(S_j'|S_j))                               (A.3)
    3. theta ~ N(m_p, Sigma_p)                                                      (eq. 12, A.2)
    4. random-walk MH on sigma_y^2                                                  (A.4)

    ``proposal_ratio=False`` drops the Hastings correction of step 2: a deliberately WRONG
    kernel, kept only as the negative control of the invariance tests.
    """
    k_sx, k_prop, k_acc, k_theta, k_sy = jax.random.split(rng_key, 5)
    J, d = data.z_hat.shape
    Sigma_x = sample_sigma_x(k_sx, state.S, data, state.Sigma_x)
    U = sigma_x_inv_factor(Sigma_x)
    L_S = jax.vmap(_chol)(state.S)
    alpha = jnp.exp(tuning.log_alpha)

    def target(S, L, n, S_hat, sigma_s, z_hat, Sigma_z):
        return s_log_target(S, L, state.theta, state.sigma_y2, U, n, S_hat, sigma_s, z_hat,
                            Sigma_z)

    S_new, L_new, log_q = wishart_proposal(k_prop, L_S, alpha)
    args = (data.n, data.S_hat, data.sigma_s, data.z_hat, data.Sigma_z)
    lt_new = jax.vmap(target)(S_new, L_new, *args)
    lt_old = jax.vmap(target)(state.S, L_S, *args)
    log_r = lt_new - lt_old + (log_q if proposal_ratio else 0.0)
    accept, acc_prob = _mh_decide(k_acc, log_r)
    S = jnp.where(accept[:, None, None], S_new, state.S)

    theta = sample_theta(k_theta, S, state.sigma_y2, data)
    sigma_y2, acc_sy, accept_sy = _rw_sigma_y2(
        k_sy, state.sigma_y2, lambda s2: sigma_y2_log_target(s2, S, theta, data), tuning.log_step
    )
    new = NormalXState(theta=theta, sigma_y2=sigma_y2, Sigma_x=Sigma_x, S=S)
    return new, Info(acc_prob, accept, acc_sy, accept_sy)


# ---------------------------------------------------------------------------------------------
# MCMC-fixedS (Algorithm 2)
# ---------------------------------------------------------------------------------------------


def fixeds_step(rng_key, state: FixedSState, data, tuning: Tuning):
    """One sweep of MCMC-fixedS (Algorithm 2): S_j = data.S_fixed throughout;
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


def fixeds_theta_step(rng_key, state: FixedSState, data, tuning: Tuning):
    """MCMC-fixedS with sigma_y^2 held at its current value (only the theta Gibbs step)."""
    theta = sample_theta(rng_key, data.S_fixed, state.sigma_y2, data)
    J = data.S_fixed.shape[0]
    zeros = jnp.zeros((J,), dtype=theta.dtype)
    one = jnp.ones((), dtype=theta.dtype)
    return FixedSState(theta, state.sigma_y2), Info(zeros, zeros > 0, one, one > 0)


# ---------------------------------------------------------------------------------------------
# Collapsed normalX: theta integrated out of the S_j and sigma_y^2 moves
# ---------------------------------------------------------------------------------------------


class _Totals(NamedTuple):
    P: jax.Array  # C^{-1} + sum_j S_j K_j^{-1} S_j
    h: jax.Array  # C^{-1} m + sum_j S_j K_j^{-1} z_j
    Q: jax.Array  # m^T C^{-1} m + sum_j z_j^T K_j^{-1} z_j
    LD: jax.Array  # sum_j log|K_j|


def collapsed_loglik(tot: _Totals):
    """log p(z_hat_1..J | S, sigma_y^2) with theta ~ N(m, C) integrated out, up to a constant
    (-log|C|/2 - J d log(2 pi)/2):

        -(Q - h^T P^{-1} h)/2 - sum_j log|K_j|/2 - log|P|/2.
    """
    R = _chol(tot.P)
    w = solve_triangular(R, tot.h, lower=True)
    return -0.5 * (tot.Q - w @ w) - 0.5 * tot.LD - 0.5 * _logdet_chol(R)


def _totals(S, sigma_y2, data, prior):
    Pj, hj, qj, ldj = jax.vmap(theta_precision_terms, (0, None, 0, 0))(
        S, sigma_y2, data.z_hat, data.Sigma_z
    )
    Cinv, Cm, mCm, _ = prior
    tot = _Totals(Cinv + jnp.sum(Pj, 0), Cm + jnp.sum(hj, 0), mCm + jnp.sum(qj), jnp.sum(ldj))
    return tot, (Pj, hj, qj, ldj)


def collapsed_s_log_prior(S, L_S, U, n, S_hat, sigma_s):
    """The theta-free part of S_j's conditional: Wishart(n_j, Sigma_x) and S_hat_j | S_j."""
    d = S.shape[-1]
    iu = jnp.triu_indices(d)
    tr = jnp.sum((U.T @ L_S) ** 2)
    return (0.5 * (n - d - 1.0) * _logdet_chol(L_S) - 0.5 * tr
            - 0.5 * jnp.sum((S_hat[iu] - S[iu]) ** 2) / sigma_s**2)


def collapsed_step(rng_key, state: NormalXState, data, tuning: Tuning, proposal_ratio=True):
    """One sweep of the collapsed normalX kernel (method ``"normalx-collapsed"``).

    Same target as Algorithm 1, but theta is integrated out of every MH move, which removes the
    tight coupling z_hat_j ~ S_j theta that makes Algorithm 1 mix slowly:

    1. Sigma_x ~ InvWishart(kappa + n, Lambda + sum_j S_j)               (A.1; theta-free)
    2. for j = 1..J in turn: MH on S_j with the Wishart proposal of A.3 targeting
       p(S_j | S_-j, Sigma_x, sigma_y^2, z_hat, S_hat) with theta integrated out:
       W(S_j; n_j, Sigma_x) N(S_hat_j; S_j) p(z_hat | S, sigma_y^2), where
       p(z_hat | S, sigma_y^2) is :func:`collapsed_loglik` (O(d^3) per move: only holder j's
       terms of P, h, Q change; the J proposals are drawn batched, the accept/reject
       decisions run in sequence with lax.scan)
    3. random-walk MH on sigma_y^2 targeting IG(sigma_y^2; a, b) p(z_hat | S, sigma_y^2)
    4. theta ~ N(m_p, Sigma_p) given the new S, sigma_y^2                (eq. 12)

    Steps 1-3 leave p(Sigma_x, S, sigma_y^2 | data) invariant (theta is not conditioned on),
    and step 4 draws theta from its exact conditional, so the sweep leaves the joint posterior
    invariant (a partially collapsed Gibbs sampler, van Dyk & Park 2008).
    """
    k_sx, k_prop, k_acc, k_sy, k_theta = jax.random.split(rng_key, 5)
    J, d = data.z_hat.shape
    Sigma_x = sample_sigma_x(k_sx, state.S, data, state.Sigma_x)
    U = sigma_x_inv_factor(Sigma_x)
    prior = _prior_terms(data)
    s2 = state.sigma_y2
    tot, old = _totals(state.S, s2, data, prior)
    # Holder j's move changes only S_j, so every proposal and every per-holder term can be
    # computed up front, batched; only the accept/reject decisions run in sequence.
    L_S = jax.vmap(_chol)(state.S)
    alpha = jnp.exp(tuning.log_alpha)
    S_new, L_new, log_q = wishart_proposal(k_prop, L_S, alpha)
    new = jax.vmap(theta_precision_terms, (0, None, 0, 0))(S_new, s2, data.z_hat, data.Sigma_z)
    lp = jax.vmap(collapsed_s_log_prior, (0, 0, None, 0, 0, 0))
    args = (data.n, data.S_hat, data.sigma_s)
    dprior = lp(S_new, L_new, U, *args) - lp(state.S, L_S, U, *args)
    if proposal_ratio:
        dprior = dprior + log_q
    log_u = jnp.log(jax.random.uniform(k_acc, (J,), dtype=s2.dtype))

    def move(carry, xs):
        tot, ll = carry
        o, n, dp, lu = xs
        tot_new = jax.tree.map(lambda t, a, b: t - a + b, tot, _Totals(*o), _Totals(*n))
        ll_new = collapsed_loglik(tot_new)
        log_r = dp + ll_new - ll
        log_r = jnp.where(jnp.isnan(log_r), -jnp.inf, log_r)
        accept = lu < log_r
        tot = jax.tree.map(lambda a, b: jnp.where(accept, a, b), tot_new, tot)
        return (tot, jnp.where(accept, ll_new, ll)), (jnp.exp(jnp.minimum(0.0, log_r)), accept)

    (_, _), (acc_prob, accept) = jax.lax.scan(
        move, (tot, collapsed_loglik(tot)), (old, new, dprior, log_u))
    S = jnp.where(accept[:, None, None], S_new, state.S)

    def sy_target(s2):
        t, _ = _totals(S, s2, data, prior)
        return _log_invgamma(s2, data.a, data.b) + collapsed_loglik(t)

    sigma_y2, acc_sy, accept_sy = _rw_sigma_y2(k_sy, state.sigma_y2, sy_target, tuning.log_step)
    theta = sample_theta(k_theta, S, sigma_y2, data)
    new = NormalXState(theta=theta, sigma_y2=sigma_y2, Sigma_x=Sigma_x, S=S)
    return new, Info(acc_prob, accept, acc_sy, accept_sy)


# ---------------------------------------------------------------------------------------------
# Adaptation (warm-up only)
# ---------------------------------------------------------------------------------------------


def adapt(tuning: Tuning, info: Info, i, target_accept_S=0.2, target_accept_sigma_y2=0.2,
          min_log_alpha=None):
    """Robbins-Monro update toward the target acceptance (Andrieu & Thoms 2008), gain
    gamma_i = (i + 1)^{-0.6} as in the authors' code:

        log alpha_j <- log alpha_j - gamma_i (accept_prob_S_j - target)   (larger alpha = smaller)
        log step    <- log step    + gamma_i (accept_prob_sigma_y2 - target)

    Used only during warm-up, so the kept draws come from a fixed, valid kernel.
    """
    gamma = (i + 1.0) ** -0.6
    log_alpha = tuning.log_alpha - gamma * (info.accept_prob_S - target_accept_S)
    if min_log_alpha is not None:
        log_alpha = jnp.maximum(log_alpha, min_log_alpha)
    log_step = tuning.log_step + gamma * (info.accept_prob_sigma_y2 - target_accept_sigma_y2)
    return Tuning(log_alpha, log_step)
