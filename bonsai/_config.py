"""Configuration files of the command line: TOML (``tomllib``; ``tomli`` below Python
3.11) in sections, overridden by ``--set key=value``, checked once.

::

    [data]                  # paths relative to this file's folder
    train = "train.csv"     # CSV, TSV, Parquet or LibSVM (bonsai.io.tables)
    valid = "valid.csv"     # or a list of files; evaluated every round
    test = "test.csv"       # predicted (and scored, if it has the label) at the end
    label = "target"        # a column name or 0-based position (headerless: 0)
    weight = "w"            # optional
    categorical = ["city"]  # optional: category columns
    format = "csv"          # optional: csv | tsv | parquet | libsvm (default: suffix)
    header = true           # optional: CSV / TSV header row (default: CSV yes, TSV no)

    [params]                # bonsai's parameters, validated by bonsai._params
    objective = "binary"
    n_estimators = 200

    [parallel]
    n_threads = 0           # 0 = auto (affinity and cgroup quota aware)

    [output]
    model = "model.json"        # the model (bonsai cv: the folds' averaged model)
    metrics = "metrics.json"    # evaluation results as JSON
    predictions = "test.csv"    # bonsai train: predictions of [data] test
    oof = "oof.csv"             # bonsai cv: out-of-fold predictions

    [cv]                    # bonsai cv (see bonsai.cv)
    nfold = 5
    stratified = true       # default: for classification objectives
    shuffle = true
    seed = 0

``--set`` takes ``section.key=value`` (a bare ``key`` is a parameter); the value is
TOML (``0.05``, ``true``, ``"text"``, ``[1, 2]``), or a plain word taken as text
(``objective=binary``).  Paths given with ``--set`` are relative to the current folder.
Every mistake raises ``ConfigError`` (a ValueError) naming the section and key.
"""
import difflib
import os
import sys

from ._params import validate_params



def _toml():
    """``tomllib`` (Python >= 3.11) or ``tomli``."""
    if sys.version_info >= (3, 11):
        import tomllib
        return tomllib
    try:                                  # pragma: no cover - Python 3.10
        import tomli
    except ImportError:
        raise ImportError("reading config files on Python < 3.11 needs the 'tomli' "
                          "package: pip install tomli") from None
    return tomli                          # pragma: no cover

_STR, _INT, _BOOL = "a string", "an integer", "true or false"
_PATH_KEYS = {("data", "train"), ("data", "valid"), ("data", "test"), ("output", "model"),
              ("output", "metrics"), ("output", "predictions"), ("output", "oof")}
#: section -> {key: what it must be}; [params] keys are checked by bonsai._params
SCHEMA = {
    "data": {"train": _STR, "valid": "a string or a list of strings", "test": _STR,
             "label": "a column name or position", "weight": "a column name or position",
             "group": "a column name or position (query ids, for ranking)",
             "categorical": "a list of column names or positions", "format": _STR,
             "header": _BOOL},
    "params": None,
    "parallel": {"n_threads": "an integer >= 0 (0 = auto)"},
    "output": {"model": _STR, "metrics": _STR, "predictions": _STR, "oof": _STR},
    "cv": {"nfold": _INT, "stratified": _BOOL, "shuffle": _BOOL, "seed": _INT},
}


class ConfigError(ValueError):
    """A bad configuration file or ``--set`` override."""


def _close(word, options):
    near = difflib.get_close_matches(word, list(options), n=2, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in near)}?)" if near else ""


def _is_column(v):
    return isinstance(v, (str, int)) and not isinstance(v, bool)


def _type_ok(section, key, v):
    if section == "data":
        if key in ("train", "test", "format"):
            return isinstance(v, str)
        if key == "valid":
            return isinstance(v, str) or (isinstance(v, list) and v
                                          and all(isinstance(s, str) for s in v))
        if key in ("label", "weight", "group"):
            return _is_column(v)
        if key == "categorical":
            return isinstance(v, list) and all(_is_column(c) for c in v)
        return isinstance(v, bool)
    if section == "parallel":
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0
    if section == "output":
        return isinstance(v, str) and v != ""
    if key in ("nfold", "seed"):
        return isinstance(v, int) and not isinstance(v, bool)
    return isinstance(v, bool)


def parse_set(item):
    """``"section.key=value"`` -> (section, key, value)."""
    key, eq, text = item.partition("=")
    key = key.strip()
    if not eq or not key:
        raise ConfigError(f"--set {item!r}: expected key=value (for example "
                          "learning_rate=0.05 or data.train=train.csv)")
    if not text.strip():
        raise ConfigError(f"--set {item!r}: the value is empty")
    section, dot, name = key.partition(".")
    if not dot:
        section, name = "params", key
    toml = _toml()
    try:
        value = toml.loads(f"v = {text}")["v"]
    except toml.TOMLDecodeError:
        if any(ch in text for ch in "[]{}\"'=,"):
            raise ConfigError(f"--set {item!r}: the value is not valid TOML") from None
        value = text.strip()          # a plain word: text
    return section, name, value


def load_config(path, overrides=()):
    """The checked configuration: ``{section: {key: value}}`` with every section
    present, paths absolute, ``[params]`` validated (``n_threads`` from
    ``[parallel]``) and returned as given, plus ``"_path"``."""
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(2, "no such config file", path)
    toml = _toml()
    try:
        with open(path, "rb") as fh:
            doc = toml.load(fh)
    except toml.TOMLDecodeError as e:
        raise ConfigError(f"{path}: invalid TOML: {e}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: invalid TOML: not UTF-8 text") from None
    base = os.path.dirname(os.path.abspath(path))
    cfg = {}
    for section, table in doc.items():
        if section not in SCHEMA:
            raise ConfigError(f"{path}: unknown section [{section}]{_close(section, SCHEMA)}; "
                              f"sections: {', '.join('[' + s + ']' for s in SCHEMA)}")
        if not isinstance(table, dict):
            raise ConfigError(f"{path}: {section} must be a [{section}] section")
        cfg[section] = {k: _abspath(section, k, v, base) for k, v in table.items()}
    for item in overrides:
        section, key, value = parse_set(item)
        if section not in SCHEMA:
            raise ConfigError(f"--set {item!r}: unknown section {section!r}"
                              f"{_close(section, SCHEMA)}")
        cfg.setdefault(section, {})[key] = _abspath(section, key, value, os.getcwd())
    for section in SCHEMA:
        cfg.setdefault(section, {})
    _check(cfg)
    cfg["_path"] = path
    return cfg


def _abspath(section, key, value, base):
    if (section, key) not in _PATH_KEYS:
        return value
    if isinstance(value, str):
        return os.path.join(base, value)
    if isinstance(value, list):
        return [os.path.join(base, v) if isinstance(v, str) else v for v in value]
    return value


def _check(cfg):
    for section, keys in SCHEMA.items():
        if keys is None:
            continue
        for key, value in cfg[section].items():
            if key not in keys:
                raise ConfigError(f"[{section}] unknown key {key!r}{_close(key, keys)}; keys: "
                                  f"{', '.join(keys)}")
            if not _type_ok(section, key, value):
                raise ConfigError(f"[{section}] {key} must be {keys[key]}, got {value!r}")
    if "n_threads" in cfg["params"]:
        raise ConfigError("[params] n_threads: set it in [parallel] (n_threads = 0 is auto)")
    try:
        validate_params(params(cfg))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"[params] {e}") from None


def params(cfg):
    """The ``[params]`` dict with ``n_threads`` from ``[parallel]`` (0 -> None, auto)."""
    out = dict(cfg["params"])
    n = cfg["parallel"].get("n_threads", 0)
    if n:
        out["n_threads"] = n
    return out


def valid_paths(cfg):
    v = cfg["data"].get("valid")
    return [] if v is None else [v] if isinstance(v, str) else list(v)
