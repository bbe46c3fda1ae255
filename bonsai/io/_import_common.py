"""Shared helpers of the model importers (``bonsai.io.importers``): a Booster's state
from imported trees, node arrays, categorical nodes, reading a model's text.
"""

import contextlib
import math
import os

import numpy as np

from ..objectives import get_objective
from ..tree import Tree


_K_ZERO = float(np.float32(1e-35))    # LightGBM's zero threshold (1e-35f as double)


# ---------------------------------------------------------------------------- shared
def _model_state(source, trees, tree_class, n_outputs, n_features, names, base_score,
                 objective, objective_params, categories, source_objective):
    """The imported model as Booster attributes (``Booster._from_state`` sets them; the
    importers never import ``bonsai.booster``, which imports them)."""
    params = {}
    for key, val in objective_params.items():   # keep the parameters bonsai accepts
        try:
            get_objective(objective, {key: val})
            params[key] = val
        except (ValueError, TypeError):
            pass
    if objective == "multiclass":
        params["num_class"] = int(n_outputs)
    return dict(
        trees=trees, tree_class=[int(c) for c in tree_class], n_outputs=int(n_outputs),
        n_features=int(n_features), feature_names=names,
        base_score=np.asarray(base_score, dtype=np.float64).reshape(n_outputs),
        objective=objective, objective_params=params, params={}, grow_policy="depthwise",
        best_iteration=None, categories=categories, _cache=None, _obj=None,
        extra={"imported_from": source, "source_objective": source_objective})


@contextlib.contextmanager
def _malformed(where, what):
    """Any error reading the model's fields becomes a ValueError naming ``where``."""
    try:
        yield
    except ValueError as e:
        if str(e).startswith(where):
            raise
        raise ValueError(f"{where}: malformed {what}: {e}") from None
    except (KeyError, IndexError, TypeError, AttributeError, OverflowError) as e:
        raise ValueError(f"{where}: malformed {what} ({type(e).__name__}: {e})") from None


def _make_tree(nodes, cat_left):
    """A checked Tree from per-node lists (``nodes``: FIELDS name -> list) and the
    per-node category codes sent left (None for a numeric node)."""
    d = dict(nodes)
    d["bin_threshold"] = [-1] * len(d["left"])
    if any(c is not None for c in cat_left):
        d["cat_left"] = [[] if c is None else c for c in cat_left]
    try:
        return Tree.from_dict(d)
    except ValueError as e:
        raise ValueError(f"the imported tree is invalid: {e}") from None


def _cat_node(nodes, i, codes):
    """Make node ``i`` categorical, sending ``codes`` left; returns its cat_left entry.
    An empty set (every valid code goes right) becomes a numeric split that no code
    (>= 0) nor NaN passes."""
    nodes["default_left"][i] = 0
    if not codes:
        nodes["threshold"][i] = -1.0
        return None
    if max(codes) >= 1 << 20:
        raise ValueError(f"a categorical split uses category {max(codes)}; bonsai supports "
                         f"category codes below {1 << 20}")
    nodes["threshold"][i] = math.nan
    return sorted(codes)


def _empty_nodes(n):
    return {"feature": [-1] * n, "threshold": [0.0] * n, "default_left": [0] * n,
            "left": [-1] * n, "right": [-1] * n, "value": [0.0] * n, "gain": [0.0] * n,
            "cover": [0.0] * n, "count": [0] * n}


def _read_text(model, what, looks_like):
    """``model`` as text: itself when ``looks_like(text)``, else a file path's content."""
    if isinstance(model, (bytes, bytearray)):
        try:
            return bytes(model).decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{what}: the bytes are not UTF-8 text (for XGBoost, save "
                             "the model with save_raw('json'))") from None
    text = model if isinstance(model, str) else None
    if text is not None and looks_like(text):
        return text
    path = os.fspath(model)
    if not os.path.isfile(path):
        short = path[:60] + ("..." if len(path) > 60 else "")
        raise ValueError(f"{what}: {short!r} is neither model text nor an existing file")
    with open(path, "rb") as fh:
        return _read_text(fh.read(), what, lambda t: True)


# ---------------------------------------------------------------------------- XGBoost
