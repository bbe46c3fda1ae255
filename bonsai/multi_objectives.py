"""Multi-output objectives: ``multi_squared_error`` and ``multilabel_binary``.

Both take a label of shape ``(n, K)`` (rows on axis 0, as ``Dataset`` keeps it; a 1-D
label is the one-column case, K = 1) and have K independent outputs, one per label
column: output k's loss reads only column k and raw margins ``raw[k]``.  So they train
with either ``multi_strategy``: ``"one_output_per_tree"`` (K trees per round, tree k
fitted to output k's gradients) or ``"multi_output_tree"`` (one tree per round with a
vector leaf).  The interface is the one of ``bonsai.objectives.Objective`` (duck-typed,
as ``bonsai.rank_objectives``), plus ``multi_output = True``:

* ``multi_squared_error``: ``0.5 * (raw - y)**2`` per entry; grad ``raw - y``, hess 1
  (times the row's weight); start margins the weighted column means; predictions the
  margins; default metric ``rmse`` over all ``n * K`` entries.
* ``multilabel_binary``: K logistic losses on 0/1 labels; grad ``sigmoid(raw) - y``,
  hess ``p * (1 - p)``; start margins each column's log-odds (mean clamped to
  ``[1e-15, 1 - 1e-15]`` as ``binary``); predictions ``sigmoid(raw)`` per entry;
  default metric ``logloss`` averaged over the entries.

K comes from the label: ``bind_outputs(K)`` (``bonsai.objectives.label_outputs`` calls
it once per fit) returns the objective with K set, and ``n_outputs()`` returns that K;
``num_class`` plays no part.  Gradients are computed column by column with the same
compiled kernels (and chunking) as ``squared_error`` / ``binary``, so output k's
gradients, start margin and trees are bit for bit those of a one-output fit of column k;
every value is an element-wise expression, so nothing depends on the thread count.
"""
import math

import numpy as np

from ._objective_kernels import _EPS, _binary_kernel, _expit, _neg_abs, _sq_kernel, _wmean

__all__ = ["MULTI_OBJECTIVES", "get_multi_objective"]

MULTI_OBJECTIVES = ("multi_squared_error", "multilabel_binary")

#: rows per kernel call (as ``bonsai.objectives``): labels are widened to float64 a
#: chunk of one column at a time
_CHUNK = 1 << 16


def _column(y, k):
    """Column ``k`` of a 1-D or 2-D label as a contiguous array (its own dtype)."""
    return np.ascontiguousarray(y if y.ndim == 1 else y[:, k])


def _n_columns(y):
    return 1 if y.ndim == 1 else int(y.shape[1])


class _MultiOutput:
    """Shared pieces: K bound from the label, no leaf renewal, no queries."""

    multi_output = True
    is_classification = False
    renew_leaf = None
    renew_leaves = None
    needs_group = False

    def __init__(self, k=None):
        self._k = k

    def __repr__(self):
        return f"<bonsai Objective {self.name!r} K={self._k}>"

    def bind_outputs(self, k):
        """A copy of this objective with ``K = k`` outputs (the label's columns)."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"objective={self.name!r}: the number of outputs must be an "
                             f"integer >= 1; got {k!r}")
        return type(self)(int(k))

    def n_outputs(self, n_classes=None):
        """K, the label's column count (``bind_outputs``); ``n_classes`` is ignored."""
        if self._k is None:
            raise ValueError(f"objective={self.name!r} takes its number of outputs from "
                             "the label's columns: bind it to a label first")
        return self._k

    def _check_shape(self, y):
        if y.ndim not in (1, 2) or (self._k is not None and _n_columns(y) != self._k):
            raise ValueError(f"objective={self.name!r} bound to {self._k} outputs got a "
                             f"label of shape {y.shape}")

    def check_labels(self, y):
        y = np.asarray(y)
        self._check_shape(y)
        bad = ~np.isfinite(y)
        if np.any(bad):
            _raise_first(self.name, y, bad, "a finite label")

    def grad_hess(self, y, raw, w, out_g, out_h):
        """Output k's gradients / hessians from label column k, as the one-output
        objective computes them (``y (n, K)`` or ``(n,)``, ``raw (K, n)``)."""
        has_w = w is not None
        n = raw.shape[1]
        for k in range(raw.shape[0]):
            for a in range(0, n, _CHUNK):
                b = min(n, a + _CHUNK)
                yb = np.asarray(y[a:b] if y.ndim == 1 else y[a:b, k], dtype=np.float64)
                self._kernel(yb, raw[k, a:b], w[a:b] if has_w else yb, has_w,
                             out_g[k, a:b], out_h[k, a:b])

    def transform(self, raw):
        """Margins ``(K, n)`` -> predictions ``(n, K)`` (``(n,)`` when K = 1)."""
        r = self._link(np.asarray(raw, dtype=np.float64))
        return r[0].copy() if r.shape[0] == 1 else np.ascontiguousarray(r.T)


def _raise_first(name, y, bad, requirement):
    """ValueError naming the first entry (row, and column for a 2-D label) of ``bad``."""
    if y.ndim == 1:
        i = int(np.argmax(bad))
        where, value = f"index {i}", y[i]
    else:
        i, j = (int(a) for a in np.argwhere(bad)[0])
        where, value = f"row {i}, column {j}", y[i, j]
    raise ValueError(f"objective={name!r} requires {requirement}; got "
                     f"label={float(value)!r} at {where}")


class _MultiSquaredError(_MultiOutput):
    name, default_metric = "multi_squared_error", "rmse"
    #: every output's hessian is 1 (or the row's weight): vector-leaf cells keep one
    #: hessian column for all K (``backends.cpu.multi_hist``)
    hessian_shared = True

    def init_score(self, y, w):
        y = np.asarray(y)
        return np.array([_wmean(np.asarray(_column(y, k), np.float64), w)
                         for k in range(_n_columns(y))], dtype=np.float64)

    @staticmethod
    def _kernel(y, raw, w, has_w, g, h):
        _sq_kernel(y, raw, w, has_w, g, h)

    @staticmethod
    def _link(r):
        return r


class _MultilabelBinary(_MultiOutput):
    name, default_metric, is_classification = "multilabel_binary", "logloss", True

    def check_labels(self, y):
        y = np.asarray(y)
        self._check_shape(y)
        bad = (y != 0) & (y != 1)
        if np.any(bad):
            _raise_first(self.name, y, bad, "labels in {0, 1}")

    def init_score(self, y, w):
        y = np.asarray(y)
        out = np.empty(_n_columns(y), dtype=np.float64)
        for k in range(out.shape[0]):
            p = min(max(_wmean(np.asarray(_column(y, k), np.float64), w), _EPS), 1.0 - _EPS)
            out[k] = math.log(p / (1.0 - p))
        return out

    @staticmethod
    def _kernel(y, raw, w, has_w, g, h):
        # e = exp(-|raw|) by numpy's exp, then the stable sigmoid: as ``binary`` does
        e = np.empty(raw.shape[0], dtype=np.float64)
        _neg_abs(raw, e)
        np.exp(e, out=e)
        _binary_kernel(y, raw, e, w, has_w, g, h)

    @staticmethod
    def _link(r):
        return _expit(np.ascontiguousarray(r).reshape(-1)).reshape(r.shape)


def get_multi_objective(name, params=None):
    """The unbound objective ``name`` (one of :data:`MULTI_OBJECTIVES`); ``params`` are
    not read (K comes from the label).  A model's objective for prediction is unbound:
    ``transform`` takes any K."""
    if name == "multi_squared_error":
        return _MultiSquaredError()
    if name == "multilabel_binary":
        return _MultilabelBinary()
    raise ValueError(f"objective must be one of {MULTI_OBJECTIVES}; got objective={name!r}")
