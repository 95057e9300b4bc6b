"""``make references``: grader/references/*.pt rebuilt from translab; ``--margins``: how far each moves on other
CPUs' code paths against its check's tolerance."""
from __future__ import annotations

from pathlib import Path

HELP = "rebuild grader/references/ from translab"


def arguments(parser) -> None:
    parser.add_argument("--margins", action="store_true",
                        help="then measure how far each reference moves on another CPU's code paths against its "
                             "check's tolerance (results/reference_margins.json)")


def run(root: Path, args) -> int:
    from grader import references  # lazy: torch (1.2 s), and every command's module is imported for --help
    for name, status in references.write_all():
        print(f"{status:9s} grader/references/{name}.pt")
    if args.margins:
        from grader.references import margins  # lazy, as above
        print(margins.write_table(root / "results" / "reference_margins.json"))
    return 0
