"""bonsai in one process with LightGBM, XGBoost, CatBoost and scikit-learn's OpenMP
(``HistGradientBoostingRegressor``), each with its own threading runtime: fits and
predicts interleaved and on concurrent Python threads, and ``fork`` after a fit (as
multiprocessing and Dask do it).

Every scenario runs in a fresh SUBPROCESS with a timeout, so a deadlock fails the
test instead of hanging the suite.  CatBoost joins where it is installed.
"""
import importlib.util
import subprocess
import sys
import textwrap

import pytest

TIMEOUT_S = 150
HAS_CATBOOST = importlib.util.find_spec("catboost") is not None

PRELUDE = textwrap.dedent("""
    import os, sys, threading, time
    import numpy as np
    import bonsai
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 8))
    X[rng.random(X.shape) < 0.02] = np.nan
    y = np.nan_to_num(X[:, 0]) + np.sin(np.nan_to_num(X[:, 1])) + 0.1 * rng.normal(size=6000)
    PARAMS = {"n_estimators": 8, "n_threads": 2, "subsample": 0.8}
    XBIG = np.tile(X, (4, 1))   # enough rows x trees for the parallel predict kernels

    def bonsai_fit():
        return bonsai.train(PARAMS, bonsai.Dataset(X, label=y))

    def good(p, tag):
        assert np.all(np.isfinite(p)) and np.corrcoef(p, y)[0, 1] > 0.5, tag
        return p

    def run_lightgbm():
        import lightgbm as lgb
        m = lgb.train({"objective": "regression", "num_threads": 2, "verbose": -1},
                      lgb.Dataset(X, label=y), 8)
        return good(m.predict(X), "lightgbm")

    def run_xgboost():
        import xgboost as xgb
        m = xgb.train({"tree_method": "hist", "nthread": 2, "max_depth": 5},
                      xgb.DMatrix(X, label=y), 8)
        return good(m.predict(xgb.DMatrix(X)), "xgboost")

    def run_catboost():
        if not HAS_CATBOOST:
            return None
        import catboost
        m = catboost.CatBoostRegressor(iterations=8, depth=4, thread_count=2, verbose=0,
                                       allow_writing_files=False).fit(X, y)
        return good(m.predict(X), "catboost")

    def run_sklearn():
        from sklearn.ensemble import HistGradientBoostingRegressor
        m = HistGradientBoostingRegressor(max_iter=8).fit(X, y)   # OpenMP threads
        return good(m.predict(X), "sklearn")

    PEERS = [run_lightgbm, run_xgboost, run_catboost, run_sklearn]
""")

SCENARIOS = {
    # fits and predicts of every library, one after another, bonsai between each
    "interleaved": """
        b1 = bonsai_fit()
        ref = b1.model_to_string()
        p1 = b1.predict(X)
        for peer in PEERS:
            peer()
            assert np.array_equal(b1.predict(X), p1)
            assert bonsai_fit().model_to_string() == ref, peer.__name__
        shap = b1.predict(X, pred_contribs=True)
        assert np.allclose(shap.sum(axis=1), b1.predict(X, output_margin=True))
    """,
    # every library fits and predicts on its own Python thread, at once, with two
    # bonsai fits and a bonsai model predicting from two more threads
    "threads": """
        b = bonsai_fit()
        ref, p_ref = b.model_to_string(), b.predict(X)
        out, errors = {}, []
        def guard(name, fn):
            try:
                out[name] = fn()
            except BaseException as e:
                errors.append(f"{name}: {e!r}")
        jobs = [("fit1", lambda: bonsai_fit().model_to_string()),
                ("fit2", lambda: bonsai_fit().model_to_string()),
                ("pred1", lambda: b.predict(X)), ("pred2", lambda: b.predict(X))]
        jobs += [(peer.__name__, peer) for peer in PEERS]
        ts = [threading.Thread(target=guard, args=job) for job in jobs]
        for t in ts: t.start()
        for t in ts: t.join()
        assert not errors, errors
        assert out["fit1"] == ref and out["fit2"] == ref
        assert np.array_equal(out["pred1"], p_ref) and np.array_equal(out["pred2"], p_ref)
    """,
    # os.fork() after bonsai and a peer trained: the child predicts the parent's bits
    # (numba's OpenMP is not fork-safe, so on one thread there) and a fit in it either
    # trains the same model (workqueue layer) or raises the clear error (OpenMP);
    # the parent trains on afterwards
    "fork": """
        import numba
        b = bonsai_fit()
        if WITH_PEERS:
            run_lightgbm()
        ref, p_ref = b.model_to_string(), b.predict(XBIG)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                assert np.array_equal(b.predict(XBIG), p_ref), "child predicts other values"
                assert np.array_equal(bonsai.Booster(model_str=ref).predict(X[:100]),
                                      p_ref[:100])
                shap = b.predict(XBIG, pred_contribs=True)
                assert np.allclose(shap.sum(axis=1), b.predict(XBIG, output_margin=True))
                try:
                    got = "same" if bonsai_fit().model_to_string() == ref else "different"
                except RuntimeError as e:
                    got = "refused" if "spawn" in str(e) else repr(e)
                os.write(w, got.encode())
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        deadline = time.monotonic() + 90
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                raise AssertionError("the forked child hung")
            time.sleep(0.02)
        got = os.read(r, 100).decode()
        assert os.waitstatus_to_exitcode(status) == 0, (status, got)
        layer = numba.threading_layer()
        assert got == ("refused" if layer == "omp" else "same"), (layer, got)
        assert bonsai_fit().model_to_string() == ref    # the parent is unharmed
        if WITH_PEERS:
            run_xgboost()
        print("layer", layer)
    """,
    # multiprocessing's "fork" start method: a pool forked after a fit predicts
    # chunks of rows with the parent's model (the Dask / joblib pattern)
    "multiprocessing-fork": """
        import multiprocessing as mp
        b = bonsai_fit()
        p_ref = b.predict(XBIG)
        def work(i):
            return b.predict(XBIG[i::2])
        with mp.get_context("fork").Pool(2) as pool:
            parts = pool.map_async(work, range(2)).get(90)
        for i, part in enumerate(parts):
            assert np.array_equal(part, p_ref[i::2])
        assert np.array_equal(bonsai_fit().predict(XBIG), p_ref)
    """,
}


#: (scenarios run one after another in one child process, threading layer): the
#: libraries' imports cost seconds each, so a child runs several scenarios
RUNS = {
    # the forks come after every peer's runtime has started and run threads
    "all-default": (("interleaved", "threads", "fork", "multiprocessing-fork"), "default"),
    "fork-workqueue": (("fork",), "workqueue"),    # bonsai alone (the peers: above)
}


@pytest.mark.parametrize("run", list(RUNS))
def test_libraries_coexist_in_one_process(run, child_env, tmp_path):
    scenarios, layer = RUNS[run]
    body = "".join(f"\nprint('scenario', {name!r}, flush=True)\n"
                   + textwrap.dedent(SCENARIOS[name]) for name in scenarios)
    head = f"HAS_CATBOOST = {HAS_CATBOOST}\nWITH_PEERS = {layer == 'default'}\n"
    code = head + PRELUDE + body + "\nprint('ok')\n"
    env = child_env
    env.pop("NUMBA_THREADING_LAYER", None)
    if layer == "workqueue":
        env["NUMBA_THREADING_LAYER"] = "workqueue"
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           timeout=TIMEOUT_S, cwd=str(tmp_path), env=env)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"{run}: no result after {TIMEOUT_S} s (deadlock?); stdout: "
                    f"{e.stdout!r}; stderr tail: {(e.stderr or b'')[-2000:]!r}")
    assert r.returncode == 0, (f"{run}: exit code {r.returncode}\nstdout: "
                               f"{r.stdout[-2000:]}\nstderr: {r.stderr[-4000:]}")
    assert r.stdout.strip().splitlines()[-1] == "ok", r.stdout[-2000:]
    if "fork" in scenarios:
        got = [ln.split()[1] for ln in r.stdout.splitlines() if ln.startswith("layer ")]
        assert got and (layer == "default" or got[0] == layer), r.stdout
