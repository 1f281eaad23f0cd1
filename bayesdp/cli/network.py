"""``bayesdp simulate-network <protocol>``: simulate a networked private-averaging protocol on
synthetic data and write its adapted release (one holder per independent network).

    bayesdp simulate-network gossip --networks 4 --agents 4000 --epsilon 300 --bounds 2 2.5 \
        --intercept --out release.json --truth-out truth.json
    bayesdp fit release.json

The graphs come from the adapters (:mod:`bayesdp.adapters`), the rows from
:func:`bayesdp.simulate.linear_rows`; docs/adapters/ describes each protocol. Each protocol is
one ``_add_<protocol>(sub)`` function that adds its sub-command and points it at a
``_cmd_<protocol>(args)`` function; add new ones to ``_PROTOCOLS``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..adapters import consensus, gossip, pricer
from ..errors import BayesdpInputError
from ..releases import combine_releases
from ..simulate import linear_rows
from .common import add_command, add_force_option, write_json


def _add_common(p, *, epsilon, eps_help, sigma_y, sigma_help="regression noise sd",
                d_help="features", theta_help="true coefficients (default: drawn from "
                                              "N(0, 0.1^2 I) with --seed)"):
    """The options every protocol has: its size, the linear design, the budget, the output."""
    p.add_argument("--networks", type=int, default=1, help="independent networks = holders J")
    p.add_argument("--d", type=int, default=2, help=d_help)
    p.add_argument("--theta", type=float, nargs="+", default=None, help=theta_help)
    p.add_argument("--sigma-y", type=float, default=sigma_y, help=sigma_help)
    p.add_argument("--epsilon", type=float, default=epsilon, help=eps_help)
    p.add_argument("--out", required=True, help="release file to write (JSON)")
    add_force_option(p)
    p.add_argument("--truth-out", default=None,
                   help="also write the simulated truth (theta, sigma_y2, exact S and z) as JSON; "
                        "for checking only, never share it with an analyst")
    p.add_argument("--seed", type=int, default=0, help="seed of every random draw")


def _add_bounds(p, default, help="public bounds on ||x|| and |y|"):
    p.add_argument("--bounds", type=float, nargs=2, default=default, metavar=("B_X", "B_Y"),
                   help=help)


def _theta(args, rng):
    """``--theta``, or d coefficients drawn from N(0, 0.1^2 I)."""
    d = args.d
    theta = np.array(args.theta, dtype=float) if args.theta else rng.normal(0.0, 0.1, size=d)
    if theta.shape != (d,):
        raise BayesdpInputError(f"--theta must have --d = {d} values, got {theta.size}")
    return theta


def _write_outputs(rels, truth, args):
    """One holder per network: combine, save the release (and the private truth if asked)."""
    rel = combine_releases(rels) if len(rels) > 1 else rels[0]
    rel.save(args.out, overwrite=args.force)
    if args.truth_out:
        write_json(args.truth_out, truth)
    print(f"wrote {args.out}: {rel!r}")
    if not rel.dp_claim_valid:
        print("WARNING: " + rel.dp_claim_note)
    return 0


def _holder(sim, j):
    """The release of network ``j`` of a simulation, as holder ``network<j>``."""
    return dataclasses.replace(sim.release, holder_names=(f"network{j}",))


# -- gossip: SimpleGossip with bias removal (gossip.PAPER) -----------------------------------------


def _add_gossip(sub):
    p = add_command(sub, "gossip", _cmd_gossip,
                    "SimpleGossip averaging with bias removal, from 'Estimating Unbiased "
                    "Averages of Sensitive Attributes without Handshakes among Agents' "
                    "(anonymous submission)")
    p.epilog = f"Paper: {gossip.PAPER}."
    p.add_argument("--design", choices=["linear", "paper"], default="linear",
                   help="'linear': rows x ~ N(mean, sd^2 I), y = x theta + N(0, sigma_y^2), sound "
                        "domain sensitivities; 'paper': the paper's x = (d - mu_d)^2 use case with "
                        "its (unsound) sensitivities and classical sigma")
    p.add_argument("--agents", type=int, default=None,
                   help="agents (rows) per network (default: 16384 for the linear design, enough "
                        "for a usable 1/d run at the default epsilon; paper design 1024)")
    p.add_argument("--graph-file", default=None,
                   help="edge list of a real graph (repaired as in the paper); overrides --agents")
    p.add_argument("--gamma", type=float, default=2.0, help="power-law exponent")
    p.add_argument("--d-max", type=int, default=64,
                   help="largest degree of the power-law graph (paper: 64)")
    p.add_argument("--intercept", action="store_true", help="first feature is the constant 1")
    p.add_argument("--x-mean", type=float, default=0.0,
                   help="mean of each feature x (linear design)")
    p.add_argument("--x-sd", type=float, default=0.5,
                   help="sd of each feature x (linear design)")
    p.add_argument("--delta", type=float, default=None,
                   help="total delta (default: 1e-5; paper design 2^-7)")
    _add_bounds(p, (2.0, 2.0), help="public bounds (linear design)")
    p.add_argument("--it-go", type=int, default=1024, help="gossip iterations (paper: 1024)")
    p.add_argument("--tol", type=float, default=1e-12,
                   help="stop early when agents agree to this tolerance (0: run all it_go)")
    p.add_argument("--calibration", choices=["exact", "classical"], default=None,
                   help="default: exact (linear), classical (paper)")
    p.add_argument("--clip", choices=["none", "paper"], default="none",
                   help="'paper' = the paper's data-dependent clipping (NOT DP; paper design only)")
    p.add_argument("--no-kappa-run", action="store_true",
                   help="linear design: do not gossip the degree (then --mu-d2 is needed); the "
                        "paper design never does (it uses mu_d2 ~ m_x + mu_d_hat^2)")
    p.add_argument("--mu-d2", type=float, default=None, help="public mean squared degree")
    _add_common(p, epsilon=4.0, eps_help="total budget, split over the runs", sigma_y=0.3,
                sigma_help="regression noise sd (linear)",
                d_help="features (linear design, incl. intercept)",
                theta_help="true coefficients (default: drawn from N(0, 0.1^2 I); paper: 4096 1)")
    return p


def _ceil2(x):
    """x rounded up to two significant digits (6612 -> 6700, 11.23 -> 12)."""
    step = 10.0 ** (np.floor(np.log10(x)) - 1)
    v = float(np.ceil(x / step - 1e-9) * step)
    return f"{v:.0f}" if v >= 10 else f"{v:.2g}"


def _check_count_run(A, out, args):
    """Refuse, in one line naming what to change, a run whose 1/d denominator is too noisy."""
    adv = gossip.count_run_advice(A, out)
    if adv is None:
        return
    more = "" if args.graph_file else f" or --agents to {_ceil2(adv['n_agents'])}"
    raise BayesdpInputError(
        f"the 1/d run is too noisy to form ratios (its noise sd is {adv['rel_sd']:.0%} of its "
        f"value, usable up to {adv['max_rel_sd']:.0%}): raise --epsilon to "
        f"{_ceil2(adv['epsilon'])}{more} (or more)")


def _cmd_gossip(args):
    """Simulates gossip averaging without handshakes (SimpleGossip with bias removal) on J
    independent power-law (Chung-Lu + repair) networks, or on a real edge list, and writes the
    adapted release: S_hat, z_hat on the sum scale, n = agents per network, and the delta-method
    noise covariance over [vech(S), z] (S and z errors correlated)."""
    rng = np.random.default_rng(args.seed)
    if args.networks < 1:
        raise BayesdpInputError(f"--networks must be >= 1, got {args.networks}")
    if args.agents is None:
        args.agents = 1024 if args.design == "paper" else 16384
    tol = args.tol if args.tol and args.tol > 0 else None
    graph = None
    if args.graph_file:
        graph = gossip.load_gossip_graph(args.graph_file, d_max=args.d_max, seed=args.seed)

    def network():
        if graph is not None:
            return graph
        return gossip.synthetic_graph(args.agents, args.gamma, args.d_max, seed=rng)

    rels = []
    truth = {"protocol": gossip.PROTOCOL, "design": args.design, "networks": []}
    if args.design == "paper":
        theta = np.array(args.theta if args.theta else [4096.0, 1.0], dtype=float)
        if theta.shape != (2,):
            raise BayesdpInputError("--theta: the paper design has two coefficients")
        names = ("intercept", "x")
        truth.update(theta=theta, sigma_y2=8.0**2 / 12.0)
    else:
        if args.clip != "none":
            raise BayesdpInputError("--clip paper applies to --design paper only")
        theta = _theta(args, rng)
        first = ("intercept",) if args.intercept else ("x0",)
        names = first + tuple(f"x{i}" for i in range(1, args.d))
        truth.update(theta=theta, sigma_y2=args.sigma_y**2)
    for j in range(args.networks):
        A = network()  # the paper design: the draws simulate_paper_gossip makes for its graph
        if args.design == "paper":
            out, tr = gossip.simulate_paper_gossip(
                A, n=args.agents, theta=theta, epsilon=args.epsilon,
                delta=2.0**-7 if args.delta is None else args.delta,
                it_go=args.it_go, tol=tol, gamma=args.gamma, d_max=args.d_max,
                calibration=args.calibration or "classical", clip=args.clip, seed=rng)
        else:
            X, y = linear_rows(theta, (A.shape[0],), sigma_y=args.sigma_y, x_mean=args.x_mean,
                               x_sd=args.x_sd, intercept=args.intercept, seed=rng)
            out, tr = gossip.simulate_gossip(
                A, X, y, epsilon=args.epsilon, delta=1e-5 if args.delta is None else args.delta,
                bounds=tuple(args.bounds),
                it_go=args.it_go, tol=tol, calibration=args.calibration or "exact",
                intercept=args.intercept, kappa_run=not args.no_kappa_run, clip="none",
                d_max=args.d_max, seed=rng)
        _check_count_run(A, out, args)
        rels.append(gossip.gossip_release(out, holder_name=f"network{j}", mu_d2=args.mu_d2,
                                          feature_names=names))
        truth["networks"].append({"S": tr.S, "z": tr.z, "n": int(tr.X.shape[0])})
    return _write_outputs(rels, truth, args)


_PROTOCOLS = [_add_gossip]


# -- PriCER: private collaborative estimation via relaying (pricer.PAPERS) -------------------------


def _add_pricer(sub):
    p = add_command(sub, "pricer", _cmd_pricer,
                    "PriCER, private collaborative estimation via relaying (Saha, Seif, Yemini, "
                    "Goldsmith & Poor, ISIT 2023 and arXiv 2024)")
    p.epilog = f"Papers: {pricer.PAPERS}."
    p.add_argument("--nodes", type=int, default=20, help="nodes per network")
    p.add_argument("--rows", type=int, default=100, help="rows per node")
    p.add_argument("--graph-file", default=None, help="edge list (links on its edges)")
    p.add_argument("--link-prob", type=float, default=0.6, help="p_ij on every link")
    p.add_argument("--ps-prob", type=float, nargs=2, default=(0.3, 0.9), metavar=("LO", "HI"),
                   help="node -> server probabilities drawn U(LO, HI)")
    p.add_argument("--reciprocity", type=float, default=1.0,
                   help="link reciprocity r in [0, 1]: 1 = both directions of a link up "
                        "together (the authors' code), 0 = independent directions")
    p.add_argument("--delta", type=float, default=1e-5, help="per-link delta")
    _add_bounds(p, (4.0, 20.0))
    p.add_argument("--mechanism", choices=["classic", "analytic"], default="classic",
                   help="Gaussian calibration: 'classic' (the paper; proved for eps < 1 only) or "
                        "'analytic' (exact analytic Gaussian)")
    p.add_argument("--record-level", action="store_true",
                   help="record-level sensitivity instead of the paper's node-level 2R (extension)")
    p.add_argument("--v-mode", choices=["ps_conditional", "expected", "oracle"],
                   default="ps_conditional",
                   help="noise variance v released: 'ps_conditional' (given which nodes reached "
                        "the server), 'expected' (its public expectation) or 'oracle' (the "
                        "realised one; simulation only)")
    _add_common(p, epsilon=0.5, eps_help="per-link eps", sigma_y=0.5)
    return p


def _cmd_pricer(args):
    """Simulates PriCER on J independent Bernoulli-link networks (complete link graph with
    probability --link-prob, or the edges of --graph-file), optimises the unbiased weight/noise
    design, runs one round per network and writes the adapted release: one holder per network,
    isotropic noise sigma_s = sigma_z = sqrt(v). Fix sigma_y2 = truth *
    provenance['sigma_y2_inflation'] when fitting with a known sigma_y2."""
    rng = np.random.default_rng(args.seed)
    if args.networks < 1 or args.nodes < 2 or args.rows < 1:
        raise BayesdpInputError("--networks >= 1, --nodes >= 2 and --rows >= 1 are required")
    theta = _theta(args, rng)
    adj = None
    if args.graph_file:
        adj = consensus.load_adjacency(args.graph_file)
    rels, truth = [], {"protocol": "pricer", "theta": theta, "sigma_y2": args.sigma_y ** 2,
                       "networks": []}
    for j in range(args.networks):
        if adj is not None:
            n = adj.shape[0]
            net = pricer.PricerNetwork.from_graph(adj, rng.uniform(*args.ps_prob, n),
                                                  args.link_prob, reciprocity=args.reciprocity)
        else:
            n = args.nodes
            net = pricer.PricerNetwork.erdos_renyi(n, args.link_prob,
                                                   rng.uniform(*args.ps_prob, n),
                                                   reciprocity=args.reciprocity)
        X, y = linear_rows(theta, (n, args.rows), sigma_y=args.sigma_y, seed=rng)
        sim = pricer.pricer_release(list(X), list(y), net, eps=args.epsilon, delta=args.delta,
                                    bound_x=args.bounds[0], bound_y=args.bounds[1],
                                    seed=int(rng.integers(2**63)), v_mode=args.v_mode,
                                    mechanism=args.mechanism, record_level=args.record_level)
        rels.append(_holder(sim, j))
        truth["networks"].append({k: sim.truth[k]
                                  for k in ("S", "z", "S_reweighted", "z_reweighted")})
    return _write_outputs(rels, truth, args)


# -- consensus: DP distributed estimation by linear consensus (consensus.PAPER) --------------------


def _add_consensus(sub):
    p = add_command(sub, "consensus", _cmd_consensus,
                    "DP distributed estimation by linear consensus (Papachristou & Rahimian, "
                    "IISE Transactions 2024)")
    p.epilog = f"Paper: {consensus.PAPER}."
    p.add_argument("--agents", type=int, default=200, help="agents per network (synthetic graph)")
    p.add_argument("--graph-file", default=None, help="edge list, e.g. the US power grid")
    p.add_argument("--algorithm", choices=["mvue", "online"], default="mvue",
                   help="'mvue' (Alg. 3, one row per agent) or 'online' (Algs. 4/5, one row per "
                        "agent and round)")
    p.add_argument("--notion", choices=["signal", "network"], default="signal",
                   help="privacy notion of the local Laplace noise: per agent 'signal' or "
                        "'network' DP")
    p.add_argument("--rounds", type=int, default=50, help="consensus rounds T")
    p.add_argument("--output-agents", default="all",
                   help="'all' (network average) or an agent index whose output is released")
    _add_bounds(p, (4.0, 10.0))
    _add_common(p, epsilon=1.0, eps_help="per-agent Laplace eps", sigma_y=0.5)
    return p


def _cmd_consensus(args):
    """Simulates Papachristou & Rahimian's Metropolis-Hastings consensus (Alg. 3 'mvue' or the
    online Algs. 4/5) with local Laplace noise on J independent graphs (ring plus random chords,
    or --graph-file), one row per agent (and round), and writes the adapted release: one holder
    per network, Kish n_eff, and a Gaussian with the exact covariance of the Laplace mixture
    (flagged as an approximation)."""
    rng = np.random.default_rng(args.seed)
    theta = _theta(args, rng)
    if args.output_agents == "all":
        agents = "all"
    else:
        try:
            agents = int(args.output_agents)
        except ValueError:
            raise BayesdpInputError("--output-agents must be 'all' or an agent index") from None
    adj0 = consensus.load_adjacency(args.graph_file) if args.graph_file else None
    rels, truth = [], {"protocol": "consensus", "theta": theta, "sigma_y2": args.sigma_y ** 2,
                       "networks": []}
    for j in range(args.networks):
        adj = adj0 if adj0 is not None else consensus.ring_chords_graph(args.agents, seed=rng)
        n = adj.shape[0]
        shape = (n,) if args.algorithm == "mvue" else (args.rounds, n)
        X, y = linear_rows(theta, shape, sigma_y=args.sigma_y, seed=rng)
        sim = consensus.consensus_release(adj, X, y, eps=args.epsilon, bound_x=args.bounds[0],
                                          bound_y=args.bounds[1], seed=int(rng.integers(2**63)),
                                          T=args.rounds, algorithm=args.algorithm,
                                          notion=args.notion, agents=agents)
        rels.append(_holder(sim, j))
        truth["networks"].append({"S": sim.truth["S"], "z": sim.truth["z"]})
    return _write_outputs(rels, truth, args)


_PROTOCOLS += [_add_pricer, _add_consensus]


def register(subparsers):
    """Add ``simulate-network`` (with one sub-command per protocol) to the ``bayesdp`` commands."""
    p = subparsers.add_parser(
        "simulate-network", help="simulate a networked private-averaging protocol -> release",
        description="Simulate a networked protocol on synthetic data and write the adapted "
                    "release, which 'bayesdp fit' then fits.",
        epilog=f"Papers. gossip: {gossip.PAPER}. pricer: {pricer.PAPERS}. consensus: "
               f"{consensus.PAPER}. docs/adapters/ (in the source tree) describes each protocol.")
    sub = p.add_subparsers(dest="protocol", metavar="PROTOCOL")
    sub.required = True
    for add in _PROTOCOLS:
        add(sub)
    return p
