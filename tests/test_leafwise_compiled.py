"""Leaf-wise trees grown in one compiled call (``backends/cpu/leafwise.py``) are the
grow loop's trees: the same model bytes as the Python loop, for numeric, missing,
categorical, sparse and quantized data, with and without a depth limit."""
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp

import bonsai
import bonsai.grow as grow
from bonsai.backends.cpu import builder


def _fit(monkeypatch, compiled, data, y, **p):
    monkeypatch.setattr(grow, "LEAFWISE_COMPILED", compiled)
    calls = []
    orig = builder.TreeBuilder.grow_leafwise
    monkeypatch.setattr(builder.TreeBuilder, "grow_leafwise",
                        lambda self, *a: calls.append(1) or orig(self, *a))
    base = dict(grow_policy="leafwise", max_leaves=24, n_estimators=8, learning_rate=0.3,
                min_child_samples=5, n_threads=2)
    base.update(p)
    text = bonsai.train(base, bonsai.Dataset(data, label=y)).model_to_string()
    return text, len(calls)


def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 7))
    X[rng.random((n, 7)) < 0.15] = np.nan
    y = np.nan_to_num(X[:, 0]) + np.sin(3 * np.nan_to_num(X[:, 1])) + rng.normal(0, .3, n)
    return X, y


CASES = {
    "numeric": lambda: (*_data(), {}),
    "one-thread": lambda: (*_data(), {"n_threads": 1}),
    "depth-limited": lambda: (*_data(), {"max_depth": 4, "max_leaves": 40}),
    "binary-quantized": lambda: (_data()[0], (_data()[1] > 0).astype(float),
                                 {"objective": "binary", "quantized_grad": True}),
    "multiclass": lambda: (_data()[0], np.digitize(_data()[1], [-1, 0, 1]),
                           {"objective": "multiclass", "num_class": 4}),
    "subsample": lambda: (*_data(), {"subsample": 0.7, "reg_alpha": 0.3}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_compiled_leafwise_grows_the_loops_trees(case, monkeypatch):
    X, y, p = CASES[case]()
    loop, n0 = _fit(monkeypatch, False, X, y, **p)
    comp, n1 = _fit(monkeypatch, True, X, y, **p)
    assert n0 == 0 and n1 > 0
    assert comp == loop


def test_categorical_and_sparse(monkeypatch):
    rng = np.random.default_rng(3)
    n = 2500
    df = pd.DataFrame({"x": rng.normal(size=n), "c": pd.Categorical(rng.integers(0, 9, n))})
    y = df["x"].to_numpy() + (df["c"].cat.codes.to_numpy() % 3)
    p = {"cat_encoding": "native", "min_data_per_group": 20, "max_cat_to_onehot": 2}
    assert _fit(monkeypatch, True, df, y, **p)[0] == _fit(monkeypatch, False, df, y, **p)[0]
    S = sp.random(n, 60, density=0.05, format="csr", random_state=2)
    ys = np.asarray(S[:, :4].sum(1)).ravel()
    assert _fit(monkeypatch, True, S, ys)[0] == _fit(monkeypatch, False, S, ys)[0]


def test_column_sampling_keeps_the_python_loop(monkeypatch):
    X, y = _data(n=500)
    assert _fit(monkeypatch, True, X, y, colsample_bynode=0.5)[1] == 0


@pytest.mark.parametrize("slack", [0, 10 ** 9])
def test_pruning_every_split_or_never_keeps_the_trees(monkeypatch, slack):
    """The compiled loop's prune (``step._lw_prune``) frees only leaves never split."""
    X, y = _data(n=4000, seed=4)
    monkeypatch.setattr(grow.Grower, "PRUNE_SLACK", slack)
    p = {"max_leaves": 60}
    assert _fit(monkeypatch, True, X, y, **p)[0] == _fit(monkeypatch, False, X, y, **p)[0]
