"""Bad input gives a clear error: ValueError / TypeError whose message names the
problem (the argument, the parameter or the column), raised before any training."""
import numpy as np
import pandas as pd
import pytest

import bonsai

RNG = np.random.default_rng(0)
X = RNG.normal(size=(200, 4))
Y = X[:, 0] + 0.1 * RNG.normal(size=200)


def _train(params=None, X_=X, y=Y, **ds_kw):
    p = {"n_estimators": 2, "n_threads": 1, **(params or {})}
    return bonsai.train(p, bonsai.Dataset(X_, label=y, **ds_kw))


@pytest.fixture(scope="module")
def model():
    return _train()


# ---- labels and weights ---------------------------------------------------------------

@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_label(bad):
    y = Y.copy()
    y[17] = bad
    with pytest.raises(ValueError, match=r"label.*(non-finite|finite).*17"):
        bonsai.Dataset(X, label=y)


@pytest.mark.parametrize("bad,what", [(np.nan, "non-finite"), (np.inf, "non-finite"),
                                      (-np.inf, "non-finite"), (-0.5, "negative")])
def test_bad_weight(bad, what):
    w = np.ones(200)
    w[3] = bad
    with pytest.raises(ValueError, match=rf"weight.*{what}.*3"):
        bonsai.Dataset(X, label=Y, weight=w)


def test_all_zero_weights():
    with pytest.raises(ValueError, match="weight"):
        bonsai.Dataset(X, label=Y, weight=np.zeros(200))


def test_label_and_weight_length():
    with pytest.raises(ValueError, match=r"label has 199 entries.*200 rows"):
        bonsai.Dataset(X, label=Y[:-1])
    with pytest.raises(ValueError, match=r"weight has 201 entries.*200 rows"):
        bonsai.Dataset(X, label=Y, weight=np.ones(201))


def test_non_numeric_label():
    with pytest.raises(TypeError, match="label"):
        bonsai.Dataset(X, label=np.array(["a", "b"] * 100))


@pytest.mark.parametrize("objective,label,msg", [
    ("poisson", -1.0, r"poisson.*label >= 0.*-1\.0"),
    ("gamma", -2.0, r"gamma.*label > 0.*-2\.0"),
    ("gamma", 0.0, r"gamma.*label > 0"),
    ("tweedie", -1.0, r"tweedie.*label >= 0"),
    ("binary", 2.0, r"binary.*label"),
])
def test_objective_rejects_labels(objective, label, msg):
    y = np.abs(Y) + 0.5
    if objective == "binary":
        y = (Y > 0).astype(float)
    y[5] = label
    with pytest.raises(ValueError, match=msg):
        _train({"objective": objective}, y=y)


def test_multiclass_label_out_of_range():
    y = np.digitize(Y, [-0.5, 0.5]).astype(float)  # 0, 1, 2
    y[9] = 3.0
    with pytest.raises(ValueError, match=r"label < num_class=3.*3\.0.*9"):
        _train({"objective": "multiclass", "num_class": 3}, y=y)
    y[9] = -1.0
    with pytest.raises(ValueError, match="label"):
        _train({"objective": "multiclass", "num_class": 3}, y=y)
    y[9] = 1.5
    with pytest.raises(ValueError, match="label"):
        _train({"objective": "multiclass", "num_class": 3}, y=y)


def test_multiclass_without_num_class():
    y = np.digitize(Y, [-0.5, 0.5]).astype(float)
    with pytest.raises(ValueError, match="num_class|n_classes"):
        _train({"objective": "multiclass"}, y=y)


# ---- features ---------------------------------------------------------------------------

def test_wrong_feature_count_at_predict(model):
    with pytest.raises(ValueError, match=r"X has 3 features.*trained with 4"):
        model.predict(X[:, :3])
    with pytest.raises(ValueError, match=r"X has 5 features.*4"):
        model.predict(np.hstack([X, X[:, :1]]))
    with pytest.raises(ValueError, match="2-D"):
        model.predict(X[0])


def test_valid_set_wrong_feature_count():
    tr = bonsai.Dataset(X, label=Y)
    with pytest.raises(ValueError, match=r"3 features.*reference.*4"):
        bonsai.Dataset(X[:, :3], label=Y, reference=tr)


def test_mismatched_feature_names_at_predict():
    df = pd.DataFrame(X, columns=["age", "height", "weight", "income"])
    b = bonsai.train({"n_estimators": 2, "n_threads": 1}, bonsai.Dataset(df, label=Y))
    assert list(b.feature_names) == ["age", "height", "weight", "income"]
    np.testing.assert_array_equal(b.predict(df), b.predict(X))  # same names: fine
    swapped = df[["height", "age", "weight", "income"]]
    with pytest.raises(ValueError, match=r"feature names.*height.*age"):
        b.predict(swapped)
    renamed = df.rename(columns={"income": "salary"})
    with pytest.raises(ValueError, match=r"feature names.*salary.*income"):
        b.predict(renamed)


def test_non_numeric_columns():
    df = pd.DataFrame({"a": X[:, 0], "city": ["x", "y"] * 100, "c": X[:, 2]})
    with pytest.raises(TypeError, match=r"'city'.*non-numeric"):
        bonsai.Dataset(df, label=Y)
    with pytest.raises(TypeError, match=r"astype\('category'\)"):
        bonsai.Dataset(df, label=Y)
    df2 = pd.DataFrame({"a": X[:, 0], "cat": pd.Categorical(["x", "y"] * 100)})
    assert bonsai.Dataset(df2, label=Y).categorical_features == (1,)   # category dtype
    with pytest.raises(TypeError, match="not numeric"):
        bonsai.Dataset(np.array([["1", "2"], ["3", "x"]]), label=[0.0, 1.0])
    with pytest.raises(TypeError, match="not numeric"):
        bonsai.Dataset(np.array([[1, None], [2, 3]], dtype=object), label=[0.0, 1.0])
    with pytest.raises(TypeError, match="complex"):
        bonsai.Dataset(np.ones((3, 2), complex), label=[0.0, 1.0, 2.0])


def test_non_numeric_columns_at_predict(model):
    df = pd.DataFrame({f"f{i}": X[:, i] for i in range(4)})
    df["f2"] = ["x", "y"] * 100
    with pytest.raises(TypeError, match=r"'f2'.*non-numeric"):
        model.predict(df)


def test_empty_data():
    with pytest.raises(ValueError, match="empty"):
        bonsai.Dataset(np.empty((0, 4)), label=np.empty(0))
    with pytest.raises(ValueError, match="empty"):
        bonsai.Dataset(np.empty((10, 0)), label=np.zeros(10))
    with pytest.raises(ValueError, match="empty"):
        bonsai.Dataset(pd.DataFrame({"a": []}, dtype=float), label=np.empty(0))


def test_not_2d():
    with pytest.raises(ValueError, match="2-D"):
        bonsai.Dataset(X[:, 0], label=Y)


# ---- parameters ---------------------------------------------------------------------------

def test_unknown_parameter():
    with pytest.raises(ValueError, match=r"unknown parameter 'num_leaves'.*max_leaves"):
        _train({"num_leaves": 31})
    with pytest.raises(ValueError, match=r"unknown parameter 'learnng_rate'.*learning_rate"):
        _train({"learnng_rate": 0.1})


@pytest.mark.parametrize("name,value,msg", [
    ("learning_rate", -0.1, r"'learning_rate' = -0\.1 is out of range"),
    ("learning_rate", 0.0, r"'learning_rate'"),
    ("learning_rate", float("nan"), r"'learning_rate'"),
    ("subsample", 1.5, r"'subsample' = 1\.5 is out of range"),
    ("colsample_bytree", 0.0, r"'colsample_bytree'"),
    ("max_depth", -1, r"'max_depth'"),
    ("max_leaves", 1, r"'max_leaves'"),
    ("min_child_samples", 0, r"'min_child_samples'"),
    ("reg_lambda", -1.0, r"'reg_lambda'"),
    ("alpha", 1.0, r"'alpha'"),
    ("n_threads", 0, r"n_threads"),
    ("max_bin", 1, r"'max_bin'"),
    ("objective", "squared_eror", r"'objective'.*squared_error"),
    ("grow_policy", "levelwise", r"'grow_policy'"),
    ("num_class", 3, r"'num_class'.*multiclass"),
])
def test_out_of_range_parameter(name, value, msg):
    with pytest.raises(ValueError, match=msg):
        _train({name: value})


@pytest.mark.parametrize("name,value", [("n_estimators", 2.5), ("learning_rate", "0.1"),
                                        ("max_depth", True), ("random_state", np.random.default_rng())])
def test_wrong_parameter_type(name, value):
    with pytest.raises(TypeError, match=rf"'{name}'"):
        _train({name: value})


def test_bad_train_arguments():
    with pytest.raises(TypeError, match="Dataset"):
        bonsai.train({}, X)
    with pytest.raises(ValueError, match="no label"):
        bonsai.train({"n_estimators": 1}, bonsai.Dataset(X))
    with pytest.raises(TypeError, match="params"):
        bonsai.train([("n_estimators", 1)], bonsai.Dataset(X, label=Y))
    with pytest.raises(ValueError, match="max_bin"):
        bonsai.Dataset(X, label=Y, max_bin=1)


def test_bad_predict_arguments(model):
    with pytest.raises(ValueError, match="iteration_range"):
        model.predict(X, iteration_range=(0, 99))
    with pytest.raises(ValueError, match="importance_type"):
        model.feature_importance("cover_typo")
