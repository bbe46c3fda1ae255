"""The CUDA backend (numba-cuda): the protocol the boosting and grow loops call
(``bonsai.backends``), with the split step on the device.

Always registered, capability at runtime: ``status()`` says whether this process can
train here (numba-cuda imports and finds a GPU, or runs its simulator under
``NUMBA_ENABLE_CUDASIM=1``), and ``bonsai.backends.get_backend("cuda")`` refuses with
the reason and the fix where it cannot.  Models trained here are ordinary models:
they predict on the CPU anywhere.

* data: ``prepare`` (the bins on the device once per Dataset, ``binning``) and
  ``tree_builder`` (``builder.TreeBuilder``: device histogram pool, indices and the
  level step: ``partition``, ``histogram``, ``split``);
* the fit's training scores: ``scores`` (``resident.py``): on the device for
  squared_error, binary, multiclass and poisson (``objective.DeviceScores``: labels,
  margins, gradients and cells stay there, nothing per tree crosses the bus but the
  quantization maxima and the leaf table), else on the host;
* per tree, on host arrays as the CPU's (the host path): ``quantize``,
  ``sample_rows``, ``fill_range``, ``leaf_sums``, ``leaf_weights``,
  ``add_leaf_values``, ``predict_binned_add``; the device builder then takes the cells
  from the host per tree and hands the partitioned indices back.  Prediction:
  ``predict_raw``, ``predict_oblivious``, ``predict_leaf`` on the host, and
  ``predict.py``'s device kernels (``Booster.predict(device=...)``).

The CPU fallback: a fit whose categorical features do not fit the device scan
(``builder.fits_device``) trains with the CPU builder, after one warning.  Over
several data shards (``bonsai.dask``) the CUDA backend is refused with a clear error.
"""
import time
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


from .. import cpu as _cpu  # noqa: E402
from ...comm import LOCAL, is_local  # noqa: E402
from . import _profile  # noqa: E402
from .binning import CudaData, prepare  # noqa: E402
from .builder import TreeBuilder, fits_device  # noqa: E402
from .resident import scores  # noqa: E402
from .split import MAX_CAT_BINS  # noqa: E402

__all__ = ["CudaData", "TreeBuilder", "add_leaf_values", "fill_range", "leaf_sums",
           "leaf_weights", "predict_binned_add", "predict_leaf", "predict_oblivious",
           "predict_raw", "prepare", "quantize", "sample_rows", "scores", "status",
           "tree_builder"]

sample_rows = _cpu.sample_rows
fill_range = _cpu.fill_range
leaf_sums = _cpu.leaf_sums
leaf_weights = _cpu.leaf_weights
predict_binned_add = _cpu.predict_binned_add
predict_raw = _cpu.predict_raw
predict_oblivious = _cpu.predict_oblivious
predict_leaf = _cpu.predict_leaf


def quantize(grad, hess, n_rows, out, quant_bins=0, seed=0, comm=LOCAL, segs=None):
    """The CPU's ``quantize`` into the builder's host cells (timed as "gradients")."""
    with _profile.stage("gradients"):
        return _cpu.quantize(grad, hess, n_rows, out, quant_bins, seed, comm, segs)


def add_leaf_values(raw, idx, leaf_start, leaf_stop, leaf_value):
    """The CPU's ``add_leaf_values`` on the host scores (timed as "leaves")."""
    with _profile.stage("leaves"):
        _cpu.add_leaf_values(raw, idx, leaf_start, leaf_stop, leaf_value)


class FallbackWarning(UserWarning):
    """A CUDA fit trains on the CPU path (``tree_builder``)."""


def tree_builder(data, n_threads, pool_capacity, quantized, settings, cat, min_child_samples,
                 comm=LOCAL):
    """The per-fit ``TreeBuilder`` on the device, or the CPU's (one warning) when the
    data does not fit the device scan."""
    if not is_local(comm):
        raise ValueError("device='cuda' trains in one process; distributed training "
                         "(bonsai.dask) runs on device='cpu'")
    if not fits_device(data.bin_mapper):
        warnings.warn("device='cuda': a categorical feature has more value bins than the "
                      f"device split scan holds ({MAX_CAT_BINS}); this fit trains on the "
                      "CPU", FallbackWarning, stacklevel=3)
        t0 = time.perf_counter()
        out = _cpu.tree_builder(_cpu.prepare(data.source), n_threads, pool_capacity,
                                quantized, settings, cat, min_child_samples, comm)
        _profile.add("cpu fallback", time.perf_counter() - t0)
        return out
    return TreeBuilder(data, pool_capacity, quantized, settings, cat, min_child_samples)
