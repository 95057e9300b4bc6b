"""`make demo-class` ends by saying what to open: every path it prints must be a file that is there, and the pattern
of the feedback pages must find each student's page (it once named ``feedback/<first student>/<student>/...``).
Here the grading commands are stood in for by what they write; ``test_outside_corpus`` checks the real run."""
from __future__ import annotations

import re
from pathlib import Path

from grader.testing import demo_class
from translab.contract import ASSIGNMENT

STUDENTS = ("outside1x00", "outside1x01")
WRITES = {"feedback": [f"feedback/{student}/{ASSIGNMENT}/01_mask_and_positional_encoding.html" for student in STUDENTS],
          "grades": ["grades.csv"], "report": ["reports/report.html"]}


def unopened(printed: str, students) -> list[str]:
    """The paths in ``printed`` that are not there; one with ``<student>`` or ``*`` must name files, for every
    student."""
    missing = []
    for path in re.findall(r"(?<![\w.])(/[^\s():]+)", printed):
        for named in ([path.replace("<student>", student) for student in students] if "<student>" in path else [path]):
            found = list(Path("/").glob(named.lstrip("/")))
            if not found or ("*" in named or "<student>" in path) and not all(page.is_file() for page in found):
                missing.append(named)
    return missing


def test_what_the_demo_class_says_to_open_is_there(tmp_path, monkeypatch, capsys):
    def released_course(root: Path) -> Path:
        root.mkdir(parents=True)
        return root

    def grader_command(course: Path, command: str, *args: str) -> None:
        for name in WRITES.get(command, []):
            (course / name).parent.mkdir(parents=True, exist_ok=True)
            (course / name).write_text("written", encoding="utf-8")

    monkeypatch.setattr(demo_class, "released_course", released_course)
    monkeypatch.setattr(demo_class, "grader_command", grader_command)
    monkeypatch.setattr(demo_class, "submit", lambda course, part: {student: {} for student in STUDENTS})
    assert demo_class.main(["--dest", str(tmp_path / "demo")]) == 0
    printed = capsys.readouterr().out
    assert printed.count(str(tmp_path / "demo")) >= 5, printed
    assert f"{tmp_path / 'demo'}/feedback/<student>/{ASSIGNMENT}/*.html" in printed, printed
    assert unopened(printed, STUDENTS) == [], printed
