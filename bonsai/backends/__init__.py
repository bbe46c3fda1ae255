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
``known()`` every registered one: a backend is always registered, and whether it can
train is asked at runtime (``usable``: the CUDA backend needs numba-cuda and a GPU,
or the simulator), so ``bonsai info`` lists the others as predict-only and
``device="cuda"`` without a GPU fails with the reason and the fix.  Backends are
imported lazily, so a missing GPU stack never breaks ``import bonsai``.
"""
import importlib

#: device name -> the package implementing its backend
_BACKENDS = {"cpu": "bonsai.backends.cpu", "cuda": "bonsai.backends.cuda"}
#: what to do when a device cannot train here
_FIX = {"cuda": ("it needs an NVIDIA GPU with its driver and numba-cuda: "
                 "pip install 'bonsai-gbt[cuda]' on a machine with a GPU (models trained "
                 "on any device predict on the CPU)")}
#: the backend that predicts, bins and explains: models predict on the CPU whatever
#: device trained them
HOST = "cpu"


def known():
    """Every registered device, sorted."""
    return tuple(sorted(_BACKENDS))


def usable(name):
    """(can train here, why not): the backend's own ``status()``, or the reason its
    import failed; never raises."""
    if name == HOST:
        return True, ""
    try:
        module = importlib.import_module(_BACKENDS[name])
    except Exception as e:                 # noqa: BLE001 - any import failure is a reason
        return False, f"bonsai.backends.{name} does not import ({type(e).__name__}: {e})"
    return module.status()


def available():
    """The devices that can train here, sorted."""
    return tuple(d for d in known() if usable(d)[0])


def unusable_message(name, why, doing="train"):
    """The error of ``device=name`` where it cannot ``doing`` (train, predict): the
    reason and the fix."""
    return f"device={name!r} cannot {doing} here ({why}); {_FIX.get(name, '')}".rstrip("; ")


def get_backend(name="cpu"):
    """The backend module of device ``name``; ValueError naming the choices if no
    such device is registered, or the reason and the fix if it cannot train here."""
    if name not in _BACKENDS:
        raise ValueError(f"device={name!r} is not a device; choose one of {list(known())}")
    ok, why = usable(name)
    if not ok:
        raise ValueError(unusable_message(name, why))
    return importlib.import_module(_BACKENDS[name])


def kernels(part, name=HOST):
    """The kernel module ``part`` (``"binning"``, ``"shap"``, ``"predict_binned"``) of
    backend ``name``: for the host-side stages, which call those kernels directly."""
    if name not in _BACKENDS:
        get_backend(name)
    return importlib.import_module(f"{_BACKENDS[name]}.{part}")
