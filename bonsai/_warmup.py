"""``warmup()``: compile (or load from numba's cache) every CPU kernel on tiny data,
so benchmarks and test sessions time the work rather than the JIT."""
import time

import numpy as np


def warmup(verbose=False):
    """Train and predict tiny models with every grower and the main objectives.

    Returns the seconds it took (the first call in a fresh environment compiles;
    later processes load the kernels from the cache).
    """
    from .boosting import train
    from .dataset import Dataset

    t0 = time.perf_counter()
    rng = np.random.default_rng(0)
    X = rng.normal(size=(600, 4))  # > SERIAL_PREDICT_ROWS: compiles the parallel predictors too
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
    secs = time.perf_counter() - t0
    if verbose:
        print(f"bonsai warmup: {secs:.2f} s")
    return secs
