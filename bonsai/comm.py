"""The communicator: how one fit spread over several data shards agrees on its numbers.

A fit over ``size`` shards runs one copy of the boosting loop per shard ("rank"),
each over its own rows.  Every decision that would read local data is taken from a
reduced quantity instead, so every rank grows the same tree:

* histograms: summed over ranks between the histogram build and the split scan
  (integer cells: the sum is exact in any order);
* node row counts, the smaller child and ``min_split_rows``: from the summed counts
  of the partition;
* the quantization scale: the largest |gradient| and |hessian| over ranks, and the
  global sampled row count;
* ``base_score``, L1/quantile leaf renewal and the evaluation metrics: from the
  gathered labels, residuals and predictions, concatenated in rank order;
* random draws: hashes of the global row id, never a stream.

A rank's rows are global row ranges, its **segments**: an int64 ``(S, 3)`` array of
(local start, global start, length) rows.  By default the ranks hold consecutive
ranges in rank order (``row_offset``); a Dataset whose ``global_rows`` attribute is
set (the Dask front end: a worker's shard is the data's partitions it holds, in any
placement) says where each of its local rows lies in the global order.  Gathered
rows are put back in global order (``gather_concat``), so the trees are exactly those
of a one-shard fit on the rows in global order, for any number of ranks and any
placement (quantized mode's exact leaf re-estimation is the exception: there the
per-rank float sums are added in rank order, deterministic for a given number of
ranks).

``Comm`` is the protocol; ``LocalComm`` the one-shard communicator that returns its
inputs (the default).  A distributed backend (Dask) provides its own.
"""
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Comm(Protocol):
    """What the boosting loop needs from a group of ranks.  Every rank calls the same
    methods in the same order; each call returns the same result on every rank."""

    rank: int
    size: int

    def allreduce_sum(self, a: np.ndarray) -> np.ndarray:
        """The element-wise sum over ranks of an int64 array (same shape everywhere)."""

    def allreduce_max(self, x: float) -> float:
        """The largest of the ranks' ``x``."""

    def allgather(self, obj) -> list:
        """Every rank's ``obj``, in rank order."""

    def reduce_scatter_sum(self, parts) -> np.ndarray:
        """``parts``: one int64 array per rank (this rank's contribution to each);
        returns the element-wise sum over ranks of their ``parts[self.rank]`` (every
        rank's ``parts[j]`` has one shape)."""


class LocalComm:
    """One rank: every collective returns its input."""

    rank = 0
    size = 1

    def allreduce_sum(self, a):
        return a

    def allreduce_max(self, x):
        return float(x)

    def allgather(self, obj):
        return [obj]

    def reduce_scatter_sum(self, parts):
        return parts[0]


LOCAL = LocalComm()


def check_comm(comm):
    """``comm`` or ``LOCAL`` for None; a TypeError for what is not a Comm."""
    if comm is None:
        return LOCAL
    if not isinstance(comm, Comm):
        raise TypeError(f"comm must implement bonsai.comm.Comm (rank, size, allreduce_sum, "
                        f"allreduce_max, allgather, reduce_scatter_sum), got "
                        f"{type(comm).__name__}")
    if not (isinstance(comm.size, int) and comm.size >= 1
            and isinstance(comm.rank, int) and 0 <= comm.rank < comm.size):
        raise ValueError(f"comm: rank={comm.rank!r} and size={comm.size!r} must be ints with "
                         "0 <= rank < size")
    return comm


def is_local(comm):
    return comm.size == 1


def gather_concat(comm, arrays, segments=None):
    """Each of ``arrays`` (a tuple of arrays or None, rows along the last axis) over
    every rank, its rows in global order: the rank-order concatenation when
    ``segments`` is None (consecutive ranks), else every rank's rows placed by its
    ``segments``.  With one rank and no segments, the arrays themselves."""
    if segments is None:
        if is_local(comm):
            return arrays
        parts = comm.allgather(arrays)
        return tuple(None if a is None else np.concatenate([p[i] for p in parts], axis=-1)
                     for i, a in enumerate(arrays))
    parts = comm.allgather((arrays, segments))
    n_total = sum(int(s[:, 2].sum()) for _, s in parts)
    out = []
    for i, a in enumerate(arrays):
        if a is None:
            out.append(None)
            continue
        dtype = np.result_type(*[arrs[i] for arrs, _ in parts])   # same on every rank
        full = np.empty(a.shape[:-1] + (n_total,), dtype)
        for arrs, segs in parts:
            for lo, g, length in segs:
                full[..., g:g + length] = arrs[i][..., lo:lo + length]
        out.append(full)
    return tuple(out)


def check_segments(segments, n_local, name="global_rows"):
    """``segments`` as a C-contiguous int64 (S, 3) array covering local rows
    ``0..n_local-1`` in order (a ValueError naming ``name`` otherwise)."""
    segs = np.ascontiguousarray(segments, dtype=np.int64)
    if segs.ndim != 2 or segs.shape[1] != 3 or (segs[:, 2] < 0).any() or (segs[:, 1] < 0).any():
        raise ValueError(f"{name} must be an (S, 3) array of (local start, global start, "
                         f"length) rows, got shape {segs.shape}")
    ends = np.cumsum(segs[:, 2])
    if int(ends[-1] if ends.size else 0) != n_local or (segs[:, 0] != ends - segs[:, 2]).any():
        raise ValueError(f"{name} must cover the {n_local} local rows in order")
    return segs


def segments(comm, n_local, global_rows=None):
    """(this rank's segments, global row count): ``global_rows`` when given (a
    Dataset's), else the consecutive range of ``row_offset``."""
    if global_rows is None:
        row0, n_total = row_offset(comm, n_local)
        return np.array([[0, row0, n_local]], np.int64), n_total
    n_total = sum(int(c) for c in comm.allgather(int(n_local))) if comm.size > 1 else n_local
    return global_rows, n_total


def global_ids(segs, local):
    """The global row ids of local rows ``local`` (int array) under ``segs``."""
    local = np.asarray(local, np.int64)
    j = np.searchsorted(segs[:, 0], local, side="right") - 1
    return segs[j, 1] + (local - segs[j, 0])


def row_offset(comm, n_local):
    """(global id of this rank's first row, global row count)."""
    if is_local(comm):
        return 0, int(n_local)
    counts = [int(c) for c in comm.allgather(int(n_local))]
    return sum(counts[:comm.rank]), sum(counts)
