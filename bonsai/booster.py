"""``Booster``: a trained model.  Prediction (raw margins, transformed outputs, leaf
indices, iteration ranges; on the host CPU or, with ``device``, on a GPU), feature
importance, and model files (JSON file/string, pickle).  A Booster needs no training
data to load or predict.

Where a prediction runs (``Booster.predict(device=...)``): ``"cpu"`` on the host
kernels, ``"cuda"`` on the CUDA backend's (``bonsai.backends.cuda.predict``; an error
naming the reason and the fix where it cannot run), None (auto) on the GPU only for a
model trained with ``device="cuda"``, a batch of ``GPU_PREDICT_MIN_ROWS`` rows or more,
and a usable CUDA backend, else on the CPU.  Both give the same bits.  SHAP runs on the
CPU.  The ensemble's device copy is cached beside the host one (``_ensemble``) and
dropped with it.

Vector-leaf models (``multi_strategy="multi_output_tree"``): each round is ONE tree
whose ``value`` is ``(n_nodes, K)`` (``bonsai.tree``), so ``trees_per_round`` is 1
instead of ``n_outputs``.  Every predictor reads the ensemble's scalar views of those
trees (``bonsai.tree.expand``), so a vector model predicts exactly the bits of the
equivalent one-output-per-tree model (round r holding ``tree_r.output(0..K-1)``);
``pred_leaf`` still has one column per model tree.

Thread safety: one Booster may predict (every kind: margins, transformed outputs,
leaf indices, SHAP values, dense or sparse input) from many Python threads at once.
Its lazily built caches (the concatenated ensemble ``_cache``, its device copy
``_device``, the sparse-input layout ``_sparse_cache``, the objective ``_obj``) are
each built once under the Booster's lock and published as one finished object, so a
thread never sees one half-built; a thread reads a cache through one attribute load.
Changing a model (training into it, ``load_model``) while another thread predicts
from it is not supported.
"""
import contextlib
import threading

import numpy as np

from ._params import MULTI_STRATEGIES
from ._threads import resolve_n_threads, thread_context
from ._version import __version__
from .backends import HOST, get_backend, kernels, known, unusable_message, usable
from .categorical import CategoryMap
from . import sparse as _sparse
from .data import is_plain_matrix, to_matrix
from .io import model_file
from .ordered import CtrModel
from .objectives import get_objective
from .tree import concat, concat_oblivious

_HOST = get_backend(HOST)  # models predict on the host CPU kernels, whatever trained them
_SERIAL = contextlib.nullcontext()   # small batches: no thread setup
#: ``predict(device=None)`` of a model trained with device="cuda" runs on the GPU from
#: this many rows (where the CUDA backend is usable).  A guess: not measured on a GPU
#: yet (upload and launch cost against the CPU kernels' speed decide the real one).
GPU_PREDICT_MIN_ROWS = 100_000


def _cuda_predict():
    """The CUDA prediction module (imported on first use: numba-cuda only then)."""
    return kernels("predict", "cuda")


class Booster:
    """A gradient-boosted tree ensemble.

    Create one with :func:`bonsai.train`, or load one: ``Booster(model_file=path)``,
    ``Booster(model_str=text)``.
    """

    def __init__(self, model_file=None, model_str=None):
        self.trees = []
        self.tree_class = []
        self.n_outputs = 1
        self.multi_strategy = "one_output_per_tree"   # or "multi_output_tree"
        self.n_features = 0
        self.feature_names = None
        self.base_score = np.zeros(1)
        self.objective = "squared_error"
        self.objective_params = {}
        self.params = {}
        self.grow_policy = "depthwise"
        self.best_iteration = None
        self.best_score = None
        self.evals_result = {}
        self.extra = {}
        self.categories = None      # bonsai.categorical.CategoryMap, or None
        self.ctr = None             # bonsai.ordered.CtrModel (cat_encoding="ordered"), or None
        self.n_threads = None
        self._cache = None
        self._device = None         # backends.cuda.predict.DeviceEnsemble, or None
        self._obj = None
        # guards the building of the caches above (and _sparse_cache, bonsai.sparse)
        self._lock = threading.RLock()
        if model_file is not None:
            self.load_model(model_file)
        elif model_str is not None:
            self._load_string(model_str)

    # ---- structure -------------------------------------------------------------
    def num_trees(self):
        return len(self.trees)

    @property
    def trees_per_round(self):
        """Trees one boosting round adds: 1 for a vector-leaf model
        (``multi_strategy="multi_output_tree"``), else ``n_outputs``."""
        return 1 if self.multi_strategy == "multi_output_tree" else self.n_outputs

    def num_boosted_rounds(self):
        return len(self.trees) // self.trees_per_round

    def _objective(self):
        obj = self._obj
        if obj is None:
            with self._lock:
                obj = self._obj
                if obj is None:
                    if self.objective == "custom":
                        obj = get_objective(lambda y, p: (y, p), {"num_class": self.n_outputs})
                    else:
                        obj = get_objective(self.objective, self.objective_params)
                    self._obj = obj
        return obj

    def metric_higher_is_better(self, name):
        from .metrics import get_metric
        return get_metric(name, self.objective_params).higher_is_better

    def _append(self, tree, k):
        with self._lock:
            self.trees.append(tree)
            self.tree_class.append(int(k))
            self._cache = self._device = None

    # ---- prediction --------------------------------------------------------------
    def _tree_range(self, iteration_range):
        n_rounds = self.num_boosted_rounds()
        if iteration_range is None or tuple(iteration_range) == (0, 0):
            if self.best_iteration is not None:
                return 0, (self.best_iteration + 1) * self.trees_per_round
            return 0, len(self.trees)
        start, end = (int(v) for v in iteration_range)
        if end == 0:
            end = n_rounds
        if not 0 <= start <= end <= n_rounds:
            raise ValueError(f"iteration_range={iteration_range!r} is outside [0, {n_rounds}]")
        per = self.trees_per_round
        return start * per, end * per

    def _ensemble(self, t0, t1):
        """(Ensemble, ObliviousEnsemble or None) of trees ``t0:t1``: the one cached
        entry (rebuilt when another range is asked for), read through one attribute
        load and built under the lock, so concurrent predicts never see it half-built."""
        key = (t0, t1)
        cache = self._cache
        if cache is None or cache[0] != key:
            with self._lock:
                cache = self._cache
                if cache is None or cache[0] != key:
                    trees = self.trees[t0:t1]
                    cls = self.tree_class[t0:t1]
                    obl = (concat_oblivious(trees, cls)
                           if trees and all(t.oblivious for t in trees) else None)
                    cache = (key, concat(trees, cls), obl)
                    self._cache = cache
        return cache[1], cache[2]

    def _device_ensemble(self, t0, t1):
        """Trees ``t0:t1`` on the GPU: the cached device copy of ``_ensemble``'s host
        arrays, uploaded again only when those were rebuilt (under the lock)."""
        ens, _ = self._ensemble(t0, t1)
        dev = self._device
        if dev is None or dev.source is not ens:
            with self._lock:
                dev = self._device
                if dev is None or dev.source is not ens:
                    self._device = None   # free the old copy before the new one is uploaded
                    dev = _cuda_predict().DeviceEnsemble(ens, self.n_outputs)
                    self._device = dev
        return dev

    def _check_device(self, device, shap):
        """``predict``'s ``device`` argument (not None): "cpu" or "cuda", or the error."""
        if not isinstance(device, str):
            raise TypeError(f"device must be None or one of {list(known())}, got {device!r}")
        if device not in known():
            raise ValueError(f"device={device!r} is not a device; choose None (auto) or "
                             f"one of {list(known())}")
        if device == HOST:
            return device
        if shap:
            raise ValueError(f"device={device!r}: pred_contribs and pred_interactions (SHAP) "
                             "run on the CPU only; pass device=None or device='cpu'")
        ok, why = usable(device)
        if not ok:
            raise ValueError(unusable_message(device, why, doing="predict")
                             + "; or predict on the CPU: device=None or device='cpu'")
        return device

    def _auto_gpu(self):
        """Whether ``device=None`` predicts a large batch (``GPU_PREDICT_MIN_ROWS`` rows
        or more) on the GPU: for a model trained there, where the backend is usable."""
        return self.params.get("device") == "cuda" and usable("cuda")[0]

    def _check_X(self, X):
        if self.categories is None and _sparse.is_sparse(X):
            # a canonical CSR, never made dense (bonsai.sparse)
            return _sparse.check_csr(X, n_features=self.n_features)
        if self.categories is None and is_plain_matrix(X):
            # the fast path of a plain float matrix (one-row latency): the same checks
            if X.shape[1] != self.n_features:
                raise ValueError(f"X has {X.shape[1]} features, but the model was trained "
                                 f"with {self.n_features} features")
            return X if X.flags.c_contiguous else np.ascontiguousarray(X)
        if self.categories is not None:
            X, names, pd_cats = to_matrix(X, with_categories=True)
        else:
            X, names = to_matrix(X)
        if X.shape[1] != self.n_features:
            raise ValueError(f"X has {X.shape[1]} features, but the model was trained with "
                             f"{self.n_features} features")
        if names is not None and self.feature_names is not None and names != list(self.feature_names):
            diff = [(a, b) for a, b in zip(names, self.feature_names) if a != b][:3]
            raise ValueError(f"X's feature names differ from the model's (first differences, "
                             f"X vs model: {diff}); reorder the columns to match")
        if self.categories is not None:   # the model's category codes (a C-order copy)
            extra = sorted(set(pd_cats) - set(self.categories.features))
            if extra:
                raise TypeError(f"X: column {names[extra[0]]!r} is categorical, but the "
                                "model's feature is numeric")
            X = self.categories.apply(X, pd_cats, copy=not pd_cats)
            return X if self.ctr is None else self.ctr.transform(X)
        if not X.flags.c_contiguous:
            X = np.ascontiguousarray(X)
        return X

    def predict(self, X, output_margin=False, iteration_range=None, pred_leaf=False,
                pred_contribs=False, pred_interactions=False, device=None):
        """Predict.

        Parameters
        ----------
        X : array-like (n, F)
        output_margin : bool -- raw margins instead of transformed outputs
        iteration_range : (start, end) rounds, optional -- default: up to the best
            iteration when early stopping ran, else every round
        pred_leaf : bool -- return leaf node indices, shape (n, n_trees) int32 (one
            column per tree: per round 1 for a vector-leaf model, else K)
        pred_contribs : bool -- SHAP values (exact TreeSHAP), shape (n, F + 1), the
            last column the bias; (n, K, F + 1) for multiclass.  Rows sum to the margin.
        pred_interactions : bool -- SHAP interaction values, (n, F + 1, F + 1) or
            (n, K, F + 1, F + 1) (see ``bonsai.explain``)
        device : None, "cpu" or "cuda" -- where margins and leaf indices are computed
            (the same bits on either).  None: on the GPU for a model trained with
            device="cuda" and a batch of ``GPU_PREDICT_MIN_ROWS`` rows or more where
            the CUDA backend is usable, else on the CPU.  "cuda" where it is not
            usable, or with SHAP (CPU only), is a ValueError.

        Returns
        -------
        (n,) for one output, (n, K) for multiclass; probabilities for ``binary``.
        """
        if device is not None:
            device = self._check_device(device, pred_contribs or pred_interactions)
        if pred_contribs or pred_interactions:
            from .explain import shap_values
            return shap_values(self, X, iteration_range, interactions=bool(pred_interactions))
        X = self._check_X(X)
        t0, t1 = self._tree_range(iteration_range)
        sparse = _sparse.is_sparse(X)
        if sparse and device == "cuda":
            raise ValueError("device='cuda' predicts dense input only; X is a scipy.sparse "
                             "matrix (predict it with device=None or device='cpu')")
        gpu = (device == "cuda" if device is not None
               else not sparse and X.shape[0] >= GPU_PREDICT_MIN_ROWS and self._auto_gpu())
        if pred_leaf and sparse:
            return _sparse.predict_leaf(self, X, t0, t1,
                                        np.zeros((X.shape[0], t1 - t0), np.int32), _HOST)
        if pred_leaf:
            out = np.zeros((X.shape[0], t1 - t0), np.int32)
            if gpu:
                _cuda_predict().predict_leaf(X, self._device_ensemble(t0, t1), out)
                return out
            ens, _ = self._ensemble(t0, t1)
            with self._predict_threads(X.shape[0], t1 - t0):
                _HOST.predict_leaf(X, ens, out)
            return out
        raw = np.empty((X.shape[0], self.n_outputs))
        raw[:] = self.base_score
        if gpu:
            _cuda_predict().predict_raw(X, self._device_ensemble(t0, t1), raw)
        else:
            self._add_trees(X, t0, t1, raw)
        if output_margin:
            return raw[:, 0].copy() if self.n_outputs == 1 else raw
        return self._objective().transform(np.ascontiguousarray(raw.T))

    def _predict_threads(self, n_rows, n_trees=None):
        if not _HOST.parallel_predict(n_rows, n_trees):   # serial kernels: no thread setup
            return _SERIAL
        return thread_context(resolve_n_threads(self.n_threads))

    def _add_trees(self, X, t0, t1, raw):
        """Add the outputs of trees ``t0:t1`` to ``raw`` ((n, K) float64, IN/OUT), each
        row's trees in tree order, on a matrix already checked by ``_check_X``."""
        if _sparse.is_sparse(X):
            return _sparse.add_trees(self, X, t0, t1, raw, _HOST)
        ens, obl = self._ensemble(t0, t1)
        with self._predict_threads(X.shape[0], ens.tree_offset.shape[0] - 1):   # views
            if obl is not None:
                _HOST.predict_oblivious(X, obl, raw)
            else:
                _HOST.predict_raw(X, ens, raw)
        return raw

    def _tree_margins(self, X, start):
        """``start`` ((n, K) float64) plus the outputs of *all* trees: the margins a
        continued fit starts from (``start`` is the base score or an init_score)."""
        raw = np.array(start, dtype=np.float64, order="C", copy=True)
        return self._add_trees(self._check_X(X), 0, len(self.trees), raw)

    # ---- importance --------------------------------------------------------------
    IMPORTANCE_TYPES = ("split", "gain", "total_gain", "cover", "total_cover")

    def feature_importance(self, importance_type="split", iteration_range=None):
        """Per-feature importance (XGBoost's kinds): ``"split"`` (times a feature is
        split on), ``"total_gain"`` / ``"gain"`` (the sum / mean of its splits'
        gains), ``"total_cover"`` / ``"cover"`` (the sum / mean of the hessian cover
        of the nodes it splits).  CTR features (``cat_encoding="ordered"``) count for
        their categorical sources."""
        if importance_type not in self.IMPORTANCE_TYPES:
            raise ValueError(f"importance_type must be one of {self.IMPORTANCE_TYPES}, got "
                             f"{importance_type!r}")
        t0, t1 = self._tree_range(iteration_range)
        n_ctr = 0 if self.ctr is None else self.ctr.n_out
        n_ext = self.n_features + n_ctr
        splits = np.zeros(n_ext)
        total = np.zeros(n_ext)
        for tree in self.trees[t0:t1]:
            internal = tree.left >= 0
            f = tree.feature[internal]
            np.add.at(splits, f, 1.0)
            if importance_type in ("gain", "total_gain"):
                np.add.at(total, f, tree.gain[internal])
            elif importance_type in ("cover", "total_cover"):
                np.add.at(total, f, tree.cover[internal])
        F = self.n_features
        for e in range(n_ctr):   # a CTR feature counts for its categorical sources
            src = self.ctr.sources_of(e)
            for j in src:
                splits[j] += splits[F + e] / len(src)
                total[j] += total[F + e] / len(src)
        splits, total = splits[:F], total[:F]
        if importance_type == "split":
            return splits
        if importance_type.startswith("total_"):
            return total
        return np.divide(total, splits, out=np.zeros(F), where=splits > 0)

    # ---- inspection and export ---------------------------------------------------
    def trees_to_dataframe(self):
        """Every node of every tree as a pandas DataFrame (``bonsai.inspection``)."""
        from .inspection import trees_to_dataframe
        return trees_to_dataframe(self)

    def dump_model(self):
        """The model as a JSON-ready dict with per-node gain and cover
        (``bonsai.inspection``)."""
        from .inspection import dump_model
        return dump_model(self)

    def to_onnx(self, opset=None):
        """An ONNX model (ai.onnx.ml tree ensembles; ``bonsai.io.export``)."""
        from .io.export import to_onnx
        return to_onnx(self, opset=opset)

    def to_treelite(self):
        """A Treelite model built with its model builder (``bonsai.io.export``)."""
        from .io.export import to_treelite
        return to_treelite(self)

    @classmethod
    def from_xgboost(cls, model):
        """A Booster from an XGBoost JSON model (``bonsai.io.importers``)."""
        from .io.importers import read_xgboost
        return cls._from_state(read_xgboost(model))

    @classmethod
    def from_lightgbm(cls, model):
        """A Booster from a LightGBM text model (``bonsai.io.importers``)."""
        from .io.importers import read_lightgbm
        return cls._from_state(read_lightgbm(model))

    @classmethod
    def _from_state(cls, state):
        """A Booster with the attributes of ``state`` (an importer's dict) set."""
        booster = cls()
        for key, val in state.items():
            setattr(booster, key, val)
        return booster

    # ---- model files -------------------------------------------------------------
    def _to_doc(self):
        doc = {
            "format": model_file.FORMAT, "schema_version": model_file.SCHEMA_VERSION,
            "bonsai_version": __version__,
            "objective": {"name": self.objective, "params": self.objective_params},
            "n_outputs": self.n_outputs, "n_features": self.n_features,
            "feature_names": self.feature_names, "base_score": list(map(float, self.base_score)),
            "params": self.params, "grow_policy": self.grow_policy,
            "best_iteration": self.best_iteration, "best_score": self.best_score,
            "tree_class": self.tree_class, "trees": [t.to_dict() for t in self.trees],
            "extra": self.extra,
        }
        if self.multi_strategy != "one_output_per_tree":   # older files stay byte-identical
            doc["multi_strategy"] = self.multi_strategy
        if self.categories is not None:
            doc["categorical"] = self.categories.to_dict()
            if self.ctr is not None:
                doc["ctr"] = self.ctr.to_dict()
        else:   # readable by bonsai versions before categorical features
            doc["schema_version"] = model_file.SCHEMA_VERSION_NUMERIC
        return doc

    def model_to_string(self):
        """The model as deterministic JSON text (identical bytes for identical models)."""
        return model_file.dumps(self._to_doc())

    def save_model(self, fname):
        with open(fname, "w", encoding="utf-8") as fh:
            fh.write(self.model_to_string())
        return self

    def _load_string(self, text):
        doc, trees = model_file.loads(text)
        self.trees = trees
        self.tree_class = list(doc["tree_class"])
        self.n_outputs = doc["n_outputs"]
        self.multi_strategy = doc.get("multi_strategy", MULTI_STRATEGIES[0])
        self.n_features = doc["n_features"]
        self.feature_names = doc.get("feature_names")
        self.base_score = np.asarray(doc["base_score"], dtype=np.float64)
        obj = doc["objective"]
        if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
            raise ValueError("invalid model: bad 'objective' field")
        self.objective = obj["name"]
        self.objective_params = dict(obj.get("params") or {})
        self.params = dict(doc.get("params") or {})
        self.grow_policy = doc.get("grow_policy", "depthwise")
        self.best_iteration = doc.get("best_iteration")
        self.best_score = doc.get("best_score")
        self.extra = dict(doc.get("extra") or {})
        self.categories = (None if doc.get("categorical") is None
                           else CategoryMap.from_dict(doc["categorical"], self.n_features))
        self.ctr = None if doc.get("ctr") is None else CtrModel.from_dict(doc["ctr"])
        if self.ctr is not None and (self.categories is None or any(
                j not in self.categories.features
                or k != self.categories.n_codes(self.categories.features.index(j))
                for j, k in self.ctr.cards.items())):
            raise ValueError("invalid model: 'ctr' sources are not categorical features "
                             "with the 'cards' (category counts) the model stores")
        with self._lock:
            self._cache = self._device = None
            self._obj = None
        try:
            self._objective()
        except (ValueError, TypeError) as e:
            raise ValueError(f"invalid model: objective: {e}") from None
        return self

    def load_model(self, fname):
        """Load a model file into this Booster (returns self)."""
        with open(fname, "rb") as fh:
            data = fh.read()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"{fname!s} is not a bonsai model file (not UTF-8 JSON text: {e})") from None
        return self._load_string(text)

    def __getstate__(self):
        return {"model": self.model_to_string(), "evals_result": self.evals_result,
                "n_threads": self.n_threads}

    def __setstate__(self, state):
        self.__init__(model_str=state["model"])
        self.evals_result = state.get("evals_result", {})
        self.n_threads = state.get("n_threads")

    def __copy__(self):
        return Booster(model_str=self.model_to_string())

    def __deepcopy__(self, memo):
        b = self.__copy__()
        b.evals_result = {k: {m: list(v) for m, v in d.items()} for k, d in self.evals_result.items()}
        b.n_threads = self.n_threads
        return b
