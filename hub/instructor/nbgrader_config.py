"""An instructor's nbgrader on the course hub: the course's own configuration, wherever the server starts.

nbgrader's formgrader reads nbgrader_config.py from the server process's working folder, which a hub's spawner
sets to the user's home; this file (on the instructor's JUPYTER_CONFIG_PATH) loads the course's instead, from
TRANSLAB_COURSE (hub/jupyterhub_config.py sets it), so the formgrader opens on the course's gradebook.
"""
import os

c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)

load_subconfig(os.path.join(os.environ["TRANSLAB_COURSE"], "nbgrader_config.py"))  # noqa: F821 (traitlets)
