"""`make lab` really serves the six student notebooks, with nbgrader's extension and formgrader."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest

from translab.paths import REPO_ROOT
from grader.testing import free_port

pytestmark = pytest.mark.slow
NOTEBOOKS = sorted(p.name for p in (REPO_ROOT / "notebooks" / "transfer_learning").glob("*.ipynb"))


@pytest.fixture(scope="module")
def lab_url():
    port = free_port()
    process = subprocess.Popen(["make", "--no-print-directory", "lab", f"PORT={port}"], cwd=REPO_ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    try:
        deadline = time.time() + 90
        url = None
        while time.time() < deadline and url is None:
            line = process.stdout.readline()
            if not line:
                break
            lines.append(line)
            match = re.search(rf"(http://(?:127\.0\.0\.1|localhost):{port}/lab\?token=\w+)", line)
            url = match.group(1) if match else None
        assert url, "`make lab` printed no URL:\n" + "".join(lines[-30:])
        base, token = url.split("/lab?token=")
        while True:  # the URL is printed a moment before the socket accepts connections
            try:
                _get(f"{base}/api/status?token={token}")
                break
            except OSError:
                assert time.time() < deadline, "`make lab` printed its URL but never answered on it"
                time.sleep(0.5)
        yield url
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def _get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=30) as response:
        return response.status, response.read()


def test_lab_lists_the_six_notebooks(lab_url):
    assert len(NOTEBOOKS) == 6
    base, token = lab_url.split("/lab?token=")
    status, body = _get(f"{base}/api/contents/?token={token}")
    assert status == 200
    assert sorted(item["name"] for item in json.loads(body)["content"]) == NOTEBOOKS


def test_lab_page_is_served_and_the_formgrader_is_not(lab_url):
    """Students get the lab without nbgrader's instructor tools (`make formgrader` serves those:
    grader/tests/test_lab_servers.py)."""
    base, token = lab_url.split("/lab?token=")
    assert _get(lab_url)[0] == 200
    with pytest.raises(urllib.error.HTTPError) as refused:
        _get(f"{base}/formgrader?token={token}")
    assert refused.value.code == 404


def test_nbgrader_labextension_is_enabled():
    listing = subprocess.run([str(REPO_ROOT / ".venv" / "bin" / "jupyter"), "labextension", "list"],
                             capture_output=True, text=True)
    text = listing.stdout + listing.stderr
    assert re.search(r"@jupyter/nbgrader v\S+ .*enabled", text), text[-2000:]
