"""The sparse-rows histogram layout: rows list only their cells outside each
feature's most frequent bin, and a fill restores the skipped bins from the node
totals.  Histograms and whole models must equal the dense layout's exactly."""
import numpy as np
import pytest

import bonsai
from bonsai.backends import cpu
from bonsai.backends.cpu import layout
from bonsai.backends.cpu.layout import CpuData, SparseRows, sparse_rows, to_blocked
from bonsai.binning import BinMapper


def _onehot_like(n=3000, f=60, seed=0):
    """Mostly-zero 0/1 columns, a few continuous ones, and NaN."""
    rng = np.random.default_rng(seed)
    X = (rng.random((n, f)) < rng.uniform(0.01, 0.3, f)).astype(np.float64)
    X[:, :4] = rng.normal(size=(n, 4))
    X[rng.random((n, f)) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + 2 * np.nan_to_num(X[:, 7]) - np.nan_to_num(X[:, 9])
         + 0.5 * rng.normal(size=n) > 0.2).astype(float)
    return X, y


def test_layout_lists_exactly_the_non_default_cells():
    X, _ = _onehot_like(n=500)
    bm = BinMapper.fit(X, 255)
    cols = bm.transform_columns(X)
    sp = sparse_rows(cols, bm.feat_off)
    assert isinstance(sp, SparseRows)
    for f in range(cols.shape[0]):
        counts = np.bincount(cols[f])
        assert counts[sp.default_bin[f]] == counts.max()
    for r in (0, 1, 250, 499):
        want = [bm.feat_off[f] + cols[f, r] for f in range(cols.shape[0])
                if cols[f, r] != sp.default_bin[f]]
        np.testing.assert_array_equal(sp.bins[sp.ptr[r]:sp.ptr[r + 1]], want)


def test_dense_data_keeps_the_dense_layout():
    rng = np.random.default_rng(0)
    ds = bonsai.Dataset(rng.normal(size=(2000, 10)), rng.normal(size=2000))
    data = cpu.prepare(ds)
    assert isinstance(data.X_hist, np.ndarray) and data.X_cols is ds.X_cols
    assert cpu.prepare(ds) is data          # built once, cached on the Dataset


@pytest.mark.parametrize("channels", [2, 1])
@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_sparse_histograms_equal_dense(monkeypatch, channels, n_threads):
    monkeypatch.setattr(cpu, "MIN_ROWS_PER_THREAD", 16)
    X, _ = _onehot_like()
    bm = BinMapper.fit(X, 255)
    dense = to_blocked(bm.transform_columns(X), bm.max_bin)
    sp = sparse_rows(bm.transform_columns(X), bm.feat_off)
    assert sp is not None
    rng = np.random.default_rng(1)
    n = X.shape[0]
    if channels == 2:
        gh = np.stack([rng.integers(-2**30, 2**30, n),
                       (rng.integers(0, 2**20, n) << 12) + 1], axis=1).astype(np.int64)
    else:
        gh = ((rng.integers(-100, 100, n) << 32) + rng.integers(0, 100, n)).astype(np.int64)[:, None]
    idx = np.sort(rng.permutation(n)[:2200]).astype(np.uint32)
    starts = np.array([0, 900, 900, 1500], np.int64)
    stops = np.array([900, 900, 1500, 2200], np.int64)
    out = {}
    for name, mat in (("dense", dense), ("sparse", sp)):
        pool = cpu.HistogramPool(int(bm.feat_off[-1]), capacity=8, channels=channels)
        slots = np.array([pool.alloc() for _ in starts], np.int64)
        pool.hist[:] = 12345  # stale contents must be overwritten
        cpu.build_histograms(pool, mat, bm.feat_off, gh, idx, starts, stops, slots, n_threads)
        out[name] = pool.hist[slots].copy()
    np.testing.assert_array_equal(out["sparse"], out["dense"])
    # the root: identity rows
    root = {}
    for name, mat in (("dense", dense), ("sparse", sp)):
        pool = cpu.HistogramPool(int(bm.feat_off[-1]), capacity=4, channels=channels)
        s = np.array([pool.alloc()], np.int64)
        cpu.build_histograms(pool, mat, bm.feat_off, gh, np.arange(n, dtype=np.uint32),
                             np.array([0]), np.array([n]), s, n_threads, identity=True)
        root[name] = pool.hist[s[0]].copy()
    np.testing.assert_array_equal(root["sparse"], root["dense"])


def _dense_dataset(X, y):
    """A Dataset whose prepared CPU layout is the dense blocked mirror."""
    ds = bonsai.Dataset(X, y)
    ds._backend_data = {"cpu": CpuData(ds.X_cols, to_blocked(ds.X_cols, ds.max_bin),
                                       ds.bin_mapper)}
    return ds


@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
@pytest.mark.parametrize("quantized", [False, True])
def test_models_identical_to_dense_layout_and_across_threads(policy, quantized, split_finely,
                                                            work_log):
    """Sparse rows at 1 and 2 threads and the dense layout at 2 threads; the lowered
    work-split thresholds cut the 2,400 sampled rows between the threads (``work_log``
    checks every 2-thread fit)."""
    X, y = _onehot_like()
    ds = bonsai.Dataset(X, y)
    assert isinstance(cpu.prepare(ds).X_hist, SparseRows)
    params = dict(objective="binary", max_depth=5, grow_policy=policy, subsample=0.8,
                  colsample_bynode=0.8, quantized_grad=quantized, random_state=3)
    models = []
    for t, d in ((1, ds), (2, ds), (2, _dense_dataset(X, y))):
        work_log.clear()
        models.append(bonsai.train(dict(params, n_threads=t), d,
                                   num_boost_round=8).model_to_string())
        work_log.check_fit(t, f"{'sparse' if d is ds else 'dense'} rows {policy}")
    assert models[0] == models[1] == models[2]


def test_threshold_chooses_layout(monkeypatch):
    X, y = _onehot_like(n=800)
    monkeypatch.setattr(layout, "SPARSE_ROW_FRACTION", 0.0)
    assert isinstance(cpu.prepare(bonsai.Dataset(X, y)).X_hist, np.ndarray)
    monkeypatch.setattr(layout, "SPARSE_ROW_FRACTION", 1.0)
    assert isinstance(cpu.prepare(bonsai.Dataset(X, y)).X_hist, SparseRows)
    # validation data is never laid out for histograms
    train = bonsai.Dataset(X, y)
    valid = bonsai.Dataset(X, y, reference=train)
    bonsai.train({"n_estimators": 2, "n_threads": 1}, train, valid_sets=[valid])
    assert getattr(valid, "_backend_data", None) is None
    assert isinstance(train._backend_data["cpu"].X_hist, SparseRows)
