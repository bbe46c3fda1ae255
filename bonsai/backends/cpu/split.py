"""CPU kernels of the split-finding stage.

The gain is XGBoost's (Eq. 7 of the XGBoost paper, without the 1/2 factor, as both
XGBoost and LightGBM compare it against ``min_split_gain``)::

    gain = score(G_L, H_L) + score(G_R, H_R) - score(G, H)
    score(G, H) = T(G)^2 / (H + lambda)            (no max_delta_step)
                = -(2 T(G) w + (H + lambda) w^2)    (w clipped to +-max_delta_step)
    T(G) = sign(G) max(|G| - alpha, 0)

Sums come from exact integer histogram cells divided by the tree's fixed-point
scales, and each node is scanned serially, so gains are bit-identical at any thread
count.  Ties break deterministically: highest gain, then lowest feature, then
lowest bin, then missing values to the right before to the left.

Compile time: the scalar helpers (``_decode``, ``_split_gain``, ``leaf_score``, ...)
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

from ._jit import parallel_kernel

NEG_INF = -np.inf


@njit(cache=True, forceinline=True)
def _threshold_l1(g, alpha):
    if g > alpha:
        return g - alpha
    if g < -alpha:
        return g + alpha
    return 0.0


@njit(cache=True, forceinline=True)
def leaf_weight(g, h, reg_lambda, reg_alpha, max_delta_step):
    """Optimal leaf weight ``-T(G) / (H + lambda)``, clipped to ``max_delta_step``."""
    den = h + reg_lambda
    if den <= 0.0:
        return 0.0
    w = -_threshold_l1(g, reg_alpha) / den
    if max_delta_step > 0.0:
        if w > max_delta_step:
            w = max_delta_step
        elif w < -max_delta_step:
            w = -max_delta_step
    return w


@njit(cache=True)
def leaf_weights(g, h, reg_lambda, reg_alpha, max_delta_step, out):
    """``out[i] = leaf_weight(g[i], h[i], ...)`` over float64 arrays (the grower's
    finished nodes: one call per tree instead of one per node)."""
    for i in range(g.shape[0]):
        out[i] = leaf_weight(g[i], h[i], reg_lambda, reg_alpha, max_delta_step)


@njit(cache=True, forceinline=True)
def leaf_score(g, h, reg_lambda, reg_alpha, max_delta_step):
    den = h + reg_lambda
    if den <= 0.0:
        return 0.0
    gt = _threshold_l1(g, reg_alpha)
    if max_delta_step <= 0.0:
        return gt * gt / den
    w = leaf_weight(g, h, reg_lambda, reg_alpha, max_delta_step)
    return -(2.0 * gt * w + den * w * w)


_M32 = np.int64(0xFFFFFFFF)


@njit(cache=True, forceinline=True)
def _decode(a, c2, packed, cbits, mask, cnt_factor):
    """(grad, hess, count) of a cell sum.

    Exact mode: ``a`` is the grad sum and ``c2 = hess * 2**cbits + count``.  Packed
    quantized mode: ``a = grad * 2**32 + hess`` and the count is estimated from the
    hessian with the node's rows-per-hessian ``cnt_factor`` (a non-empty sum counts
    at least 1).
    """
    if packed:
        h = a & _M32
        g = a >> np.int64(32)
        c = np.int64(h * cnt_factor + 0.5)
        if c == 0 and a != 0:
            c = np.int64(1)
        return g, h, c
    return a, c2 >> cbits, c2 & mask


@njit(cache=True, forceinline=True)
def _candidate_gain(cg, ch, tg, th, scales, cfg, parent, plain):
    """``_split_gain`` for a candidate whose children already meet
    ``min_child_samples``.  Without ``max_delta_step`` and ``reg_alpha`` (``plain``)
    the score is ``G^2 / (H + lambda)`` with no sign branches (``T(G) = G``): the
    same value bit for bit, and a 2-node leaf-wise scan took 50 instead of 66 us
    (1M x 28, 255 bins; the branches of ``T`` on the sign of G mispredict).  One
    common denominator instead of two divisions was slower (54 us).

    ``scales = [sg, sh, count_bits, packed, 1/sg, 1/sh]``: sums are multiplied by the
    reciprocals (a division costs several times more).  Exact-mode scales are powers
    of two, so that is ``x / s`` bit for bit; in packed mode it is one fixed rounding.
    (A branch between the two forms here made leaf-wise split finding twice slower.)"""
    hl = ch * scales[5]
    hr = (th - ch) * scales[5]
    if hl < cfg[3] or hr < cfg[3]:
        return NEG_INF
    gl = cg * scales[4]
    gr = (tg - cg) * scales[4]
    if plain:
        dl = hl + cfg[0]
        dr = hr + cfg[0]
        if dl > 0.0 and dr > 0.0:
            return gl * gl / dl + gr * gr / dr - parent
    return (leaf_score(gl, hl, cfg[0], cfg[1], cfg[2])
            + leaf_score(gr, hr, cfg[0], cfg[1], cfg[2]) - parent)


@njit(cache=True, forceinline=True)
def _split_gain(cg, ch, cc, tg, th, tc, scales, cfg, min_child_samples, parent, plain):
    """Gain of sending (cg, ch, cc) left out of the node total (tg, th, tc), or -inf
    when a child breaks ``min_child_samples`` / ``min_child_weight``."""
    if cc < min_child_samples or tc - cc < min_child_samples:
        return NEG_INF
    return _candidate_gain(cg, ch, tg, th, scales, cfg, parent, plain)


@njit(cache=True)
def _node_sums(H, feat_off, cbits, packed, n_rows, out):
    a = np.int64(0)
    c2 = np.int64(0)
    for b in range(feat_off[0], feat_off[1]):
        a += H[b, 0]
        if not packed:
            c2 += H[b, 1]
    g, h, c = _decode(a, c2, packed, cbits, (np.int64(1) << cbits) - 1, 0.0)
    out[0] = g
    out[1] = h
    out[2] = n_rows if packed else c


@parallel_kernel
def node_sums(hist, slots, feat_off, cbits, packed, node_rows, out):
    """Totals (grad, hess, count) of each node, read off feature 0's bins (every
    feature's bins, missing bin included, sum to the node total).  out (m, 3) int64;
    in packed mode the count is the node's exact row count ``node_rows``."""
    for i in prange(slots.shape[0]):
        _node_sums(hist[slots[i]], feat_off, cbits, packed, node_rows[i], out[i])


@njit(cache=True)
def range_sums(hist, slots, lo, hi, extra, cbits, packed, cnt_factor, out):
    """(grad, hess, count) sums of bins ``lo..hi-1`` (plus bin ``extra`` when
    ``extra >= 0``) of each slot.  cnt_factor : (m,) float64 rows per hessian unit
    (packed mode).  out (m, 3) int64."""
    mask = (np.int64(1) << cbits) - 1
    for i in range(slots.shape[0]):
        H = hist[slots[i]]
        a = np.int64(0)
        c2 = np.int64(0)
        for b in range(lo, hi):
            a += H[b, 0]
            if not packed:
                c2 += H[b, 1]
        if extra >= 0:
            a += H[extra, 0]
            if not packed:
                c2 += H[extra, 1]
        g, h, c = _decode(a, c2, packed, cbits, mask, cnt_factor[i])
        out[i, 0] = g
        out[i, 1] = h
        out[i, 2] = c


@njit(cache=True, forceinline=True)
def scan_params(scales, cfg):
    """(grad scale, hess scale, count_bits, packed, count mask, reg_lambda, reg_alpha,
    max_delta_step, plain gain) of a scan's ``scales`` and ``cfg``."""
    cbits = np.int64(scales[2])
    alpha = cfg[1]
    mds = cfg[2]
    return (scales[0], scales[1], cbits, scales[3] != 0.0, (np.int64(1) << cbits) - 1,
            cfg[0], alpha, mds, mds <= 0.0 and alpha == 0.0)


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def _gains_plain(ea, ec, k, mg, mh, mc, tg, th, tc, packed, cbits, mask, cf, scales, cfg, mcs,
                 parent, out):
    """``out[j]`` = gain of sending threshold j's left sums plus ``(mg, mh, mc)`` left,
    with the ``plain`` score.  The same arithmetic as ``_decode`` and ``_split_gain``
    (a zero denominator scores 0, as in ``leaf_score``), written with selects
    instead of branches so that LLVM vectorises it (8 divisions per instruction with
    AVX-512); bit-identical, since each gain is computed alone in the same order."""
    s4 = scales[4]
    s5 = scales[5]
    lam = cfg[0]
    mcw = cfg[3]
    for j in range(k):
        a = ea[j]
        if packed:
            lh = a & _M32
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


@njit(cache=True, inline="always")
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
        lg, lh, lc = _decode(ea[j], ec[j], packed, cbits, mask, cf)
        out[j] = _split_gain(lg + mg, lh + mh, lc + mc, tg, th, tc, scales, cfg, mcs, parent,
                             plain)


@njit(cache=True)
def _best_split(hist, slot, sub_slot, n_rows, feat_off, n_value_bins, feature_mask, is_cat,
                cat_cfg, scales, cfg, min_child_samples, max_nv, out_lsum, out_sums, out_bits):
    """One node of ``find_best_splits``: its prange body, as a function compiled once
    for the parallel kernel and its serial twin.  Returns (gain, feature, bin,
    default_left); writes the left sums ``out_lsum (3,)``, the node sums
    ``out_sums (3,)`` and, for a categorical split (bin -1), the left categories'
    bitset ``out_bits (W,)`` (zeros otherwise)."""
    n_features = n_value_bins.shape[0]
    sg, sh, cbits, packed, mask, lam, alpha, mds, plain = scan_params(scales, cfg)
    ea = np.empty(max_nv, np.int64)
    ec = np.empty(max_nv, np.int64)
    g0 = np.empty(max_nv)
    g1 = np.empty(max_nv)
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
    _node_sums(H, feat_off, cbits, packed, n_rows, tot)
    tg = tot[0]
    th = tot[1]
    tc = tot[2]
    cf = tc / th if (packed and th > 0) else 0.0
    parent = leaf_score(tg / sg, th / sh, lam, alpha, mds)
    best = NEG_INF
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
        mg, mh, mc = _decode(ma, mc2, packed, cbits, mask, cf)
        _prefix(H[base:base + nv], S[base:base + nv], sub and f > 0, packed, ea, ec)
        _gains(ea, ec, nv, 0, 0, 0, tg, th, tc, packed, cbits, mask, cf, scales, cfg,
               min_child_samples, parent, plain, g0)
        if mc == 0:
            # threshold nv - 1 sends every value left: a split only with missing
            # values, sent right.  (One loop for both cases, testing mc != 0 per
            # bin, made the scan 6% slower: 25 against 23.4 us per captured call.)
            g0[nv - 1] = NEG_INF
            for b in range(nv):
                if g0[b] > best:
                    best = g0[b]
                    bf = f
                    bb = b
                    bdl = 0
            if bf == f:
                blg, blh, blc = _decode(ea[bb], ec[bb], packed, cbits, mask, cf)
            continue
        _gains(ea, ec, nv, mg, mh, mc, tg, th, tc, packed, cbits, mask, cf, scales, cfg,
               min_child_samples, parent, plain, g1)
        g1[nv - 1] = NEG_INF
        for b in range(nv):
            if g0[b] > best:
                best = g0[b]
                bf = f
                bb = b
                bdl = 0
            if g1[b] > best:
                best = g1[b]
                bf = f
                bb = b
                bdl = 1
        if bf == f:
            blg, blh, blc = _decode(ea[bb], ec[bb], packed, cbits, mask, cf)
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
        bits = np.empty_like(out_bits)
        for f in range(n_features):
            if feature_mask[f] == 0 or is_cat[f] == 0:
                continue
            nv = n_value_bins[f]
            base = feat_off[f]
            cg, lg, lh, lc = scan_categorical(H[base:base + nv + 1], nv, packed, cbits, mask,
                                              cf, tg, th, tc, scales, cfg, min_child_samples,
                                              cat_cfg, bits)
            if cg > best:
                best = cg
                bf = f
                bb = -1
                bdl = 0
                blg, blh, blc = lg, lh, lc
                for w in range(bits.shape[0]):
                    out_bits[w] = bits[w]
    out_lsum[0] = blg
    out_lsum[1] = blh
    out_lsum[2] = blc
    return (best if (bf >= 0 and best > cfg[4]) else NEG_INF), bf, bb, bdl


@njit(cache=True)
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

    Each feature is scanned in three passes over its bins: prefix sums
    (``_prefix``, with the sibling subtraction fused in), every candidate's gain
    (``_gains``, vectorised), then the first maximum in (bin, missing right before
    left) order.  Measured on captured 2-node leaf-wise calls (1M x 28, 255 bins):
    53 -> 32 us, and 82 -> 40 us with 40% missing values, against one fused scalar
    loop with two divisions per candidate.

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
    is_cat : (F,) uint8, IN -- categorical features (``split_cat.scan_categorical``), or
        None when there are none (the categorical scan is then not compiled)
    cat_cfg : (5,) float64, IN -- their split settings (see ``split_cat``)
    scales : (6,) float64 = grad scale, hess scale, count_bits, packed flag, 1/sg, 1/sh
    cfg : (5,) float64 = reg_lambda, reg_alpha, max_delta_step, min_child_weight, min_split_gain
    min_child_samples : int
    out_gain : (m,) float64, OUT -- -inf where no valid split
    out_feature, out_bin : (m,) int64, OUT
    out_default_left : (m,) uint8, OUT -- missing values go left
    out_left_sums, out_node_sums : (m, 3) int64, OUT
    out_bits : (m, W) uint64, OUT -- a categorical split's left categories (bin -1)
    """
    max_nv = max_value_bins(n_value_bins)
    for i in prange(slots.shape[0]):
        g, f, b, dl = _best_split(hist, slots[i], sub_slots[i], node_rows[i], feat_off,
                                  n_value_bins, feature_mask[i], is_cat, cat_cfg, scales, cfg,
                                  min_child_samples, max_nv, out_left_sums[i], out_node_sums[i],
                                  out_bits[i])
        out_gain[i] = g
        out_feature[i] = f
        out_bin[i] = b
        out_default_left[i] = dl


# the categorical scan uses this module's helpers; imported last (it imports them)
from .split_cat import scan_categorical  # noqa: E402
