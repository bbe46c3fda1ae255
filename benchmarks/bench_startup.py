"""Start-up cost of bonsai: first-call JIT compile vs. numba-cached start.

    python benchmarks/bench_startup.py [--repeats 3] [--threads 2]

For every repeat a fresh, empty NUMBA_CACHE_DIR is created and two fresh
interpreters run the same script (``import bonsai`` + a 2000x10, 5-tree fit + predict):

* cold: the cache is empty, so every kernel the fit needs is compiled by numba;
* warm: same cache dir, so kernels are loaded from the on-disk cache.

A third process with its own empty cache times ``bonsai.warmup()`` (if it exists),
and an interpreter that only imports numpy gives the fixed cost of starting Python.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time

import _common as C

N_ROWS, N_FEATURES, N_TREES = 2000, 10, 5


def worker(mode: str) -> None:
    """Runs in the fresh interpreter. mode: 'fit', 'warmup' or 'baseline'."""
    t0 = time.perf_counter()
    import numpy as np
    if mode == "baseline":
        C.emit_result({"import_s": time.perf_counter() - t0})
        return
    t1 = time.perf_counter()
    import bonsai
    t2 = time.perf_counter()
    result = {"numpy_import_s": t1 - t0, "import_s": t2 - t1}
    if mode == "warmup":
        warmup = getattr(bonsai, "warmup", None)
        if warmup is None:
            C.emit_result({"skipped": "bonsai.warmup() does not exist"})
            return
        warmup()
        result["warmup_s"] = time.perf_counter() - t2
    else:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((N_ROWS, N_FEATURES)).astype(np.float32)
        y = (X[:, 0] * X[:, 1] + X[:, 2] > 0).astype(np.int64)
        if hasattr(bonsai, "BonsaiClassifier"):
            api, clf = "sklearn", bonsai.BonsaiClassifier(n_estimators=N_TREES)
            clf.fit(X, y)
            t3 = time.perf_counter()
            p1 = clf.predict_proba(X)[:, 1]
        else:           # estimator not there yet: the native API compiles the same kernels
            api = "native"
            booster = bonsai.train({"objective": "binary"}, bonsai.Dataset(X, label=y),
                                   num_boost_round=N_TREES)
            t3 = time.perf_counter()
            p1 = booster.predict(X)
        t4 = time.perf_counter()
        result.update(api=api, fit_s=t3 - t2, predict_s=t4 - t3,
                      train_acc=float(np.mean((np.asarray(p1) > 0.5) == y)))
    result["total_in_process_s"] = time.perf_counter() - t0
    result["n_cache_files"] = sum(len(f) for _, _, f in os.walk(os.environ["NUMBA_CACHE_DIR"]))
    C.emit_result(result)


def _run(mode, cache_dir, threads, timeout):
    extra = {"NUMBA_CACHE_DIR": cache_dir} if cache_dir else {}
    return C.run_child([os.path.abspath(__file__), "--worker", mode],
                       C.child_env(threads, extra), timeout)


def _show(label, res, keys):
    if "error" in res or "skipped" in res:
        print(f"  {label:<9} {'ERROR ' + res['error'] if 'error' in res else res['skipped']}")
        return
    parts = ", ".join(f"{k} {res[k]:.2f}s" for k in keys if k in res)
    if "api" in res:
        parts += f", {res['api']} API, train acc {res['train_acc']:.3f}"
    print(f"  {label:<9} process wall {res['wall_s']:.2f}s" + (f"  ({parts})" if parts else "")
          + C.busy_note(res), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="NUMBA_NUM_THREADS for children")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--no-warmup", action="store_true", help="skip the bonsai.warmup() probe")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0

    print(f"bench_startup: python {sys.version.split()[0]}, {args.repeats} repeat(s), "
          f"fit = {N_ROWS}x{N_FEATURES}, {N_TREES} trees (BonsaiClassifier, else native train)")
    keys = ("import_s", "fit_s", "predict_s", "warmup_s")
    runs = {"baseline": [], "cold": [], "warm": [], "warmup": []}
    for rep in range(args.repeats):
        print(f"[rep {rep + 1}/{args.repeats}]")
        cache = tempfile.mkdtemp(prefix="bonsai_numba_cache_")
        try:
            runs["baseline"].append(_run("baseline", None, args.threads, args.timeout))
            _show("python", runs["baseline"][-1], ())
            runs["cold"].append(_run("fit", cache, args.threads, args.timeout))
            _show("cold", runs["cold"][-1], keys)
            runs["warm"].append(_run("fit", cache, args.threads, args.timeout))
            _show("warm", runs["warm"][-1], keys)
        finally:
            shutil.rmtree(cache, ignore_errors=True)
        if not args.no_warmup:
            cache = tempfile.mkdtemp(prefix="bonsai_numba_cache_")
            try:
                runs["warmup"].append(_run("warmup", cache, args.threads, args.timeout))
                _show("warmup()", runs["warmup"][-1], keys)
            finally:
                shutil.rmtree(cache, ignore_errors=True)

    print(f"\n--- medians of {args.repeats} run(s) (seconds) ---")
    headers = ["run", "ok", "process wall", "import bonsai", "fit", "predict", "warmup()"]
    rows = []
    labels = {"baseline": "python + numpy only", "cold": "(a) cold: empty cache",
              "warm": "(b) warm: cached", "warmup": "cold bonsai.warmup()"}
    for name, label in labels.items():
        ok = [r for r in runs[name] if "error" not in r and "skipped" not in r]
        if not runs[name] or all("skipped" in r for r in runs[name]):
            continue
        med = {k: C.median_or_none([r.get(k) for r in ok]) for k in ("wall_s",) + keys}
        imp = None if name == "baseline" else med["import_s"]
        rows.append([label, f"{len(ok)}/{len(runs[name])}", C.fmt(med["wall_s"]),
                     C.fmt(imp), C.fmt(med["fit_s"]), C.fmt(med["predict_s"]),
                     C.fmt(med["warmup_s"])])
    C.print_table(headers, rows)
    cold = C.median_or_none([r["wall_s"] for r in runs["cold"] if "error" not in r])
    warm = C.median_or_none([r["wall_s"] for r in runs["warm"] if "error" not in r])
    if cold is not None and warm is not None:
        print(f"first-call JIT cost ~ {cold - warm:.2f}s (cold wall - warm wall); "
              f"cached start-up {warm:.2f}s wall.")
    errors = [f"  {n}: {r['error']}" for n, rs in runs.items() for r in rs if "error" in r]
    if errors:
        print("errors:\n" + "\n".join(dict.fromkeys(errors)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
