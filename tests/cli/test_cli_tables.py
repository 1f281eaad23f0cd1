"""``bayesdp release --formula`` with ``--bound`` and ``--bounds-file``, ``combine``, ``fit``
and ``predict --release`` on tables (issue 38); bad input exits with status 2, one line, and
nothing written."""

import json
import re

import numpy as np
import pandas as pd
import pytest

import bayesdp
from bayesdp.cli import main

#: temp centred and scaled by public constants to [-1, 1]: the noise grows with B_x^2, so a
#: column on a large scale would drown the indicators (docs/tables.md)
FORMULA = "log(count + 1) ~ {(temp - 15) / 25} + C(region)"


def _table(path, rng, n, wide=False):
    temp = rng.uniform(-15 if wide else -10, 45 if wide else 40, n)
    region = rng.choice(["north", "south", "east"], n)
    count = np.round(np.exp(3 + 0.05 * temp + 0.4 * (region == "south")
                            + 0.1 * rng.standard_normal(n)))
    pd.DataFrame({"temp": temp, "region": region, "count": count,
                  "note": "x"}).to_csv(path, index=False)
    return path


def test_release_combine_fit_predict_a_table_from_the_shell(tmp_path, capsys):
    rng = np.random.default_rng(0)
    a = _table(tmp_path / "a.csv", rng, 20_000, wide=True)
    b = _table(tmp_path / "b.csv", rng, 10_000)
    new = _table(tmp_path / "new.csv", rng, 20)
    (tmp_path / "bounds.json").write_text(json.dumps(
        {"temp": [-10, 40], "region": {"levels": ["north", "south", "east"]},
         "unused": [0, 1]}))
    common = ["--epsilon", "10", "--delta", "1e-5", "--formula", FORMULA]
    assert main(["release", str(a), *common, "--bounds-file", str(tmp_path / "bounds.json"),
                 "--bound", "count", "0", "1000", "--holder", "a", "--seed", "1",
                 "--out", str(tmp_path / "a.json")]) == 0
    out = capsys.readouterr().out
    clamped = pd.read_csv(a)["temp"].pipe(lambda t: int(((t < -10) | (t > 40)).sum()))
    assert clamped > 0 and f"count 0, temp {clamped}" in out
    assert "B_x=" in out and "'C(region)[T.south]'" in out
    assert main(["release", str(b), *common, "--bound", "temp", "-10", "40",
                 "--bound", "region", "north", "south", "east", "--bound", "count", "0", "1000",
                 "--holder", "b", "--seed", "2", "--out", str(tmp_path / "b.json")]) == 0
    ra, rb = (bayesdp.load_release(tmp_path / f) for f in ("a.json", "b.json"))
    assert ra.table == rb.table  # --bounds-file and --bound declare the same encoding
    assert ra.feature_names == ("intercept", "(temp - 15) / 25", "C(region)[T.south]",
                                "C(region)[T.east]")
    assert ra.bounds[0] == pytest.approx(2 ** 0.5)
    assert main(["combine", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                 "--out", str(tmp_path / "ab.json")]) == 0
    assert main(["fit", str(tmp_path / "ab.json"), "--seed", "0",
                 "--out", str(tmp_path / "post.nc")]) == 0
    capsys.readouterr()
    assert main(["predict", str(tmp_path / "post.nc"), str(new), "--release",
                 str(tmp_path / "ab.json"), "--seed", "0", "--out", str(tmp_path / "p.csv")]) == 0
    pred = pd.read_csv(tmp_path / "p.csv")
    truth = pd.read_csv(new)
    expected = 3 + 0.05 * truth.temp + 0.4 * (truth.region == "south")
    assert len(pred) == 20 and np.abs(pred["mean"] - expected).max() < 0.2
    # without --release: the posterior records the encoding (fit keeps it), the same table
    assert main(["predict", str(tmp_path / "post.nc"), str(new), "--seed", "0",
                 "--out", str(tmp_path / "q.csv")]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "q.csv"), pred)


@pytest.mark.parametrize("args, message", [
    (["--bound", "temp", "40", "-10"], r"bounds\['temp'\]: lo = 40 > hi = -10"),
    (["--bound", "temp", "-10"], r"--bound temp -10: temp is used as a number"),
    (["--bound", "temp", "-10", "40", "--bound", "region", "north", "south"],
     r"level\(s\) that are not declared: 'east'"),
    ([], "no bounds declared for column 'temp'"),
    (["--bound", "temp", "-10", "40", "--bounds", "3", "3"], "--bounds: with --formula"),
    (["--bound", "temp", "-10", "40", "--bound", "temp", "0", "1"], "--bound temp: given twice"),
    (["--bounds-file", "missing.json"], "--bounds-file: .* does not exist"),
])
def test_bad_table_input_exits_2_and_writes_nothing(tmp_path, capsys, args, message):
    data = _table(tmp_path / "t.csv", np.random.default_rng(1), 100)
    region = [] if any(a == "region" for a in args) else ["--bound", "region", "north",
                                                           "south", "east"]
    count = ["--bound", "count", "0", "1000"]
    out = tmp_path / "r.json"
    code = main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--formula",
                 FORMULA, *args, *region, *count, "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "error:" in err and "Traceback" not in err
    assert re.search(message, err), err
    assert not out.exists()


def test_formula_names_a_missing_column(tmp_path, capsys):
    data = _table(tmp_path / "t.csv", np.random.default_rng(2), 50)
    out = tmp_path / "r.json"
    assert main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--formula",
                 "log(count + 1) ~ temp + humidity", "--bound", "temp", "-10", "40",
                 "--bound", "humidity", "0", "1", "--bound", "count", "0", "1000",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "names column(s) the table does not have: 'humidity' in the term 'humidity'" in err
    assert not out.exists()
    assert main(["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bound", "temp",
                 "0", "1", "--out", str(out)]) == 2
    assert "--bound and --bounds-file declare the columns of a --formula" in \
        capsys.readouterr().err
