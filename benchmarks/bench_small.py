"""Small / medium data benchmark: the per-split cost of 300 leaf-wise rounds.

    python benchmarks/bench_small.py --entries all|generated|real|NAME,... --repeats 3 \
        --threads 2 --libs bonsai,lightgbm,xgboost,catboost [--scale F] [--rounds N] \
        [--contend N] [--json out.json]

Entries (``_small_data.py``): six generated tables of 8k-262k rows and 7-41 columns
with pandas ``category`` columns (3 to ~4k categories) and missing values (one column
91% NaN), regression / binary / 5-class, shaped like issue 18's public data sets; and
the real example files (LightGBM's binary / regression / multiclass, XGBoost's
agaricus) that the repository bundles.

Every library: 300 rounds, learning rate 0.1, 63 leaves grown leaf-wise (no depth
limit), ``max_bin`` 255, min 20 rows / 1e-3 hessian per leaf, L2 1.0, its sklearn
estimator's ``.fit`` on the DataFrame with its own categorical handling (LightGBM
``category`` columns, XGBoost ``enable_categorical`` with ``hist``, CatBoost
``cat_features``, bonsai the ``category`` columns with its default ``cat_encoding``).
CatBoost grows its default symmetric trees of depth 6 (64 leaves).  Each
(library, repeat) runs in a fresh process (``_common.run_child``), libraries
interleaved per repeat; medians are printed.  In the child: the DataFrames are built
(the data baseline), the library imported and warmed up by an untimed 2-round fit of
the same data and a prediction (bonsai loads, or compiles, exactly the kernels the
timed fit uses), the peak RSS reset, then ``.fit`` is timed (wall and process CPU
time) and the test rows scored.  ``peak MiB`` is the peak RSS of the timed fit over
the data baseline (so the imported library counts, as in ``bench_fit.py``), ``lib MiB``
what import + warm-up left resident, ``fit MiB`` the peak over that.

``--contend N`` keeps N cores busy with spinning processes while each child runs (a
noisy neighbour on purpose, as on a shared machine or a CI runner): how each library's
threads cope with a core they cannot have.

``us/split`` = fit seconds / the model's splits (bonsai ``sum(t.n_leaves - 1)`` over
``booster_.trees``, LightGBM from ``dump_model()``, XGBoost from its text dump).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import _common as C
import _small_data as S
import bench_fit as BF

ROUNDS, LEAVES, WARM_ROUNDS = 300, 63, 2
DEFAULT_LIBS = "bonsai,lightgbm,xgboost,catboost"
PEERS = BF.PEERS


def _common_kwargs():
    c = BF.COMMON
    return c["learning_rate"], c["max_bin"], c["min_child_samples"], c["min_child_weight"], \
        c["reg_lambda"], c["seed"]


def make_bonsai(task, threads, rounds, cat_names):
    from bonsai.sklearn import BonsaiClassifier, BonsaiRegressor
    lr, max_bin, mcs, mcw, lam, seed = _common_kwargs()
    cls = BonsaiRegressor if task == "regression" else BonsaiClassifier
    return cls(n_estimators=rounds, learning_rate=lr, grow_policy="leafwise",
               max_leaves=LEAVES, max_bin=max_bin, min_child_samples=mcs,
               min_child_weight=mcw, reg_lambda=lam, n_threads=threads, random_state=seed,
               verbosity=0), {}


def make_lightgbm(task, threads, rounds, cat_names):
    import lightgbm as lgb
    lr, max_bin, mcs, mcw, lam, seed = _common_kwargs()
    cls = lgb.LGBMRegressor if task == "regression" else lgb.LGBMClassifier
    return cls(n_estimators=rounds, learning_rate=lr, num_leaves=LEAVES, max_depth=-1,
               max_bin=max_bin, min_child_samples=mcs, min_child_weight=mcw,
               reg_lambda=lam, n_jobs=threads, random_state=seed, verbose=-1), \
        ({"categorical_feature": cat_names} if cat_names else {})


def make_xgboost(task, threads, rounds, cat_names):
    import xgboost as xgb
    lr, max_bin, mcs, mcw, lam, seed = _common_kwargs()
    cls = xgb.XGBRegressor if task == "regression" else xgb.XGBClassifier
    return cls(n_estimators=rounds, learning_rate=lr, tree_method="hist",
               grow_policy="lossguide", max_leaves=LEAVES, max_depth=0, max_bin=max_bin + 1,
               min_child_weight=mcw, reg_lambda=lam, n_jobs=threads, random_state=seed,
               enable_categorical=True, verbosity=0), {}


def make_catboost(task, threads, rounds, cat_names):
    import catboost as cb
    lr, max_bin, mcs, mcw, lam, seed = _common_kwargs()
    cls = cb.CatBoostRegressor if task == "regression" else cb.CatBoostClassifier
    return cls(iterations=rounds, learning_rate=lr, depth=6, border_count=max_bin - 1,
               l2_leaf_reg=lam, thread_count=threads, random_seed=seed, verbose=False,
               allow_writing_files=False, cat_features=cat_names or None), {}


LIBS = {"bonsai": make_bonsai, "lightgbm": make_lightgbm, "xgboost": make_xgboost,
        "catboost": make_catboost}


def n_splits(lib, model):
    """Total splits of a fitted model (None where not counted)."""
    if lib == "bonsai":
        return int(sum(t.n_leaves - 1 for t in model.booster_.trees))
    if lib == "lightgbm":
        return int(sum(t["num_leaves"] - 1 for t in model.booster_.dump_model()["tree_info"]))
    if lib == "xgboost":
        dump = model.get_booster().get_dump()
        return int(sum(sum(1 for ln in t.splitlines() if "leaf=" not in ln) for t in dump))
    return None


def _predict(task, model, X):
    return model.predict(X) if task == "regression" else (
        model.predict_proba(X)[:, 1] if task == "binary" else model.predict_proba(X))


# --------------------------------------------------------------------------- worker
def worker(lib, entry, threads, rounds, scale):
    Xtr, ytr, Xte, yte, e = S.load(entry, scale)
    dtr, dte = S.frames(Xtr, Xte, e.cat_cols, category_dtype=lib != "catboost")
    cat_names = [c for c in dtr.columns if c.startswith("c")]
    y_fit = ytr.astype(np.int64) if e.task != "regression" else ytr
    base = C.peak_rss_mib()                        # interpreter + numpy/pandas + the data
    t0 = time.perf_counter()
    model, fit_kw = LIBS[lib](e.task, threads, WARM_ROUNDS, cat_names)
    model.fit(dtr, y_fit, **fit_kw)        # import; bonsai: load (or compile) its kernels
    _predict(e.task, model, dte.iloc[:100])
    import_s = time.perf_counter() - t0
    model, fit_kw = LIBS[lib](e.task, threads, rounds, cat_names)
    ready = C.rss_mib()
    peak_reset = C.reset_peak_rss()
    c0, t0 = time.process_time(), time.perf_counter()
    model.fit(dtr, y_fit, **fit_kw)
    fit_s, fit_cpu_s = time.perf_counter() - t0, time.process_time() - c0
    peak = C.peak_rss_mib()
    t0 = time.perf_counter()
    pred = _predict(e.task, model, dte)
    predict_s = time.perf_counter() - t0
    metrics = BF.score(e.task, e.n_classes, yte, pred)
    splits = n_splits(lib, model)
    C.emit_result(dict(lib=lib, entry=entry, fit_s=fit_s, fit_cpu_s=fit_cpu_s,
                       predict_s=predict_s, import_s=import_s, lib_mib=ready - base,
                       peak_mib=peak - base,
                       fit_mib=peak - ready, peak_reset=peak_reset, metrics=metrics,
                       splits=splits, us_per_split=(fit_s * 1e6 / splits if splits else None)))


# --------------------------------------------------------------------------- parent
KEYS = ("fit_s", "fit_cpu_s", "predict_s", "lib_mib", "peak_mib", "fit_mib", "splits", "us_per_split")


def _medians(libs, results):
    med = {}
    for lib in libs:
        ok = [r for r in results[lib] if "error" not in r]
        if ok:
            med[lib] = {k: C.median_or_none([r.get(k) for r in ok]) for k in KEYS}
            med[lib]["metrics"] = {m: C.median_or_none([r["metrics"][m] for r in ok])
                                   for m in ok[0]["metrics"]}
            med[lib]["n_ok"] = len(ok)
    return med


def compare(med, task):
    """bonsai's fit-time ratios to LightGBM and to the faster peer, metric differences
    to the better peer (per metric)."""
    peers = [p for p in PEERS if p in med]
    if "bonsai" not in med or not peers:
        return None
    b = med["bonsai"]
    fastest = min(peers, key=lambda p: med[p]["fit_s"])
    out = {"fastest": fastest, "vs_peer": b["fit_s"] / med[fastest]["fit_s"],
           "vs_lightgbm": (b["fit_s"] / med["lightgbm"]["fit_s"] if "lightgbm" in med
                           else None), "metrics": {}}
    for m in BF.METRICS[task]:
        sign = 1.0 if BF.HIGHER_IS_BETTER[m] else -1.0
        best = max(peers, key=lambda p: sign * med[p]["metrics"][m])
        out["metrics"][m] = (b["metrics"][m] - med[best]["metrics"][m], best)
    if "lightgbm" in med:
        out["peak_vs_lightgbm"] = (b["peak_mib"], med["lightgbm"]["peak_mib"])
    return out


def run_entry(entry, libs, args):
    if entry in S.REAL and S.real_source(entry) is None:
        print(f"\n=== {entry}: SKIPPED, none of {[str(p[0]) for p in S.REAL[entry][0]]} "
              "is present")
        return None, None
    Xtr, ytr, Xte, _, e = S.load(entry, args.scale)
    cats = [len(np.unique(Xtr[:, j][~np.isnan(Xtr[:, j])])) for j in e.cat_cols]
    print(f"\n=== {entry}: {len(ytr) + len(Xte):,} rows ({len(Xte):,} test) x {e.features} "
          f"columns, {e.task}{f' ({e.n_classes} classes)' if e.task == 'multiclass' else ''}"
          f", categorical levels {cats or 'none'}, NaN {np.isnan(Xtr).mean():.1%}; "
          f"{e.describe}; {args.rounds} rounds, {LEAVES} leaves leaf-wise, threads "
          f"{args.threads}"
          + (f"; {args.contend} core(s) kept busy by spinning processes (--contend)"
             if args.contend else ""), flush=True)
    results = {lib: [] for lib in libs}
    for rep in range(args.repeats):
        for lib in libs:
            argv = [os.path.abspath(__file__), "--worker", lib, "--entries", entry,
                    "--threads", str(args.threads), "--rounds", str(args.rounds),
                    "--scale", str(args.scale)]
            with C.contention(args.contend):
                res = C.run_child(argv, C.child_env(args.threads), args.timeout)
            res.setdefault("lib", lib)
            results[lib].append(res)
            line = (f"ERROR {res['error']}" if "error" in res else
                    f"fit {res['fit_s']:6.2f}s (cpu {res['fit_cpu_s']:6.2f})  peak "
                    f"{res['peak_mib']:5.0f} MiB  us/split {C.fmt(res['us_per_split'], '.1f')}"
                    "  " + "  ".join(f"{k} {v:.4f}" for k, v in res["metrics"].items()))
            print(f"  [rep {rep + 1}/{args.repeats}] {lib:<9} {line}{C.busy_note(res)}",
                  flush=True)
    med = _medians(libs, results)
    metric_names = list(BF.METRICS[e.task])
    headers = ["library", "ok", "fit s", "cpu s", "lib MiB", "peak MiB", "fit MiB", "splits",
               "us/split"] + metric_names

    def row(lib, m):
        return ([C.fmt(m["fit_s"]), C.fmt(m["fit_cpu_s"]), C.fmt(m["lib_mib"], ".0f"),
                 C.fmt(m["peak_mib"], ".0f"),
                 C.fmt(m["fit_mib"], ".0f"), C.fmt(m["splits"], ".0f"),
                 C.fmt(m["us_per_split"], ".1f")]
                + [C.fmt(m["metrics"].get(k), ".4f") for k in metric_names])
    C.print_results(f"{entry}: medians of {args.repeats} interleaved run(s)", headers, libs,
                    results, med, args.repeats, row)
    cmp = compare(med, e.task)
    if cmp:
        parts = [f"{k} {d:+.4f} vs {p}" for k, (d, p) in cmp["metrics"].items()]
        print(f">> bonsai on {entry}: fit {C.fmt(cmp['vs_lightgbm'])}x LightGBM, "
              f"{cmp['vs_peer']:.2f}x the faster peer ({cmp['fastest']}); "
              + ", ".join(parts))
    return {"medians": med, "compare": cmp, "rows": len(ytr) + len(Xte),
            "features": e.features, "task": e.task}, results


def print_overview(summaries):
    rows = []
    for entry, s in summaries.items():
        m, c = s["medians"], s["compare"] or {}
        t = {lib: C.fmt(m[lib]["fit_s"]) if lib in m else "-" for lib in LIBS}
        us = {lib: C.fmt(m[lib]["us_per_split"], ".0f") if lib in m else "-"
              for lib in ("bonsai", "lightgbm")}
        peak = {lib: C.fmt(m[lib]["peak_mib"], ".0f") if lib in m else "-"
                for lib in ("bonsai", "lightgbm")}
        diffs = ", ".join(f"{k} {d:+.4f}" for k, (d, _) in c.get("metrics", {}).items())
        rows.append([entry, f"{s['rows'] // 1000}k x {s['features']}", t["bonsai"],
                     t["lightgbm"], t["xgboost"], t["catboost"], C.fmt(c.get("vs_lightgbm")),
                     C.fmt(c.get("vs_peer")), f"{us['bonsai']} / {us['lightgbm']}",
                     f"{peak['bonsai']} / {peak['lightgbm']}", diffs or "-"])
    print("\n=== overview: fit s (medians); bonsai / LightGBM, bonsai / faster peer; "
          "us per split and peak MiB bonsai / LightGBM; metric - better peer ===")
    C.print_table(["entry", "rows x cols", "bonsai", "LightGBM", "XGBoost", "CatBoost",
                   "vs LGBM", "vs peer", "us/split", "peak MiB", "metric vs peer"], rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--entries", default="all", help="all, generated, real, or a comma "
                    f"list of {', '.join([*S.GENERATED, *S.REAL])}")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--libs", default=DEFAULT_LIBS, help=f"comma list from {', '.join(LIBS)}")
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--scale", type=float, default=1.0,
                    help="generated entries' rows times this (smoke runs; min 2000 rows)")
    ap.add_argument("--timeout", type=float, default=1800.0, help="seconds per child")
    ap.add_argument("--contend", type=int, default=0,
                    help="keep this many cores busy with spinning processes during each "
                    "run (a deliberate noisy neighbour; the runs are then flagged BUSY)")
    ap.add_argument("--json", default=None, help="also write raw results here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.entries, args.threads, args.rounds, args.scale)
        return 0
    for name, value in (("repeats", args.repeats), ("threads", args.threads),
                        ("rounds", args.rounds)):
        if value < 1:
            ap.error(f"--{name} must be >= 1, got {value}")
    if args.contend < 0:
        ap.error(f"--contend must be >= 0, got {args.contend}")
    if not args.scale > 0:
        ap.error(f"--scale must be > 0, got {args.scale}")
    libs = [s.strip() for s in args.libs.split(",") if s.strip()]
    bad = [lib for lib in libs if lib not in LIBS]
    if bad:
        ap.error(f"unknown libs {bad}; choose from {list(LIBS)}")
    groups = {"all": [*S.GENERATED, *S.REAL], "generated": list(S.GENERATED),
              "real": list(S.REAL)}
    entries = groups.get(args.entries) or [s.strip() for s in args.entries.split(",")
                                           if s.strip()]
    bad = [x for x in entries if x not in S.GENERATED and x not in S.REAL]
    if bad:
        ap.error(f"unknown entries {bad}; choose from {groups['all']}, generated, real, all")
    print(f"bench_small: python {sys.version.split()[0]}, numpy {np.__version__}, threads "
          f"{args.threads}, repeats {args.repeats}, rounds {args.rounds}, scale {args.scale}, "
          f"libs {','.join(libs)}, contend {args.contend}; load average "
          f"{os.getloadavg()[0]:.2f}")
    summaries, all_results = {}, {}
    for entry in entries:
        summ, res = run_entry(entry, libs, args)
        if summ is not None:
            summaries[entry], all_results[entry] = summ, res
            C.dump_json(args.json, all_results, summaries)    # after each entry
    if summaries:
        print_overview(summaries)
    print(f"load average at the end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    C.dump_json(args.json, all_results, summaries)
    return 0


if __name__ == "__main__":
    sys.exit(main())
