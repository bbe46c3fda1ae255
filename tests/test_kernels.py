"""Unit tests of the CPU kernels against the pure-Python oracles in
``tests/reference/naive.py``, on tiny handcrafted or seeded random data."""
import numpy as np
import pytest

import bonsai
from bonsai._threads import thread_context
from bonsai.backends import cpu
from bonsai.backends.cpu import binning as kbin
from bonsai.backends.cpu.layout import to_blocked
from bonsai.binning import BinMapper, QuantileSummary, summarize
from bonsai.split_settings import Scales, SplitSettings
from bonsai.tree import concat, concat_oblivious
from reference.naive import (gh_parts, ghc_to_hist, hist_to_ghc, naive_best_split,
                             naive_goes_left, naive_histogram, naive_level_gains,
                             naive_predict_margin, naive_tree_leaf)

CFG_DEFAULT = SplitSettings(reg_lambda=1.0, reg_alpha=0.0, max_delta_step=0.0,
                            min_child_weight=1e-3, min_split_gain=0.0)


def _layout(n_value_bins):
    nv = np.asarray(n_value_bins, np.int64)
    feat_off = np.concatenate([[0], np.cumsum(nv + 1)]).astype(np.int64)
    return nv, feat_off


def _random_binned(rng, n, n_value_bins, p_missing=0.1):
    """Bin codes in [0, nv] (nv = the missing bin), uint8 C order."""
    cols = []
    for nv in n_value_bins:
        c = rng.integers(0, nv, n)
        c[rng.random(n) < p_missing] = nv
        cols.append(c)
    return np.ascontiguousarray(np.stack(cols, axis=1).astype(np.uint8))


def _quantized(rng, n, g=None, h=None):
    """Quantized (gh, scales, gq, hq) of float32 gradients spanning many magnitudes."""
    if g is None:
        g = rng.standard_cauchy(n) * 10.0 ** rng.integers(-8, 8, n)
    if h is None:
        h = rng.uniform(0.0, 1.0, n) * 10.0 ** rng.integers(-6, 3, n)
    g = np.asarray(g, np.float32)
    h = np.asarray(h, np.float32)
    gh = np.empty((n, 2), np.int64)
    with thread_context(2):
        scales = cpu.quantize(g, h, n, gh)
    gq, hq, cnt = gh_parts(gh, scales)
    assert np.all(cnt == 1)
    return gh, scales, gq, hq


def _build(pool, X, feat_off, gh, idx, starts, stops, n_threads):
    slots = np.array([pool.alloc() for _ in starts], np.int64)
    # poison the slots: build_histograms must overwrite them
    pool.hist[slots] = 12345
    with thread_context(n_threads):
        cpu.build_histograms(pool, X, feat_off, gh, idx, np.asarray(starts, np.int64),
                             np.asarray(stops, np.int64), slots, n_threads)
    return slots


# ---- binning ---------------------------------------------------------------------------

def test_map_to_bins_handcrafted():
    thr = np.array([1.0, 2.0, 3.0])           # feature 0: 3 thresholds, bins 0..3, missing 4
    offsets = np.array([0, 3, 3], np.int64)   # feature 1: no thresholds, bin 0, missing 1
    col0 = [-np.inf, -5.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 1e30, np.inf, np.nan]
    exp0 = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 3, 4]
    col1 = [7.0, -np.inf, np.inf, np.nan, 0.0, 7.0, 7.0, 7.0, 7.0, 7.0, 7.0, np.nan]
    exp1 = [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1]
    for dtype in (np.float64, np.float32):
        for order in ("C", "F"):
            X = np.array([col0, col1], dtype=np.float64).astype(dtype).T.copy(order=order)
            # through BinMapper.transform, which calls the map_to_bins kernel
            for max_bin, out_dtype in ((255, np.uint8), (1000, np.uint16)):
                bm = BinMapper(thr, offsets, max_bin)
                with thread_context(2):
                    out = to_blocked(bm.transform_columns(X), bm.max_bin)
                assert out.dtype == out_dtype and out.flags.c_contiguous
                np.testing.assert_array_equal(out[:, 0], exp0)
                np.testing.assert_array_equal(out[:, 1], exp1)
    # many rows (several row blocks), both layouts, against searchsorted
    rng = np.random.default_rng(0)
    Xb = rng.normal(size=(10000, 2))
    Xb[rng.random(Xb.shape) < 0.1] = np.nan
    bm = BinMapper(np.array([-1.0, 0.0, 0.5, 2.0]), np.array([0, 4, 4], np.int64), 255)
    for order in ("C", "F"):
        with thread_context(2):
            out = to_blocked(bm.transform_columns(np.asarray(Xb, order=order)), bm.max_bin)
        ref0 = np.where(np.isnan(Xb[:, 0]), 5,
                        np.searchsorted([-1.0, 0.0, 0.5, 2.0], Xb[:, 0], side="left"))
        np.testing.assert_array_equal(out[:, 0], ref0)
        np.testing.assert_array_equal(out[:, 1], np.isnan(Xb[:, 1]).astype(int))


def test_map_to_bins_zeros_take_the_bin_of_zero(monkeypatch):
    """A zero (either sign) is binned by its shortcut (``zero_bins``) as by the
    thresholds: below, at and above a threshold of exactly 0, on the table (<= 255
    thresholds) and the search path, serial and parallel kernels, row pieces written
    into place and both orders."""
    import bonsai.binning as binning
    rng = np.random.default_rng(5)
    n = 3000
    X = rng.choice([-2.0, -1.0, -0.0, 0.0, 0.0, 0.0, 1.0, 3.0], size=(n, 4))
    X[rng.random(X.shape) < 0.05] = np.nan
    X[:, 3] = np.round(rng.normal(size=n) * 400)          # > 255 thresholds with max_bin 1023
    X[::3, 3] = 0.0
    X[::5, 3] = -0.0
    fixed = [np.array([-1.5, -0.5, 0.5, 2.0]),              # 0 between thresholds
             np.array([-1.0, 0.0, 1.0]),                   # a threshold at exactly 0
             np.array([0.5, 2.0])]                         # every threshold above 0
    many = np.unique(np.round(rng.normal(size=600) * 400)) + 0.5
    for last, max_bin in ((many[:200], 255), (many, 1023)):  # table path, search path
        sets = fixed + [last]
        offsets = np.concatenate([[0], np.cumsum([t.size for t in sets])]).astype(np.int64)
        bm = BinMapper(np.concatenate(sets), offsets, max_bin)
        ref = np.stack([np.where(np.isnan(X[:, f]), sets[f].size + 1,
                                 np.searchsorted(sets[f], X[:, f], side="left"))
                        for f in range(4)])
        np.testing.assert_array_equal(binning._kernels.zero_bins(bm.thresholds,
                                                                 bm.thr_offsets),
                                      [np.searchsorted(t, 0.0) for t in sets])
        for parallel_cells in (binning._kernels.PARALLEL_CELLS, 1):   # serial, parallel
            monkeypatch.setattr(binning._kernels, "PARALLEL_CELLS", parallel_cells)
            for order in ("C", "F"):
                for chunk in (1 << 24, 4001):
                    monkeypatch.setattr(binning, "TRANSFORM_CHUNK_CELLS", chunk)
                    with thread_context(2):
                        out = bm.transform_columns(np.asarray(X, order=order))
                    np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("layout", ["C", "F", "A"])
def test_map_to_bins_tiles_count_the_thresholds_below(layout, monkeypatch):
    """The table path bins ``_MAP_ROWS``-row tiles a threshold pass at a time
    (``_bin_tile``): with 0-255 thresholds (one 16-wide segment or the coarse + fine
    tables), on values at, between and beyond them (+-inf, +-0, NaN), in C, F and
    strided ('A') float32 / float64 input, serial and parallel, a bin is
    ``searchsorted(thr, x, 'left')`` and NaN the missing bin."""
    import bonsai.binning as binning
    rng = np.random.default_rng(11)
    n = 3 * binning._kernels._MAP_ROWS + 37          # whole tiles and a partial one
    counts = [0, 1, 15, 16, 17, 31, 32, 200, 255]
    sets = [np.unique(np.round(rng.normal(size=4 * k + 1) * 50, 1))[:k] for k in counts]
    assert [t.size for t in sets] == counts
    cols = []
    for t in sets:
        pool = np.concatenate([t, t + 0.05, [-np.inf, np.inf, -0.0, 0.0, np.nan, 1e30, -1e30]])
        cols.append(rng.choice(pool, size=n))
    X64 = np.column_stack(cols)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
    bm = BinMapper(np.concatenate(sets), offsets, 255)
    for dtype in (np.float64, np.float32):
        X = X64.astype(dtype)
        ref = np.stack([np.where(np.isnan(X[:, f]), counts[f] + 1,
                                 np.searchsorted(sets[f], X[:, f].astype(np.float64), side="left"))
                        for f in range(len(sets))])
        if layout == "A":
            Z = np.zeros((2 * n, X.shape[1]), dtype, order="F")
            Z[::2] = X
            X = Z[::2]
            assert not (X.flags.c_contiguous or X.flags.f_contiguous)
        else:
            X = np.asarray(X, order=layout)
        for parallel_cells in (binning._kernels.PARALLEL_CELLS, 1):   # serial, parallel
            monkeypatch.setattr(binning._kernels, "PARALLEL_CELLS", parallel_cells)
            with thread_context(2):
                np.testing.assert_array_equal(bm.transform_columns(X), ref)


@pytest.mark.parametrize("layout", ["C", "F"])
def test_map_to_bins_mostly_zero_features_bin_as_the_tiles_do(layout, monkeypatch):
    """Features mostly of zeros (``binning.mostly_zero``) with 16 or more thresholds
    are binned a value at a time (``_bin_tile_sparse``): the same bins as
    ``searchsorted`` for zeros of either sign (thresholds below, at and above 0),
    other values, +-inf and NaN; a feature the sample calls mostly zero whose later
    rows are dense bins the same; serial and parallel, row and column pieces."""
    import bonsai.binning as binning
    rng = np.random.default_rng(17)
    n = 5 * binning._kernels._MAP_ROWS + 11
    counts = [15, 16, 17, 40, 254]      # max_bin 255: at most 254 thresholds
    sets = []
    for k in counts:
        t = np.unique(np.round(rng.normal(size=6 * k) * 30, 1))[:k - 1]
        sets.append(np.unique(np.concatenate([t, [0.0]])))   # a threshold at exactly 0
    assert [t.size for t in sets] == counts
    cols = []
    for t in sets:
        pool = np.concatenate([t, t + 0.05, [-np.inf, np.inf, np.nan, 1e30, -1e30]])
        col = rng.choice(pool, size=n)
        zero = rng.random(n) < 0.85
        col[zero] = rng.choice([0.0, -0.0], size=int(zero.sum()))
        cols.append(col)
    dense_tail = rng.choice(np.concatenate([sets[3], sets[3] + 0.05]), size=n)
    dense_tail[::1024] = 0.0        # the sampled rows (every n // 1024-th) hold zeros
    cols.append(np.where(np.arange(n) % (n // 1024) == 0, 0.0, dense_tail))
    sets.append(sets[3])
    X = np.column_stack(cols)
    offsets = np.concatenate([[0], np.cumsum([t.size for t in sets])]).astype(np.int64)
    bm = BinMapper(np.concatenate(sets), offsets, 255)
    assert binning.mostly_zero(X).tolist() == [1, 1, 1, 1, 1, 1]
    ref = np.stack([np.where(np.isnan(X[:, f]), sets[f].size + 1,
                             np.searchsorted(sets[f], X[:, f], side="left"))
                    for f in range(len(sets))])
    for parallel_cells in (binning._kernels.PARALLEL_CELLS, 1):   # serial, parallel
        monkeypatch.setattr(binning._kernels, "PARALLEL_CELLS", parallel_cells)
        for chunk in (1 << 24, 4001):
            monkeypatch.setattr(binning, "TRANSFORM_CHUNK_CELLS", chunk)
            with thread_context(2):
                got = bm.transform_columns(np.asarray(X, order=layout))
            np.testing.assert_array_equal(got, ref)
    monkeypatch.setattr(binning, "MOSTLY_ZERO_SHARE", 2.0)          # the tiles everywhere
    with thread_context(2):
        np.testing.assert_array_equal(bm.transform_columns(np.asarray(X, order=layout)), ref)


def test_distinct_values_of_zero_heavy_columns_equal_the_full_sort():
    """A column at least a quarter zeros skips its zeros in the sort
    (``_distinct_zeros``): the same distinct values and weights, value bits included
    (-0.0 when any zero is -0.0, as the full sort keeps the first of equal values), as
    the sort of every value, for zeros before, between and after the other values,
    with NaN, in float32 and float64."""
    from bonsai.backends.cpu import thresholds as K
    rng = np.random.default_rng(23)

    def full(col):       # the sorted path's list, by numpy
        v = np.sort(col[~np.isnan(col)].astype(np.float64), kind="stable")
        keys = v.copy()
        keys[keys == 0.0] = 0.0                          # -0.0 and 0.0 are one value
        uniq, first, counts = np.unique(keys, return_index=True, return_counts=True)
        vals = v[first]
        if (v == 0.0).any():                              # np.sort: -0.0 not before 0.0
            vals[uniq == 0.0] = -0.0 if np.signbit(col[col == 0.0]).any() else 0.0
        return vals, counts.astype(np.float64)

    cases = [rng.choice([0.0, 0.0, 0.0, 1.0, 2.5, -3.0], 400),
             np.where(rng.random(400) < 0.9, 0.0, rng.normal(size=400)),
             np.where(rng.random(400) < 0.5, -0.0, np.abs(rng.normal(size=400)) + 0.1),
             np.where(rng.random(400) < 0.5, 0.0, -np.abs(rng.normal(size=400)) - 0.1),
             np.zeros(400), np.full(400, -0.0),
             np.where(rng.random(400) < 0.3, np.nan, rng.choice([0.0, -0.0, 4.0], 400)),
             rng.normal(size=400)]                        # few zeros: the full sort
    for col in cases:
        for dtype in (np.float64, np.float32):
            c = col.astype(dtype)
            vals = np.empty(c.shape[0])
            wts = np.empty(c.shape[0])
            k = K._distinct(c.copy(), None, vals, wts)
            want_v, want_w = full(c)
            np.testing.assert_array_equal(vals[:k], want_v)
            np.testing.assert_array_equal(np.signbit(vals[:k]), np.signbit(want_v))
            np.testing.assert_array_equal(wts[:k], want_w)


def test_binmapper_special_values_and_constant_feature():
    rng = np.random.default_rng(0)
    n = 500
    X = np.empty((n, 3))
    X[:, 0] = rng.normal(size=n)
    X[:, 1] = 4.25                       # constant feature
    X[:, 2] = rng.integers(0, 5, n)      # 5 distinct values
    X[::7, 0] = np.nan
    X[::11, 1] = np.nan
    bm = BinMapper.fit(X, max_bin=16)
    assert bm.feature_thresholds(1).size == 0, "a constant feature must get no thresholds"
    assert bm.n_value_bins[1] == 1 and bm.missing_bin[1] == 1
    np.testing.assert_array_equal(bm.feature_thresholds(2), [0.5, 1.5, 2.5, 3.5])
    assert bm.feature_thresholds(0).size <= 15
    assert np.all(np.diff(bm.feature_thresholds(0)) > 0)
    B = to_blocked(bm.transform_columns(X), bm.max_bin)
    assert B.dtype == np.uint8 and B.flags.c_contiguous
    assert np.all(B[::7, 0] == bm.missing_bin[0])
    assert np.all(B[::11, 1] == 1)
    assert np.all(B[np.arange(n) % 11 != 0, 1] == 0)
    np.testing.assert_array_equal(B[:, 2], X[:, 2].astype(int))
    # the bin convention: x <= thr[b]  <=>  bin(x) <= b
    t0 = bm.feature_thresholds(0)
    fin = ~np.isnan(X[:, 0])
    np.testing.assert_array_equal(B[fin, 0], np.searchsorted(t0, X[fin, 0], side="left"))
    # infinities on unseen data: +inf -> last value bin, -inf -> bin 0
    Z = np.array([[np.inf, np.inf, np.inf], [-np.inf, -np.inf, -np.inf]])
    Bz = to_blocked(bm.transform_columns(Z), bm.max_bin)
    np.testing.assert_array_equal(Bz[0], bm.n_value_bins - 1)
    np.testing.assert_array_equal(Bz[1], [0, 0, 0])
    # uint16 codes above 255 bins
    bm16 = BinMapper.fit(rng.normal(size=(3000, 1)), max_bin=1000)
    assert bm16.transform_columns(np.zeros((1, 1))).dtype == np.uint16
    assert bm16.n_value_bins[0] > 256


def test_greedy_thresholds_few_values_are_midpoints():
    out = np.empty(10)
    v = np.array([-3.0, 0.0, 1.0, 10.0])
    k = kbin.greedy_thresholds(v, np.ones(4), 10, out)
    np.testing.assert_array_equal(out[:k], [-1.5, 0.5, 5.5])
    assert kbin.greedy_thresholds(np.array([2.0]), np.ones(1), 10, out) == 0
    assert kbin.greedy_thresholds(np.empty(0), np.empty(0), 10, out) == 0
    # adjacent floats: the cut is the lower value itself, so both stay separable
    a = 1.0
    b = np.nextafter(a, 2.0)
    k = kbin.greedy_thresholds(np.array([a, b]), np.ones(2), 10, out)
    assert k == 1 and out[0] == a
    # exactly max_bin distinct values: every value its own bin
    v = np.arange(8.0)
    k = kbin.greedy_thresholds(v, np.ones(8), 8, out)
    np.testing.assert_array_equal(out[:k], np.arange(7.0) + 0.5)


def test_greedy_thresholds_many_values():
    max_bin = 10
    out = np.empty(max_bin - 1)
    v = np.arange(100.0)
    w = np.ones(100)
    w[50] = 1000.0                       # a heavy value gets a bin of its own
    k = kbin.greedy_thresholds(v, w, max_bin, out)
    t = out[:k]
    assert 1 <= k <= max_bin - 1
    assert np.all(np.diff(t) > 0)
    assert 49.5 in t and 50.5 in t
    # uniform weights: bins of roughly equal weight
    k = kbin.greedy_thresholds(v, np.ones(100), max_bin, out)
    t = out[:k]
    assert k == max_bin - 1
    counts = np.diff(np.concatenate([[0], np.searchsorted(v, t, side="right"), [100]]))
    assert counts.sum() == 100 and counts.max() <= 2 * 100 / max_bin


# ---- quantile summaries ---------------------------------------------------------------

def test_quantile_summary_merge_of_halves_equals_whole():
    rng = np.random.default_rng(1)
    X = np.round(rng.normal(size=(3000, 3)), 2)   # many repeated values
    X[rng.random(3000) < 0.05, 1] = np.nan
    w = rng.integers(1, 5, 3000).astype(np.float64)  # integer weights: exact sums
    whole = summarize(X, w)
    first = summarize(X[:1234], w[:1234])
    second = summarize(X[1234:], w[1234:])
    for f in range(3):
        m = first[f].merge(second[f])
        np.testing.assert_array_equal(m.values, whole[f].values)
        np.testing.assert_array_equal(m.weights, whole[f].weights)
        assert np.all(np.diff(m.values) > 0)
    # merging with an empty summary is the identity; merge is symmetric
    empty = QuantileSummary(np.empty(0), np.empty(0))
    np.testing.assert_array_equal(whole[0].merge(empty).values, whole[0].values)
    a, b = first[0].merge(second[0]), second[0].merge(first[0])
    np.testing.assert_array_equal(a.values, b.values)
    np.testing.assert_array_equal(a.weights, b.weights)


def test_quantile_summary_prune_keeps_total_weight():
    rng = np.random.default_rng(2)
    v = np.sort(np.unique(rng.normal(size=5000)))
    w = rng.uniform(0.1, 3.0, v.size)
    s = QuantileSummary(v, w)
    for size in (1, 2, 7, 64, 1000):
        p = s.prune(size)
        assert p.values.size <= size
        np.testing.assert_allclose(p.weights.sum(), w.sum(), rtol=1e-12)
        assert np.all(np.isin(p.values, v)), "prune must keep existing values"
        assert np.all(np.diff(p.values) > 0)
        assert p.values[-1] == v[-1], "the maximum must be kept"
        assert np.all(p.weights > 0)
        # rank error: each kept value's cumulative weight equals the true one
        np.testing.assert_allclose(np.cumsum(p.weights),
                                   np.cumsum(w)[np.searchsorted(v, p.values)], rtol=1e-12)
    assert s.prune(v.size) is s


# ---- histograms ------------------------------------------------------------------------

@pytest.mark.parametrize("min_rows", [None, 7])
def test_build_histograms_vs_naive(monkeypatch, min_rows):
    if min_rows is not None:  # force the multi-thread plan on tiny data
        monkeypatch.setattr(cpu, "MIN_ROWS_PER_THREAD", min_rows)
    rng = np.random.default_rng(3)
    n = 400
    n_value_bins = [5, 1, 17, 3]
    nv, feat_off = _layout(n_value_bins)
    X = _random_binned(rng, n, n_value_bins)
    gh, scales, gq, hq = _quantized(rng, n)
    idx = rng.permutation(n).astype(np.uint32)
    ranges = [(0, 57), (57, 57), (57, 300), (300, 301), (301, 400)]  # includes an empty node
    for a, b in ranges:
        idx[a:b].sort()
    starts = [a for a, _ in ranges]
    stops = [b for _, b in ranges]
    results = {}
    for n_threads in (1, 2, 3):
        pool = cpu.HistogramPool(int(feat_off[-1]), capacity=2)  # forces pool growth
        slots = _build(pool, X, feat_off, gh, idx, starts, stops, n_threads)
        got = pool.hist[slots].copy()
        for j, (a, b) in enumerate(ranges):
            np.testing.assert_array_equal(hist_to_ghc(got[j], scales),
                                          naive_histogram(X, feat_off, gq, hq, idx[a:b]),
                                          err_msg=f"node {j} n_threads={n_threads}")
        results[n_threads] = got
        # no slot leaked: per-thread pieces use the pool's reserved slots only
        assert pool.reserved.shape[0] == max(n_threads - 1, 1)
        assert len(pool.free) == pool.hist.shape[0] - len(ranges) - pool.reserved.shape[0]
    np.testing.assert_array_equal(results[1], results[2])
    np.testing.assert_array_equal(results[1], results[3])


def test_build_histograms_two_threads_really_split():
    """At > 2 * MIN_ROWS_PER_THREAD rows the plan has two threads, and the result is
    the same as one thread's."""
    rng = np.random.default_rng(4)
    n = 2 * cpu.MIN_ROWS_PER_THREAD + 1000
    node, ps, pe, tptr = cpu.plan_pieces(np.array([0], np.int64), np.array([n], np.int64), 2)
    assert tptr.shape[0] == 3 and node.shape[0] == 2
    n_value_bins = [255, 2, 30]
    nv, feat_off = _layout(n_value_bins)
    X = _random_binned(rng, n, n_value_bins)
    gh, scales, gq, hq = _quantized(rng, n)
    idx = np.arange(n, dtype=np.uint32)
    out = []
    for n_threads in (1, 2):
        pool = cpu.HistogramPool(int(feat_off[-1]))
        slots = _build(pool, X, feat_off, gh, idx, [0], [n], n_threads)
        out.append(pool.hist[slots[0]].copy())
    np.testing.assert_array_equal(out[0], out[1])
    np.testing.assert_array_equal(hist_to_ghc(out[0], scales),
                                  naive_histogram(X, feat_off, gq, hq, range(n)))


def test_plan_pieces_cover_ranges_in_order():
    starts = np.array([0, 10, 10, 500], np.int64)
    stops = np.array([10, 10, 500, 20000], np.int64)
    for n_threads in (1, 2, 3, 8):
        node, ps, pe, tptr = cpu.plan_pieces(starts, stops, n_threads)
        assert tptr[0] == 0 and tptr[-1] == node.shape[0]
        assert np.all(np.diff(tptr) >= 0)
        assert np.all(pe > ps)
        # pieces in order, covering every non-empty node range exactly once
        for j in range(4):
            mine = np.flatnonzero(node == j)
            if starts[j] == stops[j]:
                assert mine.size == 0
                continue
            assert ps[mine[0]] == starts[j] and pe[mine[-1]] == stops[j]
            np.testing.assert_array_equal(ps[mine[1:]], pe[mine[:-1]])


def test_sibling_subtraction_equals_direct_build():
    rng = np.random.default_rng(5)
    n = 300
    n_value_bins = [4, 9, 2]
    nv, feat_off = _layout(n_value_bins)
    X = _random_binned(rng, n, n_value_bins)
    gh, scales, gq, hq = _quantized(rng, n)
    idx = np.arange(n, dtype=np.uint32)
    pool = cpu.HistogramPool(int(feat_off[-1]))
    parent = _build(pool, X, feat_off, gh, idx, [0], [n], 1)
    # split on feature 1 bin <= 3, missing left
    go = np.array([naive_goes_left(X[r, 1], 3, 1, nv[1]) for r in range(n)])
    order = np.concatenate([np.flatnonzero(go), np.flatnonzero(~go)]).astype(np.uint32)
    m = int(go.sum())
    small = _build(pool, X, feat_off, gh, order, [0], [m], 1)
    direct = _build(pool, X, feat_off, gh, order, [m], [n], 1)
    with thread_context(1):
        cpu.subtract_histograms(pool, parent, small)
    np.testing.assert_array_equal(pool.hist[parent[0]], pool.hist[direct[0]])
    np.testing.assert_array_equal(hist_to_ghc(pool.hist[parent[0]], scales),
                                  naive_histogram(X, feat_off, gq, hq, np.flatnonzero(~go)))


def test_quantize_is_rint_of_scaled_values():
    rng = np.random.default_rng(6)
    g = (rng.standard_cauchy(1000) * 10.0 ** rng.integers(-6, 6, 1000)).astype(np.float32)
    h = rng.uniform(0, 3, 1000).astype(np.float32)
    out = np.empty((1000, 2), np.int64)
    with thread_context(2):
        scales = cpu.quantize(g, h, 1000, out)
    gq, hq, cnt = gh_parts(out, scales)
    np.testing.assert_array_equal(gq, np.rint(g.astype(np.float64) * scales.grad))
    np.testing.assert_array_equal(hq, np.rint(h.astype(np.float64) * scales.hess))
    np.testing.assert_array_equal(cnt, 1)
    # no possible sum over all rows overflows int64 (Python ints: exact)
    assert sum(abs(int(v)) for v in out[:, 0]) < 2**63
    assert sum(int(v) for v in out[:, 1]) < 2**63
    assert np.abs(g).max() * scales.grad * 1000 <= 2.0**62


# ---- split finding -----------------------------------------------------------------------

def _find(H_list, feat_off, nv, masks, scales, cfg, mcs):
    pool = cpu.HistogramPool(int(feat_off[-1]), capacity=len(H_list))
    slots = np.array([pool.alloc() for _ in H_list], np.int64)
    for s, H in zip(slots, H_list):
        pool.hist[s] = ghc_to_hist(H, scales)
    rows = np.array([int(np.asarray(H)[feat_off[0]:feat_off[1], 2].sum()) for H in H_list], np.int64)
    with thread_context(2):
        return cpu.find_best_splits(pool, slots, rows, feat_off, nv, masks, scales, cfg, mcs)


def _check_against_naive(H_list, feat_off, nv, masks, scales, cfg, mcs):
    gain, feat, bin_, dl, lsum, sums, _ = _find(H_list, feat_off, nv, masks, scales, cfg, mcs)
    for j, H in enumerate(H_list):
        ref = naive_best_split(H, feat_off, nv, masks[j], scales, cfg, mcs)
        np.testing.assert_array_equal(sums[j], ref["sums"])
        if ref["gain"] == -np.inf:
            assert gain[j] == -np.inf, f"node {j}: kernel found {gain[j]}, naive none"
            continue
        assert (feat[j], bin_[j], dl[j]) == (ref["feature"], ref["bin"], ref["default_left"]), \
            f"node {j}: kernel {(feat[j], bin_[j], dl[j])} vs naive {ref}"
        assert gain[j] == pytest.approx(ref["gain"], rel=1e-12, abs=1e-12)
        np.testing.assert_array_equal(lsum[j], ref["left_sums"])
    return gain, feat, bin_, dl


@pytest.mark.parametrize("cfg", [
    [1.0, 0.0, 0.0, 1e-3, 0.0],
    [0.0, 0.0, 0.0, 0.0, 0.0],
    [5.0, 2.0, 0.0, 1e-3, 0.0],      # L1
    [1.0, 0.0, 0.3, 1e-3, 0.0],      # max_delta_step
    [1.0, 0.5, 0.2, 10.0, 1.0],      # everything at once, large min_child_weight
])
def test_find_best_splits_random_vs_naive(cfg):
    rng = np.random.default_rng(7)
    n = 600
    n_value_bins = [6, 1, 12, 3, 8]
    nv, feat_off = _layout(n_value_bins)
    X = _random_binned(rng, n, n_value_bins, p_missing=0.15)
    # float gradients with a signal on feature 2, quantized the way training does
    g = rng.normal(size=n) + 3.0 * (X[:, 2] > 6)
    h = rng.uniform(0.1, 2.0, n)
    gh, scales, gq, hq = _quantized(rng, n, g, h)
    cfg = SplitSettings(*(float(v) for v in cfg))   # lambda, alpha, mds, mcw, msg
    idx = rng.permutation(n).astype(np.uint32)
    cuts = [0, 200, 230, 600]
    H_list = [naive_histogram(X, feat_off, gq, hq, idx[a:b])
              for a, b in zip(cuts[:-1], cuts[1:])]
    H_list.append(naive_histogram(X, feat_off, gq, hq, range(n)))
    masks = np.ones((len(H_list), len(n_value_bins)), np.uint8)
    masks[1, 2] = 0          # the informative feature masked out at one node
    masks[2, :] = 0
    masks[2, 3] = 1
    for mcs in (1, 20, 400):
        _check_against_naive(H_list, feat_off, nv, masks, scales, cfg, mcs)


def test_find_best_splits_known_best():
    """A step in feature 1 at raw value 0.3, missing values of feature 1 behaving like
    the high side: the best split is (feature 1, bin of 0.3, missing left)."""
    rng = np.random.default_rng(8)
    n = 2000
    X = rng.normal(size=(n, 4))
    X[rng.random(n) < 0.1, 1] = np.nan
    X[rng.random(n) < 0.2, 3] = np.nan
    high = ~(X[:, 1] <= 0.3)                      # NaN counts as high
    y = np.where(high, 10.0, 0.0) + 0.1 * rng.normal(size=n)
    bm = BinMapper.fit(X, 63)
    B = to_blocked(bm.transform_columns(X), bm.max_bin)
    gh, scales, gq, hq = _quantized(rng, n, 0.0 - y, np.ones(n))  # squared error at raw 0
    H = naive_histogram(B, bm.feat_off, gq, hq, range(n))
    gain, feat, bin_, dl = _check_against_naive([H], bm.feat_off, bm.n_value_bins,
                                                np.ones((1, 4), np.uint8), scales, CFG_DEFAULT, 20)
    assert feat[0] == 1
    thr = bm.feature_thresholds(1)[bin_[0]]
    assert abs(thr - 0.3) < 0.1
    # missing rows are "high": with "<= thr goes left" they must go right
    assert dl[0] == 0
    lo = ~high
    assert np.all(B[lo, 1] <= bin_[0]) or np.mean(B[lo, 1] <= bin_[0]) > 0.97


@pytest.mark.parametrize("p_missing", [0.0, 0.2])
def test_find_best_splits_feature_skip_keeps_the_first_maximum(p_missing):
    """The scan looks for a feature's first maximum only where its largest gain beats
    the best so far.  Nodes whose signal sits in the last feature or on a feature's
    last bins, and a duplicated feature (exactly tied gains: the first copy must
    win), against the naive search; with and without missing values (the scan's two
    branches)."""
    rng = np.random.default_rng(21)
    n = 900
    n_value_bins = [7, 12, 1, 30, 12]
    nv, feat_off = _layout(n_value_bins)
    X = _random_binned(rng, n, n_value_bins, p_missing=p_missing)
    X[:, 4] = X[:, 1]                                # feature 4 duplicates feature 1
    cases = [(X, X[:, 3] >= 28), (X, X[:, 1] >= 11), (X, X[:, 0] <= 0), (X, X[:, 3] == 29)]
    if p_missing:
        # missing values of feature 3 (bin 30) go with its bin 0, and feature 0 is a
        # noisy copy of that: only feature 3's missing-left pass beats feature 0
        X2 = X.copy()
        X2[(X2[:, 3] < 30) & (rng.random(n) < 0.4), 3] = 0
        sig = (X2[:, 3] == 0) | (X2[:, 3] == 30)
        X2[:, 0] = np.where(sig ^ (rng.random(n) < 0.05), 0, rng.integers(1, 7, n))
        cases.append((X2, sig))
    for Xc, signal in cases:
        g = 0.3 * rng.normal(size=n) + 2.0 * signal
        gh, scales, gq, hq = _quantized(rng, n, g, rng.uniform(0.5, 1.5, n))
        H_list = [naive_histogram(Xc, feat_off, gq, hq, range(a, b))
                  for a, b in ((0, n), (0, 300), (300, 900))]
        masks = np.ones((len(H_list), len(n_value_bins)), np.uint8)
        for mcs in (1, 20):
            _, feat, _, dl = _check_against_naive(H_list, feat_off, nv, masks, scales,
                                                  CFG_DEFAULT, mcs)
            assert 4 not in feat.tolist()            # the copy of feature 1 never wins
            if Xc is not X:
                assert feat.tolist() == [3, 3, 3] and dl.tolist() == [1, 1, 1]


@pytest.mark.parametrize("p_missing", [0.0, 0.3])
def test_find_best_splits_min_child_samples_edges(p_missing):
    """Thresholds at the edges of ``min_child_samples``: nodes whose rows of a
    feature sit in a few of its bins (as after an ancestor's split on it), with
    ``min_child_samples`` from 0 to just below half the node, so a few thresholds,
    one, or none meet it on both sides, against the naive search of every threshold
    (a scan that skips thresholds by their counts must skip exactly these)."""
    rng = np.random.default_rng(33)
    n = 400
    n_value_bins = [40, 9, 25, 1]
    nv, feat_off = _layout(n_value_bins)
    X = _random_binned(rng, n, n_value_bins, p_missing=p_missing)
    # feature 0's values crowd into bins 10..13 with a tail, feature 2's into two bins
    crowd = (rng.random(n) < 0.9) & (X[:, 0] < 40)
    X[crowd, 0] = rng.integers(10, 14, int(crowd.sum()))
    valued = X[:, 2] < 25
    X[valued, 2] = np.where(rng.random(int(valued.sum())) < 0.7, 3, 20)
    g = 0.4 * rng.normal(size=n) + 1.5 * (X[:, 0] >= 12) - 1.0 * (X[:, 2] == 20)
    gh, scales, gq, hq = _quantized(rng, n, g, rng.uniform(0.5, 1.5, n))
    H_list = [naive_histogram(X, feat_off, gq, hq, rows)
              for rows in (range(n), range(0, 57), range(100, 400), range(390, 400))]
    masks = np.ones((len(H_list), len(n_value_bins)), np.uint8)
    found = 0
    for mcs in (0, 1, 2, 5, 28, 29, 60, 149, 150, 199):
        gain, _, _, _ = _check_against_naive(H_list, feat_off, nv, masks, scales,
                                             CFG_DEFAULT, mcs)
        found += int(np.isfinite(gain).sum())
    assert found > 10                 # most settings do split most nodes
    if p_missing:
        # the best split sends feature 1's bin 0 (6 rows, under min_child_samples)
        # left with its missing rows: valid only counting the missing rows left
        X1 = X.copy()
        X1[X1[:, 1] == 0, 1] = 1
        X1[rng.permutation(np.flatnonzero(X1[:, 1] < 9))[:6], 1] = 0
        g1 = 0.2 * rng.normal(size=n) + 3.0 * ((X1[:, 1] == 0) | (X1[:, 1] == 9))
        gh, scales, gq, hq = _quantized(rng, n, g1, rng.uniform(0.5, 1.5, n))
        H1 = [naive_histogram(X1, feat_off, gq, hq, range(n))]
        _, feat, bin_, dl = _check_against_naive(H1, feat_off, nv, masks[:1], scales,
                                                 CFG_DEFAULT, 20)
        assert (feat[0], bin_[0], dl[0]) == (1, 0, 1)


@pytest.mark.parametrize("side", ["low", "high"])
def test_find_best_splits_missing_left_at_min_child_samples(side):
    """The best split sends the missing rows left, with feature 0's two lowest bins
    ("low": the left child is the smaller) or with every bin but the highest ("high":
    the right child is), and ``min_child_samples`` is exactly the smaller child's
    rows: a scan that bounds the missing-left thresholds by their counts must keep
    this threshold at either end of its range; one more row and the split is gone."""
    rng = np.random.default_rng(52)
    n = 300
    n_value_bins = [20, 5]
    nv, feat_off = _layout(n_value_bins)
    X = _random_binned(rng, n, n_value_bins, p_missing=0.0)
    miss = rng.random(n) < 0.1
    X[miss, 0] = 20
    if side == "low":
        sig, want = miss | (X[:, 0] <= 1), 1
    else:
        sig, want = ~miss & (X[:, 0] == 19), 18
    g = 0.1 * rng.normal(size=n) + 3.0 * sig
    gh, scales, gq, hq = _quantized(rng, n, g, rng.uniform(0.5, 1.5, n))
    H = [naive_histogram(X, feat_off, gq, hq, range(n))]
    masks = np.ones((1, 2), np.uint8)
    mcs = int(sig.sum())
    assert 10 < mcs < n // 2
    _, feat, bin_, dl = _check_against_naive(H, feat_off, nv, masks, scales, CFG_DEFAULT, mcs)
    assert (feat[0], bin_[0], dl[0]) == (0, want, 1)
    _, feat, bin_, dl = _check_against_naive(H, feat_off, nv, masks, scales, CFG_DEFAULT,
                                             mcs + 1)
    assert (feat[0], bin_[0], dl[0]) != (0, want, 1)


@pytest.mark.parametrize("p_missing", [0.0, 0.3])
def test_find_best_splits_small_nodes_vs_naive(p_missing):
    """Nodes with fewer rows than a feature has bins, so most bins are empty: nodes
    of 1-60 rows over features of 255, 63, 40 and 1 bins, values crowded at both ends
    and in the middle (the first or the last bin empty or not), against the naive
    search of every threshold; a split whose left side is only the missing rows
    (every value bin below it empty); and a larger child made by subtracting its
    sibling in the scan: its best split, and its slot afterwards, equal the directly
    built child's."""
    rng = np.random.default_rng(45)
    n = 400
    n_value_bins = [255, 63, 1, 40, 255]
    nv, feat_off = _layout(n_value_bins)
    X = _random_binned(rng, n, n_value_bins, p_missing=p_missing)
    X[:130, 0] = np.where(X[:130, 0] < 255, 0, 255)          # rows in the first bin
    X[130:260, 4] = np.where(X[130:260, 4] < 255, 254, 255)  # ... in the last bin
    X[260:, 3] = np.where(X[260:, 3] < 40, rng.integers(18, 21, 140), 40)
    g = 0.5 * rng.normal(size=n) + 1.2 * (X[:, 1] > 30) - 0.8 * (X[:, 4] > 200)
    gh, scales, gq, hq = _quantized(rng, n, g, rng.uniform(0.5, 1.5, n))
    order = rng.permutation(n)
    groups = [order[a:a + k] for a, k in ((0, 1), (1, 2), (3, 7), (10, 25), (35, 60))]
    groups += [np.arange(0, 40), np.arange(120, 140), np.arange(250, 270), np.arange(380, 400)]
    H_list = [naive_histogram(X, feat_off, gq, hq, rows) for rows in groups]
    masks = np.ones((len(H_list), len(n_value_bins)), np.uint8)
    found = 0
    for mcs in (1, 3, 10):
        gain, _, _, _ = _check_against_naive(H_list, feat_off, nv, masks, scales,
                                             CFG_DEFAULT, mcs)
        found += int(np.isfinite(gain).sum())
    assert found > 10
    if p_missing:
        # feature 3's missing rows carry the signal and its bins 0..17 are empty: the
        # best split sends the missing rows left and every value right (threshold 0)
        sig = X[:, 3] == 40
        g3 = 0.1 * rng.normal(size=n) + 3.0 * sig
        gh3, sc3, gq3, hq3 = _quantized(rng, n, g3, rng.uniform(0.5, 1.5, n))
        H3 = [naive_histogram(X, feat_off, gq3, hq3, np.arange(260, 290))]   # < 40 rows
        _, feat, bin_, dl = _check_against_naive(H3, feat_off, nv, masks[:1], sc3,
                                                 CFG_DEFAULT, 3)
        assert (feat[0], bin_[0], dl[0]) == (3, 0, 1)
    # a 50-row parent, its 20-row child built, the 30-row child by subtraction
    parent, small = order[100:150], order[100:120]
    big = order[120:150]
    pool = cpu.HistogramPool(int(feat_off[-1]), capacity=2)
    slots = np.array([pool.alloc(), pool.alloc()], np.int64)
    pool.hist[slots[0]] = ghc_to_hist(naive_histogram(X, feat_off, gq, hq, parent), scales)
    pool.hist[slots[1]] = ghc_to_hist(naive_histogram(X, feat_off, gq, hq, small), scales)
    H_big = naive_histogram(X, feat_off, gq, hq, big)
    with thread_context(2):
        out = cpu.find_best_splits(pool, slots[:1], np.array([30], np.int64), feat_off, nv,
                                   masks[:1], scales, CFG_DEFAULT, 3, sub_slots=slots[1:])
    np.testing.assert_array_equal(pool.hist[slots[0]], ghc_to_hist(H_big, scales))
    ref = naive_best_split(H_big, feat_off, nv, masks[0], scales, CFG_DEFAULT, 3)
    assert np.isfinite(ref["gain"])
    assert (out[1][0], out[2][0], out[3][0]) == (ref["feature"], ref["bin"],
                                                 ref["default_left"])
    np.testing.assert_array_equal(out[4][0], ref["left_sums"])


def test_find_best_splits_no_valid_split():
    n_value_bins = [3, 1]
    nv, feat_off = _layout(n_value_bins)
    rng = np.random.default_rng(9)
    X = _random_binned(rng, 30, n_value_bins, p_missing=0.0)
    gh, scales, gq, hq = _quantized(rng, 30)
    H = naive_histogram(X, feat_off, gq, hq, range(30))
    gain, feat, *_ = _find([H], feat_off, nv, np.ones((1, 2), np.uint8), scales,
                           CFG_DEFAULT, 16)  # 30 rows cannot make two children of 16
    assert gain[0] == -np.inf


def test_find_level_split_vs_naive():
    rng = np.random.default_rng(10)
    n = 500
    n_value_bins = [5, 1, 9]
    nv, feat_off = _layout(n_value_bins)
    X = _random_binned(rng, n, n_value_bins, p_missing=0.2)
    g = rng.normal(size=n) + 2.0 * (X[:, 0] > 2)
    h = rng.uniform(0.5, 1.5, n)
    gh, scales, gq, hq = _quantized(rng, n, g, h)
    Hs = [naive_histogram(X, feat_off, gq, hq, range(a, b)) for a, b in ((0, 120), (120, 500))]
    pool = cpu.HistogramPool(int(feat_off[-1]))
    slots = np.array([pool.alloc() for _ in Hs], np.int64)
    for s, H in zip(slots, Hs):
        pool.hist[s] = ghc_to_hist(H, scales)
    for mask in (np.ones(3, np.uint8), np.array([0, 1, 1], np.uint8)):
        with thread_context(2):
            rows = np.array([int(np.asarray(H)[feat_off[0]:feat_off[1], 2].sum()) for H in Hs])
            got = cpu.find_level_split(pool, slots, rows, feat_off, nv, mask, scales, CFG_DEFAULT, 10)
        ref = naive_level_gains(Hs, feat_off, nv, mask, scales, CFG_DEFAULT, 10)
        # the missing bins' rows of the output carry no candidate
        for f in range(3):
            cells = slice(int(feat_off[f]), int(feat_off[f]) + int(nv[f]))
            np.testing.assert_allclose(got[cells], ref[cells], rtol=1e-12, atol=1e-9)


# ---- partition ---------------------------------------------------------------------------

def _partition(X, idx, tmp, go_left, *args):
    """The backend's partition entry point, given a row-major (n, F) binned matrix."""
    return cpu.partition_nodes(np.ascontiguousarray(X.T), idx, tmp, *args)


@pytest.mark.parametrize("min_rows", [None, 5])
def test_partition_stable_permutation(monkeypatch, min_rows):
    if min_rows is not None:
        monkeypatch.setattr(cpu, "MIN_ROWS_PER_THREAD", min_rows)
        monkeypatch.setattr(cpu, "MIN_PARTITION_ROWS_PER_THREAD", min_rows)
    rng = np.random.default_rng(11)
    n = 300
    n_value_bins = [7, 3]
    nv, feat_off = _layout(n_value_bins)
    X = _random_binned(rng, n, n_value_bins, p_missing=0.2)
    base = rng.permutation(n).astype(np.uint32)
    ranges = [(0, 40), (40, 41), (41, 41), (41, 250), (250, 300)]
    for a, b in ranges:
        base[a:b].sort()
    starts = np.array([a for a, _ in ranges], np.int64)
    stops = np.array([b for _, b in ranges], np.int64)
    feat = np.array([0, 1, 0, 0, 1], np.int64)
    bins = np.array([3, 0, 2, 6, 1], np.int64)      # node 3: bin 6 = all values left
    dls = np.array([1, 0, 1, 0, 1], np.uint8)
    missing = nv[feat].astype(np.int64)
    results = []
    for n_threads in (1, 2, 3):
        idx = base.copy()
        tmp = np.empty(n, np.uint32)
        go_left = np.empty(n, np.uint8)
        with thread_context(n_threads):
            nleft = _partition(X, idx, tmp, go_left, starts, stops, feat, bins, dls,
                               missing, n_threads)
        assert sorted(idx.tolist()) == list(range(n)), "partition must permute idx"
        for j, (a, b) in enumerate(ranges):
            rows = base[a:b]
            left = [r for r in rows if naive_goes_left(X[r, feat[j]], bins[j], dls[j], missing[j])]
            right = [r for r in rows if r not in set(left)]
            assert nleft[j] == len(left)
            np.testing.assert_array_equal(idx[a:a + len(left)], left)
            np.testing.assert_array_equal(idx[a + len(left):b], right)
            assert np.all(np.diff(idx[a:a + len(left)].astype(np.int64)) > 0)
            assert np.all(np.diff(idx[a + len(left):b].astype(np.int64)) > 0)
        results.append((idx.copy(), nleft.copy()))
    for idx, nleft in results[1:]:
        np.testing.assert_array_equal(idx, results[0][0])
        np.testing.assert_array_equal(nleft, results[0][1])


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16])
def test_partition_kernel_any_task_cut(dtype):
    """The partition kernel and its serial twin against a naive stable partition, on
    nodes of 0 to 300 rows (below, at and across its 16-row steps), numeric splits
    with missing values either way and categorical ones, and task plans that keep
    nodes whole or cut them into pieces of uneven sizes, on 1 to 3 threads."""
    from bonsai.backends.cpu import partition as P
    rng = np.random.default_rng(31)
    top = 250 if dtype == np.uint8 else 600          # value bins; the missing bin next
    n = 2000
    X_cols = rng.integers(0, top + 1, (3, n)).astype(dtype)
    sizes = [0, 1, 15, 16, 17, 31, 32, 33, 47, 300, 129, 64, 5]
    starts = np.cumsum([0] + sizes[:-1]).astype(np.int64)
    stops = starts + np.array(sizes, np.int64)
    m = len(sizes)
    base = np.empty(n, np.uint32)
    perm = rng.permutation(n).astype(np.uint32)
    for a, b in zip(starts, stops):
        base[a:b] = np.sort(perm[a:b])
    feat = rng.integers(0, 3, m).astype(np.int64)
    bins = rng.integers(0, top, m).astype(np.int64)
    bins[1::4] = -1                                   # categorical splits
    dls = rng.integers(0, 2, m).astype(np.uint8)
    missing = np.full(m, top, np.int64)
    words = (top + 64) // 64
    bits = rng.integers(0, 2 ** 63, (m, words)).astype(np.uint64)

    def goes_left(j, v):
        if bins[j] < 0:
            return bool((int(bits[j, v >> 6]) >> (v & 63)) & 1)
        return v <= bins[j] or (v == missing[j] and dls[j] == 1)

    def plans():
        whole = (np.arange(m, dtype=np.int64), starts, stops)
        yield whole, np.array([0, m], np.int64)
        yield whole, np.array([0, 4, 9, m], np.int64)
        node, s0, s1 = [], [], []                     # every node cut at random points
        for j in range(m):
            cuts = np.unique(rng.integers(starts[j], stops[j] + 1, 3))
            edges = [starts[j]] + [c for c in cuts if starts[j] < c < stops[j]] + [stops[j]]
            for a, b in zip(edges[:-1], edges[1:]):
                node.append(j), s0.append(a), s1.append(b)
        t = len(node)
        cut = (np.array(node, np.int64), np.array(s0, np.int64), np.array(s1, np.int64))
        yield cut, np.array([0, t], np.int64)
        yield cut, np.array([0, t // 3, (2 * t) // 3, t], np.int64)

    for (t_node, t_start, t_stop), ptr in plans():
        for kernel in (P.partition_nodes, P.partition_nodes.serial):
            idx = base.copy()
            tmp = np.empty(n, np.uint32)
            nleft = np.empty(m, np.int64)
            with thread_context(3):
                kernel(X_cols, idx, tmp, t_node, t_start, t_stop, ptr, feat, bins, dls, missing,
                       bits, np.empty(t_node.shape[0], np.int64), nleft)
            for j in range(m):
                a, b = starts[j], stops[j]
                rows = base[a:b]
                left = [r for r in rows if goes_left(j, int(X_cols[feat[j], r]))]
                right = [r for r in rows if not goes_left(j, int(X_cols[feat[j], r]))]
                assert nleft[j] == len(left)
                np.testing.assert_array_equal(idx[a:b], np.array(left + right, np.uint32))


def test_add_leaf_values():
    raw = np.zeros(10)
    idx = np.array([3, 1, 7, 0, 2, 9, 4, 5, 6, 8], np.uint32)
    with thread_context(2):
        cpu.add_leaf_values(raw, idx, np.array([0, 3, 3], np.int64), np.array([3, 3, 10], np.int64),
                            np.array([1.5, 100.0, -2.0]))
    exp = np.full(10, -2.0)
    exp[[3, 1, 7]] = 1.5
    np.testing.assert_array_equal(raw, exp)


# ---- prediction ---------------------------------------------------------------------------

def _data_with_nans(n=1500, seed=12):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[rng.random((n, 5)) < 0.1] = np.nan
    y = np.nan_to_num(X[:, 0], nan=2.0) * 2 + np.sin(np.nan_to_num(X[:, 1])) \
        + (np.isnan(X[:, 2])) * 3 + 0.1 * rng.normal(size=n)
    return X, y


@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
def test_predict_raw_vs_naive_walk(policy):
    X, y = _data_with_nans()
    params = {"n_estimators": 8, "grow_policy": policy, "max_depth": 4, "n_threads": 2,
              "learning_rate": 0.3}
    if policy == "leafwise":
        params["max_leaves"] = 12
    b = bonsai.train(params, bonsai.Dataset(X, label=y))
    Xt = np.vstack([X[:200], [[np.nan] * 5, [np.inf] * 5, [-np.inf] * 5]])
    ref = naive_predict_margin(b, Xt)[:, 0]
    np.testing.assert_allclose(b.predict(Xt, output_margin=True), ref, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(b.predict(Xt.astype(np.float32), output_margin=True),
                               naive_predict_margin(b, Xt.astype(np.float32))[:, 0],
                               rtol=1e-13, atol=1e-13)
    # leaf indices
    leaves = b.predict(Xt, pred_leaf=True)
    assert leaves.shape == (Xt.shape[0], b.num_trees())
    for t, tree in enumerate(b.trees):
        np.testing.assert_array_equal(leaves[:, t], [naive_tree_leaf(tree, x) for x in Xt])


def test_predict_raw_handcrafted_multiclass():
    from bonsai.tree import Tree
    i32 = lambda v: np.array(v, np.int32)
    # tree 0 (class 0): x0 <= 1 ? (x1 <= -2 ? 10 : 20) : 30 ; NaN in x0 goes right
    t0 = Tree(i32([0, 1, -1, -1, -1]), np.array([1.0, -2.0, 0, 0, 0]), i32([0, 0, -1, -1, -1]),
              np.array([0, 1, 0, 0, 0], np.uint8), i32([1, 3, -1, -1, -1]), i32([2, 4, -1, -1, -1]),
              np.array([0, 0, 30.0, 10.0, 20.0]), np.zeros(5), np.zeros(5), np.zeros(5, np.int64))
    # tree 1 (class 1): a single leaf
    t1 = Tree(i32([-1]), np.zeros(1), i32([-1]), np.zeros(1, np.uint8), i32([-1]), i32([-1]),
              np.array([0.5]), np.zeros(1), np.zeros(1), np.zeros(1, np.int64))
    ens = concat([t0, t1, t0], [0, 1, 1])
    X = np.array([[0.0, -3.0], [0.0, 5.0], [2.0, 0.0], [np.nan, 0.0], [1.0, np.nan],
                  [1.0, -2.0]])
    out = np.zeros((6, 2))
    with thread_context(2):
        cpu.predict_raw(X, ens, out)
    tree0 = np.array([10, 20, 30, 30, 10, 10.0])
    np.testing.assert_array_equal(out[:, 0], tree0)
    np.testing.assert_array_equal(out[:, 1], tree0 + 0.5)


def test_predict_binned_matches_raw_prediction():
    """The training-time walk over bin codes lands in the same leaves as the raw walk."""
    X, y = _data_with_nans(seed=13)
    rng = np.random.default_rng(13)
    X[rng.random(X.shape) < 0.05] = np.inf      # infinities in the training data too
    X[rng.random(X.shape) < 0.05] = -np.inf
    y = y + 3.0 * np.isposinf(X[:, 0]) - 2.0 * np.isneginf(X[:, 1])
    ds = bonsai.Dataset(X, label=y)
    b = bonsai.train({"n_estimators": 5, "max_depth": 5, "n_threads": 1}, ds)
    bm = ds.bin_mapper
    rows = np.arange(X.shape[0], dtype=np.uint32)
    for tree in b.trees:
        out = np.zeros(X.shape[0])
        with thread_context(1):
            cpu.predict_binned_add(ds.X_cols, rows, tree, bm.missing_bin, out)
        ref = np.array([tree.value[naive_tree_leaf(tree, x)] for x in X])
        np.testing.assert_array_equal(out, ref)


@pytest.mark.parametrize("objective,extra", [("squared_error", {}),
                                             ("multiclass", {"num_class": 3})])
def test_oblivious_predictor_equals_generic(objective, extra):
    X, y = _data_with_nans(seed=14)
    if objective == "multiclass":
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(float)
    b = bonsai.train({"n_estimators": 6, "grow_policy": "oblivious", "max_depth": 4,
                      "objective": objective, "n_threads": 2, **extra},
                     bonsai.Dataset(X, label=y))
    assert all(t.oblivious for t in b.trees)
    ens, obl = b._ensemble(0, b.num_trees())
    assert obl is not None, "an all-oblivious model must use the oblivious predictor"
    Xt = np.vstack([X, [[np.nan] * 5, [np.inf] * 5, [-np.inf] * 5]])
    generic = np.zeros((Xt.shape[0], b.n_outputs))
    fast = np.zeros((Xt.shape[0], b.n_outputs))
    with thread_context(2):
        cpu.predict_raw(Xt, ens, generic)
        cpu.predict_oblivious(Xt, obl, fast)
    np.testing.assert_array_equal(fast, generic)
    ref = naive_predict_margin(b, Xt) - b.base_score
    np.testing.assert_allclose(fast, ref, rtol=1e-13, atol=1e-12)
    # and through the Booster (which picks the oblivious path)
    np.testing.assert_allclose(b.predict(Xt, output_margin=True).reshape(len(Xt), -1),
                               naive_predict_margin(b, Xt).reshape(len(Xt), -1),
                               rtol=1e-13, atol=1e-12)


def test_concat_oblivious_layout():
    X, y = _data_with_nans(seed=15)
    b = bonsai.train({"n_estimators": 3, "grow_policy": "oblivious", "max_depth": 3,
                      "n_threads": 1}, bonsai.Dataset(X, label=y))
    obl = concat_oblivious(b.trees, b.tree_class)
    depths = np.diff(obl.level_offset)
    np.testing.assert_array_equal(np.diff(obl.leaf_offset), 2 ** depths)
    for t, tree in enumerate(b.trees):
        # every node of one level uses the level's feature
        level_nodes = [0]
        for lv in range(depths[t]):
            feats = {int(tree.feature[i]) for i in level_nodes}
            assert feats == {int(obl.level_feature[obl.level_offset[t] + lv])}
            level_nodes = [c for i in level_nodes for c in (tree.left[i], tree.right[i])]
        assert all(tree.left[i] < 0 for i in level_nodes)


@pytest.mark.parametrize("policy", ["depthwise", "oblivious"])
def test_parallel_and_serial_predictors_agree(monkeypatch, policy):
    """Small batches take the serial kernels; both paths give identical outputs."""
    X, y = _data_with_nans(seed=21)
    b = bonsai.train({"n_estimators": 5, "grow_policy": policy, "max_depth": 4},
                     bonsai.Dataset(X, label=y))
    monkeypatch.setattr(cpu, "MIN_PARALLEL_PREDICT_WORK", 1)   # 1500 rows x 5 trees: parallel
    assert cpu.parallel_predict(X.shape[0], 5)
    full = b.predict(X, output_margin=True)
    leaves = b.predict(X, pred_leaf=True)
    monkeypatch.setattr(cpu, "SERIAL_PREDICT_ROWS", 10 ** 9)
    np.testing.assert_array_equal(b.predict(X, output_margin=True), full)
    np.testing.assert_array_equal(b.predict(X, pred_leaf=True), leaves)
    monkeypatch.setattr(cpu, "SERIAL_PREDICT_ROWS", 1)
    np.testing.assert_array_equal(b.predict(X[:3], output_margin=True), full[:3])


@pytest.mark.parametrize("weighted", [False, True])
def test_binmapper_fit_equals_summaries_path(weighted):
    """The direct per-column threshold kernel equals thresholds from the mergeable
    summaries (the distributed path)."""
    from bonsai.binning import BinMapper, summarize
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, 6)).astype(np.float32)
    X[:, 2] = np.round(X[:, 2])          # few distinct values
    X[rng.random(X.shape) < 0.1] = np.nan
    w = rng.random(3000) + 0.1 if weighted else None
    for max_bin in (2, 16, 255):
        a = BinMapper.fit(X, max_bin, w)
        b = BinMapper.from_summaries(summarize(X, w), max_bin)
        np.testing.assert_array_equal(a.thresholds, b.thresholds)
        np.testing.assert_array_equal(a.thr_offsets, b.thr_offsets)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_radix_sorts_match_numpy(dtype):
    """The binning radix sorts order like np.sort (NaN of either sign last), through
    infinities, signed zeros, subnormals and the full exponent range."""
    from bonsai.backends.cpu import radix
    rng = np.random.default_rng(7)
    top = 38 if dtype == np.float32 else 300
    tiny = np.finfo(dtype).smallest_subnormal
    for _ in range(30):
        n = int(rng.integers(1, 2000))
        a = (rng.normal(size=n) * 10.0 ** rng.integers(-top, top)).astype(dtype)
        for value, frac in ((np.nan, 0.1), (-np.nan, 0.05), (np.inf, 0.05), (-np.inf, 0.05),
                            (0.0, 0.05), (-0.0, 0.05), (tiny, 0.02), (-tiny, 0.02)):
            a[rng.random(n) < frac] = value
        b = a.copy()
        if dtype == np.float32:
            radix.radix_sort_f32(b, np.empty(n, np.uint32))
        else:
            radix.radix_sort_f64(b, np.empty(n, np.uint64))
        ref = np.sort(a)
        np.testing.assert_array_equal(np.isnan(b), np.isnan(ref))
        np.testing.assert_array_equal(b[~np.isnan(b)], ref[~np.isnan(ref)])


@pytest.mark.parametrize("n", [5, 70_000])
def test_quantize_scale_from_max_abs_and_non_finite_gradients(n):
    """The fixed-point scales come from max |grad| / max |hess| (one parallel pass,
    equal to numpy's at any thread count); a NaN or infinite gradient or hessian
    raises instead of producing a scale."""
    from bonsai._dtypes import FIXED_POINT_BITS, count_bits, fixed_point_scale
    rng = np.random.default_rng(3)
    g = (rng.normal(size=n) * 3).astype(np.float32)
    h = rng.uniform(0, 2, size=n).astype(np.float32)
    gh = np.empty((n, 2), np.int64)
    for threads in (1, 2):
        with thread_context(threads):
            scales = cpu.quantize(g, h, n, gh)
        sg = fixed_point_scale(float(np.max(np.abs(g))), n)
        sh = fixed_point_scale(float(np.max(np.abs(h))), n, FIXED_POINT_BITS - count_bits(n))
        # the split kernels' named cell scales, reciprocals included
        assert scales == Scales(sg, sh, float(count_bits(n)), 0.0, 1.0 / sg, 1.0 / sh)
    for bad in (np.nan, np.inf, -np.inf):
        for arr in ("g", "h"):
            g2, h2 = g.copy(), h.copy()
            (g2 if arr == "g" else h2)[n // 2] = bad
            with thread_context(2), pytest.raises(FloatingPointError, match="non-finite"):
                cpu.quantize(g2, h2, n, gh)


@pytest.mark.parametrize("n", [1, 7, 40_000, 70_001])
def test_max_abs_equals_numpy_on_its_bit_patterns(n):
    """``max_abs`` takes its maxima over float32 bit patterns: equal to numpy's
    ``max(|x|)`` (float64) with negative values, signed zeros, subnormals and
    infinities in any chunk, NaN (both outputs) for a NaN anywhere; serial and
    parallel alike."""
    from bonsai.backends.cpu.histogram import max_abs
    rng = np.random.default_rng(n)
    base_g = (rng.normal(size=n) * 3).astype(np.float32)
    base_h = rng.uniform(0, 2, size=n).astype(np.float32)
    tiny = np.float32(1e-45)              # the smallest subnormal
    for case in ("plain", "zeros", "subnormal", "big", "inf", "nan_g", "nan_h"):
        g, h = base_g.copy(), base_h.copy()
        at = rng.integers(0, n)
        if case == "zeros":
            g[:] = np.float32(-0.0)
            h[:] = 0.0
        elif case == "subnormal":
            g[:] = tiny
            g[at] = -2 * tiny
        elif case == "big":
            g[at] = -np.float32(3e38)
        elif case == "inf":
            h[at] = -np.inf
        elif case == "nan_g":
            g[at] = np.nan
        elif case == "nan_h":
            h[at] = -np.nan
        want = [float(np.max(np.abs(g.astype(np.float64)))),
                float(np.max(np.abs(h.astype(np.float64))))]
        if case.startswith("nan"):
            want = [np.nan, np.nan]
        for kernel in (max_abs, max_abs.serial):
            got = np.full(2, -1.0)
            kernel(g, h, got)
            np.testing.assert_array_equal(got, want, err_msg=case)


def test_shrink_values_equal_numpy_and_flag_non_finite_values():
    """``nodes.shrink_values`` multiplies in place as numpy does, bit for bit, and
    returns numpy's min and max of the products: NaN for both when a product is NaN,
    +-inf when one overflows or is infinite."""
    from bonsai import nodes as N
    rng = np.random.default_rng(4)
    v = rng.normal(size=37) * 10.0 ** rng.integers(-300, 300, 37)
    for rate in (0.1, 0.3, 1.0, 1e300):
        with np.errstate(over="ignore"):
            want = v * rate
        got = v.copy()
        lo, hi = N.shrink_values(got, rate)
        np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))
        assert (lo, hi) == (want.min(), want.max())
    for bad, expect in ((np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")):
        w = np.array([1.0, bad, -2.0])
        lo, hi = N.shrink_values(w, 0.5)
        if expect == "nan":
            assert np.isnan(lo) and np.isnan(hi)
        else:
            assert (lo, hi) == ((-np.inf, 0.5) if expect == "-inf" else (-1.0, np.inf))


@pytest.mark.parametrize("n_cat_splits", [0, 1, 2])
def test_tree_fields_equal_the_numpy_reference(n_cat_splits):
    """``nodes.tree_fields`` (one compiled pass over the grown rows) gives the node
    arrays, dtypes included, that per-column numpy reads give: leaves' fields blank,
    numeric thresholds from the bin mapper (+inf after the last value bin), NaN for a
    categorical split, the leaves and their row ranges in node order, the sums over
    their scales bit for bit, and each categorical split's words of its left set (as
    many as its feature's bins need: one or two here)."""
    from bonsai import nodes as N
    rng = np.random.default_rng(11)
    n_value_bins = np.array([4, 1, 7, 3, 100], np.int64)
    thr_offsets = np.concatenate([[0], np.cumsum(n_value_bins - 1)]).astype(np.int64)
    thresholds = np.sort(rng.normal(size=int(thr_offsets[-1])))
    n = 9
    ints = np.zeros((n + 3, N.N_COLS), np.int64)       # spare rows are ignored
    ints[:, N.LEFT] = ints[:, N.RIGHT] = -1
    for i, (lo, hi) in enumerate([(1, 2), (3, 4), (5, 6), (7, 8)]):
        ints[i, N.LEFT], ints[i, N.RIGHT] = lo, hi
    ints[:, N.FEATURE] = rng.integers(0, 4, n + 3)
    ints[:, N.BIN] = [min(b, int(n_value_bins[f]) - 1) for b, f in
                      zip(rng.integers(0, 7, n + 3), ints[:, N.FEATURE])]
    if n_cat_splits >= 1:
        ints[1, N.BIN] = -1                              # a categorical split
    if n_cat_splits >= 2:
        ints[3, N.FEATURE], ints[3, N.BIN] = 4, -1       # one of 100 bins: two words
    ints[2, N.FEATURE], ints[2, N.BIN] = 2, 6            # the last value bin: +inf
    ints[:, N.DEFAULT_LEFT] = rng.integers(0, 2, n + 3)
    ints[:, N.COUNT] = rng.integers(1, 100, n + 3)
    ints[:, N.START] = rng.integers(0, 50, n + 3)
    ints[:, N.STOP] = ints[:, N.START] + rng.integers(0, 50, n + 3)
    gain = rng.normal(size=n + 3)
    sums = rng.integers(-2 ** 62, 2 ** 62, (n + 3, 3))
    bits = rng.integers(0, 2 ** 63, (n + 3, 2)).astype(np.uint64) * np.uint64(2) + np.uint64(1)
    sg, sh = 2.0 ** 40, 3.0 ** 20
    got = N.tree_fields(ints, gain, sums, bits, n, n_value_bins, thresholds, thr_offsets,
                        sg, sh)
    t = ints[:n]
    internal = t[:, N.LEFT] >= 0
    feature = np.where(internal, t[:, N.FEATURE], -1).astype(np.int32)
    bins = np.where(internal, t[:, N.BIN], -1).astype(np.int32)
    thr = np.zeros(n)
    for i in np.flatnonzero(internal):
        f, b = feature[i], bins[i]
        thr[i] = (np.nan if b < 0 else np.inf if b >= n_value_bins[f] - 1
                  else thresholds[thr_offsets[f] + b])
    leaves = np.flatnonzero(~internal)
    is_cat = internal & (bins < 0)
    nw = np.where(is_cat, (n_value_bins[np.maximum(feature, 0)] + 63) // 64, 0)
    cat_ptr = np.concatenate([[0], np.cumsum(nw)]).astype(np.int64)
    cat_words = np.zeros(max(int(cat_ptr[-1]), 1), np.uint64)
    for i in np.flatnonzero(is_cat):
        cat_words[cat_ptr[i]:cat_ptr[i + 1]] = bits[i, :nw[i]]
    assert int(cat_ptr[-1]) == [0, 1, 3][n_cat_splits]
    want = (feature, bins, np.where(internal, t[:, N.DEFAULT_LEFT], 0).astype(np.uint8),
            t[:, N.LEFT].astype(np.int32), t[:, N.RIGHT].astype(np.int32),
            t[:, N.COUNT].copy(), np.where(internal, gain[:n], 0.0), thr, n_cat_splits,
            leaves, t[leaves, N.START], t[leaves, N.STOP], sums[:n, 0] / sg,
            sums[:n, 1] / sh, cat_ptr, cat_words)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        if isinstance(b, int):
            assert a == b
            continue
        assert a.dtype == b.dtype or (a.dtype.kind == b.dtype.kind == "i"
                                      and a.dtype.itemsize == b.dtype.itemsize)
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("lam,alpha,mds", [(1.0, 0.0, 0.0), (0.0, 0.5, 0.0), (2.0, 0.3, 0.7),
                                           (0.0, 0.0, 0.0)])
def test_leaf_weights_array_equals_scalar(lam, alpha, mds):
    """The grower's array form of the leaf weight equals the split kernels' scalar one
    bit for bit (signs of zero included), empty and zero-hessian nodes too."""
    from bonsai.backends.cpu._gain import leaf_weight
    from bonsai.backends.cpu.split import leaf_weights
    rng = np.random.default_rng(4)
    g = np.concatenate([rng.normal(size=200) * 3, [0.0, -0.0, 0.2, -0.2, alpha, -alpha]])
    h = np.concatenate([rng.uniform(0, 2, size=200), [0.0, 0.0, 0.0, 1.0, 1.0, 0.0]])
    got = np.empty(g.shape[0])
    leaf_weights(g, h, lam, alpha, mds, got)
    exp = np.array([leaf_weight(a, b, lam, alpha, mds) for a, b in zip(g, h)])
    np.testing.assert_array_equal(got, exp)
    assert np.array_equal(np.signbit(got), np.signbit(exp))
