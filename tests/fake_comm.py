"""A communicator for tests: ``size`` ranks as Python threads of one process.

``run_ranks(size, fn)`` calls ``fn(comm, rank)`` in ``size`` threads at once, each
with its ``ThreadComm``; the collectives meet at a barrier (every wait has a
timeout, so a rank that never arrives fails the test instead of hanging it).  This
is a real implementation of ``bonsai.comm.Comm`` (the sums are exact int64 sums in
rank order), in one process: it proves the seam before a distributed backend exists.
"""
import threading

import numpy as np

from bonsai._threads import waiting_on_peers

TIMEOUT_S = 120.0


class _Group:
    def __init__(self, size):
        self.size = size
        self.barrier = threading.Barrier(size, timeout=TIMEOUT_S)
        self.slots = [None] * size
        self.calls = 0          # collectives run (rank 0 counts)


class ThreadComm:
    """Rank ``rank`` of a ``_Group`` of threads."""

    def __init__(self, group, rank):
        self.group = group
        self.rank = rank
        self.size = group.size

    def _exchange(self, obj):
        g = self.group
        g.slots[self.rank] = obj
        with waiting_on_peers():
            g.barrier.wait()
            out = list(g.slots)
            g.barrier.wait()        # everyone has read before anyone writes again
        if self.rank == 0:
            g.calls += 1
        return out

    def allreduce_sum(self, a):
        return _sum("allreduce_sum", self._exchange(_int64("allreduce_sum", a)))

    def allreduce_max(self, x):
        return max(float(v) for v in self._exchange(float(x)))

    def allgather(self, obj):
        return self._exchange(obj)

    def reduce_scatter_sum(self, parts):
        if len(parts) != self.size:
            raise ValueError(f"reduce_scatter_sum takes {self.size} parts, got {len(parts)}")
        every = self._exchange([_int64("reduce_scatter_sum", p) for p in parts])
        return _sum("reduce_scatter_sum", [ps[self.rank] for ps in every])


def _int64(what, a):
    a = np.asarray(a)
    if a.dtype != np.int64:
        raise TypeError(f"{what} takes int64 arrays, got {a.dtype}")
    return a


def _sum(what, parts):
    """The exact sum of the ranks' arrays (a new array)."""
    if any(p.shape != parts[0].shape for p in parts):
        raise ValueError(f"{what}: shapes differ between ranks: {[p.shape for p in parts]}")
    out = parts[0].copy()
    for p in parts[1:]:
        out += p
    return out


def run_ranks(size, fn):
    """[fn(comm, rank) for every rank], run at once in ``size`` threads; re-raises the
    first rank's exception (a rank that failed breaks the barrier for the others)."""
    group = _Group(size)
    results = [None] * size
    errors = [None] * size

    def target(r):
        try:
            results[r] = fn(ThreadComm(group, r), r)
        except BaseException as e:      # noqa: BLE001 -- reported below
            errors[r] = e
            group.barrier.abort()

    threads = [threading.Thread(target=target, args=(r,), daemon=True) for r in range(size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT_S * 2)
        if t.is_alive():
            raise TimeoutError("a rank did not finish")
    first = next((e for e in errors if e is not None and not isinstance(
        e, threading.BrokenBarrierError)), None) or next((e for e in errors if e), None)
    if first is not None:
        raise first
    return results, group
