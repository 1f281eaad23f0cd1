"""Command-line defects of issue 37: compare's progress between cells, demo --help, the
protocols' names in simulate-network --help, and fit / predict given the wrong kind of file."""

import json
import re

import numpy as np
import pytest

import bayesdp
from bayesdp.cli import main


def test_compare_progress_moves_between_cells(capsys):
    """The bar counts fits, not cells: with two methods in one cell it shows 1/2 after the first
    method, and names the fit under way."""
    bayesdp.compare("simulated", methods=["fast", "adassp"], nodes=[1], reps=1, n=300,
                    n_jobs=1, progress=True, mmd=False, figures=False)
    err = capsys.readouterr().err
    assert re.search(r"\b1/2\b", err), err
    assert re.search(r"\b2/2\b", err)
    assert "rep=0: fast" in err and "rep=0: adassp" in err
