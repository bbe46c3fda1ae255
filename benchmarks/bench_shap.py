"""TreeSHAP speed: bonsai's ``predict(pred_contribs=True)`` against XGBoost's
``pred_contribs`` (and LightGBM's ``pred_contrib``) on the same trees, in one run.

    python benchmarks/bench_shap.py [--rows 10000] [--rounds 200] [--depth 8]
        [--threads 2] [--repeats 3] [--train-rows 200000]

The model: XGBoost, ``--rounds`` trees of depth ``--depth`` (hist, 255 bins) trained
on the first ``--train-rows`` training rows of the cached ``higgs`` data (28
features); it is
imported into bonsai (``Booster.from_xgboost``), so both explain the same trees.
Explained: the first ``--rows`` test rows as float32.  bonsai's own depth-wise model with the
same settings and a LightGBM model (``max_depth`` = depth, 255 leaves) are timed too.
Each timing is the median of ``--repeats`` interleaved runs in this process, after one
warm-up call (numba compile, thread start); the contributions are checked against
XGBoost's (max abs difference printed).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import _common as C


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--depth", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--train-rows", type=int, default=200_000)
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", str(args.threads))
    import bonsai
    import lightgbm as lgb
    import xgboost as xgb

    X, y, X_test, _ = C.load_cached("higgs")
    Xtr, ytr = X[:args.train_rows], y[:args.train_rows]
    Xs = np.ascontiguousarray(X_test[:args.rows], dtype=np.float32)
    print(f"bench_shap: {args.rows} rows x {X.shape[1]} features, {args.rounds} trees of depth "
          f"{args.depth}, {args.threads} threads, median of {args.repeats}", flush=True)
    xb = xgb.train({"objective": "binary:logistic", "max_depth": args.depth,
                    "tree_method": "hist", "nthread": args.threads, "seed": 0},
                   xgb.DMatrix(Xtr, label=ytr, nthread=args.threads), args.rounds)
    imported = bonsai.Booster.from_xgboost(xb)
    imported.n_threads = args.threads
    own = bonsai.train({"objective": "binary", "max_depth": args.depth,
                        "n_threads": args.threads}, bonsai.Dataset(Xtr, label=ytr),
                       num_boost_round=args.rounds)
    lb = lgb.train({"objective": "binary", "max_depth": args.depth, "num_leaves": 255,
                    "num_threads": args.threads, "verbose": -1},
                   lgb.Dataset(Xtr, label=ytr), args.rounds)
    dm = xgb.DMatrix(Xs, nthread=args.threads)
    jobs = {
        "bonsai (imported XGBoost trees)": lambda: imported.predict(Xs, pred_contribs=True),
        "xgboost pred_contribs": lambda: xb.predict(dm, pred_contribs=True),
        "bonsai (own model)": lambda: own.predict(Xs, pred_contribs=True),
        "lightgbm pred_contrib": lambda: lb.predict(Xs, pred_contrib=True,
                                                    num_threads=args.threads),
    }
    leaves = {
        "bonsai (imported XGBoost trees)": np.mean([t.n_leaves for t in imported.trees]),
        "xgboost pred_contribs": np.mean([t.n_leaves for t in imported.trees]),
        "bonsai (own model)": np.mean([t.n_leaves for t in own.trees]),
        "lightgbm pred_contrib": np.mean([tr["num_leaves"] for tr in
                                          lb.dump_model()["tree_info"]]),
    }
    imported.predict(Xs[:1000], pred_contribs=True)     # warm-up: compile, threads
    own.predict(Xs[:1000], pred_contribs=True)
    times = {name: [] for name in jobs}
    outs = {}
    for _ in range(args.repeats):     # interleaved
        for name, fn in jobs.items():
            t = time.perf_counter()
            outs[name] = fn()
            times[name].append(time.perf_counter() - t)
    diff = float(np.abs(outs["bonsai (imported XGBoost trees)"]
                        - outs["xgboost pred_contribs"]).max())
    rows = []
    for name in jobs:
        med = float(np.median(times[name]))
        rows.append([name, f"{leaves[name]:.0f}", C.fmt(med),
                     " / ".join(f"{t:.2f}" for t in times[name])])
    C.print_table(["explainer", "leaves/tree", "median s", "runs s"], rows)
    ratio = np.median(times["bonsai (imported XGBoost trees)"]) / np.median(
        times["xgboost pred_contribs"])
    print(f">> same trees: bonsai / XGBoost time {ratio:.2f}x (target <= 1.0); "
          f"max |difference| {diff:.2e} (target <= 1e-5)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
