"""ArviZ glue: every call into ArviZ lives in this module.

bayesdp targets ArviZ 0.23 (the newest for Python 3.11); a move to ArviZ 1.x (DataTree,
``from_dict(dict_of_groups)``, ``summary(ci_prob=...)``, ``plot_trace_dist``/``plot_dist``) is a
change to this file only.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .errors import BayesdpInputError, ConvergenceWarning
from .releases.files import write_atomic

if TYPE_CHECKING:  # pandas is imported where a table is built, not on import
    import pandas as pd

#: Thresholds of the convergence check (docs/methods.md, "fit never fails silently"):
#: warn when any r_hat exceeds RHAT_MAX or any bulk effective sample size (over all chains
#: together) is below ESS_MIN.
ESS_MIN = 400
RHAT_MAX = 1.01
#: The fixedS methods warn (:class:`~bayesdp.errors.CalibrationWarning`) when their 90%
#: intervals would hold theta less often than this, on average over the coefficients, if the
#: "eiv" posterior is right (:func:`bayesdp.inference.fit.check_s_noise`; docs/methods.md,
#: "Does the noise on S matter?").
S_NOISE_COVERAGE_MIN = 0.8
#: The normalX methods' posterior predictive check of S_hat (:func:`s_hat_check`) warns when
#: some principal direction's z-score is beyond the two-sided quantile of this family-wise level,
#: Bonferroni over the d directions (docs/methods.md, "Does the release agree with the prior of
#: Sigma_x?").
S_HAT_CHECK_LEVEL = 0.01


def _az():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arviz 0.23 announces its refactor
        import arviz

    return arviz


def arviz_version() -> str:
    return _az().__version__


def to_inference_data(posterior, *, sample_stats=None, observed_data=None, constant_data=None,
                      log_likelihood=None, posterior_predictive=None, coords=None, dims=None,
                      attrs=None, predictive_draws=None):
    """InferenceData from dicts of arrays whose leading axes are (chain, draw) (``observed_data``
    and ``constant_data``: no such axes); ``log_likelihood`` and ``posterior_predictive`` become
    ArviZ's groups of those names (:func:`az.loo`, :func:`az.plot_ppc`). ``predictive_draws``:
    the posterior's draw indices the posterior predictive holds, when it holds fewer (its
    ``draw`` coordinate; :func:`bayesdp.inference.log_likelihood.predictive_draws`)."""
    az = _az()
    idata = az.from_dict(
        posterior=posterior,
        sample_stats=sample_stats or None,
        log_likelihood=log_likelihood or None,
        posterior_predictive=posterior_predictive or None,
        observed_data=observed_data or None,
        constant_data=constant_data or None,
        coords=coords,
        dims=dims,
    )
    if predictive_draws is not None and posterior_predictive:
        pp = idata.posterior_predictive
        if pp.sizes["draw"] != idata.posterior.sizes["draw"]:
            idata.posterior_predictive = pp.assign_coords(draw=np.asarray(predictive_draws))
    if attrs:
        clean = {k: _attr_value(v) for k, v in attrs.items() if v is not None}
        for group in idata.groups():
            getattr(idata, group).attrs.update(clean)
    return idata


def with_predictions(idata, *, predictions, constant_data, coords, dims, attrs):
    """A copy of ``idata`` with the ``predictions`` and ``predictions_constant_data`` groups
    (ArviZ's groups for out-of-sample posterior predictive draws) built from dicts of arrays;
    ``attrs`` go on the two new groups."""
    az = _az()
    extra = az.from_dict(predictions=predictions, predictions_constant_data=constant_data,
                         coords=coords, dims=dims)
    clean = {k: _attr_value(v) for k, v in attrs.items() if v is not None}
    for group in extra.groups():
        getattr(extra, group).attrs.update(clean)
    out = idata.copy()
    out.extend(extra, join="right")  # replaces earlier predictions
    return out


def hdi(draws, prob) -> np.ndarray:
    """Highest-density intervals of draws (chain, draw, k): array (k, 2) of lower and upper.

    The algorithm of ``arviz.hdi`` for unimodal draws (the narrowest interval holding
    floor(prob * N) + 1 of the N sorted draws), vectorised over the k columns (ArviZ loops over
    the columns in Python, one call per predicted row)."""
    x = np.sort(np.asarray(draws, dtype=float).reshape(-1, np.shape(draws)[-1]), axis=0)
    n = x.shape[0]
    inc = int(np.floor(prob * n))
    if inc < 1 or inc >= n:
        raise BayesdpInputError(f"hdi: {n} draws are too few for a {prob:g} interval")
    start = np.argmin(x[inc:] - x[:n - inc], axis=0)
    cols = np.arange(x.shape[1])
    return np.stack([x[start, cols], x[start + inc, cols]], axis=1)


def set_attrs(idata, attrs: dict):
    """Add attrs to every group of an InferenceData (as :func:`to_inference_data` does)."""
    clean = {k: _attr_value(v) for k, v in attrs.items() if v is not None}
    for group in idata.groups():
        getattr(idata, group).attrs.update(clean)
    return idata


def _attr_value(v):
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return np.asarray(v, dtype=float).ravel()
    return v


#: the intervals every table, CSV and plot of bayesdp reports: "eti" (equal-tailed, the default)
#: or "hdi" (highest density), named ArviZ's way (:func:`interval_columns`)
INTERVALS = ("eti", "hdi")


def interval_columns(prob=0.9, interval="eti") -> tuple:
    """The names of a ``prob`` interval's ends, as ArviZ names them: ("eti_5%", "eti_95%") for
    the equal-tailed 90% interval, ("hdi_5%", "hdi_95%") for the HDI."""
    check_interval(prob, interval)
    return (f"{interval}_{100 * (1 - prob) / 2:g}%", f"{interval}_{100 * (1 + prob) / 2:g}%")


def check_interval(prob, interval):
    """``prob`` in (0, 1) and ``interval`` one of :data:`INTERVALS`, or BayesdpInputError."""
    if interval not in INTERVALS:
        raise BayesdpInputError(f"interval must be one of {list(INTERVALS)} (equal-tailed or "
                                f"highest density), got {interval!r}")
    if isinstance(prob, bool) or not isinstance(prob, (int, float, np.floating)) \
            or not 0 < prob < 1:
        raise BayesdpInputError(f"prob must be a number in (0, 1), got {prob!r}")


def interval_of(draws, prob=0.9, interval="eti") -> np.ndarray:
    """The ``prob`` interval of draws (n, k) per column: (k, 2), equal-tailed quantiles
    ("eti") or the HDI (:func:`hdi`)."""
    check_interval(prob, interval)
    draws = np.asarray(draws, dtype=float).reshape(-1, np.shape(draws)[-1])
    if interval == "hdi":
        return hdi(draws, prob)
    return np.quantile(draws, [(1 - prob) / 2, (1 + prob) / 2], axis=0).T


def summary(idata, var_names=None, prob=0.9, interval="eti") -> pd.DataFrame:
    """ArviZ summary: mean, sd, the ``prob`` interval (:func:`interval_columns`: equal-tailed
    by default, ArviZ's HDI with ``interval="hdi"``), mcse, ess_bulk, ess_tail, r_hat."""
    check_interval(prob, interval)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        if interval == "hdi":
            return _az().summary(idata, var_names=var_names, hdi_prob=prob)
        lo, hi = interval_columns(prob, "eti")
        funcs = {lo: lambda x: np.quantile(x, (1 - prob) / 2),
                 hi: lambda x: np.quantile(x, (1 + prob) / 2)}
        table = _az().summary(idata, var_names=var_names, hdi_prob=prob, stat_funcs=funcs,
                              extend=True)
    rest = [c for c in table.columns if c not in ("mean", "sd", lo, hi)
            and not c.startswith("hdi_")]
    return table[["mean", "sd", lo, hi, *rest]]


def posterior_array(idata, var_name) -> np.ndarray:
    """Draws of one variable with (chain, draw) flattened to one axis."""
    x = np.asarray(idata.posterior[var_name])
    return x.reshape(-1, *x.shape[2:])


def attrs(idata) -> dict:
    return dict(idata.posterior.attrs)


def save(idata, path) -> Path:
    """Write InferenceData to netCDF atomically (:func:`bayesdp.releases.files.write_atomic`)."""

    def write(fd, tmp):
        os.close(fd)
        idata.to_netcdf(tmp)

    return write_atomic(path, write)


def load(path):
    """Read InferenceData written by :func:`save` (or any ArviZ netCDF file)."""
    path = Path(path)
    if not path.exists():
        raise BayesdpInputError(f"posterior file {str(path)!r} does not exist")
    try:
        return _az().from_netcdf(path)
    except (OSError, ValueError) as exc:
        raise BayesdpInputError(f"{path}: not a readable ArviZ netCDF file ({exc})") from None


def plot_trace(idata, path, var_names=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = _az().plot_trace(idata, var_names=var_names, compact=True)
    fig = np.asarray(axes).ravel()[0].figure
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return Path(path)


def plot_posterior(idata, path, var_names=None, prob=0.9, interval="eti", max_entries=30):
    """One panel per entry of ``var_names`` (default theta and sigma_y2; at most
    ``max_entries``): a histogram of its draws, the posterior mean, and the ``prob`` interval
    (:func:`interval_columns`: equal-tailed by default, as every table of bayesdp) as a bar
    with its ends written out. Saved at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    check_interval(prob, interval)
    names = var_names or [v for v in TABLE_VARS if v in idata.posterior]
    entries = []
    for v in names:
        da = idata.posterior[v]
        x = np.asarray(da.values, dtype=float).reshape(da.sizes["chain"] * da.sizes["draw"], -1)
        entries += list(zip(_entry_labels(da), x.T))
    entries = entries[:max_entries]
    cols = min(4, len(entries))
    rows = -(-len(entries) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.3 * cols, 2.5 * rows), squeeze=False)
    lo_name, hi_name = interval_columns(prob, interval)
    for ax, (label, x) in zip(axes.ravel(), entries):
        lo, hi = interval_of(x[:, None], prob, interval)[0]
        ax.hist(x, bins=40, density=True, color="C0", alpha=0.6)
        ax.axvline(x.mean(), color="k", lw=1)
        y = ax.get_ylim()[1] * 0.06
        ax.plot([lo, hi], [y, y], color="k", lw=3, solid_capstyle="butt")
        ax.set_title(label, fontsize=9)
        ax.set_yticks([])
        ax.text(0.02, 0.95, f"mean {x.mean():.3g}\n{lo_name} {lo:.3g}\n{hi_name} {hi:.3g}",
                transform=ax.transAxes, fontsize=7, va="top")
    for ax in axes.ravel()[len(entries):]:
        ax.set_visible(False)
    fig.suptitle(f"posterior: mean (line) and {100 * prob:g}% "
                 f"{'equal-tailed interval' if interval == 'eti' else 'HDI'} (bar)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return Path(path)


def plot_pair(idata, path, var_names=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = _az().plot_pair(idata, var_names=var_names, kind="scatter",
                           marginals=True)
    fig = np.asarray(axes).ravel()[0].figure
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return Path(path)


# -- convergence diagnostics ---------------------------------------------------------------------


def _entry_labels(da) -> list:
    """``name[coord, coord]`` for every entry of one posterior variable (C order)."""
    dims = [dim for dim in da.dims if dim not in ("chain", "draw")]
    if not dims:
        return [str(da.name)]
    axes = []
    for dim in dims:
        if dim in da.coords:
            axes.append([str(c) for c in np.asarray(da.coords[dim].values)])
        else:
            axes.append([str(i) for i in range(da.sizes[dim])])
    grids = np.meshgrid(*[np.arange(len(a)) for a in axes], indexing="ij")
    flat = [g.ravel() for g in grids]
    return [f"{da.name}[" + ", ".join(axes[k][flat[k][i]] for k in range(len(dims))) + "]"
            for i in range(flat[0].size)]


def _unique_entries(x) -> np.ndarray:
    """Mask (over the flattened entries) of the upper triangle incl. the diagonal when the last
    two axes hold symmetric matrices in every draw (Sigma_x, S); all entries otherwise."""
    shape = x.shape[2:]
    mask = np.ones(shape, dtype=bool)
    if len(shape) >= 2 and shape[-1] == shape[-2] and shape[-1] > 1:
        sym = np.array_equal(x, np.swapaxes(x, -1, -2), equal_nan=True)
        if not sym:
            sym = bool(np.allclose(x, np.swapaxes(x, -1, -2), rtol=1e-12, atol=0.0,
                                   equal_nan=True))
        if sym:
            mask = np.broadcast_to(np.triu(np.ones(shape[-2:], dtype=bool)), shape).copy()
    return mask.ravel()


def _rhat_ess(x):
    """(r_hat, ess_bulk, ess_tail) of draws x (chain, draw, k), one value per entry: ArviZ's
    rank-normalised split r_hat (``az.rhat``), bulk and tail ESS (``az.ess(method="bulk" /
    "tail")``; Vehtari et al. 2021), computed for all k entries at once.

    ArviZ 0.23 runs its definition entry by entry in Python, and its Geyer truncation loop runs
    once per lag until the autocorrelations die out: thousands of iterations per entry for a
    chain that mixes badly (the cost: docs/evidence/performance.md, "The convergence check").
    The same formulas vectorised over entries give ArviZ's values to rounding (tested against
    ``az.rhat`` / ``az.ess`` in ``tests/inference/test_convergence.py``).
    With a single chain the chain is first cut in two halves, so r_hat compares its first and
    second half (ArviZ needs >= 2 chains)."""
    n_chain, n_draw, k = x.shape
    x = np.ascontiguousarray(np.moveaxis(np.asarray(x, dtype=float), 2, 0))  # (k, chain, draw)
    xr = x
    if n_chain == 1:
        h = n_draw // 2
        xr = np.stack([x[:, 0, :h], x[:, 0, h:2 * h]], axis=1)
    nan = np.full(k, np.nan)
    r = _rhat_rank(xr) if xr.shape[2] >= 4 else nan
    if n_draw < 4:
        return r, nan, nan
    eb = _ess(_z_scale(_split_chains(x)))
    q_low, q_high = _quantiles_type7(x, (0.05, 0.95))
    et = np.minimum(_ess(_split_chains(x <= q_low)), _ess(_split_chains(x <= q_high)))
    return r, eb, et


# The helpers below take draws as (entry, chain, draw) and follow ArviZ 0.23's
# arviz/stats/diagnostics.py (_split_chains, _z_scale, _rhat, _rhat_rank, _ess, _ess_tail).


def _split_chains(x):
    """(k, chain, draw) -> (k, 2 chain, draw // 2): first halves, then last halves."""
    h = x.shape[2] // 2
    return np.concatenate([x[:, :, :h], x[:, :, x.shape[2] - h:]], axis=1)


def _average_ranks(a):
    """scipy.stats.rankdata(row, method="average") of every row of a (k, m)."""
    k, m = a.shape
    order = np.argsort(a, axis=1)
    srt = np.take_along_axis(a, order, axis=1)
    first = np.ones((k, m), dtype=bool)  # the first of a run of equal values
    first[:, 1:] = srt[:, 1:] != srt[:, :-1]
    start = np.maximum.accumulate(np.where(first, np.arange(m), 0), axis=1)
    group = np.cumsum(first, axis=1) - 1 + (np.arange(k) * m)[:, None]
    size = np.bincount(group.ravel(), minlength=k * m)[group]
    ranks = np.empty(k * m)
    ranks[(order + (np.arange(k) * m)[:, None]).ravel()] = (0.5 * (2 * start + size + 1)).ravel()
    return ranks.reshape(k, m)  # tied values share the mean of their ranks


def _z_scale(x):
    """Normal scores of the average ranks of each entry's draws (Blom's offset 3/8)."""
    from scipy.special import ndtri  # = scipy.stats.norm.ppf, without its argument checks

    k, c, n = x.shape
    rank = _average_ranks(x.reshape(k, c * n))
    return ndtri((rank - 3 / 8) / (c * n - 2 * (3 / 8) + 1)).reshape(k, c, n)


def _rhat_rank(x):
    """max(split r_hat of the normal scores, of the folded normal scores) per entry."""
    split = _split_chains(x)
    folded = np.abs(split - np.median(split.reshape(x.shape[0], -1), axis=1)[:, None, None])
    return np.maximum(_rhat(_z_scale(split)), _rhat(_z_scale(folded)))


def _rhat(z):
    n = z.shape[2]
    between = n * np.var(np.mean(z, axis=2), axis=1, ddof=1)
    within = np.mean(np.var(z, axis=2, ddof=1), axis=1)
    return np.sqrt((between / within + n - 1) / n)


def _quantiles_type7(x, probs):
    """Each entry's quantiles over all its draws, one (k, 1, 1) array per probability (one
    sort for all), with the arithmetic of ``scipy.stats.mstats.mquantiles(alphap=1,
    betap=1)`` (what ArviZ uses), so that the indicators x <= q agree with ArviZ's even where
    draws repeat (rejected MH moves)."""
    xs = np.sort(x.reshape(x.shape[0], -1), axis=1)
    n = xs.shape[1]
    out = []
    for p in map(float, probs):
        aleph = n * p + (1.0 + p * (1.0 - 1.0 - 1.0))
        j = int(np.floor(np.clip(aleph, 1, n - 1)))
        gamma = np.clip(aleph - j, 0, 1)
        out.append(((1.0 - gamma) * xs[:, j - 1] + gamma * xs[:, j])[:, None, None])
    return out


def _ess(x):
    """ESS of each entry of x (k, chain, draw): Geyer's initial positive and initial monotone
    sequences of the FFT autocovariances, as ArviZ's ``_ess``."""
    from scipy.fftpack import next_fast_len

    x = np.asarray(x, dtype=float)
    k, c, n = x.shape
    out = np.full(k, float(c * n))  # ArviZ: an entry that does not vary has ESS = its size
    varies = (np.max(x, axis=(1, 2)) - np.min(x, axis=(1, 2))) >= np.finfo(float).resolution
    if not varies.any():
        return out
    x = x[varies]
    m = next_fast_len(2 * n)
    f = np.fft.rfft(x - x.mean(axis=2, keepdims=True), n=m, axis=2)
    f *= np.conjugate(f)
    acov = np.fft.irfft(f, n=m, axis=2)[:, :, :n] / n
    mean_var = np.mean(acov[:, :, 0], axis=1) * n / (n - 1.0)
    var_plus = mean_var * (n - 1.0) / n
    if c > 1:
        var_plus = var_plus + np.var(x.mean(axis=2), axis=1, ddof=1)
    rho = 1.0 - (mean_var[:, None] - np.mean(acov, axis=1)) / var_plus[:, None]  # (k, lag)
    rho[:, 0] = 1.0
    # Pairs P_i = (rho_2i, rho_2i+1). ArviZ's loop looks at P_1, P_2, ... while the previous
    # pair's sum is > 0 and 2i - 1 < n - 3, keeps each pair whose sum is >= 0, and adds the
    # even half of the last pair it looked at when that is > 0 (or the pair was kept).
    n_pairs = max((n - 3) // 2, 0)
    pairs = rho[:, :2 * n_pairs + 2].reshape(-1, n_pairs + 1, 2)
    sums = pairs.sum(axis=2)  # (k, n_pairs + 1)
    stop = sums <= 0
    stop[:, -1] = True  # the lag bound
    last = np.argmax(stop, axis=1)  # the last pair looked at (0: none)
    rows = np.arange(len(last))
    before = np.arange(n_pairs + 1)[None, :] < last[:, None]
    # the pairs before it, their sums made non-increasing (initial monotone sequence)
    mono = np.minimum.accumulate(np.where(before, sums, np.inf), axis=1)
    kept = np.where(before, mono, 0.0).sum(axis=1)
    even = pairs[rows, last, 0]
    was_kept = (last >= 1) & (sums[rows, last] >= 0)
    tau = -1.0 + 2.0 * kept + np.where(was_kept | (even > 0), even, 0.0)
    tau = np.maximum(tau, 1 / np.log10(c * n))
    out[varies] = c * n / tau
    return out


def convergence_summary(idata, var_names=None, *, rhat_max=RHAT_MAX, ess_min=ESS_MIN) -> dict:
    """r_hat, bulk and tail ESS of every entry of every sampled variable, summarised.

    Symmetric matrices (Sigma_x, S) are checked on their upper triangle incl. the diagonal (the
    lower half repeats it). Entries whose draws are all equal (a fixed value, the zero
    off-diagonals of a d = 1 matrix) carry no information about mixing and are skipped instead of
    giving NaN r_hat; entries with non-finite draws count as not converged (r_hat = inf).

    Returns a dict: ``variables`` ({name: {max_r_hat, min_ess_bulk, min_ess_tail, worst,
    n_entries, n_bad}}), the worst entry overall ``worst_parameter`` with its ``r_hat``,
    ``ess_bulk`` and ``ess_tail``, the overall ``max_r_hat``, ``min_ess_bulk``, ``min_ess_tail``,
    ``n_chains``, ``n_draws`` and ``converged`` (no r_hat > rhat_max, no ess_bulk < ess_min).
    """
    post = idata.posterior
    names = list(post.data_vars) if var_names is None else (
        [var_names] if isinstance(var_names, str) else list(var_names))
    n_chains = int(post.sizes.get("chain", 1))
    n_draws = int(post.sizes.get("draw", 0))
    per_var, all_r, all_eb, all_et, all_lab = {}, [], [], [], []
    for v in names:
        da = post[v]
        x = np.asarray(da.transpose("chain", "draw", ...).values, dtype=float)
        labels = np.asarray(_entry_labels(da.transpose("chain", "draw", ...)), dtype=object)
        flat = x.reshape(x.shape[0], x.shape[1], -1)
        keep = _unique_entries(x)
        flat, labels = flat[:, :, keep], labels[keep]
        finite = np.isfinite(flat).all(axis=(0, 1))
        const = finite & (np.ptp(np.where(np.isfinite(flat), flat, 0.0), axis=(0, 1)) == 0)
        use = ~const
        if not use.any():
            per_var[v] = {"max_r_hat": 1.0, "min_ess_bulk": float(n_chains * n_draws),
                          "min_ess_tail": float(n_chains * n_draws), "worst": None,
                          "n_entries": int(keep.sum()), "n_bad": 0, "constant": True}
            continue
        r = np.full(use.sum(), np.inf)
        eb = np.zeros(use.sum())
        et = np.zeros(use.sum())
        ok = finite[use]
        if ok.any():
            r[ok], eb[ok], et[ok] = _rhat_ess(flat[:, :, use][:, :, ok])
        r = np.where(np.isnan(r), np.inf, r)
        eb = np.where(np.isnan(eb), 0.0, eb)
        et = np.where(np.isnan(et), 0.0, et)
        lab = labels[use]
        bad = (r > rhat_max) | (eb < ess_min)
        w = _worst_index(r, eb, rhat_max)
        per_var[v] = {"max_r_hat": float(r.max()), "min_ess_bulk": float(eb.min()),
                      "min_ess_tail": float(et.min()), "worst": str(lab[w]),
                      "n_entries": int(keep.sum()), "n_bad": int(bad.sum()), "constant": False}
        all_r.append(r), all_eb.append(eb), all_et.append(et), all_lab.append(lab)
    out = {"variables": per_var, "n_chains": n_chains, "n_draws": n_draws,
           "rhat_max": float(rhat_max), "ess_min": float(ess_min)}
    if not all_r:
        out.update(worst_parameter=None, r_hat=1.0, ess_bulk=float(n_chains * n_draws),
                   ess_tail=float(n_chains * n_draws), max_r_hat=1.0,
                   min_ess_bulk=float(n_chains * n_draws),
                   min_ess_tail=float(n_chains * n_draws), converged=True)
        return out
    r, eb, et, lab = (np.concatenate(a) for a in (all_r, all_eb, all_et, all_lab))
    w = _worst_index(r, eb, rhat_max)
    out.update(worst_parameter=str(lab[w]), r_hat=float(r[w]), ess_bulk=float(eb[w]),
               ess_tail=float(et[w]), max_r_hat=float(r.max()), min_ess_bulk=float(eb.min()),
               min_ess_tail=float(et.min()),
               converged=bool(r.max() <= rhat_max and eb.min() >= ess_min))
    return out


def convergence_lines(idata, var_names, *, rhat_max=RHAT_MAX, ess_min=ESS_MIN) -> list:
    """One line per variable summarising its entries' convergence, e.g.
    ``"S: 24 unique entries, max r_hat 1.003, min ess_bulk 812"`` (symmetric matrices: the upper
    triangle incl. the diagonal), with the number of flagged entries and the worst one when any
    has r_hat > rhat_max or bulk ESS < ess_min. For printing large variables (S, Sigma_x)
    without a row per entry."""
    conv = convergence_summary(idata, var_names, rhat_max=rhat_max, ess_min=ess_min)
    lines = []
    for v, s in conv["variables"].items():
        size = int(np.prod(idata.posterior[v].shape[2:]))
        n = s["n_entries"]
        what = "unique entries" if n < size else ("entry" if n == 1 else "entries")
        if s["constant"]:
            lines.append(f"{v}: {n} {what}, constant (not sampled)")
            continue
        line = (f"{v}: {n} {what}, max r_hat {_fmt_rhat(s['max_r_hat'])}, "
                f"min ess_bulk {s['min_ess_bulk']:.0f}")
        if s["n_bad"]:
            line += f" ({s['n_bad']} flagged; worst {s['worst']})"
        lines.append(line)
    return lines


def _worst_index(r, eb, rhat_max):
    """The entry to name: the largest r_hat if any exceeds rhat_max, else the smallest ESS."""
    if np.any(r > rhat_max):
        return int(np.argmax(r))
    return int(np.argmin(eb))


def s_noise_message(method, coverage, feature_names) -> str:
    """The sentence of the fixedS methods' calibration check (:func:`bayesdp.fit`'s
    CalibrationWarning and :func:`diagnose`) from the attrs ``s_noise_coverage``."""
    coverage = np.asarray(coverage, dtype=float)
    worst = int(np.argmin(coverage))
    return (f"{method}: S is fixed at the noisy S_hat, and the noise on S it leaves out makes "
            f"theta's 90% intervals too narrow for this release: if the posterior that models "
            f"that noise (method 'eiv') is right, they hold theta "
            f"{100 * float(np.mean(coverage)):.0f}% of the time on average, "
            f"{100 * coverage[worst]:.0f}% for theta[{feature_names[worst]}] (attrs "
            f"'s_noise_coverage'). Use method='eiv' (the default); docs/methods.md, 'Does the "
            f"noise on S matter?'.")


def s_hat_z_max(d) -> float:
    """The |z| beyond which :func:`s_hat_check` flags a direction: the two-sided normal quantile
    of ``S_HAT_CHECK_LEVEL`` / d (3.09 at d = 5, 3.48 at d = 20)."""
    from scipy import stats

    return float(stats.norm.isf(S_HAT_CHECK_LEVEL / (2.0 * d)))


def s_hat_check(S_draws, S_hat, sigma_s) -> dict:
    """Posterior predictive check of the released S_hat along the principal directions of the
    posterior (the normalX methods, which sample S).

    The model says S_hat_j = S_j + sigma_j M_j, M_j symmetric with independent N(0, 1) entries
    on and above the diagonal (paper eq. 2). For each unit eigenvector v of sum_j E[S_j | data]
    the check compares what the release shows along v with what the posterior holds:

        z_v = sum_j v^T (S_hat_j - E[S_j]) v / sqrt(sum_j sigma_j^2 (2 - sum_i v_i^4)
                                                     + Var(sum_j v^T S_j v | data))

    (v^T M v has variance 2 - sum_i v_i^4), which is the standardised discrepancy of a replicated
    S_hat drawn from the posterior predictive. |z_v| beyond :func:`s_hat_z_max` means the model
    and the release disagree along v: z < 0, the release shows less variance than the posterior
    holds (the prior of Sigma_x keeps every variance above about Lambda / (kappa + d + 1), so
    nearly collinear features whose small variance the noise hides are read as larger); z > 0,
    the release shows more (the prior's density, falling as (variance)^-(kappa + d + 1)/2,
    pulls weakly measured variances down, or the rows do not follow the model). Theta's
    intervals along such a direction rest on that prior.

    ``S_draws`` (..., J, d, d) posterior draws, ``S_hat`` (J, d, d), ``sigma_s`` (J,). Returns
    ``z`` (d,), ``eigenvalues`` (d,) of sum_j E[S_j | data] and ``directions`` (d, d), its unit
    eigenvectors as columns, smallest eigenvalue first.
    """
    S = np.asarray(S_draws, dtype=float)
    S_hat = np.asarray(S_hat, dtype=float)
    sigma2 = np.asarray(sigma_s, dtype=float) ** 2
    J, d = S_hat.shape[0], S_hat.shape[-1]
    S = S.reshape(-1, J, d, d)
    S_mean = S.mean(axis=0)
    w, V = np.linalg.eigh(S_mean.sum(axis=0))
    q = np.einsum("sil,ik,lk->sk", S.sum(axis=1), V, V)  # sum_j v_k^T S_j v_k per draw
    gap = np.einsum("ik,jil,lk->k", V, S_hat - S_mean, V)
    noise = sigma2.sum() * (2.0 - np.sum(V ** 4, axis=0))
    scale = np.sqrt(noise + q.var(axis=0))
    z = np.divide(gap, scale, out=np.zeros(d), where=scale > 0)
    return {"z": z, "eigenvalues": w, "directions": V}


def describe_direction(v, feature_names, min_loading=0.3) -> str:
    """A unit vector as a combination of the features with |loading| >= ``min_loading``
    (e.g. "0.71 x2 - 0.65 x4")."""
    v = np.asarray(v, dtype=float)
    v = v * np.sign(v[np.argmax(np.abs(v))])
    keep = [i for i in np.argsort(-np.abs(v)) if abs(v[i]) >= min_loading] or [
        int(np.argmax(np.abs(v)))]
    out = ""
    for i in keep:
        c = v[i]
        out += (f" {'-' if c < 0 else '+'} " if out else ("-" if c < 0 else "")) + \
            f"{abs(c):.2f} {feature_names[i]}"
    return out


def s_hat_message(method, z, directions, feature_names, floor=None, Lambda=None) -> str:
    """The sentence of the S_hat check (:func:`bayesdp.fit`'s CalibrationWarning and
    :func:`diagnose`) from the attrs ``s_hat_check_z`` and ``s_hat_check_directions``."""
    z = np.asarray(z, dtype=float)
    V = np.asarray(directions, dtype=float)
    d = len(z)
    bad = np.flatnonzero(np.abs(z) > s_hat_z_max(d))
    k = int(bad[np.argmax(np.abs(z[bad]))]) if len(bad) else int(np.argmax(np.abs(z)))
    low = z[k] < 0
    msg = (f"{method}: the release and the posterior disagree along {len(bad)} of {d} "
           f"principal direction(s) of the features (posterior predictive check of S_hat: "
           f"z = {z[k]:.1f} along {describe_direction(V[:, k], feature_names)}; |z| > "
           f"{s_hat_z_max(d):.2f} flags): ")
    if low:
        at = "" if floor is None else f" = {floor:.3g}"
        refit = ("a smaller Priors(Lambda=...)" if Lambda is None
                 else f"e.g. priors=bayesdp.Priors(Lambda={1e-4 * Lambda:.3g}) (bayesdp fit "
                 f"--prior-lambda {1e-4 * Lambda:.3g})")
        msg += ("the release shows less variance there than the posterior holds. The prior of "
                f"Sigma_x keeps every variance of the features above about Lambda / (kappa + "
                f"d + 1){at}, so nearly collinear features whose small variance the noise hides "
                "are read as varying more, and theta's intervals along that direction are too "
                f"narrow. Refit with a prior that allows small variances and compare, {refit}")
    else:
        msg += ("the release shows more variance there than the posterior holds: the model "
                "pulls S below S_hat along it. Either the prior of Sigma_x, whose density falls "
                "off as (variance)^-(kappa + d + 1)/2 above Lambda / (kappa + d + 1), pulls a "
                "variance the release measures only weakly down (more so the larger d), or "
                "the rows do not follow the normalX model (normal features, y linear in x). "
                "Theta's intervals along that direction may be off; refit with a larger "
                "Priors(Lambda=...) (bayesdp fit --prior-lambda) and compare")
    return msg + "; docs/methods.md, 'Does the release agree with the prior of Sigma_x?'."


def s_hat_warning(idata):
    """The S_hat check's sentence (:func:`s_hat_message`) for a fit whose attrs hold a flagged
    check (``s_hat_check_z``), else None. Sigma_x's prior floor and a smaller Lambda to try come
    from the attrs ``prior_Lambda`` and ``prior_kappa`` when Lambda is a multiple of I and the
    release has no intercept (there S_hat's directions are Sigma_x's)."""
    a = attrs(idata)
    if "s_hat_check_z" not in a:
        return None
    z = np.asarray(a["s_hat_check_z"], dtype=float).ravel()
    d = len(z)
    if np.max(np.abs(z)) <= s_hat_z_max(d):
        return None
    V = np.asarray(a["s_hat_check_directions"], dtype=float).reshape(d, d)
    lam = floor = None
    if "prior_Lambda" in a and "prior_kappa" in a and not int(a.get("intercept", 0)):
        Lam = np.asarray(a["prior_Lambda"], dtype=float).reshape(d, d)
        if np.allclose(Lam, Lam[0, 0] * np.eye(d)):
            lam = float(Lam[0, 0])
            floor = lam / (float(a["prior_kappa"]) + d + 1.0)
    names = [str(c) for c in np.asarray(idata.posterior["theta"].coords["feature"].values)]
    return s_hat_message(a.get("method", "?"), z, V, names, floor=floor, Lambda=lam)


def _convergence_message(conv: dict, method="?") -> str:
    """One line saying which parameter is worst, its r_hat and ESS, and what to do."""
    total = conv["n_chains"] * conv["n_draws"]
    what = []
    if conv["max_r_hat"] > conv["rhat_max"]:
        what.append(f"r_hat = {_fmt_rhat(conv['r_hat'])} > {conv['rhat_max']:g}")
    else:
        what.append(f"r_hat = {_fmt_rhat(conv['r_hat'])}")
    what.append(f"bulk ESS = {conv['ess_bulk']:.0f}, tail ESS = {conv['ess_tail']:.0f}")
    advice = ("run longer (larger num_warmup and num_samples) or use another method "
              "('normalx' for the normalX model, 'fixeds' for the fixedS model converged in "
              "the cells measured in docs/evidence/convergence.md)")
    if total < conv["ess_min"]:
        advice = (f"only {total} draws were kept in total, so ESS cannot reach "
                  f"{conv['ess_min']:.0f}; " + advice)
    chains = ("1 chain (split r_hat)" if conv["n_chains"] == 1
              else f"{conv['n_chains']} chains")
    return (f"method {method!r} did not converge ({chains} x {conv['n_draws']} draws): worst "
            f"parameter {conv['worst_parameter']} has " + ", ".join(what) +
            f" (want r_hat <= {conv['rhat_max']:g} and bulk ESS >= {conv['ess_min']:.0f} over "
            f"all chains); do not trust this posterior: " + advice + ".")


def _fmt_rhat(r):
    return "inf" if not np.isfinite(r) else f"{r:.3f}"


def _convergence_attrs(conv: dict) -> dict:
    """Flat attrs (netCDF-safe) of a :func:`convergence_summary`."""
    import json

    return {
        "convergence_checked": True,
        "converged": bool(conv["converged"]),
        "max_r_hat": float(conv["max_r_hat"]),
        "min_ess_bulk": float(conv["min_ess_bulk"]),
        "min_ess_tail": float(conv["min_ess_tail"]),
        "worst_parameter": conv["worst_parameter"] or "",
        "convergence": json.dumps(
            {k: {kk: (vv if not isinstance(vv, float) or np.isfinite(vv) else str(vv))
                 for kk, vv in v.items()} for k, v in conv["variables"].items()}),
    }


def check_convergence(idata, method="?", *, rhat_max=RHAT_MAX, ess_min=ESS_MIN, warn=True,
                      stacklevel=3) -> dict:
    """Check every sampled variable, record the result in the attrs and warn
    (:class:`~bayesdp.errors.ConvergenceWarning`) when the chains have not converged, and
    (a second warning) when any NUTS transition diverged."""
    conv = convergence_summary(idata, rhat_max=rhat_max, ess_min=ess_min)
    set_attrs(idata, _convergence_attrs(conv))
    if warn and not conv["converged"]:
        warnings.warn(_convergence_message(conv, method), ConvergenceWarning,
                      stacklevel=stacklevel)
    n_div = divergences(idata)
    if warn and n_div:
        warnings.warn(
            f"{method}: {n_div} of {conv['n_chains'] * conv['n_draws']} NUTS transitions "
            "diverged: the sampler missed part of the posterior, so these draws may be biased "
            "even where r_hat and ESS look fine; refit with a higher target_accept_prob (e.g. "
            "0.99; bayesdp fit --target-accept-prob 0.99) and check that the divergences go "
            "away.", ConvergenceWarning,
            stacklevel=stacklevel)
    return conv


def divergences(idata) -> int:
    """Number of divergent NUTS transitions in ``sample_stats.diverging`` (0 without it)."""
    if "sample_stats" in idata.groups() and "diverging" in idata.sample_stats:
        return int(np.asarray(idata.sample_stats["diverging"]).sum())
    return 0


def _plot_safely(fn, idata, path, var_names, problems):
    try:
        return fn(idata, path, var_names=var_names)
    except Exception as exc:  # a plot must never hide the summary
        problems.append(f"could not draw {Path(path).name}: {exc}")
        return None


#: Variables shown entry by entry in the table of :func:`diagnose` (the others - Sigma_x, S -
#: are checked entry by entry but shown as one row: their worst entry).
TABLE_VARS = ("theta", "sigma_y2")


def diagnose(idata, *, out_dir=None, var_names=None, ess_min=ESS_MIN, rhat_max=RHAT_MAX,
             prob=0.9, interval="eti", verbose=True):
    """Check a posterior's chains: ArviZ summary, plain-words warnings, and plots.

    Parameters
    ----------
    idata : InferenceData or path to a netCDF file written by ``bayesdp fit``.
    out_dir : folder for ``trace.png``, ``posterior.png`` and ``pair.png`` (None: no plots).
    var_names : variables to check (default: every variable in the posterior - theta,
        sigma_y2, Sigma_x, S, ...).
    ess_min, rhat_max : thresholds of the warnings (400 and 1.01, docs/methods.md,
        "Diagnostics").
    prob, interval : the summary's and the posterior plot's interval: equal-tailed ("eti",
        columns eti_5%, eti_95% at 0.9) or ArviZ's HDI ("hdi").

    Returns
    -------
    dict with ``summary`` (pandas DataFrame: mean, sd, interval, mcse, ess_bulk, ess_tail, r_hat of
    theta and sigma_y2 entry by entry, or of the given var_names), ``worst`` (one row per checked
    variable: its worst entry, max r_hat, min bulk and tail ESS, over the upper triangle of
    symmetric matrices), ``convergence`` (:func:`convergence_summary`), ``warnings`` (list of
    sentences), ``ok`` (no warning) and ``plots`` (paths written).
    """
    if isinstance(idata, (str, os.PathLike)):
        idata = load(idata)
    if not hasattr(idata, "posterior"):
        raise BayesdpInputError("idata must be an ArviZ InferenceData with a posterior group")
    if not (isinstance(ess_min, (int, float)) and ess_min > 0):
        raise BayesdpInputError(f"ess_min must be a positive number, got {ess_min!r}")
    if not (isinstance(rhat_max, (int, float)) and rhat_max > 1):
        raise BayesdpInputError(f"rhat_max must be a number > 1, got {rhat_max!r}")
    available = list(idata.posterior.data_vars)
    if var_names is None:
        var_names = available
        table_vars = [v for v in available if v in TABLE_VARS] or available
    else:
        var_names = [var_names] if isinstance(var_names, str) else list(var_names)
        missing = [v for v in var_names if v not in available]
        if missing:
            raise BayesdpInputError(
                f"var_names: {missing} not in the posterior (it has {available})")
        table_vars = var_names
    table = summary(idata, var_names=table_vars, prob=prob, interval=interval)
    conv = convergence_summary(idata, var_names, rhat_max=rhat_max, ess_min=ess_min)
    import pandas as pd  # here, not on import: `import bayesdp` loads no pandas

    worst = pd.DataFrame(
        [{"variable": v, "entries": s["n_entries"], "worst entry": s["worst"] or "(constant)",
          "max_r_hat": s["max_r_hat"], "min_ess_bulk": s["min_ess_bulk"],
          "min_ess_tail": s["min_ess_tail"]} for v, s in conv["variables"].items()]
    ).set_index("variable")
    n_chains, n_draws = conv["n_chains"], conv["n_draws"]
    problems = []
    method = attrs(idata).get("method", "?")
    if n_chains < 2:
        problems.append(
            f"Only {n_chains} chain: r_hat compares its two halves only and cannot detect "
            "chains stuck in different places; run 4 chains.")
    for v, s in conv["variables"].items():
        if s["constant"]:
            continue
        what = f"{v} ({s['n_bad']} of {s['n_entries']} entries flagged; worst {s['worst']})" \
            if s["n_entries"] > 1 else v
        if s["max_r_hat"] > rhat_max:
            problems.append(
                f"{what}: r_hat = {_fmt_rhat(s['max_r_hat'])} > {rhat_max}: the chains have not "
                f"converged to the same distribution; run longer (more warm-up) or use another "
                f"method.")
        for key, label in (("min_ess_bulk", "bulk (mean, median)"),
                           ("min_ess_tail", "tail (intervals)")):
            if s[key] < ess_min:
                problems.append(
                    f"{v}: {label} effective sample size {s[key]:.0f} < {ess_min} (over all "
                    f"chains): estimates are noisy; draw more samples or use a better-mixing "
                    f"method.")
    a = attrs(idata)
    if "s_noise_coverage" in a and float(np.mean(a["s_noise_coverage"])) < S_NOISE_COVERAGE_MIN:
        names = [str(c) for c in np.asarray(idata.posterior["theta"].coords["feature"].values)]
        problems.append(s_noise_message(method, a["s_noise_coverage"], names))
    s_hat = s_hat_warning(idata)
    if s_hat:
        problems.append(s_hat)
    n_div = divergences(idata)
    if n_div:
        problems.append(f"{n_div} divergent NUTS transitions: the posterior geometry is hard "
                        "for NUTS here (typical for large n_j); do not trust these draws.")
    plots = []
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        import functools

        for fn, name in ((plot_trace, "trace.png"),
                         (functools.partial(plot_posterior, prob=prob, interval=interval),
                          "posterior.png"), (plot_pair, "pair.png")):
            if fn is plot_pair and sum(int(np.prod(idata.posterior[v].shape[2:]))
                                       for v in table_vars) < 2:
                continue
            p = _plot_safely(fn, idata, out / name, table_vars, problems)
            if p is not None:
                plots.append(p)
    if verbose:
        with pd.option_context("display.width", 120, "display.max_columns", 20):
            print(f"method {method}: {n_chains} chains x {n_draws} draws")
            print(table.to_string())
            print("\nworst entry of each variable (symmetric matrices: upper triangle):")
            print(worst.to_string(float_format=lambda x: f"{x:.3f}" if x < 100 else f"{x:.0f}"))
        if problems:
            print("\nWARNINGS:")
            for p in problems:
                print(" - " + p)
        else:
            print(f"\nAll checked variables have r_hat <= {rhat_max} and ESS >= {ess_min}.")
        for p in plots:
            print(f"wrote {p}")
    return {"summary": table, "worst": worst, "convergence": conv, "warnings": problems,
            "ok": not problems, "plots": plots}


def summary_unrounded(idata, var_names=None, hdi_prob=0.9) -> pd.DataFrame:
    """:func:`summary` without rounding (for comparisons using mcse_mean / mcse_sd)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _az().summary(idata, var_names=var_names, hdi_prob=hdi_prob, round_to="none")
