"""The host link of a replica, one direction: copies run one after another (first come, first
served), each for the time the cost model gives it (its share of the link with every GPU
loading, :meth:`kvroof.cost.iteration.IterationModel.load_time` / ``save_time``). Every rank of
the TP group moves its share on its own link at the same time, so one resource stands for them.
"""

from __future__ import annotations

__all__ = ["Link"]


class Link:
    """A first-come-first-served copy queue."""

    __slots__ = ("busy", "copies", "free_at")

    def __init__(self) -> None:
        self.free_at = 0.0
        self.busy = 0.0
        self.copies = 0

    def reserve(self, start: float, duration: float) -> float:
        """Queue a copy of ``duration`` seconds ready at ``start``; returns when it ends."""
        begin = start if start > self.free_at else self.free_at
        self.free_at = begin + duration
        self.busy += duration
        self.copies += 1
        return self.free_at

    def backlog(self, now: float) -> float:
        """Seconds of queued copies still ahead at ``now``."""
        return self.free_at - now if self.free_at > now else 0.0
