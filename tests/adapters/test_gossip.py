"""Gossip averaging with bias removal ("Estimating Unbiased Averages of Sensitive Attributes
without Handshakes among Agents", an anonymous double-blind submission): simulator identities,
the output's noise law, the adapter and the end-to-end calibration of Bayes-fixedS-fast on adapted
releases.

Monte Carlo tolerances are multiples of the Monte Carlo standard error; coverage checks use the
binomial 99% band. The protocol and its noise law: docs/adapters/gossip.md.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import sparse, stats

import bayesdp
from bayesdp import privacy
from bayesdp.adapters import gossip as g
from bayesdp.errors import BayesdpInputError
from bayesdp.inference import closed_form as cf
from bayesdp.models.priors import Priors
from bayesdp.releases import layout
from network_helpers import assert_fixeds_matches_fast, binomial_band, posteriors_differ
import adapter_analysis as aa

GRID = Path(__file__).resolve().parents[3] / "shared" / "data" / "networks" / "us_power_grid_edges.csv"


@pytest.fixture(scope="module")
def graph512():
    return g.synthetic_graph(512, seed=1)


# -- graphs -----------------------------------------------------------------------------------------


def test_graph_invariants(graph512):
    for A in (graph512, g.synthetic_graph(300, gamma=3.0, seed=7)):
        s = aa.graph_summary(A)
        assert s["symmetric"] and s["self_loops"] == 0 and s["connected"]
        assert s["bipartite"] is False
        assert s["min_degree"] >= 3 and s["max_degree"] <= 64
        assert sparse.issparse(A)
    A = graph512.tolil()
    assert A[0, 2] == 1 and A[0, 1] == 1 or A[0, 2] == 1  # (v1, v3) added by the repair


def test_power_law_degrees_chi2():
    rng = np.random.default_rng(3)
    d = g.sample_power_law_degrees(20000, gamma=2.0, d_max=64, seed=rng)
    support = np.arange(1, 62)
    assert d.min() >= 1 and d.max() <= 61
    p = support ** -2.0
    p /= p.sum()
    counts = np.bincount(d, minlength=62)[1:]
    # pool the tail so expected counts are >= 5
    exp = p * d.size
    cut = np.flatnonzero(exp < 5)[0]
    obs = np.r_[counts[:cut], counts[cut:].sum()]
    e = np.r_[exp[:cut], exp[cut:].sum()]
    assert stats.chisquare(obs, e).pvalue > 1e-3


def test_chung_lu_edge_probabilities():
    """Definition 1 with p_ij = min(1, w_i w_j / (sum w - 1)): edge counts per pair class match."""
    w = np.array([30.0, 20.0, 3.0, 2.0, 2.0, 1.0, 1.0, 1.0, 1.0, 1.0])
    P = np.minimum(1.0, np.outer(w, w) / (w.sum() - 1.0))
    np.fill_diagonal(P, 0)
    rng = np.random.default_rng(5)
    reps = 3000
    acc = np.zeros_like(P)
    for _ in range(reps):
        acc += g.chung_lu_graph(w, seed=rng).toarray()
    se = np.sqrt(P * (1 - P) / reps) + 1e-12
    assert np.all(np.abs(acc / reps - P) <= 4.5 * se + 1e-12)
    assert P.max() == 1.0  # the cap is exercised (30*20/61 > 1)


def test_repair_on_a_path_and_bad_graphs():
    n = 20
    A = sparse.diags([np.ones(n - 1), np.ones(n - 1)], [1, -1], format="csr")  # a path
    R = g.repair_graph(A, d_max=10, seed=0)
    s = aa.graph_summary(R)
    assert s["connected"] and not s["bipartite"] and s["min_degree"] >= 3 and s["max_degree"] <= 10
    with pytest.raises(BayesdpInputError, match="undirected"):
        aa.sigo_limit(A, np.ones(n)) if False else g.simulate_gossip(
            sparse.csr_matrix(np.triu(np.ones((5, 5)), 1)), np.ones((5, 1)), np.ones(5),
            epsilon=1, delta=1e-5, bounds=(1, 1))


@pytest.mark.skipif(not GRID.exists(), reason="shared power-grid graph not present")
def test_us_power_grid_loads_and_runs():
    A = g.load_gossip_graph(GRID, seed=0)
    s = aa.graph_summary(A)
    assert s["n"] == 4941 and s["connected"] and not s["bipartite"] and s["min_degree"] >= 3
    rng = np.random.default_rng(0)
    X = rng.normal(size=(s["n"], 2))
    y = X @ [0.2, -0.1] + rng.normal(0, 0.3, s["n"])
    out, tr = g.simulate_gossip(A, X, y, epsilon=50, delta=1e-5, bounds=(3, 3), it_go=8192,
                                tol=1e-9, seed=1)
    rel = g.gossip_release(out)
    short, _ = g.simulate_gossip(A, X, y, epsilon=50, delta=1e-5, bounds=(3, 3), it_go=64, seed=1)
    with pytest.warns(UserWarning, match="not converged"):
        g.gossip_release(short)
    assert rel.J == 1 and rel.n[0] == s["n"]
    post = cf.fast_posterior(rel, Priors.paper().resolve(2), sigma_y2=0.09)
    assert np.all(np.isfinite(post["mean"]))


# -- gossip -----------------------------------------------------------------------------------------


def test_theorem1_limit_and_bipartite_control(graph512):
    rng = np.random.default_rng(0)
    W = rng.normal(size=(512, 3))
    Z, its = g.sigo(graph512, W, 1024)
    assert its == 1024
    np.testing.assert_allclose(Z, aa.sigo_limit(graph512, W), rtol=1e-9, atol=1e-12)
    # an even cycle is bipartite: T has eigenvalue -1 and the iterates oscillate
    n = 10
    C = sparse.csr_matrix((np.ones(2 * n), (np.r_[np.arange(n), (np.arange(n) + 1) % n],
                                             np.r_[(np.arange(n) + 1) % n, np.arange(n)])))
    w = (-1.0) ** np.arange(n)
    Z1, _ = g.sigo(C, w, 1001)
    Z2, _ = g.sigo(C, w, 1000)
    assert np.ptp(Z1) > 1.9 and np.allclose(Z1, -Z2)


def test_noiseless_bias_removal_exact(graph512):
    A = graph512
    deg = np.asarray(A.sum(1)).ravel()
    w = np.random.default_rng(1).normal(2.0, 1.0, 512)
    N, _ = g.sigo(A, w / deg, 1024)
    D, _ = g.sigo(A, 1.0 / deg, 1024)
    np.testing.assert_allclose(N / D, w.mean(), rtol=1e-9)
    naive, _ = g.sigo(A, w, 1024)  # degree-weighted: bias mu_dw/mu_d - mu_w (eq. 4.2)
    np.testing.assert_allclose(naive - w.mean(), (deg * w).mean() / deg.mean() - w.mean(),
                               rtol=1e-9, atol=1e-12)
    assert abs((deg * w).mean() / deg.mean() - w.mean()) > 1e-3


def test_iterative_path_equals_weights_and_convergence_rate(graph512):
    rng = np.random.default_rng(2)
    W = rng.normal(size=512)
    for it in (5, 16):
        Z, _ = g.sigo(graph512, W, it)
        np.testing.assert_allclose(Z[7], aa.gossip_weights(graph512, 7, it) @ W, rtol=1e-10)
    # Experiment-4 analogue: spread of theta1_hat across agents at it_go = 16 vs 1024
    n = 512
    X = np.column_stack([np.ones(n), rng.normal(0.5, 0.4, n)])
    y = X @ [1.0, 0.5] + rng.normal(0, 0.3, n)
    spreads = {}
    for it in (16, 1024):
        out, _ = g.simulate_gossip(graph512, X, y, epsilon=50, delta=1e-5, bounds=(2, 2.5),
                                   it_go=it, intercept=True, seed=3)
        m = out.N / out.D[:, None]
        th = []
        for j in range(n):
            S = np.array([[m[j, 0], m[j, 1]], [m[j, 1], m[j, 2]]])
            th.append(np.linalg.solve(S, m[j, 3:])[1])
        spreads[it] = np.var(th)
    assert spreads[16] > 1e6 * max(spreads[1024], 1e-300) or spreads[1024] < 1e-20
    assert spreads[16] > 1e-8


def test_scales_to_ten_thousand_agents():
    A = g.synthetic_graph(10_000, seed=4)
    rng = np.random.default_rng(4)
    X = rng.normal(size=(10_000, 3))
    y = X @ [0.1, 0.2, -0.1] + rng.normal(0, 0.3, 10_000)
    out, tr = g.simulate_gossip(A, X, y, epsilon=10, delta=1e-5, bounds=(3, 3), it_go=1024,
                                tol=1e-12, seed=5)
    assert out.spread() < 1e-8 and tr.iterations < 1024
    assert g.gossip_release(out).noise_cov.shape == (1, 9, 9)


@pytest.mark.slow
def test_scales_to_hundred_thousand_agents():
    A = g.synthetic_graph(100_000, seed=8)
    s = aa.graph_summary(A)
    assert s["connected"] and not s["bipartite"] and s["max_degree"] <= 64
    rng = np.random.default_rng(8)
    X = rng.normal(size=(100_000, 2))
    y = X @ [0.1, 0.2] + rng.normal(0, 0.3, 100_000)
    out, tr = g.simulate_gossip(A, X, y, epsilon=10, delta=1e-5, bounds=(3, 3), it_go=1024,
                                tol=1e-12, seed=9)
    assert out.spread() < 1e-8
    rel = g.gossip_release(out)
    assert rel.n[0] == 100_000 and np.all(np.isfinite(rel.noise_cov))


# -- privacy accounting -------------------------------------------------------------------------------


def test_sigma_formula_pins_epsilon_squared():
    # (5.6) corrected: sigma = sqrt(50 log(25/(4 delta))) Delta / eps, the paper's classic sigma
    s = privacy.classical_gaussian_sigma(4 / 5, 2.0**-7 / 5, 1 / 12)
    assert s == pytest.approx(0.380874, abs=2e-6)
    assert s == pytest.approx(math.sqrt(50 * math.log(25 / (4 * 2.0**-7))) / 12 / 4, rel=1e-12)
    sens = g.paper_sensitivities(5.5)
    sig = {k: privacy.classical_gaussian_sigma(0.8, 2.0**-7 / 5, v) for k, v in sens.items()}
    assert sig[("S", 0, 1)] == pytest.approx(90, rel=0.01)
    assert sig[("z", 0)] == pytest.approx(6.09, rel=0.01)
    assert sig[("z", 1)] == pytest.approx(1.08e3, rel=0.01)
    assert sig[("S", 1, 1)] == pytest.approx(6.2e5, rel=0.02)


def test_paper_product_lemma_is_false_and_domain_sensitivity_holds():
    a, a2, b, b2 = 5.0, 5.0, 2.0, 1.0
    assert a * b - a2 * b2 > 2 * (a - a2) * (b - b2)  # 5 > 0: C.1's "lemma" fails
    # domain sensitivities bound the change of every released input over random neighbours
    rng = np.random.default_rng(0)
    d, bx, by = 3, 2.0, 1.5
    sens = g.domain_sensitivities(d, (bx, by))
    keys = g.stat_keys(d)
    for _ in range(2000):
        x = rng.normal(size=(2, d))
        x *= (bx * rng.random((2, 1))) / np.linalg.norm(x, axis=1, keepdims=True)
        yy = rng.uniform(-by, by, 2)
        dd = rng.integers(3, 65, 2)
        v = g._pack(x, yy, keys) / dd[:, None]
        for i, k in enumerate(keys):
            assert abs(v[0, i] - v[1, i]) <= sens[k] + 1e-12
        assert abs(1 / dd[0] - 1 / dd[1]) <= sens["count"] + 1e-15


def test_dp_claim_flags():
    out, _ = g.simulate_paper_gossip(n=256, seed=0, tol=1e-12)  # eps = 4: 0.8 per run
    rel = g.gossip_release(out)
    assert not rel.dp_claim_valid
    for word in ("lemma", "l_reg"):
        assert word in rel.dp_claim_note
    assert "per-run epsilon" not in rel.dp_claim_note
    out, _ = g.simulate_paper_gossip(n=256, seed=0, tol=1e-12, epsilon=64)
    assert "per-run epsilon < 1, here 12.8" in g.gossip_release(out).dp_claim_note
    A = g.synthetic_graph(256, seed=1)
    rng = np.random.default_rng(1)
    X, y = rng.normal(size=(256, 2)), rng.normal(size=256)
    out, _ = g.simulate_gossip(A, X, y, epsilon=4, delta=1e-5, bounds=(2, 2), seed=1, tol=1e-12)
    rel = g.gossip_release(out)
    assert rel.dp_claim_valid and "edge-level" in rel.dp_claim_note
    out, _ = g.simulate_paper_gossip(n=256, seed=0, tol=1e-12, clip="paper")
    rel = g.gossip_release(out)
    assert not rel.dp_claim_valid and "2 s_i - a" in rel.dp_claim_note
    assert rel.provenance["noise_cov_is_upper_bound"]


# -- adapter ------------------------------------------------------------------------------------------


def _linear_rows(n, rng, intercept=True):
    x = rng.normal(0.5, 0.4, n)
    X = np.column_stack([np.ones(n), x]) if intercept else rng.normal(0, 0.6, (n, 2))
    y = X @ [1.0, 0.5] + rng.normal(0, 0.3, n)
    return X, y


def test_adapter_noiseless_mapping_and_scaling(graph512):
    rng = np.random.default_rng(0)
    X, y = _linear_rows(512, rng)
    out, tr = g.simulate_gossip(graph512, X, y, epsilon=4, delta=1e-5, bounds=(3, 3),
                                intercept=True, noise=False, seed=0)
    rel = g.gossip_release(out, bias_correct=False)
    np.testing.assert_allclose(rel.S_hat[0], X.T @ X, rtol=1e-9)
    np.testing.assert_allclose(rel.z_hat[0], X.T @ y, rtol=1e-9)
    assert rel.S_hat[0, 0, 0] == pytest.approx(512, rel=1e-12) and rel.J == 1 and rel.n[0] == 512
    # the count entry is exact: zero row/column in the noise covariance
    assert np.all(rel.noise_cov[0][0] == 0) and np.all(rel.noise_cov[0][:, 0] == 0)
    # noise_cov = n mu_d2 [diag(sigma^2) + sigma_0^2 m m^T]; with the true mu_d2 given
    rel2 = g.gossip_release(out, bias_correct=False, mu_d2=tr.mu_d2)
    m = np.r_[0.0, tr.means[1:]]
    sig = np.array([0.0] + [out.sigmas[k] for k in out.keys[1:]])
    expect = 512 * tr.mu_d2 * (np.diag(sig**2) + out.sigmas["count"] ** 2 * np.outer(m, m))
    np.testing.assert_allclose(rel2.noise_cov[0], expect, rtol=1e-9, atol=1e-9)
    # the kappa run recovers mu_d2 exactly when noiseless
    assert rel.provenance["mu_d2_hat"] == pytest.approx(tr.mu_d2, rel=1e-9)
    assert rel.provenance["wishart_S"] is False and rel.provenance["s_noise"] == "eiv"


def test_adapter_release_roundtrip_and_normalx_refusal(tmp_path, graph512):
    rng = np.random.default_rng(1)
    X, y = _linear_rows(512, rng)
    out, _ = g.simulate_gossip(graph512, X, y, epsilon=40, delta=1e-5, bounds=(3, 3),
                               intercept=True, seed=1, tol=1e-12)
    out2, _ = g.simulate_gossip(graph512, X, y, epsilon=40, delta=1e-5, bounds=(3, 3),
                                intercept=True, seed=2, tol=1e-12)  # a second network's run
    rel = g.gossip_releases([out, out2])
    assert rel.J == 2
    path = rel.save(tmp_path / "r.json")
    back = bayesdp.load_release(path)
    np.testing.assert_array_equal(back.noise_cov, rel.noise_cov)
    assert back.provenance["protocol"] == "gossip-sigo" and back.provenance["wishart_S"] is False
    with pytest.raises(BayesdpInputError, match="Wishart"):
        cf.require_wishart_valid(back, "normalx")
    with pytest.raises(BayesdpInputError, match="agent"):
        g.gossip_release(out, agent=10_000)
    with pytest.raises(BayesdpInputError, match="bounds"):
        g.simulate_gossip(graph512, X, y, epsilon=1, delta=1e-5)


def test_fixeds_matches_fast_and_normalx_refused():
    """MCMC-fixedS with sigma_y^2 held fixed reproduces Bayes-fixedS-fast on a gossip release (a
    correlated noise_cov; the paper's design, theta0 ~ 4096, where the treatment of the S noise
    matters) for the recommended "eiv" and the conditional treatment, which differ here; normalX
    is refused (ratio estimate, not Wishart)."""
    out, _ = g.simulate_paper_gossip(n=1024, theta=np.array([4100.0, 1.2]), epsilon=64.0,
                                     tol=1e-12, seed=5)
    rel = g.gossip_release(out)
    assert rel.provenance["s_noise"] == "eiv"
    priors = Priors(m=np.array([4096.0, 1.0]), C=np.diag([50.0**2, 0.5**2]))
    post = {k: assert_fixeds_matches_fast(rel, priors, 8.0**2 / 12, k, seed=4)
            for k in ("eiv", "conditional")}
    assert posteriors_differ(post["eiv"], post["conditional"])
    with pytest.raises(BayesdpInputError, match="Wishart"):
        bayesdp.fit(rel, method="normalx", num_samples=5, num_warmup=5)


# -- the noise law (Monte Carlo over the privacy noise, converged weights) ------------------------------


def _mc_outputs(out, tr, reps, rng):
    """Draws of (D, N) at convergence: the gossip is linear, so agent j's output is pi . nu."""
    keys = [k for k in out.keys if not (out.intercept and k == ("S", 0, 0))]
    base = np.column_stack([1.0 / tr.degrees, g._pack(tr.X, tr.y, keys) / tr.degrees[:, None]])
    sig = np.array([out.sigmas["count"]] + [out.sigmas[k] for k in keys])
    mean = tr.pi @ base
    Z = mean + math.sqrt(tr.kappa) * sig * rng.standard_normal((reps, sig.size))
    return Z, mean, sig


def test_raw_outputs_exact_gaussian_and_ratio_moments():
    n = 1024
    A = g.synthetic_graph(n, seed=11)
    rng = np.random.default_rng(11)
    X, y = _linear_rows(n, rng, intercept=False)
    out, tr = g.simulate_gossip(A, X, y, epsilon=200, delta=1e-5, bounds=(2, 2), seed=12,
                                tol=1e-12)
    # one real run agrees with the converged-weight representation
    np.testing.assert_allclose(out.D[3], tr.pi @ tr.extra["W"][:, 0], rtol=1e-9)
    # raw D, N_a ~ N(pi . s/d, kappa sigma^2): check the law of the real iterative simulator
    R = 300
    D = np.empty(R)
    for r in range(R):
        o, _ = g.simulate_gossip(A, X, y, epsilon=200, delta=1e-5, bounds=(2, 2), seed=1000 + r,
                                 tol=1e-12, kappa_run=False)
        D[r] = o.D[0]
    sd0 = math.sqrt(tr.kappa) * out.sigmas["count"]
    assert abs(D.mean() - 1 / tr.mu_d) < 4 * sd0 / math.sqrt(R)
    chi = (R - 1) * D.var(ddof=1) / sd0**2
    assert stats.chi2.cdf(chi, R - 1) > 0.0005 and stats.chi2.sf(chi, R - 1) > 0.0005
    # ratio: E[m] = mu (1 + sigma_0^2 mu_d2 / n) and the delta-method covariance
    Rm = 40000
    Z, _, sig = _mc_outputs(out, tr, Rm, np.random.default_rng(13))
    m = Z[:, 1:] / Z[:, :1]
    mu = tr.means
    bias = out.sigmas["count"] ** 2 * tr.mu_d2 / n
    se = m.std(0, ddof=1) / math.sqrt(Rm)
    assert np.all(np.abs(m.mean(0) - mu * (1 + bias)) < 4.5 * se)
    pred = (tr.mu_d2 / n) * (np.diag(sig[1:] ** 2) + sig[0] ** 2 * np.outer(mu, mu))
    emp = np.cov(m.T)
    # variance: sampling sd of a variance estimate is ~ sqrt(2/R); allow the delta-method error too
    np.testing.assert_allclose(np.diag(emp) / np.diag(pred), 1.0, atol=5 * math.sqrt(2 / Rm) + 0.02)


def test_ratio_covariance_correlated_regime():
    """Where the shared denominator dominates (the paper's regime) the errors are correlated as
    predicted: corr(m_y, m_yx) ~ 1 and the full delta-method covariance matches within 15%."""
    out, tr = g.simulate_paper_gossip(n=4096, epsilon=64, seed=3, tol=1e-12)
    Z, _, sig = _mc_outputs(out, tr, 40000, np.random.default_rng(4))
    m = Z[:, 1:] / Z[:, :1]
    mu = tr.means[1:]
    assert tr.extra["W"].shape[1] == 5
    pred = (tr.mu_d2 / 4096) * (np.diag(sig[1:] ** 2) + sig[0] ** 2 * np.outer(mu, mu))
    emp = np.cov(m.T)
    np.testing.assert_allclose(np.diag(emp), np.diag(pred), rtol=0.15)
    corr = lambda C: C / np.sqrt(np.outer(np.diag(C), np.diag(C)))  # noqa: E731
    # sampling sd of a correlation is <= 1/sqrt(R) = 0.005
    np.testing.assert_allclose(corr(emp), corr(pred), atol=0.03)
    assert corr(emp)[2, 3] > 0.99 and corr(pred)[2, 3] > 0.99


def test_ratio_bias_at_paper_defaults():
    """E[m_a] = mu_a (1 + b + 3 b^2 + ...), b = sigma_0^2 mu_d2 / n (E[1/r] for r ~ N(1, b));
    the bias is real (> 10 SE) and the adapter's correction removes it."""
    out, tr = g.simulate_paper_gossip(n=1024, seed=3, tol=1e-12)
    R = 200_000
    Z, _, _ = _mc_outputs(out, tr, R, np.random.default_rng(1))
    m = Z[:, 1:] / Z[:, :1]
    mu = tr.means[1:]
    b = out.sigmas["count"] ** 2 * tr.mu_d2 / 1024
    rel = m.mean(0) / mu - 1
    se = m.std(0) / math.sqrt(R) / np.abs(mu)
    for i in (2, 3):  # m_y, m_yx: precise enough to see the bias
        assert abs(rel[i] - (b + 3 * b**2)) < 4.5 * se[i]
        assert rel[i] > 10 * se[i]
        assert abs((1 + rel[i]) / (1 + b) - 1) < 4.5 * se[i]


def test_corrected_go_error_against_monte_carlo():
    """Corrected (6.13) with the Dawson heuristics (B.15/B.16) vs Monte Carlo at the paper's
    defaults (report section 6: within ~0.1%; asserted within 3 SE + 2%)."""
    e1, e2 = aa.reciprocal_gaussian_moments(2.0, 1e-3)
    assert e1 == pytest.approx(0.5, rel=1e-6) and e2 == pytest.approx(0.25, rel=1e-5)
    out, tr = g.simulate_paper_gossip(n=1024, seed=5, tol=1e-12)
    n = 1024
    rng = np.random.default_rng(6)
    R = 200_000
    Z, _, sig = _mc_outputs(out, tr, R, rng)
    sig_c = 1.7  # any central-baseline noise: it enters additively
    for i in (2, 3):  # y and yx moments
        mu_a = tr.means[1 + i]
        A = mu_a + sig_c / math.sqrt(n) * rng.standard_normal(R)
        err = (A - Z[:, 1 + i] / Z[:, 0]) ** 2
        theo = aa.theoretical_go_error(mu_a, sig[1 + i], sig[0], sig_c, tr.mu_d, tr.mu_d2, n)
        assert abs(err.mean() - theo) < 3 * err.std() / math.sqrt(R) + 0.02 * theo


def test_mse_rate_one_over_n():
    """Theorem 2 analogue: n * MSE of the ratio moments is flat in n (slope of log MSE ~ -1)."""
    rng = np.random.default_rng(21)
    ns = [256, 512, 1024, 2048]
    mse = []
    for n in ns:
        A = g.synthetic_graph(n, seed=rng)
        X, y = _linear_rows(n, rng, intercept=False)
        out, tr = g.simulate_gossip(A, X, y, epsilon=100, delta=1e-5, bounds=(2, 2), seed=rng,
                                    it_go=0)
        Z, _, _ = _mc_outputs(out, tr, 20000, rng)
        m = Z[:, 1:] / Z[:, :1]
        mse.append(np.mean((m - tr.means) ** 2, axis=0))
    slope = np.polyfit(np.log(ns), np.log(np.array(mse)), 1)[0]
    assert np.all((slope > -1.2) & (slope < -0.8)), slope


# -- closed form --------------------------------------------------------------------------------------


def test_vech_product_matrix_identity():
    rng = np.random.default_rng(0)
    for d in (1, 2, 4):
        th = rng.normal(size=d)
        E = rng.normal(size=(d, d))
        E = E + E.T
        np.testing.assert_allclose(layout.vech_product_matrix(th) @ layout.vech(E), E @ th, rtol=1e-12)
        np.testing.assert_allclose(layout.vech_product_tensor(d) @ th, layout.vech_product_matrix(th))


def test_eiv_covariance_works_in_jax():
    jnp = pytest.importorskip("jax.numpy")
    from bayesdp._jax import enable_x64

    enable_x64()
    rng = np.random.default_rng(1)
    d, k = 3, 6
    L = rng.normal(size=(2, k + d, k + d))
    C = L @ np.swapaxes(L, 1, 2)
    th = rng.normal(size=d)
    ref = layout.eiv_covariance(C[:, :k, :k], C[:, :k, k:], C[:, k:, k:], th)
    got = layout.eiv_covariance(jnp.asarray(C[:, :k, :k]), jnp.asarray(C[:, :k, k:]),
                                jnp.asarray(C[:, k:, k:]), jnp.asarray(th), xp=jnp)
    np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-10)
    M = np.hstack([-layout.vech_product_matrix(th), np.eye(d)])
    np.testing.assert_allclose(ref[1], M @ C[1] @ M.T, rtol=1e-10)


def test_iid_path_unchanged_and_conditional_formula():
    rel = bayesdp.release(np.random.default_rng(0).normal(size=(200, 3)),
                          np.random.default_rng(1).normal(size=200), epsilon=1, delta=1e-5,
                          bounds=(3, 3), nodes=2, seed=0)
    pri = Priors.paper().resolve(3)
    S = cf.fixed_s_estimate(rel)
    old_mean, old_cov, _ = cf.gaussian_theta_posterior(
        S, rel.z_hat, 0.5, rel.sigma_z[:, None, None] ** 2 * np.eye(3), pri.m, pri.C)
    new = cf.fast_posterior(rel, pri, sigma_y2=0.5)
    assert new["s_noise"] == "conditional"
    np.testing.assert_array_equal(new["mean"], old_mean)
    np.testing.assert_array_equal(new["cov"], old_cov)
    shift, Sig = layout.z_given_s_noise(rel, S)
    assert np.all(shift == 0)
    # conditional Gaussian by a direct Schur complement on a random correlated covariance
    rng = np.random.default_rng(2)
    d, k = 2, 3
    L = rng.normal(size=(k + d, k + d))
    cov = L @ L.T
    rel2 = bayesdp.Release(S_hat=np.array([[[5.0, 1.0], [1.0, -0.5]]]), z_hat=[[1.0, 2.0]], n=[10],
                           sigma_s=[1.0], sigma_z=[1.0], noise_cov=cov[None])
    S2 = cf.fixed_s_estimate(rel2)
    shift, Sig = layout.z_given_s_noise(rel2, S2)
    G = cov[k:, :k] @ np.linalg.inv(cov[:k, :k])
    np.testing.assert_allclose(shift[0], G @ layout.vech(rel2.S_hat[0] - S2[0]), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(Sig[0], cov[k:, k:] - G @ cov[:k, k:], rtol=1e-8, atol=1e-12)
    _, V = layout.z_given_s_noise(rel2, S2, s_noise="eiv", theta=np.array([2.0, -1.0]))
    B = layout.vech_product_matrix([2.0, -1.0])
    M = np.hstack([-B, np.eye(d)])  # e_z - E_S theta
    np.testing.assert_allclose(V[0], M @ cov @ M.T, rtol=1e-10)
    with pytest.raises(BayesdpInputError, match="s_noise"):
        cf.fast_posterior(rel2, Priors.paper().resolve(2), sigma_y2=1.0, s_noise="nope")


def test_cli_simulate_network_gossip(tmp_path):
    from bayesdp.cli import network as cli_network

    p = argparse.ArgumentParser()
    cli_network.register(p.add_subparsers())
    out = tmp_path / "rel.json"
    a = p.parse_args(["simulate-network", "gossip", "--networks", "2", "--agents", "600",
                      "--epsilon", "100", "--bounds", "2", "2.5", "--intercept", "--x-mean", "0.5",
                      "--out", str(out), "--truth-out", str(tmp_path / "t.json")])
    assert a.func(a) == 0
    rel = bayesdp.load_release(out)
    assert rel.J == 2 and rel.noise_cov is not None and rel.provenance["protocol"] == "gossip-sigo"
    idata = bayesdp.fit(rel, method="fast", seed=0, num_samples=10, num_chains=1)
    assert idata.posterior["theta"].shape == (1, 10, 2)
    assert bayesdp.diagnostics.attrs(idata)["s_noise"] == "eiv"  # the adapter's recommendation


# -- end to end calibration --------------------------------------------------------------------------


def _as_independent_holders(rels):
    """The negative control's deliberate mistake: agents of ONE network stacked as if they were
    independent holders. (combine_releases refuses this when agents' statistics are identical,
    as they are once the consensus has converged, so the stacking is done here by hand.)"""
    import dataclasses

    cat = lambda f: np.concatenate([getattr(r, f) for r in rels])  # noqa: E731
    return dataclasses.replace(rels[0], S_hat=cat("S_hat"), z_hat=cat("z_hat"), n=cat("n"),
                               sigma_s=cat("sigma_s"), sigma_z=cat("sigma_z"),
                               noise_cov=cat("noise_cov"),
                               holder_names=tuple(str(a) for a in range(len(rels))))


def _coverage_linear(reps, n, seed, eps=300.0):
    """Nominal 90% intervals of Bayes-fixedS-fast on adapted releases, theta drawn from the prior.
    Also the negative control: 10 agents of the same network used as 10 independent holders."""
    rng = np.random.default_rng(seed)
    pri = Priors(m=np.array([1.0, 0.0]), C=np.diag([0.04, 0.04])).resolve(2)
    sy, bx, by = 0.3, 2.0, 2.5
    q = stats.norm.ppf(0.95)
    hit, hit_bad = [], []
    for _ in range(reps):
        A = g.synthetic_graph(n, seed=rng)
        th = rng.multivariate_normal(pri.m, pri.C)
        x = rng.normal(0.5, 0.4, n)
        X = np.column_stack([np.ones(n), x])
        X, _, _ = privacy.clip_rows(X, np.zeros(n), bx, by)
        X[:, 0] = 1.0
        y = np.clip(X @ th + rng.normal(0, sy, n), -by, by)
        out, _ = g.simulate_gossip(A, X, y, epsilon=eps, delta=1e-5, bounds=(bx, by),
                                   it_go=1024, tol=1e-12, intercept=True, seed=rng)
        post = cf.fast_posterior(g.gossip_release(out), pri, sigma_y2=sy**2)
        hit.append(np.abs(post["mean"] - th) < q * np.sqrt(np.diag(post["cov"])))
        bad = _as_independent_holders([g.gossip_release(out, agent=a) for a in range(10)])
        pb = cf.fast_posterior(bad, pri, sigma_y2=sy**2)
        hit_bad.append(np.abs(pb["mean"] - th) < q * np.sqrt(np.diag(pb["cov"])))
    return np.mean(hit, axis=0), np.mean(hit_bad, axis=0)


@pytest.mark.slow
def test_calibration_linear_design():
    reps = 200
    cov, cov_bad = _coverage_linear(reps, 4000, seed=2024)
    lo, hi = binomial_band(reps)
    assert np.all((cov >= lo) & (cov <= hi)), (cov, lo, hi)
    assert np.all(cov_bad < lo), cov_bad  # one network's agents as independent holders


def _coverage_paper(reps, seed, eps):
    rng = np.random.default_rng(seed)
    pri = Priors(m=np.array([4096.0, 1.0]), C=np.diag([50.0**2, 0.5**2])).resolve(2)
    q = stats.norm.ppf(0.95)
    res = {"eiv": [], "conditional": []}
    for _ in range(reps):
        th = rng.multivariate_normal(pri.m, pri.C)
        out, _ = g.simulate_paper_gossip(n=1024, theta=th, epsilon=eps, tol=1e-12, seed=rng)
        rel = g.gossip_release(out)
        for k in res:
            p = cf.fast_posterior(rel, pri, sigma_y2=8.0**2 / 12, s_noise=k)
            res[k].append(np.abs(p["mean"] - th) < q * np.sqrt(np.diag(p["cov"])))
    return {k: np.mean(v, axis=0) for k, v in res.items()}


@pytest.mark.slow
def test_calibration_paper_design_eiv_and_control():
    """The paper's use case (theta0 = 4096): the errors-in-variables treatment covers; ignoring the
    S noise (the paper's fixed-S plug-in, "conditional") under-covers badly."""
    reps = 200
    cov = _coverage_paper(reps, seed=77, eps=64.0)
    lo, hi = binomial_band(reps)
    assert np.all((cov["eiv"] >= lo) & (cov["eiv"] <= hi)), cov
    assert np.all(cov["conditional"] < lo), cov


def test_calibration_smoke():
    """Quick version of the calibration checks (few reps, loose band) for the fast suite."""
    reps = 30
    cov, cov_bad = _coverage_linear(reps, 1500, seed=5, eps=600.0)
    lo, hi = binomial_band(reps, level=0.999)
    assert np.all(cov >= lo), cov
    assert np.all(cov_bad < 0.75), cov_bad
