"""The categorical split scan (``_gain.category_split``, at one node through
``split_cat.scan_categorical`` and over a level through
``split_level.find_level_split_categorical``) against brute force over category
subsets, on hand-built exact-mode histogram cells."""
import itertools

import numpy as np
import pytest

from bonsai.backends.cpu._gain import decode, leaf_score, split_gain
from bonsai.backends.cpu.split_cat import scan_categorical
from bonsai.split_settings import CatSettings, Scales, SplitSettings

CBITS = 20
MASK = (1 << CBITS) - 1
SG, SH = 2.0 ** 20, 2.0 ** 20
SCALES = Scales.exact(SG, SH, CBITS)


def _hist(rng, k, empty=(), rare=()):
    """(k + 1, 2) exact cells: category b's rows, then the missing bin."""
    H = np.zeros((k + 1, 2), np.int64)
    for b in range(k + 1):
        if b in empty:
            continue
        n = 1 if b in rare else int(rng.integers(3, 40))
        g = int(rng.normal(0.3 * np.sin(3 * b), 1.0) * n * SG / 4)
        h = int(n * SH / 4 * rng.uniform(0.5, 1.0))
        H[b] = (g, (h << CBITS) | n)
    return H


def _totals(H):
    a, c2 = int(H[:, 0].sum()), int(H[:, 1].sum())
    return a, c2 >> CBITS, c2 & MASK


def _cfg(lam=0.0):
    return SplitSettings(reg_lambda=lam, reg_alpha=0.0, max_delta_step=0.0,
                         min_child_weight=1e-3, min_split_gain=0.0)


def _cat(onehot, threshold, smooth, l2, group):
    return CatSettings(max_cat_to_onehot=onehot, max_cat_threshold=threshold, cat_smooth=smooth,
                       cat_l2=l2, min_data_per_group=group)


def _brute(H, used, cfg, mcs, sizes):
    tg, th, tc = _totals(H)
    parent = leaf_score(tg / SG, th / SH, cfg.reg_lambda, cfg.reg_alpha, cfg.max_delta_step)
    best, best_set = -np.inf, None
    for r in sizes:
        for subset in itertools.combinations(used, r):
            a = sum(int(H[b, 0]) for b in subset)
            c2 = sum(int(H[b, 1]) for b in subset)
            g, h, c = decode(np.int64(a), np.int64(c2), False, np.int64(CBITS), np.int64(MASK), 0.0)
            gain = split_gain(g, h, c, tg, th, tc, SCALES, cfg, mcs, parent, True)
            if gain > best:
                best, best_set = gain, set(subset)
    return best, best_set


def _run(H, cat_cfg, cfg=None, mcs=1):
    """``scan_categorical`` of one node whose histogram (slot 1 of 2) holds ``H``."""
    k = H.shape[0] - 1
    hist = np.zeros((2, k + 1, 2), np.int64)
    hist[1] = H
    tot = np.array(_totals(H), np.int64)
    bits = np.zeros((k + 63) // 64, np.uint64)
    lsum = np.empty(3, np.int64)
    gain = scan_categorical(hist, 1, 0, k, tot, 0.0, SCALES, _cfg() if cfg is None else cfg,
                            cat_cfg, mcs, bits, lsum)
    left = {b for b in range(k) if (int(bits[b >> 6]) >> (b & 63)) & 1}
    return gain, tuple(int(v) for v in lsum), left


@pytest.mark.parametrize("seed", range(12))
def test_sorted_prefix_scan_finds_the_best_subset(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(3, 11))
    H = _hist(rng, k, empty={int(rng.integers(0, k))})
    cat_cfg = _cat(0.0, 64.0, 0.0, 0.0, 1.0)   # no one-hot, no smoothing
    gain, sums, left = _run(H, cat_cfg)
    used = [b for b in range(k) if H[b, 1] & MASK]
    best, best_set = _brute(H, used, _cfg(), 1, range(1, len(used)))
    assert gain > -np.inf and gain == pytest.approx(best, rel=1e-12)
    # the chosen set's sums are its cells' sums, and its gain is the reported one
    assert sums == tuple(int(x) for x in (H[list(left), 0].sum(), H[list(left), 1].sum() >> CBITS,
                                          H[list(left), 1].sum() & MASK))
    assert left == best_set
    assert k not in left                                          # missing bin goes right


def test_one_vs_rest_up_to_max_cat_to_onehot():
    rng = np.random.default_rng(5)
    H = _hist(rng, 4)
    gain, _, left = _run(H, _cat(4.0, 64.0, 0.0, 0.0, 1.0))
    best, best_set = _brute(H, list(range(4)), _cfg(), 1, [1])
    assert len(left) == 1 and gain == pytest.approx(best, rel=1e-12) and left == best_set


def test_rare_categories_stay_right_and_threshold_caps_the_set():
    rng = np.random.default_rng(9)
    H = _hist(rng, 10, rare={2, 7})
    gain, _, left = _run(H, _cat(0.0, 3.0, 0.0, 0.0, 2.0))   # min_data_per_group 2
    assert gain > -np.inf
    assert not left & {2, 7}
    assert 1 <= len(left) <= 3
    used = [b for b in range(10) if b not in (2, 7)]
    assert left <= set(used)


def test_no_split_when_children_break_min_child_samples():
    rng = np.random.default_rng(2)
    H = _hist(rng, 5)
    tc = int(H[:, 1].sum()) & MASK
    gain, _, left = _run(H, _cat(0.0, 64.0, 0.0, 0.0, 1.0), mcs=tc)
    assert gain == -np.inf and left == set()


def test_cat_l2_and_smoothing_are_used():
    rng = np.random.default_rng(4)
    H = _hist(rng, 8)
    g0, _, _ = _run(H, _cat(0.0, 64.0, 0.0, 0.0, 1.0))
    g1, _, _ = _run(H, _cat(0.0, 64.0, 0.0, 10.0, 1.0))    # cat_l2 shrinks the gain
    assert g1 < g0
    g2, _, left2 = _run(H, _cat(0.0, 64.0, 1e6, 0.0, 1.0))  # huge smoothing: G order
    assert g2 <= g0 and left2


def _level(H_list, cat_cfg, cfg=None, mcs=1):
    """``find_level_split_categorical`` over nodes holding the cells ``H_list``."""
    from bonsai.backends.cpu.split_level import find_level_split_categorical
    k = H_list[0].shape[0] - 1
    hist = np.stack(H_list)[:, :, :]
    slots = np.arange(len(H_list), dtype=np.int64)
    rows = np.array([int(H[:, 1].sum()) & MASK for H in H_list], np.int64)
    gain = np.empty(1)
    bits = np.empty((1, (k + 1 + 63) // 64), np.uint64)
    find_level_split_categorical(hist, slots, rows, np.array([0, k + 1], np.int64),
                                 np.array([k], np.int64), np.ones(1, np.uint8),
                                 np.ones(1, np.uint8), SCALES, _cfg() if cfg is None else cfg,
                                 mcs, cat_cfg, gain, bits)
    left = {b for b in range(k) if (int(bits[0, b >> 6]) >> (b & 63)) & 1}
    return gain[0], left


@pytest.mark.parametrize("onehot", [0.0, 64.0])
def test_level_scan_of_one_node_is_the_node_scan(onehot):
    rng = np.random.default_rng(11)
    H = _hist(rng, 9, empty={3})
    cat_cfg = _cat(onehot, 64.0, 0.0, 0.0, 1.0)
    g1, _, left1 = _run(H, cat_cfg)
    g2, left2 = _level([H], cat_cfg)
    assert g2 == g1 and left2 == left1


def test_level_scan_sums_the_nodes_gains():
    """The level's set scores the sum of each node's gain for that set (a node whose
    child would break the constraints adds nothing), and beats every other prefix."""
    rng = np.random.default_rng(12)
    Hs = [_hist(rng, 7), _hist(rng, 7), _hist(rng, 7, rare={1})]
    cat_cfg = _cat(0.0, 64.0, 0.0, 0.0, 1.0)
    mcs = 3
    gain, left = _level(Hs, cat_cfg, mcs=mcs)

    def total(subset):
        s = 0.0
        for H in Hs:
            tg, th, tc = _totals(H)
            parent = leaf_score(tg / SG, th / SH, 0.0, 0.0, 0.0)
            a = sum(int(H[b, 0]) for b in subset)
            c2 = sum(int(H[b, 1]) for b in subset)
            g, h, c = decode(np.int64(a), np.int64(c2), False, np.int64(CBITS),
                             np.int64(MASK), 0.0)
            v = split_gain(g, h, c, tg, th, tc, SCALES, _cfg(), mcs, parent, True)
            s += v if v != -np.inf else 0.0
        return s
    assert gain == pytest.approx(total(left), rel=1e-12)
    for r in range(1, 7):
        for subset in itertools.combinations(range(7), r):
            assert total(subset) <= gain * (1 + 1e-9) or not _prefix_of_level_order(Hs, subset)


def _prefix_of_level_order(Hs, subset):
    """Whether ``subset`` is a prefix (from either end) of the level's G/H order."""
    g = sum(H[:7, 0].astype(float) for H in Hs)
    h = sum((H[:7, 1] >> CBITS).astype(float) for H in Hs)
    order = list(np.argsort(g / h, kind="mergesort"))
    k = len(subset)
    return set(order[:k]) == set(subset) or set(order[-k:]) == set(subset)
