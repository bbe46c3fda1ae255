"""Learning tasks side by side (issue 17): bonsai, LightGBM, XGBoost and CatBoost on
the same data with the same parameters, in one run.

    PYTHONPATH=. python benchmarks/bench_tasks.py \
        --task multi_regression|multiclass|rank|sparse|all[,...] --repeats 3 --threads 2 \
        [--scale 0.02] [--libs bonsai-vector,xgboost-vector,...] [--lib-repeats lightgbm=1] \
        [--rounds N] [--timeout S] [--json out.json]

Tasks and their data sets (``--scale`` multiplies every generated shape: rows, queries,
sparse columns; the repository's real files are used whole):

* ``multi_regression``: ``multireg``, generated 500k x 50 with K = 8 real targets, each
  a different mix of six shared nonlinear signals plus its own term and noise;
  metric RMSE over all outputs.  Rows ``bonsai-vector`` / ``xgboost-vector``
  (``multi_strategy="multi_output_tree"``: one tree, a vector in each leaf),
  ``bonsai-per-output`` / ``xgboost-per-output`` (``"one_output_per_tree"``),
  ``lightgbm-per-output`` (LightGBM has no multi-output regression: K single-output
  models on one Dataset), ``catboost`` (``MultiRMSE``).
* ``multiclass``: ``multiclass``, ``_common.multiclass_like`` 200k x 50, 10 classes;
  the same strategy rows, LightGBM ``multiclass``, CatBoost ``MultiClass``; mlogloss
  and accuracy.
* ``rank``: ``rank.test`` (LightGBM's example ``rank.train`` -> ``rank.test``, the
  copies in tests/data) and ``rank-generated`` (``bench_rank.make_data``: 1M rows, 10k
  queries, 20 features, the last tenth of the queries held out); bonsai and LightGBM
  ``lambdarank``, XGBoost ``rank:ndcg`` (top-k pairs), CatBoost ``LambdaMart``;
  NDCG@10 (and @1, @3, @5) computed by one NumPy function for every library.
* ``sparse``: ``agaricus`` and ``sparse-generated`` (``bench_sparse``'s loader and
  generator: 1M x 100k CSR, 50 non-zeros a row, binary); every library fed the CSR;
  AUC and logloss.  CatBoost is not run here.

Each (library, repeat) runs in a fresh interpreter (``_common.run_child``), the
libraries interleaved within each repeat.  The child loads the data, imports its
library and, for bonsai, runs untimed warm-up fits and predicts (same parameters, 2
rounds, the first 20k training / test rows, see ``_warm_bonsai``; before any repeat
the parent also runs one such warm-up-only child per bonsai row, so numba's cache is
filled: both are excluded from the results); then it resets the peak-RSS counter and
times Dataset construction + training (wall and process CPU time).  ``peak MiB`` is
the process's peak resident set during build + fit (data and library included),
``+fit MiB`` that peak minus the RSS just before it, ``maxrss MiB`` the process's
lifetime ``ru_maxrss`` (data generation and warm-ups included).  Medians over
repeats; then, per bonsai row, its time, CPU-time and peak-RSS ratios to each peer and
to the faster of the LightGBM / XGBoost rows, and its headline metric minus the peer's.
"""
from __future__ import annotations

import argparse
import gzip
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np

import _common as C
import _tasks_fit as F

TEST_DATA = C.REPO_ROOT / "tests" / "data"
WARM_ROWS = 20_000          # the in-child warm-up fit: this many training rows, 2 rounds
MULTI = ("bonsai-vector", "bonsai-per-output", "xgboost-vector", "xgboost-per-output")


class Data(NamedTuple):
    X: object               # training matrix (ndarray or scipy CSR)
    y: np.ndarray
    Xt: object              # held-out matrix
    yt: np.ndarray
    group: np.ndarray | None = None      # query sizes (rank)
    group_t: np.ndarray | None = None
    n_out: int = 1          # outputs / classes


# --------------------------------------------------------------------------- data
def multireg_like(n: int = 500_000, d: int = 50, seed: int = 20240617, k: int = 8):
    """K = 8 regression targets sharing structure.  Six nonlinear signals of columns
    0..11 (a sine, a product, a tanh, a squared hinge, a signed magnitude, a quadratic);
    target j = signals @ W[:, j] + 0.5 * z_(12 + j) + noise (sd 0.5), W fixed and dense,
    so the targets are correlated but no two are alike.  Columns 20.. are noise.
    Returns X float32 (n, d), Y float32 (n, k)."""
    if d < 20:
        raise ValueError("multireg_like needs d >= 20")
    W = np.random.default_rng([seed, 10**6]).normal(0.0, 1.0, size=(6, k))
    X = np.empty((n, d), dtype=np.float32)
    Y = np.empty((n, k), dtype=np.float32)
    for a, b, rng in C._seeded_chunks(n, seed):
        Z = rng.standard_normal((b - a, d))
        S = np.column_stack([np.sin(2.0 * Z[:, 0]) + 0.5 * Z[:, 1], Z[:, 2] * Z[:, 3],
                             np.tanh(Z[:, 4] + Z[:, 5]), np.maximum(Z[:, 6], 0.0) ** 2 - 0.5,
                             np.abs(Z[:, 7]) * np.sign(Z[:, 8]), Z[:, 9] + 0.5 * Z[:, 10] ** 2
                             - 0.3 * Z[:, 11]])
        Y[a:b] = S @ W + 0.5 * Z[:, 12:12 + k] + 0.5 * rng.standard_normal((b - a, k))
        X[a:b] = Z
    return X, Y


C.DATASETS.setdefault("multireg", C.Data(multireg_like, 500_000, 50, "multireg", 8))


def _rows(n, scale, least=2000):
    return max(least, int(round(n * scale)))


def _load_dense(name, scale, n_out):
    Xtr, ytr, Xte, yte = C.load_cached(name, _rows(C.DATASETS[name].rows, scale))
    return Data(Xtr, ytr, Xte, yte, n_out=n_out)


def _load_rank_files(scale):
    from sklearn.datasets import load_svmlight_files
    X, y, Xt, yt = load_svmlight_files([str(TEST_DATA / "rank.train.gz"),
                                        str(TEST_DATA / "rank.test.gz")])

    def sizes(name):
        with gzip.open(TEST_DATA / name, "rt") as fh:
            return np.array([int(v) for v in fh.read().split()], np.int64)
    return Data(X.toarray().astype(np.float32), y, Xt.toarray().astype(np.float32), yt,
                sizes("rank.train.query.gz"), sizes("rank.test.query.gz"))


def _load_rank_generated(scale):
    import bench_rank
    X, y, g = bench_rank.make_data(_rows(1_000_000, scale), _rows(10_000, scale, 50), 20)
    (X, y, g), (Xt, yt, gt) = bench_rank.split_queries(X, y, g)
    return Data(X, y, Xt, yt, g, gt)


def _load_agaricus(scale):
    import bench_sparse
    return Data(*bench_sparse.agaricus(TEST_DATA))


def _load_sparse_generated(scale):
    import bench_sparse
    f = _rows(100_000, scale, 1000)
    return Data(*bench_sparse.generated(_rows(1_000_000, scale), f, min(50, f // 20)))


class Spec(NamedTuple):
    task: str
    kind: str               # what _tasks_fit's functions get: multireg|multiclass|rank|binary
    load: object            # load(scale) -> Data
    rounds: int
    tree: dict
    libs: tuple
    about: str


_CLASSIC = ("lightgbm", "xgboost", "catboost")
SPECS = {
    "multireg": Spec("multi_regression", "multireg", lambda s: _load_dense("multireg", s, 8),
                     100, {"depth": 6}, MULTI + ("lightgbm-per-output", "catboost"),
                     "generated, K = 8 targets (multireg_like)"),
    "multiclass": Spec("multiclass", "multiclass", lambda s: _load_dense("multiclass", s, 10),
                       100, {"depth": 6}, MULTI + ("lightgbm", "catboost"),
                       "generated, 10 classes (_common.multiclass_like)"),
    "rank.test": Spec("rank", "rank", _load_rank_files, 100, {"leaves": 31},
                      ("bonsai",) + _CLASSIC,
                      "LightGBM's lambdarank example, rank.train -> rank.test (tests/data)"),
    "rank-generated": Spec("rank", "rank", _load_rank_generated, 50, {"leaves": 31},
                           ("bonsai",) + _CLASSIC,
                           "bench_rank.make_data, 1/10 of queries held out"),
    "agaricus": Spec("sparse", "binary", _load_agaricus, 50, {"depth": 6},
                     ("bonsai", "xgboost", "lightgbm"), "XGBoost's demo, CSR (tests/data)"),
    "sparse-generated": Spec("sparse", "binary", _load_sparse_generated, 50, {"depth": 6},
                             ("bonsai", "xgboost", "lightgbm"), "bench_sparse.generated, 0/1 CSR"),
}
TASKS = {"multi_regression": ["multireg"], "multiclass": ["multiclass"],
         "rank": ["rank.test", "rank-generated"], "sparse": ["agaricus", "sparse-generated"]}


def _head(d, rows):
    """The first ``rows`` training rows (whole queries for ranking)."""
    g = None
    if d.group is not None:
        q = int(np.searchsorted(np.cumsum(d.group), rows, side="left")) + 1
        g = d.group[:q]
        rows = int(g.sum())
    return d._replace(X=d.X[:rows], y=d.y[:rows], group=g)


# --------------------------------------------------------------------------- worker
def _warm_bonsai(lib, spec, d, threads):
    """Compile (first process) or load from numba's cache every kernel the timed fit
    and predict use: ``bonsai.warmup(small=False)``, then this row's fit and predict
    on the first ``WARM_ROWS`` rows twice, as is and with bonsai's work-splitting
    thresholds lowered (so the parallel kernels of the large fit run too)."""
    import bonsai
    if hasattr(bonsai, "warmup"):
        bonsai.warmup(small=False)
    head = _head(d, WARM_ROWS)
    for ctx in C.bonsai_warm_contexts():
        with ctx():
            F.fit(lib, spec.kind, head, spec.tree, 2, threads)[2](d.Xt[:WARM_ROWS])


def worker(lib, name, scale, threads, rounds, warm_only):
    """In the fresh child: load, warm up (bonsai), measure, emit one JSON line."""
    spec = SPECS[name]
    d = spec.load(scale)
    shape = f"{d.X.shape[0]:,} + {d.Xt.shape[0]:,} rows x {d.X.shape[1]:,} features"
    if spec.kind == "multireg":
        shape += f", {d.n_out} targets"
    if d.group is not None:
        shape += f", {len(d.group):,} + {len(d.group_t):,} queries"
    if hasattr(d.X, "nnz"):
        shape += f", {d.X.nnz + d.Xt.nnz:,} non-zeros (CSR)"
    try:
        if lib.startswith("bonsai"):
            _warm_bonsai(lib, spec, d, threads)
        if warm_only:
            return C.emit_result({"lib": lib, "warm_only": True})
        ready = C.rss_mib()
        C.reset_peak_rss()
        c0 = time.process_time()
        build_s, train_s, predict, params = F.fit(lib, spec.kind, d, spec.tree, rounds, threads)
        cpu_s = time.process_time() - c0
    except F.Unavailable as e:
        return C.emit_result({"lib": lib, "unavailable": str(e)})
    except ImportError as e:
        return C.emit_result({"lib": lib, "unavailable": f"ImportError: {e}"})
    peak = C.peak_rss_mib()
    maxrss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024     # KiB on Linux
    t0 = time.perf_counter()
    pred = predict(d.Xt)
    predict_s = time.perf_counter() - t0
    C.emit_result(dict(lib=lib, build_s=build_s, train_s=train_s, fit_s=build_s + train_s,
                       fit_cpu_s=cpu_s, predict_s=predict_s, peak_mib=peak,
                       fit_mib=peak - ready, maxrss_mib=maxrss, metrics=F.score(spec.kind, d, pred),
                       params=params, shape=shape))


# --------------------------------------------------------------------------- parent
def _load_avg():
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _child(a, lib, name, rounds, warm_only=False):
    argv = [os.path.abspath(__file__), "--worker", lib, "--dataset", name, "--scale",
            str(a.scale), "--threads", str(a.threads), "--rounds", str(rounds)]
    res = C.run_child(argv + (["--warm-only"] if warm_only else []),
                      C.child_env(a.threads), a.timeout)
    res.setdefault("lib", lib)
    return res


def _line(res):
    if "error" in res:
        return f"ERROR {res['error']}"
    if "unavailable" in res:
        return f"not available: {res['unavailable']}"
    m = "  ".join(f"{k} {v:.4f}" for k, v in res["metrics"].items())
    return (f"fit {res['fit_s']:7.2f}s (build {res['build_s']:.2f} + train "
            f"{res['train_s']:.2f}; cpu {res['fit_cpu_s']:.2f})  peak {res['peak_mib']:6.0f}"
            f" MiB  {m}")


def run_dataset(name, a):
    spec = SPECS[name]
    libs = [lib for lib in spec.libs if not a.libs or lib in a.libs or
            lib.split("-")[0] in a.libs]
    rounds = a.rounds or spec.rounds
    tree = (f"depth {spec.tree['depth']}" if "depth" in spec.tree
            else f"leaf-wise, {spec.tree['leaves']} leaves")
    print(f"\n=== {spec.task} / {name}: {spec.about}; {rounds} rounds, {tree}, lr "
          f"{F.COMMON['learning_rate']}, {a.threads} threads, scale {a.scale}; load "
          f"average {_load_avg()}", flush=True)
    results = {lib: [] for lib in libs}
    for lib in [x for x in libs if x.startswith("bonsai")]:
        t0 = time.perf_counter()
        res = _child(a, lib, name, rounds, warm_only=True)
        print(f"  [warm-up, excluded] {lib:<20} {time.perf_counter() - t0:.1f}s"
              + ("" if res.get("warm_only") else "  " + _line(res)), flush=True)
        if not res.get("warm_only"):
            results[lib].append(res)          # unavailable / error: no timed runs
    for rep in range(a.repeats):
        for lib in libs:                      # interleaved: every library once a repeat
            done = results[lib]         # a row with --lib-repeats N runs in the last N
            if (done and "metrics" not in done[-1]) or rep < a.repeats - a.lib_repeats.get(
                    lib, a.repeats):
                continue
            res = _child(a, lib, name, rounds)
            done.append(res)
            print(f"  [rep {rep + 1}/{a.repeats}] {lib:<20} {_line(res)}{C.busy_note(res)}",
                  flush=True)
    return summarize(name, libs, results, a)


def _medians(results):
    med = {}
    for lib, runs in results.items():
        ok = [r for r in runs if "metrics" in r]
        if ok:
            med[lib] = {k: statistics.median(r[k] for r in ok) for k in
                        ("build_s", "train_s", "fit_s", "fit_cpu_s", "predict_s", "peak_mib",
                         "fit_mib", "maxrss_mib")}
            med[lib]["metrics"] = {m: statistics.median(r["metrics"][m] for r in ok)
                                   for m in ok[0]["metrics"]}
            med[lib]["n_ok"] = len(ok)
    return med


def summarize(name, libs, results, a):
    med = _medians(results)
    metric_names = list(next(iter(med.values()))["metrics"]) if med else []
    headers = (["library", "runs", "build s", "train s", "fit s", "fit cpu s", "peak MiB",
                "+fit MiB", "maxrss MiB", "predict s"] + metric_names)
    rows, notes = [], []
    for lib in libs:
        if lib in med:
            m = med[lib]
            rows.append([lib, str(m["n_ok"])] + [
                C.fmt(m[k]) for k in ("build_s", "train_s", "fit_s", "fit_cpu_s")] + [
                C.fmt(m["peak_mib"], ".0f"), C.fmt(m["fit_mib"], ".0f"),
                C.fmt(m["maxrss_mib"], ".0f"),
                C.fmt(m["predict_s"], ".3f")] + [C.fmt(m["metrics"][k], ".4f")
                                                 for k in metric_names])
        else:
            last = results[lib][-1] if results[lib] else {"error": "not run"}
            rows.append([lib, "0"] + ["-"] * (len(headers) - 2))
            notes.append(f"  {lib}: {_line(last)}")
    first = next((r for runs in results.values() for r in runs if "shape" in r), None)
    print(f"\n--- {name}: {first['shape'] if first else '(no run succeeded)'}; medians; "
          f"bonsai's warm-up runs excluded ---")
    C.print_table(headers, rows)
    if notes:
        print("rows without a result:\n" + "\n".join(notes))
    C.print_run_warnings([], results, libs)
    ratios = compare(med, metric_names[:1])
    for line in ratios["lines"]:
        print(line)
    print(f"load average after: {_load_avg()}")
    print("parameters (exact dicts):")
    for lib in libs:
        params = next((r["params"] for r in results[lib] if "params" in r), None)
        if params is not None:
            print(f"  {lib}: {params}")
    return {"medians": med, "ratios": ratios["values"],
            "shape": first["shape"] if first else None, "runs": results}


def compare(med, metric):
    """Per bonsai row: time, CPU-time and peak-RSS ratios to every peer row and to the
    faster of the LightGBM / XGBoost rows, and the headline metric's difference."""
    lines, values = [], {}
    peers = [p for p in med if not p.startswith("bonsai")]
    fast = [p for p in peers if p.split("-")[0] in ("lightgbm", "xgboost")]
    fastest = min(fast, key=lambda p: med[p]["fit_s"]) if fast else None
    for b in (lib for lib in med if lib.startswith("bonsai")):
        values[b] = {}
        for p in peers + ([f"faster peer ({fastest})"] if fastest else []):
            q = med[fastest if p.startswith("faster") else p]
            r = {"time": med[b]["fit_s"] / q["fit_s"], "cpu": med[b]["fit_cpu_s"] / q["fit_cpu_s"],
                 "rss": med[b]["peak_mib"] / q["peak_mib"]}
            text = (f"{b} / {p}: time {r['time']:.2f}x (cpu {r['cpu']:.2f}x), peak RSS "
                    f"{r['rss']:.2f}x")
            if metric:
                m = metric[0]
                r[m] = med[b]["metrics"][m] - q["metrics"][m]
                better = "higher" if F.HIGHER_IS_BETTER[m] else "lower"
                text += f", {m} {r[m]:+.4f} ({better} is better)"
            values[b][p] = r
            lines.append(">> " + text)
    return {"lines": lines, "values": values}


def _lib_repeats(text):
    out = {}
    for item in filter(None, (text or "").split(",")):
        lib, _, n = item.partition("=")
        if not n.isdigit() or int(n) < 1:
            raise SystemExit(f"--lib-repeats: expected LIB=N with N >= 1, got {item!r}")
        out[lib] = int(n)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--task", default="all", help="comma list of " + ", ".join(TASKS)
                    + " (or all)")
    ap.add_argument("--libs", default="", help="comma list of rows (bonsai-vector) or "
                    "libraries (xgboost: all its rows); default: every row of the task")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lib-repeats", type=_lib_repeats, default={},
                    help="fewer repeats for some rows, e.g. lightgbm=1 (its runs are long): "
                    "they run in the last N repeats")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every generated "
                    "shape (rows, queries, sparse columns); 0.02 for a smoke run")
    ap.add_argument("--rounds", type=int, default=0, help="override every data set's rounds")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per child")
    ap.add_argument("--json")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--dataset", choices=sorted(SPECS), help=argparse.SUPPRESS)
    ap.add_argument("--warm-only", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return worker(a.worker, a.dataset, a.scale, a.threads, a.rounds, a.warm_only)
    tasks = list(TASKS) if a.task == "all" else a.task.split(",")
    bad = [t for t in tasks if t not in TASKS]
    if bad or a.repeats < 1 or a.threads < 1 or not 0 < a.scale <= 1:
        ap.error(f"bad --task {bad} / --repeats / --threads / --scale (0 < scale <= 1)")
    a.libs = set(filter(None, a.libs.split(",")))
    print(f"bench_tasks: {', '.join(tasks)}; repeats {a.repeats} {a.lib_repeats or ''}, "
          f"threads {a.threads}, python {sys.version.split()[0]}, {os.cpu_count()} cores")
    summary = {name: run_dataset(name, a) for t in tasks for name in TASKS[t]}
    C.dump_json(a.json, {}, summary)


if __name__ == "__main__":
    main()
