"""Command-line defects of issue 37: compare's progress between cells, demo --help, the
protocols' names in simulate-network --help, and fit / predict given the wrong kind of file."""

import json
import re

import numpy as np
import pytest

import bayesdp
import bayesdp.paper
from bayesdp.cli import main


def test_compare_progress_moves_between_cells(capsys):
    """The bar counts fits, not cells: with two methods in one cell it shows 1/2 after the first
    method, and names the fit under way."""
    bayesdp.paper.compare("simulated", methods=["fast", "adassp"], nodes=[1], reps=1, n=300,
                          n_jobs=1, progress=True, mmd=False, figures=False)
    err = capsys.readouterr().err
    assert re.search(r"\b1/2\b", err), err
    assert re.search(r"\b2/2\b", err)
    assert "rep=0: fast" in err and "rep=0: adassp" in err


def _rows_csv(path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    np.savetxt(path, np.column_stack([X, X @ [1.0, -1.0]]), delimiter=",", header="x0,x1,y",
               comments="")
    return path


def test_fit_given_a_csv_of_rows_says_make_a_release_first(tmp_path, capsys):
    data = _rows_csv(tmp_path / "data.csv")
    out = tmp_path / "post.nc"
    assert main(["fit", str(data), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "a CSV file of rows" in err and "bayesdp release" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_fit_given_a_parquet_or_tsv_file_of_rows_names_its_kind(tmp_path, capsys):
    """The message names the file's actual kind: Parquet (by name or by its magic bytes
    whatever the name), TSV."""
    import pandas as pd

    frame = pd.DataFrame({"x0": [0.1, 0.2], "x1": [0.3, -0.1], "y": [1.0, 0.5]})
    frame.to_parquet(tmp_path / "data.parquet")
    frame.to_parquet(tmp_path / "rows.bin")
    frame.to_csv(tmp_path / "data.tsv", sep="\t", index=False)
    for name, kind in [("data.parquet", "a Parquet file"), ("rows.bin", "a Parquet file"),
                       ("data.tsv", "a TSV file")]:
        assert main(["fit", str(tmp_path / name), "--out", str(tmp_path / "post.nc")]) == 2
        err = capsys.readouterr().err
        assert f"this is {kind} of rows, not a release" in err, err
        assert "CSV" not in err and "bayesdp release" in err
    assert main(["predict", str(tmp_path / "data.parquet"), str(tmp_path / "data.tsv"),
                 "--out", str(tmp_path / "pred.csv")]) == 2
    assert "this is a Parquet file of rows, not a posterior" in capsys.readouterr().err


def test_predict_given_a_release_says_run_fit_first(tmp_path, capsys):
    data = _rows_csv(tmp_path / "data.csv")
    rel = tmp_path / "release.json"
    assert main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "3",
                 "5", "--seed", "0", "--out", str(rel)]) == 0
    capsys.readouterr()
    out = tmp_path / "pred.csv"
    assert main(["predict", str(rel), str(data), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "this is a release, not a posterior" in err and "bayesdp fit" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
    json.loads(rel.read_text())  # the release is left as it was


def test_demo_help_names_the_method_the_demo_fits(tmp_path, capsys, monkeypatch):
    """The help of 'bayesdp demo' names the method run_demo passes to fit (its default)."""
    import inspect

    import bayesdp.demo as demo
    from bayesdp.inference import fit as fit_fn

    used = []

    def spy(release, method=inspect.signature(fit_fn).parameters["method"].default, **kw):
        used.append(method)
        return fit_fn(release, method=method, **kw)

    monkeypatch.setattr(demo, "fit", spy)
    demo.run_demo(n=2000, d=2, nodes=2, out_dir=tmp_path, echo=lambda *a: None)
    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    # the help names methods as a reader knows them: 'fast' by its name in the paper
    label = {"fast": "Bayes-fixedS-fast"}
    assert used and set(used) >= {"eiv", "fast"}, used
    assert all(f"({label.get(m, m)})" in text or f" {label.get(m, m)} " in text
               or f"{label.get(m, m)}," in text for m in set(used)), (used, text)


def test_version_prints_the_package_version(capsys):
    from bayesdp.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"bayesdp {bayesdp.__version__}"


def test_errors_name_the_option_the_user_typed(tmp_path, capsys):
    """A message about a Python parameter (nodes:, bounds:) names the command's option."""
    sim = bayesdp.simulate(n=200, d=2, seed=0)
    path = tmp_path / "d.csv"
    path.write_text("x0,x1,y\n" + "\n".join(f"{a},{b},{c}" for (a, b), c in zip(sim.X, sim.y)))
    assert main(["release", str(path), "--epsilon", "1", "--delta", "1e-5", "--bounds", "-1",
                 "3", "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "error: --bounds: B_x must be" in err, err
    assert main(["release", str(path), "--epsilon", "1", "--delta", "1e-5", "--bounds", "5",
                 "3", "--nodes", "100", "--seed", "0", "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "error: --nodes: holder(s)" in err and "more got no rows" in err, err
