"""The scale limits: how big an input bonsai's index types can address, and the checks
that refuse a bigger one with a ValueError naming the limit (never a wrong model).

Every compiled kernel indexes arrays with 64-bit integers (numba types shapes,
``range`` and integer literals as int64 and widens uint32 / int32 operands in
arithmetic), so rows x features (cells), histogram offsets (``feat_off`` int64) and
node tables (int64 rows) have no 32-bit bound.  What stays bounded:

* rows: sample indices are uint32 (``bonsai._dtypes.IDX``), so a Dataset (one data
  shard) holds at most ``MAX_ROWS = 2**32 - 1`` rows (``check_rows``, at ``Dataset``);
* ``quantized_grad``: packed cells hold a signed 32-bit gradient sum (``|g_q| * n <
  2**31``), so a quantized fit takes at most ``MAX_QUANTIZED_ROWS = 2**31 - 1`` rows
  over every shard (``check_quantized_rows``);
* bins: codes are uint8 / uint16 (``max_bin <= 65535``); sparse input's cell indices
  ``feat_off[f] + bin`` are uint32, so its features' bins total at most
  ``MAX_SPARSE_BINS = 2**32`` (``check_sparse_bins``);
* histogram memory: a fit holds up to ``pool slots`` histograms of ``total bins x
  channels`` int64 cells (``max_bin = 65535`` over 1000 continuous features is 1 GB a
  histogram); ``check_histogram_memory`` refuses, before anything is allocated, a fit
  whose histograms cannot fit in this machine's memory;
* leaves: ``max_leaves <= 131072`` (``_params.MAX_LEAVES_LIMIT``) keeps a tree below
  2**18 nodes, far inside ``Tree``'s int32 child indices; the predictor's packed node
  records (``bonsai.tree.node_records``) hold a child index below 2**31 and a feature
  below 2**21 (wider models are walked node by node instead).
"""
import os

#: rows of one Dataset / data shard: sample indices are uint32
MAX_ROWS = (1 << 32) - 1
#: rows of a quantized_grad fit over every shard: packed cells sum 32-bit gradients
MAX_QUANTIZED_ROWS = (1 << 31) - 1
#: bins of all features of a scipy.sparse Dataset: its cell indices are uint32
MAX_SPARSE_BINS = 1 << 32


def check_rows(n_rows, name="data"):
    """A ValueError when ``n_rows`` exceeds ``MAX_ROWS``."""
    if int(n_rows) > MAX_ROWS:
        raise ValueError(f"{name} has {int(n_rows)} rows, more than bonsai's limit of "
                         f"{MAX_ROWS} (2**32 - 1) rows per Dataset: sample indices are "
                         "uint32. Split the rows over several shards (bonsai.dask) or "
                         "subsample them")


def check_quantized_rows(n_rows):
    """A ValueError when a ``quantized_grad`` fit has more than ``MAX_QUANTIZED_ROWS``
    rows (over every shard)."""
    if int(n_rows) > MAX_QUANTIZED_ROWS:
        raise ValueError(f"quantized_grad=True trains on at most {MAX_QUANTIZED_ROWS} "
                         f"(2**31 - 1) rows (packed cells hold 32-bit gradient sums); "
                         f"this fit has {int(n_rows)}: use quantized_grad=False")


def check_sparse_bins(n_bins_total):
    """A ValueError when sparse bins would need cell indices past uint32."""
    if int(n_bins_total) > MAX_SPARSE_BINS:
        raise ValueError(f"max_bin: the features of this scipy.sparse matrix have "
                         f"{int(n_bins_total)} bins in all, more than the {MAX_SPARSE_BINS} "
                         "(2**32) its uint32 cell indices address: lower max_bin")


def memory_bytes():
    """This machine's physical memory in bytes, or None where unknown."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return None


def histogram_bytes(n_bins_total, channels, slots):
    """Bytes of ``slots`` histograms of ``n_bins_total`` bins x ``channels`` int64 cells."""
    return int(n_bins_total) * int(channels) * 8 * int(slots)


def check_histogram_memory(n_bins_total, channels, slots, n_features, max_bin, limit=None):
    """A ValueError naming ``max_bin`` when ``slots`` histograms (the most a fit can hold
    at once) need more bytes than ``limit`` (default: this machine's memory)."""
    limit = memory_bytes() if limit is None else limit
    need = histogram_bytes(n_bins_total, channels, slots)
    if limit is None or need <= limit:
        return
    per = histogram_bytes(n_bins_total, channels, 1)
    raise ValueError(
        f"max_bin={int(max_bin)}: the {int(n_features)} features have {int(n_bins_total)} "
        f"bins in all, {per / 2**20:.1f} MiB a histogram; this fit may hold {int(slots)} "
        f"histograms at once ({need / 2**30:.1f} GiB), more than this machine's "
        f"{limit / 2**30:.1f} GiB of memory. Lower max_bin, max_leaves or max_depth")


def max_leaves_of_rows(n_rows, min_child_samples):
    """The most leaves a tree over ``n_rows`` rows can have when each holds at least
    ``min_child_samples`` rows."""
    return max(1, int(n_rows) // max(1, int(min_child_samples)))


__all__ = ["MAX_ROWS", "MAX_QUANTIZED_ROWS", "MAX_SPARSE_BINS", "check_rows",
           "check_quantized_rows", "check_sparse_bins", "check_histogram_memory",
           "histogram_bytes", "max_leaves_of_rows", "memory_bytes"]
