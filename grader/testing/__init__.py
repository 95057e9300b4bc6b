"""What the tests and the bench grade and drive, kept apart from what an instructor runs.

``corpus`` builds the submissions, honest and hostile, that the tests grade (``expected_scores.csv``: what each
must score); ``hub`` runs a real JupyterHub and acts its users, for ``make hub-demo``, the release-to-feedback
cycle test and the bench.
"""
