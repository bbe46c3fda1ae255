"""Arrow, polars and scipy.sparse input give the models numpy input gives.

pyarrow ``Table`` / ``RecordBatch`` (with ``ChunkedArray`` columns and labels),
polars ``DataFrame`` / ``Series`` and scipy.sparse matrices train byte-identical
models and predict identically to the equivalent numpy (or pandas ``category``)
input; null and NaN are both missing values; Arrow dictionary and polars
Categorical / Enum columns are categorical; other column types are a TypeError
naming the column; and Arrow / polars input needs no pandas.
"""
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

import bonsai
from bonsai.data import to_matrix

N = 600
NAMES = ["a", "b", "c", "d"]
PARAMS = {"objective": "squared_error", "n_estimators": 6, "max_depth": 3, "n_threads": 1}
PROPERTY = settings(max_examples=25, deadline=None, derandomize=True, database=None)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N, 4))
    X[:, 3] = rng.integers(0, 5, N)                      # an integer column
    X[rng.random(X.shape) < 0.1] = np.nan
    y = np.nan_to_num(X[:, 0]) + 0.5 * np.nan_to_num(X[:, 3]) + 0.1 * rng.normal(size=N)
    return X, y


def _fit(X, y, **kw):
    return bonsai.train(PARAMS, bonsai.Dataset(X, label=y, **kw))


def _arrow(X, chunks=(0, 250, N)):
    """A Table of X in several chunks; NaN as null in columns a and d (d as int64),
    as NaN in b and c."""
    parts = []
    for lo, hi in zip(chunks[:-1], chunks[1:]):
        cols = {}
        for j, name in enumerate(NAMES):
            v = X[lo:hi, j]
            miss = np.isnan(v)
            if name == "a":
                cols[name] = pa.array(v, mask=miss)
            elif name == "d":
                cols[name] = pa.array(np.nan_to_num(v).astype(np.int64), mask=miss)
            else:
                cols[name] = pa.array(v)
        parts.append(pa.table(cols))
    return pa.concat_tables(parts)


def test_arrow_table_record_batch_and_chunked_label(data):
    X, y = data
    ref = _fit(X, y, feature_names=NAMES)
    t = _arrow(X)
    assert t.column("a").num_chunks == 2 and t.column("a").null_count > 0
    label = pa.chunked_array([y[:100], y[100:]])
    m = _fit(t, label)
    assert m.feature_names == NAMES
    assert m.model_to_string() == ref.model_to_string()
    np.testing.assert_array_equal(m.predict(t), ref.predict(X))
    batch = t.combine_chunks().to_batches()[0]
    assert isinstance(batch, pa.RecordBatch)
    np.testing.assert_array_equal(ref.predict(batch), ref.predict(X))
    assert _fit(batch, pa.array(y)).model_to_string() == ref.model_to_string()


def test_arrow_float32_stays_float32(data):
    X, y = data
    X32 = X.astype(np.float32)
    t = pa.table({n: pa.array(X32[:, j]) for j, n in enumerate(NAMES)})
    Xm, names = to_matrix(t)
    assert Xm.dtype == np.float32 and names == NAMES
    np.testing.assert_array_equal(Xm, X32)
    ref = _fit(X32, y, feature_names=NAMES)
    assert _fit(t, y).model_to_string() == ref.model_to_string()
    # one float64 column: the matrix is float64
    t64 = t.set_column(0, "a", pa.array(X[:, 0]))
    assert to_matrix(t64)[0].dtype == np.float64


def test_arrow_bool_and_all_null_columns():
    t = pa.table({"b": pa.array([True, None, False, True]),
                  "n": pa.array([None] * 4, pa.null()),
                  "i": pa.array([1, 2, None, 4], pa.int8())})
    X, names = to_matrix(t)
    np.testing.assert_array_equal(X, [[1, np.nan, 1], [np.nan, np.nan, 2],
                                      [0, np.nan, np.nan], [1, np.nan, 4]])


def _categorical_frames(rng, n=N):
    """(pandas DataFrame with a category column, the same as an Arrow table whose two
    chunks have different dictionaries), numeric column x and category column k."""
    cats = ["red", "green", "blue", "grey"]
    k = rng.choice(cats, n)
    k_missing = rng.random(n) < 0.1
    x = rng.normal(size=n)
    y = x + np.select([k == "red", k == "blue"], [2.0, -1.5], 0.0) + 0.1 * rng.normal(size=n)
    pdf = pd.DataFrame({"x": x, "k": pd.Categorical(np.where(k_missing, None, k),
                                                    categories=cats)})
    h = n // 3
    chunk = lambda lo, hi, order: pa.array(                      # noqa: E731
        pd.Categorical(np.where(k_missing[lo:hi], None, k[lo:hi]), categories=order))
    col = pa.chunked_array([chunk(0, h, cats), chunk(h, n, cats[::-1])])
    assert pa.types.is_dictionary(col.type) and col.chunk(0).dictionary != col.chunk(1).dictionary
    table = pa.table({"x": pa.chunked_array([x[:h], x[h:]]), "k": col})
    return pdf, table, y


def test_arrow_dictionary_columns_are_categorical():
    pdf, table, y = _categorical_frames(np.random.default_rng(1))
    ref = _fit(pdf, y)
    m = _fit(table, y)
    assert m.categories is not None and m.categories.features == (1,)
    assert m.model_to_string() == ref.model_to_string()
    np.testing.assert_array_equal(m.predict(table), ref.predict(pdf))
    # another dictionary order, and a value the model never saw (the missing way)
    k = pc.cast(table.column("k"), pa.string()).to_pylist()
    k[:5] = ["violet"] * 5
    other = table.set_column(1, "k", pa.array(k).dictionary_encode())
    pdf2 = pdf.assign(k=pd.Categorical(k))
    np.testing.assert_array_equal(m.predict(other), ref.predict(pdf2))
    with pytest.raises(TypeError, match="'k' is categorical"):
        _fit(pdf.assign(k=pdf["k"].cat.codes.astype(float)), y).predict(table)


def test_float32_frames_with_categories_stay_float32(monkeypatch):
    """A frame whose numeric columns are all float32 converts to a float32 matrix with
    its category columns too (pandas, Arrow, polars): no float64 copy of float32 data.
    The model and predictions equal those of the float64 frame (the same values);
    one float64 column makes the matrix float64, and codes that float32 cannot hold
    exactly (past ``FLOAT32_MAX_CODES`` categories) widen it to float64."""
    import bonsai._frames as F
    pdf, _, y = _categorical_frames(np.random.default_rng(3))
    pdf32 = pdf.assign(x=pdf["x"].astype(np.float32))
    cats = list(pdf["k"].cat.categories)
    k = pdf["k"].astype(object).where(pdf["k"].notna(), None).tolist()
    frames32 = [pdf32, pa.table({"x": pdf32["x"].to_numpy(), "k": pa.array(pdf32["k"].values)}),
                pl.DataFrame({"x": pdf32["x"].to_numpy(), "k": pl.Series(k, dtype=pl.Enum(cats))})]
    ref = _fit(pdf.assign(x=pdf32["x"].astype(np.float64)), y)
    for frame in frames32:
        X, _, got_cats = to_matrix(frame, with_categories=True)
        assert X.dtype == np.float32 and list(got_cats) == [1]
        m = _fit(frame, y)
        assert m.model_to_string() == ref.model_to_string(), type(frame)
        np.testing.assert_array_equal(m.predict(frame), ref.predict(pdf))
    assert to_matrix(pdf32.assign(z=np.zeros(len(pdf), np.float64)),
                     with_categories=True)[0].dtype == np.float64
    monkeypatch.setattr(F, "FLOAT32_MAX_CODES", 3)     # 4 categories: past the limit
    for frame in frames32:
        X, _, _ = to_matrix(frame, with_categories=True)
        assert X.dtype == np.float64, type(frame)


def test_polars_frame_and_series(data):
    X, y = data
    ref = _fit(X, y, feature_names=NAMES)
    cols = {}
    for j, name in enumerate(NAMES):
        v = X[:, j]
        if name == "d":    # Int64 with nulls
            cols[name] = pl.Series(name, [None if np.isnan(e) else int(e) for e in v],
                                   dtype=pl.Int64)
        elif name == "a":  # nulls
            cols[name] = pl.Series(name, [None if np.isnan(e) else e for e in v])
        else:              # NaN
            cols[name] = pl.Series(name, v)
    df = pl.DataFrame(cols)
    assert df["a"].null_count() > 0 and df["d"].dtype == pl.Int64
    m = _fit(df, pl.Series(y))
    assert m.feature_names == NAMES and m.model_to_string() == ref.model_to_string()
    np.testing.assert_array_equal(m.predict(df), ref.predict(X))
    df32 = pl.DataFrame({n: X[:, j].astype(np.float32) for j, n in enumerate(NAMES)})
    assert to_matrix(df32)[0].dtype == np.float32
    assert _fit(df32, y).model_to_string() == _fit(X.astype(np.float32), y,
                                                   feature_names=NAMES).model_to_string()


def test_polars_categorical_and_enum_columns():
    pdf, _, y = _categorical_frames(np.random.default_rng(2))
    cats = list(pdf["k"].cat.categories)
    k = pdf["k"].astype(object).where(pdf["k"].notna(), None).tolist()
    enum = pl.DataFrame({"x": pdf["x"].to_numpy(), "k": pl.Series(k, dtype=pl.Enum(cats))})
    ref = _fit(pdf, y)
    m = _fit(enum, y)
    assert m.model_to_string() == ref.model_to_string()
    np.testing.assert_array_equal(m.predict(enum), ref.predict(pdf))
    # a Categorical column: its distinct values in ascending order are its categories
    cat = enum.with_columns(pl.col("k").cast(pl.String).cast(pl.Categorical))
    ref_sorted = _fit(pdf.assign(k=pdf["k"].cat.reorder_categories(sorted(cats))), y)
    mc = _fit(cat, y)
    assert mc.model_to_string() == ref_sorted.model_to_string()
    np.testing.assert_array_equal(mc.predict(cat), m.predict(enum))


@pytest.mark.parametrize("make,match", [
    (lambda: pa.table({"x": [1.0, 2.0], "s": ["a", "b"]}), r"column 's' has Arrow type string"),
    (lambda: pa.table({"t": pa.array([0, 1], pa.timestamp("s"))}), r"column 't' has Arrow type"),
    (lambda: pl.DataFrame({"x": [1.0, 2.0], "s": ["a", "b"]}), r"column 's' has polars dtype"),
    (lambda: pl.DataFrame({"d": pl.Series([0, 1]).cast(pl.Date)}), r"column 'd' has polars dtype"),
])
def test_unsupported_column_types_name_the_column(make, match):
    with pytest.raises(TypeError, match=match):
        bonsai.Dataset(make(), label=[0.0, 1.0])


def test_bad_labels_and_categorical_columns_are_rejected(data):
    X, y = data
    t = _arrow(X)
    with pytest.raises(ValueError, match="label contains a non-finite value"):
        bonsai.Dataset(t, label=pa.array(list(y[:-1]) + [None]))
    with pytest.raises(ValueError, match="weight contains a non-finite value"):
        bonsai.Dataset(t, label=y, weight=pl.Series([1.0] * (N - 1) + [None]))
    with pytest.raises(TypeError, match="label must be numeric"):
        bonsai.Dataset(t, label=pa.array(["x"] * N))
    with pytest.raises(ValueError, match="label has 3 entries"):
        bonsai.Dataset(t, label=pa.chunked_array([[1.0, 2.0], [3.0]]))
    with pytest.raises(ValueError, match="must be 2-D"):
        bonsai.Dataset(t.column("a"), label=y)
    with pytest.raises(TypeError, match="column 'k' is categorical, but the model has no"):
        to_matrix(pa.table({"k": pa.array(["u", "v"]).dictionary_encode()}))


def test_scipy_sparse_equals_dense():
    rng = np.random.default_rng(3)
    X = np.where(rng.random((N, 6)) < 0.7, 0.0, rng.normal(size=(N, 6)))
    y = X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=N)
    ref = _fit(X, y)
    for make in (sp.csr_matrix, sp.csc_matrix, sp.coo_matrix, sp.csr_array):
        S = make(X)
        m = _fit(S, y)
        assert m.model_to_string() == ref.model_to_string(), make.__name__
        np.testing.assert_array_equal(ref.predict(S), ref.predict(X))


def test_estimator_on_polars(data):
    X, y = data
    df = pl.DataFrame({n: X[:, j] for j, n in enumerate(NAMES)})
    est = bonsai.BonsaiRegressor(n_estimators=6, max_depth=3, n_threads=1).fit(df, pl.Series(y))
    ref = bonsai.BonsaiRegressor(n_estimators=6, max_depth=3, n_threads=1).fit(X, y)
    assert list(est.feature_names_in_) == NAMES
    np.testing.assert_array_equal(est.predict(df), ref.predict(X))


def test_arrow_and_polars_need_no_pandas(data, child_env, tmp_path):
    """In a process where pandas cannot be imported, Arrow and polars input train and
    predict, and give the numpy model."""
    X, y = data
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    code = textwrap.dedent(f"""
        import sys

        class NoPandas:                       # import pandas: ModuleNotFoundError
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] == "pandas":
                    raise ModuleNotFoundError("No module named 'pandas'", name=name)

        sys.meta_path.insert(0, NoPandas())
        import numpy as np, pyarrow as pa, polars as pl, bonsai
        X, y = np.load("X.npy"), np.load("y.npy")
        names = {NAMES!r}
        params = {PARAMS!r}
        ref = bonsai.train(params, bonsai.Dataset(X, label=y, feature_names=names))
        t = pa.table({{n: pa.array(X[:, j]) for j, n in enumerate(names)}})
        df = pl.DataFrame({{n: X[:, j] for j, n in enumerate(names)}})
        for data in (t, df):
            m = bonsai.train(params, bonsai.Dataset(data, label=y))
            assert m.model_to_string() == ref.model_to_string(), type(data)
            assert np.array_equal(m.predict(data), ref.predict(X)), type(data)
        assert "pandas" not in sys.modules
        print("ok")
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300, cwd=str(tmp_path), env=child_env)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-3000:]


# ---- property: every input format gives the same matrix --------------------------------

@st.composite
def _columns(draw):
    n = draw(st.integers(1, 30))
    n_cols = draw(st.integers(1, 4))
    kinds = draw(st.lists(st.sampled_from(["f64", "f32", "i64", "bool"]), min_size=n_cols,
                          max_size=n_cols))
    cols = []
    for kind in kinds:
        if kind in ("f64", "f32"):
            width = 64 if kind == "f64" else 32
            vals = draw(st.lists(st.floats(allow_infinity=True, allow_nan=True, width=width),
                                 min_size=n, max_size=n))
        elif kind == "i64":
            vals = draw(st.lists(st.integers(-2 ** 40, 2 ** 40), min_size=n, max_size=n))
        else:
            vals = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        null = draw(st.lists(st.booleans(), min_size=n, max_size=n))
        cols.append((kind, vals, null))
    return cols


_NP = {"f64": np.float64, "f32": np.float32, "i64": np.int64, "bool": np.bool_}
_PL = {"f64": pl.Float64, "f32": pl.Float32, "i64": pl.Int64, "bool": pl.Boolean}


@PROPERTY
@given(_columns())
def test_arrow_polars_and_numpy_give_the_same_matrix(cols):
    names = [f"c{j}" for j in range(len(cols))]
    expect = np.empty((len(cols[0][1]), len(cols)))
    arrow, polars = {}, {}
    for j, (kind, vals, null) in enumerate(cols):
        v = np.array(vals, dtype=_NP[kind])
        expect[:, j] = np.where(null, np.nan, v.astype(np.float64))
        arrow[names[j]] = pa.array(v, mask=np.array(null))
        polars[names[j]] = pl.Series(names[j], [None if m else e for e, m in zip(v.tolist(), null)],
                                     dtype=_PL[kind])
    all32 = all(kind == "f32" for kind, _, _ in cols)
    for frame in (pa.table(arrow), pa.table(arrow).to_batches()[0], pl.DataFrame(polars)):
        X, got_names = to_matrix(frame)
        assert got_names == names
        assert X.dtype == (np.float32 if all32 else np.float64)
        np.testing.assert_array_equal(X, expect.astype(X.dtype))
