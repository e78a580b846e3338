"""TxnTransitMetadata -> `__transaction_state` value -> TransactionMetadata, as Kafka 3.9's
TransactionLog.valueToBytes / readTxnRecordValue, checked against the bytes Kafka 3.9.2 itself
wrote for the same records (tests/unit/protocol/test_coordinator_records.py, from
scripts/TransactionLogGolden.java)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.txn.metadata import (
    IllegalStateError,
    TransactionMetadata,
    TransactionState,
    TxnTransitMetadata,
)
from broker.txn.transaction_log import (
    from_log_value,
    read_txn_record_value,
    to_log_value,
    value_to_bytes,
)
from protocol.coordinator import TransactionLogValue
from protocol.coordinator_records import UnknownVersionError, transaction_log_value
from protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from tests.unit.protocol.test_coordinator_records import (
    KAFKA_EMPTY_V0,
    KAFKA_EMPTY_V1,
    KAFKA_ONGOING_V0,
    KAFKA_ONGOING_V1,
    LAST_UPDATE,
    START,
)

S = TransactionState


def transit(
    state: TransactionState,
    partitions: frozenset[tuple[str, int]] = frozenset(),
    *,
    epoch: int = 3,
    start: int = START,
    last_update: int = LAST_UPDATE,
) -> TxnTransitMetadata:
    return TxnTransitMetadata(
        producer_id=1000,
        last_producer_id=999,
        producer_epoch=epoch,
        last_producer_epoch=2,
        txn_timeout_ms=60_000,
        txn_state=state,
        topic_partitions=partitions,
        txn_start_timestamp=start,
        txn_last_update_timestamp=last_update,
    )


ONGOING_PARTITIONS = frozenset({("t", 0), ("t", 2), ("ab", 7)})


@pytest.mark.parametrize("hex_value", [KAFKA_ONGOING_V0, KAFKA_ONGOING_V1])
def test_reads_kafkas_ongoing_record(hex_value: str) -> None:
    md = read_txn_record_value("tx", bytes.fromhex(hex_value))
    assert md == TransactionMetadata(
        "tx",
        producer_id=1000,
        producer_epoch=3,
        txn_timeout_ms=60_000,
        state=S.ONGOING,
        topic_partitions=set(ONGOING_PARTITIONS),
        txn_start_timestamp=START,
        txn_last_update_timestamp=LAST_UPDATE,
    )
    assert md is not None
    # not in the record: a loaded id knows nothing of a previous producer, and has no transition
    assert (md.last_producer_id, md.last_producer_epoch) == (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
    assert md.pending_state is None and not md.has_failed_epoch_fence


@pytest.mark.parametrize("hex_value", [KAFKA_EMPTY_V0, KAFKA_EMPTY_V1])
def test_reads_kafkas_empty_record(hex_value: str) -> None:
    md = read_txn_record_value("tx", bytes.fromhex(hex_value))
    assert md is not None
    assert md.state == S.EMPTY and md.topic_partitions == set()
    assert (md.producer_id, md.producer_epoch, md.txn_timeout_ms) == (1000, 4, 60_000)
    assert md.txn_start_timestamp == -1
    assert md.txn_last_update_timestamp == 1_700_000_000_200


def test_writes_an_empty_transaction_as_kafka_does() -> None:
    empty = transit(S.EMPTY, epoch=4, start=-1, last_update=1_700_000_000_200)
    assert value_to_bytes(empty).hex() == KAFKA_EMPTY_V0  # version 0: what Kafka 3.9 writes
    assert value_to_bytes(empty, version=1).hex() == KAFKA_EMPTY_V1
    assert to_log_value(empty).transaction_partitions is None  # null, not []


def test_writes_partitions_grouped_per_topic() -> None:
    ongoing = transit(S.ONGOING, ONGOING_PARTITIONS)
    value = to_log_value(ongoing)
    assert [(p.topic, p.partition_ids) for p in value.transaction_partitions] == [
        ("ab", [7]),
        ("t", [0, 2]),
    ]
    assert value.transaction_status == 1
    # Kafka's own bytes list "t" first (a Scala hash map's order); the same record otherwise
    kafka = read_txn_record_value("tx", bytes.fromhex(KAFKA_ONGOING_V0))
    assert read_txn_record_value("tx", value_to_bytes(ongoing)) == kafka
    reordered = TransactionLogValue(
        producer_id=1000,
        producer_epoch=3,
        transaction_timeout_ms=60_000,
        transaction_status=1,
        transaction_partitions=[value.transaction_partitions[1], value.transaction_partitions[0]],
        transaction_last_update_timestamp_ms=LAST_UPDATE,
        transaction_start_timestamp_ms=START,
    )
    assert transaction_log_value(reordered).hex() == KAFKA_ONGOING_V0


def test_empty_with_partitions_is_refused() -> None:
    with pytest.raises(IllegalStateError, match="not expected to have any partitions"):
        value_to_bytes(transit(S.EMPTY, frozenset({("t", 0)})))


def test_partitions_of_an_empty_record_are_ignored() -> None:
    """readTxnRecordValue adds partitions only when the state is not Empty."""
    value = to_log_value(transit(S.ONGOING, ONGOING_PARTITIONS))
    value.transaction_status = 0
    md = from_log_value("tx", value)
    assert md.state == S.EMPTY and md.topic_partitions == set()


def test_tombstone_unknown_state_and_unknown_version() -> None:
    assert read_txn_record_value("tx", None) is None
    bad_state = bytearray(value_to_bytes(transit(S.ONGOING, ONGOING_PARTITIONS)))
    bad_state[2 + 8 + 2 + 4] = 9  # the status byte after version, id, epoch, timeout
    with pytest.raises(IllegalStateError, match="Unknown transaction state id 9"):
        read_txn_record_value("tx", bytes(bad_state))
    with pytest.raises(UnknownVersionError):
        read_txn_record_value("tx", b"\x00\x02" + bytes.fromhex(KAFKA_EMPTY_V0)[2:])


@pytest.mark.parametrize("state", [s for s in S if s != S.EMPTY])
def test_every_state_round_trips_by_its_id(state: TransactionState) -> None:
    data = value_to_bytes(transit(state, ONGOING_PARTITIONS))
    assert data[2 + 8 + 2 + 4] == state.value
    md = read_txn_record_value("tx", data)
    assert md is not None and md.state == state
    assert md.topic_partitions == ONGOING_PARTITIONS


topic_partitions = st.frozensets(
    st.tuples(st.text(min_size=1, max_size=5), st.integers(0, 2**31 - 1)), max_size=8
)


@given(
    state=st.sampled_from(list(S)),
    partitions=topic_partitions,
    producer_id=st.integers(0, 2**63 - 1),
    epoch=st.integers(0, 32767),
    timeout=st.integers(1, 2**31 - 1),
    start=st.integers(-1, 2**62),
    last_update=st.integers(0, 2**62),
    version=st.sampled_from([0, 1]),
)
def test_round_trip(
    state: TransactionState,
    partitions: frozenset[tuple[str, int]],
    producer_id: int,
    epoch: int,
    timeout: int,
    start: int,
    last_update: int,
    version: int,
) -> None:
    if state == S.EMPTY:
        partitions = frozenset()
    written = TxnTransitMetadata(
        producer_id, 5, epoch, 4, timeout, state, partitions, start, last_update
    )
    md = read_txn_record_value("id", value_to_bytes(written, version))
    assert md is not None
    assert (md.producer_id, md.producer_epoch, md.txn_timeout_ms, md.state) == (
        producer_id,
        epoch,
        timeout,
        state,
    )
    assert md.topic_partitions == partitions
    assert (md.txn_start_timestamp, md.txn_last_update_timestamp) == (start, last_update)
    # a value without partitions is null only for Empty
    assert (to_log_value(written).transaction_partitions is None) == (state == S.EMPTY)
