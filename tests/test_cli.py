"""The command line and the README's main command."""

import json
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
    direct = bayesdp.inference.closed_form.fast_posterior(rel, bayesdp.Priors().resolve(rel))
    np.testing.assert_allclose(mean, direct["mean"], rtol=1e-12)
    assert idata.posterior.attrs["priors"] == "weakly-informative (public bounds)"
    # --priors paper reproduces the paper; --prior-* override single hyperparameters
    assert main(["fit", str(rel_path), "--method", "fast", "--seed", "2", "--priors", "paper",
                 "--out", str(post)]) == 0
    assert "priors: paper" in capsys.readouterr().out
    idata = bayesdp.diagnostics.load(post)
    paper = bayesdp.inference.closed_form.fast_posterior(rel, bayesdp.Priors.paper().resolve(3))
    np.testing.assert_allclose(bayesdp.closed_form_moments(idata)[0], paper["mean"], rtol=1e-12)
    assert idata.posterior.attrs["priors"] == "paper"
    assert main(["fit", str(rel_path), "--method", "fast", "--seed", "2", "--prior-scale-theta",
                 "3", "--prior-a", "2", "--prior-b", "0.5", "--out", str(post)]) == 0
    a = bayesdp.diagnostics.load(post).posterior.attrs
    assert a["priors"] == "weakly-informative (public bounds) + user (a, b, C)"
    np.testing.assert_allclose(a["prior_C"], (9.0 * np.eye(3)).ravel())
    assert (a["prior_a"], a["prior_b"]) == (2.0, 0.5)


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
