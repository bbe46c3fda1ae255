"""Tests for bonsai._threads: thread-count resolution and numba threading."""

import os
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest

from bonsai import _threads
from bonsai._threads import (available_threads, cgroup_cpu_limit, configure_threading_layer,
                             hardware_thread_count, resolve_n_threads, thread_context)

THREADS_PY = os.path.abspath(_threads.__file__)   # the bonsai under test


def _write(root, rel, text):
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_quota(tmp_path):
    _write(tmp_path, "cpu.max", "150000 100000\n")
    assert cgroup_cpu_limit(tmp_path) == 2
    _write(tmp_path, "cpu.max", "100000 100000\n")
    assert cgroup_cpu_limit(tmp_path) == 1
    _write(tmp_path, "cpu.max", "1000 100000\n")  # tiny quota -> at least 1
    assert cgroup_cpu_limit(tmp_path) == 1
    _write(tmp_path, "cpu.max", "400000 100000\n")
    assert cgroup_cpu_limit(str(tmp_path)) == 4


def test_cgroup_v2_max(tmp_path):
    _write(tmp_path, "cpu.max", "max 100000\n")
    # "max" wins even if stale v1 files exist next to it
    _write(tmp_path, "cpu/cpu.cfs_quota_us", "100000\n")
    _write(tmp_path, "cpu/cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_limit(tmp_path) is None


@pytest.mark.parametrize("sub", ["cpu", "cpu,cpuacct", "."])
def test_cgroup_v1(tmp_path, sub):
    _write(tmp_path, f"{sub}/cpu.cfs_quota_us", "250000\n")
    _write(tmp_path, f"{sub}/cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_limit(tmp_path) == 3


def test_cgroup_v1_unlimited(tmp_path):
    _write(tmp_path, "cpu/cpu.cfs_quota_us", "-1\n")
    _write(tmp_path, "cpu/cpu.cfs_period_us", "100000\n")
    assert cgroup_cpu_limit(tmp_path) is None


def test_cgroup_missing_or_malformed(tmp_path):
    assert cgroup_cpu_limit(tmp_path) is None
    assert cgroup_cpu_limit(tmp_path / "does-not-exist") is None
    _write(tmp_path, "cpu/cpu.cfs_quota_us", "100000\n")  # period missing
    assert cgroup_cpu_limit(tmp_path) is None
    _write(tmp_path, "cpu.max", "garbage\n")
    assert cgroup_cpu_limit(tmp_path) is None


def test_available_threads(tmp_path, monkeypatch):
    monkeypatch.setattr(_threads, "hardware_thread_count", lambda: 8)
    assert available_threads(tmp_path) == 8
    _write(tmp_path, "cpu.max", "300000 100000\n")
    assert available_threads(tmp_path) == 3
    _write(tmp_path, "cpu.max", "1600000 100000\n")  # quota above hardware
    assert available_threads(tmp_path) == 8


def test_hardware_thread_count():
    n = hardware_thread_count()
    assert isinstance(n, int) and 1 <= n <= (os.cpu_count() or n)


def test_resolve_auto(tmp_path, monkeypatch):
    monkeypatch.setattr(_threads, "hardware_thread_count", lambda: 16)
    _write(tmp_path, "cpu.max", "200000 100000\n")
    assert resolve_n_threads(None, root=tmp_path) == 2
    assert resolve_n_threads(None) >= 1


def test_resolve_explicit_and_warns_once(tmp_path, monkeypatch):
    monkeypatch.setattr(_threads, "hardware_thread_count", lambda: 16)
    monkeypatch.setattr(_threads, "_warned_oversubscription", False)
    _write(tmp_path, "cpu.max", "200000 100000\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert resolve_n_threads(2, root=tmp_path) == 2
        assert resolve_n_threads(1, root=tmp_path) == 1
    with pytest.warns(RuntimeWarning, match=r"n_threads=5.*\b2\b") as rec:
        assert resolve_n_threads(5, root=tmp_path) == 5  # honoured
    assert len(rec) == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # second oversubscription: silent
        assert resolve_n_threads(7, root=tmp_path) == 7


@pytest.mark.parametrize("bad,exc", [(0, ValueError), (-2, ValueError), (True, TypeError),
                                     (2.0, TypeError), ("2", TypeError)])
def test_resolve_bad(bad, exc):
    with pytest.raises(exc, match="n_threads"):
        resolve_n_threads(bad)


def test_thread_context_sets_and_restores():
    import numba

    configure_threading_layer()
    before = numba.get_num_threads()
    with thread_context(1) as n:
        assert n == 1 and numba.get_num_threads() == 1
        with thread_context(10**6) as m:  # capped at NUMBA_NUM_THREADS
            assert m == numba.config.NUMBA_NUM_THREADS == numba.get_num_threads()
        assert numba.get_num_threads() == 1
    assert numba.get_num_threads() == before
    with pytest.raises(KeyError):
        with thread_context(1):
            raise KeyError("x")
    assert numba.get_num_threads() == before


def test_thread_context_serialises_python_threads_only_on_workqueue():
    """In this process's layer: workqueue holds a lock (a second Python thread waits for
    the block to end), OpenMP does not (the second thread runs through)."""
    order = []

    def worker(tag):
        with thread_context(1):
            order.append((tag, "in"))
            order.append((tag, "out"))

    with thread_context(1):
        locked = _threads._layer_initialized() == "workqueue"
        t = threading.Thread(target=worker, args=("t",))
        t.start()
        t.join(0.2 if locked else 10)
        during = list(order)
    t.join(10)
    assert _threads._layer_initialized() in ("omp", "workqueue")
    assert during == ([] if locked else [("t", "in"), ("t", "out")])
    assert order == [("t", "in"), ("t", "out")]


def test_thread_context_serialises_python_threads_on_workqueue():
    """The default layer here is OpenMP, so the lock is checked in a process that runs
    numba's workqueue layer (which aborts when two Python threads run parallel
    kernels at once): a second thread's block waits until the first one's ends."""
    code = textwrap.dedent(f"""
        import importlib.util, threading, numba
        spec = importlib.util.spec_from_file_location("_threads", {THREADS_PY!r})
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        order = []
        def worker():
            with mod.thread_context(1):
                order.append("worker")
        with mod.thread_context(1):
            t = threading.Thread(target=worker)
            t.start()
            t.join(0.3)
            during = len(order)
            order.append("main_leaves")
        t.join(10)
        print(numba.threading_layer(), during, ",".join(order))
    """)
    env = dict(os.environ, NUMBA_THREADING_LAYER="workqueue")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["workqueue", "0", "main_leaves,worker"], out.stdout


def _layer_in_subprocess(env_layer):
    code = textwrap.dedent(f"""
        import importlib.util, numba
        spec = importlib.util.spec_from_file_location("_threads", {THREADS_PY!r})
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        first = mod.configure_threading_layer()
        with mod.thread_context(1):
            pass
        print(first, numba.threading_layer(), mod.configure_threading_layer())
    """)
    env = dict(os.environ)
    env.pop("NUMBA_THREADING_LAYER", None)
    if env_layer:
        env["NUMBA_THREADING_LAYER"] = env_layer
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    if env_layer and "No threading layer could be loaded" in out.stderr:
        pytest.skip(f"numba threading layer {env_layer!r} not available here")
    assert out.returncode == 0, out.stderr
    return out.stdout.split()


def test_threading_layer_defaults_to_omp_or_workqueue():
    layers = _layer_in_subprocess(None)
    assert layers in (["omp"] * 3, ["workqueue"] * 3)


def test_omp_layer_gets_short_spinning_without_leaking_the_variable():
    """libgomp reads GOMP_SPINCOUNT when numba loads it; the variable is set only
    around that load, and a user's own value wins."""
    code = textwrap.dedent(f"""
        import importlib.util, os, numba
        spec = importlib.util.spec_from_file_location("_threads", {THREADS_PY!r})
        mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
        layer = mod.configure_threading_layer()
        print(layer, os.environ.get("GOMP_SPINCOUNT", "unset"))
    """)
    env = dict(os.environ)
    env.pop("NUMBA_THREADING_LAYER", None)
    env.pop("GOMP_SPINCOUNT", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    layer, spin = out.stdout.split()
    assert layer in ("omp", "workqueue") and spin == "unset"
    env["GOMP_SPINCOUNT"] = "77"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[1] == "77"


def test_threading_layer_respects_environment():
    first, active, again = _layer_in_subprocess("omp")
    assert first == "omp" and active == "omp" and again == "omp"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_predicts_serially_and_refuses_to_train_clearly(child_env, tmp_path):
    """GNU OpenMP is not fork-safe: in a child forked after bonsai ran parallel
    kernels, prediction falls back to the serial kernels (same outputs) and training
    raises a RuntimeError that says what to do, instead of the process aborting."""
    code = textwrap.dedent("""
        import multiprocessing as mp, numpy as np, numba, bonsai
        def work(q, b, X):
            out = [b.predict(X).tolist()]
            try:
                bonsai.train({"objective": "binary"}, bonsai.Dataset(X, (X[:, 0] > 0) * 1.0), 2)
                out.append("trained")
            except RuntimeError as e:
                out.append(str(e))
            q.put(out)
        if __name__ == "__main__":
            X = np.random.default_rng(0).normal(size=(3000, 4))
            b = bonsai.train({"objective": "binary", "n_threads": 2},
                             bonsai.Dataset(X, (X[:, 0] > 0) * 1.0), 3)
            ctx = mp.get_context("fork")
            q = ctx.Queue()
            p = ctx.Process(target=work, args=(q, b, X))
            p.start()
            pred, msg = q.get(timeout=60)
            p.join(60)
            assert p.exitcode == 0, p.exitcode
            assert pred == b.predict(X).tolist()
            if numba.threading_layer() == "omp":
                assert "spawn" in msg and "forkserver" in msg, msg
            else:
                assert msg == "trained", msg
            print("ok", numba.threading_layer())
    """)
    env = child_env
    env.pop("NUMBA_THREADING_LAYER", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=180, cwd=str(tmp_path))
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split()[0] == "ok"
