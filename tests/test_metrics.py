"""Tests for bonsai.metrics against scikit-learn and LightGBM's metric formulas."""

import numpy as np
import pytest
from sklearn import metrics as skm

from bonsai.metrics import METRICS, Metric, get_metric

N = 60


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def _w(rng, weighted):
    return rng.random(N) + 0.1 if weighted else None


def test_metric_registry():
    assert set(METRICS) >= {"rmse", "mae", "logloss", "auc", "error", "mlogloss", "merror",
                            "poisson", "gamma", "tweedie", "quantile"}
    for name in METRICS:
        m = get_metric(name, {})
        assert isinstance(m, Metric) and m.name == name
        assert m.higher_is_better == (name == "auc")


def test_unknown_metric():
    with pytest.raises(ValueError, match="eval_metric") as info:
        get_metric("accuracy", {})
    assert "accuracy" in str(info.value) and "rmse" in str(info.value)
    with pytest.raises(TypeError, match="eval_metric"):
        get_metric(None, {})
    with pytest.raises(ValueError, match="alpha"):
        get_metric("quantile", {"alpha": 0.0})
    with pytest.raises(ValueError, match="tweedie_variance_power"):
        get_metric("tweedie", {"tweedie_variance_power": 1.0})


@pytest.mark.parametrize("weighted", [False, True])
def test_regression_metrics_vs_sklearn(rng, weighted):
    y, p, w = rng.normal(size=N), rng.normal(size=N), _w(rng, weighted)
    assert get_metric("rmse", {}).fn(y, p, w) == pytest.approx(
        np.sqrt(skm.mean_squared_error(y, p, sample_weight=w)))
    assert get_metric("mae", {}).fn(y, p, w) == pytest.approx(
        skm.mean_absolute_error(y, p, sample_weight=w))
    assert get_metric("quantile", {"alpha": 0.3}).fn(y, p, w) == pytest.approx(
        skm.mean_pinball_loss(y, p, alpha=0.3, sample_weight=w))


@pytest.mark.parametrize("weighted", [False, True])
def test_huber(rng, weighted):
    y, p, w = rng.normal(size=N) * 3, rng.normal(size=N), _w(rng, weighted)
    d = np.abs(p - y)
    loss = np.where(d <= 0.8, 0.5 * d ** 2, 0.8 * (d - 0.4))
    assert get_metric("huber", {"huber_delta": 0.8}).fn(y, p, w) == pytest.approx(
        np.average(loss, weights=w))


@pytest.mark.parametrize("weighted", [False, True])
def test_count_metrics_lightgbm_formulas(rng, weighted):
    w = _w(rng, weighted)
    y = rng.poisson(2.0, N).astype(np.float64)
    mu = rng.gamma(2.0, 1.0, N)
    # LightGBM "poisson": mu - y log(mu)
    assert get_metric("poisson", {}).fn(y, mu, w) == pytest.approx(
        np.average(mu - y * np.log(mu), weights=w))
    # differs from sklearn's half Poisson deviance only by label-only terms
    d1 = skm.mean_poisson_deviance(y, mu, sample_weight=w)
    d2 = skm.mean_poisson_deviance(y, mu * 1.1, sample_weight=w)
    m = get_metric("poisson", {}).fn
    assert m(y, mu, w) - m(y, mu * 1.1, w) == pytest.approx((d1 - d2) / 2)
    # LightGBM "gamma": y / mu + log(mu)
    yg = rng.gamma(2.0, 1.0, N)
    assert get_metric("gamma", {}).fn(yg, mu, w) == pytest.approx(
        np.average(yg / mu + np.log(mu), weights=w))
    dg1 = skm.mean_gamma_deviance(yg, mu, sample_weight=w)
    dg2 = skm.mean_gamma_deviance(yg, mu * 0.7, sample_weight=w)
    mg = get_metric("gamma", {}).fn
    assert mg(yg, mu, w) - mg(yg, mu * 0.7, w) == pytest.approx((dg1 - dg2) / 2)
    # LightGBM "tweedie": -y mu^(1-rho)/(1-rho) + mu^(2-rho)/(2-rho)
    rho = 1.3
    expect = -y * mu ** (1 - rho) / (1 - rho) + mu ** (2 - rho) / (2 - rho)
    mt = get_metric("tweedie", {"tweedie_variance_power": rho}).fn
    assert mt(y, mu, w) == pytest.approx(np.average(expect, weights=w))
    dt1 = skm.mean_tweedie_deviance(y, mu, power=rho, sample_weight=w)
    dt2 = skm.mean_tweedie_deviance(y, mu * 1.2, power=rho, sample_weight=w)
    assert mt(y, mu, w) - mt(y, mu * 1.2, w) == pytest.approx((dt1 - dt2) / 2)


def test_count_metrics_floor_tiny_means():
    y = np.array([1.0, 2.0])
    mu = np.array([0.0, 1.0])
    for name in ("poisson", "gamma", "tweedie"):
        assert np.isfinite(get_metric(name, {}).fn(y, mu, None))


@pytest.mark.parametrize("weighted", [False, True])
def test_binary_metrics_vs_sklearn(rng, weighted):
    y = (rng.random(N) < 0.4).astype(np.float64)
    p, w = rng.random(N), _w(rng, weighted)
    assert get_metric("logloss", {}).fn(y, p, w) == pytest.approx(
        skm.log_loss(y, p, sample_weight=w))
    assert get_metric("error", {}).fn(y, p, w) == pytest.approx(
        1 - skm.accuracy_score(y, p > 0.5, sample_weight=w))
    assert get_metric("auc", {}).fn(y, p, w) == pytest.approx(
        skm.roc_auc_score(y, p, sample_weight=w))


def test_logloss_clips():
    y = np.array([1.0, 0.0])
    p = np.array([0.0, 1.0])
    assert get_metric("logloss", {}).fn(y, p, None) == pytest.approx(-np.log(1e-15), rel=1e-4)
    assert get_metric("error", {}).fn(np.array([1.0, 0.0]), np.array([0.5, 0.5]), None) == 0.5


@pytest.mark.parametrize("weighted", [False, True])
def test_auc_with_ties(rng, weighted):
    y = (rng.random(N) < 0.5).astype(np.float64)
    p = rng.integers(0, 5, N) / 4.0  # heavy ties
    w = _w(rng, weighted)
    assert get_metric("auc", {}).fn(y, p, w) == pytest.approx(
        skm.roc_auc_score(y, p, sample_weight=w), abs=1e-12)
    auc = get_metric("auc", {}).fn
    assert auc(np.array([0.0, 1.0]), np.array([0.3, 0.3]), None) == 0.5
    assert auc(np.array([0.0, 1.0, 1.0]), np.array([0.1, 0.2, 0.9]), None) == 1.0
    assert auc(np.array([1.0, 0.0]), np.array([0.1, 0.9]), None) == 0.0


def test_auc_integer_weights_equal_repetition(rng):
    y = (rng.random(20) < 0.5).astype(np.float64)
    p = np.round(rng.random(20), 1)
    k = rng.integers(1, 4, 20)
    auc = get_metric("auc", {}).fn
    assert auc(y, p, k.astype(np.float64)) == pytest.approx(
        auc(np.repeat(y, k), np.repeat(p, k), None))


def test_auc_single_class_is_one():
    assert get_metric("auc", {}).fn(np.ones(4), np.linspace(0, 1, 4), None) == 1.0
    assert get_metric("auc", {}).fn(np.array([0.0, 1.0]), np.array([0.2, 0.7]),
                                    np.array([1.0, 0.0])) == 1.0


def _probs(rng, n, k):
    z = rng.normal(size=(n, k))
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("weighted", [False, True])
def test_multiclass_metrics_vs_sklearn(rng, weighted):
    k = 4
    y = rng.integers(0, k, N).astype(np.float64)
    y[:k] = np.arange(k)
    p, w = _probs(rng, N, k), _w(rng, weighted)
    assert get_metric("mlogloss", {}).fn(y, p, w) == pytest.approx(
        skm.log_loss(y, p, sample_weight=w, labels=np.arange(k)))
    assert get_metric("merror", {}).fn(y, p, w) == pytest.approx(
        1 - skm.accuracy_score(y, p.argmax(axis=1), sample_weight=w))


def test_multiclass_edge_cases():
    y = np.array([0.0, 1.0])
    p = np.array([[1.0, 0.0, 0.0], [0.5, 0.0, 0.5]])
    assert get_metric("mlogloss", {}).fn(y, p, None) == pytest.approx(-np.log(1e-15) / 2)
    tie = np.array([[0.4, 0.4, 0.2], [0.1, 0.8, 0.1]])
    assert get_metric("merror", {}).fn(y, tie, None) == 0.5  # ties count as errors
    with pytest.raises(ValueError, match="shape"):
        get_metric("mlogloss", {}).fn(y, np.array([0.2, 0.8]), None)


def test_results_are_python_floats(rng):
    y = (rng.random(N) < 0.5).astype(np.float64)
    p = rng.random(N)
    for name in ("rmse", "mae", "logloss", "auc", "error", "poisson", "quantile"):
        assert type(get_metric(name, {}).fn(y, p, None)) is float
