"""``bonsai.plotting``: every plot renders to a PNG (Agg backend) for a Booster and for a
fitted estimator with an eval set, and the error cases raise clear errors."""
import sys

import numpy as np
import pandas as pd
import pytest

import matplotlib  # a test extra: missing fails collection, never skips
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

import bonsai  # noqa: E402
from bonsai.plotting import plot_importance, plot_metric, plot_tree  # noqa: E402
from bonsai.tree import Tree  # noqa: E402


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _data(n=240, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[rng.random(n) < 0.1, 2] = np.nan
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.2 * rng.normal(size=n) > 0).astype(float)
    return X, y


@pytest.fixture(scope="module")
def booster():
    X, y = _data()
    ds = bonsai.Dataset(X[:180], label=y[:180], feature_names=[f"col{j}" for j in range(5)])
    dv = bonsai.Dataset(X[180:], label=y[180:], reference=ds)
    return bonsai.train({"objective": "binary", "n_estimators": 8, "max_depth": 4}, ds,
                        valid_sets=[ds, dv], valid_names=["train", "valid"])


@pytest.fixture(scope="module")
def estimator():
    X, y = _data(seed=1)
    return bonsai.BonsaiClassifier(n_estimators=6, max_depth=3).fit(
        X[:180], y[:180], eval_set=[(X[180:], y[180:])])


def _save(ax, tmp_path, name):
    path = tmp_path / f"{name}.png"
    ax.figure.savefig(path)
    assert path.is_file() and path.stat().st_size > 0
    return path


def _texts(ax):
    return [t.get_text() for t in ax.texts]


def _single_leaf_booster():
    one = lambda v, dt: np.array([v], dt)  # noqa: E731
    tree = Tree(one(-1, np.int32), one(0.0, np.float64), one(-1, np.int32), one(0, np.uint8),
                one(-1, np.int32), one(-1, np.int32), one(0.25, np.float64),
                one(0.0, np.float64), one(10.0, np.float64), one(10, np.int64))
    b = bonsai.Booster()
    b.trees, b.tree_class = [tree], [0]
    b.n_outputs, b.n_features, b.feature_names = 1, 3, None
    b.base_score = np.zeros(1)
    b.objective, b.objective_params = "squared_error", {}
    b._cache = None
    b._obj = None
    return b


# ---- plot_importance -------------------------------------------------------------------

def test_plot_importance_booster(booster, tmp_path):
    imp = booster.feature_importance("gain")
    ax = plot_importance(booster)
    _save(ax, tmp_path, "imp")
    labels = [t.get_text() for t in ax.get_yticklabels()]
    nonzero = int(np.count_nonzero(imp))
    assert len(labels) == nonzero == len(ax.patches)
    assert labels[-1] == f"col{int(np.argmax(imp))}"       # the most important on top
    widths = [p.get_width() for p in ax.patches]
    assert widths == sorted(widths)
    assert ax.get_xlabel() == "Feature importance (gain)"
    ax = plot_importance(booster, importance_type="split", max_num_features=2, title=None,
                         show_values=True)
    _save(ax, tmp_path, "imp_split")
    assert len(ax.patches) == 2 and ax.get_title() == ""
    assert all(t.isdigit() for t in _texts(ax))            # split counts shown as ints


def test_plot_importance_estimator_and_given_ax(estimator, tmp_path):
    fig, ax = plt.subplots()
    out = plot_importance(estimator, ax=ax, grid=False, show_values=False, height=0.5)
    assert out is ax and not _texts(ax)
    assert all(t.get_text().startswith("f") for t in ax.get_yticklabels())
    _save(ax, tmp_path, "imp_est")


def test_plot_importance_errors(booster):
    with pytest.raises(ValueError, match="no feature"):
        plot_importance(_single_leaf_booster())
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_num_features"):
            plot_importance(booster, max_num_features=bad)
    with pytest.raises(ValueError, match="importance_type"):
        plot_importance(booster, importance_type="nonsense")
    with pytest.raises(TypeError, match="Booster"):
        plot_importance(np.zeros(3))
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        plot_importance(bonsai.BonsaiRegressor())


def test_plotting_needs_matplotlib(booster, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot_importance(booster)


# ---- plot_tree ----------------------------------------------------------------------------

def test_plot_tree_booster(booster, tmp_path):
    ax = plot_tree(booster, tree_index=1, show_info=("split_gain", "leaf_count",
                                                     "data_percentage", "internal_count"))
    _save(ax, tmp_path, "tree")
    texts = _texts(ax)
    tree = booster.trees[1]
    leaf_boxes = [t for t in texts if t.startswith("leaf ")]
    assert len(leaf_boxes) == tree.n_leaves
    assert sum("<=" in t for t in texts) == tree.n_nodes - tree.n_leaves
    assert any("missing" in t for t in texts)
    assert texts.count("yes") + texts.count("yes, missing") == tree.n_nodes - tree.n_leaves
    assert any("gain:" in t for t in texts) and any("100.0% of data" in t for t in texts)
    assert any(t.startswith("col") for t in texts)


def test_plot_tree_estimator_categorical_and_cut(tmp_path):
    rng = np.random.default_rng(4)
    n = 300
    df = pd.DataFrame({"a": rng.normal(size=n),
                       "c": pd.Categorical(rng.choice(["red", "green", "blue", "gray"], size=n))})
    y = 2.0 * df["c"].isin(["red", "blue"]) + df["a"] + 0.2 * rng.normal(size=n)
    est = bonsai.BonsaiRegressor(n_estimators=3, max_depth=4, min_data_per_group=5).fit(df, y)
    ax = plot_tree(est, tree_index=0)
    _save(ax, tmp_path, "tree_cat")
    assert any(t.startswith("c in {") for t in _texts(ax))
    ax = plot_tree(est, tree_index=2, max_depth=1, precision=1)
    _save(ax, tmp_path, "tree_cut")
    assert sum("... (" in t for t in _texts(ax)) >= 1
    assert sum(t.startswith("leaf ") for t in _texts(ax)) < est.booster_.trees[2].n_leaves


def test_plot_tree_deep_chain(tmp_path):
    depth = 120
    n = 2 * depth + 1
    left = np.full(n, -1, np.int32)
    right = np.full(n, -1, np.int32)
    for k in range(depth):
        left[2 * k], right[2 * k] = 2 * k + 1, 2 * k + 2
    tree = Tree(np.where(left >= 0, 0, -1).astype(np.int32), np.arange(n, dtype=np.float64),
                np.full(n, -1, np.int32), np.zeros(n, np.uint8), left, right,
                np.linspace(-1, 1, n), np.ones(n), np.ones(n), np.ones(n, np.int64))
    b = _single_leaf_booster()
    b.trees = [tree]
    ax = plot_tree(b, figsize=(8, 8))
    _save(ax, tmp_path, "chain")
    assert sum(t.startswith("leaf ") for t in _texts(ax)) == depth + 1


def test_plot_tree_errors(booster):
    n = booster.num_trees()
    for bad in (-1, n, "0", 1.0, True):
        with pytest.raises(ValueError, match="tree_index"):
            plot_tree(booster, tree_index=bad)
    with pytest.raises(ValueError, match="show_info"):
        plot_tree(booster, show_info=("nonsense",))
    with pytest.raises(ValueError, match="max_depth"):
        plot_tree(booster, max_depth=-1)
    with pytest.raises(ValueError, match="precision"):
        plot_tree(booster, precision=-2)


# ---- plot_metric -------------------------------------------------------------------

def test_plot_metric_booster_estimator_and_dict(booster, estimator, tmp_path):
    ax = plot_metric(booster)
    _save(ax, tmp_path, "metric")
    assert [ln.get_label() for ln in ax.get_lines()] == ["train", "valid"]
    assert len(ax.get_lines()[0].get_ydata()) == 8 and ax.get_ylabel() == "logloss"
    ax = plot_metric(booster, dataset_names=["valid"], ylabel="loss")
    assert [ln.get_label() for ln in ax.get_lines()] == ["valid"] and ax.get_ylabel() == "loss"
    ax = plot_metric(estimator)
    _save(ax, tmp_path, "metric_est")
    assert [ln.get_label() for ln in ax.get_lines()] == ["valid_0"]
    ax = plot_metric({"a": {"m1": [3, 2, 1], "m2": [1, 2]}, "b": {"m2": [5, 4]}}, metric="m2")
    _save(ax, tmp_path, "metric_dict")
    assert [ln.get_label() for ln in ax.get_lines()] == ["a", "b"]
    np.testing.assert_array_equal(ax.get_lines()[1].get_ydata(), [5, 4])


def test_plot_metric_errors(booster):
    with pytest.raises(ValueError, match="metric 'auc'"):
        plot_metric(booster, metric="auc")
    with pytest.raises(ValueError, match="dataset_names"):
        plot_metric(booster, dataset_names=["test"])
    with pytest.raises(ValueError, match="no evaluation results"):
        plot_metric({})
    with pytest.raises(ValueError, match="no evaluation results"):
        plot_metric(_single_leaf_booster())
    with pytest.raises(ValueError, match="no recorded values"):
        plot_metric({"a": {"m": []}})
    with pytest.raises(TypeError, match="dict"):
        plot_metric({"a": [1, 2]})
    with pytest.raises(TypeError, match="evals_result"):
        plot_metric([1, 2, 3])
    from sklearn.exceptions import NotFittedError
    with pytest.raises(NotFittedError):
        plot_metric(bonsai.BonsaiClassifier())
