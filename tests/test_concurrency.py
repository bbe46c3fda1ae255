"""Thread safety: one model predicting from 8 Python threads at once, and two fits
in two threads of one process.

Every race starts on a FRESH model (loaded from its model string, so no cache is
built yet): the lazily built caches (the concatenated ensemble, the sparse-input
layout, the objective) are built inside the race.  Threads that ask for different
iteration ranges at once make the one-entry ensemble cache change hands while
others read it.  Every thread's answer must equal the single-threaded one bit for bit.
"""
import pickle
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp

import bonsai
from bonsai import TrainingCallback
from bonsai.sklearn import BonsaiClassifier, BonsaiRegressor

N_THREADS = 8
RACES = 3


def _data(n=4000, F=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.sin(np.nan_to_num(X[:, 1])) > 0).astype(np.float64)
    return X, y


def _race(fn, jobs):
    """Run ``fn(job)`` for every job, one Python thread each, all released at once
    by a barrier; returns the results in job order (a thread's exception re-raised)."""
    barrier = threading.Barrier(len(jobs))
    out = [None] * len(jobs)

    def run(i):
        barrier.wait()
        try:
            out[i] = ("ok", fn(jobs[i]))
        except BaseException as e:   # noqa: BLE001 -- reported below
            out[i] = ("error", e)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts), "a predicting thread hung"
    for status, val in out:
        if status == "error":
            raise val
    return [val for _, val in out]


def _equal(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


# kinds a thread asks for: (name, predict kwargs); iteration ranges differ between
# threads so the ensemble cache is rebuilt for another range while others read it
KINDS = [
    ("proba", {}),
    ("margin", {"output_margin": True}),
    ("margin_first_half", {"output_margin": True, "iteration_range": (0, 10)}),
    ("leaf", {"pred_leaf": True}),
    ("contribs", {"pred_contribs": True}),
    ("proba_tail", {"iteration_range": (5, 20)}),
    ("leaf_head", {"pred_leaf": True, "iteration_range": (0, 7)}),
    ("contribs_mid", {"pred_contribs": True, "iteration_range": (3, 15)}),
]


@pytest.fixture(scope="module")
def binary_model():
    X, y = _data()
    b = bonsai.train({"objective": "binary", "n_estimators": 20, "max_leaves": 15,
                      "n_threads": 2}, bonsai.Dataset(X, label=y))
    return b.model_to_string(), X


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_booster_predict_from_8_threads_equals_single_threaded(binary_model, sparse):
    text, X = binary_model
    Xin = sp.csr_matrix(np.nan_to_num(X)) if sparse else X
    kinds = KINDS if not sparse else [k for k in KINDS if "contribs" not in k[0]]
    ref_model = bonsai.Booster(model_str=text)
    expected = {name: ref_model.predict(Xin, **kw) for name, kw in kinds}
    jobs = [kinds[i % len(kinds)] for i in range(N_THREADS)]
    for _ in range(RACES):
        model = bonsai.Booster(model_str=text)   # fresh: every cache built in the race
        got = _race(lambda job: model.predict(Xin, **job[1]), jobs)
        for (name, _), g in zip(jobs, got):
            assert _equal(g, expected[name]), f"{name}: a thread got another answer"


def test_one_row_predicts_from_8_threads(binary_model):
    """The one-row path (no thread setup) from many threads: LightGBM #3675's case."""
    text, X = binary_model
    ref = bonsai.Booster(model_str=text).predict(X[:64])
    model = bonsai.Booster(model_str=text)

    def rows(j):
        return np.array([model.predict(X[i:i + 1])[0] for i in range(j, 64, N_THREADS)])

    got = _race(rows, list(range(N_THREADS)))
    for j, g in enumerate(got):
        assert np.array_equal(g, ref[j::N_THREADS])


def test_estimators_predict_from_8_threads_equal_single_threaded():
    X, y = _data(3000, 6, seed=1)
    clf = BonsaiClassifier(n_estimators=15, n_threads=2).fit(X, y.astype(int))
    reg = BonsaiRegressor(n_estimators=15, n_threads=2).fit(X, np.nan_to_num(X[:, 0]))
    blob_c, blob_r = pickle.dumps(clf), pickle.dumps(reg)
    calls = [("c_proba", lambda m, r: m.predict_proba(X)),
             ("c_predict", lambda m, r: m.predict(X)),
             ("c_contrib", lambda m, r: m.predict(X, pred_contrib=True)),
             ("r_predict", lambda m, r: r.predict(X)),
             ("r_leaf", lambda m, r: r.predict(X, pred_leaf=True)),
             ("c_margin", lambda m, r: m.predict(X, raw_score=True)),
             ("r_contrib", lambda m, r: r.predict(X, pred_contribs=True)),
             ("c_apply", lambda m, r: m.apply(X))]
    c0, r0 = pickle.loads(blob_c), pickle.loads(blob_r)
    expected = {name: fn(c0, r0) for name, fn in calls}
    for _ in range(RACES):
        c, r = pickle.loads(blob_c), pickle.loads(blob_r)   # fresh boosters inside
        got = _race(lambda job: job[1](c, r), calls)
        for (name, _), g in zip(calls, got):
            assert _equal(np.asarray(g), np.asarray(expected[name])), name


class _Clock(TrainingCallback):
    """Records when each round ended."""

    def __init__(self):
        self.times = []

    def after_iteration(self, model, epoch, evals_log):
        self.times.append(time.perf_counter())
        return False


def _fit(params, X, y, clock=None):
    return bonsai.train(params, bonsai.Dataset(X, label=y),
                        callbacks=[clock] if clock else None).model_to_string()


def test_two_fits_in_two_threads_give_the_bytes_of_each_fit_alone():
    import numba
    X1, y1 = _data(30000, 10, seed=2)
    X2, y2 = _data(30000, 10, seed=3)
    p1 = {"objective": "binary", "n_estimators": 25, "n_threads": 2, "subsample": 0.8,
          "colsample_bytree": 0.8}
    p2 = {"objective": "squared_error", "n_estimators": 25, "n_threads": 2,
          "grow_policy": "leafwise", "max_leaves": 31}
    y2 = np.nan_to_num(X2[:, 0]) * 2 + np.nan_to_num(X2[:, 3])
    alone = [_fit(p1, X1, y1), _fit(p2, X2, y2)]
    clocks = [_Clock(), _Clock()]
    got = _race(lambda j: _fit(*j), [(p1, X1, y1, clocks[0]), (p2, X2, y2, clocks[1])])
    assert got[0] == alone[0] and got[1] == alone[1]
    if numba.threading_layer() == "workqueue":
        return   # that layer serialises fits (bonsai._threads): no overlap to check
    # the fits really ran at the same time: rounds of each ended inside the other's
    a, b = (np.array(c.times) for c in clocks)
    inside_a = np.sum((b > a[0]) & (b < a[-1]))
    inside_b = np.sum((a > b[0]) & (a < b[-1]))
    assert inside_a >= 3 and inside_b >= 3, (a - a[0], b - a[0])


def test_two_fits_on_one_shared_dataset_in_two_threads():
    """Both threads prepare the same fresh Dataset's backend layout at once."""
    X, y = _data(20000, 8, seed=4)
    params = {"objective": "binary", "n_estimators": 10, "n_threads": 2}
    alone = _fit(params, X, y)
    ds = bonsai.Dataset(X, label=y)
    got = _race(lambda p: bonsai.train(p, ds).model_to_string(), [params, dict(params)])
    assert got == [alone, alone]
