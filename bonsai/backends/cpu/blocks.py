"""Feature blocks: how a fit over several shards can split the split search between
them (opt-in: ``builder.BLOCK_BYTES`` / ``BONSAI_BLOCK_BYTES``; docs/distributed.md
measures and models when it pays).

With ``W`` ranks the features are cut into ``W`` contiguous blocks of about equal
bins; rank ``r`` owns block ``r``.  After a histogram build the ranks reduce-scatter
the histograms (``Comm.reduce_scatter_sum``): each receives the exact global sums
of only its own block's bins, plus feature 0's (every feature's bins add up to the
node total, and the kernels read the node sums off feature 0), so each rank moves
about ``(W - 1) / W`` of the histograms each way instead of all of them twice.
Sibling subtraction stays exact within those bins; the other bins of a rank's slots
hold partial sums that nothing reads.

A rank scans only its own features (their column-sampling mask bits ANDed with
``own``), then the ranks all-gather their candidates and every rank picks, per
node, the one a full scan would: the highest gain, a numeric split before a
categorical one, then the lowest feature (the scan's own tie order: features in
ascending order, strict ``>``).  Oblivious levels gather the blocks' candidate gains
(and a chosen split's left sums from the feature's owner) the same way.  So every
rank grows the tree of a one-shard fit.
"""
import numpy as np


class FeatureBlocks:
    """Rank ``comm.rank``'s block of the features of ``feat_off`` (see the module
    docstring)."""

    def __init__(self, comm, feat_off, is_cat):
        self.comm = comm
        self.feat_off = feat_off
        n_features = feat_off.shape[0] - 1
        w, r = comm.size, comm.rank
        targets = feat_off[-1] * np.arange(w + 1) / w
        fb = np.searchsorted(feat_off, targets, side="left").astype(np.int64)
        fb[0], fb[-1] = 0, n_features
        self.features = np.maximum.accumulate(np.minimum(fb, n_features))
        self.bins = feat_off[self.features]
        self.own = np.zeros(n_features, np.uint8)
        self.own[self.features[r]:self.features[r + 1]] = 1
        self.is_cat = is_cat
        self.f0_bins = int(feat_off[1]) if n_features else 0

    # ---- histograms --------------------------------------------------------------
    def _pieces(self, H, j):
        """Rank ``j``'s bins of ``H (m, bins, c)``: feature 0's and block ``j``'s."""
        lo, hi = int(self.bins[j]), int(self.bins[j + 1])
        if lo <= self.f0_bins:
            return np.ascontiguousarray(H[:, :max(hi, self.f0_bins)])
        return np.concatenate([H[:, :self.f0_bins], H[:, lo:hi]], axis=1)

    def reduce(self, hist, slots):
        """Replace this rank's bins of ``hist[slots]`` by their sums over every rank."""
        H = hist[slots]
        got = self.comm.reduce_scatter_sum([self._pieces(H, j) for j in range(self.comm.size)])
        r = self.comm.rank
        lo, hi = int(self.bins[r]), int(self.bins[r + 1])
        if lo <= self.f0_bins:
            hist[slots, :got.shape[1]] = got
        else:
            hist[slots, :self.f0_bins] = got[:, :self.f0_bins]
            hist[slots, lo:hi] = got[:, self.f0_bins:]

    # ---- split candidates -----------------------------------------------------------
    def masks(self, masks):
        """Column-sampling masks limited to this rank's features."""
        return masks * self.own[None, :]

    def merge(self, out):
        """The scan outputs ``out`` (gain, feature, bin, default_left, left sums,
        sums, bits per node) of every rank merged into the full scan's, in place."""
        every = self.comm.allgather(tuple(a.copy() for a in out))   # out is rewritten
        if out[0].shape[0] == 0:
            return out
        gain = np.stack([e[0] for e in every])
        feat = np.stack([e[1] for e in every])
        cat = np.zeros_like(feat)
        if self.is_cat is not None:
            cat = np.where(feat >= 0, self.is_cat[np.maximum(feat, 0)], 0).astype(np.int64)
        order = np.lexsort((feat, cat, -gain), axis=0)
        win = order[0]
        cols = np.arange(win.shape[0])
        for i, a in enumerate(out):
            a[...] = np.stack([e[i] for e in every])[win, cols]
        return out

    def gather_bins(self, cand):
        """``cand (bins, ...)``, right on this rank's block, made right everywhere."""
        r = self.comm.rank
        parts = self.comm.allgather(cand[self.bins[r]:self.bins[r + 1]])
        return np.concatenate(parts, axis=0)

    def gather_features(self, values):
        """Per-feature arrays ``values (F, ...)``, right on this rank's features, made
        right everywhere."""
        r = self.comm.rank
        parts = self.comm.allgather(values[self.features[r]:self.features[r + 1]])
        return np.concatenate(parts, axis=0)

    def from_owner(self, feature, value):
        """``value`` as computed by the rank owning ``feature`` (feature 0's bins are
        right everywhere, but one rule is simpler)."""
        owner = int(np.searchsorted(self.features, feature, side="right") - 1)
        return self.comm.allgather(value)[min(owner, self.comm.size - 1)]
