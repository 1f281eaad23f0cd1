"""The release layer: rows become a :class:`Release` of noisy summary statistics (paper eqs. 2-3).

The modules in the order the data passes through them:

    spec.py               ReleaseSpec: the mechanism's parameters, checked once
    layout.py             the data layout [vech(S), z, y^T y] and the noise model of a release
    rows.py, holders.py   checks of the rows, bounds and design; which rows go to which holder
    data_files.py         a CSV or Parquet data file read in chunks
    formula.py            TableEncoding: a table's rows encoded by a formula with declared
                          per-column bounds, and the (B_x, B_y) they give (docs/tables.md)
    from_table.py         the rows of a table through release, release_file and release_dask
    partial.py            PartialStatistics: clipping and the exact per-holder sums (mergeable)
    mechanism.py          the Gaussian or discrete Gaussian noise on those sums
    from_rows.py          release() and release_file(): the one place rows become a Release
    from_dask.py          release_dask(): the same from a Dask DataFrame, map/reduce
    release_object.py     the Release object and the checks of its fields
    cost.py               the cost a release's own fields give; the check of its cost record
    files.py              its JSON file format (docs/release-format.md); the atomic write
    combine.py            combine_releases(): holders' releases put together
    ledger.py             Ledger: a data holder's releases, their total and a cap checked
                          before the noise is drawn
"""

from .combine import combine_releases
from .files import load_release, write_text_atomic
from .formula import TableEncoding
from .from_dask import partial_statistics_dask, release_dask
from .from_rows import release, release_file
from .holders import contiguous_split, random_split
from .ledger import Ledger, LedgerError
from .partial import PartialStatistics
from .release_object import INTERCEPT_NAME, Release
from .spec import ReleaseSpec

__all__ = [
    "INTERCEPT_NAME",
    "Ledger",
    "LedgerError",
    "PartialStatistics",
    "Release",
    "ReleaseSpec",
    "TableEncoding",
    "combine_releases",
    "contiguous_split",
    "load_release",
    "partial_statistics_dask",
    "release",
    "release_dask",
    "random_split",
    "release_file",
    "write_text_atomic",
]
