"""How CPU kernels are compiled: ``parallel_kernel`` makes a parallel kernel and its
serial twin from one body written with ``prange``.

A parallel region costs tens of microseconds (more under CPU contention), which is
more than the whole work of a small node, so the backend calls the serial twin when
its plan has one thread.  The twin gets its own qualified name, so numba's on-disk
cache keeps the two compilations apart.
"""
import types

from numba import njit


def parallel_kernel(py_func):
    """Decorator: ``f`` compiled with ``parallel=True``; ``f.serial`` is the twin."""
    par = njit(parallel=True, cache=True, nogil=True)(py_func)
    twin = types.FunctionType(py_func.__code__, py_func.__globals__, py_func.__name__ + "_serial",
                              py_func.__defaults__, py_func.__closure__)
    twin.__qualname__ = py_func.__qualname__ + "_serial"
    twin.__doc__ = py_func.__doc__
    par.serial = njit(cache=True, nogil=True)(twin)
    return par
