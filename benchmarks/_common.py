"""Shared helpers for the bonsai benchmarks.

* Deterministic synthetic data sets (``DATASETS``: ``higgs_like``, ``year_like``,
  ``higgs_missing``, ``wide_like``, ``multiclass_like``), cached as ``.npy`` files so
  every benchmark subprocess loads exactly the same arrays.
* Peak-memory probes for the *current* process (``/proc/self/status``).
* ``run_child``: run a worker command in a fresh interpreter and parse its JSON.
* Small statistics / table-formatting helpers.

Everything here is standard library + numpy so it can be imported by the
workers before any boosting library is imported.
"""
from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, NamedTuple

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
CACHE_DIR = Path(os.environ.get("BONSAI_BENCH_CACHE",
                                Path(tempfile.gettempdir()) / "bonsai_bench_cache"))
DATA_VERSION = 1          # bump when a generator changes, so stale caches are ignored
TEST_FRACTION = 0.10      # the last 10% of rows is the test set
_CHUNK = 100_000          # rows generated per chunk (bounds the float64 temporaries)
RESULT_PREFIX = "BENCH_RESULT "


# --------------------------------------------------------------------------- data
def _seeded_chunks(n: int, seed: int, chunk: int = _CHUNK):
    """Row chunks ``(start, stop, rng)``; chunk i draws from ``default_rng([seed, i])``,
    so a data set is the same whatever else the process holds in memory."""
    for i, start in enumerate(range(0, n, chunk)):
        yield start, min(n, start + chunk), np.random.default_rng([seed, i])


def higgs_like(n: int = 1_000_000, d: int = 28, seed: int = 20240601):
    """Binary classification with a nonlinear signal (GBDT test AUC about 0.81).

    Like HIGGS: a block of "low-level" noisy features plus "high-level" features
    that are nonlinear functions of them. The label thresholds a latent score made of
    products, sines, squares and an interaction of three features, plus heavy noise.
    Returns X float32 (n, d), y float32 (n,) in {0, 1}.
    """
    if d < 12:
        raise ValueError("higgs_like needs d >= 12")
    X = np.empty((n, d), dtype=np.float32)
    y = np.empty(n, dtype=np.float32)
    for a, b, rng in _seeded_chunks(n, seed):
        m = b - a
        Z = rng.standard_normal((m, d))
        # A few heavy-tailed, non-negative "momentum / mass" style columns.
        Z[:, 0] = np.abs(Z[:, 0]) * np.exp(0.3 * Z[:, 1])
        Z[:, 5] = np.log1p(np.exp(Z[:, 5] * 1.5))
        latent = (0.9 * Z[:, 2] * Z[:, 3]
                  + np.sin(2.0 * Z[:, 4]) * 1.2
                  + 0.5 * (Z[:, 6] ** 2 - 1.0)
                  + 0.6 * np.tanh(Z[:, 7] + Z[:, 8])
                  + 0.4 * Z[:, 9] * Z[:, 10] * np.sign(Z[:, 11])
                  + 0.3 * np.log1p(Z[:, 0]) - 0.3 * Z[:, 5] + 0.35)
        latent += rng.standard_normal(m) * 1.6          # irreducible noise
        # "High-level" features: noisy nonlinear views of the low-level ones.
        if d >= 16:
            Z[:, 12] = Z[:, 2] * Z[:, 3] + 0.5 * rng.standard_normal(m)
            Z[:, 13] = np.sin(2.0 * Z[:, 4]) + 0.5 * rng.standard_normal(m)
            Z[:, 14] = np.hypot(Z[:, 7], Z[:, 8])
            Z[:, 15] = Z[:, 9] * Z[:, 10] + 0.5 * rng.standard_normal(m)
        X[a:b] = Z
        y[a:b] = latent > 0.0
    return X, y


def year_like(n: int = 500_000, d: int = 90, seed: int = 20240602):
    """Regression like YearPredictionMSD: correlated features, target ~ a year.

    Features are a low-rank mix of 12 latent factors plus per-feature noise, so
    columns are correlated the way timbre averages / covariances are. The target is
    a nonlinear function of the factors, centred near 1998 with noise sd 6.
    Returns X float32 (n, d), y float32 (n,).
    """
    k = 12
    load_rng = np.random.default_rng([seed, 10**6])
    loadings = load_rng.standard_normal((k, d)) / np.sqrt(k)
    scales = np.exp(load_rng.uniform(-1.0, 2.0, size=d))     # mixed column scales
    X = np.empty((n, d), dtype=np.float32)
    y = np.empty(n, dtype=np.float32)
    for a, b, rng in _seeded_chunks(n, seed):
        m = b - a
        F = rng.standard_normal((m, k))
        X[a:b] = ((F @ loadings + 0.5 * rng.standard_normal((m, d))) * scales)
        signal = (3.0 * F[:, 0] + 2.0 * np.sin(1.5 * F[:, 1]) + 1.5 * F[:, 2] * F[:, 3]
                  + 1.0 * np.maximum(F[:, 4], 0.0) ** 2 - 1.2 * np.abs(F[:, 5])
                  + 0.8 * np.tanh(F[:, 6] * F[:, 7]))
        y[a:b] = 1998.0 + 2.0 * signal + 6.0 * rng.standard_normal(m)
    return X, y


def higgs_missing(n: int = 1_000_000, d: int = 28, seed: int = 20240603,
                  fraction: float = 0.40):
    """``higgs_like`` (same seed, so the same values) with ``fraction`` of all feature
    values replaced by NaN, missing completely at random (an independent Bernoulli mask
    per value, drawn from its own seeded stream). Labels are unchanged, so the signal
    that survives is weaker than in ``higgs``.
    """
    X, y = higgs_like(n=n, d=d)
    for a, b, rng in _seeded_chunks(n, seed):
        X[a:b][rng.random((b - a, d), dtype=np.float32) < fraction] = np.nan
    return X, y


_WIDE_CHUNK = 10_000     # 10k x 2000 float32 temporaries (80 MB) per chunk


def wide_like(n: int = 100_000, d: int = 2000, seed: int = 20240604, n_informative: int = 40):
    """Binary classification on many 0/1 features (bag-of-words / one-hot like).

    Column j is 1 with probability p_j (log-uniform in [0.01, 0.5]). ``n_informative``
    columns, at fixed random positions, carry the signal: a linear part, 12 pairwise
    ANDs and 4 XORs; the other columns are noise. Label = latent + logistic noise > 0
    (centred so classes are roughly balanced). Returns X float32 (n, d) in {0, 1},
    y float32 (n,) in {0, 1}.
    """
    if d < n_informative:
        raise ValueError(f"wide_like needs d >= {n_informative}")
    meta = np.random.default_rng([seed, 10**6])
    p = np.exp(meta.uniform(np.log(0.01), np.log(0.5), size=d)).astype(np.float32)
    cols = meta.choice(d, size=n_informative, replace=False)
    p[cols] = meta.uniform(0.1, 0.5, size=n_informative)   # informative: not too rare
    w = meta.normal(0.0, 1.0, size=n_informative)
    pairs = cols[meta.permutation(n_informative)[:24]].reshape(12, 2)
    w_pairs = meta.normal(0.0, 1.5, size=12)
    xors = cols[meta.permutation(n_informative)[:8]].reshape(4, 2)
    w_xors = meta.choice([-1.2, 1.2], size=4)
    # Expected latent (E[x] = p, independent columns) to centre the label near 50/50.
    p64 = p.astype(np.float64)
    centre = (w @ p64[cols] + w_pairs @ (p64[pairs[:, 0]] * p64[pairs[:, 1]])
              + w_xors @ (p64[xors[:, 0]] + p64[xors[:, 1]]
                          - 2 * p64[xors[:, 0]] * p64[xors[:, 1]]))
    X = np.empty((n, d), dtype=np.float32)
    y = np.empty(n, dtype=np.float32)
    for a, b, rng in _seeded_chunks(n, seed, _WIDE_CHUNK):
        Xc = X[a:b]
        np.less(rng.random((b - a, d), dtype=np.float32), p, out=Xc, casting="unsafe")
        latent = (Xc[:, cols].astype(np.float64) @ w
                  + (Xc[:, pairs[:, 0]] * Xc[:, pairs[:, 1]]).astype(np.float64) @ w_pairs
                  + (Xc[:, xors[:, 0]] != Xc[:, xors[:, 1]]).astype(np.float64) @ w_xors
                  - centre)
        latent += rng.logistic(0.0, 0.6, size=b - a)
        y[a:b] = latent > 0.0
    return X, y


def multiclass_like(n: int = 200_000, d: int = 50, seed: int = 20240605, n_classes: int = 10):
    """10-class classification with nonlinear class scores (GBDT accuracy about 0.65).

    Columns are standard normal, some mapped to skewed / bounded scales. The score
    of class k combines a linear map of 10 columns, tanh of 10 more, a class-specific
    bump on one column and a product of two; the label is the arg max of the scores
    plus Gumbel noise (a noisy softmax choice). Columns 30.. are pure noise.
    Returns X float32 (n, d), y float32 (n,) in {0, ..., n_classes - 1}.
    """
    if d < 30:
        raise ValueError("multiclass_like needs d >= 30")
    k = n_classes
    meta = np.random.default_rng([seed, 10**6])
    W = meta.normal(0.0, 0.8, size=(10, k))
    V = meta.normal(0.0, 1.0, size=(10, k))
    centres = meta.uniform(-1.5, 1.5, size=k)
    bump_col = 20 + meta.integers(0, 5, size=k)
    prod_cols = 25 + meta.integers(0, 5, size=(k, 2))
    bias = meta.normal(0.0, 0.3, size=k)                    # mildly unbalanced classes
    X = np.empty((n, d), dtype=np.float32)
    y = np.empty(n, dtype=np.float32)
    for a, b, rng in _seeded_chunks(n, seed):
        m = b - a
        Z = rng.standard_normal((m, d))
        S = Z[:, :10] @ W + np.tanh(1.5 * Z[:, 10:20]) @ V + bias
        S -= 0.8 * (Z[:, bump_col] - centres) ** 2
        S += 0.6 * Z[:, prod_cols[:, 0]] * Z[:, prod_cols[:, 1]]
        S += rng.gumbel(0.0, 1.0, size=(m, k))
        y[a:b] = np.argmax(S, axis=1)
        # Present some columns on other scales (trees don't care, binning must cope).
        Z[:, 1] = np.exp(Z[:, 1])
        Z[:, 12] = Z[:, 12] * 1000.0 + 5000.0
        Z[:, 31] = np.round(Z[:, 31] * 2.0)                  # a low-cardinality column
        X[a:b] = Z
    return X, y


class Data(NamedTuple):
    gen: Callable
    rows: int             # default total rows (train + test)
    features: int
    task: str             # "binary" | "regression" | "multiclass"
    n_classes: int = 1    # > 2 only for "multiclass"
    test_fraction: float = TEST_FRACTION   # the last rows held out (``split``)


DATASETS = {
    "higgs": Data(higgs_like, 1_000_000, 28, "binary", 2),
    "year": Data(year_like, 500_000, 90, "regression"),
    "higgs-missing": Data(higgs_missing, 1_000_000, 28, "binary", 2),
    "wide": Data(wide_like, 100_000, 2000, "binary", 2),
    "multiclass": Data(multiclass_like, 200_000, 50, "multiclass", 10),
}


def split(X, y, test_fraction: float = TEST_FRACTION):
    """Deterministic split: the last ``test_fraction`` of the rows is the test set."""
    cut = int(round(len(y) * (1.0 - test_fraction)))
    return X[:cut], y[:cut], X[cut:], y[cut:]


def _cache_path(data: str, n: int) -> Path:
    return CACHE_DIR / f"{data}_n{n}_d{DATASETS[data].features}_v{DATA_VERSION}"


def ensure_cached(data: str, n: int | None = None) -> Path:
    """Generate data set ``data`` with ``n`` rows once and store train/test .npy files."""
    gen, default_n, d = DATASETS[data][:3]
    n = int(n or default_n)
    path = _cache_path(data, n)
    names = ("X_train", "y_train", "X_test", "y_test")
    if all((path / f"{k}.npy").exists() for k in names):
        return path
    path.mkdir(parents=True, exist_ok=True)
    X, y = gen(n=n, d=d)
    for k, arr in zip(names, split(X, y, DATASETS[data].test_fraction)):
        tmp = path / f".{k}.{os.getpid()}.npy"
        np.save(tmp, np.ascontiguousarray(arr))
        os.replace(tmp, path / f"{k}.npy")       # atomic: readers never see a partial file
    return path


def load_cached(data: str, n: int | None = None):
    """Load (X_train, y_train, X_test, y_test) fully into memory (no mmap)."""
    path = ensure_cached(data, n)
    return tuple(np.load(path / f"{k}.npy", mmap_mode=None)
                 for k in ("X_train", "y_train", "X_test", "y_test"))


# ------------------------------------------------------------------------- memory
def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_mib() -> float:
    """Current resident set size of this process, MiB."""
    kib = _status_kib("VmRSS")
    if kib is None:      # non-Linux fallback: the peak is the best we have
        return peak_rss_mib()
    return kib / 1024.0


def peak_rss_mib() -> float:
    """Peak resident set size of this process so far (since the last reset), MiB."""
    kib = _status_kib("VmHWM")
    if kib is None:
        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        if sys.platform == "darwin":
            kib //= 1024                     # macOS reports bytes
    return kib / 1024.0


def reset_peak_rss() -> bool:
    """Reset this process's peak RSS to its current RSS (Linux >= 4.0).

    Lets a worker exclude transient peaks that happened before the measured region
    (e.g. LLVM compiling kernels during a warm-up). Returns False if unsupported.
    """
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


# ----------------------------------------------------------------------- children
def bonsai_warm_contexts():
    """The two settings a bonsai warm-up fit runs under, so it loads every kernel of a
    large fit: as is, and with bonsai's work-splitting thresholds lowered
    (``bonsai._warmup._parallel_thresholds``; a checkout without it: as is twice)."""
    import contextlib
    try:
        from bonsai._warmup import _parallel_thresholds
    except ImportError:
        _parallel_thresholds = contextlib.nullcontext
    return contextlib.nullcontext, _parallel_thresholds


def bonsai_kernels_loaded() -> int:
    """How many compiled kernel versions bonsai's modules hold (numba dispatchers'
    overloads, serial twins included): the same before and after a timed fit when
    the warm-up loaded everything the fit uses."""
    from numba.core.registry import CPUDispatcher
    n, seen = 0, set()
    for name, mod in list(sys.modules.items()):
        if mod is None or not (name == "bonsai" or name.startswith("bonsai.")):
            continue
        for v in list(vars(mod).values()):
            for d in (v, getattr(v, "serial", None)):
                if isinstance(d, CPUDispatcher) and id(d) not in seen:
                    seen.add(id(d))
                    n += len(d.overloads)
    return n


def child_env(threads: int, extra: dict | None = None) -> dict:
    """Environment for a worker: thread counts pinned for every runtime."""
    env = dict(os.environ)
    for var in ("OMP_NUM_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "MKL_NUM_THREADS"):
        env[var] = str(threads)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO_ROOT)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env.update(extra or {})
    return env


def emit_result(result: dict) -> None:
    """Called by a worker: print its result as one JSON line the parent can find."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def _machine_busy_s() -> float | None:
    """CPU-seconds all processes on the machine have spent busy (Linux /proc/stat)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)      # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


class contention:
    """``with contention(n):`` keeps ``n`` cores busy for the block with processes that
    spin in a Python loop: a noisy neighbour on purpose (``bench_small.py --contend``),
    to measure how each library's threads cope with a core they cannot have.  The
    spinners run from before the child starts until after it ends, so the run is
    flagged BUSY (``busy_note``), as it should be."""

    def __init__(self, n_cores: int):
        self.n = int(n_cores)
        self.procs: list[subprocess.Popen] = []

    def __enter__(self):
        self.procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                      for _ in range(self.n)]
        if self.procs:
            time.sleep(0.3)          # let them reach the loop
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            p.kill()
        for p in self.procs:
            p.wait(timeout=30)
        self.procs = []
        return False


def run_child(argv: list[str], env: dict, timeout: float, cwd=None,
              raw: bool = False) -> dict:
    """Run ``python argv...`` in a fresh process (in ``cwd``, default the repository
    root); return its JSON result.

    Always returns a dict: on failure it holds ``error`` (the last lines of stderr or
    the reason) so callers can print it and carry on. ``wall_s`` is the whole
    process's wall-clock time, interpreter start included, ``cpu_s`` its CPU time (user +
    sys, all its threads). ``others_cores`` is the
    average number of cores that *other* processes kept busy meanwhile: a noisy
    neighbour shows up there (results from a busy machine should not be quoted).
    ``raw``: a command that prints no JSON result; its stdout is returned as ``stdout``.
    """
    busy0, kids0 = _machine_busy_s(), _children_cpu_s()
    t0 = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, *argv], env=env, capture_output=True,
                              text=True, timeout=timeout, cwd=str(cwd or REPO_ROOT))
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f}s"}
    wall = time.perf_counter() - t0
    busy1 = _machine_busy_s()
    cpu = _children_cpu_s() - kids0
    others = None
    if busy0 is not None and busy1 is not None and wall > 0:
        others = max(0.0, (busy1 - busy0) - cpu) / wall
    if raw and proc.returncode == 0:
        return {"stdout": proc.stdout, "wall_s": wall, "cpu_s": cpu, "others_cores": others}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            res = json.loads(line[len(RESULT_PREFIX):])
            res.setdefault("wall_s", wall)
            res["cpu_s"] = cpu
            res["others_cores"] = others
            return res
    tail = [ln for ln in (proc.stderr or proc.stdout).strip().splitlines() if ln.strip()]
    msg = tail[-1] if tail else f"exit code {proc.returncode}, no output"
    return {"error": f"rc={proc.returncode}: {msg[:300]}", "wall_s": wall}


# ------------------------------------------------------------------------- report
BUSY_CORES = 0.25   # flag a run if other processes averaged more than this many cores


def dump_json(path, runs, summary):
    """Write ``{"runs": ..., "summary": ...}`` to ``path`` (``--json``), if given."""
    if path:
        with open(path, "w") as f:
            json.dump({"runs": runs, "summary": summary}, f, indent=1)


def print_results(title, headers, libs, results, med, repeats, row):
    """Print a per-library table of medians (``row(lib, medians)`` gives the columns
    after "library" and "ok"), then the run warnings."""
    rows, errors = [], []
    for lib in libs:
        errors += [f"  {lib}: {r['error']}" for r in results[lib] if "error" in r][-1:]
        if lib not in med:
            rows.append([lib, f"0/{repeats}", "ERROR"] + ["-"] * (len(headers) - 3))
        else:
            rows.append([lib, f"{med[lib]['n_ok']}/{repeats}"] + row(lib, med[lib]))
    print(f"\n--- {title} ---")
    print_table(headers, rows)
    print_run_warnings(errors, results, libs)


def print_run_warnings(errors, results, libs):
    """After a results table: the last error per library, and a warning when runs
    shared the CPU with other processes."""
    if errors:
        print("errors (last per library):\n" + "\n".join(errors))
    busy = [r for lib in libs for r in results[lib] if busy_note(r)]
    if busy:
        worst = max(r["others_cores"] for r in busy)
        print(f"WARNING: {len(busy)} run(s) shared the CPU with other processes (up to "
              f"{worst:.1f} cores busy): timings are unreliable, rerun on an idle machine.")


def busy_note(res: dict) -> str:
    o = res.get("others_cores")
    return f"  [BUSY: others used {o:.1f} cores]" if o is not None and o > BUSY_CORES else ""


def median_or_none(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def fmt(value, spec: str = ".2f", missing: str = "-") -> str:
    return missing if value is None else format(value, spec)


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    """Plain-text table, first column left-aligned, the rest right-aligned."""
    widths = [max(len(str(r[i])) for r in [headers] + rows) for i in range(len(headers))]

    def line(cells):
        return "  ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths)))
    print(line(headers))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print(line(r))
