"""Categorical defaults: bonsai's ``cat_encoding`` choices ("auto", the default;
"native"; "ordered") against LightGBM and CatBoost, test RMSE on four generated
regression families (accuracy only: one fit each, no timing).

    PYTHONPATH=. python benchmarks/bench_cat_families.py FAMILY LIBS [SEED]

FAMILY: ``ids`` (100k rows: two id columns of 10k and 1k Zipf-distributed categories
with random effects, 4 numeric), ``low`` (50k: 5 / 7 / 8 categories), ``mid``
(150k: 40 / 150 categories with plenty of rows each, one interacting with a numeric
column), ``mixed`` (150k: 8 / 100 / 1k / 10k categories).  LIBS: comma-separated
``bonsai-auto``, ``bonsai-native``, ``bonsai-ordered``, ``lightgbm``, ``catboost``.
Every model: 300 rounds, learning rate 0.1, 63 leaves (bonsai leaf-wise; CatBoost
depth 6), 2 threads, the last 20% of rows held out.  ``bonsai-auto`` also prints the
features it encoded with ordered statistics (``bonsai.ordered.auto_ctr_features``).
"""
import sys

import numpy as np
import pandas as pd

fam = sys.argv[1]
libs = sys.argv[2].split(",")
rng = np.random.default_rng(int(sys.argv[3]) if len(sys.argv) > 3 else 0)

def zipf_codes(n, k, a=1.1):
    p = 1.0 / np.arange(1, k + 1) ** a; p /= p.sum()
    return rng.permutation(k)[rng.choice(k, n, p=p)]

if fam == "ids":        # two id columns (~10k and ~1k) + numeric
    n = 100_000
    c0 = zipf_codes(n, 10_000, 0.8); c1 = zipf_codes(n, 1_000, 0.8)
    e0 = rng.normal(0, 1, 10_000); e1 = rng.normal(0, 0.7, 1_000)
    Xn = rng.normal(size=(n, 4))
    y = e0[c0] + e1[c1] + Xn[:, 0] + 0.5 * np.sin(2 * Xn[:, 1]) + rng.normal(0, 0.5, n)
    cats = {"id0": c0, "id1": c1}
elif fam == "low":      # diamonds-like: 5 / 7 / 8 categories
    n = 50_000
    cats = {f"c{j}": rng.integers(0, k, n) for j, k in enumerate([5, 7, 8])}
    Xn = rng.normal(size=(n, 6))
    eff = [rng.normal(0, 1, k) for k in [5, 7, 8]]
    y = sum(e[c] for e, c in zip(eff, cats.values())) + Xn[:, 0] * (1 + 0.3 * cats["c0"]) + np.sin(Xn[:, 1]) + rng.normal(0, .4, n)
elif fam == "mid":      # 40 / 150 categories, plenty of rows each
    n = 150_000
    cats = {"m0": rng.integers(0, 40, n), "m1": rng.integers(0, 150, n)}
    e0 = rng.normal(0, 1, 40); e1 = rng.normal(0, 1, 150)
    Xn = rng.normal(size=(n, 5))
    y = e0[cats["m0"]] + e1[cats["m1"]] * (Xn[:, 0] > 0) + Xn[:, 1] + rng.normal(0, .5, n)
elif fam == "mixed":    # bench_cat-like cardinalities 8/100/1000/10000
    n = 150_000
    ks = [8, 100, 1000, 10000]
    cats = {f"k{k}": zipf_codes(n, k) for k in ks}
    effs = [rng.normal(0, 1, k) for k in ks]
    Xn = rng.normal(size=(n, 5))
    y = sum(0.6 * e[c] for e, c in zip(effs, cats.values())) + Xn[:, 0] + rng.normal(0, .5, n)
df = pd.DataFrame(Xn, columns=[f"x{i}" for i in range(Xn.shape[1])])
for k, v in cats.items():
    df[k] = pd.Categorical(v)
nt = int(0.8 * n)
tr, te = df.iloc[:nt], df.iloc[nt:]
P = dict(n_estimators=300, learning_rate=0.1, max_leaves=63, n_threads=2)
for lib in libs:
    if lib.startswith("bonsai"):
        from bonsai.sklearn import BonsaiRegressor
        enc = lib.split("-")[1]
        m = BonsaiRegressor(grow_policy="leafwise", cat_encoding=enc, **P).fit(tr, y[:nt])
        pr = m.predict(te)
        extra = ""
        if enc == "auto":
            from bonsai.ordered import auto_ctr_features
            import bonsai
            ds = bonsai.Dataset(tr, label=y[:nt])
            extra = f" ctr={auto_ctr_features(ds, 100, 255)}"
    elif lib == "lightgbm":
        import lightgbm as lgb
        m = lgb.LGBMRegressor(n_estimators=300, learning_rate=0.1, num_leaves=63, n_jobs=2, verbose=-1).fit(tr, y[:nt])
        pr = m.predict(te); extra = ""
    elif lib == "catboost":
        import catboost as cb
        m = cb.CatBoostRegressor(iterations=300, learning_rate=0.1, depth=6, thread_count=2, verbose=0, cat_features=list(cats))
        trc = tr.copy(); tec = te.copy()
        for k in cats: trc[k] = trc[k].astype(int); tec[k] = tec[k].astype(int)
        m.fit(trc, y[:nt]); pr = m.predict(tec); extra = ""
    rmse = float(np.sqrt(np.mean((pr - y[nt:]) ** 2)))
    print(f"{fam:6s} {lib:15s} rmse {rmse:.4f}{extra}", flush=True)
