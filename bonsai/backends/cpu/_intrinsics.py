"""Low-level helpers for the CPU kernels: software prefetch intrinsics (an item of a
1-D array, a cell of a 2-D array), the histogram fill's two-cell add
(``add_cell_pair``), two 64-lane byte-vector operations for the
binned batch predictor (``gt_mask64``, ``or_bits64``), and the partition's 16-row
steps (``left_mask16``: the rows' split directions from a gather of their bins;
``compress16``: one side's rows packed into place), used where the target CPU has
AVX-512F (``AVX512F``).

Measured when the kernels were written (one thread, a gathered 100k-row node of a
row-major binned matrix): prefetching the node's rows 16-32 rows ahead took its
histogram from 10.4 ms to 2.5 ms, with identical output (the rows of a gathered node
are scattered through memory, so without a hint each one waits for a cache miss).  A prefetch is only a hint: it never changes results.
"""
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


def _emit_prefetch(builder, ptr):
    """``llvm.prefetch(ptr, read, locality 3, data)``."""
    i8p = ir.IntType(8).as_pointer()
    i32 = ir.IntType(32)
    fnty = ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32])
    fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.prefetch.p0")
    builder.call(fn, [builder.bitcast(ptr, i8p), i32(0), i32(3), i32(1)])


@intrinsic
def prefetch_item(typingctx, arr, i):
    """Prefetch ``arr[i]`` (1-D array) into cache for reading."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and isinstance(i, types.Integer)):
        return None
    sig = types.void(arr, i)

    def codegen(context, builder, signature, args):
        aryty, ity = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        k = context.cast(builder, args[1], ity, types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [k], wraparound=False)
        _emit_prefetch(builder, ptr)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def prefetch_cell(typingctx, arr, row, col):
    """Prefetch ``arr[row, col]`` (2-D array): with ``col`` the last column, the second
    cache line of a row that straddles two."""
    if not (isinstance(arr, types.Array) and arr.ndim == 2 and isinstance(row, types.Integer)
            and isinstance(col, types.Integer)):
        return None
    sig = types.void(arr, row, col)

    def codegen(context, builder, signature, args):
        aryty, rowty, colty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        r = context.cast(builder, args[1], rowty, types.intp)
        c = context.cast(builder, args[2], colty, types.intp)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [r, c], wraparound=False)
        _emit_prefetch(builder, ptr)
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, nogil=True, inline="always")
def prefetch_row(arr, row):
    """Prefetch the start of ``arr[row]`` (2-D array)."""
    prefetch_cell(arr, row, 0)


@intrinsic
def add_cell_pair(typingctx, arr, row, a, b):
    """``arr[row, 0] += a; arr[row, 1] += b`` for a C-contiguous 2-D int64 array with
    two columns, as one 2-lane vector load, add and store: the exact integer sums of
    the two scalar adds.  LLVM does not pair the two adds itself (numba's 2-D
    indexing hides that the cells are adjacent, and a flat view did not help), and
    the histogram fill is bound by its instruction count: 1.3-1.9 -> 0.8-1.3 ns a cell
    on the root of four small-suite entries (uint8 bins, one thread).  ``arr`` must
    have two columns: the exact-cell histograms (the packed fill's one column never
    comes here)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 2 and arr.layout == "C"
            and arr.dtype == types.int64 and isinstance(row, types.Integer)
            and isinstance(a, types.Integer) and isinstance(b, types.Integer)):
        return None
    sig = types.void(arr, row, a, b)

    def codegen(context, builder, signature, args):
        aryty, rowty, aty, bty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        r = context.cast(builder, args[1], rowty, types.intp)
        zero = context.get_constant(types.intp, 0)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [r, zero],
                                       wraparound=False)
        vt = ir.VectorType(ir.IntType(64), 2)
        vp = builder.bitcast(ptr, vt.as_pointer())
        i32 = ir.IntType(32)
        inc = builder.insert_element(ir.Constant(vt, ir.Undefined),
                                     context.cast(builder, args[2], aty, types.int64), i32(0))
        inc = builder.insert_element(inc, context.cast(builder, args[3], bty, types.int64),
                                     i32(1))
        builder.store(builder.add(builder.load(vp, align=8), inc), vp, align=8)
        return context.get_dummy_value()

    return sig, codegen


_I8 = ir.IntType(8)
_I32 = ir.IntType(32)
_LANES = 64


def _splat(builder, value, vt):
    """A vector of type ``vt`` with ``value`` in every lane."""
    first = builder.insert_element(ir.Constant(vt, ir.Undefined), value, _I32(0))
    zeros = ir.Constant(ir.VectorType(_I32, vt.count), [0] * vt.count)
    return builder.shuffle_vector(first, ir.Constant(vt, ir.Undefined), zeros)


@intrinsic
def gt_mask64(typingctx, arr, start, k):
    """``uint64`` whose bit ``j`` is ``arr[start + j] > k`` for the 64 bytes of a
    uint8 1-D array from ``start`` (caller keeps them in bounds): one vector compare
    and a mask move where the CPU has them (AVX-512BW: vpcmpub + kmovq)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.uint8
            and isinstance(start, types.Integer) and isinstance(k, types.Integer)):
        return None
    sig = types.uint64(arr, start, k)

    def codegen(context, builder, signature, args):
        aryty, sty, kty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        s = context.cast(builder, args[1], sty, types.intp)
        kk = context.cast(builder, args[2], kty, types.uint8)
        ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [s], wraparound=False)
        vt = ir.VectorType(_I8, _LANES)
        v = builder.load(builder.bitcast(ptr, vt.as_pointer()), align=1)
        bits = builder.icmp_unsigned(">", v, _splat(builder, kk, vt))
        return builder.bitcast(bits, ir.IntType(64))

    return sig, codegen


@intrinsic
def or_bits64(typingctx, arr, g, shift):
    """``arr[j] |= ((g >> j) & 1) << shift`` for the 64 bytes of a uint8 1-D array of
    at least 64 items: one mask-to-bytes expansion (AVX-512BW: vpmovm2b)."""
    if not (isinstance(arr, types.Array) and arr.ndim == 1 and arr.dtype == types.uint8
            and isinstance(g, types.Integer) and isinstance(shift, types.Integer)):
        return None
    sig = types.void(arr, g, shift)

    def codegen(context, builder, signature, args):
        aryty, gty, sty = signature.args
        ary = context.make_array(aryty)(context, builder, args[0])
        gg = context.cast(builder, args[1], gty, types.uint64)
        sh = context.cast(builder, args[2], sty, types.uint8)
        vt = ir.VectorType(_I8, _LANES)
        ptr = builder.bitcast(ary.data, vt.as_pointer())
        bits = builder.zext(builder.bitcast(gg, ir.VectorType(ir.IntType(1), _LANES)), vt)
        v = builder.or_(builder.load(ptr, align=1), builder.shl(bits, _splat(builder, sh, vt)))
        builder.store(v, ptr, align=1)
        return context.get_dummy_value()

    return sig, codegen


# ---- the partition's 16-row steps ---------------------------------------------------

_I1 = ir.IntType(1)
_I16 = ir.IntType(16)
_I64 = ir.IntType(64)
#: rows of one vector step (``left_mask16``, ``compress16``)
VECTOR_ROWS = 16
_V16 = ir.VectorType(_I32, VECTOR_ROWS)
_M16 = ir.VectorType(_I1, VECTOR_ROWS)


def _target_features():
    """The CPU features numba compiles for (its codegen's, which honours
    ``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES``), as a set of "+feature" / "-feature"
    strings; empty if numba does not say."""
    try:
        from numba.core.registry import cpu_target
        return set(cpu_target.target_context.codegen()._tm_features.split(","))
    except Exception:       # pragma: no cover - a numba without the attribute
        return set()


#: whether the compiled code may use AVX-512F's register compress (``compress16``)
AVX512F = "+avx512f" in _target_features()


def _vector_load16(context, builder, aryty, ary, i):
    """The 16 uint32 items ``ary[i:i + 16]`` of a C-contiguous 1-D array, as a vector."""
    k = context.cast(builder, i[0], i[1], types.intp)
    ptr = cgutils.get_item_pointer(context, builder, aryty, ary, [k], wraparound=False)
    return builder.load(builder.bitcast(ptr, _V16.as_pointer()), align=4)


def _is_u32_c(a):
    return isinstance(a, types.Array) and a.ndim == 1 and a.dtype == types.uint32 \
        and a.layout == "C"


@intrinsic
def left_mask16(typingctx, col, idx, i, tb, mb, dl):
    """``uint64`` whose bit ``j`` says row ``r = idx[i + j]`` goes left on a numeric
    split: ``col[r] <= tb or (col[r] == mb and dl)``, for the 16 rows from ``i``
    (caller keeps them in bounds).  ``col``: a 1-D uint8 / uint16 column (any
    stride), ``idx`` C-contiguous uint32; ``tb``, ``mb`` fit the column's dtype.
    One vector load of the rows, one gather of their bins (``llvm.masked.gather``:
    AVX-512 has it; elsewhere LLVM expands it into scalar loads) and two compares."""
    if not (isinstance(col, types.Array) and col.ndim == 1
            and col.dtype in (types.uint8, types.uint16) and _is_u32_c(idx)
            and isinstance(i, types.Integer) and isinstance(tb, types.Integer)
            and isinstance(mb, types.Integer) and isinstance(dl, types.Boolean)):
        return None
    sig = types.uint64(col, idx, i, tb, mb, dl)
    width = col.dtype.bitwidth

    def codegen(context, builder, signature, args):
        cty, xty, ity, tbt, mbt, _ = signature.args
        c = context.make_array(cty)(context, builder, args[0])
        x = context.make_array(xty)(context, builder, args[1])
        rows = _vector_load16(context, builder, xty, x, (args[2], ity))
        et = ir.IntType(width)
        vt = ir.VectorType(et, VECTOR_ROWS)
        v64 = ir.VectorType(_I64, VECTOR_ROWS)
        stride = cgutils.unpack_tuple(builder, c.strides, 1)[0]
        off = builder.mul(builder.zext(rows, v64), _splat(builder, stride, v64))
        base = _splat(builder, builder.ptrtoint(c.data, _I64), v64)
        pvt = ir.VectorType(et.as_pointer(), VECTOR_ROWS)
        ptrs = builder.inttoptr(builder.add(base, off), pvt)
        fnty = ir.FunctionType(vt, [pvt, _I32, _M16, vt])
        fn = cgutils.get_or_insert_function(builder.module, fnty,
                                            f"llvm.masked.gather.v16i{width}.v16p0")
        bins = builder.call(fn, [ptrs, _I32(width // 8), ir.Constant(_M16, [1] * VECTOR_ROWS),
                                 ir.Constant(vt, ir.Undefined)])
        tbv = _splat(builder, builder.trunc(context.cast(builder, args[3], tbt, types.int64),
                                            et), vt)
        mbv = _splat(builder, builder.trunc(context.cast(builder, args[4], mbt, types.int64),
                                            et), vt)
        dlb = args[5] if args[5].type == _I1 else builder.icmp_unsigned(
            "!=", args[5], ir.Constant(args[5].type, 0))
        miss = builder.and_(builder.icmp_unsigned("==", bins, mbv), _splat(builder, dlb, _M16))
        left = builder.or_(builder.icmp_unsigned("<=", bins, tbv), miss)
        return builder.zext(builder.bitcast(left, _I16), _I64)

    return sig, codegen


@intrinsic
def compress16(typingctx, src, i, dst, pos, mask):
    """``dst[pos:pos + 16]`` = the items ``src[i + j]`` whose ``mask`` bit ``j`` is
    set, in order, first; the remaining slots of the 16 get unspecified values (the
    caller owns all 16 and keeps them in bounds).  uint32 C-contiguous arrays.

    With AVX-512F: ``vpcompressd`` into a register and one unaligned store (the
    compress-to-memory form is microcoded and slow on some CPUs, e.g. AMD Zen 4);
    elsewhere ``llvm.masked.compressstore``, which LLVM expands where the CPU lacks it
    (the partition only calls this where ``AVX512F``; the portable form keeps code
    that numba lowers but never runs compilable on any target)."""
    if not (_is_u32_c(src) and _is_u32_c(dst) and isinstance(i, types.Integer)
            and isinstance(pos, types.Integer) and isinstance(mask, types.Integer)):
        return None
    sig = types.void(src, i, dst, pos, mask)

    def codegen(context, builder, signature, args):
        sty, ity, dty, pty, mty = signature.args
        s = context.make_array(sty)(context, builder, args[0])
        d = context.make_array(dty)(context, builder, args[2])
        v = _vector_load16(context, builder, sty, s, (args[1], ity))
        p = context.cast(builder, args[3], pty, types.intp)
        dptr = cgutils.get_item_pointer(context, builder, dty, d, [p], wraparound=False)
        m = builder.bitcast(builder.trunc(args[4], _I16), _M16)
        if AVX512F:
            fnty = ir.FunctionType(_V16, [_V16, _V16, _M16])
            fn = cgutils.get_or_insert_function(builder.module, fnty,
                                                "llvm.x86.avx512.mask.compress.v16i32")
            packed = builder.call(fn, [v, ir.Constant(_V16, ir.Undefined), m])
            builder.store(packed, builder.bitcast(dptr, _V16.as_pointer()), align=4)
        else:
            fnty = ir.FunctionType(ir.VoidType(), [_V16, dptr.type, _M16])
            fn = cgutils.get_or_insert_function(builder.module, fnty,
                                                "llvm.masked.compressstore.v16i32")
            builder.call(fn, [v, dptr, m])
        return context.get_dummy_value()

    return sig, codegen
