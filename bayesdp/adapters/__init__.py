"""Adapters: networked private-averaging protocols as bayesdp data sources."""

from . import gossip  # noqa: E402  (seed 000: SimpleGossip with bias removal)
from .gossip import gossip_release, gossip_releases, simulate_gossip, simulate_paper_gossip  # noqa: E402,F401
from . import pricer  # noqa: E402  (seeds 001/003: PriCER private collaborative relaying)
from .pricer import PricerNetwork, PricerPrivacy, optimize_design, pricer_release  # noqa: E402,F401
from . import consensus  # noqa: E402  (seed 004: DP distributed estimation by linear consensus)
from .consensus import consensus_release, consensus_to_release, load_edge_list as load_consensus_graph, mh_weights  # noqa: E402,F401
