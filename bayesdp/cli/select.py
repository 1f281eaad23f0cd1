"""``bayesdp select``: which features matter, from one release (the face of
:func:`bayesdp.select`).

    bayesdp select release.json --top 5 --out-dir selection/
"""

from __future__ import annotations

import warnings
from pathlib import Path

from .. import releases
from ..errors import BayesdpInputError
from .common import add_command, check_release_argument, print_warnings, save_posterior

# pandas, scipy and the selection itself are imported when the command runs, after the checks:
# ``bayesdp select --help`` and a bad argument load none of them


def _cmd_select(args):
    """Posterior inclusion probability of each feature and the most probable subsets of the
    features, from release file(s) (combined into one analysis set), with the likelihood of the
    default method eiv; nothing is spent beyond the release (docs/selection.md). Prints the
    table of features and the top models; --out-dir writes inclusion.csv, models.csv,
    posterior.nc (the model-averaged posterior, for 'bayesdp predict') and inclusion.png."""
    model_prior = _model_prior(args.model_prior)
    for path in args.releases:
        check_release_argument(path)
    rel = releases.combine_releases(*args.releases)
    from ..inference.selection import select

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)  # ConvergenceWarning is a UserWarning
        sel = select(rel, model_prior=model_prior, method=args.method, seed=args.seed,
                     num_samples=args.num_samples, num_chains=args.num_chains, steps=args.steps,
                     top=args.top, plugin=args.plugin)
    print_warnings(caught)
    print(rel)
    print(sel)
    if args.out_dir:
        out = Path(args.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        releases.write_text_atomic(out / "inclusion.csv", sel.table().to_csv(float_format="%.6g"))
        releases.write_text_atomic(out / "models.csv",
                                   sel._models_text().to_csv(float_format="%.6g"))
        save_posterior(sel.idata, out / "posterior.nc")
        sel.plot(out / "inclusion.png")
        print(f"\nwrote {out}/: inclusion.csv, models.csv, posterior.nc (model-averaged; "
              "'bayesdp predict' reads it), inclusion.png")
    return 0


def _model_prior(text):
    """``--model-prior``: "beta-binomial" or an inclusion probability in (0, 1)."""
    if text == "beta-binomial":
        return text
    try:
        w = float(text)
    except ValueError:
        w = None
    if w is None or not 0.0 < w < 1.0:
        raise BayesdpInputError(f"--model-prior must be 'beta-binomial' or an inclusion "
                                f"probability in (0, 1), got {text!r}")
    return w


def register(subparsers):
    """Add ``select`` to the ``bayesdp`` sub-commands."""
    p = add_command(subparsers, "select", _cmd_select,
                    "inclusion probabilities of the features and the top models, from a release")
    p.add_argument("releases", nargs="+", help="release file(s)")
    p.add_argument("--top", type=int, default=10, help="models to list")
    p.add_argument("--model-prior", default="beta-binomial",
                   help="prior over models: 'beta-binomial' (beta-binomial(1, 1) on the model "
                        "size, the default) or a number w in (0, 1), each feature in with "
                        "probability w (0.5: every model equally likely)")
    p.add_argument("--method", default="auto", choices=["auto", "enumeration", "mc3"],
                   help="'enumeration' evaluates every model (at most 2^16), 'mc3' samples "
                        "models; 'auto' (default) enumerates when it can")
    p.add_argument("--steps", type=int, default=None,
                   help="MC^3 steps per chain (default max(5000, 500 p), p the features)")
    p.add_argument("--plugin", default="restricted", choices=["restricted", "per-model"],
                   help="the theta through which each model's S noise is pushed: eiv's plug-in "
                        "of the full model restricted to the model (default), or each model's "
                        "own fixed point (slower)")
    p.add_argument("--num-samples", type=int, default=1000,
                   help="draws of the model-averaged posterior per chain")
    p.add_argument("--num-chains", type=int, default=4, help="chains (MC^3's chains too)")
    p.add_argument("--seed", type=int, default=None,
                   help="seed of every draw (default: fresh OS entropy)")
    p.add_argument("--out-dir", default=None,
                   help="folder for inclusion.csv, models.csv, posterior.nc and inclusion.png "
                        "(default: print only)")
    return p
