"""Reference forms of the kernels' pieces, written directly from the maths, that the tests check
the fused kernels against, and the deliberately wrong kernels of the Geweke negative controls.

The wrong kernel is the production kernel built with one correction removed: the module function
that computes the Hastings correction of the Wishart random walk is swapped, while the kernel is
traced, for a version that drops it.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
from jax.scipy.linalg import solve_triangular

from bayesdp.paper.kernels import normalx_paper
from bayesdp.inference.kernels.common import Totals, theta_precision_terms, wishart_rw, z_loglik
from bayesdp.inference.kernels.linalg import bartlett, chol, logdet_chol, mm, tri_inv


def s_log_target(S, L_S, theta, sigma_y2, Sigma_x_inv_factor, n, S_hat, sigma_s, z_hat,
                 Sigma_z):
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
    lw = 0.5 * (n - d - 1.0) * logdet_chol(L_S) - 0.5 * tr
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
    the ratio is -inf (the move is rejected) when the Bartlett draw failed
    (``kernels.linalg.bartlett``).
    Batched: ``L_S`` (..., d, d) and ``alpha`` (...) give one proposal per leading index.
    """
    d = L_S.shape[-1]
    alpha = jnp.asarray(alpha, dtype=L_S.dtype)
    A, ok = bartlett(rng_key, alpha, d)
    B = A / jnp.sqrt(alpha)[..., None, None]
    S_new, log_ratio, _ = wishart_rw(L_S, B, tri_inv(B), alpha)
    return S_new, mm(L_S, B), jnp.where(ok, log_ratio, -jnp.inf)


def sigma_x_inv_factor(Sigma_x):
    """U with U U^T = Sigma_x^{-1}: U = L^{-T}, L = chol(Sigma_x)."""
    d = Sigma_x.shape[-1]
    L = chol(Sigma_x)
    return solve_triangular(L, jnp.eye(d, dtype=L.dtype), lower=True).T


def totals(S, sigma_y2, data, prior):
    """The totals P, h, Q, sum log|K_j| (common.Totals) of eq. (12) holder by holder, with one
    LAPACK-free Cholesky per holder (common.theta_precision_terms), and the per-holder terms."""
    Pj, hj, qj, ldj = jax.vmap(theta_precision_terms, (0, None, 0, 0))(
        S, sigma_y2, data.z_hat, data.Sigma_z
    )
    Cinv, Cm, mCm, _ = prior
    tot = Totals(Cinv + jnp.sum(Pj, 0), Cm + jnp.sum(hj, 0), mCm + jnp.sum(qj), jnp.sum(ldj))
    return tot, (Pj, hj, qj, ldj)


def collapsed_s_log_prior(S, L_S, U, n, S_hat, sigma_s):
    """The theta-free part of S_j's conditional: Wishart(n_j, Sigma_x) and S_hat_j | S_j."""
    d = S.shape[-1]
    iu = jnp.triu_indices(d)
    tr = jnp.sum((U.T @ L_S) ** 2)
    return (0.5 * (n - d - 1.0) * logdet_chol(L_S) - 0.5 * tr
            - 0.5 * jnp.sum((S_hat[iu] - S[iu]) ** 2) / sigma_s**2)


# ---------------------------------------------------------------------------------------------
# Wrong kernels for the negative controls
# ---------------------------------------------------------------------------------------------


def _without_log_q(rw):
    """wishart_rw with the log proposal ratio set to 0 (the random walk taken as symmetric)."""
    def f(L_S, B, B_inv, alpha):
        S_new, log_q, logdet_diff = rw(L_S, B, B_inv, alpha)
        return S_new, jnp.zeros_like(log_q), logdet_diff
    return f


@contextlib.contextmanager
def _swap(module, name, wrap):
    old = getattr(module, name)
    setattr(module, name, wrap(old))
    try:
        yield
    finally:
        setattr(module, name, old)


def without_proposal_ratio(step):
    """``step`` traced with the Hastings correction of the Wishart random walk (normalx-paper)
    dropped: a deliberately WRONG kernel. Call it only inside a fresh trace (as the Geweke
    simulator does)."""
    def wrong(*args, **kwargs):
        with _swap(normalx_paper, "wishart_rw", _without_log_q):
            return step(*args, **kwargs)
    return wrong
