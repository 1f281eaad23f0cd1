"""The numpyro model of a release, for running it with numpyro's own inference.

:func:`for_release` returns the model function that :func:`bayesdp.fit` samples (or whose
posterior it computes in closed form) together with the data it conditions on, built from the
release exactly as ``fit`` builds them, and a starting point::

    import jax
    from numpyro.infer import MCMC, NUTS, init_to_value
    import bayesdp

    sim = bayesdp.simulate(n=5000, d=2, seed=1)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=2,
                          seed=2)
    m = bayesdp.models.for_release(rel, "eiv")
    mcmc = MCMC(NUTS(m.model, init_strategy=init_to_value(values=m.init_values)),
                num_warmup=500, num_samples=1000)
    mcmc.run(jax.random.PRNGKey(0), m.data)
    theta = mcmc.get_samples()["theta"]     # the posterior of bayesdp.fit(rel, "eiv")

The models need JAX's float64 (S_hat has entries in the thousands next to noise variances
near 1; in float32 the likelihood's Cholesky factors lose them): :func:`for_release` turns it
on (``jax_enable_x64``, a global JAX setting, as ``fit`` does) before it builds the data.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from .._jax import enable_x64
from ..errors import BayesdpInputError
from . import regression as R

# bayesdp.inference (which imports bayesdp.models: a cycle) and JAX are imported inside the
# functions that use them


def numpyro_methods():
    """The registered ``fit`` methods whose posterior is that of a numpyro model (their record's
    ``model``): the methods :func:`for_release` takes."""
    from ..inference.methods import METHODS

    return tuple(name for name, m in METHODS.items() if m.model is not None)


class NumpyroModel(NamedTuple):
    """What :func:`for_release` returns.

    model : callable
        The numpyro model function, called with one argument: ``model(data)`` (so
        ``mcmc.run(key, data)``).
    data : NamedTuple of float64 JAX arrays
        What the model conditions on (a JAX pytree): the release's statistics, their noise and
        the prior hyperparameters, as ``fit`` builds them.
    init_values : dict
        A starting point of the model's sampled sites (for ``init_to_value(values=...)``),
        the one ``fit`` starts its chains from.
    method : str
        The ``fit`` method whose posterior this is.
    variables : tuple of str
        The sites that ``fit`` reports in its posterior (``theta`` always); sampled or
        deterministic sites of ``model``.
    """

    model: Callable
    data: object
    init_values: dict
    method: str
    variables: tuple


def for_release(release, method="eiv", *, priors=None, **options) -> NumpyroModel:
    """The numpyro model whose posterior ``bayesdp.fit(release, method)`` gives, with its data.

    Parameters
    ----------
    release : Release or path to a release file
    method : str
        One of :func:`numpyro_methods` (those whose record has a ``model``):

        - ``"eiv"`` (fit's default): :func:`~bayesdp.models.regression.eiv_model` of the
          pooled release, the S noise pushed through the plug-in theta_0 that ``fit`` finds
          (options ``scale_min``, ``sigma_y2_max`` and ``scales``). ``fit`` integrates it on
          grids; NUTS samples the same density. With ``scales="per-slope"`` theta_0 is the
          common-scale one, where ``fit``'s sampler moves it during warm-up, so the two
          posteriors differ slightly (and NUTS on this centred model diverges: a funnel).
        - ``"normalx"``: the normalX model in the non-centred form ``fit`` samples with NUTS
          (``normalx_noncentred_model``; with an intercept, the appendix B.2 model). The
          methods whose record's model is the centred ``normalx_model`` (``bayesdp.paper``'s
          "nuts-normalx" and "normalx-paper") get it in centred form: the same posterior.
        - ``"fixeds"`` (and ``bayesdp.paper``'s "fixeds-paper", "nuts-fixeds"):
          ``fixeds_model`` with S_j fixed at the estimate ``fit`` uses (options ``fixed_s``,
          ``s_noise``).
    priors : Priors or None
        As in :func:`bayesdp.fit` (default ``Priors()``, resolved against the release).
    **options
        The method options above; any other is refused.

    Returns
    -------
    :class:`NumpyroModel` ``(model, data, init_values, method, variables)``; run it with
    ``MCMC(NUTS(model, init_strategy=init_to_value(values=init_values)), ...).run(key, data)``.

    Raises
    ------
    BayesdpInputError
        An unknown method, a method without a numpyro model (``"fast"``, ``"bs"``), an
        unknown option, or a release the method cannot fit (as ``fit`` would).
    """
    from ..inference.fit import prepare_fit
    from ..inference.methods import METHODS

    if not isinstance(method, str):
        raise BayesdpInputError(f"method must be a string, one of {list(numpyro_methods())}, "
                                f"got {method!r}")
    record = METHODS.get(method)
    if record is not None and record.model is None:
        raise BayesdpInputError(f"method {method!r} has no numpyro model: it samples "
                                f"{record.samples}")
    if record is None:
        raise BayesdpInputError(f"method {method!r} has no numpyro model; choose one of "
                                f"{list(numpyro_methods())}")
    enable_x64()
    release, _, priors = prepare_fit(release, method, 0, priors, 1, 1, 0)
    if record.model is R.eiv_model:
        return _eiv(release, priors, **options)
    if record.model is R.fixeds_model:
        return _fixeds(release, priors, method, **options)
    _no_options(method, options)
    return _normalx(release, priors, method, centred=record.model is R.normalx_model)


def _no_options(method, options, takes=()):
    unknown = sorted(set(options) - set(takes))
    if unknown:
        raise BayesdpInputError(f"unknown option(s) for method {method!r}: {unknown}; it takes "
                                + (", ".join(takes) if takes else "none"))


def _eiv(release, priors, **options):
    import jax.numpy as jnp

    from ..inference import eiv

    _no_options("eiv", options, ("scale_min", "sigma_y2_max", "scales"))
    scales = options.get("scales")
    if scales is not None and scales not in eiv.SCALES:
        raise BayesdpInputError(f"scales must be one of {list(eiv.SCALES)}, got {scales!r}")
    scale_min = options.get("scale_min")
    post = eiv.eiv_posterior(release, priors,
                             scale_min=eiv.SCALE_MIN if scale_min is None else scale_min,
                             sigma_y2_max=options.get("sigma_y2_max"))
    data = post["data"]  # at fit's plug-in theta_0, one scale for all
    g, h = np.unravel_index(int(np.argmax(post["log_weight"])), post["log_weight"].shape)
    scale = float(post["scale"][h])
    if scales == "per-slope":  # one prior scale per coefficient (fit's default: one for all)
        data = data._replace(scale_min=np.full(release.d, float(data.scale_min)))
        scale = np.full(release.d, scale)
    init = {"theta_scale": jnp.asarray(scale), "theta": jnp.asarray(post["mean"][g, h]),
            "sigma_y2": jnp.asarray(float(post["sigma_y2"][g]))}
    return NumpyroModel(R.eiv_model, R.eiv_arrays(data), init, "eiv",
                        ("theta", "sigma_y2", "theta_scale"))


def _fixeds(release, priors, method, **options):
    import jax.numpy as jnp

    from ..inference import fixeds
    from ..inference.starts import initial_sigma_y2

    _no_options(method, options, tuple(fixeds.FIXED_S_OPTIONS))
    options = {**fixeds.FIXED_S_OPTIONS, **options}
    model, data, pos, _, _ = fixeds.setup(release, priors, initial_sigma_y2(release, priors),
                                          options["fixed_s"], options["s_noise"])
    init = {k: jnp.asarray(v) for k, v in pos.items()}
    return NumpyroModel(model, data, init, method, ("theta", "sigma_y2"))


def _normalx(release, priors, method, centred):
    import jax.numpy as jnp

    from ..inference import normalx

    model, data, pos = normalx.setup(release, priors, centred)
    variables = ("theta", "sigma_y2", "Sigma_x", "S")
    if release.intercept:  # appendix B.2's model
        variables = ("theta", "sigma_y2", "Sigma_x", "mu", "xbar", "W", "S")
    init = {k: jnp.asarray(v) for k, v in pos.items() if v is not None}
    return NumpyroModel(model, data, init, method, variables)
