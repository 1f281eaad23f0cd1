"""Reading a data file (CSV, compressed CSV or Parquet) in chunks, for
:func:`~bayesdp.releases.from_rows.release_file`."""

from __future__ import annotations

import numpy as np

from ..errors import BayesdpInputError
from .rows import looks_numeric


def check_csv_header(path):
    """Refuse a CSV whose header row (header="infer") holds numbers: it is then most likely a
    data row, and its values would be published as feature names (and the row dropped)."""
    import csv

    try:
        with open(path, newline="", encoding="utf-8") as fh:
            first = next(csv.reader(fh), None)
    except UnicodeDecodeError:
        raise BayesdpInputError(f"{path}: not a UTF-8 text (CSV) file") from None
    if first is None:
        raise BayesdpInputError(f"{path}: the file is empty")
    numeric = [k for k, f in enumerate(first) if looks_numeric(f)]
    if numeric:
        raise BayesdpInputError(
            f"{path}: header: the first row has {len(numeric)} of {len(first)} fields that are "
            f"numbers (columns {numeric[:10]}{' ...' if len(numeric) > 10 else ''}), so it looks "
            "like a data row, not column names; bayesdp will not publish data values as feature "
            "names. If the file has no header row pass header=None (command line: --no-header); "
            "otherwise give the columns names that are not numbers"
        )


def _own(a):
    return a if a.flags.owndata and a.flags.writeable else a.copy(order="K")


def numeric_column(col):
    try:
        col.to_numpy(dtype=np.float64)
    except (TypeError, ValueError):
        return False
    return True


def iter_stacked(path, header, chunksize, y_column, node_column, progress=False, desc=None):
    """Chunks of a data file as (A, feats, ycol, ncol, labels): A = [1, X, y] float64 with
    contiguous columns (rows x (d + 2); the input of :meth:`PartialStatistics.add_stacked`), the
    feature, response and node column names, and the node column's values (None without one).

    A is a view of a reused buffer: it is valid until the next chunk is asked for. Parquet files
    whose feature and response columns are integers or floats are read with pyarrow alone, the
    next record batch decoded into a second buffer by a second thread meanwhile; other files go
    through pandas (:func:`frame_rows`)."""
    if path.suffix.lower() in (".parquet", ".pq"):
        fast = _parquet_stacked(path, chunksize, y_column, node_column, progress, desc)
        if fast is not None:
            yield from fast
            return
    start, buf = 0, _Buffer()
    for chunk in _iter_chunks(path, header, chunksize, progress, desc):
        feats, ycol, ncol = pick_columns(list(chunk.columns), y_column, node_column, path)
        X, y = frame_rows(chunk, feats, ycol, path, f" in rows {start}..{start + len(chunk) - 1}")
        A = buf.rows(len(y), len(feats))
        A[:, 1:-1], A[:, -1] = X, y
        yield A, feats, ycol, ncol, None if ncol is None else chunk[ncol].to_numpy()
        start += len(chunk)


class _Buffer:
    """A Fortran-order float64 buffer [1, X, y], grown when a chunk needs more rows."""

    def __init__(self):
        self.buf = None

    def rows(self, n, d):
        """The first n rows, for d features (column 0 holds ones)."""
        if self.buf is None or self.buf.shape[0] < n or self.buf.shape[1] != d + 2:
            self.buf = np.empty((max(n, 1), d + 2), order="F")
            self.buf[:, 0] = 1.0
        return self.buf[:n]


def _parquet_stacked(path, chunksize, y_column, node_column, progress, desc):
    """The chunks of :func:`iter_stacked` read with pyarrow alone, or None when a feature or the
    response column is not of an integer or floating-point type (pandas then reads the file, and
    names the non-numeric columns)."""
    pa, pq = _pyarrow()
    from concurrent.futures import ThreadPoolExecutor

    from ..progress import bar

    pf = pq.ParquetFile(path, memory_map=True)
    schema = pf.schema_arrow
    try:
        # the columns as pandas shows them (index columns stored by pandas are not among them)
        cols = list(schema.empty_table().to_pandas().columns)
        feats, ycol, ncol = pick_columns(cols, y_column, node_column, path)
    except BaseException:
        pf.close()
        raise
    names, used = schema.names, [*feats, ycol]
    if any(not isinstance(c, str) or names.count(c) != 1 for c in used + [ncol]
           if c is not None) or not all(
            pa.types.is_integer(schema.field(c).type) or pa.types.is_floating(schema.field(c).type)
            for c in used):
        pf.close()
        return None
    d = len(feats)
    batches = pf.iter_batches(batch_size=chunksize, columns=used + ([ncol] if ncol else []),
                              use_threads=False)

    def read(buf):
        """The next record batch copied into ``buf`` (A, labels), or None at the end."""
        batch = next(batches, None)
        if batch is None:
            return None
        A = buf.rows(batch.num_rows, d)
        for k in range(d + 1):
            A[:, k + 1] = batch.column(k).to_numpy(zero_copy_only=False)
        return A, None if ncol is None else batch.column(d + 1).to_pandas().to_numpy()

    def chunks():
        bufs = (_Buffer(), _Buffer())
        with pf, ThreadPoolExecutor(1) as pool, \
                bar(pf.metadata.num_rows, desc, progress=progress, unit="row",
                    unit_scale=True) as pb:
            ahead, k = pool.submit(read, bufs[0]), 0
            try:
                while (got := ahead.result()) is not None:
                    k = 1 - k
                    ahead = pool.submit(read, bufs[k])  # while the caller uses the other buffer
                    pb.update(len(got[0]))
                    yield got[0], feats, ycol, ncol, got[1]
            finally:
                ahead.cancel()

    return chunks()


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - depends on the install
        raise BayesdpInputError("reading Parquet needs pyarrow (pip install pyarrow)") from None
    return pa, pq


def pick_columns(cols, y_column, node_column, where):
    """(feature columns, y column, node column or None) of a table with columns ``cols``:
    ``y_column`` names (or indexes) the response, by default the last column that is not
    ``node_column``; every other column except ``node_column`` is a feature."""
    ncol = None if node_column is None else _pick_column(cols, node_column, "node_column")
    if y_column is None:
        rest = [c for c in cols if c != ncol]
        if not rest:
            raise BayesdpInputError(f"{where}: no column besides node_column={ncol!r}")
        ycol = rest[-1]
    else:
        ycol = _pick_column(cols, y_column, "y_column")
    if ncol is not None and ycol == ncol:
        raise BayesdpInputError(
            f"{where}: y_column={y_column!r} and node_column={node_column!r} are the same "
            f"column {ycol!r}; the response and the holder labels must be different columns")
    feats = [c for c in cols if c != ycol and c != ncol]
    if not feats:
        raise BayesdpInputError(f"{where}: no feature columns besides y_column={ycol!r}")
    return feats, ycol, ncol


def frame_rows(chunk, feats, ycol, where, rows=""):
    """(X, y) of a DataFrame chunk as float64 arrays of their own (never views of the chunk's
    data, so they may be changed in place); non-numeric columns are refused naming them
    (``where``: the file or table, ``rows``: which rows, for the message)."""
    try:
        return (_own(chunk[feats].to_numpy(dtype=np.float64)),
                _own(chunk[ycol].to_numpy(dtype=np.float64)))
    except (TypeError, ValueError):
        bad = [c for c in [*feats, ycol] if not numeric_column(chunk[c])]
        what = ", ".join(f"{c!r}" + (" (y_column)" if c == ycol else "") for c in bad)
        raise BayesdpInputError(
            f"{where}: non-numeric values in column(s) {what or '?'}{rows}"
            + (f"; columns: {list(chunk.columns)} (holder labels go in node_column)"
               if bad else "")
        ) from None


def _pick_column(cols, key, what):
    if isinstance(key, (int, np.integer)):
        try:
            return cols[key]
        except IndexError:
            raise BayesdpInputError(f"{what}={key} is out of range for {len(cols)} columns") from None
    if key not in cols:
        hint = ""
        if isinstance(key, str) and key.lstrip("-").isdigit():
            hint = " (a column index must be an integer)"
        raise BayesdpInputError(f"{what}={key!r} is not a column (columns: {cols}){hint}")
    return key


#: file endings pandas reads as compressed (its ``compression="infer"``)
_COMPRESSION = {".gz": "gzip", ".bz2": "bz2", ".zip": "zip", ".xz": "xz", ".zst": "zstd",
                ".tar": "tar"}


def _iter_chunks(path, header, chunksize, progress=False, desc=None):
    """DataFrames of ``chunksize`` rows; with a progress bar over the rows (Parquet) or the bytes
    of the file read so far (CSV, compressed or not)."""
    import pandas as pd

    from ..progress import bar

    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        pf = _pyarrow()[1].ParquetFile(path)
        with bar(pf.metadata.num_rows, desc, progress=progress, unit="row",
                 unit_scale=True) as pb:
            for batch in pf.iter_batches(batch_size=chunksize):
                pb.update(batch.num_rows)
                yield batch.to_pandas()
        return
    hdr = 0 if header == "infer" else None
    comp = _COMPRESSION.get(suffix)
    if suffix in (".gz", ".bz2", ".xz") and path.name.lower().endswith(".tar" + suffix):
        comp = "tar"
    try:
        with open(path, "rb") as fh, bar(path.stat().st_size, desc, progress=progress, unit="B",
                                          unit_scale=True, unit_divisor=1024) as pb:
            reader = pd.read_csv(fh, header=hdr, chunksize=chunksize, compression=comp)
            for chunk in reader:
                pb.update(fh.tell() - pb.n)  # what the parser has read of the file so far
                yield chunk
    except pd.errors.ParserError as exc:
        raise BayesdpInputError(f"{path}: malformed CSV ({exc})") from None
    except pd.errors.EmptyDataError:
        raise BayesdpInputError(f"{path}: the file is empty") from None
