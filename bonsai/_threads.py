"""Thread-count resolution and numba threading-layer setup.

This module owns everything about how many threads bonsai uses and how numba
runs its ``parallel=True`` kernels:

* :func:`resolve_n_threads` turns the ``n_threads`` parameter (``None`` =
  auto) into a concrete count, honouring CPU affinity and cgroup CPU quotas
  (containers), and warns once per process about oversubscription.
* :func:`configure_threading_layer` picks numba's threading layer before the
  first parallel kernel runs.
* :func:`thread_context` scopes ``numba.set_num_threads`` to a block and, on the
  workqueue layer (not thread-safe), serialises parallel regions across Python
  threads.

Several Python threads may use these at once: numba's thread count is per calling
thread (``numba.set_num_threads`` sets a thread-local value, so a context in one
thread never changes another's), the layer choice runs under a lock, and the OpenMP
layer runs parallel regions from several Python threads at once (each its own team).

Every call into a ``parallel=True`` kernel must happen inside
:func:`thread_context`.
"""

from __future__ import annotations

import math
import os
import threading
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

__all__ = [
    "CGROUP_ROOT",
    "available_threads",
    "cgroup_cpu_limit",
    "configure_threading_layer",
    "hardware_thread_count",
    "resolve_n_threads",
    "thread_context",
    "waiting_on_peers",
]

CGROUP_ROOT = "/sys/fs/cgroup"

# Set once the oversubscription warning has been issued (once per process).
_warned_oversubscription = False
# Serialises parallel regions: numba's workqueue layer aborts the process on
# concurrent use from several Python threads. Re-entrant for nested contexts.
_PARALLEL_LOCK = threading.RLock()
# Serialises configure_threading_layer: the layer choice and the GOMP_SPINCOUNT
# variable set around libgomp's load must not interleave between Python threads.
_CONFIG_LOCK = threading.Lock()


# ---------------------------------------------------------------------------
# Thread counts.
# ---------------------------------------------------------------------------

def hardware_thread_count() -> int:
    """Number of CPUs this process may run on.

    Returns
    -------
    int
        ``len(os.sched_getaffinity(0))`` where available, else
        ``os.cpu_count()``; at least 1.
    """
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, n)


def _read_ints(path: Path) -> list[str] | None:
    try:
        return path.read_text().split()
    except (OSError, UnicodeDecodeError):
        return None


def _quota_to_threads(quota: int, period: int) -> int | None:
    if quota <= 0 or period <= 0:  # cgroup v1 writes -1 for "no limit"
        return None
    return max(1, math.ceil(quota / period))


def cgroup_cpu_limit(root: str | os.PathLike = CGROUP_ROOT) -> int | None:
    """CPU limit imposed by a cgroup CPU quota, if any.

    Parameters
    ----------
    root : str or path-like, default "/sys/fs/cgroup"
        cgroup mount point (injectable for tests).

    Returns
    -------
    int or None
        ``ceil(quota / period)`` (at least 1), or ``None`` when there is no
        quota or it cannot be read.

    Notes
    -----
    cgroup v2: ``<root>/cpu.max`` holds ``"<quota> <period>"`` or
    ``"max <period>"`` (no limit). cgroup v1: ``cpu.cfs_quota_us`` and
    ``cpu.cfs_period_us`` under ``<root>/cpu``, ``<root>/cpu,cpuacct`` or
    ``<root>`` itself; a quota of -1 means no limit. Only the cgroup at
    ``root`` is read (inside a container with a cgroup namespace that is the
    container's own cgroup), not its ancestors.
    """
    root = Path(root)
    v2 = _read_ints(root / "cpu.max")
    if v2:
        if v2[0] == "max":
            return None
        try:
            period = int(v2[1]) if len(v2) > 1 else 100_000
            return _quota_to_threads(int(v2[0]), period)
        except ValueError:
            return None
    for sub in ("cpu", "cpu,cpuacct", "cpuacct,cpu", "."):
        quota = _read_ints(root / sub / "cpu.cfs_quota_us")
        period = _read_ints(root / sub / "cpu.cfs_period_us")
        if quota and period:
            try:
                return _quota_to_threads(int(quota[0]), int(period[0]))
            except ValueError:
                return None
    return None


def available_threads(root: str | os.PathLike = CGROUP_ROOT) -> int:
    """Hardware thread count capped by the cgroup CPU quota.

    Parameters
    ----------
    root : str or path-like, default "/sys/fs/cgroup"
        cgroup mount point, passed to :func:`cgroup_cpu_limit`.

    Returns
    -------
    int
        At least 1.
    """
    n = hardware_thread_count()
    quota = cgroup_cpu_limit(root)
    return max(1, min(n, quota) if quota is not None else n)


def resolve_n_threads(n_threads: int | None, *,
                      root: str | os.PathLike = CGROUP_ROOT) -> int:
    """Resolve the ``n_threads`` parameter to a concrete thread count.

    Parameters
    ----------
    n_threads : int or None
        ``None`` means all CPUs available to the process (affinity and cgroup
        quota aware). An explicit count is honoured even above that limit,
        with a ``RuntimeWarning`` issued once per process.
    root : str or path-like, default "/sys/fs/cgroup"
        cgroup mount point (for tests).

    Returns
    -------
    int
        The thread count, at least 1.

    Raises
    ------
    TypeError
        ``n_threads`` is not an int (``bool`` rejected).
    ValueError
        ``n_threads`` < 1.
    """
    global _warned_oversubscription
    limit = available_threads(root)
    if n_threads is None:
        return limit
    if isinstance(n_threads, bool) or not hasattr(n_threads, "__index__"):
        raise TypeError(f"n_threads must be an int or None, got {n_threads!r}")
    n = int(n_threads)
    if n < 1:
        raise ValueError(f"n_threads = {n} is out of range; allowed: [1, inf) or None")
    if n > limit and not _warned_oversubscription:
        _warned_oversubscription = True
        warnings.warn(
            f"n_threads={n} exceeds the {limit} CPU(s) available to this process "
            "(affinity / cgroup quota); oversubscription usually slows training. "
            "This warning is shown once per process.",
            RuntimeWarning, stacklevel=2)
    return n


# ---------------------------------------------------------------------------
# numba threading layer.
# ---------------------------------------------------------------------------

def _layer_initialized() -> str | None:
    """Name of numba's active threading layer, or None if not launched yet."""
    from numba.np.ufunc import parallel

    if not getattr(parallel, "_is_initialized", False):
        return None
    try:
        return parallel.threading_layer()
    except ValueError:
        return None


#: spin iterations of GNU OpenMP's idle threads before they sleep (``GOMP_SPINCOUNT``),
#: applied to the libgomp numba loads unless the user set the variable.  Measured on
#: 2 cores, 30 trees of 1M x 28 (fit seconds, idle / with a second process busy on
#: one core): workqueue 1.63 / 2.31 depth-wise and 3.3-3.6 / 3.58 leaf-wise; OpenMP
#: with libgomp's default spinning 1.22 / 3.56 and 2.5-2.8 / -; OpenMP with 1000 spins
#: 1.35 / 2.36 and 3.17 / 3.65 (5000 spins: 2.93 idle but 4.29 busy leaf-wise).
GOMP_SPINCOUNT = 1000
_chosen_layer = None
# Set in a child forked after the parent launched numba's OpenMP threads: numba would
# terminate the child at its first parallel region, so thread_context raises instead.
_forked_after_omp = False


def _after_fork_in_child():
    global _forked_after_omp
    if _layer_initialized() == "omp":
        _forked_after_omp = True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def forked_after_omp() -> bool:
    """True in a child forked after numba's OpenMP threads ran in the parent: only
    serial kernels may run here (prediction falls back to them; training raises)."""
    return _forked_after_omp


def _omp_available() -> bool:
    """Load numba's OpenMP pool (and libgomp) with ``GOMP_SPINCOUNT`` in effect."""
    set_env = "GOMP_SPINCOUNT" not in os.environ
    if set_env:
        os.environ["GOMP_SPINCOUNT"] = str(GOMP_SPINCOUNT)
    try:
        from numba.np.ufunc import omppool  # noqa: F401  (loads libgomp)
        return True
    except ImportError:
        return False
    finally:
        if set_env:
            del os.environ["GOMP_SPINCOUNT"]


def configure_threading_layer() -> str:
    """Choose numba's threading layer before any parallel kernel runs.

    Sets ``numba.config.THREADING_LAYER`` to ``"omp"`` (GNU OpenMP with short
    spinning, see ``GOMP_SPINCOUNT``) when numba can load it, else ``"workqueue"``,
    unless the user chose a layer through the ``NUMBA_THREADING_LAYER`` environment
    variable or by setting ``numba.config.THREADING_LAYER`` themselves.  Idempotent;
    has no effect once numba's threads are launched (the layer is fixed then).

    Returns
    -------
    str
        The active layer if numba's threads are already launched, else the
        configured one (``"omp"``, ``"workqueue"``, or the user's choice).
    """
    import numba

    active = _layer_initialized()
    if active is not None:
        return active
    with _CONFIG_LOCK:
        return _configure_locked(numba)


def _configure_locked(numba) -> str:
    global _chosen_layer
    active = _layer_initialized()
    if active is not None:
        return active
    # Why OpenMP with short spinning, measured on these 2-core machines:
    # * a parallel region costs 1.3 us on OpenMP against 62 us on workqueue, and a
    #   fit enters thousands of them (one to a few per level or leaf-wise split);
    #   30 trees of 1M x 28 fit 17-25% faster (numbers at GOMP_SPINCOUNT above).
    # * libgomp's default idle spinning collapses when another process wants the
    #   cores (a depth-wise fit went 1.22 s -> 3.56 s with one core busy, workqueue
    #   1.63 -> 2.31 s); with 1000 spins it went 1.35 -> 2.36 s.
    # * numba's libgomp is its own runtime next to the copies LightGBM and XGBoost
    #   bundle; tests/test_threading.py trains all three in one process.
    # GNU OpenMP is not fork-safe (as for LightGBM and XGBoost): fork a process
    # before training in it, or use the spawn start method.
    if not os.environ.get("NUMBA_THREADING_LAYER") and (
            numba.config.THREADING_LAYER == "default" or
            numba.config.THREADING_LAYER == _chosen_layer):
        if _chosen_layer is None:
            _chosen_layer = "omp" if _omp_available() else "workqueue"
        numba.config.THREADING_LAYER = _chosen_layer
    return numba.config.THREADING_LAYER


@contextmanager
def waiting_on_peers() -> Iterator[None]:
    """Wrap a wait on other threads or processes (a distributed fit's collective):
    this thread lets go of the workqueue layer's parallel-region lock while it waits,
    so a peer fit in the same process can reach the same collective, and takes it
    back afterwards (nested holds included)."""
    state = _PARALLEL_LOCK._release_save() if _PARALLEL_LOCK._is_owned() else None
    try:
        yield
    finally:
        if state is not None:
            _PARALLEL_LOCK._acquire_restore(state)


@contextmanager
def thread_context(n: int) -> Iterator[int]:
    """Run a block with numba's thread count set to ``n``.

    Calls :func:`configure_threading_layer` first, then
    ``numba.set_num_threads(n)``, restoring the previous value on exit.
    ``n`` is capped at ``numba.config.NUMBA_NUM_THREADS`` (the number of
    threads numba launched; ``set_num_threads`` cannot exceed it). That cap
    never changes results: the kernels' results do not depend on the thread
    count, since histogram cells are integer sums.

    With the workqueue layer the block also holds a process-wide re-entrant
    lock, because that layer aborts the process when two Python threads run
    parallel kernels at once; concurrent fits from several Python threads are
    therefore serialised (each one uses all its threads anyway).

    Parameters
    ----------
    n : int
        Requested thread count (typically from :func:`resolve_n_threads`).

    Yields
    ------
    int
        The thread count actually set.
    """
    configure_threading_layer()
    import numba

    if _forked_after_omp and _layer_initialized() == "omp":
        raise RuntimeError(
            "bonsai cannot train in a process forked from one that already ran bonsai's "
            "parallel kernels on numba's GNU OpenMP threading layer (GNU OpenMP is not "
            "fork-safe; LightGBM and XGBoost share this limit; prediction still works, "
            "on one thread). Start worker processes "
            "with multiprocessing's 'spawn' or 'forkserver' method, or set "
            "NUMBA_THREADING_LAYER=workqueue before importing bonsai.")
    n_eff = max(1, min(int(n), int(numba.config.NUMBA_NUM_THREADS)))
    prev = numba.get_num_threads()  # launches numba's threads if needed
    locked = _layer_initialized() == "workqueue"
    if locked:
        _PARALLEL_LOCK.acquire()
    try:
        numba.set_num_threads(n_eff)
        try:
            yield n_eff
        finally:
            numba.set_num_threads(prev)
    finally:
        if locked:
            _PARALLEL_LOCK.release()
