"""adaSSP (Wang 2018) and its distributed form (paper appendix C.2, eq. 15).

Each holder j, from its clipped rows, releases

    S_hat_j, z_hat_j      Gaussian mechanism on [vech(S_j), z_j]            budget (2 eps/3, 2 delta/3)
    lambda_min_tilde_j = max(lambda_min(S_j) + sqrt(ln(6/delta)) s v - ln(6/delta) s, 0),
                          s = B_x^2 / (eps/3), v ~ N(0, 1)                    budget (eps/3, delta/3)
    lambda_j = max(0, s sqrt(d ln(6/delta) ln(2 d^2 / p)) - lambda_min_tilde_j)

and the analyst computes theta = (sum_j S_hat_j + I sum_j lambda_j)^{-1} sum_j z_hat_j   (eq. 15).

``budget="paper-code"`` follows the authors' code instead: S and z each get (eps/3, delta/3),
with sensitivities B_x^2 and B_x B_y.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .. import privacy
from ..errors import BayesdpInputError
from ..releases.holders import node_labels, unique_in_order
from ..releases.mechanism import symmetric_noise
from ..releases.rows import check_rows, resolve_bounds

_ADASSP_BUDGETS = ("paper", "paper-code")


def adassp(X, y, *, epsilon, delta, bounds, nodes=1, seed=None, p=0.05, budget="paper",
           calibration="exact", split="random"):
    """Distributed adaSSP estimate of theta (paper eq. 15); returns a (d,) array.

    ``bounds`` are public (B_x, B_y) (rows are clipped to them) or "data" (not private; warns).
    ``nodes``: holder count (rows assigned by ``split``, "random" or "contiguous", as in
    :func:`bayesdp.release`) or per-row labels. ``p``: failure probability of
    the eigenvalue bound (0.05 as in the paper). ``budget``: "paper" or "paper-code".
    """
    eps, dlt = privacy.check_epsilon_delta(epsilon, delta)
    if budget not in _ADASSP_BUDGETS:
        raise BayesdpInputError(f"budget must be one of {_ADASSP_BUDGETS}, got {budget!r}")
    if not 0 < p < 1:
        raise BayesdpInputError(f"p must lie in (0, 1), got {p}")
    X, y = check_rows(X, y)
    labels, holders = node_labels(nodes, X, y, split, seed)
    if split == "contiguous" and holders is not None and len(holders) > 1:
        warnings.warn("adassp(split='contiguous'): the authors' split moves other rows between "
                      "holders when one row is added or removed, so the estimate is not "
                      "(eps, delta)-DP under add/remove-one neighbouring (see docs/privacy.md)",
                      UserWarning, stacklevel=2)
    (bx, by), _ = resolve_bounds(bounds, X, y)
    X, y, _ = privacy.clip_rows(X, y, bx, by)
    groups = holders if holders is not None else unique_in_order(np.asarray(labels))
    masks = [labels == lab for lab in groups]
    S = np.stack([X[m].T @ X[m] for m in masks])
    z = np.stack([X[m].T @ y[m] for m in masks])
    return adassp_from_sums(S, z, epsilon=eps, delta=dlt, bounds=(bx, by),
                            rng=np.random.default_rng(seed), p=p, budget=budget,
                            calibration=calibration)


def adassp_from_sums(S, z, *, epsilon, delta, bounds, rng, p=0.05, budget="paper",
                     calibration="exact"):
    """Distributed adaSSP (eq. 15) from each holder's exact sums of clipped rows: S (J, d, d)
    = X_j^T X_j and z (J, d) = X_j^T y_j, rows clipped to ``bounds`` = (B_x, B_y). Each holder's
    noise is drawn from ``rng`` in holder order (S, z, then the eigenvalue's), as
    :func:`adassp` draws it. Returns a (d,) array."""
    eps, dlt = privacy.check_epsilon_delta(epsilon, delta)
    bx, by = bounds
    S, z = np.asarray(S, dtype=float), np.asarray(z, dtype=float)
    d = S.shape[-1]
    if budget == "paper":
        sig = privacy.gaussian_sigma(2 * eps / 3, 2 * dlt / 3, privacy.sensitivity_sz(bx, by), calibration)
        sig_s = sig_z = sig
    else:
        sig_s = privacy.gaussian_sigma(eps / 3, dlt / 3, bx**2, calibration)
        sig_z = privacy.gaussian_sigma(eps / 3, dlt / 3, bx * by, calibration)
    s = bx**2 / (eps / 3)
    log6 = math.log(6 / dlt)
    A = np.zeros((d, d))
    b = np.zeros(d)
    lam = 0.0
    for Sj, zj in zip(S, z):
        A += Sj + sig_s * symmetric_noise(rng, d)
        b += zj + sig_z * rng.standard_normal(d)
        lmin = np.linalg.eigvalsh(Sj)[0]
        lmin_t = max(lmin + math.sqrt(log6) * s * rng.standard_normal() - log6 * s, 0.0)
        lam += max(0.0, s * math.sqrt(d * log6 * math.log(2 * d**2 / p)) - lmin_t)
    return np.linalg.solve(A + lam * np.eye(d), b)
