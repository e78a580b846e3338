"""`odradek cluster` against a real ZooKeeper and real processes: up/status/down of three brokers
in ZooKeeper mode, zk-dump prints Kafka's znodes, and an `up` whose brokers cannot start stops
what it started and says why."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.broker_process import REPO, consecutive_free_ports, free_port
from tests.zookeeper import ZooKeeperServer


def odradek(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "clients.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def test_zk_dump_prints_kafkas_znodes(zookeeper: ZooKeeperServer) -> None:
    import asyncio

    from controller.zk.client import ZooKeeperClient
    from controller.zk.kafka_zk_client import KafkaZkClient

    async def prepare() -> str:
        zk = await ZooKeeperClient(zookeeper.connect_string(), session_timeout_ms=6000).start()
        try:
            kzk = KafkaZkClient(zk)
            await kzk.create_top_level_paths()
            return await kzk.create_or_get_cluster_id("c1uster1dAAAAAAAAAAAAA")
        finally:
            await zk.close()

    cluster_id = asyncio.run(prepare())
    out = odradek("cluster", "zk-dump", "--zookeeper", zookeeper.address)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    cid = next(line for line in lines if line.startswith("/cluster/id"))
    assert json.loads(cid.split(None, 1)[1]) == {"version": "1", "id": cluster_id}
    for path in ("/brokers/ids", "/brokers/topics", "/admin/delete_topics", "/config/changes"):
        assert any(line.split()[0] == path for line in lines), (path, lines)
    only = odradek("cluster", "zk-dump", "--zookeeper", zookeeper.address, "--path", "/cluster")
    assert [line.split()[0] for line in only.stdout.splitlines()] == ["/cluster", "/cluster/id"]


def test_zk_dump_of_an_unreachable_zookeeper_is_one_line(tmp_path: Path) -> None:
    out = odradek("cluster", "zk-dump", "--zookeeper", f"127.0.0.1:{free_port()}")
    assert out.returncode != 0
    assert out.stderr.strip().startswith("Error: ZooKeeper at 127.0.0.1:")
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_up_whose_broker_cannot_start_stops_zookeeper_and_says_why(tmp_path: Path) -> None:
    zk_port = free_port()
    out = odradek("cluster", "up", "--dir", str(tmp_path / "c"), "--brokers", "1", "--zookeeper-port",
                  str(zk_port), "--port", str(free_port()), "--override", "num.partitions=0", "--timeout", "30")
    assert out.returncode != 0
    assert "broker 0 did not start" in out.stderr and "num.partitions" in out.stderr, out.stderr
    assert (tmp_path / "c" / "logs" / "zookeeper.log").exists()
    from clients.zookeeper_server import serves

    assert not serves("127.0.0.1", zk_port), "the ZooKeeper `up` started is still running"
    assert not (tmp_path / "c" / "cluster.json").exists()


def test_up_status_down_of_a_three_broker_cluster(tmp_path: Path) -> None:
    """`up` starts ZooKeeper and 3 brokers that elect a controller; a topic with RF 3 spreads its
    leaders; `status` sees a broker that was killed (its partitions under-replicated, a new
    controller); `down` stops everything."""
    d = tmp_path / "c"
    zk_port, port = free_port(), consecutive_free_ports(3)
    up = odradek("cluster", "up", "--dir", str(d), "--brokers", "3", "--zookeeper-port", str(zk_port),
                 "--port", str(port), "--timeout", "60")
    state = json.loads((d / "cluster.json").read_text()) if (d / "cluster.json").exists() else None
    try:
        assert up.returncode == 0, up.stderr
        bootstrap = f"127.0.0.1:{port},127.0.0.1:{port + 1},127.0.0.1:{port + 2}"
        assert f"bootstrap: {bootstrap}" in up.stdout
        created = odradek("topics", "create", "t", "--partitions", "6", "--replication-factor", "3", "-b", bootstrap)
        assert created.returncode == 0, created.stderr
        status = odradek("cluster", "status", "--dir", str(d))
        assert status.returncode == 0, status.stderr
        assert "brokers [0, 1, 2]" in status.stdout and "offline: 0; under-replicated: 0" in status.stdout
        described = odradek("topics", "describe", "t", "-b", bootstrap)
        leaders = sorted(line.split("Leader: ")[1].split()[0] for line in described.stdout.splitlines() if "Leader:" in line)
        assert leaders == ["0", "0", "1", "1", "2", "2"], described.stdout
        import os
        import signal

        os.kill(state["brokers"][2]["pid"], signal.SIGKILL)
        # the controller notices when the dead broker's ZooKeeper session (18 s) expires: poll
        # the CLI (another program's view; there is no event to await here), bounded at 60 s
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status = odradek("cluster", "status", "--dir", str(d))
            if "brokers [0, 1]" in status.stdout and "under-replicated: 6" in status.stdout:
                break
            time.sleep(0.5)
        assert "broker 2 127.0.0.1" in status.stdout and "NOT RUNNING" in status.stdout
        assert "brokers [0, 1]" in status.stdout and "offline: 0; under-replicated: 6" in status.stdout, status.stdout
    finally:
        down = odradek("cluster", "down", "--dir", str(d))
    assert down.returncode == 0, down.stderr
    assert not (d / "cluster.json").exists()
    from clients.zookeeper_server import serves

    assert not serves("127.0.0.1", zk_port)
