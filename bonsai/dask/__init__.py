"""``bonsai.dask``: distributed training and prediction on Dask's ``distributed``.

One long-lived task per worker holds that worker's shard for the whole fit and runs
the ordinary boosting loop with a ``DaskComm`` (``collective``): the histograms are
all-reduced worker to worker over Dask's own comms, every rank then takes the same
decisions from the same integers, and the model is bit-identical to a one-process
fit on the same rows with the same bin edges.  ``import bonsai`` never imports this
package (``pip install bonsai-gbt[dask]``).

* ``DaskDataset`` (``data``): binning where the partitions live;
* ``train`` (``train``): the driver;
* ``predict`` (``predict``): prediction partition by partition;
* ``DaskBonsaiRegressor``, ``DaskBonsaiClassifier`` (``sklearn``): the estimators;
* ``collective``: the worker-to-worker all-reduce;
* ``WorkerLostError``: what a fit raises when a worker holding a shard leaves.
"""
from ._errors import WorkerLostError
from .data import DaskDataset
from .predict import predict
from .sklearn import DaskBonsaiClassifier, DaskBonsaiRegressor
from .train import train

__all__ = ["DaskBonsaiClassifier", "DaskBonsaiRegressor", "DaskDataset", "WorkerLostError",
           "predict", "train"]
