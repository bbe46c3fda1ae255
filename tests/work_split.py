"""Test helpers for the thread-count determinism tests: make a fit on small data really
split its work between threads, and record that it did.

The CPU backend runs a kernel on one thread below ``MIN_ROWS_PER_THREAD`` rows per
thread (the partition below ``MIN_PARTITION_ROWS_PER_THREAD``, split scans below
``MIN_PARALLEL_SPLIT_NODES`` nodes, the per-round streaming kernels below
``MIN_PARALLEL_STREAM_ROWS`` rows, prediction and SHAP below ``SERIAL_PREDICT_ROWS``
rows), so a test on a few thousand rows compares a serial fit with a serial fit
unless it lowers those thresholds: ``split_finely`` sets them to ``FINE``.

``WorkLog`` wraps the compiled split step (``backends.cpu.step.split_nodes``: the
root, then one call per level or leaf-wise split, for every grower) and the
prediction and SHAP kernels.  For each split step it records numba's thread count
at the call and how many threads the backend's own work plans cut the rows into
(``step.plan_pieces`` over the root's rows, the partitioned nodes' rows and the
children whose histograms are filled, those from ``step.plan_children``), and how
many nodes a parallel split scan got; for each kernel call, whether the parallel
kernel or its serial twin ran, and numba's thread count.  ``check_fit`` and
``check_kernels`` assert that a fit or a SHAP call at ``n`` threads really ran on
``n`` threads.

Only entry points that compiled code never calls are replaced (numba binds the
kernels a compiled function calls when it compiles it), so the wrapped fit runs
exactly the kernels an unwrapped one runs.  Usable without pytest (the subprocess
of ``many_threads_run.py``): pass ``setattr`` or ``monkeypatch.setattr``.
"""
import inspect

import numba
import numpy as np

from bonsai.backends import cpu
from bonsai.backends.cpu import predict as _pred
from bonsai.backends.cpu import predict_binned as _heaps
from bonsai.backends.cpu import shap as _shap
from bonsai.backends.cpu import step as _step
from bonsai import class_trees as _class_trees
from bonsai import grow as _grow
from bonsai.nodes import START, STOP

#: work-split thresholds that cut a few hundred rows between threads
FINE = {"MIN_ROWS_PER_THREAD": 64, "MIN_PARTITION_ROWS_PER_THREAD": 64,
        "MIN_PARALLEL_SPLIT_NODES": 1, "MIN_PARALLEL_STREAM_ROWS": 64,
        "SERIAL_PREDICT_ROWS": 32,
        "MIN_PARALLEL_PREDICT_WORK": 32}

#: the parallel kernels the prediction and SHAP paths call from Python: (module, name)
KERNELS = ((_shap, "shap_values"), (_shap, "shap_interactions"), (_pred, "predict_records"),
           (_pred, "predict_nodes"), (_pred, "predict_oblivious"), (_pred, "predict_leaf"),
           (_heaps, "predict_heaps"))


def split_finely(set_attr=setattr):
    """Lower the backend's work-split thresholds to ``FINE`` (``set_attr``:
    ``monkeypatch.setattr`` in a test, so they are restored afterwards).  A
    multiclass round's trees are then grown in turn, each split step on every thread,
    instead of side by side (``class_trees.MAX_SIDE_ROWS``; side by side is compared
    with in turn in ``test_class_trees.py``)."""
    for name, value in FINE.items():
        set_attr(cpu, name, value)
    set_attr(_class_trees, "MAX_SIDE_ROWS", -1)


def _plan_threads(starts, stops, n_threads, min_rows):
    """Threads ``step.plan_pieces`` cuts the ranges into (0 for no range)."""
    if starts.shape[0] == 0:
        return 0
    ptr = _step.plan_pieces(np.ascontiguousarray(starts, np.int64),
                            np.ascontiguousarray(stops, np.int64), n_threads, min_rows)[3]
    return ptr.shape[0] - 1


class _KernelSpy:
    """Calls ``kernel``, recording (name, parallel kernel?, numba threads, rows)."""

    def __init__(self, log, name, kernel, parallel=True):
        self.log, self.name, self.kernel, self.parallel = log, name, kernel, parallel
        if parallel:
            self.serial = _KernelSpy(log, name, kernel.serial, False)

    def __call__(self, *args):
        self.log.kernels.append((self.name, self.parallel, numba.get_num_threads(),
                                 args[0].shape[0]))
        return self.kernel(*args)


def _thread_plan(par):
    """(n_threads, min_rows, min_partition_rows, min_parallel_nodes) of the split
    step's ``par`` argument (``step.thread_plan``; None: one thread)."""
    return tuple(int(v) for v in _step.thread_plan(par))


class WorkLog:
    """What the split steps and prediction kernels of a fit ran with (see the module
    docstring).  ``steps``: one dict per split step; ``kernels``: one tuple per
    kernel call.  ``clear()`` between fits."""

    def __init__(self):
        self.steps = []
        self.kernels = []
        self._split_nodes = _step.split_nodes
        self._sig = inspect.signature(self._split_nodes.py_func)

    @classmethod
    def install(cls, set_attr=setattr):
        log = cls()
        # leaf-wise trees take the grow loop's Python path, one recorded split step
        # per split (the compiled loop grows the same trees: test_leafwise_compiled)
        set_attr(_grow, "LEAFWISE_COMPILED", False)
        set_attr(_step, "split_nodes", log._step)
        for mod, name in KERNELS:
            set_attr(mod, name, _KernelSpy(log, name, getattr(mod, name)))
        return log

    def clear(self):
        self.steps.clear()
        self.kernels.clear()

    def _step(self, *args):
        a = self._sig.bind(*args).arguments
        t, batch = a["t"], a["batch"]
        n_threads, min_rows, min_partition_rows, min_parallel_nodes = _thread_plan(a["par"])
        rec = {"numba_threads": numba.get_num_threads(), "n_threads": n_threads,
               "root": batch.shape[0] == 0, "partition": 0}
        if rec["root"]:
            fill_start, fill_stop = t[:1, START].copy(), t[:1, STOP].copy()
            scan_nodes = 1
            out = self._split_nodes(*args)
        else:
            starts, stops, _, _, _, _, parent_slot, _ = _step.batch_columns(
                t, a["t_bits"], batch, a["feature_missing_bin"])
            rec["partition"] = _plan_threads(starts, stops, n_threads, min_partition_rows)
            out = self._split_nodes(*args)
            left = a["first"] + 2 * np.arange(batch.shape[0])
            nleft = t[left, STOP] - t[left, START]
            child_slot = np.empty(2 * batch.shape[0], np.int64)
            fill_start, fill_stop, _, _ = _step.plan_children(
                starts, stops, nleft, _step.local_child_rows(starts, stops, nleft), parent_slot,
                a["new_slot"], a["child_ok"], a["min_split_rows"], child_slot)
            scan_nodes = int((child_slot >= 0).sum())
        hist = _plan_threads(fill_start, fill_stop, n_threads, min_rows)
        if a["layout"] == _step.DENSE_BLOCKS:  # threads take feature blocks, not rows
            n_blocks = -(-(a["feat_off"].shape[0] - 1) // a["X_dense"].shape[1])
            hist = min(hist, n_blocks)
        rec["hist"] = hist
        rec["scan_parallel_nodes"] = scan_nodes if scan_nodes >= min_parallel_nodes else 0
        self.steps.append(rec)
        return out

    def summary(self):
        """Over the recorded split steps: the numba thread counts and n_threads
        arguments seen (sets) and the most threads of the root's histogram, of any
        histogram fill and of any partition, and the most nodes of a parallel scan."""
        s = self.steps
        return {"split_steps": len(s),
                "numba_threads": sorted({r["numba_threads"] for r in s}),
                "n_threads": sorted({r["n_threads"] for r in s}),
                "root_hist": max([r["hist"] for r in s if r["root"]], default=0),
                "hist": max([r["hist"] for r in s], default=0),
                "partition": max([r["partition"] for r in s], default=0),
                "scan_parallel_nodes": max([r["scan_parallel_nodes"] for r in s], default=0)}

    def check_fit(self, n, what="fit"):
        """Assert the recorded split steps ran on ``n`` threads: numba set to ``n`` in
        every step, the root's histogram and some partition and histogram fill cut
        into ``n`` thread pieces (one for ``n == 1``), and for ``n >= 2`` a parallel
        split scan over two or more nodes.  (Wide data, whose histograms are cut by
        feature blocks, needs at least ``n`` blocks.)  Returns the summary."""
        need_threads(n)
        s = self.summary()
        want = {"numba_threads": [n], "n_threads": [n], "root_hist": n, "hist": n,
                "partition": n}
        bad = {k: s[k] for k, v in want.items() if s[k] != v}
        if n >= 2 and s["scan_parallel_nodes"] < 2:
            bad["scan_parallel_nodes"] = s["scan_parallel_nodes"]
        if not s["split_steps"] or bad:
            raise AssertionError(f"{what} at n_threads={n} did not run on {n} threads: "
                                 f"{bad or 'no split step ran'} (summary {s})")
        return s

    def check_kernels(self, n, name, what="predict"):
        """Assert kernel ``name`` ran, always as the parallel kernel with numba set to
        ``n`` threads."""
        need_threads(n)
        calls = [k for k in self.kernels if k[0] == name]
        if not calls or any((not par) or threads != n for _, par, threads, _ in calls):
            raise AssertionError(f"{what} at n_threads={n}: {name} calls (name, parallel, "
                                 f"numba threads, rows) {calls}; want the parallel kernel "
                                 f"on {n} threads")


def need_threads(n):
    """Fail (never skip) when numba cannot run ``n`` threads here."""
    if numba.config.NUMBA_NUM_THREADS < n:
        raise AssertionError(
            f"numba runs at most {numba.config.NUMBA_NUM_THREADS} thread(s) here, so a test "
            f"at {n} threads cannot differ from one at fewer; run the tests with "
            f"NUMBA_NUM_THREADS={n} (or on more CPUs)")
