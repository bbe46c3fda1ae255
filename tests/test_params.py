"""Tests for bonsai._params: the parameter table, validation and resolution."""

import json
import math

import numpy as np
import pytest

from bonsai._params import (PARAM_NAMES, PARAM_TABLE, RANK_PARAMS, ParamSpec, Params,
                            param_docs, validate_params)


def test_defaults_resolved():
    p = validate_params({})
    assert isinstance(p, Params)
    assert p == validate_params(None)
    assert p.objective == "squared_error"
    assert p.n_estimators == 100 and p.learning_rate == 0.1
    assert p.grow_policy == "depthwise" and p.max_depth == 6 and p.max_leaves == 0
    assert p.max_bin == 255 and p.random_state == 0 and p.n_threads is None
    assert p.device == "cpu" and p.verbosity == 1 and p.eval_metric is None


def test_table_is_source_of_truth():
    assert all(isinstance(s, ParamSpec) for s in PARAM_TABLE)
    assert PARAM_NAMES == tuple(s.name for s in PARAM_TABLE)
    assert len(set(PARAM_NAMES)) == len(PARAM_NAMES)
    p = validate_params({})
    for s in PARAM_TABLE:
        assert hasattr(p, s.name)
        assert s.doc


def test_frozen():
    p = validate_params({})
    with pytest.raises(AttributeError):
        p.n_estimators = 5


@pytest.mark.parametrize("policy,depth,leaves", [
    ("depthwise", 6, 0), ("leafwise", 0, 31), ("oblivious", 6, 0)])
def test_depth_leaves_resolution(policy, depth, leaves):
    p = validate_params({"grow_policy": policy})
    assert (p.max_depth, p.max_leaves) == (depth, leaves)


def test_depth_leaves_explicit():
    p = validate_params({"grow_policy": "depthwise", "max_depth": 0, "max_leaves": 8})
    assert (p.max_depth, p.max_leaves) == (0, 8)
    p = validate_params({"grow_policy": "leafwise", "max_depth": 5, "max_leaves": 0})
    assert (p.max_depth, p.max_leaves) == (5, 0)
    p = validate_params({"grow_policy": "leafwise", "max_depth": 3})
    assert (p.max_depth, p.max_leaves) == (3, 31)
    assert validate_params({"grow_policy": "oblivious", "max_depth": 1}).max_depth == 1


@pytest.mark.parametrize("params,words", [
    ({"grow_policy": "depthwise", "max_depth": 0}, ["depthwise", "max_depth", "max_leaves"]),
    ({"grow_policy": "leafwise", "max_leaves": 0, "max_depth": 0}, ["leafwise", "unbounded"]),
    ({"grow_policy": "leafwise", "max_leaves": 0}, ["leafwise", "max_leaves=0"]),
    ({"grow_policy": "oblivious", "max_depth": 0}, ["max_depth", "oblivious", "[1, 64]"]),
    ({"grow_policy": "oblivious", "max_leaves": 16}, ["max_leaves", "16", "oblivious"]),
    ({"objective": "binary", "num_class": 3}, ["num_class", "3", "multiclass"]),
])
def test_cross_parameter_errors(params, words):
    with pytest.raises(ValueError) as e:
        validate_params(params)
    for w in words:
        assert w in str(e.value)


def test_unknown_name_suggests():
    with pytest.raises(ValueError, match="'max_dept'.*'max_depth'"):
        validate_params({"max_dept": 3})
    with pytest.raises(ValueError, match="'num_leaves'.*'max_leaves'"):
        validate_params({"num_leaves": 3})
    with pytest.raises(ValueError, match="'eta'.*'learning_rate'"):
        validate_params({"eta": 0.3})
    with pytest.raises(ValueError, match="'zzzzzz'") as e:
        validate_params({"zzzzzz": 1})
    assert "did you mean" not in str(e.value)
    with pytest.raises(ValueError, match="'foo'.*'bar'"):
        validate_params({"foo": 1, "bar": 2})


def test_bad_container_and_keys():
    with pytest.raises(TypeError, match="dict"):
        validate_params([("n_estimators", 3)])
    with pytest.raises(TypeError, match="str"):
        validate_params({1: 2})


@pytest.mark.parametrize("name,value", [
    ("n_estimators", True), ("n_estimators", 10.0), ("n_estimators", "10"),
    ("n_estimators", None), ("learning_rate", "0.1"), ("learning_rate", False),
    ("learning_rate", None), ("grow_policy", 1), ("max_depth", 3.0),
    ("max_leaves", True), ("max_bin", np.float64(3)), ("subsample", [0.5]),
    ("random_state", np.random.default_rng(0)), ("random_state", np.random.RandomState(0)),
    ("n_threads", 2.0), ("eval_metric", 3), ("eval_metric", ["auc", 1]),
    ("base_score", "0"), ("num_class", True), ("categorical_features", [0.5]),
    ("categorical_features", "a"), ("categorical_features", np.zeros((2, 2), int)),
    ("device", None), ("verbosity", True), ("objective", 3), ("objective", None),
    ("early_stopping_rounds", 5.5),
])
def test_type_errors(name, value):
    with pytest.raises(TypeError) as e:
        validate_params({name: value})
    msg = str(e.value)
    assert repr(name) in msg
    assert repr(value)[:20] in msg


@pytest.mark.parametrize("name,value,allowed", [
    ("objective", "binar", "binary"), ("objective", "logloss", "squared_error"),
    ("n_estimators", 0, "[1, inf)"), ("learning_rate", 0.0, "(0, inf)"),
    ("learning_rate", -1, "(0, inf)"), ("learning_rate", math.inf, "finite"),
    ("learning_rate", math.nan, "finite"), ("grow_policy", "lossguide", "leafwise"),
    ("max_depth", 65, "[0, 64]"), ("max_depth", -1, "[0, 64]"),
    ("max_leaves", 1, "[2, 131072] or 0"), ("max_leaves", -3, "or 0"),
    ("max_leaves", 10**6, "131072"), ("max_bin", 1, "[2, 65535]"),
    ("max_bin", 65536, "[2, 65535]"), ("min_child_weight", -1e-9, "[0, inf)"),
    ("min_child_samples", 0, "[1, inf)"), ("min_split_gain", -0.5, "[0, inf)"),
    ("reg_lambda", -1.0, "[0, inf)"), ("reg_alpha", -1.0, "[0, inf)"),
    ("max_delta_step", -1.0, "[0, inf)"), ("subsample", 0.0, "(0, 1]"),
    ("subsample", 1.5, "(0, 1]"), ("colsample_bytree", 0.0, "(0, 1]"),
    ("colsample_bylevel", 2.0, "(0, 1]"), ("colsample_bynode", -0.1, "(0, 1]"),
    ("random_state", -1, "[0, 2**63 - 1]"), ("n_threads", 0, "[1, inf)"),
    ("early_stopping_rounds", 0, "[1, inf)"), ("eval_metric", "", "non-empty"),
    ("eval_metric", ["auc", ""], "non-empty"), ("base_score", math.inf, "finite"),
    ("base_score", math.nan, "finite"), ("alpha", 0.0, "(0, 1)"), ("alpha", 1.0, "(0, 1)"),
    ("huber_delta", 0.0, "(0, inf)"), ("tweedie_variance_power", 1.0, "(1, 2)"),
    ("tweedie_variance_power", 2.0, "(1, 2)"), ("num_class", 0, "[1, inf)"),
    ("categorical_features", [0, -1], "-1"), ("categorical_features", [1, 1], "duplicate"),
    ("categorical_features", ["a", ""], "''"), ("verbosity", 4, "[0, 3]"),
    ("verbosity", -1, "[0, 3]"),
])
def test_range_errors(name, value, allowed):
    with pytest.raises(ValueError) as e:
        validate_params({name: value})
    msg = str(e.value)
    assert repr(name) in msg
    assert allowed in msg
    shown = value if not isinstance(value, list) else tuple(value)
    assert repr(shown) in msg


def test_suggestion_for_bad_choice():
    with pytest.raises(ValueError, match="did you mean 'binary'"):
        validate_params({"objective": "binar"})


@pytest.mark.parametrize("device", ["gpu", "CPU", "cuda:0"])
def test_device(device):
    with pytest.raises(ValueError, match=f"parameter 'device' = '{device}' is not a device: "
                                         "choose one of 'cpu', 'cuda'"):
        validate_params({"device": device})
    assert validate_params({"device": "cpu"}).device == "cpu"


def test_numpy_scalars_and_normalisation():
    p = validate_params({
        "n_estimators": np.int64(7), "learning_rate": np.float32(0.5), "max_depth": np.int32(3),
        "subsample": 1, "random_state": None, "eval_metric": "rmse",
        "categorical_features": np.array([2, 0]), "objective": np.str_("huber"),
        "base_score": np.float64(0.25), "n_threads": np.int8(3)})
    assert type(p.n_estimators) is int and p.n_estimators == 7
    assert type(p.learning_rate) is float and p.learning_rate == 0.5
    assert type(p.max_depth) is int and type(p.subsample) is float
    assert type(p.n_threads) is int and p.n_threads == 3
    assert p.random_state == 0 and p.eval_metric == ("rmse",)
    assert p.categorical_features == (2, 0) and p.objective == "huber"
    p = validate_params({"eval_metric": ("l2", "l1"), "categorical_features": ["a", 1]})
    assert p.eval_metric == ("l2", "l1") and p.categorical_features == ("a", 1)
    assert validate_params({"eval_metric": []}).eval_metric == ()


def test_callable_objective():
    def fobj(y, raw):
        return y - raw, np.ones_like(y)
    p = validate_params({"objective": fobj})
    assert p.objective is fobj
    assert p.to_dict()["objective"] is fobj


def test_to_dict_excludes_n_threads_and_round_trips():
    p = validate_params({"n_threads": 4, "grow_policy": "leafwise", "eval_metric": ["l1"],
                         "categorical_features": [3]})
    d = p.to_dict()
    assert "n_threads" not in d
    # the ranking parameters are recorded for ranking objectives only, multi_strategy
    # only when it is not the default
    assert set(d) == set(PARAM_NAMES) - {"n_threads", "multi_strategy"} - set(RANK_PARAMS)
    ranking = validate_params({"objective": "lambdarank", "label_gain": [0, 1, 3]}).to_dict()
    assert set(ranking) == set(PARAM_NAMES) - {"n_threads", "multi_strategy"}
    vec = validate_params({"objective": "multiclass", "num_class": 3,
                           "multi_strategy": "multi_output_tree"}).to_dict()
    assert vec["multi_strategy"] == "multi_output_tree"
    assert ranking["label_gain"] == [0.0, 1.0, 3.0]
    assert json.loads(json.dumps(d)) == d
    q = validate_params(json.loads(json.dumps(d)))
    assert q == p.replace(n_threads=None)
    assert q.max_depth == 0 and q.max_leaves == 31


def test_replace():
    p = validate_params({"learning_rate": 0.3})
    q = p.replace(n_estimators=5)
    assert q.n_estimators == 5 and q.learning_rate == 0.3 and p.n_estimators == 100
    # re-resolves from the user's input, not the resolved depthwise defaults
    r = p.replace(grow_policy="leafwise")
    assert (r.max_depth, r.max_leaves) == (0, 31)
    with pytest.raises(ValueError, match="n_estimators"):
        p.replace(n_estimators=0)
    with pytest.raises(ValueError, match="unknown"):
        p.replace(bogus=1)


def test_params_instance_passthrough():
    p = validate_params({"n_estimators": 3})
    assert validate_params(p) is p


def test_param_docs():
    doc = param_docs()
    lines = doc.strip().splitlines()
    assert lines[0].startswith("| Parameter")
    assert len(lines) == 2 + len(PARAM_TABLE)
    for name in PARAM_NAMES:
        assert f"`{name}`" in doc
    assert "[0, 64]" in doc and "(0, 1]" in doc
