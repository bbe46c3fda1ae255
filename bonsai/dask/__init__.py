"""``bonsai.dask``: distributed training and prediction on Dask's ``distributed``.

One long-lived task per worker holds that worker's shard for the whole fit and runs
the ordinary boosting loop with a ``DaskComm`` (``collective``): the histograms are
all-reduced worker to worker over Dask's own comms, every rank then takes the same
decisions from the same integers, and the model is bit-identical to a one-process
fit on the same rows with the same bin edges.  ``import bonsai`` never imports this
package (``pip install bonsai-gbt[dask]``).
"""
from ._errors import WorkerLostError

__all__ = ["WorkerLostError"]
