"""CPU kernels of scipy.sparse input, which is never made dense: bin thresholds from a
column's non-zeros, bin codes of the non-zeros, the two sparse bin stores a sparse
fit reads (rows for the histograms and binned prediction, columns for the partition),
the partition over the column store, binned prediction over the row store, and the
scatter of CSR rows into a scratch of the features a model uses.

Bins.  An entry the input does not list is the value 0.0 (not missing); an explicit
NaN is missing.  Feature f's *zero bin* is the bin of 0.0.  Both stores list only the
cells whose bin is not the zero bin (``bonsai.sparse.SparseBins``):

* rows: ``gidx[ptr[r]:ptr[r+1]]`` the global histogram indices ``feat_off[f] + bin``
  of row r's listed cells, in feature order (the ``SparseRows`` histogram layout with
  the zero bins as its default bins);
* columns: ``col_rows[col_ptr[f]:col_ptr[f+1]]`` the ascending rows of feature f's
  listed cells and ``col_bins`` their bins.
"""
import numpy as np
from numba import njit, prange

from ._jit import parallel_kernel
from .binning import _bin_of
from .thresholds import _distinct, greedy_thresholds
from .partition import task_places
from .predict import _in_set

_ROWS = 1024
#: columns with fewer listed values than this are sorted by numba's sort
_SMALL_SORT = 4096


@parallel_kernel
def column_thresholds(col_ptr, row_idx, data, m, weights, max_bin, thr_cap, out_thr, out_count):
    """Bin thresholds of every column of a CSC sample of ``m`` rows, equal to the dense
    sketch's (``binning.find_thresholds``) over the same rows: the distinct explicit
    non-NaN values with their weights, and 0.0 with the weight of the rows the column
    does not list.

    col_ptr (F + 1,), row_idx (nnz,) : the sample's CSC structure, IN ; data (nnz,)
    float32/float64, IN ; weights (m,) float64 or None (all 1), IN ; thr_cap (F + 1,)
    int64, IN : feature f writes its thresholds from ``out_thr[thr_cap[f]]``, room for
    ``min(max_bin - 1, listed entries)`` of them (its distinct values, 0.0 included,
    are at most one more than its listed entries) ; out_thr (thr_cap[-1],) float64,
    OUT ; out_count (F,) int64, OUT
    """
    n_features = col_ptr.shape[0] - 1
    total = np.float64(m)
    if weights is not None:
        total = 0.0
        for j in range(m):
            total += weights[j]
    for f in prange(n_features):
        c0 = col_ptr[f]
        c1 = col_ptr[f + 1]
        k = c1 - c0
        vals = np.empty(k + 1)
        wts = np.empty(k + 1)
        col = np.empty(k)
        wcol = np.empty(k if weights is not None else 0)
        listed_w = 0.0
        n_v = 0
        for p in range(c0, c1):
            w = 1.0 if weights is None else weights[row_idx[p]]
            listed_w += w
            v = np.float64(data[p])
            if v == v:
                col[n_v] = v
                if weights is not None:
                    wcol[n_v] = w
                n_v += 1
        zero_w = np.float64(m - k) if weights is None else total - listed_w
        if weights is None and n_v < _SMALL_SORT:
            # short columns: a plain sort (a radix sort's fixed passes over 2048
            # buckets cost more than the column), then the distinct values counted
            c = col[:n_v]
            c.sort()
            nd = 0
            for j in range(n_v):
                if nd > 0 and c[j] == vals[nd - 1]:
                    wts[nd - 1] += 1.0
                else:
                    vals[nd] = c[j]
                    wts[nd] = 1.0
                    nd += 1
        elif weights is None:
            nd = _distinct(col[:n_v], None, vals, wts)
        else:
            nd = _distinct(col[:n_v], wcol[:n_v], vals, wts)
        if m - k > 0:            # the implicit zeros: one more weighted value 0.0
            p = 0
            while p < nd and vals[p] < 0.0:
                p += 1
            if p < nd and vals[p] == 0.0:
                wts[p] += zero_w
            else:
                for q in range(nd, p, -1):
                    vals[q] = vals[q - 1]
                    wts[q] = wts[q - 1]
                vals[p] = 0.0
                wts[p] = zero_w
                nd += 1
        out_count[f] = greedy_thresholds(vals[:nd], wts[:nd], max_bin,
                                         out_thr[thr_cap[f]:thr_cap[f + 1]])


@njit(cache=True, nogil=True)
def zero_bins(thresholds, thr_offsets, out):
    """``out[f]``: the bin of 0.0 in feature f."""
    for f in range(out.shape[0]):
        t0 = thr_offsets[f]
        out[f] = _bin_of(0.0, thresholds, t0, thr_offsets[f + 1] - t0)


@parallel_kernel
def row_counts(indptr, indices, data, thresholds, thr_offsets, zero_bin, out):
    """``out[r]``: row r's entries whose bin is not their feature's zero bin."""
    n = indptr.shape[0] - 1
    for c in prange((n + _ROWS - 1) // _ROWS):
        for r in range(c * _ROWS, min(n, (c + 1) * _ROWS)):
            k = 0
            for p in range(indptr[r], indptr[r + 1]):
                f = indices[p]
                t0 = thr_offsets[f]
                b = _bin_of(np.float64(data[p]), thresholds, t0, thr_offsets[f + 1] - t0)
                k += b != zero_bin[f]
            out[r] = k


@parallel_kernel
def row_fill(indptr, indices, data, thresholds, thr_offsets, zero_bin, feat_off, ptr, out):
    """The row store: row r's cells outside the zero bins as ``feat_off[f] + bin`` in
    ``out[ptr[r]:ptr[r+1]]`` (in the input's column order: sorted indices give feature
    order)."""
    n = indptr.shape[0] - 1
    for c in prange((n + _ROWS - 1) // _ROWS):
        for r in range(c * _ROWS, min(n, (c + 1) * _ROWS)):
            q = ptr[r]
            for p in range(indptr[r], indptr[r + 1]):
                f = indices[p]
                t0 = thr_offsets[f]
                b = _bin_of(np.float64(data[p]), thresholds, t0, thr_offsets[f + 1] - t0)
                if b != zero_bin[f]:
                    out[q] = feat_off[f] + b
                    q += 1


@njit(cache=True, nogil=True)
def columns_of_rows(ptr, gidx, bin_feature, feat_off, col_ptr, col_rows, col_bins):
    """The column store of the row store (one serial pass, so each column's rows come
    out ascending).  bin_feature (n_bins_total,) : the feature of each global bin, IN;
    col_ptr (F + 1,) int64, col_rows (nnz,) uint32, col_bins (nnz,) uint8/uint16, OUT"""
    n_features = col_ptr.shape[0] - 1
    col_ptr[:] = 0
    for p in range(gidx.shape[0]):
        col_ptr[bin_feature[gidx[p]] + 1] += 1
    for f in range(n_features):
        col_ptr[f + 1] += col_ptr[f]
    pos = col_ptr[:-1].copy()
    for r in range(ptr.shape[0] - 1):
        for p in range(ptr[r], ptr[r + 1]):
            g = np.int64(gidx[p])
            f = bin_feature[g]
            q = pos[f]
            col_rows[q] = r
            col_bins[q] = g - feat_off[f]
            pos[f] = q + 1


@parallel_kernel
def take_row_counts(ptr, rows, out):
    """``out[i]``: the listed cells of row ``rows[i]``."""
    for i in prange(rows.shape[0]):
        out[i] = ptr[rows[i] + 1] - ptr[rows[i]]


@parallel_kernel
def take_rows_fill(ptr, gidx, rows, new_ptr, out):
    """The row store of rows ``rows`` (in that order): ``out[new_ptr[i]:new_ptr[i+1]]``."""
    for i in prange(rows.shape[0]):
        q = new_ptr[i]
        for p in range(ptr[rows[i]], ptr[rows[i] + 1]):
            out[q] = gidx[p]
            q += 1


@njit(cache=True, nogil=True, inline="always")
def _lower_bound(a, lo, hi, x):
    """First position in ``a[lo:hi]`` (ascending) whose value is >= x (hi if none)."""
    while lo < hi:
        mid = (lo + hi) >> 1
        if a[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


@parallel_kernel
def partition_nodes_csc(col_ptr, col_rows, col_bins, zero_bin, idx, tmp, task_node,
                        task_start, task_stop, thread_ptr, node_feature, node_bin,
                        node_default_left, node_missing_bin, node_bits, task_nleft,
                        out_node_nleft):
    """``partition.partition_nodes`` over the column store: a row's bin of the split
    feature is its listed cell, found by walking the column's ascending rows beside the
    node's ascending rows (a binary search where the rows step back), or the zero bin.
    Same arguments and results as the dense kernel, ``X_cols`` replaced by the store
    (``col_ptr``, ``col_rows``, ``col_bins``, ``zero_bin``)."""
    n_threads = thread_ptr.shape[0] - 1
    for j in prange(n_threads):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            nd = task_node[t]
            f = node_feature[nd]
            c0 = col_ptr[f]
            c1 = col_ptr[f + 1]
            zb = zero_bin[f]
            tb = node_bin[nd]
            mb = node_missing_bin[nd]
            dl = node_default_left[nd] != 0
            bits = node_bits[nd]
            lp = task_start[t]
            rp = task_stop[t]
            p = c0
            prev = np.int64(-1)
            for i in range(task_start[t], task_stop[t]):
                r = np.int64(idx[i])
                if r < prev:
                    p = _lower_bound(col_rows, c0, c1, r)
                elif p < c1 and np.int64(col_rows[p]) < r:
                    if c1 - p > 16 and np.int64(col_rows[p + 16]) < r:
                        p = _lower_bound(col_rows, p + 16, c1, r)
                    else:
                        while p < c1 and np.int64(col_rows[p]) < r:
                            p += 1
                prev = r
                b = np.int64(zb)
                if p < c1 and np.int64(col_rows[p]) == r:
                    b = np.int64(col_bins[p])
                if tb < 0:
                    gl = ((bits[b >> 6] >> np.uint64(b & 63)) & np.uint64(1)) != 0
                else:
                    gl = (b <= tb) or (b == mb and dl)
                if gl:
                    tmp[lp] = idx[i]
                    lp += 1
                else:
                    rp -= 1
                    tmp[rp] = idx[i]
            task_nleft[t] = lp - task_start[t]
    left_pos, right_pos = task_places(task_node, task_start, task_stop, task_nleft,
                                      out_node_nleft)
    for j in prange(n_threads):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            a = task_start[t]
            nl = task_nleft[t]
            nr = task_stop[t] - a - nl
            end = task_stop[t] - 1
            for k in range(nl):
                idx[left_pos[t] + k] = tmp[a + k]
            for k in range(nr):
                idx[right_pos[t] + k] = tmp[end - k]


@njit(cache=True, nogil=True, inline="always")
def _row_store_leaf(ptr, gidx, feat_off, zero_bin, r, feature, bin_threshold, default_left,
                    missing_bin, left, right, cat_ptr, cat_words):
    """The leaf row ``r`` of the row store reaches in one tree: a row's bin of feature
    f is its listed cell in ``[feat_off[f], feat_off[f+1])`` (a binary search of the
    row's cells, in feature order), or f's zero bin."""
    k0 = np.int64(ptr[r])
    k1 = np.int64(ptr[r + 1])
    node = 0
    while left[node] >= 0:
        f = feature[node]
        lo = feat_off[f]
        q = _lower_bound(gidx, k0, k1, lo)
        b = np.int64(zero_bin[f])
        if q < k1 and np.int64(gidx[q]) < feat_off[f + 1]:
            b = np.int64(gidx[q]) - lo
        p0 = cat_ptr[node]
        p1 = cat_ptr[node + 1]
        if p1 > p0:
            go_left = _in_set(np.float64(b), p0, p1, cat_words)
        elif b == missing_bin[f]:
            go_left = default_left[node] != 0
        else:
            go_left = b <= bin_threshold[node]
        node = left[node] if go_left else right[node]
    return node


@parallel_kernel
def predict_binned_add_rows(ptr, gidx, feat_off, zero_bin, rows, feature, bin_threshold,
                            default_left, missing_bin, left, right, value, cat_ptr, cat_words,
                            out):
    """``predict.predict_binned_add`` over the row store (``_row_store_leaf``)."""
    for i in prange(rows.shape[0]):
        r = rows[i]
        node = _row_store_leaf(ptr, gidx, feat_off, zero_bin, r, feature, bin_threshold,
                               default_left, missing_bin, left, right, cat_ptr, cat_words)
        out[r] += value[node]


@parallel_kernel
def predict_binned_add_rows_vec(ptr, gidx, feat_off, zero_bin, rows, feature, bin_threshold,
                                default_left, missing_bin, left, right, value, cat_ptr,
                                cat_words, out):
    """``predict_binned_add_rows`` of a vector-leaf tree: value (n_nodes, K), out (K, n)
    (``predict.predict_binned_add_vec``)."""
    for i in prange(rows.shape[0]):
        r = rows[i]
        node = _row_store_leaf(ptr, gidx, feat_off, zero_bin, r, feature, bin_threshold,
                               default_left, missing_bin, left, right, cat_ptr, cat_words)
        for k in range(value.shape[1]):
            out[k, r] += value[node, k]


@njit(cache=True, nogil=True)
def scatter_rows(indptr, indices, data, r0, r1, col_map, out):
    """``out[r - r0, col_map[f]] = X[r, f]`` for the listed entries of rows ``r0:r1``
    whose feature has a column (``col_map[f] >= 0``); ``out`` is zero elsewhere (the
    caller's scratch, cleared again by ``clear_rows``)."""
    for r in range(r0, r1):
        for p in range(indptr[r], indptr[r + 1]):
            c = col_map[indices[p]]
            if c >= 0:
                out[r - r0, c] = data[p]


@njit(cache=True, nogil=True)
def clear_rows(indptr, indices, r0, r1, col_map, out):
    """Undo ``scatter_rows``: zero the cells it wrote."""
    for r in range(r0, r1):
        for p in range(indptr[r], indptr[r + 1]):
            c = col_map[indices[p]]
            if c >= 0:
                out[r - r0, c] = 0.0
