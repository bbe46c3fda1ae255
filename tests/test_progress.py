"""The progress bar of a fit (``bonsai.progress.ProgressBar``) and what the estimators'
``verbose`` shows: a tqdm bar under a pseudo-terminal, silence when stderr is not a
terminal, ``verbose=0`` silent, ``verbose=k`` plain evaluation lines."""
import io
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

import bonsai
from bonsai import progress
from bonsai.callbacks import EvaluationMonitor
from bonsai.progress import ProgressBar
from bonsai.sklearn import BonsaiClassifier

from _child import child_env

REPO_ROOT = Path(__file__).resolve().parent.parent


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, 4))
    y = (X[:, 0] + 0.5 * rng.standard_normal(n) > 0).astype(np.float64)
    return X, y


def _sets():
    X, y = _data()
    tr = bonsai.Dataset(X[:300], label=y[:300])
    return tr, bonsai.Dataset(X[300:], label=y[300:], reference=tr)


class _Tty(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self):
        return True


# The fits run by the subprocess tests: a native train() with a ProgressBar, and an
# estimator with its default display (verbose=None), the delay lowered to 0 so that
# these short fits draw their bars.
_SCRIPT = textwrap.dedent("""
    import numpy as np
    import bonsai
    from bonsai import progress
    from bonsai.sklearn import BonsaiClassifier
    progress.DEFAULT_DELAY = 0.0
    rng = np.random.default_rng(0)
    X = rng.standard_normal((400, 4))
    y = (X[:, 0] > 0).astype(np.float64)
    tr = bonsai.Dataset(X[:300], label=y[:300])
    va = bonsai.Dataset(X[300:], label=y[300:], reference=tr)
    bonsai.train({"objective": "binary", "n_estimators": 7, "eval_metric": "auc"}, tr,
                 valid_sets=[va], callbacks=[bonsai.ProgressBar()])
    BonsaiClassifier(n_estimators=9).fit(X[:300], y[:300], eval_set=[(X[300:], y[300:])])
    print("done")
""")


def _env():
    return child_env()     # the bonsai under test (the children start in a temp dir)


def test_bar_renders_under_a_pseudo_terminal():
    pty = pytest.importorskip("pty")
    import fcntl
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    try:
        proc = subprocess.Popen([sys.executable, "-c", _SCRIPT], cwd=tempfile.gettempdir(), env=_env(),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=slave)
    finally:
        os.close(slave)
    import select
    chunks = []
    while True:   # read the terminal until the child closes it (at most 120 s)
        if not select.select([master], [], [], 120)[0]:
            proc.kill()
            break
        try:
            data = os.read(master, 65536)
        except OSError:   # EIO: every writer is gone
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    assert out.decode().strip() == "done"
    text = b"".join(chunks).decode("utf-8", errors="replace")
    # the native fit's bar: round/total, elapsed<ETA, rate, the latest metric (tqdm
    # redraws at most every 0.1 s, so these fast fits show their first and last rounds)
    assert "bonsai:   0%|" in text and " 0/7 [" in text and "bonsai: 100%|" in text
    assert re.search(r" 7/7 \[\d\d:\d\d<\d\d:\d\d, +[\d.]+round/s, valid_0-auc=[\d.]+\]",
                     text), text
    # the estimator's default bar (verbose=None, stderr a terminal)
    assert re.search(r" 9/9 \[\d\d:\d\d<\d\d:\d\d, +[\d.]+round/s, valid_0-logloss=[\d.]+\]",
                     text), text


def test_silent_when_stderr_is_not_a_terminal():
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=tempfile.gettempdir(), env=_env(),
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert proc.stdout.decode().strip() == "done"
    assert proc.stderr == b""


def test_bar_shows_rounds_and_metrics_on_any_stream_when_enabled():
    tr, va = _sets()
    s = io.StringIO()
    cb = ProgressBar(enable=True, delay=0, stream=s, desc="fit")
    bonsai.train({"objective": "binary", "n_estimators": 4, "eval_metric": ["auc", "logloss"]},
                 tr, valid_sets=[va], callbacks=[cb])
    text = s.getvalue()
    assert "fit: 100%" in text and " 4/4 [" in text
    last = text.rstrip("\n").split("\r")[-1]
    assert re.search(r"valid_0-auc=[\d.]+, valid_0-logloss=[\d.]+\]$", last), last
    assert cb.bar is None   # closed after training


def test_auto_bar_only_on_a_terminal_and_only_after_its_delay():
    tr, va = _sets()
    params = {"objective": "binary", "n_estimators": 3}
    s = io.StringIO()                      # not a terminal: nothing
    bonsai.train(params, tr, valid_sets=[va], callbacks=[ProgressBar(delay=0, stream=s)])
    assert s.getvalue() == ""
    t = _Tty()                             # a terminal, but the fit ends before the delay
    bonsai.train(params, tr, valid_sets=[va], callbacks=[ProgressBar(delay=60, stream=t)])
    assert t.getvalue() == ""
    t = _Tty()
    bonsai.train(params, tr, valid_sets=[va], callbacks=[ProgressBar(delay=0, stream=t)])
    assert " 3/3 [" in t.getvalue()
    s = _Tty()                             # enable=False: never
    bonsai.train(params, tr, callbacks=[ProgressBar(enable=False, delay=0, stream=s)])
    assert s.getvalue() == ""


def test_bar_counts_init_model_rounds_and_stops_with_early_stopping():
    tr, va = _sets()
    first = bonsai.train({"objective": "binary", "n_estimators": 5}, tr)
    s = io.StringIO()
    bonsai.train({"objective": "binary", "n_estimators": 3}, tr, init_model=first,
                 callbacks=[ProgressBar(enable=True, delay=0, stream=s)])
    text = s.getvalue()
    assert " 5/8 [" in text and " 8/8 [" in text and " 4/8 [" not in text
    s = io.StringIO()
    b = bonsai.train({"objective": "binary", "n_estimators": 200, "learning_rate": 1.0,
                      "early_stopping_rounds": 2}, tr, valid_sets=[va],
                     callbacks=[ProgressBar(enable=True, delay=0, stream=s)])
    n = b.num_boosted_rounds()
    assert n < 200
    assert s.getvalue().rstrip("\n").split("\r")[-1].split("|")[-1].startswith(f" {n}/200 [")


def test_estimator_verbose(monkeypatch):
    X, y = _data()
    monkeypatch.setattr(progress, "DEFAULT_DELAY", 0.0)
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    ev = [(X[300:], y[300:])]
    BonsaiClassifier(n_estimators=3).fit(X[:300], y[:300], eval_set=ev)   # default: a bar
    assert " 3/3 [" in tty.getvalue() and "valid_0-logloss=" in tty.getvalue()
    for quiet in (BonsaiClassifier(n_estimators=3, verbose=0),
                  BonsaiClassifier(n_estimators=3, verbose=False),
                  BonsaiClassifier(n_estimators=3, verbosity=0)):
        tty.seek(0)
        tty.truncate()
        quiet.fit(X[:300], y[:300], eval_set=ev)
        assert tty.getvalue() == "", quiet
    tty.truncate(0)
    tty.seek(0)
    BonsaiClassifier(n_estimators=5, verbose=2).fit(X[:300], y[:300], eval_set=ev)
    lines = tty.getvalue().splitlines()   # plain lines every 2 rounds, no bar
    assert [ln.split("\t")[0] for ln in lines] == ["[0]", "[2]", "[4]"]
    assert all(re.fullmatch(r"\[\d\]\tvalid_0-logloss:[\d.]+", ln) for ln in lines), lines
    tty.truncate(0)
    tty.seek(0)
    log = io.StringIO()   # the caller's own monitor replaces the default bar
    BonsaiClassifier(n_estimators=3).fit(X[:300], y[:300], eval_set=ev,
                                         callbacks=[EvaluationMonitor(period=1, stream=log)])
    assert tty.getvalue() == "" and len(log.getvalue().splitlines()) == 3


def test_verbose_is_validated_and_not_a_training_parameter():
    X, y = _data(n=100)
    with pytest.raises(TypeError, match="verbose must be None, a bool or an int >= 0, got 'yes'"):
        BonsaiClassifier(n_estimators=2, verbose="yes").fit(X, y)
    with pytest.raises(ValueError, match="verbose must be .* got -1"):
        BonsaiClassifier(n_estimators=2, verbose=-1).fit(X, y)
    a = BonsaiClassifier(n_estimators=3, verbose=0).fit(X, y)
    b = BonsaiClassifier(n_estimators=3, verbose=3).fit(X, y)
    assert a.booster_.model_to_string() == b.booster_.model_to_string()


def test_progress_bar_arguments_are_checked():
    with pytest.raises(TypeError, match="enable must be True, False or None, got 1"):
        ProgressBar(enable=1)
    with pytest.raises(ValueError, match="delay must be >= 0 seconds, got -1"):
        ProgressBar(delay=-1)
    with pytest.raises(TypeError, match="delay must be a number of seconds, got '2'"):
        ProgressBar(delay="2")
    with pytest.raises(TypeError, match="desc must be a str"):
        ProgressBar(desc=3)


def test_a_notebook_kernel_counts_as_watched(monkeypatch):
    import types
    monkeypatch.delitem(sys.modules, "ipykernel", raising=False)
    assert not progress.in_notebook()
    shell = types.SimpleNamespace(kernel=object())
    monkeypatch.setitem(sys.modules, "ipykernel", types.ModuleType("ipykernel"))
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", fake)
    assert progress.in_notebook() and progress.is_watched()
    assert not progress.is_watched(io.StringIO())   # an explicit stream: its own isatty
    shell.kernel = None                              # a terminal IPython is no notebook
    assert not progress.in_notebook()


def test_an_unsized_terminal_gets_a_default_width(monkeypatch):
    pty = pytest.importorskip("pty")
    import fcntl
    import struct
    import termios
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)
    master, slave = pty.openpty()
    with open(slave, "w") as tty:   # a pty nobody sized reports 0 x 0: tqdm draws nothing
        assert progress._screen(tty) == {"ncols": 80, "nrows": 24}
        monkeypatch.setenv("COLUMNS", "132")
        assert progress._screen(tty) == {"ncols": 132, "nrows": 24}
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
        assert progress._screen(tty) == {}   # a sized terminal: tqdm's own size
    os.close(master)
    assert progress._screen(io.StringIO()) == {}   # not a terminal: tqdm's defaults
