"""The stages of translab a grading kernel imports (grader.isolation.kernel_stages), built once per source in the
course's cache: what a batch gets from the cache is what it would have built itself, and no kernel sees the cache."""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from grader.isolation import kernel_stages
from translab.paths import PACKAGE_DIR


def _work(tmp_path: Path, name: str) -> Path:
    """A batch's scratch folder, as the batch creates it."""
    (tmp_path / name).mkdir()
    return tmp_path / name


def _tree(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and folder below ``folder``: its mode and its bytes (bytecode with the source time it checks)."""
    return {str(path.relative_to(folder)): (stat.S_IMODE(path.stat().st_mode),
                                            path.read_bytes() if path.is_file() else b"")
            for path in sorted(folder.rglob("*"))}


def test_stages_from_the_cache_are_the_stages_built_in_place(tmp_path):
    cache = tmp_path / "cache"
    in_place = _tree(kernel_stages.build(PACKAGE_DIR, _work(tmp_path, "here")))
    first = _tree(kernel_stages.build(PACKAGE_DIR, _work(tmp_path, "first"), cache=cache))  # builds the cache
    again = _tree(kernel_stages.build(PACKAGE_DIR, _work(tmp_path, "again"), cache=cache))  # reads it
    assert first == again
    assert {name: mode for name, (mode, _) in in_place.items()} == {name: mode for name, (mode, _) in again.items()}
    sources = {name: data for name, (_, data) in in_place.items() if not name.endswith(".pyc")}
    assert sources == {name: data for name, (_, data) in again.items() if not name.endswith(".pyc")}
    assert any(name.endswith(".pyc") for name in again) and len(again) == len(in_place)
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700, "the cache is the instructor's alone"
    assert [entry.name for entry in cache.iterdir()] == [kernel_stages.stages_key(PACKAGE_DIR)]


def test_another_source_is_built_again_and_replaces_the_cached_one(tmp_path):
    source = tmp_path / "translab"
    shutil.copytree(PACKAGE_DIR, source, ignore=shutil.ignore_patterns(*kernel_stages.SKIPPED))
    cache = tmp_path / "cache"
    kernel_stages.build(source, _work(tmp_path, "before"), cache=cache)
    old = kernel_stages.stages_key(source)
    (source / "model.py").write_text((source / "model.py").read_text() + "\nCHANGED = 1\n")
    (source / "__pycache__").mkdir(exist_ok=True)
    assert kernel_stages.stages_key(source) != old
    built = kernel_stages.build(source, _work(tmp_path, "after"), cache=cache)
    assert "CHANGED = 1" in (built / "3" / "translab" / "model.py").read_text()
    assert [entry.name for entry in cache.iterdir()] == [kernel_stages.stages_key(source)]


def test_a_build_cut_short_is_not_used_and_an_unusable_cache_builds_in_place(tmp_path):
    cache = tmp_path / "cache"
    entry = cache / kernel_stages.stages_key(PACKAGE_DIR)
    (entry / "1" / "translab").mkdir(parents=True)  # no COMPLETE mark: a build that died
    (entry / "1" / "translab" / "__init__.py").write_text("raise SystemExit('a broken stage')\n")
    built = kernel_stages.build(PACKAGE_DIR, _work(tmp_path, "work"), cache=cache)
    assert "a broken stage" not in (built / "1" / "translab" / "__init__.py").read_text()
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder should be")
    built = kernel_stages.build(PACKAGE_DIR, _work(tmp_path, "work2"), cache=blocked / "stages")
    assert sorted(os.listdir(built)) == [str(stage) for stage in range(1, 7)]


def test_the_course_s_cache_is_hidden_from_every_kernel(tmp_path):
    """Stage 6 holds parts 1 to 5 as released: a kernel of part 5 that read it would have part 5's answers."""
    from grader.isolation import sandbox
    root = _work(tmp_path, "course")
    kernel_stages.build(PACKAGE_DIR, _work(tmp_path, "batch"), cache=kernel_stages.cache_folder(root))
    assert (kernel_stages.cache_folder(root) / kernel_stages.stages_key(PACKAGE_DIR) / kernel_stages.COMPLETE).exists()
    assert kernel_stages.cache_folder(root).resolve() in sandbox.hidden_paths(root)
