"""Tables and plots of a fitted posterior of theta, for people to read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from . import diagnostics
from .inference import closed_form_moments

# matplotlib is imported inside the plotting functions: the tables need none of it


def theta_table(idata, *, truth=None, estimates=None, prob=0.9,
                interval="eti") -> pd.DataFrame:
    """One row per feature: posterior mean, sd, the ``prob`` interval (equal-tailed by default,
    columns ``eti_5%`` and ``eti_95%`` at 0.9; ``interval="hdi"`` for the HDI, as every table
    of bayesdp names them: :func:`bayesdp.diagnostics.interval_columns`), the share of
    each coefficient's posterior variance (given sigma_y^2 and the prior scale) that its prior
    supplies when the fit records it
    (``prior_share``: eiv and fast; near 1, the release says almost nothing about it), and
    optional columns for the true theta and for point estimates of other methods (e.g. adaSSP).

    For a Gaussian closed-form posterior (method "fast") the exact mean, sd and quantiles of the
    closed form are shown (:func:`gaussian_moments`; its HDI is its equal-tailed interval), not
    moments of its draws; otherwise moments and quantiles of the draws."""
    names = [str(v) for v in idata.posterior["theta"].coords["feature"].values]
    lo_name, hi_name = diagnostics.interval_columns(prob, interval)
    exact = gaussian_moments(idata)
    if exact is not None:
        mean, cov = exact
        sd = np.sqrt(np.diag(cov))
        lo, hi = (mean + stats.norm.ppf(q) * sd for q in ((1 - prob) / 2, (1 + prob) / 2))
    else:
        draws = diagnostics.posterior_array(idata, "theta")
        lo, hi = diagnostics.interval_of(draws, prob, interval).T
        mean, sd = draws.mean(axis=0), draws.std(axis=0, ddof=1)
    table = pd.DataFrame(index=pd.Index(names, name="feature"))
    if truth is not None:
        table["true"] = np.asarray(truth, dtype=float)
    table["mean"] = mean
    table["sd"] = sd
    table[lo_name] = lo
    table[hi_name] = hi
    share = diagnostics.attrs(idata).get("prior_share")
    if share is not None:  # eiv and fast: the share of each sd^2 the prior supplies
        table["prior share"] = np.asarray(share, dtype=float)
    for name, est in (estimates or {}).items():
        table[name] = np.asarray(est, dtype=float)
    table.attrs.update({"prob": prob, "interval": interval})
    return table


def theta_table_note(table) -> str:
    """The lines that explain a :func:`theta_table` column a reader needs told ("prior
    share"), led by one that names the coefficients the release says little about when most
    of them have a prior share above 0.5; or an empty string."""
    if "prior share" not in table.columns:
        return ""
    share = table["prior share"]
    vague = [str(f) for f, v in share.items() if v > 0.5]
    lead = ""
    if 2 * len(vague) > len(share):
        lead = (f"the release says little about {', '.join(vague[:8])}"
                + (f" and {len(vague) - 8} more" if len(vague) > 8 else "")
                + ": their intervals are mostly the prior's (prior share above 0.5)\n")
    return lead + ("prior share: the part of each coefficient's posterior variance (given "
                   "sigma_y and the prior scale) that its prior\nsupplies; near 1 the release "
                   "says little about the coefficient and its interval is the prior's, which "
                   "can be\ntoo wide or too narrow (docs/methods.md)")


_GAUSSIAN_CLOSED_FORM = ("fast",)
"""Methods whose posterior of theta is exactly Gaussian with the moments stored in the attrs
(``closed_form_mean``, ``closed_form_cov``). The non-private reference also stores its moments,
but its theta is Student-t (normal-inverse-gamma), so its quantiles are not Gaussian."""


def gaussian_moments(idata):
    """(mean, cov) of theta when the fit is a Gaussian closed form (method "fast"), else None."""
    a = diagnostics.attrs(idata)
    if a.get("method") not in _GAUSSIAN_CLOSED_FORM or "closed_form_mean" not in a:
        return None
    return closed_form_moments(idata)


def format_table(table: pd.DataFrame) -> str:
    return table.to_string(float_format=lambda v: f"{v: .4f}")


_TRUTH_STYLE = dict(marker="D", s=42, color="k", edgecolors="white", linewidths=1.2)
"""The truth marker: a black diamond with a white edge, drawn above the intervals and estimates
so that it stays visible where it falls on an interval or a posterior mean."""


def draw_theta(ax, idata, *, truth=None, estimates=None, prob=0.9, title=None) -> dict:
    """Draw posterior mean and ``prob`` interval per coordinate of theta on ``ax``, with the truth
    (on top) and other point estimates (beside each interval); return the artists by role
    ("interval", "truth", and each estimate's name)."""
    table = theta_table(idata, truth=truth, estimates=estimates, prob=prob)
    pct = f"{100 * prob:g}%"
    lo_name, hi_name = diagnostics.interval_columns(prob, "eti")
    k = np.arange(len(table))
    artists = {}
    artists["interval"] = ax.errorbar(
        k, table["mean"], yerr=[table["mean"] - table[lo_name], table[hi_name] - table["mean"]],
        fmt="o", capsize=4, color="C0", zorder=2,
        label=f"posterior mean, {pct} equal-tailed interval")
    for i, name in enumerate(estimates or {}):
        artists[name] = ax.scatter(k + 0.15 * (i + 1), table[name], marker="s", s=30, zorder=3,
                                   color=f"C{i + 1}", label=name)
    if truth is not None:
        artists["truth"] = ax.scatter(k, table["true"], zorder=4, label="true theta",
                                      **_TRUTH_STYLE)
    ax.set_xticks(k, table.index)
    ax.set_xlim(-0.5, len(table) - 0.5 + 0.15 * len(estimates or {}))
    ax.set_xlabel("coefficient of theta (feature)")
    ax.set_ylabel("value of the coefficient")
    ax.axhline(0.0, color="0.8", lw=0.8, zorder=0)
    ax.set_title(title or "posterior of theta")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return artists


def plot_theta(idata, path, *, truth=None, estimates=None, prob=0.9, title=None) -> Path:
    """Posterior mean and ``prob`` interval per coordinate, with the truth and other estimates
    (:func:`draw_theta`), saved as an image at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = int(idata.posterior["theta"].shape[-1])
    fig, ax = plt.subplots(figsize=(1.2 * d + 4.5, 3.8))
    draw_theta(ax, idata, truth=truth, estimates=estimates, prob=prob, title=title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)


def plot_gaussian_marginals(path, posteriors, *, truth=None, reference=None,
                            reference_label="non-private posterior mean", names=None,
                            title=None) -> Path:
    """One panel per coordinate of theta with the marginal densities of Gaussian posteriors.

    ``posteriors`` maps a legend label to ``(mean, cov)``; the first one sets each panel's range
    (mean +/- 5 sd) and title. ``truth`` and ``reference`` (a point estimate, e.g. the non-private
    posterior mean) are drawn as vertical lines. ``names`` label the coordinates (default
    ``theta[i]``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    items = [(label, np.asarray(m, dtype=float), np.asarray(c, dtype=float))
             for label, (m, c) in posteriors.items()]
    d = items[0][1].shape[0]
    names = [f"theta[{i}]" for i in range(d)] if names is None else list(names)
    fig, axes = plt.subplots(1, d, figsize=(4.5 * d, 3.4), squeeze=False)
    for i, ax in enumerate(axes[0]):
        m0, sd0 = items[0][1][i], np.sqrt(items[0][2][i, i])
        grid = np.linspace(m0 - 5 * sd0, m0 + 5 * sd0, 400)
        for k, (label, m, c) in enumerate(items):
            ax.plot(grid, stats.norm.pdf(grid, m[i], np.sqrt(c[i, i])),
                    ("-", "--", "-.", ":")[k % 4], label=label)
        if truth is not None:
            ax.axvline(truth[i], color="k", lw=1, label="truth")
        if reference is not None:
            ax.axvline(reference[i], color="g", lw=1, ls=":", label=reference_label)
        ax.set_title(f"{names[i]}: {m0:.3f} +/- {sd0:.3f}")
    axes[0, 0].legend(fontsize=7)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return Path(path)


def plot_plan(table, path, *, title=None) -> Path:
    """The planned posterior sd of each coefficient against epsilon (log-log), one panel per
    number of holders J, from a :func:`bayesdp.plan` table; with assumed R^2 values (a plan
    without y) the line is the middle R^2 and the band spans them. Saved at ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    Js = sorted(set(table.index.get_level_values("nodes")))
    names = list(dict.fromkeys(table.index.get_level_values("feature")))
    has_r2 = "r2" in table.index.names
    fig, axes = plt.subplots(1, len(Js), figsize=(4.2 * len(Js) + 2.2, 3.8), sharey=True,
                             squeeze=False)
    for ax, J in zip(axes[0], Js):
        part = table.xs(J, level="nodes")
        for i, f in enumerate(names):
            rows = part.xs(f, level="feature")
            if has_r2:
                g = rows["sd"].groupby(level="epsilon")
                lo, mid, hi = g.min(), g.median(), g.max()
                ax.fill_between(lo.index, lo.to_numpy(), hi.to_numpy(), color=f"C{i % 10}",
                                alpha=0.15, lw=0)
                eps, sd = mid.index.to_numpy(), mid.to_numpy()
            else:
                eps, sd = rows.index.get_level_values("epsilon").to_numpy(), rows["sd"].to_numpy()
            ax.plot(eps, sd, marker="o", ms=4, color=f"C{i % 10}",
                    ls="-" if i < 10 else "--", label=f)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("epsilon")
        ax.set_title(f"J = {J} holder{'s' if J > 1 else ''}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0][0].set_ylabel("planned posterior sd")
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
                       borderaxespad=0.0, ncol=1 if len(names) <= 16 else 2)
    n = table.attrs.get("n")
    fig.suptitle(title or f"planned sd per coefficient (n = {n} rows"
                 + (", band: the assumed R^2 range" if has_r2 else "") + ")", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
