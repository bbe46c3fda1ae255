"""``warmup()``: compile (or load from numba's cache) every CPU kernel on tiny data,
so benchmarks and test sessions time the work rather than the JIT.

A fit compiles only the kernels it uses (``backends.cpu.step``): small data runs the
serial twins only.  ``warmup`` therefore runs its tiny fits twice, the second time
with the work-splitting thresholds lowered so that they take the parallel kernels
that large data uses.
"""
import time
from contextlib import contextmanager

import numpy as np


@contextmanager
def _parallel_thresholds():
    """Lower the thresholds above which work is cut between threads (they are read at
    every call), so tiny fits run, and compile, the parallel kernels."""
    from .backends import HOST, get_backend, kernels
    cpu = get_backend(HOST)
    cells = kernels("binning")      # binning and layout kernels: by cell count
    names = ("MIN_ROWS_PER_THREAD", "MIN_PARTITION_ROWS_PER_THREAD", "MIN_PARALLEL_SPLIT_NODES",
             "MIN_PARALLEL_STREAM_ROWS", "SERIAL_PREDICT_ROWS", "MIN_PARALLEL_PREDICT_WORK")
    saved = {n: getattr(cpu, n) for n in names}
    saved_cells = cells.PARALLEL_CELLS
    try:
        for n in names:
            setattr(cpu, n, 1)
        cells.PARALLEL_CELLS = 1
        yield
    finally:
        for n, v in saved.items():
            setattr(cpu, n, v)
        cells.PARALLEL_CELLS = saved_cells


def _fits(rng):
    from .boosting import train
    from .dataset import Dataset

    X = rng.normal(size=(600, 4))
    X[::7, 1] = np.nan
    y_bin = (X[:, 0] > 0).astype(float)
    y_mc = (np.nan_to_num(X[:, 1]) > 0).astype(float) + (X[:, 2] > 0.5)
    for X_ in (X, X.astype(np.float32)):
        ds = Dataset(X_, label=y_bin)
        for policy in ("depthwise", "leafwise", "oblivious"):
            b = train({"objective": "binary", "n_estimators": 2, "grow_policy": policy,
                       "subsample": 0.8, "min_child_samples": 5}, ds, valid_sets=[ds])
            b.predict(X_)
            b.predict(X_, pred_leaf=True)
    # mostly-zero columns: the sparse-rows histogram layout and its kernels
    Xs = (rng.random((600, 6)) < 0.1).astype(np.float32)
    train({"objective": "binary", "n_estimators": 2}, Dataset(Xs, label=y_bin)).predict(Xs)
    ds = Dataset(X, label=y_mc)
    train({"objective": "multiclass", "num_class": 3, "n_estimators": 2}, ds).predict(X)
    train({"objective": "binary", "n_estimators": 2, "quantized_grad": True},
          Dataset(X, label=y_bin)).predict(X[:5])
    # learning to rank: the per-query gradient and metric kernels
    y_rank = np.minimum(np.floor(np.abs(X[:, 0]) * 2), 4)
    dr = Dataset(X, label=y_rank, group=np.full(60, 10))
    train({"objective": "lambdarank", "n_estimators": 2, "eval_metric": ["ndcg@3", "map@3"]},
          dr, valid_sets=[dr]).predict(X[:5])


def warmup(verbose=False, small=True, large=True):
    """Train and predict tiny models with every grower and the main objectives
    (``lambdarank`` among them).

    ``small``: with the kernels of small fits (one thread's); ``large`` (with more than
    one thread): with those of fits large enough to share between threads (a benchmark
    on large data needs only these, and loads less code without the others).

    Returns the seconds it took (the first call in a fresh environment compiles;
    later processes load the kernels from the cache).  Not to be called while another
    Python thread trains: the ``large`` pass lowers module-level thresholds.
    """
    import numba

    t0 = time.perf_counter()
    if small:
        _fits(np.random.default_rng(0))
    if large and numba.config.NUMBA_NUM_THREADS > 1:
        with _parallel_thresholds():
            _fits(np.random.default_rng(0))
    secs = time.perf_counter() - t0
    if verbose:
        print(f"bonsai warmup: {secs:.2f} s")
    return secs
