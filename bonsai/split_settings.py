"""The named settings the grow loop hands to a backend's split kernels.

Three NamedTuples of float64 fields, built once per fit (``SplitSettings``,
``CatSettings``) or once per tree (``Scales``, returned by the backend's
``quantize``).  numba types them as tuples, so a kernel reads ``cfg.reg_lambda``
where it once read a magic index of an array; the fields are all float64 so that
each is one homogeneous tuple type (one compiled signature).
"""
from typing import NamedTuple


class SplitSettings(NamedTuple):
    """Split scoring and leaf-weight regularisation (LightGBM / XGBoost names)."""
    reg_lambda: float
    reg_alpha: float
    max_delta_step: float
    min_child_weight: float
    min_split_gain: float

    @classmethod
    def from_params(cls, p):
        return cls(float(p.reg_lambda), float(p.reg_alpha), float(p.max_delta_step),
                   float(p.min_child_weight), float(p.min_split_gain))


class CatSettings(NamedTuple):
    """Native categorical split settings (LightGBM's names and defaults)."""
    max_cat_to_onehot: float = 4.0
    max_cat_threshold: float = 32.0
    cat_smooth: float = 10.0
    cat_l2: float = 10.0
    min_data_per_group: float = 100.0

    @classmethod
    def from_params(cls, p):
        return cls(float(p.max_cat_to_onehot), float(p.max_cat_threshold),
                   float(p.cat_smooth), float(p.cat_l2), float(p.min_data_per_group))


class Scales(NamedTuple):
    """How one tree's integer histogram cells turn back into sums.

    Exact mode: cells are (grad * grad_scale, hess * hess_scale * 2**count_bits +
    count); both scales are powers of two, so their reciprocals are exact.  Quantized
    mode (``packed`` 1.0): one cell ``g * 2**32 + h`` of stochastically rounded
    levels; ``count_bits`` is 0 and counts are estimated from the hessians."""
    grad: float
    hess: float
    count_bits: float
    packed: float
    inv_grad: float
    inv_hess: float

    @classmethod
    def exact(cls, sg, sh, count_bits):
        return cls(float(sg), float(sh), float(count_bits), 0.0, 1.0 / sg, 1.0 / sh)

    @classmethod
    def quantized(cls, sg, sh):
        return cls(float(sg), float(sh), 0.0, 1.0, 1.0 / sg, 1.0 / sh)
