"""Model inspection: every node of a ``Booster`` as a pandas DataFrame
(``trees_to_dataframe``) and the whole model as a JSON-serialisable dict
(``dump_model``), in the spirit of LightGBM's / XGBoost's functions of these names.

This module owns the human-facing *names* of a model's parts: a feature is named by
``Booster.feature_names`` (``"f<j>"`` when the model has none); a feature index
``j >= n_features`` of a model with ordered target statistics (``booster.ctr``) is
the CTR feature ``e = j - n_features``, named ``"ctr(<sources>)[<stat>]"`` where
``<sources>`` are the comma-joined names of its categorical source features and
``<stat>`` is ``mean`` (the target mean; for binary: the positive rate),
``class<k>`` (multiclass: class k's rate) or ``freq`` (the key's frequency).  A
categorical split lists the category *values* it sends left (through
``booster.categories``; the raw codes when the model has no category map for the
feature).

Node ids: ``node_index`` is a node's index within its tree (the value
``Booster.predict(..., pred_leaf=True)`` reports), ``node_id`` the string
``"<tree>-<node>"``, unique across the model.

Vector-leaf models (``multi_strategy="multi_output_tree"``: one tree per round, K
values per node): ``trees_to_dataframe`` has float columns ``value_0`` ..
``value_{K-1}`` in place of ``value``; ``dump_model`` writes ``leaf_value`` and
``internal_value`` as lists of K floats.
"""
import math
import numbers

import numpy as np

from ._version import __version__

__all__ = ["trees_to_dataframe", "dump_model", "feature_name"]

_DF_COLUMNS = ("tree_index", "node_index", "node_id", "class", "depth", "parent_index",
               "left_child", "right_child", "is_leaf", "split_feature", "split_index",
               "threshold", "decision_type", "categories", "missing_direction", "value",
               "gain", "cover", "count")


def _booster_of(model):
    """The ``Booster`` of a Booster or a fitted bonsai estimator (``booster_``)."""
    if hasattr(model, "trees") and hasattr(model, "tree_class"):
        return model
    if hasattr(model, "fit") and hasattr(model, "get_params"):
        booster = getattr(model, "booster_", None)
        if booster is None:
            from sklearn.exceptions import NotFittedError
            raise NotFittedError(f"this {type(model).__name__} is not fitted yet; call "
                                 "fit(X, y) before inspecting or plotting the model")
        return booster
    raise TypeError("model must be a bonsai.Booster or a fitted bonsai estimator, got "
                    f"{type(model).__name__}")


# ---- names ---------------------------------------------------------------------------

def _base_name(booster, j):
    names = booster.feature_names
    return str(names[j]) if names is not None and j < len(names) else f"f{j}"


def feature_name(booster, j):
    """The display name of the model's feature index ``j`` (see the module docstring)."""
    j = int(j)
    F = int(booster.n_features)
    if j < F:
        return _base_name(booster, j)
    ctr = getattr(booster, "ctr", None)
    if ctr is not None and j - F < ctr.n_out:
        e = j - F
        sources = ",".join(_base_name(booster, s) for s in ctr.sources_of(e))
        s, n_stats = e % ctr.width, ctr.width - 1
        stat = "freq" if s == n_stats else ("mean" if n_stats == 1 else f"class{s}")
        return f"ctr({sources})[{stat}]"
    return f"f{j}"


class _Names:
    """Per-model caches: feature index -> name, categorical feature -> its values."""

    def __init__(self, booster):
        self.booster = booster
        self._names = {}
        cm = getattr(booster, "categories", None)
        self._cats = {} if cm is None else {j: cm.categories[i]
                                            for i, j in enumerate(cm.features)}

    def name(self, j):
        j = int(j)
        if j not in self._names:
            self._names[j] = feature_name(self.booster, j)
        return self._names[j]

    def category_values(self, j, codes):
        """The category values of ``codes`` (sorted) of feature ``j``; a code outside
        the feature's known categories is listed as the code itself."""
        cats = self._cats.get(int(j))
        if cats is None:
            return [int(c) for c in codes]
        return [_plain(cats[c]) if c < len(cats) else int(c) for c in codes]


# ---- plain Python values -----------------------------------------------------------

def _float(v):
    """A finite float, or None for NaN / infinities (strict JSON has neither)."""
    v = float(v)
    return v if math.isfinite(v) else None


def _plain(v):
    """``v`` as plain JSON-able Python data (numpy scalars/arrays, tuples, dicts with
    non-str keys, non-finite floats -> None, other objects -> their repr)."""
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, np.ndarray):
        return [_plain(x) for x in v.tolist()]
    if isinstance(v, np.generic):
        v = v.item()
        if isinstance(v, (bool, str)):
            return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        return _float(v)
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [_plain(x) for x in v]
    return repr(v)


# ---- per-tree structure ----------------------------------------------------------

def _parents_depths(tree):
    """(parent (n,) int64 with -1 for the root, depth (n,) int64), by an explicit
    stack (leaf-wise trees can be deep)."""
    n = tree.n_nodes
    parent = np.full(n, -1, np.int64)
    depth = np.zeros(n, np.int64)
    if n == 0:
        return parent, depth
    left, right = tree.left, tree.right
    stack = [0]
    while stack:
        i = stack.pop()
        if left[i] >= 0:
            for c in (int(left[i]), int(right[i])):
                parent[c] = i
                depth[c] = depth[i] + 1
                stack.append(c)
    return parent, depth


def _split_categories(tree, names, i):
    """(codes, values) a categorical node ``i`` sends left."""
    codes = tree.cat_left(i)
    return codes, names.category_values(int(tree.feature[i]), codes)


# ---- trees_to_dataframe ----------------------------------------------------------

def trees_to_dataframe(booster):
    """Every node of every tree as one row of a ``pandas.DataFrame``.

    Rows run tree by tree, nodes in ``node_index`` order.  Columns:

    * ``tree_index``, ``node_index`` (index within the tree, as ``pred_leaf``
      reports it), ``node_id`` (``"<tree>-<node>"``), ``class`` (the output the
      tree adds to), ``depth`` (root 0), ``parent_index`` (-1 for the root);
    * ``left_child``, ``right_child``: the children's ``node_id`` strings, None for
      leaves; ``is_leaf``;
    * ``split_feature`` (feature name, see the module docstring; None for leaves),
      ``split_index`` (feature index, -1 for leaves), ``threshold`` (NaN for leaves
      and categorical splits), ``decision_type`` (``"<="`` numeric: ``x <=
      threshold`` goes left; ``"in"`` categorical: the value is in ``categories``;
      None for leaves), ``categories`` (categorical splits: the list of category
      values sent left; None otherwise), ``missing_direction`` (``"left"`` /
      ``"right"``, None for leaves);
    * ``value`` (a leaf's output, learning rate applied; an internal node's own
      weight), ``gain`` (split gain, 0 for leaves), ``cover`` (sum of hessians),
      ``count`` (training rows).  A vector-leaf model (``multi_strategy=
      "multi_output_tree"``) has ``value_0`` .. ``value_{K-1}`` (float, output k's
      value) instead of ``value``, ``gain`` summed and ``cover`` the hessians summed
      over the outputs, and ``class`` 0 (its trees' ``tree_class``: each adds
      ``value_k`` to output k).

    Requires pandas.
    """
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("trees_to_dataframe requires pandas: pip install pandas") from None
    booster = _booster_of(booster)
    names = _Names(booster)
    cols = {c: [] for c in _DF_COLUMNS}
    vector = getattr(booster, "multi_strategy", None) == "multi_output_tree"
    for t, (tree, k) in enumerate(zip(booster.trees, booster.tree_class)):
        n = tree.n_nodes
        idx = np.arange(n, dtype=np.int64)
        leaf = tree.left < 0
        parent, depth = _parents_depths(tree)
        is_cat = tree.is_categorical()
        thr = tree.threshold.astype(np.float64, copy=True)
        thr[leaf | is_cat] = np.nan
        split_index = np.where(leaf, -1, tree.feature).astype(np.int64)
        ids = [f"{t}-{i}" for i in range(n)]
        feat, dec, cats, miss, lch, rch = [], [], [], [], [], []
        for i in range(n):
            if leaf[i]:
                for lst in (feat, dec, cats, miss, lch, rch):
                    lst.append(None)
                continue
            feat.append(names.name(tree.feature[i]))
            if is_cat[i]:
                dec.append("in")
                cats.append(_split_categories(tree, names, i)[1])
                miss.append("right")
            else:
                dec.append("<=")
                cats.append(None)
                miss.append("left" if tree.default_left[i] else "right")
            lch.append(ids[int(tree.left[i])])
            rch.append(ids[int(tree.right[i])])
        parts = {
            "tree_index": np.full(n, t, np.int64), "node_index": idx, "node_id": ids,
            "class": np.full(n, int(k), np.int64), "depth": depth, "parent_index": parent,
            "left_child": lch, "right_child": rch, "is_leaf": leaf,
            "split_feature": feat, "split_index": split_index, "threshold": thr,
            "decision_type": dec, "categories": cats, "missing_direction": miss,
            "value": tree.value, "gain": tree.gain, "cover": tree.cover, "count": tree.count,
        }
        for c in _DF_COLUMNS:
            cols[c].append(parts[c])
    dtypes = {"tree_index": np.int64, "node_index": np.int64, "class": np.int64,
              "depth": np.int64, "parent_index": np.int64, "is_leaf": bool,
              "split_index": np.int64, "threshold": np.float64, "value": np.float64,
              "gain": np.float64, "cover": np.float64, "count": np.int64}
    data = {}
    columns = list(_DF_COLUMNS)
    if vector:      # value (n, K) per tree -> K float columns
        K = int(booster.n_outputs)
        vals = (np.concatenate([np.reshape(v, (len(v), K)) for v in cols["value"]])
                if cols["value"] else np.zeros((0, K)))
        at = columns.index("value")
        columns[at:at + 1] = [f"value_{k}" for k in range(K)]
        for k in range(K):
            data[f"value_{k}"] = np.ascontiguousarray(vals[:, k], dtype=np.float64)
    for c in _DF_COLUMNS:
        if c == "value" and vector:
            continue
        if c in dtypes:
            data[c] = (np.concatenate(cols[c]).astype(dtypes[c], copy=False) if cols[c]
                       else np.zeros(0, dtypes[c]))
        else:
            data[c] = pd.Series([v for part in cols[c] for v in part], dtype=object)
    return pd.DataFrame(data, columns=columns)


# ---- dump_model ----------------------------------------------------------------------

def _node_value(tree, i):
    """Node ``i``'s value: a float, or a list of K floats for a vector-leaf tree."""
    v = tree.value[i]
    return _float(v) if tree.value.ndim == 1 else [_float(x) for x in v]


def _tree_structure(tree, names):
    """The tree's root as nested dicts (built without recursion)."""
    n = tree.n_nodes
    if n == 0:
        return {}
    is_cat = tree.is_categorical()
    nodes = []
    for i in range(n):
        if tree.left[i] < 0:
            nodes.append({"leaf_index": i, "leaf_value": _node_value(tree, i),
                          "leaf_cover": _float(tree.cover[i]),
                          "leaf_count": int(tree.count[i])})
            continue
        j = int(tree.feature[i])
        d = {"node_index": i, "split_feature": j, "split_feature_name": names.name(j)}
        if is_cat[i]:
            codes, values = _split_categories(tree, names, i)
            d.update(categories=values, category_codes=[int(c) for c in codes],
                     decision_type="in", default_left=False, missing_direction="right")
        else:
            dl = bool(tree.default_left[i])
            d.update(threshold=_float(tree.threshold[i]), decision_type="<=",
                     default_left=dl, missing_direction="left" if dl else "right")
        d.update(split_gain=_float(tree.gain[i]), internal_value=_node_value(tree, i),
                 internal_cover=_float(tree.cover[i]), internal_count=int(tree.count[i]),
                 left_child=None, right_child=None)
        nodes.append(d)
    for i in range(n):
        if tree.left[i] >= 0:
            nodes[i]["left_child"] = nodes[int(tree.left[i])]
            nodes[i]["right_child"] = nodes[int(tree.right[i])]
    return nodes[0]


def dump_model(booster):
    """The model as a JSON-serialisable dict (plain Python types only).

    Header: ``name``, ``version``, ``objective``, ``objective_params``,
    ``n_outputs``, ``num_class`` (the number of classes for multiclass, else 1),
    ``multi_strategy``, ``num_tree_per_iteration`` (1 for a vector-leaf model, else
    K), ``n_features``, ``feature_names`` (the model's names,
    ``"f<j>"`` when it has none), ``base_score`` (list of K starting margins),
    ``best_iteration``, ``grow_policy``, ``params``, ``categorical_features``
    (``[{"feature", "name", "categories"}]``, categories in code order),
    ``ctr_features`` (``[{"index", "name", "sources"}]`` for ordered target
    statistics, else ``[]``) and ``tree_info``: one entry per tree with
    ``tree_index``, ``class``, ``num_leaves``, ``num_nodes``, ``oblivious`` and
    ``tree_structure``.

    ``tree_structure`` nests dicts from the root.  An internal node:
    ``node_index``, ``split_feature`` (index), ``split_feature_name``, then
    ``threshold`` (``decision_type`` ``"<="``: ``x <= threshold`` goes left) or
    ``categories`` and ``category_codes`` (``decision_type`` ``"in"``: values
    listed go left), ``default_left``, ``missing_direction``, ``split_gain``,
    ``internal_value``, ``internal_cover``, ``internal_count``, ``left_child``,
    ``right_child``.  A leaf: ``leaf_index`` (its node index within the tree, as
    ``pred_leaf`` reports it), ``leaf_value``, ``leaf_cover``, ``leaf_count``.  In a
    vector-leaf model ``leaf_value`` and ``internal_value`` are lists of K floats.
    Non-finite floats (not expected) are written as None.
    """
    booster = _booster_of(booster)
    names = _Names(booster)
    F = int(booster.n_features)
    K = int(booster.n_outputs)
    cm = getattr(booster, "categories", None)
    cat_feats = [] if cm is None else [
        {"feature": int(j), "name": _base_name(booster, j), "categories": _plain(c)}
        for j, c in zip(cm.features, cm.categories)]
    ctr = getattr(booster, "ctr", None)
    ctr_feats = [] if ctr is None else [
        {"index": F + e, "name": feature_name(booster, F + e),
         "sources": [int(s) for s in ctr.sources_of(e)]} for e in range(ctr.n_out)]
    tree_info = []
    for t, (tree, k) in enumerate(zip(booster.trees, booster.tree_class)):
        tree_info.append({"tree_index": t, "class": int(k), "num_leaves": tree.n_leaves,
                          "num_nodes": int(tree.n_nodes), "oblivious": bool(tree.oblivious),
                          "tree_structure": _tree_structure(tree, names)})
    best = booster.best_iteration
    return {
        "name": "bonsai", "version": __version__,
        "objective": str(booster.objective),
        "objective_params": _plain(dict(booster.objective_params or {})),
        "n_outputs": K, "num_class": K if booster.objective == "multiclass" else 1,
        "multi_strategy": str(getattr(booster, "multi_strategy", "one_output_per_tree")),
        "num_tree_per_iteration": int(getattr(booster, "trees_per_round", K)),
        "n_features": F,
        "feature_names": [_base_name(booster, j) for j in range(F)],
        "base_score": [_float(v) for v in np.asarray(booster.base_score).ravel()],
        "best_iteration": None if best is None else int(best),
        "grow_policy": str(booster.grow_policy),
        "params": _plain(dict(booster.params or {})),
        "categorical_features": cat_feats,
        "ctr_features": ctr_feats,
        "tree_info": tree_info,
    }
