"""The libraries of ``bench_tasks.py``: one fit function per library, each mapping the
benchmark's shared settings onto that library's own parameter names, and the metrics.

Every fit function has the signature ``fit(lib, kind, data, tree, rounds, threads)``:

* ``lib``: the row name (``bonsai-vector`` / ``bonsai-per-output`` and
  ``xgboost-vector`` / ``xgboost-per-output`` pick the multi-output strategy);
* ``kind``: ``"multireg"`` (y of shape (n, K)), ``"multiclass"``, ``"rank"`` (query
  sizes in ``data.group``) or ``"binary"``;
* ``tree``: ``{"depth": d}`` (depth-wise; LightGBM gets ``2**d`` leaves and depth ``d``)
  or ``{"leaves": L}`` (leaf-wise, no depth limit);

and returns ``(build_s, train_s, predict, params)``: Dataset construction and training
seconds, a function of the test matrix giving predictions ((n,) scores / P(class 1),
(n, K) outputs or class probabilities), and the exact parameter dict it trained with.
A library without the task raises ``Unavailable``.

Only standard library + numpy at import time; each library is imported inside its
function, so a child process holds only its own library.
"""
from __future__ import annotations

import time

import numpy as np

#: settings every library is mapped onto (``bench_fit.COMMON``'s values)
COMMON = dict(learning_rate=0.1, max_bin=255, min_child_samples=20, min_child_weight=1e-3,
              reg_lambda=1.0, seed=0)
TRUNCATION = 30         # lambdarank truncation level (LightGBM's and bonsai's default)


class Unavailable(Exception):
    """The library (or this branch of bonsai) cannot run the task."""


def _vector(lib):
    return lib.endswith("-vector")


# --------------------------------------------------------------------------- bonsai
def fit_bonsai(lib, kind, d, tree, rounds, threads):
    import bonsai
    p = {"learning_rate": COMMON["learning_rate"], "max_bin": COMMON["max_bin"],
         "min_child_samples": COMMON["min_child_samples"],
         "min_child_weight": COMMON["min_child_weight"], "reg_lambda": COMMON["reg_lambda"],
         "n_threads": threads, "random_state": COMMON["seed"]}
    if "depth" in tree:
        p.update(grow_policy="depthwise", max_depth=tree["depth"])
    else:
        p.update(grow_policy="leafwise", max_leaves=tree["leaves"], max_depth=0)
    if kind in ("multireg", "multiclass"):
        p["objective"] = "multi_squared_error" if kind == "multireg" else "multiclass"
        if kind == "multiclass":
            p["num_class"] = d.n_out
        p["multi_strategy"] = "multi_output_tree" if _vector(lib) else "one_output_per_tree"
    elif kind == "rank":
        p.update(objective="lambdarank", lambdarank_truncation_level=TRUNCATION)
    else:
        p["objective"] = "binary"
    try:
        t0 = time.perf_counter()
        ds = bonsai.Dataset(d.X, label=d.y, group=d.group, max_bin=COMMON["max_bin"])
        t1 = time.perf_counter()
        booster = bonsai.train(p, ds, num_boost_round=rounds)
        t2 = time.perf_counter()
    except (ValueError, TypeError, NotImplementedError) as e:
        raise Unavailable(f"{type(e).__name__}: {e}") from e
    if _vector(lib) and booster.num_trees() != booster.num_boosted_rounds():
        # never report one-tree-per-output numbers under the vector-leaf name
        raise Unavailable(f"multi_strategy='multi_output_tree' was accepted but the model "
                          f"has {booster.num_trees()} trees for "
                          f"{booster.num_boosted_rounds()} rounds (no vector leaves here)")
    return t1 - t0, t2 - t1, booster.predict, p


# ------------------------------------------------------------------------- LightGBM
def fit_lightgbm(lib, kind, d, tree, rounds, threads):
    import lightgbm as lgb
    p = {"learning_rate": COMMON["learning_rate"], "max_bin": COMMON["max_bin"],
         "min_data_in_leaf": COMMON["min_child_samples"],
         "min_sum_hessian_in_leaf": COMMON["min_child_weight"],
         "lambda_l2": COMMON["reg_lambda"], "num_threads": threads, "seed": COMMON["seed"],
         "verbose": -1}
    if "depth" in tree:
        p.update(num_leaves=2 ** tree["depth"], max_depth=tree["depth"])
    else:
        p.update(num_leaves=tree["leaves"], max_depth=-1)
    p["objective"] = {"multireg": "regression", "multiclass": "multiclass",
                      "rank": "lambdarank", "binary": "binary"}[kind]
    if kind == "multiclass":
        p["num_class"] = d.n_out
    if kind == "rank":
        p["lambdarank_truncation_level"] = TRUNCATION
    label = d.y[:, 0] if kind == "multireg" else d.y
    t0 = time.perf_counter()
    ds = lgb.Dataset(d.X, label=label, group=d.group,
                     params={"max_bin": COMMON["max_bin"], "verbose": -1,
                             "num_threads": threads}).construct()
    t1 = time.perf_counter()
    if kind != "multireg":
        booster = lgb.train(p, ds, num_boost_round=rounds)
        return t1 - t0, time.perf_counter() - t1, booster.predict, p
    # no multi-output regression in LightGBM: K single-output models on one Dataset
    boosters = []
    for k in range(d.n_out):
        ds.set_label(d.y[:, k])
        boosters.append(lgb.train(p, ds, num_boost_round=rounds))
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, lambda Xt: np.column_stack([b.predict(Xt) for b in boosters]), \
        dict(p, models=f"{d.n_out} (one per output)")


# -------------------------------------------------------------------------- XGBoost
def fit_xgboost(lib, kind, d, tree, rounds, threads):
    import xgboost as xgb
    p = {"tree_method": "hist", "eta": COMMON["learning_rate"],
         # XGBoost's max_bin counts every bin; bonsai's 255 plus its missing bin = 256
         "max_bin": COMMON["max_bin"] + 1, "min_child_weight": COMMON["min_child_weight"],
         "reg_lambda": COMMON["reg_lambda"], "nthread": threads, "seed": COMMON["seed"],
         "verbosity": 0}
    if "depth" in tree:
        p["max_depth"] = tree["depth"]
    else:
        p.update(grow_policy="lossguide", max_leaves=tree["leaves"], max_depth=0)
    if kind in ("multireg", "multiclass"):
        p["objective"] = "reg:squarederror" if kind == "multireg" else "multi:softprob"
        if kind == "multiclass":
            p["num_class"] = d.n_out
        p["multi_strategy"] = "multi_output_tree" if _vector(lib) else "one_output_per_tree"
    elif kind == "rank":
        p.update(objective="rank:ndcg", lambdarank_pair_method="topk",
                 lambdarank_num_pair_per_sample=TRUNCATION)
    else:
        p["objective"] = "binary:logistic"
    t0 = time.perf_counter()
    if kind == "binary":       # the sparse task: a DMatrix straight from the CSR
        dtrain = xgb.DMatrix(d.X, label=d.y, nthread=threads)
    else:
        dtrain = xgb.QuantileDMatrix(d.X, label=d.y, group=d.group, max_bin=p["max_bin"],
                                     nthread=threads)
    t1 = time.perf_counter()
    booster = xgb.train(p, dtrain, num_boost_round=rounds)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1, lambda Xt: booster.inplace_predict(Xt), p


# ------------------------------------------------------------------------- CatBoost
def fit_catboost(lib, kind, d, tree, rounds, threads):
    import catboost as cb
    p = {"iterations": rounds, "learning_rate": COMMON["learning_rate"],
         "border_count": COMMON["max_bin"] - 1, "l2_leaf_reg": COMMON["reg_lambda"],
         "bootstrap_type": "No", "thread_count": threads, "random_seed": COMMON["seed"],
         "verbose": False, "allow_writing_files": False,
         # symmetric (oblivious) trees, CatBoost's default: 2**depth leaves
         "depth": tree.get("depth") or int(np.log2(tree["leaves"] + 1))}
    if kind == "binary":
        raise Unavailable("not run on the sparse task (CatBoost quantizes every column)")
    p["loss_function"] = {"multireg": "MultiRMSE", "multiclass": "MultiClass",
                          "rank": "LambdaMart"}[kind]
    group_id = None if d.group is None else np.repeat(np.arange(len(d.group)), d.group)
    t0 = time.perf_counter()
    pool = cb.Pool(d.X, label=d.y, group_id=group_id)
    pool.quantize(border_count=p["border_count"])
    t1 = time.perf_counter()
    model = cb.CatBoost(p).fit(pool)
    t2 = time.perf_counter()
    ptype = "Probability" if kind == "multiclass" else "RawFormulaVal"
    return t1 - t0, t2 - t1, \
        lambda Xt: model.predict(Xt, prediction_type=ptype, thread_count=threads), p


FITS = {"bonsai": fit_bonsai, "lightgbm": fit_lightgbm, "xgboost": fit_xgboost,
        "catboost": fit_catboost}


def fit(lib, *args):
    """Dispatch on the library part of ``lib`` (``xgboost-vector`` -> XGBoost)."""
    return FITS[lib.split("-")[0]](lib, *args)


# -------------------------------------------------------------------------- metrics
def ndcg_at(y, score, group, k):
    """Mean NDCG@k over the queries (gain 2^rel - 1, discount 1 / log2(rank + 1); a
    query without a relevant document counts 1, as in LightGBM).  Documents of equal
    score keep their input order (a stable sort), for every library alike."""
    ends = np.cumsum(group)
    out = np.empty(len(group))
    disc = 1.0 / np.log2(np.arange(2, k + 2))
    for q, (a, b) in enumerate(zip(ends - group, ends)):
        rel = y[a:b].astype(np.float64)
        gain = 2.0 ** rel - 1.0
        top = gain[np.argsort(-score[a:b], kind="stable")[:k]]
        ideal = np.sort(gain)[::-1][:k]
        best = ideal @ disc[:ideal.size]
        out[q] = 1.0 if best == 0 else (top @ disc[:top.size]) / best
    return float(out.mean())


def score(kind, d, pred):
    """{metric name: value} on the test set; the first is the headline metric."""
    pred = np.asarray(pred, np.float64)
    if kind == "multireg":
        return {"rmse": float(np.sqrt(np.mean((pred.reshape(d.yt.shape) - d.yt) ** 2)))}
    if kind == "multiclass":
        proba = pred.reshape(len(d.yt), d.n_out)
        lab = d.yt.astype(np.int64)
        p_true = np.clip(proba[np.arange(len(lab)), lab] / proba.sum(axis=1), 1e-15, 1.0)
        return {"mlogloss": float(-np.mean(np.log(p_true))),
                "accuracy": float(np.mean(np.argmax(proba, axis=1) == lab))}
    if kind == "rank":
        return {f"ndcg@{k}": ndcg_at(d.yt, pred.ravel(), d.group_t, k) for k in (10, 1, 3, 5)}
    from sklearn.metrics import log_loss, roc_auc_score
    p = np.clip(pred.ravel(), 1e-15, 1 - 1e-15)
    return {"auc": float(roc_auc_score(d.yt, p)), "logloss": float(log_loss(d.yt, p))}


HIGHER_IS_BETTER = {"rmse": False, "mlogloss": False, "accuracy": True, "auc": True,
                    "logloss": False, **{f"ndcg@{k}": True for k in (1, 3, 5, 10)}}
