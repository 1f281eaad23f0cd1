"""A hand-written kernel of :mod:`bayesdp.inference.kernels` as a numpyro ``MCMCKernel``.

This module imports JAX and numpyro; :mod:`bayesdp.inference.kernel_runner` imports it only when
a hand-written method runs, so that importing bayesdp does not import JAX.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
from numpyro.infer.mcmc import MCMCKernel
from numpyro.util import is_prng_key

from .kernels.adaptation import adapt


class _ChainState(NamedTuple):
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


def _chain_start(init, step, rng_key, data, position, log_alpha, log_step, step_kwargs=None,
                 info_shapes=None):
    """The :class:`_ChainState` a chain of the kernel ``(init, step)`` starts from at
    ``position``; returns it, the kernel's state class and the shapes of its Info (pass them
    back as ``info_shapes`` to skip tracing a sweep for them)."""
    J, d = data.z_hat.shape
    la = jnp.zeros(J) if log_alpha is None else jnp.asarray(log_alpha, dtype=jnp.float64)
    state, tuning = init(position, la, jnp.asarray(log_step, dtype=jnp.float64))
    if info_shapes is None:  # zeros shaped like the step's own Info (kernels report different fields)
        info_shapes = jax.eval_shape(
            lambda k: step(k, state, data, tuning, **(step_kwargs or {}))[1], rng_key)
    info = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), info_shapes)
    return (_ChainState(jnp.zeros((), jnp.int32), state._asdict(), tuning, info, rng_key),
            type(state), info_shapes)


def _chain_sweep(step, state_cls, targets, num_warmup, state: _ChainState, data, step_kwargs=None):
    """One sweep of the kernel ``step`` from ``state``, then the Robbins-Monro adaptation of its
    tuning (:func:`.kernels.adaptation.adapt`) while ``state.i < num_warmup``."""
    key, sub = jax.random.split(state.rng_key)
    position = state_cls(**state.z)
    new, info = step(sub, position, data, state.tuning, **(step_kwargs or {}))
    d = data.z_hat.shape[-1]
    adapted = adapt(state.tuning, info, state.i, *targets, min_log_alpha=math.log(d + 1.0))
    warm = state.i < num_warmup
    tuning = jax.tree.map(lambda a, b: jnp.where(warm, a, b), adapted, state.tuning)
    return _ChainState(state.i + 1, new._asdict(), tuning, info, key)


@functools.partial(jax.jit, static_argnames=("init", "step", "targets", "num_warmup",
                                             "num_samples"))
def run_chains_batched(keys, data, position, log_alpha, log_step, *, init, step, targets,
                       num_warmup, num_samples):
    """Chains of the kernel ``(init, step)`` for R releases in one compiled program: what
    ``numpyro.infer.MCMC`` with :class:`DPKernel` runs for each release, vmapped over them.

    ``keys`` (R, 2), one chain per release, or (R, C, 2), C chains each (numpyro's
    ``random.split(key, C)``); ``data``, ``position`` (dict), ``log_alpha`` (R, J) and
    ``log_step`` (R,) stacked over the releases. Returns the kept draws ``z`` (dict), ``info`` and
    ``tuning`` of sweeps num_warmup + 1 .. num_warmup + num_samples, shaped (R, [C,] K, ...)."""

    def one_chain(key, data, position, la, ls):
        state, state_cls, _ = _chain_start(init, step, key, data, position, la, ls)

        def sweep(s, _):
            s = _chain_sweep(step, state_cls, targets, num_warmup, s, data)
            return s, None

        def keep(s, _):
            s = _chain_sweep(step, state_cls, targets, num_warmup, s, data)
            return s, (s.z, s.info, s.tuning)

        state, _ = jax.lax.scan(sweep, state, None, length=num_warmup)
        return jax.lax.scan(keep, state, None, length=num_samples)[1]

    if keys.ndim == 3:  # C chains per release, vectorised like chain_method="vectorized"
        one_release = jax.vmap(one_chain, in_axes=(0, None, None, None, None))
    else:
        one_release = one_chain
    return jax.vmap(one_release)(keys, data, position, log_alpha, log_step)


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
        self.set_run_inputs({"position": init_position, "log_alpha": log_alpha_init,
                             "log_step": float(log_step_init)})

    def run_inputs(self):
        """What ``init`` reads besides its arguments (:func:`.mcmc._run_mcmc`)."""
        return {"position": self._init_position, "log_alpha": self._log_alpha_init,
                "log_step": self._log_step_init}

    def set_run_inputs(self, inputs):
        self._init_position = inputs["position"]
        self._log_alpha_init = inputs["log_alpha"]
        self._log_step_init = inputs["log_step"]

    @property
    def model(self):
        return self._model

    @property
    def default_fields(self):
        return ("z",)

    def _init_one(self, rng_key, data):
        state, self._state_cls, shapes = _chain_start(
            self._init, self._step, rng_key, data, self._init_position, self._log_alpha_init,
            self._log_step_init, self._step_kwargs,
            None if self._info_shapes is None or self._info_shapes[0] != data.z_hat.shape
            else self._info_shapes[1])
        self._info_shapes = (data.z_hat.shape, shapes)
        return state

    def _sample_one(self, state, data):
        return _chain_sweep(self._step, self._state_cls, self._targets, self._num_warmup, state,
                            data, self._step_kwargs)

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
