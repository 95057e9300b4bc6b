"""The grading kernels' client: ready as soon as the kernel is (issue 53's phase "kernel start").

jupyter_client's ``wait_for_ready`` ends by reading IOPub until it has been silent for 0.2 s, at every kernel start:
six notebooks a student, 1.2 s of each submission spent waiting for nothing.  This client waits instead for the
message that closes the handshake, the kernel's ``idle`` status for a ``kernel_info`` request of its own (a kernel
still starting is asked several times, and answers each): once it has arrived, the kernel answers on both channels.  A message still in flight after it belongs to no request of
nbclient's, which reads only the replies to its own (by ``parent_header``), so nothing is lost by not draining it.
"""
from __future__ import annotations

import time
from queue import Empty

from jupyter_client.asynchronous import AsyncKernelClient

SHELL_WAIT = 1.0   # s for a kernel_info reply before asking again (as jupyter_client does)
IOPUB_WAIT = 0.5   # s for the reply's idle status: a subscriber that joined too late asks again


class PromptKernelClient(AsyncKernelClient):
    """An ``AsyncKernelClient`` whose ``wait_for_ready`` ends on the handshake's own idle status."""

    async def wait_for_ready(self, timeout: float | None = None) -> None:
        deadline = time.monotonic() + (float("inf") if timeout is None else timeout)
        asked: set[str] = set()  # every kernel_info request sent: a kernel still starting gets several
        idle: set[str] = set()   # the requests whose idle status IOPub brought
        while True:
            asked.add(self.kernel_info())
            try:
                reply = await self.shell_channel.get_msg(timeout=SHELL_WAIT)
            except Empty:
                reply = None
            if reply is not None and reply["msg_type"] == "kernel_info_reply" and await self._idle(asked, idle):
                self._handle_kernel_info_reply(reply)
                return
            if not await self._async_is_alive():
                raise RuntimeError("Kernel died before replying to kernel_info")
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kernel didn't respond in {timeout:.0f} seconds")

    async def _idle(self, asked: set[str], idle: set[str]) -> bool:
        """Whether IOPub has brought, or brings within IOPUB_WAIT, the idle status of one of the ``asked`` requests
        (IOPub is then connected); the idle statuses it reads go into ``idle``, so that none read while waiting for
        one request is missed when the next is waited for."""
        end = time.monotonic() + IOPUB_WAIT
        while not asked & idle:
            left = end - time.monotonic()
            if left <= 0:
                return False
            try:
                message = await self.iopub_channel.get_msg(timeout=left)
            except Empty:
                return False
            if message["msg_type"] == "status" and message["content"].get("execution_state") == "idle":
                idle.add(message["parent_header"].get("msg_id"))
        return True
