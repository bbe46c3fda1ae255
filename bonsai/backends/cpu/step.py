"""The CPU backend's split step: one compiled call that partitions a batch of nodes,
fills the smaller children's histograms and finds the children's best splits.

It is the level step (one call per level, or per node for leaf-wise): the work plans (which rows or feature blocks each thread takes), the
choice of the smaller child, the slot bookkeeping and the sibling subtraction run in
compiled code between the parallel kernels, instead of as Python between backend
calls.  Measured on 1M x 28 leaf-wise (255 leaves, 2 threads), the Python around the
three per-split kernel calls took ~28 us a split, 15% of the fit.  With several data
shards the same kernels run as separate calls (``builder.TreeBuilder``), the
communicator's sums between them.

The kernels are the same as for the separate backend functions (``partition``,
``histogram``, ``split``); a parallel kernel or its serial twin is picked per call
exactly as they do, from thresholds passed in (so tests can lower them).

What a fit does not use is not compiled.  When an argument ``x`` is None, numba
prunes the branches on ``x is None`` / ``x is not None`` as it compiles the function,
before typing it, so the kernels called only there are never compiled for that
signature (a branch on an argument that is not None is kept and typed: so each
optional layout is guarded by its own test):

* ``par`` None (a fit too small to share between threads) compiles the serial twins
  only, no parallel kernel (``thread_plan``);
* ``is_cat`` None (no categorical feature) leaves out the categorical split scan;
* ``sp_ptr`` None (dense data) leaves out the sparse-rows fill, ``X_dense`` None
  (sparse-rows data) the dense one;
* ``packed`` None (exact gradient cells) leaves out the quantized fill.

A first fit compiles one specialisation of ``split_nodes`` instead of all of them
(the demo's cold start: see ``benchmarks/RESULTS.md``).
"""
import numpy as np
from numba import njit

from ...nodes import BIN, COUNT, DEFAULT_LEFT, DEPTH, FEATURE, SLOT, START, STOP
from . import histogram as _hist
from . import partition as _part
from . import sparse as _sparse
from . import split as _split
from .children import (batch_columns, copy_row, local_child_rows, plan_children,
                       write_children)

#: how dense histograms are filled (``layout`` argument; sparse rows: ``sp_ptr`` given)
DENSE_ROWS, DENSE_BLOCKS = 0, 1

#: ``split_nodes``' ``leafwise`` argument for one split step (no leaf-wise loop)
ONE_STEP = (0, 0, np.empty(0, np.int64), 0, 0)

_build_par = _hist.build_histograms
_build_ser = _hist.build_histograms.serial
_sparse_par = _hist.build_histograms_sparse
_sparse_ser = _hist.build_histograms_sparse.serial
_restore_par = _hist.restore_default_bins
_restore_ser = _hist.restore_default_bins.serial
_merge_ser = _hist.merge_slots.serial
_part_par = _part.partition_nodes
_part_ser = _part.partition_nodes.serial
_csc_par = _sparse.partition_nodes_csc
_csc_ser = _sparse.partition_nodes_csc.serial
_scan_par = _split.find_best_splits


@njit(cache=True, nogil=True)
def thread_plan(par):
    """(n_threads, min_rows, min_partition_rows, min_parallel_nodes) of ``par``: the
    thread count and the thresholds above which work is cut between threads; None:
    one thread (the thresholds are out of reach)."""
    if par is None:
        never = np.int64(1) << np.int64(62)
        return np.int64(1), never, never, never
    return par


@njit(cache=True, nogil=True)
def split_outputs(m, words):
    """Empty per-node outputs of a split scan: (gain, feature, bin, default_left,
    left_sums (m, 3), sums (m, 3), bits (m, words))."""
    return (np.empty(m), np.empty(m, np.int64), np.empty(m, np.int64), np.empty(m, np.uint8),
            np.empty((m, 3), np.int64), np.empty((m, 3), np.int64),
            np.empty((m, words), np.uint64))


@njit(cache=True, nogil=True)
def plan_pieces(starts, stops, n_threads, min_rows):
    """Cut the concatenated ranges ``[starts[i], stops[i])`` into per-thread pieces
    of equal rows (``n_t = min(n_threads, total // min_rows)`` threads, at least 1).

    Returns (piece_node, piece_start, piece_stop, thread_ptr): pieces of one node are
    consecutive and in row order, empty nodes get none; thread ``j`` owns pieces
    ``thread_ptr[j]:thread_ptr[j+1]``.
    """
    m = starts.shape[0]
    total = np.int64(0)
    for i in range(m):
        total += stops[i] - starts[i]
    n_t = max(np.int64(1), min(np.int64(n_threads), total // min_rows))
    cap = m + n_t
    node = np.empty(cap, np.int64)
    p_start = np.empty(cap, np.int64)
    p_stop = np.empty(cap, np.int64)
    ptr = np.zeros(n_t + 1, np.int64)
    k = 0
    pos = np.int64(0)          # rows placed so far
    t = 0
    cut = (total * (t + 1)) // n_t
    for i in range(m):
        a = starts[i]
        b = stops[i]
        while a < b:
            take = min(b - a, cut - pos)
            node[k] = i
            p_start[k] = a
            p_stop[k] = a + take
            k += 1
            a += take
            pos += take
            if pos == cut and t < n_t - 1:
                t += 1
                ptr[t] = k
                cut = (total * (t + 1)) // n_t
    ptr[n_t] = k
    return node[:k], p_start[:k], p_stop[:k], ptr


@njit(cache=True, nogil=True)
def partition(X_cols, idx, tmp, starts, stops, feature, bin_, default_left, node_missing_bin,
              bits, par, out_nleft, X_csc=None):
    """Stable partition of every node range (``partition.partition_nodes``), rows
    split between threads when there are at least ``2 * min_partition_rows`` of them
    (``par``: see ``thread_plan``).  Sparse bins pass ``X_cols`` None and their column
    store ``X_csc`` (``sparse.partition_nodes_csc``); each is compiled only where
    given."""
    n_threads, _, min_rows, _ = thread_plan(par)
    node, p_start, p_stop, ptr = plan_pieces(starts, stops, n_threads, min_rows)
    out_nleft[:] = 0
    if node.shape[0] == 0:
        return
    scratch = np.empty(node.shape[0], np.int64)
    if X_csc is not None:
        cp, cr, cb, zb = X_csc
        if par is not None and ptr.shape[0] > 2:
            _csc_par(cp, cr, cb, zb, idx, tmp, node, p_start, p_stop, ptr, feature, bin_,
                     default_left, node_missing_bin, bits, scratch, out_nleft)
        else:
            _csc_ser(cp, cr, cb, zb, idx, tmp, node, p_start, p_stop, ptr, feature, bin_,
                     default_left, node_missing_bin, bits, scratch, out_nleft)
    if X_cols is not None:
        if par is not None and ptr.shape[0] > 2:
            _part_par(X_cols, idx, tmp, node, p_start, p_stop, ptr, feature, bin_, default_left,
                      node_missing_bin, bits, scratch, out_nleft)
        else:
            _part_ser(X_cols, idx, tmp, node, p_start, p_stop, ptr, feature, bin_, default_left,
                      node_missing_bin, bits, scratch, out_nleft)


@njit(cache=True, nogil=True)
def build(layout, X_dense, sp_ptr, sp_bins, sp_default, feat_off, gh, packed, idx, identity,
          starts, stops, slots, scratch_slots, par, hist):
    """Fill ``hist[slots[i]]`` from rows ``idx[starts[i]:stops[i]]``.

    ``DENSE_ROWS``: rows cut into one piece per thread; a node cut between threads
    fills its extra pieces in ``scratch_slots`` (at most ``n_threads - 1``), added
    into its slot afterwards.  ``DENSE_BLOCKS`` (wide data): each thread owns a
    range of feature blocks and fills them for every node.  Sparse rows (``sp_ptr``,
    ``sp_bins``, ``sp_default`` given, ``X_dense`` None): like DENSE_ROWS over that
    layout, then the default bins are restored from the node totals.  The layout not
    in use is passed as None, so its kernels are not compiled; ``packed``: None for
    exact (n, 2) cells ``gh``, True for packed quantized (n, 1) ones; ``par`` as
    ``thread_plan``.  See ``bonsai.backends.cpu._layout`` for the measured reasons."""
    m = starts.shape[0]
    channels = hist.shape[2]
    n_features = feat_off.shape[0] - 1
    n_threads, min_rows, _, min_parallel_nodes = thread_plan(par)
    if X_dense is not None and layout == DENSE_BLOCKS:
        width = X_dense.shape[1]
        n_blocks = (n_features + width - 1) // width
        total = np.int64(0)
        for i in range(m):
            total += stops[i] - starts[i]
        n_t = max(np.int64(1), min(np.int64(n_threads), total // min_rows))
        n_tasks = n_blocks * m
        t_start = np.empty(n_tasks, np.int64)
        t_stop = np.empty(n_tasks, np.int64)
        t_slot = np.empty(n_tasks, np.int64)
        t_blo = np.empty(n_tasks, np.int64)
        t_bhi = np.empty(n_tasks, np.int64)
        for blk in range(n_blocks):
            for i in range(m):
                k = blk * m + i
                t_start[k] = starts[i]
                t_stop[k] = stops[i]
                t_slot[k] = slots[i]
                t_blo[k] = blk
                t_bhi[k] = blk + 1
        ptr = np.empty(n_t + 1, np.int64)
        for j in range(n_t + 1):
            ptr[j] = ((n_blocks * j) // n_t) * m
        if par is not None and n_t > 1:
            _build_par(X_dense, feat_off, gh, packed, idx, identity, t_start, t_stop, t_slot,
                       t_blo, t_bhi, ptr, hist)
        else:
            _build_ser(X_dense, feat_off, gh, packed, idx, identity, t_start, t_stop, t_slot,
                       t_blo, t_bhi, ptr, hist)
        return
    node, p_start, p_stop, ptr = plan_pieces(starts, stops, n_threads, min_rows)
    n_p = node.shape[0]
    for i in range(m):
        if stops[i] == starts[i]:      # no piece: zero its slot here
            hist[slots[i]][:, :] = 0
    p_slot = np.empty(n_p, np.int64)
    n_extra = 0
    for p in range(n_p):
        if p > 0 and node[p] == node[p - 1]:
            p_slot[p] = scratch_slots[n_extra]
            n_extra += 1
        else:
            p_slot[p] = slots[node[p]]
    cut = ptr.shape[0] > 2
    if sp_ptr is not None:
        task_tot = np.empty((n_p, channels), np.int64)
        if par is not None and cut:
            _sparse_par(sp_ptr, sp_bins, gh, idx, identity, p_start, p_stop, p_slot, ptr, hist,
                        task_tot)
        else:
            _sparse_ser(sp_ptr, sp_bins, gh, idx, identity, p_start, p_stop, p_slot, ptr, hist,
                        task_tot)
    if X_dense is not None:
        width = X_dense.shape[1]
        blo = np.zeros(n_p, np.int64)
        bhi = np.full(n_p, (n_features + width - 1) // width, np.int64)
        if par is not None and cut:
            _build_par(X_dense, feat_off, gh, packed, idx, identity, p_start, p_stop, p_slot,
                       blo, bhi, ptr, hist)
        else:
            _build_ser(X_dense, feat_off, gh, packed, idx, identity, p_start, p_stop, p_slot,
                       blo, bhi, ptr, hist)
    # add the extra pieces into their nodes' slots (one thread never cuts a node)
    if par is not None and n_extra > 0:
        dst = np.empty(n_extra, np.int64)
        src_ptr = np.zeros(n_extra + 1, np.int64)
        src = np.empty(n_extra, np.int64)
        n_dst = 0
        k = 0
        for p in range(1, n_p):
            if node[p] == node[p - 1]:
                if n_dst == 0 or dst[n_dst - 1] != slots[node[p]]:
                    dst[n_dst] = slots[node[p]]
                    src_ptr[n_dst] = k
                    n_dst += 1
                src[k] = p_slot[p]
                k += 1
        src_ptr[n_dst] = k
        _merge_ser(hist, dst[:n_dst], src_ptr[:n_dst + 1], src)
    if sp_ptr is not None:
        totals = np.zeros((m, channels), np.int64)
        for p in range(n_p):
            for c in range(channels):
                totals[node[p], c] += task_tot[p, c]
        if par is not None and m >= min_parallel_nodes:
            _restore_par(hist, slots, totals, feat_off, sp_default)
        else:
            _restore_ser(hist, slots, totals, feat_off, sp_default)


@njit(cache=True, nogil=True)
def scan_children(hist, child_rows, child_slot, sub, feat_off, n_value_bins, masks,
                  is_cat, cat_cfg, scales, cfg, min_child_samples, par, out_gain,
                  out_feature, out_bin, out_default_left, out_left_sums, out_sums, out_bits,
                  work=None):
    """Best split of every child with a slot (``split.find_best_splits``, the larger
    children subtracting ``sub`` first; ``child_rows`` their row counts over every
    shard); the others get gain -inf, feature -1.  In parallel from
    ``min_parallel_nodes`` children (``par``: see ``thread_plan``).  On one thread the
    children are scanned straight into the outputs with ``work`` (``split.split_work``
    scratch, allocated here when None)."""
    min_parallel_nodes = thread_plan(par)[3]
    m2 = child_slot.shape[0]
    n_e = np.int64(0)      # not a literal 0: one compiled split_outputs
    for c in range(m2):
        out_gain[c] = _split.NEG_INF
        out_feature[c] = -1
        out_bin[c] = -1
        out_default_left[c] = 0
        out_bits[c] = 0
        if child_slot[c] >= 0:
            n_e += 1
    if n_e == 0:
        return
    if par is None or n_e < min_parallel_nodes:
        # find_best_splits.serial's loop, without compiling it as one more layer
        if work is None:
            w = _split.split_work(_split.max_value_bins(n_value_bins), out_bits.shape[1])
        else:
            w = work
        for c in range(m2):
            if child_slot[c] < 0:
                continue
            out_gain[c], out_feature[c], out_bin[c], out_default_left[c] = _split._best_split(
                hist, child_slot[c], sub[c], child_rows[c], feat_off, n_value_bins, masks[c],
                is_cat, cat_cfg, scales, cfg, min_child_samples, out_left_sums[c], out_sums[c],
                out_bits[c], w)
        return
    e_child = np.empty(n_e, np.int64)
    e_slot = np.empty(n_e, np.int64)
    e_sub = np.empty(n_e, np.int64)
    e_rows = np.empty(n_e, np.int64)
    e_mask = np.empty((n_e, masks.shape[1]), np.uint8)
    j = 0
    for c in range(m2):
        if child_slot[c] < 0:
            continue
        e_child[j] = c
        e_slot[j] = child_slot[c]
        e_sub[j] = sub[c]
        e_rows[j] = child_rows[c]
        copy_row(e_mask[j], masks[c])
        j += 1
    gain, feat, bb, dl, lsum, sums, bits = split_outputs(n_e, out_bits.shape[1])
    _scan_par(hist, e_slot, e_sub, e_rows, feat_off, n_value_bins, e_mask, is_cat, cat_cfg,
              scales, cfg, min_child_samples, gain, feat, bb, dl, lsum, sums, bits)
    for j in range(n_e):
        c = e_child[j]
        out_gain[c] = gain[j]
        out_feature[c] = feat[j]
        out_bin[c] = bb[j]
        out_default_left[c] = dl[j]
        copy_row(out_left_sums[c], lsum[j])
        copy_row(out_sums[c], sums[j])
        copy_row(out_bits[c], bits[j])


@njit(cache=True, nogil=True)
def split_nodes(layout, X_cols, X_dense, sp_ptr, sp_bins, sp_default, feat_off, n_value_bins,
                feature_missing_bin, gh, packed, idx, tmp, hist, t, t_gain, t_sums, t_left_sums, t_bits, batch,
                first, new_slot, scratch_slots, child_ok, min_split_rows, masks, is_cat, cat_cfg,
                scales, cfg, min_child_samples, par, identity, out_expand, out_free, X_csc,
                leafwise):
    """Split the nodes ``batch`` of the node table (``bonsai.nodes``: ``t`` its int
    fields, ``t_gain``, ``t_sums``, ``t_left_sums``) and evaluate their children, who
    get rows ``first..first + 2m - 1``: ``partition``, ``plan_children``, ``build``,
    ``scan_children`` and ``write_children`` in one call.

    Node i is split on its table fields (feature, bin, default_left; bin -1: the
    categorical split of its bitset row ``t_bits[i]``) and its histogram is in its
    slot; ``new_slot[i]`` is a free slot for its smaller child.
    ``masks (2m, F)`` are the children's usable features (zeros: only the
    subtraction and the node sums, for oblivious trees, whose split is chosen per
    level).  Returns (n_expand, n_free): ``out_expand[:n_expand]`` the children that
    can split (they keep a histogram slot), ``out_free[:n_free]`` the slots to free.

    ``X_cols`` None and ``X_csc`` given: sparse bins (``partition``).
    ``par`` is the thread plan (``thread_plan``; None: every kernel on one thread),
    ``is_cat`` None for data without categorical features, ``packed`` and the histogram
    layout as ``build`` (what is None is left out of the compiled code).

    An empty batch evaluates the root instead (table row 0, its rows and slot set;
    ``identity``: ``idx[i] == i`` over its rows): its histogram, sums and best split
    (``masks[0]``).  So a fit runs one compiled driver, whose code holds every kernel
    it calls, instead of also loading separate copies for the root.

    ``leafwise`` (max_leaves, max_depth, free (S,) int64, n_free, prune slack): with
    ``max_leaves > 0``, from the root on, grow the whole leaf-wise tree in this call
    (the grow loop's best-first policy; ``free[:n_free]`` the pool's free slot stack,
    ``masks`` two rows); returns (table rows, free stack size).  ``max_leaves`` 0
    (``ONE_STEP``): the one step.  It is a tuple of one type either way, not None for
    the one step, so both are one specialisation: the loop's code is small beside the
    kernels', and each specialisation of this function costs seconds to compile.  It
    is a loop around the same step in this function, not a separate function calling
    it: numba would link a second copy of this code into the caller (~10 s more of
    first-fit compile, measured).
    """
    grow = leafwise[0] > 0
    front, fgain, n_front, n_leaves, free, n_free, max_leaves, max_depth, slack = _lw_start(
        leafwise, t_gain)
    # the children's split outputs and the serial scan's scratch, allocated once for
    # every step of this call (a leaf-wise tree: one step a split; only 2m rows used)
    gain, c_feature, c_bin, c_dl, left_sums, sums, c_bits = split_outputs(
        max(2 * batch.shape[0], 2), t_bits.shape[1])
    work = _split.split_work(_split.max_value_bins(n_value_bins), t_bits.shape[1])
    while True:        # one split step (the only one unless ``grow``)
        m = batch.shape[0]
        root = m == 0
        if root:    # the root as the one "left child" of a pseudo-parent holding its rows
            starts = np.full(1, t[0, START], np.int64)
            stops = np.full(1, t[0, STOP], np.int64)
            nleft = stops - starts
            child_rows = np.array([t[0, COUNT], 0], np.int64)
            child_slot = np.array([t[0, SLOT], -1], np.int64)
            sub = np.full(2, -1, np.int64)
            b_start, b_stop, b_slot = starts, stops, child_slot[:1]
        else:
            starts, stops, feature, bin_, default_left, f_missing, parent_slot, p_bits = \
                batch_columns(t, t_bits, batch, feature_missing_bin)
            nleft = np.empty(m, np.int64)
            partition(X_cols, idx, tmp, starts, stops, feature, bin_, default_left, f_missing,
                      p_bits, par, nleft, X_csc)
            child_rows = local_child_rows(starts, stops, nleft)   # one shard: local = global
            child_slot = np.empty(2 * m, np.int64)
            b_start, b_stop, b_slot, sub = plan_children(starts, stops, nleft, child_rows,
                                                         parent_slot, new_slot, child_ok,
                                                         min_split_rows, child_slot)
        # one call site per kernel (the root takes the same ones): each is compiled into
        # this function's code once
        if b_start.shape[0] > 0:
            build(layout, X_dense, sp_ptr, sp_bins, sp_default, feat_off, gh, packed, idx,
                  identity and root, b_start, b_stop, b_slot, scratch_slots, par, hist)
        scan_children(hist, child_rows, child_slot, sub, feat_off, n_value_bins, masks,
                      is_cat, cat_cfg, scales, cfg, min_child_samples, par, gain,
                      c_feature, c_bin, c_dl, left_sums, sums, c_bits, work)
        if root:
            t_gain[0] = gain[0]
            t[0, FEATURE] = c_feature[0]
            t[0, BIN] = c_bin[0]
            t[0, DEFAULT_LEFT] = c_dl[0]
            copy_row(t_sums[0], sums[0])
            copy_row(t_left_sums[0], left_sums[0])
            copy_row(t_bits[0], c_bits[0])
            n_e, n_f = np.int64(0), np.int64(0)
        else:
            n_e, n_f = write_children(t, t_gain, t_sums, t_left_sums, t_bits, batch, first, starts,
                                      stops, nleft, child_rows, parent_slot, new_slot, child_slot,
                                      gain, c_feature, c_bin, c_dl, left_sums, sums, c_bits,
                                      out_expand, out_free)
        if not grow:
            return n_e, n_f
        if batch.shape[0] > 0:
            first += 2
            for k in range(n_f):
                free[n_free] = out_free[k]
                n_free += 1
            for k in range(n_e):
                front[n_front] = out_expand[k]
                fgain[n_front] = t_gain[out_expand[k]]
                n_front += 1
            n_front, n_free = _lw_prune(front, fgain, n_front, max_leaves - n_leaves, slack,
                                        t, free, n_free)
        else:                   # the root: the frontier's one leaf
            fgain[0] = t_gain[0]
        node = _lw_pick(front, fgain, n_front, n_leaves, max_leaves)
        if node < 0:
            for i in range(n_front):
                n_free = _lw_release(t, front[i], free, n_free)
            return first, n_free
        n_front -= 1
        n_leaves += 1
        depth = t[node, DEPTH] + 1
        child_ok = not ((max_depth > 0 and depth >= max_depth) or n_leaves >= max_leaves)
        n_free -= 1
        new_slot = np.full(1, free[n_free], np.int64)
        batch = np.full(1, node, np.int64)


@njit(cache=True, nogil=True)
def _lw_start(leafwise, t_gain):
    """The leaf-wise loop's state: (frontier, its gains, size, leaves, free stack,
    its size, max_leaves, max_depth); the root its only leaf (unused by ``ONE_STEP``).
    """
    max_leaves, max_depth, free, n_free, slack = leafwise
    front = np.empty(max_leaves + 1, np.int64)
    fgain = np.empty(max_leaves + 1)
    front[0] = 0
    fgain[0] = -np.inf       # the root's gain, once its step has scanned it
    return (front, fgain, np.int64(1), np.int64(1), free, np.int64(n_free),
            np.int64(max_leaves), np.int64(max_depth), np.int64(slack))


@njit(cache=True, nogil=True)
def _lw_prune(front, fgain, n_front, remaining, slack, t, free, n_free):
    """The grow loop's ``_drop_unreachable``: once the frontier exceeds the remaining
    splits by ``slack`` (the loop's ``Grower.PRUNE_SLACK``), keep (in order) only the ``remaining`` leaves
    ahead in the (gain, order) ranking that can split, and put the others' slots
    back on the free stack.  Only histograms of leaves never split are freed, so the
    tree is unchanged.  Returns (frontier size, free stack size)."""
    if n_front < remaining + slack:
        return n_front, n_free
    order = np.argsort(-fgain[:n_front], kind="mergesort")   # ties: lower position
    keep = np.zeros(n_front, np.bool_)
    for j in range(min(max(remaining, 0), n_front)):
        i = order[j]
        if fgain[i] > -np.inf:
            keep[i] = True
    k = 0
    for i in range(n_front):
        if keep[i]:
            front[k] = front[i]
            fgain[k] = fgain[i]
            k += 1
        else:
            n_free = _lw_release(t, front[i], free, n_free)
    return k, n_free


@njit(cache=True, nogil=True)
def _lw_release(t, node, free, n_free):
    """Give leaf ``node``'s histogram slot (if it holds one) back to the free stack;
    returns the stack's new size."""
    sl = t[node, SLOT]
    if sl >= 0:
        free[n_free] = sl
        n_free += 1
        t[node, SLOT] = -1
    return n_free


@njit(cache=True, nogil=True)
def _lw_pick(front, fgain, n_front, n_leaves, max_leaves):
    """The next leaf to split, taken out of the frontier (the first of highest gain;
    -1: none, or the leaf budget is spent), as the grow loop's ``_select``."""
    if n_front == 0 or max_leaves - n_leaves <= 0:
        return -1
    best = 0
    for i in range(1, n_front):
        if fgain[i] > fgain[best]:
            best = i
    if not fgain[best] > -np.inf:
        return -1
    node = front[best]
    for i in range(best, n_front - 1):
        front[i] = front[i + 1]
        fgain[i] = fgain[i + 1]
    return node
