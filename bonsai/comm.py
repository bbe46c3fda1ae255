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
* random draws: hashes of the global row id (a rank's rows are the global rows
  ``row_offset .. row_offset + n - 1``), never a stream.

With the shards in rank order forming the global row order, the trees are exactly
those of a one-shard fit (quantized mode's exact leaf re-estimation is the
exception: there the per-rank float sums are added in rank order, deterministic for
a given number of ranks).

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


LOCAL = LocalComm()


def check_comm(comm):
    """``comm`` or ``LOCAL`` for None; a TypeError for what is not a Comm."""
    if comm is None:
        return LOCAL
    if not isinstance(comm, Comm):
        raise TypeError(f"comm must implement bonsai.comm.Comm (rank, size, allreduce_sum, "
                        f"allreduce_max, allgather), got {type(comm).__name__}")
    if not (isinstance(comm.size, int) and comm.size >= 1
            and isinstance(comm.rank, int) and 0 <= comm.rank < comm.size):
        raise ValueError(f"comm: rank={comm.rank!r} and size={comm.size!r} must be ints with "
                         "0 <= rank < size")
    return comm


def is_local(comm):
    return comm.size == 1


def gather_concat(comm, arrays):
    """The rank-order concatenation, along their last (row) axis, of each of
    ``arrays`` (a tuple of arrays or None) over ranks; with one rank, the arrays
    themselves."""
    if is_local(comm):
        return arrays
    parts = comm.allgather(arrays)
    return tuple(None if a is None else np.concatenate([p[i] for p in parts], axis=-1)
                 for i, a in enumerate(arrays))


def row_offset(comm, n_local):
    """(global id of this rank's first row, global row count)."""
    if is_local(comm):
        return 0, int(n_local)
    counts = [int(c) for c in comm.allgather(int(n_local))]
    return sum(counts[:comm.rank]), sum(counts)
