"""Tables and plots of a fitted posterior of theta, for people to read."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from . import diagnostics


def theta_table(idata, *, truth=None, estimates=None, prob=0.9) -> pd.DataFrame:
    """One row per feature: posterior mean, sd, equal-tailed ``prob`` interval, and optional
    columns for the true theta and for point estimates of other methods (e.g. adaSSP)."""
    draws = diagnostics.posterior_array(idata, "theta")
    names = [str(v) for v in idata.posterior["theta"].coords["feature"].values]
    lo, hi = np.quantile(draws, [(1 - prob) / 2, (1 + prob) / 2], axis=0)
    pct = f"{100 * prob:g}%"
    table = pd.DataFrame(index=pd.Index(names, name="feature"))
    if truth is not None:
        table["true"] = np.asarray(truth, dtype=float)
    table["mean"] = draws.mean(axis=0)
    table["sd"] = draws.std(axis=0, ddof=1)
    table[f"{pct} lower"] = lo
    table[f"{pct} upper"] = hi
    for name, est in (estimates or {}).items():
        table[name] = np.asarray(est, dtype=float)
    return table


def format_table(table: pd.DataFrame) -> str:
    return table.to_string(float_format=lambda v: f"{v: .4f}")


def plot_theta(idata, path, *, truth=None, estimates=None, prob=0.9, title=None) -> Path:
    """Posterior mean and ``prob`` interval per coordinate, with the truth and other estimates."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    table = theta_table(idata, truth=truth, estimates=estimates, prob=prob)
    pct = f"{100 * prob:g}%"
    k = np.arange(len(table))
    fig, ax = plt.subplots(figsize=(1.2 * len(table) + 3, 3.6))
    ax.errorbar(k, table["mean"], yerr=[table["mean"] - table[f"{pct} lower"],
                                        table[f"{pct} upper"] - table["mean"]],
                fmt="o", capsize=4, color="C0", label=f"posterior mean, {pct} interval")
    if truth is not None:
        ax.scatter(k, table["true"], marker="x", s=60, color="k", zorder=3, label="true theta")
    for i, name in enumerate(estimates or {}):
        ax.scatter(k + 0.12 * (i + 1), table[name], marker="s", s=30, zorder=3,
                   color=f"C{i + 1}", label=name)
    ax.set_xticks(k, table.index)
    ax.set_ylabel("theta")
    ax.set_title(title or "posterior of theta")
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return Path(path)
