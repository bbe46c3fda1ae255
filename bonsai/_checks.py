"""Value checks for the parameter table (``bonsai._params``): type tags that accept
and normalise a raw value (``_as_int``, ``_as_float``, ...) and range / choice checks
that raise the ``TypeError`` / ``ValueError`` naming the parameter and the value.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .backends import known, unusable_message, usable


# ---------------------------------------------------------------------------
# Type tags: each accepts a raw value and returns (ok, normalised value).
# ---------------------------------------------------------------------------

def _as_int(v):
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        return False, None
    return True, int(v)


def _as_float(v):
    if isinstance(v, (bool, np.bool_)) or not isinstance(
            v, (int, float, np.integer, np.floating)):
        return False, None
    return True, float(v)


def _as_str(v):
    return (True, str(v)) if isinstance(v, str) else (False, None)


def _as_bool(v):
    return (True, bool(v)) if isinstance(v, (bool, np.bool_)) else (False, None)


def _as_none(v):
    return (True, None) if v is None else (False, None)


def _as_callable(v):
    return (True, v) if callable(v) and not isinstance(v, str) else (False, None)


def _as_str_seq(v):
    if isinstance(v, str):
        return True, (str(v),)
    if not isinstance(v, (list, tuple)) or not all(isinstance(s, str) for s in v):
        return False, None
    return True, tuple(str(s) for s in v)


def _as_seq(v, converters):
    """(ok, tuple) of a 1-D list / tuple / array whose items each pass the first of
    ``converters`` that accepts them (each returns (ok, value))."""
    if isinstance(v, np.ndarray):
        if v.ndim != 1:
            return False, None
        v = v.tolist()
    if not isinstance(v, (list, tuple)):
        return False, None
    out = []
    for item in v:
        for conv in converters:
            ok, x = conv(item)
            if ok:
                break
        else:
            return False, None
        out.append(x)
    return True, tuple(out)


def _as_feature_seq(v):
    return _as_seq(v, (_as_int, _as_str))


def _as_float_seq(v):
    return _as_seq(v, (_as_float,))


_TYPE_TAGS: dict[str, tuple[Callable[[Any], tuple[bool, Any]], str]] = {
    "int": (_as_int, "an int"),
    "float": (_as_float, "a float"),
    "str": (_as_str, "a str"),
    "None": (_as_none, "None"),
    "bool": (_as_bool, "a bool"),
    "callable": (_as_callable, "a callable"),
    "str_seq": (_as_str_seq, "a str or a list/tuple of str"),
    "feature_seq": (_as_feature_seq, "a list of int indices / str names"),
    "float_seq": (_as_float_seq, "a list of floats"),
}


def _type_desc(types: tuple[str, ...]) -> str:
    return " or ".join(_TYPE_TAGS[t][1] for t in types)


def _short_repr(v: Any) -> str:
    r = repr(v)
    return r if len(r) <= 80 else r[:77] + "..."


# ---------------------------------------------------------------------------
# Range checks. A check is called with (name, value) for non-None values and
# raises ValueError; ``allowed`` is the human-readable allowed set.
# ---------------------------------------------------------------------------

class Check:
    """Base class of range checks; ``allowed`` describes the valid set."""

    allowed: str = ""

    def __call__(self, name: str, value: Any) -> None:  # pragma: no cover
        raise NotImplementedError

    def fail(self, name: str, value: Any, extra: str = "",
             what: str = "is out of range") -> None:
        raise ValueError(
            f"parameter {name!r} = {_short_repr(value)} {what}; "
            f"allowed: {self.allowed}{extra}")


class Interval(Check):
    """Numeric interval, optionally with extra discrete allowed values."""

    def __init__(self, lo=-math.inf, hi=math.inf, lo_closed=True, hi_closed=True,
                 also=(), allowed=None):
        self.lo, self.hi = lo, hi
        self.lo_closed, self.hi_closed = lo_closed, hi_closed
        self.also = tuple(also)
        left = "[" if lo_closed and lo != -math.inf else "("
        right = "]" if hi_closed and hi != math.inf else ")"
        fmt = lambda x: "inf" if x == math.inf else "-inf" if x == -math.inf else repr(x)
        self.allowed = f"{left}{fmt(lo)}, {fmt(hi)}{right}"
        if self.also:
            self.allowed += " or " + " or ".join(repr(a) for a in self.also)
        if allowed is not None:
            self.allowed = allowed

    def __call__(self, name, value):
        if not isinstance(value, (int, float)):  # e.g. callable/str branch
            return
        if value in self.also:
            return
        if isinstance(value, float) and not math.isfinite(value):
            self.fail(name, value, " (must be finite)")
        lo_ok = value >= self.lo if self.lo_closed else value > self.lo
        hi_ok = value <= self.hi if self.hi_closed else value < self.hi
        if not (lo_ok and hi_ok):
            self.fail(name, value)


class Choices(Check):
    """String must be one of a fixed set (callables pass if allowed)."""

    def __init__(self, choices, allow_callable=False):
        self.choices = tuple(choices)
        self.allow_callable = allow_callable
        self.allowed = "one of " + ", ".join(repr(c) for c in self.choices)
        if allow_callable:
            self.allowed += ", or a callable"

    def __call__(self, name, value):
        if not isinstance(value, str) or value in self.choices:
            return
        close = difflib.get_close_matches(value, self.choices, n=1)
        self.fail(name, value, f" (did you mean {close[0]!r}?)" if close else "",
                  what="is not valid")


class DeviceCheck(Check):
    """A registered device that can train here (the registry, ``bonsai.backends``):
    an unknown name gets the choices, a known one that cannot train here (no GPU, no
    numba-cuda) the reason and the fix."""

    @property
    def allowed(self):
        return "one of " + ", ".join(repr(d) for d in known())

    def __call__(self, name, value):
        if value not in known():
            raise ValueError(f"parameter {name!r} = {_short_repr(value)} is not a device: "
                             f"choose {self.allowed}")
        ok, why = usable(value)
        if not ok:
            raise ValueError(f"parameter {name!r}: {unusable_message(value, why)}")


class NonEmptyNames(Check):
    """Sequence of metric names: each a non-empty str."""

    allowed = "non-empty metric names"

    def __call__(self, name, value):
        for s in value:
            if not s:
                self.fail(name, value, " (empty metric name)")


class GainList(Check):
    """Relevance gains (``label_gain``): a non-empty list of finite floats >= 0."""

    allowed = "a non-empty list of finite floats >= 0"

    def __call__(self, name, value):
        if not value:
            self.fail(name, value, " (empty)")
        for x in value:
            if not (math.isfinite(x) and x >= 0):
                self.fail(name, value, f" (bad entry {x!r})")


class FeatureList(Check):
    """Categorical feature list: indices >= 0, non-empty names, no duplicates."""

    allowed = "distinct feature indices >= 0 or non-empty feature names"

    def __call__(self, name, value):
        for item in value:
            if (isinstance(item, int) and item < 0) or item == "":
                self.fail(name, value, f" (bad entry {item!r})")
        if len(set(value)) != len(value):
            dup = sorted({repr(v) for v in value if value.count(v) > 1})
            self.fail(name, value, f" (duplicate entries {', '.join(dup)})")


# ---------------------------------------------------------------------------
# The table.
# ---------------------------------------------------------------------------
