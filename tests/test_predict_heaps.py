"""The binned-heap batch predictor (backends/cpu/predict_binned.py) against the
node-record walk and a naive walk: bit-identical outputs for every grower, objective,
dtype, missing/infinite values, ties at thresholds and block boundaries; and the
models it must decline."""
import numpy as np
import pytest

import bonsai
import bonsai.backends.cpu as cpu
from bonsai._threads import thread_context
from bonsai.backends.cpu.predict_binned import MAX_HEAP_DEPTH
from bonsai.tree import Tree, concat
from reference.naive import naive_predict_margin


def _data(n=1500, f=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    X[rng.random((n, f)) < 0.1] = np.nan
    X[rng.random((n, f)) < 0.02] = np.inf
    X[rng.random((n, f)) < 0.02] = -np.inf
    y = np.nan_to_num(X[:, 0], nan=2.0, posinf=3.0, neginf=-3.0) * 2 \
        + np.sin(np.nan_to_num(X[:, 1], posinf=0, neginf=0)) + np.isnan(X[:, 2]) * 3 \
        + 0.1 * rng.normal(size=n)
    return X, y


def _both(ens, X, n_out, threads):
    """(heap predictor output, node-record walk output) on the same rows."""
    assert ens.heaps is not None
    a = np.full((X.shape[0], n_out), 0.25)
    b = a.copy()
    with thread_context(threads):
        cpu.predict_raw(X, ens, a)
        cpu.predict_raw(X, ens._replace(heaps=None), b)
    return a, b


@pytest.mark.parametrize("policy,objective", [("depthwise", "binary"),
                                              ("leafwise", "squared_error"),
                                              ("depthwise", "multiclass")])
def test_heaps_equal_record_walk(policy, objective):
    X, y = _data()
    extra = {}
    if objective == "binary":
        y = (y > np.median(y)).astype(float)
    if objective == "multiclass":
        y = np.digitize(y, np.quantile(y, [1 / 3, 2 / 3])).astype(float)
        extra["num_class"] = 3
    params = {"n_estimators": 12, "grow_policy": policy, "max_depth": 7, "objective": objective,
              "learning_rate": 0.3, "min_child_samples": 5, "n_threads": 2, **extra}
    if policy == "leafwise":
        params.update(max_depth=MAX_HEAP_DEPTH, max_leaves=40)
    b = bonsai.train(params, bonsai.Dataset(X, label=y))
    ens, _ = b._ensemble(0, b.num_trees())
    Xt = np.vstack([X, X[:1100] + 0.001, [[np.nan] * 6, [np.inf] * 6, [-np.inf] * 6]])
    # ties: every threshold of the model appears as a value of its feature
    for tree in b.trees:
        for i in np.flatnonzero(tree.left >= 0)[:20]:
            Xt[i % Xt.shape[0], tree.feature[i]] = tree.threshold[i]
    for n in (5, 63, 64, 65, 1024, 1030, Xt.shape[0]):
        for dtype in (np.float64, np.float32):
            Xn = np.ascontiguousarray(Xt[:n], dtype=dtype)
            for threads in (1, 2):
                fast, walk = _both(ens, Xn, b.n_outputs, threads)
                np.testing.assert_array_equal(fast, walk)
    ref = naive_predict_margin(b, Xt)
    np.testing.assert_allclose(b.predict(Xt, output_margin=True).reshape(ref.shape), ref,
                               rtol=1e-13, atol=1e-12)


def _stump(feature, thresholds, default_left=0):
    """A chain tree: node i splits ``feature`` at ``thresholds[i]``; left is a leaf
    with value i, right continues (the last right is a leaf)."""
    m = len(thresholds)
    n = 2 * m + 1
    feat = np.full(n, -1, np.int32)
    thr = np.zeros(n)
    left = np.full(n, -1, np.int32)
    right = np.full(n, -1, np.int32)
    value = np.zeros(n)
    node = 0
    for i, t in enumerate(thresholds):
        feat[node], thr[node] = feature, t
        left[node], right[node] = node + 1, node + 2
        value[node + 1] = i
        node += 2
    value[node] = m
    dl = np.full(n, default_left, np.uint8)
    return Tree(feat, thr, np.zeros(n, np.int32), dl, left, right, value, np.zeros(n),
                np.zeros(n), np.zeros(n, np.int64))


def test_float32_inputs_near_float64_thresholds():
    """Float32 rows next to thresholds float32 cannot represent decide as the float64
    comparison does (the float32 tables are rounded down)."""
    thr = [0.1, 0.2, 1 / 3, 1e-40, -0.7]
    ens = concat([_stump(0, thr), _stump(0, thr, default_left=1)], [0, 0])
    vals = []
    for t in thr:
        f = np.float32(t)
        vals += [f, np.nextafter(f, np.float32(np.inf)), np.nextafter(f, np.float32(-np.inf))]
    X = np.array(vals + [np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32).reshape(-1, 1)
    X = np.repeat(X, 5, axis=0)
    fast, walk = _both(ens, X, 1, 2)
    np.testing.assert_array_equal(fast, walk)


def test_declines_models_outside_its_limits():
    rng = np.random.default_rng(3)
    many = np.sort(rng.normal(size=256))            # 256 distinct thresholds on one feature
    fits = concat([_stump(0, many[i:min(i + 8, 255)]) for i in range(0, 255, 8)], [0] * 32)
    assert fits.heaps is not None                    # 255 thresholds over 32 trees
    fast, walk = _both(fits, np.vstack([rng.normal(size=(200, 1)), [[9.0], [np.inf], [np.nan]]]), 1, 2)
    np.testing.assert_array_equal(fast, walk)
    deep = concat([_stump(0, many[:MAX_HEAP_DEPTH + 1])], [0])
    assert deep.heaps is None                        # depth 11
    split = concat([_stump(0, many[i:i + 8]) for i in range(0, 256, 8)], [0] * 32)
    assert split.heaps is None                       # 256 thresholds over 32 trees
    X = rng.normal(size=(300, 1))
    out = np.zeros((300, 1))
    with thread_context(2):
        cpu.predict_raw(X, deep, out)                # the record walk still predicts
    # a chain over ascending thresholds ends in leaf "number of thresholds below x"
    np.testing.assert_array_equal(out[:, 0], np.searchsorted(many[:MAX_HEAP_DEPTH + 1], X[:, 0]))


def test_single_leaf_trees_and_empty_models():
    X, y = _data(n=300, seed=4)
    b = bonsai.train({"n_estimators": 3, "max_depth": 3, "n_threads": 1},
                     bonsai.Dataset(X, label=y))
    leaf = Tree(np.array([-1], np.int32), np.zeros(1), np.array([-1], np.int32),
                np.zeros(1, np.uint8), np.array([-1], np.int32), np.array([-1], np.int32),
                np.array([0.75]), np.zeros(1), np.zeros(1), np.zeros(1, np.int64))
    ens = concat([leaf, *b.trees, leaf], [0] * (b.num_trees() + 2))
    fast, walk = _both(ens, X, 1, 2)
    np.testing.assert_array_equal(fast, walk)
    only_leaves = concat([leaf, leaf], [0, 0])
    fast, walk = _both(only_leaves, X, 1, 1)
    np.testing.assert_array_equal(fast, np.full((300, 1), 1.75))
