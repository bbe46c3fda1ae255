"""The node table of the tree being grown.

One row per node in numpy arrays with spare capacity: the grow loop writes the root
and the oblivious level splits, and the backend's split step (``split_nodes``) writes
the children of every node it splits, in compiled code.  Node ids are row numbers;
children always get larger ids than their parent.

``ints (capacity, N_COLS) int64`` holds the integer fields (column constants below):
``START:STOP`` is the node's range of this shard's sample indices, ``COUNT`` its row
count over every shard (the one the split decisions and the tree use; with one
shard, ``STOP - START``),
``gain (capacity,) float64`` the best split's gain (-inf: no valid split),
``sums`` and ``left_sums (capacity, 3) int64`` the node's and its best split's left
(grad, hess, count) sums in the histogram's fixed point, and ``bits (capacity, W)
uint64`` a categorical split's left categories (its ``BIN`` is -1; bit b: bin b).

``tree_fields`` turns the grown rows into a tree's node arrays in one compiled pass,
and ``shrink_values`` shrinks its values by the learning rate and returns their range
(what the divergence check reads) in another.
"""
import numpy as np
from numba import njit

START, STOP, DEPTH, PARENT, LEFT, RIGHT, SLOT, FEATURE, BIN, DEFAULT_LEFT, COUNT = range(11)
N_COLS = 11
#: a fresh row: no children, no histogram slot, no split, no rows
_BLANK = np.array([0, 0, 0, -1, -1, -1, -1, -1, -1, 0, 0], np.int64)


class NodeTable:
    """Rows ``0..n-1`` are the nodes grown so far (``reset`` starts a new tree)."""

    def __init__(self, capacity=64, cat_words=1):
        self.n = 0
        self.ints = np.empty((0, N_COLS), np.int64)
        self.gain = np.empty(0)
        self.sums = np.empty((0, 3), np.int64)
        self.left_sums = np.empty((0, 3), np.int64)
        self.bits = np.empty((0, cat_words), np.uint64)
        self.reserve(capacity)

    def reset(self):
        self.n = 0

    def __len__(self):
        return self.n

    def reserve(self, k):
        """Make room for ``k`` more rows (doubling: amortised O(1) per node)."""
        cap = self.ints.shape[0]
        if self.n + k <= cap:
            return
        new = max(2 * cap, self.n + k, 8)
        for name, shape, dtype in (("ints", (new, N_COLS), np.int64), ("gain", (new,), float),
                                   ("sums", (new, 3), np.int64),
                                   ("left_sums", (new, 3), np.int64),
                                   ("bits", (new, self.bits.shape[1]), np.uint64)):
            a = np.zeros(shape, dtype)
            a[:self.n] = getattr(self, name)[:self.n]
            setattr(self, name, a)

    def add(self, start, stop, depth, parent, count):
        """A new row (the root) of ``count`` rows over every shard; returns its id."""
        self.reserve(1)
        i = self.n
        self.ints[i] = _BLANK
        self.ints[i, START] = start
        self.ints[i, STOP] = stop
        self.ints[i, DEPTH] = depth
        self.ints[i, PARENT] = parent
        self.ints[i, COUNT] = count
        self.gain[i] = -np.inf
        self.sums[i] = 0
        self.left_sums[i] = 0
        self.bits[i] = 0
        self.n += 1
        return i


@njit(cache=True, nogil=True)
def tree_fields(ints, gain, sums, bits, n, n_value_bins, thresholds, thr_offsets,
                grad_scale, hess_scale):
    """A grown tree's node arrays from the table's first ``n`` rows, in one pass (a
    tree is finished once per output and round, so on small data the ~30 numpy calls
    this replaces cost about as much as the tree's splits).

    ``n_value_bins (F,)``, ``thresholds`` and ``thr_offsets (F + 1,)`` are the bin
    mapper's: a numeric split ``bin <= b`` on feature f has the raw threshold
    ``thresholds[thr_offsets[f] + b]``, or +inf after the last value bin (only missing
    values go right).  A leaf has feature and bin -1, default_left 0, gain 0 and
    threshold 0; a categorical split (bin -1) has threshold NaN.

    ``sums (n, 3)`` are the nodes' fixed-point (grad, hess, count) cells: ``grad_sum``
    and ``cover`` are their first two columns over ``grad_scale`` / ``hess_scale``
    (float64 divisions, as numpy's ``sums[:, 0] / grad_scale``).  ``bits (n, W)`` are
    the categorical splits' left sets: a categorical node keeps the ``ceil(
    n_value_bins[feature] / 64)`` words its feature needs, node i's from
    ``cat_words[cat_ptr[i]]`` (``cat_ptr (n + 1,)``; ``cat_words`` holds at least one
    word, all zero when no split is categorical).

    Returns (feature, bin, default_left, left, right (n,) int32/uint8, count (n,)
    int64, gain, threshold (n,) float64, n_categorical, leaves (L,) int64 in node
    order, leaf_start, leaf_stop (L,) int64: each leaf's range of the sample indices,
    grad_sum, cover (n,) float64, cat_ptr (n + 1,) int64, cat_words uint64).
    """
    feature = np.full(n, -1, np.int32)
    bin_thr = np.full(n, -1, np.int32)
    default_left = np.zeros(n, np.uint8)
    left = np.empty(n, np.int32)
    right = np.empty(n, np.int32)
    count = np.empty(n, np.int64)
    g = np.zeros(n)
    threshold = np.zeros(n)
    grad_sum = np.empty(n)
    cover = np.empty(n)
    cat_ptr = np.zeros(n + 1, np.int64)
    n_cat = 0
    n_leaves = 0
    for i in range(n):
        left[i] = ints[i, LEFT]
        right[i] = ints[i, RIGHT]
        count[i] = ints[i, COUNT]
        grad_sum[i] = np.float64(sums[i, 0]) / grad_scale
        cover[i] = np.float64(sums[i, 1]) / hess_scale
        cat_ptr[i + 1] = cat_ptr[i]
        if ints[i, LEFT] < 0:
            n_leaves += 1
            continue
        f = ints[i, FEATURE]
        b = ints[i, BIN]
        feature[i] = f
        bin_thr[i] = b
        default_left[i] = ints[i, DEFAULT_LEFT]
        g[i] = gain[i]
        if b < 0:
            threshold[i] = np.nan
            n_cat += 1
            cat_ptr[i + 1] += (n_value_bins[f] + 63) // 64
        elif b < n_value_bins[f] - 1:
            threshold[i] = thresholds[thr_offsets[f] + b]
        else:
            threshold[i] = np.inf
    cat_words = np.zeros(max(cat_ptr[n], 1), np.uint64)
    if n_cat:
        for i in range(n):
            for w in range(cat_ptr[i + 1] - cat_ptr[i]):
                cat_words[cat_ptr[i] + w] = bits[i, w]
    leaves = np.empty(n_leaves, np.int64)
    leaf_start = np.empty(n_leaves, np.int64)
    leaf_stop = np.empty(n_leaves, np.int64)
    k = 0
    for i in range(n):
        if ints[i, LEFT] < 0:
            leaves[k] = i
            leaf_start[k] = ints[i, START]
            leaf_stop[k] = ints[i, STOP]
            k += 1
    return (feature, bin_thr, default_left, left, right, count, g, threshold, n_cat, leaves,
            leaf_start, leaf_stop, grad_sum, cover, cat_ptr, cat_words)


@njit(cache=True, nogil=True)
def shrink_values(value, rate):
    """``value *= rate`` in place (1-D float64: the same products as numpy's) and the
    (smallest, largest) product; both NaN when a product is NaN (as numpy's min and
    max), +-inf when one is infinite.  One compiled call a tree instead of numpy's
    multiply, min and max, each slower on a tree's few values than the work (the
    round's Python runs with cold caches after the split step: on agaricus, 300
    rounds, the divergence check alone took 6-7 ms of a 0.10 s fit)."""
    lo = np.inf
    hi = -np.inf
    nan = False
    for i in range(value.shape[0]):
        v = value[i] * rate
        value[i] = v
        if v != v:
            nan = True
        lo = min(lo, v)
        hi = max(hi, v)
    if nan:
        return np.nan, np.nan
    return lo, hi
