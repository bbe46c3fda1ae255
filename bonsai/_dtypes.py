"""The dtypes every module agrees on, and why.

* ``X_BINNED``: uint8 when every feature fits in 256 bin codes (``max_bin <= 255``
  non-missing bins plus one missing bin), uint16 otherwise.  Row-major (C order),
  because gathered node histograms read whole rows: one cache line per row.
* ``GRAD``: float32 gradients and hessians, shape (K, n).  They are only read once
  per tree, by the fixed-point quantizer.
* ``HIST``: int64 fixed-point histogram cells ``[grad, hess_count]``.  Gradients are
  scaled once per tree by a power of two chosen so that no sum over all rows can
  overflow (see ``fixed_point_scale``).  The second channel packs the hessian and the
  row count into one integer, ``hess_q * 2**count_bits + 1`` per row, with
  ``count_bits = n_rows.bit_length()`` so a count never carries into the hessian
  bits: one add per row and feature instead of two.  Sums of packed values are packed
  sums (exactly), so ``hess = cell >> count_bits`` and ``count = cell & mask``.  Integer sums are exact, so a histogram is
  bit-identical whatever order or thread partition filled it, and sibling
  subtraction is exact (no negative hessian can appear).
* ``IDX``: uint32 sample indices (n < 2**32).
* ``SCORE``: float64 raw margins, gains and leaf values.
* Thresholds are float64; ``float32_floor`` gives the float32 threshold that sends
  every float32 input the same way (the float32 predictors and the ONNX export).
"""
import math

import numpy as np

GRAD = np.float32
HIST = np.int64
IDX = np.uint32
SCORE = np.float64
N_HIST_CHANNELS = 2  # grad, (hess << count_bits) + count

# The fixed-point budget: |sum of n quantized values| <= n * (max|v| * scale + 0.5)
# <= 2**62 + n / 2 < 2**63 for n < 2**62.  See ``fixed_point_scale``.
FIXED_POINT_BITS = 62
MAX_SCALE_EXPONENT = 60


def binned_dtype(max_bin):
    """uint8 if ``max_bin`` non-missing bins plus the missing bin fit in a byte."""
    return np.uint8 if max_bin <= 255 else np.uint16


def count_bits(n_rows):
    """Bits reserved for the row count in the packed hessian channel."""
    return max(1, int(n_rows).bit_length())


def fixed_point_scale(max_abs, n_rows, bits=FIXED_POINT_BITS):
    """Power-of-two scale ``s`` so that ``n_rows * max_abs * s <= 2**bits``.

    Each value is stored as ``rint(v * s)``; with ``|v| <= max_abs`` a sum over at
    most ``n_rows`` values is bounded by ``n_rows * (max_abs * s + 0.5) <= 2**bits +
    n_rows / 2``.  Gradients use ``bits = 62`` (< 2**63: int64 cells never overflow, in
    any order); hessians use ``62 - count_bits(n_rows)`` so that the packed
    ``hess * 2**count_bits + count`` stays below 2**63 as well.
    """
    if not math.isfinite(max_abs):
        raise FloatingPointError("non-finite gradient or hessian")
    if max_abs <= 0.0 or n_rows <= 0:
        return 1.0
    # numpy's log2 (the one the scales were always taken with), floored exactly
    e = math.floor(np.log2(2.0 ** bits / (float(n_rows) * float(max_abs))))
    e = min(e, MAX_SCALE_EXPONENT)
    return float(2.0 ** e)


def float32_floor(x):
    """The largest float32 <= each float64 ``x``: for a float32 value v,
    ``v > x  <=>  v > float32_floor(x)`` (and so ``v <= x`` likewise)."""
    with np.errstate(over="ignore"):
        f = x.astype(np.float32)
    down = f.astype(np.float64) > x
    f[down] = np.nextafter(f[down], np.float32(-np.inf))
    return f
