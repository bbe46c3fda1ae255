"""Property-based tests (hypothesis) of the invariants the kernels and the models
promise, on data hypothesis draws and shrinks: the histogram kernel equals the
pure-Python oracle at any thread count and node layout, binning keeps the
``x <= threshold[b]  <=>  bin(x) <= b`` convention with NaN in the missing bin, and a
model's bytes do not depend on the thread count, the memory order or the dtype of
integer-valued data.

Examples are derandomized (the same ones every run) and no example database is
written, so the suite stays deterministic.
"""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import bonsai
from bonsai._threads import thread_context
from bonsai.backends import cpu
from bonsai.backends.cpu.layout import to_blocked
from bonsai.binning import BinMapper
from reference.naive import gh_parts, hist_to_ghc, naive_histogram

PROPERTY = settings(max_examples=40, deadline=None, derandomize=True, database=None)


@st.composite
def _histogram_case(draw):
    n = draw(st.integers(1, 300))
    n_value_bins = draw(st.lists(st.integers(1, 40), min_size=1, max_size=5))
    p_missing = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    cuts = sorted(draw(st.lists(st.integers(0, n), max_size=4)))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    n_threads = draw(st.integers(1, 3))
    min_rows = draw(st.sampled_from([1, 7, 10 ** 6]))   # how finely threads split nodes
    return n, n_value_bins, p_missing, [0] + cuts + [n], seed, n_threads, min_rows


@PROPERTY
@given(_histogram_case())
def test_histograms_equal_the_oracle(case):
    n, n_value_bins, p_missing, bounds, seed, n_threads, min_rows = case
    rng = np.random.default_rng(seed)
    nv = np.asarray(n_value_bins, np.int64)
    feat_off = np.concatenate([[0], np.cumsum(nv + 1)]).astype(np.int64)
    cols = []
    for v in n_value_bins:
        c = rng.integers(0, v, n)
        c[rng.random(n) < p_missing] = v          # the missing bin
        cols.append(c)
    X = np.ascontiguousarray(np.stack(cols, axis=1).astype(np.uint8))
    g = (rng.standard_cauchy(n) * 10.0 ** rng.integers(-6, 6, n)).astype(np.float32)
    h = rng.uniform(0.0, 2.0, n).astype(np.float32)
    gh = np.empty((n, 2), np.int64)
    with thread_context(2):
        scales = cpu.quantize(g, h, n, gh)
    gq, hq, _ = gh_parts(gh, scales)
    idx = rng.permutation(n).astype(np.uint32)
    starts, stops = np.array(bounds[:-1], np.int64), np.array(bounds[1:], np.int64)
    for a, b in zip(starts, stops):
        idx[a:b].sort()
    pool = cpu.HistogramPool(int(feat_off[-1]), capacity=1)
    slots = np.array([pool.alloc() for _ in starts], np.int64)
    pool.hist[slots] = 12345                       # build_histograms must overwrite
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cpu, "MIN_ROWS_PER_THREAD", min_rows)
        with thread_context(n_threads):
            cpu.build_histograms(pool, X, feat_off, gh, idx, starts, stops, slots, n_threads)
    for j, (a, b) in enumerate(zip(starts, stops)):
        np.testing.assert_array_equal(hist_to_ghc(pool.hist[slots[j]], scales),
                                      naive_histogram(X, feat_off, gq, hq, idx[a:b]))


_finite = st.floats(-1e6, 1e6, allow_nan=False, width=64)
_value = st.one_of(_finite, st.just(np.nan), st.sampled_from([0.0, 1.0, -2.5]))


@PROPERTY
@given(train=hnp.arrays(np.float64, st.tuples(st.integers(1, 200), st.integers(1, 3)),
                        elements=_value),
       new=hnp.arrays(np.float64, st.integers(1, 50),
                      elements=st.one_of(_value, st.sampled_from([np.inf, -np.inf]))),
       max_bin=st.integers(2, 300))
def test_binning_keeps_the_threshold_convention(train, new, max_bin):
    bm = BinMapper.fit(train, max_bin=max_bin)
    Z = np.repeat(new[:, None], train.shape[1], axis=1)
    for X in (train, Z):
        B = to_blocked(bm.transform_columns(X), bm.max_bin)
        assert B.dtype == (np.uint8 if max_bin <= 255 else np.uint16)
        for f in range(X.shape[1]):
            thr = bm.feature_thresholds(f)
            assert thr.size < max_bin and np.all(np.diff(thr) > 0)
            assert bm.n_value_bins[f] == thr.size + 1
            x, b = X[:, f], B[:, f].astype(np.int64)
            miss = np.isnan(x)
            np.testing.assert_array_equal(b[miss], bm.missing_bin[f])
            np.testing.assert_array_equal(b[~miss], np.searchsorted(thr, x[~miss], side="left"))
        # every distinct training value up to max_bin of them keeps its own bin
        for f in range(train.shape[1]):
            u = np.unique(train[~np.isnan(train[:, f]), f])
            if 0 < u.size <= max_bin:
                assert np.unique(to_blocked(bm.transform_columns(train), bm.max_bin)[~np.isnan(train[:, f]), f]).size == u.size


@st.composite
def _training_case(draw):
    n = draw(st.integers(30, 400))
    n_features = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2 ** 32 - 1))
    params = {
        "objective": draw(st.sampled_from(["squared_error", "binary", "huber"])),
        "grow_policy": draw(st.sampled_from(["depthwise", "leafwise", "oblivious"])),
        "max_depth": draw(st.integers(1, 5)),
        "n_estimators": draw(st.integers(1, 6)),
        "subsample": draw(st.sampled_from([1.0, 0.7])),
        "colsample_bytree": draw(st.sampled_from([1.0, 0.6])),
        "min_child_samples": draw(st.integers(1, 20)),
    }
    if params["grow_policy"] == "leafwise":
        params["max_leaves"] = draw(st.integers(2, 16))
    return n, n_features, seed, params, draw(st.sampled_from([0.0, 0.2]))


@PROPERTY
@given(_training_case())
def test_model_bytes_independent_of_threads_order_and_dtype(case):
    n, n_features, seed, params, p_missing = case
    rng = np.random.default_rng(seed)
    X = rng.integers(-20, 20, size=(n, n_features)).astype(np.float64)   # exact in float32
    X[rng.random(X.shape) < p_missing] = np.nan
    y = np.nan_to_num(X[:, 0]) + rng.normal(size=n)
    if params["objective"] == "binary":
        y = (y > np.median(y)).astype(np.float64)
    models = set()
    for data, n_threads in ((X, 1), (X, 2), (np.asfortranarray(X), 2),
                            (X.astype(np.float32), 2)):
        b = bonsai.train({**params, "n_threads": n_threads}, bonsai.Dataset(data, label=y))
        models.add(b.model_to_string())
    assert len(models) == 1
