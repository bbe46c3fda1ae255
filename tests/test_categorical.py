"""Native categorical features: input (pandas categories, ``categorical_features``),
the category codes stored in the model, categorical splits in every grower and every
predictor, model files, determinism and errors."""
import json

import numpy as np
import pandas as pd
import pytest

import bonsai
from bonsai.backends import get_backend
from bonsai._threads import thread_context

GROWERS = ("depthwise", "leafwise", "oblivious")


def _data(n=6000, seed=0):
    """A string category with a non-monotone effect, an integer category, a numeric
    column with missing values."""
    rng = np.random.default_rng(seed)
    c1 = rng.integers(0, 40, n)
    c2 = rng.integers(0, 6, n)
    x = rng.normal(size=n)
    eff = rng.normal(size=40) * 1.5
    y = (eff[c1] + 0.8 * (c2 == 3) + 0.5 * x + rng.normal(size=n) > 0).astype(float)
    df = pd.DataFrame({"c1": pd.Categorical([f"k{v}" for v in c1]), "c2": c2, "x": x})
    df.loc[::13, "x"] = np.nan
    df.loc[::29, "c1"] = np.nan
    return df, y


PARAMS = {"objective": "binary", "n_estimators": 12, "min_data_per_group": 10,
          "min_child_samples": 5, "max_cat_to_onehot": 4}


def _fit(df, y, threads=2, **kw):
    p = dict(PARAMS, n_threads=threads, **kw)
    return bonsai.train(p, bonsai.Dataset(df, label=y, categorical_features=["c2"]))


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.fixture(scope="module", params=GROWERS)
def model(request, data):
    df, y = data
    return _fit(df, y, grow_policy=request.param), request.param


def test_categorical_splits_are_used(model):
    b, _ = model
    n_cat = sum(int(t.is_categorical().sum()) for t in b.trees)
    assert n_cat > 0
    assert b.categories.features == (0, 1)
    # codes in decreasing frequency: the first category of c1 is its most frequent
    df, _ = _data()
    counts = df["c1"].value_counts()
    assert b.categories.categories[0][0] == counts.index[0]


def test_shuffled_category_order_gives_identical_predictions(model, data):
    b, _ = model
    df, _ = data
    p = b.predict(df)
    df2 = df.copy()
    cats = list(df2["c1"].cat.categories)
    df2["c1"] = df2["c1"].cat.reorder_categories(cats[::-1])
    df2["c2"] = pd.Categorical(df2["c2"], categories=[5, 3, 1, 0, 2, 4, 7])  # extra 7
    assert np.array_equal(b.predict(df2), p)
    # the same rows in another order
    perm = np.random.default_rng(1).permutation(len(df))
    assert np.array_equal(b.predict(df2.iloc[perm]), p[perm])
    # one row at a time takes the same path
    for i in range(5):
        assert np.array_equal(b.predict(df.iloc[i:i + 1]), p[i:i + 1])


def test_unseen_categories_go_the_missing_way(model, data):
    b, _ = model
    df, _ = data
    unseen = df.head(200).copy()
    unseen["c1"] = pd.Categorical(["never-seen"] * 200)
    missing = df.head(200).copy()
    missing["c1"] = pd.Categorical([None] * 200, categories=["k1"])
    assert np.array_equal(b.predict(unseen), b.predict(missing))
    num = df.head(200).copy()
    num["c2"] = 99     # an integer category not seen in training
    nan = df.head(200).copy()
    nan["c2"] = np.nan
    assert np.array_equal(b.predict(num), b.predict(nan))


def test_model_bytes_identical_at_1_and_2_threads(model, data, split_finely, work_log):
    """The fixture's model (default thresholds: its 6,000 rows run on one thread)
    against fits at 1 and 2 threads with the work-split thresholds lowered, which cut
    the histograms, partitions and scans between the threads (``work_log`` checks)."""
    b, policy = model
    df, y = data
    s = b.model_to_string()
    for n in (1, 2):
        work_log.clear()
        assert _fit(df, y, threads=n, grow_policy=policy).model_to_string() == s, n
        work_log.check_fit(n, f"categorical {policy}")


@pytest.mark.parametrize("policy", GROWERS)
def test_quantized_categorical_deterministic(data, policy, split_finely, work_log):
    df, y = data
    texts = []
    for n in (1, 2):
        work_log.clear()
        texts.append(_fit(df, y, threads=n, quantized_grad=True,
                          grow_policy=policy).model_to_string())
        work_log.check_fit(n, f"quantized categorical {policy}")
    assert texts[0] == texts[1]


def test_model_file_round_trip(model, data, tmp_path):
    b, _ = model
    df, _ = data
    path = tmp_path / "m.json"
    b.save_model(path)
    doc = json.loads(path.read_text())
    assert doc["schema_version"] == 2
    assert doc["categorical"]["features"] == [0, 1]
    assert any(any(c) for t in doc["trees"] for c in t["cat_left"])
    b2 = bonsai.Booster(model_file=path)
    assert np.array_equal(b2.predict(df), b.predict(df))
    assert b2.model_to_string() == b.model_to_string()


def test_numeric_model_stays_schema_1(data):
    df, y = data
    b = bonsai.train({"n_estimators": 2}, bonsai.Dataset(df[["x"]], label=y))
    assert json.loads(b.model_to_string())["schema_version"] == 1


def test_binned_and_raw_predictors_agree(model, data):
    """Validation scores (binned rows) and predict (raw values) take the same leaves."""
    b, _ = model
    df, y = data
    ds = bonsai.Dataset(df, label=y, categorical_features=["c2"])
    cpu = get_backend("cpu")
    rows = np.arange(len(df), dtype=np.uint32)
    raw = b.predict(df, output_margin=True)
    acc = np.full(len(df), b.base_score[0])
    with thread_context(2):
        for tree in b.trees:
            cpu.predict_binned_add(ds.X_cols, rows, tree, ds.bin_mapper.missing_bin, acc)
    assert np.array_equal(acc, raw)


def test_leaf_indices_match_predictions(model, data):
    b, _ = model
    df, _ = data
    leaves = b.predict(df, pred_leaf=True)
    acc = np.full(len(df), b.base_score[0])
    for t, tree in enumerate(b.trees):
        acc += tree.value[leaves[:, t]]
    assert np.array_equal(acc, b.predict(df, output_margin=True))


def test_categorical_beats_ordinal_codes():
    """A non-monotone category effect: categorical splits find it in shallow trees,
    ordinal codes need many thresholds."""
    d, yy = _data(n=12000, seed=3)
    df, y, dt, yt = d.iloc[:8000], yy[:8000], d.iloc[8000:], yy[8000:]
    p = dict(PARAMS, n_estimators=20, max_depth=2)
    b = bonsai.train(p, bonsai.Dataset(df, label=y))
    ordinal = df.copy()
    ordinal["c1"] = df["c1"].cat.codes.replace(-1, np.nan)
    o = bonsai.train(p, bonsai.Dataset(ordinal, label=y))
    ordinal_t = dt.copy()
    ordinal_t["c1"] = pd.Categorical(dt["c1"], categories=df["c1"].cat.categories).codes
    ordinal_t["c1"] = ordinal_t["c1"].replace(-1, np.nan)
    from sklearn.metrics import roc_auc_score
    auc_cat = roc_auc_score(yt, b.predict(dt))
    auc_ord = roc_auc_score(yt, o.predict(ordinal_t))
    assert auc_cat > auc_ord + 0.01


def test_numpy_categorical_features_by_index():
    rng = np.random.default_rng(5)
    n = 4000
    c = rng.choice([3.0, 10.0, -2.0, 7.5, 100.0, 11.0], n)
    eff = {3.0: 1.0, 10.0: -1.0, -2.0: 0.5, 7.5: -0.5, 100.0: 1.5, 11.0: -1.5}
    X = np.column_stack([rng.normal(size=n), c])
    y = np.array([eff[v] for v in c]) + 0.3 * X[:, 0] + rng.normal(size=n) * 0.1
    b = bonsai.train({"n_estimators": 10, "categorical_features": [1], "min_data_per_group": 10,
                      "max_depth": 2}, bonsai.Dataset(X, label=y))
    assert b.categories.features == (1,)
    assert sorted(b.categories.categories[0]) == [-2, 3, 7.5, 10, 11, 100]
    assert sum(int(t.is_categorical().sum()) for t in b.trees) > 0
    pred = b.predict(X)
    assert np.corrcoef(pred, y)[0, 1] > 0.95
    X2 = X[:50].copy()
    X2[:, 1] = 55.0          # unseen value
    X3 = X[:50].copy()
    X3[:, 1] = np.nan
    assert np.array_equal(b.predict(X2), b.predict(X3))
    # a DataFrame with the same numbers as a category column predicts the same
    df = pd.DataFrame({"a": X[:, 0], "b": pd.Categorical(X[:, 1])})
    assert np.array_equal(b.predict(df), pred)


def test_categorical_features_param_in_train_rebins():
    df, y = _data(n=3000)
    ds = bonsai.Dataset(df, label=y)   # c2 numeric here
    b = bonsai.train(dict(PARAMS, n_estimators=3, categorical_features=["c2"]), ds)
    assert b.categories.features == (0, 1)


def test_high_cardinality_keeps_max_bin_categories():
    rng = np.random.default_rng(7)
    n = 20000
    c = rng.zipf(1.3, n) % 5000
    y = (np.sin(c) + rng.normal(size=n) > 0).astype(float)
    df = pd.DataFrame({"c": pd.Categorical(c)})
    ds = bonsai.Dataset(df, label=y, max_bin=63)
    n_seen = len(np.unique(c))
    assert len(ds.categories.categories[0]) == n_seen > 1000     # every category has a code
    assert ds.bin_mapper.n_value_bins[0] == 63                    # the 63 most frequent a bin
    assert (ds.X_cols[0][ds.cat_codes[0] >= 63] == ds.bin_mapper.missing_bin[0]).all()
    b = bonsai.train({"objective": "binary", "n_estimators": 5, "min_data_per_group": 5,
                      "cat_encoding": "native"}, ds)
    assert sum(int(t.is_categorical().sum()) for t in b.trees) > 0
    # rare categories (no bin of their own) take the missing way in predict too
    acc = np.full(n, b.base_score[0])
    with thread_context(2):
        for tree in b.trees:
            get_backend("cpu").predict_binned_add(ds.X_cols, np.arange(n, dtype=np.uint32),
                                                  tree, ds.bin_mapper.missing_bin, acc)
    assert np.array_equal(acc, b.predict(df, output_margin=True))


def test_valid_set_and_continued_training(data):
    df, y = data
    ds = bonsai.Dataset(df.iloc[:4000], label=y[:4000], categorical_features=["c2"])
    dv = bonsai.Dataset(df.iloc[4000:], label=y[4000:], reference=ds)
    b = bonsai.train(dict(PARAMS, n_estimators=4), ds, valid_sets=[dv])
    ll = b.evals_result["valid_0"]["logloss"][-1]
    p = b.predict(df.iloc[4000:])
    yv = y[4000:]
    ref = -np.mean(yv * np.log(p) + (1 - yv) * np.log(1 - p))
    assert ll == pytest.approx(ref, rel=1e-12)
    b2 = bonsai.train(dict(PARAMS, n_estimators=3), ds, init_model=b)
    assert b2.num_boosted_rounds() == 7
    other = bonsai.Dataset(df.iloc[:4000], label=y[:4000])
    with pytest.raises(ValueError, match="init_model"):
        bonsai.train(dict(PARAMS, n_estimators=1), other, init_model=b)


def test_errors(data):
    df, y = data
    with pytest.raises(ValueError, match="categorical_features: index 7"):
        bonsai.Dataset(df, label=y, categorical_features=[7])
    with pytest.raises(ValueError, match="'nope' is not a feature name"):
        bonsai.Dataset(df, label=y, categorical_features=["nope"])
    with pytest.raises(TypeError, match="categorical_features must be a list"):
        bonsai.Dataset(df, label=y, categorical_features="c2")
    X = np.zeros((10, 2))
    X[3, 1] = np.inf
    with pytest.raises(ValueError, match="infinite"):
        bonsai.Dataset(X, label=np.zeros(10), categorical_features=[1])
    b = _fit(df, y, n_estimators=2)
    with pytest.raises(ValueError, match="non-numeric categories"):
        b.predict(np.zeros((3, 3)))
    num = bonsai.train({"n_estimators": 2}, bonsai.Dataset(df[["x"]].assign(z=1.0), label=y))
    with pytest.raises(TypeError, match="categorical"):
        num.predict(df[["c1", "x"]])
    other = df.copy()
    other["x"] = pd.Categorical(other["x"].round())     # numeric in the model
    with pytest.raises(TypeError, match="'x' is categorical"):
        b.predict(other)
    ds = bonsai.Dataset(df, label=y, categorical_features=["c2"])
    with pytest.raises(ValueError, match="'x' is categorical"):
        bonsai.Dataset(other, label=y, reference=ds)
    bad = json.loads(b.model_to_string())
    kept = bad["categorical"]["features"].index(1)
    bad["categorical"] = {"features": [1], "categories": [bad["categorical"]["categories"][kept]]}
    with pytest.raises(ValueError, match="not categorical"):   # splits on c2 remain
        bonsai.Booster(model_str=json.dumps(bad))


def test_sklearn_estimator_with_category_columns(data):
    df, y = data
    clf = bonsai.BonsaiClassifier(n_estimators=6, min_data_per_group=10,
                                  categorical_features=["c2"], n_threads=2)
    clf.fit(df.iloc[:5000], y[:5000], eval_set=[(df.iloc[5000:], y[5000:])])
    assert clf.booster_.categories.features == (0, 1)
    assert list(clf.feature_names_in_) == ["c1", "c2", "x"]
    p = clf.predict_proba(df)
    df2 = df.copy()
    df2["c1"] = df2["c1"].cat.reorder_categories(list(df2["c1"].cat.categories)[::-1])
    assert np.array_equal(clf.predict_proba(df2), p)
    assert len(clf.evals_result_["valid_0"]["logloss"]) == 6
    with pytest.raises(ValueError, match="feature"):
        clf.predict(df[["c2", "c1", "x"]])
