"""The default method ``"eiv"``: the noise on S carried into theta's likelihood (errors in
variables), the holders pooled, sigma_y^2 and the scales of theta's prior integrated out.

The posterior of :func:`bayesdp.models.regression.eiv_model` with the S noise pushed through a
plug-in theta_0: given (sigma_y^2, r), theta is Gaussian,

    P   = S_hat^T M^{-1} S_hat + (D_r C D_r)^{-1},      M = sigma_y^2 S_+ + Var(e_z - E theta_0)
    mu  = P^{-1} (S_hat^T M^{-1} z_hat + (D_r C D_r)^{-1} m)

(eq. 12 with the pooled release, S_hat as the design and M as the noise), and the marginal
likelihood p(z_hat | sigma_y^2, r) = N(z_hat; S_hat m, M + S_hat D_r C D_r S_hat^T) is closed
form (:func:`log_marginal`).

- One scale r for all slopes (``scales="common"``, the default, :func:`eiv_posterior`):
  sigma_y^2 and r are integrated on grids in log space (a coarse grid over the prior's range,
  then a fine one over the cells holding the posterior mass), so the posterior is a mixture of
  Gaussians, drawn exactly. theta_0 is the mixture's mean, found by damped fixed-point
  iteration (theta_0 <- (theta_0 + mean(theta_0)) / 2, from theta_0 = m).
- One scale r_k per slope (``scales="per-slope"``, :func:`per_slope_draws`):
  collapsed Gibbs over (log r_1, ..., log r_d, log sigma_y^2) with theta integrated out, each
  coordinate drawn exactly from its conditional on a grid, then theta | r, sigma_y^2 exactly;
  theta_0 starts at the common-scale posterior's mean and adapts during warm-up; the sigma_y^2
  grid is the common-scale posterior's. A coefficient the release
  cannot see (a near-null direction of X^T X) then keeps a prior wide enough for it, instead of
  the scale the other coefficients choose (y^T y is left out of its likelihood: start it from
  ``eiv_posterior(..., yty=False)``); but its plug-in posterior fails simulation-based
  calibration for weakly measured coefficients (docs/evidence/coverage-real-data.md), so it is
  not the default.

NumPy only: nothing to compile.

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
from ..models.regression import (eiv_model_data, eiv_noise_covariance, eiv_yty_moments,
                                 eiv_yty_noise)
from .closed_form import complete_degenerate_noise, prior_variance_split

#: theta's prior scale r runs over [SCALE_MIN, 1] (log-uniform): the default prior's sd (r = 1)
#: down to a hundredth of it, so the release can shrink coefficients it cannot see, as adaSSP's
#: ridge does, but not to zero.
SCALE_MIN = 1e-2
_COARSE = (16, 6)  # grid points of log sigma_y^2 and log r, first pass (over the prior's range)
_FINE = (40, 20)  # second pass, over the cells holding the mass
_MASS_LOG_RATIO = 30.0  # cells whose weight is within e^30 of the largest hold the mass
_ITERATIONS = 60  # fixed-point iterations of theta_0 at most, per pass (damped by a half)
_COARSE_TOL, _TOL = 1e-4, 1e-7  # relative change of theta_0 that ends them, per pass
SCALE_GRID = 32  # grid points of each log r_k in the per-slope sampler
_ADAPT_EVERY = 50  # warm-up sweeps between updates of the per-slope sampler's theta_0
SCALES = ("common", "per-slope")  # theta's prior scale: one for all (default) or one per slope


def eiv_posterior(release, priors, *, scale_min=SCALE_MIN, sigma_y2_max=None, yty=True):
    """The "eiv" posterior with one prior scale r for all slopes, as a mixture over the
    (sigma_y^2, r) grid (``scales="common"``; the per-slope sampler starts from it). A release
    with y^T y adds :func:`eiv_model`'s ``yty_hat`` factor to each cell's weight (theta's
    conditional in a cell is z_hat's alone) and refines the sigma_y^2 grid once more.

    Parameters
    ----------
    release : Release
    priors : Priors (resolved)
    scale_min : float in (0, 1)
        Smallest prior scale r of the slopes (theta ~ N(m, D_r C D_r)).
    sigma_y2_max : float or None
        Upper bound of sigma_y^2 (default B_y^2: |y| <= B_y, so Var(y | x) <= B_y^2; without
        bounds, the prior's 1 - 1e-9 quantile).
    yty : bool
        Use the release's y^T y (when it has one) in the likelihood (:func:`eiv_model`'s
        ``yty_hat`` factor); False leaves it out (the per-slope sampler does).

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
    data = eiv_model_data(release, priors, scale_min=scale_min, sigma_y2_max=sigma_y2_max,
                          per_slope=False)
    if not yty:
        data = data._replace(yty_hat=None, yty_var=None)
    lo = min(float(stats.invgamma.ppf(1e-12, priors.a, scale=priors.b)), sigma_y2_max / 1e6)
    log_s2 = np.linspace(np.log(lo), np.log(sigma_y2_max), _COARSE[0])
    log_r = np.linspace(np.log(scale_min), 0.0, _COARSE[1])
    theta0, grid, _, _ = _fixed_point(data, np.asarray(priors.m, dtype=float), log_s2, log_r,
                                      _COARSE_TOL)
    log_s2 = _refine(log_s2, grid["log_weight"].max(axis=1), _FINE[0])
    log_r = _refine(log_r, grid["log_weight"].max(axis=0), _FINE[1])
    theta0, grid, iterations, converged = _fixed_point(data, theta0, log_s2, log_r, _TOL)
    if data.yty_hat is not None:  # y^T y pins sigma_y^2 down: a third, finer pass over it
        log_s2 = _refine(log_s2, grid["log_weight"].max(axis=1), _FINE[0])
        theta0, grid, it3, converged = _fixed_point(data, theta0, log_s2, log_r, _TOL)
        iterations += it3
    grid.update(data=data._replace(theta_plugin=theta0), theta_plugin=theta0,
                iterations=iterations, converged=converged)
    return grid


def _fixed_point(data, theta0, log_s2, log_r, tol):
    """theta0 = the posterior mean with the S noise pushed through theta0, by damped
    iteration; returns (theta0, its grid, iterations, converged)."""
    for it in range(1, _ITERATIONS + 1):
        grid = _grid(data, theta0, log_s2, log_r)
        new = grid["theta_mean"]
        if np.linalg.norm(new - theta0) <= tol * (1.0 + np.linalg.norm(new)):
            return theta0, grid, it, True
        theta0 = 0.5 * (theta0 + new)  # damped: the undamped map oscillates
    return theta0, _grid(data, theta0, log_s2, log_r), _ITERATIONS, False


def _z_cholesky(data, theta0, s2):
    """Cholesky factors of M = sigma_y^2 S_+ + Var(e_z - E theta0) for each sigma_y^2 in
    ``s2``, (G, d, d) (:func:`_m_cholesky` for one noise)."""
    return _m_cholesky(data, np.asarray(s2)[None], eiv_noise_covariance(data, theta0)[None])[0]


def _m_cholesky(data, s2, noise):
    """Cholesky factors (N, G, d, d) of M = sigma_y^2 S_+ + noise for sigma_y^2 (N, G) and
    noise (N, d, d) (one plug-in's Var(e_z - E t) per row; :mod:`.selection` has one per
    model). A singular M (no noise on z and a singular S_+) is first completed along its null
    space, which leaves the posterior and the evidence ratios unchanged
    (:func:`closed_form.complete_degenerate_noise`)."""
    N, G = s2.shape
    d = noise.shape[-1]
    S = s2[:, :, None, None] * data.S_plus
    try:
        return np.linalg.cholesky(S + noise[:, None])
    except np.linalg.LinAlgError:
        S, noise = S.reshape(N * G, d, d), np.repeat(noise, G, axis=0)
        M = S + complete_degenerate_noise(S, np.broadcast_to(data.z_hat, (N * G, d)), 1.0, noise)
        return np.linalg.cholesky(M.reshape(N, G, d, d))


def _refine(points, log_w, size):
    """``size`` points evenly over the cells of ``points`` whose weight is within e^30 of the
    largest, one cell wider on each side (clipped to the prior's range)."""
    return _refine_rows(points[None], log_w[None], size)[0]


def _refine_rows(points, log_w, size):
    """:func:`_refine` for each row of ``points`` and ``log_w`` (N, G) (:mod:`.selection`: one
    grid per model)."""
    keep = log_w >= log_w.max(axis=1, keepdims=True) - _MASS_LOG_RATIO
    G = points.shape[1]
    first = np.maximum(keep.argmax(axis=1) - 1, 0)
    last = np.minimum(G - 1 - keep[:, ::-1].argmax(axis=1) + 1, G - 1)
    rows = np.arange(len(points))
    a, b = points[rows, first], points[rows, last]
    return a[:, None] + (b - a)[:, None] * np.linspace(0.0, 1.0, size)


def _grid(data, theta0, log_s2, log_r):
    """Log weights (normalised) and conditional means of theta over the grid, with the S noise
    pushed through theta0; the prior on the grid: InvGamma(a, b) for sigma_y^2 and log-uniform
    for r, both as densities in the log coordinates of the grid."""
    d = len(data.z_hat)
    s2 = np.exp(log_s2)
    G, H = len(s2), len(log_r)
    L = _z_cholesky(data, theta0, s2)
    log_det_M = 2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)
    AtA, Atb, btb = _release_terms(data, L)
    log_prior_s2 = (-data.a * log_s2 - data.b / s2)  # InvGamma density times s2 (log grid)
    yty = data.yty_hat is not None
    covs = np.empty((G, H, d, d)) if yty else None
    log_w = np.empty((G, H))
    means = np.empty((G, H, d))
    prior_prec, prior_log_det = _prior_precision(data, np.exp(log_r))
    for h in range(H):  # every sigma_y^2 of the grid at once
        C_inv, log_det_C = prior_prec[h], prior_log_det[h]
        h_prior = C_inv @ data.m
        P = AtA + C_inv
        Lp = np.linalg.cholesky(P)  # P is positive definite (and its log-determinant)
        rhs = Atb + h_prior
        if yty:  # theta's covariance in each cell: one LU inverse, the mean from it
            covs[:, h] = np.linalg.inv(P)
            mu = np.matmul(covs[:, h], rhs[..., None])[..., 0]
        else:
            mu = _cho_solve(Lp, rhs[..., None])[..., 0]
        quad = btb + data.m @ h_prior - np.einsum("gi,gi->g", rhs, mu)
        log_det_P = 2.0 * np.log(np.diagonal(Lp, axis1=1, axis2=2)).sum(axis=1)
        log_w[:, h] = -0.5 * (log_det_M + log_det_C + log_det_P + quad) + log_prior_s2
        means[:, h] = mu
    if yty:  # y^T y's factor (eiv_model), theta ~ N(mu, P^-1) integrated, cell by cell
        M = L @ L.transpose(0, 2, 1)
        mean, var = eiv_yty_moments(data, s2[:, None], means, covs, M[:, None],
                                    eiv_yty_noise(data, theta0))
        log_w -= 0.5 * (np.log(var) + (data.yty_hat - mean) ** 2 / var)
    log_w -= special.logsumexp(log_w)
    w = np.exp(log_w)
    theta_mean = np.einsum("gh,ghd->d", w, means)
    return {"sigma_y2": s2, "scale": np.exp(log_r), "log_weight": log_w, "mean": means,
            "theta_mean": theta_mean}


def _cho_solve(L, B):
    """(L L^T)^{-1} B for stacks of lower Cholesky factors L (..., d, d) and B (..., d, k)."""
    return np.linalg.solve(np.swapaxes(L, -1, -2), np.linalg.solve(L, B))


def cell_precision(data, theta0, sigma_y2, scale):
    """theta's precision P in the cell (sigma_y^2, r) (the Gaussian of the module docstring)."""
    AtA = _release_terms(data, _z_cholesky(data, theta0, np.array([sigma_y2])))[0][0]
    return AtA + _prior_precision(data, np.reshape(scale, (1, -1)))[0][0]


def _release_terms(data, L):
    """A^T A, A^T b and b^T b with A = L^-1 S_hat and b = L^-1 z_hat, for the Cholesky factors
    ``L`` (G, d, d) of M on a grid of sigma_y^2: the release's precision S_hat^T M^-1 S_hat
    and the terms of the mean and the marginal likelihood. Shapes (G, d, d), (G, d), (G,)."""
    A = np.linalg.solve(L, data.S_hat)
    b = np.linalg.solve(L, data.z_hat[:, None])[..., 0]
    return A.transpose(0, 2, 1) @ A, np.einsum("gij,gi->gj", A, b), np.einsum("gi,gi->g", b, b)


def _prior_precision(data, scale):
    """theta's prior precision (D_r C D_r)^{-1} = D_r^{-1} C^{-1} D_r^{-1} and log|D_r C D_r|
    for each row of ``scale`` ((N,) one common r or (N, d) one per coefficient; an intercept's
    entry of D_r is 1): (N, d, d) and (N,), with one Cholesky factor of C for all rows."""
    r = data.slopes * np.reshape(scale, (len(scale), -1)) + (1.0 - data.slopes)  # (N, d)
    Lc = linalg.cholesky(data.C, lower=True)
    C_inv = linalg.cho_solve((Lc, True), np.eye(len(data.m)))
    return (C_inv / (r[:, :, None] * r[:, None, :]),
            2.0 * np.log(np.diag(Lc)).sum() + 2.0 * np.log(r).sum(axis=1))


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


def prior_share(data, sigma_y2, scale, weight=None):
    """Each coefficient's share of its posterior variance given (sigma_y^2, r) that the prior
    supplies, averaged over the cells (sigma_y^2, r) given, weighted by ``weight`` (None:
    equally): in a cell theta's covariance V = P^-1 splits into the release's V A V and the
    prior's V Pi V (:func:`closed_form.prior_variance_split`; P, A = S_hat^T M^-1 S_hat and Pi
    as in the module docstring, with the S noise through ``data.theta_plugin``), and the share
    is sum_c w_c diag(V_c Pi_c V_c) / sum_c w_c diag(V_c). The spread of the cells' means (what
    the uncertainty of sigma_y^2 and r adds to the mixture's variance) is in neither sum. Near
    1: the release says almost nothing about the coefficient (a direction of X^T X its noise
    swamps) and its interval is the prior's, whose scale the other coefficients set
    (docs/methods.md).

    Parameters
    ----------
    data : EivData (its ``theta_plugin`` is used)
    sigma_y2 : (N,) sigma_y^2 of each cell; scale : (N,) or (N, d) its prior scale(s)
    weight : (N,) or None

    Returns
    -------
    (d,) array in [0, 1]
    """
    sigma_y2 = np.asarray(sigma_y2, dtype=float)
    weight = np.ones(len(sigma_y2)) if weight is None else np.asarray(weight, dtype=float)
    d = len(data.z_hat)
    s2u, gi = np.unique(sigma_y2, return_inverse=True)
    AtA = _release_terms(data, _z_cholesky(data, data.theta_plugin, s2u))[0]
    Pi = _prior_precision(data, np.asarray(scale, dtype=float))[0]
    P = AtA[gi] + Pi
    V = _cho_solve(np.linalg.cholesky(P), np.broadcast_to(np.eye(d), P.shape))
    num, den = prior_variance_split(V, Pi)
    return (weight @ num) / (weight @ den)


def grid_cells(post, mass=1.0 - 1e-6):
    """The cells of the grid posterior holding ``mass`` of its weight: (sigma_y^2, r, weight),
    each (N,), heaviest first (for :func:`prior_share`)."""
    w = np.exp(post["log_weight"]).ravel()
    order = np.argsort(w)[::-1]
    keep = order[:np.searchsorted(np.cumsum(w[order]), mass * w.sum()) + 1]
    g, h = np.divmod(keep, post["log_weight"].shape[1])
    return post["sigma_y2"][g], post["scale"][h], w[keep]


def log_marginal(data, M, scale):
    """log N(z_hat; S_hat m, M + S_hat D_r C D_r S_hat^T): the likelihood of (sigma_y^2, r) with
    theta integrated out, batched over the leading axes of ``M`` (..., d, d) and ``scale``
    (..., k), k = 1 (one scale) or d (one per slope)."""
    r = data.slopes * scale + (1.0 - data.slopes)
    K = M + data.S_hat @ (data.C * r[..., :, None] * r[..., None, :]) @ data.S_hat.T
    L = np.linalg.cholesky(K)
    res = np.broadcast_to(data.z_hat - data.S_hat @ data.m, K.shape[:-1])[..., None]
    u = np.linalg.solve(L, res)[..., 0]
    return -np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(-1) - 0.5 * (u * u).sum(-1)


def _pick(log_p, rng):
    """One index per row of ``log_p`` (..., K), drawn with probabilities prop. to exp(log_p)."""
    p = np.exp(log_p - log_p.max(axis=-1, keepdims=True))
    c = p.cumsum(axis=-1)
    return (c > rng.random(c.shape[:-1] + (1,)) * c[..., -1:]).argmax(axis=-1)


def per_slope_draws(post, rng, num_chains, num_warmup, num_samples):
    """Draws of :func:`eiv_model` with one prior scale r_k per slope, by collapsed Gibbs.

    theta is integrated out (``log_marginal``), so the sampler moves over (log r_1, ...,
    log r_d, log sigma_y^2) only, each coordinate in turn drawn exactly from its conditional on
    a grid (``SCALE_GRID`` points of log r over [log scale_min, 0]; ``post``'s grid of
    sigma_y^2); then theta | r, sigma_y^2 is the Gaussian of the module docstring with
    D_r = diag(r). The S noise is pushed through a plug-in theta_0: ``post``'s (the
    common-scale mean) at first, then, every ``_ADAPT_EVERY`` warm-up sweeps, halfway to the
    mean of theta's conditional means over those sweeps; fixed after warm-up, so the kept draws
    come from one Markov chain with one target. The scale of an intercept does not enter the
    likelihood: it is drawn from its prior.

    Parameters
    ----------
    post : dict from :func:`eiv_posterior` (its data, theta_0 and sigma_y^2 grid)
    rng : numpy Generator
    num_chains, num_warmup, num_samples : int (sweeps; each chain starts from a cell of
        ``post``, the common-scale posterior)

    Returns
    -------
    theta (chains, samples, d), sigma_y2 (chains, samples), scale (chains, samples, d) and the
    EivData of the target (``scale_min`` repeated per coefficient, the final theta_0 as
    ``theta_plugin``)
    """
    data, theta0 = post["data"], post["theta_plugin"]
    d = len(theta0)
    data = data._replace(scale_min=np.full(d, float(data.scale_min)))  # one r_k per coefficient
    s2 = post["sigma_y2"]
    log_r = np.linspace(np.log(data.scale_min[0]), 0.0, SCALE_GRID)
    L = _z_cholesky(data, theta0, s2)  # M = L L^T = sigma_y^2 S_+ + Var(e_z - E theta_0)
    M = L @ L.transpose(0, 2, 1)  # (G, d, d)
    log_prior_s2 = -data.a * np.log(s2) - data.b / s2  # InvGamma density times s2 (log grid)
    slope = np.flatnonzero(data.slopes > 0)
    G, H = post["log_weight"].shape
    start = _pick(np.broadcast_to(post["log_weight"].ravel(), (num_chains, G * H)), rng)
    g = start // H
    k = np.abs(log_r[None, :] - np.log(post["scale"][start % H])[:, None]).argmin(axis=1)
    at = np.repeat(k[:, None], d, axis=1)  # (chains, d): grid index of each log r_k
    keep_at = np.empty((num_samples, num_chains, d), dtype=int)
    keep_g = np.empty((num_samples, num_chains), dtype=int)
    window_at = np.empty((_ADAPT_EVERY, num_chains, d), dtype=int)
    window_g = np.empty((_ADAPT_EVERY, num_chains), dtype=int)
    cand = np.arange(SCALE_GRID)
    diagonal = np.count_nonzero(data.C - np.diag(np.diag(data.C))) == 0
    for it in range(num_warmup + num_samples):
        if it < num_warmup:  # warm-up: keep the window since theta_0's last update
            window_at[it % _ADAPT_EVERY], window_g[it % _ADAPT_EVERY] = at, g
            if (it + 1) % _ADAPT_EVERY == 0:  # theta_0 <- (theta_0 + the window's mean) / 2
                mu, _ = _theta_moments(data, L, window_g.ravel(),
                                       np.exp(log_r[window_at]).reshape(-1, d))
                theta0 = 0.5 * (theta0 + mu.mean(axis=0))
                L = _z_cholesky(data, theta0, s2)
                M = L @ L.transpose(0, 2, 1)
        for j in slope:
            if diagonal:  # r_j scales one rank-one term of the z covariance
                at[:, j] = _pick(_rank_one_log_marginal(data, M[g], np.exp(log_r[at]), j,
                                                        np.exp(log_r)), rng)
                continue
            trial = np.repeat(at[:, None, :], SCALE_GRID, axis=1)  # (chains, K, d)
            trial[:, :, j] = cand
            at[:, j] = _pick(log_marginal(data, M[g][:, None], np.exp(log_r[trial])), rng)
        g = _pick(log_marginal(data, M[None], np.exp(log_r[at])[:, None, :])
                  + log_prior_s2, rng)
        if it >= num_warmup:
            keep_at[it - num_warmup], keep_g[it - num_warmup] = at, g
    scale = np.exp(log_r[keep_at]).transpose(1, 0, 2)  # (chains, samples, d)
    gi = keep_g.T
    free = np.flatnonzero(data.slopes == 0)  # an intercept: its prior
    scale[..., free] = np.exp(rng.uniform(np.log(data.scale_min[0]), 0.0,
                                          scale[..., free].shape))
    mu, Lp = _theta_moments(data, L, gi.ravel(), scale.reshape(-1, d))
    eps = rng.standard_normal(mu.shape)
    theta = mu + np.linalg.solve(Lp.transpose(0, 2, 1), eps[..., None])[..., 0]
    return (theta.reshape(num_chains, num_samples, d), s2[gi], scale,
            data._replace(theta_plugin=theta0))


def _rank_one_log_marginal(data, M, scale, j, values):
    """:func:`log_marginal` at r_j = each of ``values`` (K,), the other scales as in ``scale``
    (chains, d), for a diagonal C: the z covariance is K_-j + t s_j s_j^T with t = r_j^2 C_jj
    and s_j the j-th column of S_hat, so by the matrix determinant lemma and Sherman-Morrison
    log|K| = log|K_-j| + log(1 + t a) and res^T K^-1 res = q - t b^2 / (1 + t a), with
    a = s_j^T K_-j^-1 s_j, b = s_j^T K_-j^-1 res, q = res^T K_-j^-1 res. Returns (chains, K),
    equal to log_marginal up to a constant per chain."""
    r = data.slopes * scale + (1.0 - data.slopes)
    r[:, j] = 0.0  # leave r_j's term out
    V = (np.diag(data.C) * r ** 2)[:, :, None] * np.eye(r.shape[1])  # (chains, d, d)
    K = M + data.S_hat @ V @ data.S_hat.T
    L = np.linalg.cholesky(K)
    res = np.broadcast_to(data.z_hat - data.S_hat @ data.m, K.shape[:-1])
    u = np.linalg.solve(L, np.stack([np.broadcast_to(data.S_hat[:, j], res.shape), res],
                                    axis=-1))  # (chains, d, 2): L^-1 s_j, L^-1 res
    a = (u[..., 0] ** 2).sum(-1)[:, None]
    b = (u[..., 0] * u[..., 1]).sum(-1)[:, None]
    t = values[None, :] ** 2 * data.C[j, j]
    return -0.5 * np.log1p(t * a) + 0.5 * t * b ** 2 / (1.0 + t * a)


def _theta_moments(data, L, g, scale):
    """theta | sigma_y^2 = grid[g], r = scale, per row: N(mu, P^{-1}) with
    P = S_hat^T M^{-1} S_hat + (D_r C D_r)^{-1} and mu = P^{-1} (S_hat^T M^{-1} z_hat +
    (D_r C D_r)^{-1} m); ``L`` (G, d, d): the Cholesky factors of M on the grid. Returns mu
    (N, d) and the Cholesky factors of P (N, d, d)."""
    AtA, Atb, _ = _release_terms(data, L)
    P_prior = _prior_precision(data, scale)[0]
    P = AtA[g] + P_prior
    Lp = np.linalg.cholesky(P)
    rhs = Atb[g] + P_prior @ data.m
    mu = np.linalg.solve(Lp.transpose(0, 2, 1), np.linalg.solve(Lp, rhs[..., None]))[..., 0]
    return mu, Lp
