"""Privacy cost records and budgets (bayesdp.accounting): the Gaussian part against its closed
forms and a Monte Carlo of the privacy loss, sequential composition against the analytic
Gaussian mechanism and the zCDP conversion (against dp_accounting and the exact Gaussian
profile), dp_accounting as an independent accountant, old files,
combining (parallel composition), and bad input."""

import copy
import dataclasses
import itertools
import json
import math
import sys

import numpy as np
import pytest
from scipy import stats

import bayesdp
import bayesdp.cli
from bayesdp import accounting, privacy
from bayesdp.errors import BayesdpInputError, CombineError, ReleaseFormatError
from bayesdp.privacy import analytic_gaussian_sigma, true_epsilon
from dp_helpers import delta_sz, rows_in_ball

EPS, DELTA = 1.0, 1e-5
BOUNDS = (2.0, 3.0)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(2024)
    return rows_in_ball(rng, 80, 3, *BOUNDS)


def rel(data, **kw):
    X, y = data
    kw.setdefault("epsilon", EPS)
    kw.setdefault("delta", DELTA)
    kw.setdefault("bounds", BOUNDS)
    kw.setdefault("seed", 0)
    kw.setdefault("include_yty", False)  # the paper's [S, z] release unless a test asks
    return bayesdp.release(X, y, **kw)


def save(tmp_path, r, name):
    return str(r.save(tmp_path / name))


# --------------------------------------------------------------------------------------------
# the Gaussian part of a release


def test_statistics_part_closed_form(data):
    """sigma = Delta sigma(eps, delta), rho = Delta^2 / (2 sigma^2), noise multiplier sigma/Delta;
    at (1, 1e-5) rho = 1 / (2 * 3.730632^2) = 0.0359257 (unit-sensitivity table of privacy.md)."""
    r = rel(data)
    (p,) = r.privacy_cost
    D = delta_sz(*BOUNDS)
    s = analytic_gaussian_sigma(EPS, DELTA)
    assert p["name"] == "statistics" and p["mechanism"] == "gaussian"
    assert p["epsilon"] == EPS and p["delta"] == DELTA and p["neighbouring"] == "add/remove"
    assert p["sensitivity"] == pytest.approx(D, rel=1e-14)
    assert p["sigma"] == pytest.approx(D * s, rel=1e-12)
    assert p["rho"] == pytest.approx(D**2 / (2 * (D * s) ** 2), rel=1e-12)
    assert p["rho"] == pytest.approx(1 / (2 * 3.730632**2), rel=1e-6)
    assert p["dp_event"] == {"type": "GaussianDpEvent", "noise_multiplier": pytest.approx(s)}
    assert p["note"] == ""


@pytest.mark.parametrize("kw", [dict(intercept=True), dict(average_rows=4),
                                dict(include_yty=True), dict(epsilon=0.3, delta=1e-8)])
def test_statistics_part_uses_the_release_sensitivity(data, kw):
    r = rel(data, **kw)
    (p,) = r.privacy_cost
    assert p["sensitivity"] == r.sensitivity and p["sigma"] == r.sigma_s[0]
    assert p["rho"] == pytest.approx(0.5 / analytic_gaussian_sigma(r.epsilon, r.delta) ** 2,
                                     rel=1e-12)
    assert p["epsilon"] == r.epsilon


def test_rho_is_the_renyi_divergence_over_alpha():
    """Monte Carlo: D_alpha(N(Delta, s^2) || N(0, s^2)) = alpha Delta^2 / (2 s^2), so rho-zCDP
    with rho = Delta^2 / (2 s^2). At alpha = 2, E_Q[(p/q)^2] = exp(2 rho); 10^6 draws, 5
    standard errors. Negative control: rho with sigma^2 in place of 2 sigma^2 is rejected."""
    D, sigma = 1.7, 4.2
    rho = accounting.gaussian_rho(sigma, D)
    x = np.random.default_rng(5).normal(0.0, sigma, 1_000_000)
    ratio2 = np.exp(2 * (x * D - D * D / 2) / sigma**2)
    mean, se = ratio2.mean(), ratio2.std() / math.sqrt(x.size)
    assert abs(mean - math.exp(2 * rho)) < 5 * se
    assert abs(mean - math.exp(2 * (D / sigma) ** 2)) > 5 * se


def test_paper_code_part_records_the_true_epsilon(data):
    """The authors' calibration at a stated (1, 1e-5) is really (2.781, 1e-5)-DP (privacy.md
    section 6); the part records that and says so."""
    with pytest.warns(UserWarning):
        r = rel(data, calibration="paper-code")
    (p,) = r.privacy_cost
    assert not r.dp_claim_valid
    assert p["epsilon"] == pytest.approx(true_epsilon(r.sigma_s[0], DELTA, r.sensitivity),
                                         rel=1e-12)
    assert p["epsilon"] == pytest.approx(2.781, abs=5e-4)
    assert "NOT met" in p["note"] and "true epsilon" in p["note"]


def test_classical_parts(data):
    """Classical sigma: at eps = 1 it gives more privacy (true eps 0.751), at eps = 10 less
    (10.39); both parts record the true eps (privacy.md section 5)."""
    (p1,) = rel(data, calibration="classical").privacy_cost
    with pytest.warns(UserWarning):
        (p10,) = rel(data, calibration="classical", epsilon=10.0).privacy_cost
    assert p1["epsilon"] == pytest.approx(0.751, abs=5e-4) and "more than" in p1["note"]
    assert p10["epsilon"] == pytest.approx(10.39, abs=5e-3) and "NOT met" in p10["note"]


def test_contiguous_part_is_the_whole_release_cost(data):
    """split='contiguous': the part's sensitivity is contiguous_split_change x Delta and its eps
    the true add/remove eps given in dp_claim_note."""
    with pytest.warns(UserWarning):
        r = rel(data, nodes=4, split="contiguous")
    (p,) = r.privacy_cost
    k = bayesdp.privacy.contiguous_split_change(80, 4)
    assert p["sensitivity"] == pytest.approx(k * r.sensitivity, rel=1e-14)
    assert p["epsilon"] == pytest.approx(true_epsilon(r.sigma_s[0], DELTA, k * r.sensitivity))
    assert f"only ({p['epsilon']:.4g}, {DELTA:g})-DP" in r.dp_claim_note


def test_data_bounds_part_has_no_guarantee(data):
    with pytest.warns(UserWarning):
        r = rel(data, bounds="data")
    (p,) = r.privacy_cost
    assert p["epsilon"] is None and p["rho"] is None
    assert p["dp_event"] == {"type": "NonPrivateDpEvent"} and "bounds were read" in p["note"]
    assert accounting.privacy_cost(r)["total"]["epsilon"] is None


# --------------------------------------------------------------------------------------------
# the file


def test_cost_round_trip(tmp_path, data):
    r = rel(data, intercept=True)
    path = save(tmp_path, r, "r.json")
    doc = json.load(open(path))
    cost = doc["privacy"]["cost"]
    assert cost["parts"] == [json.loads(json.dumps(p)) for p in r.privacy_cost]
    assert cost["total"]["epsilon"] == EPS and cost["total"]["rho"] == r.privacy_cost[0]["rho"]
    assert bayesdp.load_release(path).privacy_cost == r.privacy_cost


OLD_FILE = {  # written by bayesdp before privacy.cost existed (docs/release-format.md, v1)
    "format": "bayesdp-release", "format_version": 1, "d": 2, "feature_names": ["age", "income"],
    "holders": [{"name": "hospital-a", "n": 500, "S_hat": [[521.36, 81.99], [81.99, 499.58]],
                 "z_hat": [344.52, -152.65], "sigma_s": 95.55079136729475,
                 "sigma_z": 95.55079136729475}],
    "privacy": {"epsilon": 1.0, "delta": 1e-05, "calibration": "exact",
                "sensitivity": 25.612496949731394, "bounds": {"x": 4.0, "y": 5.0},
                "private_bounds": True, "dp_claim_valid": True, "dp_claim_note": ""},
    "noise": {"mechanism": "gaussian"},
    "provenance": {"created_by": "bayesdp 0.1.0", "source": "arrays", "seeded": False},
}


def _write(tmp_path, doc, name="f.json"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return str(p)


def test_old_file_derives_the_statistics_part(tmp_path):
    r = bayesdp.load_release(_write(tmp_path, OLD_FILE))
    (p,) = r.privacy_cost
    assert p["epsilon"] == 1.0 and p["delta"] == 1e-5 and p["mechanism"] == "gaussian"
    assert p["rho"] == pytest.approx(1 / (2 * analytic_gaussian_sigma(1, 1e-5) ** 2), rel=1e-9)
    assert "derived" in p["note"]
    b = accounting.budget(r)
    assert b.epsilon == pytest.approx(1.0, rel=1e-9)


def test_old_paper_code_and_data_bounds_files(tmp_path):
    """An old paper-code file gets the true eps of its sigma; an old file with data bounds no
    guarantee (and a budget refuses it, naming the file and field)."""
    doc = copy.deepcopy(OLD_FILE)
    s = privacy.paper_code_gaussian_sigma(1.0, 1e-5, 25.612496949731394)
    doc["holders"][0]["sigma_s"] = doc["holders"][0]["sigma_z"] = s
    doc["privacy"].update(calibration="paper-code", dp_claim_valid=False)
    (p,) = bayesdp.load_release(_write(tmp_path, doc)).privacy_cost
    assert p["epsilon"] == pytest.approx(2.781, abs=5e-4) and "NOT met" in p["note"]
    doc = copy.deepcopy(OLD_FILE)
    doc["privacy"]["private_bounds"] = False
    path = _write(tmp_path, doc, "databounds.json")
    assert bayesdp.load_release(path).privacy_cost[0]["epsilon"] is None
    with pytest.raises(BayesdpInputError, match=r"databounds.json: privacy.cost.parts\[0\]"):
        accounting.budget(bayesdp.load_release(path), labels=[path])


def test_docs_example_file_has_the_recorded_cost(tmp_path):
    """The example of docs/release-format.md carries privacy.cost; it loads and equals the part
    bayesdp derives from its epsilon, delta, sigma and sensitivity."""
    import pathlib
    import re

    md = pathlib.Path(__file__).resolve().parents[2] / "docs" / "release-format.md"
    doc = json.loads(re.search(r"```json\n(.*?)```", md.read_text(), re.S).group(1))
    r = bayesdp.load_release(_write(tmp_path, doc))
    del doc["privacy"]["cost"]
    (derived,) = bayesdp.load_release(_write(tmp_path, doc, "old.json")).privacy_cost
    (p,) = r.privacy_cost
    for key in ("epsilon", "delta", "rho", "sensitivity", "sigma"):
        assert p[key] == pytest.approx(derived[key], rel=1e-12)


@pytest.mark.parametrize("edit, field", [
    (lambda p: p.update(rho=p["rho"] / 2), r"parts\[0\].rho"),
    (lambda p: p.update(epsilon=0.5), r"parts\[0\].epsilon .* understates"),
    (lambda p: p["dp_event"].update(noise_multiplier=9.0), r"noise_multiplier"),
    (lambda p: p.update(delta=1.5), r"parts\[0\].delta"),
    (lambda p: p.update(epsilon="1"), r"parts\[0\].epsilon"),
    (lambda p: p.pop("dp_event"), r"parts\[0\].dp_event"),
    (lambda p: p.update(name=""), r"parts\[0\].name"),
    (lambda p: p.update(holders=["nobody"]), r"parts\[0\].holders"),
    (lambda p: p.update(epsilon=None), r"epsilon and delta"),
])
def test_bad_cost_in_file_is_refused(tmp_path, data, edit, field):
    doc = rel(data).to_dict()
    edit(doc["privacy"]["cost"]["parts"][0])
    with pytest.raises(ReleaseFormatError, match=field):
        bayesdp.load_release(_write(tmp_path, doc))


def test_empty_cost_parts_refused(tmp_path, data):
    doc = rel(data).to_dict()
    doc["privacy"]["cost"]["parts"] = []
    with pytest.raises(ReleaseFormatError, match="privacy.cost"):
        bayesdp.load_release(_write(tmp_path, doc))


# --------------------------------------------------------------------------------------------
# budgets: sequential composition


def test_composed_gaussian_total_is_the_analytic_gaussian(data):
    """Two Gaussian releases of one holder are one Gaussian mechanism with
    1/s^2 = 1/s_1^2 + 1/s_2^2: the total eps is the one whose analytic sigma is s, exactly."""
    a = rel(data, epsilon=1.0)
    b = rel(data, epsilon=0.5, intercept=True, seed=1)
    tot = accounting.budget(a, b, delta=1e-5)
    s = 1 / math.sqrt(1 / analytic_gaussian_sigma(1.0, 1e-5) ** 2
                      + 1 / analytic_gaussian_sigma(0.5, 1e-5) ** 2)
    assert analytic_gaussian_sigma(tot.epsilon, 1e-5) == pytest.approx(s, rel=1e-9)
    assert tot.rho == pytest.approx(a.privacy_cost[0]["rho"] + b.privacy_cost[0]["rho"],
                                    rel=1e-14)
    assert tot.delta == 1e-5
    # default delta: the sum of the parts' deltas
    assert accounting.budget(a, b).delta == pytest.approx(2e-5)


def test_docs_table_two_releases(data):
    """docs/privacy.md section 9: two releases at (1, 1e-5) at delta = 2e-5 cost 2 (basic),
    1.5326 (general zCDP conversion, rho = 0.07185), 1.4002 (zCDP, exact Gaussian); Bun &
    Steinke's looser conversion rho + 2 sqrt(rho log(1/delta)) would say 1.835."""
    a, b = rel(data), rel(data, seed=1)
    assert accounting.budget(a, b, accountant="basic").epsilon == pytest.approx(2.0)
    z = accounting.budget(a, b)
    assert z.rho == pytest.approx(0.07185, abs=1e-5)
    assert z.epsilon == pytest.approx(1.4002, abs=1e-4)
    assert accounting.zcdp_epsilon(z.rho, 2e-5) == pytest.approx(1.5326, abs=1e-4)
    assert z.rho + 2 * math.sqrt(z.rho * math.log(1 / 2e-5)) == pytest.approx(1.835, abs=1e-3)


def test_composed_total_monte_carlo(data):
    """The privacy loss of two Gaussian releases is L_1 + L_2, L_i ~ N(1/(2 s_i^2), 1/s_i^2)
    independent; delta(eps) = E[(1 - e^(eps - L))_+]. At the budget's eps (delta = 1e-3) a
    Monte Carlo with 2 x 10^6 draws gives delta within 5 standard errors. Negative control: the
    parallel value (the max, as if the releases were of different holders) is rejected."""
    dlt = 1e-3
    a = rel(data, epsilon=1.0, delta=dlt)
    b = rel(data, epsilon=0.7, delta=dlt, seed=3)
    tot = accounting.budget(a, b, delta=dlt)
    rng = np.random.default_rng(11)
    L = 0.0
    for r in (a, b):
        s = r.privacy_cost[0]["sigma"] / r.privacy_cost[0]["sensitivity"]
        L = L + rng.normal(1 / (2 * s * s), 1 / s, 2_000_000)

    def mc(eps):
        v = np.maximum(1 - np.exp(eps - L), 0.0)
        return v.mean(), v.std() / math.sqrt(v.size)

    m, se = mc(tot.epsilon)
    assert abs(m - dlt) < 5 * se
    m, se = mc(1.0)  # parallel composition: max(1.0, 0.7)
    assert m - dlt > 5 * se


def test_parallel_versus_sequential_negative_control(data):
    """Combining two holders (parallel) costs the max; budgeting the same two releases as ONE
    holder's (sequential) costs more. Counting a holder's two releases as parallel would
    understate its cost: the test sees the difference."""
    a = rel(data, epsilon=1.0, holder_name="hosp_a")
    b = rel(data, epsilon=1.0, seed=7, holder_name="hosp_b")
    par = accounting.privacy_cost(bayesdp.combine_releases(a, b))["total"]
    a2 = dataclasses.replace(b, holder_names=("hosp_a",))
    seq = accounting.budget(a, a2)
    assert par["epsilon"] == 1.0 and par["rho"] == a.privacy_cost[0]["rho"]
    assert seq.epsilon > 1.3 and seq.rho == pytest.approx(2 * par["rho"])
    s = analytic_gaussian_sigma(1.0, 1e-5) / math.sqrt(2)
    assert true_epsilon(s, seq.delta) == pytest.approx(seq.epsilon, rel=1e-9)
    assert true_epsilon(s, seq.delta) > par["epsilon"] + 0.3


def _pure_part(eps, rho=None, name="bounds"):
    """A hand-made pure eps-DP part (e.g. an exponential mechanism; rho = eps^2 / 2,
    Bun & Steinke 2016, Prop. 1.4, unless given)."""
    return {"name": name, "mechanism": "exponential", "epsilon": eps, "delta": 0.0,
            "rho": eps * eps / 2 if rho is None else rho, "sensitivity": 1.0, "sigma": None,
            "dp_event": {"type": "ZCDpEvent", "rho": eps * eps / 2 if rho is None else rho},
            "neighbouring": "add/remove", "note": ""}


def test_zcdp_conversion_with_a_non_gaussian_part(data):
    """With a non-Gaussian part the general zCDP conversion applies: rho_b = 0.1^2 / 2 = 0.005
    and rho_s = 1 / (2 * 3.7306316^2) = 0.0359257 (statistics at (1, 1e-5)) add up to
    rho = 0.0409257, and at delta = 1e-5 the conversion (Canonne, Kamath & Steinke 2020,
    Corollary 13) gives eps = 1.17258 (dp_accounting agrees, test_zcdp_epsilon_inverts_zcdp_delta)
    (Bun & Steinke's looser rho + 2 sqrt(rho ln 1e5) would be 1.4137)."""
    a = rel(data)
    both = dataclasses.replace(a, privacy_cost=(_pure_part(0.1), a.privacy_cost[0]))
    tot = accounting.budget(both)
    assert tot.rho == pytest.approx(0.0409257, abs=1e-7)
    assert tot.delta == pytest.approx(1e-5)
    assert tot.epsilon == pytest.approx(1.17258, abs=1e-5)
    assert tot.epsilon == accounting.zcdp_epsilon(tot.rho, 1e-5)
    assert 0.0409257 + 2 * math.sqrt(0.0409257 * math.log(1e5)) == pytest.approx(1.4137, abs=1e-4)
    # basic composition: 0.1 + 1, delta 1e-5; the record's total takes the smaller
    assert accounting.budget(both, accountant="basic").epsilon == pytest.approx(1.1)
    assert accounting.privacy_cost(both)["total"]["epsilon"] == pytest.approx(1.1)
    assert accounting.privacy_cost(both)["total"]["accountant"] == "basic"


def test_zcdp_with_a_part_without_rho(data):
    """A part with (eps, delta) but no rho is added by basic composition; its delta comes out
    of the total's delta before the zCDP conversion."""
    a = rel(data)
    p = {**_pure_part(0.2), "delta": 1e-6, "rho": None, "dp_event": {"type": "UnsupportedDpEvent"}}
    both = dataclasses.replace(a, privacy_cost=(p, a.privacy_cost[0]))
    tot = accounting.budget(both, delta=2e-5)
    exact = 0.2 + true_epsilon(a.sigma_s[0], 2e-5 - 1e-6, a.sensitivity)
    assert tot.epsilon == pytest.approx(exact, rel=1e-9) and tot.rho is None
    with pytest.raises(BayesdpInputError, match="delta"):
        accounting.budget(both, delta=1e-6)


def test_basic_composition(data):
    a = rel(data, epsilon=1.0)
    b = rel(data, epsilon=0.5, seed=2)
    tot = accounting.budget(a, b, accountant="basic")
    assert tot.epsilon == pytest.approx(1.5) and tot.delta == pytest.approx(2e-5)
    assert accounting.budget(a, b, accountant="basic", delta=1e-4).delta == 1e-4
    with pytest.raises(BayesdpInputError, match="delta=1e-05.*basic"):
        accounting.budget(a, b, accountant="basic", delta=1e-5)


# --------------------------------------------------------------------------------------------
# the zCDP conversion (Canonne, Kamath & Steinke 2020, Corollary 13)

FINE_ORDERS = 1.0 + np.geomspace(1e-3, 1e5, 20001)  # alpha - 1 with relative steps of 0.1%
RHOS = (1e-3, 0.01, 0.0359257, 0.1, 0.5, 2.0)
EPSILONS = (0.1, 0.5, 1.0, 3.0, 10.0)


def test_zcdp_delta_against_dp_accounting():
    """zcdp_delta is the infimum over every alpha > 1; dp_accounting's compute_delta takes the
    same bound at given orders (and a KL bound, which only wins for delta near 1, kept out
    here). On 20001 orders it is never below ours (1e-12 relative) and at most 2e-4 above
    (the order grid's spacing; measured 5.2e-5). Negative control: the plain Renyi conversion
    exp((alpha - 1)(alpha rho - eps)) without the factor (1 - 1/alpha)^(alpha - 1) / alpha is
    larger, so the same comparison would reject it."""
    pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_acc

    compared = 0
    for rho, eps in itertools.product(RHOS, EPSILONS):
        ours = accounting.zcdp_delta(rho, eps)
        if not 1e-300 < ours < 0.5:
            continue
        theirs, _ = rdp_acc.compute_delta(FINE_ORDERS, rho * FINE_ORDERS, eps)
        assert ours <= theirs * (1 + 1e-12) and theirs <= ours * (1 + 2e-4), (rho, eps)
        log_plain = np.min((FINE_ORDERS - 1) * (FINE_ORDERS * rho - eps))
        assert log_plain > math.log(theirs) + 0.01
        compared += 1
    assert compared >= 20


def test_zcdp_epsilon_inverts_zcdp_delta():
    """zcdp_epsilon(rho, delta) is the smallest eps with zcdp_delta <= delta (to 1e-9
    relative), agrees with dp_accounting's compute_epsilon on fine orders (at most 1e-6 above
    ours, never below), and is below Bun & Steinke's rho + 2 sqrt(rho log(1/delta))."""
    pytest.importorskip("dp_accounting")
    from dp_accounting.rdp import rdp_privacy_accountant as rdp_acc

    for rho, dlt in itertools.product(RHOS, (1e-3, 1e-5, 1e-10)):
        e = accounting.zcdp_epsilon(rho, dlt)
        assert accounting.zcdp_delta(rho, e) <= dlt < accounting.zcdp_delta(rho, e * (1 - 1e-9))
        theirs, _ = rdp_acc.compute_epsilon(FINE_ORDERS, rho * FINE_ORDERS, dlt)
        assert e * (1 - 1e-12) <= theirs <= e * (1 + 1e-6), (rho, dlt)
        assert e < rho + 2 * math.sqrt(rho * math.log(1 / dlt))
    assert accounting.zcdp_epsilon(0.0, 1e-5) == 0.0 and accounting.zcdp_delta(0.0, 1.0) == 0.0


def test_zcdp_conversion_is_valid_for_the_continuous_gaussian():
    """The continuous Gaussian mechanism with noise multiplier 1 / sqrt(2 rho) is rho-zCDP, so
    its exact delta (Balle & Wang 2018, privacy.gaussian_log_delta) must be at most
    zcdp_delta(rho, eps), for every (rho, eps). Negative control: a conversion that understates
    rho by 20% falls below the exact delta, and the check sees it (at (0.0359, 1): 5.6e-6 <
    1e-5)."""
    below = 0
    for rho in (1e-4, 1e-3, 0.01, 0.0359257, 0.1, 0.3, 1.0, 3.0):
        for eps in (0.05, 0.1, 0.3, 0.5, 1.0, 2.0, 3.0, 5.0):
            exact = math.exp(privacy.gaussian_log_delta(1 / math.sqrt(2 * rho), eps))
            if exact < 1e-300:
                continue
            assert exact <= accounting.zcdp_delta(rho, eps) * (1 + 1e-12), (rho, eps)
            below += accounting.zcdp_delta(0.8 * rho, eps) < exact
    assert below >= 10
    assert accounting.zcdp_delta(0.8 * 0.0359257, 1.0) < 1e-5 <= math.exp(
        privacy.gaussian_log_delta(analytic_gaussian_sigma(1.0, 1e-5), 1.0)) * (1 + 1e-9)


def test_zcdp_bad_input():
    for bad in (-1e-3, math.nan, math.inf, "x", None, True):
        with pytest.raises(BayesdpInputError, match="^rho"):
            accounting.zcdp_delta(bad, 1.0)
        with pytest.raises(BayesdpInputError, match="^rho"):
            accounting.zcdp_epsilon(bad, 1e-5)
    for bad in (-0.1, math.nan, math.inf, "x", None):
        with pytest.raises(BayesdpInputError, match="^epsilon"):
            accounting.zcdp_delta(0.1, bad)
    for bad in (0.0, 1.0, -1e-5, math.nan):
        with pytest.raises(BayesdpInputError, match="^delta"):
            accounting.zcdp_epsilon(0.1, bad)


def test_zcdp_event_round_trip():
    """A secure release's dp_event {"type": "ZCDpEvent", "rho": rho} rebuilds as
    dp_accounting's ZCDpEvent; its RDP accountant composes it (RDP alpha rho) and two of them
    cost what rho-zCDP with twice rho costs."""
    dpa = pytest.importorskip("dp_accounting")
    ev = accounting.to_dp_event({"type": "ZCDpEvent", "rho": 0.0359257})
    assert isinstance(ev, dpa.ZCDpEvent) and ev.rho == 0.0359257 and ev.xi == 0.0
    acc = dpa.rdp.RdpAccountant()
    acc.compose(ev, 2)
    ours = accounting.zcdp_epsilon(2 * 0.0359257, 1e-5)
    assert ours <= acc.get_epsilon(1e-5) <= ours * (1 + 1e-3)


# --------------------------------------------------------------------------------------------
# dp_accounting as an independent accountant


def test_dp_accounting_cross_check(tmp_path, data):
    """The DpEvent rebuilt from the file's dp_event: dp_accounting's PLD accountant
    (pessimistic, 1e-4 discretisation) gives eps at most 1e-3 above ours, never below by more
    than 1e-6 (ours is exact); its RDP accountant a valid but looser bound, within 15% above.
    For two releases composed the same holds for the composed event, and for our accountant
    'pld'."""
    dpa = pytest.importorskip("dp_accounting")
    from dp_accounting import pld, rdp

    a = rel(data, epsilon=1.0)
    b = rel(data, epsilon=0.5, seed=1, intercept=True)
    pa, pb = save(tmp_path, a, "a.json"), save(tmp_path, b, "b.json")
    events = [accounting.to_dp_event(json.load(open(p))["privacy"]["cost"]["parts"][0]["dp_event"])
              for p in (pa, pb)]
    assert isinstance(events[0], dpa.GaussianDpEvent)
    cases = [(events[0], 1e-5, 1.0),
             (dpa.ComposedDpEvent(events), 2e-5, accounting.budget(a, b).epsilon)]
    for ev, dlt, ours in cases:
        acc = pld.PLDAccountant()
        acc.compose(ev)
        e_pld = acc.get_epsilon(dlt)
        assert -1e-6 <= e_pld - ours <= 1e-3
        acc = rdp.RdpAccountant()
        acc.compose(ev)
        e_rdp = acc.get_epsilon(dlt)
        assert ours <= e_rdp <= 1.15 * ours
    ours_pld = accounting.budget(a, b, accountant="pld")
    assert -1e-6 <= ours_pld.epsilon - cases[1][2] <= 1e-3
    # dp_accounting's exact Gaussian eps of the composed noise multiplier 1 / sqrt(2 rho)
    s_eff = 1 / math.sqrt(2 * accounting.budget(a, b).rho)
    assert dpa.get_epsilon_gaussian(s_eff, 2e-5) == pytest.approx(cases[1][2], rel=1e-9)
    # dp_accounting's RDP accountant converts a ZCDpEvent by the same bound, on its default
    # orders: at least our eps (the infimum over every alpha > 1), at most 1e-3 (relative) above
    acc = rdp.RdpAccountant()
    acc.compose(dpa.ZCDpEvent(0.05))
    ours = accounting.zcdp_epsilon(0.05, 1e-5)
    assert ours <= acc.get_epsilon(1e-5) <= ours * (1 + 1e-3)
    # a deliberately wrong event (noise multiplier halved) is seen as a different cost
    acc = pld.PLDAccountant()
    acc.compose(dpa.GaussianDpEvent(events[0].noise_multiplier / 2))
    assert acc.get_epsilon(1e-5) > 1.5


def test_pld_with_a_pure_part(data):
    """A pure eps-DP part enters the PLD accountant as the worst case of its (eps, 0); the
    result lies between the exact Gaussian alone and the basic sum."""
    pytest.importorskip("dp_accounting")
    a = rel(data)
    both = dataclasses.replace(a, privacy_cost=(_pure_part(0.1), a.privacy_cost[0]))
    e = accounting.budget(both, accountant="pld").epsilon
    assert 1.0 < e <= 1.1 + 1e-3


def test_pld_without_dp_accounting_says_so(data, monkeypatch):
    monkeypatch.setitem(sys.modules, "dp_accounting", None)
    with pytest.raises(BayesdpInputError, match="pip install dp-accounting"):
        accounting.budget(rel(data), accountant="pld")
    with pytest.raises(BayesdpInputError, match="pip install dp-accounting"):
        accounting.to_dp_event({"type": "GaussianDpEvent", "noise_multiplier": 1.0})


def test_to_dp_event_refuses_unknown_types():
    pytest.importorskip("dp_accounting")
    with pytest.raises(BayesdpInputError, match="EpsilonDeltaDpEvent"):
        accounting.to_dp_event({"type": "EpsilonDeltaDpEvent", "epsilon": 1, "delta": 0})
    with pytest.raises(BayesdpInputError, match="dp_event"):
        accounting.to_dp_event({"type": "GaussianDpEvent", "sigma": 1.0})


# --------------------------------------------------------------------------------------------
# combining (parallel composition)


def test_combine_keeps_equal_costs_and_tags_different_ones(tmp_path, data):
    """Equal costs are kept as they are; different costs are tagged with their holders, and the
    total is the largest holder's (here holder a with a bounds part), not the sum."""
    a = rel(data, holder_name="hosp_a")
    b = rel(data, seed=4, holder_name="hosp_b")
    c = bayesdp.combine_releases(a, b)
    assert c.privacy_cost == a.privacy_cost
    a_b = dataclasses.replace(a, privacy_cost=(_pure_part(0.1), a.privacy_cost[0]))
    c = bayesdp.combine_releases(a_b, b)
    assert [p.get("holders") for p in c.privacy_cost] == [["hosp_a"], ["hosp_a"], ["hosp_b"]]
    tot = accounting.privacy_cost(c)["total"]
    assert tot == accounting.privacy_cost(a_b)["total"]
    back = bayesdp.load_release(save(tmp_path, c, "c.json"))
    assert back.privacy_cost == c.privacy_cost
    # a budget of the combined release with itself re-released: sequential over releases,
    # parallel (max) inside each
    c2 = bayesdp.combine_releases(rel(data, seed=8, holder_name="hosp_a"),
                                  rel(data, seed=9, holder_name="hosp_b"))
    bud = accounting.budget(c, c2, accountant="basic")
    assert bud.epsilon == pytest.approx(1.1 + 1.0)


def test_combine_refuses_mixed_neighbouring(tmp_path, data):
    a = rel(data, holder_name="hosp_a")
    p = {**a.privacy_cost[0], "neighbouring": "replace-one"}
    b = dataclasses.replace(rel(data, seed=4, holder_name="hosp_b"), privacy_cost=(p,))
    with pytest.raises(CombineError, match=r"neighbouring"):
        bayesdp.combine_releases(a, b)
    pa, pb = save(tmp_path, a, "a.json"), save(tmp_path, b, "b.json")
    out = tmp_path / "c.json"
    assert bayesdp.cli.main(["combine", pa, pb, "--out", str(out)]) == 2
    assert not out.exists()


# --------------------------------------------------------------------------------------------
# what a budget refuses


def test_budget_refuses(tmp_path, data):
    a = rel(data, holder_name="hosp_a")
    b = rel(data, seed=1, holder_name="hosp_b")
    with pytest.raises(BayesdpInputError, match=r"holder_names .*hosp_b.* ONE holder"):
        accounting.budget(a, b)
    with pytest.raises(BayesdpInputError, match="same release is given twice"):
        accounting.budget(a, a)
    p = {**a.privacy_cost[0], "neighbouring": "replace-one"}
    a2 = dataclasses.replace(rel(data, seed=2, holder_name="hosp_a"), privacy_cost=(p,))
    with pytest.raises(BayesdpInputError, match=r"parts\[0\].neighbouring"):
        accounting.budget(a, a2)
    for bad in (0.0, 1.0, -1e-5, float("nan")):
        with pytest.raises(BayesdpInputError, match="delta"):
            accounting.budget(a, delta=bad)
    with pytest.raises(BayesdpInputError, match="accountant"):
        accounting.budget(a, accountant="rdp")
    with pytest.raises(BayesdpInputError, match="file path; read it with bayesdp.load_release"):
        accounting.budget(save(tmp_path, a, "a.json"))
    with pytest.raises(BayesdpInputError, match="labels must be 2 strings"):
        accounting.budget(a, a, labels=["only one"])
    with pytest.raises(BayesdpInputError, match="at least one"):
        accounting.budget()
    # no stated claim, so that the budget counts the pure part itself (budget_parts)
    only_pure = dataclasses.replace(a, privacy_cost=(_pure_part(0.5),), epsilon=None, delta=None)
    with pytest.raises(BayesdpInputError, match="delta"):
        accounting.budget(only_pure)
    assert accounting.budget(only_pure, delta=1e-6).epsilon == accounting.zcdp_epsilon(0.125, 1e-6)
    assert accounting.budget(only_pure, accountant="basic").epsilon == 0.5


def test_network_adapter_releases_are_unaccounted(data):
    """A network protocol's guarantee is not a Gaussian mechanism on the statistics: its part
    says so and a budget refuses it."""
    from bayesdp.adapters import consensus

    X, y = data
    adj = np.ones((6, 6)) - np.eye(6)  # one row per agent (Alg. 3)
    sim = consensus.consensus_release(adj, X[:6], y[:6], eps=1.0, bound_x=BOUNDS[0],
                                      bound_y=BOUNDS[1], seed=0, T=5)
    (p,) = sim.release.privacy_cost
    assert p["mechanism"] == "unaccounted" and "not accounted" in p["note"]
    with pytest.raises(BayesdpInputError, match="unaccounted"):
        accounting.budget(sim.release)


# --------------------------------------------------------------------------------------------
# the command line


def test_cli_budget(tmp_path, data, capsys):
    a = save(tmp_path, rel(data, holder_name="hosp"), "a.json")
    b = save(tmp_path, rel(data, seed=5, intercept=True, epsilon=0.5, holder_name="hosp"),
             "b.json")
    assert bayesdp.cli.main(["budget", a, b]) == 0
    out = capsys.readouterr().out
    assert "total (zcdp)" in out and "statistics" in out and "a.json" in out
    res = accounting.budget(bayesdp.load_release(a), bayesdp.load_release(b))
    assert f"{res.epsilon:.6g}" in out
    out_json = tmp_path / "budget.json"
    assert bayesdp.cli.main(["budget", a, b, "--json", "--accountant", "basic", "--delta",
                             "1e-4", "--out", str(out_json)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["total"]["epsilon"] == pytest.approx(1.5) and doc["total"]["delta"] == 1e-4
    assert json.loads(out_json.read_text()) == doc


def test_cli_budget_errors_write_nothing(tmp_path, data, capsys):
    a = save(tmp_path, rel(data, holder_name="hosp_a"), "a.json")
    b = save(tmp_path, rel(data, seed=1, holder_name="hosp_b"), "b.json")
    out = tmp_path / "budget.json"
    for args in ([a, b], [a, "--delta", "2"], [a, str(tmp_path / "nope.json")],
                 [a, "--accountant", "basic", "--delta", "1e-6"]):
        assert bayesdp.cli.main(["budget", *args, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("bayesdp budget: error:") and len(err.strip().splitlines()) == 1
        assert not out.exists()
