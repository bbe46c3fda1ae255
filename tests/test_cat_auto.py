"""``cat_encoding="auto"`` (the default): ordered target statistics for id-like
categorical features, native category-set splits for the others
(``bonsai.ordered.auto_ctr_features``)."""
import numpy as np
import pandas as pd
import pytest

import bonsai
from bonsai.ordered import auto_ctr_features


def _frame(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.integers(0, 400, n)                     # ~7 rows a category: id-like
    low = rng.integers(0, 4, n)                       # 4 categories of ~750 rows
    eff = rng.normal(0, 1, 400)
    x = rng.normal(size=n)
    y = eff[ids] + np.array([0.0, 1.0, -1.0, 2.0])[low] + x + rng.normal(0, .3, n)
    df = pd.DataFrame({"x": x, "id": pd.Categorical(ids), "low": pd.Categorical(low)})
    return df, y


P = {"n_estimators": 20, "learning_rate": 0.2, "grow_policy": "leafwise", "max_leaves": 15,
     "min_data_per_group": 50}


def test_the_rule_picks_id_like_features():
    df, y = _frame()
    ds = bonsai.Dataset(df, label=y)
    assert auto_ctr_features(ds, 50, 255) == [1]
    assert auto_ctr_features(ds, 1000, 255) == [1, 2]   # no category has 1000 rows
    few = bonsai.Dataset(df[["x", "low"]], label=y)
    assert auto_ctr_features(few, 50, 255) == []


def test_auto_mixes_native_splits_and_target_statistics(tmp_path):
    full, yy = _frame(n=5000)
    df, y, dt, yt = full.iloc[:3000], yy[:3000], full.iloc[3000:], yy[3000:]
    b = bonsai.train(P, bonsai.Dataset(df, label=y))       # the default: auto
    assert b.ctr is not None and [g.sources for g in b.ctr.groups] == [(1,)]
    used = {int(f) for t in b.trees for f in t.feature[t.left >= 0]}
    native_low = any(t.is_categorical().any() and 2 in set(t.feature[t.is_categorical()])
                     for t in b.trees)
    assert native_low and any(f >= df.shape[1] for f in used)   # both kinds split on
    ordered = bonsai.train(dict(P, cat_encoding="ordered"), bonsai.Dataset(df, label=y))
    native = bonsai.train(dict(P, cat_encoding="native"), bonsai.Dataset(df, label=y))
    rmse = {k: float(np.sqrt(np.mean((m.predict(dt) - yt) ** 2)))
            for k, m in (("auto", b), ("ordered", ordered), ("native", native))}
    assert rmse["auto"] < rmse["native"]
    path = tmp_path / "m.json"
    b.save_model(path)
    again = bonsai.Booster(model_file=path)
    assert np.array_equal(again.predict(dt), b.predict(dt))
    contrib = b.predict(dt, pred_contribs=True)
    np.testing.assert_allclose(contrib.sum(1), b.predict(dt, output_margin=True), atol=1e-9)


def test_low_cardinality_data_trains_the_native_model():
    df, y = _frame()
    df = df[["x", "low"]]
    auto = bonsai.train(P, bonsai.Dataset(df, label=y))
    native = bonsai.train(dict(P, cat_encoding="native"), bonsai.Dataset(df, label=y))
    assert auto.ctr is None
    strip = lambda b: b.model_to_string().replace('"cat_encoding":"native"', "").replace(
        '"cat_encoding":"auto"', "")
    assert strip(auto) == strip(native)


def test_where_statistics_cannot_be_kept_auto_is_native():
    df, y = _frame(n=1500)
    ds = bonsai.Dataset(df, label=y)
    first = bonsai.train(dict(P, n_estimators=3, cat_encoding="native"), ds)
    cont = bonsai.train(dict(P, n_estimators=3), ds, init_model=first)   # continued: native
    assert cont.ctr is None and cont.num_boosted_rounds() == 6
    res = bonsai.cv(dict(P, n_estimators=3), ds, nfold=2, return_models=True)
    assert all(m.ctr is None for m in res["models"])
    with pytest.raises(ValueError, match="cat_encoding"):
        bonsai.train(dict(P, cat_encoding="bogus"), ds)
