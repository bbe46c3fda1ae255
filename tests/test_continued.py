"""Continued training (``init_model``): the base score is counted once.

For every objective with a non-zero base score, on targets whose mean is far from 0:

* ``train(n1)`` then ``train(n2, init_model=...)`` is the model ``train(n1 + n2)``
  grows, byte for byte (no sampling);
* the evaluation history a continued fit reports is the metric of the returned
  model's own predictions, and the tail of the one-call fit's history;
* the same through the scikit-learn estimators' ``fit(..., init_model=...)``.

The targets are far from 0 on purpose: a base score counted twice shifts every margin
by the base score, which a target centred on 0 cannot show.
"""
import numpy as np
import pytest

import bonsai
from bonsai import BonsaiClassifier, BonsaiRegressor
from bonsai.metrics import get_metric

N1, N2 = 6, 4
BASE = {"max_depth": 3, "learning_rate": 0.3, "min_child_samples": 5}


def _features(n=2400, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 5)), rng


def _task(name):
    """(params, X, y): a target whose base score is far from 0."""
    X, rng = _features()
    s = X[:, 0] + 0.5 * X[:, 1] * (X[:, 2] > 0)
    if name == "squared_error":
        return {"objective": "squared_error"}, X, 100.0 + s + rng.normal(scale=0.1, size=len(s))
    if name == "huber":
        return ({"objective": "huber", "huber_delta": 2.0}, X,
                -50.0 + s + rng.normal(scale=0.1, size=len(s)))
    if name == "absolute_error":   # leaves renewed from the residuals y - raw
        return {"objective": "absolute_error"}, X, 40.0 + s + rng.laplace(scale=0.2, size=len(s))
    if name == "poisson":
        return {"objective": "poisson"}, X, rng.poisson(50.0 * np.exp(0.3 * s)).astype(float)
    if name == "gamma":
        return {"objective": "gamma"}, X, rng.gamma(4.0, 50.0 * np.exp(0.3 * s) / 4.0)
    if name == "tweedie":
        counts = rng.poisson(3.0 * np.exp(0.3 * s))
        y = np.array([rng.gamma(2.0, 5.0, size=c).sum() for c in counts])
        return {"objective": "tweedie", "tweedie_variance_power": 1.3}, X, y
    if name == "binary":           # 6% positives: a base log-odds near -2.8
        return {"objective": "binary"}, X, (s + rng.normal(scale=0.5, size=len(s)) > 2.1).astype(float)
    if name == "multiclass":       # classes of about 75 / 18 / 7 %
        y = np.digitize(s + rng.normal(scale=0.3, size=len(s)), [0.75, 1.6]).astype(float)
        return {"objective": "multiclass", "num_class": 3}, X, y
    raise AssertionError(name)


OBJECTIVES = ["squared_error", "huber", "absolute_error", "poisson", "gamma", "tweedie",
              "binary", "multiclass"]


def _fit(params, X, y, rounds, init_model=None, valid=None, init_score=None):
    ds = bonsai.Dataset(X[:2000], label=y[:2000],
                        init_score=None if init_score is None else init_score[:2000])
    valid_sets = None
    if valid:
        valid_sets = [bonsai.Dataset(X[2000:], label=y[2000:], reference=ds,
                                     init_score=None if init_score is None else init_score[2000:])]
    return bonsai.train({**BASE, **params}, ds, num_boost_round=rounds, valid_sets=valid_sets,
                        init_model=init_model)


def _metric_of(booster, params, X, y, name, init_score=None):
    """The metric of ``booster``'s own predictions (margins + init_score)."""
    margin = booster.predict(X, output_margin=True)
    if init_score is not None:   # an init_score replaces the base score
        margin = margin - booster.base_score + init_score
    raw = np.atleast_2d(np.asarray(margin).T)
    pred = booster._objective().transform(np.ascontiguousarray(raw))
    return get_metric(name, {**BASE, **params}).fn(y, pred, None)


@pytest.mark.parametrize("name", OBJECTIVES)
def test_continued_equals_one_fit(name):
    params, X, y = _task(name)
    whole = _fit(params, X, y, N1 + N2, valid=True)
    first = _fit(params, X, y, N1, valid=True)
    more = _fit(params, X, y, N2, init_model=first, valid=True)
    assert np.max(np.abs(whole.base_score)) > 1.0, whole.base_score   # far from 0
    assert more.num_boosted_rounds() == N1 + N2
    assert more.model_to_string() == whole.model_to_string()
    # the reported history is the returned model's metric, round by round the tail of
    # the one-call fit's history
    metric = next(iter(more.evals_result["valid_0"]))
    hist = more.evals_result["valid_0"][metric]
    assert hist == whole.evals_result["valid_0"][metric][N1:]
    got = _metric_of(more, params, X[2000:], y[2000:], metric)
    assert hist[-1] == pytest.approx(got, rel=1e-12, abs=1e-12)
    # and the continued model is no worse than the first on the data it was fit on
    assert _metric_of(more, params, X[:2000], y[:2000], metric) <= \
        _metric_of(first, params, X[:2000], y[:2000], metric)


def test_continued_with_init_score():
    """An init_score replaces the base score in the first fit and in the continued one."""
    params, X, y = _task("squared_error")
    init = np.random.default_rng(3).normal(loc=100.0, size=len(y))
    kept = init.copy()
    whole = _fit(params, X, y, N1 + N2, valid=True, init_score=init)
    np.testing.assert_array_equal(init, kept)   # training leaves the caller's scores alone
    first = _fit(params, X, y, N1, valid=True, init_score=init)
    more = _fit(params, X, y, N2, init_model=first, valid=True, init_score=init)
    assert more.model_to_string() == whole.model_to_string()
    hist = more.evals_result["valid_0"]["rmse"]
    assert hist == whole.evals_result["valid_0"]["rmse"][N1:]
    got = _metric_of(more, params, X[2000:], y[2000:], "rmse", init_score=init[2000:])
    assert hist[-1] == pytest.approx(got, rel=1e-12)


def test_continued_from_early_stopped_model_keeps_every_tree():
    """An init model with a best_iteration continues from all of its trees (it keeps
    them all), and its history is still the returned model's metric."""
    params, X, y = _task("squared_error")
    rng = np.random.default_rng(5)
    y_noisy = y + rng.normal(scale=3.0, size=len(y))   # early stopping stops early
    first = bonsai.train({**BASE, **params, "learning_rate": 0.9, "early_stopping_rounds": 2},
                         bonsai.Dataset(X[:2000], label=y_noisy[:2000]), num_boost_round=60,
                         valid_sets=[bonsai.Dataset(X[2000:], label=y_noisy[2000:])])
    assert first.best_iteration is not None
    assert first.best_iteration + 1 < first.num_boosted_rounds()
    ds = bonsai.Dataset(X[:2000], label=y_noisy[:2000])
    more = bonsai.train({**BASE, **params}, ds, num_boost_round=3, init_model=first,
                        valid_sets=[bonsai.Dataset(X[2000:], label=y_noisy[2000:], reference=ds)])
    assert more.best_iteration is None
    assert more.num_boosted_rounds() == first.num_boosted_rounds() + 3
    got = _metric_of(more, params, X[2000:], y_noisy[2000:], "rmse")
    assert more.evals_result["valid_0"]["rmse"][-1] == pytest.approx(got, rel=1e-12)


@pytest.mark.parametrize("kind", ["regressor", "binary", "multiclass"])
def test_estimators_continued_equals_one_fit(kind):
    name = {"regressor": "squared_error"}.get(kind, kind)
    params, X, y = _task(name)
    cls = BonsaiRegressor if kind == "regressor" else BonsaiClassifier
    kw = dict(max_depth=3, learning_rate=0.3, min_child_samples=5)
    Xt, yt, Xv, yv = X[:2000], y[:2000], X[2000:], y[2000:]
    whole = cls(n_estimators=N1 + N2, **kw).fit(Xt, yt, eval_set=[(Xv, yv)])
    first = cls(n_estimators=N1, **kw).fit(Xt, yt, eval_set=[(Xv, yv)])
    more = cls(n_estimators=N2, **kw).fit(Xt, yt, eval_set=[(Xv, yv)], init_model=first)
    assert more.n_estimators_ == N1 + N2
    assert more.booster_.model_to_string() == whole.booster_.model_to_string()
    if kind == "regressor":
        np.testing.assert_array_equal(more.predict(Xv), whole.predict(Xv))
        got = np.sqrt(np.mean((more.predict(Xv) - yv) ** 2))
        assert more.evals_result_["valid_0"]["rmse"][-1] == pytest.approx(got, rel=1e-12)
        assert abs(np.mean(more.predict(Xt)) - np.mean(yt)) < 1.0
    else:
        np.testing.assert_array_equal(more.predict_proba(Xv), whole.predict_proba(Xv))
        metric = next(iter(more.evals_result_["valid_0"]))
        assert more.evals_result_["valid_0"][metric] == whole.evals_result_["valid_0"][metric][N1:]
        # the mean predicted probability of each class stays near its frequency
        np.testing.assert_allclose(more.predict_proba(Xt).mean(axis=0)[-1],
                                   np.mean(yt == yt.max()), atol=0.03)


@pytest.mark.parametrize("quantized", [False, True])
def test_continued_with_sampling_equals_one_fit(quantized):
    """Row and column sampling and stochastic gradient rounding draw from seeds keyed
    by the global round, so a continued fit draws what the one-call fit draws."""
    params, X, y = _task("squared_error")
    params = {**params, "subsample": 0.7, "colsample_bytree": 0.8, "colsample_bynode": 0.7,
              "random_state": 3, "quantized_grad": quantized}
    whole = _fit(params, X, y, N1 + N2)
    more = _fit(params, X, y, N2, init_model=_fit(params, X, y, N1))
    assert more.model_to_string() == whole.model_to_string()

