"""``python -m experiments.bench``: what to measure, and ``results/bench.json`` written from it."""
from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path

import torch

from translab import data
from translab.paths import RESULTS_DIR
from translab.training import fast_bf16_available

from . import tables
from .grading import autograde_time, class_autograde, hub_cycle, isolation_overhead, similarity_time
from .notebooks import notebook_times
from .presses import formgrader_presses
from .throughput import ARCHITECTURE, throughput

SCHEMA_VERSION = 1


def replace_section(out: Path, section: str, measure, flag: str | None = None) -> None:
    """Measure one section of bench.json and write it into the existing file (the others kept as they were),
    with how and where it was measured under ``<section>_measured``."""
    path = out / "bench.json"
    result = json.loads(path.read_text()) if path.exists() else {"schema_version": SCHEMA_VERSION}
    speed_before = machine_speed()
    started = time.time()
    result[section] = measure()
    wall_time_s = round(time.time() - started, 1)
    speed = round((speed_before + machine_speed()) / 2)
    record = (result.get("fp32") or {}).get("translab", {}).get("tokens_per_s")
    result[f"{section}_measured"] = {"command": f"python -m experiments.bench --only-{flag or section}",
                                     "cpu_count": os.cpu_count(), "wall_time_s": wall_time_s,
                                     "machine_tokens_per_s": speed,
                                     "speed_of_record": round(speed / record, 2) if record else None}
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result[section], indent=1))
    if out.resolve() == RESULTS_DIR.resolve():
        tables.update_readme(result)


def machine_speed() -> float:
    """Training tokens per second now, on the fp32 record's workload but shorter: a section re-measured on a slower
    or busier machine than the full run's says so (``speed_of_record`` below 1), rather than passing for a regression."""
    probe = throughput(steps=10, rounds=3, warmup=2, batch_size=32, seq_len=64, bf16=False, progress=False)
    return probe["translab"]["tokens_per_s"]


def main(argv: list[str] | None = None) -> int:
    overview = importlib.import_module(__package__).__doc__  # the package's: what each module times
    parser = argparse.ArgumentParser(prog="python -m experiments.bench", description=overview,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few steps, no autograde (for tests)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="directory for bench.json")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = PyTorch's default)")
    parser.add_argument("--no-autograde", action="store_true")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--no-notebooks", action="store_true", help="skip timing the solution notebooks")
    parser.add_argument("--class-size", type=int, default=100,
                        help="students in the class-grading measurement (0 skips it; results/bench.json holds the last "
                             "run's time)")
    parser.add_argument("--class-jobs", type=int, nargs="+", default=[2],
                        help="--jobs values to time the class with (2: the goal is set for 2 cores)")
    parser.add_argument("--cluster-workers", type=int, default=1,
                        help="grade the class again on a local Dask cluster of this many workers (0: not)")
    parser.add_argument("--cluster-threads", type=int, default=2,
                        help="threads of each of those workers: students it grades at once, in one grading process "
                             "(2: as JOBS=2 on 2 cores)")
    parser.add_argument("--class-rounds", type=int, default=3,
                        help="times to grade the class, local then cluster in turn (each cluster run is judged "
                             "against the local run just before it, the goal is on their median; about 13 min a round)")
    parser.add_argument("--overhead-students", type=int, default=2,
                        help="complete submissions graded with and without the sandbox, twice (0 skips it; about 8 min at 2)")
    parser.add_argument("--only-notebooks", action="store_true",
                        help="time the solution notebooks only (student and grading budgets, training cells one by "
                             "one) and replace that section of an existing bench.json (its notebooks_measured says how long)")
    parser.add_argument("--only-autograde", action="store_true",
                        help="time one submission (and the floor) only and replace that section of an existing "
                             "bench.json (about 2 min)")
    parser.add_argument("--only-class", action="store_true",
                        help="time the class only (--class-size, --class-jobs) and replace that section")
    parser.add_argument("--only-similarity", action="store_true",
                        help="time make similarity on the class (--class-size) only and replace that section")
    parser.add_argument("--hub-students", type=int, default=10,
                        help="a simulated class taken through a term on a real JupyterHub (0 skips it; about 3 min at 10)")
    parser.add_argument("--only-hub", action="store_true",
                        help="time the term on the hub only (--hub-students) and replace that section")
    parser.add_argument("--press-students", type=int, default=10,
                        help="students whose Autograde button is pressed in the formgrader, in Chromium, with and "
                             "without the warm grader (0 skips it; about 8 min at 10)")
    parser.add_argument("--only-presses", action="store_true",
                        help="time the formgrader's presses only (--press-students) and replace that section")
    parser.add_argument("--readme", action="store_true",
                        help="rewrite the README's bench tables from results/bench.json (measures nothing)")
    args = parser.parse_args(argv)
    if args.readme:
        return 0 if tables.update_readme(json.loads((RESULTS_DIR / "bench.json").read_text())) else 1
    if args.only_class:
        replace_section(args.out, "class_autograde", lambda: class_autograde(args.class_size, args.class_jobs,
                                                                             workers=args.cluster_workers,
                                                                             rounds=args.class_rounds,
                                                                             threads=args.cluster_threads), flag="class")
        return 0
    if args.only_similarity:
        replace_section(args.out, "similarity", lambda: similarity_time(args.class_size))
        return 0
    if args.only_hub:
        replace_section(args.out, "hub_cycle", lambda: hub_cycle(args.hub_students), flag="hub")
        return 0
    if args.only_presses:
        replace_section(args.out, "formgrader_presses", lambda: formgrader_presses(args.press_students),
                        flag="presses")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.only_autograde:
        replace_section(args.out, "autograde", autograde_time)
        return 0
    if args.only_notebooks:
        replace_section(args.out, "notebooks", notebook_times)
        return 0
    steps, rounds, warmup = (4, 3, 2) if args.quick else (20, 7, 5)
    # --quick checks that the bench runs and writes its file (make test), not a speed: a smaller batch (CI spent
    # 157 s on the quick run at 32 x 64, most of it in emulated bf16)
    batch_size, seq_len = (8, 32) if args.quick else (32, 64)
    started = time.time()
    result = {
        "schema_version": SCHEMA_VERSION, "quick": args.quick,
        "command": "python -m experiments.bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "torch": str(torch.__version__), "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
        "workload": {"model": {"ntoken": data.load_tokenizer().get_piece_size(), **ARCHITECTURE},
                     "batch_size": batch_size, "seq_len": seq_len, "steps_per_round": steps,
                     "rounds": rounds, "optimizer": "AdamW", "clip": 1.0, "progress_bar": False},
    }
    fp32 = throughput(steps, rounds, warmup, batch_size, seq_len, bf16=False, progress=not args.no_progress)
    # Without native bf16 (AVX512-BF16, AMX) PyTorch emulates it, about 10x slower: a few steps show that.
    native_bf16 = fast_bf16_available()
    bf16_steps, bf16_rounds, bf16_warmup = (steps, rounds, warmup) if native_bf16 else (min(steps, 3), 3, 1)
    bf16 = throughput(bf16_steps, bf16_rounds, bf16_warmup, batch_size, seq_len, bf16=True,
                      progress=not args.no_progress)
    bf16["steps_per_round"], bf16["native_bf16"] = bf16_steps, native_bf16
    result["fp32"], result["bf16"] = fp32, bf16
    result["loop_ratio"] = fp32["ratio"]
    result["loop_ratio_target"] = 0.95
    result["loop_ratio_met"] = fp32["ratio"] >= 0.95
    result["bf16_speedup"] = bf16["translab"]["tokens_per_s"] / fp32["translab"]["tokens_per_s"]
    if args.quick or args.no_autograde:
        result["autograde"] = {"seconds": None, "reason": "skipped (--quick or --no-autograde)"}
    else:
        result["autograde"] = autograde_time()
    if args.quick or args.no_notebooks:
        result["notebooks"] = {"reason": "skipped (--quick or --no-notebooks)"}
    else:
        result["notebooks"] = notebook_times()
    if args.quick or args.no_autograde or args.overhead_students <= 0:
        result["isolation_overhead"] = {"reason": "skipped (--quick, --no-autograde or --overhead-students 0)"}
    else:
        result["isolation_overhead"] = isolation_overhead(args.overhead_students)
    if args.quick or args.no_autograde or args.class_size <= 0:
        result["class_autograde"] = {"students": 0, "reason": "skipped (--quick, --no-autograde or --class-size 0)"}
    else:
        result["class_autograde"] = class_autograde(args.class_size, args.class_jobs, workers=args.cluster_workers,
                                                     rounds=args.class_rounds, threads=args.cluster_threads)
    if args.quick or args.no_autograde or args.hub_students <= 0:
        result["hub_cycle"] = {"students": 0, "reason": "skipped (--quick, --no-autograde or --hub-students 0)"}
    else:
        result["hub_cycle"] = hub_cycle(args.hub_students)
    if args.quick or args.no_autograde or args.press_students <= 0:
        result["formgrader_presses"] = {"students": 0, "reason": "skipped (--quick, --no-autograde or "
                                                                 "--press-students 0)"}
    else:
        result["formgrader_presses"] = formgrader_presses(args.press_students)
    result["wall_time_s"] = round(time.time() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.out.resolve() == RESULTS_DIR.resolve():
        tables.update_readme(result)
    print(f"translab loop {fp32['translab']['tokens_per_s']:,.0f} tok/s vs bare {fp32['bare']['tokens_per_s']:,.0f}"
          f" (ratio {fp32['ratio']:.3f}); bf16 {bf16['translab']['tokens_per_s']:,.0f} tok/s "
          f"(x{result['bf16_speedup']:.2f}, ratio {bf16['ratio']:.3f}); autograde: {result['autograde']}; "
          f"class: {result['class_autograde']}")
    print(f"wrote {args.out / 'bench.json'}")
    return 0
