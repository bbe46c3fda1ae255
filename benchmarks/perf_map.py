"""A ``perf`` symbol map for bonsai's numba-compiled functions.

``perf report`` shows numba's machine code as bare addresses (``[JIT] tid N``).
Importing this module in the profiled process registers an exit hook that writes
``/tmp/perf-<pid>.map``, the file ``perf`` reads for JIT code: one line per function
of every compiled overload of every numba dispatcher in a ``bonsai`` module (the
serial twins of the parallel kernels included): the names and sizes ``nm`` reads from
each overload's object code, at the addresses the loaded library gives those names.  Only overloads compiled in this process
have their object code at hand, so profile with an empty numba cache::

    NUMBA_CACHE_DIR=$(mktemp -d) perf record -k CLOCK_MONOTONIC -F 4000 -o fit.data \\
        python -c "import sys; sys.path.insert(0, 'benchmarks'); import perf_map; ..."
    perf report -i fit.data --no-children --sort dso,symbol [--time START,END]

Print ``time.clock_gettime(time.CLOCK_MONOTONIC)`` around the part of interest (with
``-k CLOCK_MONOTONIC`` perf stamps samples on that clock) and pass the two times to
``--time`` to leave the compilation out.  Needs binutils' ``nm``.
"""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
import tempfile


def _libraries():
    from numba.core.registry import CPUDispatcher
    libs = {}
    for name, mod in list(sys.modules.items()):
        if mod is None or not name.startswith("bonsai"):
            continue
        for value in list(vars(mod).values()):
            for disp in (value, getattr(value, "serial", None)):
                if isinstance(disp, CPUDispatcher):
                    for cres in disp.overloads.values():
                        libs[id(cres.library)] = cres.library
    return libs.values()


def _symbols(obj: bytes) -> dict:
    """name -> size of the text symbols of one object file."""
    with tempfile.NamedTemporaryFile(suffix=".o", delete=False) as fh:
        fh.write(obj)
    try:
        out = subprocess.run(["nm", "-S", "--defined-only", fh.name], capture_output=True,
                             text=True, check=False).stdout
    finally:
        os.unlink(fh.name)
    syms = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in ("t", "T"):
            syms[parts[3]] = int(parts[1], 16)
    return syms


def write_map(path: str | None = None) -> int:
    """Write the map (default ``/tmp/perf-<pid>.map``); returns the symbols written."""
    entries = {}
    for lib in _libraries():
        try:
            obj = lib._get_compiled_object()    # absent for overloads loaded from a cache
        except RuntimeError:
            continue
        for name, size in _symbols(obj).items():
            addr = lib.get_pointer_to_function(name)
            if addr:
                entries[addr] = (max(size, 1), name)
    path = path or f"/tmp/perf-{os.getpid()}.map"
    with open(path, "w") as fh:
        for addr in sorted(entries):
            size, name = entries[addr]
            fh.write(f"{addr:x} {size:x} {name}\n")
    print(f"perf_map: {len(entries)} symbols -> {path}", file=sys.stderr)
    return len(entries)


atexit.register(write_map)
