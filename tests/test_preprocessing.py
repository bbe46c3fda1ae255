"""``bonsai.preprocessing.OrderedTargetEncoder``: scikit-learn compatibility, the
ordered (leave-future-out) statistics against a plain-Python reference, full-data
statistics, missing and unseen categories, determinism."""
import numpy as np
import pandas as pd
import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from bonsai.preprocessing import OrderedTargetEncoder

_BY_DESIGN = ("fit_transform returns ordered target statistics (each row encoded with "
              "the rows before it in a permutation, so its own target never leaks in); "
              "transform returns the statistics of all training rows, as used at "
              "predict time: the two differ on purpose")


@parametrize_with_checks([OrderedTargetEncoder()], expected_failed_checks=lambda est: {
    "check_transformer_general": _BY_DESIGN,
    "check_transformer_data_not_an_array": _BY_DESIGN})
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _reference_ordered(col, t, perms, prior, a):
    """Plain-Python ordered statistics averaged over the permutations."""
    out = np.zeros((len(col), t.shape[1]))
    for perm in perms:
        sums, counts = {}, {}
        for i in perm:
            v = col[i]
            if v is None:
                out[i] += prior
                continue
            s = sums.get(v, np.zeros(t.shape[1]))
            c = counts.get(v, 0)
            out[i] += (s + prior * a) / (c + a)
            sums[v] = s + t[i]
            counts[v] = c + 1
    return out / len(perms)


@pytest.mark.parametrize("kind", ["binary", "multiclass", "continuous"])
def test_ordered_statistics_match_reference(kind):
    rng = np.random.default_rng(1)
    n = 400
    col = rng.choice(["a", "b", "c", "d", None], n).tolist()
    if kind == "binary":
        y = rng.integers(0, 2, n)
        t = y.reshape(-1, 1).astype(float)
    elif kind == "multiclass":
        y = rng.choice(["p", "q", "r"], n)
        t = (y.reshape(-1, 1) == np.array(["p", "q", "r"])).astype(float)
    else:
        y = rng.normal(size=n)
        t = y.reshape(-1, 1)
    X = pd.DataFrame({"c": col})
    enc = OrderedTargetEncoder(n_permutations=3, prior_weight=2.0, random_state=7)
    got = enc.fit_transform(X, y)
    rs = np.random.RandomState(7)
    perms = [rs.permutation(n) for _ in range(3)]
    want = _reference_ordered(col, t, perms, t.mean(axis=0), 2.0)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert got.shape == (n, t.shape[1])
    # the first row of each category in a permutation sees only the prior, so no row's
    # own target is in its encoding: for a category seen once it is exactly the prior
    X1 = pd.DataFrame({"c": ["only"] + ["z"] * (n - 1)})
    z = enc.fit_transform(X1, y)
    np.testing.assert_allclose(z[0], t.mean(axis=0))


def test_transform_uses_full_statistics_missing_and_unseen():
    X = pd.DataFrame({"city": ["a", "a", "b", "b", "b", None], "n": [1, 1, 2, 2, 3, 3]})
    y = np.array([1, 0, 1, 1, 1, 0])
    enc = OrderedTargetEncoder(prior_weight=1.0).fit(X, y)
    prior = y.mean()
    out = enc.transform(pd.DataFrame({"city": ["a", "b", "zzz", None], "n": [1, 3, 99, np.nan]}))
    np.testing.assert_allclose(out[:, 0], [(1 + prior) / 3, (3 + prior) / 4, prior, prior])
    np.testing.assert_allclose(out[:, 1], [(1 + prior) / 3, (1 + prior) / 3, prior, prior])
    assert list(enc.get_feature_names_out()) == ["city", "n"]
    assert [list(c) for c in enc.categories_] == [["a", "b"], [1.0, 2.0, 3.0]]


def test_multiclass_feature_names_and_shape():
    X = np.array([[0], [1], [1], [2]], dtype=float)
    y = np.array(["u", "v", "w", "u"])
    enc = OrderedTargetEncoder().fit(X, y)
    assert list(enc.get_feature_names_out(["f"])) == ["f_u", "f_v", "f_w"]
    assert enc.transform(X).shape == (4, 3)
    np.testing.assert_allclose(enc.transform(X).sum(axis=1), 1.0)   # class rates sum to 1


def test_deterministic_given_random_state():
    rng = np.random.default_rng(0)
    X = rng.integers(0, 30, (500, 3)).astype(float)
    y = rng.integers(0, 2, 500)
    a = OrderedTargetEncoder(random_state=3).fit_transform(X, y)
    b = OrderedTargetEncoder(random_state=3).fit_transform(X, y)
    c = OrderedTargetEncoder(random_state=4).fit_transform(X, y)
    assert a.tobytes() == b.tobytes()
    assert not np.array_equal(a, c)


@pytest.mark.parametrize("params, match", [
    ({"n_permutations": 0}, "n_permutations"),
    ({"prior_weight": 0.0}, "prior_weight"),
    ({"prior_weight": float("nan")}, "prior_weight"),
    ({"target_type": "ranking"}, "target_type"),
])
def test_bad_parameters_name_themselves(params, match):
    with pytest.raises(ValueError, match=match):
        OrderedTargetEncoder(**params).fit(np.zeros((4, 1)), [0, 1, 0, 1])


def test_nan_label_is_an_error():
    with pytest.raises(ValueError, match="y contains NaN"):
        OrderedTargetEncoder(target_type="binary").fit(np.zeros((4, 1)), [0.0, 1.0, np.nan, 1.0])
    with pytest.raises(ValueError, match="y contains NaN"):
        OrderedTargetEncoder().fit_transform(np.zeros((3, 1)), [0.5, np.nan, 1.5])
    with pytest.raises(ValueError, match="y contains infinity"):
        OrderedTargetEncoder().fit(np.zeros((3, 1)), [0.5, np.inf, 1.5])
