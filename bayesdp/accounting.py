"""The privacy cost of a release, and the total cost of several releases of one data holder.

Every release records its cost as a tuple of *parts*, one per mechanism run on the holder's
rows (``Release.privacy_cost``; in the file ``privacy.cost.parts``). A part is a plain JSON
dict:

    name          "statistics" (the noisy [vech(S), z]) or "bounds" (a private estimate of
                  B_x, B_y), ...
    mechanism     "gaussian", "discrete_gaussian", "exponential", ..., "unaccounted"
    epsilon       the eps of the part's (eps, delta)-DP guarantee (null: no guarantee)
    delta         its delta (0 for a pure eps-DP mechanism)
    rho           its rho-zCDP, or null. The Gaussian mechanism with L2 sensitivity Delta and
                  noise std sigma is rho = Delta^2 / (2 sigma^2) (Bun & Steinke 2016, Prop. 1.6),
                  and so is the discrete Gaussian with scale sigma on integers (Canonne, Kamath
                  & Steinke 2020, Theorem 14); a pure eps-DP mechanism is eps^2 / 2-zCDP
                  (Bun & Steinke 2016, Prop. 1.4)
    sensitivity   the L2 sensitivity Delta the cost is computed for
    sigma         the noise std, or null
    dp_event      a JSON dict from which ``dp_accounting`` rebuilds its DpEvent:
                  {"type": "GaussianDpEvent", "noise_multiplier": sigma / Delta},
                  {"type": "ZCDpEvent", "rho": rho} (the discrete Gaussian), ...
    neighbouring  "add/remove" (bayesdp's relation, the default) or "replace-one"
    note          why the numbers are what they are (e.g. the true eps of a flawed calibration)
    holders       optional: the holders the part applies to (absent: every holder)

Holders hold disjoint rows, so the cost of a release with several holders is the largest
holder's cost (parallel composition), not the sum. One holder releasing several times pays the
sum (sequential composition): :func:`budget` adds the parts up with zCDP (rho adds; Bun &
Steinke 2016, Lemma 1.7), with basic composition (eps and delta add; Dwork & Roth 2014,
Theorem 3.16), or with a privacy-loss-distribution accountant (``dp_accounting``, optional).
See docs/privacy.md, "Privacy cost and budget".
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from typing import Optional

import numpy as np

from . import privacy
from .errors import BayesdpInputError

ADD_REMOVE = "add/remove"
REPLACE_ONE = "replace-one"
ACCOUNTANTS = ("zcdp", "basic", "pld")
UNACCOUNTED = "unaccounted"
GAUSSIAN = "gaussian"
DISCRETE_GAUSSIAN = "discrete_gaussian"
EXPONENTIAL = "exponential"
MECHANISMS = (GAUSSIAN, DISCRETE_GAUSSIAN, EXPONENTIAL, UNACCOUNTED)
"""The mechanisms a cost part may name; any other is refused (its cost could not be checked)."""

MAX_NUMBER = 1e150
"""Largest magnitude of a number in a cost part (as ``releases.release_object.MAX_ABS`` for the
rest of a release): squares and products of the numbers stay finite in float64."""

CALIBRATION_RTOL = 1e-6
"""A release's noise may exceed what its calibration gives at its stated epsilon by this much
(relative) before the surplus counts as epsilon spent elsewhere (:func:`derive_cost`); the eps
such a surplus could hide is at most about this fraction of epsilon."""

CONTIGUOUS_EXACT_LIMIT = 10**7
"""Rows times holders up to which the reader recomputes the contiguous split's factor exactly
(privacy.contiguous_split_change is O(n J)); beyond, it checks against sqrt(4 J - 3), which the
factor is never below."""


# -- parts ---------------------------------------------------------------------------------------


def gaussian_rho(sigma, sensitivity):
    """rho-zCDP of the Gaussian mechanism: Delta^2 / (2 sigma^2) (Bun & Steinke 2016, Prop. 1.6);
    inf when that overflows float64 (or sigma is 0)."""
    try:
        return 0.5 * (float(sensitivity) / float(sigma)) ** 2
    except (OverflowError, ZeroDivisionError):
        return math.inf


_LOG_T_RANGE = (-700.0, 700.0)
"""The range of log t = log(alpha - 1) searched by :func:`_zcdp_log_delta`: exp stays finite, and
every alpha > 1 gives a valid bound, so clamping can only make delta larger."""


def _zcdp_log_delta(rho, eps):
    """log of :func:`zcdp_delta` for rho > 0 and eps >= 0 (floats, already checked).

    With alpha = 1 + t, the exponent is g(t) = t (alpha rho - eps + log(t / alpha)) - log alpha,
    convex in t > 0 (g'' = 2 rho + 1 / (alpha t) > 0) with g'(t) = (2 alpha - 1) rho - eps +
    log(t / alpha). Its root is found by bisection on log t, within _LOG_T_RANGE; every
    alpha > 1 gives a valid bound, so an inexact (or clamped) root can only make delta larger.
    Every loop is bounded, whatever rho and eps are (at most about 1400 + 200 evaluations).
    """
    u_min, u_max = _LOG_T_RANGE

    def g(u):  # log(t / alpha) as -log1p(1 / t): exact where u - log1p(t) would cancel
        t = math.exp(u)
        return t * ((1.0 + t) * rho - eps - math.log1p(math.exp(-u))) - math.log1p(t)

    def dg(u):
        t = math.exp(u)
        return (1.0 + 2.0 * t) * rho - eps - math.log1p(math.exp(-u))

    ratio = eps / rho  # inf for a tiny rho: start at the top of the range
    lo = math.log(max((ratio - 1.0) / 2.0, 1.0)) if math.isfinite(ratio) else u_max
    lo = min(lo, u_max)
    while lo > u_min and dg(lo) >= 0:
        lo = max(lo - 1.0, u_min)
    hi = min(lo + 1.0, u_max)
    while hi < u_max and dg(hi) <= 0:
        hi = min(hi + 1.0, u_max)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if dg(mid) < 0:
            lo = mid
        else:
            hi = mid
    return min(0.0, g(lo), g(hi))


def _check_nonneg(name, value):
    """``value`` as a float, finite and >= 0, else an error naming ``name``."""
    try:
        r = float(value)
    except (TypeError, ValueError):
        r = math.nan
    if isinstance(value, bool) or not (math.isfinite(r) and r >= 0):
        raise BayesdpInputError(f"{name} must be a finite number >= 0, got {value!r}")
    return r


def _check_rho(rho):
    return _check_nonneg("rho", rho)


def zcdp_delta(rho, epsilon):
    """delta(eps) of the (eps, delta)-DP guarantee implied by rho-zCDP (Canonne, Kamath &
    Steinke 2020, Proposition 12 and Corollary 13):

        delta = inf_{alpha > 1} exp((alpha - 1)(alpha rho - eps)) / alpha
                                * (1 - 1/alpha)^(alpha - 1),

    minimised over alpha in log space (:func:`_zcdp_log_delta`); at most 1. For the continuous
    Gaussian mechanism (rho = Delta^2 / (2 sigma^2)) it is above the exact profile of
    privacy.gaussian_log_delta, by the price of knowing rho only.
    """
    r = _check_rho(rho)
    eps = _check_nonneg("epsilon", epsilon)
    return 0.0 if r == 0 else math.exp(_zcdp_log_delta(r, eps))


def zcdp_epsilon(rho, delta):
    """The smallest eps with :func:`zcdp_delta` (rho, eps) <= delta: the eps of the (eps,
    delta)-DP guarantee implied by rho-zCDP (Canonne, Kamath & Steinke 2020, Corollary 13).

    Bisection on eps (delta(eps) decreases), started from Bun & Steinke's (2016, Prop. 1.3)
    looser eps = rho + 2 sqrt(rho log(1/delta)) (log(1/delta) as -log(delta), finite for every
    delta in (0, 1), subnormal ones included); the upper end is returned, so
    zcdp_delta(rho, result) <= delta always holds, and so does the bound itself in log space
    (which matters for a subnormal delta, where exp rounds coarsely). Every loop is bounded.
    """
    r = _check_rho(rho)
    _, dlt = privacy.check_epsilon_delta(1.0, delta)
    log_dlt = math.log(dlt)

    def ok(eps):  # compared as zcdp_delta returns it, and in log space
        log_d = _zcdp_log_delta(r, eps)
        return log_d <= log_dlt and math.exp(log_d) <= dlt

    if r == 0 or ok(0.0):
        return 0.0
    lo, hi = 0.0, r + 2.0 * math.sqrt(r * -log_dlt)
    for _ in range(64):  # Bun & Steinke's eps already meets delta; a few doublings absorb rounding
        if ok(hi):
            break
        lo, hi = hi, 2.0 * hi
    else:  # pragma: no cover - the Bun & Steinke bound holds
        raise BayesdpInputError(f"zcdp_epsilon: no epsilon found for rho={r!r}, delta={dlt!r}")
    if not math.isfinite(hi):  # pragma: no cover - rho is finite, so is the bound
        raise BayesdpInputError(f"zcdp_epsilon: rho={r!r} is too large for a finite epsilon")
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi) or hi - lo <= 1e-15 * hi:
            break
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def gaussian_part(sigma, sensitivity, delta, *, name="statistics", stated_epsilon=None, note=""):
    """The part of a Gaussian mechanism with noise std ``sigma`` at L2 ``sensitivity``.

    epsilon is the exact eps of that noise at ``delta`` (privacy.true_epsilon, Balle & Wang
    2018, Theorem 8); when it is within 1e-9 of ``stated_epsilon`` (an exact calibration) the
    stated value is kept. When the noise falls short of ``stated_epsilon`` (a flawed
    calibration) the part records the true eps and says so in its note. Noise too small for a
    finite eps in float64 gives a part without a guarantee.
    """
    sigma, sens = float(sigma), float(sensitivity)
    _, dlt = privacy.check_epsilon_delta(1.0, delta)
    notes = [note] if note else []
    try:
        true_eps = privacy.true_epsilon(sigma, dlt, sens) if sigma > 0 else math.inf
        rho = gaussian_rho(sigma, sens)
    except (ValueError, OverflowError, ZeroDivisionError):
        true_eps = rho = math.inf
    if not (math.isfinite(true_eps) and math.isfinite(rho)):
        return non_private_part("; ".join(notes + [
            "the noise is too small for a finite epsilon"]), sigma=sigma, sensitivity=sens,
            name=name)
    eps = true_eps
    if stated_epsilon is not None:
        stated = float(stated_epsilon)
        if true_eps <= stated * (1 + 1e-9) and true_eps >= stated * (1 - 1e-9):
            eps = stated
        elif true_eps > stated:
            notes.append(f"the stated epsilon={stated:g} is NOT met by the noise added: epsilon "
                         f"here is the true epsilon of sigma={sigma:.6g} at sensitivity "
                         f"{sens:.6g} (privacy.true_epsilon)")
        else:
            notes.append(f"the noise gives more than the stated epsilon={stated:g}: epsilon here "
                         "is its true epsilon (privacy.true_epsilon)")
    return {
        "name": name, "mechanism": "gaussian", "epsilon": eps, "delta": dlt, "rho": rho,
        "sensitivity": sens, "sigma": sigma,
        "dp_event": {"type": "GaussianDpEvent", "noise_multiplier": sigma / sens},
        "neighbouring": ADD_REMOVE, "note": "; ".join(notes),
    }


def non_private_part(note, *, sigma=None, sensitivity=None, name="statistics",
                     mechanism="gaussian"):
    """A part that gives no DP guarantee (e.g. bounds read off the data): epsilon null and the
    ``NonPrivateDpEvent`` of dp_accounting (infinite eps)."""
    return {
        "name": name, "mechanism": mechanism, "epsilon": None, "delta": None, "rho": None,
        "sensitivity": None if sensitivity is None else float(sensitivity),
        "sigma": None if sigma is None else float(sigma),
        "dp_event": {"type": "NonPrivateDpEvent"}, "neighbouring": ADD_REMOVE,
        "note": "no DP guarantee: " + note,
    }


def unaccounted_part(note, *, name="statistics"):
    """A part whose guarantee is not a mechanism bayesdp can account (e.g. a network protocol's
    local guarantee): ``"mechanism": "unaccounted"``, no numbers, ``UnsupportedDpEvent``."""
    return {
        "name": name, "mechanism": UNACCOUNTED, "epsilon": None, "delta": None, "rho": None,
        "sensitivity": None, "sigma": None, "dp_event": {"type": "UnsupportedDpEvent"},
        "neighbouring": ADD_REMOVE, "note": note,
    }


def _num(part, key, where, *, low, low_open, high=None, nullable=True):
    v = part.get(key)
    if v is None:
        if nullable:
            return None
        raise BayesdpInputError(f"{where}.{key} is required")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not _finite(v):
        raise BayesdpInputError(f"{where}.{key} must be a finite number of magnitude at most "
                                f"{MAX_NUMBER:g}, got {_short(v)}")
    v = float(v)
    if v < low or (low_open and v == low) or (high is not None and v >= high):
        rng = f"{'>' if low_open else '>='} {low:g}" + (f" and < {high:g}" if high else "")
        raise BayesdpInputError(f"{where}.{key} must be {rng}, got {v!r}")
    return v


def _finite(v):
    """A JSON number within +-MAX_NUMBER (a huge integer is compared exactly, not converted)."""
    return (isinstance(v, int) or math.isfinite(v)) and abs(v) <= MAX_NUMBER


def _short(v):
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**20:
        return f"(a {len(str(abs(v)))}-digit integer)"
    return repr(v)


def _check_numbers(part, where):
    """Every number anywhere in ``part`` (dp_event, bounds, ...) is finite and at most
    MAX_NUMBER in magnitude; the error names the first that is not (iterative: any depth)."""
    stack = [(part, where)]
    while stack:
        x, w = stack.pop()
        if isinstance(x, dict):
            stack.extend((v, f"{w}.{k}") for k, v in x.items())
        elif isinstance(x, list):
            stack.extend((v, f"{w}[{i}]") for i, v in enumerate(x))
        elif isinstance(x, (int, float)) and not isinstance(x, bool) and not _finite(x):
            raise BayesdpInputError(f"{w} must be a finite number of magnitude at most "
                                    f"{MAX_NUMBER:g}, got {_short(x)}")


def check_part(part, where="part", holders=None):
    """Validate one cost part; return it as a plain dict with float numbers.

    A Gaussian part must be consistent with its own noise: rho = Delta^2 / (2 sigma^2) and the
    noise multiplier sigma / Delta (to 1e-9 relative), and its epsilon at least the true eps of
    sigma at delta; a record that understates its cost is refused. ``holders``: the release's
    holder names, which a part's ``holders`` must be among.
    """
    if not isinstance(part, dict):
        raise BayesdpInputError(f"{where} must be a JSON object, got {type(part).__name__}")
    out = dict(part)
    for key in ("name", "mechanism"):
        if not isinstance(part.get(key), str) or not part[key].strip():
            raise BayesdpInputError(f"{where}.{key} must be a non-empty string, got "
                                    f"{part.get(key)!r}")
    if part["mechanism"] not in MECHANISMS:
        raise BayesdpInputError(
            f"{where}.mechanism {part['mechanism']!r} is not a mechanism bayesdp can account "
            f"(one of {', '.join(repr(m) for m in MECHANISMS)}); its cost cannot be checked")
    _check_numbers(part, where)
    out["epsilon"] = _num(part, "epsilon", where, low=0.0, low_open=False)
    out["delta"] = _num(part, "delta", where, low=0.0, low_open=False, high=1.0)
    out["rho"] = _num(part, "rho", where, low=0.0, low_open=False)
    out["sensitivity"] = _num(part, "sensitivity", where, low=0.0, low_open=True)
    out["sigma"] = _num(part, "sigma", where, low=0.0, low_open=False)
    if (out["epsilon"] is None) != (out["delta"] is None):
        raise BayesdpInputError(f"{where}: epsilon and delta are given together or both null")
    if out["epsilon"] is None and out["rho"] is not None:
        raise BayesdpInputError(f"{where}: rho without epsilon and delta")
    ev = part.get("dp_event")
    if not isinstance(ev, dict) or not isinstance(ev.get("type"), str):
        raise BayesdpInputError(f"{where}.dp_event must be a JSON object with a string 'type', "
                                f"got {ev!r}")
    out["neighbouring"] = part.get("neighbouring", ADD_REMOVE)
    if not isinstance(out["neighbouring"], str) or not out["neighbouring"]:
        raise BayesdpInputError(f"{where}.neighbouring must be a string such as "
                                f"{ADD_REMOVE!r}, got {out['neighbouring']!r}")
    out["note"] = part.get("note", "")
    if not isinstance(out["note"], str):
        raise BayesdpInputError(f"{where}.note must be a string, got {out['note']!r}")
    if "holders" in part:
        hs = part["holders"]
        if not isinstance(hs, list) or not hs or not all(isinstance(h, str) for h in hs):
            raise BayesdpInputError(f"{where}.holders must be a non-empty list of holder names, "
                                    f"got {hs!r}")
        if holders is not None and not set(hs) <= set(holders):
            extra = sorted(set(hs) - set(holders))
            raise BayesdpInputError(f"{where}.holders names holders {extra} that the release "
                                    "does not have")
        out["holders"] = list(hs)
    try:
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError):
        raise BayesdpInputError(f"{where} must hold JSON values only (finite numbers, strings, "
                                "lists, objects)") from None
    if out["mechanism"] == UNACCOUNTED and out["epsilon"] is not None:
        raise BayesdpInputError(f"{where}: an {UNACCOUNTED!r} part has no epsilon (its guarantee "
                                f"is not one bayesdp can account), got {out['epsilon']!r}")
    if out["mechanism"] == GAUSSIAN and out["epsilon"] is not None:
        _check_gaussian(out, where)
    if out["mechanism"] == DISCRETE_GAUSSIAN and out["epsilon"] is not None:
        out = _check_discrete_gaussian(out, where)
    if out["mechanism"] == EXPONENTIAL:
        _check_exponential(out, where)
    return out


def _true_eps(sigma, delta, sensitivity):
    """privacy.true_epsilon, or inf when no finite eps can be computed (noise far too small
    for the sensitivity, float64 limits)."""
    try:
        with np.errstate(all="ignore"):  # extreme ratios: the profile's terms under/overflow
            eps = privacy.true_epsilon(sigma, delta, sensitivity)
    except (ValueError, ArithmeticError):  # BayesdpInputError is a ValueError
        return math.inf
    return eps if math.isfinite(eps) else math.inf


def _check_exponential(p, where):
    """An exponential-mechanism part (pure eps-DP; the private bounds estimate's): it has an
    epsilon; a composition of EpsilonDeltaDpEvents in its dp_event adds up to it; and a rho
    given with delta = 0 is at least what the mechanisms prove: an eps_i-DP exponential
    mechanism is eps_i^2 / 8-zCDP (Cesar & Rogers 2021), so sum eps_i^2 / 8 (eps^2 / 8 for one
    mechanism). A ZCDpEvent carries the part's rho. Its ``bounds``, when given, are two numbers
    > 0 (the estimate)."""
    eps = p["epsilon"]
    if eps is None:
        raise BayesdpInputError(f"{where}: an {EXPONENTIAL!r} part needs epsilon and delta")
    ev = p["dp_event"]
    events = ev.get("events") if ev["type"] == "ComposedDpEvent" else [ev]
    rho_min = eps * eps / 8.0
    if isinstance(events, list) and events and all(
            isinstance(e, dict) and e.get("type") == "EpsilonDeltaDpEvent"
            and all(isinstance(e.get(k), (int, float)) and not isinstance(e.get(k), bool)
                    and e[k] >= 0 for k in ("epsilon", "delta")) for e in events):
        total = sum(float(e["epsilon"]) for e in events)
        if not math.isclose(total, eps, rel_tol=1e-9, abs_tol=1e-300):
            raise BayesdpInputError(f"{where}.dp_event: its epsilons add up to {total!r}, not "
                                    f"the part's epsilon {eps!r}")
        rho_min = sum(float(e["epsilon"]) ** 2 for e in events) / 8.0
    if ev["type"] == "ZCDpEvent" and p["rho"] is not None and not (
            isinstance(ev.get("rho"), (int, float)) and not isinstance(ev.get("rho"), bool)
            and math.isclose(ev["rho"], p["rho"], rel_tol=1e-9)):
        raise BayesdpInputError(f"{where}.dp_event.rho must be the part's rho {p['rho']!r}, got "
                                f"{ev.get('rho')!r}")
    if p["rho"] is not None and p["delta"] == 0 and p["rho"] < rho_min * (1 - 1e-9):
        raise BayesdpInputError(
            f"{where}.rho = {p['rho']!r} understates the cost: exponential mechanisms with "
            f"epsilon {eps!r} in total are at least {rho_min!r}-zCDP here (eps_i^2 / 8 each)")
    if "bounds" in p:
        b = p["bounds"]
        if not (isinstance(b, dict) and all(
                isinstance(b.get(k), (int, float)) and not isinstance(b.get(k), bool)
                and b[k] > 0 for k in ("x", "y"))):
            raise BayesdpInputError(f"{where}.bounds must be {{'x': B_x, 'y': B_y}} with numbers "
                                    f"> 0 (the estimated bounds), got {b!r}")


def _check_noise_rho(p, where, what, need_delta=False):
    """rho of a (discrete) Gaussian part: it must have sigma > 0, a sensitivity and rho (and
    delta > 0 when ``need_delta``), and rho must be Delta^2 / (2 sigma^2)."""
    sig, sens = p["sigma"], p["sensitivity"]
    if sig is None or sens is None or p["rho"] is None or not sig > 0 \
            or (need_delta and not p["delta"] > 0):
        raise BayesdpInputError(f"{where}: a {what} part with a guarantee needs sigma > 0, "
                                "sensitivity and rho" + (" and delta > 0" if need_delta else ""))
    rho = gaussian_rho(sig, sens)
    if not math.isclose(p["rho"], rho, rel_tol=1e-9):
        raise BayesdpInputError(f"{where}.rho = {p['rho']!r} but the noise gives "
                                f"Delta^2 / (2 sigma^2) = {rho!r}")
    return rho


def _check_gaussian(p, where):
    _check_noise_rho(p, where, "Gaussian")
    sig, sens = p["sigma"], p["sensitivity"]
    nm = p["dp_event"].get("noise_multiplier")
    if p["dp_event"]["type"] == "GaussianDpEvent" and not (
            isinstance(nm, (int, float)) and math.isclose(nm, sig / sens, rel_tol=1e-9)):
        raise BayesdpInputError(f"{where}.dp_event.noise_multiplier must be sigma / sensitivity "
                                f"= {sig / sens!r}, got {nm!r}")
    true_eps = _true_eps(sig, p["delta"], sens) if p["delta"] > 0 else math.inf
    if p["epsilon"] < true_eps * (1 - 1e-9):
        raise BayesdpInputError(f"{where}.epsilon = {p['epsilon']!r} understates the cost: the "
                                f"noise gives epsilon = {true_eps!r} at delta = {p['delta']!r}")


def _check_discrete_gaussian(p, where):
    """A discrete Gaussian part (secure noise) rests on zCDP only: rho must be
    Delta^2 / (2 sigma^2) (Canonne, Kamath & Steinke 2020, Theorem 14), epsilon at least
    zcdp_epsilon(rho, delta) (their Corollary 13) and a ZCDpEvent must carry that rho; a record
    that understates its cost is refused. Returns the part."""
    rho = _check_noise_rho(p, where, "discrete Gaussian", need_delta=True)
    dlt = p["delta"]
    proven = zcdp_epsilon(rho, dlt)
    ev = p["dp_event"]
    if ev["type"] == "ZCDpEvent" and not (
            isinstance(ev.get("rho"), (int, float)) and not isinstance(ev.get("rho"), bool)
            and math.isclose(ev["rho"], p["rho"], rel_tol=1e-9) and not ev.get("xi")):
        raise BayesdpInputError(f"{where}.dp_event must be {{'type': 'ZCDpEvent', 'rho': "
                                f"{p['rho']!r}}}, got {ev!r}")
    if p["epsilon"] < proven * (1 - 1e-9):
        raise BayesdpInputError(f"{where}.epsilon = {p['epsilon']!r} understates the cost: rho = "
                                f"{rho!r} gives epsilon = {proven!r} at delta = {dlt!r} (zCDP)")
    return p


DERIVED_NOTE = "derived from the release's epsilon, delta, sigma and bounds"


def derive_cost(rel, given=None):
    """The cost parts that a release's own fields give: the noise scales (sigma_s, sigma_z,
    sigma_yty), the bounds and design (intercept, average_rows, y^T y), the claim (epsilon,
    delta), the calibration, the noise mechanism (float or discrete Gaussian) and the split.

    ``given`` None (a release without a record: files written before ``privacy.cost``
    existed, releases built by hand): one statistics part for all holders. ``given`` (a
    release's recorded parts): its parts other than the holders' "statistics" part (pure
    eps-DP mechanisms on the rows, such as a private bounds estimate, whose epsilon the
    statistics did not get) are taken as they are, and the statistics part of each group of
    holders that share their parts is derived; the result lists, per group, those parts and
    the derived one (tagged with the group's ``holders`` when there are several groups).
    :func:`verify_cost` compares a record with this derivation.

    The statistics part (:func:`_statistics_cost`):

    - no claim recorded, no sensitivity, a general ``noise_cov``, no bounds (the sensitivity
      cannot be recomputed): an unaccounted part;
    - bounds read off the data, or no noise: a part without a guarantee;
    - the discrete Gaussian (secure noise): the sensitivity and grid of its plan
      (secure_noise.plan at the release's epsilon, delta, bounds and design), rho =
      Delta^2 / (2 sigma^2), epsilon the stated one (or what rho proves, if more);
    - the Gaussian: sigma = the smallest noise std of the holders, the sensitivity of the
      bounds and design (privacy.sensitivity_release; times the whole-release change of the
      contiguous split, privacy.contiguous_split_change, over the group's holders), epsilon the
      true eps of sigma (the stated one when within 1e-9 of it). When sigma exceeds what the
      calibration gives at the stated epsilon (less the other parts') by more than
      CALIBRATION_RTOL, the rest of epsilon was spent on something the release does not
      record (a private bounds estimate whose part was removed): an unaccounted part.
    """
    if given is None:
        with np.errstate(all="ignore"):  # extreme files: float64 limits are handled below
            part, _ = _statistics_cost(rel, list(range(rel.J)), [], DERIVED_NOTE,
                                       checking=False)
        return (part,)
    groups = _derive_groups(rel, list(given))
    out = []
    for g in groups:
        names = [rel.holder_names[j] for j in g["holders"]]
        tag = {"holders": names} if len(groups) > 1 else {}
        out.extend({**dict(given[i]), **tag} for i in g["others"])
        out.append({**g["part"], **tag})
    return tuple(out)


def _holder_sigma(rel, j):
    """(the smallest noise std of holder j, the field that holds it)."""
    cands = [(float(rel.sigma_s[j]), "sigma_s"), (float(rel.sigma_z[j]), "sigma_z")]
    if rel.yty_hat is not None:
        cands.append((float(rel.sigma_yty[j]), "sigma_yty"))
    return min(cands, key=lambda c: c[0])


def _design(rel):
    """The design the sensitivity depends on, in words."""
    bits = (["intercept"] if rel.intercept else []) + (
        [f"average_rows={rel.average_rows}"] if rel.average_rows > 1 else []) + (
        ["y^T y released"] if rel.yty_hat is not None else [])
    return ", ".join(bits) or "plain rows"


def _own_bounds(others):
    """The bounds a holder's rows were clipped to when it estimated them itself (the "bounds"
    part's ``bounds``), or None."""
    for p in others:
        b = p.get("bounds")
        if p.get("name") == "bounds" and isinstance(b, dict):
            return float(b["x"]), float(b["y"])
    return None


def _contiguous_factor(rows, J, checking):
    """(factor, exact): privacy.contiguous_split_change(rows, J), or beyond
    CONTIGUOUS_EXACT_LIMIT its lower bound sqrt(4 J - 3) when ``checking`` a record (exact
    False), else None."""
    if rows * J <= CONTIGUOUS_EXACT_LIMIT:
        return privacy.contiguous_split_change(rows, J), True
    return (math.sqrt(4 * J - 3), False) if checking else (None, False)


def _statistics_cost(rel, holders, others, note, checking=True):
    """The statistics part of the holders ``holders`` (indices) of ``rel``, whose other parts
    are ``others``, and what it rests on: ``(part, info)``, info with the holders' ``bounds``,
    the ``sensitivity`` of the bounds and design (the secure plan's for discrete noise), the
    secure ``grid`` and ``dim``, and ``sigma_at`` (holder index, field) of the smallest noise.
    Without ``checking`` (a release without a record, whose cost this is): a general
    ``noise_cov`` and a contiguous split too large to recompute its factor exactly give an
    unaccounted part (a derivation must not understate). When ``checking`` a record: with a
    ``noise_cov`` the record is checked against the noise scales the file declares (sigma_s,
    sigma_z; bayesdp itself records no guarantee for such releases), the contiguous factor
    beyond CONTIGUOUS_EXACT_LIMIT is its lower bound, and there is none for a combination of
    releases (its provenance names one input's split only, so which holders were split
    contiguously is not known; the record's larger sensitivity is accepted as it is)."""
    sig, field, j_min = min((*_holder_sigma(rel, j), j) for j in holders)
    info = {"bounds": None, "sensitivity": None, "grid": None, "dim": None,
            "sigma_at": (j_min, field), "factor": None}

    def done(part):
        return part, info

    if rel.epsilon is None or rel.delta is None:
        return done(unaccounted_part("no privacy claim recorded (epsilon, delta)"))
    if rel.sensitivity is None:
        return done(unaccounted_part("no sensitivity recorded: the cost of the noise is unknown"))
    if rel.noise_cov is not None and not checking:
        return done(unaccounted_part("general noise covariance (noise_cov): not a Gaussian "
                                     "mechanism of one sigma at the recorded sensitivity"))
    bounds = _own_bounds(others) or rel.bounds
    if bounds is None:
        return done(unaccounted_part("no bounds recorded: the sensitivity of the noise cannot "
                                     "be recomputed"))
    info["bounds"] = bounds
    eps, dlt = float(rel.epsilon), float(rel.delta)
    with_yty = rel.yty_hat is not None
    eps_other = sum(p["epsilon"] for p in others)
    eps_stats = eps - eps_other
    if others and eps_other + eps_stats > eps:  # as the release computed it (mechanism.py)
        eps_stats = math.nextafter(eps_stats, 0.0)
    secure = rel.noise_mechanism == DISCRETE_GAUSSIAN
    try:
        sens = privacy.sensitivity_release(*bounds, intercept=rel.intercept,
                                           average_rows=rel.average_rows, with_yty=with_yty)
        if not (math.isfinite(sens) and sens > 0):
            raise BayesdpInputError(f"it is {sens!r} in float64")
        if secure:
            from . import secure_noise

            dim = secure_noise.released_dim(rel.d - int(rel.intercept), intercept=rel.intercept,
                                            with_yty=with_yty)
            if not eps_stats > 0:
                raise BayesdpInputError("the other parts spend all of epsilon")
            plan = secure_noise.plan(eps_stats, dlt, sens, dim)
            info.update(grid=plan["grid"], dim=dim)
            sens = plan["sensitivity"]
    except (ValueError, ArithmeticError) as exc:  # BayesdpInputError is a ValueError
        return done(unaccounted_part(f"the sensitivity of the bounds {_pair(bounds)} "
                                     f"({_design(rel)}) "
                                     f"cannot be computed: {exc}"))
    info["sensitivity"] = sens
    if not rel.private_bounds:
        return done(non_private_part("bounds were read off the data, so the noise scale is not "
                                     "private", sigma=sig, sensitivity=sens))
    if sig == 0:
        return done(non_private_part("no noise", sigma=sig, sensitivity=sens))
    notes = [note] if note else []
    if secure:
        from . import secure_noise

        try:
            part = secure_noise.statistics_part(eps_stats, dlt, sigma=sig, sensitivity=sens,
                                                grid=info["grid"], dim=info["dim"])
            proven = zcdp_epsilon(part["rho"], dlt)
        except (ValueError, ArithmeticError):  # rho beyond float64
            proven = math.inf
        if not math.isfinite(proven):
            return done(non_private_part("the noise is too small for a finite epsilon",
                                         sigma=sig, sensitivity=sens))
        if proven > eps_stats * (1 + 1e-9):
            part["epsilon"] = proven
            notes.append(f"the stated epsilon={eps_stats:g} is NOT met by the noise added: "
                         "epsilon here is what its rho proves (zcdp_epsilon)")
        return done({**part, "neighbouring": ADD_REMOVE, "note": "; ".join(notes)})
    if rel.calibration is not None and eps_stats > 0:
        try:
            expected = privacy.gaussian_sigma(eps_stats, dlt, sens, rel.calibration)
        except (ValueError, ArithmeticError) as exc:
            return done(unaccounted_part(f"calibration={rel.calibration!r} cannot be recomputed "
                                         f"at epsilon {eps_stats:g}, delta {dlt:g}: {exc}"))
        if sig > expected * (1 + CALIBRATION_RTOL):
            less = f" (the stated {eps:g} less the other parts' {eps_other:g})" if others else ""
            return done(unaccounted_part(
                f"the noise (sigma = {sig:.6g}, holders[{j_min}].{field}) is more than "
                f"calibration={rel.calibration!r} gives at epsilon = {eps_stats:.6g}{less}, "
                f"delta = {dlt:g} and the sensitivity {sens:.6g} of the bounds {_pair(bounds)} "
                f"({_design(rel)}): sigma = {expected:.6g}. The rest of epsilon went to a "
                "mechanism the release does not record (such as a private bounds estimate whose "
                "'bounds' cost part is missing), so its cost is unknown"))
    cost_sens = sens
    split = str(rel.provenance.get("split", ""))
    combined = "combined_from" in rel.provenance and checking
    if split.startswith("contiguous") and len(holders) > 1 and not combined:
        rows = rel.n_rows if rel.n_rows is not None else rel.n
        factor, exact = _contiguous_factor(int(np.sum(rows[holders])), len(holders), checking)
        if factor is None:
            return done(unaccounted_part(
                "split='contiguous' with too many rows to recompute its whole-release change "
                "here (privacy.contiguous_split_change)"))
        info["factor"] = (factor, exact)
        cost_sens = factor * sens
        notes.append(contiguous_cost_note(factor) if exact else
                     f"split='contiguous': at least sqrt(4 J - 3) = {factor:.4g} x the "
                     "calibrated sensitivity (the exact factor is not recomputed at this size)")
    return done(gaussian_part(sig, cost_sens, dlt, stated_epsilon=eps_stats if eps_stats > 0
                              else None, note="; ".join(notes)))


def _cost_groups(rel, parts):
    """[(holder indices, indices of the parts that apply to them)]: the holders grouped by the
    parts that apply to them (a part without ``holders`` applies to all)."""
    groups = {}
    for j, h in enumerate(rel.holder_names):
        key = tuple(i for i, p in enumerate(parts) if "holders" not in p or h in p["holders"])
        groups.setdefault(key, []).append(j)
    return [(holders, list(key)) for key, holders in groups.items()]


def _derive_groups(rel, parts):
    """Per group of holders (:func:`_cost_groups`): its holders, the index of its statistics
    part, the indices of its other parts and the derived statistics part with its info."""
    out = []
    for holders, idx in _cost_groups(rel, parts):
        stats = [i for i in idx if parts[i]["name"] == "statistics"]
        if len(stats) != 1:
            raise BayesdpInputError(
                f"privacy.cost: holder {rel.holder_names[holders[0]]!r} has {len(stats)} "
                "'statistics' parts; every holder has exactly one (its noisy statistics)")
        others = [i for i in idx if i != stats[0]]
        for i in others:
            p = parts[i]
            if p["mechanism"] != EXPONENTIAL or p["epsilon"] is None:
                raise BayesdpInputError(
                    f"privacy.cost.parts[{i}] ({p['name']!r}, mechanism {p['mechanism']!r}): "
                    "besides its 'statistics' part a holder's cost holds only pure eps-DP "
                    f"mechanisms on its rows (mechanism {EXPONENTIAL!r}, such as the private "
                    "bounds estimate)")
        with np.errstate(all="ignore"):  # extreme files: float64 limits are handled there
            part, info = _statistics_cost(rel, holders, [parts[i] for i in others], "")
        out.append({"holders": holders, "stats": stats[0], "others": others, "part": part,
                    "info": info})
    return out


def verify_cost(rel):
    """Check a release's cost record (``rel.privacy_cost``, as read from a file) against the
    cost its own fields give (:func:`derive_cost`); raise BayesdpInputError naming the field
    where they disagree.

    The record may claim more than the file's noise costs, never less: per group of holders,
    the statistics part must have the noise mechanism of the file, its delta, the smallest
    sigma of the holders it applies to (1e-9 relative), at least the sensitivity of the bounds
    and design (with the contiguous split's factor), and at least the derived epsilon (its rho
    and noise multiplier follow from its sigma and sensitivity, :func:`check_part`); a part
    without a guarantee claims nothing and always agrees, but a guarantee where the file gives
    none (bounds read off the data, noise beyond the calibration's, ...) is refused. Also:
    ``privacy.sensitivity`` must be the sensitivity of the bounds and design (the largest over
    holders that estimated their own bounds), ``privacy.bounds`` the largest of those bounds,
    and the secure ``noise.grid`` the grid of the release's plan.
    """
    parts = list(rel.privacy_cost)
    groups = _derive_groups(rel, parts)
    infos = [g["info"] for g in groups]
    own = [i["bounds"] for i in infos if i["bounds"] is not None]
    if rel.bounds is not None and own:
        top = (max(b[0] for b in own), max(b[1] for b in own))
        if not all(math.isclose(a, b, rel_tol=1e-12) for a, b in zip(top, rel.bounds)):
            raise BayesdpInputError(
                f"privacy.bounds {_pair(rel.bounds)} are not the largest of the holders' own "
                f"bounds (their 'bounds' cost parts): {_pair(top)}")
    sens = [i["sensitivity"] for i in infos]
    if rel.sensitivity is not None and sens and all(v is not None for v in sens):
        want = max(sens)
        if not math.isclose(rel.sensitivity, want, rel_tol=1e-9):
            secure = " plus the secure grid's rounding" if infos[0]["grid"] else ""
            raise BayesdpInputError(
                f"privacy.sensitivity {rel.sensitivity!r} does not match the bounds "
                f"{_pair(rel.bounds)}: the sensitivity of those bounds ({_design(rel)}"
                f"{secure}; docs/privacy.md sections 2, 3b, 10) is {want!r}")
    grids = {i["grid"] for i in infos if i["grid"] is not None}
    if rel.noise_grid is not None and grids and rel.noise_grid not in grids:
        raise BayesdpInputError(
            f"noise.grid {rel.noise_grid!r} disagrees with the grid {min(grids)!r} that the "
            "release's epsilon, delta, bounds and design give (docs/privacy.md section 10)")
    for g in groups:
        _compare_statistics(rel, parts[g["stats"]], g, f"privacy.cost.parts[{g['stats']}]")


def _pair(b):
    return "None" if b is None else f"({b[0]:g}, {b[1]:g})"


def _compare_statistics(rel, rec, g, where):
    """Refuse a recorded statistics part ``rec`` that claims less than the derived one."""
    d, info = g["part"], g["info"]
    if d["epsilon"] is None:
        if rec["epsilon"] is not None:
            raise BayesdpInputError(f"{where} claims epsilon = {rec['epsilon']!r}, but the file "
                                    f"gives no guarantee for these statistics: "
                                    f"{d['note'].removeprefix('no DP guarantee: ')}")
        return
    if rec["epsilon"] is None:
        return  # claims no guarantee: nothing is understated
    if rec["mechanism"] != d["mechanism"]:
        raise BayesdpInputError(
            f"{where}.mechanism {rec['mechanism']!r} disagrees with the file's noise "
            f"(noise.mechanism {rel.noise_mechanism!r}): its statistics part is "
            f"{d['mechanism']!r}")
    if rec["neighbouring"] != d["neighbouring"]:
        raise BayesdpInputError(
            f"{where}.neighbouring {rec['neighbouring']!r} disagrees with the file: the "
            f"sensitivity of its bounds is the {d['neighbouring']!r} one")
    if not math.isclose(rec["delta"], d["delta"], rel_tol=1e-12):
        raise BayesdpInputError(f"{where}.delta = {rec['delta']!r} disagrees with privacy.delta "
                                f"= {rel.delta!r}")
    j, field = info["sigma_at"]
    if not math.isclose(rec["sigma"], d["sigma"], rel_tol=1e-9):
        raise BayesdpInputError(
            f"{where}.sigma = {rec['sigma']!r} disagrees with holders[{j}].{field} = "
            f"{d['sigma']!r} (the smallest noise of the holders the part applies to)")
    if rec["sensitivity"] < d["sensitivity"] * (1 - 1e-9):
        factor = "" if info["factor"] is None else \
            f", times the contiguous split's factor {info['factor'][0]:.6g}"
        raise BayesdpInputError(
            f"{where}.sensitivity = {rec['sensitivity']!r} is below {d['sensitivity']!r}, the "
            f"sensitivity of the file's bounds {_pair(info['bounds'])} ({_design(rel)}"
            f"{factor})")
    for key in ("grid", "dim"):
        v = rec.get(key, d.get(key))
        if key in d and (isinstance(v, bool) or not isinstance(v, (int, float))
                         or not math.isclose(v, d[key], rel_tol=1e-12)):
            raise BayesdpInputError(f"{where}.{key} = {rec[key]!r} disagrees with {d[key]!r} "
                                    "(the secure plan of the release's noise.grid and design)")
    if rec["epsilon"] < d["epsilon"] * (1 - 1e-9):
        raise BayesdpInputError(
            f"{where}.epsilon = {rec['epsilon']!r} understates the cost: the file's noise "
            f"(sigma {d['sigma']!r}, sensitivity {d['sensitivity']!r}) gives epsilon = "
            f"{d['epsilon']!r} at delta = {d['delta']!r}")


def contiguous_cost_note(factor):
    """Note of a part whose sensitivity is the contiguous split's whole-release change."""
    return (f"split='contiguous': one row can change the whole release by {factor:.4g} x the "
            "calibrated sensitivity, so the cost is that of the Gaussian mechanism at the larger "
            "sensitivity; holders are not disjoint in the add/remove sense")


# -- composition -----------------------------------------------------------------------------------


def _holder_groups(parts, holder_names):
    """The distinct lists of parts that apply to one holder (parts without ``holders`` apply to
    all)."""
    groups = []
    for h in holder_names:
        g = [p for p in parts if "holders" not in p or h in p["holders"]]
        if g not in groups:
            groups.append(g)
    return groups


@dataclasses.dataclass(frozen=True)
class Repeated:
    """``times`` releases that each cost what ``release`` cost (made by :func:`repeated`)."""

    release: object  # a Release or the path of a release file
    times: int
    label: Optional[str] = None


def repeated(release, times, *, label=None) -> Repeated:
    """``times`` releases of one holder's rows, each with the cost of ``release``, as one
    argument of :func:`budget`.

    For releases that were not all kept but are known to cost the same: e.g. the c fits of a
    cross-validation (``BayesDPRegressor.budget``), or the c fits of each value of a grid search
    over epsilon, where one fit of each value was kept. The cost of a release depends on its
    epsilon, delta, bounds, calibration, design and noise, not on its rows.

    Parameters
    ----------
    release : Release or path of a release file
        A release with the cost each of the ``times`` releases had.
    times : int >= 1
        How many releases had that cost.
    label : str or None
        The name of these releases in the :class:`Budget` (default: the release's label in
        ``budget``, followed by " x times").

    Returns
    -------
    :class:`Repeated`, to pass to :func:`budget` (the same release given twice directly is
    refused there, as a release counted twice by mistake).
    """
    if isinstance(times, bool) or not isinstance(times, (int, np.integer)) or times < 1:
        raise BayesdpInputError(f"times must be a whole number >= 1, got {times!r}")
    if label is not None and not isinstance(label, str):
        raise BayesdpInputError(f"label must be a str or None, got {type(label).__name__}")
    return Repeated(release=release, times=int(times), label=label)


def _loaded(items, counts=None):
    """The releases of ``items`` (Release objects, paths, :class:`Repeated`, or lists of them)
    and their labels; with a list ``counts``, also each release's number of repetitions."""
    from .releases import Release, load_release

    rels, labels, times = [], [], []
    for k, r in enumerate(items):
        for x in (r if isinstance(r, (list, tuple)) else [r]):
            rep = x if isinstance(x, Repeated) else None
            if rep is not None:
                if counts is None:
                    raise BayesdpInputError("repeated(...) is an argument of budget only")
                x = rep.release
            if isinstance(x, (str, os.PathLike)):
                lab = os.fspath(x)
                rel = load_release(x)
            elif isinstance(x, Release):
                lab = f"release {len(labels)}"
                rel = x
            else:
                raise BayesdpInputError(f"releases: expected a Release or a file path, got "
                                        f"{type(x).__name__}")
            n = 1 if rep is None else rep.times
            if rep is not None:
                lab = rep.label if rep.label is not None else f"{lab} x {n}"
            rels.append(rel)
            labels.append(lab)
            times.append(n)
    if not rels:
        raise BayesdpInputError("releases: give at least one release or release file")
    if counts is not None:
        counts.extend(times)
    return rels, labels


def _check_composable(rels, labels):
    """Refuse parts without a guarantee, mixed neighbouring relations and releases of different
    (named) holders; errors name the release and the field."""
    relation = None
    for rel, lab in zip(rels, labels):
        for i, p in enumerate(rel.privacy_cost):
            where = f"{lab}: privacy.cost.parts[{i}]"
            if p["mechanism"] == UNACCOUNTED or p["epsilon"] is None:
                raise BayesdpInputError(
                    f"{where} ({p['name']}, mechanism {p['mechanism']!r}) has no DP guarantee "
                    f"that can be composed: {p['note'] or 'no epsilon recorded'}")
            if relation is None:
                relation = (p["neighbouring"], where)
            elif p["neighbouring"] != relation[0]:
                raise BayesdpInputError(
                    f"{where}.neighbouring is {p['neighbouring']!r} but {relation[1]} has "
                    f"{relation[0]!r}: costs under different neighbouring relations do not compose")
    from .releases.combine import same_release_pairs

    for (k0, _), (k, _) in same_release_pairs(rels):
        if k != k0:
            raise BayesdpInputError(f"{labels[k]} has the same statistics (S_hat, z_hat, to "
                                    f"within a millionth of the noise) as {labels[k0]}: the same "
                                    "release is given twice")
    from .releases.holders import is_default_holder_name

    named = [(lab, {h for h in r.holder_names if not is_default_holder_name(h)})
             for r, lab in zip(rels, labels)]
    for lab, hs in named[1:]:
        if hs and named[0][1] and hs != named[0][1]:
            raise BayesdpInputError(
                f"{lab}: holder_names {sorted(hs)} differ from {sorted(named[0][1])} in "
                f"{named[0][0]}: a budget adds up releases of ONE holder (sequential "
                "composition); different holders hold disjoint rows and compose in parallel "
                "(combine them with combine_releases / bayesdp combine)")


def _compose(per, accountant, delta):
    """(epsilon, delta, rho) of the sequential composition of releases given by their holder
    groups ``per`` (each release's cost is the largest over its holders: parallel composition)."""
    rho_parts = lambda g: [p for p in g if p["rho"] is not None]  # noqa: E731
    other = lambda g: [p for p in g if p["rho"] is None]  # noqa: E731
    all_rho = all(p["rho"] is not None for gs in per for g in gs for p in g)
    rho_total = sum(max(sum(p["rho"] for p in g) for g in gs) for gs in per) if all_rho else None
    natural = sum(max(sum(p["delta"] for p in g) for g in gs) for gs in per)
    if accountant == "basic":
        eps = sum(max(sum(p["epsilon"] for p in g) for g in gs) for gs in per)
        if delta is None:
            return eps, natural, rho_total
        if delta < natural:
            raise BayesdpInputError(
                f"delta={delta:g}: basic composition gives delta = the sum of the parts' deltas "
                f"= {natural:g}; ask for delta >= {natural:g} or another accountant")
        return eps, delta, rho_total
    target = natural if delta is None else delta
    if target <= 0:
        raise BayesdpInputError("delta: every part is pure eps-DP with delta = 0; give the "
                                "delta of the total (--delta) or use accountant='basic'")
    if accountant == "pld":
        return _compose_pld(per, target), target, rho_total
    # zcdp: parts with rho add up their rho; parts without are added by basic composition
    rho = sum(max(sum(p["rho"] for p in rho_parts(g)) for g in gs) for gs in per)
    eps_b = sum(max(sum(p["epsilon"] for p in other(g)) for g in gs) for gs in per)
    dlt_b = sum(max(sum(p["delta"] for p in other(g)) for g in gs) for gs in per)
    dlt_z = target - dlt_b
    if rho > 0 and not dlt_z > 0:
        raise BayesdpInputError(
            f"delta={target:g} is not larger than the deltas of the parts without rho "
            f"({dlt_b:g}): nothing is left for the zCDP conversion")
    if rho == 0:
        return eps_b, target, rho_total
    gaussian = all(p["mechanism"] == "gaussian" for gs in per for g in gs for p in rho_parts(g))
    if gaussian:
        # the Gaussian mechanisms together are one with 1/s^2 = sum Delta_i^2 / sigma_i^2 = 2 rho
        eps_z = privacy.true_epsilon(1.0 / math.sqrt(2.0 * rho), dlt_z)
    else:
        eps_z = zcdp_epsilon(rho, dlt_z)
    return eps_z + eps_b, target, rho_total


def _need_dp_accounting(what):
    try:
        import dp_accounting
    except ImportError:
        raise BayesdpInputError(
            f"{what} needs the optional package dp_accounting (pip install dp-accounting); "
            "use accountant='zcdp' or 'basic' without it") from None
    return dp_accounting


def _compose_pld(per, delta):
    """Privacy-loss-distribution composition (dp_accounting; pessimistic discretisation, so an
    upper bound): Gaussian parts exactly, others as the worst case of their (eps, delta)."""
    _need_dp_accounting("accountant='pld'")
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pldlib

    pld = None
    for gs in per:
        if len(gs) > 1:
            if not all(p["mechanism"] == "gaussian" for g in gs for p in g):
                raise BayesdpInputError(
                    "accountant='pld': a release whose holders have different non-Gaussian costs "
                    "has no single worst holder; use accountant='zcdp' or 'basic'")
            gs = [max(gs, key=lambda g: sum(p["rho"] for p in g))]  # Gaussians are ordered
        for p in gs[0]:
            if p["mechanism"] == "gaussian":
                part = pldlib.from_gaussian_mechanism(
                    standard_deviation=p["sigma"] / p["sensitivity"])
            else:
                part = pldlib.from_privacy_parameters(
                    common.DifferentialPrivacyParameters(p["epsilon"], p["delta"]))
            pld = part if pld is None else pld.compose(part)
    eps = float(pld.get_epsilon_for_delta(delta))
    if not math.isfinite(eps):
        raise BayesdpInputError(f"delta={delta:g} is below the parts' own deltas: no finite "
                                "epsilon (accountant='pld')")
    return eps


def total_cost(parts, holder_names=("0",)):
    """The total of one release's parts: the smaller eps of zCDP and basic composition at the
    sum of the parts' deltas (both are valid; parallel over holders), with rho when every part
    has one. Without a guarantee in some part: every number null and the reason."""
    per = [_holder_groups(parts, holder_names)]
    for p in parts:
        if p["mechanism"] == UNACCOUNTED or p["epsilon"] is None:
            return {"epsilon": None, "delta": None, "rho": None, "accountant": None,
                    "note": f"part {p['name']!r}: {p['note'] or 'no guarantee'}"}
    if len(parts) == 1:
        p = parts[0]
        return {"epsilon": p["epsilon"], "delta": p["delta"], "rho": p["rho"],
                "accountant": "single part", "note": ""}
    best = None
    for acc in ("zcdp", "basic"):
        try:
            eps, dlt, rho = _compose(per, acc, None)
        except BayesdpInputError:
            continue
        if best is None or eps < best[0]:
            best = (eps, dlt, rho, acc)
    if best is None:  # only pure parts: zCDP needs a delta
        eps, dlt, rho = _compose(per, "basic", None)
        best = (eps, dlt, rho, "basic")
    return {"epsilon": best[0], "delta": best[1], "rho": best[2], "accountant": best[3],
            "note": ""}


def privacy_cost(rel):
    """The privacy cost record of a release (or a release file): ``{"parts": [...], "total":
    {...}}``, as written under ``privacy.cost`` in the file."""
    (rel,), _ = _loaded([rel])
    parts = [dict(p) for p in rel.privacy_cost]
    return {"parts": parts, "total": total_cost(parts, rel.holder_names)}


@dataclasses.dataclass(frozen=True)
class Budget:
    """The total cost of several releases of one holder (:func:`budget`)."""

    accountant: str
    epsilon: float
    delta: float
    rho: Optional[float]
    parts: tuple  # per release and part: {"release": label, **part}
    releases: tuple

    def to_dict(self):
        return {"accountant": self.accountant,
                "total": {"epsilon": self.epsilon, "delta": self.delta, "rho": self.rho},
                "releases": list(self.releases), "parts": [dict(p) for p in self.parts]}

    def table(self):
        """A small plain-text table: one line per part, the total, and the parts' notes."""
        fmt = lambda v: "-" if v is None else f"{v:.6g}"  # noqa: E731
        rows = [("release", "part", "mechanism", "epsilon", "delta", "rho", "sigma/Delta")]
        for p in self.parts:
            nm = None if p["sigma"] is None or not p["sensitivity"] else \
                p["sigma"] / p["sensitivity"]
            name = p["name"] + (f" [{', '.join(p['holders'])}]" if "holders" in p else "")
            rows.append((p["release"], name, p["mechanism"], fmt(p["epsilon"]), fmt(p["delta"]),
                         fmt(p["rho"]), fmt(nm)))
        rows.append((f"total ({self.accountant})", "", "", fmt(self.epsilon), fmt(self.delta),
                     fmt(self.rho), ""))
        widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]
        notes = sorted({f"{p['release']}, {p['name']}: {p['note']}" for p in self.parts
                        if p["note"]})
        return "\n".join(lines + [f"note: {n}" for n in notes])


def budget(*releases, delta=None, accountant="zcdp") -> Budget:
    """The total privacy cost when ONE holder released several times (sequential composition).

    ``releases``: Release objects or release file paths (or lists of them), all of the same
    holder (e.g. with and without intercept, or private bounds plus statistics). Each release's
    own cost is the largest over its holders (holders hold disjoint rows: parallel
    composition); the releases' costs add up:

    - ``"zcdp"`` (default): rho adds (Bun & Steinke 2016, Lemma 1.7). When every part is a
      Gaussian mechanism the sum is one Gaussian mechanism with
      1/s^2 = sum_i Delta_i^2 / sigma_i^2 = 2 rho, and eps is its exact value at ``delta``
      (Balle & Wang 2018, Theorem 8); otherwise eps is the conversion of rho
      (:func:`zcdp_epsilon`; Canonne, Kamath & Steinke 2020, Corollary 13). Parts without a
      rho are added by basic composition, their deltas taken out of ``delta`` first.
    - ``"basic"``: eps and delta add (Dwork & Roth 2014, Theorem 3.16).
    - ``"pld"``: privacy loss distributions of dp_accounting (optional package), Gaussian parts
      exactly, others by the worst case of their (eps, delta).

    ``releases`` may also hold ``repeated(release, n)`` (:func:`repeated`): n releases with
    that release's cost, e.g. the fits of a cross-validation of which one was kept.

    ``delta``: the delta of the total, in (0, 1); default the sum of the parts' deltas.
    Refused (BayesdpInputError naming the release and field): a part without a guarantee
    (``"unaccounted"``, bounds read off the data), mixed neighbouring relations, releases of
    different named holders, the same release given twice (use :func:`repeated` to count one
    cost several times).

    Not checked: whether the releases were seeded (``Release.seeded``). Seeded releases are
    reproducible, not private (docs/privacy.md, section 7), and releases made with the same
    seed share their noise, so their total is not a guarantee.
    """
    if accountant not in ACCOUNTANTS:
        raise BayesdpInputError(f"accountant must be one of {ACCOUNTANTS}, got {accountant!r}")
    if delta is not None:
        _, delta = privacy.check_epsilon_delta(1.0, delta)
    times = []
    rels, labels = _loaded(releases, times)
    _check_composable(rels, labels)
    per = [_holder_groups(r.privacy_cost, r.holder_names) for r in rels]
    eps, dlt, rho = _compose([g for g, n in zip(per, times) for _ in range(n)], accountant, delta)
    rows = tuple({"release": lab, **p} for r, lab in zip(rels, labels) for p in r.privacy_cost)
    return Budget(accountant=accountant, epsilon=eps, delta=dlt, rho=rho, parts=rows,
                  releases=tuple(labels))


def to_dp_event(event):
    """The ``dp_accounting`` DpEvent of a part's ``dp_event`` dict (needs dp_accounting).

    ``{"type": "GaussianDpEvent", "noise_multiplier": 3.73}`` gives
    ``dp_accounting.GaussianDpEvent(noise_multiplier=3.73)``, ``{"type": "ZCDpEvent", "rho":
    0.04}`` (a secure release) ``dp_accounting.ZCDpEvent(rho=0.04)``, which its RDP accountant
    composes; nested events (``"event"``, ``"events"``) are rebuilt too.
    """
    dpa = _need_dp_accounting("to_dp_event")
    from dp_accounting import dp_event as mod

    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        raise BayesdpInputError(f"dp_event must be an object with a string 'type', got {event!r}")
    cls = getattr(mod, event["type"], None)
    if not (isinstance(cls, type) and issubclass(cls, dpa.DpEvent)):
        raise BayesdpInputError(f"dp_event.type {event['type']!r} is not a dp_accounting DpEvent")

    def conv(v):
        if isinstance(v, dict) and "type" in v:
            return to_dp_event(v)
        if isinstance(v, list):
            return [conv(x) for x in v]
        return v

    try:
        return cls(**{k: conv(v) for k, v in event.items() if k != "type"})
    except TypeError as exc:
        raise BayesdpInputError(f"dp_event {event!r}: {exc}") from None
