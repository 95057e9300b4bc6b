"""The course secret and each student's variant (``translab.variants``): the instructor's side.

    python -m grader variants                 # reports/variants.csv: every known student's code, configuration,
                                              # terms and counts (for grading the written question), shared counts
    python -m grader variants --student ID    # one student's code, e.g. for a student who joined after the release
    python -m grader variants --init          # create the course secret (make setup does it once)

The secret is 32 random bytes in ``.translab_secret`` at the course root (git-ignored, mode 0600), or the value
of ``TRANSLAB_COURSE_SECRET``.  A student's code is ``translab.variants.derive_code(secret, id)``: the release's
table, the hub and ``autograde`` all derive it the same way, so regrading gives the same variants as long as the
secret is the same.  Keep it with the gradebook: a new secret is a new variant for every student.
"""
from __future__ import annotations

import csv
import os
import secrets as random_bytes
from pathlib import Path

from translab import variants  # stdlib only: the nbgrader process and the sandbox's launcher import this

from grader.course import students
from grader.course.gradebook import open_gradebook

SECRET_ENV = "TRANSLAB_COURSE_SECRET"
SECRET_FILE = ".translab_secret"
SECRET_FILE_ENV = "TRANSLAB_COURSE_SECRET_FILE"  # where a hub reads it (hub/jupyterhub_config.py)
SECRET_ENVS = (SECRET_ENV, SECRET_FILE_ENV)
REPORT = Path("reports") / "variants.csv"           # the instructor's: codes with the counts they make right
CODES = Path("reports") / "variant_codes.csv"       # what each student is sent: their code and the line to run


class SecretMissing(RuntimeError):
    """No course secret: the message says where it is looked for and how to make one."""


def secret_path(root: Path) -> Path:
    return Path(root) / SECRET_FILE


def load_secret(root: Path) -> bytes | None:
    """The course secret (``TRANSLAB_COURSE_SECRET`` first), or None when the course has none."""
    if os.environ.get(SECRET_ENV):
        return os.environ[SECRET_ENV].encode()
    try:
        text = secret_path(root).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text.encode() or None


def require_secret(root: Path) -> bytes:
    secret = load_secret(root)
    if secret is None:
        raise SecretMissing(
            f"no course secret in {secret_path(root)} nor in {SECRET_ENV}: each student's variant is derived from it. "
            f"On the machine that made the release, it is in that course's {SECRET_FILE}: copy it here (mode 0600). "
            "For a new course, `python -m grader variants --init` makes one.")
    return secret


def create_secret(root: Path) -> tuple[Path, bool]:
    """Write a new secret unless the course has one (never replaced: it would change every variant)."""
    path = secret_path(root)
    if path.exists():
        return path, False
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="ascii") as file:
        file.write(random_bytes.token_hex(32) + "\n")
    return path, True


def code_for(student_id: str, root: Path) -> str:
    return variants.derive_code(require_secret(root), student_id)


def grading_code(student_id: str | None, root: Path) -> str | None:
    """The code a grading kernel and its checker get; None without a student or a secret (the check then says so)."""
    secret = load_secret(root) if student_id else None
    return variants.derive_code(secret, student_id) if secret is not None else None


def known_students(root: Path) -> list[str]:
    """The gradebook's students (``make students``) and those with a submission."""
    found = set(students(root))
    if (Path(root) / "gradebook.db").exists():
        with open_gradebook(Path(root) / "gradebook.db") as book:
            found |= {student.id for student in book.students}
    return sorted(found)


def rows(student_ids: list[str], root: Path) -> list[dict]:
    """One row per student: code, configuration, the terms of the written question and both counts."""
    from translab import params  # lazy: torch (1.2 s), which the batch that imports this module never needs
    secret = require_secret(root)
    table = []
    for sid in student_ids:
        mine = variants.from_code(variants.derive_code(secret, sid))
        lm = params.term_sizes(mine.ntoken, mine.nhid, mine.nlayers, mine.nhead, mine.dim_feedforward)
        classifier = params.term_sizes(mine.ntoken, mine.nhid, mine.nlayers, mine.nhead, mine.dim_feedforward,
                                       mine.nclasses)
        component = {term.key: term.component for term in params.TERMS}
        per_layer = {name: sum(size for key, size in lm.items() if component[key] == name)
                     for name in ("attention", "feed_forward", "layer_norm")}
        table.append({"student": sid, "code": variants.shown_code(mine.code), "ntoken": mine.ntoken, "nhid": mine.nhid,
                      "nlayers": mine.nlayers, "nhead": mine.nhead, "dim_feedforward": mine.dim_feedforward,
                      "nclasses": mine.nclasses, "embedding": lm["embedding"],
                      "attention (all layers)": per_layer["attention"],
                      "feed_forward (all layers)": per_layer["feed_forward"],
                      "layer_norms (all layers)": per_layer["layer_norm"],
                      "lm_head": lm["head.weight"] + lm["head.bias"],
                      "classifier_head": classifier["head.weight"] + classifier["head.bias"],
                      "n_params_lm": sum(lm.values()), "n_params_classifier": sum(classifier.values())})
    return table


def shared_counts(table: list[dict]) -> list[list[str]]:
    """Groups of students whose variants have the same two counts (nhead changes no count): copying between them
    cannot be seen from the numbers."""
    groups: dict[tuple[int, int], list[str]] = {}
    for row in table:
        groups.setdefault((row["n_params_lm"], row["n_params_classifier"]), []).append(row["student"])
    return [sorted(group) for group in groups.values() if len(group) > 1]


def use_code_line(code: str) -> str:
    return f"from translab import variants; variants.use_code(\"{variants.shown_code(variants.normal_code(code))}\")"


def _write_csv(path: Path, table: list[dict], fields: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as file:
        writer = csv.DictWriter(file, fieldnames=fields, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(table)


def write_report(root: Path, student_ids: list[str] | None = None) -> tuple[Path, list[dict]]:
    """``reports/variants.csv`` (with the counts: the instructor's only) and ``reports/variant_codes.csv`` (a
    mail merge's or an LMS message's source: each student's code and the line they run once, nothing else)."""
    table = rows(known_students(root) if student_ids is None else student_ids, root)
    _write_csv(Path(root) / REPORT, table, list(table[0]) if table else ["student", "code"])
    _write_csv(Path(root) / CODES, [{**row, "run once": use_code_line(row["code"])} for row in table],
               ["student", "code", "run once"])
    return Path(root) / REPORT, table


SHOWN_KEY = "variant_shown"  # the notebook metadata (``translab``) that nbgrader_plugins.record_variant_shown leaves


def variant_in_outputs(notebook) -> str | None:
    """The last variant code the submitted notebook's outputs show (``translab.variants.mine``), or None."""
    import re
    pattern = re.compile(re.escape(variants.SHOWN) + r"([0-9A-Z]{5}-?[0-9A-Z]{5})")
    found = None
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            text = output.get("text") or (output.get("data") or {}).get("text/plain") or ""
            text = "".join(text) if isinstance(text, list) else str(text)
            for match in pattern.finditer(text[:100_000]):
                found = variants.normal_code(match.group(1))
    return found


def mismatch(shown: str | None, derived: str | None) -> str | None:
    """Why a notebook whose outputs show ``shown`` needs a look, when the grader derives ``derived``; else None."""
    if shown is None or derived is None or shown == derived:
        return None
    return (f"the notebook ran with the variant {variants.shown_code(shown)}, but this course's secret gives this "
            f"student {variants.shown_code(derived)}, against which its counts were judged: the secret changed since "
            "the release (every student would show this), or the student ran it under another id")


def main(root: Path, student: str | None, init: bool) -> None:
    if init:
        path, made = create_secret(root)
        print(f"{'created' if made else 'kept'} the course secret {path}" + ("" if made else " (never replaced)"))
        return
    if student is not None:
        mine = variants.from_code(code_for(student, root))
        print(f"{student}: {variants.shown_code(mine.code)}: {mine.text()}\n  the student runs, once: "
              f"{use_code_line(mine.code)}")
        return
    path, table = write_report(root)
    print(f"{path}: the variants of {len(table)} student(s) (codes, configurations, the terms and counts of part 2: "
          f"yours only)\n{Path(root) / CODES}: what to send each student (their code and the line they run once)")
    for group in shared_counts(table):
        print(f"  same counts (copying between them cannot be seen from the numbers): {', '.join(group)}")
