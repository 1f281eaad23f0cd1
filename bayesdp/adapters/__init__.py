"""Adapters: networked private-averaging protocols as bayesdp data sources.

Each submodule simulates one protocol faithfully and turns its public output into a
:class:`bayesdp.Release` carrying the noise the protocol really leaves (see docs/adapters/).
"""

from . import consensus, gossip, pricer
from .consensus import consensus_release, consensus_to_release, mh_weights
from .gossip import gossip_release, gossip_releases, simulate_gossip, simulate_paper_gossip
from .pricer import PricerNetwork, PricerPrivacy, optimize_design, pricer_release

__all__ = [
    "PricerNetwork", "PricerPrivacy", "consensus", "consensus_release", "consensus_to_release",
    "gossip", "gossip_release", "gossip_releases", "mh_weights", "optimize_design", "pricer",
    "pricer_release", "simulate_gossip", "simulate_paper_gossip",
]
