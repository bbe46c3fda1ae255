"""XGBoost JSON models as bonsai Boosters (``read_xgboost``, behind
``Booster.from_xgboost``; the conventions are in ``bonsai.io.importers``).
"""
import json
import os

import numpy as np

from ._import_common import (_cat_node, _empty_nodes, _make_tree, _malformed,
                             _model_state, _read_text)
from ..categorical import CategoryMap


_XGB_OBJECTIVES = {   # XGBoost name -> (bonsai objective, base_score link)
    "binary:logistic": ("binary", "logit"), "reg:logistic": ("binary", "logit"),
    "binary:logitraw": ("squared_error", "identity"),
    "reg:squarederror": ("squared_error", "identity"),
    "reg:pseudohubererror": ("huber", "identity"),
    "reg:absoluteerror": ("absolute_error", "identity"),
    "reg:quantileerror": ("quantile", "identity"),
    "count:poisson": ("poisson", "log"), "reg:gamma": ("gamma", "log"),
    "reg:tweedie": ("tweedie", "log"),
    "multi:softprob": ("multiclass", "identity"), "multi:softmax": ("multiclass", "identity"),
}
_XGB_PARAMS = {   # bonsai objective -> (XGBoost parameter group, its key, bonsai's key)
    "quantile": ("quantile_loss_param", "quantile_alpha", "alpha"),
    "tweedie": ("tweedie_regression_param", "tweedie_variance_power", "tweedie_variance_power"),
    "huber": ("pseudo_huber_param", "huber_slope", "huber_delta"),
}


def _xgb_doc(model):
    if isinstance(model, dict):
        return model
    if hasattr(model, "get_booster"):          # xgboost sklearn estimator
        model = model.get_booster()
    if hasattr(model, "save_raw"):             # xgboost.Booster
        model = model.save_raw("json")
    elif not isinstance(model, (str, bytes, bytearray, os.PathLike)):
        raise TypeError("from_xgboost: model must be XGBoost JSON text (str/bytes), a "
                        "parsed dict, a path to a .json file or an xgboost Booster/"
                        f"estimator; got {type(model).__name__}")
    text = _read_text(model, "from_xgboost", lambda t: t.lstrip().startswith("{"))
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"from_xgboost: not an XGBoost JSON model (invalid JSON: {e}); "
                         "UBJSON/binary models are not read: save with save_raw('json') "
                         "or save_model('model.json')") from None
    if not isinstance(doc, dict):
        raise ValueError("from_xgboost: not an XGBoost JSON model (top level is not an object)")
    return doc


def _xgb_floats(v, what):
    """XGBoost stores scalars as strings ('5E-1'), vectors as '[5E-1,2E-1]'."""
    if isinstance(v, str):
        v = [s for s in v.strip().strip("[]").split(",") if s.strip()]
    elif not isinstance(v, list):
        v = [v]
    try:
        return [float(x) for x in v]
    except (TypeError, ValueError):
        raise ValueError(f"from_xgboost: bad {what} {v!r}") from None


def _xgb_category_names(cats, n_features):
    """Per feature, the category names XGBoost >= 3.1 stores for DataFrame inputs
    (``gradient_booster.model.cats.enc``), or None."""
    enc = (cats or {}).get("enc") or []
    out = [None] * n_features
    for j, e in enumerate(enc[:n_features]):
        vals = e.get("values") or []
        if not vals:
            continue
        offsets = e.get("offsets")
        if offsets:    # strings: UTF-8 bytes (as signed ints) cut at the offsets
            raw = bytes(v & 0xFF for v in vals)
            try:
                out[j] = [raw[a:b].decode("utf-8") for a, b in zip(offsets[:-1], offsets[1:])]
            except UnicodeDecodeError:
                raise ValueError(f"from_xgboost: cannot decode the category names of "
                                 f"feature {j}") from None
        else:
            out[j] = list(vals)
    return out


def _xgb_node_cats(t):
    """{node: the category codes XGBoost sends right} of a tree's categorical splits."""
    seg, size, flat = t["categories_segments"], t["categories_sizes"], t["categories"]
    return {int(node): [int(c) for c in flat[seg[q]:seg[q] + size[q]]]
            for q, node in enumerate(t.get("categories_nodes", []))}


def _xgb_values(t, n, width):
    """(node values, leaf values) of a tree whose nodes hold ``width`` values each
    (XGBoost's ``size_leaf_vector``; 1 for a scalar tree): for a vector tree, the K
    weights of each node (``base_weights``, node-major) and of each leaf
    (``leaf_weights``, leaf ``right_children[i]``'s K values)."""
    bw = t.get("base_weights") or [0.0] * (n * width)
    if width == 1:
        return bw, None
    lw = t.get("leaf_weights")
    if len(bw) != n * width or lw is None or len(lw) % width:
        raise ValueError(f"its vector weights do not hold {width} values per node")
    return ([[float(v) for v in bw[i * width:(i + 1) * width]] for i in range(n)],
            [[float(v) for v in lw[i * width:(i + 1) * width]]
             for i in range(len(lw) // width)])


def _xgb_tree(t, scale, cat_n, width=1):
    left, right = t["left_children"], t["right_children"]
    n = len(left)
    order, seen = [0], {0: 0}     # breadth-first over reachable nodes (drops deleted ones)
    for i in order:
        if left[i] >= 0:
            for c in (left[i], right[i]):
                if not 0 <= c < n or c in seen:
                    raise ValueError("a child index is invalid")
                seen[c] = len(order)
                order.append(c)
    nodes = _empty_nodes(len(order))
    cat_left = [None] * len(order)
    split_type = t.get("split_type") or [0] * n
    cats = _xgb_node_cats(t) if "categories_nodes" in t else {}
    bw, leaf_w = _xgb_values(t, n, width)
    for new, old in enumerate(order):
        nodes["cover"][new] = float(t["sum_hessian"][old])
        if left[old] < 0 and leaf_w is not None:      # a vector leaf: its leaf's weights
            nodes["value"][new] = [v * scale for v in leaf_w[right[old]]]
            continue
        if left[old] < 0:
            nodes["value"][new] = float(t["split_conditions"][old]) * scale
            continue
        j = int(t["split_indices"][old])
        nodes["feature"][new] = j
        nodes["value"][new] = (float(bw[old]) * scale if leaf_w is None
                               else [v * scale for v in bw[old]])
        nodes["gain"][new] = float(t["loss_changes"][old])
        lo, hi = seen[left[old]], seen[right[old]]
        dl = int(t["default_left"][old])
        if split_type[old] == 1:      # categorical: listed categories go RIGHT in XGBoost
            listed = set(cats.get(old, []))
            if dl:    # missing and unlisted go XGBoost-left = bonsai right: swap children
                lo, hi = hi, lo
                cat_left[new] = _cat_node(nodes, new, sorted(listed))
            else:     # missing goes right with the listed ones: list the complement left
                cat_left[new] = _cat_node(nodes, new,
                                          [c for c in range(cat_n[j]) if c not in listed])
        else:
            c = np.float32(t["split_conditions"][old])
            nodes["threshold"][new] = float(np.nextafter(c, np.float32(-np.inf)))
            nodes["default_left"][new] = dl
        nodes["left"][new], nodes["right"][new] = lo, hi
    return _make_tree(nodes, cat_left)


def _xgb_base(mp, link, k, name):
    """The base margins (k,) from XGBoost's output-space base_score."""
    base = _xgb_floats(mp.get("base_score", "0.5"), "base_score")
    if len(base) not in (1, k):
        raise ValueError(f"from_xgboost: base_score has {len(base)} values for {k} outputs")
    base = np.broadcast_to(np.asarray(base, dtype=np.float64), (k,)).copy()
    if link == "logit":
        if np.any((base <= 0) | (base >= 1)):
            raise ValueError(f"from_xgboost: base_score {base.tolist()} is not a probability")
        return np.log(base / (1.0 - base))
    if link == "log":
        if np.any(base <= 0):
            raise ValueError(f"from_xgboost: base_score {base.tolist()} must be > 0 for {name!r}")
        return np.log(base)
    return base


def _xgb_categories(learner, m, trees_doc, n_features):
    """(CategoryMap or None, {feature: number of codes}): the category names XGBoost
    stored for a DataFrame's columns, else the codes 0..max."""
    names = _xgb_category_names(m.get("cats"), n_features)
    types = learner.get("feature_types") or []
    feats = {j for j, ty in enumerate(types[:n_features]) if ty == "c"}
    top = {}
    for t in trees_doc:
        for node, codes in (_xgb_node_cats(t) if "categories_nodes" in t else {}).items():
            j = int(t["split_indices"][node])
            feats.add(j)
            top[j] = max([top.get(j, -1)] + codes)
    cat_n, values = {}, []
    for j in sorted(feats):
        vals = names[j] if j < n_features and names[j] is not None else \
            list(range(top.get(j, 0) + 1))
        if len(vals) <= top.get(j, -1):
            raise ValueError(f"from_xgboost: feature {j} splits on category {top[j]} but "
                             f"has {len(vals)} categories")
        cat_n[j] = len(vals)
        values.append(vals)
    if not feats:
        return None, cat_n
    try:
        return CategoryMap(sorted(feats), values), cat_n
    except (TypeError, ValueError) as e:
        raise ValueError(f"from_xgboost: unsupported category values: {e}") from None


def read_xgboost(model):
    """An XGBoost model as a bonsai Booster's state (``Booster.from_xgboost`` builds the
    Booster).

    Parameters
    ----------
    model : str, bytes, dict, path, xgboost.Booster or XGBoost sklearn estimator --
        the JSON model (``booster.save_raw("json")``, a ``.json`` file's text or path,
        or the parsed dict).

    Returns
    -------
    dict of Booster attributes: a Booster whose ``predict`` matches XGBoost's on float32
    inputs (see the module docstring for float64 inputs, categorical codes and
    ``multi:softmax``).
    """
    doc = _xgb_doc(model)
    with _malformed("from_xgboost", "XGBoost JSON model"):
        return _from_xgb_doc(doc)


def _from_xgb_doc(doc):
    if not isinstance(doc.get("learner"), dict):
        raise ValueError("from_xgboost: not an XGBoost JSON model (no 'learner')")
    learner = doc["learner"]
    gb, mp = learner["gradient_booster"], learner["learner_model_param"]
    name = learner["objective"]["name"]
    weights = None
    if gb.get("name") == "dart":
        weights = [float(w) for w in gb.get("weight_drop", [])]
        gb = gb["gbtree"]
    elif gb.get("name") != "gbtree":
        raise ValueError(f"from_xgboost: booster {gb.get('name')!r} is not supported; "
                         "only tree boosters ('gbtree', 'dart') can be imported")
    if name not in _XGB_OBJECTIVES:
        raise ValueError(f"from_xgboost: objective {name!r} is not supported; supported: "
                         f"{sorted(_XGB_OBJECTIVES)}")
    objective, link = _XGB_OBJECTIVES[name]
    if int(mp.get("num_target", "1")) > 1:
        raise ValueError("from_xgboost: multi-target models (num_target > 1) are not supported")
    n_features = int(mp["num_feature"])
    k = int(mp.get("num_class", "0")) if objective == "multiclass" else 1
    if k < 1 or (objective == "multiclass" and k < 2):
        raise ValueError(f"from_xgboost: objective {name!r} with num_class={k}")
    base = _xgb_base(mp, link, k, name)
    m = gb["model"]
    trees_doc = m["trees"]
    tree_info = [int(c) for c in m.get("tree_info", [0] * len(trees_doc))]
    if len(tree_info) != len(trees_doc) or any(not 0 <= c < k for c in tree_info):
        raise ValueError("from_xgboost: tree_info does not give a valid class per tree")
    if weights is not None and len(weights) != len(trees_doc):
        raise ValueError("from_xgboost: dart weight_drop length differs from the tree count")
    widths = {int(t.get("tree_param", {}).get("size_leaf_vector", "1")) for t in trees_doc}
    vector = any(w > 1 for w in widths)     # multi_strategy="multi_output_tree"
    if vector and (objective != "multiclass" or widths != {k}):
        raise ValueError(f"from_xgboost: vector-leaf (multi_output_tree) trees of "
                         f"{sorted(widths)} values are supported for multiclass models with "
                         f"one value per class only (objective {name!r}, num_class={k}); "
                         "train with multi_strategy='one_output_per_tree'")
    if vector and any(c != 0 for c in tree_info):
        raise ValueError("from_xgboost: a multi_output_tree model's tree_info must be 0")
    names = [str(s) for s in learner.get("feature_names") or []] or None
    categories, cat_n = _xgb_categories(learner, m, trees_doc, n_features)
    trees = []
    for i, t in enumerate(trees_doc):
        try:
            trees.append(_xgb_tree(t, 1.0 if weights is None else weights[i], cat_n,
                                   k if vector else 1))
        except ValueError as e:
            raise ValueError(f"from_xgboost: tree {i}: {e}") from None
        if trees[-1].max_feature() >= n_features:
            raise ValueError(f"from_xgboost: tree {i} uses a feature index >= "
                             f"num_feature={n_features}")
    oparams = {}
    if objective in _XGB_PARAMS:        # kept where bonsai's objective accepts them
        group, key, ours = _XGB_PARAMS[objective]
        val = learner["objective"].get(group, {}).get(key)
        if val is not None:
            oparams[ours] = _xgb_floats(val, key)[0]
    state = _model_state("xgboost", trees, tree_info, k, n_features,
                         names if names and len(names) == n_features else None, base,
                         objective, oparams, categories, name)
    if vector:
        state["multi_strategy"] = "multi_output_tree"
    return state


# ---------------------------------------------------------------------------- LightGBM
