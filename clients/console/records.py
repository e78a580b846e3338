"""One bounded page of a partition's records, and how a key, value or header shows as text.

A page starts at an offset, or at the first offset whose timestamp is at or after a given time
(ListOffsets by timestamp, as `kafka-console-consumer.sh` has no flag for but every console
does), and holds at most `limit` records: the consumer is assigned the one partition, seeks,
and polls until the page is full, the log end offset is reached or a deadline passes. A whole
partition is never read.
"""

from __future__ import annotations

import json
import time
from typing import Any

from clients.client_properties import ClientProperties

MAX_LIMIT = 200
FORMATS = ("auto", "text", "json", "hex")


def decode(raw: bytes | None, fmt: str = "auto") -> dict[str, str]:
    """`{"format": ..., "text": ...}` for bytes shown as `fmt`: text (UTF-8, undecodable bytes
    replaced), json (pretty-printed; falls back to text when it is not JSON), hex, or auto: JSON
    when the bytes are a JSON object or array, text when they are valid UTF-8 without control
    characters, hex otherwise. None (a null key or value) is shown as `null`."""
    if raw is None:
        return {"format": "null", "text": "null"}
    if fmt == "hex":
        return {"format": "hex", "text": raw.hex(" ")}
    if fmt == "text":
        return {"format": "text", "text": raw.decode("utf-8", errors="replace")}
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:  # not text, so not JSON either
        return {"format": "hex", "text": raw.hex(" ")}
    if fmt == "json" or text.lstrip()[:1] in ("{", "["):
        try:
            return {"format": "json", "text": json.dumps(json.loads(text), indent=2, ensure_ascii=False)}
        except ValueError:
            pass
    if fmt == "auto" and any(ord(c) < 32 and c not in "\t\n\r" for c in text):
        return {"format": "hex", "text": raw.hex(" ")}
    return {"format": "text", "text": text}


def read_page(bootstrap: str, topic: str, partition: int, *, offset: int | None = None,
              timestamp_ms: int | None = None, limit: int = 20, fmt: str = "auto",
              timeout_s: float = 5.0, client_config: ClientProperties | None = None) -> dict[str, Any]:
    """At most `limit` records of `topic`-`partition` from `offset` (default: the earliest),
    or from `timestamp_ms`; with the partition's earliest and end offsets and the next offset
    to read, for the page's navigation."""
    from kafka import KafkaConsumer, TopicPartition

    limit = max(1, min(limit, MAX_LIMIT))
    tp = TopicPartition(topic, partition)
    settings = {"client_id": "odradek-console", "request_timeout_ms": max(int(timeout_s * 1000), 1000),
                **(client_config or ClientProperties()).kafka_python("consumer")}
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False,
                             max_poll_records=limit, **settings)
    try:
        consumer.assign([tp])
        earliest = consumer.beginning_offsets([tp], timeout_ms=timeout_s * 1000)[tp]
        end = consumer.end_offsets([tp], timeout_ms=timeout_s * 1000)[tp]
        start = earliest if offset is None else min(max(offset, earliest), end)
        if timestamp_ms is not None:
            found = consumer.offsets_for_times({tp: timestamp_ms}, timeout_ms=timeout_s * 1000)[tp]
            start = end if found is None else found.offset
        consumer.seek(tp, start)
        records: list[Any] = []
        deadline = time.monotonic() + timeout_s
        while len(records) < limit and consumer.position(tp) < end and time.monotonic() < deadline:
            got = consumer.poll(timeout_ms=200, max_records=limit - len(records))
            records.extend(r for r in got.get(tp, []) if r.offset < end)
    finally:
        consumer.close()
    rows = [{"offset": r.offset, "timestamp": r.timestamp, "key": decode(r.key, fmt), "value": decode(r.value, fmt),
             "headers": [{"key": k, "value": decode(v, fmt)} for k, v in (r.headers or [])]}
            for r in records[:limit]]
    next_offset = rows[-1]["offset"] + 1 if rows else start
    return {"topic": topic, "partition": partition, "earliest": earliest, "end": end, "start": start,
            "records": rows, "next_offset": next_offset, "limit": limit, "format": fmt}
