"""Small-matrix linear algebra and random numbers shared by the kernels.

At the sizes of the paper (d <= 8, J ~ 10) a sweep is dominated by XLA's fixed cost per
operation on CPU, not by flops (docs/evidence/performance.md, "The hand-written kernels: where the
time goes, compilation"). The sweeps therefore draw all their random numbers in a few flat
calls (:func:`draw`), do all Cholesky factorisations and triangular inverses that do not depend
on each other in one batched call, and, for d <= ``SMALL_D``, use unrolled Cholesky /
triangular-solve / matmul code that XLA fuses into a few loops (no LAPACK custom calls, no dot
thunks). No explicit inverse of a covariance is formed (the only inverses are of triangular
factors).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

LOG_2PI = 1.8378770664093453
SMALL_D = 8  # up to this d, Cholesky / triangular solves / matmuls are unrolled (see module doc)


def sym(A):
    return 0.5 * (A + jnp.swapaxes(A, -1, -2))


def mT(A):
    return jnp.swapaxes(A, -1, -2)


def _assemble(X, like):
    """Stack a d x d nested list of (...)-shaped arrays (None = 0) into a (..., d, d) array."""
    zero = jnp.zeros_like(like[..., 0, 0])
    return jnp.stack([jnp.stack([zero if x is None else x for x in row], -1) for row in X], -2)


def chol(A):
    """Lower Cholesky factor of the symmetrised A (batched). For d <= SMALL_D an unrolled
    Cholesky-Banachiewicz (the algorithm of LAPACK's dpotf2, same rounding behaviour); a matrix
    that is not positive definite gives NaN entries, as LAPACK's path does."""
    A = sym(A)
    d = A.shape[-1]
    if d > SMALL_D:
        return jnp.linalg.cholesky(A)
    return _assemble(_chol_entries(lambda i, j: A[..., i, j], d), A)


def _chol_entries(a, d):
    """Unrolled Cholesky of the symmetric matrix with lower entries a(i, j) (i >= j), as a
    nested list L[i][j] (None above the diagonal)."""
    L = [[None] * d for _ in range(d)]
    for j in range(d):
        s = a(j, j)
        for k in range(j):
            s = s - L[j][k] * L[j][k]
        L[j][j] = jnp.sqrt(s)
        r = 1.0 / L[j][j]
        for i in range(j + 1, d):
            s = a(i, j)
            for k in range(j):
                s = s - L[i][k] * L[j][k]
            L[i][j] = s * r
    return L


def tri_inv(L):
    """Inverse of a lower-triangular matrix (batched)."""
    d = L.shape[-1]
    if d > SMALL_D:
        eye = jnp.broadcast_to(jnp.eye(d, dtype=L.dtype), L.shape)
        return solve_triangular(L, eye, lower=True)
    X = [[None] * d for _ in range(d)]
    for i in range(d):
        X[i][i] = 1.0 / L[..., i, i]
    for j in range(d):
        for i in range(j + 1, d):
            s = L[..., i, j] * X[j][j]
            for k in range(j + 1, i):
                s = s + L[..., i, k] * X[k][j]
            X[i][j] = -s * X[i][i]
    return _assemble(X, L)


def solve_lower(L, B):
    """L^{-1} B for lower-triangular L (..., d, d) and B (..., d, m) (forward substitution)."""
    d = L.shape[-1]
    if d > SMALL_D:
        return solve_triangular(L, B, lower=True)
    Y = []
    for i in range(d):
        s = B[..., i, :]
        for k in range(i):
            s = s - L[..., i, k, None] * Y[k]
        Y.append(s / L[..., i, i, None])
    return jnp.stack(Y, -2)


def mm(A, B):
    """A @ B, batched; for small matrices as a fused multiply-and-sum (no dot thunk)."""
    if A.shape[-1] > SMALL_D:
        return A @ B
    return jnp.sum(A[..., :, :, None] * B[..., None, :, :], axis=-2)


def mv(A, x):
    """A @ x for (..., d, d) and (..., d)."""
    return jnp.sum(A * x[..., None, :], axis=-1)


def logdet_chol(L):
    return 2.0 * jnp.sum(jnp.log(jnp.diagonal(L, axis1=-2, axis2=-1)), axis=-1)


_N_CANDIDATES = 2


def bartlett(rng_key, df, d, n_candidates=_N_CANDIDATES):
    """Lower-triangular Bartlett factors A with A A^T ~ Wishart(df, I_d), one per entry of df,
    and a flag ``ok``.

    A_ii = sqrt(chi^2_{df - i}) (i = 0..d-1), A_ik ~ N(0, 1) for i > k, zeros above. ``df`` may
    be a scalar (returns (d, d)) or an array (df.shape + (d, d)); needs df >= d + 1 so every
    chi^2 = 2 Gamma((df - i)/2) has shape >= 1.

    The Gamma draws use Marsaglia & Tsang (2000) with ``n_candidates`` proposals per entry drawn
    at once, keeping the first accepted one: exact and loop-free (``jax.random.gamma`` runs a
    rejection loop per draw). Each candidate is accepted with probability >= 0.95 for shape >= 1 and
    -> 1 as the shape grows, so with 2 candidates a factor fails (``ok`` False) with probability
    below 0.0025 per diagonal entry at worst (df near d + 1), and negligibly often for the large
    alpha_j used in practice. That probability depends on df only, never on the chain's state, so
    a kernel that simply skips its move when ``ok`` is False is the mixture "(1 - f) move + f stay"
    of two valid kernels, and leaves the target exactly invariant.

    The normals and uniforms come from one threefry call (:func:`draw`).
    """
    df = jnp.asarray(df, dtype=jnp.float64)
    n_n, n_u = bartlett_sizes(df.shape, d, n_candidates)
    N, u = draw(rng_key, n_n, n_u)
    return bartlett_from(N, u, df, d, n_candidates)


def bartlett_sizes(shape, d, n_candidates=_N_CANDIDATES):
    """Numbers of normals and uniforms :func:`bartlett_from` needs for factors of this shape."""
    size = math.prod(shape)
    return size * d * (d + n_candidates), size * d * n_candidates


def draw(rng_key, n_normal, n_uniform):
    """``n_normal`` standard normals and ``n_uniform`` U[0, 1) numbers (float64) from ONE
    threefry call, converted as jax.random does (52 random mantissa bits; normals as
    sqrt(2) erfinv(U(-1, 1))). On CPU each jax.random call runs threefry as a rolled loop whose
    fixed cost dominates at these sizes, so a sweep draws all its random numbers at once."""
    bits = jax.random.bits(rng_key, (n_normal + n_uniform,), jnp.uint64)
    f = jax.lax.bitcast_convert_type((bits >> jnp.uint64(12)) | jnp.uint64(0x3FF0000000000000),
                                     jnp.float64) - 1.0
    lo = np.nextafter(-1.0, 0.0)
    x = jnp.maximum(lo, f[:n_normal] * (1.0 - lo) + lo)
    return np.sqrt(2.0) * jax.lax.erf_inv(x), f[n_normal:]


def bartlett_from(N, u, df, d, nc=_N_CANDIDATES):
    """:func:`bartlett` from flat standard normals N and uniforms u (:func:`bartlett_sizes`)."""
    N = N.reshape(df.shape + (d, d + nc))
    u = u.reshape(df.shape + (d, nc))
    shape = (df[..., None] - jnp.arange(d)) / 2.0  # (..., d)
    dd = (shape - 1.0 / 3.0)[..., None]
    z = N[..., d:]
    v = (1.0 + z / jnp.sqrt(9.0 * dd)) ** 3
    vpos = jnp.where(v > 0, v, 1.0)
    acc = (v > 0) & (jnp.log(u) < 0.5 * z**2 + dd - dd * vpos + dd * jnp.log(vpos))
    g, ok = vpos[..., nc - 1], acc[..., nc - 1]
    for c in reversed(range(nc - 1)):  # keep the first accepted candidate
        g = jnp.where(acc[..., c], vpos[..., c], g)
        ok = ok | acc[..., c]
    g = dd[..., 0] * g
    eye = jnp.eye(d, dtype=N.dtype)
    A = jnp.tril(N[..., :d], -1) + jnp.sqrt(2.0 * g)[..., None] * eye
    return A, jnp.all(ok, axis=-1)


