"""CPU kernels of vector-leaf split finding: the best split of a node, and an
oblivious level's shared split, scored by the gain summed over the K outputs.

Cells are ``multi_hist``'s (``[g_0, h_0, g_1, h_1, ...]``, each hessian channel
packing the row count, or the shared-hessian ``[g_0, h, g_1, ...]``, told apart by
their column count: ``gcol`` / ``hcol``); ``sc (4, K)`` holds each output's scales (grad, hess,
1/grad, 1/hess) and ``count_bits`` the shared count packing.  A candidate's gain is

    gain = sum_k [score(G_Lk, H_Lk) + score(G_Rk, H_Rk) - score(G_k, H_k)]

with ``_gain``'s ``score`` (``reg_lambda``, ``reg_alpha``, ``max_delta_step``),
``min_child_samples`` on the row counts and ``min_child_weight`` on the hessians
summed over the outputs.  Every float is computed as the single-output kernels
compute it (``split._gains_plain`` / ``_gain.split_gain``), the outputs added in
order from 0.0, so a K = 1 fit scores, ties and picks exactly as the single-output
path does.  Candidates are visited in the same order (features ascending, bins
ascending, missing values right before left; categorical features after numeric
ones, a numeric split winning ties) and only a strictly higher gain replaces the
best.  A bin without rows leaves the left sums as they were, so its candidates equal
the previous bin's, which already won any tie: they are skipped.

Categorical features: one category against the rest up to ``max_cat_to_onehot``
usable categories, else prefixes (from either end, up to ``max_cat_threshold``) of
the categories sorted by a scalar key.  With one output the key is LightGBM's
``G / (H + cat_smooth)``; with several it is each category's vector of those
ratios projected on their principal direction (count-weighted, found by a fixed
number of power iterations from the all-ones vector): the order along which the
categories' leaf values differ most.
"""
import numpy as np
from numba import njit, prange

from ._gain import NEG_INF, child_settings, leaf_score, leaf_weight, plain_gain
from ._jit import parallel_kernel
from .multi_hist import gcol, hcol

#: power iterations of the categorical key's principal direction
POWER_ITERATIONS = 16


@njit(cache=True, nogil=True, forceinline=True)
def candidate(L, M, use_m, T, n_out, cbits, cmask, sc, cfg, mcs, parents, plain):
    """Gain of sending cells ``L`` (plus ``M`` when ``use_m``) left out of the node's
    ``T``, or -inf when a child breaks ``min_child_samples`` / ``min_child_weight``."""
    nc = T.shape[0]
    lc = L[1] & cmask
    if use_m:
        lc += M[1] & cmask
    tc = T[1] & cmask
    if lc < mcs or tc - lc < mcs:
        return NEG_INF
    hl = 0.0
    hr = 0.0
    total = 0.0
    lam = cfg.reg_lambda
    for k in range(n_out):
        jg = gcol(k, nc, n_out)
        jh = hcol(k, nc, n_out)
        ch = L[jh] >> cbits
        cg = L[jg]
        if use_m:
            ch += M[jh] >> cbits
            cg += M[jg]
        th = T[jh] >> cbits
        hlk = ch * sc[3, k]
        hrk = (th - ch) * sc[3, k]
        hl += hlk
        hr += hrk
        gl = cg * sc[2, k]
        gr = (T[jg] - cg) * sc[2, k]
        if plain:
            dl = hlk + lam
            dr = hrk + lam
            sl = gl * gl / dl if dl > 0.0 else 0.0
            sr = gr * gr / dr if dr > 0.0 else 0.0
            total += sl + sr - parents[k]
        else:
            total += (leaf_score(gl, hlk, lam, cfg.reg_alpha, cfg.max_delta_step)
                      + leaf_score(gr, hrk, lam, cfg.reg_alpha, cfg.max_delta_step)
                      - parents[k])
    if hl < cfg.min_child_weight or hr < cfg.min_child_weight:
        return NEG_INF
    return total


@njit(cache=True, nogil=True)
def parent_scores(T, n_out, cbits, sc, cfg, scaled, out):
    """Each output's node score into ``out (K,)``: from ``sums / scale`` (the numeric
    scan's form) or, with ``scaled``, ``sums * (1 / scale)`` (the categorical one's)."""
    for k in range(n_out):
        g = T[gcol(k, T.shape[0], n_out)]
        h = T[hcol(k, T.shape[0], n_out)] >> cbits
        if scaled:
            out[k] = leaf_score(g * sc[2, k], h * sc[3, k], cfg.reg_lambda, cfg.reg_alpha,
                                cfg.max_delta_step)
        else:
            out[k] = leaf_score(g / sc[0, k], h / sc[1, k], cfg.reg_lambda, cfg.reg_alpha,
                                cfg.max_delta_step)


@njit(cache=True, nogil=True)
def _numeric(H, base, nv, T, n_out, cbits, cmask, sc, cfg, mcs, parents, plain, L, best):
    """Scan one numeric feature's bins; returns (gain, bin, default_left) of its best
    candidate above ``best`` (bin -1 when none beats it)."""
    M = H[base + nv]
    has_m = (M[1] & cmask) != 0
    n_chan = L.shape[0]
    for c in range(n_chan):
        L[c] = 0
    bb = -1
    bdl = 0
    for b in range(nv):
        row = H[base + b]
        for c in range(n_chan):
            L[c] += row[c]
        if b > 0 and (row[1] & cmask) == 0:
            continue            # an empty bin: the previous bin's candidates again
        if b < nv - 1 or has_m:
            g = candidate(L, M, False, T, n_out, cbits, cmask, sc, cfg, mcs, parents, plain)
            if g > best:
                best, bb, bdl = g, b, 0
        if has_m and b < nv - 1:
            g = candidate(L, M, True, T, n_out, cbits, cmask, sc, cfg, mcs, parents, plain)
            if g > best:
                best, bb, bdl = g, b, 1
    return best, bb, bdl


@njit(cache=True, nogil=True)
def _principal(wts, cnt, n_used, n_out, out):
    """``out (K,)``: the principal direction of the count-weighted category vectors
    ``wts[:n_used]`` (power iterations from all ones; all ones when they do not vary)."""
    mean = np.zeros(n_out)
    tot = 0.0
    for j in range(n_used):
        tot += cnt[j]
        for k in range(n_out):
            mean[k] += cnt[j] * wts[j, k]
    for k in range(n_out):
        mean[k] /= tot
    cov = np.zeros((n_out, n_out))
    for j in range(n_used):
        for a in range(n_out):
            da = wts[j, a] - mean[a]
            for b in range(n_out):
                cov[a, b] += cnt[j] * da * (wts[j, b] - mean[b])
    out[:] = 1.0
    nxt = np.empty(n_out)
    for _ in range(POWER_ITERATIONS):
        big = 0.0
        for a in range(n_out):
            s = 0.0
            for b in range(n_out):
                s += cov[a, b] * out[b]
            nxt[a] = s
            big = max(big, abs(s))
        if not big > 0.0:
            out[:] = 1.0
            return
        for a in range(n_out):
            out[a] = nxt[a] / big


@njit(cache=True, nogil=True)
def category_split(hist, slots, base, nv, tots, parents, n_out, cbits, sc, cfg, cat, mcs,
                   level, out_bits, out_left):
    """Best category set of one feature (value bins ``base..base+nv-1``) at one node
    (``level`` False: ``slots`` has one entry) or shared by an oblivious level's
    nodes (gains summed in node order, a node whose child breaks a constraint adding
    nothing).  ``tots (m, C)`` the nodes' cells, ``parents (m, K)`` their scores.
    Writes the set to ``out_bits`` and the first node's left cells to ``out_left``;
    returns the gain (-inf: no set)."""
    m = slots.shape[0]
    n_chan = hist.shape[2]
    cmask = (np.int64(1) << cbits) - 1
    ccfg = child_settings(cfg, cat)
    plain = plain_gain(ccfg)
    out_bits[:] = 0
    out_left[:] = 0
    used = np.empty(nv, np.int64)
    key = np.empty(nv)
    wts = np.empty((nv, n_out))
    cnt = np.empty(nv)
    n_used = 0
    for b in range(nv):
        c = np.int64(0)
        for i in range(m):
            c += hist[slots[i], base + b, 1] & cmask
        if not (c > 0 and c >= cat.min_data_per_group):
            continue
        for k in range(n_out):
            g = 0.0
            h = 0.0
            for i in range(m):
                cell = hist[slots[i], base + b]
                dg = cell[gcol(k, n_chan, n_out)] * sc[2, k]
                dh = (cell[hcol(k, n_chan, n_out)] >> cbits) * sc[3, k]
                if i == 0:
                    g = dg
                    h = dh
                else:
                    g += dg
                    h += dh
            wts[n_used, k] = g / (h + cat.cat_smooth) if h + cat.cat_smooth > 0.0 else 0.0
        used[n_used] = b
        cnt[n_used] = c
        n_used += 1
    best = NEG_INF
    if n_used <= 1:
        return best
    if n_out == 1:
        for j in range(n_used):
            key[j] = wts[j, 0]
    else:
        u = np.empty(n_out)
        _principal(wts, cnt, n_used, n_out, u)
        for j in range(n_used):
            s = 0.0
            for k in range(n_out):
                s += u[k] * wts[j, k]
            key[j] = s
    la = np.zeros((m, n_chan), np.int64)
    zero = np.zeros(n_chan, np.int64)
    onehot = n_used <= np.int64(cat.max_cat_to_onehot)
    order = np.arange(n_used) if onehot else np.argsort(key[:n_used], kind="mergesort")
    n_dir = 1 if onehot else 2
    n_k = n_used if onehot else min(np.int64(cat.max_cat_threshold), n_used - 1)
    best_dir = -1
    best_k = -1
    for direction in range(n_dir):
        for k in range(n_k):
            j = order[k] if direction == 0 else order[n_used - 1 - k]
            for i in range(m):
                cell = hist[slots[i], base + used[j]]
                for c in range(n_chan):
                    if onehot or k == 0:
                        la[i, c] = cell[c]
                    else:
                        la[i, c] += cell[c]
            total = 0.0
            for i in range(m):
                g = candidate(la[i], zero, False, tots[i], n_out, cbits, cmask, sc, ccfg,
                              mcs, parents[i], plain)
                if not level:
                    total = g
                elif g != NEG_INF:
                    total += g
            if total > best:
                best = total
                best_dir = direction
                best_k = k
                for c in range(n_chan):
                    out_left[c] = la[0, c]
    if best_k < 0:
        return best
    first = best_k if onehot else 0
    for k in range(first, best_k + 1):
        b = used[order[k] if best_dir == 0 else order[n_used - 1 - k]]
        out_bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return best


@njit(cache=True, nogil=True)
def best_split(H, hist, slot, feat_off, n_value_bins, mask, is_cat, cat, n_out, cbits, sc, cfg,
               mcs, out_left, out_sums, out_bits):
    """One node's best split over its histogram ``H = hist[slot]``: returns (gain,
    feature, bin, default_left) (gain -inf unless above ``min_split_gain``); writes
    its left cells, its node cells and a categorical split's bitset (bin -1)."""
    n_chan = H.shape[1]
    cmask = (np.int64(1) << cbits) - 1
    plain = plain_gain(cfg)
    T = out_sums
    # node cells: feature 0's bins
    for c in range(n_chan):
        T[c] = 0
    for b in range(feat_off[0], feat_off[1]):
        for c in range(n_chan):
            T[c] += H[b, c]
    parents = np.empty(n_out)
    parent_scores(T, n_out, cbits, sc, cfg, False, parents)
    L = np.empty(n_chan, np.int64)
    best = NEG_INF
    bf = -1
    bb = -1
    bdl = 0
    for f in range(n_value_bins.shape[0]):
        if mask[f] == 0 or (is_cat is not None and is_cat[f] != 0):
            continue
        g, b, dl = _numeric(H, feat_off[f], n_value_bins[f], T, n_out, cbits, cmask, sc, cfg,
                            mcs, parents, plain, L, best)
        if b >= 0:
            best, bf, bb, bdl = g, f, b, dl
    out_bits[:] = 0
    if bf >= 0:
        base = feat_off[bf]
        for c in range(n_chan):
            out_left[c] = 0
        for b in range(bb + 1):
            for c in range(n_chan):
                out_left[c] += H[base + b, c]
        if bdl:
            for c in range(n_chan):
                out_left[c] += H[base + n_value_bins[bf], c]
    if is_cat is not None:
        slots = np.full(1, slot, np.int64)
        tots = np.empty((1, n_chan), np.int64)
        tots[0] = T
        cpar = np.empty((1, n_out))
        parent_scores(T, n_out, cbits, sc, cfg, True, cpar[0])
        bits = np.empty_like(out_bits)
        left = np.empty(n_chan, np.int64)
        for f in range(n_value_bins.shape[0]):
            if mask[f] == 0 or is_cat[f] == 0:
                continue
            g = category_split(hist, slots, feat_off[f], n_value_bins[f], tots, cpar, n_out,
                               cbits, sc, cfg, cat, mcs, False, bits, left)
            if g > best:
                best, bf, bb, bdl = g, f, -1, 0
                out_bits[:] = bits
                out_left[:] = left
    if bf < 0:
        out_left[:] = 0
    return (best if (bf >= 0 and best > cfg.min_split_gain) else NEG_INF), bf, bb, bdl


@parallel_kernel
def scan_nodes(hist, slots, feat_off, n_value_bins, masks, is_cat, cat, n_out, cbits, sc, cfg,
               mcs, out_gain, out_feature, out_bin, out_dl, out_left, out_sums, out_bits):
    """Best split of each node ``slots[i]`` (``best_split``), in parallel over nodes."""
    for i in prange(slots.shape[0]):
        g, f, b, dl = best_split(hist[slots[i]], hist, slots[i], feat_off, n_value_bins,
                                 masks[i], is_cat, cat, n_out, cbits, sc, cfg, mcs, out_left[i],
                                 out_sums[i], out_bits[i])
        out_gain[i] = g
        out_feature[i] = f
        out_bin[i] = b
        out_dl[i] = dl


@njit(cache=True, nogil=True)
def level_totals(hist, slots, feat_off, n_out, cbits, sc, cfg, scaled):
    """A level's nodes' cells ``(m, C)`` (feature 0's bins) and scores ``(m, K)``
    (``parent_scores``, ``scaled`` as there)."""
    m = slots.shape[0]
    n_chan = hist.shape[2]
    tots = np.zeros((m, n_chan), np.int64)
    parents = np.empty((m, n_out))
    for i in range(m):
        H = hist[slots[i]]
        for b in range(feat_off[0], feat_off[1]):
            for c in range(n_chan):
                tots[i, c] += H[b, c]
        parent_scores(tots[i], n_out, cbits, sc, cfg, scaled, parents[i])
    return tots, parents


@parallel_kernel
def level_split(hist, slots, feat_off, n_value_bins, mask, is_cat, n_out, cbits, sc, cfg, mcs,
                out):
    """Summed gain over a level's nodes of every (bin, missing direction) candidate,
    ``out (n_bins_total, 2)`` ([:, 0] missing right), as the single-output
    ``split_level.find_level_split``: a node where a candidate breaks a constraint
    adds 0, masked and categorical features' bins are -inf.  Parallel over features;
    nodes summed in order."""
    m = slots.shape[0]
    n_chan = hist.shape[2]
    cmask = (np.int64(1) << cbits) - 1
    plain = plain_gain(cfg)
    tots, parents = level_totals(hist, slots, feat_off, n_out, cbits, sc, cfg, False)
    for f in prange(n_value_bins.shape[0]):
        base = feat_off[f]
        nv = n_value_bins[f]
        for b in range(feat_off[f + 1] - base):
            out[base + b, 0] = NEG_INF
            out[base + b, 1] = NEG_INF
        if mask[f] == 0 or (is_cat is not None and is_cat[f] != 0):
            continue
        L = np.empty(n_chan, np.int64)
        for i in range(m):
            H = hist[slots[i]]
            M = H[base + nv]
            for c in range(n_chan):
                L[c] = 0
            for b in range(nv):
                for c in range(n_chan):
                    L[c] += H[base + b, c]
                for dl in range(2):
                    g = candidate(L, M, dl == 1, tots[i], n_out, cbits, cmask, sc, cfg, mcs,
                                  parents[i], plain)
                    if g == NEG_INF:
                        g = 0.0
                    cur = out[base + b, dl]
                    if cur == NEG_INF:
                        cur = 0.0
                    out[base + b, dl] = cur + g


@njit(cache=True, nogil=True)
def level_split_categorical(hist, slots, feat_off, n_value_bins, mask, is_cat, cat, n_out,
                            cbits, sc, cfg, mcs, out_gain, out_bits):
    """Best shared category set per categorical feature of an oblivious level
    (``category_split`` with the level's nodes), ``out_gain (F,)``, ``out_bits (F, W)``."""
    n_chan = hist.shape[2]
    tots, parents = level_totals(hist, slots, feat_off, n_out, cbits, sc, cfg, True)
    left = np.empty(n_chan, np.int64)
    out_bits[:, :] = 0
    for f in range(n_value_bins.shape[0]):
        out_gain[f] = NEG_INF
        if is_cat[f] == 0 or mask[f] == 0:
            continue
        out_gain[f] = category_split(hist, slots, feat_off[f], n_value_bins[f], tots, parents,
                                     n_out, cbits, sc, cfg, cat, mcs, True, out_bits[f], left)


@njit(cache=True, nogil=True)
def leaf_values(cells, n_out, cbits, sc, cfg, out_value, out_cover):
    """Each node's K leaf weights ``out_value (n, K)`` (``_gain.leaf_weight`` of
    ``sums / scale``, as the single-output ``Grower._finish``) and its hessian summed
    over the outputs ``out_cover (n,)``."""
    for q in range(cells.shape[0]):
        cov = 0.0
        for k in range(n_out):
            g = cells[q, gcol(k, cells.shape[1], n_out)] / sc[0, k]
            h = (cells[q, hcol(k, cells.shape[1], n_out)] >> cbits) / sc[1, k]
            cov += h
            out_value[q, k] = leaf_weight(g, h, cfg.reg_lambda, cfg.reg_alpha,
                                          cfg.max_delta_step)
        out_cover[q] = cov
