"""Kafka's LogValidator checks that the Log's append loop hands off: the error paths of the
per-batch header checks, the per-record checks that need decoding (keys on compacted topics,
timestamp bounds), and recompression when compression.type names a codec.

The common path -- one header unpack, the CRC, in-place offset assignment -- stays inline in
``Log.append_as_leader``; functions here run only when a batch is bad, the topic is compacted,
timestamp bounds are set, or the topic's codec differs from the producer's. Every failure
raises a storage.errors exception carrying Kafka's error.

Who may call: Log, under its lock. Functions of the request buffer; no file I/O.
"""

from __future__ import annotations

import struct
from typing import NoReturn

from protocol.records import (
    CONTROL_MASK,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    TIMESTAMP_TYPE_MASK,
    RecordsError,
    build_batch,
    decode_records,
)
from storage.config import LogConfig
from storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
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
    """Per-record checks that need decoding: keys on compacted topics, timestamp bounds."""
    try:
        h, records = decode_records(mv[pos : pos + size], check_crc=False)
    except RecordsError as e:
        raise CorruptRecordError(f"Record batch in the append to {name} is corrupt: {e}") from None
    if cfg.compact and not h.is_control:
        for r in records:
            if r.key is None:
                raise InvalidRecordError(
                    f"Compacted topic cannot accept message without key in topic partition "
                    f"{name}."
                )
    if cfg.log_append_time or h.attributes & TIMESTAMP_TYPE_MASK:
        return
    before = cfg.timestamp_before_max_ms
    after = cfg.timestamp_after_max_ms
    for r in records:
        ts = r.timestamp
        if ts is None or ts == -1:
            continue
        if now_ms - ts > before:
            raise InvalidTimestampError(
                f"Timestamp {ts} of message with offset {r.offset_delta} is out of range. The "
                f"timestamp should be within [{now_ms - before}, {now_ms + after}]"
            )
        if ts - now_ms > after:
            raise InvalidTimestampError(
                f"Timestamp {ts} of message with offset {r.offset_delta} is out of range. The "
                f"timestamp should be within [{now_ms - before}, {now_ms + after}]"
            )


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
