"""PriCER (Private Collaborative Estimation via Relaying) over intermittently connected links.

Papers (:data:`PAPERS`): R. Saha, M. Seif, M. Yemini, A. J. Goldsmith & H. V. Poor, "Collaborative
Mean Estimation over Intermittently Connected Networks with Peer-To-Peer Privacy", IEEE
International Symposium on Information Theory (ISIT) 2023, pp. 174-179 ([C]); and the same
authors' journal version, "Privacy Preserving Semi-Decentralized Mean Estimation over
Intermittently-Connected Networks", arXiv:2406.03766, 2024 ([J]).

Protocol (one shot; docs/adapters/pricer.md). Node i holds a vector
x_i in R^D. Stage 1: node i sends ``alpha_ij x_i + n_ij`` (n_ij ~ N(0, sigma_ij^2 I_D), fresh per
link) to every neighbour j over a Bernoulli(p_ij) link (tau_ij), and keeps ``alpha_ii x_i + n_ii``
itself; relay j sums what it received. Stage 2: relay j forwards its sum to the server (PS) over a
Bernoulli(p_j) link (tau_j); the PS outputs ``(1/n) sum_j tau_j x~_j``. Closed form:

    n * xhat = sum_i c_i x_i + eta,   c_i = sum_j tau_j tau_ij alpha_ij,
    eta | tau ~ N(0, v(tau) I_D),     v(tau) = sum_{i,j} tau_j tau_ij sigma_ij^2.

The estimate is unbiased iff kappa_i = sum_j p_j p_ij alpha_ij = 1 for every i ([C] eq. 3).

For regression each node packs ``[vech(X_i^T X_i), X_i^T y_i, N_i]`` into ONE vector, so S and z
share the random weights c_i and ``z ~ S theta`` survives the reweighting;
given the link states the unpacked noise is exactly the Alparslan et al. design with
``sigma_s = sigma_z = sqrt(v)``.

Design (Stage 0). At the optimum sigma_ij = rho_ij alpha_ij (the privacy cone is tight), which
leaves a convex quadratic programme in A >= 0 (the papers call it non-convex):

    min_A  R^2 E[(sum_i c_i - n)^2] + D sum_{ij} p_j p_ij rho_ij^2 alpha_ij^2   s.t. kappa_i = 1.

This is [C]'s problem (C-8) with [J]'s per-link noise. :func:`optimize_design` solves it with the
row-wise KKT / bisection update of [C] (C-15)/(C-20) (each row is a separable QP with one equality),
applied to all rows at once (block Jacobi) followed by an exact line search, so every sweep is
O(number of links) and networks of 10^5 nodes are practical. :func:`optimize_design_isit` is
[C] Alg. 3 (one common sigma, box constraints, alternating with (C-10)).

Graphs are scipy.sparse; per-link quantities live on a directed edge list that includes the self
links (i, i).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Optional, Sequence

import numpy as np

from ..errors import BayesdpInputError
from ..privacy import analytic_gaussian_sigma, check_bounds, clip_rows
from ..releases import layout
from .common import claim_verdict, one_holder_release

# scipy.sparse is imported inside the functions that use it: it is slow to import, and the
# bayesdp command imports this module for its --help
if TYPE_CHECKING:
    import scipy.sparse as sp

#: the protocol's papers, as releases record them (``provenance["reference"]``) and the CLI cites them
PAPERS = ("Saha, Seif, Yemini, Goldsmith & Poor, \"Collaborative Mean Estimation over Intermittently "
          "Connected Networks with Peer-To-Peer Privacy\", IEEE ISIT 2023; journal version \"Privacy "
          "Preserving Semi-Decentralized Mean Estimation over Intermittently-Connected Networks\", "
          "arXiv:2406.03766, 2024")

__all__ = [
    "PricerNetwork",
    "PricerPrivacy",
    "PricerDesign",
    "PricerRound",
    "pack_suffstats",
    "unpack_suffstats",
    "packed_radius",
    "optimize_design",
    "optimize_design_isit",
    "design_objective",
    "simulate_round",
    "ps_epsilon",
    "pricer_release",
    "round_to_release",
    "PricerSimulation",
]


# ----------------------------------------------------------------------------------------------
# packing of regression statistics
# ----------------------------------------------------------------------------------------------
def pack_suffstats(Xs: Sequence[np.ndarray], ys: Sequence[np.ndarray], *, include_count=True):
    """Per-node vectors ``[vech(X_i^T X_i), X_i^T y_i, (N_i)]`` in the release layout
    (:mod:`bayesdp.releases.layout`), the row count N_i in the place of y^T y; shape (n, D)."""
    if len(Xs) != len(ys) or len(Xs) < 1:
        raise BayesdpInputError("Xs and ys must be two non-empty lists of the same length (one per node)")
    d = np.asarray(Xs[0]).shape[-1]
    out = []
    for k, (X, y) in enumerate(zip(Xs, ys)):
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64).reshape(-1)
        if X.ndim != 2 or X.shape[1] != d or X.shape[0] != y.shape[0]:
            raise BayesdpInputError(
                f"Xs[{k}]/ys[{k}] must be (N_i, {d}) and (N_i,), got {X.shape} and {y.shape}")
        out.append(layout.pack_stats(X.T @ X, X.T @ y, X.shape[0] if include_count else None))
    return np.asarray(out)


def unpack_suffstats(vec, d, *, include_count=True):
    """Inverse of :func:`pack_suffstats` for one vector: (S symmetric, z, N or None)."""
    vec = np.asarray(vec, dtype=np.float64)
    D = layout.stat_dim(d, with_yty=include_count)
    if vec.shape != (D,):
        raise BayesdpInputError(f"packed vector must have shape ({D},) for d={d}, got {vec.shape}")
    S, z, rest = layout.unpack_stats(vec, d)
    return S, z.copy(), float(rest[0]) if include_count else None


def packed_radius(max_rows, bound_x, bound_y, *, include_count=True):
    """Node-level norm bound R of a packed vector: N (sqrt(B_x^4 + B_x^2 B_y^2) (+1))."""
    per_row = bound_x ** 4 + bound_x ** 2 * bound_y ** 2
    if include_count:
        return float(max_rows) * math.sqrt(per_row) + float(max_rows)
    return float(max_rows) * math.sqrt(per_row)


# ----------------------------------------------------------------------------------------------
# network
# ----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class PricerNetwork:
    """Bernoulli link network: p (n,) node->PS probabilities, P sparse (n, n) node->node link
    probabilities (P[i, j] = Pr(i -> j); the diagonal is forced to 1), and ``reciprocity`` r in
    [0, 1]: E[tau_ij tau_ji] = p_ij p_ji + r (min(p_ij, p_ji) - p_ij p_ji) (r = 1: fully reciprocal
    links as in the authors' code; r = 0: independent directions).

    Built views (edge list, self links included): ``src`` (sender i), ``dst`` (relay j), ``pl``
    (p_ij), ``E`` (E[tau_ij tau_ji], 1 on self links), ``rev`` (index of the reverse edge or -1).
    """

    p: np.ndarray
    P: sp.csr_matrix
    reciprocity: float = 1.0

    def __post_init__(self):
        import scipy.sparse as sp

        p = np.asarray(self.p, dtype=np.float64).reshape(-1)
        n = p.shape[0]
        if n < 1 or not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
            raise BayesdpInputError("p must be a 1-d array of probabilities in [0, 1] (node -> PS)")
        P = sp.csr_matrix(self.P, dtype=np.float64)
        if P.shape != (n, n):
            raise BayesdpInputError(f"P must be ({n}, {n}) to match p, got {P.shape}")
        P = P.tolil()
        P.setdiag(1.0)
        P = P.tocsr()
        P.eliminate_zeros()
        if np.any(~np.isfinite(P.data)) or np.any(P.data < 0) or np.any(P.data > 1):
            raise BayesdpInputError("P must hold link probabilities in [0, 1]")
        r = float(self.reciprocity)
        if not 0.0 <= r <= 1.0:
            raise BayesdpInputError(f"reciprocity must be in [0, 1], got {self.reciprocity}")
        coo = P.tocoo()
        order = np.lexsort((coo.col, coo.row))
        src = coo.row[order].astype(np.int64)
        dst = coo.col[order].astype(np.int64)
        pl = coo.data[order]
        # reverse edge lookup
        key = src * n + dst
        rkey = dst * n + src
        pos = np.searchsorted(key, rkey)
        pos = np.minimum(pos, len(key) - 1)
        rev = np.where((key[pos] == rkey) & (src != dst), pos, -1)
        prev = np.where(rev >= 0, pl[np.maximum(rev, 0)], 0.0)
        lo = pl * prev
        E = np.where(rev >= 0, lo + r * (np.minimum(pl, prev) - lo), 0.0)
        E = np.where(src == dst, 1.0, E)
        s = lambda k, v: object.__setattr__(self, k, v)  # noqa: E731
        s("p", p)
        s("P", P)
        s("reciprocity", r)
        s("src", src)
        s("dst", dst)
        s("pl", pl)
        s("rev", rev)
        s("E", E)

    @property
    def n(self):
        return int(self.p.shape[0])

    @property
    def n_edges(self):
        return int(self.src.shape[0])

    @classmethod
    def erdos_renyi(cls, n, pc, p, *, reciprocity=1.0):
        """Complete link graph with p_ij = pc for i != j ([J] section VI); p scalar or (n,)."""
        import scipy.sparse as sp

        p = np.broadcast_to(np.asarray(p, dtype=float), (n,)).copy()
        P = np.full((n, n), float(pc))
        np.fill_diagonal(P, 1.0)
        return cls(p=p, P=sp.csr_matrix(P), reciprocity=reciprocity)

    @classmethod
    def from_graph(cls, adjacency, p, link_prob, *, reciprocity=1.0):
        """Links on the edges of an undirected graph (sparse 0/1 adjacency), each up with
        probability ``link_prob`` (scalar, or a sparse matrix of per-edge probabilities)."""
        import scipy.sparse as sp

        A = sp.csr_matrix(adjacency, dtype=np.float64)
        n = A.shape[0]
        A = ((A + A.T) > 0).astype(np.float64).tolil()
        A.setdiag(0.0)
        A = A.tocsr()
        A.eliminate_zeros()
        if sp.issparse(link_prob):
            P = A.multiply(sp.csr_matrix(link_prob)).tocsr()
        else:
            P = A * float(link_prob)
        p = np.broadcast_to(np.asarray(p, dtype=float), (n,)).copy()
        return cls(p=p, P=P, reciprocity=reciprocity)

    @classmethod
    def random_sparse(cls, n, mean_degree, p, link_prob, *, seed, reciprocity=1.0):
        """Sparse Erdos-Renyi graph G(n, mean_degree/(n-1)) with Bernoulli(link_prob) links."""
        import scipy.sparse as sp

        rng = np.random.default_rng(seed)
        m = rng.binomial(n * (n - 1) // 2, min(1.0, mean_degree / max(n - 1, 1)))
        i = rng.integers(0, n, size=2 * m + 10)
        j = rng.integers(0, n, size=2 * m + 10)
        keep = i != j
        i, j = np.minimum(i[keep], j[keep]), np.maximum(i[keep], j[keep])
        key = np.unique(i * n + j)[:m]
        i, j = key // n, key % n
        A = sp.csr_matrix((np.ones(len(i)), (i, j)), shape=(n, n))
        return cls.from_graph(A, p, link_prob, reciprocity=reciprocity)

    def dense(self):
        """Dense (P, E) for small networks (tests)."""
        n = self.n
        P = np.zeros((n, n))
        E = np.zeros((n, n))
        P[self.src, self.dst] = self.pl
        E[self.src, self.dst] = self.E
        return P, E


# ----------------------------------------------------------------------------------------------
# privacy parameters
# ----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class PricerPrivacy:
    """Per-link peer-to-peer privacy targets and the norm bound.

    ``eps``/``delta``: scalars, or arrays aligned with the network's edge list (``net.src``),
    or sparse (n, n) matrices; ``eps_self`` for the self links (default: ``eps``; ``inf`` means the
    own term carries no noise). ``radius`` is R, the bound on ||x_i||_2 (node-level, the paper).
    ``l2_sensitivity``: the sensitivity used in sigma_ij >= rho_ij alpha_ij; default 2R (node-level
    replacement, the paper); a record-level Delta is an extension ([J] App. C). ``mechanism``:
    "classic" (the paper: sqrt(2 log(1.25/delta))/eps, proved only for eps < 1) or "analytic"
    (Balle & Wang 2018, valid for every eps; extension).
    """

    eps: object
    delta: object
    radius: float
    eps_self: object = None
    l2_sensitivity: Optional[float] = None
    mechanism: str = "classic"

    def per_edge(self, net: PricerNetwork):
        """(eps_e, delta_e) aligned with ``net.src``."""
        import scipy.sparse as sp

        def take(v, name):
            if v is None:
                return None
            if sp.issparse(v):
                M = sp.csr_matrix(v)
                return np.asarray(M[net.src, net.dst]).reshape(-1)
            a = np.asarray(v, dtype=float)
            if a.ndim == 0:
                return np.full(net.n_edges, float(a))
            if a.shape == (net.n_edges,):
                return a.copy()
            if a.shape == (net.n, net.n):
                return a[net.src, net.dst]
            raise BayesdpInputError(f"{name} must be a scalar, ({net.n_edges},) per edge, or ({net.n}, {net.n})")
        eps = take(self.eps, "eps")
        delta = take(self.delta, "delta")
        if self.eps_self is not None:
            es = take(self.eps_self, "eps_self")
            eps = np.where(net.src == net.dst, es, eps)
        if np.any(~(eps > 0)):
            raise BayesdpInputError("eps must be > 0 on every link (inf allowed: no privacy)")
        if np.any(~((delta > 0) & (delta < 1))):
            raise BayesdpInputError("delta must be in (0, 1) on every link")
        if not self.radius > 0:
            raise BayesdpInputError(f"radius must be > 0, got {self.radius}")
        if self.mechanism not in ("classic", "analytic"):
            raise BayesdpInputError(f"mechanism must be 'classic' or 'analytic', got {self.mechanism!r}")
        return eps, delta

    @property
    def sensitivity(self):
        return 2.0 * float(self.radius) if self.l2_sensitivity is None else float(self.l2_sensitivity)

    def rho(self, net: PricerNetwork):
        """Slope rho_e of the privacy cone sigma_e >= rho_e alpha_e, per edge."""
        eps, delta = self.per_edge(net)
        if self.mechanism == "classic":
            with np.errstate(divide="ignore"):
                rho = self.sensitivity * np.sqrt(2.0 * np.log(1.25 / delta)) / eps
        else:
            cache = {}
            rho = np.empty(net.n_edges)
            for k, (e, dl) in enumerate(zip(eps, delta)):
                if not np.isfinite(e):
                    rho[k] = 0.0
                    continue
                key = (float(e), float(dl))
                if key not in cache:
                    cache[key] = analytic_gaussian_sigma(e, dl, self.sensitivity)
                rho[k] = cache[key]
        return np.where(np.isfinite(eps), rho, 0.0)


@dataclasses.dataclass(frozen=True, eq=False)
class PricerDesign:
    """Weights alpha_e and noise standard deviations sigma_e per edge (aligned with ``net.src``)."""

    alpha: np.ndarray
    sigma: np.ndarray
    info: dict = dataclasses.field(default_factory=dict)

    def kappa(self, net):
        """kappa_i = sum_j p_j p_ij alpha_ij (expected multiplier of x_i)."""
        return np.bincount(net.src, weights=net.p[net.dst] * net.pl * self.alpha, minlength=net.n)

    def v_expected(self, net):
        """vbar = sum p_j p_ij sigma_ij^2 (expected privacy-noise variance, sum scale)."""
        return float(np.sum(net.p[net.dst] * net.pl * self.sigma ** 2))

    def dense(self, net):
        A = np.zeros((net.n, net.n))
        Sg = np.zeros((net.n, net.n))
        A[net.src, net.dst] = self.alpha
        Sg[net.src, net.dst] = self.sigma
        return A, Sg


# ----------------------------------------------------------------------------------------------
# objective and design optimisation
# ----------------------------------------------------------------------------------------------
def _coefs(net):
    pj = net.p[net.dst]
    w = pj * net.pl
    r = np.where(net.rev >= 0, net.p[net.src] * pj * (net.E - net.pl * np.where(
        net.rev >= 0, net.pl[np.maximum(net.rev, 0)], 0.0)), 0.0)
    return pj, w, r


def _tiv_sum(net, alpha):
    """sum_{i,l} C_il (the link-randomness part of E[(sum c - n)^2]) and the bias part."""
    pj, w, r = _coefs(net)
    u = np.bincount(net.dst, weights=net.pl * alpha, minlength=net.n)
    ra = np.where(net.rev >= 0, alpha[np.maximum(net.rev, 0)], 0.0)
    csum = (np.sum(net.p * (1 - net.p) * u ** 2) + np.sum(w * (1 - net.pl) * alpha ** 2)
            + np.sum(r * alpha * ra))
    kappa = np.bincount(net.src, weights=w * alpha, minlength=net.n)
    return csum, kappa


def design_objective(net, alpha, sigma, R, dim):
    """[J]'s sigma_tiv^2 + sigma_pr^2 ((J-4) + (J-5)) on the MEAN scale (bias term included)."""
    csum, kappa = _tiv_sum(net, alpha)
    n = net.n
    tiv = R ** 2 / n ** 2 * (csum + np.sum(kappa - 1.0) ** 2)
    pr = dim / n ** 2 * np.sum(net.p[net.dst] * net.pl * sigma ** 2)
    return float(tiv + pr)


def optimize_design(net: PricerNetwork, priv: PricerPrivacy, dim: int, *, tol=1e-10,
                    max_sweeps=5000, alpha0=None, _cap=None):
    """Unbiased (kappa_i = 1) per-link design minimising [J]'s MSE with sigma_ij = rho_ij alpha_ij.

    Block coordinate descent over rows: each row is a separable QP with one equality, solved by the
    KKT / bisection update of [C] (C-15)/(C-20), all rows at once, then an exact line search on the
    (convex, homogeneous quadratic) objective. Returns a :class:`PricerDesign`; ``info`` holds the
    objective history and the number of sweeps.
    """
    R = float(priv.radius)
    rho = priv.rho(net)
    if _cap is not None:          # [C]: common sigma fixed, box alpha <= cap, no privacy term
        rho = np.zeros_like(rho)
    pj, w, r = _coefs(net)
    n = net.n
    src = net.src
    has = np.bincount(src, weights=(w > 0).astype(float), minlength=n)
    if np.any(has == 0):
        bad = np.flatnonzero(has == 0)[:5].tolist()
        raise BayesdpInputError(
            f"p/P: nodes {bad} have no link to any relay that can reach the PS (p_j p_ij = 0 for "
            "all j), so no design is unbiased")
    qa = R ** 2 * (pj * (1 - pj) * net.pl ** 2 + w * (1 - net.pl)) + dim * w * rho ** 2
    qa = np.maximum(qa, 1e-12 * max(float(np.max(qa)), 1e-300))
    act = w > 0
    rev = net.rev
    hasrev = rev >= 0
    revi = np.maximum(rev, 0)

    def G(a):
        u = np.bincount(net.dst, weights=net.pl * a, minlength=n)
        ra = np.where(hasrev, a[revi], 0.0)
        return (R ** 2 * (np.sum(net.p * (1 - net.p) * u ** 2) + np.sum(w * (1 - net.pl) * a ** 2)
                          + np.sum(r * a * ra)) + dim * np.sum(w * rho ** 2 * a ** 2))

    def grad(a):
        u = np.bincount(net.dst, weights=net.pl * a, minlength=n)
        ra = np.where(hasrev, a[revi], 0.0)
        return (R ** 2 * (2 * pj * (1 - pj) * net.pl * u[net.dst] + 2 * w * (1 - net.pl) * a
                          + 2 * r * ra) + 2 * dim * w * rho ** 2 * a)

    def block(a):
        u = np.bincount(net.dst, weights=net.pl * a, minlength=n)
        ra = np.where(hasrev, a[revi], 0.0)
        b = R ** 2 * (2 * pj * (1 - pj) * net.pl * (u[net.dst] - net.pl * a) + 2 * r * ra)
        wa = np.where(act, w, 1.0)
        if _cap is not None:
            return capped(b, wa)
        hi = np.full(n, -np.inf)
        np.maximum.at(hi, src, np.where(act, b / wa + 2 * qa / wa ** 2, -np.inf))
        # Newton from the right on the convex piecewise-linear g(lam) = sum w x(lam): every
        # iterate is the exact solution on the current active set; finite convergence.
        lam = hi
        for _ in range(200):
            on = act & ((lam[src] * w - b) > 0)
            num = 1.0 + np.bincount(src, weights=np.where(on, w * b / (2 * qa), 0.0), minlength=n)
            den = np.bincount(src, weights=np.where(on, w ** 2 / (2 * qa), 0.0), minlength=n)
            new = num / den
            if np.all(np.abs(new - lam) <= 1e-14 * np.maximum(1.0, np.abs(lam))):
                lam = new
                break
            lam = new
        x = np.where(act, np.maximum(0.0, (lam[src] * w - b) / (2 * qa)), 0.0)
        k = np.bincount(src, weights=w * x, minlength=n)
        return x / np.where(k > 0, k, 1.0)[src]  # exact kappa = 1 (rescale removes rounding)

    def capped(b, wa):
        # rows with caps: g(lam) = sum w clip((lam w - b)/(2a), 0, cap) is monotone; bisection,
        # then the exact solve with the capped / zero links fixed
        cap = _cap
        lo = np.full(n, np.inf)
        np.minimum.at(lo, src, np.where(act, b / wa, np.inf))
        hi = np.full(n, -np.inf)
        np.maximum.at(hi, src, np.where(act, (b + 2 * qa * cap) / wa, -np.inf))
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            x = np.where(act, np.clip((mid[src] * w - b) / (2 * qa), 0.0, cap), 0.0)
            big = np.bincount(src, weights=w * x, minlength=n) > 1.0
            hi = np.where(big, mid, hi)
            lo = np.where(big, lo, mid)
            if np.all(hi - lo <= 1e-15 * np.maximum(1.0, np.abs(hi))):
                break
        lam = 0.5 * (lo + hi)
        raw = (lam[src] * w - b) / (2 * qa)
        free = act & (raw > 0) & (raw < cap)
        atcap = act & (raw >= cap)
        num = (1.0 - np.bincount(src, weights=np.where(atcap, w * cap, 0.0), minlength=n)
               + np.bincount(src, weights=np.where(free, w * b / (2 * qa), 0.0), minlength=n))
        den = np.bincount(src, weights=np.where(free, w ** 2 / (2 * qa), 0.0), minlength=n)
        lam2 = np.where(den > 0, num / np.where(den > 0, den, 1.0), lam)
        x = np.where(act, np.clip((lam2[src] * w - b) / (2 * qa), 0.0, cap), 0.0)
        return x

    if alpha0 is None:
        tot = np.bincount(src, weights=w, minlength=n)
        a = np.where(act, 1.0 / tot[src], 0.0)
        if _cap is not None:
            a = block(np.zeros_like(w))   # feasible under the box: the row-wise minimiser
    else:
        a = np.asarray(alpha0, dtype=float).copy()
    hist = [G(a)]
    sweeps = 0
    for sweeps in range(1, max_sweeps + 1):
        x = block(a)
        dlt = x - a
        gd = float(grad(a) @ dlt)
        q = G(dlt)
        if q <= 0 or gd >= 0:
            break
        t = min(1.0, -gd / (2 * q))
        a = a + t * dlt
        hist.append(G(a))
        if hist[-2] - hist[-1] <= tol * hist[-1]:
            break
    a = np.where(act, np.maximum(a, 0.0), 0.0)
    if _cap is None:
        kap = np.bincount(src, weights=w * a, minlength=n)
        a = a / kap[src]
    sigma = rho * a
    return PricerDesign(alpha=a, sigma=sigma, info={
        "solver": "block-KKT (C-15/C-20 row updates, Jacobi + exact line search), kappa = 1",
        "sweeps": sweeps, "objective_sum_scale": float(G(a)),
        "objective_mean_scale": float(G(a)) / n ** 2, "history": np.asarray(hist)})


def optimize_design_isit(net, priv, dim, *, tol=1e-12, max_sweeps=5000):
    """[C] Alg. 3: ONE common noise std sigma on every transmission, unbiased (kappa = 1), box
    alpha_ij <= sigma/rho_ij, alternating an A-step (row-wise KKT/bisection, (C-15)/(C-20)) and the
    sigma-step (C-10): sigma = max(max_ij rho_ij alpha_ij, sigma_thr). Starting, as [C] does, from
    sigma = sigma_thr, the A-step keeps rho alpha <= sigma, so (C-10) returns sigma_thr again: the
    alternation stops after one A-step at the smallest feasible sigma (observed here; the paper
    does not say so). ``info["sigma_thr"]``, ``info["objective_mean_scale"]`` ([C]'s objective)."""
    rho = priv.rho(net)
    pj, w, _ = _coefs(net)
    act = w > 0
    inv = np.where(act & (rho > 0), w / np.where(rho > 0, rho, 1.0), np.where(act, np.inf, 0.0))
    per_row = np.bincount(net.src, weights=np.where(np.isfinite(inv), inv, 0.0), minlength=net.n)
    unbounded = np.bincount(net.src, weights=np.isinf(inv).astype(float), minlength=net.n) > 0
    if np.any((per_row <= 0) & ~unbounded):
        raise BayesdpInputError("p/P: some node cannot reach the PS; no unbiased design")
    sigma_thr = float(np.max(np.where(unbounded, 0.0, 1.0 / np.where(per_row > 0, per_row, 1.0))))
    sigma = sigma_thr
    hist = []
    for _ in range(20):
        cap = np.where(rho > 0, sigma / np.where(rho > 0, rho, 1.0), np.inf)
        des = optimize_design(net, priv, dim, tol=tol, max_sweeps=max_sweeps, _cap=cap)
        new = max(float(np.max(rho * des.alpha)), sigma_thr)
        hist.append(sigma)
        if abs(new - sigma) <= 1e-9 * sigma:
            break
        sigma = new
    sig = np.where(net.pl > 0, sigma, 0.0)
    obj = design_objective(net, des.alpha, sig, float(priv.radius), dim)
    return PricerDesign(alpha=des.alpha, sigma=sig, info={
        "solver": "[C] Alg. 3 (common sigma; alternating A-step / sigma-step)",
        "sigma_thr": sigma_thr, "sigma": sigma, "sigma_history": hist,
        "objective_mean_scale": obj})


# ----------------------------------------------------------------------------------------------
# the server-level guarantee ([J] Thm IV.5)
# ----------------------------------------------------------------------------------------------
def ps_epsilon(net, design, priv, delta, delta_prime, kind="data"):
    """[J] Thm IV.5: central (eps~_i, delta~) of every node i against the PS seeing every relay
    output, with the corrected Bernstein radius r_j:

        eps~_i = sum_{j: p_ij > 0, alpha_ij > 0} sqrt(2 log(1.25 p_ij/(delta - p_ij delta')))
                 c alpha_ij R / sqrt(zetabar_j + sigma_jj^2 - r_j),      delta~ = delta sum_j p_j,

    c = 2 for "data", 1 for "identity"; zetabar_j = sum_{k != j} p_kj sigma_kj^2. Returns
    (eps (n,), delta~); eps_i = inf where the theorem gives nothing (some zetabar_j + sigma_jj^2
    <= r_j, or delta <= p_ij delta'). As stated by the paper (with r corrected); the identity
    version inherits Thm IV.2's proof gap (docs/adapters/pricer.md). O(number of links)."""
    c = {"data": 2.0, "identity": 1.0}.get(kind)
    if c is None:
        raise BayesdpInputError(f"kind must be 'data' or 'identity', got {kind!r}")
    if not 0 < delta_prime < 1 or not 0 < delta < 1:
        raise BayesdpInputError(f"delta and delta_prime must be in (0, 1), got {delta}, {delta_prime}")
    R = float(priv.radius)
    n = net.n
    other = net.src != net.dst
    s2 = design.sigma ** 2
    zbar = np.bincount(net.dst, weights=np.where(other, net.pl * s2, 0.0), minlength=n)
    M = np.zeros(n)
    np.maximum.at(M, net.dst, np.where(other, s2, 0.0))
    V = np.bincount(net.dst, weights=np.where(other, net.pl * (1 - net.pl) * s2 ** 2, 0.0), minlength=n)
    L = math.log(2.0 / delta_prime)
    r = L * M / 3 + np.sqrt(L ** 2 * M ** 2 / 9 + 2 * L * V)
    sjj = np.bincount(net.dst, weights=np.where(~other, s2, 0.0), minlength=n)
    den = (zbar + sjj - r)[net.dst]
    gap = delta - net.pl * delta_prime
    used = (design.alpha > 0) & (net.pl > 0)
    ok = (den > 0) & (gap > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        arg = np.where(ok, 1.25 * net.pl / np.where(gap > 0, gap, 1.0), 1.0)
        term = np.sqrt(2 * np.log(np.maximum(arg, 1.0))) * c * design.alpha * R / np.sqrt(
            np.where(den > 0, den, 1.0))
    term = np.where(used, np.where(ok, term, np.inf), 0.0)
    eps = np.bincount(net.src, weights=np.where(np.isfinite(term), term, 0.0), minlength=n)
    bad = np.bincount(net.src, weights=(~np.isfinite(term)).astype(float), minlength=n) > 0
    return np.where(bad, np.inf, eps), delta * float(np.sum(net.p))


# ----------------------------------------------------------------------------------------------
# simulation
# ----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, eq=False)
class PricerRound:
    """One PriCER run. Public: ``estimate`` (mean scale), ``tau_ps`` (the PS knows who reported).
    Private truth (tests only): link states, realised weights c, realised noise variance v,
    the true node vectors' sum and the reweighted sum, relay outputs (optional)."""

    estimate: np.ndarray
    tau_ps: np.ndarray
    tau_links: np.ndarray
    c: np.ndarray
    v_realized: float
    true_sum: np.ndarray
    reweighted_sum: np.ndarray
    relay_outputs: Optional[np.ndarray] = None
    relay_v: Optional[np.ndarray] = None


def _sample_links(net, rng):
    """tau_e per edge (self links 1) with the reciprocity law, and tau_j (node -> PS)."""
    m = net.n_edges
    u = rng.random(m)
    tau = np.zeros(m, dtype=bool)
    self_ = net.src == net.dst
    tau[self_] = True
    single = (net.rev < 0) & ~self_
    tau[single] = u[single] < net.pl[single]
    pair = (net.rev >= 0) & (net.src < net.dst)
    e = np.flatnonzero(pair)
    f = net.rev[e]
    a, b, E = net.pl[e], net.pl[f], net.E[e]
    uu = u[e]
    both = uu < E
    only_a = (uu >= E) & (uu < a)
    only_b = (uu >= a) & (uu < a + b - E)
    tau[e] = both | only_a
    tau[f] = both | only_b
    tau_ps = rng.random(net.n) < net.p
    return tau, tau_ps


def simulate_round(stats, net, design, rng, *, keep_relays=False, links=None):
    """Run Stage 1 and Stage 2 once on node vectors ``stats`` (n, D); fresh noise on every
    transmitted link. ``links`` optionally fixes (tau_e, tau_ps)."""
    import scipy.sparse as sp

    X = np.asarray(stats, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != net.n:
        raise BayesdpInputError(f"stats must be ({net.n}, D), got {X.shape}")
    D = X.shape[1]
    tau, tau_ps = _sample_links(net, rng) if links is None else links
    on = np.flatnonzero(tau)
    msg = design.alpha[on, None] * X[net.src[on]]
    msg += design.sigma[on, None] * rng.standard_normal((len(on), D))
    agg = sp.csr_matrix((np.ones(len(on)), (net.dst[on], np.arange(len(on)))), shape=(net.n, len(on)))
    relays = agg @ msg                                  # x~_j, (n, D)
    total = tau_ps.astype(float) @ relays               # sum_j tau_j x~_j
    est = total / net.n
    used = tau & tau_ps[net.dst]
    c = np.bincount(net.src, weights=np.where(used, design.alpha, 0.0), minlength=net.n)
    v = float(np.sum(np.where(used, design.sigma ** 2, 0.0)))
    rv = None
    if keep_relays:
        rv = np.bincount(net.dst, weights=np.where(tau, design.sigma ** 2, 0.0), minlength=net.n)
    return PricerRound(estimate=est, tau_ps=tau_ps, tau_links=tau, c=c, v_realized=v,
                       true_sum=X.sum(0), reweighted_sum=c @ X,
                       relay_outputs=relays if keep_relays else None, relay_v=rv)


# ----------------------------------------------------------------------------------------------
# adapter
# ----------------------------------------------------------------------------------------------
V_MODES = ("ps_conditional", "expected", "oracle")


def noise_variance(rnd, net, design, v_mode="ps_conditional"):
    """Variance per coordinate of the privacy noise on the sum scale that the release reports.

    "expected": vbar = sum p_j p_ij sigma_ij^2 (public); "ps_conditional" (default):
    sum_j tau_j sum_i p_ij sigma_ij^2 (public to the PS, which knows who reported);
    "oracle": v(tau) (needs every link state: simulation only)."""
    if v_mode == "expected":
        return design.v_expected(net)
    if v_mode == "ps_conditional":
        return float(np.sum(rnd.tau_ps[net.dst] * net.pl * design.sigma ** 2))
    if v_mode == "oracle":
        return float(rnd.v_realized)
    raise BayesdpInputError(f"v_mode must be one of {V_MODES}, got {v_mode!r}")


def sigma_y2_inflation(net, design, rows=None, tau_ps=None, c=None):
    """Factor k with Cov(z_hat - S_c theta | data noise) ~ k sigma_y^2 S_c.

    The reweighting makes the data noise of z equal sigma_y^2 sum c_i^2 S_i rather than
    sigma_y^2 sum c_i S_i (docs/adapters/pricer.md); with rows of equal law, k = sum c_i^2 N_i / sum c_i N_i.
    ``c`` given: that realised value (oracle, simulation only). ``tau_ps`` given (the PS knows
    which relays reported): E[sum c^2 N | tau_PS] / E[sum c N | tau_PS], with
    E[c_i | tau] = sum_j tau_j p_ij alpha_ij and Var(c_i | tau) = sum_j tau_j p_ij (1 - p_ij)
    alpha_ij^2. Neither: the unconditional ratio of expectations (public design only)."""
    N = np.ones(net.n) if rows is None else np.asarray(rows, dtype=float)
    if c is not None:
        c = np.asarray(c, dtype=float)
        return float(np.sum(c ** 2 * N) / np.sum(c * N))
    if tau_ps is not None:
        t = np.asarray(tau_ps, dtype=float)[net.dst]
        m1 = np.bincount(net.src, weights=t * net.pl * design.alpha, minlength=net.n)
        var = np.bincount(net.src, weights=t * net.pl * (1 - net.pl) * design.alpha ** 2,
                          minlength=net.n)
        den = float(np.sum(m1 * N))
        return float(np.sum((m1 ** 2 + var) * N) / den) if den > 0 else 1.0
    C = _C_diag(net, design)
    kappa = design.kappa(net)
    return float(np.sum((kappa ** 2 + C) * N) / np.sum(kappa * N))


def _inflation(rnd, net, design, v_mode, rows):
    if v_mode == "oracle":
        return sigma_y2_inflation(net, design, rows, c=rnd.c)
    if v_mode == "ps_conditional":
        return sigma_y2_inflation(net, design, rows, tau_ps=rnd.tau_ps)
    return sigma_y2_inflation(net, design, rows)


def _C_diag(net, design):
    pj = net.p[net.dst]
    w = pj * net.pl
    # Var(c_i) = sum_j Var(tau_j tau_ij) alpha_ij^2 + covariances through tau_j and pairs:
    # diagonal of the C formula: sum_j p_j p_ij (1 - p_j p_ij) alpha_ij^2
    return np.bincount(net.src, weights=w * (1 - w) * design.alpha ** 2, minlength=net.n)


def _ps_summary(net, design, priv, delta=1e-3, delta_prime=1e-6):
    """Largest PS-level data eps of [J] Thm IV.5 over nodes (corrected Bernstein r), for the
    provenance; inf means the theorem gives no guarantee for these settings."""
    try:
        eps, dt = ps_epsilon(net, design, priv, delta, delta_prime, "data")
    except BayesdpInputError:
        return None
    e = float(np.max(eps))
    return {"max_eps": e if np.isfinite(e) else "inf", "delta_total": dt, "delta": delta,
            "delta_prime": delta_prime}


def _dp_claim(net, design, priv):
    eps, _ = priv.per_edge(net)
    used = design.alpha > 0
    reasons = []
    if priv.mechanism == "classic":
        big = used & (eps >= 1.0)
        if np.any(big):
            reasons.append(
                f"{int(big.sum())} links carry data with eps_ij >= 1 (max {float(np.max(eps[big])):g}); "
                "the classic Gaussian mechanism sigma = Delta sqrt(2 log(1.25/delta))/eps that PriCER "
                "uses is proved only for eps < 1 ([J] Def. G.2), so the per-link (eps, p delta) claim "
                "is not established there (e.g. eps = 1000 is 'trusted', not private)")
    inf = used & ~np.isfinite(eps) & (design.sigma == 0)
    if np.any(inf):
        reasons.append(f"{int(inf.sum())} links send data without noise (eps = inf)")
    level = ("node-level: x_i replaced by any vector of norm <= R, sensitivity 2R = "
             f"{priv.sensitivity:g}" if priv.l2_sensitivity is None else
             f"record-level extension: one row changed, sensitivity {priv.sensitivity:g}")
    note = ("PriCER local peer-to-peer guarantee: link i->j is (eps_ij, p_ij delta_ij)-DP "
            f"({level}; {priv.mechanism} Gaussian mechanism). "
            "Not the record-level central guarantee of Alparslan et al.; the PS-level and relay "
            "guarantees of [J] Thm IV.2-IV.5 are not evaluated (Thm IV.2's proof ignores the "
            "variance change, and the Bernstein radius (J-8) has two errors).")
    return claim_verdict(reasons, note, "PriCER privacy claim does NOT hold for these settings")


_COST_NOTE = ("PriCER protocol: per-link local (eps_ij, p_ij delta_ij) guarantees (see "
             "dp_claim_note), not a record-level Gaussian mechanism on the statistics; its cost "
             "is not accounted")


def round_to_release(rnd, net, design, priv, d, *, v_mode="ps_conditional", include_count=True,
                     rows_total=None, feature_names=(), extra_provenance=None,
                     bounds=None, rows=None):
    """Adapt one PriCER output to a :class:`bayesdp.releases.Release` (ONE holder: the network).

    ``S_hat, z_hat`` = unpacked n * xhat (sum scale); sigma_s = sigma_z = sqrt(v_used) (isotropic:
    exact given the link states with v_mode="oracle"; a Gaussian summary of a scale mixture
    otherwise). ``n`` = the packed noisy count (rounded, >= 1) or ``rows_total``.

    The provenance recommends ``s_noise="eiv"``: the S noise pushed through theta is part of the
    pivot ``z_hat - S_hat theta``, which "fast", "fixeds" and "nuts-fixeds" then use.
    """
    D = layout.stat_dim(d, with_yty=include_count)
    if rnd.estimate.shape != (D,):
        raise BayesdpInputError(f"round estimate has shape {rnd.estimate.shape}, expected ({D},) for d={d}")
    valid, note = _dp_claim(net, design, priv)
    kappa = design.kappa(net)
    prov = {
        "protocol": "pricer",
        "reference": PAPERS,
        "n_nodes": net.n, "n_links": int(np.sum(net.src != net.dst)),
        "reciprocity": net.reciprocity,
        "v_mode": v_mode,
        "noise_note": ("isotropic Gaussian given the link states; reported variance is "
                       + {"oracle": "the realised v(tau) (simulation only)",
                          "ps_conditional": "E[v | tau_PS], a Gaussian summary of a scale mixture",
                          "expected": "E[v], a Gaussian summary of a scale mixture"}.get(v_mode, v_mode)),
        "unbiased_design": bool(np.max(np.abs(kappa - 1)) < 1e-8),
        "kappa_max_abs_dev": float(np.max(np.abs(kappa - 1))),
        "sigma_y2_inflation": _inflation(rnd, net, design, v_mode, rows),
        "sigma_y2_inflation_mode": v_mode,
        "design_solver": design.info.get("solver"),
        "mechanism": priv.mechanism, "sensitivity": priv.sensitivity, "radius": float(priv.radius),
        "ps_level_eps_thm_IV5": _ps_summary(net, design, priv),
        "wishart_S": False,
        "wishart_note": ("S_hat estimates sum_i c_i S_i with random link weights c_i: not "
                         "Wishart(n, Sigma_x); MCMC-normalX's model does not hold"),
        "s_noise": "eiv",
        "s_noise_note": ("z_hat - S_hat theta = data noise + e_z - e_S theta exactly (S and z share "
                         "the weights c_i), so the S noise is carried through theta (errors in "
                         "variables); ignoring it under-covers when |theta| sigma_s is not small "
                         "against sigma_z and the data noise (docs/adapters/pricer.md)"),
        "reweighting_note": ("S_hat, z_hat estimate sum_i c_i S_i and sum_i c_i z_i with random "
                             "c_i (E c_i = kappa_i); the data noise of z is sigma_y^2 sum c_i^2 S_i: "
                             "multiply sigma_y2 by sigma_y2_inflation when fixing it"),
    }
    if extra_provenance:
        prov.update(extra_provenance)
    v = noise_variance(rnd, net, design, v_mode)
    S, z, N = unpack_suffstats(net.n * rnd.estimate, d, include_count=include_count)
    if N is not None:
        prov["noisy_count"] = float(N)
    if rows_total is not None:
        nrows = int(rows_total)
        prov["n_source"] = "public row counts: sum_i kappa_i N_i"
    elif N is not None:
        nrows = max(1, int(round(N)))
        prov["n_source"] = "PriCER-noised packed count"
    else:
        raise BayesdpInputError("rows_total is needed when the count is not packed")
    return one_holder_release(S, z, nrows, math.sqrt(v), cost_note=_COST_NOTE, bounds=bounds,
                              feature_names=feature_names, provenance=prov,
                              dp_claim_valid=valid, dp_claim_note=note)


@dataclasses.dataclass(frozen=True, eq=False)
class PricerSimulation:
    """Output of :func:`pricer_release`: the public ``release`` and the private ``truth``."""

    release: object
    truth: dict
    network: PricerNetwork
    design: PricerDesign
    round: PricerRound


def pricer_release(Xs, ys, net, *, eps, delta, bound_x, bound_y, seed, design=None,
                   v_mode="ps_conditional", include_count=True, eps_self=None, mechanism="classic",
                   record_level=False, max_rows=None, feature_names=(), public_counts=True):
    """Simulate PriCER on per-node regression rows and adapt its output to a Release.

    Rows are clipped to the public bounds (B_x, B_y), packed per node (one vector holding vech(S),
    z and N), the design is optimised (unless given), one PriCER round is simulated and the PS
    output is adapted. ``record_level=True`` uses the per-row sensitivity sqrt(B_x^4 + B_x^2 B_y^2
    (+1)) instead of the paper's node-level 2R (extension). ``max_rows`` is the public maximum rows
    per node (defaults to the observed maximum, recorded as data-derived in the provenance).
    ``public_counts``: the row counts N_i are public (as n_j is in every bayesdp release), and the
    release's n is the expected effective rows sum_i kappa_i N_i (= sum N_i for an unbiased design);
    otherwise n is the PriCER-noised packed count (very noisy at realistic eps).
    """
    bound_x, bound_y = check_bounds((bound_x, bound_y))
    if len(Xs) != net.n or len(ys) != net.n:
        raise BayesdpInputError(f"Xs and ys must hold one array per node ({net.n}), got {len(Xs)} and {len(ys)}")
    rng = np.random.default_rng(seed)
    Xc, yc = [], []
    for X, y in zip(Xs, ys):
        a, b, _ = clip_rows(np.asarray(X, dtype=float), np.asarray(y, dtype=float), bound_x, bound_y)
        Xc.append(a)
        yc.append(b)
    d = Xc[0].shape[1]
    stats = pack_suffstats(Xc, yc, include_count=include_count)
    rows_observed = max(len(y) for y in yc)
    nmax = rows_observed if max_rows is None else int(max_rows)
    R = packed_radius(nmax, bound_x, bound_y, include_count=include_count)
    sens = None
    if record_level:
        sens = math.sqrt(bound_x ** 4 + bound_x ** 2 * bound_y ** 2 + (1.0 if include_count else 0.0))
    priv = PricerPrivacy(eps=eps, delta=delta, radius=R, eps_self=eps_self, l2_sensitivity=sens,
                         mechanism=mechanism)
    if design is None:
        design = optimize_design(net, priv, stats.shape[1])
    rnd = simulate_round(stats, net, design, rng)
    extra = {"eps": _scalar_or_note(eps), "delta": _scalar_or_note(delta), "seed": int(seed),
             "bounds": [float(bound_x), float(bound_y)], "max_rows": nmax,
             "max_rows_from_data": max_rows is None, "record_level_sensitivity": bool(record_level)}
    rows_total = None
    if public_counts:
        counts = np.array([len(y) for y in yc], dtype=float)
        rows_total = max(1, int(round(float(design.kappa(net) @ counts))))
    counts = np.array([len(y) for y in yc], dtype=float) if public_counts else None
    rel = round_to_release(rnd, net, design, priv, d, v_mode=v_mode, include_count=include_count,
                           rows_total=rows_total, feature_names=feature_names, rows=counts, extra_provenance=extra,
                           bounds=(float(bound_x), float(bound_y)))
    S_true, z_true, N_true = unpack_suffstats(rnd.true_sum, d, include_count=include_count)
    S_c, z_c, _ = unpack_suffstats(rnd.reweighted_sum, d, include_count=include_count)
    truth = {"S": S_true, "z": z_true, "N": N_true, "S_reweighted": S_c, "z_reweighted": z_c,
             "c": rnd.c, "v_realized": rnd.v_realized, "tau_links": rnd.tau_links,
             "privacy": priv}
    return PricerSimulation(release=rel, truth=truth, network=net, design=design, round=rnd)


def _scalar_or_note(v):
    import scipy.sparse as sp

    a = np.asarray(v) if not sp.issparse(v) else None
    if a is not None and a.ndim == 0:
        return float(a)
    return "per-link array"
