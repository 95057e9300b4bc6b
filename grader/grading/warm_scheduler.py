"""Loaded by the warm grader's Dask scheduler (``dask scheduler --preload grader.grading.warm_scheduler``): a
press connected to it counts as work, so the grader never stops under a press; a course folder gone stops it.

Dask's idle timeout counts only tasks.  A press finds the grader running (or starts it), connects, stages its
students and only then sends its first task; meanwhile the idle clock ran.  With a short ``--idle`` on a slow
machine the scheduler closed in that gap and the press failed after Dask's 30 s connect timeout (CI, session 54).
Here the clock stops while any press (a Dask client) is connected and starts afresh when the last one leaves, so
``--idle`` means what it says: seconds with no press and no task.  A press that dies leaves too (Dask removes a
client whose connection closed).  And it stops within seconds once its course folder is gone (deleted or moved:
``rm -r`` of a course, a test's or a demo hub's temporary course), rather than after its idle time.  Imports only
Dask and translab's contract: the scheduler holds no grading code.
"""
from __future__ import annotations

import asyncio
import os
from pathlib import Path

from distributed.diagnostics.plugin import SchedulerPlugin
from tornado.ioloop import PeriodicCallback

from translab.contract import COURSE_ENV

DASK_OWN_CLIENT = "fire-and-forget"  # the scheduler's own entry in its clients, never a press
COURSE_CHECK_S = 2  # how often the scheduler looks for its course folder


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
    course = Path(os.environ[COURSE_ENV])

    def stop_without_course() -> None:
        if not course.is_dir():
            asyncio.get_running_loop().create_task(scheduler.close(reason="the course folder is gone"))

    # Dask starts the scheduler's periodic callbacks after its preloads, and stops them when it closes
    scheduler.periodic_callbacks["translab-course-folder"] = PeriodicCallback(stop_without_course,
                                                                              COURSE_CHECK_S * 1000)
