"""What the three network examples share: their command line and their last step (fit the
adapted release, the wrong analysis and the non-private reference; plot; print).

Imported by examples/network_gossip.py, network_pricer.py and network_consensus.py, which run
from the examples/ folder (``python examples/network_gossip.py``).
"""

from __future__ import annotations

import argparse

import numpy as np


def arguments(doc, out, networks):
    """The parser of an example: ``--out`` (the plot), ``--seed`` and ``--networks``."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=out)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--networks", type=int, default=networks)
    return ap


def fit_and_plot(args, release, wrong, *, priors, sigma_y2, rows, bounds, theta, labels, title,
                 names=None, feature_names=None, reference_label=None):
    """Fit ``release`` with Bayes-fixedS-fast (sigma_y^2 fixed at ``sigma_y2``), the wrong
    analysis ``wrong`` (a release that counts one network's noise several times) with the same
    closed form, and the non-private posterior of all ``rows`` (X, y); plot the marginals of
    theta against ``theta`` into ``args.out`` and print the posterior.

    ``labels``: the legend labels of the release's and of the wrong posterior."""
    import bayesdp
    from bayesdp.inference import closed_form as cf
    from bayesdp.report import plot_gaussian_marginals

    print(release)
    print("DP claim valid:", release.dp_claim_valid, "-", release.dp_claim_note[:140], "...")
    idata = bayesdp.fit(release, method="fast", priors=priors, sigma_y2=sigma_y2, seed=args.seed)
    mean, cov = bayesdp.inference.closed_form_moments(idata)
    pw = cf.fast_posterior(wrong, priors.resolve(len(theta), bounds=bounds), sigma_y2=sigma_y2)
    X_all, y_all = rows
    extra = {} if feature_names is None else {"feature_names": list(feature_names)}
    ref = bayesdp.fit_nonprivate(np.vstack(X_all), np.concatenate(y_all), seed=args.seed,
                                 bounds=bounds, **extra)
    m_np, _ = bayesdp.inference.closed_form_moments(ref)
    extra = {} if reference_label is None else {"reference_label": reference_label}
    plot_gaussian_marginals(args.out, {labels[0]: (mean, cov), labels[1]: (pw["mean"], pw["cov"])},
                            truth=theta, reference=m_np, names=names, title=title, **extra)
    print(f"posterior mean {mean}, sd {np.sqrt(np.diag(cov))}; truth {theta}; wrote {args.out}")
