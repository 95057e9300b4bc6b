"""A student's nbgrader on the course hub: where the exchange is and which course it serves."""
import os

c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)

c.Exchange.root = os.environ["TRANSLAB_EXCHANGE"]
c.CourseDirectory.course_id = "translab"
# nbgrader names a submission after the Unix user; under the demo's SimpleLocalProcessSpawner every student is
# the hub's Unix user, so the hub's name for the student is used (with one Unix user each, the two agree).
c.CourseDirectory.student_id = os.environ["JUPYTERHUB_USER"]
