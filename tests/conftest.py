"""Shared fixtures: the real data sets under ``<repo>/../shared/data`` and a loader for
LightGBM's TSV example files (label in the first column).

The shared data is part of the CI image.  A test that needs it FAILS (it does not
skip) when it is missing, so a broken checkout cannot pass silently.
"""
import os
import sys
from pathlib import Path

import numpy as np
import pytest

TESTS_DIR = Path(__file__).resolve().parent
REPO_ROOT = TESTS_DIR.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"

# make ``reference.naive`` importable whatever pytest's import mode
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))


def load_tsv(path):
    """A LightGBM example TSV file -> (X float64 (n, F), y float64 (n,))."""
    a = np.loadtxt(path, delimiter="\t", dtype=np.float64, ndmin=2)
    return np.ascontiguousarray(a[:, 1:]), np.ascontiguousarray(a[:, 0])


@pytest.fixture(scope="session")
def shared_data():
    """Path of ``<repo>/../shared/data``; fails the test when it is missing."""
    if not SHARED_DATA.is_dir():
        pytest.fail(f"shared test data not found at {SHARED_DATA} (expected <repo>/../shared/data "
                    "with lightgbm-examples/ and xgboost-demo/); this test needs it and must "
                    "not be skipped", pytrace=False)
    return SHARED_DATA


@pytest.fixture(scope="session")
def lgb_example(shared_data):
    """``lgb_example("binary") -> (X_train, y_train, X_test, y_test)`` from
    ``lightgbm-examples/<name>.{train,test}``."""
    cache = {}

    def load(name):
        if name not in cache:
            parts = []
            for split in ("train", "test"):
                path = shared_data / "lightgbm-examples" / f"{name}.{split}"
                if not path.is_file():
                    pytest.fail(f"shared data file {path} is missing", pytrace=False)
                parts.extend(load_tsv(path))
            cache[name] = tuple(parts)
        return cache[name]

    return load


@pytest.fixture(scope="session")
def n_cpu_threads():
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


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
