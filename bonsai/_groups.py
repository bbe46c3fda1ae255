"""Query groups for learning to rank: the boundaries ``group_ptr`` of a Dataset's queries.

A ranking data set lists each query's documents as one contiguous run of rows.  The
runs are given either as ``group`` (the query sizes, in row order, as LightGBM's
``group`` / ``.query`` files) or as ``qid`` (one query id per row, XGBoost's ``qid``);
both become ``group_ptr``, an int64 ``(Q + 1,)`` array with ``group_ptr[0] == 0``,
``group_ptr[-1] == n`` and query ``q`` the rows ``group_ptr[q]:group_ptr[q + 1]``.

This module owns those checks (one ValueError / TypeError naming the parameter and the
bad value), the boundaries of a row subset (``subset_ptr``, for cv folds), the
per-row query index and the folds over whole queries.
"""
import numpy as np

__all__ = ["check_group", "group_from_qid", "resolve_groups", "row_query", "subset_ptr",
           "query_folds"]


def _as_1d(v, name):
    if hasattr(v, "to_numpy") and not isinstance(v, np.ndarray):
        v = v.to_numpy()
    v = np.asarray(v)
    if v.ndim == 2 and v.shape[1] == 1:
        v = v[:, 0]
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {v.shape}")
    return v


def check_group(group, n, name="group"):
    """``group`` (query sizes, positive integers summing to ``n``) -> group_ptr."""
    g = _as_1d(group, name)
    if g.dtype.kind == "f":
        bad = ~np.isfinite(g) | (g != np.floor(g))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name} must hold integer query sizes; got {name}[{i}]={g[i]!r}")
        g = g.astype(np.int64)
    elif g.dtype.kind not in "iu":
        raise TypeError(f"{name} must be integer query sizes, got dtype {g.dtype}")
    g = g.astype(np.int64)
    if g.shape[0] == 0 and n > 0:
        raise ValueError(f"{name} is empty but the data has {n} rows")
    if (g <= 0).any():
        i = int(np.flatnonzero(g <= 0)[0])
        raise ValueError(f"{name} must hold query sizes >= 1; got {name}[{i}]={int(g[i])}")
    total = int(g.sum())
    if total != n:
        raise ValueError(f"{name} sizes add up to {total} rows but the data has {n} rows")
    ptr = np.zeros(g.shape[0] + 1, np.int64)
    np.cumsum(g, out=ptr[1:])
    return ptr


def group_from_qid(qid, n, name="qid"):
    """``qid`` (one query id per row, each query's rows contiguous) -> group_ptr; a
    ValueError names the first row where a query id comes back after another one."""
    q = _as_1d(qid, name)
    if q.shape[0] != n:
        raise ValueError(f"{name} has {q.shape[0]} entries but the data has {n} rows")
    if q.dtype.kind == "f":
        bad = ~np.isfinite(q)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{name} contains a non-finite value ({q[i]}) at row {i}")
    elif q.dtype.kind not in "iuUSO":
        raise TypeError(f"{name} must hold query ids (integers or strings), got dtype {q.dtype}")
    if n == 0:
        return np.zeros(1, np.int64)
    starts = np.concatenate(([0], np.flatnonzero(q[1:] != q[:-1]) + 1)).astype(np.int64)
    ids = q[starts]
    _, first = np.unique(ids, return_index=True)
    if first.shape[0] != ids.shape[0]:       # some id starts two runs
        seen = np.zeros(ids.shape[0], bool)
        seen[first] = True
        r = int(np.flatnonzero(~seen)[0])
        row = int(starts[r])
        raise ValueError(f"{name}: queries must be contiguous; {name}={q[row]!r} comes back "
                         f"at row {row} after other queries (sort the rows by query)")
    return np.concatenate((starts, [n])).astype(np.int64)


def resolve_groups(group, qid, n):
    """The group_ptr of a Dataset given ``group`` and/or ``qid`` (None: no queries)."""
    if group is not None and qid is not None:
        raise ValueError("pass group (query sizes) or qid (query ids per row), not both")
    if group is not None:
        return check_group(group, n)
    if qid is not None:
        return group_from_qid(qid, n)
    return None


def row_query(group_ptr):
    """int64 ``(n,)``: the query index of every row."""
    sizes = np.diff(group_ptr)
    return np.repeat(np.arange(sizes.shape[0], dtype=np.int64), sizes)


def subset_ptr(group_ptr, rows, name="rows"):
    """The group_ptr of ``rows`` (row indices in the order taken): each query's rows
    taken must be one contiguous run (a ValueError names the first that is not)."""
    q = row_query(group_ptr)[rows]
    try:
        return group_from_qid(q, q.shape[0], name="query")
    except ValueError:
        starts = np.concatenate(([0], np.flatnonzero(q[1:] != q[:-1]) + 1))
        _, first = np.unique(q[starts], return_index=True)
        seen = np.zeros(starts.shape[0], bool)
        seen[first] = True
        r = int(starts[np.flatnonzero(~seen)[0]])
        raise ValueError(f"{name}: the rows of query {int(q[r])} are not contiguous "
                         f"(it comes back at position {r}); take whole queries in order"
                         ) from None


def query_folds(group_ptr, nfold, shuffle, seed):
    """``nfold`` (train_idx, valid_idx) pairs of sorted row indices, each query wholly
    in one validation fold: queries in a seeded random order (Philox) when
    ``shuffle``, dealt out as consecutive runs of near-equal query counts."""
    nq = group_ptr.shape[0] - 1
    if not 2 <= nfold <= nq:
        raise ValueError(f"nfold must be an integer in [2, {nq}] (the queries), got {nfold!r}")
    order = np.arange(nq, dtype=np.int64)
    if shuffle:
        order = np.random.Generator(np.random.Philox(seed)).permutation(nq)
    sizes = np.full(nfold, nq // nfold)
    sizes[:nq % nfold] += 1
    fold_of_q = np.empty(nq, np.int64)
    fold_of_q[order] = np.repeat(np.arange(nfold), sizes)
    fold_of = fold_of_q[row_query(group_ptr)]
    return [(np.flatnonzero(fold_of != k).astype(np.int64),
             np.flatnonzero(fold_of == k).astype(np.int64)) for k in range(nfold)]
