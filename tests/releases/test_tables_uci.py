"""The end-to-end example of a table release on real data (UCI Bike Sharing; issue 38, item
4): examples/tables_bike_sharing.py (docs/tables.md's example runs on a synthetic table:
tests/test_docs_examples.py). The data are read
from $BAYESDP_DATA_DIR or ../shared/data/uci beside the project; the tests skip without them."""

import importlib.util
import os
import re
import warnings
from pathlib import Path

import numpy as np
import pytest

import bayesdp

ROOT = Path(__file__).resolve().parents[2]


def _data_dir():
    base = os.environ.get("BAYESDP_DATA_DIR")
    return Path(base) if base else ROOT.parent / "shared" / "data" / "uci"


@pytest.fixture
def bike_csv():
    path = _data_dir() / "bike_sharing.csv"
    if not path.exists():
        pytest.skip("bike_sharing.csv not found (../shared/data/uci or $BAYESDP_DATA_DIR)")
    return path


def _example():
    spec = importlib.util.spec_from_file_location(
        "tables_bike_sharing", ROOT / "examples" / "tables_bike_sharing.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_example_two_holders_combine_fit_predict(bike_csv, tmp_path, capsys, monkeypatch):
    example = _example()
    assert example.data_path().exists() or "BAYESDP_DATA_DIR" in os.environ
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", bayesdp.CalibrationWarning)
        out = example.run(bike_csv, epsilon=1.0, out_dir=tmp_path, seed=0)
    rel = out["release"]
    assert rel.holder_names == ("bikes_2011", "bikes_2012") and rel.intercept
    assert rel.feature_names[:2] == ("intercept", "temp - 0.5")
    assert "C(season)[T.4]" in rel.feature_names and "C(weathersit)[T.4]" in rel.feature_names
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bikes_2011.json", "bikes_2012.json"]
    assert rel.n_total == 15690 and len(out["summary"]) == 1689
    rmse = out["rmse"]
    # the private fit beats the mean and is within 10% of the non-private fit of the formula
    assert rmse["DP posterior"] < rmse["mean of y only"]
    assert rmse["DP posterior"] < 1.1 * rmse["non-private least squares"]
    assert 0.8 < out["interval_share"] < 0.97
    text = capsys.readouterr().out
    assert "values clamped per column {'cnt': 0, 'temp': 0" in text
    # without the data the script says where it looked and exits with status 2
    monkeypatch.setenv("BAYESDP_DATA_DIR", str(tmp_path / "nowhere"))
    assert example.main([]) == 2
    assert "nowhere/bike_sharing.csv not found" in capsys.readouterr().err
