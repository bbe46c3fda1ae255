"""The CUDA backend's data: ``prepare`` puts a binned Dataset's bins on the device
once, row-major, and keeps the host's column-major bins beside them.

Binning itself runs on the host (``bonsai.binning``, the same cut points whatever
trains): only the binned matrix travels, once per Dataset and column array (cached on
it like the CPU layouts), as ``X (n, F)`` uint8 / uint16, the layout the histogram
fill reads row by row and the partition reads one cell of per row.
"""
from typing import NamedTuple

import numpy as np
from numba import cuda

from ..._profile import stage


class CudaData(NamedTuple):
    """What a CUDA fit reads: the host bins (validation and out-of-bag prediction,
    the CPU fallback), the device bins and the bin layout."""
    X_cols: np.ndarray
    X_dev: object
    bin_mapper: object
    source: object          # the Dataset (or training view) the CPU fallback prepares

    @property
    def n_rows(self):
        return self.X_cols.shape[1]


def prepare(data):
    """``CudaData`` of a binned data set (a ``Dataset`` or the ordered encoding's
    training view), uploaded once and cached on it (``_backend_data["cuda"]``)."""
    cache = getattr(data, "_backend_data", None)
    if cache is None:
        cache = data._backend_data = {}
    hit = cache.get("cuda")
    if hit is not None and hit.X_cols is data.X_cols and hit.bin_mapper is data.bin_mapper:
        return hit
    if not isinstance(data.X_cols, np.ndarray):     # bonsai.sparse.SparseBins
        raise ValueError("device='cuda' trains on dense input only; this Dataset was built "
                         "from a scipy.sparse matrix (train it with device='cpu', or pass "
                         "a dense array)")
    with stage("upload"):
        X_dev = cuda.to_device(np.ascontiguousarray(data.X_cols.T))
    out = CudaData(data.X_cols, X_dev, data.bin_mapper, data)
    cache["cuda"] = out
    return out
