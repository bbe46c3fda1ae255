"""More data families for ``bench_fit.py``'s shapes, so no single generator decides a
change (issue 18, item 1).

``bench_fit.py --family F`` trains every shape on family ``F``'s version of its data
set.  ``default`` is ``_common``'s own generators (``higgs_like`` and the rest); this
module owns the other two and registers their data sets in ``_common.DATASETS`` under
``<data set>-<family>`` (``higgs-bernoulli``, ``year-heavy``, ...), so they are
generated once, cached and loaded by ``_common.ensure_cached`` / ``load_cached`` like
the default ones (their cache directories have other names: the default caches stay
valid).

* ``bernoulli``: columns Gaussian, half-normal and exponential (a third each), built
  from Gaussians (``|z|``, ``(z^2 + w^2) / 2``), so on the 90-column regression they
  share 12 latent factors; binary labels drawn Bernoulli from the logistic of a
  nonlinear signal (not thresholded), classes drawn from a softmax, regression
  targets a nonlinear signal plus Gaussian noise.
* ``heavy``: heavy-tailed and discrete columns, cycling through six kinds: Student-t
  (2.5 df), log-normal (sigma 1.5), Pareto (shape 1.5), integer counts (floor of a
  log-normal), values rounded to 0.5, and columns with under 20 distinct values
  (3 / 7 / 12 / 19 levels): many duplicated values.  Labels threshold a nonlinear
  signal plus Student-t noise (3 df); regression adds Student-t noise too.

Every generator draws its rows in seeded chunks (``_common._seeded_chunks``) and
returns float32 ``X`` (n, d) and ``y`` (n,), like ``_common``'s.
"""
from __future__ import annotations

import numpy as np

import _common as C

FAMILIES = ("default", "bernoulli", "heavy")
_BASES = ("higgs", "year", "higgs-missing", "wide", "multiclass")
_MISSING_FRACTION = 0.40
_SEED = {"bernoulli": 20250101, "heavy": 20250201}


def data_name(base: str, family: str) -> str:
    """The ``_common.DATASETS`` key of data set ``base`` in ``family``."""
    if family not in FAMILIES:
        raise ValueError(f"family must be one of {FAMILIES}, got {family!r}")
    return base if family == "default" else f"{base}-{family}"


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


def _latent(rng, m, d, loadings=None):
    """(m, d) standard-normal-ish Gaussians; correlated through ``loadings`` (k, d)."""
    if loadings is None:
        return rng.standard_normal((m, d))
    F = rng.standard_normal((m, loadings.shape[0]))
    return (F @ loadings + 0.6 * rng.standard_normal((m, d))) / np.sqrt(1.36)


def _loadings(seed, d, k=12):
    return np.random.default_rng([seed, 10**6]).standard_normal((k, d)) / np.sqrt(k)


# -------------------------------------------------------------------- bernoulli
def _bern_columns(rng, m, d, loadings=None):
    """Gaussian / half-normal / exponential thirds; returns (X, (g, h, e) indices)."""
    Z = _latent(rng, m, d, loadings)
    g, h = np.arange(0, d // 3 + d % 3), np.arange(d // 3 + d % 3, 2 * (d // 3) + d % 3)
    e = np.arange(2 * (d // 3) + d % 3, d)
    Z[:, h] = np.abs(Z[:, h])
    Z[:, e] = 0.5 * (Z[:, e] ** 2 + rng.standard_normal((m, len(e))) ** 2)   # Exp(1)
    return Z, (g, h, e)


def bernoulli_binary(n=1_000_000, d=28, seed=_SEED["bernoulli"]):
    """Binary: label ~ Bernoulli(sigmoid(nonlinear signal)); 28 independent columns."""
    if d < 24:
        raise ValueError("bernoulli_binary needs d >= 24")
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        Z, (g, h, e) = _bern_columns(rng, b - a, d)
        G, H, E = Z[:, g], Z[:, h], Z[:, e]
        s = (1.1 * G[:, 0] * G[:, 1] + 1.0 * np.sin(1.7 * G[:, 2])
             + 0.6 * (G[:, 3] ** 2 - 1.0) + 0.8 * np.tanh(G[:, 4] + H[:, 0] - 0.8)
             + 0.7 * (H[:, 1] - 0.8) * G[:, 5] - 0.6 * (H[:, 2] > 1.0)
             + 0.5 * np.log(E[:, 0] + 0.1) + 0.5 * np.minimum(E[:, 1], 3.0) * np.sign(G[:, 6])
             - 0.4 * E[:, 2] * H[:, 3] + 0.3 * G[:, 7] + 0.55)
        X[a:b] = Z
        y[a:b] = rng.random(b - a) < _sigmoid(s)
    return X, y


def bernoulli_regression(n=500_000, d=90, seed=_SEED["bernoulli"] + 1):
    """Regression: 90 columns over 12 shared factors; nonlinear signal + N(0, 3^2)."""
    if d < 24:
        raise ValueError("bernoulli_regression needs d >= 24")
    L = _loadings(seed, d)
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        Z, (g, h, e) = _bern_columns(rng, b - a, d, L)
        G, H, E = Z[:, g], Z[:, h], Z[:, e]
        s = (1.5 * G[:, 0] + 1.5 * np.sin(2.0 * G[:, 1]) + G[:, 2] * G[:, 3]
             + np.maximum(G[:, 4], 0.0) ** 2 - np.abs(G[:, 5]) + np.log1p(E[:, 0]) * H[:, 0]
             + 2.0 * np.tanh(E[:, 1] - 1.0) - 0.5 * H[:, 1] * H[:, 2])
        X[a:b] = Z
        y[a:b] = 20.0 + 3.0 * s + 3.0 * rng.standard_normal(b - a)
    return X, y


def _softmax_draw(rng, S):
    P = np.exp(S - S.max(axis=1, keepdims=True))
    cdf = np.cumsum(P, axis=1)
    u = rng.random(len(S))[:, None] * cdf[:, -1:]
    return np.minimum((cdf < u).sum(axis=1), S.shape[1] - 1)


def bernoulli_multiclass(n=200_000, d=50, seed=_SEED["bernoulli"] + 2, n_classes=10):
    """10 classes drawn from a softmax of nonlinear class scores (not an arg max)."""
    if d < 30:
        raise ValueError("bernoulli_multiclass needs d >= 30")
    meta = np.random.default_rng([seed, 10**6])
    W, V, U = (meta.normal(0.0, s, (10, n_classes)) for s in (0.9, 1.0, 0.6))
    bias = meta.normal(0.0, 0.3, n_classes)
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        Z, (g, h, e) = _bern_columns(rng, b - a, d)
        G, H, E = Z[:, g], Z[:, h], Z[:, e]
        S = (G[:, :10] @ W + np.tanh(1.5 * (H[:, :10] - 0.8)) @ V
             + np.log(E[:, :10] + 0.05) @ U + bias)
        S += 0.7 * (G[:, 10] * G[:, 11])[:, None] * np.sign(bias)
        X[a:b] = Z
        y[a:b] = _softmax_draw(rng, 1.5 * S)
    return X, y


def bernoulli_wide(n=100_000, d=2000, seed=_SEED["bernoulli"] + 3, n_informative=40):
    """0/1 columns (densities log-uniform in [1%, 50%]); label ~ Bernoulli of a
    logistic of a saturating count of active columns, 3-way ANDs and XORs."""
    if d < n_informative:
        raise ValueError(f"bernoulli_wide needs d >= {n_informative}")
    meta = np.random.default_rng([seed, 10**6])
    p = np.exp(meta.uniform(np.log(0.01), np.log(0.5), size=d)).astype(np.float32)
    cols = meta.choice(d, size=n_informative, replace=False)
    p[cols] = meta.uniform(0.1, 0.5, size=n_informative)
    w = meta.normal(0.0, 0.6, n_informative)
    triples = cols[meta.permutation(n_informative)[:30]].reshape(10, 3)
    w3 = meta.normal(0.0, 2.0, 10)
    xors = cols[meta.permutation(n_informative)[:8]].reshape(4, 2)
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed, 10_000):
        Xc = X[a:b]
        np.less(rng.random((b - a, d), dtype=np.float32), p, out=Xc, casting="unsafe")
        lin = Xc[:, cols].astype(np.float64) @ w
        s = (2.0 * np.tanh(lin - w @ p[cols])
             + (Xc[:, triples[:, 0]] * Xc[:, triples[:, 1]] * Xc[:, triples[:, 2]]) @ w3
             + 1.2 * (Xc[:, xors[:, 0]] != Xc[:, xors[:, 1]]).sum(axis=1) - 2.4)
        y[a:b] = rng.random(b - a) < _sigmoid(s)
    return X, y


# ------------------------------------------------------------------------ heavy
_LEVELS = (3, 7, 12, 19)


def _heavy_columns(rng, m, d, loadings=None):
    """Columns of six kinds (``j % 6``: t, log-normal, Pareto, integer counts, rounded,
    < 20 levels), each a monotone-ish map of a Gaussian latent; returns (X, Z)."""
    Z = _latent(rng, m, d, loadings)
    X = np.empty_like(Z)
    for j in range(d):
        z, kind = Z[:, j], j % 6
        if kind == 0:                     # Student-t, 2.5 df
            X[:, j] = z / np.sqrt(rng.chisquare(2.5, m) / 2.5)
        elif kind == 1:                   # log-normal
            X[:, j] = np.exp(1.5 * z)
        elif kind == 2:                   # Pareto(1.5) via an Exp(1) built from z
            X[:, j] = np.exp(0.5 * (z ** 2 + rng.standard_normal(m) ** 2) / 1.5)
        elif kind == 3:                   # integer counts: floor of a log-normal
            X[:, j] = np.floor(np.exp(1.0 + 1.1 * z))
        elif kind == 4:                   # rounded to 0.5 (a t with 5 df)
            X[:, j] = np.round(2.0 * z / np.sqrt(rng.chisquare(5.0, m) / 5.0)) / 2.0
        else:                             # few levels: 3 / 7 / 12 / 19
            k = _LEVELS[(j // 6) % len(_LEVELS)]
            X[:, j] = np.clip(np.floor((z + 2.5) / 5.0 * k), 0, k - 1)
    return X, Z


def _heavy_signal(X):
    """A nonlinear signal of the first twelve columns (two of each kind)."""
    t0, t6 = np.clip(X[:, 0], -5, 5), np.clip(X[:, 6], -5, 5)
    ln1, ln7 = np.log(X[:, 1]) / 1.5, np.log(X[:, 7]) / 1.5
    pa2, pa8 = np.log(X[:, 2]), np.log(X[:, 8])
    c3, c9 = np.log1p(X[:, 3]), X[:, 9]
    r4, r10 = X[:, 4], X[:, 10]
    q5, q11 = X[:, 5], X[:, 11]
    return (0.8 * np.tanh(t0) * ln1 + 1.0 * np.sin(1.5 * ln7) + 0.7 * (pa2 > 1.0)
            - 0.5 * np.minimum(pa8, 3.0) * np.sign(t6) + 0.5 * (c3 - 1.3) * (q5 - 1.0)
            + 0.6 * ((c9 % 3) == 0) + 0.4 * np.clip(r4, -3, 3) * np.clip(r10, -3, 3)
            + 0.15 * (q11 - 3.0) ** 2 - 0.5)


def heavy_binary(n=1_000_000, d=28, seed=_SEED["heavy"]):
    """Binary: label = nonlinear signal + Student-t noise (3 df) > 0."""
    if d < 12:
        raise ValueError("heavy_binary needs d >= 12")
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        Xh, _ = _heavy_columns(rng, b - a, d)
        s = _heavy_signal(Xh)
        X[a:b] = Xh
        y[a:b] = s + 0.9 * rng.standard_t(3.0, b - a) > 0.0
    return X, y


def heavy_regression(n=500_000, d=90, seed=_SEED["heavy"] + 1):
    """Regression: 90 heavy / discrete columns over 12 shared factors; the target is
    a nonlinear signal + 1.5 x Student-t noise (3 df)."""
    if d < 12:
        raise ValueError("heavy_regression needs d >= 12")
    L = _loadings(seed, d)
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        Xh, Z = _heavy_columns(rng, b - a, d, L)
        s = 2.0 * _heavy_signal(Xh) + 1.5 * Z[:, 12] + np.abs(Z[:, 13])
        X[a:b] = Xh
        y[a:b] = 10.0 + 3.0 * s + 1.5 * rng.standard_t(3.0, b - a)
    return X, y


def heavy_multiclass(n=200_000, d=50, seed=_SEED["heavy"] + 2, n_classes=10):
    """10 classes: arg max of class scores (a linear map of robust transforms of
    24 columns, a per-class bump) plus Student-t noise (3 df)."""
    if d < 30:
        raise ValueError("heavy_multiclass needs d >= 30")
    meta = np.random.default_rng([seed, 10**6])
    W = meta.normal(0.0, 0.8, (24, n_classes))
    centres = meta.uniform(-1.0, 1.0, n_classes)
    bias = meta.normal(0.0, 0.3, n_classes)
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        m = b - a
        Xh, _ = _heavy_columns(rng, m, d)
        T = np.empty((m, 24))
        for j in range(24):
            kind = j % 6
            col = Xh[:, j]
            T[:, j] = (np.tanh(col) if kind in (0, 4) else np.log(col) / 1.5 if kind == 1
                       else np.log(col) - 0.7 if kind == 2 else np.log1p(col) - 1.3
                       if kind == 3 else col / _LEVELS[(j // 6) % 4] - 0.5)
        S = T @ W + bias - 0.8 * (np.tanh(Xh[:, 24:25]) - centres) ** 2
        S += 0.6 * rng.standard_t(3.0, (m, n_classes))
        X[a:b] = Xh
        y[a:b] = np.argmax(S, axis=1)
    return X, y


def heavy_wide(n=100_000, d=2000, seed=_SEED["heavy"] + 3, n_informative=40):
    """Sparse heavy-tailed counts (term-frequency like: 0 with probability 1 - p_j,
    else 1 + floor of a log-normal): 2000 columns, 40 informative ones; label =
    signal of their log counts + Student-t noise > 0."""
    if d < n_informative:
        raise ValueError(f"heavy_wide needs d >= {n_informative}")
    meta = np.random.default_rng([seed, 10**6])
    p = np.exp(meta.uniform(np.log(0.01), np.log(0.5), size=d)).astype(np.float32)
    cols = meta.choice(d, size=n_informative, replace=False)
    p[cols] = meta.uniform(0.1, 0.5, size=n_informative)
    w = meta.normal(0.0, 0.8, n_informative)
    pairs = cols[meta.permutation(n_informative)[:24]].reshape(12, 2)
    w2 = meta.normal(0.0, 0.8, 12)
    X = np.empty((n, d), np.float32)
    y = np.empty(n, np.float32)
    for a, b, rng in C._seeded_chunks(n, seed, 10_000):
        m = b - a
        Xc = X[a:b]
        np.less(rng.random((m, d), dtype=np.float32), p, out=Xc, casting="unsafe")
        Xc *= 1.0 + np.floor(rng.lognormal(0.0, 1.0, (m, d)).astype(np.float32))
        lc = np.log1p(Xc[:, cols].astype(np.float64))
        lp = np.log1p(Xc[:, pairs[:, 0]].astype(np.float64))
        s = (lc @ w - w @ (p[cols] * 0.9) + ((lp > 0.8) & (Xc[:, pairs[:, 1]] > 0)) @ w2
             + 0.5 * np.sin(2.0 * lc[:, 0]))
        y[a:b] = s + 0.8 * rng.standard_t(3.0, m) > np.median(s)
    return X, y


def _with_missing(gen, seed):
    def gen_missing(n=1_000_000, d=28):
        """``gen``'s data with 40% of the values set to NaN, completely at random."""
        X, y = gen(n=n, d=d)
        for a, b, rng in C._seeded_chunks(n, seed):
            X[a:b][rng.random((b - a, d), dtype=np.float32) < _MISSING_FRACTION] = np.nan
        return X, y
    return gen_missing


_GENERATORS = {
    "bernoulli": (bernoulli_binary, bernoulli_regression, bernoulli_multiclass,
                  bernoulli_wide),
    "heavy": (heavy_binary, heavy_regression, heavy_multiclass, heavy_wide),
}

for _fam, (_bin, _reg, _multi, _wide) in _GENERATORS.items():
    _base = C.DATASETS
    C.DATASETS.update({
        data_name("higgs", _fam): _base["higgs"]._replace(gen=_bin),
        data_name("year", _fam): _base["year"]._replace(gen=_reg),
        data_name("higgs-missing", _fam): _base["higgs-missing"]._replace(
            gen=_with_missing(_bin, _SEED[_fam] + 7)),
        data_name("wide", _fam): _base["wide"]._replace(gen=_wide),
        data_name("multiclass", _fam): _base["multiclass"]._replace(gen=_multi),
    })
