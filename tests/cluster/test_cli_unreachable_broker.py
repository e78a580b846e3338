"""The `odradek` commands while one broker of three is dead or paused but still listed in the
metadata (issue #21 §1): kafka-python sends an admin request to a random listed broker, so before
the reachability probe a third of `topics list` calls and every `groups list` (it asks each
broker) failed with `KafkaConnectionError: 111 ECONNREFUSED` until the dead broker's session
expired. Sessions here last 60 s, so the dead broker stays listed for the whole test."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from protocol.messages import FindCoordinatorRequest
from tests.broker_process import REPO
from tests.cluster.processes import Cluster, cluster_fixture
from tests.raw_client import call_once

cluster = cluster_fixture("zookeeper.session.timeout.ms=60000")


def odradek(*args: str, input: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clients.cli", *args], capture_output=True, text=True,
                          input=input, timeout=60, cwd=REPO)


def address(c: Cluster, i: int) -> str:
    return f"127.0.0.1:{c.ports[i]}"


def group_coordinated_by(c: Cluster, broker: int) -> str:
    """A group name whose coordinator is `broker` (FindCoordinator v4, asked until
    __consumer_offsets has its leaders)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answer = call_once(c.ports[1], 10, 4, FindCoordinatorRequest(coordinator_keys=[f"g{i}" for i in range(30)]))
        mine = [k.key for k in answer.coordinators if k.error_code == 0 and k.node_id == broker]
        if mine:
            return mine[0]
        time.sleep(0.2)
    raise AssertionError(f"no group coordinated by broker {broker}: {answer}")


async def test_commands_work_and_warn_while_a_listed_broker_is_dead(cluster: Cluster, tmp_path: Path) -> None:
    await cluster.open()
    orphan = await asyncio.to_thread(group_coordinated_by, cluster, 3)
    dead = cluster.brokers[3]
    assert dead.proc is not None
    dead.proc.send_signal(signal.SIGKILL)
    dead.proc.wait()
    warning = f"broker 3 at {address(cluster, 3)} does not answer"
    # bootstrap through the dead broker first, and through a live one only
    for bootstrap in (f"{address(cluster, 3)},{address(cluster, 1)}", address(cluster, 2)):
        for _ in range(3):  # each call asked a random listed broker before the probe
            out = odradek("topics", "list", "--exclude-internal", "-b", bootstrap)
            assert out.returncode == 0, out.stderr
            assert out.stdout.split() == ["rf1", "rf3"] and warning in out.stderr, (out.stdout, out.stderr)
            assert all(line.startswith("Warn: ") for line in out.stderr.splitlines()), out.stderr
    out = odradek("groups", "list", "-b", address(cluster, 1))
    assert out.returncode == 0 and warning in out.stderr, out.stderr
    # a group only the dead broker coordinates: one line saying so (its offsets partition moves
    # when the session expires)
    out = odradek("groups", "describe", orphan, "-b", address(cluster, 1))
    assert out.returncode == 1, out.stderr
    assert out.stderr.splitlines()[-1].startswith("Error: the broker this request must go to does not answer"), out.stderr
    # produce and consume a partition of a live broker (rf1-0 is broker 1's alone)
    out = odradek("produce", "rf1", "-p", "0", "-b", address(cluster, 2), input="still here\n")
    assert out.returncode == 0 and warning in out.stderr, out.stderr
    out = odradek("consume", "rf1", "-p", "0", "--offset", "earliest", "-n", "1", "-b", address(cluster, 2))
    assert out.returncode == 0 and out.stdout == "still here\n" and warning in out.stderr, (out.stdout, out.stderr)

    # create waits for the leaders in the metadata of every broker that answers, not the dead one
    out = odradek("topics", "create", "fresh", "-p", "3", "-r", "1", "--timeout", "30", "-b", address(cluster, 1))
    assert out.returncode == 0 and out.stdout == "Created topic fresh.\n", (out.stdout, out.stderr)
    assert warning in out.stderr and "have a leader after" not in out.stderr, out.stderr

    # the metadata still names broker 3 (Kafka's tool prints it so); a warning says it is not there
    out = odradek("topics", "describe", "rf3", "-b", address(cluster, 1))
    assert out.returncode == 0, out.stderr
    assert "Leader: 3" in out.stdout
    assert "the metadata still lists broker 3 as leader of rf3-2, rf3-5" in out.stderr, out.stderr

    # cluster status: a broker whose process lives but does not answer is down at once
    paused = cluster.brokers[2]
    assert paused.proc is not None
    zk_port = int(cluster.connect.split("/")[0].rsplit(":", 1)[1])
    state = {"zookeeper": {"pid": os.getpid(), "port": zk_port, "connect": cluster.connect},
             "brokers": [{"id": i, "pid": b.proc.pid, "port": cluster.ports[i]}
                         for i, b in sorted(cluster.brokers.items()) if b.proc is not None],
             "bootstrap": ",".join(address(cluster, i) for i in (1, 2, 3))}
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "cluster.json").write_text(json.dumps(state))
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        out = odradek("cluster", "status", "--dir", str(tmp_path / "c"))
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("broker 1 ") and "running" in line for line in lines), lines
    assert any(line.startswith("broker 2 ") and "NOT ANSWERING" in line for line in lines), lines
    assert any(line.startswith("broker 3 ") and "NOT RUNNING" in line for line in lines), lines
    assert "brokers [1, 2, 3]" in out.stdout  # what the metadata says: ZooKeeper has not noticed
