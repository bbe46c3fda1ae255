"""CPU kernels of exact path-dependent TreeSHAP (Lundberg, Erion and Lee 2018,
"Consistent individualized feature attribution for tree ensembles", Algorithm 2)
and of SHAP interaction values (the same recursion with one feature conditioned on
or off).

A tree's value for a coalition S of features is the expectation of its output when
the features outside S follow each split in proportion to the training cover (the
hessian sums) of its children; the recursion carries, along the root-to-leaf path,
each distinct feature's fraction of zero (feature absent: cover ratio) and one
(feature present: the branch the row takes) paths and the permutation weights of the
path's subsets (``_extend`` adds a feature, ``_unwind`` removes one), which gives every
feature's Shapley value in O(leaves * depth^2) per tree and row.

Rows run in parallel (one row per task, trees in order), each sum in a fixed order,
so results do not depend on threads.  Path buffers are one ``(depth + 2, depth + 2)``
block per tree walk (row d holds the path of the node at depth d).
"""
import numpy as np
from numba import njit, prange

from ._jit import parallel_kernel
from .predict import _go_left


@njit(cache=True, nogil=True, inline="always")
def _extend(pf, pz, po, pw, d, n, zero, one, feat):
    """Append (feat, zero, one) to path row d of length n (becomes n + 1) and update
    the subset weights."""
    pf[d, n] = feat
    pz[d, n] = zero
    po[d, n] = one
    pw[d, n] = 1.0 if n == 0 else 0.0
    inv = 1.0 / (n + 1)
    for i in range(n - 1, -1, -1):
        pw[d, i + 1] += one * pw[d, i] * ((i + 1) * inv)
        pw[d, i] = zero * pw[d, i] * ((n - i) * inv)


@njit(cache=True, nogil=True, inline="always")
def _unwind(pf, pz, po, pw, d, n, k):
    """Remove element k from path row d of length n (becomes n - 1), undoing its
    ``_extend`` in the weights."""
    one = po[d, k]
    zero = pz[d, k]
    last = n - 1
    nxt = pw[d, last]
    for i in range(last - 1, -1, -1):
        if one != 0.0:
            tmp = pw[d, i]
            pw[d, i] = nxt * n / ((i + 1) * one)
            nxt = tmp - pw[d, i] * zero * (last - i) / n
        else:
            pw[d, i] = pw[d, i] * n / (zero * (last - i))
    for i in range(k, last):
        pf[d, i] = pf[d, i + 1]
        pz[d, i] = pz[d, i + 1]
        po[d, i] = po[d, i + 1]


@njit(cache=True, nogil=True, inline="always")
def _leaf_add(pf, pz, po, pw, d, n, v, inv, phi):
    """At a leaf with path row d of length n: ``phi[feature of element k] +=``
    (its one fraction - its zero fraction) * v * (the path's weights summed with
    element k unwound), for every element but the root's placeholder.

    Unwinding an element of one fraction 0 divides each weight by its
    ``zero * (n - 1 - i) / n``, so those sums share one pass (``cold``); an element
    of one fraction 1 (on the row's own path) takes its own O(n) pass.  ``inv[i]`` is
    ``1 / i``: multiplications instead of divisions in the inner loops."""
    last = n - 1
    cold = 0.0
    for i in range(last):
        cold += pw[d, i] * inv[last - i]
    for k in range(1, n):
        one = po[d, k]
        zero = pz[d, k]
        if one != 0.0:
            a = n / one
            b = zero * inv[n]
            nxt = pw[d, last]
            total = 0.0
            for i in range(last - 1, -1, -1):
                tmp = nxt * a * inv[i + 1]
                total += tmp
                nxt = pw[d, i] - tmp * b * (last - i)
        else:
            total = cold * n / zero
        phi[pf[d, k]] += total * (one - zero) * v


@njit(cache=True, nogil=True)
def _tree_shap(x, base, feature, threshold, default_left, left, right, value, cover, cat_ptr,
               cat_words, cond, cond_feat, phi, pf, pz, po, pw, s_node, s_d, s_n, s_zero, s_one,
               s_feat, s_frac, inv):
    """Add one tree's SHAP values for row ``x`` to ``phi (F,)``.

    The paper's recursion as a depth-first walk with an explicit stack (numba's
    cached code of a recursive function crashed when it was loaded back): a frame is
    a node, its depth d, its parent's path length n, the (zero, one) fractions and
    the feature its parent's split adds to the path, and the conditioning fraction.
    ``cond`` 0: plain SHAP; +1 / -1: feature ``cond_feat`` held present / absent
    (never put on the path; its effect is carried by the conditioning fraction).
    Path row d - 1 is intact when a node at depth d is popped: everything walked in
    between lies deeper.  The path rows ``pf, pz, po, pw (D + 2, D + 2)`` and the
    stack ``s_* (2 D + 6,)`` are scratch of the caller (D: the deepest tree)."""
    s_node[0] = 0
    s_d[0] = 0
    s_n[0] = 0
    s_zero[0] = 1.0
    s_one[0] = 1.0
    s_feat[0] = -1
    s_frac[0] = 1.0
    top = 1
    while top > 0:
        top -= 1
        frac = s_frac[top]
        if frac == 0.0:
            continue
        node = s_node[top]
        d = s_d[top]
        n = s_n[top]
        feat = s_feat[top]
        if d > 0:
            for i in range(n):
                pf[d, i] = pf[d - 1, i]
                pz[d, i] = pz[d - 1, i]
                po[d, i] = po[d - 1, i]
                pw[d, i] = pw[d - 1, i]
        if cond == 0 or feat != cond_feat:
            _extend(pf, pz, po, pw, d, n, s_zero[top], s_one[top], feat)
            n += 1
        j = base + node
        if left[j] < 0:
            _leaf_add(pf, pz, po, pw, d, n, value[j] * frac, inv, phi)
            continue
        f = feature[j]
        if _go_left(x[f], j, threshold, default_left, cat_ptr, cat_words):
            hot = left[j]
            cold = right[j]
        else:
            hot = right[j]
            cold = left[j]
        c = cover[j]
        hot_zero = cover[base + hot] / c if c > 0.0 else 0.5
        cold_zero = cover[base + cold] / c if c > 0.0 else 0.5
        in_zero = 1.0
        in_one = 1.0
        for k in range(1, n):       # a feature met before on this path: undo it
            if pf[d, k] == f:
                in_zero = pz[d, k]
                in_one = po[d, k]
                _unwind(pf, pz, po, pw, d, n, k)
                n -= 1
                break
        hot_frac = frac
        cold_frac = frac
        if cond > 0 and f == cond_feat:
            cold_frac = 0.0
        elif cond < 0 and f == cond_feat:
            hot_frac *= hot_zero
            cold_frac *= cold_zero
        # the cold child below the hot one: the hot subtree is walked first.  A child
        # whose (zero, one) fractions are both 0 (no cover, not on the row's path)
        # adds exactly nothing, and unwinding it would divide by zero: skipped
        conditioned = cond != 0 and f == cond_feat
        if cold_zero * in_zero != 0.0 or conditioned:
            s_node[top] = cold
            s_d[top] = d + 1
            s_n[top] = n
            s_zero[top] = cold_zero * in_zero
            s_one[top] = 0.0
            s_feat[top] = f
            s_frac[top] = cold_frac
            top += 1
        if hot_zero * in_zero != 0.0 or in_one != 0.0 or conditioned:
            s_node[top] = hot
            s_d[top] = d + 1
            s_n[top] = n
            s_zero[top] = hot_zero * in_zero
            s_one[top] = in_one
            s_feat[top] = f
            s_frac[top] = hot_frac
            top += 1


@njit(cache=True, nogil=True)
def _scratch(tree_depth):
    """A walk's path rows and stack, sized for the deepest tree."""
    depth = 0
    for t in range(tree_depth.shape[0]):
        depth = max(depth, tree_depth[t])
    m = depth + 2
    cap = 2 * m + 2
    inv = np.zeros(m + 2)
    for i in range(1, m + 2):
        inv[i] = 1.0 / i
    return (np.empty((m, m), np.int64), np.empty((m, m)), np.empty((m, m)), np.empty((m, m)),
            np.empty(cap, np.int64), np.empty(cap, np.int64), np.empty(cap, np.int64),
            np.empty(cap), np.empty(cap), np.empty(cap, np.int64), np.empty(cap), inv)


@njit(cache=True, nogil=True)
def expected_values(left, value, cover, tree_offset, out):
    """``out[t]``: tree t's mean output over its training cover (the value of the
    empty coalition): leaves weighted by cover / root cover."""
    for t in range(tree_offset.shape[0] - 1):
        base = tree_offset[t]
        root = cover[base]
        s = 0.0
        for j in range(base, tree_offset[t + 1]):
            if left[j] < 0:
                s += value[j] * (cover[j] / root if root > 0.0 else 0.0)
        out[t] = s


@parallel_kernel
def shap_values(X, feature, threshold, default_left, left, right, value, cover, cat_ptr,
                cat_words, tree_offset, tree_class, tree_depth, out):
    """SHAP values of every row: ``out[r, k, f] +=`` feature f's contribution to
    output k (trees of class k, in order).  out : (n, K, F_out) float64, IN/OUT
    (F_out >= the largest feature index + 1; the bias column is the caller's)."""
    n_trees = tree_offset.shape[0] - 1
    for r in prange(X.shape[0]):
        x = X[r]
        pf, pz, po, pw, s_node, s_d, s_n, s_zero, s_one, s_feat, s_frac, inv = _scratch(
            tree_depth)
        for t in range(n_trees):
            _tree_shap(x, tree_offset[t], feature, threshold, default_left, left, right, value,
                       cover, cat_ptr, cat_words, 0, -1, out[r, tree_class[t]], pf, pz, po, pw,
                       s_node, s_d, s_n, s_zero, s_one, s_feat, s_frac, inv)


@parallel_kernel
def shap_interactions(X, feature, threshold, default_left, left, right, value, cover, cat_ptr,
                      cat_words, tree_offset, tree_class, tree_depth, tree_features,
                      tree_feat_ptr, out):
    """SHAP interaction values without the diagonal: ``out[r, k, i, j] +=``
    (phi_i with j present - phi_i with j absent) / 2 for every feature j a tree
    splits on (``tree_features[tree_feat_ptr[t]:tree_feat_ptr[t+1]]``).  The caller
    fills the diagonal from the SHAP values.  out : (n, K, F_out, F_out)."""
    n_trees = tree_offset.shape[0] - 1
    f_out = out.shape[2]
    for r in prange(X.shape[0]):
        x = X[r]
        on = np.empty(f_out)
        off = np.empty(f_out)
        pf, pz, po, pw, s_node, s_d, s_n, s_zero, s_one, s_feat, s_frac, inv = _scratch(
            tree_depth)
        for t in range(n_trees):
            k = tree_class[t]
            for q in range(tree_feat_ptr[t], tree_feat_ptr[t + 1]):
                j = tree_features[q]
                on[:] = 0.0
                off[:] = 0.0
                _tree_shap(x, tree_offset[t], feature, threshold, default_left, left, right,
                           value, cover, cat_ptr, cat_words, 1, j, on, pf, pz, po, pw, s_node,
                           s_d, s_n, s_zero, s_one, s_feat, s_frac, inv)
                _tree_shap(x, tree_offset[t], feature, threshold, default_left, left, right,
                           value, cover, cat_ptr, cat_words, -1, j, off, pf, pz, po, pw,
                           s_node, s_d, s_n, s_zero, s_one, s_feat, s_frac, inv)
                for i in range(f_out):
                    if i != j:
                        out[r, k, i, j] += (on[i] - off[i]) / 2.0
