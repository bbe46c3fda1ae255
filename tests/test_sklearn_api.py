"""The estimators as LightGBM / XGBoost users call them: the ``predict`` flags passed
through to the Booster (and LightGBM's spellings), the predict fast path for plain
float matrices (same results and checks as the full path), and scikit-learn's
model-selection tools (GridSearchCV, cross_val_score, Pipeline with a
ColumnTransformer, clone)."""
import warnings

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import NotFittedError

from bonsai.sklearn import BonsaiClassifier, BonsaiRegressor

N_EST = 6


def _data(n=240, f=4, k=2, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, f))
    X[::9, 1] = np.nan
    score = X[:, 0] + 0.5 * np.nan_to_num(X[:, 1]) * X[:, 2]
    if k == 0:   # regression
        return X, score + 0.1 * rng.standard_normal(n)
    edges = np.quantile(score, np.linspace(0, 1, k + 1)[1:-1])
    return X, np.searchsorted(edges, score)


def _models():
    Xr, yr = _data(k=0)
    Xb, yb = _data(k=2, seed=1)
    Xm, ym = _data(k=3, seed=2)
    return [(BonsaiRegressor(n_estimators=N_EST, verbose=0).fit(Xr, yr), Xr),
            (BonsaiClassifier(n_estimators=N_EST, verbose=0).fit(Xb, yb), Xb),
            (BonsaiClassifier(n_estimators=N_EST, verbose=0).fit(Xm, ym), Xm)]


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------------------
# predict flags.
# ---------------------------------------------------------------------------

def test_predict_flags_pass_through_to_the_booster():
    for est, X in _models():
        booster = est.booster_
        F = X.shape[1]
        K = booster.n_outputs
        methods = [est.predict] + ([est.predict_proba] if hasattr(est, "predict_proba") else [])
        for method in methods:
            for flags, booster_flag in ((("pred_contribs", "pred_contrib"), "pred_contribs"),
                                        (("pred_leaf",), "pred_leaf"),
                                        (("output_margin", "raw_score"), "output_margin"),
                                        (("pred_interactions",), "pred_interactions")):
                want = booster.predict(X[:40], **{booster_flag: True})
                for flag in flags:
                    got = method(X[:40], **{flag: True})
                    assert _same(got, want), (type(est).__name__, method.__name__, flag)
        contribs = est.predict(X[:40], pred_contribs=True)
        assert contribs.shape == ((40, F + 1) if K == 1 else (40, K, F + 1))
        margin = est.predict(X[:40], output_margin=True)
        np.testing.assert_allclose(contribs.sum(axis=-1), margin, rtol=0, atol=1e-9)
        leaves = est.predict(X[:40], pred_leaf=True)
        assert leaves.shape == (40, booster.num_trees()) and leaves.dtype == np.int32
        assert _same(leaves, est.apply(X[:40]))
        # iteration_range goes along with a flag
        assert _same(est.predict(X[:40], iteration_range=(0, 2), pred_contrib=True),
                     booster.predict(X[:40], iteration_range=(0, 2), pred_contribs=True))


def test_predict_flags_are_checked():
    est, X = _models()[1]
    with pytest.raises(ValueError, match=r"pred_leaf=True, pred_contribs=True: these ask for "
                                         r"different outputs; pass one of output_margin"):
        est.predict(X, pred_leaf=True, pred_contribs=True)
    with pytest.raises(ValueError, match=r"raw_score=True, pred_contrib=True"):
        est.predict_proba(X, raw_score=True, pred_contrib=True)
    with pytest.raises(TypeError, match="pred_contribs must be True or False, got 1"):
        est.predict(X, pred_contribs=1)
    with pytest.raises(TypeError, match="output_margin must be True or False, got 'yes'"):
        est.predict_proba(X, output_margin="yes")
    # the same flag in both spellings asks for one output
    assert _same(est.predict(X, pred_contribs=True, pred_contrib=True),
                 est.predict(X, pred_contribs=True))
    assert _same(est.predict(X, output_margin=True, raw_score=True),
                 est.booster_.predict(X, output_margin=True))


# ---------------------------------------------------------------------------
# The predict fast path.
# ---------------------------------------------------------------------------

def test_fast_path_matches_the_full_path():
    for est, X in _models():
        full = est.predict(X.tolist())   # a list goes through validate_data
        for A in (X, np.asfortranarray(X), X.astype(np.float32), np.asfortranarray(X[:1])):
            got = est.predict(A)
            assert got.shape == (A.shape[0],) + full.shape[1:]
        assert _same(est.predict(X), full)
        assert _same(est.predict(np.asfortranarray(X)), full)
        assert _same(est.predict(X[::2]), est.predict(np.ascontiguousarray(X[::2])))
        if isinstance(est, BonsaiClassifier):
            one = est.predict_proba(X[:1])
            assert one.shape == (1, est.n_classes_) and _same(one, est.predict_proba(X)[:1])
            np.testing.assert_allclose(one.sum(axis=1), 1.0)


def test_fast_path_keeps_the_checks():
    est, X = _models()[1]
    for A in (X[:, :3], np.asfortranarray(X[:, :3]), X[:1, :3].astype(np.float32)):
        for method in (est.predict, est.predict_proba):
            with pytest.raises(ValueError, match="X has 3 features, but BonsaiClassifier is "
                                                 "expecting 4 features as input"):
                method(A)
    with pytest.raises(ValueError, match="0 sample"):
        est.predict(X[:0])
    for method in ("predict", "predict_proba"):
        with pytest.raises(NotFittedError):
            getattr(BonsaiClassifier(), method)(X)
    with pytest.raises(NotFittedError):
        BonsaiRegressor().predict(X)


def test_dataframe_names_are_still_checked():
    pd = pytest.importorskip("pandas")
    X, y = _data(k=2)
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    est = BonsaiClassifier(n_estimators=N_EST, verbose=0).fit(df, y)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        assert _same(est.predict_proba(X), est.predict_proba(df))
    with pytest.raises(ValueError, match="feature names"):
        est.predict(df[["b", "a", "c", "d"]])
    renamed = df.rename(columns={"a": "z"})
    with pytest.raises(ValueError, match="feature names"):
        est.predict_proba(renamed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        est.predict(df)


# ---------------------------------------------------------------------------
# scikit-learn's tools.
# ---------------------------------------------------------------------------

def test_clone_keeps_params_and_drops_the_fit():
    est = BonsaiClassifier(n_estimators=4, learning_rate=0.3, max_depth=3, verbose=0,
                           importance_type="split")
    X, y = _data()
    est.fit(X, y)
    c = clone(est)
    assert c.get_params() == est.get_params()
    assert not hasattr(c, "booster_")
    c.fit(X, y)
    assert c.booster_.model_to_string() == est.booster_.model_to_string()


def test_grid_search_cv():
    from sklearn.model_selection import GridSearchCV
    X, y = _data(k=2)
    gs = GridSearchCV(BonsaiClassifier(n_estimators=N_EST, verbose=0),
                      {"max_depth": [1, 3], "learning_rate": [0.1, 0.5]}, cv=3,
                      scoring="roc_auc")
    gs.fit(X, y)
    assert set(gs.best_params_) == {"max_depth", "learning_rate"}
    assert gs.cv_results_["mean_test_score"].shape == (4,)
    assert np.all(np.isfinite(gs.cv_results_["mean_test_score"]))
    assert gs.best_estimator_.get_params()["max_depth"] == gs.best_params_["max_depth"]
    assert gs.predict_proba(X).shape == (X.shape[0], 2)


def test_cross_val_score():
    from sklearn.model_selection import KFold, cross_val_score
    X, y = _data(k=0)
    scores = cross_val_score(BonsaiRegressor(n_estimators=20, verbose=0), X, y,
                             cv=KFold(3), scoring="r2")
    assert scores.shape == (3,) and np.all(scores > 0.3), scores
    X, y = _data(k=3)
    acc = cross_val_score(BonsaiClassifier(n_estimators=10, verbose=0), X, y, cv=3)
    assert acc.shape == (3,) and np.all(acc > 0.5), acc


def test_pipeline_with_a_column_transformer():
    pd = pytest.importorskip("pandas")
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler
    X, y = _data(k=2)
    rng = np.random.default_rng(3)
    color = rng.choice(["red", "green", "blue"], size=X.shape[0])
    y = np.where(color == "red", 1 - y, y)   # the string column matters
    df = pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2], "color": color})
    pipe = Pipeline([
        ("prep", ColumnTransformer([("num", StandardScaler(), ["x0", "x1", "x2"]),
                                    ("cat", OneHotEncoder(), ["color"])])),
        ("gbt", BonsaiClassifier(n_estimators=15, verbose=0)),
    ])
    pipe.fit(df, y)
    proba = pipe.predict_proba(df)
    assert proba.shape == (len(df), 2)
    assert (pipe.predict(df) == y).mean() > 0.75
    gbt = pipe.named_steps["gbt"]
    assert gbt.n_features_in_ == 6   # 3 scaled + 3 one-hot columns
    Xt = pipe.named_steps["prep"].transform(df)
    assert _same(pipe.predict_proba(df), gbt.predict_proba(Xt))
    # the pipeline clones and grid-searches like any estimator
    from sklearn.model_selection import GridSearchCV
    gs = GridSearchCV(clone(pipe), {"gbt__max_depth": [2, 4]}, cv=2).fit(df, y)
    assert gs.best_params_["gbt__max_depth"] in (2, 4)
