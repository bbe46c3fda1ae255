"""GPU benchmark for a lent machine: bonsai's CUDA backend checked and timed.

Then XGBoost ``device="cuda"`` on the same data: two device calls in all.

    python benchmarks/bench_gpu.py bonsai  --out bonsai.json [--quick] [--smoke] [--budget S]
    python benchmarks/bench_gpu.py xgboost --out xgboost.json [--bonsai-json bonsai.json]
    python benchmarks/bench_gpu.py report  --bonsai bonsai.json --xgboost xgboost.json

``bonsai`` first checks, then times (every section prints what it measured):

* checks: (a) CPU == GPU trees: a 2k x 10 set with NaNs and one categorical column,
  depthwise and oblivious, binary and multiclass (3 classes), 5 rounds, depth 6
  (learning rate 0.3, min 5 samples per leaf, so the small trees grow deep):
  ``model_to_string()`` of the CPU and the CUDA fit, the model's ``"device"`` field
  normalised, must be equal, and the CUDA fit must not fall back to the CPU; (b)
  run-to-run bytes: 3 CUDA fits of the first 200k rows of the fit set (a subset, to
  save device time), depth 8, 50 rounds, give one model text; a CPU fit of it is
  compared too (reported, not a bar);
* the root histogram of 10M x 28: ``histogram.build`` called directly as
  ``TreeBuilder.evaluate_root`` calls it, ``numba.cuda.synchronize()`` around each
  call, median of 10 after 2 warm-ups, in G row-features/s (10M * 28 / t / 1e9);
* one depth-8 tree at 10M x 28: ``Grower.grow`` on a CUDA Grower (see ``one_tree``),
  median of 5 after 1 warm-up, synchronised; it excludes binning, the bins' upload and
  the gradients, and includes the per-tree transfers, which are also timed alone;
* the full fit of 1M x 28 (depth 8, 200 rounds, 10% holdout for AUC), device="cuda",
  and the same fit on device="cpu" with every core: median of 3, Dataset construction
  (host binning) and ``train`` timed apart; one more CUDA fit in a child process with
  ``BONSAI_PROFILE=1 BONSAI_CUDA_PROFILE=1``, its stderr breakdown kept;
* GPU batch predict: ``Booster.predict(X, device="cuda")`` against the CPU on 1M rows
  the model never saw (times and max abs difference), where this build has it.

Data: ``_common.higgs_like`` (bench_fit.py's ``higgs``: 28 float32 features, a
nonlinear latent thresholded into a binary label; seeded, generated in 100k-row
chunks): 1M rows for the fits (the last 10% the holdout), 10M for the histogram and
the tree.  Parameters: ``bench_fit.COMMON`` for both libraries (see ``bonsai_params``
and ``xgboost_params`` for the mapping).  Every section has a time budget; a section
that would not fit in what is left prints ``SKIPPED (time budget)``, and repeats stop
early (saying so) rather than run over.  The JSON is rewritten after every section.

``--smoke`` runs every section on tiny sizes (300 rows, 2 rounds, depth 3), e.g. on a
CPU machine under ``NUMBA_ENABLE_CUDASIM=1``: it tests the script, its numbers mean
nothing and no bar is judged.  The harness (sizes, budgets, repeats, the JSON, the
report with the bars) is ``_gpu_harness.py``.  See benchmarks/README.md and
gpu_device_run.sh.
"""
from __future__ import annotations

import argparse
import contextlib
import hashlib
import inspect
import io
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

import _common as C
import _gpu_harness as G
import bench_fit as BF
from _gpu_data import (auc, bonsai_params, check_data, data_digest, first_difference,
                       fit_data, normalised, xgboost_params)
from _gpu_harness import N_FEATURES, med, repeats, sync

if str(C.REPO_ROOT) not in sys.path:          # import bonsai from this working tree
    sys.path.insert(0, str(C.REPO_ROOT))

PROFILE_MARK = "bonsai CUDA profile"


# ------------------------------------------------------------------ bonsai sections
def fit_once(X, y, params, Xt=None, yt=None):
    """(build s, fit s, booster, AUC on (Xt, yt) or None, warnings raised)."""
    import bonsai
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        ds = bonsai.Dataset(X, label=y, max_bin=BF.COMMON["max_bin"])
        t1 = time.perf_counter()
        booster = bonsai.train(params, ds)
        t2 = time.perf_counter()
    score = auc(yt, booster.predict(Xt)) if Xt is not None else None
    return t1 - t0, t2 - t1, booster, score, [f"{w.category.__name__}: {w.message}" for w in caught]


def sec_warmup(cap, run):
    """Tiny CPU and CUDA fits: compile the kernels (and start the CUDA context) so no
    timed section pays for it."""
    import bonsai
    X, y = check_data(300, "binary")
    out = {}
    for dev in ("cpu", "cuda"):
        t0 = time.perf_counter()
        bonsai.train({"objective": "binary", "max_depth": 3, "n_estimators": 2, "device": dev,
                      "verbosity": 0}, bonsai.Dataset(X, label=y, categorical_features=[9]))
        out[dev + "_s"] = time.perf_counter() - t0
        print(f"  first {dev} fit (300 x 10, 2 rounds, depth 3; JIT compile included): "
              f"{out[dev + '_s']:.1f} s")
    out["gpu"] = G.gpu_name()
    print(f"  device: {out['gpu']}")
    run.res["meta"]["gpu"] = out["gpu"]
    return out


def sec_check_trees(cap, run):
    """CPU == GPU trees given the same quantized gradients: BONSAI_HOST_OBJECTIVE=1
    makes the CUDA fit take its gradients from the host objective (on a GPU the
    device's exp can differ from numpy's in the last bit, and the trees then from the
    CPU's legitimately); the device builder then must grow the CPU's trees exactly."""
    old = os.environ.get("BONSAI_HOST_OBJECTIVE")
    os.environ["BONSAI_HOST_OBJECTIVE"] = "1"
    try:
        return _check_trees(run)
    finally:
        if old is None:
            del os.environ["BONSAI_HOST_OBJECTIVE"]
        else:
            os.environ["BONSAI_HOST_OBJECTIVE"] = old


def _check_trees(run):
    import bonsai
    from bonsai.backends.cuda import FallbackWarning
    s = run.sizes
    cases = []
    for task in ("binary", "multiclass"):
        X, y = check_data(s.check_rows, task)
        for policy in ("depthwise", "oblivious"):
            params = {"objective": task, "grow_policy": policy, "max_depth": s.check_depth,
                      "n_estimators": s.check_rounds, "learning_rate": 0.3, "verbosity": 0,
                      "min_child_samples": 5}
            if task == "multiclass":
                params["num_class"] = 3
            texts, fell_back = {}, False
            for dev in ("cpu", "cuda"):
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    ds = bonsai.Dataset(X, label=y, categorical_features=[9])
                    b = bonsai.train(dict(params, device=dev), ds)
                fell_back |= dev == "cuda" and any(issubclass(w.category, FallbackWarning)
                                                   for w in caught)
                texts[dev] = (normalised(b.model_to_string()), b.num_trees())
            (cpu, n_cpu), n_trees = texts["cpu"]
            (gpu, n_gpu), _ = texts["cuda"]
            equal = cpu == gpu and n_cpu == n_gpu == 1 and not fell_back
            why = ("the CUDA fit fell back to the CPU" if fell_back else
                   f"device field found {n_cpu} / {n_gpu} times" if not n_cpu == n_gpu == 1
                   else None if cpu == gpu else first_difference(cpu, gpu))
            cases.append({"case": f"{policy} {task}", "equal": equal, "trees": n_trees,
                          "model_bytes": len(gpu), "why": why})
            print(f"  {policy:<9s} {task:<10s} {'PASS' if equal else 'FAIL'}  ({s.check_rows} "
                  f"x 10, NaNs + 1 categorical, {s.check_rounds} rounds, depth "
                  f"{s.check_depth}: {n_trees} trees, {len(gpu)} model chars)"
                  + (f"\n    {why}" if why else ""))
    ok = all(c["equal"] for c in cases)
    print(f"  CPU == GPU trees: {'PASS' if ok else 'FAIL'} ({sum(c['equal'] for c in cases)} "
          f"of {len(cases)} cases)")
    return {"cases": cases, "pass": ok}


def sec_check_bytes(cap, run):
    s = run.sizes
    X, y = C.higgs_like(n=s.det_rows, d=N_FEATURES)
    params = bonsai_params(s.depth, s.det_rounds, run.args.threads, "cuda")
    digests = []
    text0 = None
    for i in range(3):
        _, fit_s, b, _, _ = fit_once(X, y, params)
        text = b.model_to_string()
        text0 = text0 or text
        digests.append(hashlib.sha256(text.encode()).hexdigest())
        print(f"  GPU fit {i + 1}: {fit_s:.2f} s, model sha256 {digests[-1][:16]}")
    same = len(set(digests)) == 1
    _, _, b_cpu, _, _ = fit_once(X, y, dict(params, device="cpu"))
    cpu_equal = normalised(b_cpu.model_to_string())[0] == normalised(text0)[0]
    print(f"  run-to-run bytes on the GPU ({s.det_rows} x {N_FEATURES}, depth {s.depth}, "
          f"{s.det_rounds} rounds, 3 fits): {'PASS identical' if same else 'FAIL differ'}")
    print(f"  (extra) the CPU fit of the same set equals them: {cpu_equal}")
    return {"rows": s.det_rows, "rounds": s.det_rounds, "sha256": digests, "identical": same,
            "cpu_equal": cpu_equal}


def sec_data(cap, run, ctx):
    """The 10M set binned, its first-round gradients quantized, a CUDA Grower over it."""
    import bonsai
    from bonsai._params import validate_params
    from bonsai.backends import get_backend
    from bonsai.grow import Grower
    from bonsai.objectives import get_objective
    s = run.sizes
    t0 = time.perf_counter()
    X, y = C.higgs_like(n=s.big, d=N_FEATURES)
    t1 = time.perf_counter()
    ds = bonsai.Dataset(X, label=y, max_bin=BF.COMMON["max_bin"])
    t2 = time.perf_counter()
    cu = get_backend("cuda")
    p = validate_params(bonsai_params(s.depth, 1, run.args.threads, "cuda"))
    data = cu.prepare(ds)                        # the bins' upload, once
    sync()
    t3 = time.perf_counter()
    grower = Grower(cu, data, p, run.args.threads)
    obj = get_objective("binary")
    raw = np.full((1, s.big), obj.init_score(y, None)[0])
    g, h = np.empty((1, s.big), np.float32), np.empty((1, s.big), np.float32)
    obj.grad_hess(y, raw, None, g, h)            # the first round's gradients
    b = grower.builder
    scales = cu.quantize(g[0], h[0], s.big, b.gh)
    print(f"  {s.big} x {N_FEATURES}: generated in {t1 - t0:.1f} s, binned in {t2 - t1:.1f} s, "
          f"bins uploaded in {t3 - t2:.2f} s; first-round logloss gradients quantized")
    ctx.update(cu=cu, grower=grower, scales=scales, X=X, n=s.big)
    return {"gen_s": t1 - t0, "bin_s": t2 - t1, "upload_s": t3 - t2}


def sec_root_hist(cap, run, ctx):
    from numba import cuda

    cu, b, n = ctx["cu"], ctx["grower"].builder, ctx["n"]
    idx = b.idx_buf[:n]
    cu.fill_range(idx)
    b.start_tree(ctx["scales"], idx)             # cells and indices to the device
    slot = b.pool.alloc()
    d = cuda.to_device(np.array([[0], [n], [slot]], np.int64))

    def once():                                  # as TreeBuilder.evaluate_root calls it
        sync()
        t = time.perf_counter()
        b.fill_histograms(True, d[0], d[1], d[2], 1, n)
        sync()
        return time.perf_counter() - t, None

    secs, _ = repeats(once, run.reps.hist, run.reps.hist_warm, cap, "root histogram")
    hist = b.pool.hist[slot].copy_to_host()
    b.pool.release(slot)
    off, want = b.feat_off, b.gh.sum(axis=0)
    sums_ok = all(np.array_equal(hist[off[f]:off[f + 1]].sum(axis=0), want)
                  for f in range(off.shape[0] - 1))
    t = med(secs)
    grf = n * N_FEATURES / t / 1e9
    gbs = n * (N_FEATURES * b.X.dtype.itemsize + b.gh.shape[1] * 8) / t / 1e9
    print(f"  root histogram {n} x {N_FEATURES} (zero + fill, {b.gh.shape[1]} int64 channels): "
          f"median {t * 1e3:.3f} ms of {len(secs)} (min {min(secs) * 1e3:.3f}) = {grf:.1f} G "
          f"row-features/s, {gbs:.0f} GB/s of bins + cells read; every feature's bins sum "
          f"to the cells' total: {sums_ok}")
    return {"ms": [x * 1e3 for x in secs], "median_ms": t * 1e3, "g_rowfeat_s": grf,
            "gb_s": gbs, "sums_ok": sums_ok}


def _depth(tree):
    depth, frontier = 0, [(0, 0)]
    while frontier:
        i, d = frontier.pop()
        depth = max(depth, d)
        if tree.left[i] >= 0:
            frontier += [(int(tree.left[i]), d + 1), (int(tree.right[i]), d + 1)]
    return depth


def sec_one_tree(cap, run, ctx):
    """``Grower.grow`` of one tree from the quantized cells on the host: start_tree's
    uploads of the cells and the indices, the levels (partition, histograms, scans,
    one wait each), finish_tree's copy of the indices home and the host's Tree."""
    cu, grower, scales, n = ctx["cu"], ctx["grower"], ctx["scales"], ctx["n"]
    b = grower.builder
    idx = b.idx_buf[:n]

    def once():
        cu.fill_range(idx)                       # the round's row order, as train does
        sync()
        t = time.perf_counter()
        tree = grower.grow(scales, idx, n, np.random.default_rng([0, 0, 0]))[0]
        sync()
        return time.perf_counter() - t, tree

    secs, trees = repeats(once, run.reps.tree, run.reps.tree_warm, cap, "one tree")
    ups, downs = [], []
    for _ in range(3):                           # the per-tree transfers alone
        cu.fill_range(idx)
        sync()
        t = time.perf_counter()
        b.start_tree(scales, idx)
        sync()
        ups.append(time.perf_counter() - t)
        t = time.perf_counter()
        b.finish_tree()
        sync()
        downs.append(time.perf_counter() - t)
    tree = trees[-1]
    t, up, down = med(secs), med(ups), med(downs)
    print(f"  one depth-{run.sizes.depth} tree {n} x {N_FEATURES} (Grower.grow, synchronised; "
          f"no binning, bins' upload or gradients): median {t * 1e3:.2f} ms of {len(secs)} "
          f"(min {min(secs) * 1e3:.2f}); {tree.n_leaves} leaves, depth {_depth(tree)}")
    print(f"    of which per-tree transfers: cells + indices up {up * 1e3:.2f} ms, indices "
          f"down {down * 1e3:.2f} ms; the rest (levels + host loop) {(t - up - down) * 1e3:.2f} ms")
    return {"ms": [x * 1e3 for x in secs], "median_ms": t * 1e3, "upload_ms": up * 1e3,
            "download_ms": down * 1e3, "rest_ms": (t - up - down) * 1e3,
            "leaves": tree.n_leaves, "depth": _depth(tree)}


def sec_fit(cap, run, ctx, device):
    s = run.sizes
    X, y, Xt, yt = ctx["fit"]
    params = bonsai_params(s.depth, s.rounds, run.args.threads, device)
    m = min(len(y), 200_000)                     # untimed: the large-fit kernels' JIT
    fit_once(X[:m], y[:m], dict(params, n_estimators=2))

    def once():
        build, fit, booster, score, warn = fit_once(X, y, params, Xt, yt)
        ctx["booster_" + device] = booster
        print(f"  {device}: build {build:.3f} s + fit {fit:.3f} s = {build + fit:.3f} s, "
              f"AUC {score:.4f}" + (f"  warnings: {warn}" if warn else ""), flush=True)
        return build + fit, {"build_s": build, "fit_s": fit, "auc": score, "warnings": warn}

    secs, runs = repeats(once, run.reps.fit, 0, cap, f"fit {device}")
    out = {k: [r[k] for r in runs] for k in ("build_s", "fit_s", "auc")}
    out.update(total_s=secs, median_total_s=med(secs), median_fit_s=med(out["fit_s"]),
               median_build_s=med(out["build_s"]), auc_median=med(out["auc"]),
               warnings=sorted({w for r in runs for w in r["warnings"]}))
    print(f"  fit {len(y)} x {N_FEATURES} (depth {s.depth}, {s.rounds} rounds) device={device}"
          f", {run.args.threads} threads: median total {out['median_total_s']:.2f} s (build "
          f"{out['median_build_s']:.2f} + train {out['median_fit_s']:.2f}) of {len(secs)}, "
          f"AUC {out['auc_median']:.4f}")
    return out


def sec_predict(cap, run, ctx):
    import bonsai
    booster = ctx.get("booster_cuda")
    if "device" not in inspect.signature(bonsai.Booster.predict).parameters:
        print("  GPU predict: not available in this build (Booster.predict has no device)")
        return {"available": False}
    if booster is None:
        print("  GPU predict: no CUDA model (the fit_gpu section did not run)")
        return {"available": True, "skipped": "no model"}
    Xb, n, lo = ctx["X"], run.sizes.predict, run.sizes.fit     # rows after the fit set's
    Xp = np.ascontiguousarray(Xb[lo:lo + n] if Xb.shape[0] >= lo + n else Xb[-n:])
    got = {}
    for dev in ("cpu", "cuda"):
        def once(dev=dev):
            t = time.perf_counter()
            p = booster.predict(Xp, device=dev)
            return time.perf_counter() - t, p
        got[dev] = repeats(once, run.reps.predict, 1, cap / 2, f"predict {dev}")
    diff = float(np.max(np.abs(np.asarray(got["cpu"][1][-1], np.float64)
                               - np.asarray(got["cuda"][1][-1], np.float64))))
    tc, tg = med(got["cpu"][0]), med(got["cuda"][0])
    print(f"  predict {Xp.shape[0]} rows (unseen), {booster.num_trees()} trees: cpu "
          f"{tc * 1e3:.1f} ms, cuda {tg * 1e3:.1f} ms (host array in, probabilities out): "
          f"cuda {tc / tg:.2f}x faster; max |cpu - cuda| = {diff:.3g}")
    return {"available": True, "rows": int(Xp.shape[0]),
            "cpu_ms": [x * 1e3 for x in got["cpu"][0]],
            "cuda_ms": [x * 1e3 for x in got["cuda"][0]], "median_cpu_ms": tc * 1e3,
            "median_cuda_ms": tg * 1e3, "max_abs_diff": diff}


def sec_profile(cap, run):
    """One CUDA fit of the fit set in a child with the profiles on (they synchronise the
    device at every stage, so they must not touch the timed fits)."""
    a = run.args
    argv = [str(Path(__file__).resolve()), "bonsai", "--profile-child", "--threads",
            str(a.threads)] + (["--smoke"] if a.smoke else [])
    env = C.child_env(a.threads, {"BONSAI_PROFILE": "1", "BONSAI_CUDA_PROFILE": "1"})
    res = C.run_child(argv, env, timeout=cap)
    if "error" in res:
        raise RuntimeError(f"profiled child: {res['error']}")
    print(f"  profiled CUDA fit (child process, {a.threads} threads): build {res['build_s']:.2f}"
          f" s + fit {res['fit_s']:.2f} s (profiling synchronises: slower than the timed fits)"
          f", AUC {res['auc']:.4f}; its stderr:")
    print("\n".join("    | " + ln for ln in res["stderr"].splitlines()))
    return res


def profile_child(args):
    """The ``--profile-child`` process: one fit, stderr captured, one result line."""
    s = G.SMOKE if args.smoke else G.Sizes()
    X, y, Xt, yt = fit_data(s.fit)
    buf = io.StringIO()
    with contextlib.redirect_stderr(buf):
        build, fit, _, score, _ = fit_once(X, y, bonsai_params(s.depth, s.rounds, args.threads,
                                                               "cuda"), Xt, yt)
        if PROFILE_MARK not in buf.getvalue():
            from bonsai.backends.cuda import _profile
            totals = _profile.report()
            zero = "; every stage is 0: this build times none of them" if not any(
                totals.values()) else ""
            print(f"(the fit printed no CUDA profile: printed above by bench_gpu.py after "
                  f"it{zero})", file=buf)
    C.emit_result({"build_s": build, "fit_s": fit, "auc": score, "stderr": buf.getvalue()})


def cmd_bonsai(args):
    if args.profile_child:
        return profile_child(args)
    import bonsai
    from bonsai.backends import usable
    ok, why = usable("cuda")
    if not ok:
        sys.exit(f"bench_gpu.py bonsai: device='cuda' cannot train here: {why} (use a GPU "
                 "machine, or NUMBA_ENABLE_CUDASIM=1 with --smoke)")
    run = G.Run(args, "bonsai")
    run.res["meta"]["bonsai"] = bonsai.__version__
    print(f"bench_gpu.py bonsai: sizes {run.sizes._asdict()}\n  reps {run.reps._asdict()}, "
          f"threads {args.threads}, budget {args.budget:.0f} s, meta {run.res['meta']}")
    r, ctx = run.res, {}
    r["warmup"] = run.section("warmup", "JIT compile and CUDA context", sec_warmup, run)
    r["check_trees"] = run.section("check_trees", "CPU == GPU trees", sec_check_trees, run)
    r["check_bytes"] = run.section("check_bytes", "GPU run-to-run bytes", sec_check_bytes, run)
    r["data"] = run.section("data", f"{run.sizes.big} x {N_FEATURES} on the device", sec_data,
                            run, ctx)
    if r["data"] is not None:
        r["root_hist"] = run.section("root_hist", "root histogram", sec_root_hist, run, ctx)
        r["one_tree"] = run.section("one_tree", "one tree", sec_one_tree, run, ctx)
        ctx.pop("grower", None)                  # frees the device buffers of the 10M set
    else:
        for name in ("root_hist", "one_tree"):
            print(f"\n== {name}: SKIPPED (no {run.sizes.big}-row data: see section data)")
            r["sections"][name] = "SKIPPED (no data)"
    ctx["fit"] = fit_data(run.sizes.fit)
    r["data_fit"] = {"rows": run.sizes.fit, "digest": data_digest(*ctx["fit"])}
    r["fit_gpu"] = run.section("fit_gpu", "full fit, device=cuda", sec_fit, run, ctx, "cuda")
    r["fit_cpu"] = run.section("fit_cpu", "full fit, device=cpu", sec_fit, run, ctx, "cpu")
    r["predict"] = run.section("predict", "GPU batch predict", sec_predict, run, ctx)
    r["profile"] = run.section("profile", "profiled fit", sec_profile, run)
    r["wall_s"] = run.clock.total - run.clock.left()
    run.write()
    print(f"\nbench_gpu.py bonsai: {r['wall_s']:.0f} s in all; JSON: {args.out}")
    G.print_report(r, G.load_json(args.xgboost_json))


# ------------------------------------------------------------------ xgboost
def cmd_xgboost(args):
    import xgboost as xgb
    run = G.Run(args, "xgboost")
    run.res["meta"]["xgboost"] = xgb.__version__
    run.res["meta"]["xgboost_cuda_build"] = bool(xgb.build_info().get("USE_CUDA"))
    print(f"bench_gpu.py xgboost: meta {run.res['meta']}")
    s = run.sizes
    X, y, Xt, yt = fit_data(s.fit)
    run.res["data_fit"] = {"rows": s.fit, "digest": data_digest(X, y, Xt, yt)}
    params = xgboost_params(s.depth, args.threads)

    def fit(Xa, ya, rounds):
        t0 = time.perf_counter()
        dtrain = xgb.QuantileDMatrix(Xa, label=ya, max_bin=params["max_bin"], nthread=args.threads)
        t1 = time.perf_counter()
        booster = xgb.train(params, dtrain, num_boost_round=rounds)
        t2 = time.perf_counter()
        used = json.loads(booster.save_config())["learner"]["generic_param"]["device"]
        return t1 - t0, t2 - t1, booster, used

    def sec(cap):
        fit(X[:10000], y[:10000], 5)                 # CUDA context and kernels, untimed

        def once():
            build, train_s, booster, used = fit(X, y, s.rounds)
            score = auc(yt, booster.inplace_predict(Xt))
            print(f"  xgboost device={used}: build {build:.2f} s + fit {train_s:.2f} s = "
                  f"{build + train_s:.2f} s, AUC {score:.4f}", flush=True)
            return build + train_s, {"build_s": build, "fit_s": train_s, "auc": score,
                                     "device_used": used}

        secs, runs = repeats(once, run.reps.fit, 0, cap, "fit xgboost")
        out = {k: [r[k] for r in runs] for k in ("build_s", "fit_s", "auc", "device_used")}
        out.update(total_s=secs, median_total_s=med(secs), median_fit_s=med(out["fit_s"]),
                   median_build_s=med(out["build_s"]), auc_median=med(out["auc"]),
                   params=params)
        print(f"  XGBoost fit {len(y)} x {N_FEATURES} (depth {s.depth}, {s.rounds} rounds, "
              f"device={'/'.join(sorted(set(out['device_used'])))}): median total "
              f"{out['median_total_s']:.2f} s (build {out['median_build_s']:.2f} + train "
              f"{out['median_fit_s']:.2f}) of {len(secs)}, AUC {out['auc_median']:.4f}")
        return out

    run.res["fit_xgboost"] = run.section("fit_gpu", "XGBoost device=cuda, the same fit", sec)
    run.res["wall_s"] = run.clock.total - run.clock.left()
    run.write()
    G.print_report(G.load_json(args.bonsai_json), run.res, only_comparison=True)


def cmd_report(args):
    bon, xg = G.load_json(args.bonsai), G.load_json(args.xgboost)
    if bon is None and xg is None:
        sys.exit(f"bench_gpu.py report: neither {args.bonsai} nor {args.xgboost} exists")
    G.print_report(bon, xg)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name, out, what in (("bonsai", "bonsai.json", "bonsai's checks and timings"),
                            ("xgboost", "xgboost.json", "XGBoost device='cuda', the same fit")):
        p = sub.add_parser(name, help=what)
        p.add_argument("--out", default=out, help="JSON of the results (rewritten per section)")
        p.add_argument("--quick", action="store_true", help="fewer repeats (same sizes)")
        p.add_argument("--smoke", action="store_true",
                       help="tiny sizes, every section once: tests the script (e.g. under "
                            "NUMBA_ENABLE_CUDASIM=1); its numbers mean nothing")
        p.add_argument("--budget", type=float, default=None,
                       help="seconds for the whole run (default 390; --smoke: 3600)")
        p.add_argument("--threads", type=int, default=os.cpu_count(),
                       help="CPU threads of every fit (default: every core)")
    sub.choices["bonsai"].add_argument("--xgboost-json", default=None,
                                       help="an XGBoost JSON to put in the final report")
    sub.choices["bonsai"].add_argument("--profile-child", action="store_true",
                                       help=argparse.SUPPRESS)
    sub.choices["xgboost"].add_argument("--bonsai-json", default="bonsai.json",
                                        help="the bonsai run's JSON, for the ratio (if present)")
    p = sub.add_parser("report", help="the table and ratios from both JSONs")
    p.add_argument("--bonsai", default="bonsai.json")
    p.add_argument("--xgboost", default="xgboost.json")
    args = ap.parse_args(argv)
    if args.cmd == "report":
        return cmd_report(args)
    if args.budget is None:
        args.budget = 3600.0 if args.smoke else 390.0
    if args.budget <= 0 or args.threads < 1:
        ap.error(f"--budget must be > 0 and --threads >= 1, got {args.budget}, {args.threads}")
    return cmd_bonsai(args) if args.cmd == "bonsai" else cmd_xgboost(args)


if __name__ == "__main__":
    main()
