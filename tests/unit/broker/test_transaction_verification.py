"""broker/transaction_verification.py and AddPartitionsToTxnManager's answers: which coordinator
errors a refused transactional produce answers with (Kafka 3.9's ReplicaManager
postVerificationCallback and AddPartitionsToTxnHandler), and which batches need verifying."""

from __future__ import annotations

from broker.add_partitions_to_txn_manager import _for_producer
from broker.transaction_verification import failure_for_produce, transactional_batch
from protocol.errors import ErrorCode
from protocol.records import Record, build_batch


def _batch(*, txn: bool) -> bytes:
    return build_batch([Record(0, 0, 0, b"k", b"v", [])], base_timestamp=0, producer_id=42, producer_epoch=3,
                       base_sequence=9, is_transactional=txn)


def test_transactional_batch_names_its_producer() -> None:
    assert transactional_batch(_batch(txn=True)) == (42, 3, 9)
    assert transactional_batch(_batch(txn=False)) is None
    assert transactional_batch(None) is None
    assert transactional_batch(b"\0" * 10) is None


def test_coordinator_errors_as_the_produce_answers_them() -> None:
    assert failure_for_produce(ErrorCode.INVALID_TXN_STATE) == (
        ErrorCode.INVALID_TXN_STATE, "Partition was not added to the transaction")
    for retriable in (ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.NETWORK_EXCEPTION,
                      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                      ErrorCode.NOT_COORDINATOR):
        error, message = failure_for_produce(retriable)
        assert error == ErrorCode.NOT_ENOUGH_REPLICAS
        assert message is not None and message.startswith("Unable to verify the partition has been added")
        assert message.endswith(ErrorCode(retriable).name)
    assert failure_for_produce(ErrorCode.INVALID_PRODUCER_EPOCH) == (ErrorCode.INVALID_PRODUCER_EPOCH, None)
    assert failure_for_produce(ErrorCode.TRANSACTION_ABORTABLE) == (ErrorCode.TRANSACTION_ABORTABLE, None)


def test_coordinator_partition_answers_for_the_produce_version() -> None:
    assert _for_producer(ErrorCode.PRODUCER_FENCED, False) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert _for_producer(ErrorCode.TRANSACTION_ABORTABLE, False) == ErrorCode.INVALID_TXN_STATE
    assert _for_producer(ErrorCode.TRANSACTION_ABORTABLE, True) == ErrorCode.TRANSACTION_ABORTABLE
    assert _for_producer(ErrorCode.INVALID_PRODUCER_ID_MAPPING, False) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
