"""Releasing from rows: :func:`release` (arrays or DataFrames in memory) and
:func:`release_file` (a CSV or Parquet file of any size, read in chunks). Both build the
mechanism's :class:`~bayesdp.releases.spec.ReleaseSpec` from their keywords (or take one),
check their rows, settle the bounds (public, private or read off the data), let the holders
accumulate their sums (:class:`~bayesdp.releases.partial.PartialStatistics`) and add the noise
once per holder (:func:`~bayesdp.releases.mechanism.noisy_release`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .. import privacy
from ..errors import BayesdpInputError
from .data_files import check_csv_header, iter_stacked
from .from_table import release_table, release_table_file
from .ledger import spending
from .holders import (check_one_holder, file_holder_count, node_labels, random_split,
                      split_entropy, split_rng)
from .mechanism import estimate_bounds, noisy_release, secure_plan
from .partial import PartialStatistics
from .release_object import Release
from .rows import (bounds_read_off, check_design, check_feature_names, check_rows,
                   dataframe_names, resolve_bounds)
from .spec import spec_of_call


def release(X, y=None, *, epsilon=None, delta=None, bounds=None, nodes=1, seed=None,
            calibration="exact", include_yty=True, feature_names=None, split="random",
            holder_name=None, intercept=False, average_rows=1, noise="float",
            bounds_share=None, bounds_range=None, formula=None, spec=None, ledger=None,
            cap=None) -> Release:
    """Release noisy (S_hat_j, z_hat_j, n_j) for each data holder with (eps, delta)-DP.

    Parameters
    ----------
    X, y : array-like or pandas DataFrame / Series
        Rows of the regression data; a DataFrame's column names become the feature names.
        With a ``formula``: X is the table (a pandas DataFrame) and y is left out.
    formula : str or None
        An R-style formula over the table's columns, e.g.
        ``"log(price) ~ carat + depth + C(cut)"`` (formulaic's syntax; docs/tables.md). Each
        row is encoded by it: numeric values clamped to their declared ranges (counted per
        holder and column in ``n_clamped``), categorical values matched to their declared
        levels (an undeclared level is an error), the transforms evaluated row by row (those
        that learn from the data, such as ``center()`` or ``poly()``, are refused). ``bounds``
        is then ``{column: (lo, hi)}`` for numeric columns and ``{column: [levels]}`` for
        columns used as ``C(column)`` (the first level is the reference), public values fixed
        without looking at the data; (B_x, B_y) are derived from them. The formula's intercept
        is ``intercept=True``. The feature names are the formula's column names, and the
        release records the encoding (``Release.table``) so new rows are encoded the same way.
    epsilon, delta : float
        Privacy parameters (eps > 0, 0 < delta < 1), per holder; holders hold disjoint rows.
        With ``bounds="private"`` they are the total over the bounds estimate and the
        statistics.
    bounds : (B_x, B_y), "private" or "data"
        Public bounds on ||x||_2 and |y|. Rows outside are clipped (x scaled to norm B_x, y to
        [-B_y, B_y]) and counted per holder (``n_clipped``). ``"private"`` estimates them from
        the rows with DP, spending ``bounds_share`` of epsilon (docs/privacy.md section 11).
        ``"data"`` reads them off the data: a loud warning, and the release is flagged
        ``bounds_from_data=True``. With a ``formula``: the declared bounds of its columns,
        ``{column: (lo, hi)}`` and ``{column: [levels]}`` (below).
    bounds_share : float in (0, 1), default 0.1
        With ``bounds="private"``: the share of epsilon spent on the bounds. B_x and B_y are
        each estimated by an exponential mechanism with eps * bounds_share / 2 over the
        candidates of ``bounds_range`` (20 per factor of 10), aiming at the m-th largest
        ||x_i|| and |y_i| with m = ceil(2 ln(K / 0.001) / (eps * bounds_share / 2)); the
        statistics get eps * (1 - bounds_share) and all of delta. The estimate uses all the
        rows of this call (one pair of bounds for all its holders) and needs at least 4 m of
        them.
    bounds_range : (low, high), default (1e-6, 1e9)
        With ``bounds="private"``: the public range of candidate bounds. Values above ``high``
        are clipped to at most ``high``.
    nodes : int or array of labels
        Number of holders J, or one holder label per row. With labels, a row's holder is a
        property of that row (e.g. the hospital that holds it).
    split : "random" | "contiguous"
        How a holder count J assigns rows. "random" (default): each row to a uniformly random
        holder, independently of its values and of the other rows, so adding or removing one
        row changes one holder's statistics by at most Delta (add/remove-one DP of the whole
        release) and the counts n_j (Multinomial(n, 1/J), random around n/J) say nothing about
        any row; the draw uses its own stream of ``seed`` (OS entropy without one). "contiguous": the authors' split (rows in
        order, floor(n/J) each, the remainder to the last holder), for reproducing the paper; a
        row removal moves other rows between holders, so the release is flagged
        ``dp_claim_valid=False`` with the true eps in ``dp_claim_note`` (and a warning).
    seed : int or None
        None draws the noise from fresh OS entropy (right for a real release). A seed makes the
        release reproducible (for experiments and tests) and is recorded as ``seeded``.
    calibration : "exact" | "classical" | "paper-code"
        "paper-code" reproduces the authors' buggy MATLAB sigma and is NOT (eps, delta)-DP.
    include_yty : bool
        Also release a noisy y^T y, in the same Gaussian mechanism as [vech(S), z] with the
        larger sensitivity of appendix C.1 (Delta^2 gains B_y^4). Default True: the default
        method ``eiv`` then estimates sigma_y^2 from it, which calibrates prediction intervals
        (docs/prediction.md); MCMC-B&S needs it. False gives the paper's release of eqs. (2)-(3)
        (its reproduction uses False).
    holder_name : str or None
        The name of the single holder (``nodes=1``), e.g. ``"hospital_a"``; it names the
        holder's coordinates after :func:`combine_releases`, which refuses the same name in two
        inputs. Default: ``"0"``, a made-up name that combine renames ``"<k>:0"``.
    intercept : bool
        Release the statistics of the rows [1, x] (appendix B.2): S_hat holds n, sum x and
        X^T X, z_hat holds sum y and X^T y, and the first feature (theta's first coordinate) is
        named "intercept". The sensitivity is that of the augmented row (docs/privacy.md, 3b).
        Without it, a warning (to the data holder only) names columns far from centred.
    average_rows : int
        k > 1 (appendix B.1): each holder's rows are summed in uniformly random groups of k
        (the n_j mod k rows left over are dropped) and divided by sqrt(k), which makes
        non-normal features closer to normal. ``n`` then counts groups and ``n_rows`` rows. The
        sensitivity is max(k Delta_row, Delta_swap), not the paper's Delta (docs/privacy.md 3b;
        the release's dp_claim_note says so). Needs memory for the rows.
    noise : "float" | "secure"
        "float" (default): numpy's PCG64 Gaussian noise, seedable; right for simulations and
        reproducible experiments. "secure": for real releases; each row's contribution is
        rounded to a power-of-two grid gamma and summed exactly, and discrete Gaussian noise
        N_Z(0, s^2) gamma is drawn exactly from the OS CSPRNG, so no floating-point leak
        remains. It cannot be seeded (a seed is an error) and needs calibration="exact". Its
        (eps, delta) rests on the discrete Gaussian's zCDP, so sigma is 1.084 times the float
        mode's at (1, 1e-5) (docs/privacy.md section 10).
    spec : ReleaseSpec or None
        All the parameters above except X, y, nodes and feature_names (the mechanism: epsilon,
        delta, bounds, calibration, noise, intercept, average_rows, include_yty, split, seed,
        holder_name, bounds_share, bounds_range, formula) as one checked
        :class:`~bayesdp.releases.spec.ReleaseSpec`, in place of those keywords (which must then
        be left out). The release keeps it as ``Release.spec``, so
        ``release(X2, y2, spec=rel.spec)`` releases other rows by the same mechanism.
    ledger : str, Path, :class:`~bayesdp.releases.ledger.Ledger` or None
        The data holder's ledger (docs/privacy.md, "A holder's ledger"): the release is
        composed with those it records and refused (``LedgerError``, nothing returned, the
        ledger unchanged) before its noise is drawn when the total would pass ``cap``;
        otherwise it is recorded (its file's content hash) before it is returned.
    cap : float or None
        The largest total epsilon of the ledger (with a path as ``ledger``; a
        :class:`~bayesdp.releases.ledger.Ledger` carries its own).

    Noise: S_hat_j = S_j + sigma M_j, z_hat_j = z_j + sigma v_j (eqs. 2-3) (and yty_hat_j =
    y_j^T y_j + sigma u_j), sigma = Delta * sigma(eps, delta), Delta = sqrt(B_x^4 + B_x^2 B_y^2
    (+ B_y^4 with y^T y)) (eps * (1 - bounds_share) in place of eps with private bounds).
    """
    spec = spec_of_call(spec, epsilon=epsilon, delta=delta, bounds=bounds, seed=seed,
                        calibration=calibration, include_yty=include_yty, split=split,
                        holder_name=holder_name, intercept=intercept, average_rows=average_rows,
                        noise=noise, bounds_share=bounds_share, bounds_range=bounds_range,
                        formula=formula)
    return spending(ledger, cap, lambda: _release_rows(X, y, nodes, spec, feature_names))


def _release_rows(X, y, nodes, spec, feature_names):
    """:func:`release` once its spec is made."""
    if spec.formula is not None:
        return release_table(X, y, nodes, spec, feature_names)
    if y is None:
        raise BayesdpInputError("y is required (or give a formula whose left side names the "
                                "response: release(table, formula='y ~ x', bounds={...}))")
    df_names = dataframe_names(X) if feature_names is None and hasattr(X, "columns") else None
    check_one_holder(spec.holder_name, nodes)
    X, y = check_rows(X, y)
    if X.shape[0] < 1:
        raise BayesdpInputError("X has no rows")
    if feature_names is not None:
        names = check_feature_names(feature_names, X.shape[1], "feature_names")
    else:
        names = df_names if df_names is not None else [f"x{i}" for i in range(X.shape[1])]
    check_design(spec.intercept, spec.average_rows, names)
    labels, holders = node_labels(nodes, X, y, spec.split, spec.seed)
    part = None
    if spec.private_bounds:
        hist = privacy.BoundsHistogram(privacy.bounds_grid(spec.bounds_range))
        hist.add(X, y)
        bnds, part = estimate_bounds(hist, spec)
    else:
        bnds, _ = resolve_bounds(spec.bounds, X, y)
    plan = secure_plan(spec, bnds, X.shape[1])
    acc = PartialStatistics(X.shape[1], bnds, holders, intercept=spec.intercept,
                            average_rows=spec.average_rows,
                            grid=None if plan is None else plan["grid"])
    acc.add(X, y, labels)
    return noisy_release(acc, spec, feature_names=names, source="arrays",
                         split="labels" if holders is None else spec.split, plan=plan,
                         bounds_part=part)


def release_file(path, *, epsilon=None, delta=None, bounds=None, nodes=1, y_column=None,
                 node_column=None, header="infer", seed=None, calibration="exact",
                 include_yty=True, chunksize=100_000, split="random", holder_name=None,
                 progress=None, intercept=False, average_rows=1, noise="float",
                 bounds_share=None, bounds_range=None, formula=None, spec=None, ledger=None,
                 cap=None) -> Release:
    """Release from a CSV or Parquet file far larger than memory, in constant memory.

    The statistics are accumulated chunk by chunk; noise is added once per holder at the end.
    ``y_column`` names (or indexes) the response (default: the last column that is not
    ``node_column``); every other column except ``node_column`` is a feature. ``nodes`` is a holder count, its rows assigned by ``split`` as in :func:`release`
    ("random": one pass; "contiguous", the authors' split, flagged not private: the file is read
    once more to count rows), or omitted when ``node_column`` names a column of holder labels.
    ``bounds`` are public (B_x, B_y); rows outside are clipped and counted.
    ``header`` is "infer" (first row has names) or None (no header, as in the paper's CSVs).
    With "infer", a CSV whose first row has a field that parses as a number is refused: it is
    most likely a data row, whose values would otherwise be published as feature names (and the
    row dropped). Pass ``header=None`` for such files (CLI ``--no-header``).
    ``bounds="private"`` (with ``bounds_share`` and ``bounds_range`` as in :func:`release`)
    costs one more pass, which counts ||x|| and |y| in the cells of the public candidate grid
    (constant memory), and estimates the bounds from all the rows of the file.
    ``bounds="data"`` costs one more pass, warns, and flags the release not private.
    ``holder_name`` names the single holder (``nodes=1``), as in :func:`release`.
    ``progress``: a progress bar per pass over the file on stderr (share of the file read, time
    left): None (default) when stderr is a terminal, True / False to force it.
    ``intercept`` and ``average_rows`` as in :func:`release`; ``average_rows`` > 1 keeps the
    clipped rows in memory (the groups are a random partition of all of a holder's rows).
    ``noise`` as in :func:`release`: "float" (default) or "secure" (discrete Gaussian on a grid
    from the OS CSPRNG; no seed).
    The rows are summed chunk by chunk (:meth:`PartialStatistics.add_stacked`; a Parquet file
    with numeric columns is read by pyarrow straight into float64, docs/scale-out.md "Speed"):
    the sums are those of :func:`release` on the same rows up to floating-point rounding.
    ``formula`` and its declared ``bounds`` as in :func:`release`: the file is a table with a
    header row naming its columns (CSV or Parquet; text columns for ``C()``), each chunk is
    encoded by the formula, and ``y_column`` is left out (the response is the formula's left
    side); other columns are ignored.
    ``spec``: a :class:`~bayesdp.releases.spec.ReleaseSpec` in place of the mechanism's
    keywords, as in :func:`release`. ``ledger`` and ``cap``: the data holder's ledger and its
    cap, as in :func:`release`.
    """
    spec = spec_of_call(spec, epsilon=epsilon, delta=delta, bounds=bounds, seed=seed,
                        calibration=calibration, include_yty=include_yty, split=split,
                        holder_name=holder_name, intercept=intercept, average_rows=average_rows,
                        noise=noise, bounds_share=bounds_share, bounds_range=bounds_range,
                        formula=formula)
    return spending(ledger, cap, lambda: _release_file(
        path, spec, nodes=nodes, y_column=y_column, node_column=node_column, header=header,
        chunksize=chunksize, progress=progress), label=Path(path).name)


def _release_file(path, spec, *, nodes, y_column, node_column, header, chunksize, progress):
    """:func:`release_file` once its spec is made."""
    path = Path(path)
    if not path.exists():
        raise BayesdpInputError(f"data file {str(path)!r} does not exist")
    if path.is_dir():
        raise BayesdpInputError(f"data file {str(path)!r} is a folder, not a file")
    if header not in ("infer", None):
        raise BayesdpInputError(f"header must be 'infer' or None, got {header!r}")
    if chunksize < 1:
        raise BayesdpInputError(f"chunksize must be >= 1, got {chunksize}")
    if spec.formula is not None:
        return release_table_file(path, spec, nodes=nodes, node_column=node_column,
                                  header=header, chunksize=chunksize, progress=progress,
                                  y_column=y_column)
    check_one_holder(spec.holder_name, nodes if node_column is None else None)
    if header == "infer" and path.suffix.lower() not in (".parquet", ".pq"):
        check_csv_header(path)
    data_bounds = spec.bounds == "data"
    bnds = None if data_bounds or spec.private_bounds else spec.bounds
    J = file_holder_count(nodes, node_column)
    contiguous = node_column is None and spec.split == "contiguous"
    passes = 2 if contiguous or data_bounds or spec.private_bounds else 1
    part = None
    if passes == 2:
        # first pass: count rows, and read the bounds off the data or count the rows per cell
        # of the candidate grid for the private estimate
        n_rows, bx, by = 0, 0.0, 0.0
        hist = privacy.BoundsHistogram(privacy.bounds_grid(spec.bounds_range)) \
            if spec.private_bounds else None
        for A, *_ in iter_stacked(path, header, chunksize, y_column, node_column, progress,
                                  f"{path.name} (pass 1/2)"):
            n_rows += len(A)
            if data_bounds or spec.private_bounds:
                Xc, yc = check_rows(A[:, 1:-1], A[:, -1])
            if data_bounds:
                bx = max(bx, float(privacy.row_norms(Xc)[0].max(initial=0.0)))
                by = max(by, float(np.abs(yc).max(initial=0.0)))
            if spec.private_bounds:
                hist.add(Xc, yc)
        if data_bounds:
            bnds = bounds_read_off(bx, by)
        if spec.private_bounds:
            if n_rows == 0:
                raise BayesdpInputError(f"{path}: no data rows")
            bnds, part = estimate_bounds(hist, spec)
    if contiguous:
        if n_rows < J:
            raise BayesdpInputError(f"fewer rows ({n_rows}) than data holders (nodes={J})")
        size = n_rows // J
    acc = plan = None
    start = 0
    names = None
    rng = split_rng(split_entropy(spec.seed))
    desc = path.name + (" (pass 2/2)" if passes == 2 else "")
    for A, feats, ycol, ncol, labels in iter_stacked(path, header, chunksize, y_column,
                                                      node_column, progress, desc):
        if names is None:
            names = [str(c) for c in feats]
            check_design(spec.intercept, spec.average_rows, names)
            plan = secure_plan(spec, bnds, len(feats))
            acc = PartialStatistics(len(feats), bnds, None if J is None else list(range(J)),
                                    intercept=spec.intercept, average_rows=spec.average_rows,
                                    grid=None if plan is None else plan["grid"])
        n = len(A)
        if contiguous:
            labels = np.minimum((start + np.arange(n)) // size, J - 1)
        elif ncol is None:
            labels = None if J == 1 else random_split(n, J, rng)
        try:
            acc.add_stacked(A, labels, "node_column" if ncol is not None else "nodes")
        except BayesdpInputError as exc:
            raise BayesdpInputError(f"{path}, rows {start}..{start + n - 1}: {exc}") from None
        start += n
    if acc is None or start == 0:
        raise BayesdpInputError(f"{path}: no data rows")
    if J is not None and start < J:
        raise BayesdpInputError(f"fewer rows ({start}) than data holders (nodes={J})")
    return noisy_release(acc, spec, feature_names=names, source=f"file {path.name}",
                         split="labels" if J is None else spec.split, plan=plan,
                         bounds_part=part)
