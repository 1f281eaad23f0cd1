"""The record of a ``fit`` method (:class:`Method`), what its runner returns
(:class:`MethodResult`), and the registry :data:`METHODS` that ``fit`` reads.

One record per method says everything ``fit`` needs to know about it: its name (the string of
``fit(method=...)``, also the name of its module), the numpyro model whose posterior it gives,
what it samples or fixes, whether it fits a release with an intercept, its options with their
defaults, its runner, and which checks ``fit`` runs on its draws. The core's methods register
their records in their own modules (:mod:`.eiv_method`, :mod:`.fast`, :mod:`.fixeds`,
:mod:`.normalx`); ``import bayesdp.paper`` registers the paper's algorithms.
"""

from __future__ import annotations

import dataclasses
import types
from typing import Callable, Mapping, Optional

from ..errors import BayesdpInputError

#: The checks ``fit`` can run on a method's draws (:func:`bayesdp.inference.fit.finish_fit`):
#: "s_noise" for a method that fixes S at S_hat (how its intervals would cover theta if the
#: noise on S matters, :func:`~bayesdp.inference.fit.check_s_noise`), "s_hat" for a method that
#: samples S (the posterior predictive check of S_hat, :func:`~bayesdp.inference.fit.check_s_hat`).
CHECKS = ("s_noise", "s_hat")


@dataclasses.dataclass
class MethodResult:
    """What a method's runner returns to ``fit``.

    posterior : dict
        Draws shaped (chain, draw, ...), by variable name.
    sample_stats, dims : dict
        The sampler's statistics per draw, and the dims of variables ``fit`` does not know.
    attrs : dict
        Recorded in the InferenceData's attrs, for users.
    iid : bool or None
        Whether the draws are independent (no convergence check); None: the method's
        :attr:`Method.iid`.
    fixed_s, s_noise : str or None
        A method that fixes S: the estimate S_j was fixed at ("psd", "psd+I"), and how the
        noise on S entered z_hat | S ("conditional", "eiv", "ignore").
    sigma_y2 : float or None
        The value sigma_y^2 was held at (the plug-in of "fast"; option ``fix_sigma_y2``).
    plugin_theta : array (d,) or None
        The theta through which the S noise was pushed (``s_noise="eiv"``).
    theta_moments : (mean, cov) or None
        The exact Gaussian posterior of theta of a closed form ("fast"); the S noise check uses
        them instead of the draws' moments.
    eiv_data : EivData or None
        "eiv": the data of :func:`bayesdp.models.regression.eiv_model` its draws condition on.
    S_fixed : array (J, d, d) or None
        A method that fixes S: the S_j it fixed (so the log-likelihood need not find them
        again).
    """

    posterior: dict
    sample_stats: dict = dataclasses.field(default_factory=dict)
    attrs: dict = dataclasses.field(default_factory=dict)
    dims: dict = dataclasses.field(default_factory=dict)
    iid: Optional[bool] = None
    fixed_s: Optional[str] = None
    s_noise: Optional[str] = None
    sigma_y2: Optional[float] = None
    plugin_theta: Optional[object] = None
    theta_moments: Optional[tuple] = None
    eiv_data: Optional[object] = None
    S_fixed: Optional[object] = None


@dataclasses.dataclass(frozen=True)
class Method:
    """One ``fit`` method.

    name : str
        ``fit(release, method=name)``.
    run : callable
        ``run(release, priors, *, seed, num_samples, num_chains, num_warmup, progress_bar,
        **options) -> MethodResult``; ``fit`` passes every option of :attr:`options` (the given
        ones, the defaults for the rest).
    description : str
        One line: what the method is.
    model : callable or None
        The numpyro model function (:mod:`bayesdp.models`) whose posterior the method gives;
        None for a method whose posterior is not that of a numpyro model.
    samples : str
        What the method samples and what it fixes.
    intercept : bool
        Whether it fits a release made with ``intercept=True`` (appendix B.2).
    options : mapping
        Each option the method takes and its default.
    run_batch : callable or None
        ``run_batch(releases, priors_list, *, seeds, num_samples, num_chains, num_warmup,
        progress_bar, **options) -> [MethodResult]``: many releases of one shape at once
        (:func:`bayesdp.inference.batch.fit_batch`); each result equals ``run``'s for the same
        release and seed, to floating-point rounding.
    iid : bool
        Independent draws (a closed form): ``fit`` skips the MCMC convergence check.
    checks : tuple of str
        The checks of :data:`CHECKS` that ``fit`` runs on the draws.
    log_likelihood : callable or None
        ``log_likelihood(release, priors, result) -> bayesdp.inference.log_likelihood.Likelihood``:
        the model each holder's log-likelihood and the posterior predictive are evaluated with;
        None: the fit has neither group.
    """

    name: str
    run: Callable
    description: str
    model: Optional[Callable] = None
    samples: str = ""
    intercept: bool = False
    options: Mapping = dataclasses.field(default_factory=dict)
    run_batch: Optional[Callable] = None
    iid: bool = False
    checks: tuple = ()
    log_likelihood: Optional[Callable] = None

    def __post_init__(self):
        object.__setattr__(self, "options", types.MappingProxyType(dict(self.options)))
        object.__setattr__(self, "checks", tuple(self.checks))
        unknown = set(self.checks) - set(CHECKS)
        if unknown:
            raise BayesdpInputError(f"method {self.name!r}: unknown checks {sorted(unknown)}; "
                                    f"choose from {list(CHECKS)}")

    def with_options(self, options: Mapping) -> dict:
        """Every option of the method: the given ``options`` over the defaults. Raises
        BayesdpInputError naming any option the method does not take."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise BayesdpInputError(
                f"unknown option(s) for method {self.name!r}: {unknown}; it takes "
                + (", ".join(sorted(self.options)) if self.options else "none"))
        return {**self.options, **options}


#: name -> :class:`Method`, every method ``fit`` can run
METHODS: dict = {}


def register_method(name: str, run: Callable, description: str, **fields) -> Method:
    """Make ``fit(release, method=name)`` call ``run``; ``fields`` are the other fields of
    :class:`Method` (``options``, ``iid``, ``run_batch``, ``checks``, ...). Returns the record."""
    METHODS[name] = method = Method(name, run, description, **fields)
    return method


def get_method(name) -> Method:
    """The record of method ``name``; BayesdpInputError listing the available ones if none."""
    try:
        return METHODS[name]
    except (KeyError, TypeError):
        raise BayesdpInputError(
            f"unknown method {name!r}; choose one of {sorted(METHODS)} (the paper's algorithms - "
            "MCMC-B&S, Algorithms 1 and 2 as published, the NUTS cross-checks - are registered "
            "by `import bayesdp.paper`)") from None
