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

This module works on cost parts and on objects that carry them (a release's ``privacy_cost``
and ``holder_names``); it imports nothing of the release layer. The statistics part that a
release's own fields give is derived there (:mod:`bayesdp.releases.cost`).
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

# dp_accounting, an optional package, is imported by the functions that need it

ADD_REMOVE = "add/remove"
_ACCOUNTANTS = ("zcdp", "basic", "pld")
_UNACCOUNTED = "unaccounted"
_GAUSSIAN = "gaussian"
DISCRETE_GAUSSIAN = "discrete_gaussian"
EXPONENTIAL = "exponential"
CLAIM = "claim"
"""The mechanism name of a release counted at its stated claim (:func:`budget_parts`): a pure
(eps, delta) part, composed by basic composition."""
_MECHANISMS = (_GAUSSIAN, DISCRETE_GAUSSIAN, EXPONENTIAL, _UNACCOUNTED, CLAIM)
"""The mechanisms a cost part may name; any other is refused (its cost could not be checked)."""

_MAX_NUMBER = 1e150
"""Largest magnitude of a number in a cost part (as ``releases.release_object.MAX_ABS`` for the
rest of a release): squares and products of the numbers stay finite in float64."""


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
        "name": name, "mechanism": _UNACCOUNTED, "epsilon": None, "delta": None, "rho": None,
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
                                f"{_MAX_NUMBER:g}, got {_short(v)}")
    v = float(v)
    if v < low or (low_open and v == low) or (high is not None and v >= high):
        rng = f"{'>' if low_open else '>='} {low:g}" + (f" and < {high:g}" if high else "")
        raise BayesdpInputError(f"{where}.{key} must be {rng}, got {v!r}")
    return v


def _finite(v):
    """A JSON number within +-_MAX_NUMBER (a huge integer is compared exactly, not converted)."""
    return (isinstance(v, int) or math.isfinite(v)) and abs(v) <= _MAX_NUMBER


def _short(v):
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**20:
        return f"(a {len(str(abs(v)))}-digit integer)"
    return repr(v)


def _check_numbers(part, where):
    """Every number anywhere in ``part`` (dp_event, bounds, ...) is finite and at most
    _MAX_NUMBER in magnitude; the error names the first that is not (iterative: any depth)."""
    stack = [(part, where)]
    while stack:
        x, w = stack.pop()
        if isinstance(x, dict):
            stack.extend((v, f"{w}.{k}") for k, v in x.items())
        elif isinstance(x, list):
            stack.extend((v, f"{w}[{i}]") for i, v in enumerate(x))
        elif isinstance(x, (int, float)) and not isinstance(x, bool) and not _finite(x):
            raise BayesdpInputError(f"{w} must be a finite number of magnitude at most "
                                    f"{_MAX_NUMBER:g}, got {_short(x)}")


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
    if part["mechanism"] not in _MECHANISMS:
        raise BayesdpInputError(
            f"{where}.mechanism {part['mechanism']!r} is not a mechanism bayesdp can account "
            f"(one of {', '.join(repr(m) for m in _MECHANISMS)}); its cost cannot be checked")
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
    if out["mechanism"] == _UNACCOUNTED and out["epsilon"] is not None:
        raise BayesdpInputError(f"{where}: an {_UNACCOUNTED!r} part has no epsilon (its guarantee "
                                f"is not one bayesdp can account), got {out['epsilon']!r}")
    if out["mechanism"] == _GAUSSIAN and out["epsilon"] is not None:
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

    release: object  # a Release
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
    release : Release
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


def _loaded(items, counts=None, names=None):
    """The releases of ``items`` (Release objects, :class:`Repeated`, or lists of them) and
    their labels (``names``, one per release, or "release k"); with a list ``counts``, also each
    release's number of repetitions."""
    flat = [x for r in items for x in (r if isinstance(r, (list, tuple)) else [r])]
    if not flat:
        raise BayesdpInputError("releases: give at least one release")
    if names is not None and (isinstance(names, str) or len(names) != len(flat)
                              or not all(isinstance(n, str) for n in names)):
        raise BayesdpInputError(f"labels must be {len(flat)} strings, one per release, got "
                                f"{names!r}")
    rels, labels, times = [], [], []
    for k, x in enumerate(flat):
        rep = x if isinstance(x, Repeated) else None
        if rep is not None:
            if counts is None:
                raise BayesdpInputError("repeated(...) is an argument of budget only")
            x = rep.release
        if isinstance(x, (str, os.PathLike)):
            raise BayesdpInputError(
                f"releases: {os.fspath(x)!r} is a file path; read it with "
                "bayesdp.load_release first (the command 'bayesdp budget' reads files)")
        if not (hasattr(x, "privacy_cost") and hasattr(x, "holder_names")):
            raise BayesdpInputError(f"releases: expected a Release, got {type(x).__name__}")
        lab = f"release {k}" if names is None else names[k]
        n = 1 if rep is None else rep.times
        if rep is not None:
            lab = rep.label if rep.label is not None else f"{lab} x {n}"
        rels.append(x)
        labels.append(lab)
        times.append(n)
    if counts is not None:
        counts.extend(times)
    return rels, labels


_DUPLICATE_NOISE_RTOL = 1e-6
"""Two holders are one release given twice when every coordinate of their [vech(S_hat), z_hat]
agrees to within this fraction of the larger noise std (or to 16 units of rounding, for
noiseless statistics). Independent noise of std sigma each makes a coordinate of two different
holders' statistics agree that closely with probability at most 1e-6 / sqrt(pi) = 5.6e-7
(the density of their difference is at most 1 / (2 sqrt(pi) sigma)), and all of the
d(d+1)/2 + d >= 2 coordinates at most 3.2e-13: a false alarm never happens in practice, while
a copy whose digits were rewritten (one ulp, a 15-digit printout) is still caught."""


def same_release_pairs(rels):
    """Pairs ``((k0, name0), (k, name))`` of holders of the releases ``rels`` (k the position of
    the release, ``name`` the holder's name in it) whose statistics are one release given twice
    (:data:`_DUPLICATE_NOISE_RTOL`), in the order found; empty when there is none.

    What identifies a release is its noise draw: two holders' independent noise makes their
    statistics differ by about sigma sqrt(2) in every coordinate. A budget refuses such a pair
    (one cost counted twice), and so does :func:`bayesdp.combine_releases` (one holder's rows
    counted twice)."""
    pairs = []
    for d in sorted({r.d for r in rels}):  # releases of other shapes cannot be the same one
        entries = [(k, h, r.S_hat[j], r.z_hat[j], float(r.sigma_s[j]), float(r.sigma_z[j]))
                   for k, r in enumerate(rels) if r.d == d for j, h in enumerate(r.holder_names)]
        iu = np.triu_indices(d)
        V = np.array([np.concatenate([S[iu], z]) for _, _, S, z, _, _ in entries])
        noise = np.array([np.concatenate([np.full(len(iu[0]), ss), np.full(d, sz)])
                          for *_, ss, sz in entries])
        rounding = 16 * np.finfo(float).eps
        for i in range(len(entries) - 1):
            rest = V[i + 1:]
            tol = np.maximum(_DUPLICATE_NOISE_RTOL * np.maximum(noise[i], noise[i + 1:]),
                             rounding * np.maximum(np.abs(V[i]), np.abs(rest)))
            for m in np.flatnonzero(np.all(np.abs(rest - V[i]) <= tol, axis=1)):
                a, b = entries[i], entries[i + 1 + int(m)]
                pairs.append(((a[0], a[1]), (b[0], b[1])))
    return sorted(pairs)


def _check_composable(rels, labels):
    """Refuse the same release given twice and releases of different (named) holders (parts
    without a guarantee and mixed neighbouring relations: :func:`compose_counted`); errors
    name the release and the field."""
    for (k0, _), (k, _) in same_release_pairs(rels):
        if k != k0:
            raise BayesdpInputError(f"{labels[k]} has the same statistics (S_hat, z_hat, to "
                                    f"within a millionth of the noise) as {labels[k0]}: the same "
                                    "release is given twice")
    named = [(lab, set(r.named_holders)) for r, lab in zip(rels, labels)]
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
        if p["mechanism"] == _UNACCOUNTED or p["epsilon"] is None:
            return {"epsilon": None, "delta": None, "rho": None, "accountant": None,
                    "note": f"part {p['name']!r}: {p['note'] or 'no guarantee'}"}
    if len(parts) == 1:
        p = parts[0]
        return {"epsilon": p["epsilon"], "delta": p["delta"], "rho": p["rho"],
                "accountant": "single part", "note": ""}
    best = _smallest(per, None)
    if best is None:  # only pure parts: zCDP needs a delta
        eps, dlt, rho = _compose(per, "basic", None)
        best = (eps, dlt, rho, "basic")
    return {"epsilon": best[0], "delta": best[1], "rho": best[2], "accountant": best[3],
            "note": ""}


def _smallest(per, delta):
    """(eps, delta, rho, accountant) of the smaller of zCDP and basic composition of ``per``
    at ``delta`` (None: the parts' own), or None when neither composes."""
    best = None
    for acc in ("zcdp", "basic"):
        try:
            eps, dlt, rho = _compose(per, acc, delta)
        except BayesdpInputError:
            continue
        if best is None or eps < best[0]:
            best = (eps, dlt, rho, acc)
    return best


def epsilon_at(parts, holder_names, delta):
    """The smallest epsilon at ``delta`` that one release's cost ``parts`` prove (zCDP or basic
    composition, as :func:`total_cost`; parallel over holders): ``math.inf`` when neither proves
    one at that delta, None when a part gives no guarantee."""
    if any(p["mechanism"] == _UNACCOUNTED or p["epsilon"] is None for p in parts):
        return None
    best = _smallest([_holder_groups(parts, holder_names)], float(delta))
    return math.inf if best is None else best[0]


def privacy_cost(rel):
    """The privacy cost record of a release: ``{"parts": [...], "total": {...}}``, as written
    under ``privacy.cost`` in the file."""
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


def _pure(p, note):
    """Part ``p`` counted as a pure (eps, delta) part: no rho, so it composes by basic
    composition."""
    return {**p, "mechanism": CLAIM, "rho": None,
            "dp_event": {"type": "EpsilonDeltaDpEvent", "epsilon": p["epsilon"],
                         "delta": p["delta"]}, "note": "; ".join(x for x in (p["note"], note) if x)}


def budget_parts(rel):
    """The parts a budget counts for the release ``rel``: its cost parts, with two changes
    that keep a budget from counting less than a release claims.

    - A Gaussian part whose epsilon is larger than its own sigma and sensitivity prove (a
      record may claim more, never less, :func:`check_part`) counts at its epsilon, as a pure
      (eps, delta) part, not by its rho.
    - When the release's claim (``rel.claim``, :func:`bayesdp.releases.cost.claim_of`) is
      larger than the basic composition of its parts (a conservative claim, or a cost part the
      record lacks, such as a deleted private bounds estimate), the release counts as one pure
      part of its claim.

    Pure parts compose by basic composition (:func:`budget`)."""
    parts = []
    for p in rel.privacy_cost:
        p = dict(p)
        if p["mechanism"] == _GAUSSIAN and p["epsilon"] is not None:
            own = _true_eps(p["sigma"], p["delta"], p["sensitivity"])
            if p["epsilon"] > own * (1 + 1e-9):
                p = _pure(p, f"counted at its epsilon, above the {own:.6g} its sigma proves")
        parts.append(p)
    claim = getattr(rel, "claim", None)
    if claim is None or claim.status != "verified" or any(p["epsilon"] is None for p in parts):
        return parts
    eps, dlt, _ = _compose([_holder_groups(parts, rel.holder_names)], "basic", None)
    if claim.epsilon <= eps * (1 + 1e-9) and claim.delta <= dlt * (1 + 1e-9):
        return parts
    return [_pure({"name": "claim", "epsilon": claim.epsilon, "delta": claim.delta,
                   "sensitivity": None, "sigma": None, "neighbouring": parts[0]["neighbouring"],
                   "note": ""},
                  f"counted at the release's stated claim, larger than its cost parts add up to "
                  f"(epsilon {eps:.6g}, delta {dlt:g}): a conservative claim, or a part the "
                  "record lacks")]


def budget(*releases, delta=None, accountant="zcdp", labels=None) -> Budget:
    """The total privacy cost when ONE holder released several times (sequential composition).

    ``releases``: Release objects (or lists of them; :func:`bayesdp.load_release` reads a
    file), all of the same holder (e.g. with and without intercept, or private bounds plus
    statistics). Each release's own cost is the largest over its holders (holders hold
    disjoint rows: parallel composition); the releases' costs add up:

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
    ``labels``: the names of the releases in the :class:`Budget` and in its errors, one per
    release (``bayesdp budget`` gives the file names); default "release 0", "release 1", ....
    Refused (BayesdpInputError naming the release and field): a part without a guarantee
    (``"unaccounted"``, bounds read off the data), mixed neighbouring relations, releases of
    different named holders, the same release given twice (use :func:`repeated` to count one
    cost several times).

    Not checked: whether the releases were seeded (``Release.seeded``). Seeded releases are
    reproducible, not private (docs/privacy.md, section 7), and releases made with the same
    seed share their noise, so their total is not a guarantee.
    """
    if accountant not in _ACCOUNTANTS:
        raise BayesdpInputError(f"accountant must be one of {_ACCOUNTANTS}, got {accountant!r}")
    if delta is not None:
        _, delta = privacy.check_epsilon_delta(1.0, delta)
    times = []
    rels, labels = _loaded(releases, times, labels)
    _check_composable(rels, labels)
    counted = [budget_parts(r) for r in rels]
    return compose_counted([(lab, c, r.holder_names) for lab, c, r in zip(labels, counted, rels)],
                           times=times, delta=delta, accountant=accountant)


def compose_counted(entries, *, times=None, delta=None, accountant="zcdp") -> Budget:
    """The :class:`Budget` of releases given by what a budget counts of each: ``entries`` are
    ``(label, parts, holder_names)`` (the parts :func:`budget_parts` gives, as a holder's ledger
    stores them, :class:`bayesdp.Ledger`), each counted ``times[k]`` times (default once).
    The composition of :func:`budget`; parts without a guarantee and mixed neighbouring
    relations are refused here too."""
    if accountant not in _ACCOUNTANTS:
        raise BayesdpInputError(f"accountant must be one of {_ACCOUNTANTS}, got {accountant!r}")
    times = [1] * len(entries) if times is None else list(times)
    relation = None
    for lab, parts, _ in entries:
        for i, p in enumerate(parts):
            where = f"{lab}: privacy.cost.parts[{i}]"
            if p["mechanism"] == _UNACCOUNTED or p["epsilon"] is None:
                raise BayesdpInputError(
                    f"{where} ({p['name']}, mechanism {p['mechanism']!r}) has no DP guarantee "
                    f"that can be composed: {p['note'] or 'no epsilon recorded'}")
            if relation is None:
                relation = (p["neighbouring"], where)
            elif p["neighbouring"] != relation[0]:
                raise BayesdpInputError(
                    f"{where}.neighbouring is {p['neighbouring']!r} but {relation[1]} has "
                    f"{relation[0]!r}: costs under different neighbouring relations do not compose")
    per = [_holder_groups(parts, names) for _, parts, names in entries]
    eps, dlt, rho = _compose([g for g, n in zip(per, times) for _ in range(n)], accountant, delta)
    rows = tuple({"release": lab, **p} for lab, parts, _ in entries for p in parts)
    return Budget(accountant=accountant, epsilon=eps, delta=dlt, rho=rho, parts=rows,
                  releases=tuple(lab for lab, _, _ in entries))


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
