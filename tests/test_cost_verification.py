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


# --------------------------------------------------------------------------------------------
# write_atomic: temporary files of writers that died


def _release(**kw):
    from dp_helpers import rows_in_ball

    rng = np.random.default_rng(2024)
    X, y = rows_in_ball(rng, 80, 3, *BOUNDS)
    for key, v in (("epsilon", EPS), ("delta", DELTA), ("bounds", BOUNDS), ("seed", 0)):
        kw.setdefault(key, v)
    if kw["seed"] is None:
        del kw["seed"]
    return bayesdp.release(X, y, **kw)


def _dead_pid():
    """The id of a process that has exited and been reaped (Linux does not reuse it at once)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_write_atomic_removes_the_temporary_file_of_a_dead_writer_only(tmp_path):
    """A temporary file whose writer (this machine, its pid in the name) no longer exists is
    removed by the next write of the same target; a live writer's (a running process), another
    target's, another machine's and an old-style one without a pid are kept."""
    import os
    import subprocess
    import sys

    from bayesdp.releases import files

    host = files._host_tag()
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        dead = _dead_pid()
        stale = tmp_path / f".rel.json.{host}.{dead}.abcd1234.tmp"
        kept = [tmp_path / f".rel.json.{host}.{live.pid}.efgh5678.tmp",  # a live writer
                tmp_path / f".other.json.{host}.{dead}.abcd1234.tmp",  # another target
                tmp_path / f".rel.json.elsewhere-{host}.{dead}.abcd1234.tmp",  # another host
                tmp_path / ".rel.json.ijkl9012.tmp"]  # written before pids were in the name
        for f in [stale, *kept]:
            f.write_text("partial")
        _release().save(tmp_path / "rel.json")
        assert not stale.exists()
        assert all(f.exists() for f in kept)
        assert bayesdp.load_release(tmp_path / "rel.json").J == 1
        assert sorted(os.listdir(tmp_path)) == sorted(["rel.json", *(f.name for f in kept)])
    finally:
        live.kill()
        live.wait()


def test_write_atomic_cleans_up_after_a_writer_killed_with_sigkill(tmp_path):
    """The audit's case: kill -9 of a writer leaves its temporary file beside the target; the
    next write (here by another process) removes it and leaves only the target."""
    import os
    import subprocess
    import sys

    target = tmp_path / "fit.json"
    child = (
        "import os, sys, time\n"
        "from bayesdp.releases.files import write_atomic\n"
        "def write(fd, tmp):\n"
        "    os.write(fd, b'{\"partial\": ')\n"
        "    print('writing', flush=True)\n"
        "    time.sleep(120)\n"
        f"write_atomic({str(target)!r}, write)\n")
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        leftovers = [n for n in os.listdir(tmp_path) if n.endswith(".tmp")]
        assert len(leftovers) == 1 and f".{proc.pid}." in leftovers[0]
    finally:
        proc.kill()  # SIGKILL: no cleanup runs in the writer
        proc.wait()
        proc.stdout.close()
    assert [n for n in os.listdir(tmp_path) if n.endswith(".tmp")] == leftovers
    from bayesdp.releases.files import write_text_atomic

    write_text_atomic(target, "{}\n")
    assert os.listdir(tmp_path) == ["fit.json"] and target.read_text() == "{}\n"
