"""Child script of ``tests/test_cuda_train.py``: compile every training kernel of
``bonsai.backends.cuda`` (histogram, partition, split) to PTX for sm_90 with NVVM (the
simulator off, no GPU needed: the simulator runs Python, so only this finds what the
CUDA compiler rejects) and print, as JSON, each kernel's count of float64 FMAs, or
``{"skip": why}`` where NVVM is missing.
"""
import json

from numba import types as t

from _cuda_ptx import compile_counts, setup

setup()
from bonsai.backends.cuda import histogram as h, partition as p, split as s  # noqa: E402

f8, i8, u8, u4, u1 = t.float64, t.int64, t.uint64, t.uint32, t.uint8


def a(dt, nd, layout="C"):
    return t.Array(dt, nd, layout)


X, H, I1, A1 = a(u1, 2), a(i8, 3), a(i8, 1), a(i8, 1, "A")   # A1: a row of a 2-D array
sigs = {
 "zero_slots": (h, (H, A1, a(i8, 2))),
 "fill_direct": (h, (X, I1, I1, a(i8, 2), a(u4, 1), i8, A1, A1, A1, i8, H, a(i8, 2))),
 "fill_tiles_exact": (h, (X, I1, I1, a(i8, 2), a(u4, 1), i8, A1, A1, A1, i8, I1, I1, H,
                          a(i8, 2))),
 "fill_tiles_packed": (h, (X, I1, I1, a(i8, 2), a(u4, 1), i8, A1, A1, A1, i8, I1, I1, H,
                           a(i8, 2))),
 "restore_default": (h, (H, I1, I1, A1, a(i8, 2))),
 "count_left": (p, (X, a(u4, 1), A1, A1, A1, A1, A1, A1, A1, a(u8, 2), I1)),
 "chunk_offsets": (p, (I1, A1, A1, I1, A1, A1, A1, I1)),
 "scatter": (p, (X, a(u4, 1), a(u4, 1), A1, A1, A1, A1, A1, A1, A1, a(u8, 2), A1, A1)),
 "copy_back": (p, (a(u4, 1), a(u4, 1), A1, A1)),
 "plan_children": (p, (A1, A1, I1, A1, A1, i8, i8, A1, A1, A1, A1, A1, A1)),
 "subtract": (s, (H, A1, A1)),
 "node_totals": (s, (H, A1, I1, A1, a(f8, 1), a(i8, 2), a(f8, 1), a(f8, 1))),
 "scan_features": (s, (H, A1, I1, I1, a(u1, 2), a(u1, 1), a(f8, 1), a(i8, 2), a(f8, 1), a(f8, 1),
                       a(f8, 2), a(i8, 2), a(u1, 2), a(i8, 3), a(u8, 3))),
 "pick_best": (s, (A1, a(u1, 1), a(f8, 1), a(f8, 2), a(i8, 2), a(u1, 2), a(i8, 3), a(u8, 3),
                   a(i8, 2), a(f8, 1), a(i8, 2), a(u8, 2))),
 "level_gains": (s, (H, I1, I1, I1, I1, a(u1, 1), a(u1, 1), a(f8, 1), a(i8, 2), a(f8, 1), a(f8, 1), a(f8, 2))),
 "range_sums": (s, (H, I1, i8, i8, i8, a(f8, 1), a(f8, 1), a(i8, 2))),
}
print(json.dumps({k: {"fma": v["fma"]} if "fma" in v else v
                  for k, v in compile_counts(sigs).items()}))
