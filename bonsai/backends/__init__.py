"""Backend registry.  ``get_backend(name)`` returns the module of a backend, which
implements the protocol the boosting and grow loops call:

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
``bonsai.comm.Comm``.  Optional backends are imported lazily, so a missing GPU stack
never breaks ``import bonsai``.
"""
import importlib

_BACKENDS = {"cpu": "bonsai.backends.cpu"}


def get_backend(name="cpu"):
    try:
        module = _BACKENDS[name]
    except KeyError:
        raise ValueError(f"device={name!r} is not available; choose one of {sorted(_BACKENDS)}") from None
    return importlib.import_module(module)
