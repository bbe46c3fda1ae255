"""The grow stage: the ONE grow loop, with the growers as policies of it.

    root -> build histogram -> find split
    loop:  policy.select(frontier) -> nodes to split now
           backend.split_nodes(those nodes)               (one call per batch:)
               partition their rows
               build the smaller children's histograms
               larger child = parent - smaller child      (exact: integer cells)
               find the children's best splits

* ``depthwise`` splits every splittable node of a level at once (level batching).
* ``leafwise`` splits the single best leaf (a best-first queue by gain).
* ``oblivious`` splits every node of a level with one shared (feature, bin), chosen by
  the summed gain over the level (CatBoost's symmetric trees).

Vector leaves (``multi_strategy="multi_output_tree"``) are the same loop over the
backend's K-output builder (``multi_tree_builder``): one tree whose nodes hold K
values, its gains summed over the outputs.

Backends (cpu now; cuda later) plug in behind the same function names (see
``bonsai.backends``): the loop holds the backend's per-fit ``TreeBuilder`` and never
touches rows itself.  Over several data shards the builder sums counts and
histograms between its stages (``bonsai.comm``), so the loop's decisions, which read
only the node table and the histograms, are the same on every shard.
"""
import numpy as np

from ._profile import stage
from ._limits import check_histogram_memory, max_leaves_of_rows
from .comm import LOCAL, is_local
from .nodes import BIN, COUNT, DEFAULT_LEFT, DEPTH, FEATURE, SLOT, NodeTable, tree_fields
from .split_settings import CatSettings, SplitSettings
from .tree import Tree


#: a node without a valid split
NEG_INF = -np.inf
#: leaf-wise trees in one compiled backend call where the backend has one (tests turn
#: it off to compare with the Python loop)
LEAFWISE_COMPILED = True


class Grower:
    """Fit-constant state of the grow loop: the backend's tree builder (binned data,
    histogram pool, buffers), the bin layout, the split constraints and the policy."""

    def __init__(self, backend, data, params, n_threads, comm=LOCAL, n_values=None,
                 shared_hess=False):
        bin_mapper = data.bin_mapper
        self.backend = backend
        self.bm = bin_mapper
        self.feat_off = bin_mapper.feat_off
        self.n_value_bins = bin_mapper.n_value_bins
        self.n_threads = n_threads
        self.comm = comm
        p = params
        self.policy = p.grow_policy
        self.max_depth = p.max_depth
        self.max_leaves = p.max_leaves
        self.min_child_samples = p.min_child_samples
        self.cfg = SplitSettings.from_params(p)
        self.colsample = (p.colsample_bytree, p.colsample_bylevel, p.colsample_bynode)
        self.sampled = self.colsample != (1.0, 1.0, 1.0)    # any column sampling
        self._all_features = np.ones((2, self.n_value_bins.shape[0]), np.uint8)
        self._no_features = np.zeros((2, self.n_value_bins.shape[0]), np.uint8)
        self.has_cat = bool(bin_mapper.is_cat.any())
        self.cat_cfg = CatSettings.from_params(p)
        # a tree has at most one leaf per min_child_samples rows (over every shard:
        # unknown here with several, so only one shard's fit is bounded by its rows;
        # an oblivious level also splits nodes into empty children)
        rows_cap = (max_leaves_of_rows(data.n_rows, p.min_child_samples)
                    if is_local(comm) and p.grow_policy != "oblivious" else None)
        cap_leaves = p.max_leaves if rows_cap is None or p.max_leaves <= 0 else min(
            p.max_leaves, rows_cap)
        self.nodes = NodeTable(2 * cap_leaves + 1 if cap_leaves > 0 else 64,
                               bin_mapper.cat_words)
        # ``n_values`` K: vector leaves (multi_strategy="multi_output_tree"), one tree
        # for K outputs over the backend's K-output builder; None: one output per tree
        self.n_values = n_values
        capacity = self._pool_capacity(p, n_threads, rows_cap)
        # refused before any histogram is allocated (max_bin 65535 on 1000 continuous
        # features is 1 GB a histogram): the slots this fit may fill at once
        channels = ((n_values + 1 if shared_hess else 2 * n_values) if n_values is not None
                    else (1 if p.quantized_grad else 2))
        check_histogram_memory(int(self.feat_off[-1]), channels, capacity,
                               self.n_value_bins.shape[0], bin_mapper.max_bin)
        if n_values is None:
            self.builder = backend.tree_builder(data, n_threads, capacity,
                                                p.quantized_grad, self.cfg, self.cat_cfg,
                                                self.min_child_samples, comm)
        else:
            # ``shared_hess``: every output's hessians are the same (the objective's
            # ``hessian_shared``), so the cells carry one hessian column
            self.builder = backend.multi_tree_builder(data, n_threads, capacity,
                                                      n_values, self.cfg, self.cat_cfg,
                                                      self.min_child_samples, comm,
                                                      shared_hess)
        self.pool = self.builder.pool
        # over several shards every pass costs a collective round trip: the deepest
        # level goes in passes of up to DISTRIBUTED_CHUNK_BYTES of histograms instead
        self.last_level_chunk = self.LAST_LEVEL_CHUNK
        if not is_local(comm):
            per_hist = max(1, self.pool.hist[0].nbytes)
            self.last_level_chunk = max(self.LAST_LEVEL_CHUNK,
                                        self.DISTRIBUTED_CHUNK_BYTES // per_hist)

    @staticmethod
    def _pool_capacity(p, n_threads, rows_cap=None):
        """Histograms alive at once: one per splittable leaf of the frontier (at most
        ``2**(max_depth - 1)``, ``max_leaves`` or ``rows_cap``, the most leaves the rows
        allow), plus one per extra thread piece.  Sizing the pool once avoids doubling
        it mid-fit (a copy that briefly holds both arrays: +15 MB of peak memory on 1M
        x 28, depth 8)."""
        caps = [] if rows_cap is None else [rows_cap]
        if p.max_depth > 0:
            caps.append(1 << min(p.max_depth - 1, 62))
        if p.max_leaves > 0:
            caps.append(p.max_leaves)
        live = min(caps) if caps else 64  # unbounded trees: grow by doubling
        return int(min(live, 1 << 16)) + n_threads + 2

    # ---- column sampling -------------------------------------------------------
    def _sample(self, rng, avail, frac):
        if frac >= 1.0:
            return avail
        k = max(1, int(round(frac * avail.size)))
        return np.sort(rng.choice(avail, size=k, replace=False))

    def _masks(self, depths, state):
        """(m, F) uint8 feature masks for nodes at ``depths`` (bytree & bylevel & bynode)."""
        n_features = self.n_value_bins.shape[0]
        if not self.sampled:   # no column sampling: one cached mask
            if self._all_features.shape[0] < len(depths):
                self._all_features = np.ones((2 * len(depths), n_features), np.uint8)
            return self._all_features[:len(depths)]
        out = np.zeros((len(depths), n_features), np.uint8)
        for i, d in enumerate(depths):
            if d not in state["level"]:
                state["level"][d] = self._sample(state["rng"], state["tree"], self.colsample[1])
            feats = state["level"][d]
            if self.policy != "oblivious":
                feats = self._sample(state["rng"], feats, self.colsample[2])
            out[i, feats] = 1
        return out

    # ---- the grow loop ---------------------------------------------------------
    def grow(self, scales, idx, n_total, seed):
        """Grow one tree on this shard's rows ``idx`` (``n_total`` over every shard)
        with the integer gradient cells the builder holds (``scales``); ``seed``
        (random_state, round, output) seeds its column sampling (the generator is
        made only when a column fraction is below 1: making one costs ~12 us a tree).

        Returns (tree, leaf_nodes, leaf_start, leaf_stop): leaf ranges index ``idx``,
        which is left partitioned by leaf.  Leaf values are unshrunk optimal weights.
        """
        self.builder.start_tree(scales, idx)
        nodes = self.nodes
        nodes.reset()
        n_features = self.n_value_bins.shape[0]
        # the sampling state (None without column sampling: no mask reads it)
        state = None
        if self.sampled:
            rng = np.random.default_rng(list(seed))
            state = {"rng": rng, "level": {},
                     "tree": self._sample(rng, np.arange(n_features), self.colsample[0])}
        root = nodes.add(0, idx.shape[0], 0, -1, n_total)
        nodes.ints[root, SLOT] = self.pool.alloc()
        if self._compiled_leafwise():   # this loop as one compiled call (cpu)
            self.builder.grow_leafwise(nodes, self.max_leaves, self.max_depth,
                                       2 * self.min_child_samples, self._masks([0, 0], state),
                                       self.PRUNE_SLACK)
            self.builder.finish_tree()
            return self._finish(scales)
        self._evaluate_root(state)
        frontier = [root]              # leaves that may still split, in node order
        fgain = [float(nodes.gain[root])]
        n_leaves = 1
        while frontier:
            batch = self._select(frontier, fgain, n_leaves, scales, state)
            if not batch:
                break
            n_leaves += len(batch)
            if self.policy == "leafwise":
                i = frontier.index(batch[0])
                del frontier[i], fgain[i]
            else:                       # the level is done: free what was not split
                done = set(batch)
                for n in frontier:
                    if n not in done:
                        self._release(n)
                frontier, fgain = [], []
            children = self._split_batch(batch, n_leaves, state)
            frontier += children
            fgain += nodes.gain[children].tolist()
            if self.policy == "leafwise" and self.max_leaves > 0:
                frontier, fgain = self._drop_unreachable(frontier, fgain,
                                                         self.max_leaves - n_leaves)
        for n in frontier:
            self._release(n)
        self.builder.finish_tree()
        return self._finish(scales)

    def _compiled_leafwise(self):
        """Whether this leaf-wise tree grows in one backend call (``grow_leafwise``):
        nothing of the loop's runs between its splits (no column sampling)."""
        return (self.policy == "leafwise" and not self.sampled
                and LEAFWISE_COMPILED and hasattr(self.builder, "grow_leafwise")
                and self.builder.can_grow_leafwise(self.nodes, self.max_leaves, self.max_depth))

    def _release(self, n):
        """Free node ``n``'s histogram slot, if it holds one."""
        s = int(self.nodes.ints[n, SLOT])
        if s >= 0:
            self.pool.release(s)
            self.nodes.ints[n, SLOT] = -1

    def _select(self, frontier, fgain, n_leaves, scales, state):
        """The nodes to split now, sorted; ``fgain`` is the frontier's gains."""
        if self.policy == "oblivious":
            return self._select_level(frontier, scales, state)
        if self.policy == "leafwise":
            if self.max_leaves > 0 and self.max_leaves - n_leaves <= 0:
                return []
            # the first frontier node with the highest gain (what the stable sort
            # below picks), without numpy round trips: this runs once per split
            i = max(range(len(fgain)), key=fgain.__getitem__)   # first of the highest
            return [frontier[i]] if fgain[i] > NEG_INF else []
        gains = np.array(fgain)
        valid = np.flatnonzero(gains > NEG_INF)
        if valid.size == 0:
            return []
        budget = (self.max_leaves - n_leaves) if self.max_leaves > 0 else valid.size
        if budget <= 0:
            return []
        # highest gain first; stable sort keeps the lower node id first among ties
        order = valid[np.argsort(-gains[valid], kind="stable")][:budget]
        return sorted(frontier[i] for i in order)

    #: leaf-wise frontier size over the remaining splits that triggers a prune
    PRUNE_SLACK = 16

    def _drop_unreachable(self, frontier, fgain, remaining):
        """Leaf-wise: the frontier (and its gains) without the leaves that can no
        longer be split, their histograms back in the pool.

        Each split takes the first frontier leaf of highest gain, and gains never
        change, so a leaf behind ``remaining`` others in that order (or without a
        valid split) is never picked: every leaf ahead of it would go first.  Pruning
        once the frontier exceeds the remaining splits by ``PRUNE_SLACK`` bounds the
        live histograms near ``min(leaves, max_leaves - leaves)``, about half of
        ``max_leaves`` (higgs-leaves: 259 -> ~145 histograms of 115 KB).  The tree
        is unchanged: only leaves that would never be split lose their histograms."""
        if len(frontier) < remaining + self.PRUNE_SLACK:
            return frontier, fgain
        order = sorted(range(len(frontier)), key=lambda i: (-fgain[i], i))
        keep = set(i for i in order[:max(remaining, 0)] if fgain[i] > NEG_INF)
        for i, n in enumerate(frontier):
            if i not in keep:
                self._release(n)
        return ([n for i, n in enumerate(frontier) if i in keep],
                [g for i, g in enumerate(fgain) if i in keep])

    def _select_level(self, frontier, scales, state):
        nodes = self.nodes
        fr = np.array(frontier, np.int64)
        depth = int(nodes.ints[fr[0], DEPTH])
        if self.max_depth > 0 and depth >= self.max_depth:
            return []
        slots = nodes.ints[fr, SLOT]
        rows = nodes.ints[fr, COUNT]
        mask = self._masks([depth], state)[0]
        with stage("splits"):
            cand = self.builder.level_split(slots, rows, mask)
            if self.has_cat:
                cat_gain, cat_bits = self.builder.level_split_categorical(slots, rows, mask)
        flat = int(np.argmax(cand))  # first max: lowest feature, bin, missing-right first
        best = cand.flat[flat]
        cat_f = -1
        if self.has_cat:
            cf = int(np.argmax(cat_gain))   # first max: lowest feature
            if cat_gain[cf] > best:         # a numeric split wins ties
                cat_f, best = cf, cat_gain[cf]
        if not (best > max(self.cfg.min_split_gain, 0.0)):
            return []
        sums = nodes.sums[fr]        # written when the split step evaluated these nodes
        cnt_factor = np.where(sums[:, 1] > 0, rows / np.maximum(sums[:, 1], 1), 0.0)
        if cat_f >= 0:
            f, bb, dl = cat_f, -1, 0
            lsums = self.builder.bits_sums(slots, f, cat_bits[f], cnt_factor)
            nodes.bits[fr] = cat_bits[f]
        else:
            cell, dl = divmod(flat, 2)
            f = int(np.searchsorted(self.feat_off, cell, side="right") - 1)
            off = int(self.feat_off[f])
            bb = cell - off
            lsums = self.builder.range_sums(slots, off, off + bb + 1,
                                            off + int(self.n_value_bins[f]) if dl else -1,
                                            cnt_factor)
        nodes.ints[fr, FEATURE] = f
        nodes.ints[fr, BIN] = bb
        nodes.ints[fr, DEFAULT_LEFT] = dl
        nodes.gain[fr] = best / len(frontier)
        nodes.left_sums[fr] = lsums
        return list(frontier)

    def _evaluate_root(self, state):
        """The root's histogram, sums and best split (``builder.evaluate_root``)."""
        masks = self._no_masks(1) if self.policy == "oblivious" else self._masks([0], state)
        self.builder.evaluate_root(self.nodes, masks)

    def _no_masks(self, m):
        """(m, F) zero masks: oblivious nodes get only their sums from the split step
        (their level's split is chosen in ``_select_level``)."""
        if self._no_features.shape[0] < m:
            self._no_features = np.zeros((m, self.n_value_bins.shape[0]), np.uint8)
        return self._no_features[:m]

    #: parents per pass on the deepest depth-wise level (see ``_split_batch``)
    LAST_LEVEL_CHUNK = 8
    #: histogram bytes per pass on that level when the fit spans several shards
    DISTRIBUTED_CHUNK_BYTES = 64 << 20

    def _split_batch(self, batch, n_leaves, state):
        """Split every node of ``batch`` and find its children's splits; returns the
        children that can still be split, in node order.

        Depth-wise, children one level above ``max_depth`` only need their histograms
        until their own split is found (their children are leaves), so that level
        goes ``LAST_LEVEL_CHUNK`` parents at a time and frees each pass's histograms:
        the pool peaks at the level above plus one pass instead of the whole deepest
        level (depth 8: 72 histograms instead of 128; 6 MB on 28 features, 2000 x
        more on wide data).  Histograms are integer sums and each node's split only
        depends on its own rows, so the tree is the same."""
        depth = int(self.nodes.ints[batch[0], DEPTH]) + 1
        last = self.policy == "depthwise" and self.max_depth > 0 and depth + 1 >= self.max_depth
        chunk = self.last_level_chunk
        if not last or len(batch) <= chunk:
            return self._split_part(batch, n_leaves, state, depth)
        expandable = []
        for c0 in range(0, len(batch), chunk):
            part = self._split_part(batch[c0:c0 + chunk], n_leaves, state, depth)
            for n in part:
                self._release(n)
            expandable += part
        return expandable

    def _split_part(self, batch, n_leaves, state, depth):
        """One ``builder.split`` call: partition ``batch`` (nodes at
        ``depth - 1``), fill the smaller children's histograms into fresh slots, keep
        each parent's slot for its larger child (which has the smaller subtracted),
        find the best split of every child that can split, and write the children
        (left, right per parent) into the node table.  Returns those that can split."""
        m = len(batch)
        child_ok = not ((self.max_depth > 0 and depth >= self.max_depth)
                        or (self.max_leaves > 0 and n_leaves >= self.max_leaves))
        if self.policy == "oblivious":
            masks = self._no_masks(2 * m)
        else:
            masks = self._masks([depth] * (2 * m), state)
        self.nodes.reserve(2 * m)
        new_slot = np.array([self.pool.alloc() for _ in range(m)], np.int64)
        expandable, free = self.builder.split(
            self.nodes, np.array(batch, np.int64), new_slot, child_ok,
            0 if self.policy == "oblivious" else 2 * self.min_child_samples, masks)
        self.nodes.n += 2 * m
        for s in free:
            self.pool.release(s)
        return expandable

    def renew_exact(self, tree, leaves, leaf_start, leaf_stop, grad, hess, idx):
        """Quantized mode: recompute every node's value and cover from the exact float
        gradients of its rows (leaves summed in row order, internal nodes as the sum
        of their children: a fixed order; over several shards, the shards' leaf sums
        added in rank order)."""
        ls = self.backend.leaf_sums(grad, hess, idx, leaf_start, leaf_stop, self.comm)
        sums = np.zeros((tree.n_nodes, 2))
        sums[leaves] = ls
        for i in range(tree.n_nodes - 1, -1, -1):  # children have larger ids than parents
            if tree.left[i] >= 0:
                sums[i] = sums[tree.left[i]] + sums[tree.right[i]]
        self.backend.leaf_weights(sums[:, 0].copy(), sums[:, 1].copy(), self.cfg, tree.value)
        tree.cover[:] = sums[:, 1]

    def _finish(self, scales):
        """The grown nodes as a ``Tree`` (``nodes.tree_fields``, one compiled pass:
        this runs once per tree, 1000 times in a 100-round 10-class fit)."""
        nodes = self.nodes
        n = nodes.n
        scalar = self.n_values is None
        bm = self.bm
        (feature, bin_thr, default_left, left, right, count, gain, threshold, n_cat, leaves,
         leaf_start, leaf_stop, grad_sum, cover, cat_ptr, cat_words) = tree_fields(
            nodes.ints, nodes.gain, nodes.sums, nodes.bits, n, self.n_value_bins,
            bm.thresholds, bm.thr_offsets, float(scales.grad) if scalar else 1.0,
            float(scales.hess) if scalar else 1.0)
        if scalar:
            value = np.empty(n)
            self.backend.leaf_weights(grad_sum, cover, self.cfg, value)
        else:   # (n, K) values from the builder's full cells
            value, cover = self.builder.node_values(n)
        if not n_cat:
            cat_ptr = cat_words = None
        tree = Tree(feature, threshold, bin_thr, default_left, left, right, value, gain,
                    cover, count, oblivious=self.policy == "oblivious", cat_ptr=cat_ptr,
                    cat_words=cat_words)
        return tree, leaves, leaf_start, leaf_stop
