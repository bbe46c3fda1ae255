"""``Dataset``: features binned once and reused across fits and boosting rounds.

Validation data is binned with the training bin edges by passing
``reference=train_set``; ``Dataset.subset(rows)`` takes rows of a Dataset with its bins
as they are (cross-validation folds, binned once).  A Dataset holds the column-major
bins ``X_cols`` (F, n) (for scipy.sparse input a ``bonsai.sparse.SparseBins`` instead:
row and column stores of the non-zero cells, never a dense matrix) and the ``BinMapper``; what the histograms are filled from (a
blocked row-major mirror, or sparse rows) is the backend's choice, built when a fit
first needs it (``backend.prepare``) and cached on the Dataset.
"""
import numpy as np

from ._profile import stage
from ._threads import resolve_n_threads, thread_context
from .binning import BinMapper
from .categorical import CategoryMap, resolve_features
from ._groups import resolve_groups, subset_ptr
from ._limits import check_rows
from .data import check_label, check_vector, is_integer, take_rows, to_matrix
from . import sparse as _sparse


def check_feature_names(feature_names, names, n_features):
    """The feature names: ``feature_names`` (as str, one per feature) when given, else
    the data's ``names`` (None for plain arrays); a ValueError when they do not fit
    or repeat."""
    if feature_names is not None:
        feature_names = [str(f) for f in feature_names]
        if len(feature_names) != n_features:
            raise ValueError(f"feature_names has {len(feature_names)} names but the data "
                             f"has {n_features} features")
        names = feature_names
    if names is not None and len(set(names)) != len(names):
        raise ValueError("feature_names must be unique")
    return names


class Dataset:
    """Binned training or validation data.

    Parameters
    ----------
    data : array-like (n, F) -- numpy float32/float64 (either order), pandas/polars/Arrow
        tables with numeric columns, or scipy.sparse.
    label : (n,) array-like, optional; (n, K) (numpy, pandas / polars DataFrame, Arrow
        table) for the multi-output objectives (``multi_squared_error``,
        ``multilabel_binary``), kept (n, K) with rows on axis 0; an (n, 1) label becomes 1-D
    weight : (n,) array-like of non-negative finite weights, optional
    init_score : (n,) or (n, K) array-like, optional -- starting margins
    feature_names : list of str, optional (taken from DataFrame columns by default)
    max_bin : int in [2, 65535] -- non-missing bins per feature
    reference : Dataset, optional -- reuse its bin edges (for validation data)
    random_state : int -- seed of the row sample the bin edges are computed from
    categorical_features : list of int or str, optional -- columns (indices or
        names) whose values are categories; pandas ``category`` columns always are
        (see ``bonsai.categorical``).  With ``reference``, the reference's are used.
    group : (Q,) array-like of int, optional -- learning to rank: the query sizes, in
        row order (each query's rows contiguous; LightGBM's ``group``)
    qid : (n,) array-like, optional -- learning to rank: a query id per row, each
        query's rows contiguous (XGBoost's ``qid``); give ``group`` or ``qid``.  Either
        becomes ``group_ptr``, int64 (Q + 1,) query boundaries (``bonsai._groups``).
    """

    def __init__(self, data, label=None, weight=None, init_score=None, feature_names=None,
                 max_bin=255, reference=None, random_state=0, categorical_features=None,
                 group=None, qid=None):
        if not is_integer(max_bin) or not 2 <= max_bin <= 65535:
            raise ValueError(f"max_bin must be an integer in [2, 65535], got {max_bin!r}")
        sparse = _sparse.is_sparse(data)
        if sparse:      # binned from its non-zeros, never made dense (bonsai.sparse)
            X, names, pd_cats = _sparse.check_csr(data), None, {}
            data = X
        else:
            X, names, pd_cats = to_matrix(data, with_categories=True)
        n, n_features = X.shape
        check_rows(n, "data")    # before anything per row is read or allocated
        self._shape = (n, n_features)
        names = check_feature_names(feature_names, names, n_features)
        self.weight = None if weight is None else check_vector(weight, n, "weight", allow_negative=False)
        if self.weight is not None and not self.weight.sum() > 0:
            raise ValueError("weight must not be all zero")
        # float32 labels stay float32: a float64 copy would be the largest per-row array
        # after the bins (objectives and metrics widen them exactly, chunk by chunk)
        self.label = None if label is None else check_label(label, n, "label")
        self.init_score = None if init_score is None else np.asarray(init_score, dtype=np.float64)
        self.group_ptr = resolve_groups(group, qid, n)
        if reference is not None:
            if not isinstance(reference, Dataset):
                raise TypeError(f"reference must be a bonsai.Dataset, got {type(reference).__name__}")
            if reference.n_features != n_features:
                raise ValueError(f"X has {n_features} features but the reference Dataset has "
                                 f"{reference.n_features}")
            if names is not None and reference.feature_names is not None and names != reference.feature_names:
                raise ValueError("feature names differ from the reference Dataset's")
            self.bin_mapper = reference.bin_mapper
            names = names if names is not None else reference.feature_names
        self.feature_names = names
        raw = data
        if reference is not None:
            self.categories = reference.categories
        else:
            if categorical_features is not None and (
                    isinstance(categorical_features, (str, bytes))
                    or not hasattr(categorical_features, "__iter__")):
                raise TypeError("categorical_features must be a list of feature indices or "
                                f"names, got {categorical_features!r}")
            feats = resolve_features(categorical_features, names, n_features, pd_cats)
            if feats and sparse:
                raise ValueError(f"categorical_features={categorical_features!r}: categorical "
                                 "features need dense input (numpy or a DataFrame), not a "
                                 "scipy.sparse matrix")
            self.categories = CategoryMap.fit(X, feats, pd_cats) if feats else None
        extra = sorted(set(pd_cats) - set(self.categorical_features))
        if extra:     # only with a reference: otherwise every category column is one
            raise ValueError(f"X: column {names[extra[0]]!r} is categorical but the reference "
                             "Dataset's column is not")
        self.cat_codes = None
        if self.categories is not None:
            # a DataFrame with category columns was converted into a fresh array: coded
            # in place (no second copy of the matrix)
            X = self.categories.apply(X, pd_cats, copy=not pd_cats)
            # every category's code (ordered target statistics use them all); the
            # bins keep the max_bin most frequent, the rest share the missing bin
            feats = list(self.categories.features)
            codes = X[:, feats].T
            self.cat_codes = np.where(np.isnan(codes), -1, codes).astype(np.int32)
            sub = X[:, feats]
            sub[sub >= (max_bin if reference is None else reference.max_bin)] = np.nan
            X[:, feats] = sub
        # parallel kernels run inside thread_context: it serializes Python threads,
        # which numba's workqueue layer requires
        with thread_context(resolve_n_threads(None)):
            if reference is None:
                with stage("bin_edges"):
                    fit = _sparse.fit_bin_mapper if sparse else BinMapper.fit
                    self.bin_mapper = fit(X, max_bin, self.weight, random_state=random_state)
                    cm = self.categories
                    if cm is not None:
                        self.bin_mapper = self.bin_mapper.with_categorical(
                            cm.features, [min(cm.n_codes(i), max_bin)
                                          for i in range(len(cm.features))])
            with stage("bin_map"):
                self.X_cols = (_sparse.bin_rows(self.bin_mapper, X) if sparse
                               else self.bin_mapper.transform_columns(X))
        self.reference = reference
        self.random_state = random_state
        # where these rows lie in a data set spread over several shards (bonsai.comm
        # segments); None: consecutive (set by the distributed front ends)
        self.global_rows = None
        # kept (no copy of numpy input) for continued training and re-binning; with
        # categorical features the user's own data, which predict codes again
        self.data = X if self.categories is None else raw

    def subset(self, rows):
        """The Dataset of rows ``rows`` (integer indices, in the order given) with this
        Dataset's bin edges and bins: nothing is binned again, so a model trained on it
        equals one trained on ``Dataset(X[rows], ..., reference=self)``.  Labels,
        weights, init scores, category codes and the raw data are taken row by row;
        query groups too (each query's rows taken must be contiguous)."""
        n = self.n_rows
        idx = np.asarray(rows)
        if idx.ndim != 1 or idx.dtype.kind not in "iu" or idx.shape[0] == 0:
            raise ValueError(f"rows must be a non-empty 1-D array of row indices, got "
                             f"{type(rows).__name__} of dtype {idx.dtype} and shape {idx.shape}")
        if idx.min() < 0 or idx.max() >= n:
            bad = idx[(idx < 0) | (idx >= n)][0]
            raise ValueError(f"rows: index {int(bad)} is out of range for {n} rows")
        idx = idx.astype(np.int64)
        sub = Dataset._bare(idx.shape[0], self.bin_mapper, self.feature_names,
                            self.categories, self, self.random_state)
        sub.weight = None if self.weight is None else self.weight[idx]
        if sub.weight is not None and not sub.weight.sum() > 0:
            raise ValueError("weight must not be all zero (in the rows of the subset)")
        sub.label = None if self.label is None else self.label[idx]
        sub.init_score = None if self.init_score is None else self.init_score[idx]
        sub.group_ptr = (None if self.group_ptr is None
                         else subset_ptr(self.group_ptr, idx))
        sub.cat_codes = None if self.cat_codes is None else np.ascontiguousarray(
            self.cat_codes[:, idx])
        sub.X_cols = (_sparse.take(self.X_cols, idx, self.bin_mapper) if self.is_sparse
                      else np.ascontiguousarray(self.X_cols[:, idx]))
        sub.data = None if self.data is None else take_rows(self.data, idx)
        return sub

    @classmethod
    def _bare(cls, n_rows, bin_mapper, feature_names, categories, reference, random_state):
        """A Dataset of ``n_rows`` binned with ``bin_mapper`` whose per-row fields are
        still unset (labels, weights, init scores, category codes: None; no bins, no
        raw data); ``subset``, ``_stack`` and ``_template`` fill it in."""
        check_rows(n_rows, "the Dataset")
        out = object.__new__(cls)
        out._shape = (int(n_rows), bin_mapper.n_features)
        out.weight = out.label = out.init_score = out.cat_codes = out.data = None
        out.group_ptr = None
        out.X_cols = np.empty((bin_mapper.n_features, 0), dtype=bin_mapper.dtype)
        out.bin_mapper = bin_mapper
        out.feature_names = feature_names
        out.categories = categories
        out.reference = reference
        out.random_state = random_state
        out.global_rows = None
        return out

    @classmethod
    def _stack(cls, parts, like, empty=None):
        """One Dataset of ``parts`` (Datasets binned with ``like``'s edges and
        categories) stacked in order, without raw data; with no parts, the empty
        Dataset of ``like``'s binning (a distributed rank holding no rows of a
        validation set) whose label, weight and init_score are ``empty``'s zero-row
        arrays (a dict; absent: None).  ``like`` may be a row-less ``_template``."""
        parts = list(parts)
        for i, q in enumerate(parts):
            if q.bin_mapper.to_dict() != like.bin_mapper.to_dict():
                raise ValueError(f"parts[{i}] was binned with other edges")
        out = cls._bare(sum(q.n_rows for q in parts), like.bin_mapper, like.feature_names,
                        like.categories, like, like.random_state)
        if not parts:
            for attr, value in (empty or {}).items():
                setattr(out, attr, value)
            return out

        def cat(attr, axis=0):
            vals = [getattr(q, attr) for q in parts]
            if any(v is None for v in vals):
                if any(v is not None for v in vals):
                    raise ValueError(f"{attr} is given for some parts but not all")
                return None
            return np.ascontiguousarray(np.concatenate(vals, axis=axis))

        out.weight, out.label, out.init_score = (cat(a) for a in
                                                 ("weight", "label", "init_score"))
        if any(q.is_sparse for q in parts):
            if not all(q.is_sparse for q in parts):
                raise ValueError("parts mix sparse and dense bins")
            out.X_cols = _sparse.stack([q.X_cols for q in parts], like.bin_mapper)
        else:
            out.X_cols = cat("X_cols", axis=1)
        out.cat_codes = cat("cat_codes", axis=1)
        return out

    @classmethod
    def _template(cls, bin_mapper, feature_names=None, categories=None, random_state=0):
        """A row-less Dataset holding only a binning: ``Dataset(X, reference=t)`` bins
        ``X`` with these edges and categories (the distributed front ends' shared
        binning)."""
        return cls._bare(0, bin_mapper, feature_names, categories, None, random_state)

    def free_raw_data(self):
        """Drop the reference to the raw matrix (continued training then needs it again)."""
        self.data = None
        return self

    @property
    def is_sparse(self):
        """Whether the bins are sparse (``bonsai.sparse.SparseBins``: scipy.sparse
        input) rather than the dense ``X_cols (F, n)``."""
        return isinstance(self.X_cols, _sparse.SparseBins)

    @property
    def n_rows(self):
        return self._shape[0]

    @property
    def n_features(self):
        return self._shape[1]

    @property
    def categorical_features(self):
        """Indices of the categorical columns (a tuple, empty if none)."""
        return () if self.categories is None else self.categories.features

    @property
    def max_bin(self):
        return self.bin_mapper.max_bin
