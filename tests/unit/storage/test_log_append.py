"""storage.log.Log appends: offset assignment in place, validation with Kafka's errors,
LogAppendTime, compacted-topic keys, timestamp bounds, recompression, follower appends."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from protocol.records import (
    LOG_APPEND_TIME,
    Record,
    build_batch,
    build_control_batch,
    decode_records,
    read_header,
    validate_batch,
)
from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    OffsetsOutOfOrderError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    RecordValidationError,
    UnexpectedAppendOffsetError,
)
from storage.log import AppendOrigin, Log
from tests.unit.storage.helpers import T0, Clock, client_batch, log_bytes, offset_batch


def open_log(tmp_path: Path, **cfg: object) -> Log:
    return Log.open(tmp_path / "t-0", LogConfig().overrides(**cfg), now=Clock())


def test_offsets_and_epoch_assigned_in_place(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    try:
        first = client_batch(3)
        info = log.append_as_leader(first, 7, T0)
        assert (info.first_offset, info.last_offset, info.record_count, info.valid_bytes) == (0, 2, 3, len(first))
        assert (info.max_timestamp, info.offset_of_max_timestamp, info.log_append_time) == (T0 + 2, 2, -1)
        two = client_batch(2) + client_batch(4, base_timestamp=T0 + 100)
        info = log.append_as_leader(two, 7, T0)
        assert (info.first_offset, info.last_offset, info.batch_count, info.record_count) == (3, 8, 2, 6)
        assert (info.max_timestamp, info.offset_of_max_timestamp) == (T0 + 103, 8)
        h = read_header(first)
        assert (h.base_offset, h.partition_leader_epoch) == (0, 7)
        validate_batch(first)  # still valid: CRC does not cover the rewritten fields
        assert log_bytes(log) == bytes(first) + bytes(two)
        assert log.log_end_offset == 9
        assert log.leader_epoch_cache is not None
        assert [tuple(e) for e in log.leader_epoch_cache.epoch_entries()] == [(7, 0)]
        log.append_as_leader(client_batch(1), 8, T0)
        assert [tuple(e) for e in log.leader_epoch_cache.epoch_entries()] == [(7, 0), (8, 9)]
        assert log.epoch_for_offset(5) == 7 and log.epoch_for_offset(9) == 8
    finally:
        log.close()


def test_readonly_buffer_and_trailing_partial_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    try:
        whole = bytes(client_batch(2))
        info = log.append_as_leader(whole + whole[:30], 0, T0)  # bytes: copied once
        assert (info.last_offset, info.valid_bytes) == (1, len(whole))
        assert read_header(whole).base_offset == 0  # caller's bytes untouched
        info = log.append_as_leader(b"", 0, T0)
        assert (info.first_offset, info.valid_bytes, info.batch_count) == (-1, 0, 0)
        assert log.log_end_offset == 2
    finally:
        log.close()


def _corrupt(batch: bytearray, pos: int) -> bytearray:
    batch[pos] ^= 0xFF
    return batch


@pytest.mark.parametrize(
    ("make", "error", "code"),
    [
        (lambda: _corrupt(client_batch(2), 70), CorruptRecordError, 2),  # record byte: CRC
        (lambda: _corrupt(client_batch(2), 17), CorruptRecordError, 2),  # the CRC itself
        (lambda: _with(client_batch(2), 8, ">i", 10), CorruptRecordError, 2),  # length < minimum
        (lambda: _with(client_batch(2), 16, ">b", 3), CorruptRecordError, 2),  # magic 3
        (lambda: _with(client_batch(2), 16, ">b", 1), InvalidRecordError, 87),  # magic 1
        (lambda: _with(client_batch(2), 0, ">q", 5), InvalidRecordError, 87),  # base offset != 0
        (lambda: _rebuilt(last_offset_delta=5), InvalidRecordError, 87),  # count vs range
        (lambda: bytearray(build_control_batch(True, 0, 1, 0)), InvalidRecordError, 87),
        (lambda: bytearray(build_batch([Record(0, 0, 0, None, b"v")], producer_id=9, base_sequence=-1)), InvalidRecordError, 87),
        (lambda: client_batch(50, value_size=100), RecordTooLargeError, 10),
    ],
)
def test_leader_validation_errors(tmp_path: Path, make, error, code) -> None:  # type: ignore[no-untyped-def]
    log = open_log(tmp_path, max_message_bytes=4000)
    try:
        with pytest.raises(error) as e:
            log.append_as_leader(make(), 0, T0)
        assert e.value.code == code
        assert log.log_end_offset == 0 and log.active_segment.size == 0
    finally:
        log.close()


def _with(batch: bytearray, pos: int, fmt: str, value: int) -> bytearray:
    struct.pack_into(fmt, batch, pos, value)
    return batch


def _rebuilt(**kw: int) -> bytearray:
    return bytearray(build_batch([Record(0, 0, 0, None, b"v")], base_timestamp=T0, **kw))


def test_coordinator_may_write_control_batches(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    try:
        info = log.append_as_leader(bytearray(build_control_batch(False, 3, 1, 0, timestamp=T0)), 2, T0, origin=AppendOrigin.COORDINATOR)
        assert info.last_offset == 0
    finally:
        log.close()


def test_batch_larger_than_segment_bytes(tmp_path: Path) -> None:
    log = open_log(tmp_path, segment_bytes=500)
    try:
        with pytest.raises(RecordBatchTooLargeError) as e:
            log.append_as_leader(client_batch(10, value_size=100), 0, T0)
        assert e.value.code == 18
    finally:
        log.close()


def test_log_append_time(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_type="LogAppendTime")
    try:
        for codec in (0, 1):
            buf = client_batch(3, base_timestamp=T0 - 5000, compression=codec)
            info = log.append_as_leader(buf, 0, T0 + 42)
            assert info.log_append_time == T0 + 42 == info.max_timestamp
            h = validate_batch(buf)  # CRC recomputed
            assert h.timestamp_type == LOG_APPEND_TIME and h.max_timestamp == T0 + 42
            _h, recs = decode_records(buf)
            assert all(r.timestamp == T0 + 42 for r in recs)
        r = log.offset_for_timestamp(T0 + 42)
        assert r is not None and r.offset == 0
    finally:
        log.close()


NO_KEY = "Compacted topic cannot accept message without key in topic partition t-0"
LONG_MAX = 2**63 - 1


def _records_batch(recs: list[Record], **kw: object) -> bytearray:
    return bytearray(build_batch(recs, **kw))  # type: ignore[arg-type]


def _refused(log: Log, buf: bytearray, now: int = T0) -> RecordValidationError:
    """The RecordValidationError the append raises; nothing of the batch is written."""
    end = log.log_end_offset
    size = log.active_segment.size
    with pytest.raises(RecordValidationError) as e:
        log.append_as_leader(buf, 0, now)
    assert (log.log_end_offset, log.active_segment.size) == (end, size)
    return e.value


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_compacted_topic_lists_every_record_without_key(tmp_path: Path, codec: int) -> None:
    """Kafka's validateKey on every record; processRecordErrors: INVALID_RECORD, the first three
    RecordErrors in the message, all of them in record_errors (KIP-467)."""
    log = open_log(tmp_path, cleanup_policy=("compact", "delete"))
    try:
        keys = [b"a", None, b"c", None, None, b"f", None]
        buf = _records_batch([Record(0, i, i, k, b"v%d" % i) for i, k in enumerate(keys)], base_timestamp=T0,
                             compression=codec)
        e = _refused(log, buf)
        assert e.code == 87 and isinstance(e.invalid, InvalidRecordError)
        assert e.record_errors == [(1, NO_KEY), (3, NO_KEY), (4, NO_KEY), (6, NO_KEY)]
        assert e.message == (
            "One or more records have been rejected due to 4 record errors in total, and only showing the "
            f"first three errors at most: [RecordError(batchIndex=1, message='{NO_KEY}'), "
            f"RecordError(batchIndex=3, message='{NO_KEY}'), RecordError(batchIndex=4, message='{NO_KEY}')]"
        )
        info = log.append_as_leader(client_batch(2, key=b"k", compression=codec), 0, T0)
        assert info.last_offset == 1
        e = _refused(log, client_batch(1, compression=codec))  # a single record
        assert e.record_errors == [(0, NO_KEY)]
    finally:
        log.close()


def test_timestamp_bounds(tmp_path: Path) -> None:
    """validateTimestamp: CreateTime timestamps within [now - before.max.ms, now + after.max.ms]
    (KIP-937), every record checked; the offset in the message is the record's offset in the
    client's batch."""
    log = open_log(tmp_path, message_timestamp_before_max_ms=1000, message_timestamp_after_max_ms=10)
    try:
        window = f"The timestamp should be within [{T0 - 1000}, {T0 + 10}]"
        e = _refused(log, client_batch(1, base_timestamp=T0 - 1001))
        assert e.code == 32 and isinstance(e.invalid, InvalidTimestampError)
        assert e.message == "One or more records have been rejected due to invalid timestamp"
        assert e.record_errors == [(0, f"Timestamp {T0 - 1001} of message with offset 0 is out of range. {window}")]
        e = _refused(log, client_batch(3, base_timestamp=T0 + 9))  # the last one is T0 + 11
        assert e.record_errors == [(2, f"Timestamp {T0 + 11} of message with offset 2 is out of range. {window}")]
        # the header cannot tell: the base timestamp is in range, a later record is older
        recs = [Record(0, 0, 0, None, b"a"), Record(0, -1001, 1, None, b"b"), Record(0, -1000, 2, None, b"c")]
        e = _refused(log, _records_batch(recs, base_timestamp=T0, compression=3))
        assert e.record_errors == [(1, f"Timestamp {T0 - 1001} of message with offset 1 is out of range. {window}")]
        recs = [Record(0, 0, 0, None, b"a"), Record(0, 0, 1, None, b"b")]  # NO_TIMESTAMP: not checked
        log.append_as_leader(_records_batch(recs, base_timestamp=-1), 0, T0)
        log.append_as_leader(client_batch(2, base_timestamp=T0 - 1000), 0, T0)
        assert log.log_end_offset == 4
    finally:
        log.close()


@pytest.mark.parametrize("codec", [0, 4])
def test_keys_and_timestamps_together(tmp_path: Path, codec: int) -> None:
    """A record without key is reported for its key only (validateKey first); one timestamp
    error makes the partition's error INVALID_TIMESTAMP."""
    log = open_log(tmp_path, cleanup_policy=("compact",), message_timestamp_after_max_ms=0)
    try:
        recs = [Record(0, 0, 0, b"k", b"a"), Record(0, 5, 1, None, b"b"), Record(0, 5, 2, b"k", b"c"),
                Record(0, 0, 3, None, b"d")]
        e = _refused(log, _records_batch(recs, base_timestamp=T0, compression=codec))
        assert e.code == 32
        future = f"Timestamp {T0 + 5} of message with offset 2 is out of range. The timestamp should be within " \
                 f"[{-(LONG_MAX - T0)}, {T0}]"
        assert e.record_errors == [(1, NO_KEY), (2, future), (3, NO_KEY)]
    finally:
        log.close()


def test_timestamp_window_is_computed_in_java_longs(tmp_path: Path) -> None:
    """now + after.max.ms overflows a Java long in Kafka's message when after.max.ms is the
    default Long.MAX_VALUE; the message says what Kafka's says."""
    log = open_log(tmp_path, message_timestamp_before_max_ms=1000)
    try:
        e = _refused(log, client_batch(1, base_timestamp=T0 - 5000))
        wrapped = T0 + LONG_MAX - 2**64
        assert e.record_errors == [
            (0, f"Timestamp {T0 - 5000} of message with offset 0 is out of range. The timestamp should be "
                f"within [{T0 - 1000}, {wrapped}]")
        ]
    finally:
        log.close()


def test_timestamp_difference_max_ms_is_the_default_of_both_bounds(tmp_path: Path) -> None:
    log = open_log(tmp_path, message_timestamp_difference_max_ms=100)
    try:
        e = _refused(log, client_batch(2, base_timestamp=T0 + 100))  # T0 + 100 fine, T0 + 101 not
        assert e.record_errors == [
            (1, f"Timestamp {T0 + 101} of message with offset 1 is out of range. The timestamp should be "
                f"within [{T0 - 100}, {T0 + 100}]")
        ]
        log.append_as_leader(client_batch(1, base_timestamp=T0 - 100), 0, T0)
    finally:
        log.close()


@pytest.mark.parametrize(("codec", "kind"), [(0, "DefaultRecord"), (3, "PartialDefaultRecord")])
def test_producer_may_not_set_log_append_time(tmp_path: Path, codec: int, kind: str) -> None:
    """validateTimestamp's other branch: a LogAppendTime batch from a client is refused on a
    LogAppendTime topic (every record), and on a CreateTime topic when it has no timestamp;
    its records' timestamp is the batch's max timestamp. Kafka names the record by its
    iterator: the skip-key-value one for a compressed batch it keeps in place."""
    recs = [Record(0, 0, 0, b"key", b"value"), Record(0, 0, 1, None, b"vv")]
    lat = _records_batch(recs, base_timestamp=T0, max_timestamp=T0 + 3, timestamp_type=LOG_APPEND_TIME,
                         compression=codec)
    no_ts = _records_batch(recs, base_timestamp=-1, max_timestamp=-1, timestamp_type=LOG_APPEND_TIME,
                           compression=codec)
    tail = "Producer should not set timestamp type to LogAppendTime."
    log = open_log(tmp_path / "a", message_timestamp_type="LogAppendTime")
    try:
        e = _refused(log, bytearray(lat))
        assert e.code == 32
        assert e.record_errors == [
            (0, f"Invalid timestamp type in message {kind}(offset=0, timestamp={T0 + 3}, key=3 bytes, "
                f"value=5 bytes). {tail}"),
            (1, f"Invalid timestamp type in message {kind}(offset=1, timestamp={T0 + 3}, key=0 bytes, "
                f"value=2 bytes). {tail}"),
        ]
    finally:
        log.close()
    log = open_log(tmp_path / "b")
    try:
        e = _refused(log, bytearray(no_ts))
        assert [i for i, _ in e.record_errors] == [0, 1]
        assert e.record_errors[1][1] == (
            f"Invalid timestamp type in message {kind}(offset=1, timestamp=-1, key=0 bytes, value=2 bytes). {tail}")
        assert log.append_as_leader(bytearray(lat), 0, T0).last_offset == 1  # a timestamp in range: as Kafka
    finally:
        log.close()


def test_recompression_to_topic_codec(tmp_path: Path) -> None:
    log = open_log(tmp_path, compression_type="gzip")
    try:
        buf = client_batch(20, value_size=200, key=b"key")
        info = log.append_as_leader(buf, 4, T0)
        data = log_bytes(log)
        h, recs = decode_records(data)
        assert h.compression == 1 and len(data) < len(buf)
        assert (h.base_offset, h.last_offset, h.partition_leader_epoch, info.valid_bytes) == (0, 19, 4, len(data))
        assert [r.value for r in recs] == [r.value for r in decode_records(buf)[1]]
        log.append_as_leader(client_batch(2, compression=1), 4, T0)  # already gzip: kept as is
        assert log.log_end_offset == 22
    finally:
        log.close()


def test_follower_append(tmp_path: Path) -> None:
    log = open_log(tmp_path, max_message_bytes=100)
    try:
        b1 = bytearray(offset_batch(0, 5))
        struct.pack_into(">i", b1, 12, 3)  # leader epoch 3, outside the CRC
        info = log.append_as_follower(bytes(b1) + offset_batch(5, 5))  # larger than 100: fine
        assert (info.first_offset, info.last_offset, info.batch_count) == (0, 9, 2)
        info = log.append_as_follower(offset_batch(20, 2))  # a gap (compacted leader) is fine
        assert log.log_end_offset == 22
        with pytest.raises(UnexpectedAppendOffsetError):
            log.append_as_follower(offset_batch(21, 2))
        with pytest.raises(OffsetsOutOfOrderError):
            log.append_as_follower(offset_batch(30, 5) + offset_batch(32, 5))
        with pytest.raises(CorruptRecordError):
            log.append_as_follower(_corrupt(bytearray(offset_batch(40, 2)), 70))
        assert log.log_end_offset == 22
        assert log.leader_epoch_cache is not None
        assert [tuple(e) for e in log.leader_epoch_cache.epoch_entries()] == [(3, 0)]
    finally:
        log.close()
