"""Bounded caches of compiled samplers: once the caches are full, fits of ever new shapes must not
grow the process's memory maps (the kernel ends a process that reaches vm.max_map_count, 65530 by
default). What an unbounded cache costs: docs/evidence/performance.md, "Compiled samplers:
memory"."""

import importlib
import os
import warnings

import pytest

import bayesdp

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux /proc")

bs_mod = importlib.import_module("bayesdp.paper.bs")
mcmc_mod = importlib.import_module("bayesdp.inference.mcmc")


def n_maps():
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


@pytest.fixture(scope="module")
def rel():
    sim = bayesdp.simulate(n=300, d=2, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bayesdp.release(sim.X, sim.y, epsilon=1.0, delta=1e-5, bounds=sim.bounds,
                               nodes=2, seed=2, include_yty=True)


def _fits_of_new_shapes(rel, method, sizes):
    for k in sizes:  # num_samples is part of every cache key: each fit is a new compiled shape
        bayesdp.fit(rel, method=method, seed=0, num_samples=k, num_warmup=10, num_chains=1,
                    progress_bar=False)


@pytest.mark.slow
def test_fixeds_new_shapes_do_not_grow_memory_maps(rel, monkeypatch):
    monkeypatch.setattr(mcmc_mod, "MCMC_CACHE_SIZE", 1)
    _fits_of_new_shapes(rel, "fixeds", range(10, 12))  # fill the cache, start evicting
    before = n_maps()
    _fits_of_new_shapes(rel, "fixeds", range(12, 16))
    grown = n_maps() - before
    assert len(mcmc_mod._MCMC_CACHE) == 1
    assert grown < 50, grown  # code of evicted shapes kept: about 24 maps per shape, 96 here


@pytest.mark.slow
def test_bs_new_shapes_do_not_grow_memory_maps(rel, monkeypatch):
    monkeypatch.setattr(bs_mod, "SAMPLER_CACHE_SIZE", 1, raising=False)
    _fits_of_new_shapes(rel, "bs", [10])  # the cache (size 1) is full
    before = n_maps()
    _fits_of_new_shapes(rel, "bs", [11])  # one more shape only: a B&S sampler is slow to compile
    grown = n_maps() - before
    assert grown < 300, grown  # an unbounded cache: about 700 maps per new shape
    assert len(bs_mod._SAMPLERS) == 1
