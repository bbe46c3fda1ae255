"""Learning-to-rank objectives: ``lambdarank``, ``rank_xendcg`` and ``rank_pairwise``.

A ranking objective needs the training set's query boundaries (``Dataset.group_ptr``,
``bonsai._groups``): ``needs_group`` is True and the boosting loop calls
``bind(group_ptr, y)`` once per fit, which returns the objective ready for
``grad_hess`` (per-query constants such as each query's ideal DCG are computed there,
once).  Margins are scores: ``init_score`` is 0 and ``transform`` the identity, so a
model predicts without any query information.

* ``lambdarank`` (LightGBM's semantics and defaults): per query, the documents sorted
  by score (stable, ties in row order); every pair of differently labelled documents
  with at least one in the top ``lambdarank_truncation_level`` gets the RankNet
  gradient ``sigmoid / (1 + exp(sigmoid * (s_hi - s_lo)))`` weighted by the change of
  NDCG when the two swap (gains ``label_gain``, discount ``1 / log2(2 + rank)``, ideal
  DCG at the truncation level), divided by ``0.01 + |s_hi - s_lo|`` when
  ``lambdarank_norm``; with ``lambdarank_norm`` a query's gradients are finally scaled
  by ``log2(1 + S) / S`` (S the sum of its pair weights).  Queries of one document or
  with no relevant document get zero gradients.
* ``rank_pairwise``: the same pairwise logistic loss over every pair of differently
  labelled documents of a query, unweighted (RankNet; XGBoost's ``rank:pairwise``
  without pair sampling).  Labels may be any finite numbers.
* ``rank_xendcg``: XE-NDCG-MART (Bruch, 2021, as LightGBM's ``rank_xendcg``): the
  cross entropy between the softmax of a query's scores and ``2**label - gamma``
  normalised, ``gamma`` uniform draws in [0, 1) from a counter-based hash of
  (``random_state``, round, row); gradients by the paper's third-order approximation.

Labels of ``lambdarank`` / ``rank_xendcg`` must be integers >= 0 (and below
``len(label_gain)`` for lambdarank), as LightGBM requires.  Sample weights multiply
each document's gradient and hessian.  Ranking over several data shards is refused
(``bonsai.boosting``): a query's gradient needs all its documents.
"""
import numpy as np

from . import _rank_kernels as rk

__all__ = ["RANK_OBJECTIVES", "default_label_gain", "discounts", "get_rank_objective"]

RANK_OBJECTIVES = ("lambdarank", "rank_xendcg", "rank_pairwise")


def default_label_gain():
    """LightGBM's default gains: ``2**i - 1`` for labels 0..30."""
    return np.array([2.0 ** i - 1.0 for i in range(31)], dtype=np.float64)


def discounts(n):
    """float64 (n,): the DCG discount ``1 / log2(2 + r)`` of ranks 0..n-1."""
    return 1.0 / np.log2(2.0 + np.arange(max(int(n), 1), dtype=np.float64))


def _first_bad(name, y, bad, requirement):
    if np.any(bad):
        i = int(np.argmax(bad))
        raise ValueError(f"objective={name!r} requires {requirement}; got "
                         f"label={float(y[i])!r} at index {i}")


def check_relevance(name, y, n_gain):
    """Finite labels; with ``n_gain``, integers >= 0 and < ``n_gain`` (a ValueError
    names the first bad one)."""
    y = np.asarray(y, dtype=np.float64)
    _first_bad(name, y, ~np.isfinite(y), "finite labels")
    if n_gain is not None:
        _first_bad(name, y, (y < 0) | (y != np.floor(y)), "integer labels >= 0")
        _first_bad(name, y, y >= n_gain,
                   f"label < len(label_gain) = {n_gain} (pass a longer label_gain)")


class _Ranking:
    """Shared pieces: scores as margins, query binding (the ``bonsai.objectives``
    interface: one output, no leaf renewal)."""

    needs_group = True
    is_classification = False
    renew_leaf = None
    renew_leaves = None
    default_metric = "ndcg@5"

    def __repr__(self):
        return f"<bonsai Objective {self.name!r}>"

    def n_outputs(self, n_classes=None):
        return 1

    def check_labels(self, y):
        check_relevance(self.name, y, None)

    def __init__(self):
        self.group_ptr = None
        self._labels = None

    def init_score(self, y, w):
        return np.zeros(1, dtype=np.float64)

    def bind(self, group_ptr, y):
        """A copy of this objective over the queries ``group_ptr`` and labels ``y``."""
        out = object.__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.group_ptr = np.ascontiguousarray(group_ptr, dtype=np.int64)
        out._y = y
        out._labels = self._label_array(y)
        out._prepare()
        return out

    def _label_array(self, y):
        return np.asarray(y, dtype=np.float64).astype(np.int64)

    def _prepare(self):
        pass

    def _check_bound(self, y):
        if self.group_ptr is None:
            raise ValueError(f"objective={self.name!r} needs query groups: build the "
                             "Dataset with group= (query sizes) or qid= (query ids)")
        if y is not self._y:
            self._y, self._labels = y, self._label_array(y)
            self._prepare()

    def transform(self, raw):
        return np.array(raw[0], dtype=np.float64)


class _LambdaRank(_Ranking):
    name = "lambdarank"

    def __init__(self, trunc, gain, sigma, norm):
        super().__init__()
        self.trunc, self.gain, self.sigma, self.norm = trunc, gain, sigma, norm

    def check_labels(self, y):
        check_relevance(self.name, y, self.gain.shape[0])

    def _prepare(self):
        sizes = np.diff(self.group_ptr)
        self._disc = discounts(int(sizes.max()) if sizes.shape[0] else 1)
        self._inv = rk.inverse_max_dcgs(self.group_ptr, self._labels, self.trunc,
                                        self.gain, self._disc)

    def grad_hess(self, y, raw, w, out_g, out_h):
        self._check_bound(y)
        rk.lambdarank_grad(self.group_ptr, self._labels, raw[0], w if w is not None
                           else raw[0], w is not None, self.gain, self._disc, self._inv,
                           self.trunc, self.sigma, self.norm, out_g[0], out_h[0])


class _RankPairwise(_Ranking):
    name = "rank_pairwise"

    def __init__(self, sigma):
        super().__init__()
        self.sigma = sigma

    def _label_array(self, y):
        return np.asarray(y, dtype=np.float64)

    def grad_hess(self, y, raw, w, out_g, out_h):
        self._check_bound(y)
        rk.pairwise_grad(self.group_ptr, self._labels, raw[0], w if w is not None
                         else raw[0], w is not None, self.sigma, out_g[0], out_h[0])


class _RankXendcg(_Ranking):
    name = "rank_xendcg"

    def __init__(self, seed):
        super().__init__()
        self.seed = int(seed)
        self.calls = 0

    def check_labels(self, y):
        check_relevance(self.name, y, 31)

    def grad_hess(self, y, raw, w, out_g, out_h):
        self._check_bound(y)
        # one independent set of draws per boosting round (the calls are the rounds)
        seed = int(np.random.default_rng([self.seed, self.calls, 0x7E]).integers(0, 2 ** 63))
        self.calls += 1
        rk.xendcg_grad(self.group_ptr, self._labels, raw[0], w if w is not None
                       else raw[0], w is not None, seed, 0, out_g[0], out_h[0])


def label_gain_array(params):
    gain = params.get("label_gain")
    return default_label_gain() if gain is None else np.asarray(gain, dtype=np.float64)


def get_rank_objective(name, params):
    """The ranking objective ``name`` with the parameters in ``params`` (already
    validated by ``bonsai._params``; defaults where absent)."""
    if name == "lambdarank":
        return _LambdaRank(int(params.get("lambdarank_truncation_level", 30)),
                           label_gain_array(params), float(params.get("sigmoid", 1.0)),
                           bool(params.get("lambdarank_norm", True)))
    if name == "rank_pairwise":
        return _RankPairwise(float(params.get("sigmoid", 1.0)))
    if name == "rank_xendcg":
        return _RankXendcg(int(params.get("random_state", 0) or 0))
    raise ValueError(f"unknown ranking objective {name!r}")
