"""The CPU backend's per-fit tree builder: the buffers of a fit and the split step the
grow loop calls.

``TreeBuilder`` owns what lives for a whole fit: the histogram pool, the integer
gradient cells ``gh``, the sample indices ``idx`` and their partition scratch, the
histogram layout and the thread plan.  The grow loop (``bonsai.grow``) calls

* ``start_tree(scales, idx)`` and ``finish_tree()`` once per tree;
* ``evaluate_root(nodes, masks)`` and ``split(nodes, batch, ...)``: the split step
  (partition, children's histograms, their best splits, children written to the
  ``bonsai.nodes`` table);
* ``level_split`` / ``level_split_categorical`` / ``range_sums`` / ``bits_sums`` for
  oblivious levels.

With one shard (``LocalComm``) the split step is one compiled call
(``step.split_nodes``).  Otherwise it runs **staged**, the same kernels as separate
calls with the communicator between them: the partition's left counts are summed
over shards before the smaller child is chosen, and the filled histograms are summed
before the split scan.  Every decision then reads global quantities, so every shard
grows the same tree (``bonsai.comm``).  ``BONSAI_PROFILE`` also runs staged, to time
each stage.
"""
import os

import numpy as np

from ... import _profile
from ..._dtypes import HIST, IDX, N_HIST_CHANNELS
from ...comm import LOCAL, LocalComm
from ...nodes import BIN, COUNT, DEFAULT_LEFT, FEATURE, SLOT, START, STOP
from ...sparse import SparseBins
from . import split_cat as _split_cat
from . import split_level as _split_level
from . import split as _split
from . import step as _step
from .blocks import FeatureBlocks
from .layout import hist_layout

#: histogram bytes of one batch from which a fit over several shards splits the
#: rest of the tree's search between feature blocks (``blocks``); BONSAI_BLOCK_BYTES
#: overrides it (tests: 0, blocks throughout).  Off by default: at 2 ranks on one
#: host summing every bin measured faster (1M x 28, depth 8, 50 trees, medians of 3
#: interleaved, after commit 16a48c4: 4.55 s and 7.0 worker CPU-s against 4.86 s /
#: 7.6 with blocks from 2 MB and 5.20 s / 8.2 throughout; before it 5.66 / 6.25 / 6.58 s),
#: and the blocks' reduce-scatter is an all-to-all (W - 1 messages per rank per
#: level), which docs/distributed.md's model puts behind recursive doubling at 16 and
#: 64 ranks too; a recursive-halving reduce-scatter would change that
BLOCK_BYTES = 1 << 62

#: tests set this to also all-reduce the partitions' child counts and assert they
#: equal the ones read from the parents' splits (``TreeBuilder._child_rows``)
CHECK_CHILD_ROWS = False


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


class TreeBuilder:
    """One fit's buffers and split step on the CPU (see the module docstring).

    ``data`` is the backend's ``CpuData``; ``par`` the thread plan
    (``cpu.thread_plan``, None: one thread); ``settings`` (``SplitSettings``),
    ``cat`` (``CatSettings``) and ``min_child_samples`` the split constraints."""

    def __init__(self, data, n_threads, par, pool_capacity, quantized, settings, cat,
                 min_child_samples, comm=LOCAL):
        bm = data.bin_mapper
        self.data = data
        self.X_cols = data.X_cols
        # sparse bins: the partition reads their column store (``X_csc``), not X_cols
        sparse = isinstance(data.X_cols, SparseBins)
        self._part_cols = None if sparse else data.X_cols
        self._part_csc = data.X_cols.csc() if sparse else None
        self.n_rows = data.n_rows
        self.feat_off = bm.feat_off
        self.n_value_bins = bm.n_value_bins
        self.feature_missing_bin = bm.missing_bin
        # None without categorical features: the kernels then leave their categorical
        # scans out of the compiled code (``backends.cpu.step``)
        self.is_cat = bm.is_cat if bool(bm.is_cat.any()) else None
        self.cat_words = bm.cat_words
        self.n_threads = n_threads
        self.par = par
        self.layout = hist_layout(data.X_hist, self.feat_off, n_threads)
        self.pool = HistogramPool(int(self.feat_off[-1]), capacity=pool_capacity,
                                  channels=1 if quantized else 2)
        self.gh = np.empty((self.n_rows, 1 if quantized else 2), np.int64)
        self.idx_buf = np.empty(self.n_rows, IDX)
        self.tmp = np.empty(self.n_rows, IDX)
        self.cfg, self.cat_cfg, self.min_child_samples = settings, cat, min_child_samples
        self.comm = comm
        self.local = isinstance(comm, LocalComm)
        # over several shards, from the first batch of BLOCK_BYTES of histograms to
        # the end of the tree, each rank owns a block of the features (``blocks``);
        # before, every rank sums every bin
        self.blocks = None if self.local else FeatureBlocks(comm, self.feat_off, self.is_cat)
        self.in_blocks = False
        self.block_bytes = int(os.environ.get("BONSAI_BLOCK_BYTES", BLOCK_BYTES))
        self.staged = not self.local or _profile.ENABLED
        # fit constants of every split-step call, looked up once here
        self.packed = _packed(self.gh)
        self.scratch_slots = self.pool.scratch(max(n_threads - 1, 1))
        self.scales = None
        self.idx = None

    def start_tree(self, scales, idx):
        """The next tree's gradient scales and its sample ``idx`` (a prefix of
        ``idx_buf``, partitioned in place by the splits)."""
        self.scales = scales
        self.idx = idx
        self.in_blocks = False

    def finish_tree(self):
        """The tree is grown (``idx`` already holds its partitioned rows here; a device
        builder copies them home)."""

    def finish_fit(self):
        """The fit is over (a device builder reports its profile)."""

    # ---- the split step ----------------------------------------------------------
    def evaluate_root(self, nodes, masks):
        """The root's (table row 0) histogram, sums and best split (``masks[:1]``)."""
        self.split(nodes, np.empty(0, np.int64), np.empty(0, np.int64), False, 0, masks)

    def split(self, nodes, batch, new_slot, child_ok, min_split_rows, masks):
        """Split the nodes ``batch`` of the node table (``bonsai.nodes.NodeTable``):
        partition, smaller children's histograms into ``new_slot``, larger children by
        subtraction in their parent's slot, best splits of the children that can split
        (``masks (2m, F)``), children written as table rows ``nodes.n..nodes.n + 2m -
        1`` (the caller reserves them).  Returns (ids of the children that can split,
        slots to free), as lists.  An empty ``batch`` evaluates the root instead."""
        if self.staged:
            return self._split_staged(nodes, batch, new_slot, child_ok, min_split_rows, masks)
        m = batch.shape[0]
        expand = np.empty(2 * m, np.int64)
        free = np.empty(2 * m, np.int64)
        layout, X_dense, sp_ptr, sp_bins, sp_default = self.layout
        n_e, n_f = _step.split_nodes(
            layout, self._part_cols, X_dense, sp_ptr, sp_bins, sp_default, self.feat_off,
            self.n_value_bins, self.feature_missing_bin, self.gh, self.packed, self.idx,
            self.tmp, self.pool.hist, nodes.ints, nodes.gain, nodes.sums, nodes.left_sums,
            nodes.bits, batch, nodes.n, new_slot, self.scratch_slots, child_ok, min_split_rows,
            masks, self.is_cat, self.cat_cfg, self.scales, self.cfg, self.min_child_samples,
            self.par, self._identity(m), expand, free, self._part_csc, _step.ONE_STEP)
        return expand[:n_e].tolist(), free[:n_f].tolist()

    def can_grow_leafwise(self, nodes, max_leaves, max_depth):
        """Whether ``grow_leafwise`` can grow this tree: one shard, not staged, a
        leaf budget the node table holds, and a free slot for every leaf that can hold
        a histogram at once (at most ``max_leaves``, or ``2**(max_depth - 1)``: leaves
        at ``max_depth`` hold none) plus the one a split takes first."""
        live = max_leaves if max_depth <= 0 else min(max_leaves, 1 << min(max_depth - 1, 30))
        return (not self.staged and max_leaves > 0
                and nodes.ints.shape[0] >= 2 * max_leaves + 1
                and len(self.pool.free) >= live + 1)

    def grow_leafwise(self, nodes, max_leaves, max_depth, min_split_rows, masks, slack):
        """The whole leaf-wise tree, its root (table row 0, holding a slot) evaluated
        first, in one compiled call: ``step.split_nodes`` with ``leafwise``, which runs
        the grow loop's best-first policy (``bonsai.grow``) around its split step.

        A leaf-wise tree of L leaves is L - 1 splits of one node each; on small and
        medium data each takes tens of microseconds, and the Python between them (the
        loop's selection and bookkeeping, this builder's call, numba's dispatch of ~40
        arguments) cost about a third more (43k x 9, 63 leaves, 300 trees: 0.98 ->
        0.72 CPU-s for the fit, machine shared).  The policy is the loop's step for
        step, so the trees are the same: the frontier keeps the loop's order (children
        appended, the split leaf taken out), each split takes the first leaf of
        highest gain, none when that is -inf or ``max_leaves`` is reached, and a
        child may split below ``max_depth`` and the leaf budget.  Slots come off the
        pool's free list as the same stack; every leaf that can hold one has a
        slot (``can_grow_leafwise``), and the loop's pruning of unreachable leaves runs
        the same way (``slack``: ``Grower.PRUNE_SLACK``), so as few histograms are
        alive.  The leaves' slots go back to the pool."""
        layout, X_dense, sp_ptr, sp_bins, sp_default = self.layout
        free = np.empty(self.pool.hist.shape[0], np.int64)   # room for every slot
        free[:len(self.pool.free)] = self.pool.free
        n, n_free = _step.split_nodes(
            layout, self._part_cols, X_dense, sp_ptr, sp_bins, sp_default, self.feat_off,
            self.n_value_bins, self.feature_missing_bin, self.gh, self.packed, self.idx,
            self.tmp, self.pool.hist, nodes.ints, nodes.gain, nodes.sums, nodes.left_sums,
            nodes.bits, np.empty(0, np.int64), nodes.n, np.empty(0, np.int64),
            self.scratch_slots, True, min_split_rows, masks, self.is_cat, self.cat_cfg,
            self.scales, self.cfg, self.min_child_samples, self.par, self._identity(0),
            np.empty(2, np.int64), np.empty(2, np.int64), self._part_csc,
            (int(max_leaves), int(max_depth), free, len(self.pool.free), int(slack)))
        nodes.n = int(n)
        self.pool.free = free[:n_free].tolist()

    def _identity(self, m):
        return m == 0 and self.idx.shape[0] == self.n_rows

    def _build(self, starts, stops, slots, identity):
        layout, X_dense, sp_ptr, sp_bins, sp_default = self.layout
        with _profile.stage("histograms"):
            _step.build(layout, X_dense, sp_ptr, sp_bins, sp_default, self.feat_off, self.gh,
                        self.packed, self.idx, identity, starts, stops, slots,
                        self.scratch_slots, self.par, self.pool.hist)
            self._reduce_slots(slots)

    def _reduce_slots(self, slots):
        """Sum this shard's histograms ``slots`` over every shard (exact: integers), in
        this rank's block of the features (``blocks``)."""
        if self.local or slots.shape[0] == 0:
            return
        hist = self.pool.hist
        if not self.in_blocks and slots.shape[0] * hist[0].nbytes >= self.block_bytes:
            self.in_blocks = True      # the same on every rank: slots and bins agree
        if self.in_blocks:
            self.blocks.reduce(hist, slots)
        else:
            hist[slots] = self.comm.allreduce_sum(np.ascontiguousarray(hist[slots]))

    def _split_staged(self, nodes, batch, new_slot, child_ok, min_split_rows, masks):
        """``split`` as separate calls, with the shards' counts and histograms summed
        between them (and each stage timed under ``BONSAI_PROFILE``)."""
        t, t_bits, first = nodes.ints, nodes.bits, nodes.n
        m = batch.shape[0]
        if m == 0:      # the root: the one "left child" of a pseudo-parent
            root = np.zeros(1, np.int64)
            slot = np.array([t[0, SLOT], -1], np.int64)
            self._build(t[root, START], t[root, STOP], slot[:1], self._identity(0))
            child_rows = np.array([t[0, COUNT], 0], np.int64)
            out = self._scan(child_rows, slot, np.full(2, -1, np.int64), masks[:1], t_bits)
            gain, feat, bin_, dl, lsum, sums, bits = out
            nodes.gain[0], t[0, FEATURE], t[0, BIN], t[0, DEFAULT_LEFT] = (
                gain[0], feat[0], bin_[0], dl[0])
            nodes.sums[0], nodes.left_sums[0], t_bits[0] = sums[0], lsum[0], bits[0]
            return [], []
        starts, stops, feature, bin_, dl, f_missing, parent_slot, p_bits = _step.batch_columns(
            t, t_bits, batch, self.feature_missing_bin)
        nleft = np.empty(m, np.int64)
        with _profile.stage("partition"):
            _step.partition(self._part_cols, self.idx, self.tmp, starts, stops, feature, bin_,
                            dl, f_missing, p_bits, self.par, nleft, self._part_csc)
        child_rows = self._child_rows(nodes, batch, starts, stops, nleft)
        slot = np.empty(2 * m, np.int64)
        b_start, b_stop, b_slot, sub = _step.plan_children(
            starts, stops, nleft, child_rows, parent_slot, new_slot, child_ok, min_split_rows,
            slot)
        if b_start.shape[0]:
            self._build(b_start, b_stop, b_slot, False)
        gain, c_feat, c_bin, c_dl, lsum, sums, c_bits = self._scan(child_rows, slot, sub,
                                                                   masks, t_bits)
        expand = np.empty(2 * m, np.int64)
        free = np.empty(2 * m, np.int64)
        n_e, n_f = _step.write_children(t, nodes.gain, nodes.sums, nodes.left_sums, t_bits,
                                        batch, first, starts, stops, nleft, child_rows,
                                        parent_slot, new_slot, slot, gain, c_feat, c_bin, c_dl,
                                        lsum, sums, c_bits, expand, free)
        return expand[:n_e].tolist(), free[:n_f].tolist()

    def _child_rows(self, nodes, batch, starts, stops, nleft):
        """(2m,) rows of each split node's left and right child over every shard.
        Exact cells count rows exactly, so over several shards the parent's split says
        them (its left count and its own): no round trip.  Packed cells estimate
        counts, so those shards sum their partitions' counts."""
        if self.local:
            return _step.local_child_rows(starts, stops, nleft)
        if self.packed is None:
            out = np.empty(2 * batch.shape[0], np.int64)
            out[0::2] = nodes.left_sums[batch, 2]
            out[1::2] = nodes.ints[batch, COUNT] - out[0::2]
            if CHECK_CHILD_ROWS:
                summed = self.comm.allreduce_sum(_step.local_child_rows(starts, stops, nleft))
                assert np.array_equal(out, summed), (out, summed)
            return out
        return self.comm.allreduce_sum(_step.local_child_rows(starts, stops, nleft))

    def _scan(self, child_rows, slot, sub, masks, t_bits):
        out = _step.split_outputs(slot.shape[0], t_bits.shape[1])
        if self.in_blocks:
            masks = self.blocks.masks(masks)
        with _profile.stage("splits"):
            _step.scan_children(self.pool.hist, child_rows, slot, sub, self.feat_off,
                                self.n_value_bins, masks, self.is_cat, self.cat_cfg,
                                self.scales, self.cfg, self.min_child_samples, self.par, *out)
        if self.in_blocks:
            self.blocks.merge(out)
        return out

    # ---- oblivious levels ----------------------------------------------------------
    def level_split(self, slots, node_rows, mask):
        """The summed gain of every numeric (bin, missing direction) candidate over the
        level's nodes (their histograms ``slots``, rows ``node_rows``), (n_bins_total, 2)."""
        out = np.empty((int(self.feat_off[-1]), 2))
        if self.in_blocks:
            mask = self.blocks.masks(mask[None, :])[0]
        _split_level.find_level_split(self.pool.hist, slots, node_rows, self.feat_off,
                                      self.n_value_bins, mask, self.is_cat, self.scales,
                                      self.cfg, self.min_child_samples, out)
        return out if not self.in_blocks else self.blocks.gather_bins(out)

    def level_split_categorical(self, slots, node_rows, mask):
        """Each categorical feature's best shared category set over the level and its
        summed gain: (gain (F,), bits (F, cat_words))."""
        n_features = self.n_value_bins.shape[0]
        gain = np.empty(n_features)
        bits = np.empty((n_features, self.cat_words), np.uint64)
        if self.in_blocks:
            mask = self.blocks.masks(mask[None, :])[0]
        _split_level.find_level_split_categorical(
            self.pool.hist, slots, node_rows, self.feat_off, self.n_value_bins, mask,
            self.is_cat, self.scales, self.cfg, self.min_child_samples, self.cat_cfg, gain,
            bits)
        if self.in_blocks:
            return self.blocks.gather_features(gain), self.blocks.gather_features(bits)
        return gain, bits

    def range_sums(self, slots, lo, hi, extra, cnt_factor):
        """(grad, hess, count) sums of bins ``lo:hi`` (plus bin ``extra`` if >= 0) per
        slot; ``cnt_factor`` (m,) estimates counts in packed mode."""
        out = np.empty((slots.shape[0], 3), np.int64)
        _split.range_sums(self.pool.hist, slots, lo, hi, extra, self.scales, cnt_factor, out)
        if self.in_blocks:
            feature = int(np.searchsorted(self.feat_off, lo, side="right") - 1)
            return self.blocks.from_owner(feature, out)
        return out

    def bits_sums(self, slots, feature, bits, cnt_factor):
        """(grad, hess, count) sums of the bins of ``feature`` whose bit is set in
        ``bits``, per slot (m, 3)."""
        out = np.empty((slots.shape[0], 3), np.int64)
        _split_cat.bits_sums(self.pool.hist, slots, int(self.feat_off[feature]),
                             int(self.n_value_bins[feature]), bits, self.scales, cnt_factor,
                             out)
        return out if not self.in_blocks else self.blocks.from_owner(feature, out)


def _packed(gh):
    """The fill's ``packed`` argument: True for packed quantized (n, 1) cells, None for
    exact (n, 2) ones (the packed fill is then not compiled)."""
    return True if gh.shape[1] == 1 else None
