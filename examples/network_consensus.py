"""DP distributed estimation by linear consensus (Papachristou & Rahimian, "Differentially
Private Distributed Estimation and Learning", IISE Transactions, 2024) end to end: J independent
graphs of agents, each agent holding one regression row; each network runs Alg. 3 (Metropolis-Hastings
averaging, local Laplace noise, signal DP) for T rounds; ONE agent's output per network is adapted
to a one-holder release with its Kish effective size and the exact covariance of the Laplace noise
(as a Gaussian); fit Bayes-fixedS-fast; plot the posterior of theta against the truth.

    python examples/network_consensus.py [--out network_consensus.png] [--seed 0]

Uses the US power grid (../shared/data/networks/) for the first network when it is present, and
ring-plus-chords graphs otherwise. Runs in a few seconds. The wrong analysis in the plot treats 20
agents of each network as independent holders (their noise is nearly the same draw).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from network_common import arguments, fit_and_plot


def main(argv=None):
    import bayesdp
    from bayesdp.adapters import consensus as cm
    from bayesdp.simulate import linear_rows

    ap = arguments(__doc__, "network_consensus.png", networks=3)
    ap.add_argument("--agents", type=int, default=3000, help="agents per synthetic network")
    ap.add_argument("--rounds", type=int, default=100)
    ap.add_argument("--epsilon", type=float, default=20.0)
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    theta = np.array([0.3, -0.2])
    sigma_y, bounds = 0.5, (3.0, 5.0)
    grid_path = cm.power_grid_path()
    rels, wrong, X_all, y_all = [], [], [], []
    for j in range(args.networks):
        if j == 0 and grid_path.exists():
            adj, name = cm.load_adjacency(grid_path), "US power grid"
        else:
            adj, name = cm.ring_chords_graph(args.agents, seed=rng), "ring + chords"
        n = adj.shape[0]
        X, y = linear_rows(theta, (n,), sigma_y=sigma_y, seed=rng)
        agent = int(rng.integers(n))
        sim = cm.consensus_release(adj, X, y, eps=args.epsilon, bound_x=bounds[0],
                                   bound_y=bounds[1], seed=int(rng.integers(2**63)),
                                   T=args.rounds, agents=agent, feature_names=("x1", "x2"))
        r = sim.release
        print(f"network {j} ({name}): n = {n}, agent {agent}: n_eff = {r.provenance['n_eff']:.1f}, "
              f"sigma = {r.sigma_s[0]:.2f}, excess kurtosis {r.provenance['excess_kurtosis']:.3f}")
        rels.append(dataclasses.replace(r, holder_names=(f"network{j}",)))
        wrong += [dataclasses.replace(cm.consensus_to_release(sim.run, 2, agents=int(k),
                                                              feature_names=("x1", "x2")),
                                      holder_names=(f"{j}:{k}",))
                  for k in rng.choice(n, 20, replace=False)]
        X_all.append(X)
        y_all.append(y)
    fit_and_plot(args, bayesdp.combine_releases(rels), bayesdp.combine_releases(wrong),
                 priors=bayesdp.Priors(C=np.eye(2)), sigma_y2=sigma_y**2, rows=(X_all, y_all),
                 bounds=bounds, theta=theta,
                 labels=("one agent / network (fast, eiv)", "wrong: 20 agents/network as holders"),
                 reference_label="non-private posterior mean (all rows)",
                 title=f"Consensus (Alg. 3, signal DP eps = {args.epsilon:g}, T = {args.rounds}): "
                       f"{args.networks} networks")


if __name__ == "__main__":
    main()
