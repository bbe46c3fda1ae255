"""The errors a distributed fit raises to its caller."""


class WorkerLostError(RuntimeError):
    """A worker holding a shard of the fit left the cluster (killed, crashed,
    restarted by its nanny) before the fit finished.  The fit fails: a lost shard is
    never silently retried.

    Attributes: ``worker`` (its address), ``round`` (the boosting round the
    survivors were in, or None if unknown), ``level`` (the collective call count of
    that round, or None).
    """

    def __init__(self, worker, round=None, level=None, detail=""):
        self.worker = worker
        self.round = round
        self.level = level
        where = "" if round is None else f" in round {round}" + (
            "" if level is None else f" (collective {level})")
        super().__init__(f"worker {worker} was lost{where}; the fit was aborted"
                         + (f": {detail}" if detail else ""))
