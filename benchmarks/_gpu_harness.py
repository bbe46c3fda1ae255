"""What ``bench_gpu.py`` shares between its sub-commands: the sizes and repeats of a
run (full, ``--quick``, ``--smoke``), the per-section time budgets, the timing harness
(``Run.section``: skip a section that would not fit, rewrite the JSON after each;
``repeats``: stop repeating before the section's budget runs out), the run's metadata
and the report table with the issue's bars (``print_report``).

Standard library + numpy; numba is imported only by ``sync`` and ``gpu_name``, which
the ``xgboost`` sub-command never calls (it runs on the device image's numpy 2.5, which
numba 0.68 cannot use).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import NamedTuple

import numpy as np

import _common as C

N_FEATURES = 28
AUC_TOL = 5e-4                     # |AUC difference| below this counts as "equal AUC"
BAR_HIST_G = 600.0                 # root histogram, G row-features/s, at least
BAR_TREE_MS = 5.0                  # one depth-8 tree at 10M x 28, at most
BAR_VS_XGB = 0.8                   # 1M x 28 fit time over XGBoost GPU's, at most


class Sizes(NamedTuple):
    big: int = 10_000_000          # root histogram and one tree
    fit: int = 1_000_000           # the full fits (last 10% held out)
    predict: int = 1_000_000
    rounds: int = 200
    depth: int = 8
    det_rows: int = 200_000        # run-to-run bytes: a subset of the fit set
    det_rounds: int = 50
    check_rows: int = 2000         # CPU == GPU trees
    check_rounds: int = 5
    check_depth: int = 6


class Reps(NamedTuple):
    hist_warm: int = 2
    hist: int = 10
    tree_warm: int = 1
    tree: int = 5
    fit: int = 3
    predict: int = 5


SMOKE = Sizes(big=600, fit=300, predict=300, rounds=2, depth=3, det_rows=300, det_rounds=2,
              check_rows=300, check_rounds=2, check_depth=3)
QUICK = Reps(hist_warm=1, hist=5, tree_warm=1, tree=3, fit=1, predict=3)
SMOKE_REPS = Reps(hist_warm=1, hist=2, tree_warm=1, tree=1, fit=1, predict=1)
#: section -> (seconds it needs at least to start, seconds it may take at most), sized
#: for an H200 with 16 cores (--smoke multiplies them by SMOKE_SLACK: the simulator
#: runs a block in Python)
BUDGETS = {"warmup": (0, 240), "check_trees": (15, 90), "check_bytes": (20, 90),
           "data": (15, 60), "root_hist": (5, 30), "one_tree": (10, 60),
           "fit_gpu": (20, 100), "fit_cpu": (15, 60), "predict": (10, 45),
           "profile": (45, 120)}
SMOKE_SLACK = 20


def med(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


# ------------------------------------------------------------------ timing harness
class Clock:
    def __init__(self, total_s):
        self.t0, self.total = time.perf_counter(), float(total_s)

    def left(self):
        return self.total - (time.perf_counter() - self.t0)


def repeats(run, n, warm, cap_s, label):
    """``run()`` -> (seconds, extra) ``warm`` untimed + ``n`` timed times; stops early
    (printing why) when the next call would end past ``cap_s`` seconds.  Returns
    (timed seconds, the extras of the timed calls)."""
    t_start, secs, extras = time.perf_counter(), [], []
    for i in range(warm + n):
        s, extra = run()
        if i >= warm:
            secs.append(s)
            extras.append(extra)
        spent = time.perf_counter() - t_start
        if i + 1 < warm + n and spent + s > cap_s:
            print(f"  {label}: stopped after {len(secs)} of {n} timed runs (section budget "
                  f"{cap_s:.0f} s)")
            break
    return secs, extras


def sync():
    from numba import cuda
    cuda.synchronize()


class Run:
    """One ``bonsai`` or ``xgboost`` run: its results dict, written to ``out`` after
    every section."""

    def __init__(self, args, kind):
        self.args, self.smoke = args, args.smoke
        self.sizes = SMOKE if args.smoke else Sizes()
        self.reps = SMOKE_REPS if args.smoke else (QUICK if args.quick else Reps())
        self.clock = Clock(args.budget)
        self.res = {"kind": kind, "meta": meta(args, self.sizes, self.reps), "sections": {},
                    "section_s": {}}

    def section(self, name, title, fn, *a):
        need, cap = BUDGETS[name]
        slack = SMOKE_SLACK if self.smoke else 1
        need, cap = need * slack, cap * slack
        left = self.clock.left()
        if left < need:
            print(f"\n== {name}: SKIPPED (time budget: {left:.0f} s left, the section needs "
                  f"about {need:.0f} s)")
            self.res["sections"][name] = "SKIPPED (time budget)"
            self.write()
            return None
        cap = min(cap, left)
        print(f"\n== {name}: {title}  [budget {cap:.0f} s]", flush=True)
        t0 = time.perf_counter()
        out = None
        try:
            out = fn(cap, *a)
            self.res["sections"][name] = "ok"
        except Exception as e:                  # noqa: BLE001 - report and go on
            traceback.print_exc()
            self.res["sections"][name] = f"ERROR: {type(e).__name__}: {e}"
            print(f"  {name}: ERROR {type(e).__name__}: {e}")
        self.res["section_s"][name] = round(time.perf_counter() - t0, 3)
        print(f"  ({name}: {self.res['section_s'][name]:.1f} s)", flush=True)
        self.write()
        return out

    def write(self):
        if self.args.out:
            Path(self.args.out).write_text(json.dumps(self.res, indent=1))


def meta(args, sizes, reps):
    from importlib import metadata
    out = {"argv": sys.argv[1:], "smoke": bool(args.smoke), "quick": bool(args.quick),
           "budget_s": args.budget, "threads": args.threads, "sizes": sizes._asdict(),
           "reps": reps._asdict(), "python": platform.python_version(),
           "host": platform.node(), "cpus": os.cpu_count(), "numpy": np.__version__,
           "simulator": os.environ.get("NUMBA_ENABLE_CUDASIM", "") not in ("", "0")}
    for pkg in ("numba", "numba-cuda", "xgboost", "xgboost-cu13"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    try:
        out["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=C.REPO_ROOT,
                                       capture_output=True, text=True,
                                       timeout=10).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        out["commit"] = None                     # the device's copy has no .git
    out["bonsai_sources"] = sources_digest()
    return out


def sources_digest():
    """sha256 (16 hex digits) of bonsai/**/*.py: names the code where git is absent."""
    h = hashlib.sha256()
    for f in sorted((C.REPO_ROOT / "bonsai").rglob("*.py")):
        h.update(str(f.relative_to(C.REPO_ROOT)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def gpu_name():
    try:
        from numba import cuda
        if os.environ.get("NUMBA_ENABLE_CUDASIM", "") not in ("", "0"):
            return "numba's CUDA simulator (no GPU)"
        dev = cuda.get_current_device() if hasattr(cuda, "get_current_device") \
            else cuda.current_context().device
        name = getattr(dev, "name", str(dev))
        name = name.decode() if isinstance(name, bytes) else str(name)
        cc = getattr(dev, "compute_capability", None)
        return f"{name} (cc {cc[0]}.{cc[1]})" if cc else name
    except Exception as e:                       # noqa: BLE001 - informational only
        return f"unknown ({type(e).__name__}: {e})"


# ------------------------------------------------------------------ report
def load_json(path):
    if path and Path(path).is_file():
        return json.loads(Path(path).read_text())
    return None


def _verdict(ok, judged):
    return ("PASS" if ok else "FAIL") if judged else "n/a (smoke)"


def _n(n):
    """10_000_000 -> '10M', 200_000 -> '200k'."""
    for unit, size in (("M", 10 ** 6), ("k", 10 ** 3)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def _header(res):
    m = res["meta"]
    gpu = f"{m['gpu']}, " if m.get("gpu") else ""
    return (f"{res['kind']} run: commit {m.get('commit')} (bonsai/ sources "
            f"{m.get('bonsai_sources')}), {gpu}{m.get('cpus')} CPUs, "
            f"numpy {m.get('numpy')}, numba {m.get('numba', '-')}, numba-cuda "
            f"{m.get('numba-cuda', '-')}, xgboost {m.get('xgboost', '-')}"
            + (", SMOKE sizes" if m["smoke"] else "") + (", simulator" if m["simulator"] else ""))


def _comparable(bon, xg):
    """Whether both runs fitted the same data with the same rounds and depth."""
    keys = ("fit", "rounds", "depth")
    return (bon.get("data_fit") == xg.get("data_fit")
            and all(bon["meta"]["sizes"][k] == xg["meta"]["sizes"][k] for k in keys))


def _judged(bon):
    return bool(bon) and not bon["meta"]["smoke"] and not bon["meta"]["simulator"]


def _fit_shape(res):
    z = res["meta"]["sizes"]
    return f"{_n(z['fit'])} x {N_FEATURES}, depth {z['depth']}, {z['rounds']} rounds"


def _bonsai_rows(bon, row):
    z, judged = bon["meta"]["sizes"], _judged(bon)
    ct, cb = bon.get("check_trees"), bon.get("check_bytes")
    if ct:
        row(f"CPU == GPU trees ({_n(z['check_rows'])} x 10, {len(ct['cases'])} cases)",
            f"{sum(c['equal'] for c in ct['cases'])}/{len(ct['cases'])} equal", "all",
            _verdict(ct["pass"], judged))
    if cb:
        row(f"GPU model bytes, 3 fits ({_n(cb['rows'])} rows, {cb['rounds']} rounds)",
            "identical" if cb["identical"] else "DIFFER", "identical",
            _verdict(cb["identical"], judged))
    rh, ot = bon.get("root_hist"), bon.get("one_tree")
    big = f"{_n(z['big'])} x {N_FEATURES}"
    if rh:
        row(f"root histogram {big}", f"{rh['median_ms']:.3f} ms = {rh['g_rowfeat_s']:.0f} G/s",
            f">= {BAR_HIST_G:.0f} G row-feat/s",
            _verdict(rh["g_rowfeat_s"] >= BAR_HIST_G and rh["sums_ok"], judged))
    if ot:
        row(f"one depth-{z['depth']} tree {big}", f"{ot['median_ms']:.2f} ms (transfers "
            f"{ot['upload_ms'] + ot['download_ms']:.2f})", f"<= {BAR_TREE_MS:.0f} ms",
            _verdict(ot["median_ms"] <= BAR_TREE_MS, judged))
    for sec, dev in (("fit_gpu", "cuda"), ("fit_cpu", "cpu")):
        f = bon.get(sec)
        if f:
            row(f"bonsai fit {_fit_shape(bon)}, device={dev}", f"{f['median_total_s']:.2f} s "
                f"(train {f['median_fit_s']:.2f}), AUC {f['auc_median']:.4f}")
    p = bon.get("predict")
    if p and p.get("median_cuda_ms") is not None:
        row(f"predict {_n(p['rows'])} rows, cuda / cpu", f"{p['median_cuda_ms']:.1f} / "
            f"{p['median_cpu_ms']:.1f} ms, max diff {p['max_abs_diff']:.2g}")
    elif p:
        row("GPU predict", "not available in this build" if not p["available"] else "skipped")


def _compare_rows(bon, xg, row):
    """XGBoost's fit and bonsai's GPU fit over it: the issue's <= 0.8x at equal AUC."""
    fx = (xg or {}).get("fit_xgboost")
    if fx:
        row(f"XGBoost fit {_fit_shape(xg)}, device={'/'.join(sorted(set(fx['device_used'])))}",
            f"{fx['median_total_s']:.2f} s (train {fx['median_fit_s']:.2f}), AUC "
            f"{fx['auc_median']:.4f}")
    fg = (bon or {}).get("fit_gpu")
    if fx and fg:
        same = _comparable(bon, xg)
        ratio = fg["median_total_s"] / fx["median_total_s"]
        ratio_fit = fg["median_fit_s"] / fx["median_fit_s"]
        d_auc = fg["auc_median"] - fx["auc_median"]
        on_gpu = all(str(d).startswith("cuda") for d in fx["device_used"])
        row("bonsai GPU / XGBoost GPU, build + train", f"{ratio:.2f}x (train only "
            f"{ratio_fit:.2f}x), AUC {d_auc:+.4f}", f"<= {BAR_VS_XGB}x, AUC >= -{AUC_TOL}",
            _verdict(ratio <= BAR_VS_XGB and d_auc >= -AUC_TOL and on_gpu and same,
                     _judged(bon)))
        if not same:
            row("  (not the same fit in both runs)", f"data {bon.get('data_fit')} vs "
                f"{xg.get('data_fit')}; numpy {bon['meta']['numpy']} vs {xg['meta']['numpy']}")
        if not on_gpu:
            row("  (XGBoost did not train on the GPU)", str(fx["device_used"]))
    elif fg:
        row("bonsai GPU / XGBoost GPU", "no XGBoost result (the xgboost call)")
    elif fx:
        row("bonsai GPU / XGBoost GPU", "no bonsai fit_gpu result (the bonsai call's JSON)")


def print_report(bon, xg, only_comparison=False):
    """The table of checks, timings and the issue's bars from one or both runs' JSON
    (``None`` where absent; ``only_comparison``: XGBoost's row and the ratio).  Bars
    are judged on full-size runs on a GPU only."""
    rows = []

    def row(what, value, bar="", verdict=""):
        rows.append([what, value, bar, verdict])

    print("\n=== bench_gpu.py " + ("comparison" if only_comparison else "report"))
    for res in (bon, xg):
        if res:
            print("  " + _header(res))
    if bon and not only_comparison:
        _bonsai_rows(bon, row)
    for res in (bon, xg):
        for name, state in (res or {}).get("sections", {}).items():
            if state != "ok":
                row(f"{res['kind']} section {name}", state)
    _compare_rows(bon, xg, row)
    C.print_table(["check / measurement", "value", "bar", "result"], rows)
    prof = (bon or {}).get("profile")
    if prof and not only_comparison:
        print("profiled CUDA fit, its stderr:\n" + "\n".join("  | " + ln for ln in
                                                             prof["stderr"].splitlines()))
