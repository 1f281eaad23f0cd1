"""Gossip averaging without handshakes ("SimpleGossip" + bias removal) as a data source.

Paper: "Estimating Unbiased Averages of Sensitive Attributes without Handshakes among Agents",
an anonymous double-blind submission (its authors, venue and year are not given); :data:`PAPER`.

What the protocol computes (docs/adapters/gossip.md)
----------------------------------------------------
n agents sit on an undirected graph with adjacency A and degrees d_i. SimpleGossip (Algorithm 1)
repeats ``w <- D^{-1} A w`` (``T = D^{-1} A``) ``it_go`` times; every agent's value converges to the
degree-weighted mean ``sum_i pi_i w_i``, ``pi_i = d_i / sum_k d_k`` (Theorem 1). The bias-removal
mechanism gossips ``w_i / d_i`` and ``1 / d_i`` and takes the ratio, which converges to the plain mean
``(1/n) sum_i w_i`` (eqs. 4.3-4.4). Every input is privatised locally with the Gaussian mechanism
(eqs. 5.5-5.6): agent i publishes ``nu_{i,a} = s_{i,a} / d_i + N(0, sigma_a^2)``.

For regression rows (x_i, y_i) the statistics are ``s_i = [vech(x_i x_i^T), x_i y_i]`` (vech: upper
triangle incl. diagonal, row-major, ``np.triu_indices(d)`` order). The paper's use case (section 5) is
the special case x_i = [1, (d_i - mu_d_hat)^2]; there the (0, 0) entry is the count, read off the
1/d run itself (S_hat_00 = n exactly).

Output distribution at convergence (exact, no clipping)
    D   = sum_i pi_i nu_{i,0} ~ N(c, kappa sigma_0^2),          c = 1/mu_d
    N_a = sum_i pi_i nu_{i,a} ~ N(c mu_a, kappa sigma_a^2),     kappa = sum_i pi_i^2 = mu_{d^2}/(n mu_d^2)
all independent; the released moments are m_a = N_a / D, and (delta method)
    Cov(m_a, m_b) ~= (mu_{d^2}/n) [delta_ab sigma_a^2 + mu_a mu_b sigma_0^2],
    E[m_a] ~= mu_a (1 + sigma_0^2 mu_{d^2} / n).
On the sum scale (what the core model observes) v = n m has covariance n mu_{d^2} [...]: the shared
denominator makes the S and z errors strongly correlated, so the adapter returns a full covariance.

mu_{d^2} is not public. Extension beyond the paper (``kappa_run=True``, the default for general
rows): one more privatised gossip run of d_i, whose output N_deg ~= mu_{d^2}/mu_d gives
mu_{d^2} ~= N_deg / D. In the paper's design the identity mu_{d^2} = mu_x + 2 mu_d_hat mu_d - mu_d_hat^2
gives the plug-in m_x + mu_d_hat^2 instead.

Everything is sparse: a graph is a ``scipy.sparse.csr_matrix``; gossip is repeated sparse
matrix-vector products, O(it_go |E|), never a dense matrix power (the paper's implementation, which
it reports breaks down near n = 2^13).
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from pathlib import Path
from typing import Optional

import numpy as np

from .. import privacy
from ..errors import BayesdpInputError
from ..releases import combine_releases, layout
from .common import claim_verdict, one_holder_release

# scipy.sparse is imported inside the functions that use it: it is slow to import, and the
# bayesdp command imports this module for its --help

PROTOCOL = "gossip-sigo"
#: the protocol's paper, as releases record it (``provenance["paper"]``) and the CLI cites it
PAPER = ("\"Estimating Unbiased Averages of Sensitive Attributes without Handshakes among Agents\", "
         "anonymous double-blind submission (authors, venue and year not given)")

_SENSITIVITIES = ("domain", "paper")
_CLIPS = ("none", "paper")


# -- graphs ----------------------------------------------------------------------------------------


def _rng(seed):
    if isinstance(seed, np.random.Generator):
        return seed
    return np.random.default_rng(seed)


def _check_int(name, v, lo):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise BayesdpInputError(f"{name} must be a whole number >= {lo}, got {v!r}")
    return int(v)


def sample_power_law_degrees(n, gamma=2.0, d_max=64, seed=None):
    """Appendix C.3 step 1: d'_i iid with P(d') proportional to d'^-gamma on {1, ..., d_max - 3}."""
    n = _check_int("n", n, 1)
    d_max = _check_int("d_max", d_max, 5)
    if not (np.isfinite(gamma) and gamma > 1):
        raise BayesdpInputError(f"gamma must be > 1, got {gamma!r}")
    support = np.arange(1, d_max - 2)
    p = support.astype(float) ** (-float(gamma))
    return _rng(seed).choice(support, size=n, p=p / p.sum())


def chung_lu_graph(weights, seed=None):
    """Definition 1 (Chung-Lu / expected-degree model): edge (i, j), i < j, present independently
    with probability min(1, w_i w_j / (sum_k w_k - 1)) (the cap at 1 is not in the paper). No
    self-loops. Uses the O(n + |E|) skipping algorithm of Miller & Hagberg (2011) on the weights
    sorted in decreasing order, so it scales to 10^5 agents. Returns a symmetric CSR matrix."""
    w = np.asarray(weights, dtype=float)
    if w.ndim != 1 or w.size < 2 or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise BayesdpInputError("weights must be a 1-d array of >= 2 non-negative numbers")
    rng = _rng(seed)
    n = w.size
    order = np.argsort(-w, kind="stable")
    ws = w[order]
    total = ws.sum() - 1.0
    if total <= 0:
        raise BayesdpInputError("weights: sum(w) - 1 must be > 0")
    rows, cols = [], []
    for u in range(n - 1):
        v = u + 1
        p = min(ws[u] * ws[v] / total, 1.0)
        while v < n and p > 0:
            if p < 1.0:
                r = rng.random()
                v += int(math.floor(math.log(max(r, 1e-300)) / math.log1p(-p)))
            if v < n:
                q = min(ws[u] * ws[v] / total, 1.0)
                if rng.random() < q / p:
                    rows.append(order[u])
                    cols.append(order[v])
                p = q
                v += 1
    return _from_edges(np.array(rows, dtype=np.int64), np.array(cols, dtype=np.int64), n)


def _from_edges(r, c, n):
    from scipy import sparse

    keep = r != c
    r, c = r[keep], c[keep]
    data = np.ones(2 * r.size)
    A = sparse.csr_matrix((data, (np.r_[r, c], np.r_[c, r])), shape=(n, n))
    A.data[:] = 1.0  # merge duplicates
    A.eliminate_zeros()
    A.sort_indices()
    return A


def repair_graph(A, d_max=64, d_min=3, seed=None):
    """Appendix C.3 step 3: (a) remove random edges of every vertex with degree > d_max - 3 until it
    has d_max - 3; (b) ring: for each i add (v_i, v_{i+1 mod n}), skipping to v_{i+2}, v_{i+3}, ... if
    that edge is present; (c) add (v_1, v_3) (a triangle with the ring: non-bipartite); (d) while a
    vertex has degree < d_min, join it to a random vertex of degree < d_max. The result is connected
    and non-bipartite with d_min <= degree <= d_max."""
    from scipy import sparse

    A = _check_graph(A, require_simple=False)
    n = A.shape[0]
    if n < max(4, d_min + 1):
        raise BayesdpInputError(f"graph: need at least {max(4, d_min + 1)} vertices, got {n}")
    rng = _rng(seed)
    A = sparse.csr_matrix(A)
    A.setdiag(0)
    A.eliminate_zeros()
    adj = [set(A.indices[A.indptr[i]:A.indptr[i + 1]].tolist()) for i in range(n)]
    cap = d_max - 3
    for i in range(n):  # (a)
        if len(adj[i]) > cap:
            nb = np.array(sorted(adj[i]))
            for j in rng.choice(nb, size=len(nb) - cap, replace=False):
                adj[i].discard(int(j))
                adj[int(j)].discard(i)
    for i in range(n):  # (b)
        k = 1
        while k < n and (i + k) % n in adj[i]:
            k += 1
        if k < n:
            j = (i + k) % n
            adj[i].add(j)
            adj[j].add(i)
    adj[0].add(2)  # (c)
    adj[2].add(0)
    low = [i for i in range(n) if len(adj[i]) < d_min]  # (d)
    for i in low:
        tries = 0
        while len(adj[i]) < d_min:
            j = int(rng.integers(n))
            tries += 1
            if j != i and j not in adj[i] and (len(adj[j]) < d_max or tries > 100 * n):
                adj[i].add(j)
                adj[j].add(i)
    r = np.fromiter((i for i in range(n) for _ in adj[i]), dtype=np.int64)
    c = np.fromiter((j for i in range(n) for j in adj[i]), dtype=np.int64)
    return _from_edges(r, c, n)


def synthetic_graph(n, gamma=2.0, d_max=64, d_min=3, seed=None):
    """The paper's synthetic graph: power-law degrees, Chung-Lu, repair (appendix C.3)."""
    rng = _rng(seed)
    w = sample_power_law_degrees(n, gamma, d_max, rng)
    return repair_graph(chung_lu_graph(w, rng), d_max=d_max, d_min=d_min, seed=rng)


def load_gossip_graph(path, *, d_max=64, d_min=3, repair=True, seed=0):
    """A real graph from a CSV/whitespace edge list (two integer columns, optional header; directed
    or listed both ways): symmetrised, self-loops dropped, relabelled 0..n-1, then repaired with
    step 3 of appendix C.3 as the paper does for its real graphs."""
    path = Path(path)
    if not path.exists():
        raise BayesdpInputError(f"edge list {str(path)!r} does not exist")
    rows = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            parts = line.replace(",", " ").split()
            if len(parts) < 2:
                continue
            try:
                rows.append((int(parts[0]), int(parts[1])))
            except ValueError:
                continue  # header
    if not rows:
        raise BayesdpInputError(f"edge list {str(path)!r} has no integer edges")
    e = np.array(rows, dtype=np.int64)
    ids, inv = np.unique(e.ravel(), return_inverse=True)
    e = inv.reshape(-1, 2)
    A = _from_edges(e[:, 0], e[:, 1], ids.size)
    return repair_graph(A, d_max=d_max, d_min=d_min, seed=seed) if repair else A


def _check_graph(A, require_simple=True):
    from scipy import sparse

    if not sparse.issparse(A):
        try:
            A = sparse.csr_matrix(np.asarray(A, dtype=float))
        except (TypeError, ValueError):
            raise BayesdpInputError("graph must be a (sparse) square adjacency matrix") from None
    A = sparse.csr_matrix(A, dtype=float)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise BayesdpInputError(f"graph must be a square adjacency matrix, got shape {A.shape}")
    if (A != A.T).nnz:
        raise BayesdpInputError("graph must be undirected (symmetric adjacency)")
    if require_simple:
        if A.diagonal().any():
            raise BayesdpInputError("graph must have no self-loops")
        deg = np.diff(A.indptr)
        if np.any(deg == 0):
            raise BayesdpInputError(f"graph: vertex {int(np.argmin(deg))} has no neighbours")
    return A


# -- gossip ----------------------------------------------------------------------------------------


def sigo(A, W, it_go, *, tol=None, check_every=32):
    """SimpleGossip (Algorithm 1, read as the vector T^it_go W, T = D^-1 A): ``it_go`` synchronous
    sparse averaging steps ``W <- D^-1 A W``. ``W`` is (n,) or (n, k). With ``tol`` the iteration
    stops early once every column's spread across agents (max - min) is below
    ``tol * max(1, max |W|)`` (checked every ``check_every`` steps), which changes the output by at
    most that amount. Returns (values, iterations_run)."""
    from scipy import sparse

    A = sparse.csr_matrix(A)
    it_go = _check_int("it_go", it_go, 0)
    deg = np.asarray(A.sum(axis=1)).ravel()
    if np.any(deg <= 0):
        raise BayesdpInputError("graph: every agent needs at least one neighbour")
    T = sparse.diags(1.0 / deg) @ A
    T = sparse.csr_matrix(T)
    Z = np.array(W, dtype=np.float64)
    for t in range(1, it_go + 1):
        Z = T @ Z
        if tol is not None and t % check_every == 0:
            spread = np.max(np.ptp(Z, axis=0)) if Z.ndim > 1 else np.ptp(Z)
            if spread <= tol * max(1.0, float(np.max(np.abs(Z)))):
                return Z, t
    return Z, it_go


# -- sensitivities and noise -----------------------------------------------------------------------


def stat_keys(d, intercept=False):
    """Labels of the gossiped statistics: ("S", a, b) for a <= b in np.triu_indices(d) order, then
    ("z", a). With ``intercept`` the count ("S", 0, 0) is read off the 1/d run and not gossiped."""
    iu = np.triu_indices(d)
    keys = [("S", int(a), int(b)) for a, b in zip(*iu)] + [("z", a) for a in range(d)]
    return keys


def domain_sensitivities(d, bounds, d_min=3, d_max=64, intercept=False):
    """Sound local sensitivities (Definition 3: the range of each released attribute over its public
    domain): rows with ||x|| <= B_x, |y| <= B_y, degrees in [d_min, d_max].

    1/d: 1/d_min - 1/d_max;  x_a^2/d: B_x^2/d_min;  x_a x_b/d (a != b): B_x^2/d_min (|x_a x_b| <= B_x^2/2);
    x_a y/d: 2 B_x B_y / d_min;  d (kappa run): d_max - d_min.  Returns a dict key -> Delta."""
    bx, by = privacy.check_bounds(bounds)
    out = {"count": 1.0 / d_min - 1.0 / d_max, "degree": float(d_max - d_min)}
    for k in stat_keys(d):
        if k[0] == "S":
            out[k] = bx**2 / d_min
        else:
            out[k] = 2.0 * bx * by / d_min
    if intercept:
        out[("S", 0, 0)] = out["count"]
    return out


def paper_sensitivities(mu_d, d_min=3, d_max=64, l_reg=8.0):
    """Appendix C.1 as printed (one-edge changes, the false product "lemma", Delta(y) = l_reg), for
    the paper's design x = [1, (d - mu_d)^2]. UNSOUND: kept to reproduce the paper's sigmas."""
    inv = 1.0 / (d_min * (d_min + 1))
    dx = 2.0 * (d_max - mu_d) + 1.0
    dx2 = abs((d_max - mu_d) ** 4 - (d_max + 1 - mu_d) ** 4)
    dy = float(l_reg)
    return {
        "count": inv,
        ("S", 0, 0): inv,
        ("S", 0, 1): 2.0 * dx * inv,
        ("S", 1, 1): 2.0 * dx2 * inv,
        ("z", 0): 2.0 * dy * inv,
        ("z", 1): 3.0 * dy * dx * inv,
    }


def _sigma(eps, delta, sens, calibration):
    if sens == 0:
        return 0.0
    return privacy.gaussian_sigma(eps, delta, sens, calibration)


#: Largest usable relative noise of the 1/d run, sd(D) / E[D] = sigma_0 sqrt(mu_{d^2} / n)
#: (docs/adapters/gossip.md). The ratio N / D and its delta-method covariance need a precise
#: denominator; at 50% (1024 agents, epsilon 4, two features) D is <= 0 in about one run in 40,
#: and a small positive D blows the moments up.
MAX_COUNT_REL_SD = 0.2


def count_rel_sd(graph, sigma_count) -> float:
    """Relative noise sd of the 1/d run's output at convergence, sd(D) / E[D] =
    sigma_0 sqrt(mu_{d^2} / n), from the graph (which the protocol treats as public)."""
    from scipy import sparse

    deg = np.asarray(sparse.csr_matrix(graph).sum(axis=1), dtype=float).ravel()
    return float(sigma_count) * math.sqrt(float(np.mean(deg**2)) / deg.size)


def count_run_advice(graph, output, max_rel_sd=MAX_COUNT_REL_SD):
    """None when the 1/d run of ``output`` (simulated on ``graph``) is precise enough to form
    ratios (:func:`count_rel_sd` <= ``max_rel_sd``); else a dict with ``rel_sd``, ``max_rel_sd``
    and what would reach ``max_rel_sd`` with the other settings unchanged: the total ``epsilon``,
    or the number of agents ``n_agents`` (same degree distribution; sd(D) / E[D] ~ 1 / sqrt(n))."""
    from scipy import sparse

    if not isinstance(output, GossipOutput):
        raise BayesdpInputError("output must be a GossipOutput (from simulate_gossip)")
    rel = count_rel_sd(graph, output.sigmas["count"])
    if rel <= max_rel_sd:
        return None
    st = output.settings
    parts, dlt, cal = st["parts"], st["delta"], st["calibration"]

    def unit(e):  # noise sd of the 1/d run at total epsilon e, per unit of sensitivity
        return privacy.gaussian_sigma(e / parts, dlt / parts, 1.0, cal)

    target = unit(st["epsilon"]) * max_rel_sd / rel
    lo, hi = st["epsilon"], 2.0 * st["epsilon"]
    while unit(hi) > target:
        lo, hi = hi, 2.0 * hi
    for _ in range(60):  # bisection: unit() decreases in e
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if unit(mid) > target else (lo, mid)
    n = sparse.csr_matrix(graph).shape[0]
    return {"rel_sd": rel, "max_rel_sd": float(max_rel_sd), "epsilon": hi,
            "n_agents": int(math.ceil(n * (rel / max_rel_sd) ** 2))}


# -- the protocol ----------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, eq=False)
class GossipOutput:
    """Public output of one run of the protocol on one network (what the analyst may see).

    ``D`` (n,) every agent's 1/d gossip value, ``N`` (n, K) every agent's gossip values of the K
    gossiped statistics (``keys``), ``N_deg`` (n,) the kappa run (or None), ``sigmas`` the noise
    std of every run (dict key -> sigma, including "count" and "degree"), ``settings`` the public
    protocol parameters."""

    D: np.ndarray
    N: np.ndarray
    N_deg: Optional[np.ndarray]
    keys: tuple
    sigmas: dict
    d: int
    intercept: bool
    settings: dict

    @property
    def n_agents(self) -> int:
        return int(self.D.shape[0])

    def moments(self, agent=0):
        """m = N / D of one agent (the bias-removed means of the statistics)."""
        return self.N[agent] / self.D[agent]

    def mu_d_hat(self, agent=0):
        return 1.0 / self.D[agent]

    def spread(self):
        """Largest spread across agents of the moments (0 at convergence)."""
        m = self.N / self.D[:, None]
        return float(np.max(np.ptp(m, axis=0)))


@dataclasses.dataclass(frozen=True, eq=False)
class GossipTruth:
    """The private truth behind a :class:`GossipOutput`. For tests only: never put it in a release."""

    degrees: np.ndarray
    X: np.ndarray
    y: np.ndarray
    S: np.ndarray
    z: np.ndarray
    pi: np.ndarray
    kappa: float
    mu_d: float
    mu_d2: float
    means: np.ndarray  # true (1/n) sum_i s_i, in the order of output.keys
    iterations: int
    extra: dict


def _check_rows(X, y, n):
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] != n:
        raise BayesdpInputError(f"X must have shape (n_agents={n}, d), got {X.shape}")
    if y.shape != (n,):
        raise BayesdpInputError(f"y must have shape ({n},), got {y.shape}")
    if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
        raise BayesdpInputError("X or y contains NaN or infinite values")
    return X, y


def _pack(X, y, keys):
    """The per-row statistics of ``keys`` (a subset of :func:`stat_keys`), (n, len(keys))."""
    order = stat_keys(X.shape[1])
    return layout.row_stats(X, y)[:, [order.index(k) for k in keys]]


def simulate_gossip(graph, X, y, *, epsilon, delta, bounds=None, it_go=1024, tol=None,
                    calibration="exact", sensitivity="domain", intercept=False, kappa_run=True,
                    clip="none", d_min=3, d_max=64, l_reg=None, noise=True, seed=None, _phase1=None):
    """Run SimpleGossip with bias removal on per-agent regression rows (one row per agent).

    Parameters
    ----------
    graph : scipy.sparse matrix (n, n), symmetric, simple, connected, non-bipartite
        e.g. :func:`synthetic_graph` or :func:`load_gossip_graph`.
    X, y : (n, d) and (n,) arrays, agent i's row. Rows are clipped to ``bounds`` first.
    epsilon, delta : total budget, split evenly over the runs by basic composition (paper: 5 runs).
    bounds : (B_x, B_y), public; required for ``sensitivity="domain"``.
    it_go, tol : gossip iterations (paper: 1024); ``tol`` stops early at convergence.
    calibration : "exact" (analytic Gaussian, sound) or "classical" (the paper's; proven only for
        per-run epsilon < 1).
    sensitivity : "domain" (sound ranges, :func:`domain_sensitivities`) or "paper" (appendix C.1 as
        printed, unsound; paper design only).
    intercept : X[:, 0] is the constant 1; its square (the count) is read off the 1/d run.
    kappa_run : also gossip the privatised degree so the adapter can estimate mu_{d^2} (an
        extension beyond the paper; costs one budget part).
    clip : "none" or "paper" (clip nu to [a, 2 s_i - a] around the agent's TRUE value, appendix C.2:
        data dependent, NOT DP, noise then smaller than the released sigma).
    noise : False switches the privacy noise off (tests of the noiseless identities only; the
        released sigmas are still the calibrated ones).

    Returns (GossipOutput, GossipTruth).
    """
    A = _check_graph(graph)
    n = A.shape[0]
    X, y = _check_rows(X, y, n)
    d = X.shape[1]
    rng = _rng(seed)
    eps, dlt = privacy.check_epsilon_delta(epsilon, delta)
    if calibration not in ("exact", "classical"):
        raise BayesdpInputError(f"calibration must be 'exact' or 'classical', got {calibration!r}")
    if sensitivity not in _SENSITIVITIES:
        raise BayesdpInputError(f"sensitivity must be one of {_SENSITIVITIES}, "
                                f"got {sensitivity!r}")
    if clip not in _CLIPS:
        raise BayesdpInputError(f"clip must be one of {_CLIPS}, got {clip!r}")
    deg = np.asarray(A.sum(axis=1)).ravel()
    if deg.min() < d_min or deg.max() > d_max:
        raise BayesdpInputError(
            f"graph: degrees must lie in [d_min={d_min}, d_max={d_max}] (the public domain), got "
            f"[{int(deg.min())}, {int(deg.max())}]; use repair_graph")
    if intercept and not np.all(X[:, 0] == 1.0):
        raise BayesdpInputError("X: with intercept=True the first column must be all ones")
    n_clipped = 0
    if bounds is not None:
        bx, by = privacy.check_bounds(bounds)
        X, y, cl = privacy.clip_rows(X, y, bx, by)
        n_clipped = int(cl.sum())
        if intercept:
            X[:, 0] = 1.0  # keep the count column exact; its norm is in B_x by construction
            if bx < 1:
                raise BayesdpInputError("bounds: B_x must be >= 1 with an intercept column")
    keys = stat_keys(d)
    gossiped = [k for k in keys if not (intercept and k == ("S", 0, 0))]
    if sensitivity == "domain":
        if bounds is None:
            raise BayesdpInputError("bounds are required with sensitivity='domain'")
        sens = domain_sensitivities(d, bounds, d_min, d_max, intercept)
    else:
        if not (d == 2 and intercept):
            raise BayesdpInputError("sensitivity='paper' applies only to the paper's design "
                                    "x = [1, (d - mu_d)^2] (d = 2, intercept=True)")
        mu_hat = _phase1["mu_d_hat"] if _phase1 else float(deg.mean())
        sens = paper_sensitivities(mu_hat, d_min, d_max, 8.0 if l_reg is None else l_reg)
        sens["degree"] = float(d_max - d_min)
    parts = 1 + len(gossiped) + (1 if kappa_run else 0)
    e_p, d_p = eps / parts, dlt / parts
    sigmas = {"count": _sigma(e_p, d_p, sens["count"], calibration)}
    for k in gossiped:
        sigmas[k] = _sigma(e_p, d_p, sens[k], calibration)
    if kappa_run:
        sigmas["degree"] = _sigma(e_p, d_p, sens["degree"], calibration)

    # phase 1: the 1/d run (possibly supplied by the caller, who needed mu_d_hat for the features)
    s_count = 1.0 / deg
    if _phase1 is not None:
        nu0 = _phase1["nu0"]
    else:
        nu0 = _privatize(s_count, sigmas["count"] * noise, 1.0 / d_max, clip, rng)
    S_stats = _pack(X, y, gossiped)
    if clip == "paper" and (np.any(S_stats < 0)):
        raise BayesdpInputError(
            "clip='paper' (appendix C.2) assumes non-negative statistics (y >= 0, x >= 0); these "
            "rows give negative x_a x_b or x_a y, for which [a, 2 s - a] is empty")
    cols = [nu0[:, None]]
    for a, k in enumerate(gossiped):
        cols.append(_privatize(S_stats[:, a] / deg, sigmas[k] * noise, 0.0, clip, rng)[:, None])
    if kappa_run:
        cols.append(_privatize(deg.astype(float), sigmas["degree"] * noise, float(d_min), clip,
                                   rng)[:, None])
    W = np.hstack(cols)
    Z, its = sigo(A, W, it_go, tol=tol)
    Dv = Z[:, 0]
    N = Z[:, 1:1 + len(gossiped)]
    if intercept:
        N = np.hstack([Dv[:, None], N])  # the count statistic is the 1/d run itself
    N_deg = Z[:, -1] if kappa_run else None
    settings = dict(
        protocol=PROTOCOL, n_agents=int(n), epsilon=eps, delta=dlt, parts=int(parts),
        it_go=int(it_go), iterations=int(its), tol=tol, calibration=calibration,
        sensitivity=sensitivity, clip=clip, d_min=int(d_min), d_max=int(d_max),
        bounds=None if bounds is None else list(privacy.check_bounds(bounds)),
        intercept=bool(intercept), kappa_run=bool(kappa_run), l_reg=l_reg,
    )
    out = GossipOutput(D=Dv, N=N, N_deg=N_deg, keys=tuple(keys), sigmas=sigmas, d=d,
                       intercept=bool(intercept), settings=settings)
    pi = deg / deg.sum()
    stats = _pack(X, y, keys)
    truth = GossipTruth(
        degrees=deg.astype(np.int64), X=X, y=y, S=X.T @ X, z=X.T @ y, pi=pi,
        kappa=float(pi @ pi), mu_d=float(deg.mean()), mu_d2=float((deg**2).mean()),
        means=stats.mean(axis=0), iterations=int(its),
        extra={"n_clipped": n_clipped, "W": W},
    )
    return out, truth


def _privatize(s, sigma, lower, clip, rng):
    nu = s + sigma * rng.standard_normal(s.shape)
    if clip == "paper":  # appendix C.2 as intended: [a, 2 s - a] around the TRUE value; not DP
        lo = np.minimum(lower, s)
        hi = np.maximum(2.0 * s - lower, s)
        nu = np.clip(nu, lo, hi)
    return nu


def simulate_paper_gossip(graph=None, *, n=1024, theta=(4096.0, 1.0), l_reg=8.0, gamma=2.0,
                          epsilon=4.0, delta=2.0**-7, it_go=1024, tol=None, d_max=64, d_min=3,
                          calibration="classical", sensitivity="paper", clip="none",
                          kappa_run=False, seed=None):
    """The paper's use case (section 5, appendix C.4 defaults): y_i = theta0 + theta1 x_i + U(-l/2, l/2)
    with x_i = (d_i - mu_d)^2. Two phases: the 1/d run first, each agent then forms its feature with
    its own mu_d_hat = 1/D_i, then the four runs x/d, x^2/d, y/d, yx/d. Budget split five ways.
    The paper's settings (classical sigma, C.1 sensitivities) do NOT give the claimed DP."""
    rng = _rng(seed)
    A = synthetic_graph(n, gamma, d_max, d_min, rng) if graph is None else _check_graph(graph)
    n = A.shape[0]
    deg = np.asarray(A.sum(axis=1)).ravel()
    mu_d = deg.mean()
    eps, dlt = privacy.check_epsilon_delta(epsilon, delta)
    parts = 5 + (1 if kappa_run else 0)
    # phase 1
    sens1 = (1.0 / (d_min * (d_min + 1)) if sensitivity == "paper" else 1.0 / d_min - 1.0 / d_max)
    s0 = _sigma(eps / parts, dlt / parts, sens1, calibration)
    nu0 = _privatize(1.0 / deg, s0, 1.0 / d_max, clip, rng)
    D1, _ = sigo(A, nu0, it_go, tol=tol)
    mu_hat_i = 1.0 / D1
    x_feat = (deg - mu_hat_i) ** 2
    x_true = (deg - mu_d) ** 2
    y = theta[0] + theta[1] * x_true + rng.uniform(-l_reg / 2, l_reg / 2, size=n)
    X = np.column_stack([np.ones(n), x_feat])
    if sensitivity == "domain":
        raise BayesdpInputError("simulate_paper_gossip reproduces the paper's sensitivities; use "
                                "simulate_gossip with bounds for sound (domain) sensitivities")
    out, truth = simulate_gossip(
        A, X, y, epsilon=eps, delta=dlt, bounds=None, it_go=it_go, tol=tol,
        calibration=calibration, sensitivity="paper", intercept=True, kappa_run=kappa_run,
        clip=clip, d_min=d_min, d_max=d_max, l_reg=l_reg, seed=rng,
        _phase1={"nu0": nu0, "mu_d_hat": float(mu_hat_i.mean())},
    )
    out.settings.update(design="paper", theta=list(map(float, theta)), gamma=gamma, parts=parts)
    truth.extra.update(x_true=x_true, theta=np.asarray(theta, float))
    return out, truth


# -- the adapter -----------------------------------------------------------------------------------


def _dp_assessment(settings, sigmas):
    """(dp_claim_valid, note) for the paper's (eps, delta)-DP claim under these settings."""
    reasons = []
    if settings["sensitivity"] == "paper":
        reasons.append(
            "the sensitivities are the paper's appendix C.1: its product 'lemma' "
            "ab - a'b' <= 2(a - a')(b - b') is false (a = a' = 5, b = 2, b' = 1 gives 5 <= 0), "
            "Delta(y) = l_reg ignores theta0 + theta1 x (a one-edge change moves y/d by up to "
            "~y/(d(d+1)), e.g. 4096/12 ~ 341 vs the paper's 1.33), and one-edge differences are "
            "used where Definition 3 needs the range of the attribute's domain")
    if settings["calibration"] == "classical":
        ep = settings["epsilon"] / settings["parts"]
        if ep >= 1:
            reasons.append(f"the classical Gaussian sigma is proven only for per-run epsilon < 1, "
                           f"here {ep:.3g}")
    if settings["clip"] == "paper":
        reasons.append("the clipping interval [a, 2 s_i - a] is centred on each agent's true value "
                       "(data dependent; a released value at the upper end reveals s_i)")
    scope = ("Scope even when valid: attribute-level local DP of each agent's released inputs with "
             "the graph treated as public; edge-level privacy (Definition 4) is not established, "
             "since the gossip weights and the published iterates depend on the unprivatised graph.")
    return claim_verdict(reasons, scope, "paper's DP claim does not hold")


_COST_NOTE = ("gossip protocol: attribute-level local DP of each agent's released inputs (see "
             "dp_claim_note), not a record-level Gaussian mechanism on the statistics; its cost "
             "is not accounted")


def gossip_release(output: GossipOutput, agent=0, *, bias_correct=True, mu_d2=None,
                   holder_name=None, feature_names=()):
    """Adapt one network's public output to a one-holder :class:`~bayesdp.releases.Release`.

    S_hat = n unvech(m_S), z_hat = n m_z (the sum scale the model needs; n = number of agents, public),
    n_j = n rows, and ``noise_cov`` the delta-method covariance of [vech(S_hat), z_hat]:
        n mu_{d^2} [diag(sigma_a^2) + sigma_0^2 m m^T]   (zero row/column for the exact count),
    with mu_{d^2} from the kappa run (N_deg / D), the paper-design identity (m_x + mu_d_hat^2) or the
    caller's public value ``mu_d2``. ``bias_correct`` divides the non-count moments by
    1 + sigma_0^2 mu_{d^2} / n (the ratio's second-order bias). sigma_s / sigma_z are isotropic
    summaries (sqrt of the largest variance of the block) only; methods must use ``noise_cov``.
    Assumes convergence (it_go >> 1/log(1/|lambda_2|)): the per-agent weights are then pi.
    One network is one holder: never use several agents of the same network as separate holders.
    """
    if not isinstance(output, GossipOutput):
        raise BayesdpInputError("output must be a GossipOutput (from simulate_gossip)")
    n = output.n_agents
    agent = _check_int("agent", agent, 0)
    if agent >= n:
        raise BayesdpInputError(f"agent must be < n_agents={n}, got {agent}")
    d = output.d
    keys = list(output.keys)
    Dj = float(output.D[agent])
    if not Dj > 0:
        raise BayesdpInputError(f"output.D[{agent}] = {Dj:.3g} <= 0: the 1/d run is too noisy "
                                f"to form ratios (increase epsilon or n)")
    m = output.N[agent] / Dj
    count = np.array([output.intercept and k == ("S", 0, 0) for k in keys])
    mu_hat_d = 1.0 / Dj
    if mu_d2 is not None:
        mu2, src = float(mu_d2), "given"
    elif output.N_deg is not None:
        mu2, src = float(output.N_deg[agent]) / Dj, "kappa run (N_deg / D)"
    elif output.settings.get("design") == "paper":
        mu2, src = float(m[keys.index(("S", 0, 1))]) + mu_hat_d**2, "paper identity m_x + mu_d_hat^2"
    else:
        raise BayesdpInputError("mu_d2: this output has no kappa run; pass the public mu_{d^2}")
    dmin = output.settings["d_min"]
    mu2 = max(mu2, mu_hat_d**2, float(dmin) ** 2)
    s0 = output.sigmas["count"]
    sig = np.array([0.0 if c else output.sigmas[k] for k, c in zip(keys, count)])
    bias = s0**2 * mu2 / n
    if bias_correct:
        m = np.where(count, m, m / (1.0 + bias))
    mm = np.where(count, 0.0, m)
    cov_m = (mu2 / n) * (np.diag(sig**2) + s0**2 * np.outer(mm, mm))
    cov = n**2 * cov_m
    kS = layout.vech_dim(d)
    v = n * m
    S_hat = layout.unvech(v[:kS], d)
    z_hat = v[kS:]
    st = output.settings
    spread = output.spread()
    scale = max(float(np.max(np.abs(output.N / output.D[:, None]))), 1e-300)
    if spread > 1e-6 * scale:
        warnings.warn(
            f"gossip has not converged: the agents' moments still differ by {spread:.3g} "
            f"({spread / scale:.2g} relative) after {st.get('iterations')} rounds; the noise "
            f"covariance assumes convergence (run more rounds, it_go)", UserWarning, stacklevel=2)
    valid, note = _dp_assessment(st, output.sigmas)
    varS = np.diag(cov)[:kS]
    varz = np.diag(cov)[kS:]
    provenance = {
        "protocol": PROTOCOL,
        "paper": PAPER,
        "parameters": {k: v_ for k, v_ in st.items() if k != "protocol"},
        "agent": int(agent),
        "spread_across_agents": spread,
        "sigmas": {_key_str(k): float(s) for k, s in output.sigmas.items()},
        "mu_d_hat": mu_hat_d,
        "mu_d2_hat": mu2,
        "mu_d2_source": src,
        "ratio_bias_rel": bias,
        "bias_corrected": bool(bias_correct),
        "noise_model": "delta-method covariance of the ratio N/D over [vech(S), z]; S and z errors "
                       "correlated through the shared denominator",
        "noise_cov_is_upper_bound": st["clip"] != "none",
        "wishart_S": False,
        "s_noise": "eiv",
        "wishart_note": "S_hat is a ratio estimate with correlated, non-Wishart noise and (paper "
                        "design) degree-derived features: methods assuming S ~ Wishart (normalX) "
                        "do not apply",
        "sigma_s_sigma_z": "isotropic summaries (sqrt of the largest variance); use noise_cov",
    }
    return one_holder_release(
        S_hat, z_hat, n, math.sqrt(max(varS.max(), 0.0)), math.sqrt(max(varz.max(), 0.0)),
        cost_note=_COST_NOTE, feature_names=tuple(feature_names),
        holder_names=(holder_name,) if holder_name is not None else (),
        epsilon=st["epsilon"], delta=st["delta"], calibration=st["calibration"],
        sensitivity=None, bounds=None if st["bounds"] is None else tuple(st["bounds"]),
        bounds_from_data=False, seeded=True, noise_cov=cov[None], dp_claim_valid=valid,
        dp_claim_note=note, provenance=provenance,
    )


def _key_str(k):
    return k if isinstance(k, str) else "_".join(str(p) for p in k)


def gossip_releases(outputs, agent=0, **kwargs):
    """One holder per independent network: adapt each output and combine them."""
    outputs = list(outputs)
    if not outputs:
        raise BayesdpInputError("outputs: need at least one GossipOutput")
    rels = [gossip_release(o, agent, holder_name=f"network{j}", **kwargs)
            for j, o in enumerate(outputs)]
    return combine_releases(rels) if len(rels) > 1 else rels[0]
