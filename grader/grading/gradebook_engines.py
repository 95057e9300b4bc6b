"""Called in each nbgrader process the batch starts (``grader.grading.nbgrader_process``): nbgrader's ``Gradebook``
then reuses one SQLAlchemy engine per database in that process.  nbgrader opens the gradebook 29 times to grade one
student (its converter, then four preprocessors a notebook), and each ``Gradebook`` made an engine of its own, whose
statement cache starts empty, so every query was compiled again at each open: 0.27 s a student on 2 cores.  What a
``Gradebook`` does is unchanged: it still creates the tables it finds missing and checks its course at each open,
and ``Gradebook.close`` still closes the engine's connections (``Engine.dispose``), which the next open makes anew."""
from __future__ import annotations

from typing import Any


def share_engines() -> None:
    import nbgrader.api as api
    create = api.create_engine
    if getattr(create, "shared_engines", None) is not None:
        return
    engines: dict[tuple[str, str], Any] = {}

    def shared_engine(url, **options):
        key = (str(url), repr(sorted(options.items())))
        if key not in engines:
            engines[key] = create(url, **options)
        return engines[key]

    shared_engine.shared_engines = engines
    api.create_engine = shared_engine
