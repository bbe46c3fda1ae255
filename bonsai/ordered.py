"""Ordered target statistics inside training, ``cat_encoding="ordered"``: CatBoost's
CTR features (counter statistics computed along random permutations).

Each categorical feature, and each pair of them chosen from the first trees (a
*combination*), is a *group*: its rows' keys are the category code (a pair: both
codes in one int64, missing if either is).  A group gives the grower numeric
features:

* per target statistic s (binary: the positive rate; regression: the mean;
  multiclass: each class's rate) the *ordered* statistic of a row,
  ``(sum of s over the rows before it with its key + prior_s * a) / (their count + a)``,
  counted online along a seeded permutation and averaged over ``ctr_permutations``
  of them, so a row's own target never enters its value;
* the key's frequency: its share of the training rows (no target, no leakage).

Sample weights do not enter the statistics (counts and sums are over rows, as in
``OrderedTargetEncoder``).  The model stores each group's keys with their training
counts and target sums;
prediction gives every row the statistics of all the training rows
(``CtrModel.transform``).  Sums run in row or permutation order, so values do not
depend on threads.

Feature spaces: the model's trees index ``[original features | CTR features]``.  The
grower sees the numeric original features, the categorical features left native
(``cat_encoding="auto"`` encodes only some: ``auto_ctr_features``; their codes keep
category-set splits) and the CTR features (an encoded feature's codes themselves are
not split on); ``OrderedEncoding.fmap`` maps its
features to the model's.  Combinations: after the first rounds, the pairs of
categorical features whose CTR features the trees split on along one path (scored by
the lower split's gain) get groups of their own, appended to both spaces, and
training goes on with them.
"""
import numpy as np

from . import _ctr
from .binning import BinMapper


def targets(y, objective, k_out):
    """(n, S) float64 target statistics: one-hot classes for multiclass, else y (its K
    columns for an (n, K) multi-output label)."""
    y = np.asarray(y, np.float64)
    if objective == "multiclass":
        t = np.zeros((y.shape[0], k_out))
        t[np.arange(y.shape[0]), y.astype(np.int64)] = 1.0
        return t
    return y.reshape(y.shape[0], -1).copy()


def unique_keys(keys):
    """``np.unique(keys, return_inverse=True)`` of int64 keys >= -1 (the inverse as
    int64): by counting when the keys span at most a few times as many values as
    there are keys (one id column: its codes), by numpy's sort otherwise (pairs of
    ids span their product)."""
    top = int(keys.max()) if keys.size else -1
    if keys.size and top < 4 * keys.size + 1024:
        seen = np.bincount(keys + 1, minlength=top + 2) > 0   # slot 0: key -1
        uniq = np.flatnonzero(seen) - 1
        rank = np.cumsum(seen) - 1
        return uniq, rank[keys + 1]
    uniq, dense = np.unique(keys, return_inverse=True)
    return uniq, dense.astype(np.int64)


def row_keys(codes, cards):
    """int64 keys of rows from the code columns of a group's sources (-1: missing)."""
    key = codes[0].astype(np.int64)
    for c, k in zip(codes[1:], cards[1:]):
        c = c.astype(np.int64)
        key = np.where((key < 0) | (c < 0), -1, key * k + c)
    return key


class CtrGroup:
    """One group's training table: sorted ``keys`` with their row ``counts`` and
    target ``sums (k, S)``; ``sources`` are the model's categorical feature indices."""

    def __init__(self, sources, keys, counts, sums):
        self.sources = tuple(int(s) for s in sources)
        self.keys = np.asarray(keys, np.int64)
        self.counts = np.asarray(counts, np.float64)
        sums = np.asarray(sums, np.float64)
        k = self.keys.shape[0]
        # no keys (every training row missing): (0, S), S set by the CtrModel
        self.sums = sums.reshape(k, -1) if k else sums.reshape(0, sums.shape[-1] if
                                                               sums.ndim == 2 else 0)

    def index(self, keys):
        """Table row of each key (-1: missing or not seen in training)."""
        if self.keys.size == 0:
            return np.full(keys.shape[0], -1, np.int64)
        pos = np.minimum(np.searchsorted(self.keys, keys), self.keys.size - 1)
        return np.where((keys >= 0) & (self.keys[pos] == keys), pos, -1).astype(np.int64)

    def full_values(self, idx, prior, a, n_train, out, col):
        """``out[:, col:col + S + 1]``: statistics over all training rows, then the
        frequency (the prior and 0 for unseen keys)."""
        S = prior.shape[0]
        _ctr.encode_full(idx, self.sums, self.counts, prior, a, out, col)
        freq = np.append(self.counts, 0.0)[idx] / n_train    # idx -1: unseen, 0
        out[:, col + S] = freq

    def to_dict(self):
        return {"sources": list(self.sources), "keys": self.keys.tolist(),
                "counts": self.counts.tolist(), "sums": self.sums.tolist()}


class CtrModel:
    """The CTR features of a model: groups, priors, prior weight, training rows."""

    def __init__(self, groups, prior, prior_weight, n_train, cards):
        self.groups = list(groups)
        self.prior = np.asarray(prior, np.float64)
        for g in self.groups:
            if g.sums.size == 0 and g.keys.shape[0] == 0:
                g.sums = np.zeros((0, self.prior.shape[0] if self.prior.ndim == 1 else 0))
        self.prior_weight = float(prior_weight)
        self.n_train = float(n_train)
        self.cards = {int(j): int(k) for j, k in cards.items()}   # feature -> categories

    @property
    def width(self):
        """CTR features per group."""
        return self.prior.shape[0] + 1

    @property
    def n_out(self):
        return len(self.groups) * self.width

    def sources_of(self, e):
        """The categorical features behind CTR feature ``e``."""
        return self.groups[e // self.width].sources

    def values(self, codes_of, n):
        """(n, n_out) full-statistics values; ``codes_of(j)`` gives feature j's codes."""
        out = np.empty((n, self.n_out))
        for g, grp in enumerate(self.groups):
            keys = row_keys([codes_of(j) for j in grp.sources],
                            [self.cards[j] for j in grp.sources])
            grp.full_values(grp.index(keys), self.prior, self.prior_weight, self.n_train, out,
                            g * self.width)
        return out

    def transform(self, X):
        """``[X | CTR features]`` of a coded matrix (NaN: missing or unseen)."""
        def codes_of(j):
            c = X[:, j]
            return np.where(np.isnan(c), -1, c).astype(np.int64)
        return np.hstack([X.astype(np.float64, copy=False), self.values(codes_of, X.shape[0])])

    def to_dict(self):
        return {"groups": [g.to_dict() for g in self.groups], "prior": self.prior.tolist(),
                "prior_weight": self.prior_weight, "n_train": self.n_train,
                "cards": {str(j): k for j, k in sorted(self.cards.items())}}

    @classmethod
    def from_dict(cls, d):
        _check_ctr_types(d)
        try:
            groups = [CtrGroup(g["sources"], g["keys"], g["counts"], g["sums"])
                      for g in d["groups"]]
            m = cls(groups, d["prior"], d["prior_weight"], d["n_train"],
                    {int(j): int(k) for j, k in d["cards"].items()})
        except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
            raise ValueError(f"invalid model: bad 'ctr' field: {e}") from None
        if any(s not in m.cards for g in groups for s in g.sources):
            raise ValueError("invalid model: bad 'ctr' field: unknown source feature")
        m.check()
        return m

    def check(self):
        """A loaded model's tables are usable: finite priors, a finite number of
        training rows (>= 1), per group strictly increasing keys with one count (in
        ``[0, n_train]``) and one row of finite target sums each (lookups
        binary-search the keys)."""
        S = self.prior.shape[0]
        if (self.prior.ndim != 1 or S < 1 or not np.all(np.isfinite(self.prior))
                or not 1 <= self.n_train < np.inf or not np.isfinite(self.prior_weight)
                or self.prior_weight < 0):
            raise ValueError("invalid model: bad 'ctr' field: prior, prior_weight or n_train")
        # 0: a categorical feature whose training rows were all missing (no codes)
        if any(k < 0 for k in self.cards.values()):
            raise ValueError("invalid model: bad 'ctr' field: 'cards' must be >= 0")
        for i, g in enumerate(self.groups):
            k = g.keys.shape[0]
            if (g.keys.ndim != 1 or g.counts.shape != (k,) or g.sums.shape != (k, S)
                    or np.any(np.diff(g.keys) <= 0) or np.any(g.keys < 0)
                    or not np.all(np.isfinite(g.sums)) or np.any(g.counts < 0)
                    or np.any(g.counts > self.n_train)):
                raise ValueError(f"invalid model: bad 'ctr' field: group {i} needs increasing "
                                 f"keys >= 0 with one count and {S} target sums each")


def _check_ctr_types(d):
    """A model file's 'ctr' field holds what ``CtrModel.to_dict`` writes: integer
    sources, keys (int64) and cards (string keys of decimal digits), numbers
    elsewhere -- nothing converted silently (a float key is not truncated)."""
    def ints(v, lo=0, hi=2 ** 63 - 1):
        return isinstance(v, list) and all(
            isinstance(x, int) and not isinstance(x, bool) and lo <= x <= hi for x in v)

    def num(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool)

    def nums(v):
        return isinstance(v, list) and all(num(x) for x in v)

    bad = None
    if not isinstance(d, dict):
        bad = "not a JSON object"
    elif not isinstance(d.get("groups"), list) or not all(isinstance(g, dict) for g in d["groups"]):
        bad = "'groups' must be a list of objects"
    elif not nums(d.get("prior")) or not num(d.get("prior_weight")) or not num(d.get("n_train")):
        bad = "'prior' must be a list of numbers, 'prior_weight' and 'n_train' numbers"
    elif not isinstance(d.get("cards"), dict) or not all(
            isinstance(j, str) and j.isdigit() and j.isascii() and isinstance(k, int)
            and not isinstance(k, bool) for j, k in d["cards"].items()):
        bad = "'cards' must map feature indices to integer category counts"
    else:
        for i, g in enumerate(d["groups"]):
            if not (ints(g.get("sources"), hi=2 ** 31 - 1) and ints(g.get("keys"))
                    and nums(g.get("counts")) and isinstance(g.get("sums"), list)
                    and all(nums(r) for r in g["sums"])):
                bad = (f"group {i} needs integer 'sources' and 'keys', numbers in 'counts' "
                       "and lists of numbers in 'sums'")
                break
    if bad is not None:
        raise ValueError(f"invalid model: bad 'ctr' field: {bad}")


#: ``cat_encoding="auto"`` (the default) gives a categorical feature ordered target
#: statistics, instead of native category-set splits, when native splits cannot see
#: most of its rows' categories: a native split can only send a category its own way
#: if the category has ``min_data_per_group`` rows in the node and is among the
#: ``max_bin`` most frequent (the rest share the missing bin), and it moves at most
#: ``max_cat_threshold`` categories at a time.  So a feature is encoded when fewer
#: than ``AUTO_MIN_COVERED`` of its non-missing rows lie in such categories at the
#: root, or when it has more than ``AUTO_MAX_NATIVE_CATEGORIES`` categories (id-like
#: columns: a prefix of 32 out of hundreds of categories, chosen afresh at every node
#: from fewer rows, fits them worse than one numeric statistic).  Measured: see
#: ``benchmarks/RESULTS.md`` ("categorical defaults").
AUTO_MIN_COVERED = 0.9
AUTO_MAX_NATIVE_CATEGORIES = 64


def auto_ctr_features(train_set, min_data_per_group, max_bin):
    """The categorical features (model indices) ``cat_encoding="auto"`` encodes with
    ordered target statistics (``AUTO_MIN_COVERED``), in feature order."""
    cm = train_set.categories
    if cm is None or train_set.cat_codes is None:
        return []
    out = []
    for i, j in enumerate(cm.features):
        codes = train_set.cat_codes[i]
        counts = np.bincount(codes[codes >= 0], minlength=1)
        seen = int(np.count_nonzero(counts))
        total = int(counts.sum())
        if total == 0:
            continue
        kept = np.sort(counts)[::-1][:max_bin]
        covered = int(kept[kept >= min_data_per_group].sum()) / total
        if covered < AUTO_MIN_COVERED or seen > AUTO_MAX_NATIVE_CATEGORIES:
            out.append(int(j))
    return out


def _thresholds_of(bm):
    return [bm.feature_thresholds(f) for f in range(bm.n_features)]


def _mapper(parts, max_bin, is_cat=None):
    offsets = np.concatenate([[0], np.cumsum([p.size for p in parts])]).astype(np.int64)
    thr = np.concatenate(parts) if parts else np.empty(0)
    cat = None if is_cat is None else np.asarray(is_cat, np.uint8)
    return BinMapper(thr, offsets, max_bin, cat)


class OrderedEncoding:
    """Training-time state of ``cat_encoding="ordered"``: the grower's binned data
    (``X_cols``, ``bin_mapper``: what ``backend.prepare`` reads), its feature map ``fmap`` and the
    ``model`` (``CtrModel``) predictions use."""

    def __init__(self, train_set, y, objective, k_out, p, ctr_features=None):
        cm = train_set.categories
        # the categorical features encoded here (all with cat_encoding="ordered"); the
        # others keep their native category-set splits on their codes
        ctr = list(cm.features) if ctr_features is None else list(ctr_features)
        self.F = train_set.n_features
        self.pos = {j: i for i, j in enumerate(cm.features)}
        self.codes = train_set.cat_codes
        self.max_bin = train_set.max_bin
        self.random_state = p.random_state
        self.T = targets(y, objective, k_out)
        n = self.T.shape[0]
        rng = np.random.default_rng([p.random_state, 0xC7])
        self.perms = [rng.permutation(n).astype(np.int64) for _ in range(p.ctr_permutations)]
        cards = {j: cm.n_codes(i) for i, j in enumerate(cm.features)}
        self.model = CtrModel([], self.T.mean(axis=0), p.ctr_prior_weight, n, cards)
        self.max_pairs = p.max_ctr_combinations
        self.ctr_sources = ctr
        num = [j for j in range(self.F) if j not in set(ctr)]
        self.num = num
        self.fmap = np.array(num, np.int64)
        bm = train_set.bin_mapper
        self.parts = [bm.feature_thresholds(j) for j in num]
        self.part_cat = [int(bm.is_cat[j]) for j in num]
        self.X_cols = np.ascontiguousarray(train_set.X_cols[num]) if num else None
        self.evals = []       # [(eval set, its Dataset)]
        self._add_groups([(j,) for j in ctr])

    # ---- columns -------------------------------------------------------------------
    def _train_columns(self, sources):
        """(group, (n, S + 1) training values: ordered statistics, frequency)."""
        m = self.model
        keys = row_keys([self.codes[self.pos[j]] for j in sources],
                        [m.cards[j] for j in sources])
        uniq, dense = unique_keys(keys)
        if uniq.size and uniq[0] < 0:       # missing: code -1, not a key
            dense -= 1
            uniq = uniq[1:]
        S = m.prior.shape[0]
        sums = np.empty((uniq.size, S))
        counts = np.empty(uniq.size)
        _ctr.category_sums(dense, self.T, uniq.size, sums, counts)
        vals = np.zeros((keys.shape[0], S + 1))
        for perm in self.perms:
            _ctr.encode_ordered(dense, self.T, perm, uniq.size, m.prior, m.prior_weight, vals, 0)
        vals[:, :S] /= len(self.perms)
        # a missing key (-1) reads the appended 0 (works with no keys at all)
        vals[:, S] = np.append(counts, 0.0)[dense] / m.n_train
        return CtrGroup(sources, uniq, counts, sums), vals

    def _eval_columns(self, ds, groups):
        """An eval Dataset's values of ``groups`` (full training statistics)."""
        m = CtrModel(groups, self.model.prior, self.model.prior_weight, self.model.n_train,
                     self.model.cards)
        return m.values(lambda j: ds.cat_codes[self.pos[j]], ds.n_rows)

    def _add_groups(self, sources_list):
        """Append groups to the model, their binned columns to the grower's data and
        to every registered eval set."""
        groups, cols = [], []
        for sources in sources_list:
            g, v = self._train_columns(sources)
            groups.append(g)
            cols.append(v)
        first = self.F + self.model.n_out
        self.model.groups += groups
        V = np.hstack(cols)
        bm = BinMapper.fit(V, self.max_bin, random_state=self.random_state)
        new_cols = bm.transform_columns(V)
        self.parts += _thresholds_of(bm)
        self.part_cat += [0] * V.shape[1]
        self.fmap = np.concatenate([self.fmap, first + np.arange(V.shape[1])]).astype(np.int64)
        self.X_cols = new_cols if self.X_cols is None else np.ascontiguousarray(
            np.vstack([self.X_cols, new_cols]))
        self.bin_mapper = _mapper(self.parts, self.max_bin, self.part_cat)
        for ev, ds in self.evals:
            ev.X_cols = np.ascontiguousarray(np.vstack(
                [ev.X_cols, bm.transform_columns(self._eval_columns(ds, groups))]))

    def add_eval(self, ev, ds):
        """Give an eval set (``boosting._EvalSet`` of Dataset ``ds``) the grower's
        feature space."""
        num = self.num
        base = ds.X_cols[num]
        V = self._eval_columns(ds, self.model.groups)
        bm = _mapper(self.parts[len(num):], self.max_bin)
        ev.X_cols = np.ascontiguousarray(np.vstack([base, bm.transform_columns(V)]))
        self.evals.append((ev, ds))

    # ---- trees -----------------------------------------------------------------------
    def to_model(self, tree):
        """A grown tree with its features in the model's space."""
        feature = tree.feature.copy()
        internal = tree.left >= 0
        feature[internal] = self.fmap[feature[internal]]
        return tree._replace(feature=feature)

    def combine(self, trees):
        """Add groups for the categorical pairs the trees split on along one path
        (at most ``max_ctr_combinations``); returns whether any was added."""
        if self.max_pairs <= 0 or len(self.ctr_sources) < 2:
            return False
        m = self.model
        singles = {g.sources[0] for g in m.groups if len(g.sources) == 1}
        score = {}
        for t in trees:
            stack = [(0, ())]
            while stack:
                i, path = stack.pop()
                if t.left[i] < 0:
                    continue
                f = int(t.feature[i])
                src = None
                if f >= self.F:
                    s = m.sources_of(f - self.F)
                    src = s[0] if len(s) == 1 and s[0] in singles else None
                if src is not None:
                    for q in path:
                        if q != src:
                            key = (min(q, src), max(q, src))
                            score[key] = score.get(key, 0.0) + float(t.gain[i])
                    path = path + (src,) if src not in path else path
                stack.append((int(t.left[i]), path))
                stack.append((int(t.right[i]), path))
        have = {g.sources for g in m.groups}
        ranked = sorted((k for k, v in score.items() if v > 0 and k not in have),
                        key=lambda k: (-score[k], k))[:self.max_pairs]
        if not ranked:
            return False
        self._add_groups(ranked)
        return True
