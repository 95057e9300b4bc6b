"""``make lab`` or ``make formgrader`` in a course copy, as a context that yields the server's address once it
answers, and the Chromium that drives it: for the tests of the servers and the browser, and the bench's presses of
the formgrader's buttons."""
from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from translab.paths import REPO_ROOT

from . import free_port

TOKEN = "translab-test-token"
CHROMIUM = Path("/usr/bin/chromium")  # Debian's (Playwright's own download does not work here)
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--disable-quic"]


def get(url: str) -> tuple[int, str]:
    """(status, body) of a GET, HTTP errors included."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", errors="replace")


@contextmanager
def make_served(course: Path, target: str, wait_s: float = 120, env: dict | None = None):
    """``make <target>`` in ``course`` (with this checkout's venv, ``env`` or this environment); yields (base URL,
    its log file) once it answers (RuntimeError with the log's end if it exits or does not answer in ``wait_s``);
    ends its whole process group."""
    port = free_port()
    log = course / f"{target}.log"
    env = {**(env or os.environ), "JUPYTER_TOKEN": TOKEN}
    with open(log, "w") as out:
        process = subprocess.Popen(["make", "-s", target, f"PORT={port}", f"VENV={REPO_ROOT / '.venv'}"],
                                   cwd=course, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait_s
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"make {target} exited {process.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if get(f"{base}/api/status?token={TOKEN}")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"make {target} did not answer in {wait_s:.0f} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.5)
        yield base, log
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
