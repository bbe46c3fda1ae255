"""bench_gpu.py's data and parameters: the generated sets, both libraries' settings
(the mapping written down), the model-text normalisation of the CPU = GPU check and a
numpy ROC AUC."""
import hashlib
import re

import numpy as np

import _common as C
import bench_fit as BF
from _gpu_harness import N_FEATURES

DEVICE_FIELD = re.compile(r'"device":\s*"[A-Za-z0-9_]+"')


def bonsai_params(depth, rounds, threads, device):
    """bench_fit.py's mapping: depth-wise, min 20 samples and 1e-3 hessian per leaf,
    L2 1.0, 255 value bins (bonsai adds one bin for missing values), seed 0."""
    c = BF.COMMON
    return {"objective": "binary", "grow_policy": "depthwise", "max_depth": depth,
            "n_estimators": rounds, "learning_rate": c["learning_rate"],
            "max_bin": c["max_bin"], "min_child_samples": c["min_child_samples"],
            "min_child_weight": c["min_child_weight"], "reg_lambda": c["reg_lambda"],
            "n_threads": threads, "random_state": c["seed"], "device": device,
            "verbosity": 0}


def xgboost_params(depth, threads):
    """The same tree settings for XGBoost.  ``max_bin=256``: XGBoost's max_bin counts
    every bin of a feature and keeps missing values out of them, bonsai's 255 value
    bins + its missing bin make 256 a feature (bench_fit.py's mapping).  XGBoost has no
    min_child_samples (bonsai's 20); ``min_child_weight`` (1e-3 hessian) maps 1:1."""
    c = BF.COMMON
    return {"objective": "binary:logistic", "tree_method": "hist", "device": "cuda",
            "eta": c["learning_rate"], "max_depth": depth, "max_bin": c["max_bin"] + 1,
            "reg_lambda": c["reg_lambda"], "min_child_weight": c["min_child_weight"],
            "nthread": threads, "seed": c["seed"], "verbosity": 1}


def fit_data(n):
    """(X_train, y_train, X_test, y_test): ``higgs_like(n)``, the last 10% held out."""
    return C.split(*C.higgs_like(n=n, d=N_FEATURES))


def data_digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def check_data(n, task, seed=7):
    """``n`` x 10: 9 numeric columns (~8% NaN in columns 0-3) and a categorical code
    column 9 (12 categories, some missing); binary or 3-class label."""
    rng = np.random.default_rng([seed, n])
    X = rng.standard_normal((n, 10))
    X[:, 9] = rng.integers(0, 12, n)
    effect = np.linspace(-1.0, 1.0, 12)[X[:, 9].astype(int)]
    s = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + 0.5 * X[:, 3] + effect
    for j in range(4):
        X[rng.random(n) < 0.08, j] = np.nan
    X[rng.random(n) < 0.03, 9] = np.nan
    if task == "binary":
        y = (s + rng.logistic(0, 0.5, n) > 0).astype(np.float32)
    else:
        scores = np.stack([s, -s, X[:, 4] + effect], 1) + rng.gumbel(0, 0.5, (n, 3))
        y = np.argmax(scores, 1).astype(np.float32)
    return X.astype(np.float32), y


def normalised(model_text):
    n = len(DEVICE_FIELD.findall(model_text))
    return DEVICE_FIELD.sub('"device":"-"', model_text), n


def first_difference(a, b):
    i = next((k for k, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return f"at char {i}: cpu ...{a[max(0, i - 40):i + 40]!r} gpu ...{b[max(0, i - 40):i + 40]!r}"


def auc(y, p):
    """ROC AUC (tied scores share their mean rank), in numpy: the bonsai call must not
    depend on the device image's scikit-learn working with the carried numpy."""
    pos = np.asarray(y).ravel() > 0.5
    p = np.asarray(p, np.float64).ravel()
    _, inv, counts = np.unique(p, return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(counts) - (counts - 1) / 2.0       # 1-based, ties averaged
    n1 = int(pos.sum())
    n0 = pos.shape[0] - n1
    return float((mean_rank[inv][pos].sum() - n1 * (n1 + 1) / 2.0) / (n1 * n0))


