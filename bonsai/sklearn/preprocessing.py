"""``OrderedTargetEncoder``: CatBoost-style ordered target statistics as a
scikit-learn transformer, for users' own pipelines (imports scikit-learn).

Every column of ``X`` is treated as categorical (put the encoder in a
``ColumnTransformer`` to pick columns).  A category is encoded as its target
statistic ``(sum of targets + prior * prior_weight) / (count + prior_weight)``
(``bonsai._ctr``):

* ``fit(X, y).transform(X)`` uses the statistics of all the training rows (what a
  model sees at predict time);
* ``fit_transform(X, y)`` encodes each training row with the rows *before it* in a
  random permutation, averaged over ``n_permutations`` permutations, so a row's own
  target never leaks into its encoding (CatBoost's ordered target statistics).  The
  two differ on purpose: train a model on ``fit_transform``'s output, then transform
  new data with ``transform``.

Targets: binary (one column per feature: the positive class's rate), multiclass (one
column per class per feature) and continuous (the mean).  Missing values (None, NaN,
``pd.NA``) and categories not seen in ``fit`` are encoded as the prior.
Deterministic for an integer ``random_state``.
"""
import math
import sys

import numpy as np
from sklearn.base import BaseEstimator, TransformerMixin
from sklearn.utils import check_random_state
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import _check_feature_names_in, check_is_fitted, validate_data

from .. import _ctr

_TARGET_TYPES = ("auto", "binary", "multiclass", "continuous")


def _is_missing(v):
    if v is None:
        return True
    if isinstance(v, float):
        return math.isnan(v)
    pd = sys.modules.get("pandas")
    return pd is not None and v is pd.NA


class OrderedTargetEncoder(TransformerMixin, BaseEstimator):
    """Encode categorical columns with (ordered) target statistics.

    Parameters
    ----------
    n_permutations : int, default 4 -- permutations averaged by ``fit_transform``
    prior_weight : float, default 1.0 -- weight ``a`` of the prior in each statistic
    target_type : {"auto", "binary", "multiclass", "continuous"}, default "auto"
    random_state : int, RandomState or None, default 0 -- draws the permutations

    Attributes
    ----------
    categories_ : list of arrays -- the sorted categories seen in each column
    classes_ : array -- the classes (binary / multiclass targets)
    prior_ : (S,) float64 -- the mean of each target statistic
    target_type_ : str
    n_features_in_, feature_names_in_ : as scikit-learn
    """

    def __init__(self, n_permutations=4, prior_weight=1.0, target_type="auto", random_state=0):
        self.n_permutations = n_permutations
        self.prior_weight = prior_weight
        self.target_type = target_type
        self.random_state = random_state

    # ---- fitting ---------------------------------------------------------------
    def _check_params(self):
        if (not isinstance(self.n_permutations, (int, np.integer)) or isinstance(self.n_permutations, bool)
                or self.n_permutations < 1):
            raise ValueError(f"n_permutations must be an integer >= 1, got {self.n_permutations!r}")
        if (not isinstance(self.prior_weight, (int, float, np.integer, np.floating))
                or isinstance(self.prior_weight, bool)
                or not (math.isfinite(self.prior_weight) and self.prior_weight > 0)):
            raise ValueError(f"prior_weight must be a finite number > 0, got {self.prior_weight!r}")
        if self.target_type not in _TARGET_TYPES:
            raise ValueError(f"target_type must be one of {_TARGET_TYPES}, got {self.target_type!r}")

    def _targets(self, y):
        """(n, S) float64 target statistics' inputs, and the resolved target type."""
        y = np.asarray(y)
        if y.ndim != 1:
            raise ValueError(f"y must be 1-dimensional, got shape {y.shape}")
        kind = self.target_type
        if kind == "auto":
            kind = type_of_target(y, input_name="y", raise_unknown=True)
            if kind not in ("binary", "multiclass", "continuous"):
                raise ValueError(f"y: target type {kind!r} is not supported; set target_type")
        if kind == "continuous":     # (validate_data has rejected NaN / inf labels)
            return np.asarray(y, dtype=np.float64).reshape(-1, 1), kind
        self.classes_, inv = np.unique(y, return_inverse=True)
        inv = inv.reshape(-1)
        if kind == "binary":
            if self.classes_.shape[0] > 2:
                raise ValueError(f"target_type='binary' but y has {self.classes_.shape[0]} classes")
            return (inv == self.classes_.shape[0] - 1).astype(np.float64).reshape(-1, 1), kind
        onehot = np.zeros((y.shape[0], self.classes_.shape[0]))
        onehot[np.arange(y.shape[0]), inv] = 1.0
        return onehot, kind

    def _codes(self, col, j):
        """Category index of each value of column ``j`` (-1: missing or unseen)."""
        cats = self.categories_[j]
        if cats.dtype.kind == "f" and col.dtype.kind in "biuf":
            vals = col.astype(np.float64, copy=False)
            if cats.shape[0] == 0:
                return np.full(vals.shape[0], -1, np.int64)
            pos = np.minimum(np.searchsorted(cats, vals), cats.shape[0] - 1)
            return np.where(cats[pos] == vals, pos, -1).astype(np.int64)   # NaN: -1
        index = self._index[j]
        if index is None:
            index = self._index[j] = {v: i for i, v in enumerate(cats.tolist())}
        return np.fromiter((-1 if _is_missing(v) else index.get(v, -1) for v in col),
                           dtype=np.int64, count=col.shape[0])

    def _fit_categories(self, X):
        self.categories_, self._index = [], []
        for j in range(X.shape[1]):
            col = X[:, j]
            if col.dtype.kind in "biuf":
                vals = col.astype(np.float64, copy=False)
                self.categories_.append(np.unique(vals[~np.isnan(vals)]))
                self._index.append(None)
                continue
            present = [v for v in col if not _is_missing(v)]
            try:
                cats = np.array(sorted(set(present)), dtype=object)
            except TypeError:
                raise TypeError(f"X: column {j} mixes values that cannot be ordered "
                                f"(types {sorted({type(v).__name__ for v in present})})") from None
            self.categories_.append(cats)
            self._index.append({v: i for i, v in enumerate(cats)})

    def fit(self, X, y):
        """Learn each column's categories and their target statistics."""
        self._fit(X, y)
        return self

    def _fit(self, X, y):
        self._check_params()
        X, y = validate_data(self, X, y, dtype=None, ensure_all_finite=False)
        target, self.target_type_ = self._targets(y)
        self.prior_ = target.mean(axis=0)
        self._fit_categories(X)
        self._sums, self._counts, codes = [], [], []
        for j in range(X.shape[1]):
            c = self._codes(X[:, j], j)
            n_cat = self.categories_[j].shape[0]
            sums = np.empty((n_cat, target.shape[1]))
            counts = np.empty(n_cat)
            _ctr.category_sums(c, target, n_cat, sums, counts)
            self._sums.append(sums)
            self._counts.append(counts)
            codes.append(c)
        return X, target, codes

    # ---- encoding --------------------------------------------------------------
    def _n_stats(self):
        return self.prior_.shape[0]

    def transform(self, X):
        """Each category's statistic over all the training rows (the prior for missing
        values and unseen categories); (n, n_features * S) float64."""
        check_is_fitted(self, "prior_")
        X = validate_data(self, X, dtype=None, ensure_all_finite=False, reset=False)
        S = self._n_stats()
        out = np.empty((X.shape[0], X.shape[1] * S))
        for j in range(X.shape[1]):
            _ctr.encode_full(self._codes(X[:, j], j), self._sums[j], self._counts[j],
                             self.prior_, float(self.prior_weight), out, j * S)
        return out

    def fit_transform(self, X, y=None, **fit_params):
        """Fit, then encode the training rows with ordered statistics (each row sees
        only the rows before it in a permutation), averaged over ``n_permutations``."""
        if y is None:
            raise ValueError(f"{type(self).__name__} requires y to be passed, but the target y is None")
        X, target, codes = self._fit(X, y)
        S = self._n_stats()
        n = X.shape[0]
        out = np.zeros((n, X.shape[1] * S))
        rng = check_random_state(self.random_state)
        for _ in range(self.n_permutations):
            perm = rng.permutation(n).astype(np.int64)
            for j in range(X.shape[1]):
                _ctr.encode_ordered(codes[j], target, perm, self.categories_[j].shape[0],
                                    self.prior_, float(self.prior_weight), out, j * S)
        out /= self.n_permutations
        return out

    def get_feature_names_out(self, input_features=None):
        check_is_fitted(self, "prior_")
        names = _check_feature_names_in(self, input_features)
        if self._n_stats() == 1:
            return np.asarray(names, dtype=object)
        return np.asarray([f"{name}_{cls}" for name in names for cls in self.classes_],
                          dtype=object)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.required = True
        tags.input_tags.categorical = True
        tags.input_tags.string = True
        tags.input_tags.allow_nan = True
        return tags
