"""A student cell that lists, from inside a grading kernel, everything the kernel can open (issue 81).

The grader claims the kernel sees an allow-list (``grader.isolation.launcher.kernel_allow_list``): the interpreter,
the grader's files it imports, the lab's files, its HOME, sockets and working folder, the system's folders; nothing
of the course or the checkout beyond those.  ``view_cell`` writes a cell that checks the claim as an attacker would:

* every file below ``/`` it can open for reading (the system's folders and the interpreter's prefixes aside, which
  are allowed whole), and below every path an editable install's ``.pth`` or finder names (a link back to the
  checkout, wherever it is), and every folder it can list there;
* every descriptor it holds (``/proc/self/fd``), as its link reads;
* every process it can see in ``/proc``, with its command line, and each ``/proc/<pid>/environ`` it can read.

The cell prints one line, ``MARKER`` and a JSON report; ``grader/tests/isolation/test_kernel_view.py`` reads it.
"""
from __future__ import annotations

MARKER = "translab-kernel-view:"
# the machine's own programs, libraries and settings, and the kernel API files: as the launcher leaves them
SYSTEM = ("/proc", "/sys", "/dev", "/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

VIEW = r'''
import glob, json, os, re, site, sys
_SYSTEM = {system!r}
_WHOLE = sorted({{os.path.realpath(p) for p in (sys.prefix, sys.base_prefix)}})

def _under(path, prefixes):
    return any(path == p or path.startswith(p.rstrip("/") + "/") for p in prefixes)

def _opens(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    os.close(fd)
    return True

def _walk(start, skip, files, folders):
    for top, dirs, names in os.walk(start, onerror=lambda error: None):
        if _under(top, skip) or _under(os.path.realpath(top), _WHOLE):
            dirs[:] = []
            continue
        folders.add(top)
        for name in names + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            path = os.path.join(top, name)
            if _opens(path):
                files.add(path)

_files, _folders = set(), set()
_walk("/", _SYSTEM, _files, _folders)
_links = set()
for _site in site.getsitepackages():
    for _path in glob.glob(os.path.join(_site, "*.pth")) + glob.glob(os.path.join(_site, "__editable__*.py")):
        try:
            _text = open(_path, encoding="utf-8", errors="replace").read()
        except OSError:
            continue
        _links |= {{m for m in re.findall(r"(/[^\s'\",:;()]+)", _text) if os.path.isabs(m)}}
for _link in sorted(_links):
    _walk(_link, (), _files, _folders)
_fds = {{}}
for _fd in os.listdir("/proc/self/fd"):
    try:
        _fds[_fd] = os.readlink(f"/proc/self/fd/{{_fd}}")
    except OSError:
        pass
_processes = {{}}
for _pid in [p for p in os.listdir("/proc") if p.isdigit()]:
    try:
        _cmd = open(f"/proc/{{_pid}}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace")[:300]
    except OSError:
        _cmd = None
    _processes[_pid] = {{"cmdline": _cmd, "environ": _opens(f"/proc/{{_pid}}/environ"), "self": _pid == str(os.getpid())}}
print({marker!r} + json.dumps({{"files": sorted(_files), "folders": sorted(_folders), "links": sorted(_links),
                                "fds": _fds, "processes": _processes, "home": os.environ.get("HOME"),
                                "cwd": os.getcwd(), "prefixes": _WHOLE}}))
'''


def view_cell() -> str:
    """The probe cell's source."""
    return VIEW.format(system=SYSTEM, marker=MARKER)


def report(outputs: list) -> dict | None:
    """The probe's report from a cell's outputs, or None when it printed none."""
    from grader.testing import kernel_probe  # lazy: torch, which the cell's source does not need
    return kernel_probe.report(outputs, MARKER)
