"""The formgrader's Autograde button pressed for each of a class, one after the other, through Chromium, against one
``make autograde JOBS=1`` of the same class: once with the course's warm grader (the course's default), whose
first press starts it and is reported apart, and once without (``c.BatchAutogradeExporter.warm = False``), where
each press is a batch of its own."""
from __future__ import annotations

import statistics
import time
from pathlib import Path

from grader.grading import warm_grader
from grader.testing.jupyter_server import CHROMIUM, CHROMIUM_ARGS, TOKEN, make_served
from translab.contract import ASSIGNMENT

from .grading import SETTLE_S, class_course, timed_autograde

PRESS_TIMEOUT_MS = 600_000


def formgrader_presses(students: int = 10, timeout: float = 3600) -> dict:
    """Seconds of ``students`` presses (each from the click to the success dialog) with and without the warm
    grader, and of one ``JOBS=1`` batch of the same complete submissions; null with a reason if it cannot run."""
    if not CHROMIUM.exists():
        return {"seconds": None, "reason": f"Chromium is missing ({CHROMIUM})"}
    with class_course(students=students, full_every=1) as (course, env, _):
        _, reason = timed_autograde(course, env, 1, timeout)  # the gradebook the presses find: every student known
        time.sleep(SETTLE_S)
        batch, reason = (timed_autograde(course, env, 1, timeout, keep_gradebook=True) if not reason
                         else (None, reason))
        if batch is None:
            return {"seconds": None, "reason": reason}
        names = sorted(path.name for path in (course / "submitted").iterdir())
        config = course / "nbgrader_config.py"
        shipped = config.read_text()
        config.write_text(shipped + "\nc.BatchAutogradeExporter.warm = False  # the bench's cold presses\n")
        cold = _press_each(course, env, names)
        config.write_text(shipped)
        try:
            warm = _press_each(course, env, names)
        finally:
            warm_grader.stop(course)
    after_start = warm[1:]
    # the first press starts the warm grader: the others, scaled to the class, are what a warm grader costs it
    seconds = round(sum(after_start) * len(warm) / len(after_start), 1)
    return {"students": students, "batch_jobs_1_s": batch, "seconds": seconds,
            "ratio_to_batch": round(seconds / batch, 2), "first_press_s": warm[0], "presses_s": warm,
            "median_press_s": statistics.median(after_start), "cold_s": round(sum(cold), 1), "cold_presses_s": cold,
            "cold_ratio_to_batch": round(sum(cold) / batch, 2),
            "pressed": "the formgrader's Autograde button in Chromium, each student in turn"}


def _press_each(course: Path, env: dict, names: list[str]) -> list[float]:
    """Press Autograde on each student's row of Manage Submissions in turn; each press's seconds."""
    from playwright.sync_api import sync_playwright
    times = []
    with make_served(course, "formgrader", env=env) as (base, _), sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(f"{base}/formgrader?token={TOKEN}")  # logs in
        page.goto(f"{base}/formgrader/manage_submissions/{ASSIGNMENT}")
        for name in names:
            row = page.locator("tr", has_text=name).first
            row.wait_for(timeout=PRESS_TIMEOUT_MS)
            time.sleep(SETTLE_S)
            started = time.perf_counter()
            row.locator(".autograde a").click()
            modal = page.locator("#success-modal, #error-modal").first
            modal.wait_for(state="visible", timeout=PRESS_TIMEOUT_MS)
            times.append(round(time.perf_counter() - started, 1))
            said = modal.inner_text()
            if "Successfully autograded" not in said:
                raise RuntimeError(f"the press for {name} failed: {said[-1000:]}")
            modal.locator("button.close").first.click()
            modal.wait_for(state="detached", timeout=PRESS_TIMEOUT_MS)
        browser.close()
    return times
