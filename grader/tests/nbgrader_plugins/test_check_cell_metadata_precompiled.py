"""CheckCellMetadataPrecompiled refuses what nbgrader's CheckCellMetadata refuses, with the same error, and checks
nbgrader's schema once instead of once per graded cell."""
from __future__ import annotations

import copy
import subprocess
import sys

import nbformat
import pytest
from jsonschema import validators
from nbgrader.nbgraderformat import MetadataValidator, ValidationError
from nbgrader.preprocessors import CheckCellMetadata

from grader.nbgrader_plugins import check_cell_metadata_precompiled as precompiled
from grader.nbgrader_plugins.check_cell_metadata_precompiled import CheckCellMetadataPrecompiled
from translab.paths import REPO_ROOT

ASSIGNMENT = REPO_ROOT / "notebooks" / "transfer_learning"
SOLUTIONS = REPO_ROOT / "solutions" / "transfer_learning"


def _graded(notebook) -> list:
    return [cell for cell in notebook.cells if "nbgrader" in cell.metadata]


def _first(notebook, **wanted):
    return next(cell for cell in _graded(notebook)
                if all(cell.metadata.nbgrader.get(key) == value for key, value in wanted.items()))


def _set(key, value, **wanted):
    def change(notebook):
        _first(notebook, **wanted).metadata.nbgrader[key] = value
    return change


def _drop(key, **wanted):
    def change(notebook):
        del _first(notebook, **wanted).metadata.nbgrader[key]
    return change


def _replace_metadata(value):
    def change(notebook):
        _first(notebook, grade=True).metadata["nbgrader"] = value
    return change


def _duplicate_grade_id(notebook):
    answers = [cell for cell in _graded(notebook) if cell.metadata.nbgrader.get("solution")]
    answers[1].metadata.nbgrader["grade_id"] = answers[0].metadata.nbgrader["grade_id"]


def _code_task(notebook):
    cell = _first(notebook, grade=True, solution=False)
    cell.metadata.nbgrader["task"] = True


def _markdown_solution_not_graded(notebook):
    cell = next(cell for cell in _graded(notebook) if cell.cell_type == "markdown")
    cell.metadata.nbgrader["grade"] = False


# Ways metadata arrives broken: edited by hand in JupyterLab's metadata editor (strings for numbers, keys dropped),
# made by an older or newer nbgrader, or by another tool that writes nbgrader's keys its own way.
BROKEN = {
    "points as a string": _set("points", "1", grade=True),
    "points negative": _set("points", -1, grade=True),
    "points missing": _drop("points", grade=True),
    "grade_id missing": _drop("grade_id", grade=True),
    "grade_id empty": _set("grade_id", "", grade=True),
    "grade_id a number": _set("grade_id", 7, grade=True),
    "grade as a string": _set("grade", "true", grade=True),
    "locked missing": _drop("locked", grade=True),
    "an unknown key": _set("weight", 2, grade=True),
    "schema version 2": _set("schema_version", 2, grade=True),
    "schema version 4": _set("schema_version", 4, grade=True),
    "schema version as a string": _set("schema_version", "3", grade=True),
    "schema version missing": _drop("schema_version", grade=True),
    "schema version 3.0": _set("schema_version", 3.0, grade=True),
    "metadata a list": _replace_metadata([]),
    "metadata null": _replace_metadata(None),
    "metadata empty": _replace_metadata({}),
    "cell_type stale": _set("cell_type", "markdown", grade=True, solution=False),
    "a grade id twice": _duplicate_grade_id,
    "a code cell as a task": _code_task,
    "a markdown solution not graded": _markdown_solution_not_graded,
}


def _outcome(check, notebook):
    """What the preprocessor ``check`` did to ``notebook``: None, or the error's type and text, and those of the
    error it was raised from (nbgrader's one message hides which rule refused)."""
    try:
        check().preprocess(notebook, {})
    except Exception as error:  # noqa: BLE001 - the error itself is what is compared
        cause = error.__context__
        return type(error), str(error), type(cause), str(cause)
    return None


@pytest.fixture(scope="module")
def notebooks():
    paths = sorted(SOLUTIONS.glob("*.ipynb")) + sorted(ASSIGNMENT.glob("*.ipynb"))
    assert paths, "no notebooks: run make release"
    return [nbformat.read(path, as_version=4) for path in paths]


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_metadata_is_refused_as_nbgrader_refuses_it(notebooks, name):
    """The same outcome: both pass, or both raise the same error (nbgrader's message) from the same cause."""
    notebook = _changed(notebooks[0], BROKEN[name])
    theirs = _outcome(CheckCellMetadata, copy.deepcopy(notebook))
    ours = _outcome(CheckCellMetadataPrecompiled, copy.deepcopy(notebook))
    assert ours == theirs


def test_most_breaks_are_refused_so_the_comparison_means_something(notebooks):
    refused = [name for name, change in BROKEN.items()
               if _outcome(CheckCellMetadata, _changed(notebooks[0], change)) is not None]
    assert len(refused) >= len(BROKEN) - 3, sorted(set(BROKEN) - set(refused))


def _changed(notebook, change):
    notebook = copy.deepcopy(notebook)
    change(notebook)
    return notebook


def test_every_course_notebook_passes_both(notebooks):
    for notebook in notebooks:
        assert _outcome(CheckCellMetadata, notebook) is None
        returned, _ = CheckCellMetadataPrecompiled().preprocess(notebook, {})
        assert returned is notebook


def test_the_schema_is_checked_once_not_once_per_cell(notebooks, monkeypatch):
    kind = validators.validator_for(MetadataValidator().schema)
    checked = []
    original = kind.check_schema.__func__
    monkeypatch.setattr(kind, "check_schema", classmethod(lambda cls, schema, **kw: (checked.append(1),
                                                                                     original(cls, schema, **kw))[1]))
    graded = sum(len(_graded(notebook)) for notebook in notebooks)
    for notebook in notebooks:
        CheckCellMetadata().preprocess(notebook, {})
    assert len(checked) == graded > 50  # nbgrader's own: once per graded cell
    checked.clear()
    precompiled.compiled_validator.cache_clear()
    try:
        for notebook in notebooks:
            CheckCellMetadataPrecompiled().preprocess(notebook, {})
        assert len(checked) == 1
    finally:
        precompiled.compiled_validator.cache_clear()


def test_the_fork_server_builds_the_validator_when_it_imports_the_plugins():
    from grader.grading.nbgrader_process import WARM_IMPORTS
    assert precompiled.__name__ in WARM_IMPORTS
    built = subprocess.run([sys.executable, "-c", f"import {precompiled.__name__} as p; "
                            "print(p.compiled_validator.cache_info().currsize)"],
                           capture_output=True, text=True, check=True, cwd=REPO_ROOT)
    assert built.stdout.strip() == "1"
