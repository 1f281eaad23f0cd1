"""A hand-written kernel of :mod:`bayesdp.inference.kernels` as a numpyro ``MCMCKernel``.

This module imports JAX and numpyro; :mod:`bayesdp.inference.mcmc` imports it only when a
hand-written method runs, so that importing bayesdp does not import JAX.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from .kernels.adaptation import adapt


class ChainState(NamedTuple):
    """State carried by :class:`DPKernel` through numpyro's MCMC loop.

    ``z`` is the position as a dict of constrained values (the draw numpyro collects);
    ``tuning`` the proposal parameters (adapted while ``i < num_warmup``); ``info`` the
    acceptance diagnostics of the last sweep.
    """

    i: object
    z: dict
    tuning: object
    info: object
    rng_key: object


class DPKernel(MCMCKernel):
    """A hand-written sweep as a numpyro ``MCMCKernel``: ``init(position, log_alpha, log_step)
    -> (state, tuning)`` and ``step(key, state, data, tuning) -> (state, info)`` of one module of
    :mod:`bayesdp.inference.kernels`; the model's only argument is a ``ModelData``."""

    sample_field = "z"

    def __init__(self, model, init, step, init_position, *, target_accept_S,
                 target_accept_sigma_y2, log_alpha_init=None, log_step_init=0.0,
                 step_kwargs=None):
        self._model = model
        self._init = init
        self._step = step
        self._state_cls = None
        self._init_position = init_position
        self._targets = (float(target_accept_S), float(target_accept_sigma_y2))
        self._log_alpha_init = log_alpha_init
        self._log_step_init = float(log_step_init)
        self._step_kwargs = dict(step_kwargs or {})
        self._num_warmup = 0
        self._sample_fn = None
        self._info_shapes = None

    def set_initial_values(self, init_position, log_alpha_init, log_step_init):
        """New starting values for the next ``init`` (they are not part of the compiled
        sweep, so a cached kernel can be reused for another release of the same shape)."""
        self._init_position = init_position
        self._log_alpha_init = log_alpha_init
        self._log_step_init = float(log_step_init)

    @property
    def model(self):
        return self._model

    @property
    def default_fields(self):
        return ("z",)

    def _init_one(self, rng_key, data):
        J, d = data.z_hat.shape
        la = (jnp.zeros(J) if self._log_alpha_init is None
              else jnp.asarray(self._log_alpha_init, dtype=jnp.float64))
        state, tuning = self._init(self._init_position, la,
                                   jnp.asarray(self._log_step_init, dtype=jnp.float64))
        self._state_cls = type(state)
        # zeros shaped like the step's own Info (kernels report different fields)
        key = (J, d)
        if self._info_shapes is None or self._info_shapes[0] != key:
            shapes = jax.eval_shape(
                lambda k: self._step(k, state, data, tuning, **self._step_kwargs)[1], rng_key)
            self._info_shapes = (key, shapes)
        info = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), self._info_shapes[1])
        return ChainState(jnp.zeros((), jnp.int32), state._asdict(), tuning, info, rng_key)

    def _sample_one(self, state, data):
        key, sub = jax.random.split(state.rng_key)
        position = self._state_cls(**state.z)
        new, info = self._step(sub, position, data, state.tuning, **self._step_kwargs)
        d = data.z_hat.shape[-1]
        adapted = adapt(state.tuning, info, state.i, *self._targets,
                        min_log_alpha=math.log(d + 1.0))
        warm = state.i < self._num_warmup
        tuning = jax.tree.map(lambda a, b: jnp.where(warm, a, b), adapted, state.tuning)
        return ChainState(state.i + 1, new._asdict(), tuning, info, key)

    def init(self, rng_key, num_warmup, init_params, model_args, model_kwargs):
        self._num_warmup = int(num_warmup)
        data = model_args[0]
        if is_prng_key(rng_key):
            self._sample_fn = self._sample_one
            return self._init_one(rng_key, data)
        self._sample_fn = jax.vmap(self._sample_one, in_axes=(0, None))
        return jax.vmap(self._init_one, in_axes=(0, None))(rng_key, data)

    def sample(self, state, model_args, model_kwargs):
        return self._sample_fn(state, model_args[0])

    def postprocess_fn(self, model_args, model_kwargs):
        return lambda z: z

    def get_diagnostics_str(self, state):
        return "acc S {:.2f}, acc sigma_y2 {:.2f}".format(
            float(jnp.mean(state.info.accept_prob_S)), float(state.info.accept_prob_sigma_y2))
