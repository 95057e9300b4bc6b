"""The grading kernels' client (grader.grading.prompt_kernel_client): ready once its handshake's idle status
arrives, for a kernel that answers at once and for one still starting, which is asked several times (the first
version waited for the idle of a request whose status it had already read, until the start-up timeout)."""
from __future__ import annotations

import asyncio
import json
import sys
from queue import Empty

import pytest
from jupyter_client import AsyncKernelManager
from jupyter_client.kernelspec import KernelSpecManager

from grader.nbgrader_plugins.guarded_execute import GuardedExecute
from grader.grading.prompt_kernel_client import SHELL_WAIT, PromptKernelClient

pytestmark = pytest.mark.slow  # starts kernels
printed: list = []  # what the kernel's IOPub brought while a cell ran


def _kernelspec(folder, delay: float) -> KernelSpecManager:
    """A kernel that sleeps ``delay`` seconds before ipykernel starts: a kernel still waiting for its zygote."""
    spec = folder / "kernels" / "late"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": ["/bin/sh", "-c", f'sleep {delay}; exec "$0" -m ipykernel_launcher -f "$1"', sys.executable,
                 "{connection_file}"],
        "display_name": "late", "language": "python"}))
    return KernelSpecManager(kernel_dirs=[str(folder / "kernels")])


async def _ready_and_runs(manager: AsyncKernelManager) -> str:
    await manager.start_kernel()
    client = manager.client()
    client.start_channels()
    try:
        await client.wait_for_ready(timeout=30)
        reply = await client.execute_interactive("print(6 * 7)", timeout=30,
                                                 output_hook=lambda m: printed.append(m))
        return reply["content"]["status"]
    finally:
        client.stop_channels()
        await manager.shutdown_kernel(now=True)


@pytest.mark.parametrize("delay", [0, 3 * SHELL_WAIT])
def test_ready_once_the_kernel_is_and_then_it_runs_code(tmp_path, delay):
    printed.clear()
    manager = AsyncKernelManager(kernel_name="late", kernel_spec_manager=_kernelspec(tmp_path, delay),
                                 client_class=f"{PromptKernelClient.__module__}.{PromptKernelClient.__name__}")
    assert asyncio.run(_ready_and_runs(manager)) == "ok"
    assert any(m["msg_type"] == "stream" and m["content"]["text"] == "42\n" for m in printed)


class _Channel:
    """A channel of messages the scripted kernel below has sent."""

    def __init__(self):
        self.messages: list[dict] = []

    async def get_msg(self, timeout: float):
        if self.messages:
            return self.messages.pop(0)
        await asyncio.sleep(min(timeout, 0.01))
        raise Empty


class _LateSubscriber(PromptKernelClient):
    """A kernel that answered three kernel_info requests at once as it started, whose first idle status IOPub lost
    (ZeroMQ drops what a publisher sends before the subscription arrives): the race a real kernel hits by chance
    when it starts late, scripted.  The first version of the client waited for the idle status of the oldest
    reply, which it had already read and dropped while waiting for the one before, again and again."""

    def __init__(self):
        self.shell, self.iopub, self.sent = _Channel(), _Channel(), 0

    @property
    def shell_channel(self):
        return self.shell

    @property
    def iopub_channel(self):
        return self.iopub

    def kernel_info(self) -> str:
        self.sent += 1
        request = f"r{self.sent}"
        if self.sent == 3:  # the kernel starts: it answers the three requests queued so far
            for answered in ("r1", "r2", "r3"):
                self.shell.messages.append({"msg_type": "kernel_info_reply", "parent_header": {"msg_id": answered}})
                if answered != "r1":
                    self.iopub.messages.append({"msg_type": "status", "parent_header": {"msg_id": answered},
                                                "content": {"execution_state": "idle"}})
        elif self.sent > 3:
            self.shell.messages.append({"msg_type": "kernel_info_reply", "parent_header": {"msg_id": request}})
            self.iopub.messages.append({"msg_type": "status", "parent_header": {"msg_id": request},
                                        "content": {"execution_state": "idle"}})
        return request

    async def _async_is_alive(self) -> bool:
        return True

    def _handle_kernel_info_reply(self, msg) -> None:
        self.ready = msg["parent_header"]["msg_id"]


def test_ready_when_iopub_lost_the_first_idle_status(monkeypatch):
    monkeypatch.setattr("grader.grading.prompt_kernel_client.SHELL_WAIT", 0.01)
    client = _LateSubscriber()
    asyncio.run(client.wait_for_ready(timeout=5))
    assert client.ready == "r1" and client.sent == 3, (client.sent, getattr(client, "ready", None))


def test_the_grading_kernels_use_it():
    manager = GuardedExecute(kernel_name="python3").create_kernel_manager()
    assert manager.client_factory is PromptKernelClient
