"""Target statistics of categorical values (CatBoost's counters): the kernels behind
``bonsai.preprocessing.OrderedTargetEncoder``.

A category's statistic is ``(sum of its rows' targets + prior * a) / (its rows + a)``
(``a`` the prior weight; one statistic per target column: the positive-class
indicator, each class's indicator, or the value).  The *ordered* statistic of a row
uses only the rows before it in a random permutation, so a row's own target never
leaks into its encoding (CatBoost's ordered boosting idea).  Every sum runs in one
fixed order (row order, or permutation order), so results do not depend on threads.

codes : (n,) int64 -- the row's category index, -1 for missing / unseen
target : (n, S) float64
"""
import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def category_sums(codes, target, n_categories, out_sums, out_counts):
    """Per-category target sums ``out_sums (C, S)`` and row counts ``out_counts (C,)``,
    summed in row order; rows with code -1 are skipped."""
    out_sums[:, :] = 0.0
    out_counts[:] = 0.0
    for i in range(codes.shape[0]):
        c = codes[i]
        if c < 0:
            continue
        out_counts[c] += 1.0
        for s in range(target.shape[1]):
            out_sums[c, s] += target[i, s]


@njit(cache=True, nogil=True)
def encode_full(codes, sums, counts, prior, prior_weight, out, col):
    """``out[i, col + s]`` = the category's statistic over all training rows (the
    prior for code -1)."""
    n_stats = prior.shape[0]
    for i in range(codes.shape[0]):
        c = codes[i]
        for s in range(n_stats):
            if c < 0:
                out[i, col + s] = prior[s]
            else:
                out[i, col + s] = ((sums[c, s] + prior[s] * prior_weight)
                                   / (counts[c] + prior_weight))


@njit(cache=True, nogil=True)
def encode_ordered(codes, target, perm, n_categories, prior, prior_weight, out, col):
    """``out[i, col + s] += `` row i's ordered statistic under permutation ``perm``:
    the statistic of its category over the rows before it in ``perm`` (the prior
    for the first row of a category, and for code -1)."""
    n_stats = prior.shape[0]
    sums = np.zeros((n_categories, n_stats))
    counts = np.zeros(n_categories)
    for k in range(perm.shape[0]):
        i = perm[k]
        c = codes[i]
        if c < 0:
            for s in range(n_stats):
                out[i, col + s] += prior[s]
            continue
        for s in range(n_stats):
            out[i, col + s] += (sums[c, s] + prior[s] * prior_weight) / (counts[c] + prior_weight)
            sums[c, s] += target[i, s]
        counts[c] += 1.0
