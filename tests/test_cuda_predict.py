"""GPU batch prediction (``bonsai/backends/cuda/predict.py`` and
``Booster.predict(device=...)``) on numba's CUDA simulator: margins and leaf indices
bit-identical to the CPU predictors for every kind of model, the device copy of the
ensemble cached and dropped with the host one, row chunks, the ``device`` argument
(auto, explicit, its errors), and a GPU-trained model on a CPU-only machine.

Run under ``NUMBA_ENABLE_CUDASIM=1`` (numba's simulator: every thread a Python
thread, so the data is tiny); on a machine with a GPU the same tests run on it.
Models are trained on the CPU: a model is the same whichever device trained it.
"""
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import bonsai
from bonsai import booster as booster_module
from bonsai.backends.cpu import predict as cpu_predict
from bonsai.backends.cuda import _device
from bonsai.backends.cuda import predict as gpu
from bonsai.tree import Tree, concat

N_PRED = 70            # rows predicted: more than one block of THREADS on the simulator


def _numeric(n=300, f=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    X[rng.random((n, f)) < 0.15] = np.nan
    return X


def _fit(X, y, rounds=5, **params):
    p = {"max_depth": 3, "min_child_samples": 5, "n_threads": 1, **params}
    return bonsai.train(p, bonsai.Dataset(X, label=y), num_boost_round=rounds)


@pytest.fixture(scope="module")
def models():
    """name -> (booster, X to predict): the model kinds the GPU must reproduce."""
    X = _numeric()
    x0 = np.nan_to_num(X[:, 0], nan=1.5)
    y_bin = (x0 + 0.5 * np.nan_to_num(X[:, 1]) > 0).astype(float)
    y_reg = 2.0 * x0 + np.isnan(X[:, 2]) - np.nan_to_num(X[:, 3])
    y_cls = np.digitize(x0, [-0.4, 0.4]).astype(float)
    out = {
        "binary": (_fit(X, y_bin, objective="binary"), X[:N_PRED]),
        "regression": (_fit(X, y_reg, objective="squared_error"), X[:N_PRED]),
        "multiclass": (_fit(X, y_cls, rounds=3, objective="multiclass", num_class=3),
                       X[:N_PRED]),
        "oblivious": (_fit(X, y_reg, objective="squared_error", grow_policy="oblivious"),
                      X[:N_PRED]),
        "leafwise": (_fit(X, y_bin, objective="binary", grow_policy="leafwise",
                          max_leaves=6, max_depth=0), X[:N_PRED]),
    }
    rng = np.random.default_rng(1)
    n = 400
    c = rng.integers(0, 12, n)
    eff = rng.normal(size=12) * 2.0
    x = rng.normal(size=n)
    df = pd.DataFrame({"c": pd.Categorical([f"k{v}" for v in c]), "x": x})
    df.loc[::11, "c"] = np.nan
    df.loc[::7, "x"] = np.nan
    y = (eff[c] + 0.5 * x + 0.3 * rng.normal(size=n) > 0).astype(float)
    b = bonsai.train({"objective": "binary", "max_depth": 3, "min_child_samples": 5,
                      "min_data_per_group": 5, "max_cat_to_onehot": 2, "n_threads": 1},
                     bonsai.Dataset(df, label=y), num_boost_round=5)
    test = df.iloc[:N_PRED].copy()
    test["c"] = test["c"].cat.add_categories(["unseen"])
    test.loc[test.index[:5], "c"] = "unseen"          # unseen categories go right
    out["categorical"] = (b, test)
    return out


def _nodes_margins(b, X, t0, t1):
    """The CPU ``predict_nodes`` margins of trees ``t0:t1`` (every predictor's sums)."""
    ens, _ = b._ensemble(t0, t1)
    raw = np.empty((X.shape[0], b.n_outputs))
    raw[:] = b.base_score
    cpu_predict.predict_nodes.serial(X, ens.feature, ens.threshold, ens.default_left, ens.left,
                                     ens.right, ens.value, ens.cat_ptr, ens.cat_words,
                                     ens.tree_offset, ens.tree_class, raw)
    return raw[:, 0] if b.n_outputs == 1 else raw


@pytest.mark.parametrize("name", ["binary", "regression", "multiclass", "oblivious",
                                  "leafwise", "categorical"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_margins_and_outputs_equal_the_cpu_bit_for_bit(models, name, dtype):
    b, X = models[name]
    if isinstance(X, np.ndarray):
        X = X.astype(dtype)
    elif dtype is np.float32:   # a DataFrame becomes float64 codes: the kernels on float32 ones
        Xc = b._check_X(X).astype(np.float32)
        got = np.empty((Xc.shape[0], 1))
        got[:] = b.base_score
        gpu.predict_raw(Xc, gpu.DeviceEnsemble(b._ensemble(0, len(b.trees))[0], 1), got)
        assert np.array_equal(got[:, 0], _nodes_margins(b, Xc, 0, len(b.trees)))
        return
    for margin in (True, False):
        g = b.predict(X, output_margin=margin, device="cuda")
        c = b.predict(X, output_margin=margin, device="cpu")
        assert g.dtype == c.dtype and g.shape == c.shape
        assert np.array_equal(g, c)
    Xc = b._check_X(X)
    assert np.array_equal(b.predict(X, output_margin=True, device="cuda"),
                          _nodes_margins(b, Xc, 0, len(b.trees)))


def test_the_models_take_every_cpu_path(models):
    """The cases above cover what they claim: missing values sent both ways, a
    categorical split, an all-oblivious model (the CPU's branchless predictor), a
    numeric model on the binned heaps, three outputs."""
    ens, _ = models["regression"][0]._ensemble(0, 5)
    internal = ens.left >= 0
    assert set(ens.default_left[internal].tolist()) == {0, 1}
    assert np.isnan(models["regression"][1]).any()
    assert ens.heaps is not None
    cat, _ = models["categorical"][0]._ensemble(0, 5)
    assert cat.has_cat
    assert models["oblivious"][0]._ensemble(0, 5)[1] is not None
    assert models["multiclass"][0].n_outputs == 3


@pytest.mark.parametrize("name", ["binary", "multiclass", "categorical", "oblivious"])
def test_leaf_indices_equal_the_cpu(models, name):
    b, X = models[name]
    g = b.predict(X, pred_leaf=True, device="cuda")
    c = b.predict(X, pred_leaf=True, device="cpu")
    assert g.dtype == np.int32 and g.shape == (N_PRED, len(b.trees))
    assert np.array_equal(g, c)


@pytest.mark.parametrize("name", ["binary", "multiclass"])
def test_iteration_range(models, name):
    b, X = models[name]
    for rng in [(1, 3), (0, 1), (2, 0), (1, 1)]:
        g = b.predict(X, output_margin=True, iteration_range=rng, device="cuda")
        c = b.predict(X, output_margin=True, iteration_range=rng, device="cpu")
        assert np.array_equal(g, c), rng
        gl = b.predict(X, pred_leaf=True, iteration_range=rng, device="cuda")
        assert np.array_equal(gl, b.predict(X, pred_leaf=True, iteration_range=rng))
    t0, t1 = b._tree_range((1, 3))
    assert np.array_equal(b.predict(X, output_margin=True, iteration_range=(1, 3),
                                    device="cuda"), _nodes_margins(b, X, t0, t1))


@pytest.mark.parametrize("name", ["regression", "multiclass", "oblivious"])
def test_values_on_the_thresholds(models, name):
    """Rows whose values are the model's thresholds (and their float32 roundings,
    and the next floats either side): ``x <= threshold`` goes left, as on the CPU."""
    b, X = models[name]
    ens, _ = b._ensemble(0, len(b.trees))
    internal = np.flatnonzero(ens.left >= 0)
    rows = []
    for j in internal:
        t = ens.threshold[j]
        for v in (t, np.nextafter(t, -np.inf), np.nextafter(t, np.inf),
                  float(np.float32(t))):
            row = X[len(rows) % X.shape[0]].copy()
            row[ens.feature[j]] = v
            rows.append(row)
    T = np.array(rows)
    for dtype in (np.float64, np.float32):
        Td = T.astype(dtype)
        assert np.array_equal(b.predict(Td, output_margin=True, device="cuda"),
                              b.predict(Td, output_margin=True, device="cpu"))
        assert np.array_equal(b.predict(Td, pred_leaf=True, device="cuda"),
                              b.predict(Td, pred_leaf=True, device="cpu"))


def test_categorical_codes_at_the_edges_go_where_the_cpu_sends_them():
    """A hand-built tree: a categorical root whose set {3, 70} spans two bitset words,
    then numeric splits; codes NaN, negative, fractional, past the last word and
    huge go where ``predict_nodes`` sends them."""
    words = np.array([1 << 3, 1 << (70 - 64)], np.uint64)
    tree = Tree(feature=np.array([0, 1, 1, -1, -1, -1, -1], np.int32),
                threshold=np.array([np.nan, 0.5, -0.5, 0, 0, 0, 0]),
                bin_threshold=np.array([-1, 3, 2, 0, 0, 0, 0], np.int32),
                default_left=np.array([0, 1, 0, 0, 0, 0, 0], np.uint8),
                left=np.array([1, 3, 5, -1, -1, -1, -1], np.int32),
                right=np.array([2, 4, 6, -1, -1, -1, -1], np.int32),
                value=np.array([0, 0, 0, 0.125, -0.25, 1.5, -3.0]),
                gain=np.zeros(7), cover=np.ones(7), count=np.ones(7, np.int64),
                cat_ptr=np.array([0, 2, 2, 2, 2, 2, 2, 2], np.int64), cat_words=words)
    ens = concat([tree, tree._replace(value=tree.value * 0.5)], [0, 0])
    codes = [np.nan, -1.0, -0.5, 0.0, 3.0, 3.5, 2.999, 70.0, 70.9, 71.0, 127.0, 128.0, 1e12,
             np.inf, -np.inf]
    X = np.array([[c, v] for c in codes for v in (-1.0, 0.0, 1.0, np.nan)])
    for dtype in (np.float64, np.float32):
        Xd = np.ascontiguousarray(X.astype(dtype))
        want = np.full((Xd.shape[0], 1), 0.75)
        cpu_predict.predict_nodes.serial(Xd, ens.feature, ens.threshold, ens.default_left,
                                         ens.left, ens.right, ens.value, ens.cat_ptr,
                                         ens.cat_words, ens.tree_offset, ens.tree_class, want)
        got = np.full_like(want, 0.75)
        gpu.predict_raw(Xd, gpu.DeviceEnsemble(ens, 1), got)
        assert np.array_equal(got, want)
        leaf = np.zeros((Xd.shape[0], 2), np.int32)
        gpu.predict_leaf(Xd, gpu.DeviceEnsemble(ens, 1), leaf)
        want_leaf = np.zeros_like(leaf)
        cpu_predict.predict_leaf.serial(Xd, ens.feature, ens.threshold, ens.default_left,
                                        ens.left, ens.right, ens.cat_ptr, ens.cat_words,
                                        ens.tree_offset, want_leaf)
        assert np.array_equal(leaf, want_leaf)
        # codes 3, 3.5, 2.999 -> 2 (not in the set), 70, 70.9 reach both sides
        assert set(leaf[:, 0].tolist()) == {3, 4, 5, 6}


def test_row_chunks(models, monkeypatch):
    b, X = models["multiclass"]
    want = b.predict(X, device="cpu")
    want_leaf = b.predict(X, pred_leaf=True)
    monkeypatch.setattr(gpu, "MAX_CHUNK_ROWS", 16)        # 70 rows: 5 chunks, the last short
    assert gpu.chunk_rows(10 ** 6) == 16
    assert np.array_equal(b.predict(X, device="cuda"), want)
    assert np.array_equal(b.predict(X, pred_leaf=True, device="cuda"), want_leaf)
    monkeypatch.setattr(gpu, "MAX_CHUNK_ROWS", 1 << 20)
    row = X.shape[1] * 8 + 3 * 8                          # input + 3 outputs, float64
    monkeypatch.setattr(gpu, "MAX_CHUNK_BYTES", 7 * row)  # byte bound: 7-row chunks
    assert gpu.chunk_rows(row) == 7
    assert np.array_equal(b.predict(X, device="cuda"), want)
    monkeypatch.setattr(gpu, "MAX_CHUNK_BYTES", 1)        # never below one row
    assert gpu.chunk_rows(row) == 1
    assert np.array_equal(b.predict(X[:3], device="cuda"), want[:3])


def test_grid_strides_over_more_rows_than_threads():
    n = _device.THREADS * _device.MAX_BLOCKS + 5
    assert _device.blocks_for(n) == _device.MAX_BLOCKS     # the launch is capped...
    X = _numeric(n=n, seed=3)
    b = _fit(X, np.nan_to_num(X[:, 0]), rounds=2, objective="squared_error", max_depth=2)
    assert np.array_equal(b.predict(X, device="cuda"), b.predict(X, device="cpu"))  # ...rows not


def test_empty_inputs(models):
    b, X = models["binary"]
    with pytest.raises(ValueError, match="X is empty"):      # as on the CPU
        b.predict(X[:0], device="cuda")
    g = b.predict(X, output_margin=True, iteration_range=(2, 2), device="cuda")
    assert np.array_equal(g, np.full(N_PRED, b.base_score[0]))     # no trees: the base
    assert b.predict(X, pred_leaf=True, iteration_range=(2, 2),
                     device="cuda").shape == (N_PRED, 0)


class _Counting(gpu.DeviceEnsemble):
    made = 0

    def __init__(self, *args):
        type(self).made += 1
        super().__init__(*args)


def test_device_copy_is_cached_and_dropped_with_the_host_one(models, monkeypatch):
    b0, X = models["binary"]
    b = bonsai.Booster(model_str=b0.model_to_string())
    monkeypatch.setattr(gpu, "DeviceEnsemble", _Counting)
    _Counting.made = 0
    first = b.predict(X, device="cuda")
    b.predict(X, device="cuda")
    b.predict(X, pred_leaf=True, device="cuda")
    assert _Counting.made == 1                       # one upload for the three calls
    b.predict(X, iteration_range=(0, 2), device="cuda")
    assert _Counting.made == 2                       # another tree range: its own copy
    b.predict(X, device="cuda")
    assert _Counting.made == 3
    # more trees: the cached copy must not serve the old ensemble
    b._append(b.trees[0], b.tree_class[0])
    assert b._device is None
    grown = b.predict(X, output_margin=True, device="cuda")
    assert _Counting.made == 4
    assert np.array_equal(grown, b.predict(X, output_margin=True, device="cpu"))
    assert not np.array_equal(grown, b0.predict(X, output_margin=True))
    # reloaded: dropped, and the new trees are used
    b._load_string(b0.model_to_string())
    assert b._device is None
    assert np.array_equal(b.predict(X, device="cuda"), first)
    assert _Counting.made == 5


class _Spy:
    """Counts the CUDA predictors' calls (the auto choice is otherwise invisible: both
    devices give the same bits)."""

    def __init__(self, monkeypatch):
        self.calls = []
        for name in ("predict_raw", "predict_leaf"):
            real = getattr(gpu, name)
            monkeypatch.setattr(gpu, name, self._wrap(name, real))

    def _wrap(self, name, real):
        def call(*args):
            self.calls.append(name)
            return real(*args)
        return call


def test_auto_device(models, monkeypatch):
    b0, X = models["binary"]
    b = bonsai.Booster(model_str=b0.model_to_string())
    spy = _Spy(monkeypatch)
    want = b.predict(X, device="cpu")
    monkeypatch.setattr(booster_module, "GPU_PREDICT_MIN_ROWS", 50)
    assert np.array_equal(b.predict(X), want)
    assert spy.calls == []                            # trained on the CPU: CPU
    b.params["device"] = "cuda"                       # as recorded by a GPU fit
    assert np.array_equal(b.predict(X), want)
    assert np.array_equal(b.predict(X, pred_leaf=True), b.predict(X, pred_leaf=True,
                                                                  device="cpu"))
    assert spy.calls == ["predict_raw", "predict_leaf"]
    spy.calls.clear()
    assert np.array_equal(b.predict(X[:49]), want[:49])   # a small batch: CPU
    b.predict(X, device="cpu")                            # forced
    b.predict(X, pred_contribs=True)                      # SHAP: CPU
    assert spy.calls == []
    monkeypatch.setattr(booster_module, "GPU_PREDICT_MIN_ROWS", 100_000)
    b.predict(X)
    assert spy.calls == []


def test_sklearn_estimators_predict_through_the_auto_device(monkeypatch):
    X = _numeric(n=200, seed=5)
    y = np.digitize(np.nan_to_num(X[:, 0]), [-0.3, 0.3])
    clf = bonsai.BonsaiClassifier(n_estimators=3, max_depth=2, min_child_samples=5,
                                  n_threads=1).fit(X, y)
    want_p, want = clf.predict_proba(X[:N_PRED]), clf.predict(X[:N_PRED])
    spy = _Spy(monkeypatch)
    monkeypatch.setattr(booster_module, "GPU_PREDICT_MIN_ROWS", 10)
    clf.booster_.params["device"] = "cuda"
    assert np.array_equal(clf.predict_proba(X[:N_PRED]), want_p)
    assert np.array_equal(clf.predict(X[:N_PRED]), want)
    assert spy.calls == ["predict_raw", "predict_raw"]


@pytest.mark.parametrize("bad,err,words", [
    ("gpu", ValueError, ["device='gpu'", "'cpu'", "'cuda'"]),
    ("CUDA", ValueError, ["device='CUDA'"]),
    ("", ValueError, ["device=''"]),
    (0, TypeError, ["device", "0"]),
    (True, TypeError, ["device", "True"]),
])
def test_bad_device_values(models, bad, err, words):
    b, X = models["binary"]
    with pytest.raises(err) as e:
        b.predict(X, device=bad)
    assert all(w in str(e.value) for w in words), str(e.value)


def test_shap_on_the_gpu_is_refused(models):
    b, X = models["binary"]
    for kw in ({"pred_contribs": True}, {"pred_interactions": True}):
        with pytest.raises(ValueError, match="SHAP.*CPU only.*device='cpu'"):
            b.predict(X, device="cuda", **kw)
    assert b.predict(X[:3], pred_contribs=True, device="cpu").shape == (3, X.shape[1] + 1)


_CPU_ONLY_CHILD = r"""
import json, sys
import numpy as np
import bonsai
from bonsai import booster as bm
from numba import cuda
assert not cuda.is_available()
b = bonsai.Booster(model_file=sys.argv[1])
assert b.params["device"] == "cuda"
rng = np.random.default_rng(7)
X = rng.normal(size=(bm.GPU_PREDICT_MIN_ROWS, 4))
X[::5, 2] = np.nan
p = b.predict(X)                          # auto: falls back to the CPU here
np.save(sys.argv[2], p)
try:
    b.predict(X[:10], device="cuda")
    err = None
except ValueError as e:
    err = str(e)
print(json.dumps({"error": err, "cuda_imported": "bonsai.backends.cuda.predict" in sys.modules}))
"""


def test_gpu_trained_model_predicts_on_a_cpu_only_machine(models, tmp_path, child_env):
    b0, _ = models["binary"]
    b = bonsai.Booster(model_str=b0.model_to_string())
    b.params["device"] = "cuda"               # what a fit with device="cuda" records
    path = tmp_path / "gpu_model.json"
    b.save_model(path)
    assert json.loads(path.read_text())["params"]["device"] == "cuda"
    script = tmp_path / "child.py"
    script.write_text(_CPU_ONLY_CHILD)
    env = dict(child_env, NUMBA_ENABLE_CUDASIM="0", CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, str(script), str(path), str(tmp_path / "p.npy")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    rng = np.random.default_rng(7)
    X = rng.normal(size=(booster_module.GPU_PREDICT_MIN_ROWS, 4))
    X[::5, 2] = np.nan
    assert np.array_equal(np.load(tmp_path / "p.npy"), b.predict(X, device="cpu"))
    assert not out["cuda_imported"]
    err = out["error"]
    assert err is not None
    for words in ("device='cuda' cannot predict here", "is_available() is False",
                  "pip install", "device='cpu'"):
        assert words in err, err
