"""Training objectives (loss functions) for bonsai.

This module owns everything that depends on the loss being minimised:

* label validation (``check_labels``),
* the boost-from-average starting margin (``init_score``),
* first and second derivatives of the loss with respect to the raw margin
  (``grad_hess``), with sample weights multiplied in,
* the link function mapping margins to user-facing predictions (``transform``),
* leaf re-estimation for the L1 and quantile losses (``renew_leaf``).

Gradient and hessian definitions follow LightGBM's conventions (log link for
poisson / gamma / tweedie, ``poisson_max_delta_step`` for the poisson hessian,
sign-based gradients with unit hessian for L1 / quantile, the ``K / (K - 1)``
hessian factor for multiclass softmax), so models trained with the same
hyper-parameters are comparable.

Shapes and dtypes (see ``docs/interfaces.md``): labels ``y`` are ``(n,)`` float32
when they were given as float32 (``Dataset`` keeps them: no float64 copy) and float64
otherwise; every objective widens them to float64 exactly, ``_CHUNK`` rows at a time
or per call.  Weights ``w`` float64 ``(n,)`` or None; raw margins float64 ``(K, n)``;
gradients / hessians float32 ``(K, n)`` C-contiguous.  The multi-output objectives
(``multi_squared_error``, ``multilabel_binary``: ``bonsai.multi_objectives``) take ``y``
``(n, K)``; ``label_outputs`` checks a fit's label against its objective and binds K.
"""

from __future__ import annotations

import math

import numpy as np

from .multi_objectives import MULTI_OBJECTIVES, get_multi_objective
from .rank_objectives import RANK_OBJECTIVES, get_rank_objective
from ._objective_kernels import (_EPS, _binary_kernel, _expit, _neg_abs, _shift_max,
                                 _softmax_kernel, _sq_kernel, _wmean, weighted_quantile)

#: rows per pass of the compiled objectives: labels are widened to float64 and
#: exp() goes through buffers of this size, never through (n,) float64 temporaries
_CHUNK = 1 << 16


def _chunks(n):
    """``(start, stop)`` bounds of ``_CHUNK``-row passes over ``n`` rows."""
    return [(a, min(n, a + _CHUNK)) for a in range(0, n, _CHUNK)]


__all__ = ["MULTI_OBJECTIVES", "OBJECTIVES", "RANK_OBJECTIVES", "Objective", "get_objective",
           "label_outputs", "weighted_quantile"]

OBJECTIVES = ("squared_error", "absolute_error", "huber", "quantile", "poisson", "gamma",
              "tweedie", "binary", "multiclass")   # pointwise; RANK_ and MULTI_OBJECTIVES besides

_ALIASES = {
    "regression": "squared_error", "l2": "squared_error", "mse": "squared_error",
    "regression_l1": "absolute_error", "l1": "absolute_error", "mae": "absolute_error",
    "softmax": "multiclass",
}



# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------
def _check_finite(name, y):
    bad = ~np.isfinite(y)
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(
            f"objective={name!r}: label must be finite; got label={float(y[i])!r} at index {i}"
        )


def _first_bad(name, y, bad, requirement):
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(
            f"objective={name!r} requires {requirement}; got label={float(y[i])!r} at index {i}"
        )


def _float_param(params, key, default, low=0.0, high=math.inf, open_low=True):
    """Read ``params[key]`` as a finite float in ``(low, high)`` (or ``[low, high)``)."""
    value = params.get(key, default)
    if value is None:
        value = default
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{key} must be a float; got {key}={value!r}")
    value = float(value)
    ok_low = value > low if open_low else value >= low
    if not (math.isfinite(value) and ok_low and value < high):
        lb = "(" if open_low else "["
        raise ValueError(f"{key} must be in {lb}{low}, {high}); got {key}={value!r}")
    return value


# --------------------------------------------------------------------------
# objectives
# --------------------------------------------------------------------------
class Objective:
    """Base objective: a K = 1 regression loss with identity link.

    Attributes
    ----------
    name : str
        Canonical objective name (one of :data:`OBJECTIVES`, or ``"custom"``).
    default_metric : str
        Name understood by :func:`bonsai.metrics.get_metric` (``"none"`` for
        custom objectives).
    is_classification : bool
        True for ``binary`` and ``multiclass``.
    renew_leaf : callable or None
        ``renew_leaf(residuals, weights) -> float`` re-estimating a leaf value
        from residuals ``y - raw`` (float64 ``(m,)``) and weights (float64
        ``(m,)`` or None); set for ``absolute_error`` and ``quantile`` only.
    """

    name = "squared_error"
    default_metric = "rmse"
    is_classification = False
    renew_leaf = None
    needs_group = False     # ranking objectives (bonsai.rank_objectives): True
    multi_output = False    # (n, K) labels (bonsai.multi_objectives): True

    @property
    def renew_leaves(self):
        """Alias of :attr:`renew_leaf` (the name used in docs/interfaces.md)."""
        return self.renew_leaf

    def __repr__(self):
        return f"<bonsai Objective {self.name!r}>"

    def n_outputs(self, n_classes=None):
        """Number of raw outputs K per row (1 for every K = 1 objective)."""
        return 1

    def check_labels(self, y):
        """Validate labels ``y`` (float32 or float64 ``(n,)``); raise ValueError if
        invalid."""
        _check_finite(self.name, np.asarray(y, dtype=np.float64))

    def init_score(self, y, w):
        """Boost-from-average margin, float64 ``(K,)``."""
        return np.array([_wmean(y, w)], dtype=np.float64)

    def grad_hess(self, y, raw, w, out_g, out_h):
        """Write gradients / hessians of the loss at ``raw`` into ``out_*``.

        Parameters
        ----------
        y : ndarray (n,), float32 or float64
        raw : ndarray (K, n), float64
        w : ndarray (n,), float64, or None
            Multiplied into both gradient and hessian.
        out_g, out_h : ndarray (K, n), float32, C-contiguous
            Written in place.
        """
        g, h = self._gh(np.asarray(y, dtype=np.float64), raw[0])
        if w is not None:
            g = g * w
            h = h * w
        out_g[0] = g
        out_h[0] = h

    def _gh(self, y, r):  # pragma: no cover - overridden
        raise NotImplementedError

    def transform(self, raw):
        """Map margins ``(K, n)`` to user predictions ``(n,)``."""
        return np.array(raw[0], dtype=np.float64)


class _SquaredError(Objective):
    name, default_metric = "squared_error", "rmse"

    def grad_hess(self, y, raw, w, out_g, out_h):
        has_w = w is not None
        for a, b in _chunks(raw.shape[1]):
            yb = np.asarray(y[a:b], dtype=np.float64)
            _sq_kernel(yb, raw[0, a:b], w[a:b] if has_w else yb, has_w, out_g[0, a:b],
                       out_h[0, a:b])


class _AbsoluteError(Objective):
    name, default_metric = "absolute_error", "mae"
    _alpha = 0.5

    def init_score(self, y, w):
        return np.array([weighted_quantile(y, w, self._alpha)], dtype=np.float64)

    def renew_leaf(self, residuals, weights):
        return weighted_quantile(residuals, weights, self._alpha)

    def _gh(self, y, r):
        return np.sign(r - y), np.ones_like(r)


class _Quantile(_AbsoluteError):
    name, default_metric = "quantile", "quantile"

    def __init__(self, alpha):
        self._alpha = alpha

    def _gh(self, y, r):
        a = self._alpha
        return np.where(r - y >= 0.0, 1.0 - a, -a), np.ones_like(r)


class _Huber(Objective):
    name, default_metric = "huber", "huber"

    def __init__(self, delta):
        self._delta = delta

    def _gh(self, y, r):
        return np.clip(r - y, -self._delta, self._delta), np.ones_like(r)


class _LogLink(Objective):
    """Shared pieces of the log-link (count / positive) regressions."""

    def init_score(self, y, w):
        return np.array([math.log(max(_wmean(y, w), _EPS))], dtype=np.float64)

    def transform(self, raw):
        return np.exp(raw[0])


class _Poisson(_LogLink):
    name, default_metric = "poisson", "poisson"

    def __init__(self, max_delta_step):
        self._mds = max_delta_step

    def check_labels(self, y):
        y = np.asarray(y, dtype=np.float64)
        _check_finite(self.name, y)
        _first_bad(self.name, y, y < 0, "label >= 0")
        if y.shape[0] and not np.sum(y) > 0:
            raise ValueError(f"objective={self.name!r} requires sum(label) > 0; "
                             f"got sum(label)={float(np.sum(y))!r}")

    def _gh(self, y, r):
        return np.exp(r) - y, np.exp(r + self._mds)


class _Gamma(_LogLink):
    name, default_metric = "gamma", "gamma"

    def check_labels(self, y):
        y = np.asarray(y, dtype=np.float64)
        _check_finite(self.name, y)
        _first_bad(self.name, y, y <= 0, "label > 0")

    def _gh(self, y, r):
        t = y * np.exp(-r)
        return 1.0 - t, t


class _Tweedie(_Poisson):
    name, default_metric = "tweedie", "tweedie"

    def __init__(self, rho):
        self._rho = rho

    def _gh(self, y, r):
        rho = self._rho
        e1 = np.exp((1.0 - rho) * r)
        e2 = np.exp((2.0 - rho) * r)
        return e2 - y * e1, (2.0 - rho) * e2 - y * (1.0 - rho) * e1


class _Binary(Objective):
    name, default_metric, is_classification = "binary", "logloss", True

    def check_labels(self, y):
        y = np.asarray(y, dtype=np.float64)
        _first_bad(self.name, y, (y != 0.0) & (y != 1.0), "label in {0, 1}")

    def init_score(self, y, w):
        p = min(max(_wmean(y, w), _EPS), 1.0 - _EPS)
        return np.array([math.log(p / (1.0 - p))], dtype=np.float64)

    def grad_hess(self, y, raw, w, out_g, out_h):
        has_w = w is not None
        e = np.empty(min(raw.shape[1], _CHUNK), dtype=np.float64)
        for a, b in _chunks(raw.shape[1]):
            eb = e[:b - a]
            yb = np.asarray(y[a:b], dtype=np.float64)
            _neg_abs(raw[0, a:b], eb)
            np.exp(eb, out=eb)
            _binary_kernel(yb, raw[0, a:b], eb, w[a:b] if has_w else yb, has_w,
                           out_g[0, a:b], out_h[0, a:b])

    def transform(self, raw):
        # one compiled stable loop: cheap for a single row too
        return _expit(np.asarray(raw[0], dtype=np.float64))


class _Multiclass(Objective):
    name, default_metric, is_classification = "multiclass", "mlogloss", True

    def __init__(self, num_class):
        self.num_class = num_class

    def n_outputs(self, n_classes=None):
        k = n_classes if n_classes is not None else self.num_class
        if k is None or int(k) < 2:
            raise ValueError(f"objective='multiclass' requires n_classes >= 2; got n_classes={k!r}")
        return int(k)

    def check_labels(self, y):
        y = np.asarray(y, dtype=np.float64)
        _check_finite(self.name, y)
        _first_bad(self.name, y, (y < 0) | (y != np.floor(y)), "integer label >= 0")
        if self.num_class is not None:
            _first_bad(self.name, y, y >= self.num_class,
                       f"label < num_class={self.num_class}")

    def init_score(self, y, w):
        k = self.num_class
        if k is None:
            k = int(np.max(y)) + 1 if y.shape[0] else 2
        counts = np.bincount(y.astype(np.int64), weights=w, minlength=k)[:k]
        total = float(np.sum(counts))
        prior = counts / total if total > 0 else np.full(k, 1.0 / k)
        return np.log(np.maximum(prior, _EPS))

    def grad_hess(self, y, raw, w, out_g, out_h):
        k = raw.shape[0]
        if k < 2:
            raise ValueError(f"objective='multiclass' requires raw with K >= 2 rows; got K={k}")
        has_w = w is not None
        e = np.empty(raw.shape, dtype=np.float64)
        _shift_max(raw, e)
        np.exp(e, out=e)
        y = np.asarray(y, dtype=np.float64)
        _softmax_kernel(y, e, w if has_w else y, has_w, k / (k - 1.0), out_g, out_h)

    def transform(self, raw):
        r = np.asarray(raw, dtype=np.float64)
        e = np.exp(r - np.max(r, axis=0, keepdims=True))
        e /= np.sum(e, axis=0, keepdims=True)
        return np.ascontiguousarray(e.T)


class _Custom(Objective):
    """Wrap a user ``fobj(y_true, y_pred_raw) -> (grad, hess)``.

    ``y_pred_raw`` is ``(n,)`` for K = 1 and ``(n, K)`` otherwise; grad and hess
    must have the same shape and be finite. Sample weights, if any, are
    multiplied into the returned grad / hess (the callable cannot see them).
    """

    name, default_metric = "custom", "none"

    def __init__(self, fobj, num_class=None):
        self.fobj = fobj
        self.num_class = num_class

    def n_outputs(self, n_classes=None):
        return int(n_classes) if n_classes is not None and int(n_classes) > 2 else 1

    def init_score(self, y, w):
        return np.zeros(self.n_outputs(self.num_class), dtype=np.float64)

    def grad_hess(self, y, raw, w, out_g, out_h):
        k, n = raw.shape
        pred = raw[0].copy() if k == 1 else np.ascontiguousarray(raw.T)
        fname = getattr(self.fobj, "__name__", repr(self.fobj))
        res = self.fobj(np.asarray(y, dtype=np.float64), pred)
        if not (isinstance(res, tuple) and len(res) == 2):
            raise ValueError(f"objective={fname!r} must return a (grad, hess) tuple; "
                             f"got {type(res).__name__}")
        out = []
        for label, arr in zip(("grad", "hess"), res):
            arr = np.asarray(arr, dtype=np.float64)
            if arr.shape != pred.shape:
                raise ValueError(f"objective={fname!r} returned {label} of shape "
                                 f"{arr.shape}; expected {pred.shape}")
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"objective={fname!r} returned non-finite {label} values")
            if w is not None:
                arr = arr * (w if k == 1 else w[:, None])
            out.append(arr if k == 1 else arr.T)
        out_g[...] = out[0]
        out_h[...] = out[1]

    def transform(self, raw):
        r = np.asarray(raw, dtype=np.float64)
        return r[0].copy() if r.shape[0] == 1 else np.ascontiguousarray(r.T)


def get_objective(objective, params=None):
    """Build an :class:`Objective`.

    Parameters
    ----------
    objective : str or callable
        One of :data:`OBJECTIVES` (a few LightGBM aliases such as
        ``"regression"``, ``"l1"``, ``"softmax"`` are accepted too), or a
        callable ``fobj(y_true, y_pred_raw) -> (grad, hess)``.
    params : dict, optional
        Read keys: ``huber_delta`` (1.0, > 0), ``alpha`` (0.9, in (0, 1)),
        ``tweedie_variance_power`` (1.5, in (1, 2)),
        ``poisson_max_delta_step`` (0.7, >= 0), ``num_class`` or
        ``n_classes`` (multiclass K, optional); the ranking objectives'
        ``lambdarank_truncation_level``, ``label_gain``, ``lambdarank_norm``,
        ``sigmoid`` and ``random_state`` (``bonsai.rank_objectives``).

    Returns
    -------
    Objective
    """
    params = {} if params is None else params
    if callable(objective):
        return _Custom(objective, params.get("num_class"))
    if not isinstance(objective, str):
        raise TypeError("objective must be a string or a callable; "
                        f"got objective={objective!r}")
    name = _ALIASES.get(objective, objective)
    if name == "squared_error":
        return _SquaredError()
    if name == "absolute_error":
        return _AbsoluteError()
    if name == "huber":
        return _Huber(_float_param(params, "huber_delta", 1.0))
    if name == "quantile":
        return _Quantile(_float_param(params, "alpha", 0.9, 0.0, 1.0))
    if name == "poisson":
        return _Poisson(_float_param(params, "poisson_max_delta_step", 0.7,
                                        open_low=False))
    if name == "gamma":
        return _Gamma()
    if name == "tweedie":
        return _Tweedie(_float_param(params, "tweedie_variance_power", 1.5, 1.0, 2.0))
    if name == "binary":
        return _Binary()
    if name in RANK_OBJECTIVES:
        return get_rank_objective(name, params)
    if name in MULTI_OBJECTIVES:
        return get_multi_objective(name, params)
    if name == "multiclass":
        k = params.get("num_class", params.get("n_classes"))
        if k is not None:
            if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 2:
                raise ValueError(f"num_class must be an integer >= 2 for "
                                 f"objective='multiclass'; got num_class={k!r}")
            k = int(k)
        return _Multiclass(k)
    raise ValueError(f"objective must be one of {OBJECTIVES + RANK_OBJECTIVES + MULTI_OBJECTIVES} "
                     f"or a callable; got objective={objective!r}")


def label_outputs(objective, y, num_class=None, multi_strategy="one_output_per_tree"):
    """Check a fit's labels against its objective: ``(objective, K)``, the objective
    ready to train (a multi-output one bound to the label's K columns) and its number of
    outputs.  A ValueError when

    * ``y`` is 2-D (n, K) and the objective has one output per row (only
      ``MULTI_OBJECTIVES`` take a 2-D label; ``squared_error`` users are pointed at
      ``multi_squared_error``);
    * the labels are invalid for the objective (``check_labels``).

    (Which objectives ``multi_strategy="multi_output_tree"`` takes is checked by
    ``boosting.train``: the multi-output ones, with any K >= 1.)
    """
    y = np.asarray(y)
    name = getattr(objective, "name", "custom")
    if y.ndim == 2 and not getattr(objective, "multi_output", False):
        hint = (" (for several regression targets use objective='multi_squared_error')"
                if name == "squared_error" else
                " (for several 0/1 labels per row use objective='multilabel_binary')"
                if name in ("binary", "multiclass") else "")
        raise ValueError(f"label has shape {y.shape}: a 2-D label (n, K) is taken only by the "
                         f"objectives {MULTI_OBJECTIVES}; objective={name!r} needs a 1-D "
                         f"label (n,){hint}")
    if getattr(objective, "multi_output", False):
        objective = objective.bind_outputs(1 if y.ndim == 1 else int(y.shape[1]))
    objective.check_labels(y)
    k_out = objective.n_outputs(num_class)
    return objective, k_out
