"""``bayesdp diagnose``: convergence checks of a posterior file (the face of
:func:`bayesdp.diagnostics.diagnose`).

    bayesdp diagnose posterior.nc --out-dir plots/ [--var-names theta sigma_y2]
"""

from __future__ import annotations

from .. import diagnostics
from .common import add_command, add_interval_options


def _cmd_diagnose(args):
    """Prints mean, sd, the 90% equal-tailed interval (eti_5%, eti_95%; --interval hdi for the
    HDI), r_hat, ess_bulk and ess_tail of a posterior written by 'bayesdp
    fit --out posterior.nc', warns in plain words when r_hat > 1.01 or an ESS is below 400, and
    writes trace.png, posterior.png and pair.png."""
    res = diagnostics.diagnose(args.posterior, out_dir=args.out_dir, var_names=args.var_names,
                               ess_min=args.ess_min, rhat_max=args.rhat_max, prob=args.prob,
                               interval=args.interval)
    return 0 if res["ok"] or not args.strict else 3


def register(subparsers):
    """Add ``diagnose`` to the ``bayesdp`` sub-commands."""
    p = add_command(subparsers, "diagnose", _cmd_diagnose,
                    "ArviZ summary, convergence warnings and plots of a posterior file")
    p.add_argument("posterior", help="netCDF file written by 'bayesdp fit --out'")
    p.add_argument("--out-dir", default=None, help="folder for the PNG plots (default: none)")
    p.add_argument("--var-names", nargs="+", default=None,
                   help="variables to check (default: every sampled variable - theta, "
                        "sigma_y2, Sigma_x, S; matrices on their upper triangle)")
    p.add_argument("--ess-min", type=float, default=400.0, help="ESS warning threshold (400)")
    p.add_argument("--rhat-max", type=float, default=1.01, help="r_hat warning threshold (1.01)")
    add_interval_options(p)
    p.add_argument("--strict", action="store_true",
                   help="exit with status 3 when any warning is raised")
    return p
