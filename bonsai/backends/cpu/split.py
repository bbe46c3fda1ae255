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
"""
import numpy as np
from numba import njit, prange

from ._jit import parallel_kernel

NEG_INF = -np.inf


@njit(cache=True, inline="always")
def _threshold_l1(g, alpha):
    if g > alpha:
        return g - alpha
    if g < -alpha:
        return g + alpha
    return 0.0


@njit(cache=True, inline="always")
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


@njit(cache=True, inline="always")
def leaf_score(g, h, reg_lambda, reg_alpha, max_delta_step):
    den = h + reg_lambda
    if den <= 0.0:
        return 0.0
    gt = _threshold_l1(g, reg_alpha)
    if max_delta_step <= 0.0:
        return gt * gt / den
    w = leaf_weight(g, h, reg_lambda, reg_alpha, max_delta_step)
    return -(2.0 * gt * w + den * w * w)


@njit(cache=True, inline="always")
def _unpack(hc, cbits, mask):
    """(hess, count) from a packed ``hess * 2**cbits + count`` sum."""
    return hc >> cbits, hc & mask


@njit(cache=True)
def _node_sums(H, feat_off, cbits, out):
    g = 0
    hc = 0
    for b in range(feat_off[0], feat_off[1]):
        g += H[b, 0]
        hc += H[b, 1]
    out[0] = g
    out[1] = hc >> cbits
    out[2] = hc & ((np.int64(1) << cbits) - 1)


@parallel_kernel
def node_sums(hist, slots, feat_off, cbits, out):
    """Totals (grad, hess, count) of each node, read off feature 0's bins (every
    feature's bins, missing bin included, sum to the node total).  out (m, 3) int64."""
    for i in prange(slots.shape[0]):
        _node_sums(hist[slots[i]], feat_off, cbits, out[i])


@njit(cache=True)
def range_sums(hist, slots, lo, hi, extra, cbits, out):
    """Unpacked (grad, hess, count) sums of bins ``lo..hi-1`` (plus bin ``extra`` when
    ``extra >= 0``) of each slot.  out (m, 3) int64."""
    mask = (np.int64(1) << cbits) - 1
    for i in range(slots.shape[0]):
        H = hist[slots[i]]
        g = 0
        hc = 0
        for b in range(lo, hi):
            g += H[b, 0]
            hc += H[b, 1]
        if extra >= 0:
            g += H[extra, 0]
            hc += H[extra, 1]
        out[i, 0] = g
        out[i, 1] = hc >> cbits
        out[i, 2] = hc & mask


@parallel_kernel
def find_best_splits(hist, slots, feat_off, n_value_bins, feature_mask, scales, cfg,
                     min_child_samples, out_gain, out_feature, out_bin, out_default_left,
                     out_left_sums, out_node_sums):
    """Best split of each node.

    Parameters
    ----------
    hist : (n_slots, n_bins_total, 3) int64, IN
    slots : (m,) int64, IN -- the node's histogram slot
    feat_off : (F + 1,) int64, IN
    n_value_bins : (F,) int64, IN -- non-missing bins; the missing bin follows them
    feature_mask : (m, F) uint8, IN -- 1 where the feature may be used at that node
    scales : (3,) float64 = grad scale, hess scale, count_bits, IN
    cfg : (5,) float64 = reg_lambda, reg_alpha, max_delta_step, min_child_weight, min_split_gain
    min_child_samples : int
    out_gain : (m,) float64, OUT -- -inf where no valid split
    out_feature, out_bin : (m,) int64, OUT
    out_default_left : (m,) uint8, OUT -- missing values go left
    out_left_sums, out_node_sums : (m, 3) int64, OUT
    """
    n_features = n_value_bins.shape[0]
    sg = scales[0]
    sh = scales[1]
    cbits = np.int64(scales[2])
    mask = (np.int64(1) << cbits) - 1
    lam = cfg[0]
    alpha = cfg[1]
    mds = cfg[2]
    mcw = cfg[3]
    msg = cfg[4]
    for i in prange(slots.shape[0]):
        H = hist[slots[i]]
        tot = out_node_sums[i]
        _node_sums(H, feat_off, cbits, tot)
        tg = tot[0]
        th = tot[1]
        tc = tot[2]
        parent = leaf_score(tg / sg, th / sh, lam, alpha, mds)
        best = NEG_INF
        bf = -1
        bb = -1
        bdl = 0
        blg = 0
        blh = 0
        blc = 0
        for f in range(n_features):
            if feature_mask[i, f] == 0:
                continue
            nv = n_value_bins[f]
            base = feat_off[f]
            mg = H[base + nv, 0]
            mh, mc = _unpack(H[base + nv, 1], cbits, mask)
            lg = 0
            lhc = 0
            # threshold b sends value bins 0..b left; b == nv - 1 (all values left)
            # only makes sense with missing values going right.
            for b in range(nv):
                lg += H[base + b, 0]
                lhc += H[base + b, 1]
                lh, lc = _unpack(lhc, cbits, mask)
                for dl in range(2):
                    if dl == 0:
                        if b == nv - 1 and mc == 0:
                            continue
                        cg = lg
                        ch = lh
                        cc = lc
                    else:
                        if mc == 0 or b == nv - 1:
                            continue
                        cg = lg + mg
                        ch = lh + mh
                        cc = lc + mc
                    rc = tc - cc
                    if cc < min_child_samples or rc < min_child_samples:
                        continue
                    hl = ch / sh
                    hr = (th - ch) / sh
                    if hl < mcw or hr < mcw:
                        continue
                    gain = (leaf_score(cg / sg, hl, lam, alpha, mds)
                            + leaf_score((tg - cg) / sg, hr, lam, alpha, mds) - parent)
                    if gain > best:
                        best = gain
                        bf = f
                        bb = b
                        bdl = dl
                        blg = cg
                        blh = ch
                        blc = cc
        if bf >= 0 and best > msg:
            out_gain[i] = best
        else:
            out_gain[i] = NEG_INF
        out_feature[i] = bf
        out_bin[i] = bb
        out_default_left[i] = bdl
        out_left_sums[i, 0] = blg
        out_left_sums[i, 1] = blh
        out_left_sums[i, 2] = blc


@njit(parallel=True, cache=True)
def find_level_split(hist, slots, feat_off, n_value_bins, feature_mask, scales, cfg,
                     min_child_samples, out_cand_gain):
    """Joint gain of every (feature, bin, missing direction) candidate over all nodes of
    a level, for oblivious trees: one split is shared by the whole level.

    A node where the candidate breaks a child constraint contributes no gain.
    Parallel over features; each candidate sums its nodes in node order, so the
    float sums have one fixed order.

    out_cand_gain : (n_bins_total, 2) float64, OUT -- [:, 0] missing right,
    [:, 1] missing left; -inf for masked or impossible candidates.
    """
    n_features = n_value_bins.shape[0]
    m = slots.shape[0]
    sg = scales[0]
    sh = scales[1]
    cbits = np.int64(scales[2])
    mask = (np.int64(1) << cbits) - 1
    lam = cfg[0]
    alpha = cfg[1]
    mds = cfg[2]
    mcw = cfg[3]
    for f in prange(n_features):
        base = feat_off[f]
        nv = n_value_bins[f]
        for b in range(feat_off[f + 1] - base):
            out_cand_gain[base + b, 0] = NEG_INF
            out_cand_gain[base + b, 1] = NEG_INF
        if feature_mask[f] == 0:
            continue
        for i in range(m):
            H = hist[slots[i]]
            tot = np.zeros(3, np.int64)
            _node_sums(H, feat_off, cbits, tot)
            tg = tot[0]
            th = tot[1]
            tc = tot[2]
            parent = leaf_score(tg / sg, th / sh, lam, alpha, mds)
            mg = H[base + nv, 0]
            mh, mc = _unpack(H[base + nv, 1], cbits, mask)
            lg = 0
            lhc = 0
            for b in range(nv):
                lg += H[base + b, 0]
                lhc += H[base + b, 1]
                lh, lc = _unpack(lhc, cbits, mask)
                for dl in range(2):
                    if dl == 0:
                        cg = lg
                        ch = lh
                        cc = lc
                    else:
                        cg = lg + mg
                        ch = lh + mh
                        cc = lc + mc
                    gain = 0.0
                    rc = tc - cc
                    hl = ch / sh
                    hr = (th - ch) / sh
                    if (cc >= min_child_samples and rc >= min_child_samples
                            and hl >= mcw and hr >= mcw):
                        gain = (leaf_score(cg / sg, hl, lam, alpha, mds)
                                + leaf_score((tg - cg) / sg, hr, lam, alpha, mds) - parent)
                    cur = out_cand_gain[base + b, dl]
                    if cur == NEG_INF:
                        cur = 0.0
                    out_cand_gain[base + b, dl] = cur + gain
        # a threshold at the last value bin is a real split only for missing-right
        # with missing values present somewhere; leave it, the caller's argmax sees
        # its gain (0 when nothing moves).
