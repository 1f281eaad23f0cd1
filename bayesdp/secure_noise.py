"""Secure noise: the discrete Gaussian mechanism on a grid (``release(..., noise="secure")``).

Float Gaussian noise from numpy's PCG64 is open to floating-point attacks (Mironov 2012: the
low-order bits of a float sample reveal the noiseless value) and PCG64 is not a cryptographic
generator. In secure mode every number is an integer multiple of a grid step gamma = 2^k:

    K   = sum over rows of round(c(row) / gamma)      c = [vech(w w^T), w y (, y^2)] (per row)
    out = gamma * (K + Y),   Y_i iid N_Z(0, s^2)      the discrete Gaussian on the integers

where N_Z(0, s^2)(k) is proportional to exp(-k^2 / (2 s^2)) (Canonne, Kamath & Steinke 2020).
Y is sampled exactly by their Algorithms 1-3 (Bernoulli(exp(-g)), the discrete Laplace, then
rejection) in exact rational arithmetic (integer numerators and denominators), from
``secrets.randbelow`` (the operating system's CSPRNG); nothing is seedable. The statistics are
rounded per row and summed as integers, so no floating-point error of the sum enters either.

Sensitivity of the rounded statistics. A row's float contribution c has ||c|| <= Delta (1 + r),
Delta the sensitivity of the real statistics and r = FLOAT_SLACK a relative slack for the
float rounding of the clipped row and its products (a few units of 2^-53 per coordinate). Two
neighbouring data sets differ by one contribution (add/remove), or one changed contribution
(the swap of averaged rows, docs/privacy.md 3b); each rounded coordinate moves by at most gamma
more than its exact value does, so with D released coordinates

    Delta_grid = Delta (1 + r) + gamma sqrt(D).

Privacy (all in grid units: s = sigma / gamma, D_g = Delta_grid / gamma).

- zCDP: for integers mu, nu and alpha > 1, D_alpha(N_Z(mu, s^2) || N_Z(nu, s^2)) <=
  alpha (mu - nu)^2 / (2 s^2) (Canonne, Kamath & Steinke 2020, the discrete Gaussian's
  concentrated DP; the shifted theta sum is largest at an integer shift). Renyi divergences add
  over independent coordinates, so the vector mechanism is rho-zCDP with
  rho = Delta_grid^2 / (2 sigma^2), exactly as the continuous Gaussian.
- (eps, delta): for a scalar query with integer sensitivity their Theorem 7 gives delta exactly,
  delta = P[Y > eps s^2/D_g - D_g/2] - e^eps P[Y > eps s^2/D_g + D_g/2]
  (:func:`discrete_gaussian_delta`). For a vector query with L2 sensitivity the paper gives the
  zCDP bound only, and the worst shift vector is not known. bayesdp uses a bound instead
  (:func:`discrete_gaussian_delta_bound`): the discrete Gaussian is, up to a likelihood ratio in
  [Theta_s / M, Theta_s / m] per coordinate, a post-processing of the continuous Gaussian. Round
  x ~ N(mu, s'^2), s'^2 = s^2 - tau^2, to the integer k with probability
  K(x, k) = phi_tau(x - k) / Theta(x), Theta(x) = sum_k phi_tau(x - k). The output pmf is
  int phi_s'(x - mu) phi_tau(x - k) / Theta(x) dx, between phi_s(k - mu) / M and
  phi_s(k - mu) / m, where by Poisson summation Theta(x) = 1 + 2 sum_j exp(-2 pi^2 j^2 tau^2)
  cos(2 pi j x) lies in [m, M] = [Theta(1/2), Theta(0)]; and N_Z(mu, s^2)(k) = phi_s(k - mu) /
  Theta_s with Theta_s >= 1. So for every event E and neighbours mu, nu in Z^D,

      P_mu(E) <= e^(eps + xi) P_nu(E) + M^D delta_c(eps),    xi = D log(M / m),

  where delta_c is the exact privacy profile of the continuous Gaussian with noise s' and
  sensitivity D_g (Balle & Wang 2018). bayesdp takes the smallest bound over a few tau. At the
  grid bayesdp uses (s >= 2^20) xi and M^D - 1 are below 1e-15: the bound is the continuous
  Gaussian's profile, and sigma exceeds the continuous analytic sigma by the rounding term
  gamma sqrt(D) / Delta <= 2^-20 (relative) and the whole scale s only.
"""

from __future__ import annotations

import math
import secrets
from fractions import Fraction

import numpy as np
from scipy import special

from . import privacy
from .errors import BayesdpInputError

GRID_BITS = 20
"""The grid step is gamma = 2^(floor(log2 min(sigma_c, Delta / sqrt(D))) - GRID_BITS), sigma_c
the continuous analytic sigma of the same release: the noise scale s = sigma / gamma is at least
2^20 grid steps, and the rounding adds gamma sqrt(D) <= 2^-20 Delta to the sensitivity."""

FLOAT_SLACK = 1e-9
"""Relative slack on Delta for the float rounding of a clipped row's contribution (clipping, the
products w_i w_j and w y, averaging: at most about (d + k + 10) 2^-53 relative, d features and k
rows per group). Generous by far for any d and k bayesdp can hold in memory."""

DELTA_RTOL = 1e-9
"""Calibration requires the delta bound times (1 + DELTA_RTOL) to be <= delta: covers the float
evaluation of the profile."""

TAUS = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 4.0)
"""Smoothing widths tau (grid units) over which :func:`discrete_gaussian_delta_bound` minimises."""

MECHANISM = "discrete_gaussian"

_randbelow = secrets.randbelow  # the only source of randomness of this module


# -- exact sampling (Canonne, Kamath & Steinke 2020, Algorithms 1-3) ------------------------------


def bernoulli_exp(gamma) -> bool:
    """True with probability exp(-gamma), gamma >= 0 rational (CKS 2020, Algorithm 1).

    For gamma in [0, 1]: draw A_k ~ Bernoulli(gamma / k), k = 1, 2, ..., until the first A_k = 0;
    K, the index of that draw, is odd with probability 1 - gamma + gamma^2/2! - ... =
    exp(-gamma). For gamma > 1, exp(-gamma) = exp(-1)^floor(gamma) exp(-(gamma - floor(gamma))).
    """
    gamma = Fraction(gamma)
    if gamma < 0:
        raise BayesdpInputError(f"gamma must be >= 0, got {gamma}")
    return _bernoulli_exp(gamma.numerator, gamma.denominator)


def _bernoulli_exp(num: int, den: int) -> bool:
    """Bernoulli(exp(-num/den)) for integers num >= 0, den >= 1: the rational arithmetic of
    :func:`bernoulli_exp` on (numerator, denominator) pairs, without Fraction's gcds."""
    whole, num = divmod(num, den)
    for _ in range(whole):
        if not _bernoulli_exp_unit(1, 1):
            return False
    return _bernoulli_exp_unit(num, den)


def _bernoulli_exp_unit(num: int, den: int) -> bool:
    """Bernoulli(exp(-g)) for g = num/den in [0, 1]; Bernoulli(g/k) is randbelow(den k) < num."""
    k = 1
    while _randbelow(den * k) < num:
        k += 1
    return k % 2 == 1


def discrete_laplace(t: int) -> int:
    """One draw with P(x) proportional to exp(-|x| / t) on the integers, t >= 1 an integer
    (CKS 2020, Algorithm 2 with s = 1).

    U uniform on {0..t-1} kept with probability exp(-U/t), V geometric with P(V = v) =
    (1 - e^-1) e^-v: U + t V has pmf proportional to exp(-x/t) on x >= 0; a random sign, and
    -0 rejected so that 0 is not counted twice.
    """
    t = int(t)
    if t < 1:
        raise BayesdpInputError(f"t must be a whole number >= 1, got {t}")
    while True:
        u = _randbelow(t)
        if not _bernoulli_exp_unit(u, t):
            continue
        v = 0
        while _bernoulli_exp_unit(1, 1):
            v += 1
        x = u + t * v
        negative = _randbelow(2) == 1
        if negative and x == 0:
            continue
        return -x if negative else x


def discrete_gaussian(scale_sq, size=1) -> list:
    """``size`` independent draws of N_Z(0, s^2), P(x) proportional to exp(-x^2 / (2 s^2)) on
    the integers; ``scale_sq`` = s^2 > 0, a rational (int, Fraction, or a float taken exactly).

    CKS 2020, Algorithm 3: t = floor(s) + 1, Y from the discrete Laplace with scale t, accepted
    with probability exp(-(|Y| - s^2/t)^2 / (2 s^2)). Exact, in rational arithmetic (with
    s^2 = a/b the exponent is (|Y| b t - a)^2 / (2 a b t^2)), with randomness from ``secrets``
    (not seedable). Note that s is the scale parameter: the variance is slightly below s^2 (by a
    relative 2e-7 at s = 1, and nothing in float64 for s >= 2).
    """
    s2 = Fraction(scale_sq)
    if s2 <= 0:
        raise BayesdpInputError(f"scale_sq must be > 0, got {scale_sq!r}")
    a, b = s2.numerator, s2.denominator
    t = math.isqrt(a // b) + 1
    den = 2 * a * b * t * t
    out = []
    for _ in range(int(size)):
        while True:
            y = discrete_laplace(t)
            if _bernoulli_exp((abs(y) * b * t - a) ** 2, den):
                out.append(y)
                break
    return out


# -- the distribution, by summation ---------------------------------------------------------------


def _support(scale):
    """Integers k with |k| <= 40 s + 1: outside, exp(-k^2/(2 s^2)) < e^-800 = 0."""
    top = int(math.ceil(40.0 * float(scale))) + 1
    if top > 50_000_000:
        raise BayesdpInputError(f"scale {scale!r} is too large to sum the pmf over its support")
    return np.arange(-top, top + 1)


def discrete_gaussian_pmf(scale):
    """(k, P(Y = k)) of N_Z(0, s^2) over its numerical support, by summation."""
    k = _support(scale)
    logw = -(k.astype(float) ** 2) / (2.0 * float(scale) ** 2)
    return k, np.exp(logw - special.logsumexp(logw))


def discrete_gaussian_delta(epsilon, scale, sensitivity):
    """Exact delta(eps) of a *scalar* integer query with integer sensitivity D plus N_Z(0, s^2)
    (CKS 2020, Theorem 7): P[Y > eps s^2/D - D/2] - e^eps P[Y > eps s^2/D + D/2], by summation.

    For vector queries see :func:`discrete_gaussian_delta_bound`.
    """
    eps = float(epsilon)
    s = float(scale)
    D = int(sensitivity)
    if D != sensitivity or D < 1:
        raise BayesdpInputError(f"sensitivity must be a whole number >= 1, got {sensitivity!r}")
    k, p = discrete_gaussian_pmf(s)
    a = eps * s * s / D - D / 2.0
    b = eps * s * s / D + D / 2.0
    # P[a < Y <= b] - (e^eps - 1) P[Y > b]: the same value, with less cancellation
    return float(p[(k > a) & (k <= b)].sum() - math.expm1(eps) * p[k > b].sum())


def _theta_log_bounds(tau):
    """(log M, log m): the max and min of Theta(x) = sum_k phi_tau(x - k) = 1 + 2 sum_j
    exp(-2 pi^2 j^2 tau^2) cos(2 pi j x) (Poisson summation), at x = 0 and x = 1/2."""
    j = np.arange(1, 40)
    t = np.exp(-2.0 * math.pi**2 * j.astype(float) ** 2 * tau * tau)
    return math.log1p(2.0 * t.sum()), math.log1p(2.0 * float(((-1.0) ** j * t).sum()))


def discrete_gaussian_log_delta_bound(epsilon, scale, sensitivity, dim, tau=None):
    """log of an upper bound on delta(eps) of the D-dimensional discrete Gaussian mechanism
    Z^D -> Z^D (iid N_Z(0, s^2) per coordinate) at L2 sensitivity ``sensitivity``, all in grid
    units (module docstring):

        delta <= M^D delta_c(eps - xi; s' = sqrt(s^2 - tau^2), sensitivity),  xi = D log(M/m),

    delta_c the continuous Gaussian's exact profile (Balle & Wang 2018). The smallest over
    ``tau`` in :data:`TAUS` with tau < s (or the given tau). 0.0 (delta <= 1) when no tau fits.
    Conservative in float: eps - xi is rounded down.
    """
    eps = float(epsilon)
    s = float(scale)
    sens = float(sensitivity)
    D = int(dim)
    best = 0.0
    for tau in (TAUS if tau is None else (float(tau),)):
        if not 0 < tau < s:
            continue
        log_M, log_m = _theta_log_bounds(tau)
        xi = D * (log_M - log_m)
        e = eps - xi
        if xi > 0 and e == eps:
            e = math.nextafter(eps, 0.0)
        if e <= 0:
            continue
        s_c = math.sqrt(s * s - tau * tau)
        val = float(privacy.gaussian_log_delta(s_c / sens, e)) + D * log_M
        best = min(best, val)
    return best


def discrete_gaussian_delta_bound(epsilon, scale, sensitivity, dim, tau=None):
    """Upper bound on delta(eps) of the vector discrete Gaussian mechanism (see
    :func:`discrete_gaussian_log_delta_bound`)."""
    return math.exp(discrete_gaussian_log_delta_bound(epsilon, scale, sensitivity, dim, tau))


def discrete_gaussian_scale(epsilon, delta, sensitivity, dim):
    """The smallest whole scale s (grid units) with delta bound(eps, s) (1 + DELTA_RTOL) <= delta
    for D = ``dim`` coordinates at L2 sensitivity ``sensitivity`` (grid units). The bound
    decreases in s, so this is a bisection on the integers, started from the continuous
    analytic sigma at the same sensitivity."""
    eps, dlt = privacy.check_epsilon_delta(epsilon, delta)
    sens = float(sensitivity)
    target = math.log(dlt) - math.log1p(DELTA_RTOL)

    def ok(s):
        return discrete_gaussian_log_delta_bound(eps, s, sens, dim) <= target

    s0 = privacy.analytic_gaussian_sigma(eps, dlt, sens)
    lo = max(0, math.floor(s0) - 1)  # below the continuous sigma, the bound cannot hold
    hi = max(1, math.ceil(s0))
    while not ok(hi):
        hi = 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


# -- a release's plan -----------------------------------------------------------------------------


def grid_step(sigma_c, sensitivity, dim):
    """gamma = 2^(floor(log2 min(sigma_c, Delta / sqrt(D))) - GRID_BITS), a power of two (exact
    in float64): small against the noise and against the sensitivity."""
    base = min(float(sigma_c), float(sensitivity) / math.sqrt(dim))
    m, e = math.frexp(base)  # base = m 2^e, m in [0.5, 1)
    gamma = math.ldexp(1.0, e - 1 - GRID_BITS)
    if not gamma >= 2.0**-900:
        raise BayesdpInputError(
            f"bounds, epsilon: the noise scale {sigma_c:.3g} or the sensitivity "
            f"{float(sensitivity):.3g} is too small for the secure grid (below 2^-880); rescale "
            "the data to larger bounds")
    return gamma


def released_dim(d, intercept=False, with_yty=False):
    """D, the number of released coordinates: vech(S) and z of the d(+1) design columns, and
    y^T y if released."""
    p = int(d) + int(bool(intercept))
    return p * (p + 1) // 2 + p + int(bool(with_yty))


def plan(epsilon, delta, sensitivity, dim):
    """Grid, sensitivity and noise of a secure release: a dict with ``grid`` (gamma),
    ``sensitivity`` (Delta_grid, real units), ``scale`` (s, whole grid steps) and ``sigma``
    (gamma s), for a release of D = ``dim`` coordinates whose real statistics have L2
    sensitivity ``sensitivity`` (Delta)."""
    eps, dlt = privacy.check_epsilon_delta(epsilon, delta)
    sigma_c = privacy.analytic_gaussian_sigma(eps, dlt, sensitivity)
    gamma = grid_step(sigma_c, sensitivity, dim)
    sens = float(sensitivity) * (1.0 + FLOAT_SLACK) + gamma * math.sqrt(dim)
    s = discrete_gaussian_scale(eps, dlt, sens / gamma, dim)
    return {"grid": gamma, "sensitivity": sens, "scale": s, "sigma": gamma * s, "dim": int(dim)}


def grid_sums(W, y, grid, block=4096):
    """sum over rows of round(c / grid) for c = [vech(w w^T), w y, y^2] (one row w of W and its
    y), as Python integers (exact: c / grid is exact for a power of two, and the sum is in
    integers). Returns an object array of length p(p+1)/2 + p + 1."""
    W = np.asarray(W, dtype=float)
    y = np.asarray(y, dtype=float)
    p = W.shape[1]
    iu = np.triu_indices(p)
    total = np.zeros(len(iu[0]) + p + 1, dtype=object)
    for lo in range(0, W.shape[0], block):
        Wb, yb = W[lo:lo + block], y[lo:lo + block]
        C = np.column_stack([Wb[:, iu[0]] * Wb[:, iu[1]], Wb * yb[:, None], yb * yb])
        K = np.rint(C / grid)
        if K.size and float(np.max(np.abs(K))) * len(K) < 2.0**62:
            total = total + K.astype(np.int64).sum(axis=0).astype(object)
        else:  # huge values (eps far above 50): exact integer sums in Python
            total = total + np.array([sum(int(v) for v in col) for col in K.T], dtype=object)
    return total


def secret_permutation(n):
    """A uniformly random permutation of 0..n-1 (Fisher-Yates) from ``secrets``: the random
    groups of ``average_rows`` in secure mode."""
    perm = list(range(int(n)))
    for i in range(len(perm) - 1, 0, -1):
        j = _randbelow(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return np.array(perm, dtype=np.int64)


def noisy_grid_values(K, scale, grid):
    """gamma (K + Y), Y_i iid N_Z(0, s^2) from :func:`discrete_gaussian`, as float64 (exact
    while |K + Y| < 2^53; beyond, float() rounds the exact value, a deterministic function of
    the private output)."""
    Y = discrete_gaussian(scale * scale, len(K))
    return np.array([float(int(k) + y) for k, y in zip(K, Y)], dtype=float) * grid


# -- the privacy cost -----------------------------------------------------------------------------


def statistics_part(epsilon, delta, *, sigma, sensitivity, grid, dim):
    """The privacy-cost part of a secure release's statistics (one mechanism run on the holder's
    rows), a JSON-able dict: (eps, delta) guaranteed by the bound above, rho = Delta_grid^2 /
    (2 sigma^2) (zCDP, exact for the discrete Gaussian), the sensitivity and sigma in real units,
    and ``dp_event`` for ``dp_accounting``: a Gaussian with noise multiplier s' / D_g,
    s' = sqrt(s^2 - tau^2), which dominates the discrete mechanism up to the factors e^xi and M^D
    (``"dominance"``; both 1 + O(1e-15) at bayesdp's grid), tau the width that gives the bound.
    """
    eps, dlt = privacy.check_epsilon_delta(epsilon, delta)
    s = float(sigma) / float(grid)
    sens_g = float(sensitivity) / float(grid)
    taus = [t for t in TAUS if t < s]
    tau = min(taus, key=lambda t: discrete_gaussian_log_delta_bound(eps, s, sens_g, dim, t))
    log_M, log_m = _theta_log_bounds(tau)
    return {
        "name": "statistics",
        "mechanism": MECHANISM,
        "epsilon": eps,
        "delta": dlt,
        "delta_bound": discrete_gaussian_delta_bound(eps, s, sens_g, dim),
        "rho": float(sensitivity) ** 2 / (2.0 * float(sigma) ** 2),
        "sensitivity": float(sensitivity),
        "sigma": float(sigma),
        "grid": float(grid),
        "dim": int(dim),
        "dp_event": {"type": "GaussianDpEvent",
                     "noise_multiplier": math.sqrt(s * s - tau * tau) / sens_g},
        "dominance": {"tau": tau, "xi": dim * (log_M - log_m), "log_delta_factor": dim * log_M},
    }


def release_part(rel):
    """:func:`statistics_part` of a secure :class:`~bayesdp.release.Release`."""
    if rel.noise_mechanism != MECHANISM:
        raise BayesdpInputError(
            f"noise_mechanism: the release's noise is {rel.noise_mechanism!r}, not {MECHANISM!r}")
    return statistics_part(rel.epsilon, rel.delta, sigma=float(rel.sigma_s[0]),
                           sensitivity=rel.sensitivity, grid=rel.noise_grid,
                           dim=released_dim(rel.d, with_yty=rel.yty_hat is not None))
