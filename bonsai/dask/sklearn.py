"""``DaskBonsaiRegressor`` / ``DaskBonsaiClassifier``: the scikit-learn estimators over
dask collections.  This module owns their checks at the ``fit`` / ``predict``
boundary and the label encoding; the fit itself is ``bonsai.dask.train.train`` and
prediction ``bonsai.dask.predict``.

* The constructor takes every argument of ``bonsai.BonsaiRegressor`` /
  ``BonsaiClassifier`` (subclassed: the fitted attributes, ``feature_importances_``,
  ``evals_result_``, ``best_iteration_`` ... are the local ones) plus ``client``
  (a ``distributed.Client``; None: ``distributed.default_client()`` when fitting or
  predicting).  ``sklearn.clone`` keeps the same client; a pickled estimator drops it.
* ``fit(X, y, sample_weight=None, init_score=None, eval_set=None,
  eval_sample_weight=None, eval_names=None, callbacks=None)``: ``X`` a dask Array
  ``(n, F)`` or DataFrame, the per-row arguments dask collections partitioned like it
  (a dask Array with the same row chunks for an Array ``X``; a dask Series -- a
  DataFrame for a 2-D ``init_score`` -- with the same partitions and divisions for a
  DataFrame ``X``), an eval set's likewise partitioned like its ``X``.
  ``init_model`` (continued training) is not available: ``train`` has none.
  ``train`` runs the callbacks on the ranks (worker processes; display callbacks on
  rank 0 only), so ``verbose=None`` (the default) shows nothing here (a worker's
  stderr is no terminal); ``verbose=k`` adds an ``EvaluationMonitor`` whose lines
  rank 0 writes to its worker's stderr.
* The classifier's ``classes_`` are the sorted distinct values of the computed
  ``y`` (``np.unique``, as locally); every partition's labels are encoded to their
  index in ``classes_`` (float64) on the workers, the values ``np.unique(y,
  return_inverse=True)`` gives the local classifier, so a Dask fit and a local fit of
  the same rows with the same bin edges build the same model.  Eval labels not among
  ``classes_`` are a ValueError before the fit starts.  The regressor's labels are
  cast to float64, as locally.
* ``predict`` / ``predict_proba`` / ``apply`` return dask collections partitioned like
  ``X`` (``bonsai.dask.predict``), each block equal to the local estimator's output.
* ``to_local()`` is the plain fitted ``BonsaiRegressor`` / ``BonsaiClassifier`` with
  the same Booster and fitted attributes.  Models are saved as the local estimator's
  (``sklearn_class`` names the local class), so either side loads the other's files.
"""
import inspect

import numpy as np
from sklearn.base import clone
from sklearn.utils.validation import check_is_fitted, validate_data

from .._params import validate_params
from ..sklearn import BonsaiClassifier, BonsaiRegressor
from ..sklearn._base import (_IMPORTANCE_TYPES, _check_verbose, _display_callbacks,
                             eval_entries)
from .data import matrix_kind
from .predict import _client, predict_method
from .train import train as dask_train

__all__ = ["DaskBonsaiClassifier", "DaskBonsaiRegressor"]


# ---------------------------------------------------------------------------
# Dask collections at the boundary.
# ---------------------------------------------------------------------------

def _meta(X):
    """A zero-row local stand-in of ``X`` for scikit-learn's feature checks."""
    if hasattr(X, "_meta") and hasattr(X._meta, "columns"):
        return X._meta
    return np.empty((0, X.shape[1]), dtype=X.dtype)


def _check_like(v, X, name, allow_2d=False):
    """``v`` a dask collection partitioned like ``X``: TypeError / ValueError naming
    ``name``.  Returns ``v``."""
    import dask.array as da
    import dask.dataframe as dd
    if v is None:
        return None
    if isinstance(X, da.Array):
        if not isinstance(v, da.Array):
            raise TypeError(f"{name} must be a dask array partitioned like X (a dask "
                            f"array), got {type(v).__module__}.{type(v).__name__}")
        if v.ndim != 1 and not (allow_2d and v.ndim == 2):
            raise ValueError(f"{name} must be 1-D{' or 2-D' if allow_2d else ''}, got "
                             f"shape {v.shape}")
        rows_v, rows_x = v.chunks[0], X.chunks[0]
        known = not (np.isnan(rows_v).any() or np.isnan(rows_x).any())
        if (rows_v != rows_x) if known else (len(rows_v) != len(rows_x)):
            raise ValueError(f"{name} must be chunked like X along the rows: {name} has row "
                             f"chunks {rows_v}, X {rows_x}")
        return v
    kinds = (dd.Series, dd.DataFrame) if allow_2d else (dd.Series,)
    if not isinstance(v, kinds):
        what = "a dask Series (or DataFrame)" if allow_2d else "a dask Series"
        raise TypeError(f"{name} must be {what} partitioned like X (a dask DataFrame), got "
                        f"{type(v).__module__}.{type(v).__name__}")
    if v.npartitions != X.npartitions:
        raise ValueError(f"{name} has {v.npartitions} partitions but X has {X.npartitions}")
    if v.known_divisions and X.known_divisions and tuple(v.divisions) != tuple(X.divisions):
        raise ValueError(f"{name} must have the divisions of X: {name} has "
                         f"{tuple(v.divisions)}, X {tuple(X.divisions)}")
    return v


def _unique(y):
    """A lazy collection of ``y``'s distinct values."""
    import dask.array as da
    return da.unique(y) if isinstance(y, da.Array) else y.unique()


def _values(u):
    return u.to_numpy() if hasattr(u, "to_numpy") else np.asarray(u)


def _as_float(y, name):
    if y.dtype.kind not in "biuf":
        raise ValueError(f"{name} must be numeric for regression, got dtype {y.dtype}")
    return y.astype(np.float64)


def _encode_block(y, classes):
    """Labels -> their index in ``classes`` as float64 (every label is a class)."""
    vals = _values(y)
    idx = np.searchsorted(classes, vals).astype(np.float64)
    if hasattr(y, "index"):
        import pandas as pd
        return pd.Series(idx, index=y.index, name=y.name)
    return idx


def _encode(y, classes):
    import dask.array as da
    if isinstance(y, da.Array):
        return y.map_blocks(_encode_block, classes, dtype=np.float64,
                            meta=np.empty((0,), np.float64))
    import pandas as pd
    meta = pd.Series(np.empty(0, np.float64), index=y._meta.index, name=y.name)
    return y.map_partitions(_encode_block, classes, meta=meta)


# ---------------------------------------------------------------------------
# The shared part of the two estimators.
# ---------------------------------------------------------------------------

def _dask_init(local_class):
    """``__init__`` taking ``local_class``'s arguments plus ``client=None``, with the
    explicit signature scikit-learn reads its parameter names from."""
    sig = inspect.signature(local_class.__init__)
    client = inspect.Parameter("client", inspect.Parameter.KEYWORD_ONLY, default=None)

    def __init__(self, *, client=None, **kwargs):
        local_class.__init__(self, **kwargs)
        self.client = client

    __init__.__signature__ = sig.replace(parameters=[*sig.parameters.values(), client])
    __init__.__doc__ = f"The arguments of {local_class.__name__}, plus ``client``."
    return __init__


class _DaskModel:
    """Fit / predict over dask collections; the local class is ``_local_class``."""

    _local_class = None

    # -- params -----------------------------------------------------------------
    def _train_dict(self, extra):
        """The training parameters as the dict ``train`` takes (validated here, at
        the boundary, by the table the local estimator uses)."""
        params = self.get_params(deep=False)
        for name in ("client", "verbose"):
            params.pop(name)
        importance_type = params.pop("importance_type")
        if importance_type not in _IMPORTANCE_TYPES:
            raise ValueError(f"importance_type must be one of {_IMPORTANCE_TYPES}, "
                             f"got {importance_type!r}")
        params.update(extra)
        validate_params(params)
        return params

    def _extra(self):   # the model is the local estimator's (its files load either way)
        extra = super()._extra()
        extra["sklearn_class"] = self._local_class.__name__
        return extra

    # -- fit --------------------------------------------------------------------
    def fit(self, X, y, sample_weight=None, init_score=None, eval_set=None,
            eval_sample_weight=None, eval_names=None, callbacks=None):
        """Build the boosted trees from the dask collections (X, y) with
        ``bonsai.dask.train.train`` on the client's workers.

        Parameters
        ----------
        X : dask Array (n, F) (chunks spanning all columns) or dask DataFrame
        y : dask Array (n,) with X's row chunks, or dask Series with X's partitions
        sample_weight : like y, optional
        init_score : like y, or (n, K) (a dask DataFrame for a DataFrame X), optional
        eval_set : list of (X, y) pairs of dask collections, optional (the last one
            drives early stopping)
        eval_sample_weight : list of (dask collection or None), optional
        eval_names : list of str, optional -- default ``valid_0``, ``valid_1``, ...
        callbacks : list of bonsai.TrainingCallback, optional

        Returns
        -------
        self
        """
        self.__dict__.pop("booster_", None)   # a failed refit leaves it unfitted
        client = _client(self.client)
        matrix_kind(X, "X")
        validate_data(self, _meta(X), skip_check_array=True, reset=True)
        y = _check_like(y, X, "y")
        if y is None:
            raise TypeError("y must be a dask collection partitioned like X, got None")
        sample_weight = _check_like(sample_weight, X, "sample_weight")
        init_score = _check_like(init_score, X, "init_score", allow_2d=True)
        evals = self._check_eval_set(eval_set, eval_sample_weight, eval_names)
        if self.early_stopping_rounds is not None and not evals:   # before any data pass
            raise ValueError(f"early_stopping_rounds={self.early_stopping_rounds!r} needs "
                             "an eval_set to monitor; pass fit(..., eval_set=[(X_val, y_val)])")
        verbose = _check_verbose(self.verbose)
        y_enc, eval_ys, extra = self._labels(client, y, [e[2] for e in evals])
        raw = self._train_dict(extra)
        params = validate_params(raw)
        # train's callbacks run on every rank (a worker): no progress bar by default
        callbacks = _display_callbacks(callbacks, 0 if verbose is None else verbose,
                                       params.verbosity)
        valid_sets = [(Xv, yv) if wv is None else (Xv, yv, wv)
                      for (_, Xv, _, wv), yv in zip(evals, eval_ys)]
        names = list(getattr(self, "feature_names_in_", [])) or None
        booster = dask_train(client, raw, X, y_enc, weight=sample_weight,
                             init_score=init_score, valid_sets=valid_sets or None,
                             valid_names=[e[0] for e in evals] or None,
                             callbacks=callbacks, feature_names=names,
                             categorical_features=params.categorical_features)
        booster.extra.update(self._extra())
        self._set_fitted(booster)
        return self

    def _check_eval_set(self, eval_set, eval_sample_weight, eval_names):
        """Validate eval sets -> [(name, X, y, weight)] (labels not yet encoded)."""
        if eval_set is None:
            return []
        eval_set, weights, eval_names = eval_entries(eval_set, eval_sample_weight, eval_names,
                                                     "pairs of dask collections")
        out = []
        for i, ((Xv, yv), wv, name) in enumerate(zip(eval_set, weights, eval_names)):
            matrix_kind(Xv, f"eval_set[{i}] X")
            validate_data(self, _meta(Xv), skip_check_array=True, reset=False)
            yv = _check_like(yv, Xv, f"eval_set[{i}] y")
            if yv is None:
                raise TypeError(f"eval_set[{i}] y must be a dask collection, got None")
            wv = _check_like(wv, Xv, f"eval_sample_weight[{i}]")
            out.append((name, Xv, yv, wv))
        return out

    # -- predict ----------------------------------------------------------------
    def _map(self, method, X, kwargs):
        check_is_fitted(self)
        matrix_kind(X, "X")
        validate_data(self, _meta(X), skip_check_array=True, reset=False)
        return predict_method(self.client, self.to_local(), X, method, kwargs)

    def apply(self, X, iteration_range=None):
        """Leaf index reached in every tree, a dask collection partitioned like X
        ((n_samples, n_trees) int32 blocks)."""
        return self._map("apply", X, {"iteration_range": iteration_range})

    def to_local(self):
        """The plain fitted local estimator with the same parameters (but ``client``),
        Booster and fitted attributes."""
        check_is_fitted(self)
        params = self.get_params(deep=False)
        params.pop("client")
        local = self._local_class(**params)
        local.__dict__.update({k: v for k, v in self.__dict__.items()
                               if k.endswith("_") and not k.startswith("_")})
        return local

    def load_model(self, path):
        """Load a model file of this estimator or of its local class (returns self)."""
        local = self._local_class().load_model(path)
        for k in [k for k in self.__dict__ if k.endswith("_") and not k.startswith("_")]:
            del self.__dict__[k]
        self.__dict__.update({k: v for k, v in local.__dict__.items()
                              if k.endswith("_") and not k.startswith("_")})
        return self

    # -- copies -----------------------------------------------------------------
    def __sklearn_clone__(self):
        """An unfitted copy with the same parameters, sharing the same client (a
        client is a connection, not a parameter value to copy)."""
        params = self.get_params(deep=False)
        client = params.pop("client")
        return type(self)(client=client, **{k: clone(v, safe=False) for k, v in params.items()})

    def __getstate__(self):
        state = dict(super().__getstate__())   # a copy: the default state is __dict__
        state["client"] = None   # a Client does not pickle; the default one is used
        return state


# ---------------------------------------------------------------------------
# The estimators.
# ---------------------------------------------------------------------------

class DaskBonsaiRegressor(_DaskModel, BonsaiRegressor):
    """``BonsaiRegressor`` fitted on and predicting over dask collections (see the
    module docstring); ``client``: a distributed.Client, or None for the default."""

    _local_class = BonsaiRegressor
    __init__ = _dask_init(BonsaiRegressor)

    def _labels(self, client, y, eval_ys):
        self._prepare_y(np.zeros(0))   # the local regressor's objective check
        return (_as_float(y, "y"),
                [_as_float(yv, f"eval_set[{i}] y") for i, yv in enumerate(eval_ys)], {})

    def predict(self, X, output_margin=False, iteration_range=None, *, raw_score=False,
                pred_leaf=False, pred_contribs=False, pred_contrib=False,
                pred_interactions=False):
        """``BonsaiRegressor.predict`` of every block of X: a dask collection
        partitioned like X (``bonsai.dask.predict``)."""
        return self._map("predict", X, dict(
            output_margin=output_margin, iteration_range=iteration_range,
            raw_score=raw_score, pred_leaf=pred_leaf, pred_contribs=pred_contribs,
            pred_contrib=pred_contrib, pred_interactions=pred_interactions))


class DaskBonsaiClassifier(_DaskModel, BonsaiClassifier):
    """``BonsaiClassifier`` fitted on and predicting over dask collections (see the
    module docstring); ``client``: a distributed.Client, or None for the default."""

    _local_class = BonsaiClassifier
    __init__ = _dask_init(BonsaiClassifier)

    def _labels(self, client, y, eval_ys):
        """(encoded y, encoded eval ys, extra params): the classes from the computed
        distinct values of y (one pass, together with the eval labels' check)."""
        found = client.gather(client.compute([_unique(v) for v in (y, *eval_ys)]))
        uniq = [_values(u) for u in found]
        for name, u in zip(["y"] + [f"eval_set[{i}] y" for i in range(len(eval_ys))], uniq):
            if u.dtype.kind in "fc" and not np.isfinite(u).all():
                raise ValueError(f"Input {name} contains NaN or infinity; labels must be "
                                 "finite")
        # the local classifier's classes and checks, on the distinct values
        _, extra = self._prepare_y(uniq[0])
        for i, u in enumerate(uniq[1:]):
            self._encode_eval_y(u, f"eval_set[{i}] y")   # unseen labels: ValueError
        return (_encode(y, self.classes_),
                [_encode(yv, self.classes_) for yv in eval_ys], extra)

    def predict_proba(self, X, iteration_range=None, *, output_margin=False, raw_score=False,
                      pred_leaf=False, pred_contribs=False, pred_contrib=False,
                      pred_interactions=False):
        """``BonsaiClassifier.predict_proba`` of every block of X: a dask collection
        partitioned like X ((n, n_classes) blocks; ``bonsai.dask.predict``)."""
        return self._map("predict_proba", X, dict(
            iteration_range=iteration_range, output_margin=output_margin,
            raw_score=raw_score, pred_leaf=pred_leaf, pred_contribs=pred_contribs,
            pred_contrib=pred_contrib, pred_interactions=pred_interactions))

    def predict(self, X, output_margin=False, iteration_range=None, *, raw_score=False,
                pred_leaf=False, pred_contribs=False, pred_contrib=False,
                pred_interactions=False):
        """``BonsaiClassifier.predict`` of every block of X (class labels, or what a
        flag asks for): a dask collection partitioned like X."""
        return self._map("predict", X, dict(
            output_margin=output_margin, iteration_range=iteration_range,
            raw_score=raw_score, pred_leaf=pred_leaf, pred_contribs=pred_contribs,
            pred_contrib=pred_contrib, pred_interactions=pred_interactions))
