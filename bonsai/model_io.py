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
     "ctr": {"groups": [...], "prior": [...], ...}}  (cat_encoding="ordered", schema 2)

A tree's categorical splits are its "cat_left" field: per node, the category codes
sent left (``[]`` for the other nodes; see ``bonsai.tree``).

A malformed, truncated or future-version file raises ValueError; nothing is
predicted from a model that did not pass the checks.
"""
import json
import math

from .tree import Tree

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


def loads(text):
    """Parse and check a model document; returns (doc, trees)."""
    from . import __version__
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
    ctr = doc.get("ctr")
    n_ext = n_features
    if ctr is not None:      # CTR features follow the original ones (bonsai.ordered)
        try:
            n_ext += len(ctr["groups"]) * (len(ctr["prior"]) + 1)
        except (KeyError, TypeError):
            raise ValueError("invalid model: bad 'ctr' field") from None
    cat_doc = doc.get("categorical")
    if cat_doc is not None and not isinstance(cat_doc, dict):
        raise ValueError("invalid model: bad 'categorical' field")
    trees = []
    for i, td in enumerate(doc["trees"]):
        try:
            for key in ("threshold", "value", "gain", "cover"):
                td[key] = _floats(td[key], key)
            tree = Tree.from_dict(td)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"invalid model: tree {i}: {e}") from None
        if tree.max_feature() >= n_ext:
            raise ValueError(f"invalid model: tree {i} uses a feature index >= n_features")
        cat_feats = set((cat_doc or {}).get("features") or [])
        if any(int(f) not in cat_feats for f in tree.feature[tree.is_categorical()]):
            raise ValueError(f"invalid model: tree {i} has a categorical split on a "
                             "feature that is not categorical")
        trees.append(tree)
    return doc, trees
