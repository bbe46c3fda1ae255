"""Device-resident scores for the CUDA backend: one fit's labels, weights, raw margins,
gradients / hessians and integer histogram cells live on the device, and every
per-tree step that touches a row runs there (``DeviceScores``).

Per tree nothing crosses the bus but three float64 maxima (the one sync of
``quantize``), the row count of a subsample and the two small leaf tables
``add_leaf_values`` uploads (the row segments upload once a fit); the margins come
back once, at the end of the fit (``to_host``).

Objectives on the device (``supports``): ``squared_error``, ``binary`` (logloss),
``multiclass`` (softmax) and ``poisson``, with their aliases, weighted or not.  The
others (L1 / quantile with leaf renewal, huber, gamma, tweedie, custom callables) run
on the host.

Exactness, against the CPU (``bonsai.objectives``, ``bonsai.backends.cpu``):

* ``grad_hess``: ``squared_error`` is bit-identical (pure arithmetic, no product
  feeds a sum).  ``binary``, ``multiclass`` and ``poisson`` call the device's ``exp``
  (libdevice; the CPU uses numpy's), which may differ in the last bit, so their
  float32 outputs may too; every other operation is one IEEE operation as on the CPU
  (the products that feed a sum go through ``_device.fmul``: NVVM would contract them
  into an FMA; ``tests/test_cuda_objective.py`` compiles the kernels to sm_90 PTX and
  finds no FMA in the bit-identical ones).
* ``quantize``, ``sample_rows``, ``add_leaf_values``, ``fill_range``: bit-identical.
  Given the same float32 gradients the integer cells equal the CPU's (``round`` is
  ``__nv_llrint`` on the device and Python's ``round`` on the simulator: both round
  half to even, as ``np.rint``), the hash is the same splitmix64, a maximum is exact in
  any order, and every score gets one float64 add.  The scales are computed on the host
  by the CPU backend's own ``tree_scales``.

Kernels are plain ``@cuda.jit`` functions over device arrays, grid-stride loops of
``_device.THREADS``-thread blocks (``_device.blocks_for``); the row kernels
(sampling, the identity sample, the score update) and the hash live in ``rows``.
"""
import math

import numpy as np
from numba import cuda

from ...comm import LOCAL
from ...objectives import Objective, get_objective
from ..cpu import tree_scales
from ._device import THREADS, blocks_for, fmul
from .rows import (GOLDEN, INV53, Scratch, add_leaf_values, fill_range, find, launch,
                   mix64, output_index, sample_rows, seg_table)

__all__ = ["DEVICE_OBJECTIVES", "DeviceScores", "fill_range", "sample_rows", "supports"]

#: canonical names (``bonsai.objectives``) of the objectives computed on the device
DEVICE_OBJECTIVES = ("squared_error", "binary", "multiclass", "poisson")


def supports(objective):
    """Whether ``objective`` (a name or alias, or a ``bonsai.objectives.Objective``)
    runs on the device; False for anything else (callables, other losses, non-names)."""
    if isinstance(objective, str):
        try:
            objective = get_objective(objective)
        except (TypeError, ValueError):
            return False
    if not isinstance(objective, Objective) or objective.name not in DEVICE_OBJECTIVES:
        return False
    return type(objective) is type(get_objective(objective.name))   # no user subclass


# --------------------------------------------------------------------------
# device helper
# --------------------------------------------------------------------------
@cuda.jit(device=True)
def _nanmax(a, b):
    """max(a, b) that keeps a NaN from either side (a result exact in any order)."""
    return b if (b != b or b > a) else a


# --------------------------------------------------------------------------
# gradients / hessians: (K, n) float32 from raw (K, n) float64, y (n,), w (n,)
# --------------------------------------------------------------------------
@cuda.jit(cache=True)
def _sq_kernel(y, raw, w, has_w, g, h):
    for i in range(cuda.grid(1), y.shape[0], cuda.gridsize(1)):
        d = raw[0, i] - np.float64(y[i])
        if has_w:
            g[0, i] = d * w[i]
            h[0, i] = w[i]
        else:
            g[0, i] = d
            h[0, i] = 1.0


@cuda.jit(cache=True)
def _binary_kernel(y, raw, w, has_w, g, h):
    for i in range(cuda.grid(1), y.shape[0], cuda.gridsize(1)):
        r = raw[0, i]
        e = math.exp(-abs(r))
        inv = 1.0 / (1.0 + e)
        p = inv if r >= 0.0 else fmul(e, inv)
        gi = p - np.float64(y[i])
        hi = p * (1.0 - p)
        if has_w:
            gi *= w[i]
            hi *= w[i]
        g[0, i] = gi
        h[0, i] = hi


@cuda.jit(cache=True)
def _poisson_kernel(y, raw, w, has_w, max_delta_step, g, h):
    for i in range(cuda.grid(1), y.shape[0], cuda.gridsize(1)):
        r = raw[0, i]
        gi = math.exp(r) - np.float64(y[i])
        hi = math.exp(r + max_delta_step)
        if has_w:
            gi *= w[i]
            hi *= w[i]
        g[0, i] = gi
        h[0, i] = hi


@cuda.jit(cache=True)
def _softmax_kernel(y, raw, w, has_w, factor, g, h):
    k_out = raw.shape[0]
    for i in range(cuda.grid(1), y.shape[0], cuda.gridsize(1)):
        m = raw[0, i]
        for k in range(1, k_out):
            if raw[k, i] > m:
                m = raw[k, i]
        s = math.exp(raw[0, i] - m)
        for k in range(1, k_out):             # the CPU's order: k = 0..K-1
            s += math.exp(raw[k, i] - m)
        inv = 1.0 / s
        yi = np.float64(y[i])
        for k in range(k_out):
            p = fmul(math.exp(raw[k, i] - m), inv)
            gi = p - 1.0 if yi == k else p
            hi = factor * p * (1.0 - p)
            if has_w:
                gi *= w[i]
                hi *= w[i]
            g[k, i] = gi
            h[k, i] = hi


# --------------------------------------------------------------------------
# quantization
# --------------------------------------------------------------------------
@cuda.jit(device=True)
def _block_max3(a, b, c, part, row):
    """Reduce the block's (a, b, c) with ``_nanmax``; thread 0 writes ``part[row]``."""
    t = cuda.threadIdx.x
    sa = cuda.shared.array(THREADS, np.float64)
    sb = cuda.shared.array(THREADS, np.float64)
    sc = cuda.shared.array(THREADS, np.float64)
    sa[t] = a
    sb[t] = b
    sc[t] = c
    cuda.syncthreads()
    s = THREADS >> 1
    while s > 0:
        if t < s:
            sa[t] = _nanmax(sa[t], sa[t + s])
            sb[t] = _nanmax(sb[t], sb[t + s])
            sc[t] = _nanmax(sc[t], sc[t + s])
        cuda.syncthreads()
        s >>= 1
    if t == 0:
        part[row, 0] = sa[0]
        part[row, 1] = sb[0]
        part[row, 2] = sc[0]


@cuda.jit(cache=True)
def _max_abs_kernel(grad, hess, k, part):
    """``part[block] = (max |grad[k]|, max |hess[k]|, max(0, -min hess[k]))`` over the
    block's rows, NaN where one is NaN (``cpu.histogram.max_abs``)."""
    mg = 0.0
    mh = 0.0
    mn = 0.0
    for i in range(cuda.grid(1), grad.shape[1], cuda.gridsize(1)):
        hv = np.float64(hess[k, i])
        mg = _nanmax(mg, abs(np.float64(grad[k, i])))
        mh = _nanmax(mh, abs(hv))
        mn = _nanmax(mn, -hv)
    _block_max3(mg, mh, mn, part, cuda.blockIdx.x)


@cuda.jit(cache=True)
def _max_final_kernel(part, n_parts, out):
    """One block: ``out[0, :]`` = the ``_nanmax`` of ``part[:n_parts]``."""
    a = 0.0
    b = 0.0
    c = 0.0
    for j in range(cuda.threadIdx.x, n_parts, THREADS):
        a = _nanmax(a, part[j, 0])
        b = _nanmax(b, part[j, 1])
        c = _nanmax(c, part[j, 2])
    _block_max3(a, b, c, out, 0)


@cuda.jit(cache=True)
def _quantize_exact_kernel(grad, hess, k, scale_g, scale_h, count_bits, out):
    """``out[i] = (rint(grad * scale_g), rint(hess * scale_h) << count_bits + 1)``
    (``cpu.histogram.quantize_gradients``; ``round`` rounds half to even)."""
    for i in range(cuda.grid(1), grad.shape[1], cuda.gridsize(1)):
        out[i, 0] = np.int64(round(np.float64(grad[k, i]) * scale_g))
        out[i, 1] = (np.int64(round(np.float64(hess[k, i]) * scale_h)) << count_bits) \
            + np.int64(1)


@cuda.jit(cache=True)
def _quantize_packed_kernel(grad, hess, k, scale_g, scale_h, seed, seg, total, out):
    """Stochastic rounding, packed ``g_q * 2**32 + h_q`` (``cpu.histogram.quantize_packed``)
    over the rows of the segments ``seg`` (``seg_table``), hashed by global row id."""
    for p in range(cuda.grid(1), total, cuda.gridsize(1)):
        j = find(seg[:, 3], p)
        d = p - seg[j, 3]
        i = seg[j, 0] + d
        z = mix64(seed + np.uint64(seg[j, 1] + d) * GOLDEN)
        z2 = mix64(z ^ GOLDEN)
        u1 = fmul(np.float64(z >> np.uint64(11)), INV53)  # each product feeds a sum
        u2 = fmul(np.float64(z2 >> np.uint64(11)), INV53)
        gq = np.int64(math.floor(fmul(np.float64(grad[k, i]), scale_g) + u1))
        hq = np.int64(math.floor(fmul(np.float64(hess[k, i]), scale_h) + u2))
        out[i, 0] = (gq << np.int64(32)) + hq


def _resolve(objective, params):
    if isinstance(objective, str):
        objective = get_objective(objective, params)
    if not supports(objective):
        raise ValueError(f"objective must be one of {DEVICE_OBJECTIVES} (or an alias) to "
                         f"run on the device; got objective={objective!r}")
    return objective


def _host_array(name, a, dtypes, ndim):
    if not isinstance(a, np.ndarray):
        raise TypeError(f"{name} must be a numpy array; got {type(a).__name__}")
    if a.dtype not in dtypes or a.ndim != ndim:
        raise TypeError(f"{name} must be a {ndim}-D array of dtype "
                        f"{' or '.join(str(np.dtype(d)) for d in dtypes)}; got dtype "
                        f"{a.dtype}, shape {a.shape}")


class DeviceScores:
    """One fit's device-resident labels, weights, margins, gradients and cells.

    ``DeviceScores(objective, objective_params, y, w, raw, packed=False)``:
    ``objective`` a name or alias (built with ``get_objective(objective,
    objective_params)``) or an ``Objective`` (params then unused), one that
    ``supports``; ``y`` (n,) float32 / float64 labels, ``w`` (n,) float64 weights or
    None, ``raw`` (K, n) float64 starting margins (K = 1, or K >= 2 for multiclass);
    ``packed``: the cells ``gh`` are (n, 1) packed quantized instead of (n, 2) exact.
    Uploaded once.

    Device arrays: ``y``, ``w`` (or None), ``raw`` (K, n) float64, ``grad`` / ``hess``
    (K, n) float32, ``gh`` (n, 2) or (n, 1) int64.  Methods: ``grad_hess``,
    ``quantize``, ``sample_rows``, ``fill_range``, ``add_leaf_values``, ``to_host``
    (exactness against the CPU: the module docstring).
    """

    def __init__(self, objective, objective_params, y, w, raw, packed=False):
        obj = _resolve(objective, objective_params)
        _host_array("raw", raw, (np.float64,), 2)
        _host_array("y", y, (np.float32, np.float64), 1)
        k_out, n = raw.shape
        if y.shape[0] != n:
            raise ValueError(f"y must have raw.shape[1]={n} rows; got y.shape={y.shape}")
        if w is not None:
            _host_array("w", w, (np.float64,), 1)
            if w.shape[0] != n:
                raise ValueError(f"w must have raw.shape[1]={n} rows; got w.shape={w.shape}")
        if (k_out >= 2) != (obj.name == "multiclass"):
            raise ValueError(f"raw must have K >= 2 rows for multiclass and 1 row otherwise;"
                             f" got K={k_out} for objective={obj.name!r}")
        if not isinstance(packed, bool):
            raise TypeError(f"packed must be a bool; got packed={packed!r}")
        self.objective = obj
        self.n_outputs, self.n_rows = k_out, n
        self.y = cuda.to_device(y)
        self.w = None if w is None else cuda.to_device(w)
        self.raw = cuda.to_device(np.ascontiguousarray(raw))
        self.grad = cuda.device_array((k_out, n), np.float32)
        self.hess = cuda.device_array((k_out, n), np.float32)
        self.gh = cuda.device_array((n, 1 if packed else 2), np.int64)
        self._w_arg = self.w if w is not None else cuda.device_array(1, np.float64)
        self._part = cuda.device_array((blocks_for(n), 3), np.float64)
        self._max = cuda.device_array((1, 3), np.float64)
        self._scratch = Scratch()

    def __repr__(self):
        return (f"<DeviceScores {self.objective.name!r} K={self.n_outputs} n={self.n_rows}"
                f" {'packed' if self.gh.shape[1] == 1 else 'exact'}>")

    def grad_hess(self):
        """Fill ``grad`` / ``hess`` (K, n) float32 from ``raw``, ``y``, ``w`` with the
        CPU objective's formulas."""
        name = self.objective.name
        args = (self.y, self.raw, self._w_arg, self.w is not None)
        out = (self.grad, self.hess)
        blocks = blocks_for(self.n_rows)
        if name == "squared_error":
            launch(_sq_kernel, blocks, THREADS, *args, *out)
        elif name == "binary":
            launch(_binary_kernel, blocks, THREADS, *args, *out)
        elif name == "poisson":
            launch(_poisson_kernel, blocks, THREADS, *args,
                   float(self.objective._mds), *out)
        else:
            k = self.n_outputs
            launch(_softmax_kernel, blocks, THREADS, *args, k / (k - 1.0), *out)

    def quantize(self, k, n_rows, quant_bins=0, seed=0, segs=None, comm=LOCAL, out=None):
        """Device ``bonsai.backends.cpu.quantize`` of output ``k``: the cells of
        ``grad[k]`` / ``hess[k]`` written to ``out`` (default ``gh``: (n, 2) exact or
        (n, 1) packed), for ``n_rows`` sampled rows over every shard of ``comm``
        (``segs`` places this shard's rows in the global order, packed mode's hash).
        The maxima reduce on the device and come to the host (three floats: the sync);
        the scales are ``cpu.tree_scales``.  Returns the tree's ``Scales``; raises
        FloatingPointError on a NaN or inf gradient, ValueError (packed) on a negative
        hessian, as the CPU does."""
        out = self.gh if out is None else out
        k = output_index(k, self.n_outputs)
        if getattr(out, "dtype", None) != np.int64 or tuple(out.shape) not in (
                (self.n_rows, 1), (self.n_rows, 2)):
            raise ValueError(f"out must be an int64 ({self.n_rows}, 2) or ({self.n_rows}, 1)"
                             f" device array; got shape {getattr(out, 'shape', None)}")
        blocks = blocks_for(self.n_rows)
        launch(_max_abs_kernel, blocks, THREADS, self.grad, self.hess, k, self._part)
        launch(_max_final_kernel, 1, THREADS, self._part, blocks, self._max)
        m = self._max.copy_to_host()[0]
        packed = out.shape[1] == 1
        scales = tree_scales(m[0], m[1], m[2], n_rows, packed, quant_bins, comm)
        if packed:
            seg, total = seg_table(segs, self.n_rows)
            launch(_quantize_packed_kernel, blocks_for(total), THREADS, self.grad,
                   self.hess, k, scales.grad, scales.hess, np.uint64(seed),
                   self._scratch.seg(seg), total, out)
        else:
            launch(_quantize_exact_kernel, blocks, THREADS, self.grad, self.hess, k,
                   scales.grad, scales.hess, np.int64(scales.count_bits), out)
        return scales

    def sample_rows(self, n, segs, fraction, seed, out_dev):
        """Module ``sample_rows`` with this fit's scratch buffers; returns k."""
        return sample_rows(n, segs, fraction, seed, out_dev, self._scratch)

    def fill_range(self, idx_dev, n):
        """Module ``fill_range``: ``idx_dev[i] = i`` for ``i < n``."""
        fill_range(idx_dev, n)

    def add_leaf_values(self, k, idx_dev, leaf_start, leaf_stop, leaf_value):
        """``raw[k, idx_dev[i]] += leaf_value[l]`` for ``i`` in each leaf's range
        ``leaf_start[l]:leaf_stop[l]`` (small host arrays, uploaded here; the ranges
        share no row, as the grower's leaves): one float64 add per row, as the CPU's
        ``add_leaf_values`` (``rows.add_leaf_values``)."""
        add_leaf_values(self.raw, k, idx_dev, leaf_start, leaf_stop, leaf_value)

    def to_host(self):
        """The margins ``raw`` (K, n) float64 as a numpy array (the fit's last sync)."""
        return self.raw.copy_to_host()
