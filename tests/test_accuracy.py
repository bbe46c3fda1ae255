"""Accuracy against LightGBM on real data (LightGBM's example files, kept in the
repository: train on ``.train``, evaluate on ``.test``), with the same hyper-parameters.

bonsai must be as good as LightGBM within: 0.005 AUC (binary), 1% RMSE (regression),
0.01 multi-logloss (multiclass).  Both the leafwise grower (31 leaves, as LightGBM's
num_leaves=31) and the depthwise grower (max_depth 6, against LightGBM limited to
depth 6 with up to 64 leaves) are checked.  The numbers are printed (run with -s).
"""
import lightgbm as lgb
import numpy as np
import pytest
from sklearn.metrics import log_loss, roc_auc_score

import bonsai

N_ROUNDS = 100
COMMON = {"learning_rate": 0.1, "min_child_samples": 20, "min_child_weight": 1e-3,
          "reg_lambda": 1.0, "max_bin": 255}
GROWERS = {
    "leafwise": ({"grow_policy": "leafwise", "max_leaves": 31},
                 {"num_leaves": 31, "max_depth": -1}),
    "depthwise": ({"grow_policy": "depthwise", "max_depth": 6},
                  {"num_leaves": 64, "max_depth": 6}),
}
TASKS = {
    "binary": ({"objective": "binary"}, {"objective": "binary"}),
    "regression": ({"objective": "squared_error"}, {"objective": "regression"}),
    "multiclass": ({"objective": "multiclass", "num_class": 5},
                   {"objective": "multiclass", "num_class": 5}),
}


def _rmse(y, p):
    return float(np.sqrt(np.mean((y - p) ** 2)))


def _metric(task, y, p):
    if task == "binary":
        return roc_auc_score(y, p)
    if task == "regression":
        return _rmse(y, p)
    return log_loss(y, p, labels=np.arange(5))


def _fit_bonsai(task, grower, X, y):
    params = {**COMMON, **TASKS[task][0], **GROWERS[grower][0], "n_estimators": N_ROUNDS,
              "n_threads": 2}
    return bonsai.train(params, bonsai.Dataset(X, label=y, max_bin=255))


def _fit_lgb(task, grower, X, y):
    params = {**TASKS[task][1], **GROWERS[grower][1], "learning_rate": 0.1,
              "min_child_samples": 20, "min_child_weight": 1e-3, "reg_lambda": 1.0,
              "max_bin": 255, "num_threads": 1, "verbose": -1, "seed": 0,
              "deterministic": True}
    return lgb.train(params, lgb.Dataset(X, label=y, params={"max_bin": 255}), N_ROUNDS)


@pytest.mark.parametrize("grower", list(GROWERS))
@pytest.mark.parametrize("task", list(TASKS))
def test_as_accurate_as_lightgbm(task, grower, lgb_example):
    X, y, Xt, yt = lgb_example(task)
    b = _fit_bonsai(task, grower, X, y)
    m = _fit_lgb(task, grower, X, y)
    pb = b.predict(Xt)
    pl = m.predict(Xt)
    assert pb.shape == pl.shape
    sb, sl = _metric(task, yt, pb), _metric(task, yt, pl)
    name = {"binary": "AUC", "regression": "RMSE", "multiclass": "mlogloss"}[task]
    print(f"\n[accuracy] {task:10s} {grower:9s} {name:8s} bonsai={sb:.5f} lightgbm={sl:.5f} "
          f"(train rows {len(y)}, test rows {len(yt)}, {N_ROUNDS} rounds)")
    if task == "binary":
        assert sb >= sl - 0.005, f"bonsai AUC {sb:.5f} < LightGBM {sl:.5f} - 0.005"
    elif task == "regression":
        assert sb <= 1.01 * sl, f"bonsai RMSE {sb:.5f} > 1.01 x LightGBM {sl:.5f}"
    else:
        assert sb <= sl + 0.01, f"bonsai mlogloss {sb:.5f} > LightGBM {sl:.5f} + 0.01"
    if task == "multiclass":
        np.testing.assert_allclose(pb.sum(axis=1), 1.0, rtol=1e-12)
    if task == "binary":
        assert np.all((pb > 0) & (pb < 1))


def test_weights_and_init_score_change_the_model(lgb_example, lgb_side_file):
    """The .weight and .init side files load; weights and an init_score that must change
    the model, each against a fit without them.  (The weight file is 6,998 ones, a 1.1
    and a 1.2: a fit that ignored it would pass any check on it.)"""
    X, y, Xt, yt = lgb_example("binary")
    w_file = lgb_side_file("binary.train.weight")
    init = lgb_side_file("regression.train.init")
    assert w_file.shape == y.shape == init.shape
    p = {"objective": "binary", "n_estimators": 20, "n_threads": 2}
    # the file's weights, positives counted 4 times
    w = w_file * np.where(y == 1, 4.0, 1.0)
    plain = bonsai.train(p, bonsai.Dataset(X, label=y))
    weighted = bonsai.train(p, bonsai.Dataset(X, label=y, weight=w))
    pw = np.sum(w * y) / np.sum(w)
    # the weights reach the boost-from-average base score ...
    assert weighted.base_score[0] == pytest.approx(np.log(pw / (1 - pw)), rel=1e-12)
    assert plain.base_score[0] == pytest.approx(np.log(y.mean() / (1 - y.mean())), rel=1e-12)
    # ... and the trees' gradients: from one fixed base score, the weighted trees raise
    # the predicted probability (4x odds would add ~0.2 at p = 0.5)
    p0 = dict(p, base_score=0.0)
    q_plain = bonsai.train(p0, bonsai.Dataset(X, label=y)).predict(Xt)
    q_weighted = bonsai.train(p0, bonsai.Dataset(X, label=y, weight=w)).predict(Xt)
    print(f"\n[accuracy] positives weighted x4: mean p {q_plain.mean():.4f} -> "
          f"{q_weighted.mean():.4f}")
    assert q_weighted.mean() > q_plain.mean() + 0.1
    auc = roc_auc_score(yt, weighted.predict(Xt))
    print(f"[accuracy] weighted binary, 20 rounds: AUC={auc:.5f}")
    assert auc > 0.7
    # init_score: squared error on y from the margins ``init`` is squared error on
    # y - init from 0 (same gradients), and far from a fit that starts at mean(y)
    r = {"objective": "squared_error", "n_estimators": 20, "n_threads": 2}
    with_init = bonsai.train(r, bonsai.Dataset(X, label=y, init_score=init))
    residual = bonsai.train(dict(r, base_score=0.0), bonsai.Dataset(X, label=y - init))
    without = bonsai.train(r, bonsai.Dataset(X, label=y))
    assert with_init.base_score[0] == 0.0 and without.base_score[0] == pytest.approx(y.mean())
    a, b, c = with_init.predict(X), residual.predict(X), without.predict(X)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-6)
    print(f"[accuracy] init_score: max |with - residual fit| {np.max(np.abs(a - b)):.2e}, "
          f"mean |with - without| {np.mean(np.abs(a - c)):.3f}")
    assert np.mean(np.abs(a - c)) > 0.1
