"""Is eiv calibrated for a fixed design whose small eigenvalues the release's noise on S swamps?

Simulation-based calibration of the ``eiv`` posterior computed exactly by enumeration (no
sampler): for d = 3, every cell of a grid over (r_1, r_2, r_3) (one scale per slope, 24 points
each of log r over [log 0.01, 0]; ``--scales hier:TAU`` ties them, log r_k ~ N(mu, TAU^2) on
that range with mu uniform, theta drawn from that prior too) or over one common r (200
points), times 10 points of sigma_y^2, weighted by its closed-form marginal likelihood and
priors; theta's conditional in a
cell is the Gaussian of :mod:`bayesdp.inference.eiv`, so each coefficient's posterior CDF at the
true value (its PIT, the rank's continuous version) is a weighted sum of normal CDFs. The data
are those of ``tests/inference/test_eiv.py``'s SBC: n = 10,000 rows N(0, diag(s)^2 / 9) clipped
to ||x|| <= 1, 2 holders, eps = 1, B_y = 30, theta ~ N(0, 25 D_r^2), sigma_y^2 ~ InvGamma(3, 1/2).
The pooled noise on each entry of S has sd 158; S's eigenvalues are about 1111, 400 and 100
(s = 1, 0.6, 0.3), so the third sits under the noise.

Variants (``--variant``):

- ``plugin``: the posterior ``fit`` computes (the S noise pushed through the common-scale mean);
- ``oracle``: the S noise pushed through the true theta;
- ``nonoise``: S released without noise (S_hat = S, the noise on z kept): the likelihood is then
  exact;
- ``broad``: as ``plugin`` with each feature's scale s_k log-uniform over [0.05, 1] per
  replication (S's small eigenvalues down to about 3).

``--toy`` runs the one-dimensional version, z = s theta + e_z, s_hat = s + e_s (both noises sd
158, theta ~ N(0, 25)) at a fixed s, with three priors on s: flat on the real line (what eiv's
likelihood assumes), flat on s >= 0 (S is PSD), and s known.

    .venv/bin/python research/eiv_fixed_design_sbc.py --variant plugin --scales per-slope
    .venv/bin/python research/eiv_fixed_design_sbc.py --variant plugin --scales hier:0.5
    .venv/bin/python research/eiv_fixed_design_sbc.py --toy --s 100

Prints, per coefficient, the PIT counts in 10 bins and the chi-square p-value (uniform when
calibrated; U-shaped when the intervals are too narrow). Seconds per run; results in
docs/evidence/coverage-real-data.md ("Why no fixed prior ...").
"""

from __future__ import annotations

import argparse

import numpy as np
from scipy import special, stats


def _counts(pit, bins=10):
    c = np.bincount(np.minimum((np.asarray(pit) * bins).astype(int), bins - 1), minlength=bins)
    return c, stats.chisquare(c).pvalue


def enumerated(variant, scales, reps, seed=7):
    """PITs (reps, 3) of the enumerated eiv posterior (module docstring)."""
    import bayesdp
    from bayesdp.inference import eiv
    from bayesdp.models import regression

    priors = bayesdp.Priors(m=np.zeros(3), C=25.0 * np.eye(3), a=3.0, b=0.5)
    rng = np.random.default_rng(seed)
    d, n, bounds = 3, 10_000, (1.0, 30.0)
    lo = np.log(0.01)
    tau = float(scales.split(":")[1]) if scales.startswith("hier:") else None
    log_prior_R = 0.0
    if scales == "common":
        R = np.repeat(np.linspace(lo, 0.0, 200)[:, None], d, axis=1)
    else:
        g = np.linspace(lo, 0.0, 24)
        R = np.stack(np.meshgrid(g, g, g, indexing="ij"), -1).reshape(-1, d)
        if tau is not None:  # log r_k ~ N(mu, tau^2) on [lo, 0], mu ~ U[lo, 0]
            mus = np.linspace(lo, 0.0, 60)
            tn = stats.truncnorm((lo - mus) / tau, -mus / tau, loc=mus, scale=tau)
            lp = tn.logpdf(R[:, :, None]).sum(1)  # (cells, mus)
            log_prior_R = special.logsumexp(lp, axis=1) + np.log(g[1] - g[0]) * d
    r = np.exp(R)
    q = stats.invgamma(priors.a, scale=priors.b)
    s2 = np.exp(np.linspace(np.log(q.ppf(1e-4)), np.log(q.ppf(1 - 1e-4)), 10))
    pits = []
    for _ in range(reps):
        s = (np.array([1.0, 0.6, 0.3]) if variant != "broad"
             else np.exp(rng.uniform(np.log(0.05), 0.0, d)))
        X = rng.normal(size=(n, d)) * s / 3.0
        X /= np.maximum(1.0, np.linalg.norm(X, axis=1) / bounds[0])[:, None]
        while True:
            if tau is None:
                rr = np.exp(rng.uniform(lo, 0.0, 1 if scales == "common" else d))
            else:
                mu0 = rng.uniform(lo, 0.0)
                rr = np.exp(stats.truncnorm.rvs((lo - mu0) / tau, -mu0 / tau, loc=mu0,
                                                scale=tau, size=d, random_state=rng))
            theta = rng.normal(size=d) * 5.0 * rr
            sy2 = q.rvs(random_state=rng)
            y = X @ theta + np.sqrt(sy2) * rng.standard_normal(n)
            if np.abs(y).max() < bounds[1]:
                break
        rel = bayesdp.release(X, y, epsilon=1.0, delta=1e-5, bounds=bounds, nodes=2,
                              seed=int(rng.integers(2**31)), include_yty=False)
        post = eiv.eiv_posterior(rel, priors.resolve(rel), yty=False)
        data, t = post["data"], post["theta_plugin"]
        if variant == "nonoise":
            z = X.T @ y + rng.multivariate_normal(np.zeros(d), data.noise_zz)
            data = data._replace(S_hat=X.T @ X, S_plus=X.T @ X, z_hat=z,
                                 noise_SS=0 * data.noise_SS, noise_Sz=None)
        if variant in ("oracle", "nonoise"):
            t = theta
        L = np.linalg.cholesky(s2[:, None, None] * data.S_plus
                               + regression.eiv_noise_covariance(data, t))
        A = np.linalg.solve(L, data.S_hat)
        b = np.linalg.solve(L, data.z_hat[:, None])[..., 0]
        AtA, Atb = A.transpose(0, 2, 1) @ A, np.einsum("gij,gi->gj", A, b)
        log_det_M = 2 * np.log(np.diagonal(L, axis1=1, axis2=2)).sum(-1)
        log_w, mu, sd = [], [], []
        for g in range(len(s2)):
            P = AtA[g] + np.eye(d) / (25.0 * r[:, :, None] ** 2)
            Lp = np.linalg.cholesky(P)
            m = np.linalg.solve(Lp.transpose(0, 2, 1),
                                np.linalg.solve(Lp, np.broadcast_to(Atb[g], r.shape)[..., None]))[..., 0]
            log_w.append(-0.5 * (log_det_M[g] + np.log(25.0 * r ** 2).sum(-1)
                                 + 2 * np.log(np.diagonal(Lp, axis1=1, axis2=2)).sum(-1)
                                 + (b[g] @ b[g]) - (Atb[g] * m).sum(-1))
                         - priors.a * np.log(s2[g]) - priors.b / s2[g] + log_prior_R)
            mu.append(m)
            sd.append(np.sqrt(np.diagonal(np.linalg.inv(P), axis1=1, axis2=2)))
        log_w = np.concatenate(log_w)
        w = np.exp(log_w - special.logsumexp(log_w))
        pits.append((w[:, None] * stats.norm.cdf((theta - np.concatenate(mu))
                                                 / np.concatenate(sd))).sum(0))
    return np.array(pits)


def toy(s_true, reps, sigma=158.0, tau=5.0, seed=1):
    """PITs of theta under the three priors on s of the module docstring."""
    rng = np.random.default_rng(seed)
    th_grid = np.linspace(-6 * tau, 6 * tau, 1201)
    s_grid = np.linspace(-1500.0, 2500.0, 2001)
    priors = {"flat on R": np.zeros_like(s_grid),
              "flat on s >= 0": np.where(s_grid >= 0, 0.0, -np.inf),
              "known s": np.where(np.abs(s_grid - s_true) < 1.5, 0.0, -np.inf)}
    pits = {k: [] for k in priors}
    for _ in range(reps):
        th = rng.normal(0.0, tau)
        s_hat = s_true + sigma * rng.standard_normal()
        z = s_true * th + sigma * rng.standard_normal()
        lz = stats.norm.logpdf(z, s_grid[None, :] * th_grid[:, None], sigma)
        for k, lp in priors.items():
            lj = lz + (stats.norm.logpdf(s_hat, s_grid, sigma) + lp)[None, :]
            post = np.exp(lj - lj.max()).sum(1) * stats.norm.pdf(th_grid, 0.0, tau)
            pits[k].append(post[th_grid < th].sum() / post.sum())
    return pits


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variant", choices=("plugin", "oracle", "nonoise", "broad"),
                   default="plugin")
    p.add_argument("--scales", default="per-slope",
                   help="common, per-slope, or hier:TAU (log r_k ~ N(mu, TAU^2), mu uniform)")
    p.add_argument("--reps", type=int, default=200)
    p.add_argument("--toy", action="store_true")
    p.add_argument("--s", type=float, default=100.0, help="the toy's fixed s")
    args = p.parse_args(argv)
    if args.toy:
        for k, v in toy(args.s, 10 * args.reps).items():
            c, pv = _counts(v)
            print(f"toy s = {args.s:g}, {k:15s} {c} p = {pv:.2g}")
        return
    pits = enumerated(args.variant, args.scales, args.reps)
    for k in range(pits.shape[1]):
        c, pv = _counts(pits[:, k])
        print(f"{args.variant} {args.scales} theta_{k + 1}: {c} p = {pv:.2g}")


if __name__ == "__main__":
    main()
