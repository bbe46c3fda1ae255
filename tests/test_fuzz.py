"""Property-based fuzzing of the whole fit -> predict -> save/load/pickle path
(hypothesis), every case run in a long-lived worker process (``tests/_fuzz_worker.py``)
so that one that crashes the interpreter or hangs fails the case, not pytest.

A case draws random shapes (1 row, 1 feature, constant, all-NaN, +-inf, huge and
denormal columns, duplicated rows), an input container (numpy float32/float64 in C or
F order, int and bool arrays, pandas with category / bool / nullable columns, polars,
Arrow, scipy.sparse), an objective and parameters drawn from ``PARAM_TABLE`` --
every range's edges included, sometimes one value out of range or of the wrong type.
The property: the case fits, predicts finite values and round-trips through the model
string, a model file and pickle with identical predictions; or it raises ValueError /
TypeError whose message names a parameter of the case or the input.  A parameter out
of range or of the wrong type must raise (accepting it is a silent coercion).

The short profile (``test_fuzz_short``) runs in the suite, derandomized.  The long one
is on demand: ``python -m pytest -m fuzz tests/test_fuzz.py --hypothesis-seed=N -s``
runs chunks of examples until ``BONSAI_FUZZ_MINUTES`` (default 10) have passed, and
prints (and writes to ``$BONSAI_FUZZ_REPORT`` if set) the counts: cases, fits, errors
by type, crashes, hangs, non-finite predictions, silent coercions.
"""
import collections
import json
import math
import multiprocessing
import os
import time

import numpy as np
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from bonsai._checks import Choices, Interval
from bonsai._params import OBJECTIVES, PARAM_TABLE

import _fuzz_worker

#: parameters not drawn: the objective (drawn on its own), the device (CUDA is tested
#: elsewhere), the number of rounds (kept small: cost), and the ones that need
#: validation sets or names the case does not have
NOT_DRAWN = {"objective", "device", "n_estimators", "num_class", "early_stopping_rounds",
             "eval_metric", "categorical_features", "label_gain", "verbosity"}
#: a case that has not answered in this many seconds hangs
HANG_S = 180
CONTAINERS = ("numpy64", "numpy64F", "numpy32", "int64", "int32", "uint8", "bool", "pandas",
              "polars", "arrow", "sparse_csr", "sparse_csc", "sparse_coo")
COL_VALUES = ("normal", "constant", "nan", "inf", "huge", "denormal", "int", "zeros", "mixed")
PANDAS_KINDS = ("float64", "float32", "category", "int_category", "bool", "Int64", "Float64",
                "boolean")
COUNTS = collections.Counter()


# ---- parameters: each one's range from PARAM_TABLE, edges included -------------------

def _below(x):
    return math.nextafter(x, -math.inf)


def _above(x):
    return math.nextafter(x, math.inf)


def _valid_values(spec):
    """Values of ``spec`` inside its range: the edges, just inside open edges, a
    middle value and (unbounded above) huge ones."""
    chk, types = spec.check, spec.types
    out = []
    if "None" in types:
        out.append(None)
    if "bool" in types:
        out += [True, False]
    if isinstance(chk, Choices):
        out += list(chk.choices)
    if isinstance(chk, Interval):
        lo, hi = chk.lo, chk.hi
        if "int" in types:
            a = (int(lo) if chk.lo_closed else int(lo) + 1) if lo > -math.inf else -2 ** 31
            b = (int(hi) if chk.hi_closed else int(hi) - 1) if hi < math.inf else 2 ** 31 - 1
            out += sorted(v for v in {a, a + 1, min(a + 7, b), b - 1, b} if a <= v <= b)
        elif "float" in types:
            a = lo if chk.lo_closed else _above(lo)
            b = hi if chk.hi_closed else _below(hi)
            a, b = max(a, -1.7976931348623157e308), min(b, 1.7976931348623157e308)
            out += [v for v in (a, b, a / 2 + b / 2, 1e-300, 0.5, 1.0, 1e300) if a <= v <= b]
        out += list(chk.also)
    if spec.check is None and "float" in types:
        out += [0.0, 1.0]
    return [v for i, v in enumerate(out) if repr(v) not in map(repr, out[:i])]


def _invalid_values(spec):
    """(value, why) pairs the parameter must reject: out of range, or a wrong type."""
    chk, types = spec.check, spec.types
    out = []
    if isinstance(chk, Interval):
        if chk.lo > -math.inf:
            out.append(int(chk.lo) - 1 if "int" in types else (
                _below(chk.lo) if chk.lo_closed else chk.lo))
        if chk.hi < math.inf:
            out.append(int(chk.hi) + 1 if "int" in types else (
                _above(chk.hi) if chk.hi_closed else chk.hi))
        if "float" in types:
            out += [math.nan, math.inf]
    if isinstance(chk, Choices):
        out.append("no-such-choice")
    if "int" in types and "float" not in types:
        out += [2.0, "2"]
    if "float" in types:
        out += ["0.5", [0.5]]
    if "bool" in types:
        out += [1, "yes"]
    if "str" in types and "callable" not in types:
        out.append(3)
    return [v for v in out if not (isinstance(chk, Interval) and v in chk.also)]


PARAMS = {s.name: s for s in PARAM_TABLE if s.name not in NOT_DRAWN}
VALID = {name: _valid_values(s) for name, s in PARAMS.items()}
INVALID = {name: _invalid_values(s) for name, s in PARAMS.items()}
#: parameters whose values cost time: kept at their small edges
CHEAP = {"n_threads": [1, 2, 3, None], "ctr_permutations": [1, 2, 64],
         "max_ctr_combinations": [0, 1, 2, 64]}
VALID.update(CHEAP)


@st.composite
def cases(draw):
    n = draw(st.integers(1, 40))
    F = draw(st.integers(1, 4))
    container = draw(st.sampled_from(CONTAINERS))
    objective = draw(st.sampled_from(OBJECTIVES))
    names = draw(st.lists(st.sampled_from(sorted(PARAMS)), max_size=8, unique=True))
    params = {name: draw(st.sampled_from(VALID[name])) for name in names}
    params["n_estimators"] = draw(st.integers(1, 3))
    params["verbosity"] = 0
    if objective == "multiclass":
        params["num_class"] = draw(st.integers(1, 4))
    invalid = None
    bad = [p for p in sorted(PARAMS) if INVALID[p]]
    if draw(st.integers(0, 9)) == 0:
        invalid = draw(st.sampled_from(bad))
        params[invalid] = draw(st.sampled_from(INVALID[invalid]))
    rng_seed = draw(st.integers(0, 2 ** 32 - 1))
    col_values = draw(st.lists(st.sampled_from(COL_VALUES), min_size=F, max_size=F))
    col_kinds = draw(st.lists(st.sampled_from(PANDAS_KINDS), min_size=F, max_size=F))
    duplicate = draw(st.booleans())
    label_kind = draw(st.sampled_from(("normal", "normal", "constant", "huge", "nan", "inf")))
    api = draw(st.sampled_from(("train", "train", "sklearn")))
    if api == "sklearn" and (objective not in ("squared_error", "binary", "multiclass")
                             or invalid is not None):
        api = "train"
    return _make_case(n, F, container, objective, params, invalid, rng_seed, col_values,
                      col_kinds, duplicate, label_kind, api)


def _column(rng, kind, n):
    if kind == "normal":
        return rng.normal(size=n)
    if kind == "constant":
        return np.full(n, rng.normal())
    if kind == "nan":
        return np.full(n, np.nan)
    if kind == "inf":
        return np.where(rng.random(n) < 0.3, rng.choice([np.inf, -np.inf], n), rng.normal(size=n))
    if kind == "huge":
        return rng.choice([-1.0, 1.0], n) * 1.7976931348623157e308 * rng.random(n)
    if kind == "denormal":
        return rng.integers(-3, 4, n) * 5e-324
    if kind == "int":
        return rng.integers(-3, 6, n).astype(np.float64)
    if kind == "zeros":
        return np.where(rng.random(n) < 0.8, 0.0, rng.normal(size=n))
    return np.where(rng.random(n) < 0.4, np.nan, rng.normal(size=n) * 10.0 ** rng.integers(-8, 8, n))


def _make_case(n, F, container, objective, params, invalid, rng_seed, col_values, col_kinds,
               duplicate, label_kind, api):
    rng = np.random.default_rng(rng_seed)
    M = np.column_stack([_column(rng, k, n) for k in col_values])
    y = rng.normal(size=n)
    if label_kind == "constant":
        y[:] = 1.25
    elif label_kind == "huge":
        y *= 1e300
    elif label_kind == "nan":
        y[rng.integers(n)] = np.nan
    elif label_kind == "inf":
        y[rng.integers(n)] = np.inf
    if duplicate:                       # duplicated rows (features and labels)
        idx = rng.integers(0, max(1, n // 3), n)
        M, y = M[idx], y[idx]
    return {"M": M, "container": container, "col_kinds": col_kinds, "objective": objective,
            "params": params, "invalid": invalid, "y": y,
            "label_raw": label_kind in ("nan", "inf"), "api": api,
            "group_cuts": rng.integers(0, n + 1, 3).tolist(),
            "about": dict(n=n, F=F, col_values=col_values, label=label_kind, seed=rng_seed,
                          duplicate=duplicate)}


# ---- the worker ------------------------------------------------------------------

class Worker:
    """A spawned child serving ``_fuzz_worker.serve``; restarted after a crash or hang."""

    def __init__(self):
        self.proc = self.conn = None

    def _start(self):
        ctx = multiprocessing.get_context("spawn")
        self.conn, child = ctx.Pipe()
        self.proc = ctx.Process(target=_fuzz_worker.serve, args=(child,), daemon=True)
        self.proc.start()
        child.close()
        if not self.conn.poll(300) or self.conn.recv() != "ready":
            raise RuntimeError("the fuzz worker did not start")

    def run(self, case):
        if self.proc is None or not self.proc.is_alive():
            self._start()
        self.conn.send(case)
        try:
            if self.conn.poll(HANG_S):
                return self.conn.recv()
            kind = "hang"
        except (EOFError, ConnectionError):
            kind = "crash"
        code = self._stop()
        return {"kind": kind, "exitcode": code}

    def _stop(self):
        proc, self.proc = self.proc, None
        if proc is None:
            return None
        if proc.is_alive():
            proc.kill()
        proc.join(30)
        return proc.exitcode

    def close(self):
        if self.proc is not None and self.proc.is_alive():
            self.conn.send(None)
            self.proc.join(30)
        self._stop()


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()


def _check(worker, case):
    out = worker.run(case)
    kind = out["kind"]
    COUNTS["cases"] += 1
    COUNTS["other:" + out["type"] if kind == "other" else kind] += 1
    about = {k: case[k] for k in ("container", "objective", "params", "invalid", "api", "about")}
    if kind in ("ValueError", "TypeError"):
        assert out["named"], f"the error names neither a parameter nor the input: {out} {about}"
        return
    assert kind == "fit", f"{out} {about}"


SHORT = settings(max_examples=30, deadline=None, derandomize=True, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@SHORT
@given(case=cases())
def test_fuzz_short(worker, case):
    _check(worker, case)


def test_strategies_reach_the_edges():
    """The drawn values include each range's edges and out-of-range values for every
    checked parameter (so the fuzz tests the bounds, not just defaults)."""
    assert VALID["max_bin"][:2] == [2, 3] and 65535 in VALID["max_bin"]
    assert 0.0 in VALID["reg_lambda"] and 1.7976931348623157e308 in VALID["reg_lambda"]
    assert 5e-324 in VALID["learning_rate"] and 1.0 in VALID["subsample"]
    assert 1 in INVALID["max_bin"] and 65536 in INVALID["max_bin"]
    assert any(isinstance(v, str) for v in INVALID["learning_rate"])
    assert all(INVALID[p] for p in PARAMS if PARAMS[p].check is not None
               or "bool" in PARAMS[p].types), [p for p in PARAMS if not INVALID[p]]


LONG = settings(max_examples=50, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


@pytest.mark.fuzz
def test_fuzz_long(worker, request):
    """On demand: chunks of 50 examples, seeded from ``--hypothesis-seed``, until
    ``BONSAI_FUZZ_MINUTES`` have passed; prints the counts."""
    base = int(request.config.getoption("hypothesis_seed", None) or 0)
    end = time.monotonic() + 60 * float(os.environ.get("BONSAI_FUZZ_MINUTES", "10"))
    COUNTS.clear()
    chunk, failures = 0, []
    try:
        while time.monotonic() < end:
            run = seed(base * 1_000_003 + chunk)(LONG(given(case=cases())(
                lambda case: _check(worker, case))))
            try:
                run()
            except Exception as e:   # noqa: BLE001 -- a failed chunk is counted; go on
                subs = getattr(e, "exceptions", [e])       # hypothesis' ExceptionGroup
                failures += [str(x).splitlines()[0][:2000] for x in subs]
            chunk += 1
    finally:
        report = dict(COUNTS, chunks=chunk, seed=base, failed_chunks=len(failures),
                      failures=failures)
        print("\nfuzz counts:", json.dumps(report, sort_keys=True))
        if os.environ.get("BONSAI_FUZZ_REPORT"):
            with open(os.environ["BONSAI_FUZZ_REPORT"], "w") as fh:
                json.dump(report, fh, sort_keys=True)
    assert not failures, failures


# ---- what the fuzz found, pinned ----------------------------------------------------

def _tiny(n=5):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 1)), rng.normal(size=n)


def test_found_overflowing_leaves_raise_instead_of_an_unloadable_model():
    """learning_rate at its upper edge made leaf values inf (binary: the gradients stay
    finite): training now stops with ValueError instead of writing a model that
    predicts inf and that the reader rejects."""
    import bonsai
    X, y = _tiny()
    with pytest.raises(ValueError, match=r"diverged at iteration \d+.*learning_rate"):
        bonsai.train({"objective": "binary", "learning_rate": 1.7976931348623157e308,
                      "n_estimators": 2, "verbosity": 0},
                     bonsai.Dataset(X, label=(y > 0).astype(float)))


def test_found_base_score_beyond_exp_for_log_links():
    import bonsai
    X, y = _tiny()
    for obj in ("gamma", "poisson", "tweedie"):
        with pytest.raises(ValueError, match=r"parameter 'base_score'.*at most 709"):
            bonsai.train({"objective": obj, "base_score": 1e308, "n_estimators": 1},
                         bonsai.Dataset(X, label=np.abs(y) + 0.5))
    b = bonsai.train({"objective": "gamma", "base_score": 700.0, "n_estimators": 1},
                     bonsai.Dataset(X, label=np.abs(y) + 0.5))
    assert np.isfinite(b.predict(X)).all()


def test_found_huge_base_score_offset_by_leaves_round_trips():
    """base_score = -max float with leaves of +max float: every margin is finite, and
    the reader (running bounds, not a sum of absolute values) loads the model."""
    import bonsai
    X, y = _tiny(1)
    b = bonsai.train({"objective": "absolute_error", "base_score": -1.7976931348623157e308,
                      "n_estimators": 1}, bonsai.Dataset(X, label=y))
    p = b.predict(X)
    assert np.isfinite(p).all()
    np.testing.assert_array_equal(bonsai.Booster(model_str=b.model_to_string()).predict(X), p)


def test_found_all_missing_category_column_round_trips():
    """An all-missing pandas category column has no categories (its CTR 'cards' is 0):
    the model it trains loads back (the reader required cards >= 1)."""
    import pandas as pd

    import bonsai
    rng = np.random.default_rng(0)
    n = 30
    df = pd.DataFrame({"x": rng.normal(size=n),
                       "c": pd.Categorical([None] * n, categories=list("abc")),
                       "d": pd.Categorical(rng.choice(list("uv"), n))})
    b = bonsai.train({"n_estimators": 2, "cat_encoding": "ordered", "min_child_samples": 2,
                      "min_data_per_group": 2}, bonsai.Dataset(df, label=rng.normal(size=n)))
    np.testing.assert_array_equal(bonsai.Booster(model_str=b.model_to_string()).predict(df),
                                  b.predict(df))


def test_found_log_link_margins_past_exp_raise():
    """gamma with a huge learning_rate: finite margins whose exp overflows."""
    import bonsai
    X = np.random.default_rng(0).normal(size=(200, 3))
    y = np.exp(3 * X[:, 0]) + 0.1
    with pytest.raises(ValueError, match="diverged.*exp overflows"):
        bonsai.train({"objective": "gamma", "learning_rate": 1e6, "n_estimators": 3},
                     bonsai.Dataset(X, label=y))


def test_found_polars_categorical_column_reaches_the_estimator():
    pl = pytest.importorskip("polars")
    from bonsai.sklearn import BonsaiRegressor
    df = pl.DataFrame({"a": [1.0, 2, 3, 4] * 10,
                       "c": pl.Series(["a", "b", "a", "c"] * 10, dtype=pl.Categorical)})
    m = BonsaiRegressor(n_estimators=2, min_child_samples=2).fit(df, np.arange(40.0))
    assert list(m.feature_names_in_) == ["a", "c"] and np.isfinite(m.predict(df)).all()
    bad = pl.DataFrame({"a": [1.0, 2, 3, 4] * 10, "s": ["a", "b", "a", "c"] * 10})
    with pytest.raises(TypeError, match="column 's'"):
        BonsaiRegressor(n_estimators=2).fit(bad, np.arange(40.0))
