"""The subprocess of ``test_many_threads.py`` (started with ``NUMBA_NUM_THREADS=8``): fits
every grower on every kind of data at 1, 3 and 8 threads, with the work-split
thresholds lowered (``work_split.FINE``) so that a few hundred rows are cut between
all the threads, and prints one JSON document: per case and thread count, SHA-256
digests of the model bytes, the predictions and the SHAP values, the ``WorkLog``
summary, and the checks that failed (that the fit, the prediction and SHAP really ran
on that many threads).  The test compares the digests across thread counts.

Kinds of data: numeric (heavy-tailed regression with NaN and weights over several
orders of magnitude, row and column sampling), native categorical (pandas category
columns), ``cat_encoding="ordered"``, ``quantized_grad=True``, sparse rows (one-hot
like columns, which the CPU backend lays out as ``SparseRows``) and multiclass.

Run by hand: ``NUMBA_NUM_THREADS=8 PYTHONPATH=.:tests python tests/many_threads_run.py``.
"""
import hashlib
import json
import sys
import warnings

import numba
import numpy as np
import pandas as pd

import bonsai
import work_split
from bonsai.backends.cpu.layout import SparseRows, prepare

THREADS = (1, 3, 8)
N_ROWS = 1500
N_PREDICT = 300
GROWERS = {"depthwise": {"max_depth": 4}, "leafwise": {"max_leaves": 12},
           "oblivious": {"max_depth": 4}}
PREDICT_KERNELS = ("predict_records", "predict_nodes", "predict_oblivious", "predict_heaps")


def _numeric(rng, n):
    X = rng.normal(size=(n, 6))
    X[:, 2] = np.exp(3.0 * X[:, 2])                  # heavy tail
    X[:, 4] = np.round(X[:, 4], 1)                   # ties
    f = 1.5 * X[:, 0] - X[:, 1] * X[:, 3] + np.log1p(X[:, 2]) + np.sin(3 * X[:, 5])
    X[rng.random(X.shape) < 0.05] = np.nan
    return X, f


def _categorical(rng, n):
    c1 = rng.integers(0, 25, n)
    c2 = rng.integers(0, 5, n)
    x = rng.normal(size=n)
    eff = rng.normal(size=25) * 1.5
    y = (eff[c1] + 0.8 * (c2 == 3) + 0.5 * x + rng.normal(size=n) > 0).astype(float)
    df = pd.DataFrame({"c1": pd.Categorical([f"k{v}" for v in c1]),
                       "c2": pd.Categorical(c2), "x": x})
    df.loc[::17, "x"] = np.nan
    df.loc[::23, "c1"] = np.nan
    return df, y


def _cases():
    """name -> (train X, label, weight, rows to predict, params)."""
    rng = np.random.default_rng(8)
    X, f = _numeric(rng, N_ROWS)
    w = np.exp(2.0 * rng.normal(size=N_ROWS))         # weights over ~8 orders
    y_reg = f * np.exp(1.5 * rng.normal(size=N_ROWS)) + rng.standard_cauchy(N_ROWS)
    y_bin = (rng.random(N_ROWS) < 1 / (1 + np.exp(-2 * f))).astype(float)
    y_multi = np.digitize(f + rng.normal(size=N_ROWS), [-0.5, 1.0]).astype(float)
    df, y_cat = _categorical(rng, N_ROWS)
    S = (rng.random((N_ROWS, 40)) < rng.uniform(0.01, 0.3, 40)).astype(np.float64)
    S[:, :3] = rng.normal(size=(N_ROWS, 3))
    S[rng.random(S.shape) < 0.05] = np.nan
    y_sp = (np.nan_to_num(S[:, 0]) + 2 * np.nan_to_num(S[:, 5]) - np.nan_to_num(S[:, 9])
            + 0.5 * rng.normal(size=N_ROWS) > 0.2).astype(float)
    sample = {"subsample": 0.8, "colsample_bynode": 0.8, "random_state": 3}
    binary = {"objective": "binary", **sample}
    return {
        "numeric": (X, np.clip(y_reg, -1e6, 1e6), w, X[:N_PREDICT],
                    {"objective": "squared_error", **sample}),
        "categorical": (df, y_cat, None, df.iloc[:N_PREDICT],
                        dict(binary, min_data_per_group=10, max_cat_to_onehot=4)),
        "ordered": (df, y_cat, None, df.iloc[:N_PREDICT],
                    dict(binary, cat_encoding="ordered")),
        "quantized": (X, y_bin, w, X[:N_PREDICT], dict(binary, quantized_grad=True)),
        "sparse_rows": (S, y_sp, None, S[:N_PREDICT], binary),
        "multiclass": (X, y_multi, w, X[:N_PREDICT],
                       {"objective": "multiclass", "num_class": 3, **sample}),
    }


def _digest(a):
    if isinstance(a, str):
        a = a.encode()
    return hashlib.sha256(a if isinstance(a, bytes) else np.ascontiguousarray(a).tobytes()
                          ).hexdigest()[:16]


def _run_one(log, ds, X_pred, params, n):
    errors = []
    log.clear()
    b = bonsai.train(dict(params, n_threads=n), ds, num_boost_round=5)
    try:
        summary = log.check_fit(n, "fit")
    except AssertionError as e:
        summary = log.summary()
        errors.append(str(e))
    log.clear()
    pred = b.predict(X_pred, output_margin=True)
    ran = {k[0] for k in log.kernels}
    names = [k for k in PREDICT_KERNELS if k in ran]
    if len(names) != 1:
        errors.append(f"predict ran {sorted(ran)}: want one of {PREDICT_KERNELS}")
    for name in names:
        try:
            log.check_kernels(n, name, "predict")
        except AssertionError as e:
            errors.append(str(e))
    log.clear()
    shap = b.predict(X_pred, pred_contribs=True)
    try:
        log.check_kernels(n, "shap_values", "pred_contribs")
    except AssertionError as e:
        errors.append(str(e))
    if not np.allclose(shap.sum(axis=-1), pred.reshape(shap.shape[:-1]), rtol=1e-9,
                       atol=1e-9):
        errors.append("SHAP values do not add up to the margin")
    return {"model": _digest(b.model_to_string()), "predict": _digest(pred),
            "shap": _digest(shap), "trees": b.num_trees(),
            "leaves": int(sum(t.n_leaves for t in b.trees)), "summary": summary,
            "errors": errors}


def main():
    warnings.filterwarnings("ignore", message=r"n_threads=\d+ exceeds", category=RuntimeWarning)
    work_split.split_finely()
    log = work_split.WorkLog.install()
    out = {"numba_num_threads": numba.config.NUMBA_NUM_THREADS, "results": {}}
    for kind, (X, y, w, X_pred, params) in _cases().items():
        ds = bonsai.Dataset(X, label=y, weight=w)
        X_hist = prepare(ds).X_hist
        if (kind == "sparse_rows") != isinstance(X_hist, SparseRows):
            raise AssertionError(f"{kind}: Dataset laid out {type(X_hist).__name__}")
        for policy, grow in GROWERS.items():
            p = dict(params, grow_policy=policy, learning_rate=0.3, min_child_samples=5, **grow)
            out["results"][f"{kind}/{policy}"] = {
                str(n): _run_one(log, ds, X_pred, p, n) for n in THREADS}
    out["threading_layer"] = numba.threading_layer()
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
