"""Inference: closed-form estimators, baselines, MCMC kernels, and the ``fit`` entry point."""

from .adassp import adassp
from .fit import METHODS, closed_form_moments, fit, fit_nonprivate, register_method
from . import bs as _bs  # noqa: F401  (registers method "bs")
from . import mcmc as _mcmc  # noqa: F401  (registers normalx, fixeds, the paper's kernels, nuts-*)
from .batch import fit_batch

__all__ = ["METHODS", "adassp", "closed_form_moments", "fit", "fit_batch", "fit_nonprivate", "register_method"]
