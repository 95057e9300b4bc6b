"""The paths from before the grader's folders by role keep working for one release (``grader.moved``): an existing
course's ``nbgrader_config.py`` and an older kernelspec's ``python -m grader.launcher`` run, and say where to go."""
import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from grader.moved import OLD_PATHS
from translab.paths import REPO_ROOT


def test_every_old_path_is_gone_from_disk_and_its_new_one_exists():
    for old, new in OLD_PATHS.items():
        assert not REPO_ROOT.joinpath(*old.split(".")).with_suffix(".py").exists(), old
        assert importlib.util.find_spec(new) is not None, new
    assert len(OLD_PATHS) == len(set(OLD_PATHS.values())) >= 30


@pytest.mark.parametrize("old", ["grader.mathml", "grader.results", "grader.sandbox"])
def test_an_old_path_imports_the_same_module_and_warns(old):
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(OLD_PATHS[old])
    assert any(issubclass(w.category, FutureWarning) and OLD_PATHS[old] in str(w.message) for w in caught)


def test_an_old_course_config_still_loads_its_templates_and_filter(tmp_path: Path):
    """What the course configs written before the move hold: the templates folder and the markdown filter."""
    config = tmp_path / "nbgrader_config.py"
    config.write_text("from grader.mathml import NBGRADER_TEMPLATES, TEMPLATES\n"
                      "from traitlets.utils.importstring import import_item\n"
                      "render = import_item('grader.mathml.markdown2html')\n"
                      "print('TEMPLATES', TEMPLATES)\n"
                      "print('RENDERED', render({}, '$x^2$'))\n")
    done = subprocess.run([sys.executable, str(config)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"TEMPLATES {REPO_ROOT / 'grader' / 'templates'}" in done.stdout and "<math" in done.stdout
    assert "grader.mathml is now grader.course.mathml" in done.stderr


def test_an_old_kernelspec_s_launcher_command_runs_the_new_launcher():
    done = subprocess.run([sys.executable, "-m", "grader.launcher", "--help"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--zygote" in done.stdout and "grader.launcher is now grader.isolation.launcher" in done.stderr
