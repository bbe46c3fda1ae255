"""Fit-time / peak-memory / accuracy benchmark: bonsai against its peers.

    python benchmarks/bench_fit.py --shape higgs|year|all --repeats 3 --threads 2 \
        --libs bonsai,lightgbm,xgboost,catboost,sklearn [--rows N]

Every (library, repeat) fit runs in a fresh interpreter that loads the same cached
.npy arrays; libraries are interleaved within each repeat and medians are reported.
See benchmarks/README.md for what is measured and how.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

import _common as C

# The configuration every library is mapped onto (see README.md).
COMMON = dict(rounds=200, learning_rate=0.1, max_depth=8, max_bin=255, num_leaves=255,
              min_child_samples=20, min_child_weight=1e-3, reg_lambda=1.0, seed=0)

PEERS = ("lightgbm", "xgboost")           # "fastest peer" for bonsai's ratio
DEFAULT_LIBS = "bonsai,lightgbm,xgboost,catboost,sklearn"
NOTES = {
    "lightgbm": "leaf-wise, num_leaves=255 capped at depth 8",
    "xgboost": "depth-wise hist, max_bin=256 (XGBoost counts bins differently)",
    "catboost": "OBLIVIOUS (symmetric) trees of depth 8, border_count=254, no bootstrap",
    "sklearn": "HistGradientBoosting, leaf-wise, max_leaf_nodes=255, depth 8; binning in fit",
    "bonsai": "grow_policy=depthwise",
    "bonsai-leafwise": "grow_policy=leafwise, max_leaves=255, depth 8",
    "bonsai-oblivious": "grow_policy=oblivious, depth 8 (compare with catboost)",
}
# bonsai objective names used with the native train() API.
BONSAI_OBJECTIVE = {"binary": "binary", "regression": "squared_error"}


# ----------------------------------------------------------------- library adapters
# Each adapter: (task, X, y, threads, rounds) -> (build_s, fit_s, predict_fn)
# predict_fn(X) returns probabilities of class 1 (binary) or values (regression).
def _prepare_lightgbm(threads):
    import lightgbm  # noqa: F401


def run_lightgbm(task, X, y, threads, rounds):
    import lightgbm as lgb
    params = {
        "objective": task, "learning_rate": COMMON["learning_rate"],
        "num_leaves": COMMON["num_leaves"], "max_depth": COMMON["max_depth"],
        "min_child_samples": COMMON["min_child_samples"],
        "min_child_weight": COMMON["min_child_weight"],
        "reg_lambda": COMMON["reg_lambda"], "max_bin": COMMON["max_bin"],
        "num_threads": threads, "seed": COMMON["seed"], "verbose": -1,
    }
    t0 = time.perf_counter()
    ds = lgb.Dataset(X, label=y, params={"max_bin": COMMON["max_bin"], "verbose": -1,
                                         "num_threads": threads}).construct()
    t1 = time.perf_counter()
    booster = lgb.train(params, ds, num_boost_round=rounds)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, booster.predict


def _prepare_xgboost(threads):
    import xgboost  # noqa: F401


def run_xgboost(task, X, y, threads, rounds):
    import xgboost as xgb
    params = {
        "objective": "binary:logistic" if task == "binary" else "reg:squarederror",
        "tree_method": "hist", "eta": COMMON["learning_rate"],
        "max_depth": COMMON["max_depth"], "max_bin": COMMON["max_bin"] + 1,
        "reg_lambda": COMMON["reg_lambda"], "min_child_weight": COMMON["min_child_weight"],
        "nthread": threads, "seed": COMMON["seed"], "verbosity": 0,
    }
    t0 = time.perf_counter()
    dtrain = xgb.QuantileDMatrix(X, label=y, max_bin=params["max_bin"], nthread=threads)
    t1 = time.perf_counter()
    booster = xgb.train(params, dtrain, num_boost_round=rounds)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, lambda Xt: booster.inplace_predict(Xt)


def _prepare_catboost(threads):
    import catboost  # noqa: F401


def run_catboost(task, X, y, threads, rounds):
    import catboost as cb
    params = {
        "loss_function": "Logloss" if task == "binary" else "RMSE",
        "iterations": rounds, "learning_rate": COMMON["learning_rate"],
        "depth": COMMON["max_depth"], "l2_leaf_reg": COMMON["reg_lambda"],
        "border_count": COMMON["max_bin"] - 1, "bootstrap_type": "No",
        "thread_count": threads, "random_seed": COMMON["seed"],
        "verbose": False, "allow_writing_files": False,
    }
    t0 = time.perf_counter()
    pool = cb.Pool(X, label=y)
    pool.quantize(border_count=params["border_count"])
    t1 = time.perf_counter()
    model = cb.CatBoost(params).fit(pool)
    t2 = time.perf_counter()
    if task == "binary":
        return t1 - t0, t2 - t1, lambda Xt: model.predict(Xt, prediction_type="Probability",
                                                         thread_count=threads)[:, 1]
    return t1 - t0, t2 - t1, lambda Xt: model.predict(Xt, thread_count=threads)


def _prepare_sklearn(threads):
    import sklearn.ensemble  # noqa: F401


def run_sklearn(task, X, y, threads, rounds):
    from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
    from threadpoolctl import threadpool_limits
    cls = HistGradientBoostingClassifier if task == "binary" else HistGradientBoostingRegressor
    model = cls(learning_rate=COMMON["learning_rate"], max_iter=rounds,
                max_depth=COMMON["max_depth"], max_leaf_nodes=COMMON["num_leaves"],
                min_samples_leaf=COMMON["min_child_samples"],
                l2_regularization=COMMON["reg_lambda"], max_bins=COMMON["max_bin"],
                early_stopping=False, random_state=COMMON["seed"])
    with threadpool_limits(limits=threads, user_api="openmp"):
        t0 = time.perf_counter()
        model.fit(X, y)                    # binning happens inside fit: build_s = 0
        t1 = time.perf_counter()

    def predict(Xt):
        with threadpool_limits(limits=threads, user_api="openmp"):
            return model.predict_proba(Xt)[:, 1] if task == "binary" else model.predict(Xt)
    return 0.0, t1 - t0, predict


def _bonsai_params(task, threads, policy):
    params = {
        "objective": BONSAI_OBJECTIVE[task], "learning_rate": COMMON["learning_rate"],
        "grow_policy": policy, "max_depth": COMMON["max_depth"],
        "max_bin": COMMON["max_bin"], "min_child_samples": COMMON["min_child_samples"],
        "min_child_weight": COMMON["min_child_weight"], "reg_lambda": COMMON["reg_lambda"],
        "n_threads": threads, "random_state": COMMON["seed"],
    }
    if policy == "leafwise":
        params["max_leaves"] = COMMON["num_leaves"]
    return params


def _prepare_bonsai(threads):
    """Import bonsai and compile its kernels, so the timed fit excludes JIT."""
    import bonsai
    warmup = getattr(bonsai, "warmup", None)
    if warmup is not None:
        warmup()
        return
    # No warmup(): compile by fitting tiny problems with every configuration we time.
    rng = np.random.default_rng(0)
    Xs = rng.standard_normal((2000, 10)).astype(np.float32)
    ys = (Xs[:, 0] + Xs[:, 1] > 0).astype(np.float32)
    for task, yt in (("binary", ys), ("regression", Xs[:, 2])):
        for policy in ("depthwise", "leafwise", "oblivious"):
            ds = bonsai.Dataset(Xs, label=yt, max_bin=COMMON["max_bin"])
            bonsai.train(_bonsai_params(task, threads, policy), ds,
                         num_boost_round=2).predict(Xs)


def _make_run_bonsai(policy):
    def run_bonsai(task, X, y, threads, rounds):
        import bonsai
        t0 = time.perf_counter()
        ds = bonsai.Dataset(X, label=y, max_bin=COMMON["max_bin"])
        t1 = time.perf_counter()
        booster = bonsai.train(_bonsai_params(task, threads, policy), ds,
                               num_boost_round=rounds)
        t2 = time.perf_counter()
        return t1 - t0, t2 - t1, booster.predict
    return run_bonsai


LIBS = {
    "lightgbm": (_prepare_lightgbm, run_lightgbm),
    "xgboost": (_prepare_xgboost, run_xgboost),
    "catboost": (_prepare_catboost, run_catboost),
    "sklearn": (_prepare_sklearn, run_sklearn),
    "bonsai": (_prepare_bonsai, _make_run_bonsai("depthwise")),
    "bonsai-leafwise": (_prepare_bonsai, _make_run_bonsai("leafwise")),
    "bonsai-oblivious": (_prepare_bonsai, _make_run_bonsai("oblivious")),
}


# --------------------------------------------------------------------------- worker
def worker(lib, shape, rows, threads, rounds):
    """Runs inside the fresh subprocess: load data, measure, emit one JSON result."""
    task = C.SHAPES[shape][3]
    Xtr, ytr, Xte, yte = C.load_cached(shape, rows)
    base = C.peak_rss_mib()                 # baseline: interpreter + numpy + the data
    prepare, run = LIBS[lib]
    t0 = time.perf_counter()
    prepare(threads)                        # import (+ JIT warm-up for bonsai)
    import_s = time.perf_counter() - t0
    ready = C.rss_mib()                     # library resident, kernels compiled
    peak_reset = C.reset_peak_rss()         # drop the import / warm-up transient peak
    build_s, fit_s, predict = run(task, Xtr, ytr, threads, rounds)
    peak = C.peak_rss_mib()
    peak_mib = peak - base                  # the headline number: over the data baseline
    fit_mib = peak - ready                  # what build + fit alone allocated
    t0 = time.perf_counter()
    pred = np.asarray(predict(Xte), dtype=np.float64).ravel()
    predict_s = time.perf_counter() - t0
    if task == "binary":
        from sklearn.metrics import roc_auc_score
        metric_name, metric = "auc", float(roc_auc_score(yte, pred))
    else:
        metric_name = "rmse"
        metric = float(np.sqrt(np.mean((pred - yte.astype(np.float64)) ** 2)))
    C.emit_result(dict(lib=lib, shape=shape, build_s=build_s, fit_s=fit_s,
                       total_s=build_s + fit_s, predict_s=predict_s, import_s=import_s,
                       lib_mib=ready - base, peak_mib=peak_mib, fit_mib=fit_mib,
                       peak_reset=peak_reset,
                       metric_name=metric_name, metric=metric))


# --------------------------------------------------------------------------- parent
def run_shape(shape, libs, args):
    rows = args.rows or C.SHAPES[shape][1]
    t0 = time.perf_counter()
    path = C.ensure_cached(shape, rows)
    d = C.SHAPES[shape][2]
    print(f"\n=== {shape}: {rows:,} rows x {d} features ({C.SHAPES[shape][3]}), "
          f"{args.rounds} rounds, depth {COMMON['max_depth']}, lr {COMMON['learning_rate']}, "
          f"threads {args.threads}; data {path} ({time.perf_counter() - t0:.1f}s)")
    results = {lib: [] for lib in libs}
    for rep in range(args.repeats):
        for lib in libs:                    # interleaved: every lib once per repeat
            argv = [os.path.abspath(__file__), "--worker", lib, "--shape", shape, "--rows", str(rows),
                    "--threads", str(args.threads), "--rounds", str(args.rounds)]
            res = C.run_child(argv, C.child_env(args.threads), args.timeout)
            res.setdefault("lib", lib)
            results[lib].append(res)
            if "error" in res:
                line = f"ERROR {res['error']}"
            else:
                line = (f"total {res['total_s']:7.2f}s (build {res['build_s']:.2f} + "
                        f"fit {res['fit_s']:.2f})  peak {res['peak_mib']:7.0f} MiB  "
                        f"{res['metric_name']} {res['metric']:.4f}")
            print(f"  [rep {rep + 1}/{args.repeats}] {lib:<16} {line}{C.busy_note(res)}",
                  flush=True)
    summarize(shape, libs, results, args.repeats)
    return results


def summarize(shape, libs, results, repeats):
    med = {}
    for lib in libs:
        ok = [r for r in results[lib] if "error" not in r]
        if ok:
            med[lib] = {k: C.median_or_none([r.get(k) for r in ok])
                        for k in ("build_s", "fit_s", "total_s", "predict_s",
                                  "import_s", "lib_mib", "peak_mib", "fit_mib",
                                  "metric")}
            med[lib]["n_ok"] = len(ok)
            med[lib]["metric_name"] = ok[0]["metric_name"]
    peers = [p for p in PEERS if p in med]
    fastest_peer = min(med[p]["total_s"] for p in peers) if peers else None
    metric_name = next((m["metric_name"] for m in med.values()), "metric")
    headers = ["library", "ok", "build s", "fit s", "total s", "predict s", "peak MiB",
               "fit MiB", metric_name, "vs fastest peer"]
    rows, errors = [], []
    for lib in libs:
        errors += [f"  {lib}: {r['error']}" for r in results[lib] if "error" in r][-1:]
        if lib not in med:
            rows.append([lib, f"0/{repeats}", "ERROR"] + ["-"] * 7)
            continue
        m = med[lib]
        ratio = "-"
        if lib.startswith("bonsai") and fastest_peer:
            ratio = f"{m['total_s'] / fastest_peer:.2f}x"
        rows.append([lib, f"{m['n_ok']}/{repeats}", C.fmt(m["build_s"]), C.fmt(m["fit_s"]),
                     C.fmt(m["total_s"]), C.fmt(m["predict_s"]), C.fmt(m["peak_mib"], ".0f"),
                     C.fmt(m["fit_mib"], ".0f"), C.fmt(m["metric"], ".4f"), ratio])
    print(f"\n--- {shape}: medians of {repeats} interleaved run(s) ---")
    C.print_table(headers, rows)
    if errors:
        print("errors (last per library):\n" + "\n".join(errors))
    busy = [r for lib in libs for r in results[lib] if C.busy_note(r)]
    if busy:
        worst = max(r["others_cores"] for r in busy)
        print(f"WARNING: {len(busy)} run(s) shared the CPU with other processes (up to "
              f"{worst:.1f} cores busy): timings are unreliable, rerun on an idle machine.")
    print("peak MiB = peak RSS during dataset build + fit minus the RSS of the same process "
          "after it loaded the data\n  (so it includes the imported library, but not "
          "transient import / JIT warm-up peaks);\n  fit MiB = the same peak minus the RSS "
          "just before the build (library imported, bonsai kernels compiled).")
    if fastest_peer:
        print(f"vs fastest peer = bonsai total / fastest of {', '.join(peers)} "
              f"({fastest_peer:.2f}s); < 1 means bonsai is faster.")
    for lib in libs:
        if lib in NOTES:
            print(f"  note {lib}: {NOTES[lib]}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--shape", default="all", choices=[*C.SHAPES, "all"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--libs", default=DEFAULT_LIBS,
                    help=f"comma list from: {', '.join(LIBS)}")
    ap.add_argument("--rows", type=int, default=None,
                    help="total rows (train + 10%% test) instead of the shape's default")
    ap.add_argument("--rounds", type=int, default=COMMON["rounds"])
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per fit")
    ap.add_argument("--json", default=None, help="also write raw results here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.worker:
        worker(args.worker, args.shape, args.rows, args.threads, args.rounds)
        return 0
    libs = [s.strip() for s in args.libs.split(",") if s.strip()]
    unknown = [lib for lib in libs if lib not in LIBS]
    if unknown:
        ap.error(f"unknown libs {unknown}; choose from {list(LIBS)}")
    shapes = list(C.SHAPES) if args.shape == "all" else [args.shape]
    print(f"bench_fit: python {sys.version.split()[0]}, numpy {np.__version__}, "
          f"threads {args.threads}, repeats {args.repeats}, libs {','.join(libs)}")
    all_results = {shape: run_shape(shape, libs, args) for shape in shapes}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(all_results, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
