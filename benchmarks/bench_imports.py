"""Start-up cost of a fresh process (issue 36, items 4 and 5): ``import bayesdp``, ``bayesdp
--help``, ``bayesdp fit release.json --method fast`` (with and without ``--out posterior.nc``)
and the README's ``bayesdp fit release.json --out posterior.nc`` (the default method, eiv), this
source tree against a baseline commit, in one sitting.

    python benchmarks/bench_imports.py                      # baseline: BASE_REV, 5 repeats
    python benchmarks/bench_imports.py --base-rev HEAD~3 --repeat 9
    python benchmarks/bench_imports.py --commands fit-fast-out fit-out   # the two fits only

The baseline is checked out with ``git worktree add --detach`` (in ``--base-dir``, default
/tmp/bayesdp_base_<rev>; reused when it exists) and both trees run from the same interpreter
with ``PYTHONPATH`` pointing at the tree, so only bayesdp's code differs. Each command runs in a
new process; the two trees alternate within a repeat (the order flips every repeat), after one
untimed warm-up run of each. Both use one JAX compilation cache folder of this sitting
(``BAYESDP_COMPILATION_CACHE``), warm after the warm-up, as a user's second command would find
it. The release is simulated once (n = 20000, d = 3, J = 4, eps = 1) by this tree.

Prints per command: median wall seconds of each tree and their ratio (this tree / baseline);
median seconds spent importing (the top-level cumulative times of ``python -X importtime``,
which also counts the imports made inside functions, in a second run of each repeat) and their
ratio; the share of that run's wall time spent importing; the modules loaded at exit.
Timing claims belong here, never in tests.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the last commit before the light imports (issue 36, item 4)
BASE_REV = "b8484c1"

#: each measured command: its key (``--commands``), its name in the table and a fresh process's
#: command line ({release}: the release file, {out}: a posterior file in the sitting's folder)
COMMANDS = {
    "import": ("import bayesdp", ["-c", "import bayesdp"]),
    "help": ("bayesdp --help", ["-m", "bayesdp.cli", "--help"]),
    "fit-fast": ("bayesdp fit --method fast",
                 ["-m", "bayesdp.cli", "fit", "{release}", "--method", "fast"]),
    "fit-fast-out": ("bayesdp fit --method fast --out posterior.nc",
                     ["-m", "bayesdp.cli", "fit", "{release}", "--method", "fast", "--out",
                      "{out}"]),
    "fit-out": ("bayesdp fit --out posterior.nc (eiv)",
                ["-m", "bayesdp.cli", "fit", "{release}", "--out", "{out}"]),
}
#: appended to a command to count the modules loaded at exit
COUNT = ("import atexit, sys; atexit.register(lambda: print('MODULES=%d' % len(sys.modules), "
         "file=sys.stderr))")


def base_tree(rev, base_dir):
    """A worktree of ``rev`` (created with ``git worktree add --detach`` unless ``base_dir``
    already exists); returns its path."""
    path = Path(base_dir or f"/tmp/bayesdp_base_{rev}")
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev],
                       check=True, capture_output=True)
    return path


def run(tree, args, env, importtime=False, cwd=None):
    """Run ``python ARGS`` with bayesdp from ``tree`` in a new process, in the folder ``cwd``
    (``-c`` puts the working folder first on sys.path: run from the source tree, both trees
    would import its bayesdp); returns (wall seconds, CPU seconds (user + system), stderr). The
    module count is printed at exit (a ``-c`` hook for ``-m`` commands too)."""
    if args[0] == "-c":
        argv = ["-c", COUNT + "\n" + args[1]]
    else:  # -m module ...: run it through runpy after the hook
        argv = ["-c", COUNT + "\nimport runpy, sys; sys.argv = %r; "
                "runpy.run_module(%r, run_name='__main__', alter_sys=True)" % (args[1:], args[1])]
    if importtime:
        argv = ["-X", "importtime", *argv]
    env = dict(env, PYTHONPATH=str(tree))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    p = subprocess.run([sys.executable, *argv], env=env, capture_output=True, text=True,
                       cwd=cwd)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        raise SystemExit(f"{tree}: python {' '.join(args)} failed:\n{p.stderr[-2000:]}")
    return wall, cpu, p.stderr


def modules_loaded(stderr):
    m = re.findall(r"MODULES=(\d+)", stderr)
    return int(m[-1]) if m else None


def import_seconds(stderr):
    """The seconds spent importing: the cumulative times of the top-level entries of
    ``-X importtime`` (the least indented names)."""
    entries = []
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cum, name = line[len("import time:"):].split("|", 2)
        entries.append((len(name) - len(name.lstrip(" ")), int(cum)))
    top = min(indent for indent, _ in entries)
    return sum(cum for indent, cum in entries if indent == top) / 1e6


def release_file(folder):
    """The benchmark's release (simulated and released by this tree, seeded)."""
    code = ("import bayesdp; sim = bayesdp.simulate(20000, 3, seed=1); "
            "bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=4, "
            f"seed=2).save({str(folder / 'release.json')!r})")
    subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)),
                   check=True, capture_output=True, cwd=folder)
    return folder / "release.json"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base-rev", default=BASE_REV, help="baseline commit (default: %(default)s)")
    ap.add_argument("--base-dir", default=None, help="worktree of the baseline (default: "
                                                     "/tmp/bayesdp_base_<rev>)")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per command and tree")
    ap.add_argument("--commands", nargs="+", choices=list(COMMANDS), default=list(COMMANDS),
                    help="the commands to measure (default: all)")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="set OPENBLAS/OMP/MKL_NUM_THREADS for both trees (default: leave them): "
                         "on a loaded machine BLAS threads that wait by spinning make the fit's "
                         "time vary several-fold")
    args = ap.parse_args()

    trees = {"this tree": ROOT, "baseline": base_tree(args.base_rev, args.base_dir)}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        rel = release_file(tmp)
        env = dict(os.environ, BAYESDP_COMPILATION_CACHE=str(tmp / "jax_cache"))
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
        if args.blas_threads is not None:
            for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
                env[var] = str(args.blas_threads)
        print(f"baseline {args.base_rev} in {trees['baseline']}; {args.repeat} repeats; BLAS "
              f"threads {args.blas_threads or 'default'}; load average "
              f"{os.getloadavg()[0]:.2f} at the start")
        rows = []
        for key in args.commands:
            name, cmd = COMMANDS[key]
            cmd = [a.format(release=rel, out=tmp / "posterior.nc") for a in cmd]
            walls, imports, shares = ({k: [] for k in trees} for _ in range(3))
            mods = {}
            for k, tree in trees.items():  # warm-up: the page cache, JAX's compilation cache
                mods[k] = modules_loaded(run(tree, cmd, env, cwd=tmp)[2])
            for r in range(args.repeat):
                order = list(trees) if r % 2 == 0 else list(trees)[::-1]
                for k in order:
                    walls[k].append(run(trees[k], cmd, env, cwd=tmp)[0])
                    wall, _, err = run(trees[k], cmd, env, importtime=True, cwd=tmp)
                    imports[k].append(import_seconds(err))
                    shares[k].append(imports[k][-1] / wall)
            med = [{k: statistics.median(v) for k, v in d.items()}
                   for d in (walls, imports, shares)]
            rows.append((name, *med, mods))

    print("\n| command (fresh process) | wall s: baseline | this tree | this / baseline | "
          "importing s: baseline | this tree | this / baseline | share of the time importing | "
          "modules loaded |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    b, t = "baseline", "this tree"
    for name, wall, imp, share, mods in rows:
        print(f"| `{name}` | {wall[b]:.2f} | {wall[t]:.2f} | {wall[t] / wall[b]:.2f} | "
              f"{imp[b]:.2f} | {imp[t]:.2f} | {imp[t] / imp[b]:.2f} | "
              f"{share[b]:.0%} -> {share[t]:.0%} | {mods[b]} -> {mods[t]} |")
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end; medians of {args.repeat} runs")


if __name__ == "__main__":
    main()
