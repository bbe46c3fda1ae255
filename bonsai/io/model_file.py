"""Model files: the versioned JSON schema, and its strict reader.

Layout (schema_version 2; a model without categorical features is written as
schema 1, which older bonsai versions read)::

    {"format": "bonsai-model", "schema_version": 1, "bonsai_version": "...",
     "objective": {"name": "binary", "params": {...}},
     "n_outputs": K, "n_features": F, "feature_names": [...] | null,
     "base_score": [K floats], "params": {...}, "grow_policy": "depthwise",
     "best_iteration": int | null, "best_score": float | null,
     "tree_class": [class of each tree], "trees": [Tree.to_dict(), ...],
     "extra": {...},
     "categorical": {"features": [j, ...], "categories": [[value, ...], ...]},  (schema 2)
     "ctr": {"groups": [...], "prior": [...], ...},  (cat_encoding="ordered", schema 2)
     "multi_strategy": "multi_output_tree"}  (vector-leaf models only)

A vector-leaf model (``multi_strategy`` "multi_output_tree"; the field is absent for
every other model, so their files are unchanged) has one tree per round, each with
``tree_class`` 0 and a "value" of one K-list per node (K = n_outputs); every other
model's trees have one number per node.

A tree's categorical splits are its "cat_left" field: per node, the category codes
sent left (``[]`` for the other nodes; see ``bonsai.tree``).

A malformed, truncated or future-version file raises ValueError; nothing is
predicted from a model that did not pass the checks.
"""
import json
import math

import numpy as np

from .._params import MULTI_STRATEGIES
from .._version import __version__
from ..tree import Tree

FORMAT = "bonsai-model"
SCHEMA_VERSION = 2
SCHEMA_VERSION_NUMERIC = 1
_REQUIRED = ("objective", "n_outputs", "n_features", "base_score", "tree_class", "trees")


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return repr(x)  # "inf", "-inf", "nan" survive a round trip through float()
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


def dumps(doc):
    """Deterministic JSON text of a model document (sorted keys, repr floats)."""
    return json.dumps(_clean(doc), sort_keys=True, separators=(",", ":"), allow_nan=False)


def _floats(values, what):
    try:
        return [float(v) for v in values]
    except (TypeError, ValueError):
        raise ValueError(f"invalid model: {what} must be numbers") from None


def _values(values):
    """A tree's "value": numbers, or (vector leaves) lists of numbers of one length."""
    if isinstance(values, list) and values and all(isinstance(v, list) for v in values):
        if len({len(v) for v in values}) != 1:
            raise ValueError("'value' lists differ in length")
        return [_floats(v, "value") for v in values]
    return _floats(values, "value")


def _check_strategy(doc, k):
    """The model's ``multi_strategy`` (checked), and its trees' classes under it."""
    strategy = doc.get("multi_strategy", MULTI_STRATEGIES[0])
    if strategy not in MULTI_STRATEGIES:
        raise ValueError(f"invalid model: multi_strategy={strategy!r} is not one of "
                         f"{list(MULTI_STRATEGIES)}")
    if strategy == "multi_output_tree" and any(c != 0 for c in doc["tree_class"]):
        raise ValueError("invalid model: a multi_output_tree model's trees must all have "
                         "tree_class 0 (each tree holds every output)")
    return strategy


def loads(text):
    """Parse and check a model document; returns (doc, trees)."""
    try:
        doc = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"not a valid bonsai model (truncated or corrupt JSON): {e}") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError("not a bonsai model: the 'format' field is missing or wrong")
    version = doc.get("schema_version")
    if not isinstance(version, int):
        raise ValueError("invalid model: 'schema_version' is missing")
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"this model was written with model schema {version} (bonsai "
            f"{doc.get('bonsai_version', '?')}); this bonsai {__version__} reads schema "
            f"<= {SCHEMA_VERSION}: upgrade bonsai to load it")
    missing = [k for k in _REQUIRED if k not in doc]
    if missing:
        raise ValueError(f"invalid model: missing fields {missing}")
    k = doc["n_outputs"]
    n_features = doc["n_features"]
    if not isinstance(k, int) or k < 1 or not isinstance(n_features, int) or n_features < 1:
        raise ValueError("invalid model: bad n_outputs or n_features")
    doc["base_score"] = _floats(doc["base_score"], "base_score")
    if len(doc["base_score"]) != k:
        raise ValueError("invalid model: base_score length differs from n_outputs")
    if len(doc["trees"]) != len(doc["tree_class"]):
        raise ValueError("invalid model: trees and tree_class differ in length")
    if any(not isinstance(c, int) or not 0 <= c < k for c in doc["tree_class"]):
        raise ValueError("invalid model: a tree_class is out of range")
    names = doc.get("feature_names")
    if names is not None and (not isinstance(names, list) or len(names) != n_features):
        raise ValueError("invalid model: feature_names length differs from n_features")
    if names is not None and not all(isinstance(v, str) for v in names):
        raise ValueError("invalid model: feature_names must be strings")
    vector = _check_strategy(doc, k) == "multi_output_tree"
    _check_best(doc, len(doc["trees"]) // (1 if vector else k))
    ctr = doc.get("ctr")
    n_ext = n_features
    if ctr is not None:      # CTR features follow the original ones (bonsai.ordered)
        try:
            n_ext += len(ctr["groups"]) * (len(ctr["prior"]) + 1)
        except (KeyError, TypeError):
            raise ValueError("invalid model: bad 'ctr' field") from None
    cat_doc = doc.get("categorical")
    n_codes = _category_counts(cat_doc, n_features)
    trees = []
    for i, td in enumerate(doc["trees"]):
        try:
            for key in ("threshold", "gain", "cover"):
                td[key] = _floats(td[key], key)
            td["value"] = _values(td["value"])
            tree = Tree.from_dict(td)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"invalid model: tree {i}: {e}") from None
        if vector and (tree.value.ndim != 2 or tree.n_values != k):
            raise ValueError(f"invalid model: tree {i} has values of shape "
                             f"{tree.value.shape}; a multi_output_tree model with "
                             f"n_outputs={k} needs one {k}-list per node")
        if not vector and tree.value.ndim != 1:
            raise ValueError(f"invalid model: tree {i} has vector values (shape "
                             f"{tree.value.shape}) but the model is not a "
                             "multi_output_tree model (no \"multi_strategy\" field)")
        if tree.max_feature() >= n_ext:
            raise ValueError(f"invalid model: tree {i} uses a feature index >= n_features")
        for node in map(int, np.flatnonzero(tree.is_categorical())):
            f = int(tree.feature[node])
            if f not in n_codes:
                raise ValueError(f"invalid model: tree {i} has a categorical split on a "
                                 "feature that is not categorical")
            top = tree.cat_left(node)[-1]
            if top >= n_codes[f]:
                raise ValueError(f"invalid model: tree {i} node {node}: 'cat_left' has "
                                 f"category code {top}, but feature {f} has "
                                 f"{n_codes[f]} categories")
        trees.append(tree)
    return doc, trees


def _check_best(doc, n_rounds):
    """``best_iteration``: None or a round of the model (predict keeps the trees up to
    it, so a bad value would drop trees silently); ``best_score``: None or a number."""
    best = doc.get("best_iteration")
    if best is not None and (not isinstance(best, int) or isinstance(best, bool)
                             or not 0 <= best < n_rounds):
        raise ValueError(f"invalid model: best_iteration={best!r} is not a round of the "
                         f"model (0 <= best_iteration < {n_rounds}, or null)")
    score = doc.get("best_score")
    if isinstance(score, str):      # non-finite floats are written as their repr
        try:
            score = doc["best_score"] = float(score)
        except ValueError:
            raise ValueError(f"invalid model: best_score={score!r} is not a number") from None
    if score is not None and (not isinstance(score, (int, float)) or isinstance(score, bool)):
        raise ValueError(f"invalid model: best_score={score!r} is not a number")


def _category_counts(cat_doc, n_features):
    """{feature: number of category codes} of the 'categorical' field (checked)."""
    if cat_doc is None:
        return {}
    if not isinstance(cat_doc, dict):
        raise ValueError("invalid model: bad 'categorical' field")
    feats, cats = cat_doc.get("features"), cat_doc.get("categories")
    if (not isinstance(feats, list) or not isinstance(cats, list) or len(feats) != len(cats)
            or not all(isinstance(c, list) for c in cats)):
        raise ValueError("invalid model: bad 'categorical' field: 'features' and "
                         "'categories' must be lists of the same length")
    if (not all(isinstance(f, int) and not isinstance(f, bool) and 0 <= f < n_features
                for f in feats) or len(set(feats)) != len(feats)):
        raise ValueError(f"invalid model: bad 'categorical' field: features {feats!r} "
                         f"must be distinct indices in [0, {n_features})")
    for f, c in zip(feats, cats):
        if len(c) != len(set(map(repr, c))):
            raise ValueError(f"invalid model: bad 'categorical' field: feature {f} lists "
                             "a category twice")
    return {f: len(c) for f, c in zip(feats, cats)}
