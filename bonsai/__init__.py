"""bonsai: histogram gradient-boosted decision trees, bit-identical at any thread count.

Public API: ``Dataset``, ``train``, ``cv``, ``Booster``, ``BonsaiRegressor``,
``BonsaiClassifier``, ``BonsaiRanker``, the callbacks (``ProgressBar`` among them), and ``warmup``.
``python -m bonsai`` (or the ``bonsai`` command) is the command line (``bonsai.cli``).
"""
from ._version import __version__
from ._threads import configure_threading_layer as _configure_threading_layer

_configure_threading_layer()

from .booster import Booster  # noqa: E402
from .boosting import train  # noqa: E402
from .crossval import cv  # noqa: E402
from .callbacks import EarlyStopping, EvaluationMonitor, TrainingCallback  # noqa: E402
from .dataset import Dataset  # noqa: E402
from .progress import ProgressBar  # noqa: E402
from ._warmup import warmup  # noqa: E402


def cuda_available():
    """Whether ``device="cuda"`` can train in this process (numba-cuda and a GPU, or
    its simulator); ``bonsai info`` gives the reason when not."""
    from .backends import usable
    return usable("cuda")[0]


def __getattr__(name):
    # the estimators import scikit-learn (about 0.8 s and 100+ MiB), so they load on
    # first use rather than with ``import bonsai``
    if name in ("BonsaiClassifier", "BonsaiRanker", "BonsaiRegressor"):
        from . import sklearn as _sk
        return getattr(_sk, name)
    raise AttributeError(f"module 'bonsai' has no attribute {name!r}")

__all__ = ["BonsaiClassifier", "BonsaiRanker", "BonsaiRegressor", "Booster", "Dataset", "EarlyStopping",
           "EvaluationMonitor", "ProgressBar", "TrainingCallback", "cuda_available", "cv", "train", "warmup",
           "__version__"]
