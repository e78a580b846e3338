"""Kafka's CoordinatorLoader: read a coordinator partition's records for replay.

Runs in an executor (blocking file reads); the runtime replays the result on the event loop in
one synchronous step, after checking the load was not superseded meanwhile."""

from __future__ import annotations

from typing import Any

from protocol.records import decode_records, iter_batches, read_header

KeyValue = tuple[bytes, bytes | None]


def read_key_values(lg: Any) -> list[KeyValue]:
    """(key, value) of every data record of a log up to its log end, in offset order; control
    batches and transactional batches are skipped (nothing transactional is written to the
    coordinator topics yet). The log end, not the high watermark, as Kafka's loaders read: a
    new leader's high watermark is the one it had as a follower, which may not cover the last
    writes yet; they are the leader's now and will be committed."""
    out: list[KeyValue] = []
    offset = lg.log_start_offset
    end = lg.log_end_offset
    while offset < end:
        info = lg.read(offset, 1 << 20, max_offset_exclusive=end, min_one_message=True)
        data = info.records.read()
        if not data:
            break
        last = offset
        for pos, _size in iter_batches(data):
            header = read_header(data, pos)
            last = header.next_offset
            if header.is_control or header.is_transactional:
                continue
            _, recs = decode_records(data, pos)
            for r in recs:
                if r.key is not None and r.offset is not None and r.offset >= offset:
                    out.append((r.key, r.value))
        if last <= offset:
            break
        offset = last
    return out
