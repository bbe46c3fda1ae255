"""Split scoring shared by the CPU split kernels (``split``: one node's scan,
``split_cat``: categorical sums, ``split_level``: an oblivious level's shared split).

This is a leaf module: the three import it, and it imports none of them.  It owns

* the formulas: leaf weight and score, and a candidate's gain (the gain is
  XGBoost's, Eq. 7 of the XGBoost paper without the 1/2 factor, as both XGBoost and
  LightGBM compare it against ``min_split_gain``)::

      gain = score(G_L, H_L) + score(G_R, H_R) - score(G, H)
      score(G, H) = T(G)^2 / (H + lambda)            (no max_delta_step)
                  = -(2 T(G) w + (H + lambda) w^2)    (w clipped to +-max_delta_step)
      T(G) = sign(G) max(|G| - alpha, 0)

* the cell decode: an integer histogram cell sum -> (grad, hess, count) sums
  (``decode``), and the sum of a set of bins, decoded (``bin_sums``);
* the category-set search of a categorical feature, at one node or summed over an
  oblivious level's nodes (``category_split``).

The settings arrive as the NamedTuples of ``bonsai.split_settings`` (``cfg``:
``SplitSettings``, ``cat``: ``CatSettings``, ``scales``: ``Scales``); numba types
them as homogeneous float64 tuples and the kernels read their fields by name.

Compile time: the scalar helpers are compiled once each with ``forceinline=True``,
which has LLVM inline them wherever they are called (see ``split``'s docstring for
the measurements that chose this).
"""
import numpy as np
from numba import njit

from ...split_settings import SplitSettings

NEG_INF = -np.inf
LOW32 = np.int64(0xFFFFFFFF)


# ---- formulas -----------------------------------------------------------------------

@njit(cache=True, nogil=True, forceinline=True)
def _threshold_l1(g, alpha):
    """``T(g)``: ``g`` shrunk towards 0 by ``alpha``.  Written as selects, not early
    returns (the same value: the tests are the same, in the same order): a 2-node
    scan (1M x 28, 255 bins) with ``reg_alpha`` took 79-87 instead of 114-116 us,
    with ``max_delta_step`` 80-88 instead of 115-117 us."""
    lo = g + alpha if g < -alpha else 0.0
    return g - alpha if g > alpha else lo


@njit(cache=True, nogil=True, forceinline=True)
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


@njit(cache=True, nogil=True)
def leaf_weights(g, h, reg_lambda, reg_alpha, max_delta_step, out):
    """``out[i] = leaf_weight(g[i], h[i], ...)`` over float64 arrays (the grower's
    finished nodes: one call per tree instead of one per node)."""
    for i in range(g.shape[0]):
        out[i] = leaf_weight(g[i], h[i], reg_lambda, reg_alpha, max_delta_step)


@njit(cache=True, nogil=True, forceinline=True)
def leaf_score(g, h, reg_lambda, reg_alpha, max_delta_step):
    den = h + reg_lambda
    if den <= 0.0:
        return 0.0
    gt = _threshold_l1(g, reg_alpha)
    if max_delta_step <= 0.0:
        return gt * gt / den
    w = leaf_weight(g, h, reg_lambda, reg_alpha, max_delta_step)
    return -(2.0 * gt * w + den * w * w)


@njit(cache=True, nogil=True, forceinline=True)
def score(g, h, cfg):
    """``leaf_score`` with the regularisation of the ``SplitSettings`` ``cfg``."""
    return leaf_score(g, h, cfg.reg_lambda, cfg.reg_alpha, cfg.max_delta_step)


@njit(cache=True, nogil=True, forceinline=True)
def plain_gain(cfg):
    """Whether ``cfg`` scores a leaf as ``G^2 / (H + lambda)`` (no ``reg_alpha``, no
    ``max_delta_step``): the gain passes then skip the sign branches of ``T``."""
    return cfg.max_delta_step <= 0.0 and cfg.reg_alpha == 0.0


@njit(cache=True, nogil=True, forceinline=True)
def candidate_gain(cg, ch, tg, th, scales, cfg, parent, plain):
    """``split_gain`` for a candidate whose children already meet
    ``min_child_samples``.  Without ``max_delta_step`` and ``reg_alpha`` (``plain``)
    the score is ``G^2 / (H + lambda)`` with no sign branches (``T(G) = G``): the
    same value bit for bit, and a 2-node leaf-wise scan took 50 instead of 66 us
    (1M x 28, 255 bins; the branches of ``T`` on the sign of G mispredict).  One
    common denominator instead of two divisions was slower (54 us).

    Sums are multiplied by the reciprocals ``scales.inv_grad``, ``scales.inv_hess``
    (a division costs several times more).  Exact-mode scales are powers of two, so
    that is ``x / s`` bit for bit; in packed mode it is one fixed rounding.  (A
    branch between the two forms here made leaf-wise split finding twice slower.)"""
    hl = ch * scales.inv_hess
    hr = (th - ch) * scales.inv_hess
    if hl < cfg.min_child_weight or hr < cfg.min_child_weight:
        return NEG_INF
    gl = cg * scales.inv_grad
    gr = (tg - cg) * scales.inv_grad
    if plain:
        dl = hl + cfg.reg_lambda
        dr = hr + cfg.reg_lambda
        if dl > 0.0 and dr > 0.0:
            return gl * gl / dl + gr * gr / dr - parent
    return score(gl, hl, cfg) + score(gr, hr, cfg) - parent


@njit(cache=True, nogil=True, forceinline=True)
def split_gain(cg, ch, cc, tg, th, tc, scales, cfg, min_child_samples, parent, plain):
    """Gain of sending (cg, ch, cc) left out of the node total (tg, th, tc), or -inf
    when a child breaks ``min_child_samples`` / ``min_child_weight``."""
    if cc < min_child_samples or tc - cc < min_child_samples:
        return NEG_INF
    return candidate_gain(cg, ch, tg, th, scales, cfg, parent, plain)


# ---- cells --------------------------------------------------------------------------

@njit(cache=True, nogil=True, forceinline=True)
def cell_format(scales):
    """(packed, count_bits, count mask) of a tree's ``Scales``: how its cells read."""
    cbits = np.int64(scales.count_bits)
    return scales.packed != 0.0, cbits, (np.int64(1) << cbits) - 1


@njit(cache=True, nogil=True, forceinline=True)
def decode(a, c2, packed, cbits, mask, cnt_factor):
    """(grad, hess, count) of a cell sum.

    Exact mode: ``a`` is the grad sum and ``c2 = hess * 2**cbits + count``.  Packed
    quantized mode: ``a = grad * 2**32 + hess`` and the count is estimated from the
    hessian with the node's rows-per-hessian ``cnt_factor`` (a non-empty sum counts
    at least 1).
    """
    if packed:
        h = a & LOW32
        g = a >> np.int64(32)
        c = np.int64(h * cnt_factor + 0.5)
        if c == 0 and a != 0:
            c = np.int64(1)
        return g, h, c
    return a, c2 >> cbits, c2 & mask


@njit(cache=True, nogil=True)
def bin_sums(H, lo, hi, extra, bits, scales, cnt_factor, out):
    """Decoded (grad, hess, count) sums into ``out (3,)`` of the bins ``lo..hi-1`` of
    one histogram ``H (n_bins, C)`` -- with ``bits`` (uint64 words) only the bins
    ``lo + b`` whose bit b is set -- plus bin ``extra`` when ``extra >= 0``.
    ``cnt_factor``: rows per hessian unit (packed mode's count estimate)."""
    packed, cbits, mask = cell_format(scales)
    a = np.int64(0)
    c2 = np.int64(0)
    for b in range(lo, hi):
        if bits is not None:
            k = b - lo
            if not (bits[k >> 6] >> np.uint64(k & 63)) & np.uint64(1):
                continue
        a += H[b, 0]
        if not packed:
            c2 += H[b, 1]
    if extra >= 0:
        a += H[extra, 0]
        if not packed:
            c2 += H[extra, 1]
    g, h, c = decode(a, c2, packed, cbits, mask, cnt_factor)
    out[0] = g
    out[1] = h
    out[2] = c


@njit(cache=True, nogil=True, forceinline=True)
def node_totals(H, feat_off, scales, n_rows, out):
    """A node's (grad, hess, count) sums into ``out (3,)``, read off feature 0's bins
    (every feature's bins, missing bin included, sum to the node total); in packed
    mode the count is the node's exact row count ``n_rows``."""
    bin_sums(H, feat_off[0], feat_off[1], np.int64(-1), None, scales, 0.0, out)
    if scales.packed != 0.0:
        out[2] = n_rows


# ---- category sets ------------------------------------------------------------------

@njit(cache=True, nogil=True, forceinline=True)
def child_settings(cfg, cat):
    """The children's ``SplitSettings`` of a categorical split: ``reg_lambda +
    cat_l2`` (the parent keeps ``reg_lambda``, as in LightGBM)."""
    return SplitSettings(cfg.reg_lambda + cat.cat_l2, cfg.reg_alpha, cfg.max_delta_step,
                         cfg.min_child_weight, cfg.min_split_gain)


@njit(cache=True, nogil=True, forceinline=True)
def _scaled_cell(H, b, packed, cbits, mask, cf, scales):
    """(grad, hess, count) of bin ``b`` of ``H``, grad and hess scaled to floats."""
    g, h, c = decode(H[b, 0], np.int64(0) if packed else H[b, 1], packed, cbits, mask, cf)
    return g * scales.inv_grad, h * scales.inv_hess, c


@njit(cache=True, nogil=True)
def _usable_categories(hist, slots, base, nv, cfs, scales, cat, used, key):
    """The categories (value bins ``base + b``) with at least ``min_data_per_group``
    rows over the nodes ``slots``, into ``used``, with their sort keys ``G / (H +
    cat_smooth)`` into ``key``; returns how many.  G and H add the nodes' scaled sums
    in node order, starting from the first node's (the same bits as from 0.0: a
    scaled sum is never -0.0).

    The first node is peeled off the node loop: inside it, 250 categories took 0.38
    (one node) and 0.61 us (a one-node level) against 0.28 and 0.36 us like this."""
    packed, cbits, mask = cell_format(scales)
    H0 = hist[slots[0], base:base + nv]
    n_used = 0
    for b in range(nv):
        g, h, c = _scaled_cell(H0, b, packed, cbits, mask, cfs[0], scales)
        for i in range(1, len(slots)):
            dg, dh, dc = _scaled_cell(hist[slots[i], base:base + nv], b, packed, cbits, mask,
                                      cfs[i], scales)
            g += dg
            h += dh
            c += dc
        if c > 0 and c >= cat.min_data_per_group:
            used[n_used] = b
            key[n_used] = g / (h + cat.cat_smooth) if h + cat.cat_smooth > 0.0 else 0.0
            n_used += 1
    return n_used


@njit(cache=True, nogil=True, forceinline=True)
def _add_category(hist, slots, b, packed, reset, la, lc2):
    """``la[i], lc2[i] (+)= `` bin ``b``'s cells of each node ``slots[i]``."""
    for i in range(len(slots)):
        s = slots[i]
        c2 = np.int64(0) if packed else hist[s, b, 1]
        if reset:
            la[i] = hist[s, b, 0]
            lc2[i] = c2
        else:
            la[i] += hist[s, b, 0]
            lc2[i] += c2


@njit(cache=True, nogil=True, forceinline=True)
def _set_gain(slots, la, lc2, tots, parents, cfs, scales, ccfg, min_child_samples, plain,
              level):
    """Gain of sending each node's left cell sums ``la[i], lc2[i]`` left.  One node
    (``level`` False): its gain, -inf where a child breaks a constraint.  A level:
    the sum over its nodes in node order, a node whose child breaks one adding nothing."""
    packed, cbits, mask = cell_format(scales)
    total = 0.0
    for i in range(len(slots)):
        lg, lh, lc = decode(la[i], lc2[i], packed, cbits, mask, cfs[i])
        t = tots[i]
        g = split_gain(lg, lh, lc, t[0], t[1], t[2], scales, ccfg, min_child_samples,
                       parents[i], plain)
        if not level:
            return g
        if g != NEG_INF:
            total += g
    return total


@njit(cache=True, nogil=True)
def category_split(hist, slots, base, nv, tots, parents, cfs, scales, cfg, cat,
                   min_child_samples, level, out_bits, work_i=None, work_f=None):
    """Best set of categories of one feature (value bins ``base..base+nv-1``) to send
    left, at one node (``level`` False) or shared by an oblivious level's nodes
    (``level`` True, gains summed: ``_set_gain``), by LightGBM's rules (one against
    the rest, or prefixes of the ``G / (H + cat_smooth)`` order: ``split_cat``).

    Per node ``i``: its slot ``slots[i]``, decoded sums ``tots[i]`` (3 int64), score
    ``parents[i]`` and rows per hessian unit ``cfs[i]``; arrays for a level, 1-tuples
    for one node (``scan_categorical``): the node count is then a constant and the
    node loops compile away (with 1-arrays a node scan with 6 categorical features
    took 22-23 instead of 20 us).  Writes the set into ``out_bits (W,)`` uint64 (bit b
    of word b // 64: bin b left).  Returns (gain, a, c2): its gain, -inf (no bit set,
    a = c2 = 0) when no set is allowed, and the first node's left cell sums, kept as
    the search goes (a second pass over the bins cost 0.05-0.2 us per feature-node).

    ``work_i (2, >= max(nv, 2 * len(slots)))`` int64 and ``work_f (1, >= nv)`` float64:
    scratch to use instead of allocating (``split.split_work``), or None (each is
    then allocated; numba prunes the branch not taken as it compiles)."""
    packed = scales.packed != 0.0
    ccfg = child_settings(cfg, cat)
    plain = plain_gain(ccfg)
    out_bits[:] = 0
    m = len(slots)
    if work_i is None:
        used = np.empty(nv, np.int64)
        la = np.empty(m, np.int64)
        lc2 = np.empty(m, np.int64)
    else:
        used = work_i[0]
        la = work_i[1, :m]
        lc2 = work_i[1, m:2 * m]
    if work_f is None:
        key = np.empty(nv)
    else:
        key = work_f[0]
    n_used = _usable_categories(hist, slots, base, nv, cfs, scales, cat, used, key)
    best = NEG_INF
    ba = np.int64(0)
    bc2 = np.int64(0)
    if n_used <= 1:
        return best, ba, bc2
    if n_used <= np.int64(cat.max_cat_to_onehot):
        pick = -1
        for k in range(n_used):
            _add_category(hist, slots, base + used[k], packed, True, la, lc2)
            gain = _set_gain(slots, la, lc2, tots, parents, cfs, scales, ccfg,
                             min_child_samples, plain, level)
            if gain > best:
                best, ba, bc2 = gain, la[0], lc2[0]
                pick = used[k]
        if pick >= 0:
            out_bits[pick >> 6] |= np.uint64(1) << np.uint64(pick & 63)
        return best, ba, bc2
    order = np.argsort(key[:n_used], kind="mergesort")     # stable: ties by bin
    best_dir = -1
    best_k = -1
    for direction in range(2):
        for k in range(min(np.int64(cat.max_cat_threshold), n_used - 1)):
            j = order[k] if direction == 0 else order[n_used - 1 - k]
            _add_category(hist, slots, base + used[j], packed, k == 0, la, lc2)
            gain = _set_gain(slots, la, lc2, tots, parents, cfs, scales, ccfg,
                             min_child_samples, plain, level)
            if gain > best:
                best, ba, bc2 = gain, la[0], lc2[0]
                best_dir = direction
                best_k = k
    for k in range(best_k + 1):
        b = used[order[k] if best_dir == 0 else order[n_used - 1 - k]]
        out_bits[b >> 6] |= np.uint64(1) << np.uint64(b & 63)
    return best, ba, bc2


@njit(cache=True, nogil=True)
def scan_categorical(hist, slot, base, nv, tot, cf, scales, cfg, cat, min_child_samples,
                     out_bits, out_lsum, work_i=None, work_f=None):
    """``category_split`` at one node: the histogram ``hist[slot]``, its decoded sums
    ``tot (3,)`` and rows per hessian unit ``cf``.  Also writes the chosen set's
    decoded left sums into ``out_lsum (3,)`` (zeros when there is none).  ``work_i``,
    ``work_f``: scratch as ``category_split``'s, or None."""
    parent = score(tot[0] * scales.inv_grad, tot[1] * scales.inv_hess, cfg)
    gain, a, c2 = category_split(hist, (slot,), base, nv, ((tot[0], tot[1], tot[2]),),
                                 (parent,), (cf,), scales, cfg, cat, min_child_samples, False,
                                 out_bits, work_i, work_f)
    packed, cbits, mask = cell_format(scales)
    out_lsum[0], out_lsum[1], out_lsum[2] = decode(a, c2, packed, cbits, mask, cf)
    return gain
