"""The observation model of MCMC-B&S (Bernstein & Sheldon 2019; paper appendix C.1).

Every row contributes the statistic

    s_i = [vech(x_i x_i^T), x_i y_i, y_i^2],    x_i ~ N(0, Sigma_x),  y_i = x_i^T theta + e_i,
                                                e_i ~ N(0, sigma_y^2),

and a holder releases ss_hat_j = sum_{i in j} s_i + noise. B&S replace the sum by its central
limit approximation, ss_j ~ N(n_j mu, n_j Sigma), with mu, Sigma the exact first two moments of
s_i. Both follow from one observation: with u = [x; y] (dimension d + 1),

    u ~ N(0, Sigma_u),   Sigma_u = [[Sigma_x, Sigma_x theta], [theta^T Sigma_x, theta^T Sigma_x theta
                                                                               + sigma_y^2]],

and s_i is exactly the vector of products u_p u_q over the unique index pairs (p <= q) of
u u^T, D' = (d + 1)(d + 2)/2 = d(d + 1)/2 + d + 1 of them. Isserlis' theorem for a zero-mean
Gaussian vector then gives

    E[u_p u_q] = Sigma_u[p, q],
    Cov(u_p u_q, u_r u_s) = Sigma_u[p, r] Sigma_u[q, s] + Sigma_u[p, s] Sigma_u[q, r],

for any d. The order of the entries is the order of a bayesdp release
(:mod:`bayesdp.releases.layout`): vech(S) as the upper triangle of S row by row (diagonal
included), then z = X^T y, then y^T y.

Everything here is plain JAX (float64 when x64 is enabled); cost O(D'^2) = O(d^4) to build the
covariance and O(D'^3) = O(d^6) to factor it, which is the cost the paper attributes to B&S.
"""

from __future__ import annotations

import numpy as np

from ..errors import BayesdpInputError
from ..releases import layout

# JAX and numpyro are imported inside the model functions: importing bayesdp.paper, as
# `bayesdp --help` does, loads neither


def _joint_covariance(Sigma_x, theta, sigma_y2):
    """Covariance of u = [x; y] under x ~ N(0, Sigma_x), y = x^T theta + N(0, sigma_y2)."""
    import jax.numpy as jnp

    Ct = Sigma_x @ theta
    top = jnp.concatenate([Sigma_x, Ct[:, None]], axis=1)
    bottom = jnp.concatenate([Ct, jnp.atleast_1d(theta @ Ct + sigma_y2)])[None, :]
    return jnp.concatenate([top, bottom], axis=0)


def row_moments(Sigma_x, theta, sigma_y2):
    """Exact mean (D',) and covariance (D', D') of one row's [vech(x x^T), x y, y^2].

    JAX arrays in and out; works under ``jit``/``vmap``. See the module docstring.
    """
    d = Sigma_x.shape[-1]
    p, q = layout.stat_pairs(d, with_yty=True)
    U = _joint_covariance(Sigma_x, theta, sigma_y2)
    mean = U[p, q]
    cov = U[p[:, None], p[None, :]] * U[q[:, None], q[None, :]] \
        + U[p[:, None], q[None, :]] * U[q[:, None], p[None, :]]
    return mean, 0.5 * (cov + cov.T)


def release_stats(release):
    """The released [vech(S_hat_j), z_hat_j, yty_hat_j] per holder, shape (J, D') (NumPy)."""
    if release.yty_hat is None:
        raise BayesdpInputError(
            "release.yty_hat: MCMC-B&S needs a noisy y^T y; make the release with "
            "bayesdp.release(..., include_yty=True)"
        )
    return layout.pack_stats(release.S_hat, release.z_hat, release.yty_hat)


def stats_to_parts(ss, d):
    """Split stacked statistics (..., D') into (S (..., d, d) symmetric, z (..., d), yty (...))."""
    S, z, rest = layout.unpack_stats(ss, d)
    return S, z, rest[..., 0]


def _latents(d, priors, Lambda0):
    """bs_model's latent sites (Sigma_x, theta, sigma_y2) and their priors; with ``priors``
    None the sites have no prior (an improper flat density: their values must be substituted,
    as when the observation's density is evaluated at posterior draws)."""
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions import constraints

    if priors is None:
        def flat(name, support, shape):
            return numpyro.sample(name, dist.ImproperUniform(support, (), shape))

        return (flat("Sigma_x", constraints.positive_definite, (d, d)),
                flat("theta", constraints.real_vector, (d,)),
                flat("sigma_y2", constraints.positive, ()))
    Sigma_x = numpyro.sample("Sigma_x", dist.InverseWishart(
        concentration=float(priors.kappa), scale_matrix=jnp.asarray(priors.Lambda)))
    sigma_y2 = numpyro.sample("sigma_y2", dist.InverseGamma(priors.a, priors.b))
    cov0 = sigma_y2 * jnp.linalg.inv(jnp.asarray(Lambda0))
    theta = numpyro.sample("theta", dist.MultivariateNormal(jnp.asarray(priors.m), cov0))
    return Sigma_x, theta, sigma_y2


def _dim(ss_hat):
    """d from the length D' = (d + 1)(d + 2)/2 of the statistics."""
    Dp = ss_hat.shape[-1]
    d = int(round((np.sqrt(8 * Dp + 1) - 3) / 2))
    if layout.stat_dim(d, with_yty=True) != Dp:
        raise BayesdpInputError(f"ss_hat: {Dp} statistics per holder is not (d+1)(d+2)/2")
    return d


def bs_model(ss_hat, noise_cov, n, priors, Lambda0):
    """numpyro model of the B&S observation model (CLT approximation), for reference and NUTS.

    Sigma_x ~ InvWishart(Lambda, kappa), sigma_y^2 ~ InvGamma(a, b),
    theta | sigma_y^2 ~ N(m, sigma_y^2 Lambda0^{-1}), ss_j ~ N(n_j mu, n_j Sigma),
    ss_hat_j ~ N(ss_j, V_j). ``ss_hat`` (J, D'), ``noise_cov`` (J, D', D'), ``n`` (J,).
    The Gibbs sampler in :mod:`bayesdp.paper.bs` draws the ss_j from this model's conditional;
    its steps for Sigma_x and (theta, sigma_y^2) are not this model's conditionals (see there).
    """
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    Sigma_x, theta, sigma_y2 = _latents(_dim(ss_hat), priors, Lambda0)
    mu, Sig = row_moments(Sigma_x, theta, sigma_y2)
    n = jnp.asarray(n, dtype=mu.dtype)
    with numpyro.plate("holder", ss_hat.shape[0]):
        ss = numpyro.sample("ss", dist.MultivariateNormal(n[:, None] * mu, n[:, None, None] * Sig))
        numpyro.sample("ss_hat", dist.MultivariateNormal(ss, jnp.asarray(noise_cov)), obs=ss_hat)


def bs_marginal_model(ss_hat, noise_cov, n, priors=None, Lambda0=None):
    """:func:`bs_model` with the latent sums ss_j integrated out: the convolution of its two
    Gaussian sites, ss_hat_j ~ N(n_j mu, n_j Sigma + V_j), with (mu, Sigma) =
    :func:`row_moments` at (Sigma_x, theta, sigma_y^2). The density of each holder's release
    in ``fit``'s ``log_likelihood`` group for method "bs".

    Parameters
    ----------
    ss_hat : (J, D') released statistics (``None``: drawn, the posterior predictive)
    noise_cov : (J, D', D') their noise covariances V_j
    n : (J,) rows per holder
    priors, Lambda0 : as in :func:`bs_model`; ``priors`` None leaves Sigma_x, theta and
        sigma_y2 without a prior (their values must then be substituted).

    Returns
    -------
    None (a numpyro model: sites Sigma_x, theta, sigma_y2 and the observed ``ss_hat``).
    """
    import jax.numpy as jnp
    import numpyro
    import numpyro.distributions as dist

    V = jnp.asarray(noise_cov)
    d = _dim(V[..., 0])
    Sigma_x, theta, sigma_y2 = _latents(d, priors, Lambda0)
    mu, Sig = row_moments(Sigma_x, theta, sigma_y2)
    n = jnp.asarray(n, dtype=mu.dtype)
    with numpyro.plate("holder", V.shape[0]):
        numpyro.sample("ss_hat", dist.MultivariateNormal(
            n[:, None] * mu, covariance_matrix=n[:, None, None] * Sig + V), obs=ss_hat)
