"""Vector-leaf models (``multi_strategy="multi_output_tree"``) downstream of training:
one tree per round whose nodes hold K values.  A vector model must predict, explain,
save, load, inspect, export and average exactly as the *equivalent* one-output-per-tree
model does (round r holding the K scalar trees ``tree_r.output(0..K-1)``, tree_class
k): the same bits.

The trainer does not grow such trees here: the vector models are built by hand from a
small trained multiclass model's tree structures with random (n_nodes, K) values.
"""
import json
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import bonsai
from bonsai import Booster
from bonsai import booster as booster_module
from bonsai.backends import get_backend
from bonsai.crossval import average_boosters
from bonsai.tree import Tree, concat, expand

K = 3
ROUNDS = 4


def _data(n=300, f=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    X[rng.random((n, f)) < 0.1] = np.nan
    x0 = np.nan_to_num(X[:, 0], nan=1.0)
    y = np.digitize(x0 + 0.5 * np.nan_to_num(X[:, 1]), [-0.4, 0.4]).astype(float)
    return X, y


def _fit(ds, **params):
    p = {"objective": "multiclass", "num_class": K, "max_depth": 3, "min_child_samples": 5,
         "n_threads": 1, **params}
    return bonsai.train(p, ds, num_boost_round=ROUNDS)


def _pair(src, seed=0):
    """(vector model, equivalent one-output-per-tree model) on ``src``'s structures."""
    rng = np.random.default_rng(seed)
    text = src.model_to_string()
    vec, ref = Booster(model_str=text), Booster(model_str=text)
    trees = [t._replace(value=rng.normal(scale=0.3, size=(t.n_nodes, K)))
             for t in src.trees[::K]]
    vec.trees, vec.tree_class, vec.multi_strategy = trees, [0] * len(trees), "multi_output_tree"
    ref.trees = [t.output(k) for t in trees for k in range(K)]
    ref.tree_class = [k for _ in trees for k in range(K)]
    vec._cache = ref._cache = None
    return vec, ref


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.fixture(scope="module")
def sources(data):
    """kind -> (trained source model, its training Dataset, X to predict)."""
    X, y = data
    out = {}
    for kind, extra in (("depthwise", {}), ("oblivious", {"grow_policy": "oblivious"}),
                        ("leafwise", {"grow_policy": "leafwise", "max_leaves": 6,
                                      "max_depth": 0})):
        ds = bonsai.Dataset(X, label=y)
        out[kind] = (_fit(ds, **extra), ds, X)
    df = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    df["c"] = pd.Categorical(np.array(list("abcd"))[np.arange(X.shape[0]) % 4])
    y_cat = (y + (df["c"] == "b").to_numpy()) % K
    ds = bonsai.Dataset(df, label=y_cat, categorical_features=["c"])
    # native category-set splits: the trees index the Dataset's own columns (with the
    # default cat_encoding="auto" these few-row categories get CTR features instead)
    out["categorical"] = (_fit(ds, cat_encoding="native"), ds, df)
    Xs = np.where(np.isnan(X) | (np.abs(X) < 0.6), 0.0, X)
    ds = bonsai.Dataset(sp.csr_matrix(Xs), label=y)
    out["sparse"] = (_fit(ds), ds, sp.csr_matrix(Xs))
    return out


@pytest.fixture(scope="module")
def pairs(sources):
    return {kind: _pair(src, seed=i) for i, (kind, (src, _, _)) in enumerate(sources.items())}


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ---- the tree ----------------------------------------------------------------------

def test_tree_outputs_and_json(pairs):
    vec, _ = pairs["depthwise"]
    t = vec.trees[0]
    assert t.n_values == K and vec.trees_per_round == 1 and vec.num_boosted_rounds() == ROUNDS
    for k in range(K):
        o = t.output(k)
        assert o.value.ndim == 1 and o.value.flags.c_contiguous and o.n_values == 1
        assert _same(o.value, t.value[:, k]) and o.left is t.left and o.gain is t.gain
    for bad in (K, -1, 1.0, True):
        with pytest.raises(ValueError, match="output k"):
            t.output(bad)
    scalar = t.output(1)
    assert scalar.output(0) is scalar
    d = t.to_dict()
    assert len(d["value"]) == t.n_nodes and all(len(v) == K for v in d["value"])
    back = Tree.from_dict(json.loads(json.dumps(d)))
    assert _same(back.value, t.value) and _same(back.gain, t.gain)
    assert not any(isinstance(v, list) for v in scalar.to_dict()["value"])
    with pytest.raises(ValueError, match="non-finite"):
        t._replace(value=np.where(t.value > 0, np.nan, t.value)).check()
    with pytest.raises(ValueError, match="tree value has shape"):
        t._replace(value=t.value[:-1]).check()
    views, cls, first = expand(vec.trees[:2], [0, 0])
    assert cls == [0, 1, 2, 0, 1, 2] and first.tolist() == [0, 3, 6]
    ens = concat(vec.trees[:2], [0, 0])
    assert ens.leaf_offset.tolist() == [0, 3 * t.n_nodes, ens.tree_offset[-1]]


# ---- prediction --------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["depthwise", "oblivious", "leafwise", "categorical",
                                  "sparse"])
def test_predictions_are_the_equivalent_models_bits(pairs, sources, kind):
    vec, ref = pairs[kind]
    X = sources[kind][2]
    assert vec.num_boosted_rounds() == ref.num_boosted_rounds() == ROUNDS
    inputs = [X, X[:3]]           # a batch and the few-row walk
    if kind not in ("categorical", "sparse"):
        inputs.append(X.astype(np.float32))
    for Xi in inputs:
        for kw in ({}, {"output_margin": True}, {"iteration_range": (1, 3)},
                   {"iteration_range": (2, 0), "output_margin": True}):
            assert _same(vec.predict(Xi, **kw), ref.predict(Xi, **kw)), (kind, kw)
        leaf = vec.predict(Xi, pred_leaf=True)
        assert leaf.shape == (Xi.shape[0], ROUNDS)      # one column per tree
        assert _same(leaf, ref.predict(Xi, pred_leaf=True)[:, ::K])
        assert _same(vec.predict(Xi, pred_leaf=True, iteration_range=(1, 3)), leaf[:, 1:3])
    vec.best_iteration = ref.best_iteration = 1
    try:
        assert _same(vec.predict(X), ref.predict(X))
        assert _same(vec.predict(X), vec.predict(X, iteration_range=(0, 2)))
        assert vec.predict(X, pred_leaf=True).shape[1] == 2
    finally:
        vec.best_iteration = ref.best_iteration = None
    with pytest.raises(ValueError, match="iteration_range"):
        vec.predict(X, iteration_range=(0, ROUNDS + 1))


@pytest.mark.parametrize("kind", ["depthwise", "oblivious", "categorical", "sparse"])
def test_parallel_batch_predictions(pairs, sources, kind):
    """A batch large enough for the row-parallel kernels, on 2 threads."""
    vec, ref = pairs[kind]
    X = sources[kind][2]
    big = (pd.concat([X] * 20, ignore_index=True) if isinstance(X, pd.DataFrame)
           else sp.vstack([X] * 20, format="csr") if sp.issparse(X) else np.tile(X, (20, 1)))
    vec.n_threads = ref.n_threads = 2
    try:
        assert _same(vec.predict(big, output_margin=True), ref.predict(big, output_margin=True))
        assert _same(vec.predict(big, pred_leaf=True), ref.predict(big, pred_leaf=True)[:, ::K])
    finally:
        vec.n_threads = ref.n_threads = None


@pytest.mark.parametrize("kind", ["depthwise", "categorical"])
def test_shap_values_and_interactions(pairs, sources, kind):
    vec, ref = pairs[kind]
    X = sources[kind][2][:12]
    phi = vec.predict(X, pred_contribs=True)
    F = vec.n_features
    assert phi.shape == (12, K, F + 1)
    assert _same(phi, ref.predict(X, pred_contribs=True))
    np.testing.assert_allclose(phi.sum(axis=2), vec.predict(X, output_margin=True),
                               rtol=1e-12, atol=1e-12)
    inter = vec.predict(X, pred_interactions=True)
    assert inter.shape == (12, K, F + 1, F + 1)
    assert _same(inter, ref.predict(X, pred_interactions=True))


@pytest.mark.parametrize("kind", ["depthwise", "categorical", "sparse"])
def test_binned_predict_of_a_vector_tree(pairs, sources, kind):
    """Validation-set scores: one descent, K adds -- the bits of the K scalar trees."""
    vec, ref = pairs[kind]
    ds = sources[kind][1]
    cpu = get_backend("cpu")
    n = ds.n_rows
    rows = np.arange(n, dtype=np.uint32)[::2].copy()
    got = np.zeros((K, n))
    want = np.zeros((K, n))
    for t in vec.trees:
        cpu.predict_binned_add(ds.X_cols, rows, t, ds.bin_mapper.missing_bin, got)
    for t, k in zip(ref.trees, ref.tree_class):
        cpu.predict_binned_add(ds.X_cols, rows, t, ds.bin_mapper.missing_bin, want[k])
    assert _same(got, want) and np.all(got[:, 1::2] == 0) and np.any(got[:, ::2] != 0)
    with pytest.raises(ValueError, match="out of shape"):
        cpu.predict_binned_add(ds.X_cols, rows, vec.trees[0], ds.bin_mapper.missing_bin,
                               np.zeros(n))


def test_cuda_predict_on_the_simulator(pairs, sources, monkeypatch):
    vec, ref = pairs["depthwise"]
    X = np.ascontiguousarray(sources["depthwise"][2][:40])
    cpu = vec.predict(X, output_margin=True, device="cpu")
    assert _same(vec.predict(X, output_margin=True, device="cuda"), cpu)
    assert _same(vec.predict(X, device="cuda"), ref.predict(X))
    assert _same(vec.predict(X, pred_leaf=True, device="cuda"), vec.predict(X, pred_leaf=True))
    assert _same(vec.predict(X, pred_leaf=True, iteration_range=(1, 3), device="cuda"),
                 vec.predict(X, pred_leaf=True, iteration_range=(1, 3)))
    # the automatic GPU path of a model trained with device="cuda"
    monkeypatch.setattr(booster_module, "GPU_PREDICT_MIN_ROWS", 10)
    monkeypatch.setitem(vec.params, "device", "cuda")
    vec._device = None
    assert _same(vec.predict(X, output_margin=True), cpu)
    assert vec._device is not None and vec._device.n_leaf_trees == ROUNDS


# ---- model files -------------------------------------------------------------------

def test_model_file_and_pickle_round_trip(pairs, sources):
    vec, ref = pairs["categorical"]
    X = sources["categorical"][2]
    text = vec.model_to_string()
    doc = json.loads(text)
    assert doc["multi_strategy"] == "multi_output_tree" and doc["tree_class"] == [0] * ROUNDS
    assert "multi_strategy" not in json.loads(ref.model_to_string())
    back = Booster(model_str=text)
    assert back.multi_strategy == "multi_output_tree" and back.model_to_string() == text
    assert _same(back.predict(X), vec.predict(X))
    pk = pickle.loads(pickle.dumps(vec))
    assert pk.multi_strategy == "multi_output_tree" and _same(pk.predict(X), vec.predict(X))
    # a one-output model's file is unchanged by a load/save
    src_text = sources["categorical"][0].model_to_string()
    assert Booster(model_str=src_text).model_to_string() == src_text
    assert '"multi_strategy"' not in src_text


@pytest.mark.parametrize("name", ["bonsai-0.1.0-binary", "bonsai-0.1.0-categorical"])
def test_kept_one_output_model_files_resave_byte_identically(name):
    """A one-output-per-tree model's file is unchanged by vector-leaf support."""
    from pathlib import Path
    path = Path(__file__).resolve().parent / "data" / "models" / (name + ".json")
    text = path.read_text(encoding="utf-8")
    b = Booster(model_file=path)
    assert b.multi_strategy == "one_output_per_tree" and b.trees_per_round == b.n_outputs
    assert b.model_to_string() == text


def test_vector_model_predicts_in_a_fresh_process(pairs, sources, tmp_path, child_env):
    vec, _ = pairs["depthwise"]
    X = sources["depthwise"][2][:50]
    vec.save_model(tmp_path / "m.json")
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "raw.npy", vec.predict(X, output_margin=True))
    np.save(tmp_path / "leaf.npy", vec.predict(X, pred_leaf=True))
    np.save(tmp_path / "shap.npy", vec.predict(X[:5], pred_contribs=True))
    code = textwrap.dedent("""
        import numpy as np, bonsai
        b = bonsai.Booster(model_file="m.json")
        X = np.load("X.npy")
        assert b.multi_strategy == "multi_output_tree" and b.num_boosted_rounds() == 4
        assert np.load("raw.npy").tobytes() == b.predict(X, output_margin=True).tobytes()
        assert np.load("leaf.npy").tobytes() == b.predict(X, pred_leaf=True).tobytes()
        assert np.load("shap.npy").tobytes() == b.predict(X[:5], pred_contribs=True).tobytes()
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, cwd=str(tmp_path), env=child_env)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


def _edit(model, fn):
    doc = json.loads(model.model_to_string())
    fn(doc)
    return json.dumps(doc)


@pytest.mark.parametrize("case,match", [
    ("scalar_values", "needs one 3-list per node"),
    ("short_lists", "needs one 3-list per node"),
    ("ragged_lists", "differ in length"),
    ("vector_in_scalar_model", "not a multi_output_tree model"),
    ("bad_strategy", "multi_strategy='bogus'"),
    ("tree_class", "tree_class 0"),
    ("best_iteration", "best_iteration=4"),
])
def test_bad_vector_model_files_are_rejected(pairs, case, match):
    vec, ref = pairs["depthwise"]

    def scalar_values(d):
        d["trees"][1]["value"] = [v[0] for v in d["trees"][1]["value"]]

    def short_lists(d):
        d["trees"][0]["value"] = [v[:2] for v in d["trees"][0]["value"]]

    def ragged_lists(d):
        d["trees"][0]["value"][-1] = d["trees"][0]["value"][-1][:2]

    def bad_strategy(d):
        d["multi_strategy"] = "bogus"

    def tree_class(d):
        d["tree_class"][2] = 1

    def best_iteration(d):
        d["best_iteration"] = 4

    if case == "vector_in_scalar_model":
        text = _edit(ref, lambda d: d["trees"][0].update(
            value=[[v, v] for v in d["trees"][0]["value"]]))
    else:
        text = _edit(vec, locals()[case])
    with pytest.raises(ValueError, match=match):
        Booster(model_str=text)


def test_best_iteration_counts_vector_rounds(pairs, data):
    vec, _ = pairs["depthwise"]
    b = Booster(model_str=_edit(vec, lambda d: d.update(best_iteration=3)))
    assert b._tree_range(None) == (0, 4)
    b = Booster(model_str=_edit(vec, lambda d: d.update(best_iteration=1)))
    assert b._tree_range(None) == (0, 2)
    assert _same(b.predict(data[0]), vec.predict(data[0], iteration_range=(0, 2)))


# ---- importance, inspection, plots ---------------------------------------------------

def test_importance_counts_each_vector_tree_once(pairs):
    vec, ref = pairs["depthwise"]
    for it in (None, (1, 3)):
        split = vec.feature_importance("split", iteration_range=it)
        assert np.array_equal(split * K, ref.feature_importance("split", iteration_range=it))
        assert split.sum() == sum(int((t.left >= 0).sum())
                                  for t in vec.trees[slice(*(it or (0, ROUNDS)))])
        np.testing.assert_allclose(
            vec.feature_importance("total_gain", iteration_range=it) * K,
            ref.feature_importance("total_gain", iteration_range=it), rtol=1e-15)
        for kind in ("gain", "cover"):
            np.testing.assert_allclose(vec.feature_importance(kind, iteration_range=it),
                                       ref.feature_importance(kind, iteration_range=it),
                                       rtol=1e-15)


def test_trees_to_dataframe_and_dump_model(pairs):
    vec, _ = pairs["categorical"]
    df = vec.trees_to_dataframe()
    assert "value" not in df.columns
    assert [c for c in df.columns if c.startswith("value_")] == ["value_0", "value_1", "value_2"]
    assert len(df) == sum(t.n_nodes for t in vec.trees)
    assert (df["class"] == 0).all() and df["tree_index"].nunique() == ROUNDS
    for k in range(K):
        assert df[f"value_{k}"].dtype == np.float64
        assert _same(df[f"value_{k}"].to_numpy(),
                     np.concatenate([t.value[:, k] for t in vec.trees]))
    assert _same(df["gain"].to_numpy(), np.concatenate([t.gain for t in vec.trees]))
    d = vec.dump_model()
    json.dumps(d)
    assert d["multi_strategy"] == "multi_output_tree" and d["num_tree_per_iteration"] == 1
    assert len(d["tree_info"]) == ROUNDS
    root = d["tree_info"][0]["tree_structure"]
    assert root["internal_value"] == vec.trees[0].value[0].tolist()
    node = root
    while "leaf_value" not in node:
        node = node["left_child"]
    assert node["leaf_value"] == vec.trees[0].value[node["leaf_index"]].tolist()


def test_plot_tree_of_a_vector_tree(pairs):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from bonsai.plotting import plot_tree
    vec, _ = pairs["depthwise"]
    ax = plot_tree(vec, 1, show_info=["internal_value"])
    texts = [t.get_text() for t in ax.texts]
    assert "3 outputs" in ax.get_title()
    assert any(t.startswith("leaf ") and "[" in t for t in texts)
    plt.close("all")


# ---- export, averaging, import -------------------------------------------------------

def test_onnx_and_treelite_export_the_equivalent_model(pairs, sources):
    import onnxruntime as ort
    import treelite
    from bonsai.io.export import to_onnx, to_treelite
    vec, ref = pairs["depthwise"]
    X = np.ascontiguousarray(sources["depthwise"][2], dtype=np.float32)
    m = to_onnx(vec)
    assert m.SerializeToString() == to_onnx(ref).SerializeToString()
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    _, prob = sess.run(None, {"X": X})
    np.testing.assert_allclose(prob, vec.predict(X), rtol=1e-4, atol=1e-5)
    tv, tr = to_treelite(vec), to_treelite(ref)
    gv = treelite.gtil.predict(tv, X, pred_margin=True)
    assert _same(gv, treelite.gtil.predict(tr, X, pred_margin=True))
    np.testing.assert_allclose(gv.reshape(X.shape[0], K), vec.predict(X, output_margin=True),
                               rtol=1e-12, atol=1e-12)


def test_average_vector_boosters(pairs, sources):
    v1, r1 = pairs["depthwise"]
    v2, r2 = _pair(sources["depthwise"][0], seed=7)
    X = sources["depthwise"][2]
    va, ra = average_boosters([v1, v2]), average_boosters([r1, r2])
    assert va.multi_strategy == "multi_output_tree" and va.num_boosted_rounds() == 2 * ROUNDS
    assert va.extra["averaged_models"]["rounds"] == [ROUNDS, ROUNDS]
    assert _same(va.predict(X, output_margin=True), ra.predict(X, output_margin=True))
    assert _same(Booster(model_str=va.model_to_string()).predict(X), va.predict(X))
    with pytest.raises(ValueError, match="multi_strategy"):
        average_boosters([v1, r1])


def test_xgboost_multi_output_tree_import():
    """An XGBoost multi:softprob model with multi_strategy="multi_output_tree" imports
    as a vector-leaf model that predicts what XGBoost predicts (float32 sums there)."""
    import xgboost as xgb
    X, y = _data(n=200)
    X = X.astype(np.float32)
    b = xgb.train({"objective": "multi:softprob", "num_class": K, "max_depth": 3,
                   "multi_strategy": "multi_output_tree", "tree_method": "hist",
                   "nthread": 1}, xgb.DMatrix(X, y), 5)
    m = Booster.from_xgboost(b)
    assert m.multi_strategy == "multi_output_tree" and m.num_boosted_rounds() == 5
    assert m.num_trees() == 5 and all(t.n_values == K for t in m.trees)
    dm = xgb.DMatrix(X)
    np.testing.assert_allclose(m.predict(X, output_margin=True),
                               b.predict(dm, output_margin=True), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(m.predict(X), b.predict(dm), rtol=1e-5, atol=1e-6)
    assert np.array_equal(Booster(model_str=m.model_to_string()).predict(X), m.predict(X))
    doc = json.loads(b.save_raw("json"))
    doc["learner"]["gradient_booster"]["model"]["trees"][0]["tree_param"][
        "size_leaf_vector"] = "2"
    with pytest.raises(ValueError, match="multi_output_tree"):
        Booster.from_xgboost(doc)
