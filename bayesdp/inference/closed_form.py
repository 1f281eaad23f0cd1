"""Closed-form posteriors: Bayes-fixedS-fast (Algorithm 3) and the non-private conjugate posterior.

Bayes-fixedS-fast fixes S_j at the nearest PSD matrix to S_hat_j (section 4.2, Higham 1988) and
sigma_y^2 at a plug-in value s2, so theta | z_hat is Gaussian (eq. 12 with S_j fixed):

    Sigma_post^{-1} = C^{-1} + sum_j S_j (s2 S_j + sigma_z^2 I)^{-1} S_j
    m_post          = Sigma_post (C^{-1} m + sum_j S_j (s2 S_j + sigma_z^2 I)^{-1} z_hat_j)

The paper's plug-in is sigma_y = B_y / 3 (s2 = (B_y/3)^2); the authors' code uses B_y / 3 as the
variance (``sigma_y_rule="paper-code"``).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..errors import BayesdpInputError
from ..releases.layout import S_NOISE, z_given_s_noise
from ..releases.layout import z_noise_covariances  # noqa: F401 (read from here by starts.py)

# scipy and JAX are imported inside the functions that use them (slow to import): importing
# bayesdp.inference, as `bayesdp --help` does, loads neither

_SIGMA_Y_RULES = ("paper", "paper-code")


class PencilFactor:
    """The covariances sigma_y^2 S_j + N_j (a stack over j, (..., d, d)) for every sigma_y^2
    from one factorisation each: with N_j = L L^T and L^-1 S_j L^-T = Q diag(lam) Q^T,

        sigma_y^2 S_j + N_j = T diag(sigma_y^2 lam + 1) T^T,   T = L Q,   T^-T = L^-T Q,

    so a Gaussian with that covariance costs one product with T^-T (d^2) per sigma_y^2, not a
    factorisation (d^3): the z_hat sites of fast, fixeds and eiv (log_likelihood.py), eiv's
    M = sigma_y^2 S_+ + Var(e_z - E t) on its grid (eiv.py). A log density is
    -|D^-1/2 T^-1 r|^2 / 2 - log|L| - sum log(sigma_y^2 lam + 1) / 2 - d log(2 pi) / 2, D =
    diag(sigma_y^2 lam + 1), and a new draw is loc + T D^1/2 eps. ``ok`` is False when some
    N_j is not positive definite (no noise on z), and the caller factors each covariance."""

    def __init__(self, S, N):
        S = 0.5 * (S + np.swapaxes(S, -1, -2))
        N = 0.5 * (N + np.swapaxes(N, -1, -2))
        try:
            L = np.linalg.cholesky(N)
        except np.linalg.LinAlgError:
            self.ok = False
            return
        A = np.linalg.solve(L, np.linalg.solve(L, S).swapaxes(-1, -2))  # L^-1 S L^-T
        self.lam, Q = np.linalg.eigh(0.5 * (A + np.swapaxes(A, -1, -2)))
        self.T = L @ Q
        self.Tinv_t = np.linalg.solve(np.swapaxes(L, -1, -2), Q)  # T^-T = L^-T Q
        self.half_log_det_N = np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(-1)
        self.ok = bool(np.all(np.isfinite(self.lam)))

    def scales(self, s2):
        """D = sigma_y^2 lam + 1 (n, J, d) for draws ``s2`` (n,); None when some is not > 0
        (a covariance that is not positive definite)."""
        s2 = np.asarray(s2, dtype=np.float64)
        low = self.lam.min(axis=-1)  # the smallest of sigma_y^2 lam + 1 is at the smallest lam
        if np.any(s2[:, None] * low[None] + 1.0
                  <= 1e-12 * np.maximum(1.0, s2[:, None] * np.abs(low)[None])):
            return None
        return s2[:, None, None] * self.lam[None] + 1.0


def nearest_psd(S):
    """Nearest symmetric PSD matrix in Frobenius norm: clip negative eigenvalues (Higham 1988).

    Works on one (d, d) matrix or a stack (J, d, d), of NumPy values or of JAX arrays (also
    inside traced code, e.g. the MCMC-B&S sweep). In NumPy a matrix with a Cholesky factor
    (positive definite: nothing to clip) is returned as it is, symmetrised; only the others are
    decomposed.
    """
    if type(S).__module__.startswith("jax"):
        import jax.numpy as jnp

        S = 0.5 * (S + jnp.swapaxes(S, -1, -2))
        w, E = jnp.linalg.eigh(S)
        return jnp.einsum("...ik,...k,...jk->...ij", E, jnp.maximum(w, 0.0), E)
    S = np.asarray(S, dtype=float)
    S = 0.5 * (S + np.swapaxes(S, -1, -2))
    flat = S.reshape(-1, *S.shape[-2:])
    out = flat.copy()
    for j, Sj in enumerate(flat):  # positive definite (a Cholesky factor exists): itself
        try:
            np.linalg.cholesky(Sj)
        except np.linalg.LinAlgError:
            w, E = np.linalg.eigh(Sj)
            out[j] = (E * np.maximum(w, 0.0)) @ E.T
    return out.reshape(S.shape)


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
    raise BayesdpInputError(f"sigma_y_rule must be one of {_SIGMA_Y_RULES}, got {rule!r}")


def require_wishart_valid(release, method):
    """Refuse a method that assumes S_j ~ Wishart(Sigma_x, n_j) (normalX) where the release says the
    assumption does not hold, and warn where it holds only approximately.

    Network adapters set ``provenance["wishart_S"]``: ``False`` (PriCER's random reweighting, the
    gossip ratio estimator) raises; ``"approximate"`` (Papachristou & Rahimian's linear consensus,
    IISE Transactions 2024: Wishart in its first two moments only) warns. Releases without the
    key (the Gaussian mechanism of eqs. (2)-(3)) pass.
    """
    prov = release.provenance or {}
    flag = prov.get("wishart_S", True)
    where = (f"{prov.get('protocol', 'adapted source')}: "
             f"{prov.get('wishart_note', 'provenance.wishart_S = ' + repr(flag))}")
    if flag is False:
        raise BayesdpInputError(
            f"method {method!r} assumes S_j ~ Wishart(Sigma_x, n_j), which does not hold for this "
            f"release ({where}); use 'fast', 'fixeds' or 'nuts-fixeds'")
    if flag == "approximate":
        warnings.warn(
            f"method {method!r} assumes S_j ~ Wishart(Sigma_x, n_j), which holds only "
            f"approximately for this release ({where})", UserWarning, stacklevel=3)


_DEGENERATE_RTOL = 1e-13
"""Eigenvalues of sigma_y^2 S_j + Sigma_j below _DEGENERATE_RTOL times the largest are null
directions of the z_hat likelihood (see :func:`complete_degenerate_noise`): a few hundred times
float64 rounding, so only matrices whose Cholesky factor would be meaningless are completed
(e.g. diag(1e13, 5), condition 2e12, is left alone and keeps its information)."""


def complete_degenerate_noise(S, z_centred, sigma_y2, Sigma_z):
    """Make the z_hat likelihood N(S_j theta, sigma_y^2 S_j + Sigma_j) usable when its
    covariance is singular, without changing the posterior.

    With no noise on z (sigma_z = 0, or a ``noise_cov`` without z noise) and a singular S_j
    (n_j < d, a constant or duplicated column, an eigenvalue clipped by the nearest-PSD
    projection) the covariance K_j = sigma_y^2 S_j + Sigma_j is singular; its Cholesky factor
    fails (NaN entries, so NaN draws). Its null space N is the common null
    space of S_j and Sigma_j (both PSD), so it does not depend on sigma_y^2, and along N the
    mean S_j theta is zero. The Gaussian is then a degenerate one, supported on z_hat with
    N^T z_hat = 0; the likelihood of theta and sigma_y^2 is that of the range of K_j alone.
    Adding c N N^T (c > 0) to Sigma_j makes K_j invertible and multiplies the likelihood by the
    constant N(N^T z_hat; 0, c I), so every posterior is unchanged (exact, not a jitter).

    ``z_centred`` is z_hat minus any shift; ``sigma_y2`` a typical value (the null space is
    found from sigma_y2 S_j + Sigma_j with a relative tolerance _DEGENERATE_RTOL). If z_hat has
    a component along N the release is inconsistent with its stated noise (the model gives it
    probability zero): a :class:`BayesdpInputError` names the holder. Returns the (J, d, d)
    completed covariances (a copy; unchanged where K_j is regular)."""
    S = np.asarray(S, dtype=float)
    Sigma = np.array(Sigma_z, dtype=float, copy=True)
    z = np.asarray(z_centred, dtype=float)
    for j in np.flatnonzero(~_surely_regular(S, float(sigma_y2), Sigma)):
        K = float(sigma_y2) * S[j] + Sigma[j]
        w, E = np.linalg.eigh(0.5 * (K + K.T))
        top = float(np.max(np.abs(w)))
        if top == 0.0:
            top = 1.0
        null = w <= _DEGENERATE_RTOL * top
        if not null.any():
            continue
        N = E[:, null]
        outside = float(np.linalg.norm(N.T @ z[j]))
        if outside > 1e-8 * max(float(np.linalg.norm(z[j])), np.finfo(float).tiny):
            raise BayesdpInputError(
                f"release: holder {j}'s z_hat has a component ({outside:.3g}) outside the range "
                f"of its S_j and z-noise covariance, which the stated noise makes impossible "
                f"(sigma_z = 0 with a singular S_hat whose z_hat is noisy or inconsistent?); "
                f"check sigma_s / sigma_z of this release")
        Sigma[j] = Sigma[j] + top * (N @ N.T)
    return Sigma


def _surely_regular(S, sigma_y2, Sigma):
    """(J,) True where sigma_y^2 S_j + Sigma_j has no eigenvalue below _DEGENERATE_RTOL times
    its largest, known without an eigendecomposition: Sigma_j is diagonal (the Gaussian
    mechanism's sigma_z^2 I) and its smallest entry exceeds _DEGENERATE_RTOL times the trace
    of K_j (the smallest eigenvalue of K_j is at least Sigma_j's, S_j being PSD; the largest at
    most the trace). False means "look", not "degenerate"."""
    diag = np.diagonal(Sigma, axis1=-2, axis2=-1)
    off = np.count_nonzero(Sigma * (1.0 - np.eye(Sigma.shape[-1])), axis=(-2, -1))
    trace = sigma_y2 * np.trace(S, axis1=-2, axis2=-1) + diag.sum(axis=1)
    return (off == 0) & (diag.min(axis=1) > _DEGENERATE_RTOL * trace)


def gaussian_theta_posterior(S, z_hat, sigma_y2, Sigma_z, m, C):
    """Moments of theta | S, sigma_y^2, z_hat (eq. 12), by Cholesky solves.

    S (J, d, d) PSD, z_hat (J, d), Sigma_z (J, d, d) noise covariances of z_hat. A singular
    sigma_y^2 S_j + Sigma_j (no z noise, singular S_j) is completed exactly by
    :func:`complete_degenerate_noise`. Returns (mean, cov, precision).
    """
    from scipy import linalg

    d = S.shape[-1]
    S = np.asarray(S, dtype=float)
    Sigma_z = complete_degenerate_noise(S, z_hat, sigma_y2, Sigma_z)
    C_chol = linalg.cho_factor(C, lower=True)
    K = np.linalg.cholesky(sigma_y2 * S + Sigma_z)  # (J, d, d), one factor per holder
    A = linalg.solve_triangular(K, S, lower=True)  # K_j^-1 S_j
    b = linalg.solve_triangular(K, np.asarray(z_hat, dtype=float)[..., None], lower=True)
    A2 = A.reshape(-1, d)  # the K_j^-1 S_j stacked
    P = linalg.cho_solve(C_chol, np.eye(d)) + A2.T @ A2  # sum_j S_j (K_j K_j^T)^-1 S_j
    h = linalg.cho_solve(C_chol, m) + A2.T @ b.reshape(-1)
    P = 0.5 * (P + P.T)
    P_chol = linalg.cho_factor(P, lower=True)
    mean = linalg.cho_solve(P_chol, h)
    cov = linalg.cho_solve(P_chol, np.eye(d))
    return mean, 0.5 * (cov + cov.T), P


def fast_posterior(release, priors, *, sigma_y2=None, sigma_y_rule="paper", fixed_s="psd",
                   s_noise=None, eiv_iterations=500, eiv_rtol=1e-10):
    """Bayes-fixedS-fast (Algorithm 3): Gaussian posterior moments of theta.

    ``fixed_s`` is "psd" (nearest PSD, the paper) or "psd+I" (the authors' MCMC-fixedS variant).
    ``s_noise`` is the treatment of the noise on S (see :func:`z_given_s_noise`). ``None`` takes the
    release's recommendation ``provenance["s_noise"]`` (network adapters set "eiv") and otherwise
    "conditional", which for iid releases is exactly the paper's model. "eiv" is a fixed point:
    the covariance is evaluated at theta and theta is set to the posterior mean, damped
    (:func:`_eiv_fixed_point`), from the prior mean until the mean changes by less than
    ``eiv_rtol`` (relative); a warning says when ``eiv_iterations`` passes were not enough.
    Returns a dict with mean, cov, sigma_y2, the fixed S, the s_noise used, and each
    coefficient's ``prior_share`` of its variance (:func:`prior_variance_split`).
    """
    sigma_y2, s_noise, S = fast_inputs(release, sigma_y2, sigma_y_rule, fixed_s, s_noise)
    if s_noise != "eiv":
        shift, Sig = z_given_s_noise(release, S, s_noise=s_noise)
        mean, cov, _ = gaussian_theta_posterior(
            S, release.z_hat - shift, float(sigma_y2), Sig, priors.m, priors.C
        )
    else:
        mean, cov = _eiv_fixed_point(release, S, float(sigma_y2), priors, eiv_iterations, eiv_rtol)
    return {"mean": mean, "cov": cov, "sigma_y2": float(sigma_y2), "S": S, "s_noise": s_noise,
            "prior_share": gaussian_prior_share(cov, priors.C)}


def prior_variance_split(V, Pi):
    """Each coefficient's posterior variance split by where it comes from (eq. 12): with the
    posterior precision P = A + Pi (A the release's, Pi the prior's) and V = P^-1,

        V = V A V + V Pi V,

    two PSD terms, so diag(V Pi V) <= diag(V). Returns ``(diag(V Pi V), diag(V))``, batched over
    the leading axes of ``V`` and ``Pi`` (..., d, d). Their ratio in [0, 1] is the share of the
    variance the prior supplies: near 0 the release determines the coefficient; near 1 the
    release says almost nothing about it and its interval is the prior's."""
    return np.einsum("...ij,...ji->...i", V @ Pi, V), np.diagonal(V, axis1=-2, axis2=-1).copy()


def gaussian_prior_share(cov, C):
    """Each coefficient's share of its variance in the Gaussian posterior ``cov`` that the
    prior N(m, C) supplies: diag(V C^-1 V) / diag(V) (:func:`prior_variance_split`)."""
    from scipy import linalg

    num, den = prior_variance_split(cov, linalg.cho_solve(linalg.cho_factor(C, lower=True),
                                                          np.eye(len(C))))
    return num / den


def fast_inputs(release, sigma_y2=None, sigma_y_rule="paper", fixed_s="psd", s_noise=None):
    """The checked options of :func:`fast_posterior`: ``(sigma_y2, s_noise, S)`` with the
    plug-in sigma_y^2 when none is given, the s_noise used, and the fixed S_j."""
    if sigma_y2 is None:
        sigma_y2 = plugin_sigma_y2(release, sigma_y_rule)
    elif not float(sigma_y2) > 0:
        raise BayesdpInputError(f"sigma_y2 must be > 0, got {sigma_y2}")
    if s_noise is None:
        s_noise = (release.provenance or {}).get("s_noise", "conditional")
    if s_noise not in S_NOISE:
        raise BayesdpInputError(f"s_noise must be one of {S_NOISE}, got {s_noise!r}")
    return float(sigma_y2), s_noise, fixed_s_estimate(release, fixed_s)


def _eiv_fixed_point(release, S, sigma_y2, priors, iterations, rtol):
    """Solve theta = mean(theta): the posterior mean with the eiv covariance evaluated at theta.

    Plain iteration can oscillate (a 2-cycle) when the S noise pushed through theta is large, so
    the step is damped: halved whenever the residual |mean - theta| grows, or flips direction
    without at least halving (a 2-cycle that neither grows nor decays, which a test on growth
    alone never damps). Warns when it has not converged after ``iterations`` passes."""
    theta = np.asarray(priors.m, dtype=float)
    w, prev, prev_step = 1.0, np.inf, None
    for _ in range(max(1, int(iterations))):
        _, Sig = z_given_s_noise(release, S, s_noise="eiv", theta=theta)
        mean, cov, _ = gaussian_theta_posterior(S, release.z_hat, sigma_y2, Sig, priors.m, priors.C)
        step = mean - theta
        res = float(np.max(np.abs(step)))
        if res <= rtol * max(1.0, float(np.max(np.abs(mean)))):
            return mean, cov
        flipped = prev_step is not None and float(step @ prev_step) < 0
        if res >= prev or (flipped and res > 0.5 * prev):
            w = max(0.5 * w, 1.0 / 1024)
        prev, prev_step = res, step
        theta = theta + w * step
    warnings.warn(f"s_noise='eiv': the fixed point theta = E[theta | z_hat; Sigma(theta)] did not "
                  f"converge in {iterations} iterations (last change {res:.3g}); the posterior "
                  "is evaluated at the last iterate", RuntimeWarning, stacklevel=3)
    return mean, cov


def interval_coverage(mean, sd, ref_mean, ref_sd, level=0.9):
    """Probability, per coefficient, that the equal-tailed ``level`` interval of N(mean, sd^2)
    holds theta when theta ~ N(ref_mean, ref_sd^2):
    Phi((z sd - delta) / ref_sd) - Phi((-z sd - delta) / ref_sd), delta = ref_mean - mean,
    z = Phi^{-1}((1 + level) / 2). The fixedS methods' calibration check uses it with the "eiv"
    posterior as the reference (:func:`bayesdp.inference.fit.check_s_noise`)."""
    from scipy.stats import norm

    z = norm.ppf(0.5 * (1.0 + level))
    mean, sd, ref_mean, ref_sd = (np.asarray(v, dtype=float) for v in (mean, sd, ref_mean,
                                                                        ref_sd))
    delta = ref_mean - mean
    ref_sd = np.maximum(ref_sd, np.finfo(float).tiny)
    return norm.cdf((z * sd - delta) / ref_sd) - norm.cdf((-z * sd - delta) / ref_sd)


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
    theta | sigma^2 ~ N(m, sigma^2 Lambda_0^{-1}), Lambda_0 = b/(a-1) I_d for the paper's
    priors (:func:`nig_precision`). Posterior:
    Lambda_n = X^T X + Lambda_0, mu_n = Lambda_n^{-1}(X^T y + Lambda_0 m), a_n = a + n/2,
    b_n = b + (y^T y + m^T Lambda_0 m - mu_n^T Lambda_n mu_n) / 2.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    return _nig_posterior(X.T @ X, X.T @ y, float(y @ y), X.shape[0], priors, Lambda0)


def nig_precision(priors):
    """Lambda_0 of the NIG reference (:meth:`Priors.nig_precision`): b/(a-1) I for the paper's
    priors, as in the authors' code (docs/methods.md, "Priors"); sigma_med^2 C^{-1} otherwise."""
    return priors.nig_precision()


def _nig_posterior(S, z, yty, n, priors, Lambda0=None):
    """NIG posterior parameters from sufficient statistics (S = X^T X, z = X^T y, yty, n)."""
    from scipy import linalg

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
    from scipy import linalg

    sigma2 = post["b_n"] / rng.gamma(post["a_n"], 1.0, size=shape)
    Linv = linalg.cho_solve(linalg.cho_factor(post["Lambda_n"], lower=True), np.eye(len(post["mean"])))
    L = np.linalg.cholesky(0.5 * (Linv + Linv.T))
    eps = rng.standard_normal((*shape, len(post["mean"])))
    theta = post["mean"] + np.sqrt(sigma2)[..., None] * (eps @ L.T)
    return theta, sigma2
