"""Releases from a Dask DataFrame (or a pair of Dask arrays): map each partition to
:class:`~bayesdp.releases.partial.PartialStatistics`, merge them in a tree, add the noise once
(docs/scale-out.md).

The sums are exact sums over rows, so the partition of the rows into Dask partitions does not
matter beyond floating-point rounding; the holder of a row is a function of that row alone (a
uniformly random draw independent of its values, or its label in a node column), never of its
partition, so the release keeps
the add/remove-one guarantee of :func:`~bayesdp.releases.from_rows.release`. Dask is imported
only here, only when called (``pip install bayesdp[dask]``); the computation runs on whatever
scheduler is active: the local threads by default, a ``distributed.Client``'s cluster when one is
open.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import privacy
from ..errors import BayesdpInputError
from .data_files import frame_rows, pick_columns
from .from_table import check_columns, new_partial, table_partial
from .holders import check_one_holder, holder_count, random_split, split_entropy, split_rng
from .mechanism import noisy_release, secure_plan
from .partial import PartialStatistics
from .release_object import Release
from .rows import check_design, dataframe_names
from .spec import spec_of_call


def _dask():
    try:
        import dask
    except ImportError:
        raise BayesdpInputError("release_dask needs Dask: pip install bayesdp[dask]") from None
    return dask


def partial_statistics_dask(data, y=None, *, bounds, nodes=1, y_column=None, node_column=None,
                            intercept=False, average_rows=1, grid=None, split_every=8,
                            scheduler=None, seed=None, table=None) -> PartialStatistics:
    """The exact :class:`PartialStatistics` of a Dask DataFrame ``data`` (or Dask arrays
    ``data`` = X, ``y``), computed by the active Dask scheduler: one object per partition,
    merged ``split_every`` at a time. NOT private (the raw sums); see :func:`release_dask`.
    With a holder count ``nodes`` = J each row goes to a uniformly random holder; partition i
    draws from its own stream of ``seed`` (None: of fresh OS entropy). ``table``: a
    :class:`~bayesdp.releases.formula.TableEncoding` that encodes each partition's rows (a
    Dask DataFrame only; ``bounds`` and ``intercept`` are then the encoding's)."""
    dask = _dask()
    import dask.array as da
    import dask.dataframe as dd

    bnds = privacy.check_bounds(bounds)
    J = None if isinstance(nodes, da.Array) else holder_count(nodes)
    if J is None and not isinstance(nodes, da.Array) and node_column is None:
        raise BayesdpInputError(
            f"nodes must be a holder count (whole number >= 1) or, with Dask arrays, a Dask "
            f"array of labels, got {type(nodes).__name__}; with a Dask DataFrame per-row holder "
            "labels go in node_column")
    if isinstance(split_every, bool) or not isinstance(split_every, (int, np.integer)) \
            or split_every < 2:
        raise BayesdpInputError(f"split_every must be a whole number >= 2, got {split_every!r}")
    if isinstance(data, dd.DataFrame):
        if y is not None:
            raise BayesdpInputError("y: with a Dask DataFrame the response is a column "
                                    "(y_column), not a separate y")
        if node_column is None and J is None:
            raise BayesdpInputError("nodes: with a Dask DataFrame per-row holder labels go in "
                                    "node_column")
        if table is not None:
            check_columns(table, list(data.columns), "the Dask DataFrame", node_column)
            names = list(table.feature_names)
            k = check_design(table.intercept, average_rows, names)
            cfg = (len(names), table.bounds, None if node_column is not None else J,
                   table.intercept, k, grid, "labels" if node_column is not None else "random",
                   split_entropy(seed))
            labels_of = functools.partial(_random_labels, cfg=cfg)
            parts = [dask.delayed(table_partial)(p, i, node_column, cfg, table, labels_of)
                     for i, p in enumerate(data.to_delayed())]
        else:
            feats, ycol, ncol = pick_columns(list(data.columns), y_column, node_column,
                                             "the Dask DataFrame")
            names = dataframe_names(data[feats])
            k = check_design(intercept, average_rows, names)
            cfg = (len(feats), bnds, None if ncol is not None else J, intercept, k, grid,
                   "labels" if ncol is not None else "random", split_entropy(seed))
            parts = [dask.delayed(_frame_partial)(p, i, feats, ycol, ncol, cfg)
                     for i, p in enumerate(data.to_delayed())]
    elif table is not None:
        raise BayesdpInputError(f"data: a formula encodes the columns of a Dask DataFrame, got "
                                f"{type(data).__name__}")
    elif isinstance(data, da.Array):
        X = data
        if X.ndim != 2:
            raise BayesdpInputError(f"X must be a 2-d Dask array, got {X.ndim} dimensions")
        if not isinstance(y, da.Array) or y.ndim != 1 or y.shape[0] != X.shape[0]:
            raise BayesdpInputError("y must be a 1-d Dask array with one value per row of X")
        k = check_design(intercept, average_rows)
        if y_column is not None or node_column is not None:
            raise BayesdpInputError("y_column and node_column are for a Dask DataFrame; with "
                                    "Dask arrays give y, and nodes as a count or a label array")
        X = X.rechunk({1: -1})
        blocks = [y.rechunk((X.chunks[0],)).to_delayed().ravel()]
        if J is None:
            if nodes.shape != (X.shape[0],):
                raise BayesdpInputError("nodes: expected one holder label per row of X")
            blocks.append(nodes.rechunk((X.chunks[0],)).to_delayed().ravel())
        cfg = (X.shape[1], bnds, J, intercept, k, grid, "random" if J is not None else "labels",
               split_entropy(seed))
        parts = [dask.delayed(_array_partial)(xb, i, cfg, *rest)
                 for i, (xb, *rest) in enumerate(zip(X.to_delayed().ravel(), *blocks))]
        names = None
    else:
        raise BayesdpInputError(f"data must be a Dask DataFrame or a Dask array (X with y), got "
                                f"{type(data).__name__}")
    if not parts:
        raise BayesdpInputError("the Dask data has no partitions")
    while len(parts) > 1:  # the tree reduction, partitions kept in order
        parts = [dask.delayed(_merge)(*parts[i:i + split_every])
                 for i in range(0, len(parts), split_every)]
    (total,) = dask.compute(parts[0], scheduler=scheduler)
    if names is not None:
        total.feature_names = tuple(names)
    return total


def _frame_partial(frame, i, feats, ycol, ncol, cfg):
    acc = new_partial(cfg)
    where = f"the Dask DataFrame, partition {i}"
    X, y = frame_rows(frame, feats, ycol, where)
    labels = _random_labels(len(y), i, cfg) if ncol is None else frame[ncol].to_numpy()
    try:
        acc.add(X, y, labels, "node_column" if ncol is not None else "nodes", overwrite=True)
    except BayesdpInputError as exc:
        raise BayesdpInputError(f"{where}: {exc}") from None
    return acc


def _random_labels(n, i, cfg):
    """The random split of partition i's n rows among cfg's J holders (None for one holder)."""
    J, entropy = cfg[2], cfg[7]
    return None if J == 1 else random_split(n, J, split_rng(entropy, part=i))


def _array_partial(X, i, cfg, y, labels=None):
    acc = new_partial(cfg)
    X, y = np.asarray(X, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if labels is None:
        labels = _random_labels(len(y), i, cfg)
    try:
        acc.add(X, y, labels)
    except BayesdpInputError as exc:
        raise BayesdpInputError(f"Dask arrays, block {i}: {exc}") from None
    return acc


def _merge(*parts):
    out = parts[0]
    for p in parts[1:]:
        out = out + p
    return out


def release_dask(data, y=None, *, epsilon=None, delta=None, bounds=None, nodes=1,
                 y_column=None, node_column=None, seed=None, calibration="exact",
                 include_yty=True, holder_name=None, intercept=False, average_rows=1,
                 noise="float", split_every=8, scheduler=None, formula=None,
                 spec=None) -> Release:
    """Release noisy (S_hat_j, z_hat_j, n_j) from a Dask DataFrame (or Dask arrays X, y),
    computed where the data are.

    Each partition becomes :class:`PartialStatistics` (rows clipped to ``bounds``, exact sums
    per holder), the partials are merged in a tree of ``split_every`` at a time, and the noise
    of eqs. (2)-(3) is added once per holder, exactly as :func:`bayesdp.release` adds it: for
    the same rows, holders and seed the release equals ``release(X, y, ...)`` up to the
    floating-point rounding of the sums in another order. Runs on the active Dask scheduler
    (``scheduler`` passes one to ``dask.compute``): local threads by default, a
    ``distributed.Client``'s cluster when one is open.

    Parameters as in :func:`bayesdp.releases.release_file`: ``y_column`` (default: the last column
    that is not ``node_column``) and ``node_column`` name DataFrame columns; every other column is a
    feature. ``nodes`` = J assigns each row to a uniformly random holder (the default split of
    :func:`bayesdp.release`, add/remove-one private); with Dask arrays ``nodes`` may also be a
    Dask array of holder labels. ``bounds`` must be public (B_x, B_y). ``intercept``,
    ``average_rows``, ``noise``, ``include_yty``, ``calibration``, ``seed`` and ``holder_name``
    as in :func:`bayesdp.release`; ``average_rows`` > 1 moves the clipped rows (not sums) to the
    merge, so the memory of all rows is needed there.

    ``formula`` and its declared ``bounds`` as in :func:`bayesdp.release`: each partition of a
    Dask DataFrame is encoded by the formula (``y_column`` left out; other columns ignored).

    ``spec``: a :class:`~bayesdp.releases.spec.ReleaseSpec` in place of the mechanism's
    keywords, as in :func:`bayesdp.release` (its ``split`` must be "random", the only split of
    a holder count here).

    The workers see the rows and the exact sums, which are NOT private; only the returned
    release is. Needs Dask: ``pip install bayesdp[dask]``.
    """
    spec = spec_of_call(spec, epsilon=epsilon, delta=delta, bounds=bounds, seed=seed,
                        calibration=calibration, include_yty=include_yty, split="random",
                        holder_name=holder_name, intercept=intercept, average_rows=average_rows,
                        noise=noise, bounds_share=None, bounds_range=None, formula=formula)
    _dask()
    table = spec.table
    if table is not None and y_column is not None:
        raise BayesdpInputError("y_column: with a formula the response is the formula's left "
                                "side; leave y_column out")
    if isinstance(spec.bounds, str):
        raise BayesdpInputError(
            f"bounds={spec.bounds!r}: release_dask needs public bounds (B_x, B_y); estimate them "
            "privately with release or release_file on a sample you may spend budget on")
    if spec.split != "random":
        raise BayesdpInputError(f"split={spec.split!r}: release_dask assigns the rows of a holder "
                                "count at random (split='random')")
    J = holder_count(nodes) if isinstance(nodes, (int, np.integer)) and node_column is None \
        else None
    check_one_holder(spec.holder_name, J)
    d = len(table.feature_names) if table is not None else _feature_count(data, y_column,
                                                                             node_column)
    bounds = table.bounds if table is not None else spec.bounds
    plan = secure_plan(spec, bounds, d)
    acc = partial_statistics_dask(data, y, bounds=bounds, nodes=nodes, y_column=y_column,
                                  node_column=node_column, intercept=spec.intercept,
                                  average_rows=spec.average_rows,
                                  grid=None if plan is None else plan["grid"],
                                  split_every=split_every, scheduler=scheduler, seed=spec.seed,
                                  table=table)
    rows = int(acc.n.sum())
    if rows == 0:
        raise BayesdpInputError("the Dask data has no rows")
    if J is not None and rows < J:
        raise BayesdpInputError(f"fewer rows ({rows}) than data holders (nodes={J})")
    names = acc.feature_names or [f"x{i}" for i in range(d)]
    return noisy_release(acc, spec, feature_names=names,
                         source="Dask " + ("DataFrame" if hasattr(data, "columns") else "arrays"),
                         split=acc.split, plan=plan, table=table)


def _feature_count(data, y_column, node_column):
    """d, from the DataFrame's columns or the array's shape (no computation)."""
    if hasattr(data, "columns"):
        return len(pick_columns(list(data.columns), y_column, node_column,
                                "the Dask DataFrame")[0])
    shape = getattr(data, "shape", ())
    if len(shape) != 2:
        raise BayesdpInputError(f"data must be a Dask DataFrame or a 2-d Dask array, got "
                                f"{type(data).__name__}")
    return int(shape[1])
