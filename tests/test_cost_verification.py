"""The reader checks a release's privacy cost record against the rest of the file (docs/privacy.md
section 9): the cost is recomputed from the file's own noise scales, bounds, design,
calibration and noise mechanism (accounting.derive_cost), and a record that disagrees is
refused naming the field. Also: zcdp_epsilon terminates for every valid input, numeric fields
out of range are refused with a ReleaseFormatError, combine detects a re-serialised copy of a
holder, and write_atomic removes the temporary files of writers that are certainly gone."""

import copy
import json
import math

import numpy as np
import pytest

import bayesdp
from bayesdp import accounting
from bayesdp.errors import ReleaseFormatError

EPS, DELTA = 1.0, 1e-5
BOUNDS = (2.0, 3.0)


# --------------------------------------------------------------------------------------------
# zcdp_epsilon terminates for every valid input


@pytest.mark.parametrize("rho", [5e-324, 1e-300, 1e-9, 0.0305, 1.0, 1e8, 1e150, 1e300])
@pytest.mark.parametrize("delta", [5e-324, 1e-300, 1e-5, 0.5, 1 - 2**-53])
def test_zcdp_epsilon_terminates_and_inverts_zcdp_delta(rho, delta):
    """Used to loop forever at delta = 5e-324 (log(1/delta) overflowed to inf, and the search
    doubled inf). The result meets delta (as zcdp_delta computes it, and in log space) and is
    the smallest such eps to 1e-9, which the round trip checks without any timeout."""
    eps = accounting.zcdp_epsilon(rho, delta)
    assert math.isfinite(eps) and eps >= 0
    assert accounting.zcdp_delta(rho, eps) <= delta
    log_d = accounting._zcdp_log_delta(rho, eps) if eps > 0 else 0.0
    assert log_d <= math.log(delta) or eps == 0
    if eps > 0:
        below = eps * (1 - 1e-9)
        assert (accounting._zcdp_log_delta(rho, below) > math.log(delta)
                or accounting.zcdp_delta(rho, below) > delta)
    # and it is below Bun & Steinke's looser conversion, log(1/delta) taken as -log(delta)
    assert eps <= (rho + 2 * math.sqrt(rho * -math.log(delta))) * (1 + 1e-12)


def test_zcdp_epsilon_at_the_smallest_delta():
    """The audit's case: rho = 0.0305 (a secure release), delta = 5e-324. 1e-300 gives 9.1706;
    the smallest double needs a little more and stays below Bun & Steinke's 9.5569."""
    assert accounting.zcdp_epsilon(0.0305, 1e-300) == pytest.approx(9.1706, abs=1e-4)
    eps = accounting.zcdp_epsilon(0.0305, 5e-324)
    assert 9.1706 < eps < 0.0305 + 2 * math.sqrt(0.0305 * -math.log(5e-324))
    assert eps == pytest.approx(9.5217, abs=1e-4)
