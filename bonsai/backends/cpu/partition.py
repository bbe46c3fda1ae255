"""CPU kernels of the partition stage: the level-batched stable partition of sample
indices, and the update of training scores from the leaves' row ranges.

Every node owns a contiguous range ``idx[start:stop]``.  Splitting it rewrites that
range as (left rows, right rows), each in their previous (ascending) order, so a
node's rows stay sorted: gathers stay monotonic and the result does not depend on
the thread count.

The split feature is read from the column-major copy of the binned matrix: one byte
per row from a contiguous column, instead of one cache line per row from the
row-major matrix.
"""
import numpy as np
from numba import njit, prange

from ._jit import parallel_kernel


@njit(cache=True, nogil=True)
def task_places(task_node, task_start, task_stop, task_nleft, out_node_nleft):
    """The partition's serial prefix sums: each node's left count into
    ``out_node_nleft``, and where each task's left and right rows go (a node's tasks
    follow each other: its left rows from its start, its right rows after all of
    them).  Returns (left_pos, right_pos), each (T,) int64."""
    n_tasks = task_start.shape[0]
    left_pos = np.empty(n_tasks, np.int64)
    right_pos = np.empty(n_tasks, np.int64)
    out_node_nleft[:] = 0
    for t in range(n_tasks):
        out_node_nleft[task_node[t]] += task_nleft[t]
    t = 0
    while t < n_tasks:
        nd = task_node[t]
        lp = task_start[t]
        rp = lp + out_node_nleft[nd]
        while t < n_tasks and task_node[t] == nd:
            left_pos[t] = lp
            right_pos[t] = rp
            lp += task_nleft[t]
            rp += (task_stop[t] - task_start[t]) - task_nleft[t]
            t += 1
    return left_pos, right_pos


@parallel_kernel
def partition_nodes(X_cols, idx, tmp, task_node, task_start, task_stop, thread_ptr,
                    node_feature, node_bin, node_default_left, node_missing_bin, node_bits,
                    task_nleft, out_node_nleft):
    """Stable partition of several nodes' ranges at once, in two passes.

    Pass 1: each task streams its rows into ``tmp`` over the same range, left rows
    forward from the start and right rows backward from the end.  Pass 2: each task
    copies its left rows, then its right rows (reversed back), to their final places
    in ``idx``; a node's tasks follow each other, so the result is a stable partition
    whatever the tasks are.

    Parameters
    ----------
    X_cols : (F, n) uint8/uint16 column-major bins, IN
    idx : (n_sampled,) uint32, IN/OUT
    tmp : (n_sampled,) uint32, scratch
    task_node, task_start, task_stop : (T,) int64, IN -- a node's tasks are
        consecutive and cover its range in order
    thread_ptr : (n_threads + 1,) int64, IN -- thread j runs tasks thread_ptr[j]:thread_ptr[j+1]
    node_feature, node_bin, node_missing_bin : (m,) int64, IN
    node_default_left : (m,) uint8, IN
    node_bits : (m, W) uint64, IN -- a categorical split (``node_bin < 0``) sends bin b
        left when bit b is set (the missing bin never is)
    task_nleft : (T,) int64, scratch
    out_node_nleft : (m,) int64, OUT -- rows sent left per node
    """
    n_threads = thread_ptr.shape[0] - 1
    one = np.uintp(1)
    for j in prange(n_threads):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            nd = task_node[t]
            col = X_cols[node_feature[nd]]
            tb = node_bin[nd]
            mb = node_missing_bin[nd]
            dl = node_default_left[nd] != 0
            # unsigned indices: no negative-index wraparound checks in the loop
            lp = np.uintp(task_start[t])
            rp = np.uintp(task_stop[t])
            if tb < 0:                  # categorical: bin b goes left when bit b is set
                bits = node_bits[nd]
                for i in range(np.uintp(task_start[t]), np.uintp(task_stop[t])):
                    r = idx[i]
                    b = np.uintp(col[r])
                    gl = np.uintp((bits[b >> np.uintp(6)] >> np.uint64(b & np.uintp(63)))
                                  & np.uint64(1))
                    tmp[lp] = r
                    tmp[rp - one] = r
                    lp += gl
                    rp -= one - gl
                task_nleft[t] = np.int64(lp) - task_start[t]
                continue
            # branchless: write the row at both ends, advance one of them (a branch on
            # the direction mispredicts on about half the rows of a balanced split).
            # tmp[lp] and tmp[rp - 1] are both still free (lp < rp while rows remain);
            # when they coincide the two writes are the same.  The missing bin is above
            # every split bin, so only it needs the default direction.
            for i in range(np.uintp(task_start[t]), np.uintp(task_stop[t])):
                r = idx[i]
                b = col[r]
                gl = np.uintp((b <= tb) | ((b == mb) & dl))
                tmp[lp] = r
                tmp[rp - one] = r
                lp += gl
                rp -= one - gl
            task_nleft[t] = np.int64(lp) - task_start[t]
    # serial prefix sums: where each task's left and right rows go
    left_pos, right_pos = task_places(task_node, task_start, task_stop, task_nleft,
                                      out_node_nleft)
    for j in prange(n_threads):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            a = np.uintp(task_start[t])
            nl = np.uintp(task_nleft[t])
            nr = np.uintp(task_stop[t] - task_start[t]) - nl
            lp = np.uintp(left_pos[t])
            rp = np.uintp(right_pos[t])
            end = np.uintp(task_stop[t]) - one
            for k in range(nl):
                idx[lp + k] = tmp[a + k]
            for k in range(nr):
                idx[rp + k] = tmp[end - k]


@parallel_kernel
def fill_range(out):
    """``out[i] = i`` (the sample of an unsampled round)."""
    for i in prange(out.shape[0]):
        out[i] = i


@parallel_kernel
def add_leaf_values(raw, idx, leaf_start, leaf_stop, leaf_value):
    """``raw[idx[i]] += leaf_value[l]`` for the rows of every leaf ``l``.

    raw : (n,) float64, IN/OUT ; idx : (n_sampled,) uint32 ; leaf_* : (L,)
    """
    for lf in prange(leaf_start.shape[0]):
        v = leaf_value[lf]
        for i in range(np.uintp(leaf_start[lf]), np.uintp(leaf_stop[lf])):
            raw[idx[i]] += v


@parallel_kernel
def leaf_sums(grad, hess, idx, leaf_start, leaf_stop, out):
    """Exact float64 (grad, hess) sums of each leaf's rows, each leaf summed serially
    in row order (deterministic).  out : (L, 2) float64, OUT"""
    for lf in prange(leaf_start.shape[0]):
        g = 0.0
        h = 0.0
        for i in range(np.uintp(leaf_start[lf]), np.uintp(leaf_stop[lf])):
            r = idx[i]
            g += grad[r]
            h += hess[r]
        out[lf, 0] = g
        out[lf, 1] = h
