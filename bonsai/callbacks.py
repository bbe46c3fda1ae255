"""Training callbacks, shaped like XGBoost's: ``before_training(model)``,
``after_training(model)``, ``before_iteration(model, epoch, evals_log) -> stop`` and
``after_iteration(model, epoch, evals_log) -> stop``.

``evals_log`` is ``{data_name: {metric_name: [value per iteration]}}``.  Early
stopping and the printed evaluation log are callbacks; the boosting loop only calls
them.  The progress bar is one too: :class:`bonsai.progress.ProgressBar`.
"""
import sys

import numpy as np


class TrainingCallback:
    """Base class: override any hook.  Returning True from an iteration hook stops."""

    def before_training(self, model):
        return model

    def after_training(self, model):
        return model

    def before_iteration(self, model, epoch, evals_log):
        return False

    def after_iteration(self, model, epoch, evals_log):
        return False


class EarlyStopping(TrainingCallback):
    """Stop when the metric has not improved for ``rounds`` iterations.

    Parameters
    ----------
    rounds : int
    metric_name : str, optional -- default: the last metric of the data set
    data_name : str, optional -- default: the last evaluation set
    maximize : bool, optional -- default: from the metric
    min_delta : float -- improvement needed to count
    """

    def __init__(self, rounds, metric_name=None, data_name=None, maximize=None, min_delta=0.0):
        if not isinstance(rounds, (int, np.integer)) or isinstance(rounds, bool) or rounds < 1:
            raise ValueError(f"early_stopping_rounds must be a positive int, got {rounds!r}")
        self.rounds = int(rounds)
        self.metric_name = metric_name
        self.data_name = data_name
        self.maximize = maximize
        self.min_delta = float(min_delta)
        self.best_score = None
        self.best_iteration = None

    def before_training(self, model):
        self.best_score = None
        self.best_iteration = None
        return model

    def after_iteration(self, model, epoch, evals_log):
        if not evals_log:
            raise ValueError("early stopping needs at least one evaluation set (eval_set / valid_sets)")
        data = self.data_name or list(evals_log)[-1]
        if data not in evals_log:
            raise ValueError(f"early stopping: no evaluation set named {data!r}")
        metric = self.metric_name or list(evals_log[data])[-1]
        score = evals_log[data][metric][-1]
        maximize = self.maximize
        if maximize is None:
            maximize = model.metric_higher_is_better(metric)
        better = (self.best_score is None
                  or (score > self.best_score + self.min_delta if maximize
                      else score < self.best_score - self.min_delta))
        if better:
            self.best_score = score
            self.best_iteration = epoch
        model.best_iteration = self.best_iteration
        model.best_score = self.best_score
        return epoch - self.best_iteration >= self.rounds


class EvaluationMonitor(TrainingCallback):
    """Print the latest metrics every ``period`` iterations (to stderr by default)."""

    def __init__(self, period=1, stream=None):
        self.period = max(1, int(period))
        self.stream = stream

    def after_iteration(self, model, epoch, evals_log):
        if evals_log and (epoch % self.period == 0):
            parts = [f"{d}-{m}:{v[-1]:.6g}" for d, ms in evals_log.items() for m, v in ms.items()]
            print(f"[{epoch}]\t" + "\t".join(parts), file=self.stream or sys.stderr)
        return False
