"""``bonsai.dask.train``: one fit over the workers holding a ``DaskDataset``.

The driver:

1. bins the data where it lives (``DaskDataset``), and finds which worker holds
   each binned partition (``who_has``).  The workers holding training rows are the
   ranks, in the order of their first partition; a validation partition goes to the
   rank holding it, else to a rank by its index.
2. takes a ``distributed.MultiLock`` on those workers (two fits never share
   workers by accident) and subscribes to each rank's event topic (the scheduler
   logs a worker's ``remove-worker`` there and to ``"all"``; a per-worker topic
   leaves the client's own ``"all"`` handler in place);
3. submits one long-lived task per rank (``_fit_rank``, ``workers=[addr],
   allow_other_workers=True, pure=False``).  Each checks that it runs where its
   shard lives (a rescheduled task errors instead of waiting in ``no-worker``),
   stacks its partitions into one ``bonsai.Dataset`` whose ``global_rows`` give
   each row's place in the data's order, and runs the ordinary ``bonsai.train``
   with a ``DaskComm``: histograms, counts, scales and gathers go worker to worker;
4. waits.  A ``remove-worker`` event for a rank aborts the survivors (their pending
   receives fail at once) and raises ``WorkerLostError(worker, round, level)``; a
   rank's own error is re-raised.  Every rank returns a SHA-256 of its model text;
   the driver checks they are equal and returns rank 0's Booster.

The model is bit-identical to ``bonsai.train`` on the concatenated data binned with
the same edges (``bonsai.Dataset(X, label=y, reference=dtrain.template)``), for any
number of workers and any placement of the partitions.
"""
import hashlib
import os
import sys
import threading
import time
import uuid

import numpy as np

from ..callbacks import TrainingCallback
from ._errors import WorkerLostError
from .data import DaskDataset

#: seconds a rank waits for a peer's message before failing (a host that vanished
#: silently; a killed worker is noticed within milliseconds by the scheduler)
DEFAULT_TIMEOUT_S = 600.0
_POLL_S = 0.05

# fit id -> {"round": int, "calls": callable} on this worker process: what an abort
# reports back to the driver (a failed fit's entry stays, the last _KEEP_FAILED)
_RUNNING = {}
_KEEP_FAILED = 16


class _RoundTracker(TrainingCallback):
    """A callback recording the round a rank is in (reported when a peer is lost)."""

    def __init__(self, state):
        self.state = state

    def before_iteration(self, booster, it, evals_log):
        self.state["round"] = it
        return False


class _HeapForTheFit:
    """Inside a rank's task: glibc's allocator keeps freed memory for reuse while the
    fit runs, then goes back to the worker's settings and gives it back.

    A Dask nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``, which also fixes
    glibc's mmap threshold at 128 KiB: every histogram batch received (MBs per tree
    level) then lands in freshly mapped pages, about 300k page faults per rank in 50
    trees of depth 8 on 1M rows.  Here the mmap and trim thresholds are raised for the
    fit (``mallopt``) and restored after it, with a ``malloc_trim(0)``.  Not glibc (or
    no such variable set): nothing is changed."""

    M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3

    def __init__(self, size=256 << 20):
        self.size = size
        self.libc = None
        trim = os.environ.get("MALLOC_TRIM_THRESHOLD_")
        if trim is None or not sys.platform.startswith("linux"):
            return
        try:
            import ctypes
            libc = ctypes.CDLL(None)
            self.trim = int(trim)
            self.libc = libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") \
                else None
        except (OSError, ValueError):
            self.libc = None

    def __enter__(self):
        if self.libc is not None:
            self.libc.mallopt(self.M_MMAP_THRESHOLD, self.size)
            self.libc.mallopt(self.M_TRIM_THRESHOLD, self.size)
        return self

    def __exit__(self, *exc):
        if self.libc is not None:
            self.libc.mallopt(self.M_MMAP_THRESHOLD, 128 << 10)   # glibc's default
            self.libc.mallopt(self.M_TRIM_THRESHOLD, self.trim)
            self.libc.malloc_trim(0)


def _segments(starts, sizes):
    """(S, 3) global_rows of parts with global ``starts`` and ``sizes`` stacked in
    order; consecutive parts merge into one segment."""
    segs = []
    lo = 0
    for g, n in zip(starts, sizes):
        g, n = int(g), int(n)
        if segs and segs[-1][1] + segs[-1][2] == g:
            segs[-1][2] += n
        else:
            segs.append([lo, g, n])
        lo += n
    return np.array(segs, np.int64).reshape(-1, 3)


def _fit_rank(rank, addrs, fit_id, params, template, train, valids, names, callbacks,
              timeout):
    """One rank of the fit, run on worker ``addrs[rank]``: (model SHA-256, on rank 0
    the Booster's pickled state -- its model text, evals_result, n_threads -- else
    None, collective stats)."""
    from distributed import get_worker

    import bonsai
    from bonsai.dataset import Dataset
    from .collective import DaskComm

    worker = get_worker()
    if worker.address != addrs[rank]:
        raise RuntimeError(f"bonsai.dask: rank {rank} ran on {worker.address}, but its shard "
                           f"lives on {addrs[rank]} (that worker was lost)")
    parts, starts, sizes, empty = train
    ds = Dataset._stack(parts, template, empty)
    ds.global_rows = _segments(starts, sizes)
    vsets = []
    for vparts, vstarts, vsizes, vempty in valids:
        v = Dataset._stack(vparts, template, vempty)
        v.global_rows = _segments(vstarts, vsizes)
        vsets.append(v)
    p = dict(params)
    if p.get("n_threads") is None:
        p["n_threads"] = int(worker.state.nthreads)
    callbacks = list(callbacks or [])
    if rank != 0:   # one copy of the progress display and evaluation lines: rank 0's
        from bonsai.callbacks import EvaluationMonitor
        from bonsai.progress import ProgressBar
        callbacks = [cb for cb in callbacks
                     if not isinstance(cb, (EvaluationMonitor, ProgressBar))]
    state = {"round": None}
    comm = DaskComm(fit_id, rank, list(addrs), timeout=timeout)
    state["calls"] = lambda: comm.calls
    _RUNNING[fit_id] = state
    while len(_RUNNING) > _KEEP_FAILED:      # failed fits' states, kept for the driver
        _RUNNING.pop(next(iter(_RUNNING)))
    t0 = time.perf_counter()
    try:
        with _HeapForTheFit():
            booster = bonsai.train(p, ds, valid_sets=vsets or None,
                                   valid_names=names or None,
                                   callbacks=callbacks + [_RoundTracker(state)],
                                   _comm=comm)
        _RUNNING.pop(fit_id, None)
    finally:
        comm.close()
    text = booster.model_to_string()
    digest = hashlib.sha256(text.encode()).hexdigest()
    # rank 0 sends the model as the text just hashed (pickling the Booster would
    # write it again: 0.2 s for 200 trees of depth 8)
    state = None
    if rank == 0:
        state = {"model": text, "evals_result": booster.evals_result,
                 "n_threads": booster.n_threads}
    stats = {"calls": int(comm.calls), "bytes_sent": int(comm.bytes_sent),
             "seconds": float(comm.seconds), "n_trees": int(booster.num_trees()),
             "train_seconds": time.perf_counter() - t0}
    return digest, state, stats


def _abort(fit_id, reason, dask_worker=None):
    """Run on a surviving rank: fail the fit's pending receives; (round, calls)."""
    from .collective import abort_fit
    state = _RUNNING.get(fit_id)
    where = (None, None) if state is None else (state["round"], state["calls"]())
    abort_fit(fit_id, reason, dask_worker=dask_worker)
    return where


def _placement(client, dsets):
    """(ranks' addresses, for each DaskDataset the rank of each of its parts)."""
    who = client.who_has([f for d in dsets for f in d.parts])
    first = {}                      # training rows' worker -> its first partition
    for i, f in enumerate(dsets[0].parts):
        holders = sorted(who.get(f.key) or ())
        if not holders:
            raise RuntimeError(f"bonsai.dask: training partition {i} is on no worker")
        first.setdefault(holders[0], i)
    addrs = sorted(first, key=first.get)
    rank_of = {a: r for r, a in enumerate(addrs)}
    owners = []
    for d in dsets:
        own = []
        for i, f in enumerate(d.parts):
            holders = [rank_of[a] for a in sorted(who.get(f.key) or ()) if a in rank_of]
            own.append(holders[0] if holders else i % len(addrs))
        owners.append(own)
    return addrs, owners


def _shard(d, owner, rank):
    mine = [i for i, r in enumerate(owner) if r == rank]
    return ([d.parts[i] for i in mine], d.starts[mine], d.sizes[mine], d.empty())


def train(client, params, data, label=None, *, weight=None, init_score=None,
          valid_sets=None, valid_names=None, callbacks=None, feature_names=None,
          categorical_features=None, timeout=None):
    """Train a Booster on a Dask cluster; the model equals ``bonsai.train`` on the
    concatenated data binned with the same edges.

    Parameters
    ----------
    client : distributed.Client, or None for the default client
    params : dict -- as ``bonsai.train`` (``max_bin`` and ``random_state`` also set the
        binning of ``data`` when it is not a DaskDataset)
    data : dask array / dask DataFrame, or a ``DaskDataset``
    label, weight, init_score : dask collections partitioned like ``data`` (only when
        ``data`` is not a DaskDataset)
    valid_sets : list of ``DaskDataset`` (binned with ``reference=`` the training
        set's) or ``(X, y)`` / ``(X, y, w)`` tuples of dask collections
    valid_names, callbacks : as ``bonsai.train`` (callbacks run on every rank, except
        ``EvaluationMonitor`` and ``ProgressBar``: rank 0's only, one display)
    timeout : seconds a rank waits for a peer, and the driver for the workers' lock
        (default 600)

    Returns a local ``bonsai.Booster`` (``evals_result``, ``best_iteration`` as
    ``bonsai.train``'s) with ``comm_stats``: one dict per rank (``calls``,
    ``bytes_sent``, ``seconds`` in collectives, ``n_trees``, ``train_seconds``: the
    rank's whole ``bonsai.train``).  Raises
    ``WorkerLostError`` when a worker holding a shard leaves mid-fit.
    """
    from distributed import MultiLock, default_client
    from .collective import ensure_plugin

    client = default_client() if client is None else client
    if not isinstance(params, dict):
        raise TypeError(f"params must be a dict, got {type(params).__name__}")
    timeout = DEFAULT_TIMEOUT_S if timeout is None else float(timeout)
    if not timeout > 0:
        raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isinstance(data, DaskDataset):
        if any(v is not None for v in (label, weight, init_score, feature_names,
                                       categorical_features)):
            raise ValueError("label, weight, init_score, feature_names and "
                             "categorical_features go to DaskDataset(...) when data is one")
        dtrain = data
    else:
        dtrain = DaskDataset(client, data, label, weight, init_score,
                             feature_names=feature_names,
                             categorical_features=categorical_features,
                             max_bin=params.get("max_bin", 255),
                             random_state=params.get("random_state") or 0)
    if not dtrain.has_label:
        raise ValueError("label is required for training")
    dvalid = []
    for i, v in enumerate(valid_sets or []):
        if isinstance(v, DaskDataset):
            if v.template is not dtrain.template:
                raise ValueError(f"valid_sets[{i}] was binned with other edges; build it "
                                 "with DaskDataset(..., reference=the training DaskDataset)")
            dvalid.append(v)
        elif isinstance(v, (tuple, list)) and len(v) in (2, 3):
            dvalid.append(DaskDataset(client, v[0], v[1], v[2] if len(v) == 3 else None,
                                      reference=dtrain))
        else:
            raise TypeError(f"valid_sets[{i}] must be a DaskDataset or an (X, y) / (X, y, w) "
                            f"tuple of dask collections, got {type(v).__name__}")
    names = list(valid_names) if valid_names is not None else None
    ensure_plugin(client)
    addrs, owners = _placement(client, [dtrain, *dvalid])
    fit_id = uuid.uuid4().hex
    lock = MultiLock(names=[f"bonsai-worker-{a}" for a in addrs], client=client)
    if not lock.acquire(timeout=timeout):
        raise TimeoutError(f"bonsai.dask: the workers {addrs} stayed busy with another fit "
                           f"for {timeout} s")
    try:
        return _run(client, fit_id, addrs, owners, params, dtrain, dvalid, names,
                    callbacks, timeout)
    finally:
        lock.release()


def _run(client, fit_id, addrs, owners, params, dtrain, dvalid, names, callbacks, timeout):
    lost = []
    seen = threading.Event()

    def watch(addr):
        def on_event(event):
            msg = event[1] if isinstance(event, tuple) and len(event) == 2 else event
            if isinstance(msg, dict) and msg.get("action") == "remove-worker":
                lost.append(addr)
                seen.set()
        return on_event

    # the scheduler logs a worker's removal to the topic named by its address (and to
    # "all"): one subscription per rank leaves the client's other handlers alone, and
    # the MultiLock keeps two fits from watching the same worker
    for a in addrs:
        client.subscribe_topic(a, watch(a))
    try:
        tmpl = client.scatter(dtrain.template, broadcast=True, hash=False)
        futures = []
        for r, a in enumerate(addrs):
            train_shard = _shard(dtrain, owners[0], r)
            valid_shards = [_shard(v, owners[1 + j], r) for j, v in enumerate(dvalid)]
            futures.append(client.submit(
                _fit_rank, r, addrs, fit_id, params, tmpl, train_shard, valid_shards, names,
                callbacks, timeout, key=f"bonsai-fit-{fit_id}-rank{r}", workers=[a],
                allow_other_workers=True, pure=False))
        while True:
            if seen.is_set():
                _lost(client, fit_id, addrs, lost[0], futures)
            errored = [f for f in futures if f.status == "error"]
            if errored:
                time.sleep(_POLL_S)          # a lost worker's event may be on its way
                if seen.is_set():
                    _lost(client, fit_id, addrs, lost[0], futures)
                exc = errored[0].exception()
                client.run(_abort, fit_id, "a peer rank failed", workers=addrs,
                           on_error="ignore")
                client.cancel(futures)
                raise exc
            if all(f.status == "finished" for f in futures):
                break
            if any(f.status == "cancelled" for f in futures):
                raise RuntimeError("bonsai.dask: the fit's tasks were cancelled")
            time.sleep(_POLL_S)
        results = client.gather(futures)
    finally:
        for a in addrs:      # before the client closes (else the scheduler logs an error)
            try:
                client.unsubscribe_topic(a)
            except ValueError:
                pass
    digests = {r[0] for r in results}
    if len(digests) != 1:
        raise RuntimeError(f"bonsai.dask: the ranks built different models ({len(digests)} "
                           "distinct); please report this")
    from bonsai.booster import Booster
    booster = Booster.__new__(Booster)
    booster.__setstate__(results[0][1])
    booster.comm_stats = [r[2] for r in results]
    return booster


def _lost(client, fit_id, addrs, worker, futures):
    """Abort the survivors and raise WorkerLostError for ``worker``."""
    survivors = [a for a in addrs if a != worker]
    where = {}
    if survivors:
        try:
            where = client.run(_abort, fit_id, f"worker {worker} was lost",
                               workers=survivors, on_error="return")
        except Exception:     # noqa: BLE001 -- the survivors may be going too
            where = {}
    client.cancel(futures)
    rounds = [w for w in where.values() if isinstance(w, tuple) and w[0] is not None]
    rnd, level = max(rounds) if rounds else (None, None)
    raise WorkerLostError(worker, rnd, level)
