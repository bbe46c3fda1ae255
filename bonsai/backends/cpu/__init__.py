"""The CPU backend: the protocol the boosting and grow loops call (``bonsai.backends``),
over numba kernels.

* data: ``prepare`` (the histogram layout, ``layout``) and ``tree_builder`` (the
  per-fit buffers and split step, ``builder.TreeBuilder``);
* per tree: ``quantize``, ``sample_rows``, ``fill_range``, ``leaf_sums``,
  ``leaf_weights``, ``add_leaf_values``, ``predict_binned_add``;
* prediction: ``predict_raw``, ``predict_oblivious``, ``predict_leaf``.

The single-step functions further down (``build_histograms``, ``find_best_splits``,
``partition_nodes``, ...) run one kernel of the split step on its own (the tests
check the kernels through them).  Work is split by rows into ``n_threads`` equal
pieces over the concatenated node ranges, so every thread gets the same number of
rows whatever the node sizes; because histogram cells are integers, the result does
not depend on that split.  The thresholds below are read at every fit (tests lower
them to force work splitting).
"""
import math
import sys

import numba
import numpy as np

from ..._dtypes import FIXED_POINT_BITS, count_bits, fixed_point_scale
from ...comm import LOCAL, is_local
from ...scores import HostScores
from ...sparse import SparseBins
from ...split_settings import CatSettings, Scales
from . import histogram as _hist
from . import partition as _part
from . import predict as _pred
from . import predict_binned as _heaps
from . import sparse as _sparse
from . import split as _split
from . import split_cat as _split_cat
from . import split_level as _split_level
from . import step as _step
from . import multi_hist as _multi_hist
from .builder import HistogramPool, TreeBuilder, _packed
from .multi_builder import MultiScales, MultiTreeBuilder
from .layout import CpuData, SparseRows, hist_layout, prepare

__all__ = ["CpuData", "HistogramPool", "SparseRows", "TreeBuilder", "add_leaf_values",
           "fill_range", "leaf_sums", "leaf_weights", "predict_binned_add", "predict_leaf",
           "predict_oblivious", "predict_raw", "prepare", "quantize", "sample_rows",
           "scores", "tree_builder", "tree_scales"]
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
#: the per-round streaming kernels over every row (``max_abs``, ``quantize``,
#: ``add_leaf_values``, ``leaf_sums``, ``fill_range``: 0.2-2 ns a row) run in parallel
#: only from this many rows.  Each is the first parallel region after the grow
#: loop's Python, so it wakes numba's OpenMP threads from sleep (they spin only
#: ``GOMP_SPINCOUNT`` times): 100-250 us on these 2-core machines.  Measured (us,
#: serial / parallel after 300 us of Python): 34k rows max_abs 23 / 256, quantize
#: 52 / 101, add_leaf_values 30 / 91; 524k: 361 / 407, 807 / 482, 812 / 764; 1M:
#: 826 / 515, 1649 / 921, 2303 / 1376.  A 43k-row leaf-wise fit (300 trees of 63
#: leaves) took 0.69 s on 2 threads against 0.55 s on one before this threshold.
#: Lowered from 2**19 to 2**18 for the 450k-row year shape (depth 8, 60-round
#: in-process fits, thresholds alternating in 4 pairs): 3.577 -> 3.542 s and 3.734 ->
#: 3.704 s (heavy family), 4.137 -> 4.023 s (default), about 1%, within one run's
#: noise.  Timed alone inside that fit each kernel is slower on two threads (median
#: us: max_abs 180 / 63, quantize 980 / 350, add_leaf_values 1174 / 997), so the gain
#: is in the kernels after them; why was not established.  At 2**17 the 200k-row
#: 10-class shape was 3.4% slower (3.160 -> 3.269 s): fits under 262k rows keep the
#: serial kernels.
MIN_PARALLEL_STREAM_ROWS = 1 << 18


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


def tree_builder(data, n_threads, pool_capacity, quantized, settings, cat, min_child_samples,
                 comm=LOCAL):
    """The per-fit ``TreeBuilder`` of ``data`` (``prepare``), with the thread plan of
    its size read now."""
    par = thread_plan(data.n_rows, int(data.bin_mapper.feat_off[-1]), n_threads)
    return TreeBuilder(data, n_threads, par, pool_capacity, quantized, settings, cat,
                       min_child_samples, comm)


def multi_tree_builder(data, n_threads, pool_capacity, n_out, settings, cat,
                       min_child_samples, comm=LOCAL, shared_hess=False):
    """The per-fit vector-leaf builder (``multi_builder.MultiTreeBuilder``) of ``data``
    for ``n_out`` outputs (``multi_strategy="multi_output_tree"``); ``shared_hess``:
    every output's hessians are the same (one hessian column in the cells)."""
    par = thread_plan(data.n_rows, int(data.bin_mapper.feat_off[-1]), n_threads)
    return MultiTreeBuilder(data, n_threads, par, pool_capacity, n_out, settings, cat,
                            min_child_samples, comm, shared_hess)


def quantize_multi(grad, hess, n_rows, out, comm=LOCAL):
    """Every output's integer cells for one vector-leaf tree into ``out (n, 2K)`` or
    ``(n, K + 1)`` (``multi_hist``'s layouts), each output with its own exact
    fixed-point scales from ``tree_scales`` (over every shard of ``comm``); returns the
    tree's ``MultiScales``."""
    n_out = grad.shape[0]
    sc = np.empty((4, n_out))
    cb = count_bits(n_rows)
    for k in range(n_out):
        m = np.zeros(2)
        if grad.shape[1]:
            _pick(_hist.max_abs, _parallel_stream(grad.shape[1]))(
                grad[k], hess[k], m)
        s = tree_scales(m[0], m[1], 0.0, n_rows, False, 0, comm)
        sc[:, k] = (s.grad, s.hess, s.inv_grad, s.inv_hess)
        cb = int(s.count_bits)
    _pick(_multi_hist.quantize_multi, _parallel_stream(grad.shape[1]))(
        grad, hess, sc[0].copy(), sc[1].copy(), cb, out)
    return MultiScales(sc, cb)


def scores(builder, objective, params, y, w, raw, grad, hess):
    """The fit's training scores (``bonsai.scores``): host arrays, these kernels."""
    return HostScores(sys.modules[__name__], objective, y, w, raw, grad, hess)


def quantize(grad, hess, n_rows, out, quant_bins=0, seed=0, comm=LOCAL, segs=None):
    """Integer (grad, hess) cells of one output, for ``n_rows`` sampled rows (over
    every shard of ``comm``; this shard's rows lie in the global order as ``segs``
    says, ``bonsai.comm.segments``; None: the global rows ``0..``).

    ``out (n, 2)``: exact fixed point, (grad, hess * 2**count_bits + count).
    ``out (n, 1)``: quantized mode, grad and hess stochastically rounded to at most
    ``quant_bins`` levels and packed as ``g * 2**32 + h`` (one add per cell);
    ``quant_bins`` is lowered so that ``n_rows * quant_bins < 2**31``.

    Returns the tree's ``bonsai.split_settings.Scales`` (grad and hess scales,
    count_bits, packed, their reciprocals), which every split kernel takes to turn
    cells back into sums (exact-mode scales are powers of two: their reciprocals are
    exact).  The largest |grad| and |hess| are taken over every shard, so all
    shards share one scale.
    """
    m = np.zeros(2)
    if grad.size:
        _pick(_hist.max_abs, _parallel_stream(grad.shape[0]))(grad, hess, m)
    packed = out.shape[1] == 1
    neg = float(-np.min(hess)) if (packed and hess.size) else 0.0
    scales = tree_scales(m[0], m[1], neg, n_rows, packed, quant_bins, comm)
    if packed:
        kernel = _pick(_hist.quantize_packed, _parallel_stream(grad.shape[0]))
        for lo, g, length in _segs(segs, grad.shape[0]):   # the hash reads global row ids
            kernel(grad[lo:lo + length], hess[lo:lo + length], scales.grad, scales.hess,
                   np.uint64(seed), np.int64(g), out[lo:lo + length])
        return scales
    _pick(_hist.quantize_gradients, _parallel_stream(grad.shape[0]))(
        grad, hess, scales.grad, scales.hess, int(scales.count_bits), out)
    return scales


def tree_scales(max_g, max_h, neg, n_rows, packed, quant_bins=0, comm=LOCAL):
    """One tree's ``Scales`` from this shard's largest |grad| and |hess| and its
    ``neg = -min(hess)`` (read in packed mode only): the three maxima are taken over
    every shard of ``comm`` in one round trip, so all shards share one scale.  Every
    backend's ``quantize`` computes its scales here.

    Raises FloatingPointError when a maximum is not finite (NaN or inf gradients), and
    ValueError in packed mode when a hessian is negative.
    """
    if is_local(comm):          # one shard: its maxima are the maxima
        max_g, max_h, neg = float(max_g), float(max_h), float(neg)
    else:   # np.max keeps a NaN: the finiteness check below sees it
        every = np.array(comm.allgather((float(max_g), float(max_h), float(neg))), np.float64)
        max_g, max_h, neg = (float(v) for v in every.max(axis=0))
    if not (math.isfinite(max_g) and math.isfinite(max_h)):
        raise FloatingPointError("non-finite gradient or hessian")
    if packed:
        if neg > 0.0:
            raise ValueError("quantized_grad needs non-negative hessians; the objective "
                             "returned a negative one")
        q = float(max(1, min(quant_bins, (2 ** 31 - 1) // max(n_rows, 1) - 1)))
        sg = q / max_g if max_g > 0 else 1.0
        sh = q / max_h if max_h > 0 else 1.0
        return Scales.quantized(sg, sh)
    cb = count_bits(n_rows)
    sg = fixed_point_scale(max_g, n_rows)
    sh = fixed_point_scale(max_h, n_rows, FIXED_POINT_BITS - cb)
    return Scales.exact(sg, sh, cb)


def build_histograms(pool, X_binned, feat_off, gh, idx, starts, stops, slots, n_threads,
                     identity=False):
    """Fill ``pool.hist[slots[i]]`` from the rows ``idx[starts[i]:stops[i]]``;
    ``identity`` says ``idx[i] == i`` on those ranges (the unsampled root).

    ``X_binned`` is the dense blocked matrix (``bonsai.binning``) or a
    ``SparseRows`` layout (``.ptr``, ``.bins``, ``.default_bin``: each row lists only
    its cells outside the features' default bins, which are restored afterwards from
    the node totals).  How the work is cut: ``_layout`` and ``step.build``.
    """
    layout, X_dense, sp_ptr, sp_bins, sp_default = hist_layout(X_binned, feat_off, n_threads)
    par = thread_plan(idx.shape[0], int(feat_off[-1]), n_threads)
    _step.build(layout, X_dense, sp_ptr, sp_bins, sp_default, feat_off, gh, _packed(gh), idx,
                identity, starts, stops, slots, pool.scratch(max(n_threads - 1, 1)), par,
                pool.hist)


def _pick(kernel, parallel):
    return kernel if parallel else kernel.serial


def _parallel_rows(n, min_rows=None):
    """Whether a row-parallel kernel over ``n`` rows runs in parallel: with more than
    one thread and at least ``min_rows`` (default ``2 * MIN_ROWS_PER_THREAD``) rows.
    Small fits thus never compile the parallel twins (a parallel kernel compiles
    several times slower than its serial twin, and gains nothing on so few rows)."""
    return (n >= (2 * MIN_ROWS_PER_THREAD if min_rows is None else min_rows)
            and numba.get_num_threads() > 1)


def _parallel_stream(n):
    """``_parallel_rows`` for a streaming kernel over ``n`` rows: from
    ``MIN_PARALLEL_STREAM_ROWS`` rows (above the partition's and ``max_abs``' own
    two-chunk minimum, which it replaces)."""
    return _parallel_rows(n, MIN_PARALLEL_STREAM_ROWS)


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
                    node_missing_bin, n_threads, bits=None):
    """Stable partition of each node range (reading the column-major bins
    ``X_cols (F, n)``); returns the rows sent left per node.  A node with bin -1 is a
    categorical split of its row of ``bits (m, W)``."""
    nleft = np.empty(starts.shape[0], np.int64)
    if bits is None:
        bits = np.zeros((starts.shape[0], 1), np.uint64)
    par = thread_plan(X_cols.shape[1], 0, n_threads)
    _step.partition(X_cols, idx, tmp, starts, stops, feature, bin_, default_left,
                    node_missing_bin, bits, par, nleft)
    return nleft


def fill_range(idx):
    """``idx[i] = i``."""
    _pick(_part.fill_range, _parallel_stream(idx.shape[0]))(idx)


def _segs(segs, n):
    return [(0, 0, n)] if segs is None else segs.tolist()


def sample_rows(n, segs, fraction, seed, out):
    """This shard's rows of the round's subsample: the local rows ``i < n`` whose
    global row id (``segs``, as in ``quantize``) hashes (with ``seed``) below
    ``fraction``, ascending, written to ``out[:k]``; returns k
    (``histogram.sample_rows``)."""
    k = 0
    for lo, g, length in _segs(segs, n):
        got = int(_hist.sample_rows(np.uint64(seed), np.int64(g), float(fraction),
                                    out[k:k + length]))
        if lo:
            out[k:k + got] += lo
        k += got
    return k


def add_leaf_values(raw, idx, leaf_start, leaf_stop, leaf_value):
    """``raw[idx[i]] += leaf_value[l]`` over each leaf's row range."""
    _pick(_part.add_leaf_values, _parallel_stream(idx.shape[0]))(
        raw, idx, leaf_start, leaf_stop, leaf_value)


def leaf_sums(grad, hess, idx, leaf_start, leaf_stop, comm=LOCAL):
    """(grad, hess) float64 sums over each leaf's rows, (L, 2): each leaf summed in row
    order on this shard, then the shards' sums added in rank order."""
    out = np.empty((leaf_start.shape[0], 2))
    _pick(_part.leaf_sums, _parallel_stream(idx.shape[0]))(
        grad, hess, idx, leaf_start, leaf_stop, out)
    if comm.size > 1:
        parts = comm.allgather(out)
        out = parts[0].copy()
        for q in parts[1:]:
            out += q
    return out


def leaf_weights(g, h, cfg, out):
    """``out[i]``: the regularised leaf value of sums (g[i], h[i]) under ``cfg``
    (``SplitSettings``)."""
    _split.leaf_weights(g, h, cfg.reg_lambda, cfg.reg_alpha, cfg.max_delta_step, out)


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


def _bin_offsets(missing_bin):
    """``feat_off`` of a bin layout from its missing bins (``missing_bin + 1`` bins a
    feature)."""
    return np.concatenate([[0], np.cumsum(missing_bin + 1)]).astype(np.int64)


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
    """Leaf index of every row in every model tree, ``out (n, M) int32`` (a vector
    tree's first view stands for it: ``ens.leaf_offset``)."""
    k = _pick(_pred.predict_leaf, parallel_predict(X.shape[0], _n_trees(ens)))
    k(X, ens.feature, ens.threshold, ens.default_left, ens.left, ens.right, ens.cat_ptr,
      ens.cat_words, ens.leaf_offset, out)


def predict_binned_add(X_cols, rows, tree, missing_bin, out):
    """``out[rows[i]] += tree output`` of binned rows (validation sets, out-of-bag rows);
    sparse bins (``bonsai.sparse.SparseBins``) are read from their row store.  A scalar
    tree adds to ``out (n,)``; a vector-leaf tree (``value (n_nodes, K)``) adds
    ``value[leaf, k]`` to ``out[k, r]`` of ``out (K, n)`` (the training scores'
    layout), one descent per row: the bits of K scalar trees' adds."""
    cat_ptr, cat_words = tree.arrays_cat()
    vector = tree.value.ndim == 2
    if vector and (out.ndim != 2 or out.shape[0] != tree.n_values):
        raise ValueError(f"predict_binned_add: a tree with {tree.n_values} outputs adds to "
                         f"out of shape (K, n) = ({tree.n_values}, n), got {out.shape}")
    if isinstance(X_cols, SparseBins):
        kern = _sparse.predict_binned_add_rows_vec if vector else _sparse.predict_binned_add_rows
        _pick(kern, _parallel_rows(rows.shape[0]))(
            X_cols.ptr, X_cols.gidx, _bin_offsets(missing_bin), X_cols.default_bin, rows,
            tree.feature, tree.bin_threshold, tree.default_left, missing_bin, tree.left,
            tree.right, tree.value, cat_ptr, cat_words, out)
        return
    kern = _pred.predict_binned_add_vec if vector else _pred.predict_binned_add
    _pick(kern, _parallel_rows(rows.shape[0]))(
        X_cols, rows, tree.feature, tree.bin_threshold, tree.default_left, missing_bin,
        tree.left, tree.right, tree.value, cat_ptr, cat_words, out)
