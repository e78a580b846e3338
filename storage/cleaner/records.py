"""Records of a batch as spans of its (decompressed) record bytes, and batches rebuilt from the
records the cleaner retains.

The cleaner decides per record (its key, offset, whether it has a value) but never needs a
record as a Python object: a retained record is copied byte for byte -- its offset and timestamp
deltas stay relative to the batch's unchanged base offset and base timestamp -- so rebuilding a
batch is slicing, joining, recompressing (with the batch's own codec) and a new CRC. Only when
the delete horizon is set on a batch (KIP-534: its base timestamp becomes the horizon) is each
record's timestamp delta re-encoded; the rest of the record is still copied.

What a rebuilt batch keeps, as Kafka's ``MemoryRecords.filterTo`` / ``buildRetainedRecordsInto``:
base offset, last offset delta (so the last sequence of the producer stays the same),
partition leader epoch, attributes (codec, timestamp type, transactional, control), producer
id, epoch and base sequence. The max timestamp is that of the retained records (CreateTime) or
the batch's (LogAppendTime).

Pure functions of bytes; no I/O.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from crc32c import crc32c

from protocol import compression as _compression
from protocol.compression import RecordsError
from protocol.records import (
    ATTRIBUTES,
    COMPRESSION_MASK,
    CONTROL_MASK,
    CRC,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC_VALUE,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    decode_varint,
    decode_varlong,
    encode_varint,
    encode_varlong,
)

__all__ = [
    "RecordSpan",
    "batch_records_data",
    "control_type",
    "empty_batch",
    "rebuild_batch",
    "record_spans",
]

_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")
_MIN_RECORD_SIZE = 7


class RecordSpan(NamedTuple):
    """One record in a batch's record bytes: [start, end) with its length prefix; ``body`` is
    where its attributes byte is and ``ts_end`` where its offset delta starts."""

    start: int
    end: int
    body: int
    ts_end: int
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    has_value: bool


def batch_records_data(batch: bytes | memoryview, h: BatchHeader, max_size: int) -> bytes:
    """The record bytes of the batch ``batch`` (starting at its header), decompressed."""
    payload = memoryview(batch)[HEADER_SIZE : LOG_OVERHEAD + h.batch_length]
    codec = h.attributes & COMPRESSION_MASK
    if codec:
        return _compression.decompress(codec, payload, max_size)
    return bytes(payload)


def record_spans(data: bytes, count: int) -> list[RecordSpan]:
    """The ``count`` records of ``data`` (a batch's record bytes), which they must fill
    exactly; RecordsError otherwise. Headers are skipped, not parsed.

    The cleaner's hot loop (every record of the dirty section goes through it twice): the one-
    and two-byte varints -- nearly every length, delta and key size -- are decoded inline, a
    call is made only for longer ones."""
    n = len(data)
    if count * _MIN_RECORD_SIZE > n:
        raise RecordsError(f"record count {count} cannot fit in {n} bytes of records")
    spans: list[RecordSpan] = []
    append = spans.append
    new = RecordSpan
    pos = 0
    try:
        for _ in range(count):
            start = pos
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                length = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                length, pos = decode_varint(data, pos)
            end = pos + length
            if length < _MIN_RECORD_SIZE - 1 or end > n:
                raise RecordsError(f"invalid record size {length} with {n - pos} bytes of records left")
            body = pos
            b = data[pos + 1]  # after the attributes byte: the timestamp delta
            if b < 0x80:
                ts_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            elif data[pos + 2] < 0x80:
                u = (b & 0x7F) | (data[pos + 2] << 7)
                ts_delta = (u >> 1) ^ -(u & 1)
                pos += 3
            else:
                ts_delta, pos = decode_varlong(data, pos + 1)
            ts_end = pos
            b = data[pos]
            if b < 0x80:
                off_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                off_delta = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                off_delta, pos = decode_varint(data, pos)
            b = data[pos]
            if b < 0x80:
                klen = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                u = (b & 0x7F) | (data[pos + 1] << 7)
                klen = (u >> 1) ^ -(u & 1)
                pos += 2
            else:
                klen, pos = decode_varint(data, pos)
            if klen >= 0:
                if klen > end - pos:
                    raise RecordsError(f"key length {klen} overruns its record")
                key: bytes | None = data[pos : pos + klen]
                pos += klen
            else:
                key = None
            # the value: only whether it is null matters (a null value is the varint -1, 0x01)
            if pos >= end:
                raise RecordsError("record ends before its value")
            append(new(start, end, body, ts_end, ts_delta, off_delta, key, data[pos] != 1))
            pos = end
    except IndexError:
        raise RecordsError("records end prematurely (record data truncated)") from None
    if pos != n:
        raise RecordsError(f"{n - pos} bytes remain after the {count} records of the batch")
    return spans


def control_type(data: bytes, spans: list[RecordSpan]) -> int | None:
    """The type of a control batch's record (0 abort, 1 commit), None when it has none or an
    unreadable key."""
    if not spans or spans[0].key is None or len(spans[0].key) < 4:
        return None
    return _CONTROL_KEY.unpack_from(spans[0].key)[1]


def _header_bytes(
    h: BatchHeader,
    *,
    batch_length: int,
    attributes: int,
    base_timestamp: int,
    max_timestamp: int,
    count: int,
) -> bytearray:
    out = bytearray(HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        out,
        0,
        h.base_offset,
        batch_length,
        h.partition_leader_epoch,
        MAGIC_VALUE,
        0,
        attributes,
        h.last_offset_delta,
        base_timestamp,
        max_timestamp,
        h.producer_id,
        h.producer_epoch,
        h.base_sequence,
        count,
    )
    return out


def _seal(out: bytearray) -> bytes:
    _UINT32.pack_into(out, CRC, crc32c(memoryview(out)[ATTRIBUTES:]))
    return bytes(out)


def rebuild_batch(
    h: BatchHeader,
    data: bytes,
    retained: list[RecordSpan],
    *,
    delete_horizon_ms: int | None = None,
) -> bytes:
    """The batch of header ``h`` holding only the ``retained`` records of its record bytes
    ``data``, compressed with its codec. With ``delete_horizon_ms`` the base timestamp becomes
    that horizon and the delete-horizon attribute is set (each record keeps its absolute
    timestamp: its delta is re-encoded); a batch that already has a horizon keeps it."""
    base_ts = h.base_timestamp
    attributes = h.attributes
    if delete_horizon_ms is not None and not attributes & DELETE_HORIZON_MASK:
        new_base = delete_horizon_ms
        attributes |= DELETE_HORIZON_MASK
        parts = []
        for s in retained:
            body = b"".join((
                data[s.body : s.body + 1],
                encode_varlong(base_ts + s.timestamp_delta - new_base),
                data[s.ts_end : s.end],
            ))
            parts.append(encode_varint(len(body)))
            parts.append(body)
        records = b"".join(parts)
    else:
        new_base = base_ts
        records = b"".join([data[s.start : s.end] for s in retained])
    if attributes & TIMESTAMP_TYPE_MASK:
        max_ts = h.max_timestamp
    else:
        max_ts = base_ts + max(s.timestamp_delta for s in retained) if retained else h.max_timestamp
    codec = attributes & COMPRESSION_MASK
    if codec:
        records = _compression.compress(codec, records, None)
    out = _header_bytes(
        h,
        batch_length=HEADER_SIZE - LOG_OVERHEAD + len(records),
        attributes=attributes,
        base_timestamp=new_base,
        max_timestamp=max_ts,
        count=len(retained),
    )
    out += records
    return _seal(out)


def empty_batch(h: BatchHeader) -> bytes:
    """The header-only batch Kafka keeps for a batch whose records all go but whose producer
    state (last sequence, epoch) or offset range must stay (``DefaultRecordBatch
    .writeEmptyHeader``): no compression, both timestamps the batch's max timestamp."""
    attributes = h.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    out = _header_bytes(
        h,
        batch_length=HEADER_SIZE - LOG_OVERHEAD,
        attributes=attributes,
        base_timestamp=h.max_timestamp,
        max_timestamp=h.max_timestamp,
        count=0,
    )
    return _seal(out)
