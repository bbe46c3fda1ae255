"""The CPU backend: the narrow protocol the grow loop calls, over numba kernels.

Functions here plan work (which rows each thread takes) and call the kernels in
``histogram``, ``split``, ``partition`` and ``predict``.  Work is split by rows into
``n_threads`` equal pieces over the concatenated node ranges, so every thread gets
the same number of rows whatever the node sizes; because histogram cells are
integers, the result does not depend on that split.
"""
import numpy as np

from ... import _profile
from ..._dtypes import FIXED_POINT_BITS, HIST, N_HIST_CHANNELS, count_bits, fixed_point_scale
from . import histogram as _hist
from . import partition as _part
from . import predict as _pred
from . import predict_binned as _heaps
from . import split as _split
from . import step as _step

NAME = "cpu"
#: below this many rows per thread a level runs on one thread: a parallel region
#: costs tens of microseconds, about what one thread needs for ~4k rows x 28 features.
MIN_ROWS_PER_THREAD = 4096
#: the same for the partition, whose work is ~2 ns a row (a histogram row costs
#: 10-30 ns): below this many rows per thread its two parallel regions cost more
#: than they save (leafwise splits one mid-size node at a time)
MIN_PARTITION_ROWS_PER_THREAD = 32768
#: split finding scans every bin of every node; in parallel only from this many nodes
MIN_PARALLEL_SPLIT_NODES = 4


class HistogramPool:
    """Histogram slots ``(capacity, n_bins_total, 2)`` int64 with a free list.

    The pool lives for a whole fit, so histograms are allocated once, not per node.
    """

    def __init__(self, n_bins_total, capacity=8, channels=N_HIST_CHANNELS):
        self.n_bins_total = int(n_bins_total)
        self.channels = int(channels)
        self.hist = np.zeros((capacity, self.n_bins_total, self.channels), dtype=HIST)
        self.free = list(range(capacity - 1, -1, -1))

    def alloc(self):
        if not self.free:
            old = self.hist
            cap = old.shape[0]
            self.hist = np.zeros((2 * cap, self.n_bins_total, self.channels), dtype=HIST)
            self.hist[:cap] = old
            self.free = list(range(2 * cap - 1, cap - 1, -1))
        return self.free.pop()

    def release(self, slot):
        self.free.append(int(slot))

    def scratch(self, n):
        """``n`` slots reserved for the whole fit (thread pieces of the split step)."""
        s = getattr(self, "_scratch", None)
        if s is None or s.shape[0] < n:
            extra = [self.alloc() for _ in range(n - (0 if s is None else s.shape[0]))]
            s = np.array(([] if s is None else list(s)) + extra, np.int64)
            self._scratch = s
        return s[:n]


_EMPTY_PLAN = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
               np.zeros(2, np.int64))


def plan_pieces(starts, stops, n_threads, min_rows=None):
    """Cut the concatenated ranges ``[starts[i], stops[i])`` into per-thread pieces.

    Returns (piece_node, piece_start, piece_stop, thread_ptr): pieces of one node are
    consecutive and in row order; thread ``j`` owns pieces
    ``thread_ptr[j]:thread_ptr[j+1]``.
    """
    min_rows = MIN_ROWS_PER_THREAD if min_rows is None else min_rows
    if starts.shape[0] == 1:  # one node (leaf-wise): equal row pieces, no numpy searches
        a, b = int(starts[0]), int(stops[0])
        n_t = int(max(1, min(n_threads, (b - a) // min_rows)))
        if b == a:
            return _EMPTY_PLAN
        cuts = [a + ((b - a) * j) // n_t for j in range(n_t + 1)]
        return (np.zeros(n_t, np.int64), np.array(cuts[:-1], np.int64),
                np.array(cuts[1:], np.int64), np.arange(n_t + 1, dtype=np.int64))
    sizes = stops - starts
    total = int(sizes.sum())
    n_t = int(max(1, min(n_threads, total // min_rows)))
    if n_t == 1:  # one thread: each non-empty node is one piece (the common small case)
        node = np.flatnonzero(sizes > 0)
        return (node.astype(np.int64), starts[node].astype(np.int64),
                stops[node].astype(np.int64), np.array([0, node.shape[0]], np.int64))
    cum = np.concatenate([[0], np.cumsum(sizes)])
    cuts = (total * np.arange(1, n_t, dtype=np.int64)) // n_t
    bounds = np.unique(np.concatenate([cum, cuts]))
    a = bounds[:-1]
    b = bounds[1:]
    node = np.searchsorted(cum, a, side="right") - 1
    piece_start = starts[node] + (a - cum[node])
    piece_stop = piece_start + (b - a)
    thread = np.searchsorted(cuts, a, side="right")
    thread_ptr = np.searchsorted(thread, np.arange(n_t + 1), side="left").astype(np.int64)
    return node.astype(np.int64), piece_start.astype(np.int64), piece_stop.astype(np.int64), thread_ptr


def quantize(grad, hess, n_rows, out, quant_bins=0, seed=0):
    """Integer (grad, hess) cells of one output, for ``n_rows`` sampled rows.

    ``out (n, 2)``: exact fixed point, (grad, hess * 2**count_bits + count).
    ``out (n, 1)``: quantized mode, grad and hess stochastically rounded to at most
    ``quant_bins`` levels and packed as ``g * 2**32 + h`` (one add per cell);
    ``quant_bins`` is lowered so that ``n_rows * quant_bins < 2**31``.

    Returns ``scales = [grad scale, hess scale, count_bits, packed, 1 / grad scale,
    1 / hess scale]`` (float64), which every split kernel takes to turn cells back
    into sums (exact-mode scales are powers of two: their reciprocals are exact).
    """
    m = np.zeros(2)
    if grad.size:
        _pick(_hist.max_abs, grad.shape[0] >= MIN_ROWS_PER_THREAD)(grad, hess, m)
    max_g, max_h = float(m[0]), float(m[1])
    if not (np.isfinite(max_g) and np.isfinite(max_h)):
        raise FloatingPointError("non-finite gradient or hessian")
    if out.shape[1] == 1:
        if hess.size and float(np.min(hess)) < 0.0:
            raise ValueError("quantized_grad needs non-negative hessians; the objective "
                             "returned a negative one")
        q = float(max(1, min(quant_bins, (2 ** 31 - 1) // max(n_rows, 1) - 1)))
        sg = q / max_g if max_g > 0 else 1.0
        sh = q / max_h if max_h > 0 else 1.0
        _pick(_hist.quantize_packed, grad.shape[0] >= MIN_ROWS_PER_THREAD)(
            grad, hess, sg, sh, np.uint64(seed), out)
        return np.array([sg, sh, 0.0, 1.0, 1.0 / sg, 1.0 / sh])
    cb = count_bits(n_rows)
    sg = fixed_point_scale(max_g, n_rows)
    sh = fixed_point_scale(max_h, n_rows, FIXED_POINT_BITS - cb)
    _hist.quantize_gradients(grad, hess, sg, sh, cb, out)
    return np.array([sg, sh, float(cb), 0.0, 1.0 / sg, 1.0 / sh])


_ZERO1 = np.zeros(1, np.int64)          # read-only plan constants of one-node calls
_PTR01 = np.array([0, 1], np.int64)
_PLAN_CONST = {}


def _plan_const(n_t, n_blocks):
    """Cached read-only plan arrays of ``n_t`` pieces over all ``n_blocks`` blocks:
    (block_lo zeros, block_hi, thread_ptr 0..n_t, merge pointer [0, n_t - 1])."""
    key = (n_t, n_blocks)
    c = _PLAN_CONST.get(key)
    if c is None:
        c = _PLAN_CONST[key] = (np.zeros(n_t, np.int64), np.full(n_t, n_blocks, np.int64),
                                np.arange(n_t + 1, dtype=np.int64),
                                np.array([0, n_t - 1], np.int64))
    return c


def _blocks1(n_blocks):
    """A cached read-only ``[n_blocks]`` array."""
    return _plan_const(1, n_blocks)[1]


def _build_one_node(pool, X_binned, feat_off, gh, idx, identity, start, stop, slots, n_t,
                    n_blocks):
    """One dense node cut into ``n_t >= 2`` equal row pieces, one per thread, the extra
    pieces in fresh slots added into the node's slot afterwards: what the general
    path does, without its numpy planning (most leaf-wise splits above 8k rows;
    ~8 us a call less)."""
    cuts = np.array([start + ((stop - start) * j) // n_t for j in range(n_t + 1)], np.int64)
    p_slot = np.empty(n_t, np.int64)
    p_slot[0] = slots[0]
    for j in range(1, n_t):
        p_slot[j] = pool.alloc()
    blo, bhi, ptr, merge_ptr = _plan_const(n_t, n_blocks)
    _hist.build_histograms(X_binned, feat_off, gh, idx, identity, cuts[:-1], cuts[1:], p_slot,
                           blo, bhi, ptr, pool.hist)
    _hist.merge_slots.serial(pool.hist, slots, merge_ptr, p_slot[1:])
    for j in range(1, n_t):
        pool.release(p_slot[j])


def _one_piece(starts, stops, n_threads, min_rows):
    """Whether ``plan_pieces`` would make one non-empty piece of a single node."""
    if starts.shape[0] != 1:
        return False
    rows = int(stops[0]) - int(starts[0])
    return rows > 0 and (n_threads == 1 or rows < 2 * min_rows)


def _block_plan(starts, stops, slots, n_blocks, n_threads):
    """Wide data: every thread owns a contiguous range of feature blocks and fills
    them for every node, block by block (one block's histogram stays in cache)."""
    m = starts.shape[0]
    total = int((stops - starts).sum())
    n_t = int(max(1, min(n_threads, total // MIN_ROWS_PER_THREAD)))
    bounds = (n_blocks * np.arange(n_t + 1)) // n_t
    blocks = np.arange(n_blocks)
    t_blk = np.repeat(blocks, m)
    t_node = np.tile(np.arange(m), n_blocks)
    thread_ptr = (bounds * m).astype(np.int64)
    return (starts[t_node].astype(np.int64), stops[t_node].astype(np.int64),
            slots[t_node].astype(np.int64), t_blk.astype(np.int64),
            (t_blk + 1).astype(np.int64), thread_ptr)


def build_histograms(pool, X_binned, feat_off, gh, idx, starts, stops, slots, n_threads,
                     identity=False):
    """Fill ``pool.hist[slots[i]]`` from the rows ``idx[starts[i]:stops[i]]``;
    ``identity`` says ``idx[i] == i`` on those ranges (the unsampled root).

    ``X_binned`` is the dense blocked matrix (``bonsai.binning``) or a
    ``SparseRows`` layout (``.ptr``, ``.bins``, ``.default_bin``: each row lists only
    its cells outside the features' default bins, which are restored afterwards from
    the node totals).

    Dense narrow data (few feature blocks) splits rows into one piece per thread, each
    piece filling its own slot, merged afterwards; dense wide data splits the feature
    blocks between threads instead (``_block_plan``).  The sparse-rows layout always
    splits rows.

    Why row-wise and not a feature-parallel (column-major) fill for narrow data,
    measured on 1M x 28 uint8 bins, 2 threads (medians of 5): one node holding
    100% / 50% / 20% / 5% / 1% of the rows took 16.2 / 8.6 / 4.2 / 1.5 / 0.5 ms
    row-wise against 19.5 / 10.3 / 4.7 / 2.2 / 2.6 ms feature-parallel (gradients
    gathered once, then one column per thread); a level of 64 nodes holding 25% of
    the rows took 2.4 ms row-wise against 3.2 ms.  Row-wise wins at every density,
    so the choice per level is only between row pieces (narrow) and feature blocks
    (wide, where one node's histogram no longer fits in L2).
    """
    sparse = not isinstance(X_binned, np.ndarray)
    if not sparse:
        n_features = feat_off.shape[0] - 1
        n_blocks = -(-n_features // X_binned.shape[1])
        if n_blocks >= 2 * n_threads:
            plan = _block_plan(starts, stops, slots, n_blocks, n_threads)
            kernel = _pick(_hist.build_histograms, plan[-1].shape[0] > 2)
            kernel(X_binned, feat_off, gh, idx, identity, *plan, pool.hist)
            return
        if _one_piece(starts, stops, n_threads, MIN_ROWS_PER_THREAD):
            # one node, one thread (most leaf-wise splits): the node's own arrays are
            # the plan, no numpy work in between (~5 us a call less)
            _hist.build_histograms.serial(X_binned, feat_off, gh, idx, identity, starts, stops,
                                          slots, _ZERO1, _blocks1(n_blocks), _PTR01, pool.hist)
            return
        if starts.shape[0] == 1:
            start, stop = int(starts[0]), int(stops[0])
            n_t = min(n_threads, (stop - start) // MIN_ROWS_PER_THREAD)
            if n_t >= 2:
                _build_one_node(pool, X_binned, feat_off, gh, idx, identity, start, stop,
                                slots, n_t, n_blocks)
                return
    node, p_start, p_stop, thread_ptr = plan_pieces(starts, stops, n_threads)
    p_slot, extra = _piece_slots(pool, node, slots, thread_ptr)
    hist = pool.hist
    for i in np.flatnonzero(stops == starts):  # empty nodes get no piece: zero them here
        hist[slots[i]] = 0
    parallel = thread_ptr.shape[0] > 2
    if sparse:
        task_tot = np.empty((node.shape[0], hist.shape[2]), np.int64)
        _pick(_hist.build_histograms_sparse, parallel)(
            X_binned.ptr, X_binned.bins, gh, idx, identity, p_start, p_stop, p_slot,
            thread_ptr, hist, task_tot)
    else:
        blo = np.zeros(node.shape[0], np.int64)
        bhi = np.full(node.shape[0], n_blocks, np.int64)
        _pick(_hist.build_histograms, parallel)(
            X_binned, feat_off, gh, idx, identity, p_start, p_stop, p_slot, blo, bhi,
            thread_ptr, hist)
    _merge_pieces(pool, node, slots, p_slot, extra)
    if sparse:
        totals = np.zeros((slots.shape[0], hist.shape[2]), np.int64)
        np.add.at(totals, node, task_tot)  # integer: exact in any order
        _pick(_hist.restore_default_bins, slots.shape[0] >= MIN_PARALLEL_SPLIT_NODES)(
            hist, slots, totals, feat_off, X_binned.default_bin)


def _piece_slots(pool, node, slots, thread_ptr):
    """Slot of each piece: the node's own slot for its first piece, a fresh pool slot
    for the others (a node cut between threads); returns (p_slot, extra pieces)."""
    p_slot = slots[node].copy()
    if thread_ptr.shape[0] <= 2 or not node.size:
        return p_slot, node[:0]
    first = np.concatenate([[True], node[1:] != node[:-1]])
    extra = np.flatnonzero(~first)
    for p in extra:
        p_slot[p] = pool.alloc()
    return p_slot, extra


def _merge_pieces(pool, node, slots, p_slot, extra):
    """Add the extra pieces' slots into their nodes' slots and free them."""
    if not extra.size:
        return
    cut = node[extra]                          # sorted: pieces follow node order
    first = np.flatnonzero(np.concatenate(([True], cut[1:] != cut[:-1])))
    dst_nodes = cut[first]
    src_ptr = np.append(first, cut.size).astype(np.int64)
    _hist.merge_slots.serial(pool.hist, slots[dst_nodes].astype(np.int64), src_ptr,
                             p_slot[extra].astype(np.int64))
    for s in p_slot[extra]:
        pool.release(s)


def _pick(kernel, parallel):
    return kernel if parallel else kernel.serial


def subtract_histograms(pool, parent_slots, child_slots):
    big = parent_slots.shape[0] * pool.n_bins_total >= 1 << 16
    _pick(_hist.subtract_histograms, big)(pool.hist, parent_slots, child_slots)


def node_sums(pool, slots, node_rows, feat_off, scales):
    out = np.empty((slots.shape[0], 3), np.int64)
    _split.node_sums.serial(pool.hist, slots, feat_off, int(scales[2]), bool(scales[3]),
                            node_rows, out)
    return out


def range_sums(pool, slots, lo, hi, extra, scales, cnt_factor):
    """(grad, hess, count) sums of bins ``lo:hi`` (plus bin ``extra`` if >= 0) per slot;
    ``cnt_factor`` (m,) estimates counts in packed mode."""
    out = np.empty((slots.shape[0], 3), np.int64)
    _split.range_sums(pool.hist, slots, lo, hi, extra, int(scales[2]), bool(scales[3]),
                      cnt_factor, out)
    return out


def find_best_splits(pool, slots, node_rows, feat_off, n_value_bins, masks, scales, cfg,
                     min_child_samples, sub_slots=None):
    """Best split of each slot's node; where ``sub_slots[i] >= 0`` the slot first has
    ``hist[sub_slots[i]]`` subtracted (a parent's histogram turned into its larger
    child's, in the thread that scans it next, while it is in cache)."""
    m = slots.shape[0]
    if sub_slots is None:
        sub_slots = np.full(m, -1, np.int64)
    gain = np.empty(m)
    feature = np.empty(m, np.int64)
    bin_ = np.empty(m, np.int64)
    default_left = np.empty(m, np.uint8)
    left_sums = np.empty((m, 3), np.int64)
    sums = np.empty((m, 3), np.int64)
    _pick(_split.find_best_splits, m >= MIN_PARALLEL_SPLIT_NODES)(
        pool.hist, slots, sub_slots, node_rows, feat_off, n_value_bins, masks, scales, cfg,
        min_child_samples, gain, feature, bin_, default_left, left_sums, sums)
    return gain, feature, bin_, default_left, left_sums, sums


_NO_SPARSE = (np.zeros(1, np.uint32), np.zeros(0, np.uint16), np.zeros(0, np.int64))
_NO_DENSE = np.zeros((0, 1), np.uint8)


def _layout(X_hist, feat_off, n_threads):
    """(layout, dense matrix, sparse ptr, bins, default bin) for ``step.build``."""
    if not isinstance(X_hist, np.ndarray):
        return (_step.SPARSE_ROWS, _NO_DENSE, X_hist.ptr, X_hist.bins, X_hist.default_bin)
    n_blocks = -(-(feat_off.shape[0] - 1) // X_hist.shape[1])
    layout = _step.DENSE_BLOCKS if n_blocks >= 2 * n_threads else _step.DENSE_ROWS
    return (layout, X_hist) + _NO_SPARSE


def split_nodes(pool, nodes, batch, X_cols, X_hist, feat_off, n_value_bins, missing_bin, gh,
                idx, tmp, new_slot, child_ok, min_split_rows, masks, scales, cfg,
                min_child_samples, n_threads):
    """The split step of the nodes ``batch`` of the node table ``nodes``
    (``bonsai.nodes.NodeTable``) in one compiled call (``step.split_nodes``):
    partition, smaller children's histograms into ``new_slot``, larger children by
    subtraction in their parent's slot, best splits of the children that can split
    (``masks (2m, F)``), children written as table rows ``nodes.n..nodes.n + 2m - 1``
    (the caller reserves them).  Returns (ids of the children that can split, slots
    to free), as lists."""
    m = batch.shape[0]
    expand = np.empty(2 * m, np.int64)
    free = np.empty(2 * m, np.int64)
    layout, X_dense, sp_ptr, sp_bins, sp_default = _layout(X_hist, feat_off, n_threads)
    scratch = pool.scratch(max(n_threads - 1, 1))
    t, t_gain, t_sums, t_lsum, first = nodes.ints, nodes.gain, nodes.sums, nodes.left_sums, nodes.n
    if not _profile.ENABLED:
        n_e, n_f = _step.split_nodes(
            layout, X_cols, X_dense, sp_ptr, sp_bins, sp_default, feat_off, n_value_bins,
            missing_bin, gh, idx, tmp, pool.hist, t, t_gain, t_sums, t_lsum, batch, first,
            new_slot, scratch, child_ok, min_split_rows, masks, scales, cfg, min_child_samples,
            n_threads, MIN_ROWS_PER_THREAD, MIN_PARTITION_ROWS_PER_THREAD,
            MIN_PARALLEL_SPLIT_NODES, expand, free)
        return expand[:n_e].tolist(), free[:n_f].tolist()
    # BONSAI_PROFILE: the same steps as separate calls, each timed as its stage
    starts, stops, feature, bin_, dl, f_missing, parent_slot = _step.batch_columns(t, batch,
                                                                                  missing_bin)
    nleft = np.empty(m, np.int64)
    with _profile.stage("partition"):
        _step.partition(X_cols, idx, tmp, starts, stops, feature, bin_, dl, f_missing,
                        n_threads, MIN_PARTITION_ROWS_PER_THREAD, nleft)
    slot = np.empty(2 * m, np.int64)
    b_start, b_stop, b_slot, sub = _step.plan_children(starts, stops, nleft, parent_slot,
                                                       new_slot, child_ok, min_split_rows, slot)
    if b_start.shape[0]:
        with _profile.stage("histograms"):
            _step.build(layout, X_dense, sp_ptr, sp_bins, sp_default, feat_off, gh, idx, False,
                        b_start, b_stop, b_slot, scratch, n_threads, MIN_ROWS_PER_THREAD,
                        MIN_PARALLEL_SPLIT_NODES, pool.hist)
    gain = np.empty(2 * m)
    c_feat = np.empty(2 * m, np.int64)
    c_bin = np.empty(2 * m, np.int64)
    c_dl = np.empty(2 * m, np.uint8)
    lsum = np.empty((2 * m, 3), np.int64)
    sums = np.empty((2 * m, 3), np.int64)
    with _profile.stage("splits"):
        _step.scan_children(pool.hist, starts, stops, nleft, slot, sub, feat_off, n_value_bins,
                            masks, scales, cfg, min_child_samples, MIN_PARALLEL_SPLIT_NODES,
                            gain, c_feat, c_bin, c_dl, lsum, sums)
    n_e, n_f = _step.write_children(t, t_gain, t_sums, t_lsum, batch, first, starts, stops,
                                    nleft, parent_slot, new_slot, slot, gain, c_feat, c_bin,
                                    c_dl, lsum, sums, expand, free)
    return expand[:n_e].tolist(), free[:n_f].tolist()


def find_level_split(pool, slots, node_rows, feat_off, n_value_bins, mask, scales, cfg,
                     min_child_samples):
    out = np.empty((int(feat_off[-1]), 2))
    _split.find_level_split(pool.hist, slots, node_rows, feat_off, n_value_bins, mask, scales,
                            cfg, min_child_samples, out)
    return out


def partition_nodes(X_cols, idx, tmp, starts, stops, feature, bin_, default_left,
                    missing_bin, n_threads):
    """Stable partition of each node range (reading the column-major bins
    ``X_cols (F, n)``); returns the rows sent left per node."""
    nleft = np.zeros(starts.shape[0], np.int64)
    if _one_piece(starts, stops, n_threads, MIN_PARTITION_ROWS_PER_THREAD):
        _part.partition_nodes.serial(X_cols, idx, tmp, _ZERO1, starts, stops, _PTR01, feature,
                                     bin_, default_left, missing_bin, np.empty(1, np.int64),
                                     nleft)
        return nleft
    node, p_start, p_stop, thread_ptr = plan_pieces(starts, stops, n_threads, MIN_PARTITION_ROWS_PER_THREAD)
    if node.size:
        scratch = np.empty(node.shape[0], np.int64)
        _pick(_part.partition_nodes, thread_ptr.shape[0] > 2)(
            X_cols, idx, tmp, node, p_start, p_stop, thread_ptr,
            feature, bin_, default_left, missing_bin, scratch, nleft)
    return nleft


def add_leaf_values(raw, idx, leaf_start, leaf_stop, leaf_value):
    """``raw[idx[i]] += leaf_value[l]`` over each leaf's row range."""
    _pick(_part.add_leaf_values, idx.shape[0] >= MIN_ROWS_PER_THREAD)(
        raw, idx, leaf_start, leaf_stop, leaf_value)
def leaf_sums(grad, hess, idx, leaf_start, leaf_stop):
    """Exact (grad, hess) sums over each leaf's rows, (L, 2) float64."""
    out = np.empty((leaf_start.shape[0], 2))
    _pick(_part.leaf_sums, idx.shape[0] >= MIN_ROWS_PER_THREAD)(
        grad, hess, idx, leaf_start, leaf_stop, out)
    return out


#: below this many rows prediction runs on the calling thread (no parallel region)
SERIAL_PREDICT_ROWS = 512


def parallel_predict(n_rows):
    """Whether a prediction over ``n_rows`` rows runs the parallel kernels: not for
    small batches, and never in a child forked after OpenMP threads ran (serial
    kernels still work there; a parallel region would abort the child)."""
    from ..._threads import forked_after_omp
    return n_rows >= SERIAL_PREDICT_ROWS and not forked_after_omp()


def predict_raw(X, ens, out):
    """Add the ensemble's outputs to ``out (n, K)``."""
    if X.shape[0] <= 4:
        _pred.predict_records_walk(X, ens.records, ens.tree_offset, ens.tree_depth,
                                   ens.tree_class, out)
        return
    h = ens.heaps
    if h is not None:
        k = _pick(_heaps.predict_heaps, parallel_predict(X.shape[0]))
        k(X, h.thresholds32 if X.dtype == np.float32 else h.thresholds, h.feature, h.column,
          h.n_columns, h.nodes, h.node_offset, h.leaves, h.leaf_offset, h.depth,
          h.tree_class, h.chunk_ptr, out)
        return
    k = _pick(_pred.predict_records, parallel_predict(X.shape[0]))
    k(X, ens.records, ens.tree_offset, ens.tree_depth, ens.tree_class, ens.chunk_ptr, out)



def predict_oblivious(X, obl, out):
    """Add an all-oblivious ensemble's outputs to ``out (n, K)`` (branchless walk)."""
    k = _pick(_pred.predict_oblivious, parallel_predict(X.shape[0]))
    thr = obl.level_threshold32 if X.dtype == np.float32 else obl.level_threshold
    k(X, obl.level_feature, thr, obl.level_default_left, obl.level_offset,
      obl.leaf_value, obl.leaf_offset, obl.tree_class, out)


def predict_leaf(X, ens, out):
    """Leaf index of every row in every tree, ``out (n, T) int32``."""
    k = _pick(_pred.predict_leaf, parallel_predict(X.shape[0]))
    k(X, ens.feature, ens.threshold, ens.default_left, ens.left, ens.right, ens.tree_offset, out)


predict_binned_add = _pred.predict_binned_add
