"""Closed-form posteriors: Bayes-fixedS-fast (Algorithm 3) and the non-private conjugate posterior.

Bayes-fixedS-fast fixes S_j at the nearest PSD matrix to S_hat_j (section 4.2, Higham 1988) and
sigma_y^2 at a plug-in value s2, so theta | z_hat is Gaussian (eq. 12 with S_j fixed):

    Sigma_post^{-1} = C^{-1} + sum_j S_j (s2 S_j + sigma_z^2 I)^{-1} S_j
    m_post          = Sigma_post (C^{-1} m + sum_j S_j (s2 S_j + sigma_z^2 I)^{-1} z_hat_j)

The paper's plug-in is sigma_y = B_y / 3 (s2 = (B_y/3)^2); the authors' code uses B_y / 3 as the
variance (``sigma_y_rule="paper-code"``).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from ..errors import BayesdpInputError

SIGMA_Y_RULES = ("paper", "paper-code")


def nearest_psd(S):
    """Nearest symmetric PSD matrix in Frobenius norm: clip negative eigenvalues (Higham 1988).

    Works on one (d, d) matrix or a stack (J, d, d).
    """
    S = np.asarray(S, dtype=float)
    S = 0.5 * (S + np.swapaxes(S, -1, -2))
    w, E = np.linalg.eigh(S)
    return np.einsum("...ik,...k,...jk->...ij", E, np.maximum(w, 0.0), E)


def plugin_sigma_y2(release, rule="paper"):
    """Plug-in sigma_y^2 of Algorithm 3 from the public bound B_y."""
    if release.bounds is None:
        raise BayesdpInputError(
            "the release has no bounds, so the plug-in sigma_y = B_y/3 is undefined; pass sigma_y2"
        )
    by = release.bounds[1]
    if rule == "paper":
        return (by / 3.0) ** 2
    if rule == "paper-code":
        return by / 3.0
    raise BayesdpInputError(f"sigma_y_rule must be one of {SIGMA_Y_RULES}, got {rule!r}")


def z_noise_covariances(release):
    """Per-holder covariance of the noise on z_hat, (J, d, d): sigma_z^2 I unless a general
    ``noise_cov`` is given, in which case its z block."""
    d = release.d
    if release.noise_cov is not None:
        k = d * (d + 1) // 2
        return release.noise_cov[:, k:, k:]
    return release.sigma_z[:, None, None] ** 2 * np.eye(d)


def gaussian_theta_posterior(S, z_hat, sigma_y2, Sigma_z, m, C):
    """Moments of theta | S, sigma_y^2, z_hat (eq. 12), by Cholesky solves.

    S (J, d, d) PSD, z_hat (J, d), Sigma_z (J, d, d) noise covariances of z_hat.
    Returns (mean, cov, precision).
    """
    d = S.shape[-1]
    C_chol = linalg.cho_factor(C, lower=True)
    P = linalg.cho_solve(C_chol, np.eye(d))
    h = linalg.cho_solve(C_chol, m)
    for Sj, zj, Zj in zip(S, z_hat, Sigma_z):
        K = linalg.cho_factor(sigma_y2 * Sj + Zj, lower=True)
        P = P + Sj @ linalg.cho_solve(K, Sj)
        h = h + Sj @ linalg.cho_solve(K, zj)
    P = 0.5 * (P + P.T)
    P_chol = linalg.cho_factor(P, lower=True)
    mean = linalg.cho_solve(P_chol, h)
    cov = linalg.cho_solve(P_chol, np.eye(d))
    return mean, 0.5 * (cov + cov.T), P


def fast_posterior(release, priors, *, sigma_y2=None, sigma_y_rule="paper", fixed_s="psd"):
    """Bayes-fixedS-fast (Algorithm 3): Gaussian posterior moments of theta.

    ``fixed_s`` is "psd" (nearest PSD, the paper) or "psd+I" (the authors' MCMC-fixedS variant).
    Returns a dict with mean, cov, sigma_y2 and the fixed S.
    """
    if sigma_y2 is None:
        sigma_y2 = plugin_sigma_y2(release, sigma_y_rule)
    elif not float(sigma_y2) > 0:
        raise BayesdpInputError(f"sigma_y2 must be > 0, got {sigma_y2}")
    S = fixed_s_estimate(release, fixed_s)
    mean, cov, _ = gaussian_theta_posterior(
        S, release.z_hat, float(sigma_y2), z_noise_covariances(release), priors.m, priors.C
    )
    return {"mean": mean, "cov": cov, "sigma_y2": float(sigma_y2), "S": S}


def fixed_s_estimate(release, fixed_s="psd"):
    """The fixed S_j of MCMC-fixedS / Bayes-fixedS-fast: nearest PSD to S_hat_j (+ I optionally)."""
    S = nearest_psd(release.S_hat)
    if fixed_s == "psd":
        return S
    if fixed_s == "psd+I":
        return S + np.eye(release.d)
    raise BayesdpInputError(f"fixed_s must be 'psd' or 'psd+I', got {fixed_s!r}")


def nonprivate_posterior(X, y, priors, Lambda0=None):
    """Normal-inverse-gamma conjugate posterior from the raw rows (the non-private reference).

    Prior (as in the authors' code and Bernstein & Sheldon): sigma^2 ~ IG(a, b),
    theta | sigma^2 ~ N(m, sigma^2 Lambda_0^{-1}), Lambda_0 = b/(a-1) I_d by default. Posterior:
    Lambda_n = X^T X + Lambda_0, mu_n = Lambda_n^{-1}(X^T y + Lambda_0 m), a_n = a + n/2,
    b_n = b + (y^T y + m^T Lambda_0 m - mu_n^T Lambda_n mu_n) / 2.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    return nig_posterior(X.T @ X, X.T @ y, float(y @ y), X.shape[0], priors, Lambda0)


def nig_precision(priors):
    """Lambda_0 of the NIG reference: b/(a-1) I, as in the authors' code (anchor report sec. 4)."""
    d = priors.m.shape[0]
    return priors.b / (priors.a - 1.0) * np.eye(d)


def nig_posterior(S, z, yty, n, priors, Lambda0=None):
    """NIG posterior parameters from sufficient statistics (S = X^T X, z = X^T y, yty, n)."""
    L0 = nig_precision(priors) if Lambda0 is None else Lambda0
    m = priors.m
    Ln = S + L0
    Ln_chol = linalg.cho_factor(Ln, lower=True)
    mu = linalg.cho_solve(Ln_chol, z + L0 @ m)
    a_n = priors.a + n / 2.0
    b_n = priors.b + 0.5 * (yty + m @ L0 @ m - mu @ Ln @ mu)
    b_n = max(b_n, priors.b)  # the authors clamp at b (rounding can make it negative)
    return {"mean": mu, "Lambda_n": Ln, "a_n": a_n, "b_n": b_n,
            "cov": b_n / (a_n - 1.0) * linalg.cho_solve(Ln_chol, np.eye(len(mu)))}


def draw_gaussian(rng, mean, cov, shape):
    """Draws of N(mean, cov) with the given leading shape, via the Cholesky factor."""
    L = np.linalg.cholesky(cov)
    eps = rng.standard_normal((*shape, len(mean)))
    return mean + eps @ L.T


def draw_nig(rng, post, shape):
    """Draws (theta, sigma^2) from a NIG posterior."""
    sigma2 = post["b_n"] / rng.gamma(post["a_n"], 1.0, size=shape)
    Linv = linalg.cho_solve(linalg.cho_factor(post["Lambda_n"], lower=True), np.eye(len(post["mean"])))
    L = np.linalg.cholesky(0.5 * (Linv + Linv.T))
    eps = rng.standard_normal((*shape, len(post["mean"])))
    theta = post["mean"] + np.sqrt(sigma2)[..., None] * (eps @ L.T)
    return theta, sigma2
