"""The main job on an embedded default: simulate -> DP release -> file -> fit -> table and plot."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from . import diagnostics, report
from .errors import CalibrationWarning
from .inference import adassp, closed_form_moments, fit, fit_nonprivate
from .releases import load_release, release
from .simulate import simulate

#: Measured on data sets like the demo's (benchmarks/prior_coverage.py, docs/methods.md
#: "Does the release agree with the prior of Sigma_x?"); printed under the demo's table.
DEMO_EVIDENCE = {"normalx": "48% of the true coefficients (10 simulated data sets)",
                 "fast": "34% (20 data sets)"}


def run_demo(*, n=100_000, d=5, nodes=5, epsilon=1.0, delta=1e-5, seed=0,
             out_dir="bayesdp-demo", echo=print):
    """Run the paper's simulation end to end and write ``release.json`` and ``theta.png``.

    Data: Sigma_x ~ InvWishart(V^T V, d+1), theta ~ N(0, I), x ~ N(0, Sigma_x), sigma_y = 1,
    split over ``nodes`` holders, released with (epsilon, delta)-DP using public bounds derived
    from the generating distribution. Fitted with ``normalx`` (the normalX model by NUTS, default
    weakly-informative priors scaled from the public bounds), whose convergence check and S_hat
    check are reported; the posterior means of Bayes-fixedS-fast and of the non-private
    posterior (same priors, raw rows) and adaSSP are shown beside it.
    Returns a dict with the table (pandas), the release, the posterior and the file paths.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    s_data, s_release, s_fit, s_adassp = (int(s) for s in rng.integers(0, 2**62, size=4))
    sim = simulate(n, d, seed=s_data)
    echo(f"simulated n={n} rows, d={d} features; split over J={nodes} data holders")
    rel = release(sim.X, sim.y, epsilon=epsilon, delta=delta, bounds=sim.bounds, nodes=nodes,
                  seed=s_release)
    path = rel.save(out / "release.json")
    echo(f"released with (eps={epsilon:g}, delta={delta:g})-DP per holder, public bounds "
         f"B_x={sim.bounds[0]:.4g}, B_y={sim.bounds[1]:.4g}; noise sd {rel.sigma_s[0]:.4g}; "
         f"{int(rel.n_clipped.sum())} rows clipped")
    echo(f"wrote {path} (seeded noise: a demo, not a real release)")
    rel = load_release(path)
    with warnings.catch_warnings(record=True) as caught:  # the S_hat check: said below instead
        warnings.simplefilter("always", CalibrationWarning)
        idata = fit(rel, method="normalx", seed=s_fit)
    for w in caught:
        if not issubclass(w.category, CalibrationWarning):
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    a = idata.posterior.attrs
    echo(f"fitted the normalX model (method='normalx', NUTS, {idata.posterior.sizes['chain']} "
         f"chains): max r_hat {a['max_r_hat']:.3f}, min bulk ESS {a['min_ess_bulk']:.0f} over "
         f"every sampled variable, {a['divergences']} divergent transitions")
    echo(f"priors: {a['priors']} (docs/methods.md, 'Priors'; Priors.paper() for the paper's)")
    with warnings.catch_warnings():  # fast's S noise check: said in the note instead
        warnings.simplefilter("ignore", CalibrationWarning)
        fast = fit(rel, method="fast", seed=s_fit)
    est = adassp(sim.X, sim.y, epsilon=epsilon, delta=delta, bounds=sim.bounds, nodes=nodes,
                 seed=s_adassp)
    reference = closed_form_moments(fit_nonprivate(sim.X, sim.y, seed=s_fit, num_samples=10,
                                                   bounds=sim.bounds))[0]
    estimates = {"fast": closed_form_moments(fast)[0], "adaSSP": est, "non-private": reference}
    table = report.theta_table(idata, truth=sim.theta, estimates=estimates)
    echo("\nPosterior of theta (normalX model), with the posterior mean of Bayes-fixedS-fast, "
         "adaSSP (same eps, delta)\nand the non-private posterior mean:")
    echo(report.format_table(table))
    echo("\n" + _s_hat_note(idata))
    plot = report.plot_theta(idata, out / "theta.png", truth=sim.theta, estimates=estimates,
                             title=f"normalX posterior, eps={epsilon:g}, J={nodes}, n={n}")
    echo(f"\nwrote {plot}")
    return {"table": table, "release": rel, "posterior": idata, "release_path": path,
            "plot_path": plot, "truth": sim.theta, "adassp": est}


def _s_hat_note(idata) -> str:
    """The demo's note on the S_hat check (fit's CalibrationWarning) in plain words."""
    import textwrap

    a = idata.posterior.attrs
    z = np.asarray(a["s_hat_check_z"], dtype=float)
    d = len(z)
    flagged = np.flatnonzero(np.abs(z) > diagnostics.s_hat_z_max(d))
    fast = ("Bayes-fixedS-fast fixes S at the noisy S_hat and leaves that noise out: its "
            f"intervals held {DEMO_EVIDENCE['fast']}.")
    if not len(flagged):
        text = (f"Note: fit's check of S_hat passed (largest |z| {np.abs(z).max():.1f} <= "
                f"{diagnostics.s_hat_z_max(d):.2f}): the release and the posterior agree along "
                "every direction of the features. " + fast)
    else:
        k = int(flagged[np.argmax(np.abs(z[flagged]))])
        V = np.asarray(a["s_hat_check_directions"], dtype=float).reshape(d, d)
        names = [str(c) for c in idata.posterior["theta"].coords["feature"].values]
        text = (f"Note: fit warns (CalibrationWarning): its check of S_hat flags {len(flagged)} "
                f"direction(s) of the features (z = {z[k]:.1f} along "
                f"{diagnostics.describe_direction(V[:, k], names)}). There the release shows "
                "less variance than the default prior of Sigma_x allows: the paper's simulation "
                "draws nearly collinear features, whose small variance the noise hides, and the "
                "prior reads it as larger, so theta's intervals along that direction are too "
                f"narrow: on data sets like this one they held {DEMO_EVIDENCE['normalx']}. A "
                "prior that allows small variances conflicts the other way (docs/methods.md, "
                "'Does the release agree with the prior of Sigma_x?'). " + fast)
    return textwrap.fill(text, width=100)
