"""A fit's training scores and the per-tree steps that touch every row: gradients,
their integer cells, the identity sample and the leaf-value update.

The boosting loop (``bonsai.boosting``) asks its backend for them once per fit
(``backend.scores``) and calls the same methods whoever holds the rows:

* ``HostScores`` (here): margins, gradients and cells in host arrays; the backend's
  kernels write them (``quantize`` into the tree builder's ``gh``).  Every backend can
  run this way, and the loop's host-side steps (out-of-bag rows, leaf renewal, the
  ordered encoding) read these arrays.
* the CUDA backend's resident scores (``bonsai.backends.cuda.resident``): the same
  methods with the arrays on the device, for the objectives and settings it supports.

``raw`` is always the host margins (K, n): a resident implementation fills it by
``sync()`` when the fit ends.
"""


class HostScores:
    """Scores in host arrays: ``raw (K, n)`` float64, ``grad`` / ``hess (K, n)``
    float32; ``backend`` is the backend module whose kernels run the steps."""

    resident = False

    def __init__(self, backend, objective, y, w, raw, grad, hess):
        self.backend, self.objective = backend, objective
        self.y, self.w, self.raw, self.grad, self.hess = y, w, raw, grad, hess

    def grad_hess(self):
        self.objective.grad_hess(self.y, self.raw, self.w, self.grad, self.hess)

    def quantize(self, builder, k, n_total, quant_bins, seed, comm, segs):
        """Output ``k``'s cells for this tree into the tree builder's ``gh``
        (``backend.quantize``); returns its ``Scales``."""
        return self.backend.quantize(self.grad[k], self.hess[k], n_total, builder.gh,
                                     quant_bins, seed, comm, segs)

    def quantize_all(self, builder, n_total, comm):
        """Every output's cells for one vector-leaf tree into the builder's ``gh (n,
        2K)`` (``backend.quantize_multi``); returns its ``MultiScales``."""
        return self.backend.quantize_multi(self.grad, self.hess, n_total, builder.gh, comm)

    def fill_range(self, idx):
        self.backend.fill_range(idx)

    def add_leaf_values(self, k, idx, leaf_start, leaf_stop, leaf_value):
        self.backend.add_leaf_values(self.raw[k], idx, leaf_start, leaf_stop, leaf_value)

    def sync(self):
        """The host ``raw`` is current (nothing to copy)."""
