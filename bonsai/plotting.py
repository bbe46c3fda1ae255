"""Plots of a trained model with matplotlib (imported on first use; install it with
``pip install matplotlib`` or the ``plot`` extra): feature importance
(``plot_importance``), one tree (``plot_tree``, laid out and drawn with matplotlib
alone, no graphviz) and learning curves (``plot_metric``).

Every function takes a ``bonsai.Booster`` or a fitted bonsai scikit-learn estimator
(its ``booster_``; ``plot_metric`` its ``evals_result_``), draws on ``ax`` (a new
figure when None) and returns the Axes.  Feature names follow
``bonsai.inspection.feature_name``.
"""
import math
import numbers

import numpy as np

from .inspection import _booster_of, _Names, _parents_depths

__all__ = ["plot_importance", "plot_tree", "plot_metric"]

_TREE_INFO = ("split_gain", "internal_value", "internal_count", "internal_cover",
              "leaf_count", "leaf_cover", "data_percentage")


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("bonsai's plotting functions require matplotlib: "
                          "pip install matplotlib (or pip install 'bonsai-gbt[plot]')") from None
    return plt


def _new_ax(ax, figsize, dpi):
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(1, 1, figsize=figsize, dpi=dpi)
    return ax


def _fmt(v, precision):
    """A number for a label: integers as such, others to ``precision`` decimals
    (significant digits for very large / small magnitudes)."""
    v = float(v)
    if not math.isfinite(v):
        return str(v)
    if v.is_integer() and abs(v) < 1e15:
        return str(int(v))
    if precision is None:
        return repr(v)
    if 10.0 ** -precision <= abs(v) < 1e7:
        return f"{v:.{precision}f}"
    return f"{v:.{precision}g}"


def _check_precision(precision):
    if precision is not None and (not isinstance(precision, numbers.Integral)
                                  or isinstance(precision, bool) or precision < 0):
        raise ValueError(f"precision must be a non-negative int or None, got {precision!r}")


def _label(text, **fields):
    for k, v in fields.items():
        text = text.replace(f"@{k}@", str(v))
    return text


# ---- importance ------------------------------------------------------------------

def _decorate(ax, title, xlabel, ylabel, grid, **fields):
    """Title, axis labels (``@field@`` placeholders filled in) and grid; returns ax."""
    if title is not None:
        ax.set_title(_label(title, **fields))
    if xlabel is not None:
        ax.set_xlabel(_label(xlabel, **fields))
    if ylabel is not None:
        ax.set_ylabel(_label(ylabel, **fields))
    ax.grid(grid)
    return ax


def plot_importance(model, importance_type="gain", max_num_features=None, ax=None,
                    title="Feature importance", xlabel="Feature importance (@importance_type@)",
                    ylabel="Features", height=0.2, grid=True, show_values=True, precision=3,
                    figsize=None, dpi=None, **kwargs):
    """Horizontal bar chart of ``booster.feature_importance(importance_type)``.

    Features with zero importance are left out; the most important is on top.
    ``max_num_features`` keeps the top ones.  ``@importance_type@`` in a label is
    replaced by the type.  A title/label of None is not drawn.  ``kwargs`` go to
    ``ax.barh``.  Returns the Axes; ValueError when no feature has importance.
    """
    booster = _booster_of(model)
    if max_num_features is not None and (not isinstance(max_num_features, numbers.Integral)
                                         or isinstance(max_num_features, bool)
                                         or max_num_features < 1):
        raise ValueError(f"max_num_features must be a positive int or None, got "
                         f"{max_num_features!r}")
    _check_precision(precision)
    imp = np.asarray(booster.feature_importance(importance_type), dtype=np.float64)
    names = _Names(booster)
    keep = np.flatnonzero(imp > 0)
    if keep.size == 0:
        raise ValueError(f"no feature has a positive {importance_type!r} importance "
                         "(the model has no splits); nothing to plot")
    order = keep[np.lexsort((-keep, imp[keep]))]    # ascending; ties: lower index on top
    if max_num_features is not None:
        order = order[-int(max_num_features):]
    values = imp[order]
    labels = [names.name(j) for j in order]
    ax = _new_ax(ax, figsize, dpi)
    ypos = np.arange(len(order))
    ax.barh(ypos, values, align="center", height=height, **kwargs)
    ax.set_yticks(ypos)
    ax.set_yticklabels(labels)
    if show_values:
        integral = bool(np.all(values == np.round(values)))
        for x, y in zip(values, ypos):
            ax.text(x + 1e-2 * values.max(), y, str(int(x)) if integral else _fmt(x, precision),
                    va="center")
    ax.set_xlim(0, values.max() * 1.1)
    ax.set_ylim(-1, len(order))
    return _decorate(ax, title, xlabel, ylabel, grid, importance_type=importance_type)


# ---- one tree ----------------------------------------------------------------------

def _layout(tree, max_depth):
    """(shown node indices in preorder, x, depth, number of x slots): leaves (or nodes cut at
    ``max_depth``) take x = 0, 1, ... left to right; a parent sits midway between
    its children.  Explicit stacks: leaf-wise trees can be deep."""
    _, depth = _parents_depths(tree)
    x = np.zeros(tree.n_nodes)
    shown, stack, slot = [], [0], 0
    while stack:
        i = stack.pop()
        shown.append(i)
        if tree.left[i] >= 0 and (max_depth is None or depth[i] < max_depth):
            stack.append(int(tree.right[i]))
            stack.append(int(tree.left[i]))
        else:
            x[i] = slot
            slot += 1
    for i in reversed(shown):
        if tree.left[i] >= 0 and (max_depth is None or depth[i] < max_depth):
            x[i] = 0.5 * (x[tree.left[i]] + x[tree.right[i]])
    return shown, x, depth, slot


def _set_text(values, precision, limit=6):
    vals = [str(v) if not isinstance(v, float) else _fmt(v, precision) for v in values]
    if len(vals) > limit:
        vals = vals[:limit] + [f"... (+{len(vals) - limit})"]
    return "{" + ", ".join(vals) + "}"


def _value_text(tree, i, precision, limit=4):
    """Node ``i``'s value; a vector-leaf tree's K values as ``[v0, v1, ...]``."""
    if tree.value.ndim == 1:
        return _fmt(tree.value[i], precision)
    vals = [_fmt(float(v), precision) for v in tree.value[i]]
    if len(vals) > limit:
        vals = vals[:limit] + [f"... (+{len(vals) - limit})"]
    return "[" + ", ".join(vals) + "]"


def _node_text(tree, i, names, show_info, precision, total, cut, is_cat):
    info = []
    if tree.left[i] < 0:
        lines = [f"leaf {i}: {_value_text(tree, i, precision)}"]
        if "leaf_count" in show_info:
            info.append(f"count: {int(tree.count[i])}")
        if "leaf_cover" in show_info:
            info.append(f"cover: {_fmt(tree.cover[i], precision)}")
    else:
        fname = names.name(tree.feature[i])
        if is_cat[i]:
            cats = names.category_values(int(tree.feature[i]), tree.cat_left(i))
            lines = [f"{fname} in {_set_text(cats, precision)}"]
        else:
            lines = [f"{fname} <= {_fmt(tree.threshold[i], precision)}"]
        if "split_gain" in show_info:
            info.append(f"gain: {_fmt(tree.gain[i], precision)}")
        if "internal_value" in show_info:
            info.append(f"value: {_value_text(tree, i, precision)}")
        if "internal_count" in show_info:
            info.append(f"count: {int(tree.count[i])}")
        if "internal_cover" in show_info:
            info.append(f"cover: {_fmt(tree.cover[i], precision)}")
        if cut:
            lines.append(f"... ({int(np.count_nonzero(_subtree_leaves(tree, i)))} leaves)")
    if "data_percentage" in show_info and total > 0:
        info.append(f"{100.0 * float(tree.count[i]) / total:.1f}% of data")
    return "\n".join(lines + info)


def _subtree_leaves(tree, i):
    mask = np.zeros(tree.n_nodes, bool)
    stack = [i]
    while stack:
        j = stack.pop()
        if tree.left[j] < 0:
            mask[j] = True
        else:
            stack += [int(tree.left[j]), int(tree.right[j])]
    return mask


def plot_tree(model, tree_index=0, ax=None, show_info=None, precision=3, max_depth=None,
              figsize=None, dpi=None, fontsize=None):
    """Draw tree ``tree_index`` (matplotlib only).

    Internal nodes read ``feature <= threshold`` (or ``feature in {values}`` for a
    categorical split); the left edge is ``yes``, the right ``no``, and the edge
    missing values take is marked ``missing``.  Leaves show ``leaf <index>: value``
    (a vector-leaf tree's values as a list: its first 4 and a count of the rest).
    ``show_info``: any of ``"split_gain"``, ``"internal_value"``,
    ``"internal_count"``, ``"internal_cover"``, ``"leaf_count"``, ``"leaf_cover"``,
    ``"data_percentage"``.  ``max_depth`` cuts the drawing below that depth (the cut
    nodes say how many leaves they hide).  Returns the Axes; ValueError for a
    ``tree_index`` out of range.
    """
    booster = _booster_of(model)
    n_trees = len(booster.trees)
    if (not isinstance(tree_index, numbers.Integral) or isinstance(tree_index, bool)
            or not 0 <= tree_index < n_trees):
        raise ValueError(f"tree_index must be an int in [0, {n_trees}), got {tree_index!r}")
    if show_info is None:
        show_info = ()
    elif isinstance(show_info, str):
        show_info = (show_info,)
    bad = [s for s in show_info if s not in _TREE_INFO]
    if bad:
        raise ValueError(f"show_info: unknown item {bad[0]!r}; choose from {_TREE_INFO}")
    if max_depth is not None and (not isinstance(max_depth, numbers.Integral)
                                  or isinstance(max_depth, bool) or max_depth < 0):
        raise ValueError(f"max_depth must be a non-negative int or None, got {max_depth!r}")
    _check_precision(precision)
    tree = booster.trees[int(tree_index)]
    names = _Names(booster)
    is_cat = tree.is_categorical()
    shown, x, depth, width = _layout(tree, max_depth)
    levels = int(max(depth[i] for i in shown)) + 1
    total = float(tree.count[0])
    texts = {}
    for i in shown:
        cut = tree.left[i] >= 0 and max_depth is not None and depth[i] >= max_depth
        texts[i] = _node_text(tree, i, names, show_info, precision, total, cut, is_cat)
    chars = max(len(line) for t in texts.values() for line in t.split("\n"))
    if ax is None:
        if figsize is None:   # about 0.085 inch per character of the widest label at 8 pt
            slot = min(max(1.0, 0.085 * chars), 3.0)
            figsize = (min(max(6.0, slot * width), 50.0), min(max(3.0, 1.2 * levels), 50.0))
        ax = _new_ax(None, figsize, dpi)
        ax.set_position([0.01, 0.01, 0.98, 0.92])
    if fontsize is None:      # the widest label fills at most ~90% of a leaf slot
        fig = ax.figure
        slot_pt = 72.0 * ax.get_position().width * fig.get_figwidth() / max(width, 1)
        fontsize = float(np.clip(0.9 * slot_pt / (0.6 * max(chars, 1)), 3.0, 10.0))
    for i in shown:
        leaf = tree.left[i] < 0
        cut = not leaf and max_depth is not None and depth[i] >= max_depth
        ax.text(x[i], -depth[i], texts[i], ha="center", va="center", fontsize=fontsize,
                zorder=3, bbox=dict(boxstyle="round,pad=0.3",
                                    fc="#e8f4e8" if leaf else "#e8eef8",
                                    ec="#4a7d4a" if leaf else "#4a5f8a", lw=0.8))
        if leaf or cut:
            continue
        miss_left = bool(tree.default_left[i]) and not is_cat[i]
        for child, word, miss in ((int(tree.left[i]), "yes", miss_left),
                                  (int(tree.right[i]), "no", not miss_left)):
            x0, y0, x1, y1 = x[i], -depth[i], x[child], -depth[child]
            ax.annotate("", xy=(x1, y1), xytext=(x0, y0), zorder=1,
                        arrowprops=dict(arrowstyle="-", color="#888888", lw=0.8))
            ax.text(0.5 * (x0 + x1), 0.5 * (y0 + y1), word + (", missing" if miss else ""),
                    ha="center", va="center", fontsize=max(fontsize - 1.0, 3.0),
                    color="#555555", zorder=2,
                    bbox=dict(boxstyle="square,pad=0.1", fc="white", ec="none", alpha=0.8))
    ax.set_xlim(-0.6, max(width - 1, 0) + 0.6)
    ax.set_ylim(-(levels - 1) - 0.5, 0.5)
    ax.set_axis_off()
    what = (f"{tree.n_values} outputs" if tree.value.ndim == 2
            else f"class {int(booster.tree_class[int(tree_index)])}")
    ax.set_title(f"tree {int(tree_index)} ({what})", fontsize=fontsize + 1)
    return ax


# ---- learning curves -------------------------------------------------------------

def _evals_of(model):
    if isinstance(model, dict):
        return model
    if hasattr(model, "trees") and hasattr(model, "tree_class"):
        return model.evals_result
    if hasattr(model, "fit") and hasattr(model, "get_params"):
        _booster_of(model)   # raises NotFittedError when not fitted
        return getattr(model, "evals_result_", {})
    raise TypeError("model_or_evals_result must be a bonsai.Booster, a fitted bonsai "
                    "estimator or a dict {dataset: {metric: [values]}}, got "
                    f"{type(model).__name__}")


def plot_metric(model_or_evals_result, metric=None, dataset_names=None, ax=None,
                title="Metric during training", xlabel="Iterations", ylabel="@metric@",
                grid=True, figsize=None, dpi=None):
    """Learning curves of ``metric`` (default: the first one recorded) for
    ``dataset_names`` (default: every eval set), from ``booster.evals_result``,
    ``est.evals_result_`` or a dict ``{dataset: {metric: [values]}}``.
    ``@metric@`` in a label is replaced by the metric name.  Returns the Axes;
    ValueError when nothing was recorded or the metric / a data set is unknown.
    """
    evals = _evals_of(model_or_evals_result)
    if not isinstance(evals, dict) or not all(isinstance(v, dict) for v in evals.values()):
        raise TypeError("evals_result must be a dict {dataset: {metric: [values]}}")
    if not evals:
        raise ValueError("no evaluation results to plot: train with valid_sets "
                         "(or fit with eval_set) to record metrics")
    if dataset_names is None:
        dataset_names = list(evals)
    elif isinstance(dataset_names, str):
        dataset_names = [dataset_names]
    else:
        dataset_names = list(dataset_names)
    unknown = [d for d in dataset_names if d not in evals]
    if unknown or not dataset_names:
        raise ValueError(f"dataset_names: {unknown[0] if unknown else dataset_names!r} "
                         f"is not a recorded data set; recorded: {list(evals)}")
    recorded = []
    for d in dataset_names:
        recorded += [m for m in evals[d] if m not in recorded]
    if metric is None:
        if not recorded:
            raise ValueError(f"no metric was recorded for {dataset_names}")
        metric = recorded[0]
    elif metric not in recorded:
        raise ValueError(f"metric {metric!r} was not recorded for {dataset_names}; "
                         f"recorded metrics: {recorded}")
    curves = [(d, np.asarray(evals[d][metric], dtype=np.float64))
              for d in dataset_names if metric in evals[d]]
    if not any(v.size for _, v in curves):
        raise ValueError(f"metric {metric!r} has no recorded values")
    ax = _new_ax(ax, figsize, dpi)
    for d, v in curves:
        ax.plot(np.arange(v.size), v, label=d)
    ax.legend(loc="best")
    return _decorate(ax, title, xlabel, ylabel, grid, metric=metric)
