"""The proposal parameters of the kernels and their adaptation during warm-up."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp


class Tuning(NamedTuple):
    """Proposal parameters, adapted in warm-up only.

    log_alpha: (J,) log alpha_j of the Wishart proposals W(S_j/alpha_j, alpha_j) (larger alpha =
        smaller moves); unused by the fixedS kernels.
    log_step: () log of the random-walk step on sigma_y^2, or of the slice width on
        log sigma_y^2 (kernels that slice sample it).
    """

    log_alpha: jax.Array
    log_step: jax.Array


def adapt(tuning: Tuning, info, i, target_accept_S=0.2, target_accept_sigma_y2=0.2,
          min_log_alpha=None):
    """Robbins-Monro update toward the target acceptance (Andrieu & Thoms 2008), gain
    gamma_i = (i + 1)^{-0.6} as in the authors' code:

        log alpha_j <- log alpha_j - gamma_i (accept_prob_S_j - target)   (larger alpha = smaller)
        log step    <- log step    + gamma_i (accept_prob_sigma_y2 - target)
        w           <- w + gamma_i (3 |jump| - w)                   (slice width, slice kernels)

    ``info`` is the Info of any kernel; the slice width is adapted when it has
    ``jump_log_sigma_y2``. Used only during warm-up, so the kept draws come from a fixed, valid
    kernel.
    """
    gamma = (i + 1.0) ** -0.6
    log_alpha = tuning.log_alpha - gamma * (info.accept_prob_S - target_accept_S)
    if min_log_alpha is not None:
        log_alpha = jnp.maximum(log_alpha, min_log_alpha)
    log_step = tuning.log_step + gamma * (info.accept_prob_sigma_y2 - target_accept_sigma_y2)
    if getattr(info, "jump_log_sigma_y2", None) is not None:  # slice width: 3 x the typical move
        log_step = _adapt_slice(tuning, info, gamma)
    return Tuning(log_alpha, log_step)


def _adapt_slice(tuning, info, gamma):
    """Slice width w <- w + gamma_i (3 |jump| - w): three times the mean move, averaged on the
    linear scale (a log-scale average is pulled down by the many short moves inside a narrow
    mode and leaves w too small to step across a long flat tail)."""
    w = jnp.exp(tuning.log_step)
    return jnp.log(w + gamma * (3.0 * info.jump_log_sigma_y2 - w) + 1e-12)
