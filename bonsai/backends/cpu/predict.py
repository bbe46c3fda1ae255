"""CPU prediction kernels: row-parallel, tree-blocked walks over raw features,
binned features (validation sets and out-of-bag rows during training), leaf
indices, and the branchless oblivious-tree predictor.

Ensemble layout (see ``bonsai.tree``): all trees' nodes are concatenated; tree ``t``
owns nodes ``tree_offset[t]:tree_offset[t+1]``, child indices are relative to the
tree, and a leaf has ``left == -1``.
"""
import numpy as np
from numba import njit, prange

from ._jit import parallel_kernel

_ROW_BLOCK = 64


@parallel_kernel
def predict_raw(X, feature, threshold, default_left, left, right, value,
                tree_offset, tree_class, out):
    """Add every tree's output to ``out``.

    X : (n, F) float32/float64, IN ; out : (n, K) float64, IN/OUT
    feature, left, right : (N,) int32 ; threshold, value : (N,) float64 ;
    default_left : (N,) uint8 ; tree_offset : (T + 1,) int64 ; tree_class : (T,) int32
    """
    n = X.shape[0]
    n_trees = tree_class.shape[0]
    n_blocks = (n + _ROW_BLOCK - 1) // _ROW_BLOCK
    for blk in prange(n_blocks):
        r0 = blk * _ROW_BLOCK
        r1 = min(n, r0 + _ROW_BLOCK)
        for t in range(n_trees):
            base = tree_offset[t]
            k = tree_class[t]
            for r in range(r0, r1):
                node = 0
                while left[base + node] >= 0:
                    j = base + node
                    x = X[r, feature[j]]
                    if np.isnan(x):
                        go_left = default_left[j] != 0
                    else:
                        go_left = x <= threshold[j]
                    node = left[j] if go_left else right[j]
                out[r, k] += value[base + node]


@parallel_kernel
def predict_leaf(X, feature, threshold, default_left, left, right, tree_offset, out):
    """Leaf node index (within its tree) of every row in every tree. out (n, T) int32."""
    n = X.shape[0]
    n_trees = tree_offset.shape[0] - 1
    for r in prange(n):
        for t in range(n_trees):
            base = tree_offset[t]
            node = 0
            while left[base + node] >= 0:
                j = base + node
                x = X[r, feature[j]]
                if np.isnan(x):
                    go_left = default_left[j] != 0
                else:
                    go_left = x <= threshold[j]
                node = left[j] if go_left else right[j]
            out[r, t] = node


@njit(parallel=True, cache=True)
def predict_binned_add(X_cols, rows, feature, bin_threshold, default_left, missing_bin,
                       left, right, value, out):
    """One tree over binned rows: ``out[rows[i]] += value(leaf of row rows[i])``.

    X_cols : (F, n) uint8/uint16 column-major bins ; rows : (m,) uint32 ;
    missing_bin : (F,) int64 ; out : (n,) float64, IN/OUT
    """
    for i in prange(rows.shape[0]):
        r = rows[i]
        node = 0
        while left[node] >= 0:
            f = feature[node]
            b = X_cols[f, r]
            if b == missing_bin[f]:
                go_left = default_left[node] != 0
            else:
                go_left = b <= bin_threshold[node]
            node = left[node] if go_left else right[node]
        out[r] += value[node]


@parallel_kernel
def predict_oblivious(X, level_feature, level_threshold, level_default_left, level_offset,
                      leaf_value, leaf_offset, tree_class, out):
    """Branchless oblivious trees: the leaf index is built from one bit per level.

    level_* : (sum depth,) ; level_offset : (T + 1,) int64 ; leaf_value : (sum 2**depth,)
    float64 ; leaf_offset : (T + 1,) int64 ; out : (n, K) float64, IN/OUT
    """
    n = X.shape[0]
    n_trees = tree_class.shape[0]
    n_blocks = (n + _ROW_BLOCK - 1) // _ROW_BLOCK
    for blk in prange(n_blocks):
        r0 = blk * _ROW_BLOCK
        r1 = min(n, r0 + _ROW_BLOCK)
        for t in range(n_trees):
            l0 = level_offset[t]
            l1 = level_offset[t + 1]
            lb = leaf_offset[t]
            k = tree_class[t]
            for r in range(r0, r1):
                leaf = 0
                for lv in range(l0, l1):
                    x = X[r, level_feature[lv]]
                    right = np.int64(x > level_threshold[lv])
                    nan = np.int64(np.isnan(x))
                    right = right | (nan & (1 - np.int64(level_default_left[lv])))
                    leaf = (leaf << 1) | right
                out[r, k] += leaf_value[lb + leaf]
