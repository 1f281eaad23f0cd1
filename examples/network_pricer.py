"""PriCER (Saha, Seif, Yemini, Goldsmith & Poor, "Collaborative Mean Estimation over
Intermittently Connected Networks with Peer-To-Peer Privacy", IEEE ISIT 2023, and its journal
version "Privacy Preserving Semi-Decentralized Mean Estimation over Intermittently-Connected
Networks", arXiv:2406.03766, 2024) end to end: J independent Bernoulli-link networks of nodes, each node
holding regression rows; every network optimises the unbiased PriCER design, runs one round of
private collaborative relaying, and its server output is adapted to a one-holder release; fit
Bayes-fixedS-fast; plot the posterior of theta against the truth.

    python examples/network_pricer.py [--out network_pricer.png] [--seed 0]

Runs in a few seconds. The wrong analysis in the plot treats each network's relays as independent
holders (they share node data and link weights, so it is overconfident).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from network_common import arguments, fit_and_plot


def relays_as_holders(pm, rnd, right, d):
    """The wrong analysis: every reporting relay's output as an independent holder (the relays
    share node data and link weights); ``right`` is the round's proper release."""
    relays = np.flatnonzero(rnd.tau_ps)
    S, z, N = zip(*(pm.unpack_suffstats(rnd.relay_outputs[j], d) for j in relays))
    sd = np.sqrt(np.asarray(rnd.relay_v)[relays])
    return dataclasses.replace(right, S_hat=np.stack(S), z_hat=np.stack(z), sigma_s=sd, sigma_z=sd,
                               holder_names=(),
                               n=np.maximum(1, np.round(np.asarray(N, float))).astype(int))


def main(argv=None):
    import bayesdp
    from bayesdp.adapters import pricer as pm
    from bayesdp.simulate import linear_rows

    ap = arguments(__doc__, "network_pricer.png", networks=3)
    ap.add_argument("--nodes", type=int, default=30)
    ap.add_argument("--rows", type=int, default=200)
    ap.add_argument("--epsilon", type=float, default=1.0, help="per-link eps (analytic Gaussian)")
    args = ap.parse_args(argv)

    rng = np.random.default_rng(args.seed)
    theta = np.array([0.3, -0.2])
    sigma_y, bounds = 0.5, (4.0, 10.0)
    rels, wrong, X_all, y_all = [], [], [], []
    for j in range(args.networks):
        n = args.nodes
        net = pm.PricerNetwork.erdos_renyi(n, 0.5, rng.uniform(0.2, 0.9, n))
        X, y = linear_rows(theta, (n, args.rows), sigma_y=sigma_y, seed=rng)
        Xs, ys = list(X), list(y)
        sim = pm.pricer_release(Xs, ys, net, eps=args.epsilon, delta=1e-5, bound_x=bounds[0],
                                bound_y=bounds[1], seed=int(rng.integers(2**63)),
                                record_level=True, mechanism="analytic",
                                feature_names=("x1", "x2"))
        r = sim.release
        print(f"network {j}: {n} nodes, {net.n_edges - n} directed links, realised weights c in "
              f"[{sim.round.c.min():.2f}, {sim.round.c.max():.2f}], sigma = {r.sigma_s[0]:.1f}, "
              f"sigma_y2 inflation {r.provenance['sigma_y2_inflation']:.3f}")
        rels.append(dataclasses.replace(r, holder_names=(f"network{j}",)))
        rd = pm.simulate_round(pm.pack_suffstats(Xs, ys), net, sim.design, rng, keep_relays=True)
        wrong.append(relays_as_holders(pm, rd, pm.round_to_release(
            rd, net, sim.design, sim.truth["privacy"], 2, feature_names=("x1", "x2")), 2))
        X_all += Xs
        y_all += ys
    release = bayesdp.combine_releases(rels)  # one holder per network
    s2 = sigma_y**2 * float(np.mean([r.provenance["sigma_y2_inflation"] for r in rels]))
    fit_and_plot(args, release, bayesdp.combine_releases(wrong), priors=bayesdp.Priors(C=np.eye(2)),
                 sigma_y2=s2, rows=(X_all, y_all), bounds=bounds, theta=theta,
                 labels=("PriCER release (fast, eiv)", "wrong: relays as holders"),
                 title=f"PriCER: {args.networks} networks x {args.nodes} nodes x {args.rows} "
                       f"rows, per-link eps = {args.epsilon:g}")


if __name__ == "__main__":
    main()
