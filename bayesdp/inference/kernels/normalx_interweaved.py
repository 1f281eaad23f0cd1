"""The default hand-written normalX kernel (method ``"normalx-interweaved"``): the target of
Algorithm 1 sampled by a partially collapsed Gibbs sampler that interweaves the centred and the
non-centred parametrisation of (Sigma_x, S), with a slice sampler on log sigma_y^2. The target
is the joint density of ``bayesdp.models.regression.normalx_model``."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.linalg import solve_triangular

from .adaptation import Tuning
from .collapsed import collapsed_holder_moves, group_from, group_move_log_ratio, holder_move_df
from .common import (NormalXState, ZTerms, collapsed_loglik_lapack, holder_totals,
                     nan_to_reject, init_state, sum_totals)
from .linalg import bartlett_sizes, draw, sym
from .slice import SLICE_N_UNIFORMS, slice_sigma_y2_then_theta


class Info(NamedTuple):
    """Diagnostics of one sweep.

    accept_prob_S, is_accepted_S: (J,) MH acceptance probabilities min(1, ratio) and decisions
        of the random-walk moves on each S_j.
    accept_prob_prior, is_accepted_prior: (J,) the prior-proposal moves on each S_j.
    accept_prob_noncentred, is_accepted_noncentred: () mean acceptance probability and mean
        decision of the sweep's non-centred (Sigma_x, S) moves.
    accept_prob_sigma_y2, is_accepted_sigma_y2: () one and True (a slice sampler always moves).
    jump_log_sigma_y2: () |log sigma_y2' - log sigma_y2|, which adapts the slice width in warm-up.
    evals_sigma_y2: () number of log-density evaluations the slice update took.
    """

    accept_prob_S: jax.Array
    is_accepted_S: jax.Array
    accept_prob_prior: jax.Array
    is_accepted_prior: jax.Array
    accept_prob_noncentred: jax.Array
    is_accepted_noncentred: jax.Array
    accept_prob_sigma_y2: jax.Array
    is_accepted_sigma_y2: jax.Array
    jump_log_sigma_y2: jax.Array
    evals_sigma_y2: jax.Array


def init(position, log_alpha, log_step):
    """The state at ``position`` (dict with theta, sigma_y2, Sigma_x, S) and the initial
    tuning: log_step the slice width on log sigma_y^2, c = 1 for the non-centred move."""
    return init_state(NormalXState, position, log_alpha, log_step, 0.0)


NONCENTRED_MOVES = 3  # non-centred moves per sweep


def _lower_from_vector(h, d):
    """The lower-triangular (incl. diagonal) d x d matrix with entries h (row-major order)."""
    il = np.tril_indices(d)
    return jnp.zeros((d, d), h.dtype).at[il].set(h)


def noncentred_design(M):
    """The matrix A with vech_u(H M + M H^T) = A vech_l(H) for a symmetric M and
    lower-triangular H (vech_u: upper triangle incl. diagonal, row-major, the S_hat layout;
    vech_l: lower triangle incl. diagonal, row-major). Batched over leading axes of M."""
    d = M.shape[-1]
    iu, il = np.triu_indices(d), np.tril_indices(d)
    eye = jnp.eye(d, dtype=M.dtype)
    T = (jnp.einsum("ak,...lb->...abkl", eye, M) + jnp.einsum("...al,bk->...abkl", M, eye))
    return T[..., iu[0], iu[1], :, :][..., il[0], il[1]]


def noncentred_log_ratio(h, Sigma_x, W, S, sigma_y2, ll, data, prior):
    """log pi(x') - log pi(x) + log|Jacobian| for the move x = (Sigma_x, S_1..S_J) ->
    x' = (G Sigma_x G^T, G S_j G^T), G the Cayley transform of the lower-triangular H with
    entries h, sigma_y^2 fixed and theta integrated out (:func:`group_move_log_ratio`). Written
    with LAPACK linear algebra so that it can be differentiated in h. Returns (log ratio,
    (S', Sigma_x', Sigma_x'^{-1}, totals at S', collapsed log-likelihood at S'))."""
    d = S.shape[-1]
    H = _lower_from_vector(h, d)
    eye = jnp.eye(d, dtype=S.dtype)
    inv_m = solve_triangular(eye - 0.5 * H, eye, lower=True)
    inv_p = solve_triangular(eye + 0.5 * H, eye, lower=True)
    G, G_inv, logdet = group_from(H, inv_m, inv_p)
    S_g = sym(G @ S @ G.T)
    K = jnp.linalg.cholesky(sigma_y2 * S_g + data.Sigma_z)
    Y = solve_triangular(K, jnp.concatenate([S_g, data.z_hat[..., None]], axis=-1), lower=True)
    zt = ZTerms(Y[..., :d], Y[..., d], jnp.sum(jnp.log(jnp.diagonal(K, axis1=-2, axis2=-1)), -1))
    tot_g = sum_totals(prior, holder_totals(zt))
    ll_g = collapsed_loglik_lapack(tot_g)
    log_r, Sx_g, W_g = group_move_log_ratio(G, G_inv, logdet, S, Sigma_x, W, S_g, ll, ll_g, data)
    return log_r, (S_g, Sx_g, W_g, tot_g, ll_g)


def noncentred_proposal(Sigma_x, W, S, sigma_y2, ll, tot, data, prior):
    """Gauss-Newton approximation N(m, P^{-1}) of the target of the non-centred move in h
    (x fixed). To first order S_j' = S_j + H S_j + S_j H^T, so the S_hat_j terms have
    curvature A_j^T A_j / sigma_s_j^2 with A_j = :func:`noncentred_design` (S_j); since
    S_j = n_j Sigma_x (1 + O(n_j^{-1/2})) under the model, sum_j A_j^T A_j / sigma_s_j^2 is
    replaced by (sum_j n_j^2 / sigma_s_j^2) A^T A with A = noncentred_design(Sigma_x): one
    D x D product instead of J (D = d(d+1)/2; this is only the proposal, the acceptance ratio
    is exact whatever P is). With theta
    at its conditional mean theta_hat = P_theta^{-1} h_theta (``tot``) the z_hat_j terms
    N(z_hat_j; S_j' theta_hat, K_j) have curvature B_j^T K_j^{-1} B_j, B_j h = (H S_j + S_j H^T)
    theta_hat. Then P = I + sum_j (n_j^2 / sigma_s_j^2) A^T A + sum_j B_j^T K_j^{-1} B_j and
    m = P^{-1} g, g the exact gradient of :func:`noncentred_log_ratio` at h = 0.
    Returns (m, chol P)."""
    J, d = S.shape[0], S.shape[-1]
    D = d * (d + 1) // 2
    il = np.tril_indices(d)
    zero = jnp.zeros(D, S.dtype)
    g = jax.grad(lambda h: noncentred_log_ratio(h, Sigma_x, W, S, sigma_y2, ll, data,
                                                prior)[0])(zero)
    A = noncentred_design(Sigma_x)
    theta = jax.scipy.linalg.cho_solve((jnp.linalg.cholesky(tot.P), True), tot.h)
    v = jnp.einsum("jab,b->ja", S, theta)  # S_j theta_hat
    eye = jnp.eye(d, dtype=S.dtype)
    # B_j[a, (k, l)] = delta_ak v_jl + S_j,al theta_k   (k >= l)
    B = (eye[None, :, il[0]] * v[:, il[1]][:, None, :]
         + S[:, :, il[1]] * theta[il[0]][None, None, :])
    LK = jnp.linalg.cholesky(sigma_y2 * S + data.Sigma_z)
    KB = solve_triangular(LK, B, lower=True)
    P = (jnp.eye(D, dtype=S.dtype) + jnp.sum(data.n**2 / data.sigma_s**2) * (A.T @ A)
         + jnp.einsum("jpq,jpr->qr", KB, KB))
    R = jnp.linalg.cholesky(P)
    return jax.scipy.linalg.cho_solve((R, True), g), R


def _noncentred_log_q(h, m, R, c):
    """log N(h; (1 - sqrt(1 - c^2)) m, c^2 P^{-1}) + const, P = R R^T."""
    r = R.T @ (h - (1.0 - jnp.sqrt(1.0 - c**2)) * m) / c
    return -0.5 * r @ r + jnp.sum(jnp.log(jnp.diagonal(R))) - h.shape[0] * jnp.log(c)


def noncentred_move(xi, log_u, Sigma_x, W, S, sigma_y2, ll, tot, data, prior, log_c):
    """The non-centred move of :func:`normalx_step` (step 3): propose h from the Gauss-Newton
    approximation at x, h = (1 - sqrt(1 - c^2)) m(x) + c R(x)^{-T} xi (c <= 1; c = 1 is an
    independence-like draw from the approximation, smaller c an autoregressive step around
    x that is exactly reversible for a Gaussian target), move x -> x' = G(h) x, and accept
    with

        log r = noncentred_log_ratio(h) + log q(-h | x') - log q(h | x),

    since G(-h) = G(h)^{-1} maps x' back to x (so (x, h) -> (x', -h) is an involution whose
    Jacobian is in :func:`noncentred_log_ratio`). Returns (accepted, acceptance
    probability, and the proposed S, Sigma_x, Sigma_x^{-1}, totals and collapsed
    log-likelihood, which the caller keeps if accepted)."""
    c = jnp.exp(log_c)
    m, R = noncentred_proposal(Sigma_x, W, S, sigma_y2, ll, tot, data, prior)
    mean = (1.0 - jnp.sqrt(1.0 - c**2)) * m
    h = mean + c * solve_triangular(R.T, xi, lower=False)
    log_r, (S_g, Sx_g, W_g, tot_g, ll_g) = noncentred_log_ratio(h, Sigma_x, W, S, sigma_y2, ll,
                                                                data, prior)
    m_b, R_b = noncentred_proposal(Sx_g, W_g, S_g, sigma_y2, ll_g, tot_g, data, prior)
    log_r = log_r + _noncentred_log_q(-h, m_b, R_b, c) - _noncentred_log_q(h, m, R, c)
    log_r = nan_to_reject(log_r)
    accept = log_u < log_r
    return accept, jnp.exp(jnp.minimum(0.0, log_r)), S_g, Sx_g, W_g, tot_g, ll_g


def normalx_step(rng_key, state: NormalXState, data, tuning: Tuning, rw_moves=True,
                 prior_moves=True):
    """One sweep of the interweaved normalX kernel (method ``"normalx-interweaved"``): the target of
    Algorithm 1 (the joint posterior of the normalX model, eq. 10), sampled by a partially
    collapsed Gibbs sampler that interweaves the centred and the non-centred parametrisation
    of (Sigma_x, S) (Yu & Meng 2011):

    1. Sigma_x ~ InvWishart(kappa + n, Lambda + sum_j S_j) (A.1): the centred step, exact;
    2. for each holder, the Wishart random walk and the prior-proposal move on S_j with theta
       integrated out (as in :func:`collapsed_step`);
    3. the non-centred step: with W_j = L^{-1} S_j L^{-T} (L L^T = Sigma_x), whose law
       Wishart(n_j, I) does not involve Sigma_x, move Sigma_x with the W_j held fixed, i.e.
       (Sigma_x, S_j) -> (G Sigma_x G^T, G S_j G^T), by MH with a Gauss-Newton proposal
       (:func:`noncentred_move`). When S_hat measures S_j weakly compared with its Wishart
       spread (large n_j, small eps) step 1 can move Sigma_x only by ~1/sqrt(n) per sweep
       while this step moves it across its posterior; when S_hat measures S_j well, step 1
       does;
    4. u = log sigma_y^2 | S from its marginal with theta integrated out, by slice sampling
       (:func:`slice_1d`, :func:`log_sigma_y2_marginal`);
    5. theta ~ N(m_p, Sigma_p) given S, sigma_y^2 (eq. 12).

    Steps 1-4 leave p(Sigma_x, S, sigma_y^2 | data) invariant (theta integrated out), and step
    5 draws theta from its exact conditional, so the sweep leaves the joint posterior invariant.
    """
    J, d = data.z_hat.shape
    D = d * (d + 1) // 2
    k = NONCENTRED_MOVES
    df = holder_move_df(data, tuning)
    n_n, n_u = bartlett_sizes(df.shape, d)
    N, u = draw(rng_key, n_n + k * D + d, n_u + 2 * J + k + SLICE_N_UNIFORMS)
    xi, eps_theta = N[n_n:n_n + k * D].reshape(k, D), N[n_n + k * D:]
    log_u = jnp.log(u[n_u:n_u + 2 * J + k])
    u_slice = u[n_u + 2 * J + k:]
    # 1.-2. Sigma_x | S and the holder-wise moves
    hm = collapsed_holder_moves(N[:n_n], u[:n_u], log_u[:2 * J], df, state, data,
                                jnp.zeros((0, d, d), state.S.dtype), rw_moves, prior_moves)
    S, Sigma_x = hm.S, hm.pre.Sigma_x
    # 3. non-centred moves of (Sigma_x, S)
    def nc(carry, x):
        S, Sigma_x, W, tot, ll = carry
        a, p, *new = noncentred_move(x[0], x[1], Sigma_x, W, S, state.sigma_y2, ll, tot,
                                     data, hm.prior, tuning.log_group_step)
        carry = jax.tree.map(lambda n, o: jnp.where(a, n, o), tuple(new), carry)
        return carry, (p, a)
    (S, Sigma_x, _, _, _), (p_nc, a_nc) = jax.lax.scan(
        nc, (S, Sigma_x, hm.pre.W, hm.tot, hm.ll), (xi, log_u[2 * J:]))
    p_nc, a_nc = jnp.mean(p_nc), jnp.mean(a_nc)
    # 4. log sigma_y^2 | S by slice sampling, theta integrated out; 5. theta | S, sigma_y^2
    theta, s2, jump, evals = slice_sigma_y2_then_theta(
        u_slice, eps_theta, S, state.sigma_y2, data, hm.prior, tuning.log_step)
    new = NormalXState(theta=theta, sigma_y2=s2, Sigma_x=Sigma_x, S=S)
    one = jnp.ones((), S.dtype)
    info = Info(hm.p_rw, hm.a_rw, hm.p_pr, hm.a_pr, p_nc, a_nc, one, one > 0, jump, evals)
    return new, info
