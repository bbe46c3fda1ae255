"""CPU kernels of the binning stage: the mapping of raw feature values to bin codes,
the blocked row-major mirror and the sparse-rows layout (each row's cells outside
the features' most frequent bins).  The per-feature summaries and bin thresholds
are ``thresholds``' (re-exported here: the binning stage's kernels are one module to
``bonsai.binning``).

The kernels over whole matrices are ``parallel_kernel``s: ``bonsai.binning`` calls
the serial twin for small data (no parallel kernel compiled for a small first fit).

Bin convention (shared with split finding and prediction): a feature with ``t``
thresholds ``thr[0] < ... < thr[t-1]`` has value bins ``0..t`` where
``bin(x) = #{j : thr[j] < x}``, so ``x <= thr[b]  <=>  bin(x) <= b``.  NaN maps to
the feature's missing bin ``t + 1``.  +inf lands in bin ``t`` and -inf in bin 0.
"""
import numpy as np
from numba import njit, prange

import numba

from ._jit import parallel_kernel
from .thresholds import (find_thresholds, greedy_thresholds,  # noqa: F401
                         summarize_columns)

#: binning and layout kernels run in parallel from this many cells (rows x features);
#: below it they take a few milliseconds on one thread, and a small first fit compiles
#: no parallel binning kernel
PARALLEL_CELLS = 1 << 18


def pick_by_cells(kernel, n_cells):
    """``kernel`` (parallel) for ``n_cells`` cells with more than one thread, else its
    serial twin: the same results either way."""
    return kernel if n_cells >= PARALLEL_CELLS and numba.get_num_threads() > 1 else kernel.serial


@njit(cache=True, nogil=True, inline="always")
def _bin_of(x, thresholds, t0, nt):
    if np.isnan(x):
        return nt + 1
    if nt == 0:
        return 0
    # branchless lower bound: the loop count depends on nt only and the comparison
    # becomes a conditional move (a branchy search mispredicts about half its steps);
    # unsigned indices avoid negative-index wraparound checks
    base = np.uintp(t0)
    m = np.uintp(nt)
    one = np.uintp(1)
    while m > one:
        half = m >> one
        base = base + half if thresholds[base + half] < x else base
        m -= half
    return np.intp(base) - t0 + (1 if thresholds[base] < x else 0)


@njit(cache=True, nogil=True, inline="always")
def _bin(x, thresholds, t0, nt, zero_bin):
    # the search path (more than 255 thresholds): zero first, the value sparse, count
    # and one-hot columns mostly hold, one predictable compare on other data.  -0.0 ==
    # 0.0 and both are above the same thresholds, so it is the same code
    if x == 0.0:
        return zero_bin
    return _bin_of(x, thresholds, t0, nt)


def zero_bins(thresholds, thr_offsets):
    """Each feature's bin of the value 0: ``#{j : thr[j] < 0}`` (int64 (F,)), the
    ``zero_bin`` argument of ``map_to_bins``."""
    below = np.concatenate([[0], np.cumsum(thresholds < 0.0)]).astype(np.int64)
    return below[thr_offsets[1:]] - below[thr_offsets[:-1]]


#: rows per task of the row-major ``map_to_bins``: a task's writes (this many bytes
#: per feature) stay in L2 even for thousands of features
_MAP_ROWS = 256


@njit(cache=True, nogil=True)
def _bin_tile(X, f, r0, m, buf, cnt, pad, coarse, nt, out, o0):
    """``out[o0 + r]`` = the bin of ``X[r0 + r, f]`` for ``r < m`` by the 16-wide tables
    (``pad``: the thresholds padded with +inf to 256, ``coarse`` every 16th of them):
    ``#{thresholds < x}``, NaN ``nt + 1``.

    The tile's values are copied into ``buf``.  Below 16 thresholds each pass
    compares one threshold with every value of it, a loop LLVM vectorises across
    rows; from 16 on the coarse table is counted that way, then one 16-wide segment
    a value.  Measured
    on 1M x 28 float64 against a value at a time with NaN and zero branches (one
    thread / two, two runs): 255 bins F-ordered 20.3 / 8.8 -> 12.2 / 5.8-6.8 ns a
    cell, C-ordered 31.6 / 11.3 -> 11.3-15.0 / 6.1-6.4, 15 bins 10.7 / 4.5 -> 3.9 /
    1.9; 90k x 2000 0/1 columns 0.255 -> 0.231 s.  Without a zero
    branch: 0 and -0.0 count the thresholds below zero, the ``zero_bin``.
    ``buf`` float64, ``cnt`` int64: scratch of at least ``m``."""
    for r in range(m):
        buf[r] = X[r0 + r, f]
        cnt[r] = 0
    if nt >= 16:
        # the 16-threshold segment: how many of every 16th threshold lie below
        for j in range(16):
            c = coarse[j]
            for r in range(m):
                cnt[r] += c < buf[r]
        for r in range(m):     # then the thresholds below in that segment
            x = buf[r]
            b = 16 * cnt[r]
            k = 0
            for j in range(16):
                k += pad[b + j] < x
            cnt[r] = b + k
    else:
        for j in range(nt):     # pad[j] is +inf from nt on: below no value
            c = pad[j]
            for r in range(m):
                cnt[r] += c < buf[r]
    missing = nt + 1
    for r in range(m):
        out[o0 + r] = missing if np.isnan(buf[r]) else cnt[r]


#: the table path bins a mostly-zero feature (``mostly_zero``) with this many
#: thresholds or more a value at a time (``_bin_tile_sparse``); below it the
#: threshold passes of ``_bin_tile`` are a few vector compares a value anyway
SPARSE_TILE_THRESHOLDS = 16


@njit(cache=True, nogil=True)
def _bin_tile_sparse(X, f, r0, m, pad, nt, zero_bin, out, o0):
    """``_bin_tile`` for a feature whose values are mostly zero: each value by ``_bin``
    (the search path's: a zero, either sign, takes ``zero_bin``, any other value a
    branchless binary search of the ``nt`` thresholds in ``pad``; NaN ``nt + 1``),
    which gives the same bins.

    The tile passes count every threshold for every value, zeros too: 16 coarse
    compares and one 16-wide segment a value.  On count columns (term-frequency like,
    87% zeros, 20-60 thresholds; 20k x 2000 of the wide heavy data, one thread) they
    took 7.5 ns a cell against 5.4 this way; on dense columns the tiles stay (this
    path read 9-10% slower there), so the choice is per feature (``mostly_zero``,
    from a sample of the rows)."""
    for r in range(m):
        out[o0 + r] = _bin(np.float64(X[r0 + r, f]), pad, 0, nt, zero_bin)


@parallel_kernel
def map_to_bins(X, thresholds, thr_offsets, pad, coarse, use_table, zero_bin, mostly_zero,
                row0, out):
    """Bin a C-ordered raw matrix into rows ``row0..row0 + n - 1`` of the column-major
    ``out (F, N)``: tasks take ``_MAP_ROWS`` rows.

    With at most 255 thresholds per feature (``use_table``) each feature's values of
    the task's rows are binned by ``_bin_tile`` (the tile's rows stay in cache
    between features); otherwise a branchless binary search
    over ``thresholds`` a value at a time, a zero taking ``zero_bin[f]``.

    Parameters
    ----------
    X : (n, F) float32 or float64, C-ordered, IN
    thresholds : (sum t_f,) float64, IN -- feature f owns ``thresholds[thr_offsets[f]:thr_offsets[f+1]]``
    thr_offsets : (F + 1,) int64, IN
    pad : (F, 256) float64 thresholds padded with +inf ; coarse : (F, 16) float64 =
        ``pad[:, 15::16]`` (one unused row each unless ``use_table``), IN
    use_table : bool
    zero_bin : (F,) int64 -- each feature's bin of 0 (``zero_bins``), IN
    mostly_zero : (F,) uint8 -- features binned by ``_bin_tile_sparse`` on the table
        path (from ``SPARSE_TILE_THRESHOLDS`` thresholds); only the speed depends on it
    row0 : int -- X's first row is row ``row0`` of ``out`` (pieces of a larger matrix
        write into place: no scratch and no copy)
    out : (F, N) uint8 or uint16, OUT
    """
    n, n_features = X.shape
    for c in prange((n + _MAP_ROWS - 1) // _MAP_ROWS):
        r0 = c * _MAP_ROWS
        r1 = min(n, r0 + _MAP_ROWS)
        buf = np.empty(_MAP_ROWS, np.float64)
        cnt = np.empty(_MAP_ROWS, np.int64)
        for f in range(n_features):
            t0 = thr_offsets[f]
            nt = thr_offsets[f + 1] - t0
            if use_table and nt >= SPARSE_TILE_THRESHOLDS and mostly_zero[f] != 0:
                _bin_tile_sparse(X, f, r0, r1 - r0, pad[f], nt, zero_bin[f], out[f], row0 + r0)
            elif use_table:
                _bin_tile(X, f, r0, r1 - r0, buf, cnt, pad[f], coarse[f], nt, out[f], row0 + r0)
            else:
                for r in range(r0, r1):
                    out[f, row0 + r] = _bin(np.float64(X[r, f]), thresholds, t0, nt,
                                            zero_bin[f])


@parallel_kernel
def map_to_bins_by_column(X, thresholds, thr_offsets, pad, coarse, use_table, zero_bin,
                          mostly_zero, out):
    """``map_to_bins`` for a matrix in any other order (a Fortran-ordered one reads
    each column sequentially) into the whole ``out (F, n)``: one feature per task,
    its values binned ``_MAP_ROWS`` at a time."""
    n, n_features = X.shape
    for f in prange(n_features):
        t0 = thr_offsets[f]
        nt = thr_offsets[f + 1] - t0
        if use_table:
            fi = np.int64(f)    # prange index: unsigned
            pf = pad[fi]
            cf = coarse[fi]
            of = out[fi]
            buf = np.empty(_MAP_ROWS, np.float64)
            cnt = np.empty(_MAP_ROWS, np.int64)
            sparse = nt >= SPARSE_TILE_THRESHOLDS and mostly_zero[fi] != 0
            for r0 in range(0, n, _MAP_ROWS):
                if sparse:
                    _bin_tile_sparse(X, fi, r0, min(_MAP_ROWS, n - r0), pf, nt, zero_bin[fi],
                                     of, r0)
                else:
                    _bin_tile(X, fi, r0, min(_MAP_ROWS, n - r0), buf, cnt, pf, cf, nt, of, r0)
        else:
            zb = zero_bin[f]
            for r in range(n):
                out[f, r] = _bin(np.float64(X[r, f]), thresholds, t0, nt, zb)


#: rows of a tile of ``columns_to_blocked``
_TILE_ROWS = 64


@parallel_kernel
def columns_to_blocked(X_cols, out):
    """The blocked row-major layout of column-major bins: value (r, f) goes to
    ``out[(f // B) * n + r, f % B]`` (padding columns of the last block are zeroed).

    X_cols : (F, n), IN ; out : (n_blocks * n, B), OUT
    """
    n_features, n = X_cols.shape
    width = out.shape[1]
    n_blocks = (n_features + width - 1) // width
    for c in prange((n + _MAP_ROWS - 1) // _MAP_ROWS):
        r0 = c * _MAP_ROWS
        r1 = min(n, r0 + _MAP_ROWS)
        for blk in range(n_blocks):
            f0 = blk * width
            f1 = min(n_features, f0 + width)
            base = blk * n
            # tiles of _TILE_ROWS rows: each feature's column is read for the whole
            # tile (one cache line, one page) before the next feature's, instead of
            # one value of every feature per row (a page per feature per row: TLB
            # misses on wide data, whose columns lie n bytes apart)
            for t0 in range(r0, r1, _TILE_ROWS):
                t1 = min(r1, t0 + _TILE_ROWS)
                for f in range(f0, f1):
                    for r in range(t0, t1):
                        out[base + r, f - f0] = X_cols[f, r]
                for r in range(t0, t1):
                    for j in range(f1 - f0, width):
                        out[base + r, j] = 0


@parallel_kernel
def default_bins(X_cols, n_bins, out_bin, out_count):
    """Most frequent bin of each feature (the lowest among ties) and its row count.

    X_cols : (F, n) uint8/uint16, IN ; n_bins : (F,) int64 bins per feature (missing
    bin included), IN ; out_bin, out_count : (F,) int64, OUT
    """
    for f in prange(X_cols.shape[0]):
        counts = np.zeros(n_bins[f], np.int64)
        col = X_cols[f]
        for r in range(col.shape[0]):
            counts[col[r]] += 1
        best = 0
        for b in range(1, n_bins[f]):
            if counts[b] > counts[best]:
                best = b
        out_bin[f] = best
        out_count[f] = counts[best]


_SPARSE_CHUNK = 1024


@parallel_kernel
def sparse_row_counts(X_cols, default_bin, out):
    """``out[r] = #{f : X_cols[f, r] != default_bin[f]}`` (rows in chunks, so each
    feature's reads stay sequential)."""
    n_features, n = X_cols.shape
    for c in prange((n + _SPARSE_CHUNK - 1) // _SPARSE_CHUNK):
        r0 = c * _SPARSE_CHUNK
        r1 = min(n, r0 + _SPARSE_CHUNK)
        out[r0:r1] = 0
        for f in range(n_features):
            d = default_bin[f]
            col = X_cols[f]
            for r in range(r0, r1):
                out[r] += col[r] != d


@parallel_kernel
def sparse_row_fill(X_cols, default_bin, feat_off, ptr, out):
    """Each row's non-default cells as global histogram indices ``feat_off[f] + bin``,
    in feature order: ``out[ptr[r]:ptr[r+1]]``.  out : (ptr[-1],) uint16, OUT"""
    n_features, n = X_cols.shape
    for c in prange((n + _SPARSE_CHUNK - 1) // _SPARSE_CHUNK):
        r0 = c * _SPARSE_CHUNK
        r1 = min(n, r0 + _SPARSE_CHUNK)
        pos = ptr[r0:r1].copy()
        for f in range(n_features):
            d = default_bin[f]
            o = feat_off[f]
            col = X_cols[f]
            for r in range(r0, r1):
                b = col[r]
                if b != d:
                    out[pos[r - r0]] = np.uint16(o + b)
                    pos[r - r0] += 1
