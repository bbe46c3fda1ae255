"""Compiled kernels of learning to rank: per-query gradients of ``lambdarank``,
``rank_pairwise`` and ``rank_xendcg``, and the per-query ``ndcg@k`` / ``map@k``.

Every kernel runs a ``prange`` over queries; each query is computed serially in a fixed
order (its documents sorted by score with a stable sort, ties kept in row order) and
writes only its own rows, so the results are the same bits at any thread count.
``ptr`` is the int64 ``(Q + 1,)`` query boundaries (``bonsai._groups``), ``lab`` the
int64 relevance labels, ``s`` the float64 scores; gradients and hessians are written
as float32 into ``g`` / ``h`` (``(n,)`` views of the boosting loop's ``(K, n)``
arrays).  Semantics (see ``bonsai.rank_objectives``): LightGBM's lambdarank and
XE-NDCG-MART, and the RankNet pairwise logistic loss.
"""
import math

import numpy as np
from numba import njit, prange

_XE_EPS = 1e-15


_INSERTION_MAX = 128    # queries up to this size are sorted by insertion


@njit(cache=True, nogil=True)
def _desc_order(s, a, b):  # pragma: no cover - compiled
    """Rows a..b-1 (as offsets from a) sorted by score, highest first, stable (ties in
    row order): an insertion sort for small queries, a merge sort above."""
    n = b - a
    if n > _INSERTION_MAX:
        neg = np.empty(n)
        for i in range(n):
            neg[i] = -s[a + i]
        return np.argsort(neg, kind="mergesort")
    order = np.empty(n, np.int64)
    for i in range(n):
        v = s[a + i]
        j = i
        while j > 0 and s[a + order[j - 1]] < v:    # strictly lower moves: stable
            order[j] = order[j - 1]
            j -= 1
        order[j] = i
    return order


@njit(cache=True, nogil=True)
def max_dcg(lab, a, b, k, gain, disc):  # pragma: no cover - compiled
    """DCG at ``k`` of rows a..b-1 in their ideal order (labels highest first)."""
    ls = np.sort(lab[a:b])[::-1]
    m = min(k, b - a)
    out = 0.0
    for r in range(m):
        out += gain[ls[r]] * disc[r]
    return out


@njit(cache=True, nogil=True, parallel=True)
def inverse_max_dcgs(ptr, lab, k, gain, disc):  # pragma: no cover - compiled
    """float64 (Q,): 1 / (max DCG at k) per query, 0 where it is 0."""
    nq = ptr.shape[0] - 1
    out = np.zeros(nq)
    for q in prange(nq):
        m = max_dcg(lab, ptr[q], ptr[q + 1], k, gain, disc)
        out[q] = 1.0 / m if m > 0.0 else 0.0
    return out


@njit(cache=True, nogil=True)
def _write(lam, hes, a, w, has_w, g, h):  # pragma: no cover - compiled
    for i in range(lam.shape[0]):
        gi, hi = lam[i], hes[i]
        if has_w:
            gi *= w[a + i]
            hi *= w[a + i]
        g[a + i] = gi
        h[a + i] = hi


@njit(cache=True, nogil=True)
def _lambdarank_query(lab, s, a, cnt, gain, disc, inv, trunc, sigma, norm, lam, hes):
    # pragma: no cover - compiled
    """One query's lambdas / hessians (by row, into ``lam`` / ``hes``, zeroed)."""
    order = _desc_order(s, a, a + cnt)
    # the query in rank order: scores, labels, gains, e = exp(sigma * (score - best))
    ss = np.empty(cnt)
    ls = np.empty(cnt, np.int64)
    gs = np.empty(cnt)
    es = np.empty(cnt)
    for r in range(cnt):
        d = a + order[r]
        ss[r] = s[d]
        ls[r] = lab[d]
        gs[r] = gain[lab[d]]
    best, worst = ss[0], ss[cnt - 1]
    for r in range(cnt):
        es[r] = math.exp(sigma * (ss[r] - best))
    lr = np.zeros(cnt)
    hr = np.zeros(cnt)
    sum_lam = 0.0
    scale = norm and best != worst
    for i in range(min(cnt - 1, trunc)):
        li, si, ei, gi, di = ls[i], ss[i], es[i], gs[i], disc[i]
        acc_l = 0.0
        acc_h = 0.0
        for j in range(i + 1, cnt):
            lj = ls[j]
            # sgn = +1: i is the pair's more relevant document, -1: j is, 0: equal
            # labels (the pair adds nothing: its gain difference is zero)
            sgn = 1.0 if li > lj else (-1.0 if li < lj else 0.0)
            base = sgn * (gi - gs[j]) * abs(di - disc[j]) * inv   # the pair's |delta NDCG|
            nrm = 0.01 + abs(si - ss[j]) if scale else 1.0
            den = ei + es[j]
            if den > 1e-150:
                # p = 1 / (1 + exp(sigma * (s_high - s_low))) = e_low / den and
                # 1 - p = e_high / den: one division gives dndcg * p and the hessian
                e_lo = es[j] if li > lj else ei
                q = 1.0 / (nrm * den * den)
                dp = base * e_lo * den * q
                ph = sigma * sigma * base * e_lo * (den - e_lo) * q
            else:             # both documents far below the best: exp() directly
                p = 1.0 / (1.0 + math.exp(sigma * sgn * (si - ss[j])))
                dp = base / nrm * p
                ph = sigma * sigma * dp * (1.0 - p)
            pl = -sigma * dp
            acc_l += sgn * pl
            acc_h += ph
            lr[j] -= sgn * pl
            hr[j] += ph
            sum_lam -= 2.0 * pl
        lr[i] += acc_l
        hr[i] += acc_h
    f = math.log2(1.0 + sum_lam) / sum_lam if norm and sum_lam > 0.0 else 1.0
    for r in range(cnt):
        lam[order[r]] = lr[r] * f
        hes[order[r]] = hr[r] * f


@njit(cache=True, nogil=True, parallel=True)
def lambdarank_grad(ptr, lab, s, w, has_w, gain, disc, inv_max_dcg, trunc, sigma, norm,
                    g, h):  # pragma: no cover - compiled
    nq = ptr.shape[0] - 1
    for q in prange(nq):
        a, b = ptr[q], ptr[q + 1]
        cnt = b - a
        lam = np.zeros(cnt)
        hes = np.zeros(cnt)
        if cnt > 1 and inv_max_dcg[q] > 0.0:
            _lambdarank_query(lab, s, a, cnt, gain, disc, inv_max_dcg[q], trunc, sigma,
                              norm, lam, hes)
        _write(lam, hes, a, w, has_w, g, h)


@njit(cache=True, nogil=True, parallel=True)
def pairwise_grad(ptr, lab, s, w, has_w, sigma, g, h):  # pragma: no cover - compiled
    nq = ptr.shape[0] - 1
    for q in prange(nq):
        a, b = ptr[q], ptr[q + 1]
        cnt = b - a
        lam = np.zeros(cnt)
        hes = np.zeros(cnt)
        for i in range(cnt):
            for j in range(i + 1, cnt):
                li, lj = lab[a + i], lab[a + j]
                if li == lj:
                    continue
                hi_d, lo_d = (i, j) if li > lj else (j, i)
                p = 1.0 / (1.0 + math.exp(sigma * (s[a + hi_d] - s[a + lo_d])))
                ph = sigma * sigma * p * (1.0 - p)
                lam[hi_d] -= sigma * p
                lam[lo_d] += sigma * p
                hes[hi_d] += ph
                hes[lo_d] += ph
        _write(lam, hes, a, w, has_w, g, h)


@njit(cache=True, nogil=True)
def _uniform(seed, row):  # pragma: no cover - compiled
    """A uniform draw in [0, 1) from a splitmix64 hash of (seed, row)."""
    z = np.uint64(seed) + np.uint64(row + 1) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    return float(z >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@njit(cache=True, nogil=True, parallel=True)
def xendcg_grad(ptr, lab, s, w, has_w, seed, row0, g, h):  # pragma: no cover - compiled
    nq = ptr.shape[0] - 1
    for q in prange(nq):
        a, b = ptr[q], ptr[q + 1]
        cnt = b - a
        lam = np.zeros(cnt)
        hes = np.zeros(cnt)
        if cnt > 1:
            mx = s[a]
            for i in range(1, cnt):
                mx = max(mx, s[a + i])
            rho = np.empty(cnt)
            tot = 0.0
            for i in range(cnt):
                rho[i] = math.exp(s[a + i] - mx)
                tot += rho[i]
            phi = np.empty(cnt)
            sum_phi = 0.0
            for i in range(cnt):
                rho[i] /= tot
                phi[i] = 2.0 ** lab[a + i] - _uniform(seed, row0 + a + i)
                sum_phi += phi[i]
            inv = 1.0 / (sum_phi + _XE_EPS)
            par = np.empty(cnt)
            s1 = 0.0
            for i in range(cnt):        # first-order terms
                t = rho[i] - phi[i] * inv
                lam[i] = t
                par[i] = t / max(1.0 - rho[i], _XE_EPS)
                s1 += par[i]
            s2 = 0.0
            for i in range(cnt):        # second-order terms
                t = rho[i] * (s1 - par[i])
                lam[i] += t
                par[i] = t / max(1.0 - rho[i], _XE_EPS)
                s2 += par[i]
            for i in range(cnt):        # third-order terms
                lam[i] += rho[i] * (s2 - par[i])
                hes[i] = rho[i] * (1.0 - rho[i])
        _write(lam, hes, a, w, has_w, g, h)


@njit(cache=True, nogil=True, parallel=True)
def ndcg_per_query(ptr, lab, s, k, gain, disc, out):  # pragma: no cover - compiled
    """out[q] = NDCG@k of query q (1 where no document is relevant)."""
    nq = ptr.shape[0] - 1
    for q in prange(nq):
        a, b = ptr[q], ptr[q + 1]
        m = max_dcg(lab, a, b, k, gain, disc)
        if m <= 0.0:
            out[q] = 1.0
            continue
        order = _desc_order(s, a, b)
        dcg = 0.0
        for r in range(min(k, b - a)):
            dcg += gain[lab[a + order[r]]] * disc[r]
        out[q] = dcg / m


@njit(cache=True, nogil=True, parallel=True)
def map_per_query(ptr, lab, s, k, out):  # pragma: no cover - compiled
    """out[q] = average precision at k of query q (relevant: label > 0; 1 where no
    document is relevant)."""
    nq = ptr.shape[0] - 1
    for q in prange(nq):
        a, b = ptr[q], ptr[q + 1]
        n_rel = 0
        for i in range(a, b):
            if lab[i] > 0:
                n_rel += 1
        if n_rel == 0:
            out[q] = 1.0
            continue
        order = _desc_order(s, a, b)
        hits = 0
        acc = 0.0
        for r in range(min(k, b - a)):
            if lab[a + order[r]] > 0:
                hits += 1
                acc += hits / (r + 1.0)
        out[q] = acc / min(k, n_rel)
