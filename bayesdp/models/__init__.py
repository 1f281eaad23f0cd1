"""numpyro model functions of the paper's generative model, and its priors."""

from .priors import Priors

__all__ = ["Priors"]
