"""Kafka's LogValidator checks that the Log's append loop hands off: the error paths of the
per-batch header checks, the per-record checks that need decoding (keys on compacted topics,
timestamp bounds), and recompression when compression.type names a codec.

The common path -- one header unpack, the CRC, in-place offset assignment -- stays inline in
``Log.append_as_leader``; functions here run only when a batch is bad, the topic is compacted,
timestamp bounds are set, a producer's batch says LogAppendTime, or the topic's codec differs
from the producer's. Every failure raises a storage.errors exception carrying Kafka's error;
the per-record checks raise RecordValidationError listing every bad record (KIP-467), which
the Produce response reports as record_errors and error_message.

Who may call: Log, under its lock. Functions of the request buffer; no file I/O.
"""

from __future__ import annotations

import struct
from typing import NoReturn

from protocol.compression import decompress
from protocol.records import (
    ATTRIBUTES,
    BASE_TIMESTAMP,
    COMPRESSION_MASK,
    CONTROL_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAX_TIMESTAMP,
    MIN_BATCH_LENGTH,
    RECORDS_COUNT,
    TIMESTAMP_TYPE_MASK,
    RecordsError,
    build_batch,
    decode_records,
    decode_varint,
    decode_varlong,
)
from storage.config import LONG_MAX, LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    RecordValidationError,
    StorageError,
)

__all__ = [
    "bad_batch",
    "bad_length",
    "check_client_batch",
    "check_records",
    "needs_recompression",
    "recompress",
]

_unpack_int32 = struct.Struct(">i").unpack_from
_unpack_int64 = struct.Struct(">q").unpack_from


def bad_length(name: str, pos: int, length: int) -> NoReturn:
    raise CorruptRecordError(
        f"Record batch at position {pos} in the append to {name} has size "
        f"{length + LOG_OVERHEAD}, smaller than the minimum {MIN_BATCH_LENGTH + LOG_OVERHEAD}"
    )


def bad_batch(name: str, magic: int, size: int, max_msg: int) -> NoReturn:
    if magic != 2:
        if magic in (0, 1):
            raise InvalidRecordError(
                f"Record batch with magic {magic} in the append to {name}: only magic 2 "
                "is supported"
            )
        raise CorruptRecordError(f"Invalid magic found in record: {magic}")
    raise RecordTooLargeError(
        f"The record batch size in the append to {name} is {size} bytes which exceeds "
        f"the maximum configured value of {max_msg}."
    )


def check_client_batch(name: str, h: tuple[int, ...], lod: int, count: int) -> None:
    """Kafka's LogValidator.validateBatch and the base-offset check, for client batches."""
    if h[0] != 0:
        raise InvalidRecordError(
            f"The baseOffset of the record batch in the append to {name} should be 0, "
            f"but it is {h[0]}"
        )
    if lod < 0:
        raise InvalidRecordError(
            f"Batch has an invalid offset range: [{h[0]}, {h[0] + lod}] in topic partition "
            f"{name}"
        )
    if count <= 0:
        raise InvalidRecordError(
            f"Invalid reported count for record batch: {count} in topic partition {name}"
        )
    if lod + 1 != count:
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{h[0]}, {h[0] + lod}] and count of records "
            f"{count} in topic partition {name}"
        )
    if h[5] & CONTROL_MASK:
        raise InvalidRecordError(
            f"Clients are not allowed to write control records in topic partition {name}"
        )
    if h[9] >= 0 and h[11] < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {h[11]} in record batch with producerId {h[9]} in "
            f"topic partition {name}"
        )


def check_records(
    name: str, cfg: LogConfig, mv: memoryview, pos: int, size: int, now_ms: int
) -> None:
    """Kafka's LogValidator.validateRecord for the batch at ``pos``: keys on compacted topics,
    CreateTime timestamps within message.timestamp.before/after.max.ms, no LogAppendTime
    batches from producers. Every record is checked and every bad one listed (KIP-467):
    raises RecordValidationError, and the batch is not appended.

    Records are only looked at when the header says one may fail: the topic is compacted
    (keys), the batch says LogAppendTime, before.max.ms is finite (the header has no minimum
    timestamp: deltas from the base timestamp are signed), or the header's max timestamp is
    past now + after.max.ms. The look is a scan of the record varints (no key or value
    copied); only a batch the scan flags is decoded, to name its bad records."""
    attrs = mv[pos + ATTRIBUTES + 1]
    keys = cfg.compact and not attrs & CONTROL_MASK
    suspect = bool(attrs & TIMESTAMP_TYPE_MASK)  # rare: let the full check decide
    lo = -LONG_MAX  # bounds of the timestamp deltas the scan lets through
    hi = LONG_MAX
    no_ts = 0  # the delta of a record without timestamp (-1), which is not checked
    if not suspect and not cfg.log_append_time:
        before = cfg.timestamp_before_max_ms
        after = cfg.timestamp_after_max_ms
        if before != LONG_MAX:
            base_ts = _unpack_int64(mv, pos + BASE_TIMESTAMP)[0]
            lo = now_ms - before - base_ts
            hi = now_ms + after - base_ts
            no_ts = -1 - base_ts
        elif after != LONG_MAX and _unpack_int64(mv, pos + MAX_TIMESTAMP)[0] > now_ms + after:
            suspect = True
    if not suspect:
        if not keys and lo == -LONG_MAX:
            return  # timestamps bounded above only, and the max timestamp is in range
        count = _unpack_int32(mv, pos + RECORDS_COUNT)[0]
        codec = attrs & COMPRESSION_MASK
        payload = mv[pos + HEADER_SIZE : pos + size]
        try:
            data = decompress(codec, payload) if codec else bytes(payload)
        except RecordsError:
            suspect = True
        else:
            suspect = _may_fail(data, count, keys, lo, hi, no_ts)
    if suspect:
        _validate_records(name, cfg, mv, pos, size, now_ms, keys)


def _may_fail(data: bytes, count: int, keys: bool, lo: int, hi: int, no_ts: int) -> bool:
    """Whether a record of the batch's (decompressed) records may fail: a negative key length
    when ``keys``, a timestamp delta outside [lo, hi] other than ``no_ts``, or bytes that do
    not parse. Reads each
    record's length, timestamp delta and (for keys) offset delta and key length varints,
    then jumps to the next record."""
    read_varint = decode_varint
    pos = 0
    try:
        for _ in range(count):
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
            p = pos + 1  # the attributes byte (unused) comes first
            b = data[p]
            if b < 0x80:
                d = (b >> 1) ^ -(b & 1)
                p += 1
            elif data[p + 1] < 0x80:
                u = (b & 0x7F) | (data[p + 1] << 7)
                d = (u >> 1) ^ -(u & 1)
                p += 2
            else:
                d, p = decode_varlong(data, p)
            if (d < lo or d > hi) and d != no_ts:
                return True
            if keys:
                b = data[p]  # offset delta
                if b < 0x80:
                    p += 1
                elif data[p + 1] < 0x80:
                    p += 2
                else:
                    _, p = read_varint(data, p)
                if data[p] & 1:  # zigzag: an odd varint is negative, a null key
                    return True
            if length <= 0:
                return True
            pos = end
    except (IndexError, RecordsError):
        return True
    return False


def _long(v: int) -> int:
    """``v`` wrapped to a Java long, for arithmetic Kafka does in longs."""
    return ((v + 2**63) % 2**64) - 2**63


def _validate_records(
    name: str, cfg: LogConfig, mv: memoryview, pos: int, size: int, now_ms: int, keys: bool
) -> None:
    """The per-record checks of Kafka's LogValidator.validateRecord (validateKey, then
    validateTimestamp), over every record, and processRecordErrors: Kafka's messages, in
    Java's arithmetic and formatting."""
    try:
        h, records = decode_records(mv[pos : pos + size], check_crc=False)
    except RecordsError as e:
        raise CorruptRecordError(f"Record batch in the append to {name} is corrupt: {e}") from None
    create_time = not cfg.log_append_time
    append_time_batch = bool(h.attributes & TIMESTAMP_TYPE_MASK)
    before = cfg.timestamp_before_max_ms
    after = cfg.timestamp_after_max_ms
    # Kafka iterates compressed batches it keeps in place with its skip-key-value iterator
    kind = "PartialDefaultRecord" if h.compression else "DefaultRecord"
    errors: list[tuple[int, str]] = []
    bad_timestamp = False
    for i, r in enumerate(records):
        if keys and r.key is None:
            errors.append(
                (i, f"Compacted topic cannot accept message without key in topic partition {name}")
            )
            continue
        ts = r.timestamp if r.timestamp is not None else -1
        if create_time and ts != -1:
            diff = _long(now_ms - ts)
            if diff > before or _long(-diff) > after:
                bad_timestamp = True
                errors.append(
                    (
                        i,
                        f"Timestamp {ts} of message with offset {r.offset} is out of range. The "
                        f"timestamp should be within [{_long(now_ms - before)}, "
                        f"{_long(now_ms + after)}]",
                    )
                )
        elif append_time_batch:
            bad_timestamp = True
            klen = 0 if r.key is None else len(r.key)
            vlen = 0 if r.value is None else len(r.value)
            errors.append(
                (
                    i,
                    f"Invalid timestamp type in message {kind}(offset={r.offset}, timestamp={ts}, "
                    f"key={klen} bytes, value={vlen} bytes). Producer should not set timestamp "
                    "type to LogAppendTime.",
                )
            )
    if not errors:
        return
    invalid: StorageError
    if bad_timestamp:
        invalid = InvalidTimestampError("One or more records have been rejected due to invalid timestamp")
    else:
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in errors[:3])
        invalid = InvalidRecordError(
            f"One or more records have been rejected due to {len(errors)} record errors in total, "
            f"and only showing the first three errors at most: [{shown}]"
        )
    raise RecordValidationError(invalid, list(errors))


def needs_recompression(mv: memoryview, codec: int) -> bool:
    n = mv.nbytes
    pos = 0
    while n - pos >= 61:
        (length,) = _unpack_int32(mv, pos + 8)
        if length < MIN_BATCH_LENGTH or length + LOG_OVERHEAD > n - pos:
            return False  # let the main loop report or ignore it
        attrs = mv[pos + 22]
        if attrs & 0x07 != codec and not attrs & CONTROL_MASK:
            return True
        pos += length + LOG_OVERHEAD
    return False


def recompress(name: str, cfg: LogConfig, mv: memoryview, codec: int) -> memoryview:
    """Re-encode every batch with ``codec`` (compression.type names one): Kafka's
    recompression path. Slow (decodes records); only used when the codecs differ."""
    level = {1: cfg.compression_gzip_level, 3: cfg.compression_lz4_level, 4: cfg.compression_zstd_level}
    lvl = level.get(codec)
    out = bytearray()
    n = mv.nbytes
    pos = 0
    while n - pos >= LOG_OVERHEAD:
        (length,) = _unpack_int32(mv, pos + 8)
        size = length + LOG_OVERHEAD
        if length < MIN_BATCH_LENGTH or size > n - pos:
            break
        if size > cfg.max_message_bytes:
            raise RecordTooLargeError(
                f"The record batch size in the append to {name} is {size} bytes which "
                f"exceeds the maximum configured value of {cfg.max_message_bytes}."
            )
        try:
            h, records = decode_records(mv[pos : pos + size], check_crc=True)
        except RecordsError as e:
            raise CorruptRecordError(f"Record batch in the append to {name} is corrupt: {e}") from None
        if h.is_control or h.compression == codec:
            out += mv[pos : pos + size]
        else:
            out += build_batch(
                records,
                base_offset=h.base_offset,
                compression=codec,
                base_timestamp=h.base_timestamp,
                producer_id=h.producer_id,
                producer_epoch=h.producer_epoch,
                base_sequence=h.base_sequence,
                partition_leader_epoch=h.partition_leader_epoch,
                is_transactional=h.is_transactional,
                timestamp_type=h.timestamp_type,
                max_timestamp=h.max_timestamp,
                last_offset_delta=h.last_offset_delta,
                has_delete_horizon=h.has_delete_horizon,
                compression_level=None if lvl is None or lvl == -1 else lvl,
            )
        pos += size
    return memoryview(out)
