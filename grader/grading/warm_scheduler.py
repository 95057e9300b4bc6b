"""Loaded by the warm grader's Dask scheduler (``dask scheduler --preload grader.grading.warm_scheduler``): a
press connected to it counts as work, so the grader never stops under a press.

Dask's idle timeout counts only tasks.  A press finds the grader running (or starts it), connects, stages its
students and only then sends its first task; meanwhile the idle clock ran.  With a short ``--idle`` on a slow
machine the scheduler closed in that gap and the press failed after Dask's 30 s connect timeout (CI, session 54).
Here the clock stops while any press (a Dask client) is connected and starts afresh when the last one leaves, so
``--idle`` means what it says: seconds with no press and no task.  A press that dies leaves too (Dask removes a
client whose connection closed).  Imports only Dask: the scheduler holds no grading code.
"""
from __future__ import annotations

from distributed.diagnostics.plugin import SchedulerPlugin

DASK_OWN_CLIENT = "fire-and-forget"  # the scheduler's own entry in its clients, never a press


class PressesHoldTheGrader(SchedulerPlugin):
    """Switches the scheduler's idle timeout off while a press is connected, and back on when the last leaves."""

    name = "translab-presses-hold-the-grader"

    def __init__(self, idle_s: float | None):
        self.idle_s = idle_s
        self.presses: set[str] = set()

    def add_client(self, scheduler, client: str) -> None:
        if client != DASK_OWN_CLIENT:
            self.presses.add(client)
            scheduler.idle_timeout = None

    def remove_client(self, scheduler, client: str) -> None:
        self.presses.discard(client)
        if not self.presses:
            scheduler.idle_since = None  # Dask's own reset: the next check starts the idle time from now
            scheduler.idle_timeout = self.idle_s


def dask_setup(scheduler) -> None:
    scheduler.add_plugin(PressesHoldTheGrader(scheduler.idle_timeout))
