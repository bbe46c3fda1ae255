"""Backend registry: the one list of devices, and the only way code above
``bonsai/backends/`` reaches a backend.

``get_backend(name)`` returns the module of a backend, which implements the protocol
the boosting and grow loops call:

* ``prepare(dataset) -> data``: the backend's layouts of a binned Dataset (for the
  CPU: the blocked mirror or sparse rows beside the column-major bins), cached on it;
* ``tree_builder(data, n_threads, pool_capacity, quantized, settings, cat,
  min_child_samples, comm) -> TreeBuilder``: the per-fit buffers (histogram pool,
  gradient cells ``gh``, sample indices ``idx_buf``) and the split step
  (``start_tree``, ``evaluate_root``, ``split``, ``level_split``,
  ``level_split_categorical``, ``range_sums``, ``bits_sums``), with the
  communicator's all-reduce between its histogram build and its scan;
* per tree: ``quantize``, ``sample_rows``, ``fill_range``, ``leaf_sums``,
  ``leaf_weights``, ``add_leaf_values``, ``predict_binned_add``;
* prediction: ``predict_raw``, ``predict_oblivious``, ``predict_leaf``.

Settings travel as the NamedTuples of ``bonsai.split_settings``; collectives as a
``bonsai.comm.Comm``.  ``kernels(part)`` returns one kernel module of a backend for
the stages that always run on the host CPU (binning, SHAP, the binned-heap
prediction layout).  ``available()`` names the devices this build can train on,
``known()`` also those bonsai knows of without a backend here (``bonsai info`` lists
them as predict-only).  Backends are imported lazily, so a missing GPU stack never
breaks ``import bonsai``.
"""
import importlib

#: device name -> the package implementing its backend
_BACKENDS = {"cpu": "bonsai.backends.cpu"}
#: devices bonsai knows of that this build has no backend for
_WITHOUT_BACKEND = ("cuda",)
#: the backend that predicts, bins and explains: models predict on the CPU whatever
#: device trained them
HOST = "cpu"


def available():
    """The devices this build can train on, sorted."""
    return tuple(sorted(_BACKENDS))


def known():
    """Every device bonsai knows of: ``available()``, then those without a backend."""
    return available() + tuple(d for d in _WITHOUT_BACKEND if d not in _BACKENDS)


def get_backend(name="cpu"):
    """The backend module of device ``name``; ValueError naming the choices if this
    build has none."""
    try:
        module = _BACKENDS[name]
    except KeyError:
        raise ValueError(f"device={name!r} is not available; choose one of "
                         f"{list(available())}") from None
    return importlib.import_module(module)


def kernels(part, name=HOST):
    """The kernel module ``part`` (``"binning"``, ``"shap"``, ``"predict_binned"``) of
    backend ``name``: for the host-side stages, which call those kernels directly."""
    get_backend(name)
    return importlib.import_module(f"{_BACKENDS[name]}.{part}")
