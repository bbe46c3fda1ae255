"""What every CUDA kernel module shares: the numba-cuda import, whether it runs on
the simulator, the launch sizes, and the float helpers that keep device arithmetic
bit-identical to the CPU kernels.

* ``SIM``: ``NUMBA_ENABLE_CUDASIM=1`` (numba's CPU simulator, which runs each thread
  as a Python thread: ~50 ms a block, so tests use tiny data and small blocks).
* ``THREADS``: threads per block of the row kernels; ``CHUNK`` rows per block of the
  partition (one row per thread, a block-wide scan); module constants, because a
  ``cuda.shared.array`` shape must be a literal or a module-level constant.
* ``fmul`` / ``fadd``: one IEEE multiply / add.  NVVM contracts ``a * b + c`` into an
  FMA by default, which rounds once instead of twice and so can change a gain in its
  last bit; the CPU kernels (LLVM without fast-math) never contract.  On the device
  the helpers are libdevice's ``__nv_dmul_rn`` / ``__nv_dadd_rn``, which are never
  contracted; the simulator computes in numpy float64 (no FMA), where its libdevice
  stubs do not exist, so there they are the plain operators.
"""
import numba
from numba import cuda

SIM = bool(numba.config.ENABLE_CUDASIM)

THREADS = 16 if SIM else 256
CHUNK = THREADS
#: blocks a grid-stride row kernel is launched with at most (the simulator runs every
#: block serially in Python)
MAX_BLOCKS = 1 if SIM else 8192

if SIM:
    @cuda.jit(device=True)
    def fmul(a, b):
        return a * b

    @cuda.jit(device=True)
    def fadd(a, b):
        return a + b
else:                                     # pragma: no cover - needs a GPU
    from numba.cuda import libdevice

    @cuda.jit(device=True)
    def fmul(a, b):
        return libdevice.dmul_rn(a, b)

    @cuda.jit(device=True)
    def fadd(a, b):
        return libdevice.dadd_rn(a, b)


def blocks_for(n, per_block=THREADS, cap=MAX_BLOCKS):
    """Blocks for ``n`` items at ``per_block`` a block (at least 1, at most ``cap``:
    the kernels stride over the rest)."""
    return max(1, min(cap, -(-int(n) // per_block)))
