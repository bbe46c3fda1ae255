"""Categorical benchmark (the ``cat`` shape described below): LightGBM, XGBoost and
CatBoost with their native categorical handling against bonsai, side by side in one
run.

    python benchmarks/bench_cat.py --repeats 3 --threads 2 \
        --libs bonsai-native,bonsai-ordered,lightgbm,xgboost,catboost [--rows N] [--rounds N]

Data (``cat_like``): 500k rows (the last 10% are the test set), 10 numeric features
and 5 categorical ones with 8 / 100 / 1,000 / 10,000 / 50,000 categories (Zipf-like
frequencies, so the wide ones are mostly rare categories).  The label is a logistic
draw of a latent that sums a numeric part, one random effect per category of each
categorical column and an effect per (col 0, col 1) category pair.  Categories are
integer codes in shuffled order (their order carries no signal).

Every library gets the same rows, 200 rounds, learning rate 0.1, depth 8 (LightGBM:
255 leaves capped at depth 8; CatBoost: its oblivious trees), 255 bins, 2 threads.
``bonsai-native`` and ``bonsai-ordered`` train depth-wise bonsai models on the
DataFrame's category columns with ``cat_encoding="native"`` (category-set splits) and
``"ordered"`` (ordered target statistics, frequencies and pair combinations, computed
inside ``train``, so they count as fit time).  ``bonsai-ordered-encoder`` is the
standalone ``bonsai.preprocessing.OrderedTargetEncoder`` (4 permutations) before a
plain model; its encoding time counts as dataset construction.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import _common as C

CARDINALITIES = (8, 100, 1_000, 10_000, 50_000)
N_NUMERIC = 10
ROUNDS, DEPTH, LR, MAX_BIN = 200, 8, 0.1, 255
DATA_VERSION = 1


def cat_like(n: int = 500_000, seed: int = 20241130):
    """(X_num float32 (n, 10), X_cat int32 (n, 5), y float32 (n,)); deterministic."""
    rng = np.random.default_rng([seed, 0])
    effects = [rng.normal(0.0, s, c) for c, s in zip(CARDINALITIES, (0.8, 0.8, 0.7, 0.6, 0.6))]
    probs = []
    for c in CARDINALITIES:
        p = 1.0 / np.arange(1, c + 1) ** 0.9
        probs.append(p / p.sum())
    relabel = [rng.permutation(c) for c in CARDINALITIES]   # codes carry no order
    pair = rng.normal(0.0, 0.6, (CARDINALITIES[0], CARDINALITIES[1]))
    w = rng.normal(0.0, 0.5, N_NUMERIC)
    X_num = np.empty((n, N_NUMERIC), np.float32)
    X_cat = np.empty((n, len(CARDINALITIES)), np.int32)
    y = np.empty(n, np.float32)
    for a, b, r in C._seeded_chunks(n, seed):
        m = b - a
        xn = r.normal(size=(m, N_NUMERIC))
        latent = xn @ w + 0.5 * np.sin(2 * xn[:, 0]) * xn[:, 1] + 0.3 * (xn[:, 2] > 0.5)
        ks = [r.choice(c, size=m, p=probs[j]) for j, c in enumerate(CARDINALITIES)]
        for j, k in enumerate(ks):
            latent += effects[j][k]
            X_cat[a:b, j] = relabel[j][k]
        latent += pair[ks[0], ks[1]]             # the (col 0, col 1) pair effect
        latent -= np.median(latent)
        X_num[a:b] = xn
        y[a:b] = (latent + r.logistic(size=m) > 0)
    return X_num, X_cat, y


def load(rows):
    """Cached train/test arrays: (Xn_tr, Xc_tr, y_tr, Xn_te, Xc_te, y_te)."""
    path = C.CACHE_DIR / f"cat_n{rows}_v{DATA_VERSION}"
    names = ("Xn_train", "Xc_train", "y_train", "Xn_test", "Xc_test", "y_test")
    if not all((path / f"{k}.npy").exists() for k in names):
        path.mkdir(parents=True, exist_ok=True)
        Xn, Xc, y = cat_like(rows)
        cut = int(round(rows * (1.0 - C.TEST_FRACTION)))
        for k, arr in zip(names, (Xn[:cut], Xc[:cut], y[:cut], Xn[cut:], Xc[cut:], y[cut:])):
            tmp = path / f".{k}.{os.getpid()}.npy"
            np.save(tmp, np.ascontiguousarray(arr))
            os.replace(tmp, path / f"{k}.npy")
    return tuple(np.load(path / f"{k}.npy") for k in names)


def _frame(Xn, Xc, categorical=True):
    import pandas as pd
    df = pd.DataFrame(Xn, columns=[f"x{i}" for i in range(Xn.shape[1])])
    for j, c in enumerate(CARDINALITIES):
        col = Xc[:, j]
        df[f"c{j}"] = pd.Categorical(col, categories=np.arange(c)) if categorical else col
    return df


# ----------------------------------------------------------------- library adapters
# (Xn, Xc, y, threads, rounds) -> (build_s, fit_s, predict(Xn, Xc) -> P(y=1))
def run_lightgbm(Xn, Xc, y, threads, rounds):
    import lightgbm as lgb
    t0 = time.perf_counter()
    ds = lgb.Dataset(_frame(Xn, Xc), label=y, params={"max_bin": MAX_BIN, "verbose": -1},
                     free_raw_data=False).construct()
    t1 = time.perf_counter()
    params = {"objective": "binary", "learning_rate": LR, "num_leaves": 255,
              "max_depth": DEPTH, "num_threads": threads, "seed": 0, "verbose": -1}
    b = lgb.train(params, ds, num_boost_round=rounds)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, lambda Xn_, Xc_: b.predict(_frame(Xn_, Xc_), num_threads=threads)


def run_xgboost(Xn, Xc, y, threads, rounds):
    import xgboost as xgb
    t0 = time.perf_counter()
    d = xgb.QuantileDMatrix(_frame(Xn, Xc), label=y, max_bin=MAX_BIN + 1,
                            enable_categorical=True, nthread=threads)
    t1 = time.perf_counter()
    params = {"objective": "binary:logistic", "tree_method": "hist", "eta": LR,
              "max_depth": DEPTH, "max_bin": MAX_BIN + 1, "nthread": threads, "seed": 0,
              "verbosity": 0}
    b = xgb.train(params, d, num_boost_round=rounds)
    t2 = time.perf_counter()

    def predict(Xn_, Xc_):
        return b.predict(xgb.DMatrix(_frame(Xn_, Xc_), enable_categorical=True, nthread=threads))
    return t1 - t0, t2 - t1, predict


def run_catboost(Xn, Xc, y, threads, rounds):
    import catboost as cb
    cat_idx = list(range(N_NUMERIC, N_NUMERIC + len(CARDINALITIES)))
    t0 = time.perf_counter()
    pool = cb.Pool(_frame(Xn, Xc, categorical=False), label=y, cat_features=cat_idx)
    t1 = time.perf_counter()
    model = cb.CatBoost({"loss_function": "Logloss", "iterations": rounds, "learning_rate": LR,
                         "depth": DEPTH, "border_count": MAX_BIN - 1, "thread_count": threads,
                         "random_seed": 0, "verbose": False,
                         "allow_writing_files": False}).fit(pool)
    t2 = time.perf_counter()

    def predict(Xn_, Xc_):
        p = cb.Pool(_frame(Xn_, Xc_, categorical=False), cat_features=cat_idx)
        return model.predict(p, prediction_type="Probability", thread_count=threads)[:, 1]
    return t1 - t0, t2 - t1, predict


def run_bonsai_encoder(Xn, Xc, y, threads, rounds):
    import bonsai
    from bonsai.preprocessing import OrderedTargetEncoder
    t0 = time.perf_counter()
    enc = OrderedTargetEncoder(n_permutations=4, random_state=0)
    X = np.hstack([Xn, enc.fit_transform(Xc.astype(np.float64), y).astype(np.float32)])
    ds = bonsai.Dataset(X, label=y, max_bin=MAX_BIN)
    t1 = time.perf_counter()
    b = bonsai.train({"objective": "binary", "learning_rate": LR, "max_depth": DEPTH,
                      "n_threads": threads, "random_state": 0}, ds, num_boost_round=rounds)
    t2 = time.perf_counter()

    def predict(Xn_, Xc_):
        Xt = np.hstack([Xn_, enc.transform(Xc_.astype(np.float64)).astype(np.float32)])
        return b.predict(Xt)
    return t1 - t0, t2 - t1, predict


def _run_bonsai(Xn, Xc, y, threads, rounds, **extra):
    import bonsai
    t0 = time.perf_counter()
    ds = bonsai.Dataset(_frame(Xn, Xc), label=y, max_bin=MAX_BIN)
    t1 = time.perf_counter()
    b = bonsai.train({"objective": "binary", "learning_rate": LR, "max_depth": DEPTH,
                      "n_threads": threads, "random_state": 0, **extra}, ds,
                     num_boost_round=rounds)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, lambda Xn_, Xc_: b.predict(_frame(Xn_, Xc_))


def run_bonsai_native(Xn, Xc, y, threads, rounds):
    return _run_bonsai(Xn, Xc, y, threads, rounds, cat_encoding="native")


def run_bonsai_ordered(Xn, Xc, y, threads, rounds):
    return _run_bonsai(Xn, Xc, y, threads, rounds, cat_encoding="ordered")


LIBS = {"lightgbm": run_lightgbm, "xgboost": run_xgboost, "catboost": run_catboost,
        "bonsai-native": run_bonsai_native, "bonsai-ordered": run_bonsai_ordered,
        "bonsai-ordered-encoder": run_bonsai_encoder}


def worker(lib, rows, threads, rounds):
    from sklearn.metrics import roc_auc_score
    Xn, Xc, y, Xn_te, Xc_te, y_te = load(rows)
    base = C.peak_rss_mib()
    C.reset_peak_rss()
    build_s, fit_s, predict = LIBS[lib](Xn, Xc, y, threads, rounds)
    peak = C.peak_rss_mib() - base
    auc = float(roc_auc_score(y_te, np.asarray(predict(Xn_te, Xc_te), np.float64)))
    C.emit_result(dict(lib=lib, build_s=build_s, fit_s=fit_s, total_s=build_s + fit_s,
                       peak_mib=peak, auc=auc))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--worker")
    ap.add_argument("--libs", default="bonsai-native,bonsai-ordered,lightgbm,xgboost,catboost")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=ROUNDS)
    ap.add_argument("--timeout", type=float, default=1800)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.rows, args.threads, args.rounds)
        return
    libs = args.libs.split(",")
    t0 = time.perf_counter()
    load(args.rows)
    print(f"bench_cat: {args.rows:,} rows ({int(round(args.rows * (1 - C.TEST_FRACTION))):,} "
          f"train), {N_NUMERIC} numeric + categorical {CARDINALITIES}, {args.rounds} rounds, "
          f"depth {DEPTH}, lr {LR}, threads {args.threads} (data {time.perf_counter() - t0:.1f}s)")
    results = {lib: [] for lib in libs}
    for rep in range(args.repeats):
        for lib in libs:
            argv = [os.path.abspath(__file__), "--worker", lib, "--rows", str(args.rows),
                    "--threads", str(args.threads), "--rounds", str(args.rounds)]
            res = C.run_child(argv, C.child_env(args.threads), args.timeout)
            results[lib].append(res)
            line = (f"ERROR {res['error']}" if "error" in res else
                    f"total {res['total_s']:7.2f}s (build {res['build_s']:.2f} + fit "
                    f"{res['fit_s']:.2f})  peak {res['peak_mib']:6.0f} MiB  auc {res['auc']:.4f}")
            print(f"  [rep {rep + 1}/{args.repeats}] {lib:<24} {line}{C.busy_note(res)}",
                  flush=True)
    rows = []
    med = {}
    for lib in libs:
        ok = [r for r in results[lib] if "error" not in r]
        if not ok:
            continue
        med[lib] = {k: C.median_or_none([r[k] for r in ok])
                    for k in ("build_s", "fit_s", "total_s", "peak_mib", "auc")}
        m = med[lib]
        rows.append([lib, f"{len(ok)}/{len(results[lib])}", C.fmt(m["build_s"]),
                     C.fmt(m["fit_s"]), C.fmt(m["total_s"]), C.fmt(m["peak_mib"], ".0f"),
                     C.fmt(m["auc"], ".4f")])
    print(f"\n--- cat: medians of {args.repeats} interleaved run(s) ---")
    C.print_table(["library", "ok", "build s", "fit s", "total s", "peak MiB", "auc"], rows)
    for lib in (x for x in libs if x.startswith("bonsai") and x in med):
        parts = []
        if "lightgbm" in med:
            parts.append(f"time {med[lib]['total_s'] / med['lightgbm']['total_s']:.2f}x "
                         "LightGBM's (target <= 1.2x)")
        if "catboost" in med:
            parts.append(f"auc {med[lib]['auc'] - med['catboost']['auc']:+.4f} vs CatBoost "
                         "(target >= -0.003)")
        print(f">> {lib}: " + ", ".join(parts))


if __name__ == "__main__":
    sys.exit(main())
