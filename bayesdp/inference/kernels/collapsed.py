"""The collapsed normalX kernel (method ``"normalx-collapsed"``): the target of Algorithm 1 with
theta integrated out of every MH move, a prior-proposal move on each S_j and a group move on
(Sigma_x, S). The target is the joint density of ``bayesdp.models.regression.normalx_model``."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

from .adaptation import Tuning
from .common import (NormalXState, Prelude, Totals, collapsed_loglik, collapsed_loglik_flat,
                     flat_totals, holder_totals, log_invgamma, nan_to_reject, noise_loglik,
                     prelude, init_state, sum_totals, theta_from_precision, unflat_totals,
                     wishart_loglik_diff, wishart_rw, z_terms)
from .linalg import bartlett_from, bartlett_sizes, draw, mm, mT, sym


class Info(NamedTuple):
    """Diagnostics of one sweep: MH acceptance probabilities min(1, ratio) and decisions.

    accept_prob_S, is_accepted_S: (J,) the random-walk moves on each S_j.
    accept_prob_sigma_y2, is_accepted_sigma_y2: () the random walk on sigma_y^2.
    accept_prob_prior, is_accepted_prior: (J,) the prior-proposal moves on each S_j.
    accept_prob_group, is_accepted_group: () the group move on (Sigma_x, S).
    """

    accept_prob_S: jax.Array
    is_accepted_S: jax.Array
    accept_prob_sigma_y2: jax.Array
    is_accepted_sigma_y2: jax.Array
    accept_prob_prior: jax.Array
    is_accepted_prior: jax.Array
    accept_prob_group: jax.Array
    is_accepted_group: jax.Array


def init(position, log_alpha, log_step):
    """The state at ``position`` (dict with theta, sigma_y2, Sigma_x, S) and the initial
    tuning (group-move scale exp(LOG_GROUP_STEP_INIT))."""
    return init_state(NormalXState, position, log_alpha, log_step)


def group_from(H, inv_minus, inv_plus):
    """The Cayley transform G = (I - H/2)^{-1} (I + H/2) of a lower-triangular H, its inverse
    (the transform of -H) and log|det G| = sum_i log|1 + H_ii/2| - log|1 - H_ii/2|, from the
    inverses of I - H/2 and I + H/2."""
    d = H.shape[-1]
    eye = jnp.eye(d, dtype=H.dtype)
    h = jnp.diagonal(H)
    logdet = jnp.sum(jnp.log(jnp.abs(1.0 + 0.5 * h)) - jnp.log(jnp.abs(1.0 - 0.5 * h)))
    return mm(inv_minus, eye + 0.5 * H), mm(inv_plus, eye - 0.5 * H), logdet


def group_move_log_ratio(G, G_inv, logdet_G, S, Sigma_x, W, S_g, ll, ll_g, data):
    """log acceptance ratio of the group move (Sigma_x, S_j) -> (G Sigma_x G^T, G S_j G^T),
    theta integrated out (``ll``, ``ll_g``: :func:`.common.collapsed_loglik` before and after).

    The move maps the J + 1 symmetric matrices by X -> G X G^T (Jacobian |G|^{d+1} each). Each
    Wishart factor is invariant up to W(G S G^T; n, G Sigma G^T) = |G|^{-(d+1)} W(S; n, Sigma),
    and InvWishart(kappa, Lambda) contributes |G|^{-(kappa + d + 1)} and the trace term, so

        log r = -kappa log|G| - tr(Lambda (Sigma_x'^{-1} - Sigma_x^{-1}))/2
                + sum_j [log N(S_hat_j; G S_j G^T) - log N(S_hat_j; S_j)] + ll_g - ll.

    Returns (log r, Sigma_x', Sigma_x'^{-1})."""
    J = S.shape[0]
    Sx_g = sym(mm(mm(G, Sigma_x), mT(G)))
    W_g = sym(mm(mm(mT(G_inv), W), G_inv))
    noise = noise_loglik(jnp.concatenate([S_g, S]), jnp.concatenate([data.S_hat, data.S_hat]),
                         jnp.concatenate([data.sigma_s, data.sigma_s]))
    log_r = (-data.kappa * logdet_G - 0.5 * jnp.sum(data.Lambda * (W_g - W))
             + jnp.sum(noise[:J]) - jnp.sum(noise[J:]) + ll_g - ll)
    return log_r, Sx_g, W_g




class HolderMoves(NamedTuple):
    """Result of steps 1-2 of :func:`collapsed_step` (:func:`collapsed_holder_moves`)."""

    pre: Prelude  # Sigma_x | S and the sweep's factors (tri_inv: the caller's extra inverses)
    S: jax.Array  # S after the holder-wise moves
    tot: Totals  # totals of S at sigma_y^2 (theta integrated out)
    ll: jax.Array  # collapsed_loglik(tot)
    prior: Totals  # theta's prior terms
    p_rw: jax.Array  # (J,) acceptance probabilities of the random-walk moves
    a_rw: jax.Array  # (J,) their decisions
    p_pr: jax.Array  # (J,) acceptance probabilities of the prior-proposal moves
    a_pr: jax.Array  # (J,) their decisions


class HolderStep(NamedTuple):
    """One holder's inputs to the sequential moves of :func:`collapsed_holder_moves` (a row of
    the scan).

    old, rw, pr: flat totals (:func:`.common.flat_totals`) of the current S_j, of the random-walk
        proposal and of the prior proposal.
    d_rw: the random walk's log ratio without the collapsed likelihood (Wishart, S_hat and
        proposal terms; -inf where its Bartlett draw failed).
    n_old, n_rw, n_pr: log N(S_hat_j; .) of the three.
    ok_pr: whether the prior proposal's Bartlett draw succeeded.
    lu_rw, lu_pr: log-uniforms of the two decisions.
    """

    old: jax.Array
    rw: jax.Array
    pr: jax.Array
    d_rw: jax.Array
    n_old: jax.Array
    n_rw: jax.Array
    n_pr: jax.Array
    ok_pr: jax.Array
    lu_rw: jax.Array
    lu_pr: jax.Array


def holder_move_df(data, tuning):
    """Degrees of freedom of the Bartlett factors a collapsed sweep draws: the J random-walk
    proposals (alpha_j), the J prior proposals (n_j) and Sigma_x's Gibbs draw."""
    return jnp.concatenate([jnp.exp(tuning.log_alpha), data.n,
                            (data.kappa + jnp.sum(data.n))[None]])


def collapsed_holder_moves(N, u, log_u, df, state, data, extra_lower, rw_moves=True,
                           prior_moves=True):
    """Steps 1-2 of :func:`collapsed_step` (shared with the interweaved kernel): Sigma_x | S, then
    for each holder in turn the Wishart random walk and the prior-proposal move, theta
    integrated out. ``N``, ``u``: the Bartlett normals and uniforms for ``df``; ``log_u``: 2J
    log-uniforms of the MH decisions; ``extra_lower``: lower-triangular matrices the caller
    wants inverted in the prelude's batched call."""
    J, d = data.z_hat.shape
    S, s2 = state.S, state.sigma_y2
    alpha = df[:J]
    A, ok = bartlett_from(N, u, df, d)
    lu_rw, lu_pr = log_u[:J], log_u[J:2 * J]
    B = A[:J] / jnp.sqrt(alpha)[:, None, None]

    # 1. Sigma_x | S, and every factor that does not depend on a decision
    pre = prelude(S, state.Sigma_x, data, A[2 * J], ok[2 * J],
                  jnp.concatenate([B, extra_lower]))
    B_inv = pre.tri_inv[:J]
    pre = pre._replace(tri_inv=pre.tri_inv[J:])
    prior = Totals(pre.Cinv, pre.Cm, pre.mCm, jnp.zeros((), S.dtype))

    # 2. holder-wise moves. Terms of the current S_j, the RW and the prior proposals (3J).
    S_rw, log_q, logdet_diff = wishart_rw(pre.L_S, B, B_inv, alpha)
    FA = mm(pre.F, A[J:2 * J])
    S_pr = sym(mm(FA, mT(FA)))
    S3 = jnp.concatenate([S, S_rw, S_pr])
    tile = lambda x: jnp.concatenate([x, x, x])  # noqa: E731
    per = holder_totals(z_terms(S3, s2, tile(data.z_hat), tile(data.Sigma_z)))
    noise = noise_loglik(S3, tile(data.S_hat), tile(data.sigma_s))
    n_old, n_rw, n_pr = noise[:J], noise[J:2 * J], noise[2 * J:]
    d_rw = wishart_loglik_diff(S_rw, S, logdet_diff, pre.W, data.n) + n_rw - n_old
    d_rw = d_rw + log_q
    d_rw = jnp.where(ok[:J], d_rw, -jnp.inf)
    flat = flat_totals(per)  # (3J, m): current S_j, RW proposals, prior proposals
    old, rw, pr = flat[:J], flat[J:2 * J], flat[2 * J:]
    tot = flat_totals(prior) + jnp.sum(old, axis=0)

    def move(carry, x: HolderStep):
        tot, ll = carry
        cur, n_cur = x.old, x.n_old
        p_rw = p_pr = jnp.zeros((), ll.dtype)
        a_rw = a_pr = jnp.zeros((), bool)
        if rw_moves:
            t1 = tot - x.old + x.rw
            ll1 = collapsed_loglik_flat(t1, d)
            lr = nan_to_reject(x.d_rw + ll1 - ll)
            a_rw, p_rw = x.lu_rw < lr, jnp.exp(jnp.minimum(0.0, lr))
            tot, ll = jnp.where(a_rw, t1, tot), jnp.where(a_rw, ll1, ll)
            cur, n_cur = jnp.where(a_rw, x.rw, x.old), jnp.where(a_rw, x.n_rw, x.n_old)
        if prior_moves:
            t2 = tot - cur + x.pr
            ll2 = collapsed_loglik_flat(t2, d)
            lr = jnp.where(x.ok_pr, nan_to_reject(x.n_pr - n_cur + ll2 - ll), -jnp.inf)
            a_pr, p_pr = x.lu_pr < lr, jnp.exp(jnp.minimum(0.0, lr))
            tot, ll = jnp.where(a_pr, t2, tot), jnp.where(a_pr, ll2, ll)
        return (tot, ll), (p_rw, a_rw, p_pr, a_pr)

    xs = HolderStep(old, rw, pr, d_rw, n_old, n_rw, n_pr, ok[J:2 * J], lu_rw, lu_pr)
    (tot, ll), (p_rw, a_rw, p_pr, a_pr) = jax.lax.scan(
        move, (tot, collapsed_loglik_flat(tot, d)), xs)
    tot = unflat_totals(tot, d)
    S = jnp.where(a_pr[:, None, None], S_pr, jnp.where(a_rw[:, None, None], S_rw, S))
    return HolderMoves(pre, S, tot, ll, prior, p_rw, a_rw, p_pr, a_pr)




def collapsed_step(rng_key, state: NormalXState, data, tuning: Tuning, rw_moves=True,
                   prior_moves=True, group_move=True):
    """One sweep of the collapsed normalX kernel (method ``"normalx-collapsed"``).

    Same target as Algorithm 1, but theta is integrated out of every MH move (which removes the
    tight coupling z_hat_j ~ S_j theta), and two kinds of moves are added for the S_j, whose
    random walk otherwise limits mixing:

    1. Sigma_x ~ InvWishart(kappa + n, Lambda + sum_j S_j)               (A.1; theta-free)
    2. for j = 1..J in turn, two MH moves on S_j, each targeting
       p(S_j | S_-j, Sigma_x, sigma_y^2, z_hat, S_hat) with theta integrated out,
       W(S_j; n_j, Sigma_x) N(S_hat_j; S_j) p(z_hat | S, sigma_y^2), where p(z_hat | S, s2) is
       :func:`collapsed_loglik` (O(d^3) per move: only holder j's terms of P, h, Q change):
       a. the Wishart random walk of A.3, S_j' ~ W(S_j/alpha_j, alpha_j) (``rw_moves``);
       b. an independence proposal from the Wishart prior, S_j' ~ W(n_j, Sigma_x), accepted
          with the likelihood ratio N(S_hat_j; S_j') p(z_hat | S') / (N(S_hat_j; S_j) p(z_hat | S))
          (``prior_moves``). When the noise on S_hat is large compared with the Wishart spread
          of S_j (sqrt(n_j) Sigma_x: large n_j, small eps) it is accepted often and moves S_j
          across its conditional in one step; the random walk covers the opposite regime.
       The J proposals of each kind are drawn together; only the accept/reject decisions run
       in sequence (lax.scan).
    3. a group move on (Sigma_x, S_1..S_J) -> (G Sigma_x G^T, G S_j G^T), G the Cayley
       transform of a random lower-triangular H with N(0, tau^2) entries (``group_move``; tau
       adapted in warm-up; ratio :func:`group_move_log_ratio`). It moves all the S_j and
       Sigma_x together along the directions in which Sigma_x | S and S_j | Sigma_x are tightly
       coupled (at n_j ~ 1e4 their common scale otherwise moves by ~1/sqrt(n) per sweep). H and
       -H are equally likely and give G and G^{-1}, so the proposal is an involution and the
       ratio needs only the target and the Jacobian.
    4. random-walk MH on sigma_y^2 targeting IG(sigma_y^2; a, b) p(z_hat | S, sigma_y^2)
    5. theta ~ N(m_p, Sigma_p) given the new S, sigma_y^2                (eq. 12)

    Steps 1-4 leave p(Sigma_x, S, sigma_y^2 | data) invariant (theta is not conditioned on),
    and step 5 draws theta from its exact conditional, so the sweep leaves the joint posterior
    invariant (a partially collapsed Gibbs sampler, van Dyk & Park 2008).
    """
    J, d = data.z_hat.shape
    S, s2 = state.S, state.sigma_y2
    # All random numbers at once: Bartlett factors (RW proposals, prior proposals, Sigma_x),
    # H of the group move, theta's normals, the sigma_y^2 step; the MH uniforms.
    df = holder_move_df(data, tuning)
    n_n, n_u = bartlett_sizes(df.shape, d)
    N, u = draw(rng_key, n_n + d * d + d + 1, n_u + 2 * J + 2)
    H = jnp.tril(N[n_n:n_n + d * d].reshape(d, d)) * jnp.exp(tuning.log_group_step)
    eps_theta, eps_sy = N[n_n + d * d:n_n + d * d + d], N[-1]
    log_u = jnp.log(u[n_u:])
    lu_g, lu_sy = log_u[2 * J], log_u[2 * J + 1]
    eye = jnp.eye(d, dtype=S.dtype)
    # 1.-2. Sigma_x | S and the holder-wise moves
    hm = collapsed_holder_moves(N[:n_n], u[:n_u], log_u[:2 * J], df, state, data,
                                jnp.stack([eye - 0.5 * H, eye + 0.5 * H]), rw_moves,
                                prior_moves)
    pre, S, tot, ll, prior = hm.pre, hm.S, hm.tot, hm.ll, hm.prior
    p_rw, a_rw, p_pr, a_pr = hm.p_rw, hm.a_rw, hm.p_pr, hm.a_pr
    tile = lambda x: jnp.concatenate([x, x, x])  # noqa: E731

    # 3. group move, and 4. sigma_y^2, whose proposal is drawn already: the totals at
    # (G S G^T, s2), (S, s2') and (G S G^T, s2') are computed together before the decisions.
    s2p = s2 + jnp.exp(tuning.log_step) * eps_sy
    s2p_safe = jnp.where(s2p > 0, s2p, s2)
    Sigma_x, p_g, a_g = pre.Sigma_x, jnp.zeros((), s2.dtype), jnp.zeros((), bool)
    if group_move:
        G, G_inv, logdet_G = group_from(H, pre.tri_inv[0], pre.tri_inv[1])
        S_g = sym(mm(mm(G, S), mT(G)))
        s2s = jnp.concatenate([jnp.full((J,), s2), jnp.full((2 * J,), s2p_safe)])
        per2 = holder_totals(z_terms(jnp.concatenate([S_g, S, S_g]), s2s, tile(data.z_hat),
                                     tile(data.Sigma_z)))
        tots = sum_totals(prior, per2, 3)
        lls = collapsed_loglik(tots)
        lr_g, Sx_g, _ = group_move_log_ratio(G, G_inv, logdet_G, S, pre.Sigma_x, pre.W, S_g, ll,
                                             lls[0], data)
        lr_g = nan_to_reject(lr_g)
        a_g, p_g = lu_g < lr_g, jnp.exp(jnp.minimum(0.0, lr_g))
        pick = lambda i: jax.tree.map(lambda x: x[i], tots)  # noqa: E731
        S = jnp.where(a_g, S_g, S)
        Sigma_x = jnp.where(a_g, Sx_g, pre.Sigma_x)
        tot = jax.tree.map(lambda a, b: jnp.where(a_g, a, b), pick(0), tot)
        ll = jnp.where(a_g, lls[0], ll)
        tot_p = jax.tree.map(lambda a, b: jnp.where(a_g, a, b), pick(2), pick(1))
        ll_p = jnp.where(a_g, lls[2], lls[1])
    else:
        per2 = holder_totals(z_terms(S, s2p_safe, data.z_hat, data.Sigma_z))
        tot_p = sum_totals(prior, per2)
        ll_p = collapsed_loglik(tot_p)

    # 4. sigma_y^2 with theta integrated out
    lt_old = log_invgamma(s2, data.a, data.b) + ll
    lt_new = jnp.where(s2p > 0, log_invgamma(s2p_safe, data.a, data.b) + ll_p, -jnp.inf)
    lr_sy = nan_to_reject(lt_new - lt_old)
    a_sy = lu_sy < lr_sy
    sigma_y2 = jnp.where(a_sy, s2p_safe, s2)
    tot = jax.tree.map(lambda a, b: jnp.where(a_sy, a, b), tot_p, tot)

    # 5. theta | S, sigma_y^2
    theta = theta_from_precision(tot.P, tot.h, eps_theta)
    new = NormalXState(theta=theta, sigma_y2=sigma_y2, Sigma_x=Sigma_x, S=S)
    info = Info(p_rw, a_rw, jnp.exp(jnp.minimum(0.0, lr_sy)), a_sy, p_pr, a_pr, p_g, a_g)
    return new, info
