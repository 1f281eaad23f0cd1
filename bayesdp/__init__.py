"""bayesdp: differentially private Bayesian linear regression from noisy summary statistics.

Follows Alparslan, Yildirim & Birbil (ICML 2023). The flow of data:

    rows --release()--> Release (file) --fit()--> ArviZ InferenceData --diagnose()/compare()
                                                                       --predict()
    BayesDPRegressor().fit(X, y).predict(X_new): the same, scikit-learn style
"""

__version__ = "0.1.0"

from .errors import (
    BayesdpError,
    BayesdpInputError,
    CalibrationWarning,
    CombineError,
    ConvergenceWarning,
    ReleaseFormatError,
    SamplerError,
)
from .privacy import (
    analytic_gaussian_sigma,
    classical_gaussian_sigma,
    gaussian_sigma,
    paper_code_gaussian_sigma,
    true_epsilon,
)
from .releases import (PartialStatistics, Release, combine_releases, load_release, release,
                       release_dask, release_file)
from .simulate import SimulatedData, simulate
from .models.priors import Priors
from .inference import METHODS, adassp, closed_form_moments, fit, fit_batch, fit_nonprivate
from .diagnostics import diagnose
from .predict import predict, prediction_summary
from .estimator import BayesDPRegressor
from .datasets import Dataset, load_dataset
from .comparison import compare
from . import accounting, metrics

__all__ = [
    "accounting",
    "BayesDPRegressor",
    "BayesdpError",
    "BayesdpInputError",
    "CalibrationWarning",
    "CombineError",
    "ConvergenceWarning",
    "METHODS",
    "PartialStatistics",
    "Priors",
    "Release",
    "ReleaseFormatError",
    "SamplerError",
    "SimulatedData",
    "adassp",
    "analytic_gaussian_sigma",
    "classical_gaussian_sigma",
    "closed_form_moments",
    "combine_releases",
    "compare",
    "Dataset",
    "diagnose",
    "fit",
    "fit_batch",
    "fit_nonprivate",
    "gaussian_sigma",
    "load_dataset",
    "load_release",
    "metrics",
    "paper_code_gaussian_sigma",
    "predict",
    "prediction_summary",
    "release",
    "release_dask",
    "release_file",
    "simulate",
    "true_epsilon",
]
