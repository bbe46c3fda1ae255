"""The CUDA backend's training scores (``bonsai.scores``): resident on the device when
the objective and settings allow, else the host's.

``scores(builder, objective, params, y, w, raw, grad, hess)`` returns
``ResidentScores`` (``objective.DeviceScores`` behind the methods of
``bonsai.scores.HostScores``) when

* the fit trains on the device builder (not the CPU fallback);
* the objective runs on the device (``objective.supports``) and renews no leaves;
* ``subsample`` is 1 (the out-of-bag rows' score update reads the host margins) and
  gradients are not quantized (the exact leaf renewal reads host gradients);
* ``BONSAI_HOST_OBJECTIVE`` is unset (``=1`` forces the host path: on a GPU the
  device's ``exp`` can differ from numpy's in the last bit, so a check that the
  device builder grows the CPU's trees from the same gradients sets it).

Then labels, weights and margins upload once; per tree the gradients, their cells,
the identity sample and the leaf-value update run on the device, the cells and the
indices never cross the bus (the builder reads them in place) and the margins come
home once, when the fit ends (``sync``).  Otherwise the host path runs, as on the CPU,
with the builder taking the cells and indices per tree.
"""
import os
import sys

import numpy as np

from ...scores import HostScores
from . import objective as _objective
from ._profile import stage
from .builder import TreeBuilder


def resident_ok(builder, objective, params):
    """Whether a fit's scores can live on the device (see the module docstring)."""
    if os.environ.get("BONSAI_HOST_OBJECTIVE", "") not in ("", "0"):
        return False
    return (isinstance(builder, TreeBuilder) and _objective.supports(objective)
            and objective.renew_leaf is None and params.subsample >= 1.0
            and not params.quantized_grad)


def scores(builder, objective, params, y, w, raw, grad, hess):
    """The fit's scores: ``ResidentScores`` where ``resident_ok``, else host ones."""
    if not resident_ok(builder, objective, params):
        return HostScores(sys.modules["bonsai.backends.cuda"], objective, y, w, raw, grad,
                          hess)
    return ResidentScores(builder, objective, y, w, raw)


class ResidentScores:
    """``HostScores``' methods over ``objective.DeviceScores``; the builder reads the
    device cells and indices (``builder.resident``)."""

    resident = True

    def __init__(self, builder, objective, y, w, raw):
        with stage("upload"):
            self.dev = _objective.DeviceScores(
                objective, None, np.ascontiguousarray(y),
                None if w is None else np.ascontiguousarray(w, np.float64), raw)
        self.raw = raw
        builder.resident = self.dev
        builder.d_gh = self.dev.gh          # one copy of the cells: the builder's
        self.builder = builder

    def grad_hess(self):
        with stage("gradients"):
            self.dev.grad_hess()

    def quantize(self, builder, k, n_total, quant_bins, seed, comm, segs):
        with stage("gradients"):
            return self.dev.quantize(k, n_total, quant_bins, seed, segs, comm,
                                     out=builder.d_gh)

    def fill_range(self, idx):
        """The identity sample, written on the device (the host ``idx`` is not read)."""
        self.dev.fill_range(self.builder.d_idx, idx.shape[0])
        self.builder.idx_on_device = True

    def add_leaf_values(self, k, idx, leaf_start, leaf_stop, leaf_value):
        with stage("leaves"):
            self.dev.add_leaf_values(k, self.builder.d_idx, leaf_start, leaf_stop,
                                     np.ascontiguousarray(leaf_value, np.float64))

    def sync(self):
        """The device margins into the host ``raw`` (the fit's one copy home)."""
        with stage("host wait"):
            self.raw[:] = self.dev.to_host()
