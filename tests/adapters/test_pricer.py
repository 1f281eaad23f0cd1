"""PriCER simulator and adapter (Saha, Seif, Yemini, Goldsmith & Poor, ISIT 2023 and
arXiv:2406.03766, 2024; docs/adapters/pricer.md).

Monte Carlo tolerances are k standard errors computed from the samples themselves (k = 4 or 5),
so a failure is a real discrepancy, not noise.
"""

import itertools
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy import stats

import bayesdp
from bayesdp import BayesdpInputError, Priors
from bayesdp.adapters import pricer as pm
from bayesdp.adapters.pricer import (
    PricerDesign,
    PricerNetwork,
    PricerPrivacy,
    design_objective,
    optimize_design,
    pack_suffstats,
    pricer_release,
    round_to_release,
    simulate_round,
    unpack_suffstats,
)
import network_helpers as nh
from adapter_analysis import (
    exact_moments,
    local_epsilon,
    mse_bound_paper,
    mse_bound_valid,
    mse_exact,
    optimize_design_adam,
    relays_as_holders,
)

POWER_GRID = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "networks" / "us_power_grid_edges.csv"

P_TABLE = np.array([0.1, 0.1, 0.8, 0.1, 0.1, 0.9, 0.1, 0.1, 0.9, 0.1])


def small_net(reciprocity=0.5):
    """n = 3, asymmetric P, partial reciprocity."""
    P = np.array([[1.0, 0.7, 0.3], [0.5, 1.0, 0.8], [0.6, 0.4, 1.0]])
    return PricerNetwork(p=np.array([0.6, 0.3, 0.9]), P=sp.csr_matrix(P), reciprocity=reciprocity)


def random_design(net, rng):
    a = rng.uniform(0.2, 1.5, net.n_edges)
    s = rng.uniform(0.1, 1.0, net.n_edges)
    return PricerDesign(alpha=a, sigma=s)


def table_net(pc):
    n = 10
    net = PricerNetwork.erdos_renyi(n, pc, P_TABLE)
    eps = np.ones((n, n))
    for i in range(n):
        for j in (i - 1, i, i + 1):
            eps[i, j % n] = 1e3
    return net, PricerPrivacy(eps=eps, delta=1e-3, radius=1.0)


# ---------------------------------------------------------------- exact enumeration (no MC)
def enumerate_c(net, design):
    """All link states of a 3-node network: probabilities and realised weights c."""
    n = net.n
    P, E = net.dense()
    A, _ = design.dense(net)
    pairs = [(0, 1), (0, 2), (1, 2)]
    out_p, out_c = [], []
    for ps in itertools.product([0, 1], repeat=n):
        pr_ps = np.prod([net.p[j] if ps[j] else 1 - net.p[j] for j in range(n)])
        for st in itertools.product(range(4), repeat=3):
            tau = np.eye(n)
            pr = pr_ps
            for (i, j), s in zip(pairs, st):
                a, b, e = P[i, j], P[j, i], E[i, j]
                probs = [e, a - e, b - e, 1 - a - b + e]  # (1,1), (1,0), (0,1), (0,0)
                pr *= probs[s]
                tau[i, j] = 1.0 if s in (0, 1) else 0.0
                tau[j, i] = 1.0 if s in (0, 2) else 0.0
            c = (tau * A) @ np.asarray(ps, dtype=float)
            out_p.append(pr)
            out_c.append(c)
    return np.asarray(out_p), np.asarray(out_c)


def test_exact_enumeration_of_link_states():
    net = small_net()
    des = random_design(net, np.random.default_rng(0))
    w, c = enumerate_c(net, des)
    assert abs(w.sum() - 1) < 1e-14 and np.all(w >= -1e-15)
    Ec = w @ c
    Cc = (c - Ec).T @ ((c - Ec) * w[:, None])
    X = np.eye(3)
    _, _, C, kappa = exact_moments(X, net, des)
    np.testing.assert_allclose(Ec, kappa, atol=1e-12)
    np.testing.assert_allclose(Cc, C, atol=1e-12)
    # the paper's TIV ((J-4)) = R^2/n^2 E[(sum c - n)^2] exactly
    R = 1.7
    tiv = R ** 2 / 9 * float(w @ (c.sum(1) - 3) ** 2)
    assert abs(design_objective(net, des.alpha, 0 * des.sigma, R, 5) - tiv) < 1e-12


# ---------------------------------------------------------------- optimiser
def test_design_unbiased_and_matches_slsqp():
    from scipy.optimize import minimize

    net, priv = table_net(0.5)
    dz = optimize_design(net, priv, 128)
    np.testing.assert_allclose(dz.kappa(net), 1.0, atol=1e-12)
    assert np.all(dz.alpha >= 0)
    # report 5.4: SLSQP with exact kappa = 1 gives 0.3969 (pc = 0.1) and 0.1496 (pc = 0.5)
    assert abs(dz.info["objective_mean_scale"] - 0.1496) < 5e-4
    assert abs(optimize_design(*table_net(0.1), 128).info["objective_mean_scale"] - 0.3969) < 5e-4
    # independent solver on a smaller asymmetric network with partial reciprocity
    rng = np.random.default_rng(1)
    Pm = rng.uniform(0.2, 0.9, (6, 6))
    net = PricerNetwork(p=rng.uniform(0.1, 0.9, 6), P=sp.csr_matrix(Pm), reciprocity=0.4)
    priv = PricerPrivacy(eps=rng.uniform(0.3, 3, (6, 6)), delta=1e-3, radius=1.0)
    dz = optimize_design(net, priv, 16)
    n = net.n
    rho = priv.rho(net)
    pj, w, r = pm._coefs(net)
    cons = [{"type": "eq", "fun": (lambda a, i=i: np.sum((w * a)[net.src == i]) - 1)} for i in range(n)]
    x0 = 1 / np.bincount(net.src, weights=w)[net.src]
    res = minimize(lambda a: design_objective(net, a, rho * a, 1.0, 16) * n ** 2, x0,
                   method="SLSQP", bounds=[(0, None)] * net.n_edges, constraints=cons,
                   options=dict(maxiter=500, ftol=1e-13))
    assert res.success
    assert dz.info["objective_mean_scale"] <= res.fun / n ** 2 * (1 + 1e-7)
    assert dz.info["objective_mean_scale"] >= res.fun / n ** 2 * (1 - 1e-5)


def test_privacy_cone_and_local_epsilon():
    net, priv = table_net(0.1)
    dz = optimize_design(net, priv, 16)
    rho = priv.rho(net)
    assert np.all(dz.sigma >= rho * dz.alpha - 1e-12)
    eps_real, dl = local_epsilon(net, dz, priv)
    eps_t, delta_t = priv.per_edge(net)
    on = dz.alpha > 0
    np.testing.assert_allclose(eps_real[on], eps_t[on], rtol=1e-10)  # binding everywhere
    np.testing.assert_allclose(dl, net.pl * delta_t)


def test_mse_bound_erratum_for_biased_designs():
    """[J] Thm III.1 is not an upper bound when the design is biased (report 3.3, 10(a))."""
    net, priv = table_net(0.1)
    des = optimize_design_adam(net, priv, 128, lam=0.0, iters=2000, seed=1)
    kap = des.kappa(net)
    assert np.max(kap) > 1.5 and np.min(kap) < 0.2   # poorly connected nodes dropped
    u = np.zeros(128)
    u[0] = 1.0
    X = np.sign(kap - 1)[:, None] * u[None, :]
    exact = mse_exact(X, net, des)
    assert exact > 10 * mse_bound_paper(net, des, 1.0, 128)
    valid = mse_bound_valid(net, des, 1.0, 128)
    assert exact <= valid and exact > 0.99 * valid   # report: 1.680 in both


@pytest.mark.slow
def test_reproduces_table_I_with_adam():
    paper = {(0.1, 0): (0.0449, 12.799), (0.1, 0.1): (0.3422, 0.4125), (0.1, 0.5): (0.4039, 0.0025),
             (0.5, 0): (0.0448, 12.122), (0.5, 0.1): (0.1493, 0.0082), (0.5, 0.5): (0.1538, 0.0020)}
    for (pc, lam), (mse, bias) in paper.items():
        net, priv = table_net(pc)
        ds = [optimize_design_adam(net, priv, 128, lam=lam, seed=s) for s in (1, 10, 100, 1000)]
        m = np.mean([d.info["mse"] for d in ds])
        b = np.mean([d.info["bias_l1"] for d in ds])
        assert abs(m - mse) < 0.01 * mse, (pc, lam, m)
        if lam == 0:
            assert abs(b - bias) < 0.01 * bias
        else:
            assert abs(b - bias) < 0.02


# ---------------------------------------------------------------- Monte Carlo moments
def mc_rounds(X, net, des, reps, seed):
    rng = np.random.default_rng(seed)
    out = np.empty((reps, X.shape[1]))
    res = np.empty((reps, X.shape[1]))
    for r in range(reps):
        rd = simulate_round(X, net, des, rng)
        out[r] = net.n * rd.estimate
        v = rd.v_realized
        res[r] = (net.n * rd.estimate - rd.reweighted_sum) / math.sqrt(v) if v > 0 else np.nan
    return out, res[np.isfinite(res[:, 0])]


def test_unbiased_and_covariance_match_closed_form():
    rng = np.random.default_rng(3)
    net = PricerNetwork.erdos_renyi(6, 0.6, rng.uniform(0.3, 0.9, 6), reciprocity=0.5)
    priv = PricerPrivacy(eps=0.8, delta=1e-3, radius=3.0)
    des = optimize_design(net, priv, 4)
    X = rng.uniform(-1, 1, (6, 4)) + np.arange(4)
    reps = 20000
    out, res = mc_rounds(X, net, des, reps, seed=4)
    mean, cov, _, _ = exact_moments(X, net, des)
    np.testing.assert_allclose(mean, X.sum(0), atol=1e-12)           # kappa = 1: unbiased
    se = np.sqrt(np.diag(cov) / reps)
    assert np.all(np.abs(out.mean(0) - mean) < 4 * se)
    # variances: SE of a sample variance from the 4th moment
    dev = out - out.mean(0)
    v_hat = np.mean(dev ** 2, axis=0)
    v_se = np.sqrt(np.var(dev ** 2, axis=0) / reps)
    assert np.all(np.abs(v_hat - np.diag(cov)) < 5 * v_se)
    # a covariance entry
    prod = dev[:, 0] * dev[:, 3]
    assert abs(prod.mean() - cov[0, 3]) < 5 * prod.std() / math.sqrt(reps)
    # MSE
    err2 = np.sum((out / net.n - X.mean(0)) ** 2, axis=1)
    assert abs(err2.mean() - mse_exact(X, net, des)) < 5 * err2.std() / math.sqrt(reps)
    # residual given the link states is exactly N(0, v(tau) I)
    z = res.reshape(-1)
    assert abs(z.mean()) < 5 / math.sqrt(z.size) and abs(z.var() - 1) < 5 * math.sqrt(2 / z.size)
    assert stats.kstest(z[:20000], "norm").pvalue > 1e-3


def test_aligned_data_attains_paper_mse():
    rng = np.random.default_rng(5)
    net = PricerNetwork.erdos_renyi(5, 0.5, rng.uniform(0.2, 0.9, 5))
    priv = PricerPrivacy(eps=0.5, delta=1e-3, radius=2.0)
    des = optimize_design(net, priv, 3)
    u = np.array([2.0, 0.0, 0.0])
    X = np.tile(u, (5, 1))
    assert abs(mse_exact(X, net, des) - mse_bound_paper(net, des, 2.0, 3)) < 1e-10


def test_S_noise_symmetric_with_equal_variances():
    rng = np.random.default_rng(6)
    d = 3
    net = PricerNetwork.erdos_renyi(4, 0.7, 0.8)
    des = PricerDesign(alpha=np.where(net.src == net.dst, 1 / 0.8, 0.0), sigma=np.full(net.n_edges, 1.0))
    X = np.zeros((4, d * (d + 1) // 2 + d + 1))
    diag, off = [], []
    for _ in range(4000):
        rd = simulate_round(X, net, des, rng)
        if rd.v_realized == 0:
            continue
        S, z, N = unpack_suffstats(net.n * rd.estimate, d)
        assert np.array_equal(S, S.T)
        diag.append(S[0, 0] / math.sqrt(rd.v_realized))
        off.append(S[0, 1] / math.sqrt(rd.v_realized))
    for a in (diag, off):
        assert abs(np.var(a) - 1) < 5 * math.sqrt(2 / len(a))


# ---------------------------------------------------------------- adapter semantics
def test_pack_unpack_round_trip():
    rng = np.random.default_rng(7)
    Xs = [rng.standard_normal((5, 3)) for _ in range(2)]
    ys = [rng.standard_normal(5) for _ in range(2)]
    v = pack_suffstats(Xs, ys)
    S, z, N = unpack_suffstats(v[1], 3)
    np.testing.assert_allclose(S, Xs[1].T @ Xs[1])
    np.testing.assert_allclose(z, Xs[1].T @ ys[1])
    assert N == 5
    assert v[1, :6].tolist() == (Xs[1].T @ Xs[1])[np.triu_indices(3)].tolist()


def test_perfect_links_no_noise_gives_exact_sums():
    rng = np.random.default_rng(8)
    n, d = 5, 2
    P = np.ones((n, n))
    net = PricerNetwork(p=np.ones(n), P=sp.csr_matrix(P))
    des = PricerDesign(alpha=(net.src == net.dst).astype(float), sigma=np.zeros(net.n_edges))
    Xs = [rng.standard_normal((4, d)) for _ in range(n)]
    ys = [rng.standard_normal(4) for _ in range(n)]
    st = pack_suffstats(Xs, ys)
    rd = simulate_round(st, net, des, rng)
    np.testing.assert_allclose(n * rd.estimate, st.sum(0), atol=1e-12)


def test_theta_invariance_requires_one_vector():
    """Noise-free y = X theta, sigma = 0: every round gives S_hat^{-1} z_hat = theta exactly when S
    and z travel in one vector, not when they are sent in separate runs."""
    rng = np.random.default_rng(9)
    n, d = 8, 3
    theta = np.array([1.0, -2.0, 0.5])
    net = PricerNetwork.erdos_renyi(n, 0.5, rng.uniform(0.3, 0.9, n))
    priv = PricerPrivacy(eps=0.5, delta=1e-3, radius=1.0)
    des0 = optimize_design(net, priv, 9)
    des = PricerDesign(alpha=des0.alpha, sigma=np.zeros(net.n_edges))
    Xs = [rng.standard_normal((6, d)) for _ in range(n)]
    ys = [X @ theta for X in Xs]
    st = pack_suffstats(Xs, ys, include_count=False)
    worst_sep = 0.0
    for _ in range(20):
        S, z, _ = unpack_suffstats(n * simulate_round(st, net, des, rng).estimate, d, include_count=False)
        np.testing.assert_allclose(np.linalg.solve(S, z), theta, rtol=1e-8, atol=1e-8)
        S2, _, _ = unpack_suffstats(n * simulate_round(st, net, des, rng).estimate, d, include_count=False)
        worst_sep = max(worst_sep, np.max(np.abs(np.linalg.solve(S2, z) - theta)))
    assert worst_sep > 1e-2


def test_v_modes_average_to_oracle():
    rng = np.random.default_rng(10)
    net = PricerNetwork.erdos_renyi(6, 0.5, rng.uniform(0.2, 0.9, 6), reciprocity=0.3)
    des = random_design(net, rng)
    X = np.zeros((6, 2))
    v = {m: [] for m in pm.V_MODES}
    for _ in range(20000):
        rd = simulate_round(X, net, des, rng)
        for m in pm.V_MODES:
            v[m].append(pm.noise_variance(rd, net, des, m))
    o = np.asarray(v["oracle"])
    for m in ("ps_conditional", "expected"):
        diff = np.asarray(v[m]) - o
        assert abs(diff.mean()) < 5 * diff.std() / math.sqrt(len(o)) + 1e-12
    assert abs(o.mean() - des.v_expected(net)) < 5 * o.std() / math.sqrt(len(o))


def test_release_fields_and_dp_claim():
    rng = np.random.default_rng(11)
    n, d = 6, 2
    net = PricerNetwork.erdos_renyi(n, 0.7, 0.8)
    Xs = [rng.standard_normal((10, d)) for _ in range(n)]
    ys = [X @ np.ones(d) + 0.1 * rng.standard_normal(10) for X in Xs]
    sim = pricer_release(Xs, ys, net, eps=0.5, delta=1e-5, bound_x=3.0, bound_y=10.0, seed=1)
    rel = sim.release
    assert rel.J == 1 and rel.d == d
    assert rel.provenance["protocol"] == "pricer" and rel.provenance["unbiased_design"]
    assert rel.dp_claim_valid
    assert rel.sigma_s[0] == rel.sigma_z[0] > 0
    # eps >= 1 with the classic mechanism: the paper's claim is not established
    sim2 = pricer_release(Xs, ys, net, eps=2.0, delta=1e-5, bound_x=3.0, bound_y=10.0, seed=1)
    assert not sim2.release.dp_claim_valid and "eps < 1" in sim2.release.dp_claim_note
    sim3 = pricer_release(Xs, ys, net, eps=2.0, delta=1e-5, bound_x=3.0, bound_y=10.0, seed=1,
                          mechanism="analytic")
    assert sim3.release.dp_claim_valid
    # same seed, same output; JSON round trip
    again = pricer_release(Xs, ys, net, eps=0.5, delta=1e-5, bound_x=3.0, bound_y=10.0, seed=1)
    np.testing.assert_array_equal(again.release.S_hat, rel.S_hat)
    from bayesdp.releases import Release
    back = Release.from_dict(rel.to_dict())
    np.testing.assert_allclose(back.S_hat, rel.S_hat)
    assert back.provenance["protocol"] == "pricer"


def test_bad_input_names_field():
    with pytest.raises(BayesdpInputError, match="p must"):
        PricerNetwork(p=np.array([1.5, 0.2]), P=sp.csr_matrix(np.ones((2, 2))))
    with pytest.raises(BayesdpInputError, match="P must"):
        PricerNetwork(p=np.array([0.5, 0.2]), P=sp.csr_matrix(np.ones((3, 3))))
    with pytest.raises(BayesdpInputError, match="reciprocity"):
        PricerNetwork(p=np.array([0.5, 0.2]), P=sp.csr_matrix(np.ones((2, 2))), reciprocity=2)
    net = PricerNetwork(p=np.array([0.0, 0.0]), P=sp.csr_matrix(np.ones((2, 2))))
    with pytest.raises(BayesdpInputError, match="p/P"):
        optimize_design(net, PricerPrivacy(eps=0.5, delta=1e-3, radius=1.0), 2)
    with pytest.raises(BayesdpInputError, match="delta"):
        PricerPrivacy(eps=0.5, delta=2.0, radius=1.0).rho(PricerNetwork.erdos_renyi(3, 0.5, 0.5))


# ---------------------------------------------------------------- scale
def test_runs_on_10k_node_sparse_network():
    rng = np.random.default_rng(12)
    n = 10_000
    net = PricerNetwork.random_sparse(n, 6, rng.uniform(0.1, 0.9, n), 0.7, seed=1)
    priv = PricerPrivacy(eps=0.5, delta=1e-5, radius=1.0)
    des = optimize_design(net, priv, 5)
    np.testing.assert_allclose(des.kappa(net), 1.0, atol=1e-10)
    X = rng.standard_normal((n, 5))
    rd = simulate_round(X, net, des, rng)
    assert np.all(np.isfinite(rd.estimate))


@pytest.mark.slow
def test_runs_on_100k_node_sparse_network():
    rng = np.random.default_rng(13)
    n = 100_000
    net = PricerNetwork.random_sparse(n, 6, rng.uniform(0.1, 0.9, n), 0.7, seed=2)
    des = optimize_design(net, PricerPrivacy(eps=0.5, delta=1e-5, radius=1.0), 5)
    np.testing.assert_allclose(des.kappa(net), 1.0, atol=1e-10)
    rd = simulate_round(rng.standard_normal((n, 5)), net, des, rng)
    assert np.all(np.isfinite(rd.estimate))


@pytest.mark.skipif(not POWER_GRID.exists(), reason="../shared/data/networks not present")
def test_power_grid_graph_loads_and_runs():
    from bayesdp.adapters.consensus import load_adjacency

    adj = load_adjacency(POWER_GRID)
    assert adj.shape == (4941, 4941) and adj.nnz == 2 * 6594
    rng = np.random.default_rng(14)
    net = PricerNetwork.from_graph(adj, rng.uniform(0.1, 0.9, 4941), 0.8)
    des = optimize_design(net, PricerPrivacy(eps=0.5, delta=1e-5, radius=1.0), 5)
    np.testing.assert_allclose(des.kappa(net), 1.0, atol=1e-10)
    out, _ = mc_rounds(np.ones((4941, 5)), net, des, 100, seed=15)
    se = out.std(0) / math.sqrt(100)
    assert np.all(np.abs(out.mean(0) - 4941) < 5 * se)


# ---------------------------------------------------------------- end-to-end calibration
def calibration(reps, seed, *, v_mode="ps_conditional", per_relay=False, inflate=True, d=2, n=12,
                rows=100, eps=2.0, prior_C=None, s_noise=None):
    """Hits of nominal 90% "fast" intervals over independent simulated networks (fast_coverage)."""
    sy = 0.5

    def simulate(rng, theta):
        net = PricerNetwork.erdos_renyi(n, 0.6, rng.uniform(0.3, 0.9, n))
        Xs = [rng.standard_normal((rows, d)) for _ in range(n)]
        ys = [X @ theta + sy * rng.standard_normal(rows) for X in Xs]
        sim = pricer_release(Xs, ys, net, eps=eps, delta=1e-5, bound_x=4.0, bound_y=20.0,
                             seed=int(rng.integers(2 ** 31)), v_mode=v_mode, record_level=True,
                             mechanism="analytic")
        rel = sim.release
        if per_relay:
            rd = simulate_round(pack_suffstats(Xs, ys), net, sim.design, rng, keep_relays=True)
            rel = relays_as_holders(rd, net, sim.design, sim.truth["privacy"], d)
        return rel, sy ** 2 * (rel.provenance["sigma_y2_inflation"] if inflate else 1.0)

    return nh.fast_coverage(reps, seed, simulate, d=d, prior_C=prior_C, s_noise=s_noise)


def test_calibration_quick_and_negative_control():
    hits = calibration(150, seed=20, prior_C=0.1)[:, 0]
    lo, hi = nh.binomial_band(len(hits))
    assert lo <= hits.mean() <= hi, hits.mean()
    # negative control: the relays' outputs as independent holders (they share node data)
    bad = calibration(100, seed=21, per_relay=True, prior_C=0.1)[:, 0]
    assert bad.mean() < nh.binomial_band(len(bad))[0], bad.mean()


@pytest.mark.slow
@pytest.mark.parametrize("v_mode", ["ps_conditional", "oracle"])
def test_calibration_full(v_mode):
    hits = calibration(500, seed=30, v_mode=v_mode, prior_C=0.1)[:, 0]
    lo, hi = nh.binomial_band(len(hits))
    assert lo <= hits.mean() <= hi, hits.mean()


@pytest.mark.slow
def test_negative_control_full():
    bad = calibration(300, seed=32, per_relay=True, prior_C=0.1)[:, 0]
    assert bad.mean() < nh.binomial_band(len(bad))[0], bad.mean()


@pytest.mark.slow
def test_calibration_s_noise_eiv_and_control():
    """theta ~ N(0, I) and a moderate S noise (eps = 50: sigma_s ~ 38 against S ~ 1200 I): the
    recommended errors-in-variables treatment covers; the old one (S noise ignored:
    "conditional", which for this isotropic release is sigma_z^2 I) under-covers, on the same
    networks."""
    nh.assert_eiv_covers_and_old_undercovers(
        lambda k: calibration(500, seed=36, eps=50.0, prior_C=1.0, s_noise=k))


# ---------------------------------------------------------------- methods on an adapted release
def test_eiv_fixed_point_converges_on_a_non_decaying_two_cycle():
    """A PriCER release with a large S noise (eps = 2, sigma_s = 368 against S ~ 1200) on which
    the plain/damped-on-growth iteration theta <- mean(Sigma(theta)) settles into a 2-cycle whose
    residual neither grows nor decays (0.69 after 500 passes, and a RuntimeWarning); damping
    also on a direction flip finds the fixed point."""
    from bayesdp.inference import closed_form as cf
    from bayesdp.releases import Release
    from bayesdp.releases import layout

    rel = Release(S_hat=[[[1074.53, -325.207], [-325.207, 469.571]]], z_hat=[[-893.961, -1567.61]],
                  n=[1200], sigma_s=[368.006], sigma_z=[368.006])
    pri = Priors(C=np.eye(2)).resolve(2)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        f = cf.fast_posterior(rel, pri, sigma_y2=0.24, s_noise="eiv")
    _, Sig = layout.z_given_s_noise(rel, f["S"], s_noise="eiv", theta=f["mean"])
    again, _, _ = cf.gaussian_theta_posterior(f["S"], rel.z_hat, 0.24, Sig, pri.m, pri.C)
    np.testing.assert_allclose(again, f["mean"], rtol=1e-8)


def test_fixeds_matches_fast_and_normalx_refused():
    """MCMC-fixedS with sigma_y^2 held fixed reproduces Bayes-fixedS-fast on a PriCER release for
    the recommended treatment of the S noise ("eiv") and the old one, which differ here; normalX
    is refused (S_hat is randomly reweighted, not Wishart)."""
    rng = np.random.default_rng(40)
    n = 12
    net = PricerNetwork.erdos_renyi(n, 0.6, rng.uniform(0.3, 0.9, n))
    theta = np.array([1.2, -0.9])
    Xs = [rng.standard_normal((100, 2)) for _ in range(n)]
    ys = [X @ theta + 0.5 * rng.standard_normal(100) for X in Xs]
    rel = pricer_release(Xs, ys, net, eps=50.0, delta=1e-5, bound_x=4.0, bound_y=20.0, seed=41,
                         record_level=True, mechanism="analytic").release
    assert rel.provenance["s_noise"] == "eiv"
    priors = Priors(C=np.eye(2))
    s2 = 0.25 * rel.provenance["sigma_y2_inflation"]
    post = {k: nh.assert_fixeds_matches_fast(rel, priors, s2, k, seed=42)
            for k in ("eiv", "conditional")}
    assert nh.posteriors_differ(post["eiv"], post["conditional"])
    with pytest.raises(BayesdpInputError, match="Wishart"):
        bayesdp.fit(rel, method="normalx", num_samples=5, num_warmup=5)


# ---------------------------------------------------------------- command line
def test_cli_simulate_network_pricer(tmp_path, capsys):
    import argparse

    from bayesdp.cli import network as cli_network
    from bayesdp.releases import load_release

    ap = argparse.ArgumentParser()
    cli_network.register(ap.add_subparsers(dest="cmd"))
    out = tmp_path / "r.json"
    args = ap.parse_args(["simulate-network", "pricer", "--networks", "2", "--nodes", "6",
                          "--rows", "20", "--epsilon", "0.5", "--record-level", "--out", str(out),
                          "--truth-out", str(tmp_path / "t.json"), "--seed", "3"])
    assert args.func(args) == 0
    rel = load_release(out)
    assert rel.J == 2 and rel.provenance["protocol"] == "pricer" and rel.dp_claim_valid
    assert (tmp_path / "t.json").exists()


def test_er_limit_design_mse_and_eq17_erratum():
    """[J] section V-B: lambda -> inf weights alpha = 1/(mpq), gamma = 1/q. The general MSE formula
    equals the corrected MSE_* (report 5.3: 29.62); the printed (17) (88.78) misses a 1/m."""
    n, m, q, p, eps, delta, dim, R = 10, 3, 0.9, 0.8, 1.0, 1e-3, 16, 1.0
    pv = np.r_[np.full(m, q), np.zeros(n - m)]
    net = PricerNetwork.erdos_renyi(n, p, pv)
    xi = 2 * math.sqrt(2 * math.log(1.25 / delta))
    inM = net.src < m
    to_M = net.dst < m
    alpha = np.where(~inM & to_M, 1 / (m * p * q), 0.0)
    alpha = np.where((net.src == net.dst) & inM, 1 / q, alpha)
    sigma = np.where(net.src == net.dst, 0.0, xi * R * alpha / eps)
    des = PricerDesign(alpha=alpha, sigma=sigma)
    np.testing.assert_allclose(des.kappa(net), 1.0, atol=1e-12)
    general = design_objective(net, alpha, sigma, R, dim)
    corrected = R ** 2 * ((n - m) / (n ** 2 * m * p * q) * (1 - p + xi ** 2 * dim / eps ** 2)
                          + (1 - q) / (m * q))
    printed = (n - m) / (n ** 2 * p * q) * ((1 - p) / m + xi ** 2 * dim / eps ** 2)
    assert abs(general - corrected) < 1e-10 * general
    assert abs(general - 29.62) < 0.01
    assert abs(printed - 88.75) < 0.01 and printed > 2.9 * general   # report prints 88.78


def test_bernstein_radius_and_ps_level_epsilon():
    from adapter_analysis import bernstein_radius
    from bayesdp.adapters.pricer import ps_epsilon

    rng = np.random.default_rng(17)
    s2 = rng.uniform(0.5, 3.0, 30)
    p = rng.uniform(0.2, 0.9, 30)
    dp = 0.05
    r = bernstein_radius(s2, p, dp)
    tau = rng.random((100000, 30)) < p
    dev = np.abs(tau @ s2 - p @ s2)
    assert np.mean(dev >= r) <= dp                        # Cor. IV.4 with the corrected radius
    assert bernstein_radius(s2, p, dp, "paper") < r       # the printed form is smaller
    # Thm IV.5: no guarantee on a 10-node network (r_j > zetabar_j), finite on 50 nodes;
    # data eps = 2 x identity eps; composition over relays makes it weaker than the link eps
    priv = PricerPrivacy(eps=0.5, delta=1e-5, radius=1.0)
    small = PricerNetwork.erdos_renyi(10, 0.8, rng.uniform(0.3, 0.9, 10))
    e10, _ = ps_epsilon(small, optimize_design(small, priv, 5), priv, 1e-3, 1e-5)
    assert np.all(np.isinf(e10))
    big = PricerNetwork.erdos_renyi(50, 0.8, rng.uniform(0.3, 0.9, 50))
    des = optimize_design(big, priv, 5)
    ed, dt = ps_epsilon(big, des, priv, 1e-3, 1e-5, "data")
    ei, _ = ps_epsilon(big, des, priv, 1e-3, 1e-5, "identity")
    assert np.all(np.isfinite(ed)) and np.allclose(ed, 2 * ei) and np.all(ed > 0.5)
    assert abs(dt - 1e-3 * big.p.sum()) < 1e-15


def test_isit_common_sigma_design():
    """[C] Alg. 3: common sigma, box alpha <= sigma/rho, kappa = 1; sigma_thr makes the tightest
    row exactly feasible; the alternation stops at sigma_thr (the A-step keeps rho alpha <= sigma),
    which is not the joint optimum (a larger sigma does better at p_c = 0.1)."""
    from bayesdp.adapters.pricer import optimize_design_isit

    n = 10
    net = PricerNetwork.erdos_renyi(n, 0.1, P_TABLE)
    eps = np.full((n, n), 0.1)
    for i in range(n):
        for j in (i - 1, i, i + 1):
            eps[i, j % n] = 1e3
    priv = PricerPrivacy(eps=eps, delta=1e-3, radius=1.0)
    des = optimize_design_isit(net, priv, 16)
    rho = priv.rho(net)
    s_thr = des.info["sigma_thr"]
    np.testing.assert_allclose(des.kappa(net), 1.0, atol=1e-12)
    assert np.all(rho * des.alpha <= s_thr * (1 + 1e-12)) and des.info["sigma_history"] == [s_thr]
    pj, w, _ = pm._coefs(net)
    reach = np.bincount(net.src, weights=w * s_thr / rho, minlength=n)
    assert abs(reach.min() - 1.0) < 1e-12          # the tightest row is exactly feasible
    # the A-step is the box-constrained optimum: KKT certificate with a finite-difference gradient
    cap = s_thr / rho
    sig = np.full(net.n_edges, s_thr)
    f = lambda a: design_objective(net, a, sig, 1.0, 16)  # noqa: E731
    g = np.empty(net.n_edges)
    for e in range(net.n_edges):
        h = np.zeros(net.n_edges)
        h[e] = 1e-6
        g[e] = (f(des.alpha + h) - f(des.alpha - h)) / 2e-6
    a = des.alpha
    scale = np.max(np.abs(g))
    for i in range(n):
        row = (net.src == i) & (w > 0)
        free = row & (a > 1e-9) & (a < cap * (1 - 1e-9))
        zero = row & (a <= 1e-9)
        top = row & (a >= cap * (1 - 1e-9))
        ratio = g / np.where(w > 0, w, 1.0) / scale
        lo = np.max(ratio[top | free], initial=-np.inf)     # a multiplier must exist with
        hi = np.min(ratio[zero | free], initial=np.inf)     # top/free <= lam <= free/zero
        assert lo <= hi + 1e-5, (i, lo, hi)
    # joint optimum over sigma is lower than [C]'s fixed point
    d15 = pm.optimize_design(net, priv, 16, _cap=1.5 * s_thr / rho)
    obj15 = design_objective(net, d15.alpha, np.full(net.n_edges, 1.5 * s_thr), 1.0, 16)
    assert obj15 < des.info["objective_mean_scale"] - 1e-4


@pytest.mark.slow
def test_calibration_data_noise_dominated():
    """Privacy noise negligible, theta ~ N(0, I): the only misfit left is the random reweighting
    (data noise sigma_y^2 sum c_i^2 S_i); the PS-conditional sigma_y2_inflation restores coverage."""
    hits = calibration(300, seed=34, eps=1e5, prior_C=1.0)[:, 0]
    lo, hi = nh.binomial_band(len(hits))
    assert lo <= hits.mean() <= hi, hits.mean()
