"""bayesdp: differentially private Bayesian linear regression from noisy summary statistics.

Follows Alparslan, Yildirim & Birbil (ICML 2023). The flow of data:

    rows --release()--> Release (file) --fit()--> ArviZ InferenceData --diagnose()
                                                                       --predict()
    BayesDPRegressor().fit(X, y).predict(X_new): the same, scikit-learn style

The paper's lab (compare, its data sets and metrics, MCMC-B&S, Algorithms 1 and 2 as
published) is the package ``bayesdp.paper``, imported on its own: ``import bayesdp.paper``.
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
# ``simulate`` and ``predict`` are both functions and submodules: imported here, so that the
# function is the attribute (a lazy name would lose to the submodule once it is imported).
# Both modules load no heavy dependency on import.
from .simulate import SimulatedData, simulate
from .predict import predict, prediction_summary

#: The other public names, imported on first use (PEP 562): ``import bayesdp`` and the
#: ``bayesdp`` command's ``--help`` load no scipy.stats, pandas, ArviZ, xarray, matplotlib or
#: JAX. name -> (module, attribute; None for the module itself)
_LAZY = {
    "analytic_gaussian_sigma": (".privacy", "analytic_gaussian_sigma"),
    "classical_gaussian_sigma": (".privacy", "classical_gaussian_sigma"),
    "gaussian_sigma": (".privacy", "gaussian_sigma"),
    "paper_code_gaussian_sigma": (".privacy", "paper_code_gaussian_sigma"),
    "true_epsilon": (".privacy", "true_epsilon"),
    "PartialStatistics": (".releases", "PartialStatistics"),
    "Release": (".releases", "Release"),
    "combine_releases": (".releases", "combine_releases"),
    "load_release": (".releases", "load_release"),
    "release": (".releases", "release"),
    "release_dask": (".releases", "release_dask"),
    "release_file": (".releases", "release_file"),
    "Priors": (".models.priors", "Priors"),
    "METHODS": (".inference", "METHODS"),
    "adassp": (".inference", "adassp"),
    "closed_form_moments": (".inference", "closed_form_moments"),
    "fit": (".inference", "fit"),
    "fit_batch": (".inference", "fit_batch"),
    "fit_nonprivate": (".inference", "fit_nonprivate"),
    "diagnose": (".diagnostics", "diagnose"),
    "BayesDPRegressor": (".estimator", "BayesDPRegressor"),
    "accounting": (".accounting", None),
}
#: Submodules reachable as attributes (``bayesdp.privacy``, ``bayesdp.inference``, ...) without
#: importing them first, as when ``import bayesdp`` imported them all; imported on first use.
#: (``simulate`` and ``predict`` are the functions, as before.)
_SUBMODULES = ("_jax", "accounting", "adapters", "cli", "demo", "diagnostics", "errors",
               "estimator", "inference", "models", "privacy", "progress", "releases", "report",
               "secure_noise")
_LAZY.update({m: ("." + m, None) for m in _SUBMODULES if m not in _LAZY})


def __getattr__(name):
    """A public name of :data:`_LAZY`, imported from its module on first use (then cached as a
    module attribute); AttributeError for any other name."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    import importlib

    value = importlib.import_module(module, __name__)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__():
    """The module's attributes, every public name and every submodule, imported or not."""
    return sorted(set(globals()) | set(_LAZY))


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
    "diagnose",
    "fit",
    "fit_batch",
    "fit_nonprivate",
    "gaussian_sigma",
    "load_release",
    "paper_code_gaussian_sigma",
    "predict",
    "prediction_summary",
    "release",
    "release_dask",
    "release_file",
    "simulate",
    "true_epsilon",
]
