"""Client quota configs through Kafka 3.9's kafka-configs (ConfigCommand over AlterClientQuotas /
DescribeClientQuotas, issue #23 §4): clients, users, user + client-id and the `<default>`s are
set, described and deleted on a single node, survive its restart (the metadata store), and an
unknown key is refused; in ZooKeeper mode they are stored at Kafka's /config paths with a
/config/changes notification."""

from __future__ import annotations

import asyncio
import json
import struct
from pathlib import Path

from controller.zk.client import ZooKeeperClient
from protocol.framing import decode_response, encode_request_frame
from protocol.messages import AlterClientQuotasRequest
from protocol.messages import alter_client_quotas_request as acq
from tests.broker_process import BrokerProcess, free_port
from tests.compat.jvm import run_tool
from tests.raw_client import RawConnection
from tests.zookeeper import ZooKeeperServer

CONFIGS = "kafka.admin.ConfigCommand"


def configs(b: BrokerProcess, *args: str, check: bool = True) -> str:
    proc = run_tool(CONFIGS, "--bootstrap-server", b.bootstrap, *args, check=check)
    return proc.stdout + proc.stderr


def test_kafka_configs_alter_describe_delete_and_restart(tmp_path: Path) -> None:
    port = free_port()
    b = BrokerProcess(tmp_path / "data", port=port).start()
    try:
        configs(b, "--alter", "--add-config", "producer_byte_rate=1024,request_percentage=12.5",
                "--entity-type", "clients", "--entity-name", "c1")
        configs(b, "--alter", "--add-config", "consumer_byte_rate=2048", "--entity-type", "users",
                "--entity-name", "alice", "--entity-type", "clients", "--entity-name", "c 2")
        configs(b, "--alter", "--add-config", "producer_byte_rate=4096", "--entity-type", "users", "--entity-default")
        out = configs(b, "--describe", "--entity-type", "clients", "--entity-name", "c1")
        assert "Quota configs for client-id 'c1' are producer_byte_rate=1024.0, request_percentage=12.5" in out, out
        out = configs(b, "--describe", "--entity-type", "users", "--entity-name", "alice",
                      "--entity-type", "clients", "--entity-name", "c 2")
        assert "Quota configs for user-principal 'alice', client-id 'c 2' are consumer_byte_rate=2048.0" in out, out
        out = configs(b, "--describe", "--entity-type", "users", "--entity-default")
        assert "Quota configs for the default user-principal are producer_byte_rate=4096.0" in out, out
        out = configs(b, "--alter", "--add-config", "producer_byte_rate=1.5", "--entity-type", "clients",
                      "--entity-name", "c1", check=False)
        assert "must be a Long value" in out, out
        out = configs(b, "--alter", "--add-config", "no_such_rate=1", "--entity-type", "clients",
                      "--entity-name", "c1", check=False)
        assert "no_such_rate" in out, out
        configs(b, "--alter", "--delete-config", "request_percentage", "--entity-type", "clients", "--entity-name", "c1")
        b.stop()
        b = BrokerProcess(tmp_path / "data", port=port).start()
        out = configs(b, "--describe", "--entity-type", "clients", "--entity-name", "c1")
        assert "Quota configs for client-id 'c1' are producer_byte_rate=1024.0\n" in out, out
        out = configs(b, "--describe", "--entity-type", "users", "--entity-default")
        assert "producer_byte_rate=4096.0" in out, out
    finally:
        b.stop()


def test_zookeeper_paths_and_notification(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", port=free_port(), zookeeper_connect=zookeeper.connect_string("/q"),
                      broker_id=1, overrides=["offsets.topic.replication.factor=1"]).start()
    try:
        configs(b, "--alter", "--add-config", "producer_byte_rate=1024", "--entity-type", "users",
                "--entity-name", "CN=a b", "--entity-type", "clients", "--entity-default")
        data, changes = asyncio.run(read_zk(zookeeper.connect_string("/q")))
        assert json.loads(data) == {"version": 1, "config": {"producer_byte_rate": "1024"}}
        assert {"version": 2, "entity_path": "users/CN%3Da%20b/clients/<default>"} in changes, changes
        out = configs(b, "--describe", "--entity-type", "users", "--entity-name", "CN=a b",
                      "--entity-type", "clients", "--entity-default")
        assert "producer_byte_rate=1024.0" in out, out
    finally:
        b.stop()


async def read_zk(connect: str) -> tuple[bytes, list[object]]:
    """The entity's znode and every change notification."""
    zk = await ZooKeeperClient(connect, session_timeout_ms=10_000, connection_timeout_ms=10_000,
                               request_timeout_ms=10_000).start()
    try:
        data, _ = await zk.get_data("/config/users/CN%3Da%20b/clients/<default>")
        assert data is not None
        changes = []
        for c in await zk.get_children("/config/changes"):
            raw, _ = await zk.get_data(f"/config/changes/{c}")
            changes.append(json.loads(raw or b"null"))
        return data, changes
    finally:
        await zk.close()


def test_concurrent_alters_of_one_entity_keep_both(zookeeper: ZooKeeperServer, tmp_path: Path) -> None:
    """Two AlterClientQuotas of the same client-id, sent at the same moment on two connections,
    each setting its own key: both keys end up in /config/clients/<c> (the write is a conditional
    setData of the version read, retried on BadVersion), in every one of 15 rounds. Without the
    version check both read the same znode and the second write drops the first one's key."""
    b = BrokerProcess(tmp_path / "data", port=free_port(), zookeeper_connect=zookeeper.connect_string("/race"),
                      broker_id=1, overrides=["offsets.topic.replication.factor=1"]).start()
    try:
        with RawConnection(b.port, "a") as one, RawConnection(b.port, "b") as two:
            lost = []
            for i in range(15):
                client = f"race-{i}"
                frames = [(conn, encode_request_frame(49, 1, i + 1, conn.client_id, AlterClientQuotasRequest(entries=[
                    acq.EntryData(entity=[acq.EntityData(entity_type="client-id", entity_name=client)],
                                  ops=[acq.OpData(key=key, value=1000.0 + i, remove=False)])])))
                          for conn, key in ((one, "producer_byte_rate"), (two, "consumer_byte_rate"))]
                for conn, frame in frames:
                    conn.sock.sendall(frame)
                for conn, _ in frames:
                    (size,) = struct.unpack(">i", conn.recv_exact(4))
                    _, resp = decode_response(conn.recv_exact(size), 49, 1)
                    assert resp.entries[0].error_code == 0, resp
                data, _ = asyncio.run(read_znode(zookeeper.connect_string("/race"), f"/config/clients/{client}"))
                if set(json.loads(data)["config"]) != {"producer_byte_rate", "consumer_byte_rate"}:
                    lost.append((client, json.loads(data)))
            assert not lost
    finally:
        b.stop()


async def read_znode(connect: str, path: str) -> tuple[bytes, object]:
    zk = await ZooKeeperClient(connect, session_timeout_ms=10_000, connection_timeout_ms=10_000,
                               request_timeout_ms=10_000).start()
    try:
        data, stat = await zk.get_data(path)
        assert data is not None
        return data, stat
    finally:
        await zk.close()
