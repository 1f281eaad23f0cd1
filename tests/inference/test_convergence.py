"""No silent failure (issue 9, point 2): fit() checks r_hat and ESS of every sampled variable,
warns with ConvergenceWarning naming the worst parameter, records the check in the attrs; the CLI
prints the warning; diagnose() checks every variable by default.

The negative and positive controls are InferenceData built by hand (chains that disagree vs iid
draws), pushed through ``fit`` by a throw-away registered method, so no sampler runs here except
one short real fit of the CLI test."""

import json
import warnings

import numpy as np
import pytest

import bayesdp
from bayesdp import ConvergenceWarning, diagnostics
from bayesdp.inference import METHODS, register_method
from bayesdp.inference.methods import MethodResult


def _draws(rng, n_chains, n_draws, d=3, J=2, disagree=None):
    """theta, sigma_y2, Sigma_x (symmetric, one constant off-diagonal pair) and S (J, d, d):
    iid draws; ``disagree`` shifts chain 0 of that variable by 3 sd."""
    theta = rng.standard_normal((n_chains, n_draws, d))
    s2 = np.exp(0.1 * rng.standard_normal((n_chains, n_draws)))
    A = rng.standard_normal((n_chains, n_draws, d, d))
    Sx = A @ np.swapaxes(A, -1, -2) / d + 3 * np.eye(d)
    Sx[..., 0, 2] = Sx[..., 2, 0] = 0.0  # a fixed entry: must not give NaN or a warning
    B = rng.standard_normal((n_chains, n_draws, J, d, d))
    S = B @ np.swapaxes(B, -1, -2) + 5 * np.eye(d)
    post = {"theta": theta, "sigma_y2": s2, "Sigma_x": Sx, "S": S}
    if disagree == "Sigma_x":
        post["Sigma_x"][0, :, 1, 2] += 3.0
        post["Sigma_x"][0, :, 2, 1] += 3.0
    elif disagree is not None:
        post[disagree][0] += 3.0 * np.std(post[disagree])
    return post


def _idata(post, d=3, J=2):
    names = [f"x{i}" for i in range(1, d + 1)]
    return diagnostics.to_inference_data(
        post, coords={"feature": names, "feature_": names, "holder": [f"h{j}" for j in range(J)]},
        dims={"theta": ["feature"], "Sigma_x": ["feature", "feature_"],
              "S": ["holder", "feature", "feature_"]},
        attrs={"method": "test"})


def test_chains_that_disagree_are_flagged_and_named():
    rng = np.random.default_rng(0)
    idata = _idata(_draws(rng, 4, 500, disagree="Sigma_x"))
    with pytest.warns(ConvergenceWarning, match=r"Sigma_x\[x2, x3\]") as rec:
        conv = diagnostics.check_convergence(idata, "test")
    msg = str(rec[0].message)
    assert "r_hat" in msg and "ESS" in msg and "num_warmup" in msg and "another method" in msg
    assert "\n" not in msg
    assert conv["worst_parameter"] == "Sigma_x[x2, x3]" and conv["r_hat"] > 1.5
    assert not conv["converged"]
    a = diagnostics.attrs(idata)
    assert a["converged"] == 0 and a["worst_parameter"] == "Sigma_x[x2, x3]"
    assert a["max_r_hat"] == pytest.approx(conv["max_r_hat"])
    per_var = json.loads(a["convergence"])
    assert set(per_var) == {"theta", "sigma_y2", "Sigma_x", "S"}
    assert per_var["Sigma_x"]["n_entries"] == 6  # upper triangle incl. diagonal of 3 x 3
    assert per_var["S"]["n_entries"] == 12 and per_var["theta"]["max_r_hat"] < 1.01


@pytest.mark.parametrize("var", ["theta", "sigma_y2", "S"])
def test_every_variable_is_checked(var):
    idata = _idata(_draws(np.random.default_rng(1), 4, 500, disagree=var))
    with pytest.warns(ConvergenceWarning, match=rf"worst parameter {var}"):
        diagnostics.check_convergence(idata, "test")


def test_well_mixed_iid_draws_do_not_warn():
    idata = _idata(_draws(np.random.default_rng(2), 4, 1000))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        conv = diagnostics.check_convergence(idata, "test")
    assert conv["converged"] and conv["max_r_hat"] <= diagnostics.RHAT_MAX
    assert conv["min_ess_bulk"] >= diagnostics.ESS_MIN
    assert np.isfinite(conv["max_r_hat"])  # the constant Sigma_x[x1, x3] was skipped, not NaN
    assert diagnostics.attrs(idata)["converged"] == 1


def test_one_chain_uses_split_r_hat():
    rng = np.random.default_rng(3)
    post = _draws(rng, 1, 2000)
    post["theta"][0, 1000:, 1] += 2.0  # the second half of the chain sits elsewhere
    with pytest.warns(ConvergenceWarning, match=r"1 chain \(split r_hat\).*theta\[x2\]"):
        diagnostics.check_convergence(_idata(post), "test")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert diagnostics.check_convergence(_idata(_draws(rng, 1, 4000)), "test")["converged"]


def test_too_few_draws_for_the_ess_threshold_says_so():
    idata = _idata(_draws(np.random.default_rng(4), 2, 100))
    with pytest.warns(ConvergenceWarning, match="only 200 draws were kept in total"):
        diagnostics.check_convergence(idata, "test")


def test_non_finite_draws_are_not_converged():
    post = _draws(np.random.default_rng(5), 4, 500)
    post["sigma_y2"][2, 7] = np.nan
    with pytest.warns(ConvergenceWarning, match="sigma_y2 has r_hat = inf"):
        diagnostics.check_convergence(_idata(post), "test")


def _ar1(rng, c, n, k, phi):
    x = np.zeros((c, n, k))
    e = rng.standard_normal((c, n, k))
    x[:, 0] = e[:, 0]
    for t in range(1, n):
        x[:, t] = phi * x[:, t - 1] + e[:, t]
    return x


def _arviz_rhat_ess(x):
    """ArviZ's own r_hat, bulk and tail ESS, entry by entry (the reference)."""
    az = diagnostics._az()
    c, n, k = x.shape
    xr = x if c > 1 else np.stack([x[0, :n // 2], x[0, n // 2:2 * (n // 2)]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = az.rhat(az.convert_to_dataset({"v": xr}))["v"].values
        ds = az.convert_to_dataset({"v": x})
        return r, az.ess(ds, method="bulk")["v"].values, az.ess(ds, method="tail")["v"].values


@pytest.mark.parametrize("c, n", [(1, 2000), (4, 500), (2, 7), (1, 9), (4, 4), (3, 101)])
def test_vectorised_r_hat_and_ess_equal_arviz(c, n):
    """The check's r_hat, bulk and tail ESS (computed for all entries at once) are ArviZ's,
    to rounding: chains from negatively to very strongly autocorrelated (the Geyer truncation
    at every stage), tied values, runs of repeats (rejected MH moves: the tail ESS's quantile
    indicators), a constant entry, one chain (split r_hat) and very short chains."""
    rng = np.random.default_rng(c * 1000 + n)
    ours, ref = [], []
    for phi in (-0.9, -0.3, 0.0, 0.5, 0.99, 0.999):
        x = _ar1(rng, c, n, 5, phi)
        x[:, :, 2] = np.round(x[:, :, 2], 1)
        x[:, :, 3] = np.repeat(x[:, ::5, 3], 5, axis=1)[:, :n]
        x[:, :, 4] = 2.5
        ours.append(np.stack(diagnostics._rhat_ess(x)))
        ref.append(np.stack([np.asarray(v, dtype=float) for v in _arviz_rhat_ess(x)]))
    ours, ref = np.array(ours), np.array(ref)
    same = (ours == ref) | (np.isnan(ours) & np.isnan(ref))
    np.testing.assert_allclose(np.where(same, 1.0, ours), np.where(same, 1.0, ref), rtol=1e-12)
    assert np.isfinite(ref[:, 1:, :2]).all() == (n >= 4)  # the comparison is not all NaN


# -- through fit() and the CLI -----------------------------------------------------------------


@pytest.fixture
def test_methods():
    """Two throw-away MCMC-like methods: 'test-stuck' (chains disagree) and 'test-iid'."""

    def make(disagree):
        def run(release, priors, *, seed, num_samples, num_chains, num_warmup, progress_bar):
            rng = np.random.default_rng(seed)
            theta = rng.standard_normal((num_chains, num_samples, release.d))
            if disagree:
                theta[0] += 5.0
            return MethodResult(posterior={"theta": theta})
        return run

    register_method("test-stuck", make(True), "chains that disagree (test)")
    register_method("test-iid", make(False), "iid draws (test)")
    yield
    del METHODS["test-stuck"], METHODS["test-iid"]


@pytest.fixture(scope="module")
def small_release():
    sim = bayesdp.simulate(400, 2, seed=5)
    return bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds, nodes=2,
                           seed=6)


def test_fit_warns_and_records(test_methods, small_release):
    with pytest.warns(ConvergenceWarning, match=r"method 'test-stuck' did not converge.*theta"):
        idata = bayesdp.fit(small_release, method="test-stuck", seed=0)
    assert diagnostics.attrs(idata)["converged"] == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        idata = bayesdp.fit(small_release, method="test-iid", seed=0)
        assert diagnostics.attrs(idata)["converged"] == 1
        fast = bayesdp.fit(small_release, method="fast", seed=0, num_samples=10)  # iid: skipped
    a = diagnostics.attrs(fast)
    assert a["convergence_checked"] == 0 and a["converged"] == 1


def test_cli_fit_prints_the_warning(test_methods, small_release, tmp_path, capsys):
    from bayesdp.cli import main

    path = small_release.save(tmp_path / "release.json")
    assert main(["fit", str(path), "--method", "test-stuck", "--seed", "1"]) == 0
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.startswith("WARNING:")]
    assert len(lines) == 1 and "did not converge" in lines[0] and "theta[" in lines[0]
    assert main(["fit", str(path), "--method", "test-iid", "--seed", "1"]) == 0
    assert "did not converge" not in capsys.readouterr().err


def test_cli_fit_real_sampler_too_short(small_release, tmp_path, capsys):
    from bayesdp.cli import main

    path = small_release.save(tmp_path / "release.json")
    main(["fit", str(path), "--method", "fixeds", "--seed", "1", "--num-samples", "20",
          "--num-warmup", "5", "--num-chains", "1"])
    err = capsys.readouterr().err
    assert any(ln.startswith("WARNING: method 'fixeds' did not converge")
               for ln in err.splitlines())


def test_diagnose_checks_sigma_x_and_s_by_default(capsys):
    idata = _idata(_draws(np.random.default_rng(6), 4, 500, disagree="S"))
    res = diagnostics.diagnose(idata)
    assert set(res["worst"].index) == {"theta", "sigma_y2", "Sigma_x", "S"}
    assert any(w.startswith("S (") and "r_hat" in w for w in res["warnings"])
    assert not res["ok"]
    out = capsys.readouterr().out
    assert "worst entry" in out and "Sigma_x" in out
    # the table stays readable: theta and sigma_y2 entry by entry, not the 12 entries of S
    assert not any(str(i).startswith("S[") for i in res["summary"].index)
    idata = _idata(_draws(np.random.default_rng(7), 4, 1000, disagree="Sigma_x"))
    res = diagnostics.diagnose(idata, verbose=False)
    assert any("Sigma_x[x2, x3]" in w for w in res["warnings"])
    res = diagnostics.diagnose(idata, var_names=["theta"], verbose=False)
    assert res["ok"]


def test_divergent_transitions_are_not_silent():
    """Well-mixed chains pass the r_hat / ESS check, but divergent NUTS transitions still warn;
    the same draws without divergences do not (negative control)."""
    rng = np.random.default_rng(1)
    post = _draws(rng, 4, 500)
    clean = np.zeros((4, 500), dtype=bool)
    diverged = clean.copy()
    diverged[1, [10, 300]] = True
    for flags, expected in ((clean, 0), (diverged, 2)):
        idata = diagnostics.to_inference_data(
            post, sample_stats={"diverging": flags},
            coords={"feature": ["x1", "x2", "x3"], "feature_": ["x1", "x2", "x3"],
                    "holder": ["h0", "h1"]},
            dims={"theta": ["feature"], "Sigma_x": ["feature", "feature_"],
                  "S": ["holder", "feature", "feature_"]}, attrs={"method": "test"})
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            conv = diagnostics.check_convergence(idata, "test")
        assert conv["converged"]  # r_hat and ESS are fine either way
        msgs = [str(w.message) for w in rec if issubclass(w.category, ConvergenceWarning)]
        assert diagnostics.divergences(idata) == expected
        if expected:
            assert len(msgs) == 1 and "2 of 2000 NUTS transitions diverged" in msgs[0]
            assert "target_accept_prob" in msgs[0]
        else:
            assert msgs == []
