"""``bonsai.dask.predict``: a model's predictions over a dask Array or DataFrame,
computed block by block on the workers.

``predict(client, model, data, **kwargs)`` scatters the model once
(``client.scatter(model, hash=False, broadcast=False)``: one copy, which the workers
fetch from each other as they need it) and maps it over ``data``:

* a dask Array ``(n, F)`` whose chunks span all ``F`` columns (``da.map_blocks``)
  gives a dask Array with the same row chunks: ``(n,)`` or ``(n, K)``, ``(n, T)``
  for leaf indices, ``(n, F + 1)`` / ``(n, K, F + 1)`` for SHAP values, and so on
  (the shapes of ``Booster.predict``);
* a dask DataFrame (``dd.map_partitions``; pandas ``category`` columns included, which
  the model maps to its own categories as in local prediction) gives, with the same
  divisions and index, a dask Series for a one-column output and a dask DataFrame
  (columns ``0 .. m-1``) for a two-dimensional one; an output of three or more
  dimensions (multiclass SHAP values, SHAP interactions) has no frame shape and comes
  as a dask Array with one block per partition (row chunk sizes unknown, as after any
  ``to_dask_array()``; ``.compute_chunk_sizes()`` finds them).

``model`` is a :class:`bonsai.Booster` (``kwargs``: those of ``Booster.predict``) or a
fitted bonsai estimator, local or Dask (``kwargs``: those of its ``predict``; the Dask
estimators' ``predict`` / ``predict_proba`` / ``apply`` come here too).  Every block
holds exactly what the model returns for those rows locally, so the computed result
equals ``model.predict(data.compute(), **kwargs)`` bit for bit; an empty partition
gives zero rows without calling the model.  Everything that can be checked without
computing ``data`` (its type, column chunks, count and names, the keywords, the iteration
range) is checked here, before anything is scattered.
"""
import inspect

import numpy as np

from .data import matrix_kind

__all__ = ["predict"]

#: the keywords of ``Booster.predict`` besides ``X``
_BOOSTER_KWARGS = ("output_margin", "iteration_range", "pred_leaf", "pred_contribs",
                   "pred_interactions")


def predict(client, model, data, **kwargs):
    """Predictions of ``model`` over the dask collection ``data`` (see the module
    docstring for the output's type and shape).

    Parameters
    ----------
    client : distributed.Client or None -- None: ``distributed.default_client()``
    model : bonsai.Booster or a fitted BonsaiRegressor / BonsaiClassifier (or their
        Dask versions)
    data : dask.array.Array (n, F), its chunks spanning all columns, or
        dask.dataframe.DataFrame
    **kwargs : passed to ``model.predict`` for every block (``output_margin``,
        ``iteration_range``, ``pred_leaf``, ``pred_contribs``, ``pred_interactions``;
        the estimators also take LightGBM's ``raw_score`` / ``pred_contrib``)

    Returns
    -------
    dask.array.Array, dask.dataframe.Series or dask.dataframe.DataFrame, partitioned
    like ``data``.
    """
    return predict_method(client, model, data, "predict", kwargs)


def predict_method(client, model, data, method, kwargs):
    """``model.<method>(block, **kwargs)`` over every block of ``data`` (``method``:
    ``"predict"``, or an estimator's ``"predict_proba"`` / ``"apply"``)."""
    client = _client(client)
    local, booster = _local_model(model, method)
    trailing, dtype = _output_spec(local, booster, method, kwargs)
    kind = _check_data(data, booster)
    fut = client.scatter(local, hash=False, broadcast=False)
    if kind == "array":
        return _map_array(data, fut, method, kwargs, trailing, dtype)
    return _map_frame(data, fut, method, kwargs, trailing, dtype)


# ---------------------------------------------------------------------------
# Checks at the boundary.
# ---------------------------------------------------------------------------

def _client(client):
    from distributed import Client, default_client
    if client is None:
        return default_client()
    if not isinstance(client, Client):
        raise TypeError(f"client must be a distributed.Client or None, got "
                        f"{type(client).__name__}")
    return client


def _local_model(model, method):
    """(the object scattered to the workers, its Booster); TypeError for anything
    that is not a Booster or a fitted bonsai estimator."""
    from ..booster import Booster
    if isinstance(model, Booster):
        if method != "predict":
            raise TypeError(f"model: a Booster has no {method}(); pass a fitted bonsai "
                            "estimator")
        return model, model
    from sklearn.utils.validation import check_is_fitted
    from ..sklearn import BonsaiClassifier, BonsaiRegressor
    if not isinstance(model, (BonsaiRegressor, BonsaiClassifier)):
        raise TypeError("model must be a bonsai.Booster or a fitted bonsai estimator, got "
                        f"{type(model).__name__}")
    check_is_fitted(model)
    if not hasattr(model, method):
        raise TypeError(f"model: {type(model).__name__} has no {method}()")
    to_local = getattr(model, "to_local", None)   # the Dask estimators: no client inside
    local = to_local() if to_local is not None else model
    return local, local.booster_


def _output_spec(local, booster, method, kwargs):
    """(trailing shape, dtype) of ``local.<method>(X, **kwargs)`` for one row: the
    keyword names, their values (one output kind at a time) and the iteration range
    checked as the local call would check them."""
    from ..booster import Booster
    from ..sklearn._base import _predict_kind
    if isinstance(local, Booster):
        names = _BOOSTER_KWARGS
    else:
        names = [p for p in inspect.signature(getattr(local, method)).parameters if p != "X"]
    unknown = [k for k in kwargs if k not in names]
    if unknown:
        raise TypeError(f"{unknown[0]!r} is not a keyword of {type(local).__name__}."
                        f"{method}(); it takes {', '.join(names)}")
    flags = {f: kwargs.get(f, False) for f in ("output_margin", "raw_score", "pred_leaf",
                                                 "pred_contribs", "pred_contrib",
                                                 "pred_interactions")}
    kind = _predict_kind(**flags)
    if method == "apply":
        kind = "leaf"
    t0, t1 = booster._tree_range(kwargs.get("iteration_range"))   # ValueError if outside
    K, F = booster.n_outputs, booster.n_features
    per_class = () if K == 1 else (K,)
    if kind == "leaf":
        return (t1 - t0,), np.dtype(np.int32)
    if kind == "contribs":
        return per_class + (F + 1,), np.dtype(np.float64)
    if kind == "interactions":
        return per_class + (F + 1, F + 1), np.dtype(np.float64)
    if kind is None and method == "predict_proba":
        return (local.n_classes_,), np.dtype(np.float64)
    if kind is None and hasattr(local, "classes_"):    # class labels
        return (), local.classes_.dtype
    return per_class, np.dtype(np.float64)   # outputs or margins


def _check_data(data, booster):
    """``"array"`` or ``"frame"``; TypeError / ValueError naming ``data``."""
    F = booster.n_features
    kind = matrix_kind(data, "data")
    if kind == "array":
        if data.shape[1] != F:
            raise ValueError(f"data has {data.shape[1]} columns, but the model was trained "
                             f"with {F} features")
        return "array"
    if kind == "frame":
        if len(data.columns) != F:
            raise ValueError(f"data has {len(data.columns)} columns, but the model was "
                             f"trained with {F} features")
        names = [str(c) for c in data.columns]   # the names local prediction compares
        if booster.feature_names is not None and names != list(booster.feature_names):
            diff = [(a, b) for a, b in zip(names, booster.feature_names) if a != b][:3]
            raise ValueError(f"data's column names differ from the model's feature names "
                             f"(first differences, data vs model: {diff}); reorder the "
                             "columns to match")
        return "frame"


# ---------------------------------------------------------------------------
# The per-block calls (run on the workers).
# ---------------------------------------------------------------------------

def _call(model, method, X, kwargs, trailing, dtype):
    if X.shape[0] == 0:   # the local predict refuses empty input; an empty block is fine
        return np.empty((0,) + trailing, dtype=dtype)
    return getattr(model, method)(X, **kwargs)


def _block(X, model, method, kwargs, trailing, dtype):
    return _call(model, method, X, kwargs, trailing, dtype)


def _wrap(out, index):
    """A block's result as the frame piece of its partition: a Series for (n,), a
    DataFrame with columns 0..m-1 for (n, m), the array itself beyond that."""
    import pandas as pd
    if out.ndim == 1:
        return pd.Series(out, index=index, dtype=out.dtype)
    if out.ndim == 2:
        return pd.DataFrame(out, index=index, columns=pd.RangeIndex(out.shape[1]),
                            dtype=out.dtype)
    return out


def _partition(part, model, method, kwargs, trailing, dtype):
    return _wrap(_call(model, method, part, kwargs, trailing, dtype), part.index)


def _map_array(data, fut, method, kwargs, trailing, dtype):
    import dask.array as da
    chunks = (data.chunks[0],) + tuple((s,) for s in trailing)
    extra = {}
    if not trailing:
        extra["drop_axis"] = 1
    elif len(trailing) > 1:
        extra["new_axis"] = list(range(2, 1 + len(trailing)))
    meta = np.empty((0,) * (1 + len(trailing)), dtype=dtype)
    return da.map_blocks(_block, data, fut, method, kwargs, trailing, dtype,
                         chunks=chunks, dtype=dtype, meta=meta, **extra)


def _map_frame(data, fut, method, kwargs, trailing, dtype):
    meta = _wrap(np.empty((0,) + trailing, dtype=dtype), data._meta.index)
    return data.map_partitions(_partition, fut, method, kwargs, trailing, dtype, meta=meta,
                               align_dataframes=False)
