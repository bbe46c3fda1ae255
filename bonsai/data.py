"""Input validation at the API boundary: turn user data (numpy, pandas, Arrow,
polars, scipy.sparse) into a 2-D float matrix plus feature names, and check labels,
weights and init scores.  Everything downstream assumes clean data.  Arrow and polars
tables are read without pandas (``bonsai._frames``).
"""
import numbers

import numpy as np

from ._frames import (arrow_vector, from_arrow, from_polars, is_arrow_table, is_arrow_vector,
                      is_polars_frame, wide_enough)


def _is_pandas_df(data):
    return type(data).__module__.startswith("pandas") and hasattr(data, "columns") and hasattr(data, "dtypes")


def _from_pandas(df):
    """(X, names, categories): ``category`` columns hold their pandas codes (NaN for
    missing) and ``categories[j]`` lists column j's categories."""
    import pandas as pd
    names = [str(c) for c in df.columns]
    cols = []
    cats = {}
    for j, (name, col) in enumerate(zip(names, df.columns)):
        s = df[col]
        dt = s.dtype
        if isinstance(dt, pd.CategoricalDtype):
            cats[j] = list(dt.categories)
        elif not (pd.api.types.is_numeric_dtype(dt) or pd.api.types.is_bool_dtype(dt)):
            raise TypeError(
                f"X: column {name!r} has non-numeric dtype {dt}; bonsai needs numeric "
                "columns (int, float or bool; missing values as NaN) or 'category' columns "
                "(df[col].astype('category'))")
        cols.append(s)
    dtypes = {np.dtype(s.dtype) if isinstance(s.dtype, np.dtype) else None
              for j, s in enumerate(cols) if j not in cats}
    # float32 when every numeric column is: a float64 copy of float32 data doubles the
    # largest transient of a fit (category codes widen it only past float32's exact range)
    float32 = bool(cols) and dtypes <= {np.dtype(np.float32)}
    if cats:
        # C order: the category coding runs in place
        out = np.empty(df.shape, np.float32 if float32 else np.float64)
        for j, s in enumerate(cols):
            if j in cats:
                out = wide_enough(out, len(cats[j]))
                codes = s.cat.codes.to_numpy().astype(out.dtype)
                codes[codes < 0] = np.nan
                out[:, j] = codes
            else:
                out[:, j] = s.to_numpy(dtype=out.dtype, na_value=np.nan)
        return out, names, cats
    if float32:
        out = df.to_numpy(dtype=np.float32, na_value=np.nan)
    else:
        out = df.to_numpy(dtype=np.float64, na_value=np.nan)
    return out, names, cats


def to_matrix(data, name="X", with_categories=False):
    """Return (X, feature_names), or (X, feature_names, categories) with
    ``with_categories``.

    X is float32 when the input is float32, float64 otherwise (never a float64 copy
    of float32 data); any memory order is kept.  feature_names is None for plain
    arrays.  A DataFrame's ``category`` columns (Arrow dictionary and polars
    Categorical / Enum columns alike) hold their codes (NaN for missing) and
    ``categories[j]`` their categories (``bonsai.categorical`` maps them to the model's
    codes); without ``with_categories`` they are a TypeError.
    """
    names = None
    cats = {}
    frame = None
    if is_arrow_table(data):
        frame = from_arrow
    elif is_polars_frame(data):
        frame = from_polars
    elif _is_pandas_df(data):
        frame = _from_pandas
    elif hasattr(data, "to_pandas"):   # other data frames that convert to pandas
        data = data.to_pandas()
        if _is_pandas_df(data):
            frame = _from_pandas
    if frame is not None:
        X, names, cats = frame(data)
        if cats and not with_categories:
            j = next(iter(cats))
            raise TypeError(f"X: column {names[j]!r} is categorical, but the model has no "
                            "categorical features")
    elif hasattr(data, "tocsr") and hasattr(data, "toarray"):  # scipy.sparse
        X = data.toarray()
    else:
        X = data
    if not isinstance(X, np.ndarray):
        try:
            X = np.asarray(X)
        except Exception as e:  # ragged lists and the like
            raise TypeError(f"{name}: cannot convert {type(data).__name__} to a matrix: {e}") from None
    if X.dtype.kind in "OUSVMm":
        raise TypeError(f"{name}: dtype {X.dtype} is not numeric; pass numbers (NaN for missing)")
    if X.dtype.kind == "c":
        raise TypeError(f"{name}: complex data is not supported")
    if X.ndim != 2:
        raise ValueError(f"{name} must be 2-D (n_samples, n_features), got shape {X.shape}")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise ValueError(f"{name} is empty: shape {X.shape}")
    if X.dtype != np.float32 and X.dtype != np.float64:
        X = X.astype(np.float64)
    return (X, names, cats) if with_categories else (X, names)


def take_rows(data, rows):
    """Rows ``rows`` (int64 indices) of data ``to_matrix`` accepts, in its own type:
    numpy arrays and scipy.sparse matrices by indexing, pandas by ``iloc``, Arrow tables
    by ``take``, polars by row indexing."""
    if isinstance(data, np.ndarray):
        return data[rows]
    if hasattr(data, "tocsr") and hasattr(data, "toarray"):   # scipy.sparse (COO too)
        return data.tocsr()[rows]
    if _is_pandas_df(data):
        return data.iloc[rows]
    mod = type(data).__module__
    if mod.startswith("pyarrow"):
        return data.take(rows)
    if mod.startswith("polars"):
        return data[rows]
    return np.asarray(data)[rows]


def check_vector(v, n, name, allow_negative=True, dtype=np.float64, keep_float32=False):
    """1-D finite float vector of length n, or ValueError naming ``name``.
    ``keep_float32``: a float32 vector stays float32 (no float64 copy; every consumer
    widens it exactly)."""
    if is_arrow_vector(v):
        v = arrow_vector(v)
    elif hasattr(v, "to_numpy"):
        v = v.to_numpy()
    v = np.asarray(v)
    if v.dtype.kind in "OUS":
        try:
            v = v.astype(dtype)
        except ValueError:
            raise TypeError(f"{name} must be numeric, got dtype {v.dtype}") from None
    if v.ndim == 2 and v.shape[1] == 1:
        v = v[:, 0]
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {v.shape}")
    if v.shape[0] != n:
        raise ValueError(f"{name} has {v.shape[0]} entries but the data has {n} rows")
    v = np.ascontiguousarray(v, dtype=np.float32 if keep_float32 and v.dtype == np.float32
                             else dtype)
    bad = ~np.isfinite(v)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(f"{name} contains a non-finite value ({v[i]}) at index {i}")
    if not allow_negative and (v < 0).any():
        i = int(np.flatnonzero(v < 0)[0])
        raise ValueError(f"{name} contains a negative value ({v[i]}) at index {i}")
    return v


def check_label(v, n, name="label"):
    """Labels of ``n`` rows: a 1-D vector (``check_vector``; float32 kept), or for the
    multi-output objectives an ``(n, K)`` matrix (numpy, pandas / polars DataFrame, Arrow
    table), ``K >= 2`` columns, C-contiguous, rows on axis 0.  A single column ``(n, 1)``
    becomes 1-D, as it does for every other per-row vector.  Non-finite entries are a
    ValueError naming ``name`` and the first bad ``(row, column)``."""
    if is_arrow_table(v):
        v = from_arrow(v)[0]
    elif is_polars_frame(v) or (hasattr(v, "to_numpy") and getattr(v, "ndim", 1) == 2):
        v = v.to_numpy()
    elif isinstance(v, (list, tuple)):
        v = np.asarray(v)
    if not isinstance(v, np.ndarray) or v.ndim != 2 or v.shape[1] == 1:
        return check_vector(v, n, name, keep_float32=True)
    if v.dtype.kind not in "fiub":
        raise TypeError(f"{name} must be numeric, got dtype {v.dtype}")
    if v.shape[0] != n:
        raise ValueError(f"{name} has {v.shape[0]} rows but the data has {n} rows")
    if v.shape[1] == 0:
        raise ValueError(f"{name} has shape {v.shape}: a 2-D label needs at least one column")
    v = np.ascontiguousarray(v, dtype=np.float32 if v.dtype == np.float32 else np.float64)
    bad = ~np.isfinite(v)
    if bad.any():
        i, j = (int(a) for a in np.argwhere(bad)[0])
        raise ValueError(f"{name} contains a non-finite value ({v[i, j]}) at row {i}, "
                         f"column {j}")
    return v


def check_init_score(s, n, n_outputs):
    """(n,) or (n, K) finite init scores -> (K, n) float64, a fresh array (training
    adds to it in place; the caller's scores must stay as they were)."""
    if is_arrow_vector(s):
        s = arrow_vector(s)
    elif hasattr(s, "to_numpy"):
        s = s.to_numpy()
    s = np.asarray(s, dtype=np.float64)
    if s.ndim == 1:
        s = s[:, None]
    if s.ndim != 2 or s.shape != (n, n_outputs):
        raise ValueError(f"init_score must have shape ({n},) or ({n}, {n_outputs}), got {s.shape}")
    if not np.all(np.isfinite(s)):
        raise ValueError("init_score contains a non-finite value")
    return np.array(s.T, order="C", copy=True)


def is_integer(x):
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


def is_plain_matrix(X):
    """A non-empty 2-D float32/float64 ndarray in C or F order: input that every
    check at the predict boundary would return unchanged (the one-row fast path)."""
    return (type(X) is np.ndarray and X.ndim == 2 and (X.dtype is _F32 or X.dtype is _F64)
            and X.shape[0] > 0 and (X.flags.c_contiguous or X.flags.f_contiguous))
