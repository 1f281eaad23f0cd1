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
from ..models.regression import (eiv_model_data, eiv_noise_covariance, eiv_yty_moments_from,
                                 eiv_yty_noise)
from .closed_form import PencilFactor, complete_degenerate_noise, prior_variance_split

#: theta's prior scale r runs over [SCALE_MIN, 1] (log-uniform): the default prior's sd (r = 1)
#: down to a hundredth of it, so the release can shrink coefficients it cannot see, as adaSSP's
#: ridge does, but not to zero.
SCALE_MIN = 1e-2
_COARSE = (16, 6)  # grid points of log sigma_y^2 and log r, first pass (over the prior's range)
_FINE = (40, 20)  # second pass, over the cells holding the mass
_MASS_LOG_RATIO = 30.0  # cells whose weight is within e^30 of the largest hold the mass
_ITERATIONS = 60  # fixed-point iterations of theta_0 at most, per pass (damped by a half)
_ANDERSON_MEMORY = 5  # steps the accelerated iteration of theta_0 remembers
_COARSE_TOL, _TOL = 1e-3, 1e-7  # relative change of theta_0 that ends them, per pass
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
    yty = data.yty_hat is not None  # y^T y pins sigma_y^2 down: a third, finer pass over it
    history = {"xs": [], "fs": []}  # the fine passes share the secant steps of theta0's map
    theta0, grid, iterations, converged = _fixed_point(data, theta0, log_s2, log_r,
                                                       _COARSE_TOL if yty else _TOL, history)
    if yty:
        log_s2 = _refine(log_s2, grid["log_weight"].max(axis=1), _FINE[0])
        theta0, grid, it3, converged = _fixed_point(data, theta0, log_s2, log_r, _TOL, history)
        iterations += it3
    grid.update(data=data._replace(theta_plugin=theta0), theta_plugin=theta0,
                iterations=iterations, converged=converged)
    return grid


def _fixed_point(data, theta0, log_s2, log_r, tol, history=None):
    """theta0 = the posterior mean with the S noise pushed through theta0, by accelerated
    iteration (:func:`anderson`); returns (theta0, its grid, iterations, converged)."""
    for it, theta0, grid in anderson(lambda t: _grid(data, t, log_s2, log_r),
                                     lambda g: g["theta_mean"], theta0, tol, _ITERATIONS,
                                     history=history):
        pass
    return theta0, grid, it, _close(grid["theta_mean"], theta0, tol)


def _close(new, old, tol):
    return np.linalg.norm(new - old) <= tol * (1.0 + np.linalg.norm(new))


def anderson(evaluate, value, x, tol, iterations, memory=_ANDERSON_MEMORY, history=None):
    """Solve x = value(evaluate(x)) by Anderson's acceleration (type II, the last ``memory``
    steps; Walker & Ni 2011, eq. (1.2) with mixing 1): with residuals f_k = value_k - x_k,
    gamma minimises |f_k - dF gamma| over the differences dF of the last residuals (dX of the
    iterates), and x_{k+1} = x_k + f_k - (dX + dF) gamma. With no history (the first step,
    and after a step whose residual grew, which restarts the memory) the step is the damped
    x + f / 2: the plain iteration can oscillate. Yields (iteration, x, evaluate(x)) after each
    evaluation until |f| <= tol (1 + |value|) or ``iterations`` evaluations; the last yield is
    the answer (its x is the one evaluated)."""
    history = {"xs": [], "fs": []} if history is None else history
    xs, fs = history["xs"], history["fs"]
    for it in range(1, iterations + 1):
        out = evaluate(x)
        new = value(out)
        yield it, x, out
        f = new - x
        if _close(new, x, tol):
            return
        if fs and np.linalg.norm(f) > np.linalg.norm(fs[-1]):
            xs[:], fs[:] = [], []
        xs[:], fs[:] = (xs + [x])[-memory - 1:], (fs + [f])[-memory - 1:]
        if len(fs) == 1:
            x = x + 0.5 * f
            continue
        dX, dF = np.diff(np.array(xs), axis=0).T, np.diff(np.array(fs), axis=0).T
        gamma = np.linalg.lstsq(dF, f, rcond=None)[0]
        x = x + f - (dX + dF) @ gamma


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
    for r, both as densities in the log coordinates of the grid.

    Cost: one factorisation of M's pencil (:func:`_release_pencil`) and one eigendecomposition
    per sigma_y^2 (:func:`_cells`); each cell (sigma_y^2, r) is then O(d^2), so a grid costs
    O(G d^3 + G H d^2), not O(G H d^3)."""
    s2 = np.exp(log_s2)
    noise = eiv_yty_noise(data, theta0) if data.yty_hat is not None else None
    terms = _release_pencil(data, theta0, s2, noise)
    if terms is None:  # no noise on z, or an indefinite S_+: a Cholesky factor per sigma_y^2
        L = _z_cholesky(data, theta0, s2)
        AtA, Atb, btb = _release_terms(data, L)
        log_det_M = 2.0 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(axis=1)
        Mk = None
        if noise is not None:
            k = noise[1]
            Mk = _cho_solve(L, np.broadcast_to(k, (len(s2), len(k)))[..., None])[..., 0]
    else:
        AtA, Atb, btb, log_det_M, Mk = terms
    log_prior_s2 = (-data.a * log_s2 - data.b / s2)  # InvGamma density times s2 (log grid)
    log_w, means, basis = _cells(data, s2, np.exp(log_r), AtA, Atb, btb, Mk, noise)
    log_w += (-0.5 * log_det_M + log_prior_s2)[:, None] \
        + trapezoid_log_weights(log_s2[None])[0][:, None] + trapezoid_log_weights(log_r[None])
    log_w -= special.logsumexp(log_w)
    w = np.exp(log_w)
    theta_mean = np.einsum("gh,ghd->d", w, means)
    return {"sigma_y2": s2, "scale": np.exp(log_r), "log_weight": log_w, "mean": means,
            "theta_mean": theta_mean, "basis": basis}


def trapezoid_log_weights(points):
    """Log weights of the trapezoidal rule on evenly spaced points (N, G), per row: the step,
    halved at the two ends. eiv's grid and :mod:`.selection`'s use it on both axes. The grid's
    ends are the prior's bounds (r = 1, sigma_y^2 = B_y^2) or points where the weight is e^-30
    of the largest; where the posterior of r piles up at r = 1, a full weight there (the
    rectangle rule) overstates the largest scale's mass and widens theta (by 6% in sd on
    tests/models/test_for_release.py's release, against NUTS on :func:`eiv_model`)."""
    points = np.asarray(points, dtype=float)
    w = np.ones(points.shape) * (points[:, 1:2] - points[:, 0:1] if points.shape[1] > 1 else 1.0)
    if points.shape[1] > 1:
        w[:, [0, -1]] *= 0.5
    return np.log(w)


def _release_pencil(data, theta0, s2, noise=None):
    """The release's terms of :func:`_release_terms` and log|M| for every sigma_y^2 in ``s2``
    (G,) from one factorisation of M = sigma_y^2 S_+ + N, N = Var(e_z - E theta0)
    (:class:`closed_form.PencilFactor`: M = T D T^T, D = diag(sigma_y^2 lam + 1)): with B =
    T^-1 S_hat and c = T^-1 z_hat, S_hat^T M^-1 S_hat = B^T D^-1 B, S_hat^T M^-1 z_hat = B^T
    D^-1 c, z_hat^T M^-1 z_hat = c^T D^-1 c; and M^-1 k for y^T y's noise k (None without
    y^T y). Returns (AtA (G, d, d), Atb (G, d), btb (G,), log|M| (G,), Mk (G, d) or None), or
    None when N is singular or some M is not positive definite."""
    factor = PencilFactor(data.S_plus[None], eiv_noise_covariance(data, theta0)[None])
    D = factor.scales(np.asarray(s2, dtype=float)) if factor.ok else None
    if D is None:
        return None
    D, W = D[:, 0], factor.Tinv_t[0]  # (G, d); W = T^-T
    B = W.T @ data.S_hat
    c = W.T @ data.z_hat
    Dinv = 1.0 / D
    AtA = np.matmul(B.T[None] * Dinv[:, None, :], B)
    Atb = (Dinv * c) @ B
    btb = (Dinv * c) @ c
    log_det_M = 2.0 * factor.half_log_det_N[0] + np.log(D).sum(axis=1)
    Mk = None if noise is None else (Dinv * (W.T @ noise[1])) @ W.T
    return AtA, Atb, btb, log_det_M, Mk


def _cells(data, s2, scale, AtA, Atb, btb, Mk, noise):
    """Each cell's log weight (less its -log|M| / 2 and sigma_y^2's prior) and theta's mean,
    (G, H) and (G, H, d), for the release's terms AtA (G, d, d), Atb (G, d), btb (G,) and the
    prior scales ``scale`` (H,); ``Mk`` and ``noise`` y^T y's M^-1 k and noise moments
    (None without y^T y).

    theta's precision in a cell is P = AtA + Pi_r, Pi_r = D_r^-1 C^-1 D_r^-1 (D_r = r on the
    slopes, 1 on an intercept). With C = Lc Lc^T and Lc^T AtA Lc = U diag(gam) U^T, V = Lc U
    makes V^T C^-1 V = I and V^T AtA V = diag(gam), so AtA + C^-1 / r^2 = V^-T diag(gam +
    r^-2) V^-1 for every r from one eigendecomposition per sigma_y^2. An intercept adds to
    C^-1 / r^2 the rank-2k term U K U^T / r^2 (U = [F, C^-1 F], F the k intercept columns of
    I, K = [[a^2 F^T C^-1 F, a I], [a I, 0]], a = r - 1: D_r^-1 = (I + a F F^T) / r), which
    the Woodbury identity carries: P^-1 = V (E - Y Z Y^T) V^T with E = diag(1 / (gam +
    r^-2)), Y = E V^T U, Z = (I + K/r^2 U^T V E V^T U)^-1 K / r^2, and log|P| = sum log(gam +
    r^-2) - log|C| + log|I + K/r^2 U^T V E V^T U|. The weight is that of eq. (12)'s Gaussian
    integral, -(log|D_r C D_r| + log|P| + quad) / 2, quad = b^T b + m^T Pi_r m - x^T P^-1 x,
    x = Atb + Pi_r m; with y^T y its factor (:func:`eiv_yty_moments_from`), whose traces of
    S_hat P^-1 are taken in the same basis."""
    G, d = Atb.shape
    basis = _basis(data, AtA)
    gam, V, Uh, Um = basis["gam"], basis["V"], basis["Uh"], basis["Um"]
    Vt = np.swapaxes(V, -1, -2)
    rho = np.einsum("gdi,gd->gi", V, Atb)  # V^T Atb
    phi = np.einsum("gdi,d->gi", V, basis["Pi"] @ data.m)  # V^T C^-1 m
    Um_m = Um.T @ data.m
    m_Pi_m = data.m @ basis["Pi"] @ data.m
    n_slopes = float(np.sum(data.slopes))
    yty = noise is not None
    if yty:
        S_v = Vt @ data.S_hat @ V  # S_hat in the basis V, (G, d, d)
        S_diag = np.diagonal(S_v, axis1=1, axis2=2)
        S_sq = S_v * S_v
    H = len(scale)
    log_w = np.empty((G, H))
    means = np.empty((G, H, d))
    for h, r in enumerate(np.asarray(scale, dtype=float)):
        K, e, Y, Z, log_det_P = _scale_terms(basis, r)
        x = rho + (phi + Uh @ (K @ Um_m)) / r ** 2
        y = e * x
        if Y is not None:
            y = y - (Y @ (Z @ (np.swapaxes(Y, 1, 2) @ x[..., None])))[..., 0]
        mu = (V @ y[..., None])[..., 0]
        m_Pi_r_m = (m_Pi_m + Um_m @ K @ Um_m) / r ** 2
        quad = btb + m_Pi_r_m - np.einsum("gi,gi->g", x, y)
        log_det_Cr = basis["log_det_C"] + 2.0 * n_slopes * np.log(r)
        log_w[:, h] = -0.5 * (log_det_Cr + log_det_P + quad)
        means[:, h] = mu
        if yty:
            tr_SC, tr_SC2, form = _cell_traces(S_v, S_diag, S_sq, e, Y, Z, V)
            mean, var = eiv_yty_moments_from(data, s2, mu, Mk, noise, tr_SC, tr_SC2, form)
            log_w[:, h] -= 0.5 * (np.log(var) + (data.yty_hat - mean) ** 2 / var)
    return log_w, means, basis


def _basis(data, AtA):
    """The basis of :func:`_cells` for the release's precisions AtA (G, d, d): with C = Lc
    Lc^T and Lc^T AtA Lc = U diag(gam) U^T, V = Lc U (G, d, d) and ``gam`` (G, d); ``Pi`` =
    C^-1, ``log_det_C``; the intercept's columns F (d, k), Um = [F, C^-1 F] (d, 2k), Uh = V^T
    Um (G, d, 2k) and Om = F^T C^-1 F."""
    d = AtA.shape[-1]
    Lc = linalg.cholesky(data.C, lower=True)
    Pi = linalg.cho_solve((Lc, True), np.eye(d))
    gam, U0 = np.linalg.eigh(Lc.T @ AtA @ Lc)
    V = Lc @ U0
    F = np.eye(d)[:, np.asarray(data.slopes) == 0]
    Um = np.concatenate([F, Pi @ F], axis=1)
    return {"gam": gam, "V": V, "Pi": Pi, "log_det_C": 2.0 * np.log(np.diag(Lc)).sum(),
            "F": F, "Um": Um, "Uh": np.swapaxes(V, -1, -2) @ Um, "Om": F.T @ Pi @ F}


def _scale_terms(basis, r):
    """theta's precision at prior scale r in the basis V of :func:`_basis`: V^T P V =
    diag(gam + r^-2) + Uh K Uh^T / r^2. Returns K (2k, 2k), e = 1 / (gam + r^-2) (G, d), the
    Woodbury terms Y (G, d, 2k) and Z (G, 2k, 2k) of (V^T P V)^-1 = E - Y Z Y^T (None without
    an intercept) and log|P| (G,)."""
    gam, Uh = basis["gam"], basis["Uh"]
    k = basis["F"].shape[1]
    a = r - 1.0
    K = np.block([[a * a * basis["Om"], a * np.eye(k)], [a * np.eye(k), np.zeros((k, k))]])
    e = 1.0 / (gam + 1.0 / r ** 2)
    log_det_P = np.log(gam + 1.0 / r ** 2).sum(axis=1) - basis["log_det_C"]
    if not k:
        return K, e, None, None, log_det_P
    Y = e[:, :, None] * Uh
    Ck = K / r ** 2
    I_CQ = np.eye(2 * k) + Ck @ (np.swapaxes(Uh, 1, 2) @ Y)
    Z = np.linalg.solve(I_CQ, np.broadcast_to(Ck, I_CQ.shape))
    return K, e, Y, Z, log_det_P + np.linalg.slogdet(I_CQ)[1]


def _cell_traces(S_v, S_diag, S_sq, e, Y, Z, V):
    """tr(S_hat P^-1), tr((S_hat P^-1)^2) and g -> g^T P^-1 g for P^-1 = V (E - Y Z Y^T) V^T
    (:func:`_cells`), from S_hat in the basis V (``S_v``, its diagonal and its entries
    squared): O(d^2) per cell, P^-1 never formed."""
    tr_SC = np.einsum("gi,gi->g", e, S_diag)
    tr_SC2 = np.einsum("gi,gij,gj->g", e, S_sq, e)
    if Y is not None:
        R = S_v @ Y  # (G, d, 2k)
        A = np.swapaxes(Y, 1, 2) @ R  # Y^T S_v Y
        AZ = A @ Z
        tr_SC = tr_SC - np.einsum("gii->g", AZ)
        RDR = np.swapaxes(R, 1, 2) @ (e[:, :, None] * R)  # R^T E R
        tr_SC2 = (tr_SC2 - 2.0 * np.einsum("gij,gji->g", RDR, Z)
                  + np.einsum("gij,gji->g", AZ, AZ))

    def form(g):
        gv = np.einsum("gdi,gd->gi", V, g)  # V^T g
        out = np.einsum("gi,gi->g", e, gv * gv)
        if Y is not None:
            yg = np.einsum("gdk,gd->gk", Y, gv)
            out = out - np.einsum("gk,gkl,gl->g", yg, Z, yg)
        return out

    return tr_SC, tr_SC2, form


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
    """Draws of (theta, sigma_y^2, r) from the mixture, ``shape`` = (chains, draws): a cell
    (sigma_y^2, r) by its weight, then theta from the cell's Gaussian N(mean, P^-1), P^-1 =
    V (V^T P V)^-1 V^T in the basis of the grid (:func:`_scale_terms`): V diag(e)^1/2 eps
    without an intercept, else V Lq^-T eps with Lq the Cholesky factor of V^T P V (d x d; no
    factor of P itself)."""
    G, H = post["log_weight"].shape
    n = int(np.prod(shape))
    w = np.exp(post["log_weight"]).ravel()
    cells = rng.choice(G * H, size=n, p=w / w.sum())
    basis = post["basis"]
    d = post["mean"].shape[-1]
    theta = np.empty((n, d))
    for c in np.unique(cells):
        g, h = divmod(int(c), H)
        at = np.flatnonzero(cells == c)
        eps = rng.standard_normal((len(at), d))
        theta[at] = post["mean"][g, h] + _cell_noise(basis, g, post["scale"][h], eps)
    g, h = np.divmod(cells, H)
    return (theta.reshape(*shape, d), post["sigma_y2"][g].reshape(shape),
            post["scale"][h].reshape(shape))


def _cell_noise(basis, g, r, eps):
    """N(0, P^-1) draws from standard normal ``eps`` (n, d), P the precision of the cell
    (sigma_y^2 grid point g, scale r) in :func:`draw`."""
    V, gam, Uh = basis["V"][g], basis["gam"][g], basis["Uh"][g]
    if not Uh.shape[1]:
        return (eps / np.sqrt(gam + 1.0 / r ** 2)) @ V.T
    K = _scale_terms({**basis, "gam": gam[None], "Uh": Uh[None]}, r)[0]
    Q = np.diag(gam + 1.0 / r ** 2) + Uh @ K @ Uh.T / r ** 2
    Lq = np.linalg.cholesky(0.5 * (Q + Q.T))
    return linalg.solve_triangular(Lq.T, eps.T, lower=False).T @ V.T


def mixture_moments(post):
    """The mixture's mean and sd per coefficient, exact: sum_c w_c mu_c and sqrt(sum_c w_c
    (diag(P_c^-1) + mu_c^2) - mean^2), with diag(P^-1) = (V o V) e - diag(V Y Z Y^T V^T) in
    the basis of the grid (:func:`_scale_terms`): O(d^2) per cell."""
    basis = post["basis"]
    V = basis["V"]
    V2 = V * V
    w = np.exp(post["log_weight"])
    w = w / w.sum()
    second = np.zeros(V.shape[-1])
    for h, r in enumerate(post["scale"]):
        _, e, Y, Z, _ = _scale_terms(basis, r)
        var = np.einsum("gij,gj->gi", V2, e)
        if Y is not None:
            VY = V @ Y
            var = var - np.einsum("gik,gkl,gil->gi", VY, Z, VY)
        second += w[:, h] @ (var + post["mean"][:, h] ** 2)
    mean = np.einsum("gh,ghd->d", w, post["mean"])
    return mean, np.sqrt(np.maximum(second - mean ** 2, 0.0))


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
