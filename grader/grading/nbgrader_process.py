"""nbgrader's commands as processes of the batch's own: each a child of a fork server that has nbgrader (and,
when asked, the checks) imported once, in a session of its own so that a timeout kills it and every kernel it
started.  Its configuration file is loaded first, in a child too: nbgrader only logs one that raises.
"""
from __future__ import annotations

import os
import pkgutil
import signal
import sys
import tempfile
from pathlib import Path

from translab.contract import GRADER_RUN_ENV, GRADING_ENV, HOME_ENV

from grader.course import GradingError, with_venv_bin
from grader.grading.gradebook_engines import share_engines
from grader.grading.verdicts import CHECKER_IMPORTS


FATAL_LOG_LINES = ("Exception while loading config", "[ERROR]", "[CRITICAL]")


CONFIG_TIMEOUT = 120     # seconds for nbgrader_config.py to load before the batch refuses it


def nbgrader_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.pop(GRADING_ENV, None)
    # a student release's folder (a hub gives every server one, the instructor's too, where the formgrader's Autograde
    # button starts the batch): grading reads the course's own files
    env.pop(HOME_ENV, None)
    # One torch thread per grading kernel: measured on 2 cores, a training step in a Jupyter kernel took
    # 3.9 s with PyTorch's default 2 threads while the other core was busy, 0.37 s with one thread.
    # Grading is throughput work (one submission per core), so this is also the faster choice.
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PATH"] = with_venv_bin(env.get("PATH", ""))
    # nbgrader run by translab's commands, which did what plain nbgrader's entry points do through the plugins
    # (grader.nbgrader_plugins.batch_autograde_exporter, feedback_gate_exporter)
    env[GRADER_RUN_ENV] = "1"
    if env.get("PYTHONPATH"):  # empty, Python ignores it
        env["PYTHONPATH"] = absolute_path_list(env["PYTHONPATH"])
    env.update(extra or {})
    return env


def absolute_path_list(value: str) -> str:
    """``PYTHONPATH`` with its empty and relative entries made absolute against this process's folder, as the
    instructor's shell meant them.  Left relative, they name the folder of whichever process reads them: a grading
    kernel's launcher starts, as root, in the student's submission, where a ``grader/`` package of the student's
    would be imported in place of ours (the ``shadows_the_launcher`` case of ``grader.testing.corpus``)."""
    return os.pathsep.join(os.path.abspath(entry or os.curdir) for entry in value.split(os.pathsep))


# nbgrader_config.py's plugins, every one of them
PLUGINS = [f"grader.nbgrader_plugins.{module.name}"
           for module in pkgutil.iter_modules([str(Path(__file__).parents[1] / "nbgrader_plugins")])]

# What every nbgrader process of a batch imports (nbgrader with its server extensions, nbclient, the config's
# plugins): about 1 CPU-second a student, loaded once in a fork server instead (multiprocessing's forkserver: a
# clean single-threaded process, never the batch's threads), whose children run nbgrader.  Nothing of a student is
# in it: it only imported modules.
WARM_IMPORTS = ["grader.grading.nbgrader_process", "grader.grading.fork_server_exit", *PLUGINS, "grader.grading.verdicts",
                "grader.course.mathml", "nbgrader.apps.nbgraderapp", "nbgrader.preprocessors", "nbconvert.preprocessors",
                "grader.grading.fork_server_preload"]  # the last: it freezes what the others imported (gc.freeze)


_forks = None


def preloads_checks(student_ids: list[str], sandbox: bool) -> bool:
    """Whether the fork server also imports the checker's torch and checks (verdicts.CHECKER_IMPORTS, 1.8
    CPU-seconds).  Not for a sandboxed batch: it forks each student's checker from its zygote, which has them
    (verdicts.ForkedChecker).  Without the sandbox, when it forks many students; for one student they would hold
    up its start, and its checker's thread imports them while the kernel starts (verdicts.Checker).  Feedback
    runs no checks."""
    return len(student_ids) > 1 and not sandbox


def fork_server(checker_imports: bool = False):
    """The multiprocessing context whose fork server holds ``WARM_IMPORTS`` (and ``CHECKER_IMPORTS`` if asked);
    the first call starts the server, which then imports them while the batch goes on with its own preparations."""
    global _forks
    if _forks is None:
        import multiprocessing
        from multiprocessing import forkserver
        context = multiprocessing.get_context("forkserver")
        checks = list(CHECKER_IMPORTS) if checker_imports else []
        context.set_forkserver_preload(WARM_IMPORTS[:-1] + checks + WARM_IMPORTS[-1:])
        forkserver.ensure_running()
        _forks = context
    return _forks


def _nbgrader_main(args: list[str], env: dict, cwd: str, output: str) -> None:
    """A fork server's child: nbgrader's command line in a session of its own, with the job's environment and
    folder, its output in ``output``; the exit handlers run (they end the kernel kept between notebooks)."""
    import atexit
    os.setsid()
    descriptor = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    if "torch" in sys.modules:  # imported before this environment was set: its threads as the job says
        sys.modules["torch"].set_num_threads(max(1, int(env.get("OMP_NUM_THREADS") or 1)))
    sys.argv = [sys.executable, *args]
    code = 0
    try:
        from nbgrader.apps.nbgraderapp import main
        share_engines()
        main()
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    sys.exit(code)


def run_nbgrader(root: Path, args: list[str], env: dict | None = None,
                  timeout: float | None = None) -> tuple[int, str]:
    """(exit code, output) of one nbgrader command, run by a child of the fork server; on ``timeout`` its
    whole process group is killed.

    nbgrader starts each notebook's kernel as its child: killing only nbgrader would leave a student's
    runaway kernel behind, hence a session of its own and ``killpg``.
    """
    with tempfile.NamedTemporaryFile(prefix="translab-nbgrader-", suffix=".log", delete=False) as handle:
        output_path = handle.name  # private (0600): it quotes submissions
    process = fork_server().Process(target=_nbgrader_main, daemon=False,
                                     args=(list(args), dict(env or nbgrader_env()), str(root), output_path))
    timed_out = False
    try:
        process.start()
        process.join(timeout)
        timed_out = process.is_alive()
        if timed_out:
            process.kill()
            process.join()
    finally:
        try:  # its session: a kernel that outlived nbgrader (it detaches from nothing, but be sure) goes too
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, TypeError):
            pass
        output = Path(output_path).read_text(encoding="utf-8", errors="replace")
        os.unlink(output_path)
    if timed_out:
        return -signal.SIGKILL, output + f"\n[translab] [TIMEOUT] killed after {timeout:.0f} s\n"
    return process.exitcode, output


def _fatal_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if any(marker in line for marker in FATAL_LOG_LINES)]


def nbgrader(root: Path, *args: str, check: bool = True) -> str:
    returncode, output = run_nbgrader(root, list(args))
    sys.stdout.write(output)
    bad = _fatal_lines(output)
    if check and (returncode != 0 or bad):
        raise GradingError(f"`nbgrader {' '.join(args)}` failed (exit {returncode}):\n" + "\n".join(bad[:20]))
    return output


def check_config(root: Path) -> None:
    """nbgrader only logs a configuration file that raises, then grades with its defaults: refuse instead.  The
    file is loaded by a child of the fork server, which has already imported what it imports (1.1 s here)."""
    path = root / "nbgrader_config.py"
    if not path.exists():
        return
    forks = fork_server()
    reader, writer = forks.Pipe(duplex=False)
    process = forks.Process(target=_load_config, args=(path, writer), daemon=True)
    process.start()
    writer.close()
    try:
        problem = reader.recv() if reader.poll(CONFIG_TIMEOUT) else f"it did not load in {CONFIG_TIMEOUT} s"
    except EOFError:
        problem = "loading it ended the process"
    finally:
        reader.close()
        if process.is_alive():
            process.kill()
        process.join()
    if problem:
        raise GradingError(f"{path} does not load: {problem}; fix it and grade again")


def _load_config(path: Path, writer) -> None:
    """A fork server's child: load ``path`` as nbgrader would; send None, or what went wrong."""
    from traitlets.config.loader import PyFileConfigLoader
    try:
        PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
        writer.send(None)
    except Exception as error:  # noqa: BLE001 - whatever it raises is the instructor's to read
        writer.send(repr(error))
