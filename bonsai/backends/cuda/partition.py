"""CUDA kernels of the partition stage: the level-batched stable partition of the
sample indices, and the plan of which child gets which histogram slot.

Every split node owns the range ``idx[start:stop]``; the partition rewrites it as
(left rows, right rows), each in their previous order, exactly as the CPU's
``partition_nodes`` does (so the node ranges, and everything read through them, are
the same).  It is a count / scan / scatter over chunks of ``CHUNK`` rows, one block
per chunk (the chunk table is built on the host from the node ranges, which the host
knows):

1. ``count_left``: each chunk's rows sent left (one atomic add per left row);
2. ``chunk_offsets``: one thread per node turns its chunks' counts into where each
   chunk's left and right rows go, and the node's left count;
3. ``scatter``: each block ranks its rows by a prefix scan of the go-left flags
   and writes them to ``tmp`` at those places;
4. ``copy_back``: ``idx[range] = tmp[range]`` over the chunks.

Then ``plan_children`` (one thread: ``m`` parents) decides, like the CPU's
``children.plan_children``, which children can split, which is filled (the smaller)
and which takes the parent's slot to have it subtracted.  Nothing waits for the host.
"""
import numpy as np
from numba import cuda

from ._device import CHUNK


@cuda.jit(device=True)
def _goes_left(b, tb, mb, dl, bits, nd):
    """Whether bin ``b`` goes left at a split on (bin ``tb``, missing bin ``mb``,
    ``dl`` missing left); ``tb < 0``: a categorical split, left where the bit of
    ``bits[nd]`` is set (the missing bin's never is)."""
    if tb < 0:
        return np.int32((bits[nd, b >> 6] >> np.uint64(b & 63)) & np.uint64(1))
    return np.int32(b <= tb or (b == mb and dl != 0))


@cuda.jit(cache=True)
def count_left(X, idx, c_node, c_start, c_stop, feature, bin_, default_left, missing_bin,
               bits, c_left):
    """``c_left[c] +=`` the rows of chunk ``c`` (``idx[c_start[c]:c_stop[c]]``, node
    ``c_node[c]``) that go left (``c_left`` zero on entry: ``chunk_offsets`` zeroes
    what it has read, so the buffer lives for the whole fit); one row per thread."""
    c = cuda.blockIdx.x
    while c < c_node.shape[0]:
        i = c_start[c] + cuda.threadIdx.x
        if i < c_stop[c]:
            nd = c_node[c]
            b = np.int64(X[np.int64(idx[i]), feature[nd]])
            if _goes_left(b, bin_[nd], missing_bin[nd], default_left[nd], bits, nd):
                cuda.atomic.add(c_left, c, 1)
        c += cuda.gridDim.x


@cuda.jit(cache=True)
def chunk_offsets(node_chunk_ptr, c_start, c_stop, c_left, starts, c_lpos, c_rpos, nleft):
    """Per node (one thread each): where each of its chunks' left and right rows go
    (left rows from the node's start, right rows after every left row), and its left
    count ``nleft``; its chunks' counts are zeroed for the next level."""
    nd = cuda.grid(1)
    if nd >= starts.shape[0]:
        return
    total = np.int64(0)
    for c in range(node_chunk_ptr[nd], node_chunk_ptr[nd + 1]):
        total += c_left[c]
    lp = starts[nd]
    rp = starts[nd] + total
    for c in range(node_chunk_ptr[nd], node_chunk_ptr[nd + 1]):
        c_lpos[c] = lp
        c_rpos[c] = rp
        lp += c_left[c]
        rp += (c_stop[c] - c_start[c]) - c_left[c]
        c_left[c] = 0
    nleft[nd] = total


@cuda.jit(cache=True)
def scatter(X, idx, tmp, c_node, c_start, c_stop, feature, bin_, default_left, missing_bin,
            bits, c_lpos, c_rpos):
    """Each chunk's rows into ``tmp``: left rows at ``c_lpos[c]`` on, right rows at
    ``c_rpos[c]`` on, each in their order.  The ranks come from an exclusive scan of
    the go-left flags by the block's first thread (``CHUNK`` additions: a serial scan
    needs two barriers where a parallel one needs two per step, and it is a sliver of
    the rows' loads)."""
    flags = cuda.shared.array(CHUNK, np.int32)
    ranks = cuda.shared.array(CHUNK, np.int32)
    t = cuda.threadIdx.x
    c = cuda.blockIdx.x
    while c < c_node.shape[0]:
        i = c_start[c] + t
        r = np.uint32(0)
        flag = np.int32(0)
        if i < c_stop[c]:
            nd = c_node[c]
            r = idx[i]
            b = np.int64(X[np.int64(r), feature[nd]])
            flag = _goes_left(b, bin_[nd], missing_bin[nd], default_left[nd], bits, nd)
        flags[t] = flag
        cuda.syncthreads()
        if t == 0:
            acc = np.int32(0)
            for q in range(CHUNK):
                ranks[q] = acc
                acc += flags[q]
        cuda.syncthreads()
        if i < c_stop[c]:
            left_before = ranks[t]                    # exclusive rank among the left
            if flag != 0:
                tmp[c_lpos[c] + left_before] = r
            else:
                tmp[c_rpos[c] + (t - left_before)] = r
        cuda.syncthreads()
        c += cuda.gridDim.x


@cuda.jit(cache=True)
def copy_back(idx, tmp, c_start, c_stop):
    """``idx[c_start[c]:c_stop[c]] = tmp[...]`` for every chunk."""
    c = cuda.blockIdx.x
    while c < c_start.shape[0]:
        i = c_start[c] + cuda.threadIdx.x
        if i < c_stop[c]:
            idx[i] = tmp[i]
        c += cuda.gridDim.x


@cuda.jit(cache=True)
def plan_children(starts, stops, nleft, parent_slot, new_slot, child_ok, min_split_rows,
                  out_child_rows, out_slot, out_sub, b_start, b_stop, b_slot):
    """One thread: the CPU's ``children.plan_children`` on the device (one shard, so
    the child rows are the partition's).  Part ``i`` of the fill is parent ``i``'s
    smaller child (slot -1: neither child can split, nothing to fill)."""
    if cuda.grid(1) != 0:
        return
    for i in range(starts.shape[0]):
        mid = starts[i] + nleft[i]
        lrows = nleft[i]
        rrows = stops[i] - mid
        out_child_rows[2 * i] = lrows
        out_child_rows[2 * i + 1] = rrows
        ok_l = child_ok != 0 and lrows >= min_split_rows
        ok_r = child_ok != 0 and rrows >= min_split_rows
        out_slot[2 * i] = -1
        out_slot[2 * i + 1] = -1
        out_sub[2 * i] = -1
        out_sub[2 * i + 1] = -1
        b_slot[i] = -1
        b_start[i] = 0
        b_stop[i] = 0
        if not (ok_l or ok_r):
            continue
        if lrows <= rrows:
            small = 2 * i
            large = 2 * i + 1
            ok_s = ok_l
            ok_g = ok_r
            b_start[i] = starts[i]
            b_stop[i] = mid
        else:
            small = 2 * i + 1
            large = 2 * i
            ok_s = ok_r
            ok_g = ok_l
            b_start[i] = mid
            b_stop[i] = stops[i]
        b_slot[i] = new_slot[i]
        if ok_s:
            out_slot[small] = new_slot[i]
        if ok_g:
            out_slot[large] = parent_slot[i]
            out_sub[large] = new_slot[i]


def chunk_table(starts, stops):
    """Host side: the chunks of ``CHUNK`` rows of the node ranges, (c_node, c_start,
    c_stop, node_chunk_ptr) int64 arrays."""
    sizes = np.maximum(stops - starts, 0)
    per = -(-sizes // CHUNK)
    ptr = np.zeros(starts.shape[0] + 1, np.int64)
    np.cumsum(per, out=ptr[1:])
    c_node = np.repeat(np.arange(starts.shape[0], dtype=np.int64), per)
    within = np.arange(ptr[-1], dtype=np.int64) - ptr[c_node]
    c_start = starts[c_node] + within * CHUNK
    c_stop = np.minimum(c_start + CHUNK, stops[c_node])
    return c_node, c_start, c_stop, ptr
