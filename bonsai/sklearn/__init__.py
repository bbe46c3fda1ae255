"""The scikit-learn face of bonsai (imports scikit-learn): the estimators
``BonsaiRegressor`` / ``BonsaiClassifier`` (``estimators``; ``BonsaiRanker`` in
``ranker``, their conventions; the
shared fit / predict machinery in ``_base``) and the transformer
``OrderedTargetEncoder`` (``preprocessing``, also ``bonsai.preprocessing``).
"""
from .estimators import BonsaiClassifier, BonsaiRegressor
from .preprocessing import OrderedTargetEncoder
from .ranker import BonsaiRanker

__all__ = ["BonsaiClassifier", "BonsaiRanker", "BonsaiRegressor", "OrderedTargetEncoder"]
