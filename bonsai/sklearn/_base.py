"""The shared machinery behind the scikit-learn estimators (``bonsai.sklearn``): input
checks at the ``fit`` / ``predict`` boundary (with a fast path for plain float
matrices), the constructor-argument table, the prediction kinds (``output_margin``,
``pred_leaf``, ``pred_contribs``, ``pred_interactions`` and LightGBM's spellings),
what a fit shows while it runs (``verbose``), and ``_BonsaiModel`` (fit, eval sets,
early stopping results, importances, save/load).  The public estimators and their
conventions are documented in ``bonsai.sklearn.estimators``.
"""
import os

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, column_or_1d, validate_data

from .._params import PARAM_TABLE, validate_params
from ..booster import Booster
from ..boosting import train
from ..callbacks import EvaluationMonitor
from ..dataset import Dataset
from ..progress import ProgressBar


_D = {spec.name: spec.default for spec in PARAM_TABLE}

_SPARSE = ("csr", "csc", "coo")
_CLASSIFICATION_OBJECTIVES = ("binary", "multiclass")
_IMPORTANCE_TYPES = Booster.IMPORTANCE_TYPES
from ..data import is_plain_matrix  # noqa: E402


# ---------------------------------------------------------------------------
# Input checks (the fit / predict boundary).
# ---------------------------------------------------------------------------

def _dense(X):
    """sklearn's checked X as bonsai takes it: scipy.sparse stays sparse (bonsai bins
    and predicts it from its non-zeros, ``bonsai.sparse``)."""
    return X


def _has_categories(X):
    """A pandas DataFrame with ``category`` columns, or any polars frame or Arrow table
    (passed to bonsai as is: sklearn's array conversion would turn string categories
    into an error naming neither the column nor the input; bonsai's own conversion
    takes categorical columns and names a bad one)."""
    from .._frames import is_arrow_table, is_polars_frame
    if is_polars_frame(X) or is_arrow_table(X):
        return True
    dtypes = getattr(X, "dtypes", None)
    if dtypes is None or not type(X).__module__.startswith("pandas"):
        return False
    import pandas as pd
    return any(isinstance(dt, pd.CategoricalDtype) for dt in dtypes)


def _validate_X(est, X, reset):
    """X checked at the sklearn boundary (feature names and count recorded or
    compared); DataFrames with category columns keep their columns."""
    if _has_categories(X):
        validate_data(est, X, skip_check_array=True, reset=reset)
        return X
    return _dense(validate_data(est, X, accept_sparse=_SPARSE, reset=reset,
                                dtype=(np.float64, np.float32), ensure_all_finite=False))


_plain_matrix = is_plain_matrix   # sklearn's checks would return such input unchanged


# ---------------------------------------------------------------------------
# Prediction kinds: what predict / predict_proba return besides their default.
# ---------------------------------------------------------------------------

#: (flag, kind) in the order the messages list them; LightGBM's spellings raw_score
#: and pred_contrib mean output_margin and pred_contribs
_KIND_FLAGS = (("output_margin", "margin"), ("raw_score", "margin"), ("pred_leaf", "leaf"),
               ("pred_contribs", "contribs"), ("pred_contrib", "contribs"),
               ("pred_interactions", "interactions"))


def _predict_kind(output_margin, raw_score, pred_leaf, pred_contribs, pred_contrib,
                  pred_interactions):
    """The one output asked for: None (the default output), ``"margin"``, ``"leaf"``,
    ``"contribs"`` or ``"interactions"``; TypeError for a flag that is not a bool,
    ValueError for two different outputs at once."""
    if (output_margin is False and raw_score is False and pred_leaf is False
            and pred_contribs is False and pred_contrib is False
            and pred_interactions is False):
        return None   # the common case, without building anything
    values = (output_margin, raw_score, pred_leaf, pred_contribs, pred_contrib,
              pred_interactions)
    asked = {}
    for (flag, kind), v in zip(_KIND_FLAGS, values):
        if not isinstance(v, (bool, np.bool_)):
            raise TypeError(f"{flag} must be True or False, got {v!r}")
        if v:
            asked.setdefault(kind, []).append(flag)
    if len(asked) > 1:
        given = ", ".join(f"{f}=True" for fs in asked.values() for f in fs)
        raise ValueError(f"{given}: these ask for different outputs; pass one of "
                         "output_margin (raw_score), pred_leaf, pred_contribs (pred_contrib) "
                         "or pred_interactions")
    return next(iter(asked), None)


def _booster_predict(booster, X, kind, iteration_range):
    """``Booster.predict`` for a prediction kind of :func:`_predict_kind`."""
    return booster.predict(X, iteration_range=iteration_range,
                           output_margin=kind == "margin", pred_leaf=kind == "leaf",
                           pred_contribs=kind == "contribs",
                           pred_interactions=kind == "interactions")


# ---------------------------------------------------------------------------
# What a fit shows while it runs.
# ---------------------------------------------------------------------------

def _keep_params(est, values):
    """Store an estimator's ``__init__`` arguments (its ``locals()``) as attributes of
    the same names, unchanged (scikit-learn's rule for ``__init__``)."""
    for name, value in values.items():
        if name not in ("self", "__class__"):
            setattr(est, name, value)


def eval_entries(eval_set, eval_sample_weight, eval_names, what):
    """``eval_set`` (one ``(X, y)`` pair or a list of them), its weights and names
    checked and aligned: (pairs, weights, names), a list each.  ``what`` names the
    pairs in the TypeError (e.g. "pairs of dask collections")."""
    if (isinstance(eval_set, tuple) and len(eval_set) == 2
            and not isinstance(eval_set[0], (tuple, list))):
        eval_set = [eval_set]  # a single (X, y) pair
    if not isinstance(eval_set, (list, tuple)) or not all(
            isinstance(p, (tuple, list)) and len(p) == 2 for p in eval_set):
        raise TypeError(f"eval_set must be a list of (X, y) {what}")
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
    weights = [None] * k if eval_sample_weight is None else list(eval_sample_weight)
    if len(weights) != k:
        raise ValueError(f"eval_sample_weight has {len(weights)} entries but eval_set "
                         f"has {k}")
    return list(eval_set), weights, eval_names


def _check_verbose(verbose):
    if verbose is None or isinstance(verbose, (bool, np.bool_)):
        return verbose
    if not isinstance(verbose, (int, np.integer)):
        raise TypeError(f"verbose must be None, a bool or an int >= 0, got {verbose!r}")
    if verbose < 0:
        raise ValueError(f"verbose must be None, a bool or an int >= 0, got {verbose!r}")
    return int(verbose)


def _display_callbacks(callbacks, verbose, verbosity):
    """``callbacks`` plus what ``verbose`` asks to show: ``None`` a progress bar (drawn
    only where a person watches a fit that takes a while, ``bonsai.progress``), ``0`` /
    ``False`` nothing, ``k >= 1`` / ``True`` a plain evaluation line every ``k``
    rounds.  ``verbosity=0`` also keeps the fit silent; a display the caller already
    passed (a ProgressBar or an EvaluationMonitor) replaces the default one."""
    callbacks = list(callbacks or [])
    if verbose is False or verbose == 0 or verbosity == 0:
        return callbacks
    if any(isinstance(cb, (ProgressBar, EvaluationMonitor)) for cb in callbacks):
        return callbacks
    if verbose is None:
        return callbacks + [ProgressBar()]
    return callbacks + [EvaluationMonitor(period=int(verbose))]


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


def _check_y_2d(y, n, name):
    """(n, K) labels, K >= 2 (the multi-output estimators' 2-D ``y``), as an ndarray;
    None when ``y`` is not such a matrix (a (n, 1) column goes the 1-D way)."""
    if hasattr(y, "toarray"):            # a scipy.sparse indicator matrix
        y = y.toarray()
    elif hasattr(y, "to_numpy") and not isinstance(y, np.ndarray):
        if getattr(y, "ndim", 1) != 2:
            return None
        y = y.to_numpy()
    y = np.asarray(y)
    if y.ndim != 2 or y.shape[1] < 2:
        return None
    if y.shape[0] != n:
        raise ValueError(f"{name} has {y.shape[0]} rows but X has {n} rows")
    return y


def _check_finite_y(y, name):
    if y.dtype.kind in "fc" and y.ndim == 2:
        bad = ~np.isfinite(y)
        if bad.any():
            i, j = (int(a) for a in np.argwhere(bad)[0])
            what = "NaN" if np.isnan(y[i, j]) else "infinity"
            raise ValueError(f"Input {name} contains {what} (at row {i}, column {j}); "
                             "labels must be finite")
    elif y.dtype.kind in "fc":
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

    #: whether ``fit`` takes a 2-D ``y`` (n, K), K >= 2 (multi-output regression,
    #: multi-label classification); a (n, 1) column is raveled (with sklearn's warning)
    _multi_output_y = False

    # -- subclass hooks -------------------------------------------------------
    def _check_y(self, y, n, name):
        """Labels of n rows: (n, K) when the estimator takes them, else 1-D."""
        y2 = _check_y_2d(y, n, name) if self._multi_output_y else None
        return _check_y_1d(y, n, name) if y2 is None else y2

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
        params.pop("verbose")
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
        y : array-like (n_samples,) -- targets (regressor) or class labels (classifier);
            (n_samples, K) -- K targets (regressor: ``multi_squared_error``) or a 0/1
            label indicator matrix (classifier: ``multilabel_binary``)
        sample_weight : array-like (n_samples,), optional -- finite, >= 0
        init_score : array-like (n_samples,) or (n_samples, K), optional -- start margins
        eval_set : list of (X, y) pairs, optional -- evaluated after every round
            (the last one drives early stopping)
        eval_sample_weight : list of array-like or None, optional -- one per eval set
        eval_names : list of str, optional -- default ``valid_0``, ``valid_1``, ...
        callbacks : list of bonsai.TrainingCallback, optional (a ProgressBar or an
            EvaluationMonitor among them replaces the display ``verbose`` asks for)
        init_model : Booster, model file path or fitted estimator, optional --
            continue training from it

        Returns
        -------
        self

        Ctrl-C (``KeyboardInterrupt``) stops the fit within about one round and leaves
        the estimator unfitted; the exception's ``.booster`` holds the model of the
        rounds finished before it (None if none had; see ``bonsai.train``).
        """
        return self._fit(X, y, sample_weight, init_score, eval_set, eval_sample_weight,
                         eval_names, callbacks, init_model)

    def _fit(self, X, y, sample_weight, init_score, eval_set, eval_sample_weight,
             eval_names, callbacks, init_model, group=None, eval_group=None):
        """``fit``; ``group`` / ``eval_group`` (query sizes of the train set and of each
        eval set) for the ranker."""
        self.__dict__.pop("booster_", None)  # a failed refit leaves the estimator unfitted
        if _has_categories(X):
            X = _validate_X(self, X, reset=True)
        else:
            X, y = validate_data(self, X, y, accept_sparse=_SPARSE,
                                 dtype=(np.float64, np.float32), ensure_all_finite=False,
                                 y_numeric=False, multi_output=self._multi_output_y)
            X = _dense(X)
        n = X.shape[0]
        y = self._check_y(y, n, "y")
        _check_finite_y(y, "y")
        y_enc, extra_params = self._prepare_y(y)
        params = self._train_params(extra_params)
        w = _check_weight(sample_weight, n, "sample_weight")
        eval_pairs = self._check_eval_set(eval_set, eval_sample_weight, eval_names)
        eval_group = [None] * len(eval_pairs) if eval_group is None else list(eval_group)
        if len(eval_group) != len(eval_pairs):
            raise ValueError(f"eval_group has {len(eval_group)} entries but eval_set has "
                             f"{len(eval_pairs)}")
        if params.early_stopping_rounds is not None and not eval_pairs:
            raise ValueError(f"early_stopping_rounds={params.early_stopping_rounds} needs "
                             "an eval_set to monitor; pass fit(..., eval_set=[(X_val, y_val)])")
        init_booster = _as_booster(init_model)
        self._check_init_model(init_booster)
        callbacks = _display_callbacks(callbacks, _check_verbose(self.verbose),
                                       params.verbosity)

        names = list(getattr(self, "feature_names_in_", [])) or None
        train_set = Dataset(X, label=y_enc, weight=w, init_score=init_score,
                            feature_names=names, max_bin=params.max_bin,
                            reference=None, random_state=params.random_state,
                            categorical_features=params.categorical_features,
                            group=group)
        valid_sets, valid_names = [], []
        for (name, Xv, yv, wv), gv in zip(eval_pairs, eval_group):
            valid_sets.append(Dataset(Xv, label=yv, weight=wv, feature_names=names,
                                      reference=train_set, group=gv))
            valid_names.append(name)
        try:
            booster = train(params, train_set, valid_sets=valid_sets or None,
                            valid_names=valid_names or None, callbacks=callbacks,
                            init_model=init_booster)
        except KeyboardInterrupt as e:   # Ctrl-C: unfitted; the rounds so far on e.booster
            if getattr(e, "booster", None) is not None:
                e.booster.extra.update(self._extra())
            raise
        booster.extra.update(self._extra())
        self._set_fitted(booster)
        return self

    def _check_eval_set(self, eval_set, eval_sample_weight, eval_names):
        """Validate eval sets -> [(name, X, encoded y, weight)]."""
        if eval_set is None:
            return []
        eval_set, eval_sample_weight, eval_names = eval_entries(
            eval_set, eval_sample_weight, eval_names, "pairs")
        out = []
        for i, ((Xv, yv), wv, name) in enumerate(zip(eval_set, eval_sample_weight, eval_names)):
            Xv = _validate_X(self, Xv, reset=False)
            nv = Xv.shape[0]
            yv = self._check_y(yv, nv, f"eval_set[{i}] y")
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
        """X checked against the fit: a plain float ndarray (C or F order) of a model
        fitted without feature names takes a fast path with sklearn's own checks and
        messages (fitted, feature count); anything else (DataFrames and their names
        included) goes through ``validate_data``."""
        d = self.__dict__
        if "booster_" in d and "feature_names_in_" not in d and _plain_matrix(X):
            if X.shape[1] != self.n_features_in_:
                raise ValueError(f"X has {X.shape[1]} features, but {type(self).__name__} "
                                 f"is expecting {self.n_features_in_} features as input.")
            return X
        check_is_fitted(self)
        return _validate_X(self, X, reset=False)

    def apply(self, X, iteration_range=None):
        """Leaf index reached in every tree, shape (n_samples, n_trees) int32."""
        X = self._check_X(X)
        return self.booster_.predict(X, iteration_range=iteration_range, pred_leaf=True)

    @property
    def feature_importances_(self):
        """Importance per feature (``importance_type``: split, gain, total_gain, cover,
        total_cover; see ``Booster.feature_importance``), normalised to sum to 1 as in
        scikit-learn and XGBoost (all zeros when no tree splits), shape (n_features,)."""
        check_is_fitted(self)
        if self.importance_type not in _IMPORTANCE_TYPES:
            raise ValueError(f"importance_type must be one of {_IMPORTANCE_TYPES}, "
                             f"got {self.importance_type!r}")
        imp = self.booster_.feature_importance(self.importance_type)
        total = imp.sum()
        return imp / total if total > 0 else imp

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
