"""The model loader's fuzz worker: mutated model files, loaded one after another in
this process under a memory cap (``tests/test_model_fuzz.py`` starts it).

``python _loader_fuzz.py DIR N_CASES SEED`` reads the valid model files ``DIR/*.json``
(each with ``DIR/<name>.npz``: the rows ``X`` to predict and the writer's ``pred``),
checks that every one loads here -- a fresh process -- and predicts exactly what its
writer predicted, then caps the address space (``resource.setrlimit(RLIMIT_AS)``: an
unbounded allocation becomes a MemoryError, a failed case, instead of swapping the
machine) and runs ``N_CASES`` mutated files, case ``i`` mutating base file
``i % n_bases`` with the random draws of ``numpy.random.default_rng([SEED, i])``
(so a case is reproduced by its number alone).

A case passes when loading raises ValueError, or when the model loads, predicts
finite values (margins, and the transformed predictions except where an exp link
overflows a finite margin: counted as ``exp_overflow``), re-saves, and the re-saved
text loads and predicts the same bits.  Anything else -- another exception type, a
non-finite prediction, a re-save that does not load back -- is a failure, reported
with the case number and its mutations.  Before each case its number is written to
``DIR/progress`` so that a crash of the interpreter names the case that caused it.

The last line printed is a JSON summary: counts by outcome, and the first failures.
"""
import json
import math
import os
import resource
import sys
import traceback
from pathlib import Path

import numpy as np

#: numbers a mutation writes in place of a number: edges of every integer width the
#: loader converts to, huge and tiny floats, the non-finite ones (as JSON tokens and as
#: the strings the writer uses), and types that are not numbers
NUMBERS = (0, 1, -1, 2, -2, 3, 7, 63, 64, 65, 255, 256, 65535, 65536, 2 ** 20, 2 ** 31 - 1,
           2 ** 31, -2 ** 31 - 1, 2 ** 32, 2 ** 53 + 1, 2 ** 63, -2 ** 63 - 1, 10 ** 30,
           10 ** 400, 1e308, -1e308, 1e300, 5e-324, -5e-324, 1e-308, 0.5, -0.0, 1.5,
           math.nan, math.inf, -math.inf, "nan", "inf", "-inf", "1.5", "", True, False,
           None, [], {}, [1], [[1]])
STRINGS = ("", "x", "multiclass", "binary", "squared_error", "poisson", "multi_output_tree",
           "one_output_per_tree", "oblivious", "leafwise", "bonsai-model", "nan", "0", "1",
           "\u00e9", "\x00")
_DUP = "__bonsai_fuzz_duplicate__"


def _paths(doc, rng, p_stop=0.25):
    """A random path into ``doc``: walk down from the root, stopping at each container
    with probability ``p_stop`` (so top-level fields are hit as often as node arrays)."""
    path, node = [], doc
    while isinstance(node, (dict, list)) and node:
        if path and rng.random() < p_stop:
            break
        key = (list(node)[rng.integers(len(node))] if isinstance(node, dict)
               else int(rng.integers(len(node))))
        path.append(key)
        node = node[key]
    return path


def _get(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def _number(rng, old):
    if isinstance(old, (int, float)) and not isinstance(old, bool) and rng.random() < 0.35:
        if isinstance(old, int):       # near the old value: off by a few, or negated
            return old + int(rng.integers(-3, 4)) if rng.random() < 0.7 else -old
        if math.isfinite(old):
            return old * float(rng.choice([-1.0, 2.0, 1e10, 1e300, 1 + 1e-15]))
    v = NUMBERS[rng.integers(len(NUMBERS))]
    return json.loads(json.dumps(v)) if isinstance(v, (list, dict)) else v


def _mutate_doc(doc, rng, dups):
    """One structural mutation of ``doc`` in place; returns its description.
    A duplicate key is a placeholder member ``"<_DUP><i>"``, ``dups[i]`` holding the
    (key, value) that ``_text`` writes in its place."""
    path = _paths(doc, rng)
    if not path:
        return "none"
    parent, key = _get(doc, path[:-1]), path[-1]
    old = parent[key]
    op = rng.integers(8)
    if op == 0 and isinstance(parent, dict):
        del parent[key]
        return f"drop {path}"
    if op == 1 and isinstance(old, list):
        parent[key] = _number(rng, None)
        return f"list->scalar {path}={parent[key]!r}"
    if op == 2 and isinstance(old, list) and old:
        i = int(rng.integers(len(old)))
        if rng.random() < 0.5:
            del old[i]
            return f"shorten {path}[{i}]"
        old.insert(i, json.loads(json.dumps(old[i])))
        return f"lengthen {path}[{i}]"
    if op == 3 and isinstance(parent, dict):
        # a duplicate key: a placeholder member, replaced in the text (``_text``)
        dups.append((key, _number(rng, old) if rng.random() < 0.7 else old))
        parent[f"{_DUP}{len(dups) - 1}"] = 0
        return f"duplicate key {path}"
    if op == 4 and isinstance(old, str):
        parent[key] = STRINGS[rng.integers(len(STRINGS))]
        return f"string {path}={parent[key]!r}"
    if op == 5 and not isinstance(old, (list, dict)):
        parent[key] = [old] if rng.random() < 0.5 else {"v": old}
        return f"scalar->container {path}"
    if op == 6 and isinstance(old, dict) and old:   # swap a dict's value with a sibling's
        keys = list(old)
        a, b = (keys[int(i)] for i in rng.integers(len(keys), size=2))
        old[a], old[b] = old[b], old[a]
        return f"swap {path}[{a!r}]<->[{b!r}]"
    parent[key] = _number(rng, old)
    return f"number {path}={parent[key]!r}"


def _text(doc, dups):
    """JSON text of ``doc`` (NaN / Infinity tokens allowed), with each placeholder
    member turned into a real duplicate key."""
    text = json.dumps(doc, allow_nan=True)
    for i, (key, value) in enumerate(dups):
        token = json.dumps(f"{_DUP}{i}") + ": 0"
        text = text.replace(token, json.dumps(key) + ": " + json.dumps(value, allow_nan=True))
    return text


def mutate(base_text, rng):
    """(mutated file bytes, description) of one case."""
    raw = base_text.encode()
    kind = rng.random()
    if kind < 0.12:                                   # truncate
        cut = int(rng.integers(len(raw)))
        return raw[:cut], f"truncate at {cut}"
    if kind < 0.24:                                   # flip bytes
        b = bytearray(raw)
        pos = rng.integers(len(b), size=int(rng.integers(1, 5)))
        for p in pos:
            b[p] = int(rng.integers(256)) if rng.random() < 0.5 else b[p] ^ (1 << int(rng.integers(8)))
        return bytes(b), f"flip bytes at {sorted(int(p) for p in pos)}"
    if kind < 0.30:                                   # digits changed in place
        b = bytearray(raw)
        digits = [i for i in rng.integers(len(b), size=64) if chr(b[i]).isdigit()][:3]
        for p in digits:
            b[p] = ord("0") + int(rng.integers(10))
        return bytes(b), f"digits at {[int(p) for p in digits]}"
    doc, dups = json.loads(base_text), []
    what = [_mutate_doc(doc, rng, dups) for _ in range(int(rng.integers(1, 4)))]
    return _text(doc, dups).encode(), "; ".join(what)


def _exp_link(booster):
    return booster.objective in ("poisson", "gamma", "tweedie")


def _predict(booster, X):
    """(margins, predictions), each a finite-checked float array (or raises)."""
    margin = np.asarray(booster.predict(X, output_margin=True), dtype=np.float64)
    pred = np.asarray(booster.predict(X), dtype=np.float64)
    return margin, pred


def run_case(bonsai, path, text_bytes, X):
    """The outcome of one case: 'ValueError', 'ok', 'exp_overflow' or a failure text."""
    path.write_bytes(text_bytes)
    try:
        b = bonsai.Booster(model_file=str(path))
    except ValueError:
        return "ValueError"
    try:
        margin, pred = _predict(b, X)
    except ValueError:
        return "ValueError at predict"
    if not np.all(np.isfinite(margin)):
        return "FAIL non-finite margin"
    outcome = "ok"
    if not np.all(np.isfinite(pred)):
        if not _exp_link(b) or np.any(np.isnan(pred)):
            return "FAIL non-finite prediction"
        outcome = "exp_overflow"
    try:
        again = bonsai.Booster(model_str=b.model_to_string())
    except ValueError as e:
        return f"FAIL the loaded model re-saves to a file the loader rejects: {e}"
    m2, p2 = _predict(again, X)
    if not (np.array_equal(m2, margin) and np.array_equal(p2, pred, equal_nan=True)):
        return "FAIL the re-saved model predicts differently"
    return outcome


def main(directory, n_cases, seed):
    import bonsai
    directory = Path(directory)
    names = sorted(p.stem for p in directory.glob("*.json") if p.stem != "case")
    bases = []
    for name in names:                  # a fresh process reads what the writer wrote
        text = (directory / f"{name}.json").read_text(encoding="utf-8")
        ref = np.load(directory / f"{name}.npz")
        pred = bonsai.Booster(model_file=str(directory / f"{name}.json")).predict(ref["X"])
        if not np.array_equal(pred, ref["pred"]):
            raise AssertionError(f"{name}: predictions in a fresh process differ")
        bases.append((name, text, ref["X"]))
    with open("/proc/self/status") as fh:
        vm = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    cap = vm + (1 << 30)                # 1 GiB above what the warm process has mapped
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    scratch = directory / "case.json"
    progress = os.open(directory / "progress", os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    counts, failures = {}, []
    for i in range(n_cases):
        name, text, X = bases[i % len(bases)]
        os.pwrite(progress, f"{i:>10}\n".encode(), 0)
        rng = np.random.default_rng([seed, i])
        data, what = mutate(text, rng)
        try:
            outcome = run_case(bonsai, scratch, data, X)
        except Exception as e:      # noqa: BLE001 -- any other exception fails the case
            outcome = f"FAIL {type(e).__name__}: {e}"[:300]
            if len(failures) < 3:
                outcome += "\n" + traceback.format_exc()[-1500:]
        key = outcome if not outcome.startswith("FAIL") else "FAIL"
        counts[key] = counts.get(key, 0) + 1
        if outcome.startswith("FAIL") and len(failures) < 25:
            failures.append({"case": i, "base": name, "mutation": what[:300],
                             "outcome": outcome})
    print(json.dumps({"cases": n_cases, "bases": names, "cap_bytes": cap, "counts": counts,
                      "failures": failures}))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
