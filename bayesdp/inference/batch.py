"""``fit_batch``: many releases of one shape fitted at once, in one compiled program.

At the sizes of the paper's experiments (d <= 15, J <= 10) a fit costs XLA's per-operation
overhead and the compilation of its sampling loop, not flops. Replications of one experiment
cell give releases with the same shapes (J, d), so their fits can run as one vectorised program
(``jax.vmap`` over the releases) compiled once:

- "fast" (Algorithm 3): the Gaussian posterior of eq. (12) with S_j fixed, for every release at
  once (:func:`bayesdp.inference.fast.run_batch`); the draws are then made per release from its
  own seed, as in ``fit``.
- the hand-written MCMC kernels ("fixeds", and the paper's "fixeds-paper", "normalx-paper"): the
  chains of every release in one program (:func:`bayesdp.inference.kernel_runner.run_kernel_batch`),
  each release with the key ``fit`` gives it.
- "bs" (MCMC-B&S, appendix C.1, :mod:`bayesdp.paper.bs`): the ``lax.scan`` of Gibbs sweeps of
  every release and chain in one program, each release from its own starting point, priors and
  key, as ``fit`` gives them.

A method's record says whether it has such a path (:attr:`Method.run_batch`).

The result for release r equals ``fit(releases[r], seed=seeds[r])`` up to floating-point
rounding (the batched program may order sums differently; tests/inference/test_batch.py checks 1e-10
relative). Methods without a batched path (NUTS) are fitted one by one. Options, seeds and
priors are checked by ``fit``'s own :func:`.fit.prepare_fit` and the InferenceData made by
:func:`.fit.finish_fit`.
"""

from __future__ import annotations

import os
from typing import NamedTuple

import numpy as np

from ..errors import BayesdpInputError
from .fit import check_finite_posterior, finish_fit, prepare_fit
from .methods import get_method


def fit_batch(releases, method="fast", *, seeds=None, priors=None, num_samples=1000,
              num_chains=4, num_warmup=1000, progress_bar=None, **options):
    """``[fit(r, method, seed=s, ...) for r, s in zip(releases, seeds)]``, with the releases of
    one shape (J, d) fitted together in one compiled program where the method has a batched
    path ("fast", "bs" and the hand-written kernels; see ``bayesdp.inference.batch``).

    Parameters are those of :func:`bayesdp.fit`; ``seeds`` is one seed per release (None: each
    drawn from OS entropy and recorded in its attrs). A batched run draws no progress bar.
    Returns a list of arviz.InferenceData, one
    per release, in order; release r's equals ``fit``'s for the same seed up to floating-point
    rounding (1e-10 relative; the vectorised program may order its sums differently).
    """
    fitted = fit_batch_results(releases, method, seeds=seeds, priors=priors,
                               num_samples=num_samples, num_chains=num_chains,
                               num_warmup=num_warmup, progress_bar=progress_bar, **options)
    out = []
    for f in fitted:  # a loop, not a comprehension: the warnings' stacklevel names the caller
        out.append(finish_fit(f.release, method, f.seed, f.priors, f.result, stacklevel=4))
    return out


class Fitted(NamedTuple):
    """One release's fit before it becomes InferenceData: the (loaded) release, its seed, its
    resolved priors and the method's :class:`.methods.MethodResult`."""

    release: object
    seed: int
    priors: object
    result: object


def fit_batch_results(releases, method="fast", *, seeds=None, priors=None, num_samples=1000,
                      num_chains=4, num_warmup=1000, progress_bar=None, **options):
    """:func:`fit_batch` without the InferenceData: a list of :class:`Fitted` (for callers that
    need only the draws, e.g. ``bayesdp.paper.compare``). The draws are checked to be finite."""
    if isinstance(releases, (str, bytes, os.PathLike)) or hasattr(releases, "S_hat"):
        raise BayesdpInputError("releases: give a list of releases or release files (for one "
                                "release, use fit)")
    releases = list(releases)
    if not releases:
        raise BayesdpInputError("releases must not be empty")
    if seeds is None:
        seeds = [None] * len(releases)
    elif np.isscalar(seeds) or len(seeds) != len(releases):
        raise BayesdpInputError(f"seeds: give one seed per release ({len(releases)}), got "
                                f"{seeds!r}")
    prepared = [prepare_fit(r, method, s, priors, num_samples, num_chains, num_warmup)
                for r, s in zip(releases, seeds)]
    m = get_method(method)
    options = m.with_options(options)
    kw = dict(num_samples=int(num_samples), num_chains=int(num_chains),
              num_warmup=int(num_warmup), progress_bar=progress_bar)
    results = [None] * len(prepared)
    if m.run_batch is None:
        for i, (rel, seed, pri) in enumerate(prepared):
            results[i] = m.run(rel, pri, seed=seed, **kw, **options)
    else:
        groups = {}  # releases of one shape run together
        for i, (rel, _, _) in enumerate(prepared):
            groups.setdefault((np.shape(rel.S_hat), rel.intercept), []).append(i)
        for idx in groups.values():
            out = m.run_batch([prepared[i][0] for i in idx], [prepared[i][2] for i in idx],
                              seeds=[prepared[i][1] for i in idx], **kw, **options)
            for i, res in zip(idx, out):
                results[i] = res
    for res in results:
        check_finite_posterior(res.posterior, method)
    return [Fitted(rel, seed, pri, res) for (rel, seed, pri), res in zip(prepared, results)]
