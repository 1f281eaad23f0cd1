"""The command line and the README's main command."""

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

import bayesdp
import bayesdp.paper
from bayesdp.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_readme_starts_with_the_two_commands():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.S).group(1).strip().splitlines()
    assert len(block) == 2
    assert block[0].endswith("bayesdp demo")
    ci = (ROOT / ".ci" / "run").read_text()
    assert block[1] in ci  # .ci/run runs the README's test command


def test_demo_main_job(tmp_path, capsys):
    """The README's main command with its defaults: release file, table, plot."""
    assert main(["demo", "--out-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for word in ("true", "mean", "sd", "eti_5%", "eti_95%", "adaSSP"):
        assert word in out
    assert "fast" in out and "non-private" in out
    assert "method='eiv'" in out  # fit's default
    # the note in plain words: how often such intervals held the truth, eiv's and fast's
    flat = " ".join(out.split())
    from bayesdp.demo import DEMO_EVIDENCE

    assert f"held {DEMO_EVIDENCE['eiv']} of the true coefficients" in flat, out
    assert "leaves the noise on X^T X out" in flat  # the fast intervals' known under-coverage
    rel = bayesdp.load_release(tmp_path / "release.json")
    assert (rel.J, rel.d, rel.n_total, rel.epsilon, rel.delta) == (5, 5, 100_000, 1.0, 1e-5)
    assert rel.seeded
    png = (tmp_path / "theta.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000


def test_simulate_release_fit_from_the_shell(tmp_path, capsys):
    data = tmp_path / "data.csv"
    assert main(["simulate", "--n", "3000", "--d", "3", "--seed", "1", "--out", str(data)]) == 0
    truth = json.loads(data.with_suffix(".truth.json").read_text())
    bx, by = truth["public_bounds"]
    rel_path = tmp_path / "release.json"
    assert main(["release", str(data), "--epsilon", "2", "--delta", "1e-5", "--bounds", str(bx),
                 str(by), "--nodes", "3", "--seed", "4", "--chunksize", "700",
                 "--out", str(rel_path)]) == 0
    out = capsys.readouterr().out
    assert "NOTE: --seed" in out
    rel = bayesdp.load_release(rel_path)
    assert rel.feature_names == ("x0", "x1", "x2") and rel.J == 3 and rel.n_total == 3000
    post = tmp_path / "post.nc"
    assert main(["fit", str(rel_path), "--method", "fast", "--seed", "2", "--out", str(post)]) == 0
    out = capsys.readouterr().out
    assert "posterior of theta" in out and "x2" in out
    assert "prior share" in out and "prior share: the part" in out  # the column and its note
    idata = bayesdp.diagnostics.load(post)
    share = bayesdp.inference.closed_form.fast_posterior(
        rel, bayesdp.Priors().resolve(rel))["prior_share"]
    np.testing.assert_allclose(idata.posterior.attrs["prior_share"], share)  # in the file too
    mean, _ = bayesdp.inference.closed_form_moments(idata)
    direct = bayesdp.inference.closed_form.fast_posterior(rel, bayesdp.Priors().resolve(rel))
    np.testing.assert_allclose(mean, direct["mean"], rtol=1e-12)
    assert idata.posterior.attrs["priors"] == "weakly-informative (public bounds)"
    # --priors paper reproduces the paper; --prior-* override single hyperparameters
    assert main(["fit", str(rel_path), "--method", "fast", "--seed", "2", "--priors", "paper",
                 "--out", str(post)]) == 0
    assert "priors: paper" in capsys.readouterr().out
    idata = bayesdp.diagnostics.load(post)
    paper = bayesdp.inference.closed_form.fast_posterior(rel, bayesdp.Priors.paper().resolve(3))
    np.testing.assert_allclose(bayesdp.inference.closed_form_moments(idata)[0], paper["mean"],
                               rtol=1e-12)
    assert idata.posterior.attrs["priors"] == "paper"
    assert main(["fit", str(rel_path), "--method", "fast", "--seed", "2", "--prior-scale-theta",
                 "3", "--prior-a", "2", "--prior-b", "0.5", "--out", str(post)]) == 0
    a = bayesdp.diagnostics.load(post).posterior.attrs
    assert a["priors"] == "weakly-informative (public bounds) + user (a, b, C)"
    np.testing.assert_allclose(a["prior_C"], (9.0 * np.eye(3)).ravel())
    assert (a["prior_a"], a["prior_b"]) == (2.0, 0.5)
    # the features' covariance prior, which the S_hat check's warning tells users to change
    assert main(["fit", str(rel_path), "--method", "fast", "--seed", "2", "--prior-lambda",
                 "0.04", "--prior-kappa", "7", "--out", str(post)]) == 0
    a = bayesdp.diagnostics.load(post).posterior.attrs
    np.testing.assert_allclose(a["prior_Lambda"], (0.04 * np.eye(3)).ravel())
    assert a["prior_kappa"] == 7.0
    for bad, word in ((["--prior-lambda", "0"], "--prior-lambda"), (["--prior-kappa", "1"], "kappa"),
                      (["--target-accept-prob", "0.9"], "unknown option(s) for method 'fast'")):
        assert main(["fit", str(rel_path), "--method", "fast", *bad]) == 2
        err = capsys.readouterr().err
        assert word in err and "Traceback" not in err, err


def test_combine_from_the_shell(tmp_path):
    sim = bayesdp.simulate(400, 2, seed=3)
    paths = []
    for k in range(2):
        rows = slice(200 * k, 200 * (k + 1))
        r = bayesdp.release(sim.X[rows], sim.y[rows], epsilon=1, delta=1e-5, bounds=sim.bounds,
                            seed=k)
        paths.append(str(r.save(tmp_path / f"h{k}.json")))
    assert main(["combine", *paths, "--out", str(tmp_path / "all.json")]) == 0
    assert bayesdp.load_release(tmp_path / "all.json").J == 2


def test_combine_refuses_the_same_file_twice_and_keeps_holder_names(tmp_path, capsys):
    sim = bayesdp.simulate(400, 2, seed=3)
    paths = []
    for k, name in enumerate(["hospital_a", "hospital_b"]):
        rows = slice(200 * k, 200 * (k + 1))
        sim_csv = tmp_path / f"{name}.csv"
        sim_csv.write_text("a,b,y\n" + "".join(f"{a!r},{b!r},{y!r}\n" for (a, b), y
                                                 in zip(sim.X[rows].tolist(), sim.y[rows].tolist())))
        out = tmp_path / f"{name}.json"
        assert main(["release", str(sim_csv), "--epsilon", "1", "--delta", "1e-5", "--bounds",
                     *map(str, sim.bounds), "--holder", name, "--out", str(out)]) == 0
        paths.append(str(out))
    capsys.readouterr()
    all_ = tmp_path / "all.json"
    assert main(["combine", paths[0], paths[0], "--out", str(all_)]) == 2
    err = capsys.readouterr().err
    assert "hospital_a" in err and "same statistics" in err and not all_.exists()
    assert main(["combine", *paths, "--out", str(all_)]) == 0
    assert bayesdp.load_release(all_).holder_names == ("hospital_a", "hospital_b")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["release", "{data}", "--epsilon", "0", "--delta", "1e-5", "--bounds", "1", "1"], "epsilon"),
        (["release", "{data}", "--epsilon", "1", "--delta", "1.5", "--bounds", "1", "1"], "delta"),
        (["release", "{data}", "--epsilon", "1", "--delta", "1e-5", "--bounds", "-1", "1"], "B_x"),
        (["release", "{data}", "--epsilon", "1", "--delta", "1e-5"], "bounds"),
        (["release", "{data}", "--epsilon", "1", "--delta", "1e-5", "--bounds", "1", "1",
          "--nodes", "50"], "fewer rows"),
        (["fit", "{missing}"], "does not exist"),
        (["fit", "{data}"], "not a release"),  # a CSV of rows: make a release first
        (["fit", "{bad_json}"], "not valid JSON"),
        (["fit", "{release}", "--method", "nope"], "unknown method"),
    ],
)
def test_bad_input_exits_2_with_a_named_error(tmp_path, capsys, argv, words):
    data = tmp_path / "d.csv"
    data.write_text("a,b,y\n" + "".join(f"{i},{i % 3},{i % 5}\n" for i in range(20)))
    out = tmp_path / "out.json"
    r = bayesdp.release(np.ones((4, 2)), np.ones(4), epsilon=1, delta=1e-5, bounds=(2, 2), seed=0)
    rel = r.save(tmp_path / "r.json")
    bad_json = tmp_path / "bad.json"
    bad_json.write_text('{"S_hat": [1, 2')
    argv = [a.format(data=data, missing=tmp_path / "none.json", release=rel, bad_json=bad_json)
            for a in argv]
    if argv[0] == "release":
        argv += ["--out", str(out)]
    assert main(argv) == 2
    assert words in capsys.readouterr().err
    assert not out.exists()


def test_help_for_every_command(capsys):
    for cmd in ("demo", "simulate", "release", "combine", "fit", "predict"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
        assert "usage: bayesdp " + cmd in capsys.readouterr().out


def _commands(parser, path=()):
    """(argv prefix, parser) of every command and sub-command below ``parser``."""
    import argparse

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name), sub
                yield from _commands(sub, (*path, name))


def test_every_option_of_every_command_has_help_and_shows_its_default(capsys):
    """``--help`` of every (sub-)command: each option has a help text, and each option with a
    default to show (not None, not a flag's False) says it in the printed help."""
    import argparse

    from bayesdp.cli import build_parser

    commands = list(_commands(build_parser()))
    assert {c[0] for c, _ in commands} >= {"demo", "simulate", "release", "combine", "fit",
                                           "diagnose", "compare", "simulate-network", "predict"}
    for path, sub in commands:
        with pytest.raises(SystemExit) as e:
            main([*path, "--help"])
        assert e.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        for action in sub._actions:
            if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)):
                continue
            name = "/".join(action.option_strings) or action.dest
            assert action.help and action.help.strip(), f"{' '.join(path)} {name}: no help text"
            if action.option_strings and action.default not in (None, False):
                shown = action.default
                if isinstance(shown, (list, tuple)):
                    shown = " ".join(str(v) for v in shown)
                first = " ".join(action.help.split())[:40].replace("%%", "%")
                seg = text[text.index(first):] if first in text else ""
                seg = seg[:len(" ".join(action.help.split())) + 60]
                assert "default" in seg.lower(), f"{' '.join(path)} {name}: default not shown"
                if "default" not in action.help.lower():
                    assert f"(default: {shown})" in seg, (path, name, seg)


def test_fit_help_lists_the_methods_and_compare_its_default_methods(capsys):
    from bayesdp.paper.comparison import default_methods

    with pytest.raises(SystemExit):
        main(["fit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for m in bayesdp.METHODS:
        assert m in text, m
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "default: the paper's, " + " ".join(default_methods()) in text
    assert "every available one" not in text
    assert "(default: 1 5 10)" in text  # --nodes


def test_fit_bs_without_yty_names_the_cli_flag(tmp_path, capsys):
    r = bayesdp.release(np.ones((4, 2)), np.ones(4), epsilon=1, delta=1e-5, bounds=(2, 2), seed=0,
                        include_yty=False)
    rel = r.save(tmp_path / "r.json")
    assert main(["fit", str(rel), "--method", "bs"]) == 2
    err = capsys.readouterr().err
    assert "bayesdp release ... --include-yty" in err and len(err.strip().splitlines()) == 1


# ---------------------------------------------------------------------------------------------
# audit issue 15, items 1, 2, 8, 9 from the shell


def _csv(path, header=True, n=30, holder_last=False):
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        a, b, y = (float(v) for v in rng.uniform(-1, 1, 3))
        rows.append(f"{a!r},{b!r},{y!r}" + (f",h{i % 3}" if holder_last else ""))
    head = "a,b,y" + (",holder" if holder_last else "")
    path.write_text((head + "\n" if header else "") + "\n".join(rows) + "\n")
    return path


def test_release_node_column_last_reads_y_from_the_last_other_column(tmp_path, capsys):
    data = _csv(tmp_path / "d.csv", holder_last=True)
    out = tmp_path / "r.json"
    assert main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "2", "2",
                 "--node-column", "holder", "--seed", "0", "--out", str(out)]) == 0
    rel = bayesdp.load_release(out)
    assert rel.feature_names == ("a", "b") and rel.holder_names == ("h0", "h1", "h2")
    assert rel.n.tolist() == [10, 10, 10]
    # naming the same column twice is refused, naming it
    assert main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "2", "2",
                 "--node-column", "holder", "--y-column", "holder",
                 "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "'holder'" in err and "same column" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.json").exists()
    # labels read as y (old default -1) would be non-numeric: the error names the column
    assert main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "2", "2",
                 "--y-column", "holder", "--out", str(tmp_path / "x.json")]) == 2
    err = capsys.readouterr().err
    assert "column(s) 'holder' (y_column)" in err and not (tmp_path / "x.json").exists()


def test_release_headerless_csv_needs_no_header(tmp_path, capsys):
    data = _csv(tmp_path / "d.csv", header=False)
    out = tmp_path / "r.json"
    argv = ["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "2", "2",
            "--seed", "0", "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--no-header" in err and len(err.strip().splitlines()) == 1 and not out.exists()
    assert main(argv + ["--no-header"]) == 0
    assert bayesdp.load_release(out).n_total == 30


def test_release_split_option(tmp_path, capsys):
    data = _csv(tmp_path / "d.csv", n=60)
    for split, valid in (("random", True), ("contiguous", False)):
        out = tmp_path / f"{split}.json"
        assert main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "2",
                     "2", "--nodes", "3", "--split", split, "--seed", "0",
                     "--out", str(out)]) == 0
        doc = json.loads(out.read_text())
        assert doc["privacy"]["dp_claim_valid"] is valid
        assert doc["provenance"]["split"] == split
    assert "WARNING: split='contiguous'" in capsys.readouterr().err


@pytest.mark.parametrize("cmd", ["release", "fit", "combine", "simulate", "diagnose", "compare",
                                 "simulate-truth", "predict"])
def test_output_paths_checked_before_any_work(tmp_path, capsys, monkeypatch, cmd):
    """A missing output folder is reported at once (one line, exit 2), before any work; nothing is
    written and no folder is created."""
    import importlib

    import bayesdp.diagnostics
    import bayesdp.inference

    release_mod = importlib.import_module("bayesdp.releases")
    compare_mod = importlib.import_module("bayesdp.paper.comparison")

    def boom(*a, **k):
        raise AssertionError("work started before the output path was checked")

    for mod, name in [(bayesdp.inference, "fit"), (release_mod, "release_file"),
                      (release_mod, "combine_releases"), (compare_mod, "compare"),
                      (bayesdp.diagnostics, "diagnose")]:
        monkeypatch.setattr(mod, name, boom)
    monkeypatch.setattr(importlib.import_module("bayesdp.simulate"), "simulate", boom)
    data = _csv(tmp_path / "d.csv")
    rel = tmp_path / "r.json"
    rel.write_text("{}")
    missing = tmp_path / "no" / "such"
    argv = {
        "release": ["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "2",
                    "2", "--out", str(missing / "r.json")],
        "fit": ["fit", str(rel), "--out", str(missing / "post.nc")],
        "combine": ["combine", str(rel), str(rel), "--out", str(missing / "all.json")],
        "simulate": ["simulate", "--n", "10", "--out", str(missing / "d.csv")],
        "simulate-truth": ["simulate", "--n", "10", "--out", str(tmp_path / "s.csv"),
                           "--truth", str(missing / "t.json")],
        # a folder is created with its parents, unless a file stands in the way
        "diagnose": ["diagnose", str(rel), "--out-dir", str(data / "plots")],
        "compare": ["compare", "simulated", "--out-dir", str(data / "run")],
        "predict": ["predict", str(rel), str(data), "--out", str(missing / "p.csv")],
    }[cmd]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert ("is a file" if cmd in ("diagnose", "compare") else "does not exist") in err
    assert ("--out-dir" if cmd in ("diagnose", "compare") else "--") in err
    assert not (tmp_path / "no").exists() and not (tmp_path / "s.csv").exists()


def test_compare_out_dir_is_created_with_its_parents_as_diagnose_does(tmp_path):
    """compare --out-dir runs/sim on a fresh folder (the README's command) creates runs/sim, as
    diagnose --out-dir does; a file in the way is refused before any work."""
    import bayesdp.cli as cli

    run = tmp_path / "runs" / "sim"
    assert cli.main(["compare", "simulated", "--methods", "fast", "--nodes", "1", "--reps", "1",
                     "--n", "200", "--n-jobs", "1", "--no-figures", "--mmd", "no",
                     "--out-dir", str(run)]) == 0
    assert (run / "results.csv").is_file()
    (tmp_path / "afile").write_text("x")
    with pytest.raises(bayesdp.errors.BayesdpInputError, match="is a file"):
        bayesdp.paper.compare("simulated", methods=["fast"], nodes=[1], reps=1, n=200,
                              out_dir=tmp_path / "afile" / "run", n_jobs=1)


# --------------------------------------------------------------------------------------------
# every failure: one line on stderr, non-zero exit, no traceback (audit, issue 15 item 6)


@pytest.fixture(autouse=True)
def _debug_unexpected_errors(monkeypatch):
    """Unexpected exceptions propagate with their traceback in these tests (BAYESDP_DEBUG=1), so
    the CLI's last-resort handler cannot hide a bug; the tests of that handler unset it."""
    monkeypatch.setenv("BAYESDP_DEBUG", "1")


def _assert_one_line_error(err, *words):
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("WARNING:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for w in words:
        assert w in lines[0], (w, lines[0])


@pytest.fixture
def csv_data(tmp_path):
    data = tmp_path / "d.csv"
    data.write_text("a,b,y\n" + "".join(f"{i},{i % 3},{i % 5}\n" for i in range(20)))
    return data


def _release_file(tmp_path, mutate):
    r = bayesdp.release(np.ones((4, 2)), np.ones(4), epsilon=1, delta=1e-5, bounds=(2, 2), seed=0)
    doc = r.to_dict()
    mutate(doc)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    return path


def test_cli_release_huge_bounds_and_epsilon(tmp_path, csv_data, capsys):
    out = tmp_path / "out.json"
    base = ["release", str(csv_data), "--delta", "1e-5", "--out", str(out)]
    assert main(base + ["--epsilon", "1", "--bounds", "1e200", "3"]) == 2
    _assert_one_line_error(capsys.readouterr().err, "bounds", "overflows")
    assert main(base + ["--epsilon", "1e300", "--bounds", "30", "5"]) == 2
    _assert_one_line_error(capsys.readouterr().err, "epsilon")
    assert main(base + ["--epsilon", "1", "--bounds", "30", "5", "--seed", "-3"]) == 2
    _assert_one_line_error(capsys.readouterr().err, "seed")
    assert not out.exists()


def test_cli_folders_given_as_files(tmp_path, csv_data, capsys):
    folder = tmp_path / "folder"
    folder.mkdir()
    assert main(["release", str(folder), "--epsilon", "1", "--delta", "1e-5", "--bounds", "30",
                 "5", "--out", str(tmp_path / "o.json")]) == 2
    _assert_one_line_error(capsys.readouterr().err, "is a folder")
    assert main(["release", str(csv_data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "30",
                 "5", "--out", str(folder)]) == 2
    _assert_one_line_error(capsys.readouterr().err, "is a folder")
    assert main(["fit", str(folder)]) == 2
    _assert_one_line_error(capsys.readouterr().err, "is a folder")
    assert os.listdir(folder) == []


def test_cli_unwritable_output_folder(tmp_path, csv_data, capsys, monkeypatch):
    """A read-only folder (simulated: the tests may run as root, who can write anywhere) used to
    end in a PermissionError traceback with status 1."""
    import tempfile

    def denied(*a, dir=None, **k):
        raise PermissionError(13, "Permission denied", str(dir))

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    out = tmp_path / "ro" / "out.json"
    out.parent.mkdir()
    assert main(["release", str(csv_data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "30",
                 "5", "--out", str(out)]) == 2
    _assert_one_line_error(capsys.readouterr().err, str(out.parent), "Permission denied")
    assert os.listdir(out.parent) == []


@pytest.mark.parametrize(
    "mutate, words",
    [
        (lambda doc: doc["holders"][0].__setitem__("n", 10**400), "holders[0].n"),
        (lambda doc: doc["holders"][0].__setitem__("S_hat", [[1, "2"], [True, 3]]),
         "holders[0].S_hat[0][1]"),
        (lambda doc: doc.__setitem__("d", True), "'d'"),
    ],
)
def test_cli_fit_bad_release_values(tmp_path, capsys, mutate, words):
    assert main(["fit", str(_release_file(tmp_path, mutate))]) == 2
    _assert_one_line_error(capsys.readouterr().err, words)


def test_cli_fit_deeply_nested_json(tmp_path, capsys):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    assert main(["fit", str(path)]) == 2
    _assert_one_line_error(capsys.readouterr().err, "nested too deeply")


def test_cli_unexpected_error_one_line_with_debug_hint(tmp_path, capsys, monkeypatch):
    from bayesdp import cli

    def broken(args):
        raise RuntimeError("something\nbroke")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    parser._subparsers._group_actions[0].choices["combine"].set_defaults(func=broken)
    argv = ["combine", "a.json", "--out", str(tmp_path / "x.json")]
    with pytest.raises(RuntimeError):  # BAYESDP_DEBUG=1: the traceback is shown
        main(argv)
    monkeypatch.delenv("BAYESDP_DEBUG")
    assert main(argv) == 1
    _assert_one_line_error(capsys.readouterr().err, "RuntimeError", "something broke",
                           "BAYESDP_DEBUG=1")


def test_cli_subprocess_no_traceback(tmp_path, csv_data):
    """The installed entry point as a user runs it: status != 0, one line, no traceback."""
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "BAYESDP_DEBUG"}
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["BAYESDP_COMPILATION_CACHE"] = "off"  # leave the user's cache alone
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    runs = [
        ["release", str(csv_data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "1e200", "3",
         "--out", str(tmp_path / "o.json")],
        ["fit", str(deep)],
        ["fit", str(tmp_path)],
    ]
    for argv in runs:
        p = subprocess.run([sys.executable, "-m", "bayesdp.cli", *argv], env=env,
                           capture_output=True, text=True, timeout=300)
        assert p.returncode != 0, argv
        _assert_one_line_error(p.stderr)
    assert not (tmp_path / "o.json").exists()


def test_python_m_bayesdp_is_the_command(tmp_path):
    """``python -m bayesdp`` and ``python -m bayesdp.cli`` run the command: ``--help`` exits 0
    and lists the commands; a bad argument exits 2 with one line, as ``bayesdp`` does."""
    import subprocess
    import sys

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for module in ("bayesdp", "bayesdp.cli"):
        p = subprocess.run([sys.executable, "-m", module, "--help"], env=env,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0 and "release" in p.stdout and "fit" in p.stdout, p.stderr
        p = subprocess.run([sys.executable, "-m", module, "fit", str(tmp_path / "none.json")],
                           env=env, capture_output=True, text=True, timeout=120)
        assert p.returncode != 0, module
        _assert_one_line_error(p.stderr)


# --------------------------------------------------------------------------------------------
# issue 12 item 5: what `bayesdp fit` prints


@pytest.mark.slow
def test_fit_normalx_prints_theta_and_sigma_y2_and_one_line_per_matrix(tmp_path, capsys,
                                                                       monkeypatch):
    import bayesdp.inference

    real_fit, fits = bayesdp.inference.fit, []

    def fit_once(*a, **k):  # the second command prints the same posterior: sample it once
        if not fits:
            fits.append(real_fit(*a, **k))
        return fits[0]

    monkeypatch.setattr(bayesdp.inference, "fit", fit_once)
    sim = bayesdp.simulate(600, 2, seed=2)
    rel = bayesdp.release(sim.X, sim.y, epsilon=5, delta=1e-5, bounds=sim.bounds, nodes=3,
                          seed=1).save(tmp_path / "r.json")
    argv = ["fit", str(rel), "--method", "normalx", "--seed", "0", "--num-samples", "30",
            "--num-warmup", "30", "--num-chains", "2", "--target-accept-prob", "0.9"]
    assert main(argv) == 0
    assert fits[0].posterior.attrs["target_accept_prob"] == 0.9  # what a divergence warning asks
    out = capsys.readouterr().out
    assert not re.search(r"^(S|Sigma_x)\[", out, re.M)  # no table row of any entry of S
    assert re.search(r"^theta\[x1\]", out, re.M) and re.search(r"^sigma_y2 ", out, re.M)
    # S: J d(d+1)/2 = 3 * 3 unique entries; Sigma_x: 3
    assert re.search(r"^S: 9 unique entries, max r_hat \d+\.\d{3}, min ess_bulk \d+", out, re.M)
    assert re.search(r"^Sigma_x: 3 unique entries, max r_hat", out, re.M)
    assert "--full" in out
    assert main(argv + ["--full"]) == 0
    out = capsys.readouterr().out
    rows = re.findall(r"^S\[\d, x\d, x\d\]", out, re.M)
    assert len(rows) == 3 * 2 * 2 and "Sigma_x[x0, x1]" in out and "unique entries" not in out
    from bayesdp.cli import build_parser

    assert build_parser().parse_args(argv + ["--all-parameters"]).full


def test_fit_fast_table_is_the_closed_form(tmp_path, capsys):
    sim = bayesdp.simulate(2000, 3, seed=2)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-5, bounds=sim.bounds, nodes=2,
                          seed=1)
    path = rel.save(tmp_path / "r.json")
    assert main(["fit", str(path), "--method", "fast", "--seed", "0", "--num-samples", "2",
                 "--num-chains", "1"]) == 0
    out = capsys.readouterr().out
    assert "exact closed-form" in out and "ArviZ summary" not in out
    post = bayesdp.inference.closed_form.fast_posterior(rel, bayesdp.Priors().resolve(rel))
    for name, m, sd in zip(rel.feature_names, post["mean"], np.sqrt(np.diag(post["cov"]))):
        row = re.search(rf"^{name}\s+(\S+)\s+(\S+)", out, re.M)
        assert abs(float(row.group(1)) - m) <= 5e-5 and abs(float(row.group(2)) - sd) <= 5e-5


def test_release_intercept_and_average_rows_from_the_shell(tmp_path, capsys):
    """--intercept releases [1, x] (first feature 'intercept', fitted by fast and named in the
    table); --average-rows K records K, the groups as n and the rows as n_rows; an uncentred
    column without --intercept gives a WARNING line; the normalX kernel refuses an intercept
    release naming the methods that fit it; compare accepts both options."""
    rng = np.random.default_rng(0)
    data = tmp_path / "d.csv"
    X = rng.normal(size=(200, 2)) + [6.0, 0.0]
    y = 1.0 + X @ [0.5, -0.5] + rng.normal(size=200)
    data.write_text("age,dose,y\n" + "".join(f"{a},{b},{c}\n" for (a, b), c in zip(X, y)))
    out = tmp_path / "r.json"
    assert main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "10",
                 "10", "--nodes", "2", "--seed", "0", "--intercept", "--out", str(out)]) == 0
    doc = json.loads(out.read_text())
    assert doc["intercept"] is True and doc["feature_names"] == ["intercept", "age", "dose"]
    assert "WARNING" not in capsys.readouterr().err
    assert main(["fit", str(out), "--method", "fast", "--seed", "1"]) == 0
    assert "intercept" in capsys.readouterr().out
    assert main(["fit", str(out), "--method", "normalx-paper"]) == 2
    err = capsys.readouterr().err
    assert "'normalx'" in err and "'fixeds'" in err and "'fast'" in err
    plain = tmp_path / "p.json"
    assert main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "10",
                 "10", "--seed", "0", "--out", str(plain)]) == 0
    assert "WARNING: release without an intercept" in capsys.readouterr().err
    avg = tmp_path / "a.json"
    assert main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "10",
                 "10", "--seed", "0", "--intercept", "--average-rows", "6", "--out",
                 str(avg)]) == 0
    assert "averaged in groups of 6: [33] groups" in capsys.readouterr().out
    doc = json.loads(avg.read_text())
    assert doc["average_rows"] == 6 and doc["holders"][0]["n"] == 33
    assert doc["holders"][0]["n_rows"] == 200 and "average_rows=6" in doc["privacy"][
        "dp_claim_note"]
    run = tmp_path / "cmp"
    assert main(["compare", "simulated", "--methods", "fast", "nonprivate", "--epsilons", "10",
                 "--nodes", "2", "--reps", "1", "--n", "2000", "--n-jobs", "1", "--intercept",
                 "--average-rows", "4", "--x-mean", "3", "--true-intercept", "1",
                 "--no-figures", "--out-dir", str(run)]) == 0
    spec = json.loads((run / "config.json").read_text())["spec"]
    assert spec["intercept"] is True and spec["average_rows"] == 4 and spec["x_mean"] == 3.0


def test_compare_prints_the_grids_convergence_warning_and_table(tmp_path, capsys):
    """60 draws of one chain cannot converge (bulk ESS >= 400): bayesdp compare prints compare's
    one ConvergenceWarning as a WARNING line and the share of converged fits per cell."""
    assert main(["compare", "simulated", "--methods", "fixeds", "fast", "--epsilons", "1",
                 "--nodes", "2", "--reps", "1", "--n", "2000", "--num-samples", "60",
                 "--num-warmup", "40", "--n-jobs", "1", "--no-figures",
                 "--out-dir", str(tmp_path / "run")]) == 0
    out, err = capsys.readouterr()
    assert "WARNING: compare: 1 of 1 MCMC fits did not pass" in err and "fixeds 1" in err
    table = out.split("## converged", 1)[1]
    assert "| epsilon | J | fixeds | fast |" in table and "| 1 | 2 | 0 |  |" in table  # 1 rep
    assert "summary.md\n" in out  # --no-figures: no figures claimed


def test_release_node_column_of_measurements_is_refused(tmp_path, capsys):
    """--node-column naming a column of measurements (the audit: exit 0, every row's value
    published as a holder name): exit 2, one line naming the column, no file written."""
    data = _csv(tmp_path / "d.csv")
    out = tmp_path / "r.json"
    assert main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "2", "2",
                 "--node-column", "a", "--y-column", "y", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "node_column" in err and "float64" in err and not out.exists()


def test_no_distributed_import_keeps_out_only_what_was_never_imported(monkeypatch):
    """Within ``no_distributed_import`` distributed and dask.distributed cannot be imported
    (what xarray and dask take as "no distributed client"), and afterwards they can; a process
    that imported distributed keeps it."""
    import sys

    from bayesdp.cli.common import no_distributed_import

    for name in ("distributed", "dask.distributed"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    with no_distributed_import():
        with pytest.raises(ImportError):
            import dask.distributed  # noqa: F401
        with pytest.raises(ImportError):
            from distributed import get_client  # noqa: F401
    assert "distributed" not in sys.modules and "dask.distributed" not in sys.modules
    marker = object()
    monkeypatch.setitem(sys.modules, "distributed", marker)
    with no_distributed_import():
        assert sys.modules["distributed"] is marker
        assert "dask.distributed" not in sys.modules
    assert sys.modules["distributed"] is marker


def test_readme_shell_walk_releases_with_the_simulated_bounds(tmp_path, monkeypatch, capsys):
    """The README's shell walk, run verbatim (its simulate and release lines): the release uses
    the public bounds simulate wrote (issue 54: it used --bounds 40 30, 2.3x the sensitivity)."""
    import shlex

    text = (ROOT / "README.md").read_text()
    walk = text.split("## From the shell", 1)[1].split("\n\n", 2)[1]
    lines = [ln.split("#")[0].strip() for ln in walk.splitlines() if ln.strip()]
    monkeypatch.chdir(tmp_path)
    for line in lines[:2]:  # simulate, release
        args = shlex.split(line)
        assert args[0] == "bayesdp"
        assert main(args[1:]) == 0, line
    truth = json.loads((tmp_path / "data.truth.json").read_text())
    rel = bayesdp.load_release(tmp_path / "release.json")
    assert rel.bounds == pytest.approx(tuple(truth["public_bounds"]), rel=1e-12)


def test_simulate_table_writes_the_tables_docs_example_table(tmp_path, capsys):
    """bayesdp simulate --table: the columns of docs/tables.md's formula, inside its declared
    bounds (so its release clamps nothing), categorical levels 1..4, reproducible by seed."""
    import pandas as pd

    out = tmp_path / "bikes.csv"
    assert main(["simulate", "--table", "--n", "3000", "--seed", "4", "--out", str(out)]) == 0
    assert "synthetic table" in capsys.readouterr().out
    t = pd.read_csv(out)
    assert list(t.columns) == ["yr", "season", "weathersit", "workingday", "temp", "hum",
                               "windspeed", "cnt"] and len(t) == 3000
    assert set(t["season"]) == {1, 2, 3, 4} and set(t["weathersit"]) <= {1, 2, 3, 4}
    for c, (lo, hi) in {"cnt": (0, 1000), "temp": (0, 1), "hum": (0, 1),
                        "windspeed": (0, 1), "workingday": (0, 1)}.items():
        assert t[c].between(lo, hi).all(), c
    again = bayesdp.simulate_table(3000, seed=4)
    np.testing.assert_allclose(t[["temp", "cnt"]].to_numpy(), again[["temp", "cnt"]].to_numpy(),
                               rtol=1e-5)
    assert not again.equals(bayesdp.simulate_table(3000, seed=5))
