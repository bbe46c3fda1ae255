"""CPU kernels of the oblivious level's split: one (feature, threshold) or one
category set shared by every node of a level (CatBoost's symmetric trees), chosen by
the gains summed over the level's nodes.

Each candidate sums its nodes in node order, so the float sums have one fixed order
and the choice does not depend on threads.  The formulas, the cell decode and the
category-set search are ``_gain``'s.
"""
import numpy as np
from numba import njit, prange

from ._gain import (NEG_INF, category_split, cell_format, decode, leaf_score, node_totals,
                    plain_gain, score, split_gain)


@njit(parallel=True, cache=True, nogil=True)
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
    packed, cbits, mask = cell_format(scales)
    plain = plain_gain(cfg)
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
            node_totals(H, feat_off, scales, node_rows[i], tot)
            tg = tot[0]
            th = tot[1]
            tc = tot[2]
            cf = tc / th if (packed and th > 0) else 0.0
            parent = leaf_score(tg / scales.grad, th / scales.hess, cfg.reg_lambda,
                                cfg.reg_alpha, cfg.max_delta_step)
            mg, mh, mc = decode(H[base + nv, 0], 0 if packed else H[base + nv, 1],
                                packed, cbits, mask, cf)
            la = np.int64(0)
            lc2 = np.int64(0)
            for b in range(nv):
                la += H[base + b, 0]
                if not packed:
                    lc2 += H[base + b, 1]
                lg, lh, lc = decode(la, lc2, packed, cbits, mask, cf)
                for dl in range(2):
                    if dl == 0:
                        cg = lg
                        ch = lh
                        cc = lc
                    else:
                        cg = lg + mg
                        ch = lh + mh
                        cc = lc + mc
                    gain = split_gain(cg, ch, cc, tg, th, tc, scales, cfg,
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


@njit(cache=True, nogil=True)
def find_level_split_categorical(hist, slots, node_rows, feat_off, n_value_bins, feature_mask,
                                 is_cat, scales, cfg, min_child_samples, cat_cfg, out_gain,
                                 out_bits):
    """The best category set per categorical feature for an oblivious level (one
    split shared by every node, CatBoost's symmetric trees): categories are ordered
    by the level's summed ``G / (H + cat_smooth)`` and each candidate set scores the
    sum over the nodes of their gains (nodes in order: a fixed float order).
    Candidates as at one node (``_gain.category_split``), on the level's summed counts.

    out_gain : (F,) float64, OUT -- -inf for numeric, masked or unsplittable features
    out_bits : (F, W) uint64, OUT
    """
    m = slots.shape[0]
    packed = scales.packed != 0.0
    tots = np.empty((m, 3), np.int64)
    parents = np.empty(m)
    cfs = np.empty(m)
    for i in range(m):
        node_totals(hist[slots[i]], feat_off, scales, node_rows[i], tots[i])
        cfs[i] = tots[i, 2] / tots[i, 1] if (packed and tots[i, 1] > 0) else 0.0
        parents[i] = score(tots[i, 0] * scales.inv_grad, tots[i, 1] * scales.inv_hess, cfg)
    out_bits[:, :] = 0
    for f in range(n_value_bins.shape[0]):
        out_gain[f] = NEG_INF
        if is_cat[f] == 0 or feature_mask[f] == 0:
            continue
        out_gain[f] = category_split(hist, slots, feat_off[f], n_value_bins[f], tots, parents,
                                     cfs, scales, cfg, cat_cfg, min_child_samples, True,
                                     out_bits[f])[0]
