"""``BonsaiRanker``: learning to rank with the scikit-learn API, in the shape of
LightGBM's ``LGBMRanker``.

``fit(X, y, group=..., eval_set=[(Xv, yv)], eval_group=[gv], eval_at=(1, 3, 5))``:
``group`` (and each ``eval_group`` entry) lists the query sizes in row order, each
query's rows contiguous (``bonsai._groups``); ``eval_at`` names the NDCG cut-offs
evaluated on the eval sets when ``eval_metric`` is None (``ndcg@k`` for each k).
The objective defaults to ``"lambdarank"`` (``"rank_xendcg"`` and
``"rank_pairwise"`` too); ``predict`` returns scores, which need no groups.  Everything
else (parameters, verbose, early stopping, importances, save / load) is the estimators'
(``bonsai.sklearn.estimators``).
"""
import numpy as np

from .._params import RANK_OBJECTIVES
from ._base import _D, _BonsaiModel, _booster_predict, _keep_params, _predict_kind

__all__ = ["BonsaiRanker"]


class BonsaiRanker(_BonsaiModel):
    """Gradient-boosted trees for learning to rank (scikit-learn API).

    The parameters are those of :data:`bonsai._params.PARAM_TABLE`, ``objective``
    one of ``"lambdarank"`` (default), ``"rank_xendcg"``, ``"rank_pairwise"``; the
    fitted attributes are those of :class:`bonsai.BonsaiRegressor`.
    """

    def __init__(self, *, objective="lambdarank", n_estimators=_D["n_estimators"],
                 learning_rate=_D["learning_rate"], grow_policy=_D["grow_policy"],
                 max_depth=_D["max_depth"], max_leaves=_D["max_leaves"], max_bin=_D["max_bin"],
                 min_child_weight=_D["min_child_weight"],
                 min_child_samples=_D["min_child_samples"], min_split_gain=_D["min_split_gain"],
                 reg_lambda=_D["reg_lambda"], reg_alpha=_D["reg_alpha"],
                 max_delta_step=_D["max_delta_step"], subsample=_D["subsample"],
                 colsample_bytree=_D["colsample_bytree"],
                 colsample_bylevel=_D["colsample_bylevel"],
                 colsample_bynode=_D["colsample_bynode"], random_state=_D["random_state"],
                 n_threads=_D["n_threads"], early_stopping_rounds=_D["early_stopping_rounds"],
                 eval_metric=_D["eval_metric"],
                 lambdarank_truncation_level=_D["lambdarank_truncation_level"],
                 label_gain=_D["label_gain"], lambdarank_norm=_D["lambdarank_norm"],
                 sigmoid=_D["sigmoid"],
                 categorical_features=_D["categorical_features"],
                 max_cat_to_onehot=_D["max_cat_to_onehot"],
                 max_cat_threshold=_D["max_cat_threshold"], cat_smooth=_D["cat_smooth"],
                 cat_l2=_D["cat_l2"], min_data_per_group=_D["min_data_per_group"],
                 quantized_grad=_D["quantized_grad"], grad_quant_bins=_D["grad_quant_bins"],
                 device=_D["device"], verbosity=_D["verbosity"], importance_type="gain",
                 verbose=None):
        _keep_params(self, locals())

    def _prepare_y(self, y):
        if not (isinstance(self.objective, str) and self.objective in RANK_OBJECTIVES):
            raise ValueError(f"BonsaiRanker needs a ranking objective {RANK_OBJECTIVES}; got "
                             f"objective={self.objective!r} (use BonsaiRegressor or "
                             "BonsaiClassifier)")
        return self._as_float_y(y, "y"), self._eval_at_metric

    def _encode_eval_y(self, y, name):
        return self._as_float_y(y, name)

    @staticmethod
    def _as_float_y(y, name):
        try:
            return np.asarray(y, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be numeric relevance labels, got dtype "
                             f"{y.dtype}") from None

    def _restore_extra(self, booster):
        if booster.objective not in RANK_OBJECTIVES:
            raise ValueError(f"the model has objective={booster.objective!r}, not a ranking "
                             "objective; load it with BonsaiRegressor / BonsaiClassifier")

    def fit(self, X, y, group=None, sample_weight=None, init_score=None, eval_set=None,
            eval_group=None, eval_sample_weight=None, eval_names=None, eval_at=None,
            callbacks=None, init_model=None):
        """Fit on (X, y) with query sizes ``group``.

        Parameters
        ----------
        X, y, sample_weight, init_score, eval_set, eval_sample_weight, eval_names,
        callbacks, init_model : as in ``BonsaiRegressor.fit``
        group : array-like of int (n_queries,) -- query sizes in row order (required)
        eval_group : list of array-like -- one ``group`` per eval set (required with
            ``eval_set``)
        eval_at : int or list of int, optional -- NDCG cut-offs reported on the eval
            sets when ``eval_metric`` is None (``ndcg@k``; default the objective's
            ``ndcg@5``)

        Returns
        -------
        self
        """
        if group is None:
            raise ValueError("BonsaiRanker.fit needs group= (the query sizes, in row order)")
        if eval_set is not None and eval_group is None:
            raise ValueError("BonsaiRanker.fit: eval_set needs eval_group= (one list of "
                             "query sizes per eval set)")
        self._eval_at_metric = {}
        if eval_at is not None and self.eval_metric is None:
            ks = [eval_at] if np.isscalar(eval_at) else list(eval_at)
            for k in ks:
                if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
                    raise ValueError(f"eval_at must be integers >= 1, got eval_at={eval_at!r}")
            self._eval_at_metric = {"eval_metric": [f"ndcg@{int(k)}" for k in ks]}
        if eval_group is not None and not isinstance(eval_group, (list, tuple)):
            raise TypeError("eval_group must be a list of query-size arrays, one per eval set")
        return self._fit(X, y, sample_weight, init_score, eval_set, eval_sample_weight,
                         eval_names, callbacks, init_model, group=group,
                         eval_group=eval_group)

    def predict(self, X, output_margin=False, iteration_range=None, *, raw_score=False,
                pred_leaf=False, pred_contribs=False, pred_contrib=False,
                pred_interactions=False):
        """Ranking scores, shape (n_samples,) (higher ranks first; no groups needed),
        or what one flag asks for (as ``BonsaiRegressor.predict``)."""
        kind = _predict_kind(output_margin, raw_score, pred_leaf, pred_contribs,
                             pred_contrib, pred_interactions)
        X = self._check_X(X)
        return _booster_predict(self.booster_, X, kind, iteration_range)
