"""RecordBatch v2 (magic 2): the unit Kafka stores on disk and sends on the wire, byte for byte.

Batch layout (big-endian; offsets from the start of the batch)::

     0 baseOffset            int64   first offset of the batch (assigned by the broker)
     8 batchLength           int32   bytes after this field (batch size = batchLength + 12)
    12 partitionLeaderEpoch  int32   assigned by the broker
    16 magic                 int8    2
    17 crc                   uint32  CRC-32C of bytes 21..end (attributes to the last record)
    21 attributes            int16   bits 0-2 compression (0 none, 1 gzip, 2 snappy, 3 lz4,
                                     4 zstd), 3 timestamp type (1 = LogAppendTime),
                                     4 transactional, 5 control, 6 has delete horizon
    23 lastOffsetDelta       int32   last offset - baseOffset (kept through compaction)
    27 baseTimestamp         int64   first record's timestamp; the delete horizon if bit 6 is set
    35 maxTimestamp          int64   max record timestamp, or the LogAppendTime
    43 producerId            int64   -1 when not idempotent
    51 producerEpoch         int16
    53 baseSequence          int32   -1 when not idempotent
    57 recordsCount          int32
    61 records...                    compressed as one block when bits 0-2 are set

Record layout (varints are zigzag, Kafka's ``ByteUtils``: varint = int32 in at most 5 bytes,
varlong = int64 in at most 10)::

    length varint (bytes after it) | attributes int8 | timestampDelta varlong |
    offsetDelta varint | keyLength varint (-1 = null) | key | valueLength varint (-1 = null) |
    value | headerCount varint | headers: [keyLength varint, key (UTF-8), valueLength varint
    (-1 = null), value]

A record's offset is baseOffset + offsetDelta and its timestamp baseTimestamp + timestampDelta,
or maxTimestamp for LogAppendTime batches. Control batches (transaction markers) hold one record
with key ``version int16 (0) | type int16 (0 ABORT, 1 COMMIT)`` and value
``version int16 (0) | coordinatorEpoch int32``.

Invariants this module relies on and keeps:

* The CRC does not cover baseOffset, batchLength, partitionLeaderEpoch or magic, so
  :func:`set_base_offset` and :func:`set_partition_leader_epoch` rewrite bytes in place and the
  batch stays valid; :func:`set_max_timestamp_and_type` (LogAppendTime) recomputes the CRC.
* Hot path: :func:`read_header`, :func:`validate_batch`, :func:`iter_batches`,
  :func:`compute_crc`, :func:`set_base_offset` and friends work on the raw bytes (``bytes``,
  ``bytearray``, a byte ``memoryview`` -- of an mmap too) with one precompiled ``struct`` call
  each, never decompress and never build per-record objects. Only :func:`decode_records` and
  :func:`build_batch` deal in :class:`Record` objects (compaction, LogAppendTime rewrites of
  compressed batches, tools, tests).
* Every malformed input raises :class:`RecordsError` -- never IndexError, struct.error or a
  compression library's exception -- and nothing loops or allocates in proportion to an
  untrusted count before the bytes backing it were seen.
* A truncated batch at the end of a buffer (a Fetch response cut at max bytes, a torn log tail)
  is not yielded by :func:`iter_batches`, as Kafka's clients and log reader treat it.

Header keys are decoded as UTF-8 with ``surrogateescape`` (and encoded the same way), so keys
that are not valid UTF-8 survive a decode/encode round trip byte for byte.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from crc32c import crc32c as _crc32c

from protocol import compression as _compression
from protocol.compression import DEFAULT_MAX_OUTPUT_SIZE, RecordsError

__all__ = [
    "ATTRIBUTES",
    "BASE_OFFSET",
    "BASE_SEQUENCE",
    "BASE_TIMESTAMP",
    "BATCH_LENGTH",
    "COMPRESSION_MASK",
    "CONTROL_ABORT",
    "CONTROL_COMMIT",
    "CONTROL_MASK",
    "CRC",
    "CREATE_TIME",
    "DELETE_HORIZON_MASK",
    "HEADER_SIZE",
    "HEADER_STRUCT",
    "LAST_OFFSET_DELTA",
    "LOG_APPEND_TIME",
    "LOG_OVERHEAD",
    "MAGIC",
    "MAGIC_VALUE",
    "MAX_TIMESTAMP",
    "MIN_BATCH_LENGTH",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "NO_TIMESTAMP",
    "PARTITION_LEADER_EPOCH",
    "PRODUCER_EPOCH",
    "PRODUCER_ID",
    "RECORDS_COUNT",
    "TIMESTAMP_TYPE_MASK",
    "TRANSACTIONAL_MASK",
    "BatchHeader",
    "Record",
    "RecordsError",
    "build_batch",
    "build_control_batch",
    "compute_crc",
    "decode_records",
    "decode_varint",
    "decode_varlong",
    "encode_record",
    "encode_varint",
    "encode_varlong",
    "iter_batches",
    "parse_control_record",
    "read_header",
    "set_base_offset",
    "set_max_timestamp_and_type",
    "set_partition_leader_epoch",
    "size_of_varint",
    "size_of_varlong",
    "valid_prefix_bytes",
    "validate_batch",
    "verify_crc",
]

# ---------------------------------------------------------------------------------------------
# layout

BASE_OFFSET = 0
BATCH_LENGTH = 8
PARTITION_LEADER_EPOCH = 12
MAGIC = 16
CRC = 17
ATTRIBUTES = 21
LAST_OFFSET_DELTA = 23
BASE_TIMESTAMP = 27
MAX_TIMESTAMP = 35
PRODUCER_ID = 43
PRODUCER_EPOCH = 51
BASE_SEQUENCE = 53
RECORDS_COUNT = 57
HEADER_SIZE = 61  # also where the records start (Kafka's RECORD_BATCH_OVERHEAD)

LOG_OVERHEAD = 12  # baseOffset + batchLength: the part not counted by batchLength
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: a batch with no record bytes
MAGIC_VALUE = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40

CREATE_TIME = 0
LOG_APPEND_TIME = 1

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

CONTROL_ABORT = 0
CONTROL_COMMIT = 1

HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
assert HEADER_STRUCT.size == HEADER_SIZE

_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_INT16 = struct.Struct(">h")
_UINT32 = struct.Struct(">I")
_ATTRS_LOD = struct.Struct(">hi")  # attributes, lastOffsetDelta
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_CONTROL_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_MIN_RECORD_SIZE = 7  # length + attributes + tsDelta + offsetDelta + key + value + headerCount

_tuple_new = tuple.__new__
_unpack_header = HEADER_STRUCT.unpack_from
_pack_header_into = HEADER_STRUCT.pack_into
_unpack_int32 = _INT32.unpack_from


# ---------------------------------------------------------------------------------------------
# header


class BatchHeader(NamedTuple):
    """The 61-byte header of a batch, as stored (see the module docstring)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        """CREATE_TIME (0) or LOG_APPEND_TIME (1)."""
        return (self.attributes >> 3) & 1

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int | None:
        """The compaction delete horizon (stored in baseTimestamp), if the batch has one."""
        return self.base_timestamp if self.attributes & DELETE_HORIZON_MASK else None

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record, wrapping past int32 max as Kafka does."""
        base = self.base_sequence
        if base == NO_SEQUENCE:
            return NO_SEQUENCE
        delta = self.last_offset_delta
        if base > _INT32_MAX - delta:
            return delta - (_INT32_MAX - base) - 1
        return base + delta

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """The header of the batch at ``pos``; one struct unpack, nothing validated (not even magic).

    Raises RecordsError when fewer than 61 bytes are available.
    """
    if pos < 0:
        raise RecordsError(f"negative batch position {pos}")
    try:
        return _tuple_new(BatchHeader, _unpack_header(buf, pos))
    except struct.error:
        raise RecordsError(
            f"truncated batch header at position {pos}: {HEADER_SIZE} bytes needed, "
            f"{max(0, len(buf) - pos)} available"
        ) from None


def _batch_end(buf: bytes | bytearray | memoryview, pos: int) -> int:
    """End position of the batch at ``pos``, checked to be sane and within ``buf``."""
    if pos < 0:
        raise RecordsError(f"negative batch position {pos}")
    avail = len(buf) - pos
    if avail < HEADER_SIZE:
        raise RecordsError(
            f"truncated batch header at position {pos}: {HEADER_SIZE} bytes needed, "
            f"{max(0, avail)} available"
        )
    (length,) = _unpack_int32(buf, pos + BATCH_LENGTH)
    if length < MIN_BATCH_LENGTH:
        raise RecordsError(
            f"batch at position {pos} has length {length}, less than the minimum {MIN_BATCH_LENGTH}"
        )
    if length + LOG_OVERHEAD > avail:
        raise RecordsError(
            f"truncated batch at position {pos}: {length + LOG_OVERHEAD} bytes declared, "
            f"{avail} available"
        )
    return pos + LOG_OVERHEAD + length


def compute_crc(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """CRC-32C of the batch at ``pos`` over attributes..end of batch (no copy)."""
    end = _batch_end(buf, pos)
    return _crc32c(memoryview(buf)[pos + ATTRIBUTES : end])


def verify_crc(buf: bytes | bytearray | memoryview, pos: int = 0) -> bool:
    """Whether the stored CRC of the batch at ``pos`` matches its bytes (False if truncated)."""
    try:
        end = _batch_end(buf, pos)
    except RecordsError:
        return False
    (stored,) = _UINT32.unpack_from(buf, pos + CRC)
    return stored == _crc32c(memoryview(buf)[pos + ATTRIBUTES : end])


def validate_batch(
    buf: bytes | bytearray | memoryview, pos: int = 0, *, check_crc: bool = True
) -> BatchHeader:
    """Check the batch at ``pos`` without decompressing it and return its header.

    Checks: header present, magic 2, batchLength >= 49 and within ``buf``, recordsCount >= 0,
    lastOffsetDelta >= 0 and >= recordsCount - 1 (offsets in a batch are distinct), and the
    CRC unless ``check_crc`` is false. Raises RecordsError naming the first problem.
    """
    h = read_header(buf, pos)
    if h.magic != MAGIC_VALUE:
        raise RecordsError(f"unsupported magic {h.magic} in batch at position {pos}")
    length = h.batch_length
    if length < MIN_BATCH_LENGTH:
        raise RecordsError(
            f"batch at position {pos} has length {length}, less than the minimum {MIN_BATCH_LENGTH}"
        )
    end = pos + LOG_OVERHEAD + length
    if end > len(buf):
        raise RecordsError(
            f"truncated batch at position {pos}: {length + LOG_OVERHEAD} bytes declared, "
            f"{len(buf) - pos} available"
        )
    count = h.records_count
    if count < 0:
        raise RecordsError(f"batch at position {pos} has negative record count {count}")
    if h.last_offset_delta < 0 or count > h.last_offset_delta + 1:
        raise RecordsError(
            f"batch at position {pos} has record count {count} inconsistent with last "
            f"offset delta {h.last_offset_delta}"
        )
    if check_crc:
        crc = _crc32c(memoryview(buf)[pos + ATTRIBUTES : end])
        if crc != h.crc:
            raise RecordsError(
                f"corrupt batch at position {pos}: stored crc {h.crc}, computed crc {crc}"
            )
    return h


def iter_batches(buf: bytes | bytearray | memoryview, pos: int = 0) -> Iterator[tuple[int, int]]:
    """Yield (position, size) of each complete batch in concatenated batches from ``pos``.

    Reads only the length (and magic) fields. A truncated batch at the end is not yielded; a
    length field below the minimal header size or a magic other than 2 raises RecordsError.
    CRCs are not checked (see :func:`validate_batch`, :func:`valid_prefix_bytes`).
    """
    if pos < 0:
        raise RecordsError(f"negative batch position {pos}")
    n = len(buf)
    unpack_int32 = _unpack_int32
    while n - pos >= LOG_OVERHEAD:
        (length,) = unpack_int32(buf, pos + BATCH_LENGTH)
        if length < MIN_BATCH_LENGTH:
            raise RecordsError(
                f"batch at position {pos} has length {length}, less than the minimum "
                f"{MIN_BATCH_LENGTH}"
            )
        if n - pos > MAGIC and buf[pos + MAGIC] != MAGIC_VALUE:
            raise RecordsError(f"unsupported magic {buf[pos + MAGIC]} in batch at position {pos}")
        size = length + LOG_OVERHEAD
        if size > n - pos:
            return
        yield pos, size
        pos += size


def valid_prefix_bytes(buf: bytes | bytearray | memoryview, pos: int = 0) -> int:
    """Number of bytes from ``pos`` covered by consecutive complete batches that pass
    :func:`validate_batch` (CRC included): where log recovery truncates a torn or corrupt tail.
    """
    if pos < 0:
        raise RecordsError(f"negative batch position {pos}")
    start = pos
    n = len(buf)
    while n - pos >= HEADER_SIZE:
        try:
            h = validate_batch(buf, pos)
        except RecordsError:
            break
        pos += h.batch_length + LOG_OVERHEAD
    return pos - start


# ---------------------------------------------------------------------------------------------
# in-place rewrites


def set_base_offset(buf: bytearray | memoryview, pos: int, offset: int) -> None:
    """Write baseOffset of the batch at ``pos``; outside the CRC, so the batch stays valid."""
    _INT64.pack_into(buf, pos + BASE_OFFSET, offset)


def set_partition_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    """Write partitionLeaderEpoch of the batch at ``pos``; outside the CRC."""
    _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH, epoch)


def set_max_timestamp_and_type(
    buf: bytearray | memoryview, pos: int, ts: int, timestamp_type: int = LOG_APPEND_TIME
) -> None:
    """Set maxTimestamp and the timestamp-type bit (LogAppendTime by default) and recompute the
    CRC, as Kafka's ``setMaxTimestamp``; nothing is written when both already match.

    The new CRC covers whatever the bytes are: validate the batch first.
    """
    end = _batch_end(buf, pos)
    (attrs,) = _INT16.unpack_from(buf, pos + ATTRIBUTES)
    (old_ts,) = _INT64.unpack_from(buf, pos + MAX_TIMESTAMP)
    if timestamp_type == LOG_APPEND_TIME:
        new_attrs = attrs | TIMESTAMP_TYPE_MASK
    elif timestamp_type == CREATE_TIME:
        new_attrs = attrs & ~TIMESTAMP_TYPE_MASK
    else:
        raise ValueError(f"timestamp type must be 0 or 1, not {timestamp_type}")
    if new_attrs == attrs and old_ts == ts:
        return
    _INT16.pack_into(buf, pos + ATTRIBUTES, new_attrs)
    _INT64.pack_into(buf, pos + MAX_TIMESTAMP, ts)
    _UINT32.pack_into(buf, pos + CRC, _crc32c(memoryview(buf)[pos + ATTRIBUTES : end]))


# ---------------------------------------------------------------------------------------------
# varints (Kafka's ByteUtils: zigzag, little-endian groups of 7 bits)


def _uvarint_into(out: bytearray, u: int) -> None:
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


def _varint_into(out: bytearray, v: int) -> None:
    """Append int32 ``v`` as a zigzag varint (range checked by the caller)."""
    if -64 <= v < 64:  # one byte
        out.append((v << 1) ^ (v >> 31))
    else:
        _uvarint_into(out, ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


def _varlong_into(out: bytearray, v: int) -> None:
    if -64 <= v < 64:
        out.append((v << 1) ^ (v >> 63))
    else:
        _uvarint_into(out, ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def encode_varint(value: int) -> bytes:
    """Kafka varint (zigzag int32) bytes of ``value``; ValueError outside int32."""
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise ValueError(f"varint value {value} outside int32")
    out = bytearray()
    _varint_into(out, value)
    return bytes(out)


def encode_varlong(value: int) -> bytes:
    """Kafka varlong (zigzag int64) bytes of ``value``; ValueError outside int64."""
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise ValueError(f"varlong value {value} outside int64")
    out = bytearray()
    _varlong_into(out, value)
    return bytes(out)


def size_of_varint(value: int) -> int:
    u = ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF
    return max(1, (u.bit_length() + 6) // 7)


def size_of_varlong(value: int) -> int:
    u = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    return max(1, (u.bit_length() + 6) // 7)


def _read_varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(int32, next position); at most 5 bytes, extra high bits dropped as Java does.
    IndexError when the buffer ends inside the varint."""
    raw = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 28:
            raise RecordsError("varint is longer than 5 bytes")
    raw &= 0xFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def _read_varlong(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(int64, next position); at most 10 bytes."""
    raw = 0
    shift = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            raise RecordsError("varlong is longer than 10 bytes")
    raw &= 0xFFFFFFFFFFFFFFFF
    return (raw >> 1) ^ -(raw & 1), pos


def decode_varint(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode a Kafka varint (int32) at ``pos``: (value, next position). RecordsError if bad."""
    try:
        return _read_varint(buf, pos)
    except IndexError:
        raise RecordsError(f"truncated varint at position {pos}") from None


def decode_varlong(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[int, int]:
    """Decode a Kafka varlong (int64) at ``pos``: (value, next position). RecordsError if bad."""
    try:
        return _read_varlong(buf, pos)
    except IndexError:
        raise RecordsError(f"truncated varlong at position {pos}") from None


# ---------------------------------------------------------------------------------------------
# records


@dataclass(slots=True)
class Record:
    """One record of a batch. ``timestamp_delta`` and ``offset_delta`` are what the batch
    stores; ``offset`` and ``timestamp`` (absolute) are filled in by :func:`decode_records`,
    ignored by :func:`build_batch` and by equality."""

    attributes: int = 0
    timestamp_delta: int = 0
    offset_delta: int = 0
    key: bytes | None = None
    value: bytes | None = None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)
    offset: int | None = field(default=None, compare=False)
    timestamp: int | None = field(default=None, compare=False)


def _varint_bytes_init(u: int) -> bytes:
    out = bytearray()
    _uvarint_into(out, u)
    return bytes(out)


_SMALL = 1024
# Varint bytes of the non-negative values below _SMALL: lengths, offset and timestamp deltas.
_SMALL_VARINTS: tuple[bytes, ...] = tuple(_varint_bytes_init(i << 1) for i in range(_SMALL))


def _encode_record_into(out: bytearray, r: Record) -> None:
    """Append ``r`` (length-prefixed) to ``out``."""
    small = _SMALL_VARINTS
    ts_delta = r.timestamp_delta
    off_delta = r.offset_delta
    body = bytearray((r.attributes & 0xFF,))
    if 0 <= ts_delta < _SMALL:
        body += small[ts_delta]
    elif _INT64_MIN <= ts_delta <= _INT64_MAX:
        _varlong_into(body, ts_delta)
    else:
        raise ValueError(f"timestamp delta {ts_delta} outside int64")
    if 0 <= off_delta < _SMALL:
        body += small[off_delta]
    elif _INT32_MIN <= off_delta <= _INT32_MAX:
        _varint_into(body, off_delta)
    else:
        raise ValueError(f"offset delta {off_delta} outside int32")
    key = r.key
    if key is None:
        body.append(1)  # zigzag(-1)
    else:
        n = len(key)
        if n < _SMALL:
            body += small[n]
        else:
            _varint_into(body, n)
        body += key
    value = r.value
    if value is None:
        body.append(1)
    else:
        n = len(value)
        if n < _SMALL:
            body += small[n]
        else:
            _varint_into(body, n)
        body += value
    headers = r.headers
    if not headers:
        body.append(0)
    else:
        _varint_into(body, len(headers))
        for hkey, hvalue in headers:
            kb = hkey.encode("utf-8", "surrogateescape")
            n = len(kb)
            if n < _SMALL:
                body += small[n]
            else:
                _varint_into(body, n)
            body += kb
            if hvalue is None:
                body.append(1)
            else:
                n = len(hvalue)
                if n < _SMALL:
                    body += small[n]
                else:
                    _varint_into(body, n)
                body += hvalue
    n = len(body)
    if n < _SMALL:
        out += small[n]
    elif n <= _INT32_MAX:
        _varint_into(out, n)
    else:
        raise ValueError("record larger than int32 max bytes")
    out += body


def encode_record(record: Record) -> bytes:
    """The length-prefixed wire bytes of one record."""
    out = bytearray()
    _encode_record_into(out, record)
    return bytes(out)


def _parse_records(
    data: bytes,
    count: int,
    base_offset: int,
    base_timestamp: int,
    append_time: int | None,
) -> list[Record]:
    n = len(data)
    if count * _MIN_RECORD_SIZE > n:
        raise RecordsError(f"record count {count} cannot fit in {n} bytes of records")
    records: list[Record] = []
    append = records.append
    read_varint = _read_varint
    read_varlong = _read_varlong
    new_record = Record
    pos = 0
    try:
        for _ in range(count):
            # each varint: inline paths for 1 and 2 bytes, a call for longer ones
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = read_varint(data, pos)
            end = pos + length
            if length < _MIN_RECORD_SIZE - 1 or end > n:
                raise RecordsError(
                    f"invalid record size {length} with {n - pos} bytes of records left"
                )
            attributes = data[pos]
            if attributes > 127:
                attributes -= 256
            pos += 1
            b = data[pos]
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                ts_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                ts_delta, pos = read_varlong(data, pos)
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                off_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                off_delta, pos = read_varint(data, pos)
            b = data[pos]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                klen = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                klen, pos = read_varint(data, pos)
            if klen >= 0:
                if klen > end - pos:
                    raise RecordsError(f"key length {klen} overruns its record")
                key = data[pos : pos + klen]
                pos += klen
            else:
                key = None
            b = data[pos]
            if b < 0x80:
                vlen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                vlen = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                vlen, pos = read_varint(data, pos)
            if vlen >= 0:
                if vlen > end - pos:
                    raise RecordsError(f"value length {vlen} overruns its record")
                value = data[pos : pos + vlen]
                pos += vlen
            else:
                value = None
            b = data[pos]
            if b < 0x80:
                hcount = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                hcount = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                hcount, pos = read_varint(data, pos)
            headers: list[tuple[str, bytes | None]] = []
            if hcount:
                if hcount < 0 or hcount > end - pos:
                    raise RecordsError(f"invalid number of record headers {hcount}")
                for _h in range(hcount):
                    b = data[pos]
                    if b < 0x80:
                        hklen = (b >> 1) ^ -(b & 1)
                        pos += 1
                    elif data[pos + 1] < 0x80:
                        u = (b & 0x7F) | (data[pos + 1] << 7)
                        hklen = (u >> 1) ^ -(u & 1)
                        pos += 2
                    else:
                        hklen, pos = read_varint(data, pos)
                    if hklen < 0 or hklen > end - pos:
                        raise RecordsError(f"invalid header key length {hklen}")
                    hkey = data[pos : pos + hklen].decode("utf-8", "surrogateescape")
                    pos += hklen
                    b = data[pos]
                    if b < 0x80:
                        hvlen = (b >> 1) ^ -(b & 1)
                        pos += 1
                    elif data[pos + 1] < 0x80:
                        u = (b & 0x7F) | (data[pos + 1] << 7)
                        hvlen = (u >> 1) ^ -(u & 1)
                        pos += 2
                    else:
                        hvlen, pos = read_varint(data, pos)
                    if hvlen >= 0:
                        if hvlen > end - pos:
                            raise RecordsError(f"header value length {hvlen} overruns its record")
                        hvalue = data[pos : pos + hvlen]
                        pos += hvlen
                    else:
                        hvalue = None
                    headers.append((hkey, hvalue))
            if pos != end:
                raise RecordsError(
                    f"invalid record size: expected {length} bytes, read {length + pos - end}"
                )
            append(
                new_record(
                    attributes,
                    ts_delta,
                    off_delta,
                    key,
                    value,
                    headers,
                    base_offset + off_delta,
                    base_timestamp + ts_delta if append_time is None else append_time,
                )
            )
    except IndexError:
        raise RecordsError("records end prematurely (record data truncated)") from None
    if pos != n:
        raise RecordsError(f"{n - pos} bytes remain after the {count} records of the batch")
    return records


def decode_records(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    check_crc: bool = True,
    max_uncompressed_size: int = DEFAULT_MAX_OUTPUT_SIZE,
) -> tuple[BatchHeader, list[Record]]:
    """Validate (:func:`validate_batch`) and decode the batch at ``pos``, decompressing if
    needed. The records' ``offset``/``timestamp`` are absolute (LogAppendTime batches give
    every record the batch's maxTimestamp). The declared record count must match the records
    exactly, with no bytes left over. Not for the produce/fetch hot path."""
    h = validate_batch(buf, pos, check_crc=check_crc)
    count = h.records_count
    if count == 0:
        return h, []  # as Kafka: an empty batch's record bytes are not looked at
    end = pos + LOG_OVERHEAD + h.batch_length
    payload = memoryview(buf)[pos + HEADER_SIZE : end]
    codec = h.attributes & COMPRESSION_MASK
    if codec:
        data = _compression.decompress(codec, payload, max_uncompressed_size)
    else:
        data = bytes(payload)
    append_time = h.max_timestamp if h.attributes & TIMESTAMP_TYPE_MASK else None
    return h, _parse_records(data, count, h.base_offset, h.base_timestamp, append_time)


def build_batch(
    records: Iterable[Record],
    *,
    base_offset: int = 0,
    compression: int = 0,
    base_timestamp: int | None = None,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    timestamp_type: int = CREATE_TIME,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    has_delete_horizon: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """Encode ``records`` as one v2 batch, computing lastOffsetDelta, maxTimestamp and the CRC.

    The records' ``offset_delta`` must be strictly increasing and >= 0 (gaps are allowed, as
    after compaction); their ``timestamp_delta`` is relative to ``base_timestamp`` (default:
    now in ms, or -1 for an empty batch). ``max_timestamp`` defaults to base_timestamp + the
    largest delta (pass the append time for LogAppendTime batches); ``last_offset_delta``
    defaults to the last record's offset delta (pass it for an empty batch that keeps its
    range). With ``has_delete_horizon`` the base timestamp is the delete horizon.
    The records are compressed with ``compression`` even when that does not make them smaller.
    """
    recs = records if isinstance(records, list) else list(records)
    if not 0 <= compression <= 4:
        raise RecordsError(f"unknown compression codec id {compression}")
    if timestamp_type not in (CREATE_TIME, LOG_APPEND_TIME):
        raise ValueError(f"timestamp type must be 0 or 1, not {timestamp_type}")
    if base_timestamp is None:
        base_timestamp = int(time.time() * 1000) if recs else NO_TIMESTAMP

    out = bytearray(HEADER_SIZE)
    body = bytearray() if compression else out  # uncompressed records go straight into out
    prev = -1
    max_delta = None
    for r in recs:
        od = r.offset_delta
        if od <= prev:
            raise ValueError(
                f"record offset deltas must be strictly increasing and >= 0: {od} after {prev}"
            )
        prev = od
        td = r.timestamp_delta
        if max_delta is None or td > max_delta:
            max_delta = td
        _encode_record_into(body, r)

    if last_offset_delta is None:
        last_offset_delta = prev if recs else 0
    elif recs and last_offset_delta < prev:
        raise ValueError(f"last offset delta {last_offset_delta} < a record's delta {prev}")
    if max_timestamp is None:
        max_timestamp = base_timestamp + max_delta if max_delta is not None else base_timestamp

    if compression:
        out += _compression.compress(compression, body, compression_level)

    attributes = compression | (timestamp_type << 3)
    if is_transactional:
        attributes |= TRANSACTIONAL_MASK
    if is_control:
        attributes |= CONTROL_MASK
    if has_delete_horizon:
        attributes |= DELETE_HORIZON_MASK

    batch_length = len(out) - LOG_OVERHEAD
    if batch_length > _INT32_MAX:
        raise ValueError("batch larger than int32 max bytes")
    try:
        _pack_header_into(
            out,
            0,
            base_offset,
            batch_length,
            partition_leader_epoch,
            MAGIC_VALUE,
            0,
            attributes,
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            len(recs),
        )
    except struct.error as e:
        raise ValueError(f"batch header field out of range: {e}") from None
    _UINT32.pack_into(out, CRC, _crc32c(memoryview(out)[ATTRIBUTES:]))
    return bytes(out)


# ---------------------------------------------------------------------------------------------
# control batches (transaction markers)


def build_control_batch(
    commit: bool,
    coordinator_epoch: int,
    producer_id: int,
    producer_epoch: int,
    base_offset: int = 0,
    timestamp: int | None = None,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker batch (Kafka's ``MemoryRecords.withEndTransactionMarker``):
    transactional + control, CreateTime, no sequence, one record with the marker key/value."""
    rec = Record(
        0,
        0,
        0,
        _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT),
        _CONTROL_VALUE.pack(0, coordinator_epoch),
        [],
    )
    return build_batch(
        [rec],
        base_offset=base_offset,
        base_timestamp=int(time.time() * 1000) if timestamp is None else timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )


def parse_control_record(record: Record) -> tuple[int, int]:
    """(type, coordinator_epoch) of a control record; type 0 ABORT, 1 COMMIT, others (KRaft
    control records) with coordinator_epoch -1. RecordsError when key or value is malformed."""
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise RecordsError(f"invalid control record key {key!r}")
    version, ctype = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise RecordsError(f"invalid control record key version {version}")
    if ctype not in (CONTROL_ABORT, CONTROL_COMMIT):
        return ctype, -1
    value = record.value
    if value is None or len(value) < _CONTROL_VALUE.size:
        raise RecordsError(f"invalid transaction marker value {value!r}")
    vversion, coordinator_epoch = _CONTROL_VALUE.unpack_from(value)
    if vversion < 0:
        raise RecordsError(f"invalid transaction marker version {vversion}")
    return ctype, coordinator_epoch
