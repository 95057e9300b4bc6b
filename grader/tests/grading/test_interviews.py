"""`make interviews` on a small class: who is picked and why (a copied pair, a classmate's counts in a written
answer, a notebook run under another configuration, a seeded sample), and each page's questions quote that
student's own lines, escaped."""
from __future__ import annotations

import csv
import html
import json
import re
import shutil
from pathlib import Path

import pytest

from grader import cli
from grader.course import GradingError
from grader.course import own_run
from grader.course.variants import rows
from grader.grading import interviews
from grader.grading.interview_questions import FALLBACK, MASK, PROBES
from translab import variants
from translab.paths import REPO_ROOT

NB1 = "01_mask_and_positional_encoding"
NB2 = "02_model_and_parameters"
SECRET = "a secret for the interview tests"
HOSTILE = "  # </code></pre><script>alert(1)</script>"

MASKS = {  # the same task, written as people write it
    "ana": "def generate_square_subsequent_mask(sz):\n"
           "    mask = torch.triu(torch.ones(sz, sz), diagonal=1).bool()" + HOSTILE + "\n"
           "    return torch.zeros(sz, sz).masked_fill(mask, float('-inf'))\n",
    "cem": "def generate_square_subsequent_mask(sz):\n    upper = torch.tril(torch.ones(sz, sz)) == 0\n"
           "    return torch.where(upper, float('-inf'), 0.0)\n",
    "dia": "def generate_square_subsequent_mask(sz):\n    out = torch.full((sz, sz), float('-inf'))\n"
           "    for i in range(sz):\n        out[i, : i + 1] = 0.0\n    return out\n",
    "eva": "def generate_square_subsequent_mask(sz):\n    return torch.triu(torch.full((sz, sz), -math.inf), 1)\n",
    "fay": "def generate_square_subsequent_mask(sz):\n"
           "    return torch.log(torch.ones(sz, sz).tril())\n",
}
ATTENTION = {
    "ana": "def scaled_dot_product_attention(q, k, v, mask=None):\n    d = q.shape[-1]\n"
           "    scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)\n"
           "    if mask is not None:\n        scores = scores + mask\n    w = torch.softmax(scores, dim=-1)\n"
           "    return torch.matmul(w, v), w\n",
    "cem": "def scaled_dot_product_attention(q, k, v, mask=None):\n"
           "    s = (q @ k.mT) * q.size(-1) ** -0.5\n    s = s if mask is None else s + mask\n"
           "    p = s.softmax(-1)\n    return p @ v, p\n",
}


def _submit(root: Path, student: str, answers: dict, written: dict | None = None, outputs: dict | None = None):
    """The released notebooks with ``answers`` ({(notebook, grade_id): source}) in their cells, ``written``
    answers in the markdown ones, and ``outputs`` ({notebook: text}) as a stream output of the first code cell."""
    folder = root / "submitted" / student / "transfer_learning"
    folder.mkdir(parents=True, exist_ok=True)
    for notebook in (NB1, NB2):
        data = json.loads((REPO_ROOT / "notebooks" / "transfer_learning" / f"{notebook}.ipynb").read_text())
        for cell in data["cells"]:
            grade_id = ((cell.get("metadata") or {}).get("nbgrader") or {}).get("grade_id")
            cell["source"] = {**(written or {}), **answers}.get((notebook, grade_id), cell["source"])
        if outputs and notebook in outputs:
            first = next(cell for cell in data["cells"] if cell["cell_type"] == "code")
            first["outputs"] = [{"output_type": "stream", "name": "stdout", "text": outputs[notebook]}]
        (folder / f"{notebook}.ipynb").write_text(json.dumps(data))


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    root = tmp_path_factory.mktemp("interviews")
    shutil.copytree(REPO_ROOT / "notebooks", root / "notebooks")
    (root / ".translab_secret").write_text(SECRET)
    root.joinpath(".translab_secret").chmod(0o600)
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("TRANSLAB_COURSE_SECRET", raising=False)
        counts = {row["student"]: row for row in rows(["ana", "dia"], root)}
        for student in ("ana", "cem", "dia", "eva", "fay"):
            answers = {(NB1, "mask_answer"): MASKS[student]}
            if student in ATTENTION:
                answers[(NB1, "attention_answer")] = ATTENTION[student]
            _submit(root, student, answers)
        # ben pasted ana's answers; dia's written answer quotes ana's count; eva's part 2 ran as someone else
        _submit(root, "ben", {(NB1, "mask_answer"): MASKS["ana"], (NB1, "attention_answer"): ATTENTION["ana"]})
        _submit(root, "dia", {(NB1, "mask_answer"): MASKS["dia"]},
                written={(NB2, "written_parameters"): f"My model has {counts['ana']['n_params_lm']:,} parameters."})
        other = variants.shown_code(variants.derive_code(SECRET.encode(), "somebody-else"))
        _submit(root, "eva", {(NB1, "mask_answer"): MASKS["eva"]},
                outputs={NB2: f"{variants.SHOWN}{other}, from the hub):\n  ntoken=..."})
        assert cli.main(["--root", str(root), "interviews", "--sample", "1"]) == 0
        yield root, counts


def _picked(root: Path) -> dict[str, str]:
    return {row["student"]: row["reasons"] for row in csv.DictReader(open(root / "reports" / "interviews.csv"))}


def test_the_students_the_submissions_point_to_are_picked_with_why(course):
    root, counts = course
    picked = _picked(root)
    assert "ana" in picked and "ben" in picked, picked
    assert "match ben's" in picked["ana"] and "match ana's" in picked["ben"]
    # dia's claim and dia's own, different, counts are both on the record, with whose figure it is
    claim = f"{counts['ana']['n_params_lm']:,}"
    assert f"states {claim}" in picked["dia"] and "ana" in picked["dia"]
    assert f"{counts['dia']['n_params_lm']:,} with the LM head" in picked["dia"]
    assert counts["dia"]["n_params_lm"] != counts["ana"]["n_params_lm"]
    assert "ran with the variant" in picked["eva"] and NB2 in picked["eva"]
    assert sum("picked at random" in why for why in picked.values()) == 1


def test_each_question_quotes_that_student_s_own_line(course):
    root, _ = course
    folder = root / "reports" / "interviews"
    stubs = interviews.similarity.released_stubs(root)
    for student in _picked(root):
        page = (folder / interviews.page_name(student)).read_text(encoding="utf-8")
        quoted = [html.unescape(line) for line in re.findall(r"<pre><code>(.*?)</code></pre>", page, re.S)]
        assert 1 <= len(quoted) <= interviews.QUESTIONS, (student, quoted)
        answers = "\n".join(interviews.similarity.answer_cells(path)[grade]
                            for path in sorted((root / "submitted" / student / "transfer_learning").glob("*.ipynb"))
                            for grade in interviews.similarity.answer_cells(path))
        for line in quoted:
            assert line in answers.splitlines() and line.strip() not in {
                given.strip() for stub in stubs.values() for given in stub.splitlines()}, (student, line)
    ana = (folder / "ana.html").read_text(encoding="utf-8")
    assert "diagonal=0" in ana  # the triu probe, asked about ana's own triu line


def test_a_hostile_answer_cannot_script_the_page(course):
    root, _ = course
    for page in (root / "reports" / "interviews").glob("*.html"):
        text = page.read_text(encoding="utf-8")
        assert "<script" not in text.lower() and "default-src 'none'" in text and "<html lang='en'>" in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in (root / "reports" / "interviews" / "ana.html").read_text()


def test_the_picks_are_the_same_on_every_run_and_the_page_index_links_them(course):
    root, _ = course
    first = (root / "reports" / "interviews.csv").read_text()
    assert cli.main(["--root", str(root), "interviews", "--sample", "1"]) == 0
    assert (root / "reports" / "interviews.csv").read_text() == first
    index = (root / "reports" / "interviews" / "index.html").read_text()
    assert all(f"href='{interviews.page_name(s)}'" in index for s in _picked(root))


def test_questions_follow_the_probes_and_fall_back_on_the_longest_own_line():
    import random
    stub = "def generate_square_subsequent_mask(sz):\n    # YOUR CODE HERE\n    raise NotImplementedError()\n"
    asked = interviews.questions_for({MASK: MASKS["ana"]}, {MASK: stub}, random.Random(0))
    assert [q.probe for q in asked] == [next(p for p in PROBES if p.task == MASK and p.pattern == r"\btriu\b")]
    assert asked[0].line_number == 2 and "triu" in asked[0].line
    plain = "def generate_square_subsequent_mask(sz):\n    a = 1\n    return torch.zeros(sz, sz) + a * 0\n"
    fallback = interviews.questions_for({MASK: plain}, {MASK: stub}, random.Random(0))
    assert fallback[0].probe is FALLBACK and fallback[0].line.strip().startswith("return torch.zeros")
    assert interviews.questions_for({MASK: stub}, {MASK: stub}, random.Random(0)) == []


def test_figures_are_read_however_they_are_written():
    assert own_run.figures("1,008,100 or 1008100 or 1 008 100, 0.8312, 12 and 3.5") == {"1008100", "0.8312"}


def test_a_class_without_submissions_says_what_to_do(tmp_path):
    with pytest.raises(GradingError, match="make collect"):
        interviews.pick(tmp_path, sample=3, seed=0)


def test_a_submitted_link_is_never_followed(tmp_path):
    """A submission that links to the instructor's solution (the corpus's `symlinks` case) must not put the solution
    into the similarity or interview pages as the student's answers."""
    from grader.course import read_notebook_json
    folder = tmp_path / "submitted" / "zoe" / "transfer_learning"
    folder.mkdir(parents=True)
    solution = REPO_ROOT / "solutions" / "transfer_learning" / f"{NB1}.ipynb"
    (folder / f"{NB1}.ipynb").symlink_to(solution)
    assert read_notebook_json(solution) is not None and read_notebook_json(folder / f"{NB1}.ipynb") is None
    assert interviews.similarity.answer_cells(folder / f"{NB1}.ipynb") == {}
