"""The version string, in one place: ``bonsai.__version__``, the model files'
``bonsai_version``, the CLI's ``--version`` and the package metadata
(``pyproject.toml`` reads it from here) all come from this module."""
__version__ = "0.1.0"
