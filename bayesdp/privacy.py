"""Privacy calibration, sensitivities and clipping to public bounds.

The paper (Alparslan, Yildirim & Birbil 2023, section 3.1) releases

    S_hat = X^T X + sigma_s M,   z_hat = X^T y + sigma_z v                        (eqs. 2-3)

with sigma_s = sigma_z = Delta_sz * sigma(eps, delta), where sigma(., .) is the analytic Gaussian
mechanism of Balle & Wang (2018, Algorithm 1) at unit sensitivity and

    Delta_sz = sqrt(B_x^4 + B_x^2 B_y^2),   B_x = max ||x||_2,  B_y = max |y|.

``Delta_sz`` is the L2 change of the upper triangle (incl. diagonal) of S together with z when one
row with ||x|| <= B_x and |y| <= B_y is added or removed: ||vech(x x^T)||^2 <= ||x x^T||_F^2 = ||x||^4
and ||x y||^2 <= B_x^2 B_y^2. It is an add/remove-one bound (the paper states replace-one
neighbours, for which the bound would double); bayesdp keeps the paper's bound and says so in
each release's metadata.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import optimize, special

from .errors import BayesdpInputError

CALIBRATIONS = ("exact", "classical", "paper-code")

NEIGHBOURING = (
    "add/remove one row (the paper's Delta_sz; a replace-one neighbour would need twice the "
    "sensitivity)"
)

PAPER_CODE_WARNING = (
    "calibration='paper-code' reproduces the authors' MATLAB analytic_Gaussian_mech.m, which has "
    "an operator-precedence bug (Phi(-sqrt(eps)*u) for Phi(-sqrt(eps*u))). Its sigma is 1.1x-6x "
    "too small and the release does NOT satisfy the stated (eps, delta)-DP. Use it only to "
    "reproduce the paper's tables."
)


def check_epsilon_delta(epsilon, delta, *, name_eps="epsilon", name_delta="delta"):
    """Validate (eps, delta); return them as floats."""
    try:
        eps = float(epsilon)
        dlt = float(delta)
    except (TypeError, ValueError):
        raise BayesdpInputError(
            f"{name_eps} and {name_delta} must be numbers, got {epsilon!r} and {delta!r}"
        ) from None
    if not math.isfinite(eps) or eps <= 0:
        raise BayesdpInputError(f"{name_eps} must be a finite number > 0, got {epsilon!r}")
    if not math.isfinite(dlt) or not 0 < dlt < 1:
        raise BayesdpInputError(f"{name_delta} must lie in the open interval (0, 1), got {delta!r}")
    return eps, dlt


def _check_sensitivity(sensitivity):
    s = float(sensitivity)
    if not math.isfinite(s) or s <= 0:
        raise BayesdpInputError(f"sensitivity must be a finite number > 0, got {sensitivity!r}")
    return s


def gaussian_log_delta(sigma, epsilon):
    """log delta(eps) of the Gaussian mechanism with unit sensitivity and noise std ``sigma``.

    The exact privacy profile (Balle & Wang 2018, Theorem 8):

        delta(eps) = Phi(1/(2 sigma) - eps sigma) - e^eps Phi(-1/(2 sigma) - eps sigma),

    evaluated in the log domain so that e^eps never overflows.
    """
    sigma = float(sigma)
    a = 1.0 / (2.0 * sigma) - epsilon * sigma
    b = -1.0 / (2.0 * sigma) - epsilon * sigma
    log_pa = special.log_ndtr(a)
    x = epsilon + special.log_ndtr(b) - log_pa  # log of e^eps Phi(b) / Phi(a), always < 0
    if x >= 0:  # rounding at a delta far below machine precision
        return -np.inf
    return log_pa + np.log(-np.expm1(x))


MAX_EPSILON_EXACT = 1e100
"""Largest epsilon of the exact calibration: near 1e153 the terms of the privacy profile overflow
float64 (the root finder then saw NaN); well below, sigma(eps) = 1/sqrt(2 eps) to 9 digits."""


def analytic_gaussian_sigma(epsilon, delta, sensitivity=1.0):
    """Noise std of the analytic Gaussian mechanism (Balle & Wang 2018, Algorithm 1).

    The smallest sigma with  Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D)
    <= delta, where D is the L2 sensitivity. The profile is monotone in sigma, so this is a root
    find on log sigma of the log-domain profile; accurate for eps in [1e-3, 50] and delta down to
    1e-15. Reference values at unit sensitivity: sigma(1, 1e-5) = 3.73063,
    sigma(0.1, 1e-5) = 30.7496, sigma(10, 1e-5) = 0.49989.
    """
    eps, dlt = check_epsilon_delta(epsilon, delta)
    sens = _check_sensitivity(sensitivity)
    if eps > MAX_EPSILON_EXACT:
        raise BayesdpInputError(
            f"epsilon: the exact calibration works for epsilon <= {MAX_EPSILON_EXACT:g} (its "
            f"privacy profile overflows float64 beyond), got {epsilon!r}")
    target = math.log(dlt)

    def f(log_s):
        return gaussian_log_delta(math.exp(log_s), eps) - target

    lo, hi = -1.0, 1.0
    while f(lo) < 0:  # f decreases in sigma
        lo -= 2.0
    while f(hi) > 0:
        hi += 2.0
    try:
        log_s = optimize.brentq(f, lo, hi, xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500)
    except (ValueError, RuntimeError) as exc:  # pragma: no cover - guarded by the range above
        raise BayesdpInputError(
            f"epsilon, delta: the exact calibration failed for epsilon={eps!r}, delta={dlt!r} "
            f"({exc})") from None
    return sens * math.exp(log_s)


def classical_gaussian_sigma(epsilon, delta, sensitivity=1.0):
    """Classical Gaussian mechanism: sigma = D sqrt(2 ln(1.25/delta)) / eps (Dwork & Roth 2014).

    Its guarantee is proven only for eps < 1; bayesdp computes it for any eps > 0 and it is
    always larger than the analytic sigma wherever the classical proof holds.
    """
    eps, dlt = check_epsilon_delta(epsilon, delta)
    sens = _check_sensitivity(sensitivity)
    return sens * math.sqrt(2.0 * math.log(1.25 / dlt)) / eps


def paper_code_gaussian_sigma(epsilon, delta, sensitivity=1.0):
    """The authors' MATLAB ``analytic_Gaussian_mech.m``, reproduced exactly. NOT DP as stated.

    It grid-searches (step 0.001, in unit windows) B(u) = Phi(-sqrt(eps) u) -
    e^eps Phi(-sqrt(eps (u + 2))), where Balle & Wang have Phi(-sqrt(eps u)), and its threshold
    uses Phi(-2 sqrt(eps)) for Phi(-sqrt(2 eps)). The result is too small by 1.1x-6x and almost
    independent of delta: 1.4869 at (1, 1e-5), 1.4866 at (1, 1/7655) and 5.0435 at (0.1, 1e-5),
    against the exact 3.7306, 3.1185 and 30.750. Offered only so the paper's tables can be
    reproduced; see docs/privacy.md.
    """
    eps, dlt = check_epsilon_delta(epsilon, delta)
    sens = _check_sensitivity(sensitivity)
    if eps > 700.0:  # e^eps overflows float64 in the authors' formula (MATLAB gives Inf/NaN)
        raise BayesdpInputError(
            f"epsilon: calibration='paper-code' works for epsilon <= 700 (the authors' formula "
            f"overflows beyond), got {eps}; use calibration='exact'")
    ncdf = special.ndtr
    delta_0 = ncdf(0.0) - math.exp(eps) * ncdf(-2.0 * math.sqrt(eps))
    grid = np.arange(1001) * 0.001
    start = 0.0
    if dlt >= delta_0:
        while True:
            v = start + grid
            start += 1.0
            B = ncdf(math.sqrt(eps) * v) - math.exp(eps) * ncdf(-np.sqrt(eps * (v + 2.0)))
            if B.max() > dlt and B.min() < dlt:
                break
            if start > 1e6:
                raise BayesdpInputError(
                    f"calibration='paper-code' does not terminate for epsilon={eps}, delta={dlt}"
                )
        v_sol = v[np.sum(B <= dlt) - 1]
        alpha = math.sqrt(1.0 + v_sol / 2.0) - math.sqrt(v_sol / 2.0)
    else:
        while True:
            u = start + grid
            start += 1.0
            B = ncdf(-math.sqrt(eps) * u) - math.exp(eps) * ncdf(-np.sqrt(eps * (u + 2.0)))
            if B.min() < dlt and B.max() > dlt:
                break
            if start > 1e6:
                raise BayesdpInputError(
                    f"calibration='paper-code' does not terminate for epsilon={eps}, delta={dlt}"
                )
        u_sol = u[np.sum(B > dlt)]
        alpha = math.sqrt(1.0 + u_sol / 2.0) + math.sqrt(u_sol / 2.0)
    return sens * alpha / math.sqrt(2.0 * eps)


def gaussian_sigma(epsilon, delta, sensitivity=1.0, calibration="exact"):
    """Noise std for (eps, delta)-DP at L2 ``sensitivity`` under the named calibration.

    ``calibration`` is ``"exact"`` (analytic Gaussian, the default), ``"classical"`` or
    ``"paper-code"`` (the authors' buggy MATLAB calibration; does not meet its guarantee).
    """
    if calibration == "exact":
        return analytic_gaussian_sigma(epsilon, delta, sensitivity)
    if calibration == "classical":
        return classical_gaussian_sigma(epsilon, delta, sensitivity)
    if calibration == "paper-code":
        return paper_code_gaussian_sigma(epsilon, delta, sensitivity)
    raise BayesdpInputError(f"calibration must be one of {CALIBRATIONS}, got {calibration!r}")


def true_epsilon(sigma, delta, sensitivity=1.0):
    """The eps that noise std ``sigma`` really gives at ``delta`` (inverse of the exact profile)."""
    _, dlt = check_epsilon_delta(1.0, delta)
    try:
        s = float(sigma)
    except (TypeError, ValueError):
        s = math.nan
    if not math.isfinite(s) or s <= 0:
        raise BayesdpInputError(f"sigma must be a finite number > 0, got {sigma!r}")
    s /= _check_sensitivity(sensitivity)
    target = math.log(dlt)

    def f(eps):
        return gaussian_log_delta(s, eps) - target

    if f(0.0) <= 0:
        return 0.0
    hi = 1.0
    while f(hi) > 0:
        hi *= 2.0
    return optimize.brentq(f, 0.0, hi, xtol=1e-14)


def check_bounds(bounds):
    """Validate public bounds (B_x, B_y); return floats."""
    try:
        bx, by = (float(b) for b in bounds)
    except (TypeError, ValueError):
        raise BayesdpInputError(
            f"bounds must be a pair (B_x, B_y) of positive numbers or 'data', got {bounds!r}"
        ) from None
    for name, b in (("B_x", bx), ("B_y", by)):
        if not math.isfinite(b) or b <= 0:
            raise BayesdpInputError(f"bounds: {name} must be a finite number > 0, got {b!r}")
    return bx, by


def _scaled_sensitivity(bound_x, bound_y, with_yty):
    """sqrt(B_x^4 + B_x^2 B_y^2 [+ B_y^4]) without overflow or underflow in the powers: with
    m = max(B_x, B_y), it is m^2 sqrt(u^4 + u^2 v^2 [+ v^4]), u = B_x/m, v = B_y/m. A result
    that is itself beyond float64 raises an error naming the bounds."""
    bx, by = float(bound_x), float(bound_y)
    try:  # the direct formula first, so ordinary bounds give exactly the values they always did
        val = math.sqrt(bx**4 + bx**2 * by**2 + (by**4 if with_yty else 0.0))
    except OverflowError:
        val = math.inf
    if val == 0.0 or not math.isfinite(val):
        m = max(abs(bx), abs(by))
        if m == 0.0 or not math.isfinite(m):
            return val if m == 0.0 else math.inf
        u, v = bx / m, by / m
        root = math.sqrt(u**4 + u**2 * v**2 + (v**4 if with_yty else 0.0))
        try:
            val = m * (m * root)
        except OverflowError:  # pragma: no cover - float * float gives inf, not an exception
            val = math.inf
    if not math.isfinite(val):
        raise BayesdpInputError(
            f"bounds: the sensitivity sqrt(B_x^4 + B_x^2 B_y^2{' + B_y^4' if with_yty else ''}) "
            f"overflows float64 for B_x={bx:g}, B_y={by:g}; rescale the data to smaller bounds")
    return val


def sensitivity_sz(bound_x, bound_y):
    """L2 sensitivity of [vech(S), z]: sqrt(B_x^4 + B_x^2 B_y^2) (paper section 3.1)."""
    return _scaled_sensitivity(bound_x, bound_y, False)


def sensitivity_szy(bound_x, bound_y):
    """L2 sensitivity of [vech(S), z, y^T y]: sqrt(B_x^4 + B_x^2 B_y^2 + B_y^4) (appendix C.1)."""
    return _scaled_sensitivity(bound_x, bound_y, True)


def clip_rows(X, y, bound_x, bound_y):
    """Clip rows to the public bounds: x scaled to norm B_x, y clipped to [-B_y, B_y].

    Returns ``(X_clipped, y_clipped, clipped)`` where ``clipped`` is a boolean mask of the rows
    changed in x or y.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    norms = np.sqrt(np.einsum("ij,ij->i", X, X))
    over_x = norms > bound_x
    scale = np.where(over_x, bound_x / np.where(over_x, norms, 1.0), 1.0)
    Xc = X * scale[:, None]
    over_y = np.abs(y) > bound_y
    yc = np.clip(y, -bound_y, bound_y)
    return Xc, yc, over_x | over_y
