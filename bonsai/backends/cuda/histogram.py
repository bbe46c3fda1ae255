"""CUDA kernels of the histogram stage: zero a level's histogram slots and fill them
from their rows' integer gradient cells.

Layout as on the CPU (``bonsai.backends.cpu.histogram``): ``hist[slot, feat_off[f] +
bin, channel]`` int64, channels (grad, hess * 2**count_bits + count) for exact cells or
one packed cell.  The bins are row-major ``X (n, F)`` uint8/uint16 on the device.

A fill covers every part of a level in one launch: block row ``y`` of the grid takes
part ``y`` (striding over parts when there are more than the grid has rows), its
threads stride over the part's rows, and each row adds its cells into the part's slot
with global 64-bit integer atomics (native ``RED.64`` on sm_60+).  Integer adds
commute, so the histogram is bit-identical whatever order the atomics land in, and
equal to the CPU's.  The parts' ranges and slots are device arrays, written by the
plan kernel (``partition.plan_children``) without a host round trip: surplus blocks
of an over-sized grid find their rows empty and exit.
"""
import numpy as np
from numba import cuda

from ._device import THREADS, blocks_for

#: most parts one launch covers in its grid's y dimension (the rest by striding)
MAX_GRID_Y = 65535


@cuda.jit(cache=True)
def zero_slots(hist, p_slot):
    """``hist[p_slot[y]] = 0`` for every part ``y`` with a slot (>= 0)."""
    n_cells = hist.shape[1] * hist.shape[2]
    channels = hist.shape[2]
    part = cuda.blockIdx.y
    while part < p_slot.shape[0]:
        s = p_slot[part]
        if s >= 0:
            j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            while j < n_cells:
                hist[s, j // channels, j % channels] = 0
                j += cuda.gridDim.x * cuda.blockDim.x
        part += cuda.gridDim.y


@cuda.jit(cache=True)
def fill_histograms(X, feat_off, gh, idx, identity, p_start, p_stop, p_slot, hist):
    """Add every row ``idx[p_start[y]:p_stop[y]]`` (``identity``: the row is its
    position) of each part ``y`` with a slot into ``hist[p_slot[y]]``.

    X (n, F) uint8/uint16 ; feat_off (F + 1,) int64 ; gh (n, C) int64 ;
    idx (>= n_sampled,) uint32 ; identity int ; p_start, p_stop, p_slot (m,) int64 ;
    hist (slots, n_bins_total, C) int64, IN/OUT (the slots zeroed by ``zero_slots``)."""
    n_features = X.shape[1]
    channels = hist.shape[2]
    step = cuda.gridDim.x * cuda.blockDim.x
    part = cuda.blockIdx.y
    while part < p_slot.shape[0]:
        s = p_slot[part]
        if s >= 0:
            i = p_start[part] + cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            stop = p_stop[part]
            while i < stop:
                r = i if identity != 0 else np.int64(idx[i])
                g = gh[r, 0]
                if channels == 2:
                    h = gh[r, 1]
                    for f in range(n_features):
                        cell = feat_off[f] + np.int64(X[r, f])
                        cuda.atomic.add(hist, (s, cell, 0), g)
                        cuda.atomic.add(hist, (s, cell, 1), h)
                else:
                    for f in range(n_features):
                        cuda.atomic.add(hist, (s, feat_off[f] + np.int64(X[r, f]), 0), g)
                i += step
        part += cuda.gridDim.y


def build(X, feat_off, gh, idx, identity, p_start, p_stop, p_slot, n_parts, max_rows, hist):
    """Zero and fill the histograms of ``n_parts`` parts (device arrays as
    ``fill_histograms``) whose largest holds at most ``max_rows`` rows: two launches,
    no host wait."""
    if n_parts == 0:
        return
    gy = min(int(n_parts), MAX_GRID_Y)
    n_cells = hist.shape[1] * hist.shape[2]
    zero_slots[(blocks_for(n_cells), gy), THREADS](hist, p_slot)
    fill_histograms[(blocks_for(max_rows), gy), THREADS](
        X, feat_off, gh, idx, np.int64(1 if identity else 0), p_start, p_stop, p_slot, hist)
