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
