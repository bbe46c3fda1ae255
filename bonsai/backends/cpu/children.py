"""The split step's node bookkeeping: the split nodes' table fields, which children
get histograms (the smaller child filled, the larger by subtraction), and the
children written back to the node table (``bonsai.nodes``).

Small serial kernels that ``step.split_nodes`` calls between the partition, the
histogram fill and the scan (and the staged step of ``builder`` calls one by one).
"""
import numpy as np
from numba import njit

from ...nodes import (BIN, COUNT, DEFAULT_LEFT, DEPTH, FEATURE, LEFT, PARENT, RIGHT, SLOT,
                      START, STOP)


@njit(cache=True, nogil=True)
def copy_row(dst, src):
    """``dst[:] = src`` (1-D, same length) as a plain loop: numba's array-to-array
    assignment compiles its broadcasting, shape checks and error message (about 1.7 s
    more compile time for the first function that uses it, measured)."""
    for q in range(dst.shape[0]):
        dst[q] = src[q]


@njit(cache=True, nogil=True)
def plan_children(starts, stops, nleft, child_rows, parent_slot, new_slot, child_ok,
                  min_split_rows, out_slot):
    """After the partition: which children can split and where their histograms go.

    Child ``2i`` is node i's left part (this shard's rows ``starts[i]:starts[i] +
    nleft[i]``), ``2i + 1`` its right part; ``child_rows (2m,)`` are their row counts
    over every shard, which every decision reads (so all shards decide alike).  A
    child can split when ``child_ok`` and it has at least ``min_split_rows`` rows.  If
    either can, the smaller child is filled into ``new_slot[i]`` and the larger takes
    the parent's slot, to have the smaller subtracted.  Writes ``out_slot (2m,)`` (-1:
    cannot split) and returns the fills (start, stop, slot) and each child's slot to
    subtract (``sub (2m,)``, -1 for none)."""
    m = starts.shape[0]
    b_start = np.empty(m, np.int64)
    b_stop = np.empty(m, np.int64)
    b_slot = np.empty(m, np.int64)
    sub = np.full(2 * m, -1, np.int64)
    n_b = 0
    for i in range(m):
        mid = starts[i] + nleft[i]
        lrows = child_rows[2 * i]
        rrows = child_rows[2 * i + 1]
        ok_l = child_ok and lrows >= min_split_rows
        ok_r = child_ok and rrows >= min_split_rows
        out_slot[2 * i] = -1
        out_slot[2 * i + 1] = -1
        if not (ok_l or ok_r):
            continue
        if lrows <= rrows:
            small, large, ok_s, ok_g = 2 * i, 2 * i + 1, ok_l, ok_r
            b_start[n_b] = starts[i]
            b_stop[n_b] = mid
        else:
            small, large, ok_s, ok_g = 2 * i + 1, 2 * i, ok_r, ok_l
            b_start[n_b] = mid
            b_stop[n_b] = stops[i]
        b_slot[n_b] = new_slot[i]
        n_b += 1
        if ok_s:
            out_slot[small] = new_slot[i]
        if ok_g:
            out_slot[large] = parent_slot[i]
            sub[large] = new_slot[i]
    return b_start[:n_b], b_stop[:n_b], b_slot[:n_b], sub


@njit(cache=True, nogil=True)
def local_child_rows(starts, stops, nleft):
    """(2m,) rows of each node's left and right part on this shard."""
    m = starts.shape[0]
    out = np.empty(2 * m, np.int64)
    for i in range(m):
        out[2 * i] = nleft[i]
        out[2 * i + 1] = stops[i] - starts[i] - nleft[i]
    return out


@njit(cache=True, nogil=True)
def batch_columns(t, t_bits, batch, feature_missing_bin):
    """The split nodes' table fields: (start, stop, feature, bin, default_left, missing
    bin of the feature, slot), each (m,), and their bitsets (m, W)."""
    m = batch.shape[0]
    starts = np.empty(m, np.int64)
    stops = np.empty(m, np.int64)
    feature = np.empty(m, np.int64)
    bin_ = np.empty(m, np.int64)
    default_left = np.empty(m, np.uint8)
    f_missing = np.empty(m, np.int64)
    slot = np.empty(m, np.int64)
    for i in range(m):
        n = batch[i]
        starts[i] = t[n, START]
        stops[i] = t[n, STOP]
        feature[i] = t[n, FEATURE]
        bin_[i] = t[n, BIN]
        default_left[i] = t[n, DEFAULT_LEFT]
        f_missing[i] = feature_missing_bin[feature[i]]
        slot[i] = t[n, SLOT]
    bits = np.empty((m, t_bits.shape[1]), np.uint64)
    for i in range(m):
        copy_row(bits[i], t_bits[batch[i]])
    return starts, stops, feature, bin_, default_left, f_missing, slot, bits


@njit(cache=True, nogil=True)
def write_children(t, t_gain, t_sums, t_left_sums, t_bits, batch, first, starts, stops, nleft,
                   child_rows, parent_slot, new_slot, child_slot, gain, feature, bin_,
                   default_left, left_sums, sums, bits, out_expand, out_free):
    """Rows ``first + 2i`` (left) and ``first + 2i + 1`` of node ``batch[i]``'s children
    (``COUNT``: ``child_rows``, their rows over every shard).

    A child that cannot split takes its sums from the parent's split (left sums, or
    the node's minus them); one that can gets its scanned split and node sums.  Writes
    the ids of the children that can split to ``out_expand`` and the slots no child
    kept to ``out_free``; returns (count of each)."""
    n_e = 0
    n_f = 0
    for i in range(batch.shape[0]):
        n = batch[i]
        mid = starts[i] + nleft[i]
        for c in range(2):
            k = 2 * i + c
            cid = first + k
            t[cid, START] = starts[i] if c == 0 else mid
            t[cid, STOP] = mid if c == 0 else stops[i]
            t[cid, COUNT] = child_rows[k]
            t[cid, DEPTH] = t[n, DEPTH] + 1
            t[cid, PARENT] = n
            t[cid, LEFT] = -1
            t[cid, RIGHT] = -1
            t[cid, SLOT] = child_slot[k]
            t[cid, FEATURE] = feature[k]
            t[cid, BIN] = bin_[k]
            t[cid, DEFAULT_LEFT] = default_left[k]
            copy_row(t_bits[cid], bits[k])
            t_gain[cid] = gain[k]
            for q in range(3):
                if child_slot[k] >= 0:
                    t_sums[cid, q] = sums[k, q]
                    t_left_sums[cid, q] = left_sums[k, q]
                else:
                    ls = t_left_sums[n, q]
                    t_sums[cid, q] = ls if c == 0 else t_sums[n, q] - ls
                    t_left_sums[cid, q] = 0
            if child_slot[k] >= 0:
                out_expand[n_e] = cid
                n_e += 1
        t[n, LEFT] = first + 2 * i
        t[n, RIGHT] = first + 2 * i + 1
        t[n, SLOT] = -1
        for s in (parent_slot[i], new_slot[i]):
            if s != child_slot[2 * i] and s != child_slot[2 * i + 1]:
                out_free[n_f] = s
                n_f += 1
    return n_e, n_f
