"""Parameter table, validation and resolution.

This module owns every training parameter of bonsai. The single source of
truth is :data:`PARAM_TABLE`, a tuple of :class:`ParamSpec` entries (name,
accepted types, default, range check, doc) in the spirit of LightGBM's
``config.h``. Everything else is derived from it:

* :func:`validate_params` turns a user dict into a frozen, fully resolved
  :class:`Params` object (validate once, at the API boundary; internal code
  never re-checks parameters),
* :data:`PARAM_NAMES` lists the canonical names (there are no aliases),
* :func:`param_docs` renders the table as Markdown for the documentation.

The value checks the table uses (type tags, ``Interval``, ``Choices`` ...) live in
``bonsai._checks``.

Error conventions
-----------------
* unknown parameter name -> ``ValueError`` naming it, with close matches,
* wrong type -> ``TypeError`` naming the parameter and the value,
* out of range -> ``ValueError`` naming the parameter, the value and the
  allowed range.

``n_threads`` is kept as given (``None`` = auto) and resolved lazily by
:func:`bonsai._threads.resolve_n_threads`; it is never written to a model
file, so :meth:`Params.to_dict` leaves it out.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._checks import (_TYPE_TAGS, Check, Choices, DeviceCheck, FeatureList, GainList,
                      Interval, NonEmptyNames, _short_repr, _type_desc)

__all__ = [
    "OBJECTIVES",
    "GROW_POLICIES",
    "PARAM_NAMES",
    "PARAM_TABLE",
    "ParamSpec",
    "Params",
    "param_docs",
    "validate_params",
]

OBJECTIVES = (
    "squared_error", "absolute_error", "huber", "quantile", "poisson",
    "gamma", "tweedie", "binary", "multiclass", "lambdarank", "rank_xendcg", "rank_pairwise",
    "multi_squared_error", "multilabel_binary",
)
#: objectives with several outputs per row (the ones ``multi_strategy`` applies to)
MULTI_OUTPUT_OBJECTIVES = ("multiclass", "multi_squared_error", "multilabel_binary")
MULTI_STRATEGIES = ("one_output_per_tree", "multi_output_tree")
RANK_OBJECTIVES = ("lambdarank", "rank_xendcg", "rank_pairwise")
#: parameters read only by the ranking objectives: recorded in a model (Params.to_dict)
#: only when its objective is one of them, so other models' files are unchanged
RANK_PARAMS = ("lambdarank_truncation_level", "label_gain", "lambdarank_norm", "sigmoid")
GROW_POLICIES = ("depthwise", "leafwise", "oblivious")
#: objectives whose prediction is exp(margin), and the largest margin exp keeps finite
LOG_LINK_OBJECTIVES = ("poisson", "gamma", "tweedie")
MAX_LOG_MARGIN = 709.0
MAX_LEAVES_LIMIT = 131072  # same hard cap as LightGBM's num_leaves

# Names users often bring from other libraries; only used for "did you mean".
_HINTS = {
    "num_leaves": "max_leaves", "max_leaf_nodes": "max_leaves",
    "eta": "learning_rate", "shrinkage_rate": "learning_rate",
    "num_boost_round": "n_estimators", "num_iterations": "n_estimators",
    "num_trees": "n_estimators", "max_iter": "n_estimators",
    "lambda": "reg_lambda", "lambda_l2": "reg_lambda", "l2_regularization": "reg_lambda",
    "lambda_l1": "reg_alpha", "gamma_split": "min_split_gain",
    "min_data_in_leaf": "min_child_samples", "min_samples_leaf": "min_child_samples",
    "min_sum_hessian_in_leaf": "min_child_weight", "min_gain_to_split": "min_split_gain",
    "bagging_fraction": "subsample", "feature_fraction": "colsample_bytree",
    "feature_fraction_bynode": "colsample_bynode", "seed": "random_state",
    "n_jobs": "n_threads", "nthread": "n_threads", "num_threads": "n_threads",
    "metric": "eval_metric", "num_classes": "num_class", "max_bins": "max_bin",
    "categorical_feature": "categorical_features", "verbose": "verbosity",
    "one_hot_max_size": "max_cat_to_onehot", "max_cat_to_one_hot": "max_cat_to_onehot",
    "loss": "objective", "init_score": "base_score",
}


@dataclass(frozen=True)
class ParamSpec:
    """One parameter: canonical name, accepted type tags, default, check, doc."""

    name: str
    types: tuple[str, ...]
    default: Any
    check: Check | None
    doc: str


_POS = Interval(0, lo_closed=False)
_NONNEG = Interval(0)
_FRACTION = Interval(0, 1, lo_closed=False)
_GE1 = Interval(1)

PARAM_TABLE: tuple[ParamSpec, ...] = (
    ParamSpec("objective", ("str", "callable"), "squared_error",
              Choices(OBJECTIVES, allow_callable=True),
              "Loss to minimise: a built-in name or fobj(y_true, y_pred_raw) -> (grad, hess)."),
    ParamSpec("n_estimators", ("int",), 100, _GE1, "Number of boosting rounds."),
    ParamSpec("learning_rate", ("float",), 0.1, _POS, "Shrinkage applied to each tree."),
    ParamSpec("grow_policy", ("str",), "depthwise", Choices(GROW_POLICIES),
              "Tree growth: level by level, best leaf first, or symmetric (oblivious)."),
    ParamSpec("max_depth", ("int", "None"), None, Interval(0, 64),
              "Maximum depth, 0 = unlimited. None -> 6 (depthwise/oblivious), 0 (leafwise)."),
    ParamSpec("max_leaves", ("int", "None"), None, Interval(2, MAX_LEAVES_LIMIT, also=(0,)),
              "Maximum leaves per tree, 0 = unlimited. None -> 31 (leafwise), 0 otherwise."),
    ParamSpec("max_bin", ("int",), 255, Interval(2, 65535),
              "Maximum number of histogram bins per feature."),
    ParamSpec("min_child_weight", ("float",), 1e-3, _NONNEG,
              "Minimum sum of hessians in a child."),
    ParamSpec("min_child_samples", ("int",), 20, _GE1,
              "Minimum number of samples in a child. Oblivious trees split every node of a "
              "level with one shared split, so there a node whose child would be smaller "
              "adds no gain to the level's choice (as in CatBoost, leaves can be small)."),
    ParamSpec("min_split_gain", ("float",), 0.0, _NONNEG, "Minimum gain to make a split."),
    ParamSpec("reg_lambda", ("float",), 1.0, _NONNEG, "L2 regularisation on leaf values."),
    ParamSpec("reg_alpha", ("float",), 0.0, _NONNEG, "L1 regularisation on leaf values."),
    ParamSpec("max_delta_step", ("float",), 0.0, _NONNEG,
              "Cap on the absolute leaf output, 0 = no limit."),
    ParamSpec("subsample", ("float",), 1.0, _FRACTION, "Row fraction sampled per tree."),
    ParamSpec("colsample_bytree", ("float",), 1.0, _FRACTION,
              "Feature fraction sampled per tree."),
    ParamSpec("colsample_bylevel", ("float",), 1.0, _FRACTION,
              "Feature fraction sampled per depth level (of the tree's features)."),
    ParamSpec("colsample_bynode", ("float",), 1.0, _FRACTION,
              "Feature fraction sampled per split (of the level's features)."),
    ParamSpec("random_state", ("int", "None"), 0, Interval(0, 2**63 - 1, allowed="[0, 2**63 - 1]"),
              "Seed for row/feature sampling; None -> 0. Generators are not accepted."),
    ParamSpec("n_threads", ("int", "None"), None, _GE1,
              "Worker threads; None = all available (cgroup aware). Not saved in models."),
    ParamSpec("early_stopping_rounds", ("int", "None"), None, _GE1,
              "Stop when the first validation metric has not improved for this many rounds."),
    ParamSpec("eval_metric", ("str_seq", "None"), None, NonEmptyNames(),
              "Metric name(s) evaluated on validation sets; None = objective's default."),
    ParamSpec("base_score", ("float", "None"), None, Interval(allowed="any finite float"),
              "Initial margin; None = boost from the (weighted) average."),
    ParamSpec("alpha", ("float",), 0.9, Interval(0, 1, False, False),
              "Quantile level for objective='quantile'."),
    ParamSpec("huber_delta", ("float",), 1.0, _POS, "Transition point of the Huber loss."),
    ParamSpec("tweedie_variance_power", ("float",), 1.5, Interval(1, 2, False, False),
              "Variance power of the Tweedie loss."),
    ParamSpec("lambdarank_truncation_level", ("int",), 30, _GE1,
              "objective='lambdarank': pairs are formed between the top this many "
              "documents of a query (by the current scores) and every other document."),
    ParamSpec("label_gain", ("float_seq", "None"), None, GainList(),
              "Ranking: the gain of each relevance label (label i -> label_gain[i]) in "
              "NDCG; None -> 2**i - 1 for i < 31."),
    ParamSpec("lambdarank_norm", ("bool",), True, None,
              "objective='lambdarank': normalise each query's gradients (LightGBM's "
              "lambdarank_norm)."),
    ParamSpec("sigmoid", ("float",), 1.0, _POS,
              "objective='lambdarank' / 'rank_pairwise': steepness of the pairwise "
              "logistic loss."),
    ParamSpec("num_class", ("int", "None"), None, _GE1,
              "Number of classes; required by objective='multiclass' in train()."),
    ParamSpec("categorical_features", ("feature_seq", "None"), None, FeatureList(),
              "Features (indices or names) treated as categorical, besides pandas "
              "'category' columns (always categorical). Each keeps its max_bin most "
              "frequent categories; rarer, unseen and missing ones go the missing way."),
    ParamSpec("max_cat_to_onehot", ("int",), 4, _GE1,
              "Categorical splits: up to this many usable categories, one category "
              "against the rest."),
    ParamSpec("max_cat_threshold", ("int",), 32, _GE1,
              "Categorical splits: at most this many categories on the left side (taken "
              "from either end of the G/(H + cat_smooth) order)."),
    ParamSpec("cat_smooth", ("float",), 10.0, _NONNEG,
              "Categorical splits: added to a category's hessian sum when sorting "
              "categories by G/H (damps rare categories)."),
    ParamSpec("cat_l2", ("float",), 10.0, _NONNEG,
              "Categorical splits: extra L2 regularisation on their children."),
    ParamSpec("min_data_per_group", ("int",), 100, _GE1,
              "Categorical splits: a category with fewer rows in the node stays right."),
    ParamSpec("cat_encoding", ("str",), "auto", Choices(("auto", "native", "ordered")),
              "Categorical features: 'native' partition splits on the categories, "
              "'ordered' CatBoost-style ordered target statistics (CTR features: per "
              "category its ordered target mean and its frequency; see bonsai.ordered), "
              "or 'auto': per feature, ordered statistics for id-like features (more "
              "than 64 categories, or under 90% of rows in categories a native split "
              "can isolate: min_data_per_group rows, among the max_bin most frequent) "
              "and native splits for the others; native for all where statistics "
              "cannot be kept (ranking, several shards, vector leaves, continued "
              "training, cv fold models)."),
    ParamSpec("ctr_permutations", ("int",), 4, Interval(1, 64),
              "cat_encoding='ordered': random permutations the ordered statistics are "
              "averaged over."),
    ParamSpec("ctr_prior_weight", ("float",), 1.0, _POS,
              "cat_encoding='ordered': weight of the prior (the target mean) in each "
              "category's statistic."),
    ParamSpec("max_ctr_combinations", ("int",), 2, Interval(0, 64),
              "cat_encoding='ordered': pairs of categorical features (those the first "
              "trees split on along one path) that get CTR features of their own."),
    ParamSpec("quantized_grad", ("bool",), False, None,
              "Quantize gradients and hessians to small integers (stochastic rounding, "
              "seeded) and pack both into one 64-bit histogram cell: about half the "
              "histogram work, with row counts estimated from hessians (as LightGBM's "
              "quantized training does) and leaf values renewed from exact gradients."),
    ParamSpec("grad_quant_bins", ("int",), 32, Interval(2, 1 << 15),
              "With quantized_grad: gradients become integers in [-grad_quant_bins, "
              "grad_quant_bins] (hessians in [0, grad_quant_bins])."),
    ParamSpec("multi_strategy", ("str",), "one_output_per_tree", Choices(MULTI_STRATEGIES),
              "Several outputs (multiclass, multi-output regression, multi-label): one "
              "tree per output per round, or 'multi_output_tree': one tree per round "
              "with a vector of every output's value in each leaf (XGBoost's name; the "
              "gain sums over the outputs)."),
    ParamSpec("device", ("str",), "cpu", DeviceCheck(),
              "Compute device: one of bonsai.backends.available()."),
    ParamSpec("verbosity", ("int",), 1, Interval(0, 3),
              "0 = silent, 1 = warnings, 2 = info, 3 = debug."),
)

PARAM_NAMES: tuple[str, ...] = tuple(s.name for s in PARAM_TABLE)
_SPECS: dict[str, ParamSpec] = {s.name: s for s in PARAM_TABLE}


# ---------------------------------------------------------------------------
# The resolved object.
# ---------------------------------------------------------------------------

@dataclass(frozen=True)
class Params:
    """Validated, fully resolved training parameters (immutable).

    Build it with :func:`validate_params`; the attributes are the canonical
    names of :data:`PARAM_TABLE` with ``None`` defaults already resolved
    (``max_depth``, ``max_leaves``, ``random_state``). ``eval_metric`` and
    ``categorical_features`` are tuples (or ``None``). ``n_threads`` keeps the
    user's value (``None`` = auto).
    """

    objective: str | Callable
    n_estimators: int
    learning_rate: float
    grow_policy: str
    max_depth: int
    max_leaves: int
    max_bin: int
    min_child_weight: float
    min_child_samples: int
    min_split_gain: float
    reg_lambda: float
    reg_alpha: float
    max_delta_step: float
    subsample: float
    colsample_bytree: float
    colsample_bylevel: float
    colsample_bynode: float
    random_state: int
    n_threads: int | None
    early_stopping_rounds: int | None
    eval_metric: tuple[str, ...] | None
    base_score: float | None
    alpha: float
    huber_delta: float
    tweedie_variance_power: float
    lambdarank_truncation_level: int
    label_gain: tuple[float, ...] | None
    lambdarank_norm: bool
    sigmoid: float
    num_class: int | None
    categorical_features: tuple[int | str, ...] | None
    max_cat_to_onehot: int
    max_cat_threshold: int
    cat_smooth: float
    cat_l2: float
    min_data_per_group: int
    cat_encoding: str
    ctr_permutations: int
    ctr_prior_weight: float
    max_ctr_combinations: int
    quantized_grad: bool
    grad_quant_bins: int
    multi_strategy: str
    device: str
    verbosity: int
    # The user's (unresolved) input, so that replace() re-resolves correctly.
    _given: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """Resolved parameters as a plain dict for the model file.

        Excludes ``n_threads`` (a property of the machine, not the model).
        Tuples become lists so the dict round-trips through JSON unchanged.
        The ranking parameters (``RANK_PARAMS``) are left out unless the objective
        is a ranking one, and ``multi_strategy`` unless it is ``multi_output_tree``.
        A callable ``objective`` is returned as is; serialisers must replace
        it. ``validate_params(p.to_dict())`` reproduces ``p`` (up to
        ``n_threads``).
        """
        out = {}
        ranking = isinstance(self.objective, str) and self.objective in RANK_OBJECTIVES
        for name in PARAM_NAMES:
            if name == "n_threads" or (name in RANK_PARAMS and not ranking):
                continue
            if name == "multi_strategy" and self.multi_strategy == "one_output_per_tree":
                continue    # the default: model files of one-output-per-tree fits unchanged
            v = getattr(self, name)
            out[name] = list(v) if isinstance(v, tuple) else v
        return out

    def replace(self, **changes: Any) -> Params:
        """Return a new, re-validated :class:`Params` with ``changes`` applied.

        Resolution is redone from the user's original input, so e.g.
        ``p.replace(grow_policy="leafwise")`` re-resolves an unset
        ``max_depth`` to 0 instead of keeping the depthwise default 6.
        """
        base = dict(self._given) if self._given else {
            name: getattr(self, name) for name in PARAM_NAMES}
        base.update(changes)
        return validate_params(base)


_FIELDS = tuple(f.name for f in dataclasses.fields(Params) if f.name != "_given")
if _FIELDS != PARAM_NAMES:  # keep the class in lock-step with the table
    raise ImportError(f"Params fields {_FIELDS} do not match PARAM_TABLE {PARAM_NAMES}")


# ---------------------------------------------------------------------------
# Validation.
# ---------------------------------------------------------------------------

def _suggest(name: str) -> str:
    candidates = []
    if name in _HINTS:
        candidates.append(_HINTS[name])
    for c in difflib.get_close_matches(name, PARAM_NAMES, n=3, cutoff=0.6):
        if c not in candidates:
            candidates.append(c)
    return f" (did you mean {', '.join(repr(c) for c in candidates)}?)" if candidates else ""


def _coerce(spec: ParamSpec, value: Any) -> Any:
    for tag in spec.types:
        ok, out = _TYPE_TAGS[tag][0](value)
        if ok:
            return out
    hint = ""
    if isinstance(value, (np.random.Generator, np.random.RandomState)):
        hint = "; pass an integer seed"
    raise TypeError(
        f"parameter {spec.name!r} must be {_type_desc(spec.types)}, got "
        f"{_short_repr(value)} (type {type(value).__name__}){hint}")


def _resolve(v: dict[str, Any]) -> None:
    """Resolve ``None`` defaults that depend on other parameters (in place)."""
    policy = v["grow_policy"]
    if v["max_leaves"] is None:
        v["max_leaves"] = 31 if policy == "leafwise" else 0
    if v["max_depth"] is None:
        v["max_depth"] = 0 if policy == "leafwise" else 6
    depth, leaves = v["max_depth"], v["max_leaves"]
    if policy == "oblivious":
        if depth == 0:
            raise ValueError(
                "parameter 'max_depth' = 0 (unlimited) is out of range for "
                "grow_policy='oblivious'; allowed: [1, 64]")
        if leaves != 0:
            raise ValueError(
                f"parameter 'max_leaves' = {leaves!r} is not supported by "
                "grow_policy='oblivious' (an oblivious tree has 2**max_depth "
                "leaves); allowed: None or 0")
    elif depth == 0 and leaves == 0:
        raise ValueError(
            f"grow_policy={policy!r} with max_depth=0 and max_leaves=0 would grow "
            "unbounded trees; set max_depth in [1, 64] or max_leaves >= 2")
    if v["random_state"] is None:
        v["random_state"] = 0
    obj, k = v["objective"], v["num_class"]
    if obj in LOG_LINK_OBJECTIVES and v["base_score"] is not None \
            and v["base_score"] > MAX_LOG_MARGIN:
        # base_score is a margin: the log of the mean, which exp() turns back
        raise ValueError(
            f"parameter 'base_score' = {v['base_score']!r} is out of range for "
            f"objective={obj!r}: it is a margin (log of the mean), and exp of it "
            f"overflows float64; allowed: at most {MAX_LOG_MARGIN}")
    if (v["multi_strategy"] == "multi_output_tree" and isinstance(obj, str)
            and obj not in MULTI_OUTPUT_OBJECTIVES):
        raise ValueError(
            f"parameter 'multi_strategy' = 'multi_output_tree' needs an objective with "
            f"several outputs {MULTI_OUTPUT_OBJECTIVES}; objective={obj!r} has one output "
            "per row (use multi_strategy='one_output_per_tree')")
    if isinstance(obj, str) and obj in ("multi_squared_error", "multilabel_binary") and (
            k is not None and k > 1):
        raise ValueError(
            f"parameter 'num_class' = {k!r} does not apply to objective={obj!r}: its "
            "number of outputs is the label's column count; leave num_class None")
    if isinstance(obj, str) and obj != "multiclass" and k is not None and k > 1:
        raise ValueError(
            f"parameter 'num_class' = {k!r} requires objective='multiclass'; "
            f"objective={obj!r} needs num_class None or 1")


def validate_params(params: Mapping[str, Any] | Params | None = None) -> Params:
    """Validate and resolve a parameter dict.

    Parameters
    ----------
    params : mapping of str to value, Params or None
        User parameters by canonical name; missing ones take their default.
        A :class:`Params` instance is returned unchanged.

    Returns
    -------
    Params
        Frozen, fully resolved parameters.

    Raises
    ------
    ValueError
        Unknown parameter name (close names are suggested), out-of-range
        value, or inconsistent combination (e.g. unbounded leafwise trees).
    TypeError
        A value of the wrong type (``bool`` is never accepted as a number).
    """
    if isinstance(params, Params):
        return params
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a dict, got {type(params).__name__}")
    for key in params:
        if not isinstance(key, str):
            raise TypeError(f"parameter names must be str, got {key!r}")
    unknown = [k for k in params if k not in _SPECS]
    if unknown:
        msgs = [f"{k!r}{_suggest(k)}" for k in unknown]
        raise ValueError(
            f"unknown parameter{'s' if len(unknown) > 1 else ''} {', '.join(msgs)}; "
            f"see bonsai._params.PARAM_NAMES for the valid names")
    values: dict[str, Any] = {}
    for spec in PARAM_TABLE:
        raw = params.get(spec.name, spec.default)
        value = _coerce(spec, raw)
        if value is not None and spec.check is not None:
            spec.check(spec.name, value)
        values[spec.name] = value
    _resolve(values)
    return Params(**values, _given=dict(params))


# ---------------------------------------------------------------------------
# Documentation.
# ---------------------------------------------------------------------------

def param_docs() -> str:
    """Render :data:`PARAM_TABLE` as a Markdown table.

    Returns
    -------
    str
        A table with columns parameter, type, default, allowed values and
        description, one row per parameter in table order.
    """
    esc = lambda s: str(s).replace("|", "\\|")
    lines = ["| Parameter | Type | Default | Allowed | Description |",
             "|---|---|---|---|---|"]
    for s in PARAM_TABLE:
        allowed = s.check.allowed if s.check is not None else "any"
        lines.append(
            f"| `{s.name}` | {esc(_type_desc(s.types))} | `{s.default!r}` | "
            f"{esc(allowed)} | {esc(s.doc)} |")
    return "\n".join(lines) + "\n"
