"""Categorical features at the API boundary: which columns are categorical, the
category -> code mapping learned from the training data (stored in the model), and
its application to new data.

A categorical feature's categories seen in training are numbered 0..K-1 by
decreasing training frequency (ties in category order: pandas' order of the dtype's
categories, or ascending value for numeric columns).  Everything downstream sees the
codes as float values, with NaN for a missing value and a category not seen in
training.  Native splits bin only the ``max_bin`` most frequent codes (the rest share
the missing bin); a categorical split's bitset never holds the missing bin or a code
past it, so those go the missing way (right).  Codes are found through
the category *values*, so a DataFrame whose category dtype lists its categories in
another order, or holds extra ones, is coded exactly as the training data was.

Categories are pandas ``category`` columns (string, integer, float or bool
categories), detected automatically, or numeric columns named by
``categorical_features`` (each distinct finite value is a category).
"""
import numbers

import numpy as np

from .data import is_integer


def _py(v):
    """A category value as a plain Python str / int / float / bool (JSON-able)."""
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        v = v.item()
    if isinstance(v, (bool, str)):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        v = float(v)
        if not np.isfinite(v):
            raise ValueError(f"categorical value {v!r} is not finite")
        return int(v) if v.is_integer() and abs(v) < 2 ** 53 else v
    raise TypeError(f"categorical values must be str, int, float or bool; got "
                    f"{v!r} of type {type(v).__name__}")


def resolve_features(spec, names, n_features, pandas_columns):
    """Sorted column indices of the categorical features: ``pandas_columns`` (the
    DataFrame's ``category`` columns) and those named or indexed by ``spec``."""
    out = set(pandas_columns)
    for f in spec or ():
        if is_integer(f):
            if not 0 <= f < n_features:
                raise ValueError(f"categorical_features: index {f} is out of range for "
                                 f"{n_features} features")
            out.add(int(f))
        else:
            if names is None or f not in names:
                raise ValueError(f"categorical_features: {f!r} is not a feature name"
                                 + ("" if names is None else f" (names: {names[:5]}...)"))
            out.add(names.index(f))
    return tuple(sorted(out))


class CategoryMap:
    """The kept categories of each categorical feature, in code order.

    features : tuple of int -- column indices
    categories : list of lists -- ``categories[i][c]`` is the value coded ``c`` in
        column ``features[i]``
    """

    def __init__(self, features, categories):
        self.features = tuple(int(f) for f in features)
        self.categories = [list(c) for c in categories]
        self._lookup = [{v: c for c, v in enumerate(cats)} for cats in self.categories]
        self._numeric = []
        for cats in self.categories:
            if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in cats):
                vals = np.array(cats, dtype=np.float64)
                order = np.argsort(vals, kind="stable")
                self._numeric.append((vals[order], order.astype(np.float64)))
            else:
                self._numeric.append(None)

    def __eq__(self, other):
        return (isinstance(other, CategoryMap) and self.features == other.features
                and self.categories == other.categories)

    def n_codes(self, i):
        return len(self.categories[i])

    @classmethod
    def fit(cls, X, features, pandas_cats):
        """Learn the mapping from the training matrix ``X`` (pandas category columns
        hold pandas codes, NaN for missing; ``pandas_cats[j]`` their categories)."""
        cats = []
        for j in features:
            col = X[:, j]
            ok = ~np.isnan(col)
            if j in pandas_cats:
                values = [_py(v) for v in pandas_cats[j]]
                counts = np.bincount(col[ok].astype(np.int64), minlength=len(values))
            else:
                if np.isinf(col).any():
                    raise ValueError(f"categorical feature {j} has an infinite value; "
                                     "categories must be finite numbers (NaN for missing)")
                uniq, counts = np.unique(col[ok], return_counts=True)
                values = [_py(v) for v in uniq]
            order = np.argsort(-counts, kind="stable")
            order = order[counts[order] > 0]
            cats.append([values[i] for i in order])
        return cls(features, cats)

    def apply(self, X, pandas_cats, copy=True):
        """The coded copy of ``X`` (only the categorical columns change); with
        ``copy=False`` a C-ordered ``X`` the caller owns is coded in place."""
        if copy or not X.flags.c_contiguous:
            X = np.array(X, dtype=np.float64 if X.dtype != np.float32 else np.float32,
                         order="C")
        for i, j in enumerate(self.features):
            col = X[:, j]
            if j in pandas_cats:
                remap = np.array([self._lookup[i].get(_py(v), -1) for v in pandas_cats[j]]
                                 + [-1], dtype=np.float64)
                remap[remap < 0] = np.nan
                codes = np.where(np.isnan(col), -1, col).astype(np.int64)
                X[:, j] = remap[codes]
                continue
            num = self._numeric[i]
            if num is None:
                raise ValueError(
                    f"categorical feature {j} has non-numeric categories "
                    f"({self.categories[i][:3]}...); pass a pandas DataFrame with a "
                    "'category' column for it")
            vals, code = num
            out = np.full(col.shape[0], np.nan)
            if vals.size:
                pos = np.minimum(np.searchsorted(vals, col), vals.size - 1)
                hit = vals[pos] == col
                out[hit] = code[pos[hit]]
            X[:, j] = out
        return X

    def to_dict(self):
        return {"features": list(self.features), "categories": self.categories}

    @classmethod
    def from_dict(cls, d, n_features):
        try:
            feats = [int(f) for f in d["features"]]
            cats = [[_py(v) for v in c] for c in d["categories"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"invalid model: bad 'categorical' field: {e}") from None
        if len(feats) != len(cats) or any(not 0 <= f < n_features for f in feats):
            raise ValueError("invalid model: bad 'categorical' field")
        return cls(feats, cats)
