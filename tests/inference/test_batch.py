"""fit_batch: release r's fit equals fit(release r, seed r) up to floating-point rounding."""

import numpy as np
import pytest

import bayesdp
import bayesdp.paper  # noqa: F401  (registers the paper's methods)
from bayesdp.errors import BayesdpInputError
from bayesdp.models.priors import Priors

RTOL = 1e-10  # the vectorised program may order its sums differently from the one-by-one one


def _releases(J=3, d=2, count=3, seed=0, include_yty=False):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((1500, d))
    y = X @ np.linspace(1.0, -1.0, d) + 0.3 * rng.standard_normal(1500)
    return [bayesdp.release(X, y, epsilon=1.0, delta=1e-4, bounds=(4.0, 4.0), nodes=J,
                            seed=100 + s, include_yty=include_yty) for s in range(count)]


KW = dict(priors=Priors.paper(Lambda=np.eye(2)), num_samples=150, num_warmup=100,
          progress_bar=False)


def _assert_same(a, b):
    assert set(a.posterior.data_vars) == set(b.posterior.data_vars)
    for v in a.posterior.data_vars:
        np.testing.assert_allclose(np.asarray(b.posterior[v]), np.asarray(a.posterior[v]),
                                   rtol=RTOL, atol=0)
    for v in (a.sample_stats.data_vars if "sample_stats" in a.groups() else ()):
        np.testing.assert_allclose(np.asarray(b.sample_stats[v]), np.asarray(a.sample_stats[v]),
                                   rtol=RTOL, atol=0)
    assert a.posterior.attrs["seed"] == b.posterior.attrs["seed"]


def _differs(a, b):
    return not np.allclose(np.asarray(a.posterior["theta"]), np.asarray(b.posterior["theta"]),
                           rtol=1e-3)


@pytest.mark.parametrize("method,chains", [("fast", 2), ("fixeds", 1)] + [
    pytest.param(method, chains, marks=pytest.mark.slow)
    for method, chains in [("fixeds", 2), ("fixeds-paper", 1), ("normalx-paper", 1), ("bs", 1),
                           ("bs", 2)]])
def test_batch_equals_one_by_one(method, chains):
    import warnings

    rels = _releases(count=2, include_yty=method == "bs")
    seeds = [7, 8]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # short chains: convergence warnings
        one = [bayesdp.fit(r, method=method, seed=s, num_chains=chains, **KW)
               for r, s in zip(rels, seeds)]
        batch = bayesdp.inference.fit_batch(rels, method=method, seeds=seeds, num_chains=chains,
                                            **KW)
        # negative control: the seeds of releases 0 and 1 swapped
        swapped = bayesdp.inference.fit_batch(rels, method=method, seeds=[8, 7],
                                              num_chains=chains, **KW)
    assert len(batch) == 2
    for a, b in zip(one, batch):
        _assert_same(a, b)
        assert np.asarray(b.posterior["theta"]).shape == (chains, 150, 2)
    assert _differs(one[0], swapped[0]) and _differs(one[1], swapped[1])
    if method == "fast":  # the closed-form moments too
        for a, b in zip(one, batch):
            for k in (0, 1):
                np.testing.assert_allclose(bayesdp.inference.closed_form_moments(b)[k],
                                           bayesdp.inference.closed_form_moments(a)[k],
                                           rtol=RTOL, atol=0)


def test_fast_batch_mixed_shapes_and_eiv():
    """Releases of different J are grouped by shape; s_noise="eiv" (a fixed point per release)
    falls back to one release at a time and still equals fit."""
    rels = _releases(J=3, count=2) + _releases(J=2, count=1, seed=5)
    seeds = [1, 2, 3]
    for opts in ({}, {"s_noise": "eiv"}, {"sigma_y_rule": "paper-code", "fixed_s": "psd+I"}):
        one = [bayesdp.fit(r, method="fast", seed=s, num_chains=1, **KW, **opts)
               for r, s in zip(rels, seeds)]
        batch = bayesdp.inference.fit_batch(rels, method="fast", seeds=seeds, num_chains=1, **KW,
                                            **opts)
        for a, b in zip(one, batch):
            _assert_same(a, b)
            assert a.posterior.attrs["s_noise"] == b.posterior.attrs["s_noise"]


@pytest.mark.slow  # ~1 min: compiles B&S for two option sets and two shapes
def test_bs_batch_options_priors_and_shapes():
    """B&S: its options (the same for every release) and per-release priors resolved from each
    release's bounds, as fit does; releases of two J grouped; its errors are fit's."""
    import warnings

    rels = _releases(J=2, count=2, include_yty=True)
    rng = np.random.default_rng(1)
    X = 0.5 * rng.standard_normal((1500, 2))  # other bounds: other default priors
    rels.append(bayesdp.release(X, X[:, 0], epsilon=1.0, delta=1e-4, bounds=(2.0, 1.5),
                                nodes=3, seed=3, include_yty=True))
    seeds = [4, 5, 6]
    kw = dict(num_samples=60, num_warmup=40, num_chains=1, progress_bar=False)
    for opts in ({}, {"psd_shift": 0.0, "init_sigma_y2": 0.2, "Lambda0": 2 * np.eye(2)}):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            one = [bayesdp.fit(r, method="bs", seed=s, **kw, **opts)
                   for r, s in zip(rels, seeds)]
            batch = bayesdp.inference.fit_batch(rels, method="bs", seeds=seeds, **kw, **opts)
        for a, b in zip(one, batch):
            _assert_same(a, b)
            for k in ("prior_a", "prior_b", "psd_shift", "init_sigma_y2", "bs_prior"):
                assert a.posterior.attrs[k] == b.posterior.attrs[k]
    assert one[0].posterior.attrs["prior_b"] != one[2].posterior.attrs["prior_b"]
    with pytest.raises(BayesdpInputError, match="psd_shift"):
        bayesdp.inference.fit_batch(rels, method="bs", seeds=seeds, psd_shift=-1.0, **kw)
    with pytest.raises(BayesdpInputError, match="Lambda0"):
        bayesdp.inference.fit_batch(rels, method="bs", seeds=seeds, Lambda0=np.eye(3), **kw)
    with pytest.raises(BayesdpInputError, match=r"unknown option\(s\) for method 'bs': \['bogus'\]"):
        bayesdp.inference.fit_batch(rels, method="bs", seeds=seeds, bogus=1, **kw)
    with pytest.raises(BayesdpInputError, match="y\\^T y|include_yty"):
        bayesdp.inference.fit_batch(_releases(count=2), method="bs", seeds=[1, 2], **kw)


def test_fit_batch_checks_like_fit():
    rels = _releases(count=2)
    with pytest.raises(BayesdpInputError, match="one seed per release"):
        bayesdp.inference.fit_batch(rels, seeds=[1], **KW)
    with pytest.raises(BayesdpInputError, match="unknown method"):
        bayesdp.inference.fit_batch(rels, method="nope", seeds=[1, 2], **KW)
    with pytest.raises(BayesdpInputError, match="unknown option"):
        bayesdp.inference.fit_batch(rels, method="fixeds", seeds=[1, 2], bogus=1, **KW)
    with pytest.raises(BayesdpInputError, match="sigma_y_rule"):
        bayesdp.inference.fit_batch(rels, method="fast", seeds=[1, 2], sigma_y_rule="x", **KW)
    with pytest.raises(BayesdpInputError, match="num_samples"):
        bayesdp.inference.fit_batch(rels, seeds=[1, 2], priors=KW["priors"], num_samples=0)
    with pytest.raises(BayesdpInputError, match="list of releases"):
        bayesdp.inference.fit_batch(rels[0], seeds=[1], **KW)
    with pytest.raises(BayesdpInputError, match="empty"):
        bayesdp.inference.fit_batch([], seeds=[])
    # seeds=None: each drawn and recorded, as fit does
    out = bayesdp.inference.fit_batch(rels, num_chains=1, **KW)
    assert all(isinstance(o.posterior.attrs["seed"], int) for o in out)
