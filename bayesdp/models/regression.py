"""numpyro model functions of the paper's generative model (section 3, eq. 10; appendix A).

These functions are the single source of truth for the joint density
(``normalx_noncentred_model`` is ``normalx_model`` after a change of variables, for NUTS). The hand-written
kernels in :mod:`bayesdp.inference.kernels` evaluate the same density by hand (sharing Cholesky
factors), and the tests check every block of it against :func:`log_joint` below, which is
``numpyro.infer.util.log_density`` of these models.

normalX (features x_i ~ N(0, Sigma_x); z_j = X_j^T y_j integrated out, Prop. 3.1)::

    Sigma_x   ~ InvWishart(kappa, Lambda)                     (numpyro: concentration, scale_matrix)
    S_j       ~ Wishart(n_j, Sigma_x)            j = 1..J    (plate "holder")
    S_hat_j   | S_j    : upper triangle incl. diagonal ~ N(S_j[iu], sigma_s_j^2), independent
    theta     ~ N(m, C)
    sigma_y^2 ~ InvGamma(a, b)
    z_hat_j   | S_j, theta, sigma_y^2 ~ N(S_j theta, sigma_y^2 S_j + Sigma_z_j)

fixedS: S_j are data (the nearest-PSD estimate of section 4.2), only theta and sigma_y^2 are
latent, with the same z_hat_j likelihood.

normalX with an intercept (appendix B.2; a release made with ``intercept=True``): the rows are
[c, x] with c = 1 (c = sqrt(k) when rows were averaged in groups of k), x_i ~ N(mu, Sigma_x)
with p = d - 1 features, and the scatter of holder j is split into its mean and centred part::

    Sigma_x   ~ InvWishart(kappa, Lambda)                     (p x p)
    mu        ~ N(mu_mean, mu_cov)                            (prior on the feature mean)
    xbar_j    ~ N(mu, Sigma_x / n_j)                          (the holder's feature mean)
    W_j       ~ Wishart(n_j - 1, Sigma_x)                     (centred scatter, independent)
    S_j       = [[n_j c^2, c n_j xbar_j^T], [c n_j xbar_j, W_j + n_j xbar_j xbar_j^T]]
    S_hat_j, theta, sigma_y^2, z_hat_j as in normalX, with this S_j (d x d)

(``S`` is recorded as a deterministic site, so posteriors have S as in normalX).

``Sigma_z_j`` is the (d, d) covariance of the noise on z_hat_j: sigma_z_j^2 I for the paper's
release (eq. 3). For a release with a general noise covariance over [vech(S), z] (network
adapters), the fixedS model uses the noise of z_hat given S fixed
(:func:`bayesdp.inference.closed_form.z_given_s_noise`): a mean shift, subtracted from z_hat in
``ModelData``, and a covariance; normalX refuses such releases.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..errors import BayesdpInputError


class ModelData(NamedTuple):
    """Everything the models condition on, as arrays (float64 under x64).

    ``S_hat`` / ``z_hat`` set to None make the models sample them (prior predictive), which the
    joint-distribution (Geweke) tests use.

    S_hat (J, d, d), z_hat (J, d), n (J,), sigma_s (J,), Sigma_z (J, d, d); S_fixed (J, d, d)
    (fixedS only; zeros for normalX); prior hyperparameters a, b, m (d,), C (d, d),
    Lambda (d, d), kappa. ``z_hat`` is the released z_hat minus the noise's conditional mean
    given S (zero for the Gaussian mechanism of eqs. (2)-(3)).
    """

    S_hat: object
    z_hat: object
    n: object
    sigma_s: object
    Sigma_z: object
    S_fixed: object
    a: object
    b: object
    m: object
    C: object
    Lambda: object
    kappa: object


def model_data(release, priors, *, S_fixed=None, z_noise=None) -> ModelData:
    """ModelData from a :class:`~bayesdp.release.Release` and resolved :class:`Priors`.

    ``z_noise`` is ``(shift (J, d), Sigma_z (J, d, d))``, the noise of z_hat given S
    (default: no shift and the release's marginal z noise covariance).
    Call ``bayesdp._jax.enable_x64()`` first; the arrays are made float64 JAX arrays.
    """
    import jax.numpy as jnp

    from ..inference.closed_form import z_noise_covariances

    d = release.d
    if np.asarray(priors.m).shape != (d,):
        raise BayesdpInputError(
            f"priors: m has shape {np.asarray(priors.m).shape} but the release has d={d} features"
        )
    if z_noise is None:
        shift, Sz = np.zeros((release.J, d)), z_noise_covariances(release)
    else:
        shift, Sz = z_noise
    S_fix = np.zeros_like(release.S_hat) if S_fixed is None else np.asarray(S_fixed, float)
    f = lambda x: jnp.asarray(np.asarray(x, dtype=np.float64))  # noqa: E731
    return ModelData(
        S_hat=f(release.S_hat), z_hat=f(release.z_hat - shift), n=f(release.n),
        sigma_s=f(release.sigma_s), Sigma_z=f(Sz), S_fixed=f(S_fix),
        a=f(priors.a), b=f(priors.b), m=f(priors.m), C=f(priors.C),
        Lambda=f(priors.Lambda), kappa=f(priors.kappa),
    )


def _z_likelihood(data, S, theta, sigma_y2):
    import numpyro
    import numpyro.distributions as dist
    import jax.numpy as jnp

    J = data.Sigma_z.shape[0]
    cov = sigma_y2 * S + data.Sigma_z
    loc = jnp.einsum("jkl,l->jk", S, theta)
    with numpyro.plate("holder", J):
        numpyro.sample("z_hat", dist.MultivariateNormal(loc, covariance_matrix=cov),
                       obs=data.z_hat)


def _s_hat_likelihood(data, S):
    """S_hat_j | S_j: the upper triangle incl. diagonal ~ N(S_j[iu], sigma_s_j^2), independent
    (inside the "holder" plate)."""
    import numpyro
    import numpyro.distributions as dist

    iu = np.triu_indices(S.shape[-1])
    numpyro.sample(
        "S_hat",
        dist.Normal(S[:, iu[0], iu[1]], data.sigma_s[:, None]).to_event(1),
        obs=None if data.S_hat is None else data.S_hat[:, iu[0], iu[1]],
    )


def _theta_sigma(data):
    import numpyro
    import numpyro.distributions as dist

    theta = numpyro.sample("theta", dist.MultivariateNormal(data.m, covariance_matrix=data.C))
    sigma_y2 = numpyro.sample("sigma_y2", dist.InverseGamma(data.a, data.b))
    return theta, sigma_y2


def normalx_model(data: ModelData):
    """The normalX model (paper eq. 10): latent Sigma_x, S (J, d, d), theta, sigma_y2."""
    import numpyro
    import numpyro.distributions as dist

    J = data.Sigma_z.shape[0]
    Sigma_x = numpyro.sample(
        "Sigma_x", dist.InverseWishart(data.kappa, scale_matrix=data.Lambda)
    )
    with numpyro.plate("holder", J):
        S = numpyro.sample("S", dist.Wishart(data.n, scale_matrix=Sigma_x))
        _s_hat_likelihood(data, S)
    theta, sigma_y2 = _theta_sigma(data)
    _z_likelihood(data, S, theta, sigma_y2)


def bartlett_cholesky(n, W_diag, W_offdiag):
    """Lower Cholesky factors A_j of W_j ~ Wishart(n_j, I) from standardised Bartlett variables.

    Bartlett: W = A A^T with A lower triangular, A_ii ~ chi(n - i) (i = 0..d-1) and
    A_ik ~ N(0, 1) below the diagonal. A_ii = exp(eta_i) with
    eta_i = log(nu_i)/2 + W_diag_i / sqrt(2 nu_i), nu_i = n - i: at n_j in the thousands
    W_diag is close to N(0, 1), so the sampler sees unit-scale variables.
    Returns A (J, d, d) and the log density of W_diag (exact, up to a constant) minus the
    N(0, 1) density the model already counts: log p(eta) = nu eta - e^{2 eta} / 2 + const
    (the chi density with the Jacobian of a = e^eta)."""
    import jax.numpy as jnp

    J, d = W_diag.shape
    nu = n[:, None] - jnp.arange(d)[None, :]
    eta = 0.5 * jnp.log(nu) + W_diag / jnp.sqrt(2.0 * nu)
    correction = jnp.sum(nu * eta - 0.5 * jnp.exp(2.0 * eta) + 0.5 * W_diag ** 2)
    il = np.tril_indices(d, -1)
    A = jnp.zeros((J, d, d), dtype=W_diag.dtype)
    A = A.at[:, np.arange(d), np.arange(d)].set(jnp.exp(eta))
    A = A.at[:, il[0], il[1]].set(W_offdiag)
    return A, correction


def bartlett_variables(n, L_x, S):
    """Inverse of :func:`bartlett_cholesky` for S_j = L_x A_j A_j^T L_x^T: (W_diag, W_offdiag),
    numpy; used for starting values."""
    n, L_x, S = (np.asarray(v, dtype=float) for v in (n, L_x, S))
    d = L_x.shape[0]
    A = np.linalg.solve(L_x, np.linalg.cholesky(S))
    nu = n[:, None] - np.arange(d)[None, :]
    eta = np.log(np.diagonal(A, axis1=1, axis2=2))
    il = np.tril_indices(d, -1)
    return (eta - 0.5 * np.log(nu)) * np.sqrt(2.0 * nu), A[:, il[0], il[1]]


def normalx_noncentred_model(data: ModelData):
    """The normalX model (paper eq. 10) in non-centred form: the same joint density of
    (Sigma_x, S, theta, sigma_y2, S_hat, z_hat) as :func:`normalx_model`, with S a function of
    Sigma_x and standardised Bartlett variables::

        S_j = L_x A_j A_j^T L_x^T,   Sigma_x = L_x L_x^T,   A_j A_j^T ~ Wishart(n_j, I)

    (Bartlett decomposition, :func:`bartlett_cholesky`), so S_j ~ Wishart(n_j, Sigma_x).
    At n_j in the thousands S_j is within ~1/sqrt(n_j) of n_j Sigma_x a priori while S_hat_j
    measures it with noise sigma_s: S_j and Sigma_x are tightly coupled in the centred form,
    and nearly independent here (A_j stays close to its prior). S is a deterministic site.
    theta is integrated out of the z_hat likelihood and drawn from its exact conditional,
    also non-centred (:func:`theta_given_s`); theta is a deterministic site too. With
    ``z_hat`` None (prior predictive) the model is written generatively instead."""
    import numpyro
    import numpyro.distributions as dist
    import jax.numpy as jnp

    J, d = data.Sigma_z.shape[0], data.m.shape[0]
    Sigma_x = numpyro.sample(
        "Sigma_x", dist.InverseWishart(data.kappa, scale_matrix=data.Lambda)
    )
    with numpyro.plate("holder", J):
        W_diag = numpyro.sample("W_diag", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
        W_offdiag = numpyro.sample(
            "W_offdiag", dist.Normal(0.0, 1.0).expand([d * (d - 1) // 2]).to_event(1))
    A, correction = bartlett_cholesky(data.n, W_diag, W_offdiag)
    numpyro.factor("W_diag_chi", correction)
    LA = jnp.einsum("ik,jkl->jil", jnp.linalg.cholesky(Sigma_x), A)
    S = numpyro.deterministic("S", LA @ jnp.swapaxes(LA, -1, -2))
    with numpyro.plate("holder", J):
        _s_hat_likelihood(data, S)
    if data.z_hat is None:  # prior predictive: the generative form
        theta, sigma_y2 = _theta_sigma(data)
        _z_likelihood(data, S, theta, sigma_y2)
        return
    sigma_y2 = numpyro.sample("sigma_y2", dist.InverseGamma(data.a, data.b))
    log_marginal, mean, L_P = theta_given_s(data, S, sigma_y2)
    numpyro.factor("z_hat_marginal", log_marginal)
    theta_std = numpyro.sample("theta_std", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
    numpyro.deterministic("theta", mean + _solve_upper(L_P, theta_std))


def _solve_upper(L, v):
    """L^{-T} v for a lower-triangular L."""
    from jax.scipy.linalg import solve_triangular

    return solve_triangular(L.T, v, lower=False)


def theta_given_s(data, S, sigma_y2):
    """theta integrated out of the z_hat likelihood (conjugate Gaussian; paper eq. 12):

        P = C^{-1} + sum_j S_j V_j^{-1} S_j,   b = C^{-1} m + sum_j S_j V_j^{-1} z_hat_j,
        V_j = sigma_y^2 S_j + Sigma_z_j,       theta | S, sigma_y^2, z_hat ~ N(P^{-1} b, P^{-1})
        log p(z_hat | S, sigma_y^2) = -1/2 sum_j (z_j^T V_j^{-1} z_j + log|2 pi V_j|)
                                      - 1/2 (m^T C^{-1} m + log|C| - b^T P^{-1} b + log|P|)

    Returns (log p(z_hat | S, sigma_y^2), P^{-1} b, L_P with L_P L_P^T = P). Cholesky solves
    only. In the non-centred model theta = P^{-1} b + L_P^{-T} theta_std, theta_std ~ N(0, I):
    p(theta | ...) p(z_hat | ...) is the same joint density as p(theta) p(z_hat | theta, ...),
    without the funnel between sigma_y^2 and theta that NUTS meets otherwise."""
    import jax.numpy as jnp
    from jax.scipy.linalg import cho_solve

    d = data.m.shape[0]
    V = sigma_y2 * S + data.Sigma_z
    L_V = jnp.linalg.cholesky(V)
    Vinv_S = cho_solve((L_V, True), S)
    Vinv_z = cho_solve((L_V, True), data.z_hat[..., None])[..., 0]
    L_C = jnp.linalg.cholesky(data.C)
    Cinv_m = cho_solve((L_C, True), data.m)
    P = cho_solve((L_C, True), jnp.eye(d)) + jnp.einsum("jkl,jlm->km", S, Vinv_S)
    b = Cinv_m + jnp.einsum("jkl,jl->k", S, Vinv_z)
    L_P = jnp.linalg.cholesky(P)
    mean = cho_solve((L_P, True), b)
    logdet = lambda L: 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)))  # noqa: E731
    log_marginal = -0.5 * (jnp.sum(data.z_hat * Vinv_z) + jnp.sum(logdet(L_V))
                           + data.z_hat.size * jnp.log(2.0 * jnp.pi)
                           + data.m @ Cinv_m + logdet(L_C) - b @ mean + logdet(L_P))
    return log_marginal, mean, L_P


def theta_std_of(data, S, sigma_y2, theta):
    """Inverse of theta = P^{-1} b + L_P^{-T} theta_std (starting values, tests)."""
    _, mean, L_P = theta_given_s(data, S, sigma_y2)
    return L_P.T @ (theta - mean)


def fixeds_model(data: ModelData):
    """The fixedS model (section 4.2): S_j = data.S_fixed; latent theta, sigma_y2."""
    theta, sigma_y2 = _theta_sigma(data)
    _z_likelihood(data, data.S_fixed, theta, sigma_y2)


class InterceptModelData(NamedTuple):
    """What the normalX intercept model conditions on (d = p + 1 with the intercept column).

    S_hat (J, d, d), z_hat (J, d), n (J,), column (the value c of the ones column), sigma_s
    (J,), Sigma_z (J, d, d); theta's prior m (d,), C (d, d) and a, b; Sigma_x's Lambda (p, p)
    and kappa; mu's prior mu_mean (p,), mu_cov (p, p). ``S_hat`` / ``z_hat`` None: sampled.
    """

    S_hat: object
    z_hat: object
    n: object
    column: object
    sigma_s: object
    Sigma_z: object
    a: object
    b: object
    m: object
    C: object
    Lambda: object
    kappa: object
    mu_mean: object
    mu_cov: object


def intercept_model_data(release, priors) -> InterceptModelData:
    """InterceptModelData from a release made with ``intercept=True`` and priors resolved for
    it (``Priors().resolve(release)``). Call ``bayesdp._jax.enable_x64()`` first."""
    import jax.numpy as jnp

    from ..inference.closed_form import z_noise_covariances

    if not release.intercept:
        raise BayesdpInputError("the intercept model needs a release made with intercept=True")
    if not priors.intercept:
        raise BayesdpInputError("priors: resolve them for this release (Priors().resolve("
                                "release)) so that Lambda and mu's prior have the features' size")
    d = release.d
    if np.asarray(priors.m).shape != (d,):
        raise BayesdpInputError(
            f"priors: m has shape {np.asarray(priors.m).shape} but the release has d={d} "
            "coefficients (the intercept and the features)")
    f = lambda x: jnp.asarray(np.asarray(x, dtype=np.float64))  # noqa: E731
    return InterceptModelData(
        S_hat=f(release.S_hat), z_hat=f(release.z_hat), n=f(release.n),
        column=f(np.sqrt(release.average_rows)), sigma_s=f(release.sigma_s),
        Sigma_z=f(z_noise_covariances(release)), a=f(priors.a), b=f(priors.b), m=f(priors.m),
        C=f(priors.C), Lambda=f(priors.Lambda), kappa=f(priors.kappa),
        mu_mean=f(priors.mu_mean), mu_cov=f(priors.mu_cov))


def intercept_scatter(n, column, xbar, W):
    """S_j = [[n c^2, c n xbar^T], [c n xbar, W + n xbar xbar^T]] for every holder (J, d, d)."""
    import jax.numpy as jnp

    nb = n[:, None] * xbar
    top = jnp.concatenate([(n * column**2)[:, None], column * nb], axis=1)
    low = jnp.concatenate([column * nb[:, :, None], W + nb[:, :, None] * xbar[:, None, :]], axis=2)
    return jnp.concatenate([top[:, None, :], low], axis=1)


def normalx_intercept_model(data: InterceptModelData):
    """The normalX model with an intercept (appendix B.2): latent Sigma_x, mu, xbar (J, p),
    W (J, p, p), theta (d), sigma_y2; S (J, d, d) is deterministic."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    J = data.Sigma_z.shape[0]
    Sigma_x = numpyro.sample(
        "Sigma_x", dist.InverseWishart(data.kappa, scale_matrix=data.Lambda))
    mu = numpyro.sample("mu", dist.MultivariateNormal(data.mu_mean,
                                                      covariance_matrix=data.mu_cov))
    tril = jnp.linalg.cholesky(Sigma_x)[None] / jnp.sqrt(data.n)[:, None, None]
    with numpyro.plate("holder", J):
        xbar = numpyro.sample("xbar", dist.MultivariateNormal(mu, scale_tril=tril))
        W = numpyro.sample("W", dist.Wishart(data.n - 1.0, scale_matrix=Sigma_x))
        S = numpyro.deterministic("S", intercept_scatter(data.n, data.column, xbar, W))
        _s_hat_likelihood(data, S)
    theta, sigma_y2 = _theta_sigma(data)
    _z_likelihood(data, S, theta, sigma_y2)


def intercept_setup(release, priors, S_init, sigma_y2):
    """The intercept model, its data and starting values for a release with an intercept:
    ``(normalx_intercept_model, InterceptModelData, position)``.

    From a d x d scatter start ``S_init`` (J, d, d) and ``sigma_y2``: xbar_j = S_j[0, 1:] /
    (c n_j); W_j = S_j[1:, 1:] - n_j xbar_j xbar_j^T with its eigenvalues raised to a small
    floor (it must be positive definite); Sigma_x at the mode of its conditional; mu the pooled
    mean; theta at its conditional mean given S_init and sigma_y2 (as for normalX)."""
    from ..inference import closed_form

    data = intercept_model_data(release, priors)
    S = np.asarray(S_init, dtype=float)
    n = np.asarray(release.n, dtype=float)
    c = math.sqrt(release.average_rows)
    p = release.d - 1
    xbar = S[:, 0, 1:] / (c * n[:, None])
    W = S[:, 1:, 1:] - n[:, None, None] * xbar[:, :, None] * xbar[:, None, :]
    w, E = np.linalg.eigh(0.5 * (W + np.swapaxes(W, 1, 2)))
    floor = 1e-3 * np.maximum(np.abs(w).mean(axis=1, keepdims=True), 1e-12)
    W = np.einsum("jik,jk,jlk->jil", E, np.maximum(w, floor), E)
    Sx = (np.asarray(priors.Lambda) + W.sum(0)) / (priors.kappa + (n - 1).sum() + p + 1.0)
    theta, _, _ = closed_form.gaussian_theta_posterior(
        S, release.z_hat, sigma_y2, closed_form.z_noise_covariances(release), priors.m, priors.C)
    position = {"theta": theta, "sigma_y2": np.float64(sigma_y2), "Sigma_x": Sx,
                "mu": (n[:, None] * xbar).sum(0) / n.sum(), "xbar": xbar, "W": W}
    return normalx_intercept_model, data, position


MODELS = {"normalx": normalx_model, "normalx-noncentred": normalx_noncentred_model,
          "fixeds": fixeds_model, "normalx-intercept": normalx_intercept_model}


def log_joint(model, data: ModelData, params: dict):
    """log p(latents, data) of ``model`` at ``params`` (numpyro ``log_density``)."""
    from numpyro.infer.util import log_density

    return log_density(model, (data,), {}, params)[0]
