"""Method ``"eiv"`` (the default): the record and runner of :mod:`bayesdp.inference.eiv`, the
posterior of :func:`~bayesdp.models.regression.eiv_model` (the noise on S carried into theta's
likelihood, the holders pooled, sigma_y^2 and theta's prior scale integrated out).

:mod:`.eiv` is imported when a fit runs (it imports scipy.stats), not with this module.
"""

from __future__ import annotations

import numpy as np

from ..errors import BayesdpInputError
from ..models import regression as R
from .log_likelihood import Likelihood, one_holder
from .methods import MethodResult, register_method

#: scales: one prior scale for all slopes ("common", iid draws of the grid mixture) or one per
#: slope ("per-slope", collapsed Gibbs); scale_min: the smallest prior scale (None:
#: ``eiv.SCALE_MIN``); sigma_y2_max: the upper bound of sigma_y^2 (None: B_y^2)
OPTIONS = {"scales": "common", "scale_min": None, "sigma_y2_max": None}
_SHARE_DRAWS = 400  # per-slope: draws whose cells give the prior's share of theta's variance


def run(release, priors, *, seed, num_samples, num_chains, num_warmup, progress_bar, scales,
        scale_min, sigma_y2_max):
    """The errors-in-variables posterior of the pooled release (:mod:`bayesdp.inference.eiv`):
    ``scales="common"``: iid draws of the grid mixture with one prior scale for all slopes;
    ``"per-slope"``: collapsed Gibbs over one prior scale per slope and sigma_y^2
    (``num_warmup`` + ``num_samples`` sweeps per chain; it fails simulation-based calibration
    for weakly measured coefficients, docs/evidence/coverage-real-data.md)."""
    from . import eiv

    if scales not in eiv.SCALES:
        raise BayesdpInputError(f"scales must be one of {list(eiv.SCALES)}, got {scales!r}")
    rng = np.random.default_rng(seed)
    post = eiv.eiv_posterior(release, priors,
                             scale_min=eiv.SCALE_MIN if scale_min is None else scale_min,
                             sigma_y2_max=sigma_y2_max, yty=scales == "common")
    data = post["data"]
    if scales == "per-slope":
        theta, sigma_y2, scale, data = eiv.per_slope_draws(post, rng, num_chains, num_warmup,
                                                            num_samples)
        dims = {"theta_scale": ["feature"]}
        every = max(1, sigma_y2.size // _SHARE_DRAWS)  # the cells of a thinned set of draws
        share = eiv.prior_share(data, sigma_y2.ravel()[::every],
                                scale.reshape(sigma_y2.size, -1)[::every])
    else:
        theta, sigma_y2, scale = eiv.draw(post, rng, (num_chains, num_samples))
        dims = {}
        share = eiv.prior_share(data, *eiv.grid_cells(post))
    return MethodResult(
        posterior={"theta": theta, "sigma_y2": sigma_y2, "theta_scale": scale},
        attrs={"eiv_theta_plugin": data.theta_plugin,  # adapted during warm-up (per-slope)
               "eiv_iterations": int(post["iterations"]),
               "eiv_converged": bool(post["converged"]),
               "eiv_scales": scales,
               "eiv_scale_min": float(post["data"].scale_min),
               "eiv_uses_yty": data.yty_hat is not None,  # per-slope leaves y^T y out
               "sigma_y2_max": float(post["data"].sigma_y2_max),
               "prior_share": share},  # per coefficient, eiv.prior_share
        dims=dims,
        iid=scales != "per-slope",  # the grid mixture's draws are independent
        plugin_theta=data.theta_plugin,
        eiv_data=data,
    )


def likelihood(release, priors, result):
    """Each holder's log-likelihood of an "eiv" fit (:mod:`.log_likelihood`):
    :func:`eiv_model` on each holder's statistics alone, at the fit's scale_min, sigma_y2_max
    and plug-in theta: log N(z_hat_j; S_hat_j theta, sigma_y^2 S_+,j + Var(e_z,j - E_j t)).
    A release's y^T y is left out of the entries (they are z_hat's alone)."""
    data = result.eiv_data
    per_slope = np.ndim(data.scale_min) > 0
    stacked = per_holder_data(release, priors, scale_min=float(np.ravel(data.scale_min)[0]),
                              sigma_y2_max=float(data.sigma_y2_max),
                              theta_plugin=result.plugin_theta, per_slope=per_slope)
    samples = {k: result.posterior[k] for k in ("theta_scale", "theta", "sigma_y2")}
    return Likelihood(R.eiv_model, stacked, samples, ("z_hat",), ("z_hat",), per_holder=True)


def per_holder_data(release, priors, **options):
    """:func:`eiv_model_data` of each holder's statistics alone, stacked along a leading
    holder axis (what ``stack_holders`` of one ``eiv_model_data(one_holder(release, j))`` per
    holder gives, y^T y left out), built from the whole release's arrays at once: holder 0's
    record for the fields every holder shares, the release's per-holder arrays for the rest."""
    from ..releases import layout
    from .closed_form import nearest_psd

    first = R.eiv_model_data(one_holder(release, 0), priors, **options)
    blocks = layout.noise_blocks(release)
    J = release.J
    own = {"S_hat": release.S_hat, "z_hat": release.z_hat, "S_plus": nearest_psd(release.S_hat),
           "noise_SS": blocks.SS, "noise_Sz": blocks.Sz, "noise_zz": blocks.zz,
           "n": np.asarray(release.n, dtype=np.float64), "yty_hat": None, "yty_var": None}
    return type(first)(**{k: own[k] if k in own else None if v is None else
                          np.repeat(np.asarray(v, dtype=np.float64)[None], J, axis=0)
                          for k, v in first._asdict().items()})


register_method(
    "eiv", run,
    "errors in variables (the default): the noise on S carried into theta's likelihood, the "
    "holders pooled, sigma_y^2 and theta's prior scale integrated on grids; closed form "
    "(scales='per-slope': one scale per slope, collapsed Gibbs)",
    model=R.eiv_model,
    samples="theta, sigma_y^2 and theta's prior scale (one, or one per slope); S is not "
            "sampled: the noise on S_hat enters theta's likelihood",
    intercept=True, options=OPTIONS, iid=True, log_likelihood=likelihood)
