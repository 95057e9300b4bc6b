"""The measured figures as the tables of the grader's pages (``grader/docs/``), rendered from ``results/bench.json``
(the pages quote no figure of their own: ``--readme`` rewrites them, and a test checks they agree)."""
from __future__ import annotations

import statistics
from pathlib import Path

from translab.paths import REPO_ROOT

# issue 16's targets on a 2-core machine: what the grader pages' tables judge the measured figures by
GOALS = {"one_submission_s": 20, "ratio_to_floor": 1.5, "by_nbgrader_ratio": 1.1, "class_jobs_2_s": 12 * 60, "lab_student_s": 4 * 60}


PAGES = REPO_ROOT / "grader" / "docs"  # the pages of how grading works; each table goes where its marks are


README_BEGIN, README_END = "<!-- bench tables: python -m experiments.bench --readme -->", "<!-- end of bench tables -->"


HUB_BEGIN, HUB_END = "<!-- hub table: python -m experiments.bench --readme -->", "<!-- end of hub table -->"


# what each step of a term on the hub is, in the order the cycle runs them (grader.testing.hub.cycle)
HUB_STEPS = {"generate": "instructor: Generate (formgrader; nbgrader generate_assignment)",
             "student_release": "the student release students' kernels read (`TRANSLAB_HOME`)",
             "start_servers": "every user's server started (first login)",
             "release": "instructor: Release (formgrader)", "fetch": "students: Fetch (Assignments panel)",
             "work": "students: answers saved (contents API)", "submit": "students: Submit (Assignments panel)",
             "collect": "instructor: Collect (formgrader)",
             "autograde": "instructor: Autograde (formgrader), each submission: graded in the sandbox",
             "manual_grading": "instructor: written answers graded (formgrader)",
             "feedback": "instructor: Generate Feedback (formgrader)",
             "release_feedback": "instructor: Release feedback (formgrader)",
             "fetch_feedback": "students: Fetch feedback (Assignments panel)"}


def _seconds(value) -> str:
    return "not measured" if value is None else f"{value:,.1f} s"


def _runs_shown(times: list, after: str = "", digits: int = 0, unit: str = " s", runs: str = "runs",
                more: str = "") -> str:
    """For a figure measured in several runs: which run the table shows (``grading.median_run``) and every run's
    time (or ``unit``), then ``more``; nothing for one run."""
    if len(times) < 2:
        return ""
    which = f"the faster of {len(times)} {runs}" if len(times) == 2 else f"the median of {len(times)} {runs}"
    return f" ({which}{after}: {', '.join(f'{t:,.{digits}f}' for t in times if t)}{unit}{more})"


def judged(value, goal, shown=None) -> str:
    """A goal's column: met or not, and the goal."""
    return "" if value is None else f"{'met' if value <= goal else 'not met'} (at most {shown or goal})"


def _warm_rows(auto: dict) -> list[tuple[str, str, str]]:
    """The warm grader's rows of the grading table: each press that finds it running, against the cold batch."""
    warm = auto.get("warm") or {}
    if not warm.get("seconds"):
        return []
    cold = auto.get("seconds")
    against = f" ({warm['seconds'] / cold:.2f} of the batch above)" if cold else ""
    plain = warm.get("nbgrader_autograde_s")
    return [("the same on the course's warm grader (`make autograde`, the course's default: `autograde --warm`), a "
             "press that finds it running" + _runs_shown(warm.get("runs_s") or []),
             _seconds(warm["seconds"]) + against, ""),
            ("the same by plain `nbgrader autograde` (the course's default for it too), a press that finds it running"
             + _runs_shown(warm.get("nbgrader_autograde_runs_s") or [], more=_paired(warm.get("nbgrader_paired_ratios"))),
             _seconds(plain) + (f" ({plain / warm['seconds']:.2f}x the row above)" if plain else ""),
             judged(round(plain / warm["seconds"], 2) if plain else None, GOALS["by_nbgrader_ratio"],
                    f"{GOALS['by_nbgrader_ratio']}x")),
            *_warm_sent_row(warm),
            *_warm_floor_row(warm),
            ("the press that starts the warm grader (the first, or the first after it went idle)",
             _seconds(warm.get("start_s")), "")]


def _warm_sent_row(warm: dict) -> list[tuple[str, str, str]]:
    """Each press of the two rows above cut where it had sent its student: its own start, then the grading."""
    sent, plain_sent = warm.get("sent_runs_s") or [], warm.get("nbgrader_sent_runs_s") or []
    if not sent or None in sent + plain_sent:
        return []  # measured before the presses were cut, or a press that sent nothing

    def cut(runs: list, sent_at: list) -> str:
        return (f"{statistics.median(sent_at):.1f} s + "
                f"{statistics.median(run - at for run, at in zip(runs, sent_at)):.1f} s")

    return [("of which before the press had sent its student to the warm grader (the press's start, its imports, the "
             "check, the connection; plain `nbgrader autograde`'s with nbgrader's own import and set-up, which come "
             "before any code of the course's), then after it (the grading, the merge, the exit), medians: "
             "`make autograde` against plain `nbgrader autograde` (the times to the student sent: "
             + ", ".join(f"{at:.1f}" for at in sent) + " s against " + ", ".join(f"{at:.1f}" for at in plain_sent)
             + " s)",
             f"{cut(warm['runs_s'], sent)} against {cut(warm['nbgrader_autograde_runs_s'], plain_sent)}", "")]


def _warm_floor_row(warm: dict) -> list[tuple[str, str, str]]:
    """A press on the warm grader against the floor, each press paired with the floor run after it."""
    ratio, paired = warm.get("ratio_to_floor"), warm.get("floor_paired_ratios") or []
    if ratio is None:
        return []  # measured before the warm presses were paired with floor runs
    return [("a press by `make autograde` on the warm grader against the floor (medians), and each press's against "
             "the floor run after it (the floor's runs: "
             + ", ".join(f"{f:.1f}" for f in warm.get("floor_runs_s") or [] if f) + " s)",
             _ratio_and_pairs(ratio, paired), judged(ratio, GOALS["ratio_to_floor"]))]


def _ratio_and_pairs(ratio: float | None, paired: list) -> str:
    """A ratio of medians, then each paired run's ratio."""
    if ratio is None:
        return "not measured"
    return f"{ratio:.2f}" + (f" ({', '.join(f'{r:.2f}' for r in paired)})" if paired else "")


def _paired(ratios: list | None) -> str:
    """Each run's ratio to the run it was paired with, when the runs alternated."""
    return f"; each against the press by `make autograde` before it: {', '.join(f'{r:.2f}x' for r in ratios)}" if ratios else ""


def _nbgrader_import_row(auto: dict) -> list[tuple[str, str, str]]:
    """What plain ``nbgrader autograde`` spends before the course's exporter can run: nbgrader's import, timed alone."""
    plain, project, alone = auto.get("nbgrader_autograde_s"), auto.get("seconds"), auto.get("nbgrader_import_s")
    if not (plain and project and alone):
        return []
    rest, runs = plain - alone, _runs_shown(auto.get("nbgrader_import_runs_s") or [], digits=1)
    return [("of which nbgrader's import (`nbgrader.apps`, every server extension of nbgrader's with it), timed "
             f"alone in a new interpreter{runs}: {alone:,.1f} s; plain `nbgrader autograde` without it",
             f"{rest:,.1f} s ({rest / project:.2f}x)", "")]


def _within_batch_row(auto: dict) -> list[tuple[str, str, str]]:
    """A batch's first submission (which waits for the batch's setup) against the next ones of the same batch."""
    batch = auto.get("within_batch") or {}
    if not batch.get("first_to_next"):
        return []
    def against(measured: dict) -> tuple[str, str]:
        ratio = measured["first_to_next"]
        return (f"{measured['first_s']:,.1f} s against {measured['next_s']:,.1f} s: {ratio:.2f}x",
                f"{'met' if ratio <= 1.1 else 'not met'} (at most 1.1x)")

    batches = _runs_shown(batch.get("first_to_next_runs") or [], digits=2, unit="x", runs="batches")
    rows = [(f"within one batch of {batch['students']} (`JOBS=1`, a batch of its own: `WARM=0`): its first "
             f"submission, with the batch's setup ({batch['setup_s']:.1f} s), against the median of the next{batches}",
             *against(batch))]
    alone, own = batch.get("zygote_imports_s"), (batch.get("student_s") or [None])[0]
    if alone and own:  # what the first waits for and the next do not (experiments.bench.imports)
        runs = _runs_shown(batch.get("zygote_imports_runs_s") or [], digits=1)
        rows.append((f"of which the batch's setup ({batch['setup_s']:.1f} s, which ends once the fork server has "
                     "imported nbgrader and the course's plugins), then the first student's own seconds, its first "
                     "kernel's wait for the kernels' zygote included (the zygote's imports of torch, ipykernel and "
                     f"matplotlib, timed alone in a new interpreter{runs}: {alone:,.1f} s)",
                     f"{own:,.1f} s against {batch['next_s']:,.1f} s: {own / batch['next_s']:.2f}x", ""))
    if (batch.get("warm") or {}).get("first_to_next"):
        rows.append(("the same batch on the course's warm grader (`make autograde`, the course's default), the warm "
                     "grader running: its first submission against the median of the next", *against(batch["warm"])))
    return rows


def _press_rows(presses: dict) -> list[tuple[str, str, str]]:
    """The formgrader's presses against one ``JOBS=1`` batch of the same class (``presses.formgrader_presses``)."""
    if not presses.get("seconds"):
        return []
    students, batch = presses["students"], presses["batch_jobs_1_s"]
    ratio, pressed = presses["ratio_to_batch"], sum(presses["presses_s"])
    return [(f"{students} complete submissions by `make autograde JOBS=1`", _seconds(batch), ""),
            (f"the same {students}, the formgrader's Autograde button pressed for each in Chromium, on the warm "
             f"grader (the first press, which starts it, counted as the others: it took "
             f"{presses['first_press_s']:,.1f} s; all {students} as pressed: {pressed:,.1f} s, "
             f"{pressed / batch:.2f} of the batch)", f"{presses['seconds']:,.1f} s ({ratio:.2f} of the batch)",
             f"{'met' if ratio <= 1.2 else 'not met'} (at most 1.2 of the batch)"),
            (f"the same {students} presses without the warm grader (each a batch of its own)",
             f"{presses['cold_s']:,.1f} s ({presses['cold_ratio_to_batch']:.2f} of the batch)", "")]


def readme_tables(result: dict) -> str:
    """The README's tables of grading and notebook times, rendered from a bench.json (the README quotes no
    figure of its own: ``--readme`` rewrites these from the file, and a test checks they agree)."""
    auto, floor = result.get("autograde") or {}, (result.get("autograde") or {}).get("floor") or {}
    runs = (result.get("class_autograde") or {}).get("runs") or {}
    mix = (result.get("class_autograde") or {}).get("mix") or {}
    overhead = result.get("isolation_overhead") or {}

    repeats = len(auto.get("runs_s") or [])
    plain, project = auto.get("nbgrader_autograde_s"), auto.get("seconds")
    by_nbgrader = round(plain / project, 2) if plain and project else None  # plain nbgrader against the project path
    rows = [("one complete submission, gradebook ready" + (f" (median of {repeats})" if repeats > 1 else ""),
             _seconds(auto.get("seconds")), judged(auto.get("seconds"), GOALS["one_submission_s"], "20 s")),
            ("the same by plain `nbgrader autograde`, a batch of its own (`c.BatchAutogradeExporter.warm = False`)",
             _seconds(auto.get("nbgrader_autograde_s")) + ("" if by_nbgrader is None else f" ({by_nbgrader:.2f}x)"),
             judged(by_nbgrader, GOALS["by_nbgrader_ratio"], f"{GOALS['by_nbgrader_ratio']}x")),
            *_nbgrader_import_row(auto),
            ("the first submission (empty gradebook)", _seconds(auto.get("first_run_s")), ""),
            *_within_batch_row(auto),
            (f"its floor: one kernel, the {floor.get('cells', '?')} answer and test cells and the cells they read",
             _seconds(floor.get("seconds")), ""),
            ("ratio to the floor (medians)" + (" and each run's to the floor run after it"
                                               if auto.get("paired_ratios") else ""),
             _ratio_and_pairs(auto.get("ratio_to_floor"), auto.get("paired_ratios") or []),
             judged(auto.get("ratio_to_floor"), GOALS["ratio_to_floor"])), *_warm_rows(auto)]  # goals: issue 53
    one_submission = len(rows)
    rows += _press_rows(result.get("formgrader_presses") or {})
    presses = len(rows) - one_submission
    students = (result.get("class_autograde") or {}).get("students")
    complete = mix.get("complete_solutions")
    for jobs in ("jobs_1", "jobs_2"):
        if jobs in runs:
            seconds, times = runs[jobs].get("seconds"), runs[jobs].get("runs_s") or []
            rows.append((f"a class of {students} ({complete} complete, the rest corpus cases), "
                         f"`JOBS={jobs[-1]}`" + _runs_shown(times),
                         "not measured" if seconds is None else f"{seconds:,.0f} s ({seconds / 60:.1f} min)",
                         judged(seconds, GOALS["class_jobs_2_s"], "12 min") if jobs == "jobs_2" else ""))
    cluster = (result.get("class_autograde") or {}).get("cluster") or {}
    if cluster.get("seconds"):
        local = (runs.get("jobs_2") or {}).get("seconds")
        times, ratios = cluster.get("runs_s") or [], cluster.get("paired_ratios") or []
        if ratios:  # each round against the JOBS=2 run just before it: the machine's drift cancels
            met = statistics.median(ratios) <= 1.05 and max(ratios) <= 1.1  # issue 53
            goal = (f"{'met' if met else 'not met'} (the rounds' median at most JOBS=2 + 5%, each at most + 10%: "
                    f"{', '.join(f'{r - 1:+.1%}' for r in ratios)}; median {statistics.median(ratios) - 1:+.1%})")
        else:
            goal = judged(cluster["seconds"], local * 1.1, f"{local * 1.1:,.0f} s, JOBS=2 + 10%") if local else ""
        workers, threads = cluster["workers"], cluster.get("threads", 1)
        rows.append((f"the same class on a Dask cluster of {workers} local worker process{'es' if workers > 1 else ''}"
                     + (f" of {threads} threads, grading {threads} students at once in one grading process"
                        if threads > 1 else "")
                     + f" (`--cluster`), {'the same' if cluster.get('same_gradebook') else 'NOT the same'} gradebook"
                     + _runs_shown(times, ", each after a `JOBS=2` run"),
                     f"{cluster['seconds']:,.0f} s ({cluster['seconds'] / 60:.1f} min)", goal))
        if cluster.get("dask_cpu_s") is not None:
            rows.append(("Dask's own scheduler, nannies and workers in that run (`grader.grading.cluster.DASK_SETTINGS`), "
                         "CPU time", f"{cluster['dask_cpu_s']:,.1f} s ({cluster['dask_cpu_share']:.1%} of the machine)",
                         ""))
        projection = ", ".join(f"{minutes:,.0f} min on {workers}" for workers, minutes in
                               cluster.get("projection_1000_students_min", {}).items())
        rows.append((f"1,000 students, projected from {cluster['worker_seconds_per_student']} s of a worker thread "
                     "per student", projection, ""))
    if overhead.get("overhead_per_submission_s") is not None:
        rows.append(("what the sandbox adds to a submission (median of "
                     f"{overhead.get('rounds')} rounds)", f"{overhead['overhead_per_submission_s']:.1f} s", ""))
    lines = ["| grading, measured by `make bench` | time | goal |", "| --- | ---: | --- |"]
    lines += [f"| {what} | {value} | {goal} |" for what, value, goal in rows]
    lines += _speed_note(result, "autograde", f"The first {one_submission} rows (one submission) were timed")
    if presses:
        lines += _speed_note(result, "formgrader_presses", f"The {presses} rows after them (the formgrader's "
                                                           "presses) were timed")
    notebooks = {name: row for name, row in (result.get("notebooks") or {}).items() if isinstance(row, dict)}
    if notebooks:
        lines += ["", "| notebook | student budget | grading budget (`NBGRADER_EXECUTION`) | kernel's peak memory "
                      "(student budget) |", "| --- | ---: | ---: | ---: |"]
        lines += [f"| {name} | {_seconds(row.get('student_s'))} | {_seconds(row.get('nbgrader_s'))} | "
                  f"{_megabytes(row.get('student_peak_mb'))} |" for name, row in sorted(notebooks.items())]
        student = [row.get("student_s") for row in notebooks.values()]
        grading = [row.get("nbgrader_s") for row in notebooks.values()]
        total_student = None if None in student else sum(student)
        lines.append(f"| the whole lab, student budget {judged(total_student, GOALS['lab_student_s'], '4 min')} | "
                     f"{_seconds(total_student)} | {_seconds(None if None in grading else sum(grading))} | |")
        lines += _speed_note(result, "notebooks")
    measured = result.get("autograde_measured") or {}
    lines += ["", f"From `results/bench.json` ({result.get('cpu_count', '?')} cores; "
              f"`{(result.get('command') or 'python -m experiments.bench').strip()}`"
              + (f", one submission again by `{measured['command']}`" if measured else "") + ")."]
    return "\n".join(lines)


def _speed_note(result: dict, section: str, what: str = "Timed") -> list[str]:
    """A section timed apart from the full run says how fast the machine trained then, so a slower machine's figure
    is read as one."""
    measured = result.get(f"{section}_measured") or {}
    if not measured.get("machine_tokens_per_s"):
        return []
    return ["", f"{what} by `{measured['command']}` on a machine training at {measured['machine_tokens_per_s']:,} "
                f"tokens/s, {measured['speed_of_record']} times the speed of the full run's fp32 record."]


def _megabytes(value) -> str:
    return "not measured" if value is None else f"{value:,.0f} MB"


SIZING_BEGIN, SIZING_END = "<!-- sizing table: python -m experiments.bench --readme -->", "<!-- end of sizing table -->"
NODES = ((4, 16), (8, 32), (16, 64), (32, 128))  # (vCPUs, GiB): common cloud node shapes
SYSTEM_SHARE = 0.9  # of a node's memory left to users once Kubernetes' own pods and reserves have theirs


def sizing_table(result: dict, values: Path = REPO_ROOT / "hub" / "z2jh" / "config.yaml") -> str:
    """Students per Kubernetes node by memory and by CPU, from hub/z2jh/config.yaml's guarantees, with the
    measured peaks they must cover."""
    import yaml
    single = yaml.safe_load(values.read_text(encoding="utf-8"))["singleuser"]
    memory = single["memory"]["guarantee"]
    gigabytes = float(memory.rstrip("GgMm")) / (1000 if memory[-1] in "Mm" else 1)
    cpu = float(single["cpu"]["guarantee"])
    peaks = [row.get("student_peak_mb") for row in (result.get("notebooks") or {}).values() if isinstance(row, dict)]
    largest = max((p for p in peaks if p is not None), default=None)
    lines = [f"| node | students by memory ({memory} guaranteed each) | by CPU ({cpu:g} CPU guaranteed each) | "
             "students per node |", "| --- | ---: | ---: | ---: |"]
    for cores, gib in NODES:
        by_memory = int(gib * 1.073741824 * SYSTEM_SHARE // gigabytes)
        by_cpu = int(cores // cpu)
        lines.append(f"| {cores} vCPU, {gib} GiB | {by_memory} | {by_cpu} | **{min(by_memory, by_cpu)}** |")
    lines += ["", f"The guarantee covers the largest kernel measured ({_megabytes(largest)}, the notebooks' table "
              f"in [the speed page](speed.md)) with room to spare; {SYSTEM_SHARE:.0%} of a node's memory is counted as the users'. From "
              "`results/bench.json` and `hub/z2jh/config.yaml`."]
    return "\n".join(lines)


def hub_table(result: dict) -> str:
    """The README's table of a term on the course hub, step by step, rendered from a bench.json."""
    cycle = result.get("hub_cycle") or {}
    if not cycle.get("seconds"):
        return f"Not measured: {cycle.get('reason', 'run `python -m experiments.bench --only-hub`')}."
    mix = ", ".join(f"{count} {kind}" for kind, count in (cycle.get("mix") or {}).items())
    lines = [f"| step, a class of {cycle['students']} ({mix}) | time |", "| --- | ---: |"]
    lines += [f"| {HUB_STEPS.get(step, step)} | {'under 0.1 s' if seconds < 0.05 else _seconds(seconds)} |"
              for step, seconds in cycle["seconds"].items()]
    lines += [f"| the whole term | {_seconds(cycle.get('total_s'))} |", "",
              f"From `results/bench.json` ({result.get('cpu_count', '?')} cores; `python -m grader.testing.hub cycle` "
              "as `make bench` runs it)."]
    return "\n".join(lines)


PHASES_BEGIN, PHASES_END = "<!-- phase table: python -m experiments.bench --readme -->", "<!-- end of phase table -->"


def phase_table(result: dict) -> str:
    """Where one submission's seconds go (the median run of ``--only-autograde``), against its floor."""
    graded = result.get("autograde") or {}
    split, floor = graded.get("phases"), (graded.get("floor") or {}).get("seconds")
    if not split:
        return "Not measured yet: run `python -m experiments.bench --only-autograde`."
    total = sum(split.values())
    lines = ["| phase of one complete submission (`autograded/autograde_phases.csv`) | time | share |",
             "| --- | ---: | ---: |"]
    lines += [f"| {name} | {_seconds(seconds)} | {seconds / total:.0%} |"
              for name, seconds in sorted(split.items(), key=lambda item: -item[1])]
    lines.append(f"| all, the batch's start included | {_seconds(total)} | 100% |")
    if floor:
        lines.append(f"| the floor: one kernel, the answer and test cells and those they read | {_seconds(floor)} | "
                     f"{floor / total:.0%} |")
    lines += ["", f"From `results/bench.json` ({result.get('cpu_count', '?')} cores; "
              "`python -m experiments.bench --only-autograde`)."]
    return "\n".join(lines)


def _fill(text: str, begin_mark: str, end_mark: str, body: str) -> str | None:
    begin, end = text.find(begin_mark), text.find(end_mark)
    if begin < 0 or end < begin:
        return None
    return text[:begin + len(begin_mark)] + "\n" + body + "\n" + text[end:]


def rendered(result: dict) -> dict[tuple[str, str], str]:
    """{(begin mark, end mark): the table between them}."""
    return {(README_BEGIN, README_END): readme_tables(result), (HUB_BEGIN, HUB_END): hub_table(result),
            (SIZING_BEGIN, SIZING_END): sizing_table(result), (PHASES_BEGIN, PHASES_END): phase_table(result)}


def shown(text: str, marks: tuple[str, str]) -> str | None:
    """The table a page shows between ``marks``, or None where the page has no such place."""
    begin, end = marks
    if begin not in text or end not in text:
        return None
    return text.split(begin, 1)[1].split(end, 1)[0].strip()


def update_readme(result: dict, pages: Path = PAGES) -> bool:
    """Rewrite the pages' bench tables (grading, a term on the hub, the hub's sizing) from ``result``; False if the
    grading table has no place on any page."""
    placed, tables = set(), rendered(result)
    for page in sorted(pages.glob("*.md")):
        text = original = page.read_text(encoding="utf-8")
        for marks, table in tables.items():
            filled = _fill(text, *marks, table)
            if filled is not None:
                text = filled
                placed.add(marks)
        if text != original:
            page.write_text(text, encoding="utf-8")
    return (README_BEGIN, README_END) in placed
