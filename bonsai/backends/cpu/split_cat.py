"""The split scan of one categorical feature (native partition splits), called per
categorical feature by ``split.find_best_splits`` (an oblivious level's shared
category set is ``split_level.find_level_split_categorical``).

A categorical feature's value bins are category codes; a split sends a *set* of
categories left (a bitset over the bins) and the rest, the missing bin and the
categories too rare to judge right.  As in LightGBM:

* categories with fewer than ``min_data_per_group`` rows are never put on the left;
* at most ``max_cat_to_onehot`` usable categories: one category against the rest;
* otherwise the usable categories are sorted by ``G / (H + cat_smooth)`` and every
  prefix of at most ``max_cat_threshold`` categories is tried, from both ends of the
  order.  With ``cat_smooth = 0`` and no regularisation a prefix of this order is
  the best of all subsets (Fisher 1958: for a sum of G^2/H the optimal binary
  partition is contiguous in the G/H order), which the tests check by brute force;
* the children's scores use ``reg_lambda + cat_l2``, the parent's ``reg_lambda``
  (as LightGBM: a categorical split must beat the extra regularisation).

Sums are integer histogram cells added in a fixed order (the sort is stable, ties
by bin), so the result does not depend on threads.

cat_cfg : (5,) float64 = max_cat_to_onehot, max_cat_threshold, cat_smooth, cat_l2,
    min_data_per_group
"""
import numpy as np
from numba import njit

from .split import NEG_INF, _decode, _split_gain, leaf_score


@njit(cache=True, inline="always")
def cat_settings(cfg, cat_cfg):
    """(max_cat_to_onehot, max_cat_threshold, cat_smooth, min_data_per_group, the
    children's split settings (reg_lambda + cat_l2), plain gain) of ``cat_cfg``."""
    ccfg = cfg.copy()
    ccfg[0] += cat_cfg[3]
    return (np.int64(cat_cfg[0]), np.int64(cat_cfg[1]), cat_cfg[2], cat_cfg[4], ccfg,
            ccfg[2] <= 0.0 and ccfg[1] == 0.0)


@njit(cache=True)
def scan_categorical(H, nv, packed, cbits, mask, cf, tg, th, tc, scales, cfg, min_child_samples,
                     cat_cfg, out_bits):
    """Best category set to send left, for one node.

    H : (nv + 1, C) int64 -- the feature's bins (categories 0..nv-1, missing bin nv)
    tg, th, tc : the node's decoded (grad, hess, count) sums
    out_bits : (ceil(nv / 64),) uint64, OUT -- bit b of word b // 64: category b left

    Returns (gain, left grad, left hess, left count); gain -inf (and no bit set) when
    no split satisfies the constraints.
    """
    max_onehot, max_threshold, smooth, min_group, ccfg, plain = cat_settings(cfg, cat_cfg)
    parent = leaf_score(tg * scales[4], th * scales[5], cfg[0], cfg[1], cfg[2])
    out_bits[:] = 0
    used = np.empty(nv, np.int64)
    key = np.empty(nv)
    n_used = 0
    for b in range(nv):
        g, h, c = _decode(H[b, 0], np.int64(0) if packed else H[b, 1], packed, cbits, mask, cf)
        if c > 0 and c >= min_group:
            used[n_used] = b
            key[n_used] = (g * scales[4]) / (h * scales[5] + smooth) if h * scales[5] + smooth > 0.0 else 0.0
            n_used += 1
    best = NEG_INF
    blg = np.int64(0)
    blh = np.int64(0)
    blc = np.int64(0)
    if n_used <= 1:
        return best, blg, blh, blc
    if n_used <= max_onehot:
        pick = -1
        for k in range(n_used):
            b = used[k]
            lg, lh, lc = _decode(H[b, 0], np.int64(0) if packed else H[b, 1], packed, cbits,
                                 mask, cf)
            gain = _split_gain(lg, lh, lc, tg, th, tc, scales, ccfg, min_child_samples, parent,
                               plain)
            if gain > best:
                best, blg, blh, blc, pick = gain, lg, lh, lc, b
        if pick >= 0:
            out_bits[pick >> 6] |= np.uint64(1) << np.uint64(pick & 63)
        return best, blg, blh, blc
    order = np.argsort(key[:n_used], kind="mergesort")     # stable: ties by bin
    best_dir = -1
    best_k = -1
    limit = min(max_threshold, n_used - 1)
    for direction in range(2):
        la = np.int64(0)
        lc2 = np.int64(0)
        for k in range(limit):
            j = order[k] if direction == 0 else order[n_used - 1 - k]
            b = used[j]
            la += H[b, 0]
            if not packed:
                lc2 += H[b, 1]
            lg, lh, lc = _decode(la, lc2, packed, cbits, mask, cf)
            gain = _split_gain(lg, lh, lc, tg, th, tc, scales, ccfg, min_child_samples, parent,
                               plain)
            if gain > best:
                best, blg, blh, blc, best_dir, best_k = gain, lg, lh, lc, direction, k
    for k in range(best_k + 1):
        j = order[k] if best_dir == 0 else order[n_used - 1 - k]
        b = used[j]
        out_bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return best, blg, blh, blc


@njit(cache=True)
def bits_sums(hist, slots, off, nv, bits, cbits, packed, cnt_factor, out):
    """(grad, hess, count) sums of bins ``off + b`` (b < nv) with bit b set in
    ``bits``, per slot; ``cnt_factor`` (m,) rows per hessian unit (packed mode)."""
    mask = (np.int64(1) << cbits) - 1
    for i in range(slots.shape[0]):
        H = hist[slots[i]]
        a = np.int64(0)
        c2 = np.int64(0)
        for b in range(nv):
            if (bits[b >> 6] >> np.uint64(b & 63)) & np.uint64(1):
                a += H[off + b, 0]
                if not packed:
                    c2 += H[off + b, 1]
        g, h, c = _decode(a, c2, packed, cbits, mask, cnt_factor[i])
        out[i, 0] = g
        out[i, 1] = h
        out[i, 2] = c
