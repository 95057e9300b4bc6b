"""The project's own promises: pins agree, make targets are documented, CI runs the README."""
import re
import subprocess
import tomllib
from pathlib import Path

from translab.paths import REPO_ROOT


def pyproject_pins():
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return sorted(project["dependencies"])


def test_every_dependency_is_pinned_exactly():
    for requirement in pyproject_pins():
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", requirement), requirement
    assert "torch==2.13.0" in pyproject_pins()


def test_environment_yml_has_the_same_pins():
    text = (REPO_ROOT / "environment.yml").read_text()
    conda = sorted(re.findall(r"^\s+- ([A-Za-z0-9_.-]+==\S+)\s*$", text, flags=re.M))
    assert conda == pyproject_pins()


def test_constraints_agree_with_pyproject():
    constraints = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            constraints[name.lower().replace("_", "-")] = version
    for requirement in pyproject_pins():
        name, version = requirement.split("==")
        assert constraints.get(name.lower().replace("_", "-")) == version, requirement


def test_make_help_lists_every_target_with_a_description():
    makefile = (REPO_ROOT / "Makefile").read_text()
    phony = set(re.search(r"^\.PHONY:(.*?)(?<!\\)$", makefile, flags=re.M | re.S).group(1).replace("\\", " ").split())
    out = subprocess.run(["make", "-s", "help"], cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout
    listed = set(re.findall(r"make (\S+)", out))
    assert phony == listed
    assert all(len(line.split(None, 2)) == 3 for line in out.strip().splitlines())


def test_ci_runs_exactly_the_readme_commands():
    ci = [line for line in (REPO_ROOT / ".ci" / "run").read_text().splitlines()
          if line and not line.startswith("#") and not line.startswith("set ")]
    assert ci == ["make setup", "make test"]
    readme = (REPO_ROOT / "README.md").read_text()
    assert readme.index("make setup") < readme.index("make test") < readme.index("## ")


def test_no_notebook_in_the_repo_carries_outputs():
    for path in list(REPO_ROOT.glob("solutions/**/*.ipynb")) + list(REPO_ROOT.glob("notebooks/**/*.ipynb")):
        import json
        for cell in json.loads(path.read_text())["cells"]:
            if cell["cell_type"] == "code":
                assert not cell.get("outputs") and not cell.get("execution_count"), path


def test_every_pinned_package_installs_on_the_oldest_python_we_accept():
    """pyproject's requires-python floor (Debian 12 ships 3.11.2) must admit every pin: one package needing a later
    patch release (soupsieve 4.1.2 needs 3.11.5) fails `make setup` there."""
    from importlib import metadata

    from packaging.specifiers import SpecifierSet
    from packaging.version import Version
    accepted = SpecifierSet(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["requires-python"])
    floor = min((Version(f"3.{minor}.{patch}") for minor in range(8, 20) for patch in range(0, 30)
                 if accepted.contains(f"3.{minor}.{patch}")), default=None)
    assert floor is not None, accepted
    pinned = {}
    for line in (REPO_ROOT / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, version = line.split("==")
            pinned[name.lower().replace("_", "-")] = version
    refused = []
    for dist in metadata.distributions():
        name = dist.metadata["Name"].lower().replace("_", "-")
        needs = dist.metadata.get("Requires-Python")
        if name in pinned and needs and not SpecifierSet(needs).contains(floor):
            refused.append(f"{name}=={dist.version} needs Python {needs}")
    assert not refused, f"not installable on Python {floor}, which pyproject.toml accepts: {refused}"
    assert len([d for d in metadata.distributions() if d.metadata["Name"].lower().replace("_", "-") in pinned]) > 50


def test_make_uses_an_existing_environment_as_it_is():
    """`make ... PY=/path/to/python` (a shared environment on a grading server) installs nothing into it."""
    shared = "/srv/shared-env/bin/python"
    for target in ("autograde", "release", "formgrader"):
        dry = subprocess.run(["make", "-n", target, f"PY={shared}"], cwd=REPO_ROOT, capture_output=True, text=True,
                             check=True).stdout
        assert "pip install" not in dry and "-m venv" not in dry, dry
        assert f"{shared} -m grader" in dry or "/srv/shared-env/bin/jupyter lab" in dry, dry
    own = subprocess.run(["make", "-n", "autograde", "VENV=/nonexistent/venv"], cwd=REPO_ROOT, capture_output=True,
                         text=True, check=True).stdout
    assert "pip install" in own and "/nonexistent/venv/bin/python -m grader autograde" in own, own


def _commands(value):
    """Every "command" recorded anywhere in a result's JSON."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "command" and isinstance(item, str):
                yield item
            else:
                yield from _commands(item)
    elif isinstance(value, list):
        for item in value:
            yield from _commands(item)


def test_every_recorded_command_is_one_that_runs_today():
    """A result says how to rebuild it: its module exists and takes every option the command gives."""
    import importlib.util
    import json
    found = 0
    for path in sorted((REPO_ROOT / "results").rglob("*.json")):
        for command in _commands(json.loads(path.read_text())):
            match = re.match(r"python -m ([\w.]+)", command)
            assert match, f"{path.name}: {command!r} is not a `python -m` command"
            spec = importlib.util.find_spec(match.group(1))
            assert spec is not None, f"{path.name}: no module {match.group(1)} ({command!r})"
            files = ([Path(spec.origin)] if not spec.submodule_search_locations
                     else sorted(Path(spec.submodule_search_locations[0]).glob("*.py")))  # a package: its CLI's modules
            source = "".join(file.read_text(encoding="utf-8") for file in files)
            for option in re.findall(r"(?<!\S)(--[a-z][a-z0-9-]*)", command):
                assert f'"{option}"' in source, f"{path.name}: {match.group(1)} has no option {option} ({command!r})"
            found += 1
    assert found >= 8


def test_no_student_notebook_names_a_command_students_do_not_have():
    """Students have the notebooks, the translab package and results/, not the course's make targets or scripts."""
    import json
    targets = re.findall(r"^([a-z][a-z-]*):", (REPO_ROOT / "Makefile").read_text(), flags=re.M)
    commands = re.compile(rf"\bmake ({'|'.join(targets)})\b|python -m (experiments|grader)\b|experiments\.\w+")
    for path in sorted((REPO_ROOT / "notebooks").rglob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        named = [match.group(0) for cell in cells for match in commands.finditer("".join(cell["source"]))]
        assert not named, f"{path.name} names {named}"


def _rubric_sections() -> dict[str, dict]:
    """grader/rubric.md by written answer: its notebook, points, question and the points its partial credit gives."""
    text = (REPO_ROOT / "grader" / "rubric.md").read_text(encoding="utf-8")
    sections = {}
    for section in re.split(r"^## \d+\. ", text, flags=re.M)[1:]:
        head = re.match(r"`(\w+)` \(notebook (\d+), (\d+) points\)", section)
        if not head:
            continue
        credit = section.split("**Partial credit", 1)[1].split("**Usual wrong", 1)[0].split("\n\n")[0]
        if "(1 pt each)" in credit:
            given = float(len(re.findall(r"^\d+\. ", credit, flags=re.M)))
        else:
            given = sum(float(points) for points in re.findall(r"^- (\d+(?:\.\d+)?) pts?\b", credit, flags=re.M))
        question = section.split("**Question.**", 1)[1].split("\n\n", 1)[0] if "**Question.**" in section else ""
        sections[head.group(1)] = {"notebook": head.group(2), "points": float(head.group(3)), "credit": given,
                                   "question": " ".join(question.split())}
    return sections


def test_every_written_question_has_its_rubric_and_the_rubric_gives_its_points():
    """Each manually graded answer of the solutions has a rubric section with the same points, whose partial credit
    adds up to them; and the rubric's question has the parts the notebook's question has."""
    import json
    sections = _rubric_sections()
    written = {}
    for path in sorted((REPO_ROOT / "solutions").rglob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        for index, cell in enumerate(cells):
            grading = cell["metadata"].get("nbgrader", {})
            if cell["cell_type"] == "markdown" and grading.get("solution") and grading.get("grade"):
                question = "".join(cells[index - 1]["source"])
                written[grading["grade_id"]] = (path.name[:2], float(grading["points"]), question)
    assert sorted(sections) == sorted(written)
    for grade_id, (notebook, points, question) in written.items():
        rubric = sections[grade_id]
        assert (rubric["notebook"], rubric["points"], rubric["credit"]) == (notebook, points, points), grade_id
        parts = sorted(set(re.findall(r"\(([a-e])\)", question)))
        assert sorted(set(re.findall(r"\(([a-e])\)", rubric["question"]))) == parts, \
            f"{grade_id}: the notebook's question has parts {parts}; the rubric's question: {rubric['question']}"
