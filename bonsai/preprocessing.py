"""``bonsai.preprocessing``: the public path of ``OrderedTargetEncoder``, whose code
lives with the other scikit-learn pieces (``bonsai/sklearn/preprocessing.py``).
"""
from .sklearn.preprocessing import OrderedTargetEncoder

__all__ = ["OrderedTargetEncoder"]
