"""The CPU backend's vector-leaf tree builder (``multi_strategy="multi_output_tree"``):
one tree per round over K-output integer cells.

``MultiTreeBuilder`` has the single-output ``TreeBuilder``'s methods and effects, so
the one grow loop (``bonsai.grow``) drives it unchanged: ``start_tree`` /
``finish_tree``, the split step ``evaluate_root`` / ``split`` (partition, the smaller
children's histograms, the larger by subtraction, the children's best splits, the
children written to the node table), and the oblivious level's ``level_split`` /
``level_split_categorical`` / ``range_sums`` / ``bits_sums``.  It adds
``node_values``: every node's K leaf weights and cover for the finished tree.

What differs is the cells: ``gh (n, C)`` and histograms ``(slots, bins, C)``, C =
2K or, when the objective's hessians are the same for every output
(``shared_hess``), K + 1 (``multi_hist``), scored by the gain summed over the outputs (``multi_split``).  The
node table keeps output 0's (grad, hess, count) in its three ``sums`` columns (what
the loop reads: counts and oblivious bookkeeping); the builder keeps every node's
full cells and its best split's left cells beside it (``ksums``, ``kleft``), filled
in the same places as the table's.  The partition and the children's bookkeeping
are the single-output kernels (``step``, ``children``).

Over several data shards the fills' histograms and the partitions' child counts are
summed over the shards (``bonsai.comm``) before anything reads them, so every shard
grows the same tree.
"""
from typing import NamedTuple

import numpy as np

from ... import _profile
from ...comm import LOCAL, LocalComm
from ...nodes import BIN, DEFAULT_LEFT, FEATURE, SLOT, START, STOP
from ...sparse import SparseBins
from .builder import HistogramPool
from .children import local_child_rows, plan_children, write_children
from .layout import SparseRows
from . import multi_hist as _mh
from . import multi_split as _ms
from . import step as _step

#: a node gets several fill tasks (a share of the threads) from this many rows
MIN_TASK_ROWS = 4096
#: a fill of fewer (rows x features x channels) runs on one thread
MIN_PARALLEL_CELLS = 1 << 18


def multi_channels(n_out, shared_hess=False):
    """Cells a row of K = ``n_out`` outputs: ``2K``, or ``K + 1`` with one shared
    hessian column (``multi_hist``'s layouts)."""
    return n_out + 1 if shared_hess else 2 * n_out


class MultiScales(NamedTuple):
    """One vector-leaf tree's cell scales: ``sc (4, K)`` rows grad scale, hess scale
    and their reciprocals per output, and the shared ``count_bits``."""
    sc: np.ndarray
    count_bits: int


class MultiTreeBuilder:
    """One vector-leaf fit's buffers and split step on the CPU (module docstring).

    ``data`` is the backend's ``CpuData``, ``par`` the partition's thread plan
    (``cpu.thread_plan``), ``n_out`` the outputs K."""

    def __init__(self, data, n_threads, par, pool_capacity, n_out, settings, cat,
                 min_child_samples, comm=LOCAL, shared_hess=False):
        bm = data.bin_mapper
        self.data = data
        self.X_cols = data.X_cols
        sparse = isinstance(data.X_cols, SparseBins)
        self._part_cols = None if sparse else data.X_cols
        self._part_csc = data.X_cols.csc() if sparse else None
        self.X_hist = data.X_hist
        self.n_rows = data.n_rows
        self.feat_off = bm.feat_off
        self.n_value_bins = bm.n_value_bins
        self.n_features = int(self.n_value_bins.shape[0])
        self.feature_missing_bin = bm.missing_bin
        self.is_cat = bm.is_cat if bool(bm.is_cat.any()) else None
        self.n_threads = int(n_threads)
        self.par = par
        self.n_out = int(n_out)
        # one hessian column for every output when they are all the same (K + 1
        # cells a row, ``multi_hist.gcol``): the same integers, fewer to add
        self.n_chan = multi_channels(self.n_out, shared_hess)
        self.pool = HistogramPool(int(self.feat_off[-1]), capacity=pool_capacity,
                                  channels=self.n_chan)
        self.gh = np.empty((self.n_rows, self.n_chan), np.int64)
        self.idx_buf = np.empty(self.n_rows, np.uint32)
        self.tmp = np.empty(self.n_rows, np.uint32)
        self.cfg, self.cat_cfg, self.min_child_samples = settings, cat, min_child_samples
        self.comm = comm
        self.local = isinstance(comm, LocalComm)
        self.ksums = np.zeros((64, self.n_chan), np.int64)
        self.kleft = np.zeros((64, self.n_chan), np.int64)
        self._slot_left = {}
        self.scales = None
        self.idx = None

    # ---- per tree ------------------------------------------------------------------
    def start_tree(self, scales, idx):
        self.scales = scales
        self.idx = idx
        self._slot_left = {}

    def finish_tree(self):
        """The tree is grown (nothing to copy on the CPU)."""

    def finish_fit(self):
        """The fit is over."""

    def _reserve(self, n):
        if self.ksums.shape[0] < n:
            cap = max(n, 2 * self.ksums.shape[0])
            for name in ("ksums", "kleft"):
                old = getattr(self, name)
                new = np.zeros((cap, self.n_chan), np.int64)
                new[:old.shape[0]] = old
                setattr(self, name, new)

    def node_values(self, n):
        """(value (n, K), cover (n,)) of table rows ``0..n-1``: each output's leaf
        weight from the node's cells, and the hessian summed over the outputs."""
        value = np.empty((n, self.n_out))
        cover = np.empty(n)
        _ms.leaf_values(self.ksums[:n], self.n_out, self.scales.count_bits, self.scales.sc,
                        self.cfg, value, cover)
        return value, cover

    # ---- histograms ------------------------------------------------------------------
    def _fill(self, starts, stops, slots):
        """Fill ``hist[slots[i]]`` from ``idx[starts[i]:stops[i]]`` (then summed over
        the shards)."""
        rows = int(np.sum(stops - starts))
        parallel = (self.n_threads > 1
                    and rows * self.n_features * self.n_chan >= MIN_PARALLEL_CELLS)
        node, f0, f1, wptr = _mh.plan_tasks(starts, stops, self.n_features,
                                            self.n_threads if parallel else 1, MIN_TASK_ROWS)
        hist = self.pool.hist
        X = self.X_hist
        with _profile.stage("histograms"):
            self._fill_kernel(X, parallel, starts, stops, slots, node, f0, f1, wptr, hist)
        if not self.local and slots.shape[0]:
            hist[slots] = self.comm.allreduce_sum(np.ascontiguousarray(hist[slots]))

    def _fill_kernel(self, X, parallel, starts, stops, slots, node, f0, f1, wptr, hist):
        if isinstance(X, SparseRows):
            kernel = _mh.fill_sparse if parallel else _mh.fill_sparse.serial
            kernel(X.ptr, X.bins, X.default_bin, self.feat_off, self.gh, self.idx, starts, stops,
                   slots, node, f0, f1, wptr, hist)
        else:
            kernel = _mh.fill_dense if parallel else _mh.fill_dense.serial
            kernel(X, X.shape[1], self.n_rows, self.feat_off, self.gh, self.idx, starts, stops,
                   slots, node, f0, f1, wptr, hist)

    # ---- the split step ----------------------------------------------------------------
    def evaluate_root(self, nodes, masks):
        """The root's histogram, sums and best split."""
        self.split(nodes, np.empty(0, np.int64), np.empty(0, np.int64), False, 0, masks)

    def _best(self, slots, masks, bits_width):
        m = slots.shape[0]
        gain = np.empty(m)
        feat = np.empty(m, np.int64)
        bin_ = np.empty(m, np.int64)
        dl = np.empty(m, np.uint8)
        left = np.empty((m, self.n_chan), np.int64)
        sums = np.empty((m, self.n_chan), np.int64)
        bits = np.empty((m, bits_width), np.uint64)
        kernel = _ms.scan_nodes if (self.n_threads > 1 and m > 1) else _ms.scan_nodes.serial
        with _profile.stage("splits"):
            kernel(self.pool.hist, slots, self.feat_off, self.n_value_bins, masks, self.is_cat,
                   self.cat_cfg, self.n_out, self.scales.count_bits, self.scales.sc, self.cfg,
                   self.min_child_samples, gain, feat, bin_, dl, left, sums, bits)
        return gain, feat, bin_, dl, left, sums, bits

    def split(self, nodes, batch, new_slot, child_ok, min_split_rows, masks):
        """As ``TreeBuilder.split``: returns (ids of the children that can split, slots
        to free)."""
        t, t_bits, first = nodes.ints, nodes.bits, nodes.n
        m = batch.shape[0]
        cb = self.scales.count_bits
        if m == 0:
            self._reserve(1)
            slot = np.array([t[0, SLOT]], np.int64)
            self._fill(t[:1, START].copy(), t[:1, STOP].copy(), slot)
            gain, feat, bin_, dl, left, sums, bits = self._best(slot, masks[:1], t_bits.shape[1])
            nodes.gain[0] = gain[0]
            t[0, FEATURE], t[0, BIN], t[0, DEFAULT_LEFT] = feat[0], bin_[0], dl[0]
            s3 = np.empty((1, 3), np.int64)
            _mh.decode3(sums, cb, s3)
            nodes.sums[0] = s3[0]
            _mh.decode3(left, cb, s3)
            nodes.left_sums[0] = s3[0]
            t_bits[0] = bits[0]
            self.ksums[0] = sums[0]
            self.kleft[0] = left[0]
            return [], []
        self._reserve(first + 2 * m)
        starts, stops, feature, bin_, dl, f_missing, parent_slot, p_bits = _step.batch_columns(
            t, t_bits, batch, self.feature_missing_bin)
        for i in range(m):      # an oblivious level's chosen split: its left cells
            cells = self._slot_left.pop(int(parent_slot[i]), None)
            if cells is not None:
                self.kleft[batch[i]] = cells
        nleft = np.empty(m, np.int64)
        with _profile.stage("partition"):
            _step.partition(self._part_cols, self.idx, self.tmp, starts, stops, feature, bin_,
                            dl, f_missing, p_bits, self.par, nleft, self._part_csc)
        child_rows = local_child_rows(starts, stops, nleft)
        if not self.local:
            child_rows = self.comm.allreduce_sum(child_rows)
        slot = np.empty(2 * m, np.int64)
        b_start, b_stop, b_slot, sub = plan_children(starts, stops, nleft, child_rows,
                                                     parent_slot, new_slot, child_ok,
                                                     min_split_rows, slot)
        if b_start.shape[0]:
            self._fill(b_start, b_stop, b_slot)
        has_sub = sub >= 0
        if has_sub.any():
            dst = slot[has_sub]
            src = sub[has_sub]
            big = dst.shape[0] * self.pool.n_bins_total * self.n_chan >= MIN_PARALLEL_CELLS
            kernel = _mh.subtract if (big and self.n_threads > 1) else _mh.subtract.serial
            with _profile.stage("subtract"):
                kernel(self.pool.hist, dst, src)
        scan = np.flatnonzero(slot >= 0)
        words = t_bits.shape[1]
        gain = np.full(2 * m, -np.inf)
        c_feat = np.full(2 * m, -1, np.int64)
        c_bin = np.full(2 * m, -1, np.int64)
        c_dl = np.zeros(2 * m, np.uint8)
        c_bits = np.zeros((2 * m, words), np.uint64)
        c_left = np.zeros((2 * m, self.n_chan), np.int64)
        c_sums = np.zeros((2 * m, self.n_chan), np.int64)
        if scan.shape[0]:
            g, f, b, d, lft, sms, bts = self._best(slot[scan], np.ascontiguousarray(masks[scan]),
                                                   words)
            gain[scan], c_feat[scan], c_bin[scan], c_dl[scan] = g, f, b, d
            c_left[scan], c_sums[scan], c_bits[scan] = lft, sms, bts
        lsum3 = np.empty((2 * m, 3), np.int64)
        sums3 = np.empty((2 * m, 3), np.int64)
        _mh.decode3(c_left, cb, lsum3)
        _mh.decode3(c_sums, cb, sums3)
        expand = np.empty(2 * m, np.int64)
        free = np.empty(2 * m, np.int64)
        n_e, n_f = write_children(t, nodes.gain, nodes.sums, nodes.left_sums, t_bits, batch,
                                  first, starts, stops, nleft, child_rows, parent_slot,
                                  new_slot, slot, gain, c_feat, c_bin, c_dl, lsum3, sums3,
                                  c_bits, expand, free)
        # the full cells beside the table's: scanned children their own, the others
        # their parent's split (left cells, or the node's minus them)
        cid = first + np.arange(2 * m)
        parent = np.repeat(batch, 2)
        own = slot >= 0
        left_child = (np.arange(2 * m) % 2) == 0
        derived = np.where(left_child[:, None], self.kleft[parent],
                           self.ksums[parent] - self.kleft[parent])
        self.ksums[cid] = np.where(own[:, None], c_sums, derived)
        self.kleft[cid] = np.where(own[:, None], c_left, 0)
        return expand[:n_e].tolist(), free[:n_f].tolist()

    # ---- oblivious levels ------------------------------------------------------------------
    def level_split(self, slots, node_rows, mask):
        out = np.empty((int(self.feat_off[-1]), 2))
        kernel = _ms.level_split if self.n_threads > 1 else _ms.level_split.serial
        kernel(self.pool.hist, slots, self.feat_off, self.n_value_bins, mask, self.is_cat,
               self.n_out, self.scales.count_bits, self.scales.sc, self.cfg,
               self.min_child_samples, out)
        return out

    def level_split_categorical(self, slots, node_rows, mask):
        gain = np.empty(self.n_features)
        bits = np.empty((self.n_features, self.data.bin_mapper.cat_words), np.uint64)
        _ms.level_split_categorical(self.pool.hist, slots, self.feat_off, self.n_value_bins,
                                    mask, self.is_cat, self.cat_cfg, self.n_out,
                                    self.scales.count_bits, self.scales.sc, self.cfg,
                                    self.min_child_samples, gain, bits)
        return gain, bits

    def _keep_left(self, slots, cells):
        out = np.empty((slots.shape[0], 3), np.int64)
        _mh.decode3(cells, self.scales.count_bits, out)
        for i in range(slots.shape[0]):
            self._slot_left[int(slots[i])] = cells[i].copy()
        return out

    def range_sums(self, slots, lo, hi, extra, cnt_factor):
        """Output 0's (grad, hess, count) sums of bins ``lo:hi`` (plus ``extra``) per
        slot, (m, 3); the full cells are kept for the split that follows."""
        cells = np.empty((slots.shape[0], self.n_chan), np.int64)
        _mh.range_cells(self.pool.hist, slots, lo, hi, extra, cells)
        return self._keep_left(slots, cells)

    def bits_sums(self, slots, feature, bits, cnt_factor):
        cells = np.empty((slots.shape[0], self.n_chan), np.int64)
        _mh.bits_cells(self.pool.hist, slots, int(self.feat_off[feature]),
                       int(self.n_value_bins[feature]), bits, cells)
        return self._keep_left(slots, cells)
