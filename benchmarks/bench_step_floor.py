"""Where a NUTS leapfrog step of ``normalx`` spends its time, against two floors measured in
the same run (issue 36, item 3: "a faster step, or a reason measured against the floor why
not").

At d = 5, J = 10 (the paper's simulation, n = 1e5, eps = 1), 4 chains vectorised as ``fit``
runs them in Python, after compilation:

- ``gradient``: one gradient of the non-centred model's potential (numpyro's
  ``initialize_model``), for the 4 chains at once, timed in a compiled loop of ``--reps``;
- ``step``: NUTS iterations of ``fit``'s kernel (numpyro's NUTS from ``fit``'s start and
  Laplace mass matrix, after 200 warm-up iterations) for the 4 chains, timed in a compiled
  loop, divided by their leapfrog steps (those of the chain that took most, which the
  vectorised chains wait for);
- the flop floor: the gradient's floating-point operations (XLA's cost analysis) at the rate of
  a 200 x 200 matrix product in the same process;
- the dispatch floor: the number of operations XLA runs one after another in the gradient's
  compiled program (the top-level instructions of its entry computation, each fusion one)
  times the cost of one such operation, measured on a compiled loop of ``--chain`` dependent
  small products of the gradient's size.

    .venv/bin/python benchmarks/bench_step_floor.py

Run it alone on the machine; the ratios are what count.
"""

from __future__ import annotations

import argparse
import os
import time
import warnings

os.environ.setdefault("BAYESDP_COMPILATION_CACHE", "off")


def _timed(f, *args):
    import jax

    jax.block_until_ready(f(*args))
    t = time.perf_counter()
    jax.block_until_ready(f(*args))
    return time.perf_counter() - t


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--d", type=int, default=5)
    ap.add_argument("--nodes", type=int, default=10)
    ap.add_argument("--reps", type=int, default=2000)
    ap.add_argument("--chain", type=int, default=2000)
    args = ap.parse_args(argv)

    import jax
    import jax.numpy as jnp
    import numpy as np
    from jax.flatten_util import ravel_pytree
    from numpyro.infer.util import initialize_model, init_to_value

    import bayesdp
    from bayesdp._jax import enable_x64, numpyro_checks_off
    from bayesdp.inference import normalx, nuts

    enable_x64()
    sim = bayesdp.simulate(n=100_000, d=args.d, seed=1)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds,
                          nodes=args.nodes, seed=1)
    priors = bayesdp.Priors().resolve(rel)
    C = 4
    with numpyro_checks_off():
        model, data, pos = normalx.setup(rel, priors, centred=False)
        info = initialize_model(jax.random.PRNGKey(0), model, model_args=(data,),
                                init_strategy=init_to_value(values=pos))
        flat0, unravel = ravel_pytree(info.param_info.z)
        D = flat0.size
        potential = lambda x: info.potential_fn(unravel(x))  # noqa: E731
        grad = jax.vmap(jax.grad(potential))
        x0 = jnp.broadcast_to(flat0, (C, D)) + 1e-3 * jax.random.normal(
            jax.random.PRNGKey(1), (C, D))

        def grad_loop(x):
            return jax.lax.fori_loop(0, args.reps, lambda i, v: v + 1e-12 * grad(v), x)

        t_grad = _timed(jax.jit(grad_loop), x0) / args.reps
        compiled = jax.jit(grad).lower(x0).compile()
        cost = compiled.cost_analysis()
        cost = cost[0] if isinstance(cost, list) else cost
        flops = float(cost.get("flops", float("nan")))
        text = compiled.as_text()
        entry = text[text.index("ENTRY"):]
        entry = entry[:entry.index("\n}")]
        ops = sum(1 for line in entry.splitlines()[1:]
                  if " = " in line and not any(k in line for k in (
                      " parameter(", " constant(", " get-tuple-element(", " tuple(",
                      " bitcast(")))

        # one NUTS iteration of fit's kernel, 4 chains vectorised
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mcmc, mdata = bayesdp.inference.mcmc.build_mcmc(
                "normalx", rel, priors, num_samples=args.reps // 4, num_warmup=200,
                num_chains=C)
        kernel = mcmc.sampler
        keys = jax.random.split(jax.random.PRNGKey(2), C)
        init = jax.vmap(lambda k: kernel.init(k, 200, None, (mdata,), {}))(keys)
        sample = jax.vmap(lambda s: kernel.sample(s, (mdata,), {}))
        n_iter = args.reps // 4

        def nuts_loop(s):
            def body(i, carry):
                s, steps = carry
                s = sample(s)
                return s, steps + jnp.max(s.num_steps)
            return jax.lax.fori_loop(0, n_iter, body, (s, 0))

        f = jax.jit(nuts_loop)
        adapted, _ = jax.block_until_ready(f(init))  # past the 200 warm-up iterations
        t = time.perf_counter()
        _, steps = jax.block_until_ready(f(adapted))
        t_nuts = time.perf_counter() - t
        t_step = t_nuts / int(steps)

    # floors measured in this process
    A = np.random.default_rng(0).normal(size=(200, 200))
    t_mm = min(_timed(lambda: A @ A) for _ in range(5))
    rate = 2 * 200 ** 3 / t_mm
    M = jnp.eye(args.d)[None].repeat(C, 0) * 0.999

    def chain(m):
        return jax.lax.fori_loop(0, args.chain, lambda i, v: v @ M, m)

    t_op = _timed(jax.jit(chain), M) / args.chain
    print(f"d = {args.d}, J = {args.nodes}, {C} chains vectorised, {D} unconstrained dimensions")
    print(f"gradient (4 chains)                 {t_grad * 1e6:9.1f} us")
    print(f"NUTS leapfrog step (4 chains)       {t_step * 1e6:9.1f} us  "
          f"({int(steps) / n_iter:.1f} steps per iteration)")
    print(f"  gradient's share of a step        {t_grad / t_step:9.2f}")
    print(f"flop floor of the gradient          {flops / rate * 1e6:9.1f} us  "
          f"({flops:.3g} flops at {rate / 1e9:.1f} GFLOP/s)")
    print(f"sequential operations in its program {ops:8d}")
    print(f"one small operation (measured)      {t_op * 1e6:9.2f} us")
    print(f"dispatch floor of the gradient      {ops * t_op * 1e6:9.1f} us  "
          f"(gradient / floor {t_grad / (ops * t_op):.2f})")


if __name__ == "__main__":
    main()
