"""Large d: the noise model of the iid design in structured form (releases/layout.py).

k = d(d+1)/2 grows as d^2: at d = 200, k = 20,100, so one dense k x k matrix is 3.2 GB and the
old d x k x d vech product tensor 6.5 GB, and ``fit(release, method="fast")`` on a 1 MB release
was killed for memory. The iid noise is diagonal in the vech basis; :class:`NoiseBlocks` keeps
that diagonal and :func:`eiv_covariance` pushes it through theta in O(d^2). These tests check

- that the structured path equals the dense computation in maths (small d, to rounding): the
  eiv covariance against M C M^T with the old tensor and an explicit dense C, and fast's whole
  posterior and S-noise check against the same release given as an explicit dense
  ``noise_cov`` (the dense path the network adapters use);
- that fast (and fixeds' noise setup, and fit's S-noise check) at d = 200 stay within a stated
  memory bound, measured in a subprocess;
- that what genuinely needs the dense D x D covariance at d = 200 (MCMC-B&S) is refused up front
  with a BayesdpInputError naming d, the method and the limit.
"""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bayesdp
import bayesdp.paper  # noqa: F401  (registers the paper's methods)
from bayesdp.errors import BayesdpInputError
from bayesdp.inference import closed_form
from bayesdp.models.priors import Priors
from bayesdp.releases import layout

SMALL_D = (1, 2, 4, 7)
S_NOISES = ("conditional", "eiv", "ignore")


def _release(d, J, n=60, seed=0, **kw):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    y = X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n)
    return bayesdp.release(X, y, epsilon=1.0, delta=1e-5, bounds=(3.0, 3.0), nodes=J,
                           seed=seed + 1, **kw)


def _dense_iid_cov(rel):
    """The iid design's covariance over [vech(S), z], written out densely from its definition
    (eqs. 2-3), independently of layout.py."""
    k = layout.vech_dim(rel.d)
    return np.stack([np.diag(np.r_[np.full(k, s**2), np.full(rel.d, t**2)])
                     for s, t in zip(rel.sigma_s, rel.sigma_z)])


def _dense_twin(rel):
    """The same release with its iid noise given as an explicit dense ``noise_cov``."""
    return dataclasses.replace(rel, noise_cov=_dense_iid_cov(rel))


# -- small d: the structured path equals the dense one --------------------------------------------


@pytest.mark.parametrize("d", SMALL_D)
def test_noise_blocks_structured_equals_dense_definition(d):
    rel = _release(d, J=3)
    k = layout.vech_dim(d)
    blocks = layout.noise_blocks(rel)
    assert blocks.diagonal and blocks.Sz is None and blocks.SS.shape == (3, k)
    C = _dense_iid_cov(rel)
    SS, Sz, zz = blocks.dense()
    np.testing.assert_array_equal(SS, C[:, :k, :k])
    np.testing.assert_array_equal(Sz, C[:, :k, k:])
    np.testing.assert_array_equal(zz, C[:, k:, k:])
    np.testing.assert_array_equal(layout.noise_covariance(rel), C)
    twin = layout.noise_blocks(_dense_twin(rel))
    assert not twin.diagonal
    for a, b in zip(twin.dense(), (SS, Sz, zz)):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("d", SMALL_D)
def test_vech_product_gather_equals_tensor(d):
    rng = np.random.default_rng(d)
    th = rng.standard_normal(d)
    E = rng.standard_normal((d, d))
    E = E + E.T
    B = layout.vech_product_matrix(th)
    np.testing.assert_array_equal(B, layout.vech_product_tensor(d) @ th)
    np.testing.assert_allclose(B @ layout.vech(E), E @ th, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("d", SMALL_D)
def test_eiv_covariance_diagonal_equals_dense(d):
    """B diag(v) B^T in O(d^2) against the dense B Sigma_SS B^T with the old (d, k, d) tensor,
    for an arbitrary (non-constant) diagonal v, a stack and one holder, NumPy and JAX."""
    rng = np.random.default_rng(10 + d)
    k = layout.vech_dim(d)
    v = rng.uniform(0.1, 3.0, size=(2, k))
    L = rng.standard_normal((2, d, d))
    zz = L @ np.swapaxes(L, 1, 2)
    th = 5.0 * rng.standard_normal(d)
    P = layout.vech_product_tensor(d)
    M = np.concatenate([-(P @ th), np.eye(d)], axis=1)  # e_z - E_S theta = M [e_S; e_z]
    ref = np.stack([M @ np.block([[np.diag(v[j]), np.zeros((k, d))],
                                  [np.zeros((d, k)), zz[j]]]) @ M.T for j in range(2)])
    got = layout.eiv_covariance(v, None, zz, th, ss_diagonal=True)
    np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
    one = layout.eiv_covariance(v[1], None, zz[1], th, ss_diagonal=True)
    np.testing.assert_allclose(one, ref[1], rtol=1e-12, atol=1e-12 * np.abs(ref).max())
    dense = layout.eiv_covariance(np.stack([np.diag(x) for x in v]), np.zeros((2, k, d)), zz, th)
    np.testing.assert_allclose(dense, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
    jnp = pytest.importorskip("jax.numpy")
    from bayesdp._jax import enable_x64

    enable_x64()
    got_j = layout.eiv_covariance(jnp.asarray(v), None, jnp.asarray(zz), jnp.asarray(th),
                                  xp=jnp, ss_diagonal=True)
    np.testing.assert_allclose(np.asarray(got_j), ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())


@pytest.mark.parametrize("d", (4, 7))
@pytest.mark.parametrize("s_noise", S_NOISES)
def test_fast_structured_equals_dense_noise_cov(d, s_noise):
    """fast's posterior and its S-noise coverage check: the iid release (structured path) and the
    same release with the dense ``noise_cov`` (dense path) agree to rounding."""
    rel = _release(d, J=2, n=80, seed=d)
    twin = _dense_twin(rel)
    pri = Priors.paper().resolve(d)
    theta = np.linspace(-3.0, 3.0, d)
    shift_a, Sig_a = layout.z_given_s_noise(rel, closed_form.fixed_s_estimate(rel),
                                            s_noise=s_noise, theta=theta)
    shift_b, Sig_b = layout.z_given_s_noise(twin, closed_form.fixed_s_estimate(twin),
                                            s_noise=s_noise, theta=theta)
    np.testing.assert_allclose(shift_a, shift_b, atol=1e-12)
    np.testing.assert_allclose(Sig_a, Sig_b, rtol=1e-12, atol=1e-12 * np.abs(Sig_b).max())
    a = closed_form.fast_posterior(rel, pri, sigma_y2=0.5, s_noise=s_noise)
    b = closed_form.fast_posterior(twin, pri, sigma_y2=0.5, s_noise=s_noise)
    np.testing.assert_allclose(a["mean"], b["mean"], rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(a["cov"], b["cov"], rtol=1e-8, atol=1e-12)
    if s_noise == "eiv":  # the eiv method's posterior, structured and dense noise alike
        from bayesdp.inference import eiv

        ea, eb = eiv.eiv_posterior(rel, pri), eiv.eiv_posterior(twin, pri)
        np.testing.assert_allclose(ea["theta_mean"], eb["theta_mean"], rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(ea["log_weight"], eb["log_weight"], atol=1e-8)


@pytest.mark.filterwarnings("ignore::bayesdp.errors.CalibrationWarning")
@pytest.mark.parametrize("d", (4, 7))
def test_fit_fast_structured_equals_dense(d):
    rel = _release(d, J=2, n=80, seed=20 + d)
    fa = bayesdp.fit(rel, method="fast", seed=3, num_samples=20, num_chains=1)
    fb = bayesdp.fit(_dense_twin(rel), method="fast", seed=3, num_samples=20, num_chains=1)
    for key in ("closed_form_mean", "closed_form_cov", "s_noise_coverage"):
        np.testing.assert_allclose(np.asarray(fa.posterior.attrs[key]),
                                   np.asarray(fb.posterior.attrs[key]),
                                   rtol=1e-10, atol=1e-12)


# -- d = 200 ---------------------------------------------------------------------------------------


D_LARGE = 200
K_LARGE = layout.vech_dim(D_LARGE)  # 20,100
DENSE_KK_BYTES = 8 * K_LARGE**2     # one k x k float64 matrix: 3.23 GB
MEMORY_BOUND = 2**30
"""Peak memory growth allowed for a d = 200 fit (1 GiB): under a third of ONE dense k x k matrix
(3.23 GB; the old path made several, and the 6.5 GB d x k x d tensor), and far above what the
structured path holds: J (d x d) matrices (0.3 MB each), J k-vectors (0.16 MB), the d x k gather
index of B(theta) when a dense noise_cov needs it (32 MB), the draws (chains x samples x d)."""


@pytest.fixture(scope="module")
def large_release():
    return _release(D_LARGE, J=2, n=2000, seed=7, include_yty=True)


def test_d200_eiv_structured_equals_gather(large_release):
    """At d = 200 the O(d^2) form equals B diag(v) B^T with B (d x k, 32 MB) built by the gather."""
    rel = large_release
    th = np.random.default_rng(0).standard_normal(D_LARGE)
    blocks = layout.noise_blocks(rel)
    assert blocks.SS.shape == (2, K_LARGE)
    B = layout.vech_product_matrix(th)
    for j in range(rel.J):
        ref = (B * blocks.SS[j]) @ B.T + blocks.zz[j]
        got = layout.eiv_covariance(blocks.SS[j], None, blocks.zz[j], th, ss_diagonal=True)
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())


def test_d200_dense_forms_refused_with_d_and_limit(large_release):
    with pytest.raises(BayesdpInputError, match=r"d = 200.*limit"):
        layout.noise_blocks(large_release).dense()
    with pytest.raises(BayesdpInputError, match=r"d = 200.*limit"):
        layout.vech_product_tensor(D_LARGE)
    with pytest.raises(BayesdpInputError, match=r"d = 200.*limit.*'bs'"):
        layout.noise_covariance(large_release, with_yty=True)


def test_d200_bs_refused_up_front(large_release):
    """MCMC-B&S models all D = 20,301 statistics jointly (a dense D x D covariance per holder,
    6.6 GB for J = 2): refused before anything large is made."""
    with pytest.raises(BayesdpInputError) as err:
        bayesdp.fit(large_release, method="bs", seed=0, num_samples=5, num_chains=1,
                    num_warmup=5)
    msg = str(err.value)
    assert "d = 200" in msg and "'bs'" in msg and "limit" in msg and "GB" in msg


_MEASURE = r"""
import json, resource, sys, tracemalloc, warnings
import numpy as np
import bayesdp
from bayesdp.inference import closed_form, fixeds
from bayesdp.models.priors import Priors

warnings.simplefilter("ignore")
method, d, bound = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
kw = {} if method == "fast" else dict(num_samples=20, num_warmup=20, num_chains=1)

def release(d, n):
    rng = np.random.default_rng(7)
    X = rng.standard_normal((n, d)) / np.sqrt(d)
    y = X @ rng.standard_normal(d) + 0.3 * rng.standard_normal(n)
    return bayesdp.release(X, y, epsilon=1.0, delta=1e-5, bounds=(3.0, 3.0), nodes=2, seed=1)

bayesdp.fit(release(3, 200), method=method, seed=0, **kw)  # the lazy imports, outside the peak
rel = release(d, 2000)
# a safety net for a shared machine: a regression to the dense path fails with MemoryError
# instead of taking the memory of everything else (address space now + 3 bounds)
vm = int(next(l for l in open("/proc/self/status") if l.startswith("VmSize")).split()[1]) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + 3 * bound, resource.getrlimit(resource.RLIMIT_AS)[1]))
rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
tracemalloc.start()
idata = bayesdp.fit(rel, method=method, seed=0, **kw)
if method == "fixeds":  # fixeds' noise setup with each s_noise, outside the sampler
    pri = Priors().resolve(rel)
    S = closed_form.fixed_s_estimate(rel)
    for s_noise in ("conditional", "eiv", "ignore"):
        fixeds.z_noise(rel, pri, S, 0.5, s_noise=s_noise)
traced = tracemalloc.get_traced_memory()[1]
tracemalloc.stop()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0
print(json.dumps({"traced_peak": traced, "rss_growth": rss,
                  "coverage": float(idata.posterior.attrs["s_noise_mean_coverage"]),
                  "theta_shape": list(idata.posterior["theta"].shape)}))
"""


def _measure(method, d):
    env = dict(os.environ)
    env["PYTHONPATH"] = str(Path(__file__).parents[2]) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    env["BAYESDP_COMPILATION_CACHE"] = "off"
    p = subprocess.run([sys.executable, "-c", _MEASURE, method, str(d), str(MEMORY_BOUND)],
                       env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_d200_fast_memory_bounded():
    """fit(method="fast") at d = 200, J = 2, incl. fit's S-noise check: peak growth (traced
    allocations and resident set) below MEMORY_BOUND, where the dense path needed > 3 x 3.2 GB."""
    out = _measure("fast", D_LARGE)
    assert out["theta_shape"] == [4, 1000, D_LARGE]
    assert 0.0 <= out["coverage"] <= 1.0
    assert out["traced_peak"] < MEMORY_BOUND, out
    assert out["rss_growth"] < MEMORY_BOUND, out
    assert MEMORY_BOUND < DENSE_KK_BYTES / 3


@pytest.mark.slow
def test_d200_fixeds_memory_bounded():
    """fit(method="fixeds") at d = 200 (a short chain; compiling dominates its ~30 s) and its
    noise setup with every s_noise: peak growth below MEMORY_BOUND."""
    out = _measure("fixeds", D_LARGE)
    assert out["theta_shape"] == [1, 20, D_LARGE]
    assert out["traced_peak"] < MEMORY_BOUND, out
    assert out["rss_growth"] < MEMORY_BOUND, out


@pytest.mark.parametrize("method", ["normalx", "nuts-normalx", "normalx-paper"])
def test_methods_that_sample_s_are_refused_up_front_at_d_200(method):
    """The normalX methods build d^4 intermediates (12.8 GB at d = 200): refused before any
    work, naming d, the size and what to use instead (the other tests of these methods fit
    small d as before)."""
    rel = _release(200, J=2, n=300, seed=1)
    with pytest.raises(BayesdpInputError, match=r"d = 200 .*12\.8 GB.*'eiv'"):
        bayesdp.fit(rel, method=method, seed=0)
