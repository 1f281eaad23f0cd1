"""numpyro's NUTS on a model of :mod:`bayesdp.models`: the runner of the NUTS methods
(:func:`run_nuts`), NUTS with a compiled initialisation (:func:`_nuts`), and the starting
inverse mass matrix of the Laplace approximation (:func:`_laplace_inverse_mass`).
"""

from __future__ import annotations

import functools

import numpy as np

from .._jax import RUN_ONCE, enable_x64, without_numpyro_checks
from .compilation_cache import default_compilation_cache
from .mcmc import (_cached_mcmc, _chain_method, _check_target, _data_shapes, _jax_versions,
                   _progress, _run_mcmc)
from .methods import MethodResult

# JAX and numpyro are imported inside the functions that use them: importing bayesdp.inference,
# as `bayesdp --help` does, loads neither

#: NUTS's options, with numpyro's defaults (``chain_method`` None: :func:`_nuts_chain_method`)
NUTS_OPTIONS = {"target_accept_prob": 0.8, "max_tree_depth": 10, "chain_method": None}


def run_nuts(model, data, pos, *, seed, num_samples, num_chains, num_warmup, progress_bar,
             target_accept_prob, max_tree_depth, chain_method, fallback_chain_method,
             inverse_mass=None, parametrisation="centred", build_only=False):
    """NUTS on ``model`` conditioned on ``data``, every chain from ``pos``.

    Parameters
    ----------
    model, data, pos : the numpyro model function, its data and the starting point of its
        sampled sites (constrained values; None entries are left out)
    seed, num_samples, num_chains, num_warmup, progress_bar : as in :func:`bayesdp.fit`
    target_accept_prob, max_tree_depth, chain_method : numpyro's NUTS options
    fallback_chain_method : str
        ``chain_method`` when none is given and JAX has fewer devices than chains.
    inverse_mass : array or None
        The diagonal inverse mass matrix warm-up starts from (None: the identity).
    parametrisation : str, recorded in attrs
    build_only : bool
        Return ``(mcmc, data)``, the MCMC object not run (:func:`.mcmc.build_mcmc`).

    Returns
    -------
    :class:`MethodResult`: the draws of every sampled or deterministic site except the
    reparametrisation's (``L_x``, ``v``, ``theta_std``, the Bartlett variables ``W_*``), NUTS's
    statistics per draw (divergences, acceptance, steps, step size) and attrs.
    """
    enable_x64()
    default_compilation_cache()
    from numpyro.infer import MCMC, init_to_value

    tap = _check_target("target_accept_prob", target_accept_prob)
    pos = {k: v for k, v in pos.items() if v is not None}
    cm = _chain_method(chain_method, _nuts_chain_method(num_chains, fallback_chain_method))
    pb = _progress(progress_bar)

    def make():
        kernel = _nuts(model, target_accept_prob=tap, max_tree_depth=int(max_tree_depth),
                       init_strategy=init_to_value(values=pos), inverse_mass_matrix=inverse_mass)
        return MCMC(kernel, num_warmup=num_warmup, num_samples=num_samples,
                    num_chains=num_chains, chain_method=cm, progress_bar=pb,
                    jit_model_args=True)

    if build_only:
        return make(), data
    # the compiled sampler of an earlier fit of the same shapes is reused; this release's start
    # is passed as init_params (unconstrained), not baked into the kernel
    key = ("nuts", model, tap, int(max_tree_depth), int(num_warmup), int(num_samples),
           int(num_chains), cm, pb, _data_shapes(data))
    mcmc = _cached_mcmc(key, make)
    mcmc.sampler.set_initial_inverse_mass(inverse_mass)
    draws, extra = _run_mcmc(
        mcmc, seed, data, ("diverging", "accept_prob", "num_steps", "adapt_state.step_size"),
        init_params=_unconstrained_init(model, data, pos, num_chains), progress_bar=pb)
    posterior = {k: np.asarray(v) for k, v in draws.items()
                 if not k.startswith("W_") and k not in ("theta_std", "L_x", "v")}
    stats = {
        "diverging": np.asarray(extra["diverging"]),
        "acceptance_rate": np.asarray(extra["accept_prob"]),
        "n_steps": np.asarray(extra["num_steps"]),
        "step_size": np.asarray(extra["adapt_state.step_size"]),
    }
    attrs = {"sampler": "numpyro NUTS", "parametrisation": parametrisation,
             "target_accept_prob": tap, "max_tree_depth": int(max_tree_depth),
             "chain_method": mcmc.chain_method, "num_warmup": num_warmup,
             "divergences": int(np.sum(stats["diverging"])), **_jax_versions()}
    return MethodResult(posterior=posterior, sample_stats=stats, attrs=attrs)


def _nuts_chain_method(num_chains, fallback):
    """NUTS's default ``chain_method``: ``"parallel"`` (one CPU device per chain, the chains on
    several cores at once) when JAX has a device for every chain, else ``fallback``. JAX has one
    CPU device unless asked for more before it starts: the ``bayesdp`` command asks
    (:func:`bayesdp._jax.use_host_devices`); in Python, call ``numpyro.set_host_device_count(4)``
    first. The draws differ from the vectorised run's for the same seed (same target; attrs
    record ``chain_method``)."""
    import jax

    if num_chains > 1 and jax.local_device_count() >= num_chains:
        return "parallel"
    return fallback


@without_numpyro_checks
def _unconstrained_init(model, data, pos, num_chains):
    """``pos`` (constrained values) in the unconstrained space NUTS works in, one copy per
    chain when there are several."""
    import jax.numpy as jnp

    u = _unconstrain(model)(data, {k: jnp.asarray(v) for k, v in pos.items()})
    if num_chains > 1:
        u = {k: jnp.broadcast_to(v, (num_chains,) + v.shape) for k, v in u.items()}
    return u


@functools.lru_cache(maxsize=8)
def _unconstrain(model):
    """numpyro's ``unconstrain_fn`` of ``model`` as one compiled program of (data, values):
    run eagerly it would compile each of the model's operations on its own."""
    import jax
    from numpyro.infer.util import unconstrain_fn

    return jax.jit(lambda data, values: unconstrain_fn(model, (data,), {}, values),
                   compiler_options=RUN_ONCE)


_HESSIAN_BATCH = 4


@without_numpyro_checks
def _laplace_inverse_mass(model, data, pos):
    """A diagonal inverse mass matrix for NUTS to start its warm-up from: the marginal
    variances diag(H^{-1}) of the Laplace approximation at the starting point ``pos``, H the
    Hessian of the potential in NUTS's unconstrained coordinates (its eigenvalues taken in
    absolute value and floored at 1e-10 of the largest, should the start not be in a convex
    region). Returns None (numpyro's identity) if the Hessian is not finite."""
    import jax.numpy as jnp
    from jax.flatten_util import ravel_pytree

    u0 = _unconstrained_init(model, data, pos, 1)
    hvp = _potential_hvp(model, tuple((k, np.shape(v)) for k, v in sorted(u0.items())))
    x = ravel_pytree(u0)[0]
    k = _HESSIAN_BATCH
    eye = np.eye(x.size + (-x.size) % k)[:, :x.size]  # padded to whole batches
    H = np.concatenate([np.asarray(hvp(jnp.asarray(eye[i:i + k]), x, data))
                        for i in range(0, len(eye), k)])[:x.size]
    if not np.all(np.isfinite(H)):
        return None
    w, V = np.linalg.eigh(0.5 * (H + H.T))
    w = np.maximum(np.abs(w), 1e-10 * np.abs(w).max())
    return jnp.asarray(np.einsum("ik,k,ik->i", V, 1.0 / w, V))


@functools.lru_cache(maxsize=8)
def _potential_hvp(model, shapes):
    """jit of _HESSIAN_BATCH Hessian-vector products of the model's potential over the flat
    unconstrained vector of sites with these ``shapes`` ((name, shape) pairs, sorted); the
    Hessian is assembled from them a batch of columns at a time."""
    import jax
    from numpyro.infer.util import potential_energy

    sizes = np.cumsum([0] + [int(np.prod(shape)) for _, shape in shapes])

    def unravel(x):  # the inverse of ravel_pytree on a dict: leaves in sorted key order
        return {k: x[sizes[i]:sizes[i + 1]].reshape(shape)
                for i, (k, shape) in enumerate(shapes)}

    def hvp(vs, x, data):
        grad = jax.grad(lambda x: potential_energy(model, (data,), {}, unravel(x)))
        return jax.vmap(lambda v: jax.jvp(grad, (x,), (v,))[1])(vs)

    return jax.jit(hvp, compiler_options=RUN_ONCE)


def _compiled_init(init_fn):
    """numpyro's HMC ``init_fn`` run as one compiled program (numpyro calls it outside ``jit``,
    so JAX would dispatch and compile the potential's operations one by one).

    ``init_fn`` sets some variables of its closure while it runs (numpyro's ``hmc``: the
    warm-up schedule, tree depth, momentum generator), from its static arguments only; the
    compiled program is reused only while those arguments are the ones it was traced with, so
    those variables stay right. Static arguments other than plain Python values fall back to
    numpyro's own call."""
    import jax

    traced = {}

    def plain(v):
        if isinstance(v, (list, tuple)):
            return all(plain(x) for x in v)
        return v is None or isinstance(v, (bool, int, float, str))

    def run(init_params, *, model_args, model_kwargs, rng_key, **static):
        # a starting inverse mass matrix (an array) is traced, like the data
        mass = {k: static.pop(k) for k in ("inverse_mass_matrix",) if k in static}
        if (not all(plain(v) for v in static.values())
                or any(isinstance(v, dict) for v in mass.values())):
            return init_fn(init_params, model_args=model_args, model_kwargs=model_kwargs,
                           rng_key=rng_key, **mass, **static)
        key = repr(sorted(static.items())) + repr({k: None if v is None else np.shape(v)
                                                   for k, v in mass.items()})
        if traced.get("key") != key:
            traced.update(key=key, fn=jax.jit(lambda p, a, k, r, m: init_fn(
                p, model_args=a, model_kwargs=k, rng_key=r, **m, **static)))
        return traced["fn"](init_params, model_args, model_kwargs, rng_key, mass)

    return run


def _nuts(model, **options):
    """``numpyro.infer.NUTS(model, **options)`` whose initialisation is compiled
    (:func:`_compiled_init`); the sampler itself is numpyro's, unchanged."""
    return _nuts_class()(model, **options)


@functools.lru_cache(maxsize=None)
def _nuts_class():
    from numpyro.infer import NUTS

    class CompiledInitNUTS(NUTS):
        def set_initial_inverse_mass(self, inverse_mass):
            """The diagonal inverse mass matrix the next run's warm-up starts from (None:
            the identity); numpyro reads it when the run initialises the kernel."""
            self._inverse_mass_matrix = inverse_mass

        def run_inputs(self):
            """What ``init`` reads besides its arguments (:func:`.mcmc._run_mcmc`)."""
            return {"inverse_mass": self._inverse_mass_matrix}

        def set_run_inputs(self, inputs):
            self._inverse_mass_matrix = inputs["inverse_mass"]

        def init(self, rng_key, num_warmup, init_params=None, model_args=(), model_kwargs={}):
            # numpyro's init wraps _sample_fn in vmap for vectorised chains every time it
            # runs; on a reused kernel that would map twice once JAX's caches are cleared
            # (jax.clear_caches, or this package's eviction), so each init starts again from
            # the unbatched sample function
            if getattr(self, "_unbatched_sample_fn", None) is not None:
                self._sample_fn = self._unbatched_sample_fn
            return super().init(rng_key, num_warmup, init_params, model_args, model_kwargs)

        def _init_state(self, rng_key, model_args, model_kwargs, init_params):
            new = self._init_fn is None
            out = super()._init_state(rng_key, model_args, model_kwargs, init_params)
            if new and self._init_fn is not None:
                self._init_fn = _compiled_init(self._init_fn)
                self._unbatched_sample_fn = self._sample_fn
            return out

    return CompiledInitNUTS
