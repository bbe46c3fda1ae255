"""CPU kernels of the oblivious level's split: one (feature, threshold) or one
category set shared by every node of a level (CatBoost's symmetric trees), chosen by
the gains summed over the level's nodes.

Each candidate sums its nodes in node order, so the float sums have one fixed order
and the choice does not depend on threads.
"""
import numpy as np
from numba import njit, prange

from .split import NEG_INF, _decode, _node_sums, _split_gain, leaf_score, scan_params
from .split_cat import cat_settings


@njit(parallel=True, cache=True)
def find_level_split(hist, slots, node_rows, feat_off, n_value_bins, feature_mask, is_cat,
                     scales, cfg, min_child_samples, out_cand_gain):
    """Joint gain of every (feature, bin, missing direction) candidate over all nodes of
    a level, for oblivious trees: one split is shared by the whole level.

    A node where the candidate breaks a child constraint contributes no gain.
    Parallel over features; each candidate sums its nodes in node order, so the
    float sums have one fixed order.

    out_cand_gain : (n_bins_total, 2) float64, OUT -- [:, 0] missing right,
    [:, 1] missing left; -inf for masked or impossible candidates, and for every bin
    of a categorical feature (``find_level_split_categorical`` scans those).
    """
    n_features = n_value_bins.shape[0]
    m = slots.shape[0]
    sg, sh, cbits, packed, mask, lam, alpha, mds, plain = scan_params(scales, cfg)
    for f in prange(n_features):
        base = feat_off[f]
        nv = n_value_bins[f]
        for b in range(feat_off[f + 1] - base):
            out_cand_gain[base + b, 0] = NEG_INF
            out_cand_gain[base + b, 1] = NEG_INF
        if feature_mask[f] == 0 or (is_cat is not None and is_cat[f] != 0):
            continue
        for i in range(m):
            H = hist[slots[i]]
            tot = np.zeros(3, np.int64)
            _node_sums(H, feat_off, cbits, packed, node_rows[i], tot)
            tg = tot[0]
            th = tot[1]
            tc = tot[2]
            cf = tc / th if (packed and th > 0) else 0.0
            parent = leaf_score(tg / sg, th / sh, lam, alpha, mds)
            mg, mh, mc = _decode(H[base + nv, 0], 0 if packed else H[base + nv, 1],
                                 packed, cbits, mask, cf)
            la = np.int64(0)
            lc2 = np.int64(0)
            for b in range(nv):
                la += H[base + b, 0]
                if not packed:
                    lc2 += H[base + b, 1]
                lg, lh, lc = _decode(la, lc2, packed, cbits, mask, cf)
                for dl in range(2):
                    if dl == 0:
                        cg = lg
                        ch = lh
                        cc = lc
                    else:
                        cg = lg + mg
                        ch = lh + mh
                        cc = lc + mc
                    gain = _split_gain(cg, ch, cc, tg, th, tc, scales, cfg,
                                       min_child_samples, parent, plain)
                    if gain == NEG_INF:  # this node cannot take the split: no gain
                        gain = 0.0
                    cur = out_cand_gain[base + b, dl]
                    if cur == NEG_INF:
                        cur = 0.0
                    out_cand_gain[base + b, dl] = cur + gain
        # a threshold at the last value bin is a real split only for missing-right
        # with missing values present somewhere; leave it, the caller's argmax sees
        # its gain (0 when nothing moves).


@njit(cache=True, inline="always")
def _level_gain(hist, slots, base, lsum_a, lsum_c2, tots, parents, cfs, packed, cbits, mask,
                scales, ccfg, min_child_samples, plain):
    """Summed gain over the level's nodes of sending their left sums ``lsum_*`` left;
    a node whose child breaks a constraint adds nothing."""
    total = 0.0
    for i in range(slots.shape[0]):
        lg, lh, lc = _decode(lsum_a[i], lsum_c2[i], packed, cbits, mask, cfs[i])
        g = _split_gain(lg, lh, lc, tots[i, 0], tots[i, 1], tots[i, 2], scales, ccfg,
                        min_child_samples, parents[i], plain)
        if g != NEG_INF:
            total += g
    return total


@njit(cache=True)
def find_level_split_categorical(hist, slots, node_rows, feat_off, n_value_bins, feature_mask,
                                 is_cat, scales, cfg, min_child_samples, cat_cfg, out_gain,
                                 out_bits):
    """The best category set per categorical feature for an oblivious level (one
    split shared by every node, CatBoost's symmetric trees): categories are ordered
    by the level's summed ``G / (H + cat_smooth)`` and each candidate set scores the
    sum over the nodes of their gains (nodes in order: a fixed float order).
    Candidates as in ``scan_categorical``, on the level's summed counts.

    out_gain : (F,) float64, OUT -- -inf for numeric, masked or unsplittable features
    out_bits : (F, W) uint64, OUT
    """
    m = slots.shape[0]
    cbits = np.int64(scales[2])
    packed = scales[3] != 0.0
    mask = (np.int64(1) << cbits) - 1
    max_onehot, max_threshold, smooth, min_group, ccfg, plain = cat_settings(cfg, cat_cfg)
    tots = np.empty((m, 3), np.int64)
    parents = np.empty(m)
    cfs = np.empty(m)
    for i in range(m):
        _node_sums(hist[slots[i]], feat_off, cbits, packed, node_rows[i], tots[i])
        cfs[i] = tots[i, 2] / tots[i, 1] if (packed and tots[i, 1] > 0) else 0.0
        parents[i] = leaf_score(tots[i, 0] * scales[4], tots[i, 1] * scales[5], cfg[0], cfg[1],
                                cfg[2])
    la = np.empty(m, np.int64)
    lc2 = np.empty(m, np.int64)
    out_bits[:, :] = 0
    for f in range(n_value_bins.shape[0]):
        out_gain[f] = NEG_INF
        if is_cat[f] == 0 or feature_mask[f] == 0:
            continue
        nv = n_value_bins[f]
        base = feat_off[f]
        used = np.empty(nv, np.int64)
        key = np.empty(nv)
        n_used = 0
        for b in range(nv):
            g = 0.0
            h = 0.0
            c = np.int64(0)
            for i in range(m):
                H = hist[slots[i]]
                dg, dh, dc = _decode(H[base + b, 0], np.int64(0) if packed else H[base + b, 1],
                                     packed, cbits, mask, cfs[i])
                g += dg * scales[4]
                h += dh * scales[5]
                c += dc
            if c > 0 and c >= min_group:
                used[n_used] = b
                key[n_used] = g / (h + smooth) if h + smooth > 0.0 else 0.0
                n_used += 1
        if n_used <= 1:
            continue
        best = NEG_INF
        if n_used <= max_onehot:
            pick = -1
            for k in range(n_used):
                b = used[k]
                for i in range(m):
                    H = hist[slots[i]]
                    la[i] = H[base + b, 0]
                    lc2[i] = np.int64(0) if packed else H[base + b, 1]
                gain = _level_gain(hist, slots, base, la, lc2, tots, parents, cfs, packed,
                                   cbits, mask, scales, ccfg, min_child_samples, plain)
                if gain > best:
                    best = gain
                    pick = b
            out_gain[f] = best
            out_bits[f, pick >> 6] |= np.uint64(1) << np.uint64(pick & 63)
            continue
        order = np.argsort(key[:n_used], kind="mergesort")
        best_dir = -1
        best_k = -1
        limit = min(max_threshold, n_used - 1)
        for direction in range(2):
            la[:] = 0
            lc2[:] = 0
            for k in range(limit):
                j = order[k] if direction == 0 else order[n_used - 1 - k]
                b = used[j]
                for i in range(m):
                    H = hist[slots[i]]
                    la[i] += H[base + b, 0]
                    if not packed:
                        lc2[i] += H[base + b, 1]
                gain = _level_gain(hist, slots, base, la, lc2, tots, parents, cfs, packed,
                                   cbits, mask, scales, ccfg, min_child_samples, plain)
                if gain > best:
                    best = gain
                    best_dir = direction
                    best_k = k
        out_gain[f] = best
        for k in range(best_k + 1):
            j = order[k] if best_dir == 0 else order[n_used - 1 - k]
            b = used[j]
            out_bits[f, b >> 6] |= np.uint64(1) << np.uint64(b & 63)
