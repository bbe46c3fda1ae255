"""The communicator seam (``bonsai.comm``): a fit over shards, each rank a thread with
a ``ThreadComm``, grows exactly the model of the one-shard fit; the staged split step
grows what the fused one does."""
import numpy as np
import pandas as pd
import pytest

import bonsai
from bonsai import comm as comm_mod
from fake_comm import run_ranks

N = 1500


@pytest.fixture(autouse=True, params=["blocks", "full"])
def _search(request, monkeypatch):
    """Every test runs twice: with the split search cut into feature blocks from the
    root on (``backends/cpu/blocks.py``), and with every rank summing every bin.
    Every staged split also sums the partitions' child counts and asserts they
    equal the counts read from the parents' splits."""
    from bonsai.backends.cpu import builder
    monkeypatch.setattr(builder, "CHECK_CHILD_ROWS", True)
    monkeypatch.setenv("BONSAI_BLOCK_BYTES", "0" if request.param == "blocks" else str(1 << 62))
    return request.param


def _data(objective, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, 6)).astype(np.float32)
    X[rng.random(N) < 0.1, 1] = np.nan
    z = X[:, 0] + 0.5 * np.nan_to_num(X[:, 1]) * X[:, 2]
    if objective == "binary":
        y = (z + 0.3 * rng.standard_normal(N) > 0).astype(np.float32)
    elif objective == "multiclass":
        y = np.digitize(z, [-0.8, 0.0, 0.8]).astype(np.float32)
    else:
        y = (z + 0.2 * rng.standard_normal(N)).astype(np.float32)
    return X, y


GROWERS = [dict(grow_policy="depthwise", max_depth=4),
           dict(grow_policy="leafwise", max_leaves=12),
           dict(grow_policy="oblivious", max_depth=4)]
OBJECTIVES = [dict(objective="binary"), dict(objective="squared_error"),
              dict(objective="multiclass", num_class=4)]


def _params(grower, objective, **extra):
    p = dict(n_estimators=6, learning_rate=0.3, subsample=0.8, colsample_bynode=0.7,
             min_child_samples=5, random_state=3, n_threads=1)
    p.update(grower)
    p.update(objective)
    p.update(extra)
    return p


def _sharded(ds, cuts):
    """The shards of ``ds`` at row offsets ``cuts`` (rank order = row order)."""
    edges = [0, *cuts, ds.n_rows]
    return [ds.subset(np.arange(a, b)) for a, b in zip(edges[:-1], edges[1:])]


def _fit_ranks(params, shards, valid=None, **kw):
    def fit(comm, r):
        vs = None if valid is None else [valid[r]]
        b = bonsai.train(params, shards[r], valid_sets=vs, _comm=comm, **kw)
        return b.model_to_string(), b.evals_result, b.best_iteration
    results, group = run_ranks(len(shards), fit)
    return results, group


@pytest.mark.parametrize("grower", GROWERS, ids=lambda g: g["grow_policy"])
@pytest.mark.parametrize("objective", OBJECTIVES, ids=lambda o: o["objective"])
def test_two_shards_grow_the_one_shard_model(grower, objective):
    X, y = _data(objective["objective"])
    ds = bonsai.Dataset(X, label=y)
    params = _params(grower, objective)
    one = bonsai.train(params, ds).model_to_string()
    results, group = _fit_ranks(params, _sharded(ds, [620]))
    assert results[0][0] == one
    assert results[1][0] == one
    assert group.calls > 0          # the ranks really exchanged


def test_three_uneven_shards_with_valid_sets_and_early_stopping():
    X, y = _data("binary", seed=1)
    ds = bonsai.Dataset(X[:1000], label=y[:1000])
    dv = bonsai.Dataset(X[1000:], label=y[1000:], reference=ds)
    params = _params(GROWERS[0], OBJECTIVES[0], n_estimators=40, learning_rate=0.5,
                     eval_metric=["auc", "logloss"], early_stopping_rounds=3)
    one = bonsai.train(params, ds, valid_sets=[dv])
    results, _ = _fit_ranks(params, _sharded(ds, [100, 650]), valid=_sharded(dv, [77, 300]))
    for text, evals, best in results:
        assert text == one.model_to_string()
        assert evals == {"valid_0": one.evals_result["valid_0"]}
        assert best == one.best_iteration
    assert one.best_iteration is not None and one.num_trees() < 40   # it stopped early


@pytest.mark.parametrize("extra", [dict(objective="absolute_error"),
                                   dict(objective="quantile", alpha=0.3),
                                   dict(objective="binary", reg_alpha=0.5, max_delta_step=0.7)],
                         ids=["l1", "quantile", "regularised"])
def test_shards_with_leaf_renewal_and_regularisation(extra):
    X, y = _data("regression" if extra["objective"] != "binary" else "binary", seed=2)
    ds = bonsai.Dataset(X, label=y)
    params = _params(GROWERS[1], extra)
    one = bonsai.train(params, ds).model_to_string()
    results, _ = _fit_ranks(params, _sharded(ds, [901]))
    assert all(r[0] == one for r in results)


def test_shards_with_native_categorical_features():
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"a": rng.standard_normal(N), "b": rng.standard_normal(N),
                       "c": pd.Categorical(rng.integers(0, 9, N)),
                       "d": pd.Categorical(rng.choice(list("pqrstu"), N))})
    y = ((df["c"].cat.codes.to_numpy() % 3 == 0) ^ (df["a"].to_numpy() > 0)).astype(np.float32)
    ds = bonsai.Dataset(df, label=y)
    for grower in GROWERS:
        params = _params(grower, OBJECTIVES[0], max_cat_to_onehot=2)
        one = bonsai.train(params, ds).model_to_string()
        results, _ = _fit_ranks(params, _sharded(ds, [555]))
        assert all(r[0] == one for r in results), grower


def _placed(ds, ranges_per_rank):
    """Shards holding arbitrary global row ranges (as a Dask worker holds the
    partitions it was given): rank r's Dataset is its ranges' rows concatenated, with
    ``global_rows`` saying where each lies."""
    shards = []
    for ranges in ranges_per_rank:
        rows = np.concatenate([np.arange(a, b) for a, b in ranges])
        if rows.size == 0:      # a rank holding none of these rows
            sub = bonsai.Dataset._stack([], ds, empty={"label": ds.label[:0]})
        else:
            sub = ds.subset(rows)
        lo = np.cumsum([0] + [b - a for a, b in ranges])[:-1]
        sub.global_rows = np.array([[l, a, b - a] for l, (a, b) in zip(lo, ranges)], np.int64)
        shards.append(sub)
    return shards


@pytest.mark.parametrize("extra", [dict(objective="binary", subsample=0.7),
                                   dict(objective="absolute_error", subsample=0.8),
                                   dict(objective="multiclass", num_class=4)],
                         ids=["binary", "l1", "multiclass"])
def test_shards_holding_any_rows_grow_the_one_shard_model(extra):
    """Rank 0 holds rows 0-299 and 900-1199, rank 1 300-899, rank 2 1200-1499 and an
    empty range; the valid set has no rows on rank 2: base score, the row sample, leaf renewal and the metrics of a valid
    set placed the same way all read global row ids, so the model is the one-shard
    model of the rows in global order."""
    X, y = _data("regression" if extra["objective"] == "absolute_error" else extra["objective"],
                 seed=6)
    ds = bonsai.Dataset(X[:1500], label=y[:1500])
    params = _params(GROWERS[1], extra, n_estimators=8, eval_metric=None)
    place = [[(0, 300), (900, 1200)], [(300, 900)], [(1200, 1500), (1500, 1500)]]
    dv = bonsai.Dataset(X[::3], label=y[::3], reference=ds)
    one = bonsai.train(params, ds, valid_sets=[dv])
    vplace = [[(0, 100), (400, 500)], [(100, 400)], [(500, 500)]]
    results, _ = _fit_ranks(params, _placed(ds, place), valid=_placed(dv, vplace))
    for text, evals, _ in results:
        assert text == one.model_to_string()
        assert evals == one.evals_result
    # the placement matters: the same shards marked consecutive grow another model
    plain = [ds.subset(np.concatenate([np.arange(a, b) for a, b in r])) for r in place]
    other, _ = _fit_ranks(params, plain, valid=_placed(dv, vplace))
    assert other[0][0] != one.model_to_string()


def test_feature_blocks_are_used_from_the_threshold_on(monkeypatch, _search):
    """With BONSAI_BLOCK_BYTES=0 every histogram batch is reduce-scattered by feature
    block (never all-reduced); with a huge threshold never."""
    import fake_comm
    calls = {"rs": 0, "sum": 0}
    rs, ar = fake_comm.ThreadComm.reduce_scatter_sum, fake_comm.ThreadComm.allreduce_sum

    def count_rs(self, parts):
        calls["rs"] += 1
        return rs(self, parts)

    def count_sum(self, a):
        if np.asarray(a).ndim == 3:      # a histogram batch (m, bins, cells)
            calls["sum"] += 1
        return ar(self, a)
    monkeypatch.setattr(fake_comm.ThreadComm, "reduce_scatter_sum", count_rs)
    monkeypatch.setattr(fake_comm.ThreadComm, "allreduce_sum", count_sum)
    X, y = _data("binary")
    ds = bonsai.Dataset(X, label=y)
    params = _params(GROWERS[0], OBJECTIVES[0])
    results, _ = _fit_ranks(params, _sharded(ds, [700]))
    assert results[0][0] == bonsai.train(params, ds).model_to_string()
    if _search == "blocks":
        assert calls["rs"] > 0 and calls["sum"] == 0
    else:
        assert calls["rs"] == 0 and calls["sum"] > 0


def test_bad_global_rows_are_refused():
    X, y = _data("binary")
    ds = bonsai.Dataset(X, label=y)
    ds.global_rows = np.array([[0, 0, 10]])
    with pytest.raises(ValueError, match="Dataset.global_rows must cover"):
        bonsai.train(_params(GROWERS[0], OBJECTIVES[0]), ds)


def test_staged_split_step_grows_the_fused_trees():
    """A one-rank ThreadComm is not LocalComm, so the builder runs the staged split
    step (separate kernel calls, collectives between them): same model as fused."""
    X, y = _data("binary", seed=5)
    ds = bonsai.Dataset(X, label=y)
    for grower in GROWERS:
        for extra in ({}, {"quantized_grad": True}):
            params = _params(grower, OBJECTIVES[0], **extra)
            one = bonsai.train(params, ds).model_to_string()
            results, _ = _fit_ranks(params, [ds])
            assert results[0][0] == one, (grower, extra)


def test_quantized_shards_agree_with_each_other():
    """Quantized mode's exact leaf sums add the shards' float sums in rank order:
    every rank builds the same model (the one-shard model may differ in the last bits
    of leaf values only)."""
    X, y = _data("binary", seed=6)
    ds = bonsai.Dataset(X, label=y)
    params = _params(GROWERS[0], OBJECTIVES[0], quantized_grad=True)
    results, _ = _fit_ranks(params, _sharded(ds, [700]))
    assert results[0][0] == results[1][0]
    one = bonsai.Booster(model_str=bonsai.train(params, ds).model_to_string())
    two = bonsai.Booster(model_str=results[0][0])
    np.testing.assert_allclose(two.predict(X), one.predict(X), rtol=1e-6, atol=1e-7)
    assert [t.feature.tolist() for t in two.trees] == [t.feature.tolist() for t in one.trees]


def test_shards_binned_differently_are_refused():
    X, y = _data("binary")
    a = bonsai.Dataset(X[:700], label=y[:700])
    b = bonsai.Dataset(X[700:], label=y[700:])      # its own bin edges
    with pytest.raises(ValueError, match="binned differently"):
        _fit_ranks(_params(GROWERS[0], OBJECTIVES[0]), [a, b])


def test_local_comm_and_bad_comm():
    assert comm_mod.check_comm(None) is comm_mod.LOCAL
    lc = comm_mod.LocalComm()
    a = np.arange(3, dtype=np.int64)
    assert lc.allreduce_sum(a) is a and lc.allreduce_max(2) == 2.0 and lc.allgather(5) == [5]
    X, y = _data("binary")
    with pytest.raises(TypeError, match="comm must implement"):
        bonsai.train({"n_estimators": 1}, bonsai.Dataset(X, label=y), _comm=object())
