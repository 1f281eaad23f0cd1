"""``bayesdp budget``: the total privacy cost of several releases of one holder (the face of
:func:`bayesdp.accounting.budget`).

    bayesdp budget plain.json intercept.json [--delta 2e-5] [--accountant zcdp|basic|pld] [--json]
    bayesdp budget --ledger holder-ledger.json
"""

from __future__ import annotations

import json

from ..accounting import budget
from ..errors import BayesdpInputError
from ..releases import Ledger, load_release, write_text_atomic
from .common import add_command


def _cmd_budget(args):
    """Adds up the privacy cost recorded in release files of ONE data holder (sequential
    composition: e.g. with and without intercept, or private bounds plus statistics) and prints
    one line per part and the total. Within a release, holders hold disjoint rows and count
    once (parallel composition). docs/privacy.md, 'Privacy cost and budget'."""
    if args.ledger is not None:
        if args.releases:
            raise BayesdpInputError("give release files or --ledger, not both (a ledger "
                                    "already records its releases)")
        res = Ledger(args.ledger, accountant=args.accountant).budget_at(args.delta)
    elif not args.releases:
        raise BayesdpInputError("give the release files of one holder, or --ledger FILE")
    else:
        res = budget(*[load_release(path) for path in args.releases], delta=args.delta,
                     accountant=args.accountant, labels=args.releases)
    text = json.dumps(res.to_dict(), indent=1, allow_nan=False)
    print(text if args.json else res.table())
    if args.out:
        write_text_atomic(args.out, text + "\n")
        if not args.json:
            print(f"wrote {args.out}")


def register(subparsers):
    """Add ``budget`` to the ``bayesdp`` sub-commands."""
    p = add_command(subparsers, "budget", _cmd_budget,
                    "total privacy cost of several releases of one data holder")
    p.add_argument("releases", nargs="*", help="release files of the same holder")
    p.add_argument("--ledger", default=None, metavar="FILE",
                   help="the total of the releases a holder's ledger records (bayesdp release "
                        "--ledger), in place of release files")
    p.add_argument("--delta", type=float, default=None,
                   help="delta of the total, in (0, 1) (default: the sum of the parts' deltas)")
    p.add_argument("--accountant", default="zcdp", choices=["zcdp", "basic", "pld"],
                   help="zcdp: rho adds, exact for Gaussian parts; basic: eps and delta add; "
                        "pld: privacy loss distributions (needs the optional dp-accounting)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--out", default=None, help="also write the JSON result to this file")
    return p
