"""The progress bar of a fit: :class:`ProgressBar`, a training callback drawn by tqdm.

This module owns when a fit shows its progress and what the bar says; the boosting
loop only calls the callback (``bonsai.callbacks`` has the protocol).

The bar shows ``round/total``, the elapsed time, the ETA and rate (tqdm computes
them) and, as its postfix, the latest value of every evaluation metric
(``valid_0-auc=0.8123``).

When it is drawn (``enable=None``, the default): only where a person is watching,
and only for a fit that takes a while --

* the stream (stderr by default) is a terminal (``isatty()``), or the process is a
  Jupyter kernel (then tqdm's notebook widget when ipywidgets is installed, else the
  text bar in the cell's stderr);
* and the boosting rounds have run ``delay`` seconds (default :data:`DEFAULT_DELAY`,
  2 s; counted from ``before_training``, so binning the data comes before it): the
  bar appears at the first round that ends after that, so a short fit draws nothing.

``enable=True`` draws on any stream (still after ``delay``), ``enable=False`` never.
The scikit-learn estimators add a ``ProgressBar()`` unless ``verbose=0`` (see
``bonsai.sklearn``); the native :func:`bonsai.train` draws one only when it is in
its ``callbacks``.  Plain log lines come from
:class:`bonsai.callbacks.EvaluationMonitor`.
"""
import os
import sys

from .callbacks import TrainingCallback

__all__ = ["DEFAULT_DELAY", "ProgressBar", "in_notebook", "is_watched"]

DEFAULT_DELAY = 2.0   # seconds a fit runs before its bar appears


def in_notebook():
    """Whether this process is a Jupyter (IPython) kernel."""
    if "ipykernel" not in sys.modules:
        return False
    ipython = sys.modules.get("IPython")
    get = getattr(ipython, "get_ipython", None)
    shell = get() if get is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def _isatty(stream):
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):   # no isatty, or a closed stream
        return False


def is_watched(stream=None):
    """Whether a person sees ``stream``: a terminal; for the default (``None``:
    ``sys.stderr``) also a notebook cell's output."""
    if stream is None:
        return in_notebook() or (sys.stderr is not None and _isatty(sys.stderr))
    return _isatty(stream)


def _tqdm_class(stream):
    """tqdm's notebook widget in a kernel with ipywidgets (and the default stream),
    else the text bar."""
    if stream is None and in_notebook():
        import importlib.util
        if importlib.util.find_spec("ipywidgets") is not None:
            from tqdm.notebook import tqdm
            return tqdm
    from tqdm import tqdm
    return tqdm


def _screen(stream):
    """tqdm's size arguments: none (tqdm's own) except for a terminal that reports
    0 x 0 (a pty nobody sized: ``script``, some containers), where tqdm would draw
    nothing: there ``$COLUMNS`` x ``$LINES``, or 80 x 24."""
    try:
        fd = (sys.stderr if stream is None else stream).fileno()
        if not os.isatty(fd):
            return {}
        size = os.get_terminal_size(fd)
    except (AttributeError, ValueError, OSError):   # not a file, or closed
        return {}
    if size.columns > 0 and size.lines > 0:
        return {}
    def env(name, default):
        v = os.environ.get(name, "")
        return int(v) if v.isdigit() and int(v) > 0 else default
    return {"ncols": env("COLUMNS", 80), "nrows": env("LINES", 24)}


def _postfix(evals_log):
    """``valid_0-auc=0.8123, valid_0-logloss=0.43`` from the latest round."""
    return ", ".join(f"{d}-{m}={v[-1]:.6g}" for d, ms in evals_log.items()
                     for m, v in ms.items() if v)


class ProgressBar(TrainingCallback):
    """A tqdm progress bar over the boosting rounds.

    Parameters
    ----------
    enable : bool or None -- None (default): only when :func:`is_watched` (a terminal
        or a notebook); True: on any stream; False: never
    delay : float >= 0 -- seconds the fit runs before the bar appears (default
        :data:`DEFAULT_DELAY`); 0 draws from the first round
    stream : file-like, optional -- where to draw (default ``sys.stderr``)
    desc : str -- the bar's label
    """

    def __init__(self, enable=None, delay=None, stream=None, desc="bonsai"):
        if enable is not None and not isinstance(enable, bool):
            raise TypeError(f"enable must be True, False or None, got {enable!r}")
        if delay is not None:
            if isinstance(delay, bool) or not isinstance(delay, (int, float)):
                raise TypeError(f"delay must be a number of seconds, got {delay!r}")
            if not delay >= 0:
                raise ValueError(f"delay must be >= 0 seconds, got {delay!r}")
        if not isinstance(desc, str):
            raise TypeError(f"desc must be a str, got {desc!r}")
        self.enable = enable
        self.delay = delay
        self.stream = stream
        self.desc = desc
        self.bar = None

    def _shown(self):
        if self.enable is None:
            return is_watched(self.stream)
        return self.enable

    def before_training(self, model):
        self.close()
        if not self._shown():
            return model
        done = model.num_boosted_rounds()   # rounds of an init_model
        total = model.params.get("n_estimators") if isinstance(model.params, dict) else None
        if not isinstance(total, int) or total < done:
            total = None
        cls = _tqdm_class(self.stream)
        # the fit's start is the bar's start: elapsed, rate and ETA cover the whole fit
        self.bar = cls(total=total, initial=done, desc=self.desc, unit="round",
                       file=self.stream, leave=True,
                       delay=DEFAULT_DELAY if self.delay is None else float(self.delay),
                       **_screen(self.stream))
        return model

    def after_iteration(self, model, epoch, evals_log):
        if self.bar is not None:
            if evals_log:
                self.bar.set_postfix_str(_postfix(evals_log), refresh=False)
            self.bar.update(1)
        return False

    def after_training(self, model):
        self.close()
        return model

    def close(self):
        """Finish the bar (it stays on screen when it was drawn)."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None
