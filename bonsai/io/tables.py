"""Data files for the command line: read CSV, TSV, Parquet and LibSVM tables, pick a
model's feature, label and weight columns out of them, and write predictions as CSV
or Parquet.

Formats (``detect_format``: from the name, ``.gz`` allowed, or given explicitly):

* ``csv`` -- comma-separated with a header row (``header=False``: none, columns are
  then named by position); read with pandas, floats parsed exactly
  (pandas >= 3 does by default, older ones with ``float_precision="round_trip"``), so a CSV written with ``repr`` floats gives the
  same numbers as the arrays it came from.
* ``tsv`` -- tab-separated numbers without a header (LightGBM's example files, label
  in column 0); read with numpy (``header=True``: with pandas, like CSV).
* ``parquet`` -- read with pandas (through pyarrow).
* ``libsvm`` -- ``label index:value ...`` lines, read by a small numpy reader (so no
  scikit-learn is needed): column 0 of the table is the label, feature ``j`` (the index
  as written, 0-based, as LightGBM and XGBoost read it) is column ``j + 1``; absent
  entries are 0.0, the format's meaning (as in LightGBM).

Columns are named by their header names, or by 0-based positions in the file (an
``int``).  pandas and pyarrow are imported only when a format needs them.
"""
import gzip
import importlib
import os
from typing import NamedTuple

import numpy as np

FORMATS = ("csv", "tsv", "parquet", "libsvm")
_SUFFIXES = {".csv": "csv", ".tsv": "tsv", ".parquet": "parquet", ".pq": "parquet",
             ".libsvm": "libsvm", ".svm": "libsvm", ".svmlight": "libsvm"}
OUT_FORMATS = ("csv", "parquet")


def _need(module, what):
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ImportError(f"{what} needs the {module!r} package: pip install {module}") from None


class Table(NamedTuple):
    """A data file: ``data`` (a pandas DataFrame, or a float64 ndarray for
    headerless files), ``names`` (column names, or None), ``fmt``, ``path``."""
    data: object
    names: list
    fmt: str
    path: str

    @property
    def n_columns(self):
        return self.data.shape[1]


def detect_format(path, fmt=None):
    """The format of ``path``: ``fmt`` when given, else from its suffix (``.gz``
    stripped); files without a known suffix (``binary.train``) are sniffed: a
    ``k:v`` token after the first field means LibSVM, a tab TSV, a comma CSV."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ValueError(f"format must be one of {FORMATS}, got {fmt!r}")
        return fmt
    name = os.fspath(path)
    base = name[:-3] if name.endswith(".gz") else name
    suffix = os.path.splitext(base)[1].lower()
    if suffix in _SUFFIXES:
        return _SUFFIXES[suffix]
    if suffix in (".json", ".txt", ".onnx"):
        raise ValueError(f"{name}: cannot tell the data format from the suffix {suffix!r}; "
                         f"give the format ({', '.join(FORMATS)})")
    line = _first_line(name)
    fields = line.split()
    if len(fields) > 1 and all(":" in f for f in fields[1:]):
        return "libsvm"
    if "\t" in line:
        return "tsv"
    if "," in line:
        return "csv"
    raise ValueError(f"{name}: cannot tell the data format (not CSV, TSV or LibSVM); give "
                     f"the format ({', '.join(FORMATS)})")


def _open_text(path):
    return gzip.open(path, "rt") if os.fspath(path).endswith(".gz") else open(path)


def _first_line(path):
    with _open_text(path) as fh:
        for line in fh:
            if line.strip() and not line.startswith("#"):
                return line.rstrip("\n")
    raise ValueError(f"{path}: the file is empty")


def read_table(path, fmt=None, header=None):
    """Read a data file into a :class:`Table` (see the module docstring)."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "no such file", path)
    fmt = detect_format(path, fmt)
    if header is None:
        header = fmt == "csv"
    if fmt == "libsvm":
        return Table(read_libsvm(path), None, fmt, path)
    if fmt == "parquet":
        pd = _need("pandas", "reading Parquet")
        _need("pyarrow", "reading Parquet")
        df = pd.read_parquet(path)
        df.columns = [str(c) for c in df.columns]
        return Table(df, list(df.columns), fmt, path)
    if fmt == "tsv" and not header:
        try:
            a = np.loadtxt(path, delimiter="\t", dtype=np.float64, ndmin=2)
        except ValueError as e:
            raise ValueError(f"{path}: not a numeric TSV file ({e})") from None
        if a.size == 0:
            raise ValueError(f"{path}: the file is empty")
        return Table(a, None, fmt, path)
    pd = _need("pandas", f"reading {fmt.upper()} files")
    # pandas >= 3 parses floats exactly by default (and deprecates the argument)
    exact = {} if int(pd.__version__.split(".")[0]) >= 3 else {"float_precision": "round_trip"}
    try:
        df = pd.read_csv(path, sep="," if fmt == "csv" else "\t", header=0 if header else None,
                         **exact)
    except pd.errors.EmptyDataError:
        raise ValueError(f"{path}: the file is empty") from None
    except pd.errors.ParserError as e:
        raise ValueError(f"{path}: not a valid {fmt.upper()} file ({e})") from None
    if df.shape[0] == 0:
        raise ValueError(f"{path}: the file has no rows")
    if not header:
        return Table(df.to_numpy(dtype=np.float64), None, fmt, path)
    df.columns = [str(c) for c in df.columns]
    return Table(df, list(df.columns), fmt, path)


def read_libsvm(path):
    """A LibSVM file as a float64 array: column 0 the labels, column ``j + 1``
    feature ``j``; absent entries 0.0 (``qid:`` tokens are not supported)."""
    labels, rows, cols, vals = [], [], [], []
    with _open_text(path) as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            fields = line.split()
            try:
                labels.append(float(fields[0]))
                for tok in fields[1:]:
                    j, v = tok.split(":")
                    if j == "qid":
                        raise ValueError("qid tokens (ranking) are not supported")
                    cols.append(int(j))
                    vals.append(float(v))
                    rows.append(len(labels) - 1)
            except ValueError as e:
                raise ValueError(f"{path}: line {lineno} is not LibSVM "
                                 f"('label index:value ...'): {e}") from None
    if not labels:
        raise ValueError(f"{path}: the file is empty")
    cols = np.asarray(cols, np.int64)
    if cols.size and cols.min() < 0:
        raise ValueError(f"{path}: a feature index is negative")
    width = int(cols.max()) + 1 if cols.size else 0
    out = np.zeros((len(labels), width + 1))
    out[:, 0] = labels
    out[np.asarray(rows, np.int64), cols + 1] = vals
    return out


def _column(table, spec, what):
    """The 0-based position of column ``spec`` (a name or a position)."""
    if isinstance(spec, bool) or not isinstance(spec, (str, int)):
        raise TypeError(f"{what} must be a column name or a 0-based column position, got "
                        f"{spec!r}")
    if isinstance(spec, int):
        if not 0 <= spec < table.n_columns:
            raise ValueError(f"{what}: column {spec} is outside the {table.n_columns} columns "
                             f"of {table.path}")
        return spec
    if table.names is None:
        raise ValueError(f"{what}: {table.path} has no header row, so name the column by its "
                         f"0-based position, not {spec!r}")
    if spec not in table.names:
        shown = ", ".join(table.names[:8]) + (", ..." if len(table.names) > 8 else "")
        raise ValueError(f"{what}: column {spec!r} is not in {table.path} (columns: {shown})")
    return table.names.index(spec)


def _vector(table, pos):
    if table.names is None:
        return table.data[:, pos]
    return table.data.iloc[:, pos].to_numpy()


def label_vector(table, label=None):
    """The label column of ``table`` (``label``: a name or position; default column 0
    of a headerless file), or None when a table with a header has no such column."""
    if label is None:
        if table.names is not None:
            return None
        label = 0
    if isinstance(label, str) and (table.names is None or label not in table.names):
        return None
    return _vector(table, _column(table, label, "label"))


def split_xy(table, label=None, weight=None, categorical=(), need_label=True, group=None):
    """``(X, y, w, cat_positions)`` of a table: ``X`` the columns other than the label,
    weight and ``group`` (query id) ones (a DataFrame whose ``categorical`` columns are
    pandas ``category`` columns, or an ndarray), ``cat_positions`` the feature
    positions of the categorical columns of an ndarray ``X`` (empty for DataFrames).
    The query ids themselves: ``label_vector(table, group)``."""
    if label is None and table.names is None:
        label = 0               # LightGBM's layout: the label first
    if label is None and need_label:
        raise ValueError(f"{table.path}: name the label column (label = ...)")
    drop = []
    y = w = None
    if label is not None:
        pos = _column(table, label, "label")
        y, drop = _vector(table, pos), [pos]
    if weight is not None:
        pos = _column(table, weight, "weight")
        if pos in drop:
            raise ValueError("weight: the weight column is the label column")
        w = _vector(table, pos)
        drop.append(pos)
    if group is not None:
        pos = _column(table, group, "group")
        if pos in drop:
            raise ValueError("group: the query id column is the label or weight column")
        drop.append(pos)
    cats = [_column(table, c, "categorical") for c in categorical]
    if set(cats) & set(drop):
        raise ValueError("categorical: the label, weight or group column is listed")
    keep = [j for j in range(table.n_columns) if j not in drop]
    if not keep:
        raise ValueError(f"{table.path}: no feature columns besides the label and weight")
    if table.names is None:
        return (np.ascontiguousarray(table.data[:, keep]), y, w,
                [keep.index(c) for c in cats])
    df = table.data.iloc[:, keep].copy()
    _as_categories(df, [table.names[c] for c in cats])
    return df, y, w, []


def _as_categories(df, names):
    """Make columns ``names`` pandas ``category`` columns, and reject other
    non-numeric columns with a hint (in place)."""
    pd = _need("pandas", "categorical columns")
    for c in names:
        if not isinstance(df[c].dtype, pd.CategoricalDtype):
            df[c] = df[c].astype("category")
    for c in df.columns:
        dt = df[c].dtype
        if not (isinstance(dt, pd.CategoricalDtype) or pd.api.types.is_numeric_dtype(dt)
                or pd.api.types.is_bool_dtype(dt)):
            raise ValueError(f"column {c!r} is not numeric (dtype {dt}); list it in "
                             "[data] categorical, or drop it from the file")


def model_features(table, booster, label=None, weight=None, group=None):
    """The columns of ``table`` a model predicts from.

    With header names and a model that has feature names, its features are taken by
    name (the other columns, a label among them, are ignored).  Otherwise the columns
    other than ``label`` are the features, in order: ``label`` defaults to column 0
    in a headerless file (the label of LightGBM's TSV files and of LibSVM), ``"none"``
    when it has no label column; a LibSVM table narrower than the model is padded with
    0.0 (features no row mentions).  ``weight`` and ``group`` columns are left out too.  The model's categorical columns of a DataFrame
    become pandas ``category`` columns.
    """
    names = booster.feature_names
    cat = [] if booster.categories is None else list(booster.categories.features)
    if table.names is not None and names is not None:
        missing = [f for f in names if f not in table.names]
        if missing:
            raise ValueError(f"{table.path} lacks the model's feature columns "
                             f"{missing[:5]}{' ...' if len(missing) > 5 else ''}")
        df = table.data[list(names)].copy()
        _as_categories(df, [names[j] for j in cat])
        return df
    if label is None and table.names is None:
        label = 0
    drop = [] if label is None or label == "none" else [_column(table, label, "--label")]
    if weight is not None:
        drop.append(_column(table, weight, "weight"))
    if group is not None:
        drop.append(_column(table, group, "group"))
    keep = [j for j in range(table.n_columns) if j not in drop]
    if table.names is None:
        X = table.data[:, keep]
        if table.fmt == "libsvm" and X.shape[1] < booster.n_features:
            X = np.hstack([X, np.zeros((X.shape[0], booster.n_features - X.shape[1]))])
    else:
        X = table.data.iloc[:, keep].copy()
        _as_categories(X, [X.columns[j] for j in cat if j < X.shape[1]])
    if X.shape[1] != booster.n_features:
        hint = "; pass --label none if the file has no label column" if drop else ""
        raise ValueError(f"{table.path} has {X.shape[1]} feature columns"
                         f"{' besides the label column' if drop else ''}, but the model has "
                         f"{booster.n_features} features{hint}")
    return X


def output_format(path):
    """``csv`` or ``parquet``, from the output file's suffix."""
    suffix = os.path.splitext(os.fspath(path))[1].lower()
    fmt = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}.get(suffix)
    if fmt is None:
        raise ValueError(f"{path}: the output must be a .csv or .parquet file")
    return fmt


def prediction_columns(pred, prefix="prediction"):
    """Column names for a prediction array: one column, or ``prefix_k`` per output."""
    if pred.ndim == 1:
        return [prefix]
    return [f"{prefix}_{k}" for k in range(pred.shape[1])]


def write_table(path, columns, arrays):
    """Write equal-length 1-D arrays as named columns to a CSV file (floats as
    shortest round-trip text) or a Parquet file (pyarrow)."""
    fmt = output_format(path)
    if fmt == "parquet":
        pa = _need("pyarrow", "writing Parquet")
        import pyarrow.parquet as pq
        pq.write_table(pa.table({c: np.asarray(a) for c, a in zip(columns, arrays)}), path)
        return
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(",".join(columns) + "\n")
        for row in zip(*arrays):
            fh.write(",".join(repr(float(v)) for v in row) + "\n")


def write_predictions(path, pred, prefix="prediction"):
    """Write a prediction array ((n,) or (n, K)) to ``path`` (CSV or Parquet)."""
    pred = np.asarray(pred, dtype=np.float64)
    cols = prediction_columns(pred, prefix)
    arrays = [pred] if pred.ndim == 1 else [pred[:, k] for k in range(pred.shape[1])]
    write_table(path, cols, arrays)
