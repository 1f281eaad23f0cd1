"""Progress bars: drawn with a count (and the time left) when forced or on a terminal; silent by
default when stderr is not a terminal (pytest's capture, CI logs, pipes)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from bayesdp import progress
from bayesdp.cli import build_parser, main
from bayesdp.releases import release_file


class FakeTerminal(io.StringIO):
    def isatty(self):
        return True


def test_show_rule():
    assert progress.show(None, io.StringIO()) is False
    assert progress.show(None, FakeTerminal()) is True
    assert progress.show(True, io.StringIO()) is True
    assert progress.show(False, FakeTerminal()) is False
    closed = io.StringIO()
    closed.close()  # isatty() raises ValueError
    assert progress.show(None, closed) is False
    assert progress.show() is False  # pytest captures stderr: not a terminal


def test_bar_count_and_time_left():
    f = io.StringIO()
    with progress.bar(6, "cells", progress=True, file=f) as b:
        b.update(3)
    text = f.getvalue()
    assert "cells" in text and "3/6" in text and "<" in text  # elapsed<remaining
    f = FakeTerminal()
    with progress.bar(6, "cells", file=f) as b:  # default: drawn on a terminal
        b.update(6)
    assert "6/6" in f.getvalue()
    f = io.StringIO()
    with progress.bar(6, "cells", file=f) as b:  # default: silent elsewhere
        b.update(6)
    assert f.getvalue() == ""


def test_fit_progress_follows_the_same_rule():
    from bayesdp.inference.mcmc import _progress

    assert _progress(None) is False and _progress(True) is True and _progress(False) is False


@pytest.fixture
def data_csv(tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(3000, 2))
    df = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "y": X @ [1.0, -1.0] + rng.normal(size=3000)})
    path = tmp_path / "data.csv"
    df.to_csv(path, index=False)
    return path


def test_release_file_progress(data_csv, capsys):
    kw = dict(epsilon=1.0, delta=1e-5, bounds=(5.0, 10.0), seed=1, chunksize=500)
    quiet = release_file(data_csv, **kw)
    assert capsys.readouterr().err == ""
    shown = release_file(data_csv, progress=True, **kw)
    err = capsys.readouterr().err
    assert "data.csv" in err and "100%" in err
    np.testing.assert_array_equal(quiet.S_hat, shown.S_hat)  # reading is unchanged
    with pytest.warns(UserWarning):  # contiguous split: two passes, one bar each
        release_file(data_csv, progress=True, nodes=2, split="contiguous", **kw)
    err = capsys.readouterr().err
    assert "data.csv (pass 1/2)" in err and "data.csv (pass 2/2)" in err


def test_cli_progress_options(data_csv, tmp_path, capsys):
    argv = ["release", str(data_csv), "--epsilon", "1", "--delta", "1e-5", "--bounds", "5", "10",
            "--seed", "1", "--out", str(tmp_path / "r.json")]
    assert main(argv) == 0
    assert "100%" not in capsys.readouterr().err
    assert main(argv + ["--progress", "--force"]) == 0
    assert "100%" in capsys.readouterr().err
    parser = build_parser()
    for cmd in (["fit", "r.json"], ["compare", "simulated"], argv):
        assert parser.parse_args(cmd).progress is None
        assert parser.parse_args(cmd + ["--progress"]).progress is True
        assert parser.parse_args(cmd + ["--no-progress"]).progress is False
