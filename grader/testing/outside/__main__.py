"""``python -m grader.testing.outside`` (``make outside-corpus``): the outside-style corpus at the check level.

Prints per graded answer how many answers, right and wrong, verdicts right and mistakes named exactly, and writes
every answer's outcome to ``results/outside_corpus.json`` (what the tests hold the checks to, and the note quotes).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from translab.paths import REPO_ROOT

from . import GRADED, SPLITS, Answer, answers, run, support_for

RESULTS = REPO_ROOT / "results" / "outside_corpus.json"


def named_exactly(listed: frozenset[str], failing: list[frozenset[str]]) -> bool:
    """The failing checks' keys together are the listed mistakes, and none claims an unlisted one."""
    return bool(failing) and all(keys <= listed for keys in failing) and frozenset().union(*failing) == listed


def measure(answer: Answer) -> dict:
    outcomes = {split: run(answer, split, support_for(answer)) for split in SPLITS}
    listed = answer.mistakes
    if not listed:
        verdict_right = all(outcome.passed for outcome in outcomes.values())
        named = None
    else:
        verdict_right = not outcomes["hidden"].passed and (answer.visible_passes or not outcomes["visible"].passed)
        named = named_exactly(listed, [outcome.keys for outcome in outcomes.values() if not outcome.passed])
    return {"graded": answer.graded, "name": answer.name, "style": answer.style, "mistakes": sorted(listed),
            "verdict_right": verdict_right, "named": named,
            **{split: {"passed": outcome.passed, "keys": sorted(outcome.keys),
                       "first_line": outcome.message.splitlines()[0] if outcome.message else ""}
               for split, outcome in outcomes.items()}}


def summarise(rows: list[dict]) -> dict:
    table = {}
    for graded in GRADED:
        mine = [row for row in rows if row["graded"] == graded]
        wrong = [row for row in mine if row["mistakes"]]
        table[graded] = {"answers": len(mine), "right": len(mine) - len(wrong), "wrong": len(wrong),
                         "verdicts_right": sum(row["verdict_right"] for row in mine),
                         "right_accused": sum(not row["verdict_right"] for row in mine if not row["mistakes"]),
                         "named": sum(bool(row["named"]) for row in wrong),
                         "several_mistakes": sum(len(row["mistakes"]) > 1 for row in wrong)}
    wrong = sum(entry["wrong"] for entry in table.values())
    named = sum(entry["named"] for entry in table.values())
    table["all"] = {"answers": len(rows), "right": len(rows) - wrong, "wrong": wrong,
                    "verdicts_right": sum(row["verdict_right"] for row in rows),
                    "right_accused": sum(entry["right_accused"] for entry in table.values()),
                    "named": named, "named_share": round(named / wrong, 3) if wrong else None,
                    "several_mistakes": sum(entry["several_mistakes"] for entry in table.values())}
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.testing.outside", description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=RESULTS, help="where the figures go (default: %(default)s)")
    args = parser.parse_args(argv)
    rows = [measure(answer) for answer in answers()]
    table = summarise(rows)
    print(f"{'graded answer':16} {'answers':>7} {'right':>5} {'wrong':>5} {'verdicts right':>14} {'named':>5} "
          f"{'several mistakes':>16}")
    for graded, entry in table.items():
        print(f"{graded:16} {entry['answers']:7} {entry['right']:5} {entry['wrong']:5} {entry['verdicts_right']:14} "
              f"{entry['named']:5} {entry['several_mistakes']:16}")
    document = {"what": "the outside-style corpus (grader/testing/outside) at the check level: visible and hidden "
                        "checks of each answer; named = the failing checks' diagnosis keys together are exactly the answer's listed "
                        "mistakes, none claims an unlisted one",
                "command": "python -m grader.testing.outside", "summary": table, "answers": rows}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
