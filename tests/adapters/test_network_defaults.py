"""``bayesdp simulate-network``: every protocol's defaults give a release for every seed; a setting
the protocol cannot serve is refused in one line that says what to change (exit status 2)."""

from __future__ import annotations

import numpy as np
import pytest

import bayesdp
from bayesdp import privacy
from bayesdp.adapters import gossip as g
from bayesdp.cli import main


def _run(tmp_path, *argv):
    return main(["simulate-network", *argv, "--out", str(tmp_path / "rel.json"), "--force"])


@pytest.mark.parametrize("protocol", ["pricer", "consensus"])
def test_defaults_every_seed_pricer_consensus(tmp_path, capsys, protocol):
    for seed in range(30):
        assert _run(tmp_path, protocol, "--seed", str(seed)) == 0, capsys.readouterr().err
    capsys.readouterr()


def test_gossip_defaults_seeds_that_failed(tmp_path, capsys):
    # with the old defaults (1024 agents) seeds 1 and 23 stopped at "the 1/d run is too noisy"
    for seed in (1, 23):
        assert _run(tmp_path, "gossip", "--seed", str(seed)) == 0, capsys.readouterr().err
        rel = bayesdp.load_release(tmp_path / "rel.json")
        assert rel.n.tolist() == [16384]
        assert np.all(np.isfinite(rel.S_hat)) and np.all(np.isfinite(rel.noise_cov))
    idata = bayesdp.fit(rel, seed=0, num_samples=10, num_chains=1)
    assert np.all(np.isfinite(idata.posterior["theta"]))


def test_gossip_paper_design_defaults_every_seed(tmp_path, capsys):
    for seed in range(20):
        assert _run(tmp_path, "gossip", "--design", "paper", "--seed", str(seed)) == 0, \
            capsys.readouterr().err


@pytest.mark.slow
def test_gossip_defaults_every_seed(tmp_path, capsys):
    for seed in range(20):
        assert _run(tmp_path, "gossip", "--seed", str(seed)) == 0, capsys.readouterr().err


def test_gossip_too_noisy_one_line_with_the_fix(tmp_path, capsys):
    capsys.readouterr()
    assert _run(tmp_path, "gossip", "--seed", "1", "--agents", "1024", "--epsilon", "1") == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "1/d run is too noisy" in err and "raise --epsilon to" in err and "--agents to" in err
    assert not (tmp_path / "rel.json").exists()
    # the advised epsilon works with the same graph and seed
    eps = err.split("raise --epsilon to ")[1].split()[0]
    assert _run(tmp_path, "gossip", "--seed", "1", "--agents", "1024", "--epsilon", eps) == 0


def test_gossip_graph_file_advice_names_epsilon_only(tmp_path, capsys):
    A = g.synthetic_graph(400, seed=2)
    r, c = np.nonzero(np.triu(A.toarray()))
    edges = tmp_path / "edges.csv"
    edges.write_text("".join(f"{i},{j}\n" for i, j in zip(r, c)))
    capsys.readouterr()
    assert _run(tmp_path, "gossip", "--graph-file", str(edges), "--seed", "0") == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "raise --epsilon to" in err and "--agents" not in err


def test_count_run_advice_reaches_the_limit():
    A = g.synthetic_graph(1024, seed=3)
    rng = np.random.default_rng(0)
    X = rng.normal(0, 0.5, (1024, 2))
    y = X @ [0.1, -0.1] + rng.normal(0, 0.3, 1024)
    out, tr = g.simulate_gossip(A, X, y, epsilon=4, delta=1e-5, bounds=(2, 2), seed=1, tol=1e-12)
    rel = g.count_rel_sd(A, out.sigmas["count"])
    assert rel == pytest.approx(out.sigmas["count"] * np.sqrt(tr.mu_d2 / 1024))
    adv = g.count_run_advice(A, out)
    assert adv["rel_sd"] == pytest.approx(rel) and rel > g.MAX_COUNT_REL_SD
    parts = out.settings["parts"]
    s_new = privacy.gaussian_sigma(adv["epsilon"] / parts, 1e-5 / parts, 1 / 3 - 1 / 64)
    assert g.count_rel_sd(A, s_new) == pytest.approx(g.MAX_COUNT_REL_SD, rel=1e-6)
    assert adv["n_agents"] == pytest.approx(1024 * (rel / g.MAX_COUNT_REL_SD) ** 2, abs=1)
    assert g.count_run_advice(A, out, max_rel_sd=1.0) is None
