"""The marker sender's answers, one by one (Kafka 3.9's TransactionMarkerRequestCompletionHandler):
a real TransactionMarkerChannelManager and NetworkClient, the coordinator's real state manager on
a socket-less broker (tests/unit/txn/test_state_manager.py's stack), and for the partitions'
leaders plain asyncio servers on loopback that answer WriteTxnMarkers as a script says -- an
error per partition, no answer (the request times out), or a closed connection -- which a real
broker will not do on demand. Each test checks what was sent where, and what reached
`__transaction_state`: CompleteCommit once every partition answered NONE, nothing on an
abandoning error."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.metadata_cache import MetadataCache
from broker.network_client import NetworkClient, NetworkClientConfig
from broker.server import BrokerServer
from broker.txn.coordinator import TransactionCoordinator
from broker.txn.decisions import TransactionResult
from broker.txn.markers import TransactionMarkerChannelManager
from broker.txn.metadata import TransactionState
from controller.image import BrokerInfo, MetadataImage, PartitionState, TopicState
from protocol.errors import ErrorCode
from protocol.framing import encode_response_frame, parse_request
from protocol.messages import ApiVersionsResponse, WriteTxnMarkersRequest, WriteTxnMarkersResponse
from protocol.messages import write_txn_markers_response as wr
from protocol.messages.api_versions_response import ApiVersion
from tests.unit.txn.test_state_manager import (
    TIMEOUT_MS,
    config,
    coordinator_of,
    records,
    started,
    state_of,
)

S = TransactionState
HOST = "127.0.0.1"
TOPIC = "a"
REQUEST_TIMEOUT_MS = 500
BACKOFF_MS = 10
DROP, SILENT = "drop", "silent"  # close the connection / never answer
Answer = dict[tuple[str, int], ErrorCode] | str


@dataclass
class MarkerLeader:
    """A partition leader that answers each WriteTxnMarkers with the next scripted answer (NONE
    for every partition once the script is used up) and records the partitions each one named."""

    script: list[Answer] = field(default_factory=list)
    seen: list[set[tuple[str, int]]] = field(default_factory=list)
    on_request: Callable[[int], None] | None = None
    server: asyncio.Server | None = None

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.sockets[0].getsockname()[1])

    async def start(self) -> MarkerLeader:
        self.server = await asyncio.get_running_loop().create_server(lambda: _Connection(self), HOST, 0)
        return self

    def answer(self, transport: asyncio.Transport, frame: bytes) -> None:
        header, body = parse_request(frame)
        key, version, corr = header.request_api_key, header.request_api_version, header.correlation_id
        if key == 18:
            transport.writelines(encode_response_frame(corr, 18, version, ApiVersionsResponse(api_keys=[
                ApiVersion(api_key=18, min_version=0, max_version=3),
                ApiVersion(api_key=27, min_version=0, max_version=1)])))
            return
        assert isinstance(body, WriteTxnMarkersRequest)
        partitions = {(t.name, p) for m in body.markers for t in m.topics for p in t.partition_indexes}
        self.seen.append(partitions)
        action: Answer = self.script.pop(0) if self.script else {}
        if self.on_request is not None:
            self.on_request(len(self.seen))
        if action == DROP:
            transport.close()
            return
        if action == SILENT:
            return
        assert isinstance(action, dict)
        response = WriteTxnMarkersResponse(markers=[wr.WritableTxnMarkerResult(
            producer_id=m.producer_id, topics=[wr.WritableTxnMarkerTopicResult(name=t.name, partitions=[
                wr.WritableTxnMarkerPartitionResult(partition_index=p, error_code=action.get((t.name, p), 0))
                for p in t.partition_indexes]) for t in m.topics]) for m in body.markers])
        transport.writelines(encode_response_frame(corr, key, version, response))

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()


class _Connection(asyncio.Protocol):
    def __init__(self, leader: MarkerLeader) -> None:
        self.leader = leader
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while len(self.buf) >= 4 and self.transport is not None and not self.transport.is_closing():
            size = int.from_bytes(self.buf[:4], "big")
            if len(self.buf) < 4 + size:
                return
            frame = bytes(self.buf[4: 4 + size])
            del self.buf[: 4 + size]
            self.leader.answer(self.transport, frame)


@dataclass
class Harness:
    server: BrokerServer
    coordinator: TransactionCoordinator
    sender: TransactionMarkerChannelManager
    leaders: dict[int, MarkerLeader]
    image: MetadataImage
    cache: MetadataCache

    def lead(self, partition: int, broker: int) -> None:
        """Move a partition's leadership in the sender's metadata."""
        topic = self.image.topics[TOPIC]
        parts = dict(topic.partitions)
        parts[partition] = dataclasses.replace(parts[partition], leader=broker, leader_epoch=parts[partition].leader_epoch + 1)
        self.image = dataclasses.replace(self.image, topics={TOPIC: dataclasses.replace(topic, partitions=parts)})
        self.cache.update(self.image)

    async def prepared_commit(self, tid: str = "t") -> int:
        """A transaction over a-0 and a-1 ended with COMMIT: PrepareCommit written, its markers
        handed to the sender. Returns its `__transaction_state` partition."""
        tc = self.coordinator
        init = await tc.handle_init_producer_id(tid, TIMEOUT_MS, None)
        assert init.error == ErrorCode.NONE
        pid, epoch = init.producer_id, init.producer_epoch
        assert await tc.handle_add_partitions_to_transaction(tid, pid, epoch, [(TOPIC, 0), (TOPIC, 1)]) == ErrorCode.NONE
        assert await tc.handle_end_transaction(tid, pid, epoch, TransactionResult.COMMIT) == ErrorCode.NONE
        return tc.partition_for(tid)

    def states(self, partition: int, tid: str = "t") -> list[TransactionState]:
        return [m.state for k, m in records(self.server, partition) if k == tid and m is not None]

    async def until(self, what: str, check: Callable[[], bool], timeout_s: float = 10.0) -> None:
        try:
            async with asyncio.timeout(timeout_s):
                while not check():
                    await asyncio.sleep(0.01)
        except TimeoutError:
            raise AssertionError(f"no {what} within {timeout_s} s") from None


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    server = await started(config(tmp_path))
    leaders = {b: await MarkerLeader().start() for b in (7, 8)}
    own = await coordinator_of(server)
    image = MetadataImage(cluster_id="c", controller_id=1, brokers={
        b: BrokerInfo(b, HOST, leader.port) for b, leader in leaders.items()}, topics={
        TOPIC: TopicState(TOPIC, uuid.uuid4(), {p: PartitionState(p, [7, 8], 7, isr=[7, 8]) for p in (0, 1)})})
    cache = MetadataCache(image)
    tasks: set[asyncio.Task[object]] = set()

    def spawn(coro: Awaitable[object]) -> asyncio.Task[object]:
        task = asyncio.ensure_future(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)
        return task

    sender = TransactionMarkerChannelManager(
        own.state_manager, cache, NetworkClient(NetworkClientConfig(client_id="markers-test",
                                                                    request_timeout_ms=REQUEST_TIMEOUT_MS)),
        inter_broker_listener="PLAINTEXT", request_timeout_ms=REQUEST_TIMEOUT_MS, spawn=spawn,  # type: ignore[arg-type]
        retry_backoff_ms=BACKOFF_MS)
    tc = TransactionCoordinator(own.state_manager, own._allocate_producer_id,
                                send_markers=sender.add_txn_markers_to_send)
    try:
        yield Harness(server, tc, sender, leaders, image, cache)
    finally:
        await sender.shutdown()
        for leader in leaders.values():
            await leader.close()
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.shutdown()


async def test_retriable_errors_a_lost_connection_and_a_timeout_are_retried_to_the_leader_of_the_moment(
        harness: Harness) -> None:
    """a-0 answers NOT_LEADER_OR_FOLLOWER (and its leadership moves to broker 8, which first
    answers NOT_ENOUGH_REPLICAS, then closes the connection, then never answers, then NONE);
    a-1 answers NONE at once. CompleteCommit is written only after a-0's NONE, with both
    partitions gone from the transaction."""
    h = harness
    old, new = h.leaders[7], h.leaders[8]
    old.script = [{(TOPIC, 0): ErrorCode.NOT_LEADER_OR_FOLLOWER}]
    old.on_request = lambda n: h.lead(0, 8) if n == 1 else None
    new.script = [{(TOPIC, 0): ErrorCode.NOT_ENOUGH_REPLICAS}, DROP, SILENT]
    partition = await h.prepared_commit()
    await h.until("CompleteCommit", lambda: S.COMPLETE_COMMIT in h.states(partition))
    assert old.seen == [{(TOPIC, 0), (TOPIC, 1)}]  # one request for both (drainQueuedTransactionMarkers)
    assert new.seen == [{(TOPIC, 0)}] * 4  # a-1 was never sent again
    assert h.states(partition)[-2:] == [S.PREPARE_COMMIT, S.COMPLETE_COMMIT]
    assert state_of(h.coordinator, "t").state == S.COMPLETE_COMMIT
    assert state_of(h.coordinator, "t").topic_partitions == set()
    assert h.sender.pending_transactional_ids() == set()


@pytest.mark.parametrize("error", [ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.TRANSACTION_COORDINATOR_FENCED],
                         ids=lambda e: e.name)
async def test_an_epoch_or_coordinator_fenced_answer_abandons_the_transaction(harness: Harness, error: ErrorCode) -> None:
    """The producer or the coordinator moved on: nothing more is sent and nothing written (the
    transaction stays in PrepareCommit for whoever owns it now)."""
    h = harness
    h.leaders[7].script = [{(TOPIC, 0): error}]
    partition = await h.prepared_commit()
    await h.until("abandoned", lambda: h.leaders[7].seen and not h.sender.pending_transactional_ids())
    # another transaction's markers go through the same sender afterwards: the first was not resent
    other = await h.prepared_commit("u")
    await h.until("u completed", lambda: S.COMPLETE_COMMIT in h.states(other, "u"))
    assert sum((TOPIC, 0) in s for s in h.leaders[7].seen) == 2  # t's once, u's once
    assert S.COMPLETE_COMMIT not in h.states(partition)
    assert state_of(h.coordinator, "t").state == S.PREPARE_COMMIT


async def test_a_partition_whose_topic_is_deleted_is_dropped_and_an_unknown_leader_waits(harness: Harness) -> None:
    """Kafka's addTxnMarkersToBrokerQueue: a partition no longer in the metadata is removed from
    the transaction; one whose leader has no endpoint waits until the metadata names one."""
    h = harness
    topic = h.image.topics[TOPIC]
    h.image = dataclasses.replace(h.image, topics={TOPIC: dataclasses.replace(topic, partitions={
        0: dataclasses.replace(topic.partitions[0], leader=9)})})  # a-1 deleted, a-0 led by an unknown broker
    h.cache.update(h.image)
    partition = await h.prepared_commit()
    await asyncio.sleep(5 * BACKOFF_MS / 1000)  # a few retry rounds with no leader to send to
    assert h.leaders[7].seen == [] and h.leaders[8].seen == []
    assert S.COMPLETE_COMMIT not in h.states(partition)
    h.lead(0, 8)
    await h.until("CompleteCommit", lambda: S.COMPLETE_COMMIT in h.states(partition))
    assert h.leaders[8].seen == [{(TOPIC, 0)}]
