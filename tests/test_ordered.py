"""``cat_encoding="ordered"``: CatBoost-style ordered target statistics (CTR features)
inside training, against a plain-Python reference, and their model, predictions,
combinations and determinism."""
import json

import numpy as np
import pandas as pd
import pytest

import bonsai
from bonsai.ordered import OrderedEncoding, row_keys
from bonsai._params import validate_params

GROWERS = ("depthwise", "leafwise", "oblivious")


def _data(n=6000, seed=0, pair=False):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 6, n)
    b = rng.integers(0, 30, n)
    x = rng.normal(size=n)
    eff = rng.normal(size=30)
    if pair:   # the signal is only in the pair (a, b)
        table = rng.normal(size=(6, 30)) * 2.0
        z = table[a, b] + 0.3 * x
    else:
        z = eff[b] + 0.7 * (a == 2) + 0.5 * x
    y = (z + rng.normal(size=n) > 0).astype(float)
    df = pd.DataFrame({"a": pd.Categorical(a), "b": pd.Categorical([f"v{v}" for v in b]),
                       "x": x})
    df.loc[::31, "b"] = np.nan
    return df, y


PARAMS = {"objective": "binary", "n_estimators": 12, "cat_encoding": "ordered",
          "min_child_samples": 5}


def _fit(df, y, threads=2, **kw):
    return bonsai.train(dict(PARAMS, n_threads=threads, **kw), bonsai.Dataset(df, label=y))


def test_training_columns_match_a_plain_reference():
    df, y = _data(n=300)
    p = validate_params(dict(PARAMS, ctr_permutations=3, ctr_prior_weight=2.0,
                             random_state=5))
    ds = bonsai.Dataset(df, label=y)
    enc = OrderedEncoding(ds, y, "binary", 1, p)
    g, vals = enc._train_columns((1,))
    codes = ds.cat_codes[1]
    prior = y.mean()
    want = np.zeros(len(y))
    for perm in enc.perms:
        sums, counts = {}, {}
        for i in perm:
            c = codes[i]
            if c < 0:
                want[i] += prior
                continue
            want[i] += (sums.get(c, 0.0) + 2.0 * prior) / (counts.get(c, 0) + 2.0)
            sums[c] = sums.get(c, 0.0) + y[i]
            counts[c] = counts.get(c, 0) + 1
    np.testing.assert_allclose(vals[:, 0], want / 3, rtol=1e-12)
    freq = np.array([np.sum(codes == c) if c >= 0 else 0 for c in codes]) / len(y)
    np.testing.assert_array_equal(vals[:, 1], freq)
    # the model's table: each category's full training sums and counts
    for k, key in enumerate(g.keys):
        assert g.counts[k] == np.sum(codes == key)
        assert g.sums[k, 0] == pytest.approx(y[codes == key].sum())


def test_predict_uses_full_training_statistics():
    df, y = _data(n=2000)
    b = _fit(df, y, max_ctr_combinations=0)
    ctr = b.ctr
    X = b.categories.apply(bonsai.data.to_matrix(df, with_categories=True)[0],
                           bonsai.data.to_matrix(df, with_categories=True)[2])
    ext = ctr.transform(X)
    codes = np.where(np.isnan(X[:, 1]), -1, X[:, 1]).astype(int)
    prior = y.mean()
    for i in range(0, 2000, 97):
        c = codes[i]
        rows = codes == c
        want = prior if c < 0 else (y[rows].sum() + prior) / (rows.sum() + 1.0)
        col = 3 + 2 * 1          # group of feature b: after the 3 originals and a's 2
        assert ext[i, col] == pytest.approx(want, rel=1e-12)
        assert ext[i, col + 1] == (rows.sum() / 2000 if c >= 0 else 0.0)


@pytest.fixture(scope="module", params=GROWERS)
def model(request):
    df, y = _data()
    return _fit(df, y, grow_policy=request.param), request.param


def test_ctr_features_are_used_and_importance_goes_to_their_sources(model):
    b, _ = model
    feats = np.concatenate([t.feature[t.left >= 0] for t in b.trees])
    assert (feats >= 3).any()                        # CTR features
    assert not np.isin(feats, [0, 1]).any()          # codes themselves are not split on
    imp = b.feature_importance("gain")
    assert imp.shape == (3,) and imp[0] > 0 and imp[1] > 0


def test_deterministic_at_1_and_2_threads(model, split_finely, work_log):
    """The fixture's model (default thresholds: its 6,000 rows run on one thread)
    against fits at 1 and 2 threads with the work-split thresholds lowered, which cut
    the histograms, partitions and scans between the threads (``work_log`` checks)."""
    b, policy = model
    df, y = _data()
    s = b.model_to_string()
    for n in (1, 2):
        work_log.clear()
        assert _fit(df, y, threads=n, grow_policy=policy).model_to_string() == s, n
        work_log.check_fit(n, f"ordered {policy}")


def test_shuffled_and_unseen_categories(model):
    b, _ = model
    df, _ = _data()
    p = b.predict(df)
    df2 = df.copy()
    df2["b"] = df2["b"].cat.reorder_categories(list(df2["b"].cat.categories)[::-1])
    df2["a"] = pd.Categorical(df2["a"], categories=[5, 4, 3, 2, 1, 0, 9])
    assert np.array_equal(b.predict(df2), p)
    unseen = df.head(100).copy()
    unseen["b"] = pd.Categorical(["new"] * 100)
    missing = df.head(100).copy()
    missing["b"] = np.nan
    missing["b"] = missing["b"].astype("category")
    assert np.array_equal(b.predict(unseen), b.predict(missing))


def test_model_file_and_validation_scores(model, tmp_path):
    _, policy = model
    df, y = _data()
    ds = bonsai.Dataset(df.iloc[:4000], label=y[:4000])
    dv = bonsai.Dataset(df.iloc[4000:], label=y[4000:], reference=ds)
    b = bonsai.train(dict(PARAMS, grow_policy=policy), ds, valid_sets=[dv])
    p = b.predict(df.iloc[4000:])
    yv = y[4000:]
    ref = -np.mean(yv * np.log(p) + (1 - yv) * np.log(1 - p))
    assert b.evals_result["valid_0"]["logloss"][-1] == pytest.approx(ref, rel=1e-12)
    b.save_model(tmp_path / "m.json")
    doc = json.loads((tmp_path / "m.json").read_text())
    assert doc["schema_version"] == 2 and len(doc["ctr"]["groups"]) >= 2
    b2 = bonsai.Booster(model_file=tmp_path / "m.json")
    assert np.array_equal(b2.predict(df.iloc[4000:]), p)
    assert b2.model_to_string() == b.model_to_string()


def test_pair_combination_is_added_and_helps():
    df, y = _data(n=12000, seed=2, pair=True)
    tr, te = slice(0, 8000), slice(8000, None)
    p = dict(PARAMS, n_estimators=40, max_depth=4)
    with_pairs = _fit(df.iloc[tr], y[tr], **p)
    without = _fit(df.iloc[tr], y[tr], **dict(p, max_ctr_combinations=0))
    assert (0, 1) in [g.sources for g in with_pairs.ctr.groups]
    assert len(without.ctr.groups) == 2
    from sklearn.metrics import roc_auc_score
    a1 = roc_auc_score(y[te], with_pairs.predict(df.iloc[te]))
    a0 = roc_auc_score(y[te], without.predict(df.iloc[te]))
    assert a1 > a0 + 0.01


@pytest.mark.parametrize("objective", ["multiclass", "squared_error"])
def test_multiclass_and_regression(objective, split_finely, work_log):
    df, y = _data(n=3000)
    if objective == "multiclass":
        y = (y + (df["x"].to_numpy() > 0.5)).astype(float)     # 3 classes
        extra = {"num_class": 3}
    else:
        y = y + df["x"].to_numpy()
        extra = {}
    p = dict(PARAMS, objective=objective, n_estimators=5, **extra)
    b = bonsai.train(dict(p, n_threads=2), bonsai.Dataset(df, label=y))
    work_log.check_fit(2, f"ordered {objective}")     # lowered thresholds: 2 threads
    assert b.ctr.prior.shape == ((3,) if objective == "multiclass" else (1,))
    work_log.clear()
    b1 = bonsai.train(dict(p, n_threads=1), bonsai.Dataset(df, label=y))
    work_log.check_fit(1, f"ordered {objective}")
    assert b1.model_to_string() == b.model_to_string()
    assert np.isfinite(b.predict(df)).all()


def test_ordered_without_categorical_features_is_plain_training():
    df, y = _data(n=1000)
    b = bonsai.train(dict(PARAMS, n_estimators=3), bonsai.Dataset(df[["x"]], label=y))
    assert b.ctr is None


def test_errors():
    df, y = _data(n=1000)
    b = _fit(df, y, n_estimators=2)
    with pytest.raises(ValueError, match="init_model"):
        bonsai.train(dict(PARAMS, n_estimators=2), bonsai.Dataset(df, label=y), init_model=b)
    with pytest.raises(ValueError, match="cat_encoding"):
        bonsai.train({"cat_encoding": "onehot"}, bonsai.Dataset(df, label=y))
    assert row_keys([np.array([1, -1, 2]), np.array([0, 3, -1])], [4, 5]).tolist() == [5, -1, -1]


@pytest.mark.parametrize("case", ["codes", "codes_missing", "all_missing", "wide_pairs",
                                  "one_key", "empty"])
def test_unique_keys_equals_numpy_unique(case):
    """``ordered.unique_keys`` (counting for narrow key ranges, numpy's sort for wide
    ones) gives ``np.unique(keys, return_inverse=True)``: the sorted distinct keys and
    each row's rank among them, -1 (missing) included as the smallest key."""
    from bonsai.ordered import unique_keys
    rng = np.random.default_rng(7)
    keys = {"codes": rng.integers(0, 500, 3000),
            "codes_missing": np.where(rng.random(3000) < 0.2, -1, rng.integers(0, 40, 3000)),
            "all_missing": np.full(100, -1),
            "wide_pairs": rng.integers(-1, 10 ** 9, 2000),      # past the counting range
            "one_key": np.full(50, 7),
            "empty": np.empty(0)}[case].astype(np.int64)
    uniq, dense = unique_keys(keys)
    want_u, want_d = np.unique(keys, return_inverse=True)
    assert uniq.dtype == np.int64 and dense.dtype == np.int64
    np.testing.assert_array_equal(uniq, want_u)
    np.testing.assert_array_equal(dense, want_d)
