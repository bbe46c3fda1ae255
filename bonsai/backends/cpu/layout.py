"""The CPU backend's data: ``prepare`` turns a binned Dataset into the layouts the
histogram fill reads, and ``hist_layout`` picks how a fill is cut between threads.

A Dataset holds its bins column-major (``X_cols (F, n)``, what the partition and
binned prediction read).  For the histograms the backend adds one row-major layout:

* the dense **blocked** mirror: rows of ``B = block_width(F, max_bin)`` features,
  one block after another (``(n_blocks * n, B)``, value (r, f) at
  ``[(f // B) * n + r, f % B]``).  A thread fills one block's histogram for all rows
  of a node, so its writes stay in cache while its reads stay sequential; narrow data
  (up to two blocks' worth) is one block: plain row-major;
* or **sparse rows** (``SparseRows``) when most cells sit in their feature's most
  frequent bin: each row lists only its other cells, and a fill restores the default
  bins from the node totals.

Either layout gives the same integer histograms; only speed differs.  ``prepare``
caches its result on the Dataset, so fits that reuse a Dataset build it once.
"""
from typing import NamedTuple

import numpy as np

from ..._profile import stage
from ...sparse import SparseBins
from . import binning as _kernels
from .binning import pick_by_cells as _pick
from . import step as _step

#: a feature block's histogram should stay within this many bytes (L2-resident)
BLOCK_HIST_BYTES = 256 * 1024
#: use the sparse-rows layout when rows have at most this fraction of their cells
#: outside the features' most frequent bins.  Measured (2 threads, one node, root /
#: 50% / 10% of the rows): 40%-NaN 1M x 28 (fraction 0.60) filled in 25.6 / 12.2 /
#: 2.6 ms dense against 6.2 / 3.7 / 3.0 ms sparse (a dominant bin makes consecutive
#: rows add into the same cell, a store-to-load chain); 100k x 2000 0/1 data
#: (fraction 0.13) 45.7 / 21.1 / 4.3 ms against 5.9 / 3.6 / 0.8 ms; continuous 1M x 28
#: (fraction 1.0) 6.7 / 3.4 / 1.8 ms dense against 6.7 / 5.0 / 9.3 ms sparse.
SPARSE_ROW_FRACTION = 0.7
class SparseRows(NamedTuple):
    """The sparse-rows histogram layout: row r lists the global histogram indices
    (``feat_off[f] + bin``, uint16; uint32 from scipy.sparse input with more bins) of its cells whose bin is not feature f's
    ``default_bin`` in ``bins[ptr[r]:ptr[r+1]]``; a fill restores the default bins
    from the node totals."""
    ptr: np.ndarray          # (n + 1,) uint32
    bins: np.ndarray         # (nnz,) uint16
    default_bin: np.ndarray  # (F,) int64


class CpuData(NamedTuple):
    """What a CPU fit reads: the column-major bins, the histogram layout (blocked
    matrix or ``SparseRows``) and the bin layout (``BinMapper``)."""
    X_cols: np.ndarray
    X_hist: object
    bin_mapper: object

    @property
    def n_rows(self):
        return self.X_cols.shape[1]


def block_width(n_features, max_bin):
    """Features per block of the blocked mirror.

    A thread fills one block's histogram (at most ``BLOCK_HIST_BYTES``, about an L2
    cache) for all rows of a node, so its writes stay in cache while its reads stay
    sequential; with one histogram over all features, every row would scatter its adds
    over ``F * (max_bin + 2)`` cells, far more than a cache holds when F is large.
    Narrow data (up to two blocks' worth) is one block: plain row-major."""
    w = max(8, min(256, BLOCK_HIST_BYTES // (16 * (max_bin + 2))))
    return n_features if n_features <= 2 * w else w


def to_blocked(X_cols, max_bin):
    """The blocked row-major mirror of column-major bins ``X_cols (F, n)``."""
    n_features, n = X_cols.shape
    width = block_width(n_features, max_bin)
    out = np.empty((-(-n_features // width) * n, width), dtype=X_cols.dtype)
    _pick(_kernels.columns_to_blocked, n * n_features)(X_cols, out)
    return out


def sparse_rows(X_cols, feat_off, max_fraction=None):
    """A ``SparseRows`` layout of the column-major bins ``X_cols (F, n)`` if rows keep
    at most ``max_fraction`` of their cells (and every index fits in uint16), else None."""
    max_fraction = SPARSE_ROW_FRACTION if max_fraction is None else max_fraction
    n_features, n = X_cols.shape
    if n == 0 or n_features == 0 or int(feat_off[-1]) > 1 << 16:
        return None
    dflt = np.empty(n_features, np.int64)
    count = np.empty(n_features, np.int64)
    _pick(_kernels.default_bins, n * n_features)(X_cols, np.diff(feat_off).astype(np.int64),
                                                 dflt, count)
    if (n_features * n - int(count.sum())) > max_fraction * n_features * n:
        return None
    per_row = np.empty(n, np.uint32)
    _pick(_kernels.sparse_row_counts, n * n_features)(X_cols, dflt, per_row)
    nnz = int(per_row.sum(dtype=np.int64))
    if nnz >= 1 << 32:  # row pointers are uint32 (half the memory of int64)
        return None
    ptr = np.empty(n + 1, np.uint32)
    ptr[0] = 0
    np.cumsum(per_row, out=ptr[1:])
    bins = np.empty(nnz, np.uint16)
    _pick(_kernels.sparse_row_fill, n * n_features)(X_cols, dflt, feat_off, ptr, bins)
    return SparseRows(ptr, bins, dflt)


def build_layout(X_cols, bin_mapper):
    """Sparse rows when most cells sit in their feature's most frequent bin, else the
    dense blocked mirror; sparse bins (``bonsai.sparse.SparseBins``, scipy.sparse
    input) always fill from their row store, whose default bins are the zero bins."""
    if isinstance(X_cols, SparseBins):
        return SparseRows(X_cols.ptr, X_cols.gidx, X_cols.default_bin)
    sparse = sparse_rows(X_cols, bin_mapper.feat_off)
    return to_blocked(X_cols, bin_mapper.max_bin) if sparse is None else sparse


def prepare(data):
    """``CpuData`` of a binned data set (a ``Dataset``, or anything with ``X_cols``
    and ``bin_mapper``: the ordered encoding's training view).  Built once per data
    set and column array, then cached on it (``_backend_data``)."""
    cache = getattr(data, "_backend_data", None)
    if cache is None:
        cache = data._backend_data = {}
    hit = cache.get("cpu")
    if hit is not None and hit.X_cols is data.X_cols and hit.bin_mapper is data.bin_mapper:
        return hit
    with stage("bin_layout"):
        out = CpuData(data.X_cols, build_layout(data.X_cols, data.bin_mapper), data.bin_mapper)
    cache["cpu"] = out
    return out


def hist_layout(X_hist, feat_off, n_threads):
    """(layout, dense matrix, sparse ptr, bins, default bin) for ``step.build``; the
    layout not in use gets None (its kernels are then not compiled).

    Dense narrow data (few feature blocks) splits rows into one piece per thread;
    dense wide data (at least two feature blocks per thread) splits the feature
    blocks between threads instead, so one block's histogram stays in cache; the
    sparse-rows layout always splits rows.

    Why row-wise and not a feature-parallel (column-major) fill for narrow data,
    measured on 1M x 28 uint8 bins, 2 threads (medians of 5): one node holding
    100% / 50% / 20% / 5% / 1% of the rows took 16.2 / 8.6 / 4.2 / 1.5 / 0.5 ms
    row-wise against 19.5 / 10.3 / 4.7 / 2.2 / 2.6 ms feature-parallel (gradients
    gathered once, then one column per thread); a level of 64 nodes holding 25% of
    the rows took 2.4 ms row-wise against 3.2 ms.  Row-wise wins at every density,
    so the choice per level is only between row pieces (narrow) and feature blocks
    (wide, where one node's histogram no longer fits in L2).
    """
    if isinstance(X_hist, SparseRows):
        return (_step.DENSE_ROWS, None, X_hist.ptr, X_hist.bins, X_hist.default_bin)
    n_blocks = -(-(feat_off.shape[0] - 1) // X_hist.shape[1])
    layout = _step.DENSE_BLOCKS if n_blocks >= 2 * n_threads else _step.DENSE_ROWS
    return layout, X_hist, None, None, None
