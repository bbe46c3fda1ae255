"""``bonsai.dask.predict`` on a real two-worker cluster: every output kind over dask
Arrays (uneven row chunks) and DataFrames (a categorical column, an empty partition,
partitions with different category lists) equals the local ``predict`` of the computed
data bit for bit, partitioned like the input, with the meta the blocks have; bad input
is refused before anything runs.  Models are trained locally on tiny data."""
import numpy as np
import pandas as pd
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("distributed")

import bonsai  # noqa: E402
from bonsai.dask.predict import predict  # noqa: E402
from dask_fixtures import local_cluster  # noqa: E402

N = 240
ROW_CHUNKS = (70, 13, 100, 57)   # uneven
PARAMS = {"n_estimators": 6, "max_depth": 3, "min_child_samples": 5, "n_threads": 1}
KINDS = [{}, {"output_margin": True}, {"pred_leaf": True}, {"pred_contribs": True},
         {"pred_interactions": True}, {"iteration_range": (1, 4)},
         {"pred_leaf": True, "iteration_range": (2, 5)}]


@pytest.fixture(scope="module")
def client():
    with local_cluster(2) as c:
        yield c


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(N, 4))
    X[rng.random(N) < 0.1, 2] = np.nan
    cat = pd.Categorical(rng.choice(["red", "green", "blue", "cyan"], N),
                         categories=["red", "green", "blue", "cyan"])
    frame = pd.DataFrame({"x0": X[:, 0], "x1": X[:, 1], "x2": X[:, 2], "c": cat})
    shift = pd.Series(cat).map({"red": 1.0, "green": -1.0, "blue": 0.5, "cyan": 0.0})
    y_reg = X[:, 0] + np.where(X[:, 1] > 0, 1.0, 0.0) + shift.to_numpy()
    y_cls = np.digitize(X[:, 0] + 0.5 * X[:, 1], [-0.5, 0.5]).astype(np.float64)
    reg = bonsai.train(PARAMS, bonsai.Dataset(frame, label=y_reg))
    multi = bonsai.train({**PARAMS, "objective": "multiclass", "num_class": 3},
                         bonsai.Dataset(X, label=y_cls))
    labels = np.array(["no", "yes"])[(y_reg > 0.5).astype(int)]
    clf = bonsai.BonsaiClassifier(n_estimators=5, max_depth=3, verbose=0).fit(X, labels)
    return {"X": X, "frame": frame, "reg": reg, "multi": multi, "clf": clf}


def _darray(X):
    return da.from_array(X, chunks=(ROW_CHUNKS, X.shape[1]))


def _dframe(frame):
    cuts = np.cumsum((0,) + ROW_CHUNKS)
    return dd.from_pandas(frame, npartitions=1).repartition(
        divisions=[int(c) for c in cuts[:-1]] + [int(cuts[-1]) - 1])


@pytest.mark.parametrize("kw", KINDS, ids=lambda kw: ",".join(kw) or "default")
def test_array_multiclass_equals_local(client, data, kw):
    X, model = data["X"], data["multi"]
    dX = _darray(X)
    out = predict(client, model, dX, **kw)
    want = model.predict(X, **kw)
    got = out.compute()
    assert isinstance(out, da.Array)
    assert out.chunks[0] == ROW_CHUNKS
    assert out.shape == want.shape and got.dtype == want.dtype == out.dtype
    assert np.array_equal(got, want)
    if not kw:
        assert got.shape == (N, 3)   # one probability per class


def test_array_default_client_and_float32(client, data):
    X = data["X"].astype(np.float32)
    out = predict(None, data["multi"], _darray(X), output_margin=True)
    assert np.array_equal(out.compute(), data["multi"].predict(X, output_margin=True))


def _frame_with_empty_partition(frame):
    """The frame's partitions with the third one emptied (divisions kept)."""
    keep = np.ones(N, bool)
    keep[ROW_CHUNKS[0] + ROW_CHUNKS[1]:ROW_CHUNKS[0] + ROW_CHUNKS[1] + ROW_CHUNKS[2]] = False
    df = _dframe(frame)
    return df[dd.from_pandas(pd.Series(keep), npartitions=1).repartition(
        divisions=df.divisions)], frame[keep]


@pytest.mark.parametrize("kw", [{}, {"output_margin": True}, {"pred_leaf": True},
                                {"pred_contribs": True}, {"iteration_range": (0, 3)}],
                         ids=lambda kw: ",".join(kw) or "default")
def test_dataframe_with_category_equals_local(client, data, kw):
    model, frame = data["reg"], data["frame"]
    df, local = _frame_with_empty_partition(frame)
    out = predict(client, model, df, **kw)
    want = model.predict(df.compute(), **kw)
    assert np.array_equal(want, model.predict(local, **kw))
    got = out.compute()
    assert out.divisions == df.divisions
    assert got.index.equals(local.index)
    if want.ndim == 1:
        assert isinstance(out, dd.Series)
        assert out._meta.dtype == got.dtype == want.dtype
    else:
        assert isinstance(out, dd.DataFrame)
        assert list(out.columns) == list(range(want.shape[1])) == list(got.columns)
        assert list(out._meta.dtypes) == list(got.dtypes) == [want.dtype] * want.shape[1]
    assert np.array_equal(got.to_numpy(), want)
    parts = [p.shape[0] for p in client.gather(client.compute(out.to_delayed()))]
    assert parts == [ROW_CHUNKS[0], ROW_CHUNKS[1], 0, ROW_CHUNKS[3]]


def test_dataframe_partitions_with_their_own_categories(client, data):
    """Each partition's category column lists only the categories it holds, in its
    own order; the model maps them by value, as local prediction does."""
    model, frame = data["reg"], data["frame"]

    def recode(p):
        c = p["c"].astype(object)
        return p.assign(c=pd.Categorical(c, categories=sorted(set(c), reverse=True)))

    df = _dframe(frame).map_partitions(recode, meta=frame.iloc[:0])
    got = predict(client, model, df).compute()
    assert np.array_equal(got.to_numpy(), model.predict(frame))


def test_dataframe_multiclass_contribs_come_as_an_array(client, data):
    """(n, K, F + 1) has no frame shape: a dask array, one block per partition."""
    X, model = data["X"], data["multi"]
    df = _dframe(pd.DataFrame(X))
    out = predict(client, model, df, pred_contribs=True)
    assert isinstance(out, da.Array)
    assert out.numblocks[0] == df.npartitions and out.chunks[1:] == ((3,), (5,))
    assert np.array_equal(out.compute(), model.predict(X, pred_contribs=True))
    proba = predict(client, model, df)
    assert isinstance(proba, dd.DataFrame) and proba.compute().shape == (N, 3)


def test_estimator_labels_and_proba(client, data):
    clf, X = data["clf"], data["X"]
    dX = _darray(X)
    labels = predict(client, clf, dX)
    assert labels.dtype == clf.classes_.dtype
    assert np.array_equal(labels.compute(), clf.predict(X))
    df = _dframe(pd.DataFrame(X))
    out = predict(client, clf, df)
    frame_labels = out.compute()
    assert out._meta.dtype == frame_labels.dtype
    assert frame_labels.tolist() == clf.predict(X).tolist()
    # LightGBM's spelling of the SHAP flag goes through the estimator's predict
    contrib = predict(client, clf, dX, pred_contrib=True)
    assert contrib.chunks == (ROW_CHUNKS, (5,))
    assert np.array_equal(contrib.compute(), clf.predict(X, pred_contribs=True))


def test_model_is_scattered_once(client, data, monkeypatch):
    calls = []
    real = client.scatter

    def counting(*args, **kw):
        calls.append(kw)
        return real(*args, **kw)

    monkeypatch.setattr(client, "scatter", counting)
    out = predict(client, data["multi"], _darray(data["X"]))
    out.compute()
    assert calls == [{"hash": False, "broadcast": False}]


def test_bad_input_is_refused_before_anything_runs(client, data):
    model, X = data["multi"], data["X"]
    with pytest.raises(ValueError, match="data: every chunk must span all 4 columns"):
        predict(client, model, da.from_array(X, chunks=(60, 2)))
    with pytest.raises(TypeError, match="data must be a dask"):
        predict(client, model, X)
    with pytest.raises(ValueError, match="data has 3 columns"):
        predict(client, model, _darray(X[:, :3]))
    with pytest.raises(ValueError, match="data's column names differ"):
        predict(client, data["reg"], _dframe(data["frame"])[["x1", "x0", "x2", "c"]])
    with pytest.raises(ValueError, match="data must be a 2-D"):
        predict(client, model, da.from_array(X[:, 0], chunks=60))
    with pytest.raises(TypeError, match="'raw_score' is not a keyword of Booster.predict"):
        predict(client, model, _darray(X), raw_score=True)
    with pytest.raises(ValueError, match="different outputs"):
        predict(client, model, _darray(X), pred_leaf=True, pred_contribs=True)
    with pytest.raises(TypeError, match="pred_leaf must be True or False"):
        predict(client, model, _darray(X), pred_leaf=1)
    with pytest.raises(ValueError, match=r"iteration_range=\(0, 99\)"):
        predict(client, model, _darray(X), iteration_range=(0, 99))
    with pytest.raises(TypeError, match="model must be a bonsai.Booster"):
        predict(client, "model.json", _darray(X))
    with pytest.raises(TypeError, match="client must be a distributed.Client"):
        predict("tcp://127.0.0.1:8786", model, _darray(X))
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        predict(client, bonsai.BonsaiRegressor(), _darray(X))
