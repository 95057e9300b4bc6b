"""The first code cell of every notebook, and the "Open in Colab" badge above it.

In Colab (or any hosted Jupyter that reaches PyPI) the cell installs the student package from where the instructor
published it (``make student-release PACKAGE=... COLAB=...`` writes that into each released notebook), or else the
release's wheel the student uploaded beside the notebook (the newest, where there are several), then fetches the
data its part reads; where translab is importable already (``make setup``, a hub, the grader) it does nothing.
The solution notebooks hold it with no package set; a test keeps them equal to ``source(part)``.
"""
from __future__ import annotations

import re

MARKER = "# Setup: Colab"  # the cell's first line: how the release finds the cell to fill in
PACKAGE_LINE = re.compile(r'^TRANSLAB_PACKAGE = .*$', re.M)

TEMPLATE = '''\
# Setup: Colab or any Jupyter without translab installs it here (a few minutes, once per runtime) and fetches this
# part's data, sha256-checked. Where translab is installed already (a laptop, your course's hub) it does nothing.
TRANSLAB_PACKAGE = {package!r}  # where translab comes from: written by your instructor's release
import importlib.util
if importlib.util.find_spec("translab") is None:
    import glob, os, subprocess, sys, time
    uploaded = sorted(glob.glob("translab-*.whl"), key=os.path.getmtime)  # a wheel uploaded beside the notebook
    package = TRANSLAB_PACKAGE or (uploaded[-1] if uploaded else "")
    if not package:
        raise RuntimeError("translab is not installed here, and this copy of the notebook does not say where it comes "
                           "from: upload the translab-*.whl file of your course's release into this runtime's files "
                           "(Colab: the folder icon on the left, then Upload) and run this cell again, or open the "
                           "notebook from your course's link")
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", package], check=True)
    importlib.invalidate_caches()
    print(f"translab installed from {{package}} in {{time.monotonic() - started:.0f}} s")
    from translab.local import fetch_data
    fetch_data(part={part})'''

BADGE_IMAGE = "https://colab.research.google.com/assets/colab-badge.svg"
BADGE = re.compile(r"^\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)\n\n", re.M)


def source(part: int, package: str = "") -> str:
    """The setup cell of ``part``'s notebook, installing ``package`` (a wheel URL, a pip requirement; "": none)."""
    return TEMPLATE.format(package=package, part=part)


def with_package(cell_source: str, package: str) -> str:
    """A setup cell with its package set (the release's one edit of a code cell)."""
    return PACKAGE_LINE.sub(f"TRANSLAB_PACKAGE = {package!r}  # where translab comes from: written by your "
                            "instructor's release", cell_source, count=1)


def colab_url(repository: str, notebook: str) -> str:
    """Colab's link to a notebook of a GitHub repository: ``repository`` is owner/name[@ref] (ref default main)."""
    name, _, ref = repository.partition("@")
    return f"https://colab.research.google.com/github/{name}/blob/{ref or 'main'}/{notebook}"


def badge(url: str) -> str:
    return f"[![Open In Colab]({BADGE_IMAGE})]({url})\n\n"


def with_badge(markdown: str, url: str) -> str:
    """The notebook's first (title) cell with the badge on top, replacing one already there."""
    return badge(url) + BADGE.sub("", markdown, count=1)


def wheel_url(repository: str, wheel: str) -> str:
    """Where pip finds the release's wheel once the release is pushed to GitHub (``dist/`` of that repository)."""
    name, _, ref = repository.partition("@")
    return f"https://raw.githubusercontent.com/{name}/{ref or 'main'}/dist/{wheel}"
