"""Partition-count bounds through a real broker: per request (Kafka's 10,000), per broker
(max.broker.partitions), and the open-files limit -- a request can no longer exhaust file
descriptors and leave a broker that cannot restart (tests/fault/test_partition_count.py: many
partitions under a shell's default limit)."""

from __future__ import annotations

import resource
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from protocol.errors import ErrorCode
from protocol.messages import (
    CreatePartitionsRequest,
    CreateTopicsRequest,
    FetchRequest,
    MetadataRequest,
)
from protocol.messages import create_partitions_request as cp
from protocol.messages import create_topics_request as ct
from protocol.messages import fetch_request as fr
from protocol.messages import metadata_request as mr
from tests.broker_process import BrokerProcess
from tests.integration.test_storage_integrity import produce
from tests.raw_client import RawConnection


class LimitedFilesBroker(BrokerProcess):
    """A broker started with RLIMIT_NOFILE = (soft, hard), e.g. a shell's default soft 1024."""

    def __init__(self, log_dir: Path, soft: int, hard: int, **kw: Any) -> None:
        super().__init__(log_dir, **kw)
        self.nofile = (soft, hard)

    def _spawn(self, cmd: list[str], ready_marker: str, timeout: float, **popen: Any) -> None:
        nofile = self.nofile

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_NOFILE, nofile)

        super()._spawn(cmd, ready_marker, timeout, preexec_fn=limit, **popen)


def create_topics(conn: RawConnection, topics: dict[str, int], validate_only: bool = False) -> dict[str, tuple[int, str | None]]:
    resp = conn.call(19, 7, CreateTopicsRequest(timeout_ms=600_000, validate_only=validate_only, topics=[
        ct.CreatableTopic(name=name, num_partitions=n, replication_factor=1) for name, n in topics.items()]))
    return {t.name: (t.error_code, t.error_message) for t in resp.topics}


def create_partitions(conn: RawConnection, topic: str, count: int) -> tuple[int, str | None]:
    resp = conn.call(37, 3, CreatePartitionsRequest(timeout_ms=60_000, validate_only=False, topics=[
        cp.CreatePartitionsTopic(name=topic, count=count, assignments=None)]))
    r = resp.results[0]
    return r.error_code, r.error_message


def partition_dirs(data: Path, topic: str) -> int:
    return sum(1 for _ in data.glob(f"{topic}-*"))


@pytest.fixture
def started() -> Iterator[list[BrokerProcess]]:
    brokers: list[BrokerProcess] = []
    yield brokers
    for b in brokers:
        b.stop(timeout=120)


def test_request_and_broker_partition_bounds(tmp_path: Path, started: list[BrokerProcess]) -> None:
    """More than max.request.partitions (default 10,000, Kafka's fixed bound) in one request:
    POLICY_VIOLATION for every topic, nothing created -- before, the broker started creating
    them all. Past max.broker.partitions: POLICY_VIOLATION for that topic or growth."""
    data = tmp_path / "data"
    b = BrokerProcess(data, overrides=["auto.create.topics.enable=false", "max.broker.partitions=8"]).start()
    started.append(b)
    with RawConnection(b.port) as conn:
        answer = create_topics(conn, {"big-a": 5_001, "big-b": 5_000})
        assert {name: code for name, (code, _m) in answer.items()} == {
            "big-a": ErrorCode.POLICY_VIOLATION, "big-b": ErrorCode.POLICY_VIOLATION}
        assert "Excessively large number of partitions per request" in (answer["big-a"][1] or "")
        assert partition_dirs(data, "big-a") == partition_dirs(data, "big-b") == 0
        assert create_topics(conn, {"small": 3})["small"][0] == 0
        # the broker bound: 3 hosted + 6 > 8, also when only validating
        for validate_only in (True, False):
            code, message = create_topics(conn, {"more": 6}, validate_only)["more"]
            assert code == ErrorCode.POLICY_VIOLATION and "max.broker.partitions=8" in (message or "")
        assert partition_dirs(data, "more") == 0
        assert create_partitions(conn, "small", 10_004)[0] == ErrorCode.POLICY_VIOLATION  # per request
        assert create_partitions(conn, "small", 9)[0] == ErrorCode.POLICY_VIOLATION  # per broker
        assert create_partitions(conn, "small", 8) == (0, None)
        assert partition_dirs(data, "small") == 8


def test_auto_created_topics_are_bounded_like_created_ones(tmp_path: Path, started: list[BrokerProcess]) -> None:
    """A Metadata request that auto-creates a topic goes through the same per-broker bound as
    CreateTopics: POLICY_VIOLATION for that topic, nothing created."""
    data = tmp_path / "data"
    b = BrokerProcess(data, overrides=["num.partitions=3", "max.broker.partitions=4"]).start()
    started.append(b)
    with RawConnection(b.port) as conn:
        def auto_create(name: str) -> int:
            resp = conn.call(3, 12, MetadataRequest(topics=[mr.MetadataRequestTopic(name=name)],
                                                    allow_auto_topic_creation=True))
            return resp.topics[0].error_code

        assert auto_create("first") == 0 and partition_dirs(data, "first") == 3
        assert auto_create("second") == ErrorCode.POLICY_VIOLATION  # 3 + 3 > 4
        assert partition_dirs(data, "second") == 0


def test_a_request_that_would_exhaust_open_files_is_refused_and_the_broker_restarts(
    tmp_path: Path, started: list[BrokerProcess]
) -> None:
    """RLIMIT_NOFILE 2048/2048 and one request for 8,193 partitions (an open file each):
    POLICY_VIOLATION naming the limit before any file is created, the broker keeps serving and
    restarts. Before: the creation ran out of descriptors half way (EMFILE), the client's
    connection was dropped and the next start failed on the half-created logs."""
    data = tmp_path / "data"
    b = LimitedFilesBroker(data, 2048, 2048, overrides=["auto.create.topics.enable=false"]).start()
    started.append(b)
    with RawConnection(b.port) as conn:
        code, message = create_topics(conn, {"many": 8_193})["many"]
        assert code == ErrorCode.POLICY_VIOLATION, message
        assert "ulimit -n" in (message or "") and "2048" in (message or "")
        assert partition_dirs(data, "many") == 0
        assert create_topics(conn, {"few": 100})["few"][0] == 0
    assert b.stop() == 0
    b2 = LimitedFilesBroker(data, 2048, 2048, port=b.port, overrides=["auto.create.topics.enable=false"]).start()
    started.append(b2)
    with RawConnection(b2.port) as conn:
        assert produce(conn, "few", [b"still here"], partition=99) == (0, 0)


def fetch_partition(conn: RawConnection, topic: str, partition: int) -> Any:
    resp = conn.call(1, 12, FetchRequest(replica_id=-1, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        session_epoch=-1, topics=[fr.FetchTopic(topic=topic, partitions=[
            fr.FetchPartition(partition=partition, fetch_offset=0, partition_max_bytes=1 << 20)])]))
    return resp.responses[0].partitions[0]


def test_a_start_with_more_partitions_than_open_files_names_the_limit(
    tmp_path: Path, started: list[BrokerProcess]
) -> None:
    """Logs that need more descriptors than the hard limit allows: one line that names the limit
    and says to raise it, exit 1 -- not a bare 'Too many open files'."""
    data = tmp_path / "data"
    b = BrokerProcess(data, overrides=["auto.create.topics.enable=false"]).start()
    started.append(b)
    with RawConnection(b.port) as conn:
        assert create_topics(conn, {"wide": 400})["wide"][0] == 0
    assert b.stop() == 0
    low = LimitedFilesBroker(data, 256, 256, port=b.port, overrides=["auto.create.topics.enable=false"])
    with pytest.raises(RuntimeError):
        low.start()
    assert low.proc is not None and low.proc.returncode == 1
    fatal = [line for line in low.lines if "fatal error during broker startup" in line]
    assert len(fatal) == 1 and "raise it with ulimit -n" in fatal[0] and "256" in fatal[0], low.lines[-5:]
    assert not any("Traceback" in line for line in low.lines)
