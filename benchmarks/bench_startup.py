"""Start-up cost of bonsai: a first run with an empty numba cache (cold) against a
run that loads the kernels numba cached (warm).

    python benchmarks/bench_startup.py [--repeats 3] [--threads 2] [--source DIR ...]
        [--warmup] [--json out.json]

For every repeat and every bonsai source tree (``--source``, default this checkout;
several trees, e.g. a checkout of an older commit for a before/after, are interleaved
within each repeat), each with fresh, empty ``NUMBA_CACHE_DIR`` directories:

* demo cold, demo warm: the README's first command without the install,
  ``python -m bonsai.demo`` (a leaf-wise ``BonsaiClassifier``, 31 leaves, 100 trees
  on the bundled HIGGS sample, with an eval set), run in the source tree twice on one
  cache directory: the first run compiles every kernel it uses, the second loads them;
* fit cold, fit warm: the same for ``import bonsai`` + a 2000 x 10, 5-tree
  ``BonsaiClassifier`` fit + predict (the issue's "warm start": a new process with
  the cache filled, import + a first small fit), on a second cache directory;
* python: an interpreter that only imports numpy (the fixed cost of any process);
* ``--warmup``: ``bonsai.warmup()`` on a third empty cache directory.

Each run reports its process wall time and its CPU time (user + sys).  numba
compiles on one thread, so the CPU time of a cold run is its compile work, and it
moves much less than the wall time when other processes share the machine.
``NUMBA_CACHE_DIR`` sends all of numba's cache files to that directory: caches in
the tree's own ``__pycache__`` directories are neither read nor written (checked with
``NUMBA_DEBUG_CACHE=1``).  A cold child checks that its cache directory starts empty.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time

import _common as C

N_ROWS, N_FEATURES, N_TREES = 2000, 10, 5
DEMO_LINE = re.compile(r"test AUC = ([\d.]+)\s+train time = ([\d.]+) s")


def _cache_files(path):
    return sum(len(f) for _, _, f in os.walk(path))


def worker(mode: str) -> None:
    """Runs in the fresh interpreter. mode: 'fit', 'warmup' or 'baseline'."""
    t0 = time.perf_counter()
    import numpy as np
    if mode == "baseline":
        C.emit_result({"import_s": time.perf_counter() - t0})
        return
    cache = os.environ["NUMBA_CACHE_DIR"]
    files0 = _cache_files(cache)
    t1 = time.perf_counter()
    import bonsai
    t2 = time.perf_counter()
    result = {"numpy_import_s": t1 - t0, "import_s": t2 - t1, "bonsai": bonsai.__file__,
              "cache_files_before": files0}
    if mode == "warmup":
        bonsai.warmup()
        result["warmup_s"] = time.perf_counter() - t2
    else:
        rng = np.random.default_rng(0)
        X = rng.standard_normal((N_ROWS, N_FEATURES)).astype(np.float32)
        y = (X[:, 0] * X[:, 1] + X[:, 2] > 0).astype(np.int64)
        clf = bonsai.BonsaiClassifier(n_estimators=N_TREES)
        clf.fit(X, y)
        t3 = time.perf_counter()
        p1 = clf.predict_proba(X)[:, 1]
        t4 = time.perf_counter()
        result.update(fit_s=t3 - t2, predict_s=t4 - t3,
                      train_acc=float(np.mean((np.asarray(p1) > 0.5) == y)))
    result["total_in_process_s"] = time.perf_counter() - t0
    result["cache_files_after"] = _cache_files(cache)
    C.emit_result(result)


def _env(source, threads, cache):
    env = C.child_env(threads, {"NUMBA_CACHE_DIR": cache} if cache else {})
    env["PYTHONPATH"] = os.pathsep.join([source, env["PYTHONPATH"]])
    return env


def _run_worker(mode, source, cache, threads, timeout):
    return C.run_child([os.path.abspath(__file__), "--worker", mode],
                       _env(source, threads, cache), timeout)


def _run_demo(source, cache, threads, timeout):
    files0 = _cache_files(cache)
    res = C.run_child(["-m", "bonsai.demo"], _env(source, threads, cache), timeout, cwd=source,
                      raw=True)
    if "error" in res:
        return res
    m = DEMO_LINE.search(res.pop("stdout"))
    if m is None:
        return {"error": "the demo printed no 'test AUC = ... train time = ...' line",
                "wall_s": res["wall_s"]}
    res.update(auc=float(m.group(1)), demo_train_s=float(m.group(2)),
               cache_files_before=files0, cache_files_after=_cache_files(cache))
    return res


def _show(label, res):
    if "error" in res:
        print(f"  {label:<11} ERROR {res['error']}", flush=True)
        return
    parts = [f"wall {res['wall_s']:6.2f}s", f"cpu {res['cpu_s']:6.2f}s"]
    for key, name in (("import_s", "import"), ("fit_s", "fit"), ("predict_s", "predict"),
                      ("warmup_s", "warmup()"), ("demo_train_s", "demo's train time")):
        if key in res:
            parts.append(f"{name} {res[key]:.2f}s")
    if "auc" in res:
        parts.append(f"AUC {res['auc']:.4f}")
    if "cache_files_after" in res:
        parts.append(f"cache files {res['cache_files_before']} -> {res['cache_files_after']}")
    print(f"  {label:<11} " + ", ".join(parts) + C.busy_note(res), flush=True)


ROWS = (("demo_cold", "demo, cold (empty cache)"), ("demo_warm", "demo, warm (cached)"),
        ("fit_cold", "small fit, cold"), ("fit_warm", "small fit, warm"),
        ("warmup", "warmup(), cold"), ("python", "python + numpy only"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2, help="NUMBA_NUM_THREADS for children")
    ap.add_argument("--source", action="append", default=None,
                    help="bonsai source tree to time (repeatable; default: this checkout)")
    ap.add_argument("--warmup", action="store_true", help="also time a cold bonsai.warmup()")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--json", default=None, help="write every run and the medians here")
    ap.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0
    sources = [os.path.abspath(s) for s in (args.source or [str(C.REPO_ROOT)])]
    for s in sources:
        if not os.path.isfile(os.path.join(s, "bonsai", "__init__.py")):
            ap.error(f"--source {s}: no bonsai/__init__.py there")

    print(f"bench_startup: python {sys.version.split()[0]}, {args.repeats} repeat(s), "
          f"NUMBA_NUM_THREADS={args.threads}, sources: {', '.join(sources)}")
    runs = {s: {k: [] for k, _ in ROWS} for s in sources}
    for rep in range(args.repeats):
        print(f"[rep {rep + 1}/{args.repeats}]")
        runs[sources[0]]["python"].append(_run_worker("baseline", sources[0], None,
                                                      args.threads, args.timeout))
        _show("python", runs[sources[0]]["python"][-1])
        for src in sources:
            print(f" {src}")
            r = runs[src]
            caches = [tempfile.mkdtemp(prefix="bonsai_numba_cache_") for _ in range(3)]
            try:
                for key, cache in (("demo_cold", caches[0]), ("demo_warm", caches[0])):
                    r[key].append(_run_demo(src, cache, args.threads, args.timeout))
                    _show(key, r[key][-1])
                for key, cache in (("fit_cold", caches[1]), ("fit_warm", caches[1])):
                    r[key].append(_run_worker("fit", src, cache, args.threads, args.timeout))
                    _show(key, r[key][-1])
                if args.warmup:
                    r["warmup"].append(_run_worker("warmup", src, caches[2], args.threads,
                                                   args.timeout))
                    _show("warmup", r["warmup"][-1])
            finally:
                for c in caches:
                    shutil.rmtree(c, ignore_errors=True)

    summary = {}
    for src in sources:
        print(f"\n--- {src}: medians of {args.repeats} run(s), seconds ---")
        headers = ["run", "ok", "wall", "cpu (user+sys)", "in-process", "AUC"]
        rows = []
        summary[src] = {}
        for key, label in ROWS:
            rs = runs[src][key] if key != "python" else runs[sources[0]]["python"]
            if not rs:
                continue
            ok = [x for x in rs if "error" not in x]
            med = {k: C.median_or_none([x.get(k) for x in ok])
                   for k in ("wall_s", "cpu_s", "fit_s", "demo_train_s", "warmup_s", "auc")}
            summary[src][key] = med
            inproc = med["demo_train_s"] or med["warmup_s"] or med["fit_s"]
            rows.append([label, f"{len(ok)}/{len(rs)}", C.fmt(med["wall_s"]),
                         C.fmt(med["cpu_s"]), C.fmt(inproc), C.fmt(med["auc"], ".4f")])
        C.print_table(headers, rows)
        print("in-process: the demo's own train time (fit incl. compile), fit() time of the "
              "small fit, or warmup()'s time.")
        bad = [x for k in ("demo_cold", "fit_cold", "warmup") for x in runs[src][k]
               if x.get("cache_files_before")]
        if bad:
            print("ERROR: a cold run started with files in its cache directory")
    C.print_run_warnings([], {s: [x for k in runs[s] for x in runs[s][k]] for s in sources},
                         sources)
    C.dump_json(args.json, runs, summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
