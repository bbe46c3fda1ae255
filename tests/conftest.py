"""Shared fixtures: the real data sets kept in the repository and a loader for
LightGBM's TSV example files (label in the first column).

The data lies inside the repository (``tests/data/`` and the demo's
``bonsai/data/``; ``tests/data/README.md`` gives each file's source and licence), so a
clone with nothing beside it runs the whole suite.  A test that needs a file FAILS
(it does not skip) when the file is missing, so a broken checkout cannot pass
silently.

The suite tests the bonsai that Python imports: ``pytest tests`` (the README's
command) puts only ``tests/`` on ``sys.path``, so it tests the installed package,
while ``python -m pytest tests`` from the repository root tests the source tree (Python
puts the working directory first).  The closing summary names the bonsai under
test, child Python processes import that same one (``child_env``), and
``tests/_repo_guard.py`` fails any test that touches a path outside the repository.
"""
import gzip
import os
import sys
from pathlib import Path

# The CUDA backend's tests run on numba's CUDA simulator (CI has no GPU).  numba reads
# this when it is first imported, so it is set before anything imports numba; a run
# on a GPU machine sets NUMBA_ENABLE_CUDASIM=0 to test the device itself.
os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")

import numpy as np
import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
TEST_DATA = TESTS_DIR / "data"
BUNDLED_DATA = REPO_ROOT / "bonsai" / "data"   # the demo's HIGGS sample, read from the checkout

# LightGBM example name -> (train file, test file).  LightGBM's regression.{train,test}
# are byte-identical to binary.{train,test} (tests/data/README.md), so both read the
# demo's copy.
EXAMPLES = {
    "binary": (BUNDLED_DATA / "binary.train.gz", BUNDLED_DATA / "binary.test"),
    "regression": (BUNDLED_DATA / "binary.train.gz", BUNDLED_DATA / "binary.test"),
    "multiclass": (TEST_DATA / "multiclass.train.gz", TEST_DATA / "multiclass.test.gz"),
}

# make ``reference.naive`` and ``_repo_guard`` importable whatever pytest's import mode
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))

import _repo_guard  # noqa: E402

GUARD = _repo_guard.install(REPO_ROOT)


def _existing(path):
    if not path.is_file():
        pytest.fail(f"test data file {path} is missing (see tests/data/README.md); this "
                    "test needs it and must not be skipped", pytrace=False)
    return path


def load_text(path, **kw):
    """``np.loadtxt`` of a data file in the repository, gunzipped when it ends in .gz."""
    path = _existing(Path(path))
    if path.suffix == ".gz":
        with gzip.open(path, "rt") as fh:
            return np.loadtxt(fh, dtype=np.float64, **kw)
    return np.loadtxt(path, dtype=np.float64, **kw)


def load_tsv(path):
    """A LightGBM example TSV file -> (X float64 (n, F), y float64 (n,))."""
    a = load_text(path, delimiter="\t", ndmin=2)
    return np.ascontiguousarray(a[:, 1:]), np.ascontiguousarray(a[:, 0])


@pytest.fixture(scope="session")
def lgb_example():
    """``lgb_example("binary") -> (X_train, y_train, X_test, y_test)`` of LightGBM's
    ``<name>.{train,test}`` example files (``binary``, ``regression``, ``multiclass``)."""
    cache = {}

    def load(name):
        if name not in cache:
            train, test = EXAMPLES[name]
            cache[name] = load_tsv(train) + load_tsv(test)
        return cache[name]

    return load


@pytest.fixture(scope="session")
def lgb_side_file():
    """``lgb_side_file("binary.train.weight") -> (n,) float64``: one of LightGBM's
    one-number-a-line side files (weights, initial scores) from ``tests/data/``."""
    return lambda name: load_text(TEST_DATA / f"{name}.gz")


@pytest.fixture(scope="session")
def n_cpu_threads():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


# ---- which bonsai is tested, and child processes that import the same one -----------

from _child import bonsai_under_test, child_env as _child_env  # noqa: E402


@pytest.fixture
def child_env():
    """``os.environ`` for a child ``python`` that imports the bonsai under test (start
    it outside the repository root; ``tests/_child.py``)."""
    return _child_env()


# ---- the repository guard: a test that touched a path outside the repository fails --

def pytest_configure(config):
    if config.option.basetemp:
        GUARD.allow(config.option.basetemp)
    if getattr(config.option, "loadscopereorder", None):
        # pytest-xdist's --dist loadfile hands out files in collection order (set by
        # pytest_collection_modifyitems below), not by test count
        config.option.loadscopereorder = False


# ---- the order files are handed to the -n 2 workers: the costliest first -------------

#: test files by measured cost on a fresh clone (numba compilation + run, 2 workers,
#: 2026-12-03: 84 s down to 6 s; the rest cost less).  ``--dist loadfile`` gives each
#: free worker the next file, so the costliest first leaves the two workers' loads
#: even at the end (in test-count order one worker compiled 288 s and the other 164 s,
#: and the suite waited for the first).  Order only: every test runs either way.
HEAVY_FIRST = (
    "test_cuda_train.py", "test_sklearn.py", "test_scale_limits.py", "test_export.py",
    "test_vector_leaves.py", "test_dask.py", "test_kernels.py", "test_categorical.py",
    "test_rank.py", "test_split_step.py", "test_sparse_input.py", "test_objectives.py",
    "test_cli.py", "test_comm.py", "test_cuda_objective.py", "test_threading.py",
    "test_dask_sklearn.py", "test_sparse_rows.py", "test_shap.py", "test_compile_scope.py",
    "test_accuracy.py", "test_dask_predict.py", "test_vector_model.py",
    "test_determinism.py", "test_dask_collective.py", "test_cuda_predict.py",
    "test_progress.py", "test_model_strangers.py", "test_interrupt.py",
    "test_coexistence.py")


def pytest_collection_modifyitems(session, config, items):
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    # a stable sort: each file's tests keep their order, the other files theirs
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))


def pytest_runtest_logstart(nodeid, location):
    GUARD.current = nodeid


def pytest_runtest_logfinish(nodeid, location):
    GUARD.current = None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    records = GUARD.take(item.nodeid)
    if not records:
        return
    if rep.failed:
        rep.sections.append(("repository guard", _repo_guard.describe(records)))
    else:
        rep.outcome = "failed"
        rep.longrepr = _repo_guard.describe(records)


_SESSION = {}


def _where():
    """The bonsai this process imported: "<version> <directory>", or "not imported"."""
    mod = sys.modules.get("bonsai")   # reported as imported, never imported here
    return (f"{mod.__version__} {os.path.dirname(os.path.abspath(mod.__file__))}"
            if mod is not None else "not imported")


def pytest_sessionfinish(session, exitstatus):
    records = GUARD.take(None)   # outside any test: collection, module imports
    found = [_repo_guard.describe(records)] if records else []
    found += _SESSION.get("worker_records", [])
    if found:
        _SESSION["records"] = "\n".join(found)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    out = getattr(session.config, "workeroutput", None)
    if out is not None:   # a pytest-xdist worker (``-n 2``): its findings go to the controller
        out["bonsai_under_test"] = _where()
        out["guard_outside_tests"] = _SESSION.get("records")


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller (before its ``pytest_sessionfinish``): the tests ran in
    worker processes, so the bonsai they imported and what they touched outside any
    test are the workers'."""
    out = getattr(node, "workeroutput", None) or {}
    _SESSION.setdefault("workers", []).append(out.get("bonsai_under_test", "not reported"))
    if out.get("guard_outside_tests"):
        _SESSION.setdefault("worker_records", []).append(out["guard_outside_tests"])


def pytest_terminal_summary(terminalreporter):
    workers = set(_SESSION.get("workers", []))
    imported = sorted(workers - {"not imported", "not reported"})
    if len(imported) > 1:      # never one bonsai: each named, and said (CI fails on it)
        where = " | ".join(imported) + " (the test processes imported different bonsais)"
    elif imported:
        where = imported[0]
    else:                      # one process, or no worker imported it
        where = _where() if not workers else "not imported"
    terminalreporter.write_line(f"bonsai under test: {where}")
    if "records" in _SESSION:
        terminalreporter.write_line("outside any test, the suite " + _SESSION["records"],
                                    red=True)


# ---- several threads for real (helpers in work_split.py) ----------------------------

@pytest.fixture
def split_finely(monkeypatch):
    """Lower the backend's work-split thresholds (``work_split.FINE``) for this test, so
    a few thousand rows are cut between threads."""
    import work_split
    work_split.split_finely(monkeypatch.setattr)


@pytest.fixture
def work_log(monkeypatch):
    """A ``work_split.WorkLog`` recording how this test's split steps, predictions and
    SHAP calls were cut between threads (``check_fit(n)``, ``check_kernels(n, name)``)."""
    import work_split
    return work_split.WorkLog.install(monkeypatch.setattr)
