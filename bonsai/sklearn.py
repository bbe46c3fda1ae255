"""scikit-learn estimators: ``BonsaiRegressor`` and ``BonsaiClassifier``.

This module owns the scikit-learn face of bonsai and nothing else: it checks
``X`` / ``y`` / weights / eval sets once at the ``fit`` / ``predict`` boundary
(with scikit-learn's own helpers, so error messages and the ``n_features_in_`` /
``feature_names_in_`` bookkeeping are the ones sklearn users expect), turns the
constructor arguments into a bonsai parameter dict, calls
:func:`bonsai.boosting.train` and wraps the resulting :class:`~bonsai.Booster`.
There are no algorithms here.

Parameters
----------
The constructor arguments are the canonical names of
:data:`bonsai._params.PARAM_TABLE` with the table's defaults (read from the
table), except ``BonsaiClassifier(objective=None)`` (``"binary"`` for two
classes, ``"multiclass"`` with ``num_class`` for more) and ``num_class``, which
the classifier derives from ``y``.  ``importance_type`` (``"gain"`` or
``"split"``) selects what :attr:`feature_importances_` reports.  As scikit-learn
requires, ``__init__`` only stores the arguments; they are validated by ``fit``.

Conventions
-----------
* ``X``: anything :func:`sklearn.utils.validation.check_array` accepts (numpy,
  pandas, lists, scipy.sparse -- densified, as the native ``Dataset`` does).
  NaN marks a missing value; float32 input stays float32.
* ``feature_importances_`` are raw, unnormalised totals over the trees used by
  ``predict`` (up to the best iteration after early stopping), like LightGBM:
  total split gain for ``importance_type="gain"`` (XGBoost's ``"total_gain"``,
  not its per-split average), number of splits for ``"split"``.
* ``best_iteration_`` is the 0-based best round when early stopping ran, else
  None; ``predict`` then uses rounds ``0..best_iteration_`` by default.
  ``best_score_`` is ``{eval_name: {metric: value}}`` at the best iteration (the
  last one without early stopping); ``evals_result_`` is the full history.
* The classifier accepts any label values that scikit-learn calls ``binary`` or
  ``multiclass`` (str, int, bool, float with integral values ...); continuous
  float targets raise ``ValueError("Unknown label type ...")`` as in sklearn.
  Labels are encoded to ``0..K-1`` in ``np.unique`` order (``classes_``).
* ``save_model`` writes the booster's JSON model with
  ``extra = {"sklearn_class": ..., "classes": [...], "classes_dtype": ...}``;
  ``load_model`` restores the fitted state (not the constructor arguments --
  the training parameters are in ``booster_.params``).

scikit-learn compatibility
--------------------------
Both estimators pass :func:`sklearn.utils.estimator_checks.check_estimator`
with no expected failures (``tests/test_sklearn.py``).
"""
import os

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from ._params import PARAM_TABLE, validate_params
from .booster import Booster
from .boosting import train
from .dataset import Dataset

__all__ = ["BonsaiClassifier", "BonsaiRegressor"]

_D = {spec.name: spec.default for spec in PARAM_TABLE}

_SPARSE = ("csr", "csc", "coo")
_CLASSIFICATION_OBJECTIVES = ("binary", "multiclass")
_IMPORTANCE_TYPES = ("gain", "split")


# ---------------------------------------------------------------------------
# Input checks (the fit / predict boundary).
# ---------------------------------------------------------------------------

def _dense(X):
    return X.toarray() if hasattr(X, "toarray") else X


def _check_weight(w, n, name):
    """(n,) finite, non-negative, not-all-zero float64 weights, or ValueError naming ``name``."""
    if w is None:
        return None
    if hasattr(w, "to_numpy"):
        w = w.to_numpy()
    try:
        w = np.asarray(w, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be numeric") from None
    if w.ndim == 0:  # a scalar weight applies to every row, as in sklearn
        w = np.full(n, float(w))
    if w.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {w.shape}")
    if w.shape[0] != n:
        raise ValueError(f"{name} has {w.shape[0]} entries but X has {n} rows")
    bad = ~np.isfinite(w)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} contains a non-finite value ({w[i]}) at index {i}")
    if (w < 0).any():
        i = int(np.flatnonzero(w < 0)[0])
        raise ValueError(f"{name} contains a negative value ({w[i]}) at index {i}")
    if not w.sum() > 0:
        raise ValueError(f"{name} must not be all zero")
    return w


def _check_y_1d(y, n, name):
    """1-D labels of length n (a column vector is raveled with a warning, as in sklearn)."""
    if hasattr(y, "to_numpy") and not isinstance(y, np.ndarray):
        y = y.to_numpy()
    y = column_or_1d(y, warn=True, input_name=name)
    if y.shape[0] != n:
        raise ValueError(f"{name} has {y.shape[0]} entries but X has {n} rows")
    return y


def _check_finite_y(y, name):
    if y.dtype.kind in "fc":
        bad = ~np.isfinite(y)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            what = "NaN" if np.isnan(y[i]) else "infinity"
            raise ValueError(f"Input {name} contains {what} (at index {i}); labels must be finite")
    elif y.dtype.kind == "O":
        for i, v in enumerate(y):
            if isinstance(v, (float, np.floating)) and not np.isfinite(v):
                raise ValueError(f"Input {name} contains a non-finite value ({v}) at index {i}")


def _as_booster(init_model):
    if init_model is None or isinstance(init_model, Booster):
        return init_model
    if isinstance(init_model, (str, os.PathLike)):
        return Booster(model_file=init_model)
    if isinstance(init_model, _BonsaiModel):
        check_is_fitted(init_model)
        return init_model.booster_
    raise TypeError("init_model must be a Booster, a model file path or a fitted bonsai "
                    f"estimator, got {type(init_model).__name__}")


# ---------------------------------------------------------------------------
# The shared base.
# ---------------------------------------------------------------------------

class _BonsaiModel(BaseEstimator):
    """Fit / predict plumbing shared by the regressor and the classifier."""

    # -- subclass hooks -------------------------------------------------------
    def _prepare_y(self, y):
        """Validated training labels -> (float64 encoded labels, extra params)."""
        raise NotImplementedError

    def _encode_eval_y(self, y, name):
        raise NotImplementedError

    def _extra(self):
        return {"sklearn_class": type(self).__name__}

    def _restore_extra(self, booster):
        pass

    # -- params ---------------------------------------------------------------
    def _train_params(self, extra):
        params = self.get_params(deep=False)
        importance_type = params.pop("importance_type")
        if importance_type not in _IMPORTANCE_TYPES:
            raise ValueError(f"importance_type must be one of {_IMPORTANCE_TYPES}, "
                             f"got {importance_type!r}")
        params.update(extra)
        return validate_params(params)

    # -- fit --------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None, init_score=None, eval_set=None,
            eval_sample_weight=None, eval_names=None, callbacks=None, init_model=None):
        """Build the boosted trees from (X, y).

        Parameters
        ----------
        X : array-like or sparse matrix (n_samples, n_features); NaN = missing
        y : array-like (n_samples,) -- targets (regressor) or class labels (classifier)
        sample_weight : array-like (n_samples,), optional -- finite, >= 0
        init_score : array-like (n_samples,) or (n_samples, K), optional -- start margins
        eval_set : list of (X, y) pairs, optional -- evaluated after every round
            (the last one drives early stopping)
        eval_sample_weight : list of array-like or None, optional -- one per eval set
        eval_names : list of str, optional -- default ``valid_0``, ``valid_1``, ...
        callbacks : list of bonsai.TrainingCallback, optional
        init_model : Booster, model file path or fitted estimator, optional --
            continue training from it

        Returns
        -------
        self
        """
        self.__dict__.pop("booster_", None)  # a failed refit leaves the estimator unfitted
        X, y = validate_data(self, X, y, accept_sparse=_SPARSE, dtype=(np.float64, np.float32),
                             ensure_all_finite=False, y_numeric=False)
        X = _dense(X)
        n = X.shape[0]
        y = _check_y_1d(y, n, "y")
        _check_finite_y(y, "y")
        y_enc, extra_params = self._prepare_y(y)
        params = self._train_params(extra_params)
        w = _check_weight(sample_weight, n, "sample_weight")
        eval_pairs = self._check_eval_set(eval_set, eval_sample_weight, eval_names)
        if params.early_stopping_rounds is not None and not eval_pairs:
            raise ValueError(f"early_stopping_rounds={params.early_stopping_rounds} needs "
                             "an eval_set to monitor; pass fit(..., eval_set=[(X_val, y_val)])")
        init_booster = _as_booster(init_model)
        self._check_init_model(init_booster)

        names = list(getattr(self, "feature_names_in_", [])) or None
        train_set = Dataset(X, label=y_enc, weight=w, init_score=init_score,
                            feature_names=names, max_bin=params.max_bin,
                            reference=None, random_state=params.random_state)
        valid_sets, valid_names = [], []
        for name, Xv, yv, wv in eval_pairs:
            valid_sets.append(Dataset(Xv, label=yv, weight=wv, feature_names=names,
                                      reference=train_set))
            valid_names.append(name)
        booster = train(params, train_set, valid_sets=valid_sets or None,
                        valid_names=valid_names or None, callbacks=callbacks,
                        init_model=init_booster)
        booster.extra.update(self._extra())
        self._set_fitted(booster)
        return self

    def _check_eval_set(self, eval_set, eval_sample_weight, eval_names):
        """Validate eval sets -> [(name, X, encoded y, weight)]."""
        if eval_set is None:
            return []
        if (isinstance(eval_set, tuple) and len(eval_set) == 2
                and not isinstance(eval_set[0], (tuple, list))):
            eval_set = [eval_set]  # a single (X, y) pair
        if not isinstance(eval_set, (list, tuple)) or not all(
                isinstance(p, (tuple, list)) and len(p) == 2 for p in eval_set):
            raise TypeError("eval_set must be a list of (X, y) pairs")
        k = len(eval_set)
        if eval_names is None:
            eval_names = [f"valid_{i}" for i in range(k)]
        elif isinstance(eval_names, str):
            eval_names = [eval_names]
        eval_names = list(eval_names)
        if len(eval_names) != k or not all(isinstance(s, str) for s in eval_names):
            raise ValueError(f"eval_names must be {k} str, one per eval_set entry; "
                             f"got {eval_names!r}")
        if len(set(eval_names)) != k:
            raise ValueError(f"eval_names must be unique, got {eval_names!r}")
        if eval_sample_weight is None:
            eval_sample_weight = [None] * k
        eval_sample_weight = list(eval_sample_weight)
        if len(eval_sample_weight) != k:
            raise ValueError(f"eval_sample_weight has {len(eval_sample_weight)} entries "
                             f"but eval_set has {k}")
        out = []
        for i, ((Xv, yv), wv, name) in enumerate(zip(eval_set, eval_sample_weight, eval_names)):
            Xv = _dense(validate_data(self, Xv, accept_sparse=_SPARSE, reset=False,
                                      dtype=(np.float64, np.float32), ensure_all_finite=False))
            nv = Xv.shape[0]
            yv = _check_y_1d(yv, nv, f"eval_set[{i}] y")
            _check_finite_y(yv, f"eval_set[{i}] y")
            yv = self._encode_eval_y(yv, f"eval_set[{i}] y")
            wv = _check_weight(wv, nv, f"eval_sample_weight[{i}]")
            out.append((name, Xv, yv, wv))
        return out

    def _check_init_model(self, booster):
        pass

    def _set_fitted(self, booster):
        self.booster_ = booster
        self.n_estimators_ = booster.num_boosted_rounds()
        self.best_iteration_ = booster.best_iteration
        self.evals_result_ = {d: {m: list(v) for m, v in ms.items()}
                              for d, ms in booster.evals_result.items()}
        at = -1 if self.best_iteration_ is None else None
        best = {}
        for d, ms in self.evals_result_.items():
            best[d] = {}
            for m, v in ms.items():
                if not v:
                    continue
                if at is None:  # the log covers only this fit's rounds
                    first = self.n_estimators_ - len(v)
                    idx = min(max(self.best_iteration_ - first, 0), len(v) - 1)
                else:
                    idx = at
                best[d][m] = v[idx]
        self.best_score_ = best

    # -- predict ------------------------------------------------------------------
    def _check_X(self, X):
        check_is_fitted(self)
        X = validate_data(self, X, accept_sparse=_SPARSE, reset=False,
                          dtype=(np.float64, np.float32), ensure_all_finite=False)
        return _dense(X)

    def _raw_predict(self, X, output_margin=False, iteration_range=None):
        X = self._check_X(X)
        return self.booster_.predict(X, output_margin=output_margin,
                                     iteration_range=iteration_range)

    def apply(self, X, iteration_range=None):
        """Leaf index reached in every tree, shape (n_samples, n_trees) int32."""
        X = self._check_X(X)
        return self.booster_.predict(X, iteration_range=iteration_range, pred_leaf=True)

    @property
    def feature_importances_(self):
        """Raw total importance per feature (see ``importance_type``), shape (n_features,)."""
        check_is_fitted(self)
        if self.importance_type not in _IMPORTANCE_TYPES:
            raise ValueError(f"importance_type must be one of {_IMPORTANCE_TYPES}, "
                             f"got {self.importance_type!r}")
        return self.booster_.feature_importance(self.importance_type)

    # -- model files ------------------------------------------------------------
    def save_model(self, path):
        """Write the fitted model as a bonsai JSON model file (returns self)."""
        check_is_fitted(self)
        self.booster_.extra.update(self._extra())
        self.booster_.save_model(path)
        return self

    def load_model(self, path):
        """Load a model file written by ``save_model`` (or a native Booster) into
        this estimator and make it fitted (returns self).  Constructor arguments
        are left unchanged."""
        booster = Booster(model_file=path)
        cls = booster.extra.get("sklearn_class")
        if cls is not None and cls != type(self).__name__:
            raise ValueError(f"{path!s} holds a {cls} model; load it with {cls}().load_model")
        self._restore_extra(booster)
        for attr in ("feature_names_in_", "n_features_in_"):
            self.__dict__.pop(attr, None)
        self.n_features_in_ = booster.n_features
        if booster.feature_names is not None:
            self.feature_names_in_ = np.asarray(booster.feature_names, dtype=object)
        self._set_fitted(booster)
        return self

    def __sklearn_is_fitted__(self):
        return hasattr(self, "booster_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags


# ---------------------------------------------------------------------------
# Regressor.
# ---------------------------------------------------------------------------

class BonsaiRegressor(RegressorMixin, _BonsaiModel):
    """Histogram gradient-boosted trees for regression (scikit-learn API).

    The parameters are those of :data:`bonsai._params.PARAM_TABLE` (see
    ``bonsai._params.param_docs()``), plus ``importance_type`` (``"gain"`` or
    ``"split"``) for :attr:`feature_importances_`.

    Attributes
    ----------
    booster_ : Booster
    n_features_in_ : int
    feature_names_in_ : ndarray of str -- only when X had string column names
    best_iteration_ : int or None -- best 0-based round when early stopping ran
    best_score_ : dict -- ``{eval_name: {metric: value}}`` at the best iteration
    evals_result_ : dict -- ``{eval_name: {metric: [value per round]}}``
    n_estimators_ : int -- boosting rounds in the model
    feature_importances_ : ndarray (n_features,) -- raw totals (not normalised)
    """

    def __init__(self, *, objective=_D["objective"], n_estimators=_D["n_estimators"],
                 learning_rate=_D["learning_rate"], grow_policy=_D["grow_policy"],
                 max_depth=_D["max_depth"], max_leaves=_D["max_leaves"], max_bin=_D["max_bin"],
                 min_child_weight=_D["min_child_weight"],
                 min_child_samples=_D["min_child_samples"], min_split_gain=_D["min_split_gain"],
                 reg_lambda=_D["reg_lambda"], reg_alpha=_D["reg_alpha"],
                 max_delta_step=_D["max_delta_step"], subsample=_D["subsample"],
                 colsample_bytree=_D["colsample_bytree"],
                 colsample_bylevel=_D["colsample_bylevel"],
                 colsample_bynode=_D["colsample_bynode"], random_state=_D["random_state"],
                 n_threads=_D["n_threads"], early_stopping_rounds=_D["early_stopping_rounds"],
                 eval_metric=_D["eval_metric"], base_score=_D["base_score"], alpha=_D["alpha"],
                 huber_delta=_D["huber_delta"],
                 tweedie_variance_power=_D["tweedie_variance_power"],
                 categorical_features=_D["categorical_features"],
                 quantized_grad=_D["quantized_grad"], grad_quant_bins=_D["grad_quant_bins"],
                 device=_D["device"],
                 verbosity=_D["verbosity"], importance_type="gain"):
        self.objective = objective
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.grow_policy = grow_policy
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.max_bin = max_bin
        self.min_child_weight = min_child_weight
        self.min_child_samples = min_child_samples
        self.min_split_gain = min_split_gain
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.max_delta_step = max_delta_step
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.colsample_bylevel = colsample_bylevel
        self.colsample_bynode = colsample_bynode
        self.random_state = random_state
        self.n_threads = n_threads
        self.early_stopping_rounds = early_stopping_rounds
        self.eval_metric = eval_metric
        self.base_score = base_score
        self.alpha = alpha
        self.huber_delta = huber_delta
        self.tweedie_variance_power = tweedie_variance_power
        self.categorical_features = categorical_features
        self.quantized_grad = quantized_grad
        self.grad_quant_bins = grad_quant_bins
        self.device = device
        self.verbosity = verbosity
        self.importance_type = importance_type

    def _prepare_y(self, y):
        if isinstance(self.objective, str) and self.objective in _CLASSIFICATION_OBJECTIVES:
            raise ValueError(f"objective={self.objective!r} is a classification objective; "
                             "use BonsaiClassifier")
        return self._as_float_y(y, "y"), {}

    def _encode_eval_y(self, y, name):
        return self._as_float_y(y, name)

    @staticmethod
    def _as_float_y(y, name):
        try:
            return np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be numeric for regression, got dtype {y.dtype}") from None

    def _restore_extra(self, booster):
        if booster.objective in _CLASSIFICATION_OBJECTIVES:
            raise ValueError(f"the model has objective={booster.objective!r}; load it with "
                             "BonsaiClassifier().load_model")

    def predict(self, X, output_margin=False, iteration_range=None):
        """Predicted values, shape (n_samples,).

        Parameters
        ----------
        X : array-like (n_samples, n_features)
        output_margin : bool -- raw margins (e.g. log-scale for poisson) instead of outputs
        iteration_range : (start, end), optional -- rounds to use; default: up to
            ``best_iteration_`` after early stopping, else all
        """
        return self._raw_predict(X, output_margin, iteration_range)


# ---------------------------------------------------------------------------
# Classifier.
# ---------------------------------------------------------------------------

class BonsaiClassifier(ClassifierMixin, _BonsaiModel):
    """Histogram gradient-boosted trees for classification (scikit-learn API).

    ``objective=None`` picks ``"binary"`` for two classes and ``"multiclass"``
    for more; a callable objective gets margins of shape (n,) for two classes
    and (n, K) for more, and ``predict_proba`` applies the sigmoid / softmax.
    Other parameters: see :class:`BonsaiRegressor`.

    Attributes
    ----------
    classes_ : ndarray (n_classes,) -- the sorted class labels
    n_classes_ : int
    booster_, n_features_in_, feature_names_in_, best_iteration_, best_score_,
    evals_result_, n_estimators_, feature_importances_ : see BonsaiRegressor
    """

    def __init__(self, *, objective=None, n_estimators=_D["n_estimators"],
                 learning_rate=_D["learning_rate"], grow_policy=_D["grow_policy"],
                 max_depth=_D["max_depth"], max_leaves=_D["max_leaves"], max_bin=_D["max_bin"],
                 min_child_weight=_D["min_child_weight"],
                 min_child_samples=_D["min_child_samples"], min_split_gain=_D["min_split_gain"],
                 reg_lambda=_D["reg_lambda"], reg_alpha=_D["reg_alpha"],
                 max_delta_step=_D["max_delta_step"], subsample=_D["subsample"],
                 colsample_bytree=_D["colsample_bytree"],
                 colsample_bylevel=_D["colsample_bylevel"],
                 colsample_bynode=_D["colsample_bynode"], random_state=_D["random_state"],
                 n_threads=_D["n_threads"], early_stopping_rounds=_D["early_stopping_rounds"],
                 eval_metric=_D["eval_metric"], base_score=_D["base_score"], alpha=_D["alpha"],
                 huber_delta=_D["huber_delta"],
                 tweedie_variance_power=_D["tweedie_variance_power"],
                 categorical_features=_D["categorical_features"],
                 quantized_grad=_D["quantized_grad"], grad_quant_bins=_D["grad_quant_bins"],
                 device=_D["device"],
                 verbosity=_D["verbosity"], importance_type="gain"):
        self.objective = objective
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.grow_policy = grow_policy
        self.max_depth = max_depth
        self.max_leaves = max_leaves
        self.max_bin = max_bin
        self.min_child_weight = min_child_weight
        self.min_child_samples = min_child_samples
        self.min_split_gain = min_split_gain
        self.reg_lambda = reg_lambda
        self.reg_alpha = reg_alpha
        self.max_delta_step = max_delta_step
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.colsample_bylevel = colsample_bylevel
        self.colsample_bynode = colsample_bynode
        self.random_state = random_state
        self.n_threads = n_threads
        self.early_stopping_rounds = early_stopping_rounds
        self.eval_metric = eval_metric
        self.base_score = base_score
        self.alpha = alpha
        self.huber_delta = huber_delta
        self.tweedie_variance_power = tweedie_variance_power
        self.categorical_features = categorical_features
        self.quantized_grad = quantized_grad
        self.grad_quant_bins = grad_quant_bins
        self.device = device
        self.verbosity = verbosity
        self.importance_type = importance_type

    # -- labels -----------------------------------------------------------------
    def _prepare_y(self, y):
        check_classification_targets(y)
        classes, y_enc = np.unique(y, return_inverse=True)
        k = classes.shape[0]
        if k < 2:
            raise ValueError(f"BonsaiClassifier needs at least 2 classes in y; got 1 class "
                             f"({classes[0]!r})")
        obj = self.objective
        if obj is None:
            obj = "binary" if k == 2 else "multiclass"
        elif isinstance(obj, str):
            if obj not in _CLASSIFICATION_OBJECTIVES:
                raise ValueError(f"objective={obj!r} is not a classification objective; "
                                 f"use 'binary', 'multiclass', None or a callable")
            if obj == "binary" and k > 2:
                raise ValueError(f"objective='binary' needs 2 classes, but y has {k} classes; "
                                 "use objective='multiclass' or None")
        extra = {"objective": obj}
        if obj == "multiclass" or (callable(obj) and k > 2):
            extra["num_class"] = k
        self.classes_ = classes
        self.n_classes_ = k
        return y_enc.astype(np.float64), extra

    def _encode_eval_y(self, y, name):
        check_classification_targets(y)
        idx = np.searchsorted(self.classes_, y)
        idx = np.clip(idx, 0, self.n_classes_ - 1)
        unseen = self.classes_[idx] != y
        if np.any(unseen):
            bad = np.unique(np.asarray(y)[unseen])
            raise ValueError(f"{name} contains label(s) not seen in training: "
                             f"{bad.tolist()[:5]!r}; training classes: {self.classes_.tolist()!r}")
        return idx.astype(np.float64)

    def _check_init_model(self, booster):
        if booster is None:
            return
        classes = booster.extra.get("classes")
        if classes is not None and list(classes) != self.classes_.tolist():
            raise ValueError(f"init_model was trained on classes {classes!r}, but y has "
                             f"classes {self.classes_.tolist()!r}")

    def _extra(self):
        return {"sklearn_class": type(self).__name__, "classes": self.classes_.tolist(),
                "classes_dtype": self.classes_.dtype.str}

    def _restore_extra(self, booster):
        classes = booster.extra.get("classes")
        if classes is None:  # a native model: labels are 0..K-1
            if booster.objective == "binary":
                classes = [0, 1]
            elif booster.objective == "multiclass":
                classes = list(range(booster.n_outputs))
            else:
                raise ValueError(f"the model has objective={booster.objective!r} and no "
                                 "classes; it is not a classifier")
        dtype = booster.extra.get("classes_dtype")
        self.classes_ = np.asarray(classes, dtype=np.dtype(dtype) if dtype else None)
        self.n_classes_ = int(self.classes_.shape[0])

    # -- predict ----------------------------------------------------------------
    def predict_proba(self, X, iteration_range=None):
        """Class probabilities, shape (n_samples, n_classes) (two columns for binary)."""
        check_is_fitted(self)
        if self.booster_.objective == "custom":  # margins -> sigmoid / softmax
            raw = self._raw_predict(X, True, iteration_range)
            if raw.ndim == 1:
                p = 1.0 / (1.0 + np.exp(-raw))
            else:
                e = np.exp(raw - raw.max(axis=1, keepdims=True))
                return e / e.sum(axis=1, keepdims=True)
        else:
            p = self._raw_predict(X, False, iteration_range)
            if p.ndim == 2:
                return p
        return np.column_stack([1.0 - p, p])

    def predict(self, X, output_margin=False, iteration_range=None):
        """Predicted class labels (values of ``classes_``), shape (n_samples,);
        with ``output_margin=True`` the raw margins ((n,) binary, (n, K) multiclass)."""
        if output_margin:
            return self._raw_predict(X, True, iteration_range)
        proba = self.predict_proba(X, iteration_range)
        return self.classes_[np.argmax(proba, axis=1)]
