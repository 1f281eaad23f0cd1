"""The paper's whole section 5 at full size in one command: Table 1/2, Figure 2/4, Figure 3.

    BAYESDP_DATA_DIR=../shared/data/uci python3 reproduction/reproduce_section5.py --out-dir runs/section5

Runs, one after the other and each in its own process, the three commands of
docs/reproduction.md with the paper's settings (50 replications, K = 1e4, both calibrations,
all 7 eps; two workers), then prints the wall time of each part and of the whole and writes it
to <out-dir>/timings.json. Parts whose output folder already holds finished results are resumed
by the scripts themselves. ``--parts`` runs a subset.
"""

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAPER_SIZE = ["--reps", "50", "--num-warmup", "5000", "--num-samples", "5000"]  # K = 1e4

PARTS = {
    "table1": ["reproduce_table1.py", "--methods", "normalx-paper", "fixeds", "fast", "bs",
               "adassp", "nonprivate", *PAPER_SIZE, "--batch-reps", "--n-jobs", "2"],
    "figure2": ["reproduce_figure2.py", "--d", "2", "5", "--epsilons", "0.1", "0.2", "0.5", "1",
                "2", "5", "10", "--nodes", "1", "5", "10", *PAPER_SIZE, "--batch-reps",
                "--n-jobs", "2", "--calibrations", "paper-code", "exact"],
    "figure3": ["reproduce_figure3.py", "--d", "1", "2", "3", "5", "8", "12", "16", "20",
                "--iters", "1000", "--iters-long", "4000", "--repeats", "2",
                "--slope-from", "5", "10"],
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out-dir", default="runs/section5")
    ap.add_argument("--parts", nargs="+", choices=list(PARTS), default=list(PARTS))
    args = ap.parse_args()
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    timings = {}
    start = time.perf_counter()
    for part in args.parts:
        script, *rest = PARTS[part]
        cmd = [sys.executable, str(HERE / script), *rest, "--out-dir", str(out / part)]
        print(f"== {part}: {' '.join(cmd)}", flush=True)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True)
        timings[part] = time.perf_counter() - t0
        print(f"== {part}: {timings[part] / 60:.1f} min", flush=True)
    timings["total"] = time.perf_counter() - start
    (out / "timings.json").write_text(json.dumps(timings, indent=1) + "\n")
    for part, sec in timings.items():
        print(f"{part:8s} {int(sec // 60)} min {sec % 60:.0f} s")


if __name__ == "__main__":
    main()
