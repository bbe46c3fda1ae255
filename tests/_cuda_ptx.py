"""Child script of ``tests/test_cuda_objective.py``: compile every kernel of
``bonsai.backends.cuda.objective`` / ``rows`` to PTX for sm_90 with NVVM (no GPU
needed, the simulator off) and print, as JSON, each kernel's count of FMA and of
round-half-even float-to-int64 conversions; ``{"skip": why}`` where NVVM is missing.
``setup`` and ``compile_counts`` also serve ``_cuda_ptx_train.py``.
"""
import json
import re
import sys
import types as pytypes


def setup():
    """Exit printing ``{"skip": why}`` where NVVM is missing; else let device functions
    compile for sm_90 with no GPU (they ask the current device for its target)."""
    from numba.cuda.cudadrv import nvvm
    try:
        nvvm.NVVM()
    except Exception as e:                 # noqa: BLE001 - no toolkit: nothing to check
        print(json.dumps({"skip": f"NVVM unavailable ({type(e).__name__}: {e})"}))
        sys.exit(0)
    import numba.cuda.dispatcher as disp
    disp.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(9, 0))


def compile_counts(sigs):
    """{kernel: {"fma": n, "rni": n}} of ``sigs`` ({name: (module, argument types)}),
    or {"error": why} for a kernel the CUDA compiler rejects."""
    from numba import cuda
    res = {}
    for name, (mod, sig) in sigs.items():
        try:
            ptx, _ = cuda.compile_ptx(getattr(mod, name).py_func, sig, cc=(9, 0))
        except Exception as e:             # noqa: BLE001 - reported to the test
            res[name] = {"error": f"{type(e).__name__}: {str(e)[:500]}"}
            continue
        res[name] = {"fma": len(re.findall(r"\bfma\.rn\.f64\b", ptx)),
                     "rni": len(re.findall(r"\bcvt\.rni\.s64\.f64\b", ptx))}
    return res


if __name__ == "__main__":
    from numba import types as t

    setup()
    from bonsai.backends.cuda import objective as o
    from bonsai.backends.cuda import rows as r

    f8, f4, i8, i4, u8, u4 = t.float64, t.float32, t.int64, t.int32, t.uint64, t.uint32

    def a(dt, nd):
        return t.Array(dt, nd, "C")

    grads = (a(f8, 2), a(f8, 1), t.boolean)
    out2 = (a(f4, 2), a(f4, 2))
    sigs = {
        "_sq_kernel": (o, (a(f4, 1),) + grads + out2),
        "_binary_kernel": (o, (a(f8, 1),) + grads + out2),
        "_poisson_kernel": (o, (a(f8, 1),) + grads + (f8,) + out2),
        "_softmax_kernel": (o, (a(f4, 1),) + grads + (f8,) + out2),
        "_max_abs_kernel": (o, (a(f4, 2), a(f4, 2), i8, a(f8, 2))),
        "_max_final_kernel": (o, (a(f8, 2), i8, a(f8, 2))),
        "_quantize_exact_kernel": (o, (a(f4, 2), a(f4, 2), i8, f8, f8, i8, a(i8, 2))),
        "_quantize_packed_kernel": (o, (a(f4, 2), a(f4, 2), i8, f8, f8, u8, a(i8, 2), i8,
                                        a(i8, 2))),
        "_sample_count_kernel": (r, (a(i8, 2), i8, u8, f8, a(i4, 1))),
        "_exclusive_scan_kernel": (r, (a(i4, 1), a(i8, 1), a(i8, 1))),
        "_sample_scatter_kernel": (r, (a(i8, 2), i8, u8, f8, a(i8, 1), a(u4, 1))),
        "_fill_range_kernel": (r, (a(u4, 1), i8)),
        "_add_leaf_values_kernel": (r, (a(f8, 2), i8, a(u4, 1), a(i8, 2), a(f8, 1), i8)),
    }
    print(json.dumps(compile_counts(sigs)))
