"""Evaluation metrics for bonsai.

This module owns the metrics reported on validation sets and used for early
stopping. Every metric is a :class:`Metric` ``(name, fn, higher_is_better)``
where ``fn(y, pred, w) -> float`` takes

* ``y`` : ``(n,)`` labels, float32 or float64 (classes encoded as 0..K-1; widened to
  float64 exactly),
* ``pred`` : the *transformed* prediction -- means ``(n,)`` for regression,
  probabilities of class 1 ``(n,)`` for binary, class probabilities ``(n, K)``
  for multiclass,
* ``w`` : float64 ``(n,)`` sample weights or None,

and returns the weighted average loss (or score, for ``auc``).  For the multi-output
objectives (``bonsai.multi_objectives``) ``y`` and ``pred`` are both ``(n, K)`` (rows on
axis 0, as multiclass probabilities are): the pointwise metrics (``rmse``, ``mae``,
``logloss``, ``error``, ``huber``, ``quantile``, ``poisson``, ``gamma``, ``tweedie``)
average over all ``n * K`` entries, each entry weighted by its row's weight (``rmse``
is the root of that mean), and ``auc`` is the micro average (the AUC of the flattened
entries); ``mlogloss`` / ``merror`` take a 1-D class label only. Definitions
follow LightGBM's metrics of the same meaning (e.g. ``poisson``, ``gamma`` and
``tweedie`` are the negative log-likelihoods LightGBM reports, without
label-only constant terms). All reductions are plain numpy sums over float64
arrays, so results are deterministic.
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

import numpy as np

from .objectives import _float_param  # one reader for float parameters
from .rank_metrics import RANK_METRICS, parse_rank_metric, rank_metric_fn

__all__ = ["METRICS", "RANK_METRICS", "Metric", "get_metric"]

METRICS = (
    "rmse",
    "mae",
    "huber",
    "quantile",
    "poisson",
    "gamma",
    "tweedie",
    "logloss",
    "error",
    "auc",
    "mlogloss",
    "merror",
)   # and the ranking metrics: RANK_METRICS ("ndcg", "map"), each also as name@k

_PROB_EPS = 1e-15  # probability clip for log losses
_MEAN_EPS = 1e-10  # floor for predicted means in the count / positive NLLs


class Metric(NamedTuple):
    """An evaluation metric.

    Attributes
    ----------
    name : str
        Canonical metric name (one of :data:`METRICS`).
    fn : callable
        ``fn(y, pred, w) -> float``; see the module docstring for shapes.
    higher_is_better : bool
        True for ``auc`` and the ranking metrics.
    needs_group : bool
        True for the ranking metrics (``bonsai.rank_metrics``), whose ``fn`` takes the
        evaluation set's query boundaries too: ``fn(y, pred, w, group_ptr)``.
    """

    name: str
    fn: Callable[..., float]
    higher_is_better: bool
    needs_group: bool = False


def _average(loss, w):
    """Weighted mean of a per-row float64 loss ``(n,)``, or of a per-entry loss
    ``(n, K)`` (every entry of row i weighted by ``w[i]``)."""
    if w is None:
        return float(np.sum(loss) / loss.size) if loss.size else 0.0
    w = np.asarray(w, dtype=np.float64)
    sw = float(np.sum(w))
    if loss.ndim == 2:
        sw *= loss.shape[1]
        w = w[:, None]
    return float(np.sum(loss * w) / sw) if sw != 0 else 0.0


def _prep(y, pred):
    y, pred = np.asarray(y, dtype=np.float64), np.asarray(pred, dtype=np.float64)
    if y.ndim == 2 and pred.shape != y.shape:
        raise ValueError(f"a 2-D label of shape {y.shape} needs predictions of the same "
                         f"shape; got pred.shape={pred.shape}")
    return y, pred


# -------------------------------------------------------------- regression
def _rmse(y, pred, w):
    y, pred = _prep(y, pred)
    return math.sqrt(_average((pred - y) ** 2, w))


def _mae(y, pred, w):
    y, pred = _prep(y, pred)
    return _average(np.abs(pred - y), w)


def _make_huber(delta):
    def huber(y, pred, w):
        y, pred = _prep(y, pred)
        a = np.abs(pred - y)
        loss = np.where(a <= delta, 0.5 * a * a, delta * (a - 0.5 * delta))
        return _average(loss, w)

    return huber


def _make_quantile(alpha):
    def quantile(y, pred, w):
        y, pred = _prep(y, pred)
        d = y - pred
        return _average(np.where(d < 0, (alpha - 1.0) * d, alpha * d), w)

    return quantile


def _poisson(y, pred, w):
    """Poisson NLL without the log(y!) term: ``mu - y * log(mu)``."""
    y, pred = _prep(y, pred)
    mu = np.maximum(pred, _MEAN_EPS)
    return _average(mu - y * np.log(mu), w)


def _gamma(y, pred, w):
    """Gamma NLL (unit shape) without label-only terms: ``y / mu + log(mu)``."""
    y, pred = _prep(y, pred)
    mu = np.maximum(pred, _MEAN_EPS)
    return _average(y / mu + np.log(mu), w)


def _make_tweedie(rho):
    def tweedie(y, pred, w):
        """Tweedie NLL: ``-y mu^(1-rho)/(1-rho) + mu^(2-rho)/(2-rho)``."""
        y, pred = _prep(y, pred)
        log_mu = np.log(np.maximum(pred, _MEAN_EPS))
        a = y * np.exp((1.0 - rho) * log_mu) / (1.0 - rho)
        b = np.exp((2.0 - rho) * log_mu) / (2.0 - rho)
        return _average(b - a, w)

    return tweedie


# ------------------------------------------------------------------ binary
def _logloss(y, pred, w):
    y, pred = _prep(y, pred)
    p = np.clip(pred, _PROB_EPS, 1.0 - _PROB_EPS)
    return _average(-(y * np.log(p) + (1.0 - y) * np.log1p(-p)), w)


def _error(y, pred, w):
    """Misclassification rate; predicted class is ``pred > 0.5``."""
    y, pred = _prep(y, pred)
    return _average(((pred > 0.5) != (y > 0.5)).astype(np.float64), w)


def _auc(y, pred, w):
    """Weighted ROC AUC with ties scored 1/2 (as sklearn's roc_auc_score).

    Rows with ``y > 0`` are positives. Returns 1.0 when only one class has
    positive weight (as LightGBM does), so early stopping never sees NaN.
    """
    y, pred = _prep(y, pred)
    if y.ndim == 2:     # multi-label: the micro average over every (row, output) entry
        if w is not None:
            w = np.repeat(np.asarray(w, dtype=np.float64), y.shape[1])
        y, pred = y.reshape(-1), pred.reshape(-1)
    if y.shape[0] == 0:
        return 1.0
    order = np.argsort(-pred, kind="stable")  # descending scores
    ps = pred[order]
    pos = (y[order] > 0).astype(np.float64)
    ws = np.ones_like(ps) if w is None else np.asarray(w, dtype=np.float64)[order]
    tp = np.cumsum(ws * pos)
    fp = np.cumsum(ws * (1.0 - pos))
    ends = np.concatenate((np.flatnonzero(ps[1:] != ps[:-1]), [ps.shape[0] - 1]))
    tp = np.concatenate(([0.0], tp[ends]))
    fp = np.concatenate(([0.0], fp[ends]))
    n_pos, n_neg = tp[-1], fp[-1]
    if n_pos <= 0 or n_neg <= 0:
        return 1.0
    area = np.sum((fp[1:] - fp[:-1]) * (tp[1:] + tp[:-1])) * 0.5
    return float(area / (n_pos * n_neg))


# -------------------------------------------------------------- multiclass
def _true_class_prob(y, pred):
    y, pred = np.asarray(y, dtype=np.float64), np.asarray(pred, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(f"multiclass metrics (mlogloss, merror) need a 1-D class label; got "
                         f"a label of shape {y.shape} (for a 2-D label use logloss / error "
                         "or rmse / mae)")
    if pred.ndim != 2 or pred.shape[0] != y.shape[0]:
        raise ValueError(f"multiclass metrics need pred of shape (n, K) with n={y.shape[0]}; "
                         f"got pred.shape={pred.shape}")
    return pred, pred[np.arange(y.shape[0]), y.astype(np.int64)]


def _mlogloss(y, pred, w):
    _, p = _true_class_prob(y, pred)
    return _average(-np.log(np.maximum(p, _PROB_EPS)), w)


def _merror(y, pred, w):
    """Multiclass error: wrong unless the true class has strictly the largest
    probability (ties count as errors, as LightGBM's ``multi_error``)."""
    pred, p = _true_class_prob(y, pred)
    wrong = np.sum(pred >= p[:, None], axis=1) > 1
    return _average(wrong.astype(np.float64), w)



def get_metric(name, params=None):
    """Build a :class:`Metric` by name.

    Parameters
    ----------
    name : str
        One of :data:`METRICS` (``ndcg@k`` / ``map@k`` with an integer k >= 1, or
        ``ndcg`` / ``map`` for the whole list).
    params : dict, optional
        Read keys: ``huber_delta`` (1.0) for ``huber``, ``alpha`` (0.9) for
        ``quantile``, ``tweedie_variance_power`` (1.5) for ``tweedie``,
        ``label_gain`` (2**i - 1) for ``ndcg``.

    Returns
    -------
    Metric
    """
    params = {} if params is None else params
    if not isinstance(name, str):
        raise TypeError(f"eval_metric must be a string; got eval_metric={name!r}")
    simple = {
        "rmse": _rmse, "mae": _mae, "poisson": _poisson, "gamma": _gamma,
        "logloss": _logloss, "error": _error, "mlogloss": _mlogloss, "merror": _merror,
    }
    if name in simple:
        return Metric(name, simple[name], False)
    if name == "auc":
        return Metric(name, _auc, True)
    rank = parse_rank_metric(name)
    if rank is not None:
        return Metric(name, rank_metric_fn(rank[0], rank[1], params), True, True)
    if name == "huber":
        return Metric(name, _make_huber(_float_param(params, "huber_delta", 1.0, 0.0, math.inf)),
                      False)
    if name == "quantile":
        return Metric(name, _make_quantile(_float_param(params, "alpha", 0.9, 0.0, 1.0)), False)
    if name == "tweedie":
        rho = _float_param(params, "tweedie_variance_power", 1.5, 1.0, 2.0)
        return Metric(name, _make_tweedie(rho), False)
    raise ValueError(f"eval_metric must be one of {METRICS}, or {' / '.join(RANK_METRICS)} "
                     f"with an optional @k (e.g. 'ndcg@5'); got eval_metric={name!r}")
