"""Model files from strangers: a JSON model never executes code, its memory is bounded
by the file's size, and anything malformed raises ValueError naming what is wrong.

``test_loader_fuzz`` mutates valid files of six kinds (regression, multiclass,
vector-leaf ``multi_output_tree``, native categorical, ordered CTR, oblivious) in a
child process under an address-space cap (``tests/_loader_fuzz.py``); the other tests
pin the checks the fuzz relies on, one field at a time.
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bonsai
from bonsai.io import model_file

TESTS = Path(__file__).resolve().parent
N_FUZZ_CASES = 5400
FUZZ_SEED = 19


def _data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 1] = rng.integers(0, 5, n)
    X[:, 2] = rng.integers(0, 7, n)
    X[rng.random((n, 4)) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + (np.nan_to_num(X[:, 1]) % 2) + 0.1 * rng.normal(size=n)
    return X, y


def _kinds(y):
    cat = {"categorical_features": [1, 2], "min_data_per_group": 5}
    return {
        "regression": ({"objective": "squared_error"}, y),
        "multiclass": ({"objective": "multiclass", "num_class": 3},
                       np.digitize(y, [0.0, 1.0]).astype(float)),
        "vector": ({"objective": "multi_squared_error", "multi_strategy": "multi_output_tree"},
                   np.stack([y, -2.0 * y], axis=1)),
        "categorical": ({**cat, "cat_encoding": "native"}, y),
        "ordered": ({**cat, "cat_encoding": "ordered"}, y),
        "oblivious": ({"grow_policy": "oblivious", "objective": "binary"},
                      (y > 0.5).astype(float)),
    }


@pytest.fixture(scope="module")
def models():
    """{kind: (Booster, X)}: one small model of each kind the fuzz mutates."""
    X, y = _data()
    out = {}
    for kind, (params, label) in _kinds(y).items():
        p = {"n_estimators": 3, "max_depth": 3, "min_child_samples": 5, "n_threads": 1,
             **params}
        out[kind] = (bonsai.train(p, bonsai.Dataset(X, label=label)), X[:20])
    return out


def test_loader_fuzz(models, tmp_path, child_env):
    """5,400 mutated files (truncated, bytes flipped, numbers changed to huge, negative,
    NaN, 1e308 ..., keys dropped or duplicated, lists replaced by scalars ...), loaded
    in a fresh process capped at 1 GiB above its warm size: each one loads, predicts
    finite values and re-saves losslessly, or raises ValueError; nothing else, no
    crash.  The same process first checks that each valid file loads there and
    predicts exactly what the writer predicted."""
    for kind, (b, X) in models.items():
        b.save_model(tmp_path / f"{kind}.json")
        np.savez(tmp_path / f"{kind}.npz", X=X, pred=b.predict(X))
    r = subprocess.run([sys.executable, str(TESTS / "_loader_fuzz.py"), str(tmp_path),
                        str(N_FUZZ_CASES), str(FUZZ_SEED)],
                       capture_output=True, text=True, timeout=300, cwd=str(tmp_path),
                       env=child_env)
    if r.returncode != 0:
        progress = (tmp_path / "progress").read_text().strip() if (
            tmp_path / "progress").exists() else "before the first case"
        pytest.fail(f"the fuzz worker died (status {r.returncode}) at case {progress}:\n"
                    f"{r.stderr[-3000:]}")
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    counts = summary["counts"]
    assert summary["cases"] == N_FUZZ_CASES >= 5000
    assert sorted(summary["bases"]) == sorted(models)
    assert not summary["failures"], json.dumps(summary["failures"][:5], indent=1)
    assert sum(counts.values()) == N_FUZZ_CASES and "FAIL" not in counts, counts
    # the mutations reach past the parser: many files load (and pass every check)
    assert counts.get("ok", 0) > N_FUZZ_CASES // 20, counts
    assert counts.get("ValueError", 0) > N_FUZZ_CASES // 2, counts


# ---- the checks one field at a time -------------------------------------------------

def _doc(models, kind="regression"):
    return json.loads(models[kind][0].model_to_string())


def _rejected(doc_or_text, match):
    text = doc_or_text if isinstance(doc_or_text, str) else json.dumps(doc_or_text)
    with pytest.raises(ValueError, match=match):
        bonsai.Booster(model_str=text)


def _internal(td):
    return next(i for i, l in enumerate(td["left"]) if l >= 0)


def _leaf(td):
    return next(i for i, l in enumerate(td["left"]) if l < 0)


@pytest.mark.parametrize("bad", ["nan", "inf", "-inf", 1e999])
def test_non_finite_leaf_values(models, bad):
    doc = _doc(models)
    doc["trees"][1]["value"][_leaf(doc["trees"][1])] = bad
    _rejected(doc, r"tree 1.*non-finite leaf value")
    doc = _doc(models, "vector")                  # (n, K) values: one entry of a K-list
    td = doc["trees"][0]
    td["value"][_leaf(td)][1] = bad
    _rejected(doc, r"tree 0.*non-finite leaf value")


def test_leaf_values_that_add_up_past_float64(models):
    """Each leaf is finite, but two trees' leaves add up to an infinite margin."""
    doc = _doc(models)
    for td in doc["trees"][:2]:
        td["value"] = [1.5e308] * len(td["value"])
    _rejected(doc, r"margin beyond float64")


def test_thresholds(models):
    doc = _doc(models)
    td = doc["trees"][0]
    td["threshold"][_internal(td)] = "nan"        # a numeric split compares with NaN
    _rejected(doc, r"tree 0.*NaN threshold on a numeric split")
    for kind in ("regression", "oblivious"):      # +-inf thresholds are real splits
        doc = _doc(models, kind)
        td = doc["trees"][0]
        td["threshold"] = ["-inf" if l >= 0 else 0.0 for l in td["left"]]
        b = bonsai.Booster(model_str=json.dumps(doc))
        X = models[kind][1]
        assert np.isfinite(b.predict(X)).all()
    doc = _doc(models)
    doc["trees"][0]["threshold"][0] = 10 ** 400   # beyond float64 (no silent inf)
    _rejected(doc, r"tree 0.*beyond float64")


@pytest.mark.parametrize("bad", [-2, 65535, 2 ** 31, 1.5, True, "3"])
def test_bin_thresholds_out_of_range(models, bad):
    doc = _doc(models)
    td = doc["trees"][2]
    td["bin_threshold"][_internal(td)] = bad
    _rejected(doc, r"tree 2.*bin_threshold")


def test_integer_fields_are_not_converted(models):
    """A float, a bool or a huge integer in an integer field is rejected, not truncated."""
    for field, bad in [("feature", 1.5), ("feature", 2 ** 40), ("left", -2 ** 63 - 1),
                       ("default_left", 2), ("count", -1), ("right", "2"), ("left", None)]:
        doc = _doc(models)
        td = doc["trees"][0]
        td[field][_internal(td)] = bad
        _rejected(doc, rf"tree 0.*({field}|child index|count|default_left)")
    for field, bad in [("tree_class", [True] * 3), ("n_outputs", True), ("n_outputs", 1.0),
                       ("base_score", "0.5"), ("base_score", [True])]:
        doc = _doc(models)
        doc[field] = bad
        _rejected(doc, rf"{field}")


def test_category_bitsets_beyond_the_category_map(models):
    """A ``cat_left`` code past the feature's category map is rejected; one far past
    every map is rejected before its bitset is allocated (1 << 40 would be 2**34
    bytes)."""
    doc = _doc(models, "categorical")
    hit = [(t, i) for t, td in enumerate(doc["trees"]) for i, c in enumerate(td["cat_left"])
           if c]
    assert hit
    t, i = hit[0]
    f = doc["trees"][t]["feature"][i]
    n_cats = len(doc["categorical"]["categories"][doc["categorical"]["features"].index(f)])
    for code, match in [(n_cats, rf"category code {n_cats}"), (1 << 40, r"category code"),
                        (-1, r"category code -1"), (1.0, r"integer category codes"),
                        (True, r"integer category codes")]:
        d = json.loads(json.dumps(doc))
        d["trees"][t]["cat_left"][i] = d["trees"][t]["cat_left"][i] + [code]
        _rejected(d, rf"tree {t}\W+.*{match}")


def test_sizes_are_checked_against_the_arrays_present(models):
    """Declared sizes the arrays do not back are rejected: a small file cannot make the
    loader allocate by a count it states."""
    doc = _doc(models)
    doc["n_outputs"] = 10 ** 12
    doc["tree_class"] = [10 ** 12 - 1] * len(doc["trees"])
    _rejected(doc, r"base_score length differs from n_outputs")
    doc = _doc(models)
    doc["n_features"] = 2 ** 40
    _rejected(doc, r"n_features")
    doc = _doc(models, "categorical")
    doc["categorical"]["categories"][0] = doc["categorical"]["categories"][0][:1]
    _rejected(doc, r"category code")
    doc = _doc(models, "ordered")
    g = doc["ctr"]["groups"][0]
    g["counts"] = g["counts"][:-1]
    _rejected(doc, r"'ctr'.*group 0")


def test_ctr_tables_are_not_converted(models):
    for edit, match in [(lambda g: g["keys"].__setitem__(0, 0.5), r"integer 'sources' and 'keys'"),
                        (lambda g: g["keys"].__setitem__(0, 2 ** 64), r"'keys'"),
                        (lambda g: g["counts"].__setitem__(0, "1"), r"'counts'"),
                        (lambda g: g["counts"].__setitem__(0, 1e9), r"group 0"),
                        (lambda g: g.update(sources=[True]), r"'sources'")]:
        doc = _doc(models, "ordered")
        edit(doc["ctr"]["groups"][0])
        _rejected(doc, rf"'ctr'.*{match}")
    doc = _doc(models, "ordered")
    doc["ctr"]["cards"] = {" 1": 5, "2": 7}
    _rejected(doc, r"'cards'")
    doc = _doc(models, "ordered")
    doc["ctr"]["n_train"] = "inf"
    _rejected(doc, r"'ctr'")


def test_categories_that_collide(models):
    """1, 1.0 and true are one key of the code lookup: a map listing two of them is
    ambiguous."""
    for dup in (1.0, True):
        doc = _doc(models, "categorical")
        cats = doc["categorical"]["categories"][0]
        assert 1 in cats
        cats[next(i for i, v in enumerate(cats) if v != 1)] = dup
        _rejected(doc, r"category twice")


def test_duplicate_keys_and_deep_nesting(models):
    text = models["regression"][0].model_to_string()
    dup = text.replace('"n_outputs":1', '"n_outputs":1,"n_outputs":3', 1)
    assert dup != text
    _rejected(dup, r"key 'n_outputs' twice")
    _rejected('{"format":"bonsai-model","extra":' + "[" * 100000 + "]" * 100000 + "}",
              r"nested too deeply|corrupt")
    _rejected(text.replace('"n_features":4', '"n_features":' + "9" * 5000, 1), r"corrupt")


def test_other_top_level_fields(models):
    for field, bad in [("params", 3), ("extra", [1]), ("grow_policy", "sideways"),
                       ("grow_policy", 1), ("objective", "binary"),
                       ("objective", {"name": "binary", "params": [1]}),
                       ("multi_strategy", ["x"]), ("trees", 0), ("tree_class", {})]:
        doc = _doc(models)
        doc[field] = bad
        _rejected(doc, rf"'?{field}'?")


def test_schema_versions(models):
    doc = _doc(models)
    doc["schema_version"] = model_file.SCHEMA_VERSION + 1
    versions = ", ".join(str(v) for v in range(1, model_file.SCHEMA_VERSION + 1))
    _rejected(doc, rf"(?s)schema {model_file.SCHEMA_VERSION + 1}.*reads schema versions "
                   rf"{versions}: upgrade bonsai")
    for bad in (0, -1, True, 1.0, None):
        doc["schema_version"] = bad
        _rejected(doc, r"schema_version")


def test_every_kind_round_trips_exactly(models):
    """The fuzz's base files are valid: each loads, predicts the same bits and
    re-saves byte-identically (so the stricter reader rejects none of them)."""
    for kind, (b, X) in models.items():
        text = b.model_to_string()
        c = bonsai.Booster(model_str=text)
        np.testing.assert_array_equal(c.predict(X), b.predict(X), err_msg=kind)
        assert c.model_to_string() == text, kind
