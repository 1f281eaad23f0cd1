"""Inference: ``fit`` and the method records it reads, the closed forms, the baselines and the
samplers.

Importing this package registers the core's methods (:mod:`.eiv_method`, :mod:`.fast`,
:mod:`.fixeds`, :mod:`.normalx`) in :data:`METHODS`; ``import bayesdp.paper`` adds the paper's.
"""

from .adassp import adassp
from .fit import closed_form_moments, fit, fit_nonprivate
from .methods import METHODS, Method, MethodResult, register_method
from . import eiv_method, fast, fixeds, normalx  # noqa: F401  (each registers its method)
from .batch import fit_batch

__all__ = ["METHODS", "Method", "MethodResult", "adassp", "closed_form_moments", "fit",
           "fit_batch", "fit_nonprivate", "register_method"]
