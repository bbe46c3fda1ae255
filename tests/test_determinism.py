"""Bit-identical models at any thread count, and across repeated runs.

The model string (``model_to_string()``) must be byte-identical at n_threads=1 and
n_threads=2, and across two runs, for every grow policy and the main objectives,
with row subsampling and column sampling on.  The data is made to expose any
float-summation-order bug: sample weights and targets spanning many orders of
magnitude, several rounds (so later-round gradients are tiny for most rows and large
for a few), and enough rows (20k, 14k after subsampling) that the root level has
more than ``MIN_ROWS_PER_THREAD`` rows per thread, so the 2-thread path really
splits work.  A second 2-thread run lowers ``MIN_ROWS_PER_THREAD`` so deep levels
and small nodes are split across threads as well.
"""
import json

import numpy as np
import pytest

import bonsai
from bonsai.backends import cpu

N_ROWS = 20_000
N_FEATURES = 10
SUBSAMPLE = 0.7
OBJECTIVES = {
    "squared_error": {},
    "binary": {},
    "multiclass": {"num_class": 3},
    # a leaf-output cap (as XGBoost's poisson default): without it these extreme
    # weights make the Newton steps diverge (LightGBM diverges on this data too)
    "poisson": {"max_delta_step": 0.7},
    "absolute_error": {},
    "quantile": {"alpha": 0.8},
}
POLICIES = {
    "depthwise": {"max_depth": 6},
    "leafwise": {"max_leaves": 31},
    "oblivious": {"max_depth": 6},
}


def _data(objective):
    rng = np.random.default_rng(2024)
    X = rng.normal(size=(N_ROWS, N_FEATURES))
    X[:, 3] = np.exp(3.0 * X[:, 3])                     # heavy-tailed feature
    X[:, 7] = np.round(X[:, 7], 1)                      # many ties
    X[rng.random((N_ROWS, N_FEATURES)) < 0.05] = np.nan
    Xf = np.nan_to_num(X)
    f = 1.5 * Xf[:, 0] - Xf[:, 1] * Xf[:, 2] + np.log1p(np.abs(Xf[:, 3])) + np.sin(3 * Xf[:, 4])
    if objective in ("squared_error", "absolute_error", "quantile"):
        # heavy tails: scale spans ~10 orders of magnitude, plus Cauchy noise
        y = f * np.exp(2.5 * rng.normal(size=N_ROWS)) + rng.standard_cauchy(N_ROWS)
        y = np.clip(y, -1e8, 1e8)
    elif objective == "poisson":
        y = rng.poisson(np.minimum(np.exp(0.7 * f + rng.normal(size=N_ROWS)), 1e6)).astype(float)
    elif objective == "binary":
        y = (rng.random(N_ROWS) < 1 / (1 + np.exp(-2 * f))).astype(float)
    else:
        y = np.digitize(f + rng.normal(size=N_ROWS), [-0.5, 1.0]).astype(float)
    w = np.exp(2.0 * rng.normal(size=N_ROWS))           # weights over ~8 orders
    return X, y, w


_DATA = {}


def _datasets(objective):
    if objective not in _DATA:
        X, y, w = _data(objective)
        n_tr = 16_000
        tr = bonsai.Dataset(X[:n_tr], label=y[:n_tr], weight=w[:n_tr])
        va = bonsai.Dataset(X[n_tr:], label=y[n_tr:], reference=tr)
        _DATA[objective] = (tr, va, X[n_tr:])
    return _DATA[objective]


def _fit(objective, policy, n_threads):
    tr, va, _ = _datasets(objective)
    params = {"objective": objective, "grow_policy": policy, "n_estimators": 8,
              "learning_rate": 0.3, "subsample": SUBSAMPLE, "colsample_bytree": 0.8,
              "colsample_bynode": 0.8, "random_state": 7, "n_threads": n_threads,
              "min_child_samples": 5, **OBJECTIVES[objective], **POLICIES[policy]}
    return bonsai.train(params, tr, valid_sets=[va], valid_names=["valid"])


def test_root_level_really_uses_two_threads():
    import numba
    assert numba.config.NUMBA_NUM_THREADS >= 2, (
        "numba runs 1 thread here, so n_threads=2 cannot differ from 1; run the tests with "
        "NUMBA_NUM_THREADS=2 (or more CPUs)")
    n_sampled = int(round(SUBSAMPLE * 16_000))
    node, _, _, thread_ptr = cpu.plan_pieces(np.array([0], np.int64),
                                             np.array([n_sampled], np.int64), 2)
    assert thread_ptr.shape[0] - 1 == 2, "the data must be large enough to split the root"


@pytest.mark.parametrize("policy", list(POLICIES))
@pytest.mark.parametrize("objective", list(OBJECTIVES))
def test_model_bytes_identical_across_threads_and_runs(objective, policy, monkeypatch):
    b1 = _fit(objective, policy, 1)
    b2 = _fit(objective, policy, 2)
    b2_again = _fit(objective, policy, 2)
    monkeypatch.setattr(cpu, "MIN_ROWS_PER_THREAD", 64)  # split even small nodes
    monkeypatch.setattr(cpu, "MIN_PARTITION_ROWS_PER_THREAD", 64)
    monkeypatch.setattr(cpu, "MIN_PARALLEL_SPLIT_NODES", 1)
    b2_fine = _fit(objective, policy, 2)
    s1 = b1.model_to_string()
    assert b1.num_trees() == 8 * (3 if objective == "multiclass" else 1)
    assert sum(t.n_leaves for t in b1.trees) > b1.num_trees(), "trees must actually split"
    for name, b in (("n_threads=2", b2), ("n_threads=2 repeated", b2_again),
                    ("n_threads=2, MIN_ROWS_PER_THREAD=64", b2_fine)):
        s = b.model_to_string()
        if s != s1:
            d1, d = json.loads(s1), json.loads(s)
            first = next((i for i, (t1, t) in enumerate(zip(d1["trees"], d["trees"])) if t1 != t),
                         None)
            pytest.fail(f"{objective}/{policy}: model at {name} differs from n_threads=1 "
                        f"(first differing tree: {first})")
        assert b.evals_result == b1.evals_result, f"{objective}/{policy}: {name} metrics differ"
    assert "n_threads" not in s1, "n_threads is a machine setting, not part of the model"
    _, _, Xv = _datasets(objective)
    np.testing.assert_array_equal(b1.predict(Xv), b2.predict(Xv))
