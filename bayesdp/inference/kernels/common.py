"""The pieces of the normalX and fixedS targets that several kernels share: the positions, the
per-holder z_hat terms, the conditional of theta (eq. 12), the Gibbs draw of Sigma_x (A.1), the
Wishart random walk (A.3) and the likelihood of z_hat with theta integrated out.

Notation (paper section 4, eq. 10): for holder j, ``K_j = sigma_y^2 S_j + Sigma_z_j`` is the
covariance of z_hat_j given (S_j, theta, sigma_y^2), and

    P(S, sigma_y^2) = C^{-1} + sum_j S_j K_j^{-1} S_j,     h = C^{-1} m + sum_j S_j K_j^{-1} z_hat_j

are the precision and the precision-times-mean of theta | S, sigma_y^2, z_hat (eq. 12).
``data`` is a :class:`bayesdp.models.regression.ModelData`.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from .adaptation import Tuning
from .linalg import LOG_2PI, chol, logdet_chol, mm, mT, mv, solve_lower, sym, tri_inv


class NormalXState(NamedTuple):
    """Position of the normalX kernels (the latent variables of ``normalx_model``).

    theta: (d,) regression coefficients.
    sigma_y2: () noise variance of y.
    Sigma_x: (d, d) covariance of the features.
    S: (J, d, d) each holder's X_j^T X_j.
    """

    theta: jax.Array
    sigma_y2: jax.Array
    Sigma_x: jax.Array
    S: jax.Array


class FixedSState(NamedTuple):
    """Position of the fixedS kernels (the latent variables of ``fixeds_model``).

    theta: (d,) regression coefficients.
    sigma_y2: () noise variance of y.
    """

    theta: jax.Array
    sigma_y2: jax.Array


class MHInfo(NamedTuple):
    """Diagnostics of one sweep of the kernels whose moves are Metropolis-Hastings steps on
    S_j and sigma_y^2 and Gibbs steps otherwise (the paper's Algorithms 1 and 2).

    accept_prob_S: (J,) MH acceptance probabilities min(1, ratio) of the S_j moves (zeros for
        the fixedS kernels, which have no S move).
    is_accepted_S: (J,) their decisions (False for the fixedS kernels).
    accept_prob_sigma_y2: () acceptance probability of the sigma_y^2 random walk (one when
        sigma_y^2 is held fixed).
    is_accepted_sigma_y2: () its decision.
    """

    accept_prob_S: jax.Array
    is_accepted_S: jax.Array
    accept_prob_sigma_y2: jax.Array
    is_accepted_sigma_y2: jax.Array


def init_state(state_cls, position, log_alpha, log_step):
    """``state_cls`` at ``position`` (a dict of the model's latent values; extra keys are
    ignored) and the initial :class:`.adaptation.Tuning`."""
    state = state_cls(**{k: jnp.asarray(position[k]) for k in state_cls._fields})
    return state, Tuning(log_alpha, log_step)


def z_loglik(S, theta, sigma_y2, z_hat, Sigma_z):
    """log N(z_hat; S theta, sigma_y^2 S + Sigma_z) for one holder (Prop. 3.1), and chol K."""
    K = chol(sigma_y2 * S + Sigma_z)
    w = solve_triangular(K, z_hat - S @ theta, lower=True)
    d = z_hat.shape[-1]
    return -0.5 * (w @ w) - 0.5 * logdet_chol(K) - 0.5 * d * LOG_2PI, K


def theta_precision_terms(S, sigma_y2, z_hat, Sigma_z):
    """Per-holder terms of eq. (12): (S_j K_j^{-1} S_j, S_j K_j^{-1} z_hat_j,
    z_hat_j^T K_j^{-1} z_hat_j, log|K_j|) with K_j = sigma_y^2 S_j + Sigma_z_j, one holder."""
    K = chol(sigma_y2 * S + Sigma_z)
    G = solve_triangular(K, S, lower=True)
    g = solve_triangular(K, z_hat, lower=True)
    return G.T @ G, G.T @ g, g @ g, logdet_chol(K)


def prior_terms(data):
    """C^{-1}, C^{-1} m, m^T C^{-1} m and log|C| of theta's prior."""
    d = data.m.shape[-1]
    Lc = chol(data.C)
    Ci = solve_triangular(Lc, jnp.eye(d, dtype=Lc.dtype), lower=True)
    Cinv = Ci.T @ Ci
    w = Ci @ data.m
    return Cinv, Ci.T @ w, w @ w, logdet_chol(Lc)


def theta_moments(S, sigma_y2, data):
    """Cholesky factor R of P = Sigma_p^{-1} and the mean m_p of theta | S, sigma_y^2, z_hat
    (eq. 12): P = C^{-1} + sum_j S_j K_j^{-1} S_j,
    m_p = P^{-1}(C^{-1} m + sum_j S_j K_j^{-1} z_j)."""
    Pj, hj, _, _ = jax.vmap(theta_precision_terms, (0, None, 0, 0))(S, sigma_y2, data.z_hat,
                                                                    data.Sigma_z)
    Cinv, Cm, _, _ = prior_terms(data)
    R = chol(Cinv + jnp.sum(Pj, axis=0))
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
    return log_invgamma(sigma_y2, data.a, data.b) + jnp.sum(lz)


def log_invgamma(x, a, b):
    return jnp.where(x > 0, -(a + 1.0) * jnp.log(jnp.abs(x)) - b / x, -jnp.inf)


class Prelude(NamedTuple):
    Sigma_x: jax.Array  # Gibbs draw of Sigma_x | S (the old value if its Bartlett draw failed)
    W: jax.Array  # Sigma_x^{-1}
    F: jax.Array  # a square root, F F^T = Sigma_x
    L_S: jax.Array  # chol S_j (J, d, d)
    Cinv: jax.Array  # C^{-1}
    Cm: jax.Array  # C^{-1} m
    mCm: jax.Array  # m^T C^{-1} m
    tri_inv: jax.Array  # inverses of the extra lower-triangular matrices passed in
    chol: jax.Array  # Cholesky factors of the extra SPD matrices passed in (or None)


def prelude(S, Sigma_x_old, data, A_x, ok_x, lower, spd=None):
    """Step 1 of both normalX sweeps and the factors the rest of the sweep needs, with ONE
    batched Cholesky (S_1..S_J, Psi = Lambda + sum_j S_j, the old Sigma_x, C) and ONE batched
    triangular inverse (chol Psi, the Bartlett factor A_x, chol of the old Sigma_x, chol C and
    the caller's ``lower`` matrices, e.g. the Bartlett factors of the S_j proposals). The
    caller's ``spd`` matrices, if any, are factorised in the same call.

    Sigma_x ~ InvWishart(kappa + n, Psi) (A.1) by the Bartlett decomposition: with A_x the
    Bartlett factor of Wishart(kappa + n, I) and Psi = L L^T, W = L^{-T} A_x A_x^T L^{-1} is
    Wishart(kappa + n, Psi^{-1}), so Sigma_x = W^{-1} = T^T T with T = A_x^{-1} L^T,
    Sigma_x^{-1} = V V^T with V = L^{-T} A_x, and F = T^T is a square root of Sigma_x. If the
    Bartlett draw failed (``ok_x`` False) the old Sigma_x is kept: the failure probability does
    not depend on the state (:func:`.linalg.bartlett`), so this is a state-independent mixture
    with the identity kernel and still leaves the target invariant."""
    J, d = S.shape[0], S.shape[-1]
    Psi = data.Lambda + jnp.sum(S, axis=0)
    mats = [S, jnp.stack([Psi, Sigma_x_old, data.C])] + ([] if spd is None else [spd])
    L = chol(jnp.concatenate(mats))
    L_S, L_psi, L_old, L_C = L[:J], L[J], L[J + 1], L[J + 2]
    inv = tri_inv(jnp.concatenate([jnp.stack([L_psi, A_x, L_old, L_C]), lower]))
    L_psi_i, A_x_i, L_old_i, L_C_i = inv[0], inv[1], inv[2], inv[3]
    T = mm(A_x_i, mT(L_psi))
    V = mm(mT(L_psi_i), A_x)
    Sigma_x = jnp.where(ok_x, sym(mm(mT(T), T)), Sigma_x_old)
    W = jnp.where(ok_x, sym(mm(V, mT(V))), mm(mT(L_old_i), L_old_i))
    F = jnp.where(ok_x, mT(T), L_old)
    Cinv = mm(mT(L_C_i), L_C_i)
    Cm = mv(Cinv, data.m)
    return Prelude(Sigma_x, W, F, L_S, Cinv, Cm, data.m @ Cm, inv[4:],
                   None if spd is None else L[J + 3:])


def wishart_rw(L_S, B, B_inv, alpha):
    """The Wishart random-walk proposal S' ~ Wishart(S/alpha, alpha) (mean S) of A.3, from a
    given scaled Bartlett factor B = A / sqrt(alpha) (A the Bartlett factor of Wishart(alpha, I))
    and its inverse: with S = L_S L_S^T, S' = (L_S B)(L_S B)^T. The exact log proposal ratio is

        log q(S | S') - log q(S' | S)
            = (alpha - (d+1)/2) (log|S| - log|S'|) + (alpha/2) (tr(S^{-1} S') - tr(S'^{-1} S)),

    with log|S| - log|S'| = -2 sum log B_ii, tr(S^{-1} S') = ||B||_F^2 and
    tr(S'^{-1} S) = ||B^{-1}||_F^2. Returns S', that ratio and log|S'| - log|S|."""
    d = L_S.shape[-1]
    L_new = mm(L_S, B)
    logdiag = jnp.sum(jnp.log(jnp.diagonal(B, axis1=-2, axis2=-1)), axis=-1)
    log_q = (alpha - 0.5 * (d + 1.0)) * (-2.0 * logdiag) + 0.5 * alpha * (
        jnp.sum(B**2, axis=(-2, -1)) - jnp.sum(B_inv**2, axis=(-2, -1)))
    return sym(mm(L_new, mT(L_new))), log_q, 2.0 * logdiag


def noise_loglik(S, S_hat, sigma_s):
    """log N(S_hat_j; S_j, sigma_s_j^2) over the upper triangle incl. the diagonal, up to a
    constant; batched over leading axes."""
    d = S.shape[-1]
    upper = np.triu(np.ones((d, d)))
    return -0.5 * jnp.sum(upper * (S_hat - S) ** 2, axis=(-2, -1)) / sigma_s**2


def wishart_loglik_diff(S_new, S, logdet_diff, W, n):
    """log W(S_new; n, Sigma_x) - log W(S; n, Sigma_x) with W = Sigma_x^{-1}."""
    d = S.shape[-1]
    return (0.5 * (n - d - 1.0) * logdet_diff
            - 0.5 * jnp.sum(W * (S_new - S), axis=(-2, -1)))


class ZTerms(NamedTuple):
    """Per-holder solves with K_j = sigma_y^2 S_j + Sigma_z_j = L_K L_K^T:
    G = L_K^{-1} S_j, g = L_K^{-1} z_hat_j, half_logdet = log|K_j| / 2."""

    G: jax.Array
    g: jax.Array
    half_logdet: jax.Array


def z_terms(S, sigma_y2, z_hat, Sigma_z):
    """:class:`ZTerms` for a batch of S (M, d, d) with sigma_y2 scalar or (M,): one batched
    Cholesky and one batched triangular solve with d + 1 right-hand sides. Then
    log N(z_hat; S theta, K) = -|g - G theta|^2/2 - half_logdet - d log(2 pi)/2, and the eq. (12)
    terms are S K^{-1} S = G^T G, S K^{-1} z_hat = G^T g, z_hat^T K^{-1} z_hat = |g|^2."""
    s2 = jnp.asarray(sigma_y2)[..., None, None]
    return z_terms_chol(chol(s2 * S + Sigma_z), S, z_hat)


def z_terms_chol(LK, S, z_hat):
    """:func:`z_terms` from given Cholesky factors LK of the K_j."""
    d = S.shape[-1]
    Y = solve_lower(LK, jnp.concatenate([S, z_hat[..., None]], axis=-1))
    hl = jnp.sum(jnp.log(jnp.diagonal(LK, axis1=-2, axis2=-1)), axis=-1)
    return ZTerms(Y[..., :d], Y[..., d], hl)


def z_loglik_terms(t: ZTerms, theta):
    """log N(z_hat_j; S_j theta, K_j) + d log(2 pi)/2, per holder, from :func:`z_terms`."""
    w = t.g - mv(t.G, theta)
    return -0.5 * jnp.sum(w**2, axis=-1) - t.half_logdet


def select(mask, a, b):
    """Per-holder where over the leaves of two pytrees with leading axis J."""
    return jax.tree.map(lambda x, y: jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)),
                                               x, y), a, b)


def theta_from_precision(P, h, eps):
    """theta ~ N(P^{-1} h, P^{-1}) from standard normals eps: with P = R R^T,
    theta = R^{-T}(R^{-1} h + eps) (= m_p + R^{-T} eps, as in :func:`sample_theta`)."""
    R_inv = tri_inv(chol(P))
    return mv(mT(R_inv), mv(R_inv, h) + eps)


class Totals(NamedTuple):
    P: jax.Array  # C^{-1} + sum_j S_j K_j^{-1} S_j
    h: jax.Array  # C^{-1} m + sum_j S_j K_j^{-1} z_j
    Q: jax.Array  # m^T C^{-1} m + sum_j z_j^T K_j^{-1} z_j
    LD: jax.Array  # sum_j log|K_j|


def collapsed_loglik(tot: Totals):
    """log p(z_hat_1..J | S, sigma_y^2) with theta ~ N(m, C) integrated out, up to a constant
    (-log|C|/2 - J d log(2 pi)/2):

        -(Q - h^T P^{-1} h)/2 - sum_j log|K_j|/2 - log|P|/2.

    LAPACK's Cholesky (not the unrolled one of :mod:`.linalg`): the slice sampler evaluates it
    at several call sites, and one LAPACK call is less code to compile than the unrolled form at
    each of them."""
    R = jnp.linalg.cholesky(tot.P)
    w = solve_triangular(R, tot.h, lower=True)
    return -0.5 * (tot.Q - w @ w) - 0.5 * tot.LD - 0.5 * logdet_chol(R)


def nan_to_reject(log_r):
    return jnp.where(jnp.isnan(log_r), -jnp.inf, log_r)
