"""CUDA kernels of the split-finding stage: sibling subtraction, node sums and the best
split of every child of a level, with the CPU's arithmetic and tie rules.

The formulas are ``bonsai.backends.cpu._gain``'s, written again as device functions
with every float multiply through ``_device.fmul`` (never contracted into an FMA), so
that each gain is the CPU's bit for bit: the same operations in the same order on the
same integer sums.  The search is cut differently but decides alike:

* ``node_totals``: one thread per child, its (grad, hess, count) sums from feature 0's
  bins, rows per hessian unit (packed cells) and parent score;
* ``scan_features``: one thread per (child, feature): a numeric feature's first best
  (bin, missing right before left) in bin order, or a categorical feature's best
  category set (LightGBM's rules, as ``_gain.category_split``: one-vs-rest up to
  ``max_cat_to_onehot`` categories, else prefixes of the stable ``G / (H +
  cat_smooth)`` order, here an insertion sort);
* ``pick_best``: one thread per child takes the first maximum over the numeric
  features in feature order, then the categorical ones (a numeric split wins ties),
  so the winner is the CPU's sequential scan's: highest gain, then lowest feature,
  then lowest bin, then missing values right before left.

Settings travel in one float64 array ``P`` (the ``P_*`` indices below).  A
categorical feature with more than ``MAX_CAT_BINS`` value bins does not fit the
per-thread buffers: such fits take the CPU path (``builder.fits_device``).
"""
import math

import numpy as np
from numba import cuda

from ._device import fmul

(P_INV_GRAD, P_INV_HESS, P_GRAD, P_HESS, P_CBITS, P_PACKED, P_LAMBDA, P_ALPHA, P_MDS,
 P_MCW, P_MSG, P_MCS, P_ONEHOT, P_CAT_THR, P_CAT_SMOOTH, P_CAT_L2, P_MIN_GROUP) = range(17)
N_P = 17
#: value bins of a categorical feature the device scan holds per thread
MAX_CAT_BINS = 256
LOW32 = np.int64(0xFFFFFFFF)
NEG_INF = -math.inf


def settings_array(scales, cfg, cat, min_child_samples):
    """The host ``P`` of a tree: its ``Scales``, ``SplitSettings`` and ``CatSettings``."""
    return np.array([scales.inv_grad, scales.inv_hess, scales.grad, scales.hess,
                     scales.count_bits, scales.packed, cfg.reg_lambda, cfg.reg_alpha,
                     cfg.max_delta_step, cfg.min_child_weight, cfg.min_split_gain,
                     float(min_child_samples), cat.max_cat_to_onehot, cat.max_cat_threshold,
                     cat.cat_smooth, cat.cat_l2, cat.min_data_per_group], np.float64)


# ---- the formulas (``_gain``'s) ----------------------------------------------------

@cuda.jit(device=True)
def _threshold_l1(g, alpha):
    lo = g + alpha if g < -alpha else 0.0
    return g - alpha if g > alpha else lo


@cuda.jit(device=True)
def _leaf_weight(g, h, lam, alpha, mds):
    den = h + lam
    if den <= 0.0:
        return 0.0
    w = -_threshold_l1(g, alpha) / den
    if mds > 0.0:
        if w > mds:
            w = mds
        elif w < -mds:
            w = -mds
    return w


@cuda.jit(device=True)
def _leaf_score(g, h, lam, alpha, mds):
    den = h + lam
    if den <= 0.0:
        return 0.0
    gt = _threshold_l1(g, alpha)
    if mds <= 0.0:
        return fmul(gt, gt) / den
    w = _leaf_weight(g, h, lam, alpha, mds)
    return -(fmul(fmul(2.0, gt), w) + fmul(fmul(den, w), w))


@cuda.jit(device=True)
def _split_gain(cg, ch, cc, tg, th, tc, P, lam, parent, plain):
    """``_gain.split_gain`` (``lam``: the lambda in force, ``cfg``'s or a categorical
    split's ``lambda + cat_l2``)."""
    mcs = P[P_MCS]
    if cc < mcs or tc - cc < mcs:
        return NEG_INF
    hl = fmul(np.float64(ch), P[P_INV_HESS])
    hr = fmul(np.float64(th - ch), P[P_INV_HESS])
    if hl < P[P_MCW] or hr < P[P_MCW]:
        return NEG_INF
    gl = fmul(np.float64(cg), P[P_INV_GRAD])
    gr = fmul(np.float64(tg - cg), P[P_INV_GRAD])
    if plain:
        dl = hl + lam
        dr = hr + lam
        if dl > 0.0 and dr > 0.0:
            return fmul(gl, gl) / dl + fmul(gr, gr) / dr - parent
    return (_leaf_score(gl, hl, lam, P[P_ALPHA], P[P_MDS])
            + _leaf_score(gr, hr, lam, P[P_ALPHA], P[P_MDS]) - parent)


@cuda.jit(device=True)
def _decode(a, c2, packed, cbits, cf):
    """``_gain.decode``: (grad, hess, count) of a cell sum."""
    if packed:
        h = a & LOW32
        g = a >> np.int64(32)
        c = np.int64(fmul(np.float64(h), cf) + 0.5)
        if c == 0 and a != 0:
            c = np.int64(1)
        return g, h, c
    return a, c2 >> cbits, c2 & ((np.int64(1) << cbits) - 1)


# ---- kernels ------------------------------------------------------------------------

@cuda.jit(cache=True)
def subtract(hist, child_slot, sub):
    """``hist[child_slot[c]] -= hist[sub[c]]`` for every child with both (the larger
    child from its parent's histogram)."""
    n_cells = hist.shape[1] * hist.shape[2]
    channels = hist.shape[2]
    c = cuda.blockIdx.y
    while c < child_slot.shape[0]:
        s = child_slot[c]
        o = sub[c]
        if s >= 0 and o >= 0:
            j = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
            while j < n_cells:
                hist[s, j // channels, j % channels] -= hist[o, j // channels, j % channels]
                j += cuda.gridDim.x * cuda.blockDim.x
        c += cuda.gridDim.y


@cuda.jit(cache=True)
def node_totals(hist, child_slot, feat_off, child_rows, P, out_tot, out_cf, out_parent):
    """Per child with a slot: its decoded sums (``_gain.node_totals``), its rows per
    hessian unit ``cf`` (packed cells) and its score as a parent."""
    c = cuda.grid(1)
    if c >= child_slot.shape[0] or child_slot[c] < 0:
        return
    s = child_slot[c]
    packed = P[P_PACKED] != 0.0
    cbits = np.int64(P[P_CBITS])
    a = np.int64(0)
    c2 = np.int64(0)
    for b in range(feat_off[0], feat_off[1]):
        a += hist[s, b, 0]
        if not packed:
            c2 += hist[s, b, 1]
    tg, th, tc = _decode(a, c2, packed, cbits, 0.0)
    if packed:
        tc = child_rows[c]
    out_tot[c, 0] = tg
    out_tot[c, 1] = th
    out_tot[c, 2] = tc
    out_cf[c] = np.float64(tc) / np.float64(th) if (packed and th > 0) else 0.0
    out_parent[c] = _leaf_score(np.float64(tg) / P[P_GRAD], np.float64(th) / P[P_HESS],
                                P[P_LAMBDA], P[P_ALPHA], P[P_MDS])


@cuda.jit(device=True)
def _scan_numeric(hist, s, base, nv, tg, th, tc, cf, parent, P, out_lsum):
    """One numeric feature at one node: (gain, bin, default_left) of its first best
    candidate, its left sums into ``out_lsum (3,)``."""
    packed = P[P_PACKED] != 0.0
    cbits = np.int64(P[P_CBITS])
    lam = P[P_LAMBDA]
    plain = P[P_MDS] <= 0.0 and P[P_ALPHA] == 0.0
    ma = hist[s, base + nv, 0]
    mc2 = np.int64(0) if packed else hist[s, base + nv, 1]
    mg, mh, mc = _decode(ma, mc2, packed, cbits, cf)
    la = np.int64(0)
    lc2 = np.int64(0)
    best = NEG_INF
    bb = np.int64(-1)
    bdl = 0
    ba = np.int64(0)
    bc2 = np.int64(0)
    for b in range(nv):
        la += hist[s, base + b, 0]
        if not packed:
            lc2 += hist[s, base + b, 1]
        lg, lh, lc = _decode(la, lc2, packed, cbits, cf)
        g0 = _split_gain(lg, lh, lc, tg, th, tc, P, lam, parent, plain)
        # the last threshold sends every value left: with no missing values that is no
        # split (and there is no missing-left candidate); with them only missing-right
        # splits there, missing-left would send every row left
        g1 = NEG_INF
        if mc != 0:
            if b < nv - 1:
                g1 = _split_gain(lg + mg, lh + mh, lc + mc, tg, th, tc, P, lam, parent,
                                 plain)
        elif b == nv - 1:
            g0 = NEG_INF
        if g0 > best:
            best = g0
            bb = b
            bdl = 0
            ba = la
            bc2 = lc2
        if g1 > best:
            best = g1
            bb = b
            bdl = 1
            ba = la
            bc2 = lc2
    lg, lh, lc = _decode(ba, bc2, packed, cbits, cf)
    if bdl:
        lg += mg
        lh += mh
        lc += mc
    out_lsum[0] = lg
    out_lsum[1] = lh
    out_lsum[2] = lc
    return best, bb, bdl


@cuda.jit(device=True)
def _scan_categorical(hist, s, base, nv, tg, th, tc, cf, P, out_bits, out_lsum):
    """One categorical feature at one node (``_gain.scan_categorical``): the gain of
    its best category set (bit b of ``out_bits``: bin b left), its left sums."""
    packed = P[P_PACKED] != 0.0
    cbits = np.int64(P[P_CBITS])
    used = cuda.local.array(MAX_CAT_BINS, np.int64)
    key = cuda.local.array(MAX_CAT_BINS, np.float64)
    order = cuda.local.array(MAX_CAT_BINS, np.int64)
    for w in range(out_bits.shape[0]):
        out_bits[w] = 0
    parent = _leaf_score(fmul(np.float64(tg), P[P_INV_GRAD]), fmul(np.float64(th), P[P_INV_HESS]),
                         P[P_LAMBDA], P[P_ALPHA], P[P_MDS])
    lam = P[P_LAMBDA] + P[P_CAT_L2]
    plain = P[P_MDS] <= 0.0 and P[P_ALPHA] == 0.0
    smooth = P[P_CAT_SMOOTH]
    n_used = 0
    for b in range(nv):
        gi, hi, ci = _decode(hist[s, base + b, 0],
                             np.int64(0) if packed else hist[s, base + b, 1], packed, cbits, cf)
        g = fmul(np.float64(gi), P[P_INV_GRAD])
        h = fmul(np.float64(hi), P[P_INV_HESS])
        if ci > 0 and ci >= P[P_MIN_GROUP]:
            used[n_used] = b
            key[n_used] = g / (h + smooth) if h + smooth > 0.0 else 0.0
            n_used += 1
    best = NEG_INF
    ba = np.int64(0)
    bc2 = np.int64(0)
    if n_used > 1:
        if n_used <= np.int64(P[P_ONEHOT]):
            pick = np.int64(-1)
            for k in range(n_used):
                la = hist[s, base + used[k], 0]
                lc2 = np.int64(0) if packed else hist[s, base + used[k], 1]
                lg, lh, lc = _decode(la, lc2, packed, cbits, cf)
                gain = _split_gain(lg, lh, lc, tg, th, tc, P, lam, parent, plain)
                if gain > best:
                    best = gain
                    ba = la
                    bc2 = lc2
                    pick = used[k]
            if pick >= 0:
                out_bits[pick >> 6] |= np.uint64(1) << np.uint64(pick & 63)
        else:
            for i in range(n_used):          # stable insertion sort: ties keep bin order
                x = i
                j = i - 1
                while j >= 0 and key[order[j]] > key[x]:
                    order[j + 1] = order[j]
                    j -= 1
                order[j + 1] = x
            best_dir = -1
            best_k = -1
            la = np.int64(0)
            lc2 = np.int64(0)
            n_try = np.int64(P[P_CAT_THR])
            if n_try > n_used - 1:
                n_try = n_used - 1
            for direction in range(2):
                for k in range(n_try):
                    jj = order[k] if direction == 0 else order[n_used - 1 - k]
                    cell = base + used[jj]
                    if k == 0:
                        la = hist[s, cell, 0]
                        lc2 = np.int64(0) if packed else hist[s, cell, 1]
                    else:
                        la += hist[s, cell, 0]
                        if not packed:
                            lc2 += hist[s, cell, 1]
                    lg, lh, lc = _decode(la, lc2, packed, cbits, cf)
                    gain = _split_gain(lg, lh, lc, tg, th, tc, P, lam, parent, plain)
                    if gain > best:
                        best = gain
                        ba = la
                        bc2 = lc2
                        best_dir = direction
                        best_k = k
            for k in range(best_k + 1):
                b = used[order[k] if best_dir == 0 else order[n_used - 1 - k]]
                out_bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    lg, lh, lc = _decode(ba, bc2, packed, cbits, cf)
    out_lsum[0] = lg
    out_lsum[1] = lh
    out_lsum[2] = lc
    return best


@cuda.jit(cache=True)
def scan_features(hist, child_slot, feat_off, n_value_bins, masks, is_cat, P, tot, cf,
                  parent, out_gain, out_bin, out_dl, out_lsum, out_bits):
    """Per (child, feature): the feature's best candidate at that child (gain -inf
    where the feature is masked out or the child has no slot)."""
    n_features = n_value_bins.shape[0]
    j = cuda.grid(1)
    step = cuda.gridsize(1)
    while j < child_slot.shape[0] * n_features:
        c = j // n_features
        f = j - c * n_features
        s = child_slot[c]
        out_gain[c, f] = NEG_INF
        out_bin[c, f] = -1
        out_dl[c, f] = 0
        if s >= 0 and masks[c, f] != 0:
            if is_cat[f] != 0:
                out_gain[c, f] = _scan_categorical(hist, s, feat_off[f], n_value_bins[f],
                                                   tot[c, 0], tot[c, 1], tot[c, 2], cf[c], P,
                                                   out_bits[c, f], out_lsum[c, f])
            else:
                g, b, dl = _scan_numeric(hist, s, feat_off[f], n_value_bins[f], tot[c, 0],
                                         tot[c, 1], tot[c, 2], cf[c], parent[c], P,
                                         out_lsum[c, f])
                out_gain[c, f] = g
                out_bin[c, f] = b
                out_dl[c, f] = dl
        j += step


#: columns of ``pick_best``'s integer output: feature, bin, default_left, the left sums
#: (3), the node sums (3)
PICK_FEATURE, PICK_BIN, PICK_DL, PICK_LSUM, PICK_SUMS, N_PICK = 0, 1, 2, 3, 6, 9


@cuda.jit(cache=True)
def pick_best(child_slot, is_cat, P, f_gain, f_bin, f_dl, f_lsum, f_bits, tot, out_gain,
              out_i, out_bits):
    """Per child: the first maximum over its numeric features, then its categorical
    ones (strictly greater wins), as ``split._best_split``; children without a slot
    get gain -inf, feature -1 (their sums come from the parent's split).  The integer
    results go in one row of ``out_i (m2, N_PICK)`` (the ``PICK_*`` columns), so the
    host fetches a level's splits in three copies (gain, ints, bits)."""
    c = cuda.grid(1)
    if c >= child_slot.shape[0]:
        return
    for w in range(out_bits.shape[1]):
        out_bits[c, w] = 0
    out_gain[c] = NEG_INF
    out_i[c, PICK_FEATURE] = -1
    out_i[c, PICK_BIN] = -1
    out_i[c, PICK_DL] = 0
    if child_slot[c] < 0:
        return
    n_features = is_cat.shape[0]
    best = NEG_INF
    bf = -1
    for f in range(n_features):
        if is_cat[f] == 0 and f_gain[c, f] > best:
            best = f_gain[c, f]
            bf = f
    for f in range(n_features):
        if is_cat[f] != 0 and f_gain[c, f] > best:
            best = f_gain[c, f]
            bf = f
    for q in range(3):
        out_i[c, PICK_SUMS + q] = tot[c, q]
        out_i[c, PICK_LSUM + q] = 0
    if bf >= 0:
        out_i[c, PICK_FEATURE] = bf
        out_i[c, PICK_BIN] = f_bin[c, bf]
        out_i[c, PICK_DL] = f_dl[c, bf]
        for q in range(3):
            out_i[c, PICK_LSUM + q] = f_lsum[c, bf, q]
        if is_cat[bf] != 0:
            for w in range(out_bits.shape[1]):
                out_bits[c, w] = f_bits[c, bf, w]
    out_gain[c] = best if (bf >= 0 and best > P[P_MSG]) else NEG_INF


# ---- oblivious levels -----------------------------------------------------------------

@cuda.jit(cache=True)
def level_gains(hist, slots, feat_off, n_value_bins, bin_feature, mask, is_cat, P, tot, cf,
                parent, out):
    """Oblivious level (``split_level.find_level_split``): per histogram bin ``j`` (one
    thread each), the gain of its (bin, missing right / left) candidates summed over
    the level's nodes ``slots`` in node order (a node breaking a constraint adds 0);
    -inf for masked and categorical features and for missing bins.  ``tot``, ``cf``,
    ``parent`` are the nodes' ``node_totals``; ``bin_feature (n_bins_total,)`` each
    bin's feature.  out : (n_bins_total, 2) float64."""
    j = cuda.grid(1)
    step = cuda.gridsize(1)
    packed = P[P_PACKED] != 0.0
    cbits = np.int64(P[P_CBITS])
    lam = P[P_LAMBDA]
    plain = P[P_MDS] <= 0.0 and P[P_ALPHA] == 0.0
    while j < out.shape[0]:
        f = bin_feature[j]
        base = feat_off[f]
        nv = n_value_bins[f]
        b = j - base
        out[j, 0] = NEG_INF
        out[j, 1] = NEG_INF
        if mask[f] != 0 and is_cat[f] == 0 and b < nv:
            for i in range(slots.shape[0]):
                s = slots[i]
                mg, mh, mc = _decode(hist[s, base + nv, 0],
                                     np.int64(0) if packed else hist[s, base + nv, 1],
                                     packed, cbits, cf[i])
                la = np.int64(0)
                lc2 = np.int64(0)
                for q in range(b + 1):
                    la += hist[s, base + q, 0]
                    if not packed:
                        lc2 += hist[s, base + q, 1]
                lg, lh, lc = _decode(la, lc2, packed, cbits, cf[i])
                for dl in range(2):
                    if dl == 0:
                        g = _split_gain(lg, lh, lc, tot[i, 0], tot[i, 1], tot[i, 2], P, lam,
                                        parent[i], plain)
                    else:
                        g = _split_gain(lg + mg, lh + mh, lc + mc, tot[i, 0], tot[i, 1],
                                        tot[i, 2], P, lam, parent[i], plain)
                    if g == NEG_INF:
                        g = 0.0
                    cur = out[j, dl]
                    if cur == NEG_INF:
                        cur = 0.0
                    out[j, dl] = cur + g
        j += step


@cuda.jit(cache=True)
def range_sums(hist, slots, lo, hi, extra, P, cnt_factor, out):
    """Per node ``i`` (one thread each): the decoded sums of bins ``lo..hi-1`` (plus bin
    ``extra`` when >= 0) of ``hist[slots[i]]`` (``_gain.bin_sums``).  out : (m, 3)."""
    i = cuda.grid(1)
    if i >= slots.shape[0]:
        return
    packed = P[P_PACKED] != 0.0
    s = slots[i]
    a = np.int64(0)
    c2 = np.int64(0)
    for b in range(lo, hi):
        a += hist[s, b, 0]
        if not packed:
            c2 += hist[s, b, 1]
    if extra >= 0:
        a += hist[s, extra, 0]
        if not packed:
            c2 += hist[s, extra, 1]
    g, h, c = _decode(a, c2, packed, np.int64(P[P_CBITS]), cnt_factor[i])
    out[i, 0] = g
    out[i, 1] = h
    out[i, 2] = c
