"""The group coordinator's answers for failed writes to `__consumer_offsets`, as Kafka 3.9's
ZooKeeper-mode GroupMetadataManager gives them (broker/group/write_errors.py): the mapping
itself, and the coordinator using it on a real (socket-less) broker stack: a too-large offset
commit refused by the log is INVALID_COMMIT_OFFSET_SIZE, and a write the log answers
REQUEST_TIMED_OUT is REBALANCE_IN_PROGRESS for SyncGroup's assignment but REQUEST_TIMED_OUT for
an offset commit (the shared runtime's mapping would answer UNKNOWN_SERVER_ERROR and
COORDINATOR_NOT_AVAILABLE)."""

from __future__ import annotations

from typing import Any

from broker.group.metadata import OffsetAndMetadata
from broker.group.write_errors import offset_commit_error, store_group_error
from broker.replica_manager import ProduceResult
from broker.server import BrokerServer
from protocol.errors import ErrorCode as E
from tests.unit.broker.group.test_coordinator import gc_of, join, server

__all__ = ["server"]  # the fixture


def test_store_group_errors() -> None:
    assert store_group_error(E.NONE, E.NONE) == E.NONE
    assert store_group_error(E.NOT_COORDINATOR, E.NONE) == E.NOT_COORDINATOR  # resigned meanwhile
    for log_error, answer in {
        E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
        E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
        E.REQUEST_TIMED_OUT: E.REBALANCE_IN_PROGRESS,
        E.MESSAGE_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
        E.RECORD_LIST_TOO_LARGE: E.UNKNOWN_SERVER_ERROR,
        E.INVALID_FETCH_SIZE: E.UNKNOWN_SERVER_ERROR,
        E.CORRUPT_MESSAGE: E.CORRUPT_MESSAGE,  # anything else as it is
    }.items():
        assert store_group_error(E.UNKNOWN_SERVER_ERROR, log_error) == answer, log_error


def test_offset_commit_errors() -> None:
    assert offset_commit_error(E.NONE, E.NONE) == E.NONE
    assert offset_commit_error(E.NOT_COORDINATOR, E.NONE) == E.NOT_COORDINATOR
    for log_error, answer in {
        E.NETWORK_EXCEPTION: E.COORDINATOR_LOAD_IN_PROGRESS,
        E.UNKNOWN_TOPIC_OR_PARTITION: E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_ENOUGH_REPLICAS: E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_LEADER_OR_FOLLOWER: E.NOT_COORDINATOR,
        E.KAFKA_STORAGE_ERROR: E.NOT_COORDINATOR,
        E.MESSAGE_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
        E.RECORD_LIST_TOO_LARGE: E.INVALID_COMMIT_OFFSET_SIZE,
        E.INVALID_FETCH_SIZE: E.INVALID_COMMIT_OFFSET_SIZE,
        E.REQUEST_TIMED_OUT: E.REQUEST_TIMED_OUT,
        E.INVALID_PRODUCER_EPOCH: E.INVALID_PRODUCER_EPOCH,
    }.items():
        assert offset_commit_error(E.UNKNOWN_SERVER_ERROR, log_error) == answer, log_error


async def test_an_offset_commit_the_log_refuses_as_too_large(server: BrokerServer) -> None:
    gc = gc_of(server)
    server.controller.create_topic("t", 40, 1)
    # 40 offsets with 32,000 bytes of metadata each: one batch above the log's max.message.bytes
    big = {("t", p): OffsetAndMetadata(1, -1, "m" * 32_000, 1) for p in range(40)}
    assert await gc.handle_commit_offsets("g-big", "", -1, big, max_metadata_size=40_000) == dict.fromkeys(
        big, E.INVALID_COMMIT_OFFSET_SIZE)
    assert gc.handle_fetch_offsets("g-big", [("t", 0)]) == (0, {("t", 0): None})


async def test_timed_out_group_writes(server: BrokerServer, monkeypatch: Any) -> None:
    """The log's REQUEST_TIMED_OUT (acks=all not met within offsets.commit.timeout.ms, 5000 ms)
    stands for a write whose replicas did not answer; here the log's answer is given directly."""
    gc = gc_of(server)
    assert gc.runtime._write_timeout_ms == 5000  # offsets.commit.timeout.ms's default bounds the writes
    server.controller.create_topic("t", 1, 1)
    a_id = (await join(gc, "g")).member_id
    a = await join(gc, "g", a_id)

    async def timed_out(tp: tuple[str, int], batch: bytes, *guard: object) -> ProduceResult:
        return ProduceResult(error=E.REQUEST_TIMED_OUT)

    monkeypatch.setattr(gc.runtime, "_append_to_log", timed_out)
    assert (await gc.handle_sync_group("g", a.generation_id, a_id, None, None, {a_id: b"x"})).error == (
        E.REBALANCE_IN_PROGRESS)
    assert await gc.handle_commit_offsets("simple", "", -1, {("t", 0): OffsetAndMetadata(1)}) == {
        ("t", 0): E.REQUEST_TIMED_OUT}


async def test_clean_up_writes_answer_none_whatever_the_log_says(server: BrokerServer, monkeypatch: Any) -> None:
    """DeleteGroups and OffsetDelete drop the group / offsets from the cache and write their
    tombstones as Kafka's cleanupGroupMetadata does: acks=0, a failure only logged, NONE
    answered (before: the write's error, e.g. COORDINATOR_NOT_AVAILABLE)."""
    gc = gc_of(server)
    server.controller.create_topic("t", 2, 1)
    for group in ("gone", "trimmed"):
        om = OffsetAndMetadata(1)
        assert await gc.handle_commit_offsets(group, "", -1, {("t", 0): om, ("t", 1): om}) == dict.fromkeys(
            [("t", 0), ("t", 1)], 0)
    acks: list[int] = []

    async def refused(tp: tuple[str, int], batch: bytes, guard: object = None, required_acks: int = -1) -> ProduceResult:
        acks.append(required_acks)
        return ProduceResult(error=E.NOT_ENOUGH_REPLICAS)

    monkeypatch.setattr(gc.runtime, "_append_to_log", refused)
    assert await gc.handle_delete_groups(["gone"]) == {"gone": E.NONE}
    assert "gone" not in gc.groups
    assert await gc.handle_delete_offsets("trimmed", [("t", 0)]) == (E.NONE, {("t", 0): E.NONE})
    assert gc.handle_fetch_offsets("trimmed", [("t", 0), ("t", 1)]) == (0, {("t", 0): None, ("t", 1): OffsetAndMetadata(1)})
    assert acks == [0, 0]
