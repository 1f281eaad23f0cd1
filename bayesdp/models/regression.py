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
(:func:`bayesdp.releases.layout.z_given_s_noise`): a mean shift, subtracted from z_hat in
``ModelData``, and a covariance; normalX refuses such releases.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import numpy as np

from .._jax import enable_x64
from ..errors import BayesdpInputError
from ..releases import layout


_PRIOR_FIELDS = ("a", "b", "m", "C", "Lambda", "kappa")
"""The prior hyperparameters every model's data carries: theta ~ N(m, C),
sigma_y^2 ~ InvGamma(a, b), Sigma_x ~ InvWishart(kappa, Lambda)."""


def _data_class(name, fields, doc):
    """A NamedTuple of arrays (a JAX pytree) with these fields, then the optional ``basis``,
    ``prior_factors`` and ``kernel_terms`` (None by default)."""
    cls = NamedTuple(name, [(field, object) for field in fields]
                     + [("basis", object), ("prior_factors", object), ("kernel_terms", object)])
    cls.__new__.__defaults__ = (None, None, None)  # basis, prior_factors, kernel_terms: optional
    cls.__doc__ = doc
    return cls


def _arrays(**values):
    """The values as float64 JAX arrays (float64 is turned on first: anything touching S is
    float64)."""
    import jax.numpy as jnp

    enable_x64()

    return {k: jnp.asarray(np.asarray(v, dtype=np.float64)) for k, v in values.items()}


def _prior_arrays(priors):
    """The prior hyperparameters as arrays, and their :class:`_PriorFactors`."""
    return dict(_arrays(**{k: getattr(priors, k) for k in _PRIOR_FIELDS}),
                prior_factors=prior_factors(priors.m, priors.C, priors.Lambda))


ModelData = _data_class("ModelData", ("S_hat", "z_hat", "n", "sigma_s", "Sigma_z", "S_fixed",
                                      *_PRIOR_FIELDS), """\
Everything the models condition on, as arrays (float64 under x64).

``S_hat`` / ``z_hat`` set to None make the models sample them (prior predictive), which the
joint-distribution (Geweke) tests use.

S_hat (J, d, d), z_hat (J, d), n (J,), sigma_s (J,), Sigma_z (J, d, d); S_fixed (J, d, d)
(fixedS only; zeros for normalX); prior hyperparameters a, b, m (d,), C (d, d),
Lambda (d, d), kappa. ``z_hat`` is the released z_hat minus the noise's conditional mean
given S (zero for the Gaussian mechanism of eqs. (2)-(3)). ``basis``: an orthogonal (d, d)
matrix Q in which :func:`normalx_noncentred_model` factorises Sigma_x (None: the identity);
a change of variables only, the joint density is the same. ``prior_factors``: the priors'
:class:`PriorFactors` (None: the non-centred models factorise C and Lambda themselves).
``kernel_terms``: what a hand-written kernel computes once per release from the rest (the
fixedS kernel's :class:`~bayesdp.inference.kernels.sigma_y2.FixedSTerms`); the models ignore it.
""")


class _PriorFactors(NamedTuple):
    """Factorisations of the fixed prior hyperparameters, computed once per fit (not in every
    gradient of the non-centred models): C^{-1}, C^{-1} m, m^T C^{-1} m + log|C| and
    chol(Lambda). A ModelData without them (None) computes them inside the model; after
    ``data._replace(m=..., C=..., Lambda=...)`` set ``prior_factors`` again (or to None)."""

    C_inv: object
    C_inv_m: object
    m_C_m_logdet: object
    L_Lambda: object


def prior_factors(m, C, Lambda) -> _PriorFactors:
    """:class:`_PriorFactors` of the priors theta ~ N(m, C), Sigma_x ~ InvWishart(., Lambda)
    (numpy, then float64 JAX arrays)."""
    import jax.numpy as jnp

    m, C, Lambda = (np.asarray(v, dtype=np.float64) for v in (m, C, Lambda))
    L_C = np.linalg.cholesky(C)
    C_inv = np.linalg.solve(L_C.T, np.linalg.solve(L_C, np.eye(len(m))))
    C_inv_m = C_inv @ m
    const = float(m @ C_inv_m + 2.0 * np.sum(np.log(np.diag(L_C))))
    return _PriorFactors(jnp.asarray(C_inv), jnp.asarray(C_inv_m), jnp.asarray(const),
                         jnp.asarray(np.linalg.cholesky(Lambda)))


def _prior_factors_traced(data) -> _PriorFactors:
    """data.prior_factors, or the same computed from data inside the traced model."""
    if data.prior_factors is not None:
        return data.prior_factors
    import jax.numpy as jnp
    from jax.scipy.linalg import cho_solve

    L_C = jnp.linalg.cholesky(data.C)
    C_inv = cho_solve((L_C, True), jnp.eye(data.m.shape[0]))
    C_inv_m = C_inv @ data.m
    return _PriorFactors(C_inv, C_inv_m,
                         data.m @ C_inv_m + 2.0 * jnp.sum(jnp.log(jnp.diagonal(L_C))),
                         jnp.linalg.cholesky(data.Lambda))


def model_data(release, priors, *, S_fixed=None, z_noise=None, as_numpy=False) -> ModelData:
    """ModelData from a :class:`~bayesdp.releases.Release` and resolved :class:`Priors`.

    ``z_noise`` is ``(shift (J, d), Sigma_z (J, d, d))``, the noise of z_hat given S
    (default: no shift and the release's marginal z noise covariance).
    Turn float64 on first (``jax.config.update("jax_enable_x64", True)``;
    :func:`bayesdp.models.for_release` does it for you); the arrays are made float64 JAX arrays.
    ``as_numpy``: float64 NumPy arrays instead, without ``prior_factors`` (for evaluating a
    model's sites in NumPy without importing JAX, as "fast"'s log-likelihood does).
    """
    d = release.d
    if np.asarray(priors.m).shape != (d,):
        raise BayesdpInputError(
            f"priors: m has shape {np.asarray(priors.m).shape} but the release has d={d} features"
        )
    if z_noise is None:
        shift, Sz = np.zeros((release.J, d)), layout.z_noise_covariances(release)
    else:
        shift, Sz = z_noise
    S_fix = np.zeros_like(release.S_hat) if S_fixed is None else np.asarray(S_fixed, float)
    values = dict(S_hat=release.S_hat, z_hat=release.z_hat - shift, n=release.n,
                  sigma_s=release.sigma_s, Sigma_z=Sz, S_fixed=S_fix)
    if as_numpy:
        values.update({k: getattr(priors, k) for k in _PRIOR_FIELDS})
        return ModelData(**{k: np.asarray(v, dtype=np.float64) for k, v in values.items()})
    return ModelData(**_arrays(**values), **_prior_arrays(priors))


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

    numpyro.sample(
        "S_hat",
        dist.Normal(layout.vech(S), data.sigma_s[:, None]).to_event(1),
        obs=None if data.S_hat is None else layout.vech(data.S_hat),
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
    (the chi density with the Jacobian of a = e^eta). A is assembled by a product with 0/1
    placement matrices (no scatter: cheaper inside NUTS's gradient)."""
    import jax.numpy as jnp

    J, d = W_diag.shape
    nu = n[:, None] - jnp.arange(d)[None, :]
    eta = 0.5 * jnp.log(nu) + W_diag / jnp.sqrt(2.0 * nu)
    correction = jnp.sum(nu * eta - 0.5 * jnp.exp(2.0 * eta) + 0.5 * W_diag ** 2)
    il = np.tril_indices(d, -1)
    on_diag = np.zeros((d, d * d))
    on_diag[np.arange(d), np.arange(d) * (d + 1)] = 1.0
    below = np.zeros((len(il[0]), d * d))
    below[np.arange(len(il[0])), il[0] * d + il[1]] = 1.0
    A = (jnp.exp(eta) @ on_diag + W_offdiag @ below).reshape(J, d, d)
    return A, correction


def inverse_wishart_cholesky(concentration, scale_matrix, scale_tril=None):
    """numpyro distribution of L = chol(Sigma) for Sigma ~ InvWishart(concentration,
    scale_matrix); ``scale_tril`` = chol(scale_matrix) when known (the class is built on first
    use, so importing this module does not import numpyro)."""
    return _inverse_wishart_cholesky_class()(concentration, scale_matrix, scale_tril)


@functools.lru_cache(maxsize=None)
def _inverse_wishart_cholesky_class():
    import jax.numpy as jnp
    import numpyro.distributions as dist
    from jax.scipy.linalg import solve_triangular
    from jax.scipy.special import multigammaln
    from numpyro.distributions import constraints

    class _IWChol(dist.Distribution):
        """L lower triangular with positive diagonal, L L^T ~ InvWishart(kappa, Lambda):

            log p(L) = log p_IW(L L^T) + log |d(L L^T)/dL|,
            log p_IW(Sigma) = kappa log|L_Lambda| - (kappa d / 2) log 2 - log Gamma_d(kappa/2)
                              - (kappa + d + 1) sum_i log L_ii - ||L^{-1} L_Lambda||_F^2 / 2,
            log |d(L L^T)/dL| = d log 2 + sum_i (d - i) log L_ii     (i = 0..d-1)

        (L_Lambda = chol(Lambda); the Jacobian of Sigma = L L^T over the d(d+1)/2 free entries,
        Muirhead 1982, Thm 2.1.9). One triangular solve, no factorisation of Sigma: the
        non-centred model samples L_x through this and never refactorises Sigma_x."""

        support = constraints.lower_cholesky
        arg_constraints = {}

        def __init__(self, concentration, scale_matrix, scale_tril=None, validate_args=None):
            self.concentration, self.scale_matrix = concentration, scale_matrix
            self.scale_tril = (jnp.linalg.cholesky(scale_matrix) if scale_tril is None
                               else scale_tril)
            d = scale_matrix.shape[-1]
            super().__init__(batch_shape=(), event_shape=(d, d), validate_args=validate_args)

        def sample(self, key, sample_shape=()):
            Sigma = dist.InverseWishart(self.concentration, scale_matrix=self.scale_matrix
                                        ).sample(key, sample_shape)
            return jnp.linalg.cholesky(Sigma)

        def log_prob(self, L):
            d, k = L.shape[-1], self.concentration
            L_lam = self.scale_tril
            log_diag = jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1))
            Z = solve_triangular(L, jnp.broadcast_to(L_lam, L.shape), lower=True)
            log_norm = (k * jnp.sum(jnp.log(jnp.diagonal(L_lam))) - 0.5 * k * d * math.log(2.0)
                        - multigammaln(0.5 * k, d))
            return (log_norm - (k + d + 1.0) * jnp.sum(log_diag, -1)
                    - 0.5 * jnp.sum(Z ** 2, axis=(-2, -1))
                    + d * math.log(2.0) + jnp.sum((d - jnp.arange(d)) * log_diag, -1))

    return _IWChol


def normalx_noncentred_model(data: ModelData):
    """The normalX model (paper eq. 10) in non-centred form: the same joint density of
    (Sigma_x, S, theta, sigma_y2, S_hat, z_hat) as :func:`normalx_model`, with S a function of
    Sigma_x and standardised Bartlett variables::

        S_j = L_x A_j A_j^T L_x^T,   Sigma_x = L_x L_x^T,   A_j A_j^T ~ Wishart(n_j, I)

    (Bartlett decomposition, :func:`bartlett_cholesky`), so S_j ~ Wishart(n_j, Sigma_x).
    At n_j in the thousands S_j is within ~1/sqrt(n_j) of n_j Sigma_x a priori while S_hat_j
    measures it with noise sigma_s: S_j and Sigma_x are tightly coupled in the centred form,
    and nearly independent here (A_j stays close to its prior). The sampled site is L_x (the
    Cholesky factor, with the InvWishart density of Sigma_x times the Jacobian of L -> L L^T);
    Sigma_x and S are deterministic sites.
    With ``data.basis`` = Q (orthogonal), the sampled site ``L_x`` is the Cholesky factor of
    Q^T Sigma_x Q instead (InvWishart(kappa, Q^T Lambda Q), the same density: an orthogonal
    change of variables has Jacobian 1) and Sigma_x = (Q L_x)(Q L_x)^T. ``fit`` takes Q from
    the eigenvectors of the starting Sigma_x, largest variance first
    (:func:`bayesdp.inference.starts.principal_basis`): the Cholesky coordinates are then
    nearly those of a diagonal matrix, and a direction of small, poorly measured variance is
    one log-diagonal coordinate instead of a curved combination of all of them.
    theta is integrated out of the z_hat likelihood and drawn from its exact conditional,
    also non-centred (:func:`theta_given_s`); theta is a deterministic site too. With
    ``z_hat`` None (prior predictive) the model is written generatively instead."""
    import numpyro
    import numpyro.distributions as dist
    import jax.numpy as jnp

    J, d = data.Sigma_z.shape[0], data.m.shape[0]
    if data.basis is None:
        L_x = numpyro.sample("L_x", inverse_wishart_cholesky(
            data.kappa, data.Lambda, _prior_factors_traced(data).L_Lambda))
    else:  # L_x = chol(Q^T Sigma_x Q) is sampled; Q L_x is a (non-triangular) root of Sigma_x
        Q = data.basis
        Lambda_q = Q.T @ data.Lambda @ Q
        L_x = Q @ numpyro.sample("L_x", inverse_wishart_cholesky(
            data.kappa, 0.5 * (Lambda_q + Lambda_q.T)))
    numpyro.deterministic("Sigma_x", L_x @ L_x.T)
    with numpyro.plate("holder", J):
        W_diag = numpyro.sample("W_diag", dist.Normal(0.0, 1.0).expand([d]).to_event(1))
        W_offdiag = numpyro.sample(
            "W_offdiag", dist.Normal(0.0, 1.0).expand([d * (d - 1) // 2]).to_event(1))
    A, correction = bartlett_cholesky(data.n, W_diag, W_offdiag)
    numpyro.factor("W_diag_chi", correction)
    LA = jnp.einsum("ik,jkl->jil", L_x, A)
    S = numpyro.deterministic("S", LA @ jnp.swapaxes(LA, -1, -2))
    _noncentred_observations(data, S)


def _noncentred_observations(data, S):
    """The non-centred models' observation part, given S (J, d, d): the S_hat likelihood, then
    theta integrated out of the z_hat likelihood (:func:`theta_given_s`) and redrawn
    non-centred, theta = P^{-1} b + L_P^{-T} theta_std = L_P^{-T} (u + theta_std) (a
    deterministic site). With ``z_hat`` None (prior predictive) theta and sigma_y2 are drawn
    from their priors and z_hat generated instead."""
    import numpyro
    import numpyro.distributions as dist
    from jax.scipy.linalg import solve_triangular

    with numpyro.plate("holder", S.shape[0]):
        _s_hat_likelihood(data, S)
    if data.z_hat is None:
        theta, sigma_y2 = _theta_sigma(data)
        _z_likelihood(data, S, theta, sigma_y2)
        return
    sigma_y2 = numpyro.sample("sigma_y2", dist.InverseGamma(data.a, data.b))
    log_marginal, u, L_P = _theta_integrated(data, S, sigma_y2)
    numpyro.factor("z_hat_marginal", log_marginal)
    theta_std = numpyro.sample("theta_std",
                               dist.Normal(0.0, 1.0).expand([S.shape[-1]]).to_event(1))
    numpyro.deterministic("theta", solve_triangular(L_P.T, u + theta_std, lower=False))


def _theta_integrated(data, S, sigma_y2):
    """(log p(z_hat | S, sigma_y^2), u = L_P^{-1} b, L_P) of :func:`theta_given_s`, with one
    triangular solve per holder: R_j = L_Vj^{-1} [S_j, z_hat_j] gives S_j V_j^{-1} S_j =
    R_S^T R_S, S_j V_j^{-1} z_j = R_S^T R_z and z_j^T V_j^{-1} z_j = ||R_z||^2; b^T P^{-1} b =
    ||u||^2."""
    import jax.numpy as jnp
    from jax.scipy.linalg import solve_triangular

    d = data.m.shape[0]
    pf = _prior_factors_traced(data)
    L_V = jnp.linalg.cholesky(sigma_y2 * S + data.Sigma_z)
    R_ = solve_triangular(L_V, jnp.concatenate([S, data.z_hat[..., None]], axis=-1),
                          lower=True)
    R_S, R_z = R_[..., :d], R_[..., d]
    P = pf.C_inv + jnp.einsum("jkl,jkm->lm", R_S, R_S)
    b = pf.C_inv_m + jnp.einsum("jkl,jk->l", R_S, R_z)
    L_P = jnp.linalg.cholesky(P)
    u = solve_triangular(L_P, b, lower=True)
    logdet = lambda L: 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)))  # noqa: E731
    log_marginal = -0.5 * (jnp.sum(R_z ** 2) + logdet(L_V)
                           + data.z_hat.size * math.log(2.0 * math.pi)
                           + pf.m_C_m_logdet - u @ u + logdet(L_P))
    return log_marginal, u, L_P


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
    from jax.scipy.linalg import solve_triangular

    log_marginal, u, L_P = _theta_integrated(data, S, sigma_y2)
    return log_marginal, solve_triangular(L_P.T, u, lower=False), L_P


def fixeds_model(data: ModelData):
    """The fixedS model (section 4.2): S_j = data.S_fixed; latent theta, sigma_y2."""
    theta, sigma_y2 = _theta_sigma(data)
    _z_likelihood(data, data.S_fixed, theta, sigma_y2)


EivData = _data_class(
    "EivData", ("S_hat", "z_hat", "S_plus", "noise_SS", "noise_Sz", "noise_zz", "slopes",
                "scale_min", "sigma_y2_max", "theta_plugin", "a", "b", "m", "C", "n", "yty_hat",
                "yty_var"), """\
What :func:`eiv_model` conditions on: the holders pooled (sums over j).

S_hat (d, d) and z_hat (d,): sum_j S_hat_j and sum_j z_hat_j; S_plus (d, d): the nearest PSD
matrix of S_hat; the pooled noise blocks over [vech(S), z] (:class:`layout.NoiseBlocks` summed
over the holders): noise_SS (k,) when it is diagonal (the iid release), else (k, k), noise_Sz
(k, d) or None, noise_zz (d, d); slopes (d,): 1.0 for the coefficients whose prior scale is
sampled, 0.0 for an intercept; scale_min: the smallest prior scale, a number (one scale r for
all coefficients) or (d,) (one scale r_k per coefficient, each with its smallest value);
sigma_y2_max: the upper bound of sigma_y^2 (B_y^2, or inf); theta_plugin (d,) or None: the
theta through which the S noise is pushed (None: theta itself); theta's prior m, C and
sigma_y^2's a, b; n: the number of rows (sum_j n_j); yty_hat and yty_var: sum_j yty_hat_j and
the variance of its noise, sum_j sigma_yty_j^2, or None when the release has no y^T y.
""")


def eiv_model_data(release, priors, *, scale_min, sigma_y2_max, theta_plugin=None,
                   per_slope=False) -> EivData:
    """EivData from a release and resolved priors (NumPy arrays; :func:`eiv_arrays` makes them
    JAX arrays for numpyro). ``per_slope``: one prior scale per coefficient (``scale_min``
    repeated d times) or one for all."""
    from ..inference.closed_form import nearest_psd

    blocks = layout.noise_blocks(release)
    S_hat = release.S_hat.sum(axis=0)
    slopes = np.ones(release.d)
    if release.intercept:
        slopes[0] = 0.0
    return EivData(S_hat=S_hat, z_hat=release.z_hat.sum(axis=0), S_plus=nearest_psd(S_hat),
                   noise_SS=blocks.SS.sum(axis=0),
                   noise_Sz=None if blocks.Sz is None else blocks.Sz.sum(axis=0),
                   noise_zz=blocks.zz.sum(axis=0), slopes=slopes,
                   scale_min=np.full(release.d, float(scale_min)) if per_slope
                   else float(scale_min),
                   sigma_y2_max=float(sigma_y2_max),
                   theta_plugin=None if theta_plugin is None else np.asarray(theta_plugin, float),
                   a=float(priors.a), b=float(priors.b), m=np.asarray(priors.m, float),
                   C=np.asarray(priors.C, float), n=float(np.sum(release.n)),
                   yty_hat=None if release.yty_hat is None else float(release.yty_hat.sum()),
                   yty_var=None if release.yty_hat is None
                   else float((release.sigma_yty ** 2).sum()))


def eiv_arrays(data: EivData) -> EivData:
    """The same data as float64 JAX arrays (float64 must be on:
    ``jax.config.update("jax_enable_x64", True)``; :func:`bayesdp.models.for_release` does it)."""
    return EivData(**{k: None if v is None else _arrays(v=v)["v"]
                      for k, v in data._asdict().items()})


def eiv_prior_covariance(data, theta_scale):
    """Theta's prior covariance given the scale r (a number, or one per coefficient): D C D
    with D = diag(r on the slopes, 1 on an intercept)."""
    r = data.slopes * theta_scale + (1.0 - data.slopes)
    return data.C * r[:, None] * r[None, :]


def eiv_noise_covariance(data, theta, xp=np):
    """Var(e_z - E theta) of the pooled noise (:func:`layout.eiv_covariance`)."""
    return layout.eiv_covariance(data.noise_SS, data.noise_Sz, data.noise_zz, theta, xp=xp,
                                 ss_diagonal=data.noise_SS.ndim == 1)


def eiv_yty_noise(data, t, xp=np):
    """The noise moments of the y^T y likelihood with the S noise pushed through t: the
    variance of e_yy - 2 t^T e_z + t^T E t (without sum_j sigma_yty_j^2: ``data.yty_var``) and
    its covariance k with e_z - E t, the noise of z_hat - S_hat t. With a = B^T t (t^T E t =
    a^T vech(E), B of :func:`layout.vech_product_matrix`):

        var = a^T S_SS a + 4 t^T S_zz t - 4 a^T S_Sz t
        k   = S_Sz^T a - 2 S_zz t - B S_SS a + 2 B S_Sz t

    Returns (var, k (d,))."""
    B = layout._vech_product(t, xp)
    a = t @ B
    SSa = data.noise_SS * a if data.noise_SS.ndim == 1 else data.noise_SS @ a
    var = a @ SSa + 4.0 * t @ data.noise_zz @ t
    k = -2.0 * data.noise_zz @ t - B @ SSa
    if data.noise_Sz is not None:
        var = var - 4.0 * a @ data.noise_Sz @ t
        k = k + data.noise_Sz.T @ a + 2.0 * B @ (data.noise_Sz @ t)
    return var, k


def eiv_yty_moments(data, sigma_y2, mu, cov, M, noise, xp=np):
    """Mean and variance of yty_hat given z_hat, sigma_y^2 and theta ~ N(mu, cov) (theta's
    conditional given z_hat and the prior scale), batched over leading axes: sigma_y2 (...),
    mu (..., d), cov and M (..., d, d). Given theta and the exact statistics,
    y^T y = |y - X theta|^2 + 2 theta^T z - theta^T S theta with |y - X theta|^2 ~
    sigma_y^2 chi^2_n, so with the noisy ones

        yty_hat = n sigma_y^2 + 2 theta^T z_hat - theta^T S_hat theta + eta,

    eta = (chi^2 part, variance 2 n sigma_y^4) + e_yy - 2 theta^T e_z + theta^T E theta, whose
    noise part has covariance k with the pivot z_hat - S_hat theta (covariance M); conditioning
    on the pivot (Gaussian moments, the S noise through t) and then integrating
    theta ~ N(mu, cov) (moments of a Gaussian quadratic form):

        mean = n sigma_y^2 + 2 mu^T z_hat - mu^T S_hat mu - tr(S_hat cov) + k^T M^-1 (z_hat - S_hat mu)
        var  = 2 n sigma_y^4 + yty_var + var_eta - k^T M^-1 k + g^T cov g + 2 tr((S_hat cov)^2)

    with g = 2 (z_hat - S_hat mu) - S_hat M^-1 k. ``M`` = sigma_y^2 S_+ + Var(e_z - E t);
    ``noise`` = (var_eta, k) of :func:`eiv_yty_noise` at t."""
    var_eta, k = noise
    Mk = xp.linalg.solve(M, xp.broadcast_to(k, M.shape[:-1])[..., None])[..., 0]
    SC = data.S_hat @ cov  # a batched matrix product (BLAS), (..., d, d)
    return eiv_yty_moments_from(
        data, sigma_y2, mu, Mk, noise, xp.einsum("...ii->...", SC),
        xp.sum(SC * xp.swapaxes(SC, -1, -2), axis=(-2, -1)),
        lambda g: xp.einsum("...i,...ij,...j->...", g, cov, g), xp=xp)


def eiv_yty_moments_from(data, sigma_y2, mu, Mk, noise, tr_SC, tr_SC2, cov_form, xp=np):
    """:func:`eiv_yty_moments` from theta's covariance ``cov`` through what it needs of it:
    ``tr_SC`` = tr(S_hat cov), ``tr_SC2`` = tr((S_hat cov)^2) and ``cov_form(g)`` = g^T cov g
    (batched over leading axes), with ``Mk`` = M^-1 k; eiv's grid computes them without
    forming cov (inference/eiv.py)."""
    var_eta, k = noise
    S, z = data.S_hat, data.z_hat
    res = z - mu @ S
    mean = (data.n * sigma_y2 + xp.einsum("...i,...i->...", mu, z + res) - tr_SC
            + xp.einsum("...i,...i->...", Mk, res))
    g = 2.0 * res - Mk @ S
    var = (2.0 * data.n * sigma_y2 ** 2 + data.yty_var + var_eta
           - xp.einsum("...i,...i->...", Mk, xp.broadcast_to(k, Mk.shape))
           + cov_form(g) + 2.0 * tr_SC2)
    return mean, var


def eiv_model(data: EivData):
    """The errors-in-variables model of the pooled release (the default method "eiv";
    docs/methods.md). With S_hat = sum_j S_hat_j = S + E and z_hat = sum_j z_hat_j:

        r_k       ~ LogUniform(scale_min_k, 1), k = 1..d  (theta's prior scales; one r for
                                                         all when scale_min is a number)
        theta     ~ N(m, D_r C D_r),   D_r = diag(r_k on the slopes, 1 on an intercept)
        sigma_y^2 ~ InvGamma(a, b) truncated to sigma_y^2 <= sigma_y2_max
        z_hat | theta, sigma_y^2 ~ N(S_hat theta, sigma_y^2 S_+ + Var(e_z - E t))
        yty_hat | z_hat, sigma_y^2, r ~ N(mean, var)     (when the release has y^T y)

    t = theta (or ``theta_plugin`` when given). Summing the holders is exact given S_j: z =
    sum_j z_j ~ N(S theta, sigma_y^2 S + sum_j Sigma_z,j) (Prop. 3.1 summed over j). Writing
    S = S_hat - E, z_hat = S_hat theta + (z - S theta) + e_z - E theta: the pivot z_hat - S_hat
    theta has mean 0 and covariance sigma_y^2 S + Var(e_z - E theta) given S; with S's
    uncertainty given S_hat taken as the noise's (a flat prior on S) sigma_y^2 S is replaced by
    sigma_y^2 S_+ (S_hat made PSD) - the moment-matched noise-aware likelihood of Bernstein &
    Sheldon (2019) for the release of eqs. (2)-(3). The release's noise on S then widens theta's
    likelihood along the directions the noise hides, instead of being read as signal.

    y^T y (``release(..., include_yty=True)``) is what determines sigma_y^2, and so the width
    of prediction intervals: its factor is the Gaussian with the moments of
    :func:`eiv_yty_moments` for theta ~ its conditional N(mu, P^-1) given z_hat, sigma_y^2 and
    r (P and mu of :mod:`bayesdp.inference.eiv`), so y^T y informs (sigma_y^2, r) and theta only
    through them: it is taken as independent of theta given z_hat and (sigma_y^2, r), which
    keeps theta's conditional Gaussian.
    """
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    # one r per coefficient when scale_min is (d,) (an intercept's r_k does not enter the
    # density: it keeps its prior), one for all when it is a number
    r = numpyro.sample("theta_scale", dist.LogUniform(data.scale_min, 1.0).to_event(
        jnp.ndim(data.scale_min)))
    theta = numpyro.sample("theta", dist.MultivariateNormal(
        data.m, covariance_matrix=eiv_prior_covariance(data, r)))
    sigma_y2 = numpyro.sample("sigma_y2", dist.InverseGamma(data.a, data.b))
    numpyro.factor("sigma_y2_max", jnp.where(sigma_y2 <= data.sigma_y2_max, 0.0, -jnp.inf))
    t = theta if data.theta_plugin is None else data.theta_plugin
    cov = sigma_y2 * data.S_plus + eiv_noise_covariance(data, t, jnp)
    numpyro.sample("z_hat", dist.MultivariateNormal(data.S_hat @ theta, covariance_matrix=cov),
                   obs=data.z_hat)
    if data.yty_hat is not None:  # theta's conditional given z_hat in the cell (sigma_y^2, r)
        from jax.scipy.linalg import cho_factor, cho_solve

        Lc, Lm = cho_factor(eiv_prior_covariance(data, r)), cho_factor(cov)
        prec = data.S_hat @ cho_solve(Lm, data.S_hat) + cho_solve(Lc, jnp.eye(len(data.m)))
        mu_cov = cho_solve(cho_factor(prec), jnp.eye(len(data.m)))
        mu = mu_cov @ (data.S_hat @ cho_solve(Lm, data.z_hat) + cho_solve(Lc, data.m))
        mean, var = eiv_yty_moments(data, sigma_y2, mu, mu_cov, cov,
                                    eiv_yty_noise(data, t, jnp), jnp)
        numpyro.sample("yty_hat", dist.Normal(mean, jnp.sqrt(var)), obs=data.yty_hat)


InterceptModelData = _data_class(
    "InterceptModelData", ("S_hat", "z_hat", "n", "column", "sigma_s", "Sigma_z", *_PRIOR_FIELDS,
                           "mu_mean", "mu_cov"), """\
What the normalX intercept model conditions on (d = p + 1 with the intercept column).

S_hat (J, d, d), z_hat (J, d), n (J,), column (the value c of the ones column), sigma_s
(J,), Sigma_z (J, d, d); theta's prior m (d,), C (d, d) and a, b; Sigma_x's Lambda (p, p)
and kappa; mu's prior mu_mean (p,), mu_cov (p, p). ``S_hat`` / ``z_hat`` None: sampled.
""")


def intercept_model_data(release, priors) -> InterceptModelData:
    """InterceptModelData from a release made with ``intercept=True`` and priors resolved for
    it (``Priors().resolve(release)``). Turn float64 on first
    (``jax.config.update("jax_enable_x64", True)``), or use :func:`bayesdp.models.for_release`."""
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
    return InterceptModelData(
        **_arrays(S_hat=release.S_hat, z_hat=release.z_hat, n=release.n,
                  column=np.sqrt(release.average_rows), sigma_s=release.sigma_s,
                  Sigma_z=layout.z_noise_covariances(release), mu_mean=priors.mu_mean,
                  mu_cov=priors.mu_cov),
        **_prior_arrays(priors))


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


def normalx_intercept_noncentred_model(data: InterceptModelData):
    """:func:`normalx_intercept_model` in non-centred form, as :func:`normalx_noncentred_model`
    is of :func:`normalx_model`: the same joint density, with

        Sigma_x = L_x L_x^T,   xbar_j = mu + L_x v_j / sqrt(n_j),   v_j ~ N(0, I_p),
        W_j = L_x A_j A_j^T L_x^T,   A_j A_j^T ~ Wishart(n_j - 1, I_p)   (Bartlett, standardised)

    and theta integrated out and redrawn non-centred (:func:`theta_given_s`). Sampled sites:
    L_x, mu, v, W_diag, W_offdiag, sigma_y2, theta_std; Sigma_x, xbar, W, S and theta are
    deterministic sites. At n_j in the thousands the holder means and scatters are within
    ~1/sqrt(n_j) of mu and n_j Sigma_x a priori while S_hat_j measures them with noise sigma_s,
    so the centred form locks (Sigma_x, mu) to them; here v_j and A_j stay close to their
    priors. ``z_hat`` None: the generative form (prior predictive)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    J, p = data.Sigma_z.shape[0], data.Lambda.shape[0]
    L_x = numpyro.sample("L_x", inverse_wishart_cholesky(
        data.kappa, data.Lambda, _prior_factors_traced(data).L_Lambda))
    numpyro.deterministic("Sigma_x", L_x @ L_x.T)
    mu = numpyro.sample("mu", dist.MultivariateNormal(data.mu_mean,
                                                      covariance_matrix=data.mu_cov))
    with numpyro.plate("holder", J):
        v = numpyro.sample("v", dist.Normal(0.0, 1.0).expand([p]).to_event(1))
        W_diag = numpyro.sample("W_diag", dist.Normal(0.0, 1.0).expand([p]).to_event(1))
        W_offdiag = numpyro.sample(
            "W_offdiag", dist.Normal(0.0, 1.0).expand([p * (p - 1) // 2]).to_event(1))
    xbar = numpyro.deterministic("xbar", mu + (v @ L_x.T) / jnp.sqrt(data.n)[:, None])
    A, correction = bartlett_cholesky(data.n - 1.0, W_diag, W_offdiag)
    numpyro.factor("W_diag_chi", correction)
    LA = jnp.einsum("ik,jkl->jil", L_x, A)
    W = numpyro.deterministic("W", LA @ jnp.swapaxes(LA, -1, -2))
    S = numpyro.deterministic("S", intercept_scatter(data.n, data.column, xbar, W))
    _noncentred_observations(data, S)


def log_joint(model, data: ModelData, params: dict):
    """log p(latents, data) of ``model`` at ``params`` (numpyro ``log_density``)."""
    from numpyro.infer.util import log_density

    return log_density(model, (data,), {}, params)[0]
