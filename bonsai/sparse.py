"""scipy.sparse input trained and predicted without ever building its dense matrix.

* ``check_csr``: the API-boundary check of a sparse matrix (CSR, CSC, COO, the
  ``*_array`` kinds alike): a canonical CSR (sorted indices, no duplicates; a copy
  only where the input is not one) of float32/float64 values.
* ``fit_bin_mapper``: bin edges from the non-zeros.  A value the matrix does not list
  is 0.0 (not missing); an explicit NaN is missing.  The rows sampled are the dense
  sketch's (``binning.binning_sample``), and each column's summary is its listed
  values plus 0.0 weighted by the rows it does not list, so the edges equal the
  dense path's for the same matrix (with sample weights, the zeros' weight is the
  total minus the listed rows' weights: a sum in another order than the dense path's,
  which can differ in its last bits).
* ``SparseBins``: what a sparse Dataset holds instead of the dense ``X_cols (F, n)``:
  a row store (each row's cells outside its features' zero bins, as global histogram
  indices: the CPU histograms' ``SparseRows`` layout, also read by binned prediction)
  and a column store (each feature's listed rows and bins: what the partition reads).
  Memory is proportional to the listed cells.
* ``add_trees`` / ``predict_leaf``: prediction on CSR, in chunks of rows scattered
  into a zeroed scratch of only the features the model splits on (the trees'
  features renumbered to that scratch), then the dense predictors; memory is bounded
  by ``SCRATCH_CELLS`` whatever the width.

Kernels: ``bonsai.backends.cpu.sparse``.
"""
from typing import NamedTuple

import numpy as np

from ._dtypes import IDX
from ._limits import check_sparse_bins

#: cells of the prediction scratch (chunk rows x used features): 32 MB of float64
SCRATCH_CELLS = 1 << 22


def is_sparse(data):
    """Whether ``data`` is a scipy.sparse matrix or array."""
    return hasattr(data, "tocsr") and hasattr(data, "toarray") and hasattr(data, "nnz")


def _k():
    from .backends import kernels
    return kernels("sparse")


def check_csr(data, name="X", n_features=None):
    """A canonical CSR of ``data`` (float32 stays float32, other numbers become
    float64), or the error naming ``name``; with ``n_features``, a ValueError when the
    column count differs."""
    shape = data.shape
    if len(shape) != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {shape}")
    if n_features is not None and shape[1] != n_features:
        raise ValueError(f"{name} has {shape[1]} features, but the model was trained with "
                         f"{n_features} features")
    if shape[0] == 0 or shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {tuple(shape)}")
    kind = np.dtype(data.dtype).kind
    if kind == "c":
        raise TypeError(f"{name}: complex data is not supported")
    if kind not in "fiub":
        raise TypeError(f"{name}: dtype {data.dtype} is not numeric; pass numbers (NaN for missing)")
    X = data.tocsr()
    if X.dtype not in (np.float32, np.float64):
        X = X.astype(np.float64)
    if not X.has_canonical_format:
        X = X.copy() if X is data else X
        X.sum_duplicates()             # also sorts each row's indices
    return X


class SparseBins(NamedTuple):
    """The bins of a sparse Dataset (see the module docstring and
    ``backends.cpu.sparse``).  ``shape`` and ``dtype`` are those of the dense
    ``X_cols (F, n)`` it replaces."""
    ptr: np.ndarray          # (n + 1,) uint32 (int64 past 2**32 cells)
    gidx: np.ndarray         # (nnz,) uint16 (uint32 past 65536 bins) feat_off[f] + bin
    default_bin: np.ndarray  # (F,) int64: each feature's zero bin
    col_ptr: np.ndarray      # (F + 1,) int64
    col_rows: np.ndarray     # (nnz,) uint32, ascending per feature
    col_bins: np.ndarray     # (nnz,) uint8/uint16

    @property
    def shape(self):
        return (self.default_bin.shape[0], self.ptr.shape[0] - 1)

    @property
    def dtype(self):
        return self.col_bins.dtype

    @property
    def nbytes(self):
        return sum(a.nbytes for a in self)

    def csc(self):
        """(col_ptr, col_rows, col_bins, zero_bin): the partition's store."""
        return (self.col_ptr, self.col_rows, self.col_bins, self.default_bin)


def fit_bin_mapper(X, max_bin, weights=None, random_state=0):
    """``BinMapper.fit`` of a canonical CSR ``X`` from its non-zeros (see the module
    docstring): the same thresholds the dense matrix gets."""
    from .binning import BinMapper, _unit_or, binning_sample
    n, n_features = X.shape
    rows = binning_sample(n, random_state=random_state)
    sample = X if rows.shape[0] == n else X[rows]
    w = None if weights is None else _unit_or(np.ascontiguousarray(weights[rows],
                                                                   dtype=np.float64))
    csc = sample.tocsc()
    if not csc.has_sorted_indices:
        csc.sort_indices()
    # room for each feature's thresholds: at most one per listed entry (O(nnz), where a
    # (F, max_bin - 1) buffer would be 200 MB for 100k features)
    cap = np.minimum(np.diff(csc.indptr).astype(np.int64), max(max_bin - 1, 1))
    thr_cap = np.concatenate([[0], np.cumsum(cap)]).astype(np.int64)
    thr = np.empty(int(thr_cap[-1]))
    count = np.empty(n_features, np.int64)
    k = _k()
    kernel = k.column_thresholds if csc.nnz + n_features >= 1 << 16 else k.column_thresholds.serial
    kernel(csc.indptr, csc.indices, csc.data, rows.shape[0], w, max_bin, thr_cap, thr, count)
    offsets = np.concatenate([[0], np.cumsum(count)]).astype(np.int64)
    keep = np.repeat(thr_cap[:-1] - offsets[:-1], count) + np.arange(int(offsets[-1]))
    return BinMapper(thr[keep], offsets, max_bin)


def _store(ptr, gidx, default_bin, bm):
    """``SparseBins`` of a row store, its column store built from it."""
    feat_off = bm.feat_off
    n_features = bm.n_features
    bin_feature = np.repeat(np.arange(n_features, dtype=np.int64), np.diff(feat_off))
    col_ptr = np.empty(n_features + 1, np.int64)
    col_rows = np.empty(gidx.shape[0], IDX)
    col_bins = np.empty(gidx.shape[0], bm.dtype)
    _k().columns_of_rows(ptr, gidx, bin_feature, feat_off, col_ptr, col_rows, col_bins)
    return SparseBins(ptr, gidx, default_bin, col_ptr, col_rows, col_bins)


def _ptr_of(counts):
    nnz = int(counts.sum(dtype=np.int64))
    ptr = np.empty(counts.shape[0] + 1, np.uint32 if nnz < 1 << 32 else np.int64)
    ptr[0] = 0
    np.cumsum(counts, out=ptr[1:])
    return ptr, nnz


def _gidx_dtype(bm):
    check_sparse_bins(bm.feat_off[-1])
    return np.uint16 if int(bm.feat_off[-1]) <= 1 << 16 else np.uint32


def _par(k, name, work):
    kernel = getattr(k, name)
    return kernel if work >= 1 << 18 else kernel.serial


def bin_rows(bm, X):
    """The ``SparseBins`` of a canonical CSR ``X`` under the bin edges ``bm``."""
    if X.shape[1] != bm.n_features:
        raise ValueError(f"X has {X.shape[1]} features but the bin edges have {bm.n_features}")
    k = _k()
    zero = np.empty(bm.n_features, np.int64)
    k.zero_bins(bm.thresholds, bm.thr_offsets, zero)
    n = X.shape[0]
    counts = np.empty(n, np.int64)
    args = (X.indptr, X.indices, X.data, bm.thresholds, bm.thr_offsets, zero)
    _par(k, "row_counts", X.nnz)(*args, counts)
    ptr, nnz = _ptr_of(counts)
    del counts
    gidx = np.empty(nnz, _gidx_dtype(bm))
    _par(k, "row_fill", X.nnz)(*args, bm.feat_off, ptr, gidx)
    return _store(ptr, gidx, zero, bm)


def take(bins, rows, bm):
    """The ``SparseBins`` of rows ``rows`` (int64 indices, in that order)."""
    k = _k()
    counts = np.empty(rows.shape[0], np.int64)
    _par(k, "take_row_counts", rows.shape[0])(bins.ptr, rows, counts)
    ptr, nnz = _ptr_of(counts)
    gidx = np.empty(nnz, bins.gidx.dtype)
    _par(k, "take_rows_fill", nnz)(bins.ptr, bins.gidx, rows, ptr, gidx)
    return _store(ptr, gidx, bins.default_bin, bm)


def stack(parts, bm):
    """One ``SparseBins`` of ``parts`` (binned with ``bm``) stacked in order."""
    counts = np.concatenate([np.diff(q.ptr.astype(np.int64)) for q in parts])
    ptr, _ = _ptr_of(counts)
    gidx = np.concatenate([q.gidx for q in parts]).astype(_gidx_dtype(bm), copy=False)
    return _store(ptr, gidx, parts[0].default_bin, bm)


# ---- prediction ---------------------------------------------------------------------

class _Compact(NamedTuple):
    ens: object         # the trees, features renumbered to scratch columns
    obl: object         # their oblivious form, or None
    col_map: np.ndarray  # (F,) int64 scratch column of each feature, -1 if unused
    n_used: int


def _compact(booster, t0, t1):
    """Trees ``t0:t1`` of ``booster`` with their features renumbered to the scratch
    columns of the features they split on (cached beside the booster's ensemble,
    built under the booster's lock: concurrent predicts see it whole or not at all)."""
    ens, _ = booster._ensemble(t0, t1)
    hit = getattr(booster, "_sparse_cache", None)
    if hit is not None and hit[0] is ens:
        return hit[1]
    with booster._lock:
        hit = getattr(booster, "_sparse_cache", None)
        if hit is not None and hit[0] is ens:
            return hit[1]
        out = _build_compact(booster, t0, t1)
        booster._sparse_cache = (ens, out)
    return out


def _build_compact(booster, t0, t1):
    from .tree import concat, concat_oblivious
    trees = booster.trees[t0:t1]
    cls = booster.tree_class[t0:t1]
    used = np.unique(np.concatenate([np.asarray(t.feature[t.left >= 0], np.int64)
                                     for t in trees] + [np.zeros(0, np.int64)]))
    col_map = np.full(booster.n_features, -1, np.int64)
    col_map[used] = np.arange(used.shape[0])
    renum = [t._replace(feature=np.where(t.left >= 0, col_map[np.maximum(t.feature, 0)],
                                         t.feature).astype(t.feature.dtype)) for t in trees]
    obl = (concat_oblivious(renum, cls) if renum and all(t.oblivious for t in renum)
           else None)
    return _Compact(concat(renum, cls), obl, col_map, int(used.shape[0]))


def _chunks(X, comp):
    """(r0, r1, scratch view) over the rows of ``X``, the scratch holding rows
    ``r0:r1`` of the used features (zeros elsewhere)."""
    k = _k()
    width = max(comp.n_used, 1)
    n = X.shape[0]
    rows = int(max(1, min(n, SCRATCH_CELLS // width)))
    scratch = np.zeros((rows, width), X.dtype)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        k.scatter_rows(X.indptr, X.indices, X.data, r0, r1, comp.col_map, scratch)
        yield r0, r1, scratch[:r1 - r0]
        k.clear_rows(X.indptr, X.indices, r0, r1, comp.col_map, scratch)


def add_trees(booster, X, t0, t1, raw, host):
    """``Booster._add_trees`` on a canonical CSR ``X``: add trees ``t0:t1``'s outputs
    to ``raw (n, K)`` (``host``: the CPU backend)."""
    comp = _compact(booster, t0, t1)
    for r0, r1, S in _chunks(X, comp):
        with booster._predict_threads(r1 - r0, t1 - t0):
            if comp.obl is not None:
                host.predict_oblivious(S, comp.obl, raw[r0:r1])
            else:
                host.predict_raw(S, comp.ens, raw[r0:r1])
    return raw


def predict_leaf(booster, X, t0, t1, out, host):
    """Leaf indices of a canonical CSR ``X`` in trees ``t0:t1``, into ``out (n, T)``."""
    comp = _compact(booster, t0, t1)
    for r0, r1, S in _chunks(X, comp):
        with booster._predict_threads(r1 - r0, t1 - t0):
            host.predict_leaf(S, comp.ens, out[r0:r1])
    return out
