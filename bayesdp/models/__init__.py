"""numpyro model functions of the paper's generative model, and its priors.

:func:`for_release` is the public route from a release to the model ``bayesdp.fit`` uses and
its data, for running it with numpyro's own inference (``MCMC(NUTS(model), ...)``).
"""

from .for_release import NumpyroModel, for_release, numpyro_methods
from .priors import Priors
from .regression import (InterceptModelData, ModelData, fixeds_model, intercept_model_data,
                         log_joint, model_data, normalx_intercept_model, normalx_model)

__all__ = ["InterceptModelData", "ModelData", "NumpyroModel", "Priors",
           "fixeds_model", "for_release", "intercept_model_data", "log_joint", "model_data",
           "normalx_intercept_model", "normalx_model", "numpyro_methods"]
