"""Method ``"normalx"``: MCMC-normalX, the posterior of the normalX model (paper eq. 10; with an
intercept, appendix B.2), sampled by numpyro's NUTS on the model in non-centred form
(:func:`~bayesdp.models.regression.normalx_noncentred_model`: S_j = L_x A_j A_j^T L_x^T with
standardised Bartlett factors A_j, theta integrated out and redrawn non-centred).

:func:`setup` (the model, its data and the chains' start) serves every method of the normalX
model: ``bayesdp.paper`` runs Algorithm 1 as published and NUTS on the centred model through it.
"""

from __future__ import annotations

import numpy as np

from .._jax import enable_x64
from ..errors import BayesdpInputError
from ..models import regression as R
from . import closed_form
from .log_likelihood import Likelihood
from .methods import register_method
from .nuts import NUTS_OPTIONS, _laplace_inverse_mass, run_nuts
from .starts import (initial_position, initial_sigma_y2, intercept_noncentred_position,
                     intercept_position, noncentred_start, principal_basis)

# JAX is imported inside the functions that use it: importing bayesdp.inference, as
# `bayesdp --help` does, loads no JAX


def _check_release(release):
    """Raise BayesdpInputError if the normalX model cannot fit ``release``: S_j must be
    Wishart-distributed (a release of rows), its noise iid with sigma_s > 0, n_j >= d."""
    closed_form.require_wishart_valid(release, "normalx")
    if release.noise_cov is not None:
        raise BayesdpInputError(
            "release.noise_cov: the normalX model needs iid noise on S_hat (sigma_s); this "
            "release has a general noise covariance - use method='fixeds' or 'nuts-fixeds'")
    if np.any(release.sigma_s <= 0):
        raise BayesdpInputError("release.sigma_s must be > 0 for the normalX model (S_hat "
                                "would pin S exactly); use method='fixeds'")
    if np.any(release.n < release.d):
        raise BayesdpInputError(
            f"release.n: the Wishart(n_j, Sigma_x) model needs n_j >= d = {release.d} rows per "
            f"holder, got {release.n.tolist()}")


def start_S(release):
    """The S_j the chains start from, after :func:`_check_release`: the authors' nearest PSD
    matrix of S_hat_j plus the identity."""
    _check_release(release)
    return closed_form.fixed_s_estimate(release, "psd+I")


def setup(release, priors, centred):
    """The normalX model that a method samples, its data and the chains' start.

    Parameters
    ----------
    release : Release (checked for the normalX model here)
    priors : Priors, resolved against the release
    centred : bool
        True: the centred model (``normalx_model``); False: the non-centred one
        (``normalx_noncentred_model`` with Sigma_x's principal basis in its data). With an
        intercept, appendix B.2's models (``normalx_intercept_model`` /
        ``normalx_intercept_noncentred_model``).

    Returns
    -------
    ``(model, data, pos)``: the numpyro model function, its data (a NamedTuple of arrays) and
    the starting point of its sampled sites (a dict). The non-centred model without an
    intercept starts with Sigma_x at the authors' S_j estimate, in its principal basis, and
    the rest at its prior centre (:func:`.starts.noncentred_start`).
    """
    import jax.numpy as jnp

    S0 = start_S(release)
    s2_0 = initial_sigma_y2(release, priors)
    if release.intercept:
        theta0 = initial_position(release, priors, S0, s2_0)["theta"]
        data = R.intercept_model_data(release, priors)
        pos = intercept_position(release, priors, S0, s2_0, theta0)
        if centred:
            return R.normalx_intercept_model, data, pos
        return (R.normalx_intercept_noncentred_model, data,
                intercept_noncentred_position(data, pos))
    data = R.model_data(release, priors)
    pos = initial_position(release, priors, S0, s2_0)
    if centred:
        return R.normalx_model, data, pos
    Sigma0 = pos.pop("Sigma_x")
    del pos["S"], pos["theta"]
    basis = principal_basis(Sigma0)
    data = data._replace(basis=jnp.asarray(basis))
    pos.update({k: jnp.asarray(v) for k, v in noncentred_start(release.n, Sigma0, basis).items()})
    return R.normalx_noncentred_model, data, pos


def run(release, priors, *, seed, num_samples, num_chains, num_warmup, progress_bar,
        target_accept_prob, max_tree_depth, chain_method, build_only=False):
    """NUTS on the non-centred normalX model (:func:`setup`), warm-up starting from the
    Laplace approximation's diagonal inverse mass matrix at the start (without an intercept;
    :func:`.nuts._laplace_inverse_mass`); the chains run vectorised unless JAX has a device
    per chain. Options :data:`.nuts.NUTS_OPTIONS`."""
    enable_x64()
    model, data, pos = setup(release, priors, centred=False)
    inverse_mass = None if release.intercept else _laplace_inverse_mass(model, data, pos)
    return run_nuts(model, data, pos, seed=seed, num_samples=num_samples,
                    num_chains=num_chains, num_warmup=num_warmup, progress_bar=progress_bar,
                    target_accept_prob=target_accept_prob, max_tree_depth=max_tree_depth,
                    chain_method=chain_method, fallback_chain_method="vectorized",
                    inverse_mass=inverse_mass, build_only=build_only,
                    parametrisation="non-centred: S_j = L_x A_j A_j^T L_x^T, Bartlett factors "
                                    "A_j")


def likelihood(release, priors, result):
    """Each holder's log-likelihood of a normalX fit (:mod:`.log_likelihood`):
    :func:`normalx_model` (or the intercept model) with the drawn S_j; holder j's entry is
    log p(S_hat_j | S_j) + log p(z_hat_j | S_j, theta, sigma_y^2). The non-centred models have
    the same density; their draws of S are used."""
    post = result.posterior
    if release.intercept:
        data = R.intercept_model_data(release, priors)
        names = ("Sigma_x", "mu", "xbar", "W", "theta", "sigma_y2")
        model = R.normalx_intercept_model
    else:
        data = R.model_data(release, priors)
        names = ("Sigma_x", "S", "theta", "sigma_y2")
        model = R.normalx_model
    return Likelihood(model, data, {k: post[k] for k in names}, ("S_hat", "z_hat"),
                      ("S_hat", "z_hat"))


register_method(
    "normalx", run,
    "MCMC-normalX: numpyro NUTS on the normalX model in non-centred form (S_j = L_x A_j A_j^T "
    "L_x^T, Bartlett factors A_j)",
    model=R.normalx_noncentred_model,
    samples="theta, sigma_y^2, Sigma_x and every S_j (the normalX model: x ~ N(0, Sigma_x), "
            "S_j ~ Wishart(n_j, Sigma_x))",
    intercept=True, options=NUTS_OPTIONS, checks=("s_hat",), log_likelihood=likelihood)
