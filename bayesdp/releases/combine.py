"""Putting per-holder releases together: :func:`combine_releases`."""

from __future__ import annotations

import dataclasses
import json
import os

import numpy as np

from ..accounting import same_release_pairs
from ..errors import BayesdpInputError, CombineError
from .files import load_release
from .holders import is_default_holder_name
from .release_object import Release


def combine_releases(*releases) -> Release:
    """Put per-holder releases together into one analysis set.

    Refuses releases whose d, feature names, bounds, privacy parameters, calibration or noise
    design differ, and releases made from tables whose encodings (formula, declared bounds of
    its columns, the design they give) are not identical. Holders hold disjoint rows, so the union keeps each holder's (eps, delta)
    guarantee (parallel composition).

    Duplicates are refused with a :class:`CombineError` naming them, because counting one
    holder twice halves its noise in the posterior and double-counts its rows:

    - the same statistics: two holders (in any of the inputs) whose ``S_hat`` and ``z_hat``
      agree in every coordinate to within a millionth of their noise std
      (:func:`bayesdp.accounting.same_release_pairs`), bit for bit or not. What identifies a
      release is its noise draw: two holders' independent noise makes their statistics differ
      by about sigma sqrt(2) in every coordinate, so agreement far below sigma is the same
      release given twice (``bayesdp combine a.json a.json``, or a copy rewritten by another program, which
      may change the last digits), whatever the names say.
    - the same holder name in two inputs, when it is a name someone chose (``hospital_a``).
      Names bayesdp makes up when none is given - "0", "1", ... and "k:j" from an earlier
      combine - carry no identity: when such names clash between inputs, every made-up name is
      renamed ``"<k>:<name>"``, k the position of its input, and the holders are kept.
    """
    rels = []
    labels = []
    for r in releases:
        for x in (r if isinstance(r, (list, tuple)) else [r]):
            rels.append(x)
            labels.append(f"release {len(labels)}" + (f" ({os.fspath(x)})"
                                                      if isinstance(x, (str, os.PathLike)) else ""))
    rels = [load_release(r) if isinstance(r, (str, os.PathLike)) else r for r in rels]
    if not rels:
        raise BayesdpInputError("combine_releases needs at least one release")
    first = rels[0]
    # holders that estimated their bounds privately (each from its own rows) have bounds of
    # their own; they combine when their costs have the same form (docs/privacy.md section 9)
    own_bounds = all(r.bounds_part is not None and r.bounds is not None for r in rels)
    for k, r in enumerate(rels[1:], start=1):
        _check_same_table(first, r, k)
        for field in ("d", "feature_names", "intercept", "average_rows", "bounds", "epsilon",
                      "delta", "calibration", "noise_mechanism", "noise_grid", "sensitivity",
                      "bounds_from_data"):
            if own_bounds and field in ("bounds", "sensitivity"):
                continue
            a, b = getattr(first, field), getattr(r, field)
            if a != b:
                raise CombineError(
                    f"cannot combine: release {k} has {field}={b!r} but release 0 has {a!r}"
                )
        a, b = _cost_form(first), _cost_form(r)
        if own_bounds and a != b:
            raise CombineError(
                f"cannot combine: release {k} has privacy_cost parts {b} but release 0 has {a} "
                "(name, mechanism, epsilon, delta of each mechanism run on the rows)")
        for field in ("yty_hat", "noise_cov"):
            if (getattr(first, field) is None) != (getattr(r, field) is None):
                raise CombineError(f"cannot combine: {field} is present in some releases only")
    holders = [(k, h, r.S_hat[j], r.z_hat[j]) for k, r in enumerate(rels)
               for j, h in enumerate(r.holder_names)]
    dup = same_release_pairs(rels)
    if dup:
        (k0, h0), (k, h) = dup[0]
        raise CombineError(
            f"cannot combine: holder {h!r} of {labels[k]} has the same statistics (S_hat and "
            f"z_hat, to within a millionth of the noise) as holder {h0!r} of {labels[k0]}: the "
            "same holder's release is given twice, and counting it twice would double its rows "
            "and halve its noise")
    owner = {}
    for k, h, _, _ in holders:
        if not is_default_holder_name(h) and h in owner and owner[h] != k:
            raise CombineError(
                f"cannot combine: holder {h!r} is in {labels[owner[h]]} and in {labels[k]}; the "
                "same holder must not be counted twice (if these are different holders, give "
                "them different names, e.g. bayesdp release --holder NAME)")
        owner.setdefault(h, k)
    names = [h for _, h, _, _ in holders]
    if len(set(names)) != len(names):
        names = [f"{k}:{h}" if is_default_holder_name(h) else h for k, h, _, _ in holders]
        if len(set(names)) != len(names):
            dup = sorted({h for h in names if names.count(h) > 1})
            raise CombineError(f"cannot combine: holder names {dup} are not unique after "
                               "renaming the default names as '<k>:<name>'; give the holders "
                               "distinct names")
    cat = lambda f: None if getattr(first, f) is None else np.concatenate([getattr(r, f) for r in rels])  # noqa: E731
    cost = _combined_cost(rels, names, labels)
    return dataclasses.replace(
        first,
        S_hat=np.concatenate([r.S_hat for r in rels]),
        z_hat=np.concatenate([r.z_hat for r in rels]),
        n=np.concatenate([r.n for r in rels]),
        sigma_s=np.concatenate([r.sigma_s for r in rels]),
        sigma_z=np.concatenate([r.sigma_z for r in rels]),
        holder_names=tuple(names),
        seeded=any(r.seeded for r in rels),
        n_clipped=None if any(r.n_clipped is None for r in rels) else np.concatenate([r.n_clipped for r in rels]),
        n_rows=None if any(r.n_rows is None for r in rels) else np.concatenate([r.n_rows for r in rels]),
        n_clamped=None if any(r.n_clamped is None for r in rels)
        else np.concatenate([r.n_clamped for r in rels]),
        yty_hat=cat("yty_hat"),
        sigma_yty=cat("sigma_yty"),
        noise_cov=cat("noise_cov"),
        dp_claim_valid=all(r.dp_claim_valid for r in rels),
        dp_claim_note="; ".join(sorted({r.dp_claim_note for r in rels if r.dp_claim_note})),
        privacy_cost=cost,
        provenance={**first.provenance, "combined_from": len(rels)},
        spec=None,  # several releases: no one spec made them all
        **(_largest_bounds(rels) if own_bounds else {}),
    )


def _check_same_table(first, r, k):
    """Releases made from tables combine only when their encodings are identical: the same
    formula, the same declared bounds and so the same design (a table release with a matrix
    release never)."""
    a, b = first.table, r.table
    if a is None and b is None:
        return
    if a is None or b is None:
        has, hasnt = (k, 0) if a is None else (0, k)
        raise CombineError(
            f"cannot combine: release {has} was encoded from a table by a formula and release "
            f"{hasnt} was not; holders must release by the same formula and declared bounds")
    if a != b:
        raise CombineError(
            f"cannot combine: release {k} was encoded differently from release 0 (its "
            f"{a.difference(b)}); holders must release by the same formula and the same "
            "declared bounds")


def _combined_cost(rels, names, labels):
    """The cost parts of combined releases. Holders hold disjoint rows, so the combined cost is
    the largest holder's (parallel composition), not the sum: equal costs are kept as they are;
    otherwise each part is tagged with the holders it applies to (``holders``) and the total
    is the maximum over holders (:mod:`bayesdp.accounting`). Costs under different
    neighbouring relations cannot be compared and are refused."""
    ref = None
    for k, r in enumerate(rels):
        for i, p in enumerate(r.privacy_cost):
            if ref is None:
                ref = (p["neighbouring"], k, i)
            elif p["neighbouring"] != ref[0]:
                raise CombineError(
                    f"cannot combine: {labels[k]} has privacy.cost.parts[{i}].neighbouring = "
                    f"{p['neighbouring']!r} but {labels[ref[1]]} has {ref[0]!r} (parts[{ref[2]}]); "
                    "costs under different neighbouring relations cannot be composed")
    keys = {json.dumps(list(r.privacy_cost), sort_keys=True) for r in rels}
    if len(keys) == 1 and not any("holders" in p for p in rels[0].privacy_cost):
        return rels[0].privacy_cost
    parts, pos = [], 0
    for r in rels:
        new = dict(zip(r.holder_names, names[pos:pos + r.J]))
        pos += r.J
        for p in r.privacy_cost:
            parts.append({**p, "holders": [new[h] for h in p.get("holders", r.holder_names)]})
    return tuple(parts)


def _cost_form(rel):
    """What must agree between releases to combine them: each cost part's name, mechanism,
    epsilon and delta (the noise and the bounds themselves may differ by holder)."""
    return [(p.get("name"), p.get("mechanism"), p.get("epsilon"), p.get("delta"))
            for p in rel.privacy_cost]


def _largest_bounds(rels):
    """Fields of a combination of releases with privately estimated bounds of their own: the
    largest bounds and sensitivity over them (every holder's clipped rows satisfy those bounds;
    each holder's own noise stays in its sigma_s, sigma_z; each holder's cost parts are kept,
    tagged with its holders, by :func:`_combined_cost`)."""
    bx = max(r.bounds[0] for r in rels)
    by = max(r.bounds[1] for r in rels)
    sens = None if any(r.sensitivity is None for r in rels) \
        else max(r.sensitivity for r in rels)
    return {"bounds": (bx, by), "sensitivity": sens}
