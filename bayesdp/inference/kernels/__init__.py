"""Hand-written MCMC kernels, one module each: the paper's Algorithms 1 and 2 as published
(:mod:`.normalx_paper`, :mod:`.fixeds_paper`), bayesdp's kernels for the same posteriors
(:mod:`.normalx_interweaved`: centred and non-centred moves of (Sigma_x, S) interwoven and a slice
sampler on sigma_y^2; :mod:`.fixeds`: collapsed slice/Gibbs) and the collapsed normalX kernel
(:mod:`.collapsed`).

Every kernel is a pure function ``step(rng_key, state, data, tuning) -> (state, info)`` over
small NamedTuples, with ``init(position, log_alpha, log_step) -> (state, tuning)`` beside it and
its own ``Info``; :mod:`bayesdp.inference.mcmc` wraps them as numpyro ``MCMCKernel``s. ``data``
is a :class:`bayesdp.models.regression.ModelData`. The target is the joint density of
:func:`bayesdp.models.regression.normalx_model` (or ``fixeds_model``); the tests check each
move's log ratio against ``numpyro.infer.util.log_density`` of those models (docs/methods.md,
"How the kernels are tested").

Shared pieces: :mod:`.linalg` (small-matrix linear algebra, Bartlett factors, random numbers),
:mod:`.common` (positions, the eq. (12) terms, the Gibbs draw of Sigma_x, the collapsed
likelihood), :mod:`.slice` (the slice sampler on log sigma_y^2), :mod:`.adaptation` (the tuning
and its warm-up adaptation). Run under float64
(``jax.config.update("jax_enable_x64", True)``).
"""

from .adaptation import LOG_GROUP_STEP_INIT, Tuning, adapt
from .collapsed import collapsed_step
from .common import FixedSState, NormalXState
from .fixeds import fixeds_step
from .fixeds_paper import fixeds_paper_step, fixeds_theta_step
from .linalg import SMALL_D, bartlett
from .normalx_interweaved import normalx_step
from .normalx_paper import normalx_paper_step

__all__ = ["LOG_GROUP_STEP_INIT", "SMALL_D", "FixedSState", "NormalXState", "Tuning", "adapt",
           "bartlett", "collapsed_step", "fixeds_paper_step", "fixeds_step", "fixeds_theta_step",
           "normalx_paper_step", "normalx_step"]
