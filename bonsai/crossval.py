"""Cross-validation: ``bonsai.cv(params, dataset, ...)``, in the shape of ``lightgbm.cv``
and ``xgboost.cv``, and ``average_boosters`` (one model whose margin is the mean of
several models' margins).

How ``cv`` works:

* The folds are built once: ``make_folds`` (seeded Philox permutation; stratified
  folds deal each class's rows round-robin over the folds) or the caller's ``folds``
  (a scikit-learn splitter or a list of ``(train_idx, valid_idx)`` pairs).
* The data is binned once: every fold's training and validation rows are
  ``Dataset.subset`` views of the one binned ``dataset`` (the edges come from all its
  rows, as in LightGBM's cv), so a fold model equals ``train`` on
  ``Dataset(X[train_idx], label=..., reference=dataset)``.
* The folds are trained in lockstep, one round of every fold at a time
  (``train(..., _stepwise=True)``).  After each round the per-fold metrics on the
  validation rows give the round's mean and standard deviation (population std, as
  LightGBM and XGBoost); ``callbacks`` see those means (``{"valid": {metric: [mean per
  round]}}``) and a :class:`CVBooster` of the fold models, so ``EarlyStopping`` and
  ``EvaluationMonitor`` work on the mean curve unchanged.
* Early stopping (``early_stopping_rounds``, or the parameter of that name) stops every
  fold when the mean of the last metric has not improved for that many rounds; the
  mean curves then end at its best round.  Each fold also keeps its own best round on
  its own curve (over the rounds trained): its Booster's ``best_iteration``, which its
  out-of-fold predictions and the averaged model use.
* Ranking (a ``dataset`` with query groups, ``Dataset(group=...)`` / ``qid=``): the
  folds are made of whole queries (``bonsai._groups.query_folds``: queries in a seeded
  random order dealt out as consecutive runs), and every fold's sets keep their
  queries; the caller's ``folds`` must not split a query between a fold's training and
  validation rows (a splitter's ``split`` gets ``groups=`` the row's query index, so
  ``GroupKFold`` works).
* Out-of-fold predictions: each row predicted by the model of the fold whose
  validation rows hold it (NaN for a row in no validation fold).

Everything is deterministic and independent of ``n_threads`` (the fold models are
ordinary bonsai fits, the means are taken in fold order).
"""
import numpy as np

from ._groups import query_folds, row_query
from ._params import validate_params
from ._threads import resolve_n_threads, thread_context
from .booster import Booster
from .boosting import _objective_params, _with_categorical, train
from .callbacks import EarlyStopping, TrainingCallback
from .data import is_integer
from .dataset import Dataset
from .objectives import get_objective

__all__ = ["CVBooster", "average_boosters", "cv", "make_folds"]

DATA_NAME = "valid"


class CVBooster:
    """The fold Boosters of a running :func:`cv`, as its callbacks receive them.

    ``boosters`` (one per fold, after the latest round), ``best_iteration`` and
    ``best_score`` (set by an ``EarlyStopping`` callback on the mean curve).
    """

    def __init__(self, boosters):
        self.boosters = boosters
        self.best_iteration = None
        self.best_score = None

    def metric_higher_is_better(self, name):
        return self.boosters[0].metric_higher_is_better(name)


def make_folds(n, nfold=5, label=None, stratified=False, shuffle=True, seed=0):
    """``nfold`` pairs ``(train_idx, valid_idx)`` (sorted int64 row indices) whose
    validation rows partition ``range(n)``.

    Rows are taken in a seeded random order (``numpy.random.Philox(seed)``) when
    ``shuffle``, else in their own order.  Plain folds are consecutive runs of that
    order (sizes differ by at most one); stratified folds group the rows by ``label``
    value (stable, so each class keeps that order) and deal them round-robin over the
    folds, so every fold holds each class's share to within one row.
    """
    order = np.arange(n, dtype=np.int64)
    if shuffle:
        order = np.random.Generator(np.random.Philox(seed)).permutation(n)
    fold_of = np.empty(n, np.int64)
    if stratified:
        y = np.asarray(label)
        order = order[np.argsort(y[order], kind="stable")]
        fold_of[order] = np.arange(n) % nfold
    else:
        sizes = np.full(nfold, n // nfold)
        sizes[:n % nfold] += 1
        fold_of[order] = np.repeat(np.arange(nfold), sizes)
    return [(np.flatnonzero(fold_of != k).astype(np.int64),
             np.flatnonzero(fold_of == k).astype(np.int64)) for k in range(nfold)]


def _index_array(a, n, what):
    idx = np.asarray(a)
    if idx.ndim != 1 or idx.shape[0] == 0 or idx.dtype.kind not in "iu":
        raise ValueError(f"folds: {what} must be a non-empty 1-D array of row indices, got "
                         f"dtype {idx.dtype} and shape {idx.shape}")
    if idx.min() < 0 or idx.max() >= n:
        raise ValueError(f"folds: {what} has a row index outside [0, {n})")
    if np.unique(idx).shape[0] != idx.shape[0]:
        raise ValueError(f"folds: {what} lists a row twice")
    return idx.astype(np.int64)


def _user_folds(folds, n, label, group_ptr=None):
    """The caller's folds (a splitter with ``split(X, y)`` or (train, valid) pairs),
    checked; with queries (``group_ptr``) the splitter gets ``groups=`` each row's
    query and no fold may split a query between its train and valid rows."""
    qrow = None if group_ptr is None else row_query(group_ptr)
    if hasattr(folds, "split"):
        pairs = (folds.split(np.zeros((n, 1)), label) if qrow is None
                 else folds.split(np.zeros((n, 1)), label, groups=qrow))
    else:
        pairs = folds
    try:
        pairs = list(pairs)
    except TypeError:
        raise TypeError("folds must be a splitter with split(X, y) (scikit-learn style) or "
                        f"a list of (train_idx, valid_idx) pairs, got {type(folds).__name__}"
                        ) from None
    if not pairs:
        raise ValueError("folds is empty")
    out = []
    for k, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"folds: entry {k} is not a (train_idx, valid_idx) pair")
        tr = _index_array(pair[0], n, f"fold {k}'s train_idx")
        va = _index_array(pair[1], n, f"fold {k}'s valid_idx")
        if np.intersect1d(tr, va).shape[0]:
            raise ValueError(f"folds: fold {k}'s train_idx and valid_idx share rows")
        if qrow is not None:
            split = np.intersect1d(qrow[tr], qrow[va])
            if split.shape[0]:
                raise ValueError(f"folds: fold {k} splits query {int(split[0])} between "
                                 "train_idx and valid_idx; ranking folds must hold whole "
                                 "queries (e.g. sklearn's GroupKFold)")
        out.append((tr, va))
    return out


def _check_bool(value, name, allow_none=False):
    if not isinstance(value, (bool, np.bool_)) and not (allow_none and value is None):
        raise TypeError(f"{name} must be {'True, False or None' if allow_none else 'a bool'}, "
                        f"got {value!r}")
    return value if value is None else bool(value)


def _fold_params(p, num_boost_round, metrics):
    changes = {"early_stopping_rounds": None}   # cv stops on the mean curve
    if num_boost_round is not None:
        changes["n_estimators"] = num_boost_round
    if metrics is not None:
        if not isinstance(metrics, (str, list, tuple)) or (
                not isinstance(metrics, str) and not all(isinstance(m, str) for m in metrics)):
            raise TypeError(f"metrics must be a metric name or a list of them, got {metrics!r}")
        changes["eval_metric"] = metrics
    return p.replace(**changes)


def _argbest(curve, maximize):
    a = np.asarray(curve)
    return int(np.argmax(a) if maximize else np.argmin(a))


def cv(params, dataset, nfold=5, stratified=None, folds=None, shuffle=True, seed=0,
       metrics=None, early_stopping_rounds=None, callbacks=None, return_models=False,
       num_boost_round=None):
    """Cross-validate a parameter set (see the module docstring for how).

    Parameters
    ----------
    params : dict -- training parameters, as for :func:`bonsai.train`
    dataset : Dataset with a label (and its raw data, for the out-of-fold predictions)
    nfold : int >= 2 -- folds made when ``folds`` is None
    stratified : bool or None -- stratify the folds by label; None: for classification
        objectives with a 1-D label (``binary``, ``multiclass``; a 2-D multi-label
        label is not stratified)
    folds : scikit-learn splitter (``split(X, y)``) or list of ``(train_idx, valid_idx)``
        index pairs, optional -- replaces ``nfold`` / ``stratified`` / ``shuffle``
    shuffle : bool -- shuffle the rows before making the folds
    seed : int >= 0 -- seed of that shuffle
    metrics : str or list of str, optional -- replaces ``params["eval_metric"]``
    early_stopping_rounds : int, optional -- stop when the mean of the last metric has
        not improved for this many rounds (default: ``params["early_stopping_rounds"]``)
    callbacks : list of TrainingCallback, optional -- called with a :class:`CVBooster`
        and the mean curves
    return_models : bool -- also return the fold Boosters and their averaged model
    num_boost_round : int, optional -- overrides ``params["n_estimators"]``

    Returns
    -------
    dict with
      ``"valid <metric>-mean"``, ``"valid <metric>-stdv"`` : list per round (ending at
          the best round when early stopping ran, as LightGBM's);
      ``"best_iteration"`` (0-based round), ``"best_score"`` : of the mean curve of the
          last metric;
      ``"fold_best_iterations"`` : list, each fold's best round on its own curve;
      ``"fold_evals"`` : list, each fold's ``{metric: [value per round]}``;
      ``"oof"`` : out-of-fold predictions, shape of ``Booster.predict`` over all rows
          (NaN where a row is in no validation fold), or None when validation folds
          overlap;
      ``"folds"`` : the ``(train_idx, valid_idx)`` pairs used;
      with ``return_models``: ``"models"`` (the fold Boosters) and
      ``"averaged_model"`` (:func:`average_boosters` of them).
    """
    p = validate_params(params)
    if not isinstance(dataset, Dataset):
        raise TypeError(f"dataset must be a bonsai.Dataset, got {type(dataset).__name__}")
    if dataset.label is None:
        raise ValueError("dataset has no label")
    if dataset.data is None:
        raise ValueError("dataset: cv needs the raw data for the out-of-fold predictions; "
                         "build the Dataset again without free_raw_data()")
    if early_stopping_rounds is None:
        early_stopping_rounds = p.early_stopping_rounds
    fp = _fold_params(p, num_boost_round, metrics)
    if fp.eval_metric is not None and all(m == "none" for m in fp.eval_metric):
        raise ValueError("cv needs a metric: eval_metric / metrics is 'none'")
    shuffle = _check_bool(shuffle, "shuffle")
    stratified = _check_bool(stratified, "stratified", allow_none=True)
    return_models = _check_bool(return_models, "return_models")
    if not is_integer(seed) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    callbacks = list(callbacks or [])
    for cb in callbacks:
        if not isinstance(cb, TrainingCallback):
            raise TypeError(f"callbacks must be TrainingCallback instances, got "
                            f"{type(cb).__name__}")
    if early_stopping_rounds is not None:
        callbacks.append(EarlyStopping(early_stopping_rounds))
    if fp.categorical_features is not None:
        dataset = _with_categorical(dataset, fp.categorical_features)
    if return_models and fp.cat_encoding == "auto" and dataset.categories is not None:
        # fold models to average must not hold target statistics (cat_encoding docs)
        fp = fp.replace(cat_encoding="native")
    if return_models and fp.cat_encoding == "ordered" and dataset.categories is not None:
        raise ValueError("return_models=True: the fold models of cat_encoding='ordered' "
                         "each have their own target statistics, so they cannot be "
                         "averaged into one model; use cat_encoding='native'")
    n = dataset.n_rows
    objective = get_objective(fp.objective, _objective_params(fp))
    group_ptr = dataset.group_ptr
    if objective.needs_group and group_ptr is None:
        raise ValueError(f"objective={objective.name!r} needs query groups: build the "
                         "Dataset with group= (query sizes) or qid= (query ids)")
    if folds is None and group_ptr is not None:
        if stratified:
            raise ValueError("stratified=True: ranking folds are made of whole queries "
                             "and cannot be stratified; leave stratified None")
        if not is_integer(nfold):
            raise ValueError(f"nfold must be an integer >= 2, got {nfold!r}")
        pairs = query_folds(group_ptr, int(nfold), shuffle, int(seed))
    elif folds is None:
        if not is_integer(nfold) or not 2 <= nfold <= n:
            raise ValueError(f"nfold must be an integer in [2, {n}] (the rows), got {nfold!r}")
        if stratified and dataset.label.ndim == 2:
            raise ValueError(f"stratified=True needs a 1-D label; the label has shape "
                             f"{dataset.label.shape} (multi-output rows have no single "
                             "class to stratify by); leave stratified None or False")
        strat = ((objective.is_classification and dataset.label.ndim == 1)
                 if stratified is None else stratified)
        pairs = make_folds(n, int(nfold), dataset.label, strat, shuffle, int(seed))
    else:
        if stratified:
            raise ValueError("stratified=True applies to the folds cv makes; with folds= "
                             "given, leave it None")
        pairs = _user_folds(folds, n, dataset.label, group_ptr)
    sets = [(dataset.subset(tr), dataset.subset(va)) for tr, va in pairs]
    boosters, mean_log, std_log = _run_folds(fp, sets, callbacks)
    return _result(fp, dataset, pairs, sets, boosters, mean_log, std_log, callbacks,
                   return_models)


def _run_folds(fp, sets, callbacks):
    """Train every fold in lockstep; returns (fold boosters, mean log, std log)."""
    mean_log, std_log = {DATA_NAME: {}}, {DATA_NAME: {}}
    with thread_context(resolve_n_threads(fp.n_threads)):
        steps = [train(fp, tr, valid_sets=[va], valid_names=[DATA_NAME], _stepwise=True)
                 for tr, va in sets]
        boosters = [None] * len(steps)
        pack = CVBooster(boosters)
        try:
            for cb in callbacks:
                pack = cb.before_training(pack)
            for it in range(fp.n_estimators):
                if any(cb.before_iteration(pack, it, mean_log) for cb in callbacks):
                    break
                for k, step in enumerate(steps):
                    boosters[k] = next(step)
                for m in boosters[0].evals_result[DATA_NAME]:
                    vals = np.array([b.evals_result[DATA_NAME][m][-1] for b in boosters])
                    mean_log[DATA_NAME].setdefault(m, []).append(float(np.mean(vals)))
                    std_log[DATA_NAME].setdefault(m, []).append(float(np.std(vals)))
                stop = False
                for cb in callbacks:
                    stop = cb.after_iteration(pack, it, mean_log) or stop
                if stop:
                    break
        finally:
            for step in steps:
                step.close()
        for cb in callbacks:
            pack = cb.after_training(pack)
    return boosters, mean_log, std_log


def _result(fp, dataset, pairs, sets, boosters, mean_log, std_log, callbacks, return_models):
    es = next((cb for cb in callbacks if isinstance(cb, EarlyStopping)), None)
    names = list(mean_log[DATA_NAME])
    if not names:
        raise ValueError("cv: no round was trained (a callback stopped before the first)")
    metric = (es.metric_name if es is not None and es.metric_name else names[-1])
    maximize = boosters[0].metric_higher_is_better(metric)
    if es is not None and es.maximize is not None:
        maximize = es.maximize
    curve = mean_log[DATA_NAME][metric]
    if es is not None and es.best_iteration is not None:
        best = es.best_iteration
    else:
        best = _argbest(curve, maximize)
    end = best + 1 if es is not None else len(curve)
    out = {}
    for m in names:
        out[f"{DATA_NAME} {m}-mean"] = mean_log[DATA_NAME][m][:end]
        out[f"{DATA_NAME} {m}-stdv"] = std_log[DATA_NAME][m][:end]
    out["best_iteration"] = best
    out["best_score"] = curve[best]
    fold_best = []
    for b in boosters:
        own = b.evals_result[DATA_NAME][metric]
        fb = _argbest(own, maximize)
        fold_best.append(fb)
        if es is not None:        # each fold predicts with its own best round
            b.best_iteration, b.best_score = fb, own[fb]
    out["fold_best_iterations"] = fold_best
    out["fold_evals"] = [{m: list(v) for m, v in b.evals_result[DATA_NAME].items()}
                         for b in boosters]
    out["oof"] = _oof(dataset.n_rows, pairs, sets, boosters)
    out["folds"] = pairs
    if return_models:
        out["models"] = boosters
        out["averaged_model"] = average_boosters(boosters)
    return out


def _oof(n, pairs, sets, boosters):
    """Out-of-fold predictions, or None when validation folds overlap."""
    valid = np.concatenate([va for _, va in pairs])
    if np.unique(valid).shape[0] != valid.shape[0]:
        return None
    oof = None
    for (_, va), (_, vds), b in zip(pairs, sets, boosters):
        pred = b.predict(vds.data)
        if oof is None:
            oof = np.full((n,) + pred.shape[1:], np.nan)
        oof[va] = pred
    return oof


def average_boosters(boosters):
    """One Booster whose margin is the mean of ``boosters``' margins.

    Each model contributes the trees its ``predict`` uses by default (up to its
    ``best_iteration``), its leaf values divided by the number of models, and the
    base score is the mean of theirs: so the averaged model is an ordinary Booster
    (one model file; ``predict``, SHAP values -- the mean of the models' SHAP values,
    export to ONNX or Treelite, and ``bonsai predict`` all work on it), whose margins
    equal the mean of the models' margins up to float64 rounding.  Its transformed
    prediction is the objective's link of that mean margin (for ``binary``, the
    sigmoid of the mean log-odds).  Its trees follow model by model, so pass no
    ``iteration_range`` to it; ``extra["averaged_models"]`` records how many models
    and rounds it holds.  The models must share objective, features and categories;
    models with ordered target statistics (``cat_encoding="ordered"``) cannot be
    averaged.
    """
    boosters = list(boosters)
    if not boosters or not all(isinstance(b, Booster) for b in boosters):
        raise TypeError("average_boosters needs a non-empty list of bonsai.Booster")
    first = boosters[0]
    for i, b in enumerate(boosters):
        if b.ctr is not None:
            raise ValueError(f"average_boosters: model {i} uses ordered target statistics "
                             "(cat_encoding='ordered'); such models cannot be averaged")
        same = (b.n_outputs == first.n_outputs and b.multi_strategy == first.multi_strategy
                and b.n_features == first.n_features
                and b.feature_names == first.feature_names and b.objective == first.objective
                and b.objective_params == first.objective_params
                and b.categories == first.categories)
        if not same:
            raise ValueError(f"average_boosters: model {i} differs from model 0 in its "
                             "objective, outputs (or multi_strategy), features or "
                             "categories")
    k = len(boosters)
    out = Booster()
    out.n_outputs = first.n_outputs
    out.multi_strategy = first.multi_strategy
    out.n_features = first.n_features
    out.feature_names = first.feature_names
    out.objective = first.objective
    out.objective_params = dict(first.objective_params)
    out.params = dict(first.params)
    out.grow_policy = first.grow_policy
    out.categories = first.categories
    out.n_threads = first.n_threads
    out.base_score = np.mean(np.stack([np.asarray(b.base_score, np.float64)
                                       for b in boosters]), axis=0)
    rounds = []
    for b in boosters:
        t0, t1 = b._tree_range(None)
        rounds.append((t1 - t0) // b.trees_per_round)
        for tree, c in zip(b.trees[t0:t1], b.tree_class[t0:t1]):
            out._append(tree._replace(value=tree.value / k), c)
    out.extra = {"averaged_models": {"n_models": k, "rounds": rounds}}
    return out
