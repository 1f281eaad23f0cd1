"""Partial statistics: the exact per-holder sums of clipped rows, before any noise.

For each data holder j it holds, over the rows fed to it after clipping them to the public
bounds (x scaled to norm B_x, y clipped to [-B_y, B_y]):

    n_j,  S_j = sum_i w_i w_i^T = W^T W,  z_j = W^T y,  y^T y,  n_clipped_j

(w_i = x_i, or [1, x_i] with ``intercept``; appendix B.2). These are sums over rows, so two
objects over disjoint rows merge by adding them: ``a + b`` holds the sums over the rows of both.
That is the map/reduce of docs/scale-out.md: each chunk, file or Dask partition becomes a
:class:`PartialStatistics`, they are merged (in any tree), and :meth:`PartialStatistics.release`
adds the noise of eqs. (2)-(3) once per holder (:func:`~bayesdp.releases.mechanism.noisy_release`,
the one place the noise is calibrated). :func:`~bayesdp.releases.from_rows.release` and
:func:`~bayesdp.releases.from_rows.release_file` are built on it.

A PartialStatistics object is NOT private: it holds the exact sums of the rows. Keep it where
the rows are; only the output of its :meth:`~PartialStatistics.release` may be published.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from .. import privacy, secure_noise
from ..errors import BayesdpInputError
from .holders import (MAX_HOLDERS, check_holder_count, check_one_holder, check_split,
                      unique_in_order)
from .mechanism import noisy_release, secure_plan
from .rows import all_finite, check_design, check_feature_names, check_finite, check_rows
from .spec import ReleaseSpec

#: rows per block of the clipping and per-holder sums: large enough to amortise numpy's call
#: overhead, small enough for the temporaries to stay in cache
_BLOCK_ROWS = 1 << 16


@dataclasses.dataclass
class _HolderSums:
    S: np.ndarray
    z: np.ndarray
    yty: float
    n: int  # rows
    n_clipped: int
    rows: list  # (X, y) chunks kept for averaging
    n_used: int = 0  # rows (or groups, when averaging) in S, z
    K: object = 0  # secure noise: integer sums [vech(S), z, y^T y] / grid (an object array)
    n_clamped: object = 0  # values clamped to their declared range, per column of a table

    def plus(self, other):
        """The sums over the rows of both (new arrays; the inputs are left as they are)."""
        return _HolderSums(self.S + other.S, self.z + other.z, self.yty + other.yty,
                           self.n + other.n, self.n_clipped + other.n_clipped,
                           self.rows + other.rows, 0, self.K + other.K,
                           self.n_clamped + other.n_clamped)


class PartialStatistics:
    """Exact per-holder sums of clipped rows, fed chunk by chunk and merged by addition.

    NOT private: it holds the raw sums of the rows (n, X^T X, X^T y, y^T y and the clip counts
    of each holder). Never publish it, pickle it to a place the rows may not go, or show it;
    publish only what :meth:`release` returns. A Dask or other worker that computes one must be
    trusted with the rows it reads (docs/scale-out.md).

    Parameters
    ----------
    d : int
        Number of features (columns of X).
    bounds : (B_x, B_y)
        Public bounds. Every row is clipped to them before it is summed (x scaled to norm
        B_x, y clipped to [-B_y, B_y]) and counted in ``n_clipped`` if it changed.
    holders : list of labels, int J, or None
        The holders in release order when they are known in advance (J: the labels 0..J-1), so
        a holder that gets no rows is still there; None: holders in order of first appearance.
    intercept : bool
        The rows are w = [1, x] (appendix B.2): S_j holds n_j, sum x and X^T X.
    average_rows : int
        k > 1 (appendix B.1): the clipped rows are kept and summed in uniformly random groups
        of k of each holder's rows at release, so the object holds rows, not sums; merging
        concatenates them (the grouping is still a uniformly random partition of all of a
        holder's rows, made once at release).
    grid : float or None
        For ``noise="secure"`` (docs/privacy.md section 10): each row's contribution is rounded to
        this power-of-two grid and summed exactly in integers. It is fixed by epsilon, delta and
        the bounds (:func:`bayesdp.releases.mechanism.secure_plan`); :meth:`release` checks it.
    feature_names : list of str or None
        Names of the d features (default "x0", "x1", ...).
    split : "labels" | "random"
        How rows were assigned to holders: given labels (holders whose names and counts are
        public), or :func:`~bayesdp.releases.holders.random_split` with ``holders`` = J
        (recorded in the release's provenance). Both keep add/remove-one DP: a row's holder
        depends on no other row (docs/privacy.md section 3a).
    clamp_columns : tuple of str
        For rows encoded from a table (docs/tables.md): the numeric columns whose values
        clamped to their declared ranges are counted per holder (``add(..., clamped=...)``;
        :attr:`n_clamped`).

    ``add(X, y, labels)`` feeds rows; ``a + b`` (or ``a.merge(b)``) is the object of the rows of
    both, for objects of the same d, bounds, intercept, average_rows, grid, feature names and
    split (associative: the sums are added, holders keep first-appearance order). Floating-point
    sums in another order agree to rounding (relative ~1e-15 per addition), not bit for bit.

    Exactly one noisy release can be made from an object: :meth:`release`. A second one is
    refused (a second noisy copy of the same sums would spend the budget again; build a fresh
    object for another release).
    """

    def __init__(self, d, bounds, holders=None, *, intercept=False, average_rows=1, grid=None,
                 feature_names=None, split="labels", clamp_columns=()):
        if isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 1:
            raise BayesdpInputError(f"d must be a whole number >= 1 (features), got {d!r}")
        self.d = int(d)
        self.bounds = privacy.check_bounds(bounds)
        self.intercept = bool(intercept)
        self.average_rows = check_design(intercept, average_rows, feature_names or ())
        self.grid = None if grid is None else float(grid)
        self.feature_names = None if feature_names is None else tuple(
            check_feature_names(feature_names, self.d, "feature_names"))
        if split not in ("labels", "random"):
            check_split(split)
            raise BayesdpInputError(
                f"split={split!r}: partial statistics take rows assigned by 'random' or by labels; "
                "the contiguous split depends on row positions over the whole data and is not "
                "add/remove-one private")
        self.split = split
        self.clamp_columns = tuple(str(c) for c in clamp_columns)
        self.released = False
        # over all rows, after clipping: [sum x, sum x^2 (per column), sum y, sum y^2], for the
        # centring check (uncentred_columns)
        self.column_sums = np.zeros(2 * self.d + 2)
        self.stats = {}  # holder label -> _HolderSums
        if isinstance(holders, (int, np.integer)) and not isinstance(holders, bool):
            holders = range(int(holders))
        for lab in holders or ():
            self._new(lab)

    # --- feeding rows -------------------------------------------------------------------

    def _new(self, lab):
        if lab not in self.stats:
            if len(self.stats) >= MAX_HOLDERS:
                check_holder_count(len(self.stats) + 1)
            self.stats[lab] = self._new_sums()
        return self.stats[lab]

    def _check_open(self, what):
        if self.released:
            raise BayesdpInputError(
                f"{what}: these partial statistics were released already; a second release of the "
                "same rows would spend the privacy budget again. Accumulate a new "
                "PartialStatistics for another release")

    def add(self, X, y, labels=None, what="nodes", overwrite=False, clamped=None):
        """Add the rows (X, y) (n x d and n), clipped to the bounds; ``labels``: one holder
        label per row (None: all rows to the single holder, which must be the only one).
        ``overwrite``: X and y are the caller's own float64 copies and may be clipped in place.
        ``clamped``: (n, len(clamp_columns)) bool, the values of a table's rows clamped to
        their declared ranges, counted per holder. Returns self."""
        self._check_open("add")
        X, y = check_rows(X, y, self.d, finite=False)
        groups = self._groups(labels, len(y), what)
        X, y, clipped = self._clip(X, y, overwrite)
        X = np.ascontiguousarray(X)
        if clamped is not None:
            clamped = np.asarray(clamped, dtype=bool).reshape(len(y), len(self.clamp_columns))
        for lab, idx in groups:
            if idx is None:
                self._add_holder(lab, X, y, clipped)
            else:
                self._add_holder(lab, X.take(idx, axis=0), y[idx], clipped[idx])
            if clamped is not None:
                st = self.stats[lab]
                st.n_clamped = st.n_clamped + np.count_nonzero(
                    clamped if idx is None else clamped[idx], axis=0).astype(np.int64)
        return self

    def add_stacked(self, A, labels=None, what="nodes"):
        """Add the rows of A = [1, X, y] (n x (d + 2) float64, each column contiguous, e.g. rows
        of a Fortran-order array), as :meth:`add` adds (X, y). A is the caller's own: its rows
        are clipped in place. With average_rows = 1 and no secure-noise grid (otherwise
        :meth:`add` sums copies of X and y), the sums of each holder are read off one product
        G = A_j^T A_j (A_j: the holder's rows, after clipping): n_j = G[0, 0], S_j = G[s, s],
        z_j = G[s, -1], y^T y = G[-1, -1], s = the rows of W (with the column of ones when
        ``intercept``). The sums are those of :meth:`add` summed in another order (equal to
        rounding, relative ~1e-15 per addition). Returns self."""
        self._check_open("add")
        d = self.d
        if A.ndim != 2 or A.shape[1] != d + 2 or A.dtype != np.float64 \
                or A.strides[0] != 8 or not A.flags.writeable:
            raise BayesdpInputError(
                f"add_stacked: expected a writeable float64 array of {d + 2} contiguous columns "
                f"[1, X, y], got {A.dtype} of shape {A.shape}, strides {A.strides}")
        X, y = A[:, 1:d + 1], A[:, d + 1]
        if self.average_rows > 1 or self.grid is not None or not 1e-140 < self.bounds[0] < 1e140:
            return self.add(np.array(X, order="C"), y.copy(), labels, what, overwrite=True)
        groups = self._groups(labels, len(y), what)
        # in place (X, y are views of A); the column sums are read off G
        _, _, clipped = self._clip(X, y, overwrite=True, sums=False)
        s = slice(0 if self.intercept else 1, d + 1)
        for lab, idx in groups:
            Aj = A if idx is None else A[idx]
            G = Aj.T @ Aj
            self.column_sums += np.concatenate([G[0, 1:d + 1], np.diag(G)[1:d + 1],
                                                [G[0, -1], G[-1, -1]]])
            st = self._new(lab)
            st.n += Aj.shape[0]
            st.n_clipped += int(np.count_nonzero(clipped if idx is None else clipped[idx]))
            st.S += G[s, s]
            st.z += G[s, d + 1]
            st.yty += float(G[d + 1, d + 1])
        return self

    def _groups(self, labels, n, what):
        """:func:`_holder_rows` of one holder label per row of n rows; ``labels`` None: all rows
        to the single holder."""
        if labels is None:
            if len(self.stats) > 1:
                raise BayesdpInputError(f"{what}: these statistics have {len(self.stats)} "
                                        "holders; give one holder label per row")
            return [(next(iter(self.stats), 0), None)] if n else []
        labels = np.asarray(labels)
        if labels.shape != (n,):
            raise BayesdpInputError(f"{what}: expected one holder label per row ({n}), got "
                                    f"shape {labels.shape}")
        return _holder_rows(labels, what)

    def _clip(self, X, y, overwrite, sums=True):
        """Rows clipped to the bounds, as :func:`bayesdp.privacy.clip_rows` clips them, and the
        mask of rows changed; one pass over the rows in blocks finds the rows that may be outside
        the bounds (plain ||x||^2 >= (B_x (1 - 1e-9))^2 or |y| > B_y, or not finite) and, with
        ``sums``, adds up the column sums. Only those rows are checked to be finite and go
        through :func:`bayesdp.privacy.clip_rows` (overflow-safe), in X's memory order, on which
        the rounding of its norms depends."""
        bx, by = self.bounds
        d, n = self.d, len(y)
        if not 1e-140 < bx < 1e140:  # squares near underflow or overflow: the safe path only
            check_finite(X, y)
            Xc, yc, clipped = privacy.clip_rows(X, y, bx, by)
            self._column_sums(Xc, yc)
            return Xc, yc, clipped
        limit = (bx * (1.0 - 1e-9)) ** 2
        inside = np.empty(n, dtype=bool)
        total = np.zeros(2 * d + 2)
        for lo in range(0, n, _BLOCK_ROWS):
            B, yb = X[lo:lo + _BLOCK_ROWS], y[lo:lo + _BLOCK_ROWS]
            with np.errstate(over="ignore", invalid="ignore"):
                sq = np.einsum("ij,ij->i", B, B)
                if sums:
                    total[:d] += B.sum(axis=0)
                    total[d:2 * d] += np.einsum("ij,ij->j", B, B)
                    total[2 * d:] += yb.sum(), np.einsum("i,i->", yb, yb)  # no BLAS threads
            np.less(sq, limit, out=inside[lo:lo + _BLOCK_ROWS])
            inside[lo:lo + _BLOCK_ROWS] &= np.abs(yb) <= by
        clipped = np.zeros(n, dtype=bool)
        edge = np.flatnonzero(~inside)  # a NaN or inf makes its row an edge row
        if len(edge):
            Xe, ye = X[edge], y[edge]
            if not (all_finite(Xe) and all_finite(ye)):
                check_finite(X, y)
            if X.flags.f_contiguous and not X.flags.c_contiguous:
                Xe = np.asfortranarray(Xe)
            Xe_c, ye_c, clipped[edge] = privacy.clip_rows(Xe, ye, bx, by)
            if not (overwrite and X.flags.writeable and y.flags.writeable):
                X, y = X.copy(order="K"), y.copy()
            X[edge], y[edge] = Xe_c, ye_c
            if sums:
                with np.errstate(over="ignore", invalid="ignore"):
                    total += np.concatenate([Xe_c.sum(axis=0) - Xe.sum(axis=0),
                                             np.einsum("ij,ij->j", Xe_c, Xe_c)
                                             - np.einsum("ij,ij->j", Xe, Xe),
                                             [ye_c.sum() - ye.sum(),
                                              np.einsum("i,i->", ye_c, ye_c)
                                              - np.einsum("i,i->", ye, ye)]])
        if sums:
            self.column_sums += total
        return X, y, clipped

    def _column_sums(self, X, y):
        self.column_sums += np.concatenate([X.sum(axis=0), np.einsum("ij,ij->j", X, X),
                                            [y.sum(), y @ y]])

    def _add_holder(self, lab, Xm, ym, clipped):
        st = self._new(lab)
        st.n += len(ym)
        st.n_clipped += int(np.count_nonzero(clipped))
        if self.average_rows > 1:
            st.rows.append((Xm, ym))
            return
        W = self._design(Xm)
        if self.grid is not None:
            st.K = st.K + secure_noise.grid_sums(W, ym, self.grid)
            return
        st.S += W.T @ W
        st.z += W.T @ ym
        st.yty += float(ym @ ym)

    def _design(self, X):
        return np.column_stack([np.ones(len(X)), X]) if self.intercept else X

    # --- merging ------------------------------------------------------------------------

    def merge(self, other):
        """The partial statistics of the rows of both (a new object; self and other unchanged).
        Both must have the same d, bounds, intercept, average_rows, grid, feature names and
        split; a holder in both gets the sums of both."""
        if not isinstance(other, PartialStatistics):
            raise BayesdpInputError(
                f"merge: expected PartialStatistics, got {type(other).__name__}")
        self._check_open("merge")
        other._check_open("merge")
        for name in ("d", "bounds", "intercept", "average_rows", "grid", "feature_names",
                     "split", "clamp_columns"):
            a, b = getattr(self, name), getattr(other, name)
            if a != b:
                raise BayesdpInputError(
                    f"merge: partial statistics with different {name} ({a!r} and {b!r}) cannot "
                    "be merged; their sums are of different rows, clipping or design")
        out = PartialStatistics(self.d, self.bounds, intercept=self.intercept,
                                average_rows=self.average_rows, grid=self.grid,
                                feature_names=self.feature_names, split=self.split,
                                clamp_columns=self.clamp_columns)
        for lab, st in self.stats.items():
            out.stats[lab] = st.plus(other.stats[lab]) if lab in other.stats else st.plus(
                out._new_sums())
        for lab, st in other.stats.items():
            if lab not in out.stats:
                out.stats[lab] = st.plus(out._new_sums())
        out.column_sums = self.column_sums + other.column_sums
        return out

    def _new_sums(self):
        D = self.d + int(self.intercept)
        return _HolderSums(np.zeros((D, D)), np.zeros(D), 0.0, 0, 0, [],
                           n_clamped=np.zeros(len(self.clamp_columns), dtype=np.int64))

    def __add__(self, other):
        if not isinstance(other, PartialStatistics):
            return NotImplemented
        return self.merge(other)

    # --- reading (the raw sums: not private) ----------------------------------------------

    @property
    def holders(self):
        """The holder labels in release order."""
        return list(self.stats)

    @property
    def n(self):
        """Rows of each holder (J,)."""
        return np.array([st.n for st in self.stats.values()], dtype=np.int64)

    @property
    def n_clipped(self):
        """Rows of each holder changed by clipping (J,)."""
        return np.array([st.n_clipped for st in self.stats.values()], dtype=np.int64)

    @property
    def n_clamped(self):
        """Values of each holder clamped to their declared ranges, per column of
        ``clamp_columns`` (J, k)."""
        return np.array([np.broadcast_to(st.n_clamped, (len(self.clamp_columns),))
                         for st in self.stats.values()], dtype=np.int64).reshape(
                             len(self.stats), len(self.clamp_columns))

    def _sums(self, what):
        if self.average_rows > 1 or self.grid is not None:
            raise BayesdpInputError(
                f"{what}: with average_rows > 1 the sums are formed over random groups at "
                "release, and with a secure-noise grid they are integers (grid_sums)")
        return [getattr(st, what) for st in self.stats.values()]

    @property
    def xtx(self):
        """S_j = W_j^T W_j of each holder (J, D, D), D = d (+1 with the intercept)."""
        return np.stack(self._sums("S"))

    @property
    def xty(self):
        """z_j = W_j^T y_j of each holder (J, D)."""
        return np.stack(self._sums("z"))

    @property
    def yty(self):
        """y_j^T y_j of each holder (J,)."""
        return np.array(self._sums("yty"))

    @property
    def grid_sums(self):
        """With a secure-noise grid: the exact integer sums [vech(S), z, y^T y] / grid of each
        holder (a list of object arrays)."""
        if self.grid is None:
            raise BayesdpInputError("grid_sums: these statistics have no secure-noise grid")
        return [st.K for st in self.stats.values()]

    # --- the one noisy release ----------------------------------------------------------

    def release(self, *, epsilon, delta, seed=None, calibration="exact", include_yty=True,
                holder_name=None):
        """The (eps, delta)-DP :class:`~bayesdp.releases.release_object.Release` of these
        statistics: S_hat_j = S_j + sigma M_j, z_hat_j = z_j + sigma v_j (eqs. 2-3) and, with
        ``include_yty`` (the default, as in :func:`bayesdp.release`), yty_hat_j, sigma =
        Delta * sigma(eps, delta), as :func:`bayesdp.release` makes it (same noise for the same
        seed). With a secure-noise grid the noise is the discrete Gaussian (no seed). Can be
        called once."""
        spec = ReleaseSpec(epsilon=epsilon, delta=delta, bounds=self.bounds,
                           calibration=calibration, noise="float" if self.grid is None else
                           "secure", intercept=self.intercept, average_rows=self.average_rows,
                           include_yty=include_yty, seed=seed, holder_name=holder_name)
        check_one_holder(spec.holder_name, len(self.stats))
        plan = secure_plan(spec, self.bounds, self.d)
        if plan is not None and plan["grid"] != self.grid:
            raise BayesdpInputError(
                f"these statistics were summed on the grid {self.grid!r}, but the secure "
                f"noise for epsilon={epsilon!r}, delta={delta!r} needs {plan['grid']!r}")
        if not self.stats or sum(st.n for st in self.stats.values()) == 0:
            raise BayesdpInputError("these partial statistics hold no rows")
        names = self.feature_names or [f"x{i}" for i in range(self.d)]
        return noisy_release(self, spec, feature_names=names, source="partial statistics",
                             split=self.split, plan=plan)

    def finish(self, permutation):
        """Called once by the release. With ``average_rows`` = k > 1: for each holder (in release
        order), a uniformly random partition of its rows (``permutation(n_j)``) into
        floor(n_j / k) groups of k, the n_j mod k rows left over dropped; each group contributes
        a = sum(w_i) / sqrt(k), b = sum(y_i) / sqrt(k) (w_i the design rows) to S, z and y^T y.
        Sets ``n_used``."""
        self._check_open("release")
        self.released = True
        k = self.average_rows
        for st in self.stats.values():
            if k == 1:
                st.n_used = st.n
                continue
            X = np.concatenate([r[0] for r in st.rows]) if st.rows else np.zeros((0, self.d))
            y = np.concatenate([r[1] for r in st.rows]) if st.rows else np.zeros(0)
            st.rows = []
            m = st.n // k
            groups = np.asarray(permutation(st.n))[: m * k].reshape(m, k)
            A = self._design(X)[groups].sum(axis=1) / math.sqrt(k)
            b = y[groups].sum(axis=1) / math.sqrt(k)
            st.n_used = m
            if self.grid is not None:
                st.K = secure_noise.grid_sums(A, b, self.grid)
            else:
                st.S, st.z, st.yty = A.T @ A, A.T @ b, float(b @ b)

    def uncentred_columns(self, names, y_name="y"):
        """Columns (features and y, over all holders) whose |mean| exceeds their sd, as text
        ("x0 (mean 5.02, sd 1.01)"); the data holder's own check, not part of the release."""
        n = sum(st.n for st in self.stats.values())
        if n < 2:
            return []
        d = self.d
        sx, sxx = self.column_sums[:d] / n, self.column_sums[d:2 * d] / n
        sy, syy = self.column_sums[2 * d:] / n
        out = []
        for name, mean, sq in [*zip(names, sx, sxx), (y_name, sy, syy)]:
            sd = math.sqrt(max(sq - mean * mean, 0.0))
            if abs(mean) > sd:
                out.append(f"{name} (mean {mean:.3g}, sd {sd:.3g})")
        return out

    def __repr__(self):
        return (f"PartialStatistics(d={self.d}, bounds={self.bounds}, holders={len(self.stats)}, "
                f"rows={sum(st.n for st in self.stats.values())}; exact sums, NOT private)")


def _holder_rows(labels, what="nodes"):
    """(label, row indices) of each holder in ``labels``, in order of first appearance, the
    indices in row order; indices None when all rows have one label. Small integer labels
    (a random split) are found with one comparison per label, others by a stable sort."""
    if len(labels) == 0:
        return []
    if labels.dtype.kind in "iu":
        lo, hi = int(labels.min()), int(labels.max())
        if lo == hi:
            return [(lo, None)]
        if hi - lo < 64:
            found = [(lab, np.flatnonzero(labels == lab)) for lab in range(lo, hi + 1)]
            found = [(lab, idx) for lab, idx in found if len(idx)]
            return sorted(found, key=lambda f: f[1][0])
    holders = unique_in_order(labels, what)
    if len(holders) == 1:
        return [(holders[0], None)]
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    starts = np.flatnonzero(np.concatenate([[True], sorted_labels[1:] != sorted_labels[:-1]]))
    ends = np.append(starts[1:], len(order))
    at = {sorted_labels[a].item() if hasattr(sorted_labels[a], "item") else sorted_labels[a]:
          order[a:b] for a, b in zip(starts, ends)}
    return [(lab, at[lab]) for lab in holders]
