"""`make report` on a graded class: per task who passed, and the diagnosed misconceptions ranked by how many
students made them (see conftest.py for the course; two more students share bob's mistakes here)."""
from __future__ import annotations

import csv
import html
import json
import re
import shutil
from pathlib import Path

import pytest

from translab.contract import ASSIGNMENT

from conftest import MISTAKES, edit_notebook, run_grader, cell_scores

pytestmark = pytest.mark.slow
BOB = "12345"
MASK, COUNT = "01_mask_and_positional_encoding", "02_model_and_parameters"
# carol: bob's mask and a count with each LayerNorm as nhid; dave: bob's mask and bob's heads.  Notebooks 01 and 02.
LAYER_NORM_AS_NHID = ("def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):\n"
                      "    outputs = ntoken if nclasses is None else nclasses\n"
                      "    layer = 4 * (nhid * nhid + nhid) + 2 * nhid * dim_feedforward + dim_feedforward + nhid"
                      " + 2 * nhid\n"
                      "    return ntoken * nhid + nlayers * layer + nhid * outputs + outputs\n")
EXTRA = {"carol": {MASK: MISTAKES[MASK], COUNT: {"count_answer": LAYER_NORM_AS_NHID}},
         "dave": {MASK: MISTAKES[MASK], COUNT: {"heads_answer": MISTAKES[COUNT]["heads_answer"]}}}
HOSTILE = "<script>alert(1)</script>=HYPERLINK(\"http://x\")"


@pytest.fixture(scope="module")
def reported(course, tmp_path_factory):
    """A copy of the graded course, carol and dave graded into it, one of bob's messages made hostile, reported."""
    root = course
    copy = tmp_path_factory.mktemp("reported") / "course"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("reports", "*.sock", ".translab-*"))
    for student, notebooks in EXTRA.items():
        for stem, replacements in notebooks.items():
            edit_notebook(copy / "solutions" / ASSIGNMENT / f"{stem}.ipynb",
                  copy / "submitted" / student / ASSIGNMENT / f"{stem}.ipynb", replacements)
    run_grader(copy, "autograde", "--jobs", "2", *(f"--student={student}" for student in EXTRA))
    # a student controls what their code raises: the report must treat every message as data
    path = copy / "autograded" / BOB / ASSIGNMENT / f"{MASK}.ipynb"
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "mask_visible":
            for output in cell["outputs"]:
                if output.get("output_type") == "error":
                    output["evalue"] = HOSTILE + "\n" + output["evalue"]
    path.write_text(json.dumps(notebook), encoding="utf-8")
    output = run_grader(copy, "report")
    return copy, output


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_report_writes_its_three_files(reported):
    root, output = reported
    assert {p.name for p in (root / "reports").iterdir()} == {"tasks.csv", "misconceptions.csv", "report.html"}
    assert "most common: 3 x" in output


def test_tasks_count_who_passed_as_the_gradebook_says(reported):
    root, _ = reported
    tasks = {(row["notebook"], row["task"]): row for row in _rows(root / "reports" / "tasks.csv")}
    students = ["alice", "blank", BOB, "mallory", "carol", "dave"]
    scores = {student: cell_scores(root, student) for student in students}
    code_cells = [key for key, (_, _, is_code) in scores["alice"].items() if is_code]
    assert sorted(tasks) == sorted(code_cells)
    for key in code_cells:
        passed = sum(1 for s in students if key in scores[s] and scores[s][key][0] == scores[s][key][1])
        handed_in = sum((root / "submitted" / s / ASSIGNMENT / f"{key[0]}.ipynb").exists() for s in students)
        assert int(tasks[key]["passed"]) == passed, key
        assert int(tasks[key]["students"]) == 6 and int(tasks[key]["failed"]) == handed_in - passed, key
        assert int(tasks[key]["not_submitted"]) == 6 - handed_in, key  # not a failure: nothing to re-teach
    # by hand: only alice passes the mask (mallory calls translab); alice and dave the count (mallory's hard-coded
    # numbers fail the visible check too, which tries other sizes)
    assert tasks[(MASK, "mask_visible")]["passed"] == "1"
    assert tasks[(MASK, "mask_visible")]["top_misconception"] == "mask.ones"
    assert tasks[(COUNT, "count_visible")]["passed"] == "2"
    assert tasks[(COUNT, "heads_visible")]["top_misconception"] == "heads.last_position"
    assert tasks[(MASK, "mask_visible")]["diagnosed"] == "3"  # bob, carol, dave: blank and mallory name none


def test_misconceptions_are_ranked_by_the_students_who_made_them(reported):
    root, _ = reported
    rows = _rows(root / "reports" / "misconceptions.csv")
    real = [row for row in rows if row["kind"] == "misconception"]
    assert [row["rank"] for row in real] == [str(i) for i in range(1, len(real) + 1)]
    assert [int(row["students"]) for row in real] == sorted((int(row["students"]) for row in real), reverse=True)
    assert (real[0]["key"], real[0]["students"]) == ("mask.ones", "3")
    assert (real[1]["key"], real[1]["students"]) == ("heads.last_position", "2")
    assert set(real[0]["tasks"].split()) == {f"{MASK}/mask_visible", f"{MASK}/mask_hidden"}
    by_key = {row["key"]: row for row in rows}
    assert by_key["count.no_biases"]["students"] == "1"  # bob
    assert set(by_key["count.no_biases"]["tasks"].split()) == {f"{COUNT}/count_visible", f"{COUNT}/count_hidden",
                                                               f"{COUNT}/numbers_visible"}
    assert by_key["count.layer_norm_as_nhid|count.one_layer_norm"]["students"] == "1"  # carol
    assert "= only one LayerNorm per layer" in by_key["count.layer_norm_as_nhid|count.one_layer_norm"]["description"]
    assert by_key["loss.softmax_first"]["students"] == "1"
    # why the others failed, after the misconceptions and unranked
    others = {row["key"]: row for row in rows if row["kind"] == "other"}
    assert others["not_written"]["students"] == "1"  # blank
    assert others["calls_translab"]["students"] == "1"  # mallory
    assert not any("submitted" in key for key in others)  # mallory, carol and dave's 03 to 05: tasks.csv's not_submitted
    assert all(row["rank"] == "" for row in others.values())
    assert rows.index(real[-1]) < min(rows.index(row) for row in others.values())


def test_the_html_page_has_a_plot_no_script_and_escapes_what_students_wrote(reported):
    root, _ = reported
    page = (root / "reports" / "report.html").read_text(encoding="utf-8")
    assert re.search(r'<img [^>]*src="data:image/png;base64,[A-Za-z0-9+/=]{1000,}"', page)
    assert "<script" not in page.lower() and "javascript:" not in page.lower()
    assert not re.search(r"<[a-z]+[^>]*\son[a-z]+\s*=", page, flags=re.I)
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert re.search(r"<td>1</td><td>3</td><td>a &#x27;keep&#x27; mask of 1s[^<]*</td><td><code>mask.ones</code>", page)
    example = {row["key"]: row["example"] for row in _rows(root / "reports" / "misconceptions.csv")}["mask.ones"]
    assert example in (HOSTILE, "'" + HOSTILE) or example.startswith("the mask for sz=")


def test_the_page_says_where_the_last_batch_s_seconds_went(reported):
    """Issue 53: the phases of the last batch (carol and dave's), summed as the CSV holds them."""
    from grader.grading import phases
    root, _ = reported
    page = (root / "reports" / "report.html").read_text(encoding="utf-8")
    section = page.split("<h2>Where the grading time went</h2>", 1)[1]
    assert "The last batch (2 student(s)" in section
    for name, seconds in phases.read_totals(root / "autograded" / phases.PHASES_NAME).items():
        assert f"<tr><td>{html.escape(name)}</td><td>{seconds:,.1f} s</td>" in section, name
    assert section.index(phases.SETUP) < section.index("checks") < section.index("<td>all</td>")


def test_a_formula_in_a_student_message_is_defused_in_the_csv(reported, tmp_path):
    from grader.grading import report
    root, _ = reported
    path = root / "autograded" / BOB / ASSIGNMENT / f"{MASK}.ipynb"
    notebook = json.loads(path.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["evalue"] = "=HYPERLINK(\"http://x\")\n" + output["evalue"]
    shutil.copytree(root, tmp_path / "course", ignore=shutil.ignore_patterns("reports", "submitted", "feedback"))
    (tmp_path / "course" / "autograded" / BOB / ASSIGNMENT / f"{MASK}.ipynb").write_text(json.dumps(notebook))
    paths = report.write(tmp_path / "course")
    text = paths[1].read_text(encoding="utf-8")
    assert "'=HYPERLINK" in text and ",=HYPERLINK" not in text and "\n=HYPERLINK" not in text


def test_feedback_shows_failing_checks_without_tracebacks_or_paths(course):
    import html
    from translab.paths import REPO_ROOT
    root = course
    pages = sorted((root / "feedback" / BOB / ASSIGNMENT).glob("*.html"))
    assert pages
    shown = []
    for page in pages:
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8").split("<body", 1)[1]))
        for leak in ("Traceback", "most recent call last", "checks.py", "site-packages", str(REPO_ROOT), str(root)):
            assert leak not in text, f"{page.name} shows {leak!r}"
        shown += re.findall(r"CheckFailed: [^\n]*", text)
    assert "CheckFailed: the mask for sz=5 has 1 on and below the diagonal and 0 above: a mask of 1s." in shown
    assert any("reads the last position" in line for line in shown)


def test_report_without_a_gradebook_says_what_to_do(tmp_path):
    import subprocess
    import sys
    process = subprocess.run([sys.executable, "-m", "grader", "--root", str(tmp_path), "report"],
                             text=True, capture_output=True)
    assert process.returncode == 1
    assert "run `make autograde` first" in process.stderr
