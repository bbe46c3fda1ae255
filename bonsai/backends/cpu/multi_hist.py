"""CPU kernels of vector-leaf histograms (``multi_strategy="multi_output_tree"``):
K-output integer cells, their fill over a level's nodes, sibling subtraction and
cell sums.

Cells: a row's ``gh[r]`` holds ``C = 2K`` int64 values, ``[g_0, h_0, g_1, h_1, ...]``:
output k's fixed-point gradient and its packed ``hess * 2**count_bits + 1`` (the
single-output cell of ``bonsai._dtypes``, once per output, every hessian channel
carrying the row count).  When every output has the same hessians
(``multi_squared_error``: 1, or the row's weight) the cells are the shared-hessian
layout ``[g_0, h, g_1, ..., g_{K-1}]``, ``C = K + 1`` (``gcol`` / ``hcol``): the same
integers in fewer columns, so the same trees, with 9 instead of 16 values a row and
feature to add at K = 8.  Each output has its own power-of-two scales (``Scales``
per output, from ``tree_scales``), so a K = 1 fit has exactly the single-output cells.
A histogram is ``hist[slot, bin, c]``; every cell is an integer sum, exact in any
order, so a fill's bits do not depend on threads or on how rows were cut.

The fill (``fill_dense`` / ``fill_sparse``) runs over tasks: a task is one node's
rows and a contiguous range of its features, and writes only that node's cells of
those features, so tasks never share a cell and no merge is needed.  The level's
work (rows x features) is cut into one equal part per thread (``plan_tasks``), so a
node gets a share of the threads by its rows (the design document's lesson) and
small nodes are packed whole onto one thread.  Each task reads its rows' ``2K`` cells once
and adds them to its features' bins (row build); over the sparse-rows layout a task
walks each row's stored entries and keeps those of its features, then restores the
default bins from the node's totals.
"""
import numpy as np
from numba import njit, prange

from ._intrinsics import prefetch_cell
from ._jit import parallel_kernel


@njit(cache=True, nogil=True, inline="always")
def gcol(k, n_chan, n_out):
    """The cell column of output k's gradient: ``2k`` (a hessian per output), or
    ``k + (k > 0)`` in the shared-hessian layout ``[g_0, h, g_1, ..., g_{K-1}]``
    (``n_chan == K + 1``; with K = 1 the two layouts are one)."""
    if n_chan == 2 * n_out:
        return 2 * k
    return k + 1 if k > 0 else 0


@njit(cache=True, nogil=True, inline="always")
def hcol(k, n_chan, n_out):
    """The cell column of output k's packed hessian and count (``gcol``'s layouts)."""
    if n_chan == 2 * n_out:
        return 2 * k + 1
    return 1


@parallel_kernel
def quantize_multi(grad, hess, scale_g, scale_h, count_bits, out):
    """``out[i, gcol(k)] = rint(grad[k, i] * scale_g[k])``, ``out[i, hcol(k)] =
    rint(hess[k, i] * scale_h[k]) * 2**count_bits + 1`` (the single-output
    ``quantize_gradients`` per output).  With ``out`` of K + 1 columns (the
    shared-hessian layout: every output's hessians are the same, as for
    ``multi_squared_error``) output 0's hessian is the one written.

    grad, hess : (K, n) float32, IN ; scale_g, scale_h : (K,) float64 ;
    out : (n, 2K) or (n, K + 1) int64, OUT
    """
    one = np.int64(1)
    n_out = grad.shape[0]
    n_chan = out.shape[1]
    n_h = n_out if n_chan == 2 * n_out else 1
    for i in prange(grad.shape[1]):
        for k in range(n_out):
            out[i, gcol(k, n_chan, n_out)] = np.int64(np.rint(np.float64(grad[k, i])
                                                              * scale_g[k]))
        for k in range(n_h):
            out[i, hcol(k, n_chan, n_out)] = (
                np.int64(np.rint(np.float64(hess[k, i]) * scale_h[k])) << count_bits) + one


@njit(cache=True, nogil=True)
def _worker_of(u, total, n_workers):
    """The worker of work unit ``u`` on a line of ``total`` units cut in equal parts."""
    if total <= 0.0:
        return np.int64(0)
    return min(np.int64(n_workers - 1), np.int64(u * n_workers / total))


@njit(cache=True, nogil=True)
def plan_tasks(starts, stops, n_features, n_workers, min_rows):
    """Tasks of a fill, cut so every worker gets the same work (rows x features).

    The level's nodes, in order, make one line of ``sum(rows) * n_features`` units,
    cut into ``n_workers`` equal parts; each (node, feature) goes to the worker of its
    midpoint unit (a node below ``min_rows`` rows goes whole to the worker of its
    midpoint), and a task is a run of one node's features with one worker: (node,
    first feature, end feature).  Returns ``(node, f0, f1, wptr)``: worker w's tasks
    are ``wptr[w]:wptr[w + 1]``.  A node without rows still gets a task (its cells
    are zeroed).  Tasks never share a (node, feature), so they never share a cell."""
    m = starts.shape[0]
    F = np.int64(n_features)
    total = 0.0
    for i in range(m):
        total += float(stops[i] - starts[i]) * F
    cap = m + 2 * n_workers
    node = np.empty(cap, np.int64)
    f0 = np.empty(cap, np.int64)
    f1 = np.empty(cap, np.int64)
    worker = np.empty(cap, np.int64)
    t = 0
    c0 = 0.0
    for i in range(m):
        rows = float(stops[i] - starts[i])
        w_first = _worker_of(c0 + 0.5 * rows, total, n_workers)
        w_last = _worker_of(c0 + (F - 0.5) * rows, total, n_workers)
        if w_first == w_last or rows < min_rows:
            w_node = _worker_of(c0 + 0.5 * rows * F, total, n_workers)
            node[t], f0[t], f1[t], worker[t] = i, 0, F, w_node
            t += 1
        else:
            fa = np.int64(0)
            wa = w_first
            for f in range(1, F + 1):
                wf = wa if f == F else _worker_of(c0 + (f + 0.5) * rows, total, n_workers)
                if wf != wa or f == F:
                    node[t], f0[t], f1[t], worker[t] = i, fa, f, wa
                    t += 1
                    fa = f
                    wa = wf
        c0 += rows * F
    wptr = np.zeros(n_workers + 1, np.int64)
    for j in range(t):
        wptr[worker[j] + 1] += 1
    for j in range(n_workers):
        wptr[j + 1] += wptr[j]
    return node[:t], f0[:t], f1[:t], wptr


#: rows ahead whose cells and bins a fill prefetches (a 25%-of-rows node, 100k x 50,
#: K = 8, one thread: 7.8 -> 6.0 ns per row and feature, measured in CPU time)
PREFETCH_DISTANCE = 16


@njit(cache=True, nogil=True, forceinline=True)
def _prefetch(X, row_off, col, w, gh, r):
    """Prefetch row ``r``'s cells (every 64 bytes) and its bins of the task's first
    and last feature."""
    for c in range(0, gh.shape[1], 8):
        prefetch_cell(gh, r, c)
    prefetch_cell(X, row_off[0] + r, col[0])
    prefetch_cell(X, row_off[w - 1] + r, col[w - 1])


@njit(cache=True, nogil=True)
def _fill_dense_task(X, width, n_rows, feat_off, gh, idx, start, stop, H, fa, fb, one_block):
    """One task of ``fill_dense``: rows ``idx[start:stop]``, features ``fa:fb``."""
    n_chan = gh.shape[1]
    for b in range(feat_off[fa], feat_off[fb]):
        for c in range(n_chan):
            H[b, c] = 0
    w = fb - fa
    row_off = np.empty(w, np.int64)      # where feature fa + q's block starts in X
    col = np.empty(w, np.int64)
    for q in range(w):
        row_off[q] = ((fa + q) // width) * n_rows
        col[q] = (fa + q) % width
    fo = feat_off[fa:fb]
    for j in range(start, stop):
        if j + PREFETCH_DISTANCE < stop:
            _prefetch(X, row_off, col, w, gh, np.int64(idx[j + PREFETCH_DISTANCE]))
        r = np.int64(idx[j])
        if one_block:       # plain row-major bins: no per-feature block lookup
            for q in range(w):
                b = fo[q] + np.int64(X[r, fa + q])
                for c in range(n_chan):
                    H[b, c] += gh[r, c]
        else:
            for q in range(w):
                b = fo[q] + np.int64(X[row_off[q] + r, col[q]])
                for c in range(n_chan):
                    H[b, c] += gh[r, c]


@parallel_kernel
def fill_dense(X, width, n_rows, feat_off, gh, idx, starts, stops, slots, t_node, t_f0, t_f1,
               wptr, hist):
    """Fill ``hist[slots[i]]`` from rows ``idx[starts[i]:stops[i]]`` over the dense
    blocked bins ``X`` (value (r, f) at ``X[(f // width) * n_rows + r, f % width]``,
    ``bonsai.backends.cpu.layout``): worker w (one loop iteration) runs tasks
    ``wptr[w]:wptr[w + 1]`` (``plan_tasks``), task t node ``t_node[t]``'s features
    ``t_f0[t]:t_f1[t]``.  The tasks' cells are zeroed first."""
    one_block = X.shape[1] >= feat_off.shape[0] - 1
    for w in prange(wptr.shape[0] - 1):
        for t in range(wptr[w], wptr[w + 1]):
            i = t_node[t]
            _fill_dense_task(X, width, n_rows, feat_off, gh, idx, starts[i], stops[i],
                             hist[slots[i]], t_f0[t], t_f1[t], one_block)


@njit(cache=True, nogil=True)
def _fill_sparse_task(ptr, gidx, default_bin, feat_off, gh, idx, start, stop, H, fa, fb):
    """One task of ``fill_sparse``: rows ``idx[start:stop]``, features ``fa:fb``."""
    n_chan = gh.shape[1]
    lo = feat_off[fa]
    hi = feat_off[fb]
    for b in range(lo, hi):
        for c in range(n_chan):
            H[b, c] = 0
    tot = np.zeros(n_chan, np.int64)
    for j in range(start, stop):
        r = np.int64(idx[j])
        for c in range(n_chan):
            tot[c] += gh[r, c]
        for e in range(ptr[r], ptr[r + 1]):
            b = np.int64(gidx[e])
            if b >= lo and b < hi:
                for c in range(n_chan):
                    H[b, c] += gh[r, c]
    for f in range(fa, fb):
        d = feat_off[f] + default_bin[f]
        for c in range(n_chan):
            s = tot[c]
            for b in range(feat_off[f], feat_off[f + 1]):
                if b != d:
                    s -= H[b, c]
            H[d, c] = s


@parallel_kernel
def fill_sparse(ptr, gidx, default_bin, feat_off, gh, idx, starts, stops, slots, t_node, t_f0,
                t_f1, wptr, hist):
    """``fill_dense`` over the sparse-rows layout: row r lists the global bins of its
    cells outside the features' default bins in ``gidx[ptr[r]:ptr[r+1]]``; a task adds
    the entries of its features, sums its rows' cells, and sets each feature's
    default bin to the node total minus the feature's other bins (exact: integers)."""
    for w in prange(wptr.shape[0] - 1):
        for t in range(wptr[w], wptr[w + 1]):
            i = t_node[t]
            _fill_sparse_task(ptr, gidx, default_bin, feat_off, gh, idx, starts[i], stops[i],
                              hist[slots[i]], t_f0[t], t_f1[t])


@parallel_kernel
def subtract(hist, dst, src):
    """``hist[dst[i]] -= hist[src[i]]`` (the larger child = parent - smaller child)."""
    n_bins = hist.shape[1]
    n_chan = hist.shape[2]
    chunk = 4096
    per = (n_bins + chunk - 1) // chunk
    for t in prange(dst.shape[0] * per):
        i = t // per
        a = (t % per) * chunk
        b = min(n_bins, a + chunk)
        D = hist[dst[i]]
        S = hist[src[i]]
        for q in range(a, b):
            for c in range(n_chan):
                D[q, c] -= S[q, c]


@njit(cache=True, nogil=True)
def node_cells(H, feat_off, out):
    """A node's total cells ``out (C,)``: the sum of feature 0's bins (every feature's
    bins, its missing bin included, add up to the node total)."""
    for c in range(out.shape[0]):
        out[c] = 0
    for b in range(feat_off[0], feat_off[1]):
        for c in range(out.shape[0]):
            out[c] += H[b, c]


@njit(cache=True, nogil=True)
def range_cells(hist, slots, lo, hi, extra, out):
    """Cells of bins ``lo..hi-1`` (plus bin ``extra`` when >= 0) per slot, ``out (m, C)``."""
    for i in range(slots.shape[0]):
        H = hist[slots[i]]
        for c in range(out.shape[1]):
            out[i, c] = 0
        for b in range(lo, hi):
            for c in range(out.shape[1]):
                out[i, c] += H[b, c]
        if extra >= 0:
            for c in range(out.shape[1]):
                out[i, c] += H[extra, c]


@njit(cache=True, nogil=True)
def bits_cells(hist, slots, base, nv, bits, out):
    """Cells of the value bins ``base + b`` whose bit ``b`` is set in ``bits`` (uint64
    words), per slot, ``out (m, C)``."""
    for i in range(slots.shape[0]):
        H = hist[slots[i]]
        for c in range(out.shape[1]):
            out[i, c] = 0
        for b in range(nv):
            if (bits[b >> 6] >> np.uint64(b & 63)) & np.uint64(1):
                for c in range(out.shape[1]):
                    out[i, c] += H[base + b, c]


@njit(cache=True, nogil=True)
def decode3(cells, count_bits, out):
    """The single-output (grad, hess, count) triple of output 0 of ``cells (m, C)``
    (the node table's ``sums`` columns), ``out (m, 3)``."""
    mask = (np.int64(1) << count_bits) - 1
    for i in range(cells.shape[0]):
        out[i, 0] = cells[i, 0]
        out[i, 1] = cells[i, 1] >> count_bits
        out[i, 2] = cells[i, 1] & mask
