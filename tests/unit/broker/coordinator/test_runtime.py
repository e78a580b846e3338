"""CoordinatorRuntime over a real (socket-less) broker stack: logs in a temp dir, the embedded
controller, the ReplicaManager and its Partitions. The runtime runs with elections (ZooKeeper
mode's ownership) over a topic of its own, with a shard that records what it was given."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from broker.config import KafkaConfig
from broker.coordinator import CoordinatorRuntime, InternalTopic
from broker.coordinator.loader import KeyValue, read_key_values
from broker.coordinator.runtime import coordinator_error
from broker.server import BrokerServer
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch
from storage.producer_state import AppendOrigin
from tests.loop_waits import until

TOPIC = "__runtime_test"


class RecordingShard:
    """A shard that keeps what it was told, in order."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.replayed: list[KeyValue] = []
        self.events: list[str] = []

    def replay(self, key: bytes, value: bytes | None) -> None:
        self.replayed.append((key, value))

    def on_loaded(self) -> None:
        self.events.append("loaded")

    def on_unloaded(self) -> None:
        self.events.append("unloaded")


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[BrokerServer]:
    s = BrokerServer(KafkaConfig({"log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:9092"}))
    await s.start_components()
    s.controller.create_topic(TOPIC, 2, 1)
    await s.controller.committed()  # its logs are created in an executor
    try:
        yield s
    finally:
        await s.shutdown()


def runtime_of(server: BrokerServer, shards: list[RecordingShard],
               loader: Callable[[Any], list[KeyValue]] = read_key_values) -> CoordinatorRuntime[RecordingShard]:
    def build(partition: int) -> RecordingShard:
        shards.append(RecordingShard(partition))
        return shards[-1]

    return CoordinatorRuntime(
        InternalTopic(TOPIC, 2, 1), build, replica_manager=server.replica_manager,
        metadata_cache=server.metadata_cache, controller=server.controller, spawn=server._spawn,
        elections=True, what="test state", loader=loader)


class GatedLoader:
    """read_key_values that, on its first call, waits in its executor thread until released."""

    def __init__(self) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def __call__(self, lg: Any) -> list[KeyValue]:
        self.calls += 1
        if self.calls == 1:
            self.started.set()
            assert self.release.wait(10)
        return read_key_values(lg)


async def elected(server: BrokerServer, shards: list[RecordingShard], partition: int) -> CoordinatorRuntime[Any]:
    """A runtime that has loaded `partition` (elected at epoch 0)."""
    rt = runtime_of(server, shards)
    task = rt.on_election(partition, 0)
    assert task is not None
    await task
    return rt


def key_of(runtime: CoordinatorRuntime[Any], partition: int) -> str:
    return next(k for k in (f"k{i}" for i in range(1000)) if runtime.partition_for(k) == partition)


async def test_election_loads_by_replay_and_resignation_unloads(server: BrokerServer) -> None:
    shards: list[RecordingShard] = []
    rt = runtime_of(server, shards)
    entries = [(b"a", b"1"), (b"b", None), (b"a", b"2")]
    assert await rt.append(0, entries) == ErrorCode.NONE  # no context yet: written as a coordinator's
    key = key_of(rt, 0)
    assert rt.error_for(key) == ErrorCode.NOT_COORDINATOR  # led, but not elected here

    task = rt.on_election(0, 3)
    assert task is not None and rt.error_for(key) == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    assert await task == 3
    [shard] = shards
    assert (shard.partition, shard.replayed, shard.events) == (0, entries, ["loaded"])
    assert rt.error_for(key) is None and rt.active_partitions == [0] and rt.shard(0) is shard

    assert rt.on_election(0, 4) is None  # a new epoch of a partition loaded here: nothing to load
    rt.on_resignation(0, 4)  # not newer than the epoch it has now: ignored
    assert rt.error_for(key) is None
    rt.on_resignation(0, 5)
    assert shard.events == ["loaded", "unloaded"] and rt.error_for(key) == ErrorCode.NOT_COORDINATOR
    assert rt.active_partitions == []


async def test_a_load_superseded_by_a_resignation_is_dropped(server: BrokerServer) -> None:
    shards: list[RecordingShard] = []
    loader = GatedLoader()
    rt = runtime_of(server, shards, loader)
    await rt.append(1, [(b"x", b"1")])
    task = rt.on_election(1, 0)
    assert task is not None
    await until(loader.started.is_set, "the load to read")
    rt.on_resignation(1, None)  # the partition left this broker while its log was read
    loader.release.set()
    assert await task == 0
    assert shards == [] and rt.active_partitions == []  # nothing replayed, nothing owned
    assert rt.error_for(key_of(rt, 1)) == ErrorCode.NOT_COORDINATOR


async def test_a_load_superseded_by_a_re_election_is_dropped_and_the_new_one_loads(server: BrokerServer) -> None:
    shards: list[RecordingShard] = []
    loader = GatedLoader()
    rt = runtime_of(server, shards, loader)
    await rt.append(1, [(b"x", b"1")])
    first = rt.on_election(1, 0)
    await until(loader.started.is_set, "the first load to read")
    rt.on_resignation(1, 1)
    second = rt.on_election(1, 2)
    assert first is not None and second is not None
    assert await second == 1  # the new election's load, not blocked
    loader.release.set()
    assert await first == 0  # the old one finishes reading later and is dropped
    [shard] = shards
    assert shard.replayed == [(b"x", b"1")] and shard.events == ["loaded"]
    assert rt.error_for(key_of(rt, 1)) is None


async def test_an_election_older_than_the_current_one_is_ignored(server: BrokerServer) -> None:
    shards: list[RecordingShard] = []
    rt = runtime_of(server, shards)
    task = rt.on_election(0, 5)
    assert task is not None and await task == 0
    assert rt.on_election(0, 3) is None
    rt.on_resignation(0, 4)
    assert [s.events for s in shards] == [["loaded"]] and rt.active_partitions == [0]


async def test_an_append_to_a_partition_that_lost_leadership_is_not_coordinator(server: BrokerServer) -> None:
    shards: list[RecordingShard] = []
    rt = await elected(server, shards, 0)
    p = server.replica_manager.partitions[(TOPIC, 0)]
    follower = dataclasses.replace(p.state, leader=p.broker_id + 1, leader_epoch=p.leader_epoch + 1,
                                   partition_epoch=p.state.partition_epoch + 1)
    assert await p.make_follower(follower) is not None
    end = p.log.log_end_offset
    assert await rt.append(0, [(b"k", b"v")]) == ErrorCode.NOT_COORDINATOR  # the log said NOT_LEADER_OR_FOLLOWER
    assert p.log.log_end_offset == end
    rt.on_leadership_change([], [(TOPIC, 0)])  # at the partition's new epoch: unloaded
    assert shards[0].events == ["loaded", "unloaded"]


async def test_an_append_whose_partition_resigned_while_it_waited_is_not_coordinator(server: BrokerServer) -> None:
    shards: list[RecordingShard] = []
    rt = await elected(server, shards, 0)
    p = server.replica_manager.partitions[(TOPIC, 0)]
    me, other = p.broker_id, p.broker_id + 1
    wider = dataclasses.replace(p.state, replicas=[me, other], isr=[me, other],
                                partition_epoch=p.state.partition_epoch + 1)
    await p.make_leader(wider, int(time.time() * 1000))
    end = p.log.log_end_offset
    write = asyncio.ensure_future(rt.append(0, [(b"k", b"v")]))  # acks=all waits for `other`
    await until(lambda: p.log.log_end_offset > end, "the write to reach the log")
    assert not write.done()
    rt.on_resignation(0, None)
    again = rt.on_election(0, 0)
    assert again is not None
    await again
    # the ISR shrinks back to this broker: the write is committed, but its context is gone
    narrow = dataclasses.replace(wider, replicas=[me], isr=[me], partition_epoch=wider.partition_epoch + 1)
    await p.make_leader(narrow, int(time.time() * 1000))
    server.replica_manager.produce_purgatory.check_and_complete((TOPIC, 0))
    assert await asyncio.wait_for(write, 5) == ErrorCode.NOT_COORDINATOR
    assert shards[1].replayed == [(b"k", b"v")]  # the new load has it: the caller must not apply it twice


async def test_an_append_to_a_loading_partition_is_not_coordinator(server: BrokerServer) -> None:
    loader = GatedLoader()
    rt = runtime_of(server, [], loader)
    task = rt.on_election(0, 0)
    assert task is not None
    try:
        await until(loader.started.is_set, "the load to read")
        assert await rt.append(0, [(b"k", b"v")]) == ErrorCode.NOT_COORDINATOR
    finally:
        loader.release.set()
        await task


def test_log_errors_map_to_the_coordinator_errors_kafka_answers() -> None:
    assert coordinator_error(ErrorCode.NONE) == ErrorCode.NONE
    for e in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
              ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        assert coordinator_error(e) == ErrorCode.COORDINATOR_NOT_AVAILABLE
    for e in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        assert coordinator_error(e) == ErrorCode.NOT_COORDINATOR
    for e in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE,
              ErrorCode.CORRUPT_MESSAGE):
        assert coordinator_error(e) == ErrorCode.UNKNOWN_SERVER_ERROR


async def test_internal_topics_take_coordinator_appends_only(server: BrokerServer) -> None:
    """A client's append to `__consumer_offsets` is INVALID_TOPIC_EXCEPTION (Kafka's
    appendToLocalLog, no message); a coordinator's goes through, with the COORDINATOR origin,
    which lets it write what only a coordinator may: a control batch (a transaction marker)."""
    server.controller.create_topic("__consumer_offsets", 1, 1)
    await server.controller.committed()
    rm = server.replica_manager
    tp = ("__consumer_offsets", 0)
    plain = build_batch([Record(offset_delta=0, key=b"k", value=b"v")])
    [client] = (await rm.append_records([(tp, plain)], -1)).values()
    assert (client.error, client.message, client.base_offset, client.log_start_offset) == (
        ErrorCode.INVALID_TOPIC_EXCEPTION, None, -1, -1)
    marker = build_batch([Record(offset_delta=0, key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x00")],
                         producer_id=7, producer_epoch=0, is_transactional=True, is_control=True)
    [as_client] = (await rm.append_records([(tp, marker)], -1, internal_topics_allowed=True)).values()
    assert as_client.error == ErrorCode.INVALID_RECORD  # Kafka: clients may not write control batches
    [as_coordinator] = (await rm.append_records([(tp, marker)], -1, internal_topics_allowed=True,
                                                origin=AppendOrigin.COORDINATOR)).values()
    assert (as_coordinator.error, as_coordinator.base_offset) == (ErrorCode.NONE, 0)


async def test_timers_run_for_active_partitions_and_die_with_their_context(server: BrokerServer) -> None:
    """Kafka's CoordinatorTimer: a key's timer runs once, a key scheduled again replaces its
    timer, `cancel` drops it, and a resignation cancels the partition's timers (a re-election
    does not bring them back). Each check waits for a later timer that must run after it."""
    shards: list[RecordingShard] = []
    rt = await elected(server, shards, 0)
    rt.start()
    fired: list[str] = []
    done = asyncio.Event()

    def fire(name: str, last: bool = False) -> Callable[[], None]:
        def run() -> None:
            fired.append(name)
            if last:
                done.set()
        return run

    async def until_fired(partition: int, delay_ms: int) -> None:
        done.clear()
        assert rt.schedule(partition, "probe", delay_ms, fire("probe", last=True))
        await asyncio.wait_for(done.wait(), 5)

    try:
        assert not rt.schedule(1, "k", 10, fire("never"))  # partition 1 is not this runtime's
        assert rt.schedule(0, "k", 10, fire("replaced"))
        assert rt.schedule(0, "k", 20, fire("k"))
        assert rt.schedule(0, "cancelled", 10, fire("cancelled"))
        rt.cancel(0, "cancelled")
        assert rt._timer.size == 1  # "k" only: the replaced and the cancelled timers left the wheel
        await until_fired(0, 60)
        assert fired == ["k", "probe"]

        assert rt.schedule(0, "resigned", 20, fire("resigned"))
        assert rt._timer.size == 1
        rt.on_resignation(0, 1)
        assert rt._timer.size == 0  # cancelled, not left to expire
        again = rt.on_election(0, 2)
        assert again is not None
        await again
        await until_fired(0, 60)
        assert fired == ["k", "probe", "probe"]
    finally:
        await rt.shutdown()
