"""``fit``: one entry point from a release to an ArviZ posterior, dispatching by method name.

``fit`` looks the method's record up in :data:`bayesdp.inference.methods.METHODS`
(:class:`~bayesdp.inference.methods.Method`), checks the options against the record's, runs the
record's runner and turns its :class:`~bayesdp.inference.methods.MethodResult` into an
InferenceData; then the checks the record declares run on the draws.
"""

from __future__ import annotations

import secrets
import warnings
from typing import Optional

import numpy as np

from .. import diagnostics
from ..errors import BayesdpInputError, CalibrationWarning, SamplerError, check_seed
from ..models.priors import Priors
from . import closed_form, log_likelihood
from .methods import get_method


def fit(release, method="eiv", *, seed=None, priors: Optional[Priors] = None, num_samples=1000,
        num_chains=4, num_warmup=1000, progress_bar=None, **options):
    """Posterior of theta (and sigma_y^2, Sigma_x, S where sampled) from a release.

    Parameters
    ----------
    release : Release or path to a release file
    method : str
        ``"eiv"`` (default): the noise on S carried into theta's likelihood (errors in
        variables), the holders pooled, sigma_y^2 and the scale of theta's prior integrated on
        grids; a closed form whose 90% intervals hold on real data (docs/methods.md, "eiv").
        ``"fast"`` is Bayes-fixedS-fast (Algorithm 3), ``"fixeds"`` MCMC-fixedS, ``"normalx"``
        MCMC-normalX; ``bayesdp.METHODS`` holds each method's record (``import bayesdp.paper``
        adds the paper's algorithms as published).
    seed : int or None
        Seed of every random draw; None picks one from OS entropy and records it in attrs.
    priors : Priors
        Default ``Priors()``: weakly informative, scaled from the release's public bounds
        (theta ~ N(0, s^2 I) with s = 2.5 sqrt(d) B_y / B_x, sigma_y^2 ~ InvGamma(1/2,
        (B_y/60)^2), Sigma_x ~ InvWishart(d + 2, (B_x^2 / 9d) I); docs/methods.md "Priors").
        ``Priors.paper()`` gives the paper's (a = 20, b = 0.5, m = 0, C = b/(a-1) I,
        kappa = d + 1, Lambda = I), made for data rescaled to |y| <= 1 - use it to reproduce the
        paper. A release without bounds falls back to the paper's priors with a warning.
        attrs["priors"] records which was used; prior_a, prior_b, ... the values.
    num_samples, num_chains, num_warmup : int
        Draws kept per chain, chains, and warm-up iterations (MCMC methods).
    progress_bar : bool or None
        numpyro's progress bar of the MCMC methods on stderr: None (default) only when stderr is
        a terminal (:func:`bayesdp.progress.show`), True / False to force it. MCMC-B&S runs as
        one compiled loop and draws none.
    **options
        Method options, e.g. ``sigma_y_rule="paper-code"`` for "fast".

    Returns
    -------
    arviz.InferenceData with ``posterior`` (theta with feature-name coordinates, ...),
    ``observed_data`` (the released statistics the method predicts: ``z_hat``, and ``S_hat``
    for the methods that model it) and ``constant_data`` (the rest of the release: n, the
    noise scales, ``S_hat`` where S is held fixed), ``log_likelihood`` (``release``: each
    holder's log density of its released statistics given each draw, for ``az.loo``,
    ``az.waic`` and ``az.compare``), ``posterior_predictive`` (``z_hat``, and ``S_hat`` for the
    methods that model it: new releases drawn given each draw, for ``az.plot_ppc``;
    :mod:`bayesdp.inference.log_likelihood` says what each method's entries are) and attrs
    describing the fit.

    Warns
    -----
    ConvergenceWarning
        MCMC methods: when any entry of any sampled variable (theta, sigma_y2, the upper
        triangles of Sigma_x and S) has r_hat > 1.01 (split r_hat with one chain) or a bulk
        effective sample size < 400 over all chains. The message names the worst parameter; the
        attrs always record ``converged``, ``max_r_hat``, ``min_ess_bulk``, ``min_ess_tail``,
        ``worst_parameter`` and a per-variable ``convergence`` summary (JSON). Closed-form
        methods ("eiv", "fast") draw independently and skip the check (eiv with
        ``scales="per-slope"`` is MCMC and is checked).
    CalibrationWarning
        Methods that fix S at S_hat ("fast", "fixeds", ...): when, if the "eiv" posterior (which
        models the noise on S) is right, their 90% intervals would hold theta less than 80% of
        the time on average over the coefficients (:func:`check_s_noise`; attrs
        ``s_noise_coverage``, ``s_noise_mean_coverage``).
        Methods that sample S (the normalX methods): when the posterior predictive check of
        S_hat finds a direction of the features along which the release and the posterior
        disagree (:func:`check_s_hat`; attrs ``s_hat_check_z``, ``s_hat_check_max_abs_z``),
        e.g. nearly collinear features whose small variance the prior of Sigma_x rules out.
    """
    release, seed, priors = prepare_fit(release, method, seed, priors, num_samples, num_chains,
                                        num_warmup)
    record = get_method(method)
    result = record.run(
        release, priors, seed=seed, num_samples=int(num_samples),
        num_chains=int(num_chains), num_warmup=int(num_warmup), progress_bar=progress_bar,
        **record.with_options(options),
    )
    return finish_fit(release, method, seed, priors, result, stacklevel=4)


def prepare_fit(release, method, seed, priors, num_samples, num_chains, num_warmup):
    """The checks of :func:`fit` before a method runs: ``(release, seed, priors)`` with the
    release loaded, the seed drawn if None, and the priors resolved against the release."""
    from ..releases import Release, load_release

    if not isinstance(release, Release):
        release = load_release(release)
    record = get_method(method)
    for name, v in (("num_samples", num_samples), ("num_chains", num_chains)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise BayesdpInputError(f"{name} must be a whole number >= 1, got {v!r}")
    if isinstance(num_warmup, bool) or not isinstance(num_warmup, (int, np.integer)) or num_warmup < 0:
        raise BayesdpInputError(f"num_warmup must be a whole number >= 0, got {num_warmup!r}")
    if release.intercept and not record.intercept:
        raise BayesdpInputError(
            f"method {method!r} does not fit a release with an intercept (appendix B.2) yet; "
            "use 'normalx' (the normalX model with an intercept), 'fixeds' or 'fast'")
    if "s_hat" in record.checks:  # the methods that sample S (the S_hat check is theirs)
        from ..releases.layout import _check_dense_size

        d = release.d
        _check_dense_size(f"method {method!r}'s design of the moves of S (d^4 entries)",
                          (d, d, d, d), d, "; a method that samples the J x d(d+1)/2 entries of "
                          "S cannot fit it - use 'eiv' (the default) or 'fixeds'")
    seed = check_seed(seed)
    priors = (priors or Priors()).resolve(release)
    if seed is None:
        seed = secrets.randbits(63)
    return release, int(seed), priors


def finish_fit(release, method, seed, priors, result, stacklevel=3):
    """The InferenceData of :func:`fit` from a method's
    :class:`~bayesdp.inference.methods.MethodResult`: checks the draws are finite, records the
    attrs, adds each holder's log-likelihood and the posterior predictive
    (:mod:`.log_likelihood`), and runs the convergence check of the MCMC methods and the checks
    the method's record declares (:attr:`~bayesdp.inference.methods.Method.checks`)."""
    record = get_method(method)
    check_finite_posterior(result.posterior, method)
    attrs = {
        "method": method,
        "seed": int(seed),
        **_release_attrs(release),
        **priors.to_attrs(),
        **_versions(),
        **result.attrs,
    }
    observed, constant, coords, dims = _release_groups(release)
    dims = {**dims, **result.dims, "release": ["holder"]}
    loglik, predictive, kept = log_likelihood.groups(release, record, priors, result, seed)
    # observed_data holds what the posterior predictive predicts (az.plot_ppc pairs them); the
    # rest of the release (S_hat for the methods that hold S fixed) is constant_data
    for name in [k for k in observed if predictive is None or k not in predictive]:
        constant[name] = observed.pop(name)
    idata = diagnostics.to_inference_data(
        result.posterior, sample_stats=result.sample_stats, observed_data=observed,
        constant_data=constant, log_likelihood=loglik, posterior_predictive=predictive,
        coords=coords, dims=dims, attrs=attrs, predictive_draws=kept,
    )
    if record.iid if result.iid is None else result.iid:
        diagnostics.set_attrs(idata, {"convergence_checked": False, "converged": True,
                                      "convergence": "independent draws (closed form)"})
    else:
        diagnostics.check_convergence(idata, method, stacklevel=stacklevel)
    if "s_noise" in record.checks:
        check_s_noise(release, method, priors, idata, moments=result.theta_moments,
                      stacklevel=stacklevel)
    if "s_hat" in record.checks:
        check_s_hat(release, idata, stacklevel=stacklevel)
    return idata


def check_s_hat(release, idata, *, stacklevel=3):
    """For a fit that samples S (the normalX methods): the posterior predictive check of S_hat
    along the posterior's principal directions (:func:`diagnostics.s_hat_check`), recorded as
    attrs ``s_hat_check_z`` (per direction, smallest variance first), ``s_hat_check_max_abs_z``
    and ``s_hat_check_directions`` (the unit directions as columns, flattened); warns
    (:class:`CalibrationWarning`) when some |z| exceeds ``diagnostics.s_hat_z_max(d)``: the
    release and the model disagree there, and theta's intervals along it rest on the prior of
    Sigma_x."""
    chk = diagnostics.s_hat_check(diagnostics.posterior_array(idata, "S"), release.S_hat,
                                  release.sigma_s)
    diagnostics.set_attrs(idata, {
        "s_hat_check_z": chk["z"].tolist(),
        "s_hat_check_max_abs_z": float(np.max(np.abs(chk["z"]))),
        "s_hat_check_directions": chk["directions"].ravel().tolist()})
    message = diagnostics.s_hat_warning(idata)
    if message:
        warnings.warn(message, CalibrationWarning, stacklevel=stacklevel)


def check_s_noise(release, method, priors, idata, *, moments=None, stacklevel=3):
    """For a fit that fixes S at S_hat ("fast", "fixeds", ...): how often its 90% intervals
    would hold theta if the posterior that models the noise on S ("eiv" with one prior scale,
    ``scales="common"``: the default method's closed-form first step) is right: per
    coefficient, :func:`closed_form.interval_coverage` of the fit's N(mean, sd^2) against that
    posterior's mean and sd (exact, :func:`eiv.mixture_moments`). Recorded as attrs
    ``s_noise_coverage`` (per coefficient), ``s_noise_mean_coverage`` and
    ``s_noise_min_coverage``; warns (:class:`CalibrationWarning`) when the mean is below
    ``diagnostics.S_NOISE_COVERAGE_MIN``. ``moments``: the fit's exact Gaussian (mean, cov)
    when it is a closed form ("fast"), else the draws' moments are used. How well it tracks
    the coverage the fixedS methods reach: docs/evidence/coverage-real-data.md, "How well the
    fixedS methods' calibration check tracks coverage"."""
    from . import eiv

    if moments is not None:
        mean, cov = (np.asarray(v, dtype=float) for v in moments)
        sd = np.sqrt(np.diag(cov))
    else:
        theta = diagnostics.posterior_array(idata, "theta")
        mean, sd = theta.mean(axis=0), theta.std(axis=0)
    ref_mean, ref_sd = eiv.mixture_moments(eiv.eiv_posterior(release, priors))
    cov = closed_form.interval_coverage(mean, sd, ref_mean, ref_sd)
    diagnostics.set_attrs(idata, {"s_noise_coverage": cov,
                                  "s_noise_mean_coverage": float(np.mean(cov)),
                                  "s_noise_min_coverage": float(np.min(cov))})
    if np.mean(cov) < diagnostics.S_NOISE_COVERAGE_MIN:
        warnings.warn(diagnostics.s_noise_message(method, cov, release.feature_names),
                      CalibrationWarning, stacklevel=stacklevel)


def check_finite_posterior(posterior, method):
    """Raise :class:`SamplerError` naming the method and variable if any draw is NaN or infinite.

    The last line of defence: a method must never hand back non-finite draws as if they were a
    posterior (they would pass silently through summaries and ``diagnose``)."""
    for name, draws in posterior.items():
        a = np.asarray(draws)
        if a.dtype.kind in "fc" and not np.all(np.isfinite(a)):
            bad = int(np.size(a) - np.count_nonzero(np.isfinite(a)))
            raise SamplerError(
                f"method {method!r} produced {bad} non-finite (NaN or infinite) values of "
                f"{name!r} out of {a.size}; the posterior is not usable. Check the release "
                "(e.g. zero noise with a singular S_hat) or try another method")


def _release_attrs(release) -> dict:
    return {
        # the claim the release's noise pays for (Release.claim), never a number only typed
        "epsilon": release.claim.epsilon,
        "delta": release.claim.delta,
        "privacy_claim": str(release.claim),
        "privacy_claim_status": release.claim.status,
        "calibration": release.calibration,
        "sensitivity": release.sensitivity,
        "bounds": None if release.bounds is None else list(release.bounds),
        "bounds_from_data": release.bounds_from_data,
        "dp_claim_valid": release.dp_claim_valid,
        "dp_claim_note": release.dp_claim_note or None,
        "release_seeded": release.seeded,
        "J": release.J,
        "d": release.d,
        "n_total": release.n_total,
        "intercept": int(release.intercept),
        "average_rows": int(release.average_rows),
        **({} if release.n_rows is None else {"n_rows_total": int(release.n_rows.sum())}),
        # a release of a table with a formula: bayesdp.predict encodes new tables by it
        **({} if release.table is None else {"table_encoding": release.table.to_json()}),
    }


def _release_groups(release):
    """observed_data, constant_data, coords and dims describing a release."""
    coords = {
        "feature": list(release.feature_names),
        "feature_": list(release.feature_names),
        "holder": list(release.holder_names),
    }
    dims = {
        "theta": ["feature"],
        "Sigma_x": ["feature", "feature_"],
        "S": ["holder", "feature", "feature_"],
        "S_hat": ["holder", "feature", "feature_"],
        "z_hat": ["holder", "feature"],
        "n": ["holder"],
        "sigma_s": ["holder"],
        "sigma_z": ["holder"],
    }
    if release.intercept:  # the intercept model's feature-only variables (appendix B.2)
        coords["x_feature"] = list(release.feature_names[1:])
        coords["x_feature_"] = list(release.feature_names[1:])
        dims.update({"Sigma_x": ["x_feature", "x_feature_"], "mu": ["x_feature"],
                     "xbar": ["holder", "x_feature"], "W": ["holder", "x_feature", "x_feature_"]})
    observed = {"S_hat": release.S_hat, "z_hat": release.z_hat}
    constant = {"n": release.n, "sigma_s": release.sigma_s, "sigma_z": release.sigma_z}
    return observed, constant, coords, dims


def _versions() -> dict:
    from .. import __version__

    out = {"bayesdp_version": __version__, "arviz_version": diagnostics.arviz_version()}
    import numpy
    import scipy

    out["numpy_version"] = numpy.__version__
    out["scipy_version"] = scipy.__version__
    try:  # only if a JAX method already imported them
        import sys

        if "numpyro" in sys.modules:
            out["numpyro_version"] = sys.modules["numpyro"].__version__
            out["jax_version"] = sys.modules["jax"].__version__
    except Exception:  # pragma: no cover
        pass
    return out


def closed_form_moments(idata):
    """(mean, cov) stored by the closed-form methods in the InferenceData attrs."""
    a = diagnostics.attrs(idata)
    if "closed_form_mean" not in a:
        raise BayesdpInputError("this posterior has no closed-form moments (not a 'fast' fit)")
    mean = np.asarray(a["closed_form_mean"], dtype=float)
    return mean, np.asarray(a["closed_form_cov"], dtype=float).reshape(len(mean), len(mean))


def fit_nonprivate(X, y, *, priors: Optional[Priors] = None, seed=None, num_samples=1000,
                   num_chains=4, feature_names=None, Lambda0=None, bounds=None, intercept=False):
    """The non-private conjugate (normal-inverse-gamma) posterior from raw rows, as InferenceData.

    The reference every DP method is compared with; see ``closed_form.nonprivate_posterior``.
    ``priors`` default as in :func:`fit`: weakly informative from the public ``bounds``
    (B_x, B_y) - give the same bounds as the release it is compared with; without bounds the
    paper's priors, with a warning (never bounds read off the rows: the prior would then see
    the data). With n rows the data dominate either prior unless n is small.
    ``intercept=True`` fits the rows [1, x] with theta[0] named "intercept" and the priors of a
    release made with ``intercept=True`` (its reference).
    """
    from ..releases import INTERCEPT_NAME
    from ..releases.rows import check_design, check_rows

    names = feature_names
    if names is None and hasattr(X, "columns"):
        names = [str(c) for c in X.columns]
    X, y = check_rows(X, y)
    d = X.shape[1]
    names = list(names) if names is not None else [f"x{i}" for i in range(d)]
    check_design(intercept, 1, names)
    if intercept:
        X = np.column_stack([np.ones(len(X)), X])
        names = [INTERCEPT_NAME, *names]
    priors = (priors or Priors()).resolve(X.shape[1], bounds=bounds, intercept=intercept)
    seed = check_seed(seed)
    if seed is None:
        seed = secrets.randbits(63)
    post = closed_form.nonprivate_posterior(X, y, priors, Lambda0)
    rng = np.random.default_rng(seed)
    theta, sigma2 = closed_form.draw_nig(rng, post, (num_chains, num_samples))
    return diagnostics.to_inference_data(
        {"theta": theta, "sigma_y2": sigma2},
        coords={"feature": names},
        dims={"theta": ["feature"]},
        attrs={"method": "nonprivate", "seed": int(seed), "closed_form_mean": post["mean"],
               "closed_form_cov": post["cov"].ravel(), "n_total": X.shape[0],
               "bounds": None if bounds is None else [float(v) for v in bounds],
               **priors.to_attrs(), "convergence_checked": False, "converged": True,
               **_versions()},
    )
