"""WriteTxnMarkers on one broker, with a raw transactional producer and the test as coordinator:
markers end transactions on several partitions, the last stable offset follows each marker,
aborted transactions reach read_committed fetches, real read_committed consumers (confluent-kafka,
kafka-python, aiokafka, Kafka's Java ConsoleConsumer) read exactly the committed records, and the
fencing answers are Kafka's."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.errors import ErrorCode
from protocol.messages import FindCoordinatorRequest
from tests.broker_process import BrokerProcess
from tests.raw_client import RawConnection
from tests.txn_raw import (
    NO_VERIFICATION,
    READ_COMMITTED,
    READ_UNCOMMITTED,
    TxnProducer,
    confluent_values,
    create_topic,
    drain,
    fetch_committed,
    indexed_aborts,
    init_producer_id,
    list_offset,
    write_markers,
)

TOPIC = "txn"
P0, P1, P2 = (TOPIC, 0), (TOPIC, 1), (TOPIC, 2)
COMMITTED = ["a1", "a2", "a3", "a4"]
ALL = ["a1", "a2", "a3", "a4", "b1", "b2", "b3", "c1"]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker on which the scenario of test_markers_end_transactions_and_move_the_lso ran
    (the consumer tests read what it left)."""
    b = BrokerProcess(tmp_path_factory.mktemp("txn") / "data",
                      overrides=["offsets.topic.num.partitions=1", "group.initial.rebalance.delay.ms=0",
                                 NO_VERIFICATION]).start()
    try:
        with RawConnection(b.port, "txn-test") as conn:
            _scenario(conn)
        yield b
    finally:
        b.stop()


def _lsos(conn: RawConnection) -> list[int]:
    return [list_offset(conn, tp, READ_COMMITTED) for tp in (P0, P1, P2)]


def _hws(conn: RawConnection) -> list[int]:
    return [list_offset(conn, tp, READ_UNCOMMITTED) for tp in (P0, P1, P2)]


def _scenario(conn: RawConnection) -> None:
    create_topic(conn, TOPIC, 3)
    a = TxnProducer(conn, init_producer_id(conn))
    b = TxnProducer(conn, init_producer_id(conn))
    c = TxnProducer(conn, init_producer_id(conn))
    # A on P0 and P1, B on P0 and P2, then A on P2: three open transactions, interleaved
    assert a.send(P0, ["a1", "a2"]) == (0, 0)
    assert a.send(P1, ["a3"]) == (0, 0)
    assert b.send(P0, ["b1"]) == (0, 2)
    assert b.send(P2, ["b2", "b3"]) == (0, 0)
    assert a.send(P2, ["a4"]) == (0, 2)
    assert _hws(conn) == [3, 1, 3]
    assert _lsos(conn) == [0, 0, 0]  # every partition's first record is in an open transaction

    # COMMIT A (v1): each partition's LSO moves to B's first offset where B is open, else the end
    assert write_markers(conn, a.producer_id, 0, True, 1, [P0, P1, P2]) == {P0: 0, P1: 0, P2: 0}
    assert _hws(conn) == [4, 2, 4]  # one control batch per partition
    assert _lsos(conn) == [2, 2, 0]
    assert fetch_committed(conn, P0) == (2, [])

    # ABORT B (v0): the LSO reaches the end; the aborted transaction is in the .txnindex
    assert write_markers(conn, b.producer_id, 0, False, 1, [P0, P2], version=0) == {P0: 0, P2: 0}
    assert _hws(conn) == [5, 2, 5]
    assert _lsos(conn) == [5, 2, 5]
    assert fetch_committed(conn, P0) == (5, [(b.producer_id, 2)])
    assert fetch_committed(conn, P2) == (5, [(b.producer_id, 0)])
    assert fetch_committed(conn, P1) == (2, [])

    # C's transaction is fenced by its coordinator: an ABORT at the bumped epoch 1 ...
    assert c.send(P1, ["c1"]) == (0, 2)
    assert _lsos(conn)[1] == 2
    assert write_markers(conn, c.producer_id, 1, False, 2, [P1]) == {P1: 0}
    assert list_offset(conn, P1, READ_COMMITTED) == 4
    assert fetch_committed(conn, P1) == (4, [(c.producer_id, 2)])
    # ... after which a marker at the old producer epoch (a zombie's) is INVALID_PRODUCER_EPOCH,
    # and one from an older coordinator epoch TRANSACTION_COORDINATOR_FENCED; neither is written
    assert write_markers(conn, c.producer_id, 0, True, 2, [P1]) == {P1: ErrorCode.INVALID_PRODUCER_EPOCH}
    assert write_markers(conn, c.producer_id, 1, True, 1, [P1]) == {P1: ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    assert c.send(P1, ["c2"])[0] == ErrorCode.INVALID_PRODUCER_EPOCH  # the producer is fenced too
    assert list_offset(conn, P1, READ_UNCOMMITTED) == 4

    # partitions this broker does not have are refused one by one; the others are written, even
    # for a producer without an open transaction there (it only records the epochs)
    assert write_markers(conn, a.producer_id, 0, True, 1, [(TOPIC, 7), ("no-such-topic", 0), P1]) == {
        (TOPIC, 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("no-such-topic", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        P1: 0,
    }
    assert _hws(conn) == [5, 5, 5]
    assert _lsos(conn) == [5, 5, 5]

    # acks=all below min.insync.replicas is refused before the append, as a produce is
    create_topic(conn, "txn-durable", 1, configs={"min.insync.replicas": "2"})
    durable = ("txn-durable", 0)
    assert write_markers(conn, a.producer_id, 0, True, 1, [durable]) == {durable: ErrorCode.NOT_ENOUGH_REPLICAS}
    assert list_offset(conn, durable, READ_UNCOMMITTED) == 0

    # the internal __consumer_offsets takes markers (Kafka's internalTopicsAllowed = true)
    found = conn.call(10, 4, FindCoordinatorRequest(key_type=0, coordinator_keys=["txn-group"]))
    assert found.coordinators[0].error_code == 0
    offsets = ("__consumer_offsets", 0)
    assert write_markers(conn, a.producer_id, 0, True, 1, [offsets]) == {offsets: 0}


def test_aborted_transactions_are_in_the_txnindex(written: BrokerProcess) -> None:
    """The fixture's scenario checked each answer, LSO and aborted list as the markers came; the
    ABORTs of transactions with data (B's on P0 and P2, C's fenced one on P1) are in their
    segments' .txnindex files as Kafka writes them (first and marker offset, the LSO once the
    transaction ended), the COMMITs are not."""
    with RawConnection(written.port, "txn-check") as conn:
        pids = {pid for tp in (P0, P1, P2) for pid, _ in fetch_committed(conn, tp)[1]}
    assert len(pids) == 2  # B's and C's
    (b0,) = indexed_aborts(written.log_dir, P0)
    (c1,) = indexed_aborts(written.log_dir, P1)
    (b2,) = indexed_aborts(written.log_dir, P2)
    assert b0.producer_id == b2.producer_id != c1.producer_id and {b0.producer_id, c1.producer_id} == pids
    assert (b0.first_offset, b0.last_offset, b0.last_stable_offset) == (2, 4, 5)
    assert (b2.first_offset, b2.last_offset, b2.last_stable_offset) == (0, 4, 5)
    assert (c1.first_offset, c1.last_offset, c1.last_stable_offset) == (2, 3, 4)


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_confluent_kafka_reads_committed_records_only(written: BrokerProcess, isolation: str) -> None:
    expected = COMMITTED if isolation == "read_committed" else ALL
    assert confluent_values(written.bootstrap, [P0, P1, P2], len(expected), isolation) == expected


def test_kafka_python_reads_committed_records_only(written: BrokerProcess) -> None:
    with warnings.catch_warnings():  # kafka-python's import warns on Python 3.11
        warnings.simplefilter("ignore", DeprecationWarning)
        from kafka import KafkaConsumer
        from kafka import TopicPartition as KTopicPartition

    consumer = KafkaConsumer(bootstrap_servers=written.bootstrap, isolation_level="read_committed",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        consumer.assign([KTopicPartition(TOPIC, p) for p in range(3)])

        def poll() -> list[str]:
            return [r.value.decode() for recs in consumer.poll(200).values() for r in recs]

        assert sorted(drain(poll, len(COMMITTED))) == COMMITTED
    finally:
        consumer.close()


async def test_aiokafka_reads_committed_records_only(written: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka.structs import TopicPartition as ATopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=written.bootstrap, isolation_level="read_committed",
                                enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [ATopicPartition(TOPIC, p) for p in range(3)]
        consumer.assign(tps)
        got: list[str] = []
        async with asyncio.timeout(30):
            # read_committed stops at the LSO, which is each partition's end: the positions
            # reaching it means every committed record arrived, and nothing after
            while [await consumer.position(tp) for tp in tps] != [5, 5, 5]:
                for recs in (await consumer.getmany(timeout_ms=200)).values():
                    got += [r.value.decode() for r in recs]
        assert sorted(got) == COMMITTED
    finally:
        await consumer.stop()


def test_java_console_consumer_reads_committed_records_only(written: BrokerProcess) -> None:
    """Kafka 3.9's own consumer (ConsoleConsumer, in a group) with --isolation-level
    read_committed: exits after 10 s without records, having printed exactly the committed ones."""
    from tests.compat.jvm import run_tool

    out = run_tool("org.apache.kafka.tools.consumer.ConsoleConsumer", "--bootstrap-server", written.bootstrap,
                   "--topic", TOPIC, "--from-beginning", "--isolation-level", "read_committed",
                   "--timeout-ms", "10000", check=False, timeout=120)
    assert sorted(line for line in out.stdout.splitlines() if line) == COMMITTED, out.stderr[-3000:]
    assert "Processed a total of 4 messages" in out.stderr


def test_transaction_state_survives_a_kill(tmp_path: Path) -> None:
    """kill -9 after markers, with a transaction still open: the restarted broker rebuilds the
    producer state from its log (control batches included), so it answers the same LSO and
    aborted transactions, still holds the LSO at the open transaction, fences the coordinator
    epoch it had seen, and the open transaction's COMMIT then moves the LSO to the end."""
    b = BrokerProcess(tmp_path / "data", overrides=[NO_VERIFICATION]).start()
    try:
        with RawConnection(b.port, "txn-kill") as conn:
            create_topic(conn, "txn-kill", 1)
            tp = ("txn-kill", 0)
            a = TxnProducer(conn, init_producer_id(conn))
            c = TxnProducer(conn, init_producer_id(conn))
            assert a.send(tp, ["a1"]) == (0, 0)
            assert write_markers(conn, a.producer_id, 0, False, 7, [tp]) == {tp: 0}
            assert c.send(tp, ["c1"]) == (0, 2)
            assert a.send(tp, ["a2"]) == (0, 3)
            assert write_markers(conn, a.producer_id, 0, True, 7, [tp]) == {tp: 0}
            before = (list_offset(conn, tp, READ_UNCOMMITTED), fetch_committed(conn, tp))
            assert before == (5, (2, [(a.producer_id, 0)]))
    finally:
        b.kill()
    b2 = BrokerProcess(tmp_path / "data", port=b.port, overrides=[NO_VERIFICATION]).start()
    try:
        with RawConnection(b2.port, "txn-kill") as conn:
            assert (list_offset(conn, tp, READ_UNCOMMITTED), fetch_committed(conn, tp)) == before
            assert write_markers(conn, a.producer_id, 0, True, 6, [tp]) == {tp: ErrorCode.TRANSACTION_COORDINATOR_FENCED}
            assert write_markers(conn, c.producer_id, 0, True, 7, [tp]) == {tp: 0}
            assert fetch_committed(conn, tp) == (6, [(a.producer_id, 0)])
    finally:
        b2.stop()
