"""``BONSAI_PROFILE=1``: a per-stage wall-clock breakdown of a fit, printed to stderr
when the fit ends.  Stages wrap whole kernel calls (never per-row work), and with the
variable unset ``stage()`` returns a shared no-op context, so the cost is one call.
"""
import contextlib
import os
import sys
import time

ENABLED = os.environ.get("BONSAI_PROFILE", "") not in ("", "0")
_totals = {}
_counts = {}
_NULL = contextlib.nullcontext()


class _Timer:
    __slots__ = ("name", "t0")

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        self.t0 = time.perf_counter()

    def __exit__(self, *exc):
        dt = time.perf_counter() - self.t0
        _totals[self.name] = _totals.get(self.name, 0.0) + dt
        _counts[self.name] = _counts.get(self.name, 0) + 1


def stage(name):
    """Context manager timing one stage (no-op unless BONSAI_PROFILE is set)."""
    return _Timer(name) if ENABLED else _NULL


def reset():
    _totals.clear()
    _counts.clear()


def report(title="fit", stream=None):
    """Print and return the breakdown {stage: seconds}; then reset."""
    if not ENABLED:
        return {}
    out = dict(_totals)
    total = sum(out.values()) or 1.0
    lines = [f"bonsai profile ({title}): stage, seconds, share, calls"]
    for name, secs in sorted(out.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {name:<14s} {secs:9.3f}s {100 * secs / total:5.1f}%  {_counts[name]:7d}")
    print("\n".join(lines), file=stream or sys.stderr)
    reset()
    return out
