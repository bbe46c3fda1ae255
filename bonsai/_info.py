"""``bonsai info``: what this installation can do here -- versions, numba's threading
layer, the thread count ``n_threads = 0`` (auto) resolves to and why, whether CUDA is
usable, and which grower x device pairs can train here and which are predict-only.

Every probe is guarded: a broken optional stack (numba's CUDA support, a backend that
fails to import) is reported as a reason, never raised.
"""
import os
import platform
import sys
import warnings

from ._params import GROW_POLICIES
from ._threads import (CGROUP_ROOT, available_threads, cgroup_cpu_limit,
                       configure_threading_layer, hardware_thread_count)
from ._version import __version__
from .backends import known, usable


def threading_layer():
    """(active layer, how it was chosen).  Starts numba's thread pool (about 0.2 s)."""
    import numba
    chosen = configure_threading_layer()
    how = ("set by NUMBA_THREADING_LAYER" if os.environ.get("NUMBA_THREADING_LAYER")
           else "chosen by bonsai (GNU OpenMP with short spinning when numba has it, "
                "else workqueue; NUMBA_THREADING_LAYER overrides)")
    try:
        numba.get_num_threads()            # launches the pool
        active = numba.threading_layer()
    except Exception as e:                 # noqa: BLE001 - reported, not raised
        return chosen, f"{how}; not started: {type(e).__name__}: {e}"
    return active, how


def thread_report(root=CGROUP_ROOT):
    """(resolved count, the reason in words) for ``n_threads = 0`` / None."""
    import numba
    n_aff = hardware_thread_count()
    n_cpu = os.cpu_count() or n_aff
    quota = cgroup_cpu_limit(root)
    n = available_threads(root)
    parts = [f"{n_aff} CPU(s) in this process's affinity mask (of {n_cpu} on the machine)"]
    if quota is None:
        parts.append("no cgroup CPU quota")
    else:
        parts.append(f"cgroup CPU quota of {quota} CPU(s)"
                     + (" (the limit)" if quota < n_aff else ""))
    pool = int(numba.config.NUMBA_NUM_THREADS)
    if pool < n:
        parts.append(f"numba's pool has {pool} thread(s) (NUMBA_NUM_THREADS), so at most "
                     f"{pool} run")
    return n, "; ".join(parts)


def cuda_status():
    """(usable, detail) of CUDA through numba, never raising."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from numba import cuda
    except Exception as e:                 # noqa: BLE001
        return False, f"numba's CUDA support does not import ({type(e).__name__}: {e})"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ok = bool(cuda.is_available())
            if not ok:
                return False, "numba.cuda.is_available() is False (no GPU or driver)"
            name = cuda.get_current_device().name
    except Exception as e:                 # noqa: BLE001
        return False, f"numba.cuda failed ({type(e).__name__}: {e})"
    if isinstance(name, bytes):
        name = name.decode(errors="replace")
    return True, f"device 0: {name}"


def grower_rows():
    """[(grower, device, status)] for every grower x device."""
    rows = []
    for device in known():
        ok, why = usable(device)
        status = "trains here" if ok else (f"predict-only here: {why} (device={device!r} "
                                           "cannot train; its models predict on the CPU)")
        rows.extend((g, device, status) for g in GROW_POLICIES)
    return rows


def info_lines():
    """The report of ``bonsai info``, as lines."""
    import llvmlite
    import numba
    import numpy

    here = os.path.dirname(os.path.abspath(__file__))
    layer, how = threading_layer()
    n, why = thread_report()
    cuda_ok, cuda_detail = cuda_status()
    lines = [
        f"bonsai {__version__} ({here})",
        f"python {platform.python_version()} ({platform.python_implementation()}, "
        f"{sys.platform} {platform.machine()})",
        f"numpy {numpy.__version__}",
        f"numba {numba.__version__} (llvmlite {llvmlite.__version__})",
        f"threading layer: {layer} ({how})",
        f"n_threads = 0 (auto) -> {n}: {why}",
        f"CUDA: {'usable' if cuda_ok else 'not usable'} here ({cuda_detail})",
        "growers:",
    ]
    width = max(len(g) for g in GROW_POLICIES)
    for grower, device, status in grower_rows():
        lines.append(f"  {grower:<{width}}  {device:<4}  {status}")
    return lines
