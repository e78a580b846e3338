"""The transaction coordinator's I/O half over a real (socket-less) broker stack: logs in a temp
dir, the embedded controller, the ReplicaManager and its Partitions, the coordinator runtime.
What the coordinator answers is checked together with what it wrote to `__transaction_state`
(read back from the partition's log) and what a new shard replays from it."""

from __future__ import annotations

import asyncio
import dataclasses
import struct
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker.config import KafkaConfig
from broker.coordinator.loader import read_key_values
from broker.server import BrokerServer
from broker.txn.coordinator import TransactionCoordinator, TransactionTimeouts
from broker.txn.decisions import ProducerIdAndEpoch, TransactionResult, new_transaction_metadata
from broker.txn.metadata import TransactionMetadata, TransactionState
from broker.txn.state_manager import (
    TRANSACTION_STATE_TOPIC,
    CoordinatorEpochAndTxnMetadata,
    TransactionShard,
    TransactionStateManager,
)
from broker.txn.transaction_log import read_txn_record_value, value_to_bytes
from protocol.coordinator_records import decode_transaction_log_key, transaction_log_key
from protocol.errors import ErrorCode
from tests.loop_waits import until

S = TransactionState
PARTITIONS = 3
TIMEOUT_MS = 60000
# the transactions' topic: one in the metadata (a topic that is not would be dropped from the
# markers at once, completing the transaction as soon as the loop lets the sender run), so that
# its markers go to this broker's unbound listener and stay pending, whatever the scheduling
TOPIC = TRANSACTION_STATE_TOPIC


def config(tmp_path: Path, min_isr: int = 1) -> KafkaConfig:
    """No listener is bound here (port 0): the marker sender's WriteTxnMarkers to this broker
    never connect, so a transaction stays in its Prepare state with its markers pending."""
    return KafkaConfig({
        "log.dirs": str(tmp_path / "data"), "listeners": "PLAINTEXT://127.0.0.1:0",
        "transaction.state.log.num.partitions": str(PARTITIONS),
        "transaction.state.log.min.isr": str(min_isr), "transaction.max.timeout.ms": "900000",
    })


async def started(cfg: KafkaConfig) -> BrokerServer:
    s = BrokerServer(cfg)
    await s.start_components()
    return s


@pytest.fixture
async def server(tmp_path: Path) -> AsyncIterator[BrokerServer]:
    s = await started(config(tmp_path))
    try:
        yield s
    finally:
        await s.shutdown()


async def coordinator_of(server: BrokerServer) -> TransactionCoordinator:
    """The server's own coordinator, its topic created as FindCoordinator creates it."""
    tc = server.transaction_coordinator
    assert tc is not None and tc.state_manager.runtime.ensure_topic()
    await server.controller.committed()  # the partitions' logs are created in an executor
    return tc


def records(server: BrokerServer, partition: int) -> list[tuple[str, TransactionMetadata | None]]:
    """What `__transaction_state`-<partition> holds, decoded."""
    log = server.replica_manager.partitions[(TRANSACTION_STATE_TOPIC, partition)].log
    return [(decode_transaction_log_key(k), read_txn_record_value(decode_transaction_log_key(k), v))
            for k, v in read_key_values(log)]


def state_of(tc: TransactionCoordinator, tid: str) -> TransactionMetadata:
    found = tc.state_manager.get_transaction_state(tid)
    assert isinstance(found, CoordinatorEpochAndTxnMetadata), found
    return found.metadata


def summary(m: TransactionMetadata | None) -> tuple[object, ...] | None:
    if m is None:
        return None
    return (m.producer_id, m.producer_epoch, m.state, frozenset(m.topic_partitions), m.txn_timeout_ms)


# -- the shard ------------------------------------------------------------------------------------


def test_shard_replays_values_tombstones_and_skips_other_key_versions() -> None:
    meta = new_transaction_metadata("t", 7, TIMEOUT_MS, 1000)
    empty = meta.prepare_increment_producer_epoch(TIMEOUT_MS, None, 1001)
    assert not isinstance(empty, ErrorCode)
    meta.complete_transition_to(empty)
    ongoing = meta.prepare_add_partitions({(TOPIC, 0), ("b", 2)}, 1002)
    shard = TransactionShard(0)
    shard.replay(transaction_log_key("t"), value_to_bytes(empty))
    assert summary(shard.transactions["t"]) == (7, 0, S.EMPTY, frozenset(), TIMEOUT_MS)
    shard.replay(transaction_log_key("t"), value_to_bytes(ongoing))  # the latest record wins
    assert summary(shard.transactions["t"]) == (7, 0, S.ONGOING, {(TOPIC, 0), ("b", 2)}, TIMEOUT_MS)
    shard.replay(transaction_log_key("u"), value_to_bytes(empty))
    shard.replay(struct.pack(">h", 1) + b"\x00\x01t", value_to_bytes(empty))  # not a v0 key: skipped
    shard.replay(transaction_log_key("t"), None)  # a tombstone removes the id
    assert sorted(shard.transactions) == ["u"]
    shard.on_unloaded()
    assert shard.transactions == {}


# -- InitProducerId -------------------------------------------------------------------------------


async def test_init_producer_id_writes_empty_before_answering_and_bumps_the_epoch(server: BrokerServer) -> None:
    tc = await coordinator_of(server)
    first = await tc.handle_init_producer_id("t1", TIMEOUT_MS, None)
    assert first.error == ErrorCode.NONE and first.producer_epoch == 0 and first.producer_id >= 0
    partition = tc.partition_for("t1")
    [(tid, written)] = records(server, partition)
    assert (tid, summary(written)) == ("t1", (first.producer_id, 0, S.EMPTY, frozenset(), TIMEOUT_MS))
    second = await tc.handle_init_producer_id("t1", 30000, None)
    assert (second.error, second.producer_id, second.producer_epoch) == (ErrorCode.NONE, first.producer_id, 1)
    assert summary(records(server, partition)[-1][1]) == (first.producer_id, 1, S.EMPTY, frozenset(), 30000)
    other = await tc.handle_init_producer_id("t2", TIMEOUT_MS, None)
    assert other.error == ErrorCode.NONE and other.producer_id != first.producer_id


async def test_init_producer_id_errors(server: BrokerServer) -> None:
    tc = await coordinator_of(server)
    assert (await tc.handle_init_producer_id("", TIMEOUT_MS, None)).error == ErrorCode.INVALID_REQUEST
    for timeout in (0, 900001):
        assert (await tc.handle_init_producer_id("t", timeout, None)).error == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert records(server, tc.partition_for("t")) == []
    ok = await tc.handle_init_producer_id("t", TIMEOUT_MS, None)
    # KIP-360: the current producer may bump its own epoch; another producer id is fenced
    bumped = await tc.handle_init_producer_id("t", TIMEOUT_MS, ProducerIdAndEpoch(ok.producer_id, 0))
    assert (bumped.error, bumped.producer_epoch) == (ErrorCode.NONE, 1)
    stranger = await tc.handle_init_producer_id("t", TIMEOUT_MS, ProducerIdAndEpoch(ok.producer_id + 100, 0))
    assert stranger.error == ErrorCode.PRODUCER_FENCED
    retry = await tc.handle_init_producer_id("t", TIMEOUT_MS, ProducerIdAndEpoch(ok.producer_id, 0))
    assert (retry.error, retry.producer_epoch) == (ErrorCode.NONE, 1)  # a retry whose answer was lost
    assert (await tc.handle_init_producer_id("t", TIMEOUT_MS, ProducerIdAndEpoch(ok.producer_id, 1))).producer_epoch == 2
    stale = await tc.handle_init_producer_id("t", TIMEOUT_MS, ProducerIdAndEpoch(ok.producer_id, 0))
    assert stale.error == ErrorCode.PRODUCER_FENCED  # epoch 0 is neither the current nor the last one


async def test_a_failed_write_is_answered_with_the_coordinators_error_and_leaves_no_pending_state(
        tmp_path: Path) -> None:
    """Kafka's default transaction.state.log.min.isr (2) on one broker: every write is
    NOT_ENOUGH_REPLICAS, answered COORDINATOR_NOT_AVAILABLE -- and again on the retry, not
    CONCURRENT_TRANSACTIONS (the failed write's pending state was cleared)."""
    s = await started(config(tmp_path, min_isr=2))
    try:
        tc = await coordinator_of(s)
        for _ in range(2):
            assert (await tc.handle_init_producer_id("t", TIMEOUT_MS, None)).error == ErrorCode.COORDINATOR_NOT_AVAILABLE
        meta = state_of(tc, "t")
        assert meta.pending_state is None and meta.producer_epoch == -1
        assert records(s, tc.partition_for("t")) == []
    finally:
        await s.shutdown()


# -- a transaction --------------------------------------------------------------------------------


async def test_add_partitions_and_end_txn_write_their_states(server: BrokerServer) -> None:
    tc = await coordinator_of(server)
    init = await tc.handle_init_producer_id("t", TIMEOUT_MS, None)
    pid, epoch = init.producer_id, init.producer_epoch
    partition = tc.partition_for("t")
    assert await tc.handle_add_partitions_to_transaction("t", pid, epoch, [(TOPIC, 0), (TOPIC, 1)]) == ErrorCode.NONE
    assert summary(state_of(tc, "t")) == (pid, 0, S.ONGOING, {(TOPIC, 0), (TOPIC, 1)}, TIMEOUT_MS)
    written = len(records(server, partition))
    assert await tc.handle_add_partitions_to_transaction("t", pid, epoch, [(TOPIC, 0)]) == ErrorCode.NONE
    assert len(records(server, partition)) == written  # already in the transaction: nothing written
    assert await tc.handle_add_partitions_to_transaction("t", pid + 1, epoch, [("b", 0)]) == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert await tc.handle_add_partitions_to_transaction("t", pid, epoch + 1, [("b", 0)]) == ErrorCode.PRODUCER_FENCED
    assert await tc.handle_add_partitions_to_transaction("nobody", pid, epoch, [("b", 0)]) == \
        ErrorCode.INVALID_PRODUCER_ID_MAPPING

    assert await tc.handle_end_transaction("t", pid, epoch, TransactionResult.COMMIT) == ErrorCode.NONE
    assert summary(records(server, partition)[-1][1]) == (pid, 0, S.PREPARE_COMMIT, {(TOPIC, 0), (TOPIC, 1)}, TIMEOUT_MS)
    assert state_of(tc, "t").state == S.PREPARE_COMMIT
    # waiting for its markers (CompleteCommit pending): a retry of either decision is
    # CONCURRENT_TRANSACTIONS, as Kafka answers while the pending transition is in progress
    assert state_of(tc, "t").pending_state == S.COMPLETE_COMMIT
    assert await tc.handle_end_transaction("t", pid, epoch, TransactionResult.COMMIT) == \
        ErrorCode.CONCURRENT_TRANSACTIONS
    assert await tc.handle_end_transaction("t", pid, epoch, TransactionResult.ABORT) == \
        ErrorCode.CONCURRENT_TRANSACTIONS
    assert await tc.handle_add_partitions_to_transaction("t", pid, epoch, [("b", 0)]) == \
        ErrorCode.CONCURRENT_TRANSACTIONS
    assert (await tc.handle_init_producer_id("t", TIMEOUT_MS, None)).error == ErrorCode.CONCURRENT_TRANSACTIONS
    assert await tc.handle_end_transaction("", pid, epoch, TransactionResult.COMMIT) == ErrorCode.INVALID_REQUEST


async def test_verify_partitions_checks_without_writing(server: BrokerServer) -> None:
    """AddPartitionsToTxn v4+ verify_only (KIP-890): NONE for a partition in the transaction,
    TRANSACTION_ABORTABLE for one that is not, one error for all on a wrong producer, epoch or a
    transaction being ended; nothing written."""
    tc = await coordinator_of(server)
    init = await tc.handle_init_producer_id("t", TIMEOUT_MS, None)
    pid = init.producer_id
    await tc.handle_add_partitions_to_transaction("t", pid, 0, [(TOPIC, 0)])
    written = len(records(server, tc.partition_for("t")))
    verify = tc.handle_verify_partitions_in_transaction
    assert verify("t", pid, 0, [(TOPIC, 0), (TOPIC, 1)]) == {(TOPIC, 0): ErrorCode.NONE,
                                                         (TOPIC, 1): ErrorCode.TRANSACTION_ABORTABLE}
    assert verify("t", pid, 1, [(TOPIC, 0)]) == {(TOPIC, 0): ErrorCode.PRODUCER_FENCED}
    assert verify("t", pid + 1, 0, [(TOPIC, 0)]) == {(TOPIC, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert verify("nobody", pid, 0, [(TOPIC, 0)]) == {(TOPIC, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert verify("", pid, 0, [(TOPIC, 0)]) == {(TOPIC, 0): ErrorCode.INVALID_REQUEST}
    assert len(records(server, tc.partition_for("t"))) == written
    await tc.handle_end_transaction("t", pid, 0, TransactionResult.ABORT)
    assert verify("t", pid, 0, [(TOPIC, 0)]) == {(TOPIC, 0): ErrorCode.CONCURRENT_TRANSACTIONS}


async def test_end_txn_without_a_transaction_is_invalid_txn_state(server: BrokerServer) -> None:
    tc = await coordinator_of(server)
    init = await tc.handle_init_producer_id("t", TIMEOUT_MS, None)
    assert await tc.handle_end_transaction("t", init.producer_id, 0, TransactionResult.COMMIT) == \
        ErrorCode.INVALID_TXN_STATE
    assert await tc.handle_end_transaction("t", init.producer_id, 1, TransactionResult.ABORT) == \
        ErrorCode.PRODUCER_FENCED


async def test_init_producer_id_fences_an_open_transaction_and_aborts_it(server: BrokerServer) -> None:
    tc = await coordinator_of(server)
    init = await tc.handle_init_producer_id("t", TIMEOUT_MS, None)
    pid = init.producer_id
    assert await tc.handle_add_partitions_to_transaction("t", pid, 0, [(TOPIC, 0)]) == ErrorCode.NONE
    fenced = await tc.handle_init_producer_id("t", TIMEOUT_MS, None)
    assert fenced.error == ErrorCode.CONCURRENT_TRANSACTIONS  # retry once the abort completed
    # the abort is written with the fencing epoch, which no client was given
    assert summary(records(server, tc.partition_for("t"))[-1][1]) == (pid, 1, S.PREPARE_ABORT, {(TOPIC, 0)}, TIMEOUT_MS)
    assert await tc.handle_add_partitions_to_transaction("t", pid, 0, [("b", 0)]) == ErrorCode.PRODUCER_FENCED
    assert await tc.handle_end_transaction("t", pid, 0, TransactionResult.COMMIT) == ErrorCode.PRODUCER_FENCED
    # the markers cannot be delivered here (see config): the abort does not complete, the new
    # producer keeps retrying
    assert (await tc.handle_init_producer_id("t", TIMEOUT_MS, None)).error == ErrorCode.CONCURRENT_TRANSACTIONS


# -- loading --------------------------------------------------------------------------------------


async def test_a_restarted_broker_loads_the_state_and_bumps_the_stored_epoch(tmp_path: Path) -> None:
    s = await started(config(tmp_path))
    try:
        tc = await coordinator_of(s)
        first = await tc.handle_init_producer_id("t", TIMEOUT_MS, None)
        await tc.handle_init_producer_id("t", TIMEOUT_MS, None)
        ongoing = await tc.handle_init_producer_id("u", TIMEOUT_MS, None)
        await tc.handle_add_partitions_to_transaction("u", ongoing.producer_id, 0, [("x", 3)])
    finally:
        await s.shutdown()
    s = await started(config(tmp_path))
    try:
        tc = s.transaction_coordinator
        assert tc is not None
        assert summary(state_of(tc, "t")) == (first.producer_id, 1, S.EMPTY, frozenset(), TIMEOUT_MS)
        assert summary(state_of(tc, "u")) == (ongoing.producer_id, 0, S.ONGOING, {("x", 3)}, TIMEOUT_MS)
        again = await tc.handle_init_producer_id("t", TIMEOUT_MS, None)
        assert (again.error, again.producer_id, again.producer_epoch) == (ErrorCode.NONE, first.producer_id, 2)
        fresh = await tc.handle_init_producer_id("new", TIMEOUT_MS, None)  # ids are not handed out twice
        assert fresh.producer_id not in (first.producer_id, ongoing.producer_id)
    finally:
        await s.shutdown()


async def test_elections_load_the_partition_and_a_write_that_outlived_its_coordinator_is_not_applied(
        server: BrokerServer) -> None:
    """ZooKeeper mode's ownership: NOT_COORDINATOR before the election, a load by replay after
    it, and a write whose partition resigned (and was elected again) while it waited for a
    follower is NOT_COORDINATOR, the reloaded metadata untouched."""
    own = await coordinator_of(server)
    init = await own.handle_init_producer_id("t", TIMEOUT_MS, None)
    sm = TransactionStateManager(server.config, replica_manager=server.replica_manager,
                                 metadata_cache=server.metadata_cache, controller=server.controller,
                                 spawn=server._spawn, elections=True)
    tc = TransactionCoordinator(sm, own._allocate_producer_id)
    partition = sm.partition_for("t")
    assert (await tc.handle_init_producer_id("t", TIMEOUT_MS, None)).error == ErrorCode.NOT_COORDINATOR
    p = server.replica_manager.partitions[(TRANSACTION_STATE_TOPIC, partition)]
    task = sm.runtime.on_election(partition, p.leader_epoch)
    assert task is not None
    assert (await tc.handle_init_producer_id("t", TIMEOUT_MS, None)).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await task
    assert summary(state_of(tc, "t")) == (init.producer_id, 0, S.EMPTY, frozenset(), TIMEOUT_MS)

    me, other = p.broker_id, p.broker_id + 1
    wider = dataclasses.replace(p.state, replicas=[me, other], isr=[me, other],
                                partition_epoch=p.state.partition_epoch + 1)
    await p.make_leader(wider, int(time.time() * 1000))
    end = p.log.log_end_offset
    write = asyncio.ensure_future(tc.handle_init_producer_id("t", TIMEOUT_MS, None))  # waits for `other`
    await until(lambda: p.log.log_end_offset > end, "the write to reach the log")
    assert not write.done() and state_of(tc, "t").pending_state == S.EMPTY
    sm.runtime.on_resignation(partition, None)
    reload = sm.runtime.on_election(partition, p.leader_epoch)
    assert reload is not None
    await reload  # the new load replays the record the waiting write put in the log
    reloaded = state_of(tc, "t")
    narrow = dataclasses.replace(p.state, replicas=[me], isr=[me], partition_epoch=p.state.partition_epoch + 1)
    await p.make_leader(narrow, int(time.time() * 1000))
    server.replica_manager.produce_purgatory.check_and_complete((TRANSACTION_STATE_TOPIC, partition))  # acked
    assert (await asyncio.wait_for(write, 10)).error == ErrorCode.NOT_COORDINATOR
    assert state_of(tc, "t") is reloaded and reloaded.pending_state is None and reloaded.producer_epoch == 1
    await sm.shutdown()


async def test_end_txn_hands_its_markers_on_when_its_partition_took_a_new_leader_epoch_meanwhile(
        server: BrokerServer) -> None:
    """This broker keeps leading the id's partition, at a new leader epoch (the ISR shrink of a
    follower's controlled shutdown), while EndTxn's PrepareCommit waits for its acks: the runtime
    keeps the loaded metadata and only takes the epoch, so EndTxn must still hand the markers on,
    with the new coordinator epoch. Answering NOT_COORDINATOR instead (comparing epochs) left the
    transaction in PrepareCommit with nobody to send its markers -- no load follows to resend
    them -- and the Java producer's EndTxn retries answered CONCURRENT_TRANSACTIONS for ever
    (found by tests/cluster/test_java_eos.py's clean broker bounces)."""
    own = await coordinator_of(server)
    sm = TransactionStateManager(server.config, replica_manager=server.replica_manager,
                                 metadata_cache=server.metadata_cache, controller=server.controller,
                                 spawn=server._spawn, elections=True)
    sent: list[tuple[object, ...]] = []
    tc = TransactionCoordinator(sm, own._allocate_producer_id, send_markers=lambda *a: sent.append(a))
    partition = sm.partition_for("t")
    p = server.replica_manager.partitions[(TRANSACTION_STATE_TOPIC, partition)]
    epoch = p.leader_epoch
    load = sm.runtime.on_election(partition, epoch)
    assert load is not None
    await load
    init = await tc.handle_init_producer_id("t", TIMEOUT_MS, None)
    pid = init.producer_id
    assert await tc.handle_add_partitions_to_transaction("t", pid, 0, [("a", 0)]) == ErrorCode.NONE
    metadata = state_of(tc, "t")

    me, other = p.broker_id, p.broker_id + 1
    wider = dataclasses.replace(p.state, replicas=[me, other], isr=[me, other],
                                partition_epoch=p.state.partition_epoch + 1)
    await p.make_leader(wider, int(time.time() * 1000))
    end = p.log.log_end_offset
    commit = asyncio.ensure_future(tc.handle_end_transaction("t", pid, 0, TransactionResult.COMMIT))
    await until(lambda: p.log.log_end_offset > end, "PrepareCommit to reach the log")
    assert not commit.done()
    # the controller drops `other` from the ISR with a new leader epoch; this broker stays leader
    narrow = dataclasses.replace(p.state, replicas=[me], isr=[me], leader_epoch=epoch + 1,
                                 partition_epoch=p.state.partition_epoch + 1)
    await p.make_leader(narrow, int(time.time() * 1000))
    sm.runtime.on_leadership_change([(TRANSACTION_STATE_TOPIC, partition)], [])
    server.replica_manager.produce_purgatory.check_and_complete((TRANSACTION_STATE_TOPIC, partition))
    assert await asyncio.wait_for(commit, 10) == ErrorCode.NONE
    assert state_of(tc, "t") is metadata and metadata.state == S.PREPARE_COMMIT  # not reloaded
    [(coordinator_epoch, result, tid, complete)] = sent
    assert (coordinator_epoch, result, tid) == (epoch + 1, TransactionResult.COMMIT, "t")
    assert complete.txn_state == S.COMPLETE_COMMIT  # type: ignore[attr-defined]
    await sm.shutdown()


# -- timeouts: aborting timed-out transactions, expiring idle ids ---------------------------------


async def test_a_transaction_open_past_its_timeout_is_aborted_with_its_producer_fenced(server: BrokerServer) -> None:
    """Kafka's abortTimedOutTransactions: an Ongoing transaction older than its timeout gets
    PrepareAbort with the producer's epoch bumped (so the producer's EndTxn is PRODUCER_FENCED);
    one within its timeout, and an id with no transaction, are left alone."""
    own = await coordinator_of(server)
    now = [int(time.time() * 1000)]
    tc = TransactionCoordinator(own.state_manager, own._allocate_producer_id, clock_ms=lambda: now[0],
                                spawn=server._spawn, timeouts=TransactionTimeouts())
    old = await tc.handle_init_producer_id("old", 2000, None)
    young = await tc.handle_init_producer_id("young", 60000, None)
    idle = await tc.handle_init_producer_id("idle", 2000, None)
    for tid, r in (("old", old), ("young", young)):
        assert await tc.handle_add_partitions_to_transaction(tid, r.producer_id, 0, [("out", 0)]) == ErrorCode.NONE
    now[0] += 2001
    partitions = {tc.partition_for(t) for t in ("old", "young", "idle")}
    aborting = [t for p in sorted(partitions) for t in tc.abort_timed_out_transactions(p)]
    assert aborting == ["old"]
    await until(lambda: state_of(tc, "old").state == S.PREPARE_ABORT and not state_of(tc, "old").pending_state,
                "the PrepareAbort write")
    assert summary(state_of(tc, "old")) == (old.producer_id, 1, S.PREPARE_ABORT, frozenset({("out", 0)}), 2000)
    assert records(server, tc.partition_for("old"))[-1][1].state == S.PREPARE_ABORT  # type: ignore[union-attr]
    assert state_of(tc, "young").state == S.ONGOING and state_of(tc, "idle").state == S.EMPTY
    assert idle.error == ErrorCode.NONE
    assert await tc.handle_end_transaction("old", old.producer_id, 0, TransactionResult.COMMIT) == \
        ErrorCode.PRODUCER_FENCED


async def test_an_idle_transactional_id_expires_with_a_tombstone(server: BrokerServer) -> None:
    """Kafka's removeExpiredTransactionalIds: an Empty id not updated for
    transactional.id.expiration.ms is removed and a tombstone written; an Ongoing one stays."""
    own = await coordinator_of(server)
    sm = own.state_manager
    gone = await own.handle_init_producer_id("gone", TIMEOUT_MS, None)
    busy = await own.handle_init_producer_id("busy", TIMEOUT_MS, None)
    assert await own.handle_add_partitions_to_transaction("busy", busy.producer_id, 0, [("out", 0)]) == ErrorCode.NONE
    later = int(time.time() * 1000) + 10_000
    removed = 0
    for p in sorted({sm.partition_for("gone"), sm.partition_for("busy")}):
        removed += await sm.remove_expired_transactional_ids(p, later, 5_000)
    assert removed == 1
    assert sm.get_transaction_state("gone") is None
    assert state_of(own, "busy").state == S.ONGOING
    assert records(server, sm.partition_for("gone"))[-1] == ("gone", None)
    # a new InitProducerId for the expired id starts over with a new producer id
    again = await own.handle_init_producer_id("gone", TIMEOUT_MS, None)
    assert again.error == ErrorCode.NONE and again.producer_id != gone.producer_id and again.producer_epoch == 0


# -- DescribeTransactions / ListTransactions ------------------------------------------------------


async def test_describe_and_list_transactions(server: BrokerServer) -> None:
    """Kafka 3.9's handleDescribeTransactions / listTransactionStates over the coordinator's
    metadata: filters by producer id, state (unknown names reported and matching nothing) and
    duration since the transaction started; a Dead id is neither listed nor described."""
    own = await coordinator_of(server)
    now = [int(time.time() * 1000)]
    tc = TransactionCoordinator(own.state_manager, own._allocate_producer_id, clock_ms=lambda: now[0])
    idle = await tc.handle_init_producer_id("idle", TIMEOUT_MS, None)
    busy = await tc.handle_init_producer_id("busy", TIMEOUT_MS, None)
    assert await tc.handle_add_partitions_to_transaction("busy", busy.producer_id, 0, [("out", 1), ("out", 0),
                                                                                        ("in", 3)]) == ErrorCode.NONE
    started = now[0]

    def listed(producer_ids: set[int] = frozenset(), states: list[str] | None = None,  # type: ignore[assignment]
               duration_ms: int = -1) -> tuple[int, list[str], list[tuple[str, str]]]:
        got = tc.handle_list_transactions(producer_ids, states or [], duration_ms)
        return got.error, list(got.unknown_state_filters), sorted((m.transactional_id, m.state.state_name)
                                                                  for m in got.transactions)

    assert listed() == (ErrorCode.NONE, [], [("busy", "Ongoing"), ("idle", "Empty")])
    assert listed({idle.producer_id}) == (ErrorCode.NONE, [], [("idle", "Empty")])
    assert listed(states=["Ongoing", "ongoing", "Nope"]) == (ErrorCode.NONE, ["ongoing", "Nope"], [("busy", "Ongoing")])
    assert listed(states=["Nope"]) == (ErrorCode.NONE, ["Nope"], [])
    now[0] = started + 5000
    # KIP-994: started more than the duration ago; an Empty id's start time is -1, older than any
    assert listed(duration_ms=4999) == (ErrorCode.NONE, [], [("busy", "Ongoing"), ("idle", "Empty")])
    assert listed(duration_ms=5000) == (ErrorCode.NONE, [], [("idle", "Empty")])

    d = tc.handle_describe_transactions("busy")
    assert d.error == ErrorCode.NONE and d.metadata is state_of(tc, "busy")
    assert (d.metadata.txn_start_timestamp, d.metadata.topic_partitions) == (started, {("out", 0), ("out", 1), ("in", 3)})
    assert tc.handle_describe_transactions("nobody").error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert tc.handle_describe_transactions("").error == ErrorCode.INVALID_REQUEST
    state_of(tc, "idle").state = S.DEAD  # being expired: as if its tombstone were being written
    assert tc.handle_describe_transactions("idle").error == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    assert listed() == (ErrorCode.NONE, [], [("busy", "Ongoing")])


async def test_list_transactions_while_a_partition_loads(server: BrokerServer) -> None:
    """COORDINATOR_LOAD_IN_PROGRESS while any `__transaction_state` partition loads here (Kafka's
    loadingPartitions.nonEmpty), whichever ids it holds; DescribeTransactions of an id whose
    partition this broker has not been elected for is NOT_COORDINATOR."""
    own = await coordinator_of(server)
    await own.handle_init_producer_id("t", TIMEOUT_MS, None)
    sm = TransactionStateManager(server.config, replica_manager=server.replica_manager,
                                 metadata_cache=server.metadata_cache, controller=server.controller,
                                 spawn=server._spawn, elections=True)
    tc = TransactionCoordinator(sm, own._allocate_producer_id)
    assert tc.handle_describe_transactions("t").error == ErrorCode.NOT_COORDINATOR
    assert list(tc.handle_list_transactions(set(), []).transactions) == []  # nothing loaded: nothing listed
    other = next(p for p in range(PARTITIONS) if p != sm.partition_for("t"))
    p = server.replica_manager.partitions[(TRANSACTION_STATE_TOPIC, other)]
    task = sm.runtime.on_election(other, p.leader_epoch)
    assert task is not None
    assert tc.handle_list_transactions(set(), []).error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await task
    mine = sm.partition_for("t")
    task = sm.runtime.on_election(mine, server.replica_manager.partitions[(TRANSACTION_STATE_TOPIC, mine)].leader_epoch)
    assert task is not None
    assert tc.handle_describe_transactions("t").error == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    await task
    got = tc.handle_list_transactions(set(), [])
    assert (got.error, [m.transactional_id for m in got.transactions]) == (ErrorCode.NONE, ["t"])
    await sm.shutdown()


async def test_an_end_txn_whose_client_went_away_still_hands_its_markers_on(server: BrokerServer) -> None:
    """A client that closes its connection while EndTxn waits for its PrepareCommit write gets
    its request's handler cancelled (broker/network.py), not the coordinator's work: the record
    is written and adopted and the markers handed on, as Kafka's append callback runs whatever
    became of the client. Cancelled with the request, the id stayed Ongoing with PrepareCommit
    pending for good: every later request answered CONCURRENT_TRANSACTIONS and the timeout never
    aborted it (the Jepsen transactional workload's hanging transactions). The write is held at
    the partition's serialisation point so that the cancellation finds it waiting."""
    tc = await coordinator_of(server)
    init = await tc.handle_init_producer_id("t", TIMEOUT_MS, None)
    pid, epoch = init.producer_id, init.producer_epoch
    assert await tc.handle_add_partitions_to_transaction("t", pid, epoch, [(TOPIC, 0)]) == ErrorCode.NONE
    partition = server.replica_manager.partitions[(TRANSACTION_STATE_TOPIC, tc.partition_for("t"))]
    async with partition._exclusive():  # the write waits here
        request = asyncio.ensure_future(tc.handle_end_transaction("t", pid, epoch, TransactionResult.COMMIT))
        await until(lambda: state_of(tc, "t").pending_state == S.PREPARE_COMMIT, "EndTxn waiting for its write")
        request.cancel()  # what connection_lost does to the handler
        with pytest.raises(asyncio.CancelledError):
            await request
    await until(lambda: state_of(tc, "t").state in (S.PREPARE_COMMIT, S.COMPLETE_COMMIT),
                "the PrepareCommit written and adopted")
    assert [summary(m)[2] for _, m in records(server, tc.partition_for("t")) if m is not None][-1] in (
        S.PREPARE_COMMIT, S.COMPLETE_COMMIT)
    await until(lambda: state_of(tc, "t").state == S.COMPLETE_COMMIT or
                state_of(tc, "t").pending_state == S.COMPLETE_COMMIT, "the markers handed on")
