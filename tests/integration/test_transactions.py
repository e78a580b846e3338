"""The transaction coordinator of a real `odradek serve` (issue #22): FindCoordinator for
transactional ids, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn, through
confluent-kafka (librdkafka) and raw requests, and its state across a kill -9 and restart.

The broker runs with transaction.state.log.min.isr=1 (as Kafka's example server.properties):
Kafka's default of 2 cannot be met by one broker. The coordinator's marker sender completes the
transactions: confluent-kafka's commits and aborts are read back by read_committed and
read_uncommitted consumers, and a fenced producer's transaction is aborted.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from protocol.errors import ErrorCode
from protocol.messages import (
    AddOffsetsToTxnRequest,
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    FindCoordinatorRequest,
)
from protocol.messages.add_partitions_to_txn_request import (
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from tests.broker_process import BrokerProcess
from tests.raw_client import RawConnection
from tests.txn_requests import (
    add_partitions,
    auto_create,
    init,
    init_when_ready,
    read_values,
    until_stable,
)

SINGLE_BROKER_TXN = ["transaction.state.log.min.isr=1", "transaction.state.log.num.partitions=5",
                     "num.partitions=2"]


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    b = BrokerProcess(tmp_path / "data", overrides=SINGLE_BROKER_TXN).start()
    try:
        yield b
    finally:
        b.stop()


def test_confluent_kafka_init_transactions_and_fencing(broker: BrokerProcess) -> None:
    """librdkafka finds the coordinator, initialises, adds a partition on produce; a second
    producer with the same transactional.id fences the first, whose produce (AddPartitionsToTxn)
    and commit then fail fatally with _FENCED. The second then commits a transaction of its own."""
    settings = {"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-txn"}
    first = Producer(settings)
    first.init_transactions(30)
    second = Producer(settings)
    second.init_transactions(30)  # bumps the epoch: the first is fenced
    first.begin_transaction()
    first.produce("ck-out", b"v")
    with pytest.raises(KafkaException) as failed:  # AddPartitionsToTxn: PRODUCER_FENCED
        first.flush(30)
    with pytest.raises(KafkaException) as commit:
        first.commit_transaction(30)
    for error in (failed.value.args[0], commit.value.args[0]):
        assert error.fatal() and error.code() == KafkaError._FENCED, error
    second.begin_transaction()
    second.produce("ck-out", b"second", partition=0)
    second.commit_transaction(30)
    until_stable(broker.port, "ck-out", 2)
    assert read_values(broker.bootstrap, "ck-out", 2, "read_committed") == [b"second"]


def test_confluent_kafka_commit_and_abort(broker: BrokerProcess) -> None:
    """librdkafka's transactional producer: a committed transaction over both partitions, an
    aborted one, a committed one. Once the markers are written (the last stable offset reaches
    the high watermark), read_committed reads exactly the committed records, read_uncommitted
    all of them. Without the marker sender the second begin's AddPartitionsToTxn is answered
    CONCURRENT_TRANSACTIONS for ever and the last stable offset never moves."""
    with RawConnection(broker.port, "raw-txn") as c:
        auto_create(c, "ck-ca")
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "ck-ca"})
    p.init_transactions(30)
    for prefix, commit in ((b"c", True), (b"a", False), (b"d", True)):
        p.begin_transaction()
        for i in range(2):
            p.produce("ck-ca", prefix + b"-%d" % i, partition=i)
        p.flush(30)
        (p.commit_transaction if commit else p.abort_transaction)(30)
    until_stable(broker.port, "ck-ca", 2)
    assert read_values(broker.bootstrap, "ck-ca", 2, "read_committed") == [b"c-0", b"c-1", b"d-0", b"d-1"]
    assert read_values(broker.bootstrap, "ck-ca", 2, "read_uncommitted") == [
        b"a-0", b"a-1", b"c-0", b"c-1", b"d-0", b"d-1"]


def test_raw_transaction_requests_answer_as_kafka(broker: BrokerProcess) -> None:
    with RawConnection(broker.port, "raw-txn") as c:
        assert init(c, "t")[0] == ErrorCode.NOT_COORDINATOR  # before FindCoordinator created the topic
        found = c.call(10, 4, FindCoordinatorRequest(key_type=1, coordinator_keys=["t", "u"]))
        assert [(x.key, x.error_code, x.node_id, x.port) for x in found.coordinators] == [
            ("t", 0, 0, broker.port), ("u", 0, 0, broker.port)]
        assert init(c, "", 4)[0] == ErrorCode.INVALID_REQUEST
        assert init(c, "t", timeout_ms=900001)[0] == ErrorCode.INVALID_TRANSACTION_TIMEOUT  # transaction.max.timeout.ms
        assert init(c, "t", 3, (5, -1))[0] == ErrorCode.INVALID_REQUEST  # one of producer id/epoch
        error, pid, epoch = init_when_ready(c, "t")
        assert (error, epoch) == (0, 0) and pid >= 0
        # KIP-360 with another producer id: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH before v4
        assert init(c, "t", 4, (pid + 1, 0))[0] == ErrorCode.PRODUCER_FENCED
        assert init(c, "t", 3, (pid + 1, 0))[0] == ErrorCode.INVALID_PRODUCER_EPOCH
        assert init(c, "t", 3, (pid, 0)) == (0, pid, 1)
        epoch = 1

        auto_create(c, "out")
        auto_create(c, "other")
        assert add_partitions(c, 3, "t", pid, epoch, {"out": [0, 1]}) == {("out", 0): 0, ("out", 1): 0}
        # an unknown partition: nothing added, the others OPERATION_NOT_ATTEMPTED
        assert add_partitions(c, 3, "t", pid, epoch, {"out": [0, 7]}) == {
            ("out", 0): ErrorCode.OPERATION_NOT_ATTEMPTED, ("out", 7): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        # a client adds a group's offsets with AddOffsetsToTxn, not by naming __consumer_offsets
        assert add_partitions(c, 3, "t", pid, epoch, {"__consumer_offsets": [0], "out": [1]}) == {
            ("__consumer_offsets", 0): ErrorCode.TOPIC_AUTHORIZATION_FAILED, ("out", 1): ErrorCode.OPERATION_NOT_ATTEMPTED}
        assert add_partitions(c, 3, "t", pid, epoch - 1, {"out": [0]}) == {("out", 0): ErrorCode.PRODUCER_FENCED}
        assert add_partitions(c, 1, "t", pid, epoch - 1, {"out": [0]}) == {("out", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
        assert add_partitions(c, 3, "t", pid + 9, epoch, {"out": [0]}) == {
            ("out", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
        # v4+: a broker's batch; verify_only checks without adding
        batch = c.call(24, 4, AddPartitionsToTxnRequest(transactions=[
            AddPartitionsToTxnTransaction(transactional_id="t", producer_id=pid, producer_epoch=epoch, verify_only=True,
                                          topics=[AddPartitionsToTxnTopic(name="out", partitions=[0]),
                                                  AddPartitionsToTxnTopic(name="other", partitions=[1])]),
            AddPartitionsToTxnTransaction(transactional_id="t", producer_id=pid, producer_epoch=epoch - 1,
                                          verify_only=False,
                                          topics=[AddPartitionsToTxnTopic(name="out", partitions=[1])])]))
        assert [(r.transactional_id, [(t.name, p.partition_index, p.partition_error_code) for t in r.topic_results
                                      for p in t.results_by_partition]) for r in batch.results_by_transaction] == [
            ("t", [("out", 0, 0), ("other", 1, ErrorCode.TRANSACTION_ABORTABLE)]),
            ("t", [("out", 1, ErrorCode.PRODUCER_FENCED)])]
        offsets = c.call(25, 3, AddOffsetsToTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=epoch,
                                                       group_id="g"))
        assert offsets.error_code == 0
        assert c.call(26, 1, EndTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=epoch - 1,
                                           committed=True)).error_code == ErrorCode.INVALID_PRODUCER_EPOCH
        assert c.call(26, 3, EndTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=epoch,
                                           committed=True)).error_code == 0
        # PrepareCommit written: a retry answers CONCURRENT_TRANSACTIONS until the markers and
        # CompleteCommit are written, then NONE; the opposite decision is INVALID_TXN_STATE
        deadline = time.monotonic() + 30
        while (retried := c.call(26, 3, EndTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=epoch,
                                                      committed=True)).error_code) != 0:
            assert retried == ErrorCode.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline, retried
            time.sleep(0.05)
        assert c.call(26, 3, EndTxnRequest(transactional_id="t", producer_id=pid, producer_epoch=epoch,
                                           committed=False)).error_code == ErrorCode.INVALID_TXN_STATE
        assert init(c, "t") == (0, pid, epoch + 1)


def test_the_coordinator_reads_its_state_back_after_a_kill(broker: BrokerProcess) -> None:
    """InitProducerId after a kill -9 and restart bumps the epoch the log stored, for the same
    producer id; an id with an open transaction is still in it (fenced, not forgotten)."""
    with RawConnection(broker.port, "raw-txn") as c:
        _, pid, _ = init_when_ready(c, "kept")
        assert init(c, "kept") == (0, pid, 1)
        _, open_pid, _ = init_when_ready(c, "open")
        auto_create(c, "out")
        assert add_partitions(c, 3, "open", open_pid, 0, {"out": [0]}) == {("out", 0): 0}
    broker.kill()
    broker.start()
    with RawConnection(broker.port, "raw-txn") as c:
        assert init_when_ready(c, "kept") == (0, pid, 2)
        assert init_when_ready(c, "open")[0] == ErrorCode.CONCURRENT_TRANSACTIONS  # Ongoing: fenced, aborting
        assert add_partitions(c, 3, "open", open_pid, 0, {"out": [0]}) == {("out", 0): ErrorCode.PRODUCER_FENCED}
        # the abort's markers are written: the next InitProducerId gets the epoch after the fence's
        deadline = time.monotonic() + 30
        while (answer := init(c, "open"))[0] == ErrorCode.CONCURRENT_TRANSACTIONS and time.monotonic() < deadline:
            time.sleep(0.05)
        assert answer == (0, open_pid, 2)
        _, fresh, _ = init_when_ready(c, "fresh")
        assert fresh not in (pid, open_pid)
