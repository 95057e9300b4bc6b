"""The student wheel: built by ``make student-release``, installed by a notebook's setup cell as Colab would, beside
the torch a platform ships (another version than ours), and the notebook's visible checks passing there."""
from __future__ import annotations

import ast
import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest
from packaging.specifiers import SpecifierSet

from grader.course import student_release
from grader.testing.completed import with_solutions
from translab import setup_cell
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

# The platform's torch in the fresh venv: another release than our pin, inside the tested range.  On this kind of
# machine pip takes it from PyPI as a CUDA build (5.4 GB with its CUDA libraries), which runs on the CPU here, as
# Colab's CPU runtime runs its CUDA build.
PLATFORM_TORCH = "2.14.1"
# What a Colab runtime has before the setup cell: a kernel, the scientific stack's basics (pip brings the rest).
PLATFORM_PACKAGES = (f"torch=={PLATFORM_TORCH}", "ipykernel")
FREE_DISK_NEEDED = 12e9
MEASURED = REPO_ROOT / "test-artifacts" / "student_wheel.json"  # what the note quotes: times and sizes


def _third_party_imports() -> set[str]:
    names = set()
    for path in (REPO_ROOT / "translab").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
    return {name for name in names if name not in sys.stdlib_module_names and name != "translab"}


def test_the_wheel_asks_for_ranges_that_hold_our_pins_and_all_translab_imports():
    imported = {"sklearn": "scikit-learn"}
    assert {imported.get(name, name) for name in _third_party_imports()} == set(student_release.STUDENT_REQUIREMENTS)
    pins = dict(re.findall(r'^\s*"([A-Za-z0-9_.-]+)==([^"]+)"', (REPO_ROOT / "pyproject.toml").read_text(), flags=re.M))
    for name, spec in {**student_release.STUDENT_REQUIREMENTS, **student_release.LAB_REQUIREMENTS}.items():
        assert pins[name] in SpecifierSet(spec), f"our pin {name}=={pins[name]} is outside the wheel's {spec}"
    torch_range = SpecifierSet(student_release.STUDENT_REQUIREMENTS["torch"])
    assert PLATFORM_TORCH in torch_range and PLATFORM_TORCH != pins["torch"]
    assert "2.11.0" in torch_range, "the GPU runtime's torch (experiments/gpu_check.py) must stay in the range"


def test_the_release_writes_where_translab_comes_from_and_the_colab_badges(tmp_path):
    dest = tmp_path / "release"
    student_release.write(dest, until=2, colab="course-org/translab-students@week2")
    wheel = ("https://raw.githubusercontent.com/course-org/translab-students/week2/dist/"
             f"{student_release.wheel_name(until=2)}")
    for notebook in sorted((dest / "notebooks" / ASSIGNMENT).glob("*.ipynb")):
        cells = nbformat.read(notebook, as_version=4).cells
        url = f"https://colab.research.google.com/github/course-org/translab-students/blob/week2/notebooks/{ASSIGNMENT}/{notebook.name}"
        assert cells[0].source.startswith(setup_cell.badge(url)), notebook.name
        assert cells[1].source == setup_cell.source(int(notebook.name[:2]), package=wheel)
    readme = (dest / "README.md").read_text(encoding="utf-8").splitlines()
    assert readme[2].startswith("[![Open In Colab]") and f'pip install "translab[lab] @ {wheel}"' in "\n".join(readme)
    laptop = [line.strip() for line in readme if line.startswith("    ")]
    assert laptop[:3] == [f'pip install "translab[lab] @ {wheel}"', *laptop[1:3]] and "translab setup" in laptop[1] \
        and "translab lab" in laptop[2]
    with pytest.raises(student_release.ReleaseError, match="owner/name"):
        student_release.write(tmp_path / "bad", colab="https://github.com/x/y")
    assert not (tmp_path / "bad").exists()


def _size_mb(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file() and not path.is_symlink()) / 1e6


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


RUN = """
import json, sys
import nbformat
from nbclient import NotebookClient
notebook = nbformat.read(sys.argv[1], as_version=4)
client = NotebookClient(notebook, timeout=900, kernel_name="platform", allow_errors=True)
client.execute()
nbformat.write(notebook, sys.argv[1])
"""

REPORT = """\
import json, sys, torch, translab
from translab import paths
print("REPORT", json.dumps({"translab": translab.__file__, "torch": torch.__version__, "python": sys.version.split()[0],
                           "home": str(paths.LAB_HOME), "data": str(paths.data_dir())}))"""


def _outputs(cell) -> str:
    return "".join(output.get("text", "") for output in cell.get("outputs", []) if output.output_type == "stream")


@pytest.mark.slow
@pytest.mark.exhaustive  # about 3 minutes (a second torch installed); the wheel's ranges are held in make test
def test_the_wheel_in_a_fresh_venv_with_another_torch_runs_notebook_01_from_its_setup_cell(tmp_path):
    """As Colab would: a fresh environment with the platform's torch and a kernel, no translab, TRANSLAB_HOME unset,
    a working folder outside the release; the wheel served over HTTP.  The setup cell installs it, says how long it
    took, the student's part 1 (the solutions in the released notebook) passes its visible checks, and run again in
    the same kernel the cell does nothing."""
    if shutil.disk_usage(tmp_path).free < FREE_DISK_NEEDED:
        pytest.skip(f"needs {FREE_DISK_NEEDED / 1e9:.0f} GB free for a venv with a CUDA build of torch")
    release = tmp_path / "release"
    student_release.write(release, until=1, wheel=True)
    wheel = next((release / "dist").glob("translab-*.whl"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0),
                                             functools.partial(_Quiet, directory=str(wheel.parent)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    venv, home, work, kernels = (tmp_path / name for name in ("platform-venv", "home", "work", "jupyter"))
    for folder in (home, work):
        folder.mkdir()
    measured = {"wheel_mb": wheel.stat().st_size / 1e6}
    try:
        started = time.monotonic()
        subprocess.run([Path(sys.base_prefix, "bin", "python3"), "-m", "venv", str(venv)], check=True, timeout=300)
        python = venv / "bin" / "python"
        # --no-compile: the platform's packages as files (a platform ships them compiled; compiling torch's
        # thousands of modules here is time the setup cell never spends)
        platform = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-cache-dir", "--no-compile",
                                   *PLATFORM_PACKAGES], capture_output=True, text=True, timeout=1200)
        assert platform.returncode == 0, platform.stderr[-3000:]
        measured["platform_install_s"] = round(time.monotonic() - started, 1)
        before = _installed(python)
        site_mb = _size_mb(venv / "lib")
        (kernels / "kernels" / "platform").mkdir(parents=True)
        (kernels / "kernels" / "platform" / "kernel.json").write_text(json.dumps({
            "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "the platform's Python", "language": "python"}))

        name = "01_mask_and_positional_encoding.ipynb"
        notebook = with_solutions(release / "notebooks" / ASSIGNMENT / name, REPO_ROOT / "solutions" / ASSIGNMENT / name)
        url = f"http://127.0.0.1:{server.server_address[1]}/{wheel.name}"
        setup = next(cell for cell in notebook.cells if cell.source.startswith(setup_cell.MARKER))
        setup.source = setup_cell.with_package(setup.source, url)
        notebook.cells += [nbformat.v4.new_code_cell(REPORT), nbformat.v4.new_code_cell(setup.source)]
        target = work / name
        nbformat.write(notebook, target)
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("TRANSLAB_", "PYTHONPATH", "VIRTUAL_ENV", "JUPYTER", "XDG_"))}
        env.update(HOME=str(home), JUPYTER_PATH=str(kernels), PIP_CACHE_DIR=str(tmp_path / "pip-cache"))
        started = time.monotonic()
        ran = subprocess.run([sys.executable, "-c", RUN, str(target)], cwd=work, env=env, capture_output=True,
                             text=True, timeout=1500)
        assert ran.returncode == 0, ran.stderr[-3000:]
        measured["notebook_s"] = round(time.monotonic() - started, 1)
        cells = nbformat.read(target, as_version=4).cells
        errors = [(cell.metadata.get("nbgrader", {}).get("grade_id") or cell.source[:60], output.get("evalue", ""))
                  for cell in cells if cell.cell_type == "code" for output in cell.get("outputs", [])
                  if output.output_type == "error"]
        assert errors == [], errors
        said = _outputs(cells[1])
        found = re.search(r"translab installed from \S+ in (\d+) s", said)
        assert found and "data for part 1: nothing to fetch" in said, said
        measured["setup_cell_s"] = int(found.group(1))
        report = json.loads(_outputs(cells[-2]).split("REPORT ", 1)[1])
        assert report["translab"].startswith(str(venv)) and report["torch"].startswith(PLATFORM_TORCH), report
        assert report["home"] == str(Path(report["translab"]).parent / "_lab"), report
        assert report["data"].startswith(str(home)), report
        assert _outputs(cells[-1]) == "", "run again where translab is installed, the setup cell must do nothing"
        visible = [cell for cell in cells if cell.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_visible")]
        assert len(visible) == 4 and all(cell.get("execution_count") and _outputs(cell) for cell in visible), \
            "each visible check ran and said it passed"

        added = {name: version for name, version in _installed(python).items() if before.get(name) != version}
        assert "translab" in added and "torch" not in added, f"the setup cell replaced the platform's torch: {added}"
        measured["installed_by_cell"] = added
        measured["installed_by_cell_mb"] = round(_size_mb(venv / "lib") - site_mb, 1)
        measured["downloaded_by_cell_mb"] = round(_download_mb(python, added, tmp_path / "downloads", wheel), 1)
        measured.update(python=report["python"], torch=report["torch"])
    finally:
        server.shutdown()
        shutil.rmtree(venv, ignore_errors=True)  # 5.4 GB
    MEASURED.parent.mkdir(exist_ok=True)
    MEASURED.write_text(json.dumps(measured, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(measured))


def _installed(python: Path) -> dict[str, str]:
    listed = subprocess.run([python, "-m", "pip", "list", "--format", "json"], capture_output=True, text=True,
                            timeout=120, check=True)
    return {row["name"].lower(): row["version"] for row in json.loads(listed.stdout)}


def _download_mb(python: Path, added: dict[str, str], folder: Path, wheel: Path) -> float:
    """What the setup cell's pip fetched: the same distributions downloaded again, as files."""
    others = [f"{name}=={version}" for name, version in added.items() if name != "translab"]
    if others:
        subprocess.run([python, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary", ":all:",
                        "--no-cache-dir", "-d", str(folder), *others], check=True, timeout=600, capture_output=True)
    return (sum(path.stat().st_size for path in folder.glob("*")) if folder.exists() else 0) / 1e6 \
        + wheel.stat().st_size / 1e6
