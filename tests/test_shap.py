"""SHAP values and interaction values (``predict(pred_contribs=True)``,
``pred_interactions=True``): against brute-force Shapley values over every coalition
on small models, additivity on the real data sets, shapes, determinism."""
import itertools
import math

import numpy as np
import pandas as pd
import pytest

import bonsai
from bonsai.tree import Tree


# ---- the brute-force reference ------------------------------------------------------------

def _goes_left(tree, i, x):
    v = x[tree.feature[i]]
    if tree.is_categorical()[i]:
        return (not np.isnan(v)) and v >= 0 and int(v) in tree.cat_left(i)
    if np.isnan(v):
        return bool(tree.default_left[i])
    return v <= tree.threshold[i]


def _tree_value(tree, x, S, i=0):
    """E[tree(x) | features in S known]: the features outside S follow both children,
    weighted by cover (path-dependent TreeSHAP's value function)."""
    if tree.left[i] < 0:
        return tree.value[i]
    left, right = tree.left[i], tree.right[i]
    if tree.feature[i] in S:
        return _tree_value(tree, x, S, left if _goes_left(tree, i, x) else right)
    c = tree.cover[i]
    wl, wr = (tree.cover[left] / c, tree.cover[right] / c) if c > 0 else (0.5, 0.5)
    return wl * _tree_value(tree, x, S, left) + wr * _tree_value(tree, x, S, right)


def _value(booster, x, S, k):
    return sum(_tree_value(t, x, S) for t, c in zip(booster.trees, booster.tree_class) if c == k)


def brute_shap(booster, x, k=0):
    M = booster.n_features
    phi = np.zeros(M + 1)
    for i in range(M):
        others = [j for j in range(M) if j != i]
        for r in range(M):
            for S in itertools.combinations(others, r):
                w = math.factorial(r) * math.factorial(M - r - 1) / math.factorial(M)
                phi[i] += w * (_value(booster, x, set(S) | {i}, k) - _value(booster, x, set(S), k))
    phi[M] = booster.base_score[k] + _value(booster, x, set(), k)
    return phi


def brute_interactions(booster, x, k=0):
    M = booster.n_features
    out = np.zeros((M + 1, M + 1))
    for i in range(M):
        for j in range(M):
            if i == j:
                continue
            others = [q for q in range(M) if q not in (i, j)]
            for r in range(M - 1):
                for S in itertools.combinations(others, r):
                    S = set(S)
                    w = math.factorial(r) * math.factorial(M - r - 2) / (2 * math.factorial(M - 1))
                    d = (_value(booster, x, S | {i, j}, k) - _value(booster, x, S | {i}, k)
                         - _value(booster, x, S | {j}, k) + _value(booster, x, S, k))
                    out[i, j] += w * d
    phi = brute_shap(booster, x, k)
    for i in range(M):
        out[i, i] = phi[i] - out[i, :M].sum()
    out[M, M] = phi[M]
    return out


def _small(policy, seed=0, objective="binary", categorical=False, **kw):
    rng = np.random.default_rng(seed)
    n = 600
    X = rng.normal(size=(n, 4))
    X[rng.random(n) < 0.15, 1] = np.nan
    z = X[:, 0] + np.nan_to_num(X[:, 1]) * X[:, 2] + 0.5 * (X[:, 3] > 0)
    y = (z + rng.normal(size=n) > 0).astype(float) if objective == "binary" else z
    data = X
    if categorical:
        data = pd.DataFrame(X, columns=list("abcd"))
        data["d"] = pd.Categorical(rng.integers(0, 6, n))
        y = y + (data["d"].cat.codes.to_numpy() % 2) if objective != "binary" else y
    p = {"objective": objective, "n_estimators": 4, "max_depth": 3, "grow_policy": policy,
         "min_child_samples": 5, "min_data_per_group": 5, **kw}
    if policy == "leafwise":
        p.update(max_depth=0, max_leaves=7)
    return bonsai.train(p, bonsai.Dataset(data, label=y)), data


@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
@pytest.mark.parametrize("categorical", [False, True])
def test_contributions_equal_brute_force_shapley(policy, categorical):
    b, data = _small(policy, categorical=categorical,
                     objective="squared_error" if categorical else "binary")
    rows = data.iloc[:6] if categorical else data[:6]
    got = b.predict(rows, pred_contribs=True)
    X = b._check_X(rows)
    for r in range(6):
        np.testing.assert_allclose(got[r], brute_shap(b, X[r]), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("policy", ["depthwise", "oblivious"])
def test_interactions_equal_brute_force(policy):
    b, X = _small(policy, seed=3)
    got = b.predict(X[:4], pred_interactions=True)
    assert got.shape == (4, 5, 5)
    for r in range(4):
        np.testing.assert_allclose(got[r], brute_interactions(b, X[r]), rtol=1e-9, atol=1e-12)
    # rows of the interaction matrix sum to the SHAP values
    np.testing.assert_allclose(got.sum(axis=2), b.predict(X[:4], pred_contribs=True),
                               rtol=1e-9, atol=1e-12)


def test_repeated_feature_on_a_path():
    """A hand-built tree that splits twice on one feature (the unwind path)."""
    t = Tree(feature=np.array([0, 0, -1, 1, -1, -1, -1], np.int32),
             threshold=np.array([0.5, -0.5, 0, 1.0, 0, 0, 0]),
             bin_threshold=np.full(7, -1, np.int32), default_left=np.zeros(7, np.uint8),
             left=np.array([1, 5, -1, 4, -1, -1, -1], np.int32),
             right=np.array([3, 6, -1, 2, -1, -1, -1], np.int32),
             value=np.array([0, 0, 3.0, 0, -1.0, 2.0, 0.5]),
             gain=np.zeros(7), cover=np.array([10, 4, 2, 6, 4, 1, 3.0]),
             count=np.zeros(7, np.int64))
    b = bonsai.Booster()
    b.trees, b.tree_class, b.n_outputs, b.n_features = [t], [0], 1, 2
    b.base_score = np.array([0.25])
    X = np.array([[-1.0, 0.0], [0.0, 2.0], [1.0, 0.5], [1.0, 3.0], [np.nan, 0.0]])
    got = b.predict(X, pred_contribs=True)
    for r in range(X.shape[0]):
        np.testing.assert_allclose(got[r], brute_shap(b, X[r]), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.sum(1), b.predict(X, output_margin=True), rtol=1e-12)


@pytest.mark.parametrize("name,objective,policy", [
    ("binary", "binary", "depthwise"), ("regression", "squared_error", "leafwise"),
    ("multiclass", "multiclass", "oblivious"), ("binary", "binary", "leafwise")])
def test_contributions_add_up_to_the_margin_on_real_data(lgb_example, name, objective, policy):
    X, y, Xt, _ = lgb_example(name)
    p = {"objective": objective, "n_estimators": 30, "grow_policy": policy, "max_depth": 6}
    if objective == "multiclass":
        p["num_class"] = int(y.max()) + 1
    if policy == "leafwise":
        p.update(max_depth=0, max_leaves=31)
    b = bonsai.train(p, bonsai.Dataset(X, label=y))
    c = b.predict(Xt, pred_contribs=True)
    m = b.predict(Xt, output_margin=True)
    if objective == "multiclass":
        assert c.shape == (Xt.shape[0], p["num_class"], X.shape[1] + 1)
        np.testing.assert_allclose(c.sum(axis=2), m, rtol=1e-6, atol=1e-9)
    else:
        assert c.shape == (Xt.shape[0], X.shape[1] + 1)
        np.testing.assert_allclose(c.sum(axis=1), m, rtol=1e-6, atol=1e-9)


def test_ordered_ctr_model_contributions_go_to_the_categorical_features():
    rng = np.random.default_rng(1)
    n = 2000
    df = pd.DataFrame({"c": pd.Categorical(rng.integers(0, 12, n)), "x": rng.normal(size=n)})
    y = ((df["c"].cat.codes.to_numpy() % 3 == 0) + df["x"] + rng.normal(size=n) > 0.5) * 1.0
    b = bonsai.train({"objective": "binary", "n_estimators": 10, "cat_encoding": "ordered"},
                     bonsai.Dataset(df, label=y))
    c = b.predict(df.iloc[:100], pred_contribs=True)
    assert c.shape == (100, 3)
    np.testing.assert_allclose(c.sum(1), b.predict(df.iloc[:100], output_margin=True),
                               rtol=1e-9)
    assert np.abs(c[:, 0]).mean() > 0
    inter = b.predict(df.iloc[:20], pred_interactions=True)
    np.testing.assert_allclose(inter.sum(2), c[:20], rtol=1e-9, atol=1e-12)


def test_deterministic_at_any_thread_count(lgb_example, work_log, monkeypatch):
    """SHAP values of the 7,000 training rows (above ``SERIAL_PREDICT_ROWS``: the
    parallel kernel) and interaction values of 64 rows with that threshold lowered,
    at 1 and 2 threads; ``work_log`` checks that the parallel kernels ran on them."""
    from bonsai.backends import cpu
    X, y, Xt, _ = lgb_example("binary")
    b = bonsai.train({"objective": "binary", "n_estimators": 20}, bonsai.Dataset(X, label=y))
    assert X.shape[0] >= cpu.SERIAL_PREDICT_ROWS
    contribs, inter = {}, {}
    for n in (1, 2):
        b.n_threads = n
        work_log.clear()
        contribs[n] = b.predict(X, pred_contribs=True)
        work_log.check_kernels(n, "shap_values", "pred_contribs")
    assert np.array_equal(contribs[1], contribs[2])
    monkeypatch.setattr(cpu, "SERIAL_PREDICT_ROWS", 32)
    for n in (1, 2):
        b.n_threads = n
        work_log.clear()
        inter[n] = b.predict(Xt[:64], pred_interactions=True)
        work_log.check_kernels(n, "shap_interactions", "pred_interactions")
    assert np.array_equal(inter[1], inter[2])


def test_imported_xgboost_model_matches_xgboost_contributions(lgb_example):
    import xgboost as xgb  # a test extra: missing, the test fails (it does not skip)
    X, y, Xt, _ = lgb_example("binary")
    X = X[:3000].astype(np.float32)
    X[::11, 3] = np.nan
    Xt = Xt.astype(np.float32)
    Xt[::7, 5] = np.nan
    xb = xgb.train({"objective": "binary:logistic", "max_depth": 5, "nthread": 2},
                   xgb.DMatrix(X, label=y[:3000]), 30)
    b = bonsai.Booster.from_xgboost(xb)
    d = xgb.DMatrix(Xt)
    np.testing.assert_allclose(b.predict(Xt, pred_contribs=True),
                               xb.predict(d, pred_contribs=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b.predict(Xt[:50], pred_interactions=True),
                               xb.predict(xgb.DMatrix(Xt[:50]), pred_interactions=True),
                               rtol=1e-5, atol=1e-5)
