"""``python -m bonsai.demo``: train on the bundled HIGGS sample and print the test
AUC, LightGBM-style, with the time it took."""
import gzip
import os
import time

import numpy as np


def load_binary():
    """(X_train, y_train, X_test, y_test) of the bundled HIGGS sample."""
    here = os.path.join(os.path.dirname(__file__), "data")
    with gzip.open(os.path.join(here, "binary.train.gz"), "rt") as fh:
        train = np.loadtxt(fh)
    test = np.loadtxt(os.path.join(here, "binary.test"))
    return train[:, 1:], train[:, 0], test[:, 1:], test[:, 0]


def main():
    import bonsai
    from bonsai.metrics import get_metric

    X, y, Xt, yt = load_binary()
    t0 = time.perf_counter()
    model = bonsai.BonsaiClassifier(n_estimators=100, learning_rate=0.1, grow_policy="leafwise",
                                    max_leaves=31, random_state=0)
    model.fit(X, y, eval_set=[(Xt, yt)])
    secs = time.perf_counter() - t0
    auc = get_metric("auc", {}).fn(yt, model.predict_proba(Xt)[:, 1], None)
    print(f"bonsai {bonsai.__version__}: HIGGS sample, {X.shape[0]} train rows, "
          f"{X.shape[1]} features, 100 trees")
    print(f"test AUC = {auc:.4f}   train time = {secs:.2f} s (a first run after install also JIT-compiles the kernels)")


if __name__ == "__main__":
    main()
