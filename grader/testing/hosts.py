"""Two machines on this one, for the tests: network namespaces joined by a veth pair (a private network of their
own, nothing of this machine's reachable from them), and the TLS certificates a Dask cluster between them uses
(``certificates``, the warm grader's: ``grader.grading.certificates``)."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from grader.grading.certificates import certificates  # noqa: F401 (the tests' TLS between hosts)

SUBNET = "10.213.0"  # inside the namespaces only: this machine's own network never sees it


def unavailable() -> str | None:
    """Why two hosts cannot be made here (None when they can): network namespaces need root and iproute2."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    if not shutil.which("ip"):
        return "iproute2's `ip` is missing (apt-get install iproute2)"
    probe = f"tlprobe{os.getpid() % 100000}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


class TwoHosts:
    """``with TwoHosts() as hosts:`` ``hosts.run(0, [...])``, ``hosts.prefix(1)``, ``hosts.addresses[0]``."""

    def __init__(self):
        tag = os.getpid() % 100000
        self.names = (f"tl{tag}a", f"tl{tag}b")
        self.addresses = (f"{SUBNET}.1", f"{SUBNET}.2")

    def prefix(self, host: int) -> list[str]:
        """The command prefix that runs a program on ``host`` (0 or 1)."""
        return ["ip", "netns", "exec", self.names[host]]

    def _ip(self, *args: str) -> None:
        subprocess.run(["ip", *args], check=True, capture_output=True, text=True)

    def __enter__(self) -> "TwoHosts":
        ends = (f"{self.names[0]}v", f"{self.names[1]}v")
        try:
            for name in self.names:
                self._ip("netns", "add", name)
            self._ip("link", "add", ends[0], "type", "veth", "peer", "name", ends[1])
            for name, end, address in zip(self.names, ends, self.addresses):
                self._ip("link", "set", end, "netns", name)
                self._ip("-n", name, "addr", "add", f"{address}/24", "dev", end)
                self._ip("-n", name, "link", "set", end, "up")
                self._ip("-n", name, "link", "set", "lo", "up")
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *_) -> None:
        for name in self.names:  # the veth pair goes with its namespaces
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
