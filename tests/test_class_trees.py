"""A round's class trees grown side by side on small data (``bonsai.class_trees``):
the same model bytes as growing them in turn, at any thread count and for every
grower; used only where it applies; a worker's error reaches the caller."""
import numpy as np
import pytest

import bonsai
from bonsai import class_trees, rounds


def _data(n=3000, f=12, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, f))
    X[rng.random(X.shape) < 0.05] = np.nan
    s = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 1]) ** 2 + rng.normal(0, .5, n)
    return X, np.digitize(s, [-0.5, 0.3, 1.0, 2.0])


@pytest.fixture
def side_calls(monkeypatch):
    """Worker counts of every side-by-side round."""
    calls = []
    real = rounds.grow_side_by_side

    def spy(growers, k_out, grow_class):
        calls.append(len(growers))
        return real(growers, k_out, grow_class)

    monkeypatch.setattr(rounds, "grow_side_by_side", spy)
    return calls


@pytest.mark.filterwarnings("ignore:n_threads=3 exceeds")
@pytest.mark.parametrize("policy", ["leafwise", "depthwise", "oblivious"])
def test_side_by_side_trees_are_the_trees_grown_in_turn(policy, side_calls, monkeypatch):
    X, y = _data()
    Xv, yv = _data(n=400, seed=1)
    p = dict(objective="multiclass", num_class=5, grow_policy=policy, n_estimators=12,
             learning_rate=0.2, subsample=0.8, random_state=3)
    if policy == "leafwise":
        p.update(max_leaves=15, colsample_bynode=0.7)
    else:
        p.update(max_depth=4)

    def fit(threads):
        return bonsai.train(dict(p, n_threads=threads), bonsai.Dataset(X, label=y),
                            valid_sets=[bonsai.Dataset(Xv, label=yv)],
                            callbacks=[bonsai.EarlyStopping(50)]).model_to_string()

    side2, side3 = fit(2), fit(3)        # 3 threads: 3 workers where 3 cores are lent
    assert len(side_calls) == 24 and side_calls[:12] == [2] * 12 and min(side_calls) >= 2
    monkeypatch.setattr(class_trees, "ENABLED", False)
    n_before = len(side_calls)
    in_turn = [fit(1), fit(2)]
    assert len(side_calls) == n_before          # switched off: never side by side
    assert side2 == side3 == in_turn[0] == in_turn[1]


def test_only_where_it_applies(side_calls):
    X, y = _data(n=2500)
    base = dict(objective="multiclass", num_class=5, n_estimators=3)
    bonsai.train(dict(base, n_threads=1), bonsai.Dataset(X, label=y))
    bonsai.train(dict(base, n_threads=2, multi_strategy="multi_output_tree"),
                 bonsai.Dataset(X, label=y))
    bonsai.train(dict(objective="binary", n_estimators=3, n_threads=2),
                 bonsai.Dataset(X, label=(y > 1).astype(float)))
    assert side_calls == []
    bonsai.train(dict(base, n_threads=2), bonsai.Dataset(X, label=y))
    assert side_calls == [2, 2, 2]


def test_side_by_side_where_one_tree_would_cut_its_rows(side_calls, monkeypatch):
    """Up to ``MAX_SIDE_ROWS`` rows the class trees go side by side even where one
    tree's split step would run on both threads (the thresholds lowered so that 3000
    rows are cut), with the model bytes of the trees grown in turn; above it they are
    grown in turn."""
    from bonsai.backends import cpu
    monkeypatch.setattr(cpu, "MIN_ROWS_PER_THREAD", 64)
    assert cpu.thread_plan(3000, 100, 2) is not None
    X, y = _data()
    p = dict(objective="multiclass", num_class=5, n_estimators=6, grow_policy="leafwise",
             max_leaves=15)

    def fit(threads):
        return bonsai.train(dict(p, n_threads=threads),
                            bonsai.Dataset(X, label=y)).model_to_string()

    side = fit(2)
    assert side_calls == [2] * 6
    monkeypatch.setattr(class_trees, "MAX_SIDE_ROWS", 2999)
    in_turn = fit(2)
    assert side_calls == [2] * 6                # 3000 rows > MAX_SIDE_ROWS: in turn
    assert side == in_turn == fit(1)


def test_a_workers_error_reaches_the_caller(monkeypatch):
    """An error on a worker thread is raised by ``train`` after every worker is done."""
    from bonsai.grow import Grower
    X, y = _data(n=2000)
    real = Grower.grow

    def grow(self, *a):
        if getattr(self, "_side", None) is None and self.n_threads == 1:
            raise RuntimeError("planted failure on a side grower")
        return real(self, *a)

    monkeypatch.setattr(Grower, "grow", grow)
    with pytest.raises(RuntimeError, match="planted failure"):
        bonsai.train(dict(objective="multiclass", num_class=4, n_estimators=3, n_threads=2),
                     bonsai.Dataset(X, label=np.minimum(y, 3)))
