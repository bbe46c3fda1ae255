"""The property fuzz's worker (``tests/test_fuzz.py``): one long-lived child process
that builds each drawn case's input, fits, predicts and round-trips the model, and
answers with the outcome, so a case that crashes the interpreter or hangs kills the
worker, not pytest.

A case (a dict from the parent's hypothesis strategies) holds a float64 matrix
``M``, per-column kinds, the container to pass it in (numpy of several dtypes and
orders, pandas with category / bool / nullable columns, polars, Arrow, scipy.sparse),
raw label draws, the objective and the parameters (each drawn from its range in
``PARAM_TABLE``, edges included; sometimes one out of range or of the wrong type:
``case["invalid"]``).

``run(case)`` returns a dict: ``kind`` "fit" (fitted; predictions finite; the
model's string, file and pickle round trips predict the same bits), "ValueError" /
"TypeError" (with the message and whether it names a parameter of the case or the
input), or a failure: "nonfinite", "roundtrip", "coercion" (a parameter out of its
range or of the wrong type was accepted), "other" (any other exception, with its
traceback).
"""
import io
import os
import pickle
import tempfile
import traceback
import warnings

import numpy as np

#: words that say an error is about the input data (rather than a parameter)
INPUT_WORDS = ("X", "label", "feature", "column", "row", "input", "dtype", "categor",
               "sparse", "group", "query", "weight", "class", "array", "matrix", "Dataset",
               "data", "finite", "NaN", "nan", "inf", "value", "target", "shape", "sample")


def _ints(col):
    c = np.where(np.isfinite(col) & (np.abs(col) < 2 ** 31), col, 0.0)
    return np.round(c).astype(np.int64)


def _codes(col, k=6):
    c = _ints(col)
    return np.mod(c, k)


def build_X(case):
    """The input container of the case, from its float64 matrix ``M``."""
    M = np.asarray(case["M"], np.float64)
    kind = case["container"]
    n, F = M.shape
    if kind == "numpy64":
        return np.ascontiguousarray(M)
    if kind == "numpy64F":
        return np.asfortranarray(M)
    if kind == "numpy32":
        with np.errstate(over="ignore"):
            return M.astype(np.float32)
    if kind in ("int64", "int32", "uint8"):
        ints = np.column_stack([_ints(M[:, j]) for j in range(F)])
        if kind == "uint8":
            ints = np.clip(ints, 0, 255)
        return ints.astype({"int64": np.int64, "int32": np.int32, "uint8": np.uint8}[kind])
    if kind == "bool":
        return np.nan_to_num(M) > 0
    if kind.startswith("sparse"):
        import scipy.sparse as sp
        D = np.where(np.abs(M) < 0.5, 0.0, M)      # zeros to leave out
        return {"sparse_csr": sp.csr_matrix, "sparse_csc": sp.csc_matrix,
                "sparse_coo": sp.coo_matrix}[kind](D)
    cols = {}
    for j in range(F):
        col, ck = M[:, j], case["col_kinds"][j]
        cols[f"f{j}"] = (col, ck)
    if kind == "pandas":
        import pandas as pd
        data = {}
        for name, (col, ck) in cols.items():
            miss = np.isnan(col)
            if ck == "category":
                cats = np.array(list("abcdef"), dtype=object)[_codes(col)]
                data[name] = pd.Categorical(np.where(miss, None, cats), categories=list("abcdef"))
            elif ck == "int_category":
                data[name] = pd.Categorical(np.where(miss, np.nan, _codes(col)))
            elif ck == "bool":
                data[name] = np.nan_to_num(col) > 0
            elif ck == "Int64":
                data[name] = pd.array(np.where(miss, None, _ints(col)).tolist(), dtype="Int64")
            elif ck == "Float64":
                data[name] = pd.array(np.where(miss, None, col).tolist(), dtype="Float64")
            elif ck == "boolean":
                data[name] = pd.array(np.where(miss, None, col > 0).tolist(), dtype="boolean")
            elif ck == "float32":
                with np.errstate(over="ignore"):
                    data[name] = col.astype(np.float32)
            else:
                data[name] = col
        return pd.DataFrame(data)
    if kind == "polars":
        import polars as pl
        data = {}
        for name, (col, ck) in cols.items():
            if ck in ("category", "int_category"):
                vals = [None if np.isnan(v) else "abcdef"[int(c)]
                        for v, c in zip(col, _codes(col))]
                data[name] = pl.Series(name, vals, dtype=pl.Categorical)
            else:     # NaN as a polars null
                data[name] = pl.Series(name, [None if np.isnan(v) else float(v) for v in col],
                                       dtype=pl.Float64)
        return pl.DataFrame(data)
    if kind == "arrow":
        import pyarrow as pa
        arrays = {}
        for name, (col, ck) in cols.items():
            if ck in ("category", "int_category"):
                vals = [None if np.isnan(v) else "abcdef"[int(c)]
                        for v, c in zip(col, _codes(col))]
                arrays[name] = pa.array(vals).dictionary_encode()
            else:
                arrays[name] = pa.array(col, mask=np.isnan(col))
        return pa.table(arrays)
    raise AssertionError(f"unknown container {kind!r}")


def build_label(case):
    """(label, group) for the case's objective from the raw draws."""
    raw = np.asarray(case["y"], np.float64)
    n = raw.shape[0]
    obj = case["objective"]
    fin = np.nan_to_num(raw, nan=0.0, posinf=1.0, neginf=-1.0)
    order = np.argsort(np.argsort(fin, kind="stable"), kind="stable")
    if obj in ("binary",):
        y = (order % 2).astype(np.float64)
    elif obj == "multiclass":
        k = case["params"].get("num_class")
        k = k if isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= 50 else 3
        y = (order % k).astype(np.float64)
    elif obj in ("poisson", "tweedie"):
        y = np.abs(fin)
    elif obj == "gamma":
        y = np.abs(fin) + 0.5
    elif obj in ("lambdarank", "rank_xendcg", "rank_pairwise"):
        y = (order % 4).astype(np.float64)
    elif obj == "multi_squared_error":
        y = np.stack([fin, -fin], axis=1)
    elif obj == "multilabel_binary":
        y = np.stack([order % 2, (order // 2) % 2], axis=1).astype(np.float64)
    else:
        y = raw if case["label_raw"] else fin
    group = None
    if obj in ("lambdarank", "rank_xendcg", "rank_pairwise"):
        cuts = sorted({int(c) % n for c in case["group_cuts"]} - {0})
        group = np.diff([0] + cuts + [n]).astype(np.int64)
    return y, group


def _named(msg, case):
    names = list(case["params"]) + list(INPUT_WORDS)
    return any(w in msg for w in names)


def _same(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and np.array_equal(a, b)


def _fit(case, X, y, group):
    import bonsai
    params = dict(case["params"], objective=case["objective"])
    if case["api"] == "sklearn":
        est_cls = (bonsai.BonsaiClassifier if case["objective"] in ("binary", "multiclass")
                   else bonsai.BonsaiRegressor)
        params.pop("objective")
        params.pop("num_class", None)
        est = est_cls(verbose=0, **params).fit(X, y)
        return est, est.get_booster() if hasattr(est, "get_booster") else est.booster_
    ds = bonsai.Dataset(X, label=y, group=group)
    b = bonsai.train(params, ds)
    return b, b


def check(case):
    """Fit, predict and round-trip the case (raises on a failed check)."""
    import bonsai
    X = build_X(case)
    y, group = build_label(case)
    try:
        model, booster = _fit(case, X, y, group)
    except (ValueError, TypeError) as e:
        msg = f"{e}"
        return {"kind": type(e).__name__ if type(e) in (ValueError, TypeError)
                else ("ValueError" if isinstance(e, ValueError) else "TypeError"),
                "message": msg[:500], "named": _named(msg, case)}
    if case["invalid"] is not None:
        return {"kind": "coercion", "param": case["invalid"],
                "value": repr(case["params"].get(case["invalid"]))[:100]}
    pred = np.asarray(model.predict(X))
    if not np.all(np.isfinite(pred.astype(np.float64))):
        return {"kind": "nonfinite", "where": "predict", "pred": repr(pred[:5])}
    margin = booster.predict(X, output_margin=True)
    if not np.all(np.isfinite(margin)):
        return {"kind": "nonfinite", "where": "margin"}
    ref = booster.predict(X)
    again = bonsai.Booster(model_str=booster.model_to_string())
    if not _same(again.predict(X), ref):
        return {"kind": "roundtrip", "where": "model string"}
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "m.json")
        booster.save_model(path)
        if not _same(bonsai.Booster(model_file=path).predict(X), ref):
            return {"kind": "roundtrip", "where": "model file"}
    back = pickle.loads(pickle.dumps(model))
    if not _same(np.asarray(back.predict(X)), pred):
        return {"kind": "roundtrip", "where": "pickle"}
    return {"kind": "fit"}


def run(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return check(case)
        except Exception as e:     # noqa: BLE001 -- reported as a failure
            return {"kind": "other", "type": type(e).__name__, "message": str(e)[:500],
                    "traceback": traceback.format_exc()[-3000:]}


def serve(conn):
    """The worker's loop: receive a case, send its outcome; None stops it."""
    import sys
    sys.stdout = io.StringIO()       # a case's prints (verbosity) stay here
    os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
    import bonsai  # noqa: F401  -- imported once, before the first case
    conn.send("ready")
    while True:
        case = conn.recv()
        if case is None:
            return
        out = run(case)
        sys.stdout = io.StringIO()
        conn.send(out)
