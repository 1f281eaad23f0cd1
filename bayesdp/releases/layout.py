"""The data layout of a release and its noise model (docs/release-format.md; paper eqs. 2-3).

Holder j releases the statistics of its rows as one vector, in this order:

    [vech(S_j), z_j, y_j^T y_j],    S_j = X_j^T X_j (d x d),  z_j = X_j^T y_j (d),

where vech(S) is the upper triangle of S including the diagonal, row by row
(``np.triu_indices(d)`` order, k = d(d+1)/2 entries). y^T y is released only for MCMC-B&S
(appendix C.1). Each statistic is the sum over the rows of the per-row vector
[vech(x x^T), x y, y^2] (:func:`row_stats`).

Noise model. The noise on [vech(S_hat_j), z_hat_j] is Gaussian with covariance

    diag(sigma_s_j^2 I_k, sigma_z_j^2 I_d)                (the Gaussian mechanism, eqs. 2-3)

or the release's general ``noise_cov`` (D x D, D = k + d; network adapters, docs/adapters/).
The noise on y^T y is independent, N(0, sigma_yty_j^2). :func:`noise_covariance` gives the
whole covariance, :func:`noise_blocks` its S and z blocks, and :func:`z_given_s_noise` the noise
of z_hat given S that the fixed-S methods use (section 4.2).

The index helpers work on NumPy and JAX arrays alike (indexing only, no assignment).
"""

from __future__ import annotations

import numpy as np

from ..errors import BayesdpInputError

S_NOISE = ("conditional", "eiv", "ignore")
"""The treatments of the S noise that :func:`z_given_s_noise` offers."""


# -- the layout --------------------------------------------------------------------------------


def vech_dim(d: int) -> int:
    """k = d(d+1)/2, the length of vech(S) for a d x d matrix S."""
    return d * (d + 1) // 2


def stat_dim(d: int, with_yty: bool = False) -> int:
    """D, the length of [vech(S), z] (d(d+1)/2 + d), plus one with y^T y."""
    return vech_dim(d) + d + int(bool(with_yty))


def vech(S):
    """vech(S) of (..., d, d): the upper triangle incl. diagonal, row-major, (..., k)."""
    if not hasattr(S, "shape"):
        S = np.asarray(S)
    iu = np.triu_indices(S.shape[-1])
    return S[..., iu[0], iu[1]]


def _symmetric_index(d):
    """(d, d) indices into vech: entry (a, b) and (b, a) of S is vech(S)[index[a, b]]."""
    iu = np.triu_indices(d)
    index = np.zeros((d, d), dtype=np.int64)
    index[iu] = np.arange(len(iu[0]))
    index[iu[1], iu[0]] = np.arange(len(iu[0]))
    return index


def unvech(v, d):
    """The symmetric (..., d, d) matrix S with vech(S) = v (..., k)."""
    return v[..., _symmetric_index(d)]


def stat_pairs(d: int, with_yty: bool = False):
    """Index pairs (p, q) into u = [x; y] such that the statistics are u_p u_q, in release
    order: vech(x x^T) (pairs a <= b), x y (pairs (a, d)), then y^2 (pair (d, d)) with
    ``with_yty``. Two int32 arrays of length :func:`stat_dim`."""
    iu = np.triu_indices(d)
    tail = [d] if with_yty else []
    p = np.concatenate([iu[0], np.arange(d), tail])
    q = np.concatenate([iu[1], np.full(d, d), tail])
    return p.astype(np.int32), q.astype(np.int32)


def row_stats(X, y, with_yty: bool = False):
    """Per-row statistics [vech(x x^T), x y (, y^2)] of rows X (..., d), y (...): (..., D)."""
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    U = np.concatenate([X, y[..., None]], axis=-1)
    p, q = stat_pairs(X.shape[-1], with_yty)
    return U[..., p] * U[..., q]


def pack_stats(S, z, last=None):
    """[vech(S), z] of S (..., d, d) and z (..., d), and one more entry per vector when ``last``
    (...) is given (y^T y in a release; PriCER packs the row count there): (..., D)."""
    parts = [vech(np.asarray(S, dtype=float)), np.asarray(z, dtype=float)]
    if last is not None:
        parts.append(np.asarray(last, dtype=float)[..., None])
    return np.concatenate(parts, axis=-1)


def unpack_stats(v, d):
    """Inverse of :func:`pack_stats`: (S (..., d, d) symmetric, z (..., d), rest (..., m)), rest
    being the entries after z (y^T y, or nothing)."""
    k = vech_dim(d)
    return unvech(v[..., :k], d), v[..., k:k + d], v[..., k + d:]


# -- the noise model ---------------------------------------------------------------------------


def noise_blocks(release):
    """The noise covariance over [vech(S), z] split into its blocks: Sigma_SS (J, k, k),
    Sigma_Sz (J, k, d), Sigma_zz (J, d, d). For eqs. (2)-(3): sigma_s^2 I, 0, sigma_z^2 I;
    otherwise the blocks of the release's ``noise_cov``."""
    d, J = release.d, release.J
    k = vech_dim(d)
    if release.noise_cov is not None:
        c = release.noise_cov
        return c[:, :k, :k], c[:, :k, k:], c[:, k:, k:]
    return (release.sigma_s[:, None, None] ** 2 * np.eye(k), np.zeros((J, k, d)),
            release.sigma_z[:, None, None] ** 2 * np.eye(d))


def noise_covariance(release, with_yty: bool = False):
    """The whole noise covariance of [vech(S_hat_j), z_hat_j (, yty_hat_j)] per holder, (J, D, D):
    the blocks of :func:`noise_blocks`, and sigma_yty^2 for y^T y (independent of the rest)."""
    d, J = release.d, release.J
    k = vech_dim(d)
    SS, Sz, zz = noise_blocks(release)
    V = np.zeros((J, stat_dim(d, with_yty), stat_dim(d, with_yty)))
    V[:, :k, :k] = SS
    V[:, :k, k:k + d] = Sz
    V[:, k:k + d, :k] = np.swapaxes(Sz, 1, 2)
    V[:, k:k + d, k:k + d] = zz
    if with_yty:
        V[:, -1, -1] = release.sigma_yty**2
    return V


def z_noise_covariances(release):
    """Per-holder marginal covariance of the noise on z_hat, (J, d, d): sigma_z^2 I, or the z block
    of ``noise_cov``. When the S and z noise are correlated (a ``noise_cov`` with a nonzero S-z
    block) models should use :func:`z_given_s_noise` instead."""
    return noise_blocks(release)[2]


def vech_product_matrix(theta):
    """B (d, k) with B vech(E) = E theta for every symmetric E: the S noise pushed through
    theta."""
    theta = np.asarray(theta, dtype=float)
    return vech_product_tensor(theta.shape[0]) @ theta


def vech_product_tensor(d):
    """Constant (d, k, d) array P with ``P @ theta == vech_product_matrix(theta)``; lets a JAX model
    build B(theta) = P @ theta and the eiv covariance
    ``Sigma_zz - B Sigma_Sz - Sigma_zS B^T + B Sigma_SS B^T`` with array operations only."""
    iu = np.triu_indices(d)
    P = np.zeros((d, len(iu[0]), d))
    for idx, (a, b) in enumerate(zip(*iu)):
        P[a, idx, b] += 1.0
        if a != b:
            P[b, idx, a] += 1.0
    return P


def eiv_covariance(Sigma_SS, Sigma_Sz, Sigma_zz, theta, P=None, xp=np):
    """Covariance of e_z - E_S theta (the S noise pushed through theta), for one holder or a
    stack (..., k, k), (..., k, d), (..., d, d). ``xp`` may be ``jax.numpy``; pass
    ``P = vech_product_tensor(d)`` to avoid rebuilding it."""
    d = Sigma_zz.shape[-1]
    P = vech_product_tensor(d) if P is None else P
    B = xp.einsum("aki,i->ak", xp.asarray(P), theta)
    BSz = xp.einsum("ak,...kd->...ad", B, Sigma_Sz)
    V = (Sigma_zz - BSz - xp.swapaxes(BSz, -1, -2)
         + xp.einsum("ak,...kl,bl->...ab", B, Sigma_SS, B))
    return 0.5 * (V + xp.swapaxes(V, -1, -2))


def _pinv_psd(M, rtol=1e-12):
    w, E = np.linalg.eigh(0.5 * (M + M.T))
    keep = w > rtol * max(float(w.max()), 0.0)
    inv = np.where(keep, 1.0 / np.where(keep, w, 1.0), 0.0)
    return (E * inv) @ E.T


def z_given_s_noise(release, S=None, *, s_noise="conditional", theta=None):
    """Noise model of z_hat given the fixed S, for Bayes-fixedS-fast and MCMC-fixedS.

    Returns ``(shift, Sigma)``, (J, d) and (J, d, d), such that the model is

        z_hat_j | S_j, theta, sigma_y^2 ~ N(S_j theta + shift_j, sigma_y^2 S_j + Sigma_j).

    With noise e = [e_S, e_z] ~ N(0, [[Sigma_SS, Sigma_Sz], [Sigma_zS, Sigma_zz]]) on
    [vech(S_hat), z_hat]:

    - ``"conditional"`` (default): the exact Gaussian conditional of e_z given
      e_S = vech(S_hat - S): shift = Sigma_zS Sigma_SS^+ vech(S_hat - S),
      Sigma = Sigma_zz - Sigma_zS Sigma_SS^+ Sigma_Sz. With S latent this is the exact likelihood
      factor; with S fixed at the nearest PSD of S_hat (the paper's fixed-S plug-in) the shift is
      zero unless eigenvalues were clipped. For the iid design (Sigma_Sz = 0) it is exactly the
      paper's (0, sigma_z^2 I).
    - ``"eiv"`` (errors in variables): the covariance of the pivot z_hat - S_hat theta given
      theta, S, sigma_y^2 with the S noise pushed through a plug-in ``theta`` (required):
      Sigma = Sigma_zz - B Sigma_Sz - Sigma_zS B^T + B Sigma_SS B^T, B vech(E) = E theta; shift 0.
      Use it when |theta| is large relative to sigma_z/sigma_s (e.g. the gossip paper's
      theta0 = 4096, docs/adapters/gossip.md), where ignoring the S noise under-covers.
    - ``"ignore"``: the marginal Sigma_zz, no shift (drops the S-z correlation; a control).
    """
    if s_noise not in S_NOISE:
        raise BayesdpInputError(f"s_noise must be one of {S_NOISE}, got {s_noise!r}")
    SS, Sz, zz = noise_blocks(release)
    J, d = release.J, release.d
    shift = np.zeros((J, d))
    if s_noise == "ignore":
        return shift, zz.copy()
    if s_noise == "eiv":
        if theta is None:
            raise BayesdpInputError("theta: s_noise='eiv' needs a plug-in theta")
        return shift, eiv_covariance(SS, Sz, zz, np.asarray(theta, dtype=float))
    if release.noise_cov is None:  # iid design: Sigma_Sz = 0, identical to the paper
        return shift, zz.copy()
    S = release.S_hat if S is None else np.asarray(S, dtype=float)
    resid = vech(release.S_hat - S)
    out = np.empty_like(zz)
    for j in range(J):
        G = Sz[j].T @ _pinv_psd(SS[j])  # (d, k) regression of e_z on e_S
        shift[j] = G @ resid[j]
        V = zz[j] - G @ Sz[j]
        out[j] = 0.5 * (V + V.T)
    return shift, out
