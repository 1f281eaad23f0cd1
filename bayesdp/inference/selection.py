"""Bayesian variable selection and model averaging from one release: the posterior probability
of each subset of the features and each feature's inclusion probability, with the likelihood of
the default method ``"eiv"`` (:mod:`bayesdp.inference.eiv`). Nothing is spent beyond the
release: S_hat and z_hat hold the statistics of every subset of the features (their sub-blocks),
so choosing among subsets is post-processing.

**Models.** A model gamma is a subset of the features; an intercept, if the release has one, is
in every model. Within gamma, theta_k = 0 for k outside gamma, and eiv's likelihood of the pooled
release is restricted to gamma: with S_g = S_hat[:, gamma] (d x |gamma|),

    z_hat | theta_gamma, sigma_y^2 ~ N(S_g theta_gamma, M_gamma),
    M_gamma = sigma_y^2 S_+ + Var(e_z - E t_gamma),

the noise on S pushed through a plug-in t_gamma that is zero outside gamma (by default eiv's
plug-in of the full model with its entries outside gamma set to zero; ``plugin="per-model"``
iterates each model's own fixed point as eiv does for the full model). Every model describes the
same d numbers z_hat, so their evidences compare. A release with y^T y adds eiv's ``yty_hat``
factor (:func:`bayesdp.models.regression.eiv_yty_moments`) with theta's conditional in gamma.

**Priors.** Over models, beta-binomial(1, 1) on the model size (the default: the inclusion
probability w ~ Beta(1, 1) integrated out, so p(gamma) = B(k + 1, p - k + 1) / B(1, 1) for k of
the p features that can be left out, every size equally likely), beta-binomial(a, b), or a fixed
inclusion probability w (p(gamma) = w^k (1 - w)^(p - k); w = 1/2: every model equally likely).
Within gamma, eiv's prior marginalised to gamma: r ~ LogUniform(scale_min, 1), theta_gamma | r ~
N(m_gamma, D_r C_gamma D_r), sigma_y^2 ~ InvGamma(a, b) truncated to sigma_y^2 <= sigma_y2_max.

**Evidence.** Given (sigma_y^2, r), theta_gamma is integrated in closed form (the Gaussian of
:func:`eiv.log_marginal` with the prior restricted to gamma), in the precision form of eiv's grid:

    log p(z_hat | sigma_y^2, r, gamma) = -1/2 (d log 2 pi + log|M| + log|C_r| + log|P| + q),
    P = S_g^T M^-1 S_g + C_r^-1,   q = z_hat^T M^-1 z_hat + m^T C_r^-1 m - h^T P^-1 h,
    h = S_g^T M^-1 z_hat + C_r^-1 m,   C_r = D_r C_gamma D_r,

and (sigma_y^2, r) are integrated on a grid in (log sigma_y^2, log r) as eiv integrates them: a
coarse grid over the prior's range (eiv's), then finer grids over each model's cells that hold
the mass (trapezoid rule, the priors normalised), so that the full model's evidence is eiv's (a
test checks it against eiv's own grid). p(gamma | release) is proportional to p(gamma) times
the evidence.

**Model space.** Up to :data:`MAX_ENUMERATION_FEATURES` features that can be left out (2^16 =
65536 models), every model is evaluated (``method="enumeration"``, vectorised over models of one
size); beyond, an add-delete-swap Metropolis sampler over models (MC^3; ``method="mc3"``) runs
several chains from spread-out starts, inclusion probabilities are the share of kept steps that
include each feature, and the chains must agree (:data:`MC3_AGREEMENT`; one chain: its two
halves). ``method="auto"`` (the default) picks enumeration when it is within the limit.

**Model averaging.** The posterior of theta is the mixture over models: each draw picks a model
(with its posterior probability, or from the sampler's kept steps), then a grid cell and theta_gamma
from that model's eiv posterior; theta is zero outside the model. It is returned as ArviZ
InferenceData, so :func:`bayesdp.predict` gives model-averaged predictive intervals.

NumPy only: nothing to compile.

Example::

    import bayesdp
    sim = bayesdp.simulate(n=20_000, d=6, seed=1)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=2)
    sel = bayesdp.select(rel, seed=0)
    print(sel)                                   # inclusion probabilities and the top models
    pred = bayesdp.predict(sel.idata, sim.X[:5], seed=0)   # model-averaged predictions
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import warnings
from typing import TYPE_CHECKING, Optional

import numpy as np

from ..errors import BayesdpInputError, ConvergenceWarning, check_seed
from . import eiv

# scipy, pandas, the release layer, eiv and the ArviZ module are imported in the functions that
# use them: ``bayesdp select --help`` loads none of them
if TYPE_CHECKING:
    import pandas as pd

#: enumeration evaluates every model when at most this many features can be left out (2^16 =
#: 65536 models); beyond it ``method="auto"`` samples models (MC^3)
MAX_ENUMERATION_FEATURES = 16
METHODS = ("auto", "enumeration", "mc3")
PLUGINS = ("restricted", "per-model")
#: the MC^3 chains agree when their inclusion probabilities differ by at most this, feature by
#: feature (largest difference between any two chains; one chain: between its two halves)
MC3_AGREEMENT = 0.1
#: grid points per model after the shared coarse grid (eiv's): sigma_y^2 and r of the final
#: grid, and, for releases with y^T y (which pins sigma_y^2 down), sigma_y^2 of the final grid
#: after a first refinement to GRID[0] points
GRID = (24, 12, 16)
_ITERATIONS, _TOL = 60, 1e-7  # plugin="per-model": the fixed point of each model's t (as eiv)
_CHUNK_FLOATS = 4_000_000  # floats of the largest array of one batch of models (32 MB)


@dataclasses.dataclass
class Selection:
    """The result of :func:`select`.

    Attributes
    ----------
    inclusion : pandas Series
        Posterior inclusion probability of each feature, p(theta_k != 0 | release), indexed by
        feature name (an intercept: 1, it is in every model).
    models : pandas DataFrame
        The most probable models, best first: ``features`` (the included features, a tuple; the
        intercept is not listed), ``size``, ``log_evidence`` (log p(release | gamma)),
        ``log_prior`` (log p(gamma)), ``probability`` (p(gamma | release); for ``"mc3"`` the
        share of kept sampler steps) and ``log_bf`` (log Bayes factor against the model of
        largest evidence, as R's BAS reports it).
    method : str
        ``"enumeration"`` (every model evaluated) or ``"mc3"`` (models sampled).
    idata : arviz.InferenceData
        The model-averaged posterior: ``theta`` (zero outside each draw's model), ``sigma_y2``
        and ``theta_scale``; attrs ``method="select"``, ``model_averaged``, ``selection_method``.
    model_prior : str
        The prior over models, in words.
    details : dict
        How it was computed: features that can be left out, models evaluated, the plug-in, the
        grids; for ``"mc3"`` the steps, acceptance rate, each chain's inclusion probabilities
        and their largest difference (one chain: between its halves).
    """

    inclusion: "pd.Series"
    models: "pd.DataFrame"
    method: str
    idata: object
    model_prior: str
    details: dict

    def table(self) -> "pd.DataFrame":
        """One row per feature: ``inclusion`` probability, the model-averaged posterior
        ``mean`` and ``sd`` of theta_k (zero counted where it is excluded) and ``mean_if_in``,
        its posterior mean in the models that include it (NaN if no draw does)."""
        import pandas as pd

        from .. import diagnostics

        theta = diagnostics.posterior_array(self.idata, "theta")
        inside = theta != 0.0
        with np.errstate(invalid="ignore", divide="ignore"):
            cond = np.where(inside.any(axis=0), (theta * inside).sum(axis=0) / inside.sum(axis=0),
                            np.nan)
        return pd.DataFrame({"inclusion": self.inclusion.to_numpy(), "mean": theta.mean(axis=0),
                             "sd": theta.std(axis=0, ddof=1), "mean_if_in": cond},
                            index=self.inclusion.index)

    def __str__(self):
        d = self.details
        if self.method == "enumeration":
            how = f"every one of the {d['models_evaluated']} models evaluated"
        else:
            how = (f"MC^3, {d['chains']} chains x {d['steps']} steps ({d['warmup']} warm-up), "
                   f"{d['models_evaluated']} distinct models; chains agree to "
                   f"{d['chain_max_difference']:.3f} (limit {MC3_AGREEMENT})")
            if d["why_mc3"] != "asked for":
                how += f"; models sampled because {d['why_mc3']}"
        lines = [f"Bayesian variable selection from the release ({self.method}: {how})",
                 f"prior over models: {self.model_prior}; within a model: eiv's prior",
                 "", "features (inclusion probability; model-averaged mean and sd of theta):",
                 _format(self.table()), "", "top models:", _format(self._models_text()),
                 "log_bf: the natural log of the Bayes factor of each model against the most "
                 "probable one (its evidence over the best's; 0 for the best, -2.3 is 10 times "
                 "less evidence)"]
        return "\n".join(lines)

    def __repr__(self):
        return self.__str__()

    def _models_text(self):
        table = self.models.copy()
        table["features"] = [" + ".join(f) if f else "(none)" for f in table["features"]]
        return table

    def plot(self, path=None, *, ax=None, title=None):
        """A horizontal bar per feature with its inclusion probability (and a line at 0.5).
        Draws on ``ax`` when given; else on a new figure, saved at ``path`` (when given).
        Returns the Axes."""
        import matplotlib

        if ax is None and path is not None:
            matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        own = ax is None
        if own:
            fig, ax = plt.subplots(figsize=(6.0, 0.35 * len(self.inclusion) + 1.4))
        names = list(self.inclusion.index)[::-1]
        ax.barh(names, self.inclusion.to_numpy()[::-1], color="C0")
        ax.axvline(0.5, color="0.5", lw=0.8, ls="--")
        ax.set_xlim(0.0, 1.0)
        ax.set_xlabel("posterior inclusion probability")
        ax.set_title(title or f"inclusion probabilities ({self.method})")
        if own:
            ax.figure.tight_layout()
            if path is not None:
                ax.figure.savefig(path, dpi=100)
                plt.close(ax.figure)
        return ax


def _format(table):
    return table.to_string(float_format=lambda v: f"{v: .4f}")


def select(release, *, priors=None, model_prior="beta-binomial", method="auto", seed=None,
           num_samples=1000, num_chains=4, steps=None, top=10, plugin="restricted",
           scale_min=None, sigma_y2_max=None) -> Selection:
    """Posterior probabilities of subsets of the features, each feature's inclusion
    probability, and the model-averaged posterior of theta, from a release alone.

    Parameters
    ----------
    release : Release or path to a release file
    priors : Priors or None
        Within a model: eiv's priors (default ``Priors()``, as :func:`bayesdp.fit`) restricted
        to the model's features.
    model_prior : "beta-binomial", (a, b) or float
        Prior over models: ``"beta-binomial"`` (default) is beta-binomial(1, 1) on the model
        size (every size equally likely, a uniform prior within a size); ``(a, b)`` is
        beta-binomial(a, b); a number w in (0, 1) includes each feature independently with
        probability w (0.5: every model equally likely).
    method : "auto", "enumeration" or "mc3"
        ``"enumeration"`` evaluates all 2^p models (p the features that can be left out, at most
        :data:`MAX_ENUMERATION_FEATURES`); ``"mc3"`` samples models; ``"auto"`` (default):
        enumeration when p is within the limit, else MC^3.
    seed : int or None
        Seed of every random draw (None: fresh OS entropy, recorded in the attrs).
    num_samples, num_chains : int
        Draws of the model-averaged posterior per chain, and chains (for ``"mc3"``, the
        sampler's chains, each kept step thinned to ``num_samples``).
    steps : int or None
        MC^3 steps per chain, the first fifth warm-up (default max(5000, 500 p)).
    top : int or None
        Models in :attr:`Selection.models` (None: every model evaluated or visited).
    plugin : "restricted" or "per-model"
        The theta through which each model's S noise is pushed: eiv's plug-in of the full
        model, zero outside the model (default), or each model's own fixed point (slower: up to
        60 evaluations of every model; docs/selection.md measures the difference).
    scale_min, sigma_y2_max : as for ``fit(method="eiv")``.

    Returns
    -------
    :class:`Selection`

    Warns
    -----
    ConvergenceWarning
        ``"mc3"``: when the chains' inclusion probabilities differ by more than
        :data:`MC3_AGREEMENT` for some feature (one chain: its two halves).
    """
    from ..models.priors import Priors
    from ..releases import Release, load_release

    if not isinstance(release, Release):
        release = load_release(release)
    if method not in METHODS:
        raise BayesdpInputError(f"method must be one of {list(METHODS)}, got {method!r}")
    if plugin not in PLUGINS:
        raise BayesdpInputError(f"plugin must be one of {list(PLUGINS)}, got {plugin!r}")
    for name, v in (("num_samples", num_samples), ("num_chains", num_chains)):
        _check_count(name, v)
    if top is not None:
        _check_count("top", top)
    seed = check_seed(seed)
    p = release.d - int(release.intercept)  # the features that can be left out
    log_prior_of_size, prior_text = model_prior_log(model_prior, p)
    if method == "enumeration" and p > MAX_ENUMERATION_FEATURES:
        raise BayesdpInputError(
            f"method='enumeration' evaluates all 2^{p} models of the {p} features that can be "
            f"left out; at most 2^{MAX_ENUMERATION_FEATURES} = {2 ** MAX_ENUMERATION_FEATURES} "
            "are enumerated: use method='mc3' (or 'auto', which picks it)")
    why = "asked for"
    if method == "mc3" or (method == "auto" and p > MAX_ENUMERATION_FEATURES):
        if method == "auto":
            why = (f"the 2^{p} models of {p} features are more than the "
                   f"2^{MAX_ENUMERATION_FEATURES} that are enumerated")
        method = "mc3"
        if steps is None:
            steps = max(5000, 500 * p)
        _check_count("steps", steps)
        if steps < 10:
            raise BayesdpInputError(f"steps must be at least 10, got {steps}")
    elif steps is not None:
        raise BayesdpInputError("steps is the MC^3 sampler's; enumeration takes none "
                                "(pass method='mc3' to sample models)")
    else:
        method = "enumeration"
    if seed is None:
        seed = secrets.randbits(63)
    priors = (priors or Priors()).resolve(release)
    post = eiv.eiv_posterior(release, priors,
                             scale_min=eiv.SCALE_MIN if scale_min is None else scale_min,
                             sigma_y2_max=sigma_y2_max)
    space = model_space(post["data"], post["theta_plugin"], plugin=plugin,
                        names=release.feature_names)
    rng = np.random.default_rng(seed)
    if method == "enumeration":
        masks = all_models(space)
        ev = evidence(space, masks)
        log_post = ev["log_evidence"] + log_prior_of_size[_sizes(space, masks)]
        prob = np.exp(log_post - _logsumexp(log_post))
        picks = rng.choice(len(masks), size=(num_chains, num_samples), p=prob / prob.sum())
        inclusion = prob @ masks
        counts = None
        details = {"models_evaluated": len(masks)}
    else:
        run = mc3(space, log_prior_of_size, rng, num_chains=num_chains, steps=steps)
        masks, ev = run["masks"], run["evidence"]
        kept = run["visits"]  # (chains, kept steps) indices into masks
        counts = np.bincount(kept.ravel(), minlength=len(masks))
        prob = counts / counts.sum()
        inclusion = masks[kept].mean(axis=(0, 1))
        at = np.linspace(0, kept.shape[1] - 1, min(num_samples, kept.shape[1])).round()
        picks = kept[:, at.astype(int)]
        groups = run["chain_inclusion"] if num_chains > 1 else run["half_inclusion"]
        gap = groups.max(0) - groups.min(0)
        spread = float(gap.max())
        details = {"models_evaluated": len(masks), "why_mc3": why, "chains": num_chains,
                   "steps": steps,
                   "warmup": run["warmup"], "acceptance": run["acceptance"],
                   "chain_inclusion": run["chain_inclusion"].tolist(),
                   "chain_max_difference": spread}
        if spread > MC3_AGREEMENT:
            name = space.names[space.free[int(np.argmax(gap))]]
            what = f"the {num_chains} MC^3 chains" if num_chains > 1 else \
                "the two halves of the MC^3 chain"
            warnings.warn(
                f"select: {what} disagree on the inclusion probability of {name!r} by "
                f"{spread:.3f} (more than {MC3_AGREEMENT}); the sampler has not converged: run "
                "more steps (steps=...)", ConvergenceWarning, stacklevel=2)
    details.update(free_features=[space.names[j] for j in space.free], plugin=plugin,
                   grid=list(GRID), seed=int(seed))
    theta, s2, r = draw(space, masks, ev, picks, rng)
    names = list(space.names)
    import pandas as pd

    inclusion = pd.Series(np.clip(inclusion, 0.0, 1.0), index=pd.Index(names, name="feature"),
                          name="inclusion")  # an intercept's is 1: it is in every model
    models = _models_table(space, masks, ev["log_evidence"], log_prior_of_size, prob,
                           counts, top)
    idata = _inference_data(release, priors, theta, s2, r, method, seed, prior_text, plugin,
                            post, details)
    return Selection(inclusion=inclusion, models=models, method=method, idata=idata,
                     model_prior=prior_text, details=details)


def _check_count(name, v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
        raise BayesdpInputError(f"{name} must be a whole number >= 1, got {v!r}")


# ---------------------------------------------------------------------------------------------
# the model space and its prior


@dataclasses.dataclass(frozen=True)
class ModelSpace:
    """What every model shares: ``data`` (eiv's EivData of the full model), ``theta_full``
    (eiv's plug-in of the full model), ``free`` (indices of the features that can be left out;
    an intercept cannot), ``names``, the shared coarse grid ``log_s2`` / ``log_r`` (eiv's first
    pass) and the plug-in rule."""

    data: object
    theta_full: np.ndarray
    free: np.ndarray
    names: tuple
    log_s2: np.ndarray
    log_r: np.ndarray
    plugin: str = "restricted"


def model_space(data, theta_full, *, plugin="restricted", names=None) -> ModelSpace:
    """The :class:`ModelSpace` of an EivData and the full model's plug-in theta, with eiv's
    coarse grid: sigma_y^2 over [min(InvGamma(a, b)'s 1e-12 quantile, sigma_y2_max / 1e6),
    sigma_y2_max], r over [scale_min, 1], both evenly in log space."""
    from scipy import stats


    d = len(data.z_hat)
    lo = min(float(stats.invgamma.ppf(1e-12, data.a, scale=data.b)), data.sigma_y2_max / 1e6)
    return ModelSpace(
        data=data, theta_full=np.asarray(theta_full, dtype=float),
        free=np.flatnonzero(np.asarray(data.slopes) > 0), plugin=plugin,
        names=tuple(names) if names is not None else tuple(f"x{i}" for i in range(d)),
        log_s2=np.linspace(np.log(lo), np.log(data.sigma_y2_max), eiv._COARSE[0]),
        log_r=np.linspace(np.log(float(np.ravel(data.scale_min)[0])), 0.0, eiv._COARSE[1]))


def model_prior_log(model_prior, p):
    """log p(gamma) as a function of the model size k = 0..p ((p + 1,) array) and the prior in
    words. Beta-binomial(a, b): p(gamma) = B(k + a, p - k + b) / B(a, b); fixed inclusion
    probability w: w^k (1 - w)^(p - k)."""
    from scipy import special

    k = np.arange(p + 1)
    if isinstance(model_prior, str):
        if model_prior != "beta-binomial":
            raise BayesdpInputError(f"model_prior must be 'beta-binomial', (a, b) or an "
                                    f"inclusion probability in (0, 1), got {model_prior!r}")
        model_prior = (1.0, 1.0)
    if isinstance(model_prior, (tuple, list)):
        if len(model_prior) != 2 or not all(
                isinstance(v, (int, float, np.floating)) and not isinstance(v, bool)
                and 0 < v < np.inf for v in model_prior):
            raise BayesdpInputError(f"model_prior (a, b) must be two positive numbers, got "
                                    f"{model_prior!r}")
        a, b = (float(v) for v in model_prior)
        log_p = special.betaln(k + a, p - k + b) - special.betaln(a, b)
        text = (f"beta-binomial({a:g}, {b:g}) on the model size" +
                (" (every size equally likely)" if a == b == 1 else ""))
        return log_p, text
    if isinstance(model_prior, bool) or not isinstance(model_prior, (int, float, np.floating)) \
            or not 0.0 < model_prior < 1.0:
        raise BayesdpInputError(f"model_prior must be 'beta-binomial', (a, b) or an inclusion "
                                f"probability in (0, 1), got {model_prior!r}")
    w = float(model_prior)
    return (k * math.log(w) + (p - k) * math.log1p(-w),
            f"each feature in with probability {w:g}" +
            (" (every model equally likely)" if w == 0.5 else ""))


def all_models(space) -> np.ndarray:
    """Every model as a boolean mask over the d features ((2^p, d); the features that cannot
    be left out are in all of them), model i including free feature j when bit j of i is set."""
    d, p = len(space.names), len(space.free)
    codes = np.arange(2 ** p, dtype=np.int64)
    masks = np.ones((2 ** p, d), dtype=bool)
    masks[:, space.free] = (codes[:, None] >> np.arange(p)) & 1
    return masks


def _sizes(space, masks):
    return masks[:, space.free].sum(axis=1)


# ---------------------------------------------------------------------------------------------
# the evidence of each model


def evidence(space, masks) -> dict:
    """log p(release | gamma) of each model (row of ``masks``, (N, d) bool) and what drawing
    from it needs. Returns a dict of arrays over the N models: ``log_evidence``, ``log_s2``
    (N, G) and ``log_r`` (N, H) (its final grid), ``theta0`` (N, d) (its plug-in) and ``mean``
    (N, d) (theta's posterior mean in the model, zero outside it)."""
    N, d = masks.shape
    out = {"log_evidence": np.empty(N), "log_s2": np.empty((N, GRID[2] if _yty(space)
                                                            else GRID[0])),
           "log_r": np.empty((N, GRID[1])), "theta0": np.empty((N, d)), "mean": np.zeros((N, d))}
    sizes = masks.sum(axis=1)
    for k in np.unique(sizes):
        rows = np.flatnonzero(sizes == k)
        for chunk in np.array_split(rows, max(1, math.ceil(len(rows) / _chunk(space, k)))):
            res = _evidence_of_size(space, masks[chunk])
            for key, v in res.items():
                out[key][chunk] = v
    return out


def _yty(space):
    return space.data.yty_hat is not None


def _chunk(space, k):
    """Models per batch: the largest array, (N, G, H, k, k) or (N, G, d, d), within
    _CHUNK_FLOATS floats."""
    d = len(space.names)
    G, H = max(GRID[0], GRID[2], len(space.log_s2)), max(GRID[1], len(space.log_r))
    per_model = 4 * G * (H * max(int(k), 1) ** 2 + d * d)
    return max(1, _CHUNK_FLOATS // per_model)


def _evidence_of_size(space, masks):
    """:func:`evidence` for models of one size. Each model's grid: eiv's coarse grid (shared),
    then, over the cells that hold the model's mass, ``GRID[0]`` points of sigma_y^2 and
    ``GRID[1]`` of r; with y^T y (which pins sigma_y^2 down) the first refinement is of
    sigma_y^2 alone and a second one gives ``GRID[2]`` points of sigma_y^2. With
    ``plugin="per-model"`` each model's plug-in is then iterated to its fixed point on that
    grid (t <- (t + theta's posterior mean) / 2, as eiv does for the full model)."""

    N = len(masks)
    theta0 = space.theta_full * masks
    noise = plugin_noise(space.data, theta0)
    s2 = np.broadcast_to(space.log_s2, (N, len(space.log_s2)))
    r = np.broadcast_to(space.log_r, (N, len(space.log_r)))
    cells = model_cells(space.data, masks, theta0, s2, r, noise=noise)["log_cell"]
    s2 = eiv._refine_rows(s2, cells.max(axis=2), GRID[0])
    if _yty(space):
        cells = model_cells(space.data, masks, theta0, s2, r, noise=noise)["log_cell"]
        s2 = eiv._refine_rows(s2, cells.max(axis=2), GRID[2])
    r = eiv._refine_rows(r, cells.max(axis=1), GRID[1])
    out = model_cells(space.data, masks, theta0, s2, r, moments=True, noise=noise)
    if space.plugin == "per-model":
        for _ in range(_ITERATIONS):
            new = _mixture_mean(out, s2, r, masks)
            if np.all(np.linalg.norm(new - theta0, axis=1)
                      <= _TOL * (1.0 + np.linalg.norm(new, axis=1))):
                break
            theta0 = 0.5 * (theta0 + new)
            out = model_cells(space.data, masks, theta0, s2, r, moments=True)
    log_w = out["log_cell"] + _trapezoid_log_weights(s2)[:, :, None] \
        + _trapezoid_log_weights(r)[:, None, :]
    return {"log_evidence": _logsumexp(log_w, axis=(1, 2)), "log_s2": s2, "log_r": r,
            "theta0": theta0, "mean": _mixture_mean(out, s2, r, masks)}


def _mixture_mean(cells, log_s2, log_r, masks):
    """theta's posterior mean in each model (N, d): the cells' means weighted by the cells'
    posterior mass (trapezoid rule), zero outside the model."""
    log_w = cells["log_cell"] + _trapezoid_log_weights(log_s2)[:, :, None] \
        + _trapezoid_log_weights(log_r)[:, None, :]
    w = np.exp(log_w - _logsumexp(log_w, axis=(1, 2))[:, None, None])
    N, d = masks.shape
    out = np.zeros((N, d))
    out[masks] = np.einsum("ngh,nghk->nk", w, cells["mean"]).ravel()
    return out


def _trapezoid_log_weights(points):
    """:func:`bayesdp.inference.eiv.trapezoid_log_weights` (one rule for both grids)."""
    from .eiv import trapezoid_log_weights

    return trapezoid_log_weights(points)


def _logsumexp(x, axis=None):
    top = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - top), axis=axis)) + np.squeeze(top, axis=axis)
    return out


def plugin_noise(data, theta0) -> dict:
    """The noise moments of each model's likelihood with the S noise pushed through its plug-in
    (rows of ``theta0``, (N, d)): ``z`` (N, d, d), Var(e_z - E t) (:func:`eiv_noise_covariance`);
    with y^T y, ``var_eta`` (N,) and ``k`` (N, d) of :func:`eiv_yty_noise`."""
    from ..models.regression import eiv_noise_covariance, eiv_yty_noise

    out = {"z": np.stack([eiv_noise_covariance(data, t) for t in theta0])}
    if data.yty_hat is not None:
        pairs = [eiv_yty_noise(data, t) for t in theta0]
        out.update(var_eta=np.array([float(v) for v, _ in pairs]),
                   k=np.stack([kk for _, kk in pairs]))
    return out


def model_cells(data, masks, theta0, log_s2, log_r, *, moments=False, noise=None) -> dict:
    """The log density of each grid cell of each model, for models of one size k.

    ``masks`` (N, d) bool with k features each; ``theta0`` (N, d) the plug-ins (zero outside
    the model); ``log_s2`` (N, G) and ``log_r`` (N, H) each model's grid. A cell's log density
    is, in the coordinates (log sigma_y^2, log r),

        log N(z_hat; S_g m_g, M + S_g C_r S_g^T) + log p(yty_hat | z_hat, sigma_y^2, r)
            + log InvGamma(sigma_y^2; a, b) + log sigma_y^2 - log F(sigma_y2_max)
            - log log(1 / scale_min),

    F the InvGamma's distribution function (its truncation) and -log log(1/scale_min) the
    log-uniform density of r in log r; the first term in the precision form of the module
    docstring, the second eiv's ``yty_hat`` factor restricted to the model (the moments of
    :func:`eiv_yty_moments` with theta's conditional N(mu, P^-1) zero outside the model).

    ``noise``: :func:`plugin_noise` of ``theta0`` when already computed.

    Returns ``log_cell`` (N, G, H) and, with ``moments``, ``mean`` (N, G, H, k) (theta_gamma's
    conditional mean) and ``chol`` (N, G, H, k, k) (the Cholesky factor of its precision P).
    """
    from scipy import special, stats


    N, d = masks.shape
    k = int(masks[0].sum())
    idx = np.nonzero(masks)[1].reshape(N, k)
    G, H = log_s2.shape[1], log_r.shape[1]
    s2 = np.exp(log_s2)
    if noise is None:
        noise = plugin_noise(data, theta0)
    L = eiv._m_cholesky(data, s2, noise["z"])  # (N, G, d, d): sigma_y^2 S_+ + Var(e_z - E t)
    log_det_M = 2.0 * np.log(np.diagonal(L, axis1=-2, axis2=-1)).sum(-1)  # (N, G)
    Sg = np.moveaxis(data.S_hat[:, idx], 1, 0)  # (N, d, k)
    rhs = np.concatenate([np.broadcast_to(Sg[:, None], (N, G, d, k)),
                          np.broadcast_to(data.z_hat[:, None], (N, G, d, 1))], axis=-1)
    B = np.linalg.solve(L, rhs)  # L^-1 [S_g, z_hat]
    A, b = B[..., :k], B[..., k]
    AtA = A.transpose(0, 1, 3, 2) @ A  # (N, G, k, k)
    Atb = np.einsum("ngdk,ngd->ngk", A, b)
    btb = np.einsum("ngd,ngd->ng", b, b)
    # theta_gamma's prior: N(m_g, D_r C_g D_r), C_g the block of C on the model's features
    Cg = data.C[idx[:, :, None], idx[:, None, :]]
    Lc = np.linalg.cholesky(Cg)
    Lc_inv = np.linalg.solve(Lc, np.broadcast_to(np.eye(k), Cg.shape))
    C_inv = Lc_inv.transpose(0, 2, 1) @ Lc_inv
    log_det_C = 2.0 * np.log(np.diagonal(Lc, axis1=-2, axis2=-1)).sum(-1)  # (N,)
    mg, slopes = data.m[idx], data.slopes[idx]  # (N, k)
    r = np.exp(log_r)
    inv_r = 1.0 / (slopes[:, None, :] * r[:, :, None] + (1.0 - slopes[:, None, :]))  # (N, H, k)
    P_prior = C_inv[:, None] * inv_r[..., :, None] * inv_r[..., None, :]  # (N, H, k, k)
    log_det_prior = log_det_C[:, None] - 2.0 * np.log(inv_r).sum(-1)  # (N, H)
    h_prior = np.einsum("nhij,nj->nhi", P_prior, mg)
    m_P_m = np.einsum("nhi,ni->nh", h_prior, mg)
    P = AtA[:, :, None] + P_prior[:, None]  # (N, G, H, k, k)
    Lp = np.linalg.cholesky(P)
    log_det_P = 2.0 * np.log(np.diagonal(Lp, axis1=-2, axis2=-1)).sum(-1)
    h = Atb[:, :, None] + h_prior[:, None]  # (N, G, H, k)
    yty = data.yty_hat is not None
    if yty:  # the y^T y factor needs P^-1 itself
        cov = np.linalg.inv(P)
        mu = np.einsum("nghij,nghj->nghi", cov, h)
        h_mu = np.einsum("nghk,nghk->ngh", h, mu)
    else:
        u = np.linalg.solve(Lp, h[..., None])
        h_mu = np.einsum("nghk,nghk->ngh", u[..., 0], u[..., 0])
        if moments:
            mu = np.linalg.solve(Lp.transpose(0, 1, 2, 4, 3), u)[..., 0]
    quad = btb[:, :, None] + m_P_m[:, None] - h_mu
    log_cell = -0.5 * (d * np.log(2 * np.pi) + log_det_M[:, :, None] + log_det_prior[:, None]
                       + log_det_P + quad)
    if yty:
        var_eta, kv = noise["var_eta"], noise["k"]  # (N,), (N, d)
        Mk = eiv._cho_solve(L, np.broadcast_to(kv[:, None, :, None], (N, G, d, 1)))[..., 0]
        res = data.z_hat - np.einsum("ndk,nghk->nghd", Sg, mu)  # z_hat - S_g mu
        res_g = np.take_along_axis(res, idx[:, None, None, :], axis=-1)
        Sgg = data.S_hat[idx[:, :, None], idx[:, None, :]]
        SC = Sgg[:, None, None] @ cov
        mean = (data.n * s2[:, :, None] + np.einsum("nghk,nghk->ngh", mu, data.z_hat[idx][
            :, None, None] + res_g) - np.einsum("nghii->ngh", SC)
            + np.einsum("ngd,nghd->ngh", Mk, res))
        g = 2.0 * res_g - np.einsum("ndk,ngd->ngk", Sg, Mk)[:, :, None]
        var = (2.0 * data.n * s2[:, :, None] ** 2 + data.yty_var + var_eta[:, None, None]
               - np.einsum("ngd,nd->ng", Mk, kv)[:, :, None]
               + np.einsum("nghi,nghij,nghj->ngh", g, cov, g)
               + 2.0 * np.einsum("nghij,nghji->ngh", SC, SC))
        log_cell = log_cell - 0.5 * (np.log(2 * np.pi * var) + (data.yty_hat - mean) ** 2 / var)
    log_F = float(stats.invgamma.logcdf(data.sigma_y2_max, data.a, scale=data.b))
    log_prior_s2 = (data.a * np.log(data.b) - special.gammaln(data.a) - data.a * log_s2
                    - data.b / s2 - log_F)
    log_prior_r = -np.log(-np.log(float(np.ravel(data.scale_min)[0])))
    out = {"log_cell": log_cell + log_prior_s2[:, :, None] + log_prior_r}
    if moments:
        out.update(mean=mu, chol=Lp)
    return out


# ---------------------------------------------------------------------------------------------
# sampling models (MC^3) and drawing from the mixture


def mc3(space, log_prior_of_size, rng, *, num_chains, steps) -> dict:
    """Add-delete-swap Metropolis over models (MC^3, Madigan & York 1995), ``num_chains``
    chains of ``steps`` steps, the first fifth warm-up.

    A step proposes, with probability 1/2, to flip one feature that can be left out (chosen
    uniformly) and otherwise to swap one included feature for one excluded one (each chosen
    uniformly); a model with none or all of them included only flips. The proposal's
    asymmetry at those ends enters the acceptance ratio, so the chain's stationary law is
    p(gamma | release). Chain 1 starts from the model with none of the features, chain 2 from
    the model with all of them, the others from models drawn from the prior (inclusion 1/2).
    Each model's evidence is computed once (the chains' proposals in one batch per step).

    Returns ``masks`` (the distinct models evaluated), ``evidence`` (theirs,
    :func:`evidence`), ``visits`` (chains, kept steps) indices into ``masks``, ``warmup``,
    ``acceptance`` (the share of accepted proposals after warm-up), ``chain_inclusion``
    (chains, p) and ``half_inclusion`` (2 x chains, p): the inclusion probabilities of the
    first halves of the chains' kept steps, then of their second halves (``select`` compares
    them when there is one chain).
    """
    d, p = len(space.names), len(space.free)
    keys, rows, store = {}, [], []

    def lookup(free_masks):
        """Indices of these models (rows of free-feature masks), evaluating the new ones."""
        idx, new = np.empty(len(free_masks), dtype=int), []
        for i, f in enumerate(free_masks):
            key = f.tobytes()
            if key not in keys:
                keys[key] = len(rows)
                full = np.ones(d, dtype=bool)
                full[space.free] = f
                rows.append(full)
                new.append(keys[key])
            idx[i] = keys[key]
        if new:
            store.append(evidence(space, np.array([rows[j] for j in new])))
        return idx

    state = np.zeros((num_chains, p), dtype=bool)
    if num_chains > 1:
        state[1] = True
    if num_chains > 2:
        state[2:] = rng.random((num_chains - 2, p)) < 0.5
    current = lookup(state)
    log_ev = lambda: np.concatenate([s["log_evidence"] for s in store])  # noqa: E731
    ev = log_ev()
    warmup = steps // 5
    visits = np.empty((num_chains, steps - warmup), dtype=int)
    accepted = 0
    for step in range(steps):
        k = state.sum(axis=1)
        can_swap = (k > 0) & (k < p)
        swap = can_swap & (rng.random(num_chains) < 0.5)
        prop = state.copy()
        flip = rng.integers(p, size=num_chains)
        prop[~swap, flip[~swap]] ^= True
        for c in np.flatnonzero(swap):
            prop[c, rng.choice(np.flatnonzero(state[c]))] = False
            prop[c, rng.choice(np.flatnonzero(~state[c]))] = True
        new = lookup(prop)
        if len(ev) < len(rows):
            ev = log_ev()
        k_new = prop.sum(axis=1)
        log_a = (ev[new] + log_prior_of_size[k_new] - ev[current] - log_prior_of_size[k]
                 + _log_proposal_ratio(k, k_new, swap, p))
        take = np.log(rng.random(num_chains)) < log_a
        state[take], current[take] = prop[take], new[take]
        if step >= warmup:
            accepted += int(take.sum())
            visits[:, step - warmup] = current
    masks = np.array(rows)
    evid = {key: np.concatenate([s[key] for s in store]) for key in store[0]}
    included = masks[visits][:, :, space.free]  # (chains, kept steps, p)
    half = included.shape[1] // 2
    return {"masks": masks, "evidence": evid, "visits": visits, "warmup": warmup,
            "acceptance": accepted / visits.size, "chain_inclusion": included.mean(axis=1),
            "half_inclusion": np.concatenate([included[:, :half].mean(axis=1),
                                              included[:, half:].mean(axis=1)])}


def _log_proposal_ratio(k, k_new, swap, p):
    """log q(new -> old) - log q(old -> new) of MC^3's proposal, per chain: 0 for a swap (k
    included of p: 1 / (2 k (p - k)) both ways); for a flip, the probability of proposing a
    flip, 1/2 when a swap is possible (0 < k < p) and 1 when not, times 1/p, both ways."""
    flip_prob = lambda size: np.where((size > 0) & (size < p), 0.5, 1.0)  # noqa: E731
    return np.where(swap, 0.0, np.log(flip_prob(k_new)) - np.log(flip_prob(k)))


def draw(space, masks, ev, picks, rng):
    """Draws of (theta, sigma_y^2, r) of the model-averaged posterior: ``picks`` (chains,
    draws) indices into ``masks`` say each draw's model; given the model, a grid cell with its
    posterior mass and theta_gamma from the cell's Gaussian N(mu, P^-1), zero outside the
    model. Returns theta (chains, draws, d), sigma_y2 and r (chains, draws)."""
    shape = picks.shape
    d = masks.shape[1]
    flat = picks.ravel()
    theta = np.zeros((flat.size, d))
    s2, r = np.empty(flat.size), np.empty(flat.size)
    used = np.unique(flat)
    sizes = masks[used].sum(axis=1)
    for k in np.unique(sizes):
        group = used[sizes == k]
        for chunk in np.array_split(group, max(1, math.ceil(len(group) / _chunk(space, k)))):
            cells = model_cells(space.data, masks[chunk], ev["theta0"][chunk],
                                ev["log_s2"][chunk], ev["log_r"][chunk], moments=True)
            log_w = cells["log_cell"] + _trapezoid_log_weights(ev["log_s2"][chunk])[:, :, None] \
                + _trapezoid_log_weights(ev["log_r"][chunk])[:, None, :]
            H = log_w.shape[2]
            for n, model in enumerate(chunk):
                at = np.flatnonzero(flat == model)
                w = np.exp(log_w[n] - log_w[n].max()).ravel()
                cell = rng.choice(w.size, size=at.size, p=w / w.sum())
                g, h = np.divmod(cell, H)
                s2[at] = np.exp(ev["log_s2"][model, g])
                r[at] = np.exp(ev["log_r"][model, h])
                if k == 0:
                    continue
                Lp = cells["chol"][n, g, h]  # (m, k, k)
                eps = rng.standard_normal((at.size, k, 1))
                step = np.linalg.solve(Lp.transpose(0, 2, 1), eps)[..., 0]
                theta[np.ix_(at, np.flatnonzero(masks[model]))] = cells["mean"][n, g, h] + step
    return theta.reshape(*shape, d), s2.reshape(shape), r.reshape(shape)


# ---------------------------------------------------------------------------------------------
# the result


def _models_table(space, masks, log_evidence, log_prior_of_size, prob, counts, top):
    import pandas as pd

    sizes = _sizes(space, masks)
    log_prior = log_prior_of_size[sizes]
    order = np.lexsort((-(log_evidence + log_prior), -prob))  # by probability, then evidence
    if counts is not None:
        order = order[counts[order] > 0]
    if top is not None:
        order = order[:top]
    free_names = [space.names[j] for j in space.free]
    feats = [tuple(n for n, f in zip(free_names, masks[i, space.free]) if f) for i in order]
    table = pd.DataFrame({"features": feats, "size": sizes[order],
                          "log_evidence": log_evidence[order], "log_prior": log_prior[order],
                          "probability": prob[order],
                          "log_bf": log_evidence[order] - log_evidence.max()},
                         index=pd.RangeIndex(1, len(order) + 1, name="rank"))
    return table


def _inference_data(release, priors, theta, s2, r, method, seed, prior_text, plugin, post,
                    details):
    """The model-averaged posterior as InferenceData, built as :func:`bayesdp.fit` builds
    its own (the release's groups and attrs, the priors, the versions)."""
    from .. import diagnostics
    from .fit import _release_attrs, _release_groups, _versions

    observed, constant, coords, dims = _release_groups(release)
    attrs = {"method": "select", "model_averaged": True, "selection_method": method,
             "model_prior": prior_text, "selection_plugin": plugin, "seed": int(seed),
             "eiv_theta_plugin": post["theta_plugin"],
             "eiv_scale_min": float(post["data"].scale_min),
             "sigma_y2_max": float(post["data"].sigma_y2_max),
             "eiv_uses_yty": post["data"].yty_hat is not None,
             "convergence_checked": False, "converged": True,
             "convergence": ("independent draws (every model evaluated)" if method ==
                             "enumeration" else "models from the MC^3 chains' kept steps; the "
                             "chains' inclusion probabilities agree to "
                             f"{details['chain_max_difference']:.3f}"),
             **_release_attrs(release), **priors.to_attrs(), **_versions()}
    return diagnostics.to_inference_data(
        {"theta": theta, "sigma_y2": s2, "theta_scale": r}, observed_data=observed,
        constant_data=constant, coords=coords, dims={**dims, "release": ["holder"]},
        attrs=attrs)
