"""Export a trained :class:`bonsai.Booster` to other tree runtimes: ONNX
(``ai.onnx.ml`` tree ensembles, run by onnxruntime and other ONNX runtimes) and
Treelite (a ``treelite.Model`` built with ``treelite.model_builder``).

This module owns the translation of bonsai's tree arrays into those formats and the
input convention of the exported models; ``onnx`` and ``treelite`` are imported only
when an export function is called.

Conventions of every exported model
-----------------------------------
* The trees are those :meth:`Booster.predict` uses by default (up to
  ``best_iteration`` when early stopping ran).
* Input: one float matrix ``(n, n_features)``.  For the ONNX model it must be
  float32 (ONNX tree ensembles take float32); thresholds are stored as
  ``bonsai._dtypes.float32_floor(threshold)``, so a float32 input takes exactly the
  branches bonsai takes for the same float32 values.  The Treelite model keeps the
  float64 thresholds (exact for float32 and float64 inputs).  NaN follows each
  node's default direction.
* Categorical features: the exported models test **category codes** (the integer
  codes bonsai's Booster uses internally, as floats, NaN for missing/unseen
  categories), not the raw category values.  Build the input with
  :func:`category_codes`.  ONNX uses the ``ai.onnx.ml`` opset-5 ``TreeEnsemble``
  operator with ``BRANCH_MEMBER`` nodes for such models (runs in onnxruntime 1.32,
  the version tested; older runtimes may lack that operator); other models use the
  opset-3 ``TreeEnsembleRegressor`` / ``TreeEnsembleClassifier``.
* Vector-leaf models (``multi_strategy="multi_output_tree"``: one tree per round
  holding K outputs) are written as the equivalent one-output-per-tree model: each
  tree as its K scalar views (``bonsai.tree.expand``), view k adding to output k.
  The exported model is the one the equivalent model exports (the same bytes), so
  it predicts what the vector model predicts.
* Models trained with ``cat_encoding="ordered"`` (target statistics computed from
  the raw categories, ``booster.ctr``) cannot be exported: ValueError.

ONNX outputs: ``"variable"`` (float, ``(n, 1)``, or ``(n, K)`` for a multi-output
custom objective) for regression objectives (identity link; poisson / gamma /
tweedie add an ``Exp`` node); ``"label"`` (int64, ``(n,)``) and
``"probabilities"`` (float, ``(n, 2)`` ``[1 - p, p]`` for binary, ``(n, K)`` for
multiclass) for classifiers.
"""
import importlib
import json

import numpy as np

from .._dtypes import float32_floor
from .._version import __version__
from ..objectives import _ALIASES
from ..tree import expand

__all__ = ["to_onnx", "to_treelite", "category_codes", "DEFAULT_OPSET"]

#: default ``ai.onnx`` (main domain) opset of :func:`to_onnx`
DEFAULT_OPSET = 17
_MIN_OPSET = 13          # Softmax over one axis (the categorical-model heads)

_IDENTITY = ("squared_error", "absolute_error", "huber", "quantile", "custom")
_EXP = ("poisson", "gamma", "tweedie")


# ---- shared checks --------------------------------------------------------------------
def _require(module, pip_name, what):
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(f"{what} requires the {pip_name!r} package; install it with "
                          f"`pip install {pip_name}`") from e


#: what export reads of a model: a bonsai.Booster has every one (checked by name, as
#: ``bonsai.booster`` imports this module for ``Booster.to_onnx``, not the reverse)
_BOOSTER_ATTRS = ("trees", "tree_class", "base_score", "objective", "n_outputs",
                  "n_features", "ctr", "_tree_range", "_check_X")


def _check_booster(booster, fn):
    if not all(hasattr(booster, a) for a in _BOOSTER_ATTRS):
        raise TypeError(f"{fn}: booster must be a bonsai.Booster; got "
                        f"{type(booster).__name__}")
    if booster.ctr is not None:
        raise ValueError(
            f"{fn}: this model holds ordered target statistics of categorical features "
            "(booster.ctr: cat_encoding='ordered', or 'auto' on id-like features), computed "
            "from the raw categories; such models cannot be exported. Train with "
            "cat_encoding='native' to export.")


def _link(booster, fn):
    """'identity' | 'exp' | 'sigmoid' | 'softmax' of the booster's objective."""
    name = _ALIASES.get(booster.objective, booster.objective)
    if name == "binary":
        return "sigmoid"
    if name == "multiclass":
        return "softmax"
    if name in _EXP:
        return "exp"
    if name in _IDENTITY:
        return "identity"
    raise ValueError(f"{fn}: objective {booster.objective!r} has no known output transform "
                     f"(supported: {', '.join(_IDENTITY + _EXP + ('binary', 'multiclass'))})")


def _model_parts(booster, fn):
    """(trees, tree classes, link, K, base_score) of the trees ``predict`` uses."""
    _check_booster(booster, fn)
    link = _link(booster, fn)
    k = int(booster.n_outputs)
    base = np.asarray(booster.base_score, dtype=np.float64).reshape(-1)
    if base.shape[0] != k:
        raise ValueError(f"{fn}: booster.base_score has {base.shape[0]} values for "
                         f"n_outputs={k}")
    if link == "sigmoid" and k != 1:
        raise ValueError(f"{fn}: a binary model must have n_outputs=1; got {k}")
    if link == "softmax" and k < 2:
        raise ValueError(f"{fn}: a multiclass model must have n_outputs >= 2; got {k}")
    t0, t1 = booster._tree_range(None)
    trees, classes, _ = expand(booster.trees[t0:t1], booster.tree_class[t0:t1])
    return trees, classes, link, k, base


def _has_cat(trees):
    return any(t.is_categorical().any() for t in trees)


def category_codes(booster, X):
    """The float32 input matrix the exported models expect for ``X``: categorical
    columns replaced by the model's category codes (NaN for missing and unseen
    categories), numeric columns cast to float32.  Accepts what
    :meth:`Booster.predict` accepts (a pandas DataFrame with ``category`` columns, a
    numeric array); for a model without categorical features it only checks ``X``
    and casts it."""
    _check_booster(booster, "category_codes")
    return np.ascontiguousarray(booster._check_X(X), dtype=np.float32)


# ---- ONNX -----------------------------------------------------------------------------
def _check_opset(opset, onnx):
    if opset is None:
        return DEFAULT_OPSET
    latest = onnx.defs.onnx_opset_version()
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)) \
            or not _MIN_OPSET <= int(opset) <= latest:
        raise ValueError(f"to_onnx: opset must be an integer in [{_MIN_OPSET}, {latest}] "
                         f"(the ai.onnx opset of the installed onnx); got {opset!r}")
    return int(opset)


def _tree_list(trees, classes):
    """The trees to write; an empty ensemble becomes one zero leaf (ONNX and Treelite
    need at least one tree)."""
    if trees:
        return trees, classes
    from ..tree import FIELDS, Tree
    one = {name: np.zeros(1, dtype) for name, dtype in FIELDS}
    one["left"][:] = -1
    one["right"][:] = -1
    one["feature"][:] = -1
    return [Tree(**one)], [0]


def _v3_attributes(trees, classes, classifier):
    """Attributes of an ai.onnx.ml opset-3 TreeEnsembleRegressor/Classifier."""
    nodes = {k: [] for k in ("treeids", "nodeids", "featureids", "values", "modes",
                             "truenodeids", "falsenodeids", "missing")}
    leaves = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t, (tree, k) in enumerate(zip(trees, classes)):
        n = tree.n_nodes
        internal = tree.left >= 0
        thr = float32_floor(np.where(internal, tree.threshold, 0.0).astype(np.float64))
        nodes["treeids"] += [t] * n
        nodes["nodeids"] += list(range(n))
        nodes["featureids"] += np.where(internal, tree.feature, 0).astype(int).tolist()
        nodes["values"] += np.where(internal, thr, 0.0).astype(np.float32).tolist()
        nodes["modes"] += ["BRANCH_LEQ" if i else "LEAF" for i in internal]
        nodes["truenodeids"] += np.where(internal, tree.left, 0).astype(int).tolist()
        nodes["falsenodeids"] += np.where(internal, tree.right, 0).astype(int).tolist()
        nodes["missing"] += (internal & (tree.default_left != 0)).astype(int).tolist()
        lv = np.flatnonzero(~internal)
        leaves["treeids"] += [t] * lv.size
        leaves["nodeids"] += lv.tolist()
        leaves["ids"] += [k] * lv.size
        leaves["weights"] += tree.value[lv].astype(np.float32).tolist()
    pre = "class" if classifier else "target"
    return {"nodes_treeids": nodes["treeids"], "nodes_nodeids": nodes["nodeids"],
            "nodes_featureids": nodes["featureids"], "nodes_values": nodes["values"],
            "nodes_modes": nodes["modes"], "nodes_truenodeids": nodes["truenodeids"],
            "nodes_falsenodeids": nodes["falsenodeids"],
            "nodes_missing_value_tracks_true": nodes["missing"],
            f"{pre}_treeids": leaves["treeids"], f"{pre}_nodeids": leaves["nodeids"],
            f"{pre}_ids": leaves["ids"], f"{pre}_weights": leaves["weights"]}


def _v5_attributes(trees, classes, k, numpy_helper):
    """Attributes of an ai.onnx.ml opset-5 TreeEnsemble (interior nodes and leaves
    numbered separately; categorical splits as BRANCH_MEMBER)."""
    cols = {c: [] for c in ("feat", "mode", "split", "miss", "tid", "tleaf", "fid", "fleaf")}
    members, roots, leaf_w, leaf_t = [], [], [], []

    def add(**row):
        for c, v in row.items():
            cols[c].append(v)

    for tree, cls in zip(trees, classes):
        internal = tree.left >= 0
        cat = tree.is_categorical()
        node_id = np.full(tree.n_nodes, -1, np.int64)
        leaf_id = np.full(tree.n_nodes, -1, np.int64)
        node_id[internal] = len(cols["feat"]) + np.arange(int(internal.sum()))
        leaf_id[~internal] = len(leaf_w) + np.arange(int((~internal).sum()))
        leaf_w += tree.value[~internal].astype(np.float32).tolist()
        leaf_t += [cls] * int((~internal).sum())
        if not internal[0]:                # a single leaf: one node, both ways to it
            roots.append(len(cols["feat"]))
            add(feat=0, mode=0, split=0.0, miss=0, tid=int(leaf_id[0]), tleaf=1,
                fid=int(leaf_id[0]), fleaf=1)
            continue
        roots.append(int(node_id[0]))
        thr = float32_floor(np.where(internal & ~cat, tree.threshold, 0.0).astype(np.float64))
        for i in np.flatnonzero(internal):
            le, ri = int(tree.left[i]), int(tree.right[i])
            kids = dict(tid=int(leaf_id[le] if not internal[le] else node_id[le]),
                        tleaf=int(not internal[le]),
                        fid=int(leaf_id[ri] if not internal[ri] else node_id[ri]),
                        fleaf=int(not internal[ri]))
            if not cat[i]:
                add(feat=int(tree.feature[i]), mode=0, split=float(thr[i]),
                    miss=int(tree.default_left[i] != 0), **kids)
                continue
            codes = tree.cat_left(i)
            if codes:                      # BRANCH_MEMBER; NaN goes the false way
                members.extend(codes + [np.nan])
                add(feat=int(tree.feature[i]), mode=6, split=0.0, miss=0, **kids)
            else:   # an empty set sends nothing left: BRANCH_LT -inf is never true
                add(feat=int(tree.feature[i]), mode=1, split=-np.inf, miss=0, **kids)
    attrs = {"n_targets": k, "aggregate_function": 1, "post_transform": 0,
             "tree_roots": roots, "nodes_featureids": cols["feat"],
             "nodes_modes": numpy_helper.from_array(np.array(cols["mode"], np.uint8),
                                                    "nodes_modes"),
             "nodes_splits": numpy_helper.from_array(np.array(cols["split"], np.float32),
                                                     "nodes_splits"),
             "nodes_truenodeids": cols["tid"], "nodes_trueleafs": cols["tleaf"],
             "nodes_falsenodeids": cols["fid"], "nodes_falseleafs": cols["fleaf"],
             "nodes_missing_value_tracks_true": cols["miss"], "leaf_targetids": leaf_t,
             "leaf_weights": numpy_helper.from_array(np.array(leaf_w, np.float32), "leaf_weights")}
    if members:
        attrs["membership_values"] = numpy_helper.from_array(
            np.array(members, np.float32), "membership_values")
    return attrs


def _v5_head(link, k, base, helper, numpy_helper, TensorProto):
    """Nodes and initializers after the opset-5 TreeEnsemble ("tree_sum" (n, K)): the
    base score, then the link function and the classifier outputs."""
    inits = [numpy_helper.from_array(base.astype(np.float32), "base_score")]
    nodes = [helper.make_node("Add", ["tree_sum", "base_score"],
                              ["variable" if link == "identity" else "margin"])]
    if link == "exp":
        nodes.append(helper.make_node("Exp", ["margin"], ["variable"]))
    elif link == "sigmoid":
        inits.append(numpy_helper.from_array(np.ones(1, np.float32), "one"))
        nodes += [helper.make_node("Sigmoid", ["margin"], ["p1"]),
                  helper.make_node("Sub", ["one", "p1"], ["p0"]),
                  helper.make_node("Concat", ["p0", "p1"], ["probabilities"], axis=1)]
    elif link == "softmax":
        nodes.append(helper.make_node("Softmax", ["margin"], ["probabilities"], axis=1))
    if link in ("sigmoid", "softmax"):
        nodes.append(helper.make_node("ArgMax", ["probabilities"], ["label"], axis=1,
                                      keepdims=0))
    return nodes, inits


def to_onnx(booster, opset=None):
    """The booster as an ``onnx.ModelProto`` (see the module docstring for the input
    and outputs).

    Parameters
    ----------
    booster : bonsai.Booster
    opset : int, optional -- the ``ai.onnx`` (main domain) opset version; default
        :data:`DEFAULT_OPSET`.  The ``ai.onnx.ml`` domain is at version 3, or 5 for
        a model with categorical splits.

    The input ``"X"`` is float32 ``(n, n_features)``; for models with categorical
    features pass the codes of :func:`category_codes`.
    """
    _check_booster(booster, "to_onnx")
    onnx = _require("onnx", "onnx", "bonsai.io.export.to_onnx")
    from onnx import TensorProto, helper, numpy_helper
    opset = _check_opset(opset, onnx)
    trees, classes, link, k, base = _model_parts(booster, "to_onnx")
    trees, classes = _tree_list(trees, classes)
    classifier = link in ("sigmoid", "softmax")
    n_cls = 2 if link == "sigmoid" else k
    outputs = ([helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
                helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, n_cls])]
               if classifier else
               [helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, k])])
    inits = []
    if _has_cat(trees):
        ml_version = 5
        nodes = [helper.make_node("TreeEnsemble", ["X"], ["tree_sum"], domain="ai.onnx.ml",
                                  **_v5_attributes(trees, classes, k, numpy_helper))]
        head, inits = _v5_head(link, k, base, helper, numpy_helper, TensorProto)
        nodes += head
    else:
        ml_version = 3
        attrs = _v3_attributes(trees, classes, classifier)
        attrs["base_values"] = base.astype(np.float32).tolist()
        if classifier:
            nodes = [helper.make_node(
                "TreeEnsembleClassifier", ["X"], ["label", "probabilities"], domain="ai.onnx.ml",
                classlabels_int64s=list(range(n_cls)),
                post_transform="LOGISTIC" if link == "sigmoid" else "SOFTMAX", **attrs)]
        else:
            out = "variable" if link == "identity" else "margin"
            nodes = [helper.make_node("TreeEnsembleRegressor", ["X"], [out], domain="ai.onnx.ml",
                                      n_targets=k, post_transform="NONE", **attrs)]
            if link == "exp":
                nodes.append(helper.make_node("Exp", ["margin"], ["variable"]))
    graph = helper.make_graph(
        nodes, "bonsai_booster",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, int(booster.n_features)])],
        outputs, initializer=inits)
    opsets = [helper.make_opsetid("", opset), helper.make_opsetid("ai.onnx.ml", ml_version)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="bonsai",
                              producer_version=__version__,
                              ir_version=helper.find_min_ir_version_for(opsets))
    model.doc_string = ("bonsai gradient-boosted trees; input X float32 (n, n_features)"
                        + ("; categorical features as category codes "
                           "(bonsai.io.export.category_codes)" if booster.categories is not None
                           else ""))
    helper.set_model_props(model, _props(booster))
    onnx.checker.check_model(model, full_check=True)
    return model


def _props(booster):
    props = {"objective": str(booster.objective), "n_features": str(int(booster.n_features))}
    if booster.feature_names is not None:
        props["feature_names"] = json.dumps([str(f) for f in booster.feature_names])
    if booster.categories is not None:
        props["categorical_features"] = json.dumps(list(booster.categories.features))
    return props


# ---- Treelite -------------------------------------------------------------------------
_POSTPROCESSOR = {"identity": "identity", "exp": "exponential", "sigmoid": "sigmoid",
                  "softmax": "softmax"}


def to_treelite(booster):
    """The booster as a ``treelite.Model`` (Treelite 4.x ``model_builder``).

    Thresholds and leaf values are float64; numeric tests are ``x <= threshold``
    with each node's default direction for NaN; categorical tests send the listed
    category codes left and NaN, negative and unlisted codes right (pass the codes
    of :func:`category_codes`).  ``treelite.gtil.predict(model, X)`` returns shape
    ``(n, 1, K)``; ``pred_margin=True`` gives the margins including ``base_score``.
    """
    _check_booster(booster, "to_treelite")
    _require("treelite", "treelite", "bonsai.io.export.to_treelite")
    from treelite.model_builder import (Metadata, ModelBuilder, PostProcessorFunc,
                                        TreeAnnotation)
    trees, classes, link, k, base = _model_parts(booster, "to_treelite")
    trees, classes = _tree_list(trees, classes)
    n = len(trees)
    if link == "softmax":      # one target with K classes
        meta = Metadata(num_feature=int(booster.n_features), task_type="kMultiClf",
                        average_tree_output=False, num_target=1, num_class=[k],
                        leaf_vector_shape=(1, 1))
        ann = TreeAnnotation(num_tree=n, target_id=[0] * n, class_id=classes)
    else:                      # K targets of one class each
        task = "kBinaryClf" if link == "sigmoid" else "kRegressor"
        meta = Metadata(num_feature=int(booster.n_features), task_type=task,
                        average_tree_output=False, num_target=k, num_class=[1] * k,
                        leaf_vector_shape=(1, 1))
        ann = TreeAnnotation(num_tree=n, target_id=classes, class_id=[0] * n)
    attributes = {"producer": "bonsai", "objective": str(booster.objective)}
    if booster.feature_names is not None:
        attributes["feature_names"] = [str(f) for f in booster.feature_names]
    builder = ModelBuilder(threshold_type="float64", leaf_output_type="float64",
                           metadata=meta, tree_annotation=ann,
                           postprocessor=PostProcessorFunc(name=_POSTPROCESSOR[link]),
                           base_scores=[float(v) for v in base], attributes=attributes)
    for tree in trees:
        _build_tree(builder, tree)
    return builder.commit()


def _build_tree(builder, tree):
    cat = tree.is_categorical()
    builder.start_tree()
    for i in range(tree.n_nodes):      # node 0, the root, first
        builder.start_node(i)
        left, right = int(tree.left[i]), int(tree.right[i])
        if left < 0:
            builder.leaf(float(tree.value[i]))
        elif cat[i]:
            codes = tree.cat_left(i)
            if codes:
                builder.categorical_test(int(tree.feature[i]), default_left=False,
                                         category_list=codes, category_list_right_child=False,
                                         left_child_key=left, right_child_key=right)
            else:   # an empty set: nothing goes left; x < -inf is never true
                builder.numerical_test(int(tree.feature[i]), -np.inf, default_left=False,
                                       opname="<", left_child_key=left, right_child_key=right)
        else:
            builder.numerical_test(int(tree.feature[i]), float(tree.threshold[i]),
                                   default_left=bool(tree.default_left[i]), opname="<=",
                                   left_child_key=left, right_child_key=right)
        if left >= 0 and tree.gain[i] >= 0:
            builder.gain(float(tree.gain[i]))
        if tree.cover[i] >= 0:
            builder.sum_hess(float(tree.cover[i]))
        if tree.count[i] >= 0:
            builder.data_count(int(tree.count[i]))
        builder.end_node()
    builder.end_tree()
