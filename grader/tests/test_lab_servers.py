"""`make lab` (students) and `make formgrader` (instructors): real Jupyter servers on 127.0.0.1, asked over HTTP."""
from __future__ import annotations

import json
import re
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from conftest import course_copy
from grader.testing.jupyter_server import TOKEN, get as _get, make_served

pytestmark = pytest.mark.slow
INSTRUCTOR_PANELS = ("@jupyter/nbgrader:formgrader", "@jupyter/nbgrader:create-assignment",
                     "@jupyter/nbgrader:course-list")


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A copy of the course: what the two targets serve (the repository's own folders stay untouched)."""
    return course_copy(tmp_path_factory.mktemp("lab_course"), "solutions", "notebooks", "translab/jupyter_student")


@contextmanager
def served(course: Path, target: str):
    """``make <target>`` in the course copy; yields (base URL, the server's log so far) once it answers."""
    with ExitStack() as stack:
        try:
            base, log = stack.enter_context(make_served(course, target))
        except RuntimeError as error:
            pytest.fail(str(error))
        yield base, log.read_text()


def _page_config(html: str) -> dict:
    found = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', html, re.S)
    assert found, "no page config in /lab"
    return json.loads(found.group(1))


def test_make_lab_serves_the_notebooks_without_the_instructor_tools(course):
    with served(course, "lab") as (base, log):
        assert f"http://127.0.0.1:{base.rsplit(':', 1)[1]}/lab" in log, "make lab must print its URL on 127.0.0.1"
        status, html = _get(f"{base}/lab?token={TOKEN}")
        assert status == 200
        config = _page_config(html)
        disabled = set(config["disabledExtensions"])
        assert set(INSTRUCTOR_PANELS) <= disabled, disabled
        assert "@jupyter/nbgrader:validate-assignment" not in disabled, "students keep Validate"
        assert any(ext["name"] == "@jupyter/nbgrader" for ext in config["federated_extensions"])
        assert _get(f"{base}/formgrader?token={TOKEN}")[0] == 404, "no formgrader in the students' server"
        status, listing = _get(f"{base}/api/contents?token={TOKEN}")
        names = {item["name"] for item in json.loads(listing)["content"]}
        assert "01_mask_and_positional_encoding.ipynb" in names and "solutions" not in names


def test_make_formgrader_serves_the_course_root_with_a_working_formgrader(course):
    with served(course, "formgrader") as (base, log):
        # the URL it prints leads to the formgrader, not to JupyterLab's /lab (LabApp.default_url, not ServerApp's)
        assert f"http://127.0.0.1:{base.rsplit(':', 1)[1]}/formgrader?token=" in log, log[-3000:]
        assert "/lab?token=" not in log, log[-3000:]
        status, page = _get(f"{base}/formgrader?token={TOKEN}")
        assert status == 200, page[-2000:]
        assert "encountered an error" not in page and "not a subdirectory" not in page, page[-2000:]
        assert 'id="warning-exchange"' not in page, "the formgrader warns about a missing exchange"
        status, assignments = _get(f"{base}/formgrader/api/assignments?token={TOKEN}")
        assert status == 200 and "transfer_learning" in {a["name"] for a in json.loads(assignments)}
        status, html = _get(f"{base}/lab?token={TOKEN}")
        assert "@jupyter/nbgrader:formgrader" not in set(_page_config(html)["disabledExtensions"])
