"""What the tests and the bench grade and drive, kept apart from what an instructor runs.

``corpus`` builds the submissions, honest and hostile, that the tests grade (``expected_scores.csv``: what each
must score); ``hub`` runs a real JupyterHub and acts its users, for ``make hub-demo``, the release-to-feedback
cycle test and the bench; ``free_port`` is the one way they all pick a port.
"""
import socket


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (for a server or daemon the caller starts)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
