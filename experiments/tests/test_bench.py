"""The benchmark compares like with like, and its reduced run writes a sane bench.json.

No speed target is asserted here (machines differ); ``make bench`` records and judges them.
"""
from __future__ import annotations

import copy
import json
import os
import subprocess
import sys

import nbformat
import pytest
import torch

from experiments.bench import cli, grading, notebooks, tables, throughput
from translab.model import ModelConfig, build_language_model
from translab.training import set_seed, train_steps

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not


def test_bare_loop_and_translab_loop_train_identically():
    batches = throughput.make_batches(3, batch_size=4, seq_len=16)
    set_seed(0)
    model = build_language_model(ModelConfig(4000, nhid=16, nlayers=2, nhead=2, dropout=0.1))
    twin = copy.deepcopy(model)
    opt_a = torch.optim.AdamW(model.parameters(), lr=1e-3)
    opt_b = torch.optim.AdamW(twin.parameters(), lr=1e-3)
    torch.manual_seed(1)
    ours = train_steps(model, batches, opt_a, None, clip=1.0, progress=False)
    torch.manual_seed(1)
    bare = throughput.bare_loop(twin, batches, opt_b, clip=1.0, bf16=False)
    assert ours == pytest.approx(bare, rel=1e-5), "the two loops must do the same work"
    for p, q in zip(model.parameters(), twin.parameters()):
        assert torch.allclose(p, q, atol=1e-6)


def test_autograde_time_is_a_number_or_null_with_reason(monkeypatch, tmp_path):
    monkeypatch.setattr(grading, "REPO_ROOT", tmp_path)
    result = grading.autograde_time()
    assert result["seconds"] is None and "course files missing: nbgrader_config.py, solutions, grader" in result["reason"]


def test_quick_bench_writes_sane_json(tmp_path):
    assert cli.main(["--quick", "--out", str(tmp_path), "--no-progress"]) == 0
    result = json.loads((tmp_path / "bench.json").read_text())
    for precision in ("fp32", "bf16"):
        for loop in ("translab", "bare"):
            assert result[precision][loop]["tokens_per_s"] > 0
            assert len(result[precision][loop]["rounds"]) == result["workload"]["rounds"]
        ratio = result[precision]["translab"]["tokens_per_s"] / result[precision]["bare"]["tokens_per_s"]
        assert result[precision]["ratio"] == pytest.approx(ratio)
        # that the two loops do the same work is held without a clock (test_bare_loop_and_translab_loop_train_
        # identically): a speed ratio measured beside the other tests is the machine's load, not the loops'
    assert result["loop_ratio"] == result["fp32"]["ratio"]
    assert result["loop_ratio_met"] == (result["loop_ratio"] >= 0.95)
    assert result["autograde"]["seconds"] is None and result["autograde"]["reason"]
    assert result["class_autograde"]["students"] == 0 and "skipped" in result["class_autograde"]["reason"]
    assert "skipped" in result["notebooks"]["reason"]
    assert "skipped" in result["isolation_overhead"]["reason"]


def test_a_class_mixes_complete_solutions_with_every_realistic_corpus_case(tmp_path):
    from grader.testing import corpus
    course = tmp_path / "course"
    grading.course_copy(course)
    realistic = [case for case in corpus.CASES if case not in corpus.SPEND_BUDGET]
    students = 2 * (len(realistic) + 1) + 1
    mix = grading.build_class(course / "submitted", course, students, full_every=2)
    folders = sorted((course / "submitted").iterdir())
    assert len(folders) == students == sum(mix.values())
    assert mix["complete_solutions"] == students // 2 + 1
    assert all(mix[case] >= 1 for case in realistic), "every case of the corpus is in the class"
    assert corpus.SPEND_BUDGET and not set(mix) & corpus.SPEND_BUDGET, \
        "cases built to spend a time budget cost that budget each: not in a realistic class"
    complete = course / "submitted" / "student000" / "transfer_learning"
    assert sorted(p.name for p in complete.glob("*.ipynb")) == sorted(
        p.name for p in (course / "solutions" / "transfer_learning").glob("*.ipynb"))
    assert not (course / "corpus_cases").exists()


def test_the_pages_tables_are_rendered_from_the_committed_bench_json():
    from translab.paths import RESULTS_DIR
    result = json.loads((RESULTS_DIR / "bench.json").read_text())
    for marks, table in tables.rendered(result).items():
        found = [page.name for page in sorted(tables.PAGES.glob("*.md"))
                 if tables.shown(page.read_text(encoding="utf-8"), marks) is not None]
        assert len(found) == 1, (marks[0], found)
        shown = tables.shown((tables.PAGES / found[0]).read_text(encoding="utf-8"), marks)
        assert shown == table, f"{found[0]}'s table is stale: run `python -m experiments.bench --readme`"


def test_the_cluster_is_judged_against_jobs_2_and_the_sizing_by_the_scarcer_resource(tmp_path):
    result = {"class_autograde": {"students": 100, "mix": {"complete_solutions": 34},
                                  "runs": {"jobs_2": {"seconds": 300.0}},
                                  "cluster": {"workers": 2, "seconds": 340.0, "same_gradebook": True,
                                              "worker_seconds_per_student": 6.8,
                                              "projection_1000_students_min": {"2": 56.7, "32": 3.5}}},
              "notebooks": {"06": {"student_s": 30.0, "student_peak_mb": 1500.0}}}
    table = tables.readme_tables(result)
    assert "2 local worker processes (`--cluster`), the same gradebook | 340 s (5.7 min) | not met (at most 330 s" in table
    assert "| 1,000 students, projected from 6.8 s of a worker thread per student | 57 min on 2, 4 min on 32 |  |" in table
    one = dict(result["class_autograde"]["cluster"], workers=1, threads=2)
    shown = tables.readme_tables({**result, "class_autograde": {**result["class_autograde"], "cluster": one}})
    assert "a Dask cluster of 1 local worker process of 2 threads, grading 2 students at once in one grading " \
           "process (`--cluster`)" in shown
    values = tmp_path / "config.yaml"
    values.write_text("singleuser:\n  memory: {guarantee: 2G, limit: 3G}\n  cpu: {guarantee: 0.5, limit: 2}\n")
    sizing = tables.sizing_table(result, values)
    assert "| 8 vCPU, 32 GiB | 15 | 16 | **15** |" in sizing and "| 4 vCPU, 16 GiB | 7 | 8 | **7** |" in sizing
    assert "1,500 MB" in sizing


def test_the_cluster_is_judged_round_by_round_against_the_local_run_before_it():
    """Two runs apart, a drift of the machine's speed would decide: each round is judged against the local run before
    it, and the goal (issue 53) is the rounds' median within 5 %, none over 10 %."""
    def result(ratios):
        return {"class_autograde": {"students": 100, "mix": {"complete_solutions": 34},
                                    "runs": {"jobs_2": {"seconds": 400.0, "runs_s": [400.0, 430.0]}},
                                    "cluster": {"workers": 2, "seconds": 420.0, "runs_s": [420.0, 470.0],
                                                "paired_ratios": ratios, "same_gradebook": True,
                                                "dask_cpu_s": 8.4, "dask_cpu_share": 0.01,
                                                "worker_seconds_per_student": 8.4,
                                                "projection_1000_students_min": {"2": 70.0}}}}
    table = tables.readme_tables(result([1.02, 1.04, 1.093]))
    assert "`JOBS=2` (the faster of 2 runs: 400, 430 s) | 400 s (6.7 min) |" in table
    assert ("the same gradebook (the faster of 2 runs, each after a `JOBS=2` run: 420, 470 s) | 420 s (7.0 min) | "
            "met (the rounds' median at most JOBS=2 + 5%, each at most + 10%: +2.0%, +4.0%, +9.3%; median +4.0%) |"
            ) in table
    assert "| not met (the rounds' median at most JOBS=2 + 5%, each at most + 10%: +2.0%, +12.0%, +3.0%; median " \
           "+3.0%) |" in tables.readme_tables(result([1.02, 1.12, 1.03]))  # one round over 10 %
    assert "+6.0%, +7.0%, +3.0%; median +6.0%) |" in tables.readme_tables(result([1.06, 1.07, 1.03]))
    assert "| not met (the rounds' median" in tables.readme_tables(result([1.06, 1.07, 1.03]))
    assert "workers in that run (`grader.grading.cluster.DASK_SETTINGS`), CPU time | 8.4 s (1.0% of the machine) |  |" in table


def test_a_measured_figure_is_the_median_run_of_its_rounds():
    runs = [{"seconds": 430.0, "by": "a"}, {"seconds": None, "reason": "x"}, {"seconds": 400.0, "by": "b"},
            {"seconds": 500.0, "by": "c"}]
    shown = grading.median_run(runs, students=100)
    assert shown["by"] == "a" and shown["runs_s"] == [430.0, None, 400.0, 500.0] and shown["per_student_s"] == 4.3
    assert grading.median_run([{"seconds": None, "reason": "x"}], 100) == {"seconds": None, "reason": "x"}


def test_the_hub_table_lists_each_step_of_the_term():
    result = {"cpu_count": 2, "hub_cycle": {"students": 10, "mix": {"complete": 5, "blank": 3, "probe": 2},
                                            "seconds": {"release": 0.4, "autograde": 120.0}, "total_s": 120.4}}
    table = tables.hub_table(result)
    assert "| step, a class of 10 (5 complete, 3 blank, 2 probe) | time |" in table
    assert f"| {tables.HUB_STEPS['autograde']} | 120.0 s |" in table and "| the whole term | 120.4 s |" in table
    assert tables.hub_table({"hub_cycle": {"reason": "no proxy"}}) == "Not measured: no proxy."


def test_the_readme_tables_judge_each_figure_by_its_goal():
    result = {"autograde": {"seconds": 19.0, "runs_s": [18.0, 19.0, 25.0], "first_run_s": 30.0, "ratio_to_floor": 3.8,
                            "paired_ratios": [3.6, 3.8, 5.0], "floor": {"seconds": 5.0, "cells": 60},
                            "nbgrader_autograde_s": 21.0},
              "class_autograde": {"students": 100, "mix": {"complete_solutions": 34},
                                  "runs": {"jobs_2": {"seconds": 750.0}}},
              "notebooks": {"01": {"student_s": 100.0, "nbgrader_s": 5.0}, "02": {"student_s": 130.0, "nbgrader_s": 4.0}}}
    table = tables.readme_tables(result)
    assert "| one complete submission, gradebook ready (median of 3) | 19.0 s | met (at most 20 s) |" in table
    assert ("| the same by plain `nbgrader autograde`, a batch of its own (`c.BatchAutogradeExporter.warm = False`) "
            "| 21.0 s (1.11x) | not met (at most 1.1x) |") in table
    assert ("| ratio to the floor (medians) and each run's to the floor run after it | 3.80 (3.60, 3.80, 5.00) "
            "| not met (at most 1.5) |") in table
    assert "`JOBS=2` | 750 s (12.5 min) | not met (at most 12 min) |" in table
    assert "| the whole lab, student budget not met (at most 4 min) | 230.0 s | 9.0 s |" not in table
    assert "| the whole lab, student budget met (at most 4 min) | 230.0 s | 9.0 s |" in table
    assert "warm grader" not in table, "no warm row without a warm measurement"
    result["autograde"]["warm"] = {"start_s": 24.0, "seconds": 15.2, "runs_s": [15.0, 15.2, 16.0],
                                   "nbgrader_autograde_s": 17.5, "nbgrader_autograde_runs_s": [17.5, 17.0, 18.0],
                                   "nbgrader_paired_ratios": [1.17, 1.13, 1.13], "floor_runs_s": [10.0, 9.5, 10.5],
                                   "ratio_to_floor": 1.52, "floor_paired_ratios": [1.5, 1.6, 1.52]}
    table = tables.readme_tables(result)
    assert ("| the same on the course's warm grader (`make autograde`, the course's default: `autograde --warm`), a "
            "press that finds it running (the median of 3 runs: 15, 15, 16 s) | 15.2 s (0.80 of the batch above) |  |"
            ) in table
    assert ("(the course's default for it too), a press that finds it running (the median of 3 runs: 18, 17, 18 s; "
            "each against the press by `make autograde` before it: 1.17x, 1.13x, 1.13x) | 17.5 s (1.15x the row above) "
            "| not met (at most 1.1x) |" in table)
    assert "| the press that starts the warm grader (the first, or the first after it went idle) | 24.0 s |" in table
    assert "sent its student" not in table, "no row cutting the presses without their times to the student sent"
    result["autograde"]["warm"].update(sent_runs_s=[0.9, 1.1, 1.0], nbgrader_sent_runs_s=[2.4, 2.2, 2.5])
    assert ("then after it (the grading, the merge, the exit), medians: `make autograde` against plain `nbgrader "
            "autograde` (the times to the student sent: 0.9, 1.1, 1.0 s against 2.4, 2.2, 2.5 s) | 1.0 s + 14.1 s "
            "against 2.4 s + 15.1 s |  |") in tables.readme_tables(result)
    result["autograde"]["warm"]["nbgrader_sent_runs_s"][1] = None  # a press that printed no line of its students sent
    assert "sent its student" not in tables.readme_tables(result)
    assert ("| a press by `make autograde` on the warm grader against the floor (medians), and each press's against the "
            "floor run after it (the floor's runs: 10.0, 9.5, 10.5 s) | 1.52 (1.50, 1.60, 1.52) | not met (at most 1.5) |"
            ) in table
    assert "within one batch" not in table, "no first-to-next row without its measurement"
    assert "nbgrader's import" not in table, "no import row without its measurement"
    result["autograde"].update(nbgrader_import_s=1.8, nbgrader_import_runs_s=[1.7, 1.8, 2.1])
    assert ("| of which nbgrader's import (`nbgrader.apps`, every server extension of nbgrader's with it), timed alone "
            "in a new interpreter (the median of 3 runs: 1.7, 1.8, 2.1 s): 1.8 s; plain `nbgrader autograde` without "
            "it | 19.2 s (1.01x) |  |") in tables.readme_tables(result)
    result["autograde"]["within_batch"] = {"students": 4, "setup_s": 2.5, "first_s": 16.8, "next_s": 15.2,
                                           "first_to_next": 1.11}
    assert ("| within one batch of 4 (`JOBS=1`, a batch of its own: `WARM=0`): its first submission, with the batch's "
            "setup (2.5 s), against the median of the next | 16.8 s against 15.2 s: 1.11x | not met (at most 1.1x) |"
            ) in tables.readme_tables(result)
    result["autograde"]["within_batch"]["first_to_next_runs"] = [1.25, 1.11, 1.02]
    assert ("against the median of the next (the median of 3 batches: 1.25, 1.11, 1.02x) | 16.8 s against 15.2 s: "
            "1.11x |") in tables.readme_tables(result)
    result["autograde"]["within_batch"].update(zygote_imports_s=3.0, zygote_imports_runs_s=[3.1, 3.0, 2.9])
    assert "zygote's imports" not in tables.readme_tables(result), "no zygote row without each student's seconds"
    result["autograde"]["within_batch"]["student_s"] = [14.3, 15.2, 15.0, 15.9]
    assert ("| of which the batch's setup (2.5 s, which ends once the fork server has imported nbgrader and the "
            "course's plugins), then the first student's own seconds, its first kernel's wait for the kernels' zygote "
            "included (the zygote's imports of torch, ipykernel and matplotlib, timed alone in a new interpreter (the "
            "median of 3 runs: 3.1, 3.0, 2.9 s): 3.0 s) | 14.3 s against 15.2 s: 0.94x |  |"
            ) in tables.readme_tables(result)
    del result["autograde"]["within_batch"]["zygote_imports_s"]
    assert "zygote's imports" not in tables.readme_tables(result), "no zygote row without its measurement"
    result["autograde"]["within_batch"].update(first_s=16.0, first_to_next=1.05)
    assert "| 16.0 s against 15.2 s: 1.05x | met (at most 1.1x) |" in tables.readme_tables(result)
    assert "warm grader running" not in tables.readme_tables(result), "no warm row without its measurement"
    result["autograde"]["within_batch"]["warm"] = {"setup_s": 0.0, "first_s": 12.5, "next_s": 13.0,
                                                   "first_to_next": 0.96}
    assert ("| the same batch on the course's warm grader (`make autograde`, the course's default), the warm grader "
            "running: its first submission against the median of the next | 12.5 s against 13.0 s: 0.96x | met (at "
            "most 1.1x) |") in tables.readme_tables(result)


def test_readme_rewrites_only_the_marked_block(tmp_path):
    pages = tmp_path / "docs"
    pages.mkdir()
    (pages / "plain.md").write_text("no markers\n")
    assert not tables.update_readme({}, pages)
    page = pages / "speed.md"
    page.write_text(f"before\n{tables.README_BEGIN}\nold table\n{tables.README_END}\nafter\n")
    assert tables.update_readme({"autograde": {"seconds": 12.0}}, pages)
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith(f"{tables.README_END}\nafter\n") and "old table" not in text
    assert "| 12.0 s | met (at most 20 s) |" in text and (pages / "plain.md").read_text() == "no markers\n"


def test_a_class_s_seconds_are_summed_by_what_each_student_submitted(tmp_path):
    from grader.grading.batch import REPORT_NAME
    kinds = grading.class_cases(5)
    assert kinds[0] == kinds[3] == "complete_solutions" and "complete_solutions" not in (kinds[1], kinds[2], kinds[4])
    (tmp_path / "autograded").mkdir()
    rows = ["student_id,status,seconds"] + [f"student{i:03d},ok,{10 * (i + 1)}" for i in range(5)]
    (tmp_path / "autograded" / REPORT_NAME).write_text("\n".join(rows) + "\n")
    totals = grading.seconds_by_case(tmp_path, 5)
    assert totals["complete_solutions"] == 10 + 40
    assert sum(totals.values()) == 150
    assert list(totals.values()) == sorted(totals.values(), reverse=True)


def test_an_import_is_timed_in_a_new_interpreter_or_is_none_when_it_fails(tmp_path):
    from experiments.bench.imports import import_seconds
    env = {"PATH": "/usr/bin:/bin"}
    seconds = import_seconds(("json", "csv"), env, tmp_path)
    assert seconds is not None and 0 < seconds < 60
    assert import_seconds(("translab_no_such_module",), env, tmp_path) is None


def test_warm_presses_alternate_the_two_paths_and_the_floor_and_pair_each_round(monkeypatch, tmp_path):
    """The press that starts the warm grader, then rounds: ``make autograde``'s path, plain nbgrader's, the floor;
    each round's ratios and each press's time to its student sent kept beside the medians; the warm grader stopped,
    and a failed press gives no figure."""
    pressed = []
    times = iter([20.0, 10.0, 11.0, 12.0, 12.5, 11.0, 13.2])
    sent = iter([1.5, 0.9, 2.4, 1.0, 2.2, 0.8, 2.6])

    def autograde(course, env, jobs, timeout, *options, keep_gradebook=False, by_nbgrader=False):
        pressed.append("nbgrader" if by_nbgrader else options)
        assert keep_gradebook and options in ((("--warm",),) if not by_nbgrader
                                              else (("--BatchAutogradeExporter.warm=True",),)), options
        seconds = next(times)
        return seconds, (next(sent) if seconds else None), ""

    floors = iter([9.0, None, 10.0])  # the second floor run failed: its press is not paired
    monkeypatch.setattr(grading, "timed_and_sent", autograde)
    monkeypatch.setattr(grading, "grading_floor", lambda: pressed.append("floor") or {"seconds": next(floors)})
    monkeypatch.setattr(grading.warm_grader, "stop", lambda course: pressed.append("stopped"))
    monkeypatch.setattr(grading, "SETTLE_S", 0)
    found = grading.warm_runs(tmp_path, {}, 600, 3)
    assert pressed == [("--warm",), *[("--warm",), "nbgrader", "floor"] * 3, "stopped"]
    assert found["floor_runs_s"] == [9.0, None, 10.0] and found["floor_paired_ratios"] == [1.11, 1.1]
    assert found["ratio_to_floor"] == round(11.0 / 9.5, 2)
    assert (found["start_s"], found["runs_s"], found["nbgrader_autograde_runs_s"]) == (20.0, [10.0, 12.0, 11.0],
                                                                                        [11.0, 12.5, 13.2])
    assert (found["seconds"], found["nbgrader_autograde_s"]) == (11.0, 12.5)
    assert found["nbgrader_paired_ratios"] == [1.1, 1.04, 1.2]
    assert (found["sent_runs_s"], found["nbgrader_sent_runs_s"]) == ([0.9, 1.0, 0.8], [2.4, 2.2, 2.6])
    times, floors, sent = iter([20.0, 10.0, None, 11.0, 12.0]), iter([9.0, 9.0]), iter([1.0] * 4)
    pressed.clear()
    assert grading.warm_runs(tmp_path, {}, 600, 2)["seconds"] is None and pressed[-1] == "stopped"


def test_a_command_s_lines_come_with_the_seconds_at_which_each_came(tmp_path):
    """What ``timed_and_sent`` cuts a press by: its output and errors as one stream, each line timed as it came,
    the exit code kept; past its timeout the command is killed and the bench told so."""
    script = ("import sys, time; print('before', flush=True); time.sleep(1); "
              "print('[autograde] 1 student(s) sent to tls://127.0.0.1:1', file=sys.stderr, flush=True); "
              "time.sleep(0.3); sys.exit(3)")
    code, seconds, lines = grading.run_timestamped([sys.executable, "-c", script], tmp_path, dict(os.environ), 60)
    assert code == 3 and [line for _, line in lines] == ["before", "[autograde] 1 student(s) sent to tls://127.0.0.1:1"]
    assert lines[0][0] + 0.5 <= lines[1][0] < seconds  # the second came a second after the first
    assert grading.SENT in lines[1][1]
    with pytest.raises(subprocess.TimeoutExpired):
        grading.run_timestamped([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path, dict(os.environ), 1)


def test_the_first_of_a_batch_carries_the_batch_s_setup_against_the_median_of_the_next(monkeypatch, tmp_path):
    """Four batches of the same class (the first records the assignment); each later one's report and phases give a
    figure, and the batch of median ratio is shown: here (2.0 + 15.0) / median(13.0, 14.0, 12.0) = 17.0 / 13.0,
    between 1.15 and 1.46.  Then two on the warm grader (the first starts it), the second's the warm figure:
    (0.0 + 12.5) / 13.0; and the warm grader stopped."""
    from contextlib import contextmanager
    from grader.grading.batch import REPORT_NAME
    runs = []

    @contextmanager
    def course(students, full_every):
        assert (students, full_every) == (4, 1), "complete submissions only"
        yield tmp_path, {}, None

    def autograde(course, env, jobs, timeout, *options, keep_gradebook=False):
        runs.append((jobs, keep_gradebook, options))
        cold = {1: [17.0, 13.0, 14.0, 12.0], 3: [13.0, 13.0, 14.0, 12.0]}.get(len(runs) - 1, [15.0, 13.0, 14.0, 12.0])
        own = [12.5, 13.0, 14.0, 12.0] if options == ("--warm",) else cold
        (course / "autograded").mkdir(exist_ok=True)
        rows = ["student_id,seconds"] + [f"student{i:03d},{s}" for i, s in enumerate(own)]
        (course / "autograded" / REPORT_NAME).write_text("\n".join(rows) + "\n")
        return 60.0, ""

    monkeypatch.setattr(grading, "class_course", course)
    monkeypatch.setattr(grading, "timed_autograde", autograde)
    monkeypatch.setattr(grading, "phases_of", lambda course: {"batch setup": 0.0 if runs[-1][2] else 2.0, "checks": 9.0})
    monkeypatch.setattr(grading.warm_grader, "stop", lambda course: runs.append("stopped"))
    monkeypatch.setattr(grading, "SETTLE_S", 0)
    alone = iter([3.2, 2.9, 3.0])
    monkeypatch.setattr(grading, "import_seconds", lambda modules, env, cwd: runs.append(modules[:3]) or next(alone))
    found = grading.within_batch(600)
    startup = ("ipykernel.kernelapp", "ipykernel.ipkernel", "torch")
    assert runs == [(1, False, ()), *[(1, True, ())] * 3, startup, startup, startup, (1, True, ("--warm",)),
                    (1, True, ("--warm",)), "stopped"]
    assert found["first_to_next_runs"] == [1.46, 1.31, 1.15]
    assert found["zygote_imports_s"] == 3.0 and found["zygote_imports_runs_s"] == [3.2, 2.9, 3.0]
    assert (found["first_s"], found["next_s"], found["first_to_next"]) == (17.0, 13.0, 1.31)
    assert found["student_s"] == [15.0, 13.0, 14.0, 12.0] and found["setup_s"] == 2.0
    warm = found["warm"]
    assert (warm["first_s"], warm["next_s"], warm["first_to_next"], warm["setup_s"]) == (12.5, 13.0, 0.96, 0.0)
    monkeypatch.setattr(grading, "phases_of", lambda course: {"batch setup": 2.0})
    monkeypatch.setattr(grading, "import_seconds", lambda modules, env, cwd: None)  # an import that failed
    answers = iter([(60.0, "")] * 4 + [(None, "the warm grader did not start")])
    monkeypatch.setattr(grading, "timed_autograde", lambda *args, **kwargs: next(answers))
    runs.clear()
    second = grading.within_batch(600)
    assert second["warm"] == {"reason": "the warm grader did not start"} and runs == ["stopped"]
    assert second["zygote_imports_s"] is None and second["zygote_imports_runs_s"] == [None] * 3
    monkeypatch.setattr(grading, "timed_autograde", lambda *args, **kwargs: (None, "autograde exited 1"))
    assert grading.within_batch(600) == {"students": 4, "reason": "autograde exited 1"}


def test_each_submission_run_is_paired_with_a_floor_run_right_after_it(monkeypatch):
    """The VM's speed drifts over minutes: the floor is measured beside each run, not in a block after them."""
    from contextlib import contextmanager
    order, seconds = [], iter([30.0, 6.0, 7.0, 9.0])

    @contextmanager
    def course(students, full_every):
        yield None, None, None

    def autograde(course, env, jobs, timeout, *options, keep_gradebook=False, by_nbgrader=False):
        assert options == (("--BatchAutogradeExporter.warm=False",) if by_nbgrader else ()), "not the cold path"
        order.append("nbgrader" if by_nbgrader else "run" if keep_gradebook else "first")
        return (8.0 if by_nbgrader else next(seconds)), ""

    floors = iter([3.0, 3.5, 3.0])
    monkeypatch.setattr(grading, "class_course", course)
    monkeypatch.setattr(grading, "timed_autograde", autograde)
    monkeypatch.setattr(grading, "grading_floor", lambda: order.append("floor") or {"seconds": next(floors)})
    monkeypatch.setattr(grading, "SETTLE_S", 0)
    split = iter([{"checks": 1.0}, {"checks": 2.0}, {"checks": 3.0}])  # each run's phases, read right after it
    monkeypatch.setattr(grading, "phases_of", lambda course: next(split))
    warm = {"seconds": 5.0}
    monkeypatch.setattr(grading, "warm_runs", lambda *args: order.append("warm") or warm)
    batch = {"first_to_next": 1.2}
    monkeypatch.setattr(grading, "within_batch", lambda timeout: order.append("batch") or batch)
    imports = iter([1.6, 2.0, 1.7])
    monkeypatch.setattr(grading, "import_seconds", lambda modules, env, cwd: order.append(modules) or next(imports))
    result = grading.autograde_time()
    assert order == ["first"] + ["run", "floor", "nbgrader", ("nbgrader.apps",)] * 3 + ["warm", "batch"]
    assert result["nbgrader_import_s"] == 1.7 and result["nbgrader_import_runs_s"] == [1.6, 2.0, 1.7]
    assert result["warm"] is warm and result["within_batch"] is batch
    assert result["phases"] == {"checks": 2.0}  # the median run's (6, 7 and 9 s: the second)
    assert result["seconds"] == 7.0 and result["floor"]["seconds"] == 3.0 and result["ratio_to_floor"] == 2.33
    assert result["paired_ratios"] == [2.0, 2.0, 3.0]
    assert result["nbgrader_autograde_s"] == 8.0 and result["nbgrader_autograde_runs_s"] == [8.0] * 3


def test_a_re_measured_section_records_and_shows_the_machine_s_speed(tmp_path, monkeypatch):
    """Issue 51: the notebooks timed again on a machine at half the record's speed looked like a lab twice as slow."""
    (tmp_path / "bench.json").write_text(json.dumps({"fp32": {"translab": {"tokens_per_s": 8000.0}}}))
    speeds = iter([3000.0, 4000.0])
    monkeypatch.setattr(cli, "machine_speed", lambda: next(speeds))
    row = {"student_s": 10.0, "nbgrader_s": 2.0, "student_peak_mb": 500.0, "cells": {}}
    cli.replace_section(tmp_path, "notebooks", lambda: {"01_mask_and_positional_encoding": row})
    measured = json.loads((tmp_path / "bench.json").read_text())["notebooks_measured"]
    assert measured["machine_tokens_per_s"] == 3500 and measured["speed_of_record"] == 0.44
    shown = tables.readme_tables(json.loads((tmp_path / "bench.json").read_text()))
    assert "on a machine training at 3,500 tokens/s, 0.44 times the speed of the full run's fp32 record" in shown


def test_the_phase_table_names_every_second_of_a_submission_against_its_floor():
    from experiments.bench import tables
    assert "--only-autograde" in tables.phase_table({"autograde": {"seconds": None}})
    split = {"batch setup": 4.0, "kernel start": 6.0, "checks": 5.0, "nbgrader's own": 2.0, "cells": 3.0}
    table = tables.phase_table({"cpu_count": 2, "autograde": {"phases": split, "floor": {"seconds": 8.0}}})
    rows = [line.split("|")[1].strip() for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:6] == ["kernel start", "checks", "batch setup", "cells", "nbgrader's own"]
    assert "| all, the batch's start included | 20.0 s | 100% |" in table and "| 8.0 s | 40% |" in table


def test_a_kernel_s_peak_memory_is_its_own_not_its_parent_s():
    """The peak cell, run in a small process started by one holding 300 MB, reports the small one's peak."""
    held = bytearray(300 * 1024 * 1024)
    held[::4096] = b"\1" * len(held[::4096])  # resident, not just reserved
    said = subprocess.run([sys.executable, "-c", notebooks.PEAK_CELL], capture_output=True, text=True, check=True).stdout
    peak = notebooks.kernel_peak_mb(nbformat.from_dict({"cells": [{"outputs": [{"text": said}]}]}))
    del held
    assert peak is not None and peak < 100, said


def test_the_presses_are_judged_against_one_batch_the_first_press_apart(monkeypatch, tmp_path):
    """Issue 53: ten presses on the warm grader at most 1.2 of one JOBS=1 batch; the press that starts the warm
    grader is reported apart and the class's total counts it as a press that found it running."""
    from contextlib import contextmanager
    from experiments.bench import presses
    (tmp_path / "submitted" / "a").mkdir(parents=True)
    (tmp_path / "nbgrader_config.py").write_text("c = get_config()\n")

    @contextmanager
    def course(students, full_every):
        yield tmp_path, {}, None

    pressed = iter([[30.0, 31.0, 29.0, 30.0], [20.0, 10.0, 11.0, 12.0]])  # cold, then warm
    configs = []  # the course's configuration as each round of presses found it

    def press_each(course, *args):
        configs.append((course / "nbgrader_config.py").read_text())
        return next(pressed)

    monkeypatch.setattr(presses, "CHROMIUM", tmp_path / "nbgrader_config.py")  # a file that exists
    monkeypatch.setattr(presses, "class_course", course)
    monkeypatch.setattr(presses, "timed_autograde", lambda *args, **kwargs: (40.0, ""))
    monkeypatch.setattr(presses, "_press_each", press_each)
    monkeypatch.setattr(presses, "SETTLE_S", 0)
    found = presses.formgrader_presses(students=4)
    assert found["first_press_s"] == 20.0 and found["seconds"] == 44.0 and found["ratio_to_batch"] == 1.1
    assert found["cold_s"] == 120.0 and found["cold_ratio_to_batch"] == 3.0
    assert "c.BatchAutogradeExporter.warm = False" in configs[0], "the cold presses on the course's default"
    assert configs[1] == "c = get_config()\n", "the warm presses not on the course's own configuration"
    rows = tables.readme_tables({"autograde": {}, "formgrader_presses": found})
    assert "| 4 complete submissions by `make autograde JOBS=1` | 40.0 s |  |" in rows
    assert ("it took 20.0 s; all 4 as pressed: 53.0 s, 1.32 of the batch) | 44.0 s (1.10 of the batch) | met (at "
            "most 1.2 of the batch) |") in rows
    assert "| the same 4 presses without the warm grader (each a batch of its own) | 120.0 s (3.00 of the batch) |" in rows
