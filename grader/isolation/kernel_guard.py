"""The grading kernel's IPython extension: before every cell, the checks and their channel as they were.

The verdicts never depend on it (they are decided outside the kernel, ``grader.grading.verdicts``); it keeps what
an answer cell replaced from costing the honest test cells after it their points and their feedback, and tells the
grader what it had to put back (``translab.wire.PUT_BACK``, sent with the next check), which flags the notebook.
Loaded by the sandbox's kernelspec (``grader.isolation.sandbox.grading_kernel``) with ``--IPKernelApp.extra_extensions``.
"""
from __future__ import annotations

GUARDED = {"torch": ("allclose", "equal", "isclose"), "torch.testing": ("assert_close",),
           "numpy.testing": ("assert_allclose", "assert_array_equal", "assert_equal")}
# The modules a test cell reports through (the checks, their harness, the kernel's side of the verdict channel and
# the contract they share): every attribute of each, and its entry in sys.modules, put back before every cell.
CHANNEL = ("translab.contract", "translab.wire", "translab.checks")


def _channel_modules() -> dict:
    import sys
    return {name: module for name, module in sys.modules.items()
            if module is not None and any(name == top or name.startswith(top + ".") for top in CHANNEL)}


def load_ipython_extension(ip) -> None:
    """Before every cell, put back what an answer cell may have replaced to pass the tests or to keep a test cell's
    verdict from the grader: every module of the channel (``CHANNEL``: ``translab.checks`` and its parts, the
    harness, ``translab.wire``) as it was, its attributes and its place in ``sys.modules``, the notebook's
    ``checks`` name, the comparison functions of torch and numpy.testing, and the builtins.  Snapshot taken when
    the kernel starts, before any student code.

    The verdicts do not depend on it: they are decided outside the kernel (``grader.grading.verdicts``), and a check
    whose channel stays replaced never reports (flagged).  It keeps every honest test cell's points and feedback: a
    test cell after such an answer still reports through the real channel and shows why the answer fails."""
    import builtins
    import importlib
    import sys

    from translab import checks  # lazy: torch (1.2 s); this runs in the kernel, and the batch imports this module
    modules = {name: importlib.import_module(name) for name in GUARDED}
    channel = _channel_modules()
    pristine = [(module, dict(vars(module))) for module in channel.values()]
    pristine += [(modules[name], {attr: getattr(modules[name], attr) for attr in attrs}) for name, attrs in GUARDED.items()]
    pristine.append((builtins, dict(vars(builtins))))
    whole = {id(module) for module in channel.values()}  # modules whose added names go too
    put_back = channel["translab.wire"].PUT_BACK  # the list each check sends the checker (kept as it was too)

    def restore(*_):
        found = []
        for name, module in channel.items():
            if sys.modules.get(name) is not module:
                sys.modules[name] = module
                found.append(name)
        for module, attributes in pristine:
            for name, value in attributes.items():
                if getattr(module, name, None) is not value:
                    setattr(module, name, value)
                    if module is not builtins:  # IPython's own trap adds and takes back builtins around each cell
                        found.append(f"{module.__name__}.{name}")
            if id(module) in whole:
                for name in [name for name in vars(module) if name not in attributes]:
                    delattr(module, name)
                    found.append(f"{module.__name__}.{name}")
        put_back.extend(name for name in found if name not in put_back)
        if "checks" in ip.user_ns:
            ip.user_ns["checks"] = checks

    ip.events.register("pre_run_cell", restore)
