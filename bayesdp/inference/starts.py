"""Where the samplers' chains start: values of the latent sites of the models of
:mod:`bayesdp.models.regression`, in the centred and the non-centred parametrisations (numpy).
"""

from __future__ import annotations

import math

import numpy as np

from ..models.regression import intercept_scatter, theta_given_s
from . import closed_form

# JAX is imported inside the function that uses it: importing bayesdp.inference, as
# `bayesdp --help` does, loads no JAX


def initial_sigma_y2(release, priors):
    """Start for sigma_y^2: the plug-in (B_y/3)^2 when the release has bounds, else the prior
    mean b/(a-1) (or the mode b/(a+1) when a <= 1)."""
    if release.bounds is not None:
        return float((release.bounds[1] / 3.0) ** 2)
    return float(priors.b / (priors.a - 1.0) if priors.a > 1 else priors.b / (priors.a + 1.0))


def initial_position(release, priors, S_init, sigma_y2):
    """theta at its conditional mean given S_init and sigma_y2 (eq. 12); Sigma_x at the mode of
    its conditional given S_init, (Lambda + sum_j S_j) / (kappa + n + d + 1) (None for a
    release with an intercept, whose Sigma_x is that of the features: :func:`intercept_position`).
    Returns a dict with theta, sigma_y2, Sigma_x and S (= S_init)."""
    mean, _, _ = closed_form.gaussian_theta_posterior(
        S_init, release.z_hat, sigma_y2, closed_form.z_noise_covariances(release),
        priors.m, priors.C)
    d = release.d
    Sx = None if release.intercept else (
        (priors.Lambda + S_init.sum(0)) / (priors.kappa + release.n_total + d + 1.0))
    return {"theta": mean, "sigma_y2": np.float64(sigma_y2), "Sigma_x": Sx, "S": S_init}


def principal_basis(Sigma_x):
    """The eigenvectors of Sigma_x as columns, largest eigenvalue first: the ``basis``
    (``ModelData.basis``) in which :func:`~bayesdp.models.regression.normalx_noncentred_model`
    factorises Sigma_x."""
    _, V = np.linalg.eigh(np.asarray(Sigma_x, dtype=float))
    return np.ascontiguousarray(V[:, ::-1])


def noncentred_start(n, Sigma_x, basis):
    """Start of :func:`~bayesdp.models.regression.normalx_noncentred_model` for a starting
    Sigma_x: ``L_x`` = chol(Q^T Sigma_x Q), the Bartlett variables and theta_std at 0, their
    prior centre (S_j near n_j Sigma_x, theta at its conditional mean given S and sigma_y^2)."""
    Q = np.asarray(basis, dtype=float)
    J, d = len(np.asarray(n)), Q.shape[0]
    Sq = Q.T @ np.asarray(Sigma_x, dtype=float) @ Q
    return {"L_x": np.linalg.cholesky(0.5 * (Sq + Sq.T)), "W_diag": np.zeros((J, d)),
            "W_offdiag": np.zeros((J, d * (d - 1) // 2)), "theta_std": np.zeros(d)}


def bartlett_variables(n, L_x, S):
    """Inverse of :func:`~bayesdp.models.regression.bartlett_cholesky` for
    S_j = L_x A_j A_j^T L_x^T: the standardised Bartlett variables (W_diag, W_offdiag)."""
    n, L_x, S = (np.asarray(v, dtype=float) for v in (n, L_x, S))
    d = L_x.shape[0]
    A = np.linalg.solve(L_x, np.linalg.cholesky(S))
    nu = n[:, None] - np.arange(d)[None, :]
    eta = np.log(np.diagonal(A, axis1=1, axis2=2))
    il = np.tril_indices(d, -1)
    return (eta - 0.5 * np.log(nu)) * np.sqrt(2.0 * nu), A[:, il[0], il[1]]


def theta_std_of(data, S, sigma_y2, theta):
    """Inverse of theta = P^{-1} b + L_P^{-T} theta_std
    (:func:`~bayesdp.models.regression.theta_given_s`): the non-centred models' theta_std."""
    _, mean, L_P = theta_given_s(data, S, sigma_y2)
    return L_P.T @ (theta - mean)


def intercept_position(release, priors, S_init, sigma_y2, theta):
    """Start of :func:`~bayesdp.models.regression.normalx_intercept_model` from a d x d
    scatter start ``S_init`` (J, d, d), ``sigma_y2`` and ``theta``: xbar_j =
    S_j[0, 1:] / (c n_j); W_j = S_j[1:, 1:] - n_j xbar_j xbar_j^T with its eigenvalues raised to
    a small floor (it must be positive definite); Sigma_x at the mode of its conditional; mu the
    pooled mean. Returns a dict with theta, sigma_y2, Sigma_x, mu, xbar and W."""
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
    return {"theta": theta, "sigma_y2": np.float64(sigma_y2), "Sigma_x": Sx,
            "mu": (n[:, None] * xbar).sum(0) / n.sum(), "xbar": xbar, "W": W}


def intercept_noncentred_position(data, position):
    """Start of :func:`~bayesdp.models.regression.normalx_intercept_noncentred_model` that gives
    the same (Sigma_x, mu, xbar, W, theta, sigma_y2) as ``position`` (of the centred model;
    ``data`` an InterceptModelData)."""
    import jax.numpy as jnp

    n = np.asarray(data.n, dtype=float)
    L_x = np.linalg.cholesky(np.asarray(position["Sigma_x"], dtype=float))
    mu, xbar = np.asarray(position["mu"]), np.asarray(position["xbar"])
    v = np.linalg.solve(L_x, (xbar - mu).T).T * np.sqrt(n)[:, None]
    W_diag, W_offdiag = bartlett_variables(n - 1.0, L_x, position["W"])
    S = intercept_scatter(data.n, data.column, jnp.asarray(xbar), jnp.asarray(position["W"]))
    theta_std = theta_std_of(data, S, position["sigma_y2"], jnp.asarray(position["theta"]))
    return {"L_x": jnp.asarray(L_x), "mu": mu, "v": v, "W_diag": W_diag,
            "W_offdiag": W_offdiag, "sigma_y2": position["sigma_y2"],
            "theta_std": np.asarray(theta_std)}
