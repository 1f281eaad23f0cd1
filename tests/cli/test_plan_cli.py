"""``bayesdp plan``: the table, the smallest epsilon, the plot, and bad input."""

import json

import numpy as np
import pandas as pd
import pytest

import bayesdp
from bayesdp.cli import main


@pytest.fixture()
def pilot(tmp_path):
    assert main(["simulate", "--n", "600", "--d", "3", "--seed", "1",
                 "--out", str(tmp_path / "pilot.csv")]) == 0
    return tmp_path / "pilot.csv"


def test_plan_prints_the_table_and_writes_the_plot(pilot, tmp_path, capsys):
    capsys.readouterr()
    out_dir = tmp_path / "plan"
    assert main(["plan", str(pilot), "--n", "50000", "--bounds-from",
                 str(tmp_path / "pilot.truth.json"), "--nodes", "1", "4", "--epsilon", "1", "10",
                 "--delta", "1e-5", "--releases", "3", "--out-dir", str(out_dir)]) == 0
    out = capsys.readouterr().out
    for word in ("sd", "prior share", "90% half-width", "rmse adassp", "assumes: the pilot's 600",
                 "Planning spends no budget"):
        assert word in out, word
    table = pd.read_csv(out_dir / "plan.csv", index_col=[0, 1, 2])
    assert table.index.names == ["epsilon", "nodes", "feature"] and len(table) == 12
    # the bounds came from the truth file: the noise is the release's at those bounds
    bounds = json.loads((tmp_path / "pilot.truth.json").read_text())["public_bounds"]
    sim = bayesdp.simulate(n=600, d=3, seed=1)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=tuple(bounds), seed=0)
    assert np.allclose(table.loc[(1.0, 1), "noise sd"], rel.sigma_s[0])
    assert (out_dir / "plan.png").stat().st_size > 10_000


def test_plan_finds_the_smallest_epsilon(pilot, tmp_path, capsys):
    capsys.readouterr()
    assert main(["plan", str(pilot), "--n", "50000", "--bounds-from",
                 str(tmp_path / "pilot.truth.json"), "--nodes", "2", "--delta", "1e-5",
                 "--target-sd", "1e-7", "--max-epsilon", "10", "--releases", "3"]) == 0
    out = capsys.readouterr().out
    assert "J = 2: no epsilon up to 10 reaches the target" in out
    assert "even without the release's noise" in out


def test_plan_from_an_earlier_release(tmp_path, capsys):
    sim = bayesdp.simulate(n=20_000, d=2, seed=3)
    bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=2,
                    seed=0).save(tmp_path / "rel.json")
    capsys.readouterr()
    assert main(["plan", str(tmp_path / "rel.json"), "--epsilon", "1", "5", "--delta", "1e-5",
                 "--releases", "3"]) == 0
    assert "an earlier release (2 holders, 20000 rows)" in capsys.readouterr().out


def test_plan_without_y_shows_the_r2_range(pilot, tmp_path, capsys):
    capsys.readouterr()
    assert main(["plan", str(pilot), "--no-y", "--n", "50000", "--bounds", "20", "10",
                 "--epsilon", "1", "--delta", "1e-5", "--releases", "3", "--r2", "0.3", "0.7",
                 "--out-dir", str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "no y: R^2 = 0.3" in out and "no y: R^2 = 0.7" in out
    assert (tmp_path / "p" / "plan.png").exists()


@pytest.mark.parametrize("args, match", [
    (["--n", "1000", "--epsilon", "1"], "--bounds"),
    (["--bounds", "1", "1", "--epsilon", "1"], "--n"),
    (["--n", "1000", "--bounds", "1", "1", "--bounds-from", "x.json"], "give one of them"),
    (["--n", "1000", "--bounds-from", "missing.json"], "not a truth file"),
])
def test_plan_bad_input(pilot, capsys, args, match):
    assert main(["plan", str(pilot), "--delta", "1e-5", *args]) == 2
    assert match in capsys.readouterr().err


def test_plan_help_has_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["plan", "--help"])
    out = capsys.readouterr().out
    assert "example:\n  bayesdp simulate --n 1000" in out
    assert "--target-sd" in out and "--out-dir" in out
