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
Delta the sensitivity of the real statistics and r = _FLOAT_SLACK a relative slack for the
float rounding of the clipped row and its products (a few units of 2^-53 per coordinate). Two
neighbouring data sets differ by one contribution (add/remove), or one changed contribution
(the swap of averaged rows, docs/privacy.md 3b); each rounded coordinate moves by at most gamma
more than its exact value does, so with D released coordinates

    Delta_grid = Delta (1 + r) + gamma sqrt(D).

Privacy (Canonne, Kamath & Steinke 2020, "CKS"; in grid units s = sigma / gamma and
D_g = Delta_grid / gamma, both measured in grid steps).

- zCDP. Adding independent N_Z(0, s^2) to each of the D integer coordinates of a query whose
  L2 sensitivity is D_g is rho-zCDP with rho = D_g^2 / (2 s^2) (CKS 2020, Theorem 14, the
  multivariate discrete Gaussian; for one coordinate their Theorem 4). This is the same rho as
  the continuous Gaussian's at sigma.
- (eps, delta). rho-zCDP implies (eps, delta)-DP with delta =
  inf_{alpha > 1} exp((alpha - 1)(alpha rho - eps)) / alpha (1 - 1/alpha)^(alpha - 1)
  (CKS 2020, Proposition 12 and Corollary 13; :func:`bayesdp.accounting.zcdp_delta`).
  The scale s is the smallest whole number for which that delta is at most the target
  (:func:`discrete_gaussian_scale`). Knowing rho only costs noise: sigma is 1.084 times the
  continuous analytic sigma at (1, 1e-5), 1.045 to 1.105 over eps = 0.1 to 20
  (docs/privacy.md section 10).

For a scalar query with integer sensitivity CKS 2020, Theorem 7, gives the exact delta
(:func:`discrete_gaussian_delta`); the tests use it as an independent check of the calibration.
"""

from __future__ import annotations

import math
import secrets
from fractions import Fraction

import numpy as np

from . import accounting, privacy
from .errors import BayesdpInputError

_GRID_BITS = 20
"""The grid step is gamma = 2^(floor(log2 min(sigma_c, Delta / sqrt(D))) - _GRID_BITS), sigma_c
the continuous analytic sigma of the same release: the noise scale s = sigma / gamma is at least
2^20 grid steps, and the rounding adds gamma sqrt(D) <= 2^-20 Delta to the sensitivity."""

_FLOAT_SLACK = 1e-9
"""Relative slack on Delta for the float rounding of a clipped row's contribution (clipping, the
products w_i w_j and w y, averaging: at most about (d + k + 10) 2^-53 relative, d features and k
rows per group). Generous by far for any d and k bayesdp can hold in memory."""

_DELTA_RTOL = 1e-9
"""Calibration requires zcdp_delta(rho, eps) (1 + _DELTA_RTOL) <= delta: covers the float
evaluation of the conversion."""

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
    from scipy import special  # here, not on import (scipy.special is slow to import)

    k = _support(scale)
    logw = -(k.astype(float) ** 2) / (2.0 * float(scale) ** 2)
    return k, np.exp(logw - special.logsumexp(logw))


def discrete_gaussian_delta(epsilon, scale, sensitivity):
    """Exact delta(eps) of a *scalar* integer query with integer sensitivity D plus N_Z(0, s^2)
    (CKS 2020, Theorem 7): P[Y > eps s^2/D - D/2] - e^eps P[Y > eps s^2/D + D/2], by summation.

    Releases are calibrated by zCDP instead (:func:`discrete_gaussian_scale`); this is the
    independent check of that calibration in one dimension.
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


def discrete_gaussian_scale(epsilon, delta, sensitivity):
    """The smallest whole scale s (grid units) whose discrete Gaussian noise meets (eps, delta)
    by zCDP, at L2 sensitivity ``sensitivity`` (grid units) for any number of coordinates:

        zcdp_delta(rho, eps) (1 + _DELTA_RTOL) <= delta,    rho = sensitivity^2 / (2 s^2)

    (CKS 2020, Theorem 14 and Corollary 13; module docstring). The conversion's delta grows
    with rho, so this is a bisection on the integers. It starts at the continuous analytic
    sigma, below which no valid conversion of rho can meet (eps, delta): rho-zCDP holds for the
    continuous Gaussian too, whose exact delta the analytic sigma just meets.
    """
    eps, dlt = privacy.check_epsilon_delta(epsilon, delta)
    sens = float(sensitivity)
    target = dlt / (1.0 + _DELTA_RTOL)

    def ok(s):
        return s > 0 and accounting.zcdp_delta(sens * sens / (2.0 * s * s), eps) <= target

    s0 = privacy.analytic_gaussian_sigma(eps, dlt, sens)
    lo = max(0, math.floor(s0) - 1)
    hi = max(1, math.ceil(s0))
    while not ok(hi):
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


# -- a release's plan -----------------------------------------------------------------------------


def _grid_step(sigma_c, sensitivity, dim):
    """gamma = 2^(floor(log2 min(sigma_c, Delta / sqrt(D))) - _GRID_BITS), a power of two (exact
    in float64): small against the noise and against the sensitivity."""
    base = min(float(sigma_c), float(sensitivity) / math.sqrt(dim))
    m, e = math.frexp(base)  # base = m 2^e, m in [0.5, 1)
    gamma = math.ldexp(1.0, e - 1 - _GRID_BITS)
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
    gamma = _grid_step(sigma_c, sensitivity, dim)
    sens = float(sensitivity) * (1.0 + _FLOAT_SLACK) + gamma * math.sqrt(dim)
    s = discrete_gaussian_scale(eps, dlt, sens / gamma)
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
    rows), a JSON-able dict: rho = Delta_grid^2 / (2 sigma^2) (zCDP of the multivariate discrete
    Gaussian, CKS 2020, Theorem 14), the (eps, delta) it implies (Corollary 13; eps and delta as
    calibrated), the sensitivity and sigma in real units, and ``dp_event``
    ``{"type": "ZCDpEvent", "rho": rho}``, from which dp_accounting rebuilds exactly this claim.
    """
    eps, dlt = privacy.check_epsilon_delta(epsilon, delta)
    rho = float(sensitivity) ** 2 / (2.0 * float(sigma) ** 2)
    return {
        "name": "statistics",
        "mechanism": MECHANISM,
        "epsilon": eps,
        "delta": dlt,
        "rho": rho,
        "sensitivity": float(sensitivity),
        "sigma": float(sigma),
        "grid": float(grid),
        "dim": int(dim),
        "dp_event": {"type": "ZCDpEvent", "rho": rho},
    }
