"""Releasing from a table with a formula: the rows of :func:`~bayesdp.releases.release`,
:func:`~bayesdp.releases.release_file` and :func:`~bayesdp.releases.release_dask` when their
spec has a ``formula`` (docs/tables.md).

Each row is encoded by the spec's :class:`~bayesdp.releases.formula.TableEncoding` (values
clamped to their declared ranges and counted, levels checked, the formula evaluated row by
row), then summed and released exactly as a numeric row is: clipped to the derived (B_x, B_y)
(which the encoded rows already satisfy), summed per holder
(:class:`~bayesdp.releases.partial.PartialStatistics`) and noised once per holder
(:func:`~bayesdp.releases.mechanism.noisy_release`).
"""

from __future__ import annotations

from pathlib import Path

from ..errors import BayesdpInputError
from .holders import (check_one_holder, file_holder_count, node_labels, random_split,
                      split_entropy, split_rng)
from .mechanism import noisy_release, secure_plan
from .partial import PartialStatistics


def table_statistics(enc, holders, spec, plan, split="labels"):
    """Empty :class:`PartialStatistics` for rows encoded by ``enc`` (its d, bounds, intercept,
    feature names and the numeric columns whose clamping is counted)."""
    return PartialStatistics(len(enc.feature_names), enc.bounds, holders,
                             intercept=enc.intercept, average_rows=spec.average_rows,
                             grid=None if plan is None else plan["grid"],
                             feature_names=list(enc.feature_names), split=split,
                             clamp_columns=enc.numeric_columns)


def _no_extra(y, feature_names, y_column=None):
    """With a formula the response and the features come from the formula."""
    if y is not None:
        raise BayesdpInputError(
            "y: with a formula the response is the formula's left side; pass the table alone, "
            "release(table, formula='y ~ ...', bounds={...})")
    if feature_names is not None:
        raise BayesdpInputError("feature_names: with a formula the features are the formula's "
                                "terms; leave feature_names out")
    if y_column is not None:
        raise BayesdpInputError("y_column: with a formula the response is the formula's left "
                                "side; leave y_column out")


def release_table(table, y, nodes, spec, feature_names=None):
    """:func:`bayesdp.release` of the rows of ``table`` (a pandas DataFrame) by the spec's
    formula: ``nodes`` a holder count (rows assigned at random) or one holder label per row.
    Returns the Release."""
    _no_extra(y, feature_names)
    check_one_holder(spec.holder_name, nodes)
    enc = spec.table
    X, yv, clamped = enc.encode(table)
    labels, holders = node_labels(nodes, X, yv, spec.split, spec.seed)
    plan = secure_plan(spec, enc.bounds, X.shape[1])
    acc = table_statistics(enc, holders, spec, plan)
    acc.add(X, yv, labels, overwrite=True, clamped=clamped)
    return noisy_release(acc, spec, feature_names=enc.feature_names, source="table",
                         split="labels" if holders is None else spec.split, plan=plan,
                         table=enc)


def release_table_file(path, spec, *, nodes, node_column, header, chunksize, progress,
                       y_column=None):
    """:func:`bayesdp.releases.release_file` of a CSV or Parquet table by the spec's formula,
    chunk by chunk (constant memory): ``nodes`` a holder count (rows at random) or
    ``node_column`` naming each row's holder. The file needs a header row (the formula names
    its columns). Returns the Release."""
    from .data_files import _iter_chunks

    _no_extra(None, None, y_column)
    path = Path(path)
    if header is None:
        raise BayesdpInputError(
            f"{path}: header=None: a formula names the table's columns, so the file needs a "
            "header row with their names")
    J = file_holder_count(nodes, node_column)
    check_one_holder(spec.holder_name, J)
    enc = spec.table
    plan = secure_plan(spec, enc.bounds, len(enc.feature_names))
    acc = table_statistics(enc, None if J is None else list(range(J)), spec, plan,
                           split="labels" if J is None else "random")
    rng = split_rng(split_entropy(spec.seed))
    start = 0
    for chunk in _iter_chunks(path, header, chunksize, progress, path.name):
        n = len(chunk)
        if start == 0:
            check_columns(enc, list(chunk.columns), str(path), node_column)
        if node_column is not None:
            labels = chunk[node_column].to_numpy()
        else:
            labels = None if J == 1 else random_split(n, J, rng)
        try:
            X, yv, clamped = enc.encode(chunk)
            acc.add(X, yv, labels, "node_column" if node_column is not None else "nodes",
                    overwrite=True, clamped=clamped)
        except BayesdpInputError as exc:
            raise BayesdpInputError(f"{path}, rows {start}..{start + n - 1}: {exc}") from None
        start += n
    if start == 0:
        raise BayesdpInputError(f"{path}: no data rows")
    if J is not None and start < J:
        raise BayesdpInputError(f"fewer rows ({start}) than data holders (nodes={J})")
    return noisy_release(acc, spec, feature_names=enc.feature_names,
                         source=f"file {path.name}", split="labels" if J is None else "random",
                         plan=plan, table=enc)


def new_partial(cfg, clamp_columns=()):
    """An empty :class:`PartialStatistics` for one Dask partition of ``release_dask``, from its
    configuration ``cfg`` = (d, bounds, holders, intercept, average_rows, grid, split,
    split entropy) and, for a table, the columns whose clamping it counts."""
    d, bounds, holders, intercept, k, grid, split, _ = cfg
    return PartialStatistics(d, bounds, holders, intercept=intercept, average_rows=k, grid=grid,
                             split=split, clamp_columns=clamp_columns)


def table_partial(frame, i, ncol, cfg, enc, labels_of):
    """The :class:`PartialStatistics` of one Dask partition ``frame`` (its index ``i``)
    encoded by ``enc``; ``labels_of(n, i)`` gives the holders of a random split (None: one
    holder), or ``ncol`` names the holders' column."""
    acc = new_partial(cfg, clamp_columns=enc.numeric_columns)
    where = f"the Dask DataFrame, partition {i}"
    if len(frame) == 0:
        return acc
    try:
        X, y, clamped = enc.encode(frame)
        labels = labels_of(len(y), i) if ncol is None else frame[ncol].to_numpy()
        acc.add(X, y, labels, "node_column" if ncol is not None else "nodes", overwrite=True,
                clamped=clamped)
    except BayesdpInputError as exc:
        raise BayesdpInputError(f"{where}: {exc}") from None
    return acc


def check_columns(enc, columns, where, node_column=None):
    """Refuse a table whose ``columns`` lack a column the formula uses, naming it."""
    missing = [c for c in enc.columns if c not in columns]
    if missing:
        uses = "; ".join(f"{c!r} in {enc.use_of(c)}" for c in missing)
        raise BayesdpInputError(
            f"{where}: the formula {enc.formula!r} names column(s) the table does not have: "
            f"{uses} (columns: {list(columns)[:20]})")
    if node_column is not None and node_column not in columns:
        raise BayesdpInputError(f"node_column={node_column!r} is not a column (columns: "
                                f"{list(columns)[:20]})")
    if node_column is not None and node_column in enc.columns:
        raise BayesdpInputError(f"node_column={node_column!r} is used by the formula; the "
                                "holder labels must be a column of their own")
