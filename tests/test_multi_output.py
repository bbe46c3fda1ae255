"""Multi-output objectives (``bonsai/multi_objectives.py``) with 2-D labels: gradients
against NumPy, ``Dataset`` / ``cv`` / shards keeping (n, K) labels, metrics over (n, K),
``multi_strategy="one_output_per_tree"`` fits equal to K one-output fits, the
scikit-learn estimators with a 2-D ``y``, and the errors at the boundary.  (Fits with
``multi_strategy="multi_output_tree"`` -- vector leaves -- are tested with them.)"""
import numpy as np
import pytest

import bonsai
from bonsai.metrics import get_metric
from bonsai.objectives import MULTI_OBJECTIVES, get_objective, label_outputs
from bonsai.sklearn import BonsaiClassifier, BonsaiRegressor

N, K = 400, 3
FAST = dict(n_estimators=8, learning_rate=0.3, max_depth=3, min_child_samples=5,
            verbosity=0)


def _data(n=N, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 5))
    Y = np.stack([X[:, 0] + 0.1 * rng.standard_normal(n), 2.0 * X[:, 1] - X[:, 2],
                  np.sin(2.0 * X[:, 3])], axis=1)
    L = (Y + 0.3 * rng.standard_normal(Y.shape) > 0).astype(np.float64)
    return X, Y, L


def _bound(name, y):
    return label_outputs(get_objective(name), y)[0]


# ------------------------------------------------------------------ objectives
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_multi_squared_error_gradients_match_numpy(weighted, dtype):
    rng = np.random.default_rng(1)
    y = rng.standard_normal((50, K)).astype(dtype)
    raw = rng.standard_normal((K, 50))
    w = rng.random(50) + 0.5 if weighted else None
    obj = _bound("multi_squared_error", y)
    assert obj.n_outputs() == K and obj.n_outputs(7) == K    # num_class plays no part
    g = np.empty((K, 50), np.float32)
    h = np.empty((K, 50), np.float32)
    obj.grad_hess(y, raw, w, g, h)
    ww = np.ones(50) if w is None else w
    np.testing.assert_array_equal(g, ((raw - y.astype(np.float64).T) * ww).astype(np.float32))
    np.testing.assert_array_equal(h, np.broadcast_to(ww, (K, 50)).astype(np.float32))
    init = obj.init_score(y.astype(np.float64), w)
    np.testing.assert_allclose(init, np.average(y.astype(np.float64), axis=0, weights=ww),
                               rtol=1e-12)
    pred = obj.transform(raw)
    assert pred.shape == (50, K)
    np.testing.assert_array_equal(pred, raw.T)


@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_binary_gradients_match_numpy(weighted):
    rng = np.random.default_rng(2)
    y = (rng.random((60, K)) < 0.3).astype(np.float64)
    raw = 4.0 * rng.standard_normal((K, 60))
    w = rng.random(60) + 0.5 if weighted else None
    obj = _bound("multilabel_binary", y)
    g = np.empty((K, 60), np.float32)
    h = np.empty((K, 60), np.float32)
    obj.grad_hess(y, raw, w, g, h)
    p = 1.0 / (1.0 + np.exp(-raw))
    ww = np.ones(60) if w is None else w
    np.testing.assert_allclose(g, (p - y.T) * ww, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(h, p * (1.0 - p) * ww, rtol=1e-6, atol=1e-7)
    m = np.clip(np.average(y, axis=0, weights=ww), 1e-15, 1 - 1e-15)
    np.testing.assert_allclose(obj.init_score(y, w), np.log(m / (1.0 - m)), rtol=1e-12)
    np.testing.assert_allclose(obj.transform(raw), p.T, rtol=1e-12)
    # a constant column: the clamp of the binary objective, finite start margins
    y[:, 0] = 1.0
    assert np.all(np.isfinite(obj.init_score(y, None)))


def test_gradients_equal_the_one_output_objectives_bit_for_bit():
    """Output k's gradients are those squared_error / binary compute on column k."""
    rng = np.random.default_rng(3)
    Y = rng.standard_normal((70, K))
    L = (Y > 0).astype(np.float64)
    raw = rng.standard_normal((K, 70))
    w = rng.random(70)
    for multi, single, y in (("multi_squared_error", "squared_error", Y),
                             ("multilabel_binary", "binary", L)):
        g = np.empty((K, 70), np.float32)
        h = np.empty((K, 70), np.float32)
        _bound(multi, y).grad_hess(y, raw, w, g, h)
        for k in range(K):
            g1 = np.empty((1, 70), np.float32)
            h1 = np.empty((1, 70), np.float32)
            get_objective(single).grad_hess(np.ascontiguousarray(y[:, k]), raw[k:k + 1], w,
                                            g1, h1)
            assert np.array_equal(g[k], g1[0]) and np.array_equal(h[k], h1[0])


def test_objective_label_errors():
    y = np.zeros((5, 2))
    y[3, 1] = 0.5
    with pytest.raises(ValueError, match=r"multilabel_binary.*\{0, 1\}.*0\.5.*row 3, column 1"):
        _bound("multilabel_binary", y)
    with pytest.raises(ValueError, match="label's columns"):
        get_objective("multi_squared_error").n_outputs()
    # a 1-D label is the one-output case
    assert label_outputs(get_objective("multi_squared_error"), np.zeros(4))[1] == 1


# ------------------------------------------------------------------ labels in a Dataset
def test_dataset_keeps_a_2d_label_and_checks_it():
    X, Y, _ = _data(50)
    ds = bonsai.Dataset(X, label=Y)
    assert ds.label.shape == (50, K) and ds.label.flags.c_contiguous
    assert bonsai.Dataset(X, label=Y.astype(np.float32)).label.dtype == np.float32
    sub = ds.subset(np.array([4, 0, 9]))
    np.testing.assert_array_equal(sub.label, Y[[4, 0, 9]])
    # a single column becomes 1-D, as for every per-row vector
    assert bonsai.Dataset(X, label=Y[:, :1]).label.shape == (50,)
    bad = Y.copy()
    bad[7, 2] = np.nan
    with pytest.raises(ValueError, match=r"label contains a non-finite value \(nan\) at row 7, "
                                         r"column 2"):
        bonsai.Dataset(X, label=bad)
    bad[7, 2] = np.inf
    with pytest.raises(ValueError, match="label.*row 7, column 2"):
        bonsai.Dataset(X, label=bad)
    with pytest.raises(ValueError, match="label has 49 rows but the data has 50"):
        bonsai.Dataset(X, label=Y[:-1])


def test_dataset_takes_data_frame_labels():
    pd = pytest.importorskip("pandas")
    pl = pytest.importorskip("polars")
    X, Y, _ = _data(30)
    cols = {f"t{k}": Y[:, k] for k in range(K)}
    for frame in (pd.DataFrame(cols), pl.DataFrame(cols)):
        ds = bonsai.Dataset(X, label=frame)
        np.testing.assert_array_equal(ds.label, Y)


# ------------------------------------------------------------------ metrics
def test_metrics_over_2d_labels():
    rng = np.random.default_rng(4)
    Y = rng.standard_normal((40, K))
    P = Y + rng.standard_normal((40, K))
    L = (Y > 0).astype(np.float64)
    Q = rng.random((40, K))
    w = rng.random(40) + 0.1
    W = np.repeat(w, K)
    flat = lambda name, y, p, ww: get_metric(name).fn(y.reshape(-1), p.reshape(-1), ww)
    for name, y, p in (("rmse", Y, P), ("mae", Y, P), ("logloss", L, Q), ("error", L, Q),
                       ("auc", L, Q)):
        fn = get_metric(name).fn
        assert fn(y, p, None) == pytest.approx(flat(name, y, p, None), rel=1e-12)
        assert fn(y, p, w) == pytest.approx(flat(name, y, p, W), rel=1e-12)
    with pytest.raises(ValueError, match="same shape"):
        get_metric("rmse").fn(Y, P[:, :2], None)
    with pytest.raises(ValueError, match="1-D class label"):
        get_metric("mlogloss").fn(L, Q, None)


# ------------------------------------------------------------------ training
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("multi,single", [("multi_squared_error", "squared_error"),
                                          ("multilabel_binary", "binary")])
def test_one_output_per_tree_equals_k_one_output_fits(multi, single, weighted):
    """Tree k of every round sees only output k's gradients and starts from column k's
    mean (log-odds): the K-output model is the K one-output models, bit for bit."""
    X, Y, L = _data()
    y = Y if multi == "multi_squared_error" else L
    w = np.random.default_rng(5).random(N) + 0.5 if weighted else None
    params = dict(FAST, objective=multi, n_threads=2)
    model = bonsai.train(params, bonsai.Dataset(X, label=y, weight=w))
    assert model.n_outputs == K and model.num_trees() == K * FAST["n_estimators"]
    assert model.objective == multi
    pred = model.predict(X)
    raw = model.predict(X, output_margin=True)
    assert pred.shape == raw.shape == (N, K)
    for k in range(K):
        one = bonsai.train(dict(params, objective=single),
                           bonsai.Dataset(X, label=np.ascontiguousarray(y[:, k]), weight=w))
        assert model.base_score[k] == one.base_score[0]
        assert np.array_equal(raw[:, k], one.predict(X, output_margin=True))
        assert np.array_equal(pred[:, k], one.predict(X))
        for t_multi, t_one in zip(model.trees[k::K], one.trees):
            assert np.array_equal(t_multi.value, t_one.value)


def test_fits_beat_the_constant_model_and_stop_early():
    X, Y, L = _data(600)
    Xv, Yv, Lv = _data(300, seed=9)
    tr = bonsai.Dataset(X, label=Y)
    reg = bonsai.train(dict(FAST, objective="multi_squared_error", n_estimators=40,
                            early_stopping_rounds=5),
                       tr, valid_sets=[bonsai.Dataset(Xv, label=Yv, reference=tr)])
    rmse = reg.evals_result["valid_0"]["rmse"]
    const = np.sqrt(np.mean((Yv - Y.mean(axis=0)) ** 2))
    assert min(rmse) < 0.5 * const
    assert reg.best_iteration is not None
    assert np.sqrt(np.mean((reg.predict(Xv) - Yv) ** 2)) == pytest.approx(
        rmse[reg.best_iteration], rel=1e-9)
    trl = bonsai.Dataset(X, label=L)
    clf = bonsai.train(dict(FAST, objective="multilabel_binary", n_estimators=30,
                            eval_metric=["error", "logloss"]),
                       trl, valid_sets=[bonsai.Dataset(Xv, label=Lv, reference=trl)])
    log = clf.evals_result["valid_0"]
    p0 = L.mean(axis=0)
    const_ll = -np.mean(Lv * np.log(p0) + (1 - Lv) * np.log(1 - p0))
    assert log["logloss"][-1] < 0.75 * const_ll
    assert log["error"][-1] < 0.6 * np.mean(Lv != (p0 > 0.5))
    proba = clf.predict(Xv)
    assert proba.shape == (300, K) and np.all((proba > 0) & (proba < 1))


def test_valid_set_label_columns_must_match():
    X, Y, _ = _data(60)
    tr = bonsai.Dataset(X, label=Y)
    with pytest.raises(ValueError, match="valid set 'valid_0' has a label of shape"):
        bonsai.train(dict(FAST, objective="multi_squared_error"), tr,
                     valid_sets=[bonsai.Dataset(X, label=Y[:, :2], reference=tr)])


def test_two_shards_grow_the_one_shard_model():
    """The base score and metrics gather (n, K) labels row-wise over shards."""
    from fake_comm import run_ranks
    X, Y, _ = _data(300)
    ds = bonsai.Dataset(X, label=Y)
    params = dict(FAST, objective="multi_squared_error", n_threads=1)
    one = bonsai.train(params, ds, valid_sets=[ds])
    shards = [ds.subset(np.arange(0, 130)), ds.subset(np.arange(130, 300))]

    def fit(comm, r):
        b = bonsai.train(params, shards[r], valid_sets=[shards[r]], _comm=comm)
        return b.model_to_string(), b.evals_result
    results, _ = run_ranks(2, fit)
    for text, evals in results:
        assert text == one.model_to_string()
        assert evals == one.evals_result


def test_cv_with_a_2d_label():
    X, Y, L = _data(200)
    res = bonsai.cv(dict(FAST, objective="multi_squared_error"), bonsai.Dataset(X, label=Y),
                    nfold=3)
    assert res["oof"].shape == (200, K) and not np.isnan(res["oof"]).any()
    assert len(res["valid rmse-mean"]) == FAST["n_estimators"]
    # multi-label: not stratified by default; stratified=True has no single class
    res = bonsai.cv(dict(FAST, objective="multilabel_binary"), bonsai.Dataset(X, label=L),
                    nfold=3)
    assert res["oof"].shape == (200, K)
    with pytest.raises(ValueError, match="stratified=True needs a 1-D label"):
        bonsai.cv(dict(FAST, objective="multilabel_binary"), bonsai.Dataset(X, label=L),
                  nfold=3, stratified=True)


def test_ordered_target_statistics_per_label_column():
    rng = np.random.default_rng(6)
    X, Y, _ = _data(300)
    X[:, 4] = rng.integers(0, 6, 300)
    Y[:, 1] += X[:, 4]
    model = bonsai.train(dict(FAST, objective="multi_squared_error", cat_encoding="ordered",
                              categorical_features=[4]), bonsai.Dataset(X, label=Y))
    assert model.predict(X).shape == (300, K)


# ------------------------------------------------------------------ errors at the boundary
def test_2d_label_with_a_one_output_objective():
    X, Y, _ = _data(40)
    ds = bonsai.Dataset(X, label=Y)
    for obj in ("binary", "poisson", "multiclass", "huber"):
        with pytest.raises(ValueError, match=r"2-D label \(n, K\) is taken only by the "
                                             r"objectives .*multi_squared_error"):
            bonsai.train(dict(FAST, objective=obj), ds)
    with pytest.raises(ValueError, match="use objective='multi_squared_error'"):
        bonsai.train(dict(FAST, objective="squared_error"), ds)
    assert set(MULTI_OBJECTIVES) == {"multi_squared_error", "multilabel_binary"}


def test_multilabel_non_binary_value_in_train():
    X, _, L = _data(40)
    L[5, 2] = 2.0
    with pytest.raises(ValueError, match=r"multilabel_binary.*label=2\.0 at row 5, column 2"):
        bonsai.train(dict(FAST, objective="multilabel_binary"), bonsai.Dataset(X, label=L))


@pytest.mark.parametrize("obj", ["binary", "squared_error", "poisson", "lambdarank"])
def test_multi_output_tree_needs_a_multi_output_objective(obj):
    with pytest.raises(ValueError, match=f"multi_strategy.*multi_output_tree.*objective='{obj}'"):
        bonsai._params.validate_params({"objective": obj, "multi_strategy": "multi_output_tree"})


def test_num_class_does_not_apply():
    with pytest.raises(ValueError, match="num_class.*multilabel_binary.*column count"):
        bonsai._params.validate_params({"objective": "multilabel_binary", "num_class": 3})


# ------------------------------------------------------------------ estimators
def test_regressor_with_a_2d_y(tmp_path):
    X, Y, _ = _data()
    est = BonsaiRegressor(**FAST, multi_strategy="one_output_per_tree").fit(
        X, Y, eval_set=[(X[:100], Y[:100])])
    assert est.booster_.objective == "multi_squared_error" and est.n_outputs_ == K
    pred = est.predict(X)
    assert pred.shape == (N, K)
    assert est.score(X, Y) > 0.5                       # sklearn's uniform-average R^2
    assert "rmse" in est.evals_result_["valid_0"]
    path = tmp_path / "m.json"
    est.save_model(path)
    np.testing.assert_array_equal(BonsaiRegressor().load_model(path).predict(X), pred)
    with pytest.raises(ValueError, match="eval_set\\[0\\] y has shape"):
        BonsaiRegressor(**FAST).fit(X, Y, eval_set=[(X, Y[:, 0])])
    with pytest.raises(ValueError, match="multi_squared_error"):
        BonsaiRegressor(**FAST, objective="poisson").fit(X, np.abs(Y))


def test_classifier_with_an_indicator_matrix(tmp_path):
    X, _, L = _data()
    Li = L.astype(np.int64)
    est = BonsaiClassifier(**FAST).fit(X, Li, eval_set=[(X[:100], Li[:100])])
    assert est.booster_.objective == "multilabel_binary"
    assert list(est.classes_) == [0, 1, 2] and est.n_classes_ == K
    proba = est.predict_proba(X)
    assert proba.shape == (N, K)
    pred = est.predict(X)
    assert pred.shape == (N, K) and pred.dtype.kind == "i"
    np.testing.assert_array_equal(pred, (proba > 0.5).astype(int))
    assert np.mean(pred == Li) > 0.8
    assert "logloss" in est.evals_result_["valid_0"]
    path = tmp_path / "c.json"
    est.save_model(path)
    np.testing.assert_array_equal(BonsaiClassifier().load_model(path).predict(X), pred)
    bad = Li.copy()
    bad[3, 1] = 2
    with pytest.raises(ValueError, match="0/1 label indicator.*row 3, column 1"):
        BonsaiClassifier(**FAST).fit(X, bad)
    with pytest.raises(ValueError, match="multilabel_binary"):
        BonsaiClassifier(**FAST, objective="binary").fit(X, Li)
    with pytest.raises(ValueError, match="eval_set\\[0\\] y has shape"):
        BonsaiClassifier(**FAST).fit(X, Li, eval_set=[(X, Li[:, 0])])
    with pytest.raises(ValueError, match="Input y contains NaN"):
        BonsaiRegressor(**FAST).fit(X, np.where(L > 0, np.nan, 0.0))


@pytest.mark.parametrize("objective", MULTI_OBJECTIVES)
def test_model_bytes_do_not_depend_on_threads(objective):
    X, Y, L = _data()
    ds = bonsai.Dataset(X, label=Y if objective == "multi_squared_error" else L)
    texts = {bonsai.train(dict(FAST, objective=objective, subsample=0.8, n_threads=t),
                          ds).model_to_string() for t in (1, 2)}
    assert len(texts) == 1
