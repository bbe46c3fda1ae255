"""The CPU backend: the narrow protocol the grow loop calls, over numba kernels.

Functions here allocate outputs and call the kernels in ``step`` (the split step and
its work plans), ``histogram``, ``split``, ``partition`` and ``predict``.  Work is
split by rows into ``n_threads`` equal pieces over the concatenated node ranges, so
every thread gets the same number of rows whatever the node sizes; because histogram
cells are integers, the result does not depend on that split.  The thresholds below
are read at every call (tests lower them to force work splitting).
"""
import numba
import numpy as np

from ... import _profile
from ..._dtypes import FIXED_POINT_BITS, HIST, N_HIST_CHANNELS, count_bits, fixed_point_scale
from ...nodes import BIN, DEFAULT_LEFT, FEATURE, SLOT, START, STOP
from ...split_settings import CatSettings, Scales
from . import histogram as _hist
from . import partition as _part
from . import predict as _pred
from . import predict_binned as _heaps
from . import split as _split
from . import split_cat as _split_cat
from . import split_level as _split_level
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
#: a fit with fewer rows than ``2 * MIN_ROWS_PER_THREAD`` (one thread's minimum for
#: each of two threads) and fewer histogram bins than this runs on one thread: no
#: kernel of it is ever big enough to cut, and its first fit compiles no parallel
#: kernel (numba compiles a parallel kernel several times slower than its serial twin)
MIN_PARALLEL_BINS = 1 << 16
#: ``max_abs`` takes chunks of ``MAX_ABS_CHUNK`` rows: in parallel from two chunks
MIN_PARALLEL_MAX_ABS_ROWS = 2 * _hist.MAX_ABS_CHUNK


class HistogramPool:
    """Histogram slots ``(capacity, n_bins_total, 2)`` int64 with a free list.

    The pool lives for a whole fit, so histograms are allocated once, not per node.
    """

    def __init__(self, n_bins_total, capacity=8, channels=N_HIST_CHANNELS):
        self.n_bins_total = int(n_bins_total)
        self.channels = int(channels)
        self.hist = np.zeros((capacity, self.n_bins_total, self.channels), dtype=HIST)
        self.free = list(range(capacity - 1, -1, -1))
        self.reserved = np.zeros(0, np.int64)

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
        """``n`` slots reserved for the whole fit (``reserved``): where the thread pieces
        of a node cut between threads are filled before they are added up."""
        if self.reserved.shape[0] < n:
            extra = [self.alloc() for _ in range(n - self.reserved.shape[0])]
            self.reserved = np.concatenate([self.reserved, np.array(extra, np.int64)])
        return self.reserved[:n]


def thread_plan(n_rows, n_bins_total, n_threads):
    """The split step's ``par`` argument (``step.thread_plan``): None when a fit of
    ``n_rows`` rows and ``n_bins_total`` histogram bins runs on one thread, else
    (n_threads, MIN_ROWS_PER_THREAD, MIN_PARTITION_ROWS_PER_THREAD,
    MIN_PARALLEL_SPLIT_NODES), read now (tests lower them).  Either way the result is
    the same: only how work is cut between threads differs."""
    if n_threads < 2 or (n_rows < 2 * MIN_ROWS_PER_THREAD and n_bins_total < MIN_PARALLEL_BINS):
        return None
    return (int(n_threads), int(MIN_ROWS_PER_THREAD), int(MIN_PARTITION_ROWS_PER_THREAD),
            int(MIN_PARALLEL_SPLIT_NODES))


def plan_pieces(starts, stops, n_threads, min_rows=None):
    """Cut the concatenated ranges ``[starts[i], stops[i])`` into per-thread pieces
    (``step.plan_pieces``): returns (piece_node, piece_start, piece_stop, thread_ptr)."""
    return _step.plan_pieces(starts, stops, n_threads,
                             MIN_ROWS_PER_THREAD if min_rows is None else min_rows)


def quantize(grad, hess, n_rows, out, quant_bins=0, seed=0):
    """Integer (grad, hess) cells of one output, for ``n_rows`` sampled rows.

    ``out (n, 2)``: exact fixed point, (grad, hess * 2**count_bits + count).
    ``out (n, 1)``: quantized mode, grad and hess stochastically rounded to at most
    ``quant_bins`` levels and packed as ``g * 2**32 + h`` (one add per cell);
    ``quant_bins`` is lowered so that ``n_rows * quant_bins < 2**31``.

    Returns the tree's ``bonsai.split_settings.Scales`` (grad and hess scales,
    count_bits, packed, their reciprocals), which every split kernel takes to turn
    cells back into sums (exact-mode scales are powers of two: their reciprocals are
    exact).
    """
    m = np.zeros(2)
    if grad.size:
        _pick(_hist.max_abs, _parallel_rows(grad.shape[0], MIN_PARALLEL_MAX_ABS_ROWS))(grad, hess, m)
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
        _pick(_hist.quantize_packed, _parallel_rows(grad.shape[0]))(
            grad, hess, sg, sh, np.uint64(seed), out)
        return Scales.quantized(sg, sh)
    cb = count_bits(n_rows)
    sg = fixed_point_scale(max_g, n_rows)
    sh = fixed_point_scale(max_h, n_rows, FIXED_POINT_BITS - cb)
    _pick(_hist.quantize_gradients, _parallel_rows(grad.shape[0]))(grad, hess, sg, sh, cb, out)
    return Scales.exact(sg, sh, cb)


def _layout(X_hist, feat_off, n_threads):
    """(layout, dense matrix, sparse ptr, bins, default bin) for ``step.build``; the
    layout not in use gets None (its kernels are then not compiled).

    Dense narrow data (few feature blocks) splits rows into one piece per thread;
    dense wide data (at least two feature blocks per thread) splits the feature
    blocks between threads instead, so one block's histogram stays in cache; the
    sparse-rows layout always splits rows.

    Why row-wise and not a feature-parallel (column-major) fill for narrow data,
    measured on 1M x 28 uint8 bins, 2 threads (medians of 5): one node holding
    100% / 50% / 20% / 5% / 1% of the rows took 16.2 / 8.6 / 4.2 / 1.5 / 0.5 ms
    row-wise against 19.5 / 10.3 / 4.7 / 2.2 / 2.6 ms feature-parallel (gradients
    gathered once, then one column per thread); a level of 64 nodes holding 25% of
    the rows took 2.4 ms row-wise against 3.2 ms.  Row-wise wins at every density,
    so the choice per level is only between row pieces (narrow) and feature blocks
    (wide, where one node's histogram no longer fits in L2).
    """
    if not isinstance(X_hist, np.ndarray):
        return (_step.DENSE_ROWS, None, X_hist.ptr, X_hist.bins, X_hist.default_bin)
    n_blocks = -(-(feat_off.shape[0] - 1) // X_hist.shape[1])
    layout = _step.DENSE_BLOCKS if n_blocks >= 2 * n_threads else _step.DENSE_ROWS
    return layout, X_hist, None, None, None


def build_histograms(pool, X_binned, feat_off, gh, idx, starts, stops, slots, n_threads,
                     identity=False):
    """Fill ``pool.hist[slots[i]]`` from the rows ``idx[starts[i]:stops[i]]``;
    ``identity`` says ``idx[i] == i`` on those ranges (the unsampled root).

    ``X_binned`` is the dense blocked matrix (``bonsai.binning``) or a
    ``SparseRows`` layout (``.ptr``, ``.bins``, ``.default_bin``: each row lists only
    its cells outside the features' default bins, which are restored afterwards from
    the node totals).  How the work is cut: ``_layout`` and ``step.build``.
    """
    layout, X_dense, sp_ptr, sp_bins, sp_default = _layout(X_binned, feat_off, n_threads)
    par = thread_plan(idx.shape[0], int(feat_off[-1]), n_threads)
    _step.build(layout, X_dense, sp_ptr, sp_bins, sp_default, feat_off, gh, _packed(gh), idx,
                identity, starts, stops, slots, pool.scratch(max(n_threads - 1, 1)), par,
                pool.hist)


def _pick(kernel, parallel):
    return kernel if parallel else kernel.serial


def _packed(gh):
    """The fill's ``packed`` argument: True for packed quantized (n, 1) cells, None for
    exact (n, 2) ones (the packed fill is then not compiled)."""
    return True if gh.shape[1] == 1 else None


def _parallel_rows(n, min_rows=None):
    """Whether a row-parallel kernel over ``n`` rows runs in parallel: with more than
    one thread and at least ``min_rows`` (default ``2 * MIN_ROWS_PER_THREAD``) rows.
    Small fits thus never compile the parallel twins (a parallel kernel compiles
    several times slower than its serial twin, and gains nothing on so few rows)."""
    return (n >= (2 * MIN_ROWS_PER_THREAD if min_rows is None else min_rows)
            and numba.get_num_threads() > 1)


def subtract_histograms(pool, parent_slots, child_slots):
    big = parent_slots.shape[0] * pool.n_bins_total >= 1 << 16
    _pick(_hist.subtract_histograms, big)(pool.hist, parent_slots, child_slots)


def range_sums(pool, slots, lo, hi, extra, scales, cnt_factor):
    """(grad, hess, count) sums of bins ``lo:hi`` (plus bin ``extra`` if >= 0) per slot;
    ``cnt_factor`` (m,) estimates counts in packed mode."""
    out = np.empty((slots.shape[0], 3), np.int64)
    _split.range_sums(pool.hist, slots, lo, hi, extra, scales, cnt_factor, out)
    return out


#: categorical split settings when none are given (LightGBM's defaults)
DEFAULT_CAT_CFG = CatSettings()


def _cat_args(n_features, is_cat, cat_cfg, cat_words=1):
    """``is_cat`` None (the kernels' "no categorical feature") where it has none."""
    if is_cat is not None and not is_cat.any():
        is_cat = None
    return is_cat, DEFAULT_CAT_CFG if cat_cfg is None else cat_cfg, cat_words


def find_best_splits(pool, slots, node_rows, feat_off, n_value_bins, masks, scales, cfg,
                     min_child_samples, sub_slots=None, is_cat=None, cat_cfg=None, cat_words=1):
    """Best split of each slot's node; where ``sub_slots[i] >= 0`` the slot first has
    ``hist[sub_slots[i]]`` subtracted (a parent's histogram turned into its larger
    child's, in the thread that scans it next, while it is in cache).  Returns
    (gain, feature, bin, default_left, left_sums, sums, bits): a categorical split
    (``is_cat``) has bin -1 and its left categories in ``bits (m, cat_words)``."""
    m = slots.shape[0]
    is_cat, cat_cfg, cat_words = _cat_args(n_value_bins.shape[0], is_cat, cat_cfg, cat_words)
    if sub_slots is None:
        sub_slots = np.full(m, -1, np.int64)
    gain, feature, bin_, default_left, left_sums, sums, bits = _step.split_outputs(m, cat_words)
    _pick(_split.find_best_splits, m >= MIN_PARALLEL_SPLIT_NODES)(
        pool.hist, slots, sub_slots, node_rows, feat_off, n_value_bins, masks, is_cat, cat_cfg,
        scales, cfg, min_child_samples, gain, feature, bin_, default_left, left_sums, sums, bits)
    return gain, feature, bin_, default_left, left_sums, sums, bits


def split_nodes(pool, nodes, batch, X_cols, X_hist, feat_off, n_value_bins, missing_bin, gh,
                idx, tmp, new_slot, child_ok, min_split_rows, masks, scales, cfg,
                min_child_samples, n_threads, identity=False, is_cat=None, cat_cfg=None):
    """The split step of the nodes ``batch`` of the node table ``nodes``
    (``bonsai.nodes.NodeTable``) in one compiled call (``step.split_nodes``):
    partition, smaller children's histograms into ``new_slot``, larger children by
    subtraction in their parent's slot, best splits of the children that can split
    (``masks (2m, F)``), children written as table rows ``nodes.n..nodes.n + 2m - 1``
    (the caller reserves them).  Returns (ids of the children that can split, slots
    to free), as lists.  An empty ``batch`` evaluates the root (table row 0) instead:
    its histogram (``identity``: ``idx[i] == i``), sums and best split (``masks[:1]``)."""
    m = batch.shape[0]
    expand = np.empty(2 * m, np.int64)
    free = np.empty(2 * m, np.int64)
    layout, X_dense, sp_ptr, sp_bins, sp_default = _layout(X_hist, feat_off, n_threads)
    scratch = pool.scratch(max(n_threads - 1, 1))
    t, t_gain, t_sums, t_lsum, first = nodes.ints, nodes.gain, nodes.sums, nodes.left_sums, nodes.n
    t_bits = nodes.bits
    is_cat, cat_cfg, _ = _cat_args(n_value_bins.shape[0], is_cat, cat_cfg)
    par = thread_plan(X_cols.shape[1], int(feat_off[-1]), n_threads)
    if not _profile.ENABLED:
        n_e, n_f = _step.split_nodes(
            layout, X_cols, X_dense, sp_ptr, sp_bins, sp_default, feat_off, n_value_bins,
            missing_bin, gh, _packed(gh), idx, tmp, pool.hist, t, t_gain, t_sums, t_lsum, t_bits,
            batch,
            first, new_slot, scratch, child_ok, min_split_rows, masks, is_cat, cat_cfg, scales,
            cfg, min_child_samples, par, identity, expand, free)
        return expand[:n_e].tolist(), free[:n_f].tolist()
    # BONSAI_PROFILE: the same steps as separate calls, each timed as its stage
    if m == 0:
        root = np.zeros(1, np.int64)
        with _profile.stage("histograms"):
            _step.build(layout, X_dense, sp_ptr, sp_bins, sp_default, feat_off, gh, _packed(gh),
                        idx, identity, t[root, START], t[root, STOP], t[root, SLOT], scratch,
                        par, pool.hist)
        with _profile.stage("splits"):
            gain, feat, bin_, dl, lsum, sums, bits = find_best_splits(
                pool, t[root, SLOT], t[root, STOP] - t[root, START], feat_off, n_value_bins,
                masks[:1], scales, cfg, min_child_samples, None, is_cat, cat_cfg,
                t_bits.shape[1])
        t_gain[0], t[0, FEATURE], t[0, BIN], t[0, DEFAULT_LEFT] = gain[0], feat[0], bin_[0], dl[0]
        t_sums[0], t_lsum[0], t_bits[0] = sums[0], lsum[0], bits[0]
        return [], []
    starts, stops, feature, bin_, dl, f_missing, parent_slot, p_bits = _step.batch_columns(
        t, t_bits, batch, missing_bin)
    nleft = np.empty(m, np.int64)
    with _profile.stage("partition"):
        _step.partition(X_cols, idx, tmp, starts, stops, feature, bin_, dl, f_missing, p_bits,
                        par, nleft)
    slot = np.empty(2 * m, np.int64)
    b_start, b_stop, b_slot, sub = _step.plan_children(starts, stops, nleft, parent_slot,
                                                       new_slot, child_ok, min_split_rows, slot)
    if b_start.shape[0]:
        with _profile.stage("histograms"):
            _step.build(layout, X_dense, sp_ptr, sp_bins, sp_default, feat_off, gh, _packed(gh),
                        idx, False, b_start, b_stop, b_slot, scratch, par, pool.hist)
    gain, c_feat, c_bin, c_dl, lsum, sums, c_bits = _step.split_outputs(2 * m, t_bits.shape[1])
    with _profile.stage("splits"):
        _step.scan_children(pool.hist, starts, stops, nleft, slot, sub, feat_off, n_value_bins,
                            masks, is_cat, cat_cfg, scales, cfg, min_child_samples,
                            par, gain, c_feat, c_bin, c_dl, lsum, sums,
                            c_bits)
    n_e, n_f = _step.write_children(t, t_gain, t_sums, t_lsum, t_bits, batch, first, starts,
                                    stops, nleft, parent_slot, new_slot, slot, gain, c_feat,
                                    c_bin, c_dl, lsum, sums, c_bits, expand, free)
    return expand[:n_e].tolist(), free[:n_f].tolist()


def find_level_split(pool, slots, node_rows, feat_off, n_value_bins, mask, scales, cfg,
                     min_child_samples, is_cat=None):
    """Oblivious level: the summed gain of every numeric (bin, missing direction)
    candidate over the level's nodes, (n_bins_total, 2)."""
    is_cat, _, _ = _cat_args(n_value_bins.shape[0], is_cat, None)
    out = np.empty((int(feat_off[-1]), 2))
    _split_level.find_level_split(pool.hist, slots, node_rows, feat_off, n_value_bins, mask, is_cat,
                            scales, cfg, min_child_samples, out)
    return out


def find_level_split_categorical(pool, slots, node_rows, feat_off, n_value_bins, mask, is_cat,
                                 scales, cfg, min_child_samples, cat_cfg, cat_words):
    """Oblivious level: each categorical feature's best shared category set and its
    summed gain: (gain (F,), bits (F, cat_words))."""
    gain = np.empty(n_value_bins.shape[0])
    bits = np.empty((n_value_bins.shape[0], cat_words), np.uint64)
    _split_level.find_level_split_categorical(pool.hist, slots, node_rows, feat_off,
                                            n_value_bins, mask, is_cat, scales, cfg,
                                            min_child_samples, cat_cfg, gain, bits)
    return gain, bits


def bits_sums(pool, slots, off, nv, bits, scales, cnt_factor):
    """(grad, hess, count) sums of the bins of one feature (``off``, ``nv`` value
    bins) whose bit is set in ``bits``, per slot (m, 3)."""
    out = np.empty((slots.shape[0], 3), np.int64)
    _split_cat.bits_sums(pool.hist, slots, off, nv, bits, scales, cnt_factor, out)
    return out


def partition_nodes(X_cols, idx, tmp, starts, stops, feature, bin_, default_left,
                    missing_bin, n_threads, bits=None):
    """Stable partition of each node range (reading the column-major bins
    ``X_cols (F, n)``); returns the rows sent left per node.  A node with bin -1 is a
    categorical split of its row of ``bits (m, W)``."""
    nleft = np.empty(starts.shape[0], np.int64)
    if bits is None:
        bits = np.zeros((starts.shape[0], 1), np.uint64)
    par = thread_plan(X_cols.shape[1], 0, n_threads)
    _step.partition(X_cols, idx, tmp, starts, stops, feature, bin_, default_left, missing_bin,
                    bits, par, nleft)
    return nleft


def fill_range(idx):
    """``idx[i] = i``."""
    _pick(_part.fill_range, _parallel_rows(idx.shape[0], 2 * MIN_PARTITION_ROWS_PER_THREAD))(idx)


def add_leaf_values(raw, idx, leaf_start, leaf_stop, leaf_value):
    """``raw[idx[i]] += leaf_value[l]`` over each leaf's row range."""
    _pick(_part.add_leaf_values, _parallel_rows(idx.shape[0]))(
        raw, idx, leaf_start, leaf_stop, leaf_value)
def leaf_sums(grad, hess, idx, leaf_start, leaf_stop):
    """Exact (grad, hess) sums over each leaf's rows, (L, 2) float64."""
    out = np.empty((leaf_start.shape[0], 2))
    _pick(_part.leaf_sums, _parallel_rows(idx.shape[0]))(
        grad, hess, idx, leaf_start, leaf_stop, out)
    return out


#: below this many rows prediction runs on the calling thread (no parallel region)
SERIAL_PREDICT_ROWS = 512
#: nor with fewer (rows x trees) than this: under about a millisecond of work, where a
#: parallel region gains little (and a first predict then compiles no parallel kernel,
#: which takes seconds)
MIN_PARALLEL_PREDICT_WORK = 1 << 16


def parallel_predict(n_rows, n_trees=None):
    """Whether a prediction over ``n_rows`` rows (of ``n_trees`` trees, if given) runs
    the parallel kernels: not for small batches or little work, and never in a child
    forked after OpenMP threads ran (serial kernels still work there; a parallel
    region would abort the child)."""
    if n_rows < SERIAL_PREDICT_ROWS or (n_trees is not None
                                        and n_rows * n_trees < MIN_PARALLEL_PREDICT_WORK):
        return False      # the one-row path: no import, no thread checks
    from ..._threads import forked_after_omp
    return not forked_after_omp()


def _n_trees(ens):
    return ens.tree_offset.shape[0] - 1


def predict_raw(X, ens, out):
    """Add the ensemble's outputs to ``out (n, K)``."""
    if X.shape[0] <= 4 and not ens.has_cat:
        _pred.predict_records_walk(X, ens.records, ens.tree_offset, ens.tree_depth,
                                   ens.tree_class, out)
        return
    if ens.has_cat:
        k = _pick(_pred.predict_nodes, parallel_predict(X.shape[0], _n_trees(ens)))
        k(X, ens.feature, ens.threshold, ens.default_left, ens.left, ens.right, ens.value,
          ens.cat_ptr, ens.cat_words, ens.tree_offset, ens.tree_class, out)
        return
    h = ens.heaps
    if h is not None:
        k = _pick(_heaps.predict_heaps, parallel_predict(X.shape[0], _n_trees(ens)))
        k(X, h.thresholds32 if X.dtype == np.float32 else h.thresholds, h.feature, h.column,
          h.n_columns, h.nodes, h.node_offset, h.leaves, h.leaf_offset, h.depth,
          h.tree_class, h.chunk_ptr, out)
        return
    k = _pick(_pred.predict_records, parallel_predict(X.shape[0], _n_trees(ens)))
    k(X, ens.records, ens.tree_offset, ens.tree_depth, ens.tree_class, ens.chunk_ptr, out)



def predict_oblivious(X, obl, out):
    """Add an all-oblivious ensemble's outputs to ``out (n, K)`` (branchless walk)."""
    k = _pick(_pred.predict_oblivious, parallel_predict(X.shape[0], obl.tree_class.shape[0]))
    thr = obl.level_threshold32 if X.dtype == np.float32 else obl.level_threshold
    k(X, obl.level_feature, thr, obl.level_default_left, obl.level_offset,
      obl.leaf_value, obl.leaf_offset, obl.tree_class, obl.level_cat_ptr, obl.level_cat_words,
      out)


def predict_leaf(X, ens, out):
    """Leaf index of every row in every tree, ``out (n, T) int32``."""
    k = _pick(_pred.predict_leaf, parallel_predict(X.shape[0], _n_trees(ens)))
    k(X, ens.feature, ens.threshold, ens.default_left, ens.left, ens.right, ens.cat_ptr,
      ens.cat_words, ens.tree_offset, out)


def predict_binned_add(X_cols, rows, tree, missing_bin, out):
    """``out[rows[i]] += tree output`` of binned rows (validation sets, out-of-bag rows)."""
    cat_ptr, cat_words = tree.arrays_cat()
    _pick(_pred.predict_binned_add, _parallel_rows(rows.shape[0]))(
        X_cols, rows, tree.feature, tree.bin_threshold, tree.default_left, missing_bin,
        tree.left, tree.right, tree.value, cat_ptr, cat_words, out)
