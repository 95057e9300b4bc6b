"""``make student-release DEST=...``: what students get, week by week (``grader.course.student_release``): no solutions,
no hidden tests, translab's answers held back from the part students start now."""
from __future__ import annotations

from pathlib import Path

from grader.course.withheld import LAST_PART

from ..course import GradingError

HELP = "write what students get (no solutions, no hidden tests)"


def arguments(parser) -> None:
    parser.add_argument("dest", type=Path)
    parser.add_argument("--until", type=int, default=1,
                        help="the part the students start now: its notebook and those before it, translab's reference "
                             "code of the parts before it, stubs for the rest (default 1: no answer at all; "
                             "7: everything, after the last deadline)")
    parser.add_argument("--package", default="",
                        help="what each notebook's setup cell pip-installs in Colab: the wheel's URL where you publish "
                             "it, or a name on PyPI (default with --colab: the wheel in that repository's dist/)")
    parser.add_argument("--colab", default="",
                        help="the GitHub repository (owner/name[@branch]) you push the release to: each notebook and "
                             "the README get an Open in Colab badge")
    parser.add_argument("--no-wheel", action="store_true", help="skip building dist/translab-*.whl")
    parser.add_argument("--serial", type=int, default=None,
                        help="the release's number, the last part of its version (default: one more than the course's "
                             "last, from .translab_releases.json)")


def run(root: Path, args) -> int:
    from grader.course import student_release  # lazy: torch (1.2 s); --help imports every command
    try:
        serial = args.serial if args.serial is not None else student_release.next_serial(root)
        written = student_release.write(args.dest, root, until=args.until, package=args.package,
                                        colab=args.colab, wheel=not args.no_wheel, serial=serial)
        student_release.record(root, serial, args.until, args.dest)
    except student_release.ReleaseError as error:
        raise GradingError(str(error)) from error
    held = (f"translab's answers to parts {args.until} to {LAST_PART} held back" if args.until <= LAST_PART
            else "every answer of translab in it")
    version = student_release.student_version(root, args.until, serial)
    print(f"wrote the student release {version} (week {args.until}, the course's release {serial}) to "
          f"{args.dest.resolve()}: {len(written)} files, notebooks 1 to {min(args.until, LAST_PART)}, {held}; "
          "students run `make setup` then `make lab` there")
    wheels = sorted((args.dest / "dist").glob("*.whl"))
    if wheels:
        print(f"  the same as one wheel: {wheels[0]} (its README gives the students' three commands; the same "
              "commands install each week's wheel over the last)")
    if not (args.package or args.colab):
        print("  no Colab links: the setup cells say where translab comes from once you give "
              "PACKAGE=<wheel URL> or COLAB=owner/name (the GitHub repository you push this folder to)")
    print("  no student's variant code is in it: send each student theirs from `make variants` (all, in a "
          "table) or `make variants STUDENT=id` (one); they run `variants.use_code(...)` once")
    return 0
