"""The fixedS methods' check of the noise on S they leave out (``closed_form.s_noise_coverage``,
``fit``'s CalibrationWarning; docs/methods.md, "Does the noise on S matter?").

The Monte Carlo tests draw many releases of one fixed S (d = 2, well measured: the noise on S is
3-4% of its smallest eigenvalue, so the first-order formula should hold) and compare the observed
coverage of Bayes-fixedS-fast's 90% intervals (sigma_y^2 given, the true 1, and a flat prior, so
that the S noise is the only thing the model gets wrong) with the coverage the check predicts.
"""

import warnings

import numpy as np
import pytest
from scipy.stats import norm

import bayesdp
from bayesdp.inference import closed_form

N = 10_000
S_TRUE = N * np.array([[1.0, 0.3], [0.3, 1.0]])
THETA = np.array([3.0, -2.0])
SIGMA_Z = 300.0
PRIORS = bayesdp.Priors(m=np.zeros(2), C=1e6 * np.eye(2), a=2.0, b=1.0)


def noisy_release(rng, sigma_s):
    """One release of S_TRUE: S_hat = S + E (iid N(0, sigma_s^2) on the upper triangle),
    z_hat = S theta + X^T e + e_z with X^T e ~ N(0, sigma_y^2 S), sigma_y = 1."""
    E = np.triu(rng.normal(0.0, sigma_s, (2, 2)))
    E = E + np.triu(E, 1).T
    z = (S_TRUE @ THETA + rng.multivariate_normal(np.zeros(2), S_TRUE)
         + rng.normal(0.0, SIGMA_Z, 2))
    return bayesdp.Release(S_hat=[S_TRUE + E], z_hat=[z], n=[N], sigma_s=[sigma_s],
                           sigma_z=[SIGMA_Z])


def coverage_study(sigma_s, reps, seed):
    """Observed coverage of fast's 90% intervals per coefficient (from its closed-form moments),
    the mean predicted coverage (attrs ``s_noise_coverage``) and how many fits warned."""
    rng = np.random.default_rng(seed)
    z90 = norm.ppf(0.95)
    hits, predicted, warned = [], [], 0
    for r in range(reps):
        rel = noisy_release(rng, sigma_s)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            idata = bayesdp.fit(rel, method="fast", seed=r, priors=PRIORS, sigma_y2=1.0,
                                num_samples=10, num_chains=1)
        warned += any(issubclass(w.category, bayesdp.CalibrationWarning) for w in caught)
        mean, cov = bayesdp.closed_form_moments(idata)
        hits.append(np.abs(mean - THETA) <= z90 * np.sqrt(np.diag(cov)))
        predicted.append(idata.posterior.attrs["s_noise_coverage"])
    return np.mean(hits, axis=0), np.mean(predicted, axis=0), warned


def test_predicted_coverage_matches_monte_carlo_when_s_noise_matters():
    # sigma_s = 100: the S noise through theta (var ~ sigma_s^2 |theta|^2 ~ 1.3e5) exceeds the
    # z noise and the sampling noise (~1e5), so the intervals hold the truth far less than 90%.
    # Tolerance: 2000 replications give a Monte Carlo sd of 0.010 per coefficient; 0.035 is 3.5
    # sd (the first-order remainder is of order (|E| / lambda_min)^2 ~ 1e-3 here).
    observed, predicted, warned = coverage_study(100.0, 2000, seed=1)
    assert np.all(observed < 0.85), observed  # the effect is real: the naive 0.90 is wrong
    np.testing.assert_allclose(observed, predicted, atol=0.035)
    assert warned == 2000  # every fit says so (predicted < S_NOISE_COVERAGE_MIN = 0.8)


def test_negative_control_small_s_noise_keeps_nominal_coverage():
    # sigma_s = 1: the noise on S is negligible; the prediction and the Monte Carlo are both 90%
    # and no fit warns.
    observed, predicted, warned = coverage_study(1.0, 2000, seed=2)
    np.testing.assert_allclose(predicted, 0.90, atol=0.005)
    np.testing.assert_allclose(observed, 0.90, atol=0.035)
    assert warned == 0


def test_closed_form_one_dimension():
    """d = 1: V = P^-2 (S / M)^2 (sigma_e^2 S + sigma_z^2 + sigma_s^2 theta^2), P = 1/C + S^2/M."""
    s, s_z, s_s, theta, s2, C = 400.0, 30.0, 5.0, 2.5, 0.7, 10.0
    rel = bayesdp.Release(S_hat=[[[s]]], z_hat=[[s * theta]], n=[100], sigma_s=[s_s],
                          sigma_z=[s_z])
    pri = bayesdp.Priors(m=np.zeros(1), C=C * np.eye(1), a=2.0, b=1.0)
    for s2_err in (s2, 0.0):
        M = s2 * s + s_z ** 2
        P = 1 / C + s * s / M
        V = (s / M) ** 2 * (s2_err * s + s_z ** 2 + s_s ** 2 * theta ** 2) / P ** 2
        want = 2 * norm.cdf(norm.ppf(0.95) * np.sqrt(1 / P / V)) - 1
        got = closed_form.s_noise_coverage(rel, [theta], s2, pri, sigma_y2_error=s2_err)
        np.testing.assert_allclose(got, [want], rtol=1e-12)


def test_eiv_at_its_own_theta_leaves_nothing_out():
    # s_noise="eiv" puts the S noise through theta into the z covariance: evaluated at the same
    # theta nothing is left out, and the coverage is the model's own (>= 90% with the prior).
    rel = noisy_release(np.random.default_rng(3), 100.0)
    cov = closed_form.s_noise_coverage(rel, THETA, 1.0, PRIORS, s_noise="eiv")
    np.testing.assert_allclose(cov, 0.90, atol=1e-4)
    assert np.all(closed_form.s_noise_coverage(rel, THETA, 1.0, PRIORS) < 0.8)


S_NOISE_WARNING = "the noise on S it leaves out makes theta's 90% intervals too narrow"


@pytest.mark.parametrize("method", ["fixeds", "normalx"])
def test_fit_records_the_check_for_fixeds_only(method):
    rel = noisy_release(np.random.default_rng(4), 100.0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        idata = bayesdp.fit(rel, method=method, seed=0, priors=PRIORS, num_warmup=200,
                            num_samples=200, num_chains=2, progress_bar=False)
    calib = [w for w in caught if issubclass(w.category, bayesdp.CalibrationWarning)]
    # the S noise check's warning, by its sentence (the fixeds case shows it is found by it)
    s_noise = [w for w in calib if S_NOISE_WARNING in str(w.message)]
    a = idata.posterior.attrs
    if method == "fixeds":
        assert a["s_noise_min_coverage"] < 0.8 and len(a["s_noise_coverage"]) == 2
        assert len(calib) == len(s_noise) == 1 and "method='normalx'" in str(calib[0].message)
    else:  # normalX models the noise on S: nothing to check. (Its S_hat check may warn, as a
        # CalibrationWarning too, depending on where the draws land: not this test's business.)
        assert "s_noise_coverage" not in a and not s_noise, [str(w.message) for w in s_noise]


def test_cli_fit_and_diagnose_say_so(tmp_path, capsys):
    """``bayesdp fit`` prints the CalibrationWarning, ``bayesdp diagnose`` lists it (the demo
    setting: the paper's simulation, 5 holders, eps = 1; seed 0 of benchmarks/s_noise_check.py
    demo, first-order coverage about 50%)."""
    from bayesdp.cli import main

    sim = bayesdp.simulate(100_000, 5, seed=1000)
    rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=5,
                          seed=2000)
    path = rel.save(tmp_path / "release.json")
    assert main(["fit", str(path), "--method", "fast", "--seed", "0",
                 "--out", str(tmp_path / "post.nc")]) == 0
    err = capsys.readouterr().err
    assert "WARNING: fast: S is fixed at the noisy S_hat" in err and "method='normalx'" in err
    assert main(["diagnose", str(tmp_path / "post.nc")]) == 0
    out = capsys.readouterr().out
    assert "WARNINGS:" in out and "the noise on S it leaves out" in out


def test_docs_example_runs_and_warns(capsys):
    """The example of docs/methods.md, 'Does the noise on S matter?', as written."""
    import pathlib

    text = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "methods.md").read_text()
    section = text.split("## Does the noise on S matter?")[1].split("\n## ")[0]
    code = section.split("```python\n")[1].split("```")[0]
    with pytest.warns(bayesdp.CalibrationWarning, match="too narrow"):
        exec(compile(code, "docs/methods.md", "exec"), {})
    printed = capsys.readouterr().out.split("[")[1].split("]")[0].split()
    assert len(printed) == 5 and all(float(v) < 0.8 for v in printed)  # per coefficient
