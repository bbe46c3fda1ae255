"""The binning stage: mergeable weighted quantile summaries and the ``BinMapper``
that turns raw feature values into bin codes.

A ``QuantileSummary`` per feature is a sorted array of distinct values with summed
weights.  Summaries merge exactly (``merge``) and can be pruned to a bounded size
(``prune``), so distributed training can build one summary per worker and agree on
the same bin edges.  Thresholds are chosen greedily from a summary
(``greedy_thresholds``, a kernel of the host backend's ``binning``).
"""
from typing import NamedTuple

import numba
import numpy as np

from ._dtypes import binned_dtype
from .backends import kernels

_kernels = kernels("binning")   # the host CPU's binning kernels

#: rows sampled to build the summaries (as LightGBM's bin_construct_sample_cnt)
SAMPLE_ROWS = 200_000
_pick = _kernels.pick_by_cells   # parallel kernel from PARALLEL_CELLS cells
#: ``BinMapper.transform_columns`` bins larger inputs in pieces of about this many
#: cells (one kernel call each, about 0.3 s on 2 shared cores): what a Ctrl-C waits
TRANSFORM_CHUNK_CELLS = 1 << 24
#: a feature is binned as mostly zero (``mostly_zero``) when at least this share of
#: the sampled rows hold 0, and the sample holds up to this many rows
MOSTLY_ZERO_SHARE, MOSTLY_ZERO_SAMPLE = 0.75, 1024


def mostly_zero(X):
    """(F,) uint8: the features of ``X (n, F)`` that hold 0 in at least
    ``MOSTLY_ZERO_SHARE`` of up to ``MOSTLY_ZERO_SAMPLE`` evenly spaced rows.  The
    binning kernels bin those a value at a time (``_bin_tile_sparse``): the same
    bins, only faster where zeros dominate, so a sample decides."""
    step = max(1, X.shape[0] // MOSTLY_ZERO_SAMPLE)
    sample = X[::step]
    if sample.shape[0] == 0:
        return np.zeros(X.shape[1], np.uint8)
    return (np.count_nonzero(sample == 0, axis=0) >= MOSTLY_ZERO_SHARE * sample.shape[0]
            ).astype(np.uint8)


def _unit_or(w):
    """``w`` as the kernels' weights: None when every weight is 1 (their unweighted
    path, which gives the same summaries)."""
    return None if w is None or bool(np.all(w == 1.0)) else w


class QuantileSummary(NamedTuple):
    """Sorted distinct values (float64) and their summed weights (float64)."""
    values: np.ndarray
    weights: np.ndarray

    def merge(self, other):
        """Exact union of two summaries (weights of equal values add)."""
        v = np.concatenate([self.values, other.values])
        w = np.concatenate([self.weights, other.weights])
        order = np.argsort(v, kind="mergesort")
        v = v[order]
        w = w[order]
        if v.size == 0:
            return QuantileSummary(v, w)
        starts = np.flatnonzero(np.concatenate([[True], v[1:] != v[:-1]]))
        return QuantileSummary(v[starts], np.add.reduceat(w, starts))

    def prune(self, max_size):
        """Keep at most ``max_size`` entries at evenly spaced cumulative weight; the
        weight of a dropped entry moves to the next kept one, so ranks stay within
        one kept interval."""
        k = self.values.size
        if k <= max_size:
            return self
        cum = np.cumsum(self.weights)
        targets = cum[-1] * (np.arange(1, max_size + 1) / max_size)
        keep = np.unique(np.minimum(np.searchsorted(cum, targets, side="left"), k - 1))
        keep[-1] = k - 1
        kept_cum = cum[keep]
        w = np.diff(np.concatenate([[0.0], kept_cum]))
        return QuantileSummary(self.values[keep], w)


def binning_sample(n, sample_rows=SAMPLE_ROWS, random_state=0):
    """Sorted row indices of the deterministic sample the bin edges come from."""
    if n <= sample_rows:
        return np.arange(n, dtype=np.int64)
    rng = np.random.default_rng(random_state)
    return np.sort(rng.choice(n, size=sample_rows, replace=False)).astype(np.int64)


def summarize(X, weights=None, sample_rows=SAMPLE_ROWS, random_state=0):
    """One mergeable ``QuantileSummary`` per column of ``X`` over a deterministic row
    sample (for combining data held in several places; a local fit uses the
    equivalent, lighter ``BinMapper.fit``)."""
    n = X.shape[0]
    if n > sample_rows:
        rng = np.random.default_rng(random_state)
        rows = np.sort(rng.choice(n, size=sample_rows, replace=False))
        sample = np.asarray(X[rows], dtype=np.float64)
        w = None if weights is None else weights[rows]
    else:
        sample = np.asarray(X, dtype=np.float64)
        w = weights
    m, n_features = sample.shape
    w = None if w is None else _unit_or(np.ascontiguousarray(w, dtype=np.float64))
    values = np.empty((n_features, m))
    wts = np.empty((n_features, m))
    sizes = np.empty(n_features, np.int64)
    _pick(_kernels.summarize_columns, m * n_features)(np.ascontiguousarray(sample), w, values,
                                                      wts, sizes)
    return [QuantileSummary(values[f, :sizes[f]].copy(), wts[f, :sizes[f]].copy())
            for f in range(n_features)]


class BinMapper:
    """Per-feature thresholds and the bin layout shared by histograms and trees.

    Attributes
    ----------
    thresholds : (sum t_f,) float64 -- feature f's thresholds are
        ``thresholds[thr_offsets[f]:thr_offsets[f+1]]``
    thr_offsets : (F + 1,) int64
    n_value_bins : (F,) int64 -- ``t_f + 1`` non-missing bins; the missing bin is
        ``n_value_bins[f]``
    feat_off : (F + 1,) int64 -- histogram offsets, ``n_value_bins + 1`` bins each
    """

    def __init__(self, thresholds, thr_offsets, max_bin, is_cat=None):
        self.thresholds = np.ascontiguousarray(thresholds, dtype=np.float64)
        self.thr_offsets = np.ascontiguousarray(thr_offsets, dtype=np.int64)
        self.max_bin = int(max_bin)
        self.n_value_bins = np.diff(self.thr_offsets) + 1
        self.missing_bin = self.n_value_bins.copy()
        self.feat_off = np.concatenate([[0], np.cumsum(self.n_value_bins + 1)]).astype(np.int64)
        self.dtype = binned_dtype(self.max_bin)
        self.is_cat = (np.zeros(self.n_value_bins.shape[0], np.uint8) if is_cat is None
                       else np.ascontiguousarray(is_cat, dtype=np.uint8))

    @property
    def cat_words(self):
        """uint64 words of a categorical split's bitset: every categorical feature's
        value bins and its missing bin fit (at least 1)."""
        nv = self.n_value_bins[self.is_cat != 0]
        return int(max(1, ((nv.max() + 1 + 63) // 64) if nv.size else 1))

    def with_categorical(self, features, n_codes):
        """This mapper with ``features`` made categorical: feature ``features[i]``'s
        codes ``0..n_codes[i]-1`` (float values) each get their own value bin
        (thresholds at ``c + 0.5``); NaN, the codes of everything else, gets the
        missing bin."""
        parts = [self.feature_thresholds(f) for f in range(self.n_features)]
        is_cat = self.is_cat.copy()
        for f, k in zip(features, n_codes):
            parts[f] = np.arange(max(int(k), 1) - 1) + 0.5
            is_cat[f] = 1
        offsets = np.concatenate([[0], np.cumsum([p.size for p in parts])]).astype(np.int64)
        thr = np.concatenate(parts) if parts else np.empty(0)
        return BinMapper(thr, offsets, self.max_bin, is_cat)

    @property
    def n_features(self):
        return self.n_value_bins.shape[0]

    @classmethod
    def from_summaries(cls, summaries, max_bin):
        buf = np.empty(max(max_bin - 1, 1))
        parts = []
        for s in summaries:
            k = _kernels.greedy_thresholds(s.values, s.weights, max_bin, buf)
            parts.append(buf[:k].copy())
        offsets = np.concatenate([[0], np.cumsum([p.size for p in parts])])
        thr = np.concatenate(parts) if parts else np.empty(0)
        return cls(thr, offsets, max_bin)

    @classmethod
    def fit(cls, X, max_bin, weights=None, random_state=0):
        """Thresholds from a deterministic row sample of ``X``; equal to
        ``from_summaries(summarize(X, ...))`` without materializing the summaries."""
        rows = binning_sample(X.shape[0], random_state=random_state)
        w = None if weights is None else _unit_or(np.ascontiguousarray(weights[rows],
                                                                       dtype=np.float64))
        n_features = X.shape[1]
        thr = np.empty((n_features, max(max_bin - 1, 1)))
        count = np.empty(n_features, np.int64)
        kernel = _pick(_kernels.find_thresholds, rows.shape[0] * n_features)
        n_chunks = numba.get_num_threads() if kernel is _kernels.find_thresholds else 1
        kernel(X, rows, w, max_bin, n_chunks, thr, count)
        offsets = np.concatenate([[0], np.cumsum(count)]).astype(np.int64)
        flat = np.concatenate([thr[f, :count[f]] for f in range(n_features)]) if n_features else np.empty(0)
        return cls(flat, offsets, max_bin)

    def feature_thresholds(self, f):
        return self.thresholds[self.thr_offsets[f]:self.thr_offsets[f + 1]]

    def split_thresholds(self, feature, bin_):
        """Raw thresholds of splits ``bin <= bin_`` on ``feature`` (int arrays): the
        threshold after value bin ``bin_``, +inf for the last value bin (every value
        goes left, only missing values can go right)."""
        feature = np.asarray(feature, np.int64)
        bin_ = np.asarray(bin_, np.int64)
        out = np.full(feature.shape, np.inf)
        has = bin_ < self.n_value_bins[feature] - 1
        out[has] = self.thresholds[self.thr_offsets[feature[has]] + bin_[has]]
        return out

    def transform_columns(self, X):
        """Column-major bin codes ``(F, n)`` uint8/uint16 of ``X`` (float32/float64,
        any order).

        A large ``X`` is binned in pieces of about ``TRANSFORM_CHUNK_CELLS`` cells, one
        kernel call each (the same codes): a numba kernel does not look at signals, so
        this bounds how long a Ctrl-C waits (``bonsai._interrupt``).  A C-ordered
        ``X`` is cut into row pieces, each binned straight into its columns of the
        result (a scratch piece copied into place cost 0.5 s of 2.3 s on 90k x 2000),
        any other order into feature pieces (contiguous views of both arrays); either
        way the kernels see the array types of a one-piece call, so nothing new is
        compiled."""
        n, n_features = X.shape
        out = np.empty((n_features, n), dtype=self.dtype)
        n_thr = np.diff(self.thr_offsets)
        use_table = bool(n_thr.size) and int(n_thr.max()) <= 255
        pad = np.full((n_features if use_table else 1, 256), np.inf)
        for f in range(n_features if use_table else 0):
            pad[f, :n_thr[f]] = self.feature_thresholds(f)
        coarse = np.ascontiguousarray(pad[:, 15::16])
        thr, offs = self.thresholds, self.thr_offsets
        zero = _kernels.zero_bins(thr, offs)
        sparse = mostly_zero(X) if use_table else np.zeros(1, np.uint8)
        if X.flags.c_contiguous:
            # row pieces written into place (a C-ordered piece is X's own array type)
            kernel = _kernels.map_to_bins
            step = max(1, TRANSFORM_CHUNK_CELLS // max(n_features, 1))
            for r0 in range(0, n, step):
                r1 = min(n, r0 + step)
                _pick(kernel, n * n_features)(X[r0:r1], thr, offs, pad, coarse, use_table,
                                              zero, sparse, r0, out)
        else:
            # pieces of at least 2 features (one piece when X is small enough): a
            # one-column view of an F-ordered X is both C- and F-contiguous, another
            # array type to numba
            kernel = _kernels.map_to_bins_by_column
            n_pieces = max(1, n_features // max(2, TRANSFORM_CHUNK_CELLS // n))
            cuts = [n_features * i // n_pieces for i in range(n_pieces + 1)]
            for f0, f1 in zip(cuts[:-1], cuts[1:]):
                p = (slice(f0, f1) if use_table else slice(0, 1))   # pad / coarse rows
                _pick(kernel, (f1 - f0) * n)(X[:, f0:f1], thr, offs[f0:f1 + 1], pad[p],
                                             coarse[p], use_table, zero[f0:f1], sparse[p],
                                             out[f0:f1])
        return out

    def to_dict(self):
        return {"max_bin": self.max_bin, "thresholds": self.thresholds.tolist(),
                "thr_offsets": self.thr_offsets.tolist(), "is_cat": self.is_cat.tolist()}
