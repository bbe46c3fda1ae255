"""scipy.sparse training and prediction: bonsai against LightGBM and XGBoost.

Two data sets, each library in its own fresh process (so its peak RSS is its own,
the CSR input included):

* ``generated``: a binary task on an ``--rows x --features`` CSR of 0/1 values with
  ``--nnz`` non-zeros a row (default 1M x 100k, 50 a row: 600 MB as float64 CSR,
  800 GB dense); the label is a noisy threshold of a weighted sum over a fifth of the
  features.  The last 10% of rows is the test set.
* ``agaricus``: XGBoost's demo data (LibSVM), the repository's gzipped copies in
  ``tests/data`` (``agaricus.txt.train.gz``, ``agaricus.txt.test.gz``), or the
  ``agaricus.txt.{train,test}[.gz]`` files of ``--agaricus DIR``.

Each run prints fit time (Dataset construction + training), predict time on the test
rows, the process's peak RSS (``ru_maxrss``) and the peak above the RSS once the data
was loaded, test logloss and AUC; then bonsai's ratios against LightGBM and XGBoost
from the same invocation (medians over ``--repeats`` interleaved runs).

    python benchmarks/bench_sparse.py --data agaricus,generated --repeats 3 --threads 2 \
        [--rows N] [--features F] [--nnz K] [--rounds R] [--json out.json]
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
PREFIX = "BENCH_RESULT "
LIBS = ("bonsai", "lightgbm", "xgboost")


def _rss_mb():
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) / 1024 for line in fh if line.startswith("VmRSS"))


def generated(n, f, k, seed=7):
    """(X_train, y_train, X_test, y_test) CSR float64 0/1 values, k distinct columns a
    row (drawn with replacement, duplicates merged)."""
    import scipy.sparse as sp
    rng = np.random.default_rng(seed)
    indptr = np.arange(0, n * k + 1, k, dtype=np.int64)
    indices = rng.integers(0, f, n * k, dtype=np.int64).astype(np.int32)
    X = sp.csr_matrix((np.ones(n * k), indices, indptr), shape=(n, f))
    X.sum_duplicates()
    X.data[:] = 1.0
    w = np.zeros(f)
    hot = rng.choice(f, size=max(1, f // 5), replace=False)
    w[hot] = rng.normal(size=hot.size)
    score = X @ w + 0.5 * rng.normal(size=n)
    y = (score > np.median(score)).astype(np.float64)
    cut = int(n * 0.9)
    return X[:cut], y[:cut], X[cut:], y[cut:]


def _libsvm(folder, name):
    """``folder/name``, or its gzipped copy ``name.gz`` (scikit-learn reads either)."""
    path = Path(folder) / name
    return str(path if path.exists() else path.with_name(name + ".gz"))


def agaricus(folder):
    from sklearn.datasets import load_svmlight_files
    Xa, ya, Xb, yb = load_svmlight_files([_libsvm(folder, "agaricus.txt.train"),
                                          _libsvm(folder, "agaricus.txt.test")])
    return Xa.tocsr(), ya, Xb.tocsr(), yb


def _metrics(y, p):
    from sklearn.metrics import log_loss, roc_auc_score
    p = np.clip(p, 1e-15, 1 - 1e-15)
    return float(log_loss(y, p)), float(roc_auc_score(y, p))


def worker(a):
    X, y, Xt, yt = (agaricus(a.agaricus) if a.data == "agaricus"
                    else generated(a.rows, a.features, a.nnz))
    rss_data = _rss_mb()
    depth, lr, rounds, th = a.depth, 0.1, a.rounds, a.threads
    t0 = time.perf_counter()
    if a.lib == "bonsai":
        import bonsai
        ds = bonsai.Dataset(X, label=y)
        model = bonsai.train({"objective": "binary", "max_depth": depth, "learning_rate": lr,
                              "n_threads": th, "max_bin": 255}, ds, num_boost_round=rounds)
        fit = time.perf_counter() - t0
        t1 = time.perf_counter()
        p = model.predict(Xt)
    elif a.lib == "lightgbm":
        import lightgbm as lgb
        ds = lgb.Dataset(X, label=y, params={"max_bin": 255, "verbose": -1})
        model = lgb.train({"objective": "binary", "max_depth": depth, "num_leaves": 2 ** depth,
                           "learning_rate": lr, "num_threads": th, "verbose": -1,
                           "min_data_in_leaf": 20, "min_sum_hessian_in_leaf": 1e-3},
                          ds, num_boost_round=rounds)
        fit = time.perf_counter() - t0
        t1 = time.perf_counter()
        p = model.predict(Xt)
    else:
        import xgboost as xgb
        ds = xgb.DMatrix(X, label=y, nthread=th)
        model = xgb.train({"objective": "binary:logistic", "max_depth": depth, "eta": lr,
                           "nthread": th, "tree_method": "hist", "max_bin": 255}, ds,
                          num_boost_round=rounds)
        fit = time.perf_counter() - t0
        t1 = time.perf_counter()
        p = model.predict(xgb.DMatrix(Xt, nthread=th))
    pred = time.perf_counter() - t1
    ru = resource.getrusage(resource.RUSAGE_SELF)
    peak = ru.ru_maxrss / 1024
    ll, auc = _metrics(yt, p)
    out = {"lib": a.lib, "data": a.data, "fit_s": fit, "predict_s": pred, "peak_rss_mb": peak,
           "peak_over_data_mb": peak - rss_data, "cpu_s": ru.ru_utime + ru.ru_stime,
           "logloss": ll, "auc": auc, "rows": X.shape[0] + Xt.shape[0],
           "features": X.shape[1], "nnz": int(X.nnz + Xt.nnz)}
    print(PREFIX + json.dumps(out), flush=True)


def run(a, lib, data):
    cmd = [sys.executable, __file__, "--worker", lib, "--data", data, "--rows", str(a.rows),
           "--features", str(a.features), "--nnz", str(a.nnz), "--rounds", str(a.rounds),
           "--depth", str(a.depth), "--threads", str(a.threads), "--agaricus", a.agaricus]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
    res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.timeout)
    for line in res.stdout.splitlines():
        if line.startswith(PREFIX):
            return json.loads(line[len(PREFIX):])
    raise RuntimeError(f"{lib} on {data} failed:\n{res.stderr[-3000:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="agaricus,generated")
    ap.add_argument("--libs", default=",".join(LIBS))
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=100_000)
    ap.add_argument("--nnz", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--depth", type=int, default=6)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=3600)
    ap.add_argument("--agaricus", default=str(REPO / "tests" / "data"))
    ap.add_argument("--json")
    ap.add_argument("--worker", choices=LIBS)
    ap.add_argument("--warmup", action="store_true", help="one untimed bonsai run first "
                    "(compiles and caches its kernels)")
    a = ap.parse_args()
    if a.worker:
        a.lib = a.worker
        return worker(a)
    libs = a.libs.split(",")
    rows = []
    for data in a.data.split(","):
        if a.warmup and "bonsai" in libs:
            run(a, "bonsai", data)
        runs = {lib: [] for lib in libs}
        for _ in range(a.repeats):          # interleaved
            for lib in libs:
                runs[lib].append(run(a, lib, data))
        med = {lib: {k: statistics.median(r[k] for r in rs) for k in
                     ("fit_s", "predict_s", "peak_rss_mb", "peak_over_data_mb", "cpu_s",
                      "logloss", "auc")} for lib, rs in runs.items()}
        first = runs[libs[0]][0]
        print(f"\n== {data}: {first['rows']} rows x {first['features']} features, "
              f"{first['nnz']} non-zeros; {a.rounds} rounds depth {a.depth}, {a.threads} "
              f"threads, medians of {a.repeats}")
        print(f"{'lib':10s} {'fit s':>8s} {'cpu s':>8s} {'pred s':>8s} {'peak MB':>9s} "
              f"{'+data MB':>9s} {'logloss':>8s} {'auc':>7s}")
        for lib, m in med.items():
            print(f"{lib:10s} {m['fit_s']:8.2f} {m['cpu_s']:8.2f} {m['predict_s']:8.3f} "
                  f"{m['peak_rss_mb']:9.0f} {m['peak_over_data_mb']:9.0f} {m['logloss']:8.4f} "
                  f"{m['auc']:7.4f}")
        if "bonsai" in med:
            b = med["bonsai"]
            for lib in (x for x in libs if x != "bonsai"):
                o = med[lib]
                print(f"bonsai / {lib}: fit time {b['fit_s'] / o['fit_s']:.2f}x, "
                      f"peak RSS {b['peak_rss_mb'] / o['peak_rss_mb']:.2f}x, predict "
                      f"{b['predict_s'] / o['predict_s']:.2f}x")
        rows.append({"data": data, "medians": med, "runs": runs})
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
