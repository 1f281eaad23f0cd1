"""The main job on an embedded default: simulate -> DP release -> file -> fit -> table and plot."""

from __future__ import annotations

import dataclasses
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from . import report
from .errors import CalibrationWarning
from .inference import adassp, closed_form_moments, fit, fit_nonprivate
from .plan import plan
from .releases import load_release, release
from .simulate import simulate

#: The share of the true coefficients inside the 90% intervals of "eiv" and "fast" on 20 data
#: sets like the demo's, printed under its table (docs/evidence/coverage-simulation.md, "`eiv`
#: against `fast` on the demo's setting", with the command that measures it).
DEMO_EVIDENCE = {"eiv": "77%", "fast": "40%"}
#: public pilot rows the demo plans from, drawn from the same population as the holders' rows
PILOT_ROWS = 2000


def run_demo(*, n=100_000, d=5, nodes=5, epsilon=1.0, delta=1e-5, seed=0,
             out_dir="bayesdp-demo", echo=print):
    """Run the paper's simulation end to end and write ``release.json`` and ``theta.png``.

    Data: Sigma_x ~ InvWishart(V^T V, d+1), theta ~ N(0, I), x ~ N(0, Sigma_x), sigma_y = 1,
    split over ``nodes`` holders, released with (epsilon, delta)-DP using public bounds derived
    from the generating distribution. Fitted with ``fit``'s default method ``eiv`` (the noise on
    S carried into theta's likelihood; default weakly-informative priors scaled from the public
    bounds); the posterior means of Bayes-fixedS-fast and of the non-private posterior (same
    priors, raw rows) and adaSSP are shown beside it.
    Returns a dict with the table (pandas), the release, the posterior and the file paths.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    s_data, s_release, s_fit, s_adassp = (int(s) for s in rng.integers(0, 2**62, size=4))
    whole = simulate(n + PILOT_ROWS, d, seed=s_data)
    sim = dataclasses.replace(whole, X=whole.X[:n], y=whole.y[:n])  # the holders' rows
    pilot_X, pilot_y = whole.X[n:], whole.y[n:]  # public rows of the same population
    echo(f"simulated n={n} rows, d={d} features; split over J={nodes} data holders")
    planned = plan(pilot_X, pilot_y, n=n, bounds=sim.bounds, nodes=nodes,
                   epsilon=[epsilon, 10 * epsilon], delta=delta, seed=s_fit)
    echo(f"\nPlanned before releasing, from {PILOT_ROWS} public pilot rows (no budget spent; "
         f"bayesdp.plan): the expected\nposterior sd and prior share of each coefficient at "
         f"eps={epsilon:g} and at eps={10 * epsilon:g}:")
    echo(report.format_table(_plan_columns(planned, nodes)))
    echo(_plan_note(planned, epsilon, nodes))
    rel = release(sim.X, sim.y, epsilon=epsilon, delta=delta, bounds=sim.bounds, nodes=nodes,
                  seed=s_release)
    path = rel.save(out / "release.json", overwrite=True)  # the demo's own folder
    echo(f"released with (eps={epsilon:g}, delta={delta:g})-DP per holder, public bounds "
         f"B_x={sim.bounds[0]:.4g}, B_y={sim.bounds[1]:.4g}; noise sd {rel.sigma_s[0]:.4g}; "
         f"{int(rel.n_clipped.sum())} rows clipped")
    echo(f"wrote {path} (seeded noise: a demo, not a real release)")
    rel = load_release(path)
    idata = fit(rel, seed=s_fit)
    echo(f"fitted with method='eiv' (the default: the noise on S carried into theta's "
         "likelihood; theta's prior scale and sigma_y^2 integrated on grids, theta given "
         f"them exactly); priors: {idata.posterior.attrs['priors']} (docs/methods.md, 'Priors')")
    with warnings.catch_warnings():  # fast's S noise check: said in the note instead
        warnings.simplefilter("ignore", CalibrationWarning)
        fast = fit(rel, method="fast", seed=s_fit)
    est = adassp(sim.X, sim.y, epsilon=epsilon, delta=delta, bounds=sim.bounds, nodes=nodes,
                 seed=s_adassp)
    reference = closed_form_moments(fit_nonprivate(sim.X, sim.y, seed=s_fit, num_samples=10,
                                                   bounds=sim.bounds))[0]
    estimates = {"fast": closed_form_moments(fast)[0], "adaSSP": est, "non-private": reference}
    table = report.theta_table(idata, truth=sim.theta, estimates=estimates)
    echo("\nPosterior of theta (method 'eiv'), with the posterior mean of Bayes-fixedS-fast, "
         "adaSSP (same eps, delta)\nand the non-private posterior mean:")
    echo(report.format_table(table))
    echo(report.theta_table_note(table))
    fitted_sd = table["sd"].to_numpy()
    at = planned.xs((epsilon, nodes), level=("epsilon", "nodes"))
    agree = pd.DataFrame({"planned sd": at["sd"].to_numpy(), "fitted sd": fitted_sd,
                          "planned prior share": at["prior share"].to_numpy(),
                          "fitted prior share": table["prior share"].to_numpy()},
                         index=table.index)
    echo(f"\nThe plan against the fit at eps={epsilon:g} (the plan's sd is the mean over "
         "releases like this one; one release's sd\nfalls in its 10%-90% range about 80% of "
         "the time):")
    echo(report.format_table(agree))
    echo("\n" + _note())
    plot = report.plot_theta(idata, out / "theta.png", truth=sim.theta, estimates=estimates,
                             title=f"eiv posterior, eps={epsilon:g}, J={nodes}, n={n}")
    echo(f"\nwrote {plot}")
    return {"table": table, "release": rel, "posterior": idata, "release_path": path,
            "plot_path": plot, "truth": sim.theta, "adassp": est, "plan": planned}


def _plan_note(planned, epsilon, nodes) -> str:
    """What the plan says in words: the coefficients the release will say little about."""
    share = planned.xs((epsilon, nodes), level=("epsilon", "nodes"))["prior share"]
    vague = [str(f) for f, v in share.items() if v > 0.5]
    if not vague:
        return (f"At eps={epsilon:g} the release is expected to determine every coefficient "
                "(prior shares below 0.5).")
    text = (f"At eps={epsilon:g} with J={nodes} the release is expected to say little about "
            f"{', '.join(vague)} (prior share above 0.5: their intervals will be mostly the "
            "prior's). A larger eps lowers the prior share; the sd of a coefficient the prior "
            "dominates can still grow, as the release rules out the prior's small scales.")
    return textwrap.fill(text, width=100)


def _plan_columns(planned, nodes):
    """The demo's plan, one row per coefficient: sd and prior share per epsilon."""
    cols = {}
    for eps in dict.fromkeys(planned.index.get_level_values("epsilon")):
        part = planned.xs((eps, nodes), level=("epsilon", "nodes"))
        cols[f"sd (eps {eps:g})"] = part["sd"]
        cols[f"prior share (eps {eps:g})"] = part["prior share"]
    return pd.DataFrame(cols)


def _note() -> str:
    """The demo's note on how far its intervals can be trusted, in plain words."""
    text = (f"Note: the paper's simulation draws nearly collinear features, whose smallest "
            f"variances the noise on X^T X hides; on 20 data sets like this one the 90% "
            f"intervals of 'eiv' held {DEMO_EVIDENCE['eiv']} of the true coefficients, those of "
            f"Bayes-fixedS-fast, which leaves the noise on X^T X out, {DEMO_EVIDENCE['fast']}. "
            "On the paper's real data sets its intervals held the non-private posterior means "
            "78-100% of the time pooled over coefficients, but AirQuality's largest coefficient, "
            "along a direction the release cannot see, almost never "
            "(docs/evidence/coverage-real-data.md).")
    return textwrap.fill(text, width=100)
