"""The reader checks a release's privacy cost record against the rest of the file (docs/privacy.md
section 9): the cost is recomputed from the file's own noise scales, bounds, design,
calibration and noise mechanism (releases.cost.derive_cost), and a record that disagrees is
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
from bayesdp.releases.cost import derive_cost, verify_cost

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
    for key, v in (("epsilon", EPS), ("delta", DELTA), ("bounds", BOUNDS), ("seed", 0),
                   ("include_yty", False)):
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


# --------------------------------------------------------------------------------------------
# every release bayesdp writes still loads: the record agrees with its own derivation

import warnings  # noqa: E402


@pytest.fixture(scope="module")
def sim():
    """8000 rows: enough for private bounds at eps = 1 (2020 rows) on four holders."""
    return bayesdp.simulate(n=8000, d=3, seed=1)


def _quiet(f, *a, **kw):
    """Run a release entry point; the warnings of the flawed options (paper-code, contiguous,
    bounds read off the data) are expected here."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*a, **kw)


def _round_trip(rel, tmp_path, name="r.json"):
    """Save, load (which verifies the record), and check the cost came back unchanged. When
    one cost applies to every holder, derive_cost reproduces the writer's record
    from the file's fields alone (the other parts given); not for a combination of contiguous
    splits, whose factor the reader does not recheck."""
    back = bayesdp.load_release(rel.save(tmp_path / name, overwrite=True))
    assert back.privacy_cost == rel.privacy_cost
    verify_cost(rel)
    derived = derive_cost(back, back.privacy_cost)
    contiguous_combination = "combined_from" in back.provenance and str(
        back.provenance.get("split", "")).startswith("contiguous")
    if not any("holders" in p for p in back.privacy_cost) and not contiguous_combination:
        assert len(derived) == len(back.privacy_cost)
        for d, r in zip(derived, back.privacy_cost):
            assert d["mechanism"] == r["mechanism"] and d["name"] == r["name"]
            for key in ("epsilon", "delta", "rho", "sigma", "sensitivity"):
                assert (d[key] is None) == (r[key] is None), key
                assert d[key] is None or d[key] == pytest.approx(r[key], rel=1e-9), key
    return back


RELEASE_OPTIONS = {
    "plain": {},
    "holders": dict(nodes=3),
    "intercept": dict(intercept=True),
    "average_rows": dict(average_rows=3, nodes=2),
    "intercept_average_rows_yty": dict(intercept=True, average_rows=2, include_yty=True),
    "yty": dict(include_yty=True),
    "classical": dict(calibration="classical"),
    "classical_short": dict(calibration="classical", epsilon=10.0),
    "paper_code": dict(calibration="paper-code"),
    "contiguous": dict(nodes=4, split="contiguous"),
    "contiguous_average_rows": dict(nodes=3, split="contiguous", average_rows=2),
    "data_bounds": dict(bounds="data"),
    "secure": dict(noise="secure", seed=None),
    "secure_intercept_yty": dict(noise="secure", seed=None, nodes=2, intercept=True,
                                 include_yty=True),
    "secure_average_rows": dict(noise="secure", seed=None, average_rows=2),
    "private_bounds": dict(bounds="private"),
    "private_bounds_holders": dict(bounds="private", nodes=4),
    "private_bounds_share_classical": dict(bounds="private", bounds_share=0.3,
                                           calibration="classical"),
    "private_bounds_contiguous": dict(bounds="private", nodes=3, split="contiguous"),
    "private_bounds_intercept_average_rows": dict(bounds="private", intercept=True,
                                                  average_rows=2),
}


@pytest.mark.parametrize("name", sorted(RELEASE_OPTIONS))
def test_every_kind_of_release_round_trips(sim, tmp_path, name):
    kw = dict(RELEASE_OPTIONS[name])
    kw.setdefault("epsilon", EPS)
    kw.setdefault("delta", DELTA)
    kw.setdefault("bounds", sim.bounds)
    kw.setdefault("seed", 3)
    if kw["seed"] is None:
        del kw["seed"]
    rel = _quiet(bayesdp.release, sim.X, sim.y, **kw)
    back = _round_trip(rel, tmp_path)
    assert back.epsilon == rel.epsilon and back.sigma_s.tolist() == rel.sigma_s.tolist()


def test_release_file_partial_statistics_and_dask_round_trip(sim, tmp_path):
    import pandas as pd

    path = tmp_path / "d.csv"
    frame = pd.DataFrame(sim.X, columns=["a", "b", "c"])
    frame["y"] = sim.y
    frame.to_csv(path, index=False, float_format="%.17g")
    kw = dict(epsilon=EPS, delta=DELTA, seed=4)
    for extra in (dict(bounds=sim.bounds, nodes=2), dict(bounds="private"),
                  dict(bounds=sim.bounds, nodes=3, split="contiguous", intercept=True)):
        _round_trip(_quiet(bayesdp.releases.release_file, path, **kw, **extra), tmp_path,
                    "file.json")
    _round_trip(bayesdp.releases.release_file(path, epsilon=EPS, delta=DELTA, bounds=sim.bounds,
                                              noise="secure"), tmp_path, "file_secure.json")
    from bayesdp.releases import PartialStatistics

    acc = PartialStatistics(3, sim.bounds)
    acc.add(sim.X[:4000], sim.y[:4000])
    other = PartialStatistics(3, sim.bounds)
    other.add(sim.X[4000:], sim.y[4000:])
    _round_trip((acc + other).release(epsilon=EPS, delta=DELTA, seed=5), tmp_path, "ps.json")
    try:
        import dask.dataframe as dd
    except ImportError:
        return
    ddf = dd.from_pandas(frame, npartitions=3)
    _round_trip(bayesdp.releases.release_dask(ddf, epsilon=EPS, delta=DELTA, bounds=sim.bounds,
                                              nodes=2, seed=6, scheduler="synchronous"),
                tmp_path, "dask.json")


def test_combined_releases_round_trip(sim, tmp_path):
    half = len(sim.y) // 2
    kw = dict(epsilon=EPS, delta=DELTA)
    one = lambda X, y, **o: _quiet(bayesdp.release, X, y, **{**kw, **o})  # noqa: E731
    a = one(sim.X[:half], sim.y[:half], bounds=sim.bounds, holder_name="a", seed=1)
    b = one(sim.X[half:], sim.y[half:], bounds=sim.bounds, holder_name="b", seed=2)
    c = bayesdp.combine_releases(a, b)
    assert c.privacy_cost == a.privacy_cost  # equal costs kept as they are
    _round_trip(c, tmp_path, "ab.json")
    # holders that estimated their own bounds: per-holder parts, the largest bounds
    pa = one(sim.X[:half], sim.y[:half], bounds="private", holder_name="pa", seed=1)
    pb = one(sim.X[half:] * 1.5, sim.y[half:], bounds="private", holder_name="pb", seed=2)
    own = bayesdp.combine_releases(pa, pb)
    assert pa.bounds != pb.bounds and own.bounds != pa.bounds
    _round_trip(own, tmp_path, "own.json")
    # private bounds next to public ones of the same values
    pe = one(sim.X[half:], sim.y[half:], bounds=pa.bounds, holder_name="pe", seed=3)
    _round_trip(bayesdp.combine_releases(pa, pe), tmp_path, "pe.json")
    # secure releases
    sa = one(sim.X[:half], sim.y[:half], bounds=sim.bounds, noise="secure", holder_name="sa")
    sb = one(sim.X[half:], sim.y[half:], bounds=sim.bounds, noise="secure", holder_name="sb")
    _round_trip(bayesdp.combine_releases(sa, sb), tmp_path, "secure.json")
    # contiguous splits: each input's cost is the whole-release change over its own holders
    ca = one(sim.X[:half], sim.y[:half], bounds=sim.bounds, nodes=3, split="contiguous", seed=4)
    cb = one(sim.X[half:], sim.y[half:], bounds=sim.bounds, nodes=3, split="contiguous", seed=5)
    _round_trip(bayesdp.combine_releases(ca, cb), tmp_path, "contiguous.json")
    # a contiguous input next to a randomly split one, in either order
    ra = one(sim.X[half:], sim.y[half:] + 1.0, bounds=sim.bounds, nodes=2, seed=6)
    _round_trip(bayesdp.combine_releases(ca, ra), tmp_path, "mixed1.json")
    _round_trip(bayesdp.combine_releases(ra, ca), tmp_path, "mixed2.json")
    # a combination of combinations, through files
    c3 = one(sim.X[:half], sim.y[:half] - 1.0, bounds=sim.bounds, holder_name="c", seed=9)
    again = bayesdp.combine_releases(str(tmp_path / "ab.json"), c3)
    _round_trip(again, tmp_path, "again.json")


def test_network_adapter_releases_round_trip(tmp_path):
    from bayesdp.adapters import consensus, gossip
    from bayesdp.adapters.pricer import PricerNetwork, pricer_release
    from dp_helpers import rows_in_ball

    rng = np.random.default_rng(11)
    X, y = rows_in_ball(rng, 6, 3, *BOUNDS)
    adj = np.ones((6, 6)) - np.eye(6)
    sim = consensus.consensus_release(adj, X, y, eps=1.0, bound_x=BOUNDS[0], bound_y=BOUNDS[1],
                                      seed=0, T=5)
    _round_trip(sim.release, tmp_path, "consensus.json")
    net = PricerNetwork.erdos_renyi(6, 0.7, 0.8)
    Xs = [rng.standard_normal((10, 2)) for _ in range(6)]
    ys = [Xk @ np.ones(2) + 0.1 * rng.standard_normal(10) for Xk in Xs]
    pr = pricer_release(Xs, ys, net, eps=0.5, delta=1e-5, bound_x=3.0, bound_y=10.0, seed=1)
    _round_trip(pr.release, tmp_path, "pricer.json")
    A = gossip.synthetic_graph(64, seed=1)
    Xg = rng.normal(size=(64, 2))
    yg = Xg @ [0.2, -0.1] + rng.normal(0, 0.3, 64)
    out, _ = _quiet(gossip.simulate_gossip, A, Xg, yg, epsilon=50, delta=1e-5, bounds=(3, 3),
                    it_go=64, seed=1)
    _round_trip(_quiet(gossip.gossip_release, out), tmp_path, "gossip.json")


# --------------------------------------------------------------------------------------------
# a record that disagrees with the file is refused, naming the field


def _doc(rel):
    return json.loads(json.dumps(rel.to_dict()))


def _load(tmp_path, doc, name="edited.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return bayesdp.load_release(path)


def test_noise_scales_that_disagree_with_the_record_are_refused(tmp_path):
    """Audit reproducer 1: every holder's sigma_s and sigma_z set to 1.0 while the record keeps
    sigma = 26.9 used to load, and a budget said eps = 1.0 for noise worth eps ~ 40."""
    rel = _release(nodes=3)
    assert rel.privacy_cost[0]["sigma"] == pytest.approx(26.90, abs=0.01)
    doc = _doc(rel)
    for h in doc["holders"]:
        h["sigma_s"] = h["sigma_z"] = 1.0
    with pytest.raises(ReleaseFormatError, match=r"privacy\.cost\.parts\[0\]\.sigma = 26\.9\d* "
                                                 r"disagrees with holders\[0\]\.sigma_s = 1\.0"):
        _load(tmp_path, doc)
    doc = _doc(rel)
    doc["holders"][2]["sigma_z"] = 0.5 * doc["holders"][2]["sigma_z"]  # one holder, one block
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.sigma .* holders\[2\]\.sigma_z"):
        _load(tmp_path, doc)
    # negative control: the file as written loads, and more noise than recorded is refused too
    # (the record must describe the file's noise)
    assert _load(tmp_path, _doc(rel)).privacy_cost == rel.privacy_cost
    doc = _doc(rel)
    doc["holders"][1]["sigma_s"] *= 2
    assert _load(tmp_path, doc).sigma_s[1] == 2 * rel.sigma_s[1]  # the smallest still agrees


def _cut_sensitivity(part, factor):
    """Scale a Gaussian part's sensitivity and keep rho, the noise multiplier and epsilon
    consistent with it (what a careful forger does)."""
    part["sensitivity"] *= factor
    part["rho"] = 0.5 * (part["sensitivity"] / part["sigma"]) ** 2
    part["dp_event"]["noise_multiplier"] = part["sigma"] / part["sensitivity"]
    part["epsilon"] = bayesdp.privacy.true_epsilon(part["sigma"], part["delta"],
                                                   part["sensitivity"])


def test_a_sensitivity_below_the_bounds_is_refused(tmp_path):
    """Audit reproducer 2: privacy.sensitivity and the part's cut to a tenth, rho consistent,
    bounds (2, 3) unchanged: the second of two releases at (1, 1e-5) then composed to 0.9585
    instead of 1.4002."""
    a, b = _release(seed=1), _release(seed=2)
    assert accounting.budget(a, b).epsilon == pytest.approx(1.4002, abs=1e-4)
    doc = _doc(b)
    doc["privacy"]["sensitivity"] /= 10
    _cut_sensitivity(doc["privacy"]["cost"]["parts"][0], 0.1)
    with pytest.raises(ReleaseFormatError, match=r"privacy\.sensitivity 0\.72\d* does not match "
                                                 r"the bounds \(2, 3\).* 7\.211"):
        _load(tmp_path, doc)
    doc = _doc(b)  # the part alone
    _cut_sensitivity(doc["privacy"]["cost"]["parts"][0], 0.1)
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.sensitivity = 0\.72\d* is below "
                                                 r"7\.211\d*, the sensitivity of the file's "
                                                 r"bounds \(2, 3\)"):
        _load(tmp_path, doc)
    doc = _doc(b)  # the bounds with the sensitivity: the noise then exceeds the calibration
    doc["privacy"]["sensitivity"] /= 10
    doc["privacy"]["bounds"] = {"x": 2.0 / math.sqrt(10), "y": 3.0 / math.sqrt(10)}
    _cut_sensitivity(doc["privacy"]["cost"]["parts"][0], 0.1)
    forged = _load(tmp_path, doc)  # every field agrees with the others: the file loads, but
    assert forged.claim.epsilon == 1.0  # its claim stays the stated one, and a budget counts
    assert accounting.budget(a, forged).epsilon >= accounting.budget(a, b).epsilon  # no less
    assert accounting.budget_parts(forged)[0]["mechanism"] == accounting.CLAIM


def test_unknown_or_misplaced_mechanisms_are_refused(tmp_path):
    """Audit reproducer 3: a part with mechanism "laplace" (any string) and eps 0.1 in place of
    the statistics part was composed, 1.124 instead of 1.400 for two releases at (1, 1e-5)."""
    a, b = _release(seed=1), _release(seed=2)
    laplace = {"name": "statistics", "mechanism": "laplace", "epsilon": 0.1, "delta": 0.0,
               "rho": 0.005, "sensitivity": 1.0, "sigma": None,
               "dp_event": {"type": "ZCDpEvent", "rho": 0.005}}
    doc = _doc(b)
    doc["privacy"]["cost"]["parts"] = [laplace]
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.mechanism 'laplace' is not a "
                                                 r"mechanism bayesdp can account"):
        _load(tmp_path, doc)
    doc["privacy"]["cost"]["parts"] = [{**laplace, "mechanism": "exponential"}]
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.mechanism 'exponential' "
                                                 r"disagrees with the file's noise"):
        _load(tmp_path, doc)
    doc["privacy"]["cost"]["parts"] = [{**laplace, "mechanism": "exponential", "name": "x"},
                                       _doc(b)["privacy"]["cost"]["parts"][0]]
    with pytest.raises(ReleaseFormatError, match=r"privacy\.epsilon = 1\.0 claims more than "
                                                 r"the file's noise pays for: epsilon = 1\.1 "):
        _load(tmp_path, doc)  # an extra pure eps-DP part adds cost: the stated 1 is not met
    doc["privacy"]["epsilon"] = 1.1
    assert _load(tmp_path, doc).claim.epsilon == 1.1  # stated with it: accepted
    doc["privacy"]["cost"]["parts"] = [{**laplace, "mechanism": "exponential", "name": "x"}]
    with pytest.raises(ReleaseFormatError, match=r"has 0 'statistics' parts"):
        _load(tmp_path, doc)
    doc = _doc(b)
    doc["privacy"]["cost"]["parts"][0]["neighbouring"] = "replace-one"
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.neighbouring 'replace-one'"):
        _load(tmp_path, doc)
    doc = _doc(b)
    doc["privacy"]["cost"]["parts"][0]["mechanism"] = "discrete_gaussian"
    doc["privacy"]["cost"]["parts"][0]["dp_event"] = {"type": "ZCDpEvent",
                                                      "rho": b.privacy_cost[0]["rho"]}
    doc["privacy"]["cost"]["parts"][0]["epsilon"] = 1.2
    with pytest.raises(ReleaseFormatError, match=r"mechanism 'discrete_gaussian' disagrees"):
        _load(tmp_path, doc)


@pytest.fixture(scope="module")
def private_pair(sim):
    kw = dict(epsilon=EPS, delta=DELTA, bounds="private")
    return (bayesdp.release(sim.X, sim.y, seed=1, **kw),
            bayesdp.release(sim.X, sim.y, seed=2, **kw))


def test_a_missing_or_zeroed_bounds_part_is_still_counted(tmp_path, private_pair):
    """Audit reproducer 4: deleting the bounds part of a private-bounds release, or setting its
    epsilon to 0, made the budget forget the bounds estimate's 0.1: the release's claim stays
    the stated 1 and a budget counts at least that."""
    a, b = private_pair
    total = accounting.budget(a, b).epsilon
    doc = _doc(b)  # the part deleted: the release still claims 1, and a budget counts 1
    del doc["privacy"]["cost"]["parts"][0]
    cut = _load(tmp_path, doc)
    assert cut.claim.epsilon == EPS and cut.privacy_cost[0]["epsilon"] < EPS
    assert accounting.budget(a, cut).epsilon >= total
    doc = _doc(b)
    doc["privacy"]["cost"]["parts"][0].update(epsilon=0.0, rho=0.0)
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.dp_event: its epsilons add up"):
        _load(tmp_path, doc)
    for eps_b in (0.0, 0.05):  # the events forged along, rho as small as allowed
        doc = _doc(b)
        ev = {"type": "EpsilonDeltaDpEvent", "epsilon": eps_b / 2, "delta": 0.0}
        doc["privacy"]["cost"]["parts"][0].update(
            epsilon=eps_b, rho=eps_b**2 / 16, dp_event={"type": "ComposedDpEvent",
                                                        "events": [ev, dict(ev)]})
        forged = _load(tmp_path, doc)
        assert forged.claim.epsilon == EPS and accounting.budget(a, forged).epsilon >= total
    doc = _doc(b)
    doc["privacy"]["cost"]["parts"][0]["rho"] /= 4  # below what two eps/2 mechanisms prove
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.rho = .* understates"):
        _load(tmp_path, doc)
    doc = _doc(b)  # the estimate's own bounds must be the release's
    doc["privacy"]["cost"]["parts"][0]["bounds"]["x"] /= 2
    with pytest.raises(ReleaseFormatError, match=r"privacy\.bounds .* not the largest"):
        _load(tmp_path, doc)
    # a file without any record loads (as files written before it did) but its cost is
    # unknown: a budget refuses it rather than count 0.9
    doc = _doc(b)
    del doc["privacy"]["cost"]
    path = tmp_path / "no_record.json"
    path.write_text(json.dumps(doc))
    bare = bayesdp.load_release(path)
    (part,) = bare.privacy_cost
    assert part["epsilon"] < EPS and "the release's claim is the stated" in part["note"]
    assert bare.claim.epsilon == EPS and accounting.budget(a, bare).epsilon >= total
    # negative control: the files as written load and compose as before
    assert accounting.budget(a, _load(tmp_path, _doc(b))).epsilon == total


def test_other_records_that_claim_less_than_the_file_are_refused(tmp_path, sim):
    rel = _release()
    doc = _doc(rel)  # a smaller delta
    doc["privacy"]["cost"]["parts"][0]["delta"] = 1e-6
    doc["privacy"]["cost"]["parts"][0]["epsilon"] = 2.0
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.delta = 1e-06 disagrees with "
                                                 r"privacy\.delta = 1e-05"):
        _load(tmp_path, doc)
    doc = _doc(rel)  # a guarantee where the bounds were read off the data
    doc["privacy"]["bounds_from_data"] = True
    with pytest.raises(ReleaseFormatError, match=r"claims epsilon = 1\.0, but .* bounds were "
                                                 r"read off the data"):
        _load(tmp_path, doc)
    doc = _doc(rel)  # a design with a larger sensitivity
    doc["average_rows"] = 2
    for h in doc["holders"]:
        h["n_rows"], h["n"] = 2 * h["n"], h["n"]
    with pytest.raises(ReleaseFormatError, match=r"privacy\.sensitivity .*\(average_rows=2"):
        _load(tmp_path, doc)
    c = _quiet(_release, nodes=4, split="contiguous")  # the split's factor dropped
    doc = _doc(c)
    _cut_sensitivity(doc["privacy"]["cost"]["parts"][0], 1 / privacy_factor(c))
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.sensitivity .* contiguous split's "
                                                 r"factor"):
        _load(tmp_path, doc)
    s = _release(noise="secure", seed=None)  # secure noise: the grid, and sigma
    doc = _doc(s)
    doc["noise"]["grid"] /= 2  # the values are on the finer grid too
    with pytest.raises(ReleaseFormatError, match=r"noise\.grid .* disagrees with the grid"):
        _load(tmp_path, doc)
    doc = _doc(s)
    for h in doc["holders"]:
        h["sigma_s"] = h["sigma_z"] = h["sigma_s"] / 2
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.sigma .* holders\[0\]\.sigma_s"):
        _load(tmp_path, doc)


def privacy_factor(rel):
    return rel.privacy_cost[0]["sensitivity"] / rel.sensitivity


def test_a_secure_part_with_the_smallest_delta_is_refused_quickly(tmp_path):
    """Audit (B): delta = 5e-324 in a secure release's part made load_release loop for over a
    minute (zcdp_epsilon never returned); now the part is checked at once: its epsilon 1 is
    far below the 9.53 that its rho proves at that delta, and its delta is not the
    release's either."""
    import time

    doc = _doc(_release(noise="secure", seed=None))
    doc["privacy"]["cost"]["parts"][0]["delta"] = 5e-324
    start = time.perf_counter()
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.epsilon = 1\.0 understates the "
                                                 r"cost: .* gives epsilon = 9\.53\d* at delta = "
                                                 r"5e-324"):
        _load(tmp_path, doc)
    assert time.perf_counter() - start < 30
    doc["privacy"]["cost"]["parts"][0]["epsilon"] = 9.6  # consistent with itself: still refused
    with pytest.raises(ReleaseFormatError, match=r"parts\[0\]\.delta = 5e-324 disagrees with "
                                                 r"privacy\.delta = 1e-05"):
        _load(tmp_path, doc)


@pytest.mark.parametrize("edit, field", [
    (lambda d: d["privacy"]["cost"]["parts"][0].update(sensitivity=1e200),
     r"privacy\.cost\.parts\[0\]\.sensitivity must be a finite number of magnitude at most"),
    (lambda d: d.update(average_rows=2**70), r"'average_rows' must be at most 2\*\*53"),
    (lambda d: d["privacy"]["cost"]["parts"][0].update(epsilon=10**400),
     r"parts\[0\]\.epsilon must be a finite number .* 401-digit integer"),
    (lambda d: d["privacy"]["cost"]["parts"][0]["dp_event"].update(noise_multiplier=10**400),
     r"parts\[0\]\.dp_event\.noise_multiplier must be a finite number"),
    (lambda d: d["privacy"]["cost"]["parts"][0].update(sigma=1e-300),
     r"parts\[0\]\.rho = .* but the noise gives"),
])
def test_out_of_range_numbers_are_a_release_format_error(tmp_path, edit, field):
    """Audit (B): these raised OverflowError (not a ReleaseFormatError naming the field)."""
    doc = _doc(_release(average_rows=2))
    edit(doc)
    with pytest.raises(ReleaseFormatError, match=field):
        _load(tmp_path, doc)


def _field_paths(obj, path=()):
    """(path, value) of every field of a JSON document (the first two entries of arrays)."""
    if path:
        yield path, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _field_paths(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj[:2]):
            yield from _field_paths(v, path + (i,))


EXTREMES = [1e200, -1e149, 1e149, 5e-324, 0, -1, 2**70, 10**400, 1e-300]
WRONG_TYPES = ["x", "1.0", None, True, [], [1, 2], {}, {"x": 1}, "<deleted>"]


@pytest.mark.parametrize("kind", ["private_bounds", "secure", "contiguous"])
def test_every_field_of_a_file_at_its_extremes(tmp_path, sim, kind):
    """Every numeric field of a release file set to extreme values, and every field to values
    of the wrong type (or deleted), either loads or raises ReleaseFormatError, quickly: never
    OverflowError, ZeroDivisionError, TypeError or a hang."""
    import signal

    kw = {"private_bounds": dict(bounds="private", nodes=2, intercept=True, seed=1),
          "secure": dict(bounds=sim.bounds, noise="secure", include_yty=True, average_rows=2),
          "contiguous": dict(bounds=sim.bounds, nodes=3, split="contiguous", seed=1)}[kind]
    rows = slice(None) if kind == "private_bounds" else slice(0, 4000)
    rel = _quiet(bayesdp.release, sim.X[rows], sim.y[rows], epsilon=EPS, delta=DELTA, **kw)
    base = _doc(rel)

    def alarm(*_):
        raise TimeoutError

    old = signal.signal(signal.SIGALRM, alarm)
    try:
        for path, was in list(_field_paths(base)):
            numeric = isinstance(was, (int, float)) and not isinstance(was, bool)
            for value in (EXTREMES if numeric else []) + WRONG_TYPES:
                doc = copy.deepcopy(base)
                target = doc
                for key in path[:-1]:
                    target = target[key]
                if value == "<deleted>":
                    if not isinstance(target, dict):
                        continue
                    del target[path[-1]]
                else:
                    target[path[-1]] = value
                signal.alarm(20)
                try:
                    _load(tmp_path, doc)
                except ReleaseFormatError:
                    pass
                except Exception as exc:  # noqa: BLE001 - the point of the test
                    pytest.fail(f"{'.'.join(map(str, path))} = {value!r}: "
                                f"{type(exc).__name__}: {exc}")
                finally:
                    signal.alarm(0)
    finally:
        signal.signal(signal.SIGALRM, old)


# --------------------------------------------------------------------------------------------
# combine: the same holder's release given twice, even when its digits changed


def test_combine_refuses_a_copy_changed_by_one_ulp(tmp_path):
    """A copy of a holder's file whose S_hat[0][0] moved by one ulp used to be combined as a
    second holder (only byte-identical statistics were caught), doubling its rows and halving
    its noise in the posterior. Its noise draw is the same, so it is the same release."""
    a = _release(holder_name="hosp_a", seed=1)
    path_a = a.save(tmp_path / "a.json")
    doc = json.loads(path_a.read_text())
    h = doc["holders"][0]
    h["name"] = "hosp_copy"
    h["S_hat"][0][0] = math.nextafter(h["S_hat"][0][0], math.inf)
    copy_path = tmp_path / "copy.json"
    copy_path.write_text(json.dumps(doc))
    assert bayesdp.load_release(copy_path).S_hat[0, 0, 0] != a.S_hat[0, 0, 0]
    with pytest.raises(bayesdp.errors.CombineError,
                       match=r"holder 'hosp_copy' of release 1 .* same "
                             r"statistics .* holder 'hosp_a' of release 0"):
        bayesdp.combine_releases(str(path_a), str(copy_path))
    # every number rewritten with 12 significant digits (another program's printout)
    doc = json.loads(path_a.read_text())
    h = doc["holders"][0]
    h["name"] = "hosp_printed"
    h["S_hat"] = [[float(f"{v:.12g}") for v in row] for row in h["S_hat"]]
    h["z_hat"] = [float(f"{v:.12g}") for v in h["z_hat"]]
    printed = tmp_path / "printed.json"
    printed.write_text(json.dumps(doc))
    with pytest.raises(bayesdp.errors.CombineError, match="same statistics"):
        bayesdp.combine_releases(a, str(printed))
    # a budget refuses it as the same release given twice (instead of adding it up)
    with pytest.raises(bayesdp.BayesdpInputError, match="the same release is given twice"):
        accounting.budget(bayesdp.load_release(path_a), bayesdp.load_release(copy_path))


def test_different_holders_still_combine():
    """Negative control: holders with their own noise combine, also when their rows are the
    same (the same data released twice has two noise draws; only names can tell that) and
    when their statistics are close (a hundredth of the noise apart in every coordinate)."""
    a = _release(holder_name="a", seed=1)
    b = _release(holder_name="b", seed=2)  # the same rows, fresh noise
    c = bayesdp.combine_releases(a, b)
    assert c.J == 2 and c.holder_names == ("a", "b")
    sig = a.sigma_s[0]
    near = dataclasses_replace(a, S_hat=a.S_hat + 0.01 * sig, z_hat=a.z_hat + 0.01 * sig,
                               holder_names=("near",))
    assert bayesdp.combine_releases(a, near).J == 2
    assert accounting.same_release_pairs([a, b, near]) == []
    assert accounting.same_release_pairs([a, b, a]) == [((0, "a"), (2, "a"))]


def dataclasses_replace(rel, **kw):
    import dataclasses

    return dataclasses.replace(rel, **kw)
