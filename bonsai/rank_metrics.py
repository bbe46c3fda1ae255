"""Ranking metrics: ``ndcg@k`` and ``map@k`` (``ndcg`` / ``map``: the whole list).

Both are means over queries (``group_ptr``, ``bonsai._groups``) of a per-query value,
each query's documents ranked by the prediction (stable: tied scores keep row order),
as LightGBM defines them:

* NDCG@k: DCG@k of that order (gain ``label_gain[label]``, discount
  ``1 / log2(2 + rank)``) over the DCG@k of the ideal order; a query with no relevant
  document (ideal DCG 0) counts as 1.  Labels must be integers in
  ``[0, len(label_gain))``.
* MAP@k: the precision at each relevant document (label > 0.5) among the top k,
  summed and divided by ``min(k, relevant documents)``; a query with no relevant
  document counts as 1.

With sample weights a query weighs the mean of its documents' weights.  The per-query
values come from a ``prange`` over queries and are summed in query order, so the
result does not depend on the thread count.  Higher is better.
"""
import numpy as np

from . import _rank_kernels as rk
from .rank_objectives import check_relevance, discounts, label_gain_array

__all__ = ["RANK_METRICS", "parse_rank_metric", "rank_metric_fn"]

RANK_METRICS = ("ndcg", "map")
_ALL = 1 << 62     # "no truncation"


def parse_rank_metric(name):
    """(kind, k) for ``"ndcg"``, ``"ndcg@5"``, ``"map@3"`` ...; None if not a ranking
    metric; ValueError for a bad ``@k``."""
    base, at, k = name.partition("@")
    if base not in RANK_METRICS:
        return None
    if not at:
        return base, _ALL
    if not k.isdigit() or int(k) < 1:
        raise ValueError(f"eval_metric={name!r}: the cut-off after '@' must be an integer "
                         f">= 1 (e.g. '{base}@5')")
    return base, int(k)


def _query_weights(group_ptr, w):
    if w is None:
        return None
    w = np.asarray(w, dtype=np.float64)
    sizes = np.diff(group_ptr)
    return np.add.reduceat(w, group_ptr[:-1]) / sizes if sizes.shape[0] else w[:0]


def _mean(values, qw):
    if values.shape[0] == 0:
        return 1.0
    if qw is None:
        return float(np.sum(values) / values.shape[0])
    tot = float(np.sum(qw))
    return float(np.sum(values * qw) / tot) if tot > 0 else 1.0


def rank_metric_fn(kind, k, params):
    """``fn(y, pred, w, group_ptr) -> float`` of the metric (kind, k)."""
    gain = label_gain_array(params)

    def ndcg(y, pred, w, group_ptr):
        check_relevance(f"{kind} metric", y, gain.shape[0])
        lab = np.asarray(y, dtype=np.float64).astype(np.int64)
        s = np.ascontiguousarray(pred, dtype=np.float64)
        sizes = np.diff(group_ptr)
        disc = discounts(min(k, int(sizes.max())) if sizes.shape[0] else 1)
        out = np.empty(group_ptr.shape[0] - 1)
        rk.ndcg_per_query(group_ptr, lab, s, min(k, disc.shape[0]), gain, disc, out)
        return _mean(out, _query_weights(group_ptr, w))

    def map_(y, pred, w, group_ptr):
        lab = (np.asarray(y, dtype=np.float64) > 0.5).astype(np.int64)
        s = np.ascontiguousarray(pred, dtype=np.float64)
        out = np.empty(group_ptr.shape[0] - 1)
        rk.map_per_query(group_ptr, lab, s, k, out)
        return _mean(out, _query_weights(group_ptr, w))

    return ndcg if kind == "ndcg" else map_
