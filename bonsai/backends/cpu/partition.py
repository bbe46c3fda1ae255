"""CPU kernels of the partition stage: the level-batched stable partition of sample
indices, and the update of training scores from the leaves' row ranges.

Every node owns a contiguous range ``idx[start:stop]``.  Splitting it rewrites that
range as (left rows, right rows), each in their previous (ascending) order, so a
node's rows stay sorted: gathers stay monotonic and the result does not depend on
the thread count.
"""
import numpy as np
from numba import njit, prange

from ._jit import parallel_kernel

from ._intrinsics import prefetch_row

_PREFETCH = 32


@parallel_kernel
def partition_nodes(X_binned, n, idx, tmp, go_left, task_node, task_start, task_stop, thread_ptr,
                    node_feature, node_bin, node_default_left, node_missing_bin,
                    task_nleft, out_node_nleft):
    """Stable partition of several nodes' ranges at once.

    Parameters
    ----------
    X_binned : (n_blocks * n, B) uint8/uint16 blocked layout (see ``bonsai.binning``), IN
    n : int -- rows of the data set
    idx : (n_sampled,) uint32, IN/OUT
    tmp : (n_sampled,) uint32, scratch
    go_left : (n_sampled,) uint8, scratch
    task_node, task_start, task_stop : (T,) int64, IN -- a node's tasks are
        consecutive and cover its range in order
    node_feature, node_bin, node_missing_bin : (m,) int64, IN
    node_default_left : (m,) uint8, IN
    task_nleft : (T,) int64, scratch
    out_node_nleft : (m,) int64, OUT -- rows sent left per node
    """
    n_tasks = task_start.shape[0]
    n_threads = thread_ptr.shape[0] - 1
    width = X_binned.shape[1]
    for j in prange(n_threads):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            nd = task_node[t]
            f = node_feature[nd]
            base = (f // width) * n
            col = f - (f // width) * width
            tb = node_bin[nd]
            mb = node_missing_bin[nd]
            dl = node_default_left[nd]
            c = 0
            pf_stop = task_stop[t] - _PREFETCH
            for i in range(task_start[t], task_stop[t]):
                if i < pf_stop:
                    prefetch_row(X_binned, base + idx[i + _PREFETCH])
                b = X_binned[base + idx[i], col]
                if b == mb:
                    left = dl
                elif b <= tb:
                    left = np.uint8(1)
                else:
                    left = np.uint8(0)
                go_left[i] = left
                c += left
            task_nleft[t] = c
    # serial prefix sums: where each task writes its left and right rows
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
    for j in prange(n_threads):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            lp = left_pos[t]
            rp = right_pos[t]
            for i in range(task_start[t], task_stop[t]):
                if go_left[i]:
                    tmp[lp] = idx[i]
                    lp += 1
                else:
                    tmp[rp] = idx[i]
                    rp += 1
    for j in prange(n_threads):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            for i in range(task_start[t], task_stop[t]):
                idx[i] = tmp[i]


@parallel_kernel
def add_leaf_values(raw, idx, leaf_start, leaf_stop, leaf_value):
    """``raw[idx[i]] += leaf_value[l]`` for the rows of every leaf ``l``.

    raw : (n,) float64, IN/OUT ; idx : (n_sampled,) uint32 ; leaf_* : (L,)
    """
    for lf in prange(leaf_start.shape[0]):
        v = leaf_value[lf]
        for i in range(leaf_start[lf], leaf_stop[lf]):
            raw[idx[i]] += v
