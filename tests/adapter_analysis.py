"""The network adapters' analysis code that only the tests use (docs/adapters/): PriCER's exact
moments, MSE bounds and realised privacy, and [J]'s Adam design solver; the consensus protocol's
spectral gap and exact cost of privacy; the gossip protocol's graph invariants, limits and the
paper's corrected error formula. Imported by the adapter tests (pyproject.toml's pytest
pythonpath puts this folder on sys.path)."""

import math

import numpy as np
import scipy.sparse as sp
from scipy.sparse import csgraph

from bayesdp.adapters import consensus as cm
from bayesdp.adapters import pricer as pm
from bayesdp.errors import BayesdpInputError


# -- PriCER (docs/adapters/pricer.md) ----------------------------------------------------------


def _C_matrix(net, design):
    """Cov(c) (n, n) of the random node weights c_i = sum_j tau_j tau_ij alpha_ij."""
    P, E = net.dense()
    A, _ = design.dense(net)
    p = net.p
    W = P * A  # p_ij alpha_ij
    C = (W * (p * (1 - p))) @ W.T
    C += (p[:, None] * p[None, :]) * (E - P * P.T) * A * A.T * (1 - np.eye(net.n))
    C += np.diag(np.sum(p[None, :] * P * (1 - P) * A ** 2, axis=1))
    return C


def exact_moments(stats, net, design):
    """Exact E and Cov of the SUM-scale output n xhat given the node vectors (docs/adapters/pricer.md).

    Returns (mean (D,), cov (D, D), C (n, n) = Cov(c), kappa (n,))."""
    X = np.asarray(stats, dtype=float)
    kappa = design.kappa(net)
    C = _C_matrix(net, design)
    mean = kappa @ X
    cov = X.T @ C @ X + design.v_expected(net) * np.eye(X.shape[1])
    return mean, cov, C, kappa


def mse_exact(stats, net, design):
    """Exact E||xhat - xbar||^2 (mean scale)."""
    X = np.asarray(stats, dtype=float)
    n = net.n
    mean, cov, C, kappa = exact_moments(X, net, design)
    bias = (kappa - 1) @ X
    return float((np.trace(cov) + bias @ bias) / n ** 2)


def mse_bound_paper(net, design, R, dim):
    """[J] Thm III.1 (sigma_tiv^2 + sigma_pr^2), NOT an upper bound for biased designs."""
    return pm.design_objective(net, design.alpha, design.sigma, R, dim)


def mse_bound_valid(net, design, R, dim):
    """Corrected worst-case bound: (sum_i |kappa_i - 1|)^2 replaces (sum_i (kappa_i - 1))^2."""
    csum, kappa = pm._tiv_sum(net, design.alpha)
    n = net.n
    return float(R ** 2 / n ** 2 * (csum + np.sum(np.abs(kappa - 1)) ** 2)
                 + dim / n ** 2 * np.sum(net.p[net.dst] * net.pl * design.sigma ** 2))


def local_epsilon(net, design, priv):
    """Realised peer-to-peer (eps_ij, p_ij delta_ij) per edge ((J-6), classic mechanism), with the
    sensitivity of ``priv`` (2R by default). Edges with alpha = 0 carry no data: eps = 0."""
    _, delta = priv.per_edge(net)
    sens = priv.sensitivity
    with np.errstate(divide="ignore", invalid="ignore"):
        eps = np.sqrt(2 * np.log(1.25 / delta)) * sens * design.alpha / design.sigma
    eps = np.where(design.alpha > 0, eps, 0.0)
    return eps, net.pl * delta


def bernstein_radius(sigma2, p, delta_prime, variant="standard"):
    """r with Pr(|zeta - zetabar| >= r) <= delta' for zeta = sum_k tau_k sigma2_k, tau_k ~ Ber(p_k)
    independent (Cor. IV.4). "standard": Bernstein's inequality, r = LM/3 + sqrt(L^2 M^2/9 + 2LV),
    L = log(2/delta'), M = max sigma2, V = sum p(1-p) sigma2^2. "paper": (J-8)/(J-69) as printed,
    (M/3 + sqrt(M/9 + 4V/L))/(2/L): dimensionally wrong; for comparison only."""
    s2 = np.asarray(sigma2, dtype=float)
    p = np.asarray(p, dtype=float)
    if s2.size == 0:
        return 0.0
    L = math.log(2.0 / delta_prime)
    M = float(np.max(s2))
    V = float(np.sum(p * (1 - p) * s2 ** 2))
    if variant == "standard":
        return L * M / 3 + math.sqrt(L ** 2 * M ** 2 / 9 + 2 * L * V)
    if variant == "paper":
        return (M / 3 + math.sqrt(M / 9 + 4 * V / L)) / (2 / L)
    raise BayesdpInputError(f"variant must be 'standard' or 'paper', got {variant!r}")


def optimize_design_adam(net, priv, dim, *, lam=0.0, reg="l1", lr=0.01, iters=2000, seed=0):
    """[J]'s bias-penalised problem (J-15) as in the authors' code: Adam on (A, Sigma) with the
    cone projection (J-50)-(J-52) after every step, init alpha ~ U(0, 0.1), sigma = rho alpha.

    Reproduces [J] Table I. Dense gradients; for small networks.
    """
    rng = np.random.default_rng(seed)
    R = float(priv.radius)
    rho = priv.rho(net)
    pj, w, r = pm._coefs(net)
    n = net.n
    hasrev = net.rev >= 0
    revi = np.maximum(net.rev, 0)
    a = rng.uniform(0, 0.1, size=net.n_edges) * (net.pl > 0)
    s = rho * a
    x = np.concatenate([a, s])
    m1 = np.zeros_like(x)
    m2 = np.zeros_like(x)
    b1, b2, eps = 0.9, 0.999, 1e-8

    def proj(a, s):
        a2, s2 = a.copy(), s.copy()
        c1 = (s >= 0) & (a < 0)
        c2 = ~c1 & ((s < 0) | (s < rho * a))
        xx = (a + rho * s) / (1 + rho ** 2)
        a2 = np.where(c1, 0.0, np.where(c2, np.maximum(xx, 0), a))
        s2 = np.where(c1, s, np.where(c2, rho * np.maximum(xx, 0), s))
        return a2, s2

    for t in range(1, iters + 1):
        a, s = x[:net.n_edges], x[net.n_edges:]
        u = np.bincount(net.dst, weights=net.pl * a, minlength=n)
        ra = np.where(hasrev, a[revi], 0.0)
        kappa = np.bincount(net.src, weights=w * a, minlength=n)
        ga = R ** 2 / n ** 2 * (2 * pj * (1 - pj) * net.pl * u[net.dst] + 2 * w * (1 - net.pl) * a
                                + 2 * r * ra + 2 * np.sum(kappa - 1) * w)
        if reg == "l1":
            ga = ga + lam * np.sign(kappa - 1)[net.src] * w
        elif reg == "l2":
            ga = ga + lam * (kappa - 1)[net.src] * w
        else:
            raise BayesdpInputError(f"reg must be 'l1' or 'l2', got {reg!r}")
        gs = 2 * dim / n ** 2 * w * s
        g = np.concatenate([ga, gs])
        m1 = b1 * m1 + (1 - b1) * g
        m2 = b2 * m2 + (1 - b2) * g ** 2
        x = x - lr * (m1 / (1 - b1 ** t)) / (np.sqrt(m2 / (1 - b2 ** t)) + eps)
        a, s = proj(x[:net.n_edges], x[net.n_edges:])
        a = a * (net.pl > 0)
        x = np.concatenate([a, s])
    a, s = x[:net.n_edges], x[net.n_edges:]
    d = pm.PricerDesign(alpha=a, sigma=s, info={"solver": "adam+cone projection ([J], authors' code)"})
    kap = d.kappa(net)
    d.info.update(bias_l1=float(np.sum(np.abs(kap - 1))), mse=pm.design_objective(net, a, s, R, dim))
    return d


# -- consensus (docs/adapters/consensus.md) ----------------------------------------------------


def second_eigenvalue_modulus(A):
    """(beta*, lambda_2, lambda_n) of a symmetric stochastic A; beta* = max(lambda_2, |lambda_n|)
    (the paper calls it the spectral gap; it is the SLEM). Sparse shift-invert for large n."""
    A = sp.csr_matrix(A)
    n = A.shape[0]
    if n <= 400:
        lam = np.linalg.eigvalsh(A.toarray())
        return float(max(lam[-2], abs(lam[0]))), float(lam[-2]), float(lam[0])
    from scipy.sparse.linalg import eigsh
    top = np.sort(eigsh(A, k=2, sigma=1.0 + 1e-3, which="LM", return_eigenvectors=False))
    bot = eigsh(A, k=1, sigma=-1.0 - 1e-3, which="LM", return_eigenvectors=False)
    l2, ln = float(top[0]), float(bot[0])
    return max(l2, abs(ln)), l2, ln


def cop_sq_exact(A, T, scales, algorithm, agents=None):
    """Exact E||nu - mu||^2 (Cost of Privacy squared) summed over ``agents`` (all by default), per
    coordinate: sum_i sum_k w_ik^2 2 b_k^2 (docs/adapters/consensus.md). Cost O(|agents| T nnz)."""
    A = sp.csr_matrix(A)
    n = A.shape[0]
    b = cm._scales(scales, n)
    agents = np.arange(n) if agents is None else np.atleast_1d(agents)
    tot = 0.0
    for i in agents:
        w = cm.consensus_weights(A, T, algorithm, int(i))
        tot += float(np.sum(w ** 2 * 2 * (b ** 2 if w.ndim == 1 else b[None, :] ** 2)))
    return tot


# -- gossip (docs/adapters/gossip.md) ----------------------------------------------------------


def graph_summary(A) -> dict:
    """Invariants the protocol needs: symmetric, simple, connected, non-bipartite; degree stats."""
    A = sp.csr_matrix(A)
    deg = np.asarray(A.sum(axis=1)).ravel()
    ncomp, _ = csgraph.connected_components(A, directed=False)
    return {
        "n": int(A.shape[0]),
        "edges": int(A.nnz // 2),
        "symmetric": bool((A != A.T).nnz == 0),
        "self_loops": int(np.count_nonzero(A.diagonal())),
        "connected": bool(ncomp == 1),
        "bipartite": bool(_is_bipartite(A)) if ncomp == 1 else None,
        "min_degree": int(deg.min()),
        "max_degree": int(deg.max()),
        "mu_d": float(deg.mean()),
        "mu_d2": float((deg**2).mean()),
    }


def _is_bipartite(A):
    order, pred = csgraph.breadth_first_order(A, 0, directed=False, return_predecessors=True)
    depth = np.zeros(A.shape[0], dtype=np.int64)
    for v in order[1:]:
        depth[v] = depth[pred[v]] + 1
    coo = sp.triu(A, 1).tocoo()
    return bool(np.all((depth[coo.row] + depth[coo.col]) % 2 == 1))


def sigo_limit(A, W):
    """Theorem 1: the limit of SimpleGossip, every agent holding sum_i pi_i W_i, pi = d / sum(d)."""
    A = sp.csr_matrix(A)
    deg = np.asarray(A.sum(axis=1)).ravel()
    pi = deg / deg.sum()
    W = np.asarray(W, dtype=float)
    val = pi @ W
    return np.broadcast_to(val, W.shape).copy()


def gossip_weights(A, agent, it_go):
    """Row ``agent`` of T^it_go (the weights agent j's output puts on every input), by it_go sparse
    products with T^T (the output's exact variance at finite it_go is sum_i w_i^2 sigma^2)."""
    A = sp.csr_matrix(A)
    deg = np.asarray(A.sum(axis=1)).ravel()
    Tt = sp.csr_matrix((sp.diags(1.0 / deg) @ A).T)
    v = np.zeros(A.shape[0])
    v[agent] = 1.0
    for _ in range(it_go):
        v = Tt @ v
    return v


def reciprocal_gaussian_moments(mean, sd):
    """Heuristics B.15/B.16 for Z ~ N(mean, sd^2) (principal value / finite part; E[1/Z] does not
    exist strictly): E[1/Z] ~ (sqrt2/sd) F(u), E[1/Z^2] ~ (mean E[1/Z] - 1)/sd^2, u = mean/(sqrt2 sd),
    F = Dawson's function. Both tend to 1/mean, 1/mean^2 as sd -> 0."""
    from scipy.special import dawsn

    u = mean / (math.sqrt(2.0) * sd)
    e1 = math.sqrt(2.0) / sd * dawsn(u)
    return e1, (mean * e1 - 1.0) / sd**2


def theoretical_go_error(mu_a, sigma_a, sigma_0, sigma_central, mu_d, mu_d2, n):
    """Corrected (6.13): e_go = E[(S_dp - N/D)^2] between the central average S_dp of independent
    locally privatised values (noise sd ``sigma_central`` per agent) and the gossip ratio N/D, with
    D ~ N(1/mu_d, kappa sigma_0^2), N ~ N(mu_a/mu_d, kappa sigma_a^2), kappa = mu_d2/(n mu_d^2):
    sigma_central^2/n + mu_a^2 - 2 mu_a (mu_a/mu_d) E[1/D] + E[N^2] E[1/D^2].
    (The printed (6.13)/(B.17)/(B.18) have inconsistent exponents; docs/adapters/gossip.md.)"""
    kappa = mu_d2 / (n * mu_d**2)
    e1, e2 = reciprocal_gaussian_moments(1.0 / mu_d, math.sqrt(kappa) * sigma_0)
    EN2 = kappa * sigma_a**2 + (mu_a / mu_d) ** 2
    return sigma_central**2 / n + mu_a**2 - 2.0 * mu_a * (mu_a / mu_d) * e1 + EN2 * e2


def relays_as_holders(rnd, net, design, priv, d, **options):
    """The WRONG adaptation of a PriCER round, the negative control of the calibration test: every
    reporting relay's output as an independent holder, although the relays share node data and
    link weights. ``rnd`` must be simulated with keep_relays=True; ``options`` go to
    :func:`pricer.round_to_release`, whose release supplies every other field."""
    import dataclasses

    right = pm.round_to_release(rnd, net, design, priv, d, **options)
    if rnd.relay_outputs is None:
        raise BayesdpInputError("relays_as_holders needs a round simulated with keep_relays=True")
    parts = [pm.unpack_suffstats(rnd.relay_outputs[j], d,
                                 include_count=options.get("include_count", True))
             for j in np.flatnonzero(rnd.tau_ps)]
    sd = np.sqrt(np.asarray(rnd.relay_v)[np.flatnonzero(rnd.tau_ps)])
    n = [max(1, int(round(N))) if N is not None else 1 for _, _, N in parts]
    return dataclasses.replace(
        right, S_hat=np.stack([S for S, _, _ in parts]), z_hat=np.stack([z for _, z, _ in parts]),
        n=np.asarray(n), sigma_s=sd, sigma_z=sd, holder_names=(),
        provenance={**right.provenance, "per_relay_WRONG": True})
