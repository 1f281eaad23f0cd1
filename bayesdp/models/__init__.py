"""numpyro model functions of the paper's generative model, and its priors."""

from .priors import Priors
from .regression import (InterceptModelData, ModelData, fixeds_model, intercept_model_data,
                         log_joint, model_data, normalx_intercept_model, normalx_model)

__all__ = ["InterceptModelData", "ModelData", "Priors", "fixeds_model", "intercept_model_data",
           "log_joint", "model_data", "normalx_intercept_model", "normalx_model"]
