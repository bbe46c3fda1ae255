"""The CUDA backend's training on numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``,
set by conftest): its trees equal the CPU backend's bit for bit, given the same
quantized gradients (the device builder takes the host's cells), for every grower,
binary / regression / multiclass, NaN and a categorical column; the CPU fallback and
the error paths.

The simulator runs every GPU thread as a Python thread (~50 ms a block), so the data
are tiny and the trees shallow.
"""
import subprocess
import sys
import warnings

import numpy as np
import pandas as pd
import pytest

import bonsai
from bonsai.backends.cuda import FallbackWarning, TreeBuilder

pytestmark = pytest.mark.skipif(not bonsai.cuda_available(),
                                reason="needs numba-cuda (its simulator runs in CI)")

N = 150


def _frame(seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, 4))
    X[rng.random((N, 4)) < 0.1] = np.nan
    cat = rng.integers(0, 8, N)
    df = pd.DataFrame(X, columns=list("abcd"))
    df["c"] = pd.Categorical(cat)
    labels = {
        "binary": ((np.nan_to_num(X[:, 0]) + (cat % 3 == 0)) > 0.3).astype(float),
        "squared_error": np.nan_to_num(X[:, 0]) * 2 + cat * 0.3 + rng.normal(size=N) * 0.1,
        "multiclass": (cat % 3).astype(float),
    }
    return df, labels


DF, LABELS = _frame()
BASE = dict(max_depth=3, n_estimators=1, max_bin=15, min_child_samples=3,
            min_data_per_group=5, max_cat_to_onehot=4)


def _fit(device, objective, **extra):
    p = dict(BASE, objective=objective, device=device, **extra)
    if objective == "multiclass":
        p["num_class"] = 3
    return bonsai.train(p, bonsai.Dataset(DF, label=LABELS[objective], max_bin=15))


def _text(booster):
    """The model file, with the one field that names the device normalised."""
    return booster.model_to_string().replace('"device":"cuda"', '"device":"cpu"')


def _same_as_cpu(objective, **extra):
    gpu = _fit("cuda", objective, **extra)
    cpu = _fit("cpu", objective, **extra)
    assert '"device":"cuda"' in gpu.model_to_string()
    assert _text(gpu) == _text(cpu)
    return gpu


@pytest.mark.parametrize("objective", ["binary", "squared_error", "multiclass"])
@pytest.mark.parametrize("policy", ["depthwise", "leafwise", "oblivious"])
def test_trees_equal_the_cpu_backend(policy, objective, monkeypatch):
    calls = []
    orig = TreeBuilder.split
    monkeypatch.setattr(TreeBuilder, "split",
                        lambda self, *a, **k: calls.append(1) or orig(self, *a, **k))
    extra = {"grow_policy": policy}
    if policy == "leafwise":
        extra["max_leaves"] = 5
    if objective == "binary":        # a second round: gradients from the first tree's scores
        extra["n_estimators"] = 2
    model = _same_as_cpu(objective, **extra)
    sizes = [t.feature.shape[0] for t in model.trees]
    assert max(sizes) >= 3                       # real trees, not stumps of one leaf
    assert calls                                 # grown by the device builder


def test_categorical_splits_are_found_on_the_device():
    model = _same_as_cpu("binary")
    internal = [t.feature[t.feature >= 0] for t in model.trees]
    cats = [np.isnan(t.threshold[t.feature >= 0]) for t in model.trees]
    assert any(c.any() for c in cats), (internal, cats)    # column "c" (feature 4) split on


@pytest.mark.parametrize("extra", [
    {"quantized_grad": True},                              # packed cells, estimated counts
    {"reg_alpha": 0.5, "max_delta_step": 0.7},             # the non-plain gain
    {"subsample": 0.7, "colsample_bynode": 0.7},           # a sampled root, masked features
], ids=["quantized", "alpha-mds", "sampling"])
def test_settings_equal_the_cpu_backend(extra):
    _same_as_cpu("squared_error", **extra)


@pytest.mark.parametrize("nan_like", [0, 9], ids=["missing-left", "missing-right"])
@pytest.mark.parametrize("policy", ["depthwise", "oblivious"])
def test_ties_break_as_on_the_cpu(policy, nan_like):
    """Duplicated columns tie every gain between two features (the lower wins), and
    values that skip bins in the children tie a candidate with the bin after it (the
    lower bin wins), with the missing values best sent left or right."""
    rng = np.random.default_rng(5)
    b = rng.integers(0, 2, N).astype(float)
    a = 2 * rng.integers(0, 5, N) + b          # even a where b == 0, odd where b == 1
    a[rng.random(N) < 0.15] = np.nan
    y = 3 * b + (np.nan_to_num(a, nan=nan_like) > 4) + rng.normal(size=N) * 0.05
    X = np.column_stack([a, a, b, b])
    p = dict(objective="squared_error", max_depth=3, n_estimators=1, max_bin=15,
             min_child_samples=2, grow_policy=policy)
    gpu = bonsai.train(dict(p, device="cuda"), bonsai.Dataset(X, label=y, max_bin=15))
    cpu = bonsai.train(dict(p, device="cpu"), bonsai.Dataset(X, label=y, max_bin=15))
    assert _text(gpu) == _text(cpu)
    used = set(np.concatenate([t.feature[t.feature >= 0] for t in cpu.trees]).tolist())
    assert used <= {0, 2}            # the first of each pair of equal columns


def test_features_wider_than_a_tile_fill_with_global_atomics():
    """A feature with more bins than a shared-memory tile holds (the simulator's tiles
    are small): one warning, every part filled by the direct kernel, the CPU's trees."""
    from bonsai.backends.cuda import histogram
    rng = np.random.default_rng(11)
    X = rng.normal(size=(N, 2))
    y = X[:, 0] + 0.3 * rng.normal(size=N)
    p = dict(objective="squared_error", max_depth=2, n_estimators=1, max_bin=60,
             min_child_samples=3)
    ds = bonsai.Dataset(X, label=y, max_bin=60)
    assert int(np.diff(ds.bin_mapper.feat_off).max()) > histogram.TILE_EXACT
    with pytest.warns(UserWarning, match="global atomics"):
        gpu = bonsai.train(dict(p, device="cuda"), ds)
    cpu = bonsai.train(dict(p, device="cpu"), bonsai.Dataset(X, label=y, max_bin=60))
    assert _text(gpu) == _text(cpu)


def test_gpu_runs_give_the_same_bytes():
    a = _fit("cuda", "binary", subsample=0.8, max_depth=2)
    b = _fit("cuda", "binary", subsample=0.8, max_depth=2)
    assert a.model_to_string() == b.model_to_string()


def test_wide_categorical_falls_back_to_the_cpu_once():
    rng = np.random.default_rng(3)
    n = 400
    df = pd.DataFrame({"x": rng.normal(size=n),
                       "id": pd.Categorical(np.arange(n) % 300)})
    y = df["x"].to_numpy() + (df["id"].cat.codes.to_numpy() % 2)
    p = dict(objective="squared_error", max_depth=2, n_estimators=2, max_bin=400,
             min_data_per_group=1, min_child_samples=2, cat_encoding="native")
    ds = bonsai.Dataset(df, label=y, max_bin=400)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        gpu = bonsai.train(dict(p, device="cuda"), ds)
    fall = [w for w in seen if issubclass(w.category, FallbackWarning)]
    assert len(fall) == 1 and "trains on the CPU" in str(fall[0].message)
    cpu = bonsai.train(dict(p, device="cpu"), bonsai.Dataset(df, label=y, max_bin=400))
    assert _text(gpu) == _text(cpu)


@pytest.mark.parametrize("objective, extra, resident", [
    ("squared_error", {}, True),
    ("multiclass", {}, True),
    ("squared_error", {"subsample": 0.7}, False),          # out-of-bag rows: host margins
    ("squared_error", {"quantized_grad": True}, False),    # exact renewal: host gradients
    ("absolute_error", {}, False),                         # leaf renewal on the host
    ("squared_error", {"env": "1"}, False),                # BONSAI_HOST_OBJECTIVE=1
])
def test_scores_live_on_the_device_where_they_can(monkeypatch, objective, extra, resident):
    made = []
    orig = sys.modules["bonsai.backends.cuda"].scores

    def spy(*args):
        out = orig(*args)
        made.append(out.resident)
        return out
    monkeypatch.setattr(sys.modules["bonsai.backends.cuda"], "scores", spy)
    env = extra.pop("env", None)
    if env:
        monkeypatch.setenv("BONSAI_HOST_OBJECTIVE", env)
    y = LABELS.get(objective, LABELS["squared_error"])
    p = dict(BASE, objective=objective, max_depth=2, **extra)
    if objective == "multiclass":
        p["num_class"] = 3
    gpu = bonsai.train(dict(p, device="cuda"), bonsai.Dataset(DF, label=y, max_bin=15))
    cpu = bonsai.train(dict(p, device="cpu"), bonsai.Dataset(DF, label=y, max_bin=15))
    assert made == [resident]
    assert _text(gpu) == _text(cpu)


def test_several_shards_are_refused():
    from fake_comm import run_ranks
    from bonsai.backends import get_backend
    from bonsai.grow import Grower
    from bonsai._params import validate_params

    cu = get_backend("cuda")
    ds = bonsai.Dataset(DF, label=LABELS["binary"], max_bin=15)

    def rank(comm, _):
        with pytest.raises(ValueError, match="device='cuda' trains in one process"):
            Grower(cu, cu.prepare(ds), validate_params({"device": "cuda"}), 1, comm)
        return True
    assert all(run_ranks(2, rank))


def test_kernels_compile_for_the_gpu_without_fma(child_env, tmp_path):
    """The simulator runs the kernels as Python; the CUDA compiler must accept them
    too, and no float64 multiply may be contracted into an FMA (the gains would then
    differ from the CPU's in the last bit)."""
    import json
    from pathlib import Path
    env = dict(child_env, NUMBA_ENABLE_CUDASIM="0")
    r = subprocess.run([sys.executable, str(Path(__file__).with_name("_cuda_ptx_train.py"))],
                       env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    res = json.loads(r.stdout.strip().splitlines()[-1])
    if "skip" in res:
        pytest.skip(res["skip"])
    assert len(res) == 16
    assert all(v == {"fma": 0} for v in res.values()), res


NO_GPU = """
import bonsai, numpy as np
from bonsai._info import info_lines
assert not bonsai.cuda_available()
try:
    bonsai.train({"device": "cuda"}, bonsai.Dataset(np.zeros((4, 1)), label=np.zeros(4)))
except ValueError as e:
    print("ERROR", e)
print("\\n".join(l for l in info_lines() if "cuda" in l))
"""


def test_without_a_gpu_device_cuda_names_the_fix(child_env, tmp_path):
    env = dict(child_env, NUMBA_ENABLE_CUDASIM="0")
    r = subprocess.run([sys.executable, "-c", NO_GPU], env=env, capture_output=True,
                       text=True, timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "ERROR parameter 'device': device='cuda' cannot train here" in r.stdout
    assert "pip install 'bonsai-gbt[cuda]'" in r.stdout
    rows = [line for line in r.stdout.splitlines() if line.startswith("  ")]
    assert len(rows) == 3 and all("predict-only here" in line for line in rows), r.stdout


def test_estimator_with_weights_early_stopping_and_continued_training():
    """The resident scores start from the init model's margins and take the weights;
    the estimator's eval set and early stopping read the host margins of the valid
    set: all as on the CPU."""
    from bonsai import BonsaiClassifier
    rng = np.random.default_rng(2)
    X = rng.normal(size=(N, 4))
    X[rng.random((N, 4)) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) + rng.normal(size=N) * 0.5 > 0).astype(int)
    w = rng.uniform(0.5, 2, N)
    got = {}
    for dev in ("cpu", "cuda"):
        clf = BonsaiClassifier(device=dev, n_estimators=6, max_depth=2, max_bin=15,
                               early_stopping_rounds=2, learning_rate=0.5)
        clf.fit(X[:110], y[:110], sample_weight=w[:110], eval_set=[(X[110:], y[110:])])
        more = bonsai.train(dict(objective="binary", max_depth=2, n_estimators=2, max_bin=15,
                                 device=dev),
                            bonsai.Dataset(X, label=y.astype(float), max_bin=15),
                            init_model=clf.booster_)
        got[dev] = (_text(clf.booster_), clf.booster_.best_iteration, _text(more))
    assert got["cuda"] == got["cpu"]
