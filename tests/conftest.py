"""Set-up shared by every test: one BLAS thread per process.

The suite runs in two pytest-xdist workers (pyproject.toml, ``addopts``). OpenBLAS starts one
thread per core in each of them, so on a 2-core machine four BLAS threads share two cores and
spin-wait on each other. The variables below are read when numpy, scipy or jaxlib first load
OpenBLAS; pytest imports this file before any test module imports numpy (in the main process
and in each worker), and subprocesses started by tests inherit the setting. XLA's own thread
pool is not affected. A value the caller set is kept.

The shared helper modules (dp_helpers.py, geweke_helpers.py, ...) sit in this folder, which
pyproject.toml's ``pythonpath`` puts on ``sys.path`` for the test files in the sub-folders.
"""
import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
