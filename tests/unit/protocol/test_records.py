"""protocol.records: RecordBatch v2 codec.

Oracles: kafka-python 3.0.12's ``kafka.record`` (an independent implementation of the same
format), real client batches from the golden Produce frames, and hand-built malformed bytes.
"""

from __future__ import annotations

import mmap
import struct
import warnings
from pathlib import Path

import pytest
from crc32c import crc32c
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from protocol import compression
from protocol import records as R
from protocol.records import Record, RecordsError

with warnings.catch_warnings():
    # kafka-python 3.0.12 calls the deprecated importlib.resources.read_text at import time
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record import util as kutil
    from kafka.record.default_records import ControlRecord, DefaultRecordBatch
    from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

CODECS = [0, 1, 2, 3, 4]
GOLDEN = Path(__file__).parent / "golden"

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# ---------------------------------------------------------------------------------------------
# helpers and strategies

header_values = st.none() | st.binary(max_size=20)
headers_st = st.lists(st.tuples(st.text(max_size=8), header_values), max_size=3)
payload_st = st.none() | st.binary(max_size=60)


@st.composite
def record_lists(draw, max_size=12, attributes=True):
    n = draw(st.integers(0 if max_size == 0 else 1, max_size))
    first = draw(st.integers(0, 5))
    gaps = draw(st.lists(st.integers(1, 300), min_size=n, max_size=n))
    out = []
    od = first
    for i in range(n):
        if i:
            od += gaps[i]
        out.append(
            Record(
                attributes=draw(st.integers(-128, 127)) if attributes else 0,
                timestamp_delta=draw(
                    st.integers(-(2**40), 2**40) | st.integers(-100, 100) | st.just(0)
                ),
                offset_delta=od,
                key=draw(payload_st),
                value=draw(payload_st),
                headers=draw(headers_st),
            )
        )
    return out


def _records(n: int, *, value_size: int = 40, headers: bool = True) -> list[Record]:
    return [
        Record(
            timestamp_delta=i * 3,
            offset_delta=i,
            key=None if i % 3 == 0 else b"key-%d" % i,
            value=None if i % 5 == 4 else (b"value %d " % i * value_size)[:value_size],
            headers=[("h", b"hv-%d" % i), ("empty", b""), ("null", None)] if headers else [],
        )
        for i in range(n)
    ]


def _fix_crc(buf: bytearray, pos: int = 0) -> bytearray:
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    struct.pack_into(">I", buf, pos + 17, crc32c(bytes(buf[pos + 21 : pos + 12 + length])))
    return buf


def _patch(batch: bytes, fmt: str, offset: int, value: int, *, fix_crc: bool = True) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        _fix_crc(buf)
    return bytes(buf)


def _wrap(payload: bytes, count: int, *, codec: int = 0, last_offset_delta: int | None = None):
    """A batch around hand-made record bytes, with a correct length and CRC."""
    buf = bytearray(R.HEADER_SIZE) + payload
    lod = max(count - 1, 0) if last_offset_delta is None else last_offset_delta
    R.HEADER_STRUCT.pack_into(
        buf, 0, 0, len(buf) - 12, -1, 2, 0, codec, lod, 1000, 1000, -1, -1, -1, count
    )
    return bytes(_fix_crc(buf))


def _kp_batch(buf: bytes) -> DefaultRecordBatch:
    mr = MemoryRecords(buf)
    batch = mr.next_batch()
    assert isinstance(batch, DefaultRecordBatch)
    assert mr.next_batch() is None
    return batch


def _kp_view(batch) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


def _our_view(recs: list[Record]) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in recs]


def _assert_same_records(got: list[Record], want: list[Record]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g == w  # attributes, deltas, key, value, headers


# ---------------------------------------------------------------------------------------------
# layout constants


def test_header_offsets_match_layout():
    fields = ">q i i b I h i q q q h i i".split()
    fmt = fields[0]
    starts = [0]
    for f in fields[1:]:
        starts.append(struct.calcsize(fmt))
        fmt += f
    assert starts == [
        R.BASE_OFFSET,
        R.BATCH_LENGTH,
        R.PARTITION_LEADER_EPOCH,
        R.MAGIC,
        R.CRC,
        R.ATTRIBUTES,
        R.LAST_OFFSET_DELTA,
        R.BASE_TIMESTAMP,
        R.MAX_TIMESTAMP,
        R.PRODUCER_ID,
        R.PRODUCER_EPOCH,
        R.BASE_SEQUENCE,
        R.RECORDS_COUNT,
    ]
    assert struct.calcsize(fmt) == R.HEADER_SIZE == R.HEADER_STRUCT.size == 61
    assert R.MIN_BATCH_LENGTH == 49 and R.LOG_OVERHEAD == 12
    assert (R.COMPRESSION_MASK, R.TIMESTAMP_TYPE_MASK, R.TRANSACTIONAL_MASK) == (7, 8, 16)
    assert (R.CONTROL_MASK, R.DELETE_HORIZON_MASK) == (32, 64)
    # kafka-python's own offsets agree
    assert R.ATTRIBUTES == DefaultRecordBatch.ATTRIBUTES_OFFSET
    assert R.CRC == DefaultRecordBatch.CRC_OFFSET
    assert R.HEADER_STRUCT.format == DefaultRecordBatch.HEADER_STRUCT.format


def test_header_fields_and_properties():
    batch = R.build_batch(
        _records(3),
        base_offset=1000,
        compression=3,
        base_timestamp=1_700_000_000_000,
        producer_id=77,
        producer_epoch=5,
        base_sequence=INT32_MAX - 1,
        partition_leader_epoch=9,
        is_transactional=True,
    )
    h = R.read_header(batch)
    assert h.base_offset == 1000
    assert h.size_in_bytes == len(batch) == h.batch_length + 12
    assert (h.partition_leader_epoch, h.magic) == (9, 2)
    assert (h.compression, h.timestamp_type, h.is_transactional, h.is_control) == (
        3,
        0,
        True,
        False,
    )
    assert not h.has_delete_horizon and h.delete_horizon_ms is None
    assert (h.last_offset_delta, h.last_offset, h.next_offset) == (2, 1002, 1003)
    assert (h.base_timestamp, h.max_timestamp) == (1_700_000_000_000, 1_700_000_000_006)
    assert (h.producer_id, h.producer_epoch, h.has_producer_id) == (77, 5, True)
    assert h.base_sequence == INT32_MAX - 1
    assert h.last_sequence == 0  # wraps past int32 max, as Kafka's incrementSequence
    assert h.records_count == 3
    assert h.crc == R.compute_crc(batch)
    kp = _kp_batch(batch)
    assert (kp.base_offset, kp.leader_epoch, kp.crc, kp.attributes) == (
        h.base_offset,
        h.partition_leader_epoch,
        h.crc,
        h.attributes,
    )
    assert (kp.last_offset, kp.max_timestamp, kp.first_timestamp) == (
        h.last_offset,
        h.max_timestamp,
        h.base_timestamp,
    )
    assert kp.last_sequence == h.last_sequence


def test_read_header_needs_61_bytes_and_a_sane_position():
    batch = R.build_batch(_records(1), base_timestamp=0)
    assert R.read_header(b"\x00" * 5 + batch, 5) == R.read_header(batch)
    with pytest.raises(RecordsError, match="truncated batch header"):
        R.read_header(batch[:60])
    with pytest.raises(RecordsError):
        R.read_header(batch, -61)
    with pytest.raises(RecordsError):
        R.read_header(batch, len(batch) - 60)


# ---------------------------------------------------------------------------------------------
# varints

VARINT_CASES = [
    (0, "00"),
    (-1, "01"),
    (1, "02"),
    (63, "7e"),
    (-64, "7f"),
    (64, "8001"),
    (-65, "8101"),
    (300, "d804"),
    (INT32_MAX, "feffffff0f"),
    (INT32_MIN, "ffffffff0f"),
]


@pytest.mark.parametrize(("value", "hexed"), VARINT_CASES)
def test_varint_known_bytes(value, hexed):
    encoded = bytes.fromhex(hexed)
    assert R.encode_varint(value) == encoded
    assert R.decode_varint(encoded) == (value, len(encoded))
    assert R.decode_varint(b"\xaa" + encoded + b"\xbb", 1) == (value, len(encoded) + 1)
    assert R.size_of_varint(value) == len(encoded)
    assert R.encode_varlong(value) == encoded  # same bytes for values in int32 range
    assert R.decode_varlong(encoded) == (value, len(encoded))


@pytest.mark.parametrize(
    ("value", "hexed"),
    [
        (INT64_MAX, "feffffffffffffffff01"),
        (INT64_MIN, "ffffffffffffffffff01"),
        (2**31, "8080808010"),
    ],
)
def test_varlong_known_bytes(value, hexed):
    encoded = bytes.fromhex(hexed)
    assert R.encode_varlong(value) == encoded
    assert R.decode_varlong(encoded) == (value, len(encoded))
    assert R.size_of_varlong(value) == len(encoded)


@given(st.integers(INT32_MIN, INT32_MAX))
def test_varint_round_trip_and_kafka_python(value):
    encoded = R.encode_varint(value)
    assert R.decode_varint(encoded) == (value, len(encoded))
    out = bytearray()
    kutil.encode_varint(value, out.append)
    assert bytes(out) == encoded
    assert kutil.decode_varint(encoded, 0) == (value, len(encoded))
    assert R.size_of_varint(value) == len(encoded) <= 5


@given(st.integers(INT64_MIN, INT64_MAX))
def test_varlong_round_trip_and_kafka_python(value):
    encoded = R.encode_varlong(value)
    assert R.decode_varlong(encoded) == (value, len(encoded))
    out = bytearray()
    kutil.encode_varint(value, out.append)  # kafka-python's varint is 64-bit zigzag
    assert bytes(out) == encoded
    assert R.size_of_varlong(value) == kutil.size_of_varint(value) == len(encoded) <= 10


def test_varint_range_checks():
    for bad in (INT32_MAX + 1, INT32_MIN - 1):
        with pytest.raises(ValueError):
            R.encode_varint(bad)
    for bad in (INT64_MAX + 1, INT64_MIN - 1):
        with pytest.raises(ValueError):
            R.encode_varlong(bad)


def test_varint_malformed():
    with pytest.raises(RecordsError):
        R.decode_varint(b"")
    with pytest.raises(RecordsError):
        R.decode_varint(b"\x80\x80")
    with pytest.raises(RecordsError, match="longer than 5"):
        R.decode_varint(b"\xff\xff\xff\xff\xff\x01")
    with pytest.raises(RecordsError, match="longer than 10"):
        R.decode_varlong(b"\xff" * 10 + b"\x01")
    with pytest.raises(RecordsError):
        R.decode_varlong(b"\xff" * 9)
    # A 5-byte varint whose last byte carries bits beyond 32: Java drops them; so do we.
    assert R.decode_varint(b"\xff\xff\xff\xff\x7f") == (INT32_MIN, 5)
    # a value that needs 6 bytes is no int32
    with pytest.raises(RecordsError):
        R.decode_varint(R.encode_varlong(2**40))


# ---------------------------------------------------------------------------------------------
# round trips


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=record_lists(),
    base_offset=st.integers(0, 2**62),
    base_ts=st.integers(0, 2**50),
    producer=st.sampled_from([(-1, -1, -1), (0, 0, 0), (2**40, 3, 17), (5, 32767, INT32_MAX)]),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
    leader_epoch=st.integers(-1, 2**31 - 1),
)
def test_build_decode_round_trip(codec, recs, base_offset, base_ts, producer, flags, leader_epoch):
    transactional, control, delete_horizon = flags
    batch = R.build_batch(
        recs,
        base_offset=base_offset,
        compression=codec,
        base_timestamp=base_ts,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        partition_leader_epoch=leader_epoch,
        is_transactional=transactional,
        is_control=control,
        has_delete_horizon=delete_horizon,
    )
    assert R.verify_crc(batch)
    h = R.validate_batch(batch)
    assert list(R.iter_batches(batch)) == [(0, len(batch))]
    assert R.valid_prefix_bytes(batch) == len(batch)
    assert (h.compression, h.records_count, h.base_offset) == (codec, len(recs), base_offset)
    assert (h.is_transactional, h.is_control, h.has_delete_horizon) == flags
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == producer
    assert h.partition_leader_epoch == leader_epoch
    assert h.last_offset_delta == recs[-1].offset_delta
    assert h.max_timestamp == base_ts + max(r.timestamp_delta for r in recs)

    h2, got = R.decode_records(batch)
    assert h2 == h
    _assert_same_records(got, recs)
    for g in got:
        assert g.offset == base_offset + g.offset_delta
        assert g.timestamp == base_ts + g.timestamp_delta
    # re-encoding the decoded records reproduces the batch (deterministic codecs only: gzip too)
    again = R.build_batch(
        got,
        base_offset=base_offset,
        compression=codec,
        base_timestamp=base_ts,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
        partition_leader_epoch=leader_epoch,
        is_transactional=transactional,
        is_control=control,
        has_delete_horizon=delete_horizon,
    )
    assert again == batch


def test_batch_at_offset_inside_buffer_and_memoryview():
    batch = R.build_batch(_records(4), base_timestamp=5, compression=4)
    buf = b"junk" * 3 + batch + b"tail"
    for b in (buf, bytearray(buf), memoryview(buf)):
        h = R.validate_batch(b, 12)
        assert R.verify_crc(b, 12) and R.compute_crc(b, 12) == h.crc
        _assert_same_records(R.decode_records(b, 12)[1], _records(4))


def test_empty_batch():
    batch = R.build_batch([], base_offset=50, last_offset_delta=9, producer_id=3, producer_epoch=0)
    h = R.validate_batch(batch)
    assert (h.records_count, h.last_offset, h.base_timestamp, h.max_timestamp) == (0, 59, -1, -1)
    assert len(batch) == R.HEADER_SIZE
    assert R.decode_records(batch) == (h, [])
    assert list(_kp_batch(batch)) == []
    assert R.build_batch([]) == R.build_batch([], base_timestamp=-1)


def test_log_append_time_and_explicit_max_timestamp():
    recs = _records(5)
    batch = R.build_batch(
        recs, base_timestamp=1000, timestamp_type=R.LOG_APPEND_TIME, max_timestamp=99_999
    )
    h, got = R.decode_records(batch)
    assert (h.timestamp_type, h.max_timestamp) == (1, 99_999)
    assert {r.timestamp for r in got} == {99_999}
    kp = _kp_batch(batch)
    assert kp.timestamp_type == 1
    assert {r.timestamp for r in kp} == {99_999}


def test_delete_horizon():
    batch = R.build_batch(_records(2), base_timestamp=123_456, has_delete_horizon=True)
    h = R.read_header(batch)
    assert h.has_delete_horizon and h.delete_horizon_ms == 123_456
    assert h.attributes & R.DELETE_HORIZON_MASK


def test_compacted_batch_with_offset_gaps():
    recs = [Record(offset_delta=d, timestamp_delta=d, key=b"k%d" % d, value=b"v") for d in (2, 7)]
    batch = R.build_batch(recs, base_offset=100, base_timestamp=0, last_offset_delta=9)
    h, got = R.decode_records(batch)
    assert (h.records_count, h.last_offset_delta) == (2, 9)
    assert [r.offset for r in got] == [102, 107]
    assert [r.offset for r in _kp_batch(batch)] == [102, 107]


def test_header_keys_unicode_and_invalid_utf8_survive():
    recs = [Record(headers=[("ключ-🙂", b"v"), ("", None)], value=b"x")]
    batch = R.build_batch(recs, base_timestamp=0)
    _assert_same_records(R.decode_records(batch)[1], recs)
    assert _kp_view(_kp_batch(batch))[0][4] == recs[0].headers
    # a header key that is not UTF-8: decoded with surrogateescape, re-encoded byte for byte
    rec = b"\x00" + b"\x00\x00" + b"\x01\x01" + b"\x02" + b"\x04\xff\xfe" + b"\x01"
    raw = _wrap(R.encode_varint(len(rec)) + rec, 1)
    h, got = R.decode_records(raw)
    assert got[0].headers == [("\udcff\udcfe", None)]
    assert R.build_batch(got, base_timestamp=h.base_timestamp, max_timestamp=h.max_timestamp) == raw


def test_build_batch_argument_checks():
    with pytest.raises(ValueError, match="strictly increasing"):
        R.build_batch([Record(offset_delta=1), Record(offset_delta=1)], base_timestamp=0)
    with pytest.raises(ValueError, match="strictly increasing"):
        R.build_batch([Record(offset_delta=-1)], base_timestamp=0)
    with pytest.raises(ValueError, match="outside int32"):
        R.build_batch([Record(offset_delta=2**31)], base_timestamp=0)
    with pytest.raises(ValueError, match="outside int64"):
        R.build_batch([Record(timestamp_delta=2**63)], base_timestamp=0)
    with pytest.raises(ValueError, match="out of range"):
        R.build_batch(
            [Record()], base_timestamp=2**63 - 1, max_timestamp=None, producer_epoch=2**15
        )
    with pytest.raises(ValueError):
        R.build_batch([Record(offset_delta=5)], base_timestamp=0, last_offset_delta=4)
    with pytest.raises(ValueError):
        R.build_batch([Record()], base_timestamp=0, timestamp_type=2)
    with pytest.raises(RecordsError):
        R.build_batch([Record()], base_timestamp=0, compression=5)


def test_build_batch_default_timestamp_is_now():
    import time

    before = int(time.time() * 1000)
    h = R.read_header(R.build_batch([Record(value=b"x")]))
    assert before <= h.base_timestamp <= int(time.time() * 1000)


def test_encode_record_matches_kafka_python_size():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    for r in _records(6):
        encoded = R.encode_record(r)
        assert len(encoded) == DefaultRecordBatchBuilder.size_in_bytes(
            r.offset_delta, r.timestamp_delta, r.key, r.value, r.headers
        )


# ---------------------------------------------------------------------------------------------
# CRC


@pytest.mark.parametrize("codec", CODECS)
def test_every_single_bit_flip_after_crc_is_detected(codec):
    batch = R.build_batch(_records(3, value_size=12), compression=codec, base_timestamp=77)
    assert R.verify_crc(batch)
    buf = bytearray(batch)
    for i in range(R.ATTRIBUTES, len(buf)):
        for bit in range(8):
            buf[i] ^= 1 << bit
            assert not R.verify_crc(buf), (i, bit)
            buf[i] ^= 1 << bit
    with pytest.raises(RecordsError, match="crc"):
        R.validate_batch(
            _patch(batch, ">b", R.ATTRIBUTES + 1, batch[R.ATTRIBUTES + 1] ^ 1, fix_crc=False)
        )
    # the CRC does not cover base offset, leader epoch (nor magic, checked separately)
    for i in [*range(0, 8), *range(12, 16)]:
        for bit in range(8):
            buf[i] ^= 1 << bit
            assert R.verify_crc(buf), (i, bit)
            buf[i] ^= 1 << bit
    assert R.verify_crc(buf)


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=30, suppress_health_check=[HealthCheck.too_slow])
@given(recs=record_lists(max_size=5), data=st.data())
def test_random_bit_flip_is_detected(codec, recs, data):
    batch = bytearray(R.build_batch(recs, compression=codec, base_timestamp=1))
    i = data.draw(st.integers(R.ATTRIBUTES, len(batch) - 1))
    batch[i] ^= 1 << data.draw(st.integers(0, 7))
    assert not R.verify_crc(batch)
    with pytest.raises(RecordsError):
        R.decode_records(batch)
    assert R.valid_prefix_bytes(batch) == 0


def test_crc_is_crc32c_of_attributes_to_end():
    batch = R.build_batch(_records(2), base_timestamp=0)
    assert R.compute_crc(batch) == crc32c(batch[21:]) == struct.unpack(">I", batch[17:21])[0]
    assert DefaultRecordBatch(batch).validate_crc()


# ---------------------------------------------------------------------------------------------
# kafka-python as the oracle


def _kp_build(recs, codec, *, producer=(-1, -1, -1), transactional=False) -> bytes:
    b = MemoryRecordsBuilder(
        magic=2,
        compression_type=codec,
        batch_size=1 << 24,
        transactional=transactional,
        producer_id=producer[0],
        producer_epoch=producer[1],
        base_sequence=producer[2],
    )
    for ts, key, value, headers in recs:
        assert b.append(timestamp=ts, key=key, value=value, headers=headers) is not None
    b.close()
    return bytes(b.buffer())


kp_records = st.lists(
    st.tuples(st.integers(0, 2**45), payload_st, payload_st, headers_st),
    min_size=1,
    max_size=10,
)
kp_producers = st.sampled_from([(-1, -1, -1, False), (9, 1, 40, False), (9, 1, 0, True)])


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(recs=kp_records, producer=kp_producers)
def test_kafka_python_batches_decode(codec, recs, producer):
    batch = _kp_build(recs, codec, producer=producer[:3], transactional=producer[3])
    h, got = R.decode_records(batch)  # CRC checked
    assert h.compression in (codec, 0)  # kafka-python stores uncompressed when it is smaller
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == producer[:3]
    assert h.is_transactional == producer[3]
    assert _our_view(got) == _kp_view(_kp_batch(batch))
    assert [(r.timestamp, r.key, r.value, r.headers) for r in got] == [
        (ts, k, v, hs) for ts, k, v, hs in recs
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_compressed_batch_decodes(codec):
    recs = [
        (1_700_000_000_000 + i, b"k%d" % i, b"compressible value " * 20, [("h", b"v")])
        for i in range(50)
    ]
    batch = _kp_build(recs, codec, producer=(1234, 2, 100))
    h, got = R.decode_records(batch)
    assert h.compression == codec
    assert _our_view(got) == _kp_view(_kp_batch(batch))


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=40, suppress_health_check=[HealthCheck.too_slow])
@given(
    recs=record_lists(attributes=False),
    base_offset=st.integers(0, 2**50),
    base_ts=st.integers(0, 2**45),
    ts_type=st.sampled_from([0, 1]),
    transactional=st.booleans(),
)
def test_our_batches_decode_with_kafka_python(
    codec, recs, base_offset, base_ts, ts_type, transactional
):
    assume(all(base_ts + r.timestamp_delta >= 0 for r in recs))
    batch = R.build_batch(
        recs,
        base_offset=base_offset,
        compression=codec,
        base_timestamp=base_ts,
        producer_id=42 if transactional else -1,
        producer_epoch=0 if transactional else -1,
        base_sequence=7 if transactional else -1,
        is_transactional=transactional,
        timestamp_type=ts_type,
        max_timestamp=base_ts + 5 if ts_type else None,
    )
    kp = _kp_batch(batch)
    assert kp.validate_crc()
    assert (kp.compression_type, kp.timestamp_type, kp.is_transactional) == (
        codec,
        ts_type,
        transactional,
    )
    assert kp.base_offset == base_offset and kp.records_count == len(recs)
    assert _kp_view(kp) == _our_view(R.decode_records(batch)[1])


def test_uncompressed_batch_byte_identical_to_kafka_python():
    recs = [
        (
            1_600_000_000_000 + i * 7,
            None if i % 2 else b"k%d" % i,
            b"v" * i,
            [("a", b"1"), ("b", None)],
        )
        for i in range(20)
    ]
    theirs = _kp_build(recs, 0, producer=(5, 6, 7))
    ours = R.build_batch(
        [
            Record(timestamp_delta=ts - recs[0][0], offset_delta=i, key=k, value=v, headers=hs)
            for i, (ts, k, v, hs) in enumerate(recs)
        ],
        base_timestamp=recs[0][0],
        producer_id=5,
        producer_epoch=6,
        base_sequence=7,
        partition_leader_epoch=0,  # kafka-python writes 0 here
    )
    assert ours == theirs


def test_varint_size_boundaries_byte_identical_to_kafka_python():
    """Lengths and deltas around the 1- and 2-byte varint limits and the encoder's table."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    sizes = [0, 1, 63, 64, 127, 128, 1023, 1024, 8191, 8192, 20_000]
    recs = [
        Record(
            timestamp_delta=0 if i == 0 else size * 3 - 1,
            offset_delta=i if i < 4 else size,
            key=b"k" * size,
            value=None if i == 5 else b"v" * (size + 1),
            headers=[("h" * size, b"x" * size), ("n", None)],
        )
        for i, size in enumerate(sizes)
    ]
    base = 1_650_000_000_000
    kb = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, 1 << 26)
    for r in recs:
        kb.append(r.offset_delta, base + r.timestamp_delta, r.key, r.value, r.headers)
    theirs = bytes(kb.build())
    ours = R.build_batch(recs, base_timestamp=base, partition_leader_epoch=0)
    assert ours == theirs
    _assert_same_records(R.decode_records(ours)[1], recs)


# ---------------------------------------------------------------------------------------------
# real client batches (golden Produce frames captured from kafka-python and librdkafka)


def _find_batches(frame: bytes) -> list[int]:
    return [
        pos
        for pos in range(len(frame) - R.HEADER_SIZE + 1)
        if frame[pos + R.MAGIC] == 2 and R.verify_crc(frame, pos)
    ]


def test_golden_client_batches_decode():
    frames = sorted(GOLDEN.glob("*/*-Produce-v*.bin"))
    assert frames, f"no golden Produce frames under {GOLDEN}"
    seen = set()
    for path in frames:
        frame = path.read_bytes()
        positions = _find_batches(frame)
        assert len(positions) == 1, path
        pos = positions[0]
        h, got = R.decode_records(frame, pos)
        # records are the last field (then at most 3 tagged-field bytes in flexible versions)
        assert 0 <= len(frame) - (pos + h.size_in_bytes) <= 3, path
        assert [r.offset_delta for r in got] == list(range(h.records_count)), path
        assert got and got[0].key == b"key-0" and got[0].value.startswith(b"value-0"), path
        assert all(k == "h" for r in got for k, _ in r.headers), path
        seen.add((path.parent.name, h.compression))
    for client in {c for c, _ in seen}:
        assert {codec for c, codec in seen if c == client} == set(CODECS), client


# ---------------------------------------------------------------------------------------------
# malformed input


@pytest.mark.parametrize("codec", CODECS)
def test_truncated_at_every_length(codec):
    batch = R.build_batch(_records(4), compression=codec, base_timestamp=3)
    for cut in range(len(batch)):
        prefix = batch[:cut]
        with pytest.raises(RecordsError):
            R.validate_batch(prefix)
        with pytest.raises(RecordsError):
            R.decode_records(prefix, check_crc=False)
        assert not R.verify_crc(prefix)
        assert list(R.iter_batches(prefix)) == []
        assert R.valid_prefix_bytes(prefix) == 0


@pytest.mark.parametrize("codec", CODECS)
def test_batch_length_shorter_than_data(codec):
    batch = R.build_batch(_records(4), compression=codec, base_timestamp=3)
    for delta in (1, 5, 20):
        shorter = _patch(batch, ">i", R.BATCH_LENGTH, len(batch) - 12 - delta, fix_crc=False)
        with pytest.raises(RecordsError, match="crc"):
            R.validate_batch(shorter)
        # with a CRC that matches the shortened batch, decoding still fails cleanly
        fixed = bytes(_fix_crc(bytearray(shorter)))
        with pytest.raises(RecordsError):
            R.decode_records(fixed)


@pytest.mark.parametrize("length", [-(2**31), -1, 0, 1, 48])
def test_batch_length_below_minimum(length):
    batch = _patch(R.build_batch(_records(1), base_timestamp=0), ">i", R.BATCH_LENGTH, length)
    with pytest.raises(RecordsError, match="less than the minimum"):
        R.validate_batch(batch)
    with pytest.raises(RecordsError, match="less than the minimum"):
        list(R.iter_batches(batch))
    with pytest.raises(RecordsError):
        R.compute_crc(batch)
    assert not R.verify_crc(batch)
    # also when only the first 12 bytes of such a batch are there
    with pytest.raises(RecordsError, match="less than the minimum"):
        list(R.iter_batches(batch[:12]))


def test_batch_length_beyond_buffer():
    batch = _patch(R.build_batch(_records(1), base_timestamp=0), ">i", R.BATCH_LENGTH, 2**31 - 1)
    with pytest.raises(RecordsError, match="truncated"):
        R.validate_batch(batch)
    assert list(R.iter_batches(batch)) == []  # a partial batch at the end, as in a Fetch
    assert R.valid_prefix_bytes(batch) == 0


@pytest.mark.parametrize("magic", [-1, 0, 1, 3, 127])
def test_bad_magic(magic):
    batch = _patch(R.build_batch(_records(1), base_timestamp=0), ">b", R.MAGIC, magic)
    with pytest.raises(RecordsError, match="magic"):
        R.validate_batch(batch)
    with pytest.raises(RecordsError, match="magic"):
        R.decode_records(batch)
    with pytest.raises(RecordsError, match="magic"):
        list(R.iter_batches(batch))
    assert R.valid_prefix_bytes(batch) == 0


def test_bad_counts():
    batch = R.build_batch(_records(3), base_timestamp=0)
    with pytest.raises(RecordsError, match="negative record count"):
        R.validate_batch(_patch(batch, ">i", R.RECORDS_COUNT, -1))
    with pytest.raises(RecordsError, match="inconsistent"):
        R.validate_batch(_patch(batch, ">i", R.RECORDS_COUNT, 4))
    with pytest.raises(RecordsError, match="inconsistent"):
        R.validate_batch(_patch(batch, ">i", R.LAST_OFFSET_DELTA, -1))
    with pytest.raises(RecordsError, match="remain after"):
        R.decode_records(_patch(batch, ">i", R.RECORDS_COUNT, 2))
    more = _patch(_patch(batch, ">i", R.LAST_OFFSET_DELTA, 10), ">i", R.RECORDS_COUNT, 4)
    with pytest.raises(RecordsError):
        R.decode_records(more)
    huge = _patch(
        _patch(batch, ">i", R.LAST_OFFSET_DELTA, INT32_MAX - 1), ">i", R.RECORDS_COUNT, INT32_MAX
    )
    with pytest.raises(RecordsError, match="cannot fit"):
        R.decode_records(huge)


def _rec(body: bytes) -> bytes:
    return R.encode_varint(len(body)) + body


GOOD_BODY = b"\x00" + b"\x00" + b"\x00" + b"\x02k" + b"\x02v" + b"\x00"  # key b"k", value b"v"

MALFORMED_RECORDS = {
    "length beyond data": R.encode_varint(40) + GOOD_BODY,
    "length shorter than fields": R.encode_varint(len(GOOD_BODY) - 2) + GOOD_BODY,
    "negative length": R.encode_varint(-3) + GOOD_BODY,
    "key overruns record": _rec(b"\x00\x00\x00" + b"\x14k" + b"\x02v" + b"\x00"),
    "value overruns record": _rec(b"\x00\x00\x00" + b"\x02k" + b"\x7ev" + b"\x00"),
    "negative header count": _rec(b"\x00\x00\x00\x02k\x02v" + b"\x01"),
    "header count too large": _rec(b"\x00\x00\x00\x02k\x02v" + R.encode_varint(1000)),
    "negative header key length": _rec(b"\x00\x00\x00\x02k\x02v" + b"\x02" + b"\x01" + b"\x01"),
    "header value overruns": _rec(b"\x00\x00\x00\x02k\x02v" + b"\x02" + b"\x02h\x40x"),
    "varint too long": _rec(b"\x00" + b"\xff" * 11 + b"\x00\x02k\x02v\x00"),
    "offset delta varint too long": _rec(b"\x00\x00" + b"\xff" * 5 + b"\x01\x02k\x02v\x00"),
    "trailing bytes in record": _rec(GOOD_BODY + b"\x00"),
    "truncated varint at end": _rec(GOOD_BODY)[:-1] + b"\x80",
}


def test_good_body_is_good():
    _, got = R.decode_records(_wrap(_rec(GOOD_BODY), 1))
    assert got == [Record(key=b"k", value=b"v")]


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("name", sorted(MALFORMED_RECORDS))
def test_malformed_records(name, codec):
    payload = compression.compress(codec, MALFORMED_RECORDS[name])
    with pytest.raises(RecordsError):
        R.decode_records(_wrap(payload, 1, codec=codec))
    # the header-level checks do not look inside: the batch itself is well formed
    R.validate_batch(_wrap(payload, 1, codec=codec))


def test_header_count_is_bounded_by_the_record_size():
    body = b"\x00\x00\x00\x02k\x02v" + R.encode_varint(INT32_MAX) + b"\x00" * 40
    with pytest.raises(RecordsError, match="invalid number of record headers"):
        R.decode_records(_wrap(_rec(body), 1))


def test_negative_lengths_mean_null_like_java():
    body = b"\x00\x00\x00" + b"\x03" + b"\x05" + b"\x00"  # key length -2, value length -3
    _, got = R.decode_records(_wrap(_rec(body), 1))
    assert (got[0].key, got[0].value) == (None, None)


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_corrupt_compressed_payload(codec):
    batch = bytearray(R.build_batch(_records(20), compression=codec, base_timestamp=0))
    mid = (R.HEADER_SIZE + len(batch)) // 2
    batch[R.HEADER_SIZE + 4 : mid] = bytes(mid - R.HEADER_SIZE - 4)
    _fix_crc(batch)
    with pytest.raises(RecordsError):
        R.decode_records(batch)
    # garbage with a matching CRC
    garbage = _wrap(b"\x17" * 200, 5, codec=codec)
    with pytest.raises(RecordsError):
        R.decode_records(garbage)


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unknown_codec_in_attributes(codec):
    with pytest.raises(RecordsError, match="unknown compression codec"):
        R.decode_records(_wrap(_rec(GOOD_BODY), 1, codec=codec))


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_bomb_in_batch(codec):
    batch = _wrap(compression.compress(codec, bytes(8 << 20)), 1, codec=codec)
    with pytest.raises(RecordsError, match="more than"):
        R.decode_records(batch, max_uncompressed_size=1 << 20)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(garbage=st.binary(max_size=200), pos=st.integers(0, 10))
def test_garbage_never_raises_anything_else(garbage, pos):
    for fn in (R.validate_batch, R.decode_records):
        try:
            fn(garbage, pos)
        except RecordsError:
            pass
    try:
        list(R.iter_batches(garbage, pos))
    except RecordsError:
        pass
    assert R.verify_crc(garbage, pos) in (True, False)
    assert 0 <= R.valid_prefix_bytes(garbage, pos) <= max(0, len(garbage) - pos)


@pytest.mark.parametrize("codec", CODECS)
@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mutated_batches_with_fixed_crc(codec, data):
    """Mutations deep inside the records, made to pass the CRC: decoding either works or raises
    RecordsError -- no IndexError, struct.error, zlib.error, UnicodeDecodeError, no hang."""
    recs = data.draw(record_lists(max_size=6))
    batch = bytearray(R.build_batch(recs, compression=codec, base_timestamp=1))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(R.ATTRIBUTES, len(batch) - 1))
        batch[i] = data.draw(st.integers(0, 255))
    if data.draw(st.booleans()):
        del batch[data.draw(st.integers(R.HEADER_SIZE, len(batch))) :]
        struct.pack_into(">i", batch, R.BATCH_LENGTH, len(batch) - 12)
    _fix_crc(batch)
    try:
        R.decode_records(batch, max_uncompressed_size=1 << 20)
    except RecordsError:
        pass


# ---------------------------------------------------------------------------------------------
# iterating concatenated batches, recovery prefix


def _three_batches() -> tuple[bytes, list[int]]:
    batches = [
        R.build_batch(_records(3), base_offset=0, base_timestamp=0),
        R.build_batch(_records(5), base_offset=3, base_timestamp=0, compression=1),
        R.build_control_batch(True, 1, 7, 0, base_offset=8, timestamp=0),
    ]
    return b"".join(batches), [len(b) for b in batches]


def test_iter_batches():
    buf, sizes = _three_batches()
    expected = [(0, sizes[0]), (sizes[0], sizes[1]), (sizes[0] + sizes[1], sizes[2])]
    assert list(R.iter_batches(buf)) == expected
    assert list(R.iter_batches(memoryview(buf))) == expected
    assert list(R.iter_batches(buf, sizes[0])) == expected[1:]
    assert list(R.iter_batches(b"")) == []
    # a Fetch response cut at max bytes: the partial batch at the end is not yielded
    for cut in (1, 11, 12, 17, 40, sizes[2] - 1):
        assert list(R.iter_batches(buf[: len(buf) - cut])) == expected[:2]
    # kafka-python agrees on what is complete
    mr = MemoryRecords(buf[:-5])
    assert sum(1 for _ in mr) == 2
    # iterating is header-only: record contents are not looked at
    for pos, size in R.iter_batches(buf):
        h = R.validate_batch(buf, pos)
        assert h.size_in_bytes == size


def test_iter_batches_bad_length_in_the_middle():
    buf, sizes = _three_batches()
    bad = bytearray(buf)
    struct.pack_into(">i", bad, sizes[0] + R.BATCH_LENGTH, 10)
    it = R.iter_batches(bad)
    assert next(it) == (0, sizes[0])
    with pytest.raises(RecordsError):
        next(it)


def test_valid_prefix_bytes():
    buf, sizes = _three_batches()
    assert R.valid_prefix_bytes(buf) == len(buf)
    assert R.valid_prefix_bytes(buf + b"\x00" * 30) == len(buf)  # preallocated zeros
    assert R.valid_prefix_bytes(buf[:-1]) == sizes[0] + sizes[1]  # torn tail
    corrupt = bytearray(buf)
    corrupt[sizes[0] + 70] ^= 0x01  # inside the second batch
    assert R.valid_prefix_bytes(corrupt) == sizes[0]
    assert list(R.iter_batches(corrupt)) == list(R.iter_batches(buf))  # no CRC checks there
    assert R.valid_prefix_bytes(buf, sizes[0]) == sizes[1] + sizes[2]


# ---------------------------------------------------------------------------------------------
# in-place rewrites


@pytest.mark.parametrize("codec", CODECS)
def test_set_base_offset_and_leader_epoch_keep_crc(codec):
    batch = R.build_batch(_records(4), compression=codec, base_timestamp=10)
    buf = bytearray(b"pre" + batch)
    crc_before = R.read_header(buf, 3).crc
    R.set_base_offset(buf, 3, 2**40 + 5)
    R.set_partition_leader_epoch(buf, 3, 17)
    h = R.validate_batch(buf, 3)
    assert (h.base_offset, h.partition_leader_epoch, h.crc) == (2**40 + 5, 17, crc_before)
    assert buf[3 + R.ATTRIBUTES :] == batch[R.ATTRIBUTES :]
    _, got = R.decode_records(buf, 3)
    assert [r.offset for r in got] == [2**40 + 5 + i for i in range(4)]
    kp = _kp_batch(bytes(buf[3:]))
    assert kp.validate_crc() and kp.leader_epoch == 17
    assert [r.offset for r in kp] == [2**40 + 5 + i for i in range(4)]


def test_rewrites_through_memoryview_and_mmap():
    buf, _ = _three_batches()
    mm = mmap.mmap(-1, len(buf))
    try:
        mm[:] = buf
        view = memoryview(mm)
        offset = 1000
        for pos, _size in R.iter_batches(view):
            R.set_base_offset(view, pos, offset)
            R.set_partition_leader_epoch(view, pos, 3)
            offset = R.read_header(view, pos).next_offset
        assert R.valid_prefix_bytes(view) == len(buf)
        assert [R.read_header(view, p).base_offset for p, _ in R.iter_batches(view)] == [
            1000,
            1003,
            1008,
        ]
        R.set_max_timestamp_and_type(view, 0, 555)
        assert R.verify_crc(view, 0)
        view.release()
    finally:
        mm.close()


@pytest.mark.parametrize("codec", CODECS)
def test_set_max_timestamp_and_type(codec):
    batch = R.build_batch(_records(4), compression=codec, base_timestamp=10)
    buf = bytearray(batch)
    R.set_max_timestamp_and_type(buf, 0, 1_700_000_000_123)
    h, got = R.decode_records(buf)
    assert (h.timestamp_type, h.max_timestamp, h.compression) == (1, 1_700_000_000_123, codec)
    assert {r.timestamp for r in got} == {1_700_000_000_123}
    kp = _kp_batch(bytes(buf))
    assert kp.validate_crc() and kp.timestamp_type == 1
    assert {r.timestamp for r in kp} == {1_700_000_000_123}
    # unchanged: no write at all
    snapshot = bytes(buf)
    R.set_max_timestamp_and_type(buf, 0, 1_700_000_000_123)
    assert bytes(buf) == snapshot
    # back to CreateTime
    R.set_max_timestamp_and_type(buf, 0, 19, R.CREATE_TIME)
    assert bytes(buf) == batch  # max timestamp of _records(4) from base 10 is 10 + 9
    with pytest.raises(ValueError):
        R.set_max_timestamp_and_type(buf, 0, 19, 2)


# ---------------------------------------------------------------------------------------------
# control batches


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch_round_trip(commit):
    batch = R.build_control_batch(
        commit,
        12,
        producer_id=4000,
        producer_epoch=3,
        base_offset=88,
        timestamp=1234,
        partition_leader_epoch=2,
    )
    h, got = R.decode_records(batch)
    assert h.is_control and h.is_transactional and not h.compression
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (4000, 3, -1)
    assert (h.base_offset, h.partition_leader_epoch, h.base_timestamp) == (88, 2, 1234)
    assert (h.records_count, h.last_offset_delta, h.batch_length) == (1, 0, 66)
    assert len(got) == 1 and got[0].offset == 88
    assert R.parse_control_record(got[0]) == (R.CONTROL_COMMIT if commit else R.CONTROL_ABORT, 12)
    assert got[0].key == struct.pack(">hh", 0, int(commit))
    assert got[0].value == struct.pack(">hi", 0, 12)
    kp = _kp_batch(batch)
    assert kp.validate_crc() and kp.is_control_batch and kp.is_transactional
    (rec,) = list(kp)
    assert isinstance(rec, ControlRecord)
    assert (rec.commit, rec.abort, rec.version, rec.offset) == (commit, not commit, 0, 88)


def test_parse_control_record_errors_and_other_types():
    good_value = struct.pack(">hi", 0, 5)
    with pytest.raises(RecordsError):
        R.parse_control_record(Record(key=None, value=good_value))
    with pytest.raises(RecordsError):
        R.parse_control_record(Record(key=b"\x00\x00\x01", value=good_value))
    with pytest.raises(RecordsError):
        R.parse_control_record(Record(key=struct.pack(">hh", -1, 1), value=good_value))
    with pytest.raises(RecordsError):
        R.parse_control_record(Record(key=struct.pack(">hh", 0, 1), value=b"\x00\x00\x00"))
    with pytest.raises(RecordsError):
        R.parse_control_record(Record(key=struct.pack(">hh", 0, 0), value=None))
    with pytest.raises(RecordsError):
        R.parse_control_record(
            Record(key=struct.pack(">hh", 0, 0), value=struct.pack(">hi", -1, 5))
        )
    # a later version with extra bytes is read as Kafka does (known fields first)
    assert R.parse_control_record(
        Record(key=struct.pack(">hh", 1, 1) + b"\x00", value=struct.pack(">hi", 1, 9) + b"\x00")
    ) == (1, 9)
    # KRaft control records (LeaderChange = 2, ...) carry no coordinator epoch
    assert R.parse_control_record(Record(key=struct.pack(">hh", 0, 2), value=b"\x00")) == (2, -1)
