"""One temporary copy of the course, graded once per test session.

Students (all in ``submitted/`` of the copy; two of them arrive through an LMS zip and ``collect``):

* ``alice``   the solution notebooks, submitted as they are (must get full marks);
* ``blank``   the released student notebooks, untouched (must get 0 on every test cell);
* ``bob``     the solutions with five typical mistakes (must lose exactly those cells);
* ``mallory`` notebooks 01, 02 and 06 only, answers that call translab or hard-code the visible numbers, and
  part 2's two numbers pasted from alice's notebook.
"""
from __future__ import annotations

import fcntl
import html
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from contextlib import contextmanager
from pathlib import Path

import nbformat
import pytest

from translab.contract import ASSIGNMENT
from grader.course import with_venv_bin
from grader.course.gradebook import cell_scores  # noqa: F401 - the tests import it from here
from grader.course.variants import SECRET_ENV
from grader.testing.accessibility import AxeMissing, axe_script
from grader.testing.jupyter_server import CHROMIUM, CHROMIUM_ARGS
from translab import diagnosis, variants
from translab.paths import REPO_ROOT

# The temporary courses' secret (grader.course.variants), inherited by every grading process the tests start.
os.environ.setdefault(SECRET_ENV, "translab-tests: the secret of the temporary courses")


def stated_numbers(student: str) -> str:
    """The answer cell of part 2's two numbers, right for ``student``'s variant (as a classmate would paste it)."""
    mine = variants.from_code(variants.derive_code(os.environ[SECRET_ENV].encode(), student))
    return (f"n_params_lm = {diagnosis.right_count(mine.config('lm'))}\n"
            f"n_params_classifier = {diagnosis.right_count(mine.config('classifier'))}\n")

# The five typical mistakes: notebook -> {answer cell: wrong source}; and the test cells that must fail.
MISTAKES = {
    "01_mask_and_positional_encoding": {
        "mask_answer": "def generate_square_subsequent_mask(sz):\n    return torch.tril(torch.ones(sz, sz))\n",
    },
    "02_model_and_parameters": {
        "heads_answer": (
            "class LanguageModelHead(nn.Module):\n"
            "    def __init__(self, nhid, ntoken):\n        super().__init__()\n        self.decoder = nn.Linear(nhid, ntoken)\n"
            "    def forward(self, hidden, src_key_padding_mask=None):\n        return self.decoder(hidden)\n\n"
            "class ClassificationHead(nn.Module):\n"
            "    def __init__(self, nhid, nclasses):\n        super().__init__()\n        self.decoder = nn.Linear(nhid, nclasses)\n"
            "    def forward(self, hidden, src_key_padding_mask=None):\n        return self.decoder(hidden[:, -1])\n"),
        "count_answer": (
            "def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):\n"
            "    outputs = ntoken if nclasses is None else nclasses\n"
            "    layer = 4 * nhid * nhid + 2 * nhid * dim_feedforward + 4 * nhid\n"
            "    return ntoken * nhid + nlayers * layer + nhid * outputs\n"),
        "numbers_answer": ("n_params_lm = count_parameters(mine.ntoken, mine.nhid, mine.nlayers, mine.nhead, mine.nhid)\n"
                           "n_params_classifier = count_parameters(mine.ntoken, mine.nhid, mine.nlayers, mine.nhead,"
                           " mine.nhid, nclasses=mine.nclasses)\n"),
    },
    "03_pretraining_and_generation": {
        "loss_answer": ("def lm_loss(logits, targets):\n"
                        "    probabilities = torch.softmax(logits, dim=-1)\n"
                        "    return nn.CrossEntropyLoss(ignore_index=PAD_ID)(probabilities.reshape(-1, probabilities.size(-1)), targets.reshape(-1))\n"),
    },
    "06_transfer_at_scale": {  # query and key swapped when packing in_proj_weight / in_proj_bias
        "mapping_answer": (
            "def convert_checkpoint(checkpoint, config):\n"
            "    state = {'word_embeddings.weight': checkpoint['embeddings.word_embeddings.weight'],\n"
            "             'position_embeddings.weight': checkpoint['embeddings.position_embeddings.weight'],\n"
            "             'token_type_embeddings.weight': checkpoint['embeddings.token_type_embeddings.weight'],\n"
            "             'embedding_norm.weight': checkpoint['embeddings.LayerNorm.weight'],\n"
            "             'embedding_norm.bias': checkpoint['embeddings.LayerNorm.bias']}\n"
            "    for i in range(config.num_hidden_layers):\n"
            "        theirs, ours = f'encoder.layer.{i}.', f'encoder.layers.{i}.'\n"
            "        for kind in ('weight', 'bias'):\n"
            "            state[f'{ours}self_attn.in_proj_{kind}'] = torch.cat(\n"
            "                [checkpoint[f'{theirs}attention.self.{part}.{kind}'] for part in ('key', 'query', 'value')])\n"
            "            state[f'{ours}self_attn.out_proj.{kind}'] = checkpoint[f'{theirs}attention.output.dense.{kind}']\n"
            "            state[f'{ours}norm1.{kind}'] = checkpoint[f'{theirs}attention.output.LayerNorm.{kind}']\n"
            "            state[f'{ours}linear1.{kind}'] = checkpoint[f'{theirs}intermediate.dense.{kind}']\n"
            "            state[f'{ours}linear2.{kind}'] = checkpoint[f'{theirs}output.dense.{kind}']\n"
            "            state[f'{ours}norm2.{kind}'] = checkpoint[f'{theirs}output.LayerNorm.{kind}']\n"
            "    return state\n"),
    },
}
MISTAKE_CELLS = {
    "01_mask_and_positional_encoding": {"mask_visible", "mask_hidden"},
    "02_model_and_parameters": {"heads_visible", "heads_hidden", "count_visible", "count_hidden", "numbers_visible"},
    "03_pretraining_and_generation": {"loss_visible", "loss_hidden"},
    "06_transfer_at_scale": {"mapping_visible", "mapping_hidden"},
}
# What bob's feedback must say about each mistake.
MISTAKE_MESSAGES = {
    "01_mask_and_positional_encoding": ["a mask of 1s"],
    "02_model_and_parameters": ["which is padding for shorter sentences", "without biases"],
    "03_pretraining_and_generation": ["softmax was applied before CrossEntropyLoss"],
    "06_transfer_at_scale": ["packed in the order (key, query, value)"],
}

CHEATS = {
    "01_mask_and_positional_encoding": {
        "mask_answer": ("from translab.model import generate_square_subsequent_mask as _reference\n\n"
                        "def generate_square_subsequent_mask(sz):\n    return _reference(sz)\n"),
        "pe_answer": "import translab.model\n\nclass PositionalEncoding(translab.model.PositionalEncoding):\n    pass\n",
    },
    "02_model_and_parameters": {
        "count_answer": ("def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):\n"
                         "    return 1_008_100 if nclasses is None else 988_402\n"),
    },
    "06_transfer_at_scale": {
        "mapping_answer": "from translab.bert import convert_checkpoint\n",
        "bert_count_answer": ("def count_bert_parameters(config, pooler=False):\n"
                              "    return 22_713_216 if pooler else 22_565_376\n"),
    },
}
CHEAT_FAILS = {
    "01_mask_and_positional_encoding": {"mask_visible", "mask_hidden", "pe_visible", "pe_hidden"},
    # the visible check tries other sizes too; the stated numbers are alice's, another configuration's counts
    "02_model_and_parameters": {"count_visible", "count_hidden", "numbers_visible"},
    "06_transfer_at_scale": {"mapping_visible", "mapping_hidden", "bert_count_visible", "bert_count_hidden"},
}


def hidden_test_lines() -> set[str]:
    """Every non-empty line of the solutions' hidden tests: none may show in feedback."""
    lines = set()
    for path in (REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            inside = False
            for line in cell.source.splitlines():
                if "BEGIN HIDDEN TESTS" in line:
                    inside = True
                elif "END HIDDEN TESTS" in line:
                    inside = False
                elif inside and line.strip():
                    lines.add(line.strip())
    return lines


def page_text(page: Path) -> str:
    """An HTML page's text as a reader sees it: tags removed, entities decoded."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def edit_notebook(source: Path, dest: Path, replacements: dict) -> None:
    notebook = nbformat.read(source, as_version=4)
    seen = set()
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in replacements:
            cell.source = replacements[grade_id]
            seen.add(grade_id)
    assert seen == set(replacements), f"cells {set(replacements) - seen} not found in {source.name}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, dest)


def _shows_variant(path: Path, student: str) -> None:
    """The notebook as run under ``student``'s id: its variant cell's output shows their code."""
    notebook = nbformat.read(path, as_version=4)
    code = variants.derive_code(os.environ[SECRET_ENV].encode(), student)
    cell = next(c for c in notebook.cells if c.cell_type == "code" and "variants.mine(" in c.source)
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout",
                                           text=f"{variants.SHOWN}{variants.shown_code(code)}, set by your course's "
                                                f"server):\n  ...\n")]
    nbformat.write(notebook, path)


def still_running(pids) -> set[int]:
    """Those of ``pids`` still running (a zombie has ended: it only waits for its parent to reap it)."""
    running = set()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                running.add(pid)
        except (OSError, IndexError):
            pass
    return running


def run_grader(root: Path, *args: str) -> str:
    process = subprocess.run([sys.executable, "-m", "grader", "--root", str(root), *args],
                             text=True, capture_output=True)
    output = process.stdout + process.stderr
    assert process.returncode == 0, f"grader.grading.batch {' '.join(args)} failed:\n{output[-5000:]}"
    assert "Exception while loading config" not in output, output[-3000:]
    return output


_RELEASED: dict[str, Path] = {}  # "base": where the session's released course goes; "course": it, once released


@pytest.fixture(scope="module", autouse=True)
def _no_warm_grader_left(tmp_path_factory):
    """The course grades on its warm grader by default (plain nbgrader autograde, the formgrader's button), which
    outlives the press by ten idle minutes and 0.6 GB: each module's courses have theirs stopped when it ends."""
    yield
    from grader.grading import warm_grader
    base = tmp_path_factory.getbasetemp()
    for depth in range(1, 5):  # the courses' roots lie a few folders down: no walk through their files
        for state in base.glob("*/" * depth + f"{warm_grader.FOLDER}/state.json"):
            warm_grader.stop(state.parent.parent)


@pytest.fixture(scope="session", autouse=True)
def _released_course_base(tmp_path_factory):
    _RELEASED["base"] = tmp_path_factory.mktemp("released")


def _released_course() -> Path:
    """The repository's course, released once per session (nbgrader generate_assignment: 7-8 s, which twenty
    temporary courses used to pay each); the release itself is tested on the session's graded ``course``."""
    if "course" not in _RELEASED:
        template = _RELEASED["base"] / "course"
        template.mkdir()
        shutil.copy(REPO_ROOT / "nbgrader_config.py", template)
        shutil.copytree(REPO_ROOT / "solutions", template / "solutions")
        run_grader(template, "release")
        _RELEASED["course"] = template
    return _RELEASED["course"]


def add_release(root: Path) -> Path:
    """The released notebooks and the gradebook (nbgrader's copy of the tests) of the repository's course, into a
    course at ``root`` whose solutions/ are the repository's; what ``python -m grader release`` writes there."""
    released = _released_course()
    shutil.copytree(released / "notebooks", root / "notebooks")
    shutil.copy(released / "gradebook.db", root / "gradebook.db")
    return root


def small_course(root: Path, cases: list[str] = ()) -> Path:
    """A course with the assignment released and corpus ``cases`` submitted (grader.testing.corpus)."""
    from grader.testing import corpus
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root)
    shutil.copytree(REPO_ROOT / "solutions", root / "solutions")
    add_release(root)
    if cases:
        corpus.build(root / "submitted", root, list(cases))
    return root


# What the formgrader's buttons do in the server's process: the course's config, nbgrader's API, one call.
FORMGRADER_CALL = """
import json, sys
from traitlets.config.loader import PyFileConfigLoader
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
config = PyFileConfigLoader("nbgrader_config.py", path=".").load_config()
api = NbGraderAPI(CourseDirectory(config=config), config=config)
print(json.dumps(getattr(api, sys.argv[1])(*sys.argv[2:])))
"""


def venv_env(**extra: str) -> dict:
    """This environment with the venv's bin/ first on PATH, as nbgrader needs it (it runs ``alembic`` from PATH)."""
    return {**os.environ, "PATH": with_venv_bin(os.environ.get("PATH", "")), **extra}


def press_formgrader_button(root: Path, call: str, *args: str, env: dict | None = None) -> dict:
    """nbgrader's ``NbGraderAPI.<call>(*args)`` as the formgrader's handler runs it: its dict (success, log, error)."""
    env = env or venv_env()
    done = subprocess.run([sys.executable, "-c", FORMGRADER_CALL, call, *args], cwd=root, capture_output=True,
                          text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def course(tmp_path_factory):
    """The graded temporary course's root (where each second of its grading went: autograded/autograde_phases.csv).
    Built once per run: under pytest-xdist (`make test`) the first worker to need it builds it in the run's shared
    folder while the others wait, instead of each grading the class again (a minute of both cores)."""
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the run's folder, above each worker's own
    root = shared / "graded-course"
    with open(shared / "graded-course.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (shared / "graded-course.done").exists():
            shutil.rmtree(root, ignore_errors=True)  # a worker's build that failed
            root.mkdir()
            _grade_the_class(root)
            (shared / "graded-course.done").touch()
    return root


def _grade_the_class(root: Path) -> None:
    """Release the course at ``root``, collect an LMS download (alice's and bob's work) and two more students, grade
    them, give feedback and write grades.csv."""
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root)
    shutil.copytree(REPO_ROOT / "solutions", root / "solutions")
    run_grader(root, "release")

    solutions = root / "solutions" / ASSIGNMENT
    released = root / "notebooks" / ASSIGNMENT
    submitted = root / "submitted"
    shutil.copytree(released, submitted / "blank" / ASSIGNMENT)
    lms = root / "lms_download"
    lms.mkdir()
    for path in sorted(solutions.glob("*.ipynb")):
        # alice: a flat, Canvas-style file name; bob: a Moodle-style folder per student
        shutil.copy(path, lms / f"alice_4711_9001_{path.name}")
        edit_notebook(path, lms / "Bob Smith_12345_assignsubmission_file_" / path.name, MISTAKES.get(path.stem, {}))
    CHEATS["02_model_and_parameters"]["numbers_answer"] = stated_numbers("alice")  # pasted from a classmate
    for stem, replacements in CHEATS.items():
        edit_notebook(solutions / f"{stem}.ipynb", submitted / "mallory" / ASSIGNMENT / f"{stem}.ipynb", replacements)
    _shows_variant(submitted / "mallory" / ASSIGNMENT / "02_model_and_parameters.ipynb", "alice")  # ran as alice
    archive = root / "download.zip"
    with zipfile.ZipFile(archive, "w") as handle:
        for path in sorted(lms.rglob("*.ipynb")):
            handle.write(path, path.relative_to(lms))
    shutil.rmtree(lms)
    run_grader(root, "collect", str(archive))

    run_grader(root, "autograde", "--jobs", "2")  # two at a time, as the Makefile's JOBS=2: one alone keeps a core idle
    _grade_by_hand(root, BOB_ID, "04_transfer_experiment", "written_interpretation")  # the others stay ungraded:
    run_grader(root, "feedback", "--force")  # test_feedback_waits_for_manual_grades, test_feedback_shows_each_model_...
    run_grader(root, "grades")


BOB_ID = "12345"  # bob's Moodle participant number, the id `collect` gives him


def _grade_by_hand(root: Path, student: str, notebook: str, grade_id: str) -> None:
    """What the formgrader's Manual Grading does on save: full marks for one written answer."""
    from grader.course.gradebook import open_gradebook
    with open_gradebook(root / "gradebook.db") as gradebook:
        grade = gradebook.find_grade(grade_id, notebook, ASSIGNMENT, student)
        grade.manual_score, grade.needs_manual_grade = grade.max_score, False
        gradebook.db.commit()


# ----------------------------------------------------------------- headless Chromium, for the browser tests

INSTALL_CHROMIUM = "sudo apt-get update && sudo apt-get install -y chromium"
ARTIFACTS = Path(os.environ.get("TRANSLAB_TEST_ARTIFACTS", REPO_ROOT / "test-artifacts"))


@pytest.fixture(scope="module")
def chromium() -> Path:
    """Debian's Chromium (Playwright's own download does not work here); skips without it, fails under CI."""
    if not CHROMIUM.exists():
        message = f"Chromium is missing ({CHROMIUM}): run `{INSTALL_CHROMIUM}` (or `make browser` as root)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


@pytest.fixture(scope="module")
def axe() -> None:
    """The pinned axe-core (``make axe``) for the accessibility audits: missing where npm is, a failure; on a machine
    without npm, a skip."""
    try:
        axe_script()
    except AxeMissing as missing:
        if shutil.which("npm") or os.environ.get("CI") == "true":
            pytest.fail(str(missing))
        pytest.skip(str(missing))


@pytest.fixture(scope="module")
def browser(chromium):
    from playwright.sync_api import sync_playwright
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(chromium), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@contextmanager
def page_of(browser, name: str):
    """A page that cannot reach beyond 127.0.0.1 (CDNs included: offline, as a grading server may be); on a
    failed step, a screenshot ``ARTIFACTS/<name>.png``, whose path the failure prints."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    context.route(re.compile(r"^https?://(?!127\.0\.0\.1[:/])"), lambda route: route.abort())
    page = context.new_page()
    try:
        yield page
    except Exception:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / f"{name}.png"
        page.screenshot(path=str(shot), full_page=True)
        print(f"\nscreenshot of the failing step: {shot}")
        raise
    finally:
        context.close()


# ----------------------------------------------------------------- course copies the Makefile can serve

MAKE_FILES = ("Makefile", "nbgrader_config.py", "pyproject.toml", "constraints.txt", "grader/skip_iri_syntax.pth")


def course_copy(root: Path, *folders: str) -> Path:
    """A course at ``root`` that `make` targets run in: the Makefile and what it depends on, their times kept (make
    must not reinstall the venv), and ``folders`` of the repository."""
    root.mkdir(parents=True, exist_ok=True)
    for name in MAKE_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO_ROOT / name, root / name)
    for name in folders:
        shutil.copytree(REPO_ROOT / name, root / name)
    return root


def submission_id(root: Path, student: str, notebook: str) -> str:
    """The gradebook id of a student's submitted notebook: its formgrader page is /formgrader/submissions/<id>."""
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return gradebook.find_submission_notebook(notebook, "transfer_learning", student).id
