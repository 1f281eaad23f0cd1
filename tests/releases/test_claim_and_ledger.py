"""A release file's privacy claim is what its noise pays for (Release.claim), an existing file
is never silently replaced, and a holder's ledger refuses a release past its cap (issue 53)."""

import hashlib
import json
import re

import numpy as np
import pytest

import bayesdp
from bayesdp import accounting, privacy
from bayesdp.cli import main
from bayesdp.errors import ReleaseFormatError
from bayesdp.releases import LedgerError

EPS, DELTA = 1.0, 1e-5


@pytest.fixture(scope="module")
def sim():
    return bayesdp.simulate(n=20_000, d=3, seed=1)


@pytest.fixture(scope="module")
def rel(sim):
    return bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds=sim.bounds, nodes=4,
                           seed=0)


def _doc(r):
    return json.loads(json.dumps(r.to_dict()))


def _write(tmp_path, doc, name="edited.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def _paid(r):
    """(sigma, sensitivity) the noise of ``r`` was really drawn at (all holders alike)."""
    return float(np.min(r.sigma_s)), float(r.sensitivity)


def _met(claim, sigma, sens):
    """The Gaussian mechanism of noise sigma at sensitivity sens is (eps, delta)-DP: its exact
    eps at delta (Balle & Wang 2018, Theorem 8) is at most eps."""
    return privacy.true_epsilon(sigma, claim.delta, sens) <= claim.epsilon * (1 + 1e-9)


def test_an_edited_epsilon_is_refused_or_recomputed(tmp_path, rel):
    doc = _doc(rel)
    doc["privacy"]["epsilon"] = 0.01
    path = _write(tmp_path, doc)
    with pytest.raises(ReleaseFormatError, match=r"privacy\.epsilon = 0\.01 claims more than the "
                                                 r"file's noise pays for: epsilon = 1 at delta "
                                                 r"= 1e-05"):
        bayesdp.load_release(path)
    back = bayesdp.load_release(path, strict=False)
    assert (back.claim.epsilon, back.claim.delta, back.claim.status) == (1.0, DELTA, "recomputed")
    assert not back.dp_claim_valid
    assert "epsilon=1, delta=1e-05 (recomputed" in repr(back)
    # the record swapped for one that accounts nothing, and the sensitivity it rests on gone:
    # nothing can verify the claim, so no number is reported
    doc["privacy"]["cost"] = {"parts": [accounting.unaccounted_part("edited")]}
    del doc["privacy"]["sensitivity"]
    blind = bayesdp.load_release(_write(tmp_path, doc, "blind.json"))
    assert blind.claim.status == "unverified" and blind.claim.epsilon is None
    assert "epsilon=0.01" not in repr(blind) and "0.01" in blind.claim.note
    # negative control: the file as written
    ok = bayesdp.load_release(_write(tmp_path, _doc(rel), "ok.json"))
    assert (ok.claim.epsilon, ok.claim.status, ok.dp_claim_valid) == (EPS, "verified", True)


def test_an_edited_delta_and_a_file_that_admits_its_claim_fails(tmp_path, rel):
    doc = _doc(rel)
    doc["privacy"]["delta"] = 1e-9
    with pytest.raises(ReleaseFormatError, match=r"privacy\.delta = 1e-09"):
        bayesdp.load_release(_write(tmp_path, doc))
    doc = _doc(rel)
    doc["privacy"]["epsilon"] = 0.5
    doc["privacy"]["dp_claim_valid"] = False  # the file says its claim fails: read, recomputed
    back = bayesdp.load_release(_write(tmp_path, doc))
    assert back.claim.status == "recomputed" and back.claim.epsilon == EPS


def test_a_weaker_written_claim_is_reported_as_written_and_counted(tmp_path, rel):
    doc = _doc(rel)
    doc["privacy"]["epsilon"] = 2.0
    back = bayesdp.load_release(_write(tmp_path, doc))
    assert (back.claim.epsilon, back.claim.status, back.dp_claim_valid) == (2.0, "verified", True)
    assert accounting.budget(back).epsilon == 2.0  # a budget counts the claim, not less
    assert accounting.budget(rel).epsilon == pytest.approx(EPS, rel=1e-12)  # negative control


def test_a_paper_code_release_reports_what_its_noise_pays_for(tmp_path, sim):
    with pytest.warns(UserWarning):
        r = bayesdp.release(sim.X, sim.y, epsilon=0.1, delta=DELTA, bounds=sim.bounds, seed=0,
                            calibration="paper-code")
    assert r.claim.status == "recomputed" and r.claim.epsilon > 0.5 and not r.dp_claim_valid
    back = bayesdp.load_release(r.save(tmp_path / "paper.json"))  # honest about it: loads
    assert back.claim == r.claim


def test_no_privacy_record_loads_without_a_claim(tmp_path, rel, capsys):
    doc = _doc(rel)
    del doc["privacy"]
    path = _write(tmp_path, doc)
    back = bayesdp.load_release(path)
    assert back.claim.status == "none" and not back.dp_claim_valid
    assert str(back.claim) == "no privacy claim" and "no privacy claim" in repr(back)
    out = tmp_path / "post.nc"
    assert main(["fit", str(path), "--out", str(out)]) == 0
    assert "no privacy claim" in capsys.readouterr().out
    from bayesdp import diagnostics

    attrs = diagnostics.attrs(diagnostics.load(out))
    assert attrs["dp_claim_valid"] == 0 and attrs["privacy_claim"] == "no privacy claim"
    assert attrs.get("epsilon") is None
    with pytest.raises(bayesdp.BayesdpInputError, match="no DP guarantee"):
        accounting.budget(back)


def test_fit_and_the_command_line_report_the_claim(tmp_path, rel, capsys):
    path = rel.save(tmp_path / "r.json")
    idata = bayesdp.fit(bayesdp.load_release(path), method="fast", seed=0)
    from bayesdp import diagnostics

    attrs = diagnostics.attrs(idata)
    assert (attrs["epsilon"], attrs["delta"], attrs["privacy_claim_status"]) == (EPS, DELTA,
                                                                                  "verified")
    doc = _doc(rel)
    doc["privacy"]["epsilon"] = 0.01
    assert main(["fit", str(_write(tmp_path, doc)), "--method", "fast"]) == 2
    assert "claims more than the file's noise pays for" in capsys.readouterr().err


_FIELDS = ("epsilon", "delta", "calibration", "bounds.x", "bounds.y", "sensitivity", "sigma_s",
           "sigma_z", "n", "mechanism", "dp_claim_valid", "bounds_from_data", "part.epsilon",
           "part.sigma", "part.sensitivity", "part.rho", "part.delta", "cost", "no_sensitivity",
           "unaccounted_part")


def _edit(doc, field, rng):
    """One random edit of ``field`` of a release file's dictionary."""
    pr = doc["privacy"]
    part = pr["cost"]["parts"][0] if "cost" in pr else None
    if field.startswith("part.") and (part is None or part.get(field[5:]) is None):
        field = "epsilon"  # nothing of the part to edit
    factor = float(rng.choice([1e-3, 0.1, 0.5, 0.9, 0.999, 1.001, 1.1, 2.0, 10.0, 1e3]))
    j = int(rng.integers(len(doc["holders"])))
    if field in ("epsilon", "delta", "sensitivity") and pr.get(field) is None:
        pr["epsilon"] = 0.01  # a claim typed into a file that lost its own
    elif field in ("epsilon", "delta", "sensitivity"):
        pr[field] = min(pr[field] * factor, 0.5) if field == "delta" else pr[field] * factor
    elif field == "calibration":
        pr[field] = str(rng.choice(["classical", "paper-code", "exact"]))
    elif field.startswith("bounds."):
        pr["bounds"][field[7:]] *= factor
    elif field in ("sigma_s", "sigma_z"):
        for h in (doc["holders"] if rng.random() < 0.5 else [doc["holders"][j]]):
            h[field] *= factor
    elif field == "n":
        doc["holders"][j]["n"] = max(1, int(doc["holders"][j]["n"] * factor))
    elif field == "mechanism":
        doc["noise"] = {"mechanism": "discrete_gaussian", "grid": 2.0 ** -10}
    elif field in ("dp_claim_valid", "bounds_from_data"):
        pr[field] = not pr[field]
    elif field == "part.rho":
        part["rho"] *= factor
    elif field == "part.delta":
        part["delta"] = min(part["delta"] * factor, 0.5)
    elif field.startswith("part."):
        key = field[5:]
        part[key] *= factor
        if key in ("sigma", "sensitivity"):  # kept consistent with itself, as a forger would
            part["rho"] = part["sensitivity"] ** 2 / (2 * part["sigma"] ** 2)
            part["dp_event"]["noise_multiplier"] = part["sigma"] / part["sensitivity"]
    elif field == "cost":
        del pr["cost"]
    elif field == "no_sensitivity":
        del pr["sensitivity"]
    elif field == "unaccounted_part":
        pr["cost"] = {"parts": [accounting.unaccounted_part("edited")]}


@pytest.mark.parametrize("strict", [True, False])
def test_no_edit_of_the_privacy_or_noise_fields_reports_a_claim_the_noise_does_not_pay(
        tmp_path, rel, strict):
    """Random edits of one or two fields of the privacy and noise sections: the file is
    refused, or the claim it reports (and a budget of it) is met by the noise really drawn."""
    rng = np.random.default_rng(53)
    sigma, sens = _paid(rel)
    outcomes = {"refused": 0, "loaded": 0}
    for trial in range(300):
        doc = _doc(rel)
        fields = rng.choice(_FIELDS, size=int(rng.integers(1, 3)), replace=False)
        for f in fields:
            _edit(doc, str(f), rng)
        path = _write(tmp_path, doc)
        try:
            back = bayesdp.load_release(path, strict=strict)
        except bayesdp.BayesdpInputError:
            outcomes["refused"] += 1
            continue
        outcomes["loaded"] += 1
        c = back.claim
        if c.status in ("none", "unverified"):  # no number is reported as paid for
            assert c.epsilon is None and c.delta is None, (list(fields), c)
            assert c.status == "unverified" or not back.dp_claim_valid, fields
            continue
        assert _met(c, sigma, sens), (list(fields), c)
        try:
            total = accounting.budget(back)
        except bayesdp.BayesdpInputError:
            continue
        assert _met(type(c)(total.epsilon, total.delta, "", ""), sigma, sens), (list(fields),
                                                                                total)
    assert outcomes["refused"] > 20 and outcomes["loaded"] > 20, outcomes  # both branches ran


def test_an_existing_file_is_never_replaced_silently(tmp_path, rel, sim, capsys):
    path = rel.save(tmp_path / "r.json")
    before = path.read_bytes()
    other = bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds=sim.bounds, seed=1)
    with pytest.raises(bayesdp.BayesdpInputError, match="exists and is kept"):
        other.save(path)
    assert path.read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # nothing left over
    other.save(path, overwrite=True)
    assert path.read_bytes() != before
    data = tmp_path / "data.csv"
    assert main(["simulate", "--n", "2000", "--d", "2", "--seed", "1", "--out", str(data)]) == 0
    out = tmp_path / "out.json"
    args = ["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "5", "5",
            "--out", str(out)]
    assert main(args) == 0
    kept = out.read_bytes()
    capsys.readouterr()
    assert main(args) == 2
    assert "exists and is kept as it is" in capsys.readouterr().err and out.read_bytes() == kept
    assert main(["combine", str(path), "--out", str(out)]) == 2 and out.read_bytes() == kept
    assert main(["simulate-network", "gossip", "--out", str(out)]) == 2
    assert out.read_bytes() == kept
    assert main(args + ["--force"]) == 0 and out.read_bytes() != kept


def test_a_ledger_refuses_a_release_past_its_cap_before_the_noise(tmp_path, sim, monkeypatch):
    kw = dict(epsilon=EPS, delta=DELTA, bounds=sim.bounds, nodes=2)
    ledger = tmp_path / "ledger.json"
    first = bayesdp.release(sim.X, sim.y, ledger=ledger, cap=1.3, **kw)
    before = ledger.read_bytes()
    entry = json.loads(before)["entries"][0]
    assert entry["sha256"] == hashlib.sha256(bayesdp.releases.files.release_text(first)
                                             .encode()).hexdigest()
    from bayesdp.releases import mechanism

    def no_noise(*a, **k):
        raise AssertionError("noise drawn for a refused release")

    with monkeypatch.context() as m:
        m.setattr(mechanism, "symmetric_noise", no_noise)
        with pytest.raises(LedgerError, match=r"total to epsilon = 1\.400\d* .* past the cap 1\.3;"
                                              r" .* fits up to epsilon = 0\.8\d"):
            bayesdp.release(sim.X, sim.y, ledger=ledger, cap=1.3, **kw)
    assert ledger.read_bytes() == before
    second = bayesdp.release(sim.X, sim.y, ledger=ledger, cap=2.5, **kw)
    led = bayesdp.Ledger(ledger)
    assert led.budget().epsilon == accounting.budget(first, second).epsilon  # as budget adds
    # what the message says fits does fit, and a bit more does not
    fits = bayesdp.Ledger(ledger, cap=1.6)
    with pytest.raises(LedgerError, match=r"fits up to epsilon = ") as err:
        bayesdp.release(sim.X, sim.y, ledger=fits, **kw)
    eps = float(re.search(r"fits up to epsilon = ([0-9]+\.[0-9]+)", str(err.value)).group(1))
    with pytest.raises(LedgerError):
        bayesdp.release(sim.X, sim.y, ledger=fits, **{**kw, "epsilon": eps * 1.01})
    bayesdp.release(sim.X, sim.y, ledger=fits, **{**kw, "epsilon": eps * 0.999})


def test_a_corrupted_or_edited_ledger_is_refused_and_kept(tmp_path, sim):
    ledger = tmp_path / "ledger.json"
    bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds=sim.bounds, ledger=ledger)
    doc = json.loads(ledger.read_text())
    doc["entries"][0]["parts"][0]["epsilon"] = 0.5
    ledger.write_text(json.dumps(doc))
    edited = ledger.read_bytes()
    with pytest.raises(LedgerError, match="edited or corrupted"):
        bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds=sim.bounds, ledger=ledger)
    assert ledger.read_bytes() == edited
    ledger.write_text(ledger.read_text()[:-40])
    with pytest.raises(LedgerError, match="cannot be read"):
        bayesdp.Ledger(ledger)
    with pytest.raises(bayesdp.BayesdpInputError, match="a cap needs a ledger"):
        bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds=sim.bounds, cap=1.0)


def test_the_ledger_from_the_shell(tmp_path, capsys):
    data = tmp_path / "data.csv"
    assert main(["simulate", "--n", "2000", "--d", "2", "--seed", "1", "--out", str(data)]) == 0
    ledger = tmp_path / "L.json"
    base = ["release", str(data), "--epsilon", "1", "--delta", "1e-5", "--bounds", "5", "5",
            "--ledger", str(ledger)]
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    assert main(base + ["--cap", "1.3", "--out", str(a)]) == 0
    before = ledger.read_bytes()
    capsys.readouterr()
    assert main(base + ["--cap", "1.3", "--out", str(b)]) == 2
    assert "past the cap 1.3" in capsys.readouterr().err
    assert not b.exists() and ledger.read_bytes() == before
    assert main(base + ["--cap", "2.5", "--out", str(b)]) == 0
    capsys.readouterr()
    assert main(["budget", "--ledger", str(ledger)]) == 0
    from_ledger = capsys.readouterr().out
    assert main(["budget", str(a), str(b)]) == 0
    assert capsys.readouterr().out == from_ledger  # the same table, labelled by the files
