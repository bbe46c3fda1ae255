"""``bonsai.dask.collective``: the worker-to-worker collectives of a distributed fit.

In-process clusters (``distributed.utils_test.gen_cluster``, k = 1 .. 8 workers of one
thread, loopback TCP) run one task per worker that makes a ``DaskComm`` and calls
collectives; the results are checked against ``np.sum`` / rank order on the driver.
Also: errors every rank sees alike (shape and dtype mismatches, ranks out of step),
``abort_fit`` unblocking a waiting receive, the receive timeout, an in-process
(``inproc://``) cluster, and a real two-process ``LocalCluster`` timing 1 MiB rounds.
Every wait is bounded.
"""
import asyncio
import math
import statistics
import time

import numpy as np
import pytest

pytest.importorskip("distributed")

from distributed import LocalCluster, Client  # noqa: E402
from distributed.utils_test import gen_cluster  # noqa: E402

from bonsai.comm import Comm  # noqa: E402
from bonsai.dask.collective import (PLUGIN_NAME, DaskComm, PeerLostError,  # noqa: E402
                                    abort_fit, ensure_plugin)
from dask_fixtures import LOOPBACK_ANY_PORT  # noqa: E402

WAIT_S = 30          # bound on every driver-side wait
INT_LIM = 2 ** 59    # |value| < 2**59: sums over 8 ranks stay inside int64
# the schedulers' HTTP servers (metrics) on a free loopback port, not 8787 (which a
# concurrent test process may hold), as ``dask_fixtures.local_cluster``'s
HTTP_ON_LOOPBACK = {"dashboard_address": LOOPBACK_ANY_PORT}


def _rank_inputs(rank):
    """Rank ``rank``'s arrays for the call sequence of ``_rank_main`` (deterministic,
    so the driver can rebuild every rank's inputs)."""
    rng = np.random.default_rng([7, rank])
    return [
        rng.integers(-INT_LIM, INT_LIM, size=1000, dtype=np.int64),
        np.zeros(0, np.int64),
        rng.integers(-INT_LIM, INT_LIM, size=(4, 7), dtype=np.int64),
        # Fortran order and a strided view: any layout in, a C array out
        np.asfortranarray(rng.integers(-1000, 1000, size=(3, 5), dtype=np.int64)),
        rng.integers(-INT_LIM, INT_LIM, size=64, dtype=np.int64)[::2],
        np.zeros((0, 3), np.int64),
        np.array(rng.integers(-INT_LIM, INT_LIM), dtype=np.int64),   # 0-d
        rng.integers(-INT_LIM, INT_LIM, size=5000, dtype=np.int64),
    ]


def _rank_main(fit_id, rank, addrs):
    """One rank's script: sums, max, gather, the errors every rank sees, stats."""
    k = len(addrs)
    comm = DaskComm(fit_id, rank, addrs, timeout=20)
    assert isinstance(comm, Comm) and comm.rank == rank and comm.size == k
    out = {"sums": [], "unmodified": True, "fresh": True}
    for a in _rank_inputs(rank):
        before = a.copy()
        s = comm.allreduce_sum(a)
        out["unmodified"] &= bool(np.array_equal(a, before) and a.shape == before.shape)
        out["fresh"] &= bool(isinstance(s, np.ndarray) and not np.shares_memory(s, a)
                             and s.flags.writeable and s.flags.c_contiguous
                             and s.dtype == np.int64)
        out["sums"].append(s)
    out["max"] = comm.allreduce_max(float(rank) * 1.5 - 3.0)
    out["max_int"] = comm.allreduce_max(np.int32(10 * rank))
    out["max_nan"] = comm.allreduce_max(math.nan if rank == k - 1 else 1.0)
    out["gather"] = comm.allgather({"rank": rank, "arr": np.arange(rank, dtype=np.int64)})
    out["gather_none"] = comm.allgather(None if rank % 2 else rank)

    def error_of(fn, *args):
        try:
            fn(*args)
        except Exception as e:      # noqa: BLE001 -- returned to the driver
            return type(e).__name__, str(e)
        return None

    # shape mismatch (rank 0 differs), then dtype mismatch (the last rank differs)
    out["shape_err"] = error_of(comm.allreduce_sum,
                                np.zeros(3 if rank == 0 else 4, np.int64))
    out["dtype_err"] = error_of(comm.allreduce_sum, np.zeros(4, np.float64 if rank == k - 1
                                                             else np.int64))
    out["list_err"] = error_of(comm.allreduce_sum, [1, 2, 3])
    # ranks out of step: rank 0 gathers while the others sum
    out["step_err"] = error_of(comm.allgather, 1) if rank == 0 else error_of(
        comm.allreduce_sum, np.zeros(2, np.int64))
    out["max_type_err"] = error_of(comm.allreduce_max, "1.0")
    # the comm still works after those errors
    out["after"] = comm.allreduce_sum(np.full(2, rank, np.int64))
    out["stats"] = comm.stats()
    comm.close()
    out["closed_err"] = error_of(comm.allgather, 1)
    return out


@pytest.mark.parametrize("k", range(1, 9))
def test_collectives_match_numpy(k):
    n_sum_calls = len(_rank_inputs(0))

    @gen_cluster(client=True, scheduler_kwargs=HTTP_ON_LOOPBACK, nthreads=[("127.0.0.1", 1)] * k)
    async def run(c, s, *workers):
        await ensure_plugin(c)
        plugins = [w.plugins[PLUGIN_NAME] for w in workers]
        await ensure_plugin(c)      # idempotent: the running plugins (mailboxes) stay
        assert [w.plugins[PLUGIN_NAME] for w in workers] == plugins
        assert len({id(p.mailbox) for p in plugins}) == k
        addrs = [w.address for w in workers]
        futs = [c.submit(_rank_main, f"fit-{k}", r, addrs, workers=[addrs[r]], pure=False)
                for r in range(k)]
        res = await asyncio.wait_for(c.gather(futs), WAIT_S)
        for p in plugins:           # closed: nothing left in the mailboxes
            assert p.mailbox.slots == {}
            assert p.mailbox.finished[f"fit-{k}"][0] == "closed"
        return res

    res = run()
    inputs = [_rank_inputs(r) for r in range(k)]
    for i in range(n_sum_calls):
        want = np.sum([inputs[r][i] for r in range(k)], axis=0, dtype=np.int64)
        for r in range(k):
            got = res[r]["sums"][i]
            assert got.shape == want.shape and got.dtype == np.int64
            assert got.tobytes() == np.ascontiguousarray(want).tobytes(), (i, r)
    for r, out in enumerate(res):
        assert out["unmodified"] and out["fresh"]
        assert out["max"] == max(q * 1.5 - 3.0 for q in range(k))
        assert out["max_int"] == 10.0 * (k - 1)
        assert math.isnan(out["max_nan"])
        assert [g["rank"] for g in out["gather"]] == list(range(k))
        assert all(np.array_equal(g["arr"], np.arange(q)) for q, g in enumerate(out["gather"]))
        assert out["gather_none"] == [None if q % 2 else q for q in range(k)]
        if k > 1:
            assert out["shape_err"][0] == "ValueError" and "shapes differ" in out["shape_err"][1]
            assert out["step_err"][0] == "RuntimeError" and "different collectives" in \
                out["step_err"][1]
        else:
            assert out["shape_err"] is None and out["step_err"] is None
        assert out["dtype_err"][0] == "TypeError" and "float64" in out["dtype_err"][1]
        assert out["list_err"][0] == "TypeError" and "list" in out["list_err"][1]
        assert out["max_type_err"][0] == "TypeError"
        assert out["after"].tolist() == [k * (k - 1) // 2] * 2
        st = out["stats"]
        n_calls = n_sum_calls + 5 + 4 + 1     # max_type_err fails before any exchange
        assert st["calls"] == n_calls and st["seconds"] >= 0
        assert (st["bytes_sent"] > 0) == (k > 1)
        assert out["closed_err"][0] == "RuntimeError" and "closed" in out["closed_err"][1]
    # every rank sent the same number of array bytes per step; ranks that fold into a
    # partner or send back to one send more, never less than one copy per call
    if k > 1:
        one_copy = sum(np.asarray(a).nbytes for a in inputs[0]) + 2 * 8
        assert min(out["stats"]["bytes_sent"] for out in res) >= one_copy


def _rs_parts(rank, k, call):
    """Rank ``rank``'s parts (one per destination) for reduce-scatter call ``call``:
    destination j gets a (2, j) array (empty for j = 0), or 1-D in call 1."""
    rng = np.random.default_rng([11, rank, call])
    if call == 1:
        return [rng.integers(-INT_LIM, INT_LIM, size=3 * j + 1, dtype=np.int64)
                for j in range(k)]
    return [rng.integers(-INT_LIM, INT_LIM, size=(2, j), dtype=np.int64) for j in range(k)]


def _rs_rank(fit_id, rank, addrs):
    k = len(addrs)
    comm = DaskComm(fit_id, rank, addrs, timeout=20)
    out = {"got": [], "unmodified": True}
    for call in range(2):
        parts = _rs_parts(rank, k, call)
        before = [q.copy() for q in parts]
        out["got"].append(comm.reduce_scatter_sum(parts))
        out["unmodified"] &= all(np.array_equal(q, b) for q, b in zip(parts, before))
    try:
        comm.reduce_scatter_sum([np.zeros(1, np.int64)] * (k + 1))
        out["len_err"] = None
    except ValueError as e:
        out["len_err"] = str(e)
    out["after"] = comm.allreduce_sum(np.full(2, rank, np.int64))
    comm.close()
    return out


@pytest.mark.parametrize("k", range(1, 9))
def test_reduce_scatter_matches_numpy(k):
    """Rank j gets the sum over ranks of their part j, bit for bit, any W."""
    @gen_cluster(client=True, scheduler_kwargs=HTTP_ON_LOOPBACK, nthreads=[("127.0.0.1", 1)] * k)
    async def run(c, s, *workers):
        await ensure_plugin(c)
        addrs = [w.address for w in workers]
        futs = [c.submit(_rs_rank, f"rs-{k}", r, addrs, workers=[addrs[r]], pure=False)
                for r in range(k)]
        return await asyncio.wait_for(c.gather(futs), WAIT_S)

    res = run()
    for j, out in enumerate(res):
        assert out["unmodified"]
        for call in range(2):
            want = np.sum([_rs_parts(r, k, call)[j] for r in range(k)], axis=0, dtype=np.int64)
            got = out["got"][call]
            assert got.shape == want.shape and got.dtype == np.int64
            assert got.tobytes() == want.tobytes(), (j, call)
        assert "takes a list of" in out["len_err"]
        assert out["after"].tolist() == [k * (k - 1) // 2] * 2


def _blocked_rank(fit_id, rank, addrs, timeout):
    """Calls allreduce_sum and reports what it raised and when (time.time())."""
    comm = DaskComm(fit_id, rank, addrs, timeout=timeout)
    t0 = time.time()
    try:
        comm.allreduce_sum(np.arange(4, dtype=np.int64))
    except Exception as e:      # noqa: BLE001 -- returned to the driver
        first = (type(e).__name__, str(e), t0, time.time())
    else:
        first = None
    t1 = time.perf_counter()
    try:
        comm.allreduce_sum(np.arange(4, dtype=np.int64))
    except Exception as e:      # noqa: BLE001
        later = (type(e).__name__, str(e), time.perf_counter() - t1)
    else:
        later = None
    return first, later


@gen_cluster(client=True, scheduler_kwargs=HTTP_ON_LOOPBACK, nthreads=[("127.0.0.1", 1)] * 3)
async def test_abort_fit_unblocks_pending_receives(c, s, *workers):
    await ensure_plugin(c)
    addrs = [w.address for w in workers]
    # ranks 0 and 1 wait for rank 2 (whose worker "was lost": its task never runs)
    futs = [c.submit(_blocked_rank, "fit-abort", r, addrs, 15, workers=[addrs[r]],
                     pure=False) for r in (0, 1)]
    deadline = time.time() + WAIT_S
    mailboxes = [w.plugins[PLUGIN_NAME].mailbox for w in workers[:2]]
    while not all(any(not f.done() for f in mb.slots.get("fit-abort", {}).values())
                  for mb in mailboxes):                       # both ranks are waiting
        assert time.time() < deadline
        await asyncio.sleep(0.02)
    t_abort = time.time()
    n = await c.run(abort_fit, "fit-abort", "worker 2 was lost", workers=addrs[:2])
    assert sorted(n.values()) == [1, 1]
    res = await asyncio.wait_for(c.gather(futs), 10)      # < their own 15 s timeout
    assert issubclass(PeerLostError, RuntimeError)
    for first, later in res:
        name, msg, _, t_raised = first
        assert name == "PeerLostError" and msg == "worker 2 was lost"
        assert t_raised - t_abort < 2.0
        assert later[0] == "PeerLostError" and later[2] < 2.0    # later calls fail at once
    # the lost rank turning up late: its message is rejected, it fails at once too
    late = c.submit(_blocked_rank, "fit-abort", 2, addrs, 60, workers=[addrs[2]], pure=False)
    first, later = await asyncio.wait_for(late, WAIT_S)
    assert first[0] == "PeerLostError" and "worker 2 was lost" in first[1]
    assert first[3] - first[2] < 2.0
    for mb in mailboxes:
        assert "fit-abort" not in mb.slots


@gen_cluster(client=True, scheduler_kwargs=HTTP_ON_LOOPBACK, nthreads=[("127.0.0.1", 1)] * 2)
async def test_receive_timeout_names_the_peer(c, s, a, b):
    await ensure_plugin(c)
    addrs = [a.address, b.address]
    fut = c.submit(_blocked_rank, "fit-tmo", 0, addrs, 0.5, workers=[addrs[0]], pure=False)
    first, later = await asyncio.wait_for(fut, WAIT_S)
    name, msg, t0, t1 = first
    assert name == "TimeoutError"
    assert "rank 1" in msg and addrs[1] in msg and "fit-tmo" in msg and "collective #0" in msg
    assert 0.5 <= t1 - t0 < 5.0
    assert later[0] == "PeerLostError" and later[2] < 2.0     # the comm is broken now
    assert a.plugins[PLUGIN_NAME].mailbox.slots == {}
    # the late peer's message is rejected rather than stored
    fut = c.submit(_blocked_rank, "fit-tmo", 1, addrs, 20, workers=[addrs[1]], pure=False)
    first, _ = await asyncio.wait_for(fut, WAIT_S)
    assert first[0] == "PeerLostError" and "fit-tmo" in first[1]
    assert a.plugins[PLUGIN_NAME].mailbox.slots == {}


def _make_comm(*args, **kw):
    try:
        DaskComm(*args, **kw)
    except Exception as e:      # noqa: BLE001
        return type(e).__name__, str(e)
    return None


def _send_to_plain_worker(addrs):
    comm = DaskComm("fit-plain", 0, addrs, timeout=5)
    try:
        comm.allgather(0)
    except Exception as e:      # noqa: BLE001
        return type(e).__name__, str(e)
    return None


@gen_cluster(client=True, scheduler_kwargs=HTTP_ON_LOOPBACK, nthreads=[("127.0.0.1", 1)] * 2)
async def test_bad_arguments_and_setup(c, s, a, b):
    addrs = [a.address, b.address]

    async def on(worker, *args, **kw):
        return await asyncio.wait_for(c.submit(_make_comm, *args, workers=[worker],
                                               pure=False, **kw), WAIT_S)

    err = await on(addrs[0], "fit", 0, addrs)
    assert err[0] == "RuntimeError" and "ensure_plugin" in err[1]    # no plugin yet
    await ensure_plugin(c)
    assert (await on(addrs[0], "fit", 0, addrs)) is None
    cases = [(("", 0, addrs), "TypeError", "fit_id"), ((7, 0, addrs), "TypeError", "fit_id"),
             (("fit", 2, addrs), "ValueError", "rank"), (("fit", -1, addrs), "ValueError",
                                                          "rank"),
             (("fit", 0.0, addrs), "TypeError", "rank"), (("fit", True, addrs), "TypeError",
                                                          "rank"),
             (("fit", 0, []), "TypeError", "addrs"), (("fit", 0, "tcp://x"), "TypeError",
                                                     "addrs"),
             (("fit", 0, [addrs[0]] * 2), "ValueError", "distinct"),
             (("fit", 1, addrs), "RuntimeError", "belongs on worker")]
    for args, name, word in cases:
        err = await on(addrs[0], *args)
        assert err is not None and err[0] == name and word in err[1], (args, err)
    for t, name in ((0, "ValueError"), (-1.0, "ValueError"), (math.inf, "ValueError"),
                    (math.nan, "ValueError"), ("5", "TypeError"), (True, "TypeError")):
        err = await on(addrs[0], "fit", 0, addrs, timeout=t)
        assert err[0] == name and "timeout" in err[1], (t, err)
    with pytest.raises(RuntimeError, match="inside a task"):
        DaskComm("fit", 0, addrs)
    # a fit id is used once per worker
    mb = a.plugins[PLUGIN_NAME].mailbox
    mb.finish("fit-used", "closed", "done")
    err = await on(addrs[0], "fit-used", 0, addrs)
    assert err[0] == "ValueError" and "already used" in err[1]
    # a peer without the plugin: the send fails at once, naming the cure
    await b.plugin_remove(PLUGIN_NAME)
    err = await asyncio.wait_for(c.submit(_send_to_plain_worker, addrs, workers=[addrs[0]],
                                          pure=False), WAIT_S)
    assert err[0] == "RuntimeError" and "ensure_plugin" in err[1]
    assert abort_fit("nothing", "why", dask_worker=b) == 0     # no plugin: nothing to do
    # abort_fit from a task's thread hands the work to the event loop
    n = await asyncio.wait_for(c.submit(abort_fit, "fit-thread", "from a thread",
                                        workers=[addrs[0]], pure=False), WAIT_S)
    assert n == 0 and mb.finished["fit-thread"] == ("aborted", "from a thread")
    assert mb.put("fit-thread", (0, 0, 1, 0), None)["status"] == "rejected"
    assert "fit-thread" not in mb.slots


def _returns_sum(fit_id, rank, addrs):
    comm = DaskComm(fit_id, rank, addrs, timeout=20)
    a = np.arange(6, dtype=np.int64) * (rank + 1)
    s = comm.allreduce_sum(a)
    comm.close()
    return a, s


def test_inproc_cluster_shares_nothing():
    """``LocalCluster(processes=False)`` uses the inproc transport, which hands objects
    over by reference: every rank still gets its own result array."""
    async def run():
        async with LocalCluster(n_workers=3, threads_per_worker=1, processes=False,
                                dashboard_address=None, scheduler_kwargs=HTTP_ON_LOOPBACK,
                                asynchronous=True) as cluster, \
                Client(cluster, asynchronous=True) as c:
            await ensure_plugin(c)
            addrs = [cluster.workers[name].address for name in sorted(cluster.workers)]
            assert all(a.startswith("inproc://") for a in addrs)
            futs = [c.submit(_returns_sum, "fit-inproc", r, addrs, workers=[addrs[r]],
                             pure=False) for r in range(3)]
            return await asyncio.wait_for(c.gather(futs), WAIT_S)

    res = asyncio.run(asyncio.wait_for(run(), 2 * WAIT_S))
    want = np.arange(6) * 6
    for i, (a, s) in enumerate(res):
        assert np.array_equal(s, want) and np.array_equal(a, np.arange(6) * (i + 1))
        for j in range(i):
            assert not np.shares_memory(s, res[j][1])


def _train_rank(fit_id, rank, addrs, params, shard):
    import bonsai
    comm = DaskComm(fit_id, rank, addrs, timeout=60)
    booster = bonsai.train(params, shard, _comm=comm)
    stats = comm.stats()
    comm.close()
    return booster.model_to_string(), stats


def test_train_over_dask_comm_grows_the_one_shard_model():
    """The seam's consumer: ``bonsai.train(..., _comm=DaskComm)`` on three uneven
    shards (one rank folds into a partner) grows the one-shard model, byte for byte."""
    import bonsai
    rng = np.random.default_rng(0)
    n = 1500
    X = rng.standard_normal((n, 6)).astype(np.float32)
    X[rng.random(n) < 0.1, 1] = np.nan
    y = (X[:, 0] + 0.5 * np.nan_to_num(X[:, 1]) * X[:, 2]
         + 0.3 * rng.standard_normal(n) > 0).astype(np.float32)
    ds = bonsai.Dataset(X, label=y)
    params = dict(objective="binary", n_estimators=6, learning_rate=0.3, subsample=0.8,
                  colsample_bynode=0.7, min_child_samples=5, random_state=3, n_threads=1,
                  grow_policy="depthwise", max_depth=4)
    one = bonsai.train(params, ds).model_to_string()
    edges = [0, 100, 650, n]
    shards = [ds.subset(np.arange(a, b)) for a, b in zip(edges[:-1], edges[1:])]

    @gen_cluster(client=True, scheduler_kwargs=HTTP_ON_LOOPBACK, nthreads=[("127.0.0.1", 1)] * 3)
    async def run(c, s, *workers):
        await ensure_plugin(c)
        addrs = [w.address for w in workers]
        futs = [c.submit(_train_rank, "fit-train", r, addrs, params, shards[r],
                         workers=[addrs[r]], pure=False) for r in range(3)]
        return await asyncio.wait_for(c.gather(futs), WAIT_S)

    res = run()
    assert [model == one for model, _ in res] == [True] * 3
    calls = {st["calls"] for _, st in res}
    assert len(calls) == 1 and calls.pop() > 6 and all(st["bytes_sent"] > 0 for _, st in res)


N_MIB_CALLS = 100


def _mib_loop(fit_id, rank, addrs):
    """100 all-reduces of 1 MiB (131,072 int64): per-call wall times, process CPU time,
    and whether every result was right."""
    comm = DaskComm(fit_id, rank, addrs, timeout=60)
    w = len(addrs)
    base = np.arange(131072, dtype=np.int64)
    ok, times = True, []
    cpu0 = time.process_time()
    for i in range(N_MIB_CALLS):
        a = base * (rank + 1) + i
        t0 = time.perf_counter()
        s = comm.allreduce_sum(a)
        times.append(time.perf_counter() - t0)
        ok &= bool(np.array_equal(s, base * (w * (w + 1) // 2) + w * i))
    cpu = time.process_time() - cpu0
    stats = comm.stats()
    comm.close()
    return ok, times, cpu, stats


def test_local_cluster_two_processes_mib_rounds():
    from dask_fixtures import local_cluster
    with local_cluster(2) as client:
        ensure_plugin(client)
        addrs = sorted(client.scheduler_info()["workers"])
        futs = [client.submit(_mib_loop, "fit-mib", r, addrs, workers=[addrs[r]], pure=False)
                for r in range(2)]
        res = client.gather(futs)
    for ok, times, cpu, stats in res:
        assert ok
        assert stats["calls"] == N_MIB_CALLS
        assert stats["bytes_sent"] == N_MIB_CALLS * 131072 * 8
    med = [statistics.median(t) * 1e3 for _, t, _, _ in res]
    print(f"\n2 worker processes, 1 MiB int64 all-reduce: median round "
          f"{med[0]:.2f} / {med[1]:.2f} ms (rank 0 / 1); process CPU over "
          f"{N_MIB_CALLS} rounds {res[0][2]:.2f} / {res[1][2]:.2f} s; wall in collectives "
          f"{res[0][3]['seconds']:.2f} / {res[1][3]['seconds']:.2f} s")
