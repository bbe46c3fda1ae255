"""Shared fixtures: the real data sets kept in the repository and a loader for
LightGBM's TSV example files (label in the first column).

The data lies inside the repository (``tests/data/`` and the demo's
``bonsai/data/``; ``tests/data/README.md`` gives each file's source and licence), so a
clone with nothing beside it runs the whole suite.  A test that needs a file FAILS
(it does not skip) when the file is missing, so a broken checkout cannot pass
silently.
"""
import gzip
import os
import sys
from pathlib import Path

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

# make ``reference.naive`` importable whatever pytest's import mode
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))


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
