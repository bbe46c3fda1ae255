"""Export to ONNX (``bonsai.io.export.to_onnx``, run with onnxruntime) and to Treelite
(``bonsai.io.export.to_treelite``, run with ``treelite.gtil``): predictions and margins
equal bonsai's on float32 inputs with missing values, for every objective link,
every grow policy, categorical splits (as category codes), exact float32 threshold
handling, and the errors (ordered CTR models, non-Booster arguments, bad opset)."""
import sys

import numpy as np
import onnx
import onnxruntime as ort
import pandas as pd
import pytest
import treelite

import bonsai
from bonsai.io.export import category_codes, to_onnx, to_treelite
from bonsai.tree import Tree

TOL = dict(rtol=1e-5, atol=1e-5)
N_TRAIN, N_TEST = 1500, 400


def _run_onnx(model, X):
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(None, {"X": X})))


def _onnx_predict(b, out):
    """The ONNX outputs in the shape of ``Booster.predict``."""
    if b.objective == "binary":
        assert out["probabilities"].shape[1] == 2
        return out["probabilities"][:, 1]
    if b.objective == "multiclass":
        return out["probabilities"]
    v = out["variable"]
    return v[:, 0] if v.shape[1] == 1 else v


def _gtil(model, X, margin=False):
    out = treelite.gtil.predict(model, X, pred_margin=margin)
    out = out.reshape(X.shape[0], -1)
    return out[:, 0] if out.shape[1] == 1 else out


def _with_nan(X, seed, frac=0.08):
    X = np.array(X, dtype=np.float64)
    rng = np.random.default_rng(seed)
    for j in range(X.shape[1]):
        X[rng.random(X.shape[0]) < frac, j] = np.nan
    return X


def _data(lgb_example, case):
    """(params, X_train, y_train, X_test float32) of a small model with missing values."""
    obj, grow = case.split("-")
    params = {"objective": obj, "n_estimators": 8, "max_depth": 4, "grow_policy": grow,
              "min_child_samples": 10}
    if grow == "leafwise":
        params["max_leaves"] = 12
    if obj == "poisson":
        rng = np.random.default_rng(3)
        X = rng.normal(size=(N_TRAIN + N_TEST, 6))
        y = rng.poisson(np.exp(0.6 * X[:, 0] - 0.4 * X[:, 1])).astype(float)
        X = _with_nan(X, 4)
        return params, X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:].astype(np.float32)
    name = {"binary": "binary", "multiclass": "multiclass", "squared_error": "regression"}[obj]
    Xtr, ytr, Xte, _ = lgb_example(name)
    if obj == "multiclass":
        params["num_class"] = 5
        assert set(np.unique(ytr)) == set(range(5))
    return (params, _with_nan(Xtr[:N_TRAIN], 1), ytr[:N_TRAIN],
            _with_nan(Xte[:N_TEST], 2).astype(np.float32))


CASES = ("binary-depthwise", "binary-oblivious", "multiclass-leafwise", "squared_error-oblivious",
         "squared_error-leafwise", "poisson-depthwise")


@pytest.fixture(scope="module", params=CASES)
def trained(request, lgb_example):
    params, X, y, Xte = _data(lgb_example, request.param)
    b = bonsai.train(params, bonsai.Dataset(X, label=y))
    return b, Xte


def test_missing_values_take_both_default_directions(trained):
    b, X = trained
    dl = np.concatenate([t.default_left[t.left >= 0] for t in b.trees])
    assert (dl == 1).any() and (dl == 0).any()
    assert np.isnan(X).any(axis=1).mean() > 0.3


def test_onnx_matches_bonsai(trained):
    b, X = trained
    out = _run_onnx(to_onnx(b), X)
    want = b.predict(X)
    np.testing.assert_allclose(_onnx_predict(b, out), want, **TOL)
    if b.objective in ("binary", "multiclass"):
        assert out["label"].dtype == np.int64 and out["label"].shape == (X.shape[0],)
        probs = want if want.ndim == 2 else np.column_stack([1 - want, want])
        top = np.sort(probs, axis=1)
        clear = top[:, -1] - top[:, -2] > 1e-4      # no near-tie
        np.testing.assert_array_equal(out["label"][clear], probs.argmax(axis=1)[clear])
        np.testing.assert_allclose(out["probabilities"].sum(axis=1), 1.0, rtol=1e-5)
    elif b.objective == "squared_error":          # identity link: the output is the margin
        np.testing.assert_allclose(out["variable"][:, 0], b.predict(X, output_margin=True), **TOL)


def test_treelite_matches_bonsai(trained):
    b, X = trained
    tl = to_treelite(b)
    np.testing.assert_allclose(_gtil(tl, X), b.predict(X), **TOL)
    np.testing.assert_allclose(_gtil(tl, X, margin=True), b.predict(X, output_margin=True), **TOL)
    # float64 input: the float64 thresholds give bonsai's float64 branches too
    X64 = X.astype(np.float64) + np.float64(1e-9)
    np.testing.assert_allclose(_gtil(tl, X64, margin=True), b.predict(X64, output_margin=True),
                               **TOL)


def test_onnx_graph_structure(trained):
    b, _ = trained
    m = to_onnx(b)
    assert [i.name for i in m.graph.input] == ["X"]
    dims = m.graph.input[0].type.tensor_type.shape.dim
    assert m.graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.FLOAT
    assert dims[1].dim_value == b.n_features
    ops = [n.op_type for n in m.graph.node]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in m.graph.node[0].attribute}
    assert {o.domain: o.version for o in m.opset_import}["ai.onnx.ml"] == 3
    assert set(attrs["nodes_modes"]) == {b"BRANCH_LEQ", b"LEAF"}
    assert len(set(attrs["nodes_treeids"])) == b.num_trees()
    np.testing.assert_allclose(attrs["base_values"], b.base_score, rtol=1e-6)
    if b.objective == "binary":
        assert ops == ["TreeEnsembleClassifier"] and attrs["post_transform"] == b"LOGISTIC"
        assert list(attrs["classlabels_int64s"]) == [0, 1] and set(attrs["class_ids"]) == {0}
        assert [o.name for o in m.graph.output] == ["label", "probabilities"]
    elif b.objective == "multiclass":
        assert ops == ["TreeEnsembleClassifier"] and attrs["post_transform"] == b"SOFTMAX"
        assert list(attrs["classlabels_int64s"]) == list(range(5))
    elif b.objective == "poisson":
        assert ops == ["TreeEnsembleRegressor", "Exp"]
        assert [o.name for o in m.graph.output] == ["variable"]
    else:
        assert ops == ["TreeEnsembleRegressor"] and attrs["post_transform"] == b"NONE"


def test_best_iteration_is_respected(trained):
    b, X = trained
    c = bonsai.Booster(model_str=b.model_to_string())
    c.best_iteration = 2
    want = c.predict(X)
    assert not np.allclose(want, b.predict(X))
    np.testing.assert_allclose(_onnx_predict(c, _run_onnx(to_onnx(c), X)), want, **TOL)
    np.testing.assert_allclose(_gtil(to_treelite(c), X), want, **TOL)


# ---- a hand-made model: exact float32 thresholds, default directions, K outputs ----------
V = np.float32(0.1)


def _tree(nodes):
    """nodes: list of (feature, threshold, default_left, left, right, value)."""
    f, thr, dl, le, ri, val = (list(c) for c in zip(*nodes))
    n = len(nodes)
    return Tree.from_dict({"feature": f, "threshold": thr, "bin_threshold": [-1] * n,
                           "default_left": dl, "left": le, "right": ri, "value": val,
                           "gain": [0.0] * n, "cover": [1.0] * n, "count": [1] * n})


def _hand_booster(objective="squared_error", k=1):
    below, above = float(V) - 1e-12, float(V) + 1e-12   # V > below, V <= above
    t0 = _tree([(0, below, 1, 1, 2, 0.0), (-1, 0.0, 0, -1, -1, -1.0),
                (1, above, 0, 3, 4, 0.0), (-1, 0.0, 0, -1, -1, 0.25), (-1, 0.0, 0, -1, -1, 2.0)])
    t1 = _tree([(-1, 0.0, 0, -1, -1, 0.5)])
    b = bonsai.Booster()
    b.trees = [t0, t1]
    b.tree_class = [0, k - 1]
    b.n_outputs, b.n_features, b.feature_names = k, 2, ["a", "b"]
    b.base_score = np.linspace(0.1, -0.2, k)
    b.objective = objective
    b.objective_params = {"num_class": k} if k > 1 else {}
    b._cache = None
    b._obj = None
    return b


X_HAND = np.array([[V, V], [V, np.float32(0.2)], [np.nan, V], [np.nan, np.nan], [0.5, np.nan],
                   [np.float32(-1.0), np.float32(3.0)], [np.nextafter(V, np.float32(0)), 9.0]],
                  np.float32)


@pytest.mark.parametrize("objective,k", [("squared_error", 1), ("tweedie", 1), ("binary", 1),
                                         ("custom", 2), ("multiclass", 3)])
def test_hand_model_thresholds_and_defaults_are_exact(objective, k):
    b = _hand_booster(objective, k)
    margin = b.predict(X_HAND, output_margin=True)
    m0 = margin if k == 1 else margin[:, 0]
    # V goes right at the root (V > below) and left at node 2 (V <= above)
    np.testing.assert_allclose(m0[:4] - b.base_score[0] - (0.5 if k == 1 else 0.0),
                               [0.25, 2.0, -1.0, -1.0])
    np.testing.assert_allclose(_onnx_predict(b, _run_onnx(to_onnx(b), X_HAND)), b.predict(X_HAND),
                               **TOL)
    tl = to_treelite(b)
    np.testing.assert_allclose(_gtil(tl, X_HAND), b.predict(X_HAND), **TOL)
    np.testing.assert_allclose(_gtil(tl, X_HAND, margin=True), margin, **TOL)


def test_empty_model_predicts_the_base_score():
    b = _hand_booster("squared_error")
    b.trees, b.tree_class = [], []
    b._cache = None
    want = np.full(X_HAND.shape[0], b.base_score[0])
    np.testing.assert_allclose(b.predict(X_HAND), want)
    np.testing.assert_allclose(_onnx_predict(b, _run_onnx(to_onnx(b), X_HAND)), want, **TOL)
    np.testing.assert_allclose(_gtil(to_treelite(b), X_HAND), want, **TOL)


# ---- categorical splits: the exported models test category codes ---------------------
def _cat_data(n, seed):
    rng = np.random.default_rng(seed)
    c = rng.integers(0, 10, n)
    c2 = rng.integers(0, 5, n)
    x = rng.normal(size=n)
    eff = np.random.default_rng(99).normal(size=10) * 2.0
    z = eff[c] + 0.7 * (c2 == 2) + x + rng.normal(size=n)
    df = pd.DataFrame({"c": pd.Categorical([f"k{v}" for v in c],
                                           categories=[f"k{v}" for v in range(12)]),
                       "c2": c2.astype(np.float32), "x": x.astype(np.float32)})
    df.loc[::7, "x"] = np.nan
    df.loc[::11, "c"] = np.nan
    return df, z


CAT_CASES = ("binary-depthwise", "multiclass-oblivious", "gamma-leafwise")


@pytest.fixture(scope="module", params=CAT_CASES)
def cat_trained(request):
    obj, grow = request.param.split("-")
    df, z = _cat_data(1500, 0)
    y = {"binary": (z > 0).astype(float), "multiclass": np.digitize(z, [-1.0, 1.0]).astype(float),
         "gamma": np.exp(0.3 * z)}[obj]
    params = {"objective": obj, "n_estimators": 8, "max_depth": 4, "grow_policy": grow,
              "min_data_per_group": 5, "min_child_samples": 5, "max_cat_to_onehot": 4}
    if obj == "multiclass":
        params["num_class"] = 3
    b = bonsai.train(params, bonsai.Dataset(df, label=y, categorical_features=["c2"]))
    test, _ = _cat_data(500, 1)
    test["c"] = pd.Categorical([f"k{v}" for v in np.random.default_rng(2).integers(0, 12, 500)],
                               categories=[f"k{v}" for v in range(12)])   # k10, k11 unseen
    test.loc[::5, "c"] = np.nan
    return b, test


def test_categorical_model_exports_with_category_codes(cat_trained):
    b, test = cat_trained
    assert sum(int(t.is_categorical().sum()) for t in b.trees) > 0
    assert b.categories.features == (0, 1)
    codes = category_codes(b, test)
    assert codes.dtype == np.float32 and codes.shape == test.shape
    assert np.isnan(codes[:, 0]).any()                      # missing and unseen categories
    want = b.predict(test)
    m = to_onnx(b)
    assert {o.domain: o.version for o in m.opset_import}["ai.onnx.ml"] == 5
    modes = onnx.numpy_helper.to_array(
        next(a.t for a in m.graph.node[0].attribute if a.name == "nodes_modes"))
    assert (modes == 6).any()                               # BRANCH_MEMBER
    out = _run_onnx(m, codes)
    np.testing.assert_allclose(_onnx_predict(b, out), want, **TOL)
    tl = to_treelite(b)
    np.testing.assert_allclose(_gtil(tl, codes), want, **TOL)
    np.testing.assert_allclose(_gtil(tl, codes, margin=True), b.predict(test, output_margin=True),
                               **TOL)
    if b.objective in ("binary", "multiclass"):
        probs = want if want.ndim == 2 else np.column_stack([1 - want, want])
        top = np.sort(probs, axis=1)
        clear = top[:, -1] - top[:, -2] > 1e-4
        np.testing.assert_array_equal(out["label"][clear], probs.argmax(axis=1)[clear])


def test_hand_categorical_model_edge_cases():
    """A categorical set {1, 3, 70} (two bitset words), an empty set (nothing goes
    left), a single-leaf tree; NaN, negative, large and unlisted codes go right."""
    t0 = _tree([(0, np.nan, 0, 1, 2, 0.0), (-1, 0.0, 0, -1, -1, -1.0),
                (1, 0.5, 1, 3, 4, 0.0), (-1, 0.0, 0, -1, -1, 0.25), (-1, 0.0, 0, -1, -1, 2.0)])
    t0 = Tree.from_dict(dict(t0.to_dict(), cat_left=[[1, 3, 70], [], [], [], []]))
    t1 = _tree([(1, np.nan, 0, 1, 2, 0.0), (-1, 0.0, 0, -1, -1, 5.0), (-1, 0.0, 0, -1, -1, 7.0)])
    t1 = t1._replace(cat_ptr=np.array([0, 1, 1, 1], np.int64), cat_words=np.zeros(1, np.uint64))
    t2 = _tree([(-1, 0.0, 0, -1, -1, 0.5)])
    assert t1.is_categorical()[0] and t1.cat_left(0) == []
    b = _hand_booster("binary")
    b.trees, b.tree_class = [t0, t1, t2], [0, 0, 0]
    b._cache = None
    X = np.array([[1, 0], [3, 1], [70, np.nan], [2, 0.25], [np.nan, 0.75], [-1, np.nan],
                  [64, 1], [1e6, 0], [0, -3]], np.float32)
    margin = b.predict(X, output_margin=True)
    np.testing.assert_allclose(margin - b.base_score[0] - 7.5,
                               [-1, -1, -1, 0.25, 2, 0.25, 2, 0.25, 0.25])
    m = to_onnx(b)
    assert {o.domain: o.version for o in m.opset_import}["ai.onnx.ml"] == 5
    np.testing.assert_allclose(_onnx_predict(b, _run_onnx(m, X)), b.predict(X), **TOL)
    tl = to_treelite(b)
    np.testing.assert_allclose(_gtil(tl, X), b.predict(X), **TOL)
    np.testing.assert_allclose(_gtil(tl, X, margin=True), margin, **TOL)


# ---- errors -----------------------------------------------------------------------------
def test_ordered_ctr_model_is_refused():
    df, z = _cat_data(300, 0)
    b = bonsai.train({"objective": "binary", "n_estimators": 3, "cat_encoding": "ordered",
                      "min_child_samples": 5}, bonsai.Dataset(df[["c", "x"]], label=z > 0))
    assert b.ctr is not None
    for fn in (to_onnx, to_treelite):
        with pytest.raises(ValueError, match="cat_encoding='ordered'"):
            fn(b)
    with pytest.raises(ValueError, match="cat_encoding='ordered'"):
        category_codes(b, df[["c", "x"]])


@pytest.mark.parametrize("fn", [to_onnx, to_treelite, lambda b: category_codes(b, X_HAND)])
def test_non_booster_is_a_type_error(fn):
    with pytest.raises(TypeError, match="bonsai.Booster"):
        fn({"trees": []})


@pytest.mark.parametrize("opset", [5, 10_000, "17", 17.0, True])
def test_bad_opset(opset):
    with pytest.raises(ValueError, match="opset"):
        to_onnx(_hand_booster(), opset=opset)


def test_explicit_opset_is_used():
    m = to_onnx(_hand_booster(), opset=21)
    assert {o.domain: o.version for o in m.opset_import}[""] == 21
    np.testing.assert_allclose(_run_onnx(m, X_HAND)["variable"][:, 0],
                               _hand_booster().predict(X_HAND), **TOL)


def test_unknown_objective_is_refused():
    b = _hand_booster()
    b.objective = "no_such_objective"
    for fn in (to_onnx, to_treelite):
        with pytest.raises(ValueError, match="no_such_objective"):
            fn(b)


@pytest.mark.parametrize("module,fn", [("onnx", to_onnx), ("treelite", to_treelite)])
def test_missing_package_names_pip_package(monkeypatch, module, fn):
    monkeypatch.setitem(sys.modules, module, None)
    with pytest.raises(ImportError, match=f"pip install {module}"):
        fn(_hand_booster())
