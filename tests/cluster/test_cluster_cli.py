"""`odradek cluster` against a real ZooKeeper and real processes: up/status/down of three brokers
in ZooKeeper mode, zk-dump prints Kafka's znodes, and an `up` whose brokers cannot start stops
what it started and says why."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.broker_process import REPO, BrokerProcess, consecutive_free_ports, free_port
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



def test_one_broker_of_a_cluster_and_a_broker_restarted_by_hand(tmp_path: Path) -> None:
    """Issue #21 §3: `kill`, `start`, `stop`, `restart` one broker; a broker restarted by hand
    from the cluster's config is seen by `status` (by the lock on its log dir) and stopped by
    `down`; `up` refuses while anything runs and afterwards starts the stopped cluster again with
    its data; `add-broker` registers a new id."""
    import os
    import signal

    d = tmp_path / "c"
    zk_port, port = free_port(), consecutive_free_ports(3)
    up = odradek("cluster", "up", "--dir", str(d), "--brokers", "2", "--zookeeper-port", str(zk_port),
                 "--port", str(port), "--override", "zookeeper.session.timeout.ms=6000", "--timeout", "60")
    hand: subprocess.Popen[bytes] | None = None
    other: BrokerProcess | None = None
    try:
        assert up.returncode == 0, up.stderr
        bootstrap = f"127.0.0.1:{port}"
        created = odradek("topics", "create", "kept", "--partitions", "2", "--replication-factor", "2", "-b", bootstrap)
        assert created.returncode == 0, created.stderr

        killed = odradek("cluster", "kill", "1", "--dir", str(d))
        assert killed.returncode == 0 and "broker 1 killed (SIGKILL" in killed.stdout, killed.stderr
        status = odradek("cluster", "status", "--dir", str(d))
        assert f"broker 1 127.0.0.1:{port + 1}: NOT RUNNING" in status.stdout, status.stdout
        refused = odradek("cluster", "up", "--dir", str(d), "--brokers", "2")
        assert refused.returncode == 1 and "is running (ZooKeeper pid" in refused.stderr, refused.stderr
        again = odradek("cluster", "kill", "1", "--dir", str(d))
        assert again.returncode == 1 and again.stderr.strip() == "Error: broker 1 is not running"
        unknown = odradek("cluster", "start", "7", "--dir", str(d))
        assert unknown.returncode == 1 and unknown.stderr.strip() == f"Error: no broker 7 in {d} (brokers: 0, 1)"

        # by hand, as a user would: its own session, the cluster's config
        log = open(tmp_path / "hand.log", "wb")
        hand = subprocess.Popen([sys.executable, "-m", "clients.cli", "serve", "--config",
                                 str(d / "broker-1" / "server.properties")], cwd=d / "broker-1", stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and "event='broker started'" not in (tmp_path / "hand.log").read_text():
            assert hand.poll() is None, (tmp_path / "hand.log").read_text()
            time.sleep(0.2)
        status = odradek("cluster", "status", "--dir", str(d))
        assert f"broker 1 127.0.0.1:{port + 1}: running (pid {hand.pid})" in status.stdout, status.stdout
        running = odradek("cluster", "start", "1", "--dir", str(d))
        assert running.returncode == 1 and running.stderr.strip() == f"Error: broker 1 is running (pid {hand.pid})"

        stopped = odradek("cluster", "stop", "0", "--dir", str(d))
        assert stopped.returncode == 0 and "broker 0 stopped" in stopped.stdout, stopped.stderr
        restarted = odradek("cluster", "restart", "0", "--dir", str(d))
        assert restarted.returncode == 0 and f"broker 0 started: 127.0.0.1:{port}" in restarted.stdout, restarted.stderr

        down = odradek("cluster", "down", "--dir", str(d))
        assert down.returncode == 0, down.stderr
        assert f"broker 1 stopped (pid {hand.pid})" in down.stdout, down.stdout
        assert hand.wait(10) == 0  # a clean shutdown

        # everything gone: `up` starts the same cluster again, its ports and data kept
        up = odradek("cluster", "up", "--dir", str(d), "--zookeeper-port", str(zk_port), "--brokers", "2",
                     "--timeout", "60")
        assert up.returncode == 0, up.stderr
        assert f"bootstrap: 127.0.0.1:{port},127.0.0.1:{port + 1}" in up.stdout
        described = odradek("topics", "describe", "kept", "-b", bootstrap)
        assert described.returncode == 0 and described.stdout.count("Leader:") == 2, described.stdout + described.stderr

        added = odradek("cluster", "add-broker", "--dir", str(d), "--timeout", "60")
        assert added.returncode == 0, added.stderr
        assert f"broker 2 started: 127.0.0.1:{port + 2}" in added.stdout and "broker 2 registered" in added.stdout
        assert "zookeeper.session.timeout.ms=6000" in (d / "broker-2" / "server.properties").read_text()
        # a broker of this cluster with its log dir elsewhere: found by its registration and port
        other = BrokerProcess(tmp_path / "elsewhere", zookeeper_connect=f"127.0.0.1:{zk_port}", broker_id=5).start()
        status = odradek("cluster", "status", "--dir", str(d))
        assert "brokers [0, 1, 2, 5]" in status.stdout, status.stdout
        assert (f"broker 5 127.0.0.1:{other.port}: running (pid {other.proc.pid}), started outside {d}"
                in status.stdout), status.stdout
    finally:
        down = odradek("cluster", "down", "--dir", str(d))
        for p in (hand, other and other.proc):
            if p is not None and p.poll() is None:
                os.kill(p.pid, signal.SIGKILL)
                p.wait()
        if other is not None:
            other.stop()
    assert down.returncode == 0, down.stderr
    assert "broker 2 stopped" in down.stdout and f"broker 5 stopped (pid {other.proc.pid})" in down.stdout, down.stdout
    assert other.proc.returncode == 0
    from clients.zookeeper_server import serves

    assert not serves("127.0.0.1", zk_port)


def test_status_of_a_sasl_cluster_takes_a_command_config(tmp_path: Path) -> None:
    """A cluster brought up with its listener mapped to SASL_PLAINTEXT (PLAIN, 2 s sessions:
    the brokers' own connections re-authenticate): `status --command-config` asks the brokers as
    that user; without it the brokers are named as wanting SASL authentication, not as down, and
    so is the bootstrap server of a client command."""
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            'password="admin-secret" user_admin="admin-secret";')
    d = tmp_path / "c"
    zk_port, port = free_port(), consecutive_free_ports(2)
    overrides = ["listener.security.protocol.map=PLAINTEXT:SASL_PLAINTEXT", "sasl.enabled.mechanisms=PLAIN",
                 "sasl.mechanism.inter.broker.protocol=PLAIN", f"sasl.jaas.config={jaas}",
                 "connections.max.reauth.ms=2000"]
    up = odradek("cluster", "up", "--dir", str(d), "--brokers", "2", "--zookeeper-port", str(zk_port),
                 "--port", str(port), *(a for o in overrides for a in ("--override", o)), "--timeout", "60")
    config = tmp_path / "admin.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.jaas.config="
                      + jaas.replace(' user_admin="admin-secret"', "") + "\n")
    try:
        assert up.returncode == 0, up.stderr
        status = odradek("cluster", "status", "--dir", str(d), "--command-config", str(config))
        assert status.returncode == 0, status.stderr
        assert f"broker 1 127.0.0.1:{port + 1}: running" in status.stdout, status.stdout
        assert "brokers [0, 1]" in status.stdout and "offline: 0; under-replicated: 0" in status.stdout

        bare = odradek("cluster", "status", "--dir", str(d))
        assert bare.returncode == 0, bare.stderr
        wants = "NOT ANSWERING: the broker closed the connection at Metadata after answering ApiVersions: " \
                "its listener wants SASL authentication (give --command-config)"
        assert f"broker 0 127.0.0.1:{port}: {wants}" in bare.stdout, bare.stdout
        assert "cluster " not in bare.stdout

        listed = odradek("topics", "list", "-b", f"127.0.0.1:{port}")
        assert listed.returncode == 1
        assert "its listener wants SASL authentication (check --command-config)" in listed.stderr, listed.stderr
    finally:
        down = odradek("cluster", "down", "--dir", str(d))
    assert down.returncode == 0, down.stderr
    logs = "".join(p.read_text() for p in (d / "logs").glob("broker-*.log"))
    assert "Disconnecting expired channel" not in logs
