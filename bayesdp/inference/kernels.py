"""Hand-written MCMC kernels: the paper's Algorithms 1 and 2 as published
(:func:`normalx_paper_step`, :func:`fixeds_paper_step`), bayesdp's default kernels for the same
posteriors (:func:`normalx_step`: centred and non-centred moves of (Sigma_x, S) interwoven and a
slice sampler on sigma_y^2; :func:`fixeds_step`: collapsed slice/Gibbs), and the collapsed
variant :func:`collapsed_step`.

Every kernel is a pure function ``step(rng_key, state, data, tuning) -> (state, info)`` over
small NamedTuples (the style of blackjax's ``rmh.py``); :mod:`bayesdp.inference.mcmc` wraps them
as numpyro ``MCMCKernel``s. ``data`` is a :class:`bayesdp.models.regression.ModelData`. The target
is the joint density of :func:`bayesdp.models.regression.normalx_model` (or ``fixeds_model``); the
tests check each log target below against ``numpyro.infer.util.log_density`` of those models.

Notation (paper section 4, eq. 10): for holder j, ``K_j = sigma_y^2 S_j + Sigma_z_j`` is the
covariance of z_hat_j given (S_j, theta, sigma_y^2), and

    P(S, sigma_y^2) = C^{-1} + sum_j S_j K_j^{-1} S_j,     h = C^{-1} m + sum_j S_j K_j^{-1} z_hat_j

are the precision and the precision-times-mean of theta | S, sigma_y^2, z_hat (eq. 12).

All linear algebra uses Cholesky factors and triangular solves; no explicit inverse of a
covariance is formed (the only inverses are of triangular factors). Run under float64
(``bayesdp._jax.enable_x64()``).

Speed (see docs/methods.md): at the sizes of the paper (d <= 8, J ~ 10) a sweep is dominated by
XLA's fixed cost per operation on CPU, not by flops. The sweeps therefore draw all their random
numbers in a few flat calls, do all Cholesky factorisations and triangular inverses that do not
depend on each other in one batched call, and, for d <= ``SMALL_D``, use unrolled Cholesky /
triangular-solve / matmul code that XLA fuses into a few loops (no LAPACK custom calls, no dot
thunks). The maths is that of the reference functions below (``s_log_target``,
``sample_sigma_x``, ``sample_theta``, ...), which the tests check against the numpyro models.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
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


LOG_GROUP_STEP_INIT = -4.6  # log 0.01: initial scale of the collapsed kernel's group move


class Tuning(NamedTuple):
    """Proposal parameters: log alpha_j (J,) of the Wishart proposals W(S_j/alpha_j, alpha_j)
    (larger alpha = smaller moves), the log of the random-walk step on sigma_y^2, and the log
    scale of the collapsed kernel's group move (unused by the other kernels)."""

    log_alpha: jax.Array
    log_step: jax.Array
    log_group_step: jax.Array = LOG_GROUP_STEP_INIT


class Info(NamedTuple):
    """Diagnostics of one sweep: MH acceptance probabilities min(1, ratio) and decisions, for
    each holder's S_j move (J,) and for the sigma_y^2 move (scalar). fixedS reports the S
    entries as zeros (no S move). The collapsed kernel also reports its prior-proposal moves
    (J,) and its group move (scalar); the other kernels leave these None. Kernels that slice
    sample log sigma_y^2 report its move as accepted (a slice sampler always moves), the size
    of the move |log sigma_y2' - log sigma_y2| (``jump_log_sigma_y2``, which adapts the slice
    width in warm-up) and the number of log-density evaluations it took (``evals_sigma_y2``).
    :func:`normalx_step` reports its non-centred (Sigma_x, S) move in ``*_noncentred``."""

    accept_prob_S: jax.Array
    is_accepted_S: jax.Array
    accept_prob_sigma_y2: jax.Array
    is_accepted_sigma_y2: jax.Array
    accept_prob_prior: jax.Array = None
    is_accepted_prior: jax.Array = None
    accept_prob_group: jax.Array = None
    is_accepted_group: jax.Array = None
    jump_log_sigma_y2: jax.Array = None
    evals_sigma_y2: jax.Array = None
    accept_prob_noncentred: jax.Array = None
    is_accepted_noncentred: jax.Array = None


# ---------------------------------------------------------------------------------------------
# Building blocks
# ---------------------------------------------------------------------------------------------


SMALL_D = 8  # up to this d, Cholesky / triangular solves / matmuls are unrolled (see module doc)


def _sym(A):
    return 0.5 * (A + jnp.swapaxes(A, -1, -2))


def _mT(A):
    return jnp.swapaxes(A, -1, -2)


def _assemble(X, like):
    """Stack a d x d nested list of (...)-shaped arrays (None = 0) into a (..., d, d) array."""
    zero = jnp.zeros_like(like[..., 0, 0])
    return jnp.stack([jnp.stack([zero if x is None else x for x in row], -1) for row in X], -2)


def _chol(A):
    """Lower Cholesky factor of the symmetrised A (batched). For d <= SMALL_D an unrolled
    Cholesky-Banachiewicz (the algorithm of LAPACK's dpotf2, same rounding behaviour); a matrix
    that is not positive definite gives NaN entries, as LAPACK's path does."""
    A = _sym(A)
    d = A.shape[-1]
    if d > SMALL_D:
        return jnp.linalg.cholesky(A)
    return _assemble(_chol_entries(lambda i, j: A[..., i, j], d), A)


def _chol_entries(a, d):
    """Unrolled Cholesky of the symmetric matrix with lower entries a(i, j) (i >= j), as a
    nested list L[i][j] (None above the diagonal)."""
    L = [[None] * d for _ in range(d)]
    for j in range(d):
        s = a(j, j)
        for k in range(j):
            s = s - L[j][k] * L[j][k]
        L[j][j] = jnp.sqrt(s)
        r = 1.0 / L[j][j]
        for i in range(j + 1, d):
            s = a(i, j)
            for k in range(j):
                s = s - L[i][k] * L[j][k]
            L[i][j] = s * r
    return L


def _tri_inv(L):
    """Inverse of a lower-triangular matrix (batched)."""
    d = L.shape[-1]
    if d > SMALL_D:
        eye = jnp.broadcast_to(jnp.eye(d, dtype=L.dtype), L.shape)
        return solve_triangular(L, eye, lower=True)
    X = [[None] * d for _ in range(d)]
    for i in range(d):
        X[i][i] = 1.0 / L[..., i, i]
    for j in range(d):
        for i in range(j + 1, d):
            s = L[..., i, j] * X[j][j]
            for k in range(j + 1, i):
                s = s + L[..., i, k] * X[k][j]
            X[i][j] = -s * X[i][i]
    return _assemble(X, L)


def _solve_lower(L, B):
    """L^{-1} B for lower-triangular L (..., d, d) and B (..., d, m) (forward substitution)."""
    d = L.shape[-1]
    if d > SMALL_D:
        return solve_triangular(L, B, lower=True)
    Y = []
    for i in range(d):
        s = B[..., i, :]
        for k in range(i):
            s = s - L[..., i, k, None] * Y[k]
        Y.append(s / L[..., i, i, None])
    return jnp.stack(Y, -2)


def _mm(A, B):
    """A @ B, batched; for small matrices as a fused multiply-and-sum (no dot thunk)."""
    if A.shape[-1] > SMALL_D:
        return A @ B
    return jnp.sum(A[..., :, :, None] * B[..., None, :, :], axis=-2)


def _mv(A, x):
    """A @ x for (..., d, d) and (..., d)."""
    return jnp.sum(A * x[..., None, :], axis=-1)


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
    alpha_j used in practice. That probability depends on df only, never on the chain's state, so
    a kernel that simply skips its move when ``ok`` is False is the mixture "(1 - f) move + f stay"
    of two valid kernels, and leaves the target exactly invariant.

    The normals and uniforms come from one threefry call (:func:`_draw`).
    """
    df = jnp.asarray(df, dtype=jnp.float64)
    n_n, n_u = _bartlett_sizes(df.shape, d, n_candidates)
    N, u = _draw(rng_key, n_n, n_u)
    return _bartlett_from(N, u, df, d, n_candidates)


def _bartlett_sizes(shape, d, n_candidates=N_CANDIDATES):
    """Numbers of normals and uniforms :func:`_bartlett_from` needs for factors of this shape."""
    size = math.prod(shape)
    return size * d * (d + n_candidates), size * d * n_candidates


def _draw(rng_key, n_normal, n_uniform):
    """``n_normal`` standard normals and ``n_uniform`` U[0, 1) numbers (float64) from ONE
    threefry call, converted as jax.random does (52 random mantissa bits; normals as
    sqrt(2) erfinv(U(-1, 1))). On CPU each jax.random call runs threefry as a rolled loop whose
    fixed cost dominates at these sizes, so a sweep draws all its random numbers at once."""
    bits = jax.random.bits(rng_key, (n_normal + n_uniform,), jnp.uint64)
    f = jax.lax.bitcast_convert_type((bits >> jnp.uint64(12)) | jnp.uint64(0x3FF0000000000000),
                                     jnp.float64) - 1.0
    lo = np.nextafter(-1.0, 0.0)
    x = jnp.maximum(lo, f[:n_normal] * (1.0 - lo) + lo)
    return np.sqrt(2.0) * jax.lax.erf_inv(x), f[n_normal:]


def _bartlett_from(N, u, df, d, nc=N_CANDIDATES):
    """:func:`bartlett` from flat standard normals N and uniforms u (:func:`_bartlett_sizes`)."""
    N = N.reshape(df.shape + (d, d + nc))
    u = u.reshape(df.shape + (d, nc))
    shape = (df[..., None] - jnp.arange(d)) / 2.0  # (..., d)
    dd = (shape - 1.0 / 3.0)[..., None]
    z = N[..., d:]
    v = (1.0 + z / jnp.sqrt(9.0 * dd)) ** 3
    vpos = jnp.where(v > 0, v, 1.0)
    acc = (v > 0) & (jnp.log(u) < 0.5 * z**2 + dd - dd * vpos + dd * jnp.log(vpos))
    g, ok = vpos[..., nc - 1], acc[..., nc - 1]
    for c in reversed(range(nc - 1)):  # keep the first accepted candidate
        g = jnp.where(acc[..., c], vpos[..., c], g)
        ok = ok | acc[..., c]
    g = dd[..., 0] * g
    eye = jnp.eye(d, dtype=N.dtype)
    A = jnp.tril(N[..., :d], -1) + jnp.sqrt(2.0 * g)[..., None] * eye
    return A, jnp.all(ok, axis=-1)


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
    B = A / jnp.sqrt(alpha)[..., None, None]
    S_new, log_ratio, _ = _wishart_rw(L_S, B, _tri_inv(B), alpha)
    return S_new, _mm(L_S, B), jnp.where(ok, log_ratio, -jnp.inf)


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


# ---------------------------------------------------------------------------------------------
# Fused building blocks of the normalX sweeps (the same maths as above, batched)
# ---------------------------------------------------------------------------------------------


class _Prelude(NamedTuple):
    Sigma_x: jax.Array  # Gibbs draw of Sigma_x | S (the old value if its Bartlett draw failed)
    W: jax.Array  # Sigma_x^{-1}
    F: jax.Array  # a square root, F F^T = Sigma_x
    L_S: jax.Array  # chol S_j (J, d, d)
    Cinv: jax.Array  # C^{-1}
    Cm: jax.Array  # C^{-1} m
    mCm: jax.Array  # m^T C^{-1} m
    tri_inv: jax.Array  # inverses of the extra lower-triangular matrices passed in
    chol: jax.Array  # Cholesky factors of the extra SPD matrices passed in (or None)


def _prelude(S, Sigma_x_old, data, A_x, ok_x, lower, spd=None):
    """Step 1 of both normalX sweeps and the factors the rest of the sweep needs, with ONE
    batched Cholesky (S_1..S_J, Psi = Lambda + sum_j S_j, the old Sigma_x, C) and ONE batched
    triangular inverse (chol Psi, the Bartlett factor A_x, chol of the old Sigma_x, chol C and
    the caller's ``lower`` matrices, e.g. the Bartlett factors of the S_j proposals). The
    caller's ``spd`` matrices, if any, are factorised in the same call.

    Sigma_x ~ InvWishart(kappa + n, Psi) as in :func:`sample_inverse_wishart`: with
    Psi = L L^T, Sigma_x = T^T T, T = A_x^{-1} L^T, so Sigma_x^{-1} = V V^T with V = L^{-T} A_x
    and F = T^T is a square root of Sigma_x. If the Bartlett draw failed (``ok_x`` False) the old
    Sigma_x is kept (see :func:`sample_sigma_x`)."""
    J, d = S.shape[0], S.shape[-1]
    Psi = data.Lambda + jnp.sum(S, axis=0)
    mats = [S, jnp.stack([Psi, Sigma_x_old, data.C])] + ([] if spd is None else [spd])
    L = _chol(jnp.concatenate(mats))
    L_S, L_psi, L_old, L_C = L[:J], L[J], L[J + 1], L[J + 2]
    inv = _tri_inv(jnp.concatenate([jnp.stack([L_psi, A_x, L_old, L_C]), lower]))
    L_psi_i, A_x_i, L_old_i, L_C_i = inv[0], inv[1], inv[2], inv[3]
    T = _mm(A_x_i, _mT(L_psi))
    V = _mm(_mT(L_psi_i), A_x)
    Sigma_x = jnp.where(ok_x, _sym(_mm(_mT(T), T)), Sigma_x_old)
    W = jnp.where(ok_x, _sym(_mm(V, _mT(V))), _mm(_mT(L_old_i), L_old_i))
    F = jnp.where(ok_x, _mT(T), L_old)
    Cinv = _mm(_mT(L_C_i), L_C_i)
    Cm = _mv(Cinv, data.m)
    return _Prelude(Sigma_x, W, F, L_S, Cinv, Cm, data.m @ Cm, inv[4:],
                    None if spd is None else L[J + 3:])


def _wishart_rw(L_S, B, B_inv, alpha):
    """The Wishart random-walk proposal of :func:`wishart_proposal` from a given scaled Bartlett
    factor B = A / sqrt(alpha) and its inverse: S' = (L_S B)(L_S B)^T. Returns S', the exact log
    proposal ratio log q(S | S') - log q(S' | S) and log|S'| - log|S| = 2 sum_i log B_ii."""
    d = L_S.shape[-1]
    L_new = _mm(L_S, B)
    logdiag = jnp.sum(jnp.log(jnp.diagonal(B, axis1=-2, axis2=-1)), axis=-1)
    log_q = (alpha - 0.5 * (d + 1.0)) * (-2.0 * logdiag) + 0.5 * alpha * (
        jnp.sum(B**2, axis=(-2, -1)) - jnp.sum(B_inv**2, axis=(-2, -1)))
    return _sym(_mm(L_new, _mT(L_new))), log_q, 2.0 * logdiag


def _noise_loglik(S, S_hat, sigma_s):
    """log N(S_hat_j; S_j, sigma_s_j^2) over the upper triangle incl. the diagonal, up to a
    constant; batched over leading axes."""
    d = S.shape[-1]
    upper = np.triu(np.ones((d, d)))
    return -0.5 * jnp.sum(upper * (S_hat - S) ** 2, axis=(-2, -1)) / sigma_s**2


def _wishart_loglik_diff(S_new, S, logdet_diff, W, n):
    """log W(S_new; n, Sigma_x) - log W(S; n, Sigma_x) with W = Sigma_x^{-1}."""
    d = S.shape[-1]
    return (0.5 * (n - d - 1.0) * logdet_diff
            - 0.5 * jnp.sum(W * (S_new - S), axis=(-2, -1)))


class _ZTerms(NamedTuple):
    """Per-holder solves with K_j = sigma_y^2 S_j + Sigma_z_j = L_K L_K^T:
    G = L_K^{-1} S_j, g = L_K^{-1} z_hat_j, half_logdet = log|K_j| / 2."""

    G: jax.Array
    g: jax.Array
    half_logdet: jax.Array


def _z_terms(S, sigma_y2, z_hat, Sigma_z):
    """:class:`_ZTerms` for a batch of S (M, d, d) with sigma_y2 scalar or (M,): one batched
    Cholesky and one batched triangular solve with d + 1 right-hand sides. Then
    log N(z_hat; S theta, K) = -|g - G theta|^2/2 - half_logdet - d log(2 pi)/2, and the eq. (12)
    terms are S K^{-1} S = G^T G, S K^{-1} z_hat = G^T g, z_hat^T K^{-1} z_hat = |g|^2."""
    s2 = jnp.asarray(sigma_y2)[..., None, None]
    return _z_terms_chol(_chol(s2 * S + Sigma_z), S, z_hat)


def _z_terms_chol(LK, S, z_hat):
    """:func:`_z_terms` from given Cholesky factors LK of the K_j."""
    d = S.shape[-1]
    Y = _solve_lower(LK, jnp.concatenate([S, z_hat[..., None]], axis=-1))
    hl = jnp.sum(jnp.log(jnp.diagonal(LK, axis1=-2, axis2=-1)), axis=-1)
    return _ZTerms(Y[..., :d], Y[..., d], hl)


def _z_loglik_terms(t: _ZTerms, theta):
    """log N(z_hat_j; S_j theta, K_j) + d log(2 pi)/2, per holder, from :func:`_z_terms`."""
    w = t.g - _mv(t.G, theta)
    return -0.5 * jnp.sum(w**2, axis=-1) - t.half_logdet


def _select(mask, a, b):
    """Per-holder where over the leaves of two pytrees with leading axis J."""
    return jax.tree.map(lambda x, y: jnp.where(mask.reshape(mask.shape + (1,) * (x.ndim - 1)),
                                               x, y), a, b)


def _theta_from_precision(P, h, eps):
    """theta ~ N(P^{-1} h, P^{-1}) from standard normals eps: with P = R R^T,
    theta = R^{-T}(R^{-1} h + eps) (= m_p + R^{-T} eps, as in :func:`sample_theta`)."""
    R_inv = _tri_inv(_chol(P))
    return _mv(_mT(R_inv), _mv(R_inv, h) + eps)


def _normalx_s_moves(pre: _Prelude, B, B_inv, ok, alpha, state: NormalXState, data,
                     proposal_ratio=True, sigma_y2_prop=None):
    """Step 2 of Algorithm 1 for all holders at once: proposals, log acceptance ratios
    log p(S_j'|.) - log p(S_j|.) + log q(S_j|S_j') - log q(S_j'|S_j) (the change of
    :func:`s_log_target` plus the proposal ratio; -inf where the Bartlett draw failed), and the
    :class:`_ZTerms` of the current and proposed S_j at sigma_y^2 (2J, reused by steps 3 and 4).

    With ``sigma_y2_prop`` (the sigma_y^2 proposal of step 4, drawn up front), the terms at it
    are computed in the same batched calls and appended (4J: current, proposed at sigma_y^2;
    current, proposed at sigma_y2_prop); ``pre.chol`` must then hold chol K_j of the current
    S_j at both values (2J), factorised with the prelude."""
    J = state.S.shape[0]
    S, s2, zh, Sz = state.S, state.sigma_y2, data.z_hat, data.Sigma_z
    S_new, log_q, logdet_diff = _wishart_rw(pre.L_S, B, B_inv, alpha)
    if sigma_y2_prop is None:
        zt = _z_terms(jnp.concatenate([S, S_new]), s2, jnp.concatenate([zh, zh]),
                      jnp.concatenate([Sz, Sz]))
    else:
        LK_new = _chol(jnp.concatenate([s2 * S_new + Sz, sigma_y2_prop * S_new + Sz]))
        LK = jnp.concatenate([pre.chol[:J], LK_new[:J], pre.chol[J:], LK_new[J:]])
        zt = _z_terms_chol(LK, jnp.concatenate([S, S_new, S, S_new]),
                           jnp.concatenate([zh, zh, zh, zh]))
    lz = _z_loglik_terms(jax.tree.map(lambda x: x[:2 * J], zt), state.theta)
    noise = _noise_loglik(jnp.concatenate([S, S_new]), jnp.concatenate([data.S_hat, data.S_hat]),
                          jnp.concatenate([data.sigma_s, data.sigma_s]))
    log_r = (_wishart_loglik_diff(S_new, S, logdet_diff, pre.W, data.n)
             + noise[J:] - noise[:J] + lz[J:] - lz[:J])
    if proposal_ratio:
        log_r = log_r + log_q
    log_r = jnp.where(ok & ~jnp.isnan(log_r), log_r, -jnp.inf)
    return S_new, log_r, zt


# ---------------------------------------------------------------------------------------------
# MCMC-normalX (Algorithm 1)
# ---------------------------------------------------------------------------------------------


def normalx_paper_step(rng_key, state: NormalXState, data, tuning: Tuning,
                       proposal_ratio=True):
    """One sweep of MCMC-normalX exactly as Algorithm 1 (method ``"normalx-paper"``), in the
    paper's order:

    1. Sigma_x ~ InvWishart(kappa + n, Lambda + sum_j S_j)                         (eq. 11, A.1)
    2. for all j at once (vmapped; the J factors are independent given the rest, section 4.1):
       MH on S_j with proposal S_j' ~ Wishart(S_j/alpha_j, alpha_j), acceptance ratio
       p(S_j'|.) q(S_j|S_j') / (p(S_j|.) q(S_j'|S_j))                               (A.3)
    3. theta ~ N(m_p, Sigma_p)                                                      (eq. 12, A.2)
    4. random-walk MH on sigma_y^2                                                  (A.4)

    ``proposal_ratio=False`` drops the Hastings correction of step 2: a deliberately WRONG
    kernel, kept only as the negative control of the invariance tests.

    Implementation: all random numbers are drawn up front (the proposals depend on no other
    step's outcome); the Bartlett factors of Sigma_x and of the J proposals are one batched
    draw, and so is the sigma_y^2 proposal of step 4; the factorisations are shared between
    steps and batched: chol K_j of the current and proposed S_j at the current and proposed
    sigma_y^2 (4J) serve steps 2-4 (see :func:`_prelude`, :func:`_normalx_s_moves`).
    """
    J, d = data.z_hat.shape
    alpha = jnp.exp(tuning.log_alpha)
    df = jnp.concatenate([alpha, (data.kappa + jnp.sum(data.n))[None]])
    n_n, n_u = _bartlett_sizes(df.shape, d)
    N, u = _draw(rng_key, n_n + d + 1, n_u + J + 1)
    A, ok = _bartlett_from(N[:n_n], u[:n_u], df, d)
    eps, log_u = N[n_n:], jnp.log(u[n_u:])
    B = A[:J] / jnp.sqrt(alpha)[:, None, None]

    # The sigma_y^2 proposal of step 4 is drawn now, so that the factors of K_j at it can join
    # the batched factorisations of steps 1 and 2.
    s2 = state.sigma_y2
    prop = s2 + jnp.exp(tuning.log_step) * eps[d]
    safe = jnp.where(prop > 0, prop, s2)
    # 1. Sigma_x | S (and the factors of the whole sweep)
    pre = _prelude(state.S, state.Sigma_x, data, A[J], ok[J], B,
                   spd=jnp.concatenate([s2 * state.S + data.Sigma_z,
                                        safe * state.S + data.Sigma_z]))
    # 2. MH on every S_j at once
    S_new, log_r, zt = _normalx_s_moves(pre, B, pre.tri_inv, ok[:J], alpha, state, data,
                                        proposal_ratio, sigma_y2_prop=safe)
    accept = log_u[:J] < log_r
    acc_prob = jnp.exp(jnp.minimum(0.0, log_r))
    S = jnp.where(accept[:, None, None], S_new, state.S)
    blk = lambda i: jax.tree.map(lambda x: x[i * J:(i + 1) * J], zt)  # noqa: E731
    za, zp = _select(accept, blk(1), blk(0)), _select(accept, blk(3), blk(2))
    # 3. theta | S, sigma_y^2 (eq. 12): P = C^{-1} + sum_j G_j^T G_j, h = C^{-1} m + sum_j G_j^T g_j
    P = pre.Cinv + jnp.sum(_mm(_mT(za.G), za.G), axis=0)
    h = pre.Cm + jnp.sum(_mv(_mT(za.G), za.g), axis=0)
    theta = _theta_from_precision(P, h, eps[:d])
    # 4. RW-MH on sigma_y^2 (targets as in sigma_y2_log_target)
    lt_new = jnp.where(prop > 0, _log_invgamma(safe, data.a, data.b)
                       + jnp.sum(_z_loglik_terms(zp, theta)), -jnp.inf)
    lt_old = _log_invgamma(s2, data.a, data.b) + jnp.sum(_z_loglik_terms(za, theta))
    log_r_sy = lt_new - lt_old
    log_r_sy = jnp.where(jnp.isnan(log_r_sy), -jnp.inf, log_r_sy)
    accept_sy = log_u[J] < log_r_sy
    sigma_y2 = jnp.where(accept_sy, safe, s2)
    new = NormalXState(theta=theta, sigma_y2=sigma_y2, Sigma_x=pre.Sigma_x, S=S)
    return new, Info(acc_prob, accept, jnp.exp(jnp.minimum(0.0, log_r_sy)), accept_sy)


# ---------------------------------------------------------------------------------------------
# MCMC-fixedS (Algorithm 2)
# ---------------------------------------------------------------------------------------------


SLICE_MAX_STEPS = 8  # stepping-out budget m of the slice sampler (Neal 2003, fig. 3)
SLICE_MAX_SHRINK = 100  # shrinkage steps before giving up (never reached in float64)
SLICE_N_UNIFORMS = 3 + SLICE_MAX_SHRINK  # uniforms one slice update uses


def slice_1d(u, x0, log_f, width):
    """One update of the univariate slice sampler with stepping out and shrinkage (Neal 2003,
    section 4, figs. 3 and 5), which leaves the density exp(log_f) invariant for any fixed
    ``width`` w > 0:

        y ~ U(0, f(x0)); an interval of width w placed at random around x0 is stepped out by
        w at most m times in total (split at random between the two ends) until both ends are
        outside the slice {f > y}; then x1 ~ U(interval), shrinking the interval towards x0
        after each x1 outside the slice.

    No tuning parameter affects correctness, and one update moves across the whole slice, so
    the chain mixes whatever the scale of the target (the width only changes the number of
    evaluations). Stepping out is done by evaluating the 2m candidate ends at once (one
    batched call, no loop: the first candidate outside the slice, within each end's budget,
    is the end Neal's loop stops at); shrinkage is a loop. ``u`` holds ``SLICE_N_UNIFORMS``
    U[0, 1) numbers, drawn by the caller with the rest of its sweep. ``log_f(x)`` returns
    (log density, aux), -inf (NaN is read as -inf) outside the support. Returns (x1, aux at
    x1, number of evaluations). If the shrinkage budget were ever exhausted x0 is kept;
    Neal's reversibility argument pairs paths of equal length, so the cap keeps the kernel
    valid."""
    dtype = jnp.result_type(x0, float)
    m = SLICE_MAX_STEPS

    def lf(x):
        v, aux = log_f(x)
        return _nan_to_reject(v), aux

    left0 = x0 - width * u[0]
    k = jnp.arange(m, dtype=dtype)
    pts = jnp.concatenate([x0[None], left0 - width * k, left0 + width * (k + 1.0)])
    f_pts, aux_pts = jax.vmap(lf)(pts)
    log_y = f_pts[0] + jnp.log1p(-u[1])  # log(f(x0) U), U in (0, 1]
    aux0 = jax.tree.map(lambda a: a[0], aux_pts)
    n_left = jnp.floor(m * u[2]).astype(jnp.int32)
    n_right = m - 1 - n_left

    def end(f_side, budget):
        inside = f_side > log_y
        first_out = jnp.argmin(inside)  # first index outside the slice (0 if all inside...)
        first_out = jnp.where(jnp.all(inside), m, first_out)  # ...unless none is outside
        return jnp.minimum(first_out, budget)

    left = (left0 - width * k)[end(f_pts[1:m + 1], n_left)]
    right = (left0 + width * (k + 1.0))[end(f_pts[m + 1:], n_right)]
    u = u[3:]

    def shrinking(c):
        left, right, x1, f1, aux1, i = c
        return (f1 <= log_y) & (i < SLICE_MAX_SHRINK)

    def shrink(c):
        left, right, x1, f1, aux1, i = c
        left = jnp.where((i > 0) & (x1 < x0), x1, left)  # i = 0: no point drawn yet
        right = jnp.where((i > 0) & (x1 >= x0), x1, right)
        x1 = left + u[i] * (right - left)
        f1, aux1 = lf(x1)
        return left, right, x1, f1, aux1, i + 1

    c0 = (left, right, x0, -jnp.inf * jnp.ones((), dtype), aux0, jnp.zeros((), jnp.int32))
    _, _, x1, f1, aux1, i = jax.lax.while_loop(shrinking, shrink, c0)
    ok = f1 > log_y
    aux = jax.tree.map(lambda a, b: jnp.where(ok, a, b), aux1, aux0)
    return jnp.where(ok, x1, x0), aux, 2 * m + 1 + i


class SpectralTerms(NamedTuple):
    """The S_j and z_hat_j in a basis that diagonalises every K_j(s2) = s2 S_j + Sigma_z_j at
    once. With A_j = S_j + Sigma_z_j = L L^T (positive definite whenever some K_j(s2) is) and
    L^{-1} S_j L^{-T} = V diag(lam) V^T (0 <= lam <= 1), L^{-1} Sigma_z_j L^{-T} =
    V diag(1 - lam) V^T, so

        K_j = L V diag(q) V^T L^T,  q = s2 lam + 1 - lam,
        M_j = V^T L^{-1} S_j,   w_j = V^T L^{-1} z_hat_j,

    and S_j K_j^{-1} S_j = M_j^T diag(1/q) M_j, S_j K_j^{-1} z_hat_j = M_j^T diag(1/q) w_j,
    z_hat_j^T K_j^{-1} z_hat_j = w_j^T diag(1/q) w_j, log|K_j| = log|A_j| + sum log q. Neither
    S_j nor Sigma_z_j needs to be invertible (a fixed S from the nearest PSD matrix often is
    singular, and so is a noiseless release's Sigma_z). One eigendecomposition per holder
    makes every evaluation at a new sigma_y^2 a few elementwise products, which is what a
    slice sampler on sigma_y^2 needs."""

    lam: jax.Array  # (J, d)
    M: jax.Array  # (J, d, d)
    w: jax.Array  # (J, d)
    logdet_A: jax.Array  # (J,)


def spectral_terms(S, data):
    """:class:`SpectralTerms` of the S_j (J, d, d) under the release's z-noise covariances."""
    La = _chol(S + data.Sigma_z)
    La_inv = _tri_inv(La)
    B = _mm(La_inv, S)
    lam, V = jnp.linalg.eigh(_sym(_mm(B, _mT(La_inv))))
    Vt = _mT(V)
    return SpectralTerms(jnp.clip(lam, 0.0, 1.0), _mm(Vt, B),
                         _mv(Vt, _mv(La_inv, data.z_hat)), _logdet_chol(La))


def _spectral_totals(sp: SpectralTerms, sigma_y2, prior: "_Totals"):
    """:class:`_Totals` at sigma_y^2 from :class:`SpectralTerms` (theta integrated out)."""
    q = sigma_y2 * sp.lam + (1.0 - sp.lam)
    D = 1.0 / q
    P = prior.P + jnp.einsum("jki,jk,jkl->il", sp.M, D, sp.M)
    h = prior.h + jnp.einsum("jki,jk,jk->i", sp.M, D, sp.w)
    Q = prior.Q + jnp.sum(D * sp.w**2)
    LD = jnp.sum(sp.logdet_A) + jnp.sum(jnp.log(q))
    return _Totals(P, h, Q, LD)


def _fixed_s_prior_totals(data):
    Cinv, Cm, mCm, _ = _prior_terms(data)
    return _Totals(Cinv, Cm, mCm, jnp.zeros((), Cinv.dtype))


def log_sigma_y2_marginal(log_s2, sp: SpectralTerms, data, prior):
    """log p(u | S, z_hat) + const for u = log sigma_y^2, theta integrated out:
    log InvGamma(e^u; a, b) + u (the Jacobian) + :func:`collapsed_loglik` at S, e^u
    (``sp`` = :func:`spectral_terms` of S). Returns (log density, totals)."""
    s2 = jnp.exp(log_s2)
    tot = _spectral_totals(sp, s2, prior)
    # LAPACK Cholesky here, not the unrolled one: it is evaluated at several call sites of the
    # slice sampler and compiles in half the time
    return _log_invgamma(s2, data.a, data.b) + log_s2 + _collapsed_loglik_lapack(tot), tot


def _collapsed_loglik_lapack(tot):
    """:func:`collapsed_loglik` with LAPACK's Cholesky instead of the unrolled one: for code
    that is differentiated or evaluated at several call sites (it compiles in half the time)."""
    R = jnp.linalg.cholesky(tot.P)
    w = solve_triangular(R, tot.h, lower=True)
    return -0.5 * (tot.Q - w @ w) - 0.5 * tot.LD - 0.5 * _logdet_chol(R)


def slice_sigma_y2_then_theta(u, eps, S, sigma_y2, data, prior, log_width):
    """One slice update of u = log sigma_y^2 | S from its theta-integrated marginal
    (:func:`log_sigma_y2_marginal`), then theta | S, sigma_y^2 exactly (eq. 12); shared by
    :func:`fixeds_step` and :func:`normalx_step`. ``u``: SLICE_N_UNIFORMS uniforms; ``eps``:
    d standard normals. Returns (theta, sigma_y2, |jump of log sigma_y2|, evaluations)."""
    sp = spectral_terms(S, data)
    u0 = jnp.log(sigma_y2)
    u1, tot, evals = slice_1d(u, u0, lambda v: log_sigma_y2_marginal(v, sp, data, prior),
                              jnp.exp(log_width))
    return _theta_from_precision(tot.P, tot.h, eps), jnp.exp(u1), jnp.abs(u1 - u0), evals


def fixeds_step(rng_key, state: FixedSState, data, tuning: Tuning):
    """One sweep of MCMC-fixedS (the target of Algorithm 2: S_j = data.S_fixed, latent theta and
    sigma_y^2), as a collapsed Gibbs sampler:

    1. u = log sigma_y^2 from p(u | S, z_hat), theta integrated out (:func:`log_sigma_y2_marginal`),
       by one univariate slice-sampling update (:func:`slice_1d`; width exp(tuning.log_step),
       adapted in warm-up only);
    2. theta ~ N(m_p, Sigma_p) given sigma_y^2 (eq. 12).

    Step 1 leaves p(sigma_y^2 | z_hat) invariant and step 2 draws theta from its exact
    conditional, so the pair (sigma_y^2, theta) is a Markov chain with the joint posterior as
    its stationary law whose only autocorrelation is that of a 1-d slice sampler. (The paper's
    Gibbs theta + random walk on sigma_y^2 is :func:`fixeds_paper_step`: its step size, started
    far from the posterior's scale, often did not adapt within warm-up.)"""
    S = data.S_fixed
    J, d = data.z_hat.shape
    eps, uni = _draw(rng_key, d, SLICE_N_UNIFORMS)
    theta, s2, jump, evals = slice_sigma_y2_then_theta(
        uni, eps, S, state.sigma_y2, data, _fixed_s_prior_totals(data), tuning.log_step)
    zeros = jnp.zeros((J,), dtype=theta.dtype)
    one = jnp.ones((), dtype=theta.dtype)
    return FixedSState(theta, s2), Info(zeros, zeros > 0, one, one > 0,
                                        jump_log_sigma_y2=jump, evals_sigma_y2=evals)


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

    Batched over leading axes of the totals."""
    R = _chol(tot.P)
    w = _solve_lower(R, tot.h[..., None])[..., 0]
    return -0.5 * (tot.Q - jnp.sum(w**2, axis=-1)) - 0.5 * tot.LD - 0.5 * _logdet_chol(R)


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


def _holder_totals(t: _ZTerms):
    """Per-holder terms of :class:`_Totals` (S K^{-1} S, S K^{-1} z, z K^{-1} z, log|K|)."""
    return _Totals(_mm(_mT(t.G), t.G), _mv(_mT(t.G), t.g), jnp.sum(t.g**2, axis=-1),
                   2.0 * t.half_logdet)


def _sum_totals(prior: _Totals, per_holder: _Totals, n_blocks=1):
    """prior + sum over holders, for ``n_blocks`` consecutive blocks of J holders (batched)."""
    def s(p, x):
        x = x.reshape((n_blocks, -1) + x.shape[1:])
        return jnp.squeeze(p + jnp.sum(x, axis=1), 0) if n_blocks == 1 else p + jnp.sum(x, 1)
    return jax.tree.map(s, prior, per_holder)


def group_transform(H):
    """The Cayley transform G = (I - H/2)^{-1} (I + H/2) of a lower-triangular H, its inverse
    (the transform of -H) and log|det G| = sum_i log|1 + H_ii/2| - log|1 - H_ii/2|."""
    d = H.shape[-1]
    eye = jnp.eye(d, dtype=H.dtype)
    inv = _tri_inv(jnp.stack([eye - 0.5 * H, eye + 0.5 * H]))
    return _group_from(H, inv[0], inv[1])


def _group_from(H, inv_minus, inv_plus):
    d = H.shape[-1]
    eye = jnp.eye(d, dtype=H.dtype)
    h = jnp.diagonal(H)
    logdet = jnp.sum(jnp.log(jnp.abs(1.0 + 0.5 * h)) - jnp.log(jnp.abs(1.0 - 0.5 * h)))
    return _mm(inv_minus, eye + 0.5 * H), _mm(inv_plus, eye - 0.5 * H), logdet


def group_move_log_ratio(G, G_inv, logdet_G, S, Sigma_x, W, S_g, ll, ll_g, data, jacobian=True):
    """log acceptance ratio of the group move (Sigma_x, S_j) -> (G Sigma_x G^T, G S_j G^T),
    theta integrated out (``ll``, ``ll_g``: :func:`collapsed_loglik` before and after).

    The move maps the J + 1 symmetric matrices by X -> G X G^T (Jacobian |G|^{d+1} each). Each
    Wishart factor is invariant up to W(G S G^T; n, G Sigma G^T) = |G|^{-(d+1)} W(S; n, Sigma),
    and InvWishart(kappa, Lambda) contributes |G|^{-(kappa + d + 1)} and the trace term, so

        log r = -kappa log|G| - tr(Lambda (Sigma_x'^{-1} - Sigma_x^{-1}))/2
                + sum_j [log N(S_hat_j; G S_j G^T) - log N(S_hat_j; S_j)] + ll_g - ll.

    ``jacobian=False`` drops the Jacobian (J + 1)(d + 1) log|G|: a deliberately WRONG ratio for
    the negative control of the invariance tests. Returns (log r, Sigma_x', Sigma_x'^{-1})."""
    J, d = S.shape[0], S.shape[-1]
    Sx_g = _sym(_mm(_mm(G, Sigma_x), _mT(G)))
    W_g = _sym(_mm(_mm(_mT(G_inv), W), G_inv))
    noise = _noise_loglik(jnp.concatenate([S_g, S]), jnp.concatenate([data.S_hat, data.S_hat]),
                          jnp.concatenate([data.sigma_s, data.sigma_s]))
    log_r = (-data.kappa * logdet_G - 0.5 * jnp.sum(data.Lambda * (W_g - W))
             + jnp.sum(noise[:J]) - jnp.sum(noise[J:]) + ll_g - ll)
    if not jacobian:
        log_r = log_r - (J + 1.0) * (d + 1.0) * logdet_G
    return log_r, Sx_g, W_g


def _nan_to_reject(log_r):
    return jnp.where(jnp.isnan(log_r), -jnp.inf, log_r)


def _flat_totals(t: _Totals):
    """(..., d*d + d + 2) vector [P, h, Q, LD]: the sequential moves carry one array, so each
    update is one fused operation (XLA's cost per operation dominates at these sizes)."""
    lead = t.h.shape[:-1]
    return jnp.concatenate([t.P.reshape(lead + (-1,)), t.h, t.Q[..., None], t.LD[..., None]],
                           axis=-1)


def _unflat_totals(v, d):
    return _Totals(v[..., :d * d].reshape(v.shape[:-1] + (d, d)), v[..., d * d:d * d + d],
                   v[..., -2], v[..., -1])


def _collapsed_loglik_flat(v, d):
    """:func:`collapsed_loglik` of :func:`_flat_totals` (scalar-unrolled for d <= SMALL_D)."""
    if d > SMALL_D:
        return collapsed_loglik(_unflat_totals(v, d))
    P = lambda i, j: 0.5 * (v[..., i * d + j] + v[..., j * d + i])  # noqa: E731
    L = _chol_entries(P, d)
    quad, logdet = 0.0, 0.0
    w = []
    for i in range(d):
        s = v[..., d * d + i]
        for k in range(i):
            s = s - L[i][k] * w[k]
        w.append(s / L[i][i])
        quad = quad + w[i] * w[i]
        logdet = logdet + jnp.log(L[i][i])
    return -0.5 * (v[..., -2] - quad) - 0.5 * v[..., -1] - logdet


class _HolderMoves(NamedTuple):
    pre: _Prelude  # Sigma_x | S and the sweep's factors (tri_inv: the caller's extra inverses)
    S: jax.Array  # S after the holder-wise moves
    tot: _Totals  # totals of S at sigma_y^2 (theta integrated out)
    ll: jax.Array  # collapsed_loglik(tot)
    prior: _Totals  # theta's prior terms
    p_rw: jax.Array
    a_rw: jax.Array
    p_pr: jax.Array
    a_pr: jax.Array


def _holder_move_df(data, tuning):
    """Degrees of freedom of the Bartlett factors a collapsed sweep draws: the J random-walk
    proposals (alpha_j), the J prior proposals (n_j) and Sigma_x's Gibbs draw."""
    return jnp.concatenate([jnp.exp(tuning.log_alpha), data.n,
                            (data.kappa + jnp.sum(data.n))[None]])


def _collapsed_holder_moves(N, u, log_u, df, state, data, extra_lower, proposal_ratio=True,
                            rw_moves=True, prior_moves=True):
    """Steps 1-2 of :func:`collapsed_step` (shared with :func:`normalx_step`): Sigma_x | S, then
    for each holder in turn the Wishart random walk and the prior-proposal move, theta
    integrated out. ``N``, ``u``: the Bartlett normals and uniforms for ``df``; ``log_u``: 2J
    log-uniforms of the MH decisions; ``extra_lower``: lower-triangular matrices the caller
    wants inverted in the prelude's batched call."""
    J, d = data.z_hat.shape
    S, s2 = state.S, state.sigma_y2
    alpha = df[:J]
    A, ok = _bartlett_from(N, u, df, d)
    lu_rw, lu_pr = log_u[:J], log_u[J:2 * J]
    B = A[:J] / jnp.sqrt(alpha)[:, None, None]

    # 1. Sigma_x | S, and every factor that does not depend on a decision
    pre = _prelude(S, state.Sigma_x, data, A[2 * J], ok[2 * J],
                   jnp.concatenate([B, extra_lower]))
    B_inv = pre.tri_inv[:J]
    pre = pre._replace(tri_inv=pre.tri_inv[J:])
    prior = _Totals(pre.Cinv, pre.Cm, pre.mCm, jnp.zeros((), S.dtype))

    # 2. holder-wise moves. Terms of the current S_j, the RW and the prior proposals (3J).
    S_rw, log_q, logdet_diff = _wishart_rw(pre.L_S, B, B_inv, alpha)
    FA = _mm(pre.F, A[J:2 * J])
    S_pr = _sym(_mm(FA, _mT(FA)))
    S3 = jnp.concatenate([S, S_rw, S_pr])
    tile = lambda x: jnp.concatenate([x, x, x])  # noqa: E731
    per = _holder_totals(_z_terms(S3, s2, tile(data.z_hat), tile(data.Sigma_z)))
    noise = _noise_loglik(S3, tile(data.S_hat), tile(data.sigma_s))
    n_old, n_rw, n_pr = noise[:J], noise[J:2 * J], noise[2 * J:]
    d_rw = _wishart_loglik_diff(S_rw, S, logdet_diff, pre.W, data.n) + n_rw - n_old
    if proposal_ratio:
        d_rw = d_rw + log_q
    d_rw = jnp.where(ok[:J], d_rw, -jnp.inf)
    flat = _flat_totals(per)  # (3J, m): current S_j, RW proposals, prior proposals
    old, rw, pr = flat[:J], flat[J:2 * J], flat[2 * J:]
    tot = _flat_totals(prior) + jnp.sum(old, axis=0)

    def move(carry, xs):
        tot, ll = carry
        old, rw, pr, d_rw, n_old, n_rw, n_pr, ok_pr, lu_rw, lu_pr = xs
        cur, n_cur = old, n_old
        p_rw = p_pr = jnp.zeros((), ll.dtype)
        a_rw = a_pr = jnp.zeros((), bool)
        if rw_moves:
            t1 = tot - old + rw
            ll1 = _collapsed_loglik_flat(t1, d)
            lr = _nan_to_reject(d_rw + ll1 - ll)
            a_rw, p_rw = lu_rw < lr, jnp.exp(jnp.minimum(0.0, lr))
            tot, ll = jnp.where(a_rw, t1, tot), jnp.where(a_rw, ll1, ll)
            cur, n_cur = jnp.where(a_rw, rw, old), jnp.where(a_rw, n_rw, n_old)
        if prior_moves:
            t2 = tot - cur + pr
            ll2 = _collapsed_loglik_flat(t2, d)
            lr = jnp.where(ok_pr, _nan_to_reject(n_pr - n_cur + ll2 - ll), -jnp.inf)
            a_pr, p_pr = lu_pr < lr, jnp.exp(jnp.minimum(0.0, lr))
            tot, ll = jnp.where(a_pr, t2, tot), jnp.where(a_pr, ll2, ll)
        return (tot, ll), (p_rw, a_rw, p_pr, a_pr)

    xs = (old, rw, pr, d_rw, n_old, n_rw, n_pr, ok[J:2 * J], lu_rw, lu_pr)
    (tot, ll), (p_rw, a_rw, p_pr, a_pr) = jax.lax.scan(
        move, (tot, _collapsed_loglik_flat(tot, d)), xs)
    tot = _unflat_totals(tot, d)
    S = jnp.where(a_pr[:, None, None], S_pr, jnp.where(a_rw[:, None, None], S_rw, S))
    return _HolderMoves(pre, S, tot, ll, prior, p_rw, a_rw, p_pr, a_pr)


def collapsed_step(rng_key, state: NormalXState, data, tuning: Tuning, proposal_ratio=True,
                   rw_moves=True, prior_moves=True, group_move=True):
    """One sweep of the collapsed normalX kernel (method ``"normalx-collapsed"``).

    Same target as Algorithm 1, but theta is integrated out of every MH move (which removes the
    tight coupling z_hat_j ~ S_j theta), and two kinds of moves are added for the S_j, whose
    random walk otherwise limits mixing:

    1. Sigma_x ~ InvWishart(kappa + n, Lambda + sum_j S_j)               (A.1; theta-free)
    2. for j = 1..J in turn, two MH moves on S_j, each targeting
       p(S_j | S_-j, Sigma_x, sigma_y^2, z_hat, S_hat) with theta integrated out,
       W(S_j; n_j, Sigma_x) N(S_hat_j; S_j) p(z_hat | S, sigma_y^2), where p(z_hat | S, s2) is
       :func:`collapsed_loglik` (O(d^3) per move: only holder j's terms of P, h, Q change):
       a. the Wishart random walk of A.3, S_j' ~ W(S_j/alpha_j, alpha_j) (``rw_moves``);
       b. an independence proposal from the Wishart prior, S_j' ~ W(n_j, Sigma_x), accepted
          with the likelihood ratio N(S_hat_j; S_j') p(z_hat | S') / (N(S_hat_j; S_j) p(z_hat | S))
          (``prior_moves``). When the noise on S_hat is large compared with the Wishart spread
          of S_j (sqrt(n_j) Sigma_x: large n_j, small eps) it is accepted often and moves S_j
          across its conditional in one step; the random walk covers the opposite regime.
       The J proposals of each kind are drawn together; only the accept/reject decisions run
       in sequence (lax.scan).
    3. a group move on (Sigma_x, S_1..S_J) -> (G Sigma_x G^T, G S_j G^T), G the Cayley
       transform of a random lower-triangular H with N(0, tau^2) entries (``group_move``; tau
       adapted in warm-up; ratio :func:`group_move_log_ratio`). It moves all the S_j and
       Sigma_x together along the directions in which Sigma_x | S and S_j | Sigma_x are tightly
       coupled (at n_j ~ 1e4 their common scale otherwise moves by ~1/sqrt(n) per sweep). H and
       -H are equally likely and give G and G^{-1}, so the proposal is an involution and the
       ratio needs only the target and the Jacobian.
    4. random-walk MH on sigma_y^2 targeting IG(sigma_y^2; a, b) p(z_hat | S, sigma_y^2)
    5. theta ~ N(m_p, Sigma_p) given the new S, sigma_y^2                (eq. 12)

    Steps 1-4 leave p(Sigma_x, S, sigma_y^2 | data) invariant (theta is not conditioned on),
    and step 5 draws theta from its exact conditional, so the sweep leaves the joint posterior
    invariant (a partially collapsed Gibbs sampler, van Dyk & Park 2008).

    ``proposal_ratio=False`` drops the Hastings correction of the random walk and the Jacobian
    of the group move: a deliberately WRONG kernel, for the negative control of the tests.
    """
    J, d = data.z_hat.shape
    S, s2 = state.S, state.sigma_y2
    # All random numbers at once: Bartlett factors (RW proposals, prior proposals, Sigma_x),
    # H of the group move, theta's normals, the sigma_y^2 step; the MH uniforms.
    df = _holder_move_df(data, tuning)
    n_n, n_u = _bartlett_sizes(df.shape, d)
    N, u = _draw(rng_key, n_n + d * d + d + 1, n_u + 2 * J + 2)
    H = jnp.tril(N[n_n:n_n + d * d].reshape(d, d)) * jnp.exp(tuning.log_group_step)
    eps_theta, eps_sy = N[n_n + d * d:n_n + d * d + d], N[-1]
    log_u = jnp.log(u[n_u:])
    lu_g, lu_sy = log_u[2 * J], log_u[2 * J + 1]
    eye = jnp.eye(d, dtype=S.dtype)
    # 1.-2. Sigma_x | S and the holder-wise moves
    hm = _collapsed_holder_moves(N[:n_n], u[:n_u], log_u[:2 * J], df, state, data,
                                 jnp.stack([eye - 0.5 * H, eye + 0.5 * H]), proposal_ratio,
                                 rw_moves, prior_moves)
    pre, S, tot, ll, prior = hm.pre, hm.S, hm.tot, hm.ll, hm.prior
    p_rw, a_rw, p_pr, a_pr = hm.p_rw, hm.a_rw, hm.p_pr, hm.a_pr
    tile = lambda x: jnp.concatenate([x, x, x])  # noqa: E731

    # 3. group move, and 4. sigma_y^2, whose proposal is drawn already: the totals at
    # (G S G^T, s2), (S, s2') and (G S G^T, s2') are computed together before the decisions.
    s2p = s2 + jnp.exp(tuning.log_step) * eps_sy
    s2p_safe = jnp.where(s2p > 0, s2p, s2)
    Sigma_x, p_g, a_g = pre.Sigma_x, jnp.zeros((), s2.dtype), jnp.zeros((), bool)
    if group_move:
        G, G_inv, logdet_G = _group_from(H, pre.tri_inv[0], pre.tri_inv[1])
        S_g = _sym(_mm(_mm(G, S), _mT(G)))
        s2s = jnp.concatenate([jnp.full((J,), s2), jnp.full((2 * J,), s2p_safe)])
        per2 = _holder_totals(_z_terms(jnp.concatenate([S_g, S, S_g]), s2s, tile(data.z_hat),
                                       tile(data.Sigma_z)))
        tots = _sum_totals(prior, per2, 3)
        lls = collapsed_loglik(tots)
        lr_g, Sx_g, _ = group_move_log_ratio(G, G_inv, logdet_G, S, pre.Sigma_x, pre.W, S_g, ll,
                                             lls[0], data, jacobian=proposal_ratio)
        lr_g = _nan_to_reject(lr_g)
        a_g, p_g = lu_g < lr_g, jnp.exp(jnp.minimum(0.0, lr_g))
        pick = lambda i: jax.tree.map(lambda x: x[i], tots)  # noqa: E731
        S = jnp.where(a_g, S_g, S)
        Sigma_x = jnp.where(a_g, Sx_g, pre.Sigma_x)
        tot = jax.tree.map(lambda a, b: jnp.where(a_g, a, b), pick(0), tot)
        ll = jnp.where(a_g, lls[0], ll)
        tot_p = jax.tree.map(lambda a, b: jnp.where(a_g, a, b), pick(2), pick(1))
        ll_p = jnp.where(a_g, lls[2], lls[1])
    else:
        per2 = _holder_totals(_z_terms(S, s2p_safe, data.z_hat, data.Sigma_z))
        tot_p = _sum_totals(prior, per2)
        ll_p = collapsed_loglik(tot_p)

    # 4. sigma_y^2 with theta integrated out
    lt_old = _log_invgamma(s2, data.a, data.b) + ll
    lt_new = jnp.where(s2p > 0, _log_invgamma(s2p_safe, data.a, data.b) + ll_p, -jnp.inf)
    lr_sy = _nan_to_reject(lt_new - lt_old)
    a_sy = lu_sy < lr_sy
    sigma_y2 = jnp.where(a_sy, s2p_safe, s2)
    tot = jax.tree.map(lambda a, b: jnp.where(a_sy, a, b), tot_p, tot)

    # 5. theta | S, sigma_y^2
    theta = _theta_from_precision(tot.P, tot.h, eps_theta)
    new = NormalXState(theta=theta, sigma_y2=sigma_y2, Sigma_x=Sigma_x, S=S)
    info = Info(p_rw, a_rw, jnp.exp(jnp.minimum(0.0, lr_sy)), a_sy,
                p_pr, a_pr, p_g, a_g)
    return new, info


# ---------------------------------------------------------------------------------------------
# normalX, default: collapsed moves + a non-centred (Sigma_x, S) move + slice on sigma_y^2
# ---------------------------------------------------------------------------------------------

TARGET_NONCENTRED = 0.5  # acceptance the scale of the non-centred move is adapted to
NONCENTRED_MOVES = 3  # non-centred moves per sweep


def _lower_from_vector(h, d):
    """The lower-triangular (incl. diagonal) d x d matrix with entries h (row-major order)."""
    il = np.tril_indices(d)
    return jnp.zeros((d, d), h.dtype).at[il].set(h)


def noncentred_design(M):
    """The matrix A with vech_u(H M + M H^T) = A vech_l(H) for a symmetric M and
    lower-triangular H (vech_u: upper triangle incl. diagonal, row-major, the S_hat layout;
    vech_l: lower triangle incl. diagonal, row-major). Batched over leading axes of M."""
    d = M.shape[-1]
    iu, il = np.triu_indices(d), np.tril_indices(d)
    eye = jnp.eye(d, dtype=M.dtype)
    T = (jnp.einsum("ak,...lb->...abkl", eye, M) + jnp.einsum("...al,bk->...abkl", M, eye))
    return T[..., iu[0], iu[1], :, :][..., il[0], il[1]]


def noncentred_log_ratio(h, Sigma_x, W, S, sigma_y2, ll, data, prior):
    """log pi(x') - log pi(x) + log|Jacobian| for the move x = (Sigma_x, S_1..S_J) ->
    x' = (G Sigma_x G^T, G S_j G^T), G the Cayley transform of the lower-triangular H with
    entries h, sigma_y^2 fixed and theta integrated out (:func:`group_move_log_ratio`). Written
    with LAPACK linear algebra so that it can be differentiated in h. Returns (log ratio,
    (S', Sigma_x', Sigma_x'^{-1}, totals at S', collapsed log-likelihood at S'))."""
    d = S.shape[-1]
    H = _lower_from_vector(h, d)
    eye = jnp.eye(d, dtype=S.dtype)
    inv_m = solve_triangular(eye - 0.5 * H, eye, lower=True)
    inv_p = solve_triangular(eye + 0.5 * H, eye, lower=True)
    G, G_inv, logdet = _group_from(H, inv_m, inv_p)
    S_g = _sym(G @ S @ G.T)
    K = jnp.linalg.cholesky(sigma_y2 * S_g + data.Sigma_z)
    Y = solve_triangular(K, jnp.concatenate([S_g, data.z_hat[..., None]], axis=-1), lower=True)
    zt = _ZTerms(Y[..., :d], Y[..., d], jnp.sum(jnp.log(jnp.diagonal(K, axis1=-2, axis2=-1)), -1))
    tot_g = _sum_totals(prior, _holder_totals(zt))
    ll_g = _collapsed_loglik_lapack(tot_g)
    log_r, Sx_g, W_g = group_move_log_ratio(G, G_inv, logdet, S, Sigma_x, W, S_g, ll, ll_g, data)
    return log_r, (S_g, Sx_g, W_g, tot_g, ll_g)


def noncentred_proposal(Sigma_x, W, S, sigma_y2, ll, tot, data, prior):
    """Gauss-Newton approximation N(m, P^{-1}) of the target of the non-centred move in h
    (x fixed). To first order S_j' = S_j + H S_j + S_j H^T, so the S_hat_j terms have
    curvature A_j^T A_j / sigma_s_j^2 with A_j = :func:`noncentred_design` (S_j); since
    S_j = n_j Sigma_x (1 + O(n_j^{-1/2})) under the model, sum_j A_j^T A_j / sigma_s_j^2 is
    replaced by (sum_j n_j^2 / sigma_s_j^2) A^T A with A = noncentred_design(Sigma_x): one
    D x D product instead of J (D = d(d+1)/2; this is only the proposal, the acceptance ratio
    is exact whatever P is). With theta
    at its conditional mean theta_hat = P_theta^{-1} h_theta (``tot``) the z_hat_j terms
    N(z_hat_j; S_j' theta_hat, K_j) have curvature B_j^T K_j^{-1} B_j, B_j h = (H S_j + S_j H^T)
    theta_hat. Then P = I + sum_j (n_j^2 / sigma_s_j^2) A^T A + sum_j B_j^T K_j^{-1} B_j and
    m = P^{-1} g, g the exact gradient of :func:`noncentred_log_ratio` at h = 0.
    Returns (m, chol P)."""
    J, d = S.shape[0], S.shape[-1]
    D = d * (d + 1) // 2
    il = np.tril_indices(d)
    zero = jnp.zeros(D, S.dtype)
    g = jax.grad(lambda h: noncentred_log_ratio(h, Sigma_x, W, S, sigma_y2, ll, data,
                                                prior)[0])(zero)
    A = noncentred_design(Sigma_x)
    theta = jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(tot.P), True), tot.h)
    v = jnp.einsum("jab,b->ja", S, theta)  # S_j theta_hat
    eye = jnp.eye(d, dtype=S.dtype)
    # B_j[a, (k, l)] = delta_ak v_jl + S_j,al theta_k   (k >= l)
    B = (eye[None, :, il[0]] * v[:, il[1]][:, None, :]
         + S[:, :, il[1]] * theta[il[0]][None, None, :])
    LK = jnp.linalg.cholesky(sigma_y2 * S + data.Sigma_z)
    KB = solve_triangular(LK, B, lower=True)
    P = (jnp.eye(D, dtype=S.dtype) + jnp.sum(data.n**2 / data.sigma_s**2) * (A.T @ A)
         + jnp.einsum("jpq,jpr->qr", KB, KB))
    R = jnp.linalg.cholesky(P)
    return jax.scipy.linalg.cho_solve((R, True), g), R


def _noncentred_log_q(h, m, R, c):
    """log N(h; (1 - sqrt(1 - c^2)) m, c^2 P^{-1}) + const, P = R R^T."""
    r = R.T @ (h - (1.0 - jnp.sqrt(1.0 - c**2)) * m) / c
    return -0.5 * r @ r + jnp.sum(jnp.log(jnp.diagonal(R))) - h.shape[0] * jnp.log(c)


def noncentred_move(xi, log_u, Sigma_x, W, S, sigma_y2, ll, tot, data, prior, log_c,
                    jacobian=True):
    """The non-centred move of :func:`normalx_step`: propose h from the Gauss-Newton
    approximation at x, h = (1 - sqrt(1 - c^2)) m(x) + c R(x)^{-T} xi (c <= 1; c = 1 is an
    independence-like draw from the approximation, smaller c an autoregressive step around
    x that is exactly reversible for a Gaussian target), move x -> x' = G(h) x, and accept
    with

        log r = noncentred_log_ratio(h) + log q(-h | x') - log q(h | x),

    since G(-h) = G(h)^{-1} maps x' back to x (so (x, h) -> (x', -h) is an involution whose
    Jacobian is in :func:`noncentred_log_ratio`). ``jacobian=False`` drops the Jacobian: a
    deliberately WRONG ratio for the tests' negative control. Returns (accepted, acceptance
    probability, and the proposed S, Sigma_x, Sigma_x^{-1}, totals and collapsed
    log-likelihood, which the caller keeps if accepted)."""
    c = jnp.exp(log_c)
    m, R = noncentred_proposal(Sigma_x, W, S, sigma_y2, ll, tot, data, prior)
    mean = (1.0 - jnp.sqrt(1.0 - c**2)) * m
    h = mean + c * solve_triangular(R.T, xi, lower=False)
    log_r, (S_g, Sx_g, W_g, tot_g, ll_g) = noncentred_log_ratio(h, Sigma_x, W, S, sigma_y2, ll,
                                                                data, prior)
    if not jacobian:
        J, d = S.shape[0], S.shape[-1]
        logdet = jnp.sum(jnp.log(jnp.abs((1.0 + 0.5 * h[_diag_positions(d)])
                                         / (1.0 - 0.5 * h[_diag_positions(d)]))))
        log_r = log_r - (J + 1.0) * (d + 1.0) * logdet
    m_b, R_b = noncentred_proposal(Sx_g, W_g, S_g, sigma_y2, ll_g, tot_g, data, prior)
    log_r = log_r + _noncentred_log_q(-h, m_b, R_b, c) - _noncentred_log_q(h, m, R, c)
    log_r = _nan_to_reject(log_r)
    accept = log_u < log_r
    return accept, jnp.exp(jnp.minimum(0.0, log_r)), S_g, Sx_g, W_g, tot_g, ll_g


def _diag_positions(d):
    """Positions of the diagonal entries in vech_l (row-major lower triangle)."""
    return np.array([i * (i + 1) // 2 + i for i in range(d)])


def normalx_step(rng_key, state: NormalXState, data, tuning: Tuning, proposal_ratio=True,
                 noncentred=True, rw_moves=True, prior_moves=True):
    """One sweep of the default normalX sampler (method ``"normalx"``): the target of
    Algorithm 1 (the joint posterior of the normalX model, eq. 10), sampled by a partially
    collapsed Gibbs sampler that interweaves the centred and the non-centred parametrisation
    of (Sigma_x, S) (Yu & Meng 2011):

    1. Sigma_x ~ InvWishart(kappa + n, Lambda + sum_j S_j) (A.1): the centred step, exact;
    2. for each holder, the Wishart random walk and the prior-proposal move on S_j with theta
       integrated out (as in :func:`collapsed_step`);
    3. the non-centred step: with W_j = L^{-1} S_j L^{-T} (L L^T = Sigma_x), whose law
       Wishart(n_j, I) does not involve Sigma_x, move Sigma_x with the W_j held fixed, i.e.
       (Sigma_x, S_j) -> (G Sigma_x G^T, G S_j G^T), by MH with a Gauss-Newton proposal
       (:func:`noncentred_move`). When S_hat measures S_j weakly compared with its Wishart
       spread (large n_j, small eps) step 1 can move Sigma_x only by ~1/sqrt(n) per sweep
       while this step moves it across its posterior; when S_hat measures S_j well, step 1
       does. ``noncentred=False`` leaves it out (for the tests and the benchmark);
    4. u = log sigma_y^2 | S from its marginal with theta integrated out, by slice sampling
       (:func:`slice_1d`, :func:`log_sigma_y2_marginal`);
    5. theta ~ N(m_p, Sigma_p) given S, sigma_y^2 (eq. 12).

    Steps 1-4 leave p(Sigma_x, S, sigma_y^2 | data) invariant (theta integrated out), and step
    5 draws theta from its exact conditional, so the sweep leaves the joint posterior invariant.
    ``proposal_ratio=False`` drops the random walk's Hastings correction and the non-centred
    move's Jacobian: a deliberately WRONG kernel, for the tests' negative control.
    """
    J, d = data.z_hat.shape
    D = d * (d + 1) // 2
    k = NONCENTRED_MOVES
    df = _holder_move_df(data, tuning)
    n_n, n_u = _bartlett_sizes(df.shape, d)
    N, u = _draw(rng_key, n_n + k * D + d, n_u + 2 * J + k + SLICE_N_UNIFORMS)
    xi, eps_theta = N[n_n:n_n + k * D].reshape(k, D), N[n_n + k * D:]
    log_u = jnp.log(u[n_u:n_u + 2 * J + k])
    u_slice = u[n_u + 2 * J + k:]
    # 1.-2. Sigma_x | S and the holder-wise moves
    hm = _collapsed_holder_moves(N[:n_n], u[:n_u], log_u[:2 * J], df, state, data,
                                 jnp.zeros((0, d, d), state.S.dtype), proposal_ratio,
                                 rw_moves, prior_moves)
    S, Sigma_x = hm.S, hm.pre.Sigma_x
    # 3. non-centred moves of (Sigma_x, S)
    p_nc, a_nc = jnp.zeros((), S.dtype), jnp.zeros((), bool)
    if noncentred:
        def nc(carry, x):
            S, Sigma_x, W, tot, ll = carry
            a, p, *new = noncentred_move(x[0], x[1], Sigma_x, W, S, state.sigma_y2, ll, tot,
                                         data, hm.prior, tuning.log_group_step,
                                         jacobian=proposal_ratio)
            carry = jax.tree.map(lambda n, o: jnp.where(a, n, o), tuple(new), carry)
            return carry, (p, a)
        (S, Sigma_x, _, _, _), (p_nc, a_nc) = jax.lax.scan(
            nc, (S, Sigma_x, hm.pre.W, hm.tot, hm.ll), (xi, log_u[2 * J:]))
        p_nc, a_nc = jnp.mean(p_nc), jnp.mean(a_nc)
    # 4. log sigma_y^2 | S by slice sampling, theta integrated out; 5. theta | S, sigma_y^2
    theta, s2, jump, evals = slice_sigma_y2_then_theta(
        u_slice, eps_theta, S, state.sigma_y2, data, hm.prior, tuning.log_step)
    new = NormalXState(theta=theta, sigma_y2=s2, Sigma_x=Sigma_x, S=S)
    one = jnp.ones((), S.dtype)
    info = Info(hm.p_rw, hm.a_rw, one, one > 0, hm.p_pr, hm.a_pr,
                jump_log_sigma_y2=jump, evals_sigma_y2=evals,
                accept_prob_noncentred=p_nc, is_accepted_noncentred=a_nc)
    return new, info


# ---------------------------------------------------------------------------------------------
# Adaptation (warm-up only)
# ---------------------------------------------------------------------------------------------


def adapt(tuning: Tuning, info: Info, i, target_accept_S=0.2, target_accept_sigma_y2=0.2,
          min_log_alpha=None):
    """Robbins-Monro update toward the target acceptance (Andrieu & Thoms 2008), gain
    gamma_i = (i + 1)^{-0.6} as in the authors' code:

        log alpha_j <- log alpha_j - gamma_i (accept_prob_S_j - target)   (larger alpha = smaller)
        log step    <- log step    + gamma_i (accept_prob_sigma_y2 - target)
        log tau     <- log tau     + gamma_i (accept_prob_group - target_S)   (collapsed only)
        log w       <- log w + gamma_i (log(3 |jump|) - log w)     (slice width, slice kernels)
        log c       <- min(0, log c + gamma_i (accept_prob_noncentred - 0.5))   (normalx_step)

    Used only during warm-up, so the kept draws come from a fixed, valid kernel.
    """
    gamma = (i + 1.0) ** -0.6
    log_alpha = tuning.log_alpha - gamma * (info.accept_prob_S - target_accept_S)
    if min_log_alpha is not None:
        log_alpha = jnp.maximum(log_alpha, min_log_alpha)
    log_step = tuning.log_step + gamma * (info.accept_prob_sigma_y2 - target_accept_sigma_y2)
    if info.accept_prob_noncentred is not None:  # scale c <= 1 of the non-centred move
        log_group = jnp.minimum(0.0, tuning.log_group_step
                                + gamma * (info.accept_prob_noncentred - TARGET_NONCENTRED))
        return Tuning(log_alpha, _adapt_slice(tuning, info, gamma), log_group)
    if info.jump_log_sigma_y2 is not None:  # slice width: towards 3 x the typical move
        log_step = _adapt_slice(tuning, info, gamma)
    log_group = tuning.log_group_step
    if info.accept_prob_group is not None:
        log_group = log_group + gamma * (info.accept_prob_group - target_accept_S)
    return Tuning(log_alpha, log_step, log_group)


SLICE_SIGMA_Y2_STEPS = (fixeds_step, normalx_step)  # kernels whose sigma_y^2 update is a slice sampler


def _adapt_slice(tuning, info, gamma):
    return tuning.log_step + gamma * (jnp.log(3.0 * info.jump_log_sigma_y2 + 1e-12)
                                      - tuning.log_step)
