"""The mechanism on the rows: clipping, exact per-holder sums, and the noise (paper eqs. 2-3).

    S_hat_j = S_j + sigma M_j,   z_hat_j = z_j + sigma v_j   (y^T y_j + sigma w_j, appendix C.1)

with sigma = Delta * sigma(eps, delta) (:mod:`bayesdp.privacy`). Rows are clipped to the
bounds before the sums are formed, so the sensitivity is the one actually enforced. With
``noise="secure"`` the sums are exact integers on a grid and the noise is the discrete Gaussian
of :mod:`bayesdp.secure_noise` (docs/privacy.md section 10).
"""

from __future__ import annotations

import datetime
import math
import warnings

import numpy as np

from .. import __version__, accounting, privacy, secure_noise
from ..errors import BayesdpInputError
from .cost import contiguous_cost_note
from .holders import check_holder_count
from .layout import unvech
from .ledger import check_before_noise
from .release_object import INTERCEPT_NAME, MAX_ABS, Release

def symmetric_noise(rng, d) -> np.ndarray:
    """A d x d symmetric matrix M with its upper triangle incl. the diagonal iid N(0, 1) and the
    lower triangle mirrored: the noise M_j of eq. (2)."""
    return unvech(rng.standard_normal(d * (d + 1) // 2), d)


def secure_plan(spec, bounds, d):
    """Grid, sensitivity and noise scale (:func:`secure_noise.plan`) of a secure release of
    ``spec`` with ``d`` features clipped to ``bounds``; None for float noise."""
    if spec.noise != "secure":
        return None
    sens = privacy.sensitivity_release(*bounds, intercept=spec.intercept,
                                       average_rows=spec.average_rows,
                                       with_yty=spec.include_yty)
    dim = secure_noise.released_dim(d, intercept=spec.intercept, with_yty=spec.include_yty)
    return secure_noise.plan(spec.epsilon, spec.delta, sens, dim)


_BOUNDS_STREAM = 0x626F756E6473  # b"bounds": the seed stream of the private bounds estimate


def estimate_bounds(hist, spec):
    """Private (B_x, B_y) and their cost part from the histogram ``hist`` of the rows, with
    ``spec.bounds_epsilon``; the draw has its own stream of ``spec.seed``, so a seeded
    release's noise does not depend on it."""
    seed = spec.seed
    rng = np.random.default_rng(None if seed is None else [seed, _BOUNDS_STREAM])
    return privacy.estimate_bounds(hist, spec.bounds_epsilon, rng)


def noisy_release(acc, spec, *, feature_names, source, split="labels", plan=None,
                  bounds_part=None, table=None):
    """The release of the accumulated statistics ``acc`` (:class:`PartialStatistics`) by the
    mechanism of ``spec`` (:class:`~bayesdp.releases.spec.ReleaseSpec`, which it records).

    ``feature_names``: the d names of the features; ``source``: where the rows came from, and
    ``split``: how they were assigned to holders ("labels", "random" or "contiguous"), both for
    the provenance. ``plan`` (secure noise, :func:`secure_plan`): discrete Gaussian noise on the
    grid sums ``acc`` holds. ``bounds_part``: the cost of a private bounds estimate; the
    statistics get the rest of epsilon (basic composition). ``table``: the
    :class:`~bayesdp.releases.formula.TableEncoding` of rows encoded from a table (recorded
    with the values clamped per column, ``acc.clamp_columns``)."""
    eps, dlt = spec.epsilon, spec.delta
    calibration, include_yty, seed = spec.calibration, spec.include_yty, spec.seed
    data_independent = spec.bounds != "data"  # public or DP-estimated bounds
    bx, by = acc.bounds
    k = acc.average_rows
    eps_stats = eps
    if bounds_part is not None:
        eps_stats = eps - bounds_part["epsilon"]
        if bounds_part["epsilon"] + eps_stats > eps:  # rounding: the total must not exceed eps
            eps_stats = math.nextafter(eps_stats, 0.0)
    if plan is None:
        sens = privacy.sensitivity_release(bx, by, intercept=acc.intercept, average_rows=k,
                                           with_yty=include_yty)
        sigma = privacy.gaussian_sigma(eps_stats, dlt, sens, calibration)
    else:
        sens, sigma = plan["sensitivity"], plan["sigma"]
    if not sigma <= MAX_ABS / 100:  # the noisy statistics must stay below MAX_ABS
        raise BayesdpInputError(
            f"epsilon, bounds: the noise scale sigma = sensitivity * sigma(eps, delta) = "
            f"{sigma:.3g} (epsilon={eps:g}, delta={dlt:g}, B_x={bx:g}, B_y={by:g}) is too large "
            f"for float64 statistics; use a larger epsilon or smaller bounds")
    if calibration == "paper-code":
        warnings.warn(privacy.PAPER_CODE_WARNING, UserWarning, stacklevel=3)
    labels = list(acc.stats)
    rows = np.array([acc.stats[lab].n for lab in labels])
    if split == "labels":
        check_holder_count(len(labels), int(rows.sum()))
    if np.any(rows < k):
        few = [str(lab) for lab, nj in zip(labels, rows) if nj < k]
        how = " (split='random' assigns rows at random, so a holder can get none; use fewer " \
              "holders)" if split == "random" and k == 1 else ""
        need = "at least one row" if k == 1 else f"at least average_rows={k} rows (one group)"
        shown = ", ".join(few[:10]) + (f" and {len(few) - 10} more" if len(few) > 10 else "")
        raise BayesdpInputError(f"nodes: holder(s) {shown} got "
                                f"{'no rows' if k == 1 else 'fewer than ' + str(k) + ' rows'}"
                                f"{how}; every data holder needs {need}")
    if not acc.intercept:
        far = acc.uncentred_columns(feature_names)
        if far:
            warnings.warn(
                "release without an intercept, but column(s) " + ", ".join(far[:5])
                + (" ..." if len(far) > 5 else "") + " are far from centred (|mean| > sd): a "
                "regression through the origin then fits badly unless E[y | x = 0] = 0. Consider "
                "intercept=True (command line: --intercept). This check reads the rows; it is "
                "shown to the data holder only and is not part of the release.",
                UserWarning, stacklevel=3)
    dp_valid = data_independent and calibration != "paper-code"
    notes = []
    if not data_independent:
        notes.append("bounds were read off the data, so the noise scale is not private")
    if calibration == "paper-code":
        notes.append("calibration='paper-code' under-calibrates sigma (authors' MATLAB bug)")
    if calibration == "classical":
        note = privacy.classical_shortfall(eps_stats, dlt)
        if note:
            dp_valid = False
            notes.append(note)
            warnings.warn(note, UserWarning, stacklevel=3)
    cost_sens, cost_note = sens, ""
    if split == "contiguous" and len(labels) > 1:
        factor = privacy.contiguous_split_change(int(rows.sum()), len(labels))
        note = _contiguous_note(factor, sigma, sens, eps, dlt, eps - eps_stats)
        dp_valid = False
        notes.append(note)
        warnings.warn(note, UserWarning, stacklevel=3)
        cost_sens, cost_note = factor * sens, contiguous_cost_note(factor)
    if data_independent and plan is not None:
        cost = secure_noise.statistics_part(eps, dlt, sigma=sigma, sensitivity=sens,
                                            grid=plan["grid"], dim=plan["dim"])
    elif data_independent:
        cost = accounting.gaussian_part(sigma, cost_sens, dlt, stated_epsilon=eps_stats,
                                        note=cost_note)
    else:
        cost = accounting.non_private_part(notes[0], sigma=sigma, sensitivity=sens)
    holder_names = (spec.holder_name,) if spec.holder_name is not None and len(labels) == 1 \
        else tuple(str(lab) for lab in labels)
    # a holder's ledger refuses a release past its cap with the exact cost, before any noise
    check_before_noise((cost,) if bounds_part is None else (bounds_part, cost), holder_names)
    rng = np.random.default_rng(seed)  # seed None: fresh OS entropy
    # the grouping of average_rows has its own stream, so the noise draws do not depend on it
    acc.finish(secure_noise.secret_permutation if plan is not None else
               np.random.default_rng(None if seed is None else [seed, GROUPING_STREAM]
                                     ).permutation)
    D = acc.d + int(acc.intercept)
    nS = D * (D + 1) // 2
    S_hat, z_hat, yty_hat = [], [], []
    for lab in labels:
        st = acc.stats[lab]
        if plan is not None:  # exact integer sums on the grid plus discrete Gaussian noise
            used = nS + D + int(include_yty)
            vals = secure_noise.noisy_grid_values(st.K[:used], plan["scale"], plan["grid"])
            S_hat.append(unvech(vals[:nS], D))
            z_hat.append(vals[nS:nS + D])
            if include_yty:
                yty_hat.append(float(vals[-1]))
            continue
        S_hat.append(st.S + sigma * symmetric_noise(rng, D))
        z_hat.append(st.z + sigma * rng.standard_normal(D))
        if include_yty:
            yty_hat.append(st.yty + sigma * rng.standard_normal())
    n = np.array([acc.stats[lab].n_used for lab in labels])
    if k > 1:
        notes.append(_averaging_note(k, bx, by, acc.intercept, include_yty, sens))
    J = len(labels)
    design = "[1, x]" if acc.intercept else "x"
    if table is not None:
        design += f" encoded from a table by the formula {table.formula!r}"
    if k > 1:
        design = f"sums of {design} over random groups of {k} rows, divided by sqrt({k})"
    return Release(
        S_hat=np.stack(S_hat),
        z_hat=np.stack(z_hat),
        n=n,
        sigma_s=np.full(J, sigma),
        sigma_z=np.full(J, sigma),
        feature_names=((INTERCEPT_NAME,) if acc.intercept else ()) + tuple(feature_names),
        holder_names=holder_names,
        epsilon=eps,
        delta=dlt,
        calibration=calibration,
        sensitivity=sens,
        bounds=(bx, by),
        bounds_from_data=not data_independent,
        seeded=seed is not None,
        n_clipped=np.array([acc.stats[lab].n_clipped for lab in labels]),
        yty_hat=np.array(yty_hat) if include_yty else None,
        sigma_yty=np.full(J, sigma) if include_yty else None,
        dp_claim_valid=dp_valid,
        dp_claim_note="; ".join(notes),
        intercept=acc.intercept,
        average_rows=k,
        n_rows=rows if k > 1 else None,
        privacy_cost=(cost,) if bounds_part is None else (bounds_part, cost),
        noise_mechanism="gaussian" if plan is None else secure_noise.MECHANISM,
        noise_grid=None if plan is None else plan["grid"],
        spec=spec,
        table=table,
        n_clamped=None if table is None else acc.n_clamped,
        provenance={
            "created_by": f"bayesdp {__version__}",
            "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "mechanism": ("Gaussian" if plan is None else "discrete Gaussian")
            + " mechanism on [vech(S), z"
            + (", y^T y]" if include_yty else "]")
            + f" of the rows {design}"
            + (f"; sigma = sensitivity * sigma_{calibration}("
               + ("eps, delta)" if bounds_part is None
                  else "eps - eps of the bounds estimate, delta)") if plan is None else
               f", each row's contribution rounded to the grid {plan['grid']!r}; sigma = grid * "
               f"{plan['scale']} (the discrete Gaussian's scale in grid steps, from its (eps, "
               "delta) bound; docs/privacy.md section 10)"),
            "source": source,
            "split": split,
            **({"bounds": f"estimated privately from the {int(rows.sum())} rows of this release "
                          f"(exponential mechanism, eps={bounds_part['epsilon']:g}; "
                          "docs/privacy.md section 11)"} if bounds_part is not None else {}),
        },
    )


GROUPING_STREAM = 0x67726F757073  # b"groups": the seed stream of average_rows' random groups


def _averaging_note(k, bx, by, intercept, include_yty, sens):
    """dp_claim_note of a release with average_rows = k > 1 (docs/privacy.md section 3b)."""
    row = privacy.sensitivity_release(bx, by, intercept=intercept, with_yty=include_yty)
    return (f"average_rows={k}: each holder's rows were summed in uniformly random groups of {k} "
            f"(secret grouping; the n mod {k} rows left over dropped) and divided by sqrt({k}). "
            f"The paper (appendix B.1) says these statistics have the same sensitivity as the "
            f"original ones; they do not: adding or removing one row can add or remove a whole "
            f"group (up to {k} x the per-row sensitivity) or swap one row of a group, so the "
            f"noise is calibrated to sensitivity {sens:.6g} = {sens / row:.4g} x the per-row "
            f"{row:.6g}, and the stated (eps, delta) holds")


def _contiguous_note(k, sigma, sens, eps, dlt, eps_bounds=0.0):
    """``eps_bounds``: the eps of a private bounds estimate, added to the statistics' true eps."""
    true_eps = eps_bounds + privacy.true_epsilon(sigma, dlt, sensitivity=k * sens)
    replace_eps = eps_bounds + privacy.true_epsilon(sigma, dlt, sensitivity=2 * sens)
    return (f"split='contiguous' (the authors' split of rows in order): adding or removing one "
            f"row moves other rows between holders, so the whole release can change by up to "
            f"{k:.4g} x the sensitivity it was calibrated for; under add/remove-one neighbouring "
            f"it is only ({true_eps:.4g}, {dlt:g})-DP, not ({eps:g}, {dlt:g}). Under replace-one "
            f"neighbouring with row order and n fixed it is ({replace_eps:.4g}, {dlt:g})-DP. Use "
            f"split='random' (the default) for a private split")
