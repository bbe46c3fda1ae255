"""A round's class trees grown side by side: on small data, where one tree's split
step runs on one thread (the CPU backend's thread plan is serial), the K trees of a
multiclass round go to ``n_threads`` workers, worker j growing classes j, j + W, ...
in order, each with its own grower (cells, index buffers, histogram pool, node table).

Every class's tree depends only on the round's gradients (computed for all classes
before any tree) and writes only its own class's margins (``raw[k]``, the valid sets'
``ev.raw[k]``), so the trees, their values and every margin are the same bits as
growing them one after another; the divergence check and the model's tree order stay
in class order (``rounds.grow_round`` checks and appends after the workers finish).

Up to ``MAX_SIDE_ROWS`` rows this is done even where one tree's split step would
cut its rows between threads: on such data a step's parallel regions gain little
(each wakes the other threads), and K independent trees keep both cores busy.

Used only where it cannot change a result or race: one data shard, the CPU backend,
one output per tree, no leaf renewal from the labels, a thread-safe numba threading
layer (``omp`` or ``tbb``: the workers' kernels may run at the same time) and no
``BONSAI_PROFILE`` (its stage totals are not shared across threads).

Why: on the small-data suite bonsai's fits ran on one core where LightGBM used two
(``benchmarks/RESULTS.md``, session 11); a tree's split step is one compiled call
that releases the GIL, so two class trees fill both cores.  LightGBM's 5-class
example (7k x 28, 300 rounds, 63 leaves, 2 threads, medians of 3, two interleaved
pairs): 3.48 / 3.36 s in turn, 2.33 / 2.64 s side by side, the same model.
"""
from concurrent.futures import ThreadPoolExecutor

from . import _profile
from .comm import is_local

#: tests and benchmarks set this False to compare with the trees grown in turn
ENABLED = True
#: up to this many training rows the class trees go side by side even where one
#: tree's split step would run on several threads; the fit's grower then runs its
#: steps on one thread, as a worker.  Measured, 2 threads, in-process, the same
#: models: 5 classes, 34k rows, 300 rounds of 63 leaves: 3.13-3.21 s with each tree's
#: step on both threads (3.03 s on one), 2.28 s side by side; 10 classes, 160k x 50,
#: 30 rounds of depth 6: 5.5-5.8 s against 4.6-4.9 s.  Larger data is not measured
#: (and each worker holds its own cells and index buffers: 24 bytes a row).
MAX_SIDE_ROWS = 1 << 18


def side_growers(grower, p, k_out, comm, objective):
    """The growers of a round's class trees, one per worker (``grower`` first), or
    None when the trees are grown in turn (module docstring)."""
    if not (ENABLED and k_out >= 2 and grower.n_threads >= 2 and grower.n_values is None
            and is_local(comm) and objective.renew_leaf is None and not _profile.ENABLED):
        return None
    backend = grower.backend
    if not getattr(backend, "__name__", "").endswith("backends.cpu"):
        return None
    if not _thread_safe_layer():
        return None
    if getattr(grower.builder, "par", 0) is not None:   # the split step is parallel
        if grower.builder.n_rows > MAX_SIDE_ROWS:
            return None
        grower.builder.par = None       # one thread a tree: every worker grows serially
    n_workers = min(grower.n_threads, k_out)
    extra = getattr(grower, "_side", None)
    if extra is None or len(extra) != n_workers - 1:
        from .grow import Grower
        extra = [Grower(backend, grower.builder.data, p, 1, comm)
                 for _ in range(n_workers - 1)]
        grower._side = extra
    return [grower] + extra


def _thread_safe_layer():
    import numba
    try:
        layer = numba.threading_layer()
    except ValueError:          # no parallel kernel has run yet: the configured layer
        from ._threads import configure_threading_layer
        layer = configure_threading_layer()
    return layer in ("omp", "tbb")


def grow_side_by_side(growers, k_out, grow_class):
    """Run ``grow_class(grower, k)`` for every class, worker j taking classes j, j + W,
    ... in order with ``growers[j]`` (worker 0 on this thread); returns the results in
    class order.  Every worker has finished when this returns or raises (an exception,
    Ctrl-C included, is raised after the others are done, so no worker still writes
    the margins)."""
    n = len(growers)

    def work(j):
        return [(k, grow_class(growers[j], k)) for k in range(j, k_out, n)]

    out = [None] * k_out
    with ThreadPoolExecutor(max_workers=n - 1, thread_name_prefix="bonsai-class") as ex:
        futures = [ex.submit(work, j) for j in range(1, n)]
        try:
            for k, r in work(0):
                out[k] = r
            for f in futures:
                for k, r in f.result():
                    out[k] = r
        finally:
            for f in futures:       # let every worker finish before anything else runs
                try:
                    f.result()
                except BaseException:
                    pass
    return out
