"""CPU kernels of the histogram stage: fixed-point gradient quantization, the
row-wise gathered fill (level-batched over tasks), slot merging and sibling
subtraction.

Histogram layout: ``hist[slot, offset[f] + bin, channel]`` int64 with channels
(grad, hess, count).  Every cell is an integer sum, so the result of a fill does not
depend on how rows were split into tasks or threads, and ``parent - child`` is the
exact histogram of the sibling.
"""
import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def quantize_gradients(grad, hess, scale_g, scale_h, out):
    """``out[i] = (rint(grad[i] * scale_g), rint(hess[i] * scale_h))``.

    grad, hess : (n,) float32, IN ; out : (n, 2) int64, OUT
    """
    for i in prange(grad.shape[0]):
        out[i, 0] = np.int64(np.rint(np.float64(grad[i]) * scale_g))
        out[i, 1] = np.int64(np.rint(np.float64(hess[i]) * scale_h))


@njit(cache=True, nogil=True)
def _fill_rows(X_binned, feat_off, gh, idx, start, stop, out):
    n_features = X_binned.shape[1]
    for i in range(start, stop):
        r = idx[i]
        g = gh[r, 0]
        h = gh[r, 1]
        for f in range(n_features):
            b = feat_off[f] + X_binned[r, f]
            out[b, 0] += g
            out[b, 1] += h
            out[b, 2] += 1


@njit(parallel=True, cache=True)
def build_histograms(X_binned, feat_off, gh, idx, task_start, task_stop, task_slot,
                     thread_ptr, hist):
    """Fill one histogram slot per task from the rows ``idx[task_start:task_stop]``.

    Thread ``j`` runs tasks ``thread_ptr[j]:thread_ptr[j+1]`` in order.

    Parameters
    ----------
    X_binned : (n, F) uint8/uint16 C order, IN
    feat_off : (F + 1,) int64 bin offsets, IN
    gh : (n, 2) int64 quantized (grad, hess), IN
    idx : (n_sampled,) uint32 sample indices, nodes are contiguous ranges, IN
    task_start, task_stop, task_slot : (T,) int64, IN -- slots are distinct
    thread_ptr : (n_threads + 1,) int64, IN
    hist : (n_slots, n_bins_total, 3) int64, OUT (the task slots are overwritten)
    """
    for j in prange(thread_ptr.shape[0] - 1):
        for t in range(thread_ptr[j], thread_ptr[j + 1]):
            out = hist[task_slot[t]]
            out[:, :] = 0
            _fill_rows(X_binned, feat_off, gh, idx, task_start[t], task_stop[t], out)


@njit(parallel=True, cache=True)
def merge_slots(hist, dst_slot, src_ptr, src_slot):
    """``hist[dst_slot[j]] += hist[src]`` for every src in ``src_slot[src_ptr[j]:src_ptr[j+1]]``.

    Integer adds: exact and order-free.
    """
    for j in prange(dst_slot.shape[0]):
        d = hist[dst_slot[j]]
        for p in range(src_ptr[j], src_ptr[j + 1]):
            d += hist[src_slot[p]]


@njit(parallel=True, cache=True)
def subtract_histograms(hist, parent_slot, child_slot):
    """In place: ``hist[parent_slot[j]] -= hist[child_slot[j]]``; the parent's slot then
    holds the sibling's histogram (exact, integer cells)."""
    for j in prange(parent_slot.shape[0]):
        p = hist[parent_slot[j]]
        p -= hist[child_slot[j]]
