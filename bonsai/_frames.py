"""Arrow and polars input, read column by column without pandas: a pyarrow ``Table``
or ``RecordBatch`` or a polars ``DataFrame`` becomes ``(X, names, categories)`` as
``bonsai.data.to_matrix`` returns it for pandas.

Numeric and boolean columns become floats with nulls (and NaN) as missing values;
the matrix is float32 when every column is float32, float64 otherwise.  Arrow
dictionary columns and polars ``Categorical`` / ``Enum`` columns are categorical:
X holds each value's position in ``categories[j]`` (NaN for null).  The categories are
the Arrow dictionary (unified over the chunks), the polars Enum's categories, or a
polars Categorical's distinct values in ascending order.  Any other column type
(strings, dates, nested) is a TypeError naming the column.  pyarrow and polars are
never imported here unless the caller's object comes from them.
"""
import numpy as np


def is_arrow_table(data):
    if not type(data).__module__.startswith("pyarrow"):
        return False
    import pyarrow as pa
    return isinstance(data, (pa.Table, pa.RecordBatch))


def is_arrow_vector(v):
    if not type(v).__module__.startswith("pyarrow"):
        return False
    import pyarrow as pa
    return isinstance(v, (pa.Array, pa.ChunkedArray))


def is_polars_frame(data):
    if not type(data).__module__.startswith("polars"):
        return False
    import polars as pl
    return isinstance(data, pl.DataFrame)


def _fill(n_rows, n_cols, dtype):
    return np.empty((n_rows, n_cols), dtype=dtype, order="F")


#: category columns hold their codes as floats: float32 holds every code exactly up
#: to 2**24 categories
FLOAT32_MAX_CODES = 1 << 24


def wide_enough(X, n_codes):
    """``X``, or its float64 copy when it is float32 and ``n_codes`` codes would not all
    be exact in it (more than ``FLOAT32_MAX_CODES``)."""
    if X.dtype == np.float32 and n_codes > FLOAT32_MAX_CODES:
        return X.astype(np.float64, order="K")
    return X


# ---- Arrow --------------------------------------------------------------------------

def _arrow_floats(col, dtype):
    """A numeric / boolean / null Arrow array or chunked array -> float ndarray, null -> NaN."""
    import pyarrow as pa
    import pyarrow.compute as pc
    target = pa.float32() if dtype == np.float32 else pa.float64()
    col = pc.fill_null(pc.cast(col, target, safe=False), float("nan"))
    return np.asarray(col.to_numpy(), dtype=dtype)


def arrow_vector(v):
    """A 1-D Arrow array (labels, weights) -> float64 ndarray with NaN for null."""
    import pyarrow as pa
    if not (pa.types.is_integer(v.type) or pa.types.is_floating(v.type)
            or pa.types.is_boolean(v.type) or pa.types.is_decimal(v.type)):
        return np.asarray(v.to_pylist(), dtype=object)   # the caller rejects it by dtype
    return _arrow_floats(v, np.float64)


def _arrow_codes(col):
    """(codes float64 with NaN for null, categories) of a dictionary column."""
    import pyarrow as pa
    if isinstance(col, pa.Array):
        col = pa.chunked_array([col], type=col.type)
    col = col.unify_dictionaries()
    if col.num_chunks == 0:
        return np.empty(0), []
    cats = col.chunk(0).dictionary.to_pylist()
    idx = pa.chunked_array([c.indices for c in col.chunks], type=col.type.index_type)
    return _arrow_floats(idx, np.float64), cats


def from_arrow(table):
    import pyarrow as pa
    names = [str(c) for c in table.schema.names]
    types = [f.type for f in table.schema]
    numeric = (pa.types.is_integer, pa.types.is_floating, pa.types.is_boolean,
               pa.types.is_decimal, pa.types.is_null)
    for name, t in zip(names, types):
        if not (pa.types.is_dictionary(t) or any(f(t) for f in numeric)):
            raise TypeError(
                f"X: column {name!r} has Arrow type {t}; bonsai needs numeric columns (int, "
                "float or bool; null or NaN for missing) or dictionary columns for "
                "categories (pyarrow.compute.dictionary_encode(column))")
    # float32 when every numeric column is (category codes are exact in it)
    float32 = bool(types) and all(t == pa.float32() for t in types
                                  if not pa.types.is_dictionary(t))
    X = _fill(table.num_rows, len(names), np.float32 if float32 else np.float64)
    cats = {}
    for j, t in enumerate(types):
        col = table.column(j)
        if pa.types.is_dictionary(t):
            codes, cats[j] = _arrow_codes(col)
            X = wide_enough(X, len(cats[j]))
            X[:, j] = codes
        else:
            X[:, j] = _arrow_floats(col, X.dtype)
    return X, names, cats


# ---- polars -------------------------------------------------------------------------

def from_polars(df):
    import polars as pl
    names = [str(c) for c in df.columns]
    dtypes = list(df.dtypes)
    for name, dt in zip(names, dtypes):
        if not (dt.is_numeric() or dt == pl.Boolean or dt == pl.Null
                or isinstance(dt, (pl.Categorical, pl.Enum))):
            raise TypeError(
                f"X: column {name!r} has polars dtype {dt}; bonsai needs numeric columns "
                "(int, float or bool; null or NaN for missing) or Categorical / Enum "
                "columns for categories (pl.col(name).cast(pl.Categorical))")
    # float32 when every numeric column is (category codes are exact in it)
    float32 = bool(dtypes) and all(dt == pl.Float32 for dt in dtypes
                                   if not isinstance(dt, (pl.Categorical, pl.Enum)))
    X = _fill(df.height, len(names), np.float32 if float32 else np.float64)
    cats = {}
    for j, (name, dt) in enumerate(zip(names, dtypes)):
        s = df.get_column(name)
        if isinstance(dt, (pl.Categorical, pl.Enum)):
            if isinstance(dt, pl.Enum):
                values = pl.Series(dt.categories).to_list()
            else:
                values = s.drop_nulls().unique().cast(pl.String).sort().to_list()
                s = s.cast(pl.String).cast(pl.Enum(values))
            X = wide_enough(X, len(values))
            X[:, j] = s.to_physical().cast(pl.Float64).fill_null(float("nan")).to_numpy()
            cats[j] = values
        else:
            X[:, j] = s.cast(pl.Float32 if float32 else pl.Float64).fill_null(
                float("nan")).to_numpy()
    return X, names, cats
