"""The broker side of ZooKeeper mode (issue #14) with a real ZooKeeper and real `odradek serve`
processes: start-up (persistent paths, cluster id, meta.properties, the /brokers/ids/<id>
registration in Kafka 3.9's JSON, re-registration after a session expiry), and the controller's
requests -- the test plays a Kafka 3.9 controller (UpdateMetadata v8, LeaderAndIsr v7, StopReplica
v4 over broker.network_client) and checks with client requests what the broker made of them:
Metadata from the MetadataCache, leading and following, NOT_LEADER_OR_FOLLOWER with the current
leader (KIP-951), controller and broker epoch fencing, deletion.

Every wait is on an event (a log line, a ZooKeeper watch, a response), bounded."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
import warnings
from collections.abc import AsyncIterator, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from controller.zk import data as zd
from controller.zk.client import ZooKeeperClient
from controller.zk.data import Broker, BrokerIdZNode, BrokerInfo, EndPoint
from controller.zk.kafka_zk_client import KafkaZkClient
from protocol.errors import ErrorCode
from protocol.messages import (
    ApiVersionsRequest,
    DescribeClusterRequest,
    MetadataRequest,
    UpdateMetadataRequest,
)
from protocol.records import decode_records
from storage.checkpoints import MetaProperties, read_meta_properties, write_meta_properties
from tests.broker_process import BrokerProcess, free_port
from tests.cluster.control_requests import Client, Controller, Part, metadata_view, partition_errors
from tests.cluster.zk_proxy import ZkProxy
from tests.raw_client import RawConnection
from tests.zookeeper import ZooKeeperServer

CHROOT = "/odradek"
WAIT = 20.0
# with the test in the controller seat there is no controller to ask for a controlled shutdown (the
# broker would try 3 times, 5 s apart)
SEATED = "controlled.shutdown.enable=false"
TOPIC_ID = uuid.UUID("5f1ad5b6-0c3e-4b1f-9a7e-2d7f3c1b9e01")
# the `cluster` broker's file.delete.delay.ms: a deleted log's renamed directory goes this much later
DELETE_DELAY_MS = 1500


@pytest.fixture
async def zk(zookeeper: ZooKeeperServer) -> AsyncIterator[KafkaZkClient]:
    """The test's own session on the cluster's chroot, to read what brokers wrote."""
    client = await ZooKeeperClient(zookeeper.connect_string(CHROOT), session_timeout_ms=6000,
                                   connection_timeout_ms=10_000, request_timeout_ms=10_000).start(create_chroot=True)
    yield KafkaZkClient(client)
    await client.close()


@pytest.fixture
async def seat(zk: KafkaZkClient) -> int:
    """The test takes the controller seat (/controller = 7, /controller_epoch bumped) before any
    broker starts, so the brokers' own KafkaControllers stay out and the test's requests are the
    controller's; returns the controller epoch."""
    epoch, _ = await zk.register_controller_and_increment_controller_epoch(7)
    return epoch


async def eventually(check: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Poll an async `check` until it returns something truthy (bounded): for state another
    process reaches without a line or znode to wait on (its metadata cache)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        result = await check()
        if result:
            return result
        if loop.time() > deadline:
            raise TimeoutError(f"{what}: not within {timeout}s")
        await asyncio.sleep(0.05)



async def started(start: Callable[..., BrokerProcess], *args: Any, **kw: Any) -> BrokerProcess:
    return await asyncio.to_thread(start, *args, **kw)


def broker_epoch(b: BrokerProcess) -> int:
    line = b.wait_for_line("event='broker started'", timeout=1)
    m = re.search(r"broker_epoch=(\d+)", line)
    assert m, line
    return int(m.group(1))


async def refused(start: Callable[..., BrokerProcess], *args: Any, **kw: Any) -> str:
    """Start a broker that must refuse to start: its exit code 1 and critical line."""
    with pytest.raises(RuntimeError, match="did not start") as info:
        await started(start, *args, **kw)
    line = next(line for line in str(info.value).splitlines() if "fatal error during broker startup" in line)
    return line


# --- start-up and registration --------------------------------------------------------------------


async def test_broker_registers_with_kafkas_json_and_takes_the_cluster_id(zk, zookeeper, start_broker, tmp_path):
    b = await started(start_broker, 1, zookeeper.connect_string(CHROOT), "broker.rack=rack-a")
    epoch = broker_epoch(b)
    b.wait_for_line(f"Registered broker 1 at path /brokers/ids/1 with addresses: PLAINTEXT://127.0.0.1:{b.port}, "
                    f"czxid (broker epoch): {epoch}", timeout=1)

    # Kafka's persistent paths, null data
    for path in zd.PERSISTENT_ZK_PATHS:
        data, stat = await zk.get_data_and_stat(path)
        assert stat is not None and data is None, path

    # /brokers/ids/1: ephemeral, owned by the broker's session, czxid = the broker epoch, JSON v5
    data, stat = await zk.get_data_and_stat("/brokers/ids/1")
    assert stat is not None and stat.czxid == epoch and stat.ephemeral_owner != 0
    assert stat.version == 1  # created with null data, then set: as Kafka's checked ephemeral
    doc = json.loads(data)
    timestamp = doc.pop("timestamp")
    assert isinstance(timestamp, str) and timestamp.isdigit()
    assert doc == {"features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                   "endpoints": [f"PLAINTEXT://127.0.0.1:{b.port}"], "rack": "rack-a", "jmx_port": -1,
                   "port": b.port, "host": "127.0.0.1", "version": 5}
    assert BrokerIdZNode.decode(1, data) == BrokerInfo(
        Broker(1, (EndPoint("127.0.0.1", b.port, "PLAINTEXT", "PLAINTEXT"),), "rack-a", {}), 5, -1)

    # the cluster id: created in /cluster/id, announced, written into meta.properties (v0)
    cluster_id = await zk.get_cluster_id()
    assert cluster_id is not None and re.fullmatch(r"[A-Za-z0-9_-]{22}", cluster_id)
    b.wait_for_line(f"Cluster ID = {cluster_id}", timeout=1)
    assert f"cluster_id='{cluster_id}'" in b.wait_for_line("event='broker started'", timeout=1)
    assert read_meta_properties(tmp_path / "broker-1" / "meta.properties") == MetaProperties(0, cluster_id, 1)

    # ApiVersions of a ZooKeeper-mode broker lists the controller's requests, as Kafka's does
    client = Client(b.port)
    try:
        versions = {k.api_key: (k.min_version, k.max_version) for k in (await client.send(ApiVersionsRequest(client_software_name="zk-test", client_software_version="1"), 3)).api_keys}
        assert (versions[4], versions[5], versions[6]) == ((0, 7), (0, 4), (0, 8))
        assert (versions[7], versions[43], versions[56]) == ((0, 3), (0, 2), (0, 3))  # Kafka 3.9's ranges
        # alone, it is elected controller, and its UpdateMetadata fills its own metadata cache
        async def self_described() -> Any:
            meta = metadata_view(await client.metadata())
            return meta if meta["controller_id"] == 1 else None
        meta = await eventually(self_described, "the broker's metadata naming it controller")
        assert (meta["cluster_id"], meta["brokers"], meta["topics"]) == (
            cluster_id, [(1, "127.0.0.1", b.port, "rack-a")], {})
        assert await zk.get_controller_id() == 1
    finally:
        await client.close()

    # a clean stop ends the session: the registration goes at once
    b.stop()
    assert await zk.get_sorted_broker_list() == []


async def test_two_brokers_register_in_one_cluster_and_conflicts_are_refused(zk, zookeeper, start_broker):
    connect = zookeeper.connect_string(CHROOT)
    b1 = await started(start_broker, 1, connect)
    b2 = await started(start_broker, 2, connect, "broker.rack=rack-b")
    e1, e2 = broker_epoch(b1), broker_epoch(b2)
    registered = await zk.get_all_broker_and_epochs_in_cluster()
    assert {i: r.epoch for i, r in registered.items()} == {1: e1, 2: e2} and e2 > e1
    assert registered[1].broker == Broker(1, (EndPoint("127.0.0.1", b1.port, "PLAINTEXT", "PLAINTEXT"),), None, {})
    assert registered[2].broker == Broker(2, (EndPoint("127.0.0.1", b2.port, "PLAINTEXT", "PLAINTEXT"),), "rack-b", {})
    cluster_id = await zk.get_cluster_id()
    for b in (b1, b2):  # the second took the first's cluster id
        assert f"cluster_id='{cluster_id}'" in b.wait_for_line("event='broker started'", timeout=1)
    # one of them is elected controller and tells both about both
    controller_id = await zk.get_controller_id()
    assert controller_id in (1, 2)
    for b in (b1, b2):
        client = Client(b.port)
        try:
            async def both(client: Client = client) -> Any:
                meta = metadata_view(await client.metadata())
                return meta if len(meta["brokers"]) == 2 else None
            meta = await eventually(both, f"broker {b.port}'s metadata listing both brokers")
            assert meta["brokers"] == [(1, "127.0.0.1", b1.port, None), (2, "127.0.0.1", b2.port, "rack-b")]
            assert (meta["controller_id"], meta["cluster_id"]) == (controller_id, cluster_id)
        finally:
            await client.close()

    # the same broker id again: the live registration belongs to another session
    line = await refused(start_broker, 1, connect, log_dir=b1.log_dir.parent / "dup")
    assert "Registering broker 1 in ZooKeeper failed" in line and "node already exists" in line
    # another broker advertising broker 1's endpoint (Kafka's createBrokerInfo requirement)
    line = await refused(start_broker, 3, connect, f"advertised.listeners=PLAINTEXT://127.0.0.1:{b1.port}")
    assert (f"requirement failed: Configured end points 127.0.0.1:{b1.port} in advertised listeners are already "
            "registered by broker 1") in line
    assert await zk.get_sorted_broker_list() == [1, 2]


async def test_unreachable_zookeeper_and_another_clusters_log_dir_refuse_the_start(zk, zookeeper, start_broker, tmp_path):
    dead = f"127.0.0.1:{free_port()}"
    line = await refused(start_broker, 1, dead, "zookeeper.connection.timeout.ms=1000")
    assert "Timed out waiting for connection" in line and f"zookeeper.connect={dead}" in line

    log_dir = tmp_path / "other-cluster"
    log_dir.mkdir()
    write_meta_properties(log_dir / "meta.properties", MetaProperties(0, "AAAAAAAAAAAAAAAAAAAAAA", 1))
    line = await refused(start_broker, 1, zookeeper.connect_string(CHROOT), log_dir=log_dir)
    cluster_id = await zk.get_cluster_id()
    assert (f"Invalid cluster.id in: {log_dir / 'meta.properties'}. Expected {cluster_id}, but read "
            "AAAAAAAAAAAAAAAAAAAAAA") in line
    assert read_meta_properties(log_dir / "meta.properties").cluster_id == "AAAAAAAAAAAAAAAAAAAAAA"  # untouched


class ZNodeEvents:
    """A ZNodeChangeHandler that queues what happens to one path."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.events: asyncio.Queue[str] = asyncio.Queue()

    def handle_creation(self) -> None:
        self.events.put_nowait("created")

    def handle_deletion(self) -> None:
        self.events.put_nowait("deleted")

    def handle_data_change(self) -> None:
        self.events.put_nowait("changed")

    async def next(self) -> str:
        return await asyncio.wait_for(self.events.get(), WAIT)


async def test_a_new_session_after_expiry_registers_again_with_a_new_broker_epoch(zk, seat, zookeeper, start_broker):
    proxy = await ZkProxy(zookeeper.port).start()
    controller = Controller()
    try:
        b = await started(start_broker, 1, proxy.connect_string(CHROOT), "zookeeper.session.timeout.ms=1500",
                          SEATED)
        old_epoch = broker_epoch(b)
        controller.add_broker(1, b.port)
        watch = ZNodeEvents("/brokers/ids/1")
        zk.zk.register_znode_change_handler(watch)
        assert await zk.zk.exists(watch.path, watch=True) is not None
        mark = len(b.lines)

        proxy.block()  # the broker's session goes silent: ZooKeeper expires it, the registration goes
        assert await watch.next() == "deleted"
        assert await zk.zk.exists(watch.path, watch=True) is None
        proxy.unblock()  # the broker's client reconnects, learns of the expiry, opens a new session
        assert await watch.next() == "created"

        data, stat = await zk.get_data_and_stat(watch.path)
        new_epoch = stat.czxid
        assert new_epoch > old_epoch and stat.ephemeral_owner != 0
        assert BrokerIdZNode.decode(1, data).broker.endpoints == (EndPoint("127.0.0.1", b.port, "PLAINTEXT", "PLAINTEXT"),)
        await asyncio.to_thread(b.wait_for_line, f"Re-registered broker 1 after its ZooKeeper session expired: broker "
                                f"epoch {new_epoch} (was {old_epoch})", WAIT, mark)

        # requests meant for the old registration are fenced; the new epoch is accepted
        live = [(1, b.port, None)]
        stale = await controller.update_metadata(1, controller_epoch=seat, broker_epoch=old_epoch, live=live)
        assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
        current = await controller.update_metadata(1, controller_epoch=seat, broker_epoch=new_epoch, live=live)
        assert current.error_code == ErrorCode.NONE
        assert await asyncio.to_thread(b.stop) == 0  # while ZooKeeper is reachable through the proxy
    finally:
        await controller.close()
        await proxy.close()


# --- the controller's requests ------------------------------------------------------------------


@pytest.fixture
async def cluster(seat, zookeeper, start_broker) -> AsyncIterator[Any]:
    """Broker 1 (rack-a) of a ZooKeeper-mode cluster, the test as controller 7 (epoch 1), a client."""
    assert seat == 1
    b = await started(start_broker, 1, zookeeper.connect_string(CHROOT), "broker.rack=rack-a", SEATED,
                      f"log.segment.delete.delay.ms={DELETE_DELAY_MS}")
    controller = Controller()
    controller.add_broker(1, b.port)
    client = Client(b.port)
    ghost_port = free_port()  # broker 2: in the metadata, nothing listens there
    try:
        yield SimpleNamespace(broker=b, epoch=broker_epoch(b), ghost_port=ghost_port, controller=controller,
                              client=client, live=[(1, b.port, "rack-a"), (2, ghost_port, "rack-b")])
    finally:
        await client.close()
        await controller.close()


async def test_update_metadata_replaces_the_metadata_cache_fenced_by_epochs(cluster):
    c, controller, client = cluster, cluster.controller, cluster.client
    parts = [
        Part("t", 0, leader=1, leader_epoch=3, isr=[1, 2], replicas=[1, 2], partition_epoch=4),
        Part("t", 1, leader=2, leader_epoch=5, isr=[2], replicas=[2, 1], partition_epoch=6, offline=[1]),
        Part("t", 2, leader=3, leader_epoch=1, isr=[3], replicas=[3, 1]),  # broker 3 is not live
        Part("gone", 0, leader=2, leader_epoch=0, isr=[2], replicas=[2]),
    ]
    gone_id = uuid.uuid4()
    resp = await controller.update_metadata(1, controller_epoch=1, broker_epoch=c.epoch, live=c.live, parts=parts,
                                            topic_ids={"t": TOPIC_ID, "gone": gone_id})
    assert resp.error_code == ErrorCode.NONE
    meta = metadata_view(await client.metadata())
    assert meta["brokers"] == [(1, "127.0.0.1", c.broker.port, "rack-a"), (2, "127.0.0.1", c.ghost_port, "rack-b")]
    assert meta["controller_id"] == 7
    assert meta["topics"] == {
        "t": (0, TOPIC_ID, {
            0: (0, 1, 3, [1, 2], [1, 2], []),
            1: (0, 2, 5, [2, 1], [2], [1]),
            2: (ErrorCode.LEADER_NOT_AVAILABLE, -1, 1, [3, 1], [3], []),  # an election is under way
        }),
        "gone": (0, gone_id, {0: (0, 2, 0, [2], [2], [])}),
    }
    # v0 lists only live replicas (Kafka's errorUnavailableEndpoints)
    v0 = metadata_view(await client.metadata(["t"], version=0))
    assert v0["topics"]["t"][2][2] == (ErrorCode.LEADER_NOT_AVAILABLE, -1, -1, [1], [], [])  # no epoch in v0
    described = await client.send(DescribeClusterRequest(), 1)
    assert (described.controller_id, sorted(br.broker_id for br in described.brokers)) == (7, [1, 2])

    # a partial update from a new controller: broker 2 left, "gone" deleted (leader -2), t kept
    resp = await controller.update_metadata(1, controller_epoch=2, broker_epoch=c.epoch, live=c.live[:1],
                                            parts=[Part("gone", 0, leader=-2, leader_epoch=0, isr=[2], replicas=[2])],
                                            topic_ids={"gone": gone_id}, controller_id=8)
    assert resp.error_code == ErrorCode.NONE
    meta = metadata_view(await client.metadata())
    assert (meta["controller_id"], [br[0] for br in meta["brokers"]], sorted(meta["topics"])) == (8, [1], ["t"])
    assert meta["topics"]["t"][2][1] == (ErrorCode.LEADER_NOT_AVAILABLE, -1, 5, [2, 1], [2], [1])

    # fenced: the old controller's epoch, and a broker epoch of an earlier registration
    stale = await controller.update_metadata(1, controller_epoch=1, broker_epoch=c.epoch, live=c.live)
    assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    stale = await controller.update_metadata(1, controller_epoch=3, broker_epoch=c.epoch - 1, live=c.live)
    assert stale.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert metadata_view(await client.metadata()) == meta  # neither changed anything
    await asyncio.to_thread(c.broker.wait_for_line, "[Broker id=1] Received update metadata request with correlation "
                            "id", 5)


async def test_leader_and_isr_makes_the_broker_lead_or_follow(cluster):
    c, controller, client = cluster, cluster.controller, cluster.client
    ids = {"t": TOPIC_ID}
    parts = [
        Part("t", 0, leader=1, leader_epoch=3, isr=[1], replicas=[1, 2], partition_epoch=4),
        Part("t", 1, leader=2, leader_epoch=5, isr=[2, 1], replicas=[2, 1], partition_epoch=6),
        Part("t", 2, leader=2, leader_epoch=0, isr=[2], replicas=[2, 3]),  # not a replica here
    ]
    assert (await controller.update_metadata(1, controller_epoch=1, broker_epoch=c.epoch, live=c.live, parts=parts,
                                             topic_ids=ids)).error_code == 0
    resp = await controller.leader_and_isr(1, controller_epoch=1, broker_epoch=c.epoch, parts=parts, topic_ids=ids,
                                           leaders=[(1, c.broker.port), (2, c.ghost_port)])
    assert resp.error_code == 0
    assert partition_errors(resp) == {(TOPIC_ID, 0): 0, (TOPIC_ID, 1): 0,
                                      (TOPIC_ID, 2): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    log_dir = c.broker.log_dir
    for p in (0, 1):  # both hosted, with the topic id
        assert (log_dir / f"t-{p}" / "partition.metadata").read_text().endswith(
            zd.uuid_to_string(TOPIC_ID))
    assert not (log_dir / "t-2").exists()
    for line in (f"[Broker id=1] Leader t-0 with topic id {zd.uuid_to_string(TOPIC_ID)} starts at leader epoch 3 "
                 "from offset 0 with partition epoch 4, high watermark 0, ISR [1]",
                 "[Broker id=1] Follower t-1 starts at leader epoch 5 from offset 0 with partition epoch 6 and high "
                 "watermark 0. Current leader is 2."):  # stderr is read by a thread: wait for it
        await asyncio.to_thread(c.broker.wait_for_line, line, 5)

    # leader of t-0: produce (acks=all: the ISR is this broker) and fetch work
    _, r = await client.produce("t", 0, b"led here")
    assert (r.error_code, r.base_offset) == (0, 0)
    f = await client.fetch("t", 0)
    assert f.error_code == 0 and f.high_watermark == 1
    assert [rec.value for rec in decode_records(f.records)[1]] == [b"led here"]
    assert (await client.list_offsets("t", 0)).offset == 1
    # follower of t-1: NOT_LEADER_OR_FOLLOWER, with the current leader and its endpoint (KIP-951)
    resp, r = await client.produce("t", 1, b"x")
    assert r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (r.current_leader.leader_id, r.current_leader.leader_epoch) == (2, 5)
    assert [(n.node_id, n.host, n.port, n.rack) for n in resp.node_endpoints] == [(2, "127.0.0.1", c.ghost_port, "rack-b")]
    assert (await client.fetch("t", 1, version=10)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    f = await client.fetch("t", 1)  # v11+ (KIP-392): a follower serves consumers up to its high watermark
    assert (f.error_code, f.high_watermark) == (0, 0)
    assert (await client.list_offsets("t", 1)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (await client.offset_for_leader_epoch("t", 1, 5)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # named by the LeaderAndIsr but not a replica here: Kafka's empty Partition, no leader known
    _, r = await client.produce("t", 2, b"x")
    assert (r.error_code, r.current_leader.leader_id, r.current_leader.leader_epoch) == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER, -1, -1)
    assert (await client.fetch("t", 2)).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    _, r = await client.produce("nope", 0, b"x")
    assert r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    _, r = await client.produce("t", 1, b"x", version=9)  # before KIP-951: only the error
    assert r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

    # not newer leader epochs are refused per partition; another topic id; an older controller
    resp = await controller.leader_and_isr(1, controller_epoch=1, broker_epoch=c.epoch, topic_ids=ids, parts=[
        Part("t", 0, leader=1, leader_epoch=3, isr=[1], replicas=[1, 2]),
        Part("t", 1, leader=2, leader_epoch=4, isr=[2], replicas=[2, 1])])
    assert partition_errors(resp) == {(TOPIC_ID, 0): ErrorCode.STALE_CONTROLLER_EPOCH,
                                      (TOPIC_ID, 1): ErrorCode.STALE_CONTROLLER_EPOCH}
    other = uuid.uuid4()
    resp = await controller.leader_and_isr(1, controller_epoch=1, broker_epoch=c.epoch, topic_ids={"t": other},
                                           parts=[Part("t", 0, leader=1, leader_epoch=9, isr=[1], replicas=[1, 2])])
    assert partition_errors(resp) == {(other, 0): ErrorCode.INCONSISTENT_TOPIC_ID}
    for epochs, code in (((0, c.epoch), ErrorCode.STALE_CONTROLLER_EPOCH), ((1, c.epoch - 1), ErrorCode.STALE_BROKER_EPOCH)):
        resp = await controller.leader_and_isr(1, controller_epoch=epochs[0], broker_epoch=epochs[1], topic_ids=ids,
                                               parts=[Part("t", 0, leader=2, leader_epoch=9, isr=[2], replicas=[1, 2])])
        assert (resp.error_code, partition_errors(resp)) == (code, {(TOPIC_ID, 0): code})
    _, r = await client.produce("t", 0, b"still led")  # nothing of that was applied
    assert (r.error_code, r.base_offset) == (0, 1)

    # leadership moves: t-0 to broker 2 (this broker follows), t-1 to this broker
    resp = await controller.leader_and_isr(1, controller_epoch=2, broker_epoch=c.epoch, topic_ids=ids, parts=[
        Part("t", 0, leader=2, leader_epoch=4, isr=[2, 1], replicas=[1, 2], partition_epoch=5),
        Part("t", 1, leader=1, leader_epoch=6, isr=[1], replicas=[2, 1], partition_epoch=7)])
    assert partition_errors(resp) == {(TOPIC_ID, 0): 0, (TOPIC_ID, 1): 0}
    resp, r = await client.produce("t", 0, b"x")
    assert (r.error_code, r.current_leader.leader_id, r.current_leader.leader_epoch) == (
        ErrorCode.NOT_LEADER_OR_FOLLOWER, 2, 4)
    _, r = await client.produce("t", 1, b"now led here")
    assert (r.error_code, r.base_offset) == (0, 0)
    assert (await client.offset_for_leader_epoch("t", 1, 6)).error_code == 0
    await asyncio.to_thread(c.broker.wait_for_line, "Follower t-0 starts at leader epoch 4 from offset 2 with "
                            "partition epoch 5 and high watermark 2. Current leader is 2. Previous leader Some(1) and "
                            "previous leader epoch was 3.", 5)


async def test_stop_replica_stops_and_deletes_partitions(cluster):
    c, controller, client = cluster, cluster.controller, cluster.client
    ids = {"t": TOPIC_ID}
    parts = [Part("t", 0, leader=1, leader_epoch=3, isr=[1], replicas=[1, 2]),
             Part("t", 1, leader=2, leader_epoch=5, isr=[2, 1], replicas=[2, 1])]
    await controller.update_metadata(1, controller_epoch=1, broker_epoch=c.epoch, live=c.live, parts=parts, topic_ids=ids)
    assert partition_errors(await controller.leader_and_isr(
        1, controller_epoch=1, broker_epoch=c.epoch, parts=parts, topic_ids=ids)) == {(TOPIC_ID, 0): 0, (TOPIC_ID, 1): 0}
    _, r = await client.produce("t", 0, b"doomed")
    assert r.error_code == 0
    log_dir = c.broker.log_dir

    def errors(resp: Any) -> tuple[int, dict[tuple[str, int], int]]:
        return resp.error_code, {(p.topic_name, p.partition_index): p.error_code for p in resp.partition_errors}

    # stop without delete: the log stays
    assert errors(await controller.stop_replica(1, controller_epoch=1, broker_epoch=c.epoch,
                                                parts=[("t", 1, 5, False)])) == (0, {("t", 1): 0})
    assert (log_dir / "t-1").is_dir()
    # an older leader epoch is fenced, an older controller and an old registration too
    assert errors(await controller.stop_replica(1, controller_epoch=1, broker_epoch=c.epoch, parts=[("t", 0, 2, True)])) \
        == (0, {("t", 0): ErrorCode.FENCED_LEADER_EPOCH})
    assert errors(await controller.stop_replica(1, controller_epoch=0, broker_epoch=c.epoch, parts=[("t", 0, -2, True)])) \
        == (ErrorCode.STALE_CONTROLLER_EPOCH, {})
    assert errors(await controller.stop_replica(1, controller_epoch=1, broker_epoch=c.epoch - 1,
                                                parts=[("t", 0, -2, True)])) == (ErrorCode.STALE_BROKER_EPOCH, {})
    _, r = await client.produce("t", 0, b"still here")
    assert (r.error_code, r.base_offset) == (0, 1)
    assert (log_dir / "t-0").is_dir()

    # the topic is deleted (leader epoch -2): the partition stops and, when answered, its log is
    # renamed <tp>.<uuid>-delete (Kafka's asyncDelete); the directory is removed
    # file.delete.delay.ms later, not before the answer (issue #21: a StopReplica of 1,000
    # partitions removing their files held the controller's next requests to this broker)
    assert errors(await controller.stop_replica(1, controller_epoch=1, broker_epoch=c.epoch,
                                                parts=[("t", 0, -2, True), ("t", 1, -2, True)])) \
        == (0, {("t", 0): 0, ("t", 1): 0})
    answered = time.monotonic()

    def t_dirs() -> list[str]:
        return sorted(p.name for p in log_dir.iterdir() if p.name.startswith("t-"))
    renamed = t_dirs()
    assert [n.split(".")[0] for n in renamed] == ["t-0", "t-1"] and all(n.endswith("-delete") for n in renamed)

    async def removed() -> bool:
        return t_dirs() == []
    await eventually(removed, "the renamed directories removed", timeout=DELETE_DELAY_MS / 1000 * 2 + WAIT)
    assert time.monotonic() - answered >= DELETE_DELAY_MS / 1000 * 0.8
    await asyncio.to_thread(c.broker.wait_for_line, "Deleted log t-0.", 5)
    _, r = await client.produce("t", 0, b"x")  # the metadata still names it (UpdateMetadata deletes it)
    assert r.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    await controller.update_metadata(1, controller_epoch=1, broker_epoch=c.epoch, live=c.live, topic_ids=ids, parts=[
        Part("t", p, leader=-2, leader_epoch=0, isr=[], replicas=[1, 2]) for p in (0, 1)])
    _, r = await client.produce("t", 0, b"x")
    assert r.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_a_restarted_broker_hosts_nothing_until_the_controller_says(seat, zookeeper, start_broker):
    connect = zookeeper.connect_string(CHROOT)
    b = await started(start_broker, 1, connect, SEATED)
    controller = Controller()
    try:
        controller.add_broker(1, b.port)
        epoch = broker_epoch(b)
        live, ids = [(1, b.port, None)], {"t": TOPIC_ID}
        parts = [Part("t", 0, leader=1, leader_epoch=0, isr=[1], replicas=[1])]
        await controller.update_metadata(1, controller_epoch=1, broker_epoch=epoch, live=live, parts=parts, topic_ids=ids)
        await controller.leader_and_isr(1, controller_epoch=1, broker_epoch=epoch, parts=parts, topic_ids=ids)
        client = Client(b.port)
        try:
            assert (await client.produce("t", 0, b"kept"))[1].error_code == 0
        finally:
            await client.close()
        b.stop()

        b = await started(start_broker, 1, connect, SEATED, log_dir=b.log_dir, port=b.port)
        new_epoch = broker_epoch(b)
        assert new_epoch > epoch
        client = Client(b.port)
        try:
            assert (await client.produce("t", 0, b"x"))[1].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            # a new topic of the same name may not take over the old one's log
            other = uuid.uuid4()
            resp = await controller.leader_and_isr(1, controller_epoch=1, broker_epoch=new_epoch, parts=parts,
                                                   topic_ids={"t": other})
            assert partition_errors(resp) == {(other, 0): ErrorCode.INCONSISTENT_TOPIC_ID}
            # the old one's may (its log kept its records)
            await controller.update_metadata(1, controller_epoch=1, broker_epoch=new_epoch, live=live, parts=parts,
                                             topic_ids=ids)
            resp = await controller.leader_and_isr(1, controller_epoch=1, broker_epoch=new_epoch, topic_ids=ids,
                                                   parts=[Part("t", 0, leader=1, leader_epoch=1, isr=[1], replicas=[1])])
            assert partition_errors(resp) == {(TOPIC_ID, 0): 0}
            _, r = await client.produce("t", 0, b"after restart")
            assert (r.error_code, r.base_offset) == (0, 1)
        finally:
            await client.close()
    finally:
        await controller.close()


async def test_a_single_node_neither_advertises_nor_serves_controller_requests(start_broker):
    b = await started(start_broker, 0, None)
    client = Client(b.port)
    try:
        keys = {k.api_key for k in (await client.send(ApiVersionsRequest(client_software_name="zk-test", client_software_version="1"), 3)).api_keys}
        assert not keys & {4, 5, 6, 7, 43, 56}
    finally:
        await client.close()
    with RawConnection(b.port) as conn, pytest.raises(ConnectionError):  # Kafka closes the connection
        conn.call(6, 8, UpdateMetadataRequest(controller_id=0, controller_epoch=1, broker_epoch=-1))


# --- with the brokers' own controller -------------------------------------------------------------


def test_three_brokers_create_topics_and_clients_follow_the_leaders(zookeeper, start_broker):
    """No test controller: one broker is elected, CreateTopics through another goes to ZooKeeper,
    the controller's LeaderAndIsr/UpdateMetadata make each broker host and lead its share, every
    broker's Metadata agrees, and kafka-python produces and consumes across them, with a consumer
    group whose coordinator is the leader of its offsets partition."""
    with warnings.catch_warnings():  # kafka-python's first import uses importlib.resources.read_text
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
        from kafka.admin import NewTopic

    connect = zookeeper.connect_string(CHROOT)
    # RF 1 for __consumer_offsets: the group's acks=all appends need no follower (replication is
    # the next issue's)
    brokers = [start_broker(i, connect, f"broker.rack=rack-{i}", "offsets.topic.replication.factor=1",
                            "offsets.topic.num.partitions=6", "group.initial.rebalance.delay.ms=0",
                            # the last broker to stop cannot hand its RF 3 leaderships to anyone
                            "controlled.shutdown.retry.backoff.ms=200") for i in (1, 2, 3)]
    def view(b: BrokerProcess) -> dict[str, Any]:
        with RawConnection(b.port) as conn:
            return metadata_view(conn.call(3, 12, MetadataRequest(topics=None, allow_auto_topic_creation=False)))

    # the replication factor is checked against the live brokers in the receiving broker's
    # metadata: the last registration reaches it through the controller's UpdateMetadata
    deadline = time.monotonic() + WAIT
    while min(len(view(b)["brokers"]) for b in brokers) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    admin = KafkaAdminClient(bootstrap_servers=brokers[1].bootstrap, request_timeout_ms=20_000)
    try:
        result = admin.create_topics([NewTopic("spread", 6, 1), NewTopic("replicated", 3, 3)])
        assert [(t["name"], t["error_code"]) for t in result["topics"]] == [("spread", 0), ("replicated", 0)]
    finally:
        admin.close()

    views: list[dict[str, Any]] = []
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:  # UpdateMetadata reaches the brokers one by one
        views = [view(b) for b in brokers]
        if all(v == views[0] for v in views) and len(views[0]["topics"]) == 2:
            break
        time.sleep(0.05)
    assert all(v == views[0] for v in views), views
    meta = views[0]
    assert meta["brokers"] == [(i, "127.0.0.1", b.port, f"rack-{i}") for i, b in zip((1, 2, 3), brokers, strict=True)]
    spread = meta["topics"]["spread"][2]
    assert sorted(p[1] for p in spread.values()) == [1, 1, 2, 2, 3, 3]  # two leaders each
    assert all(p[0] == 0 and p[3] == [p[1]] and p[4] == [p[1]] for p in spread.values())
    replicated = meta["topics"]["replicated"][2]
    assert sorted(p[1] for p in replicated.values()) == [1, 2, 3]
    assert all(sorted(p[3]) == [1, 2, 3] and p[4] == p[3] and p[1] == p[3][0] for p in replicated.values())
    for i, b in zip((1, 2, 3), brokers, strict=True):  # each hosts its own partitions only
        hosted = sorted(p.name for p in b.log_dir.iterdir() if p.name.startswith("spread-"))
        assert hosted == sorted(f"spread-{n}" for n, p in spread.items() if p[1] == i)

    producer = KafkaProducer(bootstrap_servers=brokers[1].bootstrap, acks=1)
    try:
        for n in range(60):
            producer.send("spread", b"v%d" % n, partition=n % 6)
        producer.flush(20)
    finally:
        producer.close()
    # a consumer group: its coordinator is the leader of its __consumer_offsets partition
    consumer = KafkaConsumer(group_id="g", bootstrap_servers=brokers[2].bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False)
    values: list[bytes] = []
    try:
        consumer.subscribe(["spread"])
        consumer.topics()  # metadata before the first join (kafka-python 3.0.12's lost rejoin otherwise)
        deadline = time.monotonic() + WAIT
        while len(values) < 60 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                values.extend(r.value for r in records)
        consumer.commit()
        committed = {n: consumer.committed(TopicPartition("spread", n)) for n in range(6)}
    finally:
        consumer.close()
    assert sorted(values) == sorted(b"v%d" % n for n in range(60))
    assert committed == dict.fromkeys(range(6), 10)
