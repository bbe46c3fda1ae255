"""What an interrupted fit leaves behind: the model of the rounds finished so far.

A Ctrl-C (SIGINT) during ``bonsai.train`` or an estimator's ``fit`` raises Python's
own ``KeyboardInterrupt``: bonsai installs no signal handler.  numba kernels do not
look at signals; Python runs its SIGINT handler as soon as the running kernel
returns, and a boosting round is many short kernel calls, so the fit stops within
about one round.  ``train`` then sets ``.booster`` on the exception it re-raises:

* a :class:`bonsai.Booster` of the rounds finished before the interrupt (a round
  half grown when it came is dropped whole), with ``params["n_estimators"]`` set to
  its round count, the evaluation history of those rounds and the early-stopping
  best iteration as it stood after the last one: the model a fit of that many
  rounds builds;
* ``None`` when no round of this fit had finished.

:class:`RoundsDone` records, after every round, what that model needs (how many
trees, how much history, the best iteration), so building it costs no copy of the
trees: the trees are shared with the interrupted fit's model, which nothing uses
any more.
"""

from __future__ import annotations

__all__ = ["RoundsDone"]

#: Booster attributes a model of the finished rounds does not copy (lazily built
#: caches and the lock guarding them: the new Booster gets its own)
_NOT_COPIED = frozenset({"_cache", "_device", "_obj", "_lock", "_sparse_cache"})


class RoundsDone:
    """The state of a fit after its last finished round (see the module docstring)."""

    __slots__ = ("booster", "n_trees", "n_logged", "best_iteration", "best_score")

    def __init__(self):
        self.booster = None
        self.n_trees = 0
        self.n_logged = 0
        self.best_iteration = None
        self.best_score = None

    def finished(self, booster):
        """Record the Booster as a round left it (once per finished round)."""
        self.booster = booster
        self.n_trees = len(booster.trees)
        self.n_logged += 1
        self.best_iteration = booster.best_iteration
        self.best_score = booster.best_score

    def model(self):
        """A Booster of the finished rounds, or None when no round finished."""
        from .booster import Booster

        b = self.booster
        if b is None:
            return None
        part = Booster()
        for key, val in b.__dict__.items():
            if key not in _NOT_COPIED:
                setattr(part, key, val)
        part.trees = list(b.trees[:self.n_trees])
        part.tree_class = list(b.tree_class[:self.n_trees])
        part.params = dict(b.params, n_estimators=part.num_boosted_rounds())
        part.evals_result = {d: {m: list(v[:self.n_logged]) for m, v in ms.items()}
                             for d, ms in b.evals_result.items()}
        part.best_iteration = self.best_iteration
        part.best_score = self.best_score
        return part

    def attach(self, exc):
        """Set ``exc.booster`` to :meth:`model` (None if it cannot be built)."""
        try:
            exc.booster = self.model()
        except Exception:   # noqa: BLE001 -- never hide the interrupt behind another error
            exc.booster = None
