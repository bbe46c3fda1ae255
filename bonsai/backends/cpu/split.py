"""CPU kernels of the split-finding stage: the best split of each node.

The gain and the cell decode are ``_gain``'s (the formulas are in its docstring);
this module owns the numeric scan of a node's features, which calls ``_gain``'s
category-set search for its categorical features.  ``leaf_weights`` and ``NEG_INF``
are re-exported from ``_gain`` for the grow loop and the split step.

Sums come from exact integer histogram cells divided by the tree's fixed-point
scales, and each node is scanned serially, so gains are bit-identical at any thread
count.  Ties break deterministically: highest gain, then lowest feature, then
lowest bin, then missing values to the right before to the left.

Compile time: the scalar helpers (``_gain.decode``, ``split_gain``, ``leaf_score``, ...)
are compiled once each with ``forceinline=True``, which has LLVM inline them
wherever they are called; only the per-feature passes (``_prefix``, ``_gains``) are
inlined by numba (``inline="always"``), which copies and re-types a callee at every
call site.  With every helper inlined by numba the node scan compiled in 4.2-5.2 s;
like this in 2.3-2.5 s, at the same speed (synthetic 2-node scans, 28 x 255 bins:
34-35 us, 2000 x 2 bins: 430-437 us; with ``reg_alpha`` 110 against 114 us).  Left to
LLVM's own judgement the helpers were not inlined in the loops that call them per
candidate: the ``reg_alpha`` scan took 650 us and oblivious levels 4x as long.
"""
import numpy as np
from numba import njit, prange

from ._gain import (LOW32, NEG_INF, bin_sums, cell_format, decode, leaf_score,
                    leaf_weights, node_totals, plain_gain, scan_categorical, split_gain)
from ._jit import parallel_kernel

__all__ = ["NEG_INF", "leaf_weights", "find_best_splits", "max_value_bins", "range_sums",
           "split_work"]


@njit(cache=True, nogil=True)
def range_sums(hist, slots, lo, hi, extra, scales, cnt_factor, out):
    """(grad, hess, count) sums of bins ``lo..hi-1`` (plus bin ``extra`` when
    ``extra >= 0``) of each slot.  cnt_factor : (m,) float64 rows per hessian unit
    (packed mode).  out (m, 3) int64."""
    for i in range(slots.shape[0]):
        bin_sums(hist[slots[i]], lo, hi, extra, None, scales, cnt_factor[i], out[i])


@njit(cache=True, nogil=True, inline="always")
def _prefix(H, S, sub, packed, ea, ec):
    """Prefix sums of a feature's value bins ``H (nv, C)``: ``ea[b], ec[b]`` are the
    left cell sums of threshold b.  With ``sub``, ``H -= S`` first, bin by bin (the
    sibling subtraction fused into this pass, while the bins are in registers).

    Inlined (as are the gain passes) into ``_best_split``, which both twins of
    ``find_best_splits`` share, so it compiles once (~9 s).  As separate functions
    the scan compiled in ~4.5 s and ran 23-25 instead of 27 us per captured 2-node
    call on 1M x 28, but the per-feature calls cost 25% of a fit on wide data
    (100k x 2000 binary features: 2.95 against 2.35 s).

    Every bin is a candidate, empty ones too: an empty bin b leaves the sums, so its
    candidates score exactly as at b - 1, which already won any tie.  Skipping them
    (a compacted list) cost more in this pass than it saved later (1M x 28 leaf-wise:
    37 against 32 us per 2-node call)."""
    la = np.int64(0)
    lc2 = np.int64(0)
    for b in range(H.shape[0]):
        c0 = H[b, 0]
        c1 = np.int64(0) if packed else H[b, 1]
        if sub:
            c0 -= S[b, 0]
            H[b, 0] = c0
            if not packed:
                c1 -= S[b, 1]
                H[b, 1] = c1
        la += c0
        lc2 += c1
        ea[b] = la
        ec[b] = lc2


@njit(cache=True, nogil=True, inline="always")
def _gains_plain(ea, ec, k, mg, mh, mc, tg, th, tc, packed, cbits, mask, cf, scales, cfg, mcs,
                 parent, out):
    """``out[j]`` = gain of sending threshold j's left sums plus ``(mg, mh, mc)`` left,
    with the ``plain`` score.  The same arithmetic as ``decode`` and ``split_gain``
    (a zero denominator scores 0, as in ``leaf_score``), written with selects
    instead of branches so that LLVM vectorises it (8 divisions per instruction with
    AVX-512); bit-identical, since each gain is computed alone in the same order."""
    s4 = scales.inv_grad
    s5 = scales.inv_hess
    lam = cfg.reg_lambda
    mcw = cfg.min_child_weight
    for j in range(k):
        a = ea[j]
        if packed:
            lh = a & LOW32
            lg = a >> np.int64(32)
            lc = np.int64(lh * cf + 0.5)
            lc = max(lc, np.int64(a != 0))
        else:
            lg = a
            lh = ec[j] >> cbits
            lc = ec[j] & mask
        cg = lg + mg
        ch = lh + mh
        cc = lc + mc
        hl = ch * s5
        hr = (th - ch) * s5
        gl = cg * s4
        gr = (tg - cg) * s4
        dl = hl + lam
        dr = hr + lam
        sl = gl * gl / dl if dl > 0.0 else 0.0
        sr = gr * gr / dr if dr > 0.0 else 0.0
        v = sl + sr - parent
        ok = (cc >= mcs) & (tc - cc >= mcs) & (hl >= mcw) & (hr >= mcw)
        out[j] = v if ok else NEG_INF


@njit(cache=True, nogil=True, inline="always")
def _gains(ea, ec, k, mg, mh, mc, tg, th, tc, packed, cbits, mask, cf, scales, cfg, mcs,
           parent, plain, out):
    """Gains of thresholds ``0..k-1`` with the decoded sums ``(mg, mh, mc)`` (the
    missing bin's, or zeros) also sent left.  A packed count is estimated per part,
    so the parts are decoded apart and then added."""
    if plain:
        _gains_plain(ea, ec, k, mg, mh, mc, tg, th, tc, packed, cbits, mask, cf, scales, cfg,
                     mcs, parent, out)
        return
    for j in range(k):
        lg, lh, lc = decode(ea[j], ec[j], packed, cbits, mask, cf)
        out[j] = split_gain(lg + mg, lh + mh, lc + mc, tg, th, tc, scales, cfg, mcs, parent,
                            plain)


@njit(cache=True, nogil=True, forceinline=True)
def _order_key(x):
    """A float64's bits ``x`` (int64) as an integer that orders as the float does:
    -nan < -inf < ... < -0.0 < +0.0 < ... < +inf < +nan."""
    return x ^ ((x >> np.int64(63)) & np.int64(0x7FFFFFFFFFFFFFFF))


_NEG_INF_KEY = int(_order_key.py_func(np.array([NEG_INF]).view(np.int64)[0]))


@njit(cache=True, nogil=True, inline="always")
def _max_key(k, n):
    """The largest ``_order_key`` of the gains ``k[:n]`` (their float64 bits): an
    integer max, which LLVM vectorises (a float max reduction it will not reorder
    without fast-math).  ``_best_split`` looks for a feature's first maximum only
    where this beats the best so far: a feature whose every gain is <= the best
    cannot change it, so the choice is the one the full search makes.  Node scans of
    lgb-binary's rows (28 features, ~6k bins, exact cells, one thread): 16.6-18.6 ->
    14.9-15.4 us."""
    m = np.int64(_NEG_INF_KEY)
    for j in range(n):
        m = max(m, _order_key(k[j]))
    return m


@njit(cache=True, nogil=True, forceinline=True)
def _first_max(g, n, best):
    """(value, index) of the first maximum of ``g[:n]`` above ``best``; index -1 when
    no value is above it (NaN never is)."""
    v = best
    at = -1
    for b in range(n):
        if g[b] > v:
            v = g[b]
            at = b
    return v, at


@njit(cache=True, nogil=True, forceinline=True)
def _count_range(ec, n, mask, add, mcs, tc):
    """(lo, hi): thresholds ``lo <= j < hi`` of ``0..n-1`` whose children both hold
    ``mcs`` rows, the left count being ``(ec[j] & mask) + add`` (hi <= lo: none).
    Exact prefix counts never decrease, so the range is found by walking in from
    both ends: as many steps as thresholds it removes."""
    lo = 0
    while lo < n and (ec[lo] & mask) + add < mcs:
        lo += 1
    hi = n
    while hi > lo and tc - ((ec[hi - 1] & mask) + add) < mcs:
        hi -= 1
    return lo, hi


@njit(cache=True, nogil=True)
def split_work(max_nv, words):
    """``_best_split``'s scratch for one node at a time: (work_i (2, max_nv + 2) int64,
    work_f (2, max_nv + 2) float64, cat_bits (words,) uint64, cat_lsum (3,) int64).
    A serial scan allocates it once for all its nodes (leaf-wise: once a tree); each
    node's scan allocating its own cost ~20 allocations a split on data with three
    categorical features."""
    return (np.empty((2, max_nv + 2), np.int64), np.empty((2, max_nv + 2)),
            np.empty(words, np.uint64), np.empty(3, np.int64))


@njit(cache=True, nogil=True)
def _best_split(hist, slot, sub_slot, n_rows, feat_off, n_value_bins, feature_mask, is_cat,
                cat_cfg, scales, cfg, min_child_samples, out_lsum, out_sums, out_bits, work):
    """One node of ``find_best_splits``: its prange body, as a function compiled once
    for the parallel kernel and its serial twin.  Returns (gain, feature, bin,
    default_left); writes the left sums ``out_lsum (3,)``, the node sums
    ``out_sums (3,)`` and, for a categorical split (bin -1), the left categories'
    bitset ``out_bits (W,)`` (zeros otherwise).  ``work``: ``split_work``'s scratch
    (overwritten)."""
    n_features = n_value_bins.shape[0]
    packed, cbits, mask = cell_format(scales)
    plain = plain_gain(cfg)
    work_i, work_f, bits, lsum = work
    ea = work_i[0]
    ec = work_i[1]
    g0 = work_f[0]
    g1 = work_f[1]
    H = hist[slot]
    sub = sub_slot >= 0
    S = hist[sub_slot] if sub else H
    if sub:
        # feature 0 (it gives the node sums), masked and categorical features and the
        # missing bins here; the scan subtracts the other value bins as it passes them
        for f in range(n_features):
            lo = feat_off[f]
            if f > 0 and feature_mask[f] != 0 and (is_cat is None or is_cat[f] == 0):
                lo += n_value_bins[f]
            for b in range(lo, feat_off[f + 1]):
                H[b, 0] -= S[b, 0]
                if not packed:
                    H[b, 1] -= S[b, 1]
    tot = out_sums
    node_totals(H, feat_off, scales, n_rows, tot)
    tg = tot[0]
    th = tot[1]
    tc = tot[2]
    cf = tc / th if (packed and th > 0) else 0.0
    parent = leaf_score(tg / scales.grad, th / scales.hess, cfg.reg_lambda, cfg.reg_alpha,
                        cfg.max_delta_step)
    best = NEG_INF
    best_key = _NEG_INF_KEY
    k0 = g0.view(np.int64)
    k1 = g1.view(np.int64)
    bf = -1
    bb = -1
    bdl = 0
    blg = np.int64(0)
    blh = np.int64(0)
    blc = np.int64(0)
    for f in range(n_features):
        if feature_mask[f] == 0 or (is_cat is not None and is_cat[f] != 0):
            continue
        nv = n_value_bins[f]
        base = feat_off[f]
        ma = H[base + nv, 0]
        mc2 = np.int64(0) if packed else H[base + nv, 1]
        mg, mh, mc = decode(ma, mc2, packed, cbits, mask, cf)
        _prefix(H[base:base + nv], S[base:base + nv], sub and f > 0, packed, ea, ec)
        # candidates: threshold nv - 1 sends every value left, a split only with
        # missing values sent right; with exact counts, only the thresholds whose
        # children both hold min_child_samples rows (every other gain is -inf)
        hi0 = nv - 1 if mc == 0 else nv
        hi1 = nv - 1
        lo0 = 0
        lo1 = 0
        if not packed:
            lo0, hi0 = _count_range(ec, hi0, mask, 0, min_child_samples, tc)
            if mc != 0:
                lo1, hi1 = _count_range(ec, hi1, mask, mc, min_child_samples, tc)
        n0 = hi0 - lo0
        if mc == 0:
            # (one loop for both cases, testing mc != 0 per bin, made the scan 6%
            # slower: 25 against 23.4 us per captured call)
            if n0 > 0:
                _gains(ea[lo0:], ec[lo0:], n0, 0, 0, 0, tg, th, tc, packed, cbits, mask, cf,
                       scales, cfg, min_child_samples, parent, plain, g0)
                if _max_key(k0, n0) > best_key:
                    v0, b0 = _first_max(g0, n0, best)
                    if b0 >= 0:
                        best, bf, bb, bdl, best_key = v0, f, b0 + lo0, 0, _order_key(k0[b0])
            if bf == f:
                blg, blh, blc = decode(ea[bb], ec[bb], packed, cbits, mask, cf)
            continue
        n1 = hi1 - lo1
        m0 = np.int64(_NEG_INF_KEY)
        m1 = np.int64(_NEG_INF_KEY)
        if n0 > 0:
            _gains(ea[lo0:], ec[lo0:], n0, 0, 0, 0, tg, th, tc, packed, cbits, mask, cf,
                   scales, cfg, min_child_samples, parent, plain, g0)
            m0 = _max_key(k0, n0)
        if n1 > 0:
            _gains(ea[lo1:], ec[lo1:], n1, mg, mh, mc, tg, th, tc, packed, cbits, mask, cf,
                   scales, cfg, min_child_samples, parent, plain, g1)
            m1 = _max_key(k1, n1)
        if max(m0, m1) > best_key:
            # the first maximum in (bin, missing right before left) order: each pass's
            # first maximum, the higher gain, on a tie the lower bin, on the same bin
            # missing right
            v0, b0 = _first_max(g0, max(n0, 0), best)
            v1, b1 = _first_max(g1, max(n1, 0), best)
            if b1 >= 0 and (b0 < 0 or v1 > v0 or (v1 == v0 and b1 + lo1 < b0 + lo0)):
                best, bf, bb, bdl, best_key = v1, f, b1 + lo1, 1, _order_key(k1[b1])
            elif b0 >= 0:
                best, bf, bb, bdl, best_key = v0, f, b0 + lo0, 0, _order_key(k0[b0])
        if bf == f:
            blg, blh, blc = decode(ea[bb], ec[bb], packed, cbits, mask, cf)
            if bdl:
                blg += mg
                blh += mh
                blc += mc
    # categorical features after the numeric ones (a separate loop: the branch inside
    # the numeric loop made every scan ~8% slower); a numeric split wins ties.  With
    # ``is_cat`` None (no categorical feature) numba prunes this loop when it compiles,
    # so a numeric fit never compiles ``scan_categorical``.
    out_bits[:] = 0
    if is_cat is not None:
        for f in range(n_features):
            if feature_mask[f] == 0 or is_cat[f] == 0:
                continue
            # the numeric scan is done: its buffers hold the category search's
            cg = scan_categorical(hist, slot, feat_off[f], n_value_bins[f], tot, cf, scales,
                                  cfg, cat_cfg, min_child_samples, bits, lsum, work_i, work_f)
            if cg > best:
                best = cg
                bf = f
                bb = -1
                bdl = 0
                blg, blh, blc = lsum[0], lsum[1], lsum[2]
                for w in range(bits.shape[0]):
                    out_bits[w] = bits[w]
    out_lsum[0] = blg
    out_lsum[1] = blh
    out_lsum[2] = blc
    return (best if (bf >= 0 and best > cfg.min_split_gain) else NEG_INF), bf, bb, bdl


@njit(cache=True, nogil=True)
def max_value_bins(n_value_bins):
    """The most value bins of any feature (at least 1): ``_best_split``'s buffers."""
    max_nv = np.int64(1)   # int64, not a literal: one compiled _best_split for every caller
    for f in range(n_value_bins.shape[0]):
        max_nv = max(max_nv, n_value_bins[f])
    return max_nv


@parallel_kernel
def find_best_splits(hist, slots, sub_slots, node_rows, feat_off, n_value_bins, feature_mask,
                     is_cat, cat_cfg, scales, cfg, min_child_samples, out_gain, out_feature,
                     out_bin, out_default_left, out_left_sums, out_node_sums, out_bits):
    """Best split of each node.

    Each feature is scanned in passes over its bins: prefix sums (``_prefix``, with
    the sibling subtraction fused in), every candidate's gain (``_gains``,
    vectorised), the largest gain (``_max_key``, vectorised), and only where that
    beats the best so far, the first maximum in (bin, missing right before left)
    order.  Measured on captured 2-node leaf-wise calls (1M x 28, 255 bins):
    53 -> 32 us, and 82 -> 40 us with 40% missing values, against one fused scalar
    loop with two divisions per candidate.  With exact cells the gain passes run
    only over the thresholds whose children both hold ``min_child_samples`` rows
    (``_count_range``: the prefix counts never decrease, so walking in from both
    ends finds that range; every other gain is -inf).  Interleaved in-process fits of
    ``bench_small`` entries, 300 rounds, 2 threads, medians: reg-nan91 0.95 -> 0.86 s,
    lgb-binary 0.61 -> 0.56 s, reg-mixed41 0.72 -> 0.66 s, the same model bytes (with
    a binary search for the range); walking in, against that search, on a slower
    hour: lgb-binary 0.63 -> 0.62 s, reg-mixed41 0.76 -> 0.69 s, bin-cat5 1.37 ->
    1.27 s (every node pays the search; the walk costs what it removes).  A dense
    300k x 28 leaf-wise fit (255 leaves, 50 rounds) was unchanged: 1.69 / 1.68 /
    1.67 s before / search / walk.

    Parameters
    ----------
    hist : (n_slots, n_bins_total, C) int64, IN -- C = 2 exact cells, 1 packed
    slots : (m,) int64, IN/OUT -- the node's histogram slot
    sub_slots : (m,) int64, IN -- >= 0: first ``hist[slots[i]] -= hist[sub_slots[i]]``
        (sibling subtraction fused into the scan: the slot is then in cache; measured
        on multiclass 200k x 50, the separate pass cost 10% of a fit)
    node_rows : (m,) int64, IN -- rows in each node
    feat_off : (F + 1,) int64, IN
    n_value_bins : (F,) int64, IN -- non-missing bins; the missing bin follows them
    feature_mask : (m, F) uint8, IN -- 1 where the feature may be used at that node
    is_cat : (F,) uint8, IN -- categorical features (``_gain.scan_categorical``), or
        None when there are none (the categorical scan is then not compiled)
    cat_cfg : CatSettings -- their split settings (``bonsai.split_settings``)
    scales : Scales -- the tree's cell scales (``quantize``)
    cfg : SplitSettings -- regularisation and split constraints
    min_child_samples : int
    out_gain : (m,) float64, OUT -- -inf where no valid split
    out_feature, out_bin : (m,) int64, OUT
    out_default_left : (m,) uint8, OUT -- missing values go left
    out_left_sums, out_node_sums : (m, 3) int64, OUT
    out_bits : (m, W) uint64, OUT -- a categorical split's left categories (bin -1)
    """
    max_nv = max_value_bins(n_value_bins)
    words = out_bits.shape[1]
    for i in prange(slots.shape[0]):
        g, f, b, dl = _best_split(hist, slots[i], sub_slots[i], node_rows[i], feat_off,
                                  n_value_bins, feature_mask[i], is_cat, cat_cfg, scales, cfg,
                                  min_child_samples, out_left_sums[i], out_node_sums[i],
                                  out_bits[i], split_work(max_nv, words))
        out_gain[i] = g
        out_feature[i] = f
        out_bin[i] = b
        out_default_left[i] = dl

