"""CUDA kernels of the histogram stage: zero a level's histogram slots, fill them from
their rows' integer gradient cells, and restore each feature's skipped bin.

Layout as on the CPU (``bonsai.backends.cpu.histogram``): ``hist[slot, feat_off[f] +
bin, channel]`` int64, channels (grad, hess * 2**count_bits + count) for exact cells or
one packed cell.  The bins are row-major ``X (n, F)`` uint8/uint16 on the device.

One ``build`` covers every part of a level (the smaller children; their ranges and
slots are device arrays written by ``partition.plan_children``, so nothing waits for
the host; surplus blocks of a grid sized for the upper bound find no rows and exit):

* **Shared-memory tiles** (``fill_tiles_exact`` / ``fill_tiles_packed``) for parts of
  at least ``SMALL_ROWS`` rows: grid (row blocks, feature tiles, parts); a block adds
  its rows' cells of one tile of whole features (at most ``TILE_EXACT`` /
  ``TILE_PACKED`` cells, within the 48 KB a block may hold) into shared memory, then
  adds the tile into the global slot (native 64-bit ``RED``).  Packed quantized cells
  go in two int32 planes (grad, hess levels: native 32-bit shared atomics; a part's
  levels sum below 2**31, the bound ``quantize`` keeps); exact cells need 64 bits and
  go in int64 shared cells (compare-and-swap loops on sm_90: slower, still exact).
* **Direct global atomics** (``fill_direct``) for smaller parts, where zeroing and
  flushing a tile costs more than the rows' own adds; and for every part of a fit
  whose widest feature does not fit a tile (``tiles`` returns None).
* **The most frequent bin of each feature is skipped** (``default_bin``, the whole
  data's): a dominant bin (missing values, zeros, a common category) would make
  every row add into one cell.  The kernels also sum each part's cells (``totals``),
  and ``restore_default`` sets the skipped cell to the total minus the feature's
  other bins.

Every cell is an integer sum, so the histogram is bit-identical whatever order the
atomics land in, and equal to the CPU's.
"""
import numpy as np
from numba import cuda

from ._device import SIM, THREADS, blocks_for

#: most parts one launch covers in its grid's y / z dimension (the rest by striding)
MAX_GRID_Y = 65535
#: parts with fewer rows are filled with direct global atomics (not measured on a GPU
#: yet: the ancestor's CUDA engine switched at 512 rows; the simulator test lowers it
#: so that both paths run)
SMALL_ROWS = 16 if SIM else 512
#: cells of one shared-memory tile: exact cells 2 x int64 (16 B), packed 2 x int32 (8 B)
#: in 48 KB; the simulator's tiles are small so that a test's features span several
TILE_EXACT = 48 if SIM else 3072
TILE_PACKED = 48 if SIM else 6144
#: the tiles' shared-array shapes, as module constants (numba-cuda types a shape only
#: from a literal or a module-level constant, not from a tuple built in the kernel)
TILE_EXACT_SHAPE = (TILE_EXACT, 2)
TILE_PACKED_SHAPE = (2, TILE_PACKED)
#: rows one tile block takes before striding (the grid's x dimension is sized by it)
TILE_ROWS = 64 if SIM else 4096


def tiles(feat_off, packed):
    """Host side: the feature tiles ``(tile_f0, tile_f1)`` int64, runs of whole
    features of at most ``TILE_PACKED`` / ``TILE_EXACT`` cells; None when one feature
    alone has more bins (the fit then fills every part with global atomics)."""
    cap = TILE_PACKED if packed else TILE_EXACT
    width = np.diff(feat_off)
    if width.size and int(width.max()) > cap:
        return None
    f0, f1 = [], []
    start, used = 0, 0
    for f, w in enumerate(width.tolist()):
        if used + w > cap:
            f0.append(start)
            f1.append(f)
            start, used = f, 0
        used += w
    f0.append(start)
    f1.append(width.size)
    return np.array(f0, np.int64), np.array(f1, np.int64)


@cuda.jit(cache=True)
def zero_slots(hist, p_slot, totals):
    """``hist[p_slot[y]] = 0`` and ``totals[y] = 0`` for every part ``y`` with a slot."""
    n_cells = hist.shape[1] * hist.shape[2]
    channels = hist.shape[2]
    part = cuda.blockIdx.y
    while part < p_slot.shape[0]:
        s = p_slot[part]
        if s >= 0:
            j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            if j < channels:
                totals[part, j] = 0
            while j < n_cells:
                hist[s, j // channels, j % channels] = 0
                j += cuda.gridDim.x * cuda.blockDim.x
        part += cuda.gridDim.y


@cuda.jit(cache=True)
def fill_direct(X, feat_off, default_bin, gh, idx, identity, p_start, p_stop, p_slot,
                small_rows, hist, totals):
    """Parts of fewer than ``small_rows`` rows (all parts when ``small_rows`` is huge):
    each row adds its cells but the default bins' into ``hist[p_slot[y]]`` with global
    atomics, and its cells into ``totals[y]``.

    X (n, F) uint8/uint16 ; feat_off (F + 1,) ; default_bin (F,) int64 ; gh (n, C) int64 ;
    idx (>= n_sampled,) uint32 ; identity int ; p_start, p_stop, p_slot (m,) int64 ;
    hist (slots, n_bins_total, C) int64 and totals (m, C) int64, IN/OUT (zeroed)."""
    n_features = X.shape[1]
    channels = hist.shape[2]
    step = cuda.gridDim.x * cuda.blockDim.x
    part = cuda.blockIdx.y
    while part < p_slot.shape[0]:
        s = p_slot[part]
        if s >= 0 and p_stop[part] - p_start[part] < small_rows:
            i = p_start[part] + cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            stop = p_stop[part]
            tg = np.int64(0)
            th = np.int64(0)
            while i < stop:
                r = i if identity != 0 else np.int64(idx[i])
                g = gh[r, 0]
                h = gh[r, 1] if channels == 2 else np.int64(0)
                tg += g
                th += h
                for f in range(n_features):
                    b = np.int64(X[r, f])
                    if b != default_bin[f]:
                        cuda.atomic.add(hist, (s, feat_off[f] + b, 0), g)
                        if channels == 2:
                            cuda.atomic.add(hist, (s, feat_off[f] + b, 1), h)
                i += step
            if tg != 0:
                cuda.atomic.add(totals, (part, 0), tg)
            if channels == 2 and th != 0:
                cuda.atomic.add(totals, (part, 1), th)
        part += cuda.gridDim.y


@cuda.jit(cache=True)
def fill_tiles_exact(X, feat_off, default_bin, gh, idx, identity, p_start, p_stop, p_slot,
                     small_rows, tile_f0, tile_f1, hist, totals):
    """Exact (n, 2) cells, parts of at least ``small_rows`` rows: block (x, y, z) adds
    its rows of part z into the shared cells of feature tile y, then the tile into
    ``hist``; tile 0's blocks also sum the rows into ``totals`` (arguments as
    ``fill_direct``; ``tile_f0``, ``tile_f1`` the tiles' feature ranges)."""
    tile = cuda.shared.array(TILE_EXACT_SHAPE, np.int64)
    t = cuda.threadIdx.x
    f0 = tile_f0[cuda.blockIdx.y]
    f1 = tile_f1[cuda.blockIdx.y]
    base = feat_off[f0]
    n_cells = feat_off[f1] - base
    part = cuda.blockIdx.z
    while part < p_slot.shape[0]:
        s = p_slot[part]
        a = p_start[part]
        stop = p_stop[part]
        if s >= 0 and stop - a >= small_rows:          # the same for the whole block
            for j in range(t, n_cells, cuda.blockDim.x):
                tile[j, 0] = 0
                tile[j, 1] = 0
            cuda.syncthreads()
            tg = np.int64(0)
            th = np.int64(0)
            i = a + cuda.blockIdx.x * cuda.blockDim.x + t
            while i < stop:
                r = i if identity != 0 else np.int64(idx[i])
                g = gh[r, 0]
                h = gh[r, 1]
                tg += g
                th += h
                for f in range(f0, f1):
                    b = np.int64(X[r, f])
                    if b != default_bin[f]:
                        j = feat_off[f] - base + b
                        cuda.atomic.add(tile, (j, 0), g)
                        cuda.atomic.add(tile, (j, 1), h)
                i += cuda.gridDim.x * cuda.blockDim.x
            if cuda.blockIdx.y == 0:
                if tg != 0:
                    cuda.atomic.add(totals, (part, 0), tg)
                if th != 0:
                    cuda.atomic.add(totals, (part, 1), th)
            cuda.syncthreads()
            for j in range(t, n_cells, cuda.blockDim.x):
                if tile[j, 0] != 0:
                    cuda.atomic.add(hist, (s, base + j, 0), tile[j, 0])
                if tile[j, 1] != 0:
                    cuda.atomic.add(hist, (s, base + j, 1), tile[j, 1])
            cuda.syncthreads()
        part += cuda.gridDim.z


@cuda.jit(cache=True)
def fill_tiles_packed(X, feat_off, default_bin, gh, idx, identity, p_start, p_stop, p_slot,
                      small_rows, tile_f0, tile_f1, hist, totals):
    """``fill_tiles_exact`` for packed quantized (n, 1) cells ``g * 2**32 + h``: the
    grad and hess levels in two int32 planes (native shared atomics), added into the
    slot packed again."""
    tile = cuda.shared.array(TILE_PACKED_SHAPE, np.int32)
    t = cuda.threadIdx.x
    low = np.int64(0xFFFFFFFF)
    f0 = tile_f0[cuda.blockIdx.y]
    f1 = tile_f1[cuda.blockIdx.y]
    base = feat_off[f0]
    n_cells = feat_off[f1] - base
    part = cuda.blockIdx.z
    while part < p_slot.shape[0]:
        s = p_slot[part]
        a = p_start[part]
        stop = p_stop[part]
        if s >= 0 and stop - a >= small_rows:          # the same for the whole block
            for j in range(t, n_cells, cuda.blockDim.x):
                tile[0, j] = 0
                tile[1, j] = 0
            cuda.syncthreads()
            tv = np.int64(0)
            i = a + cuda.blockIdx.x * cuda.blockDim.x + t
            while i < stop:
                r = i if identity != 0 else np.int64(idx[i])
                v = gh[r, 0]
                tv += v
                g = np.int32(v >> np.int64(32))
                h = np.int32(v & low)
                for f in range(f0, f1):
                    b = np.int64(X[r, f])
                    if b != default_bin[f]:
                        j = feat_off[f] - base + b
                        cuda.atomic.add(tile, (0, j), g)
                        cuda.atomic.add(tile, (1, j), h)
                i += cuda.gridDim.x * cuda.blockDim.x
            if cuda.blockIdx.y == 0 and tv != 0:
                cuda.atomic.add(totals, (part, 0), tv)
            cuda.syncthreads()
            for j in range(t, n_cells, cuda.blockDim.x):
                if tile[0, j] != 0 or tile[1, j] != 0:
                    cuda.atomic.add(hist, (s, base + j, 0),
                                    (np.int64(tile[0, j]) << np.int64(32)) + np.int64(tile[1, j]))
            cuda.syncthreads()
        part += cuda.gridDim.z


@cuda.jit(cache=True)
def restore_default(hist, feat_off, default_bin, p_slot, totals):
    """Per (part, feature): the skipped default bin's cell = the part's total minus
    the feature's other bins (exact: integers)."""
    n_features = default_bin.shape[0]
    channels = hist.shape[2]
    j = cuda.grid(1)
    while j < p_slot.shape[0] * n_features:
        part = j // n_features
        f = j - part * n_features
        s = p_slot[part]
        if s >= 0:
            d = feat_off[f] + default_bin[f]
            for c in range(channels):
                rest = np.int64(0)
                for b in range(feat_off[f], feat_off[f + 1]):
                    if b != d:
                        rest += hist[s, b, c]
                hist[s, d, c] = totals[part, c] - rest
        j += cuda.gridsize(1)


def build(X, feat_off, default_bin, tile_f, gh, idx, identity, p_start, p_stop, p_slot,
          n_parts, max_rows, hist, totals):
    """Zero and fill the histograms of ``n_parts`` parts (device arrays as
    ``fill_direct``; ``tile_f``: the device (tile_f0, tile_f1) of ``tiles``, or None),
    whose largest holds at most ``max_rows`` rows, into ``hist``; ``totals (>= n_parts,
    C)`` int64 is scratch.  Four launches, no host wait."""
    if n_parts == 0:
        return
    gy = min(int(n_parts), MAX_GRID_Y)
    n_cells = hist.shape[1] * hist.shape[2]
    ident = np.int64(1 if identity else 0)
    zero_slots[(blocks_for(n_cells), gy), THREADS](hist, p_slot, totals)
    small = np.int64(SMALL_ROWS if tile_f is not None else 1 << 62)
    fill_direct[(blocks_for(min(max_rows, SMALL_ROWS) if tile_f is not None else max_rows),
                 gy), THREADS](X, feat_off, default_bin, gh, idx, ident, p_start, p_stop,
                               p_slot, small, hist, totals)
    if tile_f is not None and max_rows >= SMALL_ROWS:
        tile_f0, tile_f1 = tile_f
        grid = (blocks_for(max_rows, TILE_ROWS), tile_f0.shape[0], gy)
        kernel = fill_tiles_packed if hist.shape[2] == 1 else fill_tiles_exact
        kernel[grid, THREADS](X, feat_off, default_bin, gh, idx, ident, p_start, p_stop,
                              p_slot, small, tile_f0, tile_f1, hist, totals)
    restore_default[blocks_for(int(n_parts) * default_bin.shape[0]), THREADS](
        hist, feat_off, default_bin, p_slot, totals)
