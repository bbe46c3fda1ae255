"""``bonsai.inspection``: trees_to_dataframe and dump_model on tiny models (numeric with
missing values, multiclass, native categorical, ordered CTR, a hand-built deep chain).
Leaf values found through the frame / by walking the dumped dict must reproduce
``predict(output_margin=True)``."""
import copy
import json
import sys

import numpy as np
import pandas as pd
import pytest

import bonsai
from bonsai.inspection import dump_model, feature_name, trees_to_dataframe
from bonsai.tree import Tree

COLUMNS = ["tree_index", "node_index", "node_id", "class", "depth", "parent_index",
           "left_child", "right_child", "is_leaf", "split_feature", "split_index",
           "threshold", "decision_type", "categories", "missing_direction", "value",
           "gain", "cover", "count"]


def _numeric_data(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random(n) < 0.15, 1] = np.nan
    y = X[:, 0] + np.where(np.isnan(X[:, 1]), 1.5, X[:, 1]) + 0.3 * rng.normal(size=n)
    return X, y


def _cat_frame(n=400, seed=1):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({
        "a": rng.normal(size=n), "b": rng.normal(size=n),
        "c": pd.Categorical(rng.choice(["x", "y", "z", "w", "v"], size=n)),
        "d": pd.Categorical(rng.choice(["p", "q", "r"], size=n)),
    })
    df.loc[rng.random(n) < 0.1, "c"] = np.nan
    y = (2.0 * df["c"].isin(["x", "y"]) + (df["d"] == "p") + 0.5 * df["a"]
         + 0.3 * rng.normal(size=n))
    return df, y.to_numpy(np.float64)


@pytest.fixture(scope="module")
def binary_model():
    X, y = _numeric_data()
    ds = bonsai.Dataset(X, label=(y > 0.5).astype(float), feature_names=["u", "v", "w", "z"])
    return bonsai.train({"objective": "binary", "n_estimators": 6, "max_depth": 3}, ds), X


@pytest.fixture(scope="module")
def multiclass_model():
    X, y = _numeric_data(seed=2)
    cls = np.digitize(y, [-0.5, 0.8]).astype(float)
    b = bonsai.train({"objective": "multiclass", "num_class": 3, "n_estimators": 3,
                      "max_depth": 3}, bonsai.Dataset(X, label=cls))
    return b, X


@pytest.fixture(scope="module")
def cat_model():
    df, y = _cat_frame()
    b = bonsai.train({"objective": "squared_error", "n_estimators": 4, "max_depth": 3,
                      "min_data_per_group": 5}, bonsai.Dataset(df, label=y))
    return b, df


@pytest.fixture(scope="module")
def ctr_model():
    df, y = _cat_frame(seed=3)
    b = bonsai.train({"objective": "binary", "n_estimators": 4, "max_depth": 3,
                      "cat_encoding": "ordered"}, bonsai.Dataset(df, label=(y > 1).astype(float)))
    return b, df


def _chain_booster(depth):
    """A hand-built regression model: one tree, a chain of ``depth`` splits on f0
    (node 2k splits, its left child 2k+1 is a leaf, its right child 2k+2 goes on)."""
    n = 2 * depth + 1
    feature = np.zeros(n, np.int32)
    threshold = np.zeros(n)
    left = np.full(n, -1, np.int32)
    right = np.full(n, -1, np.int32)
    value = np.zeros(n)
    for k in range(depth):
        i = 2 * k
        threshold[i] = float(k)
        left[i], right[i] = i + 1, i + 2
        value[i + 1] = float(k)
    value[n - 1] = float(depth)
    feature[left < 0] = -1
    tree = Tree(feature, threshold, np.full(n, -1, np.int32), np.ones(n, np.uint8), left,
                right, value, np.where(left >= 0, 1.0, 0.0), np.ones(n), np.ones(n, np.int64))
    tree.check()
    b = bonsai.Booster()
    b.trees, b.tree_class = [tree], [0]
    b.n_outputs, b.n_features, b.feature_names = 1, 1, None
    b.base_score = np.zeros(1)
    b.objective, b.objective_params = "squared_error", {}
    b._cache = None
    b._obj = None
    return b


def _margin_from_frame(b, df_nodes, X):
    leaves = b.predict(X, pred_leaf=True)
    val = df_nodes.set_index(["tree_index", "node_index"])
    out = np.tile(b.base_score, (leaves.shape[0], 1))
    for t in range(leaves.shape[1]):
        rows = val.loc[[(t, int(i)) for i in leaves[:, t]]]
        assert rows["is_leaf"].all()
        out[:, b.tree_class[t]] += rows["value"].to_numpy()
    return out[:, 0] if b.n_outputs == 1 else out


def _walk(node, row):
    """The leaf a row (dict feature index -> value; categorical: the category value or
    NaN) reaches in a dumped tree structure."""
    while "leaf_index" not in node:
        v = row[node["split_feature"]]
        if node["decision_type"] == "in":
            go_left = not (isinstance(v, float) and np.isnan(v)) and v in node["categories"]
        elif isinstance(v, float) and np.isnan(v):
            go_left = node["default_left"]
        else:
            go_left = v <= node["threshold"]
        node = node["left_child"] if go_left else node["right_child"]
    return node


def _margin_from_dump(d, rows):
    K = d["n_outputs"]
    out = np.tile(np.asarray(d["base_score"]), (len(rows), 1))
    for r, row in enumerate(rows):
        for info in d["tree_info"]:
            out[r, info["class"]] += _walk(info["tree_structure"], row)["leaf_value"]
    return out[:, 0] if K == 1 else out


def _rows(X):
    return [dict(enumerate(map(float, x))) for x in X]


# ---- trees_to_dataframe ------------------------------------------------------------

def test_dataframe_columns_rows_and_leaf_fields(binary_model):
    b, _ = binary_model
    df = trees_to_dataframe(b)
    assert list(df.columns) == COLUMNS
    assert len(df) == sum(t.n_nodes for t in b.trees)
    assert int(df["is_leaf"].sum()) == sum(t.n_leaves for t in b.trees)
    assert (df["node_id"] == df["tree_index"].astype(str) + "-" + df["node_index"].astype(str)).all()
    leaves, internal = df[df["is_leaf"]], df[~df["is_leaf"]]
    assert (leaves["split_index"] == -1).all() and leaves["threshold"].isna().all()
    assert leaves["split_feature"].isna().all() and leaves["left_child"].isna().all()
    assert leaves["decision_type"].isna().all() and (leaves["gain"] == 0).all()
    assert set(internal["split_feature"]) <= {"u", "v", "w", "z"}
    assert (internal["decision_type"] == "<=").all() and internal["threshold"].notna().all()
    assert set(internal["missing_direction"]) <= {"left", "right"}
    # the feature with missing values sends them one documented way, matching the tree
    for _, r in internal.iterrows():
        tree = b.trees[r["tree_index"]]
        assert r["missing_direction"] == ("left" if tree.default_left[r["node_index"]] else "right")
        assert r["split_feature"] == ["u", "v", "w", "z"][r["split_index"]]
    assert df["count"].iloc[0] == 300 and df["tree_index"].is_monotonic_increasing


def test_dataframe_leaf_values_reproduce_margins(binary_model, multiclass_model):
    for b, X in (binary_model, multiclass_model):
        df = trees_to_dataframe(b)
        got = _margin_from_frame(b, df, X[:12])
        np.testing.assert_allclose(got, b.predict(X[:12], output_margin=True), rtol=0, atol=1e-12)


def test_dataframe_parent_child_links(binary_model, cat_model):
    for b, _ in (binary_model, cat_model):
        df = trees_to_dataframe(b)
        by_id = df.set_index("node_id")
        roots = df[df["node_index"] == 0]
        assert (roots["parent_index"] == -1).all() and (roots["depth"] == 0).all()
        assert (df["parent_index"] == -1).sum() == len(b.trees)
        for _, r in df[~df["is_leaf"]].iterrows():
            for side in ("left_child", "right_child"):
                child = by_id.loc[r[side]]
                assert child["tree_index"] == r["tree_index"]
                assert child["parent_index"] == r["node_index"]
                assert child["depth"] == r["depth"] + 1
        for _, r in df[df["parent_index"] >= 0].iterrows():
            parent = by_id.loc[f"{r['tree_index']}-{r['parent_index']}"]
            assert r["node_id"] in (parent["left_child"], parent["right_child"])
        assert len(df) == len(set(df["node_id"]))


def test_dataframe_multiclass_class_column(multiclass_model):
    b, _ = multiclass_model
    df = trees_to_dataframe(b)
    assert set(df["class"]) == {0, 1, 2}
    assert (df["class"] == df["tree_index"] % 3).all()
    assert (df["class"].to_numpy() == np.asarray(b.tree_class)[df["tree_index"]]).all()


def test_dataframe_categorical_values(cat_model):
    b, frame = cat_model
    df = trees_to_dataframe(b)
    cat = df[df["decision_type"] == "in"]
    assert len(cat) > 0, "the fixture model should split on a category"
    assert set(cat["split_feature"]) <= {"c", "d"}
    values = {"c": {"x", "y", "z", "w", "v"}, "d": {"p", "q", "r"}}
    for _, r in cat.iterrows():
        assert isinstance(r["categories"], list) and r["categories"]
        assert set(r["categories"]) <= values[r["split_feature"]]
        assert np.isnan(r["threshold"]) and r["missing_direction"] == "right"
        cm = b.categories
        i = cm.features.index(r["split_index"])
        codes = b.trees[r["tree_index"]].cat_left(r["node_index"])
        assert r["categories"] == [cm.categories[i][c] for c in codes]
    assert df.loc[df["decision_type"] == "<=", "categories"].isna().all()
    np.testing.assert_allclose(_margin_from_frame(b, df, frame.iloc[:12]),
                               b.predict(frame.iloc[:12], output_margin=True), atol=1e-12)


def test_dataframe_ctr_feature_names(ctr_model):
    b, _ = ctr_model
    df = trees_to_dataframe(b)
    ctr = df[df["split_index"] >= b.n_features]
    assert len(ctr) > 0, "the fixture model should split on a CTR feature"
    for _, r in ctr.iterrows():
        e = r["split_index"] - b.n_features
        src = ",".join(b.feature_names[s] for s in b.ctr.sources_of(e))
        stat = "freq" if e % b.ctr.width == b.ctr.width - 1 else "mean"
        assert r["split_feature"] == f"ctr({src})[{stat}]"
    assert feature_name(b, b.n_features) == "ctr(c)[mean]"
    assert feature_name(b, b.n_features + 1) == "ctr(c)[freq]"
    assert feature_name(b, 0) == "a"
    assert "ctr(c,d)[mean]" in set(df["split_feature"])   # a combination group


def test_dataframe_without_feature_names_and_deep_chain():
    b = _chain_booster(150)
    df = trees_to_dataframe(b)
    assert len(df) == 301 and df["depth"].max() == 150
    assert set(df.loc[~df["is_leaf"], "split_feature"]) == {"f0"}
    assert df.loc[df["node_index"] == 300, "parent_index"].item() == 298


def test_accepts_estimator_and_rejects_others():
    X, y = _numeric_data(n=120)
    est = bonsai.BonsaiRegressor(n_estimators=2, max_depth=2).fit(X, y)
    df = trees_to_dataframe(est)
    assert len(df) == sum(t.n_nodes for t in est.booster_.trees)
    assert dump_model(est)["n_features"] == 4
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        trees_to_dataframe(bonsai.BonsaiRegressor())
    with pytest.raises(TypeError, match="Booster"):
        dump_model("model.json")


def test_dataframe_needs_pandas(binary_model, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        trees_to_dataframe(binary_model[0])


# ---- dump_model ------------------------------------------------------------------------

def test_dump_model_json_round_trip_and_header(binary_model):
    b, _ = binary_model
    d = dump_model(b)
    text = json.dumps(d, allow_nan=False)
    assert json.loads(text) == d
    assert d["objective"] == "binary" and d["n_outputs"] == 1 and d["num_class"] == 1
    assert d["n_features"] == 4 and d["feature_names"] == ["u", "v", "w", "z"]
    assert d["base_score"] == [float(b.base_score[0])] and d["best_iteration"] is None
    assert d["categorical_features"] == [] and d["ctr_features"] == []
    assert len(d["tree_info"]) == len(b.trees)
    for t, info in enumerate(d["tree_info"]):
        assert info["tree_index"] == t and info["class"] == 0
        assert info["num_leaves"] == b.trees[t].n_leaves
        root = info["tree_structure"]
        assert root["node_index"] == 0 and root["decision_type"] == "<="
        assert root["split_feature_name"] == d["feature_names"][root["split_feature"]]
        assert set(root) >= {"threshold", "default_left", "missing_direction", "split_gain",
                             "internal_value", "internal_cover", "internal_count",
                             "left_child", "right_child"}
        # count leaves by walking (explicit stack)
        leaves, stack = 0, [root]
        while stack:
            node = stack.pop()
            if "leaf_index" in node:
                assert set(node) == {"leaf_index", "leaf_value", "leaf_cover", "leaf_count"}
                leaves += 1
            else:
                stack += [node["left_child"], node["right_child"]]
        assert leaves == info["num_leaves"]


def test_dump_model_walk_reproduces_predictions(binary_model, multiclass_model):
    for b, X in (binary_model, multiclass_model):
        d = json.loads(json.dumps(dump_model(b)))
        assert d["num_class"] == (3 if b.objective == "multiclass" else 1)
        np.testing.assert_allclose(_margin_from_dump(d, _rows(X[:15])),
                                   b.predict(X[:15], output_margin=True), rtol=0, atol=1e-12)
        leaf = b.predict(X[:15], pred_leaf=True)
        for r, row in enumerate(_rows(X[:15])):
            got = [_walk(info["tree_structure"], row)["leaf_index"] for info in d["tree_info"]]
            assert got == leaf[r].tolist()


def test_dump_model_categorical(cat_model):
    b, frame = cat_model
    d = json.loads(json.dumps(dump_model(b)))
    assert [c["feature"] for c in d["categorical_features"]] == [2, 3]
    assert d["categorical_features"][0]["name"] == "c"
    assert sorted(d["categorical_features"][0]["categories"]) == ["v", "w", "x", "y", "z"]
    sub = frame.iloc[:20]
    rows = [{0: float(r.a), 1: float(r.b),
             2: float("nan") if pd.isna(r.c) else r.c, 3: r.d} for r in sub.itertuples()]
    assert any(isinstance(row[2], float) for row in rows), "want a missing category"
    np.testing.assert_allclose(_margin_from_dump(d, rows), b.predict(sub, output_margin=True),
                               atol=1e-12)


def test_dump_model_ctr(ctr_model):
    b, frame = ctr_model
    d = dump_model(b)
    json.dumps(d, allow_nan=False)
    names = {c["index"]: c["name"] for c in d["ctr_features"]}
    assert len(names) == b.ctr.n_out and names[b.n_features] == "ctr(c)[mean]"
    pair = [c for c in d["ctr_features"] if c["sources"] == [2, 3]]
    assert [c["name"] for c in pair] == ["ctr(c,d)[mean]", "ctr(c,d)[freq]"]
    Xt = b._check_X(frame.iloc[:15])          # [coded features | CTR features]
    np.testing.assert_allclose(_margin_from_dump(d, _rows(Xt)),
                               b.predict(frame.iloc[:15], output_margin=True), atol=1e-12)


def test_dump_model_plain_types_and_deep_tree(binary_model):
    b = copy.copy(binary_model[0])
    b.params = dict(b.params, f32=np.float32(1.5), bad=float("nan"), arr=np.arange(3),
                    tup=(np.int64(2), np.bool_(True)), obj=object())
    d = dump_model(b)
    back = json.loads(json.dumps(d, allow_nan=False))
    assert back["params"]["f32"] == 1.5 and back["params"]["bad"] is None
    assert back["params"]["arr"] == [0, 1, 2] and back["params"]["tup"] == [2, True]
    assert isinstance(back["params"]["obj"], str)
    chain = _chain_booster(200)
    d = json.loads(json.dumps(dump_model(chain)))
    node, depth = d["tree_info"][0]["tree_structure"], 0
    while "leaf_index" not in node:
        node, depth = node["right_child"], depth + 1
    assert depth == 200 and node["leaf_value"] == 200.0 and node["leaf_index"] == 400
    x = np.array([[-1.0], [57.5], [500.0], [np.nan]])
    np.testing.assert_allclose(_margin_from_dump(d, _rows(x)), chain.predict(x, output_margin=True))
