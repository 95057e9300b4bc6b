"""JupyterHub for a translab course: the reference configuration (``make hub-demo`` runs it, the cycle test too).

One hub on 127.0.0.1, users who are instructors (``TRANSLAB_HUB_INSTRUCTORS``) or students
(``TRANSLAB_HUB_STUDENTS``), nbgrader's exchange in one shared folder, and each role with its own Jupyter
configuration (``hub/instructor``, ``hub/student``: which panels and server extensions it gets, and the
exchange settings).  Everything a deployment varies is read from the environment below; ``grader.testing.hub`` sets it
for the demo.  What a real deployment changes is in the README, "Running a course on JupyterHub".
"""
import os
import sys
from pathlib import Path

from grader.course.variants import SECRET_FILE_ENV
from translab.variants import VARIANT_ENV, derive_code

c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)

HERE = Path(__file__).resolve().parent
STATE = Path(os.environ["TRANSLAB_HUB_STATE"]).resolve()  # database, secrets, homes, exchange
HOMES = Path(os.environ.get("TRANSLAB_HUB_HOMES", STATE / "home"))
EXCHANGE = os.environ.get("TRANSLAB_EXCHANGE", str(STATE / "exchange"))
COURSE_FOLDER = "translab"  # the course's folder in an instructor's home: nbgrader_config.py, solutions/, ...
PORT = int(os.environ.get("TRANSLAB_HUB_PORT", "8000"))
INSTRUCTORS = {name for name in os.environ.get("TRANSLAB_HUB_INSTRUCTORS", "instructor").split(",") if name}
STUDENTS = {name for name in os.environ.get("TRANSLAB_HUB_STUDENTS", "student01,student02").split(",") if name}
BIN = Path(sys.executable).parent  # the shared environment: jupyterhub-singleuser, nbgrader, translab

# --- the hub and its proxy: loopback only ------------------------------------------------------------------------
c.JupyterHub.ip = "127.0.0.1"
c.JupyterHub.port = PORT
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = PORT + 1
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{PORT + 2}"
c.ConfigurableHTTPProxy.command = [str(HERE / "node_modules" / ".bin" / "configurable-http-proxy")]
c.ConfigurableHTTPProxy.pid_file = str(STATE / "proxy.pid")
c.JupyterHub.db_url = f"sqlite:///{STATE / 'jupyterhub.sqlite'}"
c.JupyterHub.cookie_secret_file = str(STATE / "jupyterhub_cookie_secret")

# --- who may log in ------------------------------------------------------------------------------------------------
# The demo's DummyAuthenticator takes one shared password; a course uses its institution's login (OAuthenticator,
# LTI) and keeps these two lists.
c.JupyterHub.authenticator_class = "dummy"
c.DummyAuthenticator.password = os.environ["TRANSLAB_HUB_PASSWORD"]
c.Authenticator.allowed_users = INSTRUCTORS | STUDENTS
c.Authenticator.admin_users = set()  # instructors need no power over students' servers: the exchange connects them
# The demo's driver (grader.testing.hub) starts servers and makes each user a token, as the hub's admin page would.
if os.environ.get("TRANSLAB_HUB_API_TOKEN"):
    c.JupyterHub.services = [{"name": "translab-demo", "api_token": os.environ["TRANSLAB_HUB_API_TOKEN"]}]
    c.JupyterHub.load_roles = [{"name": "translab-demo", "services": ["translab-demo"],
                                "scopes": ["admin:users", "admin:servers", "tokens"]}]

# --- the users' servers --------------------------------------------------------------------------------------------
# SimpleLocalProcessSpawner runs every server as the hub's own Unix user, with HOME in HOMES: enough for a demo
# and for CI, not for a class (students could read each other's files).  A course sets TRANSLAB_HUB_SPAWNER=local
# (one Unix user each, homes 0700) or uses KubeSpawner (Zero to JupyterHub).
if os.environ.get("TRANSLAB_HUB_SPAWNER", "simple") == "simple":
    c.JupyterHub.spawner_class = "simple"
    c.SimpleLocalProcessSpawner.home_dir_template = str(HOMES / "{username}")
else:
    c.JupyterHub.spawner_class = "localprocess"
c.Spawner.cmd = [str(BIN / "jupyterhub-singleuser")]
c.Spawner.default_url = "/lab"
c.Spawner.start_timeout = 180  # a class logging in at once, on 2 cores
c.Spawner.http_timeout = 180
c.Spawner.environment = {
    "PATH": f"{BIN}:/usr/local/bin:/usr/bin:/bin",  # nbgrader runs alembic from PATH
    "TRANSLAB_EXCHANGE": EXCHANGE,  # read by hub/student/nbgrader_config.py and the course's nbgrader_config.py
}
for name in ("TRANSLAB_HOME", "TRANSLAB_DATA_DIR"):  # where the student release and the data are
    if os.environ.get(name):
        c.Spawner.environment[name] = os.environ[name]
# The course secret (grader.course.variants): the hub gives each student the variant code the grader derives for the same
# user name, so a student who joins after the release needs nothing.  The file stays readable by the hub only.
SECRET_FILE = os.environ.get(SECRET_FILE_ENV)
SECRET = Path(SECRET_FILE).read_text(encoding="ascii").strip().encode() if SECRET_FILE else None
if os.geteuid() == 0:  # the demo as root (CI): Jupyter refuses root unless told
    c.Spawner.args = ["--ServerApp.allow_root=True"]


def give_each_role_its_tools(spawner):
    """Instructors: the formgrader, started in their course folder (so it loads the course's nbgrader_config.py).
    Students: the Assignments panel and Validate, nothing of the instructor's (hub/student)."""
    name = spawner.user.name
    home = Path(spawner.home_dir) if hasattr(spawner, "home_dir") else Path(os.path.expanduser(f"~{name}"))
    if name in INSTRUCTORS:
        spawner.environment["JUPYTER_CONFIG_PATH"] = str(HERE / "instructor")
        spawner.environment["TRANSLAB_COURSE"] = str(home / COURSE_FOLDER)  # read by hub/instructor/nbgrader_config.py
        spawner.notebook_dir = str(home / COURSE_FOLDER)
    else:
        spawner.environment["JUPYTER_CONFIG_PATH"] = str(HERE / "student")
        spawner.notebook_dir = str(home)
        if SECRET is not None:  # the student's own configuration for part 2's counts, as the grader derives it
            spawner.environment[VARIANT_ENV] = derive_code(SECRET, name)
        if hasattr(spawner, "home_dir"):  # the demo's homes; a Unix account's home is made with the account
            home.mkdir(mode=0o700, parents=True, exist_ok=True)


c.Spawner.pre_spawn_hook = give_each_role_its_tools
