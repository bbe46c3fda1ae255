"""Bit-identical models, predictions and SHAP values at 1, 3 and 8 threads.

In this process numba runs at most ``NUMBA_NUM_THREADS`` threads (the core count,
so often 2) and ``thread_context`` caps every fit there; so this test starts a
subprocess with ``NUMBA_NUM_THREADS=8`` (oversubscribed on a small machine, which
only costs time) that imports the same bonsai source and shares numba's on-disk
cache.  It fits every grower on numeric, native categorical, ordered (CTR),
quantized, sparse-rows and multiclass data with the work-split thresholds lowered,
and checks through ``work_split.WorkLog`` that each fit, prediction and SHAP call ran
on the thread count asked for (``tests/many_threads_run.py``).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

from _child import child_env

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent


def _run_subprocess():
    env = child_env(extra_paths=[TESTS_DIR], NUMBA_NUM_THREADS="8")   # the bonsai under test
    env.pop("BONSAI_PROFILE", None)      # the profiled path bypasses the recorded step
    # a script's own folder (tests/) goes first on the child's sys.path, not the cwd
    out = subprocess.run([sys.executable, str(TESTS_DIR / "many_threads_run.py")],
                         cwd=TESTS_DIR, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, f"subprocess failed:\n{out.stderr[-4000:]}"
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_models_predictions_and_shap_identical_at_1_3_and_8_threads():
    doc = _run_subprocess()
    assert doc["numba_num_threads"] == 8
    results = doc["results"]
    kinds = {name.split("/")[0] for name in results}
    assert kinds == {"numeric", "categorical", "ordered", "quantized", "sparse_rows",
                     "multiclass"}
    assert len(results) == 6 * 3
    problems = []
    for name, by_threads in results.items():
        assert sorted(by_threads, key=int) == ["1", "3", "8"], name
        one = by_threads["1"]
        if one["leaves"] <= one["trees"]:
            problems.append(f"{name}: the trees do not split")
        for n, r in by_threads.items():
            problems += [f"{name} at {n} threads: {e}" for e in r["errors"]]
            for what in ("model", "predict", "shap"):
                if r[what] != one[what]:
                    problems.append(f"{name}: {what} at {n} threads differs from 1 thread")
    assert not problems, "\n".join(problems)
