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

from .errors import BayesdpInputError

# scipy.special and scipy.optimize are imported inside the functions that use them: slow to
# import, and `import bayesdp` imports this module

CALIBRATIONS = ("exact", "classical", "paper-code")

#: What each kind of release protects (``privacy.neighbouring`` in the file) and what it
#: releases without noise (``privacy.public``), by how rows were assigned to holders
#: (``provenance.split``; docs/privacy.md sections 3-3a and 8, checked by
#: tests/releases/test_release.py).
NEIGHBOURING = {
    "random": (
        "add/remove one row: each row's holder was drawn uniformly at random, independently of "
        "its values and of the other rows, so adding or removing a row changes one holder's "
        "statistics by at most the sensitivity. Replace-one (n fixed): the whole release, "
        "counts included, with twice the sensitivity (eps' of docs/privacy.md section 3)"),
    "labels": (
        "add/remove one row within a holder: each row's holder is its own label (an "
        "organisation), so adding or removing a row changes that holder's statistics by at most "
        "the sensitivity. Replace-one (a row replaced by another at the same holder, counts "
        "fixed): twice the sensitivity (eps' of docs/privacy.md section 3)"),
    "contiguous": (
        "none at the stated (eps, delta): the authors' split in row order moves other rows "
        "between holders when a row is added or removed (dp_claim_note gives the true eps); "
        "replace-one with row order and n fixed: twice the sensitivity"),
    "hash": (
        "none for the counts: made by a former bayesdp whose split='hash' assigned rows by a "
        "public hash of their values, so the exact counts n_j reveal hash(row) mod J of every "
        "row; the noisy statistics alone are add/remove-one private"),
    "unknown": (
        "add/remove one row of one holder's statistics (how rows were assigned to holders is "
        "not recorded: a combined release or a network adapter's output)"),
}

#: Released without noise: public by these assumptions (``privacy.public`` in the file).
PUBLIC = {
    "random": ("n: each holder's row count; given the total n it is Multinomial(n, 1/J), a "
               "function of the split's random draw only, so it reveals n and nothing about "
               "any row. The total n is public (as in the paper)"),
    "labels": ("n: each holder's row count, public by assumption (the holders are "
               "organisations whose sizes are known, as in the paper); the holders' names"),
    "contiguous": "n: each holder's row count, a function of the total n (public)",
    "hash": "n: each holder's row count (NOT protected: it reveals hash(row) mod J)",
    "unknown": "n: each holder's row count, public by assumption (as in the paper)",
}
PUBLIC_ALWAYS = ("; the bounds, feature names, n_rows (rows before averaging) and design are "
                 "public inputs; n_clipped, when a holder chooses to include it, is NOT "
                 "protected (it tells whether a row was clipped)")
#: added to ``privacy.public`` for a release made from a table with a formula (docs/tables.md)
PUBLIC_TABLE = ("; the formula, its encoding (terms, levels, reference levels, transforms) and "
                "the declared range or levels of each column it uses are public inputs, "
                "declared by the holder without looking at the data (the bounds follow from "
                "them); n_clamped, when a holder chooses to include it, is NOT protected (it "
                "tells whether a value was outside its declared range)")


def split_kind(provenance):
    """The kind of split a release's ``provenance.split`` records (a key of NEIGHBOURING);
    files written before it was recorded as a kind say it in words."""
    text = str((provenance or {}).get("split", ""))
    if text in NEIGHBOURING:
        return text
    for words, kind in (("hash of", "hash"), ("contiguous in", "contiguous"),
                        ("one holder label", "labels")):
        if text.startswith(words):
            return kind
    return "unknown"


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
    from scipy import special

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
    from scipy import optimize

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


def classical_shortfall(epsilon, delta):
    """Why the classical sigma does not give (epsilon, delta)-DP, or "" when it does.

    The classical proof covers eps < 1 only. Above, the exact privacy profile of the classical
    sigma decides: it still meets the stated eps up to eps ~ 8.4 at delta = 1e-5, and not beyond
    (true eps 10.4 at a stated 10, 25.4 at 20, 96.4 at 50). The check is on the unit-sensitivity
    sigma (the true eps does not depend on the sensitivity once sigma scales with it).
    """
    eps, dlt = check_epsilon_delta(epsilon, delta)
    true_eps = true_epsilon(classical_gaussian_sigma(eps, dlt), dlt)
    if true_eps <= eps * (1 + 1e-9):
        return ""
    return (f"calibration='classical' is proven only for eps < 1; at the stated eps={eps:g} its "
            f"sigma gives only ({true_eps:.4g}, {dlt:g})-DP (exact Gaussian privacy profile), so "
            f"the stated (eps, delta) is NOT met; use calibration='exact'")


def paper_code_gaussian_sigma(epsilon, delta, sensitivity=1.0):
    """The authors' MATLAB ``analytic_Gaussian_mech.m``, reproduced exactly. NOT DP as stated.

    It grid-searches (step 0.001, in unit windows) B(u) = Phi(-sqrt(eps) u) -
    e^eps Phi(-sqrt(eps (u + 2))), where Balle & Wang have Phi(-sqrt(eps u)), and its threshold
    uses Phi(-2 sqrt(eps)) for Phi(-sqrt(2 eps)). The result is too small by 1.1x-6x and almost
    independent of delta: 1.4869 at (1, 1e-5), 1.4866 at (1, 1/7655) and 5.0435 at (0.1, 1e-5),
    against the exact 3.7306, 3.1185 and 30.750. Offered only so the paper's tables can be
    reproduced; see docs/privacy.md.
    """
    from scipy import special

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
    from scipy import optimize

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


def row_norms(X):
    """Euclidean norm of each row, and each row divided by it (zero rows stay zero), computed
    without overflow or underflow: rows are first scaled by their largest absolute entry.

    The norm is inf only when it really exceeds the largest float (entries ~1e308); the unit
    rows are finite whenever X is.
    """
    X = np.asarray(X, dtype=float)
    m = np.max(np.abs(X), axis=1, initial=0.0)
    safe = np.where(m > 0, m, 1.0)
    Xs = X / safe[:, None]  # entries in [-1, 1]
    r = np.sqrt(np.einsum("ij,ij->i", Xs, Xs))  # in [1, sqrt(d)] for non-zero rows
    with np.errstate(over="ignore"):
        norms = m * r
    unit = Xs / np.where(r > 0, r, 1.0)[:, None]
    return norms, unit


def clip_rows(X, y, bound_x, bound_y):
    """Clip rows to the public bounds: x scaled to norm B_x, y clipped to [-B_y, B_y].

    Returns ``(X_clipped, y_clipped, clipped)`` where ``clipped`` is a boolean mask of the rows
    changed in x or y.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    norms, unit = row_norms(X)
    over_x = norms > bound_x
    # scale the direction (bounded entries) rather than X itself: exact and overflow-free even
    # when ||x|| overflows (entries ~1e200 or more), where bound_x / inf would zero the row
    Xc = np.where(over_x[:, None], unit * bound_x, X)
    over_y = np.abs(y) > bound_y
    yc = np.clip(y, -bound_y, bound_y)
    return Xc, yc, over_x | over_y


def contiguous_split_change(n_rows, J):
    """Worst-case change of the whole release, in units of the per-row sensitivity Delta, when one
    row is added to or removed from ``n_rows`` rows split contiguously over J holders.

    The contiguous split (the authors'; :func:`bayesdp.releases.contiguous_split`) gives holder k
    the rows k*s .. k*s + s - 1, s = floor(n/J), the remainder to the last holder. Removing row i
    shifts every later row down one place, and when floor((n-1)/J) < floor(n/J) every boundary
    moves as well, so rows of *other* people change holder. If c_k rows enter or leave holder k,
    the L2 change of [vech(S_k), z_k] is at most c_k Delta (triangle inequality), and of the whole
    release (all holders) at most Delta sqrt(sum_k c_k^2). This returns the maximum of
    sqrt(sum_k c_k^2) over the removed row and over both neighbours of an ``n_rows``-row data set
    (one row fewer, one row more); neighbours with fewer rows than holders cannot be released and
    are left out. It is 1 for J = 1, sqrt(4J - 3) when J divides neither n nor n + 1, and larger
    when a boundary moves (n = 20, J = 10: 13.2; n = 10^5, J = 10: 32.7). Exact for the counts;
    O(n J) time, O(J) memory per block of rows.
    """
    n = int(n_rows)
    J = int(J)
    if J < 1 or n < J:
        raise BayesdpInputError(f"contiguous split needs n_rows >= J >= 1, got n={n_rows}, J={J}")
    if J == 1:
        return 1.0
    worst = _contiguous_removal_sq(n + 1, J)
    if n - 1 >= J:
        worst = max(worst, _contiguous_removal_sq(n, J))
    return math.sqrt(worst)


def _contiguous_removal_sq(m, J, block=1 << 15):
    """max_i sum_k c_k(i)^2 when row i is removed from m rows (m - 1 >= J) split contiguously."""
    s, t = m // J, (m - 1) // J
    eye = np.eye(J, dtype=np.int64)

    def touches(lo, hi):
        r = np.arange(lo, hi)
        old = np.minimum(r // s, J - 1)
        new_a = np.minimum(r // t, J - 1)  # a row before the removed one keeps its index
        new_b = np.minimum(np.maximum(r - 1, 0) // t, J - 1)  # a row after it moves up one
        ta = (eye[old] + eye[new_a]) * (old != new_a)[:, None]
        tb = (eye[old] + eye[new_b]) * ((old != new_b) & (r > 0))[:, None]
        return eye[old], ta, tb

    blocks = [(lo, min(lo + block, m)) for lo in range(0, m, block)]
    tot_b = np.zeros(J, dtype=np.int64)
    for lo, hi in blocks:
        tot_b += touches(lo, hi)[2].sum(axis=0)
    best = 0
    pre_a = np.zeros(J, dtype=np.int64)
    pre_b = np.zeros(J, dtype=np.int64)
    for lo, hi in blocks:
        own, ta, tb = touches(lo, hi)
        c = pre_a + np.cumsum(ta, axis=0) - ta + (tot_b - pre_b - np.cumsum(tb, axis=0)) + own
        best = max(best, int((c * c).sum(axis=1).max()))
        pre_a += ta.sum(axis=0)
        pre_b += tb.sum(axis=0)
    return best


def _row_norm_bounds(bound_x, bound_y, *, intercept=False):
    """(R, V): R bounds the norm of a released feature row and V^2 bounds ||vech(x x^T)||^2.

    Without an intercept the row is x, ||x|| <= B_x: R = B_x, V^2 = B_x^4. With an intercept
    (appendix B.2) the row is [1, x]: R^2 = 1 + B_x^2, and ||vech(w w^T)||^2 =
    (||w||^4 + sum_i w_i^4) / 2 is largest at x = B_x e_1, giving V^2 = 1 + B_x^2 + B_x^4
    (less than R^4 = (1 + B_x^2)^2, because the ones and x never sit in one coordinate).
    """
    bx = float(bound_x)
    if intercept:
        return math.sqrt(1.0 + bx * bx), math.sqrt(1.0 + bx * bx + bx**4)
    return bx, bx * bx


def sensitivity_release(bound_x, bound_y, *, intercept=False, average_rows=1, with_yty=False):
    """L2 add/remove-one sensitivity of the released vector [vech(S), z (, y^T y)] of a holder.

    Plain rows (``intercept=False, average_rows=1``): :func:`sensitivity_sz` /
    :func:`sensitivity_szy`, the paper's Delta.

    ``intercept=True`` (appendix B.2): the rows are [1, x], so one row changes
    [vech(S_0), z_0] by [vech(w w^T), w y], w = [1, x], of squared norm at most

        Delta_1^2 = 1 + B_x^2 + B_x^4 + (1 + B_x^2) B_y^2   (+ B_y^4 with y^T y)

    (attained at x = B_x e_1, y = B_y). The [0, 0] entry (n) is in the noisy vector too, so
    the noisy statistics are private on their own, whether or not n is treated as public.

    ``average_rows=k >= 2`` (appendix B.1): the holder's rows go into a uniformly random
    partition (secret randomness) into groups of exactly k, the n mod k rows left over are
    dropped, and each group releases a = sum(w_i) / sqrt(k), b = sum(y_i) / sqrt(k). With
    R and V from :func:`_row_norm_bounds` and Delta_row the per-row sensitivity above, a
    neighbour is reached, under a coupling of the two random partitions, in one of two ways
    (docs/privacy.md section 3b):

    - a group appears or disappears: its [vech(a a^T), a b] has norm at most k Delta_row
      (a / sqrt(k) is a mean of rows and ||vech(w w^T)||^2 is convex in w);
    - one row of one group is swapped for a row that was left over: with
      ||a + a'|| <= 2 sqrt(k) R, ||a - a'|| <= 2 B_x / sqrt(k) and the same for b,
      the change is at most Delta_swap = 2 sqrt(4 R^2 B_x^2 + (R + B_x)^2 B_y^2 (+ 4 B_y^4)).

    So the sensitivity is max(k Delta_row, Delta_swap): k Delta for plain rows and k >= 4
    (attained by k equal rows on the bound), 4 Delta for k = 2, 3 (the numerical worst swap
    there is 4 (k - 1) / k Delta, so this is conservative). The paper says the averaged
    statistics have the *same* sensitivity as the original ones; that is not true.
    """
    k = int(average_rows)
    if k < 1:
        raise BayesdpInputError(f"average_rows must be a whole number >= 1, got {average_rows!r}")
    if not intercept and k == 1:
        return sensitivity_szy(bound_x, bound_y) if with_yty else sensitivity_sz(bound_x, bound_y)
    bx, by = check_bounds((bound_x, bound_y))
    try:
        R, V = _row_norm_bounds(bx, by, intercept=intercept)
        yty = by**4 if with_yty else 0.0
        row = math.sqrt(V * V + R * R * by * by + yty)
        swap = 2.0 * math.sqrt(4 * R * R * bx * bx + (R + bx) ** 2 * by * by + 4 * yty)
        val = max(k * row, swap) if k > 1 else row
    except OverflowError:
        val = math.inf
    if not math.isfinite(val):
        raise BayesdpInputError(
            f"bounds: the sensitivity overflows float64 for B_x={bx:g}, B_y={by:g}; rescale the "
            "data to smaller bounds")
    return val


# -- private bounds (docs/privacy.md section 11) --------------------------------------------------

PRIVATE_BOUNDS_SHARE = 0.1
"""Default share of the release's epsilon spent on estimating (B_x, B_y) (``bounds="private"``)."""

PRIVATE_BOUNDS_RANGE = (1e-6, 1e9)
"""Default public range of the candidate bounds: a value above its top is clipped to at most it."""

_PRIVATE_BOUNDS_PER_DECADE = 20
"""Candidates per factor of 10 (ratio 10^(1/20) = 1.122 between neighbours): 301 on the default
range."""

PRIVATE_BOUNDS_BETA = 1e-3
"""Failure probability of the bounds estimate: it clips more than 2m rows, or lands above every
row, with probability at most about this (per bound)."""

PRIVATE_BOUNDS_MIN_FACTOR = 4
"""A private bounds estimate needs at least this many times the target rank m rows."""


def check_bounds_share(share):
    """Validate the share of epsilon spent on private bounds: a number in (0, 1), ends excluded."""
    try:
        s = math.nan if isinstance(share, (bool, str)) else float(share)
    except (TypeError, ValueError):
        s = math.nan
    if not 0.0 < s < 1.0:
        raise BayesdpInputError(
            f"bounds_share must be a number in the open interval (0, 1) (the share of epsilon "
            f"spent on estimating the bounds), got {share!r}")
    return s


def check_bounds_range(bounds_range):
    """Validate the public range (low, high) of candidate bounds: 0 < low < high, finite, and at
    most 100 factors of 10 apart."""
    try:
        lo, hi = (math.nan if isinstance(b, (bool, str)) else float(b) for b in bounds_range)
    except (TypeError, ValueError):
        raise BayesdpInputError(
            f"bounds_range must be a pair (low, high) of numbers, got {bounds_range!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0.0 < lo < hi):
        raise BayesdpInputError(
            f"bounds_range must satisfy 0 < low < high (finite), got {bounds_range!r}")
    if hi / lo > 1e100:
        raise BayesdpInputError(
            f"bounds_range spans more than 100 factors of 10, got {bounds_range!r}")
    return lo, hi


def bounds_grid(bounds_range=PRIVATE_BOUNDS_RANGE, per_decade=_PRIVATE_BOUNDS_PER_DECADE):
    """The public candidates b_0 < ... < b_{K-1}: a geometric grid from low to high with
    ``per_decade`` points per factor of 10 (K = 301 on the default range 1e-6..1e9)."""
    lo, hi = check_bounds_range(bounds_range)
    K = int(round(per_decade * math.log10(hi / lo))) + 1
    return np.geomspace(lo, hi, max(K, 2))


def bounds_target_rank(epsilon, n_candidates, beta=PRIVATE_BOUNDS_BETA):
    """The target rank m = ceil(2 ln(K / beta) / eps) of an eps-DP exponential mechanism over K
    candidates with utility sensitivity 1 (:func:`top_rank_utility`).

    The best candidate has utility 0 and weight exp(0) = 1; a candidate with utility <= -m has
    weight at most exp(-eps m / 2) <= beta / K. So all candidates with utility <= -m together
    have probability at most beta (the argument of McSherry & Talwar 2007; Dwork & Roth 2014,
    Theorem 3.11).
    """
    return int(math.ceil(2.0 * math.log(n_candidates / beta) / epsilon))


def exponential_mechanism_log_probabilities(utility, epsilon, sensitivity=1.0):
    """log P(k) of the exponential mechanism, P(k) proportional to exp(eps u_k / (2 Delta_u)):
    eps-DP when every u_k changes by at most Delta_u between neighbouring data sets
    (McSherry & Talwar 2007)."""
    from scipy import special

    a = float(epsilon) * np.asarray(utility, dtype=float) / (2.0 * float(sensitivity))
    return a - special.logsumexp(a)


class BoundsHistogram:
    """Counts of ||x_i|| and |y_i| in the cells of a public grid of candidate bounds, fed chunk by
    chunk (memory O(K), whatever the number of rows).

    Cell j holds the values v with b_{j-1} < v <= b_j (cell 0: v <= b_0; cell K: v > b_{K-1}),
    so the number of values above candidate b_k is the sum of the cells k+1..K.
    """

    def __init__(self, grid):
        self.grid = np.asarray(grid, dtype=float)
        K = len(self.grid)
        self.hist_x = np.zeros(K + 1, dtype=np.int64)
        self.hist_y = np.zeros(K + 1, dtype=np.int64)
        self.n = 0

    def add(self, X, y):
        norms = row_norms(X)[0]
        for h, v in ((self.hist_x, norms), (self.hist_y, np.abs(np.asarray(y, dtype=float)))):
            h += np.bincount(np.searchsorted(self.grid, v, side="left"), minlength=len(h))
        self.n += len(norms)

    def counts_above(self, which):
        """c_k = #{i : v_i > b_k} for every candidate k; ``which``: "x" (||x_i||) or "y" (|y_i|)."""
        h = self.hist_x if which == "x" else self.hist_y
        return np.cumsum(h[::-1])[::-1][1:]


def top_rank_utility(counts_above, n, m):
    """u(b_k) = -max(0, c_k - (m - 1), m - c_{k-1}), c_k the number of values above b_k,
    c_{-1} = n and c_{K-1} = 0: the cell of candidate k is (b_{k-1}, b_k], that of the top
    candidate (b_{K-2}, inf) (values above the range are clipped to b_{K-1}). u is 0 exactly at
    the candidate whose cell holds the m-th largest value (fewer than m values above b_k, at
    least m above b_{k-1}) and falls by one per row of rank error on either side. Adding or
    removing one row changes n and every c_k by at most 1, so Delta_u = 1."""
    c = np.array(counts_above, dtype=float)
    prev = np.concatenate([[float(n)], c[:-1]])
    c[-1] = 0.0
    return -np.maximum(0.0, np.maximum(c - (m - 1), m - prev))


def _sample_index(log_p, rng):
    """One draw of k with probability exp(log_p[k]) (inverse CDF of one uniform)."""
    cdf = np.cumsum(np.exp(log_p))
    return int(min(np.searchsorted(cdf, rng.random() * cdf[-1], side="right"), len(cdf) - 1))


def estimate_bounds(hist, epsilon, rng, *, beta=PRIVATE_BOUNDS_BETA):
    """DP estimates of B_x and B_y from a :class:`BoundsHistogram`; eps-DP in total.

    Each bound is one exponential mechanism with eps/2 over the public grid b_0..b_{K-1} with
    the utility :func:`top_rank_utility` of the values v_i = ||x_i|| or |y_i| and m =
    :func:`bounds_target_rank` (eps/2, K, beta): it aims at the upper edge of the cell of the
    m-th largest value, which clips fewer than m rows. Every candidate beyond the cell of the
    largest value has utility -m and every candidate that clips 2m rows or more at most
    -(m + 1), so these failures together have probability at most K exp(-eps m / 4) <= beta.
    Two eps/2-DP mechanisms compose to eps-DP (Dwork & Roth 2014, Theorem 3.16); each is also
    (eps/2)^2/8-zCDP (Cesar & Rogers 2021), eps^2/16 together.

    Needs n >= PRIVATE_BOUNDS_MIN_FACTOR * m rows (docs/privacy.md section 11): with fewer, the
    estimate may clip most rows. Returns ``((B_x, B_y), part)``, ``part`` the "bounds" entry of
    the release's privacy cost.
    """
    eps = float(epsilon)
    K = len(hist.grid)
    m = bounds_target_rank(eps / 2.0, K, beta)
    need = PRIVATE_BOUNDS_MIN_FACTOR * m
    if hist.n < need:
        raise BayesdpInputError(
            f"bounds: bounds='private' needs at least {need} rows at this budget (it aims at the "
            f"{m}-th largest ||x|| and |y|, m = ceil(2 ln(K / beta) / eps_each) with "
            f"eps_each = {eps / 2:.4g}, and needs {PRIVATE_BOUNDS_MIN_FACTOR} m rows so that "
            f"it clips at most half of them), got {hist.n}; use a larger bounds_share or "
            f"epsilon, or public bounds")
    out = []
    for which in ("x", "y"):
        log_p = exponential_mechanism_log_probabilities(
            top_rank_utility(hist.counts_above(which), hist.n, m), eps / 2.0)
        out.append(float(hist.grid[_sample_index(log_p, rng)]))
    em = {"type": "EpsilonDeltaDpEvent", "epsilon": eps / 2.0, "delta": 0.0}
    part = {
        "name": "bounds",
        "mechanism": "exponential",
        "epsilon": eps,
        "delta": 0.0,
        "rho": eps * eps / 16.0,
        "sensitivity": 1.0,
        "sigma": None,
        "dp_event": {"type": "ComposedDpEvent", "events": [em, dict(em)]},
        "bounds": {"x": out[0], "y": out[1]},
        "target_rank": m,
        "candidates": {"low": float(hist.grid[0]), "high": float(hist.grid[-1]), "count": K},
        "beta": float(beta),
    }
    return (out[0], out[1]), part
