"""Backend registry.  ``get_backend(name)`` returns a module implementing the grow
loop's protocol (``build_histograms``, ``subtract_histograms``, ``find_best_splits``,
``find_level_split``, ``partition``, ``add_leaf_values``, ``predict_*``).  Optional
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
