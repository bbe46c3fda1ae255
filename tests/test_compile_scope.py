"""What a fit compiles: the kernels a small numeric fit does not use stay uncompiled.

numba prunes the branches on ``x is None`` for an argument ``x`` that is None before it
types a function (``bonsai.backends.cpu.step``), so a small fit of exact gradients on
dense numeric data compiles no parallel twin, no categorical scan, no sparse-rows fill
and no quantized fill.  That keeps a first fit's JIT time down
(``benchmarks/bench_startup.py``).  The split step's parts are compiled here in a
fresh process with an empty numba cache (a dispatcher loaded from the cache records
no callee signatures, so only a compiling process can tell).
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

import bonsai
from bonsai.backends import cpu

from _child import child_env

REPO_ROOT = Path(__file__).resolve().parent.parent

_SCRIPT = r"""
import json
import numpy as np
from bonsai.backends.cpu import histogram as H, partition as P, split as S, split_cat as SC
from bonsai.backends.cpu import _gain as G, step
from bonsai.split_settings import CatSettings, Scales, SplitSettings

n, F, nv = 64, 3, 4
feat_off = np.arange(F + 1, dtype=np.int64) * (nv + 1)
n_value_bins = np.full(F, nv, np.int64)
rng = np.random.default_rng(0)
X_cols = rng.integers(0, nv + 1, (F, n)).astype(np.uint8)
X_dense = np.ascontiguousarray(X_cols.T)
gh = np.stack([rng.integers(-50, 50, n), (np.int64(3) << 20) + 1 + 0 * np.arange(n)], 1)
gh = np.ascontiguousarray(gh.astype(np.int64))
idx = np.arange(n, dtype=np.uint32)
hist = np.zeros((4, int(feat_off[-1]), 2), np.int64)
one = lambda v: np.array([v], np.int64)
# histograms of the root (slot 0), one thread, exact cells, dense rows
step.build(step.DENSE_ROWS, X_dense, None, None, None, feat_off, gh, None, idx, True,
           one(0), one(n), one(0), np.zeros(1, np.int64), None, hist)
# partition it on feature 1, bin 1
nleft = np.empty(1, np.int64)
step.partition(X_cols, idx, np.empty(n, np.uint32), one(0), one(n), one(1), one(1),
               np.zeros(1, np.uint8), one(nv), np.zeros((1, 1), np.uint64), None, nleft)
# scan the two children: no categorical feature, one thread
m2 = 2
outs = step.split_outputs(m2, 1)
step.scan_children(hist, step.local_child_rows(one(0), one(n), nleft), np.array([0, -1], np.int64),
                   np.full(m2, -1, np.int64), feat_off, n_value_bins,
                   np.ones((m2, F), np.uint8), None, CatSettings(), Scales.exact(1.0, 1.0, 20),
                   SplitSettings(1.0, 0.0, 0.0, 0.0, 0.0), 1, None, *outs)
sig = lambda d: len(d.signatures)
print("COUNTS " + json.dumps({
    "used": {"build_histograms.serial": sig(H.build_histograms.serial),
             "_fill_range": sig(H._fill_range),
             "partition_nodes.serial": sig(P.partition_nodes.serial),
             "_best_split": sig(S._best_split),
             "bin_sums": sig(G.bin_sums)},
    "unused": {"build_histograms": sig(H.build_histograms),
               "build_histograms_sparse.serial": sig(H.build_histograms_sparse.serial),
               "restore_default_bins.serial": sig(H.restore_default_bins.serial),
               "merge_slots.serial": sig(H.merge_slots.serial),
               "_fill_packed": sig(H._fill_packed),
               "partition_nodes": sig(P.partition_nodes),
               "find_best_splits": sig(S.find_best_splits),
               "find_best_splits.serial": sig(S.find_best_splits.serial),
               "scan_categorical": sig(SC.scan_categorical),
               "category_split": sig(G.category_split)}}))
"""


def test_small_numeric_split_step_compiles_only_what_it_uses(tmp_path):
    env = child_env(NUMBA_CACHE_DIR=str(tmp_path))   # the bonsai under test
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], env=env, cwd=str(tmp_path),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("COUNTS ")]
    counts = json.loads(line[0][len("COUNTS "):])
    assert all(v == 1 for v in counts["used"].values()), counts["used"]
    assert all(v == 0 for v in counts["unused"].values()), counts["unused"]


def test_small_numeric_fits_take_the_lean_paths():
    """The backend passes None for what a small numeric exact fit does not need."""
    assert cpu.thread_plan(7000, 28 * 256, 2) is None                 # the demo's size
    assert cpu.thread_plan(7000, 28 * 256, 1) is None
    assert cpu.thread_plan(2 * cpu.MIN_ROWS_PER_THREAD, 100, 2) is not None
    assert cpu.thread_plan(100, cpu.MIN_PARALLEL_BINS, 2) is not None  # wide data
    assert cpu.thread_plan(10 ** 6, 10 ** 6, 1) is None
    assert cpu._packed(np.zeros((5, 2), np.int64)) is None
    assert cpu._packed(np.zeros((5, 1), np.int64)) is True
    X = np.random.default_rng(0).normal(size=(300, 4))
    ds = bonsai.Dataset(X, label=(X[:, 0] > 0).astype(float))
    assert cpu.hist_layout(cpu.prepare(ds).X_hist, ds.bin_mapper.feat_off, 2)[2:] == (None, None, None)
    assert cpu._cat_args(4, np.zeros(4, np.uint8), None)[0] is None
    assert not cpu.parallel_predict(2000, 5)        # 10k rows x trees: serial
    assert cpu.parallel_predict(2000, 200)
