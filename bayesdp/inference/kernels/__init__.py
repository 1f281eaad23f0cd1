"""Hand-written MCMC kernels, one module each: :mod:`.fixeds` (method ``"fixeds"``: S_j fixed,
log sigma_y^2 by independence Metropolis-Hastings from a grid of its marginal with theta
integrated out, then theta | sigma_y^2). The paper's Algorithms 1 and 2 as published are in
:mod:`bayesdp.paper.kernels`.

Every kernel is a pure function ``step(rng_key, state, data, tuning) -> (state, info)`` over
small NamedTuples, with ``init(position, log_alpha, log_step) -> (state, tuning)`` beside it and
its own ``Info``; :mod:`bayesdp.inference.kernel_runner` runs them as numpyro ``MCMCKernel``s
(:mod:`bayesdp.inference.dp_kernel`). ``data`` is a :class:`bayesdp.models.regression.ModelData`.
The target is the joint density of :func:`bayesdp.models.regression.fixeds_model` (or
``normalx_model``); the tests check each move's log ratio against
``numpyro.infer.util.log_density`` of those models (docs/methods.md, "How the kernels are
tested").

Shared pieces: :mod:`.linalg` (small-matrix linear algebra, Bartlett factors, random numbers),
:mod:`.common` (positions, the eq. (12) terms, the Gibbs draw of Sigma_x, the Wishart random
walk, the likelihood with theta integrated out), :mod:`.sigma_y2` (the marginal of
log sigma_y^2 and its grid proposal), :mod:`.adaptation` (the tuning and its warm-up
adaptation). Run under float64 (``jax.config.update("jax_enable_x64", True)``).
"""
