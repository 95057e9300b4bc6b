"""The project's own promises: pins agree, make targets are documented, CI runs the README."""
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from translab.contract import ASSIGNMENT
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


def test_make_autograde_grades_on_the_warm_grader_unless_told_otherwise():
    """The course's warm grader is the default (issue 53); WARM=0 opts out, and a batch sent to a cluster or to
    result folders, which the warm grader cannot take, never gets --warm."""
    def dry(*args: str) -> str:
        done = subprocess.run(["make", "-n", "autograde", "PY=python", *args], cwd=REPO_ROOT, capture_output=True,
                              text=True, check=True)
        return next(line for line in done.stdout.splitlines() if " -m grader autograde " in line)

    assert dry().split() == ["python", "-m", "grader", "autograde", "--jobs", "1", "--warm"]
    assert dry("JOBS=2").split()[-3:] == ["--jobs", "2", "--warm"]
    assert "--warm" not in dry("WARM=0")
    assert "--warm" not in dry("ARGS=--cluster tcp://127.0.0.1:8786") and "--cluster" in dry("ARGS=--cluster x")
    assert "--warm" not in dry("ARGS=--student a --results-dir r")
    assert dry("ARGS=--student a").split()[-3:] == ["--warm", "--student", "a"]


def test_make_setup_skips_the_hub_s_proxy_in_one_line_without_npm_and_hub_demo_says_what_to_install():
    """Students never need JupyterHub's proxy: without npm `make setup` goes on, saying in one line what it skipped;
    `make hub-demo` (whose prerequisite installs it) refuses, naming what to install."""
    make = shutil.which("make")
    without_npm = {"PATH": "/nonexistent", "HOME": os.environ.get("HOME", "/root")}
    skipped = subprocess.run([make, "-s", "hub-proxy"], cwd=REPO_ROOT, env=without_npm, capture_output=True,
                             text=True)
    assert skipped.returncode == 0, skipped.stderr
    assert skipped.stdout.count("\n") == 1 and "skipped: JupyterHub's proxy (no npm)" in skipped.stdout
    setup = (REPO_ROOT / "Makefile").read_text().split("\nsetup:", 1)[1].splitlines()[0]
    assert "hub-proxy" in setup and "node_modules" not in setup, setup
    # as if the proxy's lock file had changed: the rule runs, finds no npm, and says what to install
    refused = subprocess.run([make, "-s", "-W", "hub/package-lock.json", "hub/node_modules/.installed"], cwd=REPO_ROOT,
                             env=without_npm, capture_output=True, text=True)
    assert refused.returncode != 0 and "install Node.js >= 20 with npm" in refused.stdout + refused.stderr
    hub_demo = (REPO_ROOT / "Makefile").read_text().split("\nhub-demo:", 1)[1].splitlines()[0]
    assert "hub/node_modules/.installed" in hub_demo, "make hub-demo must install (or ask for) the proxy first"


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
    """A result (or an artifact's manifest) says how to rebuild it: its module exists and takes every option the
    command gives."""
    import importlib.util
    import json
    found = 0
    for path in sorted((REPO_ROOT / "results").rglob("*.json")) + sorted((REPO_ROOT / "artifacts").glob("*.json")):
        for command in _commands(json.loads(path.read_text())):
            match = re.match(r"python -m ([\w.]+)", command)
            assert match, f"{path.name}: {command!r} is not a `python -m` command"
            spec = importlib.util.find_spec(match.group(1))
            assert spec is not None, f"{path.name}: no module {match.group(1)} ({command!r})"
            files = ([Path(spec.origin)] if not spec.submodule_search_locations  # a package: its CLI's modules
                     else sorted(path for path in Path(spec.submodule_search_locations[0]).rglob("*.py")
                                 if "tests" not in path.parts and "testing" not in path.parts))
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


def _credit_items(credit: str) -> list[str]:
    """The partial-credit items of a rubric section, each with its continuation lines."""
    items = re.split(r"^(?=- \d+(?:\.\d+)? pts?\b|\d+\. )", credit.split("\n", 1)[1], flags=re.M)
    return [" ".join(item.split()) for item in items if item.strip()]


def _normal(text: str) -> str:
    return " ".join(text.replace("**", "").split()).lower()


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
                                   "question": " ".join(question.split()), "items": _credit_items(credit)}
    return sections


def _written_questions() -> dict[str, tuple[str, float, str]]:
    """{grade_id: (notebook number, points, question)} of each written answer of the solutions; the question is the
    markdown cell above the answer cell, without its heading."""
    import nbformat

    from grader.course.after_grading import written_answer
    written = {}
    for path in sorted((REPO_ROOT / "solutions").rglob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        for index, cell in enumerate(cells):
            if written_answer(cell):
                lines = cells[index - 1].source.splitlines()
                question = "\n".join(line for line in lines if not line.startswith("#"))
                written[cell.metadata.nbgrader["grade_id"]] = (path.name[:2], float(cell.metadata.nbgrader["points"]),
                                                              question)
    return written


def test_every_rubric_item_grades_words_of_its_question_and_every_sentence_is_graded():
    """Every point of the rubric is asked, and every question has its rubric: each partial-credit item quotes
    (`[asks "..."]`) words that the notebook's question holds, and each sentence of the question holds words
    that some item quotes."""
    sections, written = _rubric_sections(), _written_questions()
    assert sorted(sections) == sorted(written) and len(written) == 8
    for grade_id, (_, _, question) in written.items():
        items = sections[grade_id]["items"]
        assert len(items) >= 2, grade_id
        asked = []
        for item in items:
            quoted = re.match(r"^(?:- \d+(?:\.\d+)? pts?|\d+\.) \[asks ((?:\"[^\"]+\"(?: / )?)+)\]", item)
            assert quoted, f"{grade_id}: a rubric item that does not say what it asks: {item[:80]}"
            phrases = re.findall(r'"([^"]+)"', quoted.group(1))
            missing = [phrase for phrase in phrases if _normal(phrase) not in _normal(question)]
            assert not missing, f"{grade_id}: the rubric grades {missing}, which its question does not ask"
            asked += phrases
        sentences = [s for s in re.split(r"(?<=[.?])\s+", _normal(question)) if len(s) > 12]
        unasked = [s for s in sentences if not any(_normal(phrase) in s for phrase in asked)]
        assert not unasked, f"{grade_id}: no rubric item grades {unasked}"


def test_every_written_question_has_its_rubric_and_the_rubric_gives_its_points():
    """Each manually graded answer of the solutions has a rubric section with the same points, whose partial credit
    adds up to them; and the rubric's question has the parts the notebook's question has."""
    sections, written = _rubric_sections(), _written_questions()
    assert sorted(sections) == sorted(written)
    for grade_id, (notebook, points, question) in written.items():
        rubric = sections[grade_id]
        assert (rubric["notebook"], rubric["points"], rubric["credit"]) == (notebook, points, points), grade_id
        parts = sorted(set(re.findall(r"\(([a-e])\)", question)))
        assert sorted(set(re.findall(r"\(([a-e])\)", rubric["question"]))) == parts, \
            f"{grade_id}: the notebook's question has parts {parts}; the rubric's question: {rubric['question']}"


def test_the_time_to_expect_is_stated_alike_in_each_notebook_and_the_readme_and_fits_a_week():
    """translab/workload.py holds the estimate; the top of every notebook and the README's table say the same, and
    the whole lab's core stays within a course's week (issue 51: "the core at most 10 hours")."""
    import json
    from translab import workload
    solutions = sorted((REPO_ROOT / "solutions" / "transfer_learning").glob("*.ipynb"))
    assert [path.name[:2] for path in solutions] == sorted(workload.WORK)
    for path in solutions:
        top = "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])
        assert workload.header(path.name[:2]) in top, f"{path.name}: the top does not state {workload.header(path.name[:2])}"
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    rows = readme.split("<!-- workload rows -->\n", 1)[1].split("<!-- end of workload rows -->", 1)[0].splitlines()
    expected = [f"| {int(part)} | {work.core} min | {work.optional} min | {work.optional_what} |"
                for part, work in workload.WORK.items()]
    core, optional = (sum(work[i] for work in workload.WORK.values()) for i in (0, 1))
    expected.append(f"| **lab** | **{core / 60:.1f} h** | **{optional / 60:.1f} h** | the core within a course's "
                    f"week ({workload.WEEK // 60} h) |")
    assert rows == expected
    assert core <= workload.WEEK


def test_each_notebooks_core_time_is_the_stated_rule_on_it():
    """Issue 51: the core minutes are not guessed: ``workload.core_minutes`` on the solution notebook and its measured
    compute (results/bench.json) gives them; a notebook that grows must say so at its top."""
    import json
    from translab import workload
    bench = json.loads((REPO_ROOT / "results" / "bench.json").read_text(encoding="utf-8"))["notebooks"]
    found = {}
    for path in sorted((REPO_ROOT / "solutions" / "transfer_learning").glob("*.ipynb")):
        notebook = json.loads(path.read_text(encoding="utf-8"))
        found[path.name[:2]] = workload.core_minutes(notebook, bench[path.stem]["student_s"])
    assert found == {part: work.core for part, work in workload.WORK.items()}, "update translab/workload.WORK"


def _import_graph() -> dict[str, set[str]]:
    """{module: the modules of translab/ and grader/ it imports}, function-local imports included (they hide a
    circle from Python, not from a reader)."""
    import ast
    modules = {}
    for package in ("translab", "grader"):
        for path in (REPO_ROOT / package).rglob("*.py"):
            if "tests" in path.relative_to(REPO_ROOT).parts:
                continue
            name = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts)
            modules[name.removesuffix(".__init__")] = path
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else node.module or ""
                submodules = {f"{base}.{alias.name}" for alias in node.names} & modules.keys()
                found |= submodules or {base}
        graph[name] = {target for target in found if target in modules and target != name}
    return graph


def test_the_import_graph_of_translab_and_the_grader_has_no_circle():
    """Arrows point one way (issue 34): each module can be read knowing only what it imports.  A depth-first walk
    finds any circle and names it."""
    graph = _import_graph()
    assert {"grader.grading.batch", "grader.isolation.zygote", "translab.wire", "translab.contract"} <= graph.keys()
    # the batch holds one object per student's walls (issue 52): it reaches the sandbox through that module alone
    assert {t for t in graph["grader.grading.batch"] if t.startswith("grader.isolation")} == \
        {"grader.isolation.student_sandbox"}
    state: dict[str, str] = {}

    def walk(module: str, path: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph[module]):
            assert state.get(target) != "open", " -> ".join(path[path.index(target):] + [module, target]) \
                if target in path else f"{module} -> {target}"
            if target not in state:
                walk(target, path + [module])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            walk(module, [])
    assert not any(name.startswith("grader") for name in graph["translab.contract"]) and not graph["translab.contract"]


# grader/'s folders by role, each importing only those before it (issue 52); grader/ itself keeps the entry points
GRADER_ROLES = ("course", "references", "isolation", "grading", "nbgrader_plugins", "commands", "testing")
GRADER_TOP = {"__init__", "__main__", "cli", "moved"}


def test_the_grader_s_folders_are_its_roles_and_each_imports_only_those_before_it():
    """A newcomer reads the grader a role at a time, from the course on disk up to the commands: the folders are the
    roles named in ``grader/__init__.py``, and no import points back down the list (the tests mirror the layout)."""
    graph = _import_graph()
    top = {path.stem for path in (REPO_ROOT / "grader").glob("*.py")}
    folders = {path.name for path in (REPO_ROOT / "grader").iterdir() if (path / "__init__.py").is_file()}
    assert top == GRADER_TOP and folders == set(GRADER_ROLES), (top, folders)
    assert {path.name for path in (REPO_ROOT / "grader" / "tests").iterdir() if path.is_dir()
            and path.name != "__pycache__"} <= set(GRADER_ROLES)
    rank = {role: number for number, role in enumerate(GRADER_ROLES)}
    upward = []
    for module, targets in graph.items():
        role = module.split(".")[1] if module.count(".") >= 1 and module.startswith("grader.") else None
        if role not in rank:
            continue
        for target in targets:
            parts = target.split(".")
            if parts[0] == "grader" and len(parts) > 1 and parts[1] in rank and rank[parts[1]] > rank[role]:
                upward.append(f"{module} -> {target}")
    assert upward == [] and any(t.startswith("grader.course") for t in graph["grader.grading.batch"])
    packages = {".".join(path.parent.relative_to(REPO_ROOT).parts) for folder in ("translab", "grader", "experiments")
                for path in (REPO_ROOT / folder).rglob("__init__.py") if "tests" not in path.parts}
    assert packages == set(tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])


def _function_local_imports_of_our_own(tree, lines: list[str]):
    """(line, says why) for each import of translab, grader or experiments inside a function; a comment on its line
    or just above the block of imports it sits in says why."""
    import ast
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            name = node.names[0].name if isinstance(node, ast.Import) else node.module or ""
            if getattr(node, "level", 0) or name.split(".")[0] in ("translab", "grader", "experiments"):
                above = node.lineno - 2
                while above >= 0 and re.match(r"\s*(from|import) ", lines[above]):
                    above -= 1
                yield node.lineno, "#" in lines[node.lineno - 1] or lines[above].strip().startswith("#")


def test_an_import_of_our_own_inside_a_function_says_why():
    """The project's modules import each other at the top, where a reader looks (issue 52: 129 sat in functions with
    no circle to need them); one kept lazy, for speed or for a process that lacks the package, says why beside it."""
    import ast
    silent, seen = [], 0
    for folder in ("translab", "grader", "experiments"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).parts
            if "tests" in parts or "testing" in parts:
                continue
            text = path.read_text(encoding="utf-8")
            for line, says_why in _function_local_imports_of_our_own(ast.parse(text), text.splitlines()):
                seen += 1
                if not says_why:
                    silent.append(f"{path.relative_to(REPO_ROOT)}:{line}")
    assert seen > 0 and silent == [], f"hoist these to the top, or say why each stays inside its function: {silent}"


def test_a_long_module_says_why_it_is_one_file_and_none_is_too_long():
    """A newcomer holds a module of about 400 lines in their head; a longer one says why it stays one file, and none
    of grader/ or translab/ passes 600 lines or has a function over 80 (issue 52; the test tooling aside)."""
    import ast
    long, too_long = {}, []
    for package in ("grader", "translab"):
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            parts = path.relative_to(REPO_ROOT).parts
            if "tests" in parts:
                continue
            text = path.read_text(encoding="utf-8")
            tree = ast.parse(text)
            if len(text.splitlines()) > 420:
                long[str(path.relative_to(REPO_ROOT))] = "Why one file:" in (ast.get_docstring(tree) or "")
            if "testing" in parts:
                continue
            if len(text.splitlines()) > 600:
                too_long.append(f"{path.name}: {len(text.splitlines())} lines")
            too_long += [f"{path.name}:{node.name}: {node.end_lineno - node.lineno + 1} lines" for node in ast.walk(tree)
                         if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                         and node.end_lineno - node.lineno + 1 > 80]
    assert not [name for name, says in long.items() if not says], long
    assert too_long == []


def test_each_nbgrader_plugin_is_one_class_in_a_file_named_after_it():
    """As nbgrader lays out its own preprocessors (issue 34): the class ``nbgrader_config.py`` lists is the one class
    of ``grader/nbgrader_plugins/<its name in snake case>.py`` (its private records and the exceptions it raises aside), and every file there
    holds one the config uses."""
    import ast
    import re
    config = (REPO_ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    imported = {alias.name: node.module for node in ast.walk(ast.parse(config)) if isinstance(node, ast.ImportFrom)
                for alias in node.names if (node.module or "").startswith("grader.nbgrader_plugins")}
    folder = REPO_ROOT / "grader" / "nbgrader_plugins"
    files = {path.stem for path in folder.glob("*.py") if path.stem != "__init__"}
    for name, module in imported.items():
        assert module == f"grader.nbgrader_plugins.{re.sub(r'(?<!^)(?=[A-Z])', '_', name).lower()}", (name, module)
        assert re.search(rf"\b{name}\b", config.split(f"import {name}", 1)[1]), f"{name} imported but not used"
    assert {module.rsplit(".", 1)[1] for module in imported.values()} == files
    for stem in files:
        tree = ast.parse((folder / f"{stem}.py").read_text(encoding="utf-8"))
        classes = [node.name for node in tree.body if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
                   and not any(getattr(base, "id", "").endswith(("Error", "Exception")) for base in node.bases)]
        assert len(classes) == 1 and classes[0] in imported, (stem, classes)


def _private_names_reached(path: Path, project_only: bool = False) -> list[str]:
    """``module._name`` and ``from module import _name`` in a file, for modules other than itself (``project_only``:
    modules of translab, the grader and the experiments; the standard library's and PyTorch's privates aside)."""
    import ast
    tree = ast.parse(path.read_text(encoding="utf-8"))
    ours = ("translab", "grader", "experiments")

    def counted(module: str | None, level: int = 0) -> bool:
        return not project_only or level > 0 or (module or "").split(".")[0] in ours

    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {(alias.asname or alias.name).split(".")[0] for alias in node.names if counted(alias.name)}
        elif isinstance(node, ast.ImportFrom) and counted(node.module, node.level):
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"from {node.module} import {alias.name}")
                elif alias.name[:1].islower():
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and isinstance(node.value, ast.Name) and node.value.id in modules:
            found.append(f"{node.value.id}.{node.attr}")
    return found


def test_no_module_reaches_a_private_name_of_another():
    """Issue 52: the checks imported the harness's helpers by their private names 72 times; what a module shares
    is public, under a name that says what it is (``fail``, ``call_student``, ``matches_reference``)."""
    files = [path for package in ("translab", "grader", "experiments") for path in (REPO_ROOT / package).rglob("*.py")
             if "tests" not in path.relative_to(REPO_ROOT).parts]
    reached = {path.relative_to(REPO_ROOT).as_posix(): names for path in files
               if (names := _private_names_reached(path, project_only=True))}
    assert len(files) > 100 and not reached, reached


def test_tests_reach_no_private_name_of_another_module():
    """A test that reaches into a module's privates breaks when the module is reorganised (issue 34): what a test
    needs is public, under a name that says what it is."""
    files = [path for folder in ("tests", "grader/tests", "experiments/tests") for path in (REPO_ROOT / folder).rglob("*.py")]
    assert len(files) > 40
    reached = {path.relative_to(REPO_ROOT).as_posix(): names for path in files
               if (names := _private_names_reached(path))}
    assert not reached, reached


# Names that answers written outside this lab give their helpers or their module-level values: the Annotated
# Transformer's attention, subsequent_mask and clones, Hugging Face's transpose_for_scores, the UvA tutorial's
# scaled-dot-product pieces, a student's scores, weights and mask.  A given cell that rebinds one after an answer cell
# changes what that answer calls: notebook 01's demo once bound `attention` to nn.MultiheadAttention, and a right
# answer whose helper was named `attention` was then graded as calling PyTorch's own (issue 50).
STUDENT_NAMES = frozenset({
    "attention", "attn", "scores", "weights", "mask", "softmax", "masked_softmax", "subsequent_mask", "causal_mask",
    "clones", "split_heads", "merge_heads", "combine_heads", "transpose_for_scores", "scaled_attention", "d_k", "dk",
    "head", "heads", "pe", "div_term"})


def _bound_at_top(source: str) -> set[str]:
    """The names a code cell binds in the notebook's namespace (assignments, loops, imports, defs), not inside
    its functions."""
    import ast
    tree = ast.parse("\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))))
    names = set()
    for statement in tree.body:
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(statement.name)
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return names


def test_no_given_cell_rebinds_a_name_students_give_their_helpers():
    import nbformat
    taken = {}
    for path in sorted((REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb")):
        answered = False
        for cell in nbformat.read(path, as_version=4).cells:
            grading = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or grading.get("grade"):
                continue
            if grading.get("solution"):
                answered = True
            elif answered and _bound_at_top(cell.source) & STUDENT_NAMES:
                taken[f"{path.stem}:{cell.id}"] = sorted(_bound_at_top(cell.source) & STUDENT_NAMES)
    assert taken == {}, f"given cells that rebind names students use: {taken}"


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_committed_results_name_the_project_s_files_relative_to_it():
    """A manifest that says /home/someone/translab/artifacts/... is wrong on every other machine (lab review, §2)."""
    import json
    from translab.paths import as_recorded
    assert as_recorded(REPO_ROOT / "artifacts" / "pretrained_lm.pt") == "artifacts/pretrained_lm.pt"
    assert as_recorded("/elsewhere/model.pt") == "/elsewhere/model.pt"
    inside = re.compile(r"^/\S*/(artifacts|results|data)/\S+$")
    found = {f"{path.relative_to(REPO_ROOT)}: {text}"
             for path in sorted([*(REPO_ROOT / "results").rglob("*.json"), *(REPO_ROOT / "artifacts").glob("*.json")])
             for text in _strings(json.loads(path.read_text(encoding="utf-8"))) if inside.match(text)}
    assert not found, found


def _documentation() -> dict[str, str]:
    """{file: the text that names modules, files and commands}: every docstring and comment of the project's Python,
    and the READMEs, the rubric, the Makefile, pyproject.toml and nbgrader_config.py."""
    import ast
    texts = {}
    for package in ("grader", "translab", "experiments"):
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            if path.name in OLD_PATH_FILES:
                continue
            source = path.read_text(encoding="utf-8")
            docs = [ast.get_docstring(node) or "" for node in ast.walk(ast.parse(source))
                    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))]
            comments = [line.split("#", 1)[1] for line in source.splitlines() if line.lstrip().startswith("#")]
            texts[str(path.relative_to(REPO_ROOT))] = "\n".join(docs + comments)
    pages = [path.relative_to(REPO_ROOT).as_posix() for path in sorted((REPO_ROOT / "grader" / "docs").glob("*.md"))]
    for name in ("README.md", "grader/README.md", *pages, "grader/rubric.md", "Makefile", "pyproject.toml",
                 "nbgrader_config.py"):
        texts[name] = (REPO_ROOT / name).read_text(encoding="utf-8")
    return texts


# the one module that names the grader's old paths, and its test: elsewhere an old path must not resolve
OLD_PATH_FILES = {"moved.py", "test_moved.py"}


def _resolves(dotted: str) -> bool:
    """A module, or a name a module defines (``grader.cli.COMMANDS``); not through an old path ``grader.moved``
    still imports for old courses."""
    import importlib
    import importlib.util

    from grader.moved import OLD_PATHS
    if any(dotted == old or dotted.startswith(old + ".") for old in OLD_PATHS):
        return False
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.util.find_spec(".".join(parts[:cut])) is not None
        except ImportError:
            found = False
        if found:
            thing = importlib.import_module(".".join(parts[:cut]))
            for name in parts[cut:]:
                if not hasattr(thing, name):
                    return False
                thing = getattr(thing, name)
            return True
    return False


def test_every_module_file_and_command_the_documentation_names_exists():
    """Issue 52: docstrings drifted with the splits (modules cited that no longer existed) and nothing caught it.
    Every dotted name of the project's packages, every path of its files and every ``python -m grader`` command
    that a docstring, a comment or a README names resolves; each package's docstring names only its own modules
    (the grader's: those of its role folders too)."""
    from grader.cli import COMMANDS
    wrong, commands = [], set()
    for where, text in _documentation().items():
        for dotted in re.findall(r"\b((?:grader|translab|experiments)(?:\.[A-Za-z_]\w*)+)", text):
            if not dotted.endswith((".py", ".md", ".json", ".pt")) and not _resolves(dotted):
                wrong.append((where, dotted))
        for path in re.findall(r"(?<![/\w])((?:grader|translab|experiments|tests|hub|results|artifacts)/[\w./-]+"
                               r"\.(?:py|md|json|pt|csv|yaml|toml|txt))\b", text):
            if not (REPO_ROOT / path).exists():
                wrong.append((where, path))
        named = re.findall(r"-m grader ([a-z][a-z-]*)", text)
        commands |= set(named)
        wrong += [(where, f"grader {command}") for command in named if command not in COMMANDS]
    for package in ("grader", *(f"grader.{role}" for role in GRADER_ROLES), "translab", "translab.checks"):
        folder = REPO_ROOT.joinpath(*package.split("."))
        docstring = (__import__(package, fromlist=["_"]).__doc__ or "")
        defined = "\n".join(path.read_text(encoding="utf-8") for path in folder.glob("*.py"))
        for name in re.findall(r"``([a-z_]+)``", docstring):
            if not ((folder / f"{name}.py").exists() or (folder / name).is_dir() or _resolves(name)
                    or any(path.parent.name in GRADER_ROLES for path in folder.glob(f"*/{name}.py"))
                    or (package.startswith("grader.") and name in GRADER_ROLES)
                    or (REPO_ROOT / name).exists() or re.search(rf"^(?:def|class) {name}\b", defined, re.M)):
                wrong.append((f"{package}.__doc__", name))
    assert len(commands) >= 12 and wrong == [], wrong


def test_every_module_path_written_in_a_string_resolves():
    """Issue 52: module paths written inside strings move with the files only if something fails when they do not
    (the zygote's targets, warm imports, ``python -m`` lines, nbgrader_config.py, the hub's, Slurm's and
    Kubernetes' configs, the results' commands).  An artifact's ``command_when_built`` is history and is left out."""
    suffixes = {".py", ".yaml", ".yml", ".json", ".sh", ".toml", ".cfg"}
    skip = {".venv", "node_modules", ".git", "__pycache__", "data", ".pytest_cache", "demo-class"}
    written = re.compile(r"""(?:-m\s+|["'])((?:grader|translab|experiments)(?:\.[A-Za-z_]\w*)+)(?::(\w+))?""")
    found, wrong = 0, []
    for path in sorted(REPO_ROOT.rglob("*")):
        parts = path.relative_to(REPO_ROOT).parts
        if not path.is_file() or skip & set(parts) or (path.suffix not in suffixes and path.name != "Makefile") \
                or path.name in OLD_PATH_FILES:
            continue
        text = "\n".join(line for line in path.read_text(encoding="utf-8", errors="replace").splitlines()
                         if "command_when_built" not in line)
        for module, attribute in written.findall(text):
            found += 1
            if not _resolves(module + (f".{attribute}" if attribute else "")):
                wrong.append((str(path.relative_to(REPO_ROOT)), module + (f":{attribute}" if attribute else "")))
    assert found > 100 and wrong == [], wrong


def _anchors(page: Path) -> set[str]:
    """The anchors GitHub gives a page's headings."""
    return {re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower()).replace(" ", "-")
            for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("#")}


def test_every_link_between_the_pages_resolves():
    """The grader's pages were one README (issue 52): a link to a page or a heading that moved fails here."""
    pages = [REPO_ROOT / "README.md", REPO_ROOT / "grader" / "README.md", REPO_ROOT / "hub" / "README.md",
             *sorted((REPO_ROOT / "grader" / "docs").glob("*.md"))]
    links, broken = 0, []
    for page in pages:
        for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+://|mailto:", target):
                continue
            links += 1
            path, _, anchor = target.partition("#")
            destination = (page.parent / path).resolve() if path else page
            if not destination.exists() or (anchor and destination.suffix == ".md"
                                             and anchor not in _anchors(destination)):
                broken.append((page.relative_to(REPO_ROOT).as_posix(), target))
    assert links > 10 and broken == [], broken


def test_no_file_of_the_code_is_hidden_by_gitignore():
    """A course's working folders are git-ignored by name (feedback/, reports/ ...); a folder of the code with such a
    name was ignored with them once (grader/templates/feedback): committed tests, no template, a clean clone failed."""
    if not (REPO_ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "--others", "--ignored", "--exclude-standard", "--", "translab",
                             "grader", "experiments", "tests", "solutions", "notebooks", "hub"],
                            cwd=REPO_ROOT, capture_output=True, text=True, check=True).stdout.split()
    hidden = [path for path in listed if "__pycache__" not in path and not path.endswith((".pyc", ".egg-info"))
              and "/node_modules/" not in f"/{path}" and ".egg-info/" not in path]
    assert hidden == [], f"code that git ignores (a clean clone lacks it): {hidden[:10]}"
