"""scikit-learn estimators: ``BonsaiRegressor`` and ``BonsaiClassifier``.

This module owns the scikit-learn face of bonsai (the shared fit / predict machinery
is in ``bonsai.sklearn._base``) and nothing else: it checks
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
``"split"``) selects what :attr:`feature_importances_` reports.  ``verbose`` is
what a fit shows while it runs (it is not a training parameter and is not stored in
the model): ``None`` (default) a progress bar (``bonsai.progress.ProgressBar``:
round, elapsed, ETA, the latest evaluation metrics), drawn only where a person
watches -- stderr is a terminal or a Jupyter notebook -- and only once the fit has
run 2 seconds; ``0`` / ``False`` nothing; an int ``k >= 1`` (or ``True``, 1) plain
evaluation lines every ``k`` rounds (``EvaluationMonitor``, for logs).
``verbosity=0`` also silences a fit, and a ``ProgressBar`` or ``EvaluationMonitor``
passed in ``fit(callbacks=...)`` replaces the default display.  As scikit-learn
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
* ``predict`` (and ``predict_proba``, as in LightGBM) pass ``output_margin``,
  ``pred_leaf``, ``pred_contribs`` and ``pred_interactions`` through to
  :meth:`bonsai.Booster.predict`; LightGBM's names ``raw_score`` and
  ``pred_contrib`` are accepted for the first and third.  One kind at a time
  (ValueError otherwise); each flag must be a bool.
* A plain float32/float64 ndarray in C or F order skips scikit-learn's
  ``validate_data`` at predict time (one-row latency), with the same fitted and
  feature-count checks and messages; other inputs, and every input of a model
  fitted with feature names (so the names are checked), take the full path.
* ``best_iteration_`` is the 0-based best round when early stopping ran, else
  None; ``predict`` then uses rounds ``0..best_iteration_`` by default.
  ``best_score_`` is ``{eval_name: {metric: value}}`` at the best iteration (the
  last one without early stopping); ``evals_result_`` is the full history.
* The classifier accepts any label values that scikit-learn calls ``binary`` or
  ``multiclass`` (str, int, bool, float with integral values ...); continuous
  float targets raise ``ValueError("Unknown label type ...")`` as in sklearn.
  Labels are encoded to ``0..K-1`` in ``np.unique`` order (``classes_``).
* Several targets / labels per row (``multi_strategy`` applies, as XGBoost's):
  ``BonsaiRegressor.fit(X, Y)`` with ``Y`` of shape (n, K), K >= 2, fits
  ``objective="multi_squared_error"`` (the default ``"squared_error"`` becomes it;
  other objectives with a 2-D ``Y`` are a ValueError) and ``predict`` returns (n, K);
  ``n_outputs_`` is K (1 for a 1-D ``y``).  ``BonsaiClassifier.fit(X, Y)`` with a 0/1
  label indicator matrix (n, K) (scikit-learn's multi-label convention) fits
  ``objective="multilabel_binary"``: ``classes_`` is ``arange(K)``, ``predict`` returns
  the (n, K) int 0/1 matrix (``p > 0.5``) and ``predict_proba`` the (n, K) array of
  each label's probability -- one array, as XGBoost's ``XGBClassifier``, not the list
  of (n, 2) arrays some scikit-learn estimators return.  A (n, 1) column ``y`` is
  raveled (with scikit-learn's DataConversionWarning) and fitted as one target.
* ``save_model`` writes the booster's JSON model with
  ``extra = {"sklearn_class": ..., "classes": [...], "classes_dtype": ...}``;
  ``load_model`` restores the fitted state (not the constructor arguments --
  the training parameters are in ``booster_.params``).

scikit-learn compatibility
--------------------------
Both estimators pass :func:`sklearn.utils.estimator_checks.check_estimator`
with no expected failures (``tests/test_sklearn.py``).
"""
import numpy as np
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils.multiclass import check_classification_targets

__all__ = ["BonsaiClassifier", "BonsaiRegressor"]

from ._base import (_CLASSIFICATION_OBJECTIVES, _D, _BonsaiModel, _booster_predict,
                    _keep_params, _predict_kind)


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
                 max_cat_to_onehot=_D["max_cat_to_onehot"],
                 max_cat_threshold=_D["max_cat_threshold"], cat_smooth=_D["cat_smooth"],
                 cat_l2=_D["cat_l2"], min_data_per_group=_D["min_data_per_group"],
                 cat_encoding=_D["cat_encoding"], ctr_permutations=_D["ctr_permutations"],
                 ctr_prior_weight=_D["ctr_prior_weight"],
                 max_ctr_combinations=_D["max_ctr_combinations"],
                 quantized_grad=_D["quantized_grad"], grad_quant_bins=_D["grad_quant_bins"],
                 multi_strategy=_D["multi_strategy"], device=_D["device"],
                 verbosity=_D["verbosity"], importance_type="gain", verbose=None):
        _keep_params(self, locals())

    _multi_output_y = True

    def _prepare_y(self, y):
        obj = self.objective
        if isinstance(obj, str) and obj in _CLASSIFICATION_OBJECTIVES + ("multilabel_binary",):
            raise ValueError(f"objective={obj!r} is a classification objective; "
                             "use BonsaiClassifier")
        extra = {}
        self.n_outputs_ = 1
        if y.ndim == 2:
            if obj not in ("squared_error", "regression", "l2", "mse", "multi_squared_error"):
                raise ValueError(f"y has shape {y.shape}: several targets per row are fitted "
                                 "with objective='multi_squared_error' (the default "
                                 f"'squared_error' becomes it); got objective={obj!r}")
            extra["objective"] = "multi_squared_error"
            self.n_outputs_ = int(y.shape[1])
        return self._as_float_y(y, "y"), extra

    def _encode_eval_y(self, y, name):
        if y.shape[1:] != ((self.n_outputs_,) if self.n_outputs_ > 1 else ()):
            raise ValueError(f"{name} has shape {y.shape}; y had "
                             f"{self.n_outputs_} column(s)")
        return self._as_float_y(y, name)

    def _set_fitted(self, booster):
        super()._set_fitted(booster)
        self.n_outputs_ = int(booster.n_outputs)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    @staticmethod
    def _as_float_y(y, name):
        try:
            return np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be numeric for regression, got dtype {y.dtype}") from None

    def _restore_extra(self, booster):
        if booster.objective in _CLASSIFICATION_OBJECTIVES + ("multilabel_binary",):
            raise ValueError(f"the model has objective={booster.objective!r}; load it with "
                             "BonsaiClassifier().load_model")

    def predict(self, X, output_margin=False, iteration_range=None, *, raw_score=False,
                pred_leaf=False, pred_contribs=False, pred_contrib=False,
                pred_interactions=False):
        """Predicted values, shape (n_samples,) ((n_samples, K) for a 2-D ``y``), or what
        one flag asks for.

        Parameters
        ----------
        X : array-like (n_samples, n_features)
        output_margin : bool -- raw margins (e.g. log-scale for poisson) instead of
            outputs; ``raw_score`` is LightGBM's name for it
        iteration_range : (start, end), optional -- rounds to use; default: up to
            ``best_iteration_`` after early stopping, else all
        pred_leaf : bool -- leaf indices, (n_samples, n_trees) int32
        pred_contribs : bool -- SHAP values, (n_samples, n_features + 1), the last
            column the bias; ``pred_contrib`` is LightGBM's name for it
        pred_interactions : bool -- SHAP interaction values,
            (n_samples, n_features + 1, n_features + 1)

        At most one kind of output may be asked for (ValueError otherwise); the
        results are those of ``booster_.predict`` with the same flags.
        """
        kind = _predict_kind(output_margin, raw_score, pred_leaf, pred_contribs,
                             pred_contrib, pred_interactions)
        X = self._check_X(X)
        return _booster_predict(self.booster_, X, kind, iteration_range)


# ---------------------------------------------------------------------------
# Classifier.
# ---------------------------------------------------------------------------

def _indicator(y, name):
    """A 2-D label indicator matrix as float64 0/1; a ValueError naming ``name`` and the
    first entry that is not 0 or 1."""
    try:
        v = np.asarray(y, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: a 2-D y must be a 0/1 label indicator matrix "
                         f"(multi-label), got dtype {np.asarray(y).dtype}") from None
    bad = (v != 0.0) & (v != 1.0)
    if bad.any():
        i, j = (int(a) for a in np.argwhere(bad)[0])
        raise ValueError(f"{name}: a 2-D y must be a 0/1 label indicator matrix "
                         f"(multi-label); got {np.asarray(y)[i, j]!r} at row {i}, column {j} "
                         "(multi-class multi-output targets are not supported)")
    return np.ascontiguousarray(v)


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
                 max_cat_to_onehot=_D["max_cat_to_onehot"],
                 max_cat_threshold=_D["max_cat_threshold"], cat_smooth=_D["cat_smooth"],
                 cat_l2=_D["cat_l2"], min_data_per_group=_D["min_data_per_group"],
                 cat_encoding=_D["cat_encoding"], ctr_permutations=_D["ctr_permutations"],
                 ctr_prior_weight=_D["ctr_prior_weight"],
                 max_ctr_combinations=_D["max_ctr_combinations"],
                 quantized_grad=_D["quantized_grad"], grad_quant_bins=_D["grad_quant_bins"],
                 multi_strategy=_D["multi_strategy"], device=_D["device"],
                 verbosity=_D["verbosity"], importance_type="gain", verbose=None):
        _keep_params(self, locals())

    # -- labels -----------------------------------------------------------------
    _multi_output_y = True
    _multilabel = False

    def _prepare_y(self, y):
        if y.ndim == 2:
            return self._prepare_multilabel(y)
        self._multilabel = False
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

    def _prepare_multilabel(self, y):
        """A 2-D ``y``: a label indicator matrix (n, K) of 0/1 -> ``multilabel_binary``."""
        obj = self.objective
        if obj not in (None, "multilabel_binary"):
            raise ValueError(f"y has shape {y.shape}: a 2-D y is a multi-label indicator "
                             "matrix, fitted with objective='multilabel_binary' (or None); "
                             f"got objective={obj!r}")
        y = _indicator(y, "y")
        k = y.shape[1]
        self._multilabel = True
        self.classes_ = np.arange(k)
        self.n_classes_ = k
        return y, {"objective": "multilabel_binary"}

    def _encode_eval_y(self, y, name):
        if self._multilabel or y.ndim == 2:
            if not self._multilabel or y.ndim != 2 or y.shape[1] != self.n_classes_:
                what = (f"a label indicator matrix (n, {self.n_classes_})" if self._multilabel
                        else "1-D class labels")
                raise ValueError(f"{name} has shape {y.shape}; the model was fitted on {what}")
            return _indicator(y, name)
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
            elif booster.objective == "multilabel_binary":
                classes = list(range(booster.n_outputs))
            else:
                raise ValueError(f"the model has objective={booster.objective!r} and no "
                                 "classes; it is not a classifier")
        dtype = booster.extra.get("classes_dtype")
        self.classes_ = np.asarray(classes, dtype=np.dtype(dtype) if dtype else None)
        self.n_classes_ = int(self.classes_.shape[0])

    def _set_fitted(self, booster):
        super()._set_fitted(booster)
        self._multilabel = booster.objective == "multilabel_binary"

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_label = True
        return tags

    # -- predict ----------------------------------------------------------------
    def predict_proba(self, X, iteration_range=None, *, output_margin=False, raw_score=False,
                      pred_leaf=False, pred_contribs=False, pred_contrib=False,
                      pred_interactions=False):
        """Class probabilities, shape (n_samples, n_classes) (two columns for binary;
        multi-label: (n_samples, K), each label's probability).

        As in LightGBM, a flag (``output_margin`` / ``raw_score``, ``pred_leaf``,
        ``pred_contribs`` / ``pred_contrib``, ``pred_interactions``) returns what
        :meth:`predict` returns for it instead.
        """
        kind = _predict_kind(output_margin, raw_score, pred_leaf, pred_contribs,
                             pred_contrib, pred_interactions)
        X = self._check_X(X)
        booster = self.booster_
        if kind is not None:
            return _booster_predict(booster, X, kind, iteration_range)
        if booster.objective == "custom":  # margins -> sigmoid / softmax
            raw = booster.predict(X, output_margin=True, iteration_range=iteration_range)
            if raw.ndim == 2:
                e = np.exp(raw - raw.max(axis=1, keepdims=True))
                return e / e.sum(axis=1, keepdims=True)
            p = 1.0 / (1.0 + np.exp(-raw))
        else:
            p = booster.predict(X, iteration_range=iteration_range)
            if p.ndim == 2:
                return p
        out = np.empty((p.shape[0], 2))
        out[:, 1] = p
        np.subtract(1.0, p, out=out[:, 0])
        return out

    def predict(self, X, output_margin=False, iteration_range=None, *, raw_score=False,
                pred_leaf=False, pred_contribs=False, pred_contrib=False,
                pred_interactions=False):
        """Predicted class labels (values of ``classes_``), shape (n_samples,)
        (multi-label: the (n_samples, K) 0/1 int matrix, 1 where p > 0.5).

        A flag returns ``booster_.predict``'s output for it instead: ``output_margin``
        (LightGBM: ``raw_score``) the raw margins ((n,) binary, (n, K) multiclass),
        ``pred_leaf`` the leaf indices (n, n_trees), ``pred_contribs`` (LightGBM:
        ``pred_contrib``) SHAP values ((n, F + 1); (n, K, F + 1) multiclass),
        ``pred_interactions`` SHAP interaction values.  At most one kind at a time.
        """
        kind = _predict_kind(output_margin, raw_score, pred_leaf, pred_contribs,
                             pred_contrib, pred_interactions)
        if kind is not None:
            X = self._check_X(X)
            return _booster_predict(self.booster_, X, kind, iteration_range)
        proba = self.predict_proba(X, iteration_range)
        if self._multilabel:      # (n, K) indicators: output k predicted where p_k > 0.5
            return (proba > 0.5).astype(np.int64)
        return self.classes_[np.argmax(proba, axis=1)]
