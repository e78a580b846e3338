#!/usr/bin/env python
"""Capture golden Kafka request frames from real client sessions.

Dev tool, not broker code.  Runs a tiny loopback-only "broker" that pretends to be a one-node
Kafka 3.8-ish cluster well enough for kafka-python, confluent-kafka (librdkafka) and kcat to
produce and consume, records every request frame it receives (the raw bytes after the 4-byte
size prefix) and writes a deduplicated selection of them to tests/unit/protocol/golden/ together
with manifest.json.

Responses are built with kafka-python's protocol classes (``kafka.protocol.*``) and record-batch
builder (``kafka.record``), used as an independent oracle: nothing here imports Odradek code.

Usage (from the repo root):

    .venv/bin/python scripts/capture_golden.py            # regenerate the golden folder
    .venv/bin/python scripts/capture_golden.py --dry-run  # capture and summarise, write nothing

Each client session runs in its own subprocess (``--session NAME --port N``), so that library
defaults such as kafka-python's per-process client-id counter are the same on every run.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
GOLDEN_DIR = REPO / "tests" / "unit" / "protocol" / "golden"
KCAT = "/usr/bin/kcat"

TOPIC = "golden"
PARTITION = 0
TOPIC_ID = uuid.UUID("0d7adec0-0000-4000-8000-00000000901d")
CLUSTER_ID = "odradek-golden-capture"
NODE_ID = 0
PRODUCER_ID = 4242
FETCH_SESSION_ID = 0x601D
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
BASE_TS = 1_700_000_000_000

# Records the kafka-python and confluent-kafka producers send (one batch per codec).
PRODUCE_RECORDS: list[dict[str, Any]] = [
    {
        "key": "key-0",
        "value": "value-0 " + " ".join(["golden"] * 8),
        "headers": [["h", "hv-0"]],
        "timestamp": BASE_TS + 0,
    },
    {
        "key": None,
        "value": "value-1 (null key) " + " ".join(["golden"] * 8),
        "headers": [["h", "hv-1"]],
        "timestamp": BASE_TS + 1,
    },
    {"key": "key-2", "value": None, "headers": [["h", "hv-2"]], "timestamp": BASE_TS + 2},
]
# kcat reads "key:value" lines from stdin (-K:) and adds one header (-H h=hv) to every record;
# its timestamps are the wall clock at capture time (kcat has no produce-timestamp option).
KCAT_LINES = [
    ("key-0", "value-0 " + " ".join(["golden"] * 8)),
    ("key-1", "value-1"),
    ("key-2", "value-2"),
]
KCAT_HEADER = ("h", "hv")

# Records served by Fetch (not part of the golden set; only so consumers see data).
FETCH_RECORDS = [
    (BASE_TS + i, f"fk-{i}".encode(), f"fetched value {i}".encode(), [("h", f"fh-{i}".encode())])
    for i in range(3)
]

# Version ranges advertised in ApiVersions: the table in /work/shared/kafka-protocol/NOTES.md
# (consistent with a Kafka 3.8 broker as far as kafka-python's version inference goes).
ADVERTISED: dict[int, tuple[int, int]] = {
    0: (0, 11),
    1: (4, 12),
    2: (1, 7),
    3: (0, 12),
    8: (2, 9),
    9: (1, 8),
    10: (0, 4),
    11: (0, 9),
    12: (0, 4),
    13: (0, 5),
    14: (0, 5),
    15: (0, 5),
    16: (0, 5),
    18: (0, 4),
    19: (2, 7),
    20: (1, 6),
    21: (0, 2),
    22: (0, 4),
    23: (2, 4),
    24: (0, 3),
    25: (0, 3),
    26: (0, 3),
    28: (0, 3),
    32: (1, 4),
    33: (0, 2),
    37: (0, 3),
    42: (0, 2),
    44: (0, 1),
    60: (0, 1),
}

# How many distinct frames to keep per (client, api_key); Produce keeps all distinct ones.
MAX_PER_API = 3
SESSION_TIMEOUT_S = 60


def log(msg: str) -> None:
    print(f"[capture] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# kafka-python oracle helpers
# ---------------------------------------------------------------------------------------------


def _kp():
    """Import the kafka-python pieces lazily (the client sessions don't need them)."""
    import kafka
    import kafka.protocol.admin
    import kafka.protocol.consumer
    import kafka.protocol.metadata
    import kafka.protocol.producer
    from kafka.protocol.api_key import ApiKey
    from kafka.protocol.api_message import ApiMessage

    def subclasses(cls):
        for sub in cls.__subclasses__():
            yield sub
            yield from subclasses(sub)

    requests: dict[int, Any] = {}
    responses: dict[int, Any] = {}
    for cls in subclasses(ApiMessage):
        if getattr(cls, "_class_version", None) is not None or cls.__dict__.get("_json") is None:
            continue
        (requests if cls.is_request() else responses)[cls.API_KEY] = cls
    return kafka, ApiKey, requests, responses


def build_fetch_batch() -> bytes:
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for ts, key, value, headers in FETCH_RECORDS:
        builder.append(ts, key, value, headers)
    builder.close()
    buf = bytearray(builder.buffer())
    struct.pack_into(">i", buf, 12, 0)  # partitionLeaderEpoch = 0 (not covered by the CRC)
    return bytes(buf)


def oracle_decode_records(raw: bytes) -> list[dict[str, Any]]:
    """Decode record batches with kafka-python (capture-time sanity check only)."""
    from kafka.record.memory_records import MemoryRecords

    out = []
    for batch in MemoryRecords(bytes(raw)):
        assert batch.validate_crc(), "kafka-python says the batch CRC is wrong"
        for rec in batch:
            out.append(
                {
                    "compression": batch.compression_type,
                    "producer_id": batch.producer_id,
                    "key": rec.key,
                    "value": rec.value,
                    "headers": [(k, v) for k, v in rec.headers],
                    "timestamp": rec.timestamp,
                }
            )
    return out


# ---------------------------------------------------------------------------------------------
# The capture server
# ---------------------------------------------------------------------------------------------


@dataclass
class Captured:
    seq: int
    session: str
    conn: int
    frame: bytes
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: Any = None  # kafka-python decoded request (None if undecodable)


@dataclass
class SessionState:
    produced: dict[tuple[str, int], int] = field(default_factory=dict)


def parse_header_prefix(frame: bytes) -> tuple[int, int, int, str | None]:
    api_key, api_version, corr, cid_len = struct.unpack_from(">hhih", frame, 0)
    client_id = None if cid_len < 0 else frame[10 : 10 + cid_len].decode("utf-8")
    return api_key, api_version, corr, client_id


class CaptureServer:
    def __init__(self) -> None:
        self.kafka, self.ApiKey, self.requests, self.responses = _kp()
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.lock = threading.Lock()
        self.frames: list[Captured] = []
        self.session = "idle"
        self.state = SessionState()
        self.fetch_batch = build_fetch_batch()
        self.high_watermark = len(FETCH_RECORDS)
        self.problems: list[str] = []
        self._conn_seq = 0
        self._closing = False
        self._conns: list[socket.socket] = []
        self._thread = threading.Thread(
            target=self._accept_loop, name="capture-accept", daemon=True
        )

    # -- lifecycle ----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._closing = True
        with contextlib.suppress(OSError):
            self.sock.close()
        for c in list(self._conns):
            with contextlib.suppress(OSError):
                c.close()

    def begin_session(self, name: str) -> None:
        with self.lock:
            self.session = name
            self.state = SessionState()

    def _accept_loop(self) -> None:
        while not self._closing:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self._conn_seq += 1
                cid = self._conn_seq
                self._conns.append(conn)
            threading.Thread(
                target=self._serve_conn, args=(conn, cid), daemon=True, name=f"capture-conn-{cid}"
            ).start()

    # -- per-connection loop ------------------------------------------------------------------
    @staticmethod
    def _recv_exact(conn: socket.socket, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _serve_conn(self, conn: socket.socket, conn_id: int) -> None:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                size_b = self._recv_exact(conn, 4)
                if size_b is None:
                    return
                (size,) = struct.unpack(">i", size_b)
                if not 0 < size < 64 << 20:
                    self._problem(f"conn {conn_id}: bad frame size {size}")
                    return
                frame = self._recv_exact(conn, size)
                if frame is None:
                    return
                api_key, api_version, corr, client_id = parse_header_prefix(frame)
                decoded = self._oracle_decode(frame, api_key, api_version)
                with self.lock:
                    cap = Captured(
                        len(self.frames),
                        self.session,
                        conn_id,
                        frame,
                        api_key,
                        api_version,
                        corr,
                        client_id,
                        decoded,
                    )
                    self.frames.append(cap)
                try:
                    response = self._respond(cap)
                except Exception:
                    self._problem(
                        f"{cap.session}: error answering api {api_key} "
                        f"v{api_version}:\n{traceback.format_exc()}"
                    )
                    return
                if response is False:
                    return  # close the connection (unsupported API)
                if response is not None:
                    conn.sendall(response)
        except OSError:
            return
        finally:
            with contextlib.suppress(OSError):
                conn.close()

    def _problem(self, msg: str) -> None:
        log("PROBLEM: " + msg)
        with self.lock:
            self.problems.append(msg)

    def _oracle_decode(self, frame: bytes, api_key: int, api_version: int) -> Any:
        cls = self.requests.get(api_key)
        if cls is None or not 0 <= api_version <= cls.max_version:
            return None
        try:
            return cls.decode(frame, version=api_version, header=True)
        except Exception as exc:
            self._problem(f"kafka-python cannot decode api {api_key} v{api_version}: {exc!r}")
            return None

    # -- responses ------------------------------------------------------------------------------
    def _encode(self, api_key: int, version: int, corr: int, **fields: Any) -> bytes:
        resp = self.responses[api_key][version](**fields)
        resp.with_header(correlation_id=corr)
        return bytes(resp.encode(header=True, framed=True))

    def _respond(self, cap: Captured) -> bytes | bool | None:
        k, v = cap.api_key, cap.api_version
        if k == 18:
            return self._api_versions(cap)
        rng = ADVERTISED.get(k)
        if rng is None or not rng[0] <= v <= rng[1]:
            self._problem(f"{cap.session}: unadvertised api {k} v{v}; closing connection")
            return False
        handler = {
            0: self._produce,
            1: self._fetch,
            2: self._list_offsets,
            3: self._metadata,
            10: self._find_coordinator,
            22: self._init_producer_id,
            23: self._offset_for_leader_epoch,
        }.get(k)
        if handler is None:
            self._problem(f"{cap.session}: no handler for api {k} v{v}; closing connection")
            return False
        if cap.request is None:
            self._problem(f"{cap.session}: could not decode api {k} v{v}; closing connection")
            return False
        return handler(cap, cap.request)

    def _api_versions(self, cap: Captured) -> bytes:
        lo, hi = ADVERTISED[18]
        R = self.responses[18]
        if not lo <= cap.api_version <= hi:
            # Unsupported ApiVersions version: error 35 in the v0 body layout, header v0.
            resp = R[0](
                error_code=35, api_keys=[R.ApiVersion(api_key=18, min_version=lo, max_version=hi)]
            )
            resp.with_header(correlation_id=cap.correlation_id)
            return bytes(resp.encode(header=True, framed=True))
        keys = [
            R.ApiVersion(api_key=key, min_version=a, max_version=b)
            for key, (a, b) in sorted(ADVERTISED.items())
        ]
        return self._encode(
            18, cap.api_version, cap.correlation_id, error_code=0, api_keys=keys, throttle_time_ms=0
        )

    def _metadata(self, cap: Captured, req: Any) -> bytes:
        R = self.responses[3]
        v = cap.api_version
        asked = None if req.topics is None else [t.name for t in req.topics]
        if v == 0 and asked == []:
            asked = None  # v0: empty list means "all topics"
        names = [TOPIC] if asked is None else asked
        topics = []
        for name in names:
            if name == TOPIC:
                part = R.MetadataResponseTopic.MetadataResponsePartition(
                    error_code=0,
                    partition_index=PARTITION,
                    leader_id=NODE_ID,
                    leader_epoch=0,
                    replica_nodes=[NODE_ID],
                    isr_nodes=[NODE_ID],
                    offline_replicas=[],
                )
                topics.append(
                    R.MetadataResponseTopic(
                        error_code=0,
                        name=name,
                        topic_id=TOPIC_ID,
                        is_internal=False,
                        partitions=[part],
                    )
                )
            else:
                topics.append(
                    R.MetadataResponseTopic(
                        error_code=3,
                        name=name,
                        topic_id=uuid.UUID(int=0),
                        is_internal=False,
                        partitions=[],
                    )
                )
        broker = R.MetadataResponseBroker(
            node_id=NODE_ID, host="127.0.0.1", port=self.port, rack=None
        )
        return self._encode(
            3,
            v,
            cap.correlation_id,
            throttle_time_ms=0,
            brokers=[broker],
            cluster_id=CLUSTER_ID,
            controller_id=NODE_ID,
            topics=topics,
        )

    def _produce(self, cap: Captured, req: Any) -> bytes | None:
        R = self.responses[0]
        topics = []
        for t in req.topic_data:
            parts = []
            for p in t.partition_data:
                from kafka.record.memory_records import MemoryRecords

                count = sum(b.last_offset_delta + 1 for b in MemoryRecords(bytes(p.records)))
                with self.lock:
                    base = self.state.produced.get((t.name, p.index), 0)
                    self.state.produced[(t.name, p.index)] = base + count
                ok = t.name == TOPIC and p.index == PARTITION
                parts.append(
                    R.TopicProduceResponse.PartitionProduceResponse(
                        index=p.index,
                        error_code=0 if ok else 3,
                        base_offset=base if ok else -1,
                        log_append_time_ms=-1,
                        log_start_offset=0,
                        record_errors=[],
                        error_message=None,
                    )
                )
            topics.append(R.TopicProduceResponse(name=t.name, partition_responses=parts))
        if req.acks == 0:
            return None
        return self._encode(
            0, cap.api_version, cap.correlation_id, responses=topics, throttle_time_ms=0
        )

    def _fetch(self, cap: Captured, req: Any) -> bytes:
        R = self.responses[1]
        PD = R.FetchableTopicResponse.PartitionData
        any_data = False
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                ok = t.topic == TOPIC and p.partition == PARTITION
                records = b""
                if ok and p.fetch_offset < self.high_watermark:
                    records = self.fetch_batch  # one batch holding offsets 0..2
                    any_data = True
                parts.append(
                    PD(
                        partition_index=p.partition,
                        error_code=0 if ok else 3,
                        high_watermark=self.high_watermark if ok else -1,
                        last_stable_offset=self.high_watermark if ok else -1,
                        log_start_offset=0 if ok else -1,
                        aborted_transactions=None,
                        preferred_read_replica=-1,
                        records=records,
                    )
                )
            topics.append(R.FetchableTopicResponse(topic=t.topic, partitions=parts))
        if not any_data:
            time.sleep(min(req.max_wait_ms, 200) / 1000.0)
        # Grant a fetch session (KIP-227) to clients that ask for one, so that the follow-up
        # incremental fetch requests (session id/epoch set, often no partitions) get captured.
        session_id = 0
        if cap.api_version >= 7 and req.session_epoch >= 0:
            session_id = req.session_id or FETCH_SESSION_ID
        return self._encode(
            1,
            cap.api_version,
            cap.correlation_id,
            throttle_time_ms=0,
            error_code=0,
            session_id=session_id,
            responses=topics,
        )

    def _list_offsets(self, cap: Captured, req: Any) -> bytes:
        R = self.responses[2]
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                ts = p.timestamp
                offset = {-2: 0, -1: self.high_watermark, -3: self.high_watermark - 1}.get(ts, 0)
                ok = t.name == TOPIC and p.partition_index == PARTITION
                parts.append(
                    R.ListOffsetsTopicResponse.ListOffsetsPartitionResponse(
                        partition_index=p.partition_index,
                        error_code=0 if ok else 3,
                        timestamp=-1,
                        offset=offset if ok else -1,
                        leader_epoch=0 if ok else -1,
                    )
                )
            topics.append(R.ListOffsetsTopicResponse(name=t.name, partitions=parts))
        return self._encode(
            2, cap.api_version, cap.correlation_id, throttle_time_ms=0, topics=topics
        )

    def _offset_for_leader_epoch(self, cap: Captured, req: Any) -> bytes:
        R = self.responses[23]
        topics = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                ok = t.topic == TOPIC and p.partition == PARTITION
                parts.append(
                    R.OffsetForLeaderTopicResult.EpochEndOffset(
                        error_code=0 if ok else 3,
                        partition=p.partition,
                        leader_epoch=0 if ok else -1,
                        end_offset=self.high_watermark if ok else -1,
                    )
                )
            topics.append(R.OffsetForLeaderTopicResult(topic=t.topic, partitions=parts))
        return self._encode(
            23, cap.api_version, cap.correlation_id, throttle_time_ms=0, topics=topics
        )

    def _init_producer_id(self, cap: Captured, req: Any) -> bytes:
        return self._encode(
            22,
            cap.api_version,
            cap.correlation_id,
            throttle_time_ms=0,
            error_code=0,
            producer_id=PRODUCER_ID,
            producer_epoch=0,
        )

    def _find_coordinator(self, cap: Captured, req: Any) -> bytes:
        R = self.responses[10]
        v = cap.api_version
        if v >= 4:
            coords = [
                R.Coordinator(
                    key=key,
                    node_id=NODE_ID,
                    host="127.0.0.1",
                    port=self.port,
                    error_code=0,
                    error_message=None,
                )
                for key in req.coordinator_keys
            ]
            return self._encode(10, v, cap.correlation_id, throttle_time_ms=0, coordinators=coords)
        return self._encode(
            10,
            v,
            cap.correlation_id,
            throttle_time_ms=0,
            error_code=0,
            error_message=None,
            node_id=NODE_ID,
            host="127.0.0.1",
            port=self.port,
        )


# ---------------------------------------------------------------------------------------------
# Client sessions (each runs in a child process: --session NAME --port N)
# ---------------------------------------------------------------------------------------------


def _b(s: str | None) -> bytes | None:
    return None if s is None else s.encode("utf-8")


def session_kafka_python_produce(port: int, codec: str) -> dict:
    from kafka import KafkaProducer

    producer = KafkaProducer(
        bootstrap_servers=f"127.0.0.1:{port}",
        compression_type=None if codec == "none" else codec,
        linger_ms=500,
        request_timeout_ms=10_000,
        max_block_ms=15_000,
    )
    futures = [
        producer.send(
            TOPIC,
            key=_b(r["key"]),
            value=_b(r["value"]),
            partition=PARTITION,
            headers=[(k, _b(hv)) for k, hv in r["headers"]],
            timestamp_ms=r["timestamp"],
        )
        for r in PRODUCE_RECORDS
    ]
    producer.flush(timeout=15)
    offsets = [f.get(timeout=15).offset for f in futures]
    producer.close(timeout=5)
    return {"offsets": offsets}


def session_kafka_python_consume(port: int) -> dict:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(TOPIC, PARTITION)
    consumer = KafkaConsumer(
        bootstrap_servers=f"127.0.0.1:{port}",
        group_id=None,
        enable_auto_commit=False,
        request_timeout_ms=10_000,
    )
    consumer.assign([tp])
    consumer.seek(tp, 0)
    got = []
    deadline = time.monotonic() + 20
    while len(got) < len(FETCH_RECORDS) and time.monotonic() < deadline:
        for recs in consumer.poll(timeout_ms=1000).values():
            got.extend(r.offset for r in recs)
    consumer.poll(timeout_ms=1000)  # one more round: the follow-up (incremental) fetch
    # ListOffsets (earliest / latest)
    begin = consumer.beginning_offsets([tp])[tp]
    end = consumer.end_offsets([tp])[tp]
    consumer.close()
    return {"offsets": got, "beginning": begin, "end": end}


def session_confluent_produce(port: int, codec: str) -> dict:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": f"127.0.0.1:{port}", "compression.type": codec, "linger.ms": 200}
    )
    results: list[Any] = []

    def on_delivery(err, msg):
        results.append(str(err) if err else msg.offset())

    for r in PRODUCE_RECORDS:
        producer.produce(
            TOPIC,
            partition=PARTITION,
            key=_b(r["key"]),
            value=_b(r["value"]),
            headers=[(k, _b(hv)) for k, hv in r["headers"]],
            timestamp=r["timestamp"],
            on_delivery=on_delivery,
        )
    left = producer.flush(15)
    return {"delivered": results, "left": left}


def session_confluent_consume(port: int) -> dict:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{port}",
            "group.id": "golden-group",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    # leader_epoch=0 makes librdkafka validate the position (OffsetForLeaderEpoch, KIP-320)
    consumer.assign([TopicPartition(TOPIC, PARTITION, 0, leader_epoch=0)])
    got = []
    deadline = time.monotonic() + 20
    while len(got) < len(FETCH_RECORDS) and time.monotonic() < deadline:
        msg = consumer.poll(1.0)
        if msg is not None and not msg.error():
            got.append(msg.offset())
    consumer.poll(1.0)  # one more round: the follow-up (incremental) fetch
    # ListOffsets (earliest / latest) via a non-cached watermark query
    low, high = consumer.get_watermark_offsets(
        TopicPartition(TOPIC, PARTITION), timeout=10, cached=False
    )
    consumer.close()
    return {"offsets": got, "low": low, "high": high}


SESSIONS = {
    "kafka-python-produce": session_kafka_python_produce,
    "kafka-python-consume": session_kafka_python_consume,
    "confluent-produce": session_confluent_produce,
    "confluent-consume": session_confluent_consume,
}


def run_child(name: str, port: int, codec: str | None) -> None:
    fn = SESSIONS[name]
    out = fn(port, codec) if codec is not None else fn(port)
    print(json.dumps(out))


# ---------------------------------------------------------------------------------------------
# Orchestration
# ---------------------------------------------------------------------------------------------


@dataclass
class Plan:
    client: str  # folder name
    session: str  # label
    argv: list[str]
    codec: str | None = None
    stdin: str | None = None


def client_versions() -> dict[str, str]:
    import confluent_kafka
    import kafka

    kcat_v = subprocess.run([KCAT, "-V"], capture_output=True, text=True, check=False).stdout
    # "Version 1.7.1 (JSON, ..., librdkafka 2.0.2 builtin.features=...)"
    kcat_line = next(ln.strip() for ln in kcat_v.splitlines() if ln.startswith("Version"))
    kcat_version = kcat_line.split()[1]
    kcat_librdkafka = kcat_line.split("librdkafka ")[1].split()[0]
    rdkafka = confluent_kafka.libversion()[0]
    return {
        "kafka-python": kafka.__version__,
        "confluent-kafka": f"{importlib.metadata.version('confluent-kafka')} (librdkafka {rdkafka})",
        "kcat": f"{kcat_version} (librdkafka {kcat_librdkafka})",
    }


def make_plans(port: int) -> list[Plan]:
    me = [sys.executable, str(Path(__file__).resolve())]
    plans = []
    for codec in CODECS:
        plans.append(
            Plan(
                "kafka-python",
                f"kafka-python-produce-{codec}",
                [*me, "--session", "kafka-python-produce", "--port", str(port), "--codec", codec],
                codec,
            )
        )
    plans.append(
        Plan(
            "kafka-python",
            "kafka-python-consume",
            [*me, "--session", "kafka-python-consume", "--port", str(port)],
        )
    )
    for codec in CODECS:
        plans.append(
            Plan(
                "confluent-kafka",
                f"confluent-produce-{codec}",
                [*me, "--session", "confluent-produce", "--port", str(port), "--codec", codec],
                codec,
            )
        )
    plans.append(
        Plan(
            "confluent-kafka",
            "confluent-consume",
            [*me, "--session", "confluent-consume", "--port", str(port)],
        )
    )
    lines = "".join(f"{k}:{v}\n" for k, v in KCAT_LINES)
    for codec in CODECS:
        plans.append(
            Plan(
                "kcat",
                f"kcat-produce-{codec}",
                [
                    KCAT,
                    "-P",
                    "-b",
                    f"127.0.0.1:{port}",
                    "-t",
                    TOPIC,
                    "-z",
                    codec,
                    "-K:",
                    "-H",
                    f"{KCAT_HEADER[0]}={KCAT_HEADER[1]}",
                    "-X",
                    "linger.ms=200",
                ],
                codec,
                stdin=lines,
            )
        )
    plans.append(
        Plan(
            "kcat",
            "kcat-consume",
            [
                KCAT,
                "-C",
                "-b",
                f"127.0.0.1:{port}",
                "-t",
                TOPIC,
                "-p",
                "0",
                "-o",
                "0",
                "-c",
                "1",
                "-e",
            ],
        )
    )
    return plans


def run_plans(server: CaptureServer, plans: list[Plan]) -> dict[str, str]:
    outputs = {}
    env = dict(os.environ, PYTHONPATH="", PYTHONHASHSEED="0")
    for plan in plans:
        server.begin_session(plan.session)
        log(f"session {plan.session}")
        try:
            proc = subprocess.run(
                plan.argv,
                input=plan.stdin,
                capture_output=True,
                text=True,
                timeout=SESSION_TIMEOUT_S,
                env=env,
                cwd=REPO,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise SystemExit(f"session {plan.session} timed out") from None
        if proc.returncode != 0:
            raise SystemExit(
                f"session {plan.session} failed (rc={proc.returncode}):\n"
                f"{proc.stdout}\n{proc.stderr}"
            )
        outputs[plan.session] = proc.stdout.strip()
        log(f"  -> {proc.stdout.strip()[:200]!r}")
        time.sleep(0.3)  # let stray connections from the finished process drain
    server.begin_session("idle")
    return outputs


def dedupe_key(cap: Captured) -> tuple:
    masked = bytearray(cap.frame)
    masked[4:8] = b"\0\0\0\0"  # correlation id
    return (cap.api_key, cap.api_version, bytes(masked))


def select_frames(server: CaptureServer, plans: list[Plan]) -> list[tuple[Plan, Captured]]:
    by_session = {p.session: p for p in plans}
    seen: set[tuple] = set()
    per_api: dict[tuple[str, int], int] = {}
    chosen = []
    for cap in server.frames:
        plan = by_session.get(cap.session)
        if plan is None:
            continue
        key = (plan.client, *dedupe_key(cap))
        if key in seen:
            continue
        seen.add(key)
        n = per_api.get((plan.client, cap.api_key), 0)
        if cap.api_key != 0 and n >= MAX_PER_API:
            continue
        per_api[(plan.client, cap.api_key)] = n + 1
        chosen.append((plan, cap))
    return chosen


def api_name(ApiKey: Any, key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return f"Api{key}"


def expected_produce_records(plan: Plan, cap: Captured) -> tuple[list[dict], str]:
    """The records this Produce frame must contain (from the scenario), checked against
    kafka-python's decoding of the captured frame."""
    raw = b"".join(bytes(p.records) for t in cap.request.topic_data for p in t.partition_data)
    decoded = oracle_decode_records(raw)
    if plan.client == "kcat":
        expected = [
            {"key": k, "value": v, "headers": [list(KCAT_HEADER)], "timestamp": None}
            for k, v in KCAT_LINES
        ]
        note = (
            "timestamps are kcat's wall clock at capture time (no option to fix them); "
            "the values here were read back with kafka-python"
        )
        for exp, got in zip(expected, decoded, strict=False):
            exp["timestamp"] = got["timestamp"]
    else:
        expected = [dict(r, headers=[list(h) for h in r["headers"]]) for r in PRODUCE_RECORDS]
        note = "timestamps set explicitly by the producer"
    got_cmp = [
        {
            "key": None if d["key"] is None else d["key"].decode(),
            "value": None if d["value"] is None else d["value"].decode(),
            "headers": [[k, None if hv is None else hv.decode()] for k, hv in d["headers"]],
            "timestamp": d["timestamp"],
        }
        for d in decoded
    ]
    if got_cmp != expected:
        raise SystemExit(
            f"{plan.session}: Produce frame records differ from the scenario\n"
            f"expected {expected}\ngot {got_cmp}"
        )
    codecs = {d["compression"] for d in decoded}
    if codecs != {CODEC_IDS[plan.codec]}:
        raise SystemExit(f"{plan.session}: batch codec {codecs} != {plan.codec}")
    return expected, note


def manifest_entry(
    plan: Plan, cap: Captured, fname: str, versions: dict[str, str], ApiKey: Any
) -> dict:
    e: dict[str, Any] = {
        "file": fname,
        "client": plan.client,
        "client_version": versions[plan.client],
        "session": plan.session,
        "api_key": cap.api_key,
        "api_name": api_name(ApiKey, cap.api_key),
        "api_version": cap.api_version,
        "correlation_id": cap.correlation_id,
        "client_id": cap.client_id,
        "size": len(cap.frame),
        "sha256": hashlib.sha256(cap.frame).hexdigest(),
    }
    req = cap.request
    k = cap.api_key
    if k == 18:
        e["supported_by_server"] = ADVERTISED[18][0] <= cap.api_version <= ADVERTISED[18][1]
        if req is not None and cap.api_version >= 3:
            e["client_software_name"] = req.client_software_name
            e["client_software_version"] = req.client_software_version
    elif k == 3:
        e["topics"] = None if req.topics is None else [t.name for t in req.topics]
        if cap.api_version >= 4:
            e["allow_auto_topic_creation"] = req.allow_auto_topic_creation
    elif k == 0:
        (t,) = req.topic_data
        (p,) = t.partition_data
        records, note = expected_produce_records(plan, cap)
        batch_pid = oracle_decode_records(bytes(p.records))[0]["producer_id"]
        e.update(
            {
                "topic": t.name,
                "partition": p.index,
                "codec": plan.codec,
                "compression": CODEC_IDS[plan.codec],
                "acks": req.acks,
                "transactional_id": req.transactional_id if cap.api_version >= 3 else None,
                "producer_id": batch_pid,
                "records": records,
                "records_note": note,
            }
        )
    elif k == 1:
        parts = [
            {
                "topic": t.topic,
                "partition": p.partition,
                "fetch_offset": p.fetch_offset,
                "partition_max_bytes": p.partition_max_bytes,
            }
            for t in req.topics
            for p in t.partitions
        ]
        e.update(
            {
                "fetch": parts,
                "topic": parts[0]["topic"] if parts else None,
                "partition": parts[0]["partition"] if parts else None,
                "fetch_offset": parts[0]["fetch_offset"] if parts else None,
                "replica_id": req.replica_id if cap.api_version <= 14 else None,
                "max_wait_ms": req.max_wait_ms,
                "min_bytes": req.min_bytes,
                "max_bytes": req.max_bytes,
                "isolation_level": req.isolation_level,
                "session_id": req.session_id,
                "session_epoch": req.session_epoch,
            }
        )
    elif k == 2:
        e["replica_id"] = req.replica_id
        e["isolation_level"] = req.isolation_level if cap.api_version >= 2 else None
        e["partitions"] = [
            {"topic": t.name, "partition": p.partition_index, "timestamp": p.timestamp}
            for t in req.topics
            for p in t.partitions
        ]
    elif k == 23:
        e["partitions"] = [
            {
                "topic": t.topic,
                "partition": p.partition,
                "current_leader_epoch": p.current_leader_epoch,
                "leader_epoch": p.leader_epoch,
            }
            for t in req.topics
            for p in t.partitions
        ]
    elif k == 22:
        e["transactional_id"] = req.transactional_id
        e["transaction_timeout_ms"] = req.transaction_timeout_ms
    elif k == 10:
        e["key_type"] = req.key_type
        e["keys"] = list(req.coordinator_keys) if cap.api_version >= 4 else [req.key]
    return e


README = """\
# Golden request frames

Real Kafka request frames captured from real client sessions, for decode/re-encode tests
(`tests/unit/protocol/test_golden.py`). Each `.bin` file is one request exactly as the client
sent it, **without** the 4-byte size prefix: request header (v1, or v2 for flexible versions)
followed by the request body.

Regenerate with (deletes and rewrites this folder):

    .venv/bin/python scripts/capture_golden.py

How they were captured: `scripts/capture_golden.py` starts a loopback-only capture server
(127.0.0.1, free port) that pretends to be a one-node Kafka 3.8-ish broker: it advertises the
API ranges from `/work/shared/kafka-protocol/NOTES.md`, answers Metadata with one broker leading
topic `golden` (1 partition, leader epoch 0), Produce with success, Fetch with one 3-record
batch, and ListOffsets / OffsetForLeaderEpoch / InitProducerId / FindCoordinator as needed.
Responses are built with kafka-python's protocol classes and record builder as an independent
oracle (no Odradek code involved). Every client session runs as its own process:

{sessions}

Client versions:

{versions}

API versions each client actually sent (all captured frames, before selection):

{seen}

Selection: identical frames (ignoring the correlation id) are kept once per client, and at most
{max_per_api} distinct frames per client per API (all distinct Produce frames are kept).
Frame numbering (`NNN`) follows capture order within each client folder; exact correlation ids
and the order between a client's connections can differ between runs. Some bytes change on every
run by nature: kcat's record timestamps (wall clock) and kafka-python's gzip output (Python's
gzip header carries the compression time).

`manifest.json` describes every file: client, client version, api key/name/version, correlation
id, client id, size and sha256, plus per API: Produce — topic, partition, codec, compression id,
acks, producer id and the exact records (key, value, headers, timestamp; strings are UTF-8,
`null` = null); Fetch — topic, partition, fetch offset (and the other top-level fields);
Metadata — topics asked (`null` = all topics); ListOffsets / OffsetForLeaderEpoch — partitions.
Produce records come from the scenario in the script (kcat's timestamps are its wall clock at
capture time, read back with kafka-python); the other per-API fields are kafka-python's decoding
of the captured frame. At capture time every Produce frame is checked with kafka-python: CRC
valid, codec as requested, records equal to the scenario.
"""


def write_output(
    server: CaptureServer,
    chosen: list[tuple[Plan, Captured]],
    plans: list[Plan],
    versions: dict[str, str],
) -> list[dict]:
    ApiKey = server.ApiKey
    if GOLDEN_DIR.exists():
        for child in GOLDEN_DIR.iterdir():
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
    GOLDEN_DIR.mkdir(parents=True, exist_ok=True)
    counters: dict[str, int] = {}
    entries = []
    for plan, cap in chosen:
        n = counters[plan.client] = counters.get(plan.client, 0) + 1
        suffix = f"-{plan.codec}" if cap.api_key == 0 else ""
        fname = (
            f"{plan.client}/{n:03d}-{api_name(ApiKey, cap.api_key)}-v{cap.api_version}{suffix}.bin"
        )
        path = GOLDEN_DIR / fname
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(cap.frame)
        entries.append(manifest_entry(plan, cap, fname, versions, ApiKey))
    manifest = {
        "description": "Request frames (no size prefix) captured by scripts/capture_golden.py",
        "clients": versions,
        "server_advertised_versions": {str(k): list(v) for k, v in sorted(ADVERTISED.items())},
        "frames": entries,
    }
    (GOLDEN_DIR / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    sessions = "\n".join(f"- `{p.session}`: `{' '.join(_pretty_argv(p))}`" for p in plans)
    vers = "\n".join(f"- {k}: {v}" for k, v in versions.items())
    (GOLDEN_DIR / "README.md").write_text(
        README.format(
            sessions=sessions,
            versions=vers,
            seen=_versions_seen(server, plans),
            max_per_api=MAX_PER_API,
        )
    )
    return entries


def _versions_seen(server: CaptureServer, plans: list[Plan]) -> str:
    client_of = {p.session: p.client for p in plans}
    seen: dict[str, dict[int, set[int]]] = {}
    for cap in server.frames:
        client = client_of.get(cap.session)
        if client is not None:
            seen.setdefault(client, {}).setdefault(cap.api_key, set()).add(cap.api_version)
    lines = []
    for client, apis in seen.items():
        desc = ", ".join(
            f"{api_name(server.ApiKey, k)} v{'/'.join(map(str, sorted(vs)))}"
            for k, vs in sorted(apis.items())
        )
        lines.append(f"- {client}: {desc}")
    return "\n".join(lines)


def _pretty_argv(p: Plan) -> list[str]:
    out = []
    for a in p.argv:
        if a == sys.executable:
            a = ".venv/bin/python"
        elif a.endswith("capture_golden.py"):
            a = "scripts/capture_golden.py"
        elif a.startswith("127.0.0.1:") or (a.isdigit() and out and out[-1] == "--port"):
            a = "PORT" if out[-1] == "--port" else "127.0.0.1:PORT"
        out.append(a)
    if p.stdin:
        out.append("<<< " + repr(p.stdin))
    return out


def summarise(server: CaptureServer, ApiKey: Any) -> None:
    seen: dict[str, dict[str, set]] = {}
    for cap in server.frames:
        d = seen.setdefault(cap.session, {})
        d.setdefault(api_name(ApiKey, cap.api_key), set()).add(cap.api_version)
    for session, apis in seen.items():
        desc = ", ".join(f"{n} v{'/'.join(map(str, sorted(vs)))}" for n, vs in apis.items())
        log(f"{session}: {desc}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--session", choices=sorted(SESSIONS), help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--codec", choices=CODECS, help=argparse.SUPPRESS)
    ap.add_argument("--dry-run", action="store_true", help="capture and summarise only")
    args = ap.parse_args()
    if args.session:
        run_child(args.session, args.port, args.codec)
        return 0

    versions = client_versions()
    server = CaptureServer()
    server.start()
    log(f"capture server on 127.0.0.1:{server.port}")
    try:
        plans = make_plans(server.port)
        run_plans(server, plans)
    finally:
        server.close()
    summarise(server, server.ApiKey)
    if server.problems and not args.dry_run:
        log(f"{len(server.problems)} problem(s) during capture (see above); nothing written")
        return 1
    chosen = select_frames(server, plans)
    if args.dry_run:
        for plan, cap in chosen:
            log(
                f"would keep {plan.client} {api_name(server.ApiKey, cap.api_key)} "
                f"v{cap.api_version} ({len(cap.frame)} bytes)"
            )
        return 0
    entries = write_output(server, chosen, plans, versions)
    total = sum(e["size"] for e in entries)
    log(f"wrote {len(entries)} frames ({total} bytes) to {GOLDEN_DIR.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
