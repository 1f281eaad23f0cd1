"""``bayesdp fit``: the posterior from one or more release files (the face of
:func:`bayesdp.fit`).

    bayesdp fit release.json --method fast --out posterior.nc
"""

from __future__ import annotations

import warnings

import numpy as np

from .. import diagnostics, inference, releases
from .. import paper  # noqa: F401  (registers the paper's methods: --method bs, ...)
from ..errors import BayesdpError
from ..models.priors import Priors
from .common import (add_command, add_progress_option, check_release_argument,
                     print_warnings, save_posterior)


def _cmd_fit(args):
    """Fits theta from release files (combined into one analysis set); prints the posterior
    table and can save the posterior as ArviZ netCDF."""
    if args.method not in inference.METHODS:
        raise BayesdpError(f"unknown method {args.method!r}; choose one of "
                           f"{sorted(inference.METHODS)}")
    for path in args.releases:
        check_release_argument(path)
    rel = releases.combine_releases(*args.releases)
    if args.method == "bs" and rel.yty_hat is None:
        raise BayesdpError("--method bs (MCMC-B&S) needs a noisy y^T y, which this release does "
                           "not have: make the release with 'bayesdp release ... --include-yty' "
                           "(Python: release(..., include_yty=True)), or use another --method")
    from .. import report  # after the checks: a bad input fails before loading it

    kwargs = {name: getattr(args, name) for name in ("num_warmup", "sigma_y2", "s_noise",
                                                     "target_accept_prob")
              if getattr(args, name) is not None}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)  # ConvergenceWarning is a UserWarning
        idata = inference.fit(rel, method=args.method, seed=args.seed,
                              num_samples=args.num_samples, num_chains=args.num_chains,
                              priors=_priors_from_args(args), progress_bar=args.progress,
                              **kwargs)
    print_warnings(caught)
    print(rel)
    print(_priors_line(idata))
    exact = " (exact closed-form Gaussian)" if report.gaussian_moments(idata) is not None else ""
    print(f"\nposterior of theta ({args.method}){exact}:")
    table = report.theta_table(idata)
    print(report.format_table(table))
    note = report.theta_table_note(table)
    if note:
        print(note)
    if diagnostics.attrs(idata).get("convergence_checked", True):  # MCMC draws, not iid
        _print_mcmc_summary(idata, full=args.full)
    if args.out:
        save_posterior(idata, args.out)
        print(f"\nwrote {args.out}")


def _print_mcmc_summary(idata, *, full=False):
    """ArviZ summary of theta and sigma_y2 entry by entry, and one convergence line for each
    other variable (S, Sigma_x: one row per entry would be J d^2 rows); ``full``: every entry."""
    names = list(idata.posterior.data_vars)
    shown = names if full else [v for v in names if v in diagnostics.TABLE_VARS]
    print("\nArviZ summary" + (" (every entry):" if full else ":"))
    print(diagnostics.summary(idata, var_names=shown).to_string())
    rest = [v for v in names if v not in shown]
    if rest:
        for line in diagnostics.convergence_lines(idata, rest):
            print(line)
        print("(--full prints every entry of " + ", ".join(rest) + ")")


def _priors_from_args(args):
    """Priors from ``--priors`` and the ``--prior-*`` overrides."""
    over = {}
    if args.prior_a is not None:
        over["a"] = args.prior_a
    if args.prior_b is not None:
        over["b"] = args.prior_b
    if args.prior_scale_theta is not None:
        if not args.prior_scale_theta > 0:
            raise BayesdpError(f"--prior-scale-theta must be > 0, got {args.prior_scale_theta}")
        over["C"] = np.array([[args.prior_scale_theta ** 2]])
    if args.prior_lambda is not None:
        if not args.prior_lambda > 0:
            raise BayesdpError(f"--prior-lambda must be > 0, got {args.prior_lambda}")
        over["Lambda"] = np.array([[args.prior_lambda]])
    if args.prior_kappa is not None:
        over["kappa"] = args.prior_kappa  # checked against d when the priors are resolved
    return Priors.paper(**over) if args.priors == "paper" else Priors(**over)


def _priors_line(idata):
    """One line naming the priors the posterior was fitted with."""
    a = diagnostics.attrs(idata)
    parts = [f"priors: {a.get('priors', '?')}"]
    if "prior_a" in a:
        parts.append(f"sigma_y^2 ~ InvGamma({a['prior_a']:.4g}, {a['prior_b']:.4g})")
    if "prior_C" in a:
        C = np.asarray(a["prior_C"], dtype=float)
        k = int(round(np.sqrt(C.size)))
        sd = np.sqrt(np.diag(C.reshape(k, k)))
        parts.append("theta prior sd " + (f"{sd[0]:.4g}" if np.allclose(sd, sd[0])
                                           else np.array2string(sd, precision=3)))
    return "; ".join(parts)


def register(subparsers):
    """Add ``fit`` to the ``bayesdp`` sub-commands."""
    p = add_command(subparsers, "fit", _cmd_fit, "fit a posterior from one or more release files")
    p.add_argument("releases", nargs="+", help="release file(s)")
    p.add_argument("--method", default="eiv", metavar="METHOD",
                   help="inference method, one of: " + ", ".join(sorted(inference.METHODS))
                        + " (default: eiv, which models the noise on X^T X; docs/methods.md)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of the sampler (default: fresh OS entropy)")
    p.add_argument("--num-samples", type=int, default=1000,
                   help="kept draws per chain (MCMC methods)")
    p.add_argument("--num-chains", type=int, default=4,
                   help="chains (MCMC methods); NUTS (normalx) runs them in parallel, one CPU "
                        "device each (the command asks JAX for max(4, cores) devices)")
    p.add_argument("--num-warmup", type=int, default=None,
                   help="burn-in draws per chain (MCMC methods; default: the method's, 1000)")
    p.add_argument("--target-accept-prob", type=float, default=None,
                   help="NUTS methods (normalx): the acceptance rate its step size adapts to "
                        "(default 0.8); raise it (e.g. 0.99) when transitions diverge")
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
    p.add_argument("--prior-lambda", type=float, default=None,
                   help="scale of the features' covariance prior: Sigma_x ~ InvWishart(kappa, "
                        "LAMBDA I) (normalX methods; overrides --priors; the S_hat check's "
                        "warning suggests a value)")
    p.add_argument("--prior-kappa", type=float, default=None,
                   help="degrees of freedom kappa > d - 1 of Sigma_x ~ InvWishart(kappa, Lambda) "
                        "(overrides --priors)")
    p.add_argument("--full", "--all-parameters", action="store_true",
                   help="MCMC methods: print the ArviZ summary of every entry of every sampled "
                        "variable (S, Sigma_x too); by default theta and sigma_y2 entry by entry "
                        "and one convergence line per other variable")
    p.add_argument("--out", default=None, help="write the posterior here (netCDF)")
    add_progress_option(p)
