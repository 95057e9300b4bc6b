"""``make student-release``: what students get holds nothing of the grader's and works on its own."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch

from grader.course import student_release, withheld
from grader.testing.completed import with_solutions
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT
from translab.references import NAMES

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not

ROSTER = ("alice", "student02")  # students of the course, none of whose codes may be in a release
SECRET_MARKERS = ("BEGIN HIDDEN TESTS", "BEGIN SOLUTION", "### BEGIN", "split=\"hidden\"")


@pytest.fixture(scope="module")
def stages(tmp_path_factory) -> dict[int, Path]:
    """The release of each stage: part N open (``make student-release UNTIL=N``), and everything (LAST_PART + 1)."""
    made = {}
    for until in range(1, withheld.LAST_PART + 2):
        dest = tmp_path_factory.mktemp(f"students-until-{until}") / "translab"
        written = student_release.write(dest, until=until)
        assert written and all(dest in path.parents for path in written)
        made[until] = dest
    return made


@pytest.fixture(scope="module")
def release(stages) -> Path:
    """The release of the second week: part 1's reference code in it, part 2 open."""
    return stages[2]


def test_every_result_a_notebook_or_translab_reads_ships_with_the_release():
    """Issue 90: notebook 03 read results/decoding.json, which no release shipped, and said "ask your instructor"."""
    read = set()
    for path in [*(REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"), *(REPO_ROOT / "translab").rglob("*.py")]:
        read |= set(re.findall(r'RESULTS_DIR\s*/\s*\\?"([\w.]+)\\?"', path.read_text(encoding="utf-8")))
    assert {"decoding.json", "transfer.png", "bench.json"} <= read, read
    assert read <= set(student_release.RESULTS), f"read but never shipped: {read - set(student_release.RESULTS)}"


def test_the_release_holds_no_solutions_gradebook_grader_or_hidden_cases(release):
    names = {path.relative_to(release).parts[0] for path in release.rglob("*")}
    assert names == {"notebooks", "translab", "references", "artifacts", "results", "data", "Makefile",
                     "README.md", "pyproject.toml", "constraints.txt"}, names
    assert not list(release.rglob("*.db")) and not list(release.rglob("nbgrader_config.py"))
    for name in NAMES:
        reference = torch.load(release / "references" / f"{name}.pt", weights_only=True)
        assert set(reference) == {"visible"}, f"{name}.pt must carry the visible cases only"
    for path in [*release.rglob("*.py"), *release.rglob("*.ipynb"), *release.rglob("*.md")]:
        text = path.read_text(encoding="utf-8")
        leaks = [marker for marker in SECRET_MARKERS if marker in text and path.suffix == ".ipynb"]
        assert not leaks, f"{path.relative_to(release)} holds {leaks}"
        assert "MASK_SIZES" not in text and "PARAM_CONFIGS" not in text, \
            f"{path.relative_to(release)} holds the reference builders (hidden configurations)"
    pyproject = (release / "pyproject.toml").read_text(encoding="utf-8")
    assert 'packages = ["translab", "translab.checks", "translab.diagnosis"]' in pyproject
    assert "playwright" not in pyproject
    assert "pytest" not in pyproject and '"nbgrader>=' in pyproject and "==" not in pyproject, "ranges, not pins"
    assert (release / "translab" / "jupyter_student" / "labconfig" / "page_config.json").exists()


def test_every_training_cell_of_the_release_finds_its_measured_time(stages):
    """Issue 49: without results/bench.json in the release every training cell printed "no time measured"."""
    from translab import workload
    release = stages[withheld.LAST_PART + 1]
    cells = [found for path in sorted((release / "notebooks").rglob("*.ipynb"))
             for cell in nbformat.read(path, as_version=4).cells
             for found in re.findall(r'budget\.estimate\("(\d\d)", "([^"]+)"\)', cell.source)]
    assert {part for part, _ in cells} == set(workload.TRAINS), cells
    script = ("import sys; from translab.budget import FULL; "
              f"sys.exit(0 if all(FULL.estimate(part, cell) for part, cell in {cells!r}) else 1)")
    done = subprocess.run([sys.executable, "-c", script], cwd=release, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(release), "TRANSLAB_HOME": str(release)})
    assert done.returncode == 0 and "no time measured" not in done.stdout, done.stdout + done.stderr


def test_no_students_code_nor_the_secret_can_be_found_in_the_release(release):
    """Issue 48: a table of codes keyed by anything computable from an id (a hash of it) let any student look up
    a classmate's code; the release now holds no student's code in any form, nor the secret."""
    from grader.course.variants import load_secret
    from translab import variants
    secret = load_secret(REPO_ROOT)
    codes = {sid: variants.derive_code(secret, sid) for sid in ROSTER}
    for path in release.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert secret not in data, f"{path.relative_to(release)} holds the course secret"
            for sid, code in codes.items():
                assert code.encode() not in data and variants.shown_code(code).encode() not in data, \
                    f"{path.relative_to(release)} holds {sid}'s variant code"


def test_the_release_makefile_starts_a_student_lab(release):
    dry = subprocess.run(["make", "-n", "lab", f"VENV={REPO_ROOT / '.venv'}"], cwd=release, capture_output=True,
                         text=True, timeout=60)
    assert dry.returncode == 0, dry.stderr
    command = dry.stdout.replace("\\\n", " ")
    assert "-m translab lab --notebooks notebooks/transfer_learning" in command, command


def test_the_library_never_imports_the_grader_or_nbgrader():
    import ast
    for path in sorted((REPO_ROOT / "translab").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported = {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                    for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module and node.level == 0}
        assert not imported & {"grader", "nbgrader", "experiments"}, f"translab/{path.name} imports {imported}"


def test_refuses_a_folder_that_is_not_empty_or_inside_the_course(tmp_path):
    (tmp_path / "x").write_text("mine")
    with pytest.raises(student_release.ReleaseError, match="not empty"):
        student_release.write(tmp_path)
    assert (tmp_path / "x").read_text() == "mine"
    with pytest.raises(student_release.ReleaseError, match="inside the course"):
        student_release.write(REPO_ROOT / "somewhere")
    assert not (REPO_ROOT / "somewhere").exists()


NOTEBOOKS = sorted(path.stem for path in (REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"))


def _definition(path: Path, name: str):
    import ast
    return withheld.definitions(ast.parse(path.read_text(encoding="utf-8")))[name]


def test_each_stage_holds_back_the_open_parts_answers_and_ships_their_notebooks_only(stages):
    """In the release for part N: no body or docstring of translab's answers to parts N and later (the course's
    own code of each, statement after statement, is looked for in every module), no bytecode, each stub raising NotReleased when called; the
    reference code of earlier parts and the notebooks up to N are there."""
    import ast
    for until, release in stages.items():
        shipped = sorted(p.stem for p in (release / "notebooks" / ASSIGNMENT).glob("*.ipynb"))
        assert shipped == NOTEBOOKS[:until], (until, shipped)
        assert not list(release.rglob("*.pyc")) and not list(release.rglob("__pycache__"))
        texts = {path: path.read_text(encoding="utf-8") for path in (release / "translab").rglob("*.py")}
        dumps = {path: ast.dump(ast.parse(text)) for path, text in texts.items()}  # once per file, not per answer
        for part, answers in withheld.HELD.items():  # the answers and the code that holds one
            for entry in answers:
                module, name = entry.split(":")
                ours = _definition(REPO_ROOT / "translab" / withheld.module_file(module), name)
                theirs = _definition(release / "translab" / withheld.module_file(module), name)
                body = [ast.dump(node) for node in ours.body]
                if part < until:  # released: the same code
                    assert [ast.dump(node) for node in theirs.body] == body, (until, entry)
                    continue
                assert "NotReleased" in ast.unparse(theirs) and ast.get_docstring(theirs) is None, (until, entry)
                docstring = ast.get_docstring(ours)
                code = ", ".join(body[1 if docstring else 0:])  # the body, statement after statement
                for path, text in texts.items():
                    assert code not in dumps[path], f"stage {until}: {path.name} holds code of {entry}"
                    assert not docstring or docstring.splitlines()[0] not in text, \
                        f"stage {until}: {path.name} holds the docstring of {entry}"
    called = subprocess.run([sys.executable, "-c", "from translab import model\ntry:\n    model.Model(None, None)\n"
                             "except Exception as error:\n    print(type(error).__name__, error)"],
                            env={**os.environ, "PYTHONPATH": str(stages[2])}, cwd=stages[2].parent, capture_output=True,
                            text=True, timeout=120)
    assert called.stdout.startswith("NotReleased translab.model.Model is translab's answer to part 2"), called


BEHAVES = """
import ast, inspect, json, sys, torch
from translab import attention, generation, stages
from translab.checks import part1
held = {}
for module, name in [("attention", "split_heads"), ("attention", "merge_heads"),
                     ("attention", "cached_attention_step"), ("checks.part1", "_attend"), ("checks.part1", "_mha")]:
    function = getattr(sys.modules["translab." + module], name)
    try:
        function(*[None] * sum(p.default is p.empty for p in inspect.signature(function).parameters.values()))
        held[name] = "ran"
    except stages.NotReleased as error:
        held[name] = "NotReleased"
    except Exception as error:
        held[name] = type(error).__name__
loops = [type(node).__name__ for node in ast.walk(ast.parse(inspect.getsource(generation.sample_generate_ids)))
         if isinstance(node, (ast.For, ast.While, ast.comprehension))]

def my_greedy(model, prompt_ids, max_new_tokens=30, eos_id=3):
    ids = list(prompt_ids)
    for _ in range(max_new_tokens):
        ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))
    return ids[len(prompt_ids):]
def my_sampler(logits, temperature=1.0, top_k=None, top_p=None, generator=None):
    return torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(-1)
drawn = generation.sample_generate_ids(torch.nn.Embedding(5, 5), [1], 4, generator=torch.Generator().manual_seed(0),
                                       sampler=my_sampler, loop=my_greedy)
print(json.dumps({"held": held, "loops": loops, "drawn": len(drawn)}))
"""


def test_the_code_that_holds_an_answer_is_held_back_with_it(stages):
    """Issue 90: week 1's release shipped multi-head attention's pieces, the KV cache's step (a multi-head attention
    for one token) and the checks' own variants of attention; week 3's sampling loop was the greedy answer with a
    sampler.  Called in each week's release, they raise NotReleased while part 1 is open and run after; sampling
    holds no loop and draws with the loop it is given (the student's, in notebook 03)."""
    for until in (1, 2, 3):
        run = subprocess.run([sys.executable, "-c", BEHAVES], env={**os.environ, "PYTHONPATH": str(stages[until])},
                             cwd=stages[until].parent, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        found = json.loads(run.stdout.strip().splitlines()[-1])
        assert found["loops"] == [] and found["drawn"] == 4, (until, found)
        if until == 1:
            assert set(found["held"].values()) == {"NotReleased"}, found
        else:  # released: called with nothing, they fail as any function does, never as a stub
            assert "NotReleased" not in found["held"].values(), (until, found)


def test_the_answers_that_are_data_are_held_back_too(stages):
    """Part 2's formula and part 6's mapping are facts more than code: in their weeks' releases, no module writes
    the count's coefficients down or names a checkpoint tensor beside the parameter it fills (the checks size the
    terms by inspection and find the sources by digest; their hints are rendered from what they find)."""
    import re
    from translab import bert, diagnosis
    config, _ = bert.load_checkpoint()
    pairs = {(re.sub(r"^encoder\.layer\.\d+\.", "", keys[0]).rsplit(".", 1)[0],
              re.sub(r"^encoder\.layers\.\d+\.", "", name).rsplit(".", 1)[0])
             for name, keys in bert.weight_mapping(config).items() if len(keys) == 1}
    pairs = {(theirs, ours) for theirs, ours in pairs if ours not in theirs}  # not word_embeddings: same name
    assert ("attention.output.LayerNorm", "norm1") in pairs and len(pairs) == 6, pairs
    for until, release in stages.items():
        texts = {path.name: path.read_text(encoding="utf-8") for path in (release / "translab").rglob("*.py")}
        if until <= 6:
            for name, text in texts.items():
                for line in text.splitlines():
                    assert not any(theirs in line and re.search(rf"\b{re.escape(ours)}\b", line)
                                   for theirs, ours in pairs), f"stage {until}: {name}: {line}"
        if until <= 2:
            right = {name: value for name, value in diagnosis.right_coefficients().items() if value}
            assert right == {"ntoken*nhid": 1, "nlayers*nhid*nhid": 4, "nlayers*nhid*dim_feedforward": 2,
                             "nlayers*dim_feedforward": 1, "nlayers*nhid": 9, "nhid*outputs": 1, "outputs": 1}
            for name, text in texts.items():
                for monomial, value in right.items():
                    assert not re.search(rf"\b{value}\s*\*\s*{re.escape(monomial)}\b", text), (until, name, monomial)
                assert "3 * nhid" not in text and "(nhid + 1)" not in text, f"stage {until}: {name}"
        if until not in (2, 3):  # the formula is a stub up to week 2 and released from week 3: the two sides suffice
            continue
        run = subprocess.run([sys.executable, "-c", "from translab import diagnosis, params, stages\n"
                              "print(diagnosis.right_count(dict(ntoken=100, nhid=200, nlayers=4, nhead=2, "
                              "dim_feedforward=200, nclasses=None)), stages.withheld(params.term_sizes), "
                              "{len(entry) for entry in diagnosis.MONOMIALS.values()})"],
                             env={**os.environ, "PYTHONPATH": str(release)}, cwd=release.parent, capture_output=True,
                             text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        # the diagnosis still counts (by inspection); the formula is a stub; the monomials carry no coefficient
        assert run.stdout.split() == ["1008100", str(until <= 2), "{2}"], (until, run.stdout)


def test_a_stage_that_does_not_exist_is_refused_before_anything_is_written(tmp_path):
    for until in (0, withheld.LAST_PART + 2):
        with pytest.raises(student_release.ReleaseError, match="UNTIL="):
            student_release.write(tmp_path / f"until-{until}", until=until)
        assert not (tmp_path / f"until-{until}").exists()


STUDENT_RUN = """
import sys
import nbformat
from nbclient import NotebookClient
for path in sys.argv[1:]:
    notebook = nbformat.read(path, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="student", allow_errors=True).execute()
    nbformat.write(notebook, path)
"""


def _errors(path: Path) -> list[str]:
    return [cell.metadata.get("nbgrader", {}).get("grade_id") or cell.source[:60]
            for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
            for output in cell.get("outputs", []) if output.output_type == "error"]


# make test runs week 2 (part 1's reference code under part 2: about 45 s); make test-exhaustive every week
@pytest.mark.parametrize("until", [pytest.param(until, marks=() if until == 2 else pytest.mark.exhaustive)
                                   for until in range(1, withheld.LAST_PART + 1)])
def test_a_student_of_week_n_in_a_fresh_venv_gets_full_marks(stages, tmp_path, until):
    """Issue 49: week N's release as a student has it.  Its wheel installed by pip in a fresh venv that holds only
    what the wheel declares (``grader.testing.student_venv``: no course package, no grader, no editable translab),
    the solutions pasted into notebooks 1 to N and run there in a kernel of that venv (outside the release, no
    TRANSLAB_HOME, at the grading budget), then handed in: the course's autograde gives every autograded cell of
    them full marks.  Part N's notebook as released fails its visible checks in the same venv: they can fail."""
    from conftest import cell_scores, small_course, run_grader
    from grader.testing import student_venv
    from grader.course.variants import code_for
    release = stages[until]
    python = student_venv.create(tmp_path / "venv", student_release.build_wheel(release, tmp_path / "dist"))
    kernels, home, work, config = (tmp_path / name for name in ("jupyter", "home", "work", "config"))
    for folder in (home, work, config, kernels / "kernels" / "student"):
        folder.mkdir(parents=True)
    (kernels / "kernels" / "student" / "kernel.json").write_text(json.dumps({
        "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "the student's venv", "language": "python"}))
    (config / "student.json").write_text(json.dumps({"code": code_for("alice", REPO_ROOT)}), encoding="utf-8")
    names = NOTEBOOKS[:until]
    for name in names:
        released = release / "notebooks" / ASSIGNMENT / f"{name}.ipynb"
        nbformat.write(with_solutions(released, REPO_ROOT / "solutions" / ASSIGNMENT / f"{name}.ipynb"),
                       work / f"{name}.ipynb")
    blank = work / "blank" / f"{names[-1]}.ipynb"
    blank.parent.mkdir()
    untouched = nbformat.read(release / "notebooks" / ASSIGNMENT / f"{names[-1]}.ipynb", as_version=4)
    untouched.cells.insert(0, nbformat.v4.new_code_cell("import translab; print(translab.__file__)"))
    nbformat.write(untouched, blank)
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("TRANSLAB_", "PYTHONPATH", "VIRTUAL_ENV", "JUPYTER", "XDG_"))}
    # the data `python -m translab setup` fetches (its fetch is tested in tests/test_local.py), read where it lies
    env.update(HOME=str(home), JUPYTER_PATH=str(kernels), TRANSLAB_CONFIG_DIR=str(config),
               TRANSLAB_DATA_DIR=str(REPO_ROOT / "data"), TRANSLAB_FAST="1")
    ran = subprocess.run([sys.executable, "-c", STUDENT_RUN, *(str(work / f"{name}.ipynb") for name in names),
                          str(blank)], cwd=work, env=env, capture_output=True, text=True, timeout=1800)
    assert ran.returncode == 0, ran.stderr[-3000:]
    for name in names:
        errors = _errors(work / f"{name}.ipynb")
        assert errors == [], f"{name} fails in the student's venv: {errors}"
    assert [e for e in _errors(blank) if e.endswith("_visible")], "the untouched notebook must fail its visible checks"
    where = "".join(output.get("text", "") for output in nbformat.read(blank, as_version=4).cells[0].outputs)
    assert where.startswith(str(tmp_path / "venv")), f"the notebooks must run the wheel's translab, not {where}"

    course = small_course(tmp_path / "course")
    handed_in = course / "submitted" / "alice" / ASSIGNMENT
    handed_in.mkdir(parents=True)
    for name in names:
        shutil.copy(work / f"{name}.ipynb", handed_in)
    run_grader(course, "autograde")
    graded = {key: (score, top) for key, (score, top, is_code) in cell_scores(course, "alice").items()
              if is_code and key[0] in names}
    assert {notebook for notebook, _ in graded} == set(names), graded
    lost = {key: value for key, value in graded.items() if value[0] != value[1]}
    assert not lost, f"week {until}: a student who did everything lost points: {lost}"


INSTALLED = """
import json, sys
import translab
from translab import checkpoint, data, references
from translab.checks import check_mask
import torch
found = {"translab": translab.__file__}
try:
    found["tokenizer"] = data.load_tokenizer().get_piece_size()
    found["checkpoint"] = sum(p.numel() for p in checkpoint.load_checkpoint()[0].parameters())
    found["references"] = sorted(references.load("mask"))
    check_mask(lambda sz: torch.triu(torch.full((sz, sz), float("-inf")), diagonal=1))
    found["check"] = "passed"
except Exception as error:
    found["error"] = f"{type(error).__name__}: {error}"
print(json.dumps(found))
"""


def test_a_normal_install_of_the_release_runs_from_anywhere_with_translab_home(stages, tmp_path):
    """Installed non-editable (a wheel in site-packages, as a shared JupyterHub environment has it), translab
    finds the release's tokenizer, checkpoint and visible references through TRANSLAB_HOME; without it, the
    error says to set it.  (The release of part 3, the first to load the checkpoint: part 2's model is in it.)"""
    release = stages[3]
    target = tmp_path / "site-packages"
    built = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                            "--no-build-isolation", "--target", str(target), str(release)],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-3000:]
    assert (target / "translab" / "checks" / "part1.py").exists() and not (target / "translab" / "artifacts").exists()
    assert (target / "translab" / "jupyter_student" / "labconfig" / "page_config.json").exists()
    elsewhere = tmp_path / "home"
    elsewhere.mkdir()
    base = {key: value for key, value in os.environ.items()
            if key not in ("TRANSLAB_HOME", "TRANSLAB_REFERENCES", "TRANSLAB_DATA_DIR")}
    base["PYTHONPATH"] = str(target)

    def run(**env) -> dict:
        done = subprocess.run([sys.executable, "-c", INSTALLED], cwd=elsewhere, env={**base, **env},
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return json.loads(done.stdout.strip().splitlines()[-1])

    found = run(TRANSLAB_HOME=str(release))
    assert found["translab"].startswith(str(target)), found
    assert "error" not in found, found
    assert found["tokenizer"] > 0 and found["checkpoint"] > 0 and found["references"] == ["visible"]
    assert found["check"] == "passed"
    lost = run()
    assert "TRANSLAB_HOME" in lost.get("error", ""), lost
