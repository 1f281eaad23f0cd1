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

Memory. k grows as d^2 (20,100 at d = 200), so a k x k matrix (3.2 GB at d = 200) or a
d x k x d array must never be made for the iid design: :func:`noise_blocks` keeps its Sigma_SS
as the diagonal (:class:`NoiseBlocks`), :func:`eiv_covariance` pushes it through theta in
O(d^2), and B(theta) is a gather (:func:`vech_product_matrix`). Only a general ``noise_cov``
(itself J x D x D) and the dense forms (:meth:`NoiseBlocks.dense`, :func:`noise_covariance`,
:func:`vech_product_tensor`) are quadratic in k; the latter refuse above
:data:`_DENSE_NOISE_MAX_BYTES`.

The index helpers work on NumPy and JAX arrays alike (indexing only, no assignment).
"""

from __future__ import annotations

from typing import NamedTuple, Optional

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


_DENSE_NOISE_MAX_BYTES = 2**30
"""Largest array (bytes) that the dense forms of the noise model may make: a k x k or D x D noise
covariance (:meth:`NoiseBlocks.dense`, :func:`noise_covariance`) or the d x k x d
:func:`vech_product_tensor`. 1 GiB holds one k x k matrix up to d = 151 (k = 11,476); at
d = 200 (k = 20,100) one k x k matrix is 3.2 GB and the d x k x d tensor 6.5 GB, and whoever
uses them (an eigendecomposition, MCMC-B&S's model) needs several. The fixed-S methods never
need them for the iid design (:class:`NoiseBlocks` keeps Sigma_SS as its diagonal); beyond this
size the dense forms raise a :class:`BayesdpInputError` naming d instead of exhausting the
memory."""


def _check_dense_size(what, shape, d, need=""):
    """Raise a :class:`BayesdpInputError` naming d when an array of ``shape`` (float64) would
    exceed :data:`_DENSE_NOISE_MAX_BYTES`."""
    size = 8 * int(np.prod([int(s) for s in shape], dtype=object))
    if size > _DENSE_NOISE_MAX_BYTES:
        raise BayesdpInputError(
            f"{what} of a release with d = {d} features is an array of shape {tuple(shape)} "
            f"({size / 1e9:.3g} GB), above the limit of {_DENSE_NOISE_MAX_BYTES / 1e9:.3g} GB "
            f"(bayesdp.releases.layout.DENSE_NOISE_MAX_BYTES){need}")


class NoiseBlocks(NamedTuple):
    """The noise covariance over [vech(S), z] of each holder, split into its blocks, in
    structured form (k = d(d+1)/2):

    - ``SS``: Sigma_SS. When ``diagonal`` (the iid design of eqs. (2)-(3): sigma_s^2 I_k) only
      its diagonal, (J, k); otherwise dense, (J, k, k) (a ``noise_cov``).
    - ``Sz``: Sigma_Sz (J, k, d), or None when it is zero (the iid design).
    - ``zz``: Sigma_zz (J, d, d).

    The iid design therefore takes O(J k) memory, never k x k (3.2 GB at d = 200); use
    :meth:`dense` for the dense (J, k, k), (J, k, d), (J, d, d) blocks (small d only)."""

    SS: np.ndarray
    Sz: Optional[np.ndarray]
    zz: np.ndarray
    diagonal: bool

    def dense(self):
        """``(Sigma_SS (J, k, k), Sigma_Sz (J, k, d), Sigma_zz (J, d, d))`` as dense arrays;
        a :class:`BayesdpInputError` when k x k exceeds :data:`_DENSE_NOISE_MAX_BYTES`."""
        J, d = self.zz.shape[0], self.zz.shape[-1]
        k = vech_dim(d)
        if self.diagonal:
            _check_dense_size("the dense S-noise covariance Sigma_SS", (J, k, k), d)
            SS = np.zeros((J, k, k))
            SS[:, np.arange(k), np.arange(k)] = self.SS
        else:
            SS = self.SS
        Sz = np.zeros((J, k, d)) if self.Sz is None else self.Sz
        return SS, Sz, self.zz


def noise_blocks(release) -> NoiseBlocks:
    """The noise covariance over [vech(S), z] split into its blocks (:class:`NoiseBlocks`).
    For eqs. (2)-(3): Sigma_SS = sigma_s^2 I_k kept as its diagonal (J, k), Sigma_Sz = 0 (None),
    Sigma_zz = sigma_z^2 I_d; otherwise the dense blocks of the release's ``noise_cov``."""
    d, J = release.d, release.J
    k = vech_dim(d)
    if release.noise_cov is not None:
        c = release.noise_cov
        return NoiseBlocks(c[:, :k, :k], c[:, :k, k:], c[:, k:, k:], False)
    return NoiseBlocks(np.broadcast_to((release.sigma_s ** 2)[:, None], (J, k)).copy(), None,
                       release.sigma_z[:, None, None] ** 2 * np.eye(d), True)


def noise_covariance(release, with_yty: bool = False):
    """The whole noise covariance of [vech(S_hat_j), z_hat_j (, yty_hat_j)] per holder, (J, D, D):
    the blocks of :func:`noise_blocks`, and sigma_yty^2 for y^T y (independent of the rest).

    Dense by nature (MCMC-B&S's model of the statistics is over all D of them); a
    :class:`BayesdpInputError` naming d when (J, D, D) exceeds :data:`_DENSE_NOISE_MAX_BYTES`."""
    d, J = release.d, release.J
    k = vech_dim(d)
    D = stat_dim(d, with_yty)
    _check_dense_size("the dense noise covariance over [vech(S), z" + (", y^T y]" if with_yty
                      else "]"), (J, D, D), d,
                      "; a method that models all the statistics jointly (MCMC-B&S, method "
                      "'bs') cannot fit it - use 'fast' or 'fixeds'")
    blocks = noise_blocks(release)
    V = np.zeros((J, D, D))
    if blocks.diagonal:
        V[:, np.arange(k), np.arange(k)] = blocks.SS
    else:
        V[:, :k, :k] = blocks.SS
    if blocks.Sz is not None:
        V[:, :k, k:k + d] = blocks.Sz
        V[:, k:k + d, :k] = np.swapaxes(blocks.Sz, 1, 2)
    V[:, k:k + d, k:k + d] = blocks.zz
    if with_yty:
        V[:, -1, -1] = release.sigma_yty**2
    return V


def z_noise_covariances(release):
    """Per-holder marginal covariance of the noise on z_hat, (J, d, d): sigma_z^2 I, or the z block
    of ``noise_cov``. When the S and z noise are correlated (a ``noise_cov`` with a nonzero S-z
    block) models should use :func:`z_given_s_noise` instead."""
    return noise_blocks(release).zz


def _vech_product_index(d):
    """``(index, mask)``, both (d, k): B(theta)[a, p] = theta[index[a, p]] where mask[a, p], else
    0, for the (d, k) matrix B of :func:`vech_product_matrix`. Column p of B is the pair
    (a, b) = ``np.triu_indices(d)``[p]: theta_b in row a and, off the diagonal, theta_a in row
    b (E theta picks E_ab theta_b for row a and E_ba theta_a for row b). O(d k) memory."""
    ia, ib = np.triu_indices(d)
    k = len(ia)
    cols = np.arange(k)
    index = np.zeros((d, k), dtype=np.int64)
    mask = np.zeros((d, k), dtype=bool)
    index[ia, cols], mask[ia, cols] = ib, True
    off = ia != ib
    index[ib[off], cols[off]], mask[ib[off], cols[off]] = ia[off], True
    return index, mask


def _vech_product(theta, xp=np):
    """B(theta) (d, k) by a gather (NumPy or JAX ``xp``): no (d, k, d) tensor."""
    index, mask = _vech_product_index(theta.shape[-1])
    return xp.where(xp.asarray(mask), theta[xp.asarray(index)], 0.0)


def vech_product_matrix(theta):
    """B (d, k) with B vech(E) = E theta for every symmetric E: the S noise pushed through
    theta."""
    return _vech_product(np.asarray(theta, dtype=float))


def vech_product_tensor(d):
    """Constant (d, k, d) array P with ``P @ theta == vech_product_matrix(theta)``. It holds
    d^2 k numbers (6.5 GB at d = 200), so bayesdp itself forms B(theta) as a gather
    (:func:`vech_product_matrix`, in NumPy and JAX alike); refused (:class:`BayesdpInputError`)
    above :data:`_DENSE_NOISE_MAX_BYTES`."""
    iu = np.triu_indices(d)
    _check_dense_size("the vech product tensor", (d, len(iu[0]), d), d)
    P = np.zeros((d, len(iu[0]), d))
    for idx, (a, b) in enumerate(zip(*iu)):
        P[a, idx, b] += 1.0
        if a != b:
            P[b, idx, a] += 1.0
    return P


def eiv_covariance(Sigma_SS, Sigma_Sz, Sigma_zz, theta, *, xp=np, ss_diagonal=False):
    """Covariance of e_z - E_S theta (the S noise pushed through theta), for one holder or a
    stack: Sigma_zz - B Sigma_Sz - Sigma_zS B^T + B Sigma_SS B^T, B vech(E) = E theta.

    Dense blocks (..., k, k), (..., k, d), (..., d, d); ``Sigma_Sz`` None means zero. With
    ``ss_diagonal=True`` ``Sigma_SS`` is the diagonal v (..., k) of a diagonal Sigma_SS (the iid
    design, :class:`NoiseBlocks`), and B diag(v) B^T is formed in O(d^2) memory: with V the
    symmetric (d, d) matrix holding v (V_ab = v at the pair (a, b)),

        (B diag(v) B^T)_aa = sum_b V_ab theta_b^2,   (B diag(v) B^T)_ac = V_ac theta_a theta_c,

    since column (a, b) of B has theta_b in row a and theta_a in row b (a != b), theta_a in row a
    (a = b). ``xp`` may be ``jax.numpy``; B is a gather, O(d k) (:func:`vech_product_matrix`)."""
    d = Sigma_zz.shape[-1]
    theta = xp.asarray(theta)
    B = None
    if ss_diagonal:
        Vs = Sigma_SS[..., _symmetric_index(d)]  # (..., d, d)
        t2 = theta * theta
        diag = xp.einsum("...ab,b->...a", Vs, t2) - xp.diagonal(Vs, axis1=-2, axis2=-1) * t2
        BSB = Vs * (theta[:, None] * theta[None, :]) + diag[..., :, None] * xp.eye(d)
    else:
        B = _vech_product(theta, xp)
        BSB = xp.matmul(xp.matmul(B, Sigma_SS), B.T)
    V = Sigma_zz + BSB
    if Sigma_Sz is not None:
        if B is None:
            B = _vech_product(theta, xp)
        BSz = xp.matmul(B, Sigma_Sz)
        V = V - BSz - xp.swapaxes(BSz, -1, -2)
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
    SS, Sz, zz, diagonal = noise_blocks(release)
    J, d = release.J, release.d
    shift = np.zeros((J, d))
    if s_noise == "ignore":
        return shift, zz.copy()
    if s_noise == "eiv":
        if theta is None:
            raise BayesdpInputError("theta: s_noise='eiv' needs a plug-in theta")
        return shift, eiv_covariance(SS, Sz, zz, np.asarray(theta, dtype=float),
                                     ss_diagonal=diagonal)
    if Sz is None:  # iid design: Sigma_Sz = 0, identical to the paper
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
