"""``bayesdp select``: the table, the files it writes, and its errors."""

import warnings

import numpy as np
import pandas as pd
import pytest

import bayesdp
from bayesdp.cli import main
from bayesdp.inference import selection


@pytest.fixture(scope="module")
def release_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((3000, 4))
    y = X @ np.array([0.8, 0.0, 0.4, 0.0]) + rng.standard_normal(3000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        rel = bayesdp.release(X, y, epsilon=3.0, delta=1e-5, bounds=(5.0, 4.0), nodes=2, seed=1,
                              feature_names=["a", "b", "c", "e"])
    path = tmp_path_factory.mktemp("select") / "release.json"
    rel.save(path)
    return path


def test_select_prints_the_table_and_writes_its_files(release_file, tmp_path, capsys):
    out_dir = tmp_path / "sel"
    assert main(["select", str(release_file), "--top", "3", "--seed", "0", "--num-samples",
                 "200", "--out-dir", str(out_dir)]) == 0
    out = capsys.readouterr().out
    for words in ("enumeration: every one of the 16 models", "beta-binomial(1, 1)",
                  "inclusion", "mean_if_in", "top models:", "log_evidence", "probability",
                  "a + c", "log_bf: the natural log of the Bayes factor"):
        assert words in out, words
    inclusion = pd.read_csv(out_dir / "inclusion.csv", index_col=0)
    assert list(inclusion.index) == ["a", "b", "c", "e"]
    assert inclusion.loc["a", "inclusion"] > 0.9 and inclusion.loc["b", "inclusion"] < 0.5
    models = pd.read_csv(out_dir / "models.csv", index_col=0)
    assert len(models) == 3 and models["probability"].is_monotonic_decreasing
    assert (out_dir / "inclusion.png").read_bytes()[:4] == b"\x89PNG"
    # the model-averaged posterior is a posterior file: predict and diagnose read it
    rows = tmp_path / "rows.csv"
    pd.DataFrame(np.eye(4), columns=["a", "b", "c", "e"]).to_csv(rows, index=False)
    assert main(["predict", str(out_dir / "posterior.nc"), str(rows), "--out",
                 str(tmp_path / "p.csv"), "--seed", "0"]) == 0
    assert len(pd.read_csv(tmp_path / "p.csv")) == 4
    assert main(["diagnose", str(out_dir / "posterior.nc"), "--var-names", "theta"]) == 0


def test_select_model_prior_and_mc3_from_the_shell(release_file, capsys):
    assert main(["select", str(release_file), "--model-prior", "0.5", "--method", "mc3",
                 "--steps", "400", "--num-chains", "2", "--num-samples", "50", "--seed",
                 "1"]) == 0
    out = capsys.readouterr().out
    assert "mc3: MC^3, 2 chains x 400 steps" in out
    assert "each feature in with probability 0.5 (every model equally likely)" in out


@pytest.mark.parametrize("argv, words", [
    (["--model-prior", "2"], "--model-prior must be"),
    (["--model-prior", "flat"], "--model-prior must be"),
    (["--top", "0"], "top must be"),
    (["--steps", "50"], "steps is the MC^3 sampler's"),
])
def test_bad_options_exit_2_naming_them(release_file, capsys, argv, words):
    assert main(["select", str(release_file), *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


def test_too_many_features_for_enumeration_is_a_named_error(release_file, capsys, monkeypatch):
    monkeypatch.setattr(selection, "MAX_ENUMERATION_FEATURES", 3)
    assert main(["select", str(release_file), "--method", "enumeration"]) == 2
    assert "use method='mc3'" in capsys.readouterr().err


def test_rows_or_a_missing_file_instead_of_a_release(tmp_path, capsys):
    rows = tmp_path / "data.csv"
    rows.write_text("x0,y\n1,2\n")
    assert main(["select", str(rows)]) == 2
    assert "not a release" in capsys.readouterr().err
    assert main(["select", str(tmp_path / "missing.json")]) == 2


def test_out_dir_that_is_a_file_is_refused_before_any_work(release_file, tmp_path, capsys,
                                                           monkeypatch):
    monkeypatch.setattr(selection, "select", lambda *a, **k: pytest.fail("work started"))
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert main(["select", str(release_file), "--out-dir", str(blocker / "sel")]) == 2
    assert "--out-dir" in capsys.readouterr().err
