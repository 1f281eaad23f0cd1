"""Which rows belong to which data holder, and the holders' names.

A count ``nodes=J`` assigns each row by ``split``: "hash" (a function of the row's own values,
so adding or removing one row changes one holder's statistics only; docs/privacy.md) or
"contiguous" (the authors' split in row order; not add/remove-one private). Per-row labels name
the holders themselves.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import BayesdpInputError

SPLITS = ("hash", "contiguous")

SPLIT_HASH_KEY = 0x6261796573647031  # b"bayesdp1": fixed and public; the split needs no secret


def check_split(split):
    if split not in SPLITS:
        raise BayesdpInputError(f"split must be one of {SPLITS}, got {split!r}")
    return split


def holder_count(nodes):
    """J when ``nodes`` is a holder count, None when it is a label array."""
    if isinstance(nodes, (int, np.integer)) and not isinstance(nodes, bool):
        if nodes < 1:
            raise BayesdpInputError(f"nodes must be >= 1, got {nodes}")
        return int(nodes)
    return None


def node_labels(nodes, X, y, split="hash"):
    """Per-row holder labels and the holders in release order (None: first-appearance order).

    ``nodes`` is a count J (rows assigned by ``split``: "hash", each row by a hash of its own
    values; "contiguous", the authors' split in row order) or one label per row.
    """
    check_split(split)
    n_rows = X.shape[0]
    J = holder_count(nodes)
    if J is not None:
        if n_rows < J:
            raise BayesdpInputError(f"fewer rows ({n_rows}) than data holders (nodes={J})")
        if split == "contiguous":
            return contiguous_split(n_rows, J), list(range(J))
        return hash_split(X, y, J), list(range(J))
    labels = np.asarray(nodes)
    if labels.ndim != 1 or labels.shape[0] != n_rows:
        raise BayesdpInputError(
            f"nodes must be a holder count or one label per row ({n_rows}), got shape {labels.shape}"
        )
    return labels, None


def _mix64(h, t):
    """The splitmix64 finaliser on a uint64 array, in place (wrapping arithmetic); ``t`` is
    scratch space of the same shape."""
    for shift, mult in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        np.right_shift(h, np.uint64(shift), out=t)
        np.bitwise_xor(h, t, out=h)
        np.multiply(h, np.uint64(mult), out=h)
    np.right_shift(h, np.uint64(31), out=t)
    np.bitwise_xor(h, t, out=h)
    return h


HASH_BLOCK = 1 << 15  # rows hashed at a time (the temporaries stay in cache)


def row_hash(X, y):
    """A 64-bit hash of each row's own values [x_1, ..., x_d, y] (float64 bit patterns).

    h = K; for each value v of the row in turn: h = mix(h xor bits(v)); finally
    h = mix(h xor (d + 1)), with mix the splitmix64 finaliser and K = SPLIT_HASH_KEY.
    It depends on that row only: on no other row, on no row position and on no row count.
    -0.0 and 0.0 hash alike. Not cryptographic, and it needs no secret: the privacy argument only
    uses that a row's holder is a function of the row itself.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, p = X.shape[0], X.shape[1] + 1
    out = np.empty(n, dtype=np.uint64)
    for lo in range(0, n, HASH_BLOCK):
        hi = min(lo + HASH_BLOCK, n)
        # columns contiguous; + 0.0 turns -0.0 into 0.0
        A = np.empty((p, hi - lo))
        np.add(X[lo:hi].T, 0.0, out=A[:-1])
        np.add(y[lo:hi], 0.0, out=A[-1])
        W = A.view(np.uint64)
        h, t = out[lo:hi], np.empty(hi - lo, dtype=np.uint64)
        h[:] = SPLIT_HASH_KEY
        for k in range(p):
            np.bitwise_xor(h, W[k], out=h)
            _mix64(h, t)
        np.bitwise_xor(h, np.uint64(p), out=h)
        _mix64(h, t)
    return out


def hash_split(X, y, J):
    """Holder label (0..J-1) of each row from a hash of that row's values (the default split).

    Adding or removing a row changes exactly one holder's statistics, by at most the per-row
    sensitivity Delta, so a count ``nodes=J`` keeps the add/remove-one guarantee of the whole
    release. Identical rows go to the same holder (harmless). Holder sizes are random around
    n/J (multinomial-like), not exactly equal.
    """
    return (row_hash(X, y) % np.uint64(J)).astype(np.int64)


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


def unique_in_order(labels, what="nodes"):
    """Distinct holder labels in order of first appearance; missing labels (None, NaN) and a
    mix of numbers and strings are refused with an error naming ``what``."""
    if labels.dtype.kind in "fcO":
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
    return [labels[i].item() if hasattr(labels[i], "item") else labels[i] for i in np.sort(idx)]


_DEFAULT_HOLDER_NAME = re.compile(r"\d+(:\d+)*")


def is_default_holder_name(name) -> bool:
    """True for the names bayesdp makes up when none is given: "0", "1", ... (one per holder of
    a release) and "k:j" (made unique by an earlier combine)."""
    return _DEFAULT_HOLDER_NAME.fullmatch(str(name)) is not None


def check_holder_name(holder_name, nodes):
    """``holder_name`` is for a single holder (a count ``nodes=1``) and must be a name someone
    chose: a non-empty string that is not a made-up name ("0", "1", "k:j")."""
    if holder_name is None:
        return
    if not isinstance(holder_name, str) or not holder_name.strip():
        raise BayesdpInputError(f"holder_name must be a non-empty string, got {holder_name!r}")
    if is_default_holder_name(holder_name):
        raise BayesdpInputError(
            f"holder_name {holder_name!r}: names made of digits (and ':') are the ones bayesdp "
            "makes up and renames on combine; choose a name such as 'hospital_a'")
    if holder_count(nodes) != 1:
        raise BayesdpInputError(
            "holder_name names the single holder of a release with nodes=1; with several "
            f"holders (nodes={nodes!r} or a node column) the holders are named by their labels")
