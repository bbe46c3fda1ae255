"""The CUDA backend's device-resident scores (``bonsai.backends.cuda.objective``)
against the CPU: gradients of every device objective, the integer cells of both
quantization modes (ties at .5, negatives, zeros, NaN / inf), the row subsample, the
score update and the identity sample.

Runs on numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``, set by tests/conftest.py)
or on a GPU; the simulator runs every thread as a Python thread, so the arrays are
tiny (64-150 rows: several blocks, and more rows than threads, so the grid-stride
loops and the cross-block reductions run).
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda

from bonsai.backends import cpu
from bonsai.backends.cuda import status
from bonsai.backends.cuda.objective import DeviceScores, fill_range, sample_rows, supports
from bonsai.objectives import get_objective


@pytest.fixture(autouse=True)
def _device_or_simulator():
    ok, why = status()
    if not ok:
        pytest.fail("these tests need numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, "
                    f"which tests/conftest.py sets) or a GPU: {why}", pytrace=False)


N = 150          # > 4 blocks x 32 threads on the simulator: a grid-stride second pass
SEGS = np.array([[0, 1000, 40], [40, 7, 0], [40, 300, 110]], np.int64)  # one empty


def _cpu_grad_hess(name, y, raw, w, params=None):
    g = np.empty(raw.shape, np.float32)
    h = np.empty(raw.shape, np.float32)
    get_objective(name, params).grad_hess(y, raw, w, g, h)
    return g, h


def _scores_with(g, h, packed=False):
    """DeviceScores whose device grad / hess are set to the float32 ``g``, ``h``."""
    k_out, n = g.shape
    name = "multiclass" if k_out > 1 else "squared_error"
    ds = DeviceScores(name, {}, np.zeros(n), None, np.zeros((k_out, n)), packed=packed)
    ds.grad.copy_to_device(np.ascontiguousarray(g, np.float32))
    ds.hess.copy_to_device(np.ascontiguousarray(h, np.float32))
    return ds


def test_supports_names_aliases_and_instances():
    for name in ("squared_error", "regression", "l2", "mse", "binary", "multiclass",
                 "softmax", "poisson"):
        assert supports(name), name
        assert supports(get_objective(name)), name
    for name in ("absolute_error", "l1", "quantile", "huber", "gamma", "tweedie", "nope"):
        assert not supports(name), name
    assert not supports(lambda y, p: (p - y, np.ones_like(p)))
    assert not supports(get_objective(lambda y, p: (p - y, np.ones_like(p))))
    assert not supports(get_objective("tweedie"))      # a subclass of poisson's class
    assert not supports(3)


def test_constructor_rejects_bad_input_naming_it():
    y, raw = np.zeros(8), np.zeros((1, 8))
    with pytest.raises(ValueError, match="objective"):
        DeviceScores("huber", {}, y, None, raw)
    with pytest.raises(TypeError, match="raw"):
        DeviceScores("binary", {}, y, None, raw.astype(np.float32))
    with pytest.raises(TypeError, match="y"):
        DeviceScores("binary", {}, y.astype(np.int64), None, raw)
    with pytest.raises(ValueError, match="y must have"):
        DeviceScores("binary", {}, np.zeros(7), None, raw)
    with pytest.raises(TypeError, match="w"):
        DeviceScores("binary", {}, y, np.ones(8, np.float32), raw)
    with pytest.raises(ValueError, match="K >= 2"):
        DeviceScores("multiclass", {}, y, None, raw)
    with pytest.raises(ValueError, match="K >= 2"):
        DeviceScores("binary", {}, y, None, np.zeros((2, 8)))
    with pytest.raises(ValueError, match="poisson_max_delta_step"):
        DeviceScores("poisson", {"poisson_max_delta_step": -1.0}, y, None, raw)
    ds = DeviceScores("squared_error", {}, y, None, raw)
    with pytest.raises(ValueError, match="k must be"):
        ds.quantize(1, 8)


def _labels(name, rng, n, k_out):
    if name == "binary":
        return (rng.random(n) < 0.4).astype(np.float64)
    if name == "multiclass":
        return rng.integers(0, k_out, n).astype(np.float64)
    if name == "poisson":
        return rng.poisson(2.0, n).astype(np.float64)
    return rng.normal(size=n) * 10.0 ** rng.integers(-4, 4, n)


@pytest.mark.parametrize("name, params, k_out, weighted, ydtype", [
    ("squared_error", None, 1, False, np.float64),
    ("regression", None, 1, True, np.float32),
    ("binary", None, 1, False, np.float64),
    ("binary", None, 1, True, np.float32),
    ("poisson", {"poisson_max_delta_step": 0.3}, 1, True, np.float64),
    ("multiclass", None, 3, False, np.float64),
    ("softmax", None, 4, True, np.float32),
])
def test_grad_hess_matches_the_cpu_objective(name, params, k_out, weighted, ydtype):
    rng = np.random.default_rng(len(name) + k_out)
    y = _labels(get_objective(name).name, rng, N, k_out).astype(ydtype)
    # margins over many magnitudes, both signs, and exact zeros
    raw = rng.normal(size=(k_out, N)) * 10.0 ** rng.uniform(-3, 0.6, (k_out, N))
    raw[:, ::17] = 0.0
    w = rng.random(N) * 3.0 + 0.01 if weighted else None
    ds = DeviceScores(name, params, y, w, raw)
    ds.grad_hess()
    g, h = _cpu_grad_hess(name, y, raw, w, params)
    dg, dh = ds.grad.copy_to_host(), ds.hess.copy_to_host()
    assert dg.dtype == dh.dtype == np.float32 and dg.shape == (k_out, N)
    if ds.objective.name == "squared_error":           # pure arithmetic: bit-identical
        np.testing.assert_array_equal(dg, g)
        np.testing.assert_array_equal(dh, h)
    else:                                              # device exp: last bit may differ
        np.testing.assert_allclose(dg, g, rtol=1e-6, atol=1e-12)
        np.testing.assert_allclose(dh, h, rtol=1e-6, atol=1e-12)
    np.testing.assert_array_equal(ds.to_host(), raw)   # grad_hess leaves raw alone


def _tie_gradients(rng, n):
    """float32 grad / hess with the largest |grad| in row 127 (the simulator's last
    block) and the largest |hess| in the last row (the grid-stride second pass), exact
    zeros and -0.0, negatives; ``_add_ties`` adds values whose scaled products end in
    exactly .5 once the scales are known."""
    g = (rng.normal(size=n) * 10.0 ** rng.uniform(-6, 0, n)).astype(np.float32)
    h = (rng.random(n) * 10.0 ** rng.uniform(-6, 0, n)).astype(np.float32)
    g[127] = -3.0          # max |grad|, negative
    h[n - 1] = 2.0         # max |hess|
    g[:3] = [0.0, -0.0, 0.0]
    h[3:5] = 0.0
    return g, h


def _add_ties(v, scale, start):
    """Overwrite ``v[start:start + 10]`` with values whose product with the (power of
    two) ``scale`` is m + 0.5, m = -5..4: round half to even and floor(x + 0.5)
    differ on half of them."""
    m = np.arange(-5, 5, dtype=np.float64)
    ties = ((m + 0.5) / scale).astype(np.float32)
    assert np.array_equal(ties.astype(np.float64) * scale, m + 0.5)
    v[start:start + 10] = ties
    x = v.astype(np.float64) * scale
    assert np.any(np.floor(x + 0.5) != np.rint(x))     # the cells can tell them apart


@pytest.mark.parametrize("n_rows", [N, 97])           # 97: a subsample's row count
def test_quantize_exact_cells_equal_the_cpu(n_rows):
    rng = np.random.default_rng(n_rows)
    g, h = _tie_gradients(rng, N)
    probe = cpu.quantize(g, h, n_rows, np.empty((N, 2), np.int64))
    _add_ties(g, probe.grad, 10)
    _add_ties(h, probe.hess, 30)                       # negative hessians are allowed here
    want = np.empty((N, 2), np.int64)
    scales = cpu.quantize(g, h, n_rows, want)
    assert scales == probe                             # the ties moved no maximum
    ds = _scores_with(g[None], h[None])
    got = ds.quantize(0, n_rows)
    assert got == scales
    np.testing.assert_array_equal(ds.gh.copy_to_host(), want)


@pytest.mark.parametrize("segs, quant_bins, seed", [
    (None, 4, 12345),
    (SEGS, 16, 2 ** 63 - 7),
])
def test_quantize_packed_cells_equal_the_cpu(segs, quant_bins, seed):
    rng = np.random.default_rng(quant_bins)
    g = np.empty((2, N), np.float32)
    h = np.empty((2, N), np.float32)
    for k in range(2):
        g[k], h[k] = _tie_gradients(rng, N)
    want = np.empty((N, 1), np.int64)
    scales = cpu.quantize(g[1], h[1], N, want, quant_bins, seed, segs=segs)
    ds = _scores_with(g, h, packed=True)
    got = ds.quantize(1, N, quant_bins, seed, segs)    # output k = 1 of K = 2
    assert got == scales and got.packed == 1.0
    np.testing.assert_array_equal(ds.gh.copy_to_host(), want)


@pytest.mark.parametrize("packed, which, row, bad", [
    (False, "grad", N - 1, np.nan),                   # the grid's second pass
    (False, "hess", 0, np.inf),
    (True, "grad", 100, -np.inf),                     # the simulator's last block
    (True, "hess", N - 1, np.nan),
])
def test_quantize_non_finite_raises_like_the_cpu(packed, which, row, bad):
    rng = np.random.default_rng(1)
    g, h = _tie_gradients(rng, N)
    (g if which == "grad" else h)[row] = bad
    out = np.empty((N, 1 if packed else 2), np.int64)
    with pytest.raises(FloatingPointError):
        cpu.quantize(g, h, N, out, 8)
    ds = _scores_with(g[None], h[None], packed)
    with pytest.raises(FloatingPointError, match="non-finite"):
        ds.quantize(0, N, 8)


def test_quantize_packed_refuses_a_negative_hessian_like_the_cpu():
    rng = np.random.default_rng(2)
    g, h = _tie_gradients(rng, N)
    h[N - 3] = -1e-3
    with pytest.raises(ValueError, match="non-negative"):
        cpu.quantize(g, h, N, np.empty((N, 1), np.int64), 8)
    with pytest.raises(ValueError, match="non-negative"):
        _scores_with(g[None], h[None], True).quantize(0, N, 8)


@pytest.mark.parametrize("segs, fraction, seed", [
    (None, 0.35, 99),
    (SEGS, 0.7, 2 ** 62 + 3),
    (None, 0.0, 5),
])
def test_sample_rows_equal_the_cpu(segs, fraction, seed):
    want = np.zeros(N, np.uint32)
    k = cpu.sample_rows(N, segs, fraction, seed, want)
    out = cuda.to_device(np.full(N, 7777, np.uint32))
    assert sample_rows(N, segs, fraction, seed, out) == k
    got = out.copy_to_host()
    np.testing.assert_array_equal(got[:k], want[:k])
    assert np.all(got[k:] == 7777)                    # nothing written past k
    if fraction:
        assert 0 < k < N


def test_sample_rows_method_reuses_its_buffers_and_checks_out():
    ds = DeviceScores("binary", {}, np.zeros(N), None, np.zeros((1, N)))
    want = np.zeros(N, np.uint32)
    out = cuda.device_array(N, np.uint32)
    for seed in (1, 2):
        k = cpu.sample_rows(N, None, 0.5, seed, want)
        assert ds.sample_rows(N, None, 0.5, seed, out) == k
        np.testing.assert_array_equal(out.copy_to_host()[:k], want[:k])
    with pytest.raises(ValueError, match="out_dev"):
        ds.sample_rows(N, None, 0.5, 1, cuda.device_array(N, np.int64))
    with pytest.raises(ValueError, match="segs"):
        ds.sample_rows(N, SEGS.astype(np.int32), 0.5, 1, out)


def test_add_leaf_values_equals_the_cpu():
    rng = np.random.default_rng(3)
    raw = rng.normal(size=(2, N)) * 10.0 ** rng.uniform(-8, 3, (2, N))
    ds = DeviceScores("multiclass", {}, rng.integers(0, 2, N).astype(np.float64), None, raw)
    idx = rng.permutation(N).astype(np.uint32)[:120]   # a subsample, partitioned by leaf
    bounds = np.array([0, 17, 17, 60, 61, 120])       # leaf 1 is empty
    l0, l1 = bounds[:-1].astype(np.int64), bounds[1:].astype(np.int64)
    value = rng.normal(size=5) * 10.0 ** rng.uniform(-9, 2, 5)
    dev_idx = cuda.to_device(idx)
    ds.add_leaf_values(1, dev_idx, l0, l1, value)
    want = raw.copy()
    cpu.add_leaf_values(want[1], idx, l0, l1, value)
    got = ds.to_host()
    np.testing.assert_array_equal(got, want)           # one float64 add per row
    assert not np.array_equal(got[1], raw[1])
    with pytest.raises(TypeError, match="leaf_value"):
        ds.add_leaf_values(1, dev_idx, l0, l1, value.astype(np.float32))
    with pytest.raises(ValueError, match="idx_dev"):
        ds.add_leaf_values(0, cuda.to_device(idx[:50]), l0, l1, value)


def test_fill_range_writes_the_identity_sample():
    idx = cuda.to_device(np.full(N, 9, np.uint32))
    fill_range(idx, N - 20)
    got = idx.copy_to_host()
    np.testing.assert_array_equal(got[:N - 20], np.arange(N - 20))
    assert np.all(got[N - 20:] == 9)


@pytest.mark.parametrize("name", ["squared_error", "binary"])
def test_rounds_on_the_device_keep_the_cpu_margins(name):
    """Rounds of gradients -> subsample -> cells -> leaf update, the device scores
    against the CPU functions.  The leaves (rows split by the sign of their grad cell,
    a Newton step each) come from the CPU's cells, so both sides add the same values;
    each round's device gradients must then match the CPU's from the margins the
    previous round left on the device."""
    rng = np.random.default_rng(4)
    y = _labels(name, rng, N, 1)
    w = rng.random(N) + 0.5
    raw = np.full((1, N), 0.3)
    ds = DeviceScores(name, {}, y, w, raw.copy())
    g = np.empty((1, N), np.float32)
    h = np.empty((1, N), np.float32)
    idx = np.empty(N, np.uint32)
    idx_dev = cuda.device_array(N, np.uint32)
    gh = np.empty((N, 2), np.int64)
    for it in range(2):
        get_objective(name).grad_hess(y, raw, w, g, h)
        ds.grad_hess()
        if name == "squared_error":
            np.testing.assert_array_equal(ds.grad.copy_to_host(), g)
        else:
            np.testing.assert_allclose(ds.grad.copy_to_host(), g, rtol=1e-6, atol=1e-12)
        k = cpu.sample_rows(N, None, 0.6, it, idx)
        assert ds.sample_rows(N, None, 0.6, it, idx_dev) == k
        scales = cpu.quantize(g[0], h[0], k, gh)
        if name == "squared_error":                    # the same gradients: the same cells
            assert ds.quantize(0, k) == scales
            np.testing.assert_array_equal(ds.gh.copy_to_host(), gh)
        rows = idx[:k]
        neg = gh[rows, 0] < 0
        order = np.concatenate([rows[neg], rows[~neg]]).astype(np.uint32)
        l0 = np.array([0, int(neg.sum())], np.int64)
        l1 = np.array([int(neg.sum()), k], np.int64)
        cb = int(scales.count_bits)
        value = np.array([-gh[order[a:b], 0].sum() * scales.inv_grad
                          / max((gh[order[a:b], 1] >> cb).sum() * scales.inv_hess, 1e-3)
                          for a, b in zip(l0, l1)])
        idx[:k] = order
        idx_dev.copy_to_device(idx)
        cpu.add_leaf_values(raw[0], idx, l0, l1, value)
        ds.add_leaf_values(0, idx_dev, l0, l1, value)
        np.testing.assert_array_equal(ds.to_host(), raw)
    assert not np.all(raw == 0.3)


#: kernels claimed bit-identical to the CPU (no exp): no product may be contracted
#: into an FMA with the sum it feeds
NO_FMA = ("_sq_kernel", "_max_abs_kernel", "_max_final_kernel", "_quantize_exact_kernel",
          "_quantize_packed_kernel", "_sample_count_kernel", "_sample_scatter_kernel",
          "_add_leaf_values_kernel")


def test_kernels_compile_for_the_gpu_without_contracted_products(child_env, tmp_path):
    """The simulator runs the kernels as Python; this compiles them for a real GPU
    (sm_90 PTX through NVVM, in a child with the simulator off): every kernel types
    and lowers, the bit-identical ones hold no FMA, and the exact cells round with
    ``cvt.rni`` (round half to even)."""
    env = dict(child_env, NUMBA_ENABLE_CUDASIM="0")
    run = subprocess.run([sys.executable, str(Path(__file__).with_name("_cuda_ptx.py"))],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    res = json.loads(run.stdout.strip().splitlines()[-1])
    if "skip" in res:
        pytest.skip(res["skip"])
    assert len(res) == 13
    assert {k: res[k]["fma"] for k in NO_FMA} == dict.fromkeys(NO_FMA, 0)
    assert res["_quantize_exact_kernel"]["rni"] >= 2
