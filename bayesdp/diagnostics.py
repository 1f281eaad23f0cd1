"""ArviZ glue: every call into ArviZ lives in this module.

bayesdp targets ArviZ 0.23 (the newest for Python 3.11); a move to ArviZ 1.x (DataTree,
``from_dict(dict_of_groups)``, ``summary(ci_prob=...)``, ``plot_trace_dist``/``plot_dist``) is a
change to this file only.
"""

from __future__ import annotations

import os
import tempfile
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from .errors import BayesdpInputError

ESS_MIN = 400
RHAT_MAX = 1.01


def _az():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # arviz 0.23 announces its refactor
        import arviz

    return arviz


def arviz_version() -> str:
    return _az().__version__


def to_inference_data(posterior, *, sample_stats=None, observed_data=None, constant_data=None,
                      coords=None, dims=None, attrs=None):
    """InferenceData from dicts of arrays whose leading axes are (chain, draw)."""
    az = _az()
    idata = az.from_dict(
        posterior=posterior,
        sample_stats=sample_stats or None,
        observed_data=observed_data or None,
        constant_data=constant_data or None,
        coords=coords,
        dims=dims,
    )
    if attrs:
        clean = {k: _attr_value(v) for k, v in attrs.items() if v is not None}
        for group in idata.groups():
            getattr(idata, group).attrs.update(clean)
    return idata


def from_numpyro(mcmc, *, coords=None, dims=None):
    """InferenceData from a numpyro MCMC run (the kernel must expose ``.model``)."""
    return _az().from_numpyro(mcmc, coords=coords, dims=dims, log_likelihood=False)


def _attr_value(v):
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (list, tuple, np.ndarray)):
        return np.asarray(v, dtype=float).ravel()
    return v


def summary(idata, var_names=None, hdi_prob=0.9) -> pd.DataFrame:
    """ArviZ summary: mean, sd, HDI, mcse, ess_bulk, ess_tail, r_hat."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _az().summary(idata, var_names=var_names, hdi_prob=hdi_prob)


def posterior_quantiles(idata, var_name, probs=(0.05, 0.95)) -> np.ndarray:
    """Equal-tailed quantiles over (chain, draw), shape (len(probs), ...)."""
    x = np.asarray(idata.posterior[var_name])
    x = x.reshape(-1, *x.shape[2:])
    return np.quantile(x, probs, axis=0)


def posterior_array(idata, var_name) -> np.ndarray:
    """Draws of one variable with (chain, draw) flattened to one axis."""
    x = np.asarray(idata.posterior[var_name])
    return x.reshape(-1, *x.shape[2:])


def attrs(idata) -> dict:
    return dict(idata.posterior.attrs)


def save(idata, path) -> Path:
    """Write InferenceData to netCDF atomically."""
    path = Path(path)
    if not path.parent.exists():
        raise BayesdpInputError(f"path: folder {str(path.parent)!r} does not exist")
    if path.is_dir():
        raise BayesdpInputError(f"path: {str(path)!r} is a folder; give a file name to write")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        idata.to_netcdf(tmp)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


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


def plot_posterior(idata, path, var_names=None, hdi_prob=0.9, ref_val=None):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = _az().plot_posterior(idata, var_names=var_names, hdi_prob=hdi_prob, ref_val=ref_val)
    fig = np.asarray(axes).ravel()[0].figure
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


# -- convergence diagnostics (issue 3) ----------------------------------------------------------

DEFAULT_DIAGNOSE_VARS = ("theta", "sigma_y2")


def _plot_safely(fn, idata, path, var_names, problems):
    try:
        return fn(idata, path, var_names=var_names)
    except Exception as exc:  # a plot must never hide the summary
        problems.append(f"could not draw {Path(path).name}: {exc}")
        return None


def diagnose(idata, *, out_dir=None, var_names=None, ess_min=ESS_MIN, rhat_max=RHAT_MAX,
             hdi_prob=0.9, verbose=True):
    """Check a posterior's chains: ArviZ summary, plain-words warnings, and plots.

    Parameters
    ----------
    idata : InferenceData or path to a netCDF file written by ``bayesdp fit``.
    out_dir : folder for ``trace.png``, ``posterior.png`` and ``pair.png`` (None: no plots).
    var_names : variables to check (default: theta and sigma_y2 where present).
    ess_min, rhat_max : thresholds of the warnings (400 and 1.01, Vehtari et al. 2021).

    Returns
    -------
    dict with ``summary`` (pandas DataFrame: mean, sd, HDI, mcse, ess_bulk, ess_tail, r_hat),
    ``warnings`` (list of sentences), ``ok`` (no warning) and ``plots`` (paths written).
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
        var_names = [v for v in DEFAULT_DIAGNOSE_VARS if v in available] or available
    else:
        var_names = [var_names] if isinstance(var_names, str) else list(var_names)
        missing = [v for v in var_names if v not in available]
        if missing:
            raise BayesdpInputError(
                f"var_names: {missing} not in the posterior (it has {available})")
    table = summary(idata, var_names=var_names, hdi_prob=hdi_prob)
    n_chains = int(idata.posterior.sizes.get("chain", 1))
    n_draws = int(idata.posterior.sizes.get("draw", 0))
    problems = []
    method = attrs(idata).get("method", "?")
    if n_chains < 2:
        problems.append(
            f"Only {n_chains} chain: r_hat cannot detect chains that disagree; run 4 chains.")
    if "r_hat" in table:
        bad = table[table["r_hat"] > rhat_max]
        for name, row in bad.iterrows():
            problems.append(
                f"{name}: r_hat = {row['r_hat']:.3f} > {rhat_max}: the chains have not converged "
                f"to the same distribution; run longer (more warm-up) or use another method.")
    for col, what in (("ess_bulk", "bulk (mean, median)"), ("ess_tail", "tail (intervals)")):
        if col in table:
            bad = table[table[col] < ess_min]
            for name, row in bad.iterrows():
                problems.append(
                    f"{name}: {what} effective sample size {row[col]:.0f} < {ess_min}: "
                    f"estimates are noisy; draw more samples or use a better-mixing method.")
    if "sample_stats" in idata.groups() and "diverging" in idata.sample_stats:
        n_div = int(np.asarray(idata.sample_stats["diverging"]).sum())
        if n_div:
            problems.append(f"{n_div} divergent NUTS transitions: the posterior geometry is hard "
                            "for NUTS here (typical for large n_j); do not trust these draws.")
    plots = []
    if out_dir is not None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        for fn, name in ((plot_trace, "trace.png"), (plot_posterior, "posterior.png"),
                         (plot_pair, "pair.png")):
            if fn is plot_pair and sum(int(np.prod(idata.posterior[v].shape[2:]))
                                       for v in var_names) < 2:
                continue
            p = _plot_safely(fn, idata, out / name, var_names, problems)
            if p is not None:
                plots.append(p)
    if verbose:
        with pd.option_context("display.width", 120, "display.max_columns", 20):
            print(f"method {method}: {n_chains} chains x {n_draws} draws")
            print(table.to_string())
        if problems:
            print("\nWARNINGS:")
            for p in problems:
                print(" - " + p)
        else:
            print(f"\nAll checked variables have r_hat <= {rhat_max} and ESS >= {ess_min}.")
        for p in plots:
            print(f"wrote {p}")
    return {"summary": table, "warnings": problems, "ok": not problems, "plots": plots}


def summary_unrounded(idata, var_names=None, hdi_prob=0.9) -> pd.DataFrame:
    """:func:`summary` without rounding (for comparisons using mcse_mean / mcse_sd)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return _az().summary(idata, var_names=var_names, hdi_prob=hdi_prob, round_to="none")
