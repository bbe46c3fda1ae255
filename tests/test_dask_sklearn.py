"""``DaskBonsaiRegressor`` / ``DaskBonsaiClassifier`` on a real two-worker cluster:
fit -> predict -> ``to_local`` round trips (predictions bit-equal to the local
estimator's on the computed data), a classifier with string labels and a categorical
column, eval sets with early stopping, and the models equal, byte for byte, to
``bonsai.train`` on the same rows binned with the Dask data set's bin edges
(``DaskDataset.template``); bad input refused before the fit starts; clone, pickle and
model files.  Tiny data."""
import json
import pickle

import numpy as np
import pandas as pd
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")

import bonsai  # noqa: E402
from bonsai.dask.sklearn import DaskBonsaiClassifier, DaskBonsaiRegressor  # noqa: E402
from bonsai.dask.data import DaskDataset  # noqa: E402
from bonsai.dask.predict import predict  # noqa: E402
from dask_fixtures import local_cluster  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402

N = 300
ROW_CHUNKS = (110, 40, 150)   # uneven
SMALL = {"n_estimators": 6, "max_depth": 3, "min_child_samples": 5}


@pytest.fixture(scope="module")
def client():
    with local_cluster(2) as c:
        yield c


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(11)
    X = rng.normal(size=(N, 3))
    X[rng.random(N) < 0.1, 1] = np.nan
    cat = pd.Categorical(rng.choice(["oak", "elm", "ash"], N), categories=["oak", "elm", "ash"])
    frame = pd.DataFrame({"a": X[:, 0], "b": X[:, 1], "c": X[:, 2], "tree": cat})
    score = X[:, 0] + np.where(np.nan_to_num(X[:, 1]) > 0, 1.0, 0.0)
    score = score + pd.Series(cat).map({"oak": 1.0, "elm": -1.0, "ash": 0.0}).to_numpy()
    y = score + 0.3 * rng.normal(size=N)
    labels = np.array(["high", "low", "mid"])[np.digitize(-score, [-1.0, 0.0])]
    noisy = np.where(score + 1.5 * rng.normal(size=N) > 0.5, "yes", "no")
    w = rng.uniform(0.5, 2.0, N)
    return {"X": X, "frame": frame, "y": y, "labels": labels, "noisy": noisy, "w": w}


def _arr(a):
    return da.from_array(a, chunks=(ROW_CHUNKS,) + a.shape[1:])


def _frame(obj):
    cuts = [0, ROW_CHUNKS[0], ROW_CHUNKS[0] + ROW_CHUNKS[1], N - 1]
    return dd.from_pandas(obj, npartitions=1).repartition(divisions=cuts)


def _doc(booster):
    """The model file's content without ``extra`` (the estimator's own notes)."""
    doc = json.loads(booster.model_to_string())
    doc.pop("extra")
    return doc


def test_regressor_round_trip(client, data):
    X, y, w = data["X"], data["y"], data["w"]
    dX, dy, dw = _arr(X), _arr(y), _arr(w)
    est = DaskBonsaiRegressor(**SMALL, verbose=0, client=client).fit(dX, dy, sample_weight=dw)
    assert est.n_features_in_ == 3 and not hasattr(est, "feature_names_in_")
    assert isinstance(est.booster_, bonsai.Booster) and est.n_estimators_ == 6
    assert [r["n_trees"] for r in est.booster_.comm_stats] == [6] * len(est.booster_.comm_stats)
    pred = est.predict(dX)
    assert isinstance(pred, da.Array) and pred.chunks == (ROW_CHUNKS,)
    local = est.to_local()
    assert type(local) is bonsai.BonsaiRegressor and local.booster_ is est.booster_
    assert local.get_params() == {k: v for k, v in est.get_params().items() if k != "client"}
    assert np.array_equal(pred.compute(), local.predict(X))
    assert np.array_equal(predict(client, est, dX).compute(), local.predict(X))
    margin = est.predict(dX, output_margin=True).compute()
    assert np.array_equal(margin, local.predict(X, output_margin=True))
    leaves = est.apply(dX)
    assert leaves.chunks == (ROW_CHUNKS, (6,))
    assert np.array_equal(leaves.compute(), local.apply(X))
    # the model of bonsai.train on the same rows and bin edges
    template = DaskDataset(client, dX, dy, weight=dw).template
    ref = bonsai.train(SMALL, bonsai.Dataset(X, label=y, weight=w, reference=template))
    assert _doc(est.booster_) == _doc(ref)


def test_classifier_string_labels_and_category_column(client, data):
    frame, labels = data["frame"], data["labels"]
    df, dy = _frame(frame), _frame(pd.Series(labels))
    est = DaskBonsaiClassifier(**SMALL, verbose=0).fit(df, dy)   # the default client
    assert est.classes_.tolist() == ["high", "low", "mid"]
    assert est.classes_.dtype == np.unique(pd.Series(labels).to_numpy()).dtype   # as locally
    assert est.n_classes_ == 3 and list(est.feature_names_in_) == ["a", "b", "c", "tree"]
    local = est.to_local()
    pred = est.predict(df)
    assert isinstance(pred, dd.Series) and pred.divisions == df.divisions
    got = pred.compute()
    assert pred._meta.dtype == got.dtype
    assert got.tolist() == local.predict(frame).tolist()
    proba = est.predict_proba(df)
    assert isinstance(proba, dd.DataFrame) and proba.divisions == df.divisions
    assert np.array_equal(proba.compute().to_numpy(), local.predict_proba(frame))
    assert local.predict_proba(frame).shape == (N, 3)
    # labels encoded like np.unique's inverse: the model of bonsai.train on those rows
    y_enc = np.unique(labels, return_inverse=True)[1].astype(np.float64)
    template = DaskDataset(client, df, _frame(pd.Series(y_enc))).template
    ref = bonsai.train({**SMALL, "objective": "multiclass", "num_class": 3},
                       bonsai.Dataset(frame, label=y_enc, reference=template))
    assert _doc(est.booster_) == _doc(ref)
    # on 300 rows the workers' summaries are exact, so the edges are the local ones:
    # the local classifier on the computed data builds this very model
    alone = bonsai.BonsaiClassifier(**SMALL, verbose=0).fit(frame, pd.Series(labels))
    assert alone.classes_.tolist() == est.classes_.tolist()
    assert alone.booster_.model_to_string() == est.booster_.model_to_string()


def test_eval_set_and_early_stopping(client, data):
    X, noisy = data["X"], data["noisy"]
    tr, va = slice(0, 200), slice(200, N)
    params = {"n_estimators": 80, "learning_rate": 0.5, "max_depth": 3,
              "min_child_samples": 3, "early_stopping_rounds": 3}
    dX = da.from_array(X[tr], chunks=(90, 3))
    dy = da.from_array(noisy[tr], chunks=90)
    dXv = da.from_array(X[va], chunks=(60, 3))
    dyv = da.from_array(noisy[va], chunks=60)
    est = DaskBonsaiClassifier(**params, verbose=0, client=client)
    est.fit(dX, dy, eval_set=[(dXv, dyv)], eval_names=["hold"])
    assert est.classes_.tolist() == ["no", "yes"]
    assert est.best_iteration_ is not None and est.n_estimators_ < 80   # it stopped
    enc = (noisy == "yes").astype(np.float64)
    template = DaskDataset(client, dX, da.from_array(enc[tr], chunks=90)).template
    train_set = bonsai.Dataset(X[tr], label=enc[tr], reference=template)
    ref = bonsai.train({**params, "objective": "binary"}, train_set,
                       valid_sets=[bonsai.Dataset(X[va], label=enc[va], reference=template)],
                       valid_names=["hold"])
    assert est.best_iteration_ == ref.best_iteration
    assert est.evals_result_ == ref.evals_result and "hold" in est.evals_result_
    assert _doc(est.booster_) == _doc(ref)
    # predictions stop at the best iteration, as locally
    assert np.array_equal(est.predict_proba(dXv).compute(),
                          est.to_local().predict_proba(X[va]))


def test_bad_input_is_refused_before_the_fit(client, data):
    X, y, labels = data["X"], data["y"], data["labels"]
    dX = _arr(X)
    reg = DaskBonsaiRegressor(**SMALL, verbose=0, client=client)
    with pytest.raises(TypeError, match="X must be a dask"):
        reg.fit(X, _arr(y))
    with pytest.raises(TypeError, match="y must be a dask array partitioned like X"):
        reg.fit(dX, y)
    with pytest.raises(ValueError, match="y must be chunked like X"):
        reg.fit(dX, da.from_array(y, chunks=100))
    with pytest.raises(TypeError, match="sample_weight must be a dask array"):
        reg.fit(dX, _arr(y), sample_weight=data["w"])
    with pytest.raises(ValueError, match="X: every chunk must span all 3 columns"):
        reg.fit(da.from_array(X, chunks=(100, 2)), da.from_array(y, chunks=100))
    with pytest.raises(ValueError, match="y must be numeric for regression"):
        reg.fit(dX, _arr(labels))
    with pytest.raises(ValueError, match="early_stopping_rounds=2 needs an eval_set"):
        DaskBonsaiRegressor(early_stopping_rounds=2, client=client).fit(dX, _arr(y))
    df = _frame(pd.DataFrame(X, columns=["p", "q", "r"]))
    with pytest.raises(ValueError, match="y has 2 partitions but X has 3"):
        reg.fit(df, dd.from_pandas(pd.Series(y), npartitions=2))
    with pytest.raises(TypeError, match="y must be a dask Series"):
        reg.fit(df, _arr(y))
    clf = DaskBonsaiClassifier(**SMALL, verbose=0, client=client)
    with pytest.raises(ValueError, match="not seen in training"):
        clf.fit(dX, _arr(labels), eval_set=[(dX, _arr(np.where(labels == "mid", "new", labels)))])
    with pytest.raises(ValueError, match="Unknown label type"):
        clf.fit(dX, _arr(y))
    with pytest.raises(ValueError, match="y contains NaN"):
        clf.fit(dX, _arr(np.where(y > 0, 1.0, np.nan)))
    with pytest.raises(NotFittedError):
        clf.predict(dX)
    reg.fit(dX, _arr(y))
    with pytest.raises(ValueError, match="X has 2 features"):
        reg.predict(_arr(X[:, :2]))
    with pytest.raises(TypeError, match="X must be a dask"):
        reg.predict(X)


def test_params_clone_pickle_and_model_files(client, data, tmp_path):
    assert (set(DaskBonsaiRegressor().get_params())
            == set(bonsai.BonsaiRegressor().get_params()) | {"client"})
    assert (set(DaskBonsaiClassifier().get_params())
            == set(bonsai.BonsaiClassifier().get_params()) | {"client"})
    X, y = data["X"], data["y"]
    dX = _arr(X)
    est = DaskBonsaiRegressor(**SMALL, verbose=0, client=client)
    twin = clone(est)
    assert twin.client is client and twin.get_params() == est.get_params()
    est.fit(dX, _arr(y))
    want = est.predict(dX).compute()
    back = pickle.loads(pickle.dumps(est))
    assert back.client is None and est.client is client
    assert np.array_equal(back.predict(dX).compute(), want)   # the default client
    est.save_model(tmp_path / "m.json")
    local = bonsai.BonsaiRegressor().load_model(tmp_path / "m.json")
    assert np.array_equal(local.predict(X), want)
    again = DaskBonsaiRegressor(client=client).load_model(tmp_path / "m.json")
    assert np.array_equal(again.predict(dX).compute(), want)


def test_score_on_dask_collections_equals_the_local_score(client, data):
    """scikit-learn's inherited ``score`` works on dask collections (they convert to
    numpy) and gives the local estimator's score."""
    X, y, labels = data["X"], data["y"], data["noisy"]
    reg = DaskBonsaiRegressor(**SMALL, verbose=0, client=client).fit(_arr(X), _arr(y))
    assert reg.score(_arr(X), _arr(y)) == reg.to_local().score(X, y)
    clf = DaskBonsaiClassifier(**SMALL, verbose=0, client=client).fit(_arr(X), _arr(labels))
    assert clf.score(_arr(X), _arr(labels)) == clf.to_local().score(X, labels)
