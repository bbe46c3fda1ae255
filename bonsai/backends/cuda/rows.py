"""Row-wise kernels of the CUDA backend, and the pieces the quantizer shares with them:
the round's row subsample (``sample_rows``, a stream compaction), the identity sample
(``fill_range``), the score update over the leaves' row ranges (``add_leaf_values``),
the splitmix64 hash (``mix64``) and the row-segment table (``seg_table``: where a
shard's rows lie in the global order, ``bonsai.comm.segments``).

Bit-identical to the CPU backend (``bonsai.backends.cpu``): the same hash of the same
global row ids, the kept rows in the same ascending order (per-chunk counts, one exact
integer prefix sum, a block-wide scan), and one float64 add per score.  Host
functions validate their arguments and launch; ``launch`` silences, on the simulator
only, numpy's warning on the hash's intended uint64 wraparound (the device wraps
silently).
"""
import warnings

import numpy as np
from numba import cuda

from ._device import CHUNK, SIM, THREADS, blocks_for

__all__ = ["Scratch", "add_leaf_values", "fill_range", "find", "launch", "mix64",
           "output_index", "sample_rows", "seg_table"]

GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
#: 2**-53: the top 53 bits of a hash as a uniform float64 in [0, 1)
INV53 = 1.0 / 9007199254740992.0


@cuda.jit(device=True)
def mix64(z):
    """splitmix64 finalizer of uint64 ``z`` (``cpu.histogram._mix64``)."""
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@cuda.jit(device=True)
def find(off, p):
    """The largest j with ``off[j] <= p`` (``off`` ascending, ``off[0] == 0``)."""
    lo = 0
    hi = off.shape[0] - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if off[mid] <= p:
            lo = mid
        else:
            hi = mid - 1
    return lo


@cuda.jit(device=True)
def _kept(seg, p, seed, fraction):
    """Whether segment position ``p`` is in the sample (``cpu.histogram.sample_rows``)."""
    j = find(seg[:, 3], p)
    z = mix64(seed + np.uint64(seg[j, 1] + (p - seg[j, 3])) * GOLDEN)
    return np.float64(z >> np.uint64(11)) * INV53 < fraction


@cuda.jit(cache=True)
def _sample_count_kernel(seg, total, seed, fraction, counts):
    """``counts[c]``: kept positions among ``c * CHUNK .. (c + 1) * CHUNK - 1``."""
    t = cuda.threadIdx.x
    cnt = cuda.shared.array(1, np.int32)
    for c in range(cuda.blockIdx.x, counts.shape[0], cuda.gridDim.x):
        if t == 0:
            cnt[0] = 0
        cuda.syncthreads()
        p = c * CHUNK + t
        if p < total and _kept(seg, p, seed, fraction):
            cuda.atomic.add(cnt, 0, 1)
        cuda.syncthreads()
        if t == 0:
            counts[c] = cnt[0]
        cuda.syncthreads()


@cuda.jit(cache=True)
def _exclusive_scan_kernel(counts, offsets, total):
    """One block: ``offsets`` = exclusive prefix sums of ``counts``, ``total[0]`` their
    sum; thread t sums a contiguous slice, thread 0 scans the slices' sums."""
    t = cuda.threadIdx.x
    n = counts.shape[0]
    part = cuda.shared.array(THREADS, np.int64)
    a = (n * t) // THREADS
    b = (n * (t + 1)) // THREADS
    s = np.int64(0)
    for c in range(a, b):
        s += counts[c]
    part[t] = s
    cuda.syncthreads()
    if t == 0:
        run = np.int64(0)
        for j in range(THREADS):
            v = part[j]
            part[j] = run
            run += v
        total[0] = run
    cuda.syncthreads()
    run = part[t]
    for c in range(a, b):
        offsets[c] = run
        run += counts[c]


@cuda.jit(cache=True)
def _sample_scatter_kernel(seg, total, seed, fraction, offsets, out):
    """Write each chunk's kept local rows, ascending, from ``out[offsets[c]]`` on
    (a block-wide inclusive scan of the keep flags)."""
    t = cuda.threadIdx.x
    scan = cuda.shared.array(CHUNK, np.int32)
    for c in range(cuda.blockIdx.x, offsets.shape[0], cuda.gridDim.x):
        p = c * CHUNK + t
        keep = p < total and _kept(seg, p, seed, fraction)
        scan[t] = 1 if keep else 0
        cuda.syncthreads()
        d = 1
        while d < CHUNK:
            v = scan[t - d] if t >= d else 0
            cuda.syncthreads()
            scan[t] += v
            cuda.syncthreads()
            d <<= 1
        if keep:
            j = find(seg[:, 3], p)
            out[offsets[c] + scan[t] - 1] = np.uint32(seg[j, 0] + (p - seg[j, 3]))
        cuda.syncthreads()


@cuda.jit(cache=True)
def _fill_range_kernel(idx, n):
    for i in range(cuda.grid(1), n, cuda.gridsize(1)):
        idx[i] = np.uint32(i)


@cuda.jit(cache=True)
def _add_leaf_values_kernel(raw, k, idx, leaf_tab, leaf_value, total):
    """``raw[k, idx[i]] += leaf_value[l]`` over each leaf's rows; ``leaf_tab`` (2, L):
    the leaves' range starts, and their offsets in the concatenation of the ranges."""
    for p in range(cuda.grid(1), total, cuda.gridsize(1)):
        lf = find(leaf_tab[1], p)
        raw[k, idx[leaf_tab[0, lf] + (p - leaf_tab[1, lf])]] += leaf_value[lf]


def launch(kernel, blocks, threads, *args):
    """``kernel[blocks, threads](*args)``; on the simulator without numpy's uint64
    overflow warning (the hash wraps on purpose, as the device does silently)."""
    if SIM:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "overflow encountered", RuntimeWarning)
            kernel[blocks, threads](*args)
    else:                                  # pragma: no cover - needs a GPU
        kernel[blocks, threads](*args)


def seg_table(segs, n):
    """(S, 4) int64 host table (local start, global start, length, position offset) of
    ``segs`` (None: rows 0..n-1) and the total length."""
    if segs is None:
        return np.array([[0, 0, int(n), 0]], np.int64), int(n)
    segs = np.asarray(segs)
    if segs.ndim != 2 or segs.shape[1] != 3 or segs.dtype != np.int64:
        raise ValueError(f"segs must be an int64 (S, 3) array of (local start, global "
                         f"start, length); got dtype {segs.dtype}, shape {segs.shape}")
    if segs.shape[0] == 0 or np.any(segs < 0) or np.any(segs[:, 0] + segs[:, 2] > n):
        raise ValueError(f"segs must hold at least one segment, no negative value and "
                         f"only local rows below n={n}; got segs={segs.tolist()!r}")
    off = np.concatenate([[0], np.cumsum(segs[:, 2])[:-1]])
    return np.ascontiguousarray(np.column_stack([segs, off]), np.int64), int(segs[:, 2].sum())


def output_index(k, n_outputs):
    """``k`` as an int in ``[0, n_outputs)``, else TypeError / ValueError naming it."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an integer output index; got k={k!r}")
    if not 0 <= k < n_outputs:
        raise ValueError(f"k must be in [0, {n_outputs}); got k={k!r}")
    return int(k)


def _check_idx(name, arr, n):
    if getattr(arr, "dtype", None) != np.uint32 or len(arr.shape) != 1 or arr.shape[0] < n:
        raise ValueError(f"{name} must be a 1-D uint32 device array of at least {n} rows; "
                         f"got dtype {getattr(arr, 'dtype', None)}, shape "
                         f"{getattr(arr, 'shape', None)}")


class Scratch:
    """Device buffers kept between calls: ``sample_rows``'s chunk counts (while the
    chunk count holds) and the last segment table uploaded (while its content holds:
    a fit's segments never change, so they upload once)."""

    def __init__(self):
        self.n_chunks = -1
        self._seg = None

    def sample(self, n_chunks):
        if n_chunks != self.n_chunks:
            self.counts = cuda.device_array(n_chunks, np.int32)
            self.offsets = cuda.device_array(n_chunks, np.int64)
            self.total = cuda.device_array(1, np.int64)
            self.n_chunks = n_chunks
        return self.counts, self.offsets, self.total

    def seg(self, table):
        if self._seg is None or not np.array_equal(self._seg[0], table):
            self._seg = (table, cuda.to_device(table))
        return self._seg[1]


def sample_rows(n, segs, fraction, seed, out_dev, scratch=None):
    """Device ``bonsai.backends.cpu.sample_rows``: the local rows whose global row id
    (``segs``: None for rows ``0..n-1``, else int64 (S, 3) (local start, global start,
    length) as ``bonsai.comm.segments``) hashes with ``seed`` below ``fraction``,
    ascending, written to ``out_dev[:k]`` (uint32 device array); returns k (int, the
    one sync).  The same rows in the same order as the CPU."""
    seg, total = seg_table(segs, n)
    _check_idx("out_dev", out_dev, total)
    if total == 0:
        return 0
    n_chunks = -(-total // CHUNK)
    scratch = Scratch() if scratch is None else scratch
    counts, offsets, k_dev = scratch.sample(n_chunks)
    seg_dev = scratch.seg(seg)
    seed, fraction = np.uint64(seed), float(fraction)
    blocks = blocks_for(n_chunks, 1)
    launch(_sample_count_kernel, blocks, CHUNK, seg_dev, total, seed, fraction, counts)
    launch(_exclusive_scan_kernel, 1, THREADS, counts, offsets, k_dev)
    launch(_sample_scatter_kernel, blocks, CHUNK, seg_dev, total, seed, fraction, offsets,
           out_dev)
    return int(k_dev.copy_to_host()[0])


def fill_range(idx_dev, n):
    """``idx_dev[i] = i`` for ``i < n`` (the sample of an unsampled round)."""
    _check_idx("idx_dev", idx_dev, n)
    launch(_fill_range_kernel, blocks_for(n), THREADS, idx_dev, int(n))


def add_leaf_values(raw_dev, k, idx_dev, leaf_start, leaf_stop, leaf_value):
    """``raw_dev[k, idx_dev[i]] += leaf_value[l]`` for ``i`` in each leaf's range
    ``leaf_start[l]:leaf_stop[l]`` (host integer / float64 (L,) arrays, uploaded here
    as two small tables; the ranges share no row, as the grower's leaves): one float64
    add per row, as the CPU's ``add_leaf_values``.  ``raw_dev`` (K, n) float64."""
    k = output_index(k, raw_dev.shape[0])
    start, stop, value = (np.asarray(a) for a in (leaf_start, leaf_stop, leaf_value))
    if not (start.dtype.kind in "iu" and stop.dtype.kind in "iu"
            and value.dtype == np.float64):
        raise TypeError(f"leaf_start / leaf_stop must be integer and leaf_value float64 "
                        f"arrays; got dtypes {start.dtype}, {stop.dtype}, {value.dtype}")
    if not (start.shape == stop.shape == value.shape) or start.ndim != 1:
        raise ValueError(f"leaf_start, leaf_stop, leaf_value must be (L,) arrays of one "
                         f"length; got shapes {start.shape}, {stop.shape}, {value.shape}")
    start, stop = start.astype(np.int64), stop.astype(np.int64)
    if np.any(start < 0) or np.any(stop < start):
        raise ValueError(f"every leaf needs 0 <= leaf_start <= leaf_stop; got "
                         f"leaf_start={start.tolist()}, leaf_stop={stop.tolist()}")
    off = np.concatenate([[0], np.cumsum(stop - start)]).astype(np.int64)
    total = int(off[-1])
    if total == 0:
        return
    _check_idx("idx_dev", idx_dev, int(stop.max()))
    tab = np.ascontiguousarray(np.stack([start, off[:-1]]))
    launch(_add_leaf_values_kernel, blocks_for(total), THREADS, raw_dev, k, idx_dev,
           cuda.to_device(tab), cuda.to_device(value), total)
