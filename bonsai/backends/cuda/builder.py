"""The CUDA backend's per-fit tree builder: device buffers for a whole fit and the
split step the grow loop calls, one level per call.

The grow loop (``bonsai.grow``) and its node table stay on the host, as for the CPU:
``TreeBuilder`` here has the CPU builder's methods and effects (``start_tree``,
``evaluate_root``, ``split``, ``finish_tree``, and the oblivious level's
``level_split`` / ``level_split_categorical`` / ``range_sums`` / ``bits_sums``).

One ``split`` call is a level: it uploads the split nodes' fields (a few small
arrays), then launches partition (count, offsets, scatter, copy back), the child plan,
the smaller children's histograms, the subtraction, the node sums, the feature scan
and the pick -- eleven launches that never wait for the host -- and then copies the
children's splits back (one wait per level) for ``children.write_children`` on the
host.  The sample indices live on the device for the tree; ``finish_tree`` copies
them home, where the leaf ranges index them.

An oblivious level's candidates are scored on the device (``split.level_gains``: every
(bin, missing direction) summed over the level's nodes) and the grow loop takes the
argmax of that small table; a categorical feature's shared category set is chosen on
the host from the level's histograms, copied home once per level (``_host_hist``),
with the CPU kernels (only for data with categorical features).
"""
import warnings

import numpy as np
from numba import cuda

from ..._dtypes import IDX
from ...nodes import BIN, COUNT, DEFAULT_LEFT, FEATURE, SLOT, START, STOP
from ..cpu import binning as _cpu_binning
from ..cpu import split_cat as _cpu_split_cat
from ..cpu import split_level as _cpu_split_level
from ..cpu.children import batch_columns, write_children
from . import histogram as _hist
from . import partition as _part
from . import split as _split
from ._device import CHUNK, THREADS, blocks_for
from ._profile import report, stage

_MAX_Y = _hist.MAX_GRID_Y


class DevicePool:
    """Histogram slots ``(capacity, n_bins_total, C)`` int64 on the device, with the
    CPU pool's free list (``alloc`` / ``release``); a full pool doubles."""

    def __init__(self, n_bins_total, capacity, channels):
        self.n_bins_total = int(n_bins_total)
        self.channels = int(channels)
        self.hist = cuda.device_array((capacity, self.n_bins_total, self.channels), np.int64)
        self.free = list(range(capacity - 1, -1, -1))

    def alloc(self):
        if not self.free:
            old = self.hist
            cap = old.shape[0]
            self.hist = cuda.device_array((2 * cap, self.n_bins_total, self.channels),
                                          np.int64)
            self.hist[:cap].copy_to_device(old)
            self.free = list(range(2 * cap - 1, cap - 1, -1))
        return self.free.pop()

    def release(self, slot):
        self.free.append(int(slot))


def fits_device(bin_mapper):
    """Whether the device scan holds every categorical feature (at most
    ``split.MAX_CAT_BINS`` value bins); otherwise the fit takes the CPU path."""
    cats = bin_mapper.is_cat.astype(bool)
    return not cats.any() or int(bin_mapper.n_value_bins[cats].max()) <= _split.MAX_CAT_BINS


class TreeBuilder:
    """One fit's device buffers and split step (see the module docstring).  ``data`` is
    the backend's ``CudaData``; the settings as for the CPU builder."""

    def __init__(self, data, pool_capacity, quantized, settings, cat, min_child_samples):
        bm = data.bin_mapper
        self.data = data
        self.X_cols = data.X_cols
        self.X = data.X_dev
        self.n_rows = data.n_rows
        self.feat_off = bm.feat_off
        self.n_value_bins = bm.n_value_bins
        self.feature_missing_bin = bm.missing_bin
        self.is_cat = bm.is_cat if bool(bm.is_cat.any()) else None
        self.cat_words = bm.cat_words
        self.d_feat_off = cuda.to_device(np.ascontiguousarray(bm.feat_off, np.int64))
        self.d_n_value_bins = cuda.to_device(np.ascontiguousarray(bm.n_value_bins, np.int64))
        self.d_is_cat = cuda.to_device(np.ascontiguousarray(bm.is_cat, np.uint8))
        self.d_bin_feature = cuda.to_device(np.repeat(
            np.arange(bm.n_value_bins.shape[0], dtype=np.int64), np.diff(bm.feat_off)))
        channels = 1 if quantized else 2
        self.pool = DevicePool(int(bm.feat_off[-1]), pool_capacity, channels)
        # each feature's most frequent bin (skipped by the fill, restored from the
        # node totals) and the shared-memory tiles of whole features
        dflt = np.zeros(bm.n_value_bins.shape[0], np.int64)
        if self.n_rows:
            _cpu_binning.default_bins.serial(self.X_cols, np.diff(bm.feat_off).astype(np.int64),
                                             dflt, np.empty_like(dflt))
        self.d_default_bin = cuda.to_device(dflt)
        t = _hist.tiles(bm.feat_off, quantized)
        if t is None:
            warnings.warn(f"device='cuda': a feature has more bins than a shared-memory tile "
                          f"holds ({_hist.TILE_PACKED if quantized else _hist.TILE_EXACT}); "
                          "this fit fills its histograms with global atomics (slower)",
                          stacklevel=4)
        self.d_tiles = None if t is None else (cuda.to_device(t[0]), cuda.to_device(t[1]))
        self.gh = np.empty((self.n_rows, channels), np.int64)   # the host quantize's out
        self.d_gh = cuda.device_array((self.n_rows, channels), np.int64)
        self.idx_buf = np.empty(self.n_rows, IDX)
        self.d_idx = cuda.device_array(max(self.n_rows, 1), IDX)
        self.d_tmp = cuda.device_array(max(self.n_rows, 1), IDX)
        self.cfg, self.cat_cfg, self.min_child_samples = settings, cat, min_child_samples
        self.scales = None
        self.idx = None
        self.d_P = None
        self._level = None           # (slots, host copy of their histograms)
        self.resident = None         # the fit's DeviceScores, if the objective runs here
        self.idx_on_device = False   # the tree's sample was written on the device
        self.d_c_left = cuda.to_device(np.zeros(self.n_rows // CHUNK + 64, np.int64))

    def start_tree(self, scales, idx):
        """The next tree's scales and sample ``idx`` (host); its cells and indices go to
        the device (unless the objective already made the cells there)."""
        self.scales = scales
        self.idx = idx
        self._level = None
        with stage("upload"):
            if self.resident is None:
                self.d_gh.copy_to_device(self.gh)
            if idx.shape[0] and not self.idx_on_device:
                self.d_idx[:idx.shape[0]].copy_to_device(idx)
            self.idx_on_device = False
            self.d_P = cuda.to_device(_split.settings_array(scales, self.cfg, self.cat_cfg,
                                                            self.min_child_samples))

    def finish_tree(self):
        """The tree is grown: its partitioned indices back to the host ``idx`` (not with
        resident scores: the leaf update reads them on the device)."""
        if self.resident is None and self.idx.shape[0]:
            with stage("host wait"):
                self.d_idx[:self.idx.shape[0]].copy_to_host(self.idx)

    def finish_fit(self):
        """The fit is over: ``BONSAI_CUDA_PROFILE``'s breakdown."""
        report()

    # ---- the split step ----------------------------------------------------------
    def evaluate_root(self, nodes, masks):
        """The root's (table row 0) histogram, sums and best split (``masks[:1]``)."""
        t = nodes.ints
        self._level = None
        start, stop, slot = int(t[0, START]), int(t[0, STOP]), int(t[0, SLOT])
        d = cuda.to_device(np.array([[start], [stop], [slot]], np.int64))
        with stage("histogram"):
            self.fill_histograms(self.idx.shape[0] == self.n_rows, d[0], d[1], d[2], 1, stop - start)
        plan = cuda.to_device(np.array([[t[0, COUNT], 0], [slot, -1], [-1, -1]], np.int64))
        two = np.zeros((2, masks.shape[1]), np.uint8)
        two[0] = masks[0]
        out = self._scan(plan[0], plan[1], plan[2], two)
        gain, feat, bin_, dl, lsum, sums, bits = out
        nodes.gain[0], t[0, FEATURE], t[0, BIN], t[0, DEFAULT_LEFT] = (
            gain[0], feat[0], bin_[0], dl[0])
        nodes.sums[0], nodes.left_sums[0], nodes.bits[0] = sums[0], lsum[0], bits[0]

    def split(self, nodes, batch, new_slot, child_ok, min_split_rows, masks):
        """The CPU builder's ``split`` (same arguments, same effects on the node table,
        same return), run on the device: see the module docstring."""
        self._level = None
        t, t_bits, first = nodes.ints, nodes.bits, nodes.n
        m = batch.shape[0]
        starts, stops, feature, bin_, dl, f_missing, parent_slot, p_bits = batch_columns(
            t, t_bits, batch, self.feature_missing_bin)
        c_node, c_start, c_stop, ptr = _part.chunk_table(starts, stops)
        n_chunks = c_node.shape[0]
        # one upload of the level's integer fields: 8 rows of m, the chunk pointers,
        # the chunk table (3 rows of n_chunks); the bitsets and the masks are two more
        packed = np.concatenate([starts, stops, feature, bin_, f_missing, parent_slot,
                                 np.asarray(new_slot, np.int64), dl.astype(np.int64), ptr,
                                 c_node, c_start, c_stop])
        d = cuda.to_device(packed)
        (d_starts, d_stops, d_feat, d_bin, d_miss, d_pslot, d_new,
         d_dl) = (d[i * m:(i + 1) * m] for i in range(8))
        o = 8 * m
        d_ptr = d[o:o + m + 1]
        o += m + 1
        d_chunks = [d[o + i * n_chunks:o + (i + 1) * n_chunks] for i in range(3)]
        d_bits = cuda.to_device(p_bits)
        nleft = cuda.device_array(m, np.int64)
        with stage("partition"):
            self._partition(n_chunks, d_chunks, m, d_ptr, d_starts, d_feat, d_bin, d_dl,
                            d_miss, d_bits, nleft)
        plan = cuda.device_array((3, 2 * m), np.int64)     # child rows, slot, sub
        fill = cuda.device_array((3, m), np.int64)         # the smaller children's parts
        _part.plan_children[1, 1](d_starts, d_stops, nleft, d_pslot, d_new, int(child_ok),
                                  int(min_split_rows), plan[0], plan[1], plan[2], fill[0],
                                  fill[1], fill[2])
        sizes = stops - starts
        with stage("histogram"):
            self.fill_histograms(False, fill[0], fill[1], fill[2], m,
                       int(sizes.max()) // 2 + 1 if m else 0)
        gain, c_feat, c_bin, c_dl, lsum, sums, c_bits = self._scan(plan[0], plan[1], plan[2],
                                                                   masks)
        with stage("host wait"):
            h_plan = plan.copy_to_host()
        child_rows, child_slot = h_plan[0], h_plan[1]
        h_nleft = np.ascontiguousarray(child_rows[0::2])
        expand = np.empty(2 * m, np.int64)
        free = np.empty(2 * m, np.int64)
        n_e, n_f = write_children(t, nodes.gain, nodes.sums, nodes.left_sums, t_bits, batch,
                                  first, starts, stops, h_nleft, child_rows, parent_slot,
                                  np.asarray(new_slot, np.int64), child_slot, gain, c_feat,
                                  c_bin, c_dl, lsum, sums, c_bits, expand, free)
        return expand[:n_e].tolist(), free[:n_f].tolist()

    def fill_histograms(self, identity, p_start, p_stop, p_slot, m, max_rows):
        """The histograms of ``m`` parts (device ranges and slots), ``histogram.build``."""
        totals = cuda.device_array((max(m, 1), self.pool.channels), np.int64)
        _hist.build(self.X, self.d_feat_off, self.d_default_bin, self.d_tiles, self.d_gh,
                    self.d_idx, identity, p_start, p_stop, p_slot, m, max_rows,
                    self.pool.hist, totals)

    def _partition(self, n_chunks, d_chunks, m, d_ptr, d_starts, d_feat, d_bin, d_dl,
                   d_miss, d_bits, nleft):
        """The stable partition of the split nodes' ranges of ``d_idx``, their left
        counts into ``nleft`` (``partition``'s four kernels over the device chunk table
        ``d_chunks`` = (node, start, stop))."""
        if not n_chunks:
            nleft.copy_to_device(np.zeros(m, np.int64))
            return
        d_cn, d_cs, d_ce = d_chunks
        if self.d_c_left.shape[0] < n_chunks:    # zero; chunk_offsets keeps it so
            self.d_c_left = cuda.to_device(np.zeros(2 * n_chunks, np.int64))
        c_left = self.d_c_left
        c_pos = cuda.device_array((2, n_chunks), np.int64)
        grid = blocks_for(n_chunks, 1)
        _part.count_left[grid, CHUNK](self.X, self.d_idx, d_cn, d_cs, d_ce, d_feat, d_bin,
                                      d_dl, d_miss, d_bits, c_left)
        _part.chunk_offsets[blocks_for(m), THREADS](d_ptr, d_cs, d_ce, c_left, d_starts,
                                                    c_pos[0], c_pos[1], nleft)
        _part.scatter[grid, CHUNK](self.X, self.d_idx, self.d_tmp, d_cn, d_cs, d_ce, d_feat,
                                   d_bin, d_dl, d_miss, d_bits, c_pos[0], c_pos[1])
        _part.copy_back[grid, CHUNK](self.d_idx, self.d_tmp, d_cs, d_ce)

    def _scan(self, child_rows, child_slot, sub, masks):
        """Subtraction, node sums, feature scan and pick of children ``child_slot``
        (device arrays); returns the CPU scan's outputs, on the host."""
        hist = self.pool.hist
        m2 = child_slot.shape[0]
        n_features = self.n_value_bins.shape[0]
        words = self.cat_words
        n_cells = hist.shape[1] * hist.shape[2]
        with stage("split"):
            gain, out_i, bits = self._scan_kernels(hist, m2, n_features, words, n_cells,
                                                   child_rows, child_slot, sub, masks)
        with stage("host wait"):
            h = out_i.copy_to_host()
            h_gain = gain.copy_to_host()
            h_bits = bits.copy_to_host()
        lo, so = _split.PICK_LSUM, _split.PICK_SUMS
        return (h_gain, np.ascontiguousarray(h[:, _split.PICK_FEATURE]),
                np.ascontiguousarray(h[:, _split.PICK_BIN]),
                h[:, _split.PICK_DL].astype(np.uint8), np.ascontiguousarray(h[:, lo:lo + 3]),
                np.ascontiguousarray(h[:, so:so + 3]), h_bits)

    def _scan_kernels(self, hist, m2, n_features, words, n_cells, child_rows, child_slot, sub,
                      masks):
        """The scan's five launches; returns the device (gain, ``pick_best``'s ints, bits)."""
        _split.subtract[(blocks_for(n_cells), min(m2, _MAX_Y)), THREADS](hist, child_slot, sub)
        tot = cuda.device_array((m2, 3), np.int64)
        cf = cuda.device_array(m2, np.float64)
        parent = cuda.device_array(m2, np.float64)
        _split.node_totals[blocks_for(m2), THREADS](hist, child_slot, self.d_feat_off,
                                                    child_rows, self.d_P, tot, cf, parent)
        d_masks = cuda.to_device(np.ascontiguousarray(masks, np.uint8))
        f_gain = cuda.device_array((m2, n_features), np.float64)
        f_bin = cuda.device_array((m2, n_features), np.int64)
        f_dl = cuda.device_array((m2, n_features), np.uint8)
        f_lsum = cuda.device_array((m2, n_features, 3), np.int64)
        f_bits = cuda.device_array((m2, n_features, words), np.uint64)
        _split.scan_features[blocks_for(m2 * n_features), THREADS](
            hist, child_slot, self.d_feat_off, self.d_n_value_bins, d_masks, self.d_is_cat,
            self.d_P, tot, cf, parent, f_gain, f_bin, f_dl, f_lsum, f_bits)
        gain = cuda.device_array(m2, np.float64)
        out_i = cuda.device_array((m2, _split.N_PICK), np.int64)
        bits = cuda.device_array((m2, words), np.uint64)
        _split.pick_best[blocks_for(m2), THREADS](child_slot, self.d_is_cat, self.d_P, f_gain,
                                                  f_bin, f_dl, f_lsum, f_bits, tot, gain,
                                                  out_i, bits)
        return gain, out_i, bits

    # ---- oblivious levels ------------------------------------------------------------
    def _host_hist(self, slots):
        """(host histograms of ``slots``, their rows 0..m-1), copied once per level."""
        key = tuple(int(s) for s in slots)
        if self._level is None or self._level[0] != key:
            h = np.empty((len(key), self.pool.n_bins_total, self.pool.channels), np.int64)
            for i, s in enumerate(key):
                self.pool.hist[s].copy_to_host(h[i])
            self._level = (key, h)
        return self._level[1], np.arange(len(key), dtype=np.int64)

    def level_split(self, slots, node_rows, mask):
        """The summed gain of every numeric (bin, missing direction) candidate over the
        level's nodes, (n_bins_total, 2), computed on the device (``split.level_gains``)
        and copied home for the grow loop's argmax."""
        m = len(slots)
        with stage("split"):
            d_slots = cuda.to_device(np.ascontiguousarray(slots, np.int64))
            d_rows = cuda.to_device(np.ascontiguousarray(node_rows, np.int64))
            tot = cuda.device_array((m, 3), np.int64)
            cf = cuda.device_array(m, np.float64)
            parent = cuda.device_array(m, np.float64)
            _split.node_totals[blocks_for(m), THREADS](self.pool.hist, d_slots, self.d_feat_off,
                                                       d_rows, self.d_P, tot, cf, parent)
            out = cuda.device_array((int(self.feat_off[-1]), 2), np.float64)
            _split.level_gains[blocks_for(out.shape[0]), THREADS](
                self.pool.hist, d_slots, self.d_feat_off, self.d_n_value_bins,
                self.d_bin_feature, cuda.to_device(np.ascontiguousarray(mask, np.uint8)),
                self.d_is_cat, self.d_P, tot, cf, parent, out)
        with stage("host wait"):
            return out.copy_to_host()

    def level_split_categorical(self, slots, node_rows, mask):
        """Each categorical feature's best shared category set over the level and its
        summed gain: (gain (F,), bits (F, cat_words))."""
        hist, rows = self._host_hist(slots)
        n_features = self.n_value_bins.shape[0]
        gain = np.empty(n_features)
        bits = np.empty((n_features, self.cat_words), np.uint64)
        _cpu_split_level.find_level_split_categorical(
            hist, rows, node_rows, self.feat_off, self.n_value_bins, mask, self.is_cat,
            self.scales, self.cfg, self.min_child_samples, self.cat_cfg, gain, bits)
        return gain, bits

    def range_sums(self, slots, lo, hi, extra, cnt_factor):
        """(grad, hess, count) sums of bins ``lo:hi`` (plus bin ``extra`` if >= 0) per
        slot, on the device (``split.range_sums``)."""
        m = len(slots)
        out = cuda.device_array((m, 3), np.int64)
        _split.range_sums[blocks_for(m), THREADS](
            self.pool.hist, cuda.to_device(np.ascontiguousarray(slots, np.int64)), int(lo),
            int(hi), int(extra), self.d_P, cuda.to_device(np.ascontiguousarray(cnt_factor,
                                                                                np.float64)),
            out)
        return out.copy_to_host()

    def bits_sums(self, slots, feature, bits, cnt_factor):
        hist, rows = self._host_hist(slots)
        out = np.empty((len(rows), 3), np.int64)
        _cpu_split_cat.bits_sums(hist, rows, int(self.feat_off[feature]),
                                 int(self.n_value_bins[feature]), bits, self.scales,
                                 cnt_factor, out)
        return out
