"""Submissions are plain files: what nbgrader grades is a copy of the submission's regular files, nothing
followed, opened or read that is not one (``copy_plain_files``).
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from grader.course.lms_zip import MAX_NOTEBOOK_BYTES as MAX_SUBMITTED_FILE  # one cap on what is collected and graded


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def copy_plain_files(source: Path, dest: Path, top: Path | None = None) -> list[str]:
    """Copy the plain files of a submission folder to ``dest`` (what nbgrader then grades); return what was
    refused, with why.

    As root, nbgrader would follow a link in ``submitted/`` to the gradebook, /etc/shadow or a solution and copy
    it where student code reads it.  Here nothing is followed: every path from ``top`` (``submitted/``) down is
    checked with ``lstat``, a file is opened with ``O_NOFOLLOW`` and checked again on its descriptor before a
    byte is read, and links, devices, FIFOs, sockets, hard links and files over ``MAX_SUBMITTED_FILE`` are
    refused, never read."""
    refused: list[str] = []
    dest.mkdir(parents=True, exist_ok=True)
    top = top or source.parent
    for folder in [source, *source.parents]:  # the student's folder and the assignment's, not links
        if folder == top or top not in folder.parents:
            break
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            return refused
        if not stat.S_ISDIR(mode):
            return [f"{folder.relative_to(top)}: {_kind(mode)}, not a folder"]
    for here, dirs, files in os.walk(source):  # os.walk lists a link to a folder but never enters it
        relative = Path(here).relative_to(source)
        (dest / relative).mkdir(parents=True, exist_ok=True)
        for name in sorted(dirs):
            mode = os.lstat(Path(here) / name).st_mode
            if not stat.S_ISDIR(mode):
                refused.append(f"{relative / name}: {_kind(mode)}")
                dirs.remove(name)
        for name in sorted(files):
            reason = _copy_plain_file(Path(here) / name, dest / relative / name)
            if reason:
                refused.append(f"{relative / name}: {reason}")
    return refused


def _copy_plain_file(path: Path, dest: Path) -> str | None:
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        return _kind(info.st_mode)
    if info.st_nlink > 1:
        return "a hard link (it may be a file from outside the submission)"
    if info.st_size > MAX_SUBMITTED_FILE:
        return f"larger than {MAX_SUBMITTED_FILE // 1024 ** 2} MB"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        return f"unreadable ({error.strerror})"
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            return "changed while it was checked"
        with open(dest, "wb") as out:
            shutil.copyfileobj(handle, out)
    os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns))
    return None
