"""Tests for bonsai.objectives: derivatives, init scores, labels, transforms."""

import numpy as np
import pytest

import bonsai

from bonsai.objectives import OBJECTIVES, get_objective, weighted_quantile

N = 40
RHO = 1.3
HUBER = 0.8
ALPHA = 0.7
PARAMS = {"huber_delta": HUBER, "alpha": ALPHA, "tweedie_variance_power": RHO,
          "poisson_max_delta_step": 0.0}


def _labels(name, rng, n=N):
    if name in ("poisson", "tweedie"):
        return rng.poisson(1.5, n).astype(np.float64) + (np.arange(n) == 0)
    if name == "gamma":
        return rng.gamma(2.0, 1.0, n) + 0.1
    if name == "binary":
        return (rng.random(n) < 0.4).astype(np.float64)
    return rng.normal(size=n)


def _raw(name, y, rng):
    if name in ("squared_error", "absolute_error", "huber", "quantile"):
        # keep raw - y away from the loss's kinks (0 and +-HUBER)
        off = rng.choice([-1.5, -0.4, 0.3, 1.2], y.shape[0]) + rng.uniform(-0.05, 0.05, y.shape[0])
        return (y + off)[None, :]
    return rng.normal(scale=0.7, size=(1, y.shape[0]))


def _loss(name, y, r):
    """Per-row loss whose derivative in r is the objective's gradient."""
    d = r - y
    if name == "squared_error":
        return 0.5 * d * d
    if name == "absolute_error":
        return np.abs(d)
    if name == "huber":
        a = np.abs(d)
        return np.where(a <= HUBER, 0.5 * d * d, HUBER * (a - 0.5 * HUBER))
    if name == "quantile":
        return np.where(d >= 0, (1 - ALPHA) * d, -ALPHA * d)
    if name == "poisson":
        return np.exp(r) - y * r
    if name == "gamma":
        return y * np.exp(-r) + r
    if name == "tweedie":
        return -y * np.exp((1 - RHO) * r) / (1 - RHO) + np.exp((2 - RHO) * r) / (2 - RHO)
    if name == "binary":
        return np.logaddexp(0.0, r) - y * r
    raise AssertionError(name)


def _gh(obj, y, raw, w=None):
    g = np.empty(raw.shape, np.float32)
    h = np.empty(raw.shape, np.float32)
    obj.grad_hess(y, raw, w, g, h)
    return g.astype(np.float64), h.astype(np.float64)


def test_objectives_tuple():
    assert set(OBJECTIVES) == {"squared_error", "absolute_error", "huber", "quantile",
                               "poisson", "gamma", "tweedie", "binary", "multiclass"}


@pytest.mark.parametrize("name", [o for o in OBJECTIVES if o != "multiclass"])
def test_gradient_matches_finite_difference(name):
    rng = np.random.default_rng(0)
    obj = get_objective(name, PARAMS)
    y = _labels(name, rng)
    raw = _raw(name, y, rng)
    g, h = _gh(obj, y, raw)
    eps = 1e-6
    r = raw[0]
    fd_g = (_loss(name, y, r + eps) - _loss(name, y, r - eps)) / (2 * eps)
    np.testing.assert_allclose(g[0], fd_g, rtol=1e-5, atol=1e-5)
    if name in ("absolute_error", "quantile", "huber"):
        np.testing.assert_array_equal(h[0], 1.0)  # LightGBM's constant hessian
    else:
        fd_h = (_loss(name, y, r + 1e-4) - 2 * _loss(name, y, r)
                + _loss(name, y, r - 1e-4)) / 1e-8
        np.testing.assert_allclose(h[0], fd_h, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", OBJECTIVES)
def test_weights_multiply_gradients(name):
    rng = np.random.default_rng(1)
    obj = get_objective(name, {"num_class": 3})
    if name == "multiclass":
        y = rng.integers(0, 3, N).astype(np.float64)
        raw = rng.normal(size=(3, N))
    else:
        y = _labels(name, rng)
        raw = _raw(name, y, rng)
    w = rng.random(N) + 0.1
    g, h = _gh(obj, y, raw)
    gw, hw = _gh(obj, y, raw, w)
    np.testing.assert_allclose(gw, g * w, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(hw, h * w, rtol=1e-6, atol=1e-7)


def test_poisson_hessian_uses_max_delta_step():
    rng = np.random.default_rng(2)
    y = rng.poisson(2.0, N).astype(np.float64)
    raw = rng.normal(size=(1, N))
    g, h = _gh(get_objective("poisson", {}), y, raw)
    np.testing.assert_allclose(g[0], np.exp(raw[0]) - y, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(h[0], np.exp(raw[0] + 0.7), rtol=1e-6)


def test_multiclass_gradient_matches_finite_difference():
    rng = np.random.default_rng(3)
    k = 4
    obj = get_objective("multiclass", {"num_class": k})
    y = rng.integers(0, k, N).astype(np.float64)
    raw = rng.normal(size=(k, N))

    def loss(r):
        return np.logaddexp.reduce(r, axis=0) - r[y.astype(int), np.arange(N)]

    g, h = _gh(obj, y, raw)
    eps = 1e-6
    for c in range(k):
        e = np.zeros_like(raw)
        e[c] = eps
        np.testing.assert_allclose(g[c], (loss(raw + e) - loss(raw - e)) / (2 * eps),
                                   rtol=1e-5, atol=1e-6)
        e[c] = 1e-4
        fd_h = (loss(raw + e) - 2 * loss(raw) + loss(raw - e)) / 1e-8
        np.testing.assert_allclose(h[c] * (k - 1) / k, fd_h, rtol=1e-4, atol=1e-5)
    assert np.abs(g.sum(axis=0)).max() < 1e-6


def test_extreme_margins_are_finite():
    y = np.array([0.0, 1.0, 0.0, 1.0])
    raw = np.array([[-800.0, -800.0, 800.0, 800.0]])
    g, h = _gh(get_objective("binary", {}), y, raw)
    np.testing.assert_allclose(g[0], [0.0, -1.0, 1.0, 0.0])
    assert np.all(np.isfinite(h))
    rawm = np.array([[1000.0, -1000.0], [0.0, 0.0], [-1000.0, 1000.0]])
    obj = get_objective("multiclass", {"num_class": 3})
    gm, hm = _gh(obj, np.array([0.0, 1.0]), rawm)
    assert np.all(np.isfinite(gm)) and np.all(np.isfinite(hm))
    p = obj.transform(rawm)
    np.testing.assert_allclose(p, [[1, 0, 0], [0, 0, 1]])
    np.testing.assert_allclose(get_objective("binary", {}).transform(raw), [0, 0, 1, 1])


def test_init_scores():
    rng = np.random.default_rng(4)
    y = rng.normal(size=25)
    w = rng.random(25) + 0.1
    get = get_objective
    assert get("squared_error", {}).init_score(y, None)[0] == pytest.approx(y.mean())
    assert get("squared_error", {}).init_score(y, w)[0] == pytest.approx(np.average(y, weights=w))
    assert get("huber", {}).init_score(y, w)[0] == pytest.approx(np.average(y, weights=w))
    assert get("absolute_error", {}).init_score(y, None)[0] == pytest.approx(np.median(y))
    assert get("quantile", {"alpha": 0.3}).init_score(y, None)[0] == pytest.approx(
        np.quantile(y, 0.3))
    yp = rng.poisson(2.0, 25).astype(np.float64) + 1
    for name in ("poisson", "gamma", "tweedie"):
        s = get(name, {}).init_score(yp, w)
        assert s.shape == (1,) and s.dtype == np.float64
        assert s[0] == pytest.approx(np.log(np.average(yp, weights=w)))
    yb = np.array([0, 1, 1, 0, 1], dtype=np.float64)
    assert get("binary", {}).init_score(yb, None)[0] == pytest.approx(np.log(0.6 / 0.4))
    ym = np.array([0, 1, 1, 2, 2, 2], dtype=np.float64)
    wm = np.array([1, 1, 1, 1, 1, 3], dtype=np.float64)
    s = get("multiclass", {"num_class": 4}).init_score(ym, wm)
    np.testing.assert_allclose(s[:3], np.log([1 / 8, 2 / 8, 5 / 8]))
    assert s.shape == (4,) and np.isfinite(s[3])  # unseen class: log(eps)
    assert get("multiclass", {}).init_score(ym, None).shape == (3,)


def test_init_score_of_custom_is_zero():
    obj = get_objective(lambda y, p: (p - y, np.ones_like(p)), {})
    np.testing.assert_array_equal(obj.init_score(np.ones(3), None), [0.0])


def test_weighted_quantile():
    x = np.array([3.0, 1.0, 2.0, 5.0, 4.0])
    for a in (0.0, 0.1, 0.5, 0.9, 1.0):
        assert weighted_quantile(x, None, a) == np.quantile(x, a)
        assert weighted_quantile(x, np.full(5, 2.5), a) == np.quantile(x, a)
    # heavy weight dominates; zero weights are ignored
    assert weighted_quantile(np.array([0.0, 1.0, 2.0]), np.array([1.0, 1.0, 10.0]), 0.5) == 2.0
    assert weighted_quantile(x, np.array([1.0, 1.0, 1.0, 0.0, 2.0]), 0.5) == 3.0
    # exact boundary -> midpoint (matches the unweighted median)
    assert weighted_quantile(np.array([1.0, 2.0, 3.0, 4.0]), np.array([1.0, 2.0, 1.0, 2.0]),
                             0.5) == 2.5
    assert weighted_quantile(np.array([]), None, 0.5) == 0.0
    # weighted result minimises the weighted pinball loss
    rng = np.random.default_rng(5)
    v, w = rng.normal(size=30), rng.random(30)
    for a in (0.2, 0.5, 0.8):
        q = weighted_quantile(v, w, a)

        def pin(c):
            d = v - c
            return np.sum(w * np.where(d < 0, (a - 1) * d, a * d))

        grid = np.linspace(v.min(), v.max(), 2001)
        assert pin(q) <= min(pin(c) for c in grid) + 1e-12


def test_renew_leaf():
    assert get_objective("squared_error", {}).renew_leaf is None
    assert get_objective("binary", {}).renew_leaves is None
    res = np.array([-1.0, 0.5, 2.0, 3.0])
    l1 = get_objective("absolute_error", {})
    assert l1.renew_leaf(res, None) == pytest.approx(1.25)
    assert l1.renew_leaves(res, None) == pytest.approx(1.25)
    q = get_objective("quantile", {"alpha": 0.25})
    assert q.renew_leaf(res, None) == pytest.approx(np.quantile(res, 0.25))
    assert q.renew_leaf(res, np.array([0.0, 1.0, 1.0, 5.0])) == 2.0  # target 1.75 of 7


@pytest.mark.parametrize("name,bad,word", [
    ("poisson", [1.0, -1.0], "label >= 0"),
    ("poisson", [0.0, 0.0], "sum(label)"),
    ("tweedie", [2.0, -0.5], "label >= 0"),
    ("gamma", [1.0, 0.0], "label > 0"),
    ("binary", [0.0, 2.0], "{0, 1}"),
    ("binary", [0.0, np.nan], "{0, 1}"),
    ("multiclass", [0.0, 1.5], "integer"),
    ("multiclass", [0.0, -1.0], "integer"),
    ("multiclass", [0.0, 3.0], "num_class=3"),
    ("squared_error", [0.0, np.inf], "finite"),
])
def test_check_labels_errors(name, bad, word):
    obj = get_objective(name, {"num_class": 3})
    with pytest.raises(ValueError, match="label") as info:
        obj.check_labels(np.array(bad))
    msg = str(info.value)
    assert name in msg and word in msg


@pytest.mark.parametrize("name,y", [
    ("poisson", [0.0, 3.0]), ("gamma", [0.5, 2.0]), ("tweedie", [0.0, 1.0]),
    ("binary", [0.0, 1.0]), ("multiclass", [0.0, 2.0]), ("quantile", [-5.0, 5.0]),
])
def test_check_labels_ok(name, y):
    get_objective(name, {"num_class": 3}).check_labels(np.array(y))


def test_transform_shapes_and_links():
    raw1 = np.array([[-1.0, 0.0, 2.0]])
    for name in ("squared_error", "absolute_error", "huber", "quantile"):
        out = get_objective(name, {}).transform(raw1)
        assert out.shape == (3,)
        np.testing.assert_array_equal(out, raw1[0])
    for name in ("poisson", "gamma", "tweedie"):
        np.testing.assert_allclose(get_objective(name, {}).transform(raw1), np.exp(raw1[0]))
    p = get_objective("binary", {}).transform(raw1)
    np.testing.assert_allclose(p, 1 / (1 + np.exp(-raw1[0])))
    raw3 = np.random.default_rng(6).normal(size=(3, 5))
    obj = get_objective("multiclass", {"num_class": 3})
    pm = obj.transform(raw3)
    assert pm.shape == (5, 3) and pm.flags.c_contiguous
    np.testing.assert_allclose(pm, (np.exp(raw3) / np.exp(raw3).sum(axis=0)).T)
    assert obj.n_outputs(3) == 3 and get_objective("binary", {}).n_outputs(2) == 1


def test_attributes():
    expect = {"squared_error": "rmse", "absolute_error": "mae", "huber": "huber",
              "quantile": "quantile", "poisson": "poisson", "gamma": "gamma",
              "tweedie": "tweedie", "binary": "logloss", "multiclass": "mlogloss"}
    for name, metric in expect.items():
        obj = get_objective(name, {})
        assert obj.name == name and obj.default_metric == metric
        assert obj.is_classification == (name in ("binary", "multiclass"))
    assert get_objective("regression", {}).name == "squared_error"


def test_custom_objective():
    calls = []

    def fobj(y_true, y_pred):
        calls.append(y_pred.shape)
        return y_pred - y_true, np.ones_like(y_pred)

    obj = get_objective(fobj, {})
    y = np.array([1.0, 2.0, 3.0])
    raw = np.zeros((1, 3))
    g, h = _gh(obj, y, raw, np.array([1.0, 2.0, 0.5]))
    np.testing.assert_allclose(g[0], [-1.0, -4.0, -1.5])
    np.testing.assert_allclose(h[0], [1.0, 2.0, 0.5])
    np.testing.assert_array_equal(obj.transform(raw), [0, 0, 0])

    def fobj_mc(y_true, y_pred):
        onehot = np.eye(y_pred.shape[1])[y_true.astype(int)]
        return y_pred - onehot, np.full(y_pred.shape, 2.0)

    raw3 = np.arange(6, dtype=np.float64).reshape(2, 3)  # K=2, n=3
    gm, hm = _gh(get_objective(fobj_mc, {}), np.array([0.0, 1.0, 1.0]), raw3)
    np.testing.assert_allclose(gm, raw3 - np.array([[1, 0, 0], [0, 1, 1]]))
    np.testing.assert_allclose(hm, 2.0)
    assert calls == [(3,)]
    assert get_objective(fobj_mc, {}).transform(raw3).shape == (3, 2)


@pytest.mark.parametrize("ret,match", [
    (lambda y, p: (p, np.ones(len(p) + 1)), "shape"),
    (lambda y, p: (p * np.nan, np.ones_like(p)), "non-finite"),
    (lambda y, p: p, "tuple"),
])
def test_custom_objective_validation(ret, match):
    def my_obj(y, p):
        return ret(y, p)

    with pytest.raises(ValueError, match=match) as info:
        _gh(get_objective(my_obj, {}), np.ones(3), np.zeros((1, 3)))
    assert "my_obj" in str(info.value)


def test_bad_objective_and_params():
    with pytest.raises(ValueError, match="objective.*'nope'"):
        get_objective("nope", {})
    with pytest.raises(TypeError, match="objective"):
        get_objective(3, {})
    with pytest.raises(ValueError, match="alpha"):
        get_objective("quantile", {"alpha": 1.5})
    with pytest.raises(ValueError, match="tweedie_variance_power"):
        get_objective("tweedie", {"tweedie_variance_power": 2.0})
    with pytest.raises(ValueError, match="huber_delta"):
        get_objective("huber", {"huber_delta": -1})
    with pytest.raises(TypeError, match="huber_delta"):
        get_objective("huber", {"huber_delta": "big"})
    with pytest.raises(ValueError, match="num_class"):
        get_objective("multiclass", {"num_class": 1})


@pytest.mark.parametrize("objective,extra", [("binary", {}), ("squared_error", {}),
                                             ("quantile", {"alpha": 0.3}), ("poisson", {}),
                                             ("multiclass", {"num_class": 4})])
def test_float32_labels_are_kept_and_train_the_same_model(objective, extra):
    """float32 labels are not copied to float64 (memory), yet every objective widens
    them exactly: the model equals the one trained on float64 labels.  70k rows
    cross the objectives' 64k-row passes."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(70_000, 3)).astype(np.float32)
    y = (X[:, 0] * 3.3 + rng.normal(size=70_000) * 0.7).astype(np.float32)
    y = {"binary": (y > 0).astype(np.float32), "poisson": np.abs(y) + np.float32(0.1),
         "multiclass": np.digitize(y, [-2, 0, 2]).astype(np.float32)}.get(objective, y)
    w = rng.random(70_000) + 0.5
    models = []
    for labels in (y, y.astype(np.float64)):
        ds = bonsai.Dataset(X, label=labels, weight=w)
        assert ds.label.dtype == labels.dtype
        models.append(bonsai.train(dict(objective=objective, n_estimators=3, max_depth=3,
                                        **extra), ds).model_to_string())
    assert models[0] == models[1]
