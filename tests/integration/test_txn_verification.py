"""KIP-890 part 1 on a real `odradek serve` (issue #22): a transactional Produce to a partition its
producer never added to the transaction is refused by the partition leader after it asked the
transaction coordinator (AddPartitionsToTxn v5, verify_only, over the broker's own listener);
the same produce after AddPartitionsToTxn is appended; a fenced epoch, an unknown transactional
id and a non-transactional batch inside an open transaction get Kafka 3.9's answers; a
TxnOffsetCommit for a group the transaction never added is refused likewise; and with
transaction.partition.verification.enable=false the unverified batch is appended, as Kafka does.

Raw requests (tests/txn_raw.py builds the batches) so the test, not a client, decides what is
sent; confluent-kafka's commit through the verification is in tests/integration/test_transactions.py
and aiokafka's / kafka-python's in tests/integration/test_python_transactions.py."""

from __future__ import annotations

import time
from pathlib import Path

from protocol.errors import ErrorCode
from protocol.messages import AddOffsetsToTxnRequest, FindCoordinatorRequest, ProduceRequest
from protocol.messages import produce_request as pr
from protocol.records import Record, build_batch
from tests.broker_process import BrokerProcess
from tests.integration.test_transactions import SINGLE_BROKER_TXN, broker
from tests.raw_client import RawConnection
from tests.txn_raw import NO_VERIFICATION, create_topic, fetch_offsets, txn_offset_commit
from tests.txn_requests import add_partitions, end_offsets, init, init_when_ready

TOPIC = "verified"
__all__ = ["broker"]  # the fixture: one broker with transaction.state.log.min.isr=1


def produce(conn: RawConnection, tid: str | None, pid: int, epoch: int, partition: int, seq: int, *,
            version: int = 9, transactional: bool = True) -> tuple[int, int, str | None]:
    """(error, base offset, error message) of one batch of two records."""
    batch = build_batch([Record(0, i, i, b"k", f"v{seq + i}".encode(), []) for i in range(2)],
                        base_timestamp=int(time.time() * 1000), producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, is_transactional=transactional)
    resp = conn.call(0, version, ProduceRequest(transactional_id=tid, acks=-1, timeout_ms=10000, topic_data=[
        pr.TopicProduceData(name=TOPIC, partition_data=[pr.PartitionProduceData(index=partition, records=batch)])]))
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset, p.error_message


def test_produce_to_a_partition_not_in_the_transaction_is_refused(broker: BrokerProcess) -> None:
    with RawConnection(broker.port, "kip890") as conn:
        create_topic(conn, TOPIC, 3)
        error, pid, epoch = init_when_ready(conn, "v-txn")
        assert (error, epoch) == (0, 0)
        # nothing added: the coordinator says the partition is not in the transaction
        assert produce(conn, "v-txn", pid, epoch, 0, 0) == (
            ErrorCode.INVALID_TXN_STATE, -1, "Partition was not added to the transaction")
        # v11 producers know TRANSACTION_ABORTABLE and get it as the coordinator said it
        assert produce(conn, "v-txn", pid, epoch, 0, 0, version=11)[:2] == (ErrorCode.TRANSACTION_ABORTABLE, -1)
        assert end_offsets(conn, TOPIC, [0], 0) == [0], "a refused batch must not be appended"
        # added to the transaction: the same batch is appended, and the next without a question
        assert add_partitions(conn, 3, "v-txn", pid, epoch, {TOPIC: [0]}) == {(TOPIC, 0): 0}
        assert produce(conn, "v-txn", pid, epoch, 0, 0)[:2] == (0, 0)
        assert produce(conn, "v-txn", pid, epoch, 0, 2)[:2] == (0, 2)
        # a partition of the same transaction that was not added is still refused
        assert produce(conn, "v-txn", pid, epoch, 1, 0)[0] == ErrorCode.INVALID_TXN_STATE
        # a non-transactional batch of the producer inside its open transaction
        assert produce(conn, "v-txn", pid, epoch, 0, 4, transactional=False)[:2] == (ErrorCode.INVALID_TXN_STATE, -1)
        # an unknown transactional id: the coordinator's INVALID_PRODUCER_ID_MAPPING as it is
        assert produce(conn, "v-nobody", pid, epoch, 2, 0)[:2] == (ErrorCode.INVALID_PRODUCER_ID_MAPPING, -1)
        assert end_offsets(conn, TOPIC, [0, 1, 2], 0) == [4, 0, 0]


def test_a_fenced_epoch_is_refused(broker: BrokerProcess) -> None:
    """A second InitProducerId bumps the epoch (aborting the open transaction): the old epoch's
    first produce to a new partition is INVALID_PRODUCER_EPOCH (the coordinator's PRODUCER_FENCED
    as producers expect it), and so is its produce to the partition it had written to (the
    partition's producer state saw the abort marker of the new epoch)."""
    with RawConnection(broker.port, "kip890-fence") as conn:
        create_topic(conn, TOPIC, 3)
        error, pid, epoch = init_when_ready(conn, "f-txn")
        assert error == 0
        assert add_partitions(conn, 3, "f-txn", pid, epoch, {TOPIC: [0]}) == {(TOPIC, 0): 0}
        assert produce(conn, "f-txn", pid, epoch, 0, 0)[0] == 0
        deadline = time.monotonic() + 30
        while (answer := init(conn, "f-txn"))[0] == ErrorCode.CONCURRENT_TRANSACTIONS:
            assert time.monotonic() < deadline, "the fencing abort did not complete"
            time.sleep(0.05)
        assert answer[0] == 0 and answer[2] > epoch
        assert produce(conn, "f-txn", pid, epoch, 1, 0)[:2] == (ErrorCode.INVALID_PRODUCER_EPOCH, -1)
        assert produce(conn, "f-txn", pid, epoch, 0, 2)[:2] == (ErrorCode.INVALID_PRODUCER_EPOCH, -1)
        assert end_offsets(conn, TOPIC, [1], 0) == [0]


def test_verification_can_be_turned_off(tmp_path: Path) -> None:
    """transaction.partition.verification.enable=false: the unverified batch is appended (the
    setting is what the partition-side tests and the differential corpus rely on)."""
    b = BrokerProcess(tmp_path / "data", overrides=[*SINGLE_BROKER_TXN, NO_VERIFICATION]).start()
    try:
        with RawConnection(b.port, "kip890-off") as conn:
            create_topic(conn, TOPIC, 1)
            error, pid, epoch = init_when_ready(conn, "o-txn")
            assert error == 0
            assert produce(conn, "o-txn", pid, epoch, 0, 0)[:2] == (0, 0)
    finally:
        b.stop()


def test_txn_offset_commit_to_a_group_not_in_the_transaction_is_refused(broker: BrokerProcess) -> None:
    """TxnOffsetCommit is verified too (the group's `__consumer_offsets` partition): refused
    until AddOffsetsToTxn added the group, INVALID_TXN_STATE (v3) / TRANSACTION_ABORTABLE (v4),
    nothing pending; then accepted, and the next commit of the transaction without a question;
    a fenced epoch INVALID_PRODUCER_EPOCH."""
    group = "v-group"
    offsets = {(TOPIC, 0): 5}
    with RawConnection(broker.port, "kip890-offsets") as conn:
        create_topic(conn, TOPIC, 1)
        deadline = time.monotonic() + 30
        while conn.call(10, 3, FindCoordinatorRequest(key=group, key_type=0)).error_code != 0:
            assert time.monotonic() < deadline, "no group coordinator"
            time.sleep(0.05)
        error, pid, epoch = init_when_ready(conn, "o-txn")
        assert error == 0

        def commit(version: int, producer_epoch: int = epoch) -> int:
            return txn_offset_commit(conn, group, pid, producer_epoch, offsets, version=version,
                                     transactional_id="o-txn")[(TOPIC, 0)]

        assert commit(3) == ErrorCode.INVALID_TXN_STATE
        assert commit(4) == ErrorCode.TRANSACTION_ABORTABLE
        assert fetch_offsets(conn, group, [(TOPIC, 0)], require_stable=True) == {(TOPIC, 0): (-1, 0)}
        added = conn.call(25, 3, AddOffsetsToTxnRequest(transactional_id="o-txn", producer_id=pid,
                                                        producer_epoch=epoch, group_id=group))
        assert added.error_code == 0
        assert commit(3) == 0
        assert commit(3) == 0
        # fenced: a second InitProducerId aborts the transaction and bumps the epoch
        while (answer := init(conn, "o-txn"))[0] == ErrorCode.CONCURRENT_TRANSACTIONS:
            assert time.monotonic() < deadline + 30, "the fencing abort did not complete"
            time.sleep(0.05)
        assert answer[0] == 0 and answer[2] > epoch
        assert commit(3) == ErrorCode.INVALID_PRODUCER_EPOCH
