"""``DaskDataset``: a data set held by Dask workers, binned where it lives.

Binning never moves raw rows:

1. every partition computes, where it lives, its row count, then one mergeable
   weighted quantile summary per feature (``bonsai.binning.summarize`` over its
   share of ``binning.SAMPLE_ROWS`` sampled rows, ``sample_sizes``; weights scaled to
   the partition's rows, pruned to ``SUMMARY_SIZE`` entries) and, for each
   categorical column, its category counts (over all its rows);
2. the driver merges the summaries in partition order into one set of bin edges
   and the counts into one category -> code map (the rule of
   ``CategoryMap.fit``: decreasing count, ties in category order), the *template*:
   a row-less ``bonsai.Dataset`` holding only the binning;
3. every partition is binned with the template where it lives (a
   ``bonsai.Dataset(part, reference=template)`` without its raw data), and those
   binned partitions stay on the workers (futures) for the fit.

The edges depend on the partitioning only (not on the number of workers or where
the partitions are): the same collection gives the same bins on any cluster, and
``bonsai.Dataset(X_local, label=y, reference=dd.template)`` bins local data exactly
as the workers did.  Empty partitions are dropped.
"""
import numpy as np

from .. import binning
from ..binning import BinMapper, QuantileSummary
from ..categorical import CategoryMap, _py, resolve_features
from ..data import is_integer
from ..dataset import Dataset, check_feature_names

#: entries a partition's per-feature summary keeps (exact below this many distinct
#: values), and the size the merged summary is pruned to after every merge
SUMMARY_SIZE = 4096


def _dask_kind(x):
    """"array", "frame", "series" or None for what is not a dask collection."""
    import dask.array as da
    import dask.dataframe as dd
    if isinstance(x, da.Array):
        return "array"
    if isinstance(x, dd.DataFrame):
        return "frame"
    if isinstance(x, dd.Series):
        return "series"
    return None


def matrix_kind(X, name):
    """``"array"`` (a 2-D dask Array chunked along rows only) or ``"frame"`` (a dask
    DataFrame), else a TypeError / ValueError naming ``name``."""
    import dask.array as da
    import dask.dataframe as dd
    if isinstance(X, da.Array):
        if X.ndim != 2:
            raise ValueError(f"{name} must be a 2-D dask array (rows, features), got "
                             f"shape {X.shape}")
        if len(X.chunks[1]) != 1 or np.isnan(X.shape[1]):
            raise ValueError(f"{name}: every chunk must span all {X.shape[1]} columns, got "
                             f"column chunks {X.chunks[1]}; rechunk with "
                             f"{name}.rechunk({{1: -1}})")
        return "array"
    if isinstance(X, dd.DataFrame):
        return "frame"
    raise TypeError(f"{name} must be a dask.array.Array or a dask.dataframe.DataFrame, got "
                    f"{type(X).__module__}.{type(X).__name__}")


def _partitions(x, name, n_parts=None, chunks=None):
    """The list of ``x``'s row partitions as dask delayed objects (a ValueError or
    TypeError naming ``name`` when ``x`` is not a row-partitioned dask collection, or
    is partitioned unlike the data)."""
    kind = _dask_kind(x)
    if kind is None:
        raise TypeError(f"{name} must be a dask array or dask DataFrame/Series, got "
                        f"{type(x).__name__}")
    if kind == "array":
        if x.ndim == 2 and len(x.chunks[1]) > 1:
            raise ValueError(f"{name}: a dask array must be chunked along rows only (one "
                             f"chunk across its {x.shape[1]} columns), got column chunks "
                             f"{x.chunks[1]}; use {name}.rechunk({{1: -1}})")
        if x.ndim not in (1, 2):
            raise ValueError(f"{name} must be 1-D or 2-D, got shape {x.shape}")
        if chunks is not None and tuple(x.chunks[0]) != tuple(chunks):
            raise ValueError(f"{name} is chunked {x.chunks[0]} along rows, the data "
                             f"{tuple(chunks)}: partition it like the data")
        parts = list(x.to_delayed().ravel())
    else:
        parts = list(x.to_delayed())
    if n_parts is not None and len(parts) != n_parts:
        raise ValueError(f"{name} has {len(parts)} partitions but the data has {n_parts}: "
                         "partition it like the data")
    return parts


def sample_sizes(sizes, total=None):
    """Rows each partition's summaries are built from: its share of
    ``binning.SAMPLE_ROWS`` (at least 1 row of a non-empty partition, at most all of
    them), so the whole data set is summarized from about as many rows as a local
    ``Dataset`` samples, however it is partitioned."""
    sizes = np.asarray(sizes, np.int64)
    total = int(sizes.sum()) if total is None else total
    share = np.ceil(binning.SAMPLE_ROWS * sizes / max(total, 1)).astype(np.int64)
    return np.minimum(sizes, np.maximum(share, np.minimum(sizes, 1)))


def _scan_part(X, w, categorical_features, sample_rows, random_state):
    """Phase 1 on one partition: (rows, feature names, pandas categories, per-feature
    summaries or None, category counts {feature: {value: count}})."""
    from ..data import to_matrix
    n = len(X)
    if n == 0:
        return 0, None, None, None, None
    M, names, pd_cats = to_matrix(X, with_categories=True)
    w = None if w is None else np.asarray(w, dtype=np.float64).reshape(-1)
    if w is not None and w.shape[0] != n:
        raise ValueError(f"weight has {w.shape[0]} rows in a partition of {n} rows: "
                         "partition it like the data")
    m = min(n, sample_rows)
    sums = binning.summarize(M, w, sample_rows=sample_rows, random_state=random_state)
    scale = n / m
    sums = [QuantileSummary(s.values, s.weights * scale).prune(SUMMARY_SIZE) for s in sums]
    feats = resolve_features(categorical_features, names, M.shape[1], pd_cats)
    counts = {}
    for j in feats:
        col = M[:, j]
        ok = ~np.isnan(col)
        if j in pd_cats:
            c = np.bincount(col[ok].astype(np.int64), minlength=len(pd_cats[j]))
            counts[j] = {_py(v): int(k) for v, k in zip(pd_cats[j], c)}
        else:
            if np.isinf(col).any():
                raise ValueError(f"categorical feature {j} has an infinite value; categories "
                                 "must be finite numbers (NaN for missing)")
            uniq, c = np.unique(col[ok], return_counts=True)
            counts[j] = {_py(v): int(k) for v, k in zip(uniq, c)}
    cats = {j: [_py(v) for v in c] for j, c in pd_cats.items()}
    return n, names, cats, sums, counts


def _merge_categories(scans, feats):
    """The CategoryMap of the concatenated partitions from their counts."""
    cats = []
    for j in feats:
        total = {}
        order = None
        for n, _, pd_cats, _, counts in scans:
            if not n:
                continue
            if j in pd_cats:
                if order is None:
                    order = pd_cats[j]
                elif pd_cats[j] != order:
                    raise ValueError(
                        f"data: column {j}'s categories differ between partitions; give the "
                        "dask DataFrame known, equal categories (df[col].cat.as_known() or "
                        "astype(pd.CategoricalDtype(categories)))")
            for v, k in counts[j].items():
                total[v] = total.get(v, 0) + k
        values = order if order is not None else sorted(total)
        counts = np.array([total.get(v, 0) for v in values], np.int64)
        rank = np.argsort(-counts, kind="stable")
        cats.append([values[i] for i in rank[counts[rank] > 0]])
    return CategoryMap(feats, cats)


def _label_part(y):
    """A partition's labels as ``Dataset`` takes them: 1-D, or (n, K) for a 2-D label of
    K >= 2 columns (rows on axis 0)."""
    y = np.asarray(y)
    return y if y.ndim == 2 and y.shape[1] > 1 else y.reshape(-1)


def _bin_part(X, y, w, s, template):
    """Phase 2 on one partition: its binned Dataset (no raw data kept)."""
    ds = Dataset(X, label=None if y is None else _label_part(y),
                 weight=None if w is None else np.asarray(w).reshape(-1),
                 init_score=None if s is None else np.asarray(s), reference=template)
    ds.data = None
    ds.reference = None
    return ds


class DaskDataset:
    """Training or validation data held by a Dask cluster, binned on the workers.

    Parameters
    ----------
    client : distributed.Client, or None for the default client
    data : dask array (n, F), chunked along rows only, or dask DataFrame (numeric and
        ``category`` columns; categories must be known and equal in every partition)
    label, weight : dask array or Series partitioned like ``data``, optional (``label``
        may be an (n, K) dask array or DataFrame for the multi-output objectives)
    init_score : dask array (n,) or (n, K), or Series / DataFrame, partitioned like
        ``data``, optional
    feature_names, categorical_features, max_bin, random_state : as ``bonsai.Dataset``
    reference : DaskDataset, optional -- bin with its edges (validation data)

    Attributes
    ----------
    template : a row-less ``bonsai.Dataset`` with the bin edges and categories
    parts : futures of the binned non-empty partitions, in partition order
    starts : (P,) int64 -- the global row id of each part's first row
    n_rows, n_features
    """

    def __init__(self, client, data, label=None, weight=None, init_score=None, *,
                 feature_names=None, categorical_features=None, max_bin=255,
                 reference=None, random_state=0):
        from distributed import default_client, wait
        client = default_client() if client is None else client
        if not is_integer(max_bin) or not 2 <= max_bin <= 65535:
            raise ValueError(f"max_bin must be an integer in [2, 65535], got {max_bin!r}")
        if reference is not None and not isinstance(reference, DaskDataset):
            raise TypeError(f"reference must be a bonsai.dask.DaskDataset, got "
                            f"{type(reference).__name__}")
        kind = matrix_kind(data, "data")
        parts_X = _partitions(data, "data")
        chunks = data.chunks[0] if kind == "array" else None
        side = {}
        for nm, v in (("label", label), ("weight", weight), ("init_score", init_score)):
            side[nm] = None if v is None else _partitions(v, nm, len(parts_X), chunks)
        self.client = client
        self.has_label = label is not None
        # the dtype bonsai.Dataset keeps a label in: float32 stays float32
        self.label_dtype = (np.float32 if label is not None and np.dtype(label.dtype) == np.float32
                            else np.float64)
        # 1 for a 1-D label (or one column), K for an (n, K) multi-output label
        self.label_columns = (int(label.shape[1]) if label is not None
                              and len(getattr(label, "shape", ())) == 2 else 1)
        self.has_weight = weight is not None
        self.init_columns = None
        if init_score is not None:
            shape = getattr(init_score, "shape", None)
            self.init_columns = (1 if len(shape) == 1 else shape[1]) if shape is not None else 1
        futs_X = client.compute(parts_X)
        futs = {nm: None if p is None else client.compute(p) for nm, p in side.items()}
        wait(futs_X)
        who = client.who_has(futs_X)
        homes = [sorted(who.get(f.key) or ())[:1] or None for f in futs_X]

        def where_it_lives(fn, *args):
            """``fn`` on every partition, on the worker holding it."""
            return [client.submit(fn, *a, workers=h, allow_other_workers=True, pure=False)
                    for h, a in zip(homes, zip(*args))]
        n = len(futs_X)
        sizes = np.asarray(client.gather(where_it_lives(len, futs_X)), np.int64)
        if reference is None:
            w_futs = futs["weight"] or [None] * n
            scans = client.gather(where_it_lives(
                _scan_part, futs_X, w_futs, [categorical_features] * n,
                sample_sizes(sizes).tolist(), [random_state] * n))
            self.template = self._template(scans, feature_names, categorical_features, max_bin,
                                           random_state)
        else:
            self.template = reference.template
        keep = np.flatnonzero(sizes > 0)
        if keep.size == 0:
            raise ValueError("data is empty: every partition has 0 rows")
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        tmpl = client.scatter(self.template, broadcast=True, hash=False)

        def pick(lst):
            return [None] * keep.size if lst is None else [lst[i] for i in keep]
        homes = [homes[i] for i in keep]
        self.parts = where_it_lives(_bin_part, pick(futs_X), pick(futs["label"]),
                                    pick(futs["weight"]), pick(futs["init_score"]),
                                    [tmpl] * keep.size)
        self.starts = starts[keep].astype(np.int64)
        self.sizes = sizes[keep]
        self.n_rows = int(sizes.sum())
        self.n_features = self.template.n_features
        # the binned parts hold what the fit needs; the raw partitions go with this call
        wait(self.parts)
        for f in self.parts:
            if f.status == "error":
                f.result()            # a partition's binning error, re-raised here

    @staticmethod
    def _template(scans, feature_names, categorical_features, max_bin, random_state):
        live = [s for s in scans if s[0]]
        if not live:
            raise ValueError("data is empty: every partition has 0 rows")
        names = live[0][1]
        for s in live[1:]:
            if s[1] != names:
                raise ValueError("data: the partitions' column names differ")
        n_features = len(live[0][3])
        names = check_feature_names(feature_names, names, n_features)
        merged = None
        for s in live:
            sums = s[3]
            merged = sums if merged is None else [
                a.merge(b).prune(SUMMARY_SIZE) for a, b in zip(merged, sums)]
        bm = BinMapper.from_summaries(merged, max_bin)
        feats = resolve_features(categorical_features, names, n_features, live[0][2])
        categories = None
        if feats:
            categories = _merge_categories(scans, feats)
            bm = bm.with_categorical(categories.features,
                                     [min(categories.n_codes(i), max_bin)
                                      for i in range(len(feats))])
        return Dataset._template(bm, names, categories, random_state)

    def empty(self):
        """The zero-row label / weight / init_score a rank holding none of these rows
        stacks (``Dataset._stack``)."""
        out = {}
        if self.has_label:
            out["label"] = np.empty((0,) if self.label_columns == 1 else
                                    (0, self.label_columns), self.label_dtype)
        if self.has_weight:
            out["weight"] = np.empty(0, np.float64)
        if self.init_columns is not None:
            out["init_score"] = np.empty((0,) if self.init_columns == 1 else
                                         (0, self.init_columns), np.float64)
        return out
