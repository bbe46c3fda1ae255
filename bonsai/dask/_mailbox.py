"""The messages of ``bonsai.dask.collective``: each worker's mailbox, the worker
plugin that adds the ``bonsai_put`` handler to its listener, and ``abort_fit``.

A mailbox maps ``fit_id -> {(seq, step, src, dst): Future}``; whichever comes first,
message or receive, creates the slot's future.  Finished fits (aborted, failed,
closed) are remembered (``MAX_FINISHED``) so their late messages are rejected.
Only the worker's event loop touches a mailbox.  See ``collective`` for the
protocol and the internal-API risk.
"""
import asyncio
from collections import OrderedDict

from distributed import WorkerPlugin, get_worker
from distributed.utils import sync


PLUGIN_NAME = "bonsai-collective"
HANDLER = "bonsai_put"
MAX_FINISHED = 4096     # finished fit ids a mailbox remembers (to reject late messages)
_OK = "OK"


class PeerLostError(RuntimeError):
    """A peer of the fit is gone (its worker was lost and the driver aborted the fit,
    it could not be reached, or it gave up); the collective cannot complete."""

    def __init__(self, reason):
        self.reason = str(reason)
        super().__init__(self.reason)


class _Mailbox:
    """One worker's messages: ``fit_id -> {(seq, step, src, dst): Future}``, and the
    recently finished fits ``fit_id -> (state, reason)`` (state "aborted", "failed"
    or "closed").  Only used on the worker's event loop."""

    def __init__(self):
        self.slots = {}
        self.finished = OrderedDict()

    def _slot(self, fit_id, key):
        box = self.slots.setdefault(fit_id, {})
        fut = box.get(key)
        if fut is None:
            fut = box[key] = asyncio.get_running_loop().create_future()
        return fut

    def put(self, fit_id, key, payload):
        if fit_id in self.finished:
            state, reason = self.finished[fit_id]
            return {"status": "rejected", "state": state, "reason": reason}
        fut = self._slot(fit_id, key)
        if fut.done():
            return {"status": "rejected", "state": "duplicate",
                    "reason": f"a second message for fit {fit_id!r} {key}"}
        fut.set_result(payload)
        return _OK

    def check(self, fit_id):
        """Raise if ``fit_id`` is finished here."""
        if fit_id in self.finished:
            state, reason = self.finished[fit_id]
            if state == "closed":
                raise RuntimeError(f"the DaskComm of fit {fit_id!r} is closed")
            raise PeerLostError(reason)

    async def get(self, fit_id, key, timeout, describe):
        self.check(fit_id)
        fut = self._slot(fit_id, key)
        try:
            return await asyncio.wait_for(fut, timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no message within {timeout:g} s from {describe()}") from None
        finally:
            box = self.slots.get(fit_id)
            if box is not None:
                box.pop(key, None)
                if not box:
                    del self.slots[fit_id]

    def finish(self, fit_id, state, reason):
        """Mark ``fit_id`` finished (the first state sticks), drop its buffered
        messages and fail its pending receives; returns how many were pending."""
        if fit_id not in self.finished:
            self.finished[fit_id] = (state, str(reason))
            while len(self.finished) > MAX_FINISHED:
                self.finished.popitem(last=False)
        state, reason = self.finished[fit_id]
        n = 0
        for fut in self.slots.pop(fit_id, {}).values():
            if not fut.done():
                fut.set_exception(PeerLostError(reason) if state != "closed" else
                                  RuntimeError(f"the DaskComm of fit {fit_id!r} was closed"))
                n += 1
        return n

    def shutdown(self, reason):
        for fit_id in list(self.slots):
            self.finish(fit_id, "aborted", reason)


class CollectivePlugin(WorkerPlugin):
    """Adds the ``bonsai_put`` handler to a worker and holds its mailbox."""

    name = PLUGIN_NAME
    idempotent = True       # registering again keeps the running instance (and mailbox)

    def setup(self, worker):
        self.worker = worker
        self.mailbox = _Mailbox()
        worker.handlers[HANDLER] = self.bonsai_put

    def teardown(self, worker):
        if worker.handlers.get(HANDLER) == self.bonsai_put:
            del worker.handlers[HANDLER]
        self.mailbox.shutdown(f"worker {worker.address} closed its bonsai-collective plugin")

    async def bonsai_put(self, fit_id, seq, step, src, dst, kinds, metas, data=None):
        return self.mailbox.put(fit_id, (seq, step, src, dst), (kinds, metas, data))


def ensure_plugin(client):
    """Register ``CollectivePlugin`` on every current and future worker of
    ``client``'s cluster, once (a second call changes nothing).  With an asynchronous
    client, await the result."""
    return client.register_plugin(CollectivePlugin(), name=PLUGIN_NAME)


def _plugin(worker):
    plugin = worker.plugins.get(PLUGIN_NAME)
    if plugin is None or not hasattr(plugin, "mailbox"):
        return None
    return plugin


def _on_loop(worker, fn, *args):
    """``fn(*args)`` run on ``worker``'s event loop (directly when already on it)."""
    try:
        on_loop = asyncio.get_running_loop() is worker.loop.asyncio_loop
    except RuntimeError:
        on_loop = False
    if on_loop:
        return fn(*args)

    async def call():
        return fn(*args)
    return sync(worker.loop, call)


def abort_fit(fit_id, reason, dask_worker=None):
    """Fail every pending and later receive of fit ``fit_id`` on this worker with
    ``PeerLostError(reason)``; later messages of the fit are rejected.  The driver
    runs it as ``client.run(abort_fit, fit_id, reason, workers=[...])`` (on the
    worker's event loop); from another thread it hands the work to the loop.
    Returns the number of receives it failed."""
    worker = dask_worker if dask_worker is not None else get_worker()
    plugin = _plugin(worker)
    if plugin is None:
        return 0
    return _on_loop(worker, plugin.mailbox.finish, fit_id, "aborted", reason)
