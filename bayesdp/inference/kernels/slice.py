"""The univariate slice sampler and the update of sigma_y^2 that uses it: log sigma_y^2 from its
marginal with theta integrated out, then theta | S, sigma_y^2 (eq. 12), of the fixedS kernel
(:mod:`.fixeds`)."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .common import (Totals, collapsed_loglik, log_invgamma, nan_to_reject, prior_terms,
                     theta_from_precision)
from .linalg import chol, logdet_chol, mm, mT, mv, sym, tri_inv


_SLICE_MAX_STEPS = 8  # stepping-out budget m of the slice sampler (Neal 2003, fig. 3); why 8:
#                      docs/evidence/convergence.md, "`fixeds`: the slice sampler's settings"
_SLICE_MAX_SHRINK = 100  # shrinkage steps before giving up (never reached in float64)
_SLICE_UPDATES = 3  # slice updates of log sigma_y^2 per sweep (each costs O(J d) after one
#                    eigendecomposition per holder, so repeating them is cheap)
SLICE_N_UNIFORMS = _SLICE_UPDATES * (3 + _SLICE_MAX_SHRINK)  # uniforms one sweep's updates use


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
    m = _SLICE_MAX_STEPS

    def lf(x):
        v, aux = log_f(x)
        return nan_to_reject(v), aux

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
        return (f1 <= log_y) & (i < _SLICE_MAX_SHRINK)

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


class _SpectralTerms(NamedTuple):
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


def _spectral_terms(S, data):
    """:class:`_SpectralTerms` of the S_j (J, d, d) under the release's z-noise covariances."""
    La = chol(S + data.Sigma_z)
    La_inv = tri_inv(La)
    B = mm(La_inv, S)
    lam, V = jnp.linalg.eigh(sym(mm(B, mT(La_inv))))
    Vt = mT(V)
    return _SpectralTerms(jnp.clip(lam, 0.0, 1.0), mm(Vt, B),
                          mv(Vt, mv(La_inv, data.z_hat)), logdet_chol(La))


def _spectral_totals(sp: _SpectralTerms, sigma_y2, prior: "Totals"):
    """:class:`Totals` at sigma_y^2 from :class:`_SpectralTerms` (theta integrated out)."""
    q = sigma_y2 * sp.lam + (1.0 - sp.lam)
    D = 1.0 / q
    P = prior.P + jnp.einsum("jki,jk,jkl->il", sp.M, D, sp.M)
    h = prior.h + jnp.einsum("jki,jk,jk->i", sp.M, D, sp.w)
    Q = prior.Q + jnp.sum(D * sp.w**2)
    LD = jnp.sum(sp.logdet_A) + jnp.sum(jnp.log(q))
    return Totals(P, h, Q, LD)


def fixed_s_prior_totals(data):
    Cinv, Cm, mCm, _ = prior_terms(data)
    return Totals(Cinv, Cm, mCm, jnp.zeros((), Cinv.dtype))


def log_sigma_y2_marginal(log_s2, sp: _SpectralTerms, data, prior):
    """log p(u | S, z_hat) + const for u = log sigma_y^2, theta integrated out:
    log InvGamma(e^u; a, b) + u (the Jacobian) + :func:`collapsed_loglik` at S, e^u
    (``sp`` = :func:`_spectral_terms` of S). Returns (log density, totals)."""
    s2 = jnp.exp(log_s2)
    tot = _spectral_totals(sp, s2, prior)
    return log_invgamma(s2, data.a, data.b) + log_s2 + collapsed_loglik(tot), tot


def slice_sigma_y2_then_theta(u, eps, S, sigma_y2, data, prior, log_width):
    """``_SLICE_UPDATES`` slice updates of u = log sigma_y^2 | S from its theta-integrated
    marginal (:func:`log_sigma_y2_marginal`), then theta | S, sigma_y^2 exactly (eq. 12). Each
    update leaves the marginal invariant, so several in a row do too; they help where that
    marginal has a narrow mode and a long flat tail (at small eps the release barely bounds
    sigma_y^2 from above; docs/evidence/convergence.md, "`fixeds`: the slice sampler's
    settings"). ``u``: SLICE_N_UNIFORMS uniforms; ``eps``: d standard normals. Returns (theta,
    sigma_y2, mean |jump of log sigma_y2| per update, evaluations)."""
    sp = _spectral_terms(S, data)
    u0 = jnp.log(sigma_y2)
    width = jnp.exp(log_width)
    per = u.shape[0] // _SLICE_UPDATES
    x, jump, evals, tot = u0, 0.0, 0, None
    for k in range(_SLICE_UPDATES):
        x1, tot, ev = slice_1d(u[k * per:(k + 1) * per], x,
                               lambda v: log_sigma_y2_marginal(v, sp, data, prior), width)
        jump, evals, x = jump + jnp.abs(x1 - x), evals + ev, x1
    return (theta_from_precision(tot.P, tot.h, eps), jnp.exp(x), jump / _SLICE_UPDATES, evals)


