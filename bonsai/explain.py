"""Explanations of a Booster's predictions: SHAP values (``pred_contribs``) and SHAP
interaction values (``pred_interactions``), exact path-dependent TreeSHAP over every
grower, objective and split kind (the kernels: the host backend's ``shap``,
``backends/cpu/shap.py``).

Shapes follow XGBoost: ``(n, F + 1)`` contributions per row (the last column is the
bias: the base margin plus every tree's expected output), ``(n, K, F + 1)`` for K
outputs (one matrix per class); interactions ``(n, F + 1, F + 1)`` /
``(n, K, F + 1, F + 1)`` with the bias at ``[F, F]``.  A row's contributions add up
to its raw margin.  With ordered target statistics (``cat_encoding="ordered"``) the
trees split on CTR features: each one's contribution goes to its categorical source
features (a pair's in halves), so the columns stay the model's input features.
A vector-leaf model (``multi_strategy="multi_output_tree"``) is explained through its
trees' scalar views (``bonsai.tree.expand``): the same values, shapes and bits as
the equivalent one-output-per-tree model.
"""
import contextlib

import numpy as np

from ._threads import resolve_n_threads, thread_context
from .backends import HOST, get_backend, kernels
from .tree import expand

_shap = kernels("shap")
parallel_predict = get_backend(HOST).parallel_predict


def _pick(kernel, n):
    return kernel if parallel_predict(n) else kernel.serial


def _fold(booster, a, axis):
    """``a`` with its CTR-feature entries along ``axis`` (the model's input features
    first, then the CTR features) moved to their categorical sources (a pair's in
    halves): the input features only.  The identity without CTR features."""
    F = booster.n_features
    ctr = booster.ctr
    if ctr is None:
        return a
    a = np.moveaxis(a, axis, 0)
    out = a[:F].copy()
    for e in range(ctr.n_out):
        src = ctr.sources_of(e)
        for j in src:
            out[j] += a[F + e] / len(src)
    return np.moveaxis(out, 0, axis)


def _tree_features(ens):
    """Each tree's distinct split features (concatenated, with pointers)."""
    feats, ptr = [], [0]
    for t in range(ens.tree_offset.shape[0] - 1):
        a, b = ens.tree_offset[t], ens.tree_offset[t + 1]
        f = np.unique(ens.feature[a:b][ens.left[a:b] >= 0]).astype(np.int64)
        feats.append(f)
        ptr.append(ptr[-1] + f.size)
    flat = np.concatenate(feats) if feats else np.zeros(0, np.int64)
    return flat, np.array(ptr, np.int64)


def shap_values(booster, X, iteration_range=None, interactions=False):
    """SHAP values (or interaction values) of the rows of ``X``; see the module
    docstring for the shapes."""
    Xc = booster._check_X(X)
    if hasattr(Xc, "toarray"):   # scipy.sparse: the (n, F + 1) result is dense anyway
        Xc = Xc.toarray()
    Xc = np.ascontiguousarray(Xc, dtype=np.float64)
    t0, t1 = booster._tree_range(iteration_range)
    ens, _ = booster._ensemble(t0, t1)
    trees = expand(booster.trees[t0:t1], booster.tree_class[t0:t1])[0]   # the scalar views
    cover = (np.ascontiguousarray(np.concatenate([t.cover for t in trees]), dtype=np.float64)
             if trees else np.zeros(0))
    n = Xc.shape[0]
    K = booster.n_outputs
    F = booster.n_features
    f_ext = F + (0 if booster.ctr is None else booster.ctr.n_out)
    expected = np.zeros(len(trees))
    _shap.expected_values(ens.left, ens.value, cover, ens.tree_offset, expected)
    bias = np.asarray(booster.base_score, np.float64).copy()
    for t, k in enumerate(ens.tree_class):
        bias[k] += expected[t]
    args = (Xc, ens.feature, ens.threshold, ens.default_left, ens.left, ens.right, ens.value,
            cover, ens.cat_ptr, ens.cat_words, ens.tree_offset, ens.tree_class, ens.tree_depth)
    small = not parallel_predict(n)
    with contextlib.nullcontext() if small else thread_context(
            resolve_n_threads(booster.n_threads)):
        phi = np.zeros((n, K, f_ext))
        _pick(_shap.shap_values, n)(*args, phi)
        if not interactions:
            out = np.empty((n, K, F + 1))
            out[:, :, :F] = _fold(booster, phi, 2)
            out[:, :, F] = bias
            return out[:, 0, :] if K == 1 else out
        inter = np.zeros((n, K, f_ext, f_ext))
        feats, ptr = _tree_features(ens)
        _pick(_shap.shap_interactions, n)(*args, feats, ptr, inter)
    # diagonal: each feature's own effect, so that every row of the matrix sums to
    # the feature's SHAP value
    diag = phi - inter.sum(axis=3)
    idx = np.arange(f_ext)
    inter[:, :, idx, idx] = diag
    out = np.zeros((n, K, F + 1, F + 1))
    out[:, :, :F, :F] = _fold(booster, _fold(booster, inter, 2), 3)
    out[:, :, F, F] = bias
    return out[:, 0] if K == 1 else out
