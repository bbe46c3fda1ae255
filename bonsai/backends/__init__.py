"""Backend registry.  ``get_backend(name)`` returns a module implementing the grow
loop's protocol (``HistogramPool``, ``quantize``, ``build_histograms`` and
``find_best_splits`` for the root, ``split_nodes`` for every batch after it (partition,
children's histograms, their splits, children written to the ``bonsai.nodes`` table),
``find_level_split``, ``range_sums``, ``bits_sums``, ``add_leaf_values``,
``leaf_sums``, ``predict_*``).  Optional
backends are imported lazily, so a missing GPU stack never breaks ``import bonsai``.
"""
import importlib

_BACKENDS = {"cpu": "bonsai.backends.cpu"}


def get_backend(name="cpu"):
    try:
        module = _BACKENDS[name]
    except KeyError:
        raise ValueError(f"device={name!r} is not available; choose one of {sorted(_BACKENDS)}") from None
    return importlib.import_module(module)
