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
predicted from a model that did not pass the checks.  The reader is strict, for
files from strangers: JSON only (no code runs), a key twice in one object or a
document nested too deeply is rejected; numbers are never converted silently (a
float, bool or string in an integer field, a bool or a string other than the
writer's "inf" / "-inf" / "nan" in a float field, an integer beyond its dtype or
beyond float64 are errors); every size is checked against the arrays the file
holds before anything is allocated (``n_outputs`` against ``base_score``, a tree's
fields against each other, ``cat_left`` codes against the largest category map, so
bitsets are bounded by the file's size); leaf values, gains, covers and base_score
are finite, a numeric split's threshold is not NaN (+-inf are real thresholds:
every value goes one way), ``bin_threshold`` lies in ``[-1, 65534]``, and the
running margin bounds stay within float64 (``margin_bounds``, the rule training
applies too).  ``n_features`` is at most 2**31 - 1: only per-feature outputs
(``feature_importance``) grow with it.
"""
import json
import math

import numpy as np

from .._params import GROW_POLICIES, MULTI_STRATEGIES
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


#: the model schema versions this release reads
READS = tuple(range(1, SCHEMA_VERSION + 1))
#: the strings the writer puts in place of non-finite floats (``_clean``)
_NONFINITE = {"inf": math.inf, "-inf": -math.inf, "nan": math.nan}
#: most features a model may declare (a tree's feature index is an int32)
MAX_FEATURES = 2 ** 31 - 1
_TREE_FLOATS = ("threshold", "gain", "cover")
_TREE_INTS = ("feature", "bin_threshold", "default_left", "left", "right", "count")
_DICT_FIELDS = ("params", "extra")


def _short(v):
    text = repr(v) if not isinstance(v, int) or abs(v) < 10 ** 30 else f"<{v.bit_length()}-bit int>"
    return text if len(text) <= 40 else text[:37] + "..."


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _num(v, what):
    """A JSON number (or the writer's "inf" / "-inf" / "nan") as a float."""
    if isinstance(v, str) and v in _NONFINITE:
        return _NONFINITE[v]
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError(f"invalid model: {what} must be numbers, not {_short(v)}")
    try:
        return float(v)
    except OverflowError:
        raise ValueError(f"invalid model: {what} holds {_short(v)}, beyond float64") from None


def _floats(values, what):
    if not isinstance(values, list):
        raise ValueError(f"invalid model: {what} must be a list of numbers, not "
                         f"{_short(values)}")
    return [_num(v, what) for v in values]


def _values(values):
    """A tree's "value": numbers, or (vector leaves) lists of numbers of one length."""
    if isinstance(values, list) and values and all(isinstance(v, list) for v in values):
        if len({len(v) for v in values}) != 1:
            raise ValueError("'value' lists differ in length")
        return [_floats(v, "value") for v in values]
    return _floats(values, "value")


class _DuplicateKey(ValueError):
    pass


def _parse(text):
    """The JSON document of ``text``: a duplicated key, a document nested too
    deeply or anything else JSON cannot read raises ValueError."""
    def pairs(items):
        out = dict(items)
        if len(out) != len(items):
            seen = set()
            dup = next(k for k, _ in items if k in seen or seen.add(k))
            raise _DuplicateKey(f"not a valid bonsai model: the JSON has the key "
                                f"{_short(dup)} twice in one object")
        return out
    try:
        return json.loads(text, object_pairs_hook=pairs)
    except _DuplicateKey:
        raise
    except RecursionError:
        raise ValueError("not a valid bonsai model: the JSON is nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as e:    # JSONDecodeError is a ValueError
        raise ValueError(f"not a valid bonsai model (truncated or corrupt JSON): {e}") from None


def _check_header(doc):
    """The fields outside the trees (checked in place); returns (k, n_features)."""
    version = doc.get("schema_version")
    if not _is_int(version):
        raise ValueError("invalid model: 'schema_version' is missing or not an integer")
    if version > SCHEMA_VERSION:
        raise ValueError(
            f"this model was written with model schema {version} (bonsai "
            f"{_short(doc.get('bonsai_version', '?'))}); this bonsai {__version__} reads "
            f"schema versions {', '.join(map(str, READS))}: upgrade bonsai to load it")
    if version not in READS:
        raise ValueError(f"invalid model: schema_version={version} is not a model schema "
                         f"(this bonsai reads {', '.join(map(str, READS))})")
    missing = [k for k in _REQUIRED if k not in doc]
    if missing:
        raise ValueError(f"invalid model: missing fields {missing}")
    k = doc["n_outputs"]
    n_features = doc["n_features"]
    if not _is_int(k) or k < 1:
        raise ValueError(f"invalid model: bad n_outputs={_short(k)} (an integer >= 1)")
    if not _is_int(n_features) or not 1 <= n_features <= MAX_FEATURES:
        raise ValueError(f"invalid model: bad n_features={_short(n_features)} (an integer "
                         f"in [1, {MAX_FEATURES}])")
    base = doc["base_score"] = _floats(doc["base_score"], "base_score")
    if len(base) != k:       # so n_outputs is bounded by the numbers the file holds
        raise ValueError("invalid model: base_score length differs from n_outputs")
    if not all(map(math.isfinite, base)):
        raise ValueError("invalid model: base_score must be finite numbers")
    for key in ("trees", "tree_class"):
        if not isinstance(doc[key], list):
            raise ValueError(f"invalid model: {key!r} must be a list")
    if len(doc["trees"]) != len(doc["tree_class"]):
        raise ValueError("invalid model: trees and tree_class differ in length")
    if any(not _is_int(c) or not 0 <= c < k for c in doc["tree_class"]):
        raise ValueError("invalid model: a tree_class is out of range")
    names = doc.get("feature_names")
    if names is not None and (not isinstance(names, list) or len(names) != n_features):
        raise ValueError("invalid model: feature_names length differs from n_features")
    if names is not None and not all(isinstance(v, str) for v in names):
        raise ValueError("invalid model: feature_names must be strings")
    obj = doc["objective"]
    if (not isinstance(obj, dict) or not isinstance(obj.get("name"), str)
            or not isinstance(obj.get("params", {}), (dict, type(None)))):
        raise ValueError("invalid model: bad 'objective' field (a name and a dict of params)")
    for key in _DICT_FIELDS:
        if not isinstance(doc.get(key), (dict, type(None))):
            raise ValueError(f"invalid model: {key!r} must be a JSON object, not "
                             f"{_short(doc[key])}")
    policy = doc.get("grow_policy", GROW_POLICIES[0])
    if not isinstance(policy, str) or policy not in GROW_POLICIES:
        raise ValueError(f"invalid model: grow_policy={_short(policy)} is not one of "
                         f"{list(GROW_POLICIES)}")
    return k, n_features


def _check_strategy(doc, k):
    """The model's ``multi_strategy`` (checked), and its trees' classes under it."""
    strategy = doc.get("multi_strategy", MULTI_STRATEGIES[0])
    if not isinstance(strategy, str) or strategy not in MULTI_STRATEGIES:
        raise ValueError(f"invalid model: multi_strategy={_short(strategy)} is not one of "
                         f"{list(MULTI_STRATEGIES)}")
    if strategy == "multi_output_tree" and any(c != 0 for c in doc["tree_class"]):
        raise ValueError("invalid model: a multi_output_tree model's trees must all have "
                         "tree_class 0 (each tree holds every output)")
    return strategy


def loads(text):
    """Parse and check a model document; returns (doc, trees)."""
    doc = _parse(text)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError("not a bonsai model: the 'format' field is missing or wrong")
    k, n_features = _check_header(doc)
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
    max_code = max(n_codes.values(), default=0)
    trees = []
    for i, td in enumerate(doc["trees"]):
        try:
            if not isinstance(td, dict):
                raise ValueError("a tree must be a JSON object")
            for key in _TREE_FLOATS:
                td[key] = _floats(td[key], key)
            for key in _TREE_INTS:       # JSON true / false are not 1 / 0 here
                if isinstance(td[key], list) and any(isinstance(v, bool) for v in td[key]):
                    raise ValueError(f"tree field {key!r} must hold integers, not booleans")
            td["value"] = _values(td["value"])
            _check_cat_features(td, n_codes)
            # bitsets hold codes below the largest category map the file holds
            tree = Tree.from_dict(td, max_code=max_code)
        except KeyError as e:
            raise ValueError(f"invalid model: tree {i}: missing field {e}") from None
        except (TypeError, ValueError) as e:
            msg = str(e).removeprefix("invalid model: ")
            raise ValueError(f"invalid model: tree {i}: {msg}") from None
        if vector and (tree.value.ndim != 2 or tree.n_values != k):
            raise ValueError(f"invalid model: tree {i} has values of shape "
                             f"{tree.value.shape}; a multi_output_tree model with "
                             f"n_outputs={k} needs one {k}-list per node")
        if not vector and tree.value.ndim != 1:
            raise ValueError(f"invalid model: tree {i} has vector values (shape "
                             f"{tree.value.shape}) but the model is not a "
                             "multi_output_tree model (no \"multi_strategy\" field)")
        internal = tree.left >= 0
        if np.any(np.isnan(tree.threshold) & internal & ~tree.is_categorical()):
            raise ValueError(f"invalid model: tree {i} has a NaN threshold on a numeric "
                             "split (+-inf are thresholds; NaN compares with nothing)")
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
    _check_margin(doc, trees)
    return doc, trees


def _check_cat_features(td, n_codes):
    """A node with category codes in "cat_left" splits on a categorical feature
    (checked before the bitsets are built)."""
    cl, feats = td.get("cat_left"), td.get("feature")
    if isinstance(cl, list) and isinstance(feats, list) and len(cl) == len(feats):
        for codes, f in zip(cl, feats):
            if codes and isinstance(codes, list) and (not _is_int(f) or f not in n_codes):
                raise ValueError("a categorical split (\"cat_left\" codes) on a feature "
                                 "that is not categorical")


def margin_bounds(trees, tree_class, bounds):
    """Add ``trees`` to the running margin bounds ``bounds = (lo, hi)`` (lists, one
    entry per output, starting at base_score): each tree adds its smallest and largest
    value.  Raises ValueError when a bound leaves float64, i.e. when some row's margin
    could overflow on the way -- the trainer checks its trees with the same rule, so
    every model it writes loads."""
    for tree, c in zip(trees, tree_class):
        v = tree.value
        if v.ndim == 1:     # a scalar tree: two floats (the trainer checks every tree)
            add_margin_range(bounds, c, float(v.min()), float(v.max()))
        else:
            for j, (tmin, tmax) in enumerate(zip(v.min(axis=0).tolist(),
                                                 v.max(axis=0).tolist())):
                add_margin_range(bounds, c + j, tmin, tmax)
    return bounds


def add_margin_range(bounds, c, tmin, tmax):
    """``margin_bounds``' step for output ``c``: add one tree's smallest and largest
    value ``tmin``, ``tmax`` (floats) to ``bounds = (lo, hi)`` in place; ValueError
    when a bound leaves float64."""
    lo, hi = bounds
    lo[c] += tmin
    hi[c] += tmax
    if not (math.isfinite(lo[c]) and math.isfinite(hi[c])):
        raise ValueError("tree values (with base_score) can add up to a margin "
                         "beyond float64; the leaf values are too large")


def _check_margin(doc, trees):
    """Every output's margin stays finite whatever the row (``margin_bounds``; a large
    base_score offset by large leaves is fine)."""
    try:
        margin_bounds(trees, doc["tree_class"], (list(doc["base_score"]),
                                                 list(doc["base_score"])))
    except ValueError as e:
        raise ValueError(f"invalid model: {e}") from None


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
        if not all(isinstance(v, (str, int, float)) for v in c):
            raise ValueError(f"invalid model: bad 'categorical' field: feature {f} has a "
                             "category that is not a string, number or boolean")
        if not all(math.isfinite(v) for v in c if isinstance(v, float)):
            raise ValueError(f"invalid model: bad 'categorical' field: feature {f} has a "
                             "non-finite category")
        # the code lookup is a dict: values equal in Python (1, 1.0, True) collide
        if len(c) != len(set(c)):
            raise ValueError(f"invalid model: bad 'categorical' field: feature {f} lists "
                             "a category twice")
    return {f: len(c) for f, c in zip(feats, cats)}
