"""controller.zk.client (kazoo bridged into the loop) and controller.zk.kafka_zk_client (Kafka's
KafkaZkClient operations) against a real ZooKeeper 3.8 server.

Connection drops and session expiry are made with tests.cluster.zk_proxy between one client and
the server; the other clients talk to the server directly. Every wait is on an event, bounded."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable

import pytest

from controller.zk import data as zd
from controller.zk.broker_registration import ZkBrokerRegistration
from controller.zk.client import (
    BadVersionError,
    CheckOp,
    CreateOp,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    SetDataOp,
    ZkState,
    ZooKeeperClient,
    ZooKeeperClientTimeoutError,
)
from controller.zk.data import (
    Broker,
    BrokerInfo,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
)
from controller.zk.dump import dump, render
from controller.zk.kafka_zk_client import ControllerMovedError, KafkaZkClient
from tests.broker_process import free_port
from tests.cluster.zk_proxy import ZkProxy
from tests.zookeeper import ZooKeeperServer

WAIT = 15.0  # seconds: the bound of every wait for an event


async def open_client(connect: str, session_timeout_ms: int = 6000, **kw) -> ZooKeeperClient:
    return await ZooKeeperClient(connect, session_timeout_ms=session_timeout_ms, connection_timeout_ms=10_000,
                                 request_timeout_ms=10_000, **kw).start(create_chroot=True)


@pytest.fixture
async def clients(zookeeper: ZooKeeperServer) -> AsyncIterator[Callable[..., object]]:
    """open(connect_string=None, **kw): a started client (default: the server directly), closed
    at teardown."""
    opened: list[ZooKeeperClient] = []

    async def open_(connect: str | None = None, **kw) -> ZooKeeperClient:
        c = await open_client(connect or zookeeper.connect_string(), **kw)
        opened.append(c)
        return c

    yield open_
    for c in opened:
        await c.close()


@pytest.fixture
async def proxy(zookeeper: ZooKeeperServer) -> AsyncIterator[ZkProxy]:
    p = await ZkProxy(zookeeper.port).start()
    yield p
    await p.close()


class Recorder:
    """A ZNodeChangeHandler + ZNodeChildChangeHandler + StateChangeHandler that records what it is
    told (and on which thread), with a wait for the n-th event."""

    def __init__(self, path: str = "", name: str = "rec") -> None:
        self.path, self.name = path, name
        self.events: list[str] = []
        self.threads: set[int] = set()
        self._changed = asyncio.Event()

    def _add(self, what: str) -> None:
        self.events.append(what)
        self.threads.add(threading.get_ident())
        self._changed.set()

    def handle_creation(self) -> None:
        self._add("created")

    def handle_deletion(self) -> None:
        self._add("deleted")

    def handle_data_change(self) -> None:
        self._add("changed")

    def handle_child_change(self) -> None:
        self._add("children")

    async def before_initializing_session(self) -> None:
        await asyncio.sleep(0)  # an awaitable handler: awaited before "after" starts
        self._add("before")

    def after_initializing_session(self) -> None:
        self._add("after")

    async def wait_for(self, n: int) -> list[str]:
        async def enough() -> None:
            while len(self.events) < n:
                self._changed.clear()
                await self._changed.wait()
        await asyncio.wait_for(enough(), WAIT)
        return self.events


# --- ZooKeeperClient ---------------------------------------------------------------------------


async def test_crud_with_null_data_versions_and_stat(clients):
    zk = await clients()
    assert zk.state is ZkState.CONNECTED and zk.session_id
    assert await zk.create("/a", b"one") == "/a"
    assert await zk.create("/a/null") == "/a/null"
    data, stat = await zk.get_data("/a")
    assert data == b"one" and stat.version == 0 and stat.ephemeral_owner == 0 and stat.num_children == 1
    assert (await zk.get_data("/a/null"))[0] is None  # null, not b""
    assert (await zk.set_data("/a", b"two", version=0)).version == 1
    assert await zk.get_children("/a") == ["null"]
    assert (await zk.exists("/a")).version == 1 and await zk.exists("/nope") is None
    with pytest.raises(NodeExistsError):
        await zk.create("/a")
    with pytest.raises(NoNodeError) as e:
        await zk.get_data("/nope")
    assert e.value.path == "/nope" and e.value.code == "NONODE"
    with pytest.raises(NotEmptyError):
        await zk.delete("/a")
    await zk.delete("/a/null")
    await zk.delete("/a", version=1)
    assert await zk.exists("/a") is None


async def test_compare_and_set_loses_with_bad_version(clients):
    zk = await clients()
    await zk.create("/cas", b"0")
    await zk.set_data("/cas", b"1", version=0)
    with pytest.raises(BadVersionError, match="BADVERSION for /cas") as e:
        await zk.set_data("/cas", b"stale", version=0)
    assert e.value.path == "/cas"
    with pytest.raises(BadVersionError):
        await zk.delete("/cas", version=0)
    assert (await zk.get_data("/cas"))[0] == b"1"


async def test_makepath_creates_parents_with_null_data(clients):
    zk = await clients()
    await zk.create("/p/q/r", b"leaf", makepath=True)
    assert (await zk.get_data("/p"))[0] is None
    assert (await zk.get_data("/p/q"))[0] is None
    assert (await zk.get_data("/p/q/r"))[0] == b"leaf"
    with pytest.raises(NoNodeError):
        await zk.create("/x/y", b"", makepath=False)


async def test_ephemeral_and_sequential_znodes(clients):
    zk, other = await clients(), await clients()
    await zk.create("/eph", b"", ephemeral=True)
    assert (await other.exists("/eph")).ephemeral_owner == zk.session_id
    seq1 = await zk.create("/seq/item_", b"", sequential=True, makepath=True)
    seq2 = await zk.create("/seq/item_", b"", sequential=True)
    assert (seq1, seq2) == ("/seq/item_0000000000", "/seq/item_0000000001")
    await zk.close()
    assert await other.exists("/eph") is None  # closed session: its ephemerals go at once
    assert await other.exists(seq1) is not None


async def test_chroot_is_created_and_hides_the_prefix(clients, zookeeper):
    rooted = await clients(zookeeper.connect_string("/kafka/prod"))
    root = await clients()
    await rooted.create("/brokers", b"x")
    assert await rooted.get_children("/") == ["brokers"]
    assert (await root.get_data("/kafka/prod/brokers"))[0] == b"x"
    assert (await root.get_data("/kafka"))[0] is None  # chroot parents: null data, as Kafka makes them


async def test_connect_times_out_without_a_server():
    client = ZooKeeperClient(f"127.0.0.1:{free_port()}", session_timeout_ms=2000, connection_timeout_ms=500)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(ZooKeeperClientTimeoutError, match="Timed out waiting for connection"):
        await client.start()
    assert loop.time() - started < 5


async def test_multi_is_atomic(clients):
    zk = await clients()
    await zk.create("/m", b"v0")
    failed = await zk.multi([CreateOp("/m/new", b"x"), CheckOp("/m", 5), SetDataOp("/m", b"v1")])
    assert not failed.ok and isinstance(failed.error, BadVersionError)
    assert isinstance(failed.results[0], RolledBackError)
    assert await zk.exists("/m/new") is None and (await zk.get_data("/m"))[0] == b"v0"
    ok = await zk.multi([CreateOp("/m/new", None), CheckOp("/m", 0), SetDataOp("/m", b"v1", 0)])
    assert ok.ok and ok.results[0] == "/m/new" and ok.results[1] is True and ok.results[2].version == 1
    assert (await zk.get_data("/m/new"))[0] is None


async def test_watches_reach_registered_handlers_on_the_loop(clients):
    zk, writer = await clients(), await clients()
    node, kids = Recorder("/w"), Recorder("/w")
    zk.register_znode_change_handler(node)
    zk.register_znode_child_change_handler(kids)
    assert await zk.exists("/w", watch=True) is None
    await writer.create("/w", b"0")
    assert await node.wait_for(1) == ["created"]
    await zk.get_data("/w", watch=True)
    await zk.get_children("/w", watch=True)
    await writer.set_data("/w", b"1")
    await writer.create("/w/c", b"")
    await node.wait_for(2)
    await kids.wait_for(1)
    # one-shot: not re-armed, so the next change is not heard
    await writer.set_data("/w", b"2")
    await zk.get_data("/w", watch=True)
    await writer.delete("/w/c")
    await writer.delete("/w")
    assert await node.wait_for(3) == ["created", "changed", "deleted"]
    assert kids.events == ["children"]
    assert node.threads == kids.threads == {threading.get_ident()}  # the loop's thread


async def test_watches_survive_a_dropped_connection(clients, proxy):
    """kazoo drops watches with the connection; ours are re-armed on reconnect and a change made
    while the client was cut off is still reported, once."""
    zk = await clients(proxy.connect_string(), session_timeout_ms=8000)
    writer = await clients()
    states: list[ZkState] = []
    zk.add_state_listener(states.append)
    suspended = state_event(zk, ZkState.SUSPENDED)
    node, kids = Recorder("/d"), Recorder("/d")
    zk.register_znode_change_handler(node)
    zk.register_znode_child_change_handler(kids)
    session = zk.session_id
    await writer.create("/d", b"0")
    await writer.create("/quiet", b"0")
    quiet = Recorder("/quiet")
    zk.register_znode_change_handler(quiet)
    await zk.get_data("/d", watch=True)
    await zk.get_children("/d", watch=True)
    await zk.get_data("/quiet", watch=True)
    proxy.block()
    await asyncio.wait_for(suspended.wait(), WAIT)
    await writer.set_data("/d", b"changed while cut off")
    await writer.create("/d/child", b"")
    proxy.unblock()
    await zk.wait_until_connected(WAIT)
    assert await node.wait_for(1) == ["changed"]
    assert await kids.wait_for(1) == ["children"]
    assert zk.session_id == session and states[:2] == [ZkState.SUSPENDED, ZkState.CONNECTED]
    # the re-armed watch is a live one
    await writer.delete("/d/child")
    await writer.delete("/d")
    assert await node.wait_for(2) == ["changed", "deleted"]
    assert quiet.events == []  # unchanged znode: nothing reported


async def test_session_expiry_runs_state_change_handlers_then_a_new_session(clients, proxy):
    zk = await clients(proxy.connect_string(), session_timeout_ms=1000)
    watcher = await clients()
    handler = Recorder(name="controller-state-change-handler")
    zk.register_state_change_handler(handler)
    states: list[ZkState] = []
    zk.add_state_listener(states.append)
    old_session = zk.session_id
    await zk.create("/mine", b"", ephemeral=True)
    proxy.block()
    # the server expires the silent session: its ephemeral goes
    gone = Recorder("/mine")
    watcher.register_znode_change_handler(gone)
    if await watcher.exists("/mine", watch=True) is not None:
        await gone.wait_for(1)
    proxy.unblock()
    assert await handler.wait_for(2) == ["before", "after"]
    assert zk.state is ZkState.CONNECTED and zk.session_id not in (None, old_session)
    assert ZkState.LOST in states and states[-1] is ZkState.CONNECTED
    await zk.create("/mine", b"", ephemeral=True)  # the new session works


# --- KafkaZkClient -----------------------------------------------------------------------------


@pytest.fixture
async def kafka_zk(clients, zookeeper) -> Callable[..., object]:
    """open(): a KafkaZkClient on its own session, chrooted at /odradek like a Kafka cluster's
    zookeeper.connect=host:port/odradek."""

    async def open_(**kw) -> KafkaZkClient:
        return KafkaZkClient(await clients(zookeeper.connect_string("/odradek"), **kw))

    return open_


def broker_info(broker_id: int, port: int = 9092, rack: str | None = None) -> BrokerInfo:
    return BrokerInfo(Broker(broker_id, (EndPoint("127.0.0.1", port, "PLAINTEXT", "PLAINTEXT"),), rack))


async def test_top_level_paths_are_kafkas_with_null_data(kafka_zk, clients, zookeeper):
    kzk = await kafka_zk()
    await kzk.create_top_level_paths()
    await kzk.create_top_level_paths()  # idempotent, like every broker's startup
    for path in zd.PERSISTENT_ZK_PATHS:
        data, stat = await kzk.get_data_and_stat(path)
        assert stat is not None and data is None, path
    root = await clients()
    assert sorted(await root.get_children("/odradek")) == [
        "admin", "brokers", "config", "consumers", "isr_change_notification",
        "latest_producer_id_block", "log_dir_event_notification"]


async def test_register_broker_returns_the_czxid_as_broker_epoch(kafka_zk):
    a, b = await kafka_zk(), await kafka_zk()
    await a.create_top_level_paths()
    epoch1 = await a.register_broker(broker_info(1, 9092, "r1"), timestamp_ms=1234)
    epoch2 = await b.register_broker(broker_info(2, 9093))
    data, stat = await a.get_data_and_stat("/brokers/ids/1")
    assert stat.czxid == epoch1 and stat.ephemeral_owner == a.zk.session_id
    assert stat.version == 1  # Kafka creates with null data, then sets it
    assert json.loads(data) == {"features": {}, "listener_security_protocol_map": {"PLAINTEXT": "PLAINTEXT"},
                                "endpoints": ["PLAINTEXT://127.0.0.1:9092"], "rack": "r1", "jmx_port": -1,
                                "port": 9092, "host": "127.0.0.1", "version": 5, "timestamp": "1234"}
    brokers = await b.get_all_broker_and_epochs_in_cluster()
    assert {i: be.epoch for i, be in brokers.items()} == {1: epoch1, 2: epoch2}
    assert brokers[1].broker == broker_info(1, 9092, "r1").broker
    assert epoch2 > epoch1
    # re-registering in the same session is fine and keeps the epoch; another session is refused
    assert await a.register_broker(broker_info(1, 9092, "r1")) == epoch1
    with pytest.raises(NodeExistsError, match="does not match current session"):
        await b.register_broker(broker_info(1))
    await a.zk.close()
    assert await b.get_sorted_broker_list() == [2]
    assert await b.register_broker(broker_info(1)) > epoch2  # a new registration, a new epoch


async def test_controller_election_one_winner_then_failover(kafka_zk):
    contenders = [await kafka_zk() for _ in range(3)]
    results = await asyncio.gather(
        *(k.register_controller_and_increment_controller_epoch(i + 1, timestamp_ms=77)
          for i, k in enumerate(contenders)), return_exceptions=True)
    winners = [i for i, r in enumerate(results) if not isinstance(r, BaseException)]
    assert len(winners) == 1, results
    assert all(isinstance(r, ControllerMovedError) for i, r in enumerate(results) if i not in winners)
    w = winners[0]
    assert results[w] == (1, 1)  # /controller_epoch created at 0 (version 0), then set to 1
    observer = contenders[(w + 1) % 3]
    assert await observer.get_controller_id() == w + 1
    reg = await observer.get_controller_registration()
    assert reg == zd.ZkControllerRegistration(w + 1, -1, 0)
    data, _ = await observer.get_data_and_stat("/controller")
    assert json.loads(data) == {"version": 2, "brokerid": w + 1, "timestamp": "77", "kraftControllerEpoch": -1}
    assert (await observer.get_data_and_stat("/controller_epoch"))[0] == b"1"
    # the controller's session ends: the next one bumps the epoch
    await contenders[w].zk.close()
    assert await observer.get_controller_id() is None
    assert await observer.register_controller_and_increment_controller_epoch(9) == (2, 2)


async def test_fenced_writes_of_a_deposed_controller_are_refused(kafka_zk):
    """Zombie fencing: after a new election, the old controller's writes carrying its epoch
    version fail with ControllerMovedError and change nothing."""
    old, new = await kafka_zk(), await kafka_zk()
    await old.create_top_level_paths()
    _, old_version = await old.register_controller_and_increment_controller_epoch(1)
    await old.create_topic_assignment("t", None, {0: [1, 2]})
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2)), 1)
    assert await old.create_topic_partition_states({("t", 0): state}, old_version) == {("t", 0): None}
    await old.delete_controller(old_version)  # as if its session had expired
    epoch, new_version = await new.register_controller_and_increment_controller_epoch(2)
    assert (epoch, new_version) == (2, 2)
    current = (await new.get_topic_partition_states([("t", 0)]))[("t", 0)]
    with pytest.raises(ControllerMovedError, match="Expected zkVersion = 1"):
        await old.update_leader_and_isr({("t", 0): current.leader_and_isr.new_leader_and_isr(2, [2])}, 1, old_version)
    with pytest.raises(ControllerMovedError):
        await old.set_topic_assignment("t", None, {0: ReplicaAssignment((3,))}, old_version)
    with pytest.raises(ControllerMovedError):
        await old.create_topic_partition_states({("t", 1): state}, old_version)
    assert (await new.get_topic_partition_states([("t", 0)]))[("t", 0)] == current
    assert (await new.get_topic_assignment("t")).assignment == {0: ReplicaAssignment((1, 2))}
    assert not await new.path_exists("/brokers/topics/t/partitions/1")
    # the new controller's writes pass
    result = await new.update_leader_and_isr({("t", 0): current.leader_and_isr.new_leader_and_isr(2, [2])}, 2, new_version)
    assert result.finished_partitions == {("t", 0): LeaderAndIsr(2, 1, (2,), partition_epoch=1)}


async def test_partition_state_compare_and_set(kafka_zk):
    """update_leader_and_isr writes only over the partition epoch it read: a concurrent writer
    (a leader's AlterPartition already applied) sends the partition to `partitions_to_retry`."""
    kzk = await kafka_zk()
    await kzk.create_topic_assignment("t", None, {0: [1, 2], 1: [2, 1]})
    states = {("t", p): LeaderIsrAndControllerEpoch(LeaderAndIsr(r, 0, (1, 2)), 1) for p, r in ((0, 1), (1, 2))}
    assert await kzk.create_topic_partition_states(states) == {("t", 0): None, ("t", 1): None}
    again = await kzk.create_topic_partition_states(states)
    assert isinstance(again[("t", 0)], NodeExistsError)
    read = await kzk.get_topic_partition_states([("t", 0), ("t", 1), ("t", 9)])
    assert set(read) == {("t", 0), ("t", 1)} and read[("t", 0)] == states[("t", 0)]
    first = await kzk.update_leader_and_isr({("t", 0): read[("t", 0)].leader_and_isr.new_leader_and_isr(1, [1])}, 1)
    assert first.finished_partitions[("t", 0)].partition_epoch == 1 and not first.partitions_to_retry
    stale = {tp: s.leader_and_isr.new_leader_and_isr(2, [2]) for tp, s in read.items()}  # epoch 0 for both
    second = await kzk.update_leader_and_isr(stale, 1)
    assert second.partitions_to_retry == [("t", 0)]
    assert second.finished_partitions == {("t", 1): LeaderAndIsr(2, 1, (2,), partition_epoch=1)}
    final = await kzk.get_topic_partition_states([("t", 0)])
    assert final[("t", 0)].leader_and_isr == LeaderAndIsr(1, 1, (1,), partition_epoch=1)
    data, _ = await kzk.get_data_and_stat("/brokers/topics/t/partitions/0/state")
    assert json.loads(data) == {"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 1, "isr": [1]}
    assert (await kzk.get_data_and_stat("/brokers/topics/t/partitions"))[0] is None


async def test_topic_assignment_and_deletion_request(kafka_zk):
    kzk = await kafka_zk()
    topic_id = zd.uuid_from_string("u0xf0HKiTg21YdWNjgYivA")
    await kzk.create_topic_assignment("t", topic_id, {0: [1, 2], 1: [2, 3]})
    with pytest.raises(NodeExistsError):
        await kzk.create_topic_assignment("t", topic_id, {0: [1]})
    got = await kzk.get_topic_assignment("t")
    assert got.topic_id == topic_id and got.assignment == {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 3))}
    data, _ = await kzk.get_data_and_stat("/brokers/topics/t")
    assert json.loads(data) == {"partitions": {"0": [1, 2], "1": [2, 3]}, "topic_id": "u0xf0HKiTg21YdWNjgYivA",
                                "adding_replicas": {}, "removing_replicas": {}, "version": 3}
    await kzk.set_topic_assignment("t", topic_id, {0: ReplicaAssignment((1, 2, 3), adding_replicas=(3,)),
                                                   1: ReplicaAssignment((2, 3))})
    assert (await kzk.get_topic_assignment("t")).assignment[0].adding_replicas == (3,)
    assert await kzk.get_all_topics_in_cluster() == {"t"}
    assert await kzk.get_topic_assignment("missing") is None
    await kzk.create_delete_topic_path("t")
    assert await kzk.get_topic_deletions() == ["t"] and await kzk.is_topic_marked_for_deletion("t")
    assert (await kzk.get_data_and_stat("/admin/delete_topics/t"))[0] is None
    await kzk.delete_topic_znode("t", zd.MATCH_ANY_VERSION)
    await kzk.delete_topic_deletions(["t"], zd.MATCH_ANY_VERSION)
    assert await kzk.get_all_topics_in_cluster() == set() and await kzk.get_topic_deletions() == []


async def test_topic_config_and_change_notification(kafka_zk):
    kzk = await kafka_zk()
    await kzk.create_top_level_paths()
    # Kafka 3.9 brokers write entity configs only while a (ZooKeeper) controller exists
    with pytest.raises(ControllerMovedError, match="when there is no controller"):
        await kzk.change_entity_config("topics", "t", {"retention.ms": "1000"})
    await kzk.register_controller_and_increment_controller_epoch(1)
    path = await kzk.change_entity_config("topics", "t", {"cleanup.policy": "compact", "retention.ms": "1000"})
    assert path == "/config/changes/config_change_0000000000"
    assert json.loads((await kzk.get_data_and_stat(path))[0]) == {"version": 2, "entity_path": "topics/t"}
    assert json.loads((await kzk.get_data_and_stat("/config/topics/t"))[0]) == {
        "version": 1, "config": {"cleanup.policy": "compact", "retention.ms": "1000"}}
    await kzk.change_entity_config("topics", "t", {"retention.ms": "5"})
    assert await kzk.get_entity_configs("topics", "t") == {"retention.ms": "5"}
    assert await kzk.get_entity_configs("topics", "none") == {}
    assert sorted(await kzk.get_children("/config/changes")) == ["config_change_0000000000", "config_change_0000000001"]
    # the tool path (kafka-configs --zookeeper) skips the controller check
    await kzk.set_or_create_entity_configs("users", zd.sanitize("User:alice"), {"producer_byte_rate": "1024"},
                                           controller_check=False)
    assert await kzk.get_all_entities_with_config("users") == ["User%3Aalice"]


async def test_cluster_id_first_creator_wins(kafka_zk):
    a, b = await kafka_zk(), await kafka_zk()
    assert await a.get_cluster_id() is None
    assert await a.create_or_get_cluster_id("lP9wR2hPT0-azxxhPGkl7A") == "lP9wR2hPT0-azxxhPGkl7A"
    assert await b.create_or_get_cluster_id("other") == "lP9wR2hPT0-azxxhPGkl7A"
    assert json.loads((await b.get_data_and_stat("/cluster/id"))[0]) == {"version": "1", "id": "lP9wR2hPT0-azxxhPGkl7A"}


async def test_producer_id_blocks_are_disjoint_under_contention(kafka_zk):
    allocators = [await kafka_zk() for _ in range(3)]
    await allocators[0].create_top_level_paths()
    first = await allocators[0].get_new_producer_id_block(1)
    assert (first.first_producer_id, first.last_producer_id) == (0, 999)
    blocks = await asyncio.gather(*(k.get_new_producer_id_block(i + 1) for i, k in enumerate(allocators) for _ in range(4)))
    starts = sorted(b.first_producer_id for b in blocks)
    assert starts == [1000 * i for i in range(1, 13)]  # 12 blocks, none shared, none skipped
    data, stat = await allocators[0].get_data_and_stat("/latest_producer_id_block")
    doc = json.loads(data)
    assert doc["version"] == 1 and doc["block_start"] == "12000" and doc["block_end"] == "12999"
    assert stat.version == 13


async def test_dump_walks_kafkas_tree(kafka_zk):
    kzk = await kafka_zk()
    await kzk.create_top_level_paths()
    await kzk.create_or_get_cluster_id("abc")
    entries = await dump(kzk.zk)
    paths = [p for p, _ in entries]
    assert paths[0] == "/" and "/zookeeper" not in paths
    assert dict(entries)["/cluster/id"] == b'{"version":"1","id":"abc"}'
    assert paths == sorted(paths)
    assert "/brokers/ids\tnull" in render(entries).splitlines()


def state_event(zk: ZooKeeperClient, state: ZkState) -> asyncio.Event:
    """An event set when the client's session state next becomes `state`."""
    reached = asyncio.Event()
    zk.add_state_listener(lambda s: reached.set() if s is state else None)
    return reached


async def test_startup_registration_waits_for_a_stale_session_to_go(kafka_zk):
    """A broker restarted within its old session's timeout (kill -9, a container restart) finds
    its id registered by that session: it waits for the node to go instead of exiting, and
    still fails when the node stays (another live broker with the same id)."""
    old, new = await kafka_zk(), await kafka_zk()
    await old.create_top_level_paths()
    old_epoch = await old.register_broker(broker_info(1))
    registration = ZkBrokerRegistration(new, 1)
    registration.make_broker_info(broker_info(1).broker.endpoints, None)
    with pytest.raises(NodeExistsError, match="does not match current session"):
        await registration.register_at_startup(stale_wait_s=0.3)  # the old session stays
    waiting = asyncio.create_task(registration.register_at_startup(stale_wait_s=30))
    async def watching() -> None:  # the waiter found the node taken and watches it
        while "/brokers/ids/1" not in new.zk._znode_handlers:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(watching(), 10)
    assert not waiting.done()
    await old.zk.close()  # its session ends: ZooKeeper deletes the ephemeral node
    epoch = await asyncio.wait_for(waiting, 10)
    assert epoch > old_epoch and registration.broker_epoch == epoch
    _, stat = await new.get_data_and_stat("/brokers/ids/1")
    assert stat.ephemeral_owner == new.zk.session_id
