"""The scikit-learn face of bonsai (imports scikit-learn): the estimators
``BonsaiRegressor`` / ``BonsaiClassifier`` (``estimators``, their conventions; the
shared fit / predict machinery in ``_base``) and the transformer
``OrderedTargetEncoder`` (``preprocessing``, also ``bonsai.preprocessing``).
"""
from .estimators import BonsaiClassifier, BonsaiRegressor
from .preprocessing import OrderedTargetEncoder

__all__ = ["BonsaiClassifier", "BonsaiRegressor", "OrderedTargetEncoder"]
