"""The cost a release's own fields give, and the check of a recorded cost against it.

A release records its privacy cost as parts (:mod:`bayesdp.accounting`). This module derives the
statistics part from the fields of the release itself (the noise scales, the bounds and design,
the claim (epsilon, delta), the calibration, the noise mechanism and the split):
:func:`derive_cost` fills the record of a release without one, and :func:`verify_cost` refuses a
record that claims less than the release's own noise costs (docs/privacy.md, "Privacy cost and
budget"; docs/release-format.md).
"""

from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from .. import privacy, secure_noise
from ..accounting import (ADD_REMOVE, DISCRETE_GAUSSIAN, EXPONENTIAL, epsilon_at, gaussian_part,
                          non_private_part, total_cost, unaccounted_part, zcdp_epsilon)
from ..errors import BayesdpInputError

_CALIBRATION_RTOL = 1e-6
"""A release's noise may exceed what its calibration gives at its stated epsilon by this much
(relative) before its part records the smaller epsilon the noise pays for (:func:`derive_cost`;
the release's claim stays the stated one, :func:`claim_of`)."""

_CONTIGUOUS_EXACT_LIMIT = 10**7
"""Rows times holders up to which the reader recomputes the contiguous split's factor exactly
(privacy.contiguous_split_change is O(n J)); beyond, it checks against sqrt(4 J - 3), which the
factor is never below."""


_CLAIM_RTOL = 1e-9
"""A stated epsilon may fall below what the noise proves at the stated delta by this much
(relative: float64 rounding of the calibration) and still be met (:func:`claim_of`)."""

NO_CLAIM = "no privacy claim"
"""How tables, attributes and the command line name a release without a DP guarantee."""


class Claim(NamedTuple):
    """The privacy claim a release reports (:func:`claim_of`; ``Release.claim``).

    ``epsilon``, ``delta``: the (eps, delta) reported everywhere (fit attributes, tables, the
    command line); None with ``status`` "none". ``status``:

    - ``"verified"``: the stated (eps, delta) is met by the recorded noise (the cost record,
      itself checked against the noise: :func:`verify_cost`), and is reported as stated (a
      stated claim weaker than the noise pays for is reported as written);
    - ``"recomputed"``: the stated claim is stronger than the noise pays for; the numbers are
      what it pays for (the cost record's total, :func:`bayesdp.accounting.total_cost`), and
      ``load_release`` refuses such a file unless it says so itself (``dp_claim_valid``
      false, as a ``calibration="paper-code"`` release does) or is read with ``strict=False``;
    - ``"unverified"``: the release's own claim (``dp_claim_valid`` true, what it is in
      ``dp_claim_note``) where the noise record cannot account it: a network protocol's local
      guarantee (docs/adapters/); ``epsilon`` and ``delta`` are then None (what the noise
      pays for is unknown), the stated numbers in ``note``;
    - ``"none"``: no guarantee (bounds read off the data, no noise, no claim recorded).

    ``note``: why, in words (empty for "verified").
    """

    epsilon: Optional[float]
    delta: Optional[float]
    status: str
    note: str

    def __str__(self):
        if self.status == "none":
            return NO_CLAIM
        if self.status == "unverified":
            return "a privacy claim bayesdp cannot verify (dp_claim_note)"
        text = f"epsilon={self.epsilon:g}, delta={self.delta:g}"
        return text + {"verified": "", "recomputed": " (recomputed from the noise)",
                       "unverified": " (not verified by the noise record)"}[self.status]


def _no_guarantee(parts):
    """The note of the first part without a guarantee that is not merely unaccounted, or None."""
    for p in parts:
        if p["epsilon"] is None and p["mechanism"] != "unaccounted":
            return p["note"] or "no guarantee"
    return None


def claim_of(rel) -> Claim:
    """The claim ``rel`` reports: its stated (``epsilon``, ``delta``) when its noise pays for
    it, else what the noise pays for (:class:`Claim`).

    The noise pays for (eps, delta) when the cost parts (``rel.privacy_cost``, verified
    against the noise when read from a file) prove at most eps at delta:
    :func:`bayesdp.accounting.epsilon_at`, zCDP or basic composition, exact (Balle & Wang 2018,
    Theorem 8) for one Gaussian part. A record that accounts nothing (``"unaccounted"``) is
    replaced by the cost the release's own fields give (:func:`derive_cost`), so that an
    edited record cannot lift the check; where those give none either, the claim is
    "unverified" and reports no numbers.
    """
    parts = list(rel.privacy_cost)
    missing = _no_guarantee(parts)
    if missing is None and any(p["mechanism"] == "unaccounted" for p in parts):
        parts = list(derive_cost(rel))
        missing = _no_guarantee(parts)
        if missing is None and any(p["mechanism"] == "unaccounted" for p in parts):
            if not rel.dp_claim_valid or (rel.epsilon is None and not rel.dp_claim_note):
                return Claim(None, None, "none", f"{NO_CLAIM}: " + "; ".join(
                    p["note"] for p in parts if p["note"]))
            stated = "" if rel.epsilon is None else \
                f" (it states epsilon={rel.epsilon:g}, delta={rel.delta:g})"
            return Claim(None, None, "unverified", "the claim is the release's own"
                         f"{stated}: its noise record cannot account it, so no number is "
                         "reported as paid for")
    if missing is not None:
        return Claim(None, None, "none", f"{NO_CLAIM}: {missing}")
    if rel.epsilon is None or rel.delta is None:
        return Claim(None, None, "none", f"{NO_CLAIM}: no epsilon and delta recorded")
    eps, dlt = float(rel.epsilon), float(rel.delta)
    proven = epsilon_at(parts, rel.holder_names, dlt)
    if proven is None:
        return Claim(eps, dlt, "unverified", "the claim is the release's own: its noise record "
                     "cannot account it (" + "; ".join(p["note"] for p in parts if p["note"])
                     + ")")
    if eps >= proven * (1 - _CLAIM_RTOL):
        return Claim(eps, dlt, "verified", "")
    total = total_cost(parts, rel.holder_names)
    at_stated = f"epsilon {proven:.6g}" if math.isfinite(proven) else "no finite epsilon"
    return Claim(total["epsilon"], total["delta"], "recomputed",
                 f"the stated epsilon={eps:g}, delta={dlt:g} is not met by the noise: it pays "
                 f"for epsilon={total['epsilon']:.6g} at delta={total['delta']:g} "
                 f"({at_stated} at delta={dlt:g})")


_DERIVED_NOTE = "derived from the release's epsilon, delta, sigma and bounds"


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
      _CALIBRATION_RTOL, the part is still the true eps of sigma: the stated claim is then a
      conservative one, or the rest of epsilon went to a mechanism the record lacks (a private
      bounds estimate whose part was removed); either way the release's claim is the stated
      one (:func:`claim_of`) and a budget counts that (:func:`bayesdp.accounting.budget`).
    """
    if given is None:
        with np.errstate(all="ignore"):  # extreme files: float64 limits are handled below
            part, _ = _statistics_cost(rel, list(range(rel.J)), [], _DERIVED_NOTE,
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
    _CONTIGUOUS_EXACT_LIMIT its lower bound sqrt(4 J - 3) when ``checking`` a record (exact
    False), else None."""
    if rows * J <= _CONTIGUOUS_EXACT_LIMIT:
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
    beyond _CONTIGUOUS_EXACT_LIMIT is its lower bound, and there is none for a combination of
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
    if rel.bounds_from_data:
        return done(non_private_part("bounds were read off the data, so the noise scale is not "
                                     "private", sigma=sig, sensitivity=sens))
    if sig == 0:
        return done(non_private_part("no noise", sigma=sig, sensitivity=sens))
    notes = [note] if note else []
    surplus = False
    if secure:
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
        surplus = sig > expected * (1 + _CALIBRATION_RTOL)
        if surplus:
            # more noise than the stated claim needs: a conservative claim, or part of epsilon
            # went to a mechanism the record lacks; the part is what the noise pays for, and
            # the release's claim (claim_of) stays the stated one, which budgets count
            less = f" (the stated {eps:g} less the other parts' {eps_other:g})" if others else ""
            notes.append(
                f"the noise (sigma = {sig:.6g}, holders[{j_min}].{field}) is more than "
                f"calibration={rel.calibration!r} gives at epsilon = {eps_stats:.6g}{less}: "
                "epsilon here is what the noise pays for, and the release's claim is the "
                "stated, larger one")
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
    stated = eps_stats if eps_stats > 0 and not surplus else None
    return done(gaussian_part(sig, cost_sens, dlt, stated_epsilon=stated, note="; ".join(notes)))


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
    and noise multiplier follow from its sigma and sensitivity, :func:`bayesdp.accounting.check_part`); a part
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
