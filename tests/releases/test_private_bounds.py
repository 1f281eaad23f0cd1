"""Private bounds (``bounds="private"``, docs/privacy.md section 11): the exponential mechanism's
output distribution against its closed form, the utility's sensitivity by brute force, the
estimate on large n, the composition of the two parts (also against dp_accounting's PLD), the
release file, combining, the command line and bad input."""

import json
import math

import numpy as np
import pytest
from scipy import special, stats

import bayesdp
from bayesdp import accounting, privacy
from bayesdp.cli import main
from bayesdp.errors import BayesdpInputError, CombineError

EPS, DELTA = 1.0, 1e-5


def brute_counts_above(values, grid):
    """c_k = #{i : v_i > b_k}, counted directly."""
    v = np.asarray(values, dtype=float)
    return np.array([int(np.sum(v > b)) for b in grid])


def brute_utility(values, grid, m):
    """-max(0, c_k - (m - 1), m - c_{k-1}) from the definition, with c_{-1} = n and no value
    counted above the top candidate (its cell reaches to infinity)."""
    c = brute_counts_above(values, grid)
    prev = np.concatenate([[len(values)], c[:-1]])
    c[-1] = 0
    return np.array([-max(0, c[k] - (m - 1), m - prev[k]) for k in range(len(grid))], float)


def em_probabilities(utility, eps):
    """exp(eps u / 2) normalised (utility sensitivity 1), written out independently."""
    w = np.exp(eps * (utility - utility.max()) / 2.0)
    return w / w.sum()


def histogram(values_x, values_y, grid):
    """A BoundsHistogram fed with rows whose ||x|| and |y| are the given values."""
    h = privacy.BoundsHistogram(grid)
    X = np.asarray(values_x, dtype=float)[:, None]
    h.add(X, np.asarray(values_y, dtype=float))
    return h


@pytest.fixture
def small():
    """A known data set of 200 values and a public grid from 0.1 to 100 (61 candidates)."""
    rng = np.random.default_rng(7)
    grid = privacy.bounds_grid((0.1, 100.0))
    vx = np.exp(rng.normal(0.5, 0.6, size=200))
    vy = np.exp(rng.normal(0.0, 0.4, size=200))
    return grid, vx, vy


# --------------------------------------------------------------------------------------------
# the mechanism


def test_grid_and_target_rank():
    grid = privacy.bounds_grid()
    assert len(grid) == 301 and grid[0] == pytest.approx(1e-6) and grid[-1] == pytest.approx(1e9)
    np.testing.assert_allclose(grid[1:] / grid[:-1], 10 ** (1 / 20), rtol=1e-12)
    # m = ceil(2 ln(K / beta) / eps): at eps = 1, share 0.1 each bound gets 0.05
    assert privacy.bounds_target_rank(0.05, 301) == math.ceil(2 * math.log(301 / 1e-3) / 0.05)
    assert privacy.bounds_target_rank(0.05, 301) == 505


def test_counts_and_utility_match_the_definition(small):
    grid, vx, vy = small
    h = histogram(vx, vy, grid)
    np.testing.assert_array_equal(h.counts_above("x"), brute_counts_above(vx, grid))
    np.testing.assert_array_equal(h.counts_above("y"), brute_counts_above(vy, grid))
    for m in (1, 7, 23, 50):
        np.testing.assert_array_equal(privacy.top_rank_utility(h.counts_above("x"), 200, m),
                                      brute_utility(vx, grid, m))
    # utility 0 exactly at the cell holding the m-th largest value, and nowhere else
    m = 23
    u = brute_utility(vx, grid, m)
    k = int(np.argmax(u))
    v_m = np.sort(vx)[::-1][m - 1]
    assert u[k] == 0 and np.sum(u == 0) == 1 and grid[k - 1] < v_m <= grid[k]


def test_em_log_probabilities_closed_form(small):
    grid, vx, _ = small
    u = brute_utility(vx, grid, 23)
    for eps in (0.1, 1.0, 4.0):
        lp = privacy.exponential_mechanism_log_probabilities(u, eps)
        np.testing.assert_allclose(np.exp(lp), em_probabilities(u, eps), rtol=1e-12, atol=1e-300)
        assert special.logsumexp(lp) == pytest.approx(0.0, abs=1e-12)


def _draws(h, eps, n_draws, seed):
    rng = np.random.default_rng(seed)
    out = np.array([privacy.estimate_bounds(h, eps, rng)[0] for _ in range(n_draws)])
    idx = np.searchsorted(h.grid, out)  # exact grid values
    assert np.all(h.grid[idx] == out)
    return idx


def _chi2_pvalue(idx, p):
    """Chi-square goodness of fit of candidate indices against probabilities p, cells with an
    expected count below 5 pooled into one."""
    n = len(idx)
    obs = np.bincount(idx, minlength=len(p)).astype(float)
    big = p * n >= 5
    o = np.append(obs[big], obs[~big].sum())
    e = np.append(p[big] * n, p[~big].sum() * n)
    if e[-1] == 0:
        o, e = o[:-1], e[:-1]
    return stats.chisquare(o, e).pvalue


def test_em_output_distribution_matches_exact_probabilities(small):
    """8,000 draws of each bound against the closed-form exponential-mechanism probabilities
    (chi-square, p > 1e-3); the same draws reject the distribution of a mechanism without the
    factor 2 (exp(eps u) instead of exp(eps u / 2)), which is not eps-DP (p < 1e-6)."""
    grid, vx, vy = small
    eps = 2.0  # total for the two bounds: eps/2 = 1 each
    h = histogram(vx, vy, grid)
    m = privacy.bounds_target_rank(eps / 2, len(grid))
    assert m == math.ceil(2 * math.log(61 / 1e-3)) == 23 and 4 * m <= len(vx)
    idx = _draws(h, eps, 8_000, seed=11)
    for j, v in enumerate((vx, vy)):
        u = brute_utility(v, grid, m)
        assert _chi2_pvalue(idx[:, j], em_probabilities(u, eps / 2)) > 1e-3
        assert _chi2_pvalue(idx[:, j], em_probabilities(u, 2 * (eps / 2))) < 1e-6


def test_sampler_over_a_spread_distribution(small):
    """The sampler alone at a small eps, where the probability spreads over many candidates:
    20,000 draws against the closed form (chi-square, p > 1e-3), and a negative control at
    1.5 eps rejected (p < 1e-6)."""
    grid, vx, _ = small
    u = brute_utility(vx, grid, 23)
    eps = 0.1
    lp = privacy.exponential_mechanism_log_probabilities(u, eps)
    p = em_probabilities(u, eps)
    assert np.sum(p * 20_000 >= 5) >= 20
    rng = np.random.default_rng(12)
    idx = np.array([privacy._sample_index(lp, rng) for _ in range(20_000)])
    assert _chi2_pvalue(idx, p) > 1e-3
    assert _chi2_pvalue(idx, em_probabilities(u, 1.5 * eps)) < 1e-6


def test_utility_sensitivity_by_brute_force(small):
    """Every neighbour (each row removed; a row added below, inside and above the grid and at
    every grid point) changes every utility by at most 1, and some by exactly 1; so the
    mechanism's log-probabilities move by at most eps (its eps-DP), by more than the eps / 2 of
    one weight alone. Negative control: a mechanism that assumes sensitivity 1/2 (exp(eps u))
    moves them by more than eps."""
    grid, vx, _ = small
    v = vx[:60]
    m, eps = 5, 1.0
    base_u = brute_utility(v, grid, m)
    added = np.concatenate([[0.0, 0.05, 1e3], grid, grid * 1.0001])  # below, above the range
    neighbours = [np.delete(v, i) for i in range(len(v))] + [np.append(v, a) for a in added]
    worst_u, worst_lp, worst_wrong = 0.0, 0.0, 0.0
    lp0 = privacy.exponential_mechanism_log_probabilities(base_u, eps)
    wrong0 = np.log(em_probabilities(base_u, 2 * eps))
    for w in neighbours:
        u = brute_utility(w, grid, m)
        worst_u = max(worst_u, float(np.max(np.abs(u - base_u))))
        lp = privacy.exponential_mechanism_log_probabilities(u, eps)
        worst_lp = max(worst_lp, float(np.max(np.abs(lp - lp0))))
        worst_wrong = max(worst_wrong, float(np.max(np.abs(np.log(em_probabilities(u, 2 * eps))
                                                           - wrong0))))
    assert worst_u == 1.0
    assert 0.5 * eps < worst_lp <= eps + 1e-12  # one utility step moves a weight by eps / 2
    assert worst_wrong > eps


def test_symmetric_quantile_utility_is_not_robust_negative_control():
    """Why the utility scores a candidate's whole cell: with -|c_k - m| a coarse grid leaves
    no candidate near m, the best has utility -(hundreds), and candidates above every row
    (utility -m) then get a large probability. On the same data the cell utility puts
    probability below beta on them."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200_000, 3))
    grid = privacy.bounds_grid()
    h = privacy.BoundsHistogram(grid)
    h.add(X, np.zeros(len(X)))
    m = privacy.bounds_target_rank(0.05, len(grid))
    c = h.counts_above("x")
    above_all = c == 0
    p_sym = em_probabilities(-np.abs(c - m).astype(float), 0.05)
    p_cell = em_probabilities(privacy.top_rank_utility(c, h.n, m), 0.05)
    assert p_sym[above_all].sum() > 0.05
    assert p_cell[above_all].sum() < privacy.PRIVATE_BOUNDS_BETA


def test_estimate_near_the_target_on_large_n():
    """200,000 rows: the estimate is the upper edge of the grid cell of the m-th largest
    ||x|| (|y|), so it clips fewer than m rows and is at most one grid step (x 1.122) above
    that value, in 10 of 10 seeded releases (each fails with probability <= 2 beta)."""
    rng = np.random.default_rng(3)
    n = 200_000
    X = rng.normal(size=(n, 3))
    y = X @ np.array([1.0, -0.5, 0.3]) + rng.normal(size=n)
    m = privacy.bounds_target_rank(EPS * 0.1 / 2, 301)
    nx = np.sort(np.linalg.norm(X, axis=1))[::-1]
    ny = np.sort(np.abs(y))[::-1]
    step = 10 ** (1 / 20)
    for seed in range(10):
        r = bayesdp.release(X, y, epsilon=EPS, delta=DELTA, bounds="private", seed=seed)
        for b, v in zip(r.bounds, (nx, ny)):
            assert v[m - 1] <= b < v[m - 1] * step * (1 + 1e-12)
            assert np.sum(v > b) < m


def test_values_above_the_range_are_clipped_to_its_top():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 2)) * 1e12
    y = rng.normal(size=3000)
    r = bayesdp.release(X, y, epsilon=5.0, delta=DELTA, bounds="private", seed=0)
    assert r.bounds[0] == pytest.approx(1e9)
    assert np.all(r.n_clipped == 3000)


# --------------------------------------------------------------------------------------------
# accounting


@pytest.fixture(scope="module")
def sim():
    return bayesdp.simulate(8000, 3, seed=2)


@pytest.mark.parametrize("share", [0.1, 0.3])
def test_total_accounting_is_the_stated_composition(sim, share):
    r = bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds="private", nodes=3,
                        bounds_share=share, seed=1, include_yty=False)
    bpart, spart = r.privacy_cost
    assert (bpart["name"], bpart["mechanism"]) == ("bounds", "exponential")
    assert (spart["name"], spart["mechanism"]) == ("statistics", "gaussian")
    assert bpart["epsilon"] == pytest.approx(share * EPS, rel=1e-15) and bpart["delta"] == 0.0
    assert spart["epsilon"] == pytest.approx((1 - share) * EPS, rel=1e-14)
    assert bpart["epsilon"] + spart["epsilon"] <= EPS and spart["delta"] == DELTA
    assert (r.epsilon, r.delta) == (EPS, DELTA) and r.dp_claim_valid and not r.bounds_from_data
    # the statistics: analytic Gaussian at eps (1 - share), at the sensitivity of the bounds
    sens = privacy.sensitivity_sz(*r.bounds)
    sigma = privacy.analytic_gaussian_sigma(spart["epsilon"], DELTA, sens)
    np.testing.assert_allclose(r.sigma_s, sigma, rtol=1e-12)
    assert r.sensitivity == pytest.approx(sens, rel=1e-14)
    assert sigma > privacy.analytic_gaussian_sigma(EPS, DELTA, sens) * (1 + share / 2)
    # zCDP: the two eps/2 exponential mechanisms (eps/2)^2/8 each; the Gaussian Delta^2/2sigma^2
    assert bpart["rho"] == pytest.approx(2 * (share * EPS / 2) ** 2 / 8, rel=1e-14)
    assert spart["rho"] == pytest.approx(sens**2 / (2 * sigma**2), rel=1e-12)
    assert spart["dp_event"] == {"type": "GaussianDpEvent",
                                 "noise_multiplier": pytest.approx(sigma / sens, rel=1e-12)}
    # the file's total: the smaller of basic composition (the parts' eps add up to EPS) and
    # zCDP (rho adds, converted at the same delta); never above the stated EPS
    assert bpart["epsilon"] + spart["epsilon"] == pytest.approx(EPS, rel=1e-15)
    total = r.to_dict()["privacy"]["cost"]["total"]
    assert total["epsilon"] <= EPS and total["delta"] == DELTA
    assert total["rho"] == pytest.approx(bpart["rho"] + spart["rho"], rel=1e-15)


def _pld(event):
    """A dp_accounting PLD from a part's dp_event dict: EpsilonDeltaDpEvent by the dominating
    pair of (eps, delta)-DP, GaussianDpEvent at sensitivity 1 (add/remove one)."""
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as P

    if event["type"] == "ComposedDpEvent":
        plds = [_pld(e) for e in event["events"]]
        out = plds[0]
        for p in plds[1:]:
            out = out.compose(p)
        return out
    if event["type"] == "EpsilonDeltaDpEvent":
        return P.from_privacy_parameters(
            common.DifferentialPrivacyParameters(event["epsilon"], event["delta"]))
    if event["type"] == "GaussianDpEvent":
        return P.from_gaussian_mechanism(event["noise_multiplier"])
    raise AssertionError(event)


def test_composition_cross_checked_with_dp_accounting(sim):
    """dp_accounting's PLD of the recorded events, composed, gives delta <= the stated delta at
    the stated eps (the PLD composition is tighter than the basic composition used for the
    calibration). Negative control: statistics calibrated to the whole eps, as if the bounds
    cost nothing, exceed delta."""
    pytest.importorskip("dp_accounting")
    for eps in (0.5, 1.0, 4.0):
        r = bayesdp.release(sim.X, sim.y, epsilon=eps, delta=DELTA, bounds="private", seed=3)
        bpart, spart = r.privacy_cost
        composed = _pld(bpart["dp_event"]).compose(_pld(spart["dp_event"]))
        assert composed.get_delta_for_epsilon(eps) <= DELTA
        wrong = {"type": "GaussianDpEvent",
                 "noise_multiplier": privacy.analytic_gaussian_sigma(eps, DELTA)}
        assert _pld(bpart["dp_event"]).compose(_pld(wrong)).get_delta_for_epsilon(eps) > 1.2 * DELTA


def test_bounds_are_shared_by_the_holders_of_one_call_and_estimated_from_all_rows(sim):
    r = bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds="private", nodes=4,
                        seed=5)
    assert r.J == 4 and np.all(r.sigma_s == r.sigma_s[0])
    one = bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds="private", seed=5)
    assert r.bounds == one.bounds  # the same rows, the same estimate stream
    assert r.bounds_part["bounds"] == {"x": r.bounds[0], "y": r.bounds[1]}
    assert "8000 rows" in r.provenance["bounds"]


def test_classical_calibration_uses_the_statistics_share(sim):
    r = bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds="private",
                        calibration="classical", seed=1, include_yty=False)
    sens = privacy.sensitivity_sz(*r.bounds)
    eps_s = EPS * (1 - privacy.PRIVATE_BOUNDS_SHARE)  # the part records the true eps instead
    np.testing.assert_allclose(r.sigma_s, privacy.classical_gaussian_sigma(eps_s, DELTA, sens),
                               rtol=1e-12)


# --------------------------------------------------------------------------------------------
# files, streaming, combining


def test_file_round_trip_and_old_files_still_load(sim, tmp_path):
    r = bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds="private", seed=1)
    path = r.save(tmp_path / "r.json")
    back = bayesdp.load_release(path)
    assert back.privacy_cost == r.privacy_cost and back.bounds == r.bounds
    assert back.dp_claim_valid and not back.bounds_from_data
    doc = json.loads(path.read_text())
    assert [p["name"] for p in doc["privacy"]["cost"]["parts"]] == ["bounds", "statistics"]
    # a file without the cost record (written before it existed) loads with the statistics
    # part derived from its epsilon, delta and sigma, and no bounds part
    del doc["privacy"]["cost"]
    old = bayesdp.Release.from_dict(doc)
    assert [p["name"] for p in old.privacy_cost] == ["statistics"] and old.bounds_part is None


def test_bad_cost_record_in_a_file_is_refused(sim):
    r = bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds="private", seed=1)
    doc = r.to_dict()
    doc["privacy"]["cost"]["parts"][0]["epsilon"] = "0.1"
    with pytest.raises(bayesdp.errors.ReleaseFormatError, match="epsilon"):
        bayesdp.Release.from_dict(doc)
    doc["privacy"]["cost"] = [1, 2]
    with pytest.raises(bayesdp.errors.ReleaseFormatError, match="privacy.cost"):
        bayesdp.Release.from_dict(doc)


def test_release_file_streams_the_same_estimate(sim, tmp_path):
    import pandas as pd

    path = tmp_path / "d.csv"
    frame = pd.DataFrame(sim.X, columns=["a", "b", "c"])
    frame["y"] = sim.y
    frame.to_csv(path, index=False, float_format="%.17g")
    a = bayesdp.releases.release_file(path, epsilon=EPS, delta=DELTA, bounds="private", nodes=2,
                                      seed=4, chunksize=777)
    b = bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds="private", nodes=2,
                        seed=4)
    assert a.bounds == b.bounds and a.privacy_cost == b.privacy_cost
    np.testing.assert_allclose(a.S_hat, b.S_hat, rtol=1e-9, atol=1e-6)


def test_separate_holders_with_own_private_bounds_combine(sim):
    """Each holder estimates from its own rows (parallel composition): different bounds, the
    same cost form; the combination keeps each holder's noise and takes the largest bounds."""
    half = len(sim.y) // 2
    a = bayesdp.release(sim.X[:half], sim.y[:half], epsilon=EPS, delta=DELTA, bounds="private",
                        holder_name="a", seed=1)
    b = bayesdp.release(sim.X[half:] * 1.5, sim.y[half:], epsilon=EPS, delta=DELTA,
                        bounds="private", holder_name="b", seed=2)
    assert a.bounds != b.bounds
    c = bayesdp.combine_releases(a, b)
    assert c.bounds == (max(a.bounds[0], b.bounds[0]), max(a.bounds[1], b.bounds[1]))
    np.testing.assert_array_equal(c.sigma_s, [a.sigma_s[0], b.sigma_s[0]])
    assert c.sensitivity == max(a.sensitivity, b.sensitivity) and c.dp_claim_valid
    # each holder's parts are kept, tagged with it; the total is one holder's (parallel)
    assert [(p["name"], p["holders"]) for p in c.privacy_cost] == [
        ("bounds", ["a"]), ("statistics", ["a"]), ("bounds", ["b"]), ("statistics", ["b"])]
    tc, ta = accounting.privacy_cost(c)["total"], accounting.privacy_cost(a)["total"]
    assert (tc["epsilon"], tc["delta"]) == pytest.approx((ta["epsilon"], ta["delta"]), rel=1e-12)
    # a different share does not combine with own bounds; private bounds with public ones of
    # the same values do, each holder's cost tagged with it
    d = bayesdp.release(sim.X[half:], sim.y[half:], epsilon=EPS, delta=DELTA, bounds="private",
                        bounds_share=0.2, holder_name="d", seed=3)
    with pytest.raises(CombineError, match="privacy_cost"):
        bayesdp.combine_releases(a, d)
    e = bayesdp.release(sim.X[half:], sim.y[half:], epsilon=EPS, delta=DELTA, bounds=a.bounds,
                        holder_name="e", seed=3)
    ae = bayesdp.combine_releases(a, e)
    assert [(p["name"], p["holders"]) for p in ae.privacy_cost] == [
        ("bounds", ["a"]), ("statistics", ["a"]), ("statistics", ["e"])]


# --------------------------------------------------------------------------------------------
# bad input


@pytest.mark.parametrize("share", [0, 1, -0.1, 1.5, float("nan"), float("inf"), "0.1", True,
                                   [0.1]])
def test_bounds_share_outside_the_open_unit_interval(sim, share):
    with pytest.raises(BayesdpInputError, match="bounds_share"):
        bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds="private",
                        bounds_share=share)


@pytest.mark.parametrize("rng_", [(0, 1), (1, 1), (5, 2), (-1, 3), (1, float("inf")), (1,),
                                  "ab", (1e-60, 1e60)])
def test_bad_bounds_range(sim, rng_):
    with pytest.raises(BayesdpInputError, match="bounds_range"):
        bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds="private",
                        bounds_range=rng_)


def test_private_options_need_private_bounds(sim):
    for kw in ({"bounds_share": 0.2}, {"bounds_range": (1e-3, 1e3)}):
        with pytest.raises(BayesdpInputError, match=next(iter(kw))):
            bayesdp.release(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds=sim.bounds, **kw)


def test_too_few_rows_minimum_is_four_times_the_target_rank():
    eps = 4.0  # each bound eps * 0.1 / 2 = 0.2: m = ceil(2 ln(301000) / 0.2) = 127
    m = privacy.bounds_target_rank(eps * 0.1 / 2, 301)
    assert m == 127
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(4 * m, 2)), rng.normal(size=4 * m)
    r = bayesdp.release(X, y, epsilon=eps, delta=DELTA, bounds="private", seed=0)
    assert r.dp_claim_valid
    with pytest.raises(BayesdpInputError,
                       match=rf"bounds: .*at least {4 * m} rows.*got {4 * m - 1}"):
        bayesdp.release(X[1:], y[1:], epsilon=eps, delta=DELTA, bounds="private", seed=0)


def test_adassp_refuses_private_bounds_by_name(sim):
    with pytest.raises(BayesdpInputError, match="private"):
        bayesdp.adassp(sim.X, sim.y, epsilon=EPS, delta=DELTA, bounds="private")


# --------------------------------------------------------------------------------------------
# command line


@pytest.fixture
def csv_file(tmp_path, sim):
    import pandas as pd

    path = tmp_path / "data.csv"
    frame = pd.DataFrame(sim.X, columns=["a", "b", "c"])
    frame["y"] = sim.y
    frame.to_csv(path, index=False, float_format="%.17g")
    return path


def test_cli_private_bounds_round_trip(tmp_path, csv_file, capsys):
    out = tmp_path / "r.json"
    assert main(["release", str(csv_file), "--epsilon", "1", "--delta", "1e-5", "--bounds",
                 "private", "--bounds-share", "0.2", "--nodes", "2", "--seed", "1",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "bounds estimated privately" in text
    r = bayesdp.load_release(out)
    assert r.dp_claim_valid and r.bounds_part["epsilon"] == pytest.approx(0.2)
    py = bayesdp.releases.release_file(csv_file, epsilon=1, delta=1e-5, bounds="private",
                                       bounds_share=0.2, nodes=2, seed=1)
    assert r.bounds == py.bounds
    assert main(["fit", str(out), "--method", "fast", "--seed", "0"]) == 0


@pytest.mark.parametrize("extra, words", [
    (["--bounds", "private", "--bounds-share", "0"], "--bounds-share"),  # the option typed
    (["--bounds", "private", "--bounds-share", "1"], "--bounds-share"),
    (["--bounds", "private", "--bounds-share", "-0.5"], "--bounds-share"),
    (["--bounds", "private", "--bounds-range", "10", "1"], "--bounds-range"),
    (["--bounds", "2", "2", "--bounds-share", "0.2"], "--bounds-share"),
    (["--bounds", "private", "--epsilon", "0.05"], "at least"),
    (["--bounds", "3"], "--bounds takes two numbers"),
    (["--bounds", "1", "x"], "--bounds takes two numbers"),
])
def test_cli_bad_input_names_the_field_and_writes_nothing(tmp_path, csv_file, capsys, extra,
                                                          words):
    out = tmp_path / "r.json"
    argv = ["release", str(csv_file), "--epsilon", "1", "--delta", "1e-5", *extra,
            "--out", str(out)]
    assert main(argv) == 2
    assert words in capsys.readouterr().err
    assert not out.exists()
