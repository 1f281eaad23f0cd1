"""``bayesdp compare``: the command-line face of :func:`bayesdp.paper.compare`.

    bayesdp compare simulated --d 2 --epsilons 0.1 1 10 --nodes 1 5 10 --reps 5 --out-dir runs/sim
    bayesdp compare powerplant --data-dir ../shared/data/uci --calibration paper-code \
        --methods fast bs adassp nonprivate --reps 10 --out-dir runs/pp
"""

from __future__ import annotations

import warnings

from ..inference import METHODS
from ..paper import comparison
from .common import add_command, add_progress_option, print_warnings


def _cmd_compare(args):
    method_options = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)  # compare's grid-level check warnings
        df = comparison.compare(
            args.data, methods=args.methods, epsilons=args.epsilons, nodes=args.nodes,
            reps=args.reps, calibration=args.calibration, seed=args.seed, out_dir=args.out_dir,
            n_jobs=args.n_jobs, num_samples=args.num_samples, num_warmup=args.num_warmup,
            n=args.n, d=args.d, data_dir=args.data_dir, preprocessing=args.preprocessing,
            bounds=args.bounds, mmd={"auto": None, "yes": True, "no": False}[args.mmd],
            method_options=method_options, figures=not args.no_figures, verbose=args.verbose,
            split=args.split, progress=args.progress, intercept=args.intercept,
            average_rows=args.average_rows, x_mean=args.x_mean,
            true_intercept=args.true_intercept, batch_reps=args.batch_reps,
        )
    print_warnings(caught)
    shown = ["estimation_mse", "prediction_mse", "converged"]  # converged: share of the fits
    print(comparison.summary_markdown(df[df["metric"].isin(shown)],
                                      title=f"data={args.data}, calibration={args.calibration}"))
    if args.out_dir:
        print(f"wrote {args.out_dir}/results.csv, summary.md"
              + ("" if args.no_figures else " and figures"))


def register(subparsers):
    """Add ``compare`` to the ``bayesdp`` sub-commands."""
    defaults = comparison.default_methods()
    others = sorted((set(METHODS) | set(comparison.BASELINES)) - set(defaults))
    p = add_command(
        subparsers, "compare", _cmd_compare,
        "run the paper's comparison over epsilon x J x replications",
        description="Runs the paper's methods (" + ", ".join(defaults) + "; or those of "
                    "--methods) on simulated data, a named UCI data set or a data file, over a "
                    "grid of epsilon, J and replications. Writes a tidy CSV, a Markdown summary "
                    "with 90% intervals and Figure 2/4-style plots; resumable. Every fit's "
                    "convergence and calibration checks are kept in the results, and a WARNING "
                    "line says how many fits failed them.")
    p.add_argument("data", help="'simulated', powerplant | bikesharing | airquality | 3droad, "
                                "or a data file (authors' CSV or UCI original)")
    p.add_argument("--methods", nargs="+", default=None, metavar="METHOD",
                   help="methods to compare (default: the paper's, " + " ".join(defaults)
                        + "; also available: " + ", ".join(others) + ")")
    p.add_argument("--epsilons", nargs="+", type=float, default=[1.0],
                   help="values of the privacy epsilon")
    p.add_argument("--nodes", nargs="+", type=int, default=[1, 5, 10],
                   help="values of J, the number of data holders")
    p.add_argument("--reps", type=int, default=5, help="replications (paper: 50)")
    p.add_argument("--calibration", default="exact", choices=["exact", "paper-code"],
                   help="'paper-code' = the authors' code (reproduces Table 1; NOT DP)")
    p.add_argument("--seed", type=int, default=0,
                   help="master seed (data, noise and every sampler derive from it)")
    p.add_argument("--out-dir", default=None, help="folder for results (enables resume)")
    p.add_argument("--n-jobs", type=int, default=None,
                   help="worker processes (default: all cores; 1 = in this process)")
    p.add_argument("--num-samples", type=int, default=1000, help="kept MCMC draws (paper: 5000)")
    p.add_argument("--num-warmup", type=int, default=1000, help="MCMC burn-in (paper: 5000)")
    p.add_argument("--n", type=int, default=100_000, help="simulated rows")
    p.add_argument("--d", type=int, default=2, help="simulated features")
    p.add_argument("--data-dir", default=None, help="folder of the named data sets "
                                                    "(default: $BAYESDP_DATA_DIR)")
    p.add_argument("--preprocessing", default="paper", choices=["paper", "sound"],
                   help="real data: 'paper' (whole-file scaling, first 80%% of rows train) or "
                        "'sound' (shuffled split, scaling fitted on training rows only)")
    p.add_argument("--bounds", default="data", choices=["data", "public"],
                   help="'data' (as the paper; not private) or 'public' (simulated only)")
    p.add_argument("--split", default="contiguous", choices=["contiguous", "random"],
                   help="how J splits the rows: 'contiguous' (the paper's protocol; not "
                        "add/remove private) or 'random' (private; bayesdp release's default)")
    p.add_argument("--intercept", action="store_true",
                   help="release and fit [1, x] (appendix B.2); methods: "
                        + ", ".join(sorted(m for m in METHODS if METHODS[m].intercept))
                        + ", adassp, nonprivate")
    p.add_argument("--average-rows", type=int, default=1, metavar="K",
                   help="releases of rows averaged in random groups of K (appendix B.1); "
                        "adaSSP and the non-private reference use the rows as they are")
    p.add_argument("--x-mean", type=float, default=0.0,
                   help="simulated data: mean of every feature (non-centred features)")
    p.add_argument("--true-intercept", type=float, default=0.0,
                   help="simulated data: the true intercept added to y")
    p.add_argument("--mmd", default="auto", choices=["auto", "yes", "no"],
                   help="compute the MMD metrics ('auto': when d <= 5)")
    p.add_argument("--batch-reps", action="store_true",
                   help="fit the replications of each (epsilon, J) in one compiled program (the "
                        "methods with a batched path: fast, bs and the hand-written kernels; "
                        "docs/compare.md)")
    p.add_argument("--no-figures", action="store_true", help="do not draw the figures")
    p.add_argument("--verbose", action="store_true",
                   help="print a line per finished cell: [k/total] eps J rep, methods, time")
    add_progress_option(p)
    return p
