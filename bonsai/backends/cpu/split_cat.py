"""Native categorical splits: the rules, and the sums of a chosen category set.

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

The search itself is ``_gain.category_split`` (one function for a node's scan,
``split.find_best_splits``, and an oblivious level's shared set,
``split_level.find_level_split_categorical``); ``scan_categorical``, its one-node
form, is re-exported here.  Sums are integer histogram cells added in a fixed order
(the sort is stable, ties by bin), so the result does not depend on threads.

The settings are a ``bonsai.split_settings.CatSettings`` (``max_cat_to_onehot``,
``max_cat_threshold``, ``cat_smooth``, ``cat_l2``, ``min_data_per_group``).
"""
import numpy as np
from numba import njit

from ._gain import bin_sums, scan_categorical

__all__ = ["bits_sums", "scan_categorical"]


@njit(cache=True, nogil=True)
def bits_sums(hist, slots, off, nv, bits, scales, cnt_factor, out):
    """(grad, hess, count) sums of bins ``off + b`` (b < nv) with bit b set in
    ``bits``, per slot; ``cnt_factor`` (m,) rows per hessian unit (packed mode)."""
    for i in range(slots.shape[0]):
        bin_sums(hist[slots[i]], off, off + nv, np.int64(-1), bits, scales, cnt_factor[i],
                 out[i])
