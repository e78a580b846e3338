"""Storage integrity on the append and fetch paths, through a real broker and real files:
a fetch that meets an invalid batch answers CORRUPT_MESSAGE instead of skipping it, and an
append that fails leaves the segment exactly as it was (all-or-nothing)."""

from __future__ import annotations

import resource
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages import (
    CreateTopicsRequest,
    FetchRequest,
    IncrementalAlterConfigsRequest,
    ProduceRequest,
)
from protocol.messages import create_topics_request as ct
from protocol.messages import fetch_request as fr
from protocol.messages import incremental_alter_configs_request as iac
from protocol.messages import produce_request as pr
from protocol.records import (
    Record,
    RecordsError,
    build_batch,
    decode_records,
    iter_batches,
    read_header,
)
from tests.broker_process import BrokerProcess
from tests.raw_client import RawConnection

TOPIC = "integrity"


def create_topic(conn: RawConnection, name: str, partitions: int = 1, **configs: str) -> int:
    resp = conn.call(19, 7, CreateTopicsRequest(timeout_ms=10000, topics=[ct.CreatableTopic(
        name=name, num_partitions=partitions, replication_factor=1,
        configs=[ct.CreatableTopicConfig(name=k.replace("_", "."), value=v) for k, v in configs.items()])]))
    return resp.topics[0].error_code


def produce(conn: RawConnection, topic: str, values: list[bytes], partition: int = 0) -> tuple[int, int]:
    """One batch of `values` with acks=1: (error code, base offset)."""
    batch = build_batch([Record(0, i, i, None, v, []) for i, v in enumerate(values)], base_timestamp=1)
    resp = conn.call(0, 9, ProduceRequest(acks=1, timeout_ms=10000, topic_data=[
        pr.TopicProduceData(name=topic, partition_data=[pr.PartitionProduceData(index=partition, records=batch)])]))
    p = resp.responses[0].partition_responses[0]
    return p.error_code, p.base_offset


def fetch(conn: RawConnection, topic: str, offset: int, max_bytes: int = 1 << 20) -> Any:
    resp = conn.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes,
        session_epoch=-1, topics=[fr.FetchTopic(topic=topic, partitions=[
            fr.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=max_bytes)])]))
    return resp.responses[0].partitions[0]


def record_values(data: bytes) -> list[bytes]:
    """The values of the batches in a fetch answer, up to the first batch a client cannot
    parse (as a consumer, it stops there and fetches again from that offset)."""
    out: list[bytes] = []
    try:
        for pos, size in iter_batches(data):
            _h, records = decode_records(data[pos : pos + size])
            out += [r.value for r in records]  # type: ignore[misc]
    except RecordsError:
        pass
    return out


def segments(part_dir: Path) -> list[Path]:
    return sorted(part_dir.glob("*.log"))


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def started(data_dir: Path) -> Iterator[list[BrokerProcess]]:
    """Brokers a test starts go in this list; each is stopped at the end."""
    brokers: list[BrokerProcess] = []
    yield brokers
    for b in brokers:
        b.stop()


# -- a fetch that meets an invalid batch --------------------------------------------------------


def _corrupt_length(buf: bytearray, pos: int) -> None:
    buf[pos + 8 : pos + 12] = struct.pack(">i", -157765759)


def _corrupt_magic(buf: bytearray, pos: int) -> None:
    buf[pos + 16] = 159


def _corrupt_base_offset(buf: bytearray, pos: int) -> None:
    buf[pos : pos + 8] = struct.pack(">q", 0)  # offsets going backwards inside the segment


@pytest.mark.parametrize("corrupt", [_corrupt_length, _corrupt_magic, _corrupt_base_offset],
                         ids=["length", "magic", "base-offset"])
def test_fetch_of_a_corrupt_batch_in_an_old_segment_answers_corrupt_message(
    data_dir: Path, started: list[BrokerProcess], corrupt: Any
) -> None:
    """A batch damaged on disk after a clean stop, in a segment that is no longer active: the
    fetch that reaches it answers CORRUPT_MESSAGE (logged once), batches before it are still
    served, and no fetch returns records from after it as if the offsets between were absent.
    Before: the header scan stopped at the bad batch and the read went on in the next segment,
    so consumers silently skipped the rest of the damaged segment."""
    b = BrokerProcess(data_dir, overrides=["auto.create.topics.enable=false"]).start()
    started.append(b)
    with RawConnection(b.port) as conn:
        assert create_topic(conn, TOPIC, segment_bytes="4096") == 0
        for i in range(40):
            err, base = produce(conn, TOPIC, [b"v%d-%d" % (i, j) + b"x" * 100 for j in range(5)])
            assert (err, base) == (0, 5 * i)
    assert b.stop() == 0
    part = data_dir / f"{TOPIC}-0"
    first = segments(part)[0]
    assert len(segments(part)) >= 3
    buf = bytearray(first.read_bytes())
    batches = list(iter_batches(buf))
    assert len(batches) >= 4
    bad_pos = batches[2][0]
    bad_offset = read_header(buf, bad_pos).base_offset
    assert bad_offset == 10
    corrupt(buf, bad_pos)
    first.write_bytes(bytes(buf))

    b2 = BrokerProcess(data_dir, port=b.port, overrides=["auto.create.topics.enable=false"]).start()
    started.append(b2)
    with RawConnection(b2.port) as conn:
        # from 0: the two intact batches before the damage are served (the answer is a file
        # slice, as Kafka's: what follows them is not scanned on the way out)
        p = fetch(conn, TOPIC, 0)
        assert p.error_code == 0
        values = record_values(p.records)
        assert values[:10] == [b"v%d-%d" % (i, j) + b"x" * 100 for i in range(2) for j in range(5)]
        mark = len(b2.lines)
        for _ in range(3):  # a consumer retrying: an error every time, one log line
            p = fetch(conn, TOPIC, bad_offset)
            assert p.error_code == ErrorCode.CORRUPT_MESSAGE, p
            assert not p.records
        b2.wait_for_line("Found invalid batch in log segment", timeout=10, after=mark)
        assert sum("Found invalid batch" in line for line in b2.lines[mark:]) == 1
        # later segments are intact and still served
        p = fetch(conn, TOPIC, 150)
        assert p.error_code == 0 and record_values(p.records)[0].startswith(b"v30-0")


# -- an append that fails ------------------------------------------------------------------------

FSIZE_LIMIT = 200_000  # bytes any file of the broker may reach (RLIMIT_FSIZE): writes past it fail


class FileSizeLimitedBroker(BrokerProcess):
    """A broker whose files cannot grow past FSIZE_LIMIT: a write that crosses it is cut short
    and the next one fails with EFBIG (Python ignores SIGXFSZ), a real partial-write failure
    like a full disk, but only for this process."""

    def _spawn(self, cmd: list[str], ready_marker: str, timeout: float, **popen: Any) -> None:
        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (FSIZE_LIMIT, FSIZE_LIMIT))

        super()._spawn(cmd, ready_marker, timeout, preexec_fn=limit, **popen)


def produce_or_halted(conn: RawConnection, topic: str, values: list[bytes]) -> tuple[int, int] | None:
    """produce(), or None when the broker halted before it answered (its only log dir failed)."""
    try:
        return produce(conn, topic, values)
    except (ConnectionError, EOFError, OSError):
        return None


def read_back(port: int, count: int) -> list[bytes]:
    got: list[bytes] = []
    with RawConnection(port) as conn:
        for _ in range(count + 1):  # bounded: at least one record per fetch until the end
            p = fetch(conn, TOPIC, len(got))
            assert p.error_code == 0
            more = record_values(p.records)
            got += more
            if not more:
                break
    return got


def assert_halted(b: BrokerProcess) -> None:
    """Kafka's rule: the only log dir failed, so the broker halts (exit 1), saying why."""
    assert b.proc is not None and b.proc.wait(timeout=20) == 1, b.log_text()[-3000:]
    b.wait_for_line("Shutdown broker because all log dirs in", timeout=5)
    assert "Traceback" not in b.log_text(), b.log_text()[-3000:]


def test_a_failed_append_leaves_the_segment_as_it_was(data_dir: Path, started: list[BrokerProcess]) -> None:
    """Appends until the .log cannot grow (a write cut short, then EFBIG): the produce gets
    KAFKA_STORAGE_ERROR (or the connection ends: the I/O error took the only log dir offline and
    the broker halts, as Kafka's), and the .log holds exactly the acknowledged batches -- no
    partial batch after them. After a restart (no file-size limit) a batch is appended right
    after them with the next offsets, and every acknowledged record is read back once. Before:
    the partial batch stayed in the file after the failure."""
    overrides = ["auto.create.topics.enable=false", "log.index.size.max.bytes=65536",
                 "log.segment.bytes=1048576"]
    b = FileSizeLimitedBroker(data_dir, overrides=overrides).start()
    started.append(b)
    seg = data_dir / f"{TOPIC}-0" / "00000000000000000000.log"
    acked: list[bytes] = []
    with RawConnection(b.port) as conn:
        assert create_topic(conn, TOPIC) == 0
        answer: tuple[int, int] | None = (0, 0)
        for i in range(FSIZE_LIMIT // 10_000 + 5):
            values = [b"big%d-%d|" % (i, j) + b"x" * 1000 for j in range(10)]
            answer = produce_or_halted(conn, TOPIC, values)
            if answer is None or answer[0]:
                break
            assert answer[1] == len(acked)
            acked += values
        assert answer is None or answer[0] == ErrorCode.KAFKA_STORAGE_ERROR, answer
    assert_halted(b)
    on_disk = seg.read_bytes()
    assert sum(size for _pos, size in iter_batches(on_disk)) == len(on_disk)  # no partial batch
    assert record_values(on_disk) == acked
    assert FSIZE_LIMIT - len(on_disk) > 200
    b2 = BrokerProcess(data_dir, port=b.port, overrides=overrides).start()
    started.append(b2)
    with RawConnection(b2.port) as conn:
        assert produce(conn, TOPIC, [b"small"]) == (0, len(acked))
    acked.append(b"small")
    assert read_back(b2.port, len(acked)) == acked


def alter_topic_config(conn: RawConnection, topic: str, key: str, value: str) -> int:
    resp = conn.call(44, 1, IncrementalAlterConfigsRequest(resources=[iac.AlterConfigsResource(
        resource_type=2, resource_name=topic, configs=[iac.AlterableConfig(name=key, config_operation=0, value=value)])]))
    return resp.responses[0].error_code


def test_a_roll_that_cannot_create_its_files_halts_and_leaves_no_half_made_segment(
    data_dir: Path, started: list[BrokerProcess],
) -> None:
    """The topic's segment.index.bytes is raised past what the broker may write (RLIMIT_FSIZE),
    so the next roll cannot preallocate its indexes (EFBIG): an I/O error of the roll, which
    takes the only log dir offline and halts the broker, as Kafka's (the produce that needed the
    roll is answered KAFKA_STORAGE_ERROR, or its connection ends). No half-made segment is
    left, and after a restart without the limit the same produce rolls and every acknowledged
    record is read back once, in order. Before issue #20 §1b the broker answered
    KAFKA_STORAGE_ERROR and lived on; before that, the OSError escaped the handler, dropping
    the connection and leaving the new .log file and its descriptor behind."""
    b = FileSizeLimitedBroker(data_dir, overrides=["auto.create.topics.enable=false"]).start()
    started.append(b)
    part = data_dir / f"{TOPIC}-0"
    acked: list[bytes] = []
    with RawConnection(b.port) as conn:
        assert create_topic(conn, TOPIC, segment_bytes="4096", segment_index_bytes="4096") == 0
        for i in range(4):  # about 3,700 bytes of a 4,096-byte segment: the next batch rolls
            values = [b"r%d-%d|" % (i, j) + b"x" * 100 for j in range(8)]
            assert produce(conn, TOPIC, values) == (0, len(acked))
            acked += values
        assert len(segments(part)) == 1
        assert alter_topic_config(conn, TOPIC, "segment.index.bytes", str(4 * FSIZE_LIMIT)) == 0
        values = [b"r4-%d|" % j + b"x" * 100 for j in range(8)]
        answer = produce_or_halted(conn, TOPIC, values)
        assert answer is None or answer[0] == ErrorCode.KAFKA_STORAGE_ERROR, answer
    assert_halted(b)
    assert len(segments(part)) == 1 and len(list(part.glob("*.index"))) == 1
    b2 = BrokerProcess(data_dir, port=b.port, overrides=["auto.create.topics.enable=false"]).start()
    started.append(b2)
    with RawConnection(b2.port) as conn:
        assert alter_topic_config(conn, TOPIC, "segment.index.bytes", "4096") == 0
        assert produce(conn, TOPIC, values) == (0, len(acked))
    acked += values
    assert len(segments(part)) == 2
    assert read_back(b2.port, len(acked)) == acked
