"""The tree model: one tree as flat node arrays, and the concatenated ensemble layout
the predictors read.

A node ``i`` is a leaf when ``left[i] == -1``.  An internal node sends a row left when
``x[feature] <= threshold`` (``bin <= bin_threshold`` on binned data) and a missing
value left when ``default_left``.  ``value`` holds the (shrunk) leaf output for leaves
and the node's own output for internal nodes (for explanations later).

A vector-leaf tree (``multi_strategy="multi_output_tree"``) has ``value (n, K)``:
every node holds one value per output; ``gain`` (summed over the outputs) and
``cover`` (the hessian summed over the outputs) stay ``(n,)``.  ``Tree.output(k)`` is
its scalar view for output k.  The ensembles the predictors read (``concat``,
``concat_oblivious``) hold only scalar trees: a vector tree enters them as its K
views, output k with class k (``expand``), so every predictor adds the same float64
values in the same order as the equivalent one-output-per-tree model.

A categorical split (threshold NaN, bin_threshold -1, default_left 0) sends a row
left when its category code ``c`` (``bonsai.categorical``; on binned data the bin) is
in the node's bitset: bit ``c % 64`` of word ``cat_words[cat_ptr[i] + c // 64]``,
words ``cat_ptr[i]:cat_ptr[i+1]``.  Missing values, unseen and rare categories (NaN
codes) go right.  ``cat_ptr``/``cat_words`` are None in a tree without such splits.
"""
from typing import NamedTuple

import numpy as np

from ._dtypes import float32_floor
from .backends import kernels

FIELDS = (
    ("feature", np.int32), ("threshold", np.float64), ("bin_threshold", np.int32),
    ("default_left", np.uint8), ("left", np.int32), ("right", np.int32),
    ("value", np.float64), ("gain", np.float64), ("cover", np.float64), ("count", np.int64),
)


#: category codes a tree's bitsets may hold (bonsai.io's importers share the limit)
MAX_CATEGORY_CODE = 1 << 20
#: largest bin index of a numeric split (``max_bin`` <= 65535 value bins)
MAX_BIN_THRESHOLD = 65534


def _field(values, name, dtype):
    """``values`` as an array of ``dtype`` without silent conversion: an integer
    field must hold integers that fit it (a bool array for ``default_left``), a
    float field numbers; else ValueError naming the field."""
    try:
        raw = np.asarray(values)
    except (ValueError, TypeError) as e:
        raise ValueError(f"tree field {name!r} is not an array of numbers: {e}") from None
    integer = np.issubdtype(dtype, np.integer)
    kinds = ("iub" if name == "default_left" else "iu") if integer else "iuf"
    if raw.size and raw.dtype.kind not in kinds:
        raise ValueError(f"tree field {name!r} must hold "
                         f"{'integers' if integer else 'numbers'}, not {raw.dtype} values")
    if integer and raw.size and raw.dtype.kind != "b":
        info = np.iinfo(dtype)
        if raw.min() < info.min or raw.max() > info.max:
            raise ValueError(f"tree field {name!r} holds an integer outside [{info.min}, "
                             f"{info.max}]")
    return raw.astype(dtype)


class Tree(NamedTuple):
    feature: np.ndarray
    threshold: np.ndarray
    bin_threshold: np.ndarray
    default_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    gain: np.ndarray
    cover: np.ndarray
    count: np.ndarray
    oblivious: bool = False
    cat_ptr: np.ndarray = None     # (n + 1,) int64, or None
    cat_words: np.ndarray = None   # (W,) uint64, or None

    @property
    def n_nodes(self):
        return self.left.shape[0]

    @property
    def n_values(self):
        """K of a vector-leaf tree (``value (n, K)``), 1 for a scalar tree."""
        return 1 if self.value.ndim == 1 else int(self.value.shape[1])

    def output(self, k):
        """The scalar tree of output ``k``: the same node arrays with ``value[:, k]``
        (a contiguous copy); a scalar tree is its own output 0."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) \
                or not 0 <= k < self.n_values:
            raise ValueError(f"output k={k!r} is not in [0, {self.n_values})")
        if self.value.ndim == 1:
            return self
        return self._replace(value=np.ascontiguousarray(self.value[:, int(k)]))

    @property
    def n_leaves(self):
        return int(np.count_nonzero(self.left < 0))

    def cat_left(self, i):
        """The category codes a categorical node ``i`` sends left (sorted list)."""
        words = self.cat_words[self.cat_ptr[i]:self.cat_ptr[i + 1]]
        return [64 * w + b for w in range(words.shape[0]) for b in range(64)
                if (int(words[w]) >> b) & 1]

    def is_categorical(self):
        """(n,) bool: the categorical splits."""
        if self.cat_ptr is None:
            return np.zeros(self.n_nodes, bool)
        return np.diff(self.cat_ptr) > 0

    def arrays_cat(self):
        """(cat_ptr, cat_words) with empty bitsets for a tree without categorical splits."""
        if self.cat_ptr is None:
            return np.zeros(self.n_nodes + 1, np.int64), np.zeros(1, np.uint64)
        return self.cat_ptr, self.cat_words

    def to_dict(self):
        d = {name: getattr(self, name).tolist() for name, _ in FIELDS}
        d["oblivious"] = bool(self.oblivious)
        if self.cat_ptr is not None:
            cat = self.is_categorical()
            d["cat_left"] = [self.cat_left(i) if cat[i] else [] for i in range(self.n_nodes)]
        return d

    @classmethod
    def from_dict(cls, d, max_code=MAX_CATEGORY_CODE):
        """The checked tree of a ``to_dict`` mapping (raises ValueError).  Integer
        fields must hold integers within their dtype, the others numbers; category
        codes in "cat_left" must lie in ``[0, max_code)`` -- checked before any
        bitset is allocated, so the bitsets' size is bounded by ``max_code``."""
        if not isinstance(d, dict):
            raise ValueError(f"a tree must be a mapping of its fields, not {type(d).__name__}")
        arrays = {}
        n = None
        for name, dtype in FIELDS:
            a = _field(d[name], name, dtype)
            ndim_ok = a.ndim == 1 or (name == "value" and a.ndim == 2 and a.shape[1] >= 1)
            if not ndim_ok or (n is not None and a.shape[0] != n):
                raise ValueError(f"tree field {name!r} has a bad shape {a.shape}")
            n = a.shape[0]
            arrays[name] = a
        cat_ptr = cat_words = None
        if d.get("cat_left") is not None:
            cl = d["cat_left"]
            if not isinstance(cl, list) or len(cl) != n:
                raise ValueError("tree field 'cat_left' has a bad shape")
            sets = []
            for node, codes in enumerate(cl):
                if not isinstance(codes, list) or not all(
                        isinstance(c, (int, np.integer)) and not isinstance(c, bool)
                        for c in codes):
                    raise ValueError("tree field 'cat_left' must hold lists of integer "
                                     "category codes")
                codes = sorted({int(c) for c in codes})
                if codes and max_code == 0:
                    raise ValueError("tree field 'cat_left' has category codes, but the "
                                     "split features are not categorical (no category map)")
                if codes and (codes[0] < 0 or codes[-1] >= max_code):
                    bad = codes[0] if codes[0] < 0 else codes[-1]
                    raise ValueError(f"node {node}: 'cat_left' has category code {bad}, out "
                                     f"of range (codes lie in [0, {max_code}))")
                sets.append(codes)
            nw = [(c[-1] // 64 + 1) if c else 0 for c in sets]
            cat_ptr = np.concatenate([[0], np.cumsum(nw)]).astype(np.int64)
            cat_words = np.zeros(max(int(cat_ptr[-1]), 1), np.uint64)
            for i, codes in enumerate(sets):
                for c in codes:
                    cat_words[cat_ptr[i] + c // 64] |= np.uint64(1) << np.uint64(c % 64)
        oblivious = d.get("oblivious", False)
        if not isinstance(oblivious, (bool, np.bool_)):
            raise ValueError(f"tree field 'oblivious' must be true or false, not {oblivious!r}")
        tree = cls(**arrays, oblivious=bool(oblivious), cat_ptr=cat_ptr, cat_words=cat_words)
        tree.check()
        return tree

    def check(self):
        """Check of a loaded tree (raises ValueError): every child index in range (-1
        for both children of a leaf), every node reached once from the root, no cycles;
        finite leaf values, gains and covers, counts >= 0, ``default_left`` 0 or 1,
        ``bin_threshold`` in ``[-1, MAX_BIN_THRESHOLD]``."""
        n = self.n_nodes
        if n == 0:
            raise ValueError("tree has no nodes")
        v = self.value
        if not (v.ndim == 1 or (v.ndim == 2 and v.shape[1] >= 1)) or v.shape[0] != n:
            raise ValueError(f"tree value has shape {v.shape}; expected ({n},) or ({n}, K)")
        internal = self.left >= 0
        if (np.any(self.right[internal] < 0) or np.any(self.left >= n) or np.any(self.right >= n)
                or np.any(self.left < -1) or np.any(self.right[~internal] != -1)):
            raise ValueError("tree has a child index out of range")
        seen = np.zeros(n, bool)
        stack = [0]
        while stack:
            i = stack.pop()
            if seen[i]:
                raise ValueError("tree nodes do not form a tree")
            seen[i] = True
            if self.left[i] >= 0:
                stack.extend((int(self.left[i]), int(self.right[i])))
        if not seen.all():
            raise ValueError("tree has unreachable nodes")
        if np.any(self.feature[internal] < 0):
            raise ValueError("tree has a negative feature index")
        cat = self.is_categorical()
        if np.any(cat & ~internal):
            raise ValueError("tree has a categorical split on a leaf")
        if np.any((self.bin_threshold < -1) | (self.bin_threshold > MAX_BIN_THRESHOLD)):
            raise ValueError(f"tree has a bin_threshold outside [-1, {MAX_BIN_THRESHOLD}]")
        if np.any(self.default_left > 1):
            raise ValueError("tree has a default_left other than 0 or 1")
        if self.oblivious and not self._is_symmetric():
            raise ValueError("tree is marked oblivious but its levels do not share one split")
        if np.any(~np.isfinite(self.value)):
            raise ValueError("tree has a non-finite leaf value")
        if np.any(~np.isfinite(self.gain)) or np.any(~np.isfinite(self.cover)):
            raise ValueError("tree has a non-finite gain or cover")
        if np.any(self.count < 0):
            raise ValueError("tree has a negative count")

    def _is_symmetric(self):
        """Every level splits every node, all on one (feature, threshold, default)."""
        level = [0]
        cat = self.is_categorical()
        while True:
            internal = [i for i in level if self.left[i] >= 0]
            if not internal:
                return True
            if len(internal) != len(level):
                return False
            keys = {(int(self.feature[i]), repr(float(self.threshold[i])),
                     int(self.default_left[i]), tuple(self.cat_left(i)) if cat[i] else ())
                    for i in level}
            if len(keys) != 1:
                return False
            level = [int(c) for i in level for c in (self.left[i], self.right[i])]

    def max_feature(self):
        internal = self.left >= 0
        return int(self.feature[internal].max()) if internal.any() else -1


class Ensemble(NamedTuple):
    """Concatenated node arrays of many trees (see module docstring), plus the packed
    node records the batch predictor walks (``records``, see ``node_records``).
    ``cat_ptr (N + 1,)`` / ``cat_words`` are the categorical bitsets of every node
    (empty for numeric ones); ``has_cat`` says whether any exists, or a feature index
    is too wide for the packed records (``packable``): either way the predictor walks
    the node arrays (``predict.predict_nodes``), not the records.  The trees are
    scalar (a vector tree enters as its views, ``expand``); ``leaf_offset (M + 1,)``
    holds, for each of the M *model* trees, the node offset of its first view (what
    ``pred_leaf`` walks: one column per model tree), ``leaf_offset[M]`` the node
    count.  It equals ``tree_offset`` when no tree is a vector tree."""
    feature: np.ndarray
    threshold: np.ndarray
    default_left: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    tree_offset: np.ndarray
    tree_class: np.ndarray
    records: np.ndarray
    tree_depth: np.ndarray
    chunk_ptr: np.ndarray
    heaps: object = None    # backends.cpu.predict_binned.HeapLayout, or None
    cat_ptr: np.ndarray = None
    cat_words: np.ndarray = None
    has_cat: bool = False
    leaf_offset: np.ndarray = None


#: bytes of node records per tree chunk of the batch predictor (L2-resident)
TREE_CHUNK_BYTES = 256 * 1024


def _tree_chunks(sizes):
    """Tree chunk bounds so that each chunk's records fit in ``TREE_CHUNK_BYTES``."""
    bounds = [0]
    acc = 0
    for t, sz in enumerate(sizes):
        if acc and acc + 16 * sz > TREE_CHUNK_BYTES:
            bounds.append(t)
            acc = 0
        acc += 16 * sz
    bounds.append(len(sizes))
    return np.array(bounds, np.int64)


#: node record ``meta`` layout: (left child << 22) | (feature << 1) | default_left,
#: stored exactly in a float64 (< 2**53), 0 for a leaf
_FEATURE_BITS = 21
_MAX_FEATURES = 1 << _FEATURE_BITS


def packable(tree):
    """Whether ``node_records`` can pack the tree: every feature index below
    ``_MAX_FEATURES`` (2**21) and every child index below 2**31 (the meta word must
    stay below 2**53; ``MAX_LEAVES_LIMIT`` keeps a grown tree below 2**18 nodes)."""
    n = tree.n_nodes
    return not n or (tree.max_feature() < _MAX_FEATURES and n < 1 << 31)


def node_records(tree, pack=True):
    """One 16-byte record per node, children renumbered breadth-first so a node's
    two children are adjacent (right = left + 1).

    ``records[i, 0]`` is the threshold of an internal node or the value of a leaf;
    ``records[i, 1]`` is the float64-encoded meta word (see ``_FEATURE_BITS``).  One
    record is one load of 16 bytes per visited node.  Returns (records, depth).
    ``pack=False`` (a tree that is not ``packable``) leaves every meta word 0: such an
    ensemble is walked node by node (``Ensemble.has_cat``), never through its records.
    """
    n = tree.n_nodes
    if pack and not packable(tree):
        raise ValueError(f"node records hold at most {_MAX_FEATURES} features and 2**31 "
                         f"nodes a tree; this tree has {n} nodes and feature index "
                         f"{tree.max_feature()}")
    order = [0]
    new_id = np.zeros(n, np.int64)
    depth = np.zeros(n, np.int64)
    i = 0
    while i < len(order):
        old = order[i]
        if tree.left[old] >= 0:
            for c in (tree.left[old], tree.right[old]):
                new_id[c] = len(order)
                depth[c] = depth[old] + 1
                order.append(int(c))
        i += 1
    rec = np.zeros((n, 2))
    for new, old in enumerate(order):
        if tree.left[old] >= 0:
            rec[new, 0] = tree.threshold[old]
            if pack:
                meta = ((int(new_id[tree.left[old]]) << 22) | (int(tree.feature[old]) << 1)
                        | int(tree.default_left[old] != 0))
                rec[new, 1] = float(meta)
        else:
            rec[new, 0] = tree.value[old]
    return rec, int(depth.max()) if n else 0


def expand(trees, tree_class):
    """(scalar trees, their classes, first): every vector tree of ``trees`` replaced by
    its views ``output(0..K-1)`` with classes ``0..K-1``, in place (scalar trees are
    kept with their class); ``first (len(trees) + 1,)`` int64: the index of tree t's
    first view, ``first[-1]`` the number of views."""
    out, cls, first = [], [], [0]
    for t, c in zip(trees, tree_class):
        if t.value.ndim == 1:
            out.append(t)
            cls.append(int(c))
        else:
            out.extend(t.output(k) for k in range(t.n_values))
            cls.extend(range(t.n_values))
        first.append(len(out))
    return out, cls, np.array(first, np.int64)


def concat(trees, tree_class):
    """The ``Ensemble`` of ``trees`` (scalar or vector; see ``expand``)."""
    trees, tree_class, first = expand(trees, tree_class)
    if not trees:
        z = np.zeros(0)
        return Ensemble(z.astype(np.int32), z, z.astype(np.uint8), z.astype(np.int32),
                        z.astype(np.int32), z, np.zeros(1, np.int64), z.astype(np.int32),
                        np.zeros((0, 2)), np.zeros(0, np.int64), np.zeros(1, np.int64),
                        None, np.zeros(1, np.int64), np.zeros(1, np.uint64), False,
                        np.zeros(1, np.int64))
    # models the packed records cannot hold (a feature index past 2**21) are walked
    # node by node, as models with categorical splits are
    pack = all(packable(t) for t in trees)
    has_cat = any(t.cat_ptr is not None for t in trees) or not pack
    ptrs, words, base = [np.zeros(1, np.int64)], [], 0
    for t in trees:
        p, w = t.arrays_cat()
        ptrs.append(p[1:] + base)
        used = int(p[-1])
        words.append(w[:used])
        base += used
    cat_ptr = np.concatenate(ptrs)
    cat_words = np.concatenate(words + [np.zeros(1, np.uint64)])
    sizes = [t.n_nodes for t in trees]
    recs = [node_records(t, pack) for t in trees]
    arrays = (
        np.concatenate([t.feature for t in trees]),
        np.concatenate([t.threshold for t in trees]),
        np.concatenate([t.default_left for t in trees]),
        np.concatenate([t.left for t in trees]),
        np.concatenate([t.right for t in trees]),
        np.concatenate([t.value for t in trees]),
        np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64),
    )
    cls = np.asarray(tree_class, dtype=np.int32)
    depth = np.array([d for _, d in recs], np.int64)
    heaps = None if has_cat else kernels("predict_binned").heap_layout(*arrays, depth, cls)
    return Ensemble(*arrays, cls, np.ascontiguousarray(np.concatenate([r for r, _ in recs])),
                    depth, _tree_chunks(sizes), heaps, cat_ptr, cat_words, has_cat,
                    np.ascontiguousarray(arrays[6][first]))


class ObliviousEnsemble(NamedTuple):
    level_feature: np.ndarray
    level_threshold: np.ndarray
    level_threshold32: np.ndarray   # float32, rounded down: exact for float32 inputs
    level_default_left: np.ndarray
    level_offset: np.ndarray
    leaf_value: np.ndarray
    leaf_offset: np.ndarray
    tree_class: np.ndarray
    level_cat_ptr: np.ndarray = None     # (L + 1,) int64: level's bitset words
    level_cat_words: np.ndarray = None


def _oblivious_levels(tree):
    """(features, thresholds, default_left, leaf values in bit order, bitsets) of a
    symmetric tree (a level's bitset: its uint64 words, empty for a numeric split)."""
    feats, thrs, dls, bits = [], [], [], []
    cat = tree.is_categorical()
    node = 0
    while tree.left[node] >= 0:
        feats.append(tree.feature[node])
        thrs.append(tree.threshold[node])
        dls.append(tree.default_left[node])
        bits.append(tree.cat_words[tree.cat_ptr[node]:tree.cat_ptr[node + 1]] if cat[node]
                    else np.zeros(0, np.uint64))
        node = tree.left[node]
    depth = len(feats)
    leaves = np.empty(2 ** depth)
    for code in range(2 ** depth):
        node = 0
        for lv in range(depth):
            bit = (code >> (depth - 1 - lv)) & 1
            node = tree.right[node] if bit else tree.left[node]
        leaves[code] = tree.value[node]
    return feats, thrs, dls, leaves, bits


def concat_oblivious(trees, tree_class):
    """The ``ObliviousEnsemble`` of symmetric ``trees`` (vector trees as their views)."""
    trees, tree_class, _ = expand(trees, tree_class)
    parts = [_oblivious_levels(t) for t in trees]
    depths = [len(p[0]) for p in parts]
    thr = np.asarray([x for p in parts for x in p[1]], dtype=np.float64)
    return ObliviousEnsemble(
        np.asarray([f for p in parts for f in p[0]], dtype=np.int32),
        thr, float32_floor(thr),
        np.asarray([x for p in parts for x in p[2]], dtype=np.uint8),
        np.concatenate([[0], np.cumsum(depths)]).astype(np.int64),
        np.concatenate([p[3] for p in parts]) if parts else np.zeros(0),
        np.concatenate([[0], np.cumsum([2 ** d for d in depths])]).astype(np.int64),
        np.asarray(tree_class, dtype=np.int32),
        np.concatenate([[0], np.cumsum([b.size for p in parts for b in p[4]])]).astype(np.int64),
        np.concatenate([b for p in parts for b in p[4]] + [np.zeros(1, np.uint64)]),
    )
