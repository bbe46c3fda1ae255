"""The binned-heap batch predictor: its model layout (``heap_layout``) and kernel
(``predict_heaps``).

Layout.  Every threshold a model uses on feature ``f`` is replaced by its rank ``k``
among the distinct thresholds of ``f`` (at most 255), so that ``x > threshold`` is
``bin(x) > k`` with ``bin(x)`` = the number of ``f``'s thresholds below ``x``.  A
missing value gets bin 255 in a column read by nodes that send it right and bin 0 in
a column read by nodes that send it left, so every node is one unsigned byte compare.
Each tree is stored as a complete heap of its depth (children of ``i`` at ``2i + 1``
and ``2i + 2``): a leaf above the bottom continues as "always left" nodes (``k`` = 255)
down to one heap leaf that holds its value.  A node is one uint32: the byte offset of
its column in a row block (column * 64) in the low 24 bits, ``k`` in the top 8.

Kernel.  A thread bins a block of 64 rows into a column-major byte matrix (a
branchless binary search per value), then walks every tree: the first
``_MASK_LEVELS`` levels with 64-bit row masks (one vector compare gives a node's
64 decisions; a node's rows are its parent's rows and-ed with them), the rest row
by row from the heap position those masks give.  Measured on the ``higgs`` model
(200 depth-8 trees, 200k float32 rows, 2 threads): 86 ms against 240 ms for the
node-record walk (``predict.predict_records``), binning 16 ms of it; 5 mask levels
beat 3 (110 ms) and 7 (112 ms).  Outputs are added to each row in tree order, so the
results are bit-identical to the other predictors.

Models it cannot take (deeper than ``MAX_HEAP_DEPTH``, more than 255 distinct
thresholds on a feature, more than ``MAX_COLUMNS`` columns) get ``None`` and are
predicted by the node-record walk.
"""
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ..._dtypes import float32_floor
from ._intrinsics import gt_mask64, or_bits64
from ._jit import parallel_kernel

#: deepest tree stored as a complete heap (2**10 leaves = 8 KB per tree)
MAX_HEAP_DEPTH = 10
#: most byte columns (feature x missing direction) a row block holds (16 KB per block)
MAX_COLUMNS = 256
#: tree levels decided with 64-bit row masks before the per-row walk (measured above)
_MASK_LEVELS = 5
_BLOCK = 64                 # rows per block: one bit of a uint64 mask per row
_SUPER_BLOCK = 1024         # rows a thread bins once and runs through every tree chunk
#: bytes of heaps per tree chunk (kept L2-resident while a super-block walks it)
_CHUNK_BYTES = 512 * 1024
_PASS = np.uint32(255 << 24)  # "always left": column 0, k = 255 (no byte is > 255)


class HeapLayout(NamedTuple):
    thresholds: np.ndarray     # (U, 256) float64: feature u's sorted thresholds, +inf padded
    thresholds32: np.ndarray   # (U, 256) float32: the same rounded down (exact for float32 X)
    feature: np.ndarray        # (U,) int64: X column of used feature u
    column: np.ndarray         # (U, 2) int64: byte column for missing right / left, -1 unused
    n_columns: int
    nodes: np.ndarray          # (sum 2**D - 1,) uint32
    node_offset: np.ndarray    # (T + 1,) int64
    leaves: np.ndarray         # (sum 2**D,) float64
    leaf_offset: np.ndarray    # (T + 1,) int64
    depth: np.ndarray          # (T,) int64
    tree_class: np.ndarray     # (T,) int32
    chunk_ptr: np.ndarray      # (C + 1,) int64 tree chunk bounds


def _fill_heaps(left, right, value, node_word, tree_offset, depth, node_offset, leaf_offset,
                nodes, leaves):
    """Write every tree as a complete heap (see the module docstring), one level of
    all trees at a time."""
    n_trees = depth.shape[0]
    tree = np.arange(n_trees)
    old = tree_offset[:-1].copy()                 # the frontier: nodes at this level
    pos = np.zeros(n_trees, np.int64)             # their heap positions
    lev = 0
    while old.size:
        inner = left[old] >= 0
        o, p, t = old[inner], pos[inner], tree[inner]
        nodes[node_offset[t] + p] = node_word[o]
        o, p, t = old[~inner], pos[~inner], tree[~inner]
        bottom = (p + 1) * (1 << (depth[t] - lev)) - 1   # leftmost heap leaf below
        leaves[leaf_offset[t] + bottom - ((1 << depth[t]) - 1)] = value[o]
        o, p, t = old[inner], pos[inner], tree[inner]
        base = tree_offset[t]
        old = np.concatenate([base + left[o], base + right[o]])
        pos = np.concatenate([2 * p + 1, 2 * p + 2])
        tree = np.concatenate([t, t])
        lev += 1


def _chunks(sizes):
    bounds, acc = [0], 0
    for t, sz in enumerate(sizes):
        if acc and acc + sz > _CHUNK_BYTES:
            bounds.append(t)
            acc = 0
        acc += sz
    bounds.append(len(sizes))
    return np.array(bounds, np.int64)


def heap_layout(feature, threshold, default_left, left, right, value, tree_offset, depth,
                tree_class):
    """The layout for concatenated trees (``bonsai.tree.concat``), or None when the
    model is outside its limits (see the module docstring)."""
    depth = np.asarray(depth, np.int64)
    if depth.size == 0 or depth.max() > MAX_HEAP_DEPTH:
        return None
    internal = np.flatnonzero(left >= 0)
    f_int = feature[internal].astype(np.int64)
    thr = threshold[internal]
    if np.isnan(thr).any():
        return None
    used, f_code = np.unique(f_int, return_inverse=True)
    n_used = used.size
    order = np.lexsort((thr, f_code))
    fs, ts = f_code[order], thr[order]
    new = np.ones(order.size, bool)
    new[1:] = (fs[1:] != fs[:-1]) | (ts[1:] != ts[:-1])
    distinct = np.cumsum(new) - 1                      # global rank of (feature, threshold)
    first = np.searchsorted(fs, np.arange(n_used))      # first sorted entry of each feature
    k_sorted = distinct - distinct[first[fs]]
    if k_sorted.size and k_sorted.max() > 254:
        return None
    k = np.empty(order.size, np.int64)
    k[order] = k_sorted
    tables = np.full((n_used, 256), np.inf)
    tables[fs[new], k_sorted[new]] = ts[new]
    tables32 = float32_floor(tables)
    # byte columns: one per (feature, missing direction) some node reads
    miss_left = (default_left[internal] != 0).astype(np.int64)
    column = np.full((n_used, 2), -1, np.int64)
    column[f_code, miss_left] = 0
    has = column.ravel() >= 0
    n_columns = int(has.sum())
    if n_columns > MAX_COLUMNS:
        return None
    column.ravel()[has] = np.arange(n_columns)
    node_word = np.zeros(left.shape[0], np.uint32)
    node_word[internal] = ((column[f_code, miss_left] * _BLOCK) | (k << 24)).astype(np.uint32)
    n_heap = (1 << depth) - 1
    node_offset = np.concatenate([[0], np.cumsum(n_heap)]).astype(np.int64)
    leaf_offset = np.concatenate([[0], np.cumsum(n_heap + 1)]).astype(np.int64)
    nodes = np.full(node_offset[-1], _PASS, np.uint32)
    leaves = np.zeros(leaf_offset[-1])
    _fill_heaps(left.astype(np.int64), right.astype(np.int64), value.astype(np.float64),
                node_word, np.asarray(tree_offset, np.int64), depth, node_offset,
                leaf_offset, nodes, leaves)
    return HeapLayout(tables, np.ascontiguousarray(tables32), used, column, n_columns, nodes,
                      node_offset, leaves, leaf_offset, depth,
                      np.asarray(tree_class, np.int32), _chunks(4 * n_heap + 8 * (n_heap + 1)))


@njit(cache=True, nogil=True, forceinline=True)
def _bin_of(tables, u, x):
    """Number of feature ``u``'s thresholds below ``x``: a branchless binary search
    over its 256-entry table (+inf padded), 8 dependent steps."""
    i = 0
    i += 128 * (tables[u, i + 127] < x)
    i += 64 * (tables[u, i + 63] < x)
    i += 32 * (tables[u, i + 31] < x)
    i += 16 * (tables[u, i + 15] < x)
    i += 8 * (tables[u, i + 7] < x)
    i += 4 * (tables[u, i + 3] < x)
    i += 2 * (tables[u, i + 1] < x)
    i += 1 * (tables[u, i] < x)
    return i


@njit(cache=True, nogil=True, forceinline=True)
def _put_bins(xb, xo, c_right, c_left, j, x, b):
    """Row ``j``'s byte in the block's missing-right (NaN -> 255) and missing-left
    (NaN -> 0) columns of its feature, where the model reads them."""
    nan = x != x
    if c_right >= 0:
        xb[xo + c_right * _BLOCK + j] = 255 if nan else b
    if c_left >= 0:
        xb[xo + c_left * _BLOCK + j] = 0 if nan else b


@parallel_kernel
def predict_heaps(X, tables, feature, column, n_columns, nodes, node_offset, leaves,
                  leaf_offset, depth, tree_class, chunk_ptr, out):
    """Add every tree's output to ``out`` (see the module docstring).

    X : (n, F) float32/float64, IN ; tables : (U, 256) of X's dtype ; out : (n, K)
    float64, IN/OUT ; the rest as in ``HeapLayout``.
    """
    n = X.shape[0]
    n_out = out.shape[1]
    n_used = feature.shape[0]
    n_super = (n + _SUPER_BLOCK - 1) // _SUPER_BLOCK
    low = np.uint32((1 << 24) - 1)
    shift = np.uint32(24)
    one = np.uint32(1)
    every = ~np.uint64(0)
    for sb in prange(n_super):
        s0 = sb * _SUPER_BLOCK
        s1 = min(n, s0 + _SUPER_BLOCK)
        n_blocks = (s1 - s0 + _BLOCK - 1) // _BLOCK
        block_bytes = max(n_columns, 1) * _BLOCK
        xb = np.zeros(n_blocks * block_bytes, np.uint8)
        acc = np.zeros((n_out, n_blocks * _BLOCK))
        sel = np.empty(2 << _MASK_LEVELS, np.uint64)
        go = np.empty(_MASK_LEVELS, np.uint64)
        bits = np.empty(_BLOCK, np.uint8)
        pos = np.empty(_BLOCK, np.uint32)
        for b in range(n_blocks):
            r0 = s0 + b * _BLOCK
            nb = min(s1, r0 + _BLOCK) - r0
            xo = b * block_bytes
            for u in range(n_used):
                f = feature[u]
                c_right = column[u, 0]
                c_left = column[u, 1]
                j = 0
                while j < nb:
                    if j + 4 <= nb:       # four independent searches in flight
                        _put_bins(xb, xo, c_right, c_left, j, X[r0 + j, f],
                                  _bin_of(tables, u, X[r0 + j, f]))
                        _put_bins(xb, xo, c_right, c_left, j + 1, X[r0 + j + 1, f],
                                  _bin_of(tables, u, X[r0 + j + 1, f]))
                        _put_bins(xb, xo, c_right, c_left, j + 2, X[r0 + j + 2, f],
                                  _bin_of(tables, u, X[r0 + j + 2, f]))
                        _put_bins(xb, xo, c_right, c_left, j + 3, X[r0 + j + 3, f],
                                  _bin_of(tables, u, X[r0 + j + 3, f]))
                        j += 4
                    else:
                        _put_bins(xb, xo, c_right, c_left, j, X[r0 + j, f],
                                  _bin_of(tables, u, X[r0 + j, f]))
                        j += 1
            for k in range(n_out):
                for j in range(nb):
                    acc[k, b * _BLOCK + j] = out[r0 + j, k]
        for c in range(chunk_ptr.shape[0] - 1):
            for b in range(n_blocks):
                blk = xb[b * block_bytes:(b + 1) * block_bytes]
                a0 = b * _BLOCK
                for t in range(chunk_ptr[c], chunk_ptr[c + 1]):
                    nb0 = node_offset[t]
                    d_all = depth[t]
                    d_mask = min(d_all, _MASK_LEVELS)
                    sel[0] = every
                    for d in range(d_mask):
                        h = (1 << d) - 1
                        g = np.uint64(0)
                        for i in range(h, 2 * h + 1):
                            q = nodes[nb0 + i]
                            s = sel[i]
                            m = gt_mask64(blk, q & low, q >> shift) & s
                            g |= m
                            sel[2 * i + 1] = s ^ m
                            sel[2 * i + 2] = m
                        go[d] = g
                    bits[:] = 0
                    for d in range(d_mask):
                        or_bits64(bits, go[d], d_mask - 1 - d)
                    first = np.uint32((1 << d_mask) - 1)
                    for j in range(_BLOCK):
                        pos[j] = first + np.uint32(bits[j])
                    for _ in range(d_mask, d_all):
                        for j in range(_BLOCK):
                            q = nodes[nb0 + pos[j]]
                            pos[j] = 2 * pos[j] + one + np.uint32(blk[(q & low) + j] > (q >> shift))
                    lb = leaf_offset[t] - (node_offset[t + 1] - nb0)
                    ak = acc[tree_class[t]]
                    for j in range(_BLOCK):
                        ak[a0 + j] += leaves[lb + pos[j]]
        for b in range(n_blocks):
            r0 = s0 + b * _BLOCK
            nb = min(s1, r0 + _BLOCK) - r0
            for k in range(n_out):
                for j in range(nb):
                    out[r0 + j, k] = acc[k, b * _BLOCK + j]
