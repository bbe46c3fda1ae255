"""``BONSAI_CUDA_PROFILE=1``: a per-fit breakdown of a CUDA fit, printed to stderr when
the fit ends (``report``): upload, gradients, histogram, split, partition, leaves,
host wait and CPU fallback.

Kernel launches return before the device finishes, so a timed stage synchronises the
device on entry and exit: the times are the device's, and profiling slows a fit
down (with the variable unset ``stage()`` is a shared no-op context).
"""
import contextlib
import os
import sys
import time

from numba import cuda

ENABLED = os.environ.get("BONSAI_CUDA_PROFILE", "") not in ("", "0")
STAGES = ("upload", "gradients", "histogram", "split", "partition", "leaves", "host wait",
          "cpu fallback")
_totals = {}
_NULL = contextlib.nullcontext()


class _Timer:
    __slots__ = ("name", "t0")

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        cuda.synchronize()
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        cuda.synchronize()
        _totals[self.name] = _totals.get(self.name, 0.0) + time.perf_counter() - self.t0


def stage(name):
    """Context manager timing one stage of ``STAGES`` (no-op unless enabled)."""
    return _Timer(name) if ENABLED else _NULL


def add(name, seconds):
    """Count ``seconds`` to stage ``name`` (for times measured elsewhere)."""
    if ENABLED:
        _totals[name] = _totals.get(name, 0.0) + seconds


def report(stream=None):
    """Print and return {stage: seconds} of the fit; then reset."""
    if not ENABLED:
        return {}
    out = {name: _totals.get(name, 0.0) for name in STAGES}
    lines = ["bonsai CUDA profile (fit): stage, seconds"]
    lines += [f"  {name:<13s} {secs:9.4f}s" for name, secs in out.items()]
    print("\n".join(lines), file=stream or sys.stderr)
    _totals.clear()
    return out
