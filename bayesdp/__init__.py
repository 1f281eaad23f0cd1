"""bayesdp: differentially private Bayesian linear regression from noisy summary statistics.

Follows Alparslan, Yildirim & Birbil (ICML 2023). The flow of data:

    rows --release()--> Release (file) --fit()--> ArviZ InferenceData --diagnose()
                                                                       --predict()
                                       --select()--> Selection (inclusion probabilities,
                                                     top models, model-averaged InferenceData)
    BayesDPRegressor().fit(X, y).predict(X_new): the same, scikit-learn style

The paper's lab (compare, its data sets and metrics, MCMC-B&S, Algorithms 1 and 2 as
published) is the package ``bayesdp.paper``, imported on its own: ``import bayesdp.paper``.

The top level holds the names of that flow; the rest is in the subpackages: the Gaussian
calibrations in :mod:`bayesdp.privacy`, ``release_file``, ``release_dask``,
``PartialStatistics`` and ``ReleaseSpec`` in :mod:`bayesdp.releases`, ``fit_batch`` and
``closed_form_moments`` in :mod:`bayesdp.inference`, the other errors in :mod:`bayesdp.errors`,
budgets in :mod:`bayesdp.accounting`.
"""

__version__ = "0.1.0"

# BayesdpInputError (a ValueError) is the error to catch for bad input: every malformed argument,
# array or file field raises it, naming the field. BayesdpError is the base of every error
# bayesdp raises on purpose; the others are in bayesdp.errors.
from .errors import BayesdpError, BayesdpInputError, CalibrationWarning, ConvergenceWarning
# ``simulate``, ``predict`` and ``plan`` are both functions and submodules: imported here, so that the
# function is the attribute (a lazy name would lose to the submodule once it is imported).
# Both modules load no heavy dependency on import.
from .simulate import simulate, simulate_table
from .predict import predict, prediction_summary
from .plan import plan, smallest_epsilon

#: The other public names, imported on first use (PEP 562): ``import bayesdp`` and the
#: ``bayesdp`` command's ``--help`` load no scipy.stats, pandas, ArviZ, xarray, matplotlib or
#: JAX. name -> (module, attribute; None for the module itself)
_LAZY = {
    "Release": (".releases", "Release"),
    "combine_releases": (".releases", "combine_releases"),
    "load_release": (".releases", "load_release"),
    "release": (".releases", "release"),
    "Ledger": (".releases", "Ledger"),
    "Priors": (".models.priors", "Priors"),
    "METHODS": (".inference", "METHODS"),
    "adassp": (".inference", "adassp"),
    "fit": (".inference", "fit"),
    "fit_nonprivate": (".inference", "fit_nonprivate"),
    "select": (".inference.selection", "select"),
    "diagnose": (".diagnostics", "diagnose"),
    "BayesDPRegressor": (".estimator", "BayesDPRegressor"),
}
#: The core's submodules, reachable as attributes (``bayesdp.privacy``, ``bayesdp.releases``,
#: ...) without importing them first; imported on first use. (``simulate`` and ``predict`` are
#: the functions.) The layers above the core, ``bayesdp.paper``, ``bayesdp.adapters`` and
#: ``bayesdp.cli``, are imported on their own: ``import bayesdp.paper``.
_SUBMODULES = ("_jax", "accounting", "demo", "diagnostics", "errors", "estimator", "inference",
               "models", "privacy", "progress", "releases", "report", "secure_noise")
_LAZY.update({m: ("." + m, None) for m in _SUBMODULES})


def __getattr__(name):
    """A public name of :data:`_LAZY`, imported from its module on first use (then cached as a
    module attribute); AttributeError for any other name."""
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    import importlib  # here, not at the top: the package's namespace holds its public names

    value = importlib.import_module(module, __name__)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__():
    """The module's attributes, every public name and every submodule, imported or not."""
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "release",
    "load_release",
    "combine_releases",
    "Release",
    "Ledger",
    "fit",
    "fit_nonprivate",
    "select",
    "adassp",
    "METHODS",
    "Priors",
    "predict",
    "prediction_summary",
    "diagnose",
    "BayesDPRegressor",
    "simulate",
    "simulate_table",
    "plan",
    "smallest_epsilon",
    "CalibrationWarning",
    "ConvergenceWarning",
    "BayesdpError",
    "BayesdpInputError",
]
