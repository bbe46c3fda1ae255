"""bonsai.cv on the bundled HIGGS sample (bonsai/data): fold metrics equal separate
``train`` calls on the same folds, per-fold early stopping and out-of-fold
predictions, the averaged model (margins, SHAP, model file, export), identical
results at 1 and 2 threads, the folds cv makes or takes, and argument errors."""
import io
import json

import numpy as np
import pytest

import bonsai
from bonsai.backends import cpu
from bonsai.crossval import average_boosters, make_folds
from bonsai.demo import load_binary
from bonsai.metrics import get_metric

N = 3000
PARAMS = {"objective": "binary", "grow_policy": "leafwise", "max_leaves": 7,
          "n_estimators": 12, "learning_rate": 0.3, "eval_metric": ["logloss", "auc"],
          "subsample": 0.8, "random_state": 3}


@pytest.fixture(scope="module")
def data():
    X, y, _, _ = load_binary()
    return np.ascontiguousarray(X[:N]), y[:N]


@pytest.fixture(scope="module")
def full(data):
    X, y = data
    return bonsai.Dataset(X, label=y)


def test_fold_metrics_equal_separate_train_calls(data, full):
    X, y = data
    r = bonsai.cv(PARAMS, full, nfold=4, seed=5, return_models=True)
    assert len(r["folds"]) == 4
    for k, (tr, va) in enumerate(r["folds"]):
        # an independent fit: the fold's rows binned with the full Dataset's edges
        tr_set = bonsai.Dataset(X[tr], label=y[tr], reference=full)
        va_set = bonsai.Dataset(X[va], label=y[va], reference=full)
        b = bonsai.train(PARAMS, tr_set, valid_sets=[va_set], valid_names=["valid"])
        assert b.evals_result["valid"] == r["fold_evals"][k]
        assert b.model_to_string() == r["models"][k].model_to_string()
    for m in ("logloss", "auc"):
        per_fold = np.array([f[m] for f in r["fold_evals"]])
        assert r[f"valid {m}-mean"] == [float(v) for v in per_fold.mean(axis=0)]
        assert r[f"valid {m}-stdv"] == [float(v) for v in per_fold.std(axis=0)]
        assert len(r[f"valid {m}-mean"]) == PARAMS["n_estimators"]
    curve = r["valid auc-mean"]        # the last metric decides the best round
    assert r["best_iteration"] == int(np.argmax(curve)) and r["best_score"] == max(curve)
    assert r["fold_best_iterations"] == [int(np.argmax(f["auc"])) for f in r["fold_evals"]]
    # without early stopping the fold models keep every round
    assert all(b.best_iteration is None for b in r["models"])


def test_early_stopping_per_fold_best_rounds_and_oof(data, full):
    X, y = data
    params = dict(PARAMS, n_estimators=200, learning_rate=0.8, max_leaves=15,
                  eval_metric=["auc", "logloss"])
    r = bonsai.cv(params, full, nfold=5, early_stopping_rounds=3, return_models=True)
    best = r["best_iteration"]
    trained = len(r["fold_evals"][0]["logloss"])
    assert trained < 200, "the fit was meant to stop early"
    mean_all = np.mean([f["logloss"] for f in r["fold_evals"]], axis=0)
    assert trained == best + 3 + 1                      # stopped 3 rounds after the best
    assert best == int(np.argmin(mean_all)) and r["best_score"] == mean_all[best]
    assert len(r["valid logloss-mean"]) == best + 1     # curves end at the best round
    oof = r["oof"]
    valid = np.sort(np.concatenate([va for _, va in r["folds"]]))
    np.testing.assert_array_equal(valid, np.arange(N))  # every row validated exactly once
    assert oof.shape == (N,) and not np.isnan(oof).any()
    metric = get_metric("logloss")
    for k, ((tr, va), b) in enumerate(zip(r["folds"], r["models"])):
        own = r["fold_evals"][k]["logloss"]
        fb = r["fold_best_iterations"][k]
        assert fb == int(np.argmin(own)) and b.best_iteration == fb
        assert not np.isin(va, tr).any()
        # each row predicted by the fold model that did not see it, at its own best round
        np.testing.assert_array_equal(oof[va], b.predict(X[va]))
        np.testing.assert_array_equal(oof[va], b.predict(X[va], iteration_range=(0, fb + 1)))
        assert metric.fn(y[va], oof[va], None) == pytest.approx(own[fb], rel=1e-12, abs=0)
    assert len(set(r["fold_best_iterations"])) > 1, "folds should stop at rounds of their own"


def test_averaged_model(data, full, tmp_path):
    X, y = data
    r = bonsai.cv(dict(PARAMS, n_estimators=30), full, nfold=3, early_stopping_rounds=4,
                  return_models=True)
    avg, folds = r["averaged_model"], r["models"]
    Xt = X[:400]
    mean_margin = np.mean([b.predict(Xt, output_margin=True) for b in folds], axis=0)
    np.testing.assert_allclose(avg.predict(Xt, output_margin=True), mean_margin,
                               rtol=0, atol=1e-12)
    np.testing.assert_allclose(avg.predict(Xt), 1 / (1 + np.exp(-mean_margin)), rtol=0,
                               atol=1e-12)
    shap = np.mean([b.predict(Xt[:60], pred_contribs=True) for b in folds], axis=0)
    np.testing.assert_allclose(avg.predict(Xt[:60], pred_contribs=True), shap, rtol=0,
                               atol=1e-12)
    rounds = [b.best_iteration + 1 for b in folds]
    assert avg.num_trees() == sum(rounds)
    assert avg.extra["averaged_models"] == {"n_models": 3, "rounds": rounds}
    path = tmp_path / "avg.json"
    avg.save_model(path)
    again = bonsai.Booster(model_file=path)
    assert again.model_to_string() == avg.model_to_string()
    np.testing.assert_array_equal(again.predict(Xt), avg.predict(Xt))
    treelite = pytest.importorskip("treelite")
    tl = treelite.gtil.predict(avg.to_treelite(), Xt, pred_margin=True).reshape(-1)
    np.testing.assert_allclose(tl, mean_margin, rtol=0, atol=1e-9)


def test_same_results_at_1_and_2_threads(data, full, monkeypatch):
    import numba
    assert numba.config.NUMBA_NUM_THREADS >= 2, "run with NUMBA_NUM_THREADS >= 2"
    monkeypatch.setattr(cpu, "MIN_ROWS_PER_THREAD", 64)   # split even small nodes
    monkeypatch.setattr(cpu, "MIN_PARTITION_ROWS_PER_THREAD", 64)
    monkeypatch.setattr(cpu, "MIN_PARALLEL_SPLIT_NODES", 1)
    X, y = data
    w = np.exp(2.0 * np.random.default_rng(1).normal(size=N))  # weights over many scales
    ds = bonsai.Dataset(X, label=y, weight=w)
    out = []
    for n_threads in (1, 2):
        r = bonsai.cv(dict(PARAMS, n_threads=n_threads, n_estimators=20), ds, nfold=3,
                      early_stopping_rounds=5, return_models=True)
        out.append(r)
    a, b = out
    for key in ("valid logloss-mean", "valid auc-stdv", "best_iteration", "best_score",
                "fold_best_iterations", "fold_evals"):
        assert a[key] == b[key], key
    assert a["oof"].tobytes() == b["oof"].tobytes()
    assert a["averaged_model"].model_to_string() == b["averaged_model"].model_to_string()
    for m1, m2 in zip(a["models"], b["models"]):
        assert m1.model_to_string() == m2.model_to_string()


def test_make_folds():
    y = np.array([0] * 50 + [1] * 20 + [2] * 7, float)
    n = y.shape[0]
    for stratified in (False, True):
        folds = make_folds(n, 5, y, stratified=stratified, shuffle=True, seed=1)
        valid = np.concatenate([va for _, va in folds])
        np.testing.assert_array_equal(np.sort(valid), np.arange(n))
        sizes = [va.shape[0] for _, va in folds]
        assert max(sizes) - min(sizes) <= 1
        for tr, va in folds:
            np.testing.assert_array_equal(np.sort(np.concatenate([tr, va])), np.arange(n))
        if stratified:
            for c, count in ((0, 50), (1, 20), (2, 7)):
                per_fold = [int((y[va] == c).sum()) for _, va in folds]
                assert max(per_fold) - min(per_fold) <= 1 and sum(per_fold) == count
    plain = make_folds(10, 3, shuffle=False)
    assert [va.tolist() for _, va in plain] == [[0, 1, 2, 3], [4, 5, 6], [7, 8, 9]]
    a = make_folds(n, 4, y, seed=1)
    b = make_folds(n, 4, y, seed=2)
    assert any(not np.array_equal(x[1], z[1]) for x, z in zip(a, b))
    assert all(np.array_equal(x[1], z[1]) for x, z in zip(a, make_folds(n, 4, y, seed=1)))


def test_classification_folds_are_stratified_by_default(data, full):
    _, y = data
    r = bonsai.cv(dict(PARAMS, n_estimators=2), full, nfold=4)
    counts = [int(y[va].sum()) for _, va in r["folds"]]
    assert max(counts) - min(counts) <= 1
    reg = bonsai.cv(dict(PARAMS, n_estimators=2, objective="squared_error",
                         eval_metric="rmse"), full, nfold=4, seed=0)
    assert [va.tolist() for _, va in reg["folds"]] == [
        va.tolist() for _, va in make_folds(N, 4, stratified=False, seed=0)]


def test_folds_from_a_splitter_or_a_list(data, full):
    sklearn = pytest.importorskip("sklearn.model_selection")
    _, y = data
    params = dict(PARAMS, n_estimators=3)
    splitter = sklearn.StratifiedKFold(3, shuffle=True, random_state=0)
    pairs = list(splitter.split(np.zeros((N, 1)), y))
    r1 = bonsai.cv(params, full, folds=splitter)
    r2 = bonsai.cv(params, full, folds=pairs)
    assert r1["fold_evals"] == r2["fold_evals"]
    # overlapping validation folds: metrics, but no out-of-fold predictions
    idx = np.arange(N)
    r3 = bonsai.cv(params, full, folds=[(idx[:2000], idx[2000:]), (idx[1000:], idx[:1000]),
                                        (idx[:1000], idx[1000:])])
    assert r3["oof"] is None and len(r3["fold_evals"]) == 3
    # rows in no validation fold stay NaN
    r4 = bonsai.cv(params, full, folds=[(idx[:1000], idx[1000:2000])])
    assert np.isnan(r4["oof"][:1000]).all() and not np.isnan(r4["oof"][1000:2000]).any()


def test_callbacks_see_the_mean_curves(full):
    buf = io.StringIO()
    seen = []

    class StopAt(bonsai.TrainingCallback):
        def after_iteration(self, model, epoch, evals_log):
            seen.append((len(model.boosters), evals_log["valid"]["auc"][-1]))
            return epoch == 4

    r = bonsai.cv(dict(PARAMS, n_estimators=50), full, nfold=3,
                  callbacks=[bonsai.EvaluationMonitor(period=1, stream=buf), StopAt()])
    assert len(r["valid auc-mean"]) == 5 and len(seen) == 5
    assert [a for _, a in seen] == r["valid auc-mean"] and seen[0][0] == 3
    lines = buf.getvalue().splitlines()
    assert len(lines) == 5 and lines[0].startswith("[0]\tvalid-logloss:")


def test_multiclass_oof_and_average():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(900, 5))
    y = np.digitize(X[:, 0] + 0.5 * rng.normal(size=900), [-0.5, 0.5]).astype(float)
    ds = bonsai.Dataset(X, label=y)
    r = bonsai.cv({"objective": "multiclass", "num_class": 3, "n_estimators": 6},
                  ds, nfold=3, return_models=True)
    assert r["oof"].shape == (900, 3)
    np.testing.assert_allclose(r["oof"].sum(axis=1), 1.0, rtol=1e-12)
    mean_margin = np.mean([b.predict(X, output_margin=True) for b in r["models"]], axis=0)
    np.testing.assert_allclose(r["averaged_model"].predict(X, output_margin=True),
                               mean_margin, rtol=0, atol=1e-12)


def test_dataset_subset_keeps_the_bins():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(0)
    df = pd.DataFrame({"a": rng.normal(size=300),
                       "c": pd.Categorical(rng.choice(["x", "y", "z"], 300))})
    y = rng.random(300)
    w = rng.random(300) + 0.1
    ds = bonsai.Dataset(df, label=y, weight=w)
    rows = np.array([5, 3, 200, 17, 299])
    sub = ds.subset(rows)
    assert sub.bin_mapper is ds.bin_mapper and sub.categories is ds.categories
    np.testing.assert_array_equal(sub.X_cols, ds.X_cols[:, rows])
    np.testing.assert_array_equal(sub.label, y[rows])
    np.testing.assert_array_equal(sub.weight, w[rows])
    np.testing.assert_array_equal(sub.cat_codes, ds.cat_codes[:, rows])
    assert sub.data.equals(df.iloc[rows])
    ref = bonsai.Dataset(df.iloc[rows], label=y[rows], reference=ds)
    np.testing.assert_array_equal(sub.X_cols, ref.X_cols)
    with pytest.raises(ValueError, match="out of range"):
        ds.subset([0, 300])
    with pytest.raises(ValueError, match="row indices"):
        ds.subset(np.array([0.5]))


def test_bad_arguments(full):
    with pytest.raises(TypeError, match="bonsai.Dataset"):
        bonsai.cv(PARAMS, np.zeros((10, 2)))
    with pytest.raises(ValueError, match="nfold"):
        bonsai.cv(PARAMS, full, nfold=1)
    with pytest.raises(ValueError, match="seed"):
        bonsai.cv(PARAMS, full, seed=-1)
    with pytest.raises(TypeError, match="stratified"):
        bonsai.cv(PARAMS, full, stratified="yes")
    with pytest.raises(ValueError, match="unknown parameter"):
        bonsai.cv({"num_leaves": 3}, full)
    with pytest.raises(TypeError, match="metrics must be"):
        bonsai.cv(PARAMS, full, metrics=5)
    with pytest.raises(ValueError, match="needs a metric"):
        bonsai.cv(PARAMS, full, metrics="none")
    with pytest.raises(ValueError, match="share rows"):
        bonsai.cv(PARAMS, full, folds=[([0, 1, 2], [2, 3])])
    with pytest.raises(ValueError, match="outside"):
        bonsai.cv(PARAMS, full, folds=[([0, 1], [N])])
    with pytest.raises(ValueError, match="stratified=True"):
        bonsai.cv(PARAMS, full, folds=[([0, 1], [2])], stratified=True)
    with pytest.raises(ValueError, match="early_stopping_rounds"):
        bonsai.cv(PARAMS, full, early_stopping_rounds=0)
    with pytest.raises(TypeError, match="average_boosters"):
        average_boosters([])


def test_average_boosters_rejects_different_models(data, full):
    a = bonsai.train(dict(PARAMS, n_estimators=2), full)
    b = bonsai.train(dict(PARAMS, n_estimators=2, objective="squared_error",
                          eval_metric="rmse"), full)
    with pytest.raises(ValueError, match="differs from model 0"):
        average_boosters([a, b])
    doc = json.loads(average_boosters([a, a]).model_to_string())
    assert doc["extra"]["averaged_models"]["n_models"] == 2
