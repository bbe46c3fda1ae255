"""Fit-time / peak-memory / accuracy benchmark: bonsai against its peers.

    python benchmarks/bench_fit.py \
        --shape higgs|year|higgs-leaves|missing|wide|multiclass|all --repeats 3 --threads 2 \
        --libs bonsai,lightgbm,xgboost,catboost,sklearn [--rows N] [--rounds N] \
        [--family default|bernoulli|heavy] [--bonsai-warmup data|all]

Every (library, repeat) fit runs in a fresh interpreter that loads the same cached
.npy arrays; libraries are interleaved within each repeat and medians are reported.
See benchmarks/README.md for what is measured and how.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from typing import NamedTuple

import numpy as np

import _common as C
import _families as F

# Settings every library is mapped onto, whatever the shape (see README.md).
COMMON = dict(learning_rate=0.1, max_bin=255, min_child_samples=20, min_child_weight=1e-3,
              reg_lambda=1.0, seed=0)
CATBOOST_MAX_DEPTH = 16      # CatBoost's cap on depth (used as "unlimited" for Lossguide)


class Shape(NamedTuple):
    """One benchmark shape: a data set (``_common.DATASETS``) and a tree configuration."""
    data: str
    rounds: int
    max_depth: int           # 0 = unlimited (only with leafwise)
    leafwise: bool = False   # grow best-first to ``max_leaves`` leaves
    max_leaves: int = 255

    def num_leaves(self) -> int:
        """Leaf cap for libraries that always need one (LightGBM, sklearn)."""
        if self.leafwise or self.max_depth == 0:
            return self.max_leaves
        return min(self.max_leaves, 2 ** self.max_depth - 1)

    def describe(self) -> str:
        if self.leafwise:
            depth = "no depth limit" if self.max_depth == 0 else f"depth <= {self.max_depth}"
            return f"leaf-wise, {self.max_leaves} leaves, {depth}"
        return f"depth {self.max_depth}"


SHAPES = {
    "higgs": Shape("higgs", rounds=200, max_depth=8),
    "year": Shape("year", rounds=200, max_depth=8),
    "higgs-leaves": Shape("higgs", rounds=200, max_depth=0, leafwise=True, max_leaves=255),
    "missing": Shape("higgs-missing", rounds=200, max_depth=8),
    "wide": Shape("wide", rounds=50, max_depth=8),
    "multiclass": Shape("multiclass", rounds=100, max_depth=6),
}

PEERS = ("lightgbm", "xgboost")           # bonsai is compared with the better of these
DEFAULT_LIBS = "bonsai,lightgbm,xgboost,catboost,sklearn"
BONSAI_POLICY = {"bonsai": None, "bonsai-depthwise": "depthwise",
                 "bonsai-leafwise": "leafwise", "bonsai-oblivious": "oblivious"}
# bonsai objective names used with the native train() API.
BONSAI_OBJECTIVE = {"binary": "binary", "regression": "squared_error",
                    "multiclass": "multiclass"}
METRICS = {"binary": ("auc",), "regression": ("rmse",), "multiclass": ("accuracy", "mlogloss")}
HIGHER_IS_BETTER = {"auc": True, "accuracy": True, "rmse": False, "mlogloss": False}


def lib_note(lib: str, shape: Shape) -> str:
    """How ``lib`` maps the shape's tree configuration (printed under the table)."""
    d, leaves = shape.max_depth, shape.num_leaves()
    if lib == "lightgbm":
        return (f"leaf-wise, num_leaves={leaves}, "
                + ("max_depth=-1" if d == 0 else f"capped at depth {d}"))
    if lib == "xgboost":
        grow = (f"lossguide, max_leaves={leaves}, max_depth={d}" if shape.leafwise
                else f"depth-wise, max_depth={d}")
        return f"hist {grow}, max_bin=256 (XGBoost counts bins differently)"
    if lib == "catboost":
        if shape.leafwise:
            return (f"grow_policy=Lossguide, max_leaves={leaves}, depth<={CATBOOST_MAX_DEPTH} "
                    "(its cap), min_data_in_leaf=20, border_count=254, no bootstrap "
                    "(CatBoost's default is oblivious trees)")
        return (f"OBLIVIOUS (symmetric) trees of depth {d}, border_count=254, no bootstrap: "
                "compare with bonsai-oblivious")
    if lib == "sklearn":
        return (f"HistGradientBoosting, leaf-wise, max_leaf_nodes={leaves}, "
                + ("no depth limit" if d == 0 else f"depth {d}") + "; binning in fit")
    if lib in BONSAI_POLICY:
        return f"grow_policy={_bonsai_policy(lib, shape)}, " + ", ".join(
            f"{k}={v}" for k, v in _bonsai_tree_params(lib, shape).items()
            if k != "grow_policy")
    return ""


# ----------------------------------------------------------------- library adapters
# Each adapter: (shape, task, n_classes, X, y, threads) -> (build_s, fit_s, predict_fn, model)
# predict_fn(X) returns P(class 1) (binary), class probabilities (n, K) (multiclass)
# or values (regression); model is the library's trained object (bench_predict uses it).
def _prepare_lightgbm(threads):
    import lightgbm  # noqa: F401


def run_lightgbm(shape, task, n_classes, X, y, threads):
    import lightgbm as lgb
    params = {
        "objective": task, "learning_rate": COMMON["learning_rate"],
        "num_leaves": shape.num_leaves(), "max_depth": shape.max_depth or -1,
        "min_child_samples": COMMON["min_child_samples"],
        "min_child_weight": COMMON["min_child_weight"],
        "reg_lambda": COMMON["reg_lambda"], "max_bin": COMMON["max_bin"],
        "num_threads": threads, "seed": COMMON["seed"], "verbose": -1,
    }
    if task == "multiclass":
        params["num_class"] = n_classes
    t0 = time.perf_counter()
    ds = lgb.Dataset(X, label=y, params={"max_bin": COMMON["max_bin"], "verbose": -1,
                                         "num_threads": threads}).construct()
    t1 = time.perf_counter()
    booster = lgb.train(params, ds, num_boost_round=shape.rounds)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, booster.predict, booster


def _prepare_xgboost(threads):
    import xgboost  # noqa: F401


def run_xgboost(shape, task, n_classes, X, y, threads):
    import xgboost as xgb
    objective = {"binary": "binary:logistic", "regression": "reg:squarederror",
                 "multiclass": "multi:softprob"}[task]
    params = {
        "objective": objective, "tree_method": "hist", "eta": COMMON["learning_rate"],
        "max_depth": shape.max_depth, "max_bin": COMMON["max_bin"] + 1,
        "reg_lambda": COMMON["reg_lambda"], "min_child_weight": COMMON["min_child_weight"],
        "nthread": threads, "seed": COMMON["seed"], "verbosity": 0,
    }
    if shape.leafwise:
        params.update(grow_policy="lossguide", max_leaves=shape.num_leaves())
    if task == "multiclass":
        params["num_class"] = n_classes
    t0 = time.perf_counter()
    dtrain = xgb.QuantileDMatrix(X, label=y, max_bin=params["max_bin"], nthread=threads)
    t1 = time.perf_counter()
    booster = xgb.train(params, dtrain, num_boost_round=shape.rounds)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, lambda Xt: booster.inplace_predict(Xt), booster


def _prepare_catboost(threads):
    import catboost  # noqa: F401


def run_catboost(shape, task, n_classes, X, y, threads):
    import catboost as cb
    params = {
        "loss_function": {"binary": "Logloss", "regression": "RMSE",
                          "multiclass": "MultiClass"}[task],
        "iterations": shape.rounds, "learning_rate": COMMON["learning_rate"],
        "depth": shape.max_depth, "l2_leaf_reg": COMMON["reg_lambda"],
        "border_count": COMMON["max_bin"] - 1, "bootstrap_type": "No",
        "thread_count": threads, "random_seed": COMMON["seed"],
        "verbose": False, "allow_writing_files": False,
    }
    if shape.leafwise:
        params.update(grow_policy="Lossguide", max_leaves=shape.num_leaves(),
                      depth=shape.max_depth or CATBOOST_MAX_DEPTH,
                      min_data_in_leaf=COMMON["min_child_samples"])
    t0 = time.perf_counter()
    pool = cb.Pool(X, label=y)
    pool.quantize(border_count=params["border_count"])
    t1 = time.perf_counter()
    model = cb.CatBoost(params).fit(pool)
    t2 = time.perf_counter()
    if task == "regression":
        return t1 - t0, t2 - t1, lambda Xt: model.predict(Xt, thread_count=threads), model

    def predict(Xt):
        p = model.predict(Xt, prediction_type="Probability", thread_count=threads)
        return p[:, 1] if task == "binary" else p
    return t1 - t0, t2 - t1, predict, model


def _prepare_sklearn(threads):
    import sklearn.ensemble  # noqa: F401


def run_sklearn(shape, task, n_classes, X, y, threads):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from threadpoolctl import threadpool_limits
    cls = HistGradientBoostingRegressor if task == "regression" else HistGradientBoostingClassifier
    model = cls(learning_rate=COMMON["learning_rate"], max_iter=shape.rounds,
                max_depth=shape.max_depth or None, max_leaf_nodes=shape.num_leaves(),
                min_samples_leaf=COMMON["min_child_samples"],
                l2_regularization=COMMON["reg_lambda"], max_bins=COMMON["max_bin"],
                early_stopping=False, random_state=COMMON["seed"])
    with threadpool_limits(limits=threads, user_api="openmp"):
        t0 = time.perf_counter()
        model.fit(X, y)                    # binning happens inside fit: build_s = 0
        t1 = time.perf_counter()

    def predict(Xt):
        with threadpool_limits(limits=threads, user_api="openmp"):
            if task == "regression":
                return model.predict(Xt)
            p = model.predict_proba(Xt)
            return p[:, 1] if task == "binary" else p
    return 0.0, t1 - t0, predict, model


def _bonsai_policy(lib, shape):
    return BONSAI_POLICY[lib] or ("leafwise" if shape.leafwise else "depthwise")


def _bonsai_tree_params(lib, shape):
    """grow_policy, max_depth (and max_leaves) of a bonsai variant on ``shape``."""
    policy = _bonsai_policy(lib, shape)
    if policy == "leafwise":
        return {"grow_policy": policy, "max_leaves": shape.num_leaves(),
                "max_depth": shape.max_depth}
    return {"grow_policy": policy, "max_depth": shape.max_depth or 8}


def _bonsai_params(lib, shape, task, n_classes, threads):
    params = {
        "objective": BONSAI_OBJECTIVE[task], "learning_rate": COMMON["learning_rate"],
        "max_bin": COMMON["max_bin"], "min_child_samples": COMMON["min_child_samples"],
        "min_child_weight": COMMON["min_child_weight"], "reg_lambda": COMMON["reg_lambda"],
        "n_threads": threads, "random_state": COMMON["seed"],
        **_bonsai_tree_params(lib, shape),
    }
    if task == "multiclass":
        params["num_class"] = n_classes
    return params


def _prepare_bonsai(threads):
    """Import bonsai and compile its kernels, so the timed fit excludes JIT."""
    import inspect

    import bonsai
    warmup = getattr(bonsai, "warmup", None)
    if warmup is not None:
        # only the kernels of fits large enough to share between threads, as the timed
        # ones are: the small fits' kernels would add ~20 MiB of loaded code to the peak
        if "small" in inspect.signature(warmup).parameters:
            warmup(small=False)
        else:
            warmup()
        return
    # No warmup(): compile by fitting tiny problems with every configuration we time.
    rng = np.random.default_rng(0)
    Xs = rng.standard_normal((2000, 10)).astype(np.float32)
    Xs[::7, 3] = np.nan
    ys = (Xs[:, 0] + Xs[:, 1] > 0).astype(np.float32)
    tiny = Shape("", rounds=2, max_depth=3)
    for task, yt, k in (("binary", ys, 2), ("regression", Xs[:, 2], 1),
                        ("multiclass", ys + (Xs[:, 4] > 0), 3)):
        for lib in ("bonsai-depthwise", "bonsai-leafwise", "bonsai-oblivious"):
            ds = bonsai.Dataset(Xs, label=yt, max_bin=COMMON["max_bin"])
            bonsai.train(_bonsai_params(lib, tiny, task, k, threads), ds,
                         num_boost_round=2).predict(Xs)


#: rows of the timed data the bonsai warm-up fits on (``_warm_bonsai_on_data``)
WARM_ROWS = 20_000


def _warm_bonsai_on_data(lib, shape, task, n_classes, X, y, Xte, threads):
    """``--bonsai-warmup data`` (the default): compile (first process) or load from
    numba's cache the kernels of exactly this fit, as a user's process holds them --
    a 2-round fit of this row's parameters on the first ``WARM_ROWS`` rows and a
    prediction, twice: as is, and with bonsai's work-splitting thresholds lowered, so
    the parallel kernels of the large fit load too.  (``bonsai.warmup(small=False)``,
    ``--bonsai-warmup all``, loads every configuration's kernels: about 28 MiB more
    resident on 1M x 28 leaf-wise, which a process fitting one model never holds.)"""
    import bonsai
    tiny = shape._replace(rounds=2)
    for ctx in C.bonsai_warm_contexts():
        with ctx():
            ds = bonsai.Dataset(X[:WARM_ROWS], label=y[:WARM_ROWS], max_bin=COMMON["max_bin"])
            bonsai.train(_bonsai_params(lib, tiny, task, n_classes, threads), ds,
                         num_boost_round=2).predict(Xte[:100])


def _make_run_bonsai(lib):
    def run_bonsai(shape, task, n_classes, X, y, threads):
        import bonsai
        t0 = time.perf_counter()
        ds = bonsai.Dataset(X, label=y, max_bin=COMMON["max_bin"])
        t1 = time.perf_counter()
        booster = bonsai.train(_bonsai_params(lib, shape, task, n_classes, threads), ds,
                               num_boost_round=shape.rounds)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, booster.predict, booster
    return run_bonsai


LIBS = {
    "lightgbm": (_prepare_lightgbm, run_lightgbm),
    "xgboost": (_prepare_xgboost, run_xgboost),
    "catboost": (_prepare_catboost, run_catboost),
    "sklearn": (_prepare_sklearn, run_sklearn),
    **{lib: (_prepare_bonsai, _make_run_bonsai(lib)) for lib in BONSAI_POLICY},
}


# --------------------------------------------------------------------------- metrics
def score(task, n_classes, y, pred):
    """{metric name: value} for the task (see METRICS)."""
    if task == "binary":
        from sklearn.metrics import roc_auc_score
        return {"auc": float(roc_auc_score(y, np.asarray(pred, np.float64).ravel()))}
    if task == "regression":
        pred = np.asarray(pred, np.float64).ravel()
        return {"rmse": float(np.sqrt(np.mean((pred - y.astype(np.float64)) ** 2)))}
    proba = np.asarray(pred, np.float64).reshape(len(y), n_classes)
    labels = y.astype(np.int64)
    p_true = np.clip(proba[np.arange(len(y)), labels] / proba.sum(axis=1), 1e-15, 1.0)
    return {"accuracy": float(np.mean(np.argmax(proba, axis=1) == labels)),
            "mlogloss": float(-np.mean(np.log(p_true)))}


# --------------------------------------------------------------------------- worker
def shape_of(shape_name, family="default"):
    """``SHAPES[shape_name]`` on ``family``'s version of its data set (``_families``)."""
    shape = SHAPES[shape_name]
    return shape._replace(data=F.data_name(shape.data, family))


def worker(lib, shape_name, rows, threads, rounds, family="default", bonsai_warmup="data"):
    """Runs inside the fresh subprocess: load data, measure, emit one JSON result."""
    shape = shape_of(shape_name, family)
    if rounds:
        shape = shape._replace(rounds=rounds)
    data = C.DATASETS[shape.data]
    task, n_classes = data.task, data.n_classes
    Xtr, ytr, Xte, yte = C.load_cached(shape.data, rows)
    base = C.peak_rss_mib()                 # baseline: interpreter + numpy + the data
    prepare, run = LIBS[lib]
    is_bonsai = lib in BONSAI_POLICY
    t0 = time.perf_counter()
    if is_bonsai and bonsai_warmup == "data":   # import + this fit's kernels
        _warm_bonsai_on_data(lib, shape, task, n_classes, Xtr, ytr, Xte, threads)
    else:
        prepare(threads)                    # import (+ JIT warm-up for bonsai)
    import_s = time.perf_counter() - t0
    ready = C.rss_mib()                     # library resident, kernels compiled
    kernels = C.bonsai_kernels_loaded() if is_bonsai else 0
    peak_reset = C.reset_peak_rss()         # drop the import / warm-up transient peak
    build_s, fit_s, predict, _ = run(shape, task, n_classes, Xtr, ytr, threads)
    peak = C.peak_rss_mib()
    kernels = C.bonsai_kernels_loaded() - kernels if is_bonsai else None
    peak_mib = peak - base                  # the headline number: over the data baseline
    fit_mib = peak - ready                  # what build + fit alone allocated
    t0 = time.perf_counter()
    pred = predict(Xte)
    predict_s = time.perf_counter() - t0
    metrics = score(task, n_classes, yte, pred)
    metric_name = METRICS[task][0]
    C.emit_result(dict(lib=lib, shape=shape_name, family=family, rounds=shape.rounds,
                       build_s=build_s, fit_s=fit_s, total_s=build_s + fit_s, predict_s=predict_s,
                       import_s=import_s, lib_mib=ready - base, peak_mib=peak_mib,
                       fit_mib=fit_mib, peak_reset=peak_reset, metrics=metrics,
                       metric_name=metric_name, metric=metrics[metric_name],
                       bonsai_warmup=bonsai_warmup if is_bonsai else None,
                       kernels_loaded_in_fit=kernels))


# --------------------------------------------------------------------------- parent
def _metrics_text(res):
    return "  ".join(f"{k} {v:.4f}" for k, v in res["metrics"].items())


def run_shape(shape_name, libs, args):
    shape = shape_of(shape_name, args.family)
    rounds = args.rounds or shape.rounds
    data = C.DATASETS[shape.data]
    rows = args.rows or data.rows
    t0 = time.perf_counter()
    path = C.ensure_cached(shape.data, rows)
    task = data.task + (f", {data.n_classes} classes" if data.task == "multiclass" else "")
    print(f"\n=== {shape_name}: data '{shape.data}' {rows:,} rows x {data.features} features "
          f"({task}), {rounds} rounds, {shape.describe()}, lr {COMMON['learning_rate']}, "
          f"threads {args.threads}; data {path} ({time.perf_counter() - t0:.1f}s)")
    results = {lib: [] for lib in libs}
    for rep in range(args.repeats):
        for lib in libs:                    # interleaved: every lib once per repeat
            argv = [os.path.abspath(__file__), "--worker", lib, "--shape", shape_name,
                    "--rows", str(rows), "--threads", str(args.threads),
                    "--rounds", str(rounds), "--family", args.family,
                    "--bonsai-warmup", args.bonsai_warmup]
            res = C.run_child(argv, C.child_env(args.threads), args.timeout)
            res.setdefault("lib", lib)
            results[lib].append(res)
            if "error" in res:
                line = f"ERROR {res['error']}"
            else:
                line = (f"total {res['total_s']:7.2f}s (build {res['build_s']:.2f} + "
                        f"fit {res['fit_s']:.2f})  peak {res['peak_mib']:7.0f} MiB  "
                        f"{_metrics_text(res)}")
                if res.get("kernels_loaded_in_fit"):
                    line += f"  (+{res['kernels_loaded_in_fit']} kernels loaded in the timed fit)"
            print(f"  [rep {rep + 1}/{args.repeats}] {lib:<16} {line}{C.busy_note(res)}",
                  flush=True)
    return summarize(shape_name, libs, results, args.repeats, args.family), results


def _medians(libs, results):
    med = {}
    for lib in libs:
        ok = [r for r in results[lib] if "error" not in r]
        if ok:
            med[lib] = {k: C.median_or_none([r.get(k) for r in ok])
                        for k in ("build_s", "fit_s", "total_s", "predict_s",
                                  "import_s", "lib_mib", "peak_mib", "fit_mib")}
            med[lib]["metrics"] = {m: C.median_or_none([r["metrics"][m] for r in ok])
                                   for m in ok[0]["metrics"]}
            med[lib]["n_ok"] = len(ok)
    return med


def compare(med):
    """bonsai variants vs the faster (time) / better (each metric) of LightGBM, XGBoost.

    Returns {bonsai lib: {"time_ratio", "fastest", "metrics": {m: (diff, best lib)}}}
    plus the reference values under key None.
    """
    peers = [p for p in PEERS if p in med]
    if not peers:
        return {}
    fastest = min(peers, key=lambda p: med[p]["total_s"])
    best = {}
    for m in next(iter(med.values()))["metrics"]:
        sign = 1.0 if HIGHER_IS_BETTER[m] else -1.0
        best[m] = max(peers, key=lambda p: sign * med[p]["metrics"][m])
    out = {None: {"fastest": fastest, "best": best}}
    for lib, m in med.items():
        if lib in BONSAI_POLICY:
            out[lib] = {"time_ratio": m["total_s"] / med[fastest]["total_s"],
                        "metrics": {k: m["metrics"][k] - med[best[k]]["metrics"][k]
                                    for k in best}}
    return out


def summarize(shape_name, libs, results, repeats, family="default"):
    shape = shape_of(shape_name, family)
    med = _medians(libs, results)
    cmp = compare(med)
    metric_names = list(METRICS[C.DATASETS[shape.data].task])
    headers = (["library", "ok", "build s", "fit s", "total s", "predict s", "peak MiB",
                "fit MiB"] + metric_names + ["time vs peer"]
               + [f"{m} vs peer" for m in metric_names])
    def row(lib, m):
        if lib in cmp:
            extra = ([f"{cmp[lib]['time_ratio']:.2f}x"]
                     + [f"{cmp[lib]['metrics'][k]:+.4f}" for k in metric_names])
        else:
            extra = ["-"] * (1 + len(metric_names))
        return ([C.fmt(m["build_s"]), C.fmt(m["fit_s"]), C.fmt(m["total_s"]),
                 C.fmt(m["predict_s"]), C.fmt(m["peak_mib"], ".0f"), C.fmt(m["fit_mib"], ".0f")]
                + [C.fmt(m["metrics"].get(k), ".4f") for k in metric_names] + extra)

    title = shape_name if family == "default" else f"{shape_name} ({family} family)"
    C.print_results(f"{title}: medians of {repeats} interleaved run(s)", headers, libs,
                    results, med, repeats, row)
    print("peak MiB = peak RSS during dataset build + fit minus the RSS of the same process "
          "after it loaded the data\n  (so it includes the imported library, but not "
          "transient import / JIT warm-up peaks);\n  fit MiB = the same peak minus the RSS "
          "just before the build (library imported, bonsai kernels compiled).")
    if None in cmp:
        ref = cmp[None]
        fastest = ref["fastest"]
        print(f"time vs peer = bonsai total s / the faster of {', '.join(p for p in PEERS if p in med)}"
              f" ({fastest}, {med[fastest]['total_s']:.2f}s); < 1 means bonsai is faster.")
        for k, p in ref["best"].items():
            better = "higher" if HIGHER_IS_BETTER[k] else "lower"
            print(f"{k} vs peer = bonsai {k} - the better peer's ({p}, "
                  f"{med[p]['metrics'][k]:.4f}); {better} is better.")
        for lib in libs:
            if lib in cmp:
                c = cmp[lib]
                parts = [f"{k} {d:+.4f}" for k, d in c["metrics"].items()]
                print(f">> {lib} on {shape_name}: time {c['time_ratio']:.2f}x the fastest "
                      f"peer, " + ", ".join(parts) + " vs the better peer")
    for lib in libs:
        note = lib_note(lib, shape)
        if note:
            print(f"  note {lib}: {note}")
    return {"medians": med, "compare": {str(k): v for k, v in cmp.items()}}


def print_overview(summaries):
    """One line per (shape, bonsai variant) when several shapes ran."""
    rows = []
    for shape_name, summ in summaries.items():
        for lib, c in summ["compare"].items():
            if lib == "None":
                continue
            metrics = ", ".join(f"{k} {d:+.4f}" for k, d in c["metrics"].items())
            rows.append([shape_name, lib, f"{c['time_ratio']:.2f}x", metrics])
    if rows:
        print("\n=== overview: bonsai vs the faster (time) / better (metric) of "
              f"{' and '.join(PEERS)} ===")
        C.print_table(["shape", "variant", "time vs peer", "metric - best peer"], rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="all", help=f"one of {', '.join(SHAPES)}, or all "
                    "(comma list accepted)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--libs", default=DEFAULT_LIBS,
                    help=f"comma list from: {', '.join(LIBS)}")
    ap.add_argument("--rows", type=int, default=None,
                    help="total rows (train + 10%% test) instead of the shape's default")
    ap.add_argument("--rounds", type=int, default=None,
                    help="boosting rounds instead of the shape's default")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per fit")
    ap.add_argument("--json", default=None, help="also write raw results here")
    ap.add_argument("--family", default="default", choices=F.FAMILIES,
                    help="data family (benchmarks/_families.py); default: _common's own "
                    "generators")
    ap.add_argument("--bonsai-warmup", default="data", choices=("data", "all"),
                    help="data (default): bonsai loads the kernels of the timed fit only "
                    "(a 2-round fit on its first rows); all: bonsai.warmup(small=False), "
                    "every configuration's kernels (the peak RSS then counts them)")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        worker(args.worker, args.shape, args.rows, args.threads, args.rounds, args.family,
               args.bonsai_warmup)
        return 0
    libs = [s.strip() for s in args.libs.split(",") if s.strip()]
    unknown = [lib for lib in libs if lib not in LIBS]
    if unknown:
        ap.error(f"unknown libs {unknown}; choose from {list(LIBS)}")
    shapes = (list(SHAPES) if args.shape == "all"
              else [s.strip() for s in args.shape.split(",") if s.strip()])
    bad = [s for s in shapes if s not in SHAPES]
    if bad:
        ap.error(f"unknown shape(s) {bad}; choose from {list(SHAPES)} or all")
    print(f"bench_fit: python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"threads {args.threads}, repeats {args.repeats}, libs {','.join(libs)}, "
          f"family {args.family}, bonsai warm-up {args.bonsai_warmup}")
    summaries, all_results = {}, {}
    for shape_name in shapes:
        summaries[shape_name], all_results[shape_name] = run_shape(shape_name, libs, args)
    if len(shapes) > 1:
        print_overview(summaries)
    C.dump_json(args.json, all_results, summaries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
