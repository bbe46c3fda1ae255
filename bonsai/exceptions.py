"""Exception types raised by bonsai.

This module owns the library's own exception classes. Validation errors for
user input are plain ``TypeError`` / ``ValueError`` (see :mod:`bonsai._params`);
the classes here cover the two cases those do not:

* :class:`BonsaiError` -- an internal failure (a broken invariant, a corrupt
  model file), i.e. something that is not the caller's fault or cannot be
  expressed as a bad argument.
* :class:`NotFittedError` -- an estimator or booster was used before fitting.
  It derives from both ``ValueError`` and ``AttributeError``, exactly like
  ``sklearn.exceptions.NotFittedError``, so ``except ValueError`` and
  ``hasattr``-style probes used by scikit-learn keep working.
"""

from __future__ import annotations

__all__ = ["BonsaiError", "NotFittedError"]


class BonsaiError(Exception):
    """Internal failure inside bonsai (a broken invariant, a corrupt model)."""


class NotFittedError(ValueError, AttributeError):
    """Raised when a model is used before it has been fitted.

    Inherits from ``ValueError`` and ``AttributeError`` for compatibility with
    scikit-learn's ``NotFittedError`` and its ``check_is_fitted`` conventions.
    """
