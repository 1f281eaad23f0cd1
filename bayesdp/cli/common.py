"""What several ``bayesdp`` commands share: the help format, the output-path check, the
``--progress`` option, warnings on stderr and a JSON file writer."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np

from ..errors import BayesdpInputError, check_output_folder, check_output_file
from ..releases import write_text_atomic


class _HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows every option's default, "(default: ...)", unless its help already says it (the word
    "default") or it has none to show (None, a flag's False). Lists print as typed: "1 5 10"."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("default" in text.lower() or default is None or default is False
                or default is argparse.SUPPRESS
                or (not action.option_strings and action.nargs not in ("?", "*"))):
            return text
        if isinstance(default, (list, tuple)):
            default = " ".join(str(v) for v in default)
        return f"{text} (default: {str(default).replace('%', '%%')})"

    def _fill_text(self, text, width, indent):
        # a block that starts "example:" or "examples:" (an epilog) keeps its lines as written
        blocks = text.strip("\n").split("\n\n")
        return "\n\n".join(
            "\n".join(indent + line for line in b.splitlines())
            if b.lstrip().lower().startswith(("example:", "examples:"))
            else super(_HelpFormatter, self)._fill_text(b, width, indent) for b in blocks)

    def _split_lines(self, text, width):
        # no breaks inside hyphenated names (normalx-paper, --include-yty)
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def use_help_formatter(parser):
    """Set :class:`_HelpFormatter` on ``parser`` and on every sub-command below it."""
    parser.formatter_class = _HelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                use_help_formatter(sub)


def add_command(subparsers, name, func, help, description=None):
    """Add the sub-command ``name`` that runs ``func(args)``; its ``--help`` text is
    ``description``, or else ``func``'s docstring."""
    p = subparsers.add_parser(name, help=help, description=description or func.__doc__)
    p.set_defaults(func=func)
    return p


def add_interval_options(p):
    """``--prob`` and ``--interval``: the interval every table, CSV and plot reports."""
    p.add_argument("--prob", type=float, default=0.9, help="probability of the intervals")
    p.add_argument("--interval", default="eti", choices=["eti", "hdi"],
                   help="equal-tailed (eti: the 5%% and 95%% quantiles at 0.9, columns eti_5%%, "
                        "eti_95%%) or highest-density (hdi) intervals")


def add_progress_option(p):
    """``--progress/--no-progress``: a progress bar on stderr; default: only on a terminal."""
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar on stderr with a count and the time left (default: "
                        "only when stderr is a terminal)")


# output options of every command, checked before any work is done (a long fit or comparison
# must not fail at its end on a missing folder)
_OUT_FILES = ("out", "truth", "truth_out")
_OUT_DIRS = ("out_dir",)


def check_output_paths(args):
    """Refuse output paths whose folder does not exist, before the command does any work.

    Files (``--out``, ``--truth``, ``--truth-out``): the folder must exist and the path must not
    be a folder. Folders (``--out-dir``): created with any missing parents by every command, so
    the path and its nearest existing parent must not be files.
    """
    for names, check in ((_OUT_FILES, check_output_file), (_OUT_DIRS, check_output_folder)):
        for name in names:
            value = getattr(args, name, None)
            if value is not None:
                check(value, "--" + name.replace("_", "-"))
    if getattr(args, "force", None) is False and Path(args.out).exists():
        raise BayesdpInputError(f"--out: {args.out!r} exists and is kept as it is (a release "
                                "file records a budget already spent); choose another name, or "
                                "give --force to replace it")


def add_force_option(p):
    """``--force``: replace an existing ``--out`` release file (refused by default)."""
    p.add_argument("--force", action="store_true",
                   help="replace --out if it exists (default: refuse, keeping the file)")


#: the modules :func:`no_distributed_import` keeps out
_DISTRIBUTED = ("distributed", "dask.distributed")


@contextlib.contextmanager
def no_distributed_import():
    """Within it, ``import distributed`` and ``import dask.distributed`` raise ImportError,
    unless the process already imported either (then nothing changes).

    xarray, writing netCDF, asks dask which scheduler is active (``xarray.backends.locks.
    get_dask_scheduler``, ``dask.base.get_scheduler``); both import distributed only to see
    whether a distributed client is running and take an ImportError as "no". A process that
    never imported distributed has no client, so the answer is the same without the import,
    which loads about two hundred modules. For a command's own writes, not for a library call
    (another thread could be importing it meanwhile)."""
    if any(name in sys.modules for name in _DISTRIBUTED):
        yield
        return
    for name in _DISTRIBUTED:
        sys.modules[name] = None  # the import system's "not importable"
    try:
        yield
    finally:
        for name in _DISTRIBUTED:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]


def save_posterior(idata, path):
    """A command's netCDF write of ``idata`` (``diagnostics.save``), without importing dask's
    distributed scheduler (:func:`no_distributed_import`)."""
    from .. import diagnostics

    with no_distributed_import():  # the process never used dask's distributed scheduler
        diagnostics.save(idata, path)


def print_warnings(caught):
    """One line per warning on stderr, ``WARNING: ...``; other warning categories (deprecations
    of dependencies) go back to the warnings machinery."""
    for w in caught:
        if issubclass(w.category, UserWarning):
            msg = " ".join(str(w.message).split())
            print(f"WARNING: {msg}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def write_json(path, doc):
    """``doc`` as indented JSON (numpy arrays and scalars as lists and numbers), written
    atomically."""
    def conv(v):
        if isinstance(v, np.ndarray):
            return v.tolist()
        if isinstance(v, (np.floating, np.integer)):
            return v.item()
        raise TypeError(f"cannot write {type(v).__name__} to JSON")

    write_text_atomic(path, json.dumps(doc, indent=1, default=conv) + "\n")


def _first_bytes(path, size=512):
    """The first ``size`` bytes of a file with leading whitespace removed (b"" when it cannot
    be read: the loader then says why)."""
    try:
        with open(path, "rb") as f:
            return f.read(size).lstrip()
    except OSError:
        return b""


def _looks_like_rows(path, head):
    return (Path(path).suffix.lower() in (".csv", ".tsv", ".txt", ".parquet", ".pq")
            or head.startswith(b"PAR1") or (b"," in head.split(b"\n", 1)[0]
                                            and not head.startswith((b"{", b"[", b"\x89HDF"))))


def _rows_kind(path, head):
    """What kind of file of rows ``path`` is, for messages: "a Parquet file" (named .parquet /
    .pq or starting with Parquet's magic bytes), "a TSV file" (named .tsv, or a first line with
    tabs and no comma), "a CSV file" or "a text file".

    Parameters
    ----------
    path : str or Path, the file
    head : bytes, its first bytes (:func:`_first_bytes`)

    Returns
    -------
    str, the kind with its article."""
    suffix = Path(path).suffix.lower()
    first = head.split(b"\n", 1)[0]
    if suffix in (".parquet", ".pq") or head.startswith(b"PAR1"):
        return "a Parquet file"
    if suffix == ".tsv" or (b"\t" in first and b"," not in first):
        return "a TSV file"
    if suffix == ".csv" or b"," in first:
        return "a CSV file"
    return "a text file"


def check_release_argument(path):
    """Refuse a file of rows given where a release file is expected (``bayesdp fit``), with the
    command that makes a release from it."""
    head = _first_bytes(path)
    if head and not head.startswith(b"{") and _looks_like_rows(path, head):
        raise BayesdpInputError(
            f"{path}: this is {_rows_kind(path, head)} of rows, not a release: make a release "
            f"first with 'bayesdp release {path} --epsilon E --delta D --bounds B_X B_Y --out "
            "release.json', then 'bayesdp fit release.json'")


def check_posterior_argument(path):
    """Refuse a release file (or a file of rows) given where a posterior file is expected
    (``bayesdp predict``), with the command that makes a posterior from it."""
    head = _first_bytes(path)
    if head.startswith(b"{"):
        raise BayesdpInputError(
            f"{path}: this is a release, not a posterior: run 'bayesdp fit {path} --out "
            "posterior.nc' first, then 'bayesdp predict posterior.nc ROWS.csv'")
    if head and _looks_like_rows(path, head) and not head.startswith(b"\x89HDF"):
        raise BayesdpInputError(
            f"{path}: this is {_rows_kind(path, head)} of rows, not a posterior: give the "
            "posterior written by 'bayesdp fit release.json --out posterior.nc' first, then "
            "the rows")


def bounds_from_truth(path, option="--bounds-from"):
    """The public bounds (B_x, B_y) of a truth file written by ``bayesdp simulate``."""
    import math

    try:
        doc = json.loads(Path(path).read_text())
        bounds = tuple(float(b) for b in doc["public_bounds"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise BayesdpInputError(f"{option}: {str(path)!r} is not a truth file of 'bayesdp "
                                f"simulate' with public_bounds [B_x, B_y] ({exc})") from None
    if len(bounds) != 2 or not all(math.isfinite(b) and b > 0 for b in bounds):
        raise BayesdpInputError(f"{option}: {str(path)!r}: public_bounds must be two positive "
                                f"numbers, got {list(bounds)}")
    return bounds
