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


def iter_columns(path, header, chunksize, y_column, node_column, progress=False, desc=None):
    """Chunks of a data file with the feature, response and node column names resolved."""
    for chunk in _iter_chunks(path, header, chunksize, progress, desc):
        yield (chunk, *pick_columns(list(chunk.columns), y_column, node_column, path))


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
        try:
            import pyarrow.parquet as pq
        except ImportError:  # pragma: no cover - depends on the install
            raise BayesdpInputError("reading Parquet needs pyarrow (pip install pyarrow)") from None
        pf = pq.ParquetFile(path)
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
