"""The notebooks on a GPU runtime, as Colab has one: the platform's own CUDA torch, no translab until the setup cell.

    python -m experiments.gpu_check prepare DIR        # here: the student wheel, notebooks 01-05 done, raw corpora
    python3 DIR/gpu_check.py run DIR OUT [--python PY] [--fast]  # there: needs only the standard library and DIR

``prepare`` writes DIR: the wheel of a release with every part open, each released notebook with the solutions'
answers in it, the two raw corpora (so that no download is needed where nothing can be fetched), and the wheels of
a Jupyter kernel and nbclient for Python 3.12 (34 MB in all: the device tool carries at most 64 MiB with the tree).
Run there (results/gpu_check.json) as ``cd DIR && python3 gpu_check.py run . $OUT --python "$(which python3)"``.  ``run`` makes a venv on top of the platform's Python (its torch
kept), then for each notebook, as a fresh Colab runtime would: translab uninstalled, the setup cell installing the
wheel, TF32 switched on by the notebook as a student might do for speed, every cell run at the full (student)
budget.  It writes OUT/gpu_check.json: per notebook the cells that failed, its time, the device the training ran
on and the GPU memory it took.  Part 6 needs the 91 MB MiniLM checkpoint, which the device machine cannot fetch:
it is left out (its fine-tuning loop is translab.bert.fine_tune_classifier, which trains the same way as part 4's).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

TF32_ON = """\
import torch  # what a student may add for speed on a GPU: the checks must hold anyway
torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
torch.set_float32_matmul_precision("high")"""
REPORT = """\
import json, sys, torch, translab
from translab.training import pick_device
print("GPU_CHECK", json.dumps({"translab": translab.__file__, "torch": torch.__version__, "python": sys.version.split()[0],
      "device": str(pick_device()), "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
      "max_gpu_memory_mb": round(torch.cuda.max_memory_allocated() / 1e6, 1) if torch.cuda.is_available() else 0}))"""
EXECUTE = """
import sys, nbformat
from nbclient import NotebookClient
notebook = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(notebook, timeout=900, kernel_name="platform", allow_errors=True,
               resources={"metadata": {"path": sys.argv[2]}}).execute()
nbformat.write(notebook, sys.argv[1])
"""
PARTS = (1, 2, 3, 4, 5)
KERNEL_PYTHON = "3.12"  # the GPU runtime's (and Colab's) Python: the kernel's wheels are fetched for it here
KERNEL_PACKAGES = ("ipykernel", "nbclient", "nbformat")
STUDENT = "colab-student"  # part 2 shows this student's configuration, from the code saved as use_code saves it


def prepare(folder: Path) -> None:
    import tempfile

    import nbformat

    # here, not at the top: `run` executes this file on the GPU runtime, which has the standard library alone
    from grader.course import student_release
    from grader.testing.completed import with_solutions
    from grader.course.variants import code_for
    from translab import data
    from translab.contract import ASSIGNMENT
    from translab.paths import REPO_ROOT
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        release = Path(scratch) / "release"
        student_release.write(release, until=7, wheel=True)
        (folder / "student.json").write_text(json.dumps({"code": code_for(STUDENT, REPO_ROOT)}), encoding="utf-8")
        wheel = next((release / "dist").glob("*.whl"))
        shutil.copy2(wheel, folder / wheel.name)
        for path in sorted((release / "notebooks" / ASSIGNMENT).glob("*.ipynb")):
            if int(path.name[:2]) in PARTS:
                done = with_solutions(path, REPO_ROOT / "solutions" / ASSIGNMENT / path.name)
                nbformat.write(done, folder / path.name)
    (folder / "raw").mkdir(exist_ok=True)
    for source in data.SOURCES:
        for raw in source.files:
            shutil.copy2(data.raw_path(raw.name), folder / "raw" / raw.name)
    shutil.copy2(Path(__file__), folder / "gpu_check.py")
    platforms = [arg for tag in ("manylinux_2_28", "manylinux_2_27", "manylinux_2_24", "manylinux_2_17", "manylinux2014",
                                 "manylinux_2_5", "manylinux1", "linux") for arg in ("--platform", f"{tag}_x86_64")]
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--python-version",
                    KERNEL_PYTHON, "--implementation", "cp", *platforms, "-d", str(folder / "whl"), *KERNEL_PACKAGES],
                   check=True)
    print(f"prepared {folder}: carry it to the GPU machine, then run {folder / 'gpu_check.py'} there")


def _stream(cell) -> str:
    texts = [output.get("text", "") for output in cell.get("outputs", []) if output.get("output_type") == "stream"]
    return "".join(text if isinstance(text, str) else "".join(text) for text in texts)


def run(folder: Path, out: Path, python: str | None, fast: bool = False) -> dict:
    folder, out = folder.resolve(), out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    scratch = Path("/tmp/gpu-check")
    shutil.rmtree(scratch, ignore_errors=True)
    home, work, kernels = scratch / "home", scratch / "work", scratch / "jupyter" / "kernels" / "platform"
    for path in (home, work, kernels):
        path.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRANSLAB_", "PYTHONPATH", "VIRTUAL_ENV", "NBGRADER"))}
    (home / ".config" / "translab").mkdir(parents=True)  # the student's variants.use_code(...), done once
    shutil.copy2(folder / "student.json", home / ".config" / "translab" / "student.json")
    env.update(HOME=str(home), JUPYTER_PATH=str(scratch / "jupyter"), PIP_NO_INDEX="1",
               PIP_FIND_LINKS=str(folder / "whl"), PIP_DISABLE_PIP_VERSION_CHECK="1")
    if fast:  # a dry run on a CPU: the grading budget
        env["TRANSLAB_FAST"] = "1"
    if python is None:  # the platform's Python, its packages (torch) visible in a venv of our own
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(scratch / "venv")], check=True)
        python = str(scratch / "venv" / "bin" / "python")
    started = time.monotonic()
    subprocess.run([python, "-m", "pip", "install", "--quiet", *KERNEL_PACKAGES], env=env, check=True)
    result: dict = {"kernel_install_s": round(time.monotonic() - started, 1), "notebooks": {}}
    (kernels / "kernel.json").write_text(json.dumps({"argv": [python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                                                     "display_name": "platform", "language": "python"}))
    raw = home / ".local" / "share" / "translab" / "raw"  # where the wheel keeps its data: already fetched
    shutil.copytree(folder / "raw", raw)
    wheel = next(folder.glob("translab-*.whl"))
    for path in sorted(folder.glob("0*.ipynb")):
        subprocess.run([python, "-m", "pip", "uninstall", "--quiet", "--yes", "translab"], env=env, capture_output=True)
        notebook = json.loads(path.read_text(encoding="utf-8"))
        cells = notebook["cells"]
        setup = next(i for i, cell in enumerate(cells) if "".join(cell["source"]).startswith("# Setup: Colab"))
        source = "".join(cells[setup]["source"])
        cells[setup]["source"] = source.replace("TRANSLAB_PACKAGE = ''", f"TRANSLAB_PACKAGE = {str(wheel)!r}", 1)
        blank = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}
        cells.insert(setup + 1, {**blank, "source": TF32_ON})
        cells.append({**blank, "source": REPORT})
        target = work / path.name
        target.write_text(json.dumps(notebook), encoding="utf-8")
        started = time.monotonic()
        done = subprocess.run([python, "-c", EXECUTE, str(target), str(work)], env=env, capture_output=True, text=True)
        seconds = round(time.monotonic() - started, 1)
        executed = json.loads(target.read_text(encoding="utf-8"))["cells"] if done.returncode == 0 else []
        errors = [(cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") or "".join(cell["source"])[:60],
                   output.get("ename"), output.get("evalue", "")[:300])
                  for cell in executed for output in cell.get("outputs", []) if output.get("output_type") == "error"]
        report = next((json.loads(_stream(cell).split("GPU_CHECK ", 1)[1]) for cell in executed[-1:]
                       if "GPU_CHECK " in _stream(cell)), None)
        visible = [cell for cell in executed
                   if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id", "").endswith("_visible")]
        result["notebooks"][path.stem] = {
            "seconds": seconds, "errors": errors, "report": report, "setup_cell": _stream(executed[setup]) if executed else "",
            "visible_checks_run": sum(1 for cell in visible if cell.get("execution_count")),
            "nbclient": done.stderr[-1500:] if done.returncode else ""}
        (out / "gpu_check.json").write_text(json.dumps(result, indent=1), encoding="utf-8")
        print(path.stem, seconds, "s", len(errors), "errors", report and report["device"], flush=True)
    return result


if __name__ == "__main__":
    if sys.argv[1:2] == ["prepare"]:
        prepare(Path(sys.argv[2]))
    elif sys.argv[1:2] == ["run"]:
        python = sys.argv[sys.argv.index("--python") + 1] if "--python" in sys.argv else None
        run(Path(sys.argv[2]), Path(sys.argv[3]), python, fast="--fast" in sys.argv)
    else:
        sys.exit(__doc__)
