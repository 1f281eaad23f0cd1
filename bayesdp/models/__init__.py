"""numpyro model functions of the paper's generative model, and its priors."""

from .priors import Priors
from .regression import ModelData, fixeds_model, log_joint, model_data, normalx_model

__all__ = ["ModelData", "Priors", "fixeds_model", "log_joint", "model_data", "normalx_model"]
