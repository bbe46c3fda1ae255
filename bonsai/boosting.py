"""The boosting loop: ``train(params, train_set, ...) -> Booster``.

    raw = init margins
    per round:  grad/hess <- objective(y, raw)
                the round's trees (``bonsai.rounds``: sample, quantize, grow, shrink,
                                   raw[k] += leaf values)
                evaluate -> callbacks (early stopping, logging)

Over several data shards (a ``bonsai.comm.Comm``; one copy of this loop per shard)
the base score, leaf renewal and metrics are computed from gathered data and the
grow loop's counts and histograms are summed (``bonsai.comm``), so every shard builds
the model a one-shard fit builds.
"""
import numpy as np

from . import comm as _comm_mod
from ._dtypes import GRAD, IDX
from ._interrupt import RoundsDone
from ._limits import check_quantized_rows
from ._params import (LOG_LINK_OBJECTIVES, MAX_LOG_MARGIN, MULTI_OUTPUT_OBJECTIVES,
                      RANK_OBJECTIVES, validate_params)
from ._profile import report, stage
from ._profile import reset as reset_profile
from ._threads import resolve_n_threads, thread_context
from .backends import get_backend
from .booster import Booster
from .callbacks import EarlyStopping, TrainingCallback
from .categorical import resolve_features
from .data import check_init_score
from .dataset import Dataset
from .grow import Grower
from .metrics import get_metric
from .objectives import get_objective, label_outputs
from .ordered import OrderedEncoding, auto_ctr_features
from .rounds import grow_round
from .scores import HostScores


def _objective_params(p):
    out = {"alpha": p.alpha, "huber_delta": p.huber_delta,
           "tweedie_variance_power": p.tweedie_variance_power, "num_class": p.num_class}
    if isinstance(p.objective, str) and p.objective in RANK_OBJECTIVES:
        # only for ranking: every other model's objective parameters stay as they were
        out.update(lambdarank_truncation_level=p.lambdarank_truncation_level,
                   label_gain=None if p.label_gain is None else list(p.label_gain),
                   lambdarank_norm=p.lambdarank_norm, sigmoid=p.sigmoid,
                   random_state=p.random_state)
    return out


def _group_arg(ds):
    """``group=`` (query sizes) rebuilding the Dataset ``ds`` with its queries."""
    return None if getattr(ds, "group_ptr", None) is None else np.diff(ds.group_ptr)


def _metrics(p, objective):
    names = list(p.eval_metric) if p.eval_metric else [objective.default_metric]
    params = dict(_objective_params(p), label_gain=p.label_gain)   # ndcg's gains
    return [get_metric(m, params) for m in names if m != "none"]


class _EvalSet:
    """A validation set binned with the training edges, and its running margins."""

    def __init__(self, name, ds, train_set, base, k_out, booster_init):
        self.name = name
        self.ds = ds
        if ds.bin_mapper is not train_set.bin_mapper:
            if getattr(ds, "data", None) is None:
                raise ValueError(f"valid set {name!r} was binned with other edges; build it "
                                 "with Dataset(..., reference=train_set)")
            ds = Dataset(ds.data, label=ds.label, weight=ds.weight, init_score=ds.init_score,
                         reference=train_set, group=_group_arg(ds))
        self.dataset = ds
        self.X_cols = ds.X_cols
        if ds.label is None:
            raise ValueError(f"valid set {name!r} has no label")
        self.y = ds.label
        if self.y.shape[1:] != train_set.label.shape[1:]:
            raise ValueError(f"valid set {name!r} has a label of shape {self.y.shape}; the "
                             f"train set's is {train_set.label.shape} (the same columns)")
        self.w = ds.weight
        self.group_ptr = getattr(ds, "group_ptr", None)
        n = self.y.shape[0]
        self.rows = np.arange(n, dtype=IDX)
        self.raw = _start_margins(ds, ds.init_score, base, booster_init, k_out, n)
        self.segs = _global_rows(ds)


def _global_rows(ds):
    """The Dataset's place in the global row order (``bonsai.comm`` segments), or None
    for the consecutive default."""
    g = getattr(ds, "global_rows", None)
    return None if g is None else _comm_mod.check_segments(g, ds.n_rows, "Dataset.global_rows")


def train(params, train_set, num_boost_round=None, valid_sets=None, valid_names=None,
          callbacks=None, init_model=None, *, _stepwise=False, _comm=None):
    """Train a gradient-boosted tree model.

    Parameters
    ----------
    params : dict -- see ``bonsai._params`` for every parameter
    train_set : Dataset (with a label)
    num_boost_round : int, optional -- overrides ``params["n_estimators"]``
    valid_sets : list of Dataset, optional -- evaluated after every round
    valid_names : list of str, optional
    callbacks : list of TrainingCallback, optional
    init_model : Booster, optional -- continue training from this model

    Returns
    -------
    Booster

    ``_stepwise=True`` (for ``bonsai.cv``, which trains its folds in lockstep) returns
    instead a generator that runs one boosting round per step and yields the Booster
    after it; the caller runs it inside ``thread_context``.

    ``_comm`` (a ``bonsai.comm.Comm``, for the distributed front ends) trains on the
    shard ``train_set`` of a data set spread over ``_comm.size`` ranks, each running
    this call at once; valid sets are shards too.  Every rank returns the same model.

    Ctrl-C (``KeyboardInterrupt``) stops the fit within about one round; the
    exception re-raised carries ``.booster``, the model of the rounds finished before
    it (None if none had), see ``bonsai._interrupt``.
    """
    comm = _comm_mod.check_comm(_comm)
    p = validate_params(params)
    if num_boost_round is not None:
        p = p.replace(n_estimators=num_boost_round)
    if not isinstance(train_set, Dataset):
        raise TypeError(f"train_set must be a bonsai.Dataset, got {type(train_set).__name__}")
    if p.categorical_features is not None:
        train_set = _with_categorical(train_set, p.categorical_features)
    if train_set.label is None:
        raise ValueError("train_set has no label")
    if p.max_bin != train_set.max_bin and "max_bin" in getattr(p, "_given", {}):
        raise ValueError(f"max_bin={p.max_bin} differs from the Dataset's max_bin={train_set.max_bin}")
    objective = get_objective(p.objective, _objective_params(p))
    y, w = train_set.label, train_set.weight
    objective, k_out = label_outputs(objective, y, p.num_class, p.multi_strategy)
    n = y.shape[0]
    metrics = _metrics(p, objective)
    callbacks = _callbacks(callbacks, p)
    if not _comm_mod.is_local(comm):
        _check_shards(comm, p, train_set)
    if objective.needs_group or any(m.needs_group for m in metrics):
        objective = _bind_queries(p, objective, metrics, train_set, y, comm)
    booster = _new_booster(p, objective, train_set, y, w, k_out, init_model, comm)
    raw = _initial_raw(booster, train_set, init_model, k_out, n)
    names = list(valid_names or [f"valid_{i}" for i in range(len(valid_sets or []))])
    if len(names) != len(valid_sets or []):
        raise ValueError("valid_names must name every valid set")
    n_threads = resolve_n_threads(p.n_threads)
    vector = _check_vector(p, objective, k_out, train_set, init_model)
    backend = _vector_backend(p) if vector else get_backend(p.device)
    done = RoundsDone()
    try:
        with thread_context(n_threads) as used_threads:
            evals = [_EvalSet(nm, ds, train_set, booster.base_score, k_out, init_model)
                     for nm, ds in zip(names, valid_sets or [])]
            _check_eval_groups(evals, metrics)
            segs, n_all = _comm_mod.segments(comm, n, _global_rows(train_set))
            if p.quantized_grad:
                check_quantized_rows(n_all)
            grower, enc = _grower(p, backend, train_set, y, objective, k_out, booster, evals,
                                  init_model, used_threads, comm, k_out if vector else None)
            rounds = _boost(p, booster, objective, grower, backend, y, w, raw, evals,
                            metrics, callbacks, k_out, enc, comm, segs, n_all)
            if _stepwise:
                return rounds
            while True:   # the model is what the callbacks' before/after_training returned
                try:
                    done.finished(next(rounds))
                except StopIteration as stop:
                    return stop.value
    except KeyboardInterrupt as e:   # Ctrl-C: the rounds finished so far on e.booster
        reset_profile()
        done.attach(e)
        raise


def _check_vector(p, objective, k_out, train_set, init_model):
    """Whether the fit grows vector leaves (``multi_strategy="multi_output_tree"``),
    with a ValueError for what they cannot train."""
    if init_model is not None and getattr(init_model, "multi_strategy",
                                          "one_output_per_tree") != p.multi_strategy:
        raise ValueError(f"multi_strategy={p.multi_strategy!r} differs from init_model's "
                         f"{getattr(init_model, 'multi_strategy', 'one_output_per_tree')!r}; "
                         "continued training keeps the model's strategy")
    if p.multi_strategy != "multi_output_tree":
        return False
    if not (objective.name in MULTI_OUTPUT_OBJECTIVES
            or (objective.name == "custom" and k_out > 1)):
        raise ValueError(f"multi_strategy='multi_output_tree' needs an objective with several "
                         f"outputs per row ({', '.join(MULTI_OUTPUT_OBJECTIVES)}, or a custom "
                         f"one with num_class >= 2); objective={objective.name!r} has one "
                         "output: use multi_strategy='one_output_per_tree'")
    if p.quantized_grad:
        raise ValueError("quantized_grad=True is not available with "
                         "multi_strategy='multi_output_tree' (vector leaves use exact cells)")
    if p.cat_encoding == "ordered" and train_set.categories is not None:
        raise ValueError("cat_encoding='ordered' is not available with "
                         "multi_strategy='multi_output_tree' (its target statistics are per "
                         "output); use cat_encoding='native'")
    return True


def _vector_backend(p):
    """The backend of a vector-leaf fit: the CPU's where the device's has no K-output
    builder (one FallbackWarning)."""
    backend = get_backend(p.device)
    if hasattr(backend, "multi_tree_builder"):
        return backend
    import warnings
    from .backends.cuda import FallbackWarning
    warnings.warn(f"device={p.device!r}: multi_strategy='multi_output_tree' trains on the "
                  "CPU (the device backend has no vector-leaf builder)", FallbackWarning,
                  stacklevel=3)
    return get_backend("cpu")


def _bind_queries(p, objective, metrics, train_set, y, comm):
    """The ranking objective bound to the train set's queries (``objective.bind``);
    ranking needs them, and one data shard (a query's gradients need all of its
    documents, a metric all of a query's rows)."""
    if not _comm_mod.is_local(comm):
        what = (f"objective={objective.name!r}" if objective.needs_group else
                "metric " + repr(next(m.name for m in metrics if m.needs_group)))
        raise ValueError(f"{what}: learning to rank trains on one data shard only; "
                         "train with bonsai.train on the whole data set")
    if not objective.needs_group:
        return objective
    if p.cat_encoding == "ordered" and train_set.categories is not None:
        raise ValueError(f"objective={objective.name!r}: cat_encoding='ordered' (target "
                         "statistics of a label) does not apply to ranking; use "
                         "cat_encoding='native'")
    if train_set.group_ptr is None:
        raise ValueError(f"objective={objective.name!r} needs query groups: build the "
                         "train Dataset with group= (query sizes) or qid= (query ids)")
    return objective.bind(train_set.group_ptr, y)


def _check_eval_groups(evals, metrics):
    """Every valid set has queries when a ranking metric is evaluated."""
    need = [m.name for m in metrics if m.needs_group]
    for ev in evals:
        if need and ev.group_ptr is None:
            raise ValueError(f"eval_metric {need[0]!r} needs query groups: build valid set "
                             f"{ev.name!r} with group= (query sizes) or qid= (query ids)")


def _callbacks(callbacks, p):
    """The user's callbacks (checked), then early stopping if ``p`` asks for it."""
    callbacks = list(callbacks or [])
    for cb in callbacks:
        if not isinstance(cb, TrainingCallback):
            raise TypeError(f"callbacks must be TrainingCallback instances, got {type(cb).__name__}")
    if p.early_stopping_rounds is not None:
        callbacks.append(EarlyStopping(p.early_stopping_rounds))
    return callbacks


def _grower(p, backend, train_set, y, objective, k_out, booster, evals, init_model,
            n_threads, comm, n_values=None):
    """(the fit's Grower over the backend's prepared data, the ordered encoding or
    None): with ``cat_encoding="ordered"`` the grower trains on the encoding's
    columns, and the eval sets get them too."""
    ctr = _ctr_features(p, train_set, objective, init_model, comm, n_values)
    if not ctr:
        shared = n_values is not None and bool(getattr(objective, "hessian_shared", False))
        return Grower(backend, backend.prepare(train_set), p, n_threads, comm, n_values,
                      shared), None
    if init_model is not None:
        raise ValueError("init_model: continued training with cat_encoding='ordered' "
                         "is not supported (the new trees would need the first "
                         "model's target statistics); train the model in one call")
    with stage("ctr"):
        enc = OrderedEncoding(train_set, y, objective.name, k_out, p, ctr)
        for ev in evals:
            enc.add_eval(ev, ev.dataset)
    booster.ctr = enc.model
    return Grower(backend, backend.prepare(enc), p, n_threads, comm), enc


def _ctr_features(p, train_set, objective, init_model, comm, n_values):
    """The categorical features the fit encodes with ordered target statistics: all
    of them with ``cat_encoding="ordered"``, none with ``"native"``; with ``"auto"``
    those ``ordered.auto_ctr_features`` picks, and none where a fit cannot keep target
    statistics (ranking, several shards, vector leaves, continued training)."""
    if train_set.categories is None or p.cat_encoding == "native":
        return []
    if p.cat_encoding == "ordered":
        return list(train_set.categories.features)
    if (objective.name in RANK_OBJECTIVES or not _comm_mod.is_local(comm)
            or n_values is not None or init_model is not None):
        return []
    return auto_ctr_features(train_set, p.min_data_per_group, train_set.max_bin)


def _combination_round(p):
    """Rounds grown before the ordered encoding's pairs are chosen from the trees."""
    return max(1, min(20, p.n_estimators // 10))


def _with_categorical(ds, spec):
    """``ds``, or ``ds`` binned again when the parameter ``categorical_features`` names
    columns its Dataset was not built with as categorical."""
    want = resolve_features(spec, ds.feature_names, ds.n_features, ())
    if set(want) <= set(ds.categorical_features):
        return ds
    if ds.reference is not None or getattr(ds, "data", None) is None:
        raise ValueError(
            f"categorical_features={list(spec)!r} differs from the train Dataset's "
            f"categorical features {list(ds.categorical_features)}, and the Dataset cannot "
            "be binned again (no raw data, or built with a reference); pass "
            "categorical_features to Dataset(...) instead")
    cats = sorted(set(want) | set(ds.categorical_features))
    return Dataset(ds.data, label=ds.label, weight=ds.weight, init_score=ds.init_score,
                   feature_names=ds.feature_names, max_bin=ds.max_bin,
                   random_state=ds.random_state, categorical_features=cats,
                   group=_group_arg(ds))


def _check_shards(comm, p, train_set):
    """Every rank must bin with the same edges, categories and features (a
    ValueError naming the ranks that differ), and ordered encoding needs one shard."""
    bm = train_set.bin_mapper
    mine = (bm.to_dict(), None if train_set.categories is None else train_set.categories.to_dict(),
            train_set.n_features)
    ranks = comm.allgather(mine)
    for r, other in enumerate(ranks):
        if other != mine:
            raise ValueError(f"train_set on rank {comm.rank} was binned differently from rank "
                             f"{r} (bin edges, categories or features); build every shard's "
                             "Dataset with reference= one shared binning")
    if p.cat_encoding == "ordered" and train_set.categories is not None:
        raise ValueError("cat_encoding='ordered' trains on one data shard only (its target "
                         "statistics follow the row order of the whole data); use "
                         "cat_encoding='native' with several shards")


def _new_booster(p, objective, train_set, y, w, k_out, init_model, comm=_comm_mod.LOCAL):
    if init_model is not None:
        booster = init_model.__deepcopy__({})
        if booster.n_outputs != k_out or booster.n_features != train_set.n_features:
            raise ValueError("init_model does not match the training data (outputs or features)")
        if booster.categories != train_set.categories:
            raise ValueError("init_model's categorical features or category codes differ from "
                             "the train Dataset's; continued training needs the same ones")
        booster.best_iteration = None
        booster.best_score = None
        # the parameters of this call, with n_estimators counting every round asked
        # for: train(n1) then train(n2, init_model=...) records what train(n1 + n2) does
        booster.params = _recorded_params(p, n_estimators=booster.num_boosted_rounds()
                                          + p.n_estimators)
        return booster
    booster = Booster()
    booster.n_outputs = k_out
    booster.n_features = train_set.n_features
    booster.feature_names = train_set.feature_names
    booster.objective = objective.name
    booster.objective_params = _objective_params(p)
    booster.params = _recorded_params(p, n_estimators=p.n_estimators)
    booster.grow_policy = p.grow_policy
    booster.multi_strategy = p.multi_strategy
    booster.categories = train_set.categories
    booster.n_threads = p.n_threads
    if train_set.init_score is not None:
        booster.base_score = np.zeros(k_out)
    elif p.base_score is not None:
        booster.base_score = np.full(k_out, float(p.base_score))
    else:   # from every shard's labels, in rank order (the one-shard computation)
        # a label's rows are on axis 0, gather_concat's on the last: y.T for (n, K) labels
        y_all, w_all = _comm_mod.gather_concat(comm, (y.T, w), _global_rows(train_set))
        y64 = np.asarray(y_all.T, dtype=np.float64)
        booster.base_score = np.asarray(objective.init_score(y64, w_all),
                                        dtype=np.float64).reshape(k_out)
    return booster


def _start_margins(ds, init_score, base, init_model, k_out, n):
    """The (k_out, n) margins a fit starts from on the Dataset ``ds``.

    * no ``init_model``: ``init_score`` when given, else the base score;
    * with ``init_model``: its margins over *all* its trees (the continued model keeps
      every tree, whatever its ``best_iteration``), which already include its base
      score; an ``init_score`` then replaces that base score (XGBoost's
      ``base_margin``), as it does in a fresh fit.

    The base score is counted once: the returned model predicts
    ``base_score + trees``, and these margins are exactly that, so continued training
    grows the same trees as one longer fit and its evaluation history is the metric of
    the returned model's predictions.
    """
    if init_model is None:
        if init_score is not None:
            return check_init_score(init_score, n, k_out)
        raw = np.empty((k_out, n))
        raw[:] = np.asarray(base, dtype=np.float64)[:, None]
        return raw
    if getattr(ds, "data", None) is None:
        raise ValueError("continued training (init_model) needs the Dataset's raw data "
                         "(it was dropped with free_raw_data())")
    if init_score is not None:
        start = check_init_score(init_score, n, k_out)
    else:
        start = np.empty((k_out, n))
        start[:] = init_model.base_score[:, None]
    return np.ascontiguousarray(init_model._tree_margins(ds.data, start.T).T)


def _recorded_params(p, n_estimators):
    params = p.to_dict()
    params["n_estimators"] = int(n_estimators)
    if callable(params.get("objective")):
        params["objective"] = "custom"
    return params


def _initial_raw(booster, train_set, init_model, k_out, n):
    return _start_margins(train_set, train_set.init_score, booster.base_score, init_model,
                          k_out, n)


def _boost(p, booster, objective, grower, backend, y, w, raw, evals, metrics,
           callbacks, k_out, enc=None, comm=_comm_mod.LOCAL, segs=None, n_all=None):
    """The boosting rounds: a generator yielding the Booster after every round."""
    n = y.shape[0]
    n_all = n if n_all is None else n_all
    grad = np.empty((k_out, n), GRAD)
    hess = np.empty((k_out, n), GRAD)
    # on the backend's device when it can hold them (``bonsai.scores``); the ordered
    # encoding swaps its grower mid-fit, so its scores stay on the host
    scores = (HostScores(backend, objective, y, w, raw, grad, hess) if enc is not None else
              backend.scores(grower.builder, objective, p, y, w, raw, grad, hess))
    evals_log = {}
    booster.evals_result = evals_log
    for cb in callbacks:
        booster = cb.before_training(booster)
    start = booster.num_boosted_rounds()
    for it in range(start, start + p.n_estimators):
        if any(cb.before_iteration(booster, it, evals_log) for cb in callbacks):
            break
        with stage("gradients"):
            scores.grad_hess()
        grow_round(p, booster, objective, grower, backend, y, w, raw, evals, grad, hess, it,
                    k_out, enc, comm, segs, n_all, scores)
        if objective.name in LOG_LINK_OBJECTIVES and not scores.resident and raw.size:
            top = float(np.max(raw))    # exp(margin) overflows past MAX_LOG_MARGIN
            if not top <= MAX_LOG_MARGIN:
                raise ValueError(f"the model diverged at iteration {it}: a training margin "
                                 f"of objective={objective.name!r} reached {top:.4g}, whose "
                                 f"exp overflows float64 (> {MAX_LOG_MARGIN}); lower "
                                 "learning_rate or set max_delta_step")
        if (enc is not None and it + 1 - start == _combination_round(p)
                and it + 1 < start + p.n_estimators):
            with stage("ctr"):
                if enc.combine(booster.trees):   # new CTR features: a grower over them
                    grower = Grower(backend, backend.prepare(enc), p, grower.n_threads, comm)
        with stage("metrics"):
            _evaluate(evals, objective, metrics, evals_log, comm)
        stop = False
        for cb in callbacks:  # every callback sees every iteration
            stop = cb.after_iteration(booster, it, evals_log) or stop
        yield booster
        if stop:
            break
    for cb in callbacks:
        booster = cb.after_training(booster)
    scores.sync()
    grower.builder.finish_fit()
    report("train")
    return booster


def _evaluate(evals, objective, metrics, evals_log, comm=_comm_mod.LOCAL):
    """Every metric of every valid set (over every shard: on the gathered labels,
    margins and weights, in rank order)."""
    for ev in evals:
        y, raw, w = _comm_mod.gather_concat(comm, (ev.y.T, ev.raw, ev.w), ev.segs)
        y = y.T                                       # (n,) or (n, K): rows on axis 0
        pred = objective.transform(raw)
        log = evals_log.setdefault(ev.name, {})
        for m in metrics:
            value = m.fn(y, pred, w, ev.group_ptr) if m.needs_group else m.fn(y, pred, w)
            log.setdefault(m.name, []).append(float(value))
