"""Rows per second of the clipped Gram accumulation (partial statistics), against numpy's own
X.T @ X on the same rows as the ceiling, all measured in this run.

    python benchmarks/bench_gram.py [--rows 20000000] [--d 10] [--nodes 1] [--workers 1 2]

(a) in memory: PartialStatistics.add of the rows (finiteness check, clipping, random split when
    --nodes > 1, the per-holder sums), and bayesdp.release;
(b) bayesdp.releases.release_file on a Parquet file of --rows rows in row groups of --row-group rows
    (written to a temporary folder first), with the default chunksize and with one row group
    per chunk (pyarrow decodes the next record batch in a second thread meanwhile);
(c) bayesdp.releases.release_dask on the same Parquet file, on a distributed.LocalCluster of 1 and 2
    worker processes with one thread each (needs bayesdp[dask]).
The ceiling is X.T @ X (BLAS, all cores) over rows already in memory; each line prints rows/s
and its ratio to the ceiling. The rows are N(0, I) features with B_x = 4.5 (at d = 10 about
2.7% of the rows are clipped). The timings depend on what else runs on the machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

BOUNDS = (4.5, 4.5)
KW = dict(epsilon=1.0, delta=1e-5, bounds=BOUNDS, seed=0)


def best_time(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def rows_block(rng, n, d):
    X = rng.standard_normal((n, d))
    y = X @ np.linspace(-1, 1, d) * 0.3 + rng.standard_normal(n)
    return X, y


def write_parquet(path, rows, d, row_group, seed=0):
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    names = [f"x{i}" for i in range(d)] + ["y"]
    with pq.ParquetWriter(path, pa.schema([(c, pa.float64()) for c in names])) as w:
        for lo in range(0, rows, row_group):
            X, y = rows_block(rng, min(row_group, rows - lo), d)
            w.write_table(pa.table([*X.T, y], names=names), row_group_size=row_group)


def main(argv=None):
    import bayesdp
    from bayesdp.releases import PartialStatistics, random_split

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=float, default=2e7, help="rows in the Parquet file")
    ap.add_argument("--memory-rows", type=float, default=5e6, help="rows for (a)")
    ap.add_argument("--d", type=int, default=10)
    ap.add_argument("--nodes", type=int, default=1, help="holders (random split)")
    ap.add_argument("--row-group", type=float, default=1e6)
    ap.add_argument("--workers", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    n_file, n_mem, d, J = int(args.rows), int(args.memory_rows), args.d, args.nodes
    warnings.simplefilter("ignore")  # the data-holder warnings are not what is measured

    print("load average (1, 5, 15 min): " + " ".join(f"{v:.2f}" for v in os.getloadavg()))
    X, y = rows_block(np.random.default_rng(1), n_mem, d)
    ceiling = n_mem / best_time(lambda: X.T @ X, args.repeat)
    out = [("numpy X.T @ X (ceiling)", ceiling)]

    def add():
        acc = PartialStatistics(d, BOUNDS, J, split="random")
        acc.add(X, y, random_split(len(y), J, np.random.default_rng(0)) if J > 1 else None)

    out.append(("(a) PartialStatistics.add, in memory", n_mem / best_time(add, args.repeat)))
    out.append(("(a) bayesdp.release, in memory", n_mem / best_time(
        lambda: bayesdp.release(X, y, nodes=J, **KW), args.repeat)))
    del X, y

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "rows.parquet"
        t0 = time.perf_counter()
        write_parquet(path, n_file, d, int(args.row_group))
        print(f"wrote {n_file:.3g} rows x {d + 1} columns of Parquet in "
              f"{time.perf_counter() - t0:.1f} s ({path.stat().st_size / 2**30:.2f} GiB)")
        for chunk in (100_000, int(args.row_group)):
            t = best_time(lambda: bayesdp.releases.release_file(path, nodes=J, chunksize=chunk,
                                                                progress=False, **KW), 1)
            out.append((f"(b) release_file, Parquet, chunksize {chunk:.0e}", n_file / t))
        out += dask_rates(path, n_file, J, args.workers)

    print(f"\nrows/s of the clipped Gram accumulation at d = {d}, J = {J} "
          f"(ceiling on {n_mem:.3g} rows in memory)")
    for name, rate in out:
        print(f"{name:48s} {rate:12.3e} rows/s   {rate / ceiling:6.3f} x ceiling")


def dask_rates(path, n_file, J, workers):
    try:
        import dask.dataframe as dd
        import distributed
    except ImportError:
        print("(c) skipped: pip install bayesdp[dask]")
        return []
    import bayesdp

    out = []
    for w in workers:
        with distributed.LocalCluster(n_workers=w, threads_per_worker=1, processes=True,
                                      dashboard_address=None) as cluster, \
                distributed.Client(cluster):
            ddf = dd.read_parquet(path, split_row_groups=True)
            # the first call also starts the workers' imports; the best of two is timed
            t = best_time(lambda: bayesdp.releases.release_dask(ddf, nodes=J, **KW), 2)
            out.append((f"(c) release_dask, Parquet, {w} worker(s)", n_file / t))
    return out


if __name__ == "__main__":
    main()
