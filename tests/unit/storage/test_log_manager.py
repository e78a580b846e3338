"""LogManager: log-dir lock, meta.properties, clean-shutdown marker, checkpoints in Kafka's
text format, recovery after an unclean stop, deletion of logs."""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path

import pytest

from broker.config import KafkaConfig
from protocol.records import Record, build_batch
from storage.config import LogConfig
from storage.log_manager import LogManager


def config(d: Path, broker_id: int = 0) -> KafkaConfig:
    return KafkaConfig({"log.dirs": str(d), "broker.id": str(broker_id)})


def fill(lm: LogManager, topic: str, partition: int, n: int) -> None:
    lg = lm.get_or_create_log(topic, partition, LogConfig(), uuid.UUID(int=7))
    for i in range(n):
        lg.append_as_leader(bytearray(build_batch([Record(0, 0, 0, None, f"v{i}".encode(), [])], base_timestamp=i)), 0)
        lg.update_high_watermark(lg.log_end_offset)


def test_lock_meta_properties_and_clean_shutdown(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    assert "broker.id=0" in (d / "meta.properties").read_text()
    with pytest.raises(RuntimeError, match="Failed to acquire lock"):
        LogManager.open(config(d))
    fill(lm, "orders", 0, 3)
    fill(lm, "orders", 1, 2)
    assert (d / "orders-0" / "partition.metadata").read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAABw"
    lm.shutdown()
    assert (d / ".kafka_cleanshutdown").exists()
    assert (d / "recovery-point-offset-checkpoint").read_text() == "0\n2\norders 0 3\norders 1 2\n"
    assert (d / "replication-offset-checkpoint").read_text() == "0\n2\norders 0 3\norders 1 2\n"

    with caplog.at_level(logging.INFO):
        lm2 = LogManager.open(config(d))
    assert "(clean shutdown)" in caplog.text
    assert not (d / ".kafka_cleanshutdown").exists()  # a crash from now on must be noticed
    assert lm2.get_log("orders", 0).log_end_offset == 3
    assert lm2.get_log("orders", 0).high_watermark == 3
    lm2.shutdown()


def test_other_broker_id_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    LogManager.open(config(d, 1)).shutdown()
    with pytest.raises(RuntimeError, match="doesn't match"):
        LogManager.open(config(d, 2))


def test_unclean_stop_recovers_and_truncates_torn_tail(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    fill(lm, "t", 0, 4)
    seg = d / "t-0" / "00000000000000000000.log"
    good = seg.stat().st_size
    lm.checkpoint_recovery_points()
    for fd in lm._locks.values():  # simulate a crash: nothing closed, no marker
        import os

        os.close(fd)
    with seg.open("ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x09\x00\x00\x01\x00garbage")
    with caplog.at_level(logging.INFO):
        lm2 = LogManager.open(config(d))
    assert "UNCLEAN" in caplog.text
    assert seg.stat().st_size == good
    assert lm2.get_log("t", 0).log_end_offset == 4
    lm2.shutdown()


def delete_dirs(d: Path, prefix: str) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith(prefix) and p.name.endswith("-delete"))


def test_delete_renames_at_once_and_removes_after_file_delete_delay(tmp_path: Path) -> None:
    """Kafka's asyncDelete + deleteLogs: the log is detached and its directory renamed
    `<tp>.<uuid>-delete` at once (all a StopReplica(delete=true) waits for); delete_logs removes
    it only once file.delete.delay.ms has passed since (issue #21: removing 1,000 logs' files
    before answering held the controller's next requests to the broker for 0.7 s)."""
    d = tmp_path / "logs"
    lm = LogManager.open(KafkaConfig({"log.dirs": str(d), "broker.id": "0", "log.segment.delete.delay.ms": "1000"}))
    try:
        fill(lm, "gone", 0, 2)
        fill(lm, "gone", 1, 2)
        fill(lm, "kept", 0, 2)
        lm.async_delete("gone", 0)
        t0 = int(time.time() * 1000)
        lm.async_delete("gone", 1)
        assert lm.get_log("gone", 0) is None and lm.get_log("gone", 1) is None
        assert not (d / "gone-0").exists() and not (d / "gone-1").exists()
        renamed = delete_dirs(d, "gone-")
        assert [n.split(".")[0] for n in renamed] == ["gone-0", "gone-1"]
        assert [p.name for p in lm.logs_to_be_deleted] == [n for n in renamed if n.startswith("gone-0")] + [
            n for n in renamed if n.startswith("gone-1")]
        # not due yet: kept, and the next run is due when the oldest one is
        wait = lm.delete_logs(now_ms=t0 + 500)
        assert delete_dirs(d, "gone-") == renamed and 0 < wait <= 500
        # due: both removed (in the order they were scheduled), the other log untouched
        assert lm.delete_logs(now_ms=t0 + 60_000) == 1000  # none left: run again after the delay
        assert delete_dirs(d, "gone-") == [] and lm.logs_to_be_deleted == []
        assert lm.get_log("kept", 0) is not None and (d / "kept-0").is_dir()
    finally:
        lm.shutdown()


def test_delete_dirs_left_at_startup_are_scheduled_and_never_loaded(tmp_path: Path) -> None:
    """A broker stopped before removing a deleted log's `-delete` directory: the next start does
    not load it (no log, no topic on disk for it) and removes it file.delete.delay.ms later, as
    Kafka's loadLogs schedules such directories."""
    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    fill(lm, "gone", 0, 2)
    fill(lm, "kept", 0, 2)
    renamed = lm.async_delete("gone", 0)
    assert renamed is not None and renamed.is_dir()
    lm.shutdown()  # before delete_logs ran: the renamed directory is left

    start = int(time.time() * 1000)
    again = LogManager.open(KafkaConfig({"log.dirs": str(d), "broker.id": "0", "log.segment.delete.delay.ms": "1000"}))
    try:
        assert again.get_log("gone", 0) is None and "gone" not in again.topics_on_disk()
        assert [t for t, _ in again] == [("kept", 0)]
        assert again.logs_to_be_deleted == [renamed] and renamed.is_dir()
        assert again.delete_logs(now_ms=start) > 0 and renamed.is_dir()
        again.delete_logs(now_ms=start + 60_000)
        assert not renamed.exists() and (d / "kept-0").is_dir()
    finally:
        again.shutdown()


def test_deleting_logs_flushes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A deleted topic's logs are closed without a flush or a producer snapshot (Kafka's asyncDelete
    only closes their handlers): a StopReplica(delete=true) of 1,000 partitions fsynced every one
    of them before answering, seconds that new topics' LeaderAndIsr queued behind (issue #21)."""
    import os

    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    try:
        for p in range(3):
            fill(lm, "gone", p, 2)
        synced: list[int] = []
        monkeypatch.setattr(os, "fsync", lambda fd: synced.append(fd))
        for p in range(3):
            lm.async_delete("gone", p)
        assert synced == []
        assert not any(p.name.startswith("gone-") and not p.name.endswith("-delete") for p in d.iterdir())
    finally:
        lm.shutdown()


def test_new_logs_fsync_partition_metadata_later_not_on_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Creating a log runs on the broker's event loop (topic creation): it writes
    partition.metadata without fsync, and the periodic flush task (an executor) makes it
    durable, as Kafka's record() / maybeFlush(). A log deleted before that is skipped."""
    import os

    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    synced: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real_fsync(fd))[1])
    try:
        for p in range(3):
            lm.get_or_create_log("t", p, LogConfig(), uuid.UUID(int=7))
        assert synced == []  # nothing fsynced on the creating thread
        for p in range(3):
            assert (d / f"t-{p}" / "partition.metadata").read_text() == (
                "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAABw")
        lm.async_delete("t", 2)
        assert lm.flush_dirty_logs() == 0
        assert len(synced) >= 2 * 2  # t-0, t-1: file and directory each; t-2 skipped
        synced.clear()
        assert lm.flush_partition_metadata() == 0  # written once only
        assert synced == []
        assert sorted(p.name for p in d.iterdir() if p.name.startswith("t-") and not p.name.endswith("-delete")) == [
            "t-0", "t-1"]
    finally:
        lm.shutdown()


def test_topics_on_disk_and_kraft_metadata_log(tmp_path: Path) -> None:
    """Logs copied in from another broker are reported with the topic ids their partition.metadata
    name (the broker adopts them from this); KRaft's `__cluster_metadata-0` is not a partition log
    and is left untouched; producer ids in the loaded producer state are reported."""
    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    fill(lm, "orders", 0, 2)
    fill(lm, "orders", 2, 1)
    lg = lm.get_or_create_log("bare", 0, LogConfig(), uuid.UUID(int=9))
    lg.append_as_leader(bytearray(build_batch([Record(0, 0, 0, None, b"x", [])], producer_id=41, producer_epoch=0,
                                              base_sequence=0)), 0)
    lm.shutdown()
    (d / "bare-0" / "partition.metadata").unlink()
    raft = d / "__cluster_metadata-0"
    raft.mkdir()
    (raft / "quorum-state").write_text("{}")

    lm = LogManager.open(config(d))
    try:
        assert lm.get_log("__cluster_metadata", 0) is None
        assert (raft / "quorum-state").read_text() == "{}"
        assert lm.topics_on_disk() == {
            "orders": ({0, 2}, {uuid.UUID(int=7)}, {0: 0, 2: 0}), "bare": ({0}, set(), {0: 0})}
        assert lm.max_producer_id() == 41
        # hosting a log that has no partition.metadata writes one (Kafka's assignTopicId)
        lm.get_or_create_log("bare", 0, LogConfig(), uuid.UUID(int=9))
        assert (d / "bare-0" / "partition.metadata").read_text() == "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAACQ"
    finally:
        lm.shutdown()


def test_stored_cluster_id_from_kafka_meta_properties(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    d.mkdir()
    (d / "meta.properties").write_text("#\nnode.id=0\ndirectory.id=bwP3gCTXSz4ak_luNV2d7g\nversion=1\n"
                                       "cluster.id=qrjrLECVSnawkn5Em_nHNQ\n")
    lm = LogManager.open(config(d))
    try:
        assert lm.stored_cluster_id == "qrjrLECVSnawkn5Em_nHNQ"
    finally:
        lm.shutdown()
    fresh = LogManager.open(config(tmp_path / "fresh"))
    try:
        assert fresh.stored_cluster_id is None
    finally:
        fresh.shutdown()


def test_delete_dir_names_are_capped_at_255_bytes_as_kafkas() -> None:
    """UnifiedLog.logDeleteDirName: `<topic>-<partition>.<uuid>-delete`, the topic cut so that
    the whole name fits a file name (a 249-character topic cannot take the full suffix)."""
    from storage.log_manager import _DELETE_DIR, log_delete_dir_name

    short = log_delete_dir_name("orders", 3)
    assert short.startswith("orders-3.") and short.endswith("-delete") and len(short) == 48
    for topic, partition in (("t" * 249, 0), ("t" * 249, 99999), ("x" * 200, 12)):
        name = log_delete_dir_name(topic, partition)
        assert len(name.encode()) <= 255 and _DELETE_DIR.match(name), name
        assert name.endswith(f"-{partition}.{name.split('.')[-1]}")
    assert len(log_delete_dir_name("t" * 249, 0)) == 255
    assert log_delete_dir_name("a", 0) != log_delete_dir_name("a", 0)


def test_a_249_character_topic_is_deleted(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    lm = LogManager.open(config(d))
    topic = "t" * 249
    fill(lm, topic, 0, 2)
    lm.async_delete(topic, 0)
    assert lm.get_log(topic, 0) is None
    lm.delete_logs(now_ms=int(time.time() * 1000) + lm.default_config.file_delete_delay_ms)
    assert not any(p.name.startswith(topic[:200]) for p in d.iterdir())
    lm.shutdown()


def test_another_brokers_log_dir_inside_this_one_is_not_loaded_as_a_partition(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Issue #21: config/server-zk-1.properties once put broker 1's log dir at ./data/zk-broker-1,
    inside the single node's ./data. `zk-broker-1` parses as partition 1 of topic `zk-broker`, but
    it holds meta.properties (and partitions of its own): it is skipped with a warning, as is a
    directory whose name is not <topic>-<partition>, and neither is written to."""
    d = tmp_path / "data"
    other = LogManager.open(config(d / "zk-broker-1", broker_id=1))
    fill(other, "orders", 0, 2)
    other.shutdown()
    (d / "zk-broker-2").mkdir()  # another broker's, locked and never shut down cleanly
    (d / "zk-broker-2" / ".lock").touch()
    (d / "not a partition").mkdir()
    (d / "lost+found").mkdir()
    before = {p: p.stat().st_mtime_ns for p in (d / "zk-broker-1").rglob("*")}

    with caplog.at_level(logging.WARNING, logger="odradek.storage.log_manager"):
        lm = LogManager.open(config(d))
    try:
        assert lm.logs == {}
        assert lm.topics_on_disk() == {}
        warned = caplog.text
        assert f"Skipping {d / 'zk-broker-1'}: it holds meta.properties" in warned
        assert "another broker's log dir" in warned
        assert f"Skipping {d / 'zk-broker-2'}: it holds .lock" in warned
        assert f"Skipping {d / 'not a partition'}: its name is not <topic>-<partition>" in warned
        assert f"Skipping {d / 'lost+found'}: its name is not <topic>-<partition>" in warned
    finally:
        lm.shutdown()
    assert {p: p.stat().st_mtime_ns for p in (d / "zk-broker-1").rglob("*")} == before
    assert sorted(p.name for p in (d / "zk-broker-1").iterdir() if p.is_dir()) == ["orders-0"]
    again = LogManager.open(config(d / "zk-broker-1", broker_id=1))  # still broker 1's, intact
    try:
        assert again.get_log("orders", 0).log_end_offset == 2
    finally:
        again.shutdown()
