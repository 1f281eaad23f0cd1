"""The ``bayesdp`` command line: a thin layer over the public Python functions.

    bayesdp demo                         simulate -> release -> fit -> table and plot
    bayesdp simulate --out data.csv      the paper's simulated data set
    bayesdp release data.csv --epsilon 1 --delta 1e-5 --bounds 10 5 --nodes 5 --out release.json
    bayesdp release data.csv --epsilon 1 --delta 1e-5 --bounds private --out release.json
    bayesdp combine a.json b.json --out all.json
    bayesdp budget plain.json intercept.json     total privacy cost of one holder's releases
    bayesdp fit release.json --method fast --out posterior.nc
    bayesdp predict posterior.nc new_rows.csv --out predictions.csv
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path

from .errors import BayesdpError

EPILOG = "Each command has its own --help. Docs: docs/ in the source tree."


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
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

    def _split_lines(self, text, width):
        import textwrap

        # no breaks inside hyphenated names (normalx-paper, --include-yty)
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _use_help_formatter(parser):
    """Set :class:`HelpFormatter` on ``parser`` and on every sub-command below it."""
    parser.formatter_class = HelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                _use_help_formatter(sub)


def _add_privacy_args(p):
    p.add_argument("--epsilon", type=float, required=True, help="privacy epsilon (> 0)")
    p.add_argument("--delta", type=float, required=True, help="privacy delta, in (0, 1)")
    p.add_argument("--calibration", default="exact", choices=["exact", "classical", "paper-code"],
                   help="noise calibration; 'paper-code' reproduces the authors' buggy MATLAB "
                        "sigma and is NOT (eps, delta)-DP (default: exact analytic Gaussian)")


def add_progress_option(p):
    """``--progress/--no-progress``: a progress bar on stderr; default: only on a terminal."""
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="show a progress bar on stderr with a count and the time left (default: "
                        "only when stderr is a terminal)")


def _cmd_demo(args):
    from .demo import run_demo

    run_demo(n=args.n, d=args.d, nodes=args.nodes, epsilon=args.epsilon, delta=args.delta,
             seed=args.seed, out_dir=args.out_dir)


def _cmd_simulate(args):
    import numpy as np
    import pandas as pd

    from .releases import write_text_atomic
    from .simulate import simulate

    sim = simulate(args.n, args.d, seed=args.seed, sigma_y=args.sigma_y)
    frame = pd.DataFrame(sim.X, columns=list(sim.feature_names))
    frame["y"] = sim.y
    write_text_atomic(args.out, frame.to_csv(index=False, float_format="%.17g"))
    truth = {"theta": sim.theta.tolist(), "Sigma_x": sim.Sigma_x.tolist(),
             "sigma_y": sim.sigma_y, "public_bounds": list(sim.bounds), "seed": args.seed}
    truth_path = Path(args.truth or Path(args.out).with_suffix(".truth.json"))
    write_text_atomic(truth_path, json.dumps(truth, indent=1) + "\n")
    print(f"wrote {args.out} ({args.n} rows, columns {', '.join(frame.columns)})")
    print(f"wrote {truth_path} (true theta and the public bounds B_x={sim.bounds[0]:.6g}, "
          f"B_y={sim.bounds[1]:.6g} derived from the generating distribution)")
    print("true theta:", np.array2string(sim.theta, precision=4))


def _cmd_release(args):
    from .releases import release_file

    if args.bounds_from_data:
        bounds = "data"
    elif args.bounds == ["private"]:
        bounds = "private"
    elif args.bounds:
        bounds = _public_bounds(args.bounds)
    else:
        raise BayesdpError("give public bounds with --bounds B_X B_Y, or --bounds private to "
                           "estimate them with DP (or --bounds-from-data, which is NOT private)")
    y_col = int(args.y_column) if _is_int(args.y_column) else args.y_column
    node_col = int(args.node_column) if _is_int(args.node_column) else args.node_column
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rel = release_file(args.data, epsilon=args.epsilon, delta=args.delta, bounds=bounds,
                           nodes=args.nodes, y_column=y_col, node_column=node_col,
                           header=None if args.no_header else "infer", seed=args.seed,
                           calibration=args.calibration, include_yty=args.include_yty,
                           chunksize=args.chunksize, split=args.split,
                           holder_name=args.holder, progress=args.progress,
                           intercept=args.intercept, average_rows=args.average_rows,
                           noise=args.noise, bounds_share=args.bounds_share,
                           bounds_range=args.bounds_range)
    _print_warnings(caught)
    rel.save(args.out)
    print(rel)
    part = rel.bounds_part
    if part is not None:
        print(f"bounds estimated privately: B_x={rel.bounds[0]:.6g}, B_y={rel.bounds[1]:.6g} "
              f"(eps {part['epsilon']:g} of {rel.epsilon:g}; the statistics used the rest)")
    print(f"rows clipped to the bounds per holder: {rel.n_clipped.tolist()}")
    if rel.average_rows > 1:
        print(f"rows per holder: {rel.n_rows.tolist()}, averaged in groups of "
              f"{rel.average_rows}: {rel.n.tolist()} groups (the n of the release); "
              f"sensitivity {rel.sensitivity:.6g}, not the paper's per-row value (see the "
              "release's dp_claim_note)")
    if rel.seeded:
        print("NOTE: --seed makes the noise reproducible, which is right for experiments and "
              "tests but not for a real release: omit --seed to draw fresh OS entropy.")
    print(f"wrote {args.out}")


def _cmd_combine(args):
    from .releases import combine_releases

    rel = combine_releases(*args.releases)
    rel.save(args.out)
    print(rel)
    print(f"wrote {args.out}")


def _cmd_fit(args):
    from . import diagnostics, report
    from .inference import METHODS, fit
    from .releases import combine_releases

    if args.method not in METHODS:
        raise BayesdpError(f"unknown method {args.method!r}; choose one of {sorted(METHODS)}")
    rel = combine_releases(*args.releases)
    if args.method == "bs" and rel.yty_hat is None:
        raise BayesdpError("--method bs (MCMC-B&S) needs a noisy y^T y, which this release does "
                           "not have: make the release with 'bayesdp release ... --include-yty' "
                           "(Python: release(..., include_yty=True)), or use another --method")
    kwargs = {}
    if args.num_warmup is not None:
        kwargs["num_warmup"] = args.num_warmup
    for name in ("sigma_y2", "s_noise"):
        if getattr(args, name) is not None:
            kwargs[name] = getattr(args, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)  # ConvergenceWarning is a UserWarning
        idata = fit(rel, method=args.method, seed=args.seed, num_samples=args.num_samples,
                    num_chains=args.num_chains, priors=_priors_from_args(args),
                    progress_bar=args.progress, **kwargs)
    _print_warnings(caught)
    print(rel)
    print(_priors_line(idata))
    exact = " (exact closed-form Gaussian)" if report.gaussian_moments(idata) is not None else ""
    print(f"\nposterior of theta ({args.method}){exact}:")
    print(report.format_table(report.theta_table(idata)))
    if not METHODS[args.method].iid:
        _print_mcmc_summary(idata, full=args.full)
    if args.out:
        diagnostics.save(idata, args.out)
        print(f"\nwrote {args.out}")


def _print_mcmc_summary(idata, *, full=False):
    """ArviZ summary of theta and sigma_y2 entry by entry, and one convergence line for each
    other variable (S, Sigma_x: one row per entry would be J d^2 rows); ``full``: every entry."""
    from . import diagnostics

    names = list(idata.posterior.data_vars)
    shown = names if full else [v for v in names if v in diagnostics.TABLE_VARS]
    print("\nArviZ summary" + (" (every entry):" if full else ":"))
    print(diagnostics.summary(idata, var_names=shown).to_string())
    rest = [v for v in names if v not in shown]
    if rest:
        for line in diagnostics.convergence_lines(idata, rest):
            print(line)
        print("(--full prints every entry of " + ", ".join(rest) + ")")


# output options of every command, checked before any work is done (a fit or a comparison must
# not run for minutes and then fail on a missing folder)
_OUT_FILES = ("out", "truth", "truth_out")
_OUT_DIRS = ("out_dir",)


def check_output_paths(args):
    """Refuse output paths whose folder does not exist, before the command does any work.

    Files (``--out``, ``--truth``, ``--truth-out``): the folder must exist and the path must not
    be a folder. Folders (``--out-dir``): only the last folder is created, so its parent must
    exist, and the path must not be a file.
    """
    from .errors import BayesdpInputError

    for name in _OUT_FILES:
        value = getattr(args, name, None)
        if value is None:
            continue
        p = Path(value)
        opt = "--" + name.replace("_", "-")
        if p.is_dir():
            raise BayesdpInputError(f"{opt}: {str(p)!r} is a folder, not a file")
        if not p.parent.is_dir():
            raise BayesdpInputError(f"{opt}: folder {str(p.parent)!r} does not exist")
    for name in _OUT_DIRS:
        value = getattr(args, name, None)
        if value is None:
            continue
        p = Path(value)
        opt = "--" + name.replace("_", "-")
        if p.exists() and not p.is_dir():
            raise BayesdpInputError(f"{opt}: {str(p)!r} exists and is not a folder")
        if not p.parent.is_dir():
            raise BayesdpInputError(
                f"{opt}: parent folder {str(p.parent)!r} does not exist (only the last folder "
                "of --out-dir is created)")


def _priors_from_args(args):
    """Priors from ``--priors`` and the ``--prior-*`` overrides."""
    import numpy as np

    from .models.priors import Priors

    over = {}
    if args.prior_a is not None:
        over["a"] = args.prior_a
    if args.prior_b is not None:
        over["b"] = args.prior_b
    if args.prior_scale_theta is not None:
        if not args.prior_scale_theta > 0:
            raise BayesdpError(f"--prior-scale-theta must be > 0, got {args.prior_scale_theta}")
        over["C"] = np.array([[args.prior_scale_theta ** 2]])
    return Priors.paper(**over) if args.priors == "paper" else Priors(**over)


def _priors_line(idata):
    from .diagnostics import attrs

    a = attrs(idata)
    parts = [f"priors: {a.get('priors', '?')}"]
    if "prior_a" in a:
        parts.append(f"sigma_y^2 ~ InvGamma({a['prior_a']:.4g}, {a['prior_b']:.4g})")
    if "prior_C" in a:
        import numpy as np

        C = np.asarray(a["prior_C"], dtype=float)
        k = int(round(np.sqrt(C.size)))
        sd = np.sqrt(np.diag(C.reshape(k, k)))
        parts.append("theta prior sd " + (f"{sd[0]:.4g}" if np.allclose(sd, sd[0])
                                           else np.array2string(sd, precision=3)))
    return "; ".join(parts)


def _print_warnings(caught):
    """One line per warning on stderr, ``WARNING: ...``; other warning categories (deprecations
    of dependencies) go back to the warnings machinery."""
    for w in caught:
        if issubclass(w.category, UserWarning):
            msg = " ".join(str(w.message).split())
            print(f"WARNING: {msg}", file=sys.stderr)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def _public_bounds(values):
    """``--bounds B_X B_Y`` as two floats."""
    from .errors import BayesdpInputError

    if len(values) != 2:
        raise BayesdpInputError(f"--bounds takes two numbers B_X B_Y or the word 'private', got "
                                f"{' '.join(values)!r}")
    try:
        return tuple(float(v) for v in values)
    except ValueError:
        raise BayesdpInputError(f"--bounds takes two numbers B_X B_Y or the word 'private', got "
                                f"{' '.join(values)!r}") from None


def _is_int(s):
    try:
        int(s)
        return True
    except (TypeError, ValueError):
        return False


def build_parser() -> argparse.ArgumentParser:
    from .inference import METHODS  # importing bayesdp has registered every method already

    parser = argparse.ArgumentParser(
        prog="bayesdp",
        description="Differentially private Bayesian linear regression from noisy summary "
                    "statistics (Alparslan, Yildirim & Birbil, ICML 2023).",
        epilog=EPILOG,
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("demo", help="simulate, release with DP, fit, print a table, plot",
                       description="The main job on the paper's simulation: n rows split over "
                                   "J holders, each releases noisy X^T X and X^T y; fit with "
                                   "Bayes-fixedS-fast and adaSSP; table and plot.")
    p.add_argument("--n", type=int, default=100_000, help="rows (default 100000)")
    p.add_argument("--d", type=int, default=5, help="features (default 5)")
    p.add_argument("--nodes", type=int, default=5, help="data holders J (default 5)")
    p.add_argument("--epsilon", type=float, default=1.0, help="privacy epsilon (default 1)")
    p.add_argument("--delta", type=float, default=1e-5, help="privacy delta (default 1e-5)")
    p.add_argument("--seed", type=int, default=0, help="seed of the whole demo (default 0)")
    p.add_argument("--out-dir", default="bayesdp-demo",
                   help="folder for release.json and theta.png (created if missing)")
    p.set_defaults(func=_cmd_demo)

    p = sub.add_parser("simulate", help="write the paper's simulated data set as CSV",
                       description="Sigma_x ~ InvWishart(V^T V, d+1), theta ~ N(0, I), "
                                   "x ~ N(0, Sigma_x), y = x^T theta + N(0, sigma_y^2). Writes "
                                   "a CSV (columns x0.., y) and a truth JSON beside it.")
    p.add_argument("--n", type=int, default=100_000, help="rows")
    p.add_argument("--d", type=int, default=5, help="features")
    p.add_argument("--sigma-y", type=float, default=1.0, help="sd of the regression noise on y")
    p.add_argument("--seed", type=int, default=None, help="seed (default: fresh entropy)")
    p.add_argument("--out", required=True, help="CSV file to write")
    p.add_argument("--truth", default=None, help="truth JSON (default: OUT with .truth.json)")
    p.set_defaults(func=_cmd_simulate)

    p = sub.add_parser("release", help="make a DP release file from a CSV or Parquet data file",
                       description="Each data holder's rows are clipped to the public bounds, "
                                   "X^T X and X^T y are accumulated in chunks (constant "
                                   "memory), and Gaussian noise is added once per holder.")
    p.add_argument("data", help="CSV or Parquet file, one row per record")
    _add_privacy_args(p)
    p.add_argument("--bounds", nargs="+", metavar="B",
                   help="public bounds B_X B_Y on ||x||_2 and |y| (rows outside are clipped), "
                        "or 'private': estimate them from the rows with DP, spending "
                        "--bounds-share of epsilon (docs/privacy.md section 11)")
    p.add_argument("--bounds-share", type=float, default=None, metavar="SHARE",
                   help="with --bounds private: the share of epsilon, in (0, 1), spent on the "
                        "bounds; the statistics get the rest (default: 0.1)")
    p.add_argument("--bounds-range", type=float, nargs=2, default=None, metavar=("LO", "HI"),
                   help="with --bounds private: the public range of candidate bounds, 20 per "
                        "factor of 10 (default: 1e-6 1e9)")
    p.add_argument("--bounds-from-data", action="store_true",
                   help="read the bounds off the data (NOT private; flagged in the release)")
    p.add_argument("--nodes", type=int, default=1,
                   help="number of data holders J (default 1); rows assigned by --split")
    p.add_argument("--split", default="hash", choices=["hash", "contiguous"],
                   help="how --nodes J assigns rows: 'hash' (default; each row by a hash of its "
                        "own values, add/remove-one private) or 'contiguous' (the authors' split "
                        "in row order; NOT private, flagged in the release)")
    p.add_argument("--node-column", default=None, help="column of holder labels (instead of --nodes)")
    p.add_argument("--holder", default=None, metavar="NAME",
                   help="name of the single holder (--nodes 1), e.g. hospital_a; 'bayesdp "
                        "combine' keeps it and refuses the same name twice (default: '0', "
                        "renamed '<k>:0' on combine)")
    p.add_argument("--y-column", default=None,
                   help="response column name or index (default: the last column that is not "
                        "the --node-column)")
    p.add_argument("--no-header", action="store_true", help="the CSV has no header row (a first row of numbers is refused "
                        "without this flag, so no data value becomes a column name)")
    p.add_argument("--include-yty", action="store_true",
                   help="also release a noisy y^T y (for MCMC-B&S; larger sensitivity)")
    p.add_argument("--intercept", action="store_true",
                   help="release the statistics of [1, x] (appendix B.2): S_hat holds n and "
                        "sum x, z_hat sum y; theta's first coordinate is 'intercept'. Use it "
                        "when the features are not centred (the command warns when a column's "
                        "|mean| exceeds its sd)")
    p.add_argument("--average-rows", type=int, default=1, metavar="K",
                   help="sum each holder's rows in random groups of K and divide by sqrt(K) "
                        "(appendix B.1; closer to normal features); the rows left over are "
                        "dropped, n counts groups, and the sensitivity is max(K Delta, swap "
                        "bound), not the paper's Delta (docs/privacy.md 3b)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed the noise (experiments only; default: fresh OS entropy)")
    p.add_argument("--noise", default="float", choices=["float", "secure"],
                   help="'float' (default): numpy's Gaussian noise, seedable, fine for "
                        "experiments; 'secure': for real releases, the discrete Gaussian on a "
                        "power-of-two grid drawn exactly from the OS CSPRNG (no floating-point "
                        "leak; not seedable; docs/privacy.md section 10)")
    p.add_argument("--chunksize", type=int, default=100_000,
                   help="rows read at a time (memory grows with it; the result does not change)")
    p.add_argument("--out", required=True, help="release file to write (JSON)")
    add_progress_option(p)
    p.set_defaults(func=_cmd_release)

    p = sub.add_parser("combine", help="put per-holder release files together",
                       description="Refuses releases with different d, feature names, bounds "
                                   "or privacy parameters.")
    p.add_argument("releases", nargs="+", help="release files, one or more holders each")
    p.add_argument("--out", required=True, help="combined release file to write (JSON)")
    p.set_defaults(func=_cmd_combine)

    p = sub.add_parser("fit", help="fit a posterior from one or more release files",
                       description="Fits theta from release files (combined into one analysis "
                                   "set); prints the posterior table and can save the "
                                   "posterior as ArviZ netCDF.")
    p.add_argument("releases", nargs="+", help="release file(s)")
    p.add_argument("--method", default="fast", metavar="METHOD",
                   help="inference method, one of: " + ", ".join(sorted(METHODS))
                        + " (default: fast; docs/methods.md)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the sampler (default: fresh OS entropy)")
    p.add_argument("--num-samples", type=int, default=1000,
                   help="kept draws per chain (MCMC methods)")
    p.add_argument("--num-chains", type=int, default=4, help="chains (MCMC methods)")
    p.add_argument("--num-warmup", type=int, default=None,
                   help="burn-in draws per chain (MCMC methods; default: the method's, 1000)")
    p.add_argument("--sigma-y2", type=float, default=None,
                   help="method 'fast': fix sigma_y^2 at this value instead of the plug-in (B_y/3)^2")
    p.add_argument("--s-noise", default=None, choices=["conditional", "eiv", "ignore"],
                   help="method 'fast' on releases with a general noise covariance: how the noise "
                        "on S enters z | S (default: what the release's provenance asks for)")
    p.add_argument("--priors", default="default", choices=["default", "paper"],
                   help="'default': weakly informative, scaled from the release's public bounds "
                        "(docs/methods.md, Priors); 'paper': the paper's a=20, b=0.5, "
                        "C=b/(a-1) I, kappa=d+1, Lambda=I (for data rescaled to |y| <= 1)")
    p.add_argument("--prior-a", type=float, default=None,
                   help="shape a of sigma_y^2 ~ InvGamma(a, b) (overrides --priors)")
    p.add_argument("--prior-b", type=float, default=None,
                   help="scale b of sigma_y^2 ~ InvGamma(a, b) (overrides --priors)")
    p.add_argument("--prior-scale-theta", type=float, default=None,
                   help="prior sd s of every coefficient: theta ~ N(0, s^2 I) (overrides --priors)")
    p.add_argument("--full", "--all-parameters", action="store_true",
                   help="MCMC methods: print the ArviZ summary of every entry of every sampled "
                        "variable (S, Sigma_x too); by default theta and sigma_y2 entry by entry "
                        "and one convergence line per other variable")
    p.add_argument("--out", default=None, help="write the posterior here (netCDF)")
    add_progress_option(p)
    p.set_defaults(func=_cmd_fit)

    for register in _REGISTRARS:
        register(sub)
    _use_help_formatter(parser)
    return parser


def _registrars():
    from . import cli_budget, cli_compare, cli_network, cli_predict, cli_sampling

    return [cli_sampling.register, cli_predict.register, cli_compare.register,
            cli_network.register, cli_budget.register]


_REGISTRARS = _registrars()


DEBUG_ENV = "BAYESDP_DEBUG"


def _one_line(text) -> str:
    return " ".join(str(text).split())


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
        print(f"{prefix} {_one_line(exc)}", file=sys.stderr)
        return 2
    except OSError as exc:
        where = exc.filename if exc.filename is not None else ""
        reason = exc.strerror or exc
        print(_one_line(f"{prefix} {where}{': ' if where else ''}{reason}"), file=sys.stderr)
        return 2
    except Exception as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        print(_one_line(f"{prefix} unexpected {type(exc).__name__}: {exc}") +
              f" (set {DEBUG_ENV}=1 to see the traceback)", file=sys.stderr)
        return 1
    return int(status or 0)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
