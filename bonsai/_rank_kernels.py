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


#: runs of this many documents are sorted by insertion, then merged
_RUN = 16
#: a kernel's queries go in this many contiguous chunks, one scratch set each
_CHUNKS = 256


@njit(cache=True, nogil=True)
def _sort_desc(s, a, n, order, tmp):  # pragma: no cover - compiled
    """``order[:n]``: rows a..a+n-1 (as offsets from a) by score, highest first,
    stable (ties in row order): insertion-sorted runs of ``_RUN``, then bottom-up
    merges through ``tmp`` (a right element goes first only when strictly higher)."""
    for lo in range(0, n, _RUN):
        hi = min(n, lo + _RUN)
        for i in range(lo, hi):
            v = s[a + i]
            j = i
            while j > lo and s[a + order[j - 1]] < v:    # strictly lower moves: stable
                order[j] = order[j - 1]
                j -= 1
            order[j] = i
    width = _RUN
    in_tmp = False          # where the sorted runs are now
    while width < n:
        src = tmp if in_tmp else order
        dst = order if in_tmp else tmp
        for lo in range(0, n, 2 * width):
            mid = min(n, lo + width)
            hi = min(n, lo + 2 * width)
            i, j, k = lo, mid, lo
            while i < mid and j < hi:
                if s[a + src[j]] > s[a + src[i]]:
                    dst[k] = src[j]
                    j += 1
                else:
                    dst[k] = src[i]
                    i += 1
                k += 1
            while i < mid:
                dst[k] = src[i]
                i += 1
                k += 1
            while j < hi:
                dst[k] = src[j]
                j += 1
                k += 1
        in_tmp = not in_tmp
        width *= 2
    if in_tmp:
        for i in range(n):
            order[i] = tmp[i]


@njit(cache=True, nogil=True)
def _desc_order(s, a, b):  # pragma: no cover - compiled
    """Rows a..b-1 (as offsets from a) sorted by score, highest first, stable (ties in
    row order), as a new array (``_sort_desc``)."""
    n = b - a
    order = np.empty(n, np.int64)
    _sort_desc(s, a, n, order, np.empty(n, np.int64))
    return order


@njit(cache=True, nogil=True)
def _chunk(nq, c, n_chunks):  # pragma: no cover - compiled
    return nq * c // n_chunks, nq * (c + 1) // n_chunks


@njit(cache=True, nogil=True)
def _largest(ptr, q0, q1):  # pragma: no cover - compiled
    m = 1
    for q in range(q0, q1):
        m = max(m, ptr[q + 1] - ptr[q])
    return m


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
def _lambdarank_query(lab, s, a, cnt, gain, disc, inv, trunc, sigma, norm, w, has_w, g, h,
                      order, tmp, ss, ls, gs, es, lr, hr):  # pragma: no cover - compiled
    """One query's lambdas / hessians, times the rows' weights, into ``g`` / ``h``
    (the rest are scratch buffers of at least ``cnt``)."""
    _sort_desc(s, a, cnt, order, tmp)
    # the query in rank order: scores, labels, gains, e = exp(sigma * (score - best))
    for r in range(cnt):
        d = a + order[r]
        ss[r] = s[d]
        ls[r] = lab[d]
        gs[r] = gain[lab[d]]
    best, worst = ss[0], ss[cnt - 1]
    for r in range(cnt):
        es[r] = math.exp(sigma * (ss[r] - best))
    for r in range(cnt):
        lr[r] = 0.0
        hr[r] = 0.0
    sum_lam = 0.0
    scale = norm and best != worst
    for i in range(min(cnt - 1, trunc)):
        li, si, ei, gi, di = ls[i], ss[i], es[i], gs[i], disc[i]
        acc_l = 0.0
        acc_h = 0.0
        for j in range(i + 1, cnt):
            lj = ls[j]
            if li == lj:
                # equal labels: the pair's gain difference is zero, so every term it
                # would add is an exact zero (skipping it changes no bit)
                continue
            # sgn = +1: i is the pair's more relevant document, -1: j is
            sgn = 1.0 if li > lj else -1.0
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
        d = a + order[r]
        gi = lr[r] * f
        hi = hr[r] * f
        if has_w:
            gi *= w[d]
            hi *= w[d]
        g[d] = gi
        h[d] = hi


@njit(cache=True, nogil=True, parallel=True)
def lambdarank_grad(ptr, lab, s, w, has_w, gain, disc, inv_max_dcg, trunc, sigma, norm,
                    g, h):  # pragma: no cover - compiled
    """Every query's lambdarank gradients / hessians into ``g`` / ``h``: contiguous
    chunks of queries in parallel, each with one set of scratch buffers, each query
    computed serially (``_lambdarank_query``)."""
    nq = ptr.shape[0] - 1
    n_chunks = min(nq, _CHUNKS)
    for c in prange(n_chunks):
        q0, q1 = _chunk(nq, c, n_chunks)
        m = _largest(ptr, q0, q1)
        order = np.empty(m, np.int64)
        tmp = np.empty(m, np.int64)
        ls = np.empty(m, np.int64)
        ss = np.empty(m)
        gs = np.empty(m)
        es = np.empty(m)
        lr = np.empty(m)
        hr = np.empty(m)
        for q in range(q0, q1):
            a, b = ptr[q], ptr[q + 1]
            cnt = b - a
            if cnt > 1 and inv_max_dcg[q] > 0.0:
                _lambdarank_query(lab, s, a, cnt, gain, disc, inv_max_dcg[q], trunc, sigma,
                                  norm, w, has_w, g, h, order, tmp, ss, ls, gs, es, lr, hr)
            else:
                for i in range(a, b):
                    g[i] = 0.0
                    h[i] = 0.0


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
