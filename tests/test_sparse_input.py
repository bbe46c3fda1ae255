"""scipy.sparse input trained and predicted from its non-zeros (``bonsai.sparse``):
the same bin edges and trees as the dense matrix on real sparse data (agaricus,
LightGBM's rank example), implicit zeros as the value 0 and explicit NaN as missing,
no dense matrix in fit or predict (a child under an address-space cap far below the
dense size), and the model's save / load / pickle / predict in a fresh process.
"""
import gzip
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_svmlight_files

import bonsai
from bonsai.sparse import SparseBins

from conftest import TEST_DATA, _existing


def _libsvm(name):
    """(X_train CSR, y_train, X_test CSR, y_test) of ``tests/data/<name>.{train,test}.gz``
    (one column count for both)."""
    files = [_existing(TEST_DATA / f"{name}.{part}.gz") for part in ("train", "test")]
    with gzip.open(files[0], "rb") as a, gzip.open(files[1], "rb") as b:
        Xa, ya, Xb, yb = load_svmlight_files([a, b], dtype=np.float64)
    return Xa.tocsr(), ya, Xb.tocsr(), yb


@pytest.fixture(scope="module", params=["agaricus.txt", "rank"])
def real(request):
    return (request.param,) + _libsvm(request.param)


def _params(name, **kw):
    p = {"objective": "binary" if name.startswith("agaricus") else "squared_error",
         "max_depth": 6, "learning_rate": 0.3, "n_threads": 2}
    p.update(kw)
    return p


@pytest.mark.parametrize("policy", ["depthwise", "leafwise"])
def test_real_sparse_data_gives_the_dense_trees(real, policy):
    name, X, y, Xt, yt = real
    D, Dt = X.toarray(), Xt.toarray()
    p = _params(name, grow_policy=policy, subsample=0.8)
    ds = bonsai.Dataset(X, label=y)
    assert ds.is_sparse and isinstance(ds.X_cols, SparseBins)
    dd = bonsai.Dataset(D, label=y)
    assert ds.bin_mapper.to_dict() == dd.bin_mapper.to_dict()
    m = bonsai.train(p, ds, num_boost_round=8,
                     valid_sets=[bonsai.Dataset(Xt, label=yt, reference=ds)])
    ref = bonsai.train(p, dd, num_boost_round=8,
                       valid_sets=[bonsai.Dataset(Dt, label=yt, reference=dd)])
    assert m.model_to_string() == ref.model_to_string()
    assert m.evals_result == ref.evals_result
    np.testing.assert_array_equal(m.predict(Xt), ref.predict(Dt))
    np.testing.assert_array_equal(m.predict(Xt.tocsc(), pred_leaf=True),
                                  ref.predict(Dt, pred_leaf=True))


def test_oblivious_multiclass_and_continued_training_on_sparse():
    rng = np.random.default_rng(1)
    n, f = 2500, 40
    S = sp.random(n, f, density=0.15, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.normal(size=k))
    D = S.toarray()
    y = (D[:, 0] > 0).astype(int) + (D[:, 1] + D[:, 2] > 0.3)
    p = {"objective": "multiclass", "num_class": 3, "grow_policy": "oblivious",
         "max_depth": 4, "n_threads": 1}
    m = bonsai.train(p, bonsai.Dataset(S, label=y), num_boost_round=4)
    ref = bonsai.train(p, bonsai.Dataset(D, label=y), num_boost_round=4)
    assert m.model_to_string() == ref.model_to_string()
    np.testing.assert_array_equal(m.predict(S), ref.predict(D))
    # continued training reads the sparse raw data's margins
    m2 = bonsai.train(p, bonsai.Dataset(S, label=y), num_boost_round=2, init_model=m)
    r2 = bonsai.train(p, bonsai.Dataset(D, label=y), num_boost_round=2, init_model=ref)
    assert m2.model_to_string() == r2.model_to_string()


def test_implicit_zero_is_zero_and_explicit_nan_is_missing():
    rng = np.random.default_rng(2)
    n = 3000
    D = np.where(rng.random((n, 5)) < 0.6, 0.0, rng.normal(size=(n, 5)))
    D[rng.random((n, 5)) < 0.1] = np.nan
    S = sp.csr_matrix(D)           # NaN entries are stored; zeros are not
    assert np.isnan(S.data).any() and not (S.data == 0).any()
    y = np.nan_to_num(D[:, 0], nan=2.0) - np.nan_to_num(D[:, 1]) + 0.1 * rng.normal(size=n)
    p = {"objective": "squared_error", "max_depth": 4, "n_threads": 1}
    ds = bonsai.Dataset(S, label=y)
    dd = bonsai.Dataset(D, label=y)
    assert ds.bin_mapper.to_dict() == dd.bin_mapper.to_dict()
    m = bonsai.train(p, ds, num_boost_round=6)
    assert m.model_to_string() == bonsai.train(p, dd, num_boost_round=6).model_to_string()
    # an explicit zero is the same value as an implicit one
    C = S.tocoo()
    z = np.flatnonzero(D[:, 3] == 0.0)            # column 3's zeros, stored explicitly
    E = sp.coo_matrix((np.r_[C.data, np.zeros(z.size)], (np.r_[C.row, z],
                       np.r_[C.col, np.full(z.size, 3)])), shape=S.shape).tocsr()
    assert E.nnz == S.nnz + z.size and z.size > 0
    assert m.model_to_string() == bonsai.train(p, bonsai.Dataset(E, label=y),
                                               num_boost_round=6).model_to_string()
    np.testing.assert_array_equal(m.predict(E), m.predict(S))
    # subsets and cv folds of sparse bins equal the dense ones
    rows = np.arange(0, n, 3)
    a = bonsai.train(p, ds.subset(rows), num_boost_round=3)
    assert a.model_to_string() == bonsai.train(p, dd.subset(rows), num_boost_round=3).model_to_string()


def test_wrong_column_count_and_bad_sparse_input():
    S = sp.random(200, 8, density=0.3, format="csr", random_state=0)
    y = np.arange(200.0)
    m = bonsai.train({"max_depth": 3, "n_threads": 1}, bonsai.Dataset(S, label=y),
                     num_boost_round=2)
    with pytest.raises(ValueError, match="X has 9 features, but the model was trained with 8"):
        m.predict(sp.random(5, 9, density=0.3, format="csr", random_state=0))
    with pytest.raises(ValueError, match="X has 7 features, but the model was trained with 8"):
        m.predict(sp.random(5, 7, density=0.3, format="csc", random_state=0))
    with pytest.raises(ValueError, match="X has 9 features but the reference Dataset has 8"):
        bonsai.Dataset(sp.random(5, 9, density=0.3, format="csr"),
                       reference=bonsai.Dataset(S, label=y))
    with pytest.raises(ValueError, match="categorical features need dense input"):
        bonsai.Dataset(S, label=y, categorical_features=[0])
    with pytest.raises(TypeError, match="complex"):
        bonsai.Dataset(sp.csr_matrix(np.ones((3, 2), np.complex128)))
    with pytest.raises(ValueError, match="empty"):
        bonsai.Dataset(sp.csr_matrix((0, 4)))


def test_sparse_model_saves_loads_pickles_and_predicts_in_a_fresh_process(tmp_path, child_env):
    X, y, Xt, _ = _libsvm("agaricus.txt")
    est = bonsai.BonsaiClassifier(n_estimators=6, max_depth=4, n_threads=1).fit(X, y)
    pred = est.predict_proba(Xt)
    np.testing.assert_array_equal(pred, est.predict_proba(Xt.toarray()))
    est.booster_.save_model(tmp_path / "m.json")
    (tmp_path / "m.pkl").write_bytes(pickle.dumps(est))
    sp.save_npz(tmp_path / "Xt.npz", Xt)
    np.save(tmp_path / "pred.npy", pred)
    code = textwrap.dedent(f"""
        import pickle
        import numpy as np, scipy.sparse as sp, bonsai
        d = {str(tmp_path)!r}
        Xt = sp.load_npz(d + "/Xt.npz")
        want = np.load(d + "/pred.npy")
        b = bonsai.Booster(model_file=d + "/m.json")
        assert np.array_equal(b.predict(Xt), want[:, 1])
        est = pickle.loads(open(d + "/m.pkl", "rb").read())
        assert np.array_equal(est.predict_proba(Xt.tocsc()), want)
        try:
            b.predict(sp.csr_matrix((2, Xt.shape[1] + 1)))
        except ValueError as e:
            assert "features, but the model was trained with" in str(e), e
        else:
            raise AssertionError("no error for a wrong column count")
        print("fresh ok")
    """)
    out = subprocess.run([sys.executable, "-c", code], env=child_env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "fresh ok" in out.stdout


#: the capped child: 30k x 100k (24 GB as float64, 3 GB as uint8 bins), 20 non-zeros
#: a row; it may grow its address space by CAP_MB and its resident memory by RSS_MB
CAP_MB, RSS_MB = 1024, 400


def test_wide_sparse_fit_and_predict_stay_proportional_to_the_non_zeros(child_env, tmp_path):
    code = textwrap.dedent(f"""
        import resource
        import numpy as np, scipy.sparse as sp, bonsai

        def status(key):
            with open("/proc/self/status") as fh:
                return next(int(l.split()[1]) // 1024 for l in fh if l.startswith(key))

        n, F, k = 30_000, 100_000, 20
        rng = np.random.default_rng(0)
        S = sp.csr_matrix((rng.integers(1, 4, n * k).astype(np.float64),
                           rng.integers(0, F, n * k).astype(np.int32),
                           np.arange(0, n * k + 1, k)), shape=(n, F))
        S.sum_duplicates()
        y = (np.asarray(S[:, :F // 2].sum(axis=1)).ravel() > k).astype(float)
        assert n * F * 8 > 20 * 2**30          # the dense form would need > 20 GB
        rss0 = status("VmRSS")
        cap = (status("VmSize") + {CAP_MB}) << 20
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
        ds = bonsai.Dataset(S, label=y)
        m = bonsai.train({{"objective": "binary", "max_depth": 5, "n_threads": 2}}, ds,
                         num_boost_round=5)
        p = m.predict(S)
        leaves = m.predict(S[:1000], pred_leaf=True)
        grown = status("VmHWM") - rss0
        assert grown < {RSS_MB}, grown
        assert np.isfinite(p).all() and p.std() > 0 and leaves.shape == (1000, 5)
        print("grown MB", grown)
    """)
    out = subprocess.run([sys.executable, "-c", code], env=child_env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "grown MB" in out.stdout


@pytest.mark.parametrize("policy", ["depthwise", "leafwise"])
def test_sparse_fit_is_the_same_at_one_and_two_threads(policy, split_finely, work_log):
    """The lowered work-split thresholds cut the partition over the column store and
    the row-store histograms between two threads (``work_log`` checks it): the model
    equals the one-thread and the dense one."""
    X, y, _, _ = _libsvm("agaricus.txt")
    y = np.where(np.random.default_rng(5).random(y.shape[0]) < 0.1, 1 - y, y)  # deeper trees
    params = dict(objective="binary", max_depth=5, grow_policy=policy, subsample=0.8,
                  colsample_bynode=0.8, random_state=3)
    models = []
    for t, data in ((1, X), (2, X), (2, X.toarray())):
        work_log.clear()
        models.append(bonsai.train(dict(params, n_threads=t), bonsai.Dataset(data, label=y),
                                   num_boost_round=6).model_to_string())
        work_log.check_fit(t, f"sparse input {policy}")
    assert models[0] == models[1] == models[2]


def test_sampled_bin_edges_equal_the_dense_sketch():
    """Past ``SAMPLE_ROWS`` rows the edges come from a row sample: the sparse path draws
    the dense sketch's rows, so the edges are the same."""
    from bonsai.binning import SAMPLE_ROWS
    rng = np.random.default_rng(4)
    n = SAMPLE_ROWS + 30_000
    D = np.where(rng.random((n, 3)) < 0.5, 0.0, rng.normal(size=(n, 3)))
    D[:, 2] = np.where(D[:, 2] != 0, np.round(D[:, 2], 1), 0.0)    # few distinct values
    D[rng.random(n) < 0.05, 1] = np.nan
    for seed in (0, 9):
        a = bonsai.Dataset(sp.csr_matrix(D), random_state=seed).bin_mapper.to_dict()
        assert a == bonsai.Dataset(D, random_state=seed).bin_mapper.to_dict()
