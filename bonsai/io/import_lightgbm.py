"""LightGBM text models as bonsai Boosters (``read_lightgbm``, behind
``Booster.from_lightgbm``; the conventions are in ``bonsai.io.importers``).
"""
import json
import os

import numpy as np

from ._import_common import (_K_ZERO, _cat_node, _empty_nodes, _make_tree, _malformed,
                             _model_state, _read_text)
from ..categorical import CategoryMap


_LGB_IDENTITY = {"regression": "squared_error", "regression_l2": "squared_error",
                 "regression_l1": "absolute_error", "huber": "huber", "fair": "squared_error",
                 "quantile": "quantile", "mape": "squared_error",
                 "lambdarank": "squared_error", "rank_xendcg": "squared_error"}
_LGB_OBJECTIVES = {**_LGB_IDENTITY, "poisson": "poisson", "gamma": "gamma",
                   "tweedie": "tweedie", "binary": "binary", "cross_entropy": "binary",
                   "multiclass": "multiclass", "custom": "custom"}


def _lgb_text(model):
    if hasattr(model, "booster_") and not hasattr(model, "model_to_string"):
        model = model.booster_                 # LightGBM sklearn estimator
    if hasattr(model, "model_to_string"):      # lightgbm.Booster
        model = model.model_to_string()
    elif not isinstance(model, (str, bytes, bytearray, os.PathLike)):
        raise TypeError("from_lightgbm: model must be LightGBM model text, a path to a "
                        "model file or a lightgbm Booster/estimator; got "
                        f"{type(model).__name__}")
    return _read_text(model, "from_lightgbm", lambda t: t.lstrip().startswith("tree\n"))


def _lgb_parse(text):
    """(header dict, list of tree dicts, pandas_categorical or None)."""
    header, trees, cur, pandas_cat, done = {}, [], None, None, False
    for line in text.splitlines():
        line = line.strip()
        if line == "end of trees":
            cur, done = None, True
        elif line.startswith("pandas_categorical:"):
            try:
                pandas_cat = json.loads(line[len("pandas_categorical:"):])
            except json.JSONDecodeError:
                raise ValueError("from_lightgbm: bad pandas_categorical line") from None
        elif line == "average_output" and not trees:
            header["average_output"] = "1"
        elif line.startswith("Tree="):
            cur = {}
            trees.append(cur)
        elif "=" in line and not done and (cur is not None or not trees):
            key, _, val = line.partition("=")
            (header if cur is None else cur)[key] = val
    if "version" not in header or "max_feature_idx" not in header:
        raise ValueError("from_lightgbm: not a LightGBM text model (no version / "
                         "max_feature_idx header)")
    return header, trees, pandas_cat


def _lgb_arr(t, key, dtype, n, i):
    try:
        a = np.array(t.get(key, "").split(), dtype=dtype)
    except ValueError:
        raise ValueError(f"from_lightgbm: tree {i}: bad {key!r} values") from None
    if a.shape[0] != n:
        if a.shape[0] == 0 and key not in ("left_child", "right_child", "split_feature",
                                           "threshold", "decision_type", "leaf_value"):
            return np.zeros(n, dtype)      # optional statistics
        raise ValueError(f"from_lightgbm: tree {i}: {key!r} has {a.shape[0]} values, "
                         f"expected {n}")
    return a


def _lgb_numeric(t, dl, missing, i):
    """(threshold, default_left) of bonsai's rule for a LightGBM numeric split."""
    if missing == 2:                 # NaN: NaN goes the default way, others compare
        return t, dl
    if missing == 0:                 # None: NaN is 0.0
        return t, int(0.0 <= t)
    # Zero: |x| <= 1e-35 and NaN go the default way
    if dl and t >= -_K_ZERO:
        return max(t, _K_ZERO), 1
    if not dl and t < -_K_ZERO:
        return t, 0
    if not dl and t <= _K_ZERO:
        return float(np.nextafter(-_K_ZERO, -np.inf)), 0
    raise ValueError(f"from_lightgbm: tree {i} has a zero-as-missing split (threshold "
                     f"{t!r}, zero goes {'left' if dl else 'right'}) that bonsai cannot "
                     "express: bonsai sends 0.0 the way 'x <= threshold' does")


def _lgb_tree(t, i, scale, cat_feats):
    n_leaves = int(t.get("num_leaves", "0"))
    if n_leaves < 1:
        raise ValueError(f"from_lightgbm: tree {i} has num_leaves={n_leaves}")
    if int(t.get("is_linear", "0")):
        raise ValueError("from_lightgbm: linear trees (linear_tree=True) are not supported")
    leaf_value = _lgb_arr(t, "leaf_value", np.float64, n_leaves, i)
    n_int = n_leaves - 1
    nodes = _empty_nodes(n_int + n_leaves)
    nodes["value"][n_int:] = (leaf_value * scale).tolist()
    nodes["cover"][n_int:] = _lgb_arr(t, "leaf_weight", np.float64, n_leaves, i).tolist()
    nodes["count"][n_int:] = _lgb_arr(t, "leaf_count", np.int64, n_leaves, i).tolist()
    cat_left = [None] * (n_int + n_leaves)
    if n_int == 0:
        return _make_tree(nodes, cat_left)
    feat = _lgb_arr(t, "split_feature", np.int64, n_int, i)
    thr = _lgb_arr(t, "threshold", np.float64, n_int, i)
    dtype = _lgb_arr(t, "decision_type", np.int64, n_int, i)
    kids = [_lgb_arr(t, key, np.int64, n_int, i) for key in ("left_child", "right_child")]
    value = _lgb_arr(t, "internal_value", np.float64, n_int, i) * scale
    gain = _lgb_arr(t, "split_gain", np.float64, n_int, i)
    cover = _lgb_arr(t, "internal_weight", np.float64, n_int, i)
    count = _lgb_arr(t, "internal_count", np.int64, n_int, i)
    bounds = np.array(t.get("cat_boundaries", "").split(), dtype=np.int64)
    words = np.array(t.get("cat_threshold", "").split(), dtype=np.uint64)
    for j in range(n_int):
        nodes["feature"][j] = int(feat[j])
        nodes["value"][j], nodes["gain"][j] = float(value[j]), float(gain[j])
        nodes["cover"][j], nodes["count"][j] = float(cover[j]), int(count[j])
        for side, arr in zip(("left", "right"), kids):
            c = int(arr[j])
            nodes[side][j] = c if c >= 0 else n_int + ~c
        if dtype[j] & 1:             # categorical: bitset over integer values goes left
            k = int(thr[j])
            if not 0 <= k < bounds.shape[0] - 1:
                raise ValueError(f"from_lightgbm: tree {i}: bad categorical split index {k}")
            w = words[bounds[k]:bounds[k + 1]]
            codes = [32 * q + b for q in range(w.shape[0]) for b in range(32)
                     if (int(w[q]) >> b) & 1]
            cat_feats.setdefault(int(feat[j]), set()).update(codes)
            cat_left[j] = _cat_node(nodes, j, codes)
        else:
            nodes["threshold"][j], nodes["default_left"][j] = _lgb_numeric(
                float(thr[j]), int(dtype[j] >> 1) & 1, int(dtype[j] >> 2) & 3, i)
    return _make_tree(nodes, cat_left)


def _lgb_categories(header, cat_feats, pandas_cat):
    """The CategoryMap of the categorical features (declared in feature_infos or split
    on): a DataFrame's stored categories, else the integer values 0..max."""
    infos = header.get("feature_infos", "").split()
    feats = sorted({j for j, s in enumerate(infos) if s != "none" and not s.startswith("[")}
                   | set(cat_feats))
    if not feats:
        return None
    if pandas_cat and len(pandas_cat) == len(feats):   # DataFrame category columns
        values = [list(v) for v in pandas_cat]
    else:
        values = [list(range(max(cat_feats.get(j) or {0}) + 1)) for j in feats]
    try:
        return CategoryMap(feats, values)
    except (TypeError, ValueError) as e:
        raise ValueError(f"from_lightgbm: unsupported category values: {e}") from None


def read_lightgbm(model):
    """A LightGBM model as a bonsai Booster's state (``Booster.from_lightgbm`` builds the
    Booster).

    Parameters
    ----------
    model : str (model text), path of a text model file, lightgbm.Booster or LightGBM
        sklearn estimator (their ``model_to_string()``: up to the best iteration when
        early stopping ran, as LightGBM predicts by default).

    Returns
    -------
    dict of Booster attributes: a Booster whose ``predict`` matches LightGBM's (see the
    module docstring; a random forest's margins are the trees' mean, LightGBM's raw
    scores their sum).
    """
    text = _lgb_text(model)
    with _malformed("from_lightgbm", "LightGBM text model"):
        return _from_lgb_text(text)


def _from_lgb_text(text):
    header, trees_doc, pandas_cat = _lgb_parse(text)
    tokens = header.get("objective", "regression").split() or ["regression"]
    name = tokens[0]
    opts = dict(tok.partition(":")[::2] for tok in tokens[1:])
    if name not in _LGB_OBJECTIVES or "sqrt" in opts:
        raise ValueError(f"from_lightgbm: objective {' '.join(tokens)!r} is not supported; "
                         f"supported: {sorted(_LGB_OBJECTIVES)} (not multiclassova, "
                         "cross_entropy_lambda nor regression with reg_sqrt)")
    objective = _LGB_OBJECTIVES[name]
    n_features = int(header["max_feature_idx"]) + 1
    k = int(header.get("num_tree_per_iteration", header.get("num_class", "1")))
    scale = float(opts.get("sigmoid", 1.0)) if name == "binary" else 1.0
    if k < 1 or (objective == "multiclass") != (k > 1) and objective != "custom":
        raise ValueError(f"from_lightgbm: objective {name!r} with {k} trees per iteration")
    if "average_output" in header:
        scale /= max(len(trees_doc) // k, 1)     # random forest: the trees' mean
    cat_feats = {}
    trees = [_lgb_tree(t, i, scale, cat_feats) for i, t in enumerate(trees_doc)]
    if any(t.max_feature() >= n_features for t in trees):
        raise ValueError("from_lightgbm: a tree uses a feature index > max_feature_idx")
    names = header.get("feature_names", "").split()
    oparams = {}
    if "alpha" in opts:
        oparams["huber_delta" if objective == "huber" else "alpha"] = float(opts["alpha"])
    if "tweedie_variance_power" in opts:
        oparams["tweedie_variance_power"] = float(opts["tweedie_variance_power"])
    return _model_state("lightgbm", trees, [i % k for i in range(len(trees))], k,
                        n_features, names if len(names) == n_features else None,
                        np.zeros(k), objective, oparams,
                        _lgb_categories(header, cat_feats, pandas_cat), " ".join(tokens))
