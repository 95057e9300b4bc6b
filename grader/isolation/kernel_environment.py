"""The environment of a grading kernel: an allow-list, never the batch's own.

The batch runs with the instructor's environment: a hub's API token where the formgrader's button started it, an
LMS or cloud token, the course secret where the README's override is used.  A kernel that got it whole would print
it into its own feedback, and a kernel forked from a zygote started with it would find it in its
``/proc/self/environ`` (the environment a process was started with, which a fork inherits).  So the kernel, its
zygote and what a launcher sends the zygote carry names on this list and nothing else: paths, locale, thread counts
and the grader's own variables; the values the launcher sets (HOME, TMPDIR, MPLCONFIGDIR, IPYTHONDIR,
JUPYTER_RUNTIME_DIR) come on top.
"""
from __future__ import annotations

from translab.contract import (CACHE_ENV, CHECKER_ENV, DATA_DIR_ENV, FAST_ENV, GRADING_ENV, REFERENCES_ENV,
                               SANDBOX_STATUS_ENV, VARIANT_ENV)

from grader.isolation.cgroups import ENV as CGROUPS_ENV, PROBLEM_ENV as CGROUP_PROBLEM_ENV
from grader.isolation.kernel_stages import STAGE_ENV

KERNEL_ENV = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "TERM", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONDONTWRITEBYTECODE",
    "JPY_PARENT_PID", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "MPLBACKEND",
    "MPLCONFIGDIR", "TRANSLAB_SANDBOX", GRADING_ENV, FAST_ENV, DATA_DIR_ENV, CACHE_ENV, CHECKER_ENV, VARIANT_ENV})
KERNEL_ENV_PREFIXES = ("LC_",)
# What the launcher reads before the kernel starts (the student's uid, cgroup, status folder and stage): set by the
# grader, never passed on to the kernel.
LAUNCHER_ENV = frozenset({"TRANSLAB_SANDBOX_UID", SANDBOX_STATUS_ENV, CGROUPS_ENV, CGROUP_PROBLEM_ENV, STAGE_ENV})


def kernel_environment(env) -> dict:
    """``env`` cut to ``KERNEL_ENV``: what a grading kernel may see."""
    return {name: value for name, value in env.items()
            if name in KERNEL_ENV or name.startswith(KERNEL_ENV_PREFIXES)}


def checker_environment(env) -> dict:
    """The checker's: the launcher's settings (its cgroup) and where the references are, if elsewhere.  The checker
    runs as the batch does and reads no secret either."""
    return {**launcher_environment(env), **{name: env[name] for name in (REFERENCES_ENV,) if name in env}}


def launcher_environment(env) -> dict:
    """What a launcher passes to the zygote that forks its kernel: the kernel's environment and the launcher's own
    settings (``LAUNCHER_ENV``), which ``grader.isolation.launcher`` removes before the kernel starts."""
    return {**kernel_environment(env), **{name: env[name] for name in LAUNCHER_ENV if name in env}}
