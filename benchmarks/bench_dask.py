"""Distributed fit benchmark on a local Dask cluster: bonsai.dask against xgboost.dask
and lightgbm.dask, and against bonsai's own one-process fit.

    python benchmarks/bench_dask.py --repeats 3 [--rows N] [--rounds N] [--chunks 8] \
        [--libs bonsai-dask,xgboost-dask,lightgbm-dask,bonsai-local] [--json out.json] \
        [--malloc-trim dask|off]

The ``higgs`` shape of ``bench_fit.py`` (``_common.higgs_like``, 1M x 28, binary,
depth 8, 200 rounds, learning rate 0.1, 255 bins; ``--rows`` / ``--rounds`` for a
smoke run), with the same tree settings for every library.  Each (library, repeat)
runs in a fresh interpreter; the libraries are interleaved within each repeat.

* The dask libraries start their own ``LocalCluster(n_workers=2,
  threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None)``
  in that interpreter, make the training rows a ``dask.array`` of ``--chunks`` row
  chunks (placed round-robin on the workers) and **persist it on the workers before
  the clock starts**: the time is training (the library's binning included), not
  shipping data to the cluster.  A tiny untimed fit first imports the library on the
  workers (bonsai: and ``bonsai.warmup()`` on each worker loads its compiled kernels).
* ``bonsai-local`` is ``bonsai.Dataset`` + ``bonsai.train`` with ``n_threads=2`` in one
  process, as ``bench_fit.py`` runs it.

Two threads in total everywhere: each worker has one thread and every library is
told to use one (bonsai ``n_threads=1``, xgboost ``nthread=1``, lightgbm
``num_threads=1``), the local fit uses two.  Test AUC is on the held-out last 10% of
the rows, predicted in the benchmark process with each library's *local* model
(the Booster bonsai.dask returns, ``train()["booster"]``, ``to_local()``).  ``cpu s``
is the CPU time (user + sys) of the client process (scheduler included) plus the
worker processes during the timed fit.

``--malloc-trim off`` starts the workers without the ``MALLOC_TRIM_THRESHOLD_=65536``
that Dask's nanny sets by default (``distributed.nanny.pre-spawn-environ``): with it,
glibc hands freed memory back at once, so every large array a worker allocates
page-faults afresh.  The default (``dask``) is what a user gets.  See
benchmarks/README.md.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import time

import numpy as np

import _common as C
import bench_fit as BF

SHAPE = BF.SHAPES["higgs"]
N_WORKERS = 2
DASK_LIBS = ("bonsai-dask", "xgboost-dask", "lightgbm-dask", "bonsai-dask-quantized",
             "bonsai-dask-blocks")
BONSAI_DASK = ("bonsai-dask", "bonsai-dask-quantized", "bonsai-dask-blocks")
#: what ``bonsai-dask-blocks`` puts in the workers' environment: feature blocks
#: (reduce-scatter + split search by feature block) from the first histogram on,
#: which bonsai otherwise uses only above 8 ranks (``backends/cpu/builder.py``)
BLOCKS_ENV = {"BONSAI_BLOCK_BYTES": "0"}
PEERS = ("xgboost-dask", "lightgbm-dask")
LIBS = DASK_LIBS + ("bonsai-local",)
DEFAULT_LIBS = ("bonsai-dask", "xgboost-dask", "lightgbm-dask", "bonsai-local")
LOCAL_THREADS = 2                  # the one-process fit: the cluster's 2 threads in total
WARMUP_ROWS = 4000
AUC_TOL = 5e-4                     # |AUC difference| below this counts as "equal AUC"
BAR_PEER, BAR_LOCAL = 0.8, 1.3     # issue 15's bars for bonsai.dask's fit time


# ------------------------------------------------------------- library adapters
# Each dask adapter: (client, X, y, rounds) -> (predict(X_numpy) -> P(class 1), extra dict)
def _bonsai_params(rounds, threads):
    p = BF._bonsai_params("bonsai", SHAPE, "binary", 2, threads)
    p["n_estimators"] = rounds
    return p


def fit_bonsai_dask(client, X, y, rounds, quantized=False):
    import bonsai.dask
    params = dict(_bonsai_params(rounds, 1), quantized_grad=quantized)
    booster = bonsai.dask.train(client, params, X, y)
    stats = [dict(s) for s in getattr(booster, "comm_stats", None) or []]
    return booster.predict, {"comm_stats": stats, "n_trees": _n_trees(stats)}


def _n_trees(stats):
    return max((int(s.get("n_trees", 0)) for s in stats), default=0)


def fit_xgboost_dask(client, X, y, rounds):
    import xgboost as xgb
    import xgboost.dask  # noqa: F401
    params = {"objective": "binary:logistic", "tree_method": "hist",
              "eta": BF.COMMON["learning_rate"], "max_depth": SHAPE.max_depth,
              "max_bin": BF.COMMON["max_bin"] + 1, "reg_lambda": BF.COMMON["reg_lambda"],
              "min_child_weight": BF.COMMON["min_child_weight"], "nthread": 1,
              "seed": BF.COMMON["seed"], "verbosity": 0}
    dtrain = xgb.dask.DaskQuantileDMatrix(client, X, y, max_bin=params["max_bin"])
    booster = xgb.dask.train(client, params, dtrain, num_boost_round=rounds,
                             verbose_eval=False)["booster"]
    booster.set_param({"nthread": 1})
    return booster.inplace_predict, {}


def fit_lightgbm_dask(client, X, y, rounds):
    import lightgbm as lgb
    model = lgb.DaskLGBMClassifier(
        client=client, n_estimators=rounds, learning_rate=BF.COMMON["learning_rate"],
        num_leaves=SHAPE.num_leaves(), max_depth=SHAPE.max_depth,
        min_child_samples=BF.COMMON["min_child_samples"],
        min_child_weight=BF.COMMON["min_child_weight"], reg_lambda=BF.COMMON["reg_lambda"],
        max_bin=BF.COMMON["max_bin"], num_threads=1, random_state=BF.COMMON["seed"],
        verbose=-1)
    model.fit(X, y)
    local = model.to_local()
    return (lambda Xt: local.predict_proba(Xt, num_threads=1)[:, 1]), {}


def _warm_bonsai_workers():
    import bonsai
    bonsai.warmup()


FIT = {"bonsai-dask": fit_bonsai_dask, "xgboost-dask": fit_xgboost_dask,
       "lightgbm-dask": fit_lightgbm_dask,
       "bonsai-dask-quantized": lambda *a: fit_bonsai_dask(*a, quantized=True),
       "bonsai-dask-blocks": fit_bonsai_dask}
WORKER_WARMUP = {lib: _warm_bonsai_workers for lib in BONSAI_DASK}


# ------------------------------------------------------------------ dask child
def _cluster_cpu(client):
    """CPU seconds (user + sys) so far of this process and of every worker process."""
    workers = client.run(time.process_time)
    return time.process_time() + sum(workers.values())


def _persisted(client, X, y, chunks):
    """(X, y) as dask arrays of ``chunks`` row chunks held on the workers, chunk ``i``
    (of X and of y) on worker ``i mod W`` (``client.scatter``), so every worker holds
    the same number of rows whatever the scheduler would have chosen."""
    import dask
    import dask.array as da
    from distributed import wait
    addrs = sorted(client.nthreads())
    step = -(-X.shape[0] // chunks)
    xs, ys = [], []
    for i, a in enumerate(range(0, X.shape[0], step)):
        part = (X[a:a + step], y[a:a + step])
        fx, fy = client.scatter(part, workers=[addrs[i % len(addrs)]])
        xs.append(da.from_delayed(dask.delayed(fx), shape=part[0].shape, dtype=X.dtype))
        ys.append(da.from_delayed(dask.delayed(fy), shape=part[1].shape, dtype=y.dtype))
    Xd, yd = client.persist([da.concatenate(xs), da.concatenate(ys)])
    wait([Xd, yd], timeout=600)
    return Xd, yd


def _placement(client, Xd):
    """{worker address: number of X's chunks it holds}."""
    counts = {}
    for holders in client.who_has(Xd).values():
        for w in holders:
            counts[w] = counts.get(w, 0) + 1
    return counts


def _worker_conditions(client):
    def probe():
        import numba
        return {"pid": os.getpid(), "numba_threads": int(numba.config.NUMBA_NUM_THREADS),
                "omp": os.environ.get("OMP_NUM_THREADS"),
                "malloc_trim": os.environ.get("MALLOC_TRIM_THRESHOLD_"),
                "block_bytes": os.environ.get("BONSAI_BLOCK_BYTES")}
    return {"nthreads": client.nthreads(), "probe": client.run(probe)}


def _malloc_trim_off():
    """Workers started from now on keep glibc's own trim / mmap thresholds."""
    import dask
    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ"))
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    dask.config.set({"distributed.nanny.pre-spawn-environ": env})


def dask_worker(lib, rows, rounds, chunks, malloc_trim):
    """In the fresh interpreter: cluster, persisted data, warm-up, one timed fit."""
    from distributed import Client, LocalCluster
    if malloc_trim == "off":
        _malloc_trim_off()
    Xtr, ytr, Xte, yte = C.load_cached("higgs", rows)
    with LocalCluster(n_workers=N_WORKERS, threads_per_worker=1, processes=True,
                      host="127.0.0.1", dashboard_address=None,
                      silence_logs=logging.ERROR) as cluster, \
            Client(cluster, timeout=120) as client:
        client.wait_for_workers(N_WORKERS, timeout=120)
        t0 = time.perf_counter()
        Xd, yd = _persisted(client, Xtr, ytr, chunks)
        persist_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        if lib in WORKER_WARMUP:
            client.run(WORKER_WARMUP[lib])
        Xw, yw = _persisted(client, Xtr[:WARMUP_ROWS], ytr[:WARMUP_ROWS], 2)
        FIT[lib](client, Xw, yw, 2)
        del Xw, yw
        warmup_s = time.perf_counter() - t0
        cond = _worker_conditions(client)
        placement = _placement(client, Xd)
        cpu0, busy0 = _cluster_cpu(client), C._machine_busy_s()
        t0 = time.perf_counter()
        predict, extra = FIT[lib](client, Xd, yd, rounds)
        fit_s = time.perf_counter() - t0
        busy1, cpu = C._machine_busy_s(), _cluster_cpu(client) - cpu0
    auc = BF.score("binary", 2, yte, predict(Xte))["auc"]
    others = (None if busy0 is None or busy1 is None
              else max(0.0, (busy1 - busy0) - cpu) / fit_s)
    C.emit_result(dict(lib=lib, fit_s=fit_s, fit_cpu_s=cpu, fit_others_cores=others,
                       auc=auc, persist_s=persist_s, warmup_s=warmup_s,
                       placement=placement, conditions=cond, **extra))


def local_worker(rows, rounds):
    """In the fresh interpreter: bonsai's one-process fit with ``LOCAL_THREADS``."""
    Xtr, ytr, Xte, yte = C.load_cached("higgs", rows)
    BF._prepare_bonsai(LOCAL_THREADS)
    run = BF.LIBS["bonsai"][1]
    cpu0, busy0 = time.process_time(), C._machine_busy_s()
    t0 = time.perf_counter()
    build_s, train_s, predict, _ = run(SHAPE._replace(rounds=rounds), "binary", 2, Xtr,
                                       ytr, LOCAL_THREADS)
    fit_s = time.perf_counter() - t0
    busy1, cpu = C._machine_busy_s(), time.process_time() - cpu0
    auc = BF.score("binary", 2, yte, predict(Xte))["auc"]
    others = (None if busy0 is None or busy1 is None
              else max(0.0, (busy1 - busy0) - cpu) / fit_s)
    C.emit_result(dict(lib="bonsai-local", fit_s=fit_s, build_s=build_s, train_s=train_s,
                       fit_cpu_s=cpu, fit_others_cores=others, auc=auc))


# ----------------------------------------------------------------------- parent
def _comm_text(res):
    stats, n = res.get("comm_stats") or [], res.get("n_trees") or 0
    if not stats or not n:
        return ""
    mb = max(s["bytes_sent"] for s in stats) / n / 1e6
    sec = max(s["seconds"] for s in stats)
    return f"  comm {mb:.2f} MB/tree/rank, {sec:.2f}s in collectives (slowest rank)"


def run_all(libs, args, rows):
    results = {lib: [] for lib in libs}
    for rep in range(args.repeats):
        for lib in libs:
            if lib == "bonsai-local":
                argv = ["--worker", lib, "--rows", str(rows), "--rounds", str(args.rounds)]
                env = C.child_env(LOCAL_THREADS)
            else:
                argv = ["--worker", lib, "--rows", str(rows), "--rounds", str(args.rounds),
                        "--chunks", str(args.chunks), "--malloc-trim", args.malloc_trim]
                env = C.child_env(1, BLOCKS_ENV if lib == "bonsai-dask-blocks" else None)
            res = C.run_child([os.path.abspath(__file__), *argv], env, args.timeout)
            res.setdefault("lib", lib)
            # the busy check is over the timed fit, not the whole child process
            res["process_others_cores"] = res.get("others_cores")
            if "fit_others_cores" in res:
                res["others_cores"] = res["fit_others_cores"]
            results[lib].append(res)
            if "error" in res:
                line = f"ERROR {res['error']}"
            else:
                line = (f"fit {res['fit_s']:7.2f}s  cpu {res['fit_cpu_s']:7.2f}s  "
                        f"auc {res['auc']:.4f}{_comm_text(res)}")
                if "placement" in res:
                    line += f"  chunks/worker {sorted(res['placement'].values())}"
            print(f"  [rep {rep + 1}/{args.repeats}] {lib:<14} {line}{C.busy_note(res)}",
                  flush=True)
    return results


def medians(libs, results):
    med = {}
    for lib in libs:
        ok = [r for r in results[lib] if "error" not in r]
        if not ok:
            continue
        med[lib] = {k: C.median_or_none([r.get(k) for r in ok])
                    for k in ("fit_s", "fit_cpu_s", "auc", "others_cores")}
        med[lib]["n_ok"] = len(ok)
        stats = [r for r in ok if r.get("comm_stats") and r.get("n_trees")]
        if stats:
            med[lib]["comm"] = {
                "bytes_per_tree": C.median_or_none(
                    [max(s["bytes_sent"] for s in r["comm_stats"]) / r["n_trees"]
                     for r in stats]),
                "calls_per_tree": C.median_or_none(
                    [max(s["calls"] for s in r["comm_stats"]) / r["n_trees"] for r in stats]),
                "seconds": C.median_or_none(
                    [max(s["seconds"] for s in r["comm_stats"]) for r in stats]),
                "n_trees": C.median_or_none([r["n_trees"] for r in stats])}
    return med


def compare(med):
    """bonsai.dask's fit-time ratios and AUC differences (None where a side failed)."""
    out = {}
    if "bonsai-dask" not in med:
        return out
    b = med["bonsai-dask"]
    peers = [p for p in PEERS if p in med]
    if peers:
        fastest = min(peers, key=lambda p: med[p]["fit_s"])
        d_auc = b["auc"] - med[fastest]["auc"]
        ratio = b["fit_s"] / med[fastest]["fit_s"]
        out["peer"] = {"peer": fastest, "ratio": ratio, "auc_diff": d_auc,
                       "meets": ratio <= BAR_PEER and d_auc >= -AUC_TOL}
    if "bonsai-local" in med:
        ratio = b["fit_s"] / med["bonsai-local"]["fit_s"]
        out["local"] = {"ratio": ratio, "auc_diff": b["auc"] - med["bonsai-local"]["auc"],
                        "meets": ratio <= BAR_LOCAL}
    return out


def report(libs, results, med, cmp, args, rows):
    ref = med.get("bonsai-dask", {}).get("fit_s")

    def row(lib, m):
        vs = "-" if ref is None or lib == "bonsai-dask" else f"{ref / m['fit_s']:.2f}x"
        return [C.fmt(m["fit_s"]), C.fmt(m["fit_cpu_s"]), C.fmt(m["auc"], ".4f"), vs]
    C.print_results(f"higgs {rows:,} rows, {args.rounds} rounds: medians of {args.repeats} "
                    "interleaved run(s)", ["library", "ok", "fit s", "cpu s", "auc",
                                           "bonsai-dask / this"],
                    libs, results, med, args.repeats, row)
    print("fit s = wall time from the persisted dask arrays (or, bonsai-local, the numpy "
          "arrays) to the\n  trained model, binning included; cpu s = user + sys of the "
          "client process (scheduler\n  included) and both workers over that time; auc = "
          "test AUC, predicted locally with each\n  library's local model.")
    for lib in BONSAI_DASK:
        c = med.get(lib, {}).get("comm")
        if c:
            print(f">> {lib} all-reduce: {c['bytes_per_tree'] / 1e6:.2f} MB sent per tree "
                  f"per rank ({c['calls_per_tree']:.1f} calls per tree), {c['seconds']:.2f} s "
                  f"in collectives (slowest rank, {c['seconds'] / med[lib]['fit_s']:.0%} of "
                  f"the fit; {1e3 * c['seconds'] / c['n_trees']:.1f} ms per tree)")
    if "peer" in cmp:
        p = cmp["peer"]
        print(f">> bonsai.dask / the faster of {' and '.join(PEERS)} ({p['peer']}): "
              f"{p['ratio']:.2f}x, AUC {p['auc_diff']:+.4f}  [bar <= {BAR_PEER} at AUC "
              f"within {AUC_TOL} or better: {'met' if p['meets'] else 'NOT met'}]")
    if "local" in cmp:
        p = cmp["local"]
        print(f">> bonsai.dask / bonsai one-process n_threads={LOCAL_THREADS}: "
              f"{p['ratio']:.2f}x, AUC {p['auc_diff']:+.4f}  [bar <= {BAR_LOCAL}: "
              f"{'met' if p['meets'] else 'NOT met'}]")
    print(f"conditions: 2 threads in total. LocalCluster of {N_WORKERS} worker processes x 1 "
          "thread on 127.0.0.1 (client and scheduler on the same cores); bonsai.dask "
          "n_threads=1,\n  xgboost nthread=1 and lightgbm num_threads=1 per worker; "
          f"bonsai-local n_threads={LOCAL_THREADS} in one process. Training rows in "
          f"{args.chunks} row chunks, persisted before timing.")
    for r in (r for lib in DASK_LIBS if lib in results for r in results[lib][:1]):
        if "conditions" in r:
            probe = r["conditions"]["probe"].values()
            print(f"  {r['lib']}: worker threads {sorted(r['conditions']['nthreads'].values())}"
                  f", NUMBA_NUM_THREADS {sorted(p['numba_threads'] for p in probe)}, "
                  f"OMP_NUM_THREADS {sorted(str(p['omp']) for p in probe)}, "
                  f"MALLOC_TRIM_THRESHOLD_ {sorted(str(p.get('malloc_trim')) for p in probe)}"
                  + (f", BONSAI_BLOCK_BYTES {sorted(str(p.get('block_bytes')) for p in probe)}"
                     if r["lib"] == "bonsai-dask-blocks" else ""))
    print("  settings: depth 8 (lightgbm num_leaves 255), lr 0.1, 255 bins (xgboost "
          "max_bin=256, hist), min 20 rows / 1e-3 hessian per leaf, L2 1.0, seed 0")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--rows", type=int, default=None,
                    help="total rows (train + 10%% test); default the higgs set's 1,000,000")
    ap.add_argument("--rounds", type=int, default=SHAPE.rounds)
    ap.add_argument("--chunks", type=int, default=8, help="row chunks of the dask arrays")
    ap.add_argument("--malloc-trim", choices=("dask", "off"), default="dask",
                    help="dask: the workers' MALLOC_TRIM_THRESHOLD_ as Dask sets it "
                    "(65536); off: glibc's default (see the module docstring)")
    ap.add_argument("--libs", default=",".join(DEFAULT_LIBS),
                    help=f"comma list from {', '.join(LIBS)} (optional: bonsai-dask-quantized, "
                    "quantized_grad=True, half the histogram bytes; bonsai-dask-blocks, "
                    "feature blocks at 2 ranks too)")
    ap.add_argument("--timeout", type=float, default=3600.0, help="seconds per child")
    ap.add_argument("--json", default=None, help="also write raw results here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for name in ("repeats", "rounds", "chunks"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1, got {getattr(args, name)}")
    rows = args.rows or C.DATASETS["higgs"].rows
    if args.worker == "bonsai-local":
        local_worker(rows, args.rounds)
        return 0
    if args.worker:
        dask_worker(args.worker, rows, args.rounds, args.chunks, args.malloc_trim)
        return 0
    libs = [s.strip() for s in args.libs.split(",") if s.strip()]
    unknown = [lib for lib in libs if lib not in LIBS]
    if unknown:
        ap.error(f"unknown libs {unknown}; choose from {list(LIBS)}")
    t0 = time.perf_counter()
    path = C.ensure_cached("higgs", rows)
    print(f"bench_dask: python {sys.version.split()[0]}, numpy {np.__version__}, higgs "
          f"{rows:,} rows x 28 (binary), {args.rounds} rounds, depth 8, lr 0.1, repeats "
          f"{args.repeats}, libs {','.join(libs)}, workers' malloc trim {args.malloc_trim}; "
          f"data {path} "
          f"({time.perf_counter() - t0:.1f}s)", flush=True)
    results = run_all(libs, args, rows)
    med = medians(libs, results)
    cmp = compare(med)
    report(libs, results, med, cmp, args, rows)
    C.dump_json(args.json, results, {"medians": med, "compare": cmp})
    return 0


if __name__ == "__main__":
    sys.exit(main())
