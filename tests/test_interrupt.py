"""Ctrl-C during a fit: ``KeyboardInterrupt`` within about one round, the rounds
finished so far on its ``.booster``, no signal handler left behind, and a healthy
process (the next fit gives the normal model).

The real-signal test runs a child process: the parent waits until a round callback
has written a marker, sends SIGINT, and expects the child to report the interrupt
within seconds, then to be interrupted again in an estimator's fit, then to fit
normally.
"""
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import bonsai
from bonsai import TrainingCallback, binning
from bonsai.booster import Booster
from bonsai.sklearn import BonsaiClassifier

CHILD = textwrap.dedent("""
    import os, signal, sys, time
    import numpy as np
    import bonsai
    from bonsai import TrainingCallback
    from bonsai.sklearn import BonsaiClassifier
    from sklearn.exceptions import NotFittedError
    from sklearn.utils.validation import check_is_fitted

    # the handler an interactive Python has (a background job may start with SIGINT
    # ignored); bonsai must leave exactly this one in place
    signal.signal(signal.SIGINT, signal.default_int_handler)
    HANDLER = signal.getsignal(signal.SIGINT)
    workdir = sys.argv[1]
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 10))
    y = (X[:, 0] + np.sin(X[:, 1]) + 0.3 * rng.normal(size=20000) > 0).astype(float)
    params = {"objective": "binary", "n_threads": 2, "max_leaves": 63}
    ds = bonsai.Dataset(X, label=y)
    normal = bonsai.train(dict(params, n_estimators=5), ds).model_to_string()

    class Marker(TrainingCallback):
        def __init__(self, name):
            self.name, self.ends = name, []
        def after_iteration(self, model, epoch, log):
            self.ends.append(time.time())
            if epoch == 2:
                open(os.path.join(workdir, self.name), "w").close()
            return False

    def interrupted(name, fit):
        marker = Marker(name)
        try:
            fit(marker)
        except KeyboardInterrupt as e:
            caught = time.time()
            with open(os.path.join(workdir, name + ".sent")) as fh:
                sent = float(fh.read())
            after = sum(t > sent for t in marker.ends)
            assert signal.getsignal(signal.SIGINT) is HANDLER, "a SIGINT handler leaked"
            print(f"KeyboardInterrupt {name} latency_ms={1000 * (caught - sent):.0f} "
                  f"rounds={len(marker.ends)} rounds_after_signal={after}", flush=True)
            return e
        print(f"{name}: the fit ran to its end", flush=True)
        sys.exit(3)

    e = interrupted("train", lambda cb: bonsai.train(dict(params, n_estimators=100000), ds,
                                                       callbacks=[cb]))
    k = e.booster.num_boosted_rounds()
    assert k >= 2 and e.booster.params["n_estimators"] == k, k   # epochs 0-1 at least
    again = bonsai.train(dict(params, n_estimators=k), ds).model_to_string()
    assert e.booster.model_to_string() == again, "the kept rounds are not a k-round fit"

    clf = BonsaiClassifier(n_estimators=100000, n_threads=2, max_leaves=63)
    e = interrupted("fit", lambda cb: clf.fit(X, y.astype(int), callbacks=[cb]))
    try:
        check_is_fitted(clf)
        raise AssertionError("an interrupted fit left the estimator fitted")
    except NotFittedError:
        pass
    assert e.booster is not None and e.booster.num_boosted_rounds() >= 2
    assert np.all(np.isfinite(e.booster.predict(X)))

    # the process is healthy: the next fits give the normal model
    assert bonsai.train(dict(params, n_estimators=5), ds).model_to_string() == normal
    clf = BonsaiClassifier(n_estimators=5, n_threads=2, max_leaves=63).fit(X, y.astype(int))
    assert np.array_equal(clf.predict_proba(X)[:, 1], bonsai.Booster(model_str=normal).predict(X))
    assert signal.getsignal(signal.SIGINT) is HANDLER
    print("ok", flush=True)
""")


def _lines(stream, q):
    for line in stream:
        q.put(line.rstrip("\n"))
    q.put(None)


@pytest.mark.skipif(not hasattr(signal, "SIGINT") or os.name != "posix",
                    reason="needs POSIX signals")
def test_sigint_stops_train_and_fit_within_about_a_round(child_env, tmp_path):
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    proc = subprocess.Popen([sys.executable, str(script), str(tmp_path)], env=child_env,
                            cwd=str(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    out = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, out), daemon=True).start()
    seen = []
    try:
        for name in ("train", "fit"):
            marker = tmp_path / name
            deadline = time.monotonic() + 150   # a cold numba cache compiles first
            while not marker.exists():
                assert proc.poll() is None, proc.stderr.read()[-3000:]
                assert time.monotonic() < deadline, f"{name}: no round finished"
                time.sleep(0.01)
            (tmp_path / (name + ".sent")).write_text(repr(time.time()))
            t0 = time.monotonic()
            proc.send_signal(signal.SIGINT)
            line = out.get(timeout=30)
            waited = time.monotonic() - t0
            seen.append(line)
            assert line is not None and line.startswith(f"KeyboardInterrupt {name}"), seen
            assert waited < 5, f"{name}: {waited:.1f} s from SIGINT to KeyboardInterrupt"
            fields = dict(f.split("=") for f in line.split()[2:])
            assert int(fields["rounds_after_signal"]) <= 1, line   # not the whole fit
        line = out.get(timeout=120)
        seen.append(line)
        assert line == "ok", (seen, proc.stderr.read()[-3000:] if line is None else "")
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---- the model of the finished rounds, in process (interrupts injected) ---------------

def _data(n=3000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(float)
    return X, y


class _InterruptAt(TrainingCallback):
    """Raises KeyboardInterrupt (as Python's SIGINT handler would) once ``epoch`` is
    reached: in ``before_iteration`` or at the end of ``after_iteration``."""

    def __init__(self, epoch, where="after"):
        self.epoch, self.where = epoch, where

    def before_iteration(self, model, epoch, evals_log):
        if self.where == "before" and epoch == self.epoch:
            raise KeyboardInterrupt
        return False

    def after_iteration(self, model, epoch, evals_log):
        if self.where == "after" and epoch == self.epoch:
            raise KeyboardInterrupt
        return False


def test_interrupt_keeps_the_finished_rounds_as_a_k_round_model():
    X, y = _data()
    Xv, yv = _data(1000, seed=1)
    ds = bonsai.Dataset(X, label=y)
    dv = bonsai.Dataset(Xv, label=yv, reference=ds)
    params = {"objective": "binary", "n_threads": 2, "early_stopping_rounds": 50}
    with pytest.raises(KeyboardInterrupt) as info:
        bonsai.train(dict(params, n_estimators=100), ds, valid_sets=[dv],
                     callbacks=[_InterruptAt(6, "before")])
    part = info.value.booster
    full = bonsai.train(dict(params, n_estimators=6), ds, valid_sets=[dv])
    assert part.num_boosted_rounds() == 6 and part.params["n_estimators"] == 6
    assert part.evals_result == full.evals_result
    assert len(part.evals_result["valid_0"]["logloss"]) == 6
    assert part.model_to_string() == full.model_to_string()
    # the round whose callbacks were running is dropped: its tree is not kept
    with pytest.raises(KeyboardInterrupt) as info:
        bonsai.train(dict(params, n_estimators=100), ds, valid_sets=[dv],
                     callbacks=[_InterruptAt(6, "after")])
    assert info.value.booster.model_to_string() == full.model_to_string()


def test_interrupt_in_the_middle_of_a_multiclass_round_drops_that_round(monkeypatch):
    X, _ = _data()
    y = np.digitize(X[:, 0], [-0.5, 0.5]).astype(float)
    ds = bonsai.Dataset(X, label=y)
    params = {"objective": "multiclass", "num_class": 3, "n_threads": 2}
    append = Booster._append

    def interrupted_append(self, tree, k):   # Ctrl-C after round 4's first tree
        append(self, tree, k)
        if len(self.trees) == 4 * 3 + 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(Booster, "_append", interrupted_append)
    with pytest.raises(KeyboardInterrupt) as info:
        bonsai.train(dict(params, n_estimators=50), ds)
    monkeypatch.setattr(Booster, "_append", append)
    part = info.value.booster
    assert part.num_trees() == 12 and part.num_boosted_rounds() == 4
    assert part.model_to_string() == bonsai.train(dict(params, n_estimators=4),
                                                   ds).model_to_string()


def test_interrupt_before_any_round_and_estimator_fit():
    X, y = _data()
    with pytest.raises(KeyboardInterrupt) as info:
        bonsai.train({"n_estimators": 10, "n_threads": 2}, bonsai.Dataset(X, label=y),
                     callbacks=[_InterruptAt(0, "before")])
    assert info.value.booster is None
    clf = BonsaiClassifier(n_estimators=10, n_threads=2).fit(X, y.astype(int))
    with pytest.raises(KeyboardInterrupt) as info:
        clf.fit(X, y.astype(int), callbacks=[_InterruptAt(3)])
    assert not hasattr(clf, "booster_")     # an interrupted refit leaves it unfitted
    part = info.value.booster
    assert part.num_boosted_rounds() == 3
    ref = BonsaiClassifier(n_estimators=3, n_threads=2).fit(X, y.astype(int))
    assert part.model_to_string() == ref.booster_.model_to_string()


# ---- how long a Ctrl-C can wait: binning a large matrix is cut into kernel calls ----

@pytest.mark.parametrize("order", ["C", "F", "strided"])
def test_transform_columns_in_pieces_equals_one_call(monkeypatch, order):
    rng = np.random.default_rng(3)
    base = rng.normal(size=(5000, 14))
    base[rng.random(base.shape) < 0.1] = np.nan
    base[:, 3] = np.round(base[:, 3] * 300)         # > 255 thresholds: the search path
    X = {"C": base, "F": np.asfortranarray(base), "strided": base[:, ::2]}[order]
    for max_bin in (63, 1023):
        bm = binning.BinMapper.fit(np.ascontiguousarray(X), max_bin)
        whole = bm.transform_columns(X)
        kernels = [binning._kernels.map_to_bins, binning._kernels.map_to_bins_by_column]
        sigs = [len(k.signatures) + len(k.serial.signatures) for k in kernels]
        monkeypatch.setattr(binning, "TRANSFORM_CHUNK_CELLS", 4001)   # uneven pieces
        pieces = bm.transform_columns(X)
        monkeypatch.setattr(binning, "TRANSFORM_CHUNK_CELLS", 1 << 24)
        assert pieces.dtype == whole.dtype and np.array_equal(pieces, whole)
        # the pieces have the array types of the whole call: nothing new compiled
        assert [len(k.signatures) + len(k.serial.signatures) for k in kernels] == sigs
