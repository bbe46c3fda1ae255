"""Quantized-gradient mode: stochastically rounded integer gradients packed into one
64-bit histogram cell.  Checks the packing, determinism at any thread count, and that
accuracy stays close to the exact mode."""
import numpy as np
import pytest

import bonsai
from bonsai._threads import thread_context
from bonsai.backends import cpu


def _data(n=6000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    X[rng.random(X.shape) < 0.05] = np.nan
    logit = 1.5 * np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) ** 2 + 0.5 * rng.normal(size=n)
    y = (logit > 0).astype(float)
    return X, y


def test_packed_quantization_is_unbiased_and_unpacks_exactly():
    rng = np.random.default_rng(1)
    n = 50_000
    g = rng.normal(size=n).astype(np.float32)
    h = rng.uniform(0.0, 0.25, n).astype(np.float32)
    out = np.empty((n, 1), np.int64)
    with thread_context(2):
        scales = cpu.quantize(g, h, n, out, quant_bins=16, seed=123)
    assert scales.packed == 1.0 and scales.count_bits == 0.0
    assert (scales.inv_grad, scales.inv_hess) == (1.0 / scales.grad, 1.0 / scales.hess)
    gq = out[:, 0] >> 32
    hq = out[:, 0] & 0xFFFFFFFF
    assert np.all(np.abs(gq) <= 17) and np.all((hq >= 0) & (hq <= 17))
    # each value is one of the two neighbouring integers of value * scale
    assert np.all(np.abs(gq - g * scales.grad) < 1.0)
    assert np.all(np.abs(hq - h * scales.hess) < 1.0)
    # stochastic rounding is unbiased: the sum stays close to the exact sum
    assert abs(gq.sum() / scales.grad - g.astype(np.float64).sum()) < 4 * np.sqrt(n) / scales.grad
    # a sum of packed cells unpacks to the sums of the parts
    tot = out[:, 0].sum()
    assert (tot >> 32) == gq.sum() and (tot & 0xFFFFFFFF) == hq.sum()
    # the rounding depends on the seed and row only, not on the thread count
    out1 = np.empty_like(out)
    with thread_context(1):
        cpu.quantize(g, h, n, out1, quant_bins=16, seed=123)
    np.testing.assert_array_equal(out, out1)


@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
def test_quantized_model_bytes_identical_across_threads(policy, split_finely, work_log):
    """4,800 sampled rows: the lowered work-split thresholds cut every level, the
    partition and the quantization between the 2 threads (``work_log`` checks it)."""
    X, y = _data()
    texts = []
    for n_threads in (1, 2):
        work_log.clear()
        b = bonsai.train({"objective": "binary", "n_estimators": 8, "grow_policy": policy,
                          "quantized_grad": True, "subsample": 0.8, "n_threads": n_threads,
                          "colsample_bytree": 0.9}, bonsai.Dataset(X, label=y))
        work_log.check_fit(n_threads, f"quantized {policy}")
        texts.append(b.model_to_string())
    assert texts[0] == texts[1]


def test_quantized_accuracy_close_to_exact():
    X, y = _data(n=8000)
    Xt, yt = _data(n=3000, seed=1)
    from sklearn.metrics import roc_auc_score
    aucs = {}
    for q in (False, True):
        b = bonsai.train({"objective": "binary", "n_estimators": 60, "max_depth": 5,
                          "quantized_grad": q}, bonsai.Dataset(X, label=y))
        aucs[q] = roc_auc_score(yt, b.predict(Xt))
    assert aucs[True] > aucs[False] - 0.01, aucs


def test_quantized_regression_counts_and_leaves():
    """Squared error has a constant hessian, so estimated counts are exact and the
    quantized model honours min_child_samples."""
    X, y = _data()
    yr = np.nan_to_num(X[:, 0]) * 3 + np.random.default_rng(0).normal(size=X.shape[0])
    b = bonsai.train({"n_estimators": 5, "quantized_grad": True, "min_child_samples": 50},
                     bonsai.Dataset(X, label=yr))
    for t in b.trees:
        leaves = t.left < 0
        assert t.count[leaves].min() >= 50
    assert np.corrcoef(b.predict(X), yr)[0, 1] > 0.8


def test_quantized_rejects_negative_hessians():
    X, y = _data(n=500)

    def fobj(y_true, pred):
        return pred - y_true, -np.ones_like(pred)

    with pytest.raises(ValueError, match="non-negative hessians"):
        bonsai.train({"objective": fobj, "quantized_grad": True, "n_estimators": 2},
                     bonsai.Dataset(X, label=y))
