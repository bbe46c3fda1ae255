"""Importers: XGBoost JSON models and LightGBM text models as bonsai Boosters
(``bonsai.Booster.from_xgboost`` / ``from_lightgbm``).

This module (with ``import_xgboost``, ``import_lightgbm`` and ``_import_common``)
owns the translation of another library's trained model into bonsai's
model (``bonsai.tree.Tree`` node arrays, ``tree_class``, ``base_score`` margins, the
objective's link), so that ``Booster.predict`` gives the source library's
predictions.  Nothing is trained or re-fitted; neither library is imported (a
library object passed in is only asked for its serialised model).

XGBoost (``read_xgboost``): gbtree and dart boosters.  XGBoost sends a row left when
``x < split_condition`` in float32; bonsai goes left when ``x <= threshold``, so the
threshold is the largest float32 strictly below ``split_condition``: float32 inputs
decide identically.  XGBoost rounds float64 inputs to float32 before comparing, bonsai
compares them as they are, so a float64 value within one float32 step of a split can
decide differently; pass float32 data for identical decisions (XGBoost also sums the
leaves in float32: outputs agree to float32 rounding).  ``base_score`` (stored in
the output space) becomes a margin (logit / log).  ``multi:softmax`` predicts class
labels in XGBoost; the imported model is a bonsai ``"multiclass"`` model, whose
``predict`` returns class probabilities (take ``argmax`` for labels).
``binary:logitraw`` predicts margins in XGBoost; it is imported with an identity link.
A multiclass model trained with ``multi_strategy="multi_output_tree"`` (one tree per
round, a vector of ``num_class`` weights per node) becomes a bonsai vector-leaf model
(``Booster.multi_strategy``); XGBoost's other multi-target models (``num_target > 1``)
are refused.
Categorical splits become bonsai categorical nodes over XGBoost's category codes
(the category names stored by XGBoost >= 3.1 when it was trained on a DataFrame,
else the codes 0..n-1 themselves).  XGBoost sends the listed categories right, the
others left and missing values the default way; where the default is left the node
is exact; where it is right, bonsai lists the complement of the node's categories
within the codes 0..n-1, so a code the model never saw (>= n, negative) goes to the
missing branch instead of the left one.  Non-integer codes are missing in bonsai
(XGBoost truncates them).  Tree statistics: cover = ``sum_hessian``, gain =
``loss_changes``, count 0 (unknown).

LightGBM (``read_lightgbm``): the text model format.  Thresholds are compared as
float64, as LightGBM does.  Missing type None (NaN is 0.0) and Zero (values within
``1e-35`` of 0 and NaN go the default way) are rewritten to bonsai's rule where an
exact equivalent exists; a zero-as-missing split whose default branch is not an
interval around 0 (default left with threshold < -1e-35, or right with threshold >
1e-35) has none and raises ValueError.  Categorical splits
become bonsai categorical nodes: codes are LightGBM's integer category values (a
CategoryMap with categories 0..max), or, when the stored ``pandas_categorical`` lists
match the categorical features one to one, those DataFrame categories.  Non-integer
values are missing in bonsai (LightGBM truncates them).  ``binary`` with
``sigmoid:s`` != 1 has its leaf values scaled by ``s`` (predictions match; margins
are ``s`` times LightGBM's raw scores); a random forest (``average_output``) has its
leaf values divided by the number of rounds (margins are the trees' mean, LightGBM's
raw scores their sum).  Identity-link objectives bonsai does not train (fair, mape,
lambdarank, rank_xendcg) import as ``"squared_error"``; ``extra["source_objective"]``
keeps the source library's objective.
"""
from .import_lightgbm import read_lightgbm
from .import_xgboost import read_xgboost

__all__ = ["read_lightgbm", "read_xgboost"]
