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


_SUPER_BLOCK = 2048


@parallel_kernel
def predict_records(X, records, tree_offset, tree_depth, tree_class, chunk_ptr, out):
    """Add every tree's output to ``out``, walking packed node records.

    Cache blocking: a thread takes a super-block of rows (about 200 KB of X for 28
    float32 features) and runs it through one chunk of trees at a time (about 256 KB
    of records, ``chunk_ptr``), so both stay in L2; within that, blocks of 64 rows
    descend a tree one level at a time: independent loads the CPU overlaps, where a
    single row's walk is a chain of dependent loads.  Trees are still added to each
    row in tree order (the same sums as a plain walk).  A visited node is one 16-byte
    record (``bonsai.tree.node_records``).

    X : (n, F) float32/float64, IN ; records : (N, 2) float64, IN ;
    tree_offset : (T + 1,) int64 ; tree_depth, tree_class : (T,) ; chunk_ptr :
    (C + 1,) int64 tree chunk bounds ; out : (n, K) float64, IN/OUT
    """
    n = X.shape[0]
    n_super = (n + _SUPER_BLOCK - 1) // _SUPER_BLOCK
    # unsigned indices: no negative-index wraparound checks in the walk
    fmask = np.uint64((1 << 21) - 1)
    one = np.uint64(1)
    shift = np.uint64(22)
    zero = np.uint64(0)
    for sb in prange(n_super):
        s0 = sb * _SUPER_BLOCK
        s1 = min(n, s0 + _SUPER_BLOCK)
        pos = np.empty(_ROW_BLOCK, np.uint64)
        for c in range(chunk_ptr.shape[0] - 1):
            for r0 in range(s0, s1, _ROW_BLOCK):
                nb = np.uint64(min(s1, r0 + _ROW_BLOCK) - r0)
                ur0 = np.uint64(r0)
                for t in range(chunk_ptr[c], chunk_ptr[c + 1]):
                    base = np.uint64(tree_offset[t])
                    for j in range(nb):
                        pos[j] = base
                    for _ in range(tree_depth[t]):
                        for j in range(nb):
                            p = pos[j]
                            meta = np.uint64(records[p, 1])
                            if meta != zero:
                                x = X[ur0 + j, (meta >> one) & fmask]
                                go_right = np.uint64(x > records[p, 0]) | (
                                    np.uint64(x != x) & (one - (meta & one)))
                                pos[j] = base + (meta >> shift) + go_right
                    k = tree_class[t]
                    for j in range(nb):
                        out[ur0 + j, k] += records[pos[j], 0]


_TREE_GROUP = 8


@njit(cache=True, nogil=True)
def predict_records_walk(X, records, tree_offset, tree_depth, tree_class, out):
    """``predict_records`` for a handful of rows: each row descends a group of 8 trees
    in lockstep (independent loads the CPU overlaps; one row's walk down a single
    tree is a chain of dependent loads), then adds their outputs in tree order."""
    fmask = np.uint64((1 << 21) - 1)
    one = np.uint64(1)
    shift = np.uint64(22)
    zero = np.uint64(0)
    n_trees = tree_class.shape[0]
    pos = np.empty(_TREE_GROUP, np.uint64)
    for r in range(X.shape[0]):
        for t0 in range(0, n_trees, _TREE_GROUP):
            ng = min(n_trees, t0 + _TREE_GROUP) - t0
            depth = 0
            for g in range(ng):
                pos[g] = np.uint64(tree_offset[t0 + g])
                depth = max(depth, tree_depth[t0 + g])
            for _ in range(depth):
                for g in range(ng):
                    p = pos[g]
                    meta = np.uint64(records[p, 1])
                    if meta != zero:
                        x = X[r, (meta >> one) & fmask]
                        go_right = np.uint64(x > records[p, 0]) | (
                            np.uint64(x != x) & (one - (meta & one)))
                        pos[g] = np.uint64(tree_offset[t0 + g]) + (meta >> shift) + go_right
            for g in range(ng):
                out[r, tree_class[t0 + g]] += records[pos[g], 0]


@njit(cache=True, nogil=True, inline="always")
def _in_set(c, p0, p1, cat_words):
    """Whether the category code ``c`` (a float: NaN and negatives are in no set) has
    its bit set in the words ``cat_words[p0:p1]``."""
    if not (c >= 0.0) or c >= (p1 - p0) * 64:
        return False
    k = np.int64(c)
    return ((cat_words[p0 + (k >> 6)] >> np.uint64(k & 63)) & np.uint64(1)) != 0


@njit(cache=True, nogil=True, inline="always")
def _go_left(x, j, threshold, default_left, cat_ptr, cat_words):
    """Node ``j``'s decision for the value ``x``: a categorical split (a non-empty
    bitset) or ``x <= threshold`` with missing values sent the default way."""
    p0 = cat_ptr[j]
    p1 = cat_ptr[j + 1]
    if p1 > p0:
        return _in_set(x, p0, p1, cat_words)
    if x != x:
        return default_left[j] != 0
    return x <= threshold[j]


@njit(cache=True, nogil=True, inline="always")
def _leaf_of(x, base, feature, threshold, default_left, left, right, cat_ptr, cat_words):
    """The leaf (tree-relative node index) row ``x`` reaches in the tree at ``base``."""
    node = 0
    while left[base + node] >= 0:
        j = base + node
        go_left = _go_left(x[feature[j]], j, threshold, default_left, cat_ptr, cat_words)
        node = left[j] if go_left else right[j]
    return node


@parallel_kernel
def predict_leaf(X, feature, threshold, default_left, left, right, cat_ptr, cat_words,
                 tree_offset, out):
    """Leaf node index (within its tree) of every row in every tree. out (n, T) int32."""
    n_trees = tree_offset.shape[0] - 1
    for r in prange(X.shape[0]):
        for t in range(n_trees):
            out[r, t] = _leaf_of(X[r], tree_offset[t], feature, threshold, default_left, left,
                                 right, cat_ptr, cat_words)


@parallel_kernel
def predict_nodes(X, feature, threshold, default_left, left, right, value, cat_ptr, cat_words,
                  tree_offset, tree_class, out):
    """Add every tree's output to ``out (n, K)`` with a plain node walk that also takes
    categorical splits (models with them; trees in order for each row)."""
    n_trees = tree_offset.shape[0] - 1
    for r in prange(X.shape[0]):
        for t in range(n_trees):
            base = tree_offset[t]
            node = _leaf_of(X[r], base, feature, threshold, default_left, left, right, cat_ptr,
                            cat_words)
            out[r, tree_class[t]] += value[base + node]


@njit(cache=True, nogil=True, inline="always")
def _binned_leaf(X_cols, r, feature, bin_threshold, default_left, missing_bin, left, right,
                 cat_ptr, cat_words):
    """The leaf binned row ``r`` of ``X_cols (F, n)`` reaches in one tree."""
    node = 0
    while left[node] >= 0:
        f = feature[node]
        b = X_cols[f, r]
        p0 = cat_ptr[node]
        p1 = cat_ptr[node + 1]
        if p1 > p0:     # categorical: bins are codes, the missing bin is never set
            go_left = _in_set(np.float64(b), p0, p1, cat_words)
        elif b == missing_bin[f]:
            go_left = default_left[node] != 0
        else:
            go_left = b <= bin_threshold[node]
        node = left[node] if go_left else right[node]
    return node


@parallel_kernel
def predict_binned_add(X_cols, rows, feature, bin_threshold, default_left, missing_bin,
                       left, right, value, cat_ptr, cat_words, out):
    """One tree over binned rows: ``out[rows[i]] += value(leaf of row rows[i])``.

    X_cols : (F, n) uint8/uint16 column-major bins ; rows : (m,) uint32 ;
    missing_bin : (F,) int64 ; cat_ptr (n_nodes + 1,), cat_words : the tree's
    categorical bitsets over bins (``Tree.arrays_cat``) ; out : (n,) float64, IN/OUT
    """
    for i in prange(rows.shape[0]):
        r = rows[i]
        node = _binned_leaf(X_cols, r, feature, bin_threshold, default_left, missing_bin,
                            left, right, cat_ptr, cat_words)
        out[r] += value[node]


@parallel_kernel
def predict_binned_add_vec(X_cols, rows, feature, bin_threshold, default_left, missing_bin,
                           left, right, value, cat_ptr, cat_words, out):
    """``predict_binned_add`` of a vector-leaf tree: one descent per row, then
    ``out[k, rows[i]] += value[leaf, k]`` for each output k (the one add per output
    that K scalar trees would make).  value : (n_nodes, K) ; out : (K, n), IN/OUT"""
    for i in prange(rows.shape[0]):
        r = rows[i]
        node = _binned_leaf(X_cols, r, feature, bin_threshold, default_left, missing_bin,
                            left, right, cat_ptr, cat_words)
        for k in range(value.shape[1]):
            out[k, r] += value[node, k]


@parallel_kernel
def predict_oblivious(X, level_feature, level_threshold, level_default_left, level_offset,
                      leaf_value, leaf_offset, tree_class, level_cat_ptr, level_cat_words, out):
    """Branchless oblivious trees: the leaf index is built from one bit per level.

    A block of 64 rows is first transposed to feature-major order (in X's own dtype),
    so that one level of one tree is a single compare over 64 contiguous values (the
    compiler vectorizes it), the way CatBoost evaluates symmetric trees.  The missing
    direction picks the compare: ``x > thr`` sends NaN left, ``not x <= thr`` sends it
    right.  Float32 inputs use float32 thresholds rounded down, which decide every
    float32 value exactly as the float64 threshold does.  Each row's outputs are
    accumulated in tree order, as in the other predictors.

    A categorical level (a non-empty bitset, words ``level_cat_ptr[lv]:
    level_cat_ptr[lv+1]`` of ``level_cat_words``) sets the bit of the rows whose code
    is not in its set.

    level_* : (sum depth,), level_threshold of X's dtype ; level_offset : (T + 1,) int64 ;
    leaf_value : (sum 2**depth,) float64 ; leaf_offset : (T + 1,) int64 ;
    out : (n, K) float64, IN/OUT
    """
    n, n_features = X.shape
    n_out = out.shape[1]
    n_trees = tree_class.shape[0]
    n_blocks = (n + _ROW_BLOCK - 1) // _ROW_BLOCK
    one = np.int32(1)
    for blk in prange(n_blocks):
        r0 = blk * _ROW_BLOCK
        nb = min(n, r0 + _ROW_BLOCK) - r0
        width = (nb + 15) & ~15  # lanes, padded to a multiple of 16 (a single row uses 16)
        xt = np.empty((n_features, width), X.dtype)
        for j in range(nb):
            for f in range(n_features):
                xt[f, j] = X[r0 + j, f]
        for j in range(nb, width):
            for f in range(n_features):
                xt[f, j] = 0.0
        acc = np.empty((n_out, width))
        for k in range(n_out):
            for j in range(nb):
                acc[k, j] = out[r0 + j, k]
        leaf = np.empty(width, np.int32)
        for t in range(n_trees):
            leaf[:] = 0
            for lv in range(level_offset[t], level_offset[t + 1]):
                col = xt[level_feature[lv]]
                thr = level_threshold[lv]
                p0 = level_cat_ptr[lv]
                p1 = level_cat_ptr[lv + 1]
                if p1 > p0:
                    for j in range(width):
                        leaf[j] = (leaf[j] << one) | np.int32(
                            not _in_set(np.float64(col[j]), p0, p1, level_cat_words))
                elif level_default_left[lv]:
                    for j in range(width):
                        leaf[j] = (leaf[j] << one) | np.int32(col[j] > thr)
                else:
                    for j in range(width):
                        leaf[j] = (leaf[j] << one) | np.int32(not col[j] <= thr)
            lb = leaf_offset[t]
            a = acc[tree_class[t]]
            for j in range(nb):
                a[j] += leaf_value[lb + leaf[j]]
        for k in range(n_out):
            for j in range(nb):
                out[r0 + j, k] = acc[k, j]
