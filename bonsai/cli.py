"""The command line: ``bonsai`` (``[project.scripts]``) and ``python -m bonsai``.

::

    bonsai train CONFIG [--set KEY=VALUE ...]     fit, save the model (and metrics)
    bonsai cv CONFIG [--set KEY=VALUE ...]        cross-validate [data] train
    bonsai predict MODEL DATA --out FILE          predictions as CSV or Parquet
    bonsai convert SRC DST                        XGBoost JSON / LightGBM text -> bonsai,
                                                  bonsai -> ONNX / Treelite
    bonsai info                                   versions, threads, CUDA, growers

Config files: ``bonsai._config``; data files: ``bonsai.io.tables``.  ``bonsai train``
fits exactly what ``bonsai.train(params, Dataset(X, label=y, weight=w,
max_bin=params["max_bin"], random_state=params["random_state"]),
valid_sets=[Dataset(X_valid, label=y_valid, reference=train_set)],
valid_names=["valid"])`` fits in Python, so both give the same model bytes
(``[data] group``: a query-id column, passed as ``Dataset(..., qid=...)``).

A user error (a missing file, bad TOML, an unknown parameter, a column not in the
data, a missing optional package ...) prints one line ``bonsai: error: ...`` on stderr
and exits with status 2, without a traceback (``BONSAI_TRACEBACK=1`` shows it).
"""
import argparse
import json
import os
import sys
import time

from . import _config
from ._version import __version__
from .io import tables

_MODEL_KINDS = ("bonsai", "xgboost", "lightgbm")
_OUT_KINDS = ("bonsai", "onnx", "treelite")
_OUT_SUFFIX = {".json": "bonsai", ".onnx": "onnx", ".tl": "treelite", ".treelite": "treelite"}


class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors on one line (exit status 2)."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _one_line(text):
    return " ".join(str(text).split())


def _message(e):
    if isinstance(e, OSError) and e.filename is not None:
        return f"{e.strerror or e}: {e.filename}"
    return _one_line(e) or type(e).__name__


# ---- data --------------------------------------------------------------------------
def _read_xy(path, cfg, need_label=True):
    """(table, X, y, w, categorical positions, query ids or None) of a data file."""
    d = cfg["data"]
    table = tables.read_table(path, d.get("format"), d.get("header"))
    try:
        X, y, w, cats = tables.split_xy(table, d.get("label"), d.get("weight"),
                                        d.get("categorical", ()), need_label, d.get("group"))
        qid = None if "group" not in d else tables.label_vector(table, d["group"])
    except (TypeError, ValueError) as e:
        raise ValueError(f"[data] {_one_line(e)}") from None
    return table, X, y, w, cats, qid


def _train_dataset(cfg, p):
    from .dataset import Dataset
    if "train" not in cfg["data"]:
        raise _config.ConfigError("[data] train: name the training data file")
    _, X, y, w, cats, qid = _read_xy(cfg["data"]["train"], cfg)
    cats = list(dict.fromkeys(list(p.categorical_features or ()) + cats)) or None
    return Dataset(X, label=y, weight=w, max_bin=p.max_bin, random_state=p.random_state,
                   categorical_features=cats, qid=qid)


def _write_json(path, doc):
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, sort_keys=True)
        fh.write("\n")


# ---- commands ------------------------------------------------------------------------
def cmd_train(args):
    from ._params import validate_params
    from .boosting import _metrics
    from .boosting import train
    from .dataset import Dataset
    cfg = _config.load_config(args.config, args.set)
    params = _config.params(cfg)
    p = validate_params(params)
    train_set = _train_dataset(cfg, p)
    valid_paths = _config.valid_paths(cfg)
    names = ["valid"] if len(valid_paths) == 1 else [f"valid_{i}" for i in range(len(valid_paths))]
    valid_sets = []
    for path in valid_paths:
        _, X, y, w, _, qid = _read_xy(path, cfg)
        valid_sets.append(Dataset(X, label=y, weight=w, reference=train_set, qid=qid))
    t0 = time.perf_counter()
    booster = train(params, train_set, valid_sets=valid_sets or None,
                    valid_names=names if valid_sets else None)
    secs = time.perf_counter() - t0
    out = cfg["output"]
    model_path = out.get("model", os.path.join(os.path.dirname(os.path.abspath(
        cfg["_path"])), "model.json"))
    booster.save_model(model_path)
    doc = {"command": "train", "bonsai_version": __version__, "config": cfg["_path"],
           "rounds": booster.num_boosted_rounds(), "trees": booster.num_trees(),
           "best_iteration": booster.best_iteration, "best_score": booster.best_score,
           "evals": booster.evals_result, "train_seconds": secs}
    line = (f"bonsai train: {booster.num_boosted_rounds()} rounds on {train_set.n_rows} rows x "
            f"{train_set.n_features} features in {secs:.2f} s")
    if valid_sets:
        last = booster.evals_result[names[-1]]
        m = list(last)[-1]
        best = booster.best_iteration
        line += f"; {names[-1]} {m} = {last[m][-1 if best is None else best]:.6g}"
        if best is not None:
            line += f" (best iteration {best})"
    if "test" in cfg["data"]:
        d = cfg["data"]
        table = tables.read_table(d["test"], d.get("format"), d.get("header"))
        try:
            X = tables.model_features(table, booster, d.get("label"), d.get("weight"),
                                      d.get("group"))
            y = tables.label_vector(table, d.get("label"))
            w = None if "weight" not in d else tables.label_vector(table, d["weight"])
            qid = None if "group" not in d else tables.label_vector(table, d["group"])
        except (TypeError, ValueError) as e:
            raise ValueError(f"[data] test: {_one_line(e)}") from None
        pred = booster.predict(X)
        if y is not None:
            from ._groups import group_from_qid
            from .data import check_vector
            y = check_vector(y, len(y), "[data] test label")
            if w is not None:
                w = check_vector(w, len(y), "[data] test weight", allow_negative=False)
            ptr = None if qid is None else group_from_qid(qid, len(y), "[data] test group")
            metrics = _metrics(p, booster._objective())
            need = [m.name for m in metrics if m.needs_group]
            if need and ptr is None:
                raise ValueError(f"[data] test: metric {need[0]!r} needs query ids; name "
                                 "their column with [data] group")
            doc["test"] = {m.name: float(m.fn(y, pred, w, ptr) if m.needs_group
                                         else m.fn(y, pred, w)) for m in metrics}
            line += "; test " + ", ".join(f"{k} = {v:.6g}" for k, v in doc["test"].items())
        if "predictions" in out:
            tables.write_predictions(out["predictions"], pred)
    if "metrics" in out:
        _write_json(out["metrics"], doc)
    print(line)
    print(f"model: {model_path}")
    return 0


def cmd_cv(args):
    from ._params import validate_params
    from .crossval import cv
    cfg = _config.load_config(args.config, args.set)
    params = _config.params(cfg)
    p = validate_params(params)
    ds = _train_dataset(cfg, p)
    c, out = cfg["cv"], cfg["output"]
    t0 = time.perf_counter()
    r = cv(params, ds, nfold=c.get("nfold", 5), stratified=c.get("stratified"),
           shuffle=c.get("shuffle", True), seed=c.get("seed", 0),
           return_models="model" in out)
    secs = time.perf_counter() - t0
    curves = {k: v for k, v in r.items() if k.startswith("valid ")}
    doc = {"command": "cv", "bonsai_version": __version__, "config": cfg["_path"],
           "nfold": len(r["folds"]), "best_iteration": r["best_iteration"],
           "best_score": r["best_score"], "fold_best_iterations": r["fold_best_iterations"],
           "fold_evals": r["fold_evals"], "curves": curves, "cv_seconds": secs}
    if "model" in out:
        r["averaged_model"].save_model(out["model"])
    if "oof" in out:
        if r["oof"] is None:
            raise ValueError("[output] oof: the validation folds overlap")
        tables.write_predictions(out["oof"], r["oof"])
    if "metrics" in out:
        _write_json(out["metrics"], doc)
    best = r["best_iteration"]
    rounds = len(next(iter(r["fold_evals"][0].values())))
    lines = [f"bonsai cv: {len(r['folds'])} folds, {rounds} rounds in {secs:.2f} s; best "
             f"iteration {best}"]
    for k in curves:
        if k.endswith("-mean"):
            m = k[len("valid "):-len("-mean")]
            lines.append(f"  valid {m}: {curves[k][best]:.6g} +- "
                         f"{curves[f'valid {m}-stdv'][best]:.3g}")
    lines.append(f"  folds' best iterations: {r['fold_best_iterations']}")
    if "model" in out:
        lines.append(f"averaged model: {out['model']}")
    print("\n".join(lines))
    return 0


def _parse_label(text):
    if text is None or text == "none":
        return text
    return int(text) if text.isdigit() else text


def cmd_predict(args):
    booster = _read_model(args.model)
    tables.output_format(args.out)
    table = tables.read_table(args.data, args.format, args.header)
    X = tables.model_features(table, booster, label=_parse_label(args.label))
    pred = booster.predict(X, output_margin=args.margin)
    tables.write_predictions(args.out, pred, prefix="margin" if args.margin else "prediction")
    print(f"bonsai predict: {len(pred)} rows -> {args.out}")
    return 0


def _read_model(path, text=None):
    """A bonsai model file as a Booster; a bad file names itself in the error."""
    from .booster import Booster
    try:
        return Booster(model_str=text) if text is not None else Booster(model_file=path)
    except ValueError as e:
        raise ValueError(f"{path}: {_one_line(e)}") from None


def _load_model(path, given):
    """(kind, Booster) of a bonsai, XGBoost JSON or LightGBM text model file."""
    from .booster import Booster
    with open(path, "rb") as fh:
        data = fh.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: not a text model file (XGBoost models must be saved as "
                         "JSON: booster.save_model('model.json'))") from None
    kind, doc = given, None
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}: invalid JSON ({e})") from None
        if kind is None and isinstance(doc, dict):
            kind = ("bonsai" if doc.get("format") == "bonsai-model"
                    else "xgboost" if "learner" in doc else None)
    elif kind is None and text.lstrip().startswith("tree"):
        kind = "lightgbm"
    if kind is None:
        raise ValueError(f"{path}: not a bonsai model, XGBoost JSON model or LightGBM text "
                         "model; pass --from")
    if kind == "bonsai":
        return kind, _read_model(path, text)
    if kind == "xgboost":
        return kind, Booster.from_xgboost(text if doc is None else doc)
    return kind, Booster.from_lightgbm(text)


def cmd_convert(args):
    to = args.to or _OUT_SUFFIX.get(os.path.splitext(args.dst)[1].lower())
    if to is None:
        raise ValueError(f"{args.dst}: cannot tell the output kind from the suffix; pass "
                         f"--to ({', '.join(_OUT_KINDS)})")
    kind, booster = _load_model(args.src, args.source)
    try:
        if to == "bonsai":
            booster.save_model(args.dst)
        elif to == "onnx":
            model = booster.to_onnx(opset=args.opset)
            with open(args.dst, "wb") as fh:
                fh.write(model.SerializeToString())
        else:
            booster.to_treelite().serialize(args.dst)
    except ImportError as e:
        raise ImportError(f"{_one_line(e)} (or pip install 'bonsai-gbt[export]')") from None
    print(f"bonsai convert: {kind} model ({booster.num_trees()} trees) -> {to} {args.dst}")
    return 0


def cmd_info(args):
    from ._info import info_lines
    print("\n".join(info_lines()))
    return 0


# ---- parser --------------------------------------------------------------------------
def _parser():
    ap = _Parser(prog="bonsai", description="bonsai: histogram gradient-boosted trees, "
                 "bit-identical at any thread count.")
    ap.add_argument("--version", action="version", version=f"bonsai {__version__}")
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, fn, what in (("train", cmd_train, "train a model from a TOML config file"),
                           ("cv", cmd_cv, "cross-validate on the config's [data] train "
                                          "(valid and test are not used)")):
        sp = sub.add_parser(name, help=what, description=what)
        sp.add_argument("config", metavar="CONFIG", help="TOML config file")
        sp.add_argument("--set", metavar="KEY=VALUE", nargs="+", action="extend", default=[],
                        help="override a config entry: section.key=value, or key=value "
                             "for [params] (TOML values; plain words are text)")
        sp.set_defaults(func=fn)
    sp = sub.add_parser("predict", help="predict a data file with a model",
                        description="predict a data file with a model")
    sp.add_argument("model", metavar="MODEL", help="bonsai model file (.json)")
    sp.add_argument("data", metavar="DATA", help="CSV, TSV, Parquet or LibSVM file")
    sp.add_argument("--out", required=True, metavar="FILE", help=".csv or .parquet output")
    sp.add_argument("--format", choices=tables.FORMATS, help="input format (default: suffix)")
    sp.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                    help="the CSV/TSV file has a header row (default: CSV yes, TSV no)")
    sp.add_argument("--label", metavar="COLUMN", default=None,
                    help="label column to leave out (name or 0-based position; 'none'); "
                         "default: columns are matched to the model's feature names, or "
                         "column 0 of headerless files is the label")
    sp.add_argument("--margin", action="store_true", help="raw margins instead of predictions")
    sp.set_defaults(func=cmd_predict)
    sp = sub.add_parser("convert", help="convert models: XGBoost JSON / LightGBM text -> "
                        "bonsai; bonsai -> ONNX / Treelite",
                        description="convert models: XGBoost JSON / LightGBM text -> bonsai "
                        "(.json); bonsai -> ONNX (.onnx) / Treelite (.tl)")
    sp.add_argument("src", metavar="SRC", help="bonsai, XGBoost JSON or LightGBM text model")
    sp.add_argument("dst", metavar="DST", help="output file (.json, .onnx, .tl)")
    sp.add_argument("--from", dest="source", choices=_MODEL_KINDS,
                    help="input kind (default: from the file's content)")
    sp.add_argument("--to", choices=_OUT_KINDS, help="output kind (default: from the suffix)")
    sp.add_argument("--opset", type=int, default=None, help="ONNX opset (default: bonsai's)")
    sp.set_defaults(func=cmd_convert)
    sp = sub.add_parser("info", help="versions, threads, CUDA and what can train here",
                        description="versions, threads, CUDA and what can train here")
    sp.set_defaults(func=cmd_info)
    return ap


def main(argv=None):
    """Run the command line; returns the exit status (2 for a user error)."""
    args = _parser().parse_args(argv)
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("bonsai: interrupted", file=sys.stderr)
        return 130
    except (ValueError, TypeError, OSError, ImportError) as e:
        if os.environ.get("BONSAI_TRACEBACK"):
            raise
        print(f"bonsai: error: {_message(e)}", file=sys.stderr)
        return 2
