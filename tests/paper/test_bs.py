"""MCMC-B&S: exact row moments (Isserlis) and the sampler."""

import numpy as np
import pytest

import bayesdp
from bayesdp._jax import enable_x64
from bayesdp.errors import BayesdpInputError
from bayesdp.paper import bs_model as M
from bayesdp.releases import layout


@pytest.fixture(scope="module", autouse=True)
def _x64():
    enable_x64()


def _moments(Sx, th, s2):
    import jax.numpy as jnp

    mu, Sig = M.row_moments(jnp.asarray(Sx), jnp.asarray(th), s2)
    return np.asarray(mu), np.asarray(Sig)


@pytest.mark.parametrize("d", [1, 2, 4])
def test_row_moments_match_monte_carlo(d):
    rng = np.random.default_rng(d)
    A = rng.standard_normal((d, d))
    Sx = A @ A.T + 0.5 * np.eye(d)
    th = rng.standard_normal(d)
    s2 = 0.7
    mu, Sig = _moments(Sx, th, s2)
    assert mu.shape == (layout.stat_dim(d, with_yty=True),) and Sig.shape == (layout.stat_dim(d, with_yty=True),) * 2
    n = 200_000
    X = rng.standard_normal((n, d)) @ np.linalg.cholesky(Sx).T
    y = X @ th + np.sqrt(s2) * rng.standard_normal(n)
    R = layout.row_stats(X, y, with_yty=True)
    # means: |MC mean - exact| < 5 standard errors (sd / sqrt(n)) in every coordinate
    z = (R.mean(0) - mu) / np.sqrt(np.diag(Sig) / n)
    assert np.max(np.abs(z)) < 5
    # covariances: compare the MC covariance entry-wise with a standard error from batches
    B = 20
    covs = np.stack([np.cov(b.T) for b in np.array_split(R, B)])
    se = covs.std(axis=0, ddof=1) / np.sqrt(B)
    Smc = np.cov(R.T)
    z = (Smc - Sig) / np.maximum(se, 1e-12)
    assert np.max(np.abs(z)) < 6


def test_row_moments_isserlis_closed_forms():
    # d = 1: Var(x^2) = 2 s^4, Cov(x^2, xy) = 2 s^4 t, E[y^2] = t^2 s^2 + s2
    s, t, s2 = 1.3, -0.4, 0.5
    mu, Sig = _moments(np.array([[s * s]]), np.array([t]), s2)
    assert np.allclose(mu, [s * s, s * s * t, t * t * s * s + s2])
    assert np.isclose(Sig[0, 0], 2 * s**4)
    assert np.isclose(Sig[0, 1], 2 * s**4 * t)
    vy = t * t * s * s + s2
    assert np.isclose(Sig[2, 2], 2 * vy**2)


def test_release_stats_order_matches_row_stats():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 3))
    y = rng.standard_normal(50)
    rel = bayesdp.release(X, y, epsilon=1e9, delta=1e-5, bounds=(10, 10), nodes=1, seed=0,
                          include_yty=True)
    rows = layout.row_stats(X, y, with_yty=True)
    assert np.allclose(M.release_stats(rel)[0], rows.sum(0), atol=0.05)


def test_bs_needs_yty():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((100, 2))
    rel = bayesdp.release(X, X[:, 0], epsilon=1, delta=1e-5, bounds=(5, 5), seed=0,
                          include_yty=False)
    with pytest.raises(BayesdpInputError, match="include_yty"):
        bayesdp.fit(rel, method="bs", seed=0, num_samples=10, num_warmup=0, num_chains=1)


def test_inv_wishart_mean():
    import jax

    from bayesdp.paper.bs import sample_inv_wishart

    Psi = np.array([[4.0, 3.0], [3.0, 5.0]])
    df = 20.0
    keys = jax.random.split(jax.random.PRNGKey(0), 20000)
    draws = np.asarray(jax.vmap(lambda k: sample_inv_wishart(k, Psi, df))(keys))
    assert np.allclose(draws.mean(0), Psi / (df - 3), rtol=0.03, atol=0.005)


@pytest.mark.slow
def test_bs_posterior_matches_nonprivate_at_large_epsilon():
    sim = bayesdp.simulate(n=20_000, d=2, seed=1)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1e7, delta=1e-5, bounds=sim.bounds, nodes=2,
                          seed=3, include_yty=True)
    idata = bayesdp.fit(rel, method="bs", seed=1, num_samples=1500, num_warmup=300, num_chains=2,
                        priors=bayesdp.Priors.paper(Lambda=sim.Lambda))
    th = np.asarray(idata.posterior["theta"]).reshape(-1, 2)
    assert np.asarray(idata.posterior["Sigma_x"]).shape[-2:] == (2, 2)
    npv = bayesdp.fit_nonprivate(sim.X, sim.y, seed=1)
    mean, cov = bayesdp.inference.closed_form_moments(npv)
    sd = np.sqrt(np.diag(cov))
    # B&S at huge eps: its posterior spread adds the CLT/S uncertainty, so compare with slack
    assert np.all(np.abs(th.mean(0) - mean) < 0.5 * sd + 4 * th.std(0) / np.sqrt(300))
    assert np.all(th.std(0) > 0.7 * sd) and np.all(th.std(0) < 1.5 * sd)
    s2 = np.asarray(idata.posterior["sigma_y2"]).mean()
    assert abs(s2 - 1.0) < 0.05


def test_bs_seeded_reproducible():
    # same shapes as the test above, so the compiled sampler is reused
    sim = bayesdp.simulate(n=2000, d=2, seed=2)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-4, bounds=sim.bounds, seed=0,
                          nodes=2, include_yty=True)
    kw = dict(seed=5, num_samples=1500, num_warmup=300, num_chains=2)
    a = bayesdp.fit(rel, method="bs", **kw)
    b = bayesdp.fit(rel, method="bs", **kw)
    assert np.array_equal(np.asarray(a.posterior["theta"]), np.asarray(b.posterior["theta"]))


def test_numpyro_model_traces_with_release_shapes():
    from numpyro import handlers

    from bayesdp.inference import closed_form

    sim = bayesdp.simulate(n=500, d=2, seed=0)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-3, bounds=sim.bounds, nodes=2,
                          seed=0, include_yty=True)
    pri = bayesdp.Priors.paper().resolve(2)
    args = (M.release_stats(rel), layout.noise_covariance(rel, with_yty=True), rel.n, pri,
            closed_form.nig_precision(pri))
    tr = handlers.trace(handlers.seed(M.bs_model, 0)).get_trace(*args)
    assert tr["ss"]["value"].shape == (2, layout.stat_dim(2, with_yty=True))
    assert tr["ss_hat"]["is_observed"]
    V = layout.noise_covariance(rel, with_yty=True)
    assert np.allclose(np.diag(V[0])[-1], rel.sigma_yty[0] ** 2)


def test_stats_step_draws_the_model_conditional():
    """Step 3 of the sweep (``draw_stats``) draws ss_j from ``bs_model``'s conditional given
    (Sigma_x, theta, sigma_y^2, ss_hat_j): the model's log density (numpyro's ``log_density``)
    is quadratic in ss, and the draws, whitened by its maximum and inverse negative Hessian,
    are N(0, I). (The sweep's other steps are not ``bs_model``'s conditionals: see the
    docstring of ``bayesdp.paper.bs``.)"""
    import jax
    import jax.numpy as jnp
    from numpyro import handlers
    from numpyro.infer.util import log_density

    from bayesdp.inference import closed_form
    import bayesdp.paper.bs as B

    sim = bayesdp.simulate(n=500, d=2, seed=0)
    # contiguous: 250 + 250 rows, the same noise, so both holders share one factor
    rel = bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-3, bounds=sim.bounds, nodes=2,
                          seed=0, include_yty=True, split="contiguous")
    pri = bayesdp.Priors.paper().resolve(2)
    ss_hat, V = M.release_stats(rel), layout.noise_covariance(rel, with_yty=True)
    args = (ss_hat, V, rel.n, pri, closed_form.nig_precision(pri))
    tr = handlers.trace(handlers.seed(M.bs_model, 1)).get_trace(*args)
    p = {k: tr[k]["value"] for k in ("Sigma_x", "sigma_y2", "theta", "ss")}

    def logp(ss):
        return log_density(M.bs_model, args, {}, dict(p, ss=ss))[0]

    g = jax.jit(jax.grad(logp))(p["ss"])
    H = jax.jit(jax.hessian(logp))(p["ss"])
    mu, Sig = M.row_moments(p["Sigma_x"], p["theta"], p["sigma_y2"])
    Sig_chol = jnp.linalg.cholesky(Sig)
    keys = jax.random.split(jax.random.PRNGKey(3), 20_000 * rel.J).reshape(20_000, rel.J, 2)
    n = jnp.asarray(rel.n, dtype=float)
    V_half = np.stack([B._psd_sqrt(v) for v in V])
    for share in (True, False):  # one factor solving both holders' vectors; one each
        first, group = B._holder_groups(rel.n, V, share=share)
        assert len(first) == (1 if share else 2)
        Mc = jax.vmap(B.holder_factor, in_axes=(None, 0, 0))(Sig_chol @ Sig_chol.T,
                                                            V[first], n[first])
        draws = np.asarray(jax.jit(jax.vmap(lambda k: B.draw_stats(
            k, mu, Sig_chol, jnp.asarray(ss_hat), jnp.asarray(V_half[first]), n, Mc,
            jnp.asarray(group))))(keys))
        for j in range(rel.J):
            cov = np.linalg.inv(-np.asarray(H[j, :, j, :]))
            mean = np.asarray(p["ss"][j]) + cov @ np.asarray(g[j])
            W = np.linalg.solve(np.linalg.cholesky(cov), (draws[:, j] - mean).T).T
            assert np.max(np.abs(W.mean(0) * np.sqrt(len(W)))) < 5
            assert np.allclose(np.cov(W.T), np.eye(W.shape[1]), atol=0.05)


@pytest.mark.slow
def test_holders_sharing_their_factor_give_the_same_draws(monkeypatch):
    """Step 3 factors V_j + n_j Sigma once per group of holders with the same (n_j, V_j): an
    even split (rows 4, 4, 3, as the contiguous split makes them)
    has 2 groups, distinct (n_j, V_j) J groups; the draws equal those of one factor per
    holder (the same matrices, factored once instead of several times; with fewer groups than
    holders ``draw_stats`` solves for the holders' stacked vectors, otherwise one by one)."""
    import bayesdp.paper.bs as B

    V = np.stack([np.eye(3)] * 3)
    first, group = B._holder_groups(np.array([4, 4, 3]), V)
    assert first.tolist() == [0, 2] and group.tolist() == [0, 0, 1]
    first, group = B._holder_groups(np.array([4, 4, 3]), V, share=False)
    assert first.tolist() == [0, 1, 2] and group.tolist() == [0, 1, 2]
    V2 = V.copy()
    V2[1, 0, 0] = 2.0  # same n, different noise: not shared
    assert B._holder_groups(np.array([4, 4, 4]), V2)[1].tolist() == [0, 1, 0]

    sim = bayesdp.simulate(n=3001, d=2, seed=0)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-5, bounds=sim.bounds, nodes=3,
                          seed=0, include_yty=True, split="contiguous")
    pri = bayesdp.Priors.paper().resolve(2)
    _, data, _ = B._setup(rel, pri, 1.0, None, None)
    assert len(data[-2]) == 2  # 1001, 1000, 1000 rows
    kw = dict(seed=3, num_samples=200, num_warmup=100, num_chains=2, progress_bar=False,
              **B.OPTIONS)
    shared = B.run_bs(rel, pri, **kw)
    orig = B._holder_groups
    monkeypatch.setattr(B, "_holder_groups", lambda n, V, share=True: orig(n, V, False))
    separate = B.run_bs(rel, pri, **kw)
    for k in ("theta", "sigma_y2", "Sigma_x"):
        np.testing.assert_allclose(shared.posterior[k], separate.posterior[k], rtol=1e-12,
                                   atol=0)


@pytest.mark.slow
def test_batch_of_releases_with_different_groupings_matches_single_fits():
    """fit_batch stacks the releases' inputs, so when their numbers of shared factors differ
    (a contiguous split: 2 groups; a random split: one per holder) none are shared; each release's
    draws still equal its own fit's."""
    import bayesdp.paper.bs as B

    sim = bayesdp.simulate(n=3001, d=2, seed=0)
    rels = [bayesdp.release(sim.X, sim.y, epsilon=1, delta=1e-5, bounds=sim.bounds, nodes=3,
                            seed=0, include_yty=True, split=split)
            for split in ("contiguous", "random")]
    pri = bayesdp.Priors.paper().resolve(2)
    assert [len(B._setup(r, pri, 1.0, None, None)[1][-2]) for r in rels] == [2, 3]
    kw = dict(num_samples=100, num_warmup=50, num_chains=2, progress_bar=False, **B.OPTIONS)
    batch = B.run_bs_batch(rels, [pri, pri], seeds=[4, 5], **kw)
    for r, s, b in zip(rels, (4, 5), batch):
        one = B.run_bs(r, pri, seed=s, **kw)
        np.testing.assert_allclose(b.posterior["theta"], one.posterior["theta"], rtol=1e-9)


def test_marginal_model_is_bs_model_with_the_sums_integrated_out():
    """``bs_marginal_model``'s density of each holder's ss_hat_j equals ``bs_model``'s with ss_j
    integrated out, estimated by Monte Carlo: p(ss_hat_j | latents) = E[N(ss_hat_j; ss_j, V_j)]
    over ss_j drawn from ``bs_model``'s own ss site (the densities are those of its traced
    ss_hat site). Within 5 Monte Carlo standard errors of the log of the mean (delta method:
    sd of the weights / (mean sqrt(M))). The priors agree too: the two models' joint log
    densities differ only by the observation terms. V_j is of the size of n_j Sigma so that the
    weights vary little."""
    import jax
    import jax.numpy as jnp
    from numpyro import handlers
    from numpyro.infer.util import log_density

    from bayesdp.inference import closed_form

    enable_x64()
    d, J, draws = 2, 2, 200_000
    pri = bayesdp.Priors.paper().resolve(d)
    L0 = closed_form.nig_precision(pri)
    latents = {"Sigma_x": jnp.array([[1.0, 0.3], [0.3, 0.5]]), "theta": jnp.array([0.8, -0.4]),
               "sigma_y2": jnp.asarray(0.3)}
    n = np.array([5.0, 12.0])
    mu, Sig = M.row_moments(latents["Sigma_x"], latents["theta"], latents["sigma_y2"])
    V = np.stack([0.5 * nj * np.diag(np.diag(np.asarray(Sig))) for nj in n])
    rng = np.random.default_rng(0)
    ss_hat = np.stack([rng.multivariate_normal(nj * np.asarray(mu), nj * np.asarray(Sig) + Vj)
                       for nj, Vj in zip(n, V)])
    args = (ss_hat, V, n, pri, L0)

    def obs_logp(key):  # bs_model's log N(ss_hat_j; ss_j, V_j), ss_j from its own site
        tr = handlers.trace(handlers.seed(handlers.substitute(M.bs_model, latents),
                                          key)).get_trace(*args)
        return tr["ss_hat"]["fn"].log_prob(tr["ss_hat"]["value"])

    logw = np.asarray(jax.jit(jax.vmap(obs_logp))(jax.random.split(jax.random.PRNGKey(1), draws)))
    top = logw.max(axis=0)
    w = np.exp(logw - top)
    estimate = top + np.log(w.mean(axis=0))
    se = w.std(axis=0) / (w.mean(axis=0) * np.sqrt(draws))
    assert np.all(se < 0.02), se  # the comparison has power

    tr = handlers.trace(handlers.substitute(M.bs_marginal_model, latents)).get_trace(*args)
    exact = np.asarray(tr["ss_hat"]["fn"].log_prob(tr["ss_hat"]["value"]))
    assert exact.shape == (J,)
    assert np.all(np.abs(exact - estimate) < 5 * se), (exact, estimate, se)

    # same priors: joint log densities differ by the observation terms only
    ss = jnp.asarray(ss_hat)  # any value of the sums
    full, tr_full = log_density(M.bs_model, args, {}, dict(latents, ss=ss))
    marg, _ = log_density(M.bs_marginal_model, args, {}, latents)
    observed = sum(float(jnp.sum(tr_full[s]["fn"].log_prob(tr_full[s]["value"])))
                   for s in ("ss", "ss_hat"))
    assert float(marg) - float(exact.sum()) == pytest.approx(float(full) - observed, rel=1e-10)
