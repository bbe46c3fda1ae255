"""The Dask collective: ``DaskComm``, the ``bonsai.comm.Comm`` of a fit whose ranks
are long-lived tasks on Dask workers, and the worker plugin that carries its messages.

What it owns
    ``CollectivePlugin`` (a ``distributed.WorkerPlugin`` named ``"bonsai-collective"``,
    registered once per cluster by ``ensure_plugin(client)``) adds one handler,
    ``bonsai_put``, to each worker's existing listener and keeps that worker's
    mailbox.  ``DaskComm(fit_id, rank, addrs)`` is made and called inside the task
    of rank ``rank``, running on worker ``addrs[rank]``; ``abort_fit`` is what the
    driver runs on the survivors (``client.run``) when a rank's worker is lost.
    Nothing binds a socket or picks a port; there is no tracker and no driver in
    the data path.

Algorithm
    Recursive doubling, for any number of ranks ``W``.  With ``p`` the largest power
    of two <= ``W``, each extra rank ``e >= p`` first folds its state into rank
    ``e - p`` (step 0); ranks ``0 .. p-1`` then exchange with ``rank ^ 2**k`` at steps
    ``1 .. log2(p)``, each merging what it got into what it holds; last, rank
    ``e - p`` sends the result back to ``e`` (step ``log2(p) + 1``).  Send and receive
    of a step run at once under ``asyncio.gather`` (the first failure raises and
    cancels the other).  Every rank ends with the same state: ``allreduce_sum`` adds
    int64 arrays (exact, so equal to ``np.sum`` over ranks bit for bit whatever the
    order), ``allgather`` unites ``{rank: obj}`` maps, and ``allreduce_max`` is the
    max over the gathered, rank-ordered values (NaN if any rank's value is NaN), so
    it is the same float on every rank.  A call's state also carries the set of
    collective kinds and of (dtype, shape) seen, so a shape or dtype mismatch
    anywhere, or ranks calling different collectives, is detected by every rank at
    the end of the same call (``ValueError``, ``TypeError``, ``RuntimeError``)
    rather than by one rank while the others hang; after such an error the comm
    stays usable.  Arrays sent are never modified afterwards and received arrays
    never modified, so an in-process transport (``inproc://``, which passes objects
    by reference) is safe too.

Message tags
    Every message is ``bonsai_put(fit_id, seq, step, src, dst, kinds, metas, data)``:
    the fit, the call's sequence number on this comm (0, 1, ...), the step above,
    the sending and receiving ranks, and the state (``data`` through
    ``distributed.protocol.to_serialize``: Dask's numpy serialization, pickle for
    other objects).  The mailbox key is ``(seq, step, src, dst)`` under ``fit_id``,
    so calls, steps and fits never mix.  Whichever comes first, message or receive,
    creates the slot's future; the receive removes it.

Failure semantics
    * Every receive (and send) waits at most ``timeout`` seconds, then raises a
      ``TimeoutError`` naming the peer, its address, the fit and the call: the
      backstop against a host that vanished silently.
    * ``abort_fit(fit_id, reason)`` fails every pending and every later receive of
      that fit on that worker with ``PeerLostError(reason)`` at once.
    * A send to a worker that cannot be reached raises ``PeerLostError``; so does a
      send that the peer rejects because its side of the fit was aborted, failed or
      closed (a failing rank so fails the peers that send to it promptly).
    * After any of these the comm is broken: this worker marks the fit failed,
      rejects its later messages and drops what was buffered; later calls raise
      ``PeerLostError``.  Nothing is retried.
    * ``close()`` drops the fit's mailbox state; messages of a closed, aborted or
      failed fit are rejected, not stored (the last ``MAX_FINISHED`` fit ids are
      remembered).  Messages for a fit whose rank never starts on a worker stay
      buffered until ``abort_fit`` runs there, so a driver aborts a failed fit on
      all of its workers.

Threads
    The collectives block the task's thread: the exchange runs on the worker's
    event loop (``distributed.utils.sync``) while the thread waits inside
    ``bonsai._threads.waiting_on_peers()`` (it lets go of bonsai's numba workqueue
    lock, so other ranks in the same process can run kernels).  The mailbox and its
    asyncio futures are only touched on the event loop.

Layout
    The mailbox, the plugin and ``abort_fit`` live in ``_mailbox``; this module the
    ``DaskComm`` and its exchanges.

Internal-API risk
    ``worker.handlers`` and ``worker.rpc`` are not documented Dask API (Dask's own
    P2P shuffle uses them the same way, ``distributed/shuffle/_worker_plugin.py``).
    A handler is called as ``handler(**msg)`` unless its first parameter is named
    ``comm`` (``distributed/core.py``, ``Server._handle_comm``; distributed
    2026.8).  If this changes, ``tests/test_dask_collective.py`` fails.
"""
import asyncio
import math
import numbers
import time

import numpy as np
from distributed import get_worker
from distributed.protocol import to_serialize
from distributed.utils import sync

from bonsai._threads import waiting_on_peers

from ._mailbox import (_OK, PLUGIN_NAME, CollectivePlugin, PeerLostError, _on_loop, _plugin,
                       abort_fit, ensure_plugin)

__all__ = ["CollectivePlugin", "DaskComm", "PeerLostError", "abort_fit", "ensure_plugin",
           "PLUGIN_NAME"]


class _State:
    """What a rank holds during one call: the collective kinds and (dtype, shape)
    metas seen so far, and the partial result (None once they disagree).  ``owned``:
    the array is this rank's alone (a copy, or received over TCP), so sums may be
    added into it instead of into a new array (fewer passes over the bytes)."""

    __slots__ = ("kinds", "metas", "value", "owned")

    def __init__(self, kinds, metas, value, owned=False):
        self.kinds, self.metas, self.value = kinds, metas, value
        self.owned = owned and isinstance(value, np.ndarray) and value.flags.writeable

    def merge(self, other, inplace=False):
        """The union of two states; ``inplace`` (over TCP only: an array sent there is
        already in the socket) lets a sum go into an owned array."""
        kinds, metas = self.kinds | other.kinds, self.metas | other.metas
        value = None
        if (len(kinds) == 1 and len(metas) <= 1 and self.value is not None
                and other.value is not None):
            if kinds == {"allreduce_sum"} or kinds == {"reduce_scatter_sum"}:
                # into an array of this rank's own, else a new one (also for 0-d,
                # where a bare np.add returns a scalar); integers: exact either way
                dst = (other.value if inplace and other.owned else
                       self.value if inplace and self.owned else
                       np.empty(self.value.shape, np.int64))
                value = np.add(self.value, other.value, out=dst)
                return _State(kinds, metas, value, owned=inplace)
            value = {**self.value, **other.value}
        return _State(kinds, metas, value)

    def wire(self):
        return {"kinds": sorted(self.kinds),
                "metas": [[d, None if s is None else list(s)] for d, s in sorted(
                    self.metas, key=repr)],
                "data": None if self.value is None else to_serialize(
                    self.value if isinstance(self.value, np.ndarray)
                    else list(self.value.items()))}

    @classmethod
    def unwire(cls, kinds, metas, data, owned=False):
        metas = frozenset((d, None if s is None else tuple(s)) for d, s in metas)
        if isinstance(data, list):
            data = {int(r): obj for r, obj in data}
        return cls(frozenset(kinds), metas, data, owned)


def _check_args(fit_id, rank, addrs, timeout):
    if not isinstance(fit_id, str) or not fit_id:
        raise TypeError(f"fit_id must be a non-empty str, got {fit_id!r}")
    if not isinstance(addrs, (list, tuple)) or not addrs or not all(
            isinstance(a, str) and a for a in addrs):
        raise TypeError(f"addrs must be a non-empty list of worker addresses (str), "
                        f"got {addrs!r}")
    if len(set(addrs)) != len(addrs):
        raise ValueError(f"addrs must be distinct (one rank per worker), got {list(addrs)!r}")
    if isinstance(rank, bool) or not isinstance(rank, numbers.Integral):
        raise TypeError(f"rank must be an int, got {rank!r}")
    if not 0 <= rank < len(addrs):
        raise ValueError(f"rank must be in 0 .. {len(addrs) - 1}, got {rank!r}")
    if isinstance(timeout, bool) or not isinstance(timeout, numbers.Real):
        raise TypeError(f"timeout must be a number of seconds, got {timeout!r}")
    if not (math.isfinite(timeout) and timeout > 0):
        raise ValueError(f"timeout must be a finite number of seconds > 0, got {timeout!r}")


class DaskComm:
    """Rank ``rank`` of the fit ``fit_id`` whose ranks run on workers ``addrs`` (rank
    order); a ``bonsai.comm.Comm``.  Make it inside the task running on
    ``addrs[rank]``, after ``ensure_plugin(client)``; use it from that task's thread.
    ``fit_id`` must be unique to the fit (e.g. a uuid).

    Stats: ``calls`` (collectives run), ``bytes_sent`` (array bytes this rank sent in
    ``allreduce_sum``), ``seconds`` (wall time inside collectives); ``stats()``
    returns them as a dict."""

    def __init__(self, fit_id, rank, addrs, timeout=600.0):
        _check_args(fit_id, rank, addrs, timeout)
        try:
            worker = get_worker()
        except ValueError:
            raise RuntimeError("DaskComm must be made inside a task running on a Dask "
                               "worker") from None
        if worker.address != addrs[rank]:
            raise RuntimeError(f"DaskComm rank {rank} of fit {fit_id!r} belongs on worker "
                               f"{addrs[rank]}, but this task runs on {worker.address}")
        plugin = _plugin(worker)
        if plugin is None:
            raise RuntimeError(f"worker {worker.address} has no {PLUGIN_NAME!r} plugin: "
                               "call bonsai.dask.collective.ensure_plugin(client) first")
        if plugin.mailbox.finished.get(fit_id, ("",))[0] == "closed":
            raise ValueError(f"fit_id {fit_id!r} was already used (and closed) on this "
                             "worker; every fit needs a fresh id")
        self.fit_id = fit_id
        self.rank = int(rank)
        self.size = len(addrs)
        self.addrs = list(addrs)
        self.timeout = float(timeout)
        self.calls = 0
        self.bytes_sent = 0
        self.seconds = 0.0
        self._worker = worker
        self._box = plugin.mailbox
        self._seq = 0
        self._closed = False
        self._by_value = not any(str(x).startswith("inproc") for x in self.addrs)

    def _own_copy(self, a):
        """(value, owned) to send for the caller's array ``a``: over TCP the bytes are
        copied into the socket before the call returns, so a C-ordered ``a`` goes as
        it is (never written); in-process (``inproc://``, objects by reference) a
        copy."""
        if self._by_value and a.flags.c_contiguous:
            return a, False
        return np.array(a, order="C"), self._by_value

    def __repr__(self):
        return (f"DaskComm(fit_id={self.fit_id!r}, rank={self.rank}, size={self.size}, "
                f"calls={self.calls})")

    def stats(self):
        return {"calls": self.calls, "bytes_sent": self.bytes_sent, "seconds": self.seconds}

    # ---- the Comm protocol ----------------------------------------------------------

    def allreduce_sum(self, a):
        """The element-wise sum over ranks of an int64 array (a new array; ``a`` is
        not modified).  TypeError unless every rank passed an int64 ndarray;
        ValueError if the shapes differ between ranks."""
        if isinstance(a, np.ndarray) and a.dtype == np.int64:
            mine = _State(frozenset({"allreduce_sum"}), frozenset({("int64", a.shape)}),
                          *self._own_copy(a))
        else:
            what = str(a.dtype) if isinstance(a, np.ndarray) else type(a).__name__
            mine = _State(frozenset({"allreduce_sum"}),
                          frozenset({(what, getattr(a, "shape", None))}), None)
        state = self._run(mine)
        dtypes = sorted({d for d, _ in state.metas})
        if dtypes != ["int64"]:
            raise TypeError(f"allreduce_sum takes int64 ndarrays on every rank; got "
                            f"{', '.join(dtypes)} (rank {self.rank} passed "
                            f"{next(iter(mine.metas))[0]})")
        if len(state.metas) > 1:
            raise ValueError(f"allreduce_sum: shapes differ between ranks: "
                             f"{sorted(s for _, s in state.metas)} (rank {self.rank} "
                             f"has {a.shape})")
        return state.value.copy() if state.value is a else state.value

    def allreduce_max(self, x):
        """The largest of the ranks' ``x`` (a float; NaN if any rank's is NaN)."""
        if isinstance(x, (bool, np.bool_)) or not isinstance(x, (numbers.Real, np.number)):
            raise TypeError(f"allreduce_max takes a real number, got {x!r}")
        values = self._gather("allreduce_max", float(x))
        if any(math.isnan(v) for v in values):
            return math.nan
        return max(values)

    def allgather(self, obj):
        """Every rank's ``obj``, in rank order."""
        return self._gather("allgather", obj)

    def reduce_scatter_sum(self, parts):
        """The element-wise sum over ranks of their ``parts[self.rank]`` (``parts``: one
        int64 array per rank; a new array).  Every rank sends ``parts[j]`` straight to
        rank ``j`` and receives its own part from every other rank, all at once (one
        round trip; each rank moves (W - 1) parts each way).  TypeError unless this
        rank's part from every rank is an int64 ndarray, ValueError if their shapes
        differ (raised on the rank receiving them)."""
        if not isinstance(parts, (list, tuple)) or len(parts) != self.size:
            raise ValueError(f"reduce_scatter_sum takes a list of {self.size} arrays (one "
                             f"per rank), got {type(parts).__name__} of length "
                             f"{len(parts) if hasattr(parts, '__len__') else '?'}")
        kind = frozenset({"reduce_scatter_sum"})
        states = []
        for p in parts:
            if isinstance(p, np.ndarray) and p.dtype == np.int64:
                states.append(_State(kind, frozenset({("int64", p.shape)}),
                                     *self._own_copy(p)))
            else:
                what = str(p.dtype) if isinstance(p, np.ndarray) else type(p).__name__
                states.append(_State(kind, frozenset({(what, getattr(p, "shape", None))}),
                                     None))
        state = self._run(states, self._all_to_all)
        dtypes = sorted({d for d, _ in state.metas})
        if dtypes != ["int64"]:
            raise TypeError(f"reduce_scatter_sum takes int64 ndarrays; rank {self.rank}'s "
                            f"parts were {', '.join(dtypes)}")
        if len(state.metas) > 1:
            raise ValueError(f"reduce_scatter_sum: the ranks' parts for rank {self.rank} have "
                             f"different shapes: {sorted(s for _, s in state.metas)}")
        return state.value.copy() if state.value is parts[self.rank] else state.value

    def close(self):
        """Drop this fit's mailbox state on this worker; later messages of the fit are
        rejected and later calls raise."""
        if not self._closed:
            self._closed = True
            _on_loop(self._worker, self._box.finish, self.fit_id, "closed",
                     f"rank {self.rank} closed its DaskComm")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # ---- the exchange ---------------------------------------------------------------

    def _gather(self, kind, obj):
        state = self._run(_State(frozenset({kind}), frozenset(), {self.rank: obj}))
        return [state.value[r] for r in range(self.size)]

    def _run(self, mine, exchange=None):
        if self._closed:
            raise RuntimeError(f"the DaskComm of fit {self.fit_id!r} is closed")
        seq = self._seq
        self._seq += 1
        t0 = time.perf_counter()
        try:
            if self.size == 1:
                self._box_check()
                state = mine[0] if isinstance(mine, list) else mine
            else:
                with waiting_on_peers():
                    state = sync(self._worker.loop, exchange or self._exchange, seq, mine)
            if len(state.kinds) > 1:
                raise RuntimeError(
                    f"fit {self.fit_id!r}: the ranks called different collectives "
                    f"({', '.join(sorted(state.kinds))}) as call #{seq}; rank {self.rank} "
                    f"called {next(iter(mine.kinds))}")
            return state
        finally:
            self.calls += 1
            self.seconds += time.perf_counter() - t0

    def _box_check(self):
        # one rank: nothing waits on the loop, so reading the finished map suffices
        if self.fit_id in self._box.finished:
            self._box.check(self.fit_id)

    def _describe(self, seq, step, peer):
        return (f"rank {peer} ({self.addrs[peer]}) to rank {self.rank}: fit "
                f"{self.fit_id!r}, collective #{seq}, step {step}")

    async def _exchange(self, seq, state):
        try:
            self._box.check(self.fit_id)
            r, w = self.rank, self.size
            p = 1 << (w.bit_length() - 1)
            last = p.bit_length()           # the step that returns results to extras
            if r >= p:
                await self._send(seq, 0, r - p, state)
                got = await self._recv(seq, last, r - p)
                if isinstance(got.value, np.ndarray) and not got.owned:
                    got.value = got.value.copy()    # not the partner's own result array
                return got
            if r + p < w:
                state = state.merge(await self._recv(seq, 0, r + p), self._by_value)
            for k in range(last - 1):
                peer = r ^ (1 << k)
                tasks = [asyncio.ensure_future(self._send(seq, k + 1, peer, state)),
                         asyncio.ensure_future(self._recv(seq, k + 1, peer))]
                try:
                    _, got = await asyncio.gather(*tasks)
                except BaseException:
                    for t in tasks:
                        t.cancel()
                    raise
                state = state.merge(got, self._by_value)
            if r + p < w:
                await self._send(seq, last, r + p, state)
            return state
        except (Exception, asyncio.CancelledError) as e:
            self._failed(seq, e)
            raise

    def _failed(self, seq, e):
        """A transport failure in call ``seq`` (validation happens after the exchange):
        the fit is over on this rank, its later messages are rejected."""
        self._box.finish(self.fit_id, "failed",
                         f"rank {self.rank} ({self.addrs[self.rank]}) of fit "
                         f"{self.fit_id!r} failed in collective #{seq}: {e}")

    async def _all_to_all(self, seq, states):
        """Send ``states[j]`` to every rank j, receive every rank's state for this one,
        merge them in rank order."""
        try:
            self._box.check(self.fit_id)
            r = self.rank
            peers = [j for j in range(self.size) if j != r]
            tasks = [asyncio.ensure_future(self._send(seq, 0, j, states[j])) for j in peers]
            tasks += [asyncio.ensure_future(self._recv(seq, 0, j)) for j in peers]
            try:
                done = await asyncio.gather(*tasks)
            except BaseException:
                for t in tasks:
                    t.cancel()
                raise
            got = dict(zip(peers, done[len(peers):]))
            got[r] = states[r]
            state = got[0]
            for j in range(1, self.size):
                state = state.merge(got[j], self._by_value)
            if state.value is not None and state.value is states[r].value:
                state.value = state.value.copy()
            return state
        except (Exception, asyncio.CancelledError) as e:
            self._failed(seq, e)
            raise

    async def _recv(self, seq, step, src):
        got = await self._box.get(self.fit_id, (seq, step, src, self.rank), self.timeout,
                                  lambda: self._describe(seq, step, src))
        return _State.unwire(*got, owned=self._by_value)

    async def _send(self, seq, step, dst, state):
        msg = state.wire()
        addr = self.addrs[dst]
        try:
            reply = await asyncio.wait_for(
                self._worker.rpc(addr).bonsai_put(fit_id=self.fit_id, seq=seq, step=step,
                                                  src=self.rank, dst=dst, **msg),
                self.timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"sending took over {self.timeout:g} s: rank {self.rank} to "
                               f"rank {dst} ({addr}), fit {self.fit_id!r}, collective "
                               f"#{seq}, step {step}") from None
        except OSError as e:
            raise PeerLostError(f"rank {self.rank} could not reach rank {dst} ({addr}) of "
                                f"fit {self.fit_id!r} in collective #{seq}: {e!r}") from e
        if reply != _OK:
            if isinstance(reply, dict) and reply.get("status") == "rejected":
                raise PeerLostError(f"rank {dst} ({addr}) rejected collective #{seq} of fit "
                                    f"{self.fit_id!r} ({reply['state']}): {reply['reason']}")
            raise RuntimeError(f"worker {addr} did not take the message (reply {reply!r}); "
                               f"does it have the {PLUGIN_NAME!r} plugin? Call "
                               "bonsai.dask.collective.ensure_plugin(client) before the fit")
        if isinstance(state.value, np.ndarray):
            self.bytes_sent += state.value.nbytes
