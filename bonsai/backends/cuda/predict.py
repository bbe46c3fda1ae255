"""CUDA batch prediction: the device kernels, the ensemble's device-resident copy,
and the host loop that streams a matrix through them in row chunks.

Layout.  The kernels read the flat ensemble of ``bonsai.tree.concat`` (the arrays the
CPU ``predict_nodes`` walks): every tree's nodes concatenated, tree ``t`` owning
nodes ``tree_offset[t]:tree_offset[t+1]``, child indices relative to the tree, a leaf
at ``left == -1``, categorical bitsets as words ``cat_ptr[j]:cat_ptr[j+1]`` of
``cat_words``.  ``DeviceEnsemble`` uploads them once (``bonsai.Booster`` caches it
beside its host ensemble, so a Booster's trees cross the bus once per tree range, and
again only after it gains trees or is reloaded), plus ``class_ptr`` /
``class_trees``: the trees of output ``k`` in tree order,
``class_trees[class_ptr[k]:class_ptr[k+1]]``.

Kernels.  One row per thread, a grid-stride loop (grids from ``_device.blocks_for``).
``predict_raw_kernel`` walks, for each output ``k``, the trees of ``k`` in tree order
and adds their leaf values to a register started from ``out[r, k]``: the same float64
additions in the same order as every CPU predictor (each adds a row's tree outputs in
tree order; ``predict_nodes``, the record walks, the binned heaps and the oblivious
predictor all give the same bits), so GPU margins are bit-identical to the CPU's.  A
lone add cannot be contracted into an FMA, so no ``_device.fadd`` is needed.
``predict_leaf_kernel`` writes each row's leaf index in every model tree
(``predict_leaf``; it walks ``leaf_offset``: a vector-leaf tree, which the ensemble
holds as K scalar views, is walked once, in its first view).
A node decides as the CPU's ``_go_left`` does: a categorical split (non-empty
bitset) sends a row left only when its code is a set bit (NaN, negative and
out-of-range codes go right; a fractional code is truncated), a numeric split sends
NaN the default way and ``x <= threshold`` left, compared in float64 (a float32 input
is widened exactly, as numba does on the CPU).  Oblivious models take the same walk:
their trees are ordinary node arrays too.

Device memory.  The input is uploaded once per call in row chunks: at most
``MAX_CHUNK_ROWS`` rows and ``MAX_CHUNK_BYTES`` bytes of input plus output per chunk
(read at each call), in one buffer pair reused by every chunk; each chunk's results
are copied back once.  Nothing here has been timed on a GPU.
"""
import numpy as np
from numba import cuda

from ._device import THREADS, blocks_for

#: rows of one chunk at most
MAX_CHUNK_ROWS = 1 << 20
#: device bytes of one chunk's input rows plus their outputs at most
MAX_CHUNK_BYTES = 1 << 30


@cuda.jit(device=True)
def _leaf_of(X, r, base, feature, threshold, default_left, left, right, cat_ptr, cat_words):
    """The leaf (tree-relative node index) row ``r`` of ``X`` reaches in the tree
    whose nodes start at ``base`` (the CPU's ``predict._leaf_of``)."""
    node = 0
    while left[base + node] >= 0:
        j = base + node
        x = X[r, feature[j]]
        p0 = cat_ptr[j]
        p1 = cat_ptr[j + 1]
        if p1 > p0:
            go_left = False
            if x >= 0.0 and x < (p1 - p0) * 64:
                k = np.int64(x)
                word = cat_words[p0 + (k >> 6)]
                go_left = ((word >> np.uint64(k & 63)) & np.uint64(1)) != 0
        elif x != x:
            go_left = default_left[j] != 0
        else:
            go_left = x <= threshold[j]
        node = left[j] if go_left else right[j]
    return node


@cuda.jit(cache=True)
def predict_raw_kernel(X, feature, threshold, default_left, left, right, value, cat_ptr,
                       cat_words, tree_offset, class_ptr, class_trees, out):
    """``out[r, k] +=`` the leaf values of output ``k``'s trees, in tree order.

    X : (n, F) float32/float64 ; node arrays as ``bonsai.tree.Ensemble`` ;
    class_ptr : (K + 1,) int64 ; class_trees : (T,) int64 ; out : (n, K) float64, IN/OUT
    """
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for r in range(start, X.shape[0], stride):
        for k in range(out.shape[1]):
            acc = out[r, k]
            for i in range(class_ptr[k], class_ptr[k + 1]):
                base = tree_offset[class_trees[i]]
                node = _leaf_of(X, r, base, feature, threshold, default_left, left, right,
                                cat_ptr, cat_words)
                acc += value[base + node]
            out[r, k] = acc


@cuda.jit(cache=True)
def predict_leaf_kernel(X, feature, threshold, default_left, left, right, cat_ptr, cat_words,
                        tree_offset, out):
    """``out[r, t]``: the leaf (tree-relative node index) row ``r`` reaches in tree
    ``t``.  out : (n, T) int32, OUT"""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for r in range(start, X.shape[0], stride):
        for t in range(out.shape[1]):
            out[r, t] = _leaf_of(X, r, tree_offset[t], feature, threshold, default_left,
                                 left, right, cat_ptr, cat_words)


class DeviceEnsemble:
    """One host ``bonsai.tree.Ensemble`` (``source``) on the device, for a model of
    ``n_outputs`` outputs."""

    def __init__(self, ens, n_outputs):
        self.source = ens
        self.n_outputs = int(n_outputs)
        self.n_trees = int(ens.tree_offset.shape[0] - 1)
        self.n_leaf_trees = int(ens.leaf_offset.shape[0] - 1)   # model trees (pred_leaf)
        if self.n_trees == 0:        # nothing to upload: the predictors return at once
            return
        cls = np.asarray(ens.tree_class, np.int64)
        counts = np.bincount(cls, minlength=self.n_outputs)
        class_ptr = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
        class_trees = np.argsort(cls, kind="stable").astype(np.int64)
        put = cuda.to_device
        self.nodes = tuple(put(np.ascontiguousarray(a)) for a in (
            ens.feature, ens.threshold, ens.default_left, ens.left, ens.right))
        self.value = put(np.ascontiguousarray(ens.value))
        self.cat = (put(np.ascontiguousarray(ens.cat_ptr)),
                    put(np.ascontiguousarray(ens.cat_words)))
        self.tree_offset = put(np.ascontiguousarray(ens.tree_offset))
        self.leaf_offset = (self.tree_offset if np.array_equal(ens.leaf_offset, ens.tree_offset)
                            else put(np.ascontiguousarray(ens.leaf_offset)))
        self.classes = (put(class_ptr), put(class_trees))


def chunk_rows(row_bytes):
    """Rows per chunk for rows of ``row_bytes`` device bytes (input plus output)."""
    return int(max(1, min(MAX_CHUNK_ROWS, MAX_CHUNK_BYTES // max(1, int(row_bytes)))))


def _chunks(n, row_bytes):
    step = chunk_rows(row_bytes)
    return step, [(lo, min(n, lo + step)) for lo in range(0, n, step)]


def predict_raw(X, dev, out):
    """Add the outputs of ``dev``'s trees to ``out (n, K)`` float64 (IN/OUT), each row's
    trees in tree order; ``X (n, F)`` a C-contiguous float32/float64 host matrix."""
    n, n_features = X.shape
    if n == 0 or dev.n_trees == 0:
        return out
    step, chunks = _chunks(n, n_features * X.itemsize + dev.n_outputs * 8)
    d_X = cuda.device_array((min(step, n), n_features), X.dtype)
    d_out = cuda.device_array((min(step, n), dev.n_outputs), np.float64)
    for lo, hi in chunks:
        m = hi - lo
        x, o = d_X[:m], d_out[:m]
        x.copy_to_device(X[lo:hi])
        o.copy_to_device(out[lo:hi])
        predict_raw_kernel[blocks_for(m), THREADS](x, *dev.nodes, dev.value, *dev.cat,
                                                   dev.tree_offset, *dev.classes, o)
        o.copy_to_host(out[lo:hi])
    return out


def predict_leaf(X, dev, out):
    """Leaf index of every row in every model tree of ``dev``: ``out (n, M) int32``
    (OUT)."""
    n, n_features = X.shape
    if n == 0 or dev.n_trees == 0:
        return out
    step, chunks = _chunks(n, n_features * X.itemsize + dev.n_leaf_trees * 4)
    d_X = cuda.device_array((min(step, n), n_features), X.dtype)
    d_out = cuda.device_array((min(step, n), dev.n_leaf_trees), np.int32)
    for lo, hi in chunks:
        m = hi - lo
        x, o = d_X[:m], d_out[:m]
        x.copy_to_device(X[lo:hi])
        predict_leaf_kernel[blocks_for(m), THREADS](x, *dev.nodes, *dev.cat, dev.leaf_offset,
                                                    o)
        o.copy_to_host(out[lo:hi])
    return out
