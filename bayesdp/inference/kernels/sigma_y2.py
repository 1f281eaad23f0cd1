"""log sigma_y^2 of the fixedS kernel (:mod:`.fixeds`) from its marginal with theta integrated
out, by an independence Metropolis-Hastings update whose proposal is a grid of that marginal,
then theta | S, sigma_y^2 exactly (eq. 12).

With S_j fixed, u = log sigma_y^2 has a fixed 1-d posterior p(u | z_hat) (theta integrated out,
:func:`log_sigma_y2_marginal`). Its log is evaluated once on a grid that zooms in on where its
mass lies (:func:`fixed_s_terms`); every sweep proposes u' from

    q(u) = (1 - w) g(u) + w p_0(u),

g the density whose log is linear between the grid's points (exact at them) and zero outside,
p_0 the prior of u (sigma_y^2 ~ InvGamma(a, b)) and w = ``_PRIOR_WEIGHT``, and accepts it with
probability min(1, p(u' | z) q(u) / (p(u | z) q(u'))). A proposal that does not depend on the
state leaves the posterior invariant whatever the grid; the prior's share keeps q's tails at
least the prior's, so the chain is uniformly ergodic, and where the grid is good the
acceptance is close to one and the draws close to independent.

Cost: the grid is ``_ZOOM_ROUNDS x _ZOOM_POINTS + _GRID_POINTS`` evaluations once per fit; a
sweep is two (the current point and the proposal), each one product of the J whitened d x d
factors (:class:`SpectralTerms`, one eigendecomposition per holder, once) and a d x d Cholesky.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax.scipy.special import gammaln

from .common import Totals, collapsed_loglik, log_invgamma, nan_to_reject, prior_terms, \
    theta_from_precision
from .linalg import chol, logdet_chol, mm, mT, mv, sym, tri_inv

_ZOOM_POINTS = 33  # points per zoom round of the grid
_ZOOM_ROUNDS = 5  # each narrows the range up to 16-fold: 60 -> ~6e-5 in log sigma_y^2
_SPAN = 30.0  # the first round spans log sigma_y^2 within +-30 of the prior's mode
_MASS_NATS = 40.0  # the grid covers where the log marginal is within 40 of its largest value
_GRID_POINTS = 257  # points of the final grid (its density's log is linear between them)
_PRIOR_WEIGHT = 0.05  # share of the prior of u in the proposal (heavy tails, any missed mode)
N_UNIFORMS = 4  # uniforms one update uses (which part, segment, place in it, accept)


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
    makes every evaluation at a new sigma_y^2 one product of the M_j and elementwise terms."""

    lam: jax.Array  # (J, d)
    M: jax.Array  # (J, d, d)
    w: jax.Array  # (J, d)
    logdet_A: jax.Array  # (J,)


class FixedSTerms(NamedTuple):
    """What the fixedS kernel computes once per release (:func:`fixed_s_terms`): the
    :class:`SpectralTerms` of S_fixed, the prior's :class:`.common.Totals`, and the grid
    proposal g of u = log sigma_y^2: ``knots`` (K,) equally spaced, ``log_g`` (K,) log g at
    them (normalised; log g is linear in between), ``log_mass`` (K - 1,) log of g's mass on each
    segment."""

    spectral: SpectralTerms
    prior: Totals
    knots: jax.Array
    log_g: jax.Array
    log_mass: jax.Array


def spectral_terms(S, data) -> SpectralTerms:
    """:class:`SpectralTerms` of the S_j (J, d, d) under the release's z-noise covariances."""
    La = chol(S + data.Sigma_z)
    La_inv = tri_inv(La)
    B = mm(La_inv, S)
    lam, V = jnp.linalg.eigh(sym(mm(B, mT(La_inv))))
    Vt = mT(V)
    return SpectralTerms(jnp.clip(lam, 0.0, 1.0), mm(Vt, B),
                         mv(Vt, mv(La_inv, data.z_hat)), logdet_chol(La))


def spectral_totals(sp: SpectralTerms, sigma_y2, prior: Totals) -> Totals:
    """:class:`.common.Totals` at sigma_y^2 from :class:`SpectralTerms` (eq. 12's P and h)."""
    q = sigma_y2 * sp.lam + (1.0 - sp.lam)
    D = 1.0 / q
    P = prior.P + jnp.einsum("jki,jk,jkl->il", sp.M, D, sp.M)
    h = prior.h + jnp.einsum("jki,jk,jk->i", sp.M, D, sp.w)
    Q = prior.Q + jnp.sum(D * sp.w**2)
    LD = jnp.sum(sp.logdet_A) + jnp.sum(jnp.log(q))
    return Totals(P, h, Q, LD)


def fixed_s_prior_totals(data) -> Totals:
    """The prior's part of the :class:`.common.Totals` (C^{-1}, C^{-1} m, m^T C^{-1} m, 0)."""
    Cinv, Cm, mCm, _ = prior_terms(data)
    return Totals(Cinv, Cm, mCm, jnp.zeros((), Cinv.dtype))


def log_sigma_y2_marginal(log_s2, sp: SpectralTerms, data, prior: Totals):
    """log p(u | S, z_hat) + const for u = log sigma_y^2, theta integrated out:
    log InvGamma(e^u; a, b) + u (the Jacobian) + :func:`.common.collapsed_loglik` at S, e^u.
    Returns (log density, totals)."""
    s2 = jnp.exp(log_s2)
    tot = spectral_totals(sp, s2, prior)
    return log_invgamma(s2, data.a, data.b) + log_s2 + collapsed_loglik(tot), tot


def fixed_s_terms(S, data) -> FixedSTerms:
    """:class:`FixedSTerms` of the fixed S (J, d, d): the spectral terms, then the grid.

    The grid zooms in ``_ZOOM_ROUNDS`` rounds of ``_ZOOM_POINTS`` points, from log sigma_y^2
    within ``_SPAN`` of the prior's mode log(b / (a + 1)): each round keeps the range between
    the points next to the outermost ones whose log marginal is within ``_MASS_NATS`` of the
    round's largest (a unimodal marginal's mode is always inside it). The final grid has
    ``_GRID_POINTS`` points over the last range; log values below the largest minus
    2 ``_MASS_NATS`` (or not finite) are raised to it, so that g is positive on the whole range.
    The grid only shapes the proposal: the kernel is exact for any."""
    sp = spectral_terms(S, data)
    prior = fixed_s_prior_totals(data)
    f = jax.vmap(lambda u: nan_to_reject(log_sigma_y2_marginal(u, sp, data, prior)[0]))
    centre = jnp.log(data.b / (data.a + 1.0))
    lo, hi = centre - _SPAN, centre + _SPAN
    last = _ZOOM_POINTS - 1
    for _ in range(_ZOOM_ROUNDS):
        u = jnp.linspace(lo, hi, _ZOOM_POINTS)
        v = f(u)
        inside = v >= jnp.max(v) - _MASS_NATS
        i0 = jnp.argmax(inside)
        i1 = last - jnp.argmax(inside[::-1])
        lo, hi = u[jnp.maximum(i0 - 1, 0)], u[jnp.minimum(i1 + 1, last)]
    knots = jnp.linspace(lo, hi, _GRID_POINTS)
    v = f(knots)
    top = jnp.max(v)
    v = jnp.where(jnp.isfinite(top), jnp.maximum(v - top, -2.0 * _MASS_NATS), 0.0)
    v = jnp.where(jnp.isnan(v), -2.0 * _MASS_NATS, v)
    log_mass = _segment_log_mass(knots[1] - knots[0], v[:-1], v[1:])
    log_z = jax.scipy.special.logsumexp(log_mass)
    return FixedSTerms(sp, prior, knots, v - log_z, log_mass - log_z)


def _segment_log_mass(h, a, b):
    """log of the integral over a segment of width h of exp(linear from a to b):
    log h + max(a, b) + log((1 - e^-x) / x), x = |b - a|."""
    x = jnp.abs(b - a)
    xs = jnp.where(x < 1e-6, 1.0, x)
    g = jnp.where(x < 1e-6, -0.5 * x, jnp.log(-jnp.expm1(-xs)) - jnp.log(xs))
    return jnp.log(h) + jnp.maximum(a, b) + g


def _place_in_segment(U, s):
    """t in [0, 1] with density proportional to e^{s t}, from U ~ U[0, 1) (inverse CDF)."""
    x = jnp.abs(s)
    xs = jnp.where(x < 1e-6, 1.0, x)
    t = jnp.where(x < 1e-6, U, jnp.log1p(U * jnp.expm1(-xs)) / -xs)  # density ~ e^{-x t}
    return jnp.where(s < 0, t, 1.0 - t)


def _log_prior_u(u, a, b):
    """log density of u = log sigma_y^2 for sigma_y^2 ~ InvGamma(a, b)."""
    return a * jnp.log(b) - gammaln(a) - a * u - b * jnp.exp(-u)


def proposal_log_density(terms: FixedSTerms, u, a, b):
    """log q(u) of the proposal (module doc), u of any shape."""
    k = terms.knots
    inside = (u >= k[0]) & (u <= k[-1])
    log_g = jnp.where(inside, jnp.interp(u, k, terms.log_g), -jnp.inf)
    return jnp.logaddexp(jnp.log1p(-_PRIOR_WEIGHT) + log_g,
                         jnp.log(_PRIOR_WEIGHT) + _log_prior_u(u, a, b))


def propose(rng_key, uniforms, terms: FixedSTerms, a, b):
    """A draw of u from the proposal q: the prior (a log-Gamma draw from ``rng_key``) with
    probability _PRIOR_WEIGHT, else g (segment by the inverse CDF of their masses, then the
    place in it); ``uniforms``: 3 U[0, 1) numbers."""
    cdf = jnp.cumsum(jnp.exp(terms.log_mass))
    seg = jnp.minimum(jnp.searchsorted(cdf, uniforms[1] * cdf[-1]), cdf.shape[0] - 1)
    k = terms.knots
    s = terms.log_g[seg + 1] - terms.log_g[seg]
    u_grid = k[seg] + (k[1] - k[0]) * _place_in_segment(uniforms[2], s)
    u_prior = jnp.log(b) - jax.random.loggamma(rng_key, a, dtype=k.dtype)
    return jnp.where(uniforms[0] < _PRIOR_WEIGHT, u_prior, u_grid)


def sigma_y2_then_theta(rng_key, uniforms, eps, sigma_y2, terms: FixedSTerms, data):
    """One independence Metropolis-Hastings update of u = log sigma_y^2 from its marginal
    (proposal q of the module doc), then theta | S, sigma_y^2 exactly (eq. 12).

    ``rng_key`` feeds the proposal's prior draw; ``uniforms``: ``N_UNIFORMS`` U[0, 1) numbers;
    ``eps``: d standard normals. Returns (theta, sigma_y2, acceptance probability, accepted)."""
    sp, prior = terms.spectral, terms.prior
    u0 = jnp.log(sigma_y2)
    u1 = propose(rng_key, uniforms[:3], terms, data.a, data.b)
    us = jnp.stack([u0, u1])
    lp, tot = jax.vmap(lambda u: log_sigma_y2_marginal(u, sp, data, prior))(us)
    lq = proposal_log_density(terms, us, data.a, data.b)
    log_r = nan_to_reject(lp[1] - lp[0] + lq[0] - lq[1])
    accept = jnp.log(uniforms[3]) < log_r
    pick = jnp.where(accept, 1, 0)
    tot = jax.tree.map(lambda t: t[pick], tot)
    theta = theta_from_precision(tot.P, tot.h, eps)
    return theta, jnp.exp(us[pick]), jnp.minimum(1.0, jnp.exp(log_r)), accept
