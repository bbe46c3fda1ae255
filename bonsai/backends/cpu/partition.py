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

from ._intrinsics import AVX512F, VECTOR_ROWS, compress16, left_mask16
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


@njit(cache=True, nogil=True)
def _split_task(col, idx, tmp, a, b, tb, mb, dl, bits):
    """One task's rows ``idx[a:b]``: the left ones compacted in place from ``a``, the
    right ones into ``tmp`` from ``a``, each in their order; returns the left count.

    A write ``idx[lp]`` never reaches a row not yet read (``lp <= i``), so one pass
    does it, and only the right rows are copied again.  A numeric split (``tb >= 0``)
    takes 16 rows a step: a vector of their bins' left/right bits
    (``left_mask16``), then each side's rows packed into place (``compress16``).  Its
    16-slot stores end at ``i + 16 <= b``, inside the task.  The rest, and
    categorical splits (bin b left when bit b of ``bits`` is set), go row by row,
    writing the row at both places and advancing one of them (no branch on the
    direction, which mispredicts on about half the rows of a balanced split).

    The 16-row steps run where the compiled code may use AVX-512F (``AVX512F``).
    Elsewhere LLVM expands the compress into a branch per lane, which was slower
    than row by row (compiled for Haswell: 4.5-6.7 against 1.4 ns a row), so every
    row goes row by row there.

    Measured on one node (one thread, uint8 bins, 10% missing): the previous two
    passes (both ends of ``tmp``, then back) took 1.31-1.38 ns a row on 43k and 1M
    rows and 2.73 on 8k rows scattered over 1M; this one-pass, row by row, 1.18-1.23
    and 2.11; with the 16-row steps 0.57-0.59 and 0.91."""
    one = np.uintp(1)
    lp = np.uintp(a)
    rp = np.uintp(a)
    i = np.uintp(a)
    stop = np.uintp(b)
    top = (np.int64(1) << np.int64(8 * col.itemsize)) - 1     # the column's largest bin
    if AVX512F and tb >= 0 and tb <= top and mb >= 0 and mb <= top:
        step = np.uintp(VECTOR_ROWS)
        full = np.uint64((1 << VECTOR_ROWS) - 1)
        while i + step <= stop:
            m = left_mask16(col, idx, i, tb, mb, dl)
            nl = np.uintp(_popcount16(m))
            # right rows first: the second call stores into idx[lp:lp + 16], over
            # rows both calls read (lp <= i)
            compress16(idx, i, tmp, rp, ~m & full)
            compress16(idx, i, idx, lp, m)
            lp += nl
            rp += step - nl
            i += step
    if tb >= 0:
        for k in range(i, stop):
            r = idx[k]
            c = col[r]
            gl = np.uintp((c <= tb) | ((c == mb) & dl))
            idx[lp] = r
            tmp[rp] = r
            lp += gl
            rp += one - gl
        return np.int64(lp) - a
    for k in range(i, stop):
        r = idx[k]
        c = np.uintp(col[r])
        gl = np.uintp((bits[c >> np.uintp(6)] >> np.uint64(c & np.uintp(63))) & np.uint64(1))
        idx[lp] = r
        tmp[rp] = r
        lp += gl
        rp += one - gl
    return np.int64(lp) - a


@njit(cache=True, nogil=True, forceinline=True)
def _popcount16(m):
    """Set bits of the low 16 bits of ``m`` (uint64)."""
    m = m - ((m >> np.uint64(1)) & np.uint64(0x5555))
    m = (m & np.uint64(0x3333)) + ((m >> np.uint64(2)) & np.uint64(0x3333))
    m = (m + (m >> np.uint64(4))) & np.uint64(0x0F0F)
    return (m + (m >> np.uint64(8))) & np.uint64(0x1F)


@njit(cache=True, nogil=True, forceinline=True)
def _copy(dst, d0, src, s0, n):
    """``dst[d0:d0 + n] = src[s0:s0 + n]`` (distinct arrays)."""
    for k in range(np.uintp(n)):
        dst[np.uintp(d0) + k] = src[np.uintp(s0) + k]


@parallel_kernel
def partition_nodes(X_cols, idx, tmp, task_node, task_start, task_stop, thread_ptr,
                    node_feature, node_bin, node_default_left, node_missing_bin, node_bits,
                    task_nleft, out_node_nleft):
    """Stable partition of several nodes' ranges at once.

    Pass 1: each task splits its rows (``_split_task``): left ones in place, right
    ones into ``tmp`` over the same range.  A node that is one task is then done by
    copying its right rows back after its left ones.  A node cut into several tasks
    (at most ``n_threads - 1`` of them) has each task put its left rows after its
    right ones in ``tmp``, and, once every task has, each task copies both parts to
    their places in ``idx`` (the node's left rows task by task, then its right rows).
    The result is a stable partition whatever the tasks are.

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
    n_tasks = task_start.shape[0]
    for j in prange(n_threads):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            nd = task_node[t]
            task_nleft[t] = _split_task(X_cols[node_feature[nd]], idx, tmp, task_start[t],
                                        task_stop[t], node_bin[nd], node_missing_bin[nd],
                                        node_default_left[nd] != 0, node_bits[nd])
    # serial prefix sums: where each task's left and right rows go
    left_pos, right_pos = task_places(task_node, task_start, task_stop, task_nleft,
                                      out_node_nleft)
    # a task whose final places are its own range (a node that is one task, at
    # least) copies its right rows back; the others put their left rows after their
    # right ones in ``tmp``, and once all have, copy both to their places
    own = np.empty(n_tasks, np.bool_)
    n_moved = 0
    for t in range(n_tasks):
        own[t] = left_pos[t] == task_start[t] and right_pos[t] == task_start[t] + task_nleft[t]
        n_moved += not own[t]
    for j in prange(n_threads):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            a = task_start[t]
            nl = task_nleft[t]
            nr = task_stop[t] - a - nl
            if own[t]:
                _copy(idx, a + nl, tmp, a, nr)
            else:
                _copy(tmp, a + nr, idx, a, nl)
    if n_moved == 0:
        return
    for j in prange(n_threads):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            if not own[t]:
                a = task_start[t]
                nl = task_nleft[t]
                nr = task_stop[t] - a - nl
                _copy(idx, left_pos[t], tmp, a + nr, nl)
                _copy(idx, right_pos[t], tmp, a, nr)


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
