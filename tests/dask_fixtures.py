"""A real Dask cluster for the tests: ``local_cluster(n)`` is a
``distributed.LocalCluster`` of ``n`` worker processes (one thread each) on loopback,
with a Client.  Every wait is bounded; only this cluster's own processes are
closed (work stealing is off unless asked for).  ``worker_pids(client)`` maps worker address -> the worker process's PID."""
import contextlib
import logging
import os

CONNECT_TIMEOUT_S = 60
#: a free port on loopback
LOOPBACK_ANY_PORT = "127.0.0.1:0"


@contextlib.contextmanager
def local_cluster(n_workers, threads_per_worker=1, stealing=False, **kw):
    """``stealing=False`` (the default here) turns the scheduler's work stealing off,
    so a task runs where its data lives and tests know which worker holds what."""
    import dask
    from distributed import Client, LocalCluster
    kw.setdefault("silence_logs", logging.ERROR)
    # the scheduler's HTTP server (its dashboard is off) on a free loopback port, not
    # 8787, which a concurrent test process (``pytest -n 2``) may hold
    kw.setdefault("scheduler_kwargs", {"dashboard_address": LOOPBACK_ANY_PORT})
    with dask.config.set({"distributed.scheduler.work-stealing": bool(stealing)}), LocalCluster(n_workers=n_workers, threads_per_worker=threads_per_worker,
                      processes=True, host="127.0.0.1", dashboard_address=None,
                      **kw) as cluster, \
            Client(cluster, timeout=CONNECT_TIMEOUT_S) as client:
        client.wait_for_workers(n_workers, timeout=CONNECT_TIMEOUT_S)
        yield client


def worker_pids(client):
    """{worker address: PID of its worker process}."""
    return client.run(os.getpid)
