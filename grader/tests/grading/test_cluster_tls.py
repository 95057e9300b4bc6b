"""Grading between two machines over TLS, for real: the scheduler (and the client) on one host, a worker on
another, each a network namespace of its own joined by a private link (``grader.testing.hosts``); the scheduler
answers no one without a certificate of the course's authority."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from grader.testing import hosts
from grader.testing.dask_cluster import LocalCluster

from conftest import cell_scores, small_course, venv_env

pytestmark = pytest.mark.slow
REASON = hosts.unavailable()
CLASS = ["blank_01", "solution_01"]


@pytest.fixture(scope="module")
def two_hosts(tmp_path_factory):
    if REASON:
        pytest.skip(REASON)
    root = small_course(tmp_path_factory.mktemp("tls") / "course", CLASS)
    folder = root.parent
    tls = hosts.certificates(folder / "certificates")
    env = venv_env(DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="5s")  # the refused clients give up soon
    with hosts.TwoHosts() as machines, LocalCluster(root, workers=1, env=env, logs=folder, hosts=machines,
                                                    tls=tls) as cluster:
        yield root, folder, machines, cluster, env


def _on_first_host(machines, env, *command: str) -> subprocess.CompletedProcess:
    return subprocess.run([*machines.prefix(0), sys.executable, *command], env=env, text=True, capture_output=True,
                          timeout=600)


def test_a_class_is_graded_by_a_worker_on_another_host_over_tls(two_hosts):
    root, _, machines, cluster, env = two_hosts
    assert cluster.address.startswith(f"tls://{machines.addresses[0]}:")
    done = _on_first_host(machines, env, "-m", "grader", "--root", str(root), "autograde", "--cluster",
                          str(cluster.spec))
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert f"{len(CLASS)} student(s) sent to {cluster.address}" in said, said[-3000:]
    totals = {name: sum(score for score, _, _ in cell_scores(root, name).values()) for name in CLASS}
    assert totals["blank_01"] < totals["solution_01"], totals


def test_the_scheduler_refuses_a_client_without_the_course_s_certificate(two_hosts):
    root, folder, machines, cluster, env = two_hosts
    stranger = hosts.certificates(folder / "stranger", name="stranger")  # another authority's certificate
    spec = folder / "stranger.json"
    spec.write_text(json.dumps({"address": cluster.address, "security": stranger}))
    done = _on_first_host(machines, env, "-m", "grader", "--root", str(root), "autograde", "--cluster", str(spec))
    said = done.stdout + done.stderr
    assert done.returncode != 0 and "no Dask scheduler answered" in said and "Traceback" not in said, said[-3000:]
    plain = cluster.address.replace("tls://", "tcp://")  # no TLS at all, with Dask's own client
    tried = _on_first_host(machines, env, "-c", f"from distributed import Client\nClient({plain!r}, timeout=5)")
    last = (tried.stderr.strip().splitlines() or [""])[-1]
    assert tried.returncode != 0 and any(word in last for word in ("OSError", "CommClosedError", "Connection")), \
        tried.stderr[-2000:]


def test_the_worker_s_host_reaches_nothing_but_the_private_link(two_hosts):
    """The namespaces are separate machines as far as the network goes: the second host has no route to this
    machine's own addresses, only to the first host."""
    _, _, machines, _, env = two_hosts
    routes = subprocess.run([*machines.prefix(1), "ip", "-4", "route"], capture_output=True, text=True, check=True)
    assert routes.stdout.strip().splitlines() == [line for line in routes.stdout.strip().splitlines()
                                                  if line.startswith(hosts.SUBNET)], routes.stdout
