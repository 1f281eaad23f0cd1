"""Table 1 of the paper (eps = 1; J = 1, 5, 10; PowerPlant, BikeSharing, AirQuality), both calibrations.

    BAYESDP_DATA_DIR=../shared/data/uci python3 reproduction/reproduce_table1.py \
        --methods normalx-paper fixeds fast bs adassp nonprivate --reps 50 \
        --num-warmup 5000 --num-samples 5000 --batch-reps --n-jobs 2 --out-dir runs/table1

(the paper's size: 61 min on 2 cores, docs/reproduction.md). The defaults are
reduced: 5 replications, K = 1500, and no normalX (``--methods`` adds it).

Writes runs/table1/<dataset>-<calibration>/ (results.csv, summary.md, figures) and
runs/table1/table1.md (prediction MSE means next to the paper's Table 1). Resumable.
"""

import argparse
import importlib
from pathlib import Path

import pandas as pd

PAPER = {  # Table 1, eps = 1 (normalX, fixedS, fast, B&S, adaSSP)
    ("powerplant", 1): (0.0129, 0.0129, 0.0129, 0.0128, 0.0139),
    ("powerplant", 5): (0.0133, 0.0134, 0.0134, 0.0136, 0.0235),
    ("powerplant", 10): (0.0142, 0.0143, 0.0143, 0.0143, 0.0351),
    ("bikesharing", 1): (0.0024, 0.0021, 0.0021, 0.0020, 0.0107),
    ("bikesharing", 5): (0.0174, 0.0045, 0.0045, 0.0086, 0.0382),
    ("bikesharing", 10): (0.0812, 0.0082, 0.0082, 0.0137, 0.0526),
    ("airquality", 1): (0.0060, 0.0057, 0.0057, 0.0062, 0.0066),
    ("airquality", 5): (0.0142, 0.0100, 0.0099, 0.0130, 0.0227),
    ("airquality", 10): (0.0985, 0.0117, 0.0117, 0.0216, 0.0314),
}
COLS = ("normalx-paper", "fixeds", "fast", "bs", "adassp")  # Algorithm 1 as published


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--num-warmup", type=int, default=500)
    ap.add_argument("--num-samples", type=int, default=1000)
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--batch-reps", action="store_true",
                    help="fit the replications of each cell in one compiled program "
                         "(compare(batch_reps=True); same results to rounding)")
    ap.add_argument("--out-dir", default="runs/table1")
    ap.add_argument("--datasets", nargs="+", default=["powerplant", "bikesharing", "airquality"])
    ap.add_argument("--calibrations", nargs="+", default=["paper-code", "exact"])
    ap.add_argument("--methods", nargs="+", default=None)
    ap.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                    help="progress bar per comparison on stderr with the count of cells and the "
                         "time left (default: only when stderr is a terminal)")
    args = ap.parse_args()
    try:  # MCMC-normalX / fixedS, when the sampling module is present
        importlib.import_module("bayesdp.paper")
    except ImportError:
        pass
    import bayesdp
    from bayesdp.paper.comparison import compare, summarize

    methods = args.methods or [m for m in ("fixeds", "fast", "bs", "adassp", "nonprivate")
                               if m in bayesdp.METHODS or m in ("adassp", "nonprivate")]
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)  # compare makes one folder per run in it
    lines = ["# Table 1 (prediction MSE, eps = 1): ours vs the paper", "",
             f"reps = {args.reps}, num_warmup = {args.num_warmup}, num_samples = {args.num_samples}",
             "", "| dataset | J | calibration | " + " | ".join(COLS) + " | nonprivate |",
             "| --- | --- | --- | " + " | ".join("---" for _ in COLS) + " | --- |"]
    for ds in args.datasets:
        for J in (1, 5, 10):
            lines.append(f"| {ds} | {J} | **paper** | "
                         + " | ".join(f"{v:.4f}" for v in PAPER[(ds, J)]) + " | |")
        for cal in args.calibrations:
            df = compare(ds, methods=methods, epsilons=[1.0], nodes=[1, 5, 10], reps=args.reps,
                         calibration=cal, seed=1, out_dir=out / f"{ds}-{cal}", n_jobs=args.n_jobs,
                         num_samples=args.num_samples, num_warmup=args.num_warmup, verbose=True,
                         progress=args.progress, batch_reps=args.batch_reps)
            s = summarize(df[df["metric"] == "prediction_mse"])
            for J in (1, 5, 10):
                cells = []
                for m in (*COLS, "nonprivate"):
                    r = s[(s["method"] == m) & (s["J"] == J)]
                    cells.append("" if r.empty else
                                 f"{r['mean'].iloc[0]:.4f} [{r['lower'].iloc[0]:.4f}, {r['upper'].iloc[0]:.4f}]"
                                 if m != "nonprivate" else f"{r['mean'].iloc[0]:.4f}")
                lines.append(f"| {ds} | {J} | {cal} | " + " | ".join(cells) + " |")
            (out / "table1.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
