"""Vector leaves (``multi_strategy="multi_output_tree"``): training.

One tree per round whose nodes hold K values, grown over K-output integer cells
(``backends/cpu/multi_*``).  Checked here: the root's gain, split and leaf values
against a NumPy reference; identical trees at 1 and 2 threads for every grower (with
the parallel thresholds lowered so the parallel kernels run on small data); the
training margins equal the predictions of the equivalent one-output-per-tree model;
accuracy against one tree per class; the clear errors.
"""
import hashlib

import numpy as np
import pytest

import bonsai
from bonsai.backends.cpu import multi_builder
from bonsai.booster import Booster

K = 3


def _data(n=1500, f=5, seed=0, nan=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    X[rng.random((n, f)) < nan] = np.nan
    s = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) ** 2 + rng.normal(0, .5, n)
    y = np.digitize(s, [0.0, 1.0])
    return X, y


def _params(**kw):
    p = {"objective": "multiclass", "num_class": K, "multi_strategy": "multi_output_tree",
         "n_estimators": 8, "learning_rate": 0.3}
    p.update(kw)
    return p


def _expanded(b):
    """The one-output-per-tree model of vector model ``b``: round r holds tree r's K
    scalar trees."""
    out = Booster()
    out.__dict__.update({k: v for k, v in b.__dict__.items()})
    out.multi_strategy = "one_output_per_tree"
    trees = list(b.trees)
    out.trees, out.tree_class = [], []
    for t in trees:
        for k in range(b.n_outputs):
            out.trees.append(t._replace(value=np.ascontiguousarray(t.value[:, k])))
            out.tree_class.append(k)
    out._cache = out._device = None
    return out


def _tree_hash(b):
    h = hashlib.sha256()
    for t in b.trees:
        for name in ("feature", "threshold", "bin_threshold", "default_left", "left", "right",
                     "value", "gain", "cover", "count"):
            h.update(np.ascontiguousarray(getattr(t, name)).tobytes())
        if t.cat_ptr is not None:
            h.update(t.cat_ptr.tobytes() + t.cat_words.tobytes())
    return h.hexdigest()


def test_root_split_and_leaves_equal_numpy_reference():
    X, y = _data(n=400, f=3, nan=0.15)
    ds = bonsai.Dataset(X, label=y, max_bin=16)
    lam = 0.7
    b = bonsai.train(_params(n_estimators=1, max_depth=1, learning_rate=1.0, reg_lambda=lam,
                             min_child_samples=1, min_child_weight=0.0), ds)
    tree = b.trees[0]
    assert tree.value.shape == (3, K)
    # gradients of softmax at the base score, in float32 as the objective writes them
    p = np.exp(b.base_score - b.base_score.max())
    p /= p.sum()
    onehot = np.eye(K)[y]
    g = (np.broadcast_to(p, (len(y), K)) - onehot).astype(np.float32).astype(np.float64)
    obj = bonsai.objectives.get_objective("multiclass", {"num_class": K})
    grad = np.empty((K, len(y)), np.float32)
    hess = np.empty((K, len(y)), np.float32)
    raw = np.repeat(b.base_score[:, None], len(y), axis=1)
    obj.grad_hess(y, raw, None, grad, hess)
    g = grad.T.astype(np.float64)
    h = hess.T.astype(np.float64)
    bins = ds.X_cols
    bm = ds.bin_mapper

    def score(G, H):
        return np.sum(G * G / (H + lam))

    best = (-np.inf, None)
    parent = score(g.sum(0), h.sum(0))
    for f in range(X.shape[1]):
        nv = int(bm.n_value_bins[f])
        miss = bins[f] == bm.missing_bin[f]
        for bb in range(nv):
            for dl in (0, 1):
                left = (bins[f] <= bb) & ~miss
                if dl:
                    left |= miss
                if dl and not miss.any():
                    continue
                if left.all() or not left.any():
                    continue
                gain = score(g[left].sum(0), h[left].sum(0)) + score(
                    g[~left].sum(0), h[~left].sum(0)) - parent
                if gain > best[0] * (1 + 1e-12) + 1e-12:
                    best = (gain, (f, bb, dl), left)
    gain, (f, bb, dl), left = best
    assert tree.feature[0] == f and tree.bin_threshold[0] == bb and tree.default_left[0] == dl
    np.testing.assert_allclose(tree.gain[0], gain, rtol=1e-9)
    for child, rows in ((tree.left[0], left), (tree.right[0], ~left)):
        want = -g[rows].sum(0) / (h[rows].sum(0) + lam)
        np.testing.assert_allclose(tree.value[child], want, rtol=1e-9, atol=1e-12)
        assert tree.count[child] == rows.sum()
        np.testing.assert_allclose(tree.cover[child], h[rows].sum(), rtol=1e-9)


@pytest.fixture
def parallel_everywhere(monkeypatch):
    """The vector builder's parallel paths on small data."""
    monkeypatch.setattr(multi_builder, "MIN_TASK_ROWS", 16)
    monkeypatch.setattr(multi_builder, "MIN_PARALLEL_CELLS", 0)


@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
def test_identical_trees_at_1_and_2_threads(policy, parallel_everywhere):
    X, y = _data(n=2000, f=6, seed=3)
    Xc = X.copy()
    Xc[:, 5] = np.floor(np.abs(np.nan_to_num(X[:, 5])) * 3) % 7   # a categorical column
    ds = bonsai.Dataset(Xc, label=y, categorical_features=[5])
    kw = dict(grow_policy=policy, subsample=0.8, colsample_bynode=0.8 if policy != "oblivious"
              else 1.0, min_data_per_group=5, max_cat_to_onehot=2)
    m1 = bonsai.train(_params(n_threads=1, **kw), ds)
    m2 = bonsai.train(_params(n_threads=2, **kw), ds)
    m2b = bonsai.train(_params(n_threads=2, **kw), ds)
    assert _tree_hash(m1) == _tree_hash(m2) == _tree_hash(m2b)
    assert m1.model_to_string() == m2.model_to_string() == m2b.model_to_string()


@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
def test_training_margins_are_the_expanded_models_predictions(policy):
    X, y = _data(n=1200, seed=5)
    ds = bonsai.Dataset(X, label=y)
    Xv, yv = _data(n=300, seed=6)
    dv = bonsai.Dataset(Xv, label=yv, reference=ds)
    b = bonsai.train(_params(grow_policy=policy, subsample=0.7, eval_metric=["mlogloss"]), ds,
                     valid_sets=[dv])
    assert all(t.value.shape[1] == K for t in b.trees) and len(b.trees) == 8
    ref = _expanded(b)
    pred = ref.predict(Xv)
    assert np.array_equal(b.predict(Xv), pred)
    assert np.array_equal(b.predict(Xv, output_margin=True), ref.predict(Xv, output_margin=True))
    logloss = -np.mean(np.log(pred[np.arange(len(yv)), yv]))
    assert b.evals_result["valid_0"]["mlogloss"][-1] == pytest.approx(logloss, rel=1e-12)


def test_vector_leaves_learn_as_well_as_one_tree_per_class():
    X, y = _data(n=3000, seed=7)
    Xt, yt = _data(n=2000, seed=8)
    ds = bonsai.Dataset(X, label=y)
    out = {}
    for strategy in ("multi_output_tree", "one_output_per_tree"):
        b = bonsai.train(_params(multi_strategy=strategy, n_estimators=40, learning_rate=0.1),
                         ds)
        m = b if strategy == "one_output_per_tree" else _expanded(b)
        p = m.predict(Xt)
        out[strategy] = -np.mean(np.log(p[np.arange(len(yt)), yt]))
    base = -np.mean(np.log(np.bincount(y, minlength=K)[yt] / len(y)))
    assert out["multi_output_tree"] < 0.75 * base
    assert out["multi_output_tree"] < out["one_output_per_tree"] + 0.03


def test_clear_errors():
    X, y = _data(n=200)
    ds = bonsai.Dataset(X, label=(y > 0).astype(float))
    with pytest.raises(ValueError, match="needs an objective with several"):
        bonsai.train({"objective": "binary", "multi_strategy": "multi_output_tree",
                      "n_estimators": 2}, ds)
    ds3 = bonsai.Dataset(X, label=y)
    with pytest.raises(ValueError, match="quantized_grad"):
        bonsai.train(_params(quantized_grad=True), ds3)
    one = bonsai.train({"objective": "multiclass", "num_class": K, "n_estimators": 2}, ds3)
    with pytest.raises(ValueError, match="init_model"):
        bonsai.train(_params(n_estimators=2), ds3, init_model=one)
    with pytest.raises(ValueError, match="multi_strategy"):
        bonsai.train(_params(multi_strategy="vector"), ds3)
    assert isinstance(one, Booster)


@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
def test_csr_input_grows_the_dense_trees(policy):
    import scipy.sparse as sp
    rng = np.random.default_rng(1)
    X = sp.random(2000, 40, density=0.1, format="csr", random_state=1,
                  data_rvs=lambda k: rng.integers(1, 5, k).astype(float))
    y = (np.asarray(X[:, :3].sum(1)).ravel() * 2).astype(int) % K
    p = _params(grow_policy=policy, min_child_samples=5)
    assert (_tree_hash(bonsai.train(p, bonsai.Dataset(X, label=y)))
            == _tree_hash(bonsai.train(p, bonsai.Dataset(X.toarray(), label=y))))


@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
def test_two_shards_grow_the_one_shard_trees(policy):
    from fake_comm import run_ranks
    X, y = _data(n=1400, seed=11)
    ds = bonsai.Dataset(X, label=y)
    p = _params(grow_policy=policy, subsample=0.8, n_threads=1, min_child_samples=5)
    one = _tree_hash(bonsai.train(p, ds))
    shards = [ds.subset(np.arange(0, 600)), ds.subset(np.arange(600, 1400))]
    results, group = run_ranks(2, lambda comm, r: _tree_hash(
        bonsai.train(p, shards[r], _comm=comm)))
    assert results == [one, one] and group.calls > 0


def test_cuda_device_trains_vector_leaves_on_the_cpu_with_a_warning():
    from bonsai.backends.cuda import FallbackWarning
    X, y = _data(n=500, seed=12)
    ds = bonsai.Dataset(X, label=y)
    cpu = bonsai.train(_params(n_estimators=3), ds)
    with pytest.warns(FallbackWarning, match="multi_output_tree"):
        gpu = bonsai.train(_params(n_estimators=3, device="cuda"), ds)
    assert _tree_hash(gpu) == _tree_hash(cpu)


def _same_trees(vec, one):
    assert len(vec.trees) == len(one.trees)
    for a, b in zip(vec.trees, one.trees):
        assert a.value.shape == (b.n_nodes, 1)
        for name in ("feature", "threshold", "bin_threshold", "default_left", "left", "right",
                     "gain", "cover", "count"):
            assert np.array_equal(getattr(a, name), getattr(b, name),
                                  equal_nan=name == "threshold"), name
        assert np.array_equal(a.value[:, 0], b.value)
        assert (a.cat_ptr is None) == (b.cat_ptr is None)
        if a.cat_ptr is not None:
            assert np.array_equal(a.cat_words, b.cat_words)


@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
@pytest.mark.parametrize("objective", ["multi_squared_error", "multilabel_binary"])
def test_one_output_gives_the_single_output_trees(policy, objective, parallel_everywhere):
    """K = 1 vector leaves grow exactly the single-output path's trees (numeric,
    missing and categorical splits; reg_alpha and max_delta_step too)."""
    X, y = _data(n=2500, f=6, seed=21)
    X[:, 5] = np.floor(np.abs(np.nan_to_num(X[:, 5])) * 4) % 9
    effect = np.array([0.0, 1.5, -1.0, 2.0, 0.5, -2.0, 1.0, 0.0, -0.5])[X[:, 5].astype(int)]
    if objective == "multilabel_binary":
        label, single = (y + effect > 0.5).astype(float), "binary"
    else:
        label, single = y + 0.3 * X[:, 2] ** 2 + effect, "squared_error"
    label = np.nan_to_num(label)
    ds = bonsai.Dataset(X, label=label, categorical_features=[5])
    for extra in ({}, {"reg_alpha": 0.5, "max_delta_step": 0.8, "min_child_weight": 2.0}):
        p = dict(grow_policy=policy, n_estimators=6, learning_rate=0.3, subsample=0.9,
                 min_data_per_group=10, max_cat_to_onehot=3, n_threads=2, **extra)
        vec = bonsai.train(dict(p, objective=objective, multi_strategy="multi_output_tree"), ds)
        one = bonsai.train(dict(p, objective=single), ds)
        assert any(t.cat_ptr is not None for t in one.trees) or policy == "oblivious"
        _same_trees(vec, one)


@pytest.mark.parametrize("objective", ["multiclass", "multi_squared_error",
                                       "multilabel_binary"])
def test_trained_models_round_trip_in_a_fresh_process(objective, tmp_path):
    import pickle
    import subprocess
    import sys
    X, y = _data(n=800, seed=31)
    if objective == "multiclass":
        label, extra = y, {"num_class": K}
    elif objective == "multi_squared_error":
        label, extra = np.stack([y, np.nan_to_num(X[:, 2]), y * 0.5 - 1], 1), {}
    else:
        label, extra = np.stack([y == 0, y == 1, y == 2, y > 0], 1).astype(float), {}
    params = _params(objective=objective, **extra)
    if objective != "multiclass":
        params.pop("num_class")
    b = bonsai.train(params, bonsai.Dataset(X, label=label))
    assert b.multi_strategy == "multi_output_tree" and len(b.trees) == 8
    pred = b.predict(X)
    contrib = b.predict(X, pred_contribs=True)
    assert contrib.shape == (X.shape[0], b.n_outputs, X.shape[1] + 1)
    np.testing.assert_allclose(contrib.sum(-1), b.predict(X, output_margin=True), atol=1e-9)
    path = tmp_path / "m.json"
    b.save_model(path)
    np.save(tmp_path / "X.npy", X)
    code = ("import numpy as np, bonsai, sys; b = bonsai.Booster(model_file=sys.argv[1]); "
            "np.save(sys.argv[2], b.predict(np.load(sys.argv[3])))")
    subprocess.run([sys.executable, "-c", code, str(path), str(tmp_path / "p.npy"),
                    str(tmp_path / "X.npy")], check=True, timeout=300)
    assert np.array_equal(np.load(tmp_path / "p.npy"), pred)
    assert np.array_equal(pickle.loads(pickle.dumps(b)).predict(X), pred)
    assert bonsai.Booster(model_str=b.model_to_string()).model_to_string() == b.model_to_string()


@pytest.mark.parametrize("policy", ["depthwise", "leafwise"])
def test_same_model_as_xgboost_multi_output_tree_on_exactly_binned_data(policy):
    """With features of fewer distinct values than bins, bonsai and XGBoost bin alike
    (one bin per value), so the two multi_output_tree trainers must grow the same
    trees: the same split gain summed over outputs, missing-value direction, leaf
    vectors -G_k / (H_k + lambda) and depth-wise / loss-guided order.  20 rounds of
    K = 3 targets with 10% NaN agree to float32 rounding (XGBoost keeps float32)."""
    import xgboost as xgb
    rng = np.random.default_rng(1)
    n, f = 4000, 6
    X = rng.integers(0, 30, size=(n, f)).astype(np.float32)
    X[rng.random((n, f)) < 0.1] = np.nan
    S = np.column_stack([np.sin(np.nan_to_num(X[:, 0], nan=15.0) / 5),
                         (np.nan_to_num(X[:, 1]) > 12) * np.nan_to_num(X[:, 2]) / 10])
    Y = S @ rng.normal(size=(2, K)) + 0.3 * rng.standard_normal((n, K))
    Y -= Y.mean(axis=0)        # both intercepts ~0, whatever XGBoost's base_score rule
    bp = dict(objective="multi_squared_error", multi_strategy="multi_output_tree",
              learning_rate=0.3, reg_lambda=1.0, min_child_samples=1, min_child_weight=0.0,
              n_threads=2)
    xp = dict(tree_method="hist", multi_strategy="multi_output_tree", eta=0.3,
              reg_lambda=1.0, min_child_weight=0.0, max_bin=256, nthread=2,
              objective="reg:squarederror", base_score=0.0)
    if policy == "depthwise":
        bp.update(grow_policy="depthwise", max_depth=4)
        xp.update(max_depth=4)
    else:
        bp.update(grow_policy="leafwise", max_leaves=12, max_depth=0)
        xp.update(grow_policy="lossguide", max_leaves=12, max_depth=0)
    b = bonsai.train(bp, bonsai.Dataset(X, label=Y), num_boost_round=20)
    xb = xgb.train(xp, xgb.DMatrix(X, label=Y), num_boost_round=20)
    p, q = b.predict(X), xb.inplace_predict(X)
    assert p.shape == q.shape == (n, K)
    np.testing.assert_allclose(p, q, rtol=0, atol=1e-5)
    # and the trees are not trivial: 20 rounds took the training error well down
    assert np.sqrt(((p - Y) ** 2).mean()) < 0.8 * np.sqrt((Y ** 2).mean())


@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
def test_shared_hessian_cells_grow_the_paired_cells_trees(policy, parallel_everywhere,
                                                          monkeypatch):
    """``multi_squared_error``'s hessians are the same for every output, so its cells
    keep one hessian column (K + 1 a row, not 2K): the same integers in fewer
    columns, so the same model bytes as the 2K layout, with weights, NaN, categorical
    splits and row sampling, at 1 and 2 threads."""
    from bonsai.backends.cpu.multi_builder import MultiTreeBuilder
    from bonsai.multi_objectives import get_multi_objective
    X, _ = _data(n=2000, f=6, seed=8)
    X[:, 5] = np.floor(np.abs(np.nan_to_num(X[:, 5])) * 3) % 7
    rng = np.random.default_rng(8)
    Y = np.column_stack([np.nan_to_num(X[:, 0]) + X[:, 5], np.nan_to_num(X[:, 1]) ** 2,
                         -np.nan_to_num(X[:, 2]), np.sin(np.nan_to_num(X[:, 3]))])
    Y = Y + rng.normal(0, 0.3, Y.shape)
    w = rng.uniform(0.5, 2.0, Y.shape[0])
    ds = bonsai.Dataset(X, label=Y, weight=w, categorical_features=[5])
    p = dict(objective="multi_squared_error", multi_strategy="multi_output_tree",
             n_estimators=6, learning_rate=0.3, grow_policy=policy, subsample=0.8,
             min_data_per_group=5, max_cat_to_onehot=2)
    if policy == "leafwise":
        p["max_leaves"] = 8
    channels = []
    real_init = MultiTreeBuilder.__init__

    def spy(self, *a, **kw):
        real_init(self, *a, **kw)
        channels.append(self.n_chan)

    monkeypatch.setattr(MultiTreeBuilder, "__init__", spy)
    shared = [bonsai.train(dict(p, n_threads=t), ds).model_to_string() for t in (1, 2)]
    assert channels == [5, 5]                       # K + 1: one hessian column
    obj = type(get_multi_objective("multi_squared_error"))
    monkeypatch.setattr(obj, "hessian_shared", False)
    paired = bonsai.train(dict(p, n_threads=2), ds).model_to_string()
    assert channels == [5, 5, 8]                    # 2K
    assert shared[0] == shared[1] == paired
