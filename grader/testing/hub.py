"""A course on JupyterHub, run for real: ``make hub-demo`` and the release-to-feedback cycle test.

``DemoHub`` lays out a hub's state (the instructor's course, released from ``solutions/``; nbgrader's exchange;
a student release the students' kernels read through ``TRANSLAB_HOME``), starts JupyterHub with
``hub/jupyterhub_config.py`` and its configurable-http-proxy on 127.0.0.1, and acts as its users would: the hub's
REST API to start servers, the formgrader's API for the instructor's buttons, the Assignments panel's API for
the students', the contents API for a student's edits.  ``cycle`` takes a class through release, fetch, submit,
collect, sandboxed autograde, manual grading, feedback and fetch_feedback, and times each step.

    python -m grader.testing.hub demo              # make hub-demo: a hub to log in to, until Ctrl-C
    python -m grader.testing.hub cycle --students 10 [--out FILE]   # make bench keeps its figures (hub_cycle)

Why one file: ``DemoHub`` is one object that acts every user of one hub (the hub's, the formgrader's and the
Assignments panel's APIs) for ``make hub-demo``, the cycle test and the bench; split by user, each part would
need the others' state.
"""
from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

from translab.contract import ASSIGNMENT, DATA_DIR_ENV, EXCHANGE_ENV, HOME_ENV
from translab.paths import REPO_ROOT, data_dir

from ..course import with_venv_bin
from grader.course.variants import SECRET_FILE_ENV, create_secret, secret_path
from grader.grading import warm_grader

HUB_DIR = REPO_ROOT / "hub"
CONFIG = HUB_DIR / "jupyterhub_config.py"
PROXY = HUB_DIR / "node_modules" / ".bin" / "configurable-http-proxy"
COURSE_ID = "translab"
COURSE_FOLDER = "translab"  # in the instructor's home; hub/jupyterhub_config.py starts the instructor's server there
INSTRUCTOR = "instructor"
BIN = Path(sys.executable).parent
DEMO_STATE = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "translab-hub"
# what a student's submission holds: the solutions' answers, the notebooks as fetched, or the solutions' answers
# behind a probe that reports what of the hub it can reach from the grading kernel
KINDS = ("complete", "blank", "probe")
PROBE_CELL = "mask_answer"  # notebook 01's answer that carries the probe
PROBE_MARK = "PROBE reached:"


class HubError(RuntimeError):
    """The demo hub cannot do what was asked; the message says why and what to do."""


def missing() -> str | None:
    """Why the hub cannot start on this machine, or None."""
    if not PROXY.exists():
        return (f"JupyterHub's proxy is not installed ({PROXY} is missing): install Node.js >= 20 with npm, then "
                f"run `make hub-proxy`")
    if not (BIN / "jupyterhub").exists():
        return f"jupyterhub is not installed in {BIN}: run `make setup`"
    return None


def _free_port_block(count: int = 3) -> int:
    """A port P with P .. P+count-1 free on 127.0.0.1 (the hub, its internal API, the proxy's API)."""
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + count < 65536 and all(_free(port + i) for i in range(count)):
            return port
    raise HubError("no three consecutive free ports on 127.0.0.1")


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class DemoHub:
    """A JupyterHub with one instructor and ``students``, its state in ``state`` (created if missing)."""
    state: Path
    students: list[str]
    port: int = 0
    password: str = field(default_factory=lambda: secrets.token_urlsafe(12))
    api_token: str = field(default_factory=lambda: secrets.token_hex(32))
    process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def homes(self) -> Path:
        return self.state / "home"

    @property
    def exchange(self) -> Path:
        return self.state / "exchange"

    @property
    def course(self) -> Path:
        return self.homes / INSTRUCTOR / COURSE_FOLDER

    @property
    def student_release(self) -> Path:
        return self.state / "srv" / "translab"

    def environment(self) -> dict:
        """The hub's environment: hub/jupyterhub_config.py reads its settings from here."""
        return {**os.environ, "TRANSLAB_HUB_STATE": str(self.state), "TRANSLAB_HUB_PORT": str(self.port),
                "TRANSLAB_HUB_INSTRUCTORS": INSTRUCTOR, "TRANSLAB_HUB_STUDENTS": ",".join(self.students),
                "TRANSLAB_HUB_PASSWORD": self.password, "TRANSLAB_HUB_API_TOKEN": self.api_token,
                EXCHANGE_ENV: str(self.exchange), HOME_ENV: str(self.student_release),
                DATA_DIR_ENV: str(data_dir()), SECRET_FILE_ENV: str(secret_path(self.course))}

    def instructor_environment(self) -> dict:
        """What the instructor's terminal on the hub has: the course's exchange, the shared environment first."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("TRANSLAB_")}
        return {**env, "HOME": str(self.homes / INSTRUCTOR), EXCHANGE_ENV: str(self.exchange),
                "PATH": with_venv_bin(env.get("PATH", ""))}

    # --- set up -------------------------------------------------------------------------------------------------
    def prepare(self, generate: bool = True) -> dict[str, float]:
        """The state a course starts a term with: the instructor's course folder (the assignment generated, unless
        ``generate`` is False: the cycle presses the formgrader's Generate), an empty exchange, the student release
        (read-only) and a home for each user.  Returns step timings."""
        reason = missing()
        if reason:
            raise HubError(reason)
        timings = {}
        self.state.mkdir(parents=True, exist_ok=True)
        self.homes.mkdir(exist_ok=True)
        for name in [INSTRUCTOR, *self.students]:
            (self.homes / name).mkdir(mode=0o700, exist_ok=True)
        self.exchange.mkdir(exist_ok=True)
        os.chmod(self.exchange, 0o777)  # nbgrader's exchange: every user writes their inbound, nobody lists it
        started = time.monotonic()
        if not (self.course / "nbgrader_config.py").exists():
            self.course.mkdir(parents=True)
            shutil.copy(REPO_ROOT / "nbgrader_config.py", self.course)
            shutil.copytree(REPO_ROOT / "solutions", self.course / "solutions")
        create_secret(self.course)  # the course's own (grader.course.variants); the hub reads it to give each student theirs
        if generate:  # make hub-demo: the instructor finds the assignment ready
            self._grader("release")
            timings["generate"] = time.monotonic() - started
        if not self.student_release.exists():
            started = time.monotonic()
            from grader.course import student_release
            student_release.write(self.student_release)
            for path in [self.student_release, *self.student_release.rglob("*")]:  # shared read-only
                os.chmod(path, 0o555 if path.is_dir() else 0o444)
            timings["student_release"] = time.monotonic() - started
        return timings

    def _grader(self, *args: str) -> str:
        """``python -m grader ARGS`` in the instructor's course, as typed in a terminal on the hub."""
        process = subprocess.run([sys.executable, "-m", "grader", *args], cwd=self.course, text=True,
                                 capture_output=True, env=self.instructor_environment())
        output = process.stdout + process.stderr
        if process.returncode != 0:
            raise HubError(f"python -m grader {' '.join(args)} failed in {self.course}:\n{output[-4000:]}")
        return output

    # --- run ------------------------------------------------------------------------------------------------------
    def start(self, timeout: float = 90) -> None:
        if not self.port:
            self.port = _free_port_block()
        log = open(self.state / "jupyterhub.log", "ab")
        self.process = subprocess.Popen([str(BIN / "jupyterhub"), "-f", str(CONFIG)], cwd=self.state,
                                        env=self.environment(), stdout=log, stderr=subprocess.STDOUT,
                                        start_new_session=True)
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise HubError(f"JupyterHub exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                if self.api("GET", "/hub/api/").status_code == 200:
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise HubError(f"JupyterHub did not answer on {self.url} within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Stop the hub; it stops the users' servers and its proxy.  Whatever is left is killed, and so is the
        course's warm grader, which the instructor's presses started and which would outlive the hub by its idle
        time (``grader.grading.warm_grader``)."""
        warm_grader.stop(self.course)
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def __enter__(self) -> "DemoHub":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def log_tail(self, chars: int = 4000) -> str:
        path = self.state / "jupyterhub.log"
        return path.read_text(errors="replace")[-chars:] if path.exists() else "(no log)"

    # --- as the users -------------------------------------------------------------------------------------------
    def api(self, method: str, path: str, **kwargs):
        """The hub's REST API with the demo service's token."""
        import requests
        return requests.request(method, self.url + path, timeout=120,
                                headers={"Authorization": f"token {self.api_token}"}, **kwargs)

    def start_servers(self, names: list[str], timeout: float = 300) -> None:
        """Start the users' servers (as their first login does) and wait until each answers."""
        for name in names:
            response = self.api("POST", f"/hub/api/users/{name}/server")
            if response.status_code not in (201, 202, 400):  # 400: already running
                raise HubError(f"starting {name}'s server: {response.status_code} {response.text}")
        deadline = time.monotonic() + timeout
        waiting = set(names)
        while waiting and time.monotonic() < deadline:
            for name in sorted(waiting):
                server = self.api("GET", f"/hub/api/users/{name}").json().get("servers", {}).get("", {})
                if server.get("ready"):
                    waiting.discard(name)
            time.sleep(0.5)
        if waiting:
            raise HubError(f"servers not ready after {timeout:.0f} s: {sorted(waiting)}\n{self.log_tail()}")

    def session(self, name: str) -> "UserSession":
        """``name``'s own token (as the hub gives one to the user's browser), for that user's server."""
        response = self.api("POST", f"/hub/api/users/{name}/tokens",
                            json={"note": "translab demo", "expires_in": 3600})
        if response.status_code != 201:
            raise HubError(f"token for {name}: {response.status_code} {response.text}")
        return UserSession(f"{self.url}/user/{name}", response.json()["token"])


class UserSession:
    """One user's server, through the hub's proxy, with that user's token."""

    def __init__(self, base: str, token: str):
        import requests
        self.base = base
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"token {token}"

    def request(self, method: str, path: str, ok=(200, 201), **kwargs):
        response = self.http.request(method, f"{self.base}/{path.lstrip('/')}", timeout=600, **kwargs)
        if ok and response.status_code not in ok:
            raise HubError(f"{method} {self.base}/{path}: {response.status_code} {response.text[:2000]}")
        return response

    def json(self, method: str, path: str, **kwargs):
        return self.request(method, path, **kwargs).json()

    # the students' Assignments panel
    def assignment_action(self, action: str) -> list | dict:
        result = self.json("POST", f"assignments/{action}", data={"course_id": COURSE_ID, "assignment_id": ASSIGNMENT})
        if isinstance(result, dict) and not result.get("success", True):
            raise HubError(f"{action}: {result.get('value') or result}")
        return result

    # the formgrader's buttons
    def formgrader(self, method: str, path: str, **kwargs):
        return self.json(method, f"formgrader/api/{path}", **kwargs)

    def formgrader_action(self, action: str) -> dict:
        """One of the formgrader's buttons on the assignment (release, collect, release_feedback), which must
        succeed."""
        result = self.formgrader("POST", f"assignment/{ASSIGNMENT}/{action}")
        if not result.get("success"):
            raise HubError(f"{action}: {result.get('error') or result}")
        return result

    # a student's edits
    def read_notebook(self, path: str) -> nbformat.NotebookNode:
        model = self.json("GET", f"api/contents/{path}", params={"content": 1})
        return nbformat.from_dict(model["content"])

    def write_notebook(self, path: str, notebook) -> None:
        self.request("PUT", f"api/contents/{path}", json={"type": "notebook", "format": "json", "content": notebook})

    def notebooks(self, folder: str) -> list[str]:
        listing = self.json("GET", f"api/contents/{folder}")
        return sorted(item["path"] for item in listing["content"] if item["type"] == "notebook")


# --- the cycle ------------------------------------------------------------------------------------------------------
def class_of(size: int) -> dict[str, str]:
    """A simulated class: student01.. with kinds cycling complete, complete, blank, probe (one probe at least
    once the class has four)."""
    pattern = ("complete", "complete", "blank", "probe")
    return {f"student{i + 1:02d}": pattern[i % len(pattern)] for i in range(size)}


def probe_source(hub: DemoHub, answer: str) -> str:
    """A hostile answer: tries the other students' homes, the exchange, the gradebook, the hub's port and the hub's
    API token from the grading kernel, prints what it reached, then answers correctly."""
    return (
        "import glob as _glob, socket as _socket\n"
        "_reached = []\n"
        f"for _pattern in [{str(hub.homes / '*' / ASSIGNMENT / '*.ipynb')!r}, {str(hub.exchange / '*' / '*' / '*')!r},\n"
        f"                 {str(hub.course / 'gradebook.db')!r}, {str(hub.course / 'solutions' / '*' / '*')!r}]:\n"
        "    for _path in _glob.glob(_pattern):\n"
        "        try:\n"
        "            if open(_path, 'rb').read(1):  # the sandbox covers a file with an empty one\n"
        "                _reached.append(_path)\n"
        "        except OSError:\n"
        "            pass\n"
        "try:\n"
        f"    open({str(hub.exchange / 'probe-was-here')!r}, 'w').close(); _reached.append('wrote the exchange')\n"
        "except OSError:\n"
        "    pass\n"
        "try:\n"
        f"    _socket.create_connection(('127.0.0.1', {hub.port}), timeout=2).close(); _reached.append('hub port')\n"
        "except OSError:\n"
        "    pass\n"
        # the hub's API token is in the environment of the instructor's server, where the formgrader's button
        # starts the batch (issue 47): neither the kernel's environment nor the one it was started with holds it
        "import os as _os\n"
        "_reached += [f'environment: {_name}' for _name in _os.environ if _name.startswith(('JUPYTERHUB', 'JPY_API'))]\n"
        "try:\n"
        "    if b'JUPYTERHUB_API_TOKEN' in open('/proc/self/environ', 'rb').read():\n"
        "        _reached.append('/proc/self/environ: JUPYTERHUB_API_TOKEN')\n"
        "except OSError:\n"
        "    pass\n"
        f"print({PROBE_MARK!r}, _reached)\n\n" + answer)


def answered(fetched, solution, kind: str, hub: DemoHub):
    """The fetched notebook with the student's work in it: each answer cell takes the solution's source."""
    if kind == "blank":
        return fetched
    answers = {cell.metadata.get("nbgrader", {}).get("grade_id"): cell.source for cell in solution.cells
               if cell.metadata.get("nbgrader", {}).get("solution")}
    for cell in fetched.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id]
            if kind == "probe" and grade_id == PROBE_CELL:
                cell.source = probe_source(hub, cell.source)
    return fetched


def _each(function, items, workers: int = 4) -> list:
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(function, items))


def cycle(hub: DemoHub, kinds: dict[str, str]) -> dict:
    """generate -> release -> fetch -> (work) -> submit -> collect -> autograde -> manual grades -> feedback -> release
    feedback -> fetch_feedback, through the running ``hub``; returns each step's seconds and what each user saw."""
    timings: dict[str, float] = {}

    def timed(step: str, function, *args):
        started = time.monotonic()
        result = function(*args)
        timings[step] = round(time.monotonic() - started, 1)
        return result

    names = list(kinds)
    timed("start_servers", hub.start_servers, [INSTRUCTOR, *names])
    instructor = hub.session(INSTRUCTOR)
    students = {name: hub.session(name) for name in names}

    timed("generate", instructor.formgrader_action, "assign")  # nbgrader generate_assignment, the course's config
    timed("release", instructor.formgrader_action, "release")
    timed("fetch", _each, lambda name: students[name].assignment_action("fetch"), names)

    solutions = {path.stem: nbformat.read(path, as_version=4)
                 for path in sorted((hub.course / "solutions" / ASSIGNMENT).glob("*.ipynb"))}

    def work(name: str) -> None:
        session = students[name]
        for path in session.notebooks(ASSIGNMENT):
            stem = Path(path).stem
            session.write_notebook(path, answered(session.read_notebook(path), solutions[stem], kinds[name], hub))
    timed("work", _each, work, names)
    timed("submit", _each, lambda name: students[name].assignment_action("submit"), names)

    timed("collect", instructor.formgrader_action, "collect")
    # no terminal: the formgrader's Autograde button, once per submission, grades in the sandbox (the batch, through
    # nbgrader_plugins/batch_autograde_exporter.py), and Generate Feedback follows `make feedback`'s rule
    pressed = timed("autograde", lambda: [instructor.formgrader("POST", f"submission/{ASSIGNMENT}/{name}/autograde")
                                          for name in names])
    early = instructor.formgrader("POST", f"assignment/{ASSIGNMENT}/generate_feedback")  # answers await their grade
    timed("manual_grading", grade_written_answers, instructor)
    timed("feedback", instructor.formgrader_action, "generate_feedback")
    timed("release_feedback", instructor.formgrader_action, "release_feedback")
    timed("fetch_feedback", _each, lambda name: students[name].assignment_action("fetch_feedback"), names)

    scores = {row["student"]: (row["score"], row["max_score"])
              for row in instructor.formgrader("GET", f"submissions/{ASSIGNMENT}")}
    feedback = {name: sorted((hub.homes / name / ASSIGNMENT / "feedback").glob("*/*.html")) for name in names}
    return {"students": len(names), "mix": {kind: list(kinds.values()).count(kind) for kind in KINDS},
            "seconds": timings,
            "autograde_buttons": dict(zip(names, pressed)), "early_feedback": early, "scores": scores,
            "feedback": feedback}


def grade_written_answers(instructor: UserSession) -> int:
    """The instructor's manual grading in the formgrader: every written answer awaiting a grade gets full marks
    (the simulated students wrote the reference answers).  Returns how many were graded."""
    graded = 0
    for notebook in instructor.formgrader("GET", f"notebooks/{ASSIGNMENT}"):
        for submission in instructor.formgrader("GET", f"submitted_notebooks/{ASSIGNMENT}/{notebook['name']}"):
            if not submission["needs_manual_grade"]:
                continue
            for grade in instructor.formgrader("GET", "grades", params={"submission_id": submission["id"]}):
                if grade["needs_manual_grade"]:
                    instructor.formgrader("PUT", f"grade/{grade['id']}", json={**grade, "manual_score": grade["max_score"]})
                    graded += 1
    return graded


# --- command line ---------------------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.testing.hub", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="start a hub to log in to (make hub-demo), until Ctrl-C")
    demo.add_argument("--state", type=Path, default=DEMO_STATE,
                      help=f"the hub's database, homes, exchange and student release (default {DEMO_STATE}; outside "
                           "the course: the student release must not be inside it)")
    demo.add_argument("--students", type=int, default=2)
    demo.add_argument("--port", type=int, default=8000)
    run = commands.add_parser("cycle", help="take a simulated class through the whole cycle and time each step")
    run.add_argument("--students", type=int, default=10)
    run.add_argument("--state", type=Path, default=None, help="default: a temporary folder, removed afterwards")
    run.add_argument("--out", type=Path, default=None, help="write the timings as JSON here")
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            return _demo(args)
        return _cycle(args)
    except HubError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def _demo(args) -> int:
    hub = DemoHub(args.state.resolve(), list(class_of(args.students)), port=args.port)
    secret = hub.state / "password"
    hub.prepare()
    if secret.exists():
        hub.password = secret.read_text().strip()
    else:
        secret.write_text(hub.password + "\n")
        os.chmod(secret, 0o600)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # `kill` stops the hub and its servers, as Ctrl-C does
    with hub:
        print(f"JupyterHub on {hub.url}: log in as {INSTRUCTOR} (formgrader, course in ~/{COURSE_FOLDER}) or as "
              f"{', '.join(hub.students)}, password {hub.password} (kept in {secret}).  Ctrl-C stops it.", flush=True)
        try:
            hub.process.wait()
        except KeyboardInterrupt:
            pass
    return 0


def measure_cycle(students: int = 10, state: Path | None = None) -> dict:
    """A term for a simulated class of ``students`` on a new hub (in ``state``, else a temporary folder): the
    cycle's result, with the set-up steps' seconds and each student's count of feedback pages."""
    import tempfile
    with tempfile.TemporaryDirectory(prefix="translab-hub-") as tmp:
        kinds = class_of(students)
        hub = DemoHub(Path(state or tmp).resolve(), list(kinds))
        prepared = hub.prepare(generate=False)
        with hub:
            result = cycle(hub, kinds)
    result["seconds"] = {**{step: round(seconds, 1) for step, seconds in prepared.items()}, **result["seconds"]}
    result["total_s"] = round(sum(result["seconds"].values()), 1)
    result["feedback"] = {name: len(pages) for name, pages in result["feedback"].items()}
    result["autograde_buttons"] = {name: pressed.get("success")
                                   for name, pressed in result["autograde_buttons"].items()}
    early = result["early_feedback"]  # nbgrader's traceback, then translab's refusal
    result["early_feedback"] = {"success": early.get("success"),
                                "message": (early.get("error") or "").strip().splitlines()[-1:]}
    return result


def _cycle(args) -> int:
    text = json.dumps(measure_cycle(args.students, args.state), indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
