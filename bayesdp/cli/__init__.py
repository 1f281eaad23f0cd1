"""The ``bayesdp`` command line: a thin layer over the public Python functions.

    bayesdp demo                         simulate -> release -> fit -> table and plot
    bayesdp simulate --out data.csv      the paper's simulated data set
    bayesdp plan pilot.csv --n 100000 --bounds 10 5 --nodes 1 5 --delta 1e-5   what a release would give
    bayesdp release data.csv --epsilon 1 --delta 1e-5 --bounds 10 5 --nodes 5 --out release.json
    bayesdp release data.csv --epsilon 1 --delta 1e-5 --bounds private --out release.json
    bayesdp combine a.json b.json --out all.json
    bayesdp budget plain.json intercept.json     total privacy cost of one holder's releases
    bayesdp fit release.json --method fast --out posterior.nc
    bayesdp select release.json --top 5         which features matter (inclusion probabilities)
    bayesdp predict posterior.nc new_rows.csv --out predictions.csv

Each command group is one module with a ``register(subparsers)`` function that adds its
sub-commands; :func:`build_parser` calls them in the order of ``_GROUPS``.
"""

from __future__ import annotations

import argparse
import gc
import os
import sys

from .._jax import use_host_devices
from ..errors import BayesdpError
from ..inference.compilation_cache import command_compilation_cache
from . import budget, compare, diagnose, fit, network, plan, predict, release, select, simulate
from .common import check_output_paths, use_help_formatter

_EPILOG = "Each command has its own --help. Docs: docs/ in the source tree."

#: the command groups, in the order ``bayesdp --help`` lists them
_GROUPS = (simulate, plan, release, fit, select, diagnose, predict, compare, network, budget)

_DEBUG_ENV = "BAYESDP_DEBUG"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bayesdp",
        description="Differentially private Bayesian linear regression from noisy summary "
                    "statistics (Alparslan, Yildirim & Birbil, ICML 2023).",
        epilog=_EPILOG,
    )
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"bayesdp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for group in _GROUPS:
        group.register(sub)
    use_help_formatter(parser)
    return parser


def _one_line(text) -> str:
    return " ".join(str(text).split())


def console_main():
    """The ``bayesdp`` command (and ``python -m bayesdp.cli``): :func:`main` after asking JAX
    for one CPU device per chain (:func:`bayesdp._jax.use_host_devices`), so that NUTS runs its
    chains in parallel, and turning on JAX's compilation cache on disk
    (:func:`bayesdp.inference.compilation_cache.command_compilation_cache`; BAYESDP_COMPILATION_CACHE=off
    turns it off). :func:`main` itself leaves the process's settings alone (tests call it
    in-process).

    The process ends when it returns, so it ends with ``gc.freeze()``: the interpreter's exit
    then frees the objects by their reference counts without the cyclic garbage collector
    going over every object of the thousands of modules a fit loads (the memory goes back to
    the system with the process anyway).

    Returns
    -------
    The exit status of :func:`main`.
    """
    use_host_devices()
    command_compilation_cache()
    try:
        return main()
    finally:
        gc.freeze()


def _as_options(message, parser, args) -> str:
    """A message that starts with a Python parameter's name ("nodes: ...", "bounds must ...",
    "bounds_share applies ...") names the command's option instead ("--nodes: ..."), when the
    command has that option: the user typed the option, not the parameter."""
    import re

    head = re.match(r"([a-z][a-z0-9_]*)(:| )", message)
    if head is None:
        return message
    option = "--" + head.group(1).replace("_", "-")
    sub = next((a.choices[args.command] for a in parser._actions
                if isinstance(a, argparse._SubParsersAction) and args.command in a.choices),
               None)
    if sub is None or option not in sub._option_string_actions:
        return message
    return option + message[len(head.group(1)):]


def main(argv=None):
    """Run one command; return its exit status.

    Every failure prints ONE line naming the problem to stderr, without a traceback: bad input
    and other errors bayesdp raises on purpose, and file-system errors (the path and the
    reason), exit with status 2; anything else (a bug) exits with status 1 and says how to get
    the traceback: set the environment variable BAYESDP_DEBUG=1 to let it propagate."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    prefix = f"bayesdp {args.command}: error:"
    try:
        check_output_paths(args)
        status = args.func(args)
    except BayesdpError as exc:
        print(f"{prefix} {_as_options(_one_line(exc), parser, args)}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = exc.filename if exc.filename is not None else ""
        reason = exc.strerror or exc
        print(_one_line(f"{prefix} {where}{': ' if where else ''}{reason}"), file=sys.stderr)
        return 2
    except Exception as exc:
        if os.environ.get(_DEBUG_ENV):
            raise
        print(_one_line(f"{prefix} unexpected {type(exc).__name__}: {exc}") +
              f" (set {_DEBUG_ENV}=1 to see the traceback)", file=sys.stderr)
        return 1
    return int(status or 0)
