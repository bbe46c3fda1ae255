"""CPU kernels of the binning stage's thresholds: each feature's sorted distinct
values with their weights (``summarize_columns``, ``find_thresholds``' streaming pass
and its sort) and the greedy bin thresholds over them (``greedy_thresholds``).

The kernels over whole matrices are ``parallel_kernel``s: ``bonsai.binning`` calls
the serial twin for small data.  ``binning`` re-exports them, so the binning stage
is one kernel module to its callers.
"""
import numpy as np
from numba import njit, prange

from ._jit import parallel_kernel
from .radix import radix_sort


@njit(cache=True, nogil=True)
def _distinct(col, weights, out_values, out_weights):
    """Sort ``col`` (NaN last) and write its distinct non-NaN values with summed
    weights (``weights`` None: every weight is 1, and a radix sort does; only weighted
    data compiles the stable argsort); returns how many.  ``col`` is overwritten.

    Unweighted, a column at least a quarter zeros sorts only its other values
    (``_distinct_zeros``)."""
    m = col.shape[0]
    if weights is None:
        n_zero = 0
        for j in range(m):
            n_zero += col[j] == 0.0
        if 4 * n_zero >= m and n_zero > 0:
            return _distinct_zeros(col, n_zero, out_values, out_weights)
        radix_sort(col)
    else:
        order = np.argsort(col, kind="mergesort")
        col[:] = col[order]
        wcol = weights[order]
    k = -1
    prev = 0.0
    for j in range(m):
        v = col[j]
        if np.isnan(v):
            break
        w = 1.0 if weights is None else wcol[j]
        if k >= 0 and v == prev:
            out_weights[k] += w
        else:
            k += 1
            out_values[k] = v
            out_weights[k] = w
            prev = v
    return k + 1


@njit(cache=True, nogil=True)
def _distinct_zeros(col, n_zero, out_values, out_weights):
    """``_distinct`` of an unweighted column with ``n_zero`` zeros (either sign): the
    other values are moved to the front and radix-sorted, and the zeros enter the list
    as one value between the negatives and the positives, with weight ``n_zero``, as
    -0.0 when any zero is -0.0 (the full sort puts -0.0 first and the list keeps the
    first of equal values).  The same list, from a sort of the other values only:
    ``BinMapper.fit`` of 100k x 400 float32 columns 88% zeros, the rest log-normal
    (more distinct values than the streaming pass keeps, so every column is sorted),
    took 0.21-0.22 s with the full sort and 0.09 s this way, the same thresholds.
    The list is built here, over the other values only: putting the zeros back into
    the sorted column for ``_distinct``'s own loop ran 0.16 s (that loop then walks
    every zero)."""
    m = col.shape[0]
    nz = 0
    neg = False
    for j in range(m):
        v = col[j]
        if v == 0.0:
            neg |= np.signbit(v)
        else:
            col[nz] = v
            nz += 1
    rest = col[:nz]
    radix_sort(rest)
    zero = -0.0 if neg else 0.0
    k = 0
    placed = False
    for j in range(nz):
        v = rest[j]
        if np.isnan(v):
            break
        if not placed and v > 0.0:
            out_values[k] = zero
            out_weights[k] = np.float64(n_zero)
            k += 1
            placed = True
        if k > 0 and v == out_values[k - 1]:
            out_weights[k - 1] += 1.0
        else:
            out_values[k] = v
            out_weights[k] = 1.0
            k += 1
    if not placed:
        out_values[k] = zero
        out_weights[k] = np.float64(n_zero)
        k += 1
    return k


@parallel_kernel
def summarize_columns(sample, weights, out_values, out_weights, out_sizes):
    """Exact weighted summary of each column: sorted distinct non-NaN values with
    their summed weights.

    Parameters
    ----------
    sample : (m, F) float64, IN
    weights : (m,) float64, or None for unit weights, IN
    out_values, out_weights : (F, m) float64, OUT -- first ``out_sizes[f]`` entries valid
    out_sizes : (F,) int64, OUT
    """
    for f in prange(sample.shape[1]):
        out_sizes[f] = _distinct(sample[:, f].copy(), weights, out_values[f], out_weights[f])


#: features gathered together by ``find_thresholds``: one 64-byte line of a float32
#: row serves 16 features, where a per-feature gather loads a cache line per value
#: (wide row-major data then streams the whole matrix once per feature)
_GATHER_FEATURES = 16
#: distinct values the streaming pass of ``find_thresholds`` keeps before a feature
#: falls back to a sort
_SMALL_DISTINCT = 64
#: sampled rows per tile of that pass (a tile of a float32 row-major matrix: this
#: many lines per 16 features, read feature by feature)
_FIND_TILE_ROWS = 64


@njit(cache=True, nogil=True, inline="always")
def _insert_small(v, w, vals, wts, base, k, last, c):
    """Add value ``v`` (weight ``w``) to feature ``c``'s sorted list
    ``vals[base:base + k[c]]``; ``last[c]`` is the last position hit (runs of one value
    cost one comparison).  Returns False when the list would exceed ``_SMALL_DISTINCT``."""
    lp = base + last[c]
    if vals[lp] == v:
        wts[lp] += w
        return True
    kk = k[c]
    p = 0
    while p < kk and vals[base + p] < v:
        p += 1
    if p < kk and vals[base + p] == v:
        wts[base + p] += w
        last[c] = p
        return True
    if kk == _SMALL_DISTINCT:
        return False
    for q in range(kk, p, -1):
        vals[base + q] = vals[base + q - 1]
        wts[base + q] = wts[base + q - 1]
    vals[base + p] = v
    wts[base + p] = w
    last[c] = p
    k[c] = kk + 1
    return True


@parallel_kernel
def find_thresholds(X, rows, weights, max_bin, n_chunks, out_thr, out_count):
    """Bin thresholds of every feature straight from the sampled rows of ``X``.

    Each thread takes a contiguous run of features.  Pass 1 reads the sampled rows
    once, in tiles of ``_FIND_TILE_ROWS`` rows taken feature by feature, and keeps,
    per feature, a short sorted list of distinct values with their weights (in row
    order, as a stable sort adds them); a feature leaves the pass once it has more than ``_SMALL_DISTINCT``
    values.  Pass 2 gathers those features ``_GATHER_FEATURES`` at a time (one 64-byte
    line of a float32 row serves 16 of them) and sorts them.  Memory stays O(rows)
    per thread.

    Parameters
    ----------
    X : (n, F) float32/float64, IN
    rows : (m,) int64 sampled row indices, IN
    weights : (m,) float64 weights of the sampled rows, or None when all are 1, IN
    max_bin : int
    n_chunks : int -- runs of features (one per thread); no effect on results
    out_thr : (F, max(max_bin - 1, 1)) float64, OUT
    out_count : (F,) int64, OUT -- thresholds written per feature
    """
    m = rows.shape[0]
    n_features = X.shape[1]
    n_chunks = max(1, min(n_features, n_chunks))
    for ci in prange(n_chunks):
        f0 = ci * n_features // n_chunks
        f1 = (ci + 1) * n_features // n_chunks
        nf = f1 - f0
        # NaN never equals a listed value, so an empty list (k = 0) starts with a NaN
        # sentinel in slot 0 that the first real value overwrites
        vals = np.full(nf * _SMALL_DISTINCT, np.nan)
        wts = np.zeros(nf * _SMALL_DISTINCT)
        k = np.zeros(nf, np.int64)
        last = np.zeros(nf, np.int64)
        alive = np.ones(nf, np.bool_)
        n_alive = nf
        # tiles of _FIND_TILE_ROWS sampled rows, feature by feature inside a tile: a
        # feature's list stays in L1 for the tile's rows, where one feature after
        # another per row touched every list (2 x 8 bytes x 64 x F per thread: L2)
        # for each value.  Each feature still sees its values in row order.
        for j0 in range(0, m, _FIND_TILE_ROWS):
            if n_alive == 0:
                break
            j1 = min(m, j0 + _FIND_TILE_ROWS)
            for c in range(nf):
                if not alive[c]:
                    continue
                base = c * _SMALL_DISTINCT
                fc = f0 + c
                for j in range(j0, j1):
                    v = np.float64(X[rows[j], fc])
                    w = 1.0 if weights is None else weights[j]
                    if not np.isnan(v) and not _insert_small(v, w, vals, wts, base, k, last,
                                                             c):
                        alive[c] = False
                        n_alive -= 1
                        break
        # (loops, not np.flatnonzero(~alive): that compiles an array expression and
        # flatnonzero, ~0.3 s of a first fit)
        big = np.empty(nf - n_alive, np.int64)
        n_big = 0
        for c in range(nf):
            if not alive[c]:
                big[n_big] = c
                n_big += 1
                continue
            base = c * _SMALL_DISTINCT
            out_count[f0 + c] = greedy_thresholds(vals[base:base + k[c]], wts[base:base + k[c]],
                                                  max_bin, out_thr[f0 + c])
        if n_big == 0:
            continue
        buf = np.empty((min(_GATHER_FEATURES, big.shape[0]), m), X.dtype)
        values = np.empty(m)
        wv = np.empty(m)
        for g0 in range(0, big.shape[0], _GATHER_FEATURES):
            g1 = min(big.shape[0], g0 + _GATHER_FEATURES)
            for j in range(m):
                r = rows[j]
                for g in range(g0, g1):
                    buf[g - g0, j] = X[r, f0 + big[g]]
            for g in range(g0, g1):
                kk = _distinct(buf[g - g0], weights, values, wv)
                out_count[f0 + big[g]] = greedy_thresholds(values[:kk], wv[:kk], max_bin,
                                                           out_thr[f0 + big[g]])


@njit(cache=True, nogil=True)
def _midpoint(a, b):
    t = a + (b - a) * 0.5
    if not t < b:  # adjacent floats: keep a itself as the cut
        t = a
    return t


@njit(cache=True, nogil=True)
def greedy_thresholds(values, weights, max_bin, out):
    """Choose at most ``max_bin - 1`` thresholds over a weighted distinct-value summary.

    Every distinct value gets its own bin while there are at most ``max_bin`` of them.
    Otherwise bins take roughly equal weight, and a value heavier than the running
    mean bin weight is cut off into a bin of its own.  Thresholds are midpoints
    between neighbouring distinct values.

    Parameters
    ----------
    values, weights : (k,) float64 sorted distinct values and weights, IN
    max_bin : int
    out : (>= max_bin - 1,) float64, OUT

    Returns
    -------
    int : the number of thresholds written.
    """
    k = values.shape[0]
    if k <= 1:
        return 0
    if k <= max_bin:
        for i in range(k - 1):
            out[i] = _midpoint(values[i], values[i + 1])
        return k - 1
    rest = 0.0
    for i in range(k):
        rest += weights[i]
    bins_left = max_bin
    mean = rest / bins_left
    acc = 0.0
    n_out = 0
    for i in range(k - 1):
        acc += weights[i]
        rest -= weights[i]
        if acc >= mean or weights[i + 1] >= mean:
            out[n_out] = _midpoint(values[i], values[i + 1])
            n_out += 1
            bins_left -= 1
            if bins_left <= 1:
                break
            acc = 0.0
            mean = rest / bins_left
    return n_out
