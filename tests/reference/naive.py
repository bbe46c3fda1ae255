"""Pure NumPy / pure Python oracles for the CPU kernels.

Everything here is written for clarity, not speed: explicit loops over rows, bins
and nodes, so that a test comparing a kernel with its oracle checks the kernel's
logic, not a shared helper.

Conventions (the same as bonsai's, see ``bonsai/backends/cpu/split.py``):

* histogram cells ``[grad, hess, count]`` are int64 fixed-point sums; feature ``f``
  owns cells ``feat_off[f] .. feat_off[f+1]-1``: value bins ``0..nv-1`` then the
  missing bin ``nv``;
* a split ``(f, b, default_left)`` sends value bins ``<= b`` left and the missing bin
  left iff ``default_left``;
* gain = score(L) + score(R) - score(parent) with
  ``score(G, H) = T(G)^2 / (H + lambda)`` (no max_delta_step) or
  ``-(2 T(G) w + (H + lambda) w^2)`` with w clipped to +-max_delta_step,
  ``T(G) = sign(G) max(|G| - alpha, 0)``;
* ties: first best in the order feature, bin, missing-right (dl=0) before
  missing-left (dl=1).
"""
import math

import numpy as np


# ---- histograms -------------------------------------------------------------------

def naive_histogram(X_binned, feat_off, gq, hq, rows):
    """(n_bins_total, 3) int64 histogram ``[grad, hess, count]`` of ``rows`` (any
    iterable of row ids); ``gq``, ``hq`` are the per-row quantized integers."""
    n_features = X_binned.shape[1]
    hist = np.zeros((int(feat_off[-1]), 3), np.int64)
    for r in rows:
        r = int(r)
        for f in range(n_features):
            cell = int(feat_off[f]) + int(X_binned[r, f])
            hist[cell, 0] += int(gq[r])
            hist[cell, 1] += int(hq[r])
            hist[cell, 2] += 1
    return hist


# ---- the kernels' storage layout -------------------------------------------------------
# The oracles work on plain (grad, hess, count) triples.  The kernels may store them
# differently (3 int64 channels, or 2 channels with hess and count packed as
# ``hess * 2**count_bits + count``, count_bits = int(scales.count_bits)); these adapters
# are the only place that knows.

def _n_channels():
    from bonsai._dtypes import N_HIST_CHANNELS
    return int(N_HIST_CHANNELS)


def gh_parts(gh, scales):
    """Quantized per-row (gq, hq, count) from the kernels' (n, 2) ``gh``."""
    if _n_channels() == 3:
        return gh[:, 0].copy(), gh[:, 1].copy(), np.ones(gh.shape[0], np.int64)
    cb = int(scales.count_bits)
    return gh[:, 0].copy(), gh[:, 1] >> cb, gh[:, 1] & ((1 << cb) - 1)


def hist_to_ghc(H, scales):
    """Kernel histogram cells (bins, C) -> (bins, 3) [grad, hess, count]."""
    H = np.asarray(H)
    if _n_channels() == 3:
        return H.copy()
    cb = int(scales.count_bits)
    return np.stack([H[:, 0], H[:, 1] >> cb, H[:, 1] & ((1 << cb) - 1)], axis=1)


def ghc_to_hist(H3, scales):
    """(bins, 3) [grad, hess, count] -> kernel histogram cells (bins, C)."""
    H3 = np.asarray(H3, np.int64)
    if _n_channels() == 3:
        return H3.copy()
    cb = int(scales.count_bits)
    return np.stack([H3[:, 0], (H3[:, 1] << cb) + H3[:, 2]], axis=1)


# ---- split scoring ------------------------------------------------------------------

def _t_l1(g, alpha):
    if g > alpha:
        return g - alpha
    if g < -alpha:
        return g + alpha
    return 0.0


def naive_leaf_weight(g, h, reg_lambda, reg_alpha, max_delta_step):
    den = h + reg_lambda
    if den <= 0.0:
        return 0.0
    w = -_t_l1(g, reg_alpha) / den
    if max_delta_step > 0.0:
        w = min(max(w, -max_delta_step), max_delta_step)
    return w


def naive_leaf_score(g, h, reg_lambda, reg_alpha, max_delta_step):
    den = h + reg_lambda
    if den <= 0.0:
        return 0.0
    gt = _t_l1(g, reg_alpha)
    if max_delta_step <= 0.0:
        return gt * gt / den
    w = naive_leaf_weight(g, h, reg_lambda, reg_alpha, max_delta_step)
    return -(2.0 * gt * w + den * w * w)


def naive_split_candidates(H, feat_off, n_value_bins, mask, scales, cfg, min_child_samples):
    """Every admissible candidate of one node, in scan order.

    Returns a list of (gain, feature, bin, default_left, (GL, HL, CL)) where the left
    sums are recomputed from scratch for each candidate (no running sums).
    """
    lam, alpha, mds, mcw, _ = (float(c) for c in cfg)
    sg, sh = float(scales.grad), float(scales.hess)
    n_features = len(n_value_bins)
    f0 = slice(int(feat_off[0]), int(feat_off[1]))
    tg, th, tc = (int(v) for v in H[f0].sum(axis=0))
    parent = naive_leaf_score(tg / sg, th / sh, lam, alpha, mds)
    out = []
    for f in range(n_features):
        if not mask[f]:
            continue
        base = int(feat_off[f])
        nv = int(n_value_bins[f])
        miss = [int(v) for v in H[base + nv]]
        for b in range(nv):
            left_vals = [int(v) for v in H[base:base + b + 1].sum(axis=0)]
            for dl in (0, 1):
                if dl == 1 and (miss[2] == 0 or b == nv - 1):
                    continue  # nothing would move / everything would go left
                if dl == 0 and b == nv - 1 and miss[2] == 0:
                    continue
                cg, ch, cc = left_vals
                if dl:
                    cg, ch, cc = cg + miss[0], ch + miss[1], cc + miss[2]
                if cc < min_child_samples or tc - cc < min_child_samples:
                    continue
                hl, hr = ch / sh, (th - ch) / sh
                if hl < mcw or hr < mcw:
                    continue
                gain = (naive_leaf_score(cg / sg, hl, lam, alpha, mds)
                        + naive_leaf_score((tg - cg) / sg, hr, lam, alpha, mds) - parent)
                out.append((gain, f, b, dl, (cg, ch, cc)))
    return out


def naive_best_split(H, feat_off, n_value_bins, mask, scales, cfg, min_child_samples):
    """Brute-force best split of one node histogram ``H`` (n_bins_total, 3).

    Returns dict(gain, feature, bin, default_left, left_sums, sums); gain is -inf and
    feature -1 when no candidate beats ``min_split_gain`` (``cfg``, a ``SplitSettings``).
    """
    f0 = slice(int(feat_off[0]), int(feat_off[1]))
    sums = tuple(int(v) for v in H[f0].sum(axis=0))
    best = None
    for cand in naive_split_candidates(H, feat_off, n_value_bins, mask, scales, cfg,
                                       min_child_samples):
        if best is None or cand[0] > best[0]:
            best = cand
    if best is None or not best[0] > float(cfg.min_split_gain):
        return {"gain": -math.inf, "feature": -1 if best is None else best[1],
                "bin": -1 if best is None else best[2], "default_left": None,
                "left_sums": None, "sums": sums}
    gain, f, b, dl, lsum = best
    return {"gain": gain, "feature": f, "bin": b, "default_left": dl, "left_sums": lsum,
            "sums": sums}


def naive_level_gains(Hs, feat_off, n_value_bins, mask, scales, cfg, min_child_samples):
    """Oblivious level: summed gain of each (cell, dl) over the nodes ``Hs``; a node
    where the candidate breaks a constraint adds 0; masked features -inf."""
    lam, alpha, mds, mcw, _ = (float(c) for c in cfg)
    sg, sh = float(scales.grad), float(scales.hess)
    out = np.full((int(feat_off[-1]), 2), -math.inf)
    for f in range(len(n_value_bins)):
        if not mask[f]:
            continue
        base = int(feat_off[f])
        nv = int(n_value_bins[f])
        for b in range(nv):
            for dl in (0, 1):
                total = 0.0
                for H in Hs:
                    f0 = slice(int(feat_off[0]), int(feat_off[1]))
                    tg, th, tc = (int(v) for v in H[f0].sum(axis=0))
                    parent = naive_leaf_score(tg / sg, th / sh, lam, alpha, mds)
                    cg, ch, cc = (int(v) for v in H[base:base + b + 1].sum(axis=0))
                    if dl:
                        cg += int(H[base + nv, 0])
                        ch += int(H[base + nv, 1])
                        cc += int(H[base + nv, 2])
                    hl, hr = ch / sh, (th - ch) / sh
                    g = 0.0
                    if (cc >= min_child_samples and tc - cc >= min_child_samples
                            and hl >= mcw and hr >= mcw):
                        g = (naive_leaf_score(cg / sg, hl, lam, alpha, mds)
                             + naive_leaf_score((tg - cg) / sg, hr, lam, alpha, mds) - parent)
                    total += g
                out[base + b, dl] = total
    return out


# ---- partition ------------------------------------------------------------------------

def naive_goes_left(bin_code, bin_threshold, default_left, missing_bin):
    if bin_code == missing_bin:
        return bool(default_left)
    return bin_code <= bin_threshold


# ---- prediction -------------------------------------------------------------------------

def naive_tree_leaf(tree, x):
    """Walk one ``bonsai.tree.Tree`` for the raw row ``x``; returns the leaf node id."""
    node = 0
    while int(tree.left[node]) >= 0:
        v = float(x[int(tree.feature[node])])
        if math.isnan(v):
            go_left = bool(tree.default_left[node])
        else:
            go_left = v <= float(tree.threshold[node])
        node = int(tree.left[node]) if go_left else int(tree.right[node])
    return node


def naive_predict_margin(booster, X):
    """(n, K) raw margins: base score plus every tree's leaf value, in tree order."""
    X = np.asarray(X, dtype=np.float64)
    out = np.empty((X.shape[0], booster.n_outputs))
    out[:] = booster.base_score
    for tree, k in zip(booster.trees, booster.tree_class):
        for r in range(X.shape[0]):
            out[r, k] += float(tree.value[naive_tree_leaf(tree, X[r])])
    return out
