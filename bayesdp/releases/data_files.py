"""Reading a data file (CSV, compressed CSV or Parquet) in chunks, for
:func:`~bayesdp.releases.from_rows.release_file`."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ..errors import BayesdpInputError
from ..progress import bar
from .rows import check_names_distinct, frame_dtype_problem, looks_numeric, non_numeric_error

# pandas and pyarrow (optional) are imported inside the functions that read files: `import
# bayesdp` imports this module


def _csv_header(path):
    """The fields of a CSV's header row as written in the file: read by pandas' parser, from the
    file decompressed as :func:`_iter_chunks` does, but as text, so no field is renamed (pandas'
    header=0 turns a second "a" into "a.1" and an empty field into "Unnamed: 1")."""
    import pandas as pd

    try:
        first = pd.read_csv(path, header=None, nrows=1, dtype=str, keep_default_na=False,
                            na_filter=False, compression=_compression(path))
    except UnicodeDecodeError:
        raise BayesdpInputError(f"{path}: not a UTF-8 text (CSV) file") from None
    except pd.errors.EmptyDataError:
        raise BayesdpInputError(f"{path}: the file is empty") from None
    except pd.errors.ParserError as exc:
        raise BayesdpInputError(f"{path}: malformed CSV ({exc})") from None
    if first.shape[0] == 0:
        raise BayesdpInputError(f"{path}: the file is empty")
    return [str(f) for f in first.iloc[0]]


def check_csv_header(path):
    """The names in a CSV's header row (header="infer"), refusing a header that holds numbers
    (it is then most likely a data row, and its values would be published as feature names, the
    row dropped) and empty or repeated names (:func:`_check_column_names`); returns them."""
    first = _csv_header(path)
    numeric = [k for k, f in enumerate(first) if looks_numeric(f)]
    if numeric:
        raise BayesdpInputError(
            f"{path}: header: the first row has {len(numeric)} of {len(first)} fields that are "
            f"numbers (columns {numeric[:10]}{' ...' if len(numeric) > 10 else ''}), so it looks "
            "like a data row, not column names; bayesdp will not publish data values as feature "
            "names. If the file has no header row pass header=None (command line: --no-header); "
            "otherwise give the columns names that are not numbers"
        )
    return _check_column_names(first, f"{path}: header")


def _check_column_names(names, where):
    """Refuse a table whose columns have empty (or blank) or repeated names, naming them: the
    feature names are published and must name the file's columns one to one. The one check of
    the CSV header (:func:`check_csv_header`), Parquet schemas (:func:`_parquet_columns`) and
    DataFrames (:func:`pick_columns`)."""
    return check_names_distinct(names, where, "column")


def _own(a):
    return a if a.flags.owndata and a.flags.writeable else a.copy(order="K")


def _numeric_column(col):
    if frame_dtype_problem(col.dtype, col) is not None:
        return False
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
    whose feature and response columns are integers, floats, decimals or booleans are read with
    pyarrow alone, the next record batch decoded into a second buffer by a second thread
    meanwhile; other files go through pandas (:func:`frame_rows`).

    Columns are numbers: integers, floats, decimals, and booleans as 0/1 (a yes/no column is a
    0/1 indicator, the usual coding of a binary regressor, and its value depends on no unit or
    origin); dates, times, durations and text are refused naming the column and its type (a
    timestamp read as a number is nanoseconds since 1970, which any bound clips). Column names
    must be non-empty and distinct (:func:`_check_column_names`). A file that cannot be read as
    CSV or Parquet is a :class:`BayesdpInputError` naming it."""
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
    response column is a dictionary (categorical) of numbers or a column name is not a string
    (pandas then reads the file). Columns that are not numbers are refused first, here
    (:func:`_parquet_columns`)."""
    pa, _ = _pyarrow()
    pf = _open_parquet(path, memory_map=True)
    try:
        feats, ycol, ncol = _parquet_columns(pf, path, y_column, node_column)
    except BaseException:
        pf.close()
        raise
    schema, used = pf.schema_arrow, [*feats, ycol]
    if not all(isinstance(c, str) for c in used + [ncol] if c is not None) \
            or any(pa.types.is_dictionary(schema.field(c).type) for c in used):
        pf.close()
        return None
    # integers and floats are copied as they are; booleans (0/1) and decimals cast to float64
    cast = [not (pa.types.is_integer(schema.field(c).type)
                 or pa.types.is_floating(schema.field(c).type)) for c in used]
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
            col = batch.column(k)
            A[:, k + 1] = (col.cast(pa.float64()) if cast[k] else col).to_numpy(
                zero_copy_only=False)
        return A, None if ncol is None else batch.column(d + 1).to_pandas().to_numpy()

    def chunks():
        bufs = (_Buffer(), _Buffer())
        with pf, ThreadPoolExecutor(1) as pool, \
                bar(pf.metadata.num_rows, desc, progress=progress, unit="row",
                    unit_scale=True) as pb:
            ahead, k = pool.submit(read, bufs[0]), 0
            try:
                while (got := _arrow_result(ahead.result, path, pb.n)) is not None:
                    k = 1 - k
                    ahead = pool.submit(read, bufs[k])  # while the caller uses the other buffer
                    pb.update(len(got[0]))
                    yield got[0], feats, ycol, ncol, got[1]
            finally:
                ahead.cancel()

    return chunks()


def _arrow_result(get, path, done):
    """``get()``, a pyarrow error while reading a Parquet file's rows (a corrupt page, a value
    that does not fit float64) becoming a :class:`BayesdpInputError` naming the file."""
    pa, _ = _pyarrow()
    try:
        return get()
    except pa.ArrowException as exc:
        raise BayesdpInputError(
            f"{path}: cannot read the Parquet data after row {done} (pyarrow: {exc})") from None


def _open_parquet(path, memory_map=False):
    """``pyarrow.parquet.ParquetFile(path)`` with its schema read; a file that is not Parquet
    (too short, no footer, a corrupt footer) is a :class:`BayesdpInputError` naming it."""
    pa, pq = _pyarrow()
    try:
        pf = pq.ParquetFile(path, memory_map=memory_map)
    except pa.ArrowException as exc:
        raise BayesdpInputError(
            f"{path}: not a readable Parquet file (pyarrow: {exc}); a file named .parquet or "
            ".pq is read as Parquet") from None
    try:
        pf.schema_arrow
    except pa.ArrowException as exc:
        pf.close()
        raise BayesdpInputError(
            f"{path}: not a readable Parquet file (pyarrow: {exc})") from None
    return pf


def _parquet_columns(pf, path, y_column, node_column):
    """(feature columns, y column, node column or None) of an open Parquet file, as pandas names
    them (index columns stored by pandas are not among them), after refusing empty or repeated
    column names (:func:`_check_column_names`) and feature or response columns whose type is not
    a number (integers, floats, decimals, booleans as 0/1, dictionaries of these): timestamps,
    dates, times, durations and intervals (which pandas and pyarrow turn into counts of
    nanoseconds, days or other units since 1970), text, binary and nested values."""
    pa, _ = _pyarrow()
    schema = pf.schema_arrow
    _check_column_names(schema.names, str(path))
    try:
        cols = list(schema.empty_table().to_pandas().columns)
    except pa.ArrowException as exc:
        raise BayesdpInputError(
            f"{path}: pandas cannot read the Parquet schema (pyarrow: {exc})") from None
    feats, ycol, ncol = pick_columns(cols, y_column, node_column, path)
    index = {c for c in (schema.pandas_metadata or {}).get("index_columns", [])
             if isinstance(c, str)}
    bad = []
    for field in schema:
        if field.name in index or (ncol is not None and field.name == str(ncol)):
            continue
        problem = _arrow_type_problem(pa, field.type)
        if problem is not None:
            bad.append((field.name, str(field.type), problem))
    if bad:
        raise non_numeric_error(str(path), bad, str(ycol), columns=cols)
    return feats, ycol, ncol


def _arrow_type_problem(pa, t):
    """None for a pyarrow type of numbers (see :func:`_parquet_columns`), else whether it is a
    date, time or duration (the error's hint)."""
    if pa.types.is_dictionary(t):
        return _arrow_type_problem(pa, t.value_type)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) \
            or pa.types.is_boolean(t):
        return None
    return pa.types.is_temporal(t) or pa.types.is_interval(t)


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
    ``node_column``; every other column except ``node_column`` is a feature. Empty or repeated
    column names are refused (:func:`_check_column_names`)."""
    _check_column_names(cols, str(where))
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
    (``where``: the file or table, ``rows``: which rows, for the message). Columns of
    dates, times, durations or text are refused by their type (:func:`frame_dtype_problem`;
    NumPy would turn a datetime into nanoseconds since 1970) before any is converted."""
    used = [*feats, ycol]
    dtypes = chunk.dtypes
    bad = [(c, *p) for c in used if (p := _column_problem(chunk, c, dtypes[c])) is not None]
    if not bad:
        try:
            return (_own(chunk[feats].to_numpy(dtype=np.float64)),
                    _own(chunk[ycol].to_numpy(dtype=np.float64)))
        except (TypeError, ValueError):
            bad = [(c, None, False) for c in used if not _numeric_column(chunk[c])]
    raise non_numeric_error(where, bad, ycol, rows, list(chunk.columns) if bad else None)


def _column_problem(chunk, c, dtype):
    """:func:`frame_dtype_problem` of column ``c``, complex numbers refused too (float64 would
    drop their imaginary part with only a warning)."""
    kind = getattr(dtype, "kind", "")
    if kind == "c":
        return f"{dtype} (complex: the imaginary part would be dropped)", False
    return frame_dtype_problem(dtype, chunk[c] if kind == "O" else None)


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


def _compression(path):
    """pandas' ``compression`` for a CSV file ``path`` (None: plain text)."""
    suffix = path.suffix.lower()
    if suffix in (".gz", ".bz2", ".xz") and path.name.lower().endswith(".tar" + suffix):
        return "tar"
    return _COMPRESSION.get(suffix)


def _iter_chunks(path, header, chunksize, progress=False, desc=None):
    """DataFrames of ``chunksize`` rows; with a progress bar over the rows (Parquet) or the bytes
    of the file read so far (CSV, compressed or not)."""
    import pandas as pd

    suffix = path.suffix.lower()
    if suffix in (".parquet", ".pq"):
        pf = _open_parquet(path)
        with pf, bar(pf.metadata.num_rows, desc, progress=progress, unit="row",
                     unit_scale=True) as pb:
            batches = pf.iter_batches(batch_size=chunksize)
            while (batch := _arrow_result(lambda: next(batches, None), path, pb.n)) is not None:
                pb.update(batch.num_rows)
                yield batch.to_pandas()
        return
    hdr = 0 if header == "infer" else None
    # the header as written: pandas' chunks would show a repeated name "a" as "a.1" and an
    # empty one as "Unnamed: 1", which would be published as feature names
    names = check_csv_header(path) if hdr == 0 else None
    try:
        with open(path, "rb") as fh, bar(path.stat().st_size, desc, progress=progress, unit="B",
                                          unit_scale=True, unit_divisor=1024) as pb:
            reader = pd.read_csv(fh, header=hdr, chunksize=chunksize,
                                 compression=_compression(path))
            for chunk in reader:
                pb.update(fh.tell() - pb.n)  # what the parser has read of the file so far
                if names is not None and [str(c) for c in chunk.columns] != names:
                    raise BayesdpInputError(
                        f"{path}: header: pandas read the column names as "
                        f"{list(chunk.columns)}, not as written ({names})")
                yield chunk
    except pd.errors.ParserError as exc:
        raise BayesdpInputError(f"{path}: malformed CSV ({exc})") from None
    except pd.errors.EmptyDataError:
        raise BayesdpInputError(f"{path}: the file is empty") from None
    except UnicodeDecodeError:
        raise BayesdpInputError(f"{path}: not a UTF-8 text (CSV) file") from None
