"""The default method ``"eiv"``: the noise on S carried into theta's likelihood (errors in
variables), the holders pooled, sigma_y^2 and the scale of theta's prior integrated out.

The posterior of :func:`bayesdp.models.regression.eiv_model` with the S noise pushed through a
plug-in theta_0 (the posterior mean, found by fixed-point iteration): given (sigma_y^2, r),
theta is Gaussian,

    P   = S_hat^T M^{-1} S_hat + (D_r C D_r)^{-1},      M = sigma_y^2 S_+ + Var(e_z - E theta_0)
    mu  = P^{-1} (S_hat^T M^{-1} z_hat + (D_r C D_r)^{-1} m)

(eq. 12 with the pooled release, S_hat as the design and M as the noise), and the marginal
likelihood p(z_hat | sigma_y^2, r) = N(z_hat; S_hat m, M + S_hat D_r C D_r S_hat^T) is closed
form. sigma_y^2 and r are integrated on grids in log space (a coarse grid over the prior's range,
then a fine one over the cells holding the posterior mass), so the posterior is a mixture of
Gaussians, drawn exactly. theta_0 is the mixture's mean, found by damped fixed-point iteration
(theta_0 <- (theta_0 + mean(theta_0)) / 2, from theta_0 = m). No MCMC and nothing to compile
(cost: docs/methods.md, "eiv").

Example::

    import bayesdp
    sim = bayesdp.simulate(n=20_000, d=3, seed=1)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=5)
    idata = bayesdp.fit(rel, method="eiv", seed=0)     # the default method
    print(idata.posterior["theta"].mean(("chain", "draw")).values, sim.theta)
"""

from __future__ import annotations

import numpy as np
from scipy import linalg, special, stats

from ..errors import BayesdpInputError
from ..models.regression import eiv_model_data, eiv_noise_covariance
from .closed_form import complete_degenerate_noise

#: theta's prior scale r runs over [SCALE_MIN, 1] (log-uniform): the default prior's sd (r = 1)
#: down to a hundredth of it, so the release can shrink coefficients it cannot see, as adaSSP's
#: ridge does, but not to zero.
SCALE_MIN = 1e-2
COARSE = (16, 6)  # grid points of log sigma_y^2 and log r, first pass (over the prior's range)
FINE = (40, 20)  # second pass, over the cells holding the mass
MASS_LOG_RATIO = 30.0  # cells whose weight is within e^30 of the largest hold the mass
ITERATIONS = 60  # fixed-point iterations of theta_0 at most, per pass (damped by a half)
COARSE_TOL, TOL = 1e-4, 1e-7  # relative change of theta_0 that ends them, per pass


def eiv_posterior(release, priors, *, scale_min=SCALE_MIN, sigma_y2_max=None):
    """The "eiv" posterior as a mixture over the (sigma_y^2, r) grid.

    Parameters
    ----------
    release : Release
    priors : Priors (resolved)
    scale_min : float in (0, 1)
        Smallest prior scale r of the slopes (theta ~ N(m, D_r C D_r)).
    sigma_y2_max : float or None
        Upper bound of sigma_y^2 (default B_y^2: |y| <= B_y, so Var(y | x) <= B_y^2; without
        bounds, the prior's 1 - 1e-9 quantile).

    Returns
    -------
    dict with ``data`` (EivData at the final theta_0), ``theta_plugin``, ``sigma_y2`` and
    ``scale`` (the grid points, (G,) and (H,)), ``log_weight`` (G, H, normalised), ``mean``
    (G, H, d) (theta's mean in each cell), ``theta_mean`` (the mixture's mean), ``iterations``
    and ``converged`` (of the fixed-point iteration of theta_0).
    """
    if isinstance(scale_min, bool) or not isinstance(scale_min, (int, float, np.floating)) \
            or not 0.0 < scale_min < 1.0:
        raise BayesdpInputError(f"scale_min must be a number in (0, 1), got {scale_min!r}")
    if sigma_y2_max is None:
        sigma_y2_max = (release.bounds[1] ** 2 if release.bounds is not None
                        else float(stats.invgamma.ppf(1 - 1e-9, priors.a, scale=priors.b)))
    elif isinstance(sigma_y2_max, bool) or not isinstance(sigma_y2_max, (int, float, np.floating)) \
            or not 0.0 < sigma_y2_max < np.inf:
        raise BayesdpInputError(f"sigma_y2_max must be a positive number, got {sigma_y2_max!r}")
    data = eiv_model_data(release, priors, scale_min=scale_min, sigma_y2_max=sigma_y2_max)
    lo = min(float(stats.invgamma.ppf(1e-12, priors.a, scale=priors.b)), sigma_y2_max / 1e6)
    log_s2 = np.linspace(np.log(lo), np.log(sigma_y2_max), COARSE[0])
    log_r = np.linspace(np.log(scale_min), 0.0, COARSE[1])
    theta0, grid, _, _ = _fixed_point(data, np.asarray(priors.m, dtype=float), log_s2, log_r,
                                      COARSE_TOL)
    log_s2 = _refine(log_s2, grid["log_weight"].max(axis=1), FINE[0])
    log_r = _refine(log_r, grid["log_weight"].max(axis=0), FINE[1])
    theta0, grid, iterations, converged = _fixed_point(data, theta0, log_s2, log_r, TOL)
    grid.update(data=data._replace(theta_plugin=theta0), theta_plugin=theta0,
                iterations=iterations, converged=converged)
    return grid


def _fixed_point(data, theta0, log_s2, log_r, tol):
    """theta0 = the posterior mean with the S noise pushed through theta0, by damped
    iteration; returns (theta0, its grid, iterations, converged)."""
    for it in range(1, ITERATIONS + 1):
        grid = _grid(data, theta0, log_s2, log_r)
        new = grid["theta_mean"]
        if np.linalg.norm(new - theta0) <= tol * (1.0 + np.linalg.norm(new)):
            return theta0, grid, it, True
        theta0 = 0.5 * (theta0 + new)  # damped: the undamped map oscillates
    return theta0, _grid(data, theta0, log_s2, log_r), ITERATIONS, False


def _z_cholesky(data, theta0, s2):
    """Cholesky factors of M = sigma_y^2 S_+ + Var(e_z - E theta0) for each sigma_y^2 in
    ``s2``, (G, d, d). A singular M (no noise on z and a singular S_+) is first completed along
    its null space, which leaves the posterior unchanged
    (:func:`closed_form.complete_degenerate_noise`)."""
    G, d = len(s2), len(data.z_hat)
    S = s2[:, None, None] * data.S_plus
    noise = np.broadcast_to(eiv_noise_covariance(data, theta0), (G, d, d))
    try:
        return np.stack([linalg.cholesky(S[g] + noise[g], lower=True) for g in range(G)])
    except linalg.LinAlgError:
        M = S + complete_degenerate_noise(S, np.broadcast_to(data.z_hat, (G, d)), 1.0, noise)
        return np.stack([linalg.cholesky(M[g], lower=True) for g in range(G)])


def _refine(points, log_w, size):
    """``size`` points evenly over the cells of ``points`` whose weight is within e^30 of the
    largest, one cell wider on each side (clipped to the prior's range)."""
    keep = np.flatnonzero(log_w >= log_w.max() - MASS_LOG_RATIO)
    a, b = points[max(keep[0] - 1, 0)], points[min(keep[-1] + 1, len(points) - 1)]
    return np.linspace(a, b, size)


def _grid(data, theta0, log_s2, log_r):
    """Log weights (normalised) and conditional means of theta over the grid, with the S noise
    pushed through theta0; the prior on the grid: InvGamma(a, b) for sigma_y^2 and log-uniform
    for r, both as densities in the log coordinates of the grid."""
    d = len(data.z_hat)
    s2 = np.exp(log_s2)
    G, H = len(s2), len(log_r)
    L = _z_cholesky(data, theta0, s2)
    log_det_M = 2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)
    AtA, Atb, btb = np.empty((G, d, d)), np.empty((G, d)), np.empty(G)
    for g in range(G):  # A = L^{-1} S_hat, b = L^{-1} z_hat
        A = linalg.solve_triangular(L[g], data.S_hat, lower=True)
        bz = linalg.solve_triangular(L[g], data.z_hat, lower=True)
        AtA[g], Atb[g], btb[g] = A.T @ A, A.T @ bz, bz @ bz
    log_prior_s2 = (-data.a * log_s2 - data.b / s2)  # InvGamma density times s2 (log grid)
    log_w = np.empty((G, H))
    means = np.empty((G, H, d))
    for h, lr in enumerate(log_r):
        C_inv, log_det_C = _prior_precision(data, np.exp(lr))
        h_prior = C_inv @ data.m
        for g in range(G):
            Lp = linalg.cholesky(AtA[g] + C_inv, lower=True)
            rhs = Atb[g] + h_prior
            mu = linalg.cho_solve((Lp, True), rhs)
            quad = btb[g] + data.m @ h_prior - rhs @ mu
            log_det_P = 2.0 * np.log(np.diag(Lp)).sum()
            log_w[g, h] = -0.5 * (log_det_M[g] + log_det_C + log_det_P + quad) + log_prior_s2[g]
            means[g, h] = mu
    log_w -= special.logsumexp(log_w)
    w = np.exp(log_w)
    theta_mean = np.einsum("gh,ghd->d", w, means)
    return {"sigma_y2": s2, "scale": np.exp(log_r), "log_weight": log_w, "mean": means,
            "theta_mean": theta_mean}


def cell_precision(data, theta0, sigma_y2, scale):
    """theta's precision P in the cell (sigma_y^2, r) (the Gaussian of the module docstring)."""
    L = _z_cholesky(data, theta0, np.array([sigma_y2]))[0]
    A = linalg.solve_triangular(L, data.S_hat, lower=True)
    return A.T @ A + _prior_precision(data, scale)[0]


def _prior_precision(data, scale):
    """(D_r C D_r)^{-1} = D_r^{-1} C^{-1} D_r^{-1} and log|D_r C D_r| for the prior scale r."""
    Lc = linalg.cholesky(data.C, lower=True)
    inv_r = 1.0 / (data.slopes * scale + (1.0 - data.slopes))
    C_inv = linalg.cho_solve((Lc, True), np.eye(len(data.m))) * inv_r[:, None] * inv_r[None, :]
    return C_inv, 2.0 * np.log(np.diag(Lc)).sum() - 2.0 * np.log(inv_r).sum()


def draw(post, rng, shape):
    """Draws of (theta, sigma_y^2, r) from the mixture, ``shape`` = (chains, draws)."""
    G, H = post["log_weight"].shape
    n = int(np.prod(shape))
    cells = rng.choice(G * H, size=n, p=np.exp(post["log_weight"]).ravel() / np.exp(
        post["log_weight"]).sum())
    d = post["mean"].shape[-1]
    theta = np.empty((n, d))
    for c in np.unique(cells):
        g, h = divmod(int(c), H)
        at = np.flatnonzero(cells == c)
        P = cell_precision(post["data"], post["theta_plugin"], post["sigma_y2"][g],
                           post["scale"][h])
        Lp = np.linalg.cholesky(0.5 * (P + P.T))
        eps = rng.standard_normal((len(at), d))
        theta[at] = post["mean"][g, h] + np.linalg.solve(Lp.T, eps.T).T
    g, h = np.divmod(cells, H)
    return (theta.reshape(*shape, d), post["sigma_y2"][g].reshape(shape),
            post["scale"][h].reshape(shape))
