"""CPU kernels of the histogram stage: fixed-point gradient quantization, the
row-wise gathered fill (level-batched over per-thread tasks) over the dense blocked
layout or the sparse-rows layout, restoring skipped default bins, slot merging and
sibling subtraction.

Histogram layout: ``hist[slot, offset[f] + bin, channel]`` int64 with channels
``grad`` and ``hess * 2**count_bits + count`` (see ``bonsai._dtypes``).  Every cell is
an integer sum, so a fill does not depend on how rows were split into tasks or
threads, and ``parent - child`` is exactly the sibling's histogram.
"""
import numpy as np
from numba import njit, prange

from ._jit import parallel_kernel

from ._intrinsics import add_cell_pair, prefetch_cell, prefetch_item, prefetch_row

#: rows ahead to prefetch in a gathered fill (16-32 measured best on a 100k-row node:
#: nearer arrives too late, farther is evicted before use; see ``_intrinsics``)
PREFETCH_DISTANCE = 24
#: rows per chunk of ``max_abs`` (at most 64 chunks)
MAX_ABS_CHUNK = 16384


#: the bits of a float32 without its sign, and of +inf (a larger one is a NaN)
_ABS_BITS = np.uint32(0x7FFFFFFF)
_INF_BITS = np.uint32(0x7F800000)


@parallel_kernel
def max_abs(grad, hess, out):
    """``out = [max |grad|, max |hess|]`` (float64), NaN if either holds a NaN.  A
    maximum is exact in any order, so the threads' partial results combine to the
    same value at any thread count; one pass and no ``abs`` temporary (numpy's
    ``np.max(np.abs(g))`` over 900k rows cost about 1 ms per tree).

    The maxima are taken over the float32 bit patterns without the sign bit: for
    finite values and infinities they order as the magnitudes do, and any NaN is above
    +inf's pattern, so an integer maximum (which vectorizes; a float one is a chain of
    dependent compares) finds the largest magnitude and every NaN.

    grad, hess : (n,) float32, C-contiguous, IN ; out : (2,) float64, OUT
    """
    n = grad.shape[0]
    n_chunks = max(1, min(64, n // MAX_ABS_CHUNK))
    part = np.zeros((n_chunks, 2), np.uint32)
    gb = grad.view(np.uint32)
    hb = hess.view(np.uint32)
    for c in prange(n_chunks):
        a = (n * c) // n_chunks
        b = (n * (c + 1)) // n_chunks
        # a chunk as its own slice, read from index 0, and the accumulators kept
        # uint32: LLVM then vectorises the loop.  With ``range(a, b)`` over the whole
        # array (signed indices, so numba adds wraparound checks) and ``gb[i] &
        # _ABS_BITS`` widened to uint64 it stayed scalar: 43k rows, 210 -> 8 us.
        gc = gb[a:b]
        hc = hb[a:b]
        mg = np.uint32(0)
        mh = np.uint32(0)
        for i in range(gc.shape[0]):
            mg = max(mg, np.uint32(gc[i] & _ABS_BITS))
            mh = max(mh, np.uint32(hc[i] & _ABS_BITS))
        part[c, 0] = mg
        part[c, 1] = mh
    top = np.zeros(2, np.uint32)
    for c in range(n_chunks):
        top[0] = max(top[0], part[c, 0])
        top[1] = max(top[1], part[c, 1])
    if top[0] > _INF_BITS or top[1] > _INF_BITS:
        out[0] = np.nan
        out[1] = np.nan
        return
    v = top.view(np.float32)
    out[0] = np.float64(v[0])
    out[1] = np.float64(v[1])


@parallel_kernel
def quantize_gradients(grad, hess, scale_g, scale_h, count_bits, out):
    """``out[i] = (rint(grad[i] * scale_g), rint(hess[i] * scale_h) * 2**count_bits + 1)``.

    Written through a flat view of ``out``: with the 2-D ``out[i, 0]`` LLVM does not
    see that the two cells of a row are adjacent (numba reads the strides at run time),
    and leaves the loop scalar (34k rows: 55 -> 16 us, the same cells).

    grad, hess : (n,) float32, IN ; out : (n, 2) int64, C-contiguous, OUT
    """
    one = np.int64(1)
    cb = np.int64(count_bits)
    flat = out.reshape(out.size)
    for i in prange(grad.shape[0]):
        flat[2 * i] = np.int64(np.rint(np.float64(grad[i]) * scale_g))
        flat[2 * i + 1] = (np.int64(np.rint(np.float64(hess[i]) * scale_h)) << cb) + one


@njit(cache=True, nogil=True, forceinline=True)
def _mix64(z):
    """splitmix64 finalizer: a well-mixed 64-bit hash of ``z`` (uint64)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@parallel_kernel
def quantize_packed(grad, hess, scale_g, scale_h, seed, row0, out):
    """Quantized mode: ``out[i, 0] = g_q * 2**32 + h_q`` with
    ``g_q = floor(grad * scale_g + u)``, ``h_q = floor(hess * scale_h + u')``.

    ``u, u'`` are uniform in [0, 1) from a hash of (seed, global row id ``row0 + i``):
    stochastic rounding (unbiased sums) that depends on the row, never on the thread
    or on how rows are split between shards.  With
    ``|g_q| * n < 2**31`` and ``0 <= h_q``, ``h_q * n < 2**32``, any sum of packed
    values unpacks exactly: ``G = v >> 32``, ``H = v & (2**32 - 1)``.

    grad, hess : (n,) float32, IN ; seed : uint64 ; row0 : int64 ; out : (n, 1) int64, OUT
    """
    golden = np.uint64(0x9E3779B97F4A7C15)
    inv53 = 1.0 / 9007199254740992.0
    for i in prange(grad.shape[0]):
        z = _mix64(seed + np.uint64(row0 + i) * golden)
        z2 = _mix64(z ^ golden)
        u1 = np.float64(z >> np.uint64(11)) * inv53
        u2 = np.float64(z2 >> np.uint64(11)) * inv53
        gq = np.int64(np.floor(np.float64(grad[i]) * scale_g + u1))
        hq = np.int64(np.floor(np.float64(hess[i]) * scale_h + u2))
        out[i, 0] = (gq << np.int64(32)) + hq


@njit(cache=True, nogil=True)
def sample_rows(seed, row0, fraction, out):
    """Row subsampling: ``out[:k]`` = the rows ``i`` (ascending) whose hash of (seed,
    global row id ``row0 + i``) falls below ``fraction``; returns k.  A Bernoulli draw
    per row that depends only on the seed and the global row id: the same rows are
    drawn however the data is split between threads or shards.

    seed : uint64 ; row0 : int64 ; fraction : float64 ; out : (n,) uint32, OUT
    """
    golden = np.uint64(0x9E3779B97F4A7C15)
    inv53 = 1.0 / 9007199254740992.0
    k = 0
    for i in range(out.shape[0]):
        z = _mix64(seed + np.uint64(row0 + i) * golden)
        if np.float64(z >> np.uint64(11)) * inv53 < fraction:
            out[k] = i
            k += 1
    return k


@njit(cache=True, nogil=True, forceinline=True)
def _prefetch_bins(X_binned, row, last):
    """Prefetch every cache line of a row of bins: its first byte, each 64 bytes on,
    and its last byte (a row of B bytes spans up to ceil(B / 64) + 1 lines)."""
    prefetch_row(X_binned, row)
    for o in range(np.uintp(64), last, np.uintp(64)):
        prefetch_cell(X_binned, row, o)
    prefetch_cell(X_binned, row, last)


@njit(cache=True, nogil=True)
def _fill_packed(X_binned, row_base, f_lo, f_hi, feat_off, gh, idx, identity, start, stop, out):
    """One add per (row, feature): the packed quantized cell."""
    width = np.uintp(f_hi - f_lo)
    last = np.uintp(X_binned.shape[1] - 1)  # a row's last byte: its second line if it straddles
    fo = feat_off[f_lo:f_hi]
    pf_stop = np.uintp(max(stop - PREFETCH_DISTANCE, 0))
    for i in range(np.uintp(start), np.uintp(stop)):
        if identity:
            r = i
        else:
            if i < pf_stop:
                r_ahead = idx[i + np.uintp(PREFETCH_DISTANCE)]
                _prefetch_bins(X_binned, row_base + r_ahead, last)
                prefetch_row(gh, r_ahead)
            r = np.uintp(idx[i])
        v = gh[r, 0]
        xr = np.uintp(row_base + r)
        for c in range(width):
            out[np.uintp(fo[c]) + np.uintp(X_binned[xr, c]), 0] += v


@njit(cache=True, nogil=True)
def _fill_range(X_binned, row_base, f_lo, f_hi, feat_off, gh, start, stop, out):
    """Rows ``start..stop-1`` themselves (the root without row sampling): sequential
    reads, no gather, no prefetch needed."""
    # unsigned indices: numba then emits no negative-index wraparound checks
    width = np.uintp(f_hi - f_lo)
    fo = feat_off[f_lo:f_hi]
    for r in range(np.uintp(start), np.uintp(stop)):
        g = gh[r, 0]
        h = gh[r, 1]
        xr = np.uintp(row_base + r)
        for c in range(width):
            add_cell_pair(out, np.uintp(fo[c]) + np.uintp(X_binned[xr, c]), g, h)


@njit(cache=True, nogil=True)
def _fill_rows(X_binned, row_base, f_lo, f_hi, feat_off, gh, idx, start, stop, out):
    """Gathered rows ``idx[start:stop]``, prefetched ``PREFETCH_DISTANCE`` rows ahead,
    every cache line of the row (measured on cold leaf-wise nodes of 1k-50k rows, 1M x
    28: 35 -> 19 ns a row once the second line of straddling rows is prefetched too;
    500k x 90, 64 nodes of a depth-7 level: 10.2 -> 5.7 ms with the middle line)."""
    width = np.uintp(f_hi - f_lo)
    last = np.uintp(X_binned.shape[1] - 1)
    fo = feat_off[f_lo:f_hi]
    pf_stop = np.uintp(max(stop - PREFETCH_DISTANCE, 0))
    for i in range(np.uintp(start), np.uintp(stop)):
        if i < pf_stop:
            r_ahead = idx[i + np.uintp(PREFETCH_DISTANCE)]
            _prefetch_bins(X_binned, row_base + r_ahead, last)
            prefetch_row(gh, r_ahead)
        r = idx[i]
        g = gh[r, 0]
        h = gh[r, 1]
        xr = np.uintp(row_base + r)
        for c in range(width):
            add_cell_pair(out, np.uintp(fo[c]) + np.uintp(X_binned[xr, c]), g, h)


@parallel_kernel
def build_histograms(X_binned, feat_off, gh, packed, idx, identity, task_start, task_stop,
                     task_slot, task_block_lo, task_block_hi, thread_ptr, hist):
    """Fill histogram slots: task ``t`` adds the rows ``idx[task_start:task_stop]`` over
    feature blocks ``task_block_lo..task_block_hi-1`` to slot ``task_slot[t]`` (whose
    bins of those blocks it zeroes first).

    Thread ``j`` runs tasks ``thread_ptr[j]:thread_ptr[j+1]`` in order.  Tasks running
    at once never share a (slot, block) pair.

    Parameters
    ----------
    X_binned : (n_blocks * n, B) uint8/uint16, IN -- the blocked row-major layout of
        ``bonsai.binning``: value (r, f) is at ``[(f // B) * n + r, f % B]``
    feat_off : (F + 1,) int64 bin offsets, IN
    gh : (n, 2) int64 fixed-point (grad, packed hess/count), or (n, 1) int64 packed
        quantized (grad, hess) cells (``quantize_packed``), IN
    packed : None for (n, 2) cells, True for (n, 1) packed cells (None: the packed fill
        is not compiled)
    idx : (n_sampled,) uint32 sample indices, nodes are contiguous ranges, IN
    identity : bool -- ``idx[i] == i`` over every task range (read rows directly)
    task_start, task_stop, task_slot, task_block_lo, task_block_hi : (T,) int64, IN
    thread_ptr : (n_threads + 1,) int64, IN
    hist : (n_slots, n_bins_total, gh.shape[1]) int64, OUT
    """
    n_features = feat_off.shape[0] - 1
    width = X_binned.shape[1]
    n_blocks = (n_features + width - 1) // width
    n = X_binned.shape[0] // n_blocks
    for j in prange(thread_ptr.shape[0] - 1):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            out = hist[task_slot[t]]
            for blk in range(task_block_lo[t], task_block_hi[t]):
                f_lo = blk * width
                f_hi = min(n_features, f_lo + width)
                out[feat_off[f_lo]:feat_off[f_hi], :] = 0
                if packed is not None:
                    _fill_packed(X_binned, blk * n, f_lo, f_hi, feat_off, gh, idx, identity,
                                 task_start[t], task_stop[t], out)
                elif identity:
                    _fill_range(X_binned, blk * n, f_lo, f_hi, feat_off, gh,
                                task_start[t], task_stop[t], out)
                else:
                    _fill_rows(X_binned, blk * n, f_lo, f_hi, feat_off, gh, idx,
                               task_start[t], task_stop[t], out)


@njit(cache=True, nogil=True)
def _fill_sparse(ptr, bins, gh, idx, identity, start, stop, out, tot):
    """Sparse-rows layout: add each row's listed (non-default) cells; ``tot`` (channels,)
    accumulates the rows' own totals, from which the default bins are restored.

    Gathered rows prefetch in two stages: the row pointer ``2 * D`` rows ahead, then
    both ends of the row's cell list and its gradients ``D`` rows ahead.
    """
    two = gh.shape[1] == 2
    d = np.uintp(PREFETCH_DISTANCE)
    pf2 = np.uintp(max(stop - 2 * PREFETCH_DISTANCE, start))
    pf1 = np.uintp(max(stop - PREFETCH_DISTANCE, start))
    t0 = np.int64(0)
    t1 = np.int64(0)
    for i in range(np.uintp(start), np.uintp(stop)):
        if identity:
            r = i
        else:
            if i < pf2:
                prefetch_item(ptr, idx[i + d + d])
            if i < pf1:
                ra = idx[i + d]
                prefetch_item(bins, ptr[ra])
                e = np.uintp(ptr[ra + np.uintp(1)])
                prefetch_item(bins, e - np.uintp(e > np.uintp(ptr[ra])))  # the row's last cell
                prefetch_row(gh, ra)
            r = np.uintp(idx[i])
        k0 = np.uintp(ptr[r])
        k1 = np.uintp(ptr[r + np.uintp(1)])
        g = gh[r, 0]
        t0 += g
        if two:
            h = gh[r, 1]
            t1 += h
            for k in range(k0, k1):
                add_cell_pair(out, np.uintp(bins[k]), g, h)
        else:
            for k in range(k0, k1):
                out[np.uintp(bins[k]), 0] += g
    tot[0] += t0
    if two:
        tot[1] += t1


@parallel_kernel
def build_histograms_sparse(ptr, bins, gh, idx, identity, task_start, task_stop, task_slot,
                            thread_ptr, hist, task_tot):
    """Sparse-rows fill: task ``t`` zeroes slot ``task_slot[t]`` and adds the listed
    cells of rows ``idx[task_start:task_stop]``; ``task_tot[t]`` gets those rows' summed
    (grad, hess) cells.  The default bins stay zero until ``restore_default_bins``.

    Parameters
    ----------
    ptr : (n + 1,) uint32, IN -- row r's cells are ``bins[ptr[r]:ptr[r+1]]``
    bins : (nnz,) uint16 global histogram indices ``feat_off[f] + bin`` of the cells
        whose bin is not feature f's default bin, IN
    gh, idx, identity, task_start, task_stop, task_slot, thread_ptr : as ``build_histograms``
    hist : (n_slots, n_bins_total, channels) int64, OUT
    task_tot : (T, channels) int64, OUT
    """
    for j in prange(thread_ptr.shape[0] - 1):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            out = hist[task_slot[t]]
            out[:, :] = 0
            task_tot[t, :] = 0
            _fill_sparse(ptr, bins, gh, idx, identity, task_start[t], task_stop[t], out,
                         task_tot[t])


@parallel_kernel
def restore_default_bins(hist, slots, totals, feat_off, default_bin):
    """``hist[slots[j], feat_off[f] + default_bin[f]] = totals[j] - (sum of f's other
    bins)`` for every feature: a node's rows fall in exactly one bin of each feature, so
    the skipped bin is the node total minus the rest (exact: integer cells).

    hist : (n_slots, n_bins_total, channels) int64, IN/OUT ; slots : (m,) int64 ;
    totals : (m, channels) int64 ; feat_off : (F + 1,) int64 ; default_bin : (F,) int64
    """
    n_features = feat_off.shape[0] - 1
    for j in prange(slots.shape[0]):
        out = hist[slots[j]]
        for c in range(out.shape[1]):
            for f in range(n_features):
                lo = feat_off[f]
                s = np.int64(0)
                for b in range(lo, feat_off[f + 1]):
                    s += out[b, c]
                out[lo + default_bin[f], c] = totals[j, c] - s


@njit(cache=True, nogil=True)
def _add_into(d, s):
    """``d += s`` over (bins, channels) int64 slots, as plain loops (numba's in-place
    array operators compile a broadcasting ufunc loop and its checks)."""
    for b in range(d.shape[0]):
        for c in range(d.shape[1]):
            d[b, c] += s[b, c]


@njit(cache=True, nogil=True)
def _sub_into(d, s):
    """``d -= s``, as ``_add_into``."""
    for b in range(d.shape[0]):
        for c in range(d.shape[1]):
            d[b, c] -= s[b, c]


@parallel_kernel
def merge_slots(hist, dst_slot, src_ptr, src_slot):
    """``hist[dst_slot[j]] += hist[src]`` for every src in ``src_slot[src_ptr[j]:src_ptr[j+1]]``.

    Integer adds: exact and order-free.
    """
    for j in prange(dst_slot.shape[0]):
        d = hist[dst_slot[j]]
        for p in range(src_ptr[j], src_ptr[j + 1]):
            _add_into(d, hist[src_slot[p]])


@parallel_kernel
def subtract_histograms(hist, parent_slot, child_slot):
    """In place: ``hist[parent_slot[j]] -= hist[child_slot[j]]``; the parent's slot then
    holds the sibling's histogram (exact, integer cells)."""
    for j in prange(parent_slot.shape[0]):
        _sub_into(hist[parent_slot[j]], hist[child_slot[j]])
