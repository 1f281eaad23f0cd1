"""fit_batch: release r's fit equals fit(release r, seed r) up to floating-point rounding."""

import numpy as np
import pytest

import bayesdp
from bayesdp.errors import BayesdpInputError
from bayesdp.models.priors import Priors

RTOL = 1e-10  # the vectorised program may order its sums differently from the one-by-one one


def _releases(J=3, d=2, count=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((1500, d))
    y = X @ np.linspace(1.0, -1.0, d) + 0.3 * rng.standard_normal(1500)
    return [bayesdp.release(X, y, epsilon=1.0, delta=1e-4, bounds=(4.0, 4.0), nodes=J,
                            seed=100 + s) for s in range(count)]


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


@pytest.mark.parametrize("method,chains", [("fast", 2), ("fixeds", 1), ("fixeds", 2),
                                           ("fixeds-paper", 1), ("normalx-paper", 1)])
def test_batch_equals_one_by_one(method, chains):
    import warnings

    rels = _releases(count=2)
    seeds = [7, 8]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # short chains: convergence warnings
        one = [bayesdp.fit(r, method=method, seed=s, num_chains=chains, **KW)
               for r, s in zip(rels, seeds)]
        batch = bayesdp.fit_batch(rels, method=method, seeds=seeds, num_chains=chains, **KW)
        # negative control: the seeds of releases 0 and 1 swapped
        swapped = bayesdp.fit_batch(rels, method=method, seeds=[8, 7], num_chains=chains, **KW)
    assert len(batch) == 2
    for a, b in zip(one, batch):
        _assert_same(a, b)
        assert np.asarray(b.posterior["theta"]).shape == (chains, 150, 2)
    assert _differs(one[0], swapped[0]) and _differs(one[1], swapped[1])
    if method == "fast":  # the closed-form moments too
        for a, b in zip(one, batch):
            for k in (0, 1):
                np.testing.assert_allclose(bayesdp.closed_form_moments(b)[k],
                                           bayesdp.closed_form_moments(a)[k], rtol=RTOL, atol=0)


def test_fast_batch_mixed_shapes_and_eiv():
    """Releases of different J are grouped by shape; s_noise="eiv" (a fixed point per release)
    falls back to one release at a time and still equals fit."""
    rels = _releases(J=3, count=2) + _releases(J=2, count=1, seed=5)
    seeds = [1, 2, 3]
    for opts in ({}, {"s_noise": "eiv"}, {"sigma_y_rule": "paper-code", "fixed_s": "psd+I"}):
        one = [bayesdp.fit(r, method="fast", seed=s, num_chains=1, **KW, **opts)
               for r, s in zip(rels, seeds)]
        batch = bayesdp.fit_batch(rels, method="fast", seeds=seeds, num_chains=1, **KW, **opts)
        for a, b in zip(one, batch):
            _assert_same(a, b)
            assert a.posterior.attrs["s_noise"] == b.posterior.attrs["s_noise"]


def test_fit_batch_checks_like_fit():
    rels = _releases(count=2)
    with pytest.raises(BayesdpInputError, match="one seed per release"):
        bayesdp.fit_batch(rels, seeds=[1], **KW)
    with pytest.raises(BayesdpInputError, match="unknown method"):
        bayesdp.fit_batch(rels, method="nope", seeds=[1, 2], **KW)
    with pytest.raises(BayesdpInputError, match="unknown option"):
        bayesdp.fit_batch(rels, method="fixeds", seeds=[1, 2], bogus=1, **KW)
    with pytest.raises(BayesdpInputError, match="sigma_y_rule"):
        bayesdp.fit_batch(rels, method="fast", seeds=[1, 2], sigma_y_rule="x", **KW)
    with pytest.raises(BayesdpInputError, match="num_samples"):
        bayesdp.fit_batch(rels, seeds=[1, 2], priors=KW["priors"], num_samples=0)
    with pytest.raises(BayesdpInputError, match="list of releases"):
        bayesdp.fit_batch(rels[0], seeds=[1], **KW)
    with pytest.raises(BayesdpInputError, match="empty"):
        bayesdp.fit_batch([], seeds=[])
    # seeds=None: each drawn and recorded, as fit does
    out = bayesdp.fit_batch(rels, num_chains=1, **KW)
    assert all(isinstance(o.posterior.attrs["seed"], int) for o in out)
