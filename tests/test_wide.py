"""Wide data: the binned matrix is stored as a row-major mirror tiled into feature
blocks.  These tests make data wide enough for several blocks and check the layout,
the block-parallel histogram plan, partitioning and binned prediction against the
single-block (plain row-major) path and the raw-feature predictor."""
import numpy as np
import pytest

import bonsai
from bonsai.backends import cpu
from bonsai.backends.cpu.layout import block_width, to_blocked
from bonsai.binning import BinMapper


def _wide(n=3000, f=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 5]) + np.nan_to_num(X[:, 250]) ** 2 + 0.3 * rng.normal(size=n) > 1).astype(float)
    return X, y


def test_blocked_layout_matches_per_feature_binning():
    X, _ = _wide()
    bm = BinMapper.fit(X, 255)
    w = block_width(X.shape[1], 255)
    assert w < X.shape[1]
    B = to_blocked(bm.transform_columns(X), bm.max_bin)
    n_blocks = -(-X.shape[1] // w)
    assert B.shape == (n_blocks * X.shape[0], w)
    for f in (0, w - 1, w, 2 * w + 3, X.shape[1] - 1):
        thr = bm.feature_thresholds(f)
        col = np.searchsorted(thr, X[:, f], side="left")
        col[np.isnan(X[:, f])] = bm.missing_bin[f]
        blk = f // w
        np.testing.assert_array_equal(B[blk * X.shape[0]:(blk + 1) * X.shape[0], f - blk * w], col)


def _unblock(B, n, n_features):
    w = B.shape[1]
    out = np.empty((n, n_features), B.dtype)
    for f in range(n_features):
        blk = f // w
        out[:, f] = B[blk * n:(blk + 1) * n, f - blk * w]
    return out


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_block_plan_histograms_equal_row_major(monkeypatch, n_threads):
    monkeypatch.setattr(cpu, "MIN_ROWS_PER_THREAD", 16)
    X, _ = _wide(n=2000)
    bm = BinMapper.fit(X, 255)
    B = to_blocked(bm.transform_columns(X), bm.max_bin)
    R = _unblock(B, X.shape[0], X.shape[1])          # one block: plain row-major
    rng = np.random.default_rng(1)
    gh = np.stack([rng.integers(-2**30, 2**30, X.shape[0]),
                   (rng.integers(0, 2**20, X.shape[0]) << 12) + 1], axis=1).astype(np.int64)
    idx = np.sort(rng.permutation(X.shape[0])[:1500]).astype(np.uint32)
    starts = np.array([0, 700, 700, 1100], np.int64)
    stops = np.array([700, 700, 1100, 1500], np.int64)
    out = {}
    for name, mat in (("blocked", B), ("rowmajor", R)):
        pool = cpu.HistogramPool(int(bm.feat_off[-1]), 4)
        slots = np.array([pool.alloc() for _ in range(4)], np.int64)
        pool.hist[:] = 7  # poison: every used bin must be overwritten
        cpu.build_histograms(pool, mat, bm.feat_off, gh, idx, starts, stops, slots, n_threads)
        out[name] = pool.hist[slots].copy()
    np.testing.assert_array_equal(out["blocked"], out["rowmajor"])
    assert np.all(out["blocked"][1] == 0)  # the empty node


@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
def test_wide_training_deterministic_and_consistent(policy):
    X, y = _wide()
    Xv, yv = _wide(n=500, seed=1)
    models = []
    for n_threads in (1, 2):
        ds = bonsai.Dataset(X, label=y)
        dv = bonsai.Dataset(Xv, label=yv, reference=ds)
        b = bonsai.train({"objective": "binary", "n_estimators": 6, "grow_policy": policy,
                          "subsample": 0.7, "colsample_bytree": 0.9, "max_depth": 4,
                          "n_threads": n_threads, "eval_metric": "logloss",
                          "learning_rate": 0.3}, ds, valid_sets=[dv])
        models.append(b)
    assert models[0].model_to_string() == models[1].model_to_string()
    b = models[1]
    assert b.num_trees() == 6 and any(t.n_nodes > 1 for t in b.trees)
    # the validation margins were accumulated on blocked binned data during training;
    # the raw-feature predictor must give the same logloss
    p = np.clip(b.predict(Xv), 1e-15, 1 - 1e-15)
    logloss = -np.mean(yv * np.log(p) + (1 - yv) * np.log(1 - p))
    np.testing.assert_allclose(b.evals_result["valid_0"]["logloss"][-1], logloss, rtol=1e-12)


def test_column_copy_matches_blocked():
    X, _ = _wide(n=700)
    ds = bonsai.Dataset(X)
    np.testing.assert_array_equal(ds.X_cols.T, _unblock(cpu.prepare(ds).X_hist, X.shape[0], X.shape[1]))
