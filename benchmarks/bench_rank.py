"""Learning-to-rank training time: bonsai ``lambdarank`` against LightGBM's, one run.

A generated set of ``--rows`` rows in ``--queries`` queries (1 + a multinomial
share of the other rows, each query's rows contiguous), ``--features`` features and graded
relevance 0..4 from a noisy nonlinear score.  Both libraries train ``--rounds`` rounds
of leaf-wise trees with the same parameters (31 leaves, learning rate 0.1, 20 rows per
leaf, 255 bins, no L2, truncation level 30, ``--threads`` threads), alternating, and
each fit is timed ``--repeat`` times; the medians of wall time and of process CPU time
(user + sys) are printed with the bonsai / LightGBM ratios, and the NDCG@10 of each
model on a held-out tenth of the queries.  Dataset construction (binning) is timed
apart from training.  bonsai's kernels are compiled by a small warm-up fit first.

    PYTHONPATH=. python benchmarks/bench_rank.py               # 1M rows, 10k queries
    PYTHONPATH=. python benchmarks/bench_rank.py --rows 100000 --queries 1000
"""
import argparse
import statistics
import time

import numpy as np


def make_data(n_rows, n_queries, n_features, seed=7):
    rng = np.random.default_rng(seed)
    if n_queries > n_rows:
        raise ValueError("more queries than rows")
    sizes = 1 + rng.multinomial(n_rows - n_queries, np.full(n_queries, 1.0 / n_queries))
    X = rng.standard_normal((n_rows, n_features)).astype(np.float32)
    q_shift = np.repeat(rng.standard_normal(n_queries), sizes)   # a query-level offset
    score = (X[:, 0] + 0.7 * X[:, 1] * X[:, 2] + np.sin(2 * X[:, 3]) + 0.5 * X[:, 4] ** 2
             + q_shift + 0.8 * rng.standard_normal(n_rows))
    y = np.digitize(score, np.quantile(score, [0.5, 0.75, 0.9, 0.97])).astype(np.float32)
    return X, y, sizes


def split_queries(X, y, sizes, frac=0.1):
    nq = sizes.shape[0]
    n_te = max(1, int(nq * frac))
    cut = int(sizes[:nq - n_te].sum())
    return (X[:cut], y[:cut], sizes[:nq - n_te]), (X[cut:], y[cut:], sizes[nq - n_te:])


def timed(fn):
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - w0, time.process_time() - c0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)

    import bonsai
    import lightgbm as lgb
    from bonsai.metrics import get_metric

    X, y, sizes = make_data(a.rows, a.queries, a.features)
    (Xtr, ytr, gtr), (Xte, yte, gte) = split_queries(X, y, sizes)
    ptr_te = np.concatenate(([0], np.cumsum(gte)))
    print(f"data: {Xtr.shape[0]} train rows in {gtr.shape[0]} queries, {Xte.shape[0]} test "
          f"rows, {a.features} features; {a.rounds} rounds, {a.threads} threads")

    bp = dict(objective="lambdarank", grow_policy="leafwise", max_leaves=31,
              learning_rate=0.1, min_child_samples=20, reg_lambda=0.0, max_bin=255,
              n_estimators=a.rounds, n_threads=a.threads, lambdarank_truncation_level=30)
    lp = dict(objective="lambdarank", num_leaves=31, learning_rate=0.1, min_data_in_leaf=20,
              lambda_l2=0.0, max_bin=255, num_threads=a.threads, verbose=-1,
              lambdarank_truncation_level=30)

    # warm-up: compile bonsai's kernels (parallel and serial twins) outside the timing
    Xw, yw, gw = make_data(20_000, 200, a.features, seed=1)
    bonsai.train(dict(bp, n_estimators=2), bonsai.Dataset(Xw, label=yw, group=gw))

    ds_b, bw, bc = timed(lambda: bonsai.Dataset(Xtr, label=ytr, group=gtr))
    ds_l, lw, lc = timed(lambda: lgb.Dataset(Xtr, ytr, group=gtr, params={"max_bin": 255,
                                             "verbose": -1}).construct())
    print(f"dataset: bonsai {bw:.2f} s wall / {bc:.2f} s cpu, lightgbm {lw:.2f} s wall / "
          f"{lc:.2f} s cpu")

    res = {"bonsai": [], "lightgbm": []}
    models = {}
    for r in range(a.repeat):
        models["bonsai"], w, c = timed(lambda: bonsai.train(bp, ds_b))
        res["bonsai"].append((w, c))
        models["lightgbm"], w, c = timed(lambda: lgb.train(lp, ds_l, a.rounds))
        res["lightgbm"].append((w, c))
        print(f"  run {r}: bonsai {res['bonsai'][-1][0]:.2f} s, lightgbm "
              f"{res['lightgbm'][-1][0]:.2f} s", flush=True)
    med = {k: (statistics.median(v[0] for v in vs), statistics.median(v[1] for v in vs))
           for k, vs in res.items()}
    ndcg = get_metric("ndcg@10")
    for k in ("bonsai", "lightgbm"):
        q = ndcg.fn(yte, models[k].predict(Xte), None, ptr_te)
        print(f"{k:9s} train median {med[k][0]:.2f} s wall, {med[k][1]:.2f} s cpu "
              f"(user+sys); test NDCG@10 {q:.4f}")
    print(f"ratio bonsai / lightgbm: wall {med['bonsai'][0] / med['lightgbm'][0]:.3f}, "
          f"cpu {med['bonsai'][1] / med['lightgbm'][1]:.3f}")


if __name__ == "__main__":
    main()
