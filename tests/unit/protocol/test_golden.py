"""Golden request frames captured from real clients (kafka-python, confluent-kafka/librdkafka,
kcat) by scripts/capture_golden.py: our codecs must decode each frame to what the manifest says
and re-encode it to the identical bytes; Produce record batches must be CRC-valid and decode to
the records the client was asked to send."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from protocol.framing import encode_request, parse_request
from protocol.records import decode_records, iter_batches, read_header, verify_crc

GOLDEN = Path(__file__).resolve().parent / "golden"
MANIFEST = json.loads((GOLDEN / "manifest.json").read_text())
ENTRIES: list[dict[str, Any]] = MANIFEST["frames"]
PRODUCE = [e for e in ENTRIES if e["api_key"] == 0]


def by_file(entries: list[dict[str, Any]]) -> Any:
    return pytest.mark.parametrize("entry", entries, ids=[e["file"] for e in entries])


def frame_of(entry: dict[str, Any]) -> bytes:
    return (GOLDEN / entry["file"]).read_bytes()


def utf8(s: str | None) -> bytes | None:
    return None if s is None else s.encode("utf-8")


def test_manifest_matches_files() -> None:
    on_disk = {p.relative_to(GOLDEN).as_posix() for p in GOLDEN.rglob("*.bin")}
    assert on_disk == {e["file"] for e in ENTRIES}
    assert sum(e["size"] for e in ENTRIES) < 1 << 20
    # every client and every codec is represented
    assert {e["client"] for e in ENTRIES} == {"kafka-python", "confluent-kafka", "kcat"}
    for client in ("kafka-python", "confluent-kafka", "kcat"):
        codecs = {e["codec"] for e in PRODUCE if e["client"] == client}
        assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}, client
        assert any(e["api_key"] == 1 for e in ENTRIES if e["client"] == client), client


@by_file(ENTRIES)
def test_file_integrity(entry: dict[str, Any]) -> None:
    frame = frame_of(entry)
    assert len(frame) == entry["size"]
    assert hashlib.sha256(frame).hexdigest() == entry["sha256"]


@by_file(ENTRIES)
def test_header(entry: dict[str, Any]) -> None:
    header, _ = parse_request(frame_of(entry))
    assert header.request_api_key == entry["api_key"]
    assert header.request_api_version == entry["api_version"]
    assert header.correlation_id == entry["correlation_id"]
    assert header.client_id == entry["client_id"]


@by_file(ENTRIES)
def test_reencode_is_identical(entry: dict[str, Any]) -> None:
    frame = frame_of(entry)
    header, body = parse_request(frame)
    body_bytes = body.encode(entry["api_version"])
    assert frame.endswith(body_bytes)
    assert encode_request(header, body) == frame
    # decoding from a memoryview gives the same message
    header2, body2 = parse_request(memoryview(frame))
    assert header2 == header
    assert body2 == body


@by_file([e for e in ENTRIES if e["api_key"] == 18])
def test_api_versions(entry: dict[str, Any]) -> None:
    _, body = parse_request(frame_of(entry))
    if entry["api_version"] >= 3:
        assert body.client_software_name == entry["client_software_name"]
        assert body.client_software_version == entry["client_software_version"]


@by_file([e for e in ENTRIES if e["api_key"] == 3])
def test_metadata(entry: dict[str, Any]) -> None:
    _, body = parse_request(frame_of(entry))
    names = None if body.topics is None else [t.name for t in body.topics]
    assert names == entry["topics"]
    if entry["api_version"] >= 4:
        assert body.allow_auto_topic_creation is entry["allow_auto_topic_creation"]


@by_file(PRODUCE)
def test_produce(entry: dict[str, Any]) -> None:
    _, body = parse_request(frame_of(entry))
    assert body.acks == entry["acks"]
    assert body.transactional_id == entry["transactional_id"]
    [topic] = body.topic_data
    assert topic.name == entry["topic"]
    [part] = topic.partition_data
    assert part.index == entry["partition"]
    assert isinstance(part.records, memoryview)

    buf = part.records
    spans = list(iter_batches(buf))
    assert spans, "no record batch"
    # the batches tile the records field exactly
    pos = 0
    for bpos, size in spans:
        assert bpos == pos
        pos += size
    assert pos == len(buf)

    records = []
    for bpos, _ in spans:
        assert verify_crc(buf, bpos)
        header, recs = decode_records(buf, bpos)
        assert header.compression == entry["compression"]
        assert header.base_offset == 0
        assert header.producer_id == entry["producer_id"]
        assert header.records_count == len(recs)
        peek = read_header(buf, bpos)
        assert (peek.compression, peek.base_offset, peek.producer_id, peek.records_count) == (
            header.compression,
            header.base_offset,
            header.producer_id,
            header.records_count,
        )
        records.extend(recs)

    expected = entry["records"]
    assert len(records) == len(expected)
    for rec, exp in zip(records, expected, strict=True):
        assert rec.key == utf8(exp["key"])
        assert rec.value == utf8(exp["value"])
        assert [tuple(h) for h in rec.headers] == [(k, utf8(v)) for k, v in exp["headers"]]
        assert rec.timestamp == exp["timestamp"]


@by_file(PRODUCE)
def test_produce_corrupted_batch_fails_crc(entry: dict[str, Any]) -> None:
    _, body = parse_request(frame_of(entry))
    buf = bytearray(body.topic_data[0].partition_data[0].records)
    bpos, size = next(iter(iter_batches(buf)))
    buf[bpos + size - 1] ^= 0x01  # last byte of the (possibly compressed) records section
    assert not verify_crc(buf, bpos)


@by_file([e for e in ENTRIES if e["api_key"] == 1])
def test_fetch(entry: dict[str, Any]) -> None:
    _, body = parse_request(frame_of(entry))
    if entry["replica_id"] is not None:
        assert body.replica_id == entry["replica_id"]
    assert body.max_wait_ms == entry["max_wait_ms"]
    assert body.min_bytes == entry["min_bytes"]
    assert body.max_bytes == entry["max_bytes"]
    assert body.isolation_level == entry["isolation_level"]
    assert body.session_id == entry["session_id"]
    assert body.session_epoch == entry["session_epoch"]
    got = [
        {
            "topic": t.topic,
            "partition": p.partition,
            "fetch_offset": p.fetch_offset,
            "partition_max_bytes": p.partition_max_bytes,
        }
        for t in body.topics
        for p in t.partitions
    ]
    assert got == entry["fetch"]
    assert (got[0]["topic"], got[0]["partition"], got[0]["fetch_offset"]) == (
        entry["topic"],
        entry["partition"],
        entry["fetch_offset"],
    )


@by_file([e for e in ENTRIES if e["api_key"] == 2])
def test_list_offsets(entry: dict[str, Any]) -> None:
    _, body = parse_request(frame_of(entry))
    assert body.replica_id == entry["replica_id"]
    if entry["isolation_level"] is not None:
        assert body.isolation_level == entry["isolation_level"]
    got = [
        {"topic": t.name, "partition": p.partition_index, "timestamp": p.timestamp}
        for t in body.topics
        for p in t.partitions
    ]
    assert got == entry["partitions"]


@by_file([e for e in ENTRIES if e["api_key"] == 23])
def test_offset_for_leader_epoch(entry: dict[str, Any]) -> None:
    _, body = parse_request(frame_of(entry))
    got = [
        {
            "topic": t.topic,
            "partition": p.partition,
            "current_leader_epoch": p.current_leader_epoch,
            "leader_epoch": p.leader_epoch,
        }
        for t in body.topics
        for p in t.partitions
    ]
    assert got == entry["partitions"]


@by_file([e for e in ENTRIES if e["api_key"] == 22])
def test_init_producer_id(entry: dict[str, Any]) -> None:
    _, body = parse_request(frame_of(entry))
    assert body.transactional_id == entry["transactional_id"]
    assert body.transaction_timeout_ms == entry["transaction_timeout_ms"]


@by_file([e for e in ENTRIES if e["api_key"] == 10])
def test_find_coordinator(entry: dict[str, Any]) -> None:
    _, body = parse_request(frame_of(entry))
    assert body.key_type == entry["key_type"]
    keys = list(body.coordinator_keys) if entry["api_version"] >= 4 else [body.key]
    assert keys == entry["keys"]
