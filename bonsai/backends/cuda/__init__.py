"""The CUDA backend (numba-cuda): the protocol the boosting and grow loops call
(``bonsai.backends``), with the split step on the device.

Always registered, capability at runtime: ``status()`` says whether this process can
train here (numba-cuda imports and finds a GPU, or runs its simulator under
``NUMBA_ENABLE_CUDASIM=1``), and ``bonsai.backends.get_backend("cuda")`` refuses with
the reason and the fix where it cannot.  Models trained here are ordinary models:
they predict on the CPU anywhere.
"""
import warnings

from ._device import SIM


def status():
    """(can train here, why not), never raising."""
    if SIM:
        return True, ""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from numba import cuda
            if not cuda.is_available():
                return False, "numba.cuda.is_available() is False: no GPU or driver"
    except Exception as e:                 # noqa: BLE001 - any failure is a reason
        return False, f"numba.cuda failed ({type(e).__name__}: {e})"
    return True, ""
