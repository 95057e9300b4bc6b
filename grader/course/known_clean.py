"""Markdown the sanitizer found clean, remembered for the course's next students.

Every submission carries the same instructions: 133 markdown cells that ``SanitizeStudentContent`` renders and
checks, the same work for every student (issue 53).  Whether a source is clean depends only on
the source, on the ids the notebook's graded cells take (``taken_ids``) and on the sanitizer (its code and
allow-lists, bleach's and the renderer's versions): ``KnownClean`` keeps the SHA-256 of each source found clean in a
file named after all of the rest, so a source found clean once is not rendered again, whoever submits it.

Only a hash the sanitizer itself found clean is ever added, and only by the instructor's processes: the folder
(``FOLDER_NAME`` in the course) is created private and hidden from every kernel
(``grader.isolation.sandbox.hidden_paths``); a folder or file another user owns or could write is not used.  Where
nothing can be read or written, nothing is remembered and every cell is rendered, as without the cache.
"""
from __future__ import annotations

import hashlib
import os
import stat
from pathlib import Path

FOLDER_NAME = ".translab_clean_markdown"  # in the course folder; hidden from kernels, never committed
MAX_HASHES = 200_000  # what one file may hold (13 MB): a larger one is not read, and the next save starts it again


def folder_for(root: Path) -> Path:
    return root / FOLDER_NAME


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _ours(status: os.stat_result) -> bool:
    """Owned by this process's user and writable by nobody else."""
    return status.st_uid == os.geteuid() and not status.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _private(folder: Path) -> bool:
    """``folder`` is ours, and nobody else may even read it (FileNotFoundError when it is not there yet)."""
    status = os.stat(folder, follow_symlinks=False)
    return stat.S_ISDIR(status.st_mode) and _ours(status) and not stat.S_IMODE(status.st_mode) & 0o077


class KnownClean:
    """The sources found clean under ``key`` (what else cleanliness depends on), read from ``folder`` once; ``add``
    what this process finds clean, ``save`` to append it for the next process.  ``folder`` None: remembers nothing
    beyond this process."""

    def __init__(self, folder: Path | None, key: str):
        self.path = folder / _digest(key) if folder is not None else None
        self.known: set[str] = set()
        self.new: set[str] = set()
        self._full = False  # the file holds MAX_HASHES already: it was not read, and save starts it again
        if self.path is not None:
            self.known = self._read()

    def _read(self) -> set[str]:
        try:
            if not _private(self.path.parent):
                self.path = None  # not the instructor's alone: neither trusted nor written
                return set()
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return set()
        except OSError:
            self.path = None
            return set()
        with os.fdopen(descriptor, "rb") as handle:
            status = os.fstat(handle.fileno())
            if not _ours(status) or not stat.S_ISREG(status.st_mode):
                return set()
            if status.st_size > MAX_HASHES * 65:
                self._full = True
                return set()
            lines = handle.read().decode("ascii", "replace").split("\n")
        return {line for line in lines if len(line) == 64 and all(c in "0123456789abcdef" for c in line)}

    def __contains__(self, source: str) -> bool:
        return _digest(source) in self.known

    def add(self, source: str) -> None:
        digest = _digest(source)
        if digest not in self.known:
            self.new.add(digest)

    def save(self) -> None:
        """Append what this process found clean (one write, so two processes appending at once do not mix lines)."""
        if self.path is None or not self.new:
            return
        try:
            self.path.parent.mkdir(mode=0o700, exist_ok=True)
            if not _private(self.path.parent):
                return
            ending = os.O_TRUNC if self._full else os.O_APPEND
            descriptor = os.open(self.path, os.O_WRONLY | ending | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        except OSError:
            return
        with os.fdopen(descriptor, "ab") as handle:
            if _ours(os.fstat(handle.fileno())):
                handle.write("".join(f"{digest}\n" for digest in sorted(self.new)).encode("ascii"))
        self.known |= self.new
        self.new, self._full = set(), False
