"""The command line and the README's main command."""

import json
import os
import re
from pathlib import Path

import numpy as np
import pytest

import bayesdp
from bayesdp.cli import main

ROOT = Path(__file__).resolve().parents[1]


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
    for word in ("true", "mean", "sd", "90% lower", "90% upper", "adaSSP"):
        assert word in out
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
    idata = bayesdp.diagnostics.load(post)
    mean, _ = bayesdp.closed_form_moments(idata)
    direct = bayesdp.inference.closed_form.fast_posterior(rel, bayesdp.Priors().resolve(3))["mean"]
    np.testing.assert_allclose(mean, direct, rtol=1e-12)


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
        (["fit", "{data}"], "not valid JSON"),
        (["fit", "{release}", "--method", "nope"], "unknown method"),
    ],
)
def test_bad_input_exits_2_with_a_named_error(tmp_path, capsys, argv, words):
    data = tmp_path / "d.csv"
    data.write_text("a,b,y\n" + "".join(f"{i},{i % 3},{i % 5}\n" for i in range(20)))
    out = tmp_path / "out.json"
    r = bayesdp.release(np.ones((4, 2)), np.ones(4), epsilon=1, delta=1e-5, bounds=(2, 2), seed=0)
    rel = r.save(tmp_path / "r.json")
    argv = [a.format(data=data, missing=tmp_path / "none.json", release=rel) for a in argv]
    if argv[0] == "release":
        argv += ["--out", str(out)]
    assert main(argv) == 2
    assert words in capsys.readouterr().err
    assert not out.exists()


def test_help_for_every_command(capsys):
    for cmd in ("demo", "simulate", "release", "combine", "fit"):
        with pytest.raises(SystemExit) as e:
            main([cmd, "--help"])
        assert e.value.code == 0
        assert "usage: bayesdp " + cmd in capsys.readouterr().out


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
