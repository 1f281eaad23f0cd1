"""Bayesian variable selection from one release (bayesdp/inference/selection.py): each model's
likelihood and evidence against eiv's own functions, closed forms and direct numerical
integrals; enumeration against the sampler; the result's parts; bad input."""

import dataclasses
import warnings

import numpy as np
import pytest
from scipy import integrate, stats

import bayesdp
from bayesdp.inference import eiv, selection
from bayesdp.models import regression
from research_helpers import research_module


def _rows(n=4000, theta=(0.6, 0.0, 0.3, 0.0), rho=0.6, seed=0):
    """Rows with correlated features (corr rho^|i-j|), y = X theta + N(0, 1), and public
    bounds from the generating law (not the rows)."""
    rng = np.random.default_rng(seed)
    d = len(theta)
    corr = rho ** np.abs(np.subtract.outer(np.arange(d), np.arange(d)))
    X = rng.standard_normal((n, d)) @ np.linalg.cholesky(corr).T
    y = X @ np.asarray(theta) + rng.standard_normal(n)
    return X, y, (2.5 * np.sqrt(d), 4.0)


def _release(n=4000, theta=(0.6, 0.0, 0.3, 0.0), eps=1.0, J=1, seed=0, include_yty=True,
             intercept=False):
    X, y, bounds = _rows(n, theta, seed=seed)
    if intercept:
        X, y = X + 1.0, y + 2.0
        bounds = (bounds[0] + np.sqrt(len(theta)), bounds[1] + 2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # centring advice
        return bayesdp.release(X, y, epsilon=eps, delta=1e-5, bounds=bounds, nodes=J,
                               seed=seed + 1, include_yty=include_yty, intercept=intercept)


def _space(rel, plugin="restricted"):
    pri = bayesdp.Priors().resolve(rel)
    post = eiv.eiv_posterior(rel, pri)
    return post, selection.model_space(post["data"], post["theta_plugin"], plugin=plugin,
                                       names=rel.feature_names)


@pytest.mark.parametrize("include_yty", [True, False])
def test_full_model_cells_are_eivs_grid(include_yty):
    """The full model on eiv's own final grid and plug-in: the cells' normalised log weights
    and theta's conditional means are eiv's, and the evidence on selection's own (smaller)
    grid is the evidence on eiv's grid (trapezoid rule) to 0.01."""
    rel = _release(eps=1.0, J=2, include_yty=include_yty)
    post, space = _space(rel)
    full = np.ones((1, rel.d), dtype=bool)
    ls2, lr = np.log(post["sigma_y2"])[None], np.log(post["scale"])[None]
    cells = selection.model_cells(post["data"], full, post["theta_plugin"][None], ls2, lr,
                                  moments=True)
    log_cell = cells["log_cell"][0]
    log_w = (log_cell + selection._trapezoid_log_weights(ls2)[0][:, None]
             + selection._trapezoid_log_weights(lr)[0][None, :])
    # eiv's grid weights are the cells' densities times the same trapezoid rule
    np.testing.assert_allclose(log_w - np.logaddexp.reduce(log_w.ravel()),
                               post["log_weight"], atol=1e-8)
    np.testing.assert_allclose(cells["mean"][0], post["mean"], rtol=1e-9, atol=1e-12)
    on_eiv_grid = np.logaddexp.reduce(log_w.ravel())
    ours = selection.evidence(space, full)["log_evidence"][0]
    assert ours == pytest.approx(on_eiv_grid, abs=0.01)


def test_subset_cell_against_eivs_functions_and_a_numerical_integral():
    """A subset's cell (sigma_y^2 and r fixed): its z_hat part is eiv.log_marginal with the
    prior's covariance zero outside the model (the closed form), and a direct integral over
    theta_gamma (scipy quad, d = 2, gamma = {x0}); its y^T y part is eiv_yty_moments with
    theta's conditional padded with zeros outside the model."""
    rel = _release(theta=(0.6, 0.2), eps=1.0, J=2)
    post, space = _space(rel)
    data = post["data"]
    mask = np.array([[True, False]])
    t = post["theta_plugin"] * mask[0]
    s2, r = 0.9, 0.3
    cells = selection.model_cells(data, mask, t[None], np.log([[s2]]), np.log([[r]]),
                                  moments=True)
    base = selection.model_cells(data._replace(yty_hat=None, yty_var=None), mask, t[None],
                                 np.log([[s2]]), np.log([[r]]), moments=True)
    log_priors = (stats.invgamma.logpdf(s2, data.a, scale=data.b) + np.log(s2)
                  - stats.invgamma.logcdf(data.sigma_y2_max, data.a, scale=data.b)
                  - np.log(np.log(1 / data.scale_min)))
    z_part = base["log_cell"][0, 0, 0] - log_priors
    M = s2 * data.S_plus + regression.eiv_noise_covariance(data, t)
    masked = data._replace(C=data.C * np.outer(mask[0], mask[0]), m=data.m * mask[0])
    closed = eiv.log_marginal(masked, M, np.array([r])) - np.log(2 * np.pi)  # d = 2
    assert z_part == pytest.approx(closed, abs=1e-9)
    sd = r * np.sqrt(data.C[0, 0])
    z = stats.multivariate_normal(np.zeros(2), M)

    def integrand(t0):
        return np.exp(z.logpdf(data.z_hat - data.S_hat[:, 0] * t0) - closed) \
            * stats.norm(data.m[0], sd).pdf(t0)

    mu = base["mean"][0, 0, 0, 0]
    prec = base["chol"][0, 0, 0, 0, 0] ** 2
    w = 12 / np.sqrt(prec)
    value, _ = integrate.quad(integrand, mu - w, mu + w, points=[mu], epsabs=0, epsrel=1e-10)
    assert np.log(value) == pytest.approx(0.0, abs=1e-7)
    # y^T y: eiv_yty_moments with mu and P^-1 zero outside the model
    mu_full = np.zeros(2)
    mu_full[0] = mu
    cov = np.zeros((2, 2))
    cov[0, 0] = 1 / prec
    mean, var = regression.eiv_yty_moments(data, s2, mu_full, cov, M,
                                           regression.eiv_yty_noise(data, t))
    yty_part = cells["log_cell"][0, 0, 0] - base["log_cell"][0, 0, 0]
    assert yty_part == pytest.approx(stats.norm(mean, np.sqrt(var)).logpdf(data.yty_hat),
                                     abs=1e-9)


def test_subset_evidence_against_a_double_integral():
    """A subset's evidence (d = 3, gamma = {x0, x2}, no y^T y): the grid's against scipy's
    dblquad of N(z_hat; S_g m_g, M + S_g C_r S_g^T) p(sigma_y^2) p(r) over (log sigma_y^2, log
    r), the Gaussian from scipy and the priors from scipy.stats, to 0.01."""
    rel = _release(theta=(0.5, 0.0, 0.2), eps=3.0, J=1, include_yty=False)
    post, space = _space(rel)
    data = post["data"]
    mask = np.array([[True, False, True]])
    ev = selection.evidence(space, mask)
    t = space.theta_full * mask[0]
    noise = regression.eiv_noise_covariance(data, t)
    Sg = data.S_hat[:, mask[0]]
    Cg = data.C[np.ix_(mask[0], mask[0])]
    log_F = stats.invgamma.logcdf(data.sigma_y2_max, data.a, scale=data.b)
    log_r_prior = -np.log(np.log(1 / data.scale_min))

    def log_f(u, v):
        s2, r = np.exp(u), np.exp(v)
        K = s2 * data.S_plus + noise + r * r * Sg @ Cg @ Sg.T
        return (stats.multivariate_normal(Sg @ data.m[mask[0]], K).logpdf(data.z_hat)
                + stats.invgamma.logpdf(s2, data.a, scale=data.b) + u - log_F + log_r_prior)

    top = ev["log_evidence"][0]
    u_lo, u_hi = ev["log_s2"][0, [0, -1]]  # the model's grid holds its mass
    value, _ = integrate.dblquad(lambda v, u: np.exp(log_f(u, v) - top), u_lo, u_hi,
                                 np.log(data.scale_min), 0.0, epsabs=1e-6, epsrel=1e-6)
    assert np.log(value) == pytest.approx(0.0, abs=0.01)


def test_per_model_plugin_of_the_full_model_is_eivs():
    """plugin='per-model' iterates each model's own fixed point: for the full model it is
    eiv's plug-in (to the grids' difference), and the subsets' plug-ins are zero outside."""
    rel = _release(eps=1.0, J=5)
    post, space = _space(rel, plugin="per-model")
    masks = selection.all_models(space)
    ev = selection.evidence(space, masks)
    np.testing.assert_allclose(ev["theta0"][-1], post["theta_plugin"], atol=2e-3)
    assert np.all(ev["theta0"][~masks] == 0.0)


def test_probabilities_sum_to_one_and_inclusion_sums_the_models():
    rel = _release(eps=3.0)
    sel = bayesdp.select(rel, seed=0, top=None, num_samples=200)
    assert sel.method == "enumeration" and len(sel.models) == 2 ** rel.d
    assert sel.models["probability"].sum() == pytest.approx(1.0, abs=1e-12)
    for name in rel.feature_names:
        has = np.array([name in f for f in sel.models["features"]])
        assert sel.inclusion[name] == pytest.approx(sel.models["probability"][has].sum(),
                                                    abs=1e-12)
    assert (sel.models["log_bf"] <= 0).all() and sel.models["log_bf"].max() == 0.0
    # the prior: beta-binomial(1, 1) gives every size 1/(p+1)
    sizes = sel.models.groupby("size")["log_prior"].apply(lambda v: np.exp(v).sum())
    np.testing.assert_allclose(sizes, 1 / (rel.d + 1))


def test_model_prior_options():
    log_p, text = selection.model_prior_log(0.5, 4)
    np.testing.assert_allclose(log_p, 4 * np.log(0.5))
    assert "equally likely" in text
    log_p, _ = selection.model_prior_log((2.0, 3.0), 4)
    counts = np.array([1, 4, 6, 4, 1])
    assert np.sum(counts * np.exp(log_p)) == pytest.approx(1.0)


def test_enumeration_and_mc3_agree():
    """d = 8 correlated features: MC^3's inclusion probabilities (4 chains x 3000 steps) are
    the enumeration's to 0.05, and its chains agree."""
    theta = (0.5, 0.0, 0.15, 0.0, 0.0, 0.08, 0.0, 0.04)
    rel = _release(n=5000, theta=theta, eps=10.0, J=1)
    enum = bayesdp.select(rel, seed=0, num_samples=200)
    mc3 = bayesdp.select(rel, seed=1, method="mc3", steps=3000, num_samples=200)
    assert mc3.method == "mc3" and mc3.details["models_evaluated"] < 2 ** 8
    assert 0.05 < enum.inclusion.min() and enum.inclusion.max() > 0.999  # not all 0 or 1
    np.testing.assert_allclose(mc3.inclusion, enum.inclusion, atol=0.05)
    assert mc3.details["chain_max_difference"] <= selection.MC3_AGREEMENT


def test_mc3_warns_when_its_chains_disagree():
    """Too few steps: the chains from the empty and the full model have not met, their halves
    disagree, and select says so (the agreement test above is the passing case)."""
    rel = _release(n=5000, theta=(0.5, 0.0, 0.15, 0.0, 0.0, 0.08), eps=10.0)
    for chains, who in ((2, "the 2 MC\\^3 chains"), (1, "the two halves of the MC\\^3 chain")):
        with pytest.warns(bayesdp.ConvergenceWarning, match=f"{who} disagree.*run more steps"):
            sel = bayesdp.select(rel, seed=0, method="mc3", steps=12, num_chains=chains,
                                 num_samples=5)
        assert sel.details["chain_max_difference"] > selection.MC3_AGREEMENT


def test_mc3_visits_models_with_their_posterior_probability():
    """3 features (8 models, the empty and the full one where only flips are proposed): the
    sampler's visit shares are the enumerated posterior probabilities (the Hastings ratio at
    the ends is right); negative control: without it they are not."""
    rel = _release(n=500, theta=(0.03, 0.0, 0.02), eps=10.0, J=1)
    post, space = _space(rel)
    masks = selection.all_models(space)
    log_prior, _ = selection.model_prior_log(0.3, 3)
    ev = selection.evidence(space, masks)
    lp = ev["log_evidence"] + log_prior[masks.sum(1)]
    exact = np.exp(lp - np.logaddexp.reduce(lp))
    assert exact[0] > 0.2 and exact[-1] > 0.01  # the ends matter

    def shares(sampler):
        run = sampler(space, log_prior, np.random.default_rng(0), num_chains=4, steps=25_000)
        codes = run["masks"][run["visits"]] @ (1 << np.arange(3))
        return np.bincount(codes.ravel(), minlength=8) / codes.size

    np.testing.assert_allclose(shares(selection.mc3), exact, atol=0.015)
    # negative control: the same sampler with the proposal's asymmetry left out
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(selection, "_log_proposal_ratio", lambda k, k_new, swap, p: 0.0)
        wrong = shares(selection.mc3)
    assert np.max(np.abs(wrong - exact)) > 0.03


def test_result_parts_and_model_averaged_predictions(tmp_path):
    rel = _release(eps=3.0, J=2)
    sel = bayesdp.select(rel, seed=3, num_samples=300, num_chains=2, top=4)
    theta = np.asarray(sel.idata.posterior["theta"])
    assert theta.shape == (2, 300, rel.d)
    inside = (theta != 0).reshape(-1, rel.d)
    np.testing.assert_allclose(inside.mean(0), sel.inclusion, atol=0.08)  # draws ~ models
    assert list(sel.inclusion.index) == list(rel.feature_names)
    assert len(sel.models) == 4 and sel.models["probability"].is_monotonic_decreasing
    a = sel.idata.posterior.attrs
    assert a["method"] == "select" and a["model_averaged"] and a["selection_method"] == \
        "enumeration" and a["seed"] == 3
    X_new = np.random.default_rng(1).standard_normal((5, rel.d))
    pred = bayesdp.predict(sel.idata, X_new, seed=0)
    mean = bayesdp.prediction_summary(pred)["mean"].to_numpy()
    np.testing.assert_allclose(mean, X_new @ theta.reshape(-1, rel.d).mean(0), rtol=1e-9)
    table = sel.table()
    assert list(table.columns) == ["inclusion", "mean", "sd", "mean_if_in"]
    text = str(sel)
    assert "enumeration" in text and "beta-binomial(1, 1)" in text and "x1" in text
    ax = sel.plot(tmp_path / "inclusion.png")
    assert (tmp_path / "inclusion.png").stat().st_size > 1000
    assert len(ax.patches) == rel.d
    # same seed, same result
    again = bayesdp.select(rel, seed=3, num_samples=300, num_chains=2, top=4)
    np.testing.assert_array_equal(np.asarray(again.idata.posterior["theta"]), theta)


def test_an_intercept_is_in_every_model():
    rel = _release(theta=(0.6, 0.0, 0.3), eps=3.0, intercept=True)
    sel = bayesdp.select(rel, seed=0, top=None, num_samples=100)
    # in every model: its inclusion is the whole probability (1 up to rounding)
    assert rel.feature_names[0] == "intercept" and abs(sel.inclusion["intercept"] - 1.0) < 1e-12
    assert len(sel.models) == 2 ** 3
    assert np.all(np.asarray(sel.idata.posterior["theta"])[..., 0] != 0.0)


def test_ignoring_the_noise_on_s_is_over_confident():
    """The negative control in small (the reliability table is the slow test below and
    docs/evidence/selection.md): the same release read as if S had no noise (sigma_s = 0)
    puts its posterior on fewer models (lower entropy of p(gamma | release)) than eiv, on a
    release whose noise on S matters (large coefficients, J = 5, eps = 1); measured on seeds
    0-5: lower on all six, by 0.1-0.9 nats."""
    X, y, bounds = _rows(3000, (1.5, 0.0, 0.8, 0.0, 0.4, 0.0), seed=2)
    rel = bayesdp.release(X, y, epsilon=1.0, delta=1e-5, bounds=(bounds[0], 8.0), nodes=5,
                          seed=3)
    sel = bayesdp.select(rel, seed=0, num_samples=20, top=None)
    blind = bayesdp.select(dataclasses.replace(rel, sigma_s=np.zeros(rel.J)), seed=0,
                           num_samples=20, top=None)

    def entropy(s):
        p = s.models["probability"].to_numpy()
        return -np.sum(p * np.log(np.where(p > 0, p, 1.0)))

    assert entropy(blind) < entropy(sel) - 0.5


@pytest.mark.slow
def test_reliability_against_the_negative_control():
    """One cell of research/selection_calibration.py (d = 6, n = 5000, J = 5, eps = 1, 60 data
    sets with the truth drawn from the selection's prior, correlated features): among the
    features eiv's selection is confident about (p < 0.1 or p >= 0.9) at most 5% are wrong and
    its expected calibration error is at most 0.08; the negative control that ignores the noise
    on S is over-confident: more of its confident calls are wrong (at least twice eiv's share)
    and its log loss is larger."""
    bench = research_module("selection_calibration")
    rows = bench.reliability_cell(J=5, eps=1.0, datasets=60, d=6, n=5000, seed=0)
    good, blind = rows["eiv"], rows["ignore-s-noise"]
    assert good["confident_wrong"] <= 0.05 and good["ece"] <= 0.08, good
    assert blind["confident_wrong"] >= 2 * good["confident_wrong"], (good, blind)
    assert blind["log_loss"] > good["log_loss"] + 0.05, (good, blind)


@pytest.mark.parametrize("kwargs, match", [
    ({"method": "exhaustive"}, "method must be one of"),
    ({"plugin": "full"}, "plugin must be one of"),
    ({"model_prior": "uniform"}, "model_prior"),
    ({"model_prior": 1.5}, "model_prior"),
    ({"model_prior": (1.0, -1.0)}, "model_prior"),
    ({"top": 0}, "top must be"),
    ({"num_samples": 0}, "num_samples"),
    ({"steps": 100}, "steps is the MC\\^3 sampler's"),
    ({"method": "mc3", "steps": 5}, "steps must be at least 10"),
    ({"seed": -1}, "seed"),
])
def test_bad_input_is_named(kwargs, match):
    rel = _release(n=500)
    with pytest.raises(bayesdp.BayesdpInputError, match=match):
        bayesdp.select(rel, **kwargs)


def test_auto_samples_models_beyond_the_limit_and_says_why(monkeypatch):
    rel = _release(n=2000, theta=(0.4, 0.0, 0.2, 0.0, 0.1))
    monkeypatch.setattr(selection, "MAX_ENUMERATION_FEATURES", 4)
    sel = bayesdp.select(rel, seed=0, num_samples=20)  # default steps: 5000
    assert sel.method == "mc3" and sel.idata.posterior.attrs["selection_method"] == "mc3"
    assert "models sampled because the 2^5 models of 5 features are more than the 2^4" in \
        str(sel)


def test_too_many_features_to_enumerate_is_refused_before_any_work(monkeypatch):
    rel = _release(n=500, theta=(0.1,) * 5)
    monkeypatch.setattr(selection, "MAX_ENUMERATION_FEATURES", 4)
    monkeypatch.setattr(eiv, "eiv_posterior", lambda *a, **k: pytest.fail("worked first"))
    with pytest.raises(bayesdp.BayesdpInputError, match="2\\^5 models.*method='mc3'"):
        bayesdp.select(rel, method="enumeration")
