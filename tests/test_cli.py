"""The command line (``python -m bonsai``, run in a subprocess on the bundled HIGGS
sample written to CSV / Parquet / LibSVM in a temporary folder, and on the bundled
LightGBM TSV files themselves): a train / predict / cv / convert / info round trip,
CLI and Python fits give the same model bytes, and bad input exits with status 2 and
one error line, never a traceback.  The config and data-file helpers are tested
in-process."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import bonsai
from bonsai import _config, cli
from bonsai.io import tables as io_tables
from bonsai.demo import load_binary

from _child import bonsai_under_test, child_env

REPO = Path(__file__).resolve().parent.parent
BUNDLED = REPO / "bonsai" / "data"
N_TRAIN = 2000
PARAMS = {"objective": "binary", "grow_policy": "leafwise", "max_leaves": 7,
          "n_estimators": 10, "learning_rate": 0.3, "eval_metric": ["logloss", "auc"],
          "random_state": 3}
NAMES = [f"f{j}" for j in range(28)]


def run(*args, cwd):
    """``python -m bonsai ARGS`` importing the bonsai under test (``cwd`` is never the
    repository root, whose source tree ``-m`` would import instead)."""
    assert os.path.realpath(cwd) != os.path.realpath(REPO), cwd
    return subprocess.run([sys.executable, "-m", "bonsai", *map(str, args)], cwd=cwd,
                          env=child_env(),
                          capture_output=True, text=True, timeout=600)


def _toml_value(v):
    return json.dumps(v)        # JSON strings, numbers, bools and lists are TOML too


def write_config(path, sections):
    lines = []
    for section, keys in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {_toml_value(v)}" for k, v in keys.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="module")
def arrays():
    X, y, Xt, yt = load_binary()
    return X[:N_TRAIN], y[:N_TRAIN], Xt, yt


@pytest.fixture(scope="module")
def work(tmp_path_factory, arrays):
    """A folder with train/test CSV, a Parquet copy and a train config; the numba cache
    is filled in-process first, so the subprocesses load the kernels."""
    pd = pytest.importorskip("pandas")
    X, y, Xt, yt = arrays
    d = tmp_path_factory.mktemp("cli")
    for name, (A, b) in {"train": (X, y), "test": (Xt, yt)}.items():
        df = pd.DataFrame(A, columns=NAMES)
        df.insert(0, "label", b)
        df.to_csv(d / f"{name}.csv", index=False)
    pd.read_csv(d / "train.csv").to_parquet(d / "train.parquet")
    write_config(d / "train.toml", {
        "data": {"train": "train.csv", "valid": "test.csv", "test": "test.csv",
                 "label": "label"},
        "params": PARAMS, "parallel": {"n_threads": 0},
        "output": {"model": "model.json", "metrics": "metrics.json",
                   "predictions": "test_pred.csv"}})
    write_config(d / "cv.toml", {
        "data": {"train": "train.csv", "label": "label"},
        "params": dict(PARAMS, n_estimators=30, early_stopping_rounds=3),
        "cv": {"nfold": 3, "seed": 1},
        "output": {"model": "avg.json", "metrics": "cv.json", "oof": "oof.parquet"}})
    assert cli.main(["train", str(d / "train.toml"), "--set", f"output.model={d / 'warm.json'}",
                     f"output.metrics={d / 'warm_metrics.json'}"]) == 0
    return d


def python_fit(arrays, params=PARAMS, names=NAMES):
    X, y, Xt, yt = arrays
    tr = bonsai.Dataset(X, label=y, feature_names=names)
    va = bonsai.Dataset(Xt, label=yt, reference=tr)
    return bonsai.train(params, tr, valid_sets=[va], valid_names=["valid"])


def test_train_predict_round_trip(work, arrays):
    _, _, Xt, yt = arrays
    r = run("train", "train.toml", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "valid auc" in r.stdout and "test logloss" in r.stdout
    ref = python_fit(arrays)
    # the CLI fit and the Python fit with the same parameters: the same model bytes
    assert (work / "model.json").read_text() == ref.model_to_string()
    m = json.loads((work / "metrics.json").read_text())
    assert m["evals"] == ref.evals_result and m["rounds"] == 10
    assert m["test"]["auc"] == ref.evals_result["valid"]["auc"][-1]
    pd = pytest.importorskip("pandas")
    np.testing.assert_array_equal(pd.read_csv(work / "test_pred.csv")["prediction"],
                                  ref.predict(Xt))
    r = run("predict", "model.json", "test.csv", "--out", "pred.parquet", cwd=work)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(pd.read_parquet(work / "pred.parquet")["prediction"],
                                  ref.predict(Xt))
    assert cli.main(["predict", str(work / "model.json"), str(work / "test.csv"), "--out",
                     str(work / "margin.csv"), "--margin"]) == 0
    np.testing.assert_array_equal(pd.read_csv(work / "margin.csv")["margin"],
                                  ref.predict(Xt, output_margin=True))


def test_parquet_and_set_overrides_give_the_same_model(work, arrays, monkeypatch):
    monkeypatch.chdir(work)           # --set paths are relative to the current folder
    assert cli.main(["train", str(work / "train.toml"), "--set", "data.train=train.parquet",
                     "n_estimators=4", "grow_policy=depthwise", "max_leaves=0",
                     "output.model=pq.json", "output.metrics=pq_metrics.json"]) == 0
    ref = python_fit(arrays, dict(PARAMS, n_estimators=4, grow_policy="depthwise",
                                  max_leaves=0))
    assert (work / "pq.json").read_text() == ref.model_to_string()


def test_bundled_lightgbm_tsv_files(tmp_path):
    """LightGBM's example layout (tab-separated, label first, no header, gzip)."""
    cfg = write_config(tmp_path / "tsv.toml", {
        "data": {"train": str(BUNDLED / "binary.train.gz"),
                 "valid": str(BUNDLED / "binary.test")},
        "params": dict(PARAMS, n_estimators=5), "output": {"model": "m.json"}})
    r = run("train", cfg, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    X, y, Xt, yt = load_binary()
    ref = python_fit((X, y, Xt, yt), dict(PARAMS, n_estimators=5), names=None)
    assert (tmp_path / "m.json").read_text() == ref.model_to_string()
    assert cli.main(["predict", str(tmp_path / "m.json"), str(BUNDLED / "binary.test"),
                     "--out", str(tmp_path / "p.csv")]) == 0
    pred = np.loadtxt(tmp_path / "p.csv", delimiter=",", skiprows=1)
    np.testing.assert_array_equal(pred, ref.predict(Xt))


def test_libsvm(tmp_path):
    rng = np.random.default_rng(4)
    X = np.where(rng.random((400, 6)) < 0.4, rng.normal(size=(400, 6)), 0.0)
    y = (X[:, 0] + X[:, 3] > 0).astype(float)
    with open(tmp_path / "d.libsvm", "w") as fh:
        for row, label in zip(X, y):
            fh.write(f"{label:g} " + " ".join(f"{j}:{float(v)!r}" for j, v in enumerate(row) if v)
                     + "\n")
    cfg = write_config(tmp_path / "s.toml", {
        "data": {"train": "d.libsvm"}, "params": dict(PARAMS, min_child_samples=5),
        "output": {"model": "m.json"}})
    assert cli.main(["train", str(cfg)]) == 0
    ref = bonsai.train(dict(PARAMS, min_child_samples=5), bonsai.Dataset(X, label=y))
    assert (tmp_path / "m.json").read_text() == ref.model_to_string()
    # a file whose rows never mention the last feature is padded to the model's width
    (tmp_path / "few.libsvm").write_text("1 0:0.5 2:-1.25\n0 1:3.0\n")
    assert cli.main(["predict", str(tmp_path / "m.json"), str(tmp_path / "few.libsvm"),
                     "--out", str(tmp_path / "p.csv")]) == 0
    dense = np.array([[0.5, 0, -1.25, 0, 0, 0], [0, 3.0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "p.csv", skiprows=1),
                                  ref.predict(dense))


def test_cv_and_the_averaged_model(work, arrays):
    X, y, Xt, _ = arrays
    r = run("cv", "cv.toml", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "best iteration" in r.stdout
    res = bonsai.cv(dict(PARAMS, n_estimators=30, early_stopping_rounds=3),
                    bonsai.Dataset(X, label=y, feature_names=NAMES), nfold=3, seed=1,
                    return_models=True)
    doc = json.loads((work / "cv.json").read_text())
    assert doc["best_iteration"] == res["best_iteration"]
    assert doc["fold_best_iterations"] == res["fold_best_iterations"]
    assert doc["curves"]["valid auc-mean"] == res["valid auc-mean"]
    assert (work / "avg.json").read_text() == res["averaged_model"].model_to_string()
    pd = pytest.importorskip("pandas")
    np.testing.assert_array_equal(pd.read_parquet(work / "oof.parquet")["prediction"],
                                  res["oof"])
    # bonsai predict on the averaged model
    r = run("predict", "avg.json", "test.csv", "--out", "avg_pred.csv", cwd=work)
    assert r.returncode == 0, r.stderr
    np.testing.assert_array_equal(pd.read_csv(work / "avg_pred.csv")["prediction"],
                                  res["averaged_model"].predict(Xt))


def test_convert(work, arrays):
    X, y, Xt, _ = arrays
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    xb = xgb.train({"objective": "binary:logistic", "max_depth": 3, "nthread": 1},
                   xgb.DMatrix(X, label=y), num_boost_round=5)
    xb.save_model(work / "xgb.json")
    lb = lgb.train({"objective": "binary", "num_leaves": 7, "verbose": -1, "num_threads": 1},
                   lgb.Dataset(X, label=y), num_boost_round=5)
    lb.save_model(work / "lgb.txt")
    X32 = Xt.astype(np.float32)
    for src, ref in (("xgb.json", bonsai.Booster.from_xgboost(str(work / "xgb.json"))),
                     ("lgb.txt", bonsai.Booster.from_lightgbm(str(work / "lgb.txt")))):
        if src == "xgb.json":
            r = run("convert", src, f"{src}.bonsai.json", cwd=work)
            assert r.returncode == 0, r.stderr
        else:
            assert cli.main(["convert", str(work / src), str(work / f"{src}.bonsai.json")]) == 0
        got = bonsai.Booster(model_file=work / f"{src}.bonsai.json")
        np.testing.assert_array_equal(got.predict(X32), ref.predict(X32))
    model = python_fit(arrays)
    model.save_model(work / "to_export.json")
    treelite = pytest.importorskip("treelite")
    assert cli.main(["convert", str(work / "to_export.json"), str(work / "m.tl")]) == 0
    tl = treelite.Model.deserialize(str(work / "m.tl"))
    np.testing.assert_allclose(treelite.gtil.predict(tl, Xt, pred_margin=True).reshape(-1),
                               model.predict(Xt, output_margin=True), rtol=0, atol=1e-9)
    ort = pytest.importorskip("onnxruntime")
    r = run("convert", "to_export.json", "m.onnx", cwd=work)
    assert r.returncode == 0, r.stderr
    sess = ort.InferenceSession(str(work / "m.onnx"), providers=["CPUExecutionProvider"])
    out = dict(zip([o.name for o in sess.get_outputs()], sess.run(None, {"X": X32})))
    np.testing.assert_allclose(out["probabilities"][:, 1], model.predict(X32), atol=1e-5)


def test_info(tmp_path):
    import numba

    from bonsai._threads import resolve_n_threads
    r = run("info", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert f"bonsai {bonsai.__version__} ({bonsai_under_test()})" in out
    assert f"numba {numba.__version__}" in out and f"numpy {np.__version__}" in out
    assert f"python {sys.version.split()[0]}" in out
    assert "threading layer: omp" in out or "threading layer: workqueue" in out
    assert f"n_threads = 0 (auto) -> {resolve_n_threads(None)}: " in out
    assert "affinity" in out and "cgroup" in out
    assert "CUDA: usable here" in out or "CUDA: not usable here" in out
    rows = [line.split(None, 2) for line in out.splitlines() if line.startswith("  ")]
    assert {(g, d) for g, d, _ in rows} == {(g, d) for g in ("depthwise", "leafwise",
                                                             "oblivious")
                                            for d in ("cpu", "cuda")}
    from bonsai.backends import usable      # the child has this process's environment
    for g, d, status in rows:
        assert status.startswith("trains here" if usable(d)[0] else "predict-only here")


BAD = {   # run in a subprocess: the real entry point, its exit status and stderr
    "missing data file": (["train", "train.toml", "--set", "data.train=absent.csv"],
                          "absent.csv"),
    "unknown parameter": (["train", "train.toml", "--set", "num_leaves=7"],
                          "unknown parameter 'num_leaves' (did you mean 'max_leaves'"),
    "label column not in the data": (["train", "train.toml", "--set", "data.label=target"],
                                     "column 'target' is not in"),
    "bad TOML": (["train", "bad.toml"], "invalid TOML"),
    "bad --set value": (["train", "train.toml", "--set", "learning_rate=fast"],
                        "'learning_rate' must be"),
}
MORE_BAD = {   # the same main(), in-process
    "missing config file": (["train", "nope.toml"], "no such config file"),
    "--set without =": (["train", "train.toml", "--set", "learning_rate"], "key=value"),
    "unknown section": (["train", "train.toml", "--set", "outptu.model=x.json"],
                        "unknown section 'outptu' (did you mean 'output'?)"),
    "not a model file": (["predict", "test.csv", "test.csv", "--out", "p.csv"],
                         "not a valid bonsai model"),
    "convert to an unknown kind": (["convert", "model.json", "m.xyz"], "pass --to"),
    "predict without --out": (["predict", "model.json", "test.csv"], "--out"),
    "no command": ([], "required: COMMAND"),
}


def _one_error_line(stderr, expected):
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in stderr, stderr
    assert lines[0].startswith("bonsai") and ": error: " in lines[0]
    assert expected in lines[0]


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_exits_2_with_one_line(work, case):
    (work / "bad.toml").write_text("[params]\nlearning_rate = \n")
    args, expected = BAD[case]
    r = run(*args, cwd=work)
    assert r.returncode == 2, (r.stdout, r.stderr)
    _one_error_line(r.stderr, expected)


@pytest.mark.parametrize("case", list(MORE_BAD))
def test_more_bad_input(work, case, capsys, monkeypatch):
    monkeypatch.chdir(work)
    args, expected = MORE_BAD[case]
    try:
        status = cli.main(args)
    except SystemExit as e:            # argparse's usage errors
        status = e.code
    assert status == 2
    _one_error_line(capsys.readouterr().err, expected)


def test_console_script_entry_point():
    doc = _config._toml().loads((REPO / "pyproject.toml").read_text())
    module, _, name = doc["project"]["scripts"]["bonsai"].partition(":")
    assert (module, name) == ("bonsai.cli", "main")
    assert getattr(__import__(module, fromlist=[name]), name) is cli.main


# ---- in-process: config and data files -------------------------------------------------
def test_config_paths_threads_and_sets(tmp_path, monkeypatch):
    sub = tmp_path / "conf"
    sub.mkdir()
    cfg_path = write_config(sub / "c.toml", {
        "data": {"train": "t.csv", "valid": ["a.csv", "b.csv"]},
        "params": {"objective": "binary"}, "parallel": {"n_threads": 0}})
    monkeypatch.chdir(tmp_path)
    cfg = _config.load_config(cfg_path, ["output.model=out/m.json", "max_depth=3",
                                         "eval_metric=[\"auc\"]", "objective=binary"])
    assert cfg["data"]["train"] == str(sub / "t.csv")       # relative to the config file
    assert _config.valid_paths(cfg) == [str(sub / "a.csv"), str(sub / "b.csv")]
    assert cfg["output"]["model"] == str(tmp_path / "out/m.json")   # --set: the cwd
    assert _config.params(cfg) == {"objective": "binary", "max_depth": 3,
                                   "eval_metric": ["auc"]}
    cfg = _config.load_config(cfg_path, ["parallel.n_threads=2"])
    assert _config.params(cfg)["n_threads"] == 2
    for bad, msg in ((["parallel.n_threads=-1"], "n_threads must be"),
                     (["n_threads=2"], "set it in \\[parallel\\]"),
                     (["data.group=[1]"], "group must be a column"),
                     (["data.lable=y"], "unknown key 'lable' \\(did you mean 'label'\\?\\)"),
                     (["max_depth=[1"], "not valid TOML"),
                     (["cv.nfold=five"], "nfold must be an integer")):
        with pytest.raises(_config.ConfigError, match=msg):
            _config.load_config(cfg_path, bad)


def test_data_files(tmp_path):
    assert io_tables.detect_format("a.csv.gz") == "csv"
    assert io_tables.detect_format(BUNDLED / "binary.test") == "tsv"
    assert io_tables.detect_format(BUNDLED / "binary.train.gz") == "tsv"
    (tmp_path / "x.svm").write_text("1 3:2.5 # comment\n\n0 0:1\n")
    t = io_tables.read_table(tmp_path / "x.svm")
    np.testing.assert_array_equal(t.data, [[1, 0, 0, 0, 2.5], [0, 1, 0, 0, 0]])
    (tmp_path / "bad.svm").write_text("1 3:2.5\n0 x\n")
    with pytest.raises(ValueError, match="line 2 is not LibSVM"):
        io_tables.read_table(tmp_path / "bad.svm")
    pd = pytest.importorskip("pandas")
    pd.DataFrame({"y": [0, 1, 1], "w": [1.0, 2.0, 3.0], "city": ["a", "b", "a"],
                  "x": [0.1, 0.2, 0.3]}).to_csv(tmp_path / "c.csv", index=False)
    t = io_tables.read_table(tmp_path / "c.csv")
    X, y, w, _ = io_tables.split_xy(t, "y", "w", ["city"])
    assert list(X.columns) == ["city", "x"] and str(X["city"].dtype) == "category"
    np.testing.assert_array_equal(w, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="'city' is not numeric"):
        io_tables.split_xy(t, "y")
    with pytest.raises(ValueError, match="column 7 is outside"):
        io_tables.split_xy(t, 7)
    io_tables.write_predictions(tmp_path / "p.csv", np.array([[0.1, 0.9], [1 / 3, 2 / 3]]))
    back = pd.read_csv(tmp_path / "p.csv")
    assert list(back.columns) == ["prediction_0", "prediction_1"]
    assert back["prediction_0"][1] == 1 / 3
    with pytest.raises(ValueError, match=".csv or .parquet"):
        io_tables.write_predictions(tmp_path / "p.txt", np.zeros(2))


def test_categorical_columns_through_the_cli(tmp_path):
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(2)
    n = 600
    city = rng.choice(["oslo", "rome", "lima", "kyiv"], n)
    x = rng.normal(size=n)
    y = ((city == "rome") | (x > 1)).astype(float)
    pd.DataFrame({"city": city, "x": x, "y": y}).to_csv(tmp_path / "d.csv", index=False)
    pd.DataFrame({"x": x[:50], "city": city[:50]}).to_csv(tmp_path / "q.csv", index=False)
    params = {"objective": "binary", "n_estimators": 5, "min_data_per_group": 5,
              "min_child_samples": 5}
    cfg = write_config(tmp_path / "c.toml", {
        "data": {"train": "d.csv", "label": "y", "categorical": ["city"]},
        "params": params, "output": {"model": "m.json"}})
    assert cli.main(["train", str(cfg)]) == 0
    df = pd.DataFrame({"city": pd.Series(city).astype("category"), "x": x})
    ref = bonsai.train(params, bonsai.Dataset(df, label=y))
    assert (tmp_path / "m.json").read_text() == ref.model_to_string()
    # columns in another order and the category column as text: matched by name
    assert cli.main(["predict", str(tmp_path / "m.json"), str(tmp_path / "q.csv"),
                     "--out", str(tmp_path / "p.csv")]) == 0
    np.testing.assert_array_equal(pd.read_csv(tmp_path / "p.csv")["prediction"],
                                  ref.predict(df.iloc[:50]))
