"""Which rows belong to which data holder, and the holders' names.

A count ``nodes=J`` assigns each row by ``split``: "random" (each row to a uniformly random
holder, independently of its values and of the other rows, so adding or removing one row changes
one holder's statistics only and the counts n_j say nothing about any row; docs/privacy.md
section 3a) or "contiguous" (the authors' split in row order; not add/remove-one private).
Per-row labels name the holders themselves: organisations whose names and row counts are public.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import BayesdpInputError

_SPLITS = ("random", "contiguous")

_SPLIT_STREAM = 0x73706C6974  # b"split": the seed stream of the random split

_HASH_SPLIT_REMOVED = (
    "split='hash' was removed: the holder of a row was a public hash of its values, so the "
    "exact per-holder counts n_j in the release revealed hash(row) mod J of every row (which of "
    "two candidate rows is present, with certainty). split='random' (the default) assigns rows "
    "independently of their values; docs/privacy.md section 3a")


def check_split(split):
    if split == "hash":
        raise BayesdpInputError(_HASH_SPLIT_REMOVED)
    if split not in _SPLITS:
        raise BayesdpInputError(f"split must be one of {_SPLITS}, got {split!r}")
    return split


def holder_count(nodes):
    """J when ``nodes`` is a holder count, None when it is a label array."""
    if isinstance(nodes, (int, np.integer)) and not isinstance(nodes, bool):
        if nodes < 1:
            raise BayesdpInputError(f"nodes must be >= 1, got {nodes}")
        return int(nodes)
    return None


def node_labels(nodes, X, y, split="random", seed=None):
    """Per-row holder labels and the holders in release order (None: first-appearance order).

    ``nodes`` is a count J (rows assigned by ``split``: "random", each row to a uniformly random
    holder drawn from the split's stream of ``seed``; "contiguous", the authors' split in row
    order) or one label per row (checked where the holders' sums are made: :func:`unique_in_order`
    and :func:`check_holder_count`).
    """
    check_split(split)
    n_rows = X.shape[0]
    J = holder_count(nodes)
    if J is not None:
        if n_rows < J:
            raise BayesdpInputError(f"fewer rows ({n_rows}) than data holders (nodes={J})")
        if split == "contiguous":
            return contiguous_split(n_rows, J), list(range(J))
        return random_split(n_rows, J, split_rng(split_entropy(seed))), list(range(J))
    labels = np.asarray(nodes)
    if labels.ndim != 1 or labels.shape[0] != n_rows:
        raise BayesdpInputError(
            f"nodes must be a holder count or one label per row ({n_rows}), got shape {labels.shape}"
        )
    return labels, None


def split_entropy(seed):
    """The entropy of the random split: its own stream of the release's seed (so the noise draws
    do not depend on it), or a fresh 128-bit draw from the OS when ``seed`` is None (kept by the
    caller, never released)."""
    return np.random.SeedSequence(None if seed is None else [int(seed), _SPLIT_STREAM]).entropy


def split_rng(entropy, part=()):
    """The generator of the random split from :func:`split_entropy`; ``part`` (e.g. a Dask
    partition's index) gives each part an independent stream of the same entropy."""
    spawn_key = tuple(int(p) for p in np.atleast_1d(part))
    return np.random.default_rng(np.random.SeedSequence(entropy, spawn_key=spawn_key))


def random_split(n_rows, J, rng=None):
    """Holder label (0..J-1) of each row, drawn uniformly at random and independently of the
    rows' values, of their positions and of each other (the default split).

    Adding or removing a row changes exactly one holder's statistics, by at most the per-row
    sensitivity Delta (couple the two assignments row by row: every other row keeps its holder),
    so a count ``nodes=J`` keeps the add/remove-one guarantee of the whole release. The holder
    counts n_j are Multinomial(n, 1/J): given n they carry no information about any row, so
    under replace-one neighbouring (n fixed) the whole release, counts included, keeps the
    replace-one guarantee (docs/privacy.md section 3a). ``rng``: a numpy Generator (a release's
    is ``split_rng(split_entropy(seed))``); None: fresh OS entropy.
    """
    rng = np.random.default_rng() if rng is None else rng
    return rng.integers(0, J, size=int(n_rows), dtype=np.int64)


def contiguous_split(n_rows, J):
    """Holder label of each row: rows in order, floor(n/J) each, the remainder to the last holder
    (the authors' split; ``split="contiguous"``).

    NOT add/remove-one private as it stands: removing a row moves rows of other people between
    holders (see :func:`bayesdp.privacy.contiguous_split_change`), so releases made with it are
    flagged ``dp_claim_valid=False``. Kept to reproduce the paper's experiments.
    """
    size = n_rows // J
    labels = np.minimum(np.arange(n_rows) // size, J - 1)
    return labels


MAX_HOLDERS = 1000  # holders one release may name (the paper's J is at most 10)

_NUMBER = re.compile(r"\s*[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?\s*|\s*[-+]?(nan|inf|infinity)\s*",
                     re.IGNORECASE)
_INTEGER = re.compile(r"[-+]?\d+")


def _check_label_type(labels, what="nodes"):
    """Refuse holder labels that look like measurements rather than names of holders: floats,
    booleans and complex numbers (a feature column given as ``nodes`` or ``node_column`` would
    otherwise publish every row's value as a holder name). Integers and strings pass here;
    :func:`unique_in_order` checks the strings."""
    kind = labels.dtype.kind
    if kind in "fcb":
        raise BayesdpInputError(
            f"{what}: holder labels are {labels.dtype} values; labels name the data holders "
            "(e.g. 'hospital_a', or integer codes 0..J-1) and are published as the holders' "
            "names, so a column of measurements cannot be one. Give names or integer codes "
            "(cast a column of whole numbers with .astype(int)), or a holder count nodes=J")


def _check_holder_label(label, what="nodes"):
    """One distinct holder label: an integer, or a non-empty string that does not look like a
    non-integer number (e.g. '0.1257', '1e3', 'nan')."""
    if isinstance(label, (bool, np.bool_)) or not isinstance(label, (str, int, np.integer)):
        raise BayesdpInputError(
            f"{what}: holder label {str(label)[:40]!r} is a {type(label).__name__}; labels "
            "name the data holders and are published: give names or integer codes")
    if isinstance(label, str):
        if not label.strip():
            raise BayesdpInputError(f"{what}: an empty holder label; every holder needs a name")
        if _NUMBER.fullmatch(label) and not _INTEGER.fullmatch(label.strip()):
            raise BayesdpInputError(
                f"{what}: holder label {label[:40]!r} looks like a measurement, not the name of a "
                "data holder; labels are published as the holders' names, so a column of values "
                "cannot be one. Give names (e.g. 'hospital_a') or integer codes")


def check_holder_count(J, n_rows=None, what="nodes"):
    """At most MAX_HOLDERS holders and at least two rows per holder on average (``n_rows``
    None: the first only): per-row labels (an identifier column, a column of values) would
    publish one name per person."""
    if J > MAX_HOLDERS or (n_rows is not None and J > 1 and 2 * J > n_rows):
        many = (f"more than {MAX_HOLDERS}" if n_rows is None
                else f"{J} distinct holder labels for {n_rows} rows")
        if n_rows is None:
            many += " distinct holder labels"
        raise BayesdpInputError(
            f"{what}: {many}; labels name a few data "
            f"holders (at most {MAX_HOLDERS}, with at least 2 rows each on average) and are "
            "published, so a per-row identifier or a column of values cannot be one. Use the "
            "column that names the holders, or a holder count nodes=J")


def unique_in_order(labels, what="nodes"):
    """Distinct holder labels in order of first appearance, each checked by
    :func:`_check_holder_label`; missing labels (None, NaN), measurements and a mix of numbers
    and strings are refused with an error naming ``what``."""
    _check_label_type(labels, what)
    if labels.dtype.kind == "O":
        missing = np.array([v is None or (isinstance(v, (float, np.floating, complex))
                                          and not np.isfinite(v)) for v in labels.ravel()],
                           dtype=bool)
        if missing.any():
            raise BayesdpInputError(
                f"{what}: missing holder label (None or NaN) in {int(missing.sum())} rows (first "
                f"row {int(np.flatnonzero(missing)[0])}); every row needs a label")
    try:
        _, idx = np.unique(labels, return_index=True)
    except TypeError:
        raise BayesdpInputError(
            f"{what}: holder labels must be all numbers or all strings, got a mix of "
            f"{sorted({type(v).__name__ for v in labels.ravel()})}") from None
    out = [labels[i].item() if hasattr(labels[i], "item") else labels[i] for i in np.sort(idx)]
    if len(out) > MAX_HOLDERS:
        check_holder_count(len(out), labels.shape[0], what)
    for lab in out:
        _check_holder_label(lab, what)
    return out


_DEFAULT_HOLDER_NAME = re.compile(r"\d+(:\d+)*")


def is_default_holder_name(name) -> bool:
    """True for the names bayesdp makes up when none is given: "0", "1", ... (one per holder of
    a release) and "k:j" (made unique by an earlier combine)."""
    return _DEFAULT_HOLDER_NAME.fullmatch(str(name)) is not None


def check_holder_name(holder_name):
    """``holder_name`` is None or a name someone chose: a non-empty string that is not a
    made-up name ("0", "1", "k:j")."""
    if holder_name is None:
        return
    if not isinstance(holder_name, str) or not holder_name.strip():
        raise BayesdpInputError(f"holder_name must be a non-empty string, got {holder_name!r}")
    if is_default_holder_name(holder_name):
        raise BayesdpInputError(
            f"holder_name {holder_name!r}: names made of digits (and ':') are the ones bayesdp "
            "makes up and renames on combine; choose a name such as 'hospital_a'")


def check_one_holder(holder_name, nodes):
    """A ``holder_name`` is for a single holder: a count ``nodes=1`` (None: labels)."""
    if holder_name is not None and holder_count(nodes) != 1:
        raise BayesdpInputError(
            "holder_name names the single holder of a release with nodes=1; with several "
            f"holders (nodes={nodes!r} or a node column) the holders are named by their labels")

def file_holder_count(nodes, node_column):
    """The number of holders of a release from a file: ``nodes`` (a whole number), or None when
    a ``node_column`` names each row's holder."""
    if node_column is not None:
        return None
    J = holder_count(nodes)
    if J is None:
        raise BayesdpInputError(f"nodes must be a whole number >= 1, got {nodes!r} (per-row "
                                "labels in a file go in a column: node_column)")
    return J
