"""Numeric pieces of the objectives (``bonsai.objectives``): the compiled gradient /
hessian kernels of the hot losses (squared error, binary logloss, softmax), the
stable sigmoid, and the weighted mean / quantile used for starting margins and L1 /
quantile leaf renewal.  Shapes and dtypes as in ``bonsai.objectives``.
"""
import numpy as np
from numba import njit

_EPS = 1e-15  # floor for probabilities / means before taking logs


# --------------------------------------------------------------------------
# numba kernels for the hot objectives
# --------------------------------------------------------------------------
@njit(cache=True, nogil=True, parallel=False)
def _sq_kernel(y, raw, w, has_w, g, h):  # pragma: no cover - compiled
    n = y.shape[0]
    if has_w:
        for i in range(n):
            g[i] = (raw[i] - y[i]) * w[i]
            h[i] = w[i]
    else:
        for i in range(n):
            g[i] = raw[i] - y[i]
            h[i] = 1.0


@njit(cache=True, nogil=True, parallel=False)
def _neg_abs(raw, out):  # pragma: no cover - compiled
    for i in range(raw.shape[0]):
        out[i] = -abs(raw[i])


@njit(cache=True, nogil=True, parallel=False)
def _binary_kernel(y, raw, e, w, has_w, g, h):  # pragma: no cover - compiled
    # e[i] = exp(-|raw[i]|) (computed by numpy's SIMD exp): stable sigmoid.
    n = y.shape[0]
    for i in range(n):
        inv = 1.0 / (1.0 + e[i])
        p = inv if raw[i] >= 0.0 else e[i] * inv
        gi = p - y[i]
        hi = p * (1.0 - p)
        if has_w:
            gi *= w[i]
            hi *= w[i]
        g[i] = gi
        h[i] = hi


@njit(cache=True, nogil=True, parallel=False)
def _expit(x):  # pragma: no cover - compiled
    """Stable logistic function of a 1-D float64 array (a new array)."""
    out = np.empty_like(x)
    for i in range(x.shape[0]):
        v = x[i]
        if v >= 0:
            out[i] = 1.0 / (1.0 + np.exp(-v))
        else:
            e = np.exp(v)
            out[i] = e / (1.0 + e)
    return out


@njit(cache=True, nogil=True)
def _shift_max(raw, out):  # pragma: no cover - compiled
    # out[k, i] = raw[k, i] - max_k raw[:, i]; row-wise loops vectorise.
    k_out, n = raw.shape
    m = raw[0].copy()
    for k in range(1, k_out):
        rk = raw[k]
        for i in range(n):
            if rk[i] > m[i]:
                m[i] = rk[i]
    for k in range(k_out):
        rk = raw[k]
        ok = out[k]
        for i in range(n):
            ok[i] = rk[i] - m[i]


@njit(cache=True, nogil=True, parallel=False)
def _softmax_kernel(y, e, w, has_w, factor, g, h):  # pragma: no cover
    # e[k, i] = exp(raw[k, i] - max_k raw[:, i]) (numpy's SIMD exp).
    k_out, n = e.shape
    inv = e[0].copy()
    for k in range(1, k_out):  # fixed summation order k = 0..K-1
        ek = e[k]
        for i in range(n):
            inv[i] += ek[i]
    for i in range(n):
        inv[i] = 1.0 / inv[i]
    for k in range(k_out):
        ek = e[k]
        gk = g[k]
        hk = h[k]
        for i in range(n):
            p = ek[i] * inv[i]
            gi = p - 1.0 if y[i] == k else p
            hi = factor * p * (1.0 - p)
            if has_w:
                gi *= w[i]
                hi *= w[i]
            gk[i] = gi
            hk[i] = hi



def _wmean(y, w):
    """Weighted mean of float64 ``y`` (fixed summation order)."""
    if w is None:
        return float(np.sum(y) / y.shape[0]) if y.shape[0] else 0.0
    sw = float(np.sum(w))
    return float(np.sum(y * w) / sw) if sw > 0 else 0.0


def weighted_quantile(x, w, alpha):
    """Weighted ``alpha``-quantile, as used for L1 / quantile boosting.

    Parameters
    ----------
    x : ndarray of shape (n,), float64
        Values.
    w : ndarray of shape (n,), float64, or None
        Non-negative weights; points with zero weight are ignored.
    alpha : float
        Quantile level in [0, 1].

    Returns
    -------
    float
        0.0 for empty input. Without weights (or with all-equal weights) this
        is exactly ``np.quantile(x, alpha)`` (numpy's "linear" method, which
        is what LightGBM uses unweighted). With unequal weights it is the
        inverted-CDF quantile: the smallest sorted value whose cumulative
        weight reaches ``alpha * sum(w)`` (the midpoint of the two candidates
        when it lands exactly on a boundary), an exact minimiser of the
        weighted pinball loss.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.shape[0] == 0:
        return 0.0
    if w is not None:
        w = np.asarray(w, dtype=np.float64)
        if np.all(w == w[0]):
            w = None
    if w is None:
        return float(np.quantile(x, alpha))
    keep = w > 0
    if not np.any(keep):
        return float(np.quantile(x, alpha))
    x, w = x[keep], w[keep]
    order = np.argsort(x, kind="stable")
    xs = x[order]
    cw = np.cumsum(w[order])
    target = alpha * cw[-1]
    i = min(int(np.searchsorted(cw, target, side="left")), xs.shape[0] - 1)
    if i + 1 < xs.shape[0] and cw[i] == target:
        return float(0.5 * (xs[i] + xs[i + 1]))
    return float(xs[i])
