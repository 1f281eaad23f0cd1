"""bayesdp's compiled MCMC run (``bayesdp.inference.mcmc._run_mcmc``): the draws of
``numpyro.infer.MCMC.run`` for the same seed, and compiled once per sampler and shapes (JAX's
own counter of compiled programs, never a time)."""

import warnings

import jax
import numpy as np
import pytest

import bayesdp
from bayesdp.inference import kernel_runner, mcmc, nuts

pytestmark = pytest.mark.filterwarnings("ignore")

KW = dict(num_samples=30, num_warmup=30, num_chains=2, progress_bar=False)


@pytest.fixture(scope="module")
def releases():
    sim = bayesdp.simulate(n=600, d=2, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds,
                                nodes=2, seed=s) for s in (2, 3)]


class _CompileCounter:
    """Counts the programs JAX compiles (backend compiles) while it is registered."""

    def __init__(self):
        self.names = []
        jax.monitoring.register_event_duration_secs_listener(self._on)

    def _on(self, event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            self.names.append(kwargs.get("fun_name", "?"))


_COUNTER = _CompileCounter()


def _compiles_during(fn):
    """The names of the programs JAX compiled while ``fn()`` ran."""
    before = len(_COUNTER.names)
    fn()
    return _COUNTER.names[before:]


@pytest.mark.parametrize("method", ["fixeds", "normalx"])
def test_a_second_fit_of_the_same_shapes_does_not_compile_its_sampler_again(releases, method):
    """The sampler's program (init, warm-up and sampling of every chain: ``run_chains``) is
    compiled by the first fit only. (Alone, the second fit compiles nothing at all; after many
    other tests in one process JAX may recompile a few one-operation programs it dropped.)"""
    a, b = releases
    _compiles_during(lambda: bayesdp.fit(a, method=method, seed=0, **KW))
    assert "jit(run_chains)" not in _compiles_during(
        lambda: bayesdp.fit(b, method=method, seed=1, **KW))
    # negative control: another number of draws is another program, and the counter sees it
    other = dict(KW, num_samples=31)
    assert "jit(run_chains)" in _compiles_during(
        lambda: bayesdp.fit(b, method=method, seed=1, **other))


def _numpyro_run(m, seed, data, extra_fields, init_params=None, progress_bar=False):
    """What bayesdp ran before: numpyro's own MCMC.run and its getters."""
    m.run(mcmc._keys(seed), data, extra_fields=extra_fields, init_params=init_params)
    return ({k: np.asarray(v) for k, v in m.get_samples(group_by_chain=True).items()},
            jax.tree.map(np.asarray, m.get_extra_fields(group_by_chain=True)))


@pytest.mark.parametrize("method, chain_method", [
    ("fixeds", "vectorized"), ("normalx", "vectorized"),
    pytest.param("normalx", "sequential", marks=pytest.mark.slow)])
def test_the_compiled_run_draws_what_numpyros_run_draws(releases, monkeypatch, method,
                                                        chain_method):
    """Same seed, same draws and sampler statistics, to floating-point rounding: the compiled
    program is not numpyro's (the starting mass matrix is an argument here, a constant there), so
    the last bits differ, and NUTS amplifies such differences over its iterations (measured:
    relative 1e-6 after 20 iterations of normalx); 10 iterations are run, and another seed
    (negative control) differs in the leading digits."""
    kw = dict(KW, num_samples=5, num_warmup=5, chain_method=chain_method)
    ours = bayesdp.fit(releases[0], method=method, seed=5, **kw)
    mcmc._MCMC_CACHE.clear()
    monkeypatch.setattr(nuts, "_run_mcmc", _numpyro_run)
    monkeypatch.setattr(kernel_runner, "_run_mcmc", _numpyro_run)
    theirs = bayesdp.fit(releases[0], method=method, seed=5, **kw)
    mcmc._MCMC_CACHE.clear()
    for v in ours.posterior.data_vars:
        np.testing.assert_allclose(ours.posterior[v].values, theirs.posterior[v].values,
                                   rtol=1e-6, atol=1e-10, err_msg=v)
    for v in ours.sample_stats.data_vars:
        np.testing.assert_allclose(ours.sample_stats[v].values, theirs.sample_stats[v].values,
                                   rtol=1e-6, atol=1e-10, err_msg=v)
    # negative control: another seed gives other draws
    other = bayesdp.fit(releases[0], method=method, seed=6, **kw)
    assert not np.allclose(other.posterior["theta"].values, ours.posterior["theta"].values)


def test_the_progress_bar_counts_every_iteration(releases, capsys):
    bayesdp.fit(releases[0], method="fixeds", seed=0, **dict(KW, num_samples=25,
                                                             progress_bar=True))
    err = capsys.readouterr().err
    assert "20/55" in err and "55/55" in err, err[-300:]  # 30 + 25 iterations, chains vectorised


def test_each_fit_starts_from_its_own_inputs(releases):
    """The compiled run of a cached sampler takes each fit's own start (the hand-written
    kernels' starting point, here a sigma_y^2 held fixed) and NUTS's own starting mass matrix
    as arguments: a second fit with another fixed sigma_y^2 must hold its own, not the first
    fit's (the compiled program once baked the first fit's in)."""
    kw = dict(KW, num_samples=5, num_warmup=5, method="fixeds")
    for s2 in (0.5, 2.0):
        idata = bayesdp.fit(releases[0], seed=0, fix_sigma_y2=s2, **kw)
        np.testing.assert_array_equal(idata.posterior["sigma_y2"].values, s2)
    # NUTS: a fit after another release's gives what it gives from an empty cache
    kw = dict(KW, num_samples=5, num_warmup=5, method="normalx")
    bayesdp.fit(releases[0], seed=0, **kw)
    after = bayesdp.fit(releases[1], seed=0, **kw)
    mcmc._MCMC_CACHE.clear()
    alone = bayesdp.fit(releases[1], seed=0, **kw)
    np.testing.assert_allclose(after.posterior["theta"].values, alone.posterior["theta"].values,
                               rtol=1e-6)


def test_one_or_no_extra_field(releases):
    """The run keeps any number of the kernel state's fields per draw, one and none included."""
    from bayesdp.inference import mcmc as M

    m, data = M.build_mcmc("fixeds", releases[0], bayesdp.Priors().resolve(2), num_samples=4,
                           num_warmup=3, num_chains=2)
    for fields in (("tuning",), ()):
        draws, extra = M._run_mcmc(m, 0, data, fields)
        assert sorted(extra) == sorted(fields) and draws["theta"].shape == (2, 4, 2)


def test_a_fit_traces_its_models_without_numpyros_argument_checks(monkeypatch):
    """numpyro checks a distribution's arguments when it is built (on by default); on constants
    each check compiles a small program of its own. A fit traces its models with the checks off
    (``bayesdp._jax.numpyro_checks_off``): no ``validate_args`` call during a normalx fit, and
    numpyro's setting is as before afterwards, on or off. Negative control: the counter sees a
    distribution built outside a fit."""
    import numpyro
    import numpyro.distributions as dist
    from numpyro.distributions import distribution

    calls = []
    original = distribution.Distribution.validate_args

    def counted(self, strict=True):
        calls.append(type(self).__name__)
        return original(self, strict)

    monkeypatch.setattr(distribution.Distribution, "validate_args", counted)
    sim = bayesdp.simulate(n=900, d=3, seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rel = bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds,
                              nodes=3, seed=5)
    assert distribution._VALIDATION_ENABLED
    traced = dict(KW, num_samples=37)  # a sampler no other test compiles: this fit traces it
    assert "jit(run_chains)" in _compiles_during(
        lambda: bayesdp.fit(rel, method="normalx", seed=0, **traced))
    assert calls == []
    assert distribution._VALIDATION_ENABLED
    dist.Normal(0.0, 1.0)
    assert calls == ["Normal"]
    numpyro.enable_validation(False)
    try:
        bayesdp.fit(rel, method="normalx", seed=0, **KW)
        assert not distribution._VALIDATION_ENABLED
    finally:
        numpyro.enable_validation(True)


def test_numpyro_checks_off_nests_and_restores():
    """Nested uses restore numpyro's setting once, at the outermost exit, even on an error."""
    from numpyro.distributions import distribution

    from bayesdp._jax import numpyro_checks_off

    assert distribution._VALIDATION_ENABLED
    with pytest.raises(RuntimeError):
        with numpyro_checks_off():
            with numpyro_checks_off():
                assert not distribution._VALIDATION_ENABLED
            assert not distribution._VALIDATION_ENABLED
            raise RuntimeError
    assert distribution._VALIDATION_ENABLED
