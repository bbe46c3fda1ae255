"""One boosting round (``boosting._boost`` calls ``grow_round`` once per round): the
round's row sample, then per output (or once, for vector leaves) the integer cells,
the grown tree, leaf renewal, shrinkage, the divergence check, and the margins of the
training rows, the out-of-bag rows and the valid sets.

    rows <- subsample (a hash of seed, round and global row id)
    per output k:  quantize -> grow one tree -> (renew L1 leaves) -> shrink
                   raw[k] += leaf values over each leaf's row range
    vector leaves: quantize every output -> grow ONE tree (K values a node) -> shrink
                   raw[k] += column k of the leaf values, every k
"""
import math

import numpy as np

from . import comm as _comm_mod
from ._dtypes import IDX
from ._profile import stage
from .class_trees import grow_side_by_side, side_growers
from .io.model_file import add_margin_range, margin_bounds
from .nodes import shrink_values


def _seed(random_state, it, k):
    """A 64-bit seed for the stochastic rounding of tree (it, k) (k = -1: the round's
    row subsample)."""
    salt = 0x51 if k >= 0 else 0x5A
    return int(np.random.default_rng([random_state, it, max(k, 0), salt]).integers(0, 2 ** 63))


def _sample_rows(backend, p, it, n, n_all, segs, comm, out):
    """The round's rows: (sorted local rows or None for all of them, rows over every
    shard; ``n_all``: every shard's rows).  Each row is kept when a hash of (seed, round, global row id) falls below
    ``subsample`` (``backend.sample_rows``), so the sample does not depend on how the
    rows are split; a sample empty over every shard takes every row instead."""
    if p.subsample >= 1.0:
        return None, n_all
    k = backend.sample_rows(n, segs, p.subsample, _seed(p.random_state, it, -1), out)
    k_all = _sum_int(comm, k)
    if k_all == 0:
        return None, n_all
    return out[:k].copy(), k_all


def _sum_int(comm, x):
    return int(comm.allreduce_sum(np.array([x], np.int64))[0])


def grow_round(p, booster, objective, grower, backend, y, w, raw, evals, grad, hess, it,
                k_out, enc, comm, segs, n_all, scores):
    builder = grower.builder
    idx_buf = builder.idx_buf
    rows, n_total = _sample_rows(backend, p, it, y.shape[0], n_all, segs, comm, idx_buf)
    n_rows = y.shape[0] if rows is None else rows.shape[0]
    oob = None
    if rows is not None and rows.shape[0] < y.shape[0]:
        mask = np.ones(y.shape[0], bool)
        mask[rows] = False
        oob = np.flatnonzero(mask).astype(IDX)
    if grower.n_values is not None:
        _grow_vector(p, booster, objective, grower, backend, evals, it, k_out, comm, n_rows,
                     n_total, rows, oob, scores)
        return
    growers = side_growers(grower, p, k_out, comm, objective)
    if growers is not None:     # small data: the class trees side by side
        grown = grow_side_by_side(growers, k_out, lambda g, k: _grow_output(
            p, g, scores, backend, objective, k, it, n_rows, n_total, rows, oob, evals,
            y, w, raw, grad, hess, comm, segs, None))
        for k, (tree, vrange) in enumerate(grown):
            _check_margins(booster, scores, tree, k, it, p, vrange)
            booster._append(tree if enc is None else enc.to_model(tree), k)
        return
    for k in range(k_out):
        tree, _ = _grow_output(p, grower, scores, backend, objective, k, it, n_rows, n_total,
                               rows, oob, evals, y, w, raw, grad, hess, comm, segs,
                               lambda t, r, k=k: _check_margins(booster, scores, t, k, it, p, r))
        booster._append(tree if enc is None else enc.to_model(tree), k)


def _grow_output(p, grower, scores, backend, objective, k, it, n_rows, n_total, rows, oob,
                 evals, y, w, raw, grad, hess, comm, segs, check):
    """Output k's tree of round ``it`` with ``grower``: its cells, the tree, leaf
    renewal, shrinkage, ``check(tree, value_range)`` (None: the caller checks), and
    output k's margins of the training, out-of-bag and valid rows.  Returns (the tree,
    its shrunk values' (min, max))."""
    builder = grower.builder
    seed = _seed(p.random_state, it, k) if p.quantized_grad else 0  # rounding seed
    scales = _quantized(objective, it, lambda: scores.quantize(
        builder, k, n_total, p.grad_quant_bins, seed, comm, segs))
    idx = _tree_rows(scores, builder, n_rows, rows)
    tree, leaves, l0, l1 = grower.grow(scales, idx, n_total, (p.random_state, it, k))
    if p.quantized_grad:
        with stage("renew_leaves"):
            grower.renew_exact(tree, leaves, l0, l1, grad[k], hess[k], idx)
    if objective.renew_leaf is not None:
        with stage("renew_leaves"):
            _renew_leaves(objective, tree, leaves, l0, l1, idx, y, w, raw[k], comm,
                          segs)
    vrange = shrink_values(tree.value, p.learning_rate)
    if check is not None:
        check(tree, vrange)
    with stage("score_update"):
        scores.add_leaf_values(k, idx, l0, l1, tree.value[leaves])
        if oob is not None:
            backend.predict_binned_add(builder.X_cols, oob, tree, grower.bm.missing_bin,
                                       raw[k])
    with stage("eval_predict"):
        for ev in evals:
            backend.predict_binned_add(ev.X_cols, ev.rows, tree, grower.bm.missing_bin,
                                       ev.raw[k])
    return tree, vrange


def _quantized(objective, it, quantize):
    """``quantize()`` (a tree's integer cells, returning its scales) as the
    ``quantize`` stage; non-finite gradients are a ValueError: the model diverged."""
    with stage("quantize"):
        try:
            return quantize()
        except FloatingPointError:
            raise ValueError(
                f"gradients became non-finite at iteration {it} (objective="
                f"{objective.name!r}): the model diverged; lower learning_rate or set "
                "max_delta_step") from None


def _tree_rows(scores, builder, n_rows, rows):
    """The tree's row indices in the builder's buffer, which the grower partitions in
    place: one buffer for the whole fit (no per-tree copies); ``rows`` the round's
    sample, or None: 0..n-1."""
    idx = builder.idx_buf[:n_rows]
    if rows is None:
        scores.fill_range(idx)
    else:
        idx[:] = rows
    return idx


def _check_margins(booster, scores, tree, k, it, p, vrange=None):
    """A new tree's values are finite and keep the model's margins within float64
    (``model_file.margin_bounds``, the rule the model file reader applies), else
    ValueError: training diverged.  The running bounds live on ``scores`` (this fit's).
    ``vrange``: the scalar tree's (min, max) value (``shrink_values``); None: read
    here (vector leaves: per output)."""
    bounds = getattr(scores, "margin_bounds", None)
    try:
        # min and max are NaN when a value is, and +-inf when one is (cheaper than
        # np.isfinite over the values: this runs once a tree)
        lo, hi = vrange if vrange is not None else (tree.value.min(), tree.value.max())
        if not (math.isfinite(lo) and math.isfinite(hi)):
            raise ValueError("a leaf value is not finite")
        if bounds is None:
            base = [float(b) for b in booster.base_score]
            bounds = scores.margin_bounds = margin_bounds(
                booster.trees, booster.tree_class, (base, list(base)))
        if vrange is None:
            margin_bounds([tree], [k], bounds)
        else:
            add_margin_range(bounds, k, lo, hi)
    except ValueError as e:
        raise ValueError(f"the model diverged at iteration {it}: {e} (learning_rate="
                         f"{p.learning_rate!r}); lower learning_rate or set max_delta_step"
                         ) from None


def _grow_vector(p, booster, objective, grower, backend, evals, it, k_out, comm, n_rows,
                 n_total, rows, oob, scores):
    """One round of vector leaves: every output's cells, ONE tree with K values per
    node, each output's margins updated from its column."""
    builder = grower.builder
    scales = _quantized(objective, it, lambda: scores.quantize_all(builder, n_total, comm))
    idx = _tree_rows(scores, builder, n_rows, rows)
    tree, leaves, l0, l1 = grower.grow(scales, idx, n_total, (p.random_state, it, 0))
    tree.value[:] *= p.learning_rate
    _check_margins(booster, scores, tree, 0, it, p)
    with stage("score_update"):
        for k in range(k_out):
            scores.add_leaf_values(k, idx, l0, l1, np.ascontiguousarray(tree.value[leaves, k]))
        if oob is not None:     # one descent per row, K values added (raw (K, n))
            backend.predict_binned_add(builder.X_cols, oob, tree, grower.bm.missing_bin,
                                       scores.raw)
    with stage("eval_predict"):
        for ev in evals:
            backend.predict_binned_add(ev.X_cols, ev.rows, tree, grower.bm.missing_bin, ev.raw)
    booster._append(tree, 0)


def _renew_leaves(objective, tree, leaves, l0, l1, idx, y, w, raw_k, comm, segs=None):
    """L1 / quantile leaf values re-estimated from the residuals of each leaf's rows
    (over every shard: gathered and put in global row order)."""
    local = _comm_mod.is_local(comm)
    parts = []
    for a, b in zip(l0, l1):
        r = idx[a:b]
        parts.append((y[r] - raw_k[r], None if w is None else w[r],
                      None if local else _comm_mod.global_ids(segs, r)))
    if not local:
        ranks = comm.allgather(parts)
        parts = []
        for leaf in zip(*ranks):            # this leaf's (residuals, weights, ids) per rank
            order = np.argsort(np.concatenate([q[2] for q in leaf]), kind="stable")
            parts.append((np.concatenate([q[0] for q in leaf])[order],
                          None if w is None else np.concatenate([q[1] for q in leaf])[order],
                          None))
    for lf, (res, wr, _) in zip(leaves, parts):
        tree.value[lf] = objective.renew_leaf(res, wr)
