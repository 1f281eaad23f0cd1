"""Figure 2 (and Figure 4's MMD) of the paper: simulated data, n = 1e5. At the paper's size
(docs/reproduction.md; 55 min on 2 cores):

    python3 reproduction/reproduce_figure2.py --d 2 5 --epsilons 0.1 0.2 0.5 1 2 5 10 \
        --reps 50 --num-warmup 5000 --num-samples 5000 --batch-reps --n-jobs 2 \
        --out-dir runs/figure2

The defaults are a reduced grid (3 eps, 5 replications, K = 1500). Writes
runs/figure2/d<d>-<calibration>/ (results.csv, summary.md, fig_*.png). Resumable.
"""

import argparse
import importlib


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d", nargs="+", type=int, default=[2, 5])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--epsilons", nargs="+", type=float, default=[0.1, 1.0, 10.0])
    ap.add_argument("--nodes", nargs="+", type=int, default=[1, 5, 10])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--num-warmup", type=int, default=500)
    ap.add_argument("--num-samples", type=int, default=1000)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--batch-reps", action="store_true",
                    help="fit the replications of each cell in one compiled program "
                         "(compare(batch_reps=True); same results to rounding)")
    ap.add_argument("--calibrations", nargs="+", default=["paper-code", "exact"])
    ap.add_argument("--methods", nargs="+", default=None)
    ap.add_argument("--seed", type=int, default=1,
                    help="simulation and noise seed (1, like the authors' rng(1)); the results "
                         "depend strongly on the random Sigma_x it draws, so several seeds show "
                         "how much. Output folders of seeds other than 1 end in -seed<s>")
    ap.add_argument("--out-dir", default="runs/figure2")
    ap.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                    help="progress bar per comparison on stderr with the count of cells and the "
                         "time left (default: only when stderr is a terminal)")
    args = ap.parse_args()
    try:
        importlib.import_module("bayesdp.paper")
    except ImportError:
        pass
    from pathlib import Path

    import bayesdp
    from bayesdp.paper.comparison import compare

    Path(args.out_dir).mkdir(parents=True, exist_ok=True)  # compare makes one folder per run in it

    methods = args.methods or [m for m in ("normalx-paper", "fixeds", "fast", "bs", "adassp",
                                           "nonprivate")
                               if m in bayesdp.METHODS or m in ("adassp", "nonprivate")]
    suffix = "" if args.seed == 1 else f"-seed{args.seed}"
    for d in args.d:
        for cal in args.calibrations:
            compare("simulated", methods=methods, epsilons=args.epsilons, nodes=args.nodes,
                    reps=args.reps, calibration=cal, seed=args.seed, n=args.n, d=d,
                    n_jobs=args.n_jobs, num_samples=args.num_samples, num_warmup=args.num_warmup,
                    out_dir=f"{args.out_dir}/d{d}-{cal}{suffix}", verbose=True,
                    progress=args.progress, batch_reps=args.batch_reps)


if __name__ == "__main__":
    main()
