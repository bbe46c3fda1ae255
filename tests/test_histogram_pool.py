"""Histogram memory of the grow loop: leaf-wise frees the histograms of leaves that
can no longer be split, depth-wise takes the level above max_depth a few parents at a
time.  Both must leave the trees unchanged and lower the number of live histograms."""
import numpy as np
import pytest

import bonsai
from bonsai import grow
from bonsai.backends.cpu import HistogramPool


@pytest.fixture
def live_slots(monkeypatch):
    """Record the most histogram slots held at once during a fit."""
    peak = {"n": 0}
    orig_alloc = HistogramPool.alloc

    def alloc(self):
        slot = orig_alloc(self)
        held = self.hist.shape[0] - len(self.free)
        peak["n"] = max(peak["n"], held)
        return slot

    monkeypatch.setattr(HistogramPool, "alloc", alloc)
    return peak


def _data(n=6000, f=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    X[rng.random((n, f)) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.sin(3 * np.nan_to_num(X[:, 1])) * X[:, 2] ** 2
         + 0.3 * rng.normal(size=n) > 0.5).astype(float)
    return X, y


def _fit(params, X, y, rounds=4):
    b = bonsai.train({"objective": "binary", "n_threads": 2, "min_child_samples": 5, **params},
                     bonsai.Dataset(X, label=y), num_boost_round=rounds)
    return b.model_to_string()


@pytest.mark.parametrize("extra", [{}, {"colsample_bynode": 0.6, "max_depth": 9}])
def test_leafwise_prune_keeps_trees_and_frees_histograms(monkeypatch, live_slots, extra):
    X, y = _data()
    params = {"grow_policy": "leafwise", "max_leaves": 96, **extra}
    # the Python loop, whose pool allocations the fixture sees (the compiled loop
    # prunes the same way: test_leafwise_compiled)
    monkeypatch.setattr(grow, "LEAFWISE_COMPILED", False)
    monkeypatch.setattr(grow.Grower, "PRUNE_SLACK", 10 ** 9)     # never prune
    ref = _fit(params, X, y)
    unpruned = live_slots["n"]
    live_slots["n"] = 0
    monkeypatch.setattr(grow.Grower, "PRUNE_SLACK", 0)           # prune at every split
    assert _fit(params, X, y) == ref
    assert live_slots["n"] <= unpruned
    if not extra:   # no depth cap: trees reach 96 leaves, about half stay live
        assert live_slots["n"] < 0.7 * unpruned, (live_slots["n"], unpruned)


@pytest.mark.parametrize("extra", [{}, {"colsample_bynode": 0.6, "colsample_bylevel": 0.8},
                                   {"max_leaves": 50}])
def test_depthwise_last_level_passes_keep_trees(monkeypatch, live_slots, extra):
    X, y = _data(seed=1)
    params = {"grow_policy": "depthwise", "max_depth": 7, **extra}
    monkeypatch.setattr(grow.Grower, "LAST_LEVEL_CHUNK", 10 ** 9)  # the whole level at once
    ref = _fit(params, X, y)
    whole = live_slots["n"]
    live_slots["n"] = 0
    monkeypatch.setattr(grow.Grower, "LAST_LEVEL_CHUNK", 2)
    assert _fit(params, X, y) == ref
    if not extra:
        assert live_slots["n"] < 0.7 * whole, (live_slots["n"], whole)
