"""bonsai.io.importers (through ``Booster.from_xgboost`` / ``from_lightgbm``): XGBoost JSON and LightGBM text models predict in bonsai exactly as
in their own library (float32 inputs with NaN), every input form loads, unsupported
models fail with a clear error, and imported models survive bonsai's model files."""
import json

import lightgbm as lgb  # test extras: a missing one fails collection, it never skips
import numpy as np
import pandas as pd
import pytest
import xgboost as xgb

import bonsai

from_lightgbm = bonsai.Booster.from_lightgbm
from_xgboost = bonsai.Booster.from_xgboost

TOL = dict(rtol=1e-6, atol=1e-6)
N_TRAIN = 2000


def _with_nan(X, seed):
    X = np.array(X, dtype=np.float64)
    X[np.random.default_rng(seed).random(X.shape) < 0.05] = np.nan
    return X


@pytest.fixture(scope="module")
def data(lgb_example):
    """name -> (X_train float64, y_train, X_test float32), 5% NaN."""
    out = {}
    for name in ("binary", "regression", "multiclass"):
        X, y, Xt, _ = lgb_example(name)
        out[name] = (_with_nan(X[:N_TRAIN], 1), y[:N_TRAIN],
                     _with_nan(Xt, 2).astype(np.float32))
    return out


def _check_trees(model):
    for tree in model.trees:
        tree.check()
    assert model.params == {} and model.grow_policy == "depthwise"


def _roundtrip(model, Xt):
    again = bonsai.Booster(model_str=model.model_to_string())
    np.testing.assert_array_equal(again.predict(Xt, output_margin=True),
                                  model.predict(Xt, output_margin=True))
    np.testing.assert_array_equal(again.predict(Xt), model.predict(Xt))
    assert again.extra["imported_from"] == model.extra["imported_from"]


# ------------------------------------------------------------------------------ XGBoost
XGB_CASES = [
    ("binary", "binary:logistic", {}, 0.0),
    ("binary", "binary:logitraw", {}, 0.0),
    ("regression", "reg:squarederror", {}, 0.0),
    ("regression", "reg:absoluteerror", {}, 0.0),
    ("regression", "reg:pseudohubererror", {}, 0.0),
    ("regression", "reg:quantileerror", {"quantile_alpha": 0.3}, 0.0),
    ("regression", "count:poisson", {}, 0.0),
    ("regression", "reg:gamma", {}, 0.5),
    ("regression", "reg:tweedie", {}, 0.0),
    ("multiclass", "multi:softprob", {"num_class": 5}, 0.0),
    ("multiclass", "multi:softmax", {"num_class": 5}, 0.0),
    ("binary", "binary:logistic", {"booster": "dart", "rate_drop": 0.3, "seed": 1}, 0.0),
]


@pytest.mark.parametrize("name,objective,extra,shift", XGB_CASES,
                         ids=[c[1] + ("-dart" if c[2].get("booster") else "") for c in XGB_CASES])
def test_xgboost_predictions_match(data, name, objective, extra, shift):
    X, y, Xt = data[name]
    params = {"objective": objective, "max_depth": 5, "eta": 0.3, "nthread": 1, **extra}
    bst = xgb.train(params, xgb.DMatrix(X, y + shift), 25)
    model = from_xgboost(bst)
    _check_trees(model)
    assert model.extra["imported_from"] == "xgboost"
    assert model.num_trees() == 25 * (5 if name == "multiclass" else 1)
    dm = xgb.DMatrix(Xt)
    np.testing.assert_allclose(model.predict(Xt, output_margin=True),
                               bst.predict(dm, output_margin=True), **TOL)
    if objective == "multi:softmax":   # XGBoost gives labels, bonsai probabilities
        assert model.objective == "multiclass"
        np.testing.assert_array_equal(model.predict(Xt).argmax(1), bst.predict(dm))
        np.testing.assert_allclose(model.predict(Xt).sum(1), 1.0, rtol=1e-12)
    else:
        np.testing.assert_allclose(model.predict(Xt), bst.predict(dm), **TOL)
    _roundtrip(model, Xt)


def test_xgboost_input_forms(data, tmp_path):
    X, y, Xt = data["binary"]
    names = [f"f{j}" for j in range(X.shape[1])]
    clf = xgb.XGBClassifier(n_estimators=20, max_depth=4, n_jobs=1)
    clf.fit(pd.DataFrame(X, columns=names), y)
    raw = clf.get_booster().save_raw("json")
    path = tmp_path / "model.json"
    path.write_bytes(raw)
    want = clf.predict_proba(pd.DataFrame(Xt, columns=names))[:, 1]
    for src in (clf, clf.get_booster(), raw, raw.decode(), json.loads(raw), str(path), path):
        model = from_xgboost(src)
        assert model.feature_names == names and model.n_features == X.shape[1]
        np.testing.assert_allclose(model.predict(Xt), want, **TOL)
    # the thresholds are the float32 values just below XGBoost's split conditions
    split = json.loads(raw)["learner"]["gradient_booster"]["model"]["trees"][0]
    c = np.float32(split["split_conditions"][0])
    assert model.trees[0].threshold[0] == np.nextafter(c, np.float32(-np.inf))
    assert model.trees[0].cover[0] == pytest.approx(split["sum_hessian"][0], rel=1e-6)
    assert model.trees[0].gain[0] == pytest.approx(split["loss_changes"][0], rel=1e-6)


def _cat_data(n, seed):
    rng = np.random.default_rng(seed)
    X = np.c_[rng.normal(size=n), rng.integers(0, 8, n), rng.normal(size=n),
              rng.integers(0, 30, n)].astype(np.float32)
    X[rng.random(n) < 0.1, 1] = np.nan
    X[rng.random(n) < 0.1, 3] = np.nan
    y = (X[:, 0] + np.isin(X[:, 1], [1, 3, 6]) * 1.5 + np.nan_to_num(X[:, 3]) % 3
         + np.isnan(X[:, 1]) * rng.choice([-2.0, 2.0], n) > 1.2).astype(float)
    return X, y


def test_xgboost_categorical_codes():
    X, y = _cat_data(2000, 0)
    Xt, _ = _cat_data(500, 1)
    types = ["q", "c", "q", "c"]
    bst = xgb.train({"objective": "binary:logistic", "max_depth": 4, "max_cat_to_onehot": 1,
                     "nthread": 1}, xgb.DMatrix(X, y, feature_types=types,
                                                enable_categorical=True), 20)
    model = from_xgboost(bst)
    assert model.categories.features == (1, 3)
    assert any(t.is_categorical().any() for t in model.trees)
    dm = xgb.DMatrix(Xt, feature_types=types, enable_categorical=True)
    np.testing.assert_allclose(model.predict(Xt, output_margin=True),
                               bst.predict(dm, output_margin=True), **TOL)
    _roundtrip(model, Xt)


def test_xgboost_categorical_dataframe():
    X, y = _cat_data(2000, 0)
    Xt, _ = _cat_data(500, 1)
    letters = list("abcdefgh")

    def frame(A):
        codes = np.nan_to_num(A[:, 1], nan=-1).astype(int)
        return pd.DataFrame({"a": A[:, 0], "c": pd.Categorical.from_codes(codes, letters),
                             "d": A[:, 2]})
    bst = xgb.train({"objective": "binary:logistic", "max_depth": 4, "nthread": 1},
                    xgb.DMatrix(frame(X), y, enable_categorical=True), 20)
    model = from_xgboost(bst)
    assert model.categories.categories == [letters]
    np.testing.assert_allclose(
        model.predict(frame(Xt)), bst.predict(xgb.DMatrix(frame(Xt), enable_categorical=True)),
        **TOL)


def _xgb_doc(data):
    X, y, _ = data["binary"]
    bst = xgb.train({"objective": "binary:logistic", "max_depth": 2, "nthread": 1},
                    xgb.DMatrix(X[:300], y[:300]), 2)
    return json.loads(bst.save_raw("json"))


def test_xgboost_errors(data):
    doc = _xgb_doc(data)
    hinge = json.loads(json.dumps(doc))
    hinge["learner"]["objective"]["name"] = "binary:hinge"
    with pytest.raises(ValueError, match="objective 'binary:hinge' is not supported"):
        from_xgboost(hinge)
    linear = xgb.train({"booster": "gblinear", "nthread": 1},
                       xgb.DMatrix(data["binary"][0][:100], data["binary"][1][:100]), 2)
    with pytest.raises(ValueError, match="booster 'gblinear' is not supported"):
        from_xgboost(linear)
    with pytest.raises(ValueError, match="neither model text nor an existing file"):
        from_xgboost("definitely not a model")
    with pytest.raises(ValueError, match="invalid JSON"):
        from_xgboost("{not json")
    with pytest.raises(ValueError, match="not an XGBoost JSON model"):
        from_xgboost({"format": "something else"})
    with pytest.raises(TypeError, match="from_xgboost: model must be"):
        from_xgboost(12345)
    broken = json.loads(json.dumps(doc))
    del broken["learner"]["gradient_booster"]["model"]["trees"][0]["split_conditions"]
    with pytest.raises(ValueError, match="from_xgboost: malformed"):
        from_xgboost(broken)
    bad_feature = json.loads(json.dumps(doc))
    bad_feature["learner"]["gradient_booster"]["model"]["trees"][0]["split_indices"][0] = 99
    with pytest.raises(ValueError, match="feature index"):
        from_xgboost(bad_feature)


# ------------------------------------------------------------------------------ LightGBM
LGB_CASES = [
    ("binary", "binary", {}),
    ("binary", "binary", {"sigmoid": 0.5}),
    ("binary", "cross_entropy", {}),
    ("regression", "regression", {}),
    ("regression", "regression", {"use_missing": False}),
    ("regression", "regression_l1", {}),
    ("regression", "huber", {"alpha": 0.5}),
    ("regression", "quantile", {"alpha": 0.3}),
    ("regression", "poisson", {}),
    ("regression", "gamma", {}),
    ("regression", "tweedie", {}),
    ("multiclass", "multiclass", {"num_class": 5}),
    ("binary", "binary", {"boosting": "rf", "bagging_freq": 1, "bagging_fraction": 0.5}),
]


@pytest.mark.parametrize("name,objective,extra", LGB_CASES,
                         ids=[c[1] + "-" + "-".join(map(str, c[2])) for c in LGB_CASES])
def test_lightgbm_predictions_match(data, name, objective, extra):
    X, y, Xt = data[name]
    y = y + 0.5 if objective == "gamma" else y
    params = {"objective": objective, "num_leaves": 15, "max_depth": 5, "verbose": -1,
              "num_threads": 1, "min_data_in_leaf": 20, **extra}
    bst = lgb.train(params, lgb.Dataset(X, y), 25)
    model = from_lightgbm(bst)
    _check_trees(model)
    assert model.extra["imported_from"] == "lightgbm"
    assert model.num_trees() == bst.num_trees()
    margin = bst.predict(Xt, raw_score=True)
    if "sigmoid" in extra:       # bonsai's margin carries LightGBM's sigmoid scale
        margin = margin * extra["sigmoid"]
    if extra.get("boosting") == "rf":   # bonsai's margin is the trees' mean
        margin = margin / bst.num_trees()
    np.testing.assert_allclose(model.predict(Xt, output_margin=True), margin, **TOL)
    np.testing.assert_allclose(model.predict(Xt), bst.predict(Xt), **TOL)
    _roundtrip(model, Xt)


def test_lightgbm_input_forms_and_categorical(tmp_path):
    X, y = _cat_data(2000, 0)
    Xt, _ = _cat_data(500, 1)
    Xt[:20, 1] = np.arange(-5, 15)     # negative and unseen categories
    Xt[20:40, 3] = np.arange(25, 45)
    clf = lgb.LGBMClassifier(n_estimators=20, num_leaves=15, min_data_per_group=5,
                             cat_smooth=1, verbose=-1, n_jobs=1)
    clf.fit(X, y, categorical_feature=[1, 3])
    path = tmp_path / "model.txt"
    clf.booster_.save_model(str(path))
    want = clf.predict_proba(Xt)[:, 1]
    for src in (clf, clf.booster_, clf.booster_.model_to_string(), str(path), path):
        model = from_lightgbm(src)
        assert model.categories.features == (1, 3)
        assert any(t.is_categorical().any() for t in model.trees)
        np.testing.assert_allclose(model.predict(Xt), want, **TOL)
    _roundtrip(model, Xt)


def test_lightgbm_pandas_categories():
    X, y = _cat_data(2000, 0)
    Xt, _ = _cat_data(500, 1)

    def frame(A):
        codes = np.nan_to_num(A[:, 1], nan=-1).astype(int)
        return pd.DataFrame({"a": A[:, 0], "c": pd.Categorical.from_codes(codes, list("pqrstuvw")),
                             "d": A[:, 2]})
    bst = lgb.train({"objective": "binary", "num_leaves": 15, "verbose": -1, "num_threads": 1,
                     "min_data_per_group": 5, "cat_smooth": 1}, lgb.Dataset(frame(X), y), 20)
    model = from_lightgbm(bst)
    assert model.categories.categories == [list("pqrstuvw")]
    np.testing.assert_allclose(model.predict(frame(Xt)), bst.predict(frame(Xt)), **TOL)


def _stump(threshold, decision_type, objective="regression"):
    """A one-split LightGBM text model on one feature."""
    return "\n".join([
        "tree", "version=v4", "num_class=1", "num_tree_per_iteration=1", "label_index=0",
        "max_feature_idx=0", f"objective={objective}", "feature_names=f0",
        "feature_infos=[-1:1]", "", "Tree=0", "num_leaves=2", "num_cat=0", "split_feature=0",
        "split_gain=1", f"threshold={threshold!r}", f"decision_type={decision_type}",
        "left_child=-1", "right_child=-2", "leaf_value=-1 1", "leaf_weight=1 1",
        "leaf_count=1 1", "internal_value=0", "internal_weight=2", "internal_count=2",
        "is_linear=0", "shrinkage=1", "", "", "end of trees", ""])


# decision_type: bit 1 default_left, bits 2-3 missing type (0 None, 1 Zero, 2 NaN)
@pytest.mark.parametrize("threshold,decision_type", [
    (0.5, 0), (-0.5, 0), (0.5, 8), (0.5, 10), (-0.5, 10), (0.5, 6), (1e-35, 6), (-0.5, 4),
    (1e-35, 4), (-1e-35, 4), (0.0, 4)])
def test_lightgbm_missing_types(threshold, decision_type):
    text = _stump(threshold, decision_type)
    x = np.array([-1, -0.5, -1.0000001e-35, -1e-35, -1e-36, 0, 1e-36, 1e-35, 2e-35, 0.5, 1,
                  np.nan])[:, None]
    want = lgb.Booster(model_str=text).predict(x)
    np.testing.assert_array_equal(from_lightgbm(text).predict(x), want)
    np.testing.assert_array_equal(from_lightgbm(text).predict(x.astype(np.float32)),
                                  lgb.Booster(model_str=text).predict(x.astype(np.float32)))


def test_lightgbm_errors(data):
    # zero-as-missing splits where 0.0 goes against 'x <= threshold'
    for threshold, decision_type in ((0.5, 4), (-0.5, 6)):
        with pytest.raises(ValueError, match="zero-as-missing split"):
            from_lightgbm(_stump(threshold, decision_type))
    X, y, _ = data["multiclass"]
    ova = lgb.train({"objective": "multiclassova", "num_class": 5, "verbose": -1,
                     "num_leaves": 4, "num_threads": 1}, lgb.Dataset(X[:500], y[:500]), 2)
    with pytest.raises(ValueError, match="objective 'multiclassova.*' is not supported"):
        from_lightgbm(ova)
    with pytest.raises(ValueError, match="is not supported"):
        from_lightgbm(_stump(0.5, 2, objective="cross_entropy_lambda"))
    linear = _stump(0.5, 2).replace("is_linear=0", "is_linear=1")
    with pytest.raises(ValueError, match="linear trees"):
        from_lightgbm(linear)
    with pytest.raises(ValueError, match="neither model text nor an existing file"):
        from_lightgbm("garbage")
    with pytest.raises(ValueError, match="not a LightGBM text model"):
        from_lightgbm("tree\nhello=1\n")
    with pytest.raises(ValueError, match="from_lightgbm: .*'leaf_value' has 1 values"):
        from_lightgbm(_stump(0.5, 2).replace("leaf_value=-1 1", "leaf_value=-1"))
    with pytest.raises(TypeError, match="from_lightgbm: model must be"):
        from_lightgbm(3.5)
