"""Low-level helpers for the CPU kernels: software prefetch intrinsics (an item of a
1-D array, a cell of a 2-D array), and two 64-lane byte-vector operations for the
binned batch predictor (``gt_mask64``, ``or_bits64``).

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
