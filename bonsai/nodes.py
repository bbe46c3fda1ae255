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
"""
import numpy as np

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
