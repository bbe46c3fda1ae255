"""Scale limits (``bonsai._limits``, README "Scale limits"): a fit past 2**31 cells
trains the right model, and every bound that stays is a ValueError naming it, raised
before anything big is allocated."""
import numpy as np
import pytest
import scipy.sparse as sp
from numpy.lib.stride_tricks import as_strided

import bonsai
from bonsai import _limits
from bonsai.backends.cpu import HistogramPool


def _available_bytes():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _small(n=400, f=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    return X, (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(float)


def test_rows_past_uint32_are_refused_before_any_row_is_read():
    # a broadcast view: 2**32 rows, no memory behind them
    X = np.broadcast_to(np.float32(1.0), ((1 << 32), 1))
    with pytest.raises(ValueError, match=r"4294967296 rows.*2\*\*32 - 1"):
        bonsai.Dataset(X, label=None)


def test_quantized_rows_limit(monkeypatch):
    X, y = _small()
    monkeypatch.setattr(_limits, "MAX_QUANTIZED_ROWS", 300)
    with pytest.raises(ValueError, match="quantized_grad=True trains on at most 300"):
        bonsai.train({"objective": "binary", "quantized_grad": True},
                     bonsai.Dataset(X, label=y), num_boost_round=1)
    # exact cells have no such bound
    bonsai.train({"objective": "binary"}, bonsai.Dataset(X, label=y), num_boost_round=1)


def test_histogram_memory_message_for_max_bin_65535_and_1000_features():
    # 1000 continuous features at max_bin 65535: 65537 bins each, 1 GiB a histogram
    with pytest.raises(ValueError, match=r"max_bin=65535: the 1000 features have 65537000 "
                                         r"bins.*1000\.0 MiB a histogram.*35 histograms"):
        _limits.check_histogram_memory(65537 * 1000, 2, 35, 1000, 65535, limit=24 << 30)
    _limits.check_histogram_memory(65537 * 1000, 2, 20, 1000, 65535, limit=24 << 30)


@pytest.mark.parametrize("params", [{}, {"multi_strategy": "multi_output_tree",
                                         "objective": "multi_squared_error"}])
def test_histogram_memory_is_checked_before_the_pool_exists(monkeypatch, params):
    X, y = _small(f=40)
    if params:
        y = np.stack([y, -y], axis=1)
    made = []
    monkeypatch.setattr(HistogramPool, "__init__",
                        lambda self, *a, **k: made.append(a) or (_ for _ in ()).throw(
                            AssertionError("pool allocated")))
    monkeypatch.setattr(_limits, "memory_bytes", lambda: 1 << 20)   # a 1 MiB machine
    with pytest.raises(ValueError, match=r"max_bin=255: the 40 features have \d+ bins.*"
                                         r"Lower max_bin, max_leaves or max_depth"):
        bonsai.train({"objective": "binary", **params}, bonsai.Dataset(X, label=y),
                     num_boost_round=1)
    assert not made


def test_pool_and_node_table_are_bounded_by_the_rows(monkeypatch):
    """max_leaves at its cap on 400 rows: at most 400 / min_child_samples leaves, so
    the pool holds that many slots, not 65536."""
    caps = []
    orig = HistogramPool.__init__

    def init(self, n_bins_total, capacity=8, channels=2):
        caps.append(capacity)
        orig(self, n_bins_total, capacity, channels)

    monkeypatch.setattr(HistogramPool, "__init__", init)
    X, y = _small()
    ref = None
    for leaves in (131072, 65535, 31):
        b = bonsai.train({"objective": "binary", "grow_policy": "leafwise",
                          "max_leaves": leaves, "n_threads": 1,
                          "min_child_samples": 20}, bonsai.Dataset(X, label=y),
                         num_boost_round=3)
        pred = b.predict(X, output_margin=True)
        # 400 rows hold at most 20 leaves: every cap above 20 grows the same trees
        ref = pred if ref is None else ref
        np.testing.assert_array_equal(pred, ref)
    assert caps[0] <= 400 // 20 + 3 and caps[1] <= 400 // 20 + 3, caps


def test_sparse_bins_past_uint32_are_refused(monkeypatch):
    monkeypatch.setattr(_limits, "MAX_SPARSE_BINS", 50)
    X = sp.random(200, 30, density=0.3, format="csr", random_state=0)
    with pytest.raises(ValueError, match=r"max_bin: .* bins in all, more than the 50"):
        bonsai.Dataset(X, label=np.zeros(200))


def test_more_than_2_21_features_predict_through_the_node_walk():
    """The packed node records hold 21 bits of feature index; a model splitting on a
    feature past that predicts (node by node) the values the sparse path gives."""
    n, F = 300, (1 << 21) + 8
    rng = np.random.default_rng(0)
    last = rng.normal(size=n)
    rows = np.arange(n)
    X = sp.csr_matrix((np.concatenate([last, rng.normal(size=n)]),
                       (np.concatenate([rows, rows]),
                        np.concatenate([np.full(n, F - 1), np.full(n, 3)]))), shape=(n, F))
    y = (last > 0.2).astype(float)
    b = bonsai.train({"objective": "binary", "max_depth": 2, "min_child_samples": 5},
                     bonsai.Dataset(X, label=y), num_boost_round=3)
    assert b.trees_to_dataframe()["split_feature"].iloc[0] == f"f{F - 1}"
    ref = b.predict(X[:5])                      # sparse: features renumbered
    dense = X[:5].toarray().astype(np.float32)
    np.testing.assert_array_equal(b.predict(dense), ref)
    np.testing.assert_array_equal(b.predict(X[:5].toarray()), ref)
    assert ((b.predict(X) > 0.5) == (y > 0.5)).mean() == 1.0


@pytest.mark.skipif(_available_bytes() < 8 << 30, reason="needs 8 GB of free memory")
def test_more_than_2_31_cells_train_the_right_trees():
    """2**21 + 1 rows x 1024 features (2**31 + 1024 cells, uint8 bins: 2 GB, and its
    blocked mirror as much).  The raw matrix is a strided view of one short vector
    (column f is the vector shifted by 7 f), so it costs no memory; the label depends
    on the last two features, whose cells lie past 2**31 in every layout."""
    n, F, shift = (1 << 21) + 1, 1024, 7
    rng = np.random.default_rng(0)
    buf = rng.integers(0, 16, n + shift * F, dtype=np.int8).astype(np.float32)
    X = as_strided(buf, shape=(n, F), strides=(4, 4 * shift), writeable=False)
    a, c = X[:, F - 1], X[:, F - 2]
    y = ((a >= 8) & (c >= 4)).astype(np.float32)
    ds = bonsai.Dataset(X, label=y, max_bin=15)
    assert ds.X_cols.shape == (F, n) and ds.X_cols.shape[0] * ds.X_cols.shape[1] > 1 << 31
    tail = np.ascontiguousarray(X[-64:])
    np.testing.assert_array_equal(ds.X_cols[:, -64:], ds.bin_mapper.transform_columns(tail))
    b = bonsai.train({"objective": "binary", "max_depth": 2, "learning_rate": 1.0},
                     ds, num_boost_round=2)
    t = b.trees_to_dataframe()
    t0 = t[t.tree_index == 0].set_index("node_index")
    assert t0.loc[0, "split_feature"] == f"f{F - 1}" and t0.loc[0, "count"] == n
    # the row counts the histograms and the partition read agree with numpy's
    left = int((a <= t0.loc[0, "threshold"]).sum())
    assert {int(t0.loc[1, "count"]), int(t0.loc[2, "count"])} == {left, n - left}
    inner = t0[(t0.depth == 1) & ~t0.is_leaf]
    assert list(inner["split_feature"]) == [f"f{F - 2}"]
    kids = t0[t0.parent_index == inner.index[0]]
    ok = (a > t0.loc[0, "threshold"]) & (c <= inner["threshold"].iloc[0])
    assert int(ok.sum()) in set(kids["count"].astype(int))
    p = b.predict(tail)
    assert ((p > 0.5) == (y[-64:] > 0.5)).all()
    # the histograms' sums (read from the row-major layout, whose offsets pass 2**31)
    # agree with the partition's counts: the first tree's hessians are one value
    # p(1 - p) a row, and the leaves' sums come from their parents' split bins of
    # f1022 / f1023, the last features of the last block
    q = float(y.mean())
    np.testing.assert_allclose(t0["cover"].to_numpy(float),
                               t0["count"].to_numpy(float) * q * (1 - q), rtol=1e-6)
