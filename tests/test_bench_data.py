"""The benchmark data generators of ``benchmarks/_families.py`` and
``benchmarks/_small_data.py`` (issue 18): deterministic, and the column kinds, levels
and missing fractions their docstrings promise (small row counts, no caching)."""
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import _common as C  # noqa: E402
import _families as F  # noqa: E402
import _small_data as S  # noqa: E402


def _gen(name, n):
    d = C.DATASETS[name]
    return d.gen(n=n, d=d.features)


@pytest.mark.parametrize("family", ["bernoulli", "heavy"])
@pytest.mark.parametrize("base", ["higgs", "year", "higgs-missing", "multiclass"])
def test_family_data_sets_are_deterministic_and_shaped(family, base):
    name = F.data_name(base, family)
    X1, y1 = _gen(name, 3000)
    X2, y2 = _gen(name, 3000)
    assert X1.tobytes() == X2.tobytes() and y1.tobytes() == y2.tobytes()
    ref = C.DATASETS[base]
    assert X1.shape == (3000, ref.features) and X1.dtype == np.float32
    nan = np.isnan(X1).mean()
    assert (0.38 < nan < 0.42) if base == "higgs-missing" else nan == 0.0
    if ref.task == "binary":
        assert set(np.unique(y1)) == {0.0, 1.0} and 0.3 < y1.mean() < 0.7
    if ref.task == "multiclass":
        assert set(np.unique(y1)) == set(range(10))


def test_bernoulli_column_kinds():
    X, y = _gen("higgs-bernoulli", 20_000)
    half, expo = X[:, 10:19], X[:, 19:28]
    assert half.min() >= 0 and expo.min() >= 0
    assert abs(float(half.mean()) - np.sqrt(2 / np.pi)) < 0.03   # E|z|
    assert abs(float(expo.mean()) - 1.0) < 0.05                  # Exp(1)
    assert X[:, :10].min() < 0 and abs(float(X[:, :10].mean())) < 0.03
    assert 0.3 < y.mean() < 0.7


def test_heavy_columns_have_heavy_tails_and_duplicates():
    X, _ = _gen("higgs-heavy", 20_000)
    for j in range(X.shape[1]):
        col, kind = X[:, j], j % 6
        if kind == 0:                                   # Student-t: heavy tails
            assert np.abs(col).max() > 15
        elif kind in (1, 2):                            # log-normal, Pareto: > 0, skewed
            assert col.min() > 0 and col.max() > 50 * np.median(col)
        elif kind == 3:                                 # integer counts
            assert np.all(col == np.floor(col)) and len(np.unique(col)) < 300
        elif kind == 4:                                 # rounded to 0.5
            assert np.all(2 * col == np.floor(2 * col)) and len(np.unique(col)) < 200
        else:                                           # few levels
            assert len(np.unique(col)) == F._LEVELS[(j // 6) % len(F._LEVELS)] < 20


def test_family_names_are_checked():
    assert F.data_name("higgs", "default") == "higgs"
    with pytest.raises(ValueError, match="family"):
        F.data_name("higgs", "gaussian")


@pytest.mark.parametrize("entry", list(S.GENERATED))
def test_small_suite_entries(entry):
    gen, e = S.GENERATED[entry]
    X, y = gen(n=5000, d=e.features)
    X2, y2 = gen(n=5000, d=e.features)
    assert X.tobytes() == X2.tobytes() and y.tobytes() == y2.tobytes()
    assert X.shape == (5000, e.features)
    for j in e.cat_cols:
        codes = X[:, j][~np.isnan(X[:, j])]
        assert np.all(codes == np.floor(codes)) and codes.min() >= 0
        assert 3 <= len(np.unique(codes)) <= 4000
    if e.task == "multiclass":
        assert set(np.unique(y)) == set(range(e.n_classes))
    dtr, dte = S.frames(X[:4000], X[4000:], e.cat_cols)
    assert [str(t) for t in dtr.dtypes].count("category") == len(e.cat_cols)
    assert list(dtr.columns) == list(dte.columns)


def test_small_suite_missing_and_cardinality():
    X, _ = S.reg_nan91(n=20_000)
    assert 0.89 < np.isnan(X[:, 20]).mean() < 0.93
    X, _ = S.bin_cat4k(n=50_000)
    assert len(np.unique(X[:, 9][~np.isnan(X[:, 9])])) > 2500
    assert 0.01 < np.isnan(X[:, 9]).mean() < 0.03
