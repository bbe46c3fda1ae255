"""Data of ``bench_small.py``: six generated small / medium tables with categorical
and missing columns, and the real files the repository bundles.

Generated entries (``GENERATED``) are registered in ``_common.DATASETS`` as
``small-<entry>`` and cached by ``_common.ensure_cached`` like every other data set:
one float32 matrix whose categorical columns hold integer category codes (NaN where
the category is missing); ``ENTRIES[e].cat_cols`` says which columns those are and
``frames`` turns the arrays into the pandas DataFrames (``category`` columns) every
library is fitted on.  The last 20% of the rows is the test set.  Shapes follow issue
18's table of public data sets (rows x columns, number of categorical columns, the
91%-NaN column, the ~4k-category column); the signals are our own.

Real entries (``REAL``) read LightGBM's example files (HIGGS rows: binary and, with
the same label as target, regression; 5-class data) and XGBoost's agaricus demo:
the copies bundled in the repository (``bonsai/data``, ``tests/data``); an entry whose
files are absent is skipped with a note.
"""
from __future__ import annotations

import gzip
from pathlib import Path
from typing import NamedTuple

import numpy as np

import _common as C

TEST_FRACTION = 0.20


class Entry(NamedTuple):
    rows: int
    features: int
    task: str
    n_classes: int
    cat_cols: tuple           # column indices holding category codes
    describe: str


def _zipf_codes(rng, m, k, a=1.05, perm=None):
    p = 1.0 / np.arange(1, k + 1) ** a
    codes = rng.choice(k, size=m, p=p / p.sum())
    return codes if perm is None else perm[codes]


def _meta(seed):
    return np.random.default_rng([seed, 10**6])


def reg_cat3(n=43_000, d=9, seed=20250301):
    """Diamonds-like: carat (log-normal), 5 more numeric columns tied to it (rounded
    like measurements), 3 categorical of 5 / 7 / 8 ordered-effect levels; target a
    price-like exp(...) with multiplicative noise."""
    meta = _meta(seed)
    effects = [np.sort(meta.normal(0.0, s, k)) for k, s in ((5, 0.08), (7, 0.12), (8, 0.2))]
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        m = b - a
        carat = np.round(np.exp(rng.normal(-0.4, 0.55, m)), 2)
        cats = [rng.choice(len(e), m, p=np.linspace(1, 2, len(e)) / np.linspace(1, 2, len(e)).sum())
                for e in effects]
        size = np.cbrt(carat) * 6.5
        X[a:b, 0] = carat
        X[a:b, 1] = np.round(rng.normal(61.7, 1.4, m), 1)            # depth %
        X[a:b, 2] = np.round(rng.normal(57.4, 2.2, m))                # table
        for j in range(3):                                            # x, y, z in mm
            X[a:b, 3 + j] = np.round(size * (1.0, 1.0, 0.62)[j] + rng.normal(0, 0.05, m), 2)
        for j, c in enumerate(cats):
            X[a:b, 6 + j] = c
        logp = (7.8 + 1.7 * np.log(carat) + sum(e[c] for e, c in zip(effects, cats))
                - 0.02 * np.abs(X[a:b, 1] - 61.7) + rng.normal(0.0, 0.12, m))
        y[a:b] = np.exp(logp)
    return X, y


def multi5_cat2(n=43_000, d=9, seed=20250302):
    """5 classes from a softmax of scores: 7 numeric columns (two interacting) and
    2 categorical (12 / 40 levels) with a per-class effect for each category."""
    meta = _meta(seed)
    W = meta.normal(0.0, 0.7, (7, 5))
    E1, E2 = meta.normal(0.0, 0.8, (12, 5)), meta.normal(0.0, 0.6, (40, 5))
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        m = b - a
        Z = rng.standard_normal((m, 7))
        c1, c2 = rng.integers(0, 12, m), _zipf_codes(rng, m, 40, 0.7)
        S = np.tanh(Z) @ W + E1[c1] + E2[c2]
        S[:, 0] += 0.8 * Z[:, 0] * Z[:, 1]
        P = np.exp(1.6 * (S - S.max(axis=1, keepdims=True)))
        cdf = np.cumsum(P, axis=1)
        y[a:b] = np.minimum((cdf < rng.random(m)[:, None] * cdf[:, -1:]).sum(axis=1), 4)
        Z[:, 2] = np.exp(Z[:, 2])
        X[a:b, :7], X[a:b, 7], X[a:b, 8] = Z, c1, c2
    return X, y


def reg_nan91(n=47_000, d=22, seed=20250303):
    """20 numeric columns (3 with 5-20% NaN), one more 91% NaN that carries signal
    where present, and one categorical of 30 levels; target nonlinear + noise."""
    meta = _meta(seed)
    eff = meta.normal(0.0, 1.0, 30)
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        m = b - a
        Z = rng.standard_normal((m, 20))
        Z[:, 10:14] = np.exp(Z[:, 10:14])
        rare = rng.normal(0.0, 1.0, m)
        cat = _zipf_codes(rng, m, 30, 0.8)
        s = (Z[:, 0] + np.sin(2 * Z[:, 1]) + 0.5 * Z[:, 2] * Z[:, 3] + eff[cat]
             + 0.4 * np.log(Z[:, 10]) + 2.0 * np.tanh(rare))
        present = rng.random(m) < 0.09
        y[a:b] = 5.0 + s * np.where(present, 1.0, 0.7) + rng.normal(0, 0.6, m)
        for j, f in zip((4, 5, 6), (0.05, 0.12, 0.20)):
            Z[rng.random(m) < f, j] = np.nan
        X[a:b, :20] = Z
        X[a:b, 20] = np.where(present, rare, np.nan)
        X[a:b, 21] = cat
    return X, y


def reg_mixed41(n=8_000, d=41, seed=20250304):
    """41 mixed columns: 25 continuous (some skewed, 2 with NaN), 8 integer counts,
    5 binary flags, 3 categorical (3 / 10 / 25 levels); target nonlinear + noise."""
    meta = _meta(seed)
    w = meta.normal(0.0, 0.5, 25)
    effs = [meta.normal(0.0, 0.8, k) for k in (3, 10, 25)]
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        m = b - a
        Z = rng.standard_normal((m, 25))
        counts = rng.poisson(np.exp(rng.normal(0.5, 0.8, (m, 8))))
        flags = rng.random((m, 5)) < (0.1, 0.3, 0.5, 0.2, 0.05)
        cats = [rng.integers(0, k, m) for k in (3, 10, 25)]
        s = (Z @ w + np.sin(Z[:, 0] * 2) + Z[:, 1] * flags[:, 0] + 0.3 * np.log1p(counts[:, 0])
             + sum(e[c] for e, c in zip(effs, cats)) + 0.5 * (counts[:, 1] > 2) * Z[:, 2])
        y[a:b] = s + rng.normal(0.0, 0.5, m)
        Z[:, 5:10] = np.exp(Z[:, 5:10])
        Z[rng.random(m) < 0.1, 20] = np.nan
        Z[rng.random(m) < 0.3, 21] = np.nan
        X[a:b, :25], X[a:b, 25:33], X[a:b, 33:38] = Z, counts, flags
        for j, c in enumerate(cats):
            X[a:b, 38 + j] = c
    return X, y


def bin_cat5(n=204_000, d=7, seed=20250305):
    """Binary: 2 numeric columns and 5 categorical (3 / 9 / 24 / 100 / 500 levels,
    the wide ones Zipf-distributed), a pair effect; label Bernoulli(logistic)."""
    meta = _meta(seed)
    ks = (3, 9, 24, 100, 500)
    effs = [meta.normal(0.0, s, k) for k, s in zip(ks, (0.3, 0.5, 0.6, 0.7, 0.8))]
    perms = [meta.permutation(k) for k in ks]
    pair = meta.normal(0.0, 0.5, (9, 24))
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        m = b - a
        x0, x1 = rng.normal(size=m), np.round(np.exp(rng.normal(3.0, 0.7, m)))
        codes = [_zipf_codes(rng, m, k, 0.9) for k in ks]
        s = (0.6 * x0 + 0.3 * np.log(x1 + 1) - 1.0 + pair[codes[1], codes[2]]
             + sum(e[c] for e, c in zip(effs, codes)))
        y[a:b] = rng.random(m) < 1.0 / (1.0 + np.exp(-s))
        X[a:b, 0], X[a:b, 1] = x0, x1
        for j, (c, p) in enumerate(zip(codes, perms)):
            X[a:b, 2 + j] = p[c]
    return X, y


def bin_cat4k(n=262_000, d=13, seed=20250306):
    """Binary: 9 numeric columns (two with NaN) and 4 categorical: an id-like one
    of ~4k Zipf levels (2% missing) and 8 / 60 / 300 levels; label Bernoulli."""
    meta = _meta(seed)
    ks = (4_000, 8, 60, 300)
    effs = [meta.normal(0.0, s, k) for k, s in zip(ks, (0.9, 0.4, 0.5, 0.6))]
    perms = [meta.permutation(k) for k in ks]
    w = meta.normal(0.0, 0.5, 9)
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        m = b - a
        Z = rng.standard_normal((m, 9))
        codes = [_zipf_codes(rng, m, k, a_) for k, a_ in zip(ks, (1.0, 0.5, 0.8, 0.9))]
        s = (Z @ w + 0.5 * Z[:, 0] * Z[:, 1] + 0.4 * np.sin(2 * Z[:, 2]) - 0.8
             + sum(e[c] for e, c in zip(effs, codes)))
        y[a:b] = rng.random(m) < 1.0 / (1.0 + np.exp(-s))
        Z[rng.random(m) < 0.15, 3] = np.nan
        Z[rng.random(m) < 0.40, 4] = np.nan
        X[a:b, :9] = Z
        for j, (c, p) in enumerate(zip(codes, perms)):
            X[a:b, 9 + j] = p[c]
        X[a:b, 9][rng.random(m) < 0.02] = np.nan
    return X, y


GENERATED = {
    "reg-cat3": (reg_cat3, Entry(43_000, 9, "regression", 1, (6, 7, 8),
                                 "regression, 3 categorical (5/7/8 levels)")),
    "multi5-cat2": (multi5_cat2, Entry(43_000, 9, "multiclass", 5, (7, 8),
                                       "5-class, 2 categorical (12/40)")),
    "reg-nan91": (reg_nan91, Entry(47_000, 22, "regression", 1, (21,),
                                   "regression, one column 91% NaN, 1 categorical (30)")),
    "reg-mixed41": (reg_mixed41, Entry(8_000, 41, "regression", 1, (38, 39, 40),
                                       "regression, 41 mixed columns, 3 categorical")),
    "bin-cat5": (bin_cat5, Entry(204_000, 7, "binary", 2, (2, 3, 4, 5, 6),
                                 "binary, 5 categorical (3..500)")),
    "bin-cat4k": (bin_cat4k, Entry(262_000, 13, "binary", 2, (9, 10, 11, 12),
                                   "binary, 4 categorical (one ~4k, 2% NaN)")),
}
for _name, (_gen, _e) in GENERATED.items():
    C.DATASETS["small-" + _name] = C.Data(_gen, _e.rows, _e.features, _e.task,
                                          _e.n_classes, TEST_FRACTION)

# Real files: (candidate (train, test) paths in the repository; task; n_classes; format)
_BUNDLED_BINARY = (C.REPO_ROOT / "bonsai" / "data" / "binary.train.gz",
                   C.REPO_ROOT / "bonsai" / "data" / "binary.test")
_TESTS = C.REPO_ROOT / "tests" / "data"
REAL = {
    "lgb-binary": ([_BUNDLED_BINARY], "binary", 2, "tsv"),
    "lgb-regression": ([_BUNDLED_BINARY], "regression", 1, "tsv"),
    "lgb-multiclass": ([(_TESTS / "multiclass.train.gz", _TESTS / "multiclass.test.gz")],
                       "multiclass", 5, "tsv"),
    "agaricus": ([(_TESTS / "agaricus.txt.train.gz", _TESTS / "agaricus.txt.test.gz")],
                 "binary", 2, "libsvm"),
}


def real_source(name):
    """The (train, test) paths an entry reads, or None when none is present."""
    for pair in REAL[name][0]:
        if all(Path(p).exists() for p in pair):
            return pair
    return None


def _open(path):
    return gzip.open(path, "rb") if str(path).endswith(".gz") else open(path, "rb")


def _read(path, fmt):
    with _open(path) as f:
        if fmt == "tsv":
            arr = np.loadtxt(f, dtype=np.float64, delimiter="\t")
            return arr[:, 1:].astype(np.float32), arr[:, 0].astype(np.float32)
        from sklearn.datasets import load_svmlight_file
        X, y = load_svmlight_file(f, n_features=126)
        return X.toarray().astype(np.float32), y.astype(np.float32)


def load(name, scale=1.0):
    """(X_train, y_train, X_test, y_test, Entry) of a generated or real entry."""
    if name in GENERATED:
        e = GENERATED[name][1]
        rows = max(2_000, int(round(e.rows * scale)))
        return (*C.load_cached("small-" + name, rows), e._replace(rows=rows))
    src = real_source(name)
    if src is None:
        raise FileNotFoundError(f"none of {REAL[name][0]} is present")
    _, task, k, fmt = REAL[name]
    Xtr, ytr = _read(src[0], fmt)
    Xte, yte = _read(src[1], fmt)
    e = Entry(len(ytr) + len(yte), Xtr.shape[1], task, k, (), f"{src[0]} / {src[1]}")
    return Xtr, ytr, Xte, yte, e


def frames(Xtr, Xte, cat_cols, category_dtype=True):
    """pandas DataFrames of the train and test rows: numeric columns float32; the
    ``cat_cols`` as ``category`` columns (the same categories in both, NaN missing),
    or, with ``category_dtype=False``, as strings ("nan" missing: CatBoost's input)."""
    import pandas as pd
    out = []
    levels = {j: int(np.nanmax(np.concatenate([Xtr[:, j], Xte[:, j]]))) + 1 for j in cat_cols}
    for X in (Xtr, Xte):
        cols = {}
        for j in range(X.shape[1]):
            name = f"c{j}" if j in cat_cols else f"x{j}"
            if j not in cat_cols:
                cols[name] = X[:, j]
                continue
            codes = np.where(np.isnan(X[:, j]), -1, X[:, j]).astype(np.int64)
            names = np.array([f"v{i}" for i in range(levels[j])] + ["nan"], dtype=object)
            cols[name] = (pd.Categorical.from_codes(codes, categories=names[:-1])
                          if category_dtype else names[codes])      # code -1: "nan"
        out.append(pd.DataFrame(cols))
    return out
