"""The split step (``backend.split_nodes``): one compiled call per batch, and the same
steps run as separate timed calls under BONSAI_PROFILE must grow the same trees."""
import numpy as np
import pytest

import bonsai
from bonsai import _profile
from bonsai.backends import cpu
from bonsai.backends.cpu import step


@pytest.mark.parametrize("seed", range(20))
def test_plan_pieces_cover_rows_in_order(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 9))
    sizes = rng.integers(0, 3000, m) * (rng.random(m) < 0.8)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) + 7
    stops = starts + sizes
    n_threads = int(rng.integers(1, 5))
    min_rows = int(rng.integers(1, 2000))
    node, ps, pe, ptr = step.plan_pieces(starts, stops, n_threads, min_rows)
    total = int(sizes.sum())
    n_t = max(1, min(n_threads, total // min_rows))
    assert ptr.shape[0] == n_t + 1 and ptr[0] == 0 and ptr[-1] == node.shape[0]
    assert np.all(np.diff(ptr) >= 0)
    # every row of every node exactly once, pieces of a node consecutive and in order
    for i in range(m):
        mine = np.flatnonzero(node == i)
        if sizes[i] == 0:
            assert mine.size == 0
            continue
        assert np.all(np.diff(mine) == 1)
        assert ps[mine[0]] == starts[i] and pe[mine[-1]] == stops[i]
        np.testing.assert_array_equal(ps[mine[1:]], pe[mine[:-1]])
    assert np.all(pe > ps)
    # threads get equal shares of the rows (to one row)
    per_thread = [int((pe - ps)[ptr[j]:ptr[j + 1]].sum()) for j in range(n_t)]
    assert sum(per_thread) == total
    assert max(per_thread) - min(per_thread) <= 1


def _data(n=3000, f=12, seed=0, sparse=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    if sparse:
        X[rng.random(X.shape) < 0.9] = 0.0
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 3]) + 0.5 * rng.normal(size=n) > 0)
    return X, y.astype(float)


@pytest.mark.parametrize("extra", [
    {"grow_policy": "depthwise", "max_depth": 5},
    {"grow_policy": "leafwise", "max_leaves": 24, "max_depth": 0},
    {"grow_policy": "oblivious", "max_depth": 4},
    {"grow_policy": "leafwise", "max_leaves": 16, "quantized_grad": True},
    {"grow_policy": "depthwise", "max_depth": 4, "colsample_bynode": 0.5, "subsample": 0.8},
])
@pytest.mark.parametrize("sparse", [False, True])
def test_profiled_steps_grow_the_same_trees(monkeypatch, extra, sparse):
    monkeypatch.setattr(cpu, "MIN_ROWS_PER_THREAD", 256)       # cut nodes between threads
    monkeypatch.setattr(cpu, "MIN_PARTITION_ROWS_PER_THREAD", 256)
    X, y = _data(sparse=sparse)
    is_sparse = isinstance(cpu.prepare(bonsai.Dataset(X, label=y)).X_hist, cpu.SparseRows)
    assert is_sparse == sparse   # the layout under test
    params = dict(objective="binary", n_threads=2, min_child_samples=5, **extra)
    models = []
    for enabled in (False, True):
        monkeypatch.setattr(_profile, "ENABLED", enabled)
        b = bonsai.train(params, bonsai.Dataset(X, label=y), num_boost_round=4)
        models.append(b.model_to_string())
        _profile.reset()
        assert min(t.n_nodes for t in b.trees) >= 7
    assert models[0] == models[1]
