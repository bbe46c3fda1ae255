"""Prediction benchmark: batch throughput and single-row latency, bonsai against its peers.

    python benchmarks/bench_predict.py --repeats 3 --threads 2 \
        --libs bonsai,lightgbm,xgboost,catboost,bonsai-oblivious [--rows N] [--rounds 200]

Each (library, repeat) runs in a fresh interpreter that trains one model on the cached
``higgs`` data (the ``higgs`` shape of bench_fit.py: 200 rounds, depth 8, same mapping
of parameters and the same thread count), then measures

(a) batch throughput: ``predict`` on ``--batch-rows`` rows (200k), median of 5 calls;
(b) single-row latency: ``--single-calls`` (1000) calls with one row each, after
    ``--single-warmup`` (100) untimed calls; p50 / p99 (XGBoost: ``inplace_predict``);
(c) oblivious trees: ``bonsai-oblivious`` (grow_policy="oblivious", depth 8) against
    CatBoost, whose default symmetric trees of depth 8 are oblivious, same tree count.

``bonsai-sklearn`` is the ``bonsai`` model trained and called through
``BonsaiClassifier`` (``predict_proba``: the estimator's own per-call overhead).

Libraries are interleaved within each repeat and medians over repeats are reported.
See benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

import _common as C
import bench_fit as F

DEFAULT_LIBS = "bonsai,lightgbm,xgboost,catboost,bonsai-oblivious"
LIBS = ("bonsai", "bonsai-oblivious", "bonsai-sklearn", "lightgbm", "xgboost", "catboost",
        "sklearn")
NOTES = {
    "bonsai": "grow_policy=depthwise, native Booster.predict (probabilities)",
    "bonsai-oblivious": "grow_policy=oblivious, Booster.predict (probabilities)",
    "bonsai-sklearn": "the bonsai model through BonsaiClassifier.predict_proba (n, 2)",
    "lightgbm": "leaf-wise, num_leaves=255 capped at depth 8; Booster.predict",
    "xgboost": "depth-wise hist; Booster.inplace_predict (batch and single rows)",
    "catboost": "OBLIVIOUS (symmetric, its default) depth 8; "
                "predict(prediction_type='Probability', thread_count)",
    "sklearn": "HistGradientBoostingClassifier.predict_proba under threadpool_limits",
}


def _n_trees(model):
    """Number of trees in a trained model, whatever the library (None if unknown)."""
    for attr in ("tree_count_", "n_iter_"):              # CatBoost, sklearn
        if hasattr(model, attr):
            return int(getattr(model, attr))
    for meth in ("num_trees", "num_boosted_rounds"):     # bonsai / LightGBM, XGBoost
        if hasattr(model, meth):
            return int(getattr(model, meth)())
    return None


def _batch_rows(Xtr, Xte, n):
    """``n`` rows for the batch test: the test set, topped up with training rows
    (tiled if the data set is smaller than ``n``), as one C-contiguous float32 array."""
    parts = [Xte, Xtr[:max(0, n - len(Xte))]]
    X = np.concatenate(parts)[:n]
    if len(X) < n:
        X = X[np.arange(n) % len(X)]
    return np.ascontiguousarray(X, dtype=np.float32)


def _run_bonsai_sklearn(shape, task, n_classes, X, y, threads):
    """The ``bonsai`` model (same parameters), fitted and called as a BonsaiClassifier."""
    from bonsai.sklearn import BonsaiClassifier
    params = F._bonsai_params("bonsai", shape, task, n_classes, threads)
    params.pop("objective")
    params.pop("num_class", None)
    t0 = time.perf_counter()
    clf = BonsaiClassifier(n_estimators=shape.rounds, verbose=0, **params).fit(X, y)
    return 0.0, time.perf_counter() - t0, clf.predict_proba, clf.booster_


_RUNNERS = {**F.LIBS, "bonsai-sklearn": (F._prepare_bonsai, _run_bonsai_sklearn)}


# --------------------------------------------------------------------------- worker
def worker(lib, args):
    """Runs in the fresh interpreter: train, then time batch and single-row predict."""
    from sklearn.metrics import roc_auc_score
    shape = F.Shape("higgs", rounds=args.rounds, max_depth=args.depth)
    Xtr, ytr, Xte, yte = C.load_cached("higgs", args.rows)
    prepare, run = _RUNNERS[lib]
    prepare(args.threads)                        # import (+ bonsai.warmup())
    build_s, fit_s, predict, model = run(shape, "binary", 2, Xtr, ytr, args.threads)
    score = np.asarray(predict(Xte), np.float64)
    auc = float(roc_auc_score(yte, score[:, -1] if score.ndim == 2 else score))

    # (a) batch throughput: one untimed call, then the median of --batch-repeats.
    Xb = _batch_rows(Xtr, Xte, args.batch_rows)
    del Xtr, ytr
    predict(Xb)
    batch = []
    for _ in range(args.batch_repeats):
        t0 = time.perf_counter()
        out = predict(Xb)
        batch.append(time.perf_counter() - t0)
    assert np.asarray(out).shape[0] == len(Xb)
    batch_s = statistics.median(batch)

    # (b) single-row latency: distinct one-row (1, F) C-contiguous views of the test set.
    n_calls = args.single_warmup + args.single_calls
    rows = [Xte[i % len(Xte):i % len(Xte) + 1] for i in range(n_calls)]
    for r in rows[:args.single_warmup]:
        predict(r)
    lat_ns = np.empty(args.single_calls, dtype=np.int64)
    clock = time.perf_counter_ns
    for i, r in enumerate(rows[args.single_warmup:]):
        t0 = clock()
        predict(r)
        lat_ns[i] = clock() - t0
    lat_us = lat_ns / 1e3
    C.emit_result(dict(
        lib=lib, train_s=build_s + fit_s, n_trees=_n_trees(model), auc=auc,
        batch_rows=len(Xb), batch_s=batch_s, batch_all_s=batch,
        rows_per_s=len(Xb) / batch_s,
        p50_us=float(np.percentile(lat_us, 50)), p99_us=float(np.percentile(lat_us, 99)),
        mean_us=float(lat_us.mean()), max_us=float(lat_us.max())))


# --------------------------------------------------------------------------- parent
KEYS = ("train_s", "n_trees", "auc", "batch_s", "rows_per_s", "p50_us", "p99_us", "mean_us")


def _ratio(num, den, spec=".2f"):
    return "n/a" if num is None or den in (None, 0) else f"{num / den:{spec}}x"


def summarize(libs, results, repeats):
    med = {}
    for lib in libs:
        ok = [r for r in results[lib] if "error" not in r]
        if ok:
            med[lib] = {k: C.median_or_none([r.get(k) for r in ok]) for k in KEYS}
            med[lib]["n_ok"] = len(ok)
    headers = ["library", "ok", "trees", "train s", "auc", "batch ms", "Mrows/s",
               "p50 us", "p99 us", "mean us"]
    def row(lib, m):
        return [C.fmt(m["n_trees"], ".0f"), C.fmt(m["train_s"]), C.fmt(m["auc"], ".4f"),
                C.fmt(m["batch_s"] and m["batch_s"] * 1e3, ".1f"),
                C.fmt(m["rows_per_s"] and m["rows_per_s"] / 1e6, ".3f"),
                C.fmt(m["p50_us"], ".1f"), C.fmt(m["p99_us"], ".1f"), C.fmt(m["mean_us"], ".1f")]

    C.print_results(f"predict: medians of {repeats} interleaved run(s)", headers, libs,
                    results, med, repeats, row)
    print("batch ms / Mrows/s: median of the timed batch calls (per run), then median over "
          "runs; p50 / p99 / mean us: one-row calls.")
    for lib in libs:
        print(f"  note {lib}: {NOTES[lib]}")

    def get(lib, key):
        return med.get(lib, {}).get(key)
    ratios = {
        "bonsai_vs_xgboost_throughput": (get("bonsai", "rows_per_s"), get("xgboost", "rows_per_s")),
        "bonsai_oblivious_vs_catboost_throughput": (get("bonsai-oblivious", "rows_per_s"),
                                                     get("catboost", "rows_per_s")),
        "bonsai_vs_lightgbm_throughput": (get("bonsai", "rows_per_s"), get("lightgbm", "rows_per_s")),
    }
    print("\nratios (> 1 means bonsai predicts more rows per second):")
    print(f">> (a) bonsai batch throughput / XGBoost's:            "
          f"{_ratio(*ratios['bonsai_vs_xgboost_throughput'])}")
    print(f">>     bonsai batch throughput / LightGBM's:           "
          f"{_ratio(*ratios['bonsai_vs_lightgbm_throughput'])}")
    print(f">> (c) bonsai-oblivious batch throughput / CatBoost's: "
          f"{_ratio(*ratios['bonsai_oblivious_vs_catboost_throughput'])}")
    peers_p50 = {p: get(p, "p50_us") for p in ("lightgbm", "xgboost", "catboost")
                 if get(p, "p50_us") is not None}
    p50 = get("bonsai", "p50_us")
    line = f">> (b) bonsai single-row p50: {C.fmt(p50, '.1f')} us (p99 {C.fmt(get('bonsai', 'p99_us'), '.1f')} us)"
    if peers_p50 and p50 is not None:
        best = min(peers_p50, key=peers_p50.get)
        line += f"; fastest peer {best} {peers_p50[best]:.1f} us ({p50 / peers_p50[best]:.2f}x)"
    print(line)
    if get("bonsai-sklearn", "p50_us") is not None:
        print(f">>     bonsai-sklearn single-row p50 (BonsaiClassifier.predict_proba): "
              f"{get('bonsai-sklearn', 'p50_us'):.1f} us")
    if get("bonsai-oblivious", "p50_us") is not None:
        print(f">>     bonsai-oblivious single-row p50: {get('bonsai-oblivious', 'p50_us'):.1f} us"
              + (f"; catboost {get('catboost', 'p50_us'):.1f} us"
                 if get("catboost", "p50_us") is not None else ""))
    t_obl, t_cb = get("bonsai-oblivious", "n_trees"), get("catboost", "n_trees")
    if t_obl is not None and t_cb is not None and t_obl != t_cb:
        print(f"WARNING: tree counts differ (bonsai-oblivious {t_obl:.0f}, catboost {t_cb:.0f}):"
              " the oblivious throughput ratio is not like for like.")
    return {"medians": med, "ratios": {k: (a / b if a is not None and b else None)
                                       for k, (a, b) in ratios.items()}}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3, help="interleaved runs per library")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--libs", default=DEFAULT_LIBS, help=f"comma list from: {', '.join(LIBS)}")
    ap.add_argument("--rows", type=int, default=None,
                    help="rows of the cached higgs data (train + 10%% test); default 1,000,000")
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--batch-rows", type=int, default=200_000)
    ap.add_argument("--batch-repeats", type=int, default=5)
    ap.add_argument("--single-calls", type=int, default=1000)
    ap.add_argument("--single-warmup", type=int, default=100)
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per run")
    ap.add_argument("--json", default=None, help="also write raw results here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args)
        return 0
    libs = [s.strip() for s in args.libs.split(",") if s.strip()]
    unknown = [lib for lib in libs if lib not in LIBS]
    if unknown:
        ap.error(f"unknown libs {unknown}; choose from {list(LIBS)}")
    rows = args.rows or C.DATASETS["higgs"].rows
    t0 = time.perf_counter()
    path = C.ensure_cached("higgs", rows)
    print(f"bench_predict: python {sys.version.split()[0]}, numpy {np.__version__}, threads "
          f"{args.threads}, repeats {args.repeats}, libs {','.join(libs)}\n"
          f"models: higgs {rows:,} rows (90% train), {args.rounds} rounds, depth {args.depth}; "
          f"data {path} ({time.perf_counter() - t0:.1f}s)\n"
          f"batch: {args.batch_rows:,} rows x {args.batch_repeats} timed calls; single row: "
          f"{args.single_calls} timed calls after {args.single_warmup} warm-up calls")
    passthrough = ["--rows", str(rows), "--threads", str(args.threads),
                   "--rounds", str(args.rounds), "--depth", str(args.depth),
                   "--batch-rows", str(args.batch_rows),
                   "--batch-repeats", str(args.batch_repeats),
                   "--single-calls", str(args.single_calls),
                   "--single-warmup", str(args.single_warmup)]
    results = {lib: [] for lib in libs}
    for rep in range(args.repeats):
        for lib in libs:                         # interleaved: every lib once per repeat
            res = C.run_child([os.path.abspath(__file__), "--worker", lib, *passthrough],
                              C.child_env(args.threads), args.timeout)
            res.setdefault("lib", lib)
            results[lib].append(res)
            if "error" in res:
                line = f"ERROR {res['error']}"
            else:
                line = (f"train {res['train_s']:6.2f}s  auc {res['auc']:.4f}  batch "
                        f"{res['batch_s'] * 1e3:8.1f} ms ({res['rows_per_s'] / 1e6:6.3f} Mrows/s)"
                        f"  row p50 {res['p50_us']:7.1f} us  p99 {res['p99_us']:7.1f} us")
            print(f"  [rep {rep + 1}/{args.repeats}] {lib:<16} {line}{C.busy_note(res)}",
                  flush=True)
    summary = summarize(libs, results, args.repeats)
    C.dump_json(args.json, results, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
