"""Model files: round trips (file, string, pickle) and the strict reader.

A round trip must predict identically and re-save to identical bytes; loading needs
no training data; any malformed model (truncated, garbage, wrong format, future
schema, broken tree) raises ValueError with a message that says what is wrong, and
never predicts.
"""
import json
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bonsai


def _data(n=1200, seed=0, n_features=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, n_features))
    X[rng.random((n, n_features)) < 0.1] = np.nan
    # rows with feature 0 missing are very different: the best split at feature 0 is
    # "all values left, missing right", whose raw threshold is +inf
    y = np.where(np.isnan(X[:, 0]), 8.0, 0.0) + np.nan_to_num(X[:, 1]) + 0.1 * rng.normal(size=n)
    return X, y


CASES = {
    "squared_error-depthwise": ({"objective": "squared_error"}, "reg"),
    "binary-leafwise": ({"objective": "binary", "grow_policy": "leafwise"}, "bin"),
    "multiclass-oblivious": ({"objective": "multiclass", "num_class": 3,
                              "grow_policy": "oblivious", "max_depth": 4}, "multi"),
    "quantile-depthwise": ({"objective": "quantile", "alpha": 0.3, "max_depth": 3}, "reg"),
    "poisson-leafwise": ({"objective": "poisson", "grow_policy": "leafwise",
                          "max_leaves": 8}, "count"),
}


def _labels(kind, y):
    if kind == "bin":
        return (y > np.median(y)).astype(float)
    if kind == "multi":
        return np.digitize(y, np.quantile(y, [0.3, 0.7])).astype(float)
    if kind == "count":
        return np.floor(np.abs(y)).astype(float)
    return y


def _train(case, n_estimators=10, **extra):
    params, kind = CASES[case]
    X, y = _data()
    y = _labels(kind, y)
    p = {"n_estimators": n_estimators, "learning_rate": 0.2, "n_threads": 2, "subsample": 0.8,
         **params, **extra}
    return bonsai.train(p, bonsai.Dataset(X, label=y)), X


@pytest.fixture(scope="module")
def model():
    return _train("squared_error-depthwise")


@pytest.mark.parametrize("case", list(CASES))
def test_file_round_trip_predicts_and_resaves_identically(case, tmp_path):
    b, X = _train(case)
    path = tmp_path / "model.json"
    b.save_model(path)
    loaded = bonsai.Booster(model_file=str(path))
    np.testing.assert_array_equal(loaded.predict(X), b.predict(X))
    np.testing.assert_array_equal(loaded.predict(X, output_margin=True),
                                  b.predict(X, output_margin=True))
    np.testing.assert_array_equal(loaded.predict(X, pred_leaf=True), b.predict(X, pred_leaf=True))
    np.testing.assert_array_equal(loaded.feature_importance("gain"), b.feature_importance("gain"))
    assert loaded.num_trees() == b.num_trees()
    path2 = tmp_path / "model2.json"
    loaded.save_model(path2)
    assert path2.read_bytes() == path.read_bytes()
    assert loaded.model_to_string() == b.model_to_string()


def test_infinite_threshold_survives_round_trip():
    b, X = _train("squared_error-depthwise")
    thresholds = np.concatenate([t.threshold[t.left >= 0] for t in b.trees])
    assert np.isinf(thresholds).any(), "the data should produce a missing-right split at +inf"
    s = b.model_to_string()
    json.loads(s)  # strict JSON (no bare Infinity/NaN tokens)
    assert "Infinity" not in s and "NaN" not in s
    loaded = bonsai.Booster(model_str=s)
    np.testing.assert_array_equal(loaded.predict(X), b.predict(X))


def test_string_round_trip(model):
    b, X = model
    s = b.model_to_string()
    assert isinstance(s, str)
    doc = json.loads(s)
    assert doc["format"] == "bonsai-model" and isinstance(doc["schema_version"], int)
    loaded = bonsai.Booster(model_str=s)
    np.testing.assert_array_equal(loaded.predict(X), b.predict(X))
    assert loaded.model_to_string() == s
    assert loaded.n_features == b.n_features == X.shape[1]


def test_pickle_round_trip(model):
    b, X = model
    for protocol in (2, pickle.HIGHEST_PROTOCOL):
        c = pickle.loads(pickle.dumps(b, protocol=protocol))
        np.testing.assert_array_equal(c.predict(X), b.predict(X))
        assert c.model_to_string() == b.model_to_string()


def test_early_stopped_model_keeps_best_iteration(tmp_path):
    X, y = _data(seed=3)
    tr = bonsai.Dataset(X[:900], label=y[:900])
    va = bonsai.Dataset(X[900:], label=y[900:] + 5 * np.random.default_rng(0).normal(size=300),
                        reference=tr)
    b = bonsai.train({"n_estimators": 200, "learning_rate": 0.5, "early_stopping_rounds": 3,
                      "n_threads": 1}, tr, valid_sets=[va])
    assert b.best_iteration is not None
    path = tmp_path / "m.json"
    b.save_model(path)
    c = bonsai.Booster(model_file=str(path))
    assert c.best_iteration == b.best_iteration
    np.testing.assert_array_equal(c.predict(X), b.predict(X))


def test_load_needs_no_training_data(model, tmp_path, child_env):
    """Load and predict in a fresh interpreter (importing the same bonsai) that never
    saw the training data."""
    b, X = model
    path = tmp_path / "m.json"
    b.save_model(path)
    np.save(tmp_path / "X.npy", X[:50])
    np.save(tmp_path / "pred.npy", b.predict(X[:50]))
    code = textwrap.dedent(f"""
        import numpy as np, bonsai
        b = bonsai.Booster(model_file={str(path)!r})
        p = b.predict(np.load({str(tmp_path / 'X.npy')!r}))
        assert np.array_equal(p, np.load({str(tmp_path / 'pred.npy')!r})), "predictions differ"
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120, cwd=str(tmp_path), env=child_env)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


# ---- malformed models ----------------------------------------------------------------

def _doc(model):
    return json.loads(model[0].model_to_string())


def _internal_node(tree_doc):
    return next(i for i, l in enumerate(tree_doc["left"]) if l >= 0)


def _assert_rejected(text, match, tmp_path, raw_bytes=None):
    """Both ``Booster(model_str=...)`` and ``Booster(model_file=...)`` raise ValueError."""
    if text is not None:
        with pytest.raises(ValueError, match=match):
            bonsai.Booster(model_str=text)
    path = tmp_path / "bad.json"
    if raw_bytes is not None:
        path.write_bytes(raw_bytes)
    else:
        path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError, match=match):
        bonsai.Booster(model_file=str(path))


def test_truncated_file(model, tmp_path):
    s = model[0].model_to_string()
    for cut in (0, 1, len(s) // 3, len(s) // 2, len(s) - 1):
        _assert_rejected(s[:cut], r"(?i)truncated|corrupt|not a (valid )?bonsai model", tmp_path)


def test_garbage_bytes(tmp_path):
    _assert_rejected("hello, I am not JSON {", r"(?i)corrupt|not a (valid )?bonsai model",
                     tmp_path)
    _assert_rejected("[1, 2, 3]", r"(?i)not a bonsai model|format", tmp_path)
    rng = np.random.default_rng(0)
    garbage = bytes(rng.integers(0, 256, 4096, dtype=np.uint8))   # not even UTF-8
    _assert_rejected(None, r"(?i)corrupt|not a (valid )?bonsai model", tmp_path, raw_bytes=garbage)


def test_wrong_format(model, tmp_path):
    doc = _doc(model)
    doc["format"] = "lightgbm"
    _assert_rejected(json.dumps(doc), r"'format'", tmp_path)
    del doc["format"]
    _assert_rejected(json.dumps(doc), r"'format'", tmp_path)


def test_future_schema_version(model, tmp_path):
    doc = _doc(model)
    doc["schema_version"] = 999
    _assert_rejected(json.dumps(doc), r"(?s)schema 999.*upgrade", tmp_path)
    doc["schema_version"] = "1"
    _assert_rejected(json.dumps(doc), r"schema_version", tmp_path)


def test_child_index_out_of_range(model, tmp_path):
    doc = _doc(model)
    t = doc["trees"][2]
    i = _internal_node(t)
    t["left"][i] = len(t["left"]) + 5
    _assert_rejected(json.dumps(doc), r"tree 2.*child index out of range", tmp_path)
    doc = _doc(model)
    t = doc["trees"][0]
    t["right"][_internal_node(t)] = -1        # internal node without a right child
    _assert_rejected(json.dumps(doc), r"tree 0", tmp_path)
    doc = _doc(model)
    t = doc["trees"][0]
    t["left"][_internal_node(t)] = 0           # a cycle back to the root
    _assert_rejected(json.dumps(doc), r"tree 0.*(tree|cycle)", tmp_path)


def test_feature_index_out_of_range(model, tmp_path):
    doc = _doc(model)
    t = doc["trees"][1]
    t["feature"][_internal_node(t)] = doc["n_features"]
    _assert_rejected(json.dumps(doc), r"tree 1.*feature index >= n_features", tmp_path)
    doc = _doc(model)
    t = doc["trees"][1]
    t["feature"][_internal_node(t)] = -3
    _assert_rejected(json.dumps(doc), r"tree 1.*feature", tmp_path)


def test_other_broken_fields(model, tmp_path):
    base = _doc(model)
    cases = []
    d = json.loads(json.dumps(base)); del d["trees"]; cases.append((d, "missing fields"))
    d = json.loads(json.dumps(base)); d["tree_class"] = d["tree_class"][:-1]
    cases.append((d, "tree_class"))
    d = json.loads(json.dumps(base)); d["tree_class"][0] = 5; cases.append((d, "tree_class"))
    d = json.loads(json.dumps(base)); d["base_score"] = [0.0, 1.0]; cases.append((d, "base_score"))
    d = json.loads(json.dumps(base)); d["n_features"] = 0; cases.append((d, "n_features"))
    d = json.loads(json.dumps(base)); d["objective"] = {"name": "nope"}; cases.append((d, "objective"))
    d = json.loads(json.dumps(base)); d["trees"][0]["value"] = d["trees"][0]["value"][:-1]
    cases.append((d, "tree 0"))
    d = json.loads(json.dumps(base)); d["trees"][0]["value"][-1] = "nan"
    cases.append((d, "tree 0"))
    d = json.loads(json.dumps(base)); d["trees"][0]["threshold"][0] = "abc"
    cases.append((d, "tree 0"))
    for d, match in cases:
        _assert_rejected(json.dumps(d), match, tmp_path)


@pytest.mark.parametrize("case", ["squared_error-depthwise", "poisson-leafwise"])
def test_oblivious_flag_on_a_non_symmetric_tree(case, tmp_path):
    """A file that marks ordinary trees ``"oblivious": true`` is malformed (the fast
    predictor assumes one (feature, threshold) per level): reject it, or at the very
    least predict exactly what the trees say -- never silently wrong values."""
    b, X = _train(case)
    doc = json.loads(b.model_to_string())
    for t in doc["trees"]:
        t["oblivious"] = True
    try:
        c = bonsai.Booster(model_str=json.dumps(doc))
    except ValueError as e:
        assert "oblivious" in str(e) or "symmetric" in str(e), str(e)
        return
    np.testing.assert_array_equal(
        c.predict(X), b.predict(X),
        err_msg="a tree falsely flagged oblivious loaded and predicts different values")


def test_bad_best_iteration_and_best_score(model, tmp_path):
    """A best_iteration outside the model's rounds would make predict drop trees
    silently (it keeps the trees up to it): the reader rejects it."""
    b = model[0]
    for bad in (-1, -5, b.num_boosted_rounds(), 10 ** 6, 1.5, "2", True):
        doc = _doc(model)
        doc["best_iteration"] = bad
        _assert_rejected(json.dumps(doc), r"best_iteration", tmp_path)
    doc = _doc(model)
    doc["best_iteration"] = b.num_boosted_rounds() - 1     # the last round: fine
    doc["best_score"] = 0.25
    c = bonsai.Booster(model_str=json.dumps(doc))
    assert c.best_iteration == b.num_boosted_rounds() - 1 and c.best_score == 0.25
    for bad in ("abc", [1.0], {"a": 1}):
        doc = _doc(model)
        doc["best_score"] = bad
        _assert_rejected(json.dumps(doc), r"best_score", tmp_path)


def test_bad_feature_names(model, tmp_path):
    doc = _doc(model)
    doc["feature_names"] = [f"f{j}" for j in range(doc["n_features"] - 1)]
    _assert_rejected(json.dumps(doc), r"feature_names length", tmp_path)
    doc["feature_names"] = list(range(doc["n_features"]))
    _assert_rejected(json.dumps(doc), r"feature_names must be strings", tmp_path)
    doc["feature_names"] = "x0"
    _assert_rejected(json.dumps(doc), r"feature_names", tmp_path)


def _cat_model(encoding):
    import pandas as pd
    rng = np.random.default_rng(4)
    n = 1500
    codes = rng.integers(0, 6, size=(n, 2))
    df = pd.DataFrame({"x": rng.normal(size=n),
                       "c0": pd.Categorical.from_codes(codes[:, 0], list("abcdef")),
                       "c1": pd.Categorical.from_codes(codes[:, 1], list("uvwxyz"))})
    y = ((codes[:, 0] % 2) + df["x"].to_numpy() + (codes[:, 1] == 3)) * 1.0
    return bonsai.train({"n_estimators": 3, "max_depth": 3, "cat_encoding": encoding,
                         "min_data_per_group": 5}, bonsai.Dataset(df, label=y))


def test_bad_categorical_fields(tmp_path):
    base = json.loads(_cat_model("native").model_to_string())
    assert base["categorical"]["features"] == [1, 2]

    def case(edit, match):
        d = json.loads(json.dumps(base))
        edit(d)
        _assert_rejected(json.dumps(d), match, tmp_path)

    case(lambda d: d.update(categorical=[1, 2]), r"'categorical'")
    case(lambda d: d["categorical"].update(features=[1]), r"'categorical'")
    case(lambda d: d["categorical"].update(features=[1, 7]), r"'categorical'.*indices")
    case(lambda d: d["categorical"].update(features=[1, 1]), r"'categorical'.*distinct")
    case(lambda d: d["categorical"].update(features=[1, "2"]), r"'categorical'")
    case(lambda d: d["categorical"]["categories"].__setitem__(0, "abcdef"), r"'categorical'")
    case(lambda d: d["categorical"]["categories"][0].append(d["categorical"]["categories"][0][0]),
         r"category twice")
    del base["categorical"]          # categorical splits on a model without categories
    _assert_rejected(json.dumps(base), r"not categorical", tmp_path)


def test_out_of_range_cat_left_codes(tmp_path):
    base = json.loads(_cat_model("native").model_to_string())
    hit = [(t, i) for t, td in enumerate(base["trees"]) for i, c in enumerate(td["cat_left"]) if c]
    assert hit, "the model must have categorical splits"
    t, i = hit[0]
    f = base["trees"][t]["feature"][i]
    n_cats = len(base["categorical"]["categories"][base["categorical"]["features"].index(f)])
    base["trees"][t]["cat_left"][i] = base["trees"][t]["cat_left"][i] + [n_cats]
    _assert_rejected(json.dumps(base), rf"tree {t}\W+node {i}.*category code {n_cats}",
                     tmp_path)
    base["trees"][t]["cat_left"][i] = [-1]
    _assert_rejected(json.dumps(base), rf"tree {t}.*out of range", tmp_path)


def test_bad_ctr_fields(tmp_path):
    base = json.loads(_cat_model("ordered").model_to_string())
    assert base["ctr"]["groups"]

    def case(edit, match="'ctr'"):
        d = json.loads(json.dumps(base))
        edit(d["ctr"])
        _assert_rejected(json.dumps(d), match, tmp_path)

    g0 = base["ctr"]["groups"][0]
    assert len(g0["keys"]) >= 2
    case(lambda c: c.pop("prior"))
    case(lambda c: c.update(groups="x"))
    case(lambda c: c["groups"][0].update(keys=g0["keys"][::-1]), r"increasing keys")
    case(lambda c: c["groups"][0].update(counts=g0["counts"][:-1]), r"group 0")
    case(lambda c: c["groups"][0].update(sums=g0["sums"][:-1]), r"'ctr'")
    case(lambda c: c["groups"][0].update(sources=[0]), r"unknown source")
    case(lambda c: c.update(n_train=0), r"n_train")
    case(lambda c: c.update(prior=[]), r"prior")
    case(lambda c: c["cards"].update({k: v + 1 for k, v in c["cards"].items()}), r"cards")


KEPT = Path(__file__).resolve().parent / "data" / "models"


@pytest.mark.parametrize("name", ["bonsai-0.1.0-binary", "bonsai-0.1.0-categorical"])
def test_models_written_by_earlier_releases_load(name):
    """Model files kept from earlier releases (``tests/data/models``) still load and
    predict exactly what the release that wrote them predicted.  Never regenerate
    them: a later release must read them, or fail with a clear error."""
    import pandas as pd
    path = KEPT / (name + ".json")
    ref = np.load(KEPT / (name + ".npz"))
    b = bonsai.Booster(model_file=path)
    if "codes" in ref:
        c = ref["codes"]
        X = pd.DataFrame({"x": ref["X"],
                          "c0": pd.Categorical.from_codes(c[:, 0], list("abcdef")),
                          "c1": pd.Categorical.from_codes(c[:, 1], list("uvwxyz"))})
        assert b.categories is not None
    else:
        X = ref["X"]
    np.testing.assert_array_equal(b.predict(X, output_margin=True), ref["margin"])
    np.testing.assert_array_equal(b.predict(X), ref["pred"])
    again = bonsai.Booster(model_str=b.model_to_string())   # and re-saves losslessly
    np.testing.assert_array_equal(again.predict(X, output_margin=True), ref["margin"])
