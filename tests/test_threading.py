"""bonsai shares a process with LightGBM and XGBoost (each with its own OpenMP
runtime) without deadlocking or crashing.

Each scenario runs in a fresh SUBPROCESS, so the threading layers start cold, with a
timeout: a deadlock fails the test instead of hanging the suite.
"""
import subprocess
import sys
import textwrap

import pytest

TIMEOUT_S = 120

PRELUDE = textwrap.dedent("""
    import numpy as np
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 12))
    X[rng.random(X.shape) < 0.02] = np.nan
    y = np.nan_to_num(X[:, 0]) + np.sin(np.nan_to_num(X[:, 1])) + 0.1 * rng.normal(size=20000)

    def run_bonsai(tag, ds=None):
        import bonsai
        if ds is None:
            ds = bonsai.Dataset(X, label=y)
        b = bonsai.train({"n_estimators": 10, "n_threads": 2, "subsample": 0.8}, ds)
        p = b.predict(X)
        assert np.all(np.isfinite(p)) and np.corrcoef(p, y)[0, 1] > 0.5, tag
        return b.model_to_string()

    def run_lightgbm():
        import lightgbm as lgb
        m = lgb.train({"objective": "regression", "num_threads": 2, "verbose": -1},
                      lgb.Dataset(X, label=y), 10)
        assert np.all(np.isfinite(m.predict(X)))

    def run_xgboost():
        import xgboost as xgb
        m = xgb.train({"tree_method": "hist", "nthread": 2, "max_depth": 6},
                      xgb.DMatrix(X, label=y), 10)
        assert np.all(np.isfinite(m.predict(xgb.DMatrix(X))))
""")

SCENARIOS = {
    # the order asked for: bonsai, then LightGBM, then XGBoost, then bonsai again
    "bonsai-lightgbm-xgboost-bonsai": """
        s1 = run_bonsai("first")
        run_lightgbm()
        run_xgboost()
        s2 = run_bonsai("again")
        assert s1 == s2, "bonsai's model changed after LightGBM/XGBoost ran"
    """,
    # the peers' OpenMP runtimes loaded and started before bonsai's first kernel
    "lightgbm-xgboost-bonsai-lightgbm": """
        import lightgbm, xgboost
        run_lightgbm()
        run_xgboost()
        run_bonsai("after peers")
        run_lightgbm()
    """,
    # bonsai fits on two Python threads while LightGBM and XGBoost train on two others
    # (the Datasets are built first, on the main thread)
    "python-threads": """
        import threading, bonsai
        ds = bonsai.Dataset(X, label=y)
        errors = []
        def guard(fn, *a):
            try:
                fn(*a)
            except BaseException as e:
                errors.append(repr(e))
        ts = [threading.Thread(target=guard, args=(run_bonsai, "t1", ds)),
              threading.Thread(target=guard, args=(run_lightgbm,)),
              threading.Thread(target=guard, args=(run_bonsai, "t2", ds)),
              threading.Thread(target=guard, args=(run_xgboost,))]
        for t in ts: t.start()
        for t in ts: t.join()
        assert not errors, errors
    """,
    # Datasets (binning: parallel kernels) built and used from two Python threads at
    # once; _threads.py promises that concurrent use is serialised, not an abort
    "python-threads-datasets": """
        import threading, bonsai
        errors = []
        def build_and_fit(tag):
            try:
                for _ in range(3):
                    ds = bonsai.Dataset(X, label=y)
                    bonsai.Dataset(X[:5000], label=y[:5000], reference=ds)
                run_bonsai(tag)
            except BaseException as e:
                errors.append(repr(e))
        ts = [threading.Thread(target=build_and_fit, args=(f"t{i}",)) for i in range(2)]
        for t in ts: t.start()
        for t in ts: t.join()
        assert not errors, errors
    """,
}


@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_bonsai_lightgbm_xgboost_in_one_process(scenario, child_env, tmp_path):
    code = PRELUDE + textwrap.dedent(SCENARIOS[scenario]) + "\nprint('ok')\n"
    env = child_env
    env.pop("NUMBA_THREADING_LAYER", None)
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=TIMEOUT_S, cwd=str(tmp_path), env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{scenario}: no result after {TIMEOUT_S} s (deadlock?); "
                    f"stderr tail: {(e.stderr or b'')[-2000:]!r}")
    assert r.returncode == 0, (f"{scenario}: exit code {r.returncode}\nstdout: {r.stdout[-2000:]}"
                               f"\nstderr: {r.stderr[-4000:]}")
    assert r.stdout.strip().splitlines()[-1] == "ok", r.stdout[-2000:]
